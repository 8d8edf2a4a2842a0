//! PostgreSQL advisory locks in the inventory, grouped by key.

use super::advisory_keys::{self, KeyOrigin};
use super::*;
use crate::ir::{EndKind, FnId};

/// Whether advisory-lock arguments hold a bind parameter (`$1`, `?`, `:name`), outside quotes.
pub(super) fn parametric(args: &str) -> bool {
    sql_lex::tokens(args)
        .iter()
        .any(|t| t.kind == sql_lex::TokenKind::Param)
}

/// A function runs an advisory unlock.
fn unlocks(file: &FileIr, f: &Function) -> bool {
    runs(file, f)
        .iter()
        .any(|r| r.statement.advisory.iter().any(|u| u.unlock))
}

/// The lock's name for one resolution of its arguments.
fn lock_name(project: &Project, file: &FileIr, args: &str, origin: &KeyOrigin) -> String {
    match (&origin.args, origin.via.last()) {
        (Some(resolved), _) if origin.fixed => format!("advisory({resolved})"),
        (Some(resolved), Some((caller, _))) => format!(
            "advisory({resolved}) in {}",
            project.files[caller.file].file.display
        ),
        _ if parametric(args) => format!("advisory({args}) in {}", file.file.display),
        _ => format!("advisory({args})"),
    }
}

pub(super) fn advisory_locks(project: &Project) -> Vec<Lock> {
    let mut groups: BTreeMap<String, Lock> = BTreeMap::new();
    for (fi, file) in project.files.iter().enumerate() {
        // statements a function runs, with that function and event index
        let mut ran: HashMap<Span, (usize, &Function, usize, Option<&crate::ir::SqlExec>)> =
            HashMap::new();
        for (fj, f) in file.functions.iter().enumerate() {
            for r in runs(file, f) {
                ran.insert(
                    r.statement.span,
                    (fj, f, r.at.index, r.embedded.exec.as_ref()),
                );
            }
        }
        for st in &file.sql.statements {
            for a in &st.advisory {
                if a.all && a.unlock {
                    continue;
                }
                let run = ran.get(&st.span);
                let origins = match run {
                    Some((fj, _, _, Some(exec))) if parametric(&a.args) => advisory_keys::resolve(
                        project,
                        FnId {
                            file: fi,
                            func: *fj,
                        },
                        &a.args,
                        &exec.bind_keys,
                    ),
                    _ => vec![KeyOrigin {
                        args: None,
                        fixed: false,
                        via: Vec::new(),
                    }],
                };
                for origin in origins {
                    let name = lock_name(project, file, &a.args, &origin);
                    add_call(project, file, a, run.copied(), &origin, name, &mut groups);
                }
            }
        }
    }
    groups
        .into_values()
        .filter(|l| !l.acquires.is_empty())
        .collect()
}

/// Record one advisory call (an acquire or a release) under the lock it names.
fn add_call(
    project: &Project,
    file: &FileIr,
    a: &crate::ir::sql::Advisory,
    run: Option<(usize, &Function, usize, Option<&crate::ir::SqlExec>)>,
    origin: &KeyOrigin,
    name: String,
    groups: &mut BTreeMap<String, Lock>,
) {
    let mech = if a.session {
        Mechanism::AdvisorySession
    } else {
        Mechanism::AdvisoryTransaction
    };
    let lock = groups
        .entry(name.clone())
        .or_insert_with(|| empty_lock(name, mech));
    let site = Site::new(&file.file, a.span);
    let function = run.map(|r| r.1.name.clone()).unwrap_or_default();
    if a.unlock {
        if !lock.releases.iter().any(|r| r.site.same(&site)) {
            lock.releases.push(Release {
                site,
                function,
                command: a.name.clone(),
                atomic: true,
                owner_checked: true,
            });
        }
        return;
    }
    if !a.session {
        lock.mechanism = Mechanism::AdvisoryTransaction;
    }
    let called_from: Vec<Site> = origin
        .via
        .iter()
        .map(|(caller, call)| Site::new(&project.files[caller.file].file, call.span))
        .collect();
    if let Some(known) = lock.acquires.iter_mut().find(|x| x.site.same(&site)) {
        for s in called_from {
            push_site(&mut known.called_from, s);
        }
        return;
    }
    let checked = if a.try_lock {
        match run.and_then(|r| r.3) {
            Some(exec) => {
                let m = exec.method.as_str();
                Some(m.starts_with("fetch") || m.starts_with("query") || m == "get" || m.is_empty())
            }
            None => Some(!a.bare),
        }
    } else {
        None
    };
    lock.acquires.push(Acquire {
        site,
        function,
        command: a.name.clone(),
        ttl: if a.session {
            "none (session)".to_string()
        } else {
            "none (transaction)".to_string()
        },
        token: TokenKind::None,
        checked,
        called_from,
    });
    let Some((_, f, at, exec)) = run else {
        return;
    };
    let end = runs(file, f)
        .iter()
        .filter(|r| r.at.index > at && r.statement.advisory.iter().any(|u| u.unlock))
        .map(|r| r.at.index)
        .min()
        .unwrap_or(usize::MAX);
    if end == usize::MAX && a.session {
        // no unlock: the lock ends with the session, when its connection closes
        if let Some((conn_end, command)) = exec.and_then(|e| session_end(f, e, at)) {
            let site = Site::new(&file.file, conn_end.span);
            push_site(&mut lock.op_sites, site.clone());
            if !lock.releases.iter().any(|r| r.site.same(&site)) {
                lock.releases.push(Release {
                    site,
                    function: f.name.clone(),
                    command,
                    atomic: true,
                    owner_checked: true,
                });
            }
        }
    }
    let session = Some(exec.map_or(Executor::Unknown, |e| e.executor));
    writes_after(project, file, f, at, end, session, lock);
    // what the callers do between the wrapper's call and the call that unlocks
    for (caller, call) in &origin.via {
        let caller_file = &project.files[caller.file];
        let caller_fn = project.function(*caller);
        let start = call.id.index;
        let end = caller_fn
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Call(c) if c.id.index > start => Some(c),
                _ => None,
            })
            .find(|c| {
                project
                    .callee(c)
                    .is_some_and(|t| unlocks(&project.files[t.file], project.function(t)))
            })
            .map_or(usize::MAX, |c| c.id.index);
        writes_after(project, caller_file, caller_fn, start, end, session, lock);
    }
}

/// Where the connection a session lock was taken on (`exec.conn`) closes after event `at`,
/// ending the session and its locks: `close()`, or dropped (`drop(conn)`, the end of its
/// scope) when it does not go back to a pool (marked `close_on_drop()`, detached, or a
/// connection of its own), with the release as the inventory names it. A connection handed
/// back to its pool keeps the session, and the lock, alive: no release.
fn session_end<'f>(
    f: &'f Function,
    exec: &crate::ir::SqlExec,
    at: usize,
) -> Option<(&'f crate::ir::ConnEnd, String)> {
    let var = exec.conn.as_deref()?;
    let ends: Vec<&crate::ir::ConnEnd> = f
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ConnEnd(c) if c.var == var => Some(c),
            _ => None,
        })
        .collect();
    let marked = ends
        .iter()
        .find(|c| matches!(c.kind, EndKind::CloseOnDrop | EndKind::Detach))
        .map(|c| match c.kind {
            EndKind::Detach => "detached",
            _ => "close_on_drop",
        });
    let closes = exec.conn_closes == Some(true);
    ends.into_iter().filter(|c| c.id.index > at).find_map(|c| {
        let how = match c.kind {
            EndKind::Close => format!("`{var}.close()`"),
            EndKind::Drop | EndKind::ScopeEnd if !c.to_pool || closes => match marked {
                Some(m) => format!("`{var}` dropped ({m}: it closes)"),
                None => format!("`{var}` dropped (its own connection: it closes)"),
            },
            _ => return None,
        };
        Some((c, format!("session ends: {how}")))
    })
}

#[cfg(test)]
mod tests {
    use super::parametric;

    #[test]
    fn advisory_arguments_with_bind_parameters() {
        for args in [
            "$1",
            "hashtext($2)",
            "?",
            ":job_id",
            "hashtext(:name)::bigint",
        ] {
            assert!(parametric(args), "{args}");
        }
        for args in [
            "42",
            "hashtext('jobs:nightly')",
            "'a:b'::text",
            "1, 2",
            "'$1'",
        ] {
            assert!(!parametric(args), "{args}");
        }
    }
}
