//! What a Rust file's text declares and names as a whole, found in one pass of the lexer:
//! the questions fixes ask of the whole file (is this constant already defined? is the name
//! taken? is there a `self.token` field? is this fred code?) answered from one index instead
//! of a search of the text per finding.

use crate::source::Span;
use ra_ap_rustc_lexer::{tokenize, FrontmatterAllowed, TokenKind as K};
use std::collections::{HashMap, HashSet};

/// The names of one Rust text (comments and string contents left out).
#[derive(Debug, Default)]
pub struct RustNames {
    /// Names of `const` and `static` items anywhere in the file.
    declared: HashSet<String>,
    /// `const` items that start a line (module level, not indented): name → the spans of
    /// their lines.
    top_level_consts: HashMap<String, Vec<Span>>,
    /// Fields read through `self.`.
    self_fields: HashSet<String>,
    /// Whether a path goes through `fred::`.
    fred: bool,
}

impl RustNames {
    pub fn of(text: &str) -> Self {
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
                _ => {}
            }
        }
        names
    }

    /// Whether a `const` or `static` item anywhere in the file has this name.
    pub fn is_declared(&self, name: &str) -> bool {
        self.declared.contains(name)
    }

    /// Whether a line of `text` (the text these names were found in) starts with `definition`,
    /// a `const name ...` item at module level.
    pub fn defines_at_top_level(&self, text: &str, name: &str, definition: &str) -> bool {
        self.top_level_consts.get(name).is_some_and(|lines| {
            lines.iter().any(|l| {
                text.get(l.start..l.end)
                    .is_some_and(|t| t.starts_with(definition))
            })
        })
    }

    /// Whether the file reads `self.<field>`.
    pub fn reads_self_field(&self, field: &str) -> bool {
        self.self_fields.contains(field)
    }

    /// Whether the file names a path through `fred::` (the fred client).
    pub fn mentions_fred(&self) -> bool {
        self.fred
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_fields_and_paths() {
        let text = "use fred::prelude::*;\nconst A: &str = \"x\";\nmod m {\n    const B: u8 = 1;\n}\nstatic mut C: u8 = 0;\n// const D: u8 = 0; self.commented\nfn f(&self) { let _ = self.token; let _ = \"self.quoted\"; }\n";
        let n = RustNames::of(text);
        assert!(n.is_declared("A") && n.is_declared("B") && n.is_declared("C"));
        assert!(!n.is_declared("D"));
        assert!(n.defines_at_top_level(text, "A", "const A: &str = \"x\";"));
        assert!(!n.defines_at_top_level(text, "A", "const A: &str = \"y\";"));
        assert!(!n.defines_at_top_level(text, "B", "const B: u8 = 1;"));
        assert!(n.reads_self_field("token"));
        assert!(!n.reads_self_field("commented") && !n.reads_self_field("quoted"));
        assert!(n.mentions_fred());
        assert!(!RustNames::of("// fred::x\nfn f() {}\n").mentions_fred());
    }
}
