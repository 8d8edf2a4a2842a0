//! Writing edits to files safely: all edits of a file at once, refused when they overlap or
//! the file changed on disk since it was read, written to a temporary file beside it and
//! renamed over it (keeping its permissions).

use crate::diagnostic::{Applicability, Fix};
use crate::engine::Report;
use crate::source::{FileRef, SourceFile, Span};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Apply non-overlapping `(span, replacement)` edits to `text`.
pub fn apply_to_text(text: &str, edits: &[(Span, String)]) -> Result<String, String> {
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

/// Replace the file's content with `new`, provided it still holds `expected`.
pub fn write_atomically(path: &Path, expected: &str, new: &str) -> Result<(), String> {
    let current = std::fs::read(path).map_err(|e| crate::discover::describe_io(&e))?;
    if current != expected.as_bytes() {
        return Err("the file changed on disk during the run; it was left alone".to_string());
    }
    let meta = std::fs::metadata(path).map_err(|e| crate::discover::describe_io(&e))?;
    if meta.permissions().readonly() {
        return Err("the file is read-only; it was left alone".to_string());
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp =
        tempfile::NamedTempFile::new_in(dir).map_err(|e| crate::discover::describe_io(&e))?;
    tmp.write_all(new.as_bytes())
        .and_then(|_| tmp.as_file().sync_all())
        .map_err(|e| crate::discover::describe_io(&e))?;
    std::fs::set_permissions(tmp.path(), meta.permissions())
        .map_err(|e| crate::discover::describe_io(&e))?;
    tmp.persist(path)
        .map_err(|e| crate::discover::describe_io(&e.error))?;
    Ok(())
}

/// How many rounds of fixes are applied before giving up on convergence.
pub const MAX_PASSES: usize = 10;

/// Which fixes to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Safe fixes only (`--fix`).
    Safe,
    /// Safe and unsafe fixes (`--fix --unsafe-fixes`).
    Unsafe,
}

impl Level {
    pub fn allows(self, a: Applicability) -> bool {
        match a {
            Applicability::Safe => true,
            Applicability::Unsafe => self == Level::Unsafe,
            Applicability::DisplayOnly => false,
        }
    }
}

/// The new text of one file.
#[derive(Debug, Clone)]
pub struct FileChange {
    pub path: PathBuf,
    pub display: String,
    /// The text as read before any fix.
    pub original: String,
    pub new: String,
    /// How many fixes changed it.
    pub fixes: usize,
}

/// What applying fixes in memory produced.
#[derive(Debug, Default)]
pub struct Plan {
    pub changes: Vec<FileChange>,
    /// Files whose fixes were backed out, with why.
    pub backed_out: Vec<(String, String)>,
    /// Fixes still applied in the last pass: they did not converge.
    pub unconverged: bool,
}

/// The file of a fix, when all of its edits are in one file.
fn fix_file(f: &Fix) -> Option<&FileRef> {
    let first = &f.edits.first()?.location.file;
    f.edits
        .iter()
        .all(|e| e.location.file.path == first.path)
        .then_some(first)
}

fn parse_problems(path: &Path, text: &str) -> usize {
    let ir = crate::frontend::analyze(0, SourceFile::new(path.to_path_buf(), text.to_string()));
    ir.problems.len()
}

/// Apply the fixes of `report` (and of every report after them) in memory: per pass, the
/// non-overlapping fixes of each file, then analyse again, until nothing changes. A file whose
/// new text no longer parses is backed out and left alone. `analyse` runs the analysis over
/// the given texts (in place of the files on disk).
pub fn plan(
    first: Report,
    level: Level,
    analyse: &dyn Fn(Arc<HashMap<PathBuf, String>>) -> Report,
) -> Plan {
    let mut overlay: HashMap<PathBuf, String> = HashMap::new();
    let mut changes: BTreeMap<PathBuf, FileChange> = BTreeMap::new();
    let mut refused: HashSet<PathBuf> = HashSet::new();
    let mut out = Plan::default();
    let mut report = first;
    for pass in 0..=MAX_PASSES {
        let mut per_file: BTreeMap<PathBuf, (FileRef, Vec<&Fix>)> = BTreeMap::new();
        for d in &report.findings {
            let Some(f) = &d.fix else { continue };
            if !level.allows(f.applicability) {
                continue;
            }
            let Some(file) = fix_file(f) else { continue };
            if refused.contains(&file.path) {
                continue;
            }
            per_file
                .entry(file.path.clone())
                .or_insert_with(|| (file.clone(), Vec::new()))
                .1
                .push(f);
        }
        if per_file.is_empty() {
            break;
        }
        if pass == MAX_PASSES {
            out.unconverged = true;
            break;
        }
        let mut changed = false;
        for (path, (file, fixes)) in per_file {
            let mut chosen: Vec<(Span, String)> = Vec::new();
            let mut n = 0;
            for f in fixes {
                let spans: Vec<Span> = f.edits.iter().map(|e| e.location.span).collect();
                let clash = spans.iter().any(|s| {
                    chosen
                        .iter()
                        .any(|(c, _)| s.start <= c.end && c.start <= s.end)
                });
                if clash {
                    continue;
                }
                chosen.extend(
                    f.edits
                        .iter()
                        .map(|e| (e.location.span, e.replacement.clone())),
                );
                n += 1;
            }
            let Ok(new) = apply_to_text(&file.text, &chosen) else {
                continue;
            };
            if new == file.text {
                continue;
            }
            if parse_problems(&path, &new) > parse_problems(&path, &file.text) {
                refused.insert(path.clone());
                out.backed_out.push((
                    file.display.clone(),
                    "the fixed code would not parse; its fixes were backed out".to_string(),
                ));
                continue;
            }
            let entry = changes.entry(path.clone()).or_insert_with(|| FileChange {
                path: path.clone(),
                display: file.display.clone(),
                original: file.text.clone(),
                new: String::new(),
                fixes: 0,
            });
            entry.new = new.clone();
            entry.fixes += n;
            overlay.insert(path, new);
            changed = true;
        }
        if !changed {
            break;
        }
        report = analyse(Arc::new(overlay.clone()));
    }
    // a backed-out file keeps its original text
    out.changes = changes
        .into_values()
        .filter(|c| !refused.contains(&c.path) && c.new != c.original)
        .collect();
    out
}

/// A unified diff of every change.
pub fn unified_diff(changes: &[FileChange]) -> String {
    let mut out = String::new();
    for c in changes {
        let diff = similar::TextDiff::from_lines(&c.original, &c.new);
        out.push_str(
            &diff
                .unified_diff()
                .context_radius(3)
                .header(&format!("a/{}", c.display), &format!("b/{}", c.display))
                .to_string(),
        );
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_apply_in_order_and_overlaps_are_refused() {
        let t = "abcdef";
        let out = apply_to_text(
            t,
            &[(Span::new(4, 5), "E".into()), (Span::new(0, 1), "A".into())],
        )
        .unwrap();
        assert_eq!(out, "AbcdEf");
        assert!(apply_to_text(
            t,
            &[(Span::new(0, 3), "".into()), (Span::new(2, 4), "".into())]
        )
        .is_err());
        assert!(apply_to_text(t, &[(Span::new(5, 9), "".into())]).is_err());
    }

    #[test]
    fn a_file_changed_on_disk_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.rs");
        std::fs::write(&p, "new content").unwrap();
        assert!(write_atomically(&p, "old content", "x").is_err());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new content");
        write_atomically(&p, "new content", "fixed").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "fixed");
    }
}
