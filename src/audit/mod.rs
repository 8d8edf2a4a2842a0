//! `locklint audit`: an inventory of every lock the front-ends know, grouped by lock (a Redis
//! key template, an advisory-lock key, a lock table), with how it is taken, released, renewed
//! and fenced, what it protects, what it is for, and a verdict.
//!
//! [`model`] builds the inventory from the project facts, [`verdict`] decides purpose and
//! verdict, and one renderer per format turns it into text: [`table`], [`json`],
//! [`markdown`], [`html`].

pub mod html;
pub mod json;
pub mod markdown;
pub mod model;
pub mod steps;
pub mod table;
pub mod verdict;

use crate::diagnostic::Severity;
use crate::source::{FileRef, Span};
use serde::Serialize;

/// Version of the JSON document (`{"version":1,"locks":[...],"summary":{...}}`).
pub const JSON_VERSION: u32 = 1;

/// A place in the code.
#[derive(Debug, Clone, Serialize)]
pub struct Site {
    /// Path relative to the current directory.
    pub path: String,
    pub line: usize,
    pub column: usize,
    #[serde(skip)]
    pub file: Option<FileRef>,
    #[serde(skip)]
    pub span: Span,
}

impl Site {
    pub fn new(file: &FileRef, span: Span) -> Self {
        let lc = file.line_col(span.start);
        Site {
            path: file.display.clone(),
            line: lc.line,
            column: lc.column,
            file: Some(file.clone()),
            span,
        }
    }

    /// `path:line`.
    pub fn short(&self) -> String {
        format!("{}:{}", self.path, self.line)
    }

    fn same(&self, other: &Site) -> bool {
        self.path == other.path && self.span == other.span
    }

    fn overlaps(&self, path: &str, span: Span) -> bool {
        self.path == path
            && self.span.start < span.end.max(span.start + 1)
            && span.start < self.span.end.max(self.span.start + 1)
    }
}

/// How a lock is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// `SET key token NX PX ttl` (or `EX`): one atomic command.
    RedisSetNxPx,
    /// `SETNX` followed by a separate `EXPIRE`.
    RedisSetnxExpire,
    /// `SETNX` / `SET NX` with no expiry at all.
    RedisSetnxNoExpiry,
    /// A read (`GET`/`EXISTS`) then a plain `SET`.
    RedisGetThenSet,
    /// `pg_advisory_lock` / `pg_try_advisory_lock` (session level).
    AdvisorySession,
    /// `pg_advisory_xact_lock` / `pg_try_advisory_xact_lock`.
    AdvisoryTransaction,
    /// A row in a lock table.
    LockTable,
    /// `locklint-runtime`'s `RedisLocker`.
    RuntimeRedis,
    /// `locklint-runtime`'s `AdvisoryLock` or `AdvisoryLocker`.
    RuntimeAdvisory,
    /// `locklint-runtime`'s `TableLock`.
    RuntimeTable,
    /// `locklint-runtime`'s `Lock` trait: a locker of any backend (generic code).
    RuntimeLock,
    /// Redlock across several Redis nodes (the `rslock` / `redlock` crates).
    Redlock,
}

impl Mechanism {
    pub fn label(self) -> &'static str {
        match self {
            Mechanism::RedisSetNxPx => "Redis SET NX PX",
            Mechanism::RedisSetnxExpire => "Redis SETNX + EXPIRE",
            Mechanism::RedisSetnxNoExpiry => "Redis SETNX (no expiry)",
            Mechanism::RedisGetThenSet => "Redis GET + SET",
            Mechanism::AdvisorySession => "advisory (session)",
            Mechanism::AdvisoryTransaction => "advisory (transaction)",
            Mechanism::LockTable => "lock table",
            Mechanism::RuntimeRedis => "locklint-runtime RedisLocker",
            Mechanism::RuntimeAdvisory => "locklint-runtime AdvisoryLock",
            Mechanism::RuntimeTable => "locklint-runtime TableLock",
            Mechanism::RuntimeLock => "locklint-runtime Lock (any backend)",
            Mechanism::Redlock => "Redlock (multi-node Redis)",
        }
    }

    /// Locks that expire on their own (a holder can lose them while it works).
    pub fn expires(self) -> bool {
        !matches!(
            self,
            Mechanism::AdvisorySession
                | Mechanism::AdvisoryTransaction
                | Mechanism::RuntimeAdvisory
        )
    }
}

/// What an acquire writes as the lock's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenKind {
    /// A value computed at run time (a per-holder token).
    Unique,
    /// A literal: every holder writes the same value.
    Constant,
    /// No value identifies the holder.
    None,
}

impl TokenKind {
    pub fn label(self) -> &'static str {
        match self {
            TokenKind::Unique => "unique",
            TokenKind::Constant => "constant",
            TokenKind::None => "none",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Acquire {
    pub site: Site,
    /// The function the acquire is written in.
    pub function: String,
    /// The command as written (`SET ... NX`, `pg_try_advisory_lock`, `INSERT ... ON CONFLICT`).
    pub command: String,
    /// The expiry when written literally (`30000 ms`), `dynamic` when computed, `none`.
    pub ttl: String,
    pub token: TokenKind,
    /// Whether the program reads the acquire's result; `null` when it blocks until acquired
    /// or cannot be told.
    pub checked: Option<bool>,
    /// Call sites through which callers reach this acquire (lock helpers).
    pub called_from: Vec<Site>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Release {
    pub site: Site,
    pub function: String,
    pub command: String,
    /// One server-side step (no window between a check and the delete).
    pub atomic: bool,
    /// Deletes only the caller's own lock.
    pub owner_checked: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Renewal {
    pub site: Site,
    pub function: String,
    pub command: String,
    pub owner_checked: bool,
}

/// Fencing: tokens minted, and the writes under the lock that compare one or not.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Fencing {
    /// Where a fencing token is minted.
    pub minted: Vec<Site>,
    /// SQL writes under the lock that compare a fencing token.
    pub checked_writes: Vec<Site>,
    /// SQL writes under the lock that do not.
    pub unchecked_writes: Vec<Site>,
}

/// A write performed while the lock is held.
#[derive(Debug, Clone, Serialize)]
pub struct Write {
    pub site: Site,
    pub function: String,
    /// `UPDATE invoices`, `INSERT payments`, `Redis SET report:{}`.
    pub target: String,
    /// `ON CONFLICT DO NOTHING`, or an insert a unique constraint makes a no-op on repeat.
    pub idempotent: bool,
    /// Compares a fencing token.
    pub fenced: bool,
    /// Runs on the connection or transaction that holds the (non-expiring) lock.
    pub same_session: bool,
    /// An effect outside the program's databases (an object store, a queue, an HTTP call):
    /// it cannot be fenced unless the service it reaches checks a token.
    pub external: bool,
    /// A single-row `UPDATE ... WHERE` that a condition could make safe alone.
    #[serde(skip)]
    pub conditional_update: bool,
    /// Follows a read of the same table made under the lock: the value written may depend
    /// on it (a read-modify-write).
    #[serde(skip)]
    pub after_read: bool,
}

impl Write {
    /// Safe without the lock's help. A fenced write that follows a plain read of its table
    /// is not: the fence is compared only when writing, so a stale holder that writes first
    /// is accepted and the newer holder, which read the same row, then writes over its
    /// update (the read must claim the row with the fence).
    pub fn safe_alone(&self) -> bool {
        self.idempotent || (self.fenced && !self.after_read)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PurposeKind {
    Efficiency,
    Correctness,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PurposeSource {
    /// `[locks."<template>"] purpose` in the configuration.
    Config,
    /// From the writes under the lock.
    Inferred,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Purpose {
    pub value: PurposeKind,
    pub source: PurposeSource,
}

impl Purpose {
    pub fn label(self) -> String {
        let v = match self.value {
            PurposeKind::Efficiency => "efficiency",
            PurposeKind::Correctness => "correctness",
        };
        match self.source {
            PurposeSource::Config => format!("{v} (declared)"),
            PurposeSource::Inferred => format!("{v} (inferred)"),
        }
    }
}

/// The audit's conclusion for one lock, from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The lock guards only work that is safe without it.
    NoLockNeeded,
    /// A rare double run is harmless; the lock saves duplicate work.
    FineForEfficiency,
    /// It protects data and cannot be lost while the writes run (same session or transaction).
    FineForCorrectness,
    /// It protects data, but a holder that loses the lock can still write.
    UnsafeForCorrectness,
    /// A lint error on the acquire / release / renew path.
    Broken,
}

impl Verdict {
    pub const ALL: [Verdict; 5] = [
        Verdict::NoLockNeeded,
        Verdict::FineForEfficiency,
        Verdict::FineForCorrectness,
        Verdict::UnsafeForCorrectness,
        Verdict::Broken,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Verdict::NoLockNeeded => "no lock needed",
            Verdict::FineForEfficiency => "fine for efficiency",
            Verdict::FineForCorrectness => "fine for correctness",
            Verdict::UnsafeForCorrectness => "unsafe for correctness",
            Verdict::Broken => "broken",
        }
    }

    pub fn id(self) -> &'static str {
        match self {
            Verdict::NoLockNeeded => "no-lock-needed",
            Verdict::FineForEfficiency => "fine-for-efficiency",
            Verdict::FineForCorrectness => "fine-for-correctness",
            Verdict::UnsafeForCorrectness => "unsafe-for-correctness",
            Verdict::Broken => "broken",
        }
    }
}

/// A lint finding attached to a lock.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub rule: &'static str,
    pub severity: Severity,
    pub site: Site,
    pub message: String,
    /// What the rule says to write instead.
    #[serde(skip)]
    pub help: String,
    /// On the acquire / release / renew path (these make a lock broken when errors).
    #[serde(skip)]
    pub on_path: bool,
}

/// One lock and everything known about it.
#[derive(Debug, Clone, Serialize)]
pub struct Lock {
    /// The key template (`lock:invoice:{}`), advisory key or lock table.
    pub name: String,
    pub mechanism: Mechanism,
    /// The mechanism as the code writes it, for people (`Redis SET NX EX` for a lock whose
    /// acquires all set the expiry in seconds; otherwise the mechanism's label).
    pub mechanism_label: String,
    pub acquires: Vec<Acquire>,
    pub releases: Vec<Release>,
    pub renewals: Vec<Renewal>,
    /// Whether anything renews the lock.
    pub renewed: bool,
    pub fencing: Fencing,
    /// Writes performed while the lock is held.
    pub protects: Vec<Write>,
    pub purpose: Purpose,
    pub verdict: Verdict,
    /// Why the verdict.
    pub reasons: Vec<String>,
    /// What to do next.
    pub next_steps: Vec<String>,
    pub findings: Vec<Finding>,
    /// Every place an operation on the lock's key runs (and the calls that lead there), when
    /// the builder knows them: findings are attached to the lock by these alone, not by
    /// related locations another lock may share (a helper's acquire).
    #[serde(skip)]
    pub op_sites: Vec<Site>,
}

impl Lock {
    /// Every place the lock is taken (and the calls that lead there), released, renewed or
    /// written under.
    pub fn sites(&self) -> impl Iterator<Item = &Site> {
        self.acquires
            .iter()
            .flat_map(|a| std::iter::once(&a.site).chain(&a.called_from))
            .chain(self.releases.iter().map(|r| &r.site))
            .chain(self.renewals.iter().map(|r| &r.site))
            .chain(self.protects.iter().map(|w| &w.site))
    }

    /// The first acquire site, for sorting and tables.
    pub fn first_site(&self) -> Option<&Site> {
        self.acquires.first().map(|a| &a.site)
    }

    /// TTLs of the acquires, deduplicated.
    pub fn ttl(&self) -> String {
        let mut v: Vec<&str> = self.acquires.iter().map(|a| a.ttl.as_str()).collect();
        v.sort();
        v.dedup();
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(", ")
        }
    }

    /// Token kinds of the acquires, deduplicated.
    pub fn token(&self) -> String {
        let mut v: Vec<&str> = self.acquires.iter().map(|a| a.token.label()).collect();
        v.sort();
        v.dedup();
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(", ")
        }
    }

    /// `yes` (minted, and every write is fenced or idempotent), `partly`, `no`.
    pub fn fenced_label(&self) -> &'static str {
        if self.fencing.minted.is_empty() {
            "no"
        } else if self.protects.iter().all(Write::safe_alone) {
            "yes"
        } else {
            "partly"
        }
    }
}

/// The result of an audit run.
#[derive(Debug, Default)]
pub struct Audit {
    pub locks: Vec<Lock>,
    pub files: usize,
    /// Paths that could not be read, invalid configuration.
    pub errors: Vec<String>,
    /// Named paths that hold nothing to analyse.
    pub empty_paths: Vec<std::path::PathBuf>,
    /// Skipped files and unusable manifests (`path: message`).
    pub notes: Vec<String>,
}

/// Counts for the summary.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub locks: usize,
    pub files: usize,
    /// Every verdict with its count (zeros included), in ladder order.
    pub by_verdict: std::collections::BTreeMap<&'static str, usize>,
    pub by_mechanism: std::collections::BTreeMap<&'static str, usize>,
}

impl Audit {
    pub fn summary(&self) -> Summary {
        let mut by_verdict = std::collections::BTreeMap::new();
        for v in Verdict::ALL {
            by_verdict.insert(v.id(), self.locks.iter().filter(|l| l.verdict == v).count());
        }
        let mut by_mechanism = std::collections::BTreeMap::new();
        for l in &self.locks {
            let e = by_mechanism
                .entry(serde_plain(l.mechanism))
                .or_insert(0usize);
            *e += 1;
        }
        Summary {
            locks: self.locks.len(),
            files: self.files,
            by_verdict,
            by_mechanism,
        }
    }
}

/// The serialised (kebab-case) name of a mechanism.
pub fn serde_plain(m: Mechanism) -> &'static str {
    match m {
        Mechanism::RedisSetNxPx => "redis-set-nx-px",
        Mechanism::RedisSetnxExpire => "redis-setnx-expire",
        Mechanism::RedisSetnxNoExpiry => "redis-setnx-no-expiry",
        Mechanism::RedisGetThenSet => "redis-get-then-set",
        Mechanism::AdvisorySession => "advisory-session",
        Mechanism::AdvisoryTransaction => "advisory-transaction",
        Mechanism::LockTable => "lock-table",
        Mechanism::RuntimeRedis => "runtime-redis",
        Mechanism::RuntimeAdvisory => "runtime-advisory",
        Mechanism::RuntimeTable => "runtime-table",
        Mechanism::RuntimeLock => "runtime-lock",
        Mechanism::Redlock => "redlock",
    }
}

/// Which formats `locklint audit` renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuditFormat {
    /// A table for a 100-column terminal (`--wide`: every column).
    Table,
    /// `{"version":1,"locks":[...],"summary":{...}}`.
    Json,
    /// Markdown for a pull request or wiki.
    Markdown,
    /// One self-contained HTML page.
    Html,
}

/// Render an audit; `wide`: the table with every column on one line each.
pub fn render(audit: &Audit, format: AuditFormat, wide: bool) -> String {
    match format {
        AuditFormat::Table => table::render(audit, wide),
        AuditFormat::Json => json::render(audit),
        AuditFormat::Markdown => markdown::render(audit),
        AuditFormat::Html => html::render(audit),
    }
}

/// Run an audit over paths (see [`model::run`]).
pub use model::run;
