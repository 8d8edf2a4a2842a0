//! The Rust front-end: parses a file with `syn` and extracts Redis operations per function.

mod attributes;
mod bodies;
mod commands;
mod depth;
mod docs;
mod embed;
mod env;
mod items;
mod keys;
mod laid_out;
mod literal;
mod literal_times;
pub mod names;
mod spans;
mod statements;
mod types;
mod walker;

pub use commands::{builder, typed, CmdArg};
pub use keys::parse_format;

use locklint_ir::source::{FileRef, Span};
use locklint_ir::{FileIr, ParseProblem};

pub use depth::{MAX_DEPTH, MAX_NESTING};

/// Whether an expression is control flow or a block: a statement made of one is not a plain
/// statement of the operation inside it, and re-printing one would re-print more than the
/// operation's own code.
pub fn block_like(e: &syn::Expr) -> bool {
    matches!(
        e,
        syn::Expr::If(_)
            | syn::Expr::While(_)
            | syn::Expr::Loop(_)
            | syn::Expr::ForLoop(_)
            | syn::Expr::Match(_)
            | syn::Expr::Block(_)
            | syn::Expr::Unsafe(_)
            | syn::Expr::Closure(_)
            | syn::Expr::Async(_)
            | syn::Expr::TryBlock(_)
            | syn::Expr::Const(_)
    )
}

/// Parse one Rust file into the intermediate form.
pub fn analyze(index: usize, file: FileRef) -> FileIr {
    analyze_with_large_bodies(index, file, bodies::LARGE_BODY)
}

/// [`analyze`], with function bodies of more than `large_body` bytes parsed one statement at a
/// time as they are walked (see `bodies`), and files of more than `large_body` bytes checked
/// for depth and with their doc comments folded (see `docs`) on the text before it is
/// tokenised: the result is the same whatever the size; tests compare them.
pub fn analyze_with_large_bodies(index: usize, file: FileRef, large_body: usize) -> FileIr {
    let ir = parse_and_walk(index, file, large_body);
    // spans refer to this thread's copy of the text until it is dropped
    proc_macro2::extra::invalidate_current_thread_spans();
    ir
}

fn parse_and_walk(index: usize, file: FileRef, large_body: usize) -> FileIr {
    let mut ir = FileIr::new(file.clone());
    if file.text.trim().is_empty() {
        return ir;
    }
    // a large text is checked and its doc comments folded before it is tokenised
    let large = file.text.len() > large_body;
    if large {
        if let Some(problem) = too_deep_text(&file.text) {
            ir.problems.push(problem);
            return ir;
        }
    }
    let text = without_shebang(&file.text);
    let folded = large.then(|| docs::folded(text)).flatten();
    // the text is lexed once: the depth guard and the parser read the same tokens
    let tokens: proc_macro2::TokenStream = match folded.as_deref().unwrap_or(text).parse() {
        Ok(t) => t,
        Err(e) => {
            let at = spans::to_span(&file, e.span());
            ir.problems.push(unparsable(
                at,
                "unbalanced brackets, or an unterminated string, character literal or block comment",
            ));
            return ir;
        }
    };
    if let Some(problem) = too_deep(&file.text, tokens.clone()) {
        ir.problems.push(problem);
        return ir;
    }
    let (tokens, bodies) = bodies::hollow(tokens, large_body, folded.as_deref().unwrap_or(text));
    let parsed: syn::File = match syn::parse2(tokens) {
        Ok(f) => f,
        Err(e) => {
            let at = spans::to_span(&file, e.span());
            ir.problems.push(unparsable(at, &e.to_string()));
            return ir;
        }
    };
    items::collect(index, &file, &parsed, &bodies, &mut ir);
    drop(parsed);
    if let Some(e) = bodies.error() {
        // a body parsed as it was walked does not parse: the file does not, as a whole
        let mut ir = FileIr::new(file.clone());
        let at = spans::to_span(&file, e.span());
        ir.problems.push(unparsable(at, &e.to_string()));
        return ir;
    }
    ir
}

/// The text as `syn::parse_file` parses it: without a byte order mark, and with a shebang line
/// (`#!` not starting an inner attribute) left out but its line break kept, so that lines keep
/// their numbers.
fn without_shebang(text: &str) -> &str {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text.strip_prefix("#!") else {
        return text;
    };
    if rest.trim_start().starts_with('[') {
        return text;
    }
    text.find('\n').map_or("", |i| &text[i..])
}

/// The problem of a Rust file the parser refuses, at `at`.
fn unparsable(at: Span, what: &str) -> ParseProblem {
    ParseProblem {
        message: format!("could not parse this Rust file: {what}"),
        span: Span::new(at.start, at.end.max(at.start)),
        help: "fix the syntax error (or exclude the file); the rest of the tree is analysed either way".to_string(),
    }
}

/// Refuse pathological nesting before the recursive parser sees it.
fn too_deep(text: &str, tokens: proc_macro2::TokenStream) -> Option<ParseProblem> {
    let (span, excess) = match depth::check(tokens)? {
        depth::Excess::Brackets(span) => (span, Nesting::Brackets),
        depth::Excess::Depth(span) => (span, Nesting::Depth),
    };
    let idx = locklint_ir::source::LineIndex::new(text);
    let s = span.start();
    Some(nesting_problem(
        text,
        idx.offset(text, s.line, s.column),
        excess,
    ))
}

/// Refuse nesting past [`MAX_NESTING`] brackets or [`MAX_DEPTH`] levels in a large text
/// before it is tokenised (a tree per bracket: a megabyte of `{` would take a hundred; a long
/// chain's tokens take as much): the check [`too_deep`] makes on its tokens, read from the
/// lexer.
fn too_deep_text(text: &str) -> Option<ParseProblem> {
    let stripped = without_shebang(text);
    let base = text.len() - stripped.len();
    let (at, brackets) = depth::excess_in_text(stripped)?;
    let excess = if brackets {
        Nesting::Brackets
    } else {
        Nesting::Depth
    };
    Some(nesting_problem(text, base + at, excess))
}

/// What nests too deep.
enum Nesting {
    Brackets,
    Depth,
}

/// The problem of a file that nests too deep at byte `start`.
fn nesting_problem(text: &str, start: usize, excess: Nesting) -> ParseProblem {
    let message = match excess {
        Nesting::Brackets => format!("nesting too deep to analyse: more than {MAX_NESTING} levels of brackets; the file was not analysed"),
        Nesting::Depth => format!("nesting too deep to analyse: more than {MAX_DEPTH} levels of operators, closures, keywords and brackets; the file was not analysed"),
    };
    let end = text[start..]
        .chars()
        .next()
        .map_or(start, |c| start + c.len_utf8());
    ParseProblem {
        message,
        span: Span::new(start, end),
        help: "this may be valid Rust, but it is too deep to analyse safely; split the expression or exclude the file (the rest of the tree is analysed either way)".to_string(),
    }
}
