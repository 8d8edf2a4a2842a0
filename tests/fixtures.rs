//! Fixture tests: every rule has positive (`bad_*`) and negative (`good_*`) examples in
//! `fixtures/<rule>/`; bad examples must trigger the rule, good ones must be clean, and the
//! human and JSON output of each is kept as a snapshot in `fixtures/<rule>/expected/`.
//!
//! An example is a single file (`bad_x.rs`, `good_y.sql`, ...) or a directory of several files
//! (`bad_x/`, analysed as one project: a helper, a const or a schema in one file, its use in
//! another). Each example is a test of its own (`cargo test --test fixtures -- <rule>/<name>`),
//! so one failing snapshot names its example and the others still run.

use libtest_mimic::{Arguments, Failed, Trial};
use locklint::engine::{self, Options};
use locklint::output::{human, json};
use std::path::{Path, PathBuf};

const MIN_EACH: usize = 3;

fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// The examples of one kind (`bad_` or `good_`) in a rule's directory, files and directories.
fn examples(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
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

fn snapshot_name(example: &Path) -> String {
    let name = example.file_name().unwrap().to_string_lossy();
    if example.is_dir() {
        name.to_string()
    } else {
        example.file_stem().unwrap().to_string_lossy().to_string()
    }
}

fn snapshot(rule: &str, example: &Path, report: &engine::Report) {
    let name = snapshot_name(example);
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

fn check_example(rule: &'static str, example: &Path, bad: bool) -> Result<(), Failed> {
    // the example is its own project: facts come from its files only, never from the rest of
    // the repository around it
    let report = engine::run(&Options {
        paths: vec![relative(example)],
        project_root: example.is_dir().then(|| relative(example)),
        ..Default::default()
    });
    let shown = relative(example).display().to_string();
    if report.files == 0 {
        return Err(format!("{shown}: nothing was analysed").into());
    }
    if bad && !report.findings.iter().any(|d| d.rule == rule) {
        return Err(format!("{shown}: no `{rule}` finding").into());
    }
    if !bad && !report.findings.is_empty() {
        let rules: Vec<_> = report.findings.iter().map(|d| d.rule).collect();
        return Err(format!("{shown}: expected no findings, got {rules:?}").into());
    }
    snapshot(rule, example, &report);
    Ok(())
}

fn trials() -> Vec<Trial> {
    let mut trials = Vec::new();
    for info in locklint::rules::infos() {
        let rule = info.name;
        let dir = fixtures_root().join(rule);
        let bad = examples(&dir, "bad_");
        let good = examples(&dir, "good_");
        let (nbad, ngood) = (bad.len(), good.len());
        trials.push(Trial::test(format!("{rule}/enough-examples"), move || {
            if nbad < MIN_EACH || ngood < MIN_EACH {
                return Err(format!(
                    "{rule}: needs at least {MIN_EACH} bad and {MIN_EACH} good examples, has \
                     {nbad} and {ngood}"
                )
                .into());
            }
            Ok(())
        }));
        for (examples, is_bad) in [(bad, true), (good, false)] {
            for example in examples {
                let name = format!("{rule}/{}", example.file_name().unwrap().to_string_lossy());
                trials.push(Trial::test(name, move || {
                    check_example(rule, &example, is_bad)
                }));
            }
        }
    }
    trials
}

fn main() {
    // run from the package root so paths in reports are `fixtures/...`
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let args = Arguments::from_args();
    libtest_mimic::run(&args, trials()).exit();
}
