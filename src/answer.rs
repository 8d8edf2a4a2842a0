//! The project's stored answer: the findings of a whole run (every file of the project, before
//! the selection, per-file configuration, the baseline and `--changed-since` are applied), kept
//! in the analysis cache with everything they rest on, so that a run over an unchanged project
//! reads no file, parses nothing and runs no rule.
//!
//! What the answer rests on, all of it compared before it is used:
//! - the options that change findings (rules selected or ignored, `--no-prefilter`, the
//!   configuration source, the fix flavour, the project root) and the build of locklint (the
//!   answer sits in the build's directory of the cache);
//! - the list of the project's files (canonical paths, in order): a file added or removed
//!   gives another list;
//! - each file's length and modification time, and the hash of the bytes the run read. A file
//!   whose length or time differs, or whose time is too close to the start of the run that
//!   stored the answer to tell a later write apart ([`RACY_NANOS`]), is read and hashed again:
//!   the same bytes (a file only touched) keep the answer, and so do other bytes of a file
//!   the run left out when it would leave them out too (the run's `parsing::Closure`: the
//!   prefilter does not let them through and they spell no name the rounds asked for in the
//!   file's package), and other bytes of a file the run parsed when they read the same to the
//!   analysis (the same `parsing::Role`: parsed in the same round, the same intermediate form)
//!   and no stored finding points into the file but its own `parse-error` findings (made
//!   again from the new text, saying the same); other bytes discard it;
//! - the content of every configuration file that can govern a project file or name its
//!   package (`locklint.toml`, `.locklint.toml`, `Cargo.toml` in each directory holding a
//!   project file and in every directory above it) and of every file a configuration extends.
//!
//! An answer that does not read back, or was written for other options, is rebuilt with a
//! note. Answers are written to a temporary file and renamed, so runs sharing a cache never
//! read half of one.

use crate::cache::Cache;
use crate::config::Resolver;
use crate::diagnostic::{Applicability, Diagnostic, Edit, Fix, Location, Related, Severity};
use crate::engine::{Note, Options};
use crate::parsing::{Closure, Read, Role};
use crate::source::{display_path, FileRef, SourceFile, Span};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

/// The layout of a stored answer; another layout is not read.
const FORMAT: u32 = 4;

/// A file modified less than this before the start of the run that stored the answer (or
/// after it) may have been written again within the same tick of the file system's clock
/// without its time changing: its bytes are compared, its time is not trusted.
pub const RACY_NANOS: u128 = 2_000_000_000;

/// The configuration files looked for in each directory (as the configuration and the
/// package reader look for them).
const CONFIG_NAMES: [&str; 3] = ["locklint.toml", ".locklint.toml", "Cargo.toml"];

/// Nanoseconds since the epoch of a time (0 before it).
fn nanos(t: SystemTime) -> u128 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// A file's modification time, as a state records it.
pub fn mtime(meta: &std::fs::Metadata) -> u128 {
    meta.modified().map_or(0, nanos)
}

/// Now, as an answer records the start of a run.
pub fn now() -> u128 {
    nanos(SystemTime::now())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The hash of a file's bytes.
pub fn hash(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// How a run found one file of the project.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileState {
    /// Length and modification time, taken before the file was read.
    pub len: u64,
    pub mtime: u128,
    /// The hash of the bytes read; `None` when they were not read (a file too large).
    pub hash: Option<String>,
    pub kind: Kind,
}

/// What the file was to the run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum Kind {
    /// Analysed (parsed or left out by the prefilter), with its line count.
    Analysed { lines: usize },
    /// Skipped with this note (binary, not UTF-8, too large).
    Skipped(String),
}

impl FileState {
    /// The state of a file from its metadata (taken before reading) and the bytes read.
    pub fn of(meta: &std::fs::Metadata, bytes: Option<&[u8]>, kind: Kind) -> FileState {
        FileState {
            len: meta.len(),
            mtime: meta.modified().map_or(0, nanos),
            hash: bytes.map(hash),
            kind,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Loc {
    file: usize,
    span: Span,
}

#[derive(Serialize, Deserialize)]
struct StoredFix {
    message: String,
    applicability: String,
    edits: Vec<(Loc, String)>,
}

#[derive(Serialize, Deserialize)]
struct StoredDiagnostic {
    rule: String,
    error: bool,
    primary: Loc,
    label: String,
    message: String,
    help: String,
    related: Vec<(Loc, String)>,
    fix: Option<StoredFix>,
}

impl StoredDiagnostic {
    /// Whether two findings say the same, wherever they are.
    fn says_as(&self, other: &StoredDiagnostic) -> bool {
        (self.rule == other.rule)
            && (self.error, &self.label, &self.message, &self.help)
                == (other.error, &other.label, &other.message, &other.help)
    }

    /// A finding as stored, its locations placed by `loc`; `None` when one cannot be.
    fn of(d: &Diagnostic, loc: &mut impl FnMut(&Location) -> Option<Loc>) -> Option<Self> {
        let primary = loc(&d.primary)?;
        let mut related = Vec::with_capacity(d.related.len());
        for r in &d.related {
            related.push((loc(&r.location)?, r.label.clone()));
        }
        let fix = match &d.fix {
            None => None,
            Some(f) => {
                let mut edits = Vec::with_capacity(f.edits.len());
                for e in &f.edits {
                    edits.push((loc(&e.location)?, e.replacement.clone()));
                }
                Some(StoredFix {
                    message: f.message.clone(),
                    applicability: applicability_name(f.applicability).to_string(),
                    edits,
                })
            }
        };
        Some(StoredDiagnostic {
            rule: d.rule.to_string(),
            error: d.severity == Severity::Error,
            primary,
            label: d.label.clone(),
            message: d.message.clone(),
            help: d.help.clone(),
            related,
            fix,
        })
    }
}

/// What decided which files the run parsed ([`crate::parsing::Closure`]), stored: per project
/// file whether it was parsed and its package, and the names the rounds asked for, each with
/// how it must appear (`need`), the type it must be a function of, and the packages it was
/// asked in (an index into `sets`; `None`: every package).
#[derive(Serialize, Deserialize, Default)]
struct StoredClosure {
    parsed: Vec<bool>,
    packages: Vec<Option<u32>>,
    asked: Vec<(String, u8, Option<String>, usize)>,
    sets: Vec<Option<Vec<bool>>>,
    /// What the run read of each parsed file ([`Read`]).
    roles: Vec<Option<Read>>,
}

impl StoredClosure {
    fn of(c: &Closure) -> StoredClosure {
        use crate::locks::{reach::Need, PackageSet};
        let mut sets: Vec<Option<Vec<bool>>> = Vec::new();
        let asked = c
            .asked
            .iter()
            .map(|w| {
                let set = match &w.within {
                    PackageSet::All => None,
                    PackageSet::Some(v) => Some(v.clone()),
                };
                let at = sets.iter().position(|s| *s == set).unwrap_or_else(|| {
                    sets.push(set);
                    sets.len() - 1
                });
                let need = match w.need {
                    Need::Call => 0,
                    Need::Function => 1,
                    Need::Struct => 2,
                    Need::Const => 3,
                    Need::Method => 4,
                    Need::Literal => 5,
                };
                (w.name.clone(), need, w.with.clone(), at)
            })
            .collect();
        StoredClosure {
            parsed: c.parsed.clone(),
            packages: c.packages.clone(),
            asked,
            sets,
            roles: c.roles.clone(),
        }
    }

    /// The closure it stores; `None` when it does not read back.
    fn closure(&self) -> Option<Closure> {
        use crate::locks::{reach::Need, reach::Wanted, PackageSet};
        let asked = self
            .asked
            .iter()
            .map(|(name, need, with, set)| {
                let need = match need {
                    0 => Need::Call,
                    1 => Need::Function,
                    2 => Need::Struct,
                    3 => Need::Const,
                    4 => Need::Method,
                    5 => Need::Literal,
                    _ => return None,
                };
                let within = match self.sets.get(*set)? {
                    None => PackageSet::All,
                    Some(v) => PackageSet::Some(v.clone()),
                };
                Some(Wanted {
                    name: name.clone(),
                    need,
                    with: with.clone(),
                    within,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Closure {
            parsed: self.parsed.clone(),
            asked,
            packages: self.packages.clone(),
            roles: self.roles.clone(),
        })
    }
}

/// What a run that stores its answer knows of itself.
pub(crate) struct Run<'a> {
    /// When it started ([`now`]).
    pub started: u128,
    /// The project's files as named, and their canonical paths.
    pub files: &'a [PathBuf],
    pub keys: &'a [PathBuf],
    /// Which files it parsed and why.
    pub closure: &'a Closure,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    format: u32,
    /// The options the answer was computed with ([`key_of`]).
    key: String,
    /// When the run that computed it started.
    started: u128,
    /// Every project file (canonical path) with how the run found it.
    files: Vec<(PathBuf, FileState)>,
    /// Every configuration file that can matter, with the hash of its content.
    configs: Vec<(PathBuf, String)>,
    /// The files findings point into whose text the run had (by index in `files`).
    texts: Vec<usize>,
    findings: Vec<StoredDiagnostic>,
    closure: StoredClosure,
}

/// The options that change the findings of a whole project, as one string.
fn key_of(opts: &Options) -> String {
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let config = match &opts.config {
        crate::engine::ConfigSource::Discover => "discover".to_string(),
        crate::engine::ConfigSource::Isolated => "isolated".to_string(),
        crate::engine::ConfigSource::File(p) => format!("file {}", canonical(p).display()),
    };
    // without a project root, the first named path gives the project-wide settings
    let settings_from = match &opts.project_root {
        Some(root) => format!("root {}", canonical(root).display()),
        None => format!(
            "first {:?}",
            opts.paths
                .first()
                .map(|p| canonical(p).display().to_string())
        ),
    };
    format!(
        "{FORMAT}\n{:?}\n{:?}\n{}\n{config}\n{:?}\n{:?}\n{settings_from}",
        opts.select, opts.ignore, opts.parse_all, opts.redis_version, opts.default_ttl
    )
}

/// The stored answer for one set of options, in one cache.
pub struct Answers {
    path: PathBuf,
    key: String,
    /// Where an edited file's new text is analysed (see `parsed_alike`).
    cache: Cache,
    parse_all: bool,
    /// The configuration files as [`Answers::find`] found them (before the run read the
    /// project's files, after it read its configuration), for [`Answers::store`].
    configs: std::sync::OnceLock<Option<Configs>>,
}

/// Every configuration file that can matter, with the hash of its content, and the newest
/// modification time among them (see [`configs`]).
type Configs = (Vec<(PathBuf, String)>, u128);

/// What looking for a stored answer found.
pub enum Found {
    /// Still valid: how each file was found (in the order of the project's files) and the
    /// findings of the whole project.
    Valid(Vec<FileState>, Vec<Diagnostic>),
    /// None, or one that no longer fits the project.
    Stale,
    /// One that does not read back or was written for other options: rebuilt, with this note.
    Unreadable(Note),
}

/// One project file whose stored state must be checked against the disk.
enum Check {
    Same,
    /// Read again: the same bytes (its new state), or other bytes.
    Reread(FileState),
    /// Other bytes that read the same but for where the file's parse problems are: its new
    /// state and `parse-error` findings ([`Same`]).
    Moved(FileState, Vec<StoredDiagnostic>),
    Changed,
}

impl Answers {
    pub fn new(cache: &Cache, opts: &Options) -> Answers {
        let key = key_of(opts);
        let name = format!("project-{}.json", &hash(key.as_bytes())[..16]);
        Answers {
            path: cache.dir().join(name),
            key,
            cache: cache.clone(),
            parse_all: opts.parse_all,
            configs: std::sync::OnceLock::new(),
        }
    }

    /// The stored answer, if it still fits the project's files `files` (paths as this run
    /// names them, with their canonical `keys`) and the configuration. A file left out whose new
    /// text would be left out again keeps it too (see `left_out_again`), and so does a parsed
    /// file whose new text reads the same (see `Alike`; its text is analysed, with `overlap`
    /// run beside: the caller's start of the analysis that follows if it does not). A file
    /// only touched (same bytes) keeps it, and the answer is stored again with the file's new
    /// state.
    pub fn find(
        &self,
        started: u128,
        files: &[PathBuf],
        keys: &[PathBuf],
        resolver: &Resolver,
        overlap: &(dyn Fn() + Sync),
    ) -> Found {
        let Ok(bytes) = std::fs::read(&self.path) else {
            return Found::Stale;
        };
        let unreadable = || {
            Found::Unreadable(Note {
                path: display_path(&self.path),
                message: "the stored answer of the project could not be read and was rebuilt"
                    .to_string(),
            })
        };
        let Ok(mut stored) = serde_json::from_slice::<Stored>(&bytes) else {
            return unreadable();
        };
        if stored.format != FORMAT || stored.key != self.key {
            return unreadable();
        }
        if stored.files.len() != keys.len()
            || stored.files.iter().zip(keys).any(|((k, _), key)| k != key)
        {
            return Found::Stale;
        }
        let Some((configs, newest)) = self.configs.get_or_init(|| configs(keys, resolver)).clone()
        else {
            return Found::Stale;
        };
        if configs != stored.configs {
            return Found::Stale;
        }
        let closure = stored.closure.closure();
        let shown = shown_files(&stored.findings);
        let alike = Alike {
            findings: &stored.findings,
            shown: &shown,
            cache: &self.cache,
            parse_all: self.parse_all,
        };
        // a file left out whose new text would be left out again changes nothing
        let mut checks: Vec<Check> = files
            .par_iter()
            .enumerate()
            .zip(&stored.files)
            .map(
                |((i, path), (_, state))| match check(path, state, stored.started) {
                    Check::Changed => closure
                        .as_ref()
                        .and_then(|c| left_out_again(c, i, path))
                        .map_or(Check::Changed, Check::Reread),
                    c => c,
                },
            )
            .collect();
        // nor does a parsed file whose new text reads the same: told by analysing the text
        // (while `overlap` goes on); a changed file the run did not parse makes it stale
        let changed: Vec<usize> = (0..checks.len())
            .filter(|&i| matches!(checks[i], Check::Changed))
            .collect();
        if !changed.is_empty() {
            let Some(c) = closure.as_ref().filter(|c| {
                changed
                    .iter()
                    .all(|&i| c.roles.get(i).is_some_and(Option::is_some))
            }) else {
                return Found::Stale;
            };
            let (same, ()) = rayon::join(
                || {
                    changed
                        .par_iter()
                        .map(|&i| alike.state(c, i, &files[i]))
                        .collect::<Vec<Option<Same>>>()
                },
                overlap,
            );
            for (i, same) in changed.into_iter().zip(same) {
                checks[i] = match same {
                    None => return Found::Stale,
                    Some(Same {
                        state,
                        problems: None,
                    }) => Check::Reread(state),
                    Some(Same {
                        state,
                        problems: Some(problems),
                    }) => Check::Moved(state, problems),
                };
            }
        }
        let mut reread = false;
        let (mut moved, mut remade) = (Vec::new(), Vec::new());
        for (i, (c, (_, state))) in checks.into_iter().zip(stored.files.iter_mut()).enumerate() {
            match c {
                Check::Same => {}
                Check::Reread(new) => {
                    reread = true;
                    *state = new;
                }
                Check::Moved(new, problems) => {
                    reread = true;
                    *state = new;
                    moved.push(i);
                    remade.extend(problems);
                }
                Check::Changed => return Found::Stale,
            }
        }
        // the stored findings of a moved file were its own parse problems, now made again
        if !moved.is_empty() {
            stored.findings.retain(|d| !moved.contains(&d.primary.file));
            stored.findings.extend(remade);
        }
        let Some(findings) = findings_of(&stored, files) else {
            return Found::Stale;
        };
        // the files read again are now known by their new times (unless a configuration file
        // is too new to be sure of what this run read)
        if reread && newest.saturating_add(RACY_NANOS) <= started {
            stored.started = started;
            self.write(&stored);
        }
        let states = stored.files.into_iter().map(|(_, s)| s).collect();
        Found::Valid(states, findings)
    }

    /// Store the answer of a run that started at `started`: the project's files (as named,
    /// with their canonical `keys`) with how the run found each, and the findings of the
    /// whole project. Nothing is stored when a file could not be read, a finding points
    /// outside the project, or a configuration file changed while the run went on.
    pub(crate) fn store(
        &self,
        run: &Run,
        states: Vec<Option<FileState>>,
        findings: &[Diagnostic],
        resolver: &Resolver,
    ) {
        let (started, files, keys) = (run.started, run.files, run.keys);
        let Some(states) = states.into_iter().collect::<Option<Vec<FileState>>>() else {
            return;
        };
        if states.len() != files.len() || files.is_empty() {
            return;
        }
        let Some((configs, _)) = configs_of_run(keys, resolver, started, &self.configs) else {
            return;
        };
        let index: HashMap<&Path, usize> = files
            .iter()
            .enumerate()
            .map(|(i, p)| (p.as_path(), i))
            .collect();
        let mut texts: BTreeMap<usize, FileRef> = BTreeMap::new();
        let mut loc = |l: &Location| -> Option<Loc> {
            let file = *index.get(l.file.path.as_path())?;
            if !l.file.text.is_empty() {
                texts.entry(file).or_insert_with(|| l.file.clone());
            }
            Some(Loc { file, span: l.span })
        };
        let mut stored_findings = Vec::with_capacity(findings.len());
        for d in findings {
            let Some(stored) = StoredDiagnostic::of(d, &mut loc) else {
                return;
            };
            stored_findings.push(stored);
        }
        // the text a finding shows must be the text whose hash is recorded
        for (&i, file) in &texts {
            if states[i].hash.as_deref() != Some(hash(file.text.as_bytes()).as_str()) {
                return;
            }
        }
        let stored = Stored {
            format: FORMAT,
            key: self.key.clone(),
            started,
            files: keys.iter().cloned().zip(states).collect(),
            configs,
            texts: texts.into_keys().collect(),
            findings: stored_findings,
            closure: StoredClosure::of(run.closure),
        };
        self.write(&stored);
    }

    fn write(&self, stored: &Stored) {
        let Some(dir) = self.path.parent() else {
            return;
        };
        let Ok(bytes) = serde_json::to_vec(stored) else {
            return;
        };
        let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir) else {
            return;
        };
        if tmp.write_all(&bytes).is_ok() && tmp.persist(&self.path).is_ok() {
            prune(dir);
        }
    }
}

/// How many stored answers a cache keeps: one per set of options and configuration, the most
/// recently written.
const KEPT: usize = 8;

/// Remove all but the [`KEPT`] most recently written answers in `dir`.
fn prune(dir: &Path) {
    let mut answers: Vec<_> = crate::cache::read_dir(dir)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("project-") && name.ends_with(".json")
        })
        .map(|e| (crate::cache::modified(&e), e.path()))
        .collect();
    answers.sort();
    let stale = answers.len().saturating_sub(KEPT);
    for (_, path) in answers.into_iter().take(stale) {
        let _ = std::fs::remove_file(path);
    }
}

fn applicability_name(a: Applicability) -> &'static str {
    match a {
        Applicability::Safe => "safe",
        Applicability::Unsafe => "unsafe",
        Applicability::DisplayOnly => "display-only",
    }
}

/// The state of project file `i`, changed since the answer, when the run that stored it left
/// the file out (not parsed) and would leave its new text out too: the prefilter does not let
/// it through and it spells none of the names the run's rounds asked for in its package. The
/// parsed files and what they need are then the same, and so are the findings. `None` when it
/// would be parsed, or is not an analysed file now.
fn left_out_again(closure: &Closure, i: usize, path: &Path) -> Option<FileState> {
    if closure.parsed.get(i).copied().unwrap_or(true) {
        return None;
    }
    let (loaded, state) = crate::engine::load(path.to_path_buf(), None, false, true, true);
    let crate::engine::Loaded::Unread(_, _, Some(text), _) = loaded else {
        return None;
    };
    let package = closure.packages.get(i).copied().flatten();
    (!closure.would_parse(path, &text, package))
        .then_some(state)
        .flatten()
}

/// The files the stored findings point into (primary and related locations, fix edits).
fn shown_files(findings: &[StoredDiagnostic]) -> HashSet<usize> {
    let mut shown = HashSet::new();
    for d in findings {
        shown.insert(d.primary.file);
        shown.extend(d.related.iter().map(|(l, _)| l.file));
        if let Some(f) = &d.fix {
            shown.extend(f.edits.iter().map(|(l, _)| l.file));
        }
    }
    shown
}

/// What tells whether a parsed file's new text changes nothing ([`Alike::state`]).
struct Alike<'a> {
    /// The stored findings, and the files they point into.
    findings: &'a [StoredDiagnostic],
    shown: &'a HashSet<usize>,
    cache: &'a Cache,
    parse_all: bool,
}

/// A parsed file whose new text changes nothing but where its parse problems are.
struct Same {
    state: FileState,
    /// The file's `parse-error` findings in the new text, replacing the stored ones; `None`
    /// when no stored finding points into the file.
    problems: Option<Vec<StoredDiagnostic>>,
}

impl Alike<'_> {
    /// The state of project file `i`, changed since the answer, when the run that stored it
    /// parsed the file and the new text has the same [`Role`] (parsed in the same round) and
    /// its form the same `parsing::shape` as the form the run read (from its entry in the
    /// cache): every project fact and trace is the same. The findings' lines, snippets and
    /// fixes are read from the text, so a file that stored findings point into keeps the answer
    /// only when they are all its own `parse-error` findings (a file refused as too large, say:
    /// its form holds nothing but the problem): they are made again from the new form, and
    /// must say the same. The new text is analysed through the cache, so the next run that
    /// analyses the project finds it. `None` otherwise.
    fn state(&self, closure: &Closure, i: usize, path: &Path) -> Option<Same> {
        let read = closure.roles.get(i)?.as_ref()?;
        let stored = if self.shown.contains(&i) {
            Some(self.own_problems(i)?)
        } else {
            None
        };
        let (loaded, state) =
            crate::engine::load(path.to_path_buf(), None, self.parse_all, true, true);
        let file = match loaded {
            crate::engine::Loaded::File(f) => f,
            crate::engine::Loaded::Unread(f, _, Some(text), _) => {
                SourceFile::new(f.path.clone(), text.to_string())
            }
            _ => return None,
        };
        let state = state?;
        if Role::of(&file, &closure.asked, self.parse_all) != Some(read.role) {
            return None;
        }
        let before = crate::parsing::shape(&self.cache.stored(&read.entry)?)?;
        let ir = crate::engine::on_large_stack(|| {
            crate::engine::analyze_cached(self.cache, 0, file.clone()).ir
        })?;
        if crate::parsing::shape(&ir) != Some(before) {
            return None;
        }
        let problems = match stored {
            None => None,
            Some(stored) => {
                let mut new: Vec<StoredDiagnostic> = ir
                    .problems
                    .iter()
                    .map(|p| {
                        let d = crate::rules::problems::finding(&file, p);
                        StoredDiagnostic::of(&d, &mut |l| {
                            Some(Loc {
                                file: i,
                                span: l.span,
                            })
                        })
                    })
                    .collect::<Option<_>>()?;
                new.sort_by_key(|d| (d.primary.span.start, d.primary.span.end));
                let same =
                    new.len() == stored.len() && new.iter().zip(&stored).all(|(n, s)| n.says_as(s));
                if !same {
                    return None;
                }
                Some(new)
            }
        };
        Some(Same { state, problems })
    }

    /// The stored findings that point into file `i`, when each is a `parse-error` finding of
    /// the file itself (no related location, no fix), in their stored order.
    fn own_problems(&self, i: usize) -> Option<Vec<&StoredDiagnostic>> {
        let mut own = Vec::new();
        for d in self.findings {
            let touches = d.primary.file == i
                || d.related.iter().any(|(l, _)| l.file == i)
                || d.fix
                    .iter()
                    .flat_map(|f| &f.edits)
                    .any(|(l, _)| l.file == i);
            if !touches {
                continue;
            }
            if d.rule != crate::rules::PARSE_ERROR.name
                || d.primary.file != i
                || !d.related.is_empty()
                || d.fix.is_some()
            {
                return None;
            }
            own.push(d);
        }
        Some(own)
    }
}

/// Whether a file still is what the stored state says, reading it only when its length or
/// time differs or its time cannot be trusted.
fn check(path: &Path, state: &FileState, started: u128) -> Check {
    let Ok(meta) = std::fs::metadata(path) else {
        return Check::Changed;
    };
    let mtime = meta.modified().map_or(0, nanos);
    let racy = state.mtime.saturating_add(RACY_NANOS) > started;
    if meta.len() == state.len && mtime == state.mtime && !racy {
        return Check::Same;
    }
    // a file too large to be read is not read now either
    let Some(stored_hash) = &state.hash else {
        return Check::Changed;
    };
    let Ok(bytes) = std::fs::read(path) else {
        return Check::Changed;
    };
    let h = hash(&bytes);
    if &h != stored_hash {
        return Check::Changed;
    }
    Check::Reread(FileState {
        len: meta.len(),
        mtime,
        hash: Some(h),
        kind: state.kind.clone(),
    })
}

/// The stored findings, pointing at the files as this run names them; `None` when a file a
/// finding shows no longer has the text it had, or the findings do not read back.
fn findings_of(stored: &Stored, files: &[PathBuf]) -> Option<Vec<Diagnostic>> {
    let mut refs: HashMap<usize, FileRef> = HashMap::new();
    for &i in &stored.texts {
        let path = files.get(i)?;
        let text = std::fs::read_to_string(path).ok()?;
        if stored.files[i].1.hash.as_deref() != Some(hash(text.as_bytes()).as_str()) {
            return None;
        }
        refs.insert(i, SourceFile::new(path.clone(), text));
    }
    let mut file = |i: usize| -> Option<FileRef> {
        if let Some(f) = refs.get(&i) {
            return Some(f.clone());
        }
        let f = SourceFile::new(files.get(i)?.clone(), String::new());
        refs.insert(i, f.clone());
        Some(f)
    };
    let mut location = |l: &Loc| -> Option<Location> {
        let f = file(l.file)?;
        (l.span.end <= f.text.len() || f.text.is_empty()).then(|| Location::new(f, l.span))
    };
    let mut out = Vec::with_capacity(stored.findings.len());
    for d in &stored.findings {
        let rule = crate::rules::find(&d.rule)?.name;
        let primary = location(&d.primary)?;
        let mut related = Vec::with_capacity(d.related.len());
        for (l, label) in &d.related {
            related.push(Related {
                location: location(l)?,
                label: label.clone(),
            });
        }
        let fix = match &d.fix {
            None => None,
            Some(f) => {
                let applicability = [
                    Applicability::Safe,
                    Applicability::Unsafe,
                    Applicability::DisplayOnly,
                ]
                .into_iter()
                .find(|a| applicability_name(*a) == f.applicability)?;
                let mut edits = Vec::with_capacity(f.edits.len());
                for (l, replacement) in &f.edits {
                    edits.push(Edit {
                        location: location(l)?,
                        replacement: replacement.clone(),
                    });
                }
                Some(Fix {
                    message: f.message.clone(),
                    applicability,
                    edits,
                })
            }
        };
        out.push(Diagnostic {
            rule,
            severity: if d.error {
                Severity::Error
            } else {
                Severity::Warning
            },
            primary,
            label: d.label.clone(),
            message: d.message.clone(),
            help: d.help.clone(),
            related,
            fix,
        });
    }
    // the order a run gives: by the paths as this run shows them
    out.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    Some(out)
}

/// Every configuration file that can matter to the project's files (canonical `keys`): those
/// in each directory holding a file and above it, and those the governing configurations
/// extend, each with the hash of its content; and the newest modification time among them.
/// `None` when one cannot be read.
fn configs(keys: &[PathBuf], resolver: &Resolver) -> Option<Configs> {
    let mut dirs: HashSet<&Path> = HashSet::new();
    let mut parents: HashSet<&Path> = HashSet::new();
    let mut last = None;
    for k in keys {
        let Some(parent) = k.parent() else { continue };
        // the keys are sorted: the files of a directory mostly follow each other
        if last == Some(parent) || !parents.insert(parent) {
            continue;
        }
        last = Some(parent);
        for d in parent.ancestors() {
            if !dirs.insert(d) {
                break;
            }
        }
    }
    let dirs: Vec<&Path> = dirs.into_iter().collect();
    let mut found: BTreeSet<PathBuf> = dirs
        .par_iter()
        .flat_map_iter(|d| CONFIG_NAMES.iter().map(|name| d.join(name)))
        .filter(|p| p.is_file())
        .collect();
    let parents: Vec<&Path> = parents.into_iter().collect();
    let governing: Vec<Arc<crate::config::Settings>> = parents
        .par_iter()
        .filter_map(|parent| resolver.for_file(parent).ok())
        .collect();
    let mut sources: HashSet<&PathBuf> = HashSet::new();
    for s in &governing {
        for source in &s.sources {
            if sources.insert(source) {
                found.insert(source.canonicalize().unwrap_or_else(|_| source.clone()));
            }
        }
    }
    let read: Option<Vec<(PathBuf, String, u128)>> = found
        .into_par_iter()
        .map(|p| {
            let meta = std::fs::metadata(&p).ok()?;
            let bytes = std::fs::read(&p).ok()?;
            let h = hash(&bytes);
            Some((p, h, meta.modified().map_or(0, nanos)))
        })
        .collect();
    let read = read?;
    let newest = read.iter().map(|(.., t)| *t).max().unwrap_or(0);
    Some((read.into_iter().map(|(p, h, _)| (p, h)).collect(), newest))
}

/// [`configs`] (as found before the run read the project's files, when they were: `seen`),
/// `None` as well when one of them was modified since (or just before) the run started at
/// `started`: the run may have read another content than the one hashed.
fn configs_of_run(
    keys: &[PathBuf],
    resolver: &Resolver,
    started: u128,
    seen: &std::sync::OnceLock<Option<Configs>>,
) -> Option<Configs> {
    let found = match seen.get() {
        Some(seen) => seen.clone(),
        None => configs(keys, resolver),
    };
    found.filter(|(_, newest)| newest.saturating_add(RACY_NANOS) <= started)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn state_of(path: &Path, hash: &str) -> FileState {
        let meta = std::fs::metadata(path).unwrap();
        FileState {
            hash: Some(hash.to_string()),
            ..FileState::of(&meta, None, Kind::Analysed { lines: 1 })
        }
    }

    #[test]
    fn a_file_is_read_only_when_its_time_or_length_differs_or_cannot_be_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.rs");
        std::fs::write(&path, "fn a() {}\n").unwrap();
        let old = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let right = hash(b"fn a() {}\n");
        // a stored hash that matches nothing shows whether the bytes were compared
        let wrong = state_of(&path, "not the hash");
        assert!(matches!(check(&path, &wrong, now()), Check::Same));
        // the time too close to the answer's run: compared by bytes
        let close = nanos(old) + RACY_NANOS / 2;
        assert!(matches!(check(&path, &wrong, close), Check::Changed));
        assert!(matches!(
            check(&path, &state_of(&path, &right), close),
            Check::Reread(_)
        ));
        // another time, the same bytes (touched): read again, kept
        let touched = FileState {
            mtime: nanos(old) - 1,
            ..state_of(&path, &right)
        };
        match check(&path, &touched, now()) {
            Check::Reread(s) => assert_eq!(s, state_of(&path, &right)),
            _ => panic!("a touched file is read and kept"),
        }
        // another length: other bytes
        let longer = FileState {
            len: 1,
            ..state_of(&path, &right)
        };
        assert!(matches!(
            check(
                &path,
                &FileState {
                    hash: Some("x".into()),
                    ..longer
                },
                now()
            ),
            Check::Changed
        ));
        // gone
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(check(&path, &wrong, now()), Check::Changed));
    }
}
