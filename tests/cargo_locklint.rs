//! `cargo locklint` on real Cargo workspaces: package selection as cargo does it.

use std::path::Path;
use std::process::{Command, Output};

#[path = "support/bin.rs"]
mod bin;
use bin::cargo_locklint;

const BAD: &str = r#"use redis::Commands;
pub fn acquire(con: &mut redis::Connection) -> redis::RedisResult<bool> {
    let ok: bool = con.set_nx("lock:nightly", "1")?;
    Ok(ok)
}
"#;

const CLEAN: &str = "pub fn add(a: u32, b: u32) -> u32 { a + b }\n";

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn package(root: &Path, dir: &str, name: &str, lib: &str) {
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    };
    write(
        root,
        &format!("{prefix}Cargo.toml"),
        &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n"),
    );
    write(root, &format!("{prefix}src/lib.rs"), lib);
}

/// A virtual workspace: `clean` and `locky` (with a lock defect).
fn virtual_workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "Cargo.toml",
        "[workspace]\nmembers = [\"crates/*\"]\nresolver = \"2\"\n",
    );
    package(dir.path(), "crates/clean", "clean", CLEAN);
    package(dir.path(), "crates/locky", "locky", BAD);
    dir
}

/// Paths with findings, from JSON output.
fn finding_paths(o: &Output) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    let mut p: Vec<String> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    p.dedup();
    p
}

fn files(o: &Output) -> u64 {
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["summary"]["files"].as_u64().unwrap()
}

#[test]
fn virtual_manifest_root_analyses_every_member() {
    let ws = virtual_workspace();
    let o = cargo_locklint(ws.path(), &["--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(finding_paths(&o), vec!["crates/locky/src/lib.rs"]);
    assert_eq!(files(&o), 2);
}

#[test]
fn inside_a_member_only_that_package_is_analysed() {
    let ws = virtual_workspace();
    let o = cargo_locklint(&ws.path().join("crates/clean/src"), &["--format", "json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(files(&o), 1);
    let o = cargo_locklint(
        &ws.path().join("crates/clean"),
        &["--workspace", "--format", "json"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(files(&o), 2);
}

#[test]
fn package_and_manifest_path_select_packages() {
    let ws = virtual_workspace();
    let o = cargo_locklint(ws.path(), &["-p", "clean", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0));
    let o = cargo_locklint(ws.path(), &["-p", "locky", "-q"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("setnx-without-expiry"));
    let elsewhere = tempfile::tempdir().unwrap();
    let manifest = ws.path().join("crates/locky/Cargo.toml");
    let o = cargo_locklint(
        elsewhere.path(),
        &[
            "--manifest-path",
            manifest.to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(files(&o), 1);
    let o = cargo_locklint(ws.path(), &["-p", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("package `nope` is not a member"));
}

#[test]
fn a_root_package_does_not_swallow_nested_members() {
    let dir = tempfile::tempdir().unwrap();
    package(dir.path(), "", "root", CLEAN);
    let manifest = std::fs::read_to_string(dir.path().join("Cargo.toml")).unwrap();
    write(
        dir.path(),
        "Cargo.toml",
        &format!("{manifest}\n[workspace]\nmembers = [\"inner\"]\n"),
    );
    package(dir.path(), "inner", "inner", BAD);
    // at the root of a non-virtual workspace cargo selects the root package only
    let o = cargo_locklint(dir.path(), &["--format", "json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(files(&o), 1);
    let o = cargo_locklint(dir.path(), &["--workspace", "--format", "json"]);
    assert_eq!(finding_paths(&o), vec!["inner/src/lib.rs"]);
    assert_eq!(files(&o), 2, "each file once");
}

#[test]
fn outside_any_workspace_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let o = cargo_locklint(dir.path(), &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("error: could not find `Cargo.toml`"),
        "{err}"
    );
}

#[test]
fn rules_and_explain_work_through_cargo() {
    let dir = tempfile::tempdir().unwrap();
    let o = cargo_locklint(dir.path(), &["rules"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("unconditional-release"));
    let o = cargo_locklint(dir.path(), &["explain", "separate-expire"]);
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("# separate-expire"));
}

#[test]
fn audit_selects_packages_like_check() {
    let ws = virtual_workspace();
    let locks = |args: &[&str]| {
        let o = cargo_locklint(ws.path(), args);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["locks"].as_array().unwrap().len()
    };
    assert_eq!(locks(&["audit", "-p", "locky", "--format", "json"]), 1);
    assert_eq!(locks(&["audit", "-p", "clean", "--format", "json"]), 0);
    assert_eq!(locks(&["audit", "--workspace", "--format", "json"]), 1);
}

#[test]
fn message_format_json_is_cargos_message_stream() {
    use cargo_metadata::diagnostic::{Applicability, DiagnosticLevel};
    use cargo_metadata::Message;
    let ws = virtual_workspace();
    let o = cargo_locklint(ws.path(), &["--message-format=json"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let messages: Vec<Message> = Message::parse_stream(&o.stdout[..])
        .collect::<Result<_, _>>()
        .unwrap();
    let diagnostics: Vec<_> = messages
        .iter()
        .filter_map(|m| match m {
            Message::CompilerMessage(c) => Some(c),
            _ => None,
        })
        .collect();
    assert!(matches!(messages.last(), Some(Message::BuildFinished(b)) if !b.success));
    let d = diagnostics
        .iter()
        .find(|c| {
            c.message
                .code
                .as_ref()
                .is_some_and(|c| c.code == "locklint::setnx-without-expiry")
        })
        .expect("the setnx finding");
    assert!(d.package_id.repr.contains("locky"));
    assert_eq!(d.message.level, DiagnosticLevel::Error);
    let primary = d.message.spans.iter().find(|s| s.is_primary).unwrap();
    assert!(primary.file_name.ends_with("crates/locky/src/lib.rs"));
    assert_eq!((primary.line_start, primary.column_start), (3, 24));
    assert_eq!(primary.text[0].highlight_start, 24);
    // the help child carries the fix as a suggestion rust-analyzer can apply
    let help = d
        .message
        .children
        .iter()
        .find(|c| c.level == DiagnosticLevel::Help)
        .unwrap();
    let suggestion = help
        .spans
        .iter()
        .find(|s| s.suggested_replacement.is_some())
        .expect("a suggestion");
    assert_eq!(
        suggestion.suggestion_applicability,
        Some(Applicability::MaybeIncorrect)
    );
    assert!(d
        .message
        .children
        .iter()
        .any(|c| c.level == DiagnosticLevel::Note && c.message.contains("locklint explain")));
    assert!(d
        .message
        .rendered
        .as_ref()
        .unwrap()
        .contains("locklint::setnx-without-expiry"));
}

#[test]
fn message_format_json_can_pass_cargo_check_through() {
    let ws = virtual_workspace();
    let o = cargo_locklint(
        ws.path(),
        &["--message-format=json", "--also", "check", "-p", "clean"],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let finished = text
        .lines()
        .filter(|l| l.contains("\"reason\":\"build-finished\""))
        .count();
    assert_eq!(finished, 1, "{text}");
    assert!(
        text.contains("\"reason\":\"compiler-artifact\""),
        "cargo check's messages come through: {text}"
    );
    assert_eq!(o.status.code(), Some(0));
}

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}");
}

fn both(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn exit_codes_follow_the_findings_left_after_baseline_and_changed_since() {
    let ws = virtual_workspace();
    git(ws.path(), &["init", "-q"]);
    git(ws.path(), &["add", "."]);
    git(ws.path(), &["commit", "-q", "-m", "init"]);
    for sub in [&[][..], &["check"][..]] {
        let with = |args: &[&'static str]| [sub, args].concat();
        let o = cargo_locklint(ws.path(), &with(&["-p", "clean"]));
        assert_eq!(o.status.code(), Some(0), "{}", both(&o));
        let o = cargo_locklint(ws.path(), &with(&[]));
        assert_eq!(o.status.code(), Some(1), "{}", both(&o));
        let o = cargo_locklint(ws.path(), &with(&["--changed-since", "HEAD"]));
        assert_eq!(o.status.code(), Some(0), "{}", both(&o));
        let o = cargo_locklint(ws.path(), &with(&["--write-baseline", "bl.json"]));
        assert_eq!(o.status.code(), Some(0), "{}", both(&o));
        let o = cargo_locklint(ws.path(), &with(&["--baseline", "bl.json"]));
        assert_eq!(o.status.code(), Some(0), "{}", both(&o));
        let o = cargo_locklint(
            ws.path(),
            &with(&["--baseline", "bl.json", "--message-format=json"]),
        );
        assert_eq!(o.status.code(), Some(0), "{}", both(&o));
    }
    // a new defect fails the run through both outputs
    write(ws.path(), "crates/clean/src/lock.rs", BAD);
    let o = cargo_locklint(ws.path(), &["--baseline", "bl.json"]);
    assert_eq!(o.status.code(), Some(1), "{}", both(&o));
    let o = cargo_locklint(ws.path(), &["--changed-since", "HEAD"]);
    assert_eq!(o.status.code(), Some(1), "{}", both(&o));
    let o = cargo_locklint(
        ws.path(),
        &["--baseline", "bl.json", "--message-format=json"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", both(&o));
}

#[test]
fn configuration_and_usage_errors_exit_2() {
    let ws = virtual_workspace();
    let o = cargo_locklint(ws.path(), &["--message-format=json", "--format", "sarif"]);
    assert_eq!(o.status.code(), Some(2), "{}", both(&o));
    assert!(
        both(&o).contains(
            "'--message-format <MESSAGE_FORMAT>' cannot be used with '--format <FORMAT>'"
        ),
        "{}",
        both(&o)
    );
    let o = cargo_locklint(ws.path(), &["--select", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    let o = cargo_locklint(ws.path(), &["--baseline", "missing.json"]);
    assert_eq!(o.status.code(), Some(2));
    // an unknown key in the locklint table of a selected package
    let manifest = ws.path().join("crates/locky/Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        format!("{text}\n[package.metadata.locklint]\nfail_on = \"error\"\n"),
    )
    .unwrap();
    let o = cargo_locklint(ws.path(), &["-p", "locky"]);
    assert_eq!(o.status.code(), Some(2), "{}", both(&o));
    assert!(both(&o).contains("did you mean `fail-on`?"), "{}", both(&o));
    // ... governs nothing when that package is not selected
    let o = cargo_locklint(ws.path(), &["-p", "clean"]);
    assert_eq!(o.status.code(), Some(0), "{}", both(&o));
    let o = cargo_locklint(ws.path(), &["audit", "-p", "locky"]);
    assert_eq!(o.status.code(), Some(2), "{}", both(&o));
}

#[test]
fn help_lists_every_subcommand() {
    use clap::CommandFactory;
    let dir = tempfile::tempdir().unwrap();
    let o = cargo_locklint(dir.path(), &["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = String::from_utf8_lossy(&o.stdout);
    let commands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .unwrap_or_else(|| panic!("no command list: {help}"))
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let cli = locklint::cli::Cli::command();
    for sub in cli.get_subcommands() {
        assert!(
            commands.contains(&sub.get_name()),
            "`{}` missing from `cargo locklint --help`:\n{help}",
            sub.get_name()
        );
    }
    // each runs
    let o = cargo_locklint(dir.path(), &["config", "--show"]);
    assert_eq!(o.status.code(), Some(0), "{}", both(&o));
}

#[test]
fn a_broken_manifest_inside_a_package_does_not_stop_either_output() {
    let ws = virtual_workspace();
    write(
        ws.path(),
        "crates/clean/tests/fixtures/invalid/Cargo.toml",
        "[package]\nname = \"x\"\n[invalid]\nkey = invalid-value\n",
    );
    write(
        ws.path(),
        "crates/clean/tests/fixtures/invalid/src/lib.rs",
        BAD,
    );
    let note = "note: crates/clean/tests/fixtures/invalid/Cargo.toml: not valid TOML";
    let o = cargo_locklint(ws.path(), &["--format", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", both(&o));
    assert_eq!(
        finding_paths(&o),
        vec![
            "crates/clean/tests/fixtures/invalid/src/lib.rs",
            "crates/locky/src/lib.rs"
        ]
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(note),
        "{}",
        both(&o)
    );
    let o = cargo_locklint(ws.path(), &["--message-format=json"]);
    assert_eq!(o.status.code(), Some(1), "{}", both(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(note),
        "{}",
        both(&o)
    );
    let messages = cargo_metadata::Message::parse_stream(&o.stdout[..])
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    assert!(messages.len() >= 3);
}
