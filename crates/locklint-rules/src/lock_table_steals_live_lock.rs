//! `lock-table-steals-live-lock`: a lock-table upsert takes the row over without checking that
//! the current lock has expired (or is ours).

use super::sql_matching::{
    condition_span, end_before_semicolon, related, sql_diagnostic, sql_insert_fix,
};
use super::{Rule, RuleInfo};
use locklint_ir::diagnostic::{Applicability, Fix};
use locklint_ir::diagnostic::{Diagnostic, Severity};
use locklint_ir::sql::{CmpOp, Conflict, Statement, StatementKind};
use locklint_ir::FileIr;
use locklint_project::sql::{
    earlier_in_transaction, filter_mentions, is_compare_and_set, lock_table_writes, lock_write,
    LockTable, LockWrite,
};
use locklint_project::Project;

pub struct LockTableStealsLiveLock;

static INFO: RuleInfo = RuleInfo {
    name: "lock-table-steals-live-lock",
    summary: "a lock-table upsert overwrites the lock row without checking its expiry or owner",
    severity: Severity::Error,
    fixable: true,
    doc: include_str!("../../../rules/lock-table-steals-live-lock.md"),
};

impl Rule for LockTableStealsLiveLock {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check_file(&self, file: &FileIr, project: &Project, out: &mut Vec<Diagnostic>) {
        let earlier = earlier_in_transaction(file);
        let bodies = BodyReads::of(file);
        for (st, lt) in lock_table_writes(file, &project.schema) {
            let takes = |c: &Option<String>| {
                c.as_deref()
                    .is_some_and(|c| st.assignments.iter().any(|a| a.column == c))
            };
            let upsert = match st.kind {
                // the `DO UPDATE` takes the row over only if it writes the holder or the lease
                StatementKind::Insert => match st.conflict {
                    Conflict::Replace => true,
                    Conflict::DoUpdate | Conflict::DuplicateKey => {
                        takes(&lt.owner)
                            || takes(&lt.expiry)
                            || (lt.owner.is_none() && lt.expiry.is_none())
                    }
                    _ => false,
                },
                StatementKind::Update => lock_write(st, &lt) == LockWrite::Acquire,
                _ => false,
            };
            let before = bodies.before(file, st);
            // the columns that say whether the lock is free: its lease and holder, and what
            // this write assigns
            let mut cols: Vec<&str> = lt
                .expiry
                .iter()
                .chain(&lt.owner)
                .map(String::as_str)
                .collect();
            cols.extend(
                st.assignments
                    .iter()
                    .filter(|a| !a.value.is_constant())
                    .map(|a| a.column.as_str()),
            );
            // one caller at a time: an advisory lock taken first, or the lock row read under a
            // row lock (`SELECT expires_at INTO v_exp FROM locks WHERE name = $1 FOR UPDATE`)
            // and checked in the body
            let serialised = before.iter().any(|s| {
                s.advisory.iter().any(|a| !a.unlock)
                    || locked_read(s, &lt.table, &cols)
                    || (s.kind == StatementKind::LockTable
                        && s.row_lock
                            .as_ref()
                            .is_some_and(|r| r.tables.contains(&lt.table)))
            });
            let check = before
                .iter()
                .rev()
                .find(|s| unlocked_check(s, &lt.table, &cols))
                .copied();
            if !upsert {
                // a table with no holder column is taken by writing its expiry: a check of
                // that expiry in an earlier statement of the body, not in the write
                if let (Some(check), false) = (check, serialised) {
                    if let Some(d) = split_check(file, st, &lt, check) {
                        out.push(d);
                    }
                }
                continue;
            }
            if serialised {
                continue;
            }
            let guards: Vec<&str> = lt
                .expiry
                .iter()
                .chain(&lt.owner)
                .map(String::as_str)
                .collect();
            // a compare-and-set claim (`SET state = 'running' .. WHERE .. AND state =
            // 'pending'`) takes only a row nobody holds
            // with the lock's expiry column not known (a table recognised by its name, its
            // columns named like nothing known: `"expiresAt"`), a condition that compares one
            // of its columns with the clock (`WHERE "Lease"."expiresAt" < now()`) is the check
            let clock_check = lt.expiry.is_none()
                && locklint_project::lease::time_comparisons(st).any(|(_, v)| v.clock);
            if st.conflict != Conflict::Replace
                && (filter_mentions(st, &guards) || is_compare_and_set(st) || clock_check)
            {
                continue;
            }
            // the row was picked and locked in this transaction on its expiry or owner
            // (`SELECT .. WHERE locked_at < .. FOR UPDATE SKIP LOCKED`, then `UPDATE .. WHERE
            // queue_name = v_queue_name`)
            // or on a state the claim itself moves the row out of (`.. WHERE state = 'ready'
            // FOR NO KEY UPDATE SKIP LOCKED`, then `SET state = 'running'`): a compare-and-set
            // through the locked pick
            let moved = |c: &str| {
                st.assignments
                    .iter()
                    .any(|a| a.column == c && a.value.is_constant())
            };
            let on_guard = |cols: &[String]| {
                cols.iter()
                    .any(|c| guards.contains(&c.as_str()) || moved(c))
            };
            if earlier
                .get(&std::ptr::from_ref(st))
                .is_some_and(|e| on_guard(&e.locked_on))
            {
                continue;
            }
            // or in the statement's own `WITH` query
            if st
                .row_lock
                .as_ref()
                .is_some_and(|r| r.tables.contains(&lt.table) && on_guard(&r.columns))
            {
                continue;
            }
            let expiry = lt.expiry.as_deref().unwrap_or("expires_at");
            let (label, message) = match st.conflict {
                Conflict::Replace => (
                    "replaces the row unconditionally",
                    format!("this `REPLACE` into lock table `{}` overwrites the lock row even while another holder's lock is live", lt.table),
                ),
                _ if st.merge => (
                    "takes the row whatever its expiry",
                    format!(
                        "this `MERGE` into lock table `{}` updates the matched lock row even while another holder's lock is live: its `WHEN MATCHED` checks neither `{expiry}` nor the owner",
                        lt.table
                    ),
                ),
                _ => (
                    "takes the row whatever its expiry",
                    format!(
                        "this write to lock table `{}` takes the lock row even while another holder's lock is live; nothing checks `{expiry}` or the owner before overwriting it",
                        lt.table
                    ),
                ),
            };
            let help = match st.conflict {
                Conflict::DuplicateKey => {
                    let owner = lt.owner.as_deref().unwrap_or("owner");
                    format!("condition each assignment on the expiry: `{owner} = IF({expiry} < UTC_TIMESTAMP(6), VALUES({owner}), {owner})` (assign `{expiry}` last)")
                }
                Conflict::DoUpdate if st.merge => format!("take over only an expired lock: `WHEN MATCHED AND {}.{expiry} < now() THEN UPDATE ...`, and read the affected rows to learn whether the lock was taken", st.names.last().cloned().unwrap_or_else(|| lt.table.clone())),
                Conflict::DoUpdate => format!("add `WHERE {}.{expiry} < now()` to the `DO UPDATE` so only an expired lock is taken over", st.names.last().cloned().unwrap_or_else(|| lt.table.clone())),
                _ if lt.work => format!("claim the row only when nobody holds it: `... WHERE id = $1 AND ({expiry} IS NULL OR {expiry} < now())`, or move it from a state only one claim can match (`AND state = 'pending'` with `SET state = 'running'`)"),
                _ => format!("take the row only when it is free: `... WHERE name = $1 AND {expiry} < now()` (or an `INSERT ... ON CONFLICT DO UPDATE ... WHERE {expiry} < now()`)"),
            };
            let mut d = sql_diagnostic(&INFO, file, condition_span(st), label, message, help);
            d.fix = expiry_guard(file, st, &lt);
            if let Some(check) = check {
                d.related.push(related(
                    file,
                    check.span,
                    "the lock is checked here, in a separate statement without a row lock",
                ));
                // the body goes on as if the write took the lock: the condition alone would
                // make it report a lock it did not take, so the fix is only shown
                d.help.push_str(
                    "; the earlier check does not hold until the write: check in the write and read `FOUND` (or the affected rows) to learn whether the lock was taken",
                );
                if let Some(fix) = &mut d.fix {
                    fix.applicability = Applicability::DisplayOnly;
                }
            }
            out.push(d);
        }
    }
}

/// How many of the reads, table locks and advisory locks before a write in its PL/pgSQL body
/// are looked at: the nearest ones, so a body of many statements costs no more per write.
const BODY_LOOKBACK: usize = 64;

/// Per PL/pgSQL body (its text and where it starts), the statements that can check or
/// serialise a later take-over: `SELECT`s of one table, table locks and advisory locks, as
/// indexes into the file's statements, in order.
struct BodyReads {
    of_body: std::collections::HashMap<(usize, usize), Vec<usize>>,
    index: std::collections::HashMap<*const Statement, usize>,
}

impl BodyReads {
    fn of(file: &FileIr) -> Self {
        let mut of_body: std::collections::HashMap<(usize, usize), Vec<usize>> =
            std::collections::HashMap::new();
        let mut index = std::collections::HashMap::new();
        for (i, s) in file.sql.statements.iter().enumerate() {
            let Some(body) = s.body else { continue };
            index.insert(std::ptr::from_ref(s), i);
            let relevant = (s.kind == StatementKind::Select && s.reads.is_some())
                || s.kind == StatementKind::LockTable
                || !s.advisory.is_empty();
            if relevant {
                of_body.entry((s.embedded, body)).or_default().push(i);
            }
        }
        BodyReads { of_body, index }
    }

    /// The nearest of those statements before `st` in its body (none outside a body).
    fn before<'f>(&self, file: &'f FileIr, st: &Statement) -> Vec<&'f Statement> {
        let (Some(body), Some(&at)) = (st.body, self.index.get(&std::ptr::from_ref(st))) else {
            return Vec::new();
        };
        let Some(list) = self.of_body.get(&(st.embedded, body)) else {
            return Vec::new();
        };
        let end = list.partition_point(|&i| i < at);
        list[end.saturating_sub(BODY_LOOKBACK)..end]
            .iter()
            .filter_map(|&i| file.sql.statements.get(i))
            .collect()
    }
}

/// A `SELECT` of `table` that reads one of `cols` (selects it, or compares it in its `WHERE`).
fn reads_lock(s: &Statement, table: &str, cols: &[&str]) -> bool {
    s.kind == StatementKind::Select
        && s.reads.as_deref() == Some(table)
        && (s
            .selected
            .iter()
            .any(|c| c == "*" || cols.contains(&c.as_str()))
            || s.read_filter.as_ref().is_some_and(|f| {
                f.columns
                    .iter()
                    .any(|c| s.is_target(c) && cols.contains(&c.name.as_str()))
            }))
}

/// The lock row read under a row lock (`FOR UPDATE`): the body's check of it holds until the
/// transaction ends.
fn locked_read(s: &Statement, table: &str, cols: &[&str]) -> bool {
    s.row_lock
        .as_ref()
        .is_some_and(|r| r.tables.iter().any(|t| t == table))
        && reads_lock(s, table, cols)
}

/// A check of the lock row without a row lock: another caller can make the same check before
/// this one writes.
fn unlocked_check(s: &Statement, table: &str, cols: &[&str]) -> bool {
    s.row_lock.is_none() && reads_lock(s, table, cols)
}

/// Check-then-act across PL/pgSQL statements on a lock table with no holder column: an earlier
/// statement checks the expiry (`IF EXISTS (SELECT .. WHERE lock_id = $1 AND expires > now)
/// THEN RETURN ..`), and the write takes the lock by writing the expiry without checking it
/// again (`UPDATE lock SET expires = .. WHERE lock_id = $1`). Two callers both pass the check
/// and both take the lock. No fix: where the check belongs depends on the body's branches.
fn split_check(
    file: &FileIr,
    st: &Statement,
    lt: &LockTable,
    check: &Statement,
) -> Option<Diagnostic> {
    if st.kind != StatementKind::Update || lt.owner.is_some() || is_compare_and_set(st) {
        return None;
    }
    // the column the check compares or reads and the write sets from outside the row
    let checked = |c: &str| {
        check.selected.iter().any(|s| s == c)
            || check.read_filter.as_ref().is_some_and(|f| {
                f.comparisons.iter().any(|k| {
                    !matches!(k.op, CmpOp::Eq | CmpOp::NotEq)
                        && [&k.left, &k.right].iter().any(|o| {
                            o.bare
                                .as_ref()
                                .is_some_and(|b| b.name == c && check.is_target(b))
                        })
                })
            })
    };
    let taken = st.assignments.iter().find(|a| {
        !a.value.is_constant()
            && !a
                .value
                .columns
                .iter()
                .any(|c| st.is_target(c) && c.name == a.column)
            && checked(&a.column)
    })?;
    let expiry = taken.column.as_str();
    if filter_mentions(st, &[expiry]) {
        return None;
    }
    let mut d = sql_diagnostic(
        &INFO,
        file,
        condition_span(st),
        format!("takes the row without checking `{expiry}` again"),
        format!(
            "this write to lock table `{}` takes the lock on a check an earlier statement made (`{expiry}`), without a row lock: two callers can both see the lock free and both take it",
            lt.table
        ),
        format!(
            "check in the write itself (`... AND {expiry} < now()`, then `IF FOUND`), or read the row `FOR UPDATE` before checking it"
        ),
    );
    d.related.push(related(
        file,
        check.span,
        "the lock is checked here, in a separate statement without a row lock",
    ));
    Some(d)
}

/// `ON CONFLICT ... DO UPDATE SET ...` without a `WHERE`: add `WHERE <table>.<expiry> < now()`
/// so only an expired lock is taken over. Safe when the expiry column is known and the
/// statement already uses the database clock (`now()`); shown only otherwise.
fn expiry_guard(file: &FileIr, st: &Statement, lt: &LockTable) -> Option<Fix> {
    if st.kind == StatementKind::Update {
        return update_guard(file, st, lt);
    }
    if st.conflict != Conflict::DoUpdate || st.filter.is_some() {
        return None;
    }
    let upsert = st.upsert_span?;
    let table = st.names.last().cloned().unwrap_or_else(|| lt.table.clone());
    let expiry = lt.expiry.as_deref();
    let sql = file
        .embedded
        .get(st.embedded)
        .and_then(|e| e.text.get(st.start..st.end))
        .unwrap_or("");
    let applicability = if expiry.is_some() && sql.to_ascii_lowercase().contains("now()") {
        Applicability::Safe
    } else {
        Applicability::DisplayOnly
    };
    let expiry = expiry.unwrap_or("expires_at");
    let text = format!(" WHERE {table}.{expiry} < now()");
    sql_insert_fix(
        file,
        st,
        end_before_semicolon(file, upsert),
        &text,
        format!(
            "take the row over only when the lock has expired (`{}`)",
            text.trim()
        ),
        applicability,
    )
}

/// A take-over `UPDATE ... WHERE name = $1`: add `AND <expiry> < now()` to its condition
/// (shown only on a work table, as `AND (<expiry> IS NULL OR <expiry> < now())`).
fn update_guard(file: &FileIr, st: &Statement, lt: &LockTable) -> Option<Fix> {
    let filter = st.filter.as_ref()?;
    let expiry = lt.expiry.as_deref()?;
    let condition = file.file.text.get(filter.span.start..filter.span.end)?;
    let sql = file
        .embedded
        .get(st.embedded)
        .and_then(|e| e.text.get(st.start..st.end))
        .unwrap_or("")
        .to_ascii_lowercase();
    // the rows of a work table exist before anyone claims them, their lease time still NULL:
    // the guard must let those through, and whether the column can be NULL is not known
    let (applicability, text) = if lt.work {
        (
            Applicability::DisplayOnly,
            format!(" AND ({expiry} IS NULL OR {expiry} < now())"),
        )
    } else if sql.contains("now()") && !condition.to_ascii_lowercase().contains(" or ") {
        (Applicability::Safe, format!(" AND {expiry} < now()"))
    } else {
        (Applicability::DisplayOnly, format!(" AND {expiry} < now()"))
    };
    sql_insert_fix(
        file,
        st,
        end_before_semicolon(file, filter.span),
        &text,
        format!(
            "take the row over only when the lock has expired (`{}`)",
            text.trim()
        ),
        applicability,
    )
}
