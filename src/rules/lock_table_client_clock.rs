//! `lock-table-client-clock`: a lock's expiry is written or compared from a time the client
//! supplies instead of the database clock.

use super::sql_matching::{condition_span, lock_table, sql_diagnostic};
use super::{Rule, RuleInfo};
use crate::diagnostic::{Diagnostic, Severity};
use crate::frontend::sql::{Statement, Value};
use crate::ir::FileIr;
use crate::locks::Project;

pub struct LockTableClientClock;

static INFO: RuleInfo = RuleInfo {
    name: "lock-table-client-clock",
    summary:
        "a lock-table expiry is written or compared from a client-supplied time instead of now()",
    severity: Severity::Warning,
    fixable: false,
    doc: include_str!("../../rules/lock-table-client-clock.md"),
};

const HELP: &str = "compute and compare expiries on the database clock: write `now() + $n * interval '1 millisecond'` with a duration parameter and compare with `now()`";

/// A value from the client's clock: a parameter not combined with the database clock.
fn client_time(v: &Value) -> bool {
    v.param && !v.clock
}

impl Rule for LockTableClientClock {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check_file(&self, file: &FileIr, project: &Project, out: &mut Vec<Diagnostic>) {
        for st in &file.sql.statements {
            let Some(lt) = lock_table(st, &project.schema) else {
                continue;
            };
            let Some(expiry) = lt.expiry.as_deref() else {
                continue;
            };
            let span_of = |v: &Value, st: &Statement| v.span.unwrap_or_else(|| condition_span(st));
            for a in st.values.iter().chain(&st.assignments) {
                if a.column == expiry && client_time(&a.value) {
                    out.push(sql_diagnostic(
                        &INFO,
                        file,
                        span_of(&a.value, st),
                        "time from the client",
                        format!("the expiry `{expiry}` of lock table `{}` is written from a client-supplied time; with clock drift between clients a lock can look expired while its holder still runs", lt.table),
                        HELP.to_string(),
                    ));
                }
            }
            let Some(f) = &st.filter else { continue };
            for c in &f.comparisons {
                let is_expiry = |v: &Value| {
                    v.bare
                        .as_ref()
                        .is_some_and(|col| col.name == expiry && st.is_target(col))
                };
                let other = if is_expiry(&c.left) {
                    &c.right
                } else if is_expiry(&c.right) {
                    &c.left
                } else {
                    continue;
                };
                if client_time(other) {
                    out.push(sql_diagnostic(
                        &INFO,
                        file,
                        span_of(other, st),
                        "time from the client",
                        format!("the expiry `{expiry}` of lock table `{}` is compared with a client-supplied time; a client whose clock runs ahead takes over locks that have not expired yet", lt.table),
                        HELP.to_string(),
                    ));
                }
            }
        }
    }
}
