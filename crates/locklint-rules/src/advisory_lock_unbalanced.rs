//! `advisory-lock-unbalanced`: a session-level advisory lock that is never unlocked, still held
//! when a PL/pgSQL body raises before its unlock, or taken and released by two functions
//! exposed to clients (two calls that may run on different sessions); or a try-lock whose
//! boolean result is never read.

use super::sql_matching::{related, sql_diagnostic};
use super::{Rule, RuleInfo};
use locklint_ir::diagnostic::{Diagnostic, Severity};
use locklint_ir::source::Span;
use locklint_ir::sql::{Advisory, Statement, StatementKind};
use locklint_ir::vocabulary;
use locklint_ir::Origin;
use locklint_ir::{ConnEnd, EndKind, Event, FileIr, Function, NodeId};
use locklint_project::sql::{is_query_collection, runs, NextUnlocks, UnlockSet};
use locklint_project::Project;
use std::collections::HashMap;

pub struct AdvisoryLockUnbalanced;

static INFO: RuleInfo = RuleInfo {
    name: "advisory-lock-unbalanced",
    summary: "a session advisory lock is never unlocked, or a try-lock's result is never read",
    severity: Severity::Error,
    fixable: false,
    doc: include_str!("../../../rules/advisory-lock-unbalanced.md"),
};

fn ignored(file: &FileIr, a: &Advisory, how: &str) -> Diagnostic {
    sql_diagnostic(
        &INFO,
        file,
        a.span,
        "result never read",
        format!("the result of `{}` is never read ({how}); the code goes on whether or not it got the lock", a.name),
        if a.named {
            format!("read the result and go on only when it is `1` (`SELECT {}(..)` with `fetch_one`): `0` means another session holds the lock, `NULL` an error", a.name)
        } else {
            format!("read the boolean and go on only when it is `true` (`SELECT {}(..)` with `fetch_one`, or `IF {}(..) THEN` in PL/pgSQL)", a.name, a.name)
        },
    )
}

fn never_unlocked(file: &FileIr, a: &Advisory) -> Diagnostic {
    let unlock = unlock_name(a);
    sql_diagnostic(
        &INFO,
        file,
        a.span,
        "never unlocked",
        format!("session-level `{}` is never released with `{unlock}`; the lock stays held for the life of the connection, and a pooled connection keeps it after it is returned", a.name),
        if a.named {
            format!("call `{unlock}` with the same name on the same connection when done")
        } else {
            format!("call `{unlock}` with the same key on the same connection when done, or use `pg_advisory_xact_lock` inside a transaction")
        },
    )
}

/// A session lock of a PL/pgSQL body (taken there, or through a call of a function of the
/// file that takes it, `through`) that is unlocked later in the body, with an error raised
/// between the two: the error ends the routine before its unlock.
fn raised_before_unlock(
    file: &FileIr,
    a: &Advisory,
    at: Span,
    through: Option<&str>,
    raise: &Statement,
) -> Diagnostic {
    let unlock = unlock_name(a);
    let taken = match through {
        Some(f) => format!("session-level `{}` taken through `{f}()`", a.name),
        None => format!("session-level `{}`", a.name),
    };
    let mut d = sql_diagnostic(
        &INFO,
        file,
        at,
        "still held if the body raises",
        format!("{taken} is still held when the function raises an error before its `{unlock}`: the error ends the function, and a session lock is not released by the rollback; it stays held for the life of the connection"),
        if a.named {
            format!("release it with `{unlock}` in an `EXCEPTION` handler before raising again")
        } else {
            format!("take it with `pg_advisory_xact_lock` (released when the transaction ends, by commit or error), or call `{unlock}` in an `EXCEPTION WHEN OTHERS` handler before raising again")
        },
    );
    d.related.push(related(
        file,
        raise.span,
        "the function ends here with an error",
    ));
    d
}

/// A session lock taken by a function the file exposes to client roles (`SECURITY DEFINER`,
/// `GRANT EXECUTE`) and left held when it returns, released only by another exposed call:
/// each call of a client that reaches the database through an HTTP/RPC layer or a pool may run
/// on another session, where the unlock releases nothing.
fn split_over_calls(
    file: &FileIr,
    a: &Advisory,
    locker: &str,
    unlocker: &str,
    unlock: &Advisory,
) -> Diagnostic {
    let mut d = sql_diagnostic(
        &INFO,
        file,
        a.span,
        "held after the call returns",
        format!("session-level `{}` is taken by `{locker}()`, which the file exposes for clients to call, and is still held when it returns; only a separate call of `{unlocker}()` releases it. Over an HTTP/RPC layer (PostgREST, Supabase `rpc`) or a connection pool the two calls can run on different sessions: the unlock then releases nothing and the lock stays held for the life of the pooled connection", a.name),
        if a.named {
            "do the locked work inside one function that takes and releases the lock, or take it on a connection the client keeps for both calls".to_string()
        } else {
            "do the locked work inside one function that takes `pg_advisory_xact_lock` (released when its transaction ends), or take the lock on a connection the client keeps for both calls".to_string()
        },
    );
    d.related.push(related(
        file,
        unlock.span,
        format!("released only by this separate function, `{unlocker}()`"),
    ));
    d
}

/// Whether `st` is in a PL/pgSQL function whose name says it takes a lock
/// (`try_advisory_lock_with_timeout`, `acquire_job_lock`; not `unlock_..`, `release_..`) and
/// that the file does not expose to clients: such a function takes the lock for its caller,
/// which keeps the connection and releases it, so the lock it leaves held is its result.
fn hands_to_caller(st: &Statement, exposed: &[String]) -> bool {
    st.routine.as_deref().is_some_and(|name| {
        vocabulary::is_lock_fn_name(name)
            && !vocabulary::names_release(name)
            && !exposed.iter().any(|e| e == name)
    })
}

/// The PL/pgSQL functions of a file that take a session lock and leave it held for their
/// caller (`bigbang_lock()`), and those that unlock (`bigbang_unlock()`), by name.
#[derive(Default)]
struct Helpers<'f> {
    lockers: HashMap<&'f str, &'f Advisory>,
    unlockers: HashMap<&'f str, UnlockSet>,
}

impl<'f> Helpers<'f> {
    fn of(statements: &'f [Statement]) -> Self {
        let mut h = Helpers::default();
        for st in statements {
            let Some(name) = st.routine.as_deref() else {
                continue;
            };
            for u in st.advisory.iter().filter(|a| a.unlock) {
                h.unlockers.entry(name).or_default().add(u);
            }
        }
        for st in statements {
            let Some(name) = st.routine.as_deref() else {
                continue;
            };
            for a in st.advisory.iter().filter(|a| a.is_session_lock()) {
                let kept = !h.unlockers.get(name).is_some_and(|u| u.releases(a));
                if kept {
                    h.lockers.entry(name).or_insert(a);
                }
            }
        }
        h
    }

    /// An exposed function of the file (`exposed`) other than `locker` whose own unlock
    /// releases `lock`: the function and that unlock. Of several, the one whose key is written
    /// as the lock's, else the first after the lock, else the first.
    fn exposed_unlock(
        &self,
        statements: &'f [Statement],
        exposed: &[String],
        locker: &str,
        lock: &Advisory,
    ) -> Option<(&'f str, &'f Advisory)> {
        let candidates: Vec<(&'f str, &'f Advisory)> = statements
            .iter()
            .filter_map(|st| {
                let name = st.routine.as_deref().filter(|n| *n != locker)?;
                if !exposed.iter().any(|e| e == name) {
                    return None;
                }
                let u = st.advisory.iter().find(|u| {
                    let mut one = UnlockSet::default();
                    one.add(u);
                    u.unlock && one.releases(lock)
                })?;
                Some((name, u))
            })
            .collect();
        candidates
            .iter()
            .find(|(_, u)| u.args == lock.args)
            .or_else(|| {
                candidates
                    .iter()
                    .find(|(_, u)| u.span.start > lock.span.start)
            })
            .or(candidates.first())
            .copied()
    }

    /// What `st` (a statement of a PL/pgSQL body) releases: its own unlocks and those of an
    /// unlocking function of the file it calls.
    fn unlocks_of(&self, st: &Statement) -> UnlockSet {
        let mut unlocks = UnlockSet::default();
        st.advisory.iter().for_each(|u| unlocks.add(u));
        if let Some(called) = st.call.as_deref().and_then(|f| self.unlockers.get(f)) {
            called.add_to(&mut unlocks);
        }
        unlocks
    }

    /// The lock a statement takes by calling a function of the file that keeps it for its
    /// caller, with that function's name.
    fn kept_by_call(&self, st: &'f Statement) -> Option<(&'f str, &'f Advisory)> {
        let f = st
            .call
            .as_deref()
            .filter(|f| st.routine.as_deref() != Some(*f))?;
        Some((f, *self.lockers.get(f)?))
    }

    /// For each statement of a PL/pgSQL body and each session lock it takes (its own, and the
    /// one a function it calls keeps), the first error-raising statement after it in the body
    /// with no statement releasing that lock before it; keyed by the statement's index and the
    /// lock's span. One walk of each body from its end, so a body of thousands of locks costs
    /// what it holds, not its square. An unlock before an early `RETURN` (`exit_path`) does
    /// not count: the way past its branch still holds the lock.
    fn raises_before_unlock(&self, statements: &'f [Statement]) -> HashMap<(usize, Span), usize> {
        let mut out = HashMap::new();
        let mut next = NextUnlocks::default();
        let mut next_raise: Option<usize> = None;
        let mut body = None;
        for (at, st) in statements.iter().enumerate().rev() {
            if body != Some((st.embedded, st.body)) {
                body = Some((st.embedded, st.body));
                next = NextUnlocks::default();
                next_raise = None;
            }
            if let (Some(_), Some(raise)) = (st.body, next_raise) {
                let own = st.advisory.iter().filter(|a| a.is_session_lock());
                for lock in own.chain(self.kept_by_call(st).map(|(_, a)| a)) {
                    if next
                        .first_release(lock)
                        .is_none_or(|release| raise < release)
                    {
                        out.insert((at, lock.span), raise);
                    }
                }
            }
            if !st.exit_path {
                next.record(at, &self.unlocks_of(st));
            }
            if st.kind == StatementKind::Raise {
                next_raise = Some(at);
            }
        }
        out
    }
}

fn unlock_name(a: &Advisory) -> &'static str {
    if a.named {
        "RELEASE_LOCK"
    } else if a.shared {
        "pg_advisory_unlock_shared"
    } else {
        "pg_advisory_unlock"
    }
}

/// A lock never unlocked on a pooled connection that goes back to its pool (`drop(conn)` or
/// the end of its scope), where the next user of the connection finds the lock held.
fn back_to_pool(file: &FileIr, a: &Advisory, end: &ConnEnd) -> Diagnostic {
    let unlock = unlock_name(a);
    let (how, label) = match end.kind {
        EndKind::Drop => (
            format!("dropping `{}`", end.var),
            "returned to the pool here, still holding the lock",
        ),
        _ => (
            format!("`{}` going out of scope", end.var),
            "goes back to the pool here, still holding the lock",
        ),
    };
    let mut d = sql_diagnostic(
        &INFO,
        file,
        a.span,
        "never unlocked",
        format!("session-level `{}` is never released with `{unlock}`, and {how} hands the connection back to its pool with the lock still held: whoever gets that connection next holds it too, and everyone else waits", a.name),
        format!("call `{unlock}` with the same key on `{var}` before it goes back, or end the session with it: `{var}.close().await`, `{var}.close_on_drop()` or `{var}.detach()`", var = end.var),
    );
    d.related.push(related(file, end.span, label));
    d
}

/// How the connection a lock ran on ends after it: the end that closes the session (which
/// releases the lock), else one that hands it back to its pool still holding it.
fn conn_end<'f>(f: &'f Function, var: &str, after: NodeId) -> Option<&'f ConnEnd> {
    let ends = f.events.iter().filter_map(|e| match e {
        Event::ConnEnd(c) if c.var == var && c.id.index > after.index => Some(c),
        _ => None,
    });
    let mut pooled = None;
    for c in ends {
        if c.ends_session() {
            return Some(c);
        }
        pooled = pooled.or(Some(c));
    }
    pooled
}

impl Rule for AdvisoryLockUnbalanced {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check_file(&self, file: &FileIr, _project: &Project, out: &mut Vec<Diagnostic>) {
        // unlocks by where they count: in the same SQL text (no function), in the same
        // function, or in a release function of the same file (a guard's `unlock`, `release`
        // or `drop`), which counts for every function
        let mut in_texts = UnlockSet::default();
        let mut in_release_fns = UnlockSet::default();
        let mut in_fn: HashMap<usize, UnlockSet> = HashMap::new();
        for s in &file.sql.statements {
            let func = file.embedded.get(s.embedded).and_then(|e| e.func);
            for u in s.advisory.iter().filter(|a| a.unlock) {
                match func {
                    None => in_texts.add(u),
                    Some(g) if is_release_fn(file, g) => in_release_fns.add(u),
                    Some(g) => in_fn.entry(g).or_default().add(u),
                }
            }
        }
        let released = |a: &Advisory, func: Option<usize>| match func {
            None => in_texts.releases(a),
            Some(f) => in_release_fns.releases(a) || in_fn.get(&f).is_some_and(|u| u.releases(a)),
        };
        let collections: Vec<bool> = file.embedded.iter().map(is_query_collection).collect();
        // SQL files (and PL/pgSQL bodies anywhere)
        let helpers = Helpers::of(&file.sql.statements);
        let raises = helpers.raises_before_unlock(&file.sql.statements);
        for (at, st) in file.sql.statements.iter().enumerate() {
            let Some(e) = file.embedded.get(st.embedded) else {
                continue;
            };
            let whole_file = e.origin == Origin::File;
            if !whole_file && !st.in_body {
                continue;
            }
            for a in st.advisory.iter().filter(|a| a.is_session_lock()) {
                let collection = collections.get(st.embedded).copied().unwrap_or(false);
                if let Some(how) = unread(st, a, whole_file && !collection) {
                    out.push(ignored(file, a, how));
                } else if !released(a, e.func) && !hands_to_caller(st, &file.sql.exposed) {
                    out.push(never_unlocked(file, a));
                } else if let Some(&raise) = raises.get(&(at, a.span)) {
                    out.push(raised_before_unlock(
                        file,
                        a,
                        a.span,
                        None,
                        &file.sql.statements[raise],
                    ));
                }
            }
            // a lock taken by calling a function of the file that keeps it for its caller
            if let Some((f, a)) = helpers.kept_by_call(st) {
                if let Some(&raise) = raises.get(&(at, a.span)) {
                    let raise = &file.sql.statements[raise];
                    out.push(raised_before_unlock(file, a, st.span, Some(f), raise));
                }
            }
        }
        // a lock taken by one exposed function and released by another: two calls of a client
        let mut split: Vec<(&str, &Advisory)> = helpers
            .lockers
            .iter()
            .filter(|(name, _)| file.sql.exposed.iter().any(|e| e == *name))
            .map(|(name, a)| (*name, *a))
            .collect();
        split.sort_by_key(|(_, a)| a.span.start);
        for (locker, a) in split {
            if let Some((unlocker, u)) =
                helpers.exposed_unlock(&file.sql.statements, &file.sql.exposed, locker, a)
            {
                out.push(split_over_calls(file, a, locker, unlocker, u));
            }
        }
        // SQL run from Rust
        for f in &file.functions {
            for run in runs(file, f) {
                if run.statement.in_body {
                    continue;
                }
                let Some(exec) = &run.embedded.exec else {
                    continue;
                };
                let method = &exec.method;
                for a in run
                    .statement
                    .advisory
                    .iter()
                    .filter(|a| a.is_session_lock())
                {
                    if a.try_lock
                        && matches!(method.as_str(), "execute" | "batch_execute" | "execute_raw")
                    {
                        out.push(ignored(
                            file,
                            a,
                            &format!("`{method}` discards the returned row"),
                        ));
                    } else if let (true, true, locklint_ir::ResultUse::Ignored(why)) =
                        (a.try_lock, a.bare, &exec.result)
                    {
                        out.push(ignored(file, a, why));
                    } else if !released(a, run.embedded.func) {
                        // closing the connection ends the session and its locks; handing it
                        // back to a pool does not. A connection that closes when dropped
                        // (dedicated, detached, marked to close on drop) takes the lock with it
                        // wherever it ends, here or in the guard it is handed to
                        if exec.conn_closes == Some(true) {
                            continue;
                        }
                        match exec.conn.as_deref().and_then(|v| conn_end(f, v, run.at)) {
                            Some(end) if end.ends_session() => {}
                            Some(end) => out.push(back_to_pool(file, a, end)),
                            None => out.push(never_unlocked(file, a)),
                        }
                    }
                }
            }
        }
    }
}

/// A function whose unlocks release the locks of the whole file: `drop`, or one named for
/// unlocking or releasing.
fn is_release_fn(file: &FileIr, func: usize) -> bool {
    file.functions
        .get(func)
        .is_some_and(|g| g.name == "drop" || locklint_ir::vocabulary::names_release(&g.name))
}

/// Why a try-lock's result in SQL reaches no condition, if it does not.
fn unread(st: &Statement, a: &Advisory, bare_select_counts: bool) -> Option<&'static str> {
    if !a.try_lock || !a.bare {
        return None;
    }
    match st.kind {
        StatementKind::Perform => Some("`PERFORM` discards it"),
        _ if bare_select_counts && !st.in_body => Some("a bare `SELECT` of it feeds no condition"),
        _ => None,
    }
}
