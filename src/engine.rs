//! Runs an analysis: load files in parallel, run the front-ends, derive project facts,
//! run the rules over every trace, and return sorted, de-duplicated findings.

use crate::baseline::Baseline;
use crate::config::{self, Mode, Resolver, Settings};
use crate::diagnostic::{Diagnostic, Location};
use crate::discover::{describe_io, discover, PathError};
use crate::frontend;
use crate::ir::FileIr;
use crate::isolate;
use crate::locks;
use crate::rules::{self, PARSE_ERROR};
use crate::source::{display_path, SourceFile};
use rayon::prelude::*;
use std::collections::HashSet;
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
    pub paths: Vec<PathBuf>,
    /// Directories not to descend into.
    pub exclude_dirs: Vec<PathBuf>,
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
    /// Keep every file's intermediate form in [`Report::irs`] (for the audit).
    pub keep_irs: bool,
    /// `--baseline`: findings recorded in it are not reported and do not fail the run.
    pub baseline: Option<Arc<Baseline>>,
    /// `--changed-since`: only findings in these files (canonical paths) are reported.
    pub only_files: Option<Arc<HashSet<PathBuf>>>,
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
    /// Every analysed file's intermediate form, when [`Options::keep_irs`] asks for it.
    pub irs: Vec<FileIr>,
}

enum Loaded {
    File(crate::source::FileRef),
    Skipped(Note),
    Failed(PathError),
}

fn load(path: PathBuf, overlay: Option<&std::collections::HashMap<PathBuf, String>>) -> Loaded {
    if let Some(text) = overlay.and_then(|o| o.get(&path)) {
        return Loaded::File(SourceFile::new(path, text.clone()));
    }
    let shown = display_path(&path);
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) => {
            return Loaded::Failed(PathError {
                path,
                message: describe_io(&e),
            })
        }
    };
    if meta.len() > MAX_FILE_BYTES {
        return Loaded::Skipped(Note {
            path: shown,
            message: format!(
                "skipped: larger than {} MiB",
                MAX_FILE_BYTES / (1024 * 1024)
            ),
        });
    }
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            return Loaded::Failed(PathError {
                path,
                message: describe_io(&e),
            })
        }
    };
    if bytes.iter().take(8192).any(|&b| b == 0) {
        return Loaded::Skipped(Note {
            path: shown,
            message: "skipped: binary file".to_string(),
        });
    }
    match String::from_utf8(bytes) {
        Ok(text) => Loaded::File(SourceFile::new(path, text)),
        Err(e) => Loaded::Skipped(Note {
            path: shown,
            message: format!(
                "skipped: not valid UTF-8 (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        }),
    }
}

fn pool() -> rayon::ThreadPool {
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

/// Analyse the paths in `opts`.
pub fn run(opts: &Options) -> Report {
    let resolver = match resolver(opts) {
        Ok(r) => r,
        Err(e) => {
            return Report {
                config_error: Some(e),
                ..Default::default()
            }
        }
    };
    let resolver = Arc::new(resolver);
    // Only a configuration that governs a named path or a file to analyse is read, and only
    // its errors stop the run (each named once). Directories that a governing configuration
    // excludes are not walked, so nothing under them is read.
    let mut config_errors: Vec<Arc<config::ConfigError>> = Vec::new();
    let mut config_error = |e: Arc<config::ConfigError>| {
        if !config_errors.iter().any(|x| x.path == e.path) {
            config_errors.push(e);
        }
    };
    for p in &opts.paths {
        if let Err(e) = resolver.for_file(p) {
            config_error(e);
        }
    }
    let excluded_dir = {
        let resolver = resolver.clone();
        move |dir: &Path| {
            dir.parent()
                .and_then(|parent| resolver.for_file(parent).ok())
                .is_some_and(|s| s.excludes(dir))
        }
    };
    // an editor's unsaved buffer is a file to analyse though nothing is on disk yet
    let (in_memory, on_disk): (Vec<PathBuf>, Vec<PathBuf>) = opts
        .paths
        .iter()
        .cloned()
        .partition(|p| opts.overlay.as_ref().is_some_and(|o| o.contains_key(p)) && !p.exists());
    let (mut paths, errors) = discover(&on_disk, &opts.exclude_dirs, Arc::new(excluded_dir));
    paths.extend(in_memory);
    let mut kept = Vec::with_capacity(paths.len());
    for p in paths {
        match resolver.for_file(&p) {
            Ok(s) if s.excludes(&p) => {}
            Ok(_) => kept.push(p),
            Err(e) => config_error(e),
        }
    }
    let empty_paths = empty_paths(&opts.paths, &kept);
    let config_notes: Vec<Note> = resolver
        .notes()
        .into_iter()
        .map(|(path, message)| Note {
            path: display_path(&path),
            message,
        })
        .collect();
    if !config_errors.is_empty() {
        return Report {
            config_error: Some(config_errors.iter().map(|e| e.render()).collect()),
            notes: config_notes,
            ..Default::default()
        };
    }
    let mut project_settings = opts
        .paths
        .first()
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
    let mut report = pool().install(|| analyze_paths(kept, opts, &project_settings));
    report.help_uri = project_settings.help_uri.clone();
    report.errors.splice(0..0, errors);
    report.notes.splice(0..0, config_notes);
    report.empty_paths = empty_paths;
    // per-file rule selection, severities and what fails the run
    report.findings.retain_mut(|d| {
        let Ok(s) = resolver.for_file(&d.primary.file.path) else {
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
    filter_reported(&mut report, opts);
    report.failing = report
        .findings
        .iter()
        .filter(|d| {
            let fail_on = resolver
                .for_file(&d.primary.file.path)
                .ok()
                .and_then(|s| s.fail_on);
            d.severity == crate::diagnostic::Severity::Error
                || fail_on != Some(config::Level::Error)
        })
        .count();
    report
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
        let (new, gone) = b.filter(std::mem::take(&mut report.findings));
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

fn analyze_paths(paths: Vec<PathBuf>, opts: &Options, settings: &Settings) -> Report {
    let overlay = opts.overlay.as_deref();
    let loaded: Vec<Loaded> = paths.into_par_iter().map(|p| load(p, overlay)).collect();
    let mut report = Report::default();
    let mut sources = Vec::new();
    for l in loaded {
        match l {
            Loaded::File(f) => sources.push(f),
            Loaded::Skipped(n) => report.notes.push(n),
            Loaded::Failed(e) => report.errors.push(e),
        }
    }
    report.files = sources.len();
    report.lines = sources.iter().map(|s| s.lines.line_count()).sum();
    let irs: Vec<FileIr> = sources
        .into_par_iter()
        .enumerate()
        .map(|(i, f)| analyze_file(i, f))
        .collect();
    report.findings = findings_with(&irs, opts, settings);
    if opts.keep_irs {
        report.irs = irs;
    }
    report
}

/// Run the front-ends on one file. A panic inside them does not end the run: the file becomes
/// one `parse-error` finding at its start. Call it on an analysis thread (see [`run`]): deep
/// but legal code needs their large stack.
pub fn analyze_file(index: usize, file: crate::source::FileRef) -> FileIr {
    match isolate::catch(|| frontend::analyze(index, file.clone())) {
        Ok(ir) => ir,
        Err(message) => {
            let mut ir = FileIr::new(file.clone());
            ir.problems.push(isolate::file_problem(&file, &message));
            ir
        }
    }
}

/// Run one rule step; a panic becomes a `parse-error` finding on `file`.
fn rule_step(
    file: &crate::source::FileRef,
    out: &mut Vec<Diagnostic>,
    step: impl FnOnce(&mut Vec<Diagnostic>),
) {
    let mut found = Vec::new();
    match isolate::catch(|| step(&mut found)) {
        Ok(()) => out.extend(found),
        Err(message) => out.push(isolate::file_finding(file, &message)),
    }
}

/// The `parse-error` finding for a problem reading `file`.
pub(crate) fn problem_finding(
    file: &crate::source::FileRef,
    p: &crate::ir::ParseProblem,
) -> Diagnostic {
    Diagnostic {
        rule: PARSE_ERROR.name,
        severity: PARSE_ERROR.severity,
        primary: Location::new(file.clone(), p.span),
        label: "not analysed".to_string(),
        message: p.message.clone(),
        help: p.help.clone(),
        related: Vec::new(),
        fix: None,
    }
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
    let mut out = Vec::new();
    if enabled(PARSE_ERROR.name, opts) {
        for ir in irs {
            for p in &ir.problems {
                out.push(problem_finding(&ir.file, p));
            }
        }
    }
    let project = locks::analyze_with(irs, settings);
    let active: Vec<_> = rules::all()
        .iter()
        .filter(|r| enabled(r.info().name, opts))
        .collect();
    let found: Vec<Diagnostic> = project
        .traces
        .par_iter()
        .flat_map_iter(|t| {
            let mut v = Vec::new();
            for r in &active {
                rule_step(&t.file, &mut v, |v| r.check(t, &project.facts, v));
            }
            v
        })
        .collect();
    out.extend(found);
    let per_file: Vec<Diagnostic> = project
        .files
        .par_iter()
        .flat_map_iter(|f| {
            let mut v = Vec::new();
            for r in &active {
                rule_step(&f.file, &mut v, |v| r.check_file(f, &project, v));
            }
            v
        })
        .collect();
    out.extend(per_file);
    let merged = merge_duplicates(out);
    crate::suppress::apply(irs, merged, &|name| enabled(name, opts))
}

/// One finding per (rule, span). The same defect is seen from every function that reaches it;
/// keep the variant with the most context (a key resolved at a call site, the call chain) and
/// carry the other call sites over as related spans.
fn merge_duplicates(mut all: Vec<Diagnostic>) -> Vec<Diagnostic> {
    all.sort_by(|a, b| {
        a.sort_key()
            .cmp(&b.sort_key())
            .then(b.related.len().cmp(&a.related.len()))
            .then(a.message.cmp(&b.message))
    });
    let mut out: Vec<Diagnostic> = Vec::with_capacity(all.len());
    let mut seen: HashSet<(&'static str, PathBuf, crate::source::Span)> = HashSet::new();
    // locations the last kept finding already shows
    let mut shown: HashSet<(PathBuf, crate::source::Span)> = HashSet::new();
    let at = |l: &Location| (l.file.path.clone(), l.span);
    for d in all {
        let key = (d.rule, d.primary.file.path.clone(), d.primary.span);
        if seen.insert(key) {
            shown.clear();
            shown.insert(at(&d.primary));
            shown.extend(d.related.iter().map(|r| at(&r.location)));
            out.push(d);
            continue;
        }
        let Some(kept) = out.last_mut() else { continue };
        for r in d.related {
            if shown.insert(at(&r.location)) {
                kept.related.push(r);
            }
        }
    }
    out
}
