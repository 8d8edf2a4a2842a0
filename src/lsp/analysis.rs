//! Analysing one document: the engine over the editor's text, with a panic turned into a
//! finding on the document and a log line (through [`crate::isolate`], like every other caught
//! panic: nothing is printed by the panic hook) so that the server goes on.

use crate::diagnostic::Diagnostic;
use crate::engine::{self, ConfigSource, Options};
use crate::index::Index;
use crate::isolate;
use crate::source::FileRef;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What analysing a document gave.
#[derive(Debug, Default)]
pub struct Outcome {
    pub findings: Vec<Diagnostic>,
    /// Messages for the client's log (configuration errors, skipped files, failures).
    pub log: Vec<String>,
}

/// How documents are analysed: the path a document is analysed under, its text, the root of
/// the project it belongs to (`None`: the document alone) and the editor's texts of the
/// project's other open documents; and the files the editor reports changed on disk. The
/// server takes this as a parameter so that its handling of failures can be exercised; a
/// plain function analyses each document afresh ([`analyse`]), [`Indexed`] holds each project
/// in memory.
pub trait Analyser: Send {
    fn analyse(&mut self, path: &Path, text: &str, root: Option<&Path>, others: &Others)
        -> Outcome;

    /// Files created, changed or deleted on disk (`workspace/didChangeWatchedFiles`).
    fn files_changed(&mut self, _paths: &[PathBuf]) {}
}

impl<F> Analyser for F
where
    F: FnMut(&Path, &str, Option<&Path>, &Others) -> Outcome + Send,
{
    fn analyse(
        &mut self,
        path: &Path,
        text: &str,
        root: Option<&Path>,
        others: &Others,
    ) -> Outcome {
        self(path, text, root, others)
    }
}

/// The editor's texts of the project's other open documents, by path: their unsaved text gives
/// the facts, not what is on disk.
pub type Others = HashMap<PathBuf, String>;

/// The engine's options for a document analysed under `path` in the project at `root`, with
/// `overlay` (the document's text, and others) in place of the files on disk.
fn options(path: &Path, root: Option<&Path>, overlay: Arc<HashMap<PathBuf, String>>) -> Options {
    Options {
        paths: vec![path.to_path_buf()],
        project_root: root.map(Path::to_path_buf),
        cache_dir: std::env::var_os("LOCKLINT_CACHE_DIR")
            .map(PathBuf::from)
            .or_else(|| root.map(|r| r.join(crate::cache::DIR_NAME))),
        config: ConfigSource::Discover,
        overlay: Some(overlay),
        ..Default::default()
    }
}

/// The engine over a document's project, with the document's text in place of its file, and
/// the configuration that governs each file; the findings of the document only. The whole
/// project is read and analysed each time (its other files give the facts).
pub fn analyse(path: &Path, text: &str, root: Option<&Path>, others: &Others) -> Outcome {
    let report = engine::run(&options(path, root, overlay(path, text, others)));
    outcome(path, report)
}

/// The editor's texts: the document's and the other open documents'.
fn overlay(path: &Path, text: &str, others: &Others) -> Arc<HashMap<PathBuf, String>> {
    let mut overlay = others.clone();
    overlay.insert(path.to_path_buf(), text.to_string());
    Arc::new(overlay)
}

/// Documents analysed over their project held in memory ([`crate::index::Index`], one per
/// project root): after the first analysis of a project, an analysis runs the front-ends on
/// the documents whose text changed and the project-wide steps, and reads from the disk only
/// the files reported changed ([`Analyser::files_changed`]) and the files whose editor's
/// text went away. The findings are those of [`analyse`].
#[derive(Default)]
pub struct Indexed {
    projects: HashMap<Option<PathBuf>, Index>,
}

impl Indexed {
    /// How many times the projects' files were read from the disk.
    pub fn reads(&self) -> usize {
        self.projects.values().map(Index::reads).sum()
    }
}

impl Analyser for Indexed {
    fn analyse(
        &mut self,
        path: &Path,
        text: &str,
        root: Option<&Path>,
        others: &Others,
    ) -> Outcome {
        let key = root.map(Path::to_path_buf);
        // taken out while it is used: an analysis that panics leaves no half-updated index
        let mut index = self
            .projects
            .remove(&key)
            .unwrap_or_else(|| Index::new(options(path, root, Arc::default())));
        let report = index.analyse(&[path.to_path_buf()], overlay(path, text, others));
        self.projects.insert(key, index);
        outcome(path, report)
    }

    fn files_changed(&mut self, paths: &[PathBuf]) {
        for index in self.projects.values_mut() {
            index.files_changed(paths.iter().cloned());
        }
    }
}

/// What a report tells about the document analysed under `path`.
fn outcome(path: &Path, report: engine::Report) -> Outcome {
    let mut log: Vec<String> = report.config_error.into_iter().collect();
    log.extend(
        report
            .notes
            .iter()
            .map(|n| format!("{}: {}", n.path, n.message)),
    );
    log.extend(
        report
            .errors
            .iter()
            .map(|e| format!("{}: {}", e.path.display(), e.message)),
    );
    let findings: Vec<Diagnostic> = report
        .findings
        .into_iter()
        .filter(|d| d.primary.file.path == path)
        .collect();
    // a panic the engine caught in one step (a front-end, one embedded text, a rule) is a
    // finding already; the log says so too
    log.extend(
        findings
            .iter()
            .filter(|d| crate::rules::problems::is_caught(d))
            .map(|d| format!("{}: {}", path.display(), d.message)),
    );
    Outcome { findings, log }
}

/// Every safe fix of a document applied as `locklint check --fix` applies them
/// ([`crate::fix::plan`]: pass after pass until nothing changes, an import the fixes leave unused
/// removed with them, a pass that would break parsing backed out): how many fixes, and the
/// document's new text (`None`: nothing to change). Only the document is edited.
pub fn fix_all(
    path: &Path,
    text: &str,
    root: Option<&Path>,
    others: &Others,
) -> (usize, Option<String>) {
    let document = |fixed: HashMap<PathBuf, String>| {
        let mut overlay = others.clone();
        overlay.insert(path.to_path_buf(), text.to_string());
        overlay.extend(fixed);
        engine::run(&options(path, root, Arc::new(overlay)))
    };
    let first = document(HashMap::new());
    let plan = crate::fix::plan(first, crate::fix::Level::Safe, &|overlay| {
        document((*overlay).clone())
    });
    plan.changes
        .into_iter()
        .find(|c| c.path == path && c.new != text)
        .map_or((0, None), |c| (c.fixes, Some(c.new)))
}

/// Runs `analyser`; a panic becomes a `parse-error` finding at the start of the document and a
/// log line.
pub fn guarded(
    analyser: &mut dyn Analyser,
    file: &FileRef,
    root: Option<&Path>,
    others: &Others,
) -> Outcome {
    match isolate::catch(|| analyser.analyse(&file.path, &file.text, root, others)) {
        Ok(outcome) => outcome,
        Err(why) => {
            let finding = crate::rules::problems::file_finding(file, &why);
            Outcome {
                log: vec![format!("{}: {}", file.path.display(), finding.message)],
                findings: vec![finding],
            }
        }
    }
}

/// A document's analysis for one version of its text.
pub struct Analysis {
    pub version: i64,
    /// The text analysed (positions of requests are read against it).
    pub file: FileRef,
    pub findings: Vec<Diagnostic>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceFile;

    use crate::rules::PARSE_ERROR;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Whether the panic hook was silenced when [`explode`] panicked.
    static SILENCED: AtomicBool = AtomicBool::new(false);

    fn explode(_: &Path, _: &str, _: Option<&Path>, _: &Others) -> Outcome {
        SILENCED.store(isolate::catching(), Ordering::SeqCst);
        panic!("a front-end bug")
    }

    #[test]
    fn a_panic_becomes_a_finding_and_a_log_line_and_is_not_printed() {
        let file = SourceFile::new(PathBuf::from("/ws/a.lua"), "x".into());
        let out = guarded(&mut explode, &file, None, &Others::new());
        assert_eq!(out.findings.len(), 1);
        assert_eq!(out.findings[0].rule, PARSE_ERROR.name);
        assert!(crate::rules::problems::is_caught(&out.findings[0]));
        assert!(out.findings[0].message.contains("a front-end bug"));
        assert_eq!(out.findings[0].primary.span.end, 1);
        assert!(out.log[0].contains("a front-end bug"));
        assert!(
            SILENCED.load(Ordering::SeqCst),
            "the panic hook prints nothing for it"
        );
    }
}
