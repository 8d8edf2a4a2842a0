//! Renderers: every output format reads the same [`Report`](crate::engine::Report).

pub mod cargo_json;
pub mod github;
pub mod gitlab;
pub mod human;
pub mod json;
pub mod sarif;
mod words;

use crate::engine::Report;

/// The output formats of `locklint check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Source snippets with labels and help, and a summary line.
    Human,
    /// One JSON document (see README, "JSON output").
    Json,
    /// One JSON object per finding per line (same fields as `json`).
    JsonLines,
    /// SARIF 2.1.0 (GitHub code scanning and other SARIF viewers).
    Sarif,
    /// GitHub Actions workflow-command annotations.
    Github,
    /// GitLab Code Quality JSON.
    Gitlab,
}

/// Render a machine-readable or human report.
pub fn render(report: &Report, format: Format, style: human::Style, quiet: bool) -> String {
    to_string(|out| write(report, format, style, quiet, out))
}

/// Write the report in `format` to `out`. Human output, JSON and JSON lines are written one
/// finding at a time, so the text of every finding is never held at once.
pub fn write(
    report: &Report,
    format: Format,
    style: human::Style,
    quiet: bool,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    match format {
        Format::Human => human::write(report, style, quiet, out),
        Format::Json => json::write(report, out),
        Format::JsonLines => json::write_lines(report, out),
        Format::Sarif => sarif::write(report, out),
        Format::Github => out.write_all(github::render(report).as_bytes()),
        Format::Gitlab => gitlab::write(report, out),
    }
}

/// What a writer of UTF-8 text writes, as a string.
pub(crate) fn to_string(
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> String {
    let mut bytes = Vec::new();
    // writing to memory does not fail; the writers write UTF-8 only
    let _ = write(&mut bytes);
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Counts per rule and severity (a rule whose findings have different severities, through
/// configuration, gets one line per severity), most frequent first: `count  rule  severity`.
pub fn statistics(report: &Report) -> String {
    let mut counts: Vec<(usize, &'static str, crate::diagnostic::Severity)> = Vec::new();
    for d in &report.findings {
        match counts
            .iter_mut()
            .find(|c| c.1 == d.rule && c.2 == d.severity)
        {
            Some(c) => c.0 += 1,
            None => counts.push((1, d.rule, d.severity)),
        }
    }
    counts.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)).then(a.2.cmp(&b.2)));
    let w = counts.iter().map(|c| c.1.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (n, rule, sev) in counts {
        out.push_str(&format!("{n:>5}  {rule:<w$}  {sev}\n"));
    }
    out
}
