//! What a lock protects: the SQL writes a function makes while it holds the lock, and
//! whether each one is fenced, idempotent or conditional.

use super::*;

/// A statement that writes data (not a lock, not a fence counter).
fn data_write(st: &Statement, schema: &Schema) -> bool {
    st.is_write() && !st.in_body && st.advisory.is_empty() && lock_table(st, schema).is_none()
}

fn fenced(st: &Statement, schema: &Schema) -> bool {
    fence_column(st, schema).is_some_and(|c| has_fence_guard(st, &c))
        || schema.names.fence.iter().any(|c| has_fence_guard(st, c))
}

/// An insert that a unique constraint turns into an error on repeat, or `ON CONFLICT DO NOTHING`.
fn idempotent(st: &Statement, schema: &Schema) -> bool {
    if is_idempotent(st) {
        return true;
    }
    if st.kind != StatementKind::Insert || st.conflict != Conflict::None {
        return false;
    }
    let Some(t) = st.table.as_deref().and_then(|t| schema.table(t)) else {
        return false;
    };
    let inserted: Vec<&str> = st.values.iter().map(|a| a.column.as_str()).collect();
    t.unique
        .iter()
        .any(|u| !u.is_empty() && u.iter().all(|c| inserted.contains(&c.as_str())))
}

fn conditional_update(st: &Statement) -> bool {
    st.kind == StatementKind::Update
        && st.filter.as_ref().is_some_and(|f| {
            f.comparisons
                .iter()
                .any(|c| c.op == crate::ir::sql::CmpOp::Eq)
        })
}

pub(super) fn target(st: &Statement) -> String {
    let verb = match st.kind {
        StatementKind::Insert => match st.conflict {
            Conflict::None => "INSERT",
            Conflict::Ignore => "INSERT (ignore conflicts)",
            _ => "UPSERT",
        },
        StatementKind::Update => "UPDATE",
        StatementKind::Delete => "DELETE",
        _ => "SQL",
    };
    format!("{verb} {}", st.table.as_deref().unwrap_or("?"))
}

/// Collect the SQL writes `func` runs between event indexes `start` and `end`, and its
/// external effects ([`super::effects`]), with those of the functions it calls there (a few
/// levels down); mint sites of fencing tokens go to the fencing section. `session`: the
/// executor holding a non-expiring lock, for writes that run on it.
pub(super) fn writes_after(
    project: &Project,
    file: &FileIr,
    func: &Function,
    start: usize,
    end: usize,
    session: Option<Executor>,
    lock: &mut Lock,
) {
    let mut stack = vec![func as *const Function];
    writes_in(project, file, func, start, end, session, lock, &mut stack);
}

/// [`writes_after`], with the functions whose calls are being followed (`stack`).
#[allow(clippy::too_many_arguments)]
fn writes_in(
    project: &Project,
    file: &FileIr,
    func: &Function,
    start: usize,
    end: usize,
    session: Option<Executor>,
    lock: &mut Lock,
    stack: &mut Vec<*const Function>,
) {
    super::effects::effects_between(file, func, start, end, lock);
    called_writes(project, func, start, end, lock, stack);
    let schema = &project.schema;
    // tables read under the lock so far
    let mut reads: Vec<&str> = Vec::new();
    for run in runs(file, func) {
        let at = run.at.index;
        if at <= start || at >= end {
            continue;
        }
        let st = run.statement;
        if let Some(table) = st.reads.as_deref() {
            if !st.in_body && st.advisory.is_empty() && lock_table(st, schema).is_none() {
                reads.push(table);
            }
        }
        let site = Site::new(&file.file, st.span);
        if let Some(fc) = fence_column(st, schema) {
            if issues_fences(st, &fc) {
                push_site(&mut lock.fencing.minted, site);
                continue;
            }
        }
        if !data_write(st, schema) {
            continue;
        }
        let is_fenced = fenced(st, schema);
        let executor = run.embedded.exec.as_ref().map(|e| e.executor);
        let same_session = match (session, executor) {
            (Some(l), Some(w)) => {
                l != Executor::Pool && w != Executor::Pool && (l == w || w == Executor::Transaction)
            }
            _ => false,
        };
        if is_fenced {
            push_site(&mut lock.fencing.checked_writes, site.clone());
        } else {
            push_site(&mut lock.fencing.unchecked_writes, site.clone());
        }
        push_write(
            &mut lock.protects,
            Write {
                site,
                function: func.name.clone(),
                target: target(st),
                idempotent: idempotent(st, schema),
                fenced: is_fenced,
                same_session,
                external: false,
                conditional_update: conditional_update(st),
                after_read: st.table.as_deref().is_some_and(|t| reads.contains(&t)),
            },
        );
    }
}

/// How deep calls made while the lock is held are followed.
const MAX_CALL_DEPTH: usize = 3;

/// The writes of the functions `func` calls between event indexes `start` and `end` (the lock
/// is held while they run), and of those they call, a few levels down. What a callee writes
/// is never taken to run on the lock's own session.
fn called_writes(
    project: &Project,
    func: &Function,
    start: usize,
    end: usize,
    lock: &mut Lock,
    stack: &mut Vec<*const Function>,
) {
    if stack.len() > MAX_CALL_DEPTH {
        return;
    }
    for e in &func.events {
        let Event::Call(c) = e else { continue };
        if c.id.index <= start || c.id.index >= end {
            continue;
        }
        let Some(id) = project.callee(c) else {
            continue;
        };
        let callee = project.function(id);
        if stack.contains(&(callee as *const Function)) {
            continue;
        }
        let Some(file) = project.files.get(id.file) else {
            continue;
        };
        stack.push(callee);
        writes_in(project, file, callee, 0, usize::MAX, None, lock, stack);
        stack.pop();
    }
}
