//! Lock helpers expanded at their call sites: a root function's trace takes in the
//! operations of the helpers it calls, with the helpers' parameters replaced by the caller's
//! arguments.

use locklint_ir::source::{FileRef, Span};
use locklint_ir::vocabulary;
use locklint_ir::{
    Call, Event, FnId, Function, KeyIdentity, KeyRef, NodeId, OpKind, Part, ResultUse, Value,
};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::trace::{identity, TraceKey};
use crate::{Index, TraceOp};

/// How deep lock helpers are expanded into their callers.
pub(crate) const MAX_INLINE_DEPTH: usize = 4;

/// How many operations of helpers one function's trace takes in: helpers that call helpers
/// many times each would otherwise multiply (later calls are not expanded).
pub(crate) const MAX_INLINED_OPS: usize = 50_000;

/// Replace the callee's parameter holes with the caller's argument templates.
pub(crate) fn substitute(key: &KeyRef, callee: &Function, args: &[KeyRef]) -> KeyRef {
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

/// A value written as a trace sees it, with the file it is written in.
pub(crate) type SeenValue = Option<(Value, FileRef, Span)>;

/// A call's arguments as values, seen from the root: an argument that is the calling helper's
/// own parameter is what the helper's caller passed for it.
fn call_values(
    call: &Call,
    func: &Function,
    file: &FileRef,
    outer: Option<&[SeenValue]>,
) -> Vec<SeenValue> {
    call.args
        .iter()
        .zip(&call.values)
        .map(|(k, (v, span))| {
            let param = (k.parts.len() == 1 && *v == Value::Dynamic)
                .then_some(k.param.as_ref())
                .flatten()
                .filter(|(i, name)| func.params.get(*i) == Some(name));
            match (param, outer) {
                (Some((i, _)), Some(outer)) => outer.get(*i).cloned().flatten(),
                _ => Some((v.clone(), file.clone(), *span)),
            }
        })
        .collect()
}

/// What the chain knows of a parameter of the function being expanded, from the argument its
/// caller passed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Passed {
    /// It is a lock's key as the chain sees it: a key parameter of a lock-named function
    /// passed on as it is (through references and conversions), or, in a lock-named function,
    /// one of its parameters or what a helper call builds from them.
    lock: bool,
    /// Where the value was made, when it was passed on as it is from there.
    made: Option<KeyMade>,
}

/// Where a key passed on as it is down a chain of calls was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyMade {
    /// By the argument of this call of the chain (an index into [`crate::TraceOp::via`]).
    At(usize),
    /// Above the root: it is the root's own parameter, and the root has callers in the
    /// project, whose traces see the key they pass.
    ByCallers,
}

/// Per argument of `call` (the chain's call site `at`; `root_called`: the call is the root's
/// and the root has callers), what the callee's parameter knows.
fn passed_args(
    call: &Call,
    named_lock: bool,
    params: &[Passed],
    at: usize,
    root_called: bool,
) -> Vec<Passed> {
    call.arg_params
        .iter()
        .map(|a| {
            let outer = a.direct.and_then(|i| params.get(i).copied());
            let made = match (outer.and_then(|p| p.made), a.direct) {
                (Some(made), _) => made,
                (None, Some(_)) if root_called => KeyMade::ByCallers,
                (None, _) => KeyMade::At(at),
            };
            Passed {
                lock: a
                    .direct
                    .is_some_and(|_| named_lock || outer.is_some_and(|p| p.lock))
                    || (named_lock && !a.built_from.is_empty()),
                made: Some(made),
            }
        })
        .collect()
}

/// One copy of each key and key identity the project's traces hold, shared by every operation
/// that resolves to it: a helper expanded at thousands of call sites with the same key keeps
/// one key, not thousands.
#[derive(Default)]
pub(crate) struct Shared {
    keys: HashSet<Arc<KeyRef>>,
    identities: HashSet<Arc<KeyIdentity>>,
}

impl Shared {
    fn key(&mut self, key: KeyRef) -> Arc<KeyRef> {
        if let Some(k) = self.keys.get(&key) {
            return k.clone();
        }
        let k = Arc::new(key);
        self.keys.insert(k.clone());
        k
    }

    fn identity(&mut self, id: Option<KeyIdentity>) -> Option<Arc<KeyIdentity>> {
        let id = id?;
        if let Some(i) = self.identities.get(&id) {
            return Some(i.clone());
        }
        let i = Arc::new(id);
        self.identities.insert(i.clone());
        Some(i)
    }
}

pub(crate) struct Expander<'i, 'a> {
    pub(crate) idx: &'i Index<'a>,
    pub(crate) root: FnId,
    pub(crate) ops: Vec<TraceOp<'a>>,
    /// Call node → reads its callee returns, so conditions on the call depend on them.
    pub(crate) call_reads: HashMap<NodeId, Vec<NodeId>>,
    pub(crate) stack: Vec<FnId>,
    /// Helper operations taken in so far.
    pub(crate) inlined: usize,
    pub(crate) shared: &'i mut Shared,
}

impl<'a> Expander<'_, 'a> {
    pub(crate) fn expand_deps(&self, deps: &[locklint_ir::Dep]) -> Vec<NodeId> {
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
    pub(crate) fn expand(
        &mut self,
        at: FnId,
        args: Option<&[KeyRef]>,
        values: Option<&[SeenValue]>,
        outer_result: Option<&ResultUse>,
        outer_deps: &[NodeId],
        via: &[(FileRef, Span)],
        root_event: Option<NodeId>,
        params: &[Passed],
    ) -> Vec<NodeId> {
        let func = self.idx.func(at);
        let file = self.idx.files[at.file].file.clone();
        let mut returned_reads = Vec::new();
        self.stack.push(at);
        for ev in &func.events {
            match ev {
                // a wrapper's method named like a command is followed as a call where the
                // project defines it
                Event::Op(op) if op.described && self.idx.defines(&op.command) => {}
                Event::Op(op) => {
                    let seen_key = |k: &KeyRef| {
                        let k = match args {
                            Some(a) => substitute(k, func, a),
                            None => k.clone(),
                        };
                        self.idx.resolve_key(&k, 0)
                    };
                    let key = seen_key(&op.key);
                    let keys = op
                        .keys
                        .iter()
                        .map(|(k, span)| {
                            let key = seen_key(k);
                            TraceKey {
                                identity: self.shared.identity(identity(&key, self.root)),
                                key: self.shared.key(key),
                                span: *span,
                                is_lock: false,
                            }
                        })
                        .collect();
                    let result = match (&op.result, outer_result) {
                        (ResultUse::Returned, Some(outer)) => outer.clone(),
                        (r, _) => r.clone(),
                    };
                    if op.kind == OpKind::Read && op.result == ResultUse::Returned {
                        returned_reads.push(op.id);
                    }
                    let mut deps = self.expand_deps(&op.deps);
                    deps.extend(outer_deps.iter().copied());
                    let id = self.shared.identity(identity(&key, self.root));
                    let key = self.shared.key(key);
                    let value = match (op.value_param, values) {
                        (Some(i), Some(vals)) => vals.get(i).cloned().flatten(),
                        _ => None,
                    }
                    .or_else(|| {
                        op.value
                            .as_ref()
                            .map(|(v, s)| (v.clone(), file.clone(), *s))
                    });
                    if args.is_some() {
                        self.inlined += 1;
                    }
                    let whole_param = (op.key.parts.len() == 1
                        && matches!(op.key.parts[0], Part::Hole(_)))
                    .then(|| op.key.param.as_ref().and_then(|(i, _)| params.get(*i)))
                    .flatten();
                    let lock_param = whole_param.is_some_and(|p| p.lock);
                    let key_made = whole_param.and_then(|p| p.made);
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
                        value,
                        keys,
                        lock_param,
                        key_made,
                    });
                }
                Event::Call(call) => {
                    if self.stack.len() > MAX_INLINE_DEPTH || self.inlined >= MAX_INLINED_OPS {
                        continue;
                    }
                    let Some(target) = self.idx.target(call) else {
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
                    let seen = call_values(call, func, &file, values);
                    // a root that others call is seen through its callers
                    let root_called = self.stack.len() == 1 && self.idx.callers.contains_key(&at);
                    let named_lock = vocabulary::is_lock_fn_name(&func.name) && !root_called;
                    let passed = passed_args(call, named_lock, params, v.len() - 1, root_called);
                    let reads = self.expand(
                        target,
                        Some(&call_args),
                        Some(&seen),
                        Some(&result),
                        &deps,
                        &v,
                        Some(root_event.unwrap_or(call.id)),
                        &passed,
                    );
                    if call.result == ResultUse::Returned {
                        returned_reads.extend(reads.iter().copied());
                    }
                    self.call_reads.insert(call.id, reads);
                }
                Event::Sql { .. } | Event::ConnEnd(_) => {}
            }
        }
        self.stack.pop();
        returned_reads
    }
}
