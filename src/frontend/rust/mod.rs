//! The Rust front-end: parses a file with `syn` and extracts Redis operations per function.

mod commands;
mod embed;
mod items;
mod keys;
mod literal;
mod spans;
mod walker;

pub use commands::{builder, typed, CmdArg};
pub use keys::parse_format;

use crate::ir::{FileIr, ParseProblem};
use crate::source::{FileRef, Span};

/// Deeper bracket nesting than this is not analysed (real code stays far below it).
pub const MAX_NESTING: usize = 256;
/// Longer runs of prefix operators (`!!!!x`, `--x`, `&&&x`) than this are not analysed.
pub const MAX_PREFIX_RUN: usize = 256;

/// Parse one Rust file into the intermediate form.
pub fn analyze(index: usize, file: FileRef) -> FileIr {
    let mut ir = FileIr {
        file: file.clone(),
        functions: Vec::new(),
        consts: Vec::new(),
        field_inits: Vec::new(),
        problems: Vec::new(),
        embedded: Vec::new(),
        sql: Default::default(),
        lua: Default::default(),
    };
    if file.text.trim().is_empty() {
        return ir;
    }
    if let Some(problem) = too_deep(&file.text) {
        ir.problems.push(problem);
        return ir;
    }
    let parsed = match syn::parse_file(&file.text) {
        Ok(f) => f,
        Err(e) => {
            let at = spans::to_span(&file, e.span());
            let text = e.to_string();
            let what = if text.contains("cannot parse string into token stream") {
                "unbalanced brackets, or an unterminated string, character literal or block comment"
                    .to_string()
            } else {
                text
            };
            ir.problems.push(ParseProblem {
                message: format!("could not parse this Rust file: {what}"),
                span: Span::new(at.start, at.end.max(at.start)),
                help: "fix the syntax error (or exclude the file); the rest of the tree is analysed either way".to_string(),
            });
            return ir;
        }
    };
    items::collect(index, &file, &parsed, &mut ir);
    drop(parsed);
    proc_macro2::extra::invalidate_current_thread_spans();
    ir
}

/// A cheap token-level check that keeps pathological nesting away from the recursive parser.
fn too_deep(text: &str) -> Option<ParseProblem> {
    let tokens: proc_macro2::TokenStream = match text.parse() {
        Ok(t) => t,
        // the parser reports lexing errors with a location
        Err(_) => return None,
    };
    let mut stack = vec![(tokens.into_iter(), 0usize)];
    let mut run = 0usize;
    while let Some((mut iter, depth)) = stack.pop() {
        let Some(tt) = iter.next() else { continue };
        let here = match &tt {
            proc_macro2::TokenTree::Group(g) => Some((g.span_open(), depth + 1)),
            proc_macro2::TokenTree::Punct(p) if matches!(p.as_char(), '!' | '-' | '&' | '*') => {
                run += 1;
                (run > MAX_PREFIX_RUN).then(|| (p.span(), 0))
            }
            _ => {
                run = 0;
                None
            }
        };
        if let proc_macro2::TokenTree::Group(g) = &tt {
            let d = depth + 1;
            if d > MAX_NESTING {
                return Some(deep_problem(text, g.span_open(), "brackets"));
            }
            stack.push((iter, depth));
            stack.push((g.stream().into_iter(), d));
            run = 0;
            continue;
        }
        if let Some((span, 0)) = here {
            return Some(deep_problem(text, span, "prefix operators"));
        }
        stack.push((iter, depth));
    }
    None
}

fn deep_problem(text: &str, span: proc_macro2::Span, what: &str) -> ParseProblem {
    let idx = crate::source::LineIndex::new(text);
    let s = span.start();
    let start = idx.offset(text, s.line, s.column);
    ParseProblem {
        message: format!(
            "this file nests {what} more than {} levels deep; it was not analysed",
            if what == "brackets" {
                MAX_NESTING
            } else {
                MAX_PREFIX_RUN
            }
        ),
        span: Span::new(start, start + 1),
        help: "this may be valid Rust, but it is too deep to analyse safely; split the expression or exclude the file (the rest of the tree is analysed either way)".to_string(),
    }
}
