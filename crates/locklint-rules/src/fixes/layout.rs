//! Laying out fixed code: a statement, condition, match guard, block tail or returned value
//! that would pass 100 columns is re-printed with prettyplease, in the function's own indentation.

use super::*;

thread_local! {
    /// The expressions of the function last asked about.
    static EXPRESSIONS: std::cell::RefCell<Option<FunctionExpressions>> =
        const { std::cell::RefCell::new(None) };
}
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
        None => expression_of(o).map(|c| (c, true)),
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

/// The `if`/`while` condition, match guard, tail expression or returned value the operation
/// is in (the innermost one).
pub(crate) fn expression_of(o: &TraceOp) -> Option<Span> {
    let expressions = expressions_of_function(o)?;
    let op = o.op.span;
    // expressions that hold the operation nest: the one starting last is the innermost
    let before = expressions.partition_point(|c| c.start <= op.start);
    expressions[..before]
        .iter()
        .rev()
        .take(64)
        .find(|c| c.end >= op.end)
        .copied()
}

/// The expressions of one function that [`reflow`] lays out: its file (address, length), its
/// span, and the spans.
pub(crate) type FunctionExpressions = (usize, usize, Span, std::rc::Rc<Vec<Span>>);

/// Every `if`/`while` condition, match guard, block tail expression (not itself a block or
/// control flow) and returned value of the operation's function, by start: parsed once for
/// all the operations of a function.
pub(crate) fn expressions_of_function(o: &TraceOp) -> Option<std::rc::Rc<Vec<Span>>> {
    let key = (
        std::sync::Arc::as_ptr(&o.file) as usize,
        o.file.text.len(),
        o.func.whole,
    );
    let cached = EXPRESSIONS.with(|c| {
        c.borrow()
            .as_ref()
            .filter(|(p, l, w, _)| (*p, *l, *w) == key)
            .map(|(_, _, _, v)| v.clone())
    });
    if let Some(v) = cached {
        return Some(v);
    }
    struct Expressions<'a> {
        text: &'a str,
        lines: locklint_ir::source::LineIndex,
        base: usize,
        found: Vec<Span>,
    }
    impl Expressions<'_> {
        fn consider(&mut self, e: &syn::Expr) {
            let sp = syn::spanned::Spanned::span(e);
            let at = |l: proc_macro2::LineColumn| {
                self.base + self.lines.offset(self.text, l.line, l.column)
            };
            self.found.push(Span::new(at(sp.start()), at(sp.end())));
        }
    }
    impl<'ast> syn::visit::Visit<'ast> for Expressions<'_> {
        fn visit_expr_if(&mut self, i: &'ast syn::ExprIf) {
            self.consider(&i.cond);
            syn::visit::visit_expr_if(self, i);
        }
        fn visit_expr_while(&mut self, w: &'ast syn::ExprWhile) {
            self.consider(&w.cond);
            syn::visit::visit_expr_while(self, w);
        }
        fn visit_arm(&mut self, a: &'ast syn::Arm) {
            if let Some((_, guard)) = &a.guard {
                self.consider(guard);
            }
            syn::visit::visit_arm(self, a);
        }
        fn visit_block(&mut self, b: &'ast syn::Block) {
            if let Some(syn::Stmt::Expr(tail, None)) = b.stmts.last() {
                if !locklint_frontend::rust::block_like(tail) {
                    self.consider(tail);
                }
            }
            syn::visit::visit_block(self, b);
        }
        fn visit_expr_return(&mut self, r: &'ast syn::ExprReturn) {
            if let Some(value) = r
                .expr
                .as_deref()
                .filter(|e| !locklint_frontend::rust::block_like(e))
            {
                self.consider(value);
            }
            syn::visit::visit_expr_return(self, r);
        }
    }
    let func = o.func.whole;
    let text = o.file.text.get(func.start..func.end)?;
    let found = {
        let item: syn::ItemFn = syn::parse_str(text).ok()?;
        let mut v = Expressions {
            text,
            lines: locklint_ir::source::LineIndex::new(text),
            base: func.start,
            found: Vec::new(),
        };
        syn::visit::Visit::visit_item_fn(&mut v, &item);
        v.found
    };
    let mut found = found;
    found.sort_by_key(|s| s.start);
    let found = std::rc::Rc::new(found);
    EXPRESSIONS.with(|c| *c.borrow_mut() = Some((key.0, key.1, key.2, found.clone())));
    Some(found)
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

/// One statement printed by prettyplease, its lines after the first indented by `indent`.
pub(crate) fn layout_statement(stmt: &str, indent: &str) -> Option<String> {
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
