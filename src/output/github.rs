//! GitHub Actions workflow commands: one `::error` / `::warning` annotation per finding.

use crate::diagnostic::Severity;
use crate::engine::Report;

/// Escape a workflow-command message (`%`, CR, LF).
fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escape a workflow-command property (also `:` and `,`).
fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    for d in &report.findings {
        let s = d.primary.start();
        let e = d.primary.end();
        let kind = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        out.push_str(&format!(
            "::{kind} file={},line={},col={},endLine={},endColumn={},title={}::{}\n",
            escape_property(d.primary.path()),
            s.line,
            s.column,
            e.line,
            e.column,
            escape_property(&format!("locklint({})", d.rule)),
            escape_data(&format!("{}\nhelp: {}", d.message, d.help)),
        ));
    }
    out
}
