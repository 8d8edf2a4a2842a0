//! The lock vocabulary: the words that say a key, a function, a table or a script is about
//! locks, and what it does to one. Front-ends, project facts, rules and the audit all read these
//! lists; none keeps its own.

/// Words in a key, a table name or the names a key passed through that mark a lock.
const LOCK_KEY_WORDS: &[&str] = &[
    "lock",
    "locks",
    "locking",
    "mutex",
    "mutexes",
    "lease",
    "leases",
    "leader",
    "leaders",
    "leadership",
    "semaphore",
    "semaphores",
    "latch",
    "latches",
];

/// Words ending in `lock` that are not about locks.
const NOT_LOCKS: &[&str] = &[
    "block", "clock", "unblock", "unlock", "deadlock", "gridlock", "padlock",
];

/// Function names that mark a lock operation: the function's key parameter is a lock.
const LOCK_FN_WORDS: &[&str] = &[
    "lock",
    "unlock",
    "acquire",
    "release",
    "renew",
    "extend",
    "heartbeat",
    "relock",
];

/// Words in a script's name that make it a lock script on their own.
const LOCK_SCRIPT_WORDS: &[&str] = &[
    "lock", "locks", "unlock", "lease", "leases", "mutex", "redlock",
];

/// Words that name a lock operation, but also other things (`renew_session`,
/// `extend_cache_ttl`): in a script's name they count only when the rest of the name says
/// nothing else.
const LOCK_OP_WORDS: &[&str] = &["release", "renew", "extend"];

/// Words that say nothing about what a name is for.
const GENERIC_WORDS: &[&str] = &[
    "script",
    "lua",
    "cmd",
    "command",
    "sha",
    "src",
    "source",
    "text",
    "body",
    "atomic",
    "atomically",
    "safe",
    "safely",
    "try",
    "do",
    "run",
    "key",
    "token",
    "owner",
    "owned",
    "if",
    "by",
    "with",
    "checked",
    "compare",
    "and",
    "the",
    "async",
    "sync",
    "impl",
    "inner",
    "fn",
];

/// Words in a function's name that say it renews (extends the expiry of) what it holds.
const RENEW_WORDS: &[&str] = &[
    "renew",
    "extend",
    "heartbeat",
    "refresh",
    "keepalive",
    "prolong",
    "touch",
];

/// Words in a function's name that say it releases what it holds.
const RELEASE_WORDS: &[&str] = &["release", "unlock"];

/// Words in a key that mark a fencing counter.
const FENCE_WORDS: &[&str] = &[
    "fence",
    "fencing",
    "fences",
    "counter",
    "epoch",
    "generation",
];

/// Words in a key that mark bookkeeping kept beside the work, not data the work produces: a
/// cache entry, a rate-limit counter, an idempotency or deduplication marker, a session.
const BOOKKEEPING_WORDS: &[&str] = &[
    "cache",
    "caches",
    "cached",
    "caching",
    "ratelimit",
    "ratelimits",
    "ratelimiter",
    "limiter",
    "throttle",
    "throttling",
    "idempotency",
    "idempotent",
    "idem",
    "dedup",
    "dedupe",
    "deduplication",
    "nonce",
    "nonces",
    "session",
    "sessions",
];

/// Split identifiers and key text into lowercase words (`jobLock:{}` → `job`, `lock`).
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if !c.is_ascii_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        cur.push(c.to_ascii_lowercase());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn any_word(name: &str, list: &[&str]) -> bool {
    words(name).iter().any(|w| list.contains(&w.as_str()))
}

/// A compound ending in `lock` (`joblock`, `redlock`) that is not one of the look-alikes.
fn ends_in_lock(w: &str) -> bool {
    w.len() > 4 && w.ends_with("lock") && !NOT_LOCKS.contains(&w)
}

/// Whether one word (as [`words`] splits them) marks a lock key.
pub fn is_lock_word(w: &str) -> bool {
    LOCK_KEY_WORDS.contains(&w) || ends_in_lock(w)
}

/// Whether a key text or name (`lock:invoice:{}`, `app:jobLock`, `job_leases`) says it is a lock.
pub fn names_lock(text: &str) -> bool {
    words(text).iter().any(|w| is_lock_word(w))
}

/// Whether a key says it is a lock: a lock word in its literal text or in one of the names it
/// came through (`lock_key`, `self.job_lock`), or one of the `extra` configured words.
pub fn key_names_lock(key: &crate::KeyRef, extra: &[String]) -> bool {
    let is = |w: &String| is_lock_word(w) || extra.iter().any(|x| x.eq_ignore_ascii_case(w));
    let lit = key.parts.iter().any(|p| match p {
        crate::Part::Lit(s) => words(s).iter().any(is),
        _ => false,
    });
    lit || key.names.iter().any(|n| words(n).iter().any(is))
}

/// Whether a key says it is a fencing counter (`fence:{}`, `lock:{job}:epoch`), in its literal
/// text or in a name it came through (`fence_key`).
pub fn key_names_fence(key: &crate::KeyRef) -> bool {
    let lit = key.parts.iter().any(|p| match p {
        crate::Part::Lit(s) => has_fence_word(&words(s)),
        _ => false,
    });
    lit || key.names.iter().any(|n| has_fence_word(&words(n)))
}

/// Whether a key says it is bookkeeping rather than a lock (`cache_key`, `rate_limit:{ip}`,
/// `dedup:{id}`, see [`has_bookkeeping_word`]), in its literal text or in a name it came
/// through: such a key is a lock only where a lock word says so.
pub fn key_names_bookkeeping(key: &crate::KeyRef) -> bool {
    let lit = key.parts.iter().any(|p| match p {
        crate::Part::Lit(s) => has_bookkeeping_word(&words(s)),
        _ => false,
    });
    lit || key.names.iter().any(|n| has_bookkeeping_word(&words(n)))
}

/// Whether a function's name says it is a lock operation (`try_lock`, `releaseLock`).
pub fn is_lock_fn_name(name: &str) -> bool {
    any_word(name, LOCK_FN_WORDS)
}

/// Whether a function's name says it renews what it holds (`renew`, `extend_lease`,
/// `heartbeat`, `keepalive`).
pub fn names_renewal(name: &str) -> bool {
    any_word(name, RENEW_WORDS)
}

/// Whether a function's name says it releases what it holds (`release`, `unlock_all`).
pub fn names_release(name: &str) -> bool {
    any_word(name, RELEASE_WORDS)
}

/// Whether any of these words marks a fencing counter (`fence`, `epoch`, `generation`).
pub fn has_fence_word<S: AsRef<str>>(ws: &[S]) -> bool {
    ws.iter().any(|w| FENCE_WORDS.contains(&w.as_ref()))
}

/// Whether these words mark a cache, rate-limit, idempotency, deduplication or session key
/// (`cache:report:{}`, `rate_limit:{}`, `idempotency:{}`): bookkeeping, never data a lock
/// protects.
pub fn has_bookkeeping_word<S: AsRef<str>>(ws: &[S]) -> bool {
    ws.iter().any(|w| BOOKKEEPING_WORDS.contains(&w.as_ref()))
        || ws
            .windows(2)
            .any(|p| p[0].as_ref() == "rate" && p[1].as_ref() == "limit")
}

/// Words of a column name that say on their own that it names a row's holder (`owner_id`,
/// `lease_owner`, `lock_holder`).
const HOLDER_COLUMN_WORDS: &[&str] = &["owner", "holder", "locker", "leaseholder"];

/// Verbs whose `<verb>_by` column names who holds the row (`locked_by`, `claimed_by`);
/// `created_by` and `updated_by` are audit columns and say nothing of a lock.
const HOLD_VERBS: &[&str] = &[
    "lock", "locked", "claim", "claimed", "lease", "leased", "hold", "held", "reserved", "reserve",
    "acquired", "taken", "picked",
];

/// Words of a column name for a process that may hold a row (`worker_id`, `runner`): a holder
/// only where a lease is shown otherwise (a claim conditioned on time).
const WORKER_COLUMN_WORDS: &[&str] = &[
    "worker",
    "runner",
    "consumer",
    "node",
    "instance",
    "host",
    "agent",
    "pod",
    "process",
    "executor",
    "leader",
    "processor",
];

/// Words of a time column that tie it to a lease (`locked_at`, `lease_expires_at`,
/// `hold_until`).
const LEASE_TIME_WORDS: &[&str] = &["lock", "locked", "lease", "leased", "hold", "held"];

/// Words of a time column that tie it to a lease only with an end (`claimed_until`,
/// `reserved_until`): `claimed_at` says when a ticket was taken, not until when.
const CLAIM_TIME_WORDS: &[&str] = &["claim", "claimed", "reserve", "reserved"];

/// Words that make a column the end of a period (`_until`, `expires`).
const END_WORDS: &[&str] = &[
    "until",
    "till",
    "expires",
    "expiry",
    "expiration",
    "expire",
    "deadline",
    "timeout",
];

/// Words that make a column a point in time (`_at`, `_until`, `expires`).
const TIME_WORDS: &[&str] = &[
    "at",
    "until",
    "till",
    "expires",
    "expiry",
    "expiration",
    "expire",
    "deadline",
    "timeout",
    "time",
    "ts",
    "timestamp",
];

/// Whether a column name says it holds the holder of a lock or lease on the row: `owner`,
/// `owner_id`, `lease_owner`, `lock_holder`, `locked_by`, `claimed_by`, `lock_token`. Audit
/// columns (`created_by`, `updated_by`) do not.
pub fn names_holder_column(col: &str) -> bool {
    let w = words(col);
    w.iter().any(|x| HOLDER_COLUMN_WORDS.contains(&x.as_str()))
        || w.windows(2)
            .any(|p| p[1] == "by" && HOLD_VERBS.contains(&p[0].as_str()))
        || (w.last().is_some_and(|x| x == "token")
            && w.iter()
                .any(|x| LEASE_TIME_WORDS.contains(&x.as_str()) || x == "claim"))
}

/// Whether a column name says it holds a point in time (`created_at`, `acquired_at`,
/// `valid_until`).
pub fn names_time_column(col: &str) -> bool {
    words(col)
        .iter()
        .any(|x| TIME_WORDS.contains(&x.as_str()) || END_WORDS.contains(&x.as_str()))
}

/// Whether a column name says it holds a process that may work on the row (`worker_id`,
/// `runner`, `node`): a holder only where the statements show a lease.
pub fn names_worker_column(col: &str) -> bool {
    words(col)
        .iter()
        .any(|x| WORKER_COLUMN_WORDS.contains(&x.as_str()))
}

/// States of a work row that say a worker holds it (`running`, `in_progress`, `claimed`):
/// written by a claim and required by a claim that takes back a row whose time has passed.
const HELD_STATE_WORDS: &[&str] = &[
    "running",
    "processing",
    "progress",
    "claimed",
    "locked",
    "leased",
    "working",
    "started",
    "taken",
    "busy",
    "reserved",
    "picked",
    "acquired",
    "executing",
    "inprogress",
];

/// Whether a state value says a worker holds the row (`running`, `in_progress`, `Claimed`);
/// `pending`, `queued`, `done` or `active` do not.
pub fn names_held_state(value: &str) -> bool {
    words(value)
        .iter()
        .any(|x| HELD_STATE_WORDS.contains(&x.as_str()))
}

/// Whether a column name says it holds the time of a lease: when it was taken or when it
/// ends (`locked_at`, `locked_until`, `lease_expires_at`, `hold_until`, `claimed_at`,
/// `heartbeat_at`, `last_heartbeat`, `claimed_until`). `created_at`, `updated_at`,
/// `claimed_at` or a boolean `locked` do not.
pub fn names_lease_time_column(col: &str) -> bool {
    let w = words(col);
    let any = |list: &[&str]| w.iter().any(|x| list.contains(&x.as_str()));
    w.iter().any(|x| x == "heartbeat" || x == "heartbeats")
        || (any(LEASE_TIME_WORDS) && any(TIME_WORDS))
        || (any(CLAIM_TIME_WORDS) && any(END_WORDS))
}

/// Whether a name (`RELEASE_LOCK`, `unlock.lua`, `renew`, `RELEASE_SCRIPT`) marks a lock
/// script. `renew_session` or `extend_cache_ttl` do not.
/// Names of a variable or field that holds the lock holder's token, as fixes look for them.
pub const TOKEN_NAMES: &[&str] = &[
    "token",
    "lock_token",
    "owner_token",
    "lease_token",
    "holder_token",
    "owner",
    "holder",
    "lock_value",
];

/// Words of a boolean that switches a deliberate override on (`force`, `args.force_unlock`,
/// `steal_lock`, `override_holder`, `takeover`).
const OVERRIDE_WORDS: &[&str] = &[
    "force", "forced", "forcibly", "override", "steal", "takeover",
];

/// Whether a boolean's name says it switches on a deliberate override of a lock held by
/// someone else: one of its words is `force`, `override`, `steal`, `takeover`, or it says
/// `take over` / `break lock`.
pub fn is_override_switch(name: &str) -> bool {
    let w: Vec<String> = words(name).iter().map(|w| w.to_ascii_lowercase()).collect();
    let has = |a: &str, b: &str| w.windows(2).any(|p| p[0] == a && p[1] == b);
    w.iter().any(|x| OVERRIDE_WORDS.contains(&x.as_str()))
        || has("take", "over")
        || has("break", "lock")
}

/// Whether a variable or field name says it holds the holder's token.
pub fn is_token_name(name: &str) -> bool {
    TOKEN_NAMES.contains(&name) || name.ends_with("_token")
}

pub fn is_lock_script_name(name: &str) -> bool {
    let w = words(name);
    let strong = w
        .iter()
        .any(|w| LOCK_SCRIPT_WORDS.contains(&w.as_str()) || ends_in_lock(w));
    strong
        || (w.iter().any(|w| LOCK_OP_WORDS.contains(&w.as_str()))
            && w.iter().all(|w| {
                LOCK_OP_WORDS.contains(&w.as_str())
                    || GENERIC_WORDS.contains(&w.as_str())
                    || w.chars().all(|c| c.is_ascii_digit())
            }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn override_switches_are_named_for_forcing_or_taking_over() {
        for name in [
            "force",
            "forced",
            "force_unlock",
            "forceRelease",
            "steal_lock",
            "override_holder",
            "takeover",
            "take_over",
            "break_lock",
        ] {
            assert!(is_override_switch(name), "{name}");
        }
        for name in [
            "enforce",
            "reinforce",
            "forecast",
            "overridden_at",
            "breaks",
            "take",
            "lock",
            "dry_run",
            "overtake",
        ] {
            assert!(!is_override_switch(name), "{name}");
        }
    }

    use super::*;

    #[test]
    fn holder_and_lease_columns() {
        for c in [
            "owner",
            "owner_id",
            "lease_owner",
            "lock_holder",
            "locked_by",
            "lock_by",
            "claimed_by",
            "leasedBy",
            "lock_token",
        ] {
            assert!(names_holder_column(c), "{c}");
        }
        for c in [
            "created_by",
            "updated_by",
            "sort_by",
            "token",
            "worker_id",
            "id",
        ] {
            assert!(!names_holder_column(c), "{c}");
        }
        assert!(names_worker_column("worker_id") && names_worker_column("runner"));
        assert!(!names_worker_column("workload") && !names_worker_column("created_by"));
        for c in [
            "locked_at",
            "lock_at",
            "locked_until",
            "lock_expires_at",
            "lease_until",
            "lease_expires_at",
            "hold_until",
            "claimed_until",
            "heartbeat_at",
            "last_heartbeat",
        ] {
            assert!(names_lease_time_column(c), "{c}");
        }
        for c in [
            "created_at",
            "updated_at",
            "claimed_at",
            "expires_at",
            "locked",
            "lock_version",
            "run_at",
            "timeout",
        ] {
            assert!(!names_lease_time_column(c), "{c}");
        }
    }

    #[test]
    fn bookkeeping_keys() {
        for k in [
            "cache:report:{}",
            "ratelimit:exports:{}",
            "rate_limit:{}",
            "api:rateLimit:{}",
            "idempotency:export:{}",
            "dedup:{}",
            "session:{}",
        ] {
            assert!(has_bookkeeping_word(&words(k)), "{k}");
        }
        for k in [
            "report:{}",
            "credit:limit:{}",
            "invoice:{}:rate",
            "lock:export:{}",
        ] {
            assert!(!has_bookkeeping_word(&words(k)), "{k}");
        }
    }

    #[test]
    fn bookkeeping_keys_by_text_or_name() {
        let mut by_name = crate::KeyRef::hole(Some("cache_key".into()));
        by_name.add_names(["cache_key".to_string()]);
        assert!(key_names_bookkeeping(&by_name));
        assert!(key_names_bookkeeping(&crate::KeyRef::lit("dedup:{}")));
        let mut lock = crate::KeyRef::hole(Some("lock_key".into()));
        lock.add_names(["lock_key".to_string()]);
        assert!(!key_names_bookkeeping(&lock));
        assert!(!key_names_bookkeeping(&crate::KeyRef::lit("refund:{}")));
    }

    #[test]
    fn splits_identifiers_and_keys() {
        assert_eq!(words("jobLock:{}"), ["job", "lock"]);
        assert_eq!(words("RELEASE_LOCK"), ["release", "lock"]);
        assert_eq!(words("lock:v2:x"), ["lock", "v2", "x"]);
    }

    #[test]
    fn lock_keys_and_tables() {
        for k in [
            "lock:invoice:{}",
            "app:jobLock",
            "redlock:x",
            "leader-election",
            "job_leases",
            "mutexes",
        ] {
            assert!(names_lock(k), "{k}");
        }
        for k in [
            "block:42",
            "clock_skew",
            "leaderboard:weekly",
            "release-notes",
            "user:{}:profile",
            "gridlock_stats",
            "padlock",
        ] {
            assert!(!names_lock(k), "{k}");
        }
    }

    #[test]
    fn lock_function_names() {
        assert!(is_lock_fn_name("try_lock"));
        assert!(is_lock_fn_name("releaseLock"));
        assert!(is_lock_fn_name("heartbeat"));
        assert!(!is_lock_fn_name("get_profile"));
        assert!(!is_lock_fn_name("blocking_get"));
    }

    #[test]
    fn renewal_and_release_names() {
        for n in [
            "renew",
            "extend_lease",
            "heartbeat",
            "keepalive",
            "prolong_lock",
            "touch",
        ] {
            assert!(names_renewal(n), "{n}");
        }
        for n in ["release", "get", "renewal_date_of"] {
            assert!(!names_renewal(n), "{n}");
        }
        assert!(names_release("unlock_all"));
        assert!(names_release("releaseLock"));
        assert!(!names_release("drop_table"));
    }

    #[test]
    fn fence_words() {
        assert!(has_fence_word(&words("fence:job:{}")));
        assert!(has_fence_word(&words("lockEpoch")));
        assert!(!has_fence_word(&words("lock:job:{}")));
    }

    #[test]
    fn lock_script_names() {
        for n in [
            "RELEASE",
            "unlock",
            "renew_lease",
            "EXTEND_SCRIPT",
            "redlock_release",
            "mutex",
            "renew",
            "release_if_owner",
            "jobLock",
        ] {
            assert!(is_lock_script_name(n), "{n}");
        }
        for n in [
            "INVALIDATE",
            "clock",
            "block_users",
            "script",
            "purge_cache",
            "renew_session",
            "extend_cache_ttl",
            "release_reservation",
        ] {
            assert!(!is_lock_script_name(n), "{n}");
        }
    }
}
