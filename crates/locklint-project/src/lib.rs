//! Project-wide facts: resolves key templates across files, expands lock helpers at their
//! call sites into per-function traces, and decides which keys are locks.

pub mod schema;
pub mod ttl;

use locklint_ir::source::{FileRef, Span};
use locklint_ir::vocabulary::{self, words};
use locklint_ir::{
    Call, Event, FileIr, FnId, Function, KeyIdentity, KeyRef, NodeId, Op, OpKind, Part, ResultUse,
    ScopedKey,
};
use std::collections::{HashMap, HashSet};

/// How deep lock helpers are expanded into their callers.
const MAX_INLINE_DEPTH: usize = 4;
/// How many operations of helpers one function's trace takes in: helpers that call helpers
/// many times each would otherwise multiply (later calls are not expanded).
const MAX_INLINED_OPS: usize = 50_000;

/// (a) with extra lock words from the configuration (`lock-key-patterns`).
pub fn key_matches(key: &KeyRef, extra: &[String]) -> bool {
    let is =
        |w: &String| vocabulary::is_lock_word(w) || extra.iter().any(|x| x.eq_ignore_ascii_case(w));
    let lit = key.parts.iter().any(|p| match p {
        Part::Lit(s) => words(s).iter().any(is),
        _ => false,
    });
    lit || key.names.iter().any(|n| words(n).iter().any(is))
}

/// One operation as seen from a root function, after helper expansion.
#[derive(Debug, Clone)]
pub struct TraceOp<'a> {
    pub op: &'a Op,
    /// File the operation is written in.
    pub file: FileRef,
    /// The function the operation is written in.
    pub func: &'a Function,
    /// Key resolved with the caller's arguments and project-wide consts.
    pub key: KeyRef,
    /// Identity used to tell whether two operations touch the same key.
    pub identity: Option<KeyIdentity>,
    pub is_lock: bool,
    /// What the reply is used for, seen from the root function.
    pub result: ResultUse,
    /// Reads (by node) this operation's path depends on.
    pub deps: Vec<NodeId>,
    /// Call sites from the root function down to the helper that holds the operation.
    pub via: Vec<(FileRef, Span)>,
    /// The root function's event at which this operation happens (the op itself, or the
    /// outermost call that leads to it): orders it against the root's other events.
    pub at: NodeId,
}

impl TraceOp<'_> {
    /// The TTL the operation sets, as the code writes it (see [`ttl::of`]).
    pub fn ttl(&self) -> Option<ttl::Ttl> {
        ttl::of(&self.file, self.op)
    }

    /// Where to report a problem with the reply: the outermost call site when expanded.
    pub fn reply_site(&self) -> (FileRef, Span) {
        match self.via.first() {
            Some((f, s)) => (f.clone(), *s),
            None => (self.file.clone(), self.op.span),
        }
    }
}

/// All operations reachable from one function, in order.
#[derive(Debug)]
pub struct Trace<'a> {
    pub root: &'a Function,
    pub file: FileRef,
    pub ops: Vec<TraceOp<'a>>,
    /// Indexes into `ops` per key identity, in order.
    by_key: HashMap<KeyIdentity, Vec<usize>>,
    /// Indexes into `ops` per operation node, in order (a helper's operation appears once
    /// per call).
    by_node: HashMap<NodeId, Vec<usize>>,
}

impl<'a> Trace<'a> {
    pub fn new(root: &'a Function, file: FileRef, ops: Vec<TraceOp<'a>>) -> Self {
        let mut by_key: HashMap<KeyIdentity, Vec<usize>> = HashMap::new();
        let mut by_node: HashMap<NodeId, Vec<usize>> = HashMap::new();
        for (i, o) in ops.iter().enumerate() {
            if let Some(id) = &o.identity {
                by_key.entry(id.clone()).or_default().push(i);
            }
            by_node.entry(o.op.id).or_default().push(i);
        }
        Trace {
            root,
            file,
            ops,
            by_key,
            by_node,
        }
    }

    pub fn same_key(&self, a: &TraceOp, b: &TraceOp) -> bool {
        a.identity.is_some() && a.identity == b.identity
    }

    /// Indexes of the operations on the same key as `ops[index]` (itself included).
    fn on_key(&self, index: usize) -> &[usize] {
        self.ops[index]
            .identity
            .as_ref()
            .and_then(|id| self.by_key.get(id))
            .map_or(&[], Vec::as_slice)
    }

    /// Operations before `index` on the same key, in order.
    pub fn earlier_on_key(
        &self,
        index: usize,
    ) -> impl DoubleEndedIterator<Item = &TraceOp<'a>> + '_ {
        let same = self.on_key(index);
        let before = same.partition_point(|&j| j < index);
        same[..before].iter().map(move |&j| &self.ops[j])
    }

    /// Operations after `index` on the same key, in order.
    pub fn later_on_key(&self, index: usize) -> impl DoubleEndedIterator<Item = &TraceOp<'a>> + '_ {
        let same = self.on_key(index);
        let after = same.partition_point(|&j| j <= index);
        same[after..].iter().map(move |&j| &self.ops[j])
    }

    /// Indexes of the trace's operations made by this node.
    pub fn indexes_of(&self, node: NodeId) -> &[usize] {
        self.by_node.get(&node).map_or(&[], Vec::as_slice)
    }
}

/// Facts rules consult across traces.
#[derive(Debug, Default)]
pub struct Facts {
    /// What fixes may assume: the target Redis version and the TTL for locks without one.
    pub fix: FixSettings,
    /// Acquires without an expiry that are followed by a separate expiry in some trace.
    pub acquires_expired_later: HashSet<NodeId>,
    /// Expiry commands that follow an acquire without expiry in some trace.
    pub expiries_after_acquire: HashSet<NodeId>,
    /// Keys (see [`scoped_identity`]) acquired with NX somewhere.
    pub acquired_nx: HashSet<ScopedKey>,
}

/// Settings that choose the form of fixes (`redis-version`, `default-ttl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixSettings {
    /// Target Redis version (major, minor): `DELEX ... IFEQ` needs 8.4.
    pub redis_version: (u32, u32),
    /// Expiry for locks taken without one, in milliseconds.
    pub default_ttl_ms: u64,
}

impl Default for FixSettings {
    fn default() -> Self {
        FixSettings {
            redis_version: (7, 0),
            default_ttl_ms: 30_000,
        }
    }
}

impl FixSettings {
    /// Whether the target has `DELEX key IFEQ token` (Redis 8.4).
    pub fn has_delex(&self) -> bool {
        self.redis_version >= (8, 4)
    }
}

/// `7.2` → (7, 2); `8` → (8, 0).
pub fn parse_version(s: &str) -> Option<(u32, u32)> {
    let mut it = s.trim().split('.');
    let major = it.next()?.parse().ok()?;
    let minor = match it.next() {
        Some(m) => m.parse().ok()?,
        None => 0,
    };
    Some((major, minor))
}

/// The analysed project: every file's intermediate form plus the derived traces and facts.
pub struct Project<'a> {
    pub files: &'a [FileIr],
    pub traces: Vec<Trace<'a>>,
    pub facts: Facts,
    /// Tables, fencing columns, lock tables and unique keys from every file's SQL.
    pub schema: crate::schema::Schema,
    /// Key templates declared efficiency-only locks in the configuration.
    pub efficiency_locks: Vec<String>,
}

impl Project<'_> {
    /// Whether the configuration declares this lock key `purpose = "efficiency"`.
    pub fn is_efficiency_lock(&self, key: &KeyRef) -> bool {
        let (template, shown) = (key.template(), key.display());
        self.efficiency_locks
            .iter()
            .any(|t| template_matches(t, &template) || template_matches(t, &shown))
    }
}

/// Whether a declared key template (`lock:report:{id}`: `{...}` matches any text) matches a key.
pub fn template_matches(declared: &str, key: &str) -> bool {
    let mut parts: Vec<&str> = Vec::new();
    let mut rest = declared;
    while let Some(open) = rest.find('{') {
        parts.push(&rest[..open]);
        rest = match rest[open..].find('}') {
            Some(close) => &rest[open + close + 1..],
            None => "",
        };
    }
    parts.push(rest);
    if parts.len() == 1 {
        return declared == key;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if key.len() < first.len() + last.len() || !key.starts_with(first) || !key.ends_with(last) {
        return false;
    }
    let mut middle = &key[first.len()..key.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match middle.find(p) {
            Some(i) => middle = &middle[i + p.len()..],
            None => return false,
        }
    }
    true
}

struct Index<'a> {
    files: &'a [FileIr],
    consts: HashMap<String, Option<KeyRef>>,
    fields: HashMap<(String, String), Option<KeyRef>>,
    by_name: HashMap<&'a str, Vec<(usize, usize)>>,
    touches: HashSet<(usize, usize)>,
}

fn merge_unique(map: &mut HashMap<String, Option<KeyRef>>, name: String, k: KeyRef) {
    match map.get(&name) {
        None => {
            map.insert(name, Some(k));
        }
        Some(Some(prev)) if prev.template() != k.template() => {
            map.insert(name, None);
        }
        _ => {}
    }
}

impl<'a> Index<'a> {
    fn new(files: &'a [FileIr]) -> Self {
        let mut consts = HashMap::new();
        let mut fields: HashMap<(String, String), Option<KeyRef>> = HashMap::new();
        let mut by_name: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
        for (fi, f) in files.iter().enumerate() {
            for (n, k) in &f.consts {
                merge_unique(&mut consts, n.clone(), k.clone());
            }
            for (t, field, k) in &f.field_inits {
                let key = (t.clone(), field.clone());
                match fields.get(&key) {
                    None => {
                        fields.insert(key, Some(k.clone()));
                    }
                    Some(Some(prev)) if prev.template() != k.template() => {
                        fields.insert(key, None);
                    }
                    _ => {}
                }
            }
            for (fj, func) in f.functions.iter().enumerate() {
                by_name
                    .entry(func.name.as_str())
                    .or_default()
                    .push((fi, fj));
            }
        }
        let mut idx = Index {
            files,
            consts,
            fields,
            by_name,
            touches: HashSet::new(),
        };
        idx.compute_touches();
        idx
    }

    fn func(&self, at: (usize, usize)) -> &'a Function {
        &self.files[at.0].functions[at.1]
    }

    /// Functions that reach Redis, directly or through the functions they call: a walk up
    /// the call graph from those with their own operations.
    fn compute_touches(&mut self) {
        let mut callers: HashMap<(usize, usize), Vec<(usize, usize)>> = HashMap::new();
        let mut todo = Vec::new();
        for (fi, f) in self.files.iter().enumerate() {
            for (fj, func) in f.functions.iter().enumerate() {
                if func.events.iter().any(|e| matches!(e, Event::Op(_))) {
                    todo.push((fi, fj));
                }
                for e in &func.events {
                    if let Event::Call(c) = e {
                        if let Some(t) = self.resolve(c, (fi, fj)) {
                            callers.entry(t).or_default().push((fi, fj));
                        }
                    }
                }
            }
        }
        while let Some(f) = todo.pop() {
            if !self.touches.insert(f) {
                continue;
            }
            if let Some(cs) = callers.get(&f) {
                todo.extend(cs.iter().copied().filter(|c| !self.touches.contains(c)));
            }
        }
    }

    /// The function a call reaches, when it can be told unambiguously.
    fn resolve(&self, call: &Call, from: (usize, usize)) -> Option<(usize, usize)> {
        let cands = self.by_name.get(call.name.as_str())?;
        let caller = self.func(from);
        let fits = |&&(fi, fj): &&(usize, usize)| {
            let f = self.func((fi, fj));
            if call.method {
                if !f.has_self {
                    return false;
                }
                if call.on_self {
                    return f.impl_type == caller.impl_type;
                }
                f.params.len() == call.args.len()
            } else {
                !f.has_self && f.params.len() == call.args.len()
            }
        };
        let matching: Vec<&(usize, usize)> = cands.iter().filter(fits).collect();
        match matching.as_slice() {
            [one] => Some(**one),
            [] => None,
            many => {
                // prefer a definition in the caller's own file
                let local: Vec<_> = many.iter().filter(|(fi, _)| *fi == from.0).collect();
                (local.len() == 1).then(|| **local[0])
            }
        }
    }

    /// Resolve consts, struct fields and key-building helpers in a template.
    fn resolve_key(&self, key: &KeyRef, depth: usize) -> KeyRef {
        if depth > 8 {
            return key.clone();
        }
        let single_hole = key.parts.len() == 1 && matches!(key.parts[0], Part::Hole(_));
        let mut out = KeyRef {
            parts: Vec::new(),
            ..key.clone()
        };
        if single_hole {
            if let Some(field) = &key.field {
                if let Some(Some(k)) = self.fields.get(field) {
                    let mut r = self.resolve_key(k, depth + 1);
                    r.add_names(key.names.iter().cloned());
                    r.field = key.field.clone();
                    return r;
                }
            }
            if let Some((name, arity)) = &key.call {
                if let Some(k) = self.returned_key(name, *arity) {
                    let mut r = self.resolve_key(&k, depth + 1);
                    r.add_names(key.names.iter().cloned());
                    return r;
                }
            }
        }
        for p in &key.parts {
            match p {
                Part::Const(name) => match self.consts.get(name) {
                    Some(Some(k)) => {
                        let r = self.resolve_key(k, depth + 1);
                        for rp in r.parts {
                            out.push(rp);
                        }
                    }
                    _ => out.push(Part::Hole(Some(name.clone()))),
                },
                other => out.push(other.clone()),
            }
        }
        out
    }

    fn returned_key(&self, name: &str, arity: usize) -> Option<KeyRef> {
        let cands = self.by_name.get(name)?;
        let mut found: Option<KeyRef> = None;
        for &c in cands {
            let f = self.func(c);
            if f.params.len() != arity {
                continue;
            }
            let k = f.returns_key.as_ref()?;
            if found.as_ref().is_some_and(|p| p.template() != k.template()) {
                return None;
            }
            found = Some(k.clone());
        }
        found
    }
}

/// Replace the callee's parameter holes with the caller's argument templates.
fn substitute(key: &KeyRef, callee: &Function, args: &[KeyRef]) -> KeyRef {
    let param_of = |name: &str| callee.params.iter().position(|p| p == name);
    if key.parts.len() == 1 {
        if let (Some((i, _)), Part::Hole(_)) = (&key.param, &key.parts[0]) {
            if let Some(arg) = args.get(*i) {
                let mut r = arg.clone();
                r.add_names(key.names.iter().cloned());
                return r;
            }
        }
    }
    let mut out = KeyRef {
        parts: Vec::new(),
        ..key.clone()
    };
    for p in &key.parts {
        match p {
            Part::Hole(Some(n)) => match param_of(n).and_then(|i| args.get(i)) {
                Some(arg) => {
                    for ap in &arg.parts {
                        out.push(ap.clone());
                    }
                    out.add_names(arg.names.iter().cloned());
                }
                None => out.push(p.clone()),
            },
            other => out.push(other.clone()),
        }
    }
    out
}

fn identity(key: &KeyRef, root: (usize, usize)) -> Option<KeyIdentity> {
    let func = FnId {
        file: root.0,
        func: root.1,
    };
    if key.has_literal() {
        return Some(KeyIdentity::Template(key.template()));
    }
    if let Some((ty, field)) = &key.field {
        return Some(KeyIdentity::Field {
            ty: ty.clone(),
            field: field.clone(),
        });
    }
    if let Some((index, _)) = &key.param {
        return Some(KeyIdentity::Param {
            func,
            index: *index,
        });
    }
    key.names.first().map(|name| KeyIdentity::Local {
        func,
        name: name.clone(),
    })
}

/// The lock an operation's key names across traces (see [`KeyIdentity::scoped`]).
pub fn scoped_identity(o: &TraceOp) -> Option<ScopedKey> {
    o.identity.as_ref()?.scoped(o.op.id.file)
}

struct Expander<'i, 'a> {
    idx: &'i Index<'a>,
    root: (usize, usize),
    ops: Vec<TraceOp<'a>>,
    /// Call node → reads its callee returns, so conditions on the call depend on them.
    call_reads: HashMap<NodeId, Vec<NodeId>>,
    stack: Vec<(usize, usize)>,
    /// Helper operations taken in so far.
    inlined: usize,
}

impl<'a> Expander<'_, 'a> {
    fn expand_deps(&self, deps: &[locklint_ir::Dep]) -> Vec<NodeId> {
        let mut out = Vec::new();
        for d in deps {
            match self.call_reads.get(&d.0) {
                Some(r) => out.extend(r.iter().copied()),
                None => out.push(d.0),
            }
        }
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn expand(
        &mut self,
        at: (usize, usize),
        args: Option<&[KeyRef]>,
        outer_result: Option<&ResultUse>,
        outer_deps: &[NodeId],
        via: &[(FileRef, Span)],
        root_event: Option<NodeId>,
    ) -> Vec<NodeId> {
        let func = self.idx.func(at);
        let file = self.idx.files[at.0].file.clone();
        let mut returned_reads = Vec::new();
        self.stack.push(at);
        for ev in &func.events {
            match ev {
                Event::Op(op) => {
                    let mut key = match args {
                        Some(a) => substitute(&op.key, func, a),
                        None => op.key.clone(),
                    };
                    key = self.idx.resolve_key(&key, 0);
                    let result = match (&op.result, outer_result) {
                        (ResultUse::Returned, Some(outer)) => outer.clone(),
                        (r, _) => r.clone(),
                    };
                    if op.kind == OpKind::Read && op.result == ResultUse::Returned {
                        returned_reads.push(op.id);
                    }
                    let mut deps = self.expand_deps(&op.deps);
                    deps.extend(outer_deps.iter().copied());
                    let id = identity(&key, self.root);
                    if args.is_some() {
                        self.inlined += 1;
                    }
                    self.ops.push(TraceOp {
                        op,
                        file: file.clone(),
                        func,
                        key,
                        identity: id,
                        is_lock: false,
                        result,
                        deps,
                        via: via.to_vec(),
                        at: root_event.unwrap_or(op.id),
                    });
                }
                Event::Call(call) => {
                    if self.stack.len() > MAX_INLINE_DEPTH || self.inlined >= MAX_INLINED_OPS {
                        continue;
                    }
                    let Some(target) = self.idx.resolve(call, at) else {
                        continue;
                    };
                    if !self.idx.touches.contains(&target) || self.stack.contains(&target) {
                        continue;
                    }
                    let call_args: Vec<KeyRef> = call
                        .args
                        .iter()
                        .map(|a| match args {
                            Some(outer) => substitute(a, func, outer),
                            None => a.clone(),
                        })
                        .collect();
                    let result = match (&call.result, outer_result) {
                        (ResultUse::Returned, Some(outer)) => outer.clone(),
                        (r, _) => r.clone(),
                    };
                    let mut deps = self.expand_deps(&call.deps);
                    deps.extend(outer_deps.iter().copied());
                    let mut v = via.to_vec();
                    v.push((file.clone(), call.span));
                    let reads = self.expand(
                        target,
                        Some(&call_args),
                        Some(&result),
                        &deps,
                        &v,
                        Some(root_event.unwrap_or(call.id)),
                    );
                    if call.result == ResultUse::Returned {
                        returned_reads.extend(reads.iter().copied());
                    }
                    self.call_reads.insert(call.id, reads);
                }
                Event::Sql { .. } => {}
            }
        }
        self.stack.pop();
        returned_reads
    }
}

/// What the project facts take from the configuration (`config::Settings::project` makes it).
#[derive(Debug, Clone, Default)]
pub struct ProjectSettings {
    /// Extra words or patterns that mark a lock key.
    pub lock_key_patterns: Vec<String>,
    /// Names of fencing-token columns besides the defaults.
    pub fence_columns: Vec<String>,
    /// Lock-table columns naming the holder, besides the defaults.
    pub owner_columns: Vec<String>,
    /// Lock-table columns holding the expiry, besides the defaults.
    pub expiry_columns: Vec<String>,
    /// Key templates configured as locks for efficiency.
    pub efficiency_locks: Vec<String>,
    pub fix: FixSettings,
}

/// Build traces for every function that touches Redis and decide which keys are locks.
pub fn analyze(files: &[FileIr]) -> Project<'_> {
    analyze_with(files, &ProjectSettings::default())
}

/// [`analyze`] with configured settings: extra lock words, column names, efficiency locks.
pub fn analyze_with<'a>(files: &'a [FileIr], settings: &ProjectSettings) -> Project<'a> {
    let lock_words = &settings.lock_key_patterns;
    let idx = Index::new(files);
    let mut traces = Vec::new();
    let mut roots: Vec<(usize, usize)> = idx.touches.iter().copied().collect();
    roots.sort();
    for root in roots {
        let mut ex = Expander {
            idx: &idx,
            root,
            ops: Vec::new(),
            call_reads: HashMap::new(),
            stack: Vec::new(),
            inlined: 0,
        };
        ex.expand(root, None, None, &[], &[], None);
        traces.push(Trace::new(
            idx.func(root),
            files[root.0].file.clone(),
            ex.ops,
        ));
    }
    let mut acquired_nx = HashSet::new();
    mark_locks(&mut traces, &mut acquired_nx, lock_words);
    let mut facts = collect_facts(&traces);
    facts.acquired_nx = acquired_nx;
    facts.fix = settings.fix;
    Project {
        files,
        traces,
        facts,
        schema: crate::schema::schema_with(
            files,
            crate::schema::ColumnNames::with(
                &settings.fence_columns,
                &settings.owner_columns,
                &settings.expiry_columns,
            ),
        ),
        efficiency_locks: settings.efficiency_locks.clone(),
    }
}

/// Whether an operation ends or extends a hold: release, expiry, renewal, script.
fn ends_hold(k: &OpKind) -> bool {
    matches!(
        k,
        OpKind::Delete | OpKind::CompareDelete | OpKind::Expire | OpKind::Script
    ) || k.is_renewing_write()
}

fn mark_locks(traces: &mut [Trace], nx: &mut HashSet<ScopedKey>, lock_words: &[String]) {
    // (b): acquired with NX and also released, expired or renewed somewhere
    let mut acquired = HashSet::new();
    let mut ended = HashSet::new();
    for t in traces.iter() {
        for o in &t.ops {
            let Some(id) = scoped_identity(o) else {
                continue;
            };
            if o.op.kind.is_acquire() {
                acquired.insert(id);
            } else if ends_hold(&o.op.kind) {
                ended.insert(id);
            }
        }
    }
    for t in traces.iter_mut() {
        let local_acquired: HashSet<KeyIdentity> = t
            .ops
            .iter()
            .filter(|o| o.op.kind.is_acquire())
            .filter_map(|o| o.identity.clone())
            .collect();
        let local_ended: HashSet<KeyIdentity> = t
            .ops
            .iter()
            .filter(|o| ends_hold(&o.op.kind))
            .filter_map(|o| o.identity.clone())
            .collect();
        for o in &mut t.ops {
            let pattern = key_matches(&o.key, lock_words);
            let scoped = scoped_identity(o);
            let used_as_lock = scoped
                .as_ref()
                .is_some_and(|id| acquired.contains(id) && ended.contains(id))
                || o.identity
                    .as_ref()
                    .is_some_and(|id| local_acquired.contains(id) && local_ended.contains(id));
            // the key is exactly the function's parameter or a field of `self`
            let whole = o.op.key.parts.len() == 1 && matches!(o.op.key.parts[0], Part::Hole(_));
            let lock_fn = vocabulary::is_lock_fn_name(&o.func.name)
                && whole
                && (o.op.key.param.is_some() || o.op.key.field.is_some());
            o.is_lock = pattern || used_as_lock || lock_fn;
            if o.op.kind.is_acquire() {
                if let Some(id) = scoped {
                    nx.insert(id);
                }
            }
        }
    }
}

fn collect_facts(traces: &[Trace]) -> Facts {
    let mut facts = Facts::default();
    let bare_nx = |o: &TraceOp| {
        matches!(
            o.op.kind,
            OpKind::Write {
                nx: true,
                expiry: None,
                ..
            }
        )
    };
    for t in traces {
        // per key: whether an acquire without expiry came before, and those not yet known
        // to be followed by an expiry
        let mut seen: HashMap<&KeyIdentity, (bool, Vec<NodeId>)> = HashMap::new();
        for o in &t.ops {
            let Some(id) = o.identity.as_ref() else {
                continue;
            };
            if bare_nx(o) {
                let e = seen.entry(id).or_default();
                e.0 = true;
                e.1.push(o.op.id);
            } else if o.op.kind == OpKind::Expire {
                if let Some((true, pending)) = seen.get_mut(id) {
                    facts.expiries_after_acquire.insert(o.op.id);
                    facts.acquires_expired_later.extend(pending.drain(..));
                }
            }
        }
    }
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_words() {
        assert!(key_matches(&KeyRef::lit("lock:invoice:{}"), &[]));
        assert!(key_matches(&KeyRef::lit("app:jobLock"), &[]));
        assert!(key_matches(&KeyRef::lit("redlock:x"), &[]));
        assert!(key_matches(&KeyRef::lit("leader-election"), &[]));
        assert!(!key_matches(&KeyRef::lit("block:42"), &[]));
        assert!(!key_matches(&KeyRef::lit("clock_skew"), &[]));
        assert!(!key_matches(&KeyRef::lit("leaderboard:weekly"), &[]));
        assert!(!key_matches(&KeyRef::lit("release-notes"), &[]));
        assert!(!key_matches(&KeyRef::lit("user:{}:profile"), &[]));
    }

    #[test]
    fn declared_templates_match_keys() {
        assert!(template_matches("lock:report:{id}", "lock:report:7"));
        assert!(template_matches("lock:report:{id}", "lock:report:{}"));
        assert!(template_matches("lock:{}:x:{}", "lock:a:x:b"));
        assert!(!template_matches("lock:report:{id}", "lock:invoice:7"));
        assert!(template_matches("lock:exact", "lock:exact"));
        assert!(!template_matches("lock:exact", "lock:exact2"));
    }
}
