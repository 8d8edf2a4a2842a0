//! GitLab Code Quality report (a JSON array of issues).

use crate::diagnostic::{Diagnostic, Severity};
use crate::engine::Report;
use crate::fingerprint::fingerprint;
use serde_json::{json, Value};

pub fn render(report: &Report) -> String {
    super::to_string(|out| write(report, out))
}

/// Write the report to `out`, one issue at a time: the issues are never held at once.
pub fn write(report: &Report, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &Issues(report))?;
    out.write_all(b"\n")
}

/// The report's findings, serialised as the array of their issues.
struct Issues<'a>(&'a Report);

impl serde::Serialize for Issues<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.findings.iter().map(issue))
    }
}

fn issue(d: &Diagnostic) -> Value {
    let s = d.primary.start();
    let e = d.primary.end();
    json!({
        "description": format!("{}: {}", d.rule, d.message),
        "check_name": d.rule,
        "fingerprint": fingerprint(d),
        "severity": match d.severity { Severity::Error => "major", Severity::Warning => "minor" },
        "location": { "path": d.primary.path(), "lines": { "begin": s.line, "end": e.line } },
    })
}
