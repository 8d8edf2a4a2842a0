//! Open documents: their text as the editor holds it, kept in step with full and incremental
//! changes (ranges in UTF-16 code units), and the path each is analysed under.

use crate::source::LineIndex;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// One open document.
#[derive(Debug)]
pub struct Document {
    pub version: i64,
    pub text: String,
    /// The path it is analysed under: the file for a `file:` URI with a supported extension,
    /// else a name under the workspace root with the extension of its language; `None` for a
    /// language locklint does not read.
    pub path: Option<PathBuf>,
}

/// What became of one content change.
#[derive(Debug, PartialEq, Eq)]
pub enum Change {
    Applied,
    /// Applied after moving a position that lay outside the text onto it.
    Clamped(String),
    /// Not applied.
    Rejected(String),
}

/// The extension of the files of an LSP language id.
fn extension_of_language(language_id: &str) -> Option<&'static str> {
    match language_id {
        "rust" => Some("rs"),
        "sql" | "pgsql" | "postgres" | "mysql" | "plsql" => Some("sql"),
        "lua" => Some("lua"),
        _ => None,
    }
}

fn supported(path: &Path) -> bool {
    crate::frontend::is_supported(path)
}

/// The path a document is analysed under.
pub fn analysis_path(uri: &str, language_id: &str, root: &Path) -> Option<PathBuf> {
    let parsed = url::Url::parse(uri).ok();
    let on_disk = parsed
        .as_ref()
        .filter(|u| u.scheme() == "file")
        .and_then(|u| u.to_file_path().ok());
    let by_language = extension_of_language(language_id);
    if let Some(path) = on_disk {
        if supported(&path) {
            return Some(path);
        }
        let ext = by_language?;
        let mut name = path.file_name()?.to_os_string();
        name.push(format!(".{ext}"));
        return Some(path.with_file_name(name));
    }
    // an unsaved buffer (`untitled:Untitled-1`) or another scheme: a name of its own under
    // the workspace root, so that the workspace's configuration applies
    let tail = parsed
        .as_ref()
        .map(|u| u.path().to_string())
        .unwrap_or_else(|| uri.to_string());
    let tail = tail.rsplit('/').next().unwrap_or_default();
    let mut name: String = tail
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.trim_matches('.').is_empty() {
        name = "untitled".to_string();
    }
    let path = root.join(&name);
    if supported(&path) {
        return Some(path);
    }
    Some(root.join(format!("{name}.{}", by_language?)))
}

fn position_of(v: &Value) -> Option<(usize, usize)> {
    let line = v.get("line")?.as_u64()?;
    let character = v.get("character")?.as_u64()?;
    Some((
        usize::try_from(line).ok()?,
        usize::try_from(character).ok()?,
    ))
}

impl Document {
    /// Applies one `TextDocumentContentChangeEvent`: the whole text, or a range replaced.
    pub fn apply(&mut self, change: &Value) -> Change {
        let Some(text) = change.get("text").and_then(Value::as_str) else {
            return Change::Rejected("a content change without text".into());
        };
        let Some(range) = change.get("range") else {
            self.text = text.to_string();
            return Change::Applied;
        };
        let (Some(start), Some(end)) = (
            range.get("start").and_then(position_of),
            range.get("end").and_then(position_of),
        ) else {
            return Change::Rejected(format!("a content change with an invalid range: {range}"));
        };
        if end < start {
            return Change::Rejected(format!(
                "a content change whose range ends before it starts: {range}"
            ));
        }
        let lines = LineIndex::new(&self.text);
        let (from, clamped_start) = lines.utf16_offset(&self.text, start.0, start.1);
        let (to, clamped_end) = lines.utf16_offset(&self.text, end.0, end.1);
        let to = to.max(from);
        self.text.replace_range(from..to, text);
        if clamped_start || clamped_end {
            Change::Clamped(format!(
                "a content change with a range outside the document, applied at the nearest positions: {range}"
            ))
        } else {
            Change::Applied
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(text: &str) -> Document {
        Document {
            version: 1,
            text: text.to_string(),
            path: None,
        }
    }

    fn edit(l0: u64, c0: u64, l1: u64, c1: u64, text: &str) -> Value {
        json!({ "range": { "start": { "line": l0, "character": c0 }, "end": { "line": l1, "character": c1 } }, "text": text })
    }

    #[test]
    fn a_sequence_of_range_edits_gives_the_expected_text() {
        let mut d = doc("fn main() {\n    let x = 1;\n}\n");
        for e in [
            edit(1, 8, 1, 9, "count"),      // x → count
            edit(1, 16, 1, 17, "2"),        // 1 → 2
            edit(2, 0, 2, 0, "    x();\n"), // insert a line
            edit(0, 3, 0, 7, "start"),      // main → start
            edit(1, 4, 2, 4, ""),           // join two lines
        ] {
            assert_eq!(d.apply(&e), Change::Applied);
        }
        assert_eq!(d.text, "fn start() {\n    x();\n}\n");
        // a whole-text change replaces everything
        assert_eq!(d.apply(&json!({ "text": "abc" })), Change::Applied);
        assert_eq!(d.text, "abc");
    }

    #[test]
    fn positions_are_utf16_code_units() {
        // é is one unit, 𝄞 two
        let mut d = doc("é𝄞x\nz");
        assert_eq!(d.apply(&edit(0, 3, 0, 4, "y")), Change::Applied);
        assert_eq!(d.text, "é𝄞y\nz");
        assert_eq!(d.apply(&edit(0, 1, 0, 3, "")), Change::Applied);
        assert_eq!(d.text, "éy\nz");
    }

    #[test]
    fn out_of_range_edits_are_clamped_or_rejected_without_panicking() {
        let mut d = doc("ab\ncd");
        assert!(matches!(
            d.apply(&edit(0, 99, 0, 99, "!")),
            Change::Clamped(_)
        ));
        assert_eq!(d.text, "ab!\ncd");
        assert!(matches!(
            d.apply(&edit(7, 0, 9, 3, "?")),
            Change::Clamped(_)
        ));
        assert_eq!(d.text, "ab!\ncd?");
        // inside a surrogate pair: the start of the character
        let mut s = doc("a𝄞b");
        assert!(matches!(
            s.apply(&edit(0, 2, 0, 2, "-")),
            Change::Clamped(_)
        ));
        assert_eq!(s.text, "a-𝄞b");
        for bad in [
            edit(1, 0, 0, 0, "x"),
            json!({ "range": { "start": { "line": -1, "character": 0 }, "end": { "line": 0, "character": 0 } }, "text": "x" }),
            json!({ "range": { "start": { "line": "0" } }, "text": "x" }),
            json!({ "range": edit(0, 0, 0, 0, "")["range"] }),
        ] {
            assert!(matches!(d.apply(&bad), Change::Rejected(_)), "{bad}");
        }
        assert_eq!(d.text, "ab!\ncd?");
    }

    #[test]
    fn documents_are_analysed_under_a_path_of_their_language() {
        let root = Path::new("/ws");
        let p = |uri, lang| analysis_path(uri, lang, root);
        assert_eq!(
            p("file:///ws/a.rs", "rust"),
            Some(PathBuf::from("/ws/a.rs"))
        );
        assert_eq!(
            p("file:///ws/q.txt", "sql"),
            Some(PathBuf::from("/ws/q.txt.sql"))
        );
        assert_eq!(p("file:///ws/q.txt", "plaintext"), None);
        assert_eq!(
            p("untitled:Untitled-1", "lua"),
            Some(PathBuf::from("/ws/Untitled-1.lua"))
        );
        assert_eq!(
            p("untitled:new.sql", "plaintext"),
            Some(PathBuf::from("/ws/new.sql"))
        );
        assert_eq!(p("untitled:Untitled-2", "markdown"), None);
        assert_eq!(
            p("untitled:", "rust"),
            Some(PathBuf::from("/ws/untitled.rs"))
        );
    }
}
