//! Building the lock inventory: loads and analyses the files like `check` does, then groups
//! Redis operations by resolved key template, advisory locks by key and lock tables by table,
//! and collects per lock its acquires, releases, renewals, fencing and the writes made while
//! it is held. [`super::verdict`] then decides purpose and verdict.

mod advisory;
mod advisory_keys;
mod callers;
mod chains;
mod effects;
mod guards;
mod redis;
mod runtime;
mod runtime_calls;
mod rust_pass;
mod scripts;
mod stored;
mod table;
mod writes;

use advisory::advisory_locks;
use redis::redis_locks;
use runtime::runtime_locks;
use table::table_locks;
use writes::{target, writes_after};

use super::{
    verdict, Acquire, Audit, Fencing, Finding, Lock, Mechanism, Purpose, PurposeKind,
    PurposeSource, Release, Renewal, Site, TokenKind, Verdict, Write,
};
use crate::config::Settings;
use crate::diagnostic::Diagnostic;
use crate::engine::{self, ConfigSource, Options};
use crate::frontend::sql::lex as sql_lex;
use crate::ir::sql::{Conflict, Statement, StatementKind};
use crate::ir::{Event, Executor, FileIr, Function, OpKind, ResultUse, Value};
use crate::locks::schema::Schema;
use crate::locks::sql::{
    fence_column, has_fence_guard, has_owner_check, is_idempotent, issues_fences, lock_table,
    lock_write, runs, LockWrite,
};
use crate::locks::{Project, Trace, TraceOp};
use crate::source::Span;
use crate::vocabulary;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

/// Analyse `opts.paths` and build the inventory (the files are read and parsed once, by the
/// engine, which also runs the rules whose findings the inventory attaches).
pub fn run(opts: &Options) -> Audit {
    let (mut report, locks) = engine::run_with(opts, |a| {
        inventory(a.project, a.settings, &a.report.findings)
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
    audit.files = report.files;
    audit.locks = locks.unwrap_or_default();
    // the locks of the selection: those it takes, releases, renews or protects (their other
    // sites, elsewhere in the project, are still listed)
    if report.selected.len() < report.project_files {
        audit.locks.retain(|l| {
            l.sites().any(|s| {
                s.file
                    .as_ref()
                    .is_some_and(|f| report.selected.contains(&f.path))
            })
        });
    }
    audit
}

/// The inventory of an analysed project, with the findings of the normal rules attached.
pub fn inventory(project: &Project, settings: &Settings, findings: &[Diagnostic]) -> Vec<Lock> {
    let mut out = Vec::new();
    out.extend(redis_locks(project));
    out.extend(advisory_locks(project));
    out.extend(table_locks(project));
    out.extend(runtime_locks(project));
    for l in &mut out {
        if l.mechanism_label.is_empty() {
            l.mechanism_label = l.mechanism.label().to_string();
        }
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
        mechanism_label: String::new(),
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
        op_sites: Vec::new(),
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
            || lock.op_sites.iter().any(|s| s.overlaps(p, d.primary.span))
            || (d.rule != "unfenced-write"
                && lock.op_sites.is_empty()
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
            help: d.help.clone(),
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
