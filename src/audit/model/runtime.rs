//! Locks taken through `locklint-runtime`'s types (`RedisLocker`, `AdvisoryLock`,
//! `AdvisoryLocker`, `TableLock`, the `Lock` trait; which calls go to them is decided by
//! [`super::runtime_calls`]), with the writes the crate protects (`FencedWrite`,
//! `FencedClaim`, `claim_once`), and through the Redlock crates, recognised by name.

use super::callers::{values, KeyOrigin};
use super::runtime_calls::{runtime_calls, Item, RuntimeCalls};
use super::*;
use crate::ir::FnId;

fn duration_text(text: &str) -> String {
    for (m, unit) in [
        ("from_millis(", "ms"),
        ("from_secs(", "s"),
        ("from_mins(", "min"),
    ] {
        if let Some(i) = text.find(m) {
            let digits: String = text[i + m.len()..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '_')
                .filter(|c| *c != '_')
                .collect();
            if !digits.is_empty() {
                return format!("{digits} {unit}");
            }
        }
    }
    "dynamic".to_string()
}

/// A lock API of another library, recognised by name in files that mention it.
struct LibraryLock {
    marker: &'static str,
    type_name: &'static str,
    acquire: &'static [&'static str],
    mechanism: Mechanism,
}

/// The Redlock crates.
const LIBRARY_LOCKS: &[LibraryLock] = &[
    LibraryLock {
        marker: "rslock",
        type_name: "LockManager",
        acquire: &["lock", "acquire", "acquire_no_guard"],
        mechanism: Mechanism::Redlock,
    },
    LibraryLock {
        marker: "redlock",
        type_name: "RedLock",
        acquire: &["lock"],
        mechanism: Mechanism::Redlock,
    },
];

/// The acquiring methods of each `locklint-runtime` lock type, and the lock they take.
const RUNTIME_ACQUIRES: &[(Item, &[&str], Mechanism)] = &[
    (
        Item::RedisLocker,
        &[
            "try_acquire",
            "acquire",
            "acquire_timeout",
            "acquire_until",
            "with_lock",
        ],
        Mechanism::RuntimeRedis,
    ),
    (
        Item::AdvisoryLock,
        &["try_lock", "lock_timeout", "try_lock_xact", "lock_xact"],
        Mechanism::RuntimeAdvisory,
    ),
    (
        Item::AdvisoryLocker,
        &["try_lock", "lock_timeout", "try_acquire", "acquire_timeout"],
        Mechanism::RuntimeAdvisory,
    ),
    (
        Item::TableLock,
        &["try_acquire", "acquire_timeout"],
        Mechanism::RuntimeTable,
    ),
    (
        Item::LockTrait,
        &["try_acquire", "acquire_timeout"],
        Mechanism::RuntimeLock,
    ),
    (
        Item::MemoryLock,
        &["try_acquire", "acquire_timeout"],
        Mechanism::RuntimeLock,
    ),
];

/// Struct fields of the crate's lock types, project-wide: `(struct, field)` → the type, from
/// the fields the engine records (`FileIr.field_types`) whose type the struct's file names
/// from the crate. A field of one name in two structs of one name with different types is left
/// out.
type LockFields = HashMap<(String, String), Option<Item>>;

fn lock_fields(files: &[FileIr], runtime: &[RuntimeCalls]) -> LockFields {
    let mut out: LockFields = HashMap::new();
    for (file, rt) in files.iter().zip(runtime) {
        for (owner, field, ty) in &file.field_types {
            let Some(item) = rt.types.get(ty) else {
                continue;
            };
            let e = out
                .entry((owner.clone(), field.clone()))
                .or_insert(Some(*item));
            if *e != Some(*item) {
                *e = None;
            }
        }
    }
    out
}

/// The lock a call takes, if it is an acquisition: a call on the crate's types in its file, a
/// method called on a struct field of one of them (`state.locker.with_lock(..)`, the struct
/// declared in another file), or a Redlock crate's.
fn acquisition(
    file: &RuntimeCalls,
    fields: &LockFields,
    apis: &[&LibraryLock],
    c: &crate::ir::Call,
) -> Option<Mechanism> {
    let acquires = |item: &Item| {
        RUNTIME_ACQUIRES
            .iter()
            .find(|(i, methods, _)| i == item && methods.contains(&c.name.as_str()))
            .map(|(_, _, mechanism)| *mechanism)
    };
    if let Some(item) = file.locks.get(&c.span.start) {
        return acquires(item);
    }
    if !c.method {
        return None;
    }
    if let Some(crate::ir::Receiver::Field { owner, field }) = c.receiver.as_deref() {
        if let Some(Some(item)) = fields.get(&(owner.clone(), field.clone())) {
            return acquires(item);
        }
    }
    apis.iter()
        .find(|l| l.acquire.contains(&c.name.as_str()))
        .map(|l| l.mechanism)
}

pub(super) fn runtime_locks(project: &Project) -> Vec<Lock> {
    let runtime = runtime_calls(project.files);
    let fields = lock_fields(project.files, &runtime);
    let mut groups: BTreeMap<String, Lock> = BTreeMap::new();
    for (fi, (file, rt)) in project.files.iter().zip(&runtime).enumerate() {
        let text = &file.file.text;
        let apis: Vec<&LibraryLock> = LIBRARY_LOCKS
            .iter()
            .filter(|l| text.contains(l.marker) && text.contains(l.type_name))
            .collect();
        if apis.is_empty() && rt.locks.is_empty() && fields.is_empty() {
            continue;
        }
        for (fj, f) in file.functions.iter().enumerate() {
            let calls: Vec<&crate::ir::Call> = f
                .events
                .iter()
                .filter_map(|e| match e {
                    // calls on `self` are the library's own internals
                    Event::Call(c) if !c.on_self => Some(&**c),
                    _ => None,
                })
                .collect();
            for c in &calls {
                let Some(mech) = acquisition(rt, &fields, &apis, c) else {
                    continue;
                };
                let func = FnId { file: fi, func: fj };
                for (name, origin) in lock_names(project, func, f, c) {
                    let lock = groups
                        .entry(name.clone())
                        .or_insert_with(|| empty_lock(name, mech));
                    add_acquisition(project, file, f, rt, &calls, c, mech, &origin, lock);
                }
            }
        }
    }
    groups.into_values().collect()
}

/// The locks a runtime call takes, each with where its name comes from: the literal it is
/// given, or, when it is given a parameter of a wrapper, the name each caller passes (one lock
/// per caller's name, reached through its call). A name no caller fixes stays the wrapper's.
fn lock_names<'a>(
    project: &Project<'a>,
    func: FnId,
    f: &Function,
    c: &crate::ir::Call,
) -> Vec<(String, KeyOrigin<'a>)> {
    let unresolved = |name| {
        vec![(
            name,
            KeyOrigin {
                args: None,
                fixed: false,
                via: Vec::new(),
            },
        )]
    };
    // the name follows the locker (`locker.try_acquire(name, ..)`), or the connection source
    // or locker of a path call (`AdvisoryLock::try_lock(pool, name)`)
    let at = usize::from(!c.method);
    let key = c
        .args
        .get(at)
        .or_else(|| c.args.iter().find(|a| a.has_literal()));
    if let Some(a) = key.filter(|a| a.has_literal()) {
        return unresolved(a.template());
    }
    let Some(key) = key.or(c.args.first()) else {
        return unresolved(format!("? in {}()", f.name));
    };
    let wrapper = format!("{} in {}()", key.template(), f.name);
    let origins: Vec<(String, KeyOrigin)> = values(project, func, key, str::to_string)
        .into_iter()
        .filter_map(|o| Some((o.args.clone().filter(|_| o.fixed)?, o)))
        .collect();
    if origins.is_empty() {
        unresolved(wrapper)
    } else {
        origins
    }
}

/// Record the acquisition `c` (in `f`) of `lock`, with what follows it in `f` (releases,
/// renewals, fences, writes) and, for a name a wrapper's caller passes, the caller's call and
/// the writes the caller makes while the lock is held.
#[allow(clippy::too_many_arguments)]
fn add_acquisition(
    project: &Project,
    file: &FileIr,
    f: &Function,
    rt: &RuntimeCalls,
    calls: &[&crate::ir::Call],
    c: &crate::ir::Call,
    mech: Mechanism,
    origin: &KeyOrigin,
    lock: &mut Lock,
) {
    let site = Site::new(&file.file, c.span);
    let called_from: Vec<Site> = origin
        .via
        .iter()
        .map(|(caller, call)| Site::new(&project.files[caller.file].file, call.span))
        .collect();
    let session = (mech == Mechanism::RuntimeAdvisory).then_some(Executor::Connection);
    // what the callers do while the wrapper holds the lock: inside the call for `with_lock`
    // (the work is the closure it is given), after it otherwise
    for (caller, call) in &origin.via {
        let caller_file = &project.files[caller.file];
        let caller_fn = project.function(*caller);
        let end = if c.name == "with_lock" {
            crate::rules::after_call(caller_fn, call)
        } else {
            usize::MAX
        };
        writes_after(
            project,
            caller_file,
            caller_fn,
            call.id.index,
            end,
            session,
            lock,
        );
    }
    if let Some(known) = lock.acquires.iter_mut().find(|a| a.site.same(&site)) {
        for s in called_from {
            push_site(&mut known.called_from, s);
        }
        return;
    }
    let snippet = file.file.snippet(c.span);
    lock.acquires.push(Acquire {
        site: site.clone(),
        function: f.name.clone(),
        command: c.name.clone(),
        ttl: if mech == Mechanism::RuntimeAdvisory {
            "none (session)".to_string()
        } else {
            duration_text(snippet)
        },
        token: if mech == Mechanism::RuntimeAdvisory {
            TokenKind::None
        } else {
            TokenKind::Unique
        },
        checked: (!waits_until_held(c, mech)).then_some(!matches!(c.result, ResultUse::Ignored(_))),
        called_from,
    });
    if c.name == "with_lock" && mech == Mechanism::RuntimeRedis {
        // it keeps the lease alive while the work runs and releases it on every exit
        lock.renewals.push(Renewal {
            site: site.clone(),
            function: f.name.clone(),
            command: "with_lock (keep-alive)".to_string(),
            owner_checked: true,
        });
        lock.releases.push(Release {
            site,
            function: f.name.clone(),
            command: "with_lock (release on every exit)".to_string(),
            atomic: true,
            owner_checked: true,
        });
    }
    let start = c.id.index;
    let released = lock.releases.len();
    for d in calls.iter().filter(|d| d.id.index > start) {
        let s = Site::new(&file.file, d.span);
        match d.name.as_str() {
            "release" | "unlock" => lock.releases.push(Release {
                site: s,
                function: f.name.clone(),
                command: d.name.clone(),
                atomic: true,
                owner_checked: true,
            }),
            "renew" | "spawn_keep_alive" | "extend" => lock.renewals.push(Renewal {
                site: s,
                function: f.name.clone(),
                command: d.name.clone(),
                owner_checked: true,
            }),
            "fence" => push_site(&mut lock.fencing.minted, s),
            _ => {}
        }
    }
    if lock.releases.len() == released {
        if let Some(command) = released_when_dropped(c, mech) {
            // nothing releases it by name: the lease or guard releases itself when dropped
            lock.releases.push(Release {
                site: Site::new(&file.file, c.span),
                function: f.name.clone(),
                command: command.to_string(),
                atomic: true,
                owner_checked: true,
            });
        }
    }
    runtime_writes(file, f, c.span.start, rt, lock);
    writes_after(project, file, f, start, usize::MAX, session, lock);
}

/// What releases a lock of the runtime that the code never releases by name, if its type
/// does: a `RedisLocker` lease deletes its key (owner-checked) when dropped, and an advisory
/// guard's connection closes, ending the session. A `TableLock` lease is not released by
/// dropping it (it expires), nor is a transaction lock released but by its transaction.
fn released_when_dropped(c: &crate::ir::Call, mech: Mechanism) -> Option<&'static str> {
    match mech {
        Mechanism::RuntimeRedis if c.name != "with_lock" => {
            Some("lease dropped (Lease's Drop releases it)")
        }
        Mechanism::RuntimeAdvisory if !c.name.ends_with("_xact") => {
            Some("guard dropped (its connection closes: the session ends)")
        }
        _ => None,
    }
}

/// `acquire`, `lock_xact` and `with_lock` of the runtime wait until they hold the lock: there
/// is no result to check.
fn waits_until_held(c: &crate::ir::Call, mech: Mechanism) -> bool {
    mech != Mechanism::Redlock && matches!(c.name.as_str(), "acquire" | "lock_xact" | "with_lock")
}

/// The writes the crate protects (`FencedWrite`, `FencedClaim`, `claim_once`) in `f` after
/// the acquire at byte offset `after`.
fn runtime_writes(file: &FileIr, f: &Function, after: usize, rt: &RuntimeCalls, lock: &mut Lock) {
    let within = |at: usize| at > after && at < f.whole.end && at >= f.whole.start;
    for (span, item) in rt.writes.iter().filter(|(s, _)| within(s.start)) {
        let site = Site::new(&file.file, *span);
        let (target, fenced) = match item {
            Item::FencedWrite => ("FencedWrite", true),
            Item::FencedClaim => ("FencedClaim", true),
            _ => ("claim_once", false),
        };
        if fenced {
            push_site(&mut lock.fencing.checked_writes, site.clone());
        }
        push_write(
            &mut lock.protects,
            Write {
                site,
                function: f.name.clone(),
                target: target.to_string(),
                idempotent: !fenced,
                fenced,
                same_session: false,
                external: false,
                conditional_update: false,
                after_read: false,
            },
        );
    }
}
