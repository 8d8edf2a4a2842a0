//! The one walk over expressions: every expression, macro, call and method call is visited
//! here and handed to the recognisers (Redis commands in `redis`, SQL and Lua texts in
//! `embedded`), or recorded as a call of a possible lock helper.

use super::*;
use locklint_ir::vocabulary;

/// Whether an arm of a `match` gives back what it matched: its pattern binds a name its body
/// uses (`Ok(v) => Ok(v)`, `other => other`). `Some(_) => Ok(())` does not: the scrutinee is
/// inspected, and the arm makes a value of its own.
fn passes_scrutinee_on(m: &syn::ExprMatch, bodies: &crate::rust::bodies::Bodies) -> bool {
    m.arms.iter().any(|arm| {
        let mut bound = Vec::new();
        pat_names(&arm.pat, &mut bound);
        let mut used = false;
        if !bound.is_empty() {
            idents_of(&arm.body, bodies, |i| used |= bound.iter().any(|b| i == b));
        }
        used
    })
}

/// Statements of a macro body written like a block (`tokio::select!` arms are not).
pub(super) struct BlockBody(Vec<syn::Stmt>);

impl syn::parse::Parse for BlockBody {
    fn parse(input: syn::parse::ParseStream) -> syn::Result<Self> {
        Ok(BlockBody(syn::Block::parse_within(input)?))
    }
}

impl FnWalker<'_> {
    pub(super) fn expr(&mut self, e: &syn::Expr, u: ResultUse) {
        if self.depth > MAX_DEPTH {
            return;
        }
        if u == ResultUse::Returned && self.depth <= SHALLOW {
            let returned = &mut self.returned_names;
            match e {
                // a `match` returns its arms' values (collected as they are walked); its
                // scrutinee flows out only through the names an arm's pattern binds
                syn::Expr::Match(m) if !passes_scrutinee_on(m, self.cx.bodies) => {}
                _ => idents_of(e, self.cx.bodies, |i| {
                    returned.insert(i.to_string());
                }),
            }
        }
        self.depth += 1;
        self.expr_inner(e, u);
        self.depth -= 1;
    }

    pub(super) fn expr_inner(&mut self, e: &syn::Expr, u: ResultUse) {
        use syn::Expr as E;
        match e {
            E::MethodCall(m) => self.method_call(m, u),
            E::Call(c) => self.call(c, u),
            E::Await(a) => self.expr(&a.base, u),
            E::Try(t) => self.expr(&t.expr, u),
            E::Paren(p) => self.expr(&p.expr, u),
            E::Group(g) => self.expr(&g.expr, u),
            E::Reference(r) => self.expr(&r.expr, ResultUse::Used),
            E::Unary(x) => self.expr(&x.expr, ResultUse::Used),
            E::Cast(c) => self.expr(&c.expr, u),
            E::Binary(b) => {
                self.expr(&b.left, ResultUse::Used);
                self.expr(&b.right, ResultUse::Used);
            }
            E::If(i) => {
                self.if_expr(i, u);
            }
            E::While(w) => {
                self.while_expr(w);
            }
            E::Loop(l) => {
                self.loop_expr(l);
            }
            E::ForLoop(f) => {
                self.expr(&f.expr, ResultUse::Used);
                let mark = self.env.len();
                let mut names = Vec::new();
                pat_names(&f.pat, &mut names);
                // one element of `lock_keys` keeps the collection's names as hints of its
                // purpose; it is a key of its own
                let hints = (names.len() == 1 && self.depth <= SHALLOW)
                    .then(|| key_of(&f.expr, self).names)
                    .filter(|h| !h.is_empty());
                for n in names {
                    let key = hints.as_ref().map(|h| {
                        let mut k = KeyRef::hole(Some(n.clone()));
                        k.add_names(h.iter().cloned());
                        k
                    });
                    self.env.push(
                        n,
                        Binding {
                            key: key.map(Box::new),
                            ..Default::default()
                        },
                    );
                }
                self.loop_break_deps.push(Vec::new());
                self.walk_block(&f.body, ResultUse::Ignored("the reply is dropped".into()));
                self.loop_break_deps.pop();
                self.env.truncate(mark);
            }
            E::Match(m) => {
                let deps = self.condition_deps(&m.expr);
                let deps_mark = self.deps.len();
                self.deps.extend(deps.iter().copied());
                for arm in &m.arms {
                    let mark = self.env.len();
                    let mut names = Vec::new();
                    pat_names(&arm.pat, &mut names);
                    let variant = variant_binding(&arm.pat, self.impl_type.as_deref());
                    for n in names {
                        let variant = variant
                            .as_ref()
                            .filter(|(b, _, _)| *b == n)
                            .map(|(_, e, v)| (e.clone(), v.clone()));
                        self.env.push(
                            n,
                            Binding {
                                sources: deps.clone(),
                                variant,
                                ..Default::default()
                            },
                        );
                    }
                    if let Some((_, g)) = &arm.guard {
                        self.expr(g, ResultUse::Used);
                    }
                    self.expr(&arm.body, u.clone());
                    self.env.truncate(mark);
                }
                self.deps.truncate(deps_mark);
            }
            E::Let(l) => {
                let mark = self.events.len();
                self.expr(&l.expr, ResultUse::Used);
                let mut sources = self.deps_since(mark);
                sources.extend(self.sources_in(&l.expr));
                let sources = bounded(sources);
                let mut names = Vec::new();
                pat_names(&l.pat, &mut names);
                let variant = variant_binding(&l.pat, self.impl_type.as_deref());
                for n in names {
                    let variant = variant
                        .as_ref()
                        .filter(|(b, _, _)| *b == n)
                        .map(|(_, e, v)| (e.clone(), v.clone()));
                    self.env.push(
                        n,
                        Binding {
                            sources: sources.clone(),
                            variant,
                            ..Default::default()
                        },
                    );
                }
            }
            E::Block(b) => self.walk_block(&b.block, u),
            E::Unsafe(b) => self.walk_block(&b.block, u),
            E::Async(b) => self.walk_block(&b.block, ResultUse::Used),
            E::TryBlock(b) => self.walk_block(&b.block, ResultUse::Used),
            E::Const(b) => self.walk_block(&b.block, ResultUse::Used),
            E::Closure(c) => {
                let mark = self.env.len();
                for input in &c.inputs {
                    let mut names = Vec::new();
                    pat_names(input, &mut names);
                    for n in names {
                        self.env.push(
                            n,
                            Binding {
                                ..Default::default()
                            },
                        );
                    }
                }
                self.expr(&c.body, ResultUse::Used);
                self.env.truncate(mark);
            }
            E::Return(r) => {
                if let Some(x) = &r.expr {
                    self.expr(x, ResultUse::Returned);
                }
            }
            E::Break(b) => {
                if let Some(x) = &b.expr {
                    self.expr(x, ResultUse::Used);
                }
            }
            E::Assign(a) => {
                let mark = self.events.len();
                let name = match &*a.left {
                    syn::Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
                    _ => None,
                };
                let u = match &name {
                    Some(n) if n != "_" => ResultUse::Bound {
                        names: vec![n.clone()],
                        after: self.span_of(&a.eq_token).end,
                    },
                    Some(_) => ResultUse::Ignored("the reply is bound to `_`".into()),
                    None => ResultUse::Used,
                };
                self.expr(&a.right, u);
                self.expr(&a.left, ResultUse::Used);
                if let Some(n) = name.filter(|_| self.depth <= SHALLOW) {
                    let mut sources = self.deps_since(mark);
                    sources.extend(self.sources_in(&a.right));
                    let sources = bounded(sources);
                    let key = key_of(&a.right, self);
                    let value = value_of(&a.right, self);
                    let executor = self.executor_of(&a.right);
                    self.env.push(
                        n,
                        Binding {
                            key: Some(Box::new(key)),
                            value: Some(value),
                            expr: initialiser(&a.right),
                            init: Some(self.span_of(&*a.right)),
                            sources,
                            builder: None,
                            executor,
                            ty: None,
                            drop_closes: self.drop_closes(&a.right),
                            variant: None,
                            mutable: false,
                        },
                    );
                }
            }
            E::Struct(s) => {
                if let Some(ty) = s.path.segments.last().map(|x| x.ident.to_string()) {
                    let ty = if ty == "Self" {
                        self.impl_type.clone().unwrap_or(ty)
                    } else {
                        ty
                    };
                    for f in &s.fields {
                        if let syn::Member::Named(n) = &f.member {
                            let k = key_of(&f.expr, self);
                            if k.has_literal() || k.call.is_some() {
                                self.field_inits.push((ty.clone(), n.to_string(), k));
                            }
                            if let Some(t) = super::super::literal_times::of_field(
                                &ty,
                                &n.to_string(),
                                &f.expr,
                                self.span_of(f),
                            ) {
                                self.literal_times.push(t);
                            }
                        }
                    }
                }
                for f in &s.fields {
                    self.expr(&f.expr, ResultUse::Used);
                }
                if let Some(r) = &s.rest {
                    self.expr(r, ResultUse::Used);
                }
            }
            E::Macro(m) => self.mac(&m.mac, u),
            E::Tuple(t) => t.elems.iter().for_each(|x| self.expr(x, ResultUse::Used)),
            E::Array(t) => t.elems.iter().for_each(|x| self.expr(x, ResultUse::Used)),
            E::Index(i) => {
                self.expr(&i.expr, ResultUse::Used);
                self.expr(&i.index, ResultUse::Used);
            }
            E::Field(f) => self.expr(&f.base, ResultUse::Used),
            E::Range(r) => {
                if let Some(s) = &r.start {
                    self.expr(s, ResultUse::Used);
                }
                if let Some(s) = &r.end {
                    self.expr(s, ResultUse::Used);
                }
            }
            E::Repeat(r) => self.expr(&r.expr, ResultUse::Used),
            E::Yield(y) => {
                if let Some(x) = &y.expr {
                    self.expr(x, ResultUse::Used);
                }
            }
            _ => {}
        }
    }

    pub(super) fn mac(&mut self, mac: &syn::Macro, u: ResultUse) {
        let name = mac
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        if name == "format" || name == "concat" {
            return;
        }
        let full = path_text(&mac.path);
        if let Some(i) = embed::macro_site(&name, &full, self.cx.sqlx) {
            if let Some(a) = macro_args(mac).and_then(|args| args.into_iter().nth(i)) {
                self.embed_literal(&a, Language::Sql, Origin::SqlxMacro);
            }
        }
        self.macro_depth += 1;
        self.mac_body(mac, &name, u);
        self.macro_depth -= 1;
    }

    pub(super) fn mac_body(&mut self, mac: &syn::Macro, name: &str, u: ResultUse) {
        if let Some(args) = macro_args(mac) {
            let single = args.len() == 1;
            for a in &args {
                let au = if single && matches!(name, "dbg") {
                    u.clone()
                } else {
                    ResultUse::Used
                };
                self.expr(a, au);
            }
        } else if crate::rust::depth::check(mac.tokens.clone()).is_some() {
            // too deep to parse: not analysed
        } else if let Some(block) = block_body(mac.tokens.clone()) {
            let b = syn::Block {
                brace_token: Default::default(),
                stmts: block.0,
            };
            self.walk_block(&b, ResultUse::Used);
        }
    }

    pub(super) fn call(&mut self, c: &syn::ExprCall, u: ResultUse) {
        let Some((name, full)) = path_last(&c.func) else {
            self.expr(&c.func, ResultUse::Used);
            for a in &c.args {
                self.expr(a, ResultUse::Used);
            }
            return;
        };
        if (name == "transaction" || name == "transaction_async")
            && (full.contains("redis") || self.cx.mentions_redis)
        {
            self.watched += 1;
            for a in &c.args {
                self.expr(a, ResultUse::Used);
            }
            self.watched -= 1;
            return;
        }
        if let Some(site) = embed::call_site(&name, &full, c.args.len(), self.cx.sqlx) {
            if let Some(arg) = c.args.iter().nth(site.arg) {
                self.embed_literal(arg, site.language, Origin::Library(site.origin));
            }
        } else if let Some(arg) = c
            .args
            .first()
            .filter(|a| embed::database_wrapper(&name, &full) && sql_literal(a))
        {
            // a project's own wrapper of sqlx's query builder (`utils::database::query("..")`)
            self.embed_literal(
                arg,
                Language::Sql,
                Origin::Library(locklint_ir::Library::Sqlx),
            );
        }
        self.conn_drop(c, &name, &full);
        if matches!(name.as_str(), "Some" | "Ok" | "Err" | "Box" | "Arc" | "Rc")
            && c.args.len() == 1
        {
            self.expr(&c.args[0], u);
            return;
        }
        let is_ctor = name
            .chars()
            .next()
            .is_some_and(|ch| ch.is_ascii_uppercase());
        if !is_ctor && !is_std_method(&name) {
            let args = per_arg(&c.args, |a| key_of(a, self));
            let values = self.arg_values(&c.args);
            let id = self.node();
            let span = self
                .span_of(&*c.func)
                .join(self.span_of(&c.paren_token.span.close()));
            self.events.push(Event::Call(Box::new(Call {
                id,
                name,
                method: false,
                on_self: false,
                receiver: self.path_type(&c.func),
                args,
                values,
                span,
                result: u,
                deps: self.current_deps(),
                arg_params: per_arg(&c.args, |a| self.arg_params(a)),
            })));
        }
        for a in &c.args {
            self.expr(a, ResultUse::Used);
        }
    }

    /// Whether a command method's receiver is taken for a Redis client: in a file that talks to
    /// Redis, or, where the file names an NX acquire, when the command's key is a lock key
    /// (`funs.cache().set_nx(&lock_key, ..)` on a framework's cache handle).
    fn speaks_redis(&self, args: &[syn::Expr]) -> bool {
        self.cx.mentions_redis
            || (self.cx.names_nx_acquire
                && args
                    .first()
                    .is_some_and(|k| vocabulary::key_names_lock(&key_of(k, self), &[])))
    }

    /// A call's arguments as values written, with their spans.
    fn arg_values(&self, args: &Args) -> Vec<(Value, Span)> {
        per_arg(args, |a| (value_of(a, self), self.span_of(a)))
    }

    pub(super) fn method_call(&mut self, m: &syn::ExprMethodCall, u: ResultUse) {
        let name = m.method.to_string();
        if let Some(base) = self.builder_base(m) {
            self.builder_chain(m, base, u);
            return;
        }
        if name == "await" {
            self.expr(&m.receiver, u);
            return;
        }
        if commands::is_passthrough(&name) {
            self.expr(&m.receiver, u);
            for a in &m.args {
                self.expr(a, ResultUse::Used);
            }
            return;
        }
        if commands::discards_value(&name) && m.args.is_empty() {
            self.expr(
                &m.receiver,
                ResultUse::Ignored(
                    "only success is checked (`is_ok()`/`is_err()`), not the reply".into(),
                ),
            );
            return;
        }
        if self.orm_write(m, &u) {
            return;
        }
        self.conn_method(m, &u);
        if matches!(name.as_str(), "invoke" | "invoke_async") {
            self.script_invocation(m, u);
            return;
        }
        self.invocation_key(m);
        let first_is_literal = m
            .args
            .first()
            .is_some_and(|a| str_lit(a).is_some() || self.const_text(a).is_some());
        if self.cx.orm.sea_orm
            && m.args.len() == 1
            && matches!(
                name.as_str(),
                "execute" | "query_one" | "query_all" | "stream"
            )
        {
            // sea-orm's `ConnectionTrait`: `db.query_one(stmt)` runs a `Statement` built from
            // SQL text, on the connection (a pool for `DatabaseConnection`) it is called on
            if let Some(built) = self.sea_orm_statement(&m.args[0]).cloned() {
                self.expr(&m.receiver, ResultUse::Used);
                self.expr(&m.args[0], ResultUse::Used);
                if let Some(idx) = self.chain_embedded(&built) {
                    let span = self
                        .span_of(&m.method)
                        .join(self.span_of(&m.paren_token.span.close()));
                    let executor = self.executor_of(&m.receiver);
                    let conn = conns::conn_var(&m.receiver);
                    self.sql_exec(idx, (executor, conn), &name, span, u.clone(), None);
                }
                return;
            }
        }
        if embed::is_exec_method(&name) && m.args.len() == 1 && !first_is_literal {
            // `sqlx::query("..").bind(..).execute(&pool)`: the statement runs here
            self.expr(&m.receiver, ResultUse::Used);
            let span = self
                .span_of(&m.method)
                .join(self.span_of(&m.paren_token.span.close()));
            if let Some(idx) = self.chain_embedded(&m.receiver) {
                let executor = self.executor_of(&m.args[0]);
                let binds = self.chain_binds(&m.receiver);
                let conn = conns::conn_var(&m.args[0]);
                self.sql_exec(idx, (executor, conn), &name, span, u.clone(), binds);
            }
            self.expr(&m.args[0], ResultUse::Used);
            return;
        }
        if first_is_literal {
            match embed::method_site(&name) {
                Some(Language::Sql) => {
                    let text = str_lit(&m.args[0]).or_else(|| self.const_text(&m.args[0]));
                    if text.as_deref().is_some_and(embed::looks_like_sql) {
                        if let Some(idx) = self.embed_literal(
                            &m.args[0],
                            Language::Sql,
                            Origin::Method(name.clone()),
                        ) {
                            let span = self
                                .span_of(&m.method)
                                .join(self.span_of(&m.paren_token.span.close()));
                            let executor = self.executor_of(&m.receiver);
                            let conn = conns::conn_var(&m.receiver);
                            let binds = match m.args.iter().nth(1) {
                                None => Some(Vec::new()),
                                Some(params) => self.slice_binds(params),
                            }
                            .filter(|_| str_lit(&m.args[0]).is_some());
                            self.sql_exec(idx, (executor, conn), &name, span, u.clone(), binds);
                        }
                    }
                }
                Some(Language::Lua) if self.cx.mentions_redis => {
                    self.embed_literal(&m.args[0], Language::Lua, Origin::Method(name.clone()));
                }
                _ => {}
            }
        }
        if matches!(name.as_str(), "eval" | "evalsha")
            && m.args.len() == 3
            && self.cx.mentions_redis
        {
            self.fred_eval(m, u.clone());
        }
        let args: Vec<syn::Expr> = m.args.iter().cloned().collect();
        if self.speaks_redis(&args) && commands::is_command_method(&name) {
            if let Some(t) = commands::typed(&name, &args, self) {
                let result = if turbofish_unit(m.turbofish.as_ref()) {
                    ResultUse::Ignored("the reply type is `()`".into())
                } else {
                    u
                };
                let start = self.span_of(&m.method).start;
                let end = self.span_of(&m.paren_token.span.close()).end;
                // a chained receiver (`x.set_nx(..).expire(..)`) runs first
                self.expr(&m.receiver, ResultUse::Used);
                for a in &args {
                    self.expr(a, ResultUse::Used);
                }
                let before = self.events.len();
                self.emit_typed(&t, &args, Span::new(start, end), result, Channel::Direct);
                if self.events.len() > before {
                    let receiver = self.span_of(&*m.receiver);
                    let options = self.option_bindings(&args);
                    let root = receiver_root(&m.receiver);
                    if let Some(Event::Op(op)) = self.events.last_mut() {
                        op.receiver = Some(receiver);
                        op.receiver_root = root;
                        op.option_spans = options;
                    }
                }
                return;
            }
        }
        // a wrapper's method named like a command: the command, and the call beside it (the
        // project layer keeps the one that applies, see `Op::described`)
        if let Some(t) = commands::described(&name, args.len()).filter(|_| self.speaks_redis(&args))
        {
            let start = self.span_of(&m.method).start;
            let end = self.span_of(&m.paren_token.span.close()).end;
            let before = self.events.len();
            self.emit_typed(&t, &args, Span::new(start, end), u.clone(), Channel::Direct);
            if self.events.len() > before {
                let receiver = self.span_of(&*m.receiver);
                let root = receiver_root(&m.receiver);
                if let Some(Event::Op(op)) = self.events.last_mut() {
                    op.receiver = Some(receiver);
                    op.receiver_root = root;
                    op.described = true;
                }
            }
        }
        if !is_std_method(&name) {
            let args_k = per_arg(&m.args, |a| key_of(a, self));
            let values = self.arg_values(&m.args);
            let id = self.node();
            let span = self
                .span_of(&m.method)
                .join(self.span_of(&m.paren_token.span.close()));
            self.events.push(Event::Call(Box::new(Call {
                id,
                name,
                method: true,
                on_self: is_self(&m.receiver),
                receiver: self.receiver_of(&m.receiver),
                args: args_k,
                values,
                span,
                result: u,
                deps: self.current_deps(),
                arg_params: per_arg(&m.args, |a| self.arg_params(a)),
            })));
        }
        self.expr(&m.receiver, ResultUse::Used);
        for a in &m.args {
            self.expr(a, ResultUse::Used);
        }
    }
}

/// A string literal whose text starts like a SQL statement.
fn sql_literal(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => embed::looks_like_sql(&s.value()),
        syn::Expr::Reference(r) => sql_literal(&r.expr),
        syn::Expr::Paren(p) => sql_literal(&p.expr),
        _ => false,
    }
}

/// A call's arguments as the parser gives them.
type Args = syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>;

/// `f` of each argument, in a vector of exactly their number: the IR keeps one per call, and
/// collecting from the parser's list (whose iterator the standard library cannot trust for its
/// length) would reserve room for four.
fn per_arg<T>(args: &Args, f: impl FnMut(&syn::Expr) -> T) -> Vec<T> {
    let mut out = Vec::with_capacity(args.len());
    out.extend(args.iter().map(f));
    out
}

/// A macro's tokens read as statements, also after a leading `async` or `move` that marks how
/// the macro runs them (`attempt! { async with_transaction!(pool, |tx| { .. })? }`): the body
/// runs where the macro is.
fn block_body(tokens: proc_macro2::TokenStream) -> Option<BlockBody> {
    if let Ok(block) = syn::parse2::<BlockBody>(tokens.clone()) {
        return Some(block);
    }
    let mut iter = tokens.into_iter();
    match iter.next() {
        Some(proc_macro2::TokenTree::Ident(i)) if i == "async" || i == "move" => {}
        _ => return None,
    }
    let rest: proc_macro2::TokenStream = iter.collect();
    if rest.is_empty() {
        return None;
    }
    syn::parse2::<BlockBody>(rest).ok()
}
