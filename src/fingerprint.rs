//! Content-based fingerprints of findings: the rule and the normalised text of the flagged
//! code and its neighbouring lines — not line numbers, not the path — so that a finding keeps
//! its fingerprint when unrelated lines are added above it or the file is renamed.

use crate::diagnostic::Diagnostic;
use sha2::{Digest, Sha256};

fn normalised(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The text a fingerprint is made of: flagged code plus the nearest non-blank line before and after.
fn context(d: &Diagnostic) -> String {
    let text = &d.primary.file.text;
    let span = d.primary.span;
    let flagged = normalised(d.primary.file.snippet(span));
    let line_start = text[..span.start.min(text.len())]
        .rfind('\n')
        .map(|i| i + 1)
        .unwrap_or(0);
    let line_end = text[span.end.min(text.len())..]
        .find('\n')
        .map(|i| span.end + i)
        .unwrap_or(text.len());
    let before = text[..line_start]
        .lines()
        .rev()
        .map(normalised)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let after = text[line_end.min(text.len())..]
        .lines()
        .map(normalised)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let line = normalised(&text[line_start..line_end.max(line_start)]);
    format!("{before}\n{line}\n{flagged}\n{after}")
}

/// A stable hex key for a finding: same rule and code give the same key.
pub fn fingerprint(d: &Diagnostic) -> String {
    let mut h = Sha256::new();
    h.update(d.rule.as_bytes());
    h.update([0]);
    h.update(context(d).as_bytes());
    let digest = h.finalize();
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}
