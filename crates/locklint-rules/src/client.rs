//! Which client a typed Redis command is called on, as far as the code shows: a fix that
//! writes redis-rs methods (`Script::invoke`, `del_ex`) is only offered where the receiver is a
//! redis-rs connection, never on another client that happens to have a `del` or `expire`.
//!
//! redis-rs's typed methods need one of its command traits in scope (`use redis::Commands`,
//! `AsyncCommands`, `TypedCommands`, `AsyncTypedCommands`, `redis::prelude::*`, `redis::*`),
//! and a receiver that is a parameter must have a type the command traits are implemented for
//! (a redis type, a generic or `impl` type). A redis-rs pipeline has them as its own methods.

use locklint_ir::names::RustNames;
use locklint_project::TraceOp;

/// Whether a parameter's type can be a redis-rs connection.
fn redis_type(ty: &str) -> bool {
    let bare = ty
        .trim_start_matches('&')
        .trim_start()
        .trim_start_matches("mut ")
        .trim();
    ty.contains("redis")
        || ty.contains("Connection")
        || ty.contains("Commands")
        || bare.starts_with("impl ")
        || bare.starts_with("dyn ")
        || (bare.len() <= 2 && bare.chars().all(|c| c.is_ascii_uppercase()))
}

fn names<'o>(o: &'o TraceOp) -> &'o RustNames {
    locklint_frontend::rust::names::of_file(&o.file)
}

/// Whether the typed command `o` is called on a redis-rs connection.
pub fn is_redis_rs(o: &TraceOp) -> bool {
    // a redis-rs pipeline (`redis::pipe()`) has the commands as its own methods
    if matches!(o.op.channel, locklint_ir::Channel::Pipeline { .. })
        && names(o).mentions_redis_path()
    {
        return true;
    }
    if !names(o).imports_redis_traits() {
        return false;
    }
    // the receiver's root: `con` of `con.del(..)`, `self` of `self.con.del(..)`
    match o.op.receiver_root.as_deref() {
        None | Some("self") => true,
        Some(root) => o.func.param_type(root).is_none_or(redis_type),
    }
}

/// Whether `name` is a parameter of the operation's function declared as a `&mut` reference.
pub fn is_mut_ref_param(o: &TraceOp, name: &str) -> bool {
    o.func.param_type(name).is_some_and(|ty| {
        ty.strip_prefix('&')
            .is_some_and(|rest| rest.trim_start().starts_with("mut "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_connection_types() {
        assert!(!redis_type("&CacheClient"));
        assert!(redis_type("&mut redis::aio::MultiplexedConnection"));
        assert!(redis_type("&mut C"));
        assert!(redis_type("& mut C"));
        assert!(redis_type("&mut impl redis::aio::ConnectionLike"));
        assert!(!redis_type("HashMap<String, u8>"));
    }
}
