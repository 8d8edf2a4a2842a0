//! Source files, byte spans and the line index that turns offsets into 1-based line/column.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// A half-open byte range `[start, end)` into a file's text.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        Span {
            start,
            end: end.max(start),
        }
    }

    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// The smallest span covering both.
    pub fn join(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// A 1-based line and a 1-based column counted in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LineCol {
    pub line: usize,
    pub column: usize,
}

/// Bytes between two column checkpoints of a long non-ASCII line.
const CHECKPOINT_BYTES: usize = 256;

/// Maps byte offsets to lines and character columns, and back, in time independent of the
/// line's length.
#[derive(Debug, Clone)]
pub struct LineIndex {
    line_starts: Vec<usize>,
    /// Per line: whether it is pure ASCII (then columns are byte offsets).
    ascii: Vec<bool>,
    /// Long lines that are not pure ASCII, by line: (byte offset in the line, characters
    /// before it, UTF-16 code units before it) every [`CHECKPOINT_BYTES`] or so, at
    /// character boundaries.
    checkpoints: std::collections::HashMap<usize, Vec<(usize, usize, usize)>>,
}

/// How many lines `text` has: one more than its line breaks (what [`LineIndex::line_count`]
/// gives, without building the index).
pub fn line_count(text: &str) -> usize {
    memchr::memchr_iter(b'\n', text.as_bytes()).count() + 1
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let bytes = text.as_bytes();
        let mut line_starts = vec![0];
        line_starts.extend(memchr::memchr_iter(b'\n', bytes).map(|i| i + 1));
        let mut checkpoints = std::collections::HashMap::new();
        // most texts are ASCII throughout: one pass tells every line
        let ascii = if bytes.is_ascii() {
            vec![true; line_starts.len()]
        } else {
            line_starts
                .iter()
                .enumerate()
                .map(|(i, &s)| {
                    let e = line_starts.get(i + 1).copied().unwrap_or(text.len());
                    let ascii = bytes[s..e].is_ascii();
                    if !ascii && e - s > CHECKPOINT_BYTES {
                        checkpoints.insert(i, line_checkpoints(&text[s..e]));
                    }
                    ascii
                })
                .collect()
        };
        LineIndex {
            line_starts,
            ascii,
            checkpoints,
        }
    }

    fn line_end(&self, text: &str, line0: usize) -> usize {
        match self.line_starts.get(line0 + 1) {
            Some(&next) => next - 1,
            None => text.len(),
        }
    }

    /// The last checkpoint of a line for which `before` holds (the line's start if none).
    fn checkpoint(
        &self,
        line0: usize,
        before: impl Fn((usize, usize, usize)) -> bool,
    ) -> (usize, usize, usize) {
        self.checkpoints.get(&line0).map_or((0, 0, 0), |c| {
            c[c.partition_point(|&x| before(x)).saturating_sub(1)]
        })
    }

    /// How many lines the text has ([`line_count`]).
    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// The byte span of the line that holds `offset` (clamped to the text), without its line
    /// break.
    pub fn line_span(&self, text: &str, offset: usize) -> Span {
        let offset = offset.min(text.len());
        let line0 = self.line_starts.partition_point(|&s| s <= offset) - 1;
        Span::new(self.line_starts[line0], self.line_end(text, line0))
    }

    /// Line/column of a byte offset (clamped to the text, snapped to a char boundary).
    pub fn line_col(&self, text: &str, offset: usize) -> LineCol {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let start = self.line_starts[line];
        let column = if self.ascii[line] {
            offset - start
        } else {
            let (byte, chars, _) = self.checkpoint(line, |(b, _, _)| b <= offset - start);
            chars + text[start + byte..offset].chars().count()
        } + 1;
        LineCol {
            line: line + 1,
            column,
        }
    }

    /// Byte offset of a 1-based line and 0-based character column (as proc-macro2 reports them).
    pub fn offset(&self, text: &str, line: usize, char_col0: usize) -> usize {
        let line0 = line.saturating_sub(1);
        let Some(&start) = self.line_starts.get(line0) else {
            return text.len();
        };
        let end = self.line_end(text, line0);
        if self.ascii[line0] {
            return (start + char_col0).min(end);
        }
        let (byte, chars, _) = self.checkpoint(line0, |(_, n, _)| n <= char_col0);
        let line_text = &text[start + byte..end];
        match line_text.char_indices().nth(char_col0 - chars) {
            Some((i, _)) => start + byte + i,
            None => end,
        }
    }
}

/// Column checkpoints of one line: the first at its start.
fn line_checkpoints(line: &str) -> Vec<(usize, usize, usize)> {
    let mut out = vec![(0, 0, 0)];
    let mut next = CHECKPOINT_BYTES;
    let mut units = 0;
    for (chars, (i, c)) in line.char_indices().enumerate() {
        if i >= next {
            out.push((i, chars, units));
            next = i + CHECKPOINT_BYTES;
        }
        units += c.len_utf16();
    }
    out
}

impl LineIndex {
    /// 0-based line and UTF-16 code unit column of a byte offset (clamped to the text, snapped
    /// to a char boundary), as the Language Server Protocol counts positions.
    pub fn utf16_position(&self, text: &str, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let start = self.line_starts[line];
        let column = if self.ascii[line] {
            offset - start
        } else {
            let (byte, _, units) = self.checkpoint(line, |(b, _, _)| b <= offset - start);
            units + text[start + byte..offset].encode_utf16().count()
        };
        (line, column)
    }

    /// Byte offset of a 0-based line and UTF-16 code unit column. A line past the end gives the
    /// end of the text, a column past the end of its line the end of the line, and a column
    /// inside a surrogate pair the start of that character; the flag says whether it clamped.
    pub fn utf16_offset(&self, text: &str, line0: usize, units: usize) -> (usize, bool) {
        let Some(&start) = self.line_starts.get(line0) else {
            return (text.len(), true);
        };
        let end = self.line_end(text, line0);
        if self.ascii[line0] {
            return ((start + units).min(end), start + units > end);
        }
        let (byte, _, mut counted) = self.checkpoint(line0, |(_, _, u)| u <= units);
        for (i, c) in text[start + byte..end].char_indices() {
            let next = counted + c.len_utf16();
            if next > units {
                return (start + byte + i, counted != units);
            }
            counted = next;
        }
        (end, counted != units)
    }
}

/// One analysed file: its path as shown to the user, its text and its line index.
#[derive(Debug)]
pub struct SourceFile {
    /// Path on disk.
    pub path: PathBuf,
    /// Path as printed in reports (relative to the current directory when under it).
    pub display: String,
    pub text: String,
    pub lines: LineIndex,
    /// What the text declares and names, indexed the first time a fix asks (Rust files).
    pub rust_names: std::sync::OnceLock<crate::names::RustNames>,
    /// The redis-rs command trait import a fix may leave unused: the span that removes it, and
    /// where the file's code may still need it (method calls no redis-rs trait lacks for sure,
    /// the trait's name); read once by the fixes that need to know.
    pub trait_import: std::sync::OnceLock<Option<(Span, Vec<usize>)>>,
}

pub type FileRef = Arc<SourceFile>;

impl SourceFile {
    pub fn new(path: PathBuf, text: String) -> FileRef {
        let display = display_path(&path);
        let lines = LineIndex::new(&text);
        Arc::new(SourceFile {
            path,
            display,
            text,
            lines,
            rust_names: Default::default(),
            trait_import: std::sync::OnceLock::new(),
        })
    }

    /// The line that holds `offset`, without its line break, found in the line index (in
    /// time independent of the line's length).
    pub fn line_span(&self, offset: usize) -> Span {
        self.lines.line_span(&self.text, offset)
    }

    pub fn line_col(&self, offset: usize) -> LineCol {
        self.lines.line_col(&self.text, offset)
    }

    pub fn snippet(&self, span: Span) -> &str {
        let end = span.end.min(self.text.len());
        let start = span.start.min(end);
        self.text.get(start..end).unwrap_or("")
    }
}

/// The path relative to the current directory when it lies under it (`..` resolved, so that
/// `../../crates/a/src/x.rs` seen from `crates/a` is `src/x.rs`), else as given, with `/`
/// separators.
pub fn display_path(path: &Path) -> String {
    let plain = path
        .components()
        .all(|c| !matches!(c, Component::CurDir | Component::ParentDir));
    // a relative path without `.` or `..` lies under the current directory as it is
    if plain && path.is_relative() {
        return slashed(path);
    }
    let cwd = std::env::current_dir().ok();
    let abs = if path.is_absolute() {
        if plain {
            std::borrow::Cow::Borrowed(path)
        } else {
            std::borrow::Cow::Owned(lexical(path))
        }
    } else if let Some(cwd) = &cwd {
        std::borrow::Cow::Owned(lexical(&cwd.join(path)))
    } else {
        std::borrow::Cow::Borrowed(path)
    };
    let shown = match &cwd {
        Some(cwd) => abs.strip_prefix(cwd).unwrap_or(path),
        None => path,
    };
    slashed(&normalize(shown))
}

/// A path as shown: with `/` separators.
fn slashed(path: &Path) -> String {
    let s = path.to_string_lossy();
    if s.contains('\\') {
        s.replace('\\', "/")
    } else {
        s.into_owned()
    }
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `.` and `..` components resolved without reading the file system.
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_positions_agree_with_counting_on_long_mixed_lines() {
        let line: String = (0..3000).map(|i| ["a", "é", "𝄞", "✓"][i % 4]).collect();
        let text = format!("x\n{line}\ny");
        let index = LineIndex::new(&text);
        let start = 2;
        for (i, _) in text[start..start + line.len()].char_indices().step_by(37) {
            let units = text[start..start + i].encode_utf16().count();
            assert_eq!(index.utf16_position(&text, start + i), (1, units));
            assert_eq!(index.utf16_offset(&text, 1, units), (start + i, false));
        }
        let all = line.encode_utf16().count();
        assert_eq!(
            index.utf16_offset(&text, 1, all + 5),
            (start + line.len(), true)
        );
        assert_eq!(index.utf16_offset(&text, 9, 0), (text.len(), true));
    }

    #[test]
    fn lines_are_counted_as_the_index_counts_them() {
        for text in ["", "a", "a\n", "\n\n", "a\r\nb\nc", "é\n𝄞"] {
            assert_eq!(
                line_count(text),
                LineIndex::new(text).line_count(),
                "{text:?}"
            );
        }
        assert_eq!(line_count("a\nb\n"), 3);
    }

    #[test]
    fn line_col_counts_characters() {
        let text = "ab\nçé x\n";
        let idx = LineIndex::new(text);
        assert_eq!(idx.line_col(text, 0), LineCol { line: 1, column: 1 });
        let x = text.find('x').unwrap();
        assert_eq!(idx.line_col(text, x), LineCol { line: 2, column: 4 });
        assert_eq!(idx.offset(text, 2, 3), x);
    }

    #[test]
    fn long_wide_lines_count_characters() {
        let line = format!("é{}x{}", "a".repeat(1000), "ç".repeat(700));
        let text = format!("first\n{line}\nlast");
        let idx = LineIndex::new(&text);
        for (col0, (byte, _)) in line.char_indices().enumerate().step_by(37) {
            let offset = 6 + byte;
            assert_eq!(
                idx.line_col(&text, offset),
                LineCol {
                    line: 2,
                    column: col0 + 1
                }
            );
            assert_eq!(idx.offset(&text, 2, col0), offset);
        }
        let count = line.chars().count();
        assert_eq!(idx.offset(&text, 2, count + 5), 6 + line.len());
        assert_eq!(idx.line_col(&text, 6 + line.len()).column, count + 1);
    }

    #[test]
    fn offsets_past_the_end_are_clamped() {
        let text = "a\n";
        let idx = LineIndex::new(text);
        assert_eq!(idx.line_col(text, 99), LineCol { line: 2, column: 1 });
        assert_eq!(idx.offset(text, 9, 0), text.len());
    }
}
