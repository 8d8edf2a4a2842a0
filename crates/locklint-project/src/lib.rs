//! Project-wide facts: resolves key templates across files, expands lock helpers at their
//! call sites into per-function traces, and decides which keys are locks.

mod expand;
pub mod lease;
mod marking;
mod orm;
pub mod packages;
pub mod reach;
mod resolve;
pub mod schema;
mod settings;
pub mod sql;
mod trace;
pub mod ttl;

use expand::Expander;
pub use expand::KeyMade;
use marking::{collect_facts, mark_locks};
pub use marking::{key_matches, template_matches, LockFacts};
pub use orm::resolve_entity_tables;
pub use packages::{PackageSet, Packages};
use resolve::Index;
pub use settings::{parse_version, FixSettings, ProjectSettings};
pub use trace::{scoped_identity, Trace, TraceKey, TraceOp};

use locklint_ir::{Call, Event, FileIr, FnId, Function, KeyRef};
use std::collections::{HashMap, HashSet};

/// The analysed project: every file's intermediate form plus the derived traces and facts.
pub struct Project<'a> {
    pub files: &'a [FileIr],
    pub traces: Vec<Trace<'a>>,
    pub facts: LockFacts,
    /// Tables, fencing columns, lock tables and unique keys from every file's SQL.
    pub schema: crate::schema::Schema,
    /// Key templates declared efficiency-only locks in the configuration.
    pub efficiency_locks: Vec<String>,
    index: Index<'a>,
}

impl<'a> Project<'a> {
    /// The function with this id.
    pub fn function(&self, id: FnId) -> &'a Function {
        self.index.func(id)
    }

    /// The call sites that reach a function (resolved as helper expansion resolves them):
    /// each caller with the call event.
    pub fn callers_of(&self, id: FnId) -> Vec<(FnId, &'a Call)> {
        let Some(sites) = self.index.callers.get(&id) else {
            return Vec::new();
        };
        sites
            .iter()
            .filter_map(
                |&(caller, at)| match self.index.func(caller).events.get(at) {
                    Some(Event::Call(c)) => Some((caller, &**c)),
                    _ => None,
                },
            )
            .collect()
    }

    /// The function a call reaches, when it can be told (the call graph is resolved once).
    pub fn callee(&self, call: &Call) -> Option<FnId> {
        self.index.target(call)
    }

    /// A key template with its project-wide consts, struct fields and key helpers resolved.
    pub fn resolve_key(&self, key: &KeyRef) -> KeyRef {
        self.index.resolve_key(key, 0)
    }

    /// Whether the configuration declares this lock key `purpose = "efficiency"`.
    pub fn is_efficiency_lock(&self, key: &KeyRef) -> bool {
        let (template, shown) = (key.template(), key.display());
        self.efficiency_locks
            .iter()
            .any(|t| template_matches(t, &template) || template_matches(t, &shown))
    }
}

/// Build traces for every function that touches Redis and decide which keys are locks.
pub fn analyze(files: &[FileIr]) -> Project<'_> {
    analyze_with(files, &ProjectSettings::default())
}

/// [`analyze`] with configured settings: extra lock words, column names, efficiency locks.
/// Every file's functions are callable from every other file.
pub fn analyze_with<'a>(files: &'a [FileIr], settings: &ProjectSettings) -> Project<'a> {
    static NO_PACKAGES: Packages = Packages::none();
    analyze_in(files, settings, &NO_PACKAGES)
}

/// [`analyze_with`] in a project whose files belong to packages: a call resolves only among
/// the functions its package can see.
pub fn analyze_in<'a>(
    files: &'a [FileIr],
    settings: &ProjectSettings,
    packages: &'a Packages,
) -> Project<'a> {
    let lock_words = &settings.lock_key_patterns;
    let idx = Index::new(files, packages);
    let mut traces = Vec::new();
    let mut roots: Vec<FnId> = idx.touches.iter().copied().collect();
    roots.sort();
    let mut shared = expand::Shared::default();
    for root in roots {
        let mut ex = Expander {
            idx: &idx,
            root,
            ops: Vec::new(),
            call_reads: HashMap::new(),
            stack: Vec::new(),
            inlined: 0,
            shared: &mut shared,
        };
        ex.expand(root, None, None, None, &[], &[], None, &[]);
        // a trace lives as long as the project: no room for operations that never come
        ex.ops.shrink_to_fit();
        traces.push(Trace::new(
            idx.func(root),
            files[root.file].file.clone(),
            ex.ops,
        ));
    }
    let mut acquired_nx = HashSet::new();
    mark_locks(&mut traces, &mut acquired_nx, lock_words);
    let mut facts = collect_facts(&traces);
    facts.acquired_nx = acquired_nx;
    facts.fix = settings.fix;
    Project {
        files,
        traces,
        facts,
        schema: crate::schema::schema_with(
            files,
            crate::schema::ColumnNames::with(
                &settings.fence_columns,
                &settings.owner_columns,
                &settings.expiry_columns,
            ),
        ),
        efficiency_locks: settings.efficiency_locks.clone(),
        index: idx,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_words() {
        assert!(key_matches(&KeyRef::lit("lock:invoice:{}"), &[]));
        assert!(key_matches(&KeyRef::lit("app:jobLock"), &[]));
        assert!(key_matches(&KeyRef::lit("redlock:x"), &[]));
        assert!(key_matches(&KeyRef::lit("leader-election"), &[]));
        assert!(!key_matches(&KeyRef::lit("block:42"), &[]));
        assert!(!key_matches(&KeyRef::lit("clock_skew"), &[]));
        assert!(!key_matches(&KeyRef::lit("leaderboard:weekly"), &[]));
        assert!(!key_matches(&KeyRef::lit("release-notes"), &[]));
        assert!(!key_matches(&KeyRef::lit("user:{}:profile"), &[]));
    }

    #[test]
    fn declared_templates_match_keys() {
        assert!(template_matches("lock:report:{id}", "lock:report:7"));
        assert!(template_matches("lock:report:{id}", "lock:report:{}"));
        assert!(template_matches("lock:{}:x:{}", "lock:a:x:b"));
        assert!(!template_matches("lock:report:{id}", "lock:invoice:7"));
        assert!(template_matches("lock:exact", "lock:exact"));
        assert!(!template_matches("lock:exact", "lock:exact2"));
    }
}
