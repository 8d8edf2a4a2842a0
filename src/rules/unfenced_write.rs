//! `unfenced-write`: a write protected only by a lock. (a) A write to a table that carries a
//! fencing column does not compare it with the writer's token; (b) in Rust, a SQL write runs
//! while a lock taken earlier in the function is held, with neither a fence nor idempotence.

use super::sql_matching::{
    condition_span, fence_column, has_fence_guard, is_idempotent, issues_fences, lock_table,
    lock_write, overwrites, related, runs, sql_diagnostic, warning, LockWrite,
};
use super::{Rule, RuleInfo};
use crate::diagnostic::{Diagnostic, Location, Related, Severity};
use crate::frontend::sql::{Schema, Statement};
use crate::ir::Executor;
use crate::ir::{FileIr, OpKind};
use crate::locks::Project;

pub struct UnfencedWrite;

static INFO: RuleInfo = RuleInfo {
    name: "unfenced-write",
    summary: "a write protected only by a lock: no fencing-token comparison and not idempotent",
    severity: Severity::Error,
    fixable: false,
    doc: include_str!("../../rules/unfenced-write.md"),
};

/// (a): the fencing column of a fenced table that `st` overwrites without comparing it.
fn unguarded_fence(st: &Statement, schema: &Schema) -> Option<String> {
    if !overwrites(st) || lock_table(st, schema).is_some() {
        return None;
    }
    let fence = fence_column(st, schema)?;
    if has_fence_guard(st, &fence) || issues_fences(st, &fence) {
        return None;
    }
    Some(fence)
}

/// A held lock: where it was taken and how to recognise its release.
struct Hold {
    key: String,
    at: usize,
    site: Related,
}

impl Rule for UnfencedWrite {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check_file(&self, file: &FileIr, project: &Project, out: &mut Vec<Diagnostic>) {
        let schema = &project.schema;
        for st in &file.sql.statements {
            let Some(fence) = unguarded_fence(st, schema) else {
                continue;
            };
            let table = st.table.as_deref().unwrap_or_default();
            out.push(sql_diagnostic(
                &INFO,
                file,
                condition_span(st),
                format!("`{fence}` is not compared here"),
                format!("this write to fenced table `{table}` does not compare `{fence}` with the writer's fencing token; a holder whose lock already expired can overwrite newer data"),
                format!("add `AND {fence} < $n` (the incoming token) to the `WHERE` clause and set `{fence} = $n`"),
            ));
        }
        for f in &file.functions {
            let trace = project.traces.iter().find(|t| std::ptr::eq(t.root, f));
            let mut holds: Vec<Hold> = Vec::new();
            if let Some(t) = trace {
                for o in &t.ops {
                    if o.is_lock && o.op.kind.is_acquire() && !project.is_efficiency_lock(&o.key) {
                        let (rf, rs) = o.reply_site();
                        holds.push(Hold {
                            key: format!("redis:{}", o.identity.clone().unwrap_or_default()),
                            at: o.at.index,
                            site: Related {
                                location: Location::new(rf, rs),
                                label: "lock acquired here".to_string(),
                            },
                        });
                    }
                }
            }
            let released_redis = |h: &Hold, before: usize| -> bool {
                let Some(t) = trace else { return false };
                t.ops.iter().any(|o| {
                    matches!(
                        o.op.kind,
                        OpKind::Delete | OpKind::CompareDelete | OpKind::Script
                    ) && format!("redis:{}", o.identity.clone().unwrap_or_default()) == h.key
                        && o.at.index > h.at
                        && o.at.index < before
                })
            };
            let mut sql_holds: Vec<Hold> = Vec::new();
            for run in runs(file, f) {
                let st = run.statement;
                if st.in_body {
                    // defining a function does not run its body
                    continue;
                }
                let at = run.at.index;
                let lt = lock_table(st, schema);
                let mut is_lock_stmt = lt.is_some();
                for a in &st.advisory {
                    is_lock_stmt = true;
                    if a.unlock {
                        sql_holds.retain(|h| {
                            !(h.key.starts_with("advisory:")
                                && (a.all || h.key == format!("advisory:{}", a.args)))
                        });
                    } else if a.session
                        || run
                            .embedded
                            .exec
                            .as_ref()
                            .is_some_and(|x| x.executor == Executor::Transaction)
                    {
                        // a transaction-level lock outside a transaction ends with its own statement
                        sql_holds.push(Hold {
                            key: format!("advisory:{}", a.args),
                            at,
                            site: related(file, a.span, "lock acquired here"),
                        });
                    }
                }
                if let Some(lt) = &lt {
                    let key = format!("table:{}", lt.table);
                    match lock_write(st, lt) {
                        LockWrite::Acquire => sql_holds.push(Hold {
                            key,
                            at,
                            site: related(file, st.span, "lock acquired here"),
                        }),
                        LockWrite::Release => sql_holds.retain(|h| h.key != key),
                        _ => {}
                    }
                }
                if is_lock_stmt || !st.is_write() || is_idempotent(st) {
                    continue;
                }
                if let Some(fence) = fence_column(st, schema) {
                    if has_fence_guard(st, &fence) || unguarded_fence(st, schema).is_some() {
                        continue;
                    }
                }
                if schema.names.fence.iter().any(|c| has_fence_guard(st, c)) {
                    continue;
                }
                let held = holds
                    .iter()
                    .filter(|h| h.at < at && !released_redis(h, at))
                    .chain(sql_holds.iter().filter(|h| h.at < at))
                    .next();
                let Some(h) = held else { continue };
                let mut d = warning(sql_diagnostic(
                    &INFO,
                    file,
                    st.span,
                    "written while holding the lock",
                    "this write is protected only by the lock; if the lock expires while this code is paused, a second holder's write can be overwritten".to_string(),
                    "pass a fencing token and add `AND fence < $n`, or make the write idempotent".to_string(),
                ));
                d.related.push(h.site.clone());
                out.push(d);
            }
        }
    }
}
