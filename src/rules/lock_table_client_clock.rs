//! `lock-table-client-clock`: a lock's expiry is written or compared from a time the client
//! supplies instead of the database clock.

use super::sql_matching::{
    condition_span, drop_parameter, lock_table, sql_diagnostic, sql_edit_fix,
};
use super::{Rule, RuleInfo};
use crate::diagnostic::{Applicability, Diagnostic, Fix, Severity};
use crate::frontend::sql::{Statement, Value};
use crate::ir::FileIr;
use crate::locks::{FixSettings, Project};

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
                    let fix = database_clock(file, st, &a.value, Some(&project.facts.fix));
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
                    let fix = database_clock(file, st, other, None);
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

/// An interval literal for a TTL in milliseconds, in whole seconds where it is one.
fn interval(ms: u64, mysql: bool) -> String {
    match (ms % 1000 == 0, mysql) {
        (true, false) => format!("interval '{} seconds'", ms / 1000),
        (false, false) => format!("interval '{ms} milliseconds'"),
        (true, true) => format!("INTERVAL {} SECOND", ms / 1000),
        (false, true) => format!("INTERVAL {} MICROSECOND", ms * 1000),
    }
}

/// Read the time from the database instead of the client: `now()` (PostgreSQL) or
/// `UTC_TIMESTAMP(6)` (MySQL); a written expiry (`written` carries the fix settings) becomes
/// the clock plus `--default-ttl`. Unsafe on PostgreSQL when the client's parameter can go
/// too (its bind removed, later `$n` renumbered; the TTL is a judgement call), shown only
/// otherwise.
fn database_clock(
    file: &FileIr,
    st: &Statement,
    v: &Value,
    written: Option<&FixSettings>,
) -> Option<Fix> {
    let span = v.span?;
    let emb = file.embedded.get(st.embedded)?;
    let sql = emb
        .text
        .get(st.start..st.end)
        .unwrap_or("")
        .to_ascii_lowercase();
    let mysql = sql.contains("utc_timestamp") || (sql.contains('?') && !sql.contains('$'));
    let clock = if mysql { "UTC_TIMESTAMP(6)" } else { "now()" };
    let ttl_ms = written.map(|f| f.default_ttl_ms);
    let text = match ttl_ms {
        Some(ms) => format!("({clock} + {})", interval(ms, mysql)),
        None => clock.to_string(),
    };
    // the parameter this value reads: its `$n` lies inside the value
    let params = file.sql.params(st.embedded);
    let from = params.partition_point(|p| emb.map.to_source(p.start) < span.start);
    let param = params[from..]
        .iter()
        .take_while(|p| emb.map.to_source(p.start) < span.end)
        .find(|p| emb.map.span(p.start, p.end).end <= span.end)
        .map(|p| p.n);
    let dropped = param
        .filter(|_| !mysql)
        .and_then(|n| drop_parameter(file, st, n).map(|edits| (n, edits)));
    let (applicability, message) = match &dropped {
        Some((n, _)) => (
            Applicability::Unsafe,
            match ttl_ms {
                Some(_) => format!("use the database clock (`{text}`) and drop the client's time parameter `${n}`; check the TTL (`--default-ttl`) against the lock's duration"),
                None => format!("use the database clock (`{text}`) and drop the client's time parameter `${n}`"),
            },
        ),
        None => (
            Applicability::DisplayOnly,
            format!("use the database clock (`{text}`) and drop the client's time parameter"),
        ),
    };
    let mut fix = sql_edit_fix(file, st, span, &text, message, applicability)?;
    if let (Applicability::Unsafe, Some((_, edits))) = (fix.applicability, dropped) {
        fix.edits.extend(edits);
        fix.edits.sort_by_key(|e| e.location.span.start);
    }
    Some(fix)
}
