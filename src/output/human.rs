//! Human output: miette graphical reports with the source snippet, labels and help.

use crate::diagnostic::{Applicability, Diagnostic, Severity};
use crate::engine::Report;
use crate::source::FileRef;
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceCode};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// Rendering choices.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
    pub width: usize,
}

/// A file's text as a miette source. miette reads a span by scanning the text from its start
/// (counting lines as it goes); this reads it from a few lines above the span instead, through
/// the file's line index, so rendering every finding of a file stays linear in its size.
/// miette's own reading runs on that window and its positions are shifted back: the output is
/// the same as miette reading the whole text.
#[derive(Clone)]
struct FileSource {
    file: FileRef,
    /// Offsets of the carriage returns not followed by a line feed: miette counts them as line
    /// breaks, the line index does not.
    lone_cr: Arc<Vec<usize>>,
}

impl FileSource {
    fn new(file: FileRef) -> FileSource {
        let lone_cr = lone_carriage_returns(&file.text);
        FileSource {
            file,
            lone_cr: Arc::new(lone_cr),
        }
    }
}

fn lone_carriage_returns(text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    text.match_indices('\r')
        .map(|(i, _)| i)
        .filter(|&i| bytes.get(i + 1) != Some(&b'\n'))
        .collect()
}

impl SourceCode for FileSource {
    fn read_span<'a>(
        &'a self,
        span: &miette::SourceSpan,
        before: usize,
        after: usize,
    ) -> Result<Box<dyn miette::SpanContents<'a> + 'a>, miette::MietteError> {
        let text = self.file.text.as_str();
        // the start of the line `before + 1` lines above the span's (miette counts at least as
        // many lines in between: it also breaks lines at a lone carriage return); one more
        // than the context because miette ends an empty span's read at the byte before it
        let line = self.file.line_col(span.offset()).line;
        let first = line.saturating_sub(before + 1).max(1);
        let base = self.file.lines.offset(text, first, 0).min(span.offset());
        if base == 0 {
            return text.read_span(span, before, after);
        }
        let lines_before = first - 1 + self.lone_cr.partition_point(|&i| i < base);
        let local = miette::SourceSpan::new((span.offset() - base).into(), span.len());
        let read = text[base..].read_span(&local, before, after)?;
        Ok(Box::new(miette::MietteSpanContents::new(
            read.data(),
            miette::SourceSpan::new((read.span().offset() + base).into(), read.span().len()),
            read.line() + lines_before,
            read.column(),
            read.line_count() + lines_before,
        )))
    }
}

/// The miette source of each file, made once per file.
#[derive(Default)]
struct Sources(HashMap<PathBuf, FileSource>);

impl Sources {
    fn of(&mut self, file: &FileRef) -> FileSource {
        self.0
            .entry(file.path.clone())
            .or_insert_with(|| FileSource::new(file.clone()))
            .clone()
    }
}

struct Rendered {
    message: String,
    code: String,
    severity: miette::Severity,
    help: Option<String>,
    source: NamedSource<FileSource>,
    labels: Vec<LabeledSpan>,
    related: Vec<Rendered>,
}

impl fmt::Debug for Rendered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Display for Rendered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Rendered {}

impl miette::Diagnostic for Rendered {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        (!self.code.is_empty()).then(|| Box::new(&self.code) as Box<dyn fmt::Display>)
    }
    fn severity(&self) -> Option<miette::Severity> {
        Some(self.severity)
    }
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }
    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(&self.source)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(self.labels.iter().cloned()))
    }
    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn miette::Diagnostic> + 'a>> {
        if self.related.is_empty() {
            return None;
        }
        Some(Box::new(
            self.related.iter().map(|r| r as &dyn miette::Diagnostic),
        ))
    }
}

fn span(start: usize, end: usize) -> miette::SourceSpan {
    miette::SourceSpan::new(start.into(), end.saturating_sub(start))
}

/// Related locations drawn with a finding; the others are counted (all are in the JSON output).
/// A helper's defect reached from thousands of call sites is one finding with a related
/// location per call site, which no reader follows and the renderer lays out in time that
/// grows faster than their number.
pub(crate) const MAX_RELATED_SHOWN: usize = 16;

fn rendered(d: &Diagnostic, sources: &mut Sources) -> Rendered {
    let file = d.primary.file.clone();
    let mut labels = vec![LabeledSpan::new_primary_with_span(
        Some(d.label.clone()),
        span(d.primary.span.start, d.primary.span.end),
    )];
    let mut related = Vec::new();
    for r in d.related.iter().take(MAX_RELATED_SHOWN) {
        if r.location.file.path == file.path {
            labels.push(LabeledSpan::new_with_span(
                Some(r.label.clone()),
                span(r.location.span.start, r.location.span.end),
            ));
        } else {
            related.push(Rendered {
                message: format!("{} ({})", r.label, r.location.path()),
                code: String::new(),
                severity: miette::Severity::Advice,
                help: None,
                source: NamedSource::new(r.location.path(), sources.of(&r.location.file)),
                labels: vec![LabeledSpan::new_primary_with_span(
                    Some(r.label.clone()),
                    span(r.location.span.start, r.location.span.end),
                )],
                related: Vec::new(),
            });
        }
    }
    Rendered {
        message: d.message.clone(),
        code: d.rule.to_string(),
        severity: match d.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        },
        help: Some(format!(
            "{}{}{}\nsee `locklint explain {}` for details",
            d.help,
            fix_line(d),
            more_related(d),
            d.rule
        )),
        source: NamedSource::new(d.primary.path(), sources.of(&file)).with_language("Rust"),
        labels,
        related,
    }
}

/// `and N more related locations` when a finding has more than are drawn.
fn more_related(d: &Diagnostic) -> String {
    match d.related.len().checked_sub(MAX_RELATED_SHOWN) {
        Some(n) if n > 0 => format!(
            "\n{} not shown (every one is in `--format json`)",
            plural(n, "more related location")
        ),
        _ => String::new(),
    }
}

/// Longer source lines than this are not drawn as snippets (the renderer cannot lay them out:
/// past 65,535 columns it panics).
pub(crate) const MAX_SNIPPET_LINE: usize = 4000;

fn line_len_at(file: &crate::source::SourceFile, offset: usize) -> usize {
    file.line_span(offset).len()
}

/// The length of the line of `text` that holds `offset` (for texts without a line index).
pub(crate) fn line_len(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    let start = text[..offset].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let end = text[offset..]
        .find('\n')
        .map(|i| offset + i)
        .unwrap_or(text.len());
    end - start
}

/// A plain rendering without a snippet.
fn plain(d: &Diagnostic) -> String {
    let s = d.primary.start();
    let mut out = format!(
        "{}[{}]: {}\n  --> {}:{}:{}\n",
        d.severity,
        d.rule,
        d.message,
        d.primary.path(),
        s.line,
        s.column
    );
    for r in d.related.iter().take(MAX_RELATED_SHOWN) {
        let rs = r.location.start();
        out.push_str(&format!(
            "  --> {}:{}:{}: {}\n",
            r.location.path(),
            rs.line,
            rs.column,
            r.label
        ));
    }
    out.push_str(&format!(
        "  help: {}{}{}\n  see `locklint explain {}` for details\n",
        d.help,
        fix_line(d).replace('\n', "\n  "),
        more_related(d).replace('\n', "\n  "),
        d.rule
    ));
    out
}

/// Render one finding.
pub fn render_one(d: &Diagnostic, style: Style) -> String {
    render_with(d, &handler(style), &mut Sources::default())
}

/// miette's report handler for a style (made once per output, not per finding).
fn handler(style: Style) -> GraphicalReportHandler {
    let theme = if style.color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    GraphicalReportHandler::new_themed(theme)
        .with_width(style.width)
        .with_links(false)
        .with_word_separator(super::words::separator())
}

/// Render one finding, with the sources of the files already seen.
fn render_with(d: &Diagnostic, handler: &GraphicalReportHandler, sources: &mut Sources) -> String {
    let too_long = std::iter::once(&d.primary)
        .chain(d.related.iter().map(|r| &r.location))
        .any(|l| {
            line_len_at(&l.file, l.span.start) > MAX_SNIPPET_LINE
                || line_len_at(&l.file, l.span.end) > MAX_SNIPPET_LINE
        });
    if too_long {
        return plain(d);
    }
    let mut out = String::new();
    if handler
        .render_report(&mut out, &rendered(d, sources))
        .is_err()
    {
        out = plain(d);
    }
    out
}

/// `1 finding`, `2 findings`, `1 fix`, `2 fixes`.
pub fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|e| word.ends_with(e))
    {
        format!("{n} {word}es")
    } else {
        format!("{n} {word}s")
    }
}

/// The line about a finding's fix, starting with a newline; empty without a fix.
fn fix_line(d: &Diagnostic) -> String {
    let Some(f) = &d.fix else {
        return String::new();
    };
    match f.applicability {
        Applicability::Safe => format!("\nfix: {} (applied by `--fix`)", f.message),
        Applicability::Unsafe => format!(
            "\nfix: {} (unsafe; applied by `--fix --unsafe-fixes`)",
            f.message
        ),
        Applicability::DisplayOnly => {
            format!("\nsuggested fix: {} (not applied automatically)", f.message)
        }
    }
}

/// `N findings in M files` when every analysed file has findings (or none has), else
/// `N findings in K of M files`: how many files had findings out of how many were analysed.
/// `remaining` goes after the count (`2 findings remaining in 1 file`).
fn findings_in_files(report: &Report, remaining: bool) -> String {
    let with: HashSet<&std::path::Path> = report
        .findings
        .iter()
        .map(|d| d.primary.file.path.as_path())
        .collect();
    let files = if with.is_empty() || with.len() == report.files {
        plural(report.files, "file")
    } else {
        format!("{} of {}", with.len(), plural(report.files, "file"))
    };
    let count = plural(report.findings.len(), "finding");
    if remaining {
        format!("{count} remaining in {files}")
    } else {
        format!("{count} in {files}")
    }
}

/// The summary line: `N findings in K of M files` (after `--fix`: how many were fixed and
/// how many remain), how many findings the baseline hides, and how many fixes are available.
pub fn summary(report: &Report) -> String {
    let mut out = match report.fixed {
        Some(fixed) => format!(
            "fixed {}; {}",
            plural(fixed, "finding"),
            findings_in_files(report, true)
        ),
        None => findings_in_files(report, false),
    };
    if report.baselined > 0 {
        out.push_str(&format!(
            " ({} in the baseline not shown)",
            plural(report.baselined, "finding")
        ));
    }
    let count = |a: Applicability| {
        report
            .findings
            .iter()
            .filter(|d| d.fix.as_ref().is_some_and(|f| f.applicability == a))
            .count()
    };
    let safe = count(Applicability::Safe);
    let risky = count(Applicability::Unsafe);
    if safe > 0 && report.fixed.is_none() {
        out.push_str(&format!("\n{} available with --fix", plural(safe, "fix")));
    }
    if risky > 0 && !report.unsafe_fixes {
        out.push_str(&format!(
            "\n{} available with --unsafe-fixes",
            plural(risky, "fix")
        ));
    }
    out
}

/// Render every finding followed by the summary line (unless `quiet`).
pub fn render(report: &Report, style: Style, quiet: bool) -> String {
    super::to_string(|out| write(report, style, quiet, out))
}

/// Write every finding, then (unless `quiet`) the summary, one finding at a time.
/// From how many findings the human output is rendered in two halves at once.
const RENDER_APART_FROM: usize = 2_000;

/// Render `findings` one after the other, each followed by an empty line.
fn render_all(
    findings: &[Diagnostic],
    style: Style,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let mut sources = Sources::default();
    let handler = handler(style);
    for d in findings {
        out.write_all(render_with(d, &handler, &mut sources).as_bytes())?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

pub fn write(
    report: &Report,
    style: Style,
    quiet: bool,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let findings = &report.findings;
    // many findings: the second half is rendered on another thread meanwhile
    let half = if findings.len() >= RENDER_APART_FROM {
        findings.len() / 2
    } else {
        findings.len()
    };
    let (first, second) = findings.split_at(half);
    std::thread::scope(|s| {
        let second = (!second.is_empty()).then(|| {
            s.spawn(move || {
                let mut text = Vec::new();
                render_all(second, style, &mut text).map(|()| text)
            })
        });
        render_all(first, style, out)?;
        if let Some(rendered) = second {
            let text = rendered
                .join()
                .map_err(|_| std::io::Error::other("rendering the findings failed"))??;
            out.write_all(&text)?;
        }
        Ok::<(), std::io::Error>(())
    })?;
    if !quiet {
        out.write_all(summary(report).as_bytes())?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceFile;

    /// What a read gives, position by position.
    fn seen(
        source: &dyn SourceCode,
        offset: usize,
        len: usize,
        context: usize,
    ) -> Option<(Vec<u8>, usize, usize, usize, usize, usize)> {
        let read = source
            .read_span(
                &miette::SourceSpan::new(offset.into(), len),
                context,
                context,
            )
            .ok()?;
        Some((
            read.data().to_vec(),
            read.span().offset(),
            read.span().len(),
            read.line(),
            read.column(),
            read.line_count(),
        ))
    }

    #[test]
    fn spans_read_from_nearby_lines_as_from_the_whole_text() {
        let texts = [
            "fn a() {\n    x();\n\n    y(1,\n      2);\n}\n".to_string(),
            "a\r\nbb\r\n\r\nccc\r\nd".to_string(),
            "one\rtwo\r\nthree\nfo\rur\n\nfive\r".to_string(),
            "é\nçà\n  ü\n\n".to_string(),
            (0..40).map(|i| format!("line {i}\n")).collect(),
        ];
        for text in texts {
            let file = SourceFile::new(PathBuf::from("a.rs"), text.clone());
            let source = FileSource::new(file);
            // spans inside the text (miette's own reading panics on some outside it)
            for offset in 0..=text.len() {
                for len in [0, 1, 3, 9]
                    .into_iter()
                    .filter(|l| offset + l <= text.len())
                {
                    for context in 0..4 {
                        assert_eq!(
                            seen(&source, offset, len, context),
                            seen(&text.as_str(), offset, len, context),
                            "{text:?} at {offset}+{len}, {context} lines of context"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_finding_with_many_related_locations_shows_the_first_and_counts_the_rest() {
        use crate::diagnostic::{Location, Related};
        let text: String = (0..40)
            .map(|i| format!("release(con, \"lock:{i}\");\n"))
            .collect();
        let file = SourceFile::new(PathBuf::from("a.rs"), text.clone());
        let at = |i: usize| {
            let start = text.match_indices("release").nth(i).unwrap().0;
            Location::new(file.clone(), crate::source::Span::new(start, start + 7))
        };
        let d = Diagnostic {
            rule: "unconditional-release",
            severity: Severity::Error,
            primary: at(0),
            label: "deletes the key".to_string(),
            message: "the lock is deleted without checking its holder".to_string(),
            help: "compare and delete".to_string(),
            related: (1..40)
                .map(|i| Related {
                    location: at(i),
                    label: format!("called here ({i})"),
                })
                .collect(),
            fix: None,
        };
        let style = Style {
            color: false,
            width: 100,
        };
        let out = render_one(&d, style);
        assert!(out.contains("called here (16)"), "{out}");
        assert!(!out.contains("called here (17)"), "{out}");
        assert!(out.contains("23 more related locations not shown"), "{out}");
        let mut long = d.clone();
        long.related.truncate(3);
        assert!(!render_one(&long, style).contains("not shown"));
    }

    #[test]
    fn many_findings_render_in_their_order() {
        let n = RENDER_APART_FROM + 3;
        let text: String = (0..n)
            .map(|i| format!("con.del(\"lock:{i}\");\n"))
            .collect();
        let file = SourceFile::new(PathBuf::from("a.rs"), text.clone());
        let findings: Vec<Diagnostic> = text
            .match_indices("con.del")
            .enumerate()
            .map(|(i, (start, _))| Diagnostic {
                rule: "unconditional-release",
                severity: Severity::Error,
                primary: crate::diagnostic::Location::new(
                    file.clone(),
                    crate::source::Span::new(start, start + 7),
                ),
                label: format!("deletes lock {i}"),
                message: format!("lock {i} is deleted without checking its holder"),
                help: "compare and delete".to_string(),
                related: Vec::new(),
                fix: None,
            })
            .collect();
        let style = Style {
            color: false,
            width: 100,
        };
        let report = Report {
            findings: findings.clone(),
            ..Default::default()
        };
        let mut out = Vec::new();
        write(&report, style, true, &mut out).unwrap();
        let one_by_one: String = findings
            .iter()
            .map(|d| render_one(d, style) + "\n")
            .collect();
        assert_eq!(String::from_utf8(out).unwrap(), one_by_one);
        assert!(one_by_one.contains(&format!("lock {} is deleted", n - 1)));
    }
}
