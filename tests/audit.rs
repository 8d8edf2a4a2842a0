//! `locklint audit` end to end over the fixture codebases in `fixtures/audit/`: the table,
//! JSON and Markdown are snapshotted; every lock appears exactly once with the expected
//! mechanism and verdict; cache, session and rate-limit keys never appear; the HTML page is
//! self-contained and, loaded in headless Chromium, shows every lock.

use std::path::PathBuf;
use std::process::Command;

#[path = "support/bin.rs"]
mod bin;
use bin::locklint;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `locklint audit fixtures/audit/<name> --format <format>` from the repository root.
fn audit(name: &str, format: &str) -> String {
    let path = format!("fixtures/audit/{name}");
    // the fixture is its own project, not part of the repository around it
    let o = locklint(
        &root(),
        &["audit", &path, "--project-root", &path, "--format", format],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("utf-8 output")
}

fn json(name: &str) -> serde_json::Value {
    serde_json::from_str(&audit(name, "json")).expect("valid JSON")
}

const FIXTURES: &[&str] = &[
    "invoicing-unfenced",
    "invoicing-fenced",
    "job-runner",
    "scheduler",
    "cache",
    "runtime-lease",
    "runtime-types",
    "redlock",
    "keys-resolved",
    "next-steps",
    "one-entry-per-lock",
    "facts-per-lock",
    "external-effects",
    "held-scripts",
    "runtime-wrappers",
    "spin-and-helper-crate",
];

/// (fixture, [(lock, mechanism, verdict)]): every lock the fixture holds, nothing else.
/// (lock, mechanism, verdict).
type Expected = (&'static str, &'static str, &'static str);

const EXPECTED: &[(&str, &[Expected])] = &[
    (
        "invoicing-unfenced",
        &[(
            "lock:invoice:{}",
            "redis-set-nx-px",
            "unsafe-for-correctness",
        )],
    ),
    (
        "invoicing-fenced",
        &[("lock:invoice:{}", "redis-set-nx-px", "fine-for-efficiency")],
    ),
    (
        "job-runner",
        &[
            (
                "advisory(hashtext('jobs:nightly-billing'))",
                "advisory-transaction",
                "fine-for-correctness",
            ),
            ("advisory(42)", "advisory-session", "broken"),
        ],
    ),
    (
        "scheduler",
        &[("table scheduler_locks", "lock-table", "broken")],
    ),
    (
        "cache",
        &[("lock:report:{}", "redis-set-nx-px", "no-lock-needed")],
    ),
    (
        "runtime-lease",
        &[("digest", "runtime-redis", "fine-for-efficiency")],
    ),
    (
        "runtime-types",
        &[
            ("accounts", "runtime-advisory", "fine-for-efficiency"),
            ("balances", "runtime-redis", "unsafe-for-correctness"),
            ("ledger", "runtime-lock", "unsafe-for-correctness"),
            ("overdue", "runtime-table", "no-lock-needed"),
            ("reports", "runtime-redis", "no-lock-needed"),
        ],
    ),
    (
        "redlock",
        &[("reports:nightly", "redlock", "no-lock-needed")],
    ),
    (
        "keys-resolved",
        &[
            (
                "lock:feed-daily:{}",
                "redis-set-nx-px",
                "fine-for-efficiency",
            ),
            (
                "lock:feed-hourly:{}",
                "redis-set-nx-px",
                "fine-for-efficiency",
            ),
            ("lock:feed-weekly:{}", "redis-setnx-expire", "broken"),
            ("lock:feed-monthly:{}", "redis-setnx-expire", "broken"),
            ("lock:catalogue-rebuild", "redis-setnx-no-expiry", "broken"),
            ("advisory(7001)", "advisory-session", "fine-for-correctness"),
            ("advisory(7002)", "advisory-session", "fine-for-correctness"),
            ("advisory(7003)", "advisory-session", "fine-for-correctness"),
        ],
    ),
    (
        "next-steps",
        &[
            ("lock:period-close:{}", "redis-set-nx-px", "broken"),
            ("advisory(hashtext('purge'))", "advisory-session", "broken"),
        ],
    ),
    (
        "one-entry-per-lock",
        &[
            (
                "lock:catalog-sync",
                "redis-set-nx-px",
                "unsafe-for-correctness",
            ),
            ("lock:export:{}", "redis-set-nx-px", "no-lock-needed"),
            ("lock:invoice:{}", "redis-set-nx-px", "no-lock-needed"),
        ],
    ),
    (
        "facts-per-lock",
        &[
            ("lock:export:{}", "redis-set-nx-px", "no-lock-needed"),
            ("lock:invoice:{}", "redis-set-nx-px", "fine-for-efficiency"),
            (
                "lock:receipt:{}",
                "redis-set-nx-px",
                "unsafe-for-correctness",
            ),
            ("lock:ledger", "redis-set-nx-px", "unsafe-for-correctness"),
            (
                "lock:ledger-snapshot",
                "redis-set-nx-px",
                "fine-for-efficiency",
            ),
            ("lock:digest", "redis-setnx-expire", "broken"),
            ("lock:rollup", "redis-setnx-expire", "broken"),
        ],
    ),
    (
        "external-effects",
        &[
            (
                "lock:snapshot:{}",
                "redis-set-nx-px",
                "unsafe-for-correctness",
            ),
            (
                "lock:compactor",
                "redis-set-nx-px",
                "unsafe-for-correctness",
            ),
            (
                "advisory(hashtext('announce'))",
                "advisory-transaction",
                "unsafe-for-correctness",
            ),
        ],
    ),
    (
        "held-scripts",
        &[
            (
                "lock:billing-run",
                "redis-set-nx-px",
                "unsafe-for-correctness",
            ),
            ("lock:ledger:{}", "redis-set-nx-px", "no-lock-needed"),
            ("lock:payout:{}", "redis-set-nx-px", "fine-for-efficiency"),
            ("lock:refund:{}", "redis-set-nx-px", "broken"),
            ("lock:invoice-rebuild:{}", "redis-set-nx-px", "broken"),
            ("lock:period-close:{}", "redis-set-nx-px", "no-lock-needed"),
            ("lock:export:{}", "redis-set-nx-px", "fine-for-efficiency"),
            ("lock:import:{}", "redis-set-nx-px", "fine-for-efficiency"),
        ],
    ),
    (
        "runtime-wrappers",
        &[
            ("settlement", "runtime-redis", "unsafe-for-correctness"),
            ("sweeper", "runtime-redis", "unsafe-for-correctness"),
            ("digest", "runtime-redis", "unsafe-for-correctness"),
            ("advisory(7302)", "advisory-session", "broken"),
            ("reindex", "runtime-advisory", "unsafe-for-correctness"),
            ("advisory(7301)", "advisory-session", "fine-for-correctness"),
        ],
    ),
    (
        "spin-and-helper-crate",
        &[
            ("lock:nightly-export", "redis-setnx-expire", "broken"),
            ("lock:key-rotation", "redis-setnx-expire", "broken"),
            (
                "lock:nightly-publish",
                "redis-set-nx-px",
                "unsafe-for-correctness",
            ),
            (
                "lock:nightly-rollup",
                "redis-set-nx-px",
                "unsafe-for-correctness",
            ),
            ("lock:nightly-recount", "redis-set-nx-px", "no-lock-needed"),
        ],
    ),
];

#[test]
fn table_snapshots() {
    for f in FIXTURES {
        insta::assert_snapshot!(format!("table_{f}"), audit(f, "table"));
    }
}

#[test]
fn json_snapshots() {
    for f in FIXTURES {
        insta::assert_snapshot!(format!("json_{f}"), audit(f, "json"));
    }
}

#[test]
fn markdown_snapshots() {
    for f in FIXTURES {
        insta::assert_snapshot!(format!("markdown_{f}"), audit(f, "markdown"));
    }
}

#[test]
fn every_lock_once_with_mechanism_and_verdict() {
    for (fixture, expected) in EXPECTED {
        let doc = json(fixture);
        assert_eq!(doc["version"], 1);
        let locks = doc["locks"].as_array().expect("locks");
        let names: Vec<&str> = locks.iter().map(|l| l["name"].as_str().unwrap()).collect();
        let mut want: Vec<&str> = expected.iter().map(|e| e.0).collect();
        let mut got = names.clone();
        want.sort();
        got.sort();
        assert_eq!(got, want, "{fixture}: locks found");
        for (name, mechanism, verdict) in *expected {
            let found: Vec<&serde_json::Value> =
                locks.iter().filter(|l| l["name"] == *name).collect();
            assert_eq!(found.len(), 1, "{fixture}: `{name}` appears exactly once");
            assert_eq!(found[0]["mechanism"], *mechanism, "{fixture}: `{name}`");
            assert_eq!(found[0]["verdict"], *verdict, "{fixture}: `{name}`");
        }
        assert_eq!(doc["summary"]["locks"], locks.len());
    }
}

#[test]
fn one_lock_built_in_two_places_is_listed_once_with_both_acquires() {
    let doc = json("invoicing-unfenced");
    let lock = &doc["locks"][0];
    let acquires = lock["acquires"].as_array().unwrap();
    let files: Vec<&str> = acquires
        .iter()
        .map(|a| a["site"]["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        files,
        [
            "fixtures/audit/invoicing-unfenced/src/billing.rs",
            "fixtures/audit/invoicing-unfenced/src/refunds.rs"
        ]
    );
    for a in acquires {
        assert_eq!(a["ttl"], "30000 ms");
        assert_eq!(a["token"], "unique");
        assert_eq!(a["checked"], true);
    }
    assert_eq!(lock["fencing"]["minted"].as_array().unwrap().len(), 0);
    assert_eq!(lock["protects"].as_array().unwrap().len(), 4);
    assert_eq!(lock["purpose"]["value"], "correctness");
    let steps = lock["next_steps"].as_array().unwrap();
    let steps: Vec<&str> = steps.iter().map(|s| s.as_str().unwrap()).collect();
    // each write named by its site and statement, with what to add and the runtime type
    for (site, write) in [
        ("src/billing.rs:30", "fence `UPDATE invoices`"),
        ("src/refunds.rs:24", "fence `UPDATE invoices`"),
        ("src/refunds.rs:28", "fence `DELETE payments`"),
        ("src/billing.rs:25", "make `INSERT payments` idempotent"),
    ] {
        assert!(
            steps
                .iter()
                .any(|s| s.contains(&format!("{site}: {write}")) && s.contains("locklint-runtime")),
            "no step for {site} in {steps:?}"
        );
    }
    assert!(steps.iter().any(|s| s.contains("pg_advisory_xact_lock")));
    assert!(steps.iter().all(|s| !s.starts_with("fix `")), "{steps:?}");
}

#[test]
fn fenced_lock_reports_the_mint_and_the_checked_write() {
    let doc = json("invoicing-fenced");
    let fencing = &doc["locks"][0]["fencing"];
    assert_eq!(fencing["minted"].as_array().unwrap().len(), 1);
    assert_eq!(fencing["checked_writes"].as_array().unwrap().len(), 1);
    let protects = doc["locks"][0]["protects"].as_array().unwrap();
    assert!(protects
        .iter()
        .all(|w| w["fenced"] == true || w["idempotent"] == true));
}

/// `locklint-runtime`'s types are recognised by what the file imports, not by name: the
/// project's own `TableLock`, a semaphore's `acquire` and another crate's `RedisLocker` in a
/// file that also uses the runtime are not locks; the runtime's are found through a renamed
/// import, a crate alias, a struct field, a generic `L: Lock` and `Lock::try_acquire(..)`.
/// A write that depends on a read made under the lock is told to claim the row at the read,
/// whether it is unfenced or fenced only at the write.
#[test]
fn runtime_types_are_recognised_by_import_not_by_name() {
    let doc = json("runtime-types");
    let locks = doc["locks"].as_array().unwrap();
    for l in locks {
        for a in l["acquires"].as_array().unwrap() {
            let path = a["site"]["path"].as_str().unwrap();
            assert!(
                !path.ends_with("lookalike.rs") && !path.ends_with("locks.rs"),
                "a look-alike taken for the runtime's lock: {a}"
            );
        }
    }
    let lock = |name: &str| {
        locks
            .iter()
            .find(|l| l["name"] == name)
            .unwrap_or_else(|| panic!("no lock `{name}`"))
    };

    // Through the trait, on an `AdvisoryLocker`: the claim and the write are fenced.
    let accounts = lock("accounts");
    let targets: Vec<&str> = accounts["protects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["target"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["FencedClaim", "FencedWrite"]);
    assert_eq!(
        accounts["fencing"]["checked_writes"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(accounts["fencing"]["minted"].as_array().unwrap().len(), 1);
    assert_eq!(accounts["releases"][0]["command"], "unlock");

    // A read-modify-write under a generic `Lock`: the next step names the claim form.
    let ledger = lock("ledger");
    let steps: Vec<&str> = ledger["next_steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let claim = steps
        .iter()
        .find(|s| s.contains("FencedClaim"))
        .unwrap_or_else(|| panic!("no claim-form step in {steps:?}"));
    assert!(
        claim.contains("src/ledger.rs:21: `UPDATE ledger_accounts`"),
        "{claim}"
    );
    assert!(claim.contains("AND fence <= $n RETURNING"), "{claim}");
    // The insert does not depend on the read: no claim form for it.
    assert!(steps
        .iter()
        .any(|s| s.contains("src/ledger.rs:26: make `INSERT") && s.contains("idempotent")));

    // A fence compared only at the write, after a plain read of the row: not safe alone.
    let balances = lock("balances");
    assert_eq!(balances["protects"][0]["fenced"], true);
    assert_eq!(balances["purpose"]["value"], "correctness");
    assert!(balances["next_steps"][0]
        .as_str()
        .unwrap()
        .contains("`FencedClaim` in locklint-runtime"));

    // `with_lock` on a struct field: kept alive and released by the call itself.
    let reports = lock("reports");
    assert_eq!(reports["acquires"][0]["checked"], serde_json::Value::Null);
    assert_eq!(reports["renewed"], true);
    assert_eq!(reports["protects"][0]["target"], "claim_once");
    assert_eq!(reports["protects"][0]["idempotent"], true);
}

fn lock<'d>(doc: &'d serde_json::Value, name: &str) -> &'d serde_json::Value {
    doc["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("no lock `{name}`"))
}

/// `path:line` of a site, the path relative to the fixture.
fn at(site: &serde_json::Value, fixture: &str) -> String {
    let path = site["path"].as_str().unwrap();
    let prefix = format!("fixtures/audit/{fixture}/");
    format!(
        "{}:{}",
        path.strip_prefix(&prefix).unwrap_or(path),
        site["line"]
    )
}

/// Advisory keys bound as `$1` are resolved: a const of another crate, and the key each
/// caller passes to a shared wrapper (one lock per caller's key, reached through its call).
/// Expiries are read from `SetOptions` built before the call, `SetExpiry::PX` in the call and
/// a pipeline's `EXPIRE`; a lock with no expiry is never said to be released by one.
#[test]
fn keys_and_expiries_are_resolved() {
    let f = "keys-resolved";
    let doc = json(f);
    let names: Vec<&str> = doc["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains('$')),
        "unresolved advisory keys: {names:?}"
    );
    assert!(
        names
            .iter()
            .all(|n| !n.contains("idempotency") && !n.contains("cache")),
        "{names:?}"
    );

    let indexer = lock(&doc, "advisory(7001)");
    assert_eq!(
        at(&indexer["acquires"][0]["site"], f),
        "crates/indexer/src/lib.rs:7"
    );
    assert_eq!(
        at(&indexer["releases"][0]["site"], f),
        "crates/indexer/src/lib.rs:17"
    );

    for (name, caller, write) in [
        (
            "advisory(7002)",
            "crates/reports/src/lib.rs:6",
            "INSERT reports",
        ),
        (
            "advisory(7003)",
            "crates/reports/src/lib.rs:15",
            "DELETE exports",
        ),
    ] {
        let l = lock(&doc, name);
        let acquires = l["acquires"].as_array().unwrap();
        assert_eq!(acquires.len(), 1, "{name}");
        assert_eq!(at(&acquires[0]["site"], f), "crates/locks/src/lib.rs:13");
        let via: Vec<String> = acquires[0]["called_from"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| at(s, f))
            .collect();
        assert_eq!(via, [caller], "{name}");
        assert_eq!(
            at(&l["releases"][0]["site"], f),
            "crates/locks/src/lib.rs:21"
        );
        let targets: Vec<&str> = l["protects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["target"].as_str().unwrap())
            .collect();
        assert_eq!(targets, [write], "{name}");
    }

    for (name, ttl, label) in [
        ("lock:feed-daily:{}", "86400 s", "Redis SET NX EX"),
        ("lock:feed-hourly:{}", "30000 ms", "Redis SET NX PX"),
        ("lock:feed-weekly:{}", "300 s", "Redis SETNX + EXPIRE"),
        ("lock:feed-monthly:{}", "300 s", "Redis SETNX + EXPIRE"),
        ("lock:catalogue-rebuild", "none", "Redis SETNX (no expiry)"),
    ] {
        let l = lock(&doc, name);
        assert_eq!(l["acquires"][0]["ttl"], ttl, "{name}");
        assert_eq!(l["mechanism_label"], label, "{name}");
    }
    let table = audit(f, "table");
    let row = table
        .lines()
        .find(|l| l.starts_with("lock:catalogue-rebuild "))
        .unwrap();
    assert!(!row.contains("(TTL)"), "{row}");
    // the cache entry written under the daily lock is not a write it protects
    assert_eq!(
        lock(&doc, "lock:feed-daily:{}")["protects"],
        serde_json::json!([])
    );
    assert!(!table.contains("dynamic"), "{table}");
}

/// `locklint check` and `locklint audit` agree on every fixture: each finding of `check` is
/// attached to a lock of the audit at the same place, and a release (renewal) `check` reports
/// as unconditional is listed in that lock's releases (renewals) as not owner-checked.
#[test]
fn check_and_audit_agree() {
    for f in FIXTURES {
        let path = format!("fixtures/audit/{f}");
        let o = locklint(
            &root(),
            &["check", &path, "--project-root", &path, "--format", "json"],
        );
        let report: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{f}: {e}: {}", String::from_utf8_lossy(&o.stderr)));
        let doc = json(f);
        let locks = doc["locks"].as_array().unwrap();
        for finding in report["findings"].as_array().unwrap() {
            let (rule, file, line) = (&finding["rule"], &finding["path"], &finding["line"]);
            let holders: Vec<&serde_json::Value> = locks
                .iter()
                .filter(|l| {
                    l["findings"].as_array().unwrap().iter().any(|x| {
                        x["rule"] == *rule
                            && x["site"]["path"] == *file
                            && x["site"]["line"] == *line
                    })
                })
                .collect();
            assert!(
                !holders.is_empty(),
                "{f}: `{rule}` at {file}:{line} is on no lock of the audit"
            );
            let listed_in = match rule.as_str() {
                Some("unconditional-release") => "releases",
                Some("unconditional-renew") => "renewals",
                _ => continue,
            };
            for l in &holders {
                assert!(
                    l[listed_in].as_array().unwrap().iter().any(|r| {
                        r["site"]["path"] == *file
                            && r["site"]["line"] == *line
                            && r["owner_checked"] == false
                    }),
                    "{f}: `{}` does not list the unconditional {listed_in} at {file}:{line}",
                    l["name"]
                );
            }
        }
    }
}

/// `(site, function, command, owner-checked)` of each release of a lock, sites relative to the
/// fixture.
fn releases(
    doc: &serde_json::Value,
    name: &str,
    fixture: &str,
) -> Vec<(String, String, String, bool)> {
    lock(doc, name)["releases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                at(&r["site"], fixture),
                r["function"].as_str().unwrap().to_string(),
                r["command"].as_str().unwrap().to_string(),
                r["owner_checked"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// A compare-and-delete script kept in a `static LazyLock`, a `once_cell` `Lazy` or a struct
/// field is the release of the lock it is run on, owner-checked, though the same file keeps a
/// rate limiter's script that changes an expiry unchecked; a compare-and-pexpire script is a
/// renewal whatever its function is called, and a lock-named one that deletes without a check
/// carries `check`'s finding in its text. A guard that the acquiring function builds with the
/// key, or passes it to the constructor that does, releases the lock from `release(self)`,
/// `unlock(self)` and `Drop` (also through a local taken from the field for a task the `Drop`
/// spawns). The rate limit and the cache entry a guard deletes when dropped are not locks.
#[test]
fn held_scripts_and_guards_release_their_locks() {
    let f = "held-scripts";
    let doc = json(f);
    let kit = "crates/lockkit/src/lib.rs";
    let owned = |s: &str, func: &str| {
        (
            s.to_string(),
            func.to_string(),
            "Lua script".to_string(),
            true,
        )
    };
    assert_eq!(
        releases(&doc, "lock:billing-run", f),
        [owned(&format!("{kit}:59"), "give_back")]
    );
    assert_eq!(
        releases(&doc, "lock:ledger:{}", f),
        [owned(&format!("{kit}:108"), "unlock")]
    );
    assert_eq!(
        releases(&doc, "lock:payout:{}", f),
        [
            owned(&format!("{kit}:138"), "release"),
            owned(&format!("{kit}:148"), "Held::drop"),
        ]
    );
    // a `Drop` that takes the key out of the field and hands the release to a task
    assert_eq!(
        releases(&doc, "lock:period-close:{}", f),
        [owned(&format!("{kit}:188"), "AsyncHeld::drop")]
    );
    // a guard built by its constructor (`ExportGuard::new(con, key, token)`)
    assert_eq!(
        releases(&doc, "lock:export:{}", f),
        [owned(&format!("{kit}:241"), "unlock")]
    );
    // a guard's `Drop` that deletes another field (a progress marker) releases nothing
    assert_eq!(
        lock(&doc, "lock:import:{}")["releases"],
        serde_json::json!([])
    );
    // a compare-and-pexpire script run from `keep_alive` renews the lock, and what is written
    // after it is still written under the lock
    let billing = lock(&doc, "lock:billing-run");
    assert_eq!(billing["renewals"][0]["function"], "keep_alive");
    assert_eq!(billing["renewals"][0]["owner_checked"], true);
    let targets: Vec<&str> = billing["protects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["target"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["INSERT billing_runs", "UPDATE billing_accounts"]);
    let billing = lock(&doc, "lock:billing-run");
    assert_eq!(
        billing["acquires"][0]["checked"], true,
        "`if try_take(..).await? {{`"
    );
    let names: Vec<&str> = doc["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| !n.contains("ratelimit") && !n.contains("cache")),
        "{names:?}"
    );
}

/// A `locklint-runtime` locker used in a wrapper of another crate: the lock is the name the
/// wrapper's caller passes (through the call, from `main`), `with_lock` releases it on every
/// exit and keeps it alive, and the work the caller hands it is what it protects; the same for
/// a locker kept in a field of a struct declared in another file. A name given
/// to `AdvisoryLock::try_lock` as a const of another crate is resolved. A session advisory
/// lock on a connection marked `close_on_drop()` is released when the connection is dropped:
/// the session ends (not when it goes back to its pool); a lease the code never releases by
/// name is released by its `Drop`.
#[test]
fn runtime_wrappers_and_session_ends_are_seen() {
    let f = "runtime-wrappers";
    let doc = json(f);
    let main = "crates/app/src/main.rs";
    let settlement = lock(&doc, "settlement");
    let acquire = &settlement["acquires"][0];
    assert_eq!(at(&acquire["site"], f), "crates/platform/src/lib.rs:21");
    assert_eq!(at(&acquire["called_from"][0], f), format!("{main}:17"));
    assert_eq!(
        releases(&doc, "settlement", f),
        [(
            "crates/platform/src/lib.rs:21".to_string(),
            "exclusively".to_string(),
            "with_lock (release on every exit)".to_string(),
            true
        )]
    );
    assert_eq!(settlement["renewed"], true);
    assert_eq!(settlement["protects"][0]["target"], "UPDATE settlements");
    assert_eq!(
        at(&settlement["protects"][0]["site"], f),
        format!("{main}:18")
    );

    // a locker kept in a field of a struct another file declares
    let sweeper = lock(&doc, "sweeper");
    assert_eq!(
        at(&sweeper["acquires"][0]["site"], f),
        "crates/app/src/jobs.rs:11"
    );
    assert_eq!(sweeper["renewed"], true);
    assert_eq!(sweeper["releases"][0]["owner_checked"], true);
    assert_eq!(sweeper["protects"][0]["target"], "DELETE sessions");

    let reindex = lock(&doc, "reindex");
    assert_eq!(reindex["acquires"][0]["command"], "try_lock");
    assert_eq!(at(&reindex["releases"][0]["site"], f), format!("{main}:36"));

    assert_eq!(
        releases(&doc, "advisory(7301)", f),
        [(
            format!("{main}:57"),
            "compact".to_string(),
            "session ends: `conn` dropped (close_on_drop: it closes)".to_string(),
            true
        )]
    );
    // a pooled connection that goes back to its pool keeps the session, and the lock
    let vacuum = lock(&doc, "advisory(7302)");
    assert_eq!(vacuum["releases"], serde_json::json!([]));
    assert_eq!(vacuum["findings"][0]["rule"], "advisory-lock-unbalanced");
    // a lease never released by name releases itself when dropped
    assert_eq!(
        releases(&doc, "digest", f),
        [(
            format!("{main}:65"),
            "send_digest".to_string(),
            "lease dropped (Lease's Drop releases it)".to_string(),
            true
        )]
    );
    let table = audit(f, "table");
    let row = table
        .lines()
        .find(|l| l.starts_with("advisory(7301) "))
        .unwrap();
    assert!(row.contains("owner-checked"), "{row}");
}

/// Spin locks (`while !con.set_nx(..)`) in a lock helper crate and inline in a binary's
/// `main`-adjacent function: each is one lock named by the caller's literal, reached through
/// the call from the binary. The helper's release runs a compare-and-delete script kept in a
/// `static` of another module, and the binary's runs one read from a `.lua` file with
/// `include_str!`: both owner-checked. A helper that takes and releases the lock around the
/// work it is handed protects that work (also what it calls), not what its caller does after.
#[test]
fn spin_locks_and_helper_crates_are_seen() {
    let f = "spin-and-helper-crate";
    let doc = json(f);
    let export = lock(&doc, "lock:nightly-export");
    let acquire = &export["acquires"][0];
    assert_eq!(at(&acquire["site"], f), "crates/spinlock/src/lib.rs:16");
    assert_eq!(acquire["checked"], true);
    let via: Vec<String> = acquire["called_from"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| at(s, f))
        .collect();
    assert!(
        via.contains(&"crates/nightly/src/main.rs:21".to_string()),
        "{via:?}"
    );
    assert_eq!(
        releases(&doc, "lock:nightly-export", f),
        [(
            "crates/spinlock/src/lib.rs:26".to_string(),
            "unlock".to_string(),
            "Lua script".to_string(),
            true
        )]
    );
    let rotation = lock(&doc, "lock:key-rotation");
    assert_eq!(
        at(&rotation["acquires"][0]["site"], f),
        "crates/nightly/src/main.rs:31"
    );
    // a helper that takes the lock, runs the closure it is handed and releases it: the
    // closure's writes are under the lock, those after the call are not (for `check` either),
    // and a write in a function the closure calls is
    let targets = |name: &str| -> Vec<String> {
        lock(&doc, name)["protects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| format!("{} at {}", w["target"].as_str().unwrap(), at(&w["site"], f)))
            .collect()
    };
    assert_eq!(
        targets("lock:nightly-rollup"),
        ["INSERT rollups at crates/nightly/src/main.rs:71"]
    );
    assert_eq!(
        targets("lock:nightly-recount"),
        ["UPDATE counters at crates/nightly/src/main.rs:89"]
    );
    // a script built in place from a `.lua` file of the crate (`include_str!`)
    assert_eq!(
        releases(&doc, "lock:nightly-publish", f),
        [(
            "crates/nightly/src/main.rs:60".to_string(),
            "publish".to_string(),
            "Lua script".to_string(),
            true
        )]
    );
}

/// Where `check` reports `unconditional-release`, the audit lists that release under the
/// lock, not owner-checked: a plain `DEL` after a spin lock, and one in a guard's `Drop`.
#[test]
fn the_audit_shows_each_release_check_reports_unconditional() {
    let mut seen = 0;
    for f in ["spin-and-helper-crate", "held-scripts"] {
        let path = format!("fixtures/audit/{f}");
        let o = locklint(
            &root(),
            &["check", &path, "--project-root", &path, "--format", "json"],
        );
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let doc = json(f);
        for finding in report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| x["rule"] == "unconditional-release")
        {
            seen += 1;
            let (file, line) = (&finding["path"], &finding["line"]);
            let listed = doc["locks"].as_array().unwrap().iter().any(|l| {
                l["releases"].as_array().unwrap().iter().any(|r| {
                    r["site"]["path"] == *file
                        && r["site"]["line"] == *line
                        && r["owner_checked"] == false
                })
            });
            assert!(listed, "{f}: no lock lists the release at {file}:{line}");
        }
    }
    assert_eq!(seen, 2, "one unconditional release in each fixture");
}

/// Next steps name the site, what to write there and the `locklint-runtime` type, never
/// just the rule; a correctness lock's unsafe writes are named by statement, table and site.
#[test]
fn next_steps_name_the_site_and_the_replacement() {
    let f = "next-steps";
    let doc = json(f);
    let steps = |name: &str| -> Vec<String> {
        lock(&doc, name)["next_steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                s.as_str()
                    .unwrap()
                    .replace(&format!("fixtures/audit/{f}/"), "")
            })
            .collect()
    };
    let period = steps("lock:period-close:{}");
    for (site, rule, command, runtime) in [
        (
            "crates/lockkit/src/lib.rs:33",
            "unconditional-release",
            "redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1])",
            "`Lease::release` of `RedisLocker`",
        ),
        (
            "crates/lockkit/src/lib.rs:28",
            "unconditional-renew",
            "redis.call('pexpire', KEYS[1], ARGV[2])",
            "`Lease::spawn_keep_alive`",
        ),
    ] {
        let step = period
            .iter()
            .find(|s| s.starts_with(&format!("{site} (`{rule}`): ")))
            .unwrap_or_else(|| panic!("no step at {site} in {period:?}"));
        assert!(step.contains(command), "{step}");
        assert!(step.contains(runtime), "{step}");
    }
    assert!(period.iter().any(|s| s
        .starts_with("crates/billing/src/lib.rs:15: fence `UPDATE periods`")
        && s.contains("`FencedWrite` in locklint-runtime")));
    assert!(period.iter().any(|s| s
        .starts_with("crates/billing/src/lib.rs:20: make `INSERT ledger_entries` idempotent")
        && s.contains("ON CONFLICT DO NOTHING")));
    assert_eq!(
        lock(&doc, "lock:period-close:{}")["acquires"][0]["ttl"],
        "60000 ms"
    );

    // one step per rule, naming both of its sites
    let purge = steps("advisory(hashtext('purge'))");
    let pool: Vec<&String> = purge
        .iter()
        .filter(|s| s.contains("advisory-lock-on-pool"))
        .collect();
    assert_eq!(pool.len(), 1, "{purge:?}");
    assert!(pool[0].starts_with(
        "crates/maintenance/src/lib.rs:6, crates/maintenance/src/lib.rs:15 (`advisory-lock-on-pool`): "
    ));
    assert!(pool[0].contains("`AdvisoryLocker::try_lock`"));

    for fixture in FIXTURES {
        for l in json(fixture)["locks"].as_array().unwrap() {
            for s in l["next_steps"].as_array().unwrap() {
                let s = s.as_str().unwrap();
                assert!(
                    !s.starts_with("fix `"),
                    "{fixture}: a step that restates the rule: {s}"
                );
            }
        }
    }
}

/// One lock, one entry: a caller's literal argument for the hole of a template built in the
/// helper (`finalize_invoice(.., 42)` for `lock:invoice:{}`) is an instance of that lock; a
/// shared wrapper whose callers choose whole keys gives one entry per caller's lock, each
/// with its caller, its TTL and the writes its caller makes.
#[test]
fn one_entry_per_lock_through_helpers_and_wrappers() {
    let f = "one-entry-per-lock";
    let doc = json(f);
    let sites = |v: &serde_json::Value| -> Vec<String> {
        v.as_array().unwrap().iter().map(|s| at(s, f)).collect()
    };
    for (name, ttl, callers, write) in [
        (
            "lock:invoice:{}",
            "30 s",
            &[
                "crates/admin/src/lib.rs:9",
                "crates/admin/src/lib.rs:17",
                "crates/invoices/src/lib.rs:13",
            ][..],
            "crates/invoices/src/lib.rs:16",
        ),
        (
            "lock:catalog-sync",
            "300 s",
            &["crates/jobs/src/lib.rs:11"][..],
            "crates/jobs/src/lib.rs:14",
        ),
        (
            "lock:export:{}",
            "600 s",
            &["crates/jobs/src/lib.rs:28"][..],
            "crates/jobs/src/lib.rs:31",
        ),
    ] {
        let l = lock(&doc, name);
        let acquires = l["acquires"].as_array().unwrap();
        assert_eq!(acquires.len(), 1, "{name}");
        assert_eq!(
            at(&acquires[0]["site"], f),
            "crates/redis_interface/src/lib.rs:15"
        );
        assert_eq!(acquires[0]["ttl"], ttl, "{name}");
        assert_eq!(sites(&acquires[0]["called_from"]), callers, "{name}");
        assert_eq!(
            sites(&serde_json::Value::Array(
                l["releases"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r["site"].clone())
                    .collect()
            )),
            ["crates/redis_interface/src/lib.rs:32"],
            "{name}"
        );
        let writes: Vec<String> = l["protects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| at(&w["site"], f))
            .collect();
        assert_eq!(writes, [write], "{name}");
    }
}

/// Facts go to the lock they are about: cache, rate-limit and idempotency keys written while
/// a lock is held are not writes it protects; a fence counter fences the lock whose window it
/// is minted in (the inner one when two are held), not the lock taken before or around it;
/// a finding at one caller's separate `EXPIRE` is not listed under another lock that shares
/// the helper's acquire.
#[test]
fn facts_are_attached_to_their_own_lock() {
    let f = "facts-per-lock";
    let doc = json(f);
    let sites = |l: &serde_json::Value, field: &str| -> Vec<String> {
        l.pointer(field)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|x| at(x.get("site").unwrap_or(x), f))
            .collect()
    };
    let export = lock(&doc, "lock:export:{}");
    assert_eq!(sites(export, "/protects"), ["crates/exports/src/lib.rs:25"]);

    for (name, minted) in [
        ("lock:invoice:{}", &["crates/invoices/src/lib.rs:17"][..]),
        ("lock:receipt:{}", &[][..]),
        (
            "lock:ledger-snapshot",
            &["crates/invoices/src/lib.rs:46"][..],
        ),
        ("lock:ledger", &[][..]),
    ] {
        assert_eq!(sites(lock(&doc, name), "/fencing/minted"), minted, "{name}");
    }
    assert_eq!(
        sites(lock(&doc, "lock:receipt:{}"), "/protects"),
        ["crates/invoices/src/lib.rs:29"]
    );

    for (name, line) in [("lock:digest", 9), ("lock:rollup", 18)] {
        let findings: Vec<(String, String)> = lock(&doc, name)["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| (x["rule"].as_str().unwrap().to_string(), at(&x["site"], f)))
            .collect();
        assert_eq!(
            findings,
            [(
                "separate-expire".to_string(),
                format!("crates/digests/src/lib.rs:{line}")
            )],
            "{name}"
        );
    }
}

/// The default table fits a 100-column terminal on every fixture (cells wrap, the acquire
/// site, token, checked and purpose move to each lock's details); `--wide` keeps every column
/// on one line per lock.
#[test]
fn table_fits_100_columns_and_wide_has_every_column() {
    for f in FIXTURES {
        let table = audit(f, "table");
        for line in table.lines() {
            assert!(
                line.chars().count() <= 100,
                "{f}: {} columns: {line}",
                line.chars().count()
            );
        }
        let doc = json(f);
        for l in doc["locks"].as_array().unwrap() {
            let name = l["name"].as_str().unwrap();
            assert!(
                table.contains(&format!("{name} (")),
                "{f}: `{name}` has its details"
            );
        }
        let path = format!("fixtures/audit/{f}");
        let o = locklint(
            &root(),
            &["audit", &path, "--project-root", &path, "--wide"],
        );
        assert_eq!(o.status.code(), Some(0));
        let wide = String::from_utf8(o.stdout).unwrap();
        let header = wide.lines().next().unwrap();
        for h in [
            "LOCK",
            "MECHANISM",
            "ACQUIRED AT",
            "TTL",
            "TOKEN",
            "CHECKED",
            "RELEASE",
            "FENCED",
            "PURPOSE",
            "VERDICT",
        ] {
            assert!(header.contains(h), "{f}: `{h}` in {header}");
        }
        let rows = doc["locks"].as_array().unwrap().len();
        for l in doc["locks"].as_array().unwrap() {
            let name = l["name"].as_str().unwrap();
            assert!(
                wide.lines()
                    .skip(1)
                    .take(rows)
                    .any(|r| r.starts_with(&format!("{name} "))),
                "{f}: `{name}` is one row of the wide table"
            );
        }
    }
}

/// Writes that are not SQL count: an object-store put, stream entries added and deleted, an
/// HTTP `POST` and a Kafka message under a lock are external effects, listed as not fenceable
/// unless the target checks a token; reading (an S3 `get_object`, `XRANGE`, an HTTP `GET`) is
/// not an effect.
#[test]
fn external_effects_are_writes_that_cannot_be_fenced() {
    let f = "external-effects";
    let doc = json(f);
    for (name, effects) in [
        (
            "lock:snapshot:{}",
            &[("object store put_object", "crates/snapshots/src/lib.rs:37")][..],
        ),
        (
            "lock:compactor",
            &[
                ("Redis stream xadd", "crates/streams/src/lib.rs:30"),
                ("Redis stream xdel", "crates/streams/src/lib.rs:32"),
            ][..],
        ),
        (
            "advisory(hashtext('announce'))",
            &[
                ("HTTP post", "crates/notify/src/lib.rs:28"),
                ("Kafka send", "crates/notify/src/lib.rs:34"),
            ][..],
        ),
    ] {
        let l = lock(&doc, name);
        let got: Vec<(String, String)> = l["protects"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["external"] == true)
            .map(|w| (w["target"].as_str().unwrap().to_string(), at(&w["site"], f)))
            .collect();
        let want: Vec<(String, String)> = effects
            .iter()
            .map(|(t, s)| (t.to_string(), s.to_string()))
            .collect();
        assert_eq!(got, want, "{name}");
        assert_eq!(l["purpose"]["value"], "correctness", "{name}");
        let steps = l["next_steps"].as_array().unwrap();
        for (_, site) in effects {
            assert!(
                steps.iter().any(|s| {
                    let s = s.as_str().unwrap();
                    s.contains(site) && s.contains("not fenceable unless the target checks a token")
                }),
                "{name}: no step for {site}: {steps:?}"
            );
        }
    }
    // the database write in the lock's own transaction is not external, and is safe
    let announce = lock(&doc, "advisory(hashtext('announce'))");
    let update = announce["protects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["target"] == "UPDATE invoices")
        .unwrap();
    assert_eq!(update["external"], false);
    assert_eq!(update["same_session"], true);
}

#[test]
fn broken_locks_carry_the_findings_of_their_path() {
    let doc = json("scheduler");
    let lock = &doc["locks"][0];
    let rules: Vec<&str> = lock["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert!(rules.contains(&"lock-table-no-owner-check"), "{rules:?}");
    assert_eq!(lock["renewed"], true);
    assert_eq!(lock["releases"][0]["owner_checked"], false);
}

#[test]
fn no_cache_session_or_rate_limit_key_is_a_lock() {
    for f in FIXTURES {
        let doc = json(f);
        for l in doc["locks"].as_array().unwrap() {
            let name = l["name"].as_str().unwrap();
            for word in ["cache", "session", "ratelimit", "profile", "total"] {
                assert!(!name.contains(word), "{f}: `{name}` is not a lock");
            }
        }
    }
    let table = audit("cache", "table");
    assert!(!table.contains("session:"), "{table}");
    assert!(!table.contains("ratelimit:"), "{table}");
    assert!(!table.contains("cache:user"), "{table}");
}

#[test]
fn declared_purpose_wins_over_inference() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("fixtures/audit/invoicing-unfenced");
    for sub in ["src", "migrations"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        for e in std::fs::read_dir(src.join(sub)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.path().join(sub).join(e.file_name())).unwrap();
        }
    }
    std::fs::write(
        dir.path().join("locklint.toml"),
        "[locks.\"lock:invoice:{id}\"]\npurpose = \"efficiency\"\n",
    )
    .unwrap();
    let o = locklint(dir.path(), &["audit", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let lock = &doc["locks"][0];
    assert_eq!(lock["purpose"]["value"], "efficiency");
    assert_eq!(lock["purpose"]["source"], "config");
    assert_eq!(lock["verdict"], "fine-for-efficiency");
    // paths are relative to the current directory
    assert_eq!(lock["acquires"][0]["site"]["path"], "src/billing.rs");
}

#[test]
fn usage_errors_exit_2() {
    let o = locklint(&root(), &["audit", "--format", "yaml"]);
    assert_eq!(o.status.code(), Some(2));
    let o = locklint(&root(), &["audit", "fixtures/audit/does-not-exist"]);
    assert_eq!(o.status.code(), Some(2));
}

fn html_page() -> String {
    let mut page = String::new();
    for f in FIXTURES {
        page = audit(f, "html");
        assert!(page.starts_with("<!DOCTYPE html>"));
        for (fixture, expected) in EXPECTED {
            if fixture == f {
                for (name, _, verdict) in *expected {
                    let escaped = name.replace('\'', "&#39;");
                    assert!(page.contains(&escaped), "{f}: `{name}` in the page");
                    assert!(page.contains(verdict), "{f}: `{verdict}` in the page");
                }
            }
        }
    }
    page
}

#[test]
fn html_is_self_contained_and_lists_every_lock() {
    let page = html_page();
    assert!(!page.contains("http://"), "no network references");
    assert!(!page.contains("https://"), "no network references");
    for attr in ["src=", "href="] {
        for (i, _) in page.match_indices(attr) {
            let value = &page[i + attr.len()..];
            assert!(
                value.starts_with("\"#"),
                "only in-page links: {}",
                &value[..value.len().min(60)]
            );
        }
    }
    assert!(page.contains("<style>") && page.contains("<script>"));
    assert!(page.contains("id=\"by-verdict\""), "the summary chart");
}

/// The whole fixture tree in one page, loaded in headless Chromium (Debian package
/// `chromium`, installed by `scripts/ensure-services.sh`).
#[test]
fn html_renders_in_a_browser() {
    let chromium = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| {
            Command::new("which")
                .arg(c)
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .unwrap_or_else(|| {
            panic!(
                "chromium is not installed: install the Debian package `chromium` \
                 (apt-get install chromium; scripts/ensure-services.sh does it as root)"
            )
        });
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("audit.html");
    let o = locklint(
        &root(),
        &[
            "audit",
            "fixtures/audit",
            "--project-root",
            "fixtures/audit",
            "--format",
            "html",
            "--output-file",
            page.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0));
    let url = format!("file://{}", page.display());
    let base = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
    ];
    let dom = Command::new(chromium)
        .args(base)
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    assert!(
        dom.contains("data-sortable=\"ready\""),
        "the page script ran"
    );
    for (_, expected) in EXPECTED {
        for (name, _, _) in *expected {
            let escaped = name.replace('\'', "&#39;");
            assert!(
                dom.contains(&format!("<tr data-lock=\"{escaped}\""))
                    || dom.contains(&format!("<tr data-lock=\"{name}\"")),
                "`{name}` is a row of the rendered table"
            );
        }
    }
    let shot = dir.path().join("audit.png");
    let s = Command::new(chromium)
        .args(base)
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1280,900")
        .arg(&url)
        .output()
        .expect("run chromium");
    let png = std::fs::read(&shot).unwrap_or_else(|e| {
        panic!(
            "no screenshot ({e}): {}",
            String::from_utf8_lossy(&s.stderr)
        )
    });
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    assert!(png.len() > 10_000, "the screenshot shows a page");
}

#[test]
fn audit_survives_pathological_input() {
    let dir = tempfile::tempdir().unwrap();
    let deep = format!("fn f() {{ let x = 1{}; }}\n", " + 1".repeat(60_000));
    std::fs::write(dir.path().join("deep.rs"), deep).unwrap();
    std::fs::write(dir.path().join("latin1.rs"), b"fn caf\xe9() {}\n").unwrap();
    let o = locklint(dir.path(), &["audit", ".", "--format", "json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["locks"].as_array().unwrap().len(), 0);
}
