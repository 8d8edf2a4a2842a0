//! Control flow of a function body: blocks and statements in order, bindings, conditions and
//! loops (which earlier reads the current path depends on), whether a branch diverges, and the
//! uses of each name (to tell whether a reply is read).

use super::*;

/// Blocks walked from their tokens (held empty by their statement's tree), and whether each
/// diverges, by where it starts.
pub(super) type Diverging = HashMap<(usize, usize), Option<bool>>;

/// Whether a block always leaves the enclosing flow (return, break, continue, panic).
pub(super) fn block_diverges(block: &syn::Block, taken: &Diverging) -> Option<bool> {
    let Some(last) = block.stmts.last() else {
        let start = block.brace_token.span.open().start();
        return taken.get(&(start.line, start.column)).copied().flatten();
    };
    stmt_diverges(last, taken)
}

/// Whether a block whose last statement is `last` diverges.
pub(super) fn stmt_diverges(last: &syn::Stmt, taken: &Diverging) -> Option<bool> {
    match last {
        syn::Stmt::Expr(e, _) => expr_diverges(e, taken),
        syn::Stmt::Macro(m) => macro_diverges(&m.mac).then_some(false),
        _ => None,
    }
}

/// `Some(true)` when the divergence is a `break`.
pub(super) fn expr_diverges(e: &syn::Expr, taken: &Diverging) -> Option<bool> {
    match e {
        syn::Expr::Return(_) | syn::Expr::Continue(_) => Some(false),
        syn::Expr::Break(_) => Some(true),
        syn::Expr::Macro(m) if macro_diverges(&m.mac) => Some(false),
        syn::Expr::Block(b) => block_diverges(&b.block, taken),
        _ => None,
    }
}

pub(super) fn macro_diverges(mac: &syn::Macro) -> bool {
    mac.path.segments.last().is_some_and(|s| {
        matches!(
            s.ident.to_string().as_str(),
            "panic" | "unreachable" | "todo" | "unimplemented" | "bail"
        )
    })
}

/// Deduplicate, keeping the most recent `MAX_DEPS`.
pub(super) fn bounded(deps: Vec<Dep>) -> Vec<Dep> {
    let mut out: Vec<Dep> = Vec::new();
    for d in deps.into_iter().rev() {
        if out.len() >= MAX_DEPS {
            break;
        }
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out.reverse();
    out
}

/// Macros whose arguments are only logged: mentioning a reply there does not check it.
pub(super) fn is_logging_macro(name: &str) -> bool {
    matches!(
        name,
        "trace"
            | "debug"
            | "info"
            | "warn"
            | "error"
            | "event"
            | "println"
            | "eprintln"
            | "print"
            | "eprint"
            | "dbg"
            | "log"
    )
}

/// The name of a boolean an `if` tests on its own (`force`, `self.force`, `args.force_unlock`),
/// when it names a deliberate override.
fn override_switch(cond: &syn::Expr) -> Option<String> {
    let name = match cond {
        syn::Expr::Paren(p) => return override_switch(&p.expr),
        syn::Expr::Path(p) => p.path.get_ident()?.to_string(),
        syn::Expr::Field(f) => match &f.member {
            syn::Member::Named(i) => i.to_string(),
            syn::Member::Unnamed(_) => return None,
        },
        _ => return None,
    };
    locklint_ir::vocabulary::is_override_switch(&name).then_some(name)
}

/// Where a block's bindings and conditions start.
#[derive(Debug, Clone, Copy)]
pub(super) struct BlockMarks {
    env: usize,
    deps: usize,
}

/// Identifier uses in a body's tokens with their offsets (including inside macros and format
/// strings), leaving out what is only logged.
pub(super) fn collect_uses(
    file: &SourceFile,
    body: proc_macro2::TokenStream,
    out: &mut Vec<(String, usize)>,
) {
    let mut stack = vec![body];
    while let Some(ts) = stack.pop() {
        let mut iter = ts.into_iter().peekable();
        while let Some(tt) = iter.next() {
            match tt {
                proc_macro2::TokenTree::Ident(i) => {
                    let name = i.to_string();
                    let bang = matches!(iter.peek(), Some(proc_macro2::TokenTree::Punct(p)) if p.as_char() == '!');
                    if bang && is_logging_macro(&name) {
                        iter.next();
                        iter.next();
                        continue;
                    }
                    let at = spans::to_span(file, i.span()).start;
                    out.push((name, at));
                }
                proc_macro2::TokenTree::Group(g) => stack.push(g.stream()),
                proc_macro2::TokenTree::Literal(l) => {
                    let text = l.to_string();
                    if text.contains('{') {
                        let at = spans::to_span(file, l.span()).start;
                        for piece in crate::rust::keys::parse_format(text.trim_matches('"')) {
                            if let crate::rust::keys::FmtPiece::Named(n) = piece {
                                out.push((n, at));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

impl FnWalker<'_> {
    /// The conditions the current path depends on, nearest first, bounded.
    pub(super) fn current_deps(&self) -> Vec<Dep> {
        let mut out: Vec<Dep> = Vec::new();
        for d in self.deps.iter().rev() {
            if out.len() >= MAX_DEPS {
                break;
            }
            if !out.contains(d) {
                out.push(*d);
            }
        }
        out
    }

    /// Reads and calls recorded since `mark`: what a condition depends on.
    pub(super) fn deps_since(&self, mark: usize) -> Vec<Dep> {
        self.events[mark..]
            .iter()
            .filter_map(|e| match e {
                Event::Op(o) if o.kind == OpKind::Read => Some(Dep(o.id)),
                Event::Call(c) => Some(Dep(c.id)),
                _ => None,
            })
            .collect()
    }

    /// Dependencies carried by the locals an expression mentions.
    pub(super) fn sources_in(&self, e: &syn::Expr) -> Vec<Dep> {
        let mut out = Vec::new();
        if self.depth > SHALLOW {
            return out;
        }
        let mut stack = vec![quote::ToTokens::to_token_stream(e)];
        while let Some(ts) = stack.pop() {
            for tt in ts {
                match tt {
                    proc_macro2::TokenTree::Ident(i) => {
                        if let Some(b) = self.lookup(&i.to_string()) {
                            out.extend(b.sources.iter().copied());
                        }
                    }
                    proc_macro2::TokenTree::Group(g) => stack.push(self.cx.bodies.stream_of(&g)),
                    _ => {}
                }
            }
        }
        bounded(out)
    }

    pub(super) fn condition_deps(&mut self, cond: &syn::Expr) -> Vec<Dep> {
        let mark = self.events.len();
        self.expr(cond, ResultUse::Used);
        let mut deps = self.deps_since(mark);
        deps.extend(self.sources_in(cond));
        bounded(deps)
    }

    pub(super) fn walk_block(&mut self, block: &syn::Block, tail: ResultUse) {
        if let Some(tokens) = self.cx.bodies.take(block) {
            return self.walk_taken(&tokens, tail);
        }
        let marks = self.block_start();
        let n = block.stmts.len();
        for (i, stmt) in block.stmts.iter().enumerate() {
            self.walk_stmt(stmt, i + 1 == n, &tail);
        }
        let close = self.span_of(&block.brace_token.span.close());
        self.block_end(marks, block.stmts.last(), close);
    }

    /// Where the bindings and conditions of a block start: what [`Self::block_end`] unwinds.
    pub(super) fn block_start(&self) -> BlockMarks {
        BlockMarks {
            env: self.env.len(),
            deps: self.deps.len(),
        }
    }

    /// One statement of a block; `last` for its last statement, whose value (without `;`)
    /// is used as `tail` says.
    pub(super) fn walk_stmt(&mut self, stmt: &syn::Stmt, last: bool, tail: &ResultUse) {
        let events_mark = self.events.len();
        match stmt {
            syn::Stmt::Local(l) => self.local(l),
            syn::Stmt::Expr(e, semi) => {
                let u = if last && semi.is_none() {
                    tail.clone()
                } else {
                    ResultUse::Ignored("the reply is dropped".into())
                };
                let after = self.statement_expr(e, u);
                self.deps.extend(after);
            }
            syn::Stmt::Macro(m) => {
                self.mac(&m.mac, ResultUse::Ignored("the reply is dropped".into()))
            }
            syn::Stmt::Item(syn::Item::Fn(f)) => {
                self.nested
                    .push((f.sig.clone(), (*f.block).clone(), self.impl_type.clone()));
            }
            syn::Stmt::Item(_) => {}
        }
        self.mark_statement(stmt, events_mark);
    }

    /// The end of a block whose last statement is `last` and whose closing brace is `close`:
    /// connections in its scope end, its bindings and conditions are unwound.
    pub(super) fn block_end(&mut self, marks: BlockMarks, last: Option<&syn::Stmt>, close: Span) {
        let end = match last {
            Some(last) if close.is_empty() => {
                Span::new(self.span_of(last).end, self.span_of(last).end)
            }
            _ => close,
        };
        self.conn_scope_ends(marks.env, last, end);
        self.env.truncate(marks.env);
        self.deps.truncate(marks.deps);
    }

    /// Record `stmt` as the statement of the one operation it produced, when it is a plain
    /// statement (a `let`, or an expression with `;` that is not a block or control flow).
    pub(super) fn mark_statement(&mut self, stmt: &syn::Stmt, mark: usize) {
        let plain = match stmt {
            syn::Stmt::Local(_) => true,
            syn::Stmt::Expr(e, Some(_)) => !crate::rust::block_like(e),
            _ => false,
        };
        if !plain {
            return;
        }
        // one operation; other events (calls in its arguments) must lie inside it
        let new = &self.events[mark.min(self.events.len())..];
        let ops: Vec<usize> = new
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e, Event::Op(_)))
            .map(|(i, _)| mark + i)
            .collect();
        let [at] = ops[..] else { return };
        let Event::Op(op) = &self.events[at] else {
            return;
        };
        let inside = new.iter().all(|e| match e {
            Event::Op(_) => true,
            Event::Call(c) => op.span.start <= c.span.start && c.span.end <= op.span.end,
            Event::Sql { .. } | Event::ConnEnd(_) => false,
        });
        let span = self.span_of(stmt);
        if !inside || op.stmt.is_some() || span.start > op.span.start || op.span.end > span.end {
            return;
        }
        if let Event::Op(op) = &mut self.events[at] {
            op.stmt = Some(span);
        }
    }

    /// A statement-level expression; returns dependencies that hold for the rest of the block.
    pub(super) fn statement_expr(&mut self, e: &syn::Expr, u: ResultUse) -> Vec<Dep> {
        match e {
            syn::Expr::If(i) => self.if_expr(i, u),
            syn::Expr::While(w) => self.while_expr(w),
            syn::Expr::Loop(l) => self.loop_expr(l),
            _ => {
                self.expr(e, u);
                Vec::new()
            }
        }
    }

    pub(super) fn local(&mut self, l: &syn::Local) {
        let mut names = Vec::new();
        pat_names(&l.pat, &mut names);
        let unit = matches!(&l.pat, syn::Pat::Type(t) if is_unit_type(&t.ty));
        let wildcard = match &l.pat {
            syn::Pat::Wild(_) => true,
            syn::Pat::Type(t) => matches!(&*t.pat, syn::Pat::Wild(_)),
            _ => false,
        };
        let end = self.span_of(&l.semi_token).end;
        let Some(init) = &l.init else {
            for n in names {
                self.env.push(
                    n,
                    Binding {
                        ..Default::default()
                    },
                );
            }
            return;
        };
        let u = if unit {
            ResultUse::Ignored("the reply type is `()`".into())
        } else if wildcard {
            ResultUse::Ignored("the reply is bound to `_`".into())
        } else if names.is_empty() {
            ResultUse::Used
        } else {
            ResultUse::Bound {
                names: names.clone(),
                after: end,
            }
        };
        let mark = self.events.len();
        self.last_builder = None;
        let fresh = match self.base_kind(&init.expr) {
            Some(BaseKind::Existing(_)) | None => None,
            Some(base) => Some(self.new_builder(base)),
        };
        if fresh.is_none() {
            self.expr(&init.expr, u);
        }
        let builder = fresh.or(self.last_builder.take());
        let mut sources = self.deps_since(mark);
        sources.extend(self.sources_in(&init.expr));
        let sources = bounded(sources);
        if let Some((_, diverge)) = &init.diverge {
            // let-else: the rest of the block runs only when the pattern matched
            self.expr(diverge, ResultUse::Used);
            self.deps.extend(sources.iter().copied());
        }
        let single = names.len() == 1 && self.depth <= SHALLOW;
        // a Redis reply bound here (`let v: bool = con.set_nx(..).await?`) is a value, not a
        // builder, a script invocation or a query: nothing reads its initialiser again
        let reply = builder.is_none()
            && self.events[mark.min(self.events.len())..]
                .iter()
                .any(|e| matches!(e, Event::Op(o) if matches!(o.result, ResultUse::Bound { .. })));
        let ty = match &l.pat {
            syn::Pat::Type(t) => super::super::types::receiver_name(&t.ty),
            _ => None,
        };
        let executor = if single {
            self.executor_of(&init.expr)
        } else {
            None
        };
        // `let (client, connection) = tokio_postgres::connect(..)`: the client is the session
        let first_of_tuple = matches!(&l.pat, syn::Pat::Tuple(_));
        let drop_closes = if single || first_of_tuple {
            self.drop_closes(&init.expr)
        } else {
            None
        };
        for (i, n) in names.into_iter().enumerate() {
            let (key, value, expr, init_span) = if single {
                (
                    Some(key_of(&init.expr, self)),
                    Some(value_of(&init.expr, self)),
                    if reply { None } else { initialiser(&init.expr) },
                    Some(self.span_of(&*init.expr)),
                )
            } else {
                (None, None, None, None)
            };
            self.env.push(
                n,
                Binding {
                    key: key.map(Box::new),
                    value,
                    expr,
                    init: init_span,
                    sources: sources.clone(),
                    builder,
                    executor,
                    ty: ty.clone(),
                    drop_closes: drop_closes.filter(|_| i == 0),
                    variant: None,
                    mutable: declared_mut(&l.pat),
                },
            );
        }
    }

    pub(super) fn if_expr(&mut self, i: &syn::ExprIf, u: ResultUse) -> Vec<Dep> {
        let env_mark = self.env.len();
        let deps = self.condition_deps(&i.cond);
        let deps_mark = self.deps.len();
        self.deps.extend(deps.iter().copied());
        let switch = override_switch(&i.cond);
        let switched = switch.is_some();
        self.switches.extend(switch);
        self.walk_block(&i.then_branch, u.clone());
        if switched {
            self.switches.pop();
        }
        self.env.truncate(env_mark);
        if let Some((_, els)) = &i.else_branch {
            self.expr(els, u);
        }
        self.deps.truncate(deps_mark);
        let then = block_diverges(&i.then_branch, &self.diverging);
        if then == Some(true) {
            if let Some(top) = self.loop_break_deps.last_mut() {
                top.extend(deps.iter().copied());
            }
        }
        if i.else_branch.is_none() && then.is_some() {
            return deps;
        }
        Vec::new()
    }

    pub(super) fn while_expr(&mut self, w: &syn::ExprWhile) -> Vec<Dep> {
        let env_mark = self.env.len();
        let deps = self.condition_deps(&w.cond);
        let deps_mark = self.deps.len();
        self.deps.extend(deps.iter().copied());
        self.loop_break_deps.push(Vec::new());
        self.walk_block(&w.body, ResultUse::Ignored("the reply is dropped".into()));
        let mut after = self.loop_break_deps.pop().unwrap_or_default();
        self.deps.truncate(deps_mark);
        self.env.truncate(env_mark);
        after.extend(deps);
        after
    }

    pub(super) fn loop_expr(&mut self, l: &syn::ExprLoop) -> Vec<Dep> {
        self.loop_break_deps.push(Vec::new());
        self.walk_block(&l.body, ResultUse::Ignored("the reply is dropped".into()));
        self.loop_break_deps.pop().unwrap_or_default()
    }
}

/// Whether a `let` pattern declares a mutable binding (`let mut q`, `let mut q: String`).
fn declared_mut(pat: &syn::Pat) -> bool {
    match pat {
        syn::Pat::Ident(i) => i.mutability.is_some(),
        syn::Pat::Type(t) => declared_mut(&t.pat),
        _ => false,
    }
}
