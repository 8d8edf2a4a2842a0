//! Next steps a reader can act on: each names the site, what to write there (the rule's own
//! concrete help: the command, the script, the SQL condition) and the `locklint-runtime` type
//! that does it for them; for the writes of a correctness lock, the statement and table to
//! fence or make idempotent.

use super::{Finding, Lock, Mechanism, Write};

/// The `locklint-runtime` type that replaces what a rule reports (runtime/README.md,
/// "Analyzer rules replaced").
fn runtime_replacement(rule: &str) -> Option<&'static str> {
    Some(match rule {
        "get-then-set" | "setnx-without-expiry" | "separate-expire" | "constant-lock-value" => {
            "`RedisLocker::try_acquire` (a unique token and the TTL in one `SET NX PX`)"
        }
        "lock-result-ignored" => {
            "`RedisLocker::try_acquire`, which returns `Option<Lease>`, or `RedisLocker::with_lock`"
        }
        "unconditional-release" | "lua-release-no-compare" => {
            "`Lease::release` of `RedisLocker` (compare-and-delete)"
        }
        "unconditional-renew" | "lua-renew-no-compare" => {
            "`Lease::renew` or `Lease::spawn_keep_alive` of `RedisLocker` (compare-and-`PEXPIRE`)"
        }
        "advisory-lock-unbalanced" | "advisory-lock-on-pool" => {
            "`AdvisoryLocker::try_lock` (the lock on a dedicated connection, `unlock()` on the guard)"
        }
        "lock-table-steals-live-lock" | "lock-table-no-owner-check" | "lock-table-client-clock" => {
            "`TableLock::try_acquire` (database clock, owner-checked renew and release)"
        }
        _ => return None,
    })
}

/// The steps for the findings on the lock's path, one per rule: where (every site the rule
/// reports), what to write there, and the runtime type.
pub fn for_findings(findings: &[&Finding]) -> Vec<String> {
    let mut rules: Vec<&str> = Vec::new();
    for f in findings {
        if !rules.contains(&f.rule) {
            rules.push(f.rule);
        }
    }
    rules
        .into_iter()
        .map(|rule| {
            let of_rule: Vec<&&Finding> = findings.iter().filter(|f| f.rule == rule).collect();
            let mut sites: Vec<String> = Vec::new();
            for f in &of_rule {
                let s = f.site.short();
                if !sites.contains(&s) {
                    sites.push(s);
                }
            }
            let mut s = format!(
                "{} (`{rule}`): {}",
                sites.join(", "),
                of_rule[0].help.trim_end_matches('.')
            );
            if let Some(r) = runtime_replacement(rule) {
                s.push_str(&format!("; or use {r} from locklint-runtime"));
            }
            s
        })
        .collect()
}

/// The step for one write of a correctness lock that is not safe without it.
pub fn for_write(w: &Write, minted: bool) -> String {
    let at = w.site.short();
    let target = &w.target;
    if w.external {
        format!(
            "{at}: `{target}` is an external effect, not fenceable unless the target checks a token: pass the lease's fencing token and have the service reject older ones, or make the effect idempotent with a key the target deduplicates (a deterministic object name, a message key, an idempotency key header)"
        )
    } else if let Some(key) = target.strip_prefix("Redis ") {
        format!(
            "{at}: `{key}` runs under the lock and cannot check a fencing token; make it safe to repeat (a value derived from the input, not read-modify-write) or move it after the lock's work is committed"
        )
    } else if target.starts_with("INSERT") {
        format!(
            "{at}: make `{target}` idempotent: a unique key on what identifies the row with `ON CONFLICT DO NOTHING` (or `claim_once` from locklint-runtime)"
        )
    } else if w.after_read {
        format!(
            "{at}: `{target}` may depend on a read made under the lock: claim the row with the fencing token at the read and require it at the write (`UPDATE .. SET fence = $n WHERE .. AND fence <= $n RETURNING ..` at the read, `AND fence = $n` at the write; `FencedClaim` in locklint-runtime); a fence compared only at the write can still lose an update"
        )
    } else {
        let compare = if target.starts_with("UPDATE") {
            "`AND fence < $n` in its `WHERE` and `fence = $n` in its `SET`"
        } else {
            "`AND fence < $n` in its `WHERE` (the rows keep the token of their last writer)"
        };
        let token = if minted {
            "compare the minted token"
        } else {
            "mint a token at acquire (`Lease::fence()` of locklint-runtime's lockers) and store it with the rows"
        };
        format!("{at}: fence `{target}`: {token}, {compare} (`FencedWrite` in locklint-runtime)")
    }
}

/// The step for a correctness lock that expires and mints no fencing token.
pub fn mint_token(lock: &Lock) -> String {
    let at = lock
        .first_site()
        .map(|s| format!("{}: ", s.short()))
        .unwrap_or_default();
    format!(
        "{at}mint a fencing token when acquiring (`INCR` of a counter key in the acquire's script, or `Lease::fence()` of locklint-runtime's `RedisLocker`) and compare it in every write the lock protects"
    )
}

/// The step that replaces an expiring lock with one the writes cannot outlive.
pub fn same_transaction(lock: &Lock) -> Option<String> {
    (lock.mechanism.expires() && !matches!(lock.mechanism, Mechanism::LockTable)).then(|| {
        "or take `pg_advisory_xact_lock` in the transaction that runs these writes: it cannot expire under them (`AdvisoryLocker` in locklint-runtime for a session-long lock)".to_string()
    })
}
