//! Building fixes for the Redis rules: text edits in the code's own style (typed redis-rs,
//! `redis::cmd` builders, fred), with an applicability that drops when the code is unusual.
//! The building blocks: `redis_style` (commands rewritten in the client's style),
//! `script_call` (compare-and-delete / compare-and-expire as a script call), `layout`
//! (re-printing what would pass 100 columns). Each rule's own recipe sits in the rule's file.

use locklint_ir::diagnostic::{Applicability, Edit, Fix, Location};
use locklint_ir::source::{FileRef, Span};
use locklint_ir::ResultUse;
use locklint_project::TraceOp;

mod layout;
mod layout_memo;
mod redis_style;
mod script_call;

pub(crate) use layout::reflow;
pub(crate) use redis_style::{
    acquire_with_expiry, bound_between, chain_link_removal, command_args, expire_ttl,
    statement_removal, widen_to_empty_if,
};
pub(crate) use script_call::{
    cmd_lead, guarded_fix, holder_token, is_fred, is_token_name, is_typed_method, release_script,
    renew_script, script_call,
};

/// The less certain of two applicabilities.
pub fn worst(a: Applicability, b: Applicability) -> Applicability {
    fn rank(a: Applicability) -> u8 {
        match a {
            Applicability::Safe => 0,
            Applicability::Unsafe => 1,
            Applicability::DisplayOnly => 2,
        }
    }
    if rank(a) >= rank(b) {
        a
    } else {
        b
    }
}

/// A fix from edits; `None` when there are none.
pub fn fix(message: String, applicability: Applicability, edits: Vec<Edit>) -> Option<Fix> {
    (!edits.is_empty()).then_some(Fix {
        message,
        applicability,
        edits,
    })
}

pub fn edit(file: &FileRef, span: Span, replacement: impl Into<String>) -> Edit {
    Edit {
        location: Location::new(file.clone(), span),
        replacement: replacement.into(),
    }
}

pub(crate) fn snippet(file: &FileRef, span: Span) -> &str {
    file.text.get(span.start..span.end).unwrap_or("")
}

pub use locklint_project::ttl::Ttl;

/// Whether the command's reply type changes when SETNX becomes `SET .. NX`: integer `1`/`0`
/// becomes `OK`/nil. What the caller reads it into decides whether that still works.
fn reply_applicability(o: &TraceOp) -> Applicability {
    if let ResultUse::Ignored(_) = o.result {
        return Applicability::Safe;
    }
    let Some(stmt) = o.op.stmt else {
        return Applicability::Unsafe;
    };
    let Ok(syn::Stmt::Local(l)) = syn::parse_str::<syn::Stmt>(snippet(&o.file, stmt)) else {
        return Applicability::Unsafe;
    };
    let syn::Pat::Type(t) = &l.pat else {
        return Applicability::Unsafe;
    };
    let ty = quote::ToTokens::to_token_stream(&t.ty)
        .to_string()
        .replace(' ', "");
    if ty == "bool" || ty == "()" || ty.starts_with("Option<") {
        Applicability::Safe
    } else if matches!(
        ty.as_str(),
        "i8" | "i16" | "i32" | "i64" | "isize" | "u8" | "u16" | "u32" | "u64" | "usize"
    ) {
        Applicability::DisplayOnly
    } else {
        Applicability::Unsafe
    }
}
