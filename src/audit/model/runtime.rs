//! Locks taken through `locklint-runtime`'s types (`RedisLocker`, `AdvisoryLock`,
//! `AdvisoryLocker`, `TableLock`, the `Lock` trait; which calls go to them is decided by
//! [`super::runtime_calls`]), with the writes the crate protects (`FencedWrite`,
//! `FencedClaim`, `claim_once`), and through the Redlock crates, recognised by name.

use super::runtime_calls::{runtime_calls, Item, RuntimeCalls};
use super::*;

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

/// The lock a call takes, if it is an acquisition.
fn acquisition(
    file: &RuntimeCalls,
    apis: &[&LibraryLock],
    c: &crate::ir::Call,
) -> Option<Mechanism> {
    if let Some(item) = file.locks.get(&c.span.start) {
        return RUNTIME_ACQUIRES
            .iter()
            .find(|(i, methods, _)| i == item && methods.contains(&c.name.as_str()))
            .map(|(_, _, mechanism)| *mechanism);
    }
    if !c.method {
        return None;
    }
    apis.iter()
        .find(|l| l.acquire.contains(&c.name.as_str()))
        .map(|l| l.mechanism)
}

pub(super) fn runtime_locks(project: &Project) -> Vec<Lock> {
    let runtime = runtime_calls(project.files);
    let mut groups: BTreeMap<String, Lock> = BTreeMap::new();
    for (file, rt) in project.files.iter().zip(&runtime) {
        let text = &file.file.text;
        let apis: Vec<&LibraryLock> = LIBRARY_LOCKS
            .iter()
            .filter(|l| text.contains(l.marker) && text.contains(l.type_name))
            .collect();
        if apis.is_empty() && rt.locks.is_empty() {
            continue;
        }
        for f in &file.functions {
            let calls: Vec<&crate::ir::Call> = f
                .events
                .iter()
                .filter_map(|e| match e {
                    // calls on `self` are the library's own internals
                    Event::Call(c) if !c.on_self => Some(c),
                    _ => None,
                })
                .collect();
            for c in &calls {
                let Some(mech) = acquisition(rt, &apis, c) else {
                    continue;
                };
                let key = c
                    .args
                    .iter()
                    .find(|a| a.has_literal())
                    .or(c.args.first())
                    .map(|k| k.template())
                    .unwrap_or_else(|| "?".to_string());
                let name = if c.args.iter().any(|a| a.has_literal()) {
                    key
                } else {
                    format!("{key} in {}()", f.name)
                };
                let lock = groups
                    .entry(name.clone())
                    .or_insert_with(|| empty_lock(name, mech));
                let site = Site::new(&file.file, c.span);
                let snippet = file.file.snippet(c.span);
                lock.acquires.push(Acquire {
                    site,
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
                    checked: (!waits_until_held(c, mech))
                        .then_some(!matches!(c.result, ResultUse::Ignored(_))),
                    called_from: Vec::new(),
                });
                if c.name == "with_lock" && mech == Mechanism::RuntimeRedis {
                    // it keeps the lease alive while the work runs and releases it on every exit
                    let s = Site::new(&file.file, c.span);
                    lock.renewals.push(Renewal {
                        site: s.clone(),
                        function: f.name.clone(),
                        command: "with_lock (keep-alive)".to_string(),
                        owner_checked: true,
                    });
                    lock.releases.push(Release {
                        site: s,
                        function: f.name.clone(),
                        command: "with_lock (release on every exit)".to_string(),
                        atomic: true,
                        owner_checked: true,
                    });
                }
                let start = c.id.index;
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
                runtime_writes(file, f, c.span.start, rt, lock);
                let session = (mech == Mechanism::RuntimeAdvisory).then_some(Executor::Connection);
                writes_after(project, file, f, start, usize::MAX, session, lock);
            }
        }
    }
    groups.into_values().collect()
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
