//! Building the lock inventory: loads and analyses the files like `check` does, then groups
//! Redis operations by resolved key template, advisory locks by key and lock tables by table,
//! and collects per lock its acquires, releases, renewals, fencing and the writes made while
//! it is held. [`super::verdict`] then decides purpose and verdict.

use super::{
    verdict, Acquire, Audit, Fencing, Finding, Lock, Mechanism, Purpose, PurposeKind,
    PurposeSource, Release, Renewal, Site, TokenKind, Verdict, Write,
};
use crate::config::{Mode, Resolver, Settings};
use crate::diagnostic::Diagnostic;
use crate::engine::{self, ConfigSource, Options};
use crate::frontend::sql::lex as sql_lex;
use crate::frontend::sql::{Conflict, Kind, Schema, Statement};
use crate::ir::{Event, Executor, FileIr, Function, OpKind, ResultUse, Value};
use crate::locks::{self, Project, Trace, TraceOp};
use crate::rules::sql_matching::{
    exec_method, fence_column, has_fence_guard, has_owner_check, is_idempotent, issues_fences,
    lock_table, lock_write, runs, LockWrite,
};
use crate::source::Span;
use crate::vocabulary;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

/// Analyse `opts.paths` and build the inventory (the files are read and parsed once, by the
/// engine, which also runs the rules whose findings the inventory attaches).
pub fn run(opts: &Options) -> Audit {
    let mut report = engine::run(&Options {
        keep_irs: true,
        ..opts.clone()
    });
    let mut audit = Audit {
        empty_paths: std::mem::take(&mut report.empty_paths),
        notes: report
            .notes
            .iter()
            .map(|n| format!("{}: {}", n.path, n.message))
            .collect(),
        ..Default::default()
    };
    if let Some(e) = report.config_error {
        audit.errors.push(e.trim_end().to_string());
        return audit;
    }
    for e in &report.errors {
        audit.errors.push(format!(
            "{}: {}",
            crate::source::display_path(&e.path),
            e.message
        ));
    }
    let settings = project_settings(opts);
    audit.files = report.files;
    let irs = std::mem::take(&mut report.irs);
    audit.locks = inventory(&irs, &settings, &report.findings);
    audit
}

fn project_settings(opts: &Options) -> Settings {
    let resolver = match &opts.config {
        ConfigSource::Isolated => return Settings::default(),
        ConfigSource::Discover => Resolver::new(Mode::Discover),
        ConfigSource::File(p) => match crate::config::load(p) {
            Ok(Some(s)) => Resolver::new(Mode::Fixed(Arc::new(s))),
            _ => return Settings::default(),
        },
    };
    opts.paths
        .first()
        .and_then(|p| resolver.for_file(p).ok())
        .map(|s| (*s).clone())
        .unwrap_or_default()
}

/// The inventory of analysed files, with the findings of the normal rules attached.
pub fn inventory(irs: &[FileIr], settings: &Settings, findings: &[Diagnostic]) -> Vec<Lock> {
    let project = locks::analyze_with(irs, settings);
    let mut out = Vec::new();
    out.extend(redis_locks(&project));
    out.extend(advisory_locks(&project));
    out.extend(table_locks(&project));
    out.extend(runtime_locks(&project));
    for l in &mut out {
        attach_findings(l, findings);
        l.purpose = verdict::purpose(l, settings);
        verdict::decide(l);
    }
    out.sort_by(|a, b| {
        let key = |l: &Lock| {
            l.first_site()
                .map(|s| (s.path.clone(), s.line))
                .unwrap_or_default()
        };
        key(a).cmp(&key(b)).then(a.name.cmp(&b.name))
    });
    out
}

fn empty_lock(name: String, mechanism: Mechanism) -> Lock {
    Lock {
        name,
        mechanism,
        acquires: Vec::new(),
        releases: Vec::new(),
        renewals: Vec::new(),
        renewed: false,
        fencing: Fencing::default(),
        protects: Vec::new(),
        purpose: Purpose {
            value: PurposeKind::Efficiency,
            source: PurposeSource::Inferred,
        },
        verdict: Verdict::FineForEfficiency,
        reasons: Vec::new(),
        next_steps: Vec::new(),
        findings: Vec::new(),
    }
}

fn push_site(v: &mut Vec<Site>, s: Site) {
    if !v.iter().any(|x| x.same(&s)) {
        v.push(s);
    }
}

fn push_write(v: &mut Vec<Write>, w: Write) {
    if !v.iter().any(|x| x.site.same(&w.site)) {
        v.push(w);
    }
}

// ---------------------------------------------------------------- Redis

/// The group a Redis operation belongs to: its resolved key template, a struct field, or
/// (unresolved) the key as written in its function.
fn redis_group(o: &TraceOp) -> String {
    if o.key.has_literal() {
        return o.key.template();
    }
    if let Some(id) = &o.identity {
        if let Some(f) = id.strip_prefix("f:") {
            return format!("self.{}", f.rsplit('.').next().unwrap_or(f));
        }
    }
    format!(
        "{{{}}} in {}()",
        o.key.display().trim_matches(['{', '}']),
        o.func.name
    )
}

fn words_of(o: &TraceOp) -> Vec<String> {
    let mut w = vocabulary::words(&o.key.template());
    for n in &o.key.names {
        w.extend(vocabulary::words(n));
    }
    w
}

fn is_fence_key(o: &TraceOp) -> bool {
    vocabulary::has_fence_word(&words_of(o))
}

/// The literal number following `marker` in `text` (`"PX").arg(30_000)`, `PX(30)`).
fn number_after(text: &str, marker: &str) -> Option<Option<u64>> {
    let upper = text.to_ascii_uppercase();
    let mut from = 0;
    while let Some(i) = upper[from..].find(marker) {
        let at = from + i;
        from = at + marker.len();
        // a whole word: `PX` but not `PXAT`, not `SPX`
        let before = upper[..at].chars().last();
        let after = upper[at + marker.len()..].chars().next();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            || after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            continue;
        }
        let mut rest = &text[at + marker.len()..];
        loop {
            let t = rest
                .trim_start_matches([' ', '\t', '\n', '\r', '"', '\'', ')', '(', ',', '.', '&']);
            let t = t.strip_prefix("arg").unwrap_or(t);
            if t.len() == rest.len() {
                break;
            }
            rest = t;
        }
        let digits: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '_')
            .filter(|c| *c != '_')
            .collect();
        return Some(digits.parse().ok());
    }
    None
}

/// The last argument of a call snippet, when it is a number literal.
fn last_number_arg(text: &str) -> Option<u64> {
    let inner = text.trim_end().strip_suffix(')')?;
    let last = inner.rsplit(',').next()?.trim();
    let digits: String = last.chars().filter(|c| *c != '_').collect();
    digits.parse().ok()
}

fn ttl_of(o: &TraceOp, text: &str) -> String {
    let unit = |n: Option<u64>, ms: bool| match n {
        Some(n) if ms => format!("{n} ms"),
        Some(n) => format!("{n} s"),
        None => "dynamic".to_string(),
    };
    for (m, ms) in [("PX", true), ("EX", false)] {
        if let Some(n) = number_after(text, m) {
            return unit(n, ms);
        }
    }
    let cmd = o.op.command.to_ascii_lowercase();
    if cmd.contains("pset_ex") || cmd.contains("pexpire") {
        return unit(last_number_arg(text), true);
    }
    if cmd.contains("set_ex") || cmd.contains("expire") {
        return unit(last_number_arg(text), false);
    }
    match o.op.kind {
        OpKind::Write {
            expiry: Some(_), ..
        }
        | OpKind::Expire => "dynamic".to_string(),
        _ => "none".to_string(),
    }
}

fn op_site(o: &TraceOp) -> Site {
    Site::new(&o.file, o.op.span)
}

/// Whether the path to `o` depends on a read of the same key (compare in the client).
fn client_compared(t: &Trace, o: &TraceOp) -> bool {
    t.ops
        .iter()
        .any(|r| r.op.kind == OpKind::Read && t.same_key(r, o) && o.deps.contains(&r.op.id))
}

fn script_is_renewal(o: &TraceOp) -> bool {
    vocabulary::names_renewal(&o.func.name)
}

fn redis_locks(project: &Project) -> Vec<Lock> {
    // which op nodes are seen with a resolved template somewhere
    let mut resolved: HashSet<crate::ir::NodeId> = HashSet::new();
    for t in &project.traces {
        for o in &t.ops {
            if o.is_lock && o.key.has_literal() {
                resolved.insert(o.op.id);
            }
        }
    }
    let mut groups: BTreeMap<String, Vec<(&Trace, &TraceOp)>> = BTreeMap::new();
    for t in &project.traces {
        for o in &t.ops {
            if !o.is_lock || (!o.key.has_literal() && resolved.contains(&o.op.id)) {
                continue;
            }
            groups.entry(redis_group(o)).or_default().push((t, o));
        }
    }
    let mut out = Vec::new();
    for (name, ops) in groups {
        if !ops
            .iter()
            .any(|(_, o)| matches!(o.op.kind, OpKind::Write { .. }))
        {
            // a key only read or deleted here (its acquire is elsewhere, unresolved)
            continue;
        }
        let mut lock = empty_lock(name, Mechanism::RedisSetNxPx);
        let mut acquires: Vec<(Acquire, crate::ir::NodeId, bool)> = Vec::new();
        let mut mechanisms = Vec::new();
        for (t, o) in &ops {
            let site = op_site(o);
            match &o.op.kind {
                OpKind::Write { nx, expiry, .. } if !o.op.kind.is_renewing_write() => {
                    let mech = if !nx {
                        Mechanism::RedisGetThenSet
                    } else if expiry.is_some() {
                        Mechanism::RedisSetNxPx
                    } else if project.facts.acquires_expired_later.contains(&o.op.id) {
                        Mechanism::RedisSetnxExpire
                    } else {
                        Mechanism::RedisSetnxNoExpiry
                    };
                    mechanisms.push(mech);
                    let ignored = matches!(o.result, ResultUse::Ignored(_));
                    let via = o.via.first().map(|(f, s)| Site::new(f, *s));
                    if let Some((a, _, ign)) = acquires.iter_mut().find(|(_, id, _)| *id == o.op.id)
                    {
                        *ign |= ignored;
                        if let Some(v) = via {
                            push_site(&mut a.called_from, v);
                        }
                        continue;
                    }
                    let mut ttl = ttl_of(o, o.file.snippet(o.op.span));
                    if mech == Mechanism::RedisSetnxExpire {
                        // the TTL is in the separate expiry
                        if let Some(i) = t.ops.iter().position(|x| std::ptr::eq(x, *o)) {
                            if let Some(e) = t.later_on_key(i).find(|x| x.op.kind == OpKind::Expire)
                            {
                                ttl = ttl_of(e, e.file.snippet(e.op.span));
                            }
                        }
                    }
                    let token = match &o.op.value {
                        Some((Value::Constant(_), _)) => TokenKind::Constant,
                        Some((Value::Dynamic, _)) => TokenKind::Unique,
                        None => TokenKind::None,
                    };
                    acquires.push((
                        Acquire {
                            site,
                            function: o.func.name.clone(),
                            command: o.op.command.clone(),
                            ttl,
                            token,
                            checked: None,
                            called_from: via.into_iter().collect(),
                        },
                        o.op.id,
                        ignored,
                    ));
                }
                OpKind::Delete | OpKind::CompareDelete => {
                    if lock.releases.iter().any(|r| r.site.same(&site)) {
                        continue;
                    }
                    let compare = o.op.kind == OpKind::CompareDelete;
                    let client = client_compared(t, o);
                    lock.releases.push(Release {
                        site,
                        function: o.func.name.clone(),
                        command: o.op.command.clone(),
                        atomic: compare || o.op.watched,
                        owner_checked: compare || o.op.watched || client,
                    });
                }
                OpKind::Script => {
                    let guarded = script_guarded(project, o);
                    if script_is_renewal(o) {
                        if !lock.renewals.iter().any(|r| r.site.same(&site)) {
                            lock.renewals.push(Renewal {
                                site,
                                function: o.func.name.clone(),
                                command: "Lua script".to_string(),
                                owner_checked: guarded,
                            });
                        }
                    } else if !lock.releases.iter().any(|r| r.site.same(&site)) {
                        lock.releases.push(Release {
                            site,
                            function: o.func.name.clone(),
                            command: "Lua script".to_string(),
                            atomic: true,
                            owner_checked: guarded,
                        });
                    }
                }
                OpKind::Expire if project.facts.expiries_after_acquire.contains(&o.op.id) => {}
                OpKind::Expire | OpKind::Write { .. } => {
                    if lock.renewals.iter().any(|r| r.site.same(&site)) {
                        continue;
                    }
                    lock.renewals.push(Renewal {
                        site,
                        function: o.func.name.clone(),
                        command: o.op.command.clone(),
                        owner_checked: o.op.watched || client_compared(t, o),
                    });
                }
                _ => {}
            }
        }
        // the worst mechanism seen wins (one lock, several styles of taking it)
        mechanisms.sort();
        if let Some(m) = mechanisms.last() {
            lock.mechanism = *m;
        }
        lock.acquires = acquires
            .into_iter()
            .map(|(mut a, _, ignored)| {
                a.checked = Some(!ignored);
                a
            })
            .collect();
        // what the lock protects, per trace that takes it
        for (t, o) in &ops {
            if !o.op.kind.is_acquire() && !matches!(o.op.kind, OpKind::Write { .. }) {
                continue;
            }
            let start = o.at.index;
            let end = ops
                .iter()
                .filter(|(t2, r)| {
                    std::ptr::eq(*t2, *t)
                        && matches!(
                            r.op.kind,
                            OpKind::Delete | OpKind::CompareDelete | OpKind::Script
                        )
                        && r.at.index > start
                })
                .map(|(_, r)| r.at.index)
                .min()
                .unwrap_or(usize::MAX);
            for x in &t.ops {
                if x.at.index <= start || x.at.index >= end || x.is_lock {
                    continue;
                }
                if x.op.kind == OpKind::Incr && is_fence_key(x) {
                    push_site(&mut lock.fencing.minted, op_site(x));
                    continue;
                }
                if matches!(
                    x.op.kind,
                    OpKind::Write { .. } | OpKind::Delete | OpKind::Incr | OpKind::CompareDelete
                ) {
                    push_write(
                        &mut lock.protects,
                        Write {
                            site: op_site(x),
                            function: x.func.name.clone(),
                            target: format!("Redis {} {}", x.op.command, x.key.template()),
                            idempotent: false,
                            fenced: false,
                            same_session: false,
                            conditional_update: false,
                        },
                    );
                }
            }
            let file_idx = o.at.file;
            if let Some(file) = project.files.get(file_idx) {
                sql_writes_after(project, file, t.root, start, end, None, &mut lock);
            }
        }
        out.push(lock);
    }
    out
}

/// Whether the Lua scripts of the file that holds a script op compare the lock's value before
/// every `DEL`/expiry (taken per file: scripts are bound to keys at run time).
fn script_guarded(project: &Project, o: &TraceOp) -> bool {
    let Some(file) = project.files.get(o.op.id.file) else {
        return false;
    };
    let scripts: Vec<_> = file
        .lua
        .scripts
        .iter()
        .filter(|s| !s.writes.is_empty())
        .collect();
    !scripts.is_empty()
        && scripts
            .iter()
            .all(|s| s.writes.iter().all(|(w, _)| w.guarded))
}

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
    if st.kind != Kind::Insert || st.conflict != Conflict::None {
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
    st.kind == Kind::Update
        && st.filter.as_ref().is_some_and(|f| {
            f.comparisons
                .iter()
                .any(|c| c.op == crate::frontend::sql::CmpOp::Eq)
        })
}

fn target(st: &Statement) -> String {
    let verb = match st.kind {
        Kind::Insert => match st.conflict {
            Conflict::None => "INSERT",
            Conflict::Ignore => "INSERT (ignore conflicts)",
            _ => "UPSERT",
        },
        Kind::Update => "UPDATE",
        Kind::Delete => "DELETE",
        _ => "SQL",
    };
    format!("{verb} {}", st.table.as_deref().unwrap_or("?"))
}

/// Collect the SQL writes `func` runs between event indexes `start` and `end`; mint sites of
/// fencing tokens go to the fencing section. `session`: the executor holding a non-expiring
/// lock, for writes that run on it.
fn sql_writes_after(
    project: &Project,
    file: &FileIr,
    func: &Function,
    start: usize,
    end: usize,
    session: Option<Executor>,
    lock: &mut Lock,
) {
    let schema = &project.schema;
    for run in runs(file, func) {
        let at = run.at.index;
        if at <= start || at >= end {
            continue;
        }
        let st = run.statement;
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
                conditional_update: conditional_update(st),
            },
        );
    }
}

// ---------------------------------------------------------------- advisory locks

/// Whether advisory-lock arguments hold a bind parameter (`$1`, `?`, `:name`), outside quotes.
fn parametric(args: &str) -> bool {
    sql_lex::tokens(args)
        .iter()
        .any(|t| t.kind == sql_lex::Kind::Param)
}

fn advisory_locks(project: &Project) -> Vec<Lock> {
    let mut groups: BTreeMap<String, Lock> = BTreeMap::new();
    for file in project.files {
        // statements a function runs, with that function and event index
        let mut ran: HashMap<Span, (&Function, usize, Option<Executor>, Span)> = HashMap::new();
        for f in &file.functions {
            for r in runs(file, f) {
                ran.insert(
                    r.statement.span,
                    (
                        f,
                        r.at.index,
                        r.embedded.exec.as_ref().map(|e| e.executor),
                        r.embedded.exec.as_ref().map(|e| e.span).unwrap_or_default(),
                    ),
                );
            }
        }
        for st in &file.sql.statements {
            for a in &st.advisory {
                if a.all && a.unlock {
                    continue;
                }
                let name = if parametric(&a.args) {
                    format!("advisory({}) in {}", a.args, file.file.display)
                } else {
                    format!("advisory({})", a.args)
                };
                let mech = if a.session {
                    Mechanism::AdvisorySession
                } else {
                    Mechanism::AdvisoryTransaction
                };
                let lock = groups
                    .entry(name.clone())
                    .or_insert_with(|| empty_lock(name, mech));
                let site = Site::new(&file.file, a.span);
                let run = ran.get(&st.span);
                let function = run.map(|r| r.0.name.clone()).unwrap_or_default();
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
                    continue;
                }
                if !a.session {
                    lock.mechanism = Mechanism::AdvisoryTransaction;
                }
                let checked = if a.try_lock {
                    match run {
                        Some(r) => {
                            let m = exec_method(file, r.3);
                            Some(
                                m.starts_with("fetch")
                                    || m.starts_with("query")
                                    || m == "get"
                                    || m.is_empty(),
                            )
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
                    called_from: Vec::new(),
                });
                if let Some((f, at, executor, _)) = run {
                    let end = runs(file, f)
                        .iter()
                        .filter(|r| {
                            r.at.index > *at && r.statement.advisory.iter().any(|u| u.unlock)
                        })
                        .map(|r| r.at.index)
                        .min()
                        .unwrap_or(usize::MAX);
                    let session = executor.or(Some(Executor::Unknown));
                    sql_writes_after(project, file, f, *at, end, session, lock);
                }
            }
        }
    }
    groups
        .into_values()
        .filter(|l| !l.acquires.is_empty())
        .collect()
}

// ---------------------------------------------------------------- lock tables

fn value_text(file: &FileIr, st: &Statement, column: &str) -> Option<String> {
    let v = st
        .values
        .iter()
        .chain(&st.assignments)
        .find(|a| a.column == column)?;
    let span = v.value.span?;
    let t = file.file.snippet(span);
    Some(t.split_whitespace().collect::<Vec<_>>().join(" "))
}

fn table_locks(project: &Project) -> Vec<Lock> {
    let schema = &project.schema;
    let mut groups: BTreeMap<String, Lock> = BTreeMap::new();
    for file in project.files {
        let mut ran: HashMap<Span, (&Function, usize, Span)> = HashMap::new();
        for f in &file.functions {
            for r in runs(file, f) {
                ran.insert(
                    r.statement.span,
                    (
                        f,
                        r.at.index,
                        r.embedded.exec.as_ref().map(|e| e.span).unwrap_or_default(),
                    ),
                );
            }
        }
        for st in &file.sql.statements {
            if st.in_body {
                continue;
            }
            let Some(lt) = lock_table(st, schema) else {
                continue;
            };
            let name = format!("table {}", lt.table);
            let lock = groups
                .entry(name.clone())
                .or_insert_with(|| empty_lock(name, Mechanism::LockTable));
            let site = Site::new(&file.file, st.span);
            let run = ran.get(&st.span);
            let function = run.map(|r| r.0.name.clone()).unwrap_or_default();
            let owner_checked = lt.owner.as_deref().is_some_and(|o| has_owner_check(st, o));
            let fence_col = schema
                .table(&lt.table)
                .and_then(|t| t.fence_column(&schema.names))
                .map(str::to_string)
                .or_else(|| fence_column(st, schema));
            match lock_write(st, &lt) {
                LockWrite::Acquire => {
                    let ttl = lt
                        .expiry
                        .as_deref()
                        .and_then(|c| value_text(file, st, c))
                        .unwrap_or_else(|| "none".to_string());
                    let token = match lt.owner.as_deref().and_then(|c| {
                        st.values
                            .iter()
                            .chain(&st.assignments)
                            .find(|a| a.column == c)
                    }) {
                        Some(a) if a.value.is_constant() => TokenKind::Constant,
                        Some(_) => TokenKind::Unique,
                        None => TokenKind::None,
                    };
                    let text = file.file.snippet(st.span).to_ascii_uppercase();
                    let checked = run.map(|r| {
                        let m = exec_method(file, r.2);
                        text.contains("RETURNING")
                            || m.starts_with("fetch")
                            || m.starts_with("query")
                            || m.contains("rows_affected")
                    });
                    if fence_col
                        .as_deref()
                        .is_some_and(|c| st.written().any(|w| w == c))
                    {
                        push_site(&mut lock.fencing.minted, site.clone());
                    }
                    lock.acquires.push(Acquire {
                        site,
                        function,
                        command: target(st),
                        ttl,
                        token,
                        checked,
                        called_from: Vec::new(),
                    });
                    if let Some((f, at, _)) = run {
                        let key = format!("table {}", lt.table);
                        let end = runs(file, f)
                            .iter()
                            .filter(|r| {
                                r.at.index > *at
                                    && lock_table(r.statement, schema).is_some_and(|l| {
                                        format!("table {}", l.table) == key
                                            && lock_write(r.statement, &l) == LockWrite::Release
                                    })
                            })
                            .map(|r| r.at.index)
                            .min()
                            .unwrap_or(usize::MAX);
                        sql_writes_after(project, file, f, *at, end, None, lock);
                    }
                }
                LockWrite::Release => lock.releases.push(Release {
                    site,
                    function,
                    command: target(st),
                    atomic: true,
                    owner_checked,
                }),
                LockWrite::Renew => lock.renewals.push(Renewal {
                    site,
                    function,
                    command: target(st),
                    owner_checked,
                }),
                LockWrite::Other => {}
            }
        }
    }
    groups
        .into_values()
        .filter(|l| !l.acquires.is_empty())
        .collect()
}

// ---------------------------------------------------------------- locklint-runtime

fn duration_text(text: &str) -> String {
    for (m, unit) in [
        ("from_millis(", "ms"),
        ("from_secs(", "s"),
        ("from_mins(", "min"),
    ] {
        if let Some(i) = text.find(m) {
            let digits: String = text[i + m.len()..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '_')
                .filter(|c| *c != '_')
                .collect();
            if !digits.is_empty() {
                return format!("{digits} {unit}");
            }
        }
    }
    "dynamic".to_string()
}

/// A lock API of a library: which file marker and type name identify it, which method names
/// acquire, and what the lock is.
struct LibraryLock {
    marker: &'static str,
    type_name: &'static str,
    acquire: &'static [&'static str],
    mechanism: Mechanism,
}

/// Lock APIs recognised by name: `locklint-runtime`'s primitives and the Redlock crates.
const LIBRARY_LOCKS: &[LibraryLock] = &[
    LibraryLock {
        marker: "locklint_runtime",
        type_name: "AdvisoryLock",
        acquire: &["try_lock", "lock_timeout", "try_lock_xact", "lock_xact"],
        mechanism: Mechanism::RuntimeAdvisory,
    },
    LibraryLock {
        marker: "locklint_runtime",
        type_name: "RedisLocker",
        acquire: &["try_acquire", "acquire", "acquire_timeout", "with_lock"],
        mechanism: Mechanism::RuntimeRedis,
    },
    LibraryLock {
        marker: "locklint_runtime",
        type_name: "TableLock",
        acquire: &["try_acquire", "acquire_timeout"],
        mechanism: Mechanism::RuntimeTable,
    },
    LibraryLock {
        marker: "rslock",
        type_name: "LockManager",
        acquire: &["lock", "acquire", "acquire_no_guard"],
        mechanism: Mechanism::Redlock,
    },
    LibraryLock {
        marker: "redlock",
        type_name: "RedLock",
        acquire: &["lock"],
        mechanism: Mechanism::Redlock,
    },
];

fn runtime_locks(project: &Project) -> Vec<Lock> {
    let mut groups: BTreeMap<String, Lock> = BTreeMap::new();
    for file in project.files {
        let text = &file.file.text;
        let apis: Vec<&LibraryLock> = LIBRARY_LOCKS
            .iter()
            .filter(|l| text.contains(l.marker) && text.contains(l.type_name))
            .collect();
        if apis.is_empty() {
            continue;
        }
        for f in &file.functions {
            let calls: Vec<&crate::ir::Call> = f
                .events
                .iter()
                .filter_map(|e| match e {
                    // calls on `self` are the library's own internals
                    Event::Call(c) if c.method && !c.on_self => Some(c),
                    _ => None,
                })
                .collect();
            for c in &calls {
                let Some(mech) = apis
                    .iter()
                    .find(|l| l.acquire.contains(&c.name.as_str()))
                    .map(|l| l.mechanism)
                else {
                    continue;
                };
                let key = c
                    .args
                    .iter()
                    .find(|a| a.has_literal())
                    .or(c.args.first())
                    .map(|k| k.template())
                    .unwrap_or_else(|| "?".to_string());
                let name = if c.args.iter().any(|a| a.has_literal()) {
                    key
                } else {
                    format!("{key} in {}()", f.name)
                };
                let lock = groups
                    .entry(name.clone())
                    .or_insert_with(|| empty_lock(name, mech));
                let site = Site::new(&file.file, c.span);
                let snippet = file.file.snippet(c.span);
                lock.acquires.push(Acquire {
                    site,
                    function: f.name.clone(),
                    command: c.name.clone(),
                    ttl: if mech == Mechanism::RuntimeAdvisory {
                        "none (session)".to_string()
                    } else {
                        duration_text(snippet)
                    },
                    token: if mech == Mechanism::RuntimeAdvisory {
                        TokenKind::None
                    } else {
                        TokenKind::Unique
                    },
                    checked: Some(!matches!(c.result, ResultUse::Ignored(_))),
                    called_from: Vec::new(),
                });
                let start = c.id.index;
                for d in calls.iter().filter(|d| d.id.index > start) {
                    let s = Site::new(&file.file, d.span);
                    match d.name.as_str() {
                        "release" | "unlock" => lock.releases.push(Release {
                            site: s,
                            function: f.name.clone(),
                            command: d.name.clone(),
                            atomic: true,
                            owner_checked: true,
                        }),
                        "renew" | "spawn_keep_alive" | "extend" => lock.renewals.push(Renewal {
                            site: s,
                            function: f.name.clone(),
                            command: d.name.clone(),
                            owner_checked: true,
                        }),
                        "fence" => push_site(&mut lock.fencing.minted, s),
                        _ => {}
                    }
                }
                let session = (mech == Mechanism::RuntimeAdvisory).then_some(Executor::Connection);
                sql_writes_after(project, file, f, start, usize::MAX, session, lock);
            }
        }
    }
    groups.into_values().collect()
}

// ---------------------------------------------------------------- findings

/// Attach the findings of the normal rules whose spans belong to this lock's sites.
fn attach_findings(lock: &mut Lock, findings: &[Diagnostic]) {
    let mut path_sites: Vec<&Site> = Vec::new();
    for a in &lock.acquires {
        path_sites.push(&a.site);
        path_sites.extend(a.called_from.iter());
    }
    path_sites.extend(lock.releases.iter().map(|r| &r.site));
    path_sites.extend(lock.renewals.iter().map(|r| &r.site));
    let write_sites: Vec<&Site> = lock.protects.iter().map(|w| &w.site).collect();
    let mut out: Vec<Finding> = Vec::new();
    for d in findings {
        let p = d.primary.path();
        let on_path = path_sites.iter().any(|s| s.overlaps(p, d.primary.span))
            || (d.rule != "unfenced-write"
                && d.related.iter().any(|r| {
                    path_sites
                        .iter()
                        .any(|s| s.overlaps(r.location.path(), r.location.span))
                }));
        let on_write = write_sites.iter().any(|s| s.overlaps(p, d.primary.span));
        if !(on_path || on_write) {
            continue;
        }
        out.push(Finding {
            rule: d.rule,
            severity: d.severity,
            site: Site::new(&d.primary.file, d.primary.span),
            message: d.message.clone(),
            on_path,
        });
    }
    out.sort_by(|a, b| {
        (a.rule, &a.site.path, a.site.line).cmp(&(b.rule, &b.site.path, b.site.line))
    });
    lock.findings = out;
}

/// Paths as given, for [`Options`].
pub fn options(paths: &[PathBuf], exclude_dirs: &[PathBuf], config: ConfigSource) -> Options {
    Options {
        paths: paths.to_vec(),
        exclude_dirs: exclude_dirs.to_vec(),
        config,
        ..Default::default()
    }
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
