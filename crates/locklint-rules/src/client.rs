//! Which client a typed Redis command is called on, as far as the code shows: a fix that
//! writes redis-rs methods (`Script::invoke`, `del_ex`) is only offered where the receiver is a
//! redis-rs connection, never on another client that happens to have a `del` or `expire`.
//!
//! redis-rs's typed methods need one of its command traits in scope (`use redis::Commands`,
//! `AsyncCommands`, `TypedCommands`, `AsyncTypedCommands`, `redis::prelude::*`, `redis::*`),
//! and a receiver that is a parameter must have a type the command traits are implemented for
//! (a redis type, a generic or `impl` type). A redis-rs pipeline has them as its own methods.

use super::leftovers::lex;
use locklint_project::TraceOp;

/// The redis-rs command traits (the first four) and the imports that bring them all.
pub(super) const TRAITS: &[&str] = &[
    "Commands",
    "AsyncCommands",
    "TypedCommands",
    "AsyncTypedCommands",
    "prelude",
    "*",
];

/// Whether the file brings redis-rs's command traits into scope.
fn redis_traits_in_scope(text: &str) -> bool {
    let toks = lex(text, 0);
    let mut i = 0;
    while i < toks.len() {
        if toks[i].text == "use" {
            let end = (i..toks.len())
                .find(|&k| toks[k].text == ";")
                .unwrap_or(toks.len());
            let item = &toks[i + 1..end];
            let from_redis = item
                .iter()
                .find(|t| t.text != ":")
                .is_some_and(|t| t.text == "redis");
            if from_redis && item.iter().any(|t| TRAITS.contains(&t.text)) {
                return true;
            }
            i = end;
        }
        i += 1;
    }
    false
}

/// The declared type of parameter `name` in a function's signature, when it has one.
fn param_type<'t>(signature: &'t str, name: &str) -> Option<&'t str> {
    let toks = lex(signature, 0);
    let at = toks
        .windows(2)
        .position(|w| w[0].text == name && w[1].text == ":")?;
    let start = toks[at + 1].span.end;
    let mut depth = 0i32;
    for t in &toks[at + 2..] {
        match t.text {
            "(" | "[" | "<" => depth += 1,
            ")" | "]" | ">" if depth > 0 => depth -= 1,
            "," | ")" | "{" if depth == 0 => {
                return signature.get(start..t.span.start).map(str::trim)
            }
            _ => {}
        }
    }
    None
}

/// Whether a parameter's type can be a redis-rs connection.
fn redis_type(ty: &str) -> bool {
    let bare = ty.trim_start_matches('&').trim_start_matches("mut ").trim();
    ty.contains("redis")
        || ty.contains("Connection")
        || ty.contains("Commands")
        || bare.starts_with("impl ")
        || bare.starts_with("dyn ")
        || (bare.len() <= 2 && bare.chars().all(|c| c.is_ascii_uppercase()))
}

/// Whether the typed command `o` is called on a redis-rs connection.
pub fn is_redis_rs(o: &TraceOp) -> bool {
    let text = &o.file.text;
    // a redis-rs pipeline (`redis::pipe()`) has the commands as its own methods
    if matches!(o.op.channel, locklint_ir::Channel::Pipeline { .. }) && text.contains("redis::") {
        return true;
    }
    if !*o
        .file
        .redis_traits
        .get_or_init(|| redis_traits_in_scope(text))
    {
        return false;
    }
    // the receiver's root: `con` of `con.del(..)`, `self` of `self.con.del(..)`
    let before = text.get(o.func.span.start..o.op.span.start).unwrap_or("");
    let Some(receiver) = before.trim_end().strip_suffix('.') else {
        return true;
    };
    let chain: String = receiver
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '&' | '*' | ' '))
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let root = chain
        .split_whitespace()
        .last()
        .unwrap_or("")
        .trim_start_matches(['&', '*'])
        .split('.')
        .next()
        .unwrap_or("");
    if root.is_empty() || root == "self" {
        return true;
    }
    let body = before.find('{').unwrap_or(before.len());
    match param_type(&before[..body], root) {
        Some(ty) => redis_type(ty),
        None => true,
    }
}

/// Whether `name` is a parameter of the operation's function declared as a `&mut` reference.
pub fn is_mut_ref_param(o: &TraceOp, name: &str) -> bool {
    let text = &o.file.text;
    let before = text.get(o.func.span.start..o.op.span.start).unwrap_or("");
    let body = before.find('{').unwrap_or(before.len());
    param_type(&before[..body], name)
        .is_some_and(|ty| ty.starts_with("&mut") || ty.starts_with("& mut"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_traits_come_from_redis_imports() {
        assert!(redis_traits_in_scope("use redis::AsyncCommands;"));
        assert!(redis_traits_in_scope("use redis::{Client, Commands};"));
        assert!(redis_traits_in_scope("use ::redis::prelude::*;"));
        assert!(!redis_traits_in_scope(
            "use cache::Commands;\nuse redis::Client;"
        ));
        assert!(!redis_traits_in_scope("fn f() {}"));
    }

    #[test]
    fn parameter_types_are_read_from_the_signature() {
        let sig = "pub async fn f(cache: &CacheClient, con: &mut redis::aio::MultiplexedConnection, m: HashMap<String, u8>) -> R";
        assert_eq!(param_type(sig, "cache"), Some("&CacheClient"));
        assert_eq!(
            param_type(sig, "con"),
            Some("&mut redis::aio::MultiplexedConnection")
        );
        assert_eq!(param_type(sig, "m"), Some("HashMap<String, u8>"));
        assert!(!redis_type("&CacheClient"));
        assert!(redis_type("&mut redis::aio::MultiplexedConnection"));
        assert!(redis_type("&mut C"));
        assert!(redis_type("&mut impl redis::aio::ConnectionLike"));
    }
}
