//! One self-contained HTML page: no network references, inline CSS and JavaScript. A summary
//! (locks by verdict as CSS bars), a table sortable by clicking a column header, and a
//! section per lock with code excerpts of its sites.

use super::table::{cells, summary_line, HEADERS};
use super::{Audit, Lock, Site, Verdict};

/// Escape text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem;color:#1d2330;background:#fbfbfd}
h1{font-size:1.5rem;margin:0 0 .5rem}h2{font-size:1.15rem;margin:2rem 0 .5rem}
code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.bars{max-width:640px;margin:1rem 0}
.bar{display:flex;align-items:center;margin:.25rem 0}
.bar .label{width:12rem}.bar .track{flex:1;background:#eceef3;border-radius:3px;height:1.1rem}
.bar .fill{height:100%;border-radius:3px}.bar .n{width:2.5rem;text-align:right}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}
th,td{border-bottom:1px solid #e3e5ea;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{cursor:pointer;user-select:none;background:#f2f3f7;position:sticky;top:0}
th.asc::after{content:" \25B2"}th.desc::after{content:" \25BC"}
.v{font-weight:600;border-radius:3px;padding:0 .35rem;white-space:nowrap}
.no-lock-needed{background:#d9eefe}.fine-for-efficiency{background:#dff3e3}.fine-for-correctness{background:#c9ecd2}
.unsafe-for-correctness{background:#ffe7c2}.broken{background:#ffd0d0}
.fill.no-lock-needed{background:#4e9bd6}.fill.fine-for-efficiency{background:#5cb870}.fill.fine-for-correctness{background:#2f9a4b}
.fill.unsafe-for-correctness{background:#e39a2d}.fill.broken{background:#d64545}
section.lock{background:#fff;border:1px solid #e3e5ea;border-radius:6px;padding:.5rem 1rem;margin:1rem 0}
pre{background:#f6f7f9;padding:.5rem;overflow-x:auto;border-radius:4px}
pre .hl{background:#fff3b0;display:inline-block;width:100%}
ul{margin:.25rem 0 .5rem 1.25rem;padding:0}
"#;

const SCRIPT: &str = r#"
document.getElementById("locks") && document.getElementById("locks").setAttribute("data-sortable", "ready");
document.querySelectorAll('#locks th').forEach(function(th, col){
  th.addEventListener('click', function(){
    var table = th.closest('table'), body = table.tBodies[0];
    var asc = !th.classList.contains('asc');
    table.querySelectorAll('th').forEach(function(h){h.classList.remove('asc','desc');});
    th.classList.add(asc ? 'asc' : 'desc');
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function(a, b){
      var x = a.cells[col].getAttribute('data-sort') || a.cells[col].textContent;
      var y = b.cells[col].getAttribute('data-sort') || b.cells[col].textContent;
      return (asc ? 1 : -1) * x.localeCompare(y, undefined, {numeric: true});
    });
    rows.forEach(function(r){body.appendChild(r);});
  });
});
"#;

/// A few lines around a site, the site's line highlighted.
fn excerpt(site: &Site) -> String {
    let Some(file) = &site.file else {
        return String::new();
    };
    let lines: Vec<&str> = file.text.lines().collect();
    let end_line = file.line_col(site.span.end.max(site.span.start)).line;
    let from = site.line.saturating_sub(2).max(1);
    let to = (end_line.max(site.line) + 1).min(lines.len());
    let mut o = String::from("<pre>");
    for n in from..=to {
        let text = lines.get(n - 1).copied().unwrap_or("");
        let row = format!("{n:>4} │ {}", esc(text));
        if n >= site.line && n <= end_line {
            o.push_str(&format!("<span class=\"hl\">{row}</span>\n"));
        } else {
            o.push_str(&row);
            o.push('\n');
        }
    }
    o.push_str("</pre>");
    o
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn detail(i: usize, l: &Lock) -> String {
    let mut o = format!(
        "<section class=\"lock\" id=\"lock-{i}\"><h2><code>{}</code> <span class=\"v {}\">{}</span></h2>",
        esc(&l.name),
        l.verdict.id(),
        esc(l.verdict.label())
    );
    o.push_str(&format!(
        "<p>{} · purpose: {} · renewed: {}</p>",
        esc(&l.mechanism_label),
        esc(&l.purpose.label()),
        yes(l.renewed)
    ));
    if !l.reasons.is_empty() {
        o.push_str("<h3>Why</h3><ul>");
        for r in &l.reasons {
            o.push_str(&format!("<li>{}</li>", esc(r)));
        }
        o.push_str("</ul>");
    }
    if !l.next_steps.is_empty() {
        o.push_str("<h3>Next steps</h3><ul>");
        for s in &l.next_steps {
            o.push_str(&format!("<li>{}</li>", esc(s)));
        }
        o.push_str("</ul>");
    }
    for a in &l.acquires {
        let checked = match a.checked {
            Some(b) => yes(b),
            None => "blocks / unknown",
        };
        o.push_str(&format!(
            "<h3>Acquire <code>{}</code> in <code>{}()</code></h3><p>{} · TTL {} · token {} · result checked: {}</p>{}",
            esc(&a.site.short()),
            esc(&a.function),
            esc(&a.command),
            esc(&a.ttl),
            a.token.label(),
            checked,
            excerpt(&a.site)
        ));
    }
    for r in &l.releases {
        o.push_str(&format!(
            "<h3>Release <code>{}</code></h3><p>{} · atomic: {} · owner-checked: {}</p>{}",
            esc(&r.site.short()),
            esc(&r.command),
            yes(r.atomic),
            yes(r.owner_checked),
            excerpt(&r.site)
        ));
    }
    for r in &l.renewals {
        o.push_str(&format!(
            "<h3>Renew <code>{}</code></h3><p>{} · owner-checked: {}</p>{}",
            esc(&r.site.short()),
            esc(&r.command),
            yes(r.owner_checked),
            excerpt(&r.site)
        ));
    }
    for s in &l.fencing.minted {
        o.push_str(&format!(
            "<h3>Fencing token minted <code>{}</code></h3>{}",
            esc(&s.short()),
            excerpt(s)
        ));
    }
    for w in &l.protects {
        o.push_str(&format!(
            "<h3>Protects <code>{}</code> at <code>{}</code></h3><p>idempotent: {} · fenced: {}</p>{}",
            esc(&w.target),
            esc(&w.site.short()),
            yes(w.idempotent),
            yes(w.fenced),
            excerpt(&w.site)
        ));
    }
    if !l.findings.is_empty() {
        o.push_str("<h3>Findings</h3><ul>");
        for f in &l.findings {
            o.push_str(&format!(
                "<li><code>{}</code> ({}) at <code>{}</code>: {}</li>",
                f.rule,
                f.severity,
                esc(&f.site.short()),
                esc(&f.message)
            ));
        }
        o.push_str("</ul>");
    }
    o.push_str("</section>\n");
    o
}

pub fn render(audit: &Audit) -> String {
    let mut o = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    o.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    o.push_str("<title>locklint audit</title><style>");
    o.push_str(STYLE);
    o.push_str("</style></head><body>\n<h1>Lock audit</h1>\n");
    o.push_str(&format!(
        "<p id=\"summary\">{}</p>\n",
        esc(&summary_line(audit))
    ));
    let max = Verdict::ALL
        .iter()
        .map(|v| audit.locks.iter().filter(|l| l.verdict == *v).count())
        .max()
        .unwrap_or(0)
        .max(1);
    o.push_str("<div class=\"bars\" id=\"by-verdict\">");
    for v in Verdict::ALL {
        let n = audit.locks.iter().filter(|l| l.verdict == v).count();
        o.push_str(&format!(
            "<div class=\"bar\" data-verdict=\"{id}\"><span class=\"label\">{label}</span><span class=\"track\"><span class=\"fill {id}\" style=\"display:block;width:{w}%\"></span></span><span class=\"n\">{n}</span></div>",
            id = v.id(),
            label = esc(v.label()),
            w = n * 100 / max
        ));
    }
    o.push_str("</div>\n");
    if !audit.locks.is_empty() {
        o.push_str("<div class=\"scroll\"><table id=\"locks\"><thead><tr>");
        for h in HEADERS {
            o.push_str(&format!("<th>{}</th>", esc(&h.to_lowercase())));
        }
        o.push_str("</tr></thead><tbody>\n");
        for (i, l) in audit.locks.iter().enumerate() {
            let c = cells(l);
            o.push_str(&format!("<tr data-lock=\"{}\">", esc(&l.name)));
            for (j, cell) in c.iter().enumerate() {
                match j {
                    0 => o.push_str(&format!(
                        "<td><a href=\"#lock-{i}\"><code>{}</code></a></td>",
                        esc(cell)
                    )),
                    9 => o.push_str(&format!(
                        "<td data-sort=\"{}\"><span class=\"v {}\">{}</span></td>",
                        l.verdict as u8,
                        l.verdict.id(),
                        esc(cell)
                    )),
                    _ => o.push_str(&format!("<td>{}</td>", esc(cell))),
                }
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</tbody></table></div>\n");
    }
    for (i, l) in audit.locks.iter().enumerate() {
        o.push_str(&detail(i, l));
    }
    o.push_str("<script>");
    o.push_str(SCRIPT);
    o.push_str("</script></body></html>\n");
    o
}
