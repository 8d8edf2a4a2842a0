//! Walks one function body in source order and records Redis operations and calls, with
//! what each reply is used for and which earlier reads the current path depends on.

use super::commands::{self, CmdArg, OptionSource};
use super::embed;
use super::env::Env;
use super::keys::{key_of, macro_args, path_text, value_of, Scope};
use super::spans;
use locklint_ir::source::{SourceFile, Span};
use locklint_ir::Origin;
use locklint_ir::{
    Call, Channel, Dep, Embedded, Event, Executor, Function, KeyRef, Language, NodeId, Op, OpKind,
    ResultUse, SqlExec, Value,
};
use std::collections::{HashMap, HashSet};
use syn::spanned::Spanned;

/// Per-file context shared by every function walker.
pub struct FileCtx<'a> {
    pub file: &'a SourceFile,
    pub file_idx: usize,
    /// The file talks to Redis (mentions `redis` or `fred`): typed command methods are recognised.
    pub gated: bool,
    pub consts: &'a HashMap<String, KeyRef>,
    /// The file mentions sqlx: `query(..)` calls are sqlx's.
    pub sqlx: bool,
    /// Spans of string literals of `const`/`static` items, by name.
    pub const_spans: &'a HashMap<String, Span>,
}

/// Deeper expressions than this are not descended into.
const MAX_DEPTH: usize = 200;
/// Conditions an event keeps (the nearest ones): enough for check-then-act, bounded for generated code.
const MAX_DEPS: usize = 16;
/// Below this expression depth, per-node work that reads a whole subtree is skipped.
const SHALLOW: usize = 12;

#[derive(Debug, Clone, Default)]
struct Binding {
    key: Option<KeyRef>,
    value: Option<Value>,
    expr: Option<syn::Expr>,
    sources: Vec<Dep>,
    builder: Option<usize>,
    executor: Option<Executor>,
}

#[derive(Debug, Clone)]
struct PendingArg {
    word: Option<String>,
    key: KeyRef,
    value: Value,
    span: Span,
}

#[derive(Debug, Clone)]
struct PendingCmd {
    /// Command name for `cmd("..")`; `None` until the first `.arg` of `Cmd::new()`.
    name: Option<String>,
    typed: Option<(commands::Typed, Vec<PendingArg>)>,
    args: Vec<PendingArg>,
    span: Span,
    ignored: bool,
}

#[derive(Debug, Clone)]
enum Builder {
    Cmd(PendingCmd),
    Pipe {
        id: usize,
        atomic: bool,
        cmds: Vec<PendingCmd>,
    },
}

/// Methods so common on std types that they are never lock helpers.
fn is_std_method(name: &str) -> bool {
    matches!(
        name,
        "to_string"
            | "to_owned"
            | "clone"
            | "len"
            | "is_empty"
            | "is_none"
            | "is_some"
            | "iter"
            | "into_iter"
            | "map"
            | "and_then"
            | "collect"
            | "push"
            | "push_str"
            | "insert"
            | "as_str"
            | "as_ref"
            | "as_deref"
            | "as_mut"
            | "borrow"
            | "borrow_mut"
            | "fmt"
            | "eq"
            | "cmp"
            | "filter"
            | "contains"
            | "starts_with"
            | "ends_with"
            | "from"
            | "new"
            | "default"
            | "Some"
            | "Ok"
            | "Err"
            | "format"
    )
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
    nested: Vec<(syn::Signature, syn::Block, Option<String>)>,
    /// Builder created by the last chain that was not sent, for `let` to bind.
    last_builder: Option<usize>,
    /// Identifiers that appear in returned expressions (`return x`, the tail).
    returned_names: HashSet<String>,
    /// SQL and Lua texts found in this function; indexes start at `embedded_base` in the file.
    embedded: Vec<Embedded>,
    embedded_base: usize,
    /// Declared types of parameters, for telling pools from connections.
    param_types: Vec<(String, String)>,
    /// How many macro invocations the walk is inside.
    macro_depth: usize,
}

impl Scope for FnWalker<'_> {
    fn local_key(&self, name: &str) -> Option<KeyRef> {
        self.lookup(name).and_then(|b| b.key.clone())
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

impl OptionSource for FnWalker<'_> {
    fn words(&self, arg: &syn::Expr) -> HashSet<String> {
        let mut w = commands::expr_words(arg);
        let mut seen = HashSet::new();
        let mut todo: Vec<String> = w.iter().cloned().collect();
        // follow locals that hold option builders
        while let Some(word) = todo.pop() {
            if !seen.insert(word.clone()) || seen.len() > 32 {
                continue;
            }
            if let Some(b) = self.env.get_upper(&word) {
                if let Some(e) = &b.expr {
                    for x in commands::expr_words(e) {
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

/// Whether a block always leaves the enclosing flow (return, break, continue, panic).
fn block_diverges(block: &syn::Block) -> Option<bool> {
    let last = block.stmts.last()?;
    match last {
        syn::Stmt::Expr(e, _) => expr_diverges(e),
        syn::Stmt::Macro(m) => macro_diverges(&m.mac).then_some(false),
        _ => None,
    }
}

/// `Some(true)` when the divergence is a `break`.
fn expr_diverges(e: &syn::Expr) -> Option<bool> {
    match e {
        syn::Expr::Return(_) | syn::Expr::Continue(_) => Some(false),
        syn::Expr::Break(_) => Some(true),
        syn::Expr::Macro(m) if macro_diverges(&m.mac) => Some(false),
        syn::Expr::Block(b) => block_diverges(&b.block),
        _ => None,
    }
}

fn macro_diverges(mac: &syn::Macro) -> bool {
    mac.path.segments.last().is_some_and(|s| {
        matches!(
            s.ident.to_string().as_str(),
            "panic" | "unreachable" | "todo" | "unimplemented" | "bail"
        )
    })
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
        let mut has_self = false;
        for input in &sig.inputs {
            match input {
                syn::FnArg::Receiver(_) => has_self = true,
                syn::FnArg::Typed(t) => {
                    let mut names = Vec::new();
                    pat_names(&t.pat, &mut names);
                    let name = names.into_iter().next().unwrap_or_default();
                    let ty = quote::ToTokens::to_token_stream(&t.ty).to_string();
                    param_types.push((name.clone(), ty));
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
            nested: Vec::new(),
            last_builder: None,
            returned_names: HashSet::new(),
            embedded: Vec::new(),
            embedded_base,
            param_types,
            macro_depth: 0,
        }
    }

    pub fn placeholder(&self) -> Function {
        Function {
            name: self.name.clone(),
            impl_type: self.impl_type.clone(),
            has_self: self.has_self,
            params: self.params.clone(),
            span: self.span,
            whole: self.span,
            events: Vec::new(),
            uses: Vec::new(),
            returns_key: None,
            item_slot: None,
        }
    }

    /// Walk the body; returns the function, nested fn items to walk next, and struct field initialisers.
    #[allow(clippy::type_complexity)]
    pub fn run(
        mut self,
        body: &syn::Block,
    ) -> (
        Function,
        Vec<(syn::Signature, syn::Block, Option<String>)>,
        Vec<(String, String, KeyRef)>,
        Vec<Embedded>,
    ) {
        self.walk_block(body, ResultUse::Returned);
        let returns_key = match body.stmts.last() {
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
            Event::Sql { .. } => false,
        }) || self
            .embedded
            .iter()
            .any(|e| e.exec.as_ref().is_some_and(|x| bound(&x.result)));
        let mut uses = Vec::new();
        if needs_uses {
            collect_uses(self.cx.file, body, &mut uses);
            uses.sort_unstable();
            // the last use of each name
            let mut last_use: HashMap<&str, usize> = HashMap::new();
            for (u, at) in &uses {
                let e = last_use.entry(u.as_str()).or_insert(*at);
                *e = (*e).max(*at);
            }
            let returned = &self.returned_names;
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
                        ResultUse::Ignored("the variable holding the reply is never read")
                    };
                }
            };
            for ev in &mut self.events {
                match ev {
                    Event::Op(o) => resolve(&mut o.result),
                    Event::Call(c) => resolve(&mut c.result),
                    Event::Sql { .. } => {}
                }
            }
            for e in &mut self.embedded {
                if let Some(x) = &mut e.exec {
                    resolve(&mut x.result);
                }
            }
        }
        let f = Function {
            name: self.name.clone(),
            impl_type: self.impl_type.clone(),
            has_self: self.has_self,
            params: self.params.clone(),
            span: self.span,
            whole: self.span,
            events: std::mem::take(&mut self.events),
            uses,
            returns_key,
            item_slot: None,
        };
        (f, self.nested, self.field_inits, self.embedded)
    }

    fn lookup(&self, name: &str) -> Option<&Binding> {
        self.env.get(name)
    }

    /// The conditions the current path depends on, nearest first, bounded.
    fn current_deps(&self) -> Vec<Dep> {
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

    /// Reads and calls recorded since `mark`: what a condition depends on.
    fn deps_since(&self, mark: usize) -> Vec<Dep> {
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
    fn sources_in(&self, e: &syn::Expr) -> Vec<Dep> {
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
                    proc_macro2::TokenTree::Group(g) => stack.push(g.stream()),
                    _ => {}
                }
            }
        }
        bounded(out)
    }

    fn condition_deps(&mut self, cond: &syn::Expr) -> Vec<Dep> {
        let mark = self.events.len();
        self.expr(cond, ResultUse::Used);
        let mut deps = self.deps_since(mark);
        deps.extend(self.sources_in(cond));
        bounded(deps)
    }

    fn walk_block(&mut self, block: &syn::Block, tail: ResultUse) {
        let env_mark = self.env.len();
        let deps_mark = self.deps.len();
        let n = block.stmts.len();
        for (i, stmt) in block.stmts.iter().enumerate() {
            let last = i + 1 == n;
            let events_mark = self.events.len();
            match stmt {
                syn::Stmt::Local(l) => self.local(l),
                syn::Stmt::Expr(e, semi) => {
                    let u = if last && semi.is_none() {
                        tail.clone()
                    } else {
                        ResultUse::Ignored("the reply is dropped")
                    };
                    let after = self.statement_expr(e, u);
                    self.deps.extend(after);
                }
                syn::Stmt::Macro(m) => self.mac(&m.mac, ResultUse::Ignored("the reply is dropped")),
                syn::Stmt::Item(syn::Item::Fn(f)) => {
                    self.nested
                        .push((f.sig.clone(), (*f.block).clone(), self.impl_type.clone()));
                }
                syn::Stmt::Item(_) => {}
            }
            self.mark_statement(stmt, events_mark);
        }
        self.env.truncate(env_mark);
        self.deps.truncate(deps_mark);
    }

    /// Record `stmt` as the statement of the one operation it produced, when it is a plain
    /// statement (a `let`, or an expression with `;` that is not a block or control flow).
    fn mark_statement(&mut self, stmt: &syn::Stmt, mark: usize) {
        let plain = match stmt {
            syn::Stmt::Local(_) => true,
            syn::Stmt::Expr(e, Some(_)) => !matches!(
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
            ),
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
            Event::Sql { .. } => false,
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
    fn statement_expr(&mut self, e: &syn::Expr, u: ResultUse) -> Vec<Dep> {
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

    fn local(&mut self, l: &syn::Local) {
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
            ResultUse::Ignored("the reply type is `()`")
        } else if wildcard || (!names.is_empty() && names.iter().all(|n| n.starts_with('_'))) {
            ResultUse::Ignored("the reply is bound to `_`")
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
        let executor = if single {
            self.executor_of(&init.expr)
        } else {
            None
        };
        for n in names {
            let (key, value, expr) = if single {
                (
                    Some(key_of(&init.expr, self)),
                    Some(value_of(&init.expr, self)),
                    Some((*init.expr).clone()),
                )
            } else {
                (None, None, None)
            };
            self.env.push(
                n,
                Binding {
                    key,
                    value,
                    expr,
                    sources: sources.clone(),
                    builder,
                    executor,
                },
            );
        }
    }

    fn if_expr(&mut self, i: &syn::ExprIf, u: ResultUse) -> Vec<Dep> {
        let env_mark = self.env.len();
        let deps = self.condition_deps(&i.cond);
        let deps_mark = self.deps.len();
        self.deps.extend(deps.iter().copied());
        self.walk_block(&i.then_branch, u.clone());
        self.env.truncate(env_mark);
        if let Some((_, els)) = &i.else_branch {
            self.expr(els, u);
        }
        self.deps.truncate(deps_mark);
        let then = block_diverges(&i.then_branch);
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

    fn while_expr(&mut self, w: &syn::ExprWhile) -> Vec<Dep> {
        let env_mark = self.env.len();
        let deps = self.condition_deps(&w.cond);
        let deps_mark = self.deps.len();
        self.deps.extend(deps.iter().copied());
        self.loop_break_deps.push(Vec::new());
        self.walk_block(&w.body, ResultUse::Ignored("the reply is dropped"));
        let mut after = self.loop_break_deps.pop().unwrap_or_default();
        self.deps.truncate(deps_mark);
        self.env.truncate(env_mark);
        after.extend(deps);
        after
    }

    fn loop_expr(&mut self, l: &syn::ExprLoop) -> Vec<Dep> {
        self.loop_break_deps.push(Vec::new());
        self.walk_block(&l.body, ResultUse::Ignored("the reply is dropped"));
        self.loop_break_deps.pop().unwrap_or_default()
    }

    fn expr(&mut self, e: &syn::Expr, u: ResultUse) {
        if self.depth > MAX_DEPTH {
            return;
        }
        if u == ResultUse::Returned && self.depth <= SHALLOW {
            let mut stack = vec![quote::ToTokens::to_token_stream(e)];
            while let Some(ts) = stack.pop() {
                for tt in ts {
                    match tt {
                        proc_macro2::TokenTree::Ident(i) => {
                            self.returned_names.insert(i.to_string());
                        }
                        proc_macro2::TokenTree::Group(g) => stack.push(g.stream()),
                        _ => {}
                    }
                }
            }
        }
        self.depth += 1;
        self.expr_inner(e, u);
        self.depth -= 1;
    }

    fn expr_inner(&mut self, e: &syn::Expr, u: ResultUse) {
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
                for n in names {
                    self.env.push(
                        n,
                        Binding {
                            ..Default::default()
                        },
                    );
                }
                self.loop_break_deps.push(Vec::new());
                self.walk_block(&f.body, ResultUse::Ignored("the reply is dropped"));
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
                    for n in names {
                        self.env.push(
                            n,
                            Binding {
                                sources: deps.clone(),
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
                for n in names {
                    self.env.push(
                        n,
                        Binding {
                            sources: sources.clone(),
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
                    Some(_) => ResultUse::Ignored("the reply is bound to `_`"),
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
                            key: Some(key),
                            value: Some(value),
                            expr: Some((*a.right).clone()),
                            sources,
                            builder: None,
                            executor,
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

    fn mac(&mut self, mac: &syn::Macro, u: ResultUse) {
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

    fn mac_body(&mut self, mac: &syn::Macro, name: &str, u: ResultUse) {
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
        } else if super::depth::check(mac.tokens.clone()).is_some() {
            // too deep to parse: not analysed
        } else if let Ok(block) = syn::parse2::<BlockBody>(mac.tokens.clone()) {
            let b = syn::Block {
                brace_token: Default::default(),
                stmts: block.0,
            };
            self.walk_block(&b, ResultUse::Used);
        }
    }

    fn call(&mut self, c: &syn::ExprCall, u: ResultUse) {
        let Some((name, full)) = path_last(&c.func) else {
            self.expr(&c.func, ResultUse::Used);
            for a in &c.args {
                self.expr(a, ResultUse::Used);
            }
            return;
        };
        if (name == "transaction" || name == "transaction_async")
            && (full.contains("redis") || self.cx.gated)
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
        }
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
            let args = c.args.iter().map(|a| key_of(a, self)).collect();
            let id = self.node();
            let span = self
                .span_of(&*c.func)
                .join(self.span_of(&c.paren_token.span.close()));
            self.events.push(Event::Call(Call {
                id,
                name,
                method: false,
                on_self: false,
                args,
                span,
                result: u,
                deps: self.current_deps(),
            }));
        }
        for a in &c.args {
            self.expr(a, ResultUse::Used);
        }
    }

    fn method_call(&mut self, m: &syn::ExprMethodCall, u: ResultUse) {
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
                ResultUse::Ignored("only success is checked (`is_ok()`/`is_err()`), not the reply"),
            );
            return;
        }
        if matches!(name.as_str(), "invoke" | "invoke_async") {
            self.script_invocation(m, u);
            return;
        }
        let first_is_literal = m
            .args
            .first()
            .is_some_and(|a| str_lit(a).is_some() || self.const_text(a).is_some());
        if embed::is_exec_method(&name) && m.args.len() == 1 && !first_is_literal {
            // `sqlx::query("..").bind(..).execute(&pool)`: the statement runs here
            self.expr(&m.receiver, ResultUse::Used);
            let span = self
                .span_of(&m.method)
                .join(self.span_of(&m.paren_token.span.close()));
            if let Some(idx) = self.chain_embedded(&m.receiver) {
                let executor = self.executor_of(&m.args[0]);
                let binds = self.chain_binds(&m.receiver);
                self.sql_exec(idx, executor, span, u.clone(), binds);
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
                            let binds = match m.args.iter().nth(1) {
                                None => Some(Vec::new()),
                                Some(params) => self.slice_binds(params),
                            }
                            .filter(|_| str_lit(&m.args[0]).is_some());
                            self.sql_exec(idx, executor, span, u.clone(), binds);
                        }
                    }
                }
                Some(Language::Lua) if self.cx.gated => {
                    self.embed_literal(&m.args[0], Language::Lua, Origin::Method(name.clone()));
                }
                _ => {}
            }
        }
        let args: Vec<syn::Expr> = m.args.iter().cloned().collect();
        if self.cx.gated && commands::is_command_method(&name) {
            if let Some(t) = commands::typed(&name, &args, self) {
                let result = if turbofish_unit(m.turbofish.as_ref()) {
                    ResultUse::Ignored("the reply type is `()`")
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
                    if let Some(Event::Op(op)) = self.events.last_mut() {
                        op.receiver = Some(receiver);
                    }
                }
                return;
            }
        }
        if !is_std_method(&name) {
            let args_k = m.args.iter().map(|a| key_of(a, self)).collect();
            let id = self.node();
            let span = self
                .span_of(&m.method)
                .join(self.span_of(&m.paren_token.span.close()));
            self.events.push(Event::Call(Call {
                id,
                name,
                method: true,
                on_self: is_self(&m.receiver),
                args: args_k,
                span,
                result: u,
                deps: self.current_deps(),
            }));
        }
        self.expr(&m.receiver, ResultUse::Used);
        for a in &m.args {
            self.expr(a, ResultUse::Used);
        }
    }

    /// The text of a same-file string const named by `e`.
    fn const_text(&self, e: &syn::Expr) -> Option<String> {
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
    fn executor_of(&self, e: &syn::Expr) -> Option<Executor> {
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
                    .and_then(|(_, t)| embed::executor_of_type(t))
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
    fn embed_literal(
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
                let span = *self.cx.const_spans.get(&name)?;
                return self.embed_span(span, language, origin);
            }
            _ => return None,
        };
        if !matches!(lit.lit, syn::Lit::Str(_) | syn::Lit::ByteStr(_)) {
            return None;
        }
        self.embed_span(self.span_of(lit), language, origin)
    }

    fn embed_span(&mut self, span: Span, language: Language, origin: Origin) -> Option<usize> {
        let src = self.cx.file.snippet(span);
        let (text, map) = super::literal::decode(src, span.start)?;
        self.embedded.push(Embedded {
            language,
            text,
            map,
            span,
            origin,
            func: Some(self.func_idx),
            exec: None,
        });
        Some(self.embedded_base + self.embedded.len() - 1)
    }

    /// The binds of `sqlx::query("..").bind(a).bind(b)` or `sqlx::query!("..", a, b)`, in
    /// order, when the chain starts from the statement's literal itself.
    fn chain_binds(&self, e: &syn::Expr) -> Option<Vec<Span>> {
        let mut binds = Vec::new();
        let mut cur = e;
        loop {
            match cur {
                syn::Expr::MethodCall(m) => {
                    if m.method == "bind" {
                        let start = self.span_of(&*m.receiver).end;
                        let end = self.span_of(&m.paren_token.span.close()).end;
                        binds.push(Span::new(start, end));
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
                let literal = c.args.first().is_some_and(|a| str_lit(a).is_some());
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
                    out.push(Span::new(prev, end));
                    prev = end;
                }
                Some(out)
            }
            _ => None,
        }
    }

    /// The parameters of a tokio-postgres call, `&[&a, &b]`: the span removing each deletes.
    fn slice_binds(&self, params: &syn::Expr) -> Option<Vec<Span>> {
        let syn::Expr::Reference(r) = params else {
            return None;
        };
        let syn::Expr::Array(a) = &*r.expr else {
            return None;
        };
        let elems: Vec<Span> = a.elems.iter().map(|e| self.span_of(e)).collect();
        let out = elems
            .iter()
            .enumerate()
            .map(|(i, s)| match (i, elems.get(i + 1)) {
                (0, Some(next)) => Span::new(s.start, next.start),
                (0, None) => *s,
                _ => Span::new(elems[i - 1].end, s.end),
            })
            .collect();
        Some(out)
    }

    /// Mark an embedded statement as run here, by this executor.
    fn sql_exec(
        &mut self,
        idx: usize,
        executor: Option<Executor>,
        span: Span,
        result: ResultUse,
        binds: Option<Vec<Span>>,
    ) {
        let id = self.node();
        if let Some(e) = self.embedded.get_mut(idx - self.embedded_base) {
            if e.exec.is_some() {
                return;
            }
            e.exec = Some(SqlExec {
                id,
                executor: executor.unwrap_or(Executor::Unknown),
                span,
                result,
                binds,
            });
            self.events.push(Event::Sql { id, embedded: idx });
        }
    }

    /// The embedded statement a method chain starts from (`sqlx::query("..").bind(..)`).
    fn chain_embedded(&self, e: &syn::Expr) -> Option<usize> {
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
    }

    fn is_base_literal(&self, base: &syn::Expr, lit: Span) -> bool {
        let s = self.span_of(base);
        s.start <= lit.start && lit.end <= s.end
    }

    /// `script.key(k).arg(t).invoke_async(con)`: the keys a Lua script is run on.
    fn script_invocation(&mut self, m: &syn::ExprMethodCall, u: ResultUse) {
        let mut keys = Vec::new();
        let mut cur: &syn::Expr = &m.receiver;
        while let syn::Expr::MethodCall(inner) = cur {
            if inner.method == "key" && inner.args.len() == 1 {
                let start = self.span_of(&inner.method).start;
                let end = self.span_of(&inner.paren_token.span.close()).end;
                keys.push((self.pending_arg(&inner.args[0]), Span::new(start, end)));
            }
            cur = &inner.receiver;
        }
        self.expr(&m.receiver, ResultUse::Used);
        for a in &m.args {
            self.expr(a, ResultUse::Used);
        }
        keys.reverse();
        for (k, span) in keys {
            self.emit_op(
                OpKind::Script,
                "EVALSHA".to_string(),
                std::slice::from_ref(&k),
                0,
                None,
                span,
                u.clone(),
                Channel::Direct,
            );
        }
    }

    fn pending_arg(&self, e: &syn::Expr) -> PendingArg {
        let span = self.span_of(e);
        let key = key_of(e, self);
        PendingArg {
            word: str_lit(e).or_else(|| key.constant_text()),
            value: value_of(e, self),
            key,
            span,
        }
    }

    fn emit_typed(
        &mut self,
        t: &commands::Typed,
        args: &[syn::Expr],
        span: Span,
        result: ResultUse,
        channel: Channel,
    ) {
        let pending: Vec<PendingArg> = args.iter().map(|a| self.pending_arg(a)).collect();
        self.emit_op(
            t.kind.clone(),
            t.command.clone(),
            &pending,
            t.key_arg,
            t.value_arg,
            span,
            result,
            channel,
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn emit_op(
        &mut self,
        kind: OpKind,
        command: String,
        args: &[PendingArg],
        key_arg: usize,
        value_arg: Option<usize>,
        span: Span,
        result: ResultUse,
        channel: Channel,
    ) {
        let Some(key) = args.get(key_arg) else {
            return;
        };
        let value = value_arg
            .and_then(|i| args.get(i))
            .map(|a| (a.value.clone(), a.span));
        let id = self.node();
        self.events.push(Event::Op(Box::new(Op {
            id,
            kind,
            command,
            key: key.key.clone(),
            key_span: key.span,
            value,
            span,
            stmt: None,
            in_macro: self.macro_depth > 0,
            result,
            deps: self.current_deps(),
            channel,
            watched: self.watched > 0,
            receiver: None,
        })));
    }

    /// The builder a method chain starts from, if any: `redis::cmd(..)`, `redis::pipe()`,
    /// `Cmd::new()`, or a local holding one.
    fn builder_base(&mut self, m: &syn::ExprMethodCall) -> Option<BaseKind> {
        let mut cur: &syn::Expr = &m.receiver;
        loop {
            match cur {
                syn::Expr::MethodCall(inner) => cur = &inner.receiver,
                syn::Expr::Reference(r) => cur = &r.expr,
                syn::Expr::Paren(p) => cur = &p.expr,
                _ => break,
            }
        }
        self.base_kind(cur)
    }

    /// What a chain's starting expression is, builder-wise.
    fn base_kind(&self, e: &syn::Expr) -> Option<BaseKind> {
        match e {
            syn::Expr::Call(c) => {
                let (name, full) = path_last(&c.func)?;
                match name.as_str() {
                    "cmd" if c.args.len() == 1 => {
                        let n = str_lit(&c.args[0])
                            .or_else(|| key_of(&c.args[0], self).constant_text())?;
                        Some(BaseKind::Cmd(Some(n), self.span_of(&c.func).start))
                    }
                    "new" if full.ends_with("Cmd::new") => {
                        Some(BaseKind::Cmd(None, self.span_of(&c.func).start))
                    }
                    "pipe" if c.args.is_empty() && (full.contains("redis") || self.cx.gated) => {
                        Some(BaseKind::Pipe)
                    }
                    "new" | "with_capacity" if full.contains("Pipeline::") => Some(BaseKind::Pipe),
                    _ => None,
                }
            }
            syn::Expr::Reference(r) => self.base_kind(&r.expr),
            syn::Expr::Paren(p) => self.base_kind(&p.expr),
            syn::Expr::Path(p) => {
                let id = p.path.get_ident()?.to_string();
                self.lookup(&id)?.builder.map(BaseKind::Existing)
            }
            _ => None,
        }
    }

    fn new_builder(&mut self, base: BaseKind) -> usize {
        match base {
            BaseKind::Existing(i) => i,
            BaseKind::Cmd(name, start) => {
                self.builders.push(Builder::Cmd(PendingCmd {
                    name,
                    typed: None,
                    args: Vec::new(),
                    span: Span::new(start, start),
                    ignored: false,
                }));
                self.builders.len() - 1
            }
            BaseKind::Pipe => {
                self.next_pipe += 1;
                self.builders.push(Builder::Pipe {
                    id: self.next_pipe,
                    atomic: false,
                    cmds: Vec::new(),
                });
                self.builders.len() - 1
            }
        }
    }

    fn builder_chain(&mut self, outer: &syn::ExprMethodCall, base: BaseKind, u: ResultUse) {
        let mut chain: Vec<&syn::ExprMethodCall> = vec![outer];
        let mut cur: &syn::Expr = &outer.receiver;
        loop {
            match cur {
                syn::Expr::MethodCall(inner) => {
                    chain.push(inner);
                    cur = &inner.receiver;
                }
                syn::Expr::Reference(r) => cur = &r.expr,
                syn::Expr::Paren(p) => cur = &p.expr,
                _ => break,
            }
        }
        chain.reverse();
        let idx = self.new_builder(base);
        let mut sent = false;
        for (pos, mc) in chain.iter().enumerate() {
            let name = mc.method.to_string();
            let end = self.span_of(&mc.paren_token.span.close()).end;
            let args: Vec<syn::Expr> = mc.args.iter().cloned().collect();
            for a in &args {
                self.expr(a, ResultUse::Used);
            }
            if commands::is_exec(&name) {
                let mut result = if name.starts_with("exec") {
                    ResultUse::Ignored("`exec` discards the reply")
                } else if turbofish_unit(mc.turbofish.as_ref()) {
                    ResultUse::Ignored("the reply type is `()`")
                } else {
                    u.clone()
                };
                for later in &chain[pos + 1..] {
                    let l = later.method.to_string();
                    if commands::discards_value(&l) {
                        result = ResultUse::Ignored(
                            "only success is checked (`is_ok()`/`is_err()`), not the reply",
                        );
                    } else if !commands::is_passthrough(&l) {
                        result = ResultUse::Used;
                    }
                }
                self.send(idx, result);
                sent = true;
                break;
            }
            let pending: Vec<PendingArg> = args.iter().map(|a| self.pending_arg(a)).collect();
            let method_start = self.span_of(&mc.method).start;
            let typed = commands::typed(&name, &args, self);
            match &mut self.builders[idx] {
                Builder::Cmd(c) => {
                    if name == "arg" {
                        for p in pending {
                            if c.name.is_none() {
                                c.name = p.word.clone();
                            } else {
                                c.args.push(p);
                            }
                        }
                        c.span.end = end;
                    }
                }
                Builder::Pipe { atomic, cmds, .. } => match name.as_str() {
                    "atomic" => *atomic = true,
                    "cmd" => {
                        let n = pending
                            .first()
                            .and_then(|p| p.word.clone().or(p.key.constant_text()));
                        cmds.push(PendingCmd {
                            name: n,
                            typed: None,
                            args: Vec::new(),
                            span: Span::new(method_start, end),
                            ignored: false,
                        });
                    }
                    "arg" => {
                        if let Some(c) = cmds.last_mut() {
                            c.args.extend(pending);
                            c.span.end = end;
                        }
                    }
                    "ignore" => {
                        if let Some(c) = cmds.last_mut() {
                            c.ignored = true;
                        }
                    }
                    _ => {
                        if let Some(t) = typed {
                            cmds.push(PendingCmd {
                                name: None,
                                typed: Some((t, pending)),
                                args: Vec::new(),
                                span: Span::new(method_start, end),
                                ignored: false,
                            });
                        }
                    }
                },
            }
        }
        if !sent {
            self.last_builder = Some(idx);
        }
    }

    /// Send a builder: every pending command becomes an operation.
    fn send(&mut self, idx: usize, result: ResultUse) {
        let (cmds, channel) = match &mut self.builders[idx] {
            Builder::Cmd(c) => (vec![c.clone()], Channel::Direct),
            Builder::Pipe { id, atomic, cmds } => (
                std::mem::take(cmds),
                Channel::Pipeline {
                    id: *id,
                    atomic: *atomic,
                },
            ),
        };
        for c in cmds {
            let r = if c.ignored {
                ResultUse::Ignored("`.ignore()` drops the reply")
            } else {
                result.clone()
            };
            if let Some((t, args)) = &c.typed {
                self.emit_op(
                    t.kind.clone(),
                    t.command.clone(),
                    args,
                    t.key_arg,
                    t.value_arg,
                    c.span,
                    r,
                    channel,
                );
                continue;
            }
            let Some(name) = &c.name else { continue };
            let words: Vec<CmdArg> = c
                .args
                .iter()
                .map(|a| match &a.word {
                    Some(w) => CmdArg::Word(w.clone()),
                    None => CmdArg::Other,
                })
                .collect();
            if name.eq_ignore_ascii_case("EVAL") || name.eq_ignore_ascii_case("EVAL_RO") {
                if let Some(script) = c.args.first() {
                    let src = self.cx.file.snippet(script.span);
                    if src.starts_with('"') || src.starts_with('r') {
                        self.embed_span(script.span, Language::Lua, Origin::Eval);
                    }
                }
            }
            let Some((kind, key_arg, value_arg)) = commands::builder(name, &words) else {
                continue;
            };
            if kind == OpKind::Watch {
                self.watched += 1;
            }
            let command = command_text(name, &kind);
            self.emit_op(
                kind, command, &c.args, key_arg, value_arg, c.span, r, channel,
            );
        }
    }
}

/// Deduplicate, keeping the most recent `MAX_DEPS`.
fn bounded(deps: Vec<Dep>) -> Vec<Dep> {
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

fn command_text(name: &str, kind: &OpKind) -> String {
    let upper = name.to_ascii_uppercase();
    match kind {
        OpKind::Write { nx: true, .. } if upper == "SET" => "SET ... NX".to_string(),
        _ => upper,
    }
}

enum BaseKind {
    Cmd(Option<String>, usize),
    Pipe,
    Existing(usize),
}

/// Statements of a macro body written like a block (`tokio::select!` arms are not).
struct BlockBody(Vec<syn::Stmt>);

impl syn::parse::Parse for BlockBody {
    fn parse(input: syn::parse::ParseStream) -> syn::Result<Self> {
        Ok(BlockBody(syn::Block::parse_within(input)?))
    }
}

/// Macros whose arguments are only logged: mentioning a reply there does not check it.
fn is_logging_macro(name: &str) -> bool {
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

/// Identifier uses in a body with their offsets (including inside macros and format strings),
/// leaving out what is only logged.
fn collect_uses(file: &SourceFile, body: &syn::Block, out: &mut Vec<(String, usize)>) {
    let mut stack = vec![quote::ToTokens::to_token_stream(body)];
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
                        for piece in super::keys::parse_format(text.trim_matches('"')) {
                            if let super::keys::FmtPiece::Named(n) = piece {
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
