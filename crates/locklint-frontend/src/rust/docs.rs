//! Doc comments folded before a large file is tokenised. Each `///` or `//!` line is an
//! attribute with its text as a string literal in the token trees and the syntax tree: a
//! megabyte of doc lines takes hundreds of megabytes there, and nothing the analysis reads is in
//! them. A run of line doc comments of one style, with only whitespace between them, becomes
//! one attribute without text (`#[d]` or `#![d]`, written where the run starts, its tokens
//! split across lines when the first line is shorter) and spaces: every byte keeps its offset
//! and every line its number, an item still starts where its first doc line does, and an
//! inner doc run is still a file's inner attribute.

use ra_ap_rustc_lexer::{tokenize, DocStyle, FrontmatterAllowed, TokenKind};

/// A run of line doc comments: its byte range and whether they are inner (`//!`) comments.
struct Run {
    start: usize,
    end: usize,
    inner: bool,
}

/// `text` with each run of line doc comments folded into one attribute, or `None` when it has
/// none to fold.
pub fn folded(text: &str) -> Option<String> {
    let mut runs: Vec<Run> = Vec::new();
    let mut at = 0usize;
    // whether only whitespace has come since the last run's end
    let mut adjacent = false;
    for t in tokenize(text, FrontmatterAllowed::No) {
        let start = at;
        at += t.len as usize;
        match t.kind {
            TokenKind::Whitespace => {}
            TokenKind::LineComment {
                doc_style: Some(style),
            } => {
                let inner = style == DocStyle::Inner;
                match runs.last_mut() {
                    Some(run) if adjacent && run.inner == inner => run.end = at,
                    _ => runs.push(Run {
                        start,
                        end: at,
                        inner,
                    }),
                }
                adjacent = true;
                continue;
            }
            _ => {}
        }
        adjacent = adjacent && t.kind == TokenKind::Whitespace;
    }
    if runs.is_empty() {
        return None;
    }
    let mut bytes = text.as_bytes().to_vec();
    for run in runs {
        let attribute: &[u8] = if run.inner { b"#![d]" } else { b"#[d]" };
        let range = &mut bytes[run.start..run.end];
        let line_break = |b: &u8| *b == b'\n' || *b == b'\r';
        // `///` or `//!` alone is too short to hold the attribute: left as it is
        if range.iter().filter(|b| !line_break(b)).count() < attribute.len() {
            continue;
        }
        // the attribute's characters first (its tokens may be split by line breaks), then spaces
        for (i, b) in range.iter_mut().filter(|b| !line_break(b)).enumerate() {
            *b = attribute.get(i).copied().unwrap_or(b' ');
        }
    }
    // only whole runs of comment bytes were replaced, by ASCII
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_fold_into_one_attribute_keeping_offsets_and_lines() {
        let text = "//! Crate é docs\n//! more\n\n/// An item\n///\n/// é\n#[inline]\nfn f() { let x = 1; /// trailing\n}\n";
        let out = folded(text).unwrap();
        assert_eq!(out.len(), text.len());
        for (a, b) in text.split('\n').zip(out.split('\n')) {
            assert_eq!(a.len(), b.len(), "{a:?} {b:?}");
        }
        assert_eq!(out.split('\n').count(), text.split('\n').count());
        assert!(out.starts_with("#![d] "));
        assert_eq!(out.matches("#![d]").count(), 1);
        assert_eq!(&out[text.find("/// An").unwrap()..][..5], "#[d] ");
        assert!(out.contains("#[inline]\nfn f() { let x = 1; #[d] "));
        assert!(!out.contains("//"));
    }

    #[test]
    fn a_run_of_short_lines_holds_the_attribute_across_them() {
        let out = folded("//!\n//!\n\n//!\nfn f() {}\n").unwrap();
        assert_eq!(out, "#![\nd] \n\n   \nfn f() {}\n");
        let out = folded("///\n///\nfn f() {}\n").unwrap();
        assert_eq!(out, "#[d\n]  \nfn f() {}\n");
    }

    #[test]
    fn other_comments_break_runs_and_strings_are_not_comments() {
        let text = "/// a doc\n// plain\n/// b doc\nconst S: &str = \"/// not a comment\";\n/*! block */\n";
        let out = folded(text).unwrap();
        assert_eq!(out.matches("#[d]").count(), 2);
        assert!(out.contains("// plain"));
        assert!(out.contains("\"/// not a comment\""));
        assert!(out.contains("/*! block */"));
        assert_eq!(folded("fn f() {}\n// plain\n"), None);
        // too short for an attribute: unchanged
        assert_eq!(folded("///\nfn f() {}\n").unwrap(), "///\nfn f() {}\n");
    }
}
