//! GitLab Code Quality report (a JSON array of issues).

use crate::diagnostic::Severity;
use crate::engine::Report;
use crate::fingerprint::fingerprint;
use serde_json::json;

pub fn render(report: &Report) -> String {
    let issues: Vec<_> = report
        .findings
        .iter()
        .map(|d| {
            let s = d.primary.start();
            let e = d.primary.end();
            json!({
                "description": format!("{}: {}", d.rule, d.message),
                "check_name": d.rule,
                "fingerprint": fingerprint(d),
                "severity": match d.severity { Severity::Error => "major", Severity::Warning => "minor" },
                "location": { "path": d.primary.path(), "lines": { "begin": s.line, "end": e.line } },
            })
        })
        .collect();
    let mut s = serde_json::to_string_pretty(&issues).unwrap_or_default();
    s.push('\n');
    s
}
