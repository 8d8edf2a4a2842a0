//! SQL and Lua text handed to a library from Rust code (`Embedded`), and the executed SQL
//! statements with their executor (pool, connection, transaction) and bound parameters.

use super::*;

impl FnWalker<'_> {
    /// The text of a same-file string const named by `e`.
    pub(super) fn const_text(&self, e: &syn::Expr) -> Option<String> {
        match e {
            syn::Expr::Path(p) => {
                let name = p.path.get_ident()?.to_string();
                self.cx.const_spans.get(&name)?;
                self.cx.consts.get(&name)?.constant_text()
            }
            syn::Expr::Reference(r) => self.const_text(&r.expr),
            _ => None,
        }
    }

    /// What runs a statement given this executor expression.
    pub(super) fn executor_of(&self, e: &syn::Expr) -> Option<Executor> {
        match e {
            syn::Expr::Reference(r) => self.executor_of(&r.expr),
            syn::Expr::Paren(p) => self.executor_of(&p.expr),
            syn::Expr::Unary(u) => self.executor_of(&u.expr),
            syn::Expr::Await(a) => self.executor_of(&a.base),
            syn::Expr::Try(t) => self.executor_of(&t.expr),
            syn::Expr::MethodCall(m) => {
                let name = m.method.to_string();
                embed::executor_of_method(&name).or_else(|| {
                    matches!(
                        name.as_str(),
                        "as_mut"
                            | "deref_mut"
                            | "as_ref"
                            | "borrow_mut"
                            | "clone"
                            | "unwrap"
                            | "expect"
                            | "lock"
                    )
                    .then(|| self.executor_of(&m.receiver))
                    .flatten()
                })
            }
            syn::Expr::Field(f) => match &f.member {
                syn::Member::Named(n) => embed::executor_of_name(&n.to_string()),
                syn::Member::Unnamed(_) => None,
            },
            syn::Expr::Path(p) => {
                let name = p.path.get_ident()?.to_string();
                if let Some(b) = self.lookup(&name) {
                    return b.executor.or_else(|| embed::executor_of_name(&name));
                }
                self.param_types
                    .iter()
                    .find(|(n, _)| *n == name)
                    .and_then(|(_, t)| {
                        let sea_orm = self.cx.orm.sea_orm;
                        sea_orm
                            .then(|| embed::sea_orm_executor_of_type(t))
                            .flatten()
                            .or_else(|| embed::executor_of_type(t))
                    })
                    .or_else(|| embed::executor_of_name(&name))
            }
            syn::Expr::Call(c) => {
                let (name, _) = path_last(&c.func)?;
                (name == "connect").then_some(Executor::Connection)
            }
            _ => None,
        }
    }

    /// Record the text of a string literal handed to a SQL or Lua API; returns its file index.
    pub(super) fn embed_literal(
        &mut self,
        e: &syn::Expr,
        language: Language,
        origin: Origin,
    ) -> Option<usize> {
        let lit = match e {
            syn::Expr::Lit(l) => l,
            syn::Expr::Reference(r) => return self.embed_literal(&r.expr, language, origin),
            syn::Expr::Paren(p) => return self.embed_literal(&p.expr, language, origin),
            syn::Expr::Path(p) => {
                let name = p.path.segments.last()?.ident.to_string();
                if let Some(span) = self.cx.const_spans.get(&name) {
                    return self.embed_span(*span, language, origin);
                }
                return self.embed_formatted_local(p, language);
            }
            _ => return None,
        };
        if !matches!(lit.lit, syn::Lit::Str(_) | syn::Lit::ByteStr(_)) {
            return None;
        }
        self.embed_span(self.span_of(lit), language, origin)
    }

    /// The SQL a local holds when its initialiser is a `format!` (or `String::from`, `.to_string()`
    /// of a literal) whose literal starts like SQL: embedded once per local (a second run of the
    /// same local finds it again, `formatted_local`).
    fn embed_formatted_local(&mut self, p: &syn::ExprPath, language: Language) -> Option<usize> {
        if language != Language::Sql {
            return None;
        }
        let lit = self.formatted_literal_of(p)?;
        if let Some(&idx) = self.formatted.get(&lit) {
            return Some(idx);
        }
        let text = self.cx.file.snippet(lit);
        let (decoded, _) = crate::rust::literal::decode(text, lit.start)?;
        if !crate::rust::embed::looks_like_sql(&decoded) {
            return None;
        }
        let idx = self.embed_span(lit, language, Origin::Formatted)?;
        self.formatted.insert(lit, idx);
        Some(idx)
    }

    /// The embedded text a chain's base call runs through a local (`sqlx::query(&q)` with `q`
    /// from `format!`), when one was embedded for it.
    fn formatted_local(&self, base: &syn::Expr) -> Option<usize> {
        let syn::Expr::Call(c) = base else {
            return None;
        };
        let mut arg = c.args.first()?;
        while let syn::Expr::Reference(r) = arg {
            arg = &r.expr;
        }
        let syn::Expr::Path(p) = arg else {
            return None;
        };
        self.formatted.get(&self.formatted_literal_of(p)?).copied()
    }

    /// The literal the immutable local `p` names builds its text from ([`formatted_literal`]).
    fn formatted_literal_of(&self, p: &syn::ExprPath) -> Option<Span> {
        let name = p.path.get_ident()?.to_string();
        let binding = self.lookup(&name).filter(|b| !b.mutable)?;
        formatted_literal(self.cx.file, binding.expr.as_deref()?)
    }

    pub(super) fn embed_span(
        &mut self,
        span: Span,
        language: Language,
        origin: Origin,
    ) -> Option<usize> {
        let src = self.cx.file.snippet(span);
        let (text, map) = crate::rust::literal::decode(src, span.start)?;
        self.embedded.push(Embedded {
            language,
            text,
            map,
            span,
            origin,
            func: Some(self.func_idx),
            exec: None,
            statement: None,
        });
        Some(self.embedded_base + self.embedded.len() - 1)
    }

    /// The binds of `sqlx::query("..").bind(a).bind(b)` or `sqlx::query!("..", a, b)`, in
    /// order, when the chain starts from the statement's literal itself: the span removing
    /// each one deletes, and what it binds.
    pub(super) fn chain_binds(&self, e: &syn::Expr) -> Option<Vec<Bind>> {
        let mut binds = Vec::new();
        let mut cur = e;
        loop {
            match cur {
                syn::Expr::MethodCall(m) => {
                    if m.method == "bind" {
                        let start = self.span_of(&*m.receiver).end;
                        let end = self.span_of(&m.paren_token.span.close()).end;
                        let key = m
                            .args
                            .first()
                            .map_or_else(|| KeyRef::hole(None), |a| key_of(a, self));
                        let named = m.args.first().and_then(named_literal);
                        binds.push((Span::new(start, end), key, named));
                    }
                    cur = &m.receiver;
                }
                syn::Expr::Paren(p) => cur = &p.expr,
                _ => break,
            }
        }
        binds.reverse();
        match cur {
            syn::Expr::Call(c) => {
                let literal = c.args.first().is_some_and(|a| str_lit(a).is_some())
                    || self.formatted_local(cur).is_some();
                (literal && c.args.len() == 1).then_some(binds)
            }
            syn::Expr::Macro(m) if binds.is_empty() => {
                let args = macro_args(&m.mac)?;
                let first = args.first()?;
                str_lit(first)?;
                let mut prev = self.span_of(first).end;
                let mut out = Vec::new();
                for a in &args[1..] {
                    let end = self.span_of(a).end;
                    out.push((Span::new(prev, end), key_of(a, self), named_literal(a)));
                    prev = end;
                }
                Some(out)
            }
            _ => None,
        }
    }

    /// The parameters of a tokio-postgres call, `&[&a, &b]`: the span removing each deletes,
    /// and what it binds.
    pub(super) fn slice_binds(&self, params: &syn::Expr) -> Option<Vec<Bind>> {
        let syn::Expr::Reference(r) = params else {
            return None;
        };
        let syn::Expr::Array(a) = &*r.expr else {
            return None;
        };
        let elems: Vec<Span> = a.elems.iter().map(|e| self.span_of(e)).collect();
        let out = elems
            .iter()
            .zip(&a.elems)
            .enumerate()
            .map(|(i, (s, e))| {
                let span = match (i, elems.get(i + 1)) {
                    (0, Some(next)) => Span::new(s.start, next.start),
                    (0, None) => *s,
                    _ => Span::new(elems[i - 1].end, s.end),
                };
                (span, key_of(e, self), named_literal(e))
            })
            .collect();
        Some(out)
    }

    /// Mark an embedded statement as run here, by this executor (and the variable holding it).
    pub(super) fn sql_exec(
        &mut self,
        idx: usize,
        (executor, var): (Option<Executor>, Option<String>),
        method: &str,
        span: Span,
        result: ResultUse,
        binds: Option<Vec<Bind>>,
    ) {
        let id = self.node();
        let var = var.filter(|_| executor == Some(Executor::Connection));
        let conn_closes = var
            .as_deref()
            .and_then(|v| self.lookup(v))
            .and_then(|b| b.drop_closes);
        if let Some(e) = self.embedded.get_mut(idx - self.embedded_base) {
            if e.exec.is_some() {
                return;
            }
            e.exec = Some(SqlExec {
                id,
                executor: executor.unwrap_or(Executor::Unknown),
                method: method.to_string(),
                span,
                result,
                bind_keys: binds
                    .as_ref()
                    .map(|b| b.iter().map(|(_, k, _)| k.clone()).collect())
                    .unwrap_or_default(),
                bind_literals: binds
                    .as_ref()
                    .map(|b| b.iter().map(|(_, _, n)| n.clone()).collect())
                    .unwrap_or_default(),
                binds: binds.map(|b| b.into_iter().map(|(s, ..)| s).collect()),
                conn: var,
                conn_closes,
            });
            self.events.push(Event::Sql { id, embedded: idx });
        }
    }

    /// The embedded statement a method chain starts from (`sqlx::query("..").bind(..)`).
    pub(super) fn chain_embedded(&self, e: &syn::Expr) -> Option<usize> {
        let mut cur = e;
        loop {
            match cur {
                syn::Expr::MethodCall(m) => cur = &m.receiver,
                syn::Expr::Reference(r) => cur = &r.expr,
                syn::Expr::Paren(p) => cur = &p.expr,
                _ => break,
            }
        }
        let start = self.span_of(cur).start;
        self.embedded
            .iter()
            .enumerate()
            .rev()
            .find(|(_, x)| {
                x.language == Language::Sql
                    && x.span.start >= start
                    && self.is_base_literal(cur, x.span)
            })
            .map(|(i, _)| self.embedded_base + i)
            .or_else(|| self.formatted_local(cur))
    }

    /// A sea-orm `Statement` built from SQL text, handed to a `ConnectionTrait` method
    /// (`db.query_one(stmt)`): built in place (`Statement::from_sql_and_values(b, "..", v)`)
    /// or by the initialiser of the local named. The expression that builds it.
    pub(super) fn sea_orm_statement<'e>(&'e self, arg: &'e syn::Expr) -> Option<&'e syn::Expr> {
        match arg {
            syn::Expr::Reference(r) => self.sea_orm_statement(&r.expr),
            syn::Expr::Paren(p) => self.sea_orm_statement(&p.expr),
            syn::Expr::Path(p) => {
                let init = self
                    .lookup(&p.path.get_ident()?.to_string())?
                    .expr
                    .as_deref()?;
                matches!(init, syn::Expr::Call(_))
                    .then(|| self.sea_orm_statement(init))
                    .flatten()
            }
            syn::Expr::Call(c) => {
                let (name, full) = path_last(&c.func)?;
                let site = embed::call_site(&name, &full, c.args.len(), false)?;
                (site.origin == Library::SeaOrm).then_some(arg)
            }
            _ => None,
        }
    }

    pub(super) fn is_base_literal(&self, base: &syn::Expr, lit: Span) -> bool {
        let s = self.span_of(base);
        s.start <= lit.start && lit.end <= s.end
    }
}

/// A bound parameter: the span removing it deletes, what it binds, and what it names when it
/// is a constant that names something ([`named_literal`]).
pub(super) type Bind = (Span, KeyRef, Option<String>);

/// What a bound value names when it is a constant (`orm::constant_name`), through references
/// and conversions to text (`&JobStatus::Running.to_string()`, `.as_str()`, `.into()`).
pub(super) fn named_literal(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Reference(r) => named_literal(&r.expr),
        syn::Expr::Paren(p) => named_literal(&p.expr),
        syn::Expr::MethodCall(m)
            if m.args.is_empty()
                && matches!(
                    m.method.to_string().as_str(),
                    "to_string" | "as_str" | "as_ref" | "into" | "to_owned" | "clone"
                ) =>
        {
            named_literal(&m.receiver)
        }
        e => super::orm::constant_name(e),
    }
}

/// The literal a local's initialiser builds its text from: `format!("..", ..)`,
/// `String::from("..")`, `"..".to_string()` / `.to_owned()` / `.into()`.
fn formatted_literal(file: &locklint_ir::source::SourceFile, init: &syn::Expr) -> Option<Span> {
    let lit = match init {
        syn::Expr::Macro(m) if m.mac.path.is_ident("format") => {
            let args = crate::rust::keys::macro_args(&m.mac)?;
            match args.into_iter().next()? {
                syn::Expr::Lit(l) => l,
                _ => return None,
            }
        }
        syn::Expr::Call(c) if c.args.len() == 1 => {
            let syn::Expr::Path(f) = &*c.func else {
                return None;
            };
            let segs: Vec<String> = f
                .path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect();
            if segs != ["String", "from"] {
                return None;
            }
            match &c.args[0] {
                syn::Expr::Lit(l) => l.clone(),
                _ => return None,
            }
        }
        syn::Expr::MethodCall(m)
            if m.args.is_empty()
                && matches!(
                    m.method.to_string().as_str(),
                    "to_string" | "to_owned" | "into"
                ) =>
        {
            match &*m.receiver {
                syn::Expr::Lit(l) => l.clone(),
                _ => return None,
            }
        }
        _ => return None,
    };
    if !matches!(lit.lit, syn::Lit::Str(_)) {
        return None;
    }
    Some(crate::rust::spans::of(file, &lit))
}
