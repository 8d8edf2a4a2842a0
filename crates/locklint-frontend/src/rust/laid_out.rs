//! The expressions a fix lays out again when it would push one of their lines past 100 columns
//! and the operation is not a statement of its own: every `if`/`while` condition, match guard,
//! block tail expression (not itself a block or control flow) and returned value of a function.
//! Each operation records the innermost one holding it (`Op.expr`), found while the function's
//! tree is at hand, so that building a fix never parses the function again.

use super::spans;
use locklint_ir::source::{SourceFile, Span};
use locklint_ir::Event;

/// Of the expressions holding an operation, how many of the nearest are looked at.
const NEAREST: usize = 64;

/// The expressions of one function body, collected from its block or statement by statement.
pub(super) struct Expressions<'f> {
    file: &'f SourceFile,
    found: Vec<Span>,
}

impl<'f> Expressions<'f> {
    pub(super) fn new(file: &'f SourceFile) -> Self {
        Expressions {
            file,
            found: Vec::new(),
        }
    }

    /// A whole body.
    pub(super) fn block(&mut self, body: &syn::Block) {
        syn::visit::Visit::visit_block(self, body);
    }

    /// One statement of a body walked statement by statement ...
    pub(super) fn stmt(&mut self, stmt: &syn::Stmt) {
        syn::visit::Visit::visit_stmt(self, stmt);
    }

    /// ... and its last statement: its tail expression.
    pub(super) fn tail(&mut self, last: Option<&syn::Stmt>) {
        if let Some(syn::Stmt::Expr(tail, None)) = last {
            if !super::block_like(tail) {
                self.consider(tail);
            }
        }
    }

    /// Set `Op.expr` of every operation among `events`.
    pub(super) fn mark(self, events: &mut [Event]) {
        if !events.iter().any(|e| matches!(e, Event::Op(_))) {
            return;
        }
        let mut expressions = self.found;
        expressions.sort_by_key(|s| s.start);
        for event in events {
            if let Event::Op(op) = event {
                op.expr = innermost(&expressions, op.span);
            }
        }
    }

    fn consider(&mut self, e: &syn::Expr) {
        self.found.push(spans::of(self.file, e));
    }
}

/// The innermost of `expressions` (sorted by start) holding `span`: they nest, so the one
/// starting last among those that hold it.
fn innermost(expressions: &[Span], span: Span) -> Option<Span> {
    let before = expressions.partition_point(|c| c.start <= span.start);
    expressions[..before]
        .iter()
        .rev()
        .take(NEAREST)
        .find(|c| c.end >= span.end)
        .copied()
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
        self.tail(b.stmts.last());
        syn::visit::visit_block(self, b);
    }
    fn visit_expr_return(&mut self, r: &'ast syn::ExprReturn) {
        if let Some(value) = r.expr.as_deref().filter(|e| !super::block_like(e)) {
            self.consider(value);
        }
        syn::visit::visit_expr_return(self, r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_innermost_expression_holding_a_span_is_the_last_to_start() {
        let outer = Span::new(10, 50);
        let inner = Span::new(20, 30);
        let beside = Span::new(32, 40);
        let sorted = [outer, inner, beside];
        assert_eq!(innermost(&sorted, Span::new(22, 28)), Some(inner));
        assert_eq!(innermost(&sorted, Span::new(33, 35)), Some(beside));
        assert_eq!(innermost(&sorted, Span::new(41, 45)), Some(outer));
        assert_eq!(innermost(&sorted, Span::new(5, 8)), None);
    }
}
