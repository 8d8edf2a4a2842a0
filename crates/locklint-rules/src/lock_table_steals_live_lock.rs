//! `lock-table-steals-live-lock`: a lock-table upsert takes the row over without checking that
//! the current lock has expired (or is ours).

use super::sql_matching::{condition_span, end_before_semicolon, sql_diagnostic, sql_insert_fix};
use super::{Rule, RuleInfo};
use locklint_ir::diagnostic::{Applicability, Fix};
use locklint_ir::diagnostic::{Diagnostic, Severity};
use locklint_ir::sql::{Conflict, Statement, StatementKind};
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
            if !upsert {
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
            if st.conflict != Conflict::Replace
                && (filter_mentions(st, &guards) || is_compare_and_set(st))
            {
                continue;
            }
            // the row was picked and locked in this transaction on its expiry or owner
            // (`SELECT .. WHERE locked_at < .. FOR UPDATE SKIP LOCKED`, then `UPDATE .. WHERE
            // queue_name = v_queue_name`)
            let on_guard = |cols: &[String]| cols.iter().any(|c| guards.contains(&c.as_str()));
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
                Conflict::DoUpdate => format!("add `WHERE {}.{expiry} < now()` to the `DO UPDATE` so only an expired lock is taken over", st.names.last().cloned().unwrap_or_else(|| lt.table.clone())),
                _ if lt.work => format!("claim the row only when nobody holds it: `... WHERE id = $1 AND ({expiry} IS NULL OR {expiry} < now())`, or move it from a state only one claim can match (`AND state = 'pending'` with `SET state = 'running'`)"),
                _ => format!("take the row only when it is free: `... WHERE name = $1 AND {expiry} < now()` (or an `INSERT ... ON CONFLICT DO UPDATE ... WHERE {expiry} < now()`)"),
            };
            let mut d = sql_diagnostic(&INFO, file, condition_span(st), label, message, help);
            d.fix = expiry_guard(file, st, &lt);
            out.push(d);
        }
    }
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
