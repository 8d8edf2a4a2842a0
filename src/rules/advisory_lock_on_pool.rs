//! `advisory-lock-on-pool`: a session-level advisory lock or unlock runs through a connection
//! pool, so lock and unlock may land on different sessions.

use super::sql_matching::{related, runs, sql_diagnostic};
use super::{Rule, RuleInfo};
use crate::diagnostic::{Diagnostic, Severity};
use crate::ir::{Executor, FileIr};
use crate::locks::Project;

pub struct AdvisoryLockOnPool;

static INFO: RuleInfo = RuleInfo {
    name: "advisory-lock-on-pool",
    summary: "a session-level advisory lock or unlock is executed through a connection pool",
    severity: Severity::Error,
    fixable: false,
    doc: include_str!("../../rules/advisory-lock-on-pool.md"),
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
                        "lock and unlock on one dedicated connection (`pool.acquire()`), or use `pg_try_advisory_xact_lock` inside a transaction".to_string(),
                    );
                    d.related
                        .push(related(file, exec.span, "runs on the pool here"));
                    out.push(d);
                }
            }
        }
    }
}
