//! What a Rust file's text declares and names as a whole, found in one pass of the lexer:
//! the questions fixes ask of the whole file (is this constant already defined? is the name
//! taken? is there a `self.token` field? is this fred code?) answered from one index instead
//! of a search of the text per finding.

use locklint_ir::names::{RustNames, REDIS_TRAIT_IMPORTS};
use locklint_ir::source::{SourceFile, Span};
use ra_ap_rustc_lexer::{tokenize, FrontmatterAllowed, TokenKind as K};

/// Index the names of a Rust text in one pass of the lexer.
pub fn of(text: &str) -> RustNames {
    let mut names = RustNames::default();
    // the code tokens (no whitespace or comments) with their spans
    let mut tokens: Vec<(K, Span)> = Vec::new();
    let mut pos = 0usize;
    for t in tokenize(text, FrontmatterAllowed::No) {
        let span = Span::new(pos, pos + t.len as usize);
        pos = span.end;
        if !matches!(
            t.kind,
            K::Whitespace | K::LineComment { .. } | K::BlockComment { .. }
        ) {
            tokens.push((t.kind, span));
        }
    }
    let word = |i: usize| match tokens.get(i) {
        Some((K::Ident, s)) => text.get(s.start..s.end),
        _ => None,
    };
    let is_punct = |i: usize, kind: K| tokens.get(i).is_some_and(|(k, _)| *k == kind);
    for (i, (_, span)) in tokens.iter().enumerate() {
        match word(i) {
            Some("const") => {
                let Some(name) = word(i + 1) else { continue };
                names.declared.insert(name.to_string());
                if span.start == 0 || text[..span.start].ends_with('\n') {
                    let end = text[span.start..]
                        .find('\n')
                        .map_or(text.len(), |n| span.start + n);
                    names
                        .top_level_consts
                        .entry(name.to_string())
                        .or_default()
                        .push(Span::new(span.start, end));
                }
            }
            Some("static") => {
                let at = if word(i + 1) == Some("mut") {
                    i + 2
                } else {
                    i + 1
                };
                if let Some(name) = word(at) {
                    names.declared.insert(name.to_string());
                }
            }
            Some("self") if is_punct(i + 1, K::Dot) => {
                if let Some(field) = word(i + 2) {
                    names.self_fields.insert(field.to_string());
                }
            }
            Some("fred") if is_punct(i + 1, K::Colon) && is_punct(i + 2, K::Colon) => {
                names.fred = true;
            }
            Some("redis") if is_punct(i + 1, K::Colon) && is_punct(i + 2, K::Colon) => {
                names.redis_path = true;
            }
            Some("use") if !names.redis_traits => {
                // the item up to its `;`: a path from `redis` that names a command trait
                let end = (i..tokens.len())
                    .find(|&k| tokens[k].0 == K::Semi)
                    .unwrap_or(tokens.len());
                let text_of = |k: usize| text.get(tokens[k].1.start..tokens[k].1.end);
                let from_redis = (i + 1..end)
                    .find(|&k| tokens[k].0 != K::Colon)
                    .is_some_and(|k| text_of(k) == Some("redis"));
                names.redis_traits = from_redis
                    && (i + 1..end)
                        .any(|k| text_of(k).is_some_and(|t| REDIS_TRAIT_IMPORTS.contains(&t)));
            }
            _ => {}
        }
    }
    names
}

/// The names of a file's text, indexed the first time they are asked for (whole-file
/// questions of fixes then cost the same for every finding).
pub fn of_file(file: &SourceFile) -> &RustNames {
    file.rust_names.get_or_init(|| of(&file.text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_fields_and_paths() {
        let text = "use fred::prelude::*;\nconst A: &str = \"x\";\nmod m {\n    const B: u8 = 1;\n}\nstatic mut C: u8 = 0;\n// const D: u8 = 0; self.commented\nfn f(&self) { let _ = self.token; let _ = \"self.quoted\"; }\n";
        let n = of(text);
        assert!(n.is_declared("A") && n.is_declared("B") && n.is_declared("C"));
        assert!(!n.is_declared("D"));
        assert!(n.defines_at_top_level(text, "A", "const A: &str = \"x\";"));
        assert!(!n.defines_at_top_level(text, "A", "const A: &str = \"y\";"));
        assert!(!n.defines_at_top_level(text, "B", "const B: u8 = 1;"));
        assert!(n.reads_self_field("token"));
        assert!(!n.reads_self_field("commented") && !n.reads_self_field("quoted"));
        assert!(n.mentions_fred());
        assert!(!of("// fred::x\nfn f() {}\n").mentions_fred());
        assert!(!n.mentions_redis_path() && !n.imports_redis_traits());
    }

    #[test]
    fn redis_rs_command_traits_come_from_redis_imports() {
        for text in [
            "use redis::AsyncCommands;",
            "use redis::{Client, Commands};",
            "use ::redis::prelude::*;",
            "use redis::*;",
            "mod m { use redis::TypedCommands; }",
        ] {
            let n = of(text);
            assert!(n.imports_redis_traits(), "{text}");
            assert!(n.mentions_redis_path(), "{text}");
        }
        for text in [
            "use cache::Commands;\nuse redis::Client;",
            "fn f() {}",
            "// use redis::Commands;\n",
            "use other::redis::Commands;",
        ] {
            assert!(!of(text).imports_redis_traits(), "{text}");
        }
    }
}
