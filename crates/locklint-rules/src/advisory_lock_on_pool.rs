//! `advisory-lock-on-pool`: a session-level advisory lock or unlock runs through a connection
//! pool, so lock and unlock may land on different sessions.

use super::sql_matching::{related, sql_diagnostic};
use super::{Rule, RuleInfo};
use locklint_ir::diagnostic::{Applicability, Diagnostic, Edit, Fix, Location, Severity};
use locklint_ir::source::Span;
use locklint_ir::sql::Advisory;
use locklint_ir::{Executor, FileIr};
use locklint_project::sql::runs;
use locklint_project::Project;

pub struct AdvisoryLockOnPool;

static INFO: RuleInfo = RuleInfo {
    name: "advisory-lock-on-pool",
    summary: "a session-level advisory lock or unlock is executed through a connection pool",
    severity: Severity::Error,
    fixable: true,
    doc: include_str!("../../../rules/advisory-lock-on-pool.md"),
};

impl Rule for AdvisoryLockOnPool {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check_file(&self, file: &FileIr, _project: &Project, out: &mut Vec<Diagnostic>) {
        for f in &file.functions {
            for run in runs(file, f) {
                let Some(exec) = &run.embedded.exec else {
                    continue;
                };
                // defining a function on a pool does not run its body there
                if exec.executor != Executor::Pool || run.statement.in_body {
                    continue;
                }
                for a in run.statement.advisory.iter().filter(|a| a.session) {
                    let message = if a.unlock {
                        format!("`{}` runs on a connection pool; it may reach a different session than the one holding the lock, which then stays locked", a.name)
                    } else {
                        format!("session-level `{}` runs on a connection pool; the lock belongs to whichever pooled connection ran it and is not released when that connection goes back to the pool", a.name)
                    };
                    let mut d = sql_diagnostic(
                        &INFO,
                        file,
                        a.span,
                        if a.unlock {
                            "session unlock on a pooled connection"
                        } else {
                            "session lock on a pooled connection"
                        },
                        message,
                        if a.named {
                            "lock and unlock on one dedicated connection (`pool.acquire()`): a named lock belongs to the session that took it".to_string()
                        } else {
                            "lock and unlock on one dedicated connection (`pool.acquire()`), or use `pg_try_advisory_xact_lock` inside a transaction".to_string()
                        },
                    );
                    d.related
                        .push(related(file, exec.span, "runs on the pool here"));
                    d.fix = xact_fix(file, a);
                    out.push(d);
                }
            }
        }
    }
}

/// Shown, never applied: the transaction-level form of a session lock. The caller must also
/// run it inside a transaction, which only the author can arrange.
fn xact_fix(file: &FileIr, a: &Advisory) -> Option<Fix> {
    if a.unlock {
        return None;
    }
    let written = file.file.snippet(a.span);
    let at = written.to_ascii_lowercase().find("advisory_")? + "advisory_".len();
    let insert = a.span.start + at;
    Some(Fix {
        message: format!(
            "take a transaction-level lock (`{}`) inside a transaction (`pool.begin()`); it ends with the transaction, so no unlock is needed",
            a.name.replacen("advisory_", "advisory_xact_", 1)
        ),
        applicability: Applicability::DisplayOnly,
        edits: vec![Edit {
            location: Location::new(file.file.clone(), Span::new(insert, insert)),
            replacement: "xact_".to_string(),
        }],
    })
}
