//! A project held in memory, for analyses that follow each other (the language server): every
//! file's text as last read or as the editor holds it, the front-ends' result per file (kept
//! while the file's text stays the same), which files spell each name the parser's rounds
//! (`parsing`) asked for, the Cargo packages and the configuration. An analysis reads nothing
//! from the disk: a file is read again only when [`Index::files_changed`] says it changed (or
//! its editor's text goes away); a file created or deleted has the project's files listed
//! again (the new ones read), a configuration or manifest that changed has the project read
//! anew. Each analysis then runs the front-ends on the files whose text changed; when every
//! file changed since the last analysis changes nothing that analysis read (see
//! [`parsing::Role`]) its findings stand, else the project-wide steps (the rounds, facts,
//! rules) run over the whole project, with the engine's own stages, so the findings are those
//! of [`engine::run`] on the same texts.

use crate::answer::FileState;
use crate::cache::Cache;
use crate::config::{Resolver, Settings};
use crate::discover::Prune;
use crate::engine::{self, Loaded, Options, Report};
use crate::frontend::prefilter::Appears;
use crate::ir::FileIr;
use crate::locks;
use crate::parsing::{self, Spelled};
use crate::source::FileRef;
use rayon::prelude::*;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The names of the files whose change has the project found again: configuration and
/// manifests (which files are excluded, which package a file is in).
const PROJECT_FILES: [&str; 3] = ["locklint.toml", ".locklint.toml", "Cargo.toml"];

/// A project held in memory; see the module documentation.
pub struct Index {
    /// The project root, configuration and rules of every analysis (`paths` and `overlay`
    /// are given per analysis).
    opts: Options,
    held: Option<Held>,
    /// Files reported changed on disk since the last analysis.
    changed: Vec<PathBuf>,
    /// Times the files of the project were read from the disk (a file read again counts
    /// again).
    reads: usize,
    /// Analyses that analysed the project (not answered by the last one's findings).
    analysed: usize,
    pool: rayon::ThreadPool,
}

/// What is kept of the project between analyses.
struct Held {
    resolver: Arc<Resolver>,
    prune: Prune,
    settings: Arc<Settings>,
    /// The files under the root, with their keys, in the project's order.
    walked: Vec<(PathBuf, PathBuf)>,
    /// Each walked file as loaded (from the disk or the editor's text).
    files: Vec<Loaded>,
    by_path: HashMap<PathBuf, usize>,
    packages: locks::Packages,
    /// The walked files whose text is the editor's.
    edited: HashSet<PathBuf>,
    memo: Memo,
    /// The configuration's notes told so far (each is told once: the configuration is
    /// read once).
    told: Mutex<HashSet<(String, String)>>,
    /// The last analysis of the project, and the files whose text changed since.
    last: Option<Last>,
    since: HashSet<PathBuf>,
}

/// What the last analysis of the project found and rested on: another analysis whose files
/// changed only in ways that change nothing it read has the same findings ([`Held::reuse`]).
struct Last {
    /// The project's files, in order.
    files: Vec<PathBuf>,
    /// Which of them it parsed, in which packages, and the names its rounds asked for.
    closure: parsing::Closure,
    /// The findings of the whole project.
    findings: Vec<crate::diagnostic::Diagnostic>,
    /// The files those findings point into (primary and related locations, fix edits).
    shown: HashSet<PathBuf>,
    /// The [`parsing::Role`] and [`parsing::shape`] of the parsed files looked at since (by
    /// their text then).
    roles: HashMap<PathBuf, Option<(parsing::Role, u64)>>,
}

/// What analyses found and the next can use, by file.
#[derive(Default)]
struct Memo {
    /// The front-ends' result of a file, for the text it holds.
    parsed: Mutex<HashMap<PathBuf, FileIr>>,
    mentions: Mutex<Mentions>,
}

/// A name as the rounds look for it, and how it must appear ([`parsing::patterns`]).
type Pattern = (String, Appears);

/// Which files of the project spell each name asked for so far, for the texts they held then
/// (by their place in `files`; another list of files starts afresh); the files whose text
/// changed since are looked at again.
#[derive(Default)]
struct Mentions {
    files: Vec<PathBuf>,
    found: HashMap<Pattern, Arc<Vec<bool>>>,
    changed: HashSet<PathBuf>,
}

impl Index {
    /// An index of the project of `opts` (`project_root`, `config`, the rules); nothing is
    /// read until the first analysis.
    pub fn new(opts: Options) -> Index {
        Index {
            opts: Options {
                paths: Vec::new(),
                overlay: None,
                ..opts
            },
            held: None,
            changed: Vec::new(),
            reads: 0,
            analysed: 0,
            pool: engine::pool(),
        }
    }

    /// How many times a file of the project was read from the disk.
    pub fn reads(&self) -> usize {
        self.reads
    }

    /// How many analyses analysed the project (the rounds, the project facts and the rules);
    /// the others answered with the findings of the one before, whose files changed only in
    /// ways that change nothing it read.
    pub fn analysed(&self) -> usize {
        self.analysed
    }

    /// Files changed, created or deleted on disk: read again at the next analysis.
    pub fn files_changed(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        self.changed.extend(paths);
    }

    /// The findings of the files `selection` as [`engine::run`] reports them with `overlay`
    /// (the editor's texts, by path) in place of the files on disk.
    pub fn analyse(
        &mut self,
        selection: &[PathBuf],
        overlay: Arc<HashMap<PathBuf, String>>,
    ) -> Report {
        self.refresh();
        if self.held.is_none() {
            match self.build() {
                Ok(held) => self.held = Some(held),
                Err(report) => return *report,
            }
        }
        let Some(held) = self.held.as_mut() else {
            return Report::default();
        };
        self.reads += held.edit(&overlay, self.opts.parse_all);
        let opts = Options {
            paths: selection.to_vec(),
            overlay: Some(overlay),
            ..self.opts.clone()
        };
        let (report, analysed) = held.analyse(&opts, &self.pool);
        self.analysed += usize::from(analysed);
        report
    }

    /// Takes in the files reported changed: the project is found again when a configuration
    /// or manifest changed (it decides which files are excluded and which package a file is
    /// in), its files listed again when one appeared or went, and the changed files are read
    /// again (unless the editor's text stands for them).
    fn refresh(&mut self) {
        let changed = std::mem::take(&mut self.changed);
        let Some(held) = self.held.as_mut() else {
            return;
        };
        if changed.iter().any(|p| {
            p.file_name()
                .is_some_and(|n| PROJECT_FILES.iter().any(|f| n == *f))
        }) {
            self.held = None;
            return;
        }
        let changed: Vec<PathBuf> = changed
            .into_iter()
            .filter(|p| crate::frontend::is_supported(p))
            .collect();
        let mut listed = HashSet::new();
        if changed
            .iter()
            .any(|p| held.by_path.contains_key(p) != p.is_file())
        {
            let root = self.opts.project_root.as_deref();
            listed = held.list_again(root, &self.pool, self.opts.parse_all);
            self.reads += listed.len();
        }
        for p in changed {
            if let Some(&i) = held.by_path.get(&p) {
                if !held.edited.contains(&p) && !listed.contains(&p) {
                    held.files[i] = held.read(i, self.opts.parse_all);
                    self.reads += 1;
                }
            }
        }
    }

    /// Finds the project and reads every file of it.
    fn build(&mut self) -> Result<Held, Box<Report>> {
        let (resolver, prune) = engine::configuration(&self.opts)?;
        let walked = self
            .opts
            .project_root
            .as_deref()
            .map(|root| engine::walk_project(root, &prune, &resolver))
            .unwrap_or_default();
        let files = read_all(&walked, &self.pool, self.opts.parse_all);
        self.reads += files.len();
        let settings = engine::project_settings(&self.opts, &resolver);
        let mut held = Held {
            resolver,
            prune,
            settings,
            walked: Vec::new(),
            files: Vec::new(),
            by_path: HashMap::new(),
            packages: locks::Packages::default(),
            edited: HashSet::new(),
            memo: Memo::default(),
            told: Mutex::default(),
            last: None,
            since: HashSet::new(),
        };
        held.hold(walked, files, self.opts.project_root.as_deref());
        Ok(held)
    }
}

/// The files of `walked`, read from the disk on the analysis threads.
fn read_all(
    walked: &[(PathBuf, PathBuf)],
    pool: &rayon::ThreadPool,
    parse_all: bool,
) -> Vec<Loaded> {
    pool.install(|| {
        walked
            .par_iter()
            .map(|(_, p)| engine::load(p.clone(), None, parse_all, false, true).0)
            .collect()
    })
}

/// The paths of the files that were loaded (not skipped, not failed), in order.
fn loaded_paths(files: &[Loaded]) -> Vec<&Path> {
    files
        .iter()
        .filter_map(|l| match l {
            Loaded::File(f) | Loaded::Unread(f, ..) => Some(f.path.as_path()),
            Loaded::Skipped(_) | Loaded::Failed(_) => None,
        })
        .collect()
}

/// The text a loaded file holds.
fn text_of(l: &Loaded) -> Option<&str> {
    match l {
        Loaded::File(f) => Some(&f.text),
        Loaded::Unread(_, _, aside, _) => aside.as_deref(),
        Loaded::Skipped(_) | Loaded::Failed(_) => None,
    }
}

impl Held {
    /// Holds `files`, those of `walked`, and their packages.
    fn hold(&mut self, walked: Vec<(PathBuf, PathBuf)>, files: Vec<Loaded>, root: Option<&Path>) {
        self.by_path = walked
            .iter()
            .enumerate()
            .map(|(i, (_, p))| (p.clone(), i))
            .collect();
        self.packages = crate::packages::of_files(loaded_paths(&files).iter().copied(), root);
        self.walked = walked;
        self.files = files;
        // another list of files: the last analysis stands for nothing
        self.last = None;
    }

    /// Lists the project's files again: those held are kept as they are, the others read (and
    /// returned).
    fn list_again(
        &mut self,
        root: Option<&Path>,
        pool: &rayon::ThreadPool,
        parse_all: bool,
    ) -> HashSet<PathBuf> {
        let walked = root
            .map(|root| engine::walk_project(root, &self.prune, &self.resolver))
            .unwrap_or_default();
        let new: Vec<(PathBuf, PathBuf)> = walked
            .iter()
            .filter(|(_, p)| !self.by_path.contains_key(p))
            .cloned()
            .collect();
        let mut read: HashMap<PathBuf, Loaded> = new
            .iter()
            .map(|(_, p)| p.clone())
            .zip(read_all(&new, pool, parse_all))
            .collect();
        let mut old: Vec<Option<Loaded>> = std::mem::take(&mut self.files)
            .into_iter()
            .map(Some)
            .collect();
        let (walked, files): (Vec<_>, Vec<_>) = walked
            .into_iter()
            .filter_map(|(key, p)| {
                let loaded = match self.by_path.get(&p) {
                    Some(&i) => old[i].take(),
                    None => read.remove(&p),
                }?;
                Some(((key, p), loaded))
            })
            .unzip();
        self.hold(walked, files, root);
        new.into_iter().map(|(_, p)| p).collect()
    }

    /// Walked file `i` read from the disk.
    fn read(&mut self, i: usize, parse_all: bool) -> Loaded {
        self.memo.changed(&self.walked[i].1);
        self.since.insert(self.walked[i].1.clone());
        engine::load(self.walked[i].1.clone(), None, parse_all, false, true).0
    }

    /// The editor's texts in place of the walked files they are of, and the files whose
    /// editor's text went away read again; how many were read.
    fn edit(&mut self, overlay: &HashMap<PathBuf, String>, parse_all: bool) -> usize {
        let mut reads = 0;
        let gone: Vec<PathBuf> = self
            .edited
            .iter()
            .filter(|p| !overlay.contains_key(*p))
            .cloned()
            .collect();
        for p in gone {
            self.edited.remove(&p);
            if let Some(&i) = self.by_path.get(&p) {
                self.files[i] = self.read(i, parse_all);
                reads += 1;
            }
        }
        for (p, text) in overlay {
            let Some(&i) = self.by_path.get(p) else {
                continue;
            };
            self.edited.insert(p.clone());
            if text_of(&self.files[i]) != Some(text.as_str()) {
                self.memo.changed(p);
                self.since.insert(p.clone());
                self.files[i] = engine::loaded_text(p.clone(), text.clone(), parse_all, true);
            }
        }
        reads
    }

    /// One analysis of `opts`' selection over the files held: the last one's findings when
    /// the files changed since change nothing it read ([`Held::reuse`]), else the project
    /// analysed (then `true`).
    fn analyse(&mut self, opts: &Options, pool: &rayon::ThreadPool) -> (Report, bool) {
        let (kept, mut told) = match engine::select(opts, &self.resolver, &self.prune) {
            Ok(s) => s,
            Err(report) => return (*report, false),
        };
        if let Ok(mut seen) = self.told.lock() {
            told.config_notes
                .retain(|n| seen.insert((n.path.clone(), n.message.clone())));
        }
        let (files, _) = engine::project_files(opts, kept, &|| self.walked.clone());
        let (mut report, last) = pool.install(|| match self.reuse(&files, opts.parse_all) {
            Some(report) => (report, None),
            None => {
                let (report, last) = self.analyse_project(files, opts);
                (report, Some(last))
            }
        });
        let analysed = last.is_some();
        if let Some(last) = last {
            self.last = Some(last);
        }
        self.since.clear();
        engine::tell(&mut report, told, &self.settings);
        engine::finish(&mut report, opts, &self.resolver);
        (report, analysed)
    }

    /// The project's files analysed (rounds, project facts, rules), with the report of the
    /// selection and what the analysis rested on.
    fn analyse_project(&self, files: Vec<(PathBuf, bool)>, opts: &Options) -> (Report, Last) {
        let paths: Vec<PathBuf> = files.iter().map(|(p, _)| p.clone()).collect();
        let memory = Memory {
            held: self,
            overlay: opts.overlay.as_deref(),
            cache: opts.cache_dir.as_deref().and_then(Cache::open),
            parse_all: opts.parse_all,
        };
        let (mut report, irs, packages, _, closure) =
            engine::analyze_paths(files, opts, false, &memory);
        let project = locks::analyze_in(&irs, &self.settings.project(), &packages);
        report.findings = engine::findings_of(&project, opts);
        let count = irs.len();
        drop(project);
        self.memo.give_back(irs);
        let last = Last {
            files: paths,
            closure,
            shown: shown(&report.findings),
            findings: report.findings.clone(),
            roles: HashMap::new(),
        };
        engine::keep_selected(&mut report, count);
        (report, last)
    }

    /// The report of the last analysis, when the project's files are the same and every file
    /// whose text changed since changes nothing it read: a file it left out that it would
    /// leave out again (`parsing::Closure::would_parse`), or a file it parsed, into which none
    /// of its findings points, whose new text has the same [`parsing::Role`] (parsed in the
    /// same round, the same intermediate form). The files are counted as an analysis counts
    /// them; a changed file's new form is kept for the next analysis.
    fn reuse(&mut self, files: &[(PathBuf, bool)], parse_all: bool) -> Option<Report> {
        let last = self.last.as_mut()?;
        if files.len() != last.files.len()
            || files.iter().zip(&last.files).any(|((p, _), q)| p != q)
        {
            return None;
        }
        for p in &self.since {
            let i = last.files.iter().position(|q| q == p)?;
            let text = text_of(&self.files[*self.by_path.get(p)?])?;
            if !last.closure.parsed.get(i).copied().unwrap_or(true) {
                let package = last.closure.packages.get(i).copied().flatten();
                if last.closure.would_parse(p, text, package) {
                    return None;
                }
                continue;
            }
            if last.shown.contains(p) {
                return None;
            }
            let asked = &last.closure.asked;
            let before = match last.roles.get(p) {
                Some(role) => *role,
                None => {
                    let role = self.memo.role(p, asked, parse_all);
                    last.roles.insert(p.clone(), role);
                    role
                }
            };
            let before = before?;
            let mut ir = engine::analyze_file(
                0,
                crate::source::SourceFile::new(p.clone(), text.to_string()),
            );
            let now = parsing::Role::of(&ir.file, asked, parse_all).zip(parsing::shape(&ir));
            ir.place_at(i);
            self.memo.keep(ir);
            if now != Some(before) {
                return None;
            }
        }
        let mut report = Report::default();
        for (p, selected) in files {
            engine::tally(&mut report, &self.files[*self.by_path.get(p)?], *selected);
        }
        report.findings = last.findings.clone();
        let count = report.project_files;
        engine::keep_selected(&mut report, count);
        Some(report)
    }
}

/// The files findings point into.
fn shown(findings: &[crate::diagnostic::Diagnostic]) -> HashSet<PathBuf> {
    let mut out = HashSet::new();
    for d in findings {
        out.insert(d.primary.file.path.clone());
        out.extend(d.related.iter().map(|r| r.location.file.path.clone()));
        if let Some(f) = &d.fix {
            out.extend(f.edits.iter().map(|e| e.location.file.path.clone()));
        }
    }
    out
}

/// Whether a file's intermediate form changes with the project's other files after the
/// front-ends (a write through an ORM entity, whose table another file may declare:
/// `locks::resolve_entity_tables`); such a form is kept as the front-ends gave it.
fn resolved(ir: &FileIr) -> bool {
    ir.embedded.iter().any(|e| {
        matches!(
            e.origin,
            crate::ir::Origin::Orm {
                entity: Some(_),
                ..
            }
        )
    })
}

impl Memo {
    /// The front-ends' result for `f`'s text, if it is kept: lent to the analysis (given back
    /// by [`Memo::give_back`]), or a copy when the analysis changes it (see [`resolved`]). A
    /// result for another text is dropped.
    fn take(&self, f: &FileRef) -> Option<FileIr> {
        let mut parsed = self.parsed.lock().ok()?;
        let ir = parsed.remove(&f.path)?;
        if ir.file.text != f.text {
            return None;
        }
        if resolved(&ir) {
            let copy = ir.clone();
            parsed.insert(f.path.clone(), ir);
            return Some(copy);
        }
        Some(ir)
    }

    /// Keeps a file's intermediate form.
    fn keep(&self, ir: FileIr) {
        if let Ok(mut parsed) = self.parsed.lock() {
            parsed.insert(ir.file.path.clone(), ir);
        }
    }

    /// Takes back the files an analysis parsed or was lent (those not kept already).
    fn give_back(&self, irs: Vec<FileIr>) {
        let Ok(mut parsed) = self.parsed.lock() else {
            return;
        };
        for ir in irs {
            // a file that was not parsed holds no text
            if !ir.file.text.is_empty() && !parsed.contains_key(&ir.file.path) {
                parsed.insert(ir.file.path.clone(), ir);
            }
        }
    }

    /// The source of the file at `path` with `text`, as kept.
    fn source(&self, path: &Path, text: &str) -> Option<FileRef> {
        let parsed = self.parsed.lock().ok()?;
        parsed
            .get(path)
            .filter(|ir| ir.file.text == text)
            .map(|ir| ir.file.clone())
    }

    /// The [`parsing::Role`] and [`parsing::shape`] of the form kept for the file at `path`
    /// (for the text it was made from), the form dropped: the file's text changed, and a form
    /// of the new text takes its place.
    fn role(
        &self,
        path: &Path,
        asked: &[locks::reach::Wanted],
        parse_all: bool,
    ) -> Option<(parsing::Role, u64)> {
        let mut ir = self.parsed.lock().ok()?.remove(path)?;
        ir.place_at(0);
        parsing::Role::of(&ir.file, asked, parse_all).zip(parsing::shape(&ir))
    }

    /// The file holds another text.
    fn changed(&mut self, path: &Path) {
        if let Ok(m) = self.mentions.get_mut() {
            m.changed.insert(path.to_path_buf());
        }
    }
}

/// The files of one analysis: the held ones, and the selected files the project does not hold
/// (an editor's buffer not on disk) from the editor's text or the disk.
struct Memory<'a> {
    held: &'a Held,
    overlay: Option<&'a HashMap<PathBuf, String>>,
    cache: Option<Cache>,
    parse_all: bool,
}

impl parsing::Source for Memory<'_> {
    fn text<'f>(&'f self, f: &'f FileRef) -> Option<Cow<'f, str>> {
        engine::Disk {
            overlay: self.overlay,
            cache: None,
            parse_all: self.parse_all,
            scans: None,
        }
        .text(f)
        .map(|t| Cow::Owned(t.into_owned()))
    }

    fn parse(&self, i: usize, f: FileRef) -> parsing::Parse {
        if let Some(mut ir) = self.held.memo.take(&f) {
            ir.file = f;
            ir.place_at(i);
            return parsing::Parse::uncached(ir);
        }
        let edited = self.held.edited.contains(&f.path);
        let parse = match &self.cache {
            // an editor's unsaved text changes with every key: not worth an entry
            Some(cache) if !edited => engine::analyze_cached(cache, i, f.clone()),
            _ => parsing::Parse::uncached(engine::analyze_file(i, f.clone())),
        };
        if resolved(&parse.ir) {
            self.held.memo.keep(parse.ir.clone());
        }
        parse
    }

    fn with_text(&self, f: &FileRef, text: Cow<str>) -> FileRef {
        self.held
            .memo
            .source(&f.path, &text)
            .unwrap_or_else(|| crate::source::SourceFile::new(f.path.clone(), text.into_owned()))
    }

    fn mentioning(
        &self,
        needed: &[locks::reach::Wanted],
        files: &[FileRef],
        spelled: &Spelled,
        candidates: Vec<usize>,
    ) -> Vec<(usize, Vec<bool>)> {
        let Ok(mut mentions) = self.held.memo.mentions.lock() else {
            return parsing::scan(needed, spelled, candidates);
        };
        if mentions.files.len() != files.len()
            || mentions.files.iter().zip(files).any(|(p, f)| *p != f.path)
        {
            *mentions = Mentions {
                files: files.iter().map(|f| f.path.clone()).collect(),
                ..Mentions::default()
            };
        }
        let patterns: Vec<Pattern> = needed
            .iter()
            .flat_map(|w| parsing::patterns(w).map(|(n, a)| (n.to_string(), a)))
            .collect();
        // names not asked for before: every file is looked at once
        let new: Vec<&Pattern> = patterns
            .iter()
            .filter(|p| !mentions.found.contains_key(*p))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        if !new.is_empty() {
            let finder = crate::frontend::prefilter::Mentions::new(
                new.iter().map(|(n, appears)| (n.as_str(), *appears)),
            );
            let hits: Vec<Vec<usize>> = (0..files.len())
                .into_par_iter()
                .map(|i| spelled(i).map(|s| finder.find_in(&s)).unwrap_or_default())
                .collect();
            for (k, p) in new.into_iter().enumerate() {
                let found = hits.iter().map(|h| h.contains(&k)).collect();
                mentions.found.insert(p.clone(), Arc::new(found));
            }
        }
        let found: Vec<Arc<Vec<bool>>> =
            patterns.iter().map(|p| mentions.found[p].clone()).collect();
        let changed = mentions.changed.clone();
        drop(mentions);
        // the files whose text changed since the names were looked for: looked at again
        let (again, known): (Vec<usize>, Vec<usize>) = candidates
            .into_iter()
            .partition(|&i| changed.contains(&files[i].path));
        let mut out = parsing::scan(needed, spelled, again);
        out.extend(
            known
                .into_iter()
                .map(|i| (i, found.iter().map(|f| f[i]).collect())),
        );
        out
    }
}

impl engine::Files for Memory<'_> {
    fn load(&self, path: PathBuf, _record: bool) -> (Loaded, Option<FileState>) {
        match self.held.by_path.get(&path) {
            Some(&i) => (self.held.files[i].clone(), None),
            None => engine::load(path, self.overlay, self.parse_all, false, true),
        }
    }

    fn packages(&self, paths: &[&Path], root: Option<&Path>) -> locks::Packages {
        if loaded_paths(&self.held.files) == paths {
            return self.held.packages.clone();
        }
        crate::packages::of_files(paths.iter().copied(), root)
    }
}
