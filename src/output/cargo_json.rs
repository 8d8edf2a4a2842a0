//! Cargo's JSON message format (`cargo locklint --message-format=json`): one
//! `compiler-message` per finding, shaped like a rustc diagnostic, then `build-finished`.
//! Editors that run `cargo check --message-format=json` (rust-analyzer's
//! `check.overrideCommand`) show these findings and offer their fixes as quick fixes.

use crate::diagnostic::{Applicability, Diagnostic, Location, Severity};
use crate::engine::Report;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The package a file belongs to, as cargo describes it.
#[derive(Debug, Clone)]
pub struct PackageInfo {
    pub id: String,
    pub manifest_path: PathBuf,
    pub dir: PathBuf,
    /// The package's first target, serialised as cargo does.
    pub target: Value,
}

fn span(
    l: &Location,
    primary: bool,
    label: Option<&str>,
    replacement: Option<(&str, Applicability)>,
) -> Value {
    let s = l.start();
    let e = l.end();
    let text = &l.file.text;
    // the source lines the span covers, with 1-based highlight columns
    let first = l.file.line_span(l.span.start).start;
    let lines: Vec<Value> = text[first..]
        .lines()
        .take(e.line - s.line + 1)
        .enumerate()
        .map(|(i, line)| {
            let chars = line.chars().count();
            let hs = if i == 0 { s.column } else { 1 };
            let he = if s.line + i == e.line {
                e.column
            } else {
                chars + 1
            };
            json!({ "text": line, "highlight_start": hs, "highlight_end": he })
        })
        .collect();
    json!({
        "file_name": l.file.path.to_string_lossy(),
        "byte_start": l.span.start,
        "byte_end": l.span.end,
        "line_start": s.line,
        "line_end": e.line,
        "column_start": s.column,
        "column_end": e.column,
        "is_primary": primary,
        "text": lines,
        "label": label,
        "suggested_replacement": replacement.map(|r| r.0),
        "suggestion_applicability": replacement.map(|r| match r.1 {
            Applicability::Safe => "MachineApplicable",
            Applicability::Unsafe => "MaybeIncorrect",
            Applicability::DisplayOnly => "HasPlaceholders",
        }),
        "expansion": null,
    })
}

fn child(level: &str, message: &str, spans: Vec<Value>) -> Value {
    json!({
        "message": message,
        "code": null,
        "level": level,
        "spans": spans,
        "children": [],
        "rendered": null,
    })
}

/// The rustc-style diagnostic of one finding.
pub fn diagnostic(d: &Diagnostic) -> Value {
    let mut spans = vec![span(&d.primary, true, Some(&d.label), None)];
    spans.extend(
        d.related
            .iter()
            .map(|r| span(&r.location, false, Some(&r.label), None)),
    );
    let mut children = Vec::new();
    match &d.fix {
        Some(fix) => children.push(child(
            "help",
            &format!("{} ({})", d.help, fix.message),
            fix.edits
                .iter()
                .map(|e| {
                    span(
                        &e.location,
                        true,
                        None,
                        Some((&e.replacement, fix.applicability)),
                    )
                })
                .collect(),
        )),
        None => children.push(child("help", &d.help, Vec::new())),
    }
    children.push(child(
        "note",
        &format!(
            "`locklint explain {}` shows the failing interleaving and the fix",
            d.rule
        ),
        Vec::new(),
    ));
    let level = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let s = d.primary.start();
    let rendered = format!(
        "{level}[locklint::{}]: {}\n --> {}:{}:{}\n  = help: {}\n",
        d.rule,
        d.message,
        d.primary.path(),
        s.line,
        s.column,
        d.help
    );
    json!({
        "$message_type": "diagnostic",
        "message": d.message,
        "code": { "code": format!("locklint::{}", d.rule), "explanation": null },
        "level": level,
        "spans": spans,
        "children": children,
        "rendered": rendered,
    })
}

fn package_of<'p>(path: &Path, packages: &'p [PackageInfo]) -> Option<&'p PackageInfo> {
    let abs = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    packages
        .iter()
        .filter(|p| abs.starts_with(&p.dir))
        .max_by_key(|p| p.dir.as_os_str().len())
}

/// One JSON object per line: a `compiler-message` per finding, then `build-finished`.
pub fn render(report: &Report, packages: &[PackageInfo], success: bool) -> String {
    let mut out = String::new();
    for d in &report.findings {
        let Some(pkg) = package_of(&d.primary.file.path, packages) else {
            continue;
        };
        let msg = json!({
            "reason": "compiler-message",
            "package_id": pkg.id,
            "manifest_path": pkg.manifest_path.to_string_lossy(),
            "target": pkg.target,
            "message": diagnostic(d),
        });
        out.push_str(&msg.to_string());
        out.push('\n');
    }
    out.push_str(&json!({ "reason": "build-finished", "success": success }).to_string());
    out.push('\n');
    out
}
