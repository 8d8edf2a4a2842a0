//! Redis commands: typed methods, `redis::cmd` and `Cmd::new()` builders, pipelines and
//! transactions, script invocations; each becomes an `Op` when it is sent.

use super::*;

#[derive(Debug, Clone)]
pub(super) struct PendingArg {
    pub(super) word: Option<String>,
    pub(super) key: KeyRef,
    pub(super) value: Value,
    pub(super) span: Span,
    /// Computed from other values (`now() + expires`): the value is not its parameter's.
    pub(super) computed: bool,
}

#[derive(Debug, Clone)]
pub(super) struct PendingCmd {
    /// Command name for `cmd("..")`; `None` until the first `.arg` of `Cmd::new()`.
    pub(super) name: Option<String>,
    pub(super) typed: Option<(commands::Typed, Vec<PendingArg>)>,
    pub(super) args: Vec<PendingArg>,
    pub(super) span: Span,
    pub(super) ignored: bool,
}

#[derive(Debug, Clone)]
pub(super) enum Builder {
    Cmd(PendingCmd),
    Pipe {
        id: usize,
        atomic: bool,
        cmds: Vec<PendingCmd>,
    },
}

pub(super) fn command_text(name: &str, kind: &OpKind) -> String {
    let upper = name.to_ascii_uppercase();
    match kind {
        OpKind::Write { nx: true, .. } if upper == "SET" => "SET ... NX".to_string(),
        _ => upper,
    }
}

pub(super) enum BaseKind {
    Cmd(Option<String>, usize),
    Pipe,
    Existing(usize),
}

impl FnWalker<'_> {
    /// The `.key(..)`s of a method chain in order, with the expression the chain starts from.
    fn chain_keys<'e>(&self, e: &'e syn::Expr) -> (Vec<(PendingArg, Span)>, &'e syn::Expr) {
        let mut keys = Vec::new();
        let mut cur = e;
        while let syn::Expr::MethodCall(inner) = cur {
            if inner.method == "key" && inner.args.len() == 1 {
                let start = self.span_of(&inner.method).start;
                let end = self.span_of(&inner.paren_token.span.close()).end;
                keys.push((self.pending_arg(&inner.args[0]), Span::new(start, end)));
            }
            cur = &inner.receiver;
        }
        keys.reverse();
        (keys, cur)
    }

    /// `inv.key(k)` on a local holding a script invocation being built
    /// (`let mut inv = SCRIPT.key(a); inv.key(b); inv.invoke_async(con)`): the key is kept for
    /// the local until the invocation is sent.
    pub(super) fn invocation_key(&mut self, m: &syn::ExprMethodCall) {
        if m.method != "key" || m.args.len() != 1 {
            return;
        }
        let (_, root) = self.chain_keys(&m.receiver);
        let Some(name) = local_name(root) else { return };
        if self.lookup(&name).is_none() {
            return;
        }
        let start = self.span_of(&m.method).start;
        let end = self.span_of(&m.paren_token.span.close()).end;
        let key = (self.pending_arg(&m.args[0]), Span::new(start, end));
        self.invocation_keys.entry(name).or_default().push(key);
    }

    /// `script.key(k).arg(t).invoke_async(con)`: the keys a Lua script is run on, also those
    /// given before to the local the chain starts from (its initialiser's and later
    /// `.key(..)` statements').
    pub(super) fn script_invocation(&mut self, m: &syn::ExprMethodCall, u: ResultUse) {
        let (chain, root) = self.chain_keys(&m.receiver);
        let mut keys = Vec::new();
        let mut script = script_name(root);
        let local = local_name(root).filter(|n| self.lookup(n).is_some());
        if let Some(name) = &local {
            let earlier = self.invocation_keys.remove(name).unwrap_or_default();
            if let Some(init) = self.lookup(name).and_then(|b| b.expr.clone()) {
                let (from_init, init_root) = self.chain_keys(&init);
                keys.extend(from_init);
                script = script_name(init_root).or(script);
            }
            keys.extend(earlier);
        }
        keys.extend(chain);
        self.expr(&m.receiver, ResultUse::Used);
        for a in &m.args {
            self.expr(a, ResultUse::Used);
        }
        if let Some(name) = &local {
            // the walk of the receiver saw this chain's own `.key(..)`s again
            self.invocation_keys.remove(name);
        }
        self.script_ops("EVALSHA", &keys, u, script);
    }

    /// One script operation per key of an invocation (`(key, span)` each), the first with
    /// every key, each naming the script it runs.
    fn script_ops(
        &mut self,
        command: &str,
        keys: &[(PendingArg, Span)],
        result: ResultUse,
        script: Option<String>,
    ) {
        let all: Vec<(KeyRef, Span)> = keys.iter().map(|(k, _)| (k.key.clone(), k.span)).collect();
        for (i, (k, span)) in keys.iter().enumerate() {
            self.emit_op(
                OpKind::Script,
                command.to_string(),
                std::slice::from_ref(k),
                0,
                None,
                *span,
                result.clone(),
                Channel::Direct,
            );
            if let Some(Event::Op(op)) = self.events.last_mut() {
                if i == 0 {
                    op.keys = all.clone();
                }
                op.script = script.clone();
            }
        }
    }

    /// fred's `eval(script, keys, args)` / `evalsha(..)` with a literal list of keys: one
    /// script operation per key, the first with every key.
    pub(super) fn fred_eval(&mut self, m: &syn::ExprMethodCall, result: ResultUse) {
        let items = list_items(&m.args[1]);
        if items.is_empty() {
            return;
        }
        let script = script_name(&m.args[0]);
        let span = self
            .span_of(&m.method)
            .join(self.span_of(&m.paren_token.span.close()));
        // the first operation is placed at the call, the others at their keys
        let keys: Vec<(PendingArg, Span)> = items
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let k = self.pending_arg(e);
                let at = if i == 0 { span } else { k.span };
                (k, at)
            })
            .collect();
        self.script_ops("EVAL", &keys, result, script);
    }

    /// `EVAL script numkeys key.. arg..` (also `EVALSHA`, `EVAL_RO`): one script operation
    /// per key, the first with every key, when `numkeys` is a literal.
    fn emit_eval(&mut self, c: &PendingCmd, result: ResultUse, channel: Channel) {
        let Some(n) = c
            .args
            .get(1)
            .and_then(|a| a.word.as_deref())
            .and_then(|w| w.parse::<usize>().ok())
        else {
            return;
        };
        let Some(keys) = c.args.get(2..2 + n) else {
            return;
        };
        let all: Vec<(KeyRef, Span)> = keys.iter().map(|k| (k.key.clone(), k.span)).collect();
        for (i, k) in keys.iter().enumerate() {
            self.emit_op(
                OpKind::Script,
                "EVAL".to_string(),
                std::slice::from_ref(k),
                0,
                None,
                if i == 0 { c.span } else { k.span },
                result.clone(),
                channel,
            );
            if i == 0 {
                if let Some(Event::Op(op)) = self.events.last_mut() {
                    op.keys = all.clone();
                }
            }
        }
    }

    /// The keys of a typed multi-key command given as one list (`del(&[a, b])`,
    /// `del(vec![a, b])`, `del((a, b))`), when it lists several.
    fn listed_keys(&self, t: &commands::Typed, args: &[syn::Expr]) -> Vec<(KeyRef, Span)> {
        if !matches!(t.command.as_str(), "del" | "unlink" | "exists") || args.len() != 1 {
            return Vec::new();
        }
        let items = list_items(&args[0]);
        if items.len() < 2 {
            return Vec::new();
        }
        items
            .iter()
            .map(|e| (key_of(e, self), self.span_of(e)))
            .collect()
    }

    pub(super) fn pending_arg(&self, e: &syn::Expr) -> PendingArg {
        let span = self.span_of(e);
        let key = key_of(e, self);
        let mut inner = e;
        while let syn::Expr::Reference(syn::ExprReference { expr, .. })
        | syn::Expr::Paren(syn::ExprParen { expr, .. }) = inner
        {
            inner = expr;
        }
        PendingArg {
            computed: match inner {
                syn::Expr::Binary(_) => true,
                syn::Expr::Unary(u) => !matches!(u.op, syn::UnOp::Deref(_)),
                _ => false,
            },
            word: str_lit(e).or_else(|| key.constant_text()),
            value: value_of(e, self),
            key,
            span,
        }
    }

    pub(super) fn emit_typed(
        &mut self,
        t: &commands::Typed,
        args: &[syn::Expr],
        span: Span,
        result: ResultUse,
        channel: Channel,
    ) {
        let pending: Vec<PendingArg> = args.iter().map(|a| self.pending_arg(a)).collect();
        let listed = self.listed_keys(t, args);
        let before = self.events.len();
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
        if self.events.len() > before && !listed.is_empty() {
            if let Some(Event::Op(op)) = self.events.last_mut() {
                op.keys = listed;
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn emit_op(
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
        let value_at = value_arg.and_then(|i| args.get(i));
        let value = value_at.map(|a| (a.value.clone(), a.span));
        let whole_param =
            |a: &&PendingArg| a.key.parts.len() == 1 && a.value == Value::Dynamic && !a.computed;
        let value_param = value_at
            .filter(whole_param)
            .and_then(|a| a.key.param.as_ref().map(|(i, _)| *i));
        let id = self.node();
        self.events.push(Event::Op(Box::new(Op {
            id,
            kind,
            command,
            key: key.key.clone(),
            key_span: key.span,
            value,
            value_param,
            span,
            stmt: None,
            expr: None,
            switch: self.switches.last().cloned(),
            in_macro: self.macro_depth > 0,
            result,
            deps: self.current_deps(),
            channel,
            watched: self.watched > 0,
            receiver: None,
            receiver_root: None,
            args: args.iter().map(|a| a.span).collect(),
            option_spans: Vec::new(),
            keys: Vec::new(),
            script: None,
            described: false,
        })));
    }

    /// The builder a method chain starts from, if any: `redis::cmd(..)`, `redis::pipe()`,
    /// `Cmd::new()`, or a local holding one.
    pub(super) fn builder_base(&mut self, m: &syn::ExprMethodCall) -> Option<BaseKind> {
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
    pub(super) fn base_kind(&self, e: &syn::Expr) -> Option<BaseKind> {
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
                    "pipe"
                        if c.args.is_empty()
                            && (full.contains("redis") || self.cx.mentions_redis) =>
                    {
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

    pub(super) fn new_builder(&mut self, base: BaseKind) -> usize {
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

    pub(super) fn builder_chain(
        &mut self,
        outer: &syn::ExprMethodCall,
        base: BaseKind,
        u: ResultUse,
    ) {
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
                    ResultUse::Ignored("`exec` discards the reply".into())
                } else if turbofish_unit(mc.turbofish.as_ref()) {
                    ResultUse::Ignored("the reply type is `()`".into())
                } else {
                    u.clone()
                };
                for later in &chain[pos + 1..] {
                    let l = later.method.to_string();
                    if commands::discards_value(&l) {
                        result = ResultUse::Ignored(
                            "only success is checked (`is_ok()`/`is_err()`), not the reply".into(),
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
    pub(super) fn send(&mut self, idx: usize, result: ResultUse) {
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
                ResultUse::Ignored("`.ignore()` drops the reply".into())
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
            if commands::is_eval(name) {
                self.emit_eval(&c, r, channel);
                continue;
            }
            let Some((kind, key_arg, value_arg)) = commands::builder(name, &words) else {
                continue;
            };
            if kind == OpKind::Watch {
                self.watched += 1;
            }
            let command = command_text(name, &kind);
            let before = self.events.len();
            self.emit_op(
                kind, command, &c.args, key_arg, value_arg, c.span, r, channel,
            );
            if c.args.len() > 1 && commands::takes_many_keys(name) && self.events.len() > before {
                if let Some(Event::Op(op)) = self.events.last_mut() {
                    op.keys = c.args.iter().map(|a| (a.key.clone(), a.span)).collect();
                }
            }
        }
    }
}

/// The elements of a literal list of keys: `&[a, b]`, `[a, b]`, `vec![a, b]`, `(a, b)`.
fn list_items(e: &syn::Expr) -> Vec<syn::Expr> {
    match e {
        syn::Expr::Reference(r) => list_items(&r.expr),
        syn::Expr::Paren(p) => list_items(&p.expr),
        syn::Expr::Array(a) => a.elems.iter().cloned().collect(),
        syn::Expr::Tuple(t) => t.elems.iter().cloned().collect(),
        syn::Expr::Macro(m) if m.mac.path.is_ident("vec") => macro_args(&m.mac).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The name a script invocation's script is reached from: `RELEASE` of `RELEASE.key(k)` or
/// `Script::new(RELEASE).key(k)`, `script` of a local, `release` of `self.release`.
fn script_name(root: &syn::Expr) -> Option<String> {
    match root {
        syn::Expr::Reference(r) => script_name(&r.expr),
        syn::Expr::Paren(p) => script_name(&p.expr),
        syn::Expr::Unary(u) => script_name(&u.expr),
        syn::Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        syn::Expr::Field(f) => match &f.member {
            syn::Member::Named(i) => Some(i.to_string()),
            syn::Member::Unnamed(_) => None,
        },
        syn::Expr::Call(c) if c.args.len() == 1 => {
            let is_new = matches!(&*c.func, syn::Expr::Path(p)
                if p.path.segments.last().is_some_and(|s| s.ident == "new"));
            if is_new {
                script_name(&c.args[0])
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The local variable an expression names, if it is one identifier.
fn local_name(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Reference(r) => local_name(&r.expr),
        syn::Expr::Paren(p) => local_name(&p.expr),
        syn::Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        _ => None,
    }
}
