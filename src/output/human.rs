//! Human output: miette graphical reports with the source snippet, labels and help.

use crate::diagnostic::{Applicability, Diagnostic, Severity};
use crate::engine::Report;
use crate::source::FileRef;
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceCode};
use std::collections::HashSet;
use std::fmt;

/// Rendering choices.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
    pub width: usize,
}

/// A file's text as a miette source.
#[derive(Clone)]
struct FileSource(FileRef);

impl SourceCode for FileSource {
    fn read_span<'a>(
        &'a self,
        span: &miette::SourceSpan,
        before: usize,
        after: usize,
    ) -> Result<Box<dyn miette::SpanContents<'a> + 'a>, miette::MietteError> {
        self.0.text.as_str().read_span(span, before, after)
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

fn rendered(d: &Diagnostic) -> Rendered {
    let file = d.primary.file.clone();
    let mut labels = vec![LabeledSpan::new_primary_with_span(
        Some(d.label.clone()),
        span(d.primary.span.start, d.primary.span.end),
    )];
    let mut related = Vec::new();
    for r in &d.related {
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
                source: NamedSource::new(r.location.path(), FileSource(r.location.file.clone())),
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
            "{}{}\nsee `locklint explain {}` for details",
            d.help,
            fix_line(d),
            d.rule
        )),
        source: NamedSource::new(d.primary.path(), FileSource(file)).with_language("Rust"),
        labels,
        related,
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
    for r in &d.related {
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
        "  help: {}{}\n  see `locklint explain {}` for details\n",
        d.help,
        fix_line(d).replace('\n', "\n  "),
        d.rule
    ));
    out
}

/// Render one finding.
pub fn render_one(d: &Diagnostic, style: Style) -> String {
    let too_long = std::iter::once(&d.primary)
        .chain(d.related.iter().map(|r| &r.location))
        .any(|l| {
            line_len_at(&l.file, l.span.start) > MAX_SNIPPET_LINE
                || line_len_at(&l.file, l.span.end) > MAX_SNIPPET_LINE
        });
    if too_long {
        return plain(d);
    }
    let theme = if style.color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_width(style.width)
        .with_links(false);
    let mut out = String::new();
    if handler.render_report(&mut out, &rendered(d)).is_err() {
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
    let mut out = String::new();
    for d in &report.findings {
        out.push_str(&render_one(d, style));
        out.push('\n');
    }
    if !quiet {
        out.push_str(&summary(report));
        out.push('\n');
    }
    out
}
