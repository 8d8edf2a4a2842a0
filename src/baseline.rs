//! Baselines: record today's findings by content fingerprint, then report only new ones.
//! Moving code, adding lines above it or renaming the file does not resurrect a finding.

use crate::diagnostic::Diagnostic;
use crate::fingerprint::fingerprint;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

/// Version of the baseline file format.
pub const VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
pub struct Baseline {
    pub version: u32,
    pub findings: Vec<Entry>,
}

/// One recorded finding (path and message are for people reading the file).
#[derive(Debug, Serialize, Deserialize, Clone)]
pub struct Entry {
    pub rule: String,
    pub fingerprint: String,
    pub path: String,
    pub message: String,
}

impl Baseline {
    pub fn of(findings: &[Diagnostic]) -> Self {
        Baseline {
            version: VERSION,
            findings: findings
                .iter()
                .map(|d| Entry {
                    rule: d.rule.to_string(),
                    fingerprint: fingerprint(d),
                    path: d.primary.path().to_string(),
                    message: d.message.clone(),
                })
                .collect(),
        }
    }

    pub fn write(&self, path: &Path) -> Result<(), String> {
        let mut text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        text.push('\n');
        std::fs::write(path, text).map_err(|e| crate::discover::describe_io(&e))
    }

    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| crate::discover::describe_io(&e))?;
        let b: Baseline =
            serde_json::from_str(&text).map_err(|e| format!("not a locklint baseline: {e}"))?;
        if b.version != VERSION {
            return Err(format!(
                "baseline version {} is not supported (expected {VERSION})",
                b.version
            ));
        }
        Ok(b)
    }

    /// Keep the findings not in the baseline; also return how many baseline entries are gone
    /// among those whose path `checked` says was checked (a finding may still match an entry
    /// recorded under another path: the file was renamed).
    pub fn filter(
        &self,
        findings: Vec<Diagnostic>,
        checked: &dyn Fn(&str) -> bool,
    ) -> (Vec<Diagnostic>, usize) {
        // per (rule, fingerprint): entries of checked files left, entries of other files left
        let mut left: HashMap<(String, String), (usize, usize)> = HashMap::new();
        for e in &self.findings {
            let n = left
                .entry((e.rule.clone(), e.fingerprint.clone()))
                .or_default();
            if checked(&e.path) {
                n.0 += 1;
            } else {
                n.1 += 1;
            }
        }
        let mut new = Vec::new();
        for d in findings {
            let key = (d.rule.to_string(), fingerprint(&d));
            match left.get_mut(&key) {
                Some((n, _)) if *n > 0 => *n -= 1,
                Some((_, n)) if *n > 0 => *n -= 1,
                _ => new.push(d),
            }
        }
        let gone = left.values().map(|(n, _)| n).sum();
        (new, gone)
    }
}
