//! SQL facts shared by the rules and the audit: which table a statement writes and what
//! kind of table it is (lock table, fenced table), which guards its `WHERE` has, what a write
//! does to a lock, which statements a Rust function runs in which order, and which advisory
//! unlocks release which locks.

use crate::schema::{lock_table_name, Schema};
use locklint_ir::sql::{Advisory, CmpOp, Col, Conflict, Operand, Statement, StatementKind};
use locklint_ir::{Embedded, Event, FileIr, Function, NodeId, Origin};

/// The columns of a lock table that matter.
#[derive(Debug, Clone)]
pub struct LockTable {
    pub table: String,
    pub owner: Option<String>,
    pub expiry: Option<String>,
    /// A work table (`jobs`, `tasks`) whose rows are leased to workers: its name does not say it
    /// holds locks and its rows carry more than the lock (`crate::lease::carries_work`), so a
    /// row is the work itself and deleting it finishes the work.
    pub work: bool,
    /// A claim or a reaper gives a row whose lease time has passed to another holder
    /// ([`Schema::lapsing`]).
    pub lapses: bool,
}

/// The first of `cols` that is one of the known `names` (in the order of `names`), else the
/// first shaped like one (`shaped`).
fn first_of<'a>(names: &[String], shaped: fn(&str) -> bool, cols: &[&'a str]) -> Option<&'a str> {
    names
        .iter()
        .find_map(|n| cols.iter().find(|c| **c == n.as_str()))
        .copied()
        .or_else(|| cols.iter().copied().find(|c| shaped(c)))
}

/// The lock table a statement writes, if it writes one: a table the schema defines with a
/// key, an owner and an expiry column, a table the project's statements claim on a time
/// condition (`crate::lease`), a table named like a lock table, or a statement that itself
/// mentions an owner-like and an expiry-like column (by name or by shape: `lease_owner`,
/// `claimed_by`, `lock_expires_at`, `hold_until`). Never a cache, session, rate-limit or
/// idempotency table, unless its name says it holds locks.
pub fn lock_table(st: &Statement, schema: &Schema) -> Option<LockTable> {
    use locklint_ir::vocabulary::{names_holder_column, names_lease_time_column};
    if !st.is_write() {
        return None;
    }
    let table = st.table.clone()?;
    let mentioned = st.mentioned();
    let names = &schema.names;
    // a cache, session, rate-limit or idempotency table is a lock table only by its name
    // (`session_locks`)
    if crate::lease::bookkeeping_table(&table) && !lock_table_name(&table) {
        return None;
    }
    let owner_m = first_of(&names.owner, names_holder_column, &mentioned);
    let expiry_m = first_of(&names.expiry, names_lease_time_column, &mentioned);
    let def = schema.table(&table);
    let lease = schema.leases.get(&table);
    let by_schema = def.is_some_and(|t| t.looks_like_lock_table(names));
    let by_statement = owner_m.is_some() && expiry_m.is_some();
    if !(by_schema || by_statement || lease.is_some() || lock_table_name(&table)) {
        return None;
    }
    // else the column an upsert inserts and takes over only while the stored row holds the
    // same value (`.. DO UPDATE SET expires_at = .. WHERE queue_leader.queue_worker_id = $2`):
    // the holder, as the statements use it
    let upsert_holder = || {
        schema
            .upsert_holders
            .get(&table)?
            .iter()
            .next()
            .map(String::as_str)
    };
    let owner = lease
        .map(|l| l.owner.as_str())
        .or_else(|| def.and_then(|t| t.owner_column(names)))
        .or(owner_m)
        .or_else(upsert_holder)
        .map(str::to_string);
    let expiry = lease
        .map(|l| l.expiry.as_str())
        .or_else(|| def.and_then(|t| t.expiry_column(names)))
        .or(expiry_m)
        .map(str::to_string);
    Some(LockTable {
        work: !lock_table_name(&table)
            && crate::lease::carries_work(schema, &table, owner.as_deref(), expiry.as_deref()),
        lapses: schema.lapsing.contains(&table),
        table,
        owner,
        expiry,
    })
}

/// The statements of a file that write a lock table, each with that table's columns.
pub fn lock_table_writes<'f>(
    file: &'f FileIr,
    schema: &'f Schema,
) -> impl Iterator<Item = (&'f Statement, LockTable)> + 'f {
    file.sql
        .statements
        .iter()
        .filter_map(move |st| Some((st, lock_table(st, schema)?)))
}

/// The fencing column of the table a statement writes: from the schema, or because the
/// statement itself writes a fencing column.
pub fn fence_column(st: &Statement, schema: &Schema) -> Option<String> {
    let table = st.table.as_deref()?;
    if let Some(c) = schema
        .table(table)
        .and_then(|t| t.fence_column(&schema.names))
    {
        return Some(c.to_string());
    }
    st.written()
        .find(|c| schema.names.fence.iter().any(|f| f == c))
        .map(str::to_string)
}

/// Whether `v` is exactly the target table's column `col`.
fn is_col(st: &Statement, v: &Operand, col: &str) -> bool {
    v.bare
        .as_ref()
        .is_some_and(|c| c.name == col && st.is_target(c))
}

/// Whether `v` holds no column of the target table (an incoming value, parameter, literal).
fn is_outside(st: &Statement, v: &Operand) -> bool {
    !v.columns.iter().any(|c| st.is_target(c))
}

/// The `WHERE` compares the stored fencing column with an incoming token: `fence < $n`,
/// `fence <= $n`, `$n > fence`, `t.fence < excluded.fence`.
pub fn has_fence_guard(st: &Statement, fence: &str) -> bool {
    let Some(f) = &st.filter else { return false };
    f.comparisons.iter().any(|c| {
        (matches!(c.op, CmpOp::Lt | CmpOp::LtEq)
            && is_col(st, &c.left, fence)
            && is_outside(st, &c.right))
            || (matches!(c.op, CmpOp::Gt | CmpOp::GtEq)
                && is_col(st, &c.right, fence)
                && is_outside(st, &c.left))
    })
}

/// The `WHERE` has `owner = <value>`.
pub fn has_owner_check(st: &Statement, owner: &str) -> bool {
    let Some(f) = &st.filter else { return false };
    f.comparisons.iter().any(|c| {
        c.op == CmpOp::Eq
            && ((is_col(st, &c.left, owner) && is_outside(st, &c.right))
                || (is_col(st, &c.right, owner) && is_outside(st, &c.left)))
    })
}

/// Words of a column name that say it identifies a lock's holder (`coordinator_id`,
/// `leader_id`, `worker`, `claimed_by`).
const HOLDER_WORDS: &[&str] = &[
    "owner",
    "holder",
    "by",
    "worker",
    "leader",
    "coordinator",
    "instance",
    "node",
    "client",
    "session",
    "token",
    "locker",
    "runner",
    "consumer",
    "agent",
];

/// The `WHERE` pins the row to its holder by a column other than the lock's name: an equality
/// of a column that is neither the table's key nor its expiry with an incoming value
/// (`room = $1 AND coordinator_id = $2`). With the table's key known from the schema any such
/// column counts; without it, only a second equality on a column named like a holder
/// (`leader_id`, `worker`) does, next to another equality that can be the key.
pub fn has_holder_check(st: &Statement, lt: &LockTable, schema: &Schema) -> bool {
    let Some(f) = &st.filter else { return false };
    let def = schema.table(&lt.table);
    // a column of the lock table: with its definition known, one it has (a function's
    // parameter `p_owner` is not one)
    let of_table = |c: &Col| st.is_target(c) && def.is_none_or(|t| t.columns.contains(&c.name));
    let outside = |v: &Operand| !v.columns.iter().any(&of_table);
    let mut pinned: Vec<&str> = Vec::new();
    for c in f.comparisons.iter().filter(|c| c.op == CmpOp::Eq) {
        for (a, b) in [(&c.left, &c.right), (&c.right, &c.left)] {
            if let Some(col) = a.bare.as_ref().filter(|x| of_table(x) && outside(b)) {
                if !pinned.contains(&col.name.as_str()) {
                    pinned.push(col.name.as_str());
                }
            }
        }
    }
    // the holder itself compared with a value other than itself or a literal: a name that
    // may be a PL/pgSQL parameter (`locked_by = any(worker_ids)`) rather than a column
    if let Some(o) = lt.owner.as_deref() {
        let is_owner = |c: &Col| c.name == o && st.is_target(c);
        let compared = f.comparisons.iter().filter(|c| c.op == CmpOp::Eq).any(|c| {
            [(&c.left, &c.right), (&c.right, &c.left)]
                .into_iter()
                .any(|(a, b)| {
                    a.bare.as_ref().is_some_and(is_owner)
                        && !b.is_constant()
                        && !b.columns.iter().any(is_owner)
                })
        });
        if compared {
            return true;
        }
    }
    let expiry = lt.expiry.as_deref();
    let keys: Vec<&str> = def
        .map(|t| t.unique.iter().flatten().map(String::as_str).collect())
        .unwrap_or_default();
    let mut holders = pinned
        .iter()
        .filter(|c| Some(**c) != expiry && !keys.contains(c));
    if keys.is_empty() {
        pinned.len() >= 2
            && holders.any(|c| {
                c.split('_')
                    .any(|w| HOLDER_WORDS.contains(&w.to_ascii_lowercase().as_str()))
            })
    } else {
        holders.next().is_some()
    }
}

/// The columns the `WHERE` compares for equality with an incoming value (`id = $1`, `$2 =
/// attempt`).
fn pinned_columns(st: &Statement) -> Vec<&str> {
    let mut pinned: Vec<&str> = Vec::new();
    let Some(f) = &st.filter else { return pinned };
    for c in f.comparisons.iter().filter(|c| c.op == CmpOp::Eq) {
        for (a, b) in [(&c.left, &c.right), (&c.right, &c.left)] {
            if let Some(col) = a.bare.as_ref().filter(|x| st.is_target(x)) {
                if is_outside(st, b) && !b.is_constant() && !pinned.contains(&col.name.as_str()) {
                    pinned.push(col.name.as_str());
                }
            }
        }
    }
    pinned
}

/// The `WHERE` pins the row to the writer's own claim by a second incoming value, whatever
/// the column is called: next to the key, an equality with a parameter (`AND attempt = $3`,
/// `AND lease_id = $3`); with the table's key known from the schema, an equality of a column
/// outside it.
pub fn has_token_check(st: &Statement, schema: &Schema) -> bool {
    let pinned = pinned_columns(st);
    let keys: Vec<&str> = st
        .table
        .as_deref()
        .and_then(|t| schema.table(t))
        .map(|t| t.unique.iter().flatten().map(String::as_str).collect())
        .unwrap_or_default();
    if keys.is_empty() {
        pinned.len() >= 2
    } else {
        pinned.iter().any(|c| !keys.contains(c))
    }
}

/// A compare-and-set: the `WHERE` requires a column to hold a literal (`state = 'running'`)
/// that the statement itself assigns (`SET state = 'done'`), so of two such writes only the
/// first matches the row.
pub fn is_compare_and_set(st: &Statement) -> bool {
    let Some(f) = &st.filter else { return false };
    f.comparisons.iter().filter(|c| c.op == CmpOp::Eq).any(|c| {
        [(&c.left, &c.right), (&c.right, &c.left)]
            .into_iter()
            .any(|(a, b)| {
                a.bare.as_ref().is_some_and(|col| {
                    st.is_target(col)
                        && b.is_constant()
                        && st.assignments.iter().any(|x| x.column == col.name)
                })
            })
    })
}

/// A write to a leased row of a work table that does not show the writer still holds the
/// lease: an `UPDATE` that changes the work (not the lease: `SET state = 'done', result = $2`)
/// or a `DELETE` of the row, on a table whose leases lapse, keyed without the holder, a
/// second incoming value, a fencing token, the lease time or a compare-and-set.
pub fn unfenced_completion(st: &Statement, lt: &LockTable, schema: &Schema) -> bool {
    if !lt.work || !lt.lapses || st.filter.is_none() {
        return false;
    }
    let finishes = match st.kind {
        StatementKind::Update => lock_write(st, lt) == LockWrite::Other,
        StatementKind::Delete => true,
        _ => false,
    };
    let lease: Vec<&str> = lt
        .owner
        .iter()
        .chain(&lt.expiry)
        .map(String::as_str)
        .collect();
    finishes
        && !filter_mentions(st, &lease)
        && !has_holder_check(st, lt, schema)
        && unpinned(st, schema)
}

/// Neither a second incoming value, a compare-and-set nor a fencing token in the `WHERE`: a
/// write that nothing but the writer's lease keeps to its own claim.
fn unpinned(st: &Statement, schema: &Schema) -> bool {
    !has_token_check(st, schema)
        && !is_compare_and_set(st)
        && !schema.names.fence.iter().any(|c| has_fence_guard(st, c))
}

/// The `WHERE` requires a column of the target table to hold a named literal (`status =
/// 'running'`): a state transition that a second, stale writer finds already made.
fn requires_state(st: &Statement) -> bool {
    crate::lease::required_states(st).next().is_some()
}

/// A write that finishes a row of a table that a lease on another table's rows covers (a job of
/// a leased queue, [`crate::lease::JoinedLease`]) without showing the lease is still held, in a
/// routine that frees that lease as its holder afterwards (`UPDATE job_queues SET locked_by =
/// NULL, locked_at = NULL WHERE queue_name = .. AND locked_by = worker_id`): the routine is the
/// holder's, and its write is not. An `UPDATE` or `DELETE` outside the claim's transaction,
/// keyed without a second incoming value, a fencing token, a compare-and-set or a required
/// state, that mentions neither the holder nor the lease time. The lease is returned.
pub fn unfenced_covered_completion<'s>(
    file: &FileIr,
    at: usize,
    schema: &'s Schema,
) -> Option<&'s crate::lease::JoinedLease> {
    let st = file.sql.statements.get(at)?;
    let jl = schema.joined_leases.get(st.table.as_deref()?)?;
    let body = st.body?;
    if !matches!(st.kind, StatementKind::Update | StatementKind::Delete) || st.filter.is_none() {
        return None;
    }
    let lease = LockTable {
        table: jl.lock.clone(),
        owner: Some(jl.owner.clone()),
        expiry: Some(jl.expiry.clone()),
        work: false,
        lapses: true,
    };
    // the rest of the routine: its statements follow each other
    let frees_as_holder = file.sql.statements[at + 1..]
        .iter()
        .take_while(|w| w.body == Some(body) && w.embedded == st.embedded)
        .any(|w| {
            w.table.as_deref() == Some(jl.lock.as_str())
                && lock_write(w, &lease) == LockWrite::Release
                && filter_keys_holder(w, &jl.owner)
        });
    // the holder or the lease time anywhere in the condition (`AND EXISTS (SELECT 1 FROM
    // job_queues q WHERE .. AND q.locked_by = worker_id)`)
    let mentions_lease = st
        .filter
        .iter()
        .flat_map(|f| &f.columns)
        .any(|c| c.name == jl.owner || c.name == jl.expiry);
    let guarded = mentions_lease || !unpinned(st, schema) || requires_state(st);
    (frees_as_holder && !guarded).then_some(jl)
}

/// A write that finishes one row of a work table whose rows a worker holds by their state
/// until a time passes ([`crate::lease::StateLease`]) without showing it still holds the row:
/// an `UPDATE` or `DELETE` keyed by an incoming value (`WHERE id = $1`, diesel's `find(id)`)
/// whose condition mentions neither the state nor the time, with no second incoming value,
/// fencing token, compare-and-set or required state. Writes that take or keep the row (the
/// held state written again, a heartbeat that writes only the time) are the lease's own.
/// The lease is returned.
pub fn unfenced_state_completion<'s>(
    st: &Statement,
    schema: &'s Schema,
) -> Option<&'s crate::lease::StateLease> {
    let sl = schema.state_leases.get(st.table.as_deref()?)?;
    // a lock table's writes are measured against its holder (`unfenced_completion`)
    if !matches!(st.kind, StatementKind::Update | StatementKind::Delete)
        || lock_table(st, schema).is_some()
    {
        return None;
    }
    let takes_or_keeps = st.assignments.iter().any(|a| {
        a.column == sl.state && a.value.named_literal.as_deref() == Some(sl.held.as_str())
    }) || (!st.assignments.is_empty()
        && st.assignments.iter().all(|a| a.column == sl.expiry));
    let keyed = st.filter.iter().flat_map(|f| &f.comparisons).any(|c| {
        c.op == CmpOp::Eq
            && [(&c.left, &c.right), (&c.right, &c.left)]
                .into_iter()
                .any(|(a, b)| {
                    a.bare.as_ref().is_some_and(|x| st.is_target(x))
                        && b.param
                        && b.columns.is_empty()
                })
    });
    let guarded = filter_mentions(st, &[&sl.state, &sl.expiry])
        || !unpinned(st, schema)
        || requires_state(st);
    (keyed && !takes_or_keeps && !guarded).then_some(sl)
}

/// The `WHERE` compares the holder column for equality with a value other than a constant
/// and the column itself (`locked_by = $2`, `locked_by = worker_id` with a routine's
/// parameter).
fn filter_keys_holder(st: &Statement, owner: &str) -> bool {
    st.filter.iter().flat_map(|f| &f.comparisons).any(|c| {
        c.op == CmpOp::Eq
            && [(&c.left, &c.right), (&c.right, &c.left)]
                .into_iter()
                .any(|(a, b)| {
                    is_col(st, a, owner)
                        && !b.is_constant()
                        && b.bare.as_ref().is_none_or(|x| x.name != owner)
                })
    })
}

/// The condition mentions one of these columns of the target table.
pub fn filter_mentions(st: &Statement, cols: &[&str]) -> bool {
    st.filter.as_ref().is_some_and(|f| {
        f.columns
            .iter()
            .any(|c| st.is_target(c) && cols.contains(&c.name.as_str()))
    })
}

/// The statement's filter compares one of these columns of the written table (`expires_at <
/// now()`, `COALESCE(locked_at, ..) < $1`, `lease_until = $2`): a test that the column is set
/// (`lease_expires_at IS NOT NULL`) compares nothing.
pub fn filter_compares(st: &Statement, cols: &[&str]) -> bool {
    st.filter.as_ref().is_some_and(|f| {
        f.comparisons.iter().any(|c| {
            [&c.left, &c.right].iter().any(|side| {
                side.columns
                    .iter()
                    .any(|col| st.is_target(col) && cols.contains(&col.name.as_str()))
            })
        })
    })
}

/// Every comparison of these columns of the written table in the statement's filter keeps
/// rows whose time has not passed (`lease_expires_at > now()`, `now() <= lease_until`), and
/// there is one: the statement picks live leases, which no reaper does.
pub fn filter_keeps_live(st: &Statement, cols: &[&str]) -> bool {
    let Some(f) = &st.filter else {
        return false;
    };
    let ours = |side: &Operand| {
        side.columns
            .iter()
            .any(|col| st.is_target(col) && cols.contains(&col.name.as_str()))
    };
    let mut any = false;
    for c in &f.comparisons {
        for (side, op) in [(&c.left, c.op), (&c.right, c.op.flip())] {
            if ours(side) {
                any = true;
                if !matches!(op, CmpOp::Gt | CmpOp::GtEq) {
                    return false;
                }
            }
        }
    }
    any
}

/// A write that assigns the fencing column from itself (`fence = fence + 1`): a counter that
/// issues tokens, not a write protected by one.
pub fn issues_fences(st: &Statement, fence: &str) -> bool {
    st.assignments.iter().any(|a| {
        a.column == fence
            && a.value
                .columns
                .iter()
                .any(|c: &Col| c.name == fence && st.is_target(c))
    })
}

/// An `INSERT` that does nothing when the row exists (idempotent on a unique key).
pub fn is_idempotent(st: &Statement) -> bool {
    st.kind == StatementKind::Insert && st.conflict == Conflict::Ignore
}

/// An upsert or update that overwrites existing rows.
pub fn overwrites(st: &Statement) -> bool {
    match st.kind {
        StatementKind::Update | StatementKind::Delete => true,
        StatementKind::Insert => matches!(
            st.conflict,
            Conflict::DoUpdate | Conflict::DuplicateKey | Conflict::Replace
        ),
        _ => false,
    }
}

/// What a write to a lock table does to the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockWrite {
    /// Takes the lock: inserts or upserts the row, or sets the owner.
    Acquire,
    /// Extends the expiry of the current holder.
    Renew,
    /// Deletes the row or clears the owner.
    Release,
    Other,
}

pub fn lock_write(st: &Statement, lt: &LockTable) -> LockWrite {
    let owner = lt.owner.as_deref();
    let expiry = lt.expiry.as_deref();
    let sets = |c: Option<&str>| {
        st.assignments
            .iter()
            .find(|a| Some(a.column.as_str()) == c)
            .map(|a| &a.value)
    };
    // a value copied from another table's row (`locked_by = q.locked_by` of an `UPDATE ...
    // FROM`): data moved by a migration, not a holder taking the lock
    let copied = |v: &Operand| {
        !v.param
            && !v.columns.is_empty()
            && v.columns
                .iter()
                .all(|c| !c.incoming && c.qualifier.is_some() && !st.is_target(c))
    };
    // an insert or upsert that writes neither the holder nor the lease (`job_count =
    // job_count + 1` on a queue's lock row) takes nothing
    let writes_lock = st.written().any(|c| Some(c) == owner || Some(c) == expiry)
        || (owner.is_none() && expiry.is_none());
    match st.kind {
        StatementKind::Insert if !writes_lock => LockWrite::Other,
        StatementKind::Insert => LockWrite::Acquire,
        StatementKind::Delete => LockWrite::Release,
        StatementKind::Update => match sets(owner) {
            // a holder named by a literal (`locked_by = 'maintenance'`) takes the row
            Some(v) if v.is_constant() && v.named_literal.is_none() => LockWrite::Release,
            Some(v) if copied(v) => LockWrite::Other,
            Some(_) => LockWrite::Acquire,
            None if sets(expiry).is_some_and(|v| v.is_constant()) => LockWrite::Release,
            None if sets(expiry).is_some() => LockWrite::Renew,
            None => LockWrite::Other,
        },
        _ => LockWrite::Other,
    }
}

/// A file of named queries (`-- name: foo`) run one by one by the application.
pub fn is_query_collection(e: &Embedded) -> bool {
    e.origin == Origin::File
        && e.text.lines().any(|l| {
            let l = l.trim_start();
            l.strip_prefix("--")
                .is_some_and(|r| r.trim_start().to_ascii_lowercase().starts_with("name:"))
        })
}

/// One statement a Rust function runs, in event order.
pub struct Run<'f> {
    pub at: NodeId,
    pub statement: &'f Statement,
    pub embedded: &'f Embedded,
}

/// The statements a function runs, in order.
pub fn runs<'f>(file: &'f FileIr, f: &Function) -> Vec<Run<'f>> {
    let mut out = Vec::new();
    for e in &f.events {
        if let Event::Sql { id, embedded } = e {
            let Some(emb) = file.embedded.get(*embedded) else {
                continue;
            };
            for st in file.sql.of(*embedded) {
                out.push(Run {
                    at: *id,
                    statement: st,
                    embedded: emb,
                });
            }
        }
    }
    out
}

/// What ran earlier in a write's transaction: its table written (a claim whose row lock
/// still holds), and the columns of the `WHERE`s of row locks (`SELECT ... FOR UPDATE`) of its
/// table.
#[derive(Debug, Default)]
pub struct EarlierInTransaction {
    pub wrote_table: bool,
    pub locked_on: Vec<String>,
    /// A compare-and-set write of the table ran earlier in a Rust function's transaction and
    /// its result is read (`rows_affected()` checked): the code goes on only holding the row
    /// it took, whose row lock lasts until the transaction ends.
    pub took_row: bool,
}

/// For the writes of a file run in a transaction after something of their table: by a Rust
/// function on one transaction variable (`&mut *tx`), or in one SQL function body (which runs
/// in one transaction). Keyed by the statement's address.
pub fn earlier_in_transaction(
    file: &FileIr,
) -> std::collections::HashMap<*const Statement, EarlierInTransaction> {
    use std::collections::{HashMap, HashSet};
    #[derive(Clone, PartialEq, Eq, Hash)]
    enum Scope {
        Tx(usize, Option<String>),
        Body(usize, usize),
    }
    let mut out = HashMap::new();
    let mut written: HashSet<(Scope, &str)> = HashSet::new();
    let mut locks: HashMap<(Scope, &str), Vec<String>> = HashMap::new();
    let mut took: HashSet<(Scope, &str)> = HashSet::new();
    // each statement in its scope, with whether its result is read (a Rust run's)
    let mut steps: Vec<(Scope, &Statement, bool)> = Vec::new();
    for (i, f) in file.functions.iter().enumerate() {
        for r in runs(file, f) {
            let tx = r
                .embedded
                .exec
                .as_ref()
                .filter(|x| x.executor == locklint_ir::Executor::Transaction);
            if let (Some(x), false) = (tx, r.statement.in_body) {
                let read = !matches!(x.result, locklint_ir::ResultUse::Ignored(_));
                steps.push((Scope::Tx(i, x.conn.clone()), r.statement, read));
            }
        }
    }
    for st in &file.sql.statements {
        if let Some(b) = st.body {
            steps.push((Scope::Body(st.embedded, b), st, false));
        }
    }
    for (scope, st, read) in steps {
        if let (true, Some(t)) = (st.is_write(), st.table.as_deref()) {
            let key = (scope.clone(), t);
            let e = EarlierInTransaction {
                wrote_table: written.contains(&key),
                locked_on: locks.get(&key).cloned().unwrap_or_default(),
                took_row: took.contains(&key),
            };
            if e.wrote_table || !e.locked_on.is_empty() {
                out.insert(std::ptr::from_ref(st), e);
            }
            if read && st.kind == StatementKind::Update && is_compare_and_set(st) {
                took.insert(key.clone());
            }
            written.insert(key);
        }
        if let Some(rl) = &st.row_lock {
            for t in &rl.tables {
                let cols = locks.entry((scope.clone(), t.as_str())).or_default();
                for c in &rl.columns {
                    if !cols.contains(c) {
                        cols.push(c.clone());
                    }
                }
            }
        }
    }
    out
}

/// Whether an advisory-lock key is written out: as numbers (`42`, `1,2`), or a MySQL named
/// lock's name as one string (`'reindex'`).
fn literal_key(args: &str) -> bool {
    let quoted = args.len() >= 2
        && args.starts_with('\'')
        && args.ends_with('\'')
        && !args[1..args.len() - 1].contains('\'');
    quoted
        || (!args.is_empty()
            && args
                .chars()
                .all(|c| c.is_ascii_digit() || c == ',' || c == '-'))
}

/// The kind of lock an advisory call takes or releases: PostgreSQL exclusive or shared, or a
/// MySQL named lock. An unlock releases only locks of its own kind.
fn mode(a: &Advisory) -> usize {
    if a.named {
        2
    } else {
        usize::from(a.shared)
    }
}

/// A set of unlocks, to ask in constant time whether any of them releases a lock: one
/// releases it when both are session-level in the same mode and, when both keys are written
/// out, with the same key (`pg_advisory_unlock_all` releases every PostgreSQL lock,
/// `RELEASE_ALL_LOCKS()` every MySQL named lock).
#[derive(Debug, Default)]
pub struct UnlockSet {
    /// Per family (PostgreSQL, MySQL named locks): an unlock of all.
    all: [bool; 2],
    /// Per mode (exclusive, shared, named): an unlock whose key is not written out.
    any_key: [bool; 3],
    /// Per mode: an unlock whose key is written out.
    some_literal: [bool; 3],
    literal: std::collections::HashSet<(usize, String)>,
}

impl UnlockSet {
    pub fn add(&mut self, u: &Advisory) {
        if !u.unlock || !u.session {
            return;
        }
        if u.all {
            self.all[usize::from(u.named)] = true;
        } else if literal_key(&u.args) {
            self.some_literal[mode(u)] = true;
            self.literal.insert((mode(u), u.args.clone()));
        } else {
            self.any_key[mode(u)] = true;
        }
    }

    /// Add these unlocks to `other`.
    pub fn add_to(&self, other: &mut UnlockSet) {
        for i in 0..2 {
            other.all[i] |= self.all[i];
        }
        for m in 0..3 {
            other.any_key[m] |= self.any_key[m];
            other.some_literal[m] |= self.some_literal[m];
        }
        other.literal.extend(self.literal.iter().cloned());
    }

    /// Whether one of the unlocks releases `lock`.
    pub fn releases(&self, lock: &Advisory) -> bool {
        let m = mode(lock);
        self.all[usize::from(lock.named)]
            || self.any_key[m]
            || if literal_key(&lock.args) {
                self.literal.contains(&(m, lock.args.clone()))
            } else {
                self.some_literal[m]
            }
    }
}

/// Where the first unlock of each kind lies after a point of a routine's body, for a walk of
/// the body from its end: the first statement after the point that releases a given lock, in
/// constant time per lock (the classes of [`UnlockSet`], each with the nearest statement).
#[derive(Debug, Default)]
pub struct NextUnlocks {
    all: [Option<usize>; 2],
    any_key: [Option<usize>; 3],
    some_literal: [Option<usize>; 3],
    literal: std::collections::HashMap<(usize, String), usize>,
}

impl NextUnlocks {
    /// Statement `at`, before every statement recorded so far, runs the unlocks of `unlocks`.
    pub fn record(&mut self, at: usize, unlocks: &UnlockSet) {
        for (family, all) in unlocks.all.iter().enumerate() {
            if *all {
                self.all[family] = Some(at);
            }
        }
        for m in 0..3 {
            if unlocks.any_key[m] {
                self.any_key[m] = Some(at);
            }
            if unlocks.some_literal[m] {
                self.some_literal[m] = Some(at);
            }
        }
        for key in &unlocks.literal {
            self.literal.insert(key.clone(), at);
        }
    }

    /// The first recorded statement that releases `lock` (as [`UnlockSet::releases`] says).
    pub fn first_release(&self, lock: &Advisory) -> Option<usize> {
        let m = mode(lock);
        let by_key = if literal_key(&lock.args) {
            self.literal.get(&(m, lock.args.clone())).copied()
        } else {
            self.some_literal[m]
        };
        [self.all[usize::from(lock.named)], self.any_key[m], by_key]
            .into_iter()
            .flatten()
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use locklint_ir::source::Span;

    /// The writes of `batches` in a lane-leasing queue whose completion routine is `finish`
    /// (its body, with `p_worker` and `p_batch` parameters), each with whether it is an
    /// unfenced completion of a covered row.
    fn covered_completions(finish: &str) -> Vec<bool> {
        let sql = format!(
            "CREATE FUNCTION take(p_worker TEXT) RETURNS BIGINT AS $$\n\
             DECLARE v_lane TEXT; v_batch BIGINT;\n\
             BEGIN\n\
               SELECT lanes.lane, batches.id INTO v_lane, v_batch FROM batches JOIN lanes USING (lane)\n\
                 WHERE leased_at IS NULL OR leased_at < now() - interval '1 hour'\n\
                 LIMIT 1 FOR UPDATE OF lanes SKIP LOCKED;\n\
               UPDATE lanes SET holder = p_worker, leased_at = now() WHERE lane = v_lane;\n\
               UPDATE batches SET tries = tries + 1 WHERE id = v_batch;\n\
               RETURN v_batch;\n\
             END;\n\
             $$ LANGUAGE plpgsql;\n\
             CREATE FUNCTION finish(p_worker TEXT, p_batch BIGINT) RETURNS VOID AS $$\n\
             DECLARE v_lane TEXT;\n\
             BEGIN\n\
               {finish}\n\
             END;\n\
             $$ LANGUAGE plpgsql;"
        );
        let files = vec![locklint_frontend::analyze(
            0,
            locklint_ir::source::SourceFile::new("q.sql".into(), sql),
        )];
        let schema = crate::schema::schema(&files);
        files[0]
            .sql
            .statements
            .iter()
            .enumerate()
            .filter(|(_, st)| {
                st.table.as_deref() == Some("batches") && st.routine.as_deref() == Some("finish")
            })
            .map(|(at, _)| unfenced_covered_completion(&files[0], at, &schema).is_some())
            .collect()
    }

    const FREE: &str =
        "UPDATE lanes SET holder = NULL, leased_at = NULL WHERE lane = v_lane AND holder = p_worker;";

    #[test]
    fn a_completion_of_a_covered_row_keyed_by_id_is_unfenced() {
        let delete =
            format!("DELETE FROM batches WHERE id = p_batch RETURNING lane INTO v_lane; {FREE}");
        assert_eq!(covered_completions(&delete), [true]);
        let update = format!(
            "UPDATE batches SET tries = tries + 1 WHERE id = p_batch RETURNING lane INTO v_lane; {FREE}"
        );
        assert_eq!(covered_completions(&update), [true]);
    }

    #[test]
    fn completions_that_keep_to_the_lease_or_to_a_state_are_not() {
        for finish in [
            // the lease checked in the write
            format!("DELETE FROM batches WHERE id = p_batch AND EXISTS (SELECT 1 FROM lanes l WHERE l.lane = batches.lane AND l.holder = p_worker); {FREE}"),
            // an idempotent state transition
            format!("UPDATE batches SET state = 'done' WHERE id = p_batch AND state = 'running'; {FREE}"),
            // a second incoming value
            format!("DELETE FROM batches WHERE id = $1 AND attempt = $2; {FREE}"),
            // no release of the lane as its holder in the routine: whose write it is is not shown
            "DELETE FROM batches WHERE id = p_batch;".to_string(),
            "DELETE FROM batches WHERE id = p_batch; UPDATE lanes SET holder = NULL, leased_at = NULL WHERE lane = v_lane;".to_string(),
        ] {
            assert_eq!(covered_completions(&finish), [false], "{finish}");
        }
    }

    fn advisory(name: &str, args: &str) -> Advisory {
        let named = !name.starts_with("pg_");
        Advisory {
            name: name.to_string(),
            named,
            unlock: name.contains("unlock") || name.starts_with("release"),
            try_lock: name.contains("try") || name == "get_lock",
            session: !name.contains("xact"),
            shared: name.ends_with("shared"),
            all: name.ends_with("all") || name == "release_all_locks",
            args: args.to_string(),
            span: Span::new(0, 0),
            bare: false,
        }
    }

    /// Whether one unlock releases this lock, pair by pair.
    fn unlocks(unlock: &Advisory, lock: &Advisory) -> bool {
        if !unlock.unlock || !unlock.session {
            return false;
        }
        if unlock.named != lock.named {
            return false;
        }
        if unlock.all {
            return true;
        }
        unlock.shared == lock.shared
            && (!(literal_key(&unlock.args) && literal_key(&lock.args)) || unlock.args == lock.args)
    }

    #[test]
    fn an_unlock_set_answers_as_each_unlock_would() {
        let names = [
            "pg_advisory_lock",
            "pg_advisory_lock_shared",
            "pg_advisory_unlock",
            "pg_advisory_unlock_shared",
            "pg_advisory_unlock_all",
            "pg_advisory_xact_lock",
            "get_lock",
            "release_lock",
            "release_all_locks",
        ];
        let args = [
            "1",
            "2",
            "1,2",
            "$1",
            "hashtext('a')",
            "'a'",
            "'b'",
            "?",
            "",
        ];
        let all: Vec<Advisory> = names
            .iter()
            .flat_map(|n| args.iter().map(move |a| advisory(n, a)))
            .collect();
        // every pair of unlocks against every lock
        for u1 in &all {
            for u2 in &all {
                let mut set = UnlockSet::default();
                set.add(u1);
                set.add(u2);
                for lock in &all {
                    assert_eq!(
                        set.releases(lock),
                        unlocks(u1, lock) || unlocks(u2, lock),
                        "{u1:?} {u2:?} {lock:?}"
                    );
                }
            }
        }
    }
}
