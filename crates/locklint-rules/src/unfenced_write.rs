//! `unfenced-write`: a write protected only by a lock. (a) A write to a table that carries a
//! fencing column does not compare it with the writer's token; (b) in Rust, a SQL write runs
//! while a lock taken earlier in the function is held, with neither a fence nor idempotence.

use super::sql_matching::{
    condition_span, end_before_semicolon, head_above, owner_check_fix, related, sql_diagnostic,
    sql_insert_fix, warning,
};
use super::{Rule, RuleInfo};
use locklint_ir::diagnostic::{Diagnostic, Location, Related, Severity};
use locklint_ir::sql::{Statement, StatementKind};
use locklint_ir::Executor;
use locklint_ir::{FileIr, KeyIdentity, OpKind};
use locklint_project::schema::Schema;
use locklint_project::sql::{
    earlier_in_transaction, fence_column, has_fence_guard, is_compare_and_set, is_idempotent,
    issues_fences, lock_table, lock_write, overwrites, runs, unfenced_completion,
    unfenced_covered_completion, unfenced_state_completion, LockWrite, Run,
};
use locklint_project::Project;
use std::collections::HashMap;

pub struct UnfencedWrite;

static INFO: RuleInfo = RuleInfo {
    name: "unfenced-write",
    summary: "a write protected only by a lock: no fencing-token comparison and not idempotent",
    severity: Severity::Error,
    fixable: true,
    doc: include_str!("../../../rules/unfenced-write.md"),
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

/// A script invocation whose script only renews its key: the lock stays held after it. The
/// script is found by the name it is reached from, in the invocation's file, or for a
/// constant's name (`RENEW`) in any file. A script that cannot be found counts as a release.
fn renews_only(project: &Project, o: &locklint_project::TraceOp) -> bool {
    let Some(name) = o.op.script.as_deref() else {
        return false;
    };
    let named = |f: &FileIr| {
        f.lua
            .scripts
            .iter()
            .find(|s| s.names.iter().any(|n| n == name))
            .map(|s| {
                !s.writes.is_empty()
                    && s.writes
                        .iter()
                        .all(|(w, _)| w.kind == locklint_ir::lua::WriteKind::Renew)
            })
    };
    let own = project.files.get(o.op.id.file).and_then(named);
    let found = own.or_else(|| {
        super::matching::is_constant_name(name)
            .then(|| project.files.iter().find_map(named))
            .flatten()
    });
    found.unwrap_or(false)
}

/// A held lock: where it was taken and how to recognise its release.
/// Which lock a hold is of.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Held {
    /// A Redis key (by identity, when the key has one).
    Redis(Option<std::sync::Arc<KeyIdentity>>),
    /// A PostgreSQL advisory lock, by its arguments' text.
    Advisory(String),
    /// A row of a lock table.
    Table(String),
}

struct Hold {
    key: Held,
    at: usize,
    site: Related,
    /// Where an advisory lock lives, when the code shows it: a write run there cannot outlive
    /// the lock (the session or transaction ending frees the lock and ends its writes too).
    within: Option<Within>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Within {
    /// A held connection, by its local (`conn` of `&mut *conn`, a `client`).
    Connection(String),
    /// The function's transaction (transactions are told apart by function, as for the
    /// claims of `earlier_in_transaction`).
    Transaction,
}

/// The held connection or transaction a statement runs on, when the code shows one.
fn within(run: &Run) -> Option<Within> {
    let exec = run.embedded.exec.as_ref()?;
    match exec.executor {
        Executor::Connection => exec.conn.clone().map(Within::Connection),
        Executor::Transaction => Some(Within::Transaction),
        _ => None,
    }
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
            let mut d = sql_diagnostic(
                &INFO,
                file,
                condition_span(st),
                format!("`{fence}` is not compared here"),
                format!("this write to fenced table `{table}` does not compare `{fence}` with the writer's fencing token; a holder whose lock already expired can overwrite newer data"),
                format!("add `AND {fence} < $n` (the incoming token) to the `WHERE` clause and set `{fence} = $n`"),
            );
            d.fix = fence_guard(file, st, &fence);
            out.push(d);
        }
        completions(file, project, out);
        covered_completions(file, project, out);
        state_completions(file, project, out);
        for f in &file.functions {
            let runs = runs(file, f);
            if runs.is_empty() {
                continue;
            }
            let trace = project.traces.iter().find(|t| std::ptr::eq(t.root, f));
            // Redis locks taken, each with where it is released next (a delete or script on
            // the same key after it), if it is
            let mut holds: Vec<(Hold, Option<usize>)> = Vec::new();
            if let Some(t) = trace {
                let key_of = |o: &locklint_project::TraceOp| Held::Redis(o.identity.clone());
                // (event index in `f`, place in the trace) of each release
                let mut releases: HashMap<Held, Vec<(usize, usize)>> = HashMap::new();
                for (n, o) in t.ops.iter().enumerate() {
                    let release = match o.op.kind {
                        OpKind::Delete | OpKind::CompareDelete => true,
                        OpKind::Script => !renews_only(project, o),
                        _ => false,
                    };
                    if release {
                        releases.entry(key_of(o)).or_default().push((o.at.index, n));
                    }
                }
                for (n, o) in t.ops.iter().enumerate() {
                    if o.is_lock && o.op.kind.is_acquire() && !project.is_efficiency_lock(&o.key) {
                        let (rf, rs) = o.reply_site();
                        let key = key_of(o);
                        let at = o.at.index;
                        // the next release; one in the same call as the acquire (a helper
                        // that takes and releases the lock) releases it where the call ends
                        let released = releases.get(&key).and_then(|v| {
                            v.iter()
                                .filter_map(|&(i, m)| match i.cmp(&at) {
                                    std::cmp::Ordering::Greater => Some(i),
                                    std::cmp::Ordering::Equal if m > n => {
                                        Some(super::matching::after_call_at(f, at))
                                    }
                                    _ => None,
                                })
                                .min()
                        });
                        holds.push((
                            Hold {
                                key,
                                at,
                                site: Related {
                                    location: Location::new(rf, rs),
                                    label: "lock acquired here".to_string(),
                                },
                                within: None,
                            },
                            released,
                        ));
                    }
                }
            }
            let mut sql_holds: Vec<Hold> = Vec::new();
            // Plain reads of a table (`SELECT .. FROM t`): where they ran, and the table.
            let mut reads: Vec<(usize, &str)> = Vec::new();
            for run in runs {
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
                        sql_holds.retain(
                            |h| !matches!(&h.key, Held::Advisory(args) if a.all || *args == a.args),
                        );
                    } else if a.session
                        || run
                            .embedded
                            .exec
                            .as_ref()
                            .is_some_and(|x| x.executor == Executor::Transaction)
                    {
                        // a transaction-level lock outside a transaction ends with its own statement
                        sql_holds.push(Hold {
                            key: Held::Advisory(a.args.clone()),
                            at,
                            site: related(file, a.span, "lock acquired here"),
                            // a session lock lives as long as its connection; a
                            // transaction-level one as long as its transaction
                            within: within(&run).filter(|w| a.session || *w == Within::Transaction),
                        });
                    }
                }
                if let Some(lt) = &lt {
                    let key = Held::Table(lt.table.clone());
                    match lock_write(st, lt) {
                        LockWrite::Acquire => sql_holds.push(Hold {
                            key,
                            at,
                            site: related(file, st.span, "lock acquired here"),
                            within: None,
                        }),
                        LockWrite::Release => sql_holds.retain(|h| h.key != key),
                        _ => {}
                    }
                }
                if let (false, Some(table)) = (is_lock_stmt, st.reads.as_deref()) {
                    reads.push((at, table));
                }
                // a compare-and-set transition (`SET status = 'closed' .. WHERE .. AND status
                // = 'open'`) applies once, whichever holder runs it first
                if is_lock_stmt
                    || !st.is_write()
                    || is_idempotent(st)
                    || (st.kind == StatementKind::Update && is_compare_and_set(st))
                {
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
                let write_within = within(&run);
                let held =
                    holds
                        .iter()
                        .filter(|(h, released)| h.at < at && released.is_none_or(|r| r >= at))
                        .map(|(h, _)| h)
                        .chain(sql_holds.iter().filter(|h| {
                            h.at < at && (h.within.is_none() || h.within != write_within)
                        }))
                        .next();
                let Some(h) = held else { continue };
                // A read of the written table under the lock: the write may depend on it.
                let read_first = st.table.as_deref().is_some_and(|t| {
                    reads
                        .iter()
                        .any(|&(r, table)| table == t && h.at < r && r < at)
                });
                let help = if read_first {
                    "this write may depend on a read made under the lock: claim the row with a fencing token at the read (`UPDATE .. SET fence = $n WHERE .. AND fence <= $n RETURNING ..`, `FencedClaim` in locklint-runtime) and write with `AND fence = $n`; a fence compared only at the write can still lose an update"
                } else {
                    "pass a fencing token and add `AND fence < $n`, or make the write idempotent"
                };
                let mut d = warning(sql_diagnostic(
                    &INFO,
                    file,
                    st.span,
                    "written while holding the lock",
                    "this write is protected only by the lock; if the lock expires while this code is paused, a second holder's write can be overwritten".to_string(),
                    help.to_string(),
                ));
                d.related.push(h.site.clone());
                out.push(d);
            }
        }
    }
}

/// (c): a worker's write that finishes a leased row of a work table (`UPDATE jobs SET state =
/// 'done' WHERE id = $1`, `DELETE FROM jobs WHERE id = $1`) without showing it still holds the
/// lease, on a table the project claims rows of: in this file, or in another one (a repository
/// module's claim, the worker's completion elsewhere), linked through the table. Not when the
/// same transaction claimed or row-locked (`FOR UPDATE`) the table first: the row stays the
/// worker's until it commits.
fn completions(file: &FileIr, project: &Project, out: &mut Vec<Diagnostic>) {
    let schema = &project.schema;
    // the first claim of each table in the file
    let mut claims: HashMap<String, &Statement> = HashMap::new();
    for st in &file.sql.statements {
        if let Some(lt) = lock_table(st, schema) {
            if lock_write(st, &lt) == LockWrite::Acquire {
                claims.entry(lt.table).or_insert(st);
            }
        }
    }
    // else the project's first claim of the table, in whichever file it is
    let elsewhere = |table: &str| {
        let site = schema.claims.get(table)?;
        let f = project.files.get(site.file)?;
        Some((f, f.sql.statements.get(site.statement)?))
    };
    let in_claiming_transaction = earlier_in_transaction(file);
    for st in &file.sql.statements {
        let Some(lt) = lock_table(st, schema) else {
            continue;
        };
        let Some((claim_file, claim)) = claims
            .get(&lt.table)
            .map(|c| (file, *c))
            .or_else(|| elsewhere(&lt.table))
        else {
            continue;
        };
        if !unfenced_completion(st, &lt, schema)
            || in_claiming_transaction.contains_key(&std::ptr::from_ref(st))
        {
            continue;
        }
        let Some(filter) = &st.filter else { continue };
        let owner = lt.owner.as_deref().unwrap_or("owner");
        let expiry = lt.expiry.as_deref().unwrap_or("expires_at");
        let (what, outcome) = if st.kind == locklint_ir::sql::StatementKind::Delete {
            (
                "this delete of",
                "this delete removes the job they are working on",
            )
        } else {
            ("this write to", "this write lands on their claim")
        };
        let mut d = warning(sql_diagnostic(
            &INFO,
            file,
            filter.span,
            format!("does not check `{owner}`"),
            format!("{what} a leased `{}` row does not check that this worker still holds it; once the lease (`{expiry}`) lapses another worker claims the row, and {outcome}: the job's effect is applied twice, and a retry is not idempotent", lt.table),
            format!("add `AND {owner} = $n` with the worker's own id (or the attempt or lease token the claim wrote), and treat zero affected rows as a lost lease"),
        ));
        d.related.push(related(
            claim_file,
            claim.span,
            "the row is claimed here, with a lease that lapses",
        ));
        d.fix = owner_check_fix(
            file,
            st,
            filter.span,
            owner,
            "write only while holding the lease",
            "the worker's id",
        );
        out.push(d);
    }
}

/// (d): a worker's write that finishes a row covered by a lease on another table's row (a job
/// of a leased queue: `DELETE FROM jobs WHERE id = job_id` in a routine that then frees the
/// queue's lock as its holder), after a claim that row-locked the queue joined to its jobs and
/// takes a queue whose lease time has passed. Not in the claim's own routine (one
/// transaction), and not when the write shows the lease is still held.
fn covered_completions(file: &FileIr, project: &Project, out: &mut Vec<Diagnostic>) {
    let schema = &project.schema;
    let in_claiming_transaction = earlier_in_transaction(file);
    for (at, st) in file.sql.statements.iter().enumerate() {
        let Some(jl) = unfenced_covered_completion(file, at, schema) else {
            continue;
        };
        let Some(claim_file) = project.files.get(jl.claim.file) else {
            continue;
        };
        let Some(claim) = claim_file.sql.statements.get(jl.claim.statement) else {
            continue;
        };
        let same_transaction = std::ptr::eq(claim_file, file)
            && claim.body == st.body
            && claim.embedded == st.embedded;
        if same_transaction || in_claiming_transaction.contains_key(&std::ptr::from_ref(st)) {
            continue;
        }
        let Some(filter) = &st.filter else { continue };
        let table = st.table.as_deref().unwrap_or_default();
        let (what, outcome) = if st.kind == locklint_ir::sql::StatementKind::Delete {
            (
                "this delete of",
                "removes the job the new holder is working on",
            )
        } else {
            (
                "this write to",
                "lands on the new holder's attempt: its effect is applied twice, and a retry is not idempotent",
            )
        };
        let lock = &jl.lock;
        let (owner, expiry) = (&jl.owner, &jl.expiry);
        out.push(keyed_write_finding(
            file,
            st,
            filter.span,
            [
                format!("does not check the lease on `{lock}`"),
                format!("{what} a `{table}` row does not check that this worker still holds the lease on its `{lock}` row; the claim takes a `{lock}` row whose `{expiry}` has passed, so once this worker's lease lapses another worker claims the same `{table}` row, and this write {outcome}"),
                format!("keep the write to the lease's holder: add `AND EXISTS (SELECT 1 FROM {lock} WHERE .. AND {owner} = <the worker's id>)` (or an attempt or lease token the claim wrote) to the `WHERE`, and treat zero affected rows as a lost lease"),
            ],
            "keyed without the lease",
            related(
                claim_file,
                claim.span,
                format!("the claim row-locks `{lock}` joined to `{table}`, with a lease that lapses"),
            ),
        ));
    }
}

/// A warning on a write keyed without the lease it runs under: shown where the statement
/// starts when its `WHERE` is on a later line (see `head_above`; the `WHERE` is then related,
/// with `keyed`), with `[label, message, help]`, and the statement the lease comes from.
fn keyed_write_finding(
    file: &FileIr,
    st: &Statement,
    condition: locklint_ir::source::Span,
    [label, message, help]: [String; 3],
    keyed: &str,
    lease: Related,
) -> Diagnostic {
    let head = head_above(file, st, condition);
    let mut d = warning(sql_diagnostic(
        &INFO,
        file,
        head.unwrap_or(condition),
        label,
        message,
        help,
    ));
    if head.is_some() {
        d.related.push(related(file, condition, keyed));
    }
    d.related.push(lease);
    d
}

/// (e): a worker's write that finishes a job of a work table whose rows a worker holds by
/// their state until a time passes (a claim takes back a `running` job whose `updated_at` has
/// passed), keyed only by the job, outside the function or routine that takes the job back.
fn state_completions(file: &FileIr, project: &Project, out: &mut Vec<Diagnostic>) {
    let schema = &project.schema;
    let in_claiming_transaction = earlier_in_transaction(file);
    // the Rust function a statement runs in, or the SQL routine it is part of
    let scope = |f: &FileIr, st: &Statement| {
        let func = f.embedded.get(st.embedded).and_then(|e| e.func);
        (func, st.body.map(|b| (st.embedded, b)))
    };
    for st in &file.sql.statements {
        let Some(sl) = unfenced_state_completion(st, schema) else {
            continue;
        };
        let Some(lapse_file) = project.files.get(sl.lapse.file) else {
            continue;
        };
        let Some(lapse) = lapse_file.sql.statements.get(sl.lapse.statement) else {
            continue;
        };
        let own = scope(file, st);
        let same_scope = std::ptr::eq(lapse_file, file)
            && own != (None, None)
            && scope(lapse_file, lapse) == own;
        if same_scope || in_claiming_transaction.contains_key(&std::ptr::from_ref(st)) {
            continue;
        }
        let Some(filter) = &st.filter else { continue };
        let table = st.table.as_deref().unwrap_or_default();
        let (state, held, expiry) = (&sl.state, &sl.held, &sl.expiry);
        let (what, outcome) = if st.kind == locklint_ir::sql::StatementKind::Delete {
            (
                "this delete of",
                "this delete removes the job the new holder is running",
            )
        } else {
            (
                "this write to",
                "this write lands on the new holder's run: its effect is applied twice, and a retry is not idempotent",
            )
        };
        out.push(keyed_write_finding(
            file,
            st,
            filter.span,
            [
                format!("does not check that the job is still held (`{state}`, `{expiry}`)"),
                format!("{what} a `{table}` job does not check that this worker still holds it; a job stays `{held}` only until its `{expiry}` has passed, then it is taken back and another worker runs it, so {outcome}"),
                format!("keep the write to the holder: add `AND {state} = '{held}'` with the `{expiry}` (or an attempt token) this worker's claim wrote to the `WHERE`, and treat zero affected rows as a lost claim"),
            ],
            "keyed by the job alone",
            related(
                lapse_file,
                lapse.span,
                format!("a job still `{held}` whose `{expiry}` has passed is taken back here"),
            ),
        ));
    }
}

/// (a): compare the fencing column with the token the statement writes to it (`AND fence <
/// $1`, or `WHERE t.fence < EXCLUDED.fence` on an upsert): safe. When the statement does not
/// write the column, or writes it from the table's own columns (`fence = locked_until`: no
/// token comes in, and the comparison would not count as a guard), the token is unknown and
/// the fix is only shown.
fn fence_guard(file: &FileIr, st: &Statement, fence: &str) -> Option<locklint_ir::diagnostic::Fix> {
    use locklint_ir::diagnostic::Applicability;
    let written = st
        .assignments
        .iter()
        .find(|a| a.column == fence)
        .filter(|a| !a.value.columns.iter().any(|c| st.is_target(c)))
        .and_then(|a| a.value.span)
        .and_then(|s| file.file.text.get(s.start..s.end))
        .map(str::to_string);
    match (&st.filter, st.upsert_span) {
        (None, Some(upsert)) if st.conflict == locklint_ir::sql::Conflict::DoUpdate => {
            let table = st.names.last().cloned().or_else(|| st.table.clone())?;
            let (value, applicability) = match &written {
                Some(v) => (v.clone(), Applicability::Safe),
                None => (format!("EXCLUDED.{fence}"), Applicability::DisplayOnly),
            };
            let text = format!(" WHERE {table}.{fence} < {value}");
            sql_insert_fix(
                file,
                st,
                end_before_semicolon(file, upsert),
                &text,
                format!(
                    "overwrite only with a newer fencing token (`{}`)",
                    text.trim()
                ),
                applicability,
            )
        }
        (Some(filter), _) if st.conflict == locklint_ir::sql::Conflict::None => {
            let condition = file
                .file
                .text
                .get(filter.span.start..filter.span.end)
                .unwrap_or("")
                .to_ascii_lowercase();
            let (value, mut applicability) = match &written {
                Some(v) => (v.clone(), Applicability::Safe),
                None => (st.placeholders.next(), Applicability::DisplayOnly),
            };
            if condition.contains(" or ") {
                applicability = Applicability::DisplayOnly;
            }
            if compares_with(file, filter, fence, &value) {
                // the guard is there, though not recognised as one (the statement's
                // placeholders do not parse as parameters): adding it again changes nothing
                return None;
            }
            let text = format!(" AND {fence} < {value}");
            sql_insert_fix(
                file,
                st,
                end_before_semicolon(file, filter.span),
                &text,
                format!("write only with a newer fencing token (`{}`)", text.trim()),
                applicability,
            )
        }
        _ => None,
    }
}

/// Whether the condition already has `fence < value` (or `value > fence`), by the text of its
/// operands.
fn compares_with(
    file: &FileIr,
    filter: &locklint_ir::sql::Filter,
    fence: &str,
    value: &str,
) -> bool {
    use locklint_ir::sql::{CmpOp, Operand};
    let text = |v: &Operand| {
        v.span
            .and_then(|s| file.file.text.get(s.start..s.end))
            .map(str::trim)
    };
    let is_fence = |v: &Operand| v.bare.as_ref().is_some_and(|c| c.name == fence);
    filter.comparisons.iter().any(|c| {
        (c.op == CmpOp::Lt && is_fence(&c.left) && text(&c.right) == Some(value))
            || (c.op == CmpOp::Gt && is_fence(&c.right) && text(&c.left) == Some(value))
    })
}
