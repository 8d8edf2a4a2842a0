//! Fixture tests: every rule has positive (`bad_*.rs`) and negative (`good_*.rs`) examples in
//! `fixtures/<rule>/`; bad files must trigger the rule, good files must be clean, and the
//! human and JSON output of each file is kept as a snapshot in `fixtures/<rule>/expected/`.

use locklint::engine::{self, Options};
use locklint::output::{human, json};
use std::path::{Path, PathBuf};

fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(prefix) && !n.ends_with(".fixed"))
        })
        .collect();
    v.sort();
    v
}

fn relative(p: &Path) -> PathBuf {
    p.strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| p.to_path_buf())
}

fn analyse(file: &Path) -> engine::Report {
    engine::run(&Options {
        paths: vec![relative(file)],
        ..Default::default()
    })
}

fn snapshot(rule: &str, file: &Path, report: &engine::Report) {
    let name = file.file_stem().unwrap().to_string_lossy().to_string();
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(fixtures_root().join(rule).join("expected"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.bind(|| {
        let style = human::Style {
            color: false,
            width: 100,
        };
        insta::assert_snapshot!(format!("{name}.human"), human::render(report, style, false));
        insta::assert_snapshot!(format!("{name}.json"), json::render(report));
    });
}

#[test]
fn every_rule_has_fixtures_that_behave() {
    // run from the package root so paths in reports are `fixtures/...`
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let mut failures = Vec::new();
    for info in locklint::rules::infos() {
        let dir = fixtures_root().join(info.name);
        let bad = files(&dir, "bad_");
        let good = files(&dir, "good_");
        if bad.len() < 3 || good.len() < 3 {
            failures.push(format!(
                "{}: needs at least 3 bad and 3 good fixtures, has {} and {}",
                info.name,
                bad.len(),
                good.len()
            ));
        }
        for f in &bad {
            let report = analyse(f);
            if !report.findings.iter().any(|d| d.rule == info.name) {
                failures.push(format!(
                    "{}: no `{}` finding",
                    relative(f).display(),
                    info.name
                ));
            }
            snapshot(info.name, f, &report);
        }
        for f in &good {
            let report = analyse(f);
            if !report.findings.is_empty() {
                let rules: Vec<_> = report.findings.iter().map(|d| d.rule).collect();
                failures.push(format!(
                    "{}: expected no findings, got {:?}",
                    relative(f).display(),
                    rules
                ));
            }
            snapshot(info.name, f, &report);
        }
    }
    assert!(
        failures.is_empty(),
        "fixture failures:\n{}",
        failures.join("\n")
    );
}
