//! Locks taken through `locklint-runtime`'s types (`RedisLocker`, `AdvisoryLock`, `TableLock`).

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

/// A lock API of a library: which file marker and type name identify it, which method names
/// acquire, and what the lock is.
struct LibraryLock {
    marker: &'static str,
    type_name: &'static str,
    acquire: &'static [&'static str],
    mechanism: Mechanism,
}

/// Lock APIs recognised by name: `locklint-runtime`'s primitives and the Redlock crates.
const LIBRARY_LOCKS: &[LibraryLock] = &[
    LibraryLock {
        marker: "locklint_runtime",
        type_name: "AdvisoryLock",
        acquire: &["try_lock", "lock_timeout", "try_lock_xact", "lock_xact"],
        mechanism: Mechanism::RuntimeAdvisory,
    },
    LibraryLock {
        marker: "locklint_runtime",
        type_name: "RedisLocker",
        acquire: &["try_acquire", "acquire", "acquire_timeout", "with_lock"],
        mechanism: Mechanism::RuntimeRedis,
    },
    LibraryLock {
        marker: "locklint_runtime",
        type_name: "TableLock",
        acquire: &["try_acquire", "acquire_timeout"],
        mechanism: Mechanism::RuntimeTable,
    },
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

pub(super) fn runtime_locks(project: &Project) -> Vec<Lock> {
    let mut groups: BTreeMap<String, Lock> = BTreeMap::new();
    for file in project.files {
        let text = &file.file.text;
        let apis: Vec<&LibraryLock> = LIBRARY_LOCKS
            .iter()
            .filter(|l| text.contains(l.marker) && text.contains(l.type_name))
            .collect();
        if apis.is_empty() {
            continue;
        }
        for f in &file.functions {
            let calls: Vec<&crate::ir::Call> = f
                .events
                .iter()
                .filter_map(|e| match e {
                    // calls on `self` are the library's own internals
                    Event::Call(c) if c.method && !c.on_self => Some(c),
                    _ => None,
                })
                .collect();
            for c in &calls {
                let Some(mech) = apis
                    .iter()
                    .find(|l| l.acquire.contains(&c.name.as_str()))
                    .map(|l| l.mechanism)
                else {
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
                    checked: Some(!matches!(c.result, ResultUse::Ignored(_))),
                    called_from: Vec::new(),
                });
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
                let session = (mech == Mechanism::RuntimeAdvisory).then_some(Executor::Connection);
                sql_writes_after(project, file, f, start, usize::MAX, session, lock);
            }
        }
    }
    groups.into_values().collect()
}
