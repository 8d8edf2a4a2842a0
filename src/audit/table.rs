//! The terminal table: one row per lock, then the reasons and next steps of each lock.

use super::{Audit, Lock, Mechanism, Verdict};
use crate::output::human::plural;

/// How a lock is released, in a word or two.
pub fn release_label(lock: &Lock) -> String {
    if lock.releases.is_empty() {
        let ttl = lock.acquires.iter().any(|a| a.ttl != "none");
        return match lock.mechanism {
            Mechanism::AdvisoryTransaction => "at tx end".to_string(),
            Mechanism::RedisSetnxNoExpiry => "none".to_string(),
            m if m.expires() && ttl => "none (TTL)".to_string(),
            _ => "none".to_string(),
        };
    }
    if lock.releases.iter().all(|r| r.atomic && r.owner_checked) {
        "owner-checked".to_string()
    } else if lock.releases.iter().any(|r| !r.owner_checked) {
        "unchecked".to_string()
    } else {
        "not atomic".to_string()
    }
}

/// Whether the acquires' results are read: `yes`, `no`, `blocks`, `?`.
pub fn checked_label(lock: &Lock) -> &'static str {
    let v: Vec<Option<bool>> = lock.acquires.iter().map(|a| a.checked).collect();
    if v.contains(&Some(false)) {
        "no"
    } else if v.contains(&Some(true)) {
        "yes"
    } else if lock.mechanism == Mechanism::LockTable {
        "?"
    } else {
        "blocks"
    }
}

/// The first acquire site, `path:line`, with a count of the others.
pub fn acquired_label(lock: &Lock) -> String {
    match lock.acquires.first() {
        None => "-".to_string(),
        Some(a) if lock.acquires.len() == 1 => a.site.short(),
        Some(a) => format!("{} (+{})", a.site.short(), lock.acquires.len() - 1),
    }
}

/// The column headers and cells shared by the table and Markdown renderers.
pub const HEADERS: [&str; 10] = [
    "LOCK",
    "MECHANISM",
    "ACQUIRED AT",
    "TTL",
    "TOKEN",
    "CHECKED",
    "RELEASE",
    "FENCED",
    "PURPOSE",
    "VERDICT",
];

pub fn cells(l: &Lock) -> [String; 10] {
    [
        l.name.clone(),
        l.mechanism_label.clone(),
        acquired_label(l),
        l.ttl(),
        l.token(),
        checked_label(l).to_string(),
        release_label(l),
        l.fenced_label().to_string(),
        l.purpose.label(),
        l.verdict.label().to_string(),
    ]
}

/// `3 locks: 1 broken, 1 unsafe for correctness, 1 fine for efficiency`.
pub fn summary_line(audit: &Audit) -> String {
    let n = audit.locks.len();
    let mut parts = Vec::new();
    for v in Verdict::ALL.iter().rev() {
        let c = audit.locks.iter().filter(|l| l.verdict == *v).count();
        if c > 0 {
            parts.push(format!("{c} {}", v.label()));
        }
    }
    let head = format!("{} in {}", plural(n, "lock"), plural(audit.files, "file"));
    if parts.is_empty() {
        head
    } else {
        format!("{head}: {}", parts.join(", "))
    }
}

pub fn render(audit: &Audit) -> String {
    let mut out = String::new();
    if audit.locks.is_empty() {
        out.push_str("no locks found\n");
        out.push_str(&summary_line(audit));
        out.push('\n');
        return out;
    }
    let rows: Vec<[String; 10]> = audit.locks.iter().map(cells).collect();
    let mut w = HEADERS.map(|h| h.chars().count());
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                let pad = w[i] - c.chars().count();
                s.push_str(c);
                s.push_str(&" ".repeat(pad + 2));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    out.push_str(&line(&HEADERS.map(String::from)));
    for r in &rows {
        out.push_str(&line(r));
    }
    for l in &audit.locks {
        out.push('\n');
        out.push_str(&format!("{} ({})\n", l.name, l.verdict.label()));
        for r in &l.reasons {
            out.push_str(&format!("  - {r}\n"));
        }
        for s in &l.next_steps {
            out.push_str(&format!("  → {s}\n"));
        }
    }
    out.push('\n');
    out.push_str(&summary_line(audit));
    out.push('\n');
    out
}
