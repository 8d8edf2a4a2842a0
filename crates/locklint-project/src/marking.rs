//! Which keys are locks (lock words, an NX acquire that is also released or expired, the
//! key parameter of a lock function) and the facts rules consult across traces.

use crate::{scoped_identity, FixSettings, Trace, TraceOp};
use locklint_ir::vocabulary;
use locklint_ir::{KeyIdentity, KeyRef, NodeId, OpKind, Part, ScopedKey};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// (a) with extra lock words from the configuration (`lock-key-patterns`).
pub fn key_matches(key: &KeyRef, extra: &[String]) -> bool {
    vocabulary::key_names_lock(key, extra)
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

/// What rules consult across traces about lock keys: acquires followed by a separate expiry,
/// keys acquired with NX somewhere.
#[derive(Debug, Default)]
pub struct LockFacts {
    /// What fixes may assume: the target Redis version and the TTL for locks without one.
    pub fix: FixSettings,
    /// Acquires without an expiry that are followed by a separate expiry in some trace.
    pub acquires_expired_later: HashSet<NodeId>,
    /// Expiry commands that follow an acquire without expiry in some trace.
    pub expiries_after_acquire: HashSet<NodeId>,
    /// Keys (see [`scoped_identity`]) acquired with NX somewhere.
    pub acquired_nx: HashSet<ScopedKey>,
}

/// Whether an operation ends or extends a hold: release, expiry, renewal, script.
pub(crate) fn ends_hold(k: &OpKind) -> bool {
    matches!(
        k,
        OpKind::Delete | OpKind::CompareDelete | OpKind::Expire | OpKind::Script
    ) || k.is_renewing_write()
}

pub(crate) fn mark_locks(traces: &mut [Trace], nx: &mut HashSet<ScopedKey>, lock_words: &[String]) {
    // (b): acquired with NX and also released, expired or renewed somewhere
    // a key that is counted (`INCR`, `INCRBY`) is a counter, even when it is created with NX
    // and deleted after a window (`SET k 0 NX PX w`, `INCRBY k 1`, .., `DEL k`)
    let mut acquired = HashSet::new();
    let mut ended = HashSet::new();
    let mut counted = HashSet::new();
    for t in traces.iter() {
        for o in &t.ops {
            let Some(id) = scoped_identity(o) else {
                continue;
            };
            if o.op.kind.is_acquire() {
                acquired.insert(id);
            } else if ends_hold(&o.op.kind) {
                ended.insert(id);
            } else if o.op.kind == OpKind::Incr {
                counted.insert(id);
            }
        }
    }
    for t in traces.iter_mut() {
        let local_acquired: HashSet<Arc<KeyIdentity>> = t
            .ops
            .iter()
            .filter(|o| o.op.kind.is_acquire())
            .filter_map(|o| o.identity.clone())
            .collect();
        let local_ended: HashSet<Arc<KeyIdentity>> = t
            .ops
            .iter()
            .filter(|o| ends_hold(&o.op.kind))
            .filter_map(|o| o.identity.clone())
            .collect();
        let local_counted: HashSet<Arc<KeyIdentity>> = t
            .ops
            .iter()
            .filter(|o| o.op.kind == OpKind::Incr)
            .filter_map(|o| o.identity.clone())
            .collect();
        for o in &mut t.ops {
            let pattern = key_matches(&o.key, lock_words);
            let scoped = scoped_identity(o);
            // an NX write that is also deleted or expired, unless the key says it is
            // bookkeeping (a cache entry, a rate limit, a marker)
            let file = o.op.id.file;
            let used_as_lock = |key: &KeyRef, identity: Option<&KeyIdentity>| {
                let scoped = identity.and_then(|id| id.scoped(file));
                let counter = scoped.as_ref().is_some_and(|id| counted.contains(id))
                    || identity.is_some_and(|id| local_counted.contains(id));
                !vocabulary::key_names_bookkeeping(key)
                    && !counter
                    && (scoped
                        .as_ref()
                        .is_some_and(|id| acquired.contains(id) && ended.contains(id))
                        || identity.is_some_and(|id| {
                            local_acquired.contains(id) && local_ended.contains(id)
                        }))
            };
            let keys: Vec<bool> = o
                .keys
                .iter()
                .map(|k| {
                    key_matches(&k.key, lock_words) || used_as_lock(&k.key, k.identity.as_deref())
                })
                .collect();
            for (k, is_lock) in o.keys.iter_mut().zip(keys) {
                k.is_lock = is_lock;
            }
            let used_as_lock = used_as_lock(&o.key, o.identity.as_deref());
            // the key is exactly the function's parameter or a field of `self`
            let whole = o.op.key.parts.len() == 1 && matches!(o.op.key.parts[0], Part::Hole(_));
            let lock_fn = vocabulary::is_lock_fn_name(&o.func.name)
                && whole
                && (o.op.key.param.is_some() || o.op.key.field.is_some())
                && !vocabulary::key_names_bookkeeping(&o.key);
            // a lock-named wrapper's key, deleted or set by the helpers it dispatches to
            let wrapper_key = o.lock_param && !vocabulary::key_names_bookkeeping(&o.key);
            o.is_lock = pattern || used_as_lock || lock_fn || wrapper_key;
            o.lock_param = wrapper_key && !(pattern || used_as_lock || lock_fn);
            if o.op.kind.is_acquire() {
                if let Some(id) = scoped {
                    nx.insert(id);
                }
            }
        }
    }
}

pub(crate) fn collect_facts(traces: &[Trace]) -> LockFacts {
    let mut facts = LockFacts::default();
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
            let Some(id) = o.identity.as_deref() else {
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
