//! `lock-table-client-clock`: a lock's expiry is written or compared from a time the client
//! supplies instead of the database clock.

use super::sql_matching::{condition_span, lock_table, sql_diagnostic, sql_edit_fix};
use super::{Rule, RuleInfo};
use crate::diagnostic::{Applicability, Diagnostic, Fix, Severity};
use crate::frontend::sql::{Statement, Value};
use crate::ir::FileIr;
use crate::locks::Project;

pub struct LockTableClientClock;

static INFO: RuleInfo = RuleInfo {
    name: "lock-table-client-clock",
    summary:
        "a lock-table expiry is written or compared from a client-supplied time instead of now()",
    severity: Severity::Warning,
    fixable: true,
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
                    let fix = database_clock(file, st, &a.value, true);
                    out.push(with_fix(sql_diagnostic(
                        &INFO,
                        file,
                        span_of(&a.value, st),
                        "time from the client",
                        format!("the expiry `{expiry}` of lock table `{}` is written from a client-supplied time; with clock drift between clients a lock can look expired while its holder still runs", lt.table),
                        HELP.to_string(),
                    ), fix));
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
                    let fix = database_clock(file, st, other, false);
                    out.push(with_fix(sql_diagnostic(
                        &INFO,
                        file,
                        span_of(other, st),
                        "time from the client",
                        format!("the expiry `{expiry}` of lock table `{}` is compared with a client-supplied time; a client whose clock runs ahead takes over locks that have not expired yet", lt.table),
                        HELP.to_string(),
                    ), fix));
                }
            }
        }
    }
}

fn with_fix(mut d: Diagnostic, fix: Option<Fix>) -> Diagnostic {
    d.fix = fix;
    d
}

/// Read the time from the database instead of the client: `now()` (PostgreSQL) or
/// `UTC_TIMESTAMP(6)` (MySQL). Shown only: the bound parameter has to go too, and a written
/// expiry needs the lock's duration added.
fn database_clock(file: &FileIr, st: &Statement, v: &Value, written: bool) -> Option<Fix> {
    let span = v.span?;
    let sql = file
        .embedded
        .get(st.embedded)
        .and_then(|e| e.text.get(st.start..st.end))
        .unwrap_or("")
        .to_ascii_lowercase();
    let mysql = sql.contains("utc_timestamp") || (sql.contains('?') && !sql.contains('$'));
    let clock = if mysql { "UTC_TIMESTAMP(6)" } else { "now()" };
    let text = if written {
        if mysql {
            format!("({clock} + INTERVAL 30 SECOND)")
        } else {
            format!("({clock} + interval '30 seconds')")
        }
    } else {
        clock.to_string()
    };
    sql_edit_fix(
        file,
        st,
        span,
        &text,
        format!("use the database clock (`{text}`) and drop the client's time parameter"),
        Applicability::DisplayOnly,
    )
}
