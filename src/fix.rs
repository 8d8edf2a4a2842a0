//! Writing edits to files safely: all edits of a file at once, refused when they overlap or
//! the file changed on disk since it was read, written to a temporary file beside it and
//! renamed over it (keeping its permissions).

use crate::source::Span;
use std::io::Write;
use std::path::Path;

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
