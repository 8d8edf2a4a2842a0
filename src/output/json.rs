//! The versioned JSON report.

use crate::diagnostic::{Applicability, Diagnostic, Location};
use crate::engine::Report;
use serde::Serialize;

/// Version of the JSON shape; bumped on any incompatible change.
pub const VERSION: u32 = 1;

#[derive(Serialize)]
struct Doc<'a> {
    version: u32,
    findings: Findings<'a>,
    summary: Summary,
}

/// The findings of a report, each turned into its JSON shape as it is written.
struct Findings<'a>(&'a [Diagnostic]);

impl Serialize for Findings<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(finding))
    }
}

#[derive(Serialize)]
struct Summary {
    files: usize,
    findings: usize,
}

#[derive(Serialize)]
struct Finding<'a> {
    rule: &'a str,
    severity: crate::diagnostic::Severity,
    path: &'a str,
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
    message: &'a str,
    help: &'a str,
    related: Vec<RelatedJson<'a>>,
    fix: Option<FixJson<'a>>,
}

#[derive(Serialize)]
struct RelatedJson<'a> {
    path: &'a str,
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
    label: &'a str,
}

#[derive(Serialize)]
struct FixJson<'a> {
    message: &'a str,
    applicability: Applicability,
    edits: Vec<EditJson<'a>>,
}

#[derive(Serialize)]
struct EditJson<'a> {
    path: &'a str,
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
    content: &'a str,
}

struct Pos {
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
}

fn pos(l: &Location) -> Pos {
    let s = l.start();
    let e = l.end();
    Pos {
        line: s.line,
        column: s.column,
        end_line: e.line,
        end_column: e.column,
    }
}

fn finding(d: &Diagnostic) -> Finding<'_> {
    let p = pos(&d.primary);
    Finding {
        rule: d.rule,
        severity: d.severity,
        path: d.primary.path(),
        line: p.line,
        column: p.column,
        end_line: p.end_line,
        end_column: p.end_column,
        message: &d.message,
        help: &d.help,
        related: d
            .related
            .iter()
            .map(|r| {
                let p = pos(&r.location);
                RelatedJson {
                    path: r.location.path(),
                    line: p.line,
                    column: p.column,
                    end_line: p.end_line,
                    end_column: p.end_column,
                    label: &r.label,
                }
            })
            .collect(),
        fix: d.fix.as_ref().map(|f| FixJson {
            message: &f.message,
            applicability: f.applicability,
            edits: f
                .edits
                .iter()
                .map(|e| {
                    let p = pos(&e.location);
                    EditJson {
                        path: e.location.path(),
                        line: p.line,
                        column: p.column,
                        end_line: p.end_line,
                        end_column: p.end_column,
                        content: &e.replacement,
                    }
                })
                .collect(),
        }),
    }
}

/// One finding per line, each with the same fields as in [`render`].
pub fn render_lines(report: &Report) -> String {
    super::to_string(|out| write_lines(report, out))
}

/// Write the report as JSON lines, one finding at a time.
pub fn write_lines(report: &Report, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    for d in &report.findings {
        serde_json::to_writer(&mut *out, &finding(d))?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Render the report as pretty-printed JSON.
pub fn render(report: &Report) -> String {
    super::to_string(|out| write(report, out))
}

/// Write the report as pretty-printed JSON, one finding at a time.
pub fn write(report: &Report, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let doc = Doc {
        version: VERSION,
        findings: Findings(&report.findings),
        summary: Summary {
            files: report.files,
            findings: report.findings.len(),
        },
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::from)?;
    out.write_all(b"\n")
}
