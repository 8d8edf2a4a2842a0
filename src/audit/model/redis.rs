//! Redis locks in the inventory: operations grouped by resolved key template, with their
//! acquires, releases, renewals, fences and the writes made while the lock is held.

use super::chains::Chains;
use super::guards::guard_releases;
use super::scripts::{ScriptRole, Scripts};
use super::*;
use crate::ir::KeyIdentity;

/// The group a Redis operation belongs to: the template that names its lock (see
/// [`Chains::naming_key`]), a struct field, or (unresolved) the key as written in its function.
fn redis_group(o: &TraceOp, key: &crate::ir::KeyRef) -> String {
    if key.has_literal() {
        return key.template();
    }
    if let Some(KeyIdentity::Field { field, .. }) = o.identity.as_deref() {
        return format!("self.{field}");
    }
    format!(
        "{{{}}} in {}()",
        o.key.display().trim_matches(['{', '}']),
        o.func.name
    )
}

fn words_of(o: &TraceOp) -> Vec<String> {
    let mut w = vocabulary::words(&o.key.template());
    for n in &o.key.names {
        w.extend(vocabulary::words(n));
    }
    w
}

fn is_fence_key(o: &TraceOp) -> bool {
    vocabulary::has_fence_word(&words_of(o))
}

/// A cache, rate-limit, idempotency or session key: never a write the lock protects.
fn is_bookkeeping(o: &TraceOp) -> bool {
    vocabulary::has_bookkeeping_word(&words_of(o))
}

/// Whether an operation ends the lock it is on: a delete, or a script that deletes (not one
/// that only extends it).
fn releases(scripts: &Scripts, o: &TraceOp) -> bool {
    match o.op.kind {
        OpKind::Delete | OpKind::CompareDelete => true,
        OpKind::Script => scripts.facts(o.op, o.func).role == ScriptRole::Release,
        _ => false,
    }
}

/// Whether a fence minted at `x` (in trace `t`, inside the window of lock `name` opened at
/// `start`) belongs to another lock: one of another name acquired after `start` and not
/// released before `x` (the innermost lock held when it is minted).
fn fence_of_inner_lock(
    chains: &Chains,
    scripts: &Scripts,
    t: &Trace,
    name: &str,
    start: usize,
    x: &TraceOp,
) -> bool {
    let group = |y: &TraceOp| redis_group(y, &chains.naming_key(y));
    t.ops.iter().any(|y| {
        y.is_lock && y.op.kind.is_acquire() && y.at.index > start && y.at.index <= x.at.index && {
            let other = group(y);
            other != name
                && !t.ops.iter().any(|r| {
                    r.is_lock
                        && releases(scripts, r)
                        && r.at.index > y.at.index
                        && r.at.index < x.at.index
                        && group(r) == other
                })
        }
    })
}

/// The TTL an operation sets, for the inventory: `30000 ms`, `60 s`, `dynamic` (set by an
/// expression that is not a literal), or `none`. A TTL the helper holding the operation takes
/// as a parameter is the caller's literal argument (`acquire(con, &key, &token, 60_000)`).
fn ttl_of(chains: &Chains, o: &TraceOp) -> String {
    let ttl = o
        .ttl()
        .or_else(|| crate::locks::ttl::of_options(&o.file, o.op));
    match ttl {
        Some(ttl) => match (
            ttl.value.or_else(|| chains.argument(o, &ttl.text)),
            ttl.unit,
        ) {
            (Some(n), crate::locks::ttl::Unit::Millis) => format!("{n} ms"),
            (Some(n), crate::locks::ttl::Unit::Seconds) => format!("{n} s"),
            (None, _) => "dynamic".to_string(),
        },
        None => match o.op.kind {
            OpKind::Write {
                expiry: Some(_), ..
            }
            | OpKind::Expire => "dynamic".to_string(),
            _ => "none".to_string(),
        },
    }
}

/// The function a release runs in, as the inventory names it: a `Drop` impl's `drop` with its
/// type (`Held::drop`), any other by its name.
fn release_function(f: &Function) -> String {
    match &f.impl_type {
        Some(ty) if f.name == "drop" => format!("{ty}::drop"),
        _ => f.name.clone(),
    }
}

fn op_site(o: &TraceOp) -> Site {
    Site::new(&o.file, o.op.span)
}

/// Whether the path to `o` depends on a read of the same key (compare in the client).
fn client_compared(t: &Trace, o: &TraceOp) -> bool {
    t.ops
        .iter()
        .any(|r| r.op.kind == OpKind::Read && t.same_key(r, o) && o.deps.contains(&r.op.id))
}

pub(super) fn redis_locks(project: &Project) -> Vec<Lock> {
    // which op nodes are seen with a resolved template somewhere
    let mut resolved: HashSet<crate::ir::NodeId> = HashSet::new();
    for t in &project.traces {
        for o in &t.ops {
            if o.is_lock && o.key.has_literal() {
                resolved.insert(o.op.id);
            }
        }
    }
    let chains = Chains::new(project);
    let scripts = Scripts::new(project.files);
    let mut groups: BTreeMap<String, Vec<(&Trace, &TraceOp)>> = BTreeMap::new();
    for t in &project.traces {
        for o in &t.ops {
            if !o.is_lock {
                continue;
            }
            let key = chains.naming_key(o);
            if !key.has_literal() && resolved.contains(&o.op.id) {
                continue;
            }
            groups.entry(redis_group(o, &key)).or_default().push((t, o));
        }
    }
    let mut out = Vec::new();
    for (name, ops) in groups {
        if !ops
            .iter()
            .any(|(_, o)| matches!(o.op.kind, OpKind::Write { .. }))
        {
            // a key only read or deleted here (its acquire is elsewhere, unresolved)
            continue;
        }
        let mut lock = empty_lock(name, Mechanism::RedisSetNxPx);
        let mut acquires: Vec<(Acquire, crate::ir::NodeId, bool)> = Vec::new();
        let mut mechanisms = Vec::new();
        for (t, o) in &ops {
            let site = op_site(o);
            match &o.op.kind {
                OpKind::Write { nx, expiry, .. } if !o.op.kind.is_renewing_write() => {
                    let mech = if !nx {
                        Mechanism::RedisGetThenSet
                    } else if expiry.is_some() {
                        Mechanism::RedisSetNxPx
                    } else if project.facts.acquires_expired_later.contains(&o.op.id) {
                        Mechanism::RedisSetnxExpire
                    } else {
                        Mechanism::RedisSetnxNoExpiry
                    };
                    mechanisms.push(mech);
                    let ignored = matches!(o.result, ResultUse::Ignored(_));
                    let via = o.via.first().map(|(f, s)| Site::new(f, *s));
                    if let Some((a, _, ign)) = acquires.iter_mut().find(|(_, id, _)| *id == o.op.id)
                    {
                        *ign |= ignored;
                        if let Some(v) = via {
                            push_site(&mut a.called_from, v);
                        }
                        continue;
                    }
                    let mut ttl = ttl_of(&chains, o);
                    if mech == Mechanism::RedisSetnxExpire {
                        // the TTL is in the separate expiry
                        if let Some(i) = t.ops.iter().position(|x| std::ptr::eq(x, *o)) {
                            if let Some(e) = t.later_on_key(i).find(|x| x.op.kind == OpKind::Expire)
                            {
                                ttl = ttl_of(&chains, e);
                            }
                        }
                    }
                    let token = match &o.value {
                        Some((Value::Constant(_), _, _)) => TokenKind::Constant,
                        Some((Value::Dynamic, _, _)) => TokenKind::Unique,
                        None => TokenKind::None,
                    };
                    acquires.push((
                        Acquire {
                            site,
                            function: o.func.name.clone(),
                            command: o.op.command.clone(),
                            ttl,
                            token,
                            checked: None,
                            called_from: via.into_iter().collect(),
                        },
                        o.op.id,
                        ignored,
                    ));
                }
                OpKind::Delete | OpKind::CompareDelete => {
                    if lock.releases.iter().any(|r| r.site.same(&site)) {
                        continue;
                    }
                    let compare = o.op.kind == OpKind::CompareDelete;
                    let client = client_compared(t, o);
                    lock.releases.push(Release {
                        site,
                        function: release_function(o.func),
                        command: o.op.command.clone(),
                        atomic: compare || o.op.watched,
                        owner_checked: compare || o.op.watched || client,
                    });
                }
                OpKind::Script => {
                    let facts = scripts.facts(o.op, o.func);
                    if let Some((file, script)) = facts.script {
                        // findings in the script's text are on this lock's path
                        for (_, span) in &script.writes {
                            push_site(&mut lock.op_sites, Site::new(&file.file, *span));
                        }
                    }
                    match facts.role {
                        ScriptRole::Renewal => {
                            if !lock.renewals.iter().any(|r| r.site.same(&site)) {
                                lock.renewals.push(Renewal {
                                    site,
                                    function: o.func.name.clone(),
                                    command: "Lua script".to_string(),
                                    owner_checked: facts.guarded,
                                });
                            }
                        }
                        ScriptRole::Release => {
                            if !lock.releases.iter().any(|r| r.site.same(&site)) {
                                lock.releases.push(Release {
                                    site,
                                    function: release_function(o.func),
                                    command: "Lua script".to_string(),
                                    atomic: true,
                                    owner_checked: facts.guarded,
                                });
                            }
                        }
                        ScriptRole::Other => {}
                    }
                }
                OpKind::Expire if project.facts.expiries_after_acquire.contains(&o.op.id) => {}
                OpKind::Expire | OpKind::Write { .. } => {
                    if lock.renewals.iter().any(|r| r.site.same(&site)) {
                        continue;
                    }
                    lock.renewals.push(Renewal {
                        site,
                        function: o.func.name.clone(),
                        command: o.op.command.clone(),
                        owner_checked: o.op.watched || client_compared(t, o),
                    });
                }
                _ => {}
            }
        }
        // releases run by a guard the acquiring function builds with the key
        let mut guarded_acquires = HashSet::new();
        for (_, o) in ops.iter().filter(|(_, o)| o.op.kind.is_acquire()) {
            if !guarded_acquires.insert(o.op.id) {
                continue;
            }
            for g in guard_releases(project, &scripts, o) {
                let site = Site::new(&g.file.file, g.op.span);
                push_site(&mut lock.op_sites, site.clone());
                if lock.releases.iter().any(|r| r.site.same(&site)) {
                    continue;
                }
                let (command, atomic, owner_checked) = match g.op.kind {
                    OpKind::Script => ("Lua script".to_string(), true, {
                        scripts.facts(g.op, g.func).guarded
                    }),
                    OpKind::CompareDelete => (g.op.command.clone(), true, true),
                    _ => (g.op.command.clone(), false, false),
                };
                lock.releases.push(Release {
                    site,
                    function: release_function(g.func),
                    command,
                    atomic,
                    owner_checked,
                });
            }
        }
        // the worst mechanism seen wins (one lock, several styles of taking it)
        mechanisms.sort();
        if let Some(m) = mechanisms.last() {
            lock.mechanism = *m;
        }
        let in_seconds = |o: &TraceOp| {
            matches!(
                o.op.kind,
                OpKind::Write {
                    nx: true,
                    expiry: Some(crate::ir::Expiry::Ex),
                    ..
                }
            )
        };
        let mut acquiring = ops
            .iter()
            .filter(|(_, o)| o.op.kind.is_acquire())
            .peekable();
        if lock.mechanism == Mechanism::RedisSetNxPx
            && acquiring.peek().is_some()
            && acquiring.all(|(_, o)| in_seconds(o))
        {
            lock.mechanism_label = "Redis SET NX EX".to_string();
        }
        lock.acquires = acquires
            .into_iter()
            .map(|(mut a, _, ignored)| {
                a.checked = Some(!ignored);
                a
            })
            .collect();
        for (_, o) in &ops {
            push_site(&mut lock.op_sites, op_site(o));
            for (f, s) in &o.via {
                push_site(&mut lock.op_sites, Site::new(f, *s));
            }
        }
        // what the lock protects, per trace that takes it
        for (t, o) in &ops {
            if !o.op.kind.is_acquire() && !matches!(o.op.kind, OpKind::Write { .. }) {
                continue;
            }
            let start = o.at.index;
            // the first release after the acquire; one made in the same call of the trace's
            // function (a helper that takes and releases the lock) ends the window where that
            // call ends, past the work handed to it in its arguments
            let order = |x: &TraceOp| t.ops.iter().position(|y| std::ptr::eq(x, y));
            let end = ops
                .iter()
                .filter(|(t2, r)| std::ptr::eq(*t2, *t) && releases(&scripts, r))
                .filter_map(|(_, r)| match r.at.index.cmp(&start) {
                    std::cmp::Ordering::Greater => Some(r.at.index),
                    std::cmp::Ordering::Equal if order(r) > order(o) => {
                        Some(crate::rules::after_call_at(t.root, start))
                    }
                    _ => None,
                })
                .min()
                .unwrap_or(usize::MAX);
            for x in &t.ops {
                if x.at.index <= start || x.at.index >= end || x.is_lock {
                    continue;
                }
                if x.op.kind == OpKind::Incr && is_fence_key(x) {
                    if !fence_of_inner_lock(&chains, &scripts, t, &lock.name, start, x) {
                        push_site(&mut lock.fencing.minted, op_site(x));
                    }
                    continue;
                }
                if is_bookkeeping(x) {
                    continue;
                }
                if matches!(
                    x.op.kind,
                    OpKind::Write { .. } | OpKind::Delete | OpKind::Incr | OpKind::CompareDelete
                ) {
                    push_write(
                        &mut lock.protects,
                        Write {
                            site: op_site(x),
                            function: x.func.name.clone(),
                            target: format!("Redis {} {}", x.op.command, x.key.template()),
                            idempotent: false,
                            fenced: false,
                            same_session: false,
                            external: false,
                            conditional_update: false,
                            after_read: false,
                        },
                    );
                }
            }
            let file_idx = o.at.file;
            if let Some(file) = project.files.get(file_idx) {
                writes_after(project, file, t.root, start, end, None, &mut lock);
            }
        }
        out.push(lock);
    }
    out
}
