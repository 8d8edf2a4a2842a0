//! Running one source text through the engine as the CLI does: `check` on an overlay, every
//! output format, and `--fix --unsafe-fixes` planned in memory; then checking what came out.
//! The input's time is the analysis and its slowest output (`exec::not_one_command`).

use locklint::engine::{self, Options};
use locklint::fix::{self, Level};
use locklint::output::{self, human, Format};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A directory for the files inputs are analysed as (removed at exit by the OS temp cleaner
/// only if the process is killed; normally kept for the process's life).
pub fn scratch_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a temporary directory"))
        .path()
}

/// A fresh empty file named `input.<ext>` in a directory of its own.
pub fn fresh_file(ext: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = scratch_dir().join(N.fetch_add(1, Ordering::Relaxed).to_string());
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let path = dir.join(format!("input.{ext}"));
    std::fs::write(&path, "").expect("a scratch file");
    path
}

/// Analyse `text` as a file `input.<ext>`, render every format, plan unsafe fixes, and panic
/// on anything wrong: a finding outside the text or inside a character, or fixes that do not
/// converge.
pub fn check_text(ext: &str, text: &str) {
    let path = fresh_file(ext);
    let overlay = Arc::new(HashMap::from([(path.clone(), text.to_string())]));
    // every input is parsed (a file the prefilter would leave out could not reach the parser)
    let opts = Options {
        paths: vec![path.clone()],
        overlay: Some(overlay),
        parse_all: true,
        ..Default::default()
    };
    let report = engine::run(&opts);
    check_report(&report, &path, text);
    // each format is one `check --format`, the fix plan one `check --fix`: only the slowest
    // counts as the input's time
    let mut outputs = render_all(&report);
    let fixing = Instant::now();
    let plan = fix::plan(report, Level::Unsafe, &|overlay| {
        engine::run(&Options {
            overlay: Some(overlay),
            ..opts.clone()
        })
    });
    assert!(!plan.unconverged, "fixes did not converge");
    let _ = fix::unified_diff(&plan.changes);
    outputs.push(fixing.elapsed());
    let slowest = outputs.iter().max().copied().unwrap_or_default();
    crate::exec::not_one_command(outputs.iter().sum::<Duration>().saturating_sub(slowest));
    if let Some(dir) = path.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Every finding points inside the analysed text, on character boundaries.
pub fn check_report(report: &engine::Report, path: &Path, text: &str) {
    for d in &report.findings {
        assert!(
            !d.message.starts_with("locklint could not analyse"),
            "an isolated panic: {}",
            d.message
        );
        let mut spans = vec![(&d.primary, "primary")];
        spans.extend(d.related.iter().map(|r| (&r.location, "related")));
        for (loc, what) in spans {
            if loc.file.path != path {
                continue;
            }
            let s = loc.span;
            assert!(
                s.start <= s.end
                    && s.end <= text.len()
                    && text.is_char_boundary(s.start)
                    && text.is_char_boundary(s.end),
                "{} finding's {what} span {}..{} is not inside the text ({} bytes)",
                d.rule,
                s.start,
                s.end,
                text.len()
            );
        }
        if let Some(f) = &d.fix {
            for e in &f.edits {
                if e.location.file.path == path {
                    let s = e.location.span;
                    assert!(
                        s.start <= s.end
                            && s.end <= text.len()
                            && text.is_char_boundary(s.start)
                            && text.is_char_boundary(s.end),
                        "{} fix edit {}..{} is not inside the text",
                        d.rule,
                        s.start,
                        s.end
                    );
                }
            }
        }
    }
}

/// Render `report` in every format, as the command line writes it; how long each took.
fn render_all(report: &engine::Report) -> Vec<Duration> {
    let style = human::Style {
        color: false,
        width: 100,
    };
    let mut took = Vec::new();
    for format in [
        Format::Human,
        Format::Json,
        Format::JsonLines,
        Format::Sarif,
        Format::Github,
        Format::Gitlab,
    ] {
        // written as the command line writes it: to a stream, not collected
        let started = Instant::now();
        let _ = output::write(report, format, style, false, &mut std::io::sink());
        took.push(started.elapsed());
    }
    took
}
