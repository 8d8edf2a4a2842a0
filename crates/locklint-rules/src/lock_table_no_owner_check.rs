//! `lock-table-no-owner-check`: a lock row is released or renewed by name only, without
//! checking that the caller still owns it.

use super::sql_matching::{head_above, owner_check_fix, related, sql_diagnostic};
use super::{Rule, RuleInfo};
use locklint_ir::diagnostic::{Diagnostic, Severity};
use locklint_ir::sql::StatementKind;
use locklint_ir::FileIr;
use locklint_project::sql::{
    earlier_in_transaction, filter_compares, filter_keeps_live, has_holder_check, has_owner_check,
    is_compare_and_set, lock_table_writes, lock_write, LockWrite,
};
use locklint_project::Project;

pub struct LockTableNoOwnerCheck;

static INFO: RuleInfo = RuleInfo {
    name: "lock-table-no-owner-check",
    summary: "a lock-table release or renewal is keyed by name only, without `owner = ...`",
    severity: Severity::Error,
    fixable: true,
    doc: include_str!("../../../rules/lock-table-no-owner-check.md"),
};

impl Rule for LockTableNoOwnerCheck {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check_file(&self, file: &FileIr, project: &Project, out: &mut Vec<Diagnostic>) {
        let earlier = earlier_in_transaction(file);
        for (st, lt) in lock_table_writes(file, &project.schema) {
            let Some(filter) = &st.filter else { continue };
            let owner = lt.owner.as_deref().unwrap_or("owner");
            if has_owner_check(st, owner) || has_holder_check(st, &lt, &project.schema) {
                continue;
            }
            // the transaction took the row by a compare-and-set whose result it checked: its
            // row lock lasts until the end of the transaction, so nobody else holds the row
            if earlier
                .get(&std::ptr::from_ref(st))
                .is_some_and(|e| e.took_row)
            {
                continue;
            }
            let expiry: Vec<&str> = lt.expiry.iter().map(String::as_str).collect();
            // with no holder column known (a flag row: `is_locked`, `locked_at`; a table whose
            // compared columns are all its key) the finding names none and suggests no column
            let checks = match &lt.owner {
                Some(o) => format!("`{o}`"),
                None => "who holds it".to_string(),
            };
            let (what, message) = match lock_write(st, &lt) {
                // a reaper that only removes expired rows is fine; a release of any row whose
                // lease is set (`lease_expires_at IS NOT NULL`) or still live (`lease_expires_at
                // > now()`) is no reaper
                LockWrite::Release
                    if filter_compares(st, &expiry) && !filter_keeps_live(st, &expiry) =>
                {
                    continue
                }
                // deleting a row of a work table finishes the work (`unfenced-write`)
                LockWrite::Release if lt.work && st.kind == StatementKind::Delete => continue,
                LockWrite::Release => (
                    "releases the lock row",
                    format!("this release of a `{}` lock row does not check {checks}; if the lock expired and another process took it, this releases their lock", lt.table),
                ),
                // a compare-and-set takes only a free row (`SET is_locked = TRUE .. WHERE
                // is_locked = FALSE`): an acquire, not a renewal of someone's lock
                LockWrite::Renew if is_compare_and_set(st) => continue,
                LockWrite::Renew => (
                    "renews the lock row",
                    format!("this renewal of a `{}` lock row does not check {checks}; if the lock expired and another process took it, this extends their lock", lt.table),
                ),
                _ => continue,
            };
            // the finding is the statement's: a statement of several lines is shown where it
            // starts, with its filter (where the owner check is missing) as a related location
            let head = head_above(file, st, filter.span);
            let mut d = sql_diagnostic(
                &INFO,
                file,
                head.unwrap_or(filter.span),
                if head.is_some() {
                    what
                } else {
                    "matches the row by name only"
                },
                message,
                if lt.owner.is_some() {
                    format!("add `AND {owner} = $n` with the holder's own token, and treat zero affected rows as a lost lock")
                } else {
                    "compare the holder's column with the token the acquire wrote (`AND <holder> = $n`; a table that records no holder needs one), and treat zero affected rows as a lost lock; or release in the transaction that took the row".to_string()
                },
            );
            if head.is_some() {
                d.related
                    .push(related(file, filter.span, "matches the row by name only"));
            }
            // no column to compare yet: no fix
            if lt.owner.is_some() {
                d.fix = owner_check_fix(
                    file,
                    st,
                    filter.span,
                    owner,
                    "match the holder's token too",
                    "the token",
                );
            }
            out.push(d);
        }
    }
}
