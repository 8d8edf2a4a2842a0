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
mod macros;
pub mod names;
mod size;
mod spans;
mod statements;
mod types;
mod walker;

pub use commands::{builder, typed, CmdArg};
pub use keys::parse_format;

use locklint_ir::source::{FileRef, Span};
use locklint_ir::{FileIr, Limit, ParseProblem};

pub use depth::{MAX_DEPTH, MAX_NESTING};
pub use size::{Limits, MAX_FILE_EVENTS, MAX_FILE_TOKENS, MAX_TREE_TOKENS};

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
    analyze_with_limits(index, file, Limits::default())
}

/// [`analyze`] within `limits` (see `size`): files past them are parse problems. Function
/// bodies of more than `limits.large_body` bytes are parsed one statement at a time as they are
/// walked (see `bodies`), and files of more than that are checked for depth and have their doc
/// comments folded (see `docs`) on the text before it is tokenised: the result is the same
/// whatever the size; tests compare them.
pub fn analyze_with_limits(index: usize, file: FileRef, limits: Limits) -> FileIr {
    let ir = parse_and_walk(index, file, limits);
    // spans refer to this thread's copy of the text until it is dropped
    proc_macro2::extra::invalidate_current_thread_spans();
    ir
}

/// Whether a Rust text is refused whole before it is tokenised (more tokens than the file
/// limit, or nesting past the bounds): what the analysis would find of it is that one
/// problem. A lexer's pass over the text, without building tokens.
pub fn refused_before_tokens(text: &str) -> bool {
    let limits = Limits::default();
    let large = text.len() > limits.large_body;
    refused_text(text, large, &limits).is_some()
}

fn parse_and_walk(index: usize, file: FileRef, limits: Limits) -> FileIr {
    let mut ir = FileIr::new(file.clone());
    if file.text.trim().is_empty() {
        return ir;
    }
    // a large text is checked and its doc comments folded before it is tokenised
    let large = file.text.len() > limits.large_body;
    if let Some(problem) = refused_text(&file.text, large, &limits) {
        ir.problems.push(problem);
        return ir;
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
    // a large text's nesting was checked by `refused_text` on the lexer's tokens, which refuses
    // what the token check refuses (`depth::lex_check`): the trees are not walked again
    if let Some(problem) = (!large)
        .then(|| too_deep(&file.text, tokens.clone()))
        .flatten()
    {
        ir.problems.push(problem);
        return ir;
    }
    let text = folded.as_deref().unwrap_or(text);
    let (tokens, bodies, budget) = match hollowed(tokens, &limits, text) {
        Ok(hollowed) => hollowed,
        Err(too_large) => {
            let at = spans::to_span(&file, too_large.at);
            ir.problems.push(too_large_problem(at, too_large.message()));
            return ir;
        }
    };
    let parsed: syn::File = match syn::parse2(tokens) {
        Ok(f) => f,
        Err(e) => {
            let at = spans::to_span(&file, e.span());
            ir.problems.push(unparsable(at, &e.to_string()));
            return ir;
        }
    };
    items::collect(index, &file, &parsed, &bodies, &budget, &mut ir);
    drop(parsed);
    if let Some(failure) = budget.failure() {
        // a body parsed as it was walked does not parse (the file does not, as a whole), or
        // one of its statements is too large
        let mut ir = FileIr::new(file.clone());
        ir.problems.push(match failure {
            size::Failure::Syntax(e) => unparsable(spans::to_span(&file, e.span()), &e.to_string()),
            size::Failure::TooLarge(t) => {
                too_large_problem(spans::to_span(&file, t.at), t.message())
            }
        });
        return ir;
    }
    ir
}

/// The file's tokens with its large function bodies taken out (see `bodies`), within the
/// limits of `size`: when the tree of what is left would take more than half of the trees'
/// bound, every body is taken out; when it is still larger than the bound, the file is too
/// large. A statement of a body taken out may hold what the file's tree leaves of the bound
/// (the walk's [`size::Budget`]).
fn hollowed(
    tokens: proc_macro2::TokenStream,
    limits: &Limits,
    text: &str,
) -> Result<(proc_macro2::TokenStream, bodies::Bodies, size::Budget), size::TooLarge> {
    let bound = limits.tree_tokens;
    let hollow = |min| bodies::hollow(tokens.clone(), min, limits, text);
    let (mut out, mut bodies) = hollow(limits.large_body);
    let mut items = size::tree_count(&out, bound);
    if items > bound / 2 {
        // every body taken out gives the same intermediate form
        (out, bodies) = hollow(0);
        items = size::tree_count(&out, bound);
    }
    if items <= bound {
        let budget = size::Budget::new(bound - items, limits.file_events);
        return Ok((out, bodies, budget));
    }
    let (at, _) = size::largest_part(&out, true).expect("a file of tokens has a part");
    Err(size::TooLarge {
        at,
        tokens: size::tree_count(&out, usize::MAX),
        limit: bound,
        what: size::Part::Items,
    })
}

/// The problem of a file too large to analyse, at `at`.
fn too_large_problem(at: Span, message: String) -> ParseProblem {
    ParseProblem {
        limit: Limit::File,
        message,
        span: Span::new(at.start, at.end.max(at.start)),
        help: "this may be valid Rust, but its syntax tree would take hundreds of megabytes; split it or exclude the file (the rest of the tree is analysed either way)".to_string(),
    }
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
        limit: Limit::None,
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

/// Refuse, before the text is tokenised, a text of more tokens than the file limit, and (when
/// `large`) nesting past [`MAX_NESTING`] brackets or [`MAX_DEPTH`] levels (a tree per bracket:
/// a megabyte of `{` would take a hundred; a long chain's tokens take as much): the check
/// [`too_deep`] makes on its tokens, read from the lexer.
fn refused_text(text: &str, large: bool, limits: &Limits) -> Option<ParseProblem> {
    // every token takes a byte at least
    if !large && text.len() <= limits.file_tokens {
        return None;
    }
    let stripped = without_shebang(text);
    let base = text.len() - stripped.len();
    let (excess, tokens) = depth::lex_check(stripped);
    if let Some((at, brackets)) = excess.filter(|_| large) {
        let excess = if brackets {
            Nesting::Brackets
        } else {
            Nesting::Depth
        };
        return Some(nesting_problem(text, base + at, excess));
    }
    (tokens > limits.file_tokens).then(|| {
        let message = size::message(size::Part::File, tokens, limits.file_tokens);
        too_large_problem(first_char(text, base), message)
    })
}

/// The span of the character at byte `start` of `text` (empty at its end).
fn first_char(text: &str, start: usize) -> Span {
    let end = text[start..]
        .chars()
        .next()
        .map_or(start, |c| start + c.len_utf8());
    Span::new(start, end)
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
    ParseProblem {
        limit: Limit::File,
        message,
        span: first_char(text, start),
        help: "this may be valid Rust, but it is too deep to analyse safely; split the expression or exclude the file (the rest of the tree is analysed either way)".to_string(),
    }
}
