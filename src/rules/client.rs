//! Which client a typed Redis command is called on, as far as the code shows: a fix that
//! writes redis-rs methods (`Script::invoke`, `del_ex`) is only offered where the receiver is a
//! redis-rs connection, never on another client that happens to have a `del` or `expire`.
//!
//! redis-rs's typed methods need one of its command traits in scope (`use redis::Commands`,
//! `AsyncCommands`, `TypedCommands`, `AsyncTypedCommands`, `redis::prelude::*`, `redis::*`),
//! and a receiver that is a parameter must have a type the command traits are implemented for
//! (a redis type, a generic or `impl` type). A redis-rs pipeline has them as its own methods.

use super::leftovers::lex;
use crate::diagnostic::Edit;
use crate::locks::TraceOp;

const TRAITS: &[&str] = &[
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
    if matches!(o.op.channel, crate::ir::Channel::Pipeline { .. }) && text.contains("redis::") {
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

/// Methods no redis-rs command trait has: a file whose other method calls are all among these
/// needs no command trait once the fixed call is gone.
const NOT_COMMANDS: &[&str] = &[
    "arg",
    "key",
    "query",
    "query_async",
    "invoke",
    "invoke_async",
    "prepare_invoke",
    "cmd",
    "to_string",
    "to_owned",
    "clone",
    "into",
    "unwrap",
    "unwrap_or",
    "unwrap_or_default",
    "expect",
    "is_some",
    "is_none",
    "is_ok",
    "is_err",
    "as_deref",
    "as_ref",
    "as_str",
    "as_bytes",
    "as_secs",
    "as_millis",
    "map",
    "map_err",
    "ok",
    "ok_or",
    "and_then",
    "abort",
    "await",
    "iter",
    "collect",
    "push",
    "parse",
    "len",
    "is_empty",
    "contains",
    "format",
    "new_v4",
    "from_secs",
    "from_millis",
    "elapsed",
    "now",
    "cancel",
    "spawn",
];

/// The edit removing the command trait import (`use redis::AsyncCommands;`, or its name in a
/// `use redis::{..}` list) that the fix leaves unused: the fixed call at `replaced` was the
/// file's only use of the trait, the trait is not named anywhere else, and every other method
/// called in the file is one no command trait has.
pub fn unused_trait_import(o: &TraceOp, replaced: crate::source::Span) -> Option<Edit> {
    let (removal, mentions) = o
        .file
        .trait_import
        .get_or_init(|| trait_import(&o.file.text))
        .as_ref()?;
    let from = mentions.partition_point(|&m| m < replaced.start);
    let to = mentions.partition_point(|&m| m < replaced.end);
    (to - from == mentions.len()).then(|| super::fixes::edit(&o.file, *removal, ""))
}

/// The span removing the file's one redis-rs command trait import, and the starts of the
/// tokens that may still need it: the trait's name outside `use` items, and calls of methods
/// that are not known to be outside the command traits.
fn trait_import(text: &str) -> Option<(crate::source::Span, Vec<usize>)> {
    let toks = lex(text, 0);
    // the `use redis::..;` items naming a command trait
    let mut uses = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i].text == "use" {
            let end = (i..toks.len()).find(|&k| toks[k].text == ";")?;
            uses.push((i, end));
            i = end;
        }
        i += 1;
    }
    let in_use = |k: usize| uses.iter().any(|&(s, e)| s <= k && k <= e);
    let mut found: Option<(usize, usize, usize)> = None;
    for &(s, e) in &uses {
        let item = &toks[s + 1..e];
        if item
            .iter()
            .find(|t| t.text != ":")
            .is_none_or(|t| t.text != "redis")
        {
            continue;
        }
        for (k, t) in item.iter().enumerate() {
            if TRAITS[..4].contains(&t.text) {
                if found.is_some() {
                    return None;
                }
                found = Some((s, e, s + 1 + k));
            }
        }
    }
    let (s, e, at) = found?;
    let name = toks[at].text;
    let mut mentions = Vec::new();
    for (k, t) in toks.iter().enumerate() {
        if in_use(k) {
            continue;
        }
        if t.text == name {
            mentions.push(t.span.start);
            continue;
        }
        // `.method(` / `.method::<`
        let method = k > 0
            && toks[k - 1].text == "."
            && matches!(t.kind, ra_ap_rustc_lexer::TokenKind::Ident)
            && toks
                .get(k + 1)
                .is_some_and(|n| n.text == "(" || n.text == ":");
        if method && !NOT_COMMANDS.contains(&t.text) {
            mentions.push(t.span.start);
        }
    }
    let item = &toks[s..=e];
    let names = item
        .iter()
        .filter(|t| matches!(t.kind, ra_ap_rustc_lexer::TokenKind::Ident))
        .count();
    if item.iter().any(|t| t.text == "{") && names > 3 {
        // `use redis::{A, X, B};`: the name and one comma go
        let next = toks.get(at + 1).filter(|t| t.text == ",");
        let span = match next {
            Some(comma) => {
                let after = toks.get(at + 2).map_or(comma.span.end, |t| t.span.start);
                crate::source::Span::new(toks[at].span.start, after)
            }
            None => {
                let comma = toks.get(at - 1).filter(|t| t.text == ",")?;
                crate::source::Span::new(comma.span.start, toks[at].span.end)
            }
        };
        return Some((span, mentions));
    }
    // `use redis::X;` / `use redis::{X};`: `use`, `redis` and the trait
    if names != 3 {
        return None;
    }
    // the whole `use` line, and a blank line it leaves doubled
    let start = toks[s].span.start;
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    if !text[line_start..start].trim().is_empty() {
        return None;
    }
    let end = toks[e].span.end;
    let mut line_end = text[end..].find('\n').map_or(text.len(), |i| end + i + 1);
    if !text[end..line_end].trim().is_empty() {
        return None;
    }
    let blank_before = line_start == 0 || text[..line_start].ends_with("\n\n");
    if blank_before && text[line_end..].starts_with('\n') {
        line_end += 1;
    }
    Some((crate::source::Span::new(line_start, line_end), mentions))
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
