//! `cross-slot-lock-keys`: a multi-key command or script invocation on lock keys that hash to
//! different Redis Cluster slots (`CROSSSLOT`), and a lock script that touches keys it was not
//! given in `KEYS` (a literal key, a key built from `ARGV`, a key derived from a `KEYS`
//! element without a hash tag).

use super::hash_slots::{different_slots, has_hash_tag};
use super::lua_matching::invoked_on_lock_key;
use super::matching::{call_chain, diagnostic, with_related};
use super::{Fixes, Rule, RuleInfo};
use crate::Findings;
use locklint_ir::diagnostic::{Diagnostic, Location, Related, Severity};
use locklint_ir::lua::{KeyShape, KeyUse, Script};
use locklint_ir::source::Span;
use locklint_ir::{vocabulary, Channel, FileIr, KeyRef, OpKind};
use locklint_project::{LockFacts, Project, Trace, TraceKey, TraceOp};

pub struct CrossSlotLockKeys;

static INFO: RuleInfo = RuleInfo {
    name: "cross-slot-lock-keys",
    summary:
        "a Lua script or multi-key command on lock keys that hash to different Redis Cluster slots",
    severity: Severity::Warning,
    fixable: false,
    doc: include_str!("../../../rules/cross-slot-lock-keys.md"),
};

const HELP: &str = "give the keys one hash tag so they share a slot (`lock:{order}:42` and `fence:{order}:42`), and pass every key a script touches in `KEYS`";

impl Rule for CrossSlotLockKeys {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check(&self, trace: &Trace, _facts: &LockFacts, _fixes: Fixes<'_>, out: &mut Findings<'_>) {
        for o in &trace.ops {
            if o.keys.len() < 2 {
                continue;
            }
            if let Some((a, b)) = cross_slot_pair(&o.keys) {
                out.push(multi_key_finding(o, a, b));
            }
        }
        for ops in transactions(trace) {
            if let Some(d) = transaction_finding(&ops) {
                out.push(d);
            }
        }
    }

    fn check_file(&self, file: &FileIr, project: &Project, out: &mut Vec<Diagnostic>) {
        for script in &file.lua.scripts {
            let mut lock_script: Option<bool> = None;
            for (k, span) in &script.keys {
                let mut call_site = None;
                let finding = match &k.shape {
                    KeyShape::Literal(key) | KeyShape::Built(key) => {
                        let names_lock = vocabulary::key_names_lock(key, &[])
                            || vocabulary::key_names_fence(key);
                        if !names_lock
                            && !*lock_script
                                .get_or_insert_with(|| is_lock_script(script, file, project))
                        {
                            continue;
                        }
                        undeclared(k)
                    }
                    KeyShape::Derived { from: Some(i), .. } => {
                        match untagged_declared(script, file, project, *i) {
                            Some((shown, at)) => {
                                call_site = Some(Related {
                                    location: at,
                                    label: format!("`KEYS[{i}]` is `{shown}` here"),
                                });
                                derived(k, *i, &shown)
                            }
                            None => continue,
                        }
                    }
                    _ => continue,
                };
                let d = diagnostic(
                    &INFO,
                    (file.file.clone(), *span),
                    "a key not given in `KEYS`",
                    finding,
                    HELP.to_string(),
                );
                out.push(with_related(d, call_site));
            }
        }
    }
}

/// Two keys of a command that are locks or their fencing counters (at least one a lock) and
/// hash to different slots.
fn cross_slot_pair(keys: &[TraceKey]) -> Option<(&TraceKey, &TraceKey)> {
    let relevant: Vec<&TraceKey> = keys
        .iter()
        .filter(|k| {
            !vocabulary::key_names_bookkeeping(&k.key)
                && (k.is_lock || vocabulary::key_names_fence(&k.key))
        })
        .collect();
    if !relevant.iter().any(|k| k.is_lock) {
        return None;
    }
    for (i, a) in relevant.iter().enumerate() {
        for b in &relevant[i + 1..] {
            if (a.is_lock || b.is_lock) && different_slots(&a.key, &b.key) {
                return Some((a, b));
            }
        }
    }
    None
}

/// The operations of each `MULTI`/`EXEC` transaction (an atomic pipeline) of the trace, per
/// expansion of the function that builds it.
fn transactions<'t, 'a>(trace: &'t Trace<'a>) -> Vec<Vec<&'t TraceOp<'a>>> {
    type Group = (usize, usize, usize, Vec<Span>);
    let mut groups: Vec<(Group, Vec<&TraceOp>)> = Vec::new();
    for o in &trace.ops {
        let Channel::Pipeline { id, atomic: true } = o.op.channel else {
            continue;
        };
        let via = o.via.iter().map(|(_, s)| *s).collect();
        let key = (o.op.id.file, o.op.id.func, id, via);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, ops)) => ops.push(o),
            None => groups.push((key, vec![o])),
        }
    }
    groups.into_iter().map(|(_, ops)| ops).collect()
}

/// A transaction whose commands name a lock key and another lock or fence key of another slot.
fn transaction_finding(ops: &[&TraceOp]) -> Option<Diagnostic> {
    let keys: Vec<(usize, TraceKey)> = ops
        .iter()
        .enumerate()
        .flat_map(|(i, o)| {
            let own = TraceKey {
                key: o.key.clone(),
                span: o.op.key_span,
                identity: o.identity.clone(),
                is_lock: o.is_lock,
            };
            let listed = o.keys.iter().skip(1).cloned();
            std::iter::once(own).chain(listed).map(move |k| (i, k))
        })
        .collect();
    for (n, (i, a)) in keys.iter().enumerate() {
        for (j, b) in &keys[n + 1..] {
            // two keys of one command are that command's finding
            if i == j {
                continue;
            }
            if let Some((a, b)) = cross_slot_pair(&[a.clone(), b.clone()]) {
                let o = ops[*j];
                let message = format!(
                    "this transaction (`MULTI`/`EXEC`) takes the keys `{}` and `{}`, which have no common hash tag: on a Redis Cluster they hash to different slots, `EXEC` is refused with `CROSSSLOT Keys in request don't hash to the same slot` and nothing of the transaction runs",
                    shown(&a.key),
                    shown(&b.key)
                );
                let d = diagnostic(
                    &INFO,
                    (o.file.clone(), o.op.span),
                    "a key in another slot than the transaction's first lock key",
                    message,
                    HELP.to_string(),
                );
                let first = Related {
                    location: Location::new(ops[*i].file.clone(), a.span),
                    label: format!("`{}`", shown(&a.key)),
                };
                return Some(with_related(d, std::iter::once(first).chain(call_chain(o))));
            }
        }
    }
    None
}

fn shown(key: &KeyRef) -> String {
    let d = key.display();
    if d.is_empty() {
        "(unknown key)".to_string()
    } else {
        d
    }
}

fn multi_key_finding(o: &TraceOp, a: &TraceKey, b: &TraceKey) -> Diagnostic {
    let (what, fails) = if o.op.kind == OpKind::Script {
        (
            "this script is invoked with the keys".to_string(),
            "the script is refused with `CROSSSLOT Keys in request don't hash to the same slot`",
        )
    } else {
        (
            format!("`{}` takes the keys", o.op.command.to_ascii_uppercase()),
            "the server refuses the command with `CROSSSLOT Keys in request don't hash to the same slot` (a cluster client that splits it by slot runs it as separate commands, no longer one atomic step)",
        )
    };
    let message = format!(
        "{what} `{}` and `{}`, which have no common hash tag: on a Redis Cluster they hash to different slots and {fails}",
        shown(&a.key),
        shown(&b.key)
    );
    let d = diagnostic(
        &INFO,
        (o.file.clone(), o.op.span),
        "keys in different slots",
        message,
        HELP.to_string(),
    );
    let keys = [a, b].into_iter().map(|k| Related {
        location: Location::new(o.file.clone(), k.span),
        label: format!("`{}`", shown(&k.key)),
    });
    with_related(d, keys.chain(call_chain(o)))
}

fn undeclared(k: &KeyUse) -> String {
    format!(
        "this script touches `{}` (with `{}`), a key it is not given in `KEYS`: a Redis Cluster runs the script where its `KEYS` live, so where another node serves this key the call fails (`Script attempted to access a non local key in a cluster node`) after the script's earlier writes ran, and where the same node serves it the script spans two slots the cluster may move apart",
        k.text, k.command
    )
}

fn derived(k: &KeyUse, i: usize, declared: &str) -> String {
    format!(
        "this script touches `{}` (with `{}`), a key derived from `KEYS[{i}]` and not given in `KEYS`; `KEYS[{i}]` is `{declared}` at its call, which has no hash tag, so on a Redis Cluster the derived key hashes to another slot: where another node serves it the call fails (`Script attempted to access a non local key in a cluster node`) after the script's earlier writes ran",
        k.text, k.command
    )
}

/// A lock script: named for a lock, guarding a release or renewal with an ownership check, or
/// invoked on a lock key.
fn is_lock_script(script: &Script, file: &FileIr, project: &Project) -> bool {
    script.lock_named
        || script.writes.iter().any(|(w, _)| w.guarded)
        || invoked_on_lock_key(script, file, project)
}

/// `KEYS[i]` as a call site of the script passes it, and where, when a call site shows it
/// without a hash tag and none shows it with one.
fn untagged_declared(
    script: &Script,
    file: &FileIr,
    project: &Project,
    i: usize,
) -> Option<(String, Location)> {
    let func = file
        .embedded
        .get(script.embedded)
        .and_then(|e| e.func)
        .and_then(|f| file.functions.get(f));
    let mut untagged = None;
    for t in &project.traces {
        for o in &t.ops {
            if o.op.kind != OpKind::Script || o.keys.is_empty() {
                continue;
            }
            let same_file = o.file.path == file.file.path;
            let here = same_file && func.is_some_and(|f| std::ptr::eq(o.func, f));
            let named = o.op.script.as_ref().is_some_and(|n| {
                script.names.contains(n) && (same_file || super::matching::is_constant_name(n))
            });
            if !(here || named) {
                continue;
            }
            let Some(k) = i.checked_sub(1).and_then(|at| o.keys.get(at)) else {
                continue;
            };
            match has_hash_tag(&k.key) {
                Some(true) => return None,
                Some(false) => {
                    untagged = untagged
                        .or_else(|| Some((shown(&k.key), Location::new(o.file.clone(), k.span))))
                }
                None => {}
            }
        }
    }
    untagged
}
