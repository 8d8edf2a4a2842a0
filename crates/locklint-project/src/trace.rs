//! Traces: the operations reachable from one function after helper expansion, each with
//! its resolved key and the identity that tells whether two operations touch the same key.

use crate::ttl;
use locklint_ir::source::{FileRef, Span};
use locklint_ir::{FnId, Function, KeyIdentity, KeyRef, NodeId, Op, ResultUse, ScopedKey, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// One operation as seen from a root function, after helper expansion.
#[derive(Debug, Clone)]
pub struct TraceOp<'a> {
    pub op: &'a Op,
    /// File the operation is written in.
    pub file: FileRef,
    /// The function the operation is written in.
    pub func: &'a Function,
    /// Key resolved with the caller's arguments and project-wide consts (shared by the
    /// operations of a trace that resolve to the same key).
    pub key: Arc<KeyRef>,
    /// Identity used to tell whether two operations touch the same key (shared likewise).
    pub identity: Option<Arc<KeyIdentity>>,
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
    /// The key is a lock only as what a lock-named function further up the chain was given as
    /// its key or built from its parameters with a helper call (`remove_lock(prefix, key)`
    /// deleting `build_key(prefix, key)` through a dispatch to the backend's helpers): the
    /// operation is a generic helper's, and the lock is the caller's.
    pub lock_param: bool,
    /// The operation's key is its function's parameter, passed on as it is from where it was
    /// made (`remove_file(conn, &self.lock_file)` calling a generic `del(conn, key)`).
    pub key_made: Option<crate::KeyMade>,
}

/// One key of a multi-key command, as the trace sees it.
#[derive(Debug, Clone)]
pub struct TraceKey {
    pub key: Arc<KeyRef>,
    /// Where the key is written (in the file of the operation).
    pub span: Span,
    pub identity: Option<Arc<KeyIdentity>>,
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
    /// The operations on each key identity, in order.
    by_key: Groups,
    /// The operations of each operation node, in order (a helper's operation appears once per
    /// call).
    by_node: Groups,
    /// Each operation node's group in `by_node`.
    nodes: HashMap<NodeId, u32>,
}

/// Indexes into a trace's operations, grouped: each operation's group, and each group's
/// members in order (no copy of what they are grouped by is kept).
#[derive(Debug, Default)]
struct Groups {
    /// Per operation, its group (`u32::MAX`: none).
    of: Vec<u32>,
    /// Per group, the operations in it.
    members: Vec<Vec<usize>>,
}

impl Groups {
    /// The operations grouped by their keys (none for `None`), and each key's group.
    fn new<K: std::hash::Hash + Eq>(
        keys: impl Iterator<Item = Option<K>>,
    ) -> (Groups, HashMap<K, u32>) {
        let mut ids: HashMap<K, u32> = HashMap::new();
        let mut g = Groups::default();
        for (i, k) in keys.enumerate() {
            let group = k.map(|k| {
                let next = g.members.len() as u32;
                let id = *ids.entry(k).or_insert(next);
                if id == next {
                    g.members.push(Vec::new());
                }
                g.members[id as usize].push(i);
                id
            });
            g.of.push(group.unwrap_or(u32::MAX));
        }
        (g, ids)
    }

    /// The members of operation `index`'s group.
    fn of(&self, index: usize) -> &[usize] {
        self.of
            .get(index)
            .and_then(|&g| self.members.get(g as usize))
            .map_or(&[], Vec::as_slice)
    }
}

impl<'a> Trace<'a> {
    pub fn new(root: &'a Function, file: FileRef, ops: Vec<TraceOp<'a>>) -> Self {
        let (by_key, _) = Groups::new(ops.iter().map(|o| o.identity.as_ref()));
        let (by_node, nodes) = Groups::new(ops.iter().map(|o| Some(o.op.id)));
        Trace {
            root,
            file,
            ops,
            by_key,
            by_node,
            nodes,
        }
    }

    pub fn same_key(&self, a: &TraceOp, b: &TraceOp) -> bool {
        a.identity.is_some() && a.identity == b.identity
    }

    /// Indexes of the operations on the same key as `ops[index]` (itself included).
    pub(crate) fn on_key(&self, index: usize) -> &[usize] {
        self.by_key.of(index)
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
        self.nodes
            .get(&node)
            .and_then(|&g| self.by_node.members.get(g as usize))
            .map_or(&[], Vec::as_slice)
    }
}

pub(crate) fn identity(key: &KeyRef, func: FnId) -> Option<KeyIdentity> {
    if key.has_literal() {
        return Some(KeyIdentity::Template(key.template()));
    }
    if let Some((ty, field)) = key.field.as_deref() {
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
