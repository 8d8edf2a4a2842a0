//! Database connections held in local variables, and where each one ends: `conn.close()`,
//! `conn.close_on_drop()`, `conn.detach()`, `drop(conn)`, or the end of its scope. A session
//! (and every session-level lock taken on it) ends with its connection unless dropping the
//! connection hands it back to a pool.

use super::*;
use locklint_ir::{ConnEnd, EndKind};

/// The local variable a connection expression is reached from (`conn` of `&mut *conn`,
/// `conn.as_mut()`); `None` for fields, `self` and anything computed.
pub(super) fn conn_var(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Path(p) => p
            .path
            .get_ident()
            .map(|i| i.to_string())
            .filter(|n| n != "self"),
        syn::Expr::Reference(r) => conn_var(&r.expr),
        syn::Expr::Paren(p) => conn_var(&p.expr),
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => conn_var(&u.expr),
        syn::Expr::MethodCall(m)
            if m.args.is_empty()
                && matches!(
                    m.method.to_string().as_str(),
                    "as_mut" | "deref_mut" | "borrow_mut" | "as_deref_mut"
                ) =>
        {
            conn_var(&m.receiver)
        }
        _ => None,
    }
}

/// Whether an expression's tokens name a pool type or value (`PgPoolOptions`, `PgPool`).
fn names_pool(e: &syn::Expr, bodies: &crate::rust::bodies::Bodies) -> bool {
    let mut pool = false;
    idents_of(e, bodies, |i| {
        pool |= i.to_string().to_ascii_lowercase().contains("pool")
    });
    pool
}

impl FnWalker<'_> {
    /// What dropping the connection an initialiser makes does: `Some(true)` closes it (a
    /// dedicated connection: `PgConnection::connect(..)`, `tokio_postgres::connect(..)`,
    /// `conn.detach()`), `Some(false)` hands it back to its pool (`pool.acquire()`,
    /// `pool.get()`); `None` when the initialiser is not known to make a connection.
    pub(super) fn drop_closes(&self, e: &syn::Expr) -> Option<bool> {
        match e {
            syn::Expr::Await(a) => self.drop_closes(&a.base),
            syn::Expr::Try(t) => self.drop_closes(&t.expr),
            syn::Expr::Paren(p) => self.drop_closes(&p.expr),
            syn::Expr::MethodCall(m) => match m.method.to_string().as_str() {
                "unwrap" | "expect" => self.drop_closes(&m.receiver),
                "detach" if m.args.is_empty() => Some(true),
                "acquire" | "try_acquire" | "get" | "get_owned" | "get_timeout" => {
                    (self.executor_of(&m.receiver) == Some(Executor::Pool)).then_some(false)
                }
                "connect" | "connect_with" => (!names_pool(e, self.cx.bodies)).then_some(true),
                _ => None,
            },
            syn::Expr::Call(c) => {
                let (name, _) = path_last(&c.func)?;
                (matches!(name.as_str(), "connect" | "connect_with")
                    && !names_pool(e, self.cx.bodies))
                .then_some(true)
            }
            _ => None,
        }
    }

    fn conn_end(&mut self, var: String, kind: EndKind, to_pool: bool, span: Span) {
        let id = self.node();
        self.events.push(Event::ConnEnd(ConnEnd {
            id,
            var,
            kind,
            to_pool,
            span,
        }));
    }

    /// `conn.close()`, `conn.close_on_drop()`, `conn.detach()` on a connection variable.
    pub(super) fn conn_method(&mut self, m: &syn::ExprMethodCall, u: &ResultUse) {
        if !m.args.is_empty() {
            return;
        }
        let kind = match m.method.to_string().as_str() {
            "close" => EndKind::Close,
            "close_on_drop" => EndKind::CloseOnDrop,
            // a detached connection handed to the caller lives on there
            "detach" if *u != ResultUse::Returned => EndKind::Detach,
            _ => return,
        };
        let Some(var) = conn_var(&m.receiver) else {
            return;
        };
        if self.executor_of(&m.receiver) != Some(Executor::Connection) {
            return;
        }
        if kind != EndKind::Close {
            // from here on, dropping it closes it
            if let Some(b) = self.env.get_mut(&var) {
                b.drop_closes = Some(true);
            }
        }
        let span = self
            .span_of(&m.method)
            .join(self.span_of(&m.paren_token.span.close()));
        self.conn_end(var, kind, false, span);
    }

    /// `drop(conn)` of a local connection whose drop is known to close it or to pool it.
    pub(super) fn conn_drop(&mut self, c: &syn::ExprCall, name: &str, full: &str) {
        if name != "drop" || !matches!(full, "drop" | "std::mem::drop" | "mem::drop") {
            return;
        }
        let [arg] = c.args.iter().collect::<Vec<_>>()[..] else {
            return;
        };
        let syn::Expr::Path(p) = arg else {
            return;
        };
        let Some(var) = p.path.get_ident().map(|i| i.to_string()) else {
            return;
        };
        let Some(closes) = self.lookup(&var).and_then(|b| b.drop_closes) else {
            return;
        };
        let span = self.span_of(c);
        self.conn_end(var, EndKind::Drop, !closes, span);
    }

    /// The connections bound since `mark` go out of scope at `end`, except those the block
    /// hands on (returned from the function, or the block's value).
    pub(super) fn conn_scope_ends(&mut self, mark: usize, last: Option<&syn::Stmt>, end: Span) {
        let mut tail_names = HashSet::new();
        if let Some(syn::Stmt::Expr(e, None)) = last {
            idents_of(e, self.cx.bodies, |i| {
                tail_names.insert(i.to_string());
            });
        }
        let ends: Vec<(String, bool)> = self
            .env
            .since(mark)
            .filter_map(|(n, b)| Some((n.to_string(), b.drop_closes?)))
            .filter(|(n, _)| !tail_names.contains(n) && !self.returned_names.contains(n))
            .collect();
        for (var, closes) in ends {
            self.conn_end(var, EndKind::ScopeEnd, !closes, end);
        }
    }
}
