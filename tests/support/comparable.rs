//! A finding of `check --format json` and a diagnostic the language server publishes, each
//! as the text they share, to compare the two.

#![allow(dead_code)]

use serde_json::Value;

/// What a finding and a diagnostic share: rule, severity, range, message and help.
pub fn comparable_finding(f: &str) -> String {
    let v: Value = serde_json::from_str(f).unwrap();
    let severity = if v["severity"] == "error" { 1 } else { 2 };
    let at = |k: &str| v[k].as_u64().unwrap() - 1;
    format!(
        "{} {severity} {}:{}-{}:{} {}\nhelp: {}",
        v["rule"].as_str().unwrap(),
        at("line"),
        at("column"),
        at("end_line"),
        at("end_column"),
        v["message"].as_str().unwrap(),
        v["help"].as_str().unwrap()
    )
}

pub fn comparable_diagnostic(d: &Value) -> String {
    let r = &d["range"];
    format!(
        "{} {} {}:{}-{}:{} {}",
        d["code"].as_str().unwrap(),
        d["severity"],
        r["start"]["line"],
        r["start"]["character"],
        r["end"]["line"],
        r["end"]["character"],
        d["message"].as_str().unwrap()
    )
}
