//! From locklint's findings and fixes to LSP values: positions in UTF-16 code units through the
//! file's line index, diagnostics, workspace edits.

use crate::diagnostic::{Diagnostic, Fix, Severity};
use crate::source::{SourceFile, Span};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;

/// Which URI a path is shown under: the document's own for the path it is analysed under.
pub struct Uris<'a> {
    pub path: &'a Path,
    pub uri: &'a str,
}

impl Uris<'_> {
    pub fn of(&self, path: &Path) -> String {
        if path == self.path {
            return self.uri.to_string();
        }
        let abs = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        url::Url::from_file_path(&abs)
            .map(|u| u.to_string())
            .unwrap_or_else(|_| format!("file://{}", abs.display()))
    }
}

pub fn position(file: &SourceFile, offset: usize) -> Value {
    let (line, character) = file.lines.utf16_position(&file.text, offset);
    json!({ "line": line, "character": character })
}

pub fn range(file: &SourceFile, span: Span) -> Value {
    json!({ "start": position(file, span.start), "end": position(file, span.end) })
}

/// An LSP diagnostic of a finding.
pub fn diagnostic(d: &Diagnostic, uris: &Uris) -> Value {
    let related: Vec<Value> = d
        .related
        .iter()
        .map(|r| {
            json!({
                "location": {
                    "uri": uris.of(&r.location.file.path),
                    "range": range(&r.location.file, r.location.span),
                },
                "message": r.label,
            })
        })
        .collect();
    json!({
        "range": range(&d.primary.file, d.primary.span),
        "severity": match d.severity { Severity::Error => 1, Severity::Warning => 2 },
        "code": d.rule,
        "source": "locklint",
        "message": format!("{}\nhelp: {}", d.message, d.help),
        "relatedInformation": related,
    })
}

/// A workspace edit for fixes: text edits grouped by file.
pub fn workspace_edit(fixes: &[&Fix], uris: &Uris) -> Value {
    let mut changes: HashMap<String, Vec<Value>> = HashMap::new();
    for f in fixes {
        for e in &f.edits {
            changes
                .entry(uris.of(&e.location.file.path))
                .or_default()
                .push(json!({
                    "range": range(&e.location.file, e.location.span),
                    "newText": e.replacement,
                }));
        }
    }
    json!({ "changes": changes })
}
