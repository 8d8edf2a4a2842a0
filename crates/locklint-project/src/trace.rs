//! Traces: the operations reachable from one function after helper expansion, each with
//! its resolved key and the identity that tells whether two operations touch the same key.

use crate::ttl;
use locklint_ir::source::{FileRef, Span};
use locklint_ir::{FnId, Function, KeyIdentity, KeyRef, NodeId, Op, ResultUse, ScopedKey, Value};
use std::collections::HashMap;

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
    /// The value written as the trace sees it: the operation's own, or the caller's argument
    /// where a helper writes its parameter (`pool.set_if_absent(&key, "LOCKED", ..)`), with
    /// the file it is written in.
    pub value: Option<(Value, FileRef, Span)>,
    /// Every key of a multi-key command or script invocation (see [`Op::keys`]), resolved
    /// like [`TraceOp::key`].
    pub keys: Vec<TraceKey>,
}

/// One key of a multi-key command, as the trace sees it.
#[derive(Debug, Clone)]
pub struct TraceKey {
    pub key: KeyRef,
    /// Where the key is written (in the file of the operation).
    pub span: Span,
    pub identity: Option<KeyIdentity>,
    /// Whether the key is a lock, by the criteria of [`TraceOp::is_lock`].
    pub is_lock: bool,
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
    pub(crate) by_key: HashMap<KeyIdentity, Vec<usize>>,
    /// Indexes into `ops` per operation node, in order (a helper's operation appears once
    /// per call).
    pub(crate) by_node: HashMap<NodeId, Vec<usize>>,
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
    pub(crate) fn on_key(&self, index: usize) -> &[usize] {
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

pub(crate) fn identity(key: &KeyRef, func: FnId) -> Option<KeyIdentity> {
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
