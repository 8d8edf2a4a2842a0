//! The one diagnostic model every output format renders.

use crate::source::{FileRef, LineCol, Span};
use serde::Serialize;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// A span in a particular file.
#[derive(Debug, Clone)]
pub struct Location {
    pub file: FileRef,
    pub span: Span,
}

impl Location {
    pub fn new(file: FileRef, span: Span) -> Self {
        Location { file, span }
    }

    pub fn start(&self) -> LineCol {
        self.file.line_col(self.span.start)
    }

    pub fn end(&self) -> LineCol {
        self.file.line_col(self.span.end)
    }

    pub fn path(&self) -> &str {
        &self.file.display
    }
}

impl PartialEq for Location {
    fn eq(&self, other: &Self) -> bool {
        self.file.path == other.file.path && self.span == other.span
    }
}

/// A secondary span with a label ("acquired here").
#[derive(Debug, Clone)]
pub struct Related {
    pub location: Location,
    pub label: String,
}

/// How confidently a fix can be applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Applicability {
    /// Keeps the program's meaning apart from removing the defect.
    Safe,
    /// Valid code, but a judgement call.
    Unsafe,
    /// Needs something only the user knows; shown, never applied.
    DisplayOnly,
}

/// One text replacement.
#[derive(Debug, Clone)]
pub struct Edit {
    pub location: Location,
    pub replacement: String,
}

/// A suggested change: a set of edits and how safe they are.
#[derive(Debug, Clone)]
pub struct Fix {
    pub message: String,
    pub applicability: Applicability,
    pub edits: Vec<Edit>,
}

/// A finding.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    /// Stable public rule name, e.g. `separate-expire`.
    pub rule: &'static str,
    pub severity: Severity,
    pub primary: Location,
    /// Short label shown under the primary span.
    pub label: String,
    /// What is wrong: lowercase, no trailing period.
    pub message: String,
    /// What to do.
    pub help: String,
    pub related: Vec<Related>,
    pub fix: Option<Fix>,
}

impl Diagnostic {
    /// Sort key: path, position, rule.
    pub fn sort_key(&self) -> (&str, usize, usize, &'static str) {
        (
            self.primary.path(),
            self.primary.span.start,
            self.primary.span.end,
            self.rule,
        )
    }
}

/// Apply non-overlapping `(span, replacement)` edits to `text`.
pub fn apply_edits(text: &str, edits: &[(Span, String)]) -> Result<String, String> {
    let mut sorted: Vec<&(Span, String)> = edits.iter().collect();
    sorted.sort_by_key(|(s, _)| (s.start, s.end));
    for w in sorted.windows(2) {
        if w[0].0.end > w[1].0.start {
            return Err("edits overlap".to_string());
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (span, replacement) in sorted {
        if span.end > text.len()
            || !text.is_char_boundary(span.start)
            || !text.is_char_boundary(span.end)
        {
            return Err("an edit lies outside the file".to_string());
        }
        out.push_str(&text[at..span.start]);
        out.push_str(replacement);
        at = span.end;
    }
    out.push_str(&text[at..]);
    Ok(out)
}
