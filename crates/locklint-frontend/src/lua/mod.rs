//! The Lua front-end: Redis scripts from `.lua` files and from script text embedded in Rust.
//!
//! Each script is parsed with `full_moon` (Lua 5.1, the dialect Redis runs) and walked by
//! [`guard`]: every `DEL`/`UNLINK` and expiry change made through `redis.call`/`redis.pcall`
//! is recorded with its key and whether an ownership check of that key dominates it. Positions
//! are mapped through the embedded text's [`locklint_ir::TextMap`] to the exact place in the
//! Rust string literal or `.lua` file.

pub mod guard;
pub mod lex;

use locklint_ir::lua::Script;
use locklint_ir::source::Span;
use locklint_ir::vocabulary;
use locklint_ir::Origin;
use locklint_ir::{FileIr, Language, Limit, ParseProblem};

/// Parse the Lua texts of a file (`ir.embedded` with [`locklint_ir::Language::Lua`]).
pub fn analyze(ir: &mut FileIr) {
    for (idx, e) in ir.embedded.iter().enumerate() {
        if e.language != Language::Lua {
            continue;
        }
        let whole_file = e.origin == Origin::File;
        // a `.lua` file that never calls Redis (an editor plugin, a game mod) has nothing to
        // check, and may be written for a newer Lua
        if whole_file && !e.text.contains("redis.") {
            continue;
        }
        if let Some(at) = lex::too_deep(&e.text, MAX_NESTING) {
            ir.problems.push(ParseProblem {
                limit: Limit::Part,
                message: format!(
                    "this Lua script nests brackets or blocks more than {MAX_NESTING} levels deep; it was not analysed"
                ),
                span: e.map.span(at, next_char_end(&e.text, at)),
                help: "flatten the script; the rest of the file is analysed either way"
                    .to_string(),
            });
            continue;
        }
        if let Some(at) = lex::long_chain(&e.text, MAX_CHAIN) {
            ir.problems.push(ParseProblem {
                limit: Limit::Part,
                message: format!(
                    "this Lua script chains more than {MAX_CHAIN} operators or calls in one expression; it was not analysed"
                ),
                span: e.map.span(at, next_char_end(&e.text, at)),
                help: "split the expression; the rest of the file is analysed either way"
                    .to_string(),
            });
            continue;
        }
        let scanned = match locklint_ir::isolate::catch(|| guard::scan(&e.text)) {
            Ok(scanned) => scanned,
            Err(message) => {
                let what = if whole_file {
                    "this Lua script"
                } else {
                    "this embedded Lua script"
                };
                let at = e.span.start;
                let end = ir.file.text[at..]
                    .chars()
                    .next()
                    .map_or(at, |c| at + c.len_utf8());
                ir.problems.push(locklint_ir::isolate::problem(
                    what,
                    &message,
                    Span::new(at, end),
                ));
                continue;
            }
        };
        match scanned {
            Ok(scan) => {
                let mut names = Vec::new();
                if whole_file {
                    if let Some(stem) = ir.file.path.file_stem().and_then(|s| s.to_str()) {
                        names.push(stem.to_string());
                    }
                } else {
                    names.extend(binding_name(&ir.file.text, e.span.start));
                    if let Some(f) = e.func.and_then(|f| ir.functions.get(f)) {
                        names.push(f.name.clone());
                    }
                }
                let lock_named = names.iter().any(|n| vocabulary::is_lock_script_name(n));
                let writes = scan
                    .writes
                    .into_iter()
                    .map(|w| {
                        let span = e.map.span(w.range.0, w.range.1);
                        (w, span)
                    })
                    .collect();
                let checked = scan
                    .checked
                    .into_iter()
                    .map(|(k, (s, t))| (k, e.map.span(s, t)))
                    .collect();
                let keys = scan
                    .keys
                    .into_iter()
                    .map(|k| {
                        let span = e.map.span(k.range.0, k.range.1);
                        (k, span)
                    })
                    .collect();
                ir.lua.scripts.push(Script {
                    embedded: idx,
                    names,
                    lock_named,
                    writes,
                    checked,
                    keys,
                });
            }
            // a constant that merely mentions `redis.call(` may not be a script at all
            Err(_) if e.origin == Origin::Const => {}
            Err(errors) => {
                if let Some(err) = errors.first() {
                    let (s, t) = err.range;
                    let t = if t > s { t } else { next_char_end(&e.text, s) };
                    let what = if whole_file {
                        "this Lua script"
                    } else {
                        "this embedded Lua script"
                    };
                    ir.problems.push(ParseProblem {
                        limit: Limit::None,
                        message: format!(
                            "could not parse {what}: {}",
                            lowercase_first(&err.message)
                        ),
                        span: e.map.span(s, t),
                        help: "fix the script's syntax (Redis runs Lua 5.1); the rest of the file is analysed either way".to_string(),
                    });
                }
            }
        }
    }
}

/// Deeper bracket nesting than this is refused before parsing (the parser and the walk recurse).
pub const MAX_NESTING: usize = 256;

/// Operators and calls one expression may chain (each one a level of the parser's recursion).
const MAX_CHAIN: usize = 1000;

fn next_char_end(text: &str, at: usize) -> usize {
    text.get(at..)
        .and_then(|r| r.chars().next())
        .map(|c| at + c.len_utf8())
        .unwrap_or(at)
}

fn lowercase_first(s: &str) -> String {
    let s = s.trim().trim_end_matches('.');
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The name a Rust literal at `at` is bound to: `const RELEASE: &str = "..";`,
/// `static UNLOCK: LazyLock<Script> = LazyLock::new(|| Script::new(".."));`,
/// `let renew = redis::Script::new("..");`.
fn binding_name(src: &str, at: usize) -> Option<String> {
    let before = src.get(..at)?;
    let stmt_start = before.rfind([';', '}']).map(|i| i + 1).unwrap_or(0);
    let stmt = &before[stmt_start..];
    let mut best: Option<(usize, &str)> = None;
    for kw in ["const", "static", "let"] {
        let mut from = 0;
        while let Some(i) = stmt[from..].find(kw) {
            let pos = from + i;
            from = pos + kw.len();
            let before_ok = stmt[..pos]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            let after_ok = stmt[from..].starts_with(char::is_whitespace);
            if before_ok && after_ok && best.is_none_or(|(b, _)| pos > b) {
                best = Some((pos, &stmt[from..]));
            }
        }
    }
    let (_, rest) = best?;
    let mut rest = rest.trim_start();
    for skip in ["mut ", "ref "] {
        if let Some(r) = rest.strip_prefix(skip) {
            rest = r.trim_start();
        }
    }
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_names() {
        let src = "fn a() {}\nconst RELEASE_LOCK: &str = \"x\";";
        assert_eq!(
            binding_name(src, src.find('"').unwrap()),
            Some("RELEASE_LOCK".into())
        );
        let src = "x();\n/// doc; let\npub(crate) static UNLOCK: LazyLock<Script> = LazyLock::new(|| {\n Script::new(r\"x\")";
        assert_eq!(
            binding_name(src, src.find("r\"").unwrap()),
            Some("UNLOCK".into())
        );
        let src = "{ let mut script = redis::Script::new(\"x\")";
        assert_eq!(
            binding_name(src, src.find('"').unwrap()),
            Some("script".into())
        );
        let src = "{ con.eval(\"x\")";
        assert_eq!(binding_name(src, src.find('"').unwrap()), None);
    }
}
