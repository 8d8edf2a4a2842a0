//! Content-based fingerprints of findings: the rule and the normalised text of the flagged
//! code and its neighbouring lines — not line numbers, not the path — so that a finding keeps
//! its fingerprint when unrelated lines are added above it or the file is renamed.

use crate::diagnostic::Diagnostic;
use sha2::{Digest, Sha256};

fn normalised(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Lines longer than this take part in a fingerprint by a window of [`WINDOW`] bytes: the
/// flagged line around the flagged code, a neighbour by its side nearest to it. Work per
/// finding stays bounded on files written on one long line.
const LONG_LINE: usize = 512;
const WINDOW: usize = 256;

/// `text[start..end]`, moved inside to character boundaries.
fn inside(text: &str, mut start: usize, mut end: usize) -> &str {
    while !text.is_char_boundary(start) {
        start += 1;
    }
    while end > start && !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[start..end.max(start)]
}

/// A neighbouring line, or the [`WINDOW`] bytes of a long one nearest to the flagged line
/// (its end when it comes before).
fn clip(line: &str, before: bool) -> &str {
    match (line.len() > LONG_LINE, before) {
        (false, _) => line,
        (true, true) => inside(line, line.len() - WINDOW, line.len()),
        (true, false) => inside(line, 0, WINDOW),
    }
}

/// The text a fingerprint is made of: flagged code plus the nearest non-blank line before and after.
fn context(d: &Diagnostic) -> String {
    let file = &d.primary.file;
    let text = &file.text;
    let span = d.primary.span;
    let flagged = normalised(file.snippet(span));
    let line_start = file.line_span(span.start).start;
    let line_end = file.line_span(span.end).end.max(line_start);
    let before = text[..line_start]
        .lines()
        .rev()
        .map(|l| normalised(clip(l, true)))
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let after = text[line_end.min(text.len())..]
        .lines()
        .map(|l| normalised(clip(l, false)))
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let line = if line_end - line_start > LONG_LINE {
        let from = span.start.saturating_sub(WINDOW).max(line_start);
        let to = (span.end.min(text.len()) + WINDOW).min(line_end);
        normalised(inside(text, from, to))
    } else {
        normalised(&text[line_start..line_end])
    };
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
