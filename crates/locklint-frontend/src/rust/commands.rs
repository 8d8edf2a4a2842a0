//! Recognition of Redis commands: redis-rs typed methods, `redis::cmd` argument lists and
//! fred's methods, reduced to an [`OpKind`] plus the positions of key and value.

use locklint_ir::{Expiry, OpKind};
use quote::ToTokens;
use std::collections::HashSet;

/// Upper-cased identifiers appearing anywhere in an expression's tokens
/// (`ExistenceCheck::NX`, `SetExpiry::PX(..)`, `ValueComparison::ifeq(..)`).
pub fn option_words(
    tokens: proc_macro2::TokenStream,
    bodies: &super::bodies::Bodies,
) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut stack = vec![tokens];
    while let Some(ts) = stack.pop() {
        for tt in ts {
            match tt {
                proc_macro2::TokenTree::Ident(i) => {
                    out.insert(i.to_string().to_ascii_uppercase());
                }
                proc_macro2::TokenTree::Group(g) => stack.push(bodies.stream_of(&g)),
                _ => {}
            }
        }
    }
    out
}

pub fn expr_words(e: &syn::Expr, bodies: &super::bodies::Bodies) -> HashSet<String> {
    option_words(e.to_token_stream(), bodies)
}

fn expiry_from_words(w: &HashSet<String>) -> Option<Expiry> {
    if w.contains("PXAT") {
        Some(Expiry::PxAt)
    } else if w.contains("EXAT") {
        Some(Expiry::ExAt)
    } else if w.contains("PX") {
        Some(Expiry::Px)
    } else if w.contains("EX") {
        Some(Expiry::Ex)
    } else if w.contains("KEEPTTL") {
        Some(Expiry::KeepTtl)
    } else {
        None
    }
}

fn write_from_words(w: &HashSet<String>) -> OpKind {
    OpKind::Write {
        nx: w.contains("NX"),
        xx: w.contains("XX"),
        expiry: expiry_from_words(w),
        compare: w.contains("IFEQ") || w.contains("IFDEQ"),
    }
}

/// A recognised typed method call: what it does, and where its key and value are among the arguments.
#[derive(Debug, Clone)]
pub struct Typed {
    pub kind: OpKind,
    pub command: String,
    pub key_arg: usize,
    pub value_arg: Option<usize>,
}

/// Options resolved for an argument: the argument itself or what a local binding holds.
pub trait OptionSource {
    fn words(&self, arg: &syn::Expr) -> HashSet<String>;
}

/// Method names that are Redis commands (redis-rs `Commands`/`AsyncCommands`, fred).
pub fn is_command_method(name: &str) -> bool {
    matches!(
        name,
        "get"
            | "exists"
            | "set"
            | "set_ex"
            | "pset_ex"
            | "set_nx"
            | "set_options"
            | "expire"
            | "pexpire"
            | "expire_at"
            | "pexpire_at"
            | "get_ex"
            | "getex"
            | "del"
            | "unlink"
            | "del_ex"
            | "get_del"
            | "getdel"
            | "incr"
            | "incr_by"
    )
}

/// Recognise a typed command method by name and arity.
pub fn typed(name: &str, args: &[syn::Expr], opts: &dyn OptionSource) -> Option<Typed> {
    let n = args.len();
    let t = |kind: OpKind, command: &str, value_arg: Option<usize>| {
        Some(Typed {
            kind,
            command: command.to_string(),
            key_arg: 0,
            value_arg,
        })
    };
    let plain = OpKind::Write {
        nx: false,
        xx: false,
        expiry: None,
        compare: false,
    };
    match (name, n) {
        ("get", 1) | ("exists", 1) => t(OpKind::Read, name, None),
        ("set", 2) => t(plain, name, Some(1)),
        // fred: set(key, value, Option<Expiration>, Option<SetOptions>, get)
        ("set", 5) => {
            let mut w = opts.words(&args[2]);
            w.extend(opts.words(&args[3]));
            w.remove("NONE");
            t(write_from_words(&w), name, Some(1))
        }
        ("set_ex", 3) => t(
            OpKind::Write {
                nx: false,
                xx: false,
                expiry: Some(Expiry::Ex),
                compare: false,
            },
            name,
            Some(1),
        ),
        ("pset_ex", 3) => t(
            OpKind::Write {
                nx: false,
                xx: false,
                expiry: Some(Expiry::Px),
                compare: false,
            },
            name,
            Some(1),
        ),
        ("set_nx", 2) => t(
            OpKind::Write {
                nx: true,
                xx: false,
                expiry: None,
                compare: false,
            },
            name,
            Some(1),
        ),
        ("set_options", 3) => {
            let w = opts.words(&args[2]);
            if w.is_empty() {
                return None;
            }
            t(write_from_words(&w), name, Some(1))
        }
        ("expire" | "pexpire" | "expire_at" | "pexpire_at", 2 | 3) => t(OpKind::Expire, name, None),
        ("get_ex" | "getex", 2) => {
            let w = opts.words(&args[1]);
            if w.contains("PERSIST") {
                return None;
            }
            t(OpKind::Expire, name, None)
        }
        ("del" | "unlink" | "get_del" | "getdel", 1) => t(OpKind::Delete, name, None),
        ("del_ex", 2) => {
            let w = opts.words(&args[1]);
            if w.contains("IFEQ") || w.contains("IFDEQ") {
                t(OpKind::CompareDelete, name, None)
            } else {
                t(OpKind::Delete, name, None)
            }
        }
        ("incr" | "incr_by", 1 | 2) => t(OpKind::Incr, name, None),
        _ => None,
    }
}

/// A method whose name describes a Redis command on its first argument, as wrapper crates of
/// services name them (`delete_key(&k)`, `get_key(&k)`, `set_key_if_not_exists_with_expiry(&k,
/// v, Some(ttl))`, `set_expiry(&k, secs)`); `None` for any other name or arity. Only names that
/// say the whole command: a `set_key_if_not_exists` without an expiry in its name may add one
/// the caller cannot see, and is not read.
pub fn described(name: &str, n: usize) -> Option<Typed> {
    let t = |kind: OpKind, value_arg: Option<usize>| {
        Some(Typed {
            kind,
            command: name.to_string(),
            key_arg: 0,
            value_arg,
        })
    };
    match (name, n) {
        (
            "delete_key"
            | "delete_keys"
            | "delete_multiple_keys"
            | "del_key"
            | "remove_key"
            | "unlink_key",
            1,
        ) => t(OpKind::Delete, None),
        ("get_key" | "get_key_value", 1) => t(OpKind::Read, None),
        ("set_key_expiry" | "set_expiry" | "set_key_ttl" | "expire_key", 2) => {
            t(OpKind::Expire, None)
        }
        (
            "set_key_if_not_exists_with_expiry"
            | "set_if_not_exists_with_expiry"
            | "set_key_nx_with_expiry"
            | "set_nx_with_expiry"
            | "set_nx_with_ttl",
            3,
        ) => t(
            OpKind::Write {
                nx: true,
                xx: false,
                expiry: Some(Expiry::Ex),
                compare: false,
            },
            Some(1),
        ),
        _ => None,
    }
}

/// An argument of a `redis::cmd(..)` command: literal words are options.
#[derive(Debug, Clone)]
pub enum CmdArg {
    Word(String),
    Other,
}

/// Recognise a `redis::cmd("NAME")` command from its name and arguments (after the name).
/// Returns the kind and the argument indexes of key and value.
pub fn builder(name: &str, args: &[CmdArg]) -> Option<(OpKind, usize, Option<usize>)> {
    let upper = name.to_ascii_uppercase();
    let words: HashSet<String> = args
        .iter()
        .skip(1)
        .filter_map(|a| match a {
            CmdArg::Word(w) => Some(w.to_ascii_uppercase()),
            CmdArg::Other => None,
        })
        .collect();
    let kind = match upper.as_str() {
        "GET" | "EXISTS" => OpKind::Read,
        "SET" => {
            // options come after key and value
            let opts: HashSet<String> = args
                .iter()
                .skip(2)
                .filter_map(|a| match a {
                    CmdArg::Word(w) => Some(w.to_ascii_uppercase()),
                    CmdArg::Other => None,
                })
                .collect();
            return Some((write_from_words(&opts), 0, Some(1)));
        }
        "SETNX" => {
            return Some((
                OpKind::Write {
                    nx: true,
                    xx: false,
                    expiry: None,
                    compare: false,
                },
                0,
                Some(1),
            ))
        }
        "SETEX" | "PSETEX" => {
            return Some((
                OpKind::Write {
                    nx: false,
                    xx: false,
                    expiry: Some(if upper == "SETEX" {
                        Expiry::Ex
                    } else {
                        Expiry::Px
                    }),
                    compare: false,
                },
                0,
                Some(2),
            ))
        }
        "GETSET" => {
            return Some((
                OpKind::Write {
                    nx: false,
                    xx: false,
                    expiry: None,
                    compare: false,
                },
                0,
                Some(1),
            ))
        }
        "EXPIRE" | "PEXPIRE" | "EXPIREAT" | "PEXPIREAT" => OpKind::Expire,
        "GETEX" if !words.contains("PERSIST") && !words.is_empty() => OpKind::Expire,
        "DEL" | "UNLINK" | "GETDEL" => OpKind::Delete,
        "DELEX" => {
            if words.contains("IFEQ") || words.contains("IFDEQ") {
                OpKind::CompareDelete
            } else {
                OpKind::Delete
            }
        }
        "INCR" | "INCRBY" => OpKind::Incr,
        "WATCH" => OpKind::Watch,
        _ => return None,
    };
    Some((kind, 0, None))
}

/// Commands of `redis::cmd` whose every argument is a key (`DEL k1 k2`): on a Redis Cluster,
/// all of them must hash to one slot.
pub fn takes_many_keys(name: &str) -> bool {
    ["DEL", "UNLINK", "EXISTS", "TOUCH", "WATCH"]
        .iter()
        .any(|c| name.eq_ignore_ascii_case(c))
}

/// `EVAL`, `EVALSHA` and their read-only forms: a script run on the keys that follow `numkeys`.
pub fn is_eval(name: &str) -> bool {
    ["EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO"]
        .iter()
        .any(|c| name.eq_ignore_ascii_case(c))
}

/// Methods that end a command builder or pipeline by sending it.
pub fn is_exec(name: &str) -> bool {
    matches!(
        name,
        "query" | "query_async" | "exec" | "exec_async" | "query_iter" | "query_iter_async"
    )
}

/// Methods that pass a reply through unchanged (`?`-like adapters).
pub fn is_passthrough(name: &str) -> bool {
    matches!(
        name,
        "unwrap"
            | "expect"
            | "unwrap_or"
            | "unwrap_or_default"
            | "unwrap_or_else"
            | "map_err"
            | "context"
            | "with_context"
            | "wrap_err"
            | "wrap_err_with"
            | "ok"
            | "into"
            | "await"
    )
}

/// Methods that look only at success or failure, discarding the reply itself.
pub fn discards_value(name: &str) -> bool {
    matches!(name, "is_ok" | "is_err")
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Direct;
    impl OptionSource for Direct {
        fn words(&self, arg: &syn::Expr) -> HashSet<String> {
            expr_words(arg, &crate::rust::bodies::Bodies::default())
        }
    }

    fn args(src: &str) -> Vec<syn::Expr> {
        let call: syn::ExprCall = syn::parse_str(&format!("f({src})")).unwrap();
        call.args.into_iter().collect()
    }

    #[test]
    fn set_options_reads_nx_and_expiry() {
        let a = args(
            "k, v, SetOptions::default().conditional_set(ExistenceCheck::NX).with_expiration(SetExpiry::PX(30000))",
        );
        let t = typed("set_options", &a, &Direct).unwrap();
        assert_eq!(
            t.kind,
            OpKind::Write {
                nx: true,
                xx: false,
                expiry: Some(Expiry::Px),
                compare: false
            }
        );
    }

    #[test]
    fn fred_set_reads_expiration_and_options() {
        let a = args("k, v, None, Some(SetOptions::NX), false");
        let t = typed("set", &a, &Direct).unwrap();
        assert!(t.kind.is_acquire());
        assert!(matches!(t.kind, OpKind::Write { expiry: None, .. }));
        let a = args("k, v, Some(Expiration::EX(30)), Some(SetOptions::NX), false");
        let t = typed("set", &a, &Direct).unwrap();
        assert!(matches!(
            t.kind,
            OpKind::Write {
                nx: true,
                expiry: Some(Expiry::Ex),
                ..
            }
        ));
    }

    #[test]
    fn builder_set_options_follow_key_and_value() {
        let w = |s: &str| CmdArg::Word(s.to_string());
        let (k, _, _) = builder("set", &[CmdArg::Other, w("nx"), w("PX"), CmdArg::Other]).unwrap();
        // "nx" in the value position is the value, not an option
        assert!(!k.is_acquire());
        let (k, _, _) = builder(
            "SET",
            &[
                CmdArg::Other,
                CmdArg::Other,
                w("nx"),
                w("PX"),
                CmdArg::Other,
            ],
        )
        .unwrap();
        assert!(matches!(
            k,
            OpKind::Write {
                nx: true,
                expiry: Some(Expiry::Px),
                ..
            }
        ));
        assert_eq!(
            builder("DELEX", &[CmdArg::Other, w("IFEQ"), CmdArg::Other])
                .unwrap()
                .0,
            OpKind::CompareDelete
        );
        assert!(builder("HSET", &[]).is_none());
    }

    #[test]
    fn arity_distinguishes_commands_from_other_apis() {
        assert!(typed("get", &args("a, b"), &Direct).is_none());
        assert!(typed("set", &args("a"), &Direct).is_none());
    }
}
