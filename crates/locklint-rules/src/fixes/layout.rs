//! Laying out fixed code: a statement, condition, match guard, block tail or returned value
//! that would pass 100 columns is re-printed with prettyplease, in the function's own indentation.

use super::*;

use locklint_ir::diagnostic::Edit;
use locklint_ir::source::Span;
use locklint_project::TraceOp;

/// The width rustfmt keeps code within.
pub(crate) const MAX_WIDTH: usize = 100;

/// Lays out the operation's statement again when the fix would push one of its lines past
/// [`MAX_WIDTH`] columns: the edits inside the statement become one edit of the whole
/// statement, printed by `prettyplease` (the layout rustfmt gives it) at the statement's
/// indentation. An operation in an `if`/`while` condition, a match guard, a block's tail
/// expression or a returned value has that expression laid out the same way. Statements
/// with comments, or that share their line with other code, are left as the edits make them.
pub(crate) fn reflow(o: &TraceOp, edits: Vec<Edit>) -> Vec<Edit> {
    // a line many times longer than rustfmt keeps lines is not code it lays out (generated
    // or minified): leave it as the edits make it
    let line = o.file.lines.line_span(&o.file.text, o.op.span.start);
    if line.len() > 10 * MAX_WIDTH {
        return edits;
    }
    let region = match o.op.stmt {
        Some(stmt) => Some((stmt, false)),
        None => o.op.expr.map(|c| (c, true)),
    };
    let Some((stmt, expression)) = region else {
        return edits;
    };
    let within = |e: &Edit| e.location.span.start >= stmt.start && e.location.span.end <= stmt.end;
    if !edits.iter().any(within) {
        return edits;
    }
    let text = &o.file.text;
    let line_start = o.file.line_span(stmt.start).start;
    let line_end = o.file.line_span(stmt.end).end;
    let before = &text[line_start..stmt.start];
    let indent = &before[..before.len() - before.trim_start().len()];
    let old = &text[stmt.start..stmt.end];
    if (!expression && !before.trim().is_empty()) || has_comments(old) {
        return edits;
    }
    let relative: Vec<(Span, String)> = edits
        .iter()
        .filter(|e| within(e))
        .map(|e| {
            let s = e.location.span;
            (
                Span::new(s.start - stmt.start, s.end - stmt.start),
                e.replacement.clone(),
            )
        })
        .collect();
    let Ok(new) = locklint_ir::diagnostic::apply_edits(old, &relative) else {
        return edits;
    };
    let whole = format!("{before}{new}{}", &text[stmt.end..line_end]);
    if whole.lines().all(|l| l.chars().count() <= MAX_WIDTH) {
        return edits;
    }
    let laid_out = if expression {
        layout_expression(&new, indent)
    } else {
        layout_statement(&new, indent)
    };
    let Some(laid_out) = laid_out else {
        return edits;
    };
    let mut out: Vec<Edit> = edits.into_iter().filter(|e| !within(e)).collect();
    out.push(edit(&o.file, stmt, laid_out));
    out.sort_by_key(|e| e.location.span.start);
    out
}

/// An expression printed by prettyplease as it would be on the right of `let _ =`, its lines
/// after the first indented by `indent`.
pub(crate) fn layout_expression(expr: &str, indent: &str) -> Option<String> {
    const HEAD: &str = "let __condition = ";
    let stmt = layout_statement(&format!("{HEAD}{expr};"), indent)?;
    Some(stmt.strip_prefix(HEAD)?.strip_suffix(';')?.to_string())
}

/// Whether Rust source text holds a comment (which re-printing would drop).
pub(crate) fn has_comments(code: &str) -> bool {
    use ra_ap_rustc_lexer::{tokenize, FrontmatterAllowed, TokenKind as K};
    tokenize(code, FrontmatterAllowed::No)
        .any(|t| matches!(t.kind, K::LineComment { .. } | K::BlockComment { .. }))
}

/// One statement printed by prettyplease, its lines after the first indented by `indent`
/// (remembered for statements of the same shape: `layout_memo`).
pub(crate) fn layout_statement(stmt: &str, indent: &str) -> Option<String> {
    super::layout_memo::laid_out(stmt, indent, |stmt| printed(stmt, indent))
}

/// [`layout_statement`], printed.
fn printed(stmt: &str, indent: &str) -> Option<String> {
    let file = syn::parse_file(&format!("fn f() {{\n{stmt}\n}}")).ok()?;
    let printed = prettyplease::unparse(&file);
    let body: Vec<&str> = printed.lines().collect();
    let inner = body.get(1..body.len().checked_sub(1)?)?;
    if inner.is_empty() {
        return None;
    }
    let lines: Vec<String> = inner
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let l = l.strip_prefix("    ").unwrap_or(l);
            match (i, l.is_empty()) {
                (0, _) | (_, true) => l.to_string(),
                _ => format!("{indent}{l}"),
            }
        })
        .collect();
    Some(lines.join("\n"))
}
