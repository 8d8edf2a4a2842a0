//! Runs an analysis: load files in parallel, run the front-ends, derive project facts,
//! run the rules over every trace, and return sorted, de-duplicated findings.

use crate::answer::{Answers, FileState, Found, Kind};
use crate::baseline::Baseline;
use crate::cache::{Cache, Lookup};
use crate::config::{self, Governing, Mode, Resolver, Settings};
use crate::diagnostic::{Diagnostic, Fix, Location};
use crate::discover::{describe_io, discover, PathError};
use crate::frontend;
use crate::ir::FileIr;
use crate::isolate;
use crate::locks;
use crate::rules::{self, Findings, Fixes, PARSE_ERROR};
use crate::scans::{Scan, Scans};
use crate::source::{display_path, SourceFile};
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Files larger than this are skipped with a note.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// Stack for analysis threads: deep but legal expressions must not overflow it.
const STACK_BYTES: usize = 512 * 1024 * 1024;

/// Where configuration comes from.
#[derive(Debug, Clone, Default)]
pub enum ConfigSource {
    /// The nearest `locklint.toml` / `.locklint.toml` / `Cargo.toml` metadata above each file.
    Discover,
    /// One file for everything (`--config`).
    File(PathBuf),
    /// None (`--isolated`; the default for library use).
    #[default]
    Isolated,
}

/// What to analyse and which rules to run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The selection: the files and directories whose findings are reported.
    pub paths: Vec<PathBuf>,
    /// The analysis cache's directory (see [`crate::cache`]); `None`: no cache.
    pub cache_dir: Option<PathBuf>,
    /// Directories under `paths` that are not part of the selection (the other packages of a
    /// workspace).
    pub exclude_dirs: Vec<PathBuf>,
    /// The project root (see [`crate::project`]): every file discovery finds under it is
    /// analysed for the facts findings rest on (lock helpers, consts, key builders, the SQL
    /// schema, scripts), but findings are reported for the selection only. Its configuration
    /// gives the project-wide settings. `None`: the selection is the whole project.
    pub project_root: Option<PathBuf>,
    /// Only these rules (all when empty); replaces a configuration's `select`.
    pub select: Vec<String>,
    /// Rules not to run, on top of a configuration's `ignore`.
    pub ignore: Vec<String>,
    pub config: ConfigSource,
    /// `--redis-version`: overrides the configuration's `redis-version` (fix flavour).
    pub redis_version: Option<String>,
    /// `--default-ttl`: overrides the configuration's `default-ttl` (fix flavour).
    pub default_ttl: Option<String>,
    /// File contents to use instead of what is on disk (fixes applied in memory).
    pub overlay: Option<std::sync::Arc<std::collections::HashMap<PathBuf, String>>>,
    /// `--baseline`: findings recorded in it are not reported and do not fail the run.
    pub baseline: Option<Arc<Baseline>>,
    /// `--changed-since`: only findings in these files (canonical paths) are reported.
    pub only_files: Option<Arc<HashSet<PathBuf>>>,
    /// Parse every file, not only those the prefilter lets through (see [`crate::frontend::prefilter`]);
    /// the findings are the same, which the tests check with it.
    pub parse_all: bool,
}

/// Something worth telling the user that is not a finding (a skipped file).
#[derive(Debug, Clone)]
pub struct Note {
    pub path: String,
    pub message: String,
}

/// The result of a run.
#[derive(Debug, Default)]
pub struct Report {
    pub findings: Vec<Diagnostic>,
    /// Files analysed.
    pub files: usize,
    /// Lines analysed.
    pub lines: usize,
    pub notes: Vec<Note>,
    pub errors: Vec<PathError>,
    /// Invalid configuration, rendered; nothing was analysed.
    pub config_error: Option<String>,
    /// Named paths that exist but hold nothing to analyse (no `.rs`, `.sql` or `.lua` file
    /// that is not ignored or excluded).
    pub empty_paths: Vec<PathBuf>,
    /// Reported findings that fail the run (all of them, unless `fail-on = "error"` lets
    /// warnings pass); counted after suppressions, configuration, `--changed-since` and the
    /// baseline, so it is what the exit code follows.
    pub failing: usize,
    /// Findings recorded in the baseline, not reported.
    pub baselined: usize,
    /// Baseline entries no longer found (fixed or removed).
    pub baseline_gone: usize,
    /// Configured documentation link per rule (`{rule}` is replaced).
    pub help_uri: Option<String>,
    /// With `--fix`: how many findings the fixes removed.
    pub fixed: Option<usize>,
    /// Unsafe fixes are applied (`--unsafe-fixes`).
    pub unsafe_fixes: bool,
    /// The selected files that were analysed (as [`SourceFile::path`]); `files` counts them.
    pub selected: HashSet<PathBuf>,
    /// Files analysed for facts, the selection included.
    pub project_files: usize,
    /// How each file analysed in this run parsed (none when the findings came from the
    /// project's stored answer): what `--fix` compares a fixed text with.
    pub parsed: HashMap<PathBuf, Parsed>,
}

/// How a text parses: its parse problems, how many of them are bounds of the analysis (size,
/// nesting) rather than the grammar, and whether one left the whole file out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    pub problems: usize,
    pub limits: usize,
    pub whole_file_refused: bool,
}

impl Parsed {
    pub fn of(problems: &[crate::ir::ParseProblem]) -> Parsed {
        use crate::ir::Limit;
        Parsed {
            problems: problems.len(),
            limits: problems.iter().filter(|p| p.limit != Limit::None).count(),
            whole_file_refused: problems.iter().any(|p| p.limit == Limit::File),
        }
    }
}

/// A file of the project as loaded.
#[derive(Clone)]
pub(crate) enum Loaded {
    File(crate::source::FileRef),
    /// A file the prefilter leaves out: kept without its text (its lines counted), which is
    /// read again only if another file needs a name from it; a project held in memory keeps
    /// the text aside (`Some`) so that nothing is read again. Its identifiers are kept
    /// (the names later rounds ask for are looked up in them).
    Unread(
        crate::source::FileRef,
        usize,
        Option<Arc<str>>,
        crate::frontend::prefilter::Spelling,
    ),
    Skipped(Note),
    Failed(PathError),
}

/// Read one file; `parse_all` keeps the text of every file, else only of those that
/// [`crate::parsing::prefiltered`] admits (`keep`: the others' text is kept aside). With
/// `record`, also how the file was found, for the project's stored answer (`None` for a file
/// that could not be read or is not on disk).
pub(crate) fn load(
    path: PathBuf,
    overlay: Option<&std::collections::HashMap<PathBuf, String>>,
    parse_all: bool,
    record: bool,
    keep: bool,
) -> (Loaded, Option<FileState>) {
    if let Some(text) = overlay.and_then(|o| o.get(&path)) {
        return (loaded_text(path, text.clone(), parse_all, keep), None);
    }
    read(path, record, None, |path, text| {
        loaded_text(path, text, parse_all, keep)
    })
}

/// A file read as `text` (see [`load`]).
pub(crate) fn loaded_text(path: PathBuf, text: String, parse_all: bool, keep: bool) -> Loaded {
    let spelling = match crate::parsing::prefiltered(&path, &text, parse_all) {
        None => return Loaded::File(SourceFile::new(path, text)),
        Some(spelling) => spelling,
    };
    let lines = locklint_ir::source::line_count(&text);
    let aside = keep.then(|| Arc::from(text));
    Loaded::Unread(SourceFile::new(path, String::new()), lines, aside, spelling)
}

/// [`load`] from the disk; `stored`: the file's scan as stored (see [`crate::scans`]), which
/// stands for the prefilter while the file's length and time are those recorded (and for
/// reading it too, for a file left out, while its time can be trusted).
fn read(
    path: PathBuf,
    record: bool,
    stored: Option<&Scan>,
    kept: impl Fn(PathBuf, String) -> Loaded,
) -> (Loaded, Option<FileState>) {
    let state = |meta: &std::fs::Metadata, bytes: Option<&[u8]>, l: &Loaded| {
        let kind = match l {
            Loaded::File(f) => Kind::Analysed {
                lines: f.lines.line_count(),
            },
            Loaded::Unread(_, lines, ..) => Kind::Analysed { lines: *lines },
            Loaded::Skipped(n) => Kind::Skipped(n.message.clone()),
            Loaded::Failed(_) => return None,
        };
        record.then(|| FileState::of(meta, bytes, kind))
    };
    let shown = display_path(&path);
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) => {
            return (
                Loaded::Failed(PathError {
                    path,
                    message: describe_io(&e),
                }),
                None,
            )
        }
    };
    let mtime = crate::answer::mtime(&meta);
    let fits = stored.and_then(|s| Some((s, s.fits(meta.len(), mtime)?)));
    if let Some((s, true)) = fits {
        if let Ok(l) = scanned(s, &path, None) {
            return (l, record.then(|| s.state.clone()));
        }
    }
    if meta.len() > MAX_FILE_BYTES {
        let l = Loaded::Skipped(Note {
            path: shown,
            message: format!(
                "skipped: larger than {} MiB",
                MAX_FILE_BYTES / (1024 * 1024)
            ),
        });
        let s = state(&meta, None, &l);
        return (l, s);
    }
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            return (
                Loaded::Failed(PathError {
                    path,
                    message: describe_io(&e),
                }),
                None,
            )
        }
    };
    let hashed = (record || fits.is_some()).then(|| crate::answer::hash(&bytes));
    // the bytes the scan was stored for: the prefilter would say the same
    let mut bytes = bytes;
    if let Some((s, _)) = fits.filter(|(s, _)| s.state.hash.is_some() && s.state.hash == hashed) {
        match scanned(s, &path, Some(bytes)) {
            Ok(l) => {
                let state = FileState {
                    len: meta.len(),
                    mtime,
                    hash: hashed,
                    kind: s.state.kind.clone(),
                };
                return (l, record.then_some(state));
            }
            Err(back) => bytes = back.unwrap_or_default(),
        }
    }
    let l = if bytes.iter().take(8192).any(|&b| b == 0) {
        Loaded::Skipped(Note {
            path: shown,
            message: "skipped: binary file".to_string(),
        })
    } else {
        match String::from_utf8(bytes) {
            Ok(text) => kept(path, text),
            Err(e) => Loaded::Skipped(Note {
                path: shown,
                message: format!(
                    "skipped: not valid UTF-8 (invalid byte at offset {})",
                    e.utf8_error().valid_up_to()
                ),
            }),
        }
    };
    let s = state(&meta, None, &l).map(|s| FileState { hash: hashed, ..s });
    (l, s)
}

/// A file loaded as its stored scan says (`bytes`: the file's bytes, when they were read); the
/// bytes back (`None` when not read) when the scan cannot stand for them (a file let through
/// that no longer reads as UTF-8).
fn scanned(s: &Scan, path: &Path, bytes: Option<Vec<u8>>) -> Result<Loaded, Option<Vec<u8>>> {
    match &s.state.kind {
        Kind::Skipped(message) => Ok(Loaded::Skipped(Note {
            path: display_path(path),
            message: message.clone(),
        })),
        Kind::Analysed { lines } => match (&s.spelling, s.through) {
            (Some(spelling), false) => Ok(Loaded::Unread(
                SourceFile::new(path.to_path_buf(), String::new()),
                *lines,
                None,
                spelling.clone(),
            )),
            _ => {
                let text = match bytes {
                    Some(b) => String::from_utf8(b).map_err(|e| Some(e.into_bytes()))?,
                    None => std::fs::read_to_string(path).map_err(|_| None)?,
                };
                Ok(Loaded::File(SourceFile::new(path.to_path_buf(), text)))
            }
        },
    }
}

/// A pool of analysis threads, with their large stack.
pub(crate) fn pool() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .stack_size(STACK_BYTES)
        .build()
        .unwrap_or_else(|_| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .stack_size(STACK_BYTES)
                .build()
                .expect("a thread pool with one thread")
        })
}

/// Runs `work` on a thread with the analysis threads' large stack (deep but legal code must
/// not overflow the caller's smaller one); `None` when it panicked.
pub fn on_large_stack<R: Send>(work: impl FnOnce() -> R + Send) -> Option<R> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("locklint-analysis".to_string())
            .stack_size(STACK_BYTES)
            .spawn_scoped(s, work)
            .ok()?
            .join()
            .ok()
    })
}

fn resolver(opts: &Options) -> Result<Resolver, String> {
    Ok(match &opts.config {
        ConfigSource::Isolated => Resolver::new(Mode::Isolated),
        ConfigSource::Discover => Resolver::new(Mode::Discover),
        ConfigSource::File(p) => match config::load(p) {
            Ok(Some(s)) => Resolver::new(Mode::Fixed(Arc::new(s))),
            Ok(None) => {
                return Err(format!(
                "error: {}: no [package.metadata.locklint] or [workspace.metadata.locklint] table",
                p.display()
            ))
            }
            Err(e) => return Err(e.render()),
        },
    })
}

/// The path whose configuration gives the project-wide settings: the project root, else the
/// first named path.
pub fn settings_path(opts: &Options) -> Option<&Path> {
    opts.project_root
        .as_deref()
        .or(opts.paths.first().map(PathBuf::as_path))
}

/// One analysis of a project, as every consumer reads it: every file's intermediate form (the
/// selection's and the rest of the project's), the project facts built from them once, the
/// configuration they were built with, and the finished report of the selection.
pub struct Analysis<'a> {
    pub files: &'a [FileIr],
    pub project: &'a locks::Project<'a>,
    pub settings: &'a Settings,
    pub report: &'a Report,
}

/// Analyse the project of `opts` and report the findings of its selection. With a cache and
/// nothing in memory, the project's stored answer is used while it fits (see
/// [`crate::answer`]).
pub fn run(opts: &Options) -> Report {
    run_answering(opts, true, |_| ()).0
}

/// [`run`], then hand the whole analysis to `consume` (on the analysis threads, while the
/// files' intermediate form and the project facts are alive): the audit reads the same
/// analysis as the findings, nothing is parsed or derived twice. `None` when nothing was
/// analysed (a configuration error).
pub fn run_with<T: Send>(
    opts: &Options,
    consume: impl FnOnce(&Analysis) -> T + Send,
) -> (Report, Option<T>) {
    run_answering(opts, false, consume)
}

/// What a run tells besides its findings, found before anything is read: the named paths
/// that could not be walked, the configuration's notes, the named paths with nothing to
/// analyse.
pub(crate) struct Told {
    pub errors: Vec<PathError>,
    pub config_notes: Vec<Note>,
    pub empty_paths: Vec<PathBuf>,
}

/// The configuration of a run: how a file's settings are found, and the directories a
/// governing configuration excludes (not walked, so nothing under them is read).
pub(crate) fn configuration(
    opts: &Options,
) -> Result<(Arc<Resolver>, crate::discover::Prune), Box<Report>> {
    let resolver = Arc::new(resolver(opts).map_err(|e| {
        Box::new(Report {
            config_error: Some(e),
            ..Default::default()
        })
    })?);
    let excluded_dir: crate::discover::Prune = {
        let resolver = resolver.clone();
        Arc::new(move |dir: &Path| {
            dir.parent()
                .and_then(|parent| resolver.for_file(parent).ok())
                .is_some_and(|s| s.excludes(dir))
        })
    };
    Ok((resolver, excluded_dir))
}

/// The selected files of a run (`Options.paths` walked, minus what the configuration
/// excludes), with what the run tells about them; a report of the configuration's errors when
/// a configuration that governs a named path, the project root or a selected file is broken
/// (each named once).
pub(crate) fn select(
    opts: &Options,
    resolver: &Resolver,
    excluded_dir: &crate::discover::Prune,
) -> Result<(Vec<PathBuf>, Told), Box<Report>> {
    let mut config_errors: Vec<Arc<config::ConfigError>> = Vec::new();
    let mut config_error = |e: Arc<config::ConfigError>| {
        if !config_errors.iter().any(|x| x.path == e.path) {
            config_errors.push(e);
        }
    };
    for p in opts.paths.iter().chain(&opts.project_root) {
        if let Err(e) = resolver.for_file(p) {
            config_error(e);
        }
    }
    // an editor's unsaved buffer is a file to analyse though nothing is on disk yet
    let (in_memory, on_disk): (Vec<PathBuf>, Vec<PathBuf>) = opts
        .paths
        .iter()
        .cloned()
        .partition(|p| opts.overlay.as_ref().is_some_and(|o| o.contains_key(p)) && !p.exists());
    let (mut paths, errors) = discover(&on_disk, &opts.exclude_dirs, excluded_dir.clone());
    paths.extend(in_memory);
    let named: HashSet<&Path> = opts.paths.iter().map(PathBuf::as_path).collect();
    let governed = governing(resolver, &paths, &named);
    let mut kept = Vec::with_capacity(governed.len());
    for (p, s) in paths.into_iter().zip(governed) {
        match s {
            Ok(s) if s.excludes(&p) => {}
            Ok(_) => kept.push(p),
            Err(e) => config_error(e),
        }
    }
    let empty_paths = empty_paths(&opts.paths, &kept);
    // notes about the configurations of the selection only: the rest of the project is read
    // for facts and says nothing
    let config_notes: Vec<Note> = resolver
        .notes()
        .into_iter()
        .map(|(path, message)| Note {
            path: display_path(&path),
            message,
        })
        .collect();
    if !config_errors.is_empty() {
        return Err(Box::new(Report {
            config_error: Some(config_errors.iter().map(|e| e.render()).collect()),
            notes: config_notes,
            ..Default::default()
        }));
    }
    let told = Told {
        errors,
        config_notes,
        empty_paths,
    };
    Ok((kept, told))
}

/// The settings that govern each of `paths` (as a walk found them, files of one directory
/// together), resolved on every core: a file the walk found is a regular file (it follows no
/// link), governed by its directory's settings, looked up once per run of files in one
/// directory; a file of `named` may be a link.
fn governing(resolver: &Resolver, paths: &[PathBuf], named: &HashSet<&Path>) -> Vec<Governing> {
    paths
        .par_chunk_by(|a, b| a.parent() == b.parent())
        .flat_map_iter(|run| {
            let mut dir: Option<Governing> = None;
            run.iter().map(move |p| {
                if named.contains(p.as_path()) {
                    return resolver.for_file(p);
                }
                dir.get_or_insert_with(|| resolver.for_walked(p)).clone()
            })
        })
        .collect()
}

/// The project-wide settings of a run: those of [`settings_path`], with the command line's
/// overrides.
pub(crate) fn project_settings(opts: &Options, resolver: &Resolver) -> Arc<Settings> {
    let mut project_settings = settings_path(opts)
        .and_then(|p| resolver.for_file(p).ok())
        .unwrap_or_default();
    if opts.redis_version.is_some() || opts.default_ttl.is_some() {
        let mut s = (*project_settings).clone();
        if opts.redis_version.is_some() {
            s.redis_version = opts.redis_version.clone();
        }
        if opts.default_ttl.is_some() {
            s.default_ttl = opts.default_ttl.clone();
        }
        project_settings = Arc::new(s);
    }
    project_settings
}

/// [`run_with`]; `reuse`: a stored answer of the project may stand for the analysis (the
/// consumer is then not called).
fn run_answering<T: Send>(
    opts: &Options,
    reuse: bool,
    consume: impl FnOnce(&Analysis) -> T + Send,
) -> (Report, Option<T>) {
    let started = crate::answer::now();
    let (resolver, excluded_dir) = match configuration(opts) {
        Ok(c) => c,
        Err(report) => return (*report, None),
    };
    let (kept, told) = match select(opts, &resolver, &excluded_dir) {
        Ok(s) => s,
        Err(report) => return (*report, None),
    };
    let (files, keys) = project_files(opts, kept, &|| {
        opts.project_root
            .as_deref()
            .map(|root| walk_project(root, &excluded_dir, &resolver))
            .unwrap_or_default()
    });
    let project_settings = project_settings(opts, &resolver);
    // the project's stored answer: not for an editor's unsaved text
    let answers = opts
        .overlay
        .is_none()
        .then(|| opts.cache_dir.as_deref().and_then(Cache::open))
        .flatten()
        .map(|c| Answers::new(&c, opts));
    let record = answers.is_some();
    // the start of the analysis: the files loaded from the disk (through the stored scans)
    let prepare = |files: Vec<(PathBuf, bool)>| {
        let cache = opts.cache_dir.as_deref().and_then(Cache::open);
        let scans = cache
            .as_ref()
            .filter(|_| opts.overlay.is_none() && !opts.parse_all)
            .map(|c| Scans::open(c, started));
        let disk = Disk {
            overlay: opts.overlay.as_deref(),
            cache,
            parse_all: opts.parse_all,
            scans,
        };
        let load = load_paths(files, record, &disk);
        (disk, load)
    };
    // made while the stored answer is looked up, when that analyses a changed file
    let prepared = std::sync::Mutex::new(None);
    let mut answer_note = None;
    if let Some(a) = answers.as_ref().filter(|_| reuse && !files.is_empty()) {
        let paths: Vec<PathBuf> = files.iter().map(|(p, _)| p.clone()).collect();
        let overlap = || {
            let made = prepare(files.clone());
            if let Ok(mut p) = prepared.lock() {
                *p = Some(made);
            }
        };
        match a.find(started, &paths, &keys, &resolver, &overlap) {
            Found::Valid(states, findings) => {
                let mut report = answered(&files, &states, findings);
                tell(&mut report, told, &project_settings);
                finish(&mut report, opts, &resolver);
                return (report, None);
            }
            Found::Stale => {}
            Found::Unreadable(note) => answer_note = Some(note),
        }
    }
    let prepared = prepared.into_inner().ok().flatten();
    pool().install(|| {
        let paths: Vec<PathBuf> = files.iter().map(|(p, _)| p.clone()).collect();
        let (disk, load) = prepared.unwrap_or_else(|| prepare(files));
        let scans_note = disk.scans.as_ref().and_then(Scans::note);
        let (mut report, irs, packages, states, closure) = analyze_load(load, opts, record, &disk);
        let project = locks::analyze_in(&irs, &project_settings.project(), &packages);
        report.findings = findings_of(&project, opts);
        report.parsed = irs
            .iter()
            .map(|ir| (ir.file.path.clone(), Parsed::of(&ir.problems)))
            .collect();
        if let Some(a) = &answers {
            let run = crate::answer::Run {
                started,
                files: &paths,
                keys: &keys,
                closure: &closure,
            };
            a.store(&run, states, &report.findings, &resolver);
        }
        report.notes.extend(answer_note);
        report.notes.extend(scans_note);
        keep_selected(&mut report, irs.len());
        tell(&mut report, told, &project_settings);
        finish(&mut report, opts, &resolver);
        let out = consume(&Analysis {
            files: &irs,
            project: &project,
            settings: &project_settings,
            report: &report,
        });
        drop(project);
        // the files' forms are freed while the caller goes on with the report
        // (where no thread can be started, they are freed here)
        let _ = std::thread::Builder::new().spawn(move || drop(irs));
        (report, Some(out))
    })
}

/// Findings are reported for the selected files only; the others (of `files` in all) gave
/// facts.
pub(crate) fn keep_selected(report: &mut Report, files: usize) {
    if report.selected.len() < files {
        report
            .findings
            .retain(|d| report.selected.contains(&d.primary.file.path));
    }
}

/// What a run tells besides its findings, in the report.
pub(crate) fn tell(report: &mut Report, told: Told, settings: &Settings) {
    report.help_uri = settings.help_uri.clone();
    report.errors.splice(0..0, told.errors);
    report.notes.splice(0..0, told.config_notes);
    report.empty_paths = told.empty_paths;
}

/// The report of a stored answer (see [`crate::answer`]), as [`analyze_paths`] and the
/// selection make it: the selected files counted, the notes of those skipped, the findings of
/// the selected files.
fn answered(files: &[(PathBuf, bool)], states: &[FileState], findings: Vec<Diagnostic>) -> Report {
    let mut report = Report::default();
    for ((path, selected), state) in files.iter().zip(states) {
        match &state.kind {
            Kind::Analysed { lines } => {
                report.project_files += 1;
                if *selected {
                    report.files += 1;
                    report.lines += lines;
                    report.selected.insert(path.clone());
                }
            }
            Kind::Skipped(message) if *selected => report.notes.push(Note {
                path: display_path(path),
                message: message.clone(),
            }),
            Kind::Skipped(_) => {}
        }
    }
    report.findings = findings;
    let files = report.project_files;
    keep_selected(&mut report, files);
    report
}

/// Per-file configuration (rule selection, severities), the baseline and `--changed-since`,
/// and the count of findings that fail the run.
pub(crate) fn finish(report: &mut Report, opts: &Options, resolver: &Resolver) {
    // the settings of each file findings point into, asked once per file (a file can hold
    // tens of thousands of findings)
    let mut governing: HashMap<PathBuf, Option<Arc<Settings>>> = HashMap::new();
    for d in &report.findings {
        let path = &d.primary.file.path;
        if !governing.contains_key(path) {
            governing.insert(path.clone(), resolver.for_file(path).ok());
        }
    }
    let settings = |d: &Diagnostic| {
        let path = &d.primary.file.path;
        match governing.get(path) {
            Some(s) => s.clone(),
            None => resolver.for_file(path).ok(),
        }
    };
    // per-file rule selection, severities and what fails the run
    report.findings.retain_mut(|d| {
        let Some(s) = settings(d) else {
            return true;
        };
        if !s.enabled(d.rule, &d.primary.file.path) {
            return false;
        }
        if let Some(sev) = s.severity.get(d.rule) {
            d.severity = *sev;
        }
        true
    });
    filter_reported(report, opts);
    report.failing = report
        .findings
        .iter()
        .filter(|d| {
            let fail_on = settings(d).and_then(|s| s.fail_on);
            d.severity == crate::diagnostic::Severity::Error
                || fail_on != Some(config::Level::Error)
        })
        .count();
}

/// The key files of the selection and of the rest of the project are matched by: the
/// canonical path, else the path made absolute (an editor's buffer not on disk).
pub(crate) fn file_key(p: &Path) -> PathBuf {
    p.canonicalize()
        .unwrap_or_else(|_| crate::project::absolute(p))
}

/// The files under a project's root as discovery finds them (each with its key, see
/// [`file_key`]), but those their configuration excludes (a file whose configuration is
/// broken is left out, as are paths the walk cannot read: they are reported only for the
/// selection).
pub(crate) fn walk_project(
    root: &Path,
    prune: &crate::discover::Prune,
    resolver: &Resolver,
) -> Vec<(PathBuf, PathBuf)> {
    let (walked, _unreadable) = discover(
        std::slice::from_ref(&root.to_path_buf()),
        &[],
        prune.clone(),
    );
    // the walk follows no link and keeps only regular files: a file's canonical path is the
    // canonical root joined with its path under the root (one canonical path to find, not
    // one per file, each a look-up of every component)
    let canonical_root = root.canonicalize().ok();
    let named: HashSet<&Path> = HashSet::from([root]);
    let governed = governing(resolver, &walked, &named);
    walked
        .into_iter()
        .zip(governed)
        .filter(|(p, s)| s.as_ref().is_ok_and(|s| !s.excludes(p)))
        .map(|(p, _)| p)
        .map(|p| {
            let key = match (&canonical_root, p.strip_prefix(root)) {
                (Some(r), Ok(under)) if !under.as_os_str().is_empty() => r.join(under),
                _ => file_key(&p),
            };
            (key, p)
        })
        .collect()
}

/// Every file of the project, each with whether it is selected: the selected files (as
/// named), then the files under the project root that are not selected (`walked`, see
/// [`walk_project`]). Ordered by canonical path, so that the order does not depend on the
/// selection or the current directory. With the keys, in the same order.
pub(crate) fn project_files(
    opts: &Options,
    selected: Vec<PathBuf>,
    walked: &dyn Fn() -> Vec<(PathBuf, PathBuf)>,
) -> (Vec<(PathBuf, bool)>, Vec<PathBuf>) {
    // a file the walk found under a named directory (the walk follows no link) is the
    // directory's canonical path joined with its path under it: one canonical path to find
    // per named directory, not one per file
    let roots: Vec<(&Path, PathBuf)> = opts
        .paths
        .iter()
        .filter(|r| r.is_dir())
        .filter_map(|r| Some((r.as_path(), r.canonicalize().ok()?)))
        .collect();
    let key_of = |p: &Path| {
        if !opts.paths.iter().any(|named| named == p) {
            for (root, canonical) in &roots {
                match p.strip_prefix(root) {
                    Ok(under) if !under.as_os_str().is_empty() => return canonical.join(under),
                    _ => {}
                }
            }
        }
        file_key(p)
    };
    let mut files: Vec<(PathBuf, PathBuf, bool)> = selected
        .into_iter()
        .map(|p| (key_of(&p), p, true))
        .collect();
    // nothing selected: nothing to report, so nothing to read for facts
    if let Some(root) = opts.project_root.as_ref().filter(|_| !files.is_empty()) {
        let whole = opts.exclude_dirs.is_empty()
            && opts.paths.len() == 1
            && file_key(&opts.paths[0]) == file_key(root);
        if !whole {
            let known: HashSet<PathBuf> = files.iter().map(|(k, ..)| k.clone()).collect();
            for (key, p) in walked() {
                if !known.contains(&key) {
                    files.push((key, p, false));
                }
            }
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files
        .into_iter()
        .map(|(key, p, sel)| ((p, sel), key))
        .unzip()
}

/// The roots that exist but yield no file to analyse.
fn empty_paths(roots: &[PathBuf], files: &[PathBuf]) -> Vec<PathBuf> {
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    roots
        .iter()
        .filter(|root| root.exists())
        .filter(|root| {
            // files are found as `root/...`; the same file named twice is kept once, so
            // compare canonical paths before calling a root empty
            !files.iter().any(|f| f.starts_with(root)) && {
                let root = canonical(root);
                !files.iter().any(|f| canonical(f).starts_with(&root))
            }
        })
        .cloned()
        .collect()
}

/// Keep the findings to report: those not in the baseline (which also counts the entries that
/// are gone), then those in the `--changed-since` files.
fn filter_reported(report: &mut Report, opts: &Options) {
    if let Some(b) = &opts.baseline {
        let before = report.findings.len();
        // an entry of a file outside the selection is not gone: that file was not checked
        let whole = report.selected.len() == report.project_files;
        let shown: HashSet<String> = if whole {
            HashSet::new()
        } else {
            report.selected.iter().map(|p| display_path(p)).collect()
        };
        let (new, gone) = b.filter(std::mem::take(&mut report.findings), &|path| {
            whole || shown.contains(path)
        });
        report.baselined = before - new.len();
        report.baseline_gone = gone;
        report.findings = new;
    }
    if let Some(only) = &opts.only_files {
        report.findings.retain(|d| {
            let path = &d.primary.file.path;
            only.contains(&path.canonicalize().unwrap_or_else(|_| path.clone()))
        });
    }
}

/// Files as the command line reads them: from the disk, with an editor's overlay in place of
/// some, through the analysis cache when there is one.
pub(crate) struct Disk<'a> {
    pub overlay: Option<&'a HashMap<PathBuf, String>>,
    pub cache: Option<Cache>,
    pub parse_all: bool,
    /// The files' stored scans (see [`crate::scans`]): with a cache, when nothing is in
    /// memory and the prefilter runs.
    pub scans: Option<Scans>,
}

impl crate::parsing::Source for Disk<'_> {
    fn text<'f>(&'f self, f: &'f crate::source::FileRef) -> Option<std::borrow::Cow<'f, str>> {
        if let Some(t) = self.overlay.and_then(|o| o.get(&f.path)) {
            return Some(std::borrow::Cow::Borrowed(t.as_str()));
        }
        std::fs::read_to_string(&f.path)
            .ok()
            .map(std::borrow::Cow::Owned)
    }

    fn parse(&self, i: usize, f: crate::source::FileRef) -> crate::parsing::Parse {
        match &self.cache {
            // an editor's unsaved text changes with every key: not worth an entry
            Some(cache) if !self.overlay.is_some_and(|o| o.contains_key(&f.path)) => {
                analyze_cached(cache, i, f)
            }
            _ => crate::parsing::Parse::uncached(analyze_file(i, f)),
        }
    }
}

/// What [`analyze_paths`] reads files from.
pub(crate) trait Files: crate::parsing::Source {
    /// One file of the project as loaded (see [`load`]).
    fn load(&self, path: PathBuf, record: bool) -> (Loaded, Option<FileState>);

    /// The Cargo packages of `paths` (see [`crate::packages`]).
    fn packages(&self, paths: &[&Path], root: Option<&Path>) -> locks::Packages {
        crate::packages::of_files(paths.iter().copied(), root)
    }

    /// Every file the analysis needs was parsed.
    fn parsed(&self) {}

    /// Whether the files' scans are stored ([`Files::scanned`]).
    fn keeps_scans(&self) -> bool {
        false
    }

    /// How the prefilter found each file of the project, to store (see [`crate::scans`]).
    fn scanned(&self, _files: Vec<(PathBuf, Option<Scan>)>) {}

    /// The analysis cache the files' forms are stored in.
    fn cache(&self) -> Option<&Cache> {
        None
    }
}

impl Files for Disk<'_> {
    fn load(&self, path: PathBuf, record: bool) -> (Loaded, Option<FileState>) {
        match &self.scans {
            Some(scans) => {
                let stored = scans.get(&path);
                read(path, record, stored, |path, text| {
                    loaded_text(path, text, self.parse_all, false)
                })
            }
            None => load(path, self.overlay, self.parse_all, record, false),
        }
    }

    fn scanned(&self, files: Vec<(PathBuf, Option<Scan>)>) {
        if let Some(scans) = &self.scans {
            scans.store(files);
        }
    }

    fn keeps_scans(&self) -> bool {
        self.scans.is_some()
    }

    fn cache(&self) -> Option<&Cache> {
        self.cache.as_ref()
    }

    /// The project was analysed: what the cache holds beyond it is no longer needed (not after
    /// an editor's analysis of unsaved text, which looks up only some files).
    fn parsed(&self) {
        if let Some(cache) = self.cache.as_ref().filter(|_| self.overlay.is_none()) {
            cache.prune();
        }
    }
}

/// Load every file of the project (the selection counted in the report) and parse those that
/// can matter: first the files whose bytes show they can hold lock code
/// ([`frontend::prefilter::can_contribute`]; every `.sql` and `.lua` file), then, round after
/// round, the files that spell a name the parsed ones need from elsewhere
/// ([`locks::reach::wanted`]: a const, a key builder, a struct, a function that reaches
/// Redis or runs SQL and its callers or namesakes, in the packages that can see it). The
/// others get an empty intermediate form: they hold nothing the analysis reads, so the
/// findings are those of parsing every file ([`Options::parse_all`]).
/// With `record`, also how each file was found (for the project's stored answer).
/// What [`analyze_paths`] gives: the report of the selection so far, every file's intermediate
/// form, the packages, how each file was found (with `record`) and what decided which files
/// were parsed.
pub(crate) type Analyzed = (
    Report,
    Vec<FileIr>,
    locks::Packages,
    Vec<Option<FileState>>,
    crate::parsing::Closure,
);

pub(crate) fn analyze_paths(
    paths: Vec<(PathBuf, bool)>,
    opts: &Options,
    record: bool,
    files: &dyn Files,
) -> Analyzed {
    analyze_load(load_paths(paths, record, files), opts, record, files)
}

/// The project's files as [`load_paths`] found them, with what the prefilter found of each (to
/// store, when `files` keeps scans).
pub(crate) struct Load {
    loaded: Vec<(Loaded, Option<FileState>, bool)>,
    scans: Option<Vec<(PathBuf, Option<Scan>)>>,
}

/// Load every file of `paths` (each with whether it is selected), recording how each was found
/// with `record`.
pub(crate) fn load_paths(paths: Vec<(PathBuf, bool)>, record: bool, files: &dyn Files) -> Load {
    let names: Vec<PathBuf> = if files.keeps_scans() {
        paths.iter().map(|(p, _)| p.clone()).collect()
    } else {
        Vec::new()
    };
    let loaded: Vec<(Loaded, Option<FileState>, bool)> = paths
        .into_par_iter()
        .map(|(p, selected)| {
            let (l, state) = files.load(p, record);
            (l, state, selected)
        })
        .collect();
    let scans = files.keeps_scans().then(|| {
        names
            .into_iter()
            .zip(&loaded)
            .map(|(p, (l, state, _))| (p, scan_of(l, state.as_ref())))
            .collect()
    });
    Load { loaded, scans }
}

/// [`analyze_paths`] of the files loaded (`load`, from `files`); their scans are stored while
/// the analysis goes on.
pub(crate) fn analyze_load(
    load: Load,
    opts: &Options,
    record: bool,
    files: &dyn Files,
) -> Analyzed {
    let Load { loaded, scans } = load;
    rayon::scope(|s| {
        if let Some(scans) = scans {
            s.spawn(move |_| files.scanned(scans));
        }
        analyze_loaded(loaded, opts, record, files)
    })
}

/// [`analyze_paths`] of the loaded files.
fn analyze_loaded(
    loaded: Vec<(Loaded, Option<FileState>, bool)>,
    opts: &Options,
    record: bool,
    files: &dyn Files,
) -> Analyzed {
    let mut report = Report::default();
    let mut sources = Vec::new();
    let mut states = Vec::with_capacity(if record { loaded.len() } else { 0 });
    // each loaded file's place among the project's files
    let mut at = Vec::new();
    let all = loaded.len();
    for (i, (l, state, selected)) in loaded.into_iter().enumerate() {
        if record {
            states.push(state);
        }
        if tally(&mut report, &l, selected) {
            at.push(i);
        }
        match l {
            Loaded::File(f) => sources.push(crate::parsing::ToParse {
                file: f,
                wanted: true,
                aside: None,
                spelling: None,
            }),
            Loaded::Unread(f, _, aside, spelling) => sources.push(crate::parsing::ToParse {
                file: f,
                wanted: false,
                aside,
                spelling: Some(spelling),
            }),
            Loaded::Skipped(_) | Loaded::Failed(_) => {}
        }
    }
    let paths: Vec<&Path> = sources.iter().map(|t| t.file.path.as_path()).collect();
    let packages = files.packages(&paths, opts.project_root.as_deref());
    let crate::parsing::Needed {
        mut irs,
        rebuilt,
        mut closure,
        left_out,
        entries,
    } = crate::parsing::parse_needed(sources, &packages, opts, files);
    files.parsed();
    // what the run read of each parsed file, for the stored answer: another text that reads
    // the same keeps it
    if let Some(cache) = files.cache().filter(|_| record) {
        closure = closure.with_roles(&irs, &left_out, &entries, cache);
    }
    let closure = closure.of_project(&at, all, &packages);
    // each run afresh, after the cache: a write's table may be declared in another file
    locks::resolve_entity_tables(&mut irs);
    for (ir, rebuilt) in irs.iter().zip(rebuilt) {
        if rebuilt && report.selected.contains(&ir.file.path) {
            report.notes.push(Note {
                path: ir.file.display.clone(),
                message: "its entry in the analysis cache could not be read and was rebuilt"
                    .to_string(),
            });
        }
    }
    (report, irs, packages, states, closure)
}

/// How the prefilter found a loaded file, to store (`None`: it could not be read, or its state
/// was not recorded).
fn scan_of(l: &Loaded, state: Option<&FileState>) -> Option<Scan> {
    let spelling = match l {
        Loaded::Unread(_, _, _, spelling) => Some(spelling.clone()),
        Loaded::File(_) | Loaded::Skipped(_) => None,
        Loaded::Failed(_) => return None,
    };
    Some(Scan::new(state?.clone(), spelling))
}

/// Count a loaded file in the report (a selected one's lines, the note or error of a selected
/// file that was not analysed: problems reading files outside the selection are not the run's
/// to report); whether it is a file of the project's analysis.
pub(crate) fn tally(report: &mut Report, l: &Loaded, selected: bool) -> bool {
    let (f, lines) = match l {
        Loaded::File(f) => (f, f.lines.line_count()),
        Loaded::Unread(f, lines, ..) => (f, *lines),
        Loaded::Skipped(n) => {
            if selected {
                report.notes.push(n.clone());
            }
            return false;
        }
        Loaded::Failed(e) => {
            if selected {
                report.errors.push(e.clone());
            }
            return false;
        }
    };
    if selected {
        report.files += 1;
        report.lines += lines;
        report.selected.insert(f.path.clone());
    }
    report.project_files += 1;
    true
}

/// [`analyze_file`] through the cache: a stored analysis of the same path and text is used,
/// placed at the file's position; anything else is analysed and stored. The flag says the stored
/// entry did not read back and was rebuilt.
pub(crate) fn analyze_cached(
    cache: &Cache,
    index: usize,
    file: crate::source::FileRef,
) -> crate::parsing::Parse {
    let entry = cache.entry(&file);
    let made = |ir: FileIr, corrupt: bool| crate::parsing::Parse {
        ir,
        corrupt,
        entry: Some(entry.key().to_string()),
    };
    let corrupt = match entry.load(index, &file) {
        Lookup::Hit(ir) => return made(*ir, false),
        Lookup::Miss => false,
        Lookup::Corrupt => true,
    };
    match isolate::catch(|| frontend::analyze(index, file.clone())) {
        Ok(ir) => {
            entry.store(&ir);
            made(ir, corrupt)
        }
        Err(message) => made(panicked(file, &message), corrupt),
    }
}

/// Run the front-ends on one file. A panic inside them does not end the run: the file becomes
/// one `parse-error` finding at its start. Call it on an analysis thread (see [`run`]): deep
/// but legal code needs their large stack.
pub fn analyze_file(index: usize, file: crate::source::FileRef) -> FileIr {
    match isolate::catch(|| frontend::analyze(index, file.clone())) {
        Ok(ir) => ir,
        Err(message) => panicked(file, &message),
    }
}

/// The form of a file whose analysis panicked: one problem at its start.
fn panicked(file: crate::source::FileRef, message: &str) -> FileIr {
    let mut ir = FileIr::new(file.clone());
    ir.problems.push(isolate::file_problem(&file, message));
    ir
}

/// Run one rule step; a panic becomes a `parse-error` finding on `file`.
fn rule_step(
    file: &crate::source::FileRef,
    out: &mut Vec<Diagnostic>,
    step: impl FnOnce(&mut Vec<Diagnostic>),
) {
    let mut found = Vec::new();
    let result = isolate::catch(|| step(&mut found));
    forget_spans();
    match result {
        Ok(()) => out.extend(found.into_iter().map(compact)),
        Err(message) => out.push(crate::rules::problems::file_finding(file, &message)),
    }
}

/// A finding kept until the output, its texts holding no spare capacity: `format!` reserves
/// twice its literal text, and a file can hold tens of thousands of findings.
fn compact(mut d: Diagnostic) -> Diagnostic {
    d.label.shrink_to_fit();
    d.message.shrink_to_fit();
    d.help.shrink_to_fit();
    for r in &mut d.related {
        r.label.shrink_to_fit();
    }
    d.related.shrink_to_fit();
    d
}

/// After a rule step: the text of everything it parsed (fixes lay out their code with `syn`)
/// stays in this thread's span table until it is cleared, and findings hold no syntax. A
/// language server would otherwise grow with every analysis.
fn forget_spans() {
    proc_macro2::extra::invalidate_current_thread_spans();
}

fn enabled(name: &str, opts: &Options) -> bool {
    (opts.select.is_empty() || opts.select.iter().any(|s| s == name))
        && !opts.ignore.iter().any(|s| s == name)
}

/// Run the rules over analysed files (no configuration).
pub fn findings(irs: &[FileIr], opts: &Options) -> Vec<Diagnostic> {
    findings_with(irs, opts, &Settings::default())
}

/// Run the rules over analysed files with project-wide settings.
pub fn findings_with(irs: &[FileIr], opts: &Options, settings: &Settings) -> Vec<Diagnostic> {
    findings_of(&locks::analyze_with(irs, &settings.project()), opts)
}

/// Run the enabled rules over the project facts (and report the files' parse problems).
pub(crate) fn findings_of(project: &locks::Project, opts: &Options) -> Vec<Diagnostic> {
    let irs = project.files;
    let mut out = Vec::new();
    if enabled(PARSE_ERROR.name, opts) {
        for ir in irs {
            for p in &ir.problems {
                out.push(crate::rules::problems::finding(&ir.file, p));
            }
        }
    }
    let active: Vec<_> = rules::all()
        .iter()
        .filter(|r| enabled(r.info().name, opts))
        .collect();
    // every trace without fixes, each finding with the trace it came from
    let found: Vec<(Option<usize>, Diagnostic)> = project
        .traces
        .par_iter()
        .enumerate()
        .flat_map_iter(|(i, t)| {
            let mut v = Vec::new();
            for r in &active {
                rule_step(&t.file, &mut v, |v| {
                    let mut found = Findings::default();
                    r.check(t, &project.facts, Fixes::Skip, &mut found);
                    v.extend(found.into_vec());
                });
            }
            v.into_iter().map(move |d| (Some(i), d))
        })
        .collect();
    // the many findings of traces stay where they are; the few parse errors join them
    let mut all = found;
    all.extend(out.into_iter().map(|d| (None, d)));
    let per_file: Vec<Diagnostic> = project
        .files
        .par_iter()
        .flat_map_iter(|f| {
            let mut v = Vec::new();
            for r in &active {
                rule_step(&f.file, &mut v, |v| r.check_file(f, project, v));
            }
            v
        })
        .collect();
    all.extend(per_file.into_iter().map(|d| (None, d)));
    let mut merged = merge_duplicates(all);
    build_trace_fixes(project, &active, &mut merged);
    let merged: Vec<Diagnostic> = merged.into_iter().map(|(_, d)| d).collect();
    crate::suppress::apply(irs, merged, &|name| enabled(name, opts))
}

/// One finding per (rule, span). The same defect is seen from every function that reaches it;
/// keep the variant with the most context (a key resolved at a call site, the call chain) and
/// carry the other call sites over as related spans. Each finding comes with the trace it was
/// found in, if any; the kept variant keeps its trace.
fn merge_duplicates(mut all: Vec<(Option<usize>, Diagnostic)>) -> Vec<(Option<usize>, Diagnostic)> {
    all.sort_by(|(_, a), (_, b)| {
        a.sort_key()
            .cmp(&b.sort_key())
            .then(b.related.len().cmp(&a.related.len()))
            .then(a.message.cmp(&b.message))
    });
    let mut out: Vec<(Option<usize>, Diagnostic)> = Vec::with_capacity(all.len());
    // locations the last kept finding already shows
    let mut shown: HashSet<(PathBuf, crate::source::Span)> = HashSet::new();
    let at = |l: &Location| (l.file.path.clone(), l.span);
    // sorted, the variants of one finding are neighbours: a finding is new when it is not the
    // last kept one
    let same = |a: &Diagnostic, b: &Diagnostic| {
        a.rule == b.rule
            && a.primary.span == b.primary.span
            && a.primary.file.path == b.primary.file.path
    };
    for (trace, d) in all {
        if !out.last().is_some_and(|(_, kept)| same(kept, &d)) {
            shown.clear();
            shown.insert(at(&d.primary));
            shown.extend(d.related.iter().map(|r| at(&r.location)));
            out.push((trace, d));
            continue;
        }
        let Some((_, kept)) = out.last_mut() else {
            continue;
        };
        for r in d.related {
            if shown.insert(at(&r.location)) {
                kept.related.push(r);
            }
        }
    }
    out
}

/// Build the fixes of the kept trace findings: the rules of fixable findings check the trace each
/// came from again, asking for the fix of the first variant with the kept finding's rule, span
/// and message only (a helper expanded many times in one trace repeats its findings). A rule
/// step that fails leaves the finding without a fix.
fn build_trace_fixes(
    project: &locks::Project,
    active: &[&&'static dyn crate::rules::Rule],
    merged: &mut [(Option<usize>, Diagnostic)],
) {
    // a finding by its rule, span, and a hash of its path and message: one key per finding
    // without copies of its strings (a file of 30,000 findings held three sets of them)
    type Wanted = (&'static str, crate::source::Span, u64);
    let key = |d: &Diagnostic| -> Wanted {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        d.primary.file.path.hash(&mut h);
        d.message.hash(&mut h);
        (d.rule, d.primary.span, h.finish())
    };
    let mut by_trace: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (k, (trace, d)) in merged.iter().enumerate() {
        if let Some(t) = trace {
            if crate::rules::find(d.rule).is_some_and(|i| i.fixable) {
                by_trace.entry(*t).or_default().push(k);
            }
        }
    }
    let work: Vec<(usize, Vec<(usize, Wanted)>)> = by_trace
        .into_iter()
        .map(|(t, ks)| (t, ks.into_iter().map(|k| (k, key(&merged[k].1))).collect()))
        .collect();
    let fixes: Vec<(usize, Option<Fix>)> = work
        .par_iter()
        .flat_map_iter(|(t, kept)| {
            let trace = &project.traces[*t];
            let rules: HashSet<&'static str> = kept.iter().map(|(_, w)| w.0).collect();
            // each wanted finding's place among the kept ones; the first variant asked for
            // takes it
            let places: HashMap<Wanted, usize> =
                kept.iter().enumerate().map(|(i, (_, w))| (*w, i)).collect();
            let asked = std::cell::RefCell::new(vec![false; kept.len()]);
            let wanted = |d: &Diagnostic| {
                places
                    .get(&key(d))
                    .is_some_and(|&i| !std::mem::replace(&mut asked.borrow_mut()[i], true))
            };
            let mut built: Vec<Option<Fix>> = vec![None; kept.len()];
            for r in active.iter().filter(|r| rules.contains(r.info().name)) {
                let _ = isolate::catch(|| {
                    // each finding's fix is kept as it is found, the finding dropped
                    let mut keep_fix = |mut d: Diagnostic| {
                        if let (Some(fix), Some(&i)) = (d.fix.take(), places.get(&key(&d))) {
                            built[i].get_or_insert(fix);
                        }
                    };
                    let mut found = Findings::each(&mut keep_fix);
                    r.check(trace, &project.facts, Fixes::For(&wanted), &mut found);
                });
                forget_spans();
            }
            kept.iter()
                .zip(built)
                .map(|((k, _), fix)| (*k, fix))
                .collect::<Vec<_>>()
        })
        .collect();
    for (k, fix) in fixes {
        merged[k].1.fix = fix;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_step_leaves_no_parsed_text_on_its_thread() {
        let file = crate::source::SourceFile::new(PathBuf::from("a.rs"), "fn f() {}".into());
        let mut out = Vec::new();
        // what a fix's layout does: parse code, keep only text
        rule_step(&file, &mut out, |_| {
            let parsed: syn::File = syn::parse_str("fn g() { let x = 1; }").unwrap();
            assert!(!parsed.items.is_empty());
        });
        assert!(out.is_empty());
        // the span table was cleared: a span parsed before the step no longer resolves
        let before: proc_macro2::TokenStream = "a b".parse().unwrap();
        let span = before.into_iter().next().unwrap().span();
        rule_step(&file, &mut out, |_| {});
        let resolved = std::panic::catch_unwind(|| span.start());
        assert!(resolved.is_err());
    }
}
