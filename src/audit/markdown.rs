//! Markdown for a pull request or wiki: a summary, the table, and a section per lock.

use super::table::{cells, summary_line, HEADERS};
use super::{Audit, Site};

fn esc(s: &str) -> String {
    s.replace('|', "\\|")
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn sites(v: &[Site]) -> String {
    if v.is_empty() {
        "none".to_string()
    } else {
        v.iter()
            .map(|s| format!("`{}`", s.short()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

pub fn render(audit: &Audit) -> String {
    let mut out = String::from("# Lock audit\n\n");
    out.push_str(&summary_line(audit));
    out.push_str("\n\n");
    if audit.locks.is_empty() {
        return out;
    }
    out.push_str(&format!("| {} |\n", HEADERS.join(" | ").to_lowercase()));
    out.push_str(&format!("|{}\n", "---|".repeat(HEADERS.len())));
    for l in &audit.locks {
        let c = cells(l);
        let mut row: Vec<String> = c.iter().map(|x| esc(x)).collect();
        row[0] = format!("`{}`", row[0]);
        row[2] = format!("`{}`", row[2]);
        row[9] = format!("**{}**", row[9]);
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    for l in &audit.locks {
        out.push_str(&format!("\n## `{}` — {}\n\n", l.name, l.verdict.label()));
        out.push_str(&format!(
            "- mechanism: {}\n- purpose: {}\n",
            l.mechanism_label,
            l.purpose.label()
        ));
        for a in &l.acquires {
            let checked = match a.checked {
                Some(b) => yes(b),
                None => "blocks / unknown",
            };
            out.push_str(&format!(
                "- acquire `{}` in `{}()` (`{}`): TTL {}, token {}, result checked: {}\n",
                a.site.short(),
                a.function,
                esc(&a.command),
                a.ttl,
                a.token.label(),
                checked
            ));
        }
        for r in &l.releases {
            out.push_str(&format!(
                "- release `{}` (`{}`): atomic {}, owner-checked {}\n",
                r.site.short(),
                esc(&r.command),
                yes(r.atomic),
                yes(r.owner_checked)
            ));
        }
        for r in &l.renewals {
            out.push_str(&format!(
                "- renew `{}` (`{}`): owner-checked {}\n",
                r.site.short(),
                esc(&r.command),
                yes(r.owner_checked)
            ));
        }
        if l.renewals.is_empty() {
            out.push_str("- renewed: no\n");
        }
        out.push_str(&format!(
            "- fencing token minted: {}; writes that check it: {}; writes that do not: {}\n",
            sites(&l.fencing.minted),
            sites(&l.fencing.checked_writes),
            sites(&l.fencing.unchecked_writes)
        ));
        if l.protects.is_empty() {
            out.push_str("- protects: no writes found\n");
        }
        for w in &l.protects {
            out.push_str(&format!(
                "- protects `{}` at `{}`: idempotent {}, fenced {}\n",
                esc(&w.target),
                w.site.short(),
                yes(w.idempotent),
                yes(w.fenced)
            ));
        }
        for f in &l.findings {
            out.push_str(&format!(
                "- finding `{}` ({}) at `{}`: {}\n",
                f.rule,
                f.severity,
                f.site.short(),
                f.message
            ));
        }
        if !l.reasons.is_empty() {
            out.push_str("\nWhy:\n\n");
            for r in &l.reasons {
                out.push_str(&format!("- {r}\n"));
            }
        }
        if !l.next_steps.is_empty() {
            out.push_str("\nNext:\n\n");
            for s in &l.next_steps {
                out.push_str(&format!("- [ ] {s}\n"));
            }
        }
    }
    out
}
