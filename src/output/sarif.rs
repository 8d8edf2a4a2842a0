//! SARIF 2.1.0: one run, every rule described, results with regions, related locations,
//! content-based partial fingerprints and fixes.

use crate::diagnostic::{Diagnostic, Location, Severity};
use crate::engine::Report;
use crate::fingerprint::fingerprint;
use crate::rules::{self, RuleInfo};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const SCHEMA: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";
const INFORMATION_URI: &str = "https://github.com/locklint/locklint";
/// The base every artifact URI is relative to.
pub const URI_BASE: &str = "SRCROOT";

/// The repository root: the nearest directory above the current one holding `.git`,
/// or the current directory.
pub fn repository_root() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    cwd.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
        .unwrap_or(cwd)
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// Path of a file relative to `root`, with `/` separators, percent-encoding what URIs need.
fn relative_uri(path: &Path, root: &Path) -> String {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let abs = abs.canonicalize().unwrap_or(abs);
    let rel = abs.strip_prefix(root).map(Path::to_path_buf).unwrap_or(abs);
    let s = rel.to_string_lossy().replace('\\', "/");
    s.chars()
        .map(|c| match c {
            ' ' => "%20".to_string(),
            '%' => "%25".to_string(),
            '#' => "%23".to_string(),
            '?' => "%3F".to_string(),
            c => c.to_string(),
        })
        .collect()
}

fn region(l: &Location) -> Value {
    let s = l.start();
    let e = l.end();
    json!({
        "startLine": s.line,
        "startColumn": s.column,
        "endLine": e.line,
        "endColumn": e.column,
        "charOffset": l.span.start,
        "charLength": l.span.len(),
    })
}

fn physical(l: &Location, root: &Path) -> Value {
    json!({
        "artifactLocation": { "uri": relative_uri(&l.file.path, root), "uriBaseId": URI_BASE },
        "region": region(l),
    })
}

fn rule_descriptor(info: &RuleInfo, help_uri: Option<&str>) -> Value {
    let full = info
        .doc
        .lines()
        .skip_while(|l| l.starts_with('#') || l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let mut v = json!({
        "id": info.name,
        "name": info.name,
        "shortDescription": { "text": info.summary },
        "fullDescription": { "text": if full.is_empty() { info.summary.to_string() } else { full } },
        "help": { "text": info.doc, "markdown": info.doc },
        "defaultConfiguration": { "level": level(info.severity) },
        "properties": { "tags": ["concurrency", "distributed-lock"] },
    });
    if let Some(uri) = help_uri {
        v["helpUri"] = json!(uri.replace("{rule}", info.name));
    }
    v
}

fn result(d: &Diagnostic, index: usize, root: &Path) -> Value {
    let related: Vec<Value> = d
        .related
        .iter()
        .enumerate()
        .map(|(i, r)| {
            json!({
                "id": i,
                "physicalLocation": physical(&r.location, root),
                "message": { "text": r.label },
            })
        })
        .collect();
    let mut v = json!({
        "ruleId": d.rule,
        "ruleIndex": index,
        "level": level(d.severity),
        "message": { "text": format!("{}\nhelp: {}", d.message, d.help) },
        "locations": [{ "physicalLocation": physical(&d.primary, root) }],
        "partialFingerprints": { "locklint/v1": fingerprint(d) },
    });
    if !related.is_empty() {
        v["relatedLocations"] = Value::Array(related);
    }
    if let Some(fix) = &d.fix {
        let changes: Vec<Value> = fix
            .edits
            .iter()
            .map(|e| {
                json!({
                    "artifactLocation": { "uri": relative_uri(&e.location.file.path, root), "uriBaseId": URI_BASE },
                    "replacements": [{
                        "deletedRegion": region(&e.location),
                        "insertedContent": { "text": e.replacement },
                    }],
                })
            })
            .collect();
        v["fixes"] =
            json!([{ "description": { "text": fix.message }, "artifactChanges": changes }]);
    }
    v
}

/// Render the report as a SARIF 2.1.0 log.
pub fn render(report: &Report) -> String {
    super::to_string(|out| write(report, out))
}

/// Write the report as a SARIF 2.1.0 log to `out`, one result at a time: the text of every
/// result is never held at once.
pub fn write(report: &Report, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let root = repository_root();
    let root = root.canonicalize().unwrap_or(root);
    let infos = rules::infos();
    let index_of = |name: &str| infos.iter().position(|i| i.name == name).unwrap_or(0);
    let mut root_uri = format!("file://{}", root.to_string_lossy().replace('\\', "/"));
    if !root_uri.ends_with('/') {
        root_uri.push('/');
    }
    let log = json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "locklint",
                "version": env!("CARGO_PKG_VERSION"),
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "informationUri": INFORMATION_URI,
                "rules": infos.iter().map(|i| rule_descriptor(i, report.help_uri.as_deref())).collect::<Vec<_>>(),
            }},
            "originalUriBaseIds": { URI_BASE: { "uri": root_uri } },
            "columnKind": "unicodeCodePoints",
            "results": [],
        }],
    });
    let log = serde_json::to_string_pretty(&log).unwrap_or_default();
    // the results are written into the text one at a time, as the pretty printer would lay
    // them out: a tree of every result at once takes ten times the text
    const RESULTS: &str = "\n      \"results\": []";
    let Some(at) = log.find(RESULTS) else {
        out.write_all(log.as_bytes())?;
        return out.write_all(b"\n");
    };
    out.write_all(&log.as_bytes()[..at + RESULTS.len() - 1])?;
    for (i, d) in report.findings.iter().enumerate() {
        out.write_all(if i == 0 { b"\n" } else { b",\n" })?;
        let one =
            serde_json::to_string_pretty(&result(d, index_of(d.rule), &root)).unwrap_or_default();
        for (n, line) in one.lines().enumerate() {
            if n > 0 {
                out.write_all(b"\n")?;
            }
            out.write_all(b"        ")?;
            out.write_all(line.as_bytes())?;
        }
    }
    if !report.findings.is_empty() {
        out.write_all(b"\n      ")?;
    }
    out.write_all(&log.as_bytes()[at + RESULTS.len() - 1..])?;
    out.write_all(b"\n")
}
