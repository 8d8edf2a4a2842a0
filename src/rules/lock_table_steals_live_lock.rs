//! `lock-table-steals-live-lock`: a lock-table upsert takes the row over without checking that
//! the current lock has expired (or is ours).

use super::sql_matching::{
    condition_span, filter_mentions, lock_table, lock_write, sql_diagnostic, LockWrite,
};
use super::{Rule, RuleInfo};
use crate::diagnostic::{Diagnostic, Severity};
use crate::frontend::sql::{Conflict, Kind};
use crate::ir::FileIr;
use crate::locks::Project;

pub struct LockTableStealsLiveLock;

static INFO: RuleInfo = RuleInfo {
    name: "lock-table-steals-live-lock",
    summary: "a lock-table upsert overwrites the lock row without checking its expiry or owner",
    severity: Severity::Error,
    fixable: false,
    doc: include_str!("../../rules/lock-table-steals-live-lock.md"),
};

impl Rule for LockTableStealsLiveLock {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check_file(&self, file: &FileIr, project: &Project, out: &mut Vec<Diagnostic>) {
        for st in &file.sql.statements {
            let Some(lt) = lock_table(st, &project.schema) else {
                continue;
            };
            let upsert = match st.kind {
                Kind::Insert => matches!(
                    st.conflict,
                    Conflict::DoUpdate | Conflict::DuplicateKey | Conflict::Replace
                ),
                Kind::Update => lock_write(st, &lt) == LockWrite::Acquire,
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
            if st.conflict != Conflict::Replace && filter_mentions(st, &guards) {
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
                _ => format!("take the row only when it is free: `... WHERE name = $1 AND {expiry} < now()` (or an `INSERT ... ON CONFLICT DO UPDATE ... WHERE {expiry} < now()`)"),
            };
            out.push(sql_diagnostic(
                &INFO,
                file,
                condition_span(st),
                label,
                message,
                help,
            ));
        }
    }
}
