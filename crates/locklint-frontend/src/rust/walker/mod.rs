//! Walks one function body in source order and records Redis operations and calls, with
//! what each reply is used for and which earlier reads the current path depends on.
//!
//! `FnWalker` holds the walk's state (bindings in scope, pending command builders, the events
//! so far); its methods are split by concept: `flow` (blocks, statements, bindings,
//! conditions, loops, name uses), `exprs` (the one walk over expressions, dispatching to the
//! recognisers), `redis` (commands, builders, pipelines, scripts) and `embedded` (SQL and Lua
//! text handed to libraries, executed statements).

use super::commands::{self, CmdArg, OptionSource};
use super::embed;
use super::env::Env;
use super::keys::{is_std_method, key_of, macro_args, path_text, value_of, Scope};
use super::laid_out;
use super::spans;
use locklint_ir::source::{SourceFile, Span};
use locklint_ir::Origin;
use locklint_ir::{
    Call, Channel, Dep, Embedded, Event, Executor, Function, KeyRef, Language, Library, NodeId, Op,
    OpKind, Receiver, ResultUse, SqlExec, Value,
};
use std::collections::{HashMap, HashSet};

mod conns;
mod embedded;
mod exprs;
mod flow;
pub(super) mod orm;
mod redis;

use flow::{bounded, collect_uses};
use redis::{BaseKind, Builder};
use syn::spanned::Spanned;

/// What walking one function gives: the function, the `fn` items nested in it (to walk next),
/// struct field initialisers and the SQL and Lua texts it hands to libraries.
pub type Walked = (
    Function,
    Vec<(syn::Signature, syn::Block, Option<String>)>,
    Vec<(String, String, KeyRef)>,
    Vec<Embedded>,
    Vec<locklint_ir::LiteralTime>,
);

/// Per-file context shared by every function walker.
pub struct FileCtx<'a> {
    pub file: &'a SourceFile,
    pub file_idx: usize,
    /// The file talks to Redis (names a client, `prefilter::names_redis`): typed command
    /// methods are recognised.
    pub mentions_redis: bool,
    /// The file names an NX acquire (`set_nx`, `setnx`): command methods of a client the file
    /// does not name (a framework's cache handle) are recognised on lock keys.
    pub names_nx_acquire: bool,
    pub consts: &'a HashMap<String, KeyRef>,
    /// The file mentions sqlx: `query(..)` calls are sqlx's.
    pub sqlx: bool,
    /// Spans of string literals of `const`/`static` items, by name.
    pub const_spans: &'a HashMap<String, Span>,
    /// Function bodies left out of the file's tree, parsed when walked.
    pub bodies: &'a super::bodies::Bodies,
    /// What walking them may still spend, and why the walk stopped.
    pub budget: &'a super::size::Budget,
    /// Whether the file names diesel or sea-orm, and its sea-orm entities' tables.
    pub orm: orm::OrmFile,
}

/// Deeper expressions than this are not descended into.
const MAX_DEPTH: usize = 200;
/// Conditions an event keeps (the nearest ones): enough for check-then-act, bounded for generated code.
const MAX_DEPS: usize = 16;
/// Below this expression depth, per-node work that reads a whole subtree is skipped.
const SHALLOW: usize = 12;

#[derive(Debug, Clone, Default)]
struct Binding {
    key: Option<Box<KeyRef>>,
    value: Option<Value>,
    /// The initialiser, for what is read from it later (option words, a script invocation
    /// being built, an ORM query): not kept for arithmetic ([`initialiser`]).
    expr: Option<Box<syn::Expr>>,
    /// Where the initialiser is written.
    init: Option<Span>,
    sources: Vec<Dep>,
    builder: Option<usize>,
    executor: Option<Executor>,
    /// The type the binding is declared with (`let pool: &RedisPool = ..`).
    ty: Option<String>,
    /// A connection: whether dropping it closes it (`Some(true)`) or hands it back to its
    /// pool (`Some(false)`).
    drop_closes: Option<bool>,
    /// Bound by an enum variant's pattern (`Store::Redis(store) => ..`): the enum and the
    /// variant, whose one field's declared type is the binding's.
    variant: Option<(String, String)>,
    /// Declared `mut`: its value may change after the initialiser (`q.push_str(..)`).
    mutable: bool,
}

/// Expressions in an initialiser past which a binding keeps no copy of it.
const MAX_KEPT_EXPRESSIONS: usize = 4096;

/// A body walked one statement at a time is parsed in runs of statements of about this many
/// tokens: the parser's copy of the tokens it reads is that of one run, not of the body.
const STATEMENT_CHUNK: usize = 4096;

/// The initialiser a binding keeps: none for arithmetic on numbers and locals (`v + 1`,
/// `n * 2 > limit`), which holds no option word, script or query, so that a function of many
/// such bindings does not keep a syntax tree per binding; none either for an initialiser of
/// more than [`MAX_KEPT_EXPRESSIONS`] expressions (a call of thousands of arguments), whose
/// copy would cost many times its text: what it builds is read where it is written.
fn initialiser(e: &syn::Expr) -> Option<Box<syn::Expr>> {
    /// Counts expressions, descending no further once past the limit.
    struct Count(usize);
    impl<'ast> syn::visit::Visit<'ast> for Count {
        fn visit_expr(&mut self, e: &'ast syn::Expr) {
            self.0 += 1;
            if self.0 <= MAX_KEPT_EXPRESSIONS {
                syn::visit::visit_expr(self, e);
            }
        }
    }
    let mut count = Count(0);
    syn::visit::Visit::visit_expr(&mut count, e);
    if count.0 > MAX_KEPT_EXPRESSIONS {
        return None;
    }
    fn arithmetic(e: &syn::Expr, top: bool) -> bool {
        match e {
            syn::Expr::Lit(l) => matches!(
                l.lit,
                syn::Lit::Int(_) | syn::Lit::Float(_) | syn::Lit::Bool(_)
            ),
            syn::Expr::Path(p) => !top && p.qself.is_none() && p.path.get_ident().is_some(),
            syn::Expr::Binary(b) => arithmetic(&b.left, false) && arithmetic(&b.right, false),
            syn::Expr::Unary(u) => !matches!(u.op, syn::UnOp::Deref(_)) && arithmetic(&u.expr, top),
            syn::Expr::Paren(p) => arithmetic(&p.expr, top),
            _ => false,
        }
    }
    (!arithmetic(e, true)).then(|| Box::new(e.clone()))
}

pub struct FnWalker<'a> {
    cx: &'a FileCtx<'a>,
    func_idx: usize,
    name: String,
    impl_type: Option<String>,
    has_self: bool,
    params: Vec<String>,
    span: Span,
    env: Env<Binding>,
    events: Vec<Event>,
    deps: Vec<Dep>,
    builders: Vec<Builder>,
    next_pipe: usize,
    watched: usize,
    depth: usize,
    loop_break_deps: Vec<Vec<Dep>>,
    field_inits: Vec<(String, String, KeyRef)>,
    /// The time fields of the struct literals the body builds (`FileIr.literal_times`).
    literal_times: Vec<locklint_ir::LiteralTime>,
    nested: Vec<(syn::Signature, syn::Block, Option<String>)>,
    /// Builder created by the last chain that was not sent, for `let` to bind.
    last_builder: Option<usize>,
    /// Keys given to a local holding a script invocation being built, by statements before
    /// it is invoked (`inv.key(k);`).
    invocation_keys: HashMap<String, Vec<(redis::PendingArg, Span)>>,
    /// Identifiers that appear in returned expressions (`return x`, the tail).
    returned_names: HashSet<String>,
    /// SQL and Lua texts found in this function; indexes start at `embedded_base` in the file.
    embedded: Vec<Embedded>,
    embedded_base: usize,
    /// The `format!` literals of locals embedded as SQL (`Origin::Formatted`), by the literal's
    /// span: each embedded once however often its local runs.
    formatted: HashMap<Span, usize>,
    /// Declared types of parameters, for telling pools from connections.
    param_types: Vec<(String, String)>,
    /// Parameters whose declared type names one type whose methods they call.
    param_receivers: Vec<(String, String)>,
    /// How many macro invocations the walk is inside.
    macro_depth: usize,
    /// Operator switches (`if force {`) the walk is inside, innermost last.
    switches: Vec<String>,
    /// The expressions a fix lays out, collected as the body's statements are walked.
    laid_out: laid_out::Expressions<'a>,
    /// Whether each block taken out of its statement and walked from its tokens diverges (see
    /// [`flow::block_diverges`]), by where it starts: its statement's tree holds it empty.
    diverging: flow::Diverging,
}

impl Scope for FnWalker<'_> {
    fn local_key(&self, name: &str) -> Option<KeyRef> {
        self.lookup(name).and_then(|b| b.key.as_deref().cloned())
    }
    fn local_value(&self, name: &str) -> Option<Value> {
        self.lookup(name)
            .map(|b| b.value.clone().unwrap_or(Value::Dynamic))
    }
    fn param(&self, name: &str) -> Option<usize> {
        if self.lookup(name).is_some() {
            return None;
        }
        self.params.iter().position(|p| p == name)
    }
    fn file_const(&self, name: &str) -> Option<KeyRef> {
        self.cx.consts.get(name).cloned()
    }
    fn impl_type(&self) -> Option<&str> {
        self.impl_type.as_deref()
    }
}

impl FnWalker<'_> {
    /// The initialisers of the locals that the arguments name (`opts` in
    /// `set_options(&key, &token, opts)`): where the command's options are written.
    pub(super) fn option_bindings(&self, args: &[syn::Expr]) -> Vec<Span> {
        let mut out = Vec::new();
        for a in args {
            let inner = match a {
                syn::Expr::Reference(r) => &*r.expr,
                other => other,
            };
            let syn::Expr::Path(p) = inner else {
                continue;
            };
            let Some(name) = p.path.get_ident() else {
                continue;
            };
            if let Some(init) = self.env.get(&name.to_string()).and_then(|b| b.init) {
                out.push(init);
            }
        }
        out
    }
}

impl OptionSource for FnWalker<'_> {
    fn words(&self, arg: &syn::Expr) -> HashSet<String> {
        let mut w = commands::expr_words(arg, self.cx.bodies);
        let mut seen = HashSet::new();
        let mut todo: Vec<String> = w.iter().cloned().collect();
        // follow locals that hold option builders
        while let Some(word) = todo.pop() {
            if !seen.insert(word.clone()) || seen.len() > 32 {
                continue;
            }
            if let Some(b) = self.env.get_upper(&word) {
                if let Some(e) = &b.expr {
                    for x in commands::expr_words(e, self.cx.bodies) {
                        if w.insert(x.clone()) {
                            todo.push(x);
                        }
                    }
                }
            }
        }
        w
    }
}

/// The one binding of an enum variant's pattern with one field (`Store::Redis(store)`,
/// `Self::Redis(ref store)`): its name, the enum (the impl's type for `Self`) and the variant.
fn variant_binding(pat: &syn::Pat, impl_type: Option<&str>) -> Option<(String, String, String)> {
    let syn::Pat::TupleStruct(t) = pat else {
        return None;
    };
    let [syn::Pat::Ident(i)] = t.elems.iter().collect::<Vec<_>>().as_slice() else {
        return None;
    };
    if i.subpat.is_some() || t.qself.is_some() {
        return None;
    }
    let mut segs = t.path.segments.iter().rev();
    let variant = segs.next()?.ident.to_string();
    let owner = segs.next()?.ident.to_string();
    let owner = if owner == "Self" {
        impl_type?.to_string()
    } else {
        owner
    };
    Some((i.ident.to_string(), owner, variant))
}

fn pat_names(pat: &syn::Pat, out: &mut Vec<String>) {
    match pat {
        syn::Pat::Ident(i) => {
            out.push(i.ident.to_string());
            if let Some((_, sub)) = &i.subpat {
                pat_names(sub, out);
            }
        }
        syn::Pat::Tuple(t) => t.elems.iter().for_each(|p| pat_names(p, out)),
        syn::Pat::TupleStruct(t) => t.elems.iter().for_each(|p| pat_names(p, out)),
        syn::Pat::Struct(s) => s.fields.iter().for_each(|f| pat_names(&f.pat, out)),
        syn::Pat::Type(t) => pat_names(&t.pat, out),
        syn::Pat::Reference(r) => pat_names(&r.pat, out),
        syn::Pat::Slice(s) => s.elems.iter().for_each(|p| pat_names(p, out)),
        syn::Pat::Or(o) => o.cases.iter().for_each(|p| pat_names(p, out)),
        syn::Pat::Paren(p) => pat_names(&p.pat, out),
        _ => {}
    }
}

/// Every identifier in a node's tokens, macro arguments included.
fn idents_of(
    node: &impl quote::ToTokens,
    bodies: &super::bodies::Bodies,
    mut each: impl FnMut(proc_macro2::Ident),
) {
    let mut stack = vec![node.to_token_stream()];
    while let Some(ts) = stack.pop() {
        for tt in ts {
            match tt {
                proc_macro2::TokenTree::Ident(i) => each(i),
                proc_macro2::TokenTree::Group(g) => stack.push(bodies.stream_of(&g)),
                _ => {}
            }
        }
    }
}

fn is_unit_type(ty: &syn::Type) -> bool {
    matches!(ty, syn::Type::Tuple(t) if t.elems.is_empty())
}

fn turbofish_unit(t: Option<&syn::AngleBracketedGenericArguments>) -> bool {
    t.is_some_and(|t| {
        t.args
            .iter()
            .any(|a| matches!(a, syn::GenericArgument::Type(ty) if is_unit_type(ty)))
    })
}

fn path_last(e: &syn::Expr) -> Option<(String, String)> {
    match e {
        syn::Expr::Path(p) => {
            let full = path_text(&p.path);
            p.path.segments.last().map(|s| (s.ident.to_string(), full))
        }
        _ => None,
    }
}

/// The variable a receiver is reached from through fields, references and dereferences
/// (`self` of `&mut self.con`, `con` of `*con`); `None` for anything computed.
fn receiver_root(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        syn::Expr::Field(f) => receiver_root(&f.base),
        syn::Expr::Reference(r) => receiver_root(&r.expr),
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => receiver_root(&u.expr),
        _ => None,
    }
}

fn is_self(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Path(p) => p.path.is_ident("self"),
        syn::Expr::Reference(r) => is_self(&r.expr),
        syn::Expr::Paren(p) => is_self(&p.expr),
        _ => false,
    }
}

fn str_lit(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => Some(s.value()),
        syn::Expr::Reference(r) => str_lit(&r.expr),
        syn::Expr::Paren(p) => str_lit(&p.expr),
        _ => None,
    }
}

impl<'a> FnWalker<'a> {
    pub fn new(
        cx: &'a FileCtx<'a>,
        func_idx: usize,
        sig: &syn::Signature,
        impl_type: Option<String>,
        embedded_base: usize,
    ) -> Self {
        let mut params = Vec::new();
        let mut param_types = Vec::new();
        let mut param_receivers = Vec::new();
        let mut has_self = false;
        for input in &sig.inputs {
            match input {
                syn::FnArg::Receiver(_) => has_self = true,
                syn::FnArg::Typed(t) => {
                    let mut names = Vec::new();
                    pat_names(&t.pat, &mut names);
                    let name = names.into_iter().next().unwrap_or_default();
                    let ty = cx.file.snippet(spans::of(cx.file, &*t.ty)).to_string();
                    param_types.push((name.clone(), ty));
                    if let Some(r) = super::types::receiver_name(&t.ty) {
                        param_receivers.push((name.clone(), r));
                    }
                    params.push(name);
                }
            }
        }
        FnWalker {
            cx,
            func_idx,
            name: sig.ident.to_string(),
            impl_type,
            has_self,
            params,
            span: spans::of(cx.file, &sig.ident),
            env: Env::default(),
            events: Vec::new(),
            deps: Vec::new(),
            builders: Vec::new(),
            next_pipe: 0,
            watched: 0,
            depth: 0,
            loop_break_deps: Vec::new(),
            field_inits: Vec::new(),
            literal_times: Vec::new(),
            nested: Vec::new(),
            last_builder: None,
            invocation_keys: HashMap::new(),
            returned_names: HashSet::new(),
            embedded: Vec::new(),
            embedded_base,
            formatted: HashMap::new(),
            param_types,
            param_receivers,
            macro_depth: 0,
            switches: Vec::new(),
            laid_out: laid_out::Expressions::new(cx.file),
            diverging: HashMap::new(),
        }
    }

    pub fn placeholder(&self) -> Function {
        Function {
            name: self.name.clone(),
            impl_type: self.impl_type.clone(),
            has_self: self.has_self,
            params: self.params.clone(),
            param_types: self.param_types.iter().map(|(_, t)| t.clone()).collect(),
            span: self.span,
            whole: self.span,
            events: Vec::new(),
            uses: Vec::new(),
            returns_key: None,
            item_slot: None,
        }
    }

    /// Walk the body; returns the function, nested fn items to walk next, and struct field initialisers.
    pub fn run(mut self, body: &syn::Block) -> Walked {
        self.walk_block(body, ResultUse::Returned);
        self.laid_out.block(body);
        self.finish(body.stmts.last(), || quote::ToTokens::to_token_stream(body))
    }

    /// Walk a body given as its brace group's tokens, parsing one statement at a time and
    /// dropping each statement's tree once it is walked: the same walk as [`Self::run`] over the
    /// parsed block, with the syntax tree of one statement alive at a time (the large blocks
    /// inside a statement are walked the same way, see `Bodies::hollow_blocks`). A syntax error
    /// is the error parsing the whole block gives.
    pub fn run_streamed(mut self, body: &proc_macro2::Group) -> syn::Result<Walked> {
        let last = self.walk_tokens(body, &ResultUse::Returned)?;
        Ok(self.finish(last.as_ref(), || body.stream()))
    }

    /// Walk a block given as its brace group's tokens, one statement at a time (with its large
    /// blocks taken out, to be walked the same way); returns its last statement.
    fn walk_tokens(
        &mut self,
        block: &proc_macro2::Group,
        tail: &ResultUse,
    ) -> syn::Result<Option<syn::Stmt>> {
        let hollowed = self.cx.bodies.hollow_blocks(block);
        if self.cx.budget.too_large(&hollowed.stream()) {
            // the file is not analysed: nothing of this block is needed
            return Ok(None);
        }
        let marks = self.block_start();
        // each statement is walked once the next is parsed: the last is walked as the tail
        let mut pending: Option<syn::Stmt> = None;
        for chunk in super::statements::chunks(hollowed.stream(), STATEMENT_CHUNK) {
            if self.cx.budget.has_failed() {
                return Ok(None);
            }
            let mut statements = super::statements::Statements::default();
            let walk = |input: syn::parse::ParseStream| -> syn::Result<()> {
                while let Some(stmt) = statements.next(input)? {
                    if let Some(before) = pending.replace(stmt) {
                        if self.too_many_events(&before) {
                            // the file is not analysed: the rest need not be walked
                            return input.parse::<proc_macro2::TokenStream>().map(drop);
                        }
                        self.walk_stmt(&before, false, tail);
                        self.laid_out.stmt(&before);
                    }
                }
                Ok(())
            };
            syn::parse::Parser::parse2(walk, chunk)?;
        }
        if let Some(stmt) = &pending {
            if self.too_many_events(stmt) {
                return Ok(None);
            }
            self.walk_stmt(stmt, true, tail);
            self.laid_out.stmt(stmt);
        }
        self.laid_out.tail(pending.as_ref());
        let close = spans::to_span(self.cx.file, hollowed.span_close());
        self.block_end(marks, pending.as_ref(), close);
        Ok(pending)
    }

    /// Whether the file passes its limit of events before `next` is walked (see
    /// `Budget::too_many_events`).
    fn too_many_events(&self, next: &syn::Stmt) -> bool {
        self.cx
            .budget
            .too_many_events(self.events.len(), next.span())
    }

    /// Walk a block taken out of its statement, from its tokens; a syntax error in it is the
    /// file's (kept in the walk's budget, reported when the function's walk ends).
    pub(super) fn walk_taken(&mut self, block: &proc_macro2::Group, tail: ResultUse) {
        match self.walk_tokens(block, &tail) {
            Ok(last) => {
                let start = block.span_open().start();
                let diverges = last
                    .as_ref()
                    .and_then(|l| flow::stmt_diverges(l, &self.diverging));
                self.diverging.insert((start.line, start.column), diverges);
            }
            Err(e) => self.cx.budget.failed(e),
        }
    }

    /// After the walk of a body whose last statement is `last`: replies bound to names are
    /// resolved against the names' uses (read from the body's tokens, asked only then), each
    /// operation gets the expression a fix lays out.
    fn finish(
        mut self,
        last: Option<&syn::Stmt>,
        tokens: impl FnOnce() -> proc_macro2::TokenStream,
    ) -> Walked {
        let laid_out =
            std::mem::replace(&mut self.laid_out, laid_out::Expressions::new(self.cx.file));
        laid_out.mark(&mut self.events);
        let returns_key = match last {
            Some(syn::Stmt::Expr(e, None)) => {
                let k = key_of(e, &self);
                k.has_literal().then_some(k)
            }
            _ => None,
        };
        let bound = |r: &ResultUse| matches!(r, ResultUse::Bound { .. });
        let needs_uses = self.events.iter().any(|e| match e {
            Event::Op(o) => bound(&o.result),
            Event::Call(c) => bound(&c.result),
            Event::Sql { .. } | Event::ConnEnd(_) => false,
        }) || self
            .embedded
            .iter()
            .any(|e| e.exec.as_ref().is_some_and(|x| bound(&x.result)));
        let mut uses = Vec::new();
        if needs_uses {
            collect_uses(self.cx.file, tokens(), &mut uses);
            uses.sort_unstable();
            // the last use of each name
            let mut last_use: HashMap<&str, usize> = HashMap::new();
            for (u, at) in &uses {
                let e = last_use.entry(u.as_str()).or_insert(*at);
                *e = (*e).max(*at);
            }
            let returned = &self.returned_names;
            // what later stages ask about: where a token-named binding is used
            let keep = |n: &str| locklint_ir::vocabulary::is_token_name(n);
            let resolve = |r: &mut ResultUse| {
                if let ResultUse::Bound { names, after } = r {
                    if names.iter().any(|n| returned.contains(n)) {
                        *r = ResultUse::Returned;
                        return;
                    }
                    let used = names
                        .iter()
                        .any(|n| last_use.get(n.as_str()).is_some_and(|at| at >= after));
                    *r = if used {
                        ResultUse::Used
                    } else {
                        ResultUse::Ignored("the variable holding the reply is never read".into())
                    };
                }
            };
            for ev in &mut self.events {
                match ev {
                    Event::Op(o) => resolve(&mut o.result),
                    Event::Call(c) => resolve(&mut c.result),
                    Event::Sql { .. } | Event::ConnEnd(_) => {}
                }
            }
            for e in &mut self.embedded {
                if let Some(x) = &mut e.exec {
                    resolve(&mut x.result);
                }
            }
            uses.retain(|(n, _)| keep(n));
        }
        let f = Function {
            name: self.name.clone(),
            impl_type: self.impl_type.clone(),
            has_self: self.has_self,
            params: self.params.clone(),
            param_types: self.param_types.iter().map(|(_, t)| t.clone()).collect(),
            span: self.span,
            whole: self.span,
            events: std::mem::take(&mut self.events),
            uses,
            returns_key,
            item_slot: None,
        };
        (
            f,
            self.nested,
            self.field_inits,
            self.embedded,
            self.literal_times,
        )
    }

    /// The declared type of a method call's receiver: `self` (the impl's type), a parameter
    /// or a local declared with a type that names one type.
    fn receiver_type(&self, e: &syn::Expr) -> Option<String> {
        match e {
            syn::Expr::Reference(r) => self.receiver_type(&r.expr),
            syn::Expr::Paren(p) => self.receiver_type(&p.expr),
            syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => {
                self.receiver_type(&u.expr)
            }
            syn::Expr::Path(p) => {
                let name = p.path.get_ident()?.to_string();
                if name == "self" {
                    return self.impl_type.clone();
                }
                if let Some(b) = self.lookup(&name) {
                    return b.ty.clone();
                }
                self.param_receivers
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, t)| t.clone())
            }
            _ => None,
        }
    }

    /// The type a path call names its function in: `Cmd` of `redis::Cmd::new(..)`, the
    /// impl's type for `Self::new(..)`; none for a free function (`helpers::acquire(..)`),
    /// whose path names modules.
    fn path_type(&self, e: &syn::Expr) -> Option<Box<Receiver>> {
        let syn::Expr::Path(p) = e else { return None };
        let segments = &p.path.segments;
        let ty = segments.iter().rev().nth(1)?.ident.to_string();
        let ty = if ty == "Self" {
            self.impl_type.clone()?
        } else {
            ty
        };
        ty.chars()
            .next()
            .is_some_and(|c| c.is_ascii_uppercase())
            .then(|| Box::new(Receiver::Type(ty)))
    }

    /// What tells a method call's receiver's type: its declared type, or the field of a
    /// value whose type is known.
    fn receiver_of(&self, e: &syn::Expr) -> Option<Box<Receiver>> {
        if let Some(t) = self.receiver_type(e) {
            return Some(Box::new(Receiver::Type(t)));
        }
        match e {
            syn::Expr::Reference(r) => self.receiver_of(&r.expr),
            syn::Expr::Paren(p) => self.receiver_of(&p.expr),
            syn::Expr::Path(p) => {
                let (owner, field) = self
                    .lookup(&p.path.get_ident()?.to_string())?
                    .variant
                    .clone()?;
                Some(Box::new(Receiver::Field { owner, field }))
            }
            syn::Expr::Field(f) => match &f.member {
                syn::Member::Named(n) => Some(Box::new(Receiver::Field {
                    owner: self.receiver_type(&f.base)?,
                    field: n.to_string(),
                })),
                syn::Member::Unnamed(_) => None,
            },
            _ => None,
        }
    }

    /// The parameter an argument is, through references and conversions (`&key`,
    /// `key.into().as_bytes()`); a local of the same name is not the parameter.
    fn param_of_arg(&self, e: &syn::Expr) -> Option<usize> {
        match e {
            syn::Expr::Reference(r) => self.param_of_arg(&r.expr),
            syn::Expr::Paren(p) => self.param_of_arg(&p.expr),
            syn::Expr::MethodCall(m)
                if m.args.is_empty()
                    && matches!(
                        m.method.to_string().as_str(),
                        "into"
                            | "as_bytes"
                            | "as_ref"
                            | "as_str"
                            | "as_slice"
                            | "clone"
                            | "to_vec"
                            | "to_owned"
                            | "to_string"
                    ) =>
            {
                self.param_of_arg(&m.receiver)
            }
            syn::Expr::Path(p) => {
                let name = p.path.get_ident()?.to_string();
                if self.lookup(&name).is_some() {
                    return None;
                }
                self.params.iter().position(|n| *n == name)
            }
            _ => None,
        }
    }

    /// Which of this function's parameters a call's argument is made of: the parameter
    /// itself, or the parameters a helper call building it is given directly.
    pub(super) fn arg_params(&self, e: &syn::Expr) -> locklint_ir::ArgParams {
        let direct = self.param_of_arg(e);
        let mut inner = e;
        while let syn::Expr::Reference(syn::ExprReference { expr, .. })
        | syn::Expr::Paren(syn::ExprParen { expr, .. }) = inner
        {
            inner = expr;
        }
        let built_from = match (direct, inner) {
            (None, syn::Expr::Call(c)) => {
                c.args.iter().filter_map(|a| self.param_of_arg(a)).collect()
            }
            _ => Vec::new(),
        };
        locklint_ir::ArgParams { direct, built_from }
    }

    fn lookup(&self, name: &str) -> Option<&Binding> {
        self.env.get(name)
    }

    fn node(&self) -> NodeId {
        NodeId {
            file: self.cx.file_idx,
            func: self.func_idx,
            index: self.events.len(),
        }
    }

    fn span_of<T: Spanned>(&self, node: &T) -> Span {
        spans::of(self.cx.file, node)
    }
}

#[cfg(test)]
mod tests {
    use super::initialiser;

    #[test]
    fn arithmetic_initialisers_are_not_kept() {
        let kept = |text: &str| initialiser(&syn::parse_str(text).unwrap()).is_some();
        for arithmetic in [
            "0u64",
            "v0 + 1",
            "-(n * 2) > limit",
            "!done && ready",
            "1.5",
        ] {
            assert!(!kept(arithmetic), "{arithmetic}");
        }
        for held in [
            "opts",
            "\"NX\"",
            "SetOptions::default().with_expiration(SetExpiry::PX(ttl))",
            "ExistenceCheck::NX",
            "Script::new(RELEASE)",
            "*guard",
            "prefix + &id",
        ] {
            assert!(kept(held), "{held}");
        }
        let huge = format!(
            "pool.call({})",
            "&key, ".repeat(super::MAX_KEPT_EXPRESSIONS)
        );
        assert!(!kept(&huge));
        let large = format!(
            "pool.call({})",
            "&key, ".repeat(super::MAX_KEPT_EXPRESSIONS / 3)
        );
        assert!(kept(&large));
    }
}
