//! Analysing one document: the engine over the editor's text, with a panic turned into a
//! finding on the document so that the server goes on.

use crate::diagnostic::{Diagnostic, Location};
use crate::engine::{self, ConfigSource, Options};
use crate::rules::PARSE_ERROR;
use crate::source::{FileRef, Span};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What analysing a document gave.
#[derive(Debug, Default)]
pub struct Outcome {
    pub findings: Vec<Diagnostic>,
    /// Messages for the client's log (configuration errors, skipped files, failures).
    pub log: Vec<String>,
}

/// How a document is analysed: the path it is analysed under and its text. The server takes
/// this as a parameter so that its handling of failures can be exercised.
pub type Analyser = fn(&Path, &str) -> Outcome;

/// The engine over one document, with the configuration that governs its path.
pub fn analyse(path: &Path, text: &str) -> Outcome {
    let overlay: HashMap<PathBuf, String> = [(path.to_path_buf(), text.to_string())].into();
    let report = engine::run(&Options {
        paths: vec![path.to_path_buf()],
        config: ConfigSource::Discover,
        overlay: Some(Arc::new(overlay)),
        ..Default::default()
    });
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
    let findings = report
        .findings
        .into_iter()
        .filter(|d| d.primary.file.path == path)
        .collect();
    Outcome { findings, log }
}

/// Runs `analyser`; a panic becomes a `parse-error` finding at the start of the document.
pub fn guarded(analyser: Analyser, file: &FileRef) -> Outcome {
    match catch_unwind(AssertUnwindSafe(|| analyser(&file.path, &file.text))) {
        Ok(outcome) => outcome,
        Err(payload) => {
            let why = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown cause".to_string());
            let message = format!("locklint failed while analysing this file: {why}");
            Outcome {
                findings: vec![Diagnostic {
                    rule: PARSE_ERROR.name,
                    severity: PARSE_ERROR.severity,
                    primary: Location::new(file.clone(), Span::new(0, 0)),
                    label: "not analysed".to_string(),
                    message: message.clone(),
                    help: "the rest of the workspace is still analysed; please report this file's \
                           contents to locklint's maintainers"
                        .to_string(),
                    related: Vec::new(),
                    fix: None,
                }],
                log: vec![format!("{}: {message}", file.path.display())],
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

    fn explode(_: &Path, _: &str) -> Outcome {
        panic!("a front-end bug")
    }

    #[test]
    fn a_panic_becomes_a_finding_and_a_log_line() {
        let file = SourceFile::new(PathBuf::from("/ws/a.lua"), "x".into());
        let out = guarded(explode, &file);
        assert_eq!(out.findings.len(), 1);
        assert_eq!(out.findings[0].rule, PARSE_ERROR.name);
        assert!(out.findings[0].message.contains("a front-end bug"));
        assert!(out.log[0].contains("a front-end bug"));
    }
}
