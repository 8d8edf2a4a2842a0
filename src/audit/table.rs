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

/// Width of the terminal the default table is laid out for.
pub const WIDTH: usize = 100;

/// The columns of the default table (the others are in each lock's details), with the width
/// past which a cell wraps.
const NARROW: [(usize, usize); 6] = [(0, 28), (1, 16), (3, 12), (6, 13), (7, 6), (9, 12)];

/// Split `text` into lines of at most `width` characters, at spaces where it can (a word
/// longer than the width is cut).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let have = line.chars().count();
            let sep = usize::from(have > 0);
            if have + sep + word.len() <= width {
                if sep == 1 {
                    line.push(' ');
                }
                line.extend(word.iter());
                break;
            }
            if have > 0 {
                lines.push(std::mem::take(&mut line));
                continue;
            }
            // a word longer than the line
            let rest = word.split_off(width);
            lines.push(word.iter().collect());
            word = rest;
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// Lines of `text` after `first` (`  - `), continued under it, within [`WIDTH`].
fn hanging(first: &str, text: &str) -> String {
    let indent = " ".repeat(first.chars().count());
    let mut out = String::new();
    for (i, l) in wrap(text, WIDTH - indent.len()).iter().enumerate() {
        out.push_str(if i == 0 { first } else { &indent });
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// Rows of cells, each cell wrapped to its column's width, columns two spaces apart.
fn grid(headers: &[&str], rows: &[Vec<String>], caps: Option<&[usize]>) -> String {
    let n = headers.len();
    let mut w: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    if let Some(caps) = caps {
        // each column at most its cap, then the room left within the width shared out to
        // the columns that wrap
        let natural = w.clone();
        for i in 0..n {
            w[i] = w[i].min(caps[i].max(headers[i].chars().count()));
        }
        let mut spare = WIDTH.saturating_sub(w.iter().sum::<usize>() + 2 * (n - 1));
        while spare > 0 && (0..n).any(|i| w[i] < natural[i]) {
            for i in 0..n {
                if spare > 0 && w[i] < natural[i] {
                    w[i] += 1;
                    spare -= 1;
                }
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<String>| {
        let wrapped: Vec<Vec<String>> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if caps.is_some() {
                    wrap(c, w[i])
                } else {
                    vec![c.clone()]
                }
            })
            .collect();
        let height = wrapped.iter().map(Vec::len).max().unwrap_or(1);
        for k in 0..height {
            let mut s = String::new();
            for (i, col) in wrapped.iter().enumerate() {
                let c = col.get(k).map(String::as_str).unwrap_or("");
                s.push_str(c);
                if i + 1 < n {
                    s.push_str(&" ".repeat(w[i] - c.chars().count() + 2));
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        }
    };
    line(headers.iter().map(|h| h.to_string()).collect());
    for r in rows {
        line(r.clone());
    }
    out
}

/// The details the default table leaves out: where it is acquired, token, result checked,
/// purpose.
fn details(l: &Lock) -> String {
    format!(
        "acquired at {} · token {} · result checked {} · purpose {}",
        acquired_label(l),
        l.token(),
        checked_label(l),
        l.purpose.label()
    )
}

/// The terminal table: within [`WIDTH`] columns (long cells wrap, the acquire site, token,
/// checked and purpose go to each lock's details), or with every column on one line each
/// (`wide`).
pub fn render(audit: &Audit, wide: bool) -> String {
    let mut out = String::new();
    if audit.locks.is_empty() {
        out.push_str("no locks found\n");
        out.push_str(&summary_line(audit));
        out.push('\n');
        return out;
    }
    let rows: Vec<[String; 10]> = audit.locks.iter().map(cells).collect();
    if wide {
        let rows: Vec<Vec<String>> = rows.iter().map(|r| r.to_vec()).collect();
        out.push_str(&grid(&HEADERS, &rows, None));
    } else {
        let headers: Vec<&str> = NARROW.iter().map(|(i, _)| HEADERS[*i]).collect();
        let caps: Vec<usize> = NARROW.iter().map(|(_, c)| *c).collect();
        let rows: Vec<Vec<String>> = rows
            .iter()
            .map(|r| NARROW.iter().map(|(i, _)| r[*i].clone()).collect())
            .collect();
        out.push_str(&grid(&headers, &rows, Some(&caps)));
    }
    for l in &audit.locks {
        out.push('\n');
        let head = format!("{} ({})", l.name, l.verdict.label());
        if wide {
            out.push_str(&head);
            out.push('\n');
            for r in &l.reasons {
                out.push_str(&format!("  - {r}\n"));
            }
            for s in &l.next_steps {
                out.push_str(&format!("  → {s}\n"));
            }
            continue;
        }
        out.push_str(&hanging("", &head));
        out.push_str(&hanging("  ", &details(l)));
        for r in &l.reasons {
            out.push_str(&hanging("  - ", r));
        }
        for s in &l.next_steps {
            out.push_str(&hanging("  → ", s));
        }
    }
    out.push('\n');
    out.push_str(&summary_line(audit));
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn text_wraps_at_spaces_and_cuts_long_words() {
        assert_eq!(
            wrap("unsafe for correctness", 12),
            ["unsafe for", "correctness"]
        );
        assert_eq!(wrap("lock:invoice:{}", 6), ["lock:i", "nvoice", ":{}"]);
        assert_eq!(wrap("", 5), [""]);
        assert_eq!(wrap("a b", 10), ["a b"]);
    }
}
