//! Lock tables by what the project's statements do with them, whatever the columns are called.
//!
//! A **claim** takes a row for a holder on a time condition: `UPDATE jobs SET locked_by = $1,
//! locked_until = now() + interval '30 seconds' WHERE id = $2 AND (locked_until IS NULL OR
//! locked_until < now())`, or an upsert whose `DO UPDATE ... WHERE` compares the lease time. Its
//! table holds leases: the column it writes the holder into is the owner (named like a holder,
//! like a worker, or compared with an incoming value by another statement on the table: an
//! owner written and later compared), the column it compares with a time is the lease time
//! (compared with the clock or a parameter, and written by the claim or named like a lease
//! time: a schedule such as `run_at <= now()` that the claim leaves alone is not one). Cache, session, rate-limit and idempotency tables are never lock tables.
//!
//! A lease **lapses** when a statement can give a taken row to another holder once its time has
//! passed: a claim's own time condition, or a reaper (`UPDATE jobs SET locked_by = NULL WHERE
//! locked_until < now()`).

use crate::schema::{ColumnNames, Schema};
use locklint_ir::sql::{Cmp, CmpOp, Conflict, Operand, Statement, StatementKind};
use locklint_ir::{vocabulary, FileIr};
use std::collections::{BTreeMap, BTreeSet};

/// The columns of a table's lease, as its claim shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub owner: String,
    pub expiry: String,
}

/// Whether `v` holds no column of the statement's target table.
fn outside(st: &Statement, v: &Operand) -> bool {
    !v.columns.iter().any(|c| st.is_target(c))
}

/// A target column of `st` that its condition compares, in order (`<`, `<=`, `>`, `>=`), with
/// a time from outside the row (the clock, or a parameter), each with the outside operand.
pub fn time_comparisons(st: &Statement) -> impl Iterator<Item = (&str, &Operand)> {
    st.filter.iter().flat_map(move |f| {
        f.comparisons
            .iter()
            .filter(|c| !matches!(c.op, CmpOp::Eq | CmpOp::NotEq))
            .flat_map(move |c| [(&c.left, &c.right), (&c.right, &c.left)])
            .filter_map(move |(a, b)| {
                let col = a.bare.as_ref().filter(|x| st.is_target(x))?;
                (outside(st, b) && (b.clock || b.param)).then_some((col.name.as_str(), b))
            })
    })
}

/// Whether a table's name says it is bookkeeping (a cache, sessions, rate limits, idempotency
/// keys), never a lock table.
pub fn bookkeeping_table(table: &str) -> bool {
    vocabulary::has_bookkeeping_word(&vocabulary::words(table))
}

/// The lease a statement claims or frees on a time condition, if it does: see the module
/// documentation. `compared`
/// holds the columns of its table that some statement compares with an incoming value.
fn claim(st: &Statement, names: &ColumnNames, compared: &BTreeSet<&str>) -> Option<Lease> {
    let claims = match st.kind {
        StatementKind::Update => true,
        StatementKind::Insert => st.upsert_span.is_some(),
        _ => false,
    };
    if !claims || bookkeeping_table(st.table.as_deref()?) {
        return None;
    }
    let assigned = |col: &str| st.assignments.iter().find(|a| a.column == col);
    // the lease time: named like one, or written by the claim itself (a schedule such as
    // `run_at <= now()` that the claim leaves alone is not a lease)
    let (expiry, _) = time_comparisons(st).find(|(col, _)| {
        names.is_expiry(col)
            || assigned(col)
                .is_some_and(|a| (a.value.clock || a.value.param) && outside(st, &a.value))
    })?;
    let rank = |col: &str| {
        if names.is_owner(col) {
            Some(0)
        } else if vocabulary::names_worker_column(col) {
            Some(1)
        } else if compared.contains(col) {
            Some(2)
        } else {
            None
        }
    };
    let owner = st
        .assignments
        .iter()
        .filter(|a| {
            // written with the claimant (a parameter, `EXCLUDED.owner`), or cleared by a reaper;
            // a state bound as a parameter (`.bind(JobStatus::Queued.to_string())`) is none
            a.column != expiry
                && !a.value.clock
                && !a.value.call
                && a.value.named_literal.is_none()
                && outside(st, &a.value)
        })
        .filter_map(|a| Some((rank(&a.column)?, a.column.as_str())))
        .min_by_key(|(r, _)| *r)?
        .1;
    Some(Lease {
        owner: owner.to_string(),
        expiry: expiry.to_string(),
    })
}

/// Per table, the columns some statement writes (`SET`, `INSERT` columns).
pub fn written_columns(files: &[FileIr]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for st in files.iter().flat_map(|f| &f.sql.statements) {
        if let (Some(table), true) = (&st.table, st.is_write()) {
            let cols = out.entry(table.clone()).or_default();
            cols.extend(st.written().map(str::to_string));
        }
    }
    out
}

/// Per table, the columns some write compares for equality with an incoming value, owned.
pub fn keyed_columns(files: &[FileIr]) -> BTreeMap<String, BTreeSet<String>> {
    compared_columns(files)
        .into_iter()
        .map(|(t, cols)| {
            (
                t.to_string(),
                cols.into_iter().map(str::to_string).collect(),
            )
        })
        .collect()
}

/// Whether a lock table's rows carry work beside the lock: the schema defines, or a statement
/// writes, a column that is none of its key, holder, lease time, fencing token or another
/// point in time (`payload`, `state`, `result` of a `jobs` table; `job_slots (name, taken_by,
/// valid_until)` carries none).
pub fn carries_work(
    schema: &Schema,
    table: &str,
    owner: Option<&str>,
    expiry: Option<&str>,
) -> bool {
    let names = &schema.names;
    let def = schema.table(table);
    let keys = |c: &str| {
        def.is_some_and(|t| t.unique.iter().flatten().any(|k| k == c))
            || schema.keyed.get(table).is_some_and(|k| k.contains(c))
    };
    def.map(|t| t.columns.as_slice())
        .unwrap_or_default()
        .iter()
        .chain(schema.written.get(table).into_iter().flatten())
        .any(|c| {
            Some(c.as_str()) != owner
                && Some(c.as_str()) != expiry
                && !keys(c)
                && !names.is_owner(c)
                && !names.is_expiry(c)
                && !names.fence.contains(c)
                && !vocabulary::names_time_column(c)
        })
}

/// Per table, the columns an upsert inserts from an incoming value and whose `DO UPDATE ..
/// WHERE` requires the stored row to hold the same value (see `Schema::upsert_holders`).
pub fn upsert_holders(files: &[FileIr]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for st in files.iter().flat_map(|f| &f.sql.statements) {
        let (Some(table), Some(filter), Conflict::DoUpdate) = (&st.table, &st.filter, st.conflict)
        else {
            continue;
        };
        for c in filter.comparisons.iter().filter(|c| c.op == CmpOp::Eq) {
            for (a, b) in [(&c.left, &c.right), (&c.right, &c.left)] {
                let Some(col) = a.bare.as_ref().filter(|x| st.is_target(x)) else {
                    continue;
                };
                // compared with the proposed row's value (`EXCLUDED.worker_id`), or with a
                // parameter where a parameter is inserted into the column
                let inserted = st.values.iter().any(|v| {
                    v.column == col.name
                        && (b
                            .bare
                            .as_ref()
                            .is_some_and(|x| x.incoming && x.name == col.name)
                            || (b.bare_param && v.value.bare_param))
                });
                if inserted {
                    out.entry(table.clone())
                        .or_default()
                        .insert(col.name.clone());
                }
            }
        }
    }
    out
}

/// Per table, the columns some write compares for equality with an incoming value
/// (`WHERE id = $1 AND locked_by = $2`).
fn compared_columns(files: &[FileIr]) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut out: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for st in files.iter().flat_map(|f| &f.sql.statements) {
        let (Some(table), Some(filter), true) = (&st.table, &st.filter, st.is_write()) else {
            continue;
        };
        for c in filter.comparisons.iter().filter(|c| c.op == CmpOp::Eq) {
            for (a, b) in [(&c.left, &c.right), (&c.right, &c.left)] {
                if let Some(col) = a.bare.as_ref().filter(|x| st.is_target(x)) {
                    if outside(st, b) && b.param && b.named_literal.is_none() {
                        out.entry(table).or_default().insert(col.name.as_str());
                    }
                }
            }
        }
    }
    out
}

/// The leases the project's claims show, per table (the first claim of a table in the
/// project's file order).
pub fn leases(files: &[FileIr], names: &ColumnNames) -> BTreeMap<String, Lease> {
    let compared = compared_columns(files);
    let none = BTreeSet::new();
    let mut out = BTreeMap::new();
    for st in files.iter().flat_map(|f| &f.sql.statements) {
        let Some(table) = st.table.as_deref() else {
            continue;
        };
        if out.contains_key(table) {
            continue;
        }
        if let Some(l) = claim(st, names, compared.get(table).unwrap_or(&none)) {
            out.insert(table.to_string(), l);
        }
    }
    out
}

/// The lock tables whose leases lapse: some write takes or clears a row, or deletes it, on a
/// comparison of its lease time with a time (a claim's own time condition, a reaper).
pub fn lapsing(files: &[FileIr], schema: &Schema) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for st in files.iter().flat_map(|f| &f.sql.statements) {
        let Some(lt) = crate::sql::lock_table(st, schema) else {
            continue;
        };
        let Some(expiry) = lt.expiry.as_deref() else {
            continue;
        };
        let takes_or_frees = matches!(
            crate::sql::lock_write(st, &lt),
            crate::sql::LockWrite::Acquire | crate::sql::LockWrite::Release
        );
        if takes_or_frees && time_comparisons(st).any(|(c, _)| c == expiry) {
            out.insert(lt.table);
        }
    }
    out
}

/// Where a lock table's row is taken: a statement of one of the project's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimSite {
    /// The file's place in the project's files.
    pub file: usize,
    /// The statement's place in that file's statements.
    pub statement: usize,
}

/// Per lock table, the first statement of the project (in its file order) that takes a row:
/// the claim a completion in any file is measured against. A statement in a function
/// definition counts: the function is the claim the application calls.
pub fn claims(files: &[FileIr], schema: &Schema) -> BTreeMap<String, ClaimSite> {
    let mut out = BTreeMap::new();
    for (file, f) in files.iter().enumerate() {
        for (statement, st) in f.sql.statements.iter().enumerate() {
            let Some(lt) = crate::sql::lock_table(st, schema) else {
                continue;
            };
            if out.contains_key(&lt.table)
                || crate::sql::lock_write(st, &lt) != crate::sql::LockWrite::Acquire
            {
                continue;
            }
            out.insert(lt.table, ClaimSite { file, statement });
        }
    }
    out
}

/// A lease on the rows of one table that covers the rows of another (the jobs of a queue): a
/// claim row-locks rows of the lock table picked by a lease time that has passed, joined to
/// rows of the other table (`SELECT .. FROM jobs JOIN job_queues USING (queue_name) WHERE
/// (locked_at IS NULL OR locked_at < now() - job_expiry) .. FOR UPDATE OF job_queues SKIP
/// LOCKED`), and later in the same routine writes a holder and the clock to the locked row
/// (`UPDATE job_queues SET locked_by = worker_id, locked_at = now() WHERE ..`). The joined
/// table's rows are what the lease hands out, and the lease lapses: a claim takes a row whose
/// time has passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedLease {
    /// The table whose rows hold the lease (`job_queues`).
    pub lock: String,
    /// Its holder and lease time columns.
    pub owner: String,
    pub expiry: String,
    /// The row-locking query that picks the rows.
    pub claim: ClaimSite,
}

/// Per table whose rows a lease on another table's rows covers, that lease (the project's first
/// such claim): see [`JoinedLease`]. Only a locking query of exactly two tables, one of them
/// locked, in a routine body (whose statements run in one transaction) counts.
pub fn joined_leases(files: &[FileIr], names: &ColumnNames) -> BTreeMap<String, JoinedLease> {
    let mut out = BTreeMap::new();
    for (file, f) in files.iter().enumerate() {
        for (statement, st) in f.sql.statements.iter().enumerate() {
            let (Some(rl), Some(body), StatementKind::Select) = (&st.row_lock, st.body, st.kind)
            else {
                continue;
            };
            let ([lock], [a, b]) = (rl.tables.as_slice(), rl.joined.as_slice()) else {
                continue;
            };
            let covered = if lock == a { b } else { a };
            if covered == lock
                || !(lock == a || lock == b)
                || out.contains_key(covered)
                || bookkeeping_table(lock)
                || bookkeeping_table(covered)
            {
                continue;
            }
            // the rest of the routine: its statements follow each other
            let later = f.sql.statements[statement + 1..]
                .iter()
                .take_while(|w| w.body == Some(body) && w.embedded == st.embedded);
            let taken = later
                .filter(|w| w.kind == StatementKind::Update && w.table.as_deref() == Some(lock))
                .find_map(|w| takes_on_passed_time(w, &rl.passed, names));
            if let Some((owner, expiry)) = taken {
                out.insert(
                    covered.clone(),
                    JoinedLease {
                        lock: lock.clone(),
                        owner: owner.to_string(),
                        expiry: expiry.to_string(),
                        claim: ClaimSite { file, statement },
                    },
                );
            }
        }
    }
    out
}

/// Of a write after a row-locking query: the holder and lease time columns it takes the row
/// with, when it writes the clock to a column the query required to have passed and a value
/// that is neither a constant, the clock nor the column itself to a column named like a
/// holder.
fn takes_on_passed_time<'w>(
    w: &'w Statement,
    passed: &[String],
    names: &ColumnNames,
) -> Option<(&'w str, &'w str)> {
    let expiry = w
        .assignments
        .iter()
        .find(|a| a.value.clock && passed.contains(&a.column))?;
    let owner = w.assignments.iter().find(|a| {
        a.column != expiry.column
            && (names.is_owner(&a.column) || vocabulary::names_worker_column(&a.column))
            && !a.value.is_constant()
            && !a.value.clock
            && a.value.bare.as_ref().is_none_or(|c| c.name != a.column)
    })?;
    Some((owner.column.as_str(), expiry.column.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use locklint_ir::source::SourceFile;

    fn files(sql: &str) -> Vec<FileIr> {
        vec![locklint_frontend::analyze(
            0,
            SourceFile::new("q.sql".into(), sql.to_string()),
        )]
    }

    fn lease_of(sql: &str, table: &str) -> Option<Lease> {
        leases(&files(sql), &ColumnNames::default()).remove(table)
    }

    fn lease(owner: &str, expiry: &str) -> Option<Lease> {
        Some(Lease {
            owner: owner.into(),
            expiry: expiry.into(),
        })
    }

    #[test]
    fn claims_on_a_time_condition_show_the_lease() {
        assert_eq!(
            lease_of(
                "UPDATE jobs SET lock_by = $1, lock_at = now() WHERE id = $2 AND (lock_at IS NULL OR lock_at < now() - interval '5 minutes')",
                "jobs"
            ),
            lease("lock_by", "lock_at")
        );
        assert_eq!(
            lease_of(
                "UPDATE tasks SET worker_id = $1, heartbeat_at = now() WHERE id = $2 AND heartbeat_at < now() - interval '1 minute'",
                "tasks"
            ),
            lease("worker_id", "heartbeat_at")
        );
        // the holder named like nothing, but compared by another statement
        assert_eq!(
            lease_of(
                "UPDATE proofs SET prover = $1, busy_until = now() + interval '1 minute' WHERE id = $2 AND busy_until < now();
                 UPDATE proofs SET busy_until = now() + interval '1 minute' WHERE id = $1 AND prover = $2;",
                "proofs"
            ),
            lease("prover", "busy_until")
        );
        // an upsert that takes the row over once it expired
        assert_eq!(
            lease_of(
                "INSERT INTO am_leases (name, holder_node, hold_until) VALUES ($1, $2, now() + interval '10 seconds')
                 ON CONFLICT (name) DO UPDATE SET holder_node = EXCLUDED.holder_node, hold_until = EXCLUDED.hold_until
                 WHERE am_leases.hold_until < now()",
                "am_leases"
            ),
            lease("holder_node", "hold_until")
        );
    }

    fn state_lease_of(sql: &str, table: &str) -> Option<(String, String, String)> {
        state_leases(&files(sql))
            .remove(table)
            .map(|l| (l.state, l.held, l.expiry))
    }

    #[test]
    fn a_held_state_taken_back_once_its_time_passed_is_a_lease() {
        let claim = "UPDATE tasks SET status = 'in_progress', heartbeat_at = now() WHERE id = $1 AND status = 'queued';";
        let held = Some(("status".into(), "in_progress".into(), "heartbeat_at".into()));
        // a reaper gives the task back
        let reaper = "UPDATE tasks SET status = 'queued' WHERE status = 'in_progress' AND heartbeat_at < now() - interval '5 minutes';";
        assert_eq!(state_lease_of(&format!("{claim}\n{reaper}"), "tasks"), held);
        // a claim that takes back a held task by a locking read
        let pick = "SELECT id FROM tasks WHERE status = 'queued' OR (status = 'in_progress' AND heartbeat_at < now() - interval '5 minutes') FOR UPDATE SKIP LOCKED;";
        assert_eq!(state_lease_of(&format!("{pick}\n{claim}"), "tasks"), held);
        // nothing takes a held task back: a schedule
        let due = "SELECT id FROM tasks WHERE status = 'queued' AND run_at <= now() FOR UPDATE SKIP LOCKED;";
        assert_eq!(state_lease_of(&format!("{due}\n{claim}"), "tasks"), None);
        // no write of the held state, or no write of the time from a clock
        assert_eq!(state_lease_of(reaper, "tasks"), None);
        let unstamped = "UPDATE tasks SET status = 'in_progress' WHERE id = $1;";
        assert_eq!(
            state_lease_of(&format!("{unstamped}\n{reaper}"), "tasks"),
            None
        );
        // a state that holds nothing: pending orders expire
        assert_eq!(
            state_lease_of(
                "UPDATE orders SET status = 'pending', updated_at = now() WHERE id = $1;
                 UPDATE orders SET status = 'expired' WHERE status = 'pending' AND updated_at < now() - interval '1 day';",
                "orders"
            ),
            None
        );
        // a bookkeeping table is never a lease
        assert_eq!(
            state_lease_of(
                "UPDATE cache_entries SET status = 'running', touched_at = now() WHERE id = $1;
                 UPDATE cache_entries SET status = 'idle' WHERE status = 'running' AND touched_at < now() - interval '1 hour';",
                "cache_entries"
            ),
            None
        );
    }

    #[test]
    fn a_claim_in_one_file_is_the_claim_of_every_file() {
        let files: Vec<FileIr> = [
            ("schema.sql", "CREATE TABLE jobs (id BIGINT PRIMARY KEY, payload TEXT, status TEXT, locked_by TEXT, locked_until TIMESTAMPTZ);"),
            ("done.sql", "UPDATE jobs SET status = 'done' WHERE id = $1;"),
            ("claim.sql", "UPDATE jobs SET status = 'x' WHERE id = $1 AND locked_by = $2;\n\
             UPDATE jobs SET locked_by = $1, locked_until = now() + interval '30 seconds' WHERE id = $2 AND (locked_until IS NULL OR locked_until < now());"),
        ]
        .iter()
        .enumerate()
        .map(|(i, (path, sql))| {
            locklint_frontend::analyze(i, SourceFile::new((*path).into(), sql.to_string()))
        })
        .collect();
        let schema = crate::schema::schema(&files);
        assert_eq!(
            schema.claims.get("jobs"),
            Some(&ClaimSite {
                file: 2,
                statement: 1
            })
        );
    }

    /// A queue whose claim leases a lane and takes a batch of it, with the claim's condition
    /// and the write after it given.
    fn lane_queue(condition: &str, take: &str) -> String {
        format!(
            "CREATE FUNCTION take(p_worker TEXT) RETURNS BIGINT AS $$\n\
             DECLARE v_lane TEXT; v_batch BIGINT;\n\
             BEGIN\n\
               SELECT lanes.lane, batches.id INTO v_lane, v_batch FROM batches JOIN lanes USING (lane)\n\
                 WHERE {condition} LIMIT 1 FOR UPDATE OF lanes SKIP LOCKED;\n\
               {take}\n\
               RETURN v_batch;\n\
             END;\n\
             $$ LANGUAGE plpgsql;"
        )
    }

    #[test]
    fn a_claim_that_locks_a_joined_row_leases_the_other_table() {
        let sql = lane_queue(
            "(leased_at IS NULL OR leased_at < now() - interval '1 hour')",
            "UPDATE lanes SET holder = p_worker, leased_at = now() WHERE lane = v_lane;",
        );
        let got = joined_leases(&files(&sql), &ColumnNames::default());
        let jl = got.get("batches").expect("batches are covered");
        assert_eq!(
            (jl.lock.as_str(), jl.owner.as_str(), jl.expiry.as_str()),
            ("lanes", "holder", "leased_at")
        );
        assert_eq!(jl.claim.statement, 0);
        assert!(!got.contains_key("lanes"));
    }

    #[test]
    fn joined_claims_without_a_lapsing_lease_cover_nothing() {
        for (condition, take) in [
            // no time: a taken lane is never given to another worker
            (
                "holder IS NULL",
                "UPDATE lanes SET holder = p_worker, leased_at = now() WHERE lane = v_lane;",
            ),
            // a schedule the claim leaves alone is no lease
            (
                "holder IS NULL AND run_at <= now()",
                "UPDATE lanes SET holder = p_worker WHERE lane = v_lane;",
            ),
            // a counter, not a holder
            (
                "leased_at < now() - interval '1 hour'",
                "UPDATE lanes SET taken = taken + 1, leased_at = now() WHERE lane = v_lane;",
            ),
            // a holder cleared, not taken
            (
                "leased_at < now() - interval '1 hour'",
                "UPDATE lanes SET holder = NULL, leased_at = now() WHERE lane = v_lane;",
            ),
        ] {
            let sql = lane_queue(condition, take);
            assert!(
                joined_leases(&files(&sql), &ColumnNames::default()).is_empty(),
                "{condition} / {take}"
            );
        }
    }

    #[test]
    fn a_reaper_shows_the_lease() {
        assert_eq!(
            lease_of(
                "UPDATE sync_tasks SET worker_id = NULL WHERE heartbeat_at < now() - interval '2 minutes'",
                "sync_tasks"
            ),
            lease("worker_id", "heartbeat_at")
        );
    }

    #[test]
    fn look_alikes_show_no_lease() {
        for (sql, table) in [
            // a cache refresh on expiry: the value is never compared
            (
                "UPDATE report_cache SET body = $1, expires_at = now() + interval '1 hour' WHERE key = $2 AND expires_at < now()",
                "report_cache",
            ),
            (
                "UPDATE pages SET body = $1, expires_at = now() + interval '1 hour' WHERE key = $2 AND expires_at < now()",
                "pages",
            ),
            // optimistic concurrency: a version, not a time
            (
                "UPDATE docs SET body = $1, version = $3 WHERE id = $2 AND version < $3",
                "docs",
            ),
            // a status transition with no time
            (
                "UPDATE jobs SET state = 'running', worker_id = $1 WHERE id = $2 AND state = 'pending'",
                "jobs",
            ),
            // a schedule, not a lease: the claim does not write `run_at`
            (
                "UPDATE jobs SET state = 'running', worker = $1 WHERE id = $2 AND run_at <= now() AND state = 'scheduled'",
                "jobs",
            ),
            // an audit column written from the clock
            (
                "UPDATE jobs SET updated_by = $1, updated_at = now() WHERE id = $2 AND run_at <= now()",
                "jobs",
            ),
            // sessions are bookkeeping
            (
                "UPDATE sessions SET owner_id = $1, expires_at = now() + interval '1 day' WHERE id = $2 AND expires_at < now()",
                "sessions",
            ),
        ] {
            assert_eq!(lease_of(sql, table), None, "{sql}");
        }
    }
}

/// A lease kept in a work row's state: a claim marks the row held (`UPDATE jobs SET state =
/// 'running' WHERE ..`), the time a heartbeat or the claim renews says it is still worked on,
/// and a claim (or a reaper) takes back a row in that state once the time has passed (`SELECT ..
/// FROM jobs WHERE state = 'running' AND updated_at < now() - interval '5 minutes' FOR UPDATE
/// SKIP LOCKED`, `UPDATE jobs SET state = 'queued' WHERE state = 'running' AND heartbeat_at <
/// $1`). No holder is written: a worker keeps the job only while its time has not passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateLease {
    /// The state column and the held state, lower case (`state`, `running`).
    pub state: String,
    pub held: String,
    /// The time column whose passing gives the row back (`updated_at`, `heartbeat_at`).
    pub expiry: String,
    /// The statement that takes back a row whose time has passed.
    pub lapse: ClaimSite,
}

/// The columns a statement's condition requires to lie before a time from outside the row
/// (the database clock, the machine's clock, a bound time): `updated_at < now() - idle`,
/// `now() > heartbeat_at`. Of a locking read, those its row lock records.
fn passed_columns(st: &Statement) -> Vec<&str> {
    if st.kind == StatementKind::Select {
        return st
            .row_lock
            .iter()
            .flat_map(|r| &r.passed)
            .map(String::as_str)
            .collect();
    }
    let cmps = st.filter.iter().flat_map(|f| &f.comparisons);
    cmps.filter_map(Cmp::column_before)
        .filter(|(col, time)| {
            st.is_target(col)
                && outside(st, time)
                && (time.clock || time.client_clock || time.param)
        })
        .map(|(col, _)| col.name.as_str())
        .collect()
}

/// The columns a statement's condition requires to hold a named state, with the state.
pub(crate) fn required_states(st: &Statement) -> impl Iterator<Item = (&str, &str)> {
    let filter = if st.kind == StatementKind::Select {
        st.read_filter.as_ref()
    } else {
        st.filter.as_ref()
    };
    filter
        .into_iter()
        .flat_map(|f| &f.comparisons)
        .filter(|c| c.op == CmpOp::Eq)
        .flat_map(|c| [(&c.left, &c.right), (&c.right, &c.left)])
        .filter_map(move |(a, b)| {
            let col = a.bare.as_ref().filter(|x| st.is_target(x))?;
            Some((col.name.as_str(), b.named_literal.as_deref()?))
        })
}

/// The table a statement reads or writes.
fn table_of(st: &Statement) -> Option<&str> {
    match st.kind {
        StatementKind::Select => {
            st.row_lock.as_ref().filter(|r| r.joined.is_empty())?;
            st.reads.as_deref()
        }
        StatementKind::Update => st.table.as_deref(),
        _ => None,
    }
}

/// Per table, its lease kept in a state (the project's first statement, in file order, that
/// takes back a row on it): see [`StateLease`]. The held state must name a worker holding the
/// row (`running`, `in_progress`: `vocabulary::names_held_state`), some `UPDATE` of the table
/// must write it, and some `UPDATE` must write the time column from a clock.
pub fn state_leases(files: &[FileIr]) -> BTreeMap<String, StateLease> {
    let updates = || {
        files
            .iter()
            .flat_map(|f| &f.sql.statements)
            .filter(|st| st.kind == StatementKind::Update)
    };
    let mut marks: BTreeSet<(&str, &str, &str)> = BTreeSet::new();
    let mut clocked: BTreeSet<(&str, &str)> = BTreeSet::new();
    for st in updates() {
        let Some(table) = st.table.as_deref() else {
            continue;
        };
        for a in &st.assignments {
            if let Some(v) = a.value.named_literal.as_deref() {
                marks.insert((table, a.column.as_str(), v));
            }
            if a.value.clock || a.value.client_clock {
                clocked.insert((table, a.column.as_str()));
            }
        }
    }
    let mut out = BTreeMap::new();
    for (file, f) in files.iter().enumerate() {
        for (statement, st) in f.sql.statements.iter().enumerate() {
            let Some(table) = table_of(st) else { continue };
            if out.contains_key(table) || bookkeeping_table(table) {
                continue;
            }
            let Some(expiry) = passed_columns(st)
                .into_iter()
                .find(|p| clocked.contains(&(table, *p)))
            else {
                continue;
            };
            let held = required_states(st).find(|(col, v)| {
                vocabulary::names_held_state(v) && marks.contains(&(table, *col, *v))
            });
            if let Some((state, held)) = held {
                out.insert(
                    table.to_string(),
                    StateLease {
                        state: state.to_string(),
                        held: held.to_string(),
                        expiry: expiry.to_string(),
                        lapse: ClaimSite { file, statement },
                    },
                );
            }
        }
    }
    out
}
