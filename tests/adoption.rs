//! Adopting locklint on an existing codebase: baselines, `--changed-since`, `--add-suppressions`.

use std::path::Path;
use std::process::{Command, Output};

#[path = "support/bin.rs"]
mod bin;
use bin::locklint;

fn rules(o: &Output) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{}@{}",
                f["rule"].as_str().unwrap(),
                f["path"].as_str().unwrap()
            )
        })
        .collect()
}

const OLD: &str = "use redis::AsyncCommands;\n\npub async fn release(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {\n    let _: () = con.del(\"lock:report\").await?;\n    Ok(())\n}\n";
const NEW: &str = "\npub async fn renew(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {\n    let _: () = con.pexpire(\"lock:report\", 30_000).await?;\n    Ok(())\n}\n";

#[test]
fn baseline_reports_only_new_findings_across_edits_and_renames() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("jobs.rs"), OLD).unwrap();
    let o = locklint(dir.path(), &["check", "--write-baseline", "baseline.json"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("recorded 1 finding in the baseline"));

    // lines inserted above, and a new defect added
    std::fs::write(
        dir.path().join("jobs.rs"),
        format!("// a header comment\n\n{OLD}{NEW}"),
    )
    .unwrap();
    let o = locklint(
        dir.path(),
        &["check", "--baseline", "baseline.json", "--format", "json"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(rules(&o), vec!["unconditional-renew@jobs.rs"]);

    // the file renamed: the old finding stays in the baseline
    std::fs::rename(dir.path().join("jobs.rs"), dir.path().join("locks.rs")).unwrap();
    let o = locklint(
        dir.path(),
        &["check", "--baseline", "baseline.json", "--format", "json"],
    );
    assert_eq!(rules(&o), vec!["unconditional-renew@locks.rs"]);

    // the old defect fixed: it drops out and the run says so
    std::fs::write(dir.path().join("locks.rs"), "pub fn nothing() {}\n").unwrap();
    let o = locklint(dir.path(), &["check", "--baseline", "baseline.json"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("1 finding of the baseline is gone"));

    let o = locklint(dir.path(), &["check", "--baseline", "missing.json"]);
    assert_eq!(o.status.code(), Some(2));
}

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn changed_since_reports_only_changed_files() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    std::fs::write(dir.path().join("old.rs"), OLD).unwrap();
    git(dir.path(), &["add", "."]);
    git(dir.path(), &["commit", "-q", "-m", "old"]);
    std::fs::write(
        dir.path().join("new.rs"),
        format!("use redis::AsyncCommands;\n{NEW}"),
    )
    .unwrap();
    let o = locklint(
        dir.path(),
        &["check", "--changed-since", "HEAD", "--format", "json"],
    );
    assert_eq!(rules(&o), vec!["unconditional-renew@new.rs"]);
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    assert_eq!(rules(&o).len(), 2);
    let o = locklint(dir.path(), &["check", "--changed-since", "no-such-ref"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn add_suppressions_silences_every_current_finding() {
    let dir = tempfile::tempdir().unwrap();
    let sql_in_string = "pub async fn release(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {\n    let _: () = redis::cmd(\"DEL\")\n        .arg(\"lock:report\")\n        .query_async(con)\n        .await?;\n    Ok(())\n}\n";
    std::fs::write(dir.path().join("a.rs"), format!("{OLD}{NEW}")).unwrap();
    std::fs::write(dir.path().join("b.rs"), sql_in_string).unwrap();
    let o = locklint(
        dir.path(),
        &["check", "--add-suppressions", "legacy, tracked in #12"],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("added 3 suppressions in 2 files"));
    let a = std::fs::read_to_string(dir.path().join("a.rs")).unwrap();
    assert!(a.contains("    // locklint: allow(unconditional-release) -- legacy, tracked in #12\n    let _: () = con.del"));
    let o = locklint(dir.path(), &["check"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // a second run has nothing to add
    let o = locklint(dir.path(), &["check", "--add-suppressions", "again"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("added 0 suppressions"));
}

const CLEAN: &str = "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n";

fn out(o: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn baselined_findings_that_are_still_there_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("jobs.rs"), OLD).unwrap();
    std::fs::write(dir.path().join("cache.rs"), CLEAN).unwrap();
    let o = locklint(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let o = locklint(dir.path(), &["check", "--write-baseline", "bl.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));

    // the defect is still there, and recorded: nothing fails
    let o = locklint(dir.path(), &["check", "--baseline", "bl.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("0 findings in 2 files (1 finding in the baseline not shown)"),
        "{stdout}"
    );
    for format in ["json", "sarif", "github", "gitlab", "json-lines"] {
        let o = locklint(
            dir.path(),
            &["check", "--baseline", "bl.json", "--format", format],
        );
        assert_eq!(o.status.code(), Some(0), "{format}: {}", out(&o));
    }
    let o = locklint(
        dir.path(),
        &["check", "--baseline", "bl.json", "--format", "json"],
    );
    assert!(rules(&o).is_empty());

    // a new defect next to the recorded one fails, and only it is reported
    std::fs::write(
        dir.path().join("renew.rs"),
        format!("use redis::AsyncCommands;\n{NEW}"),
    )
    .unwrap();
    let o = locklint(
        dir.path(),
        &["check", "--baseline", "bl.json", "--format", "json"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert_eq!(rules(&o), vec!["unconditional-renew@renew.rs"]);

    // `--fix` with a baseline: the exit code follows what remains outside the baseline
    let o = locklint(dir.path(), &["check", "--baseline", "bl.json", "--fix"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
}

#[test]
fn changed_since_exits_on_the_changed_files_only() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    std::fs::write(dir.path().join("old.rs"), OLD).unwrap();
    git(dir.path(), &["add", "."]);
    git(dir.path(), &["commit", "-q", "-m", "old"]);

    // nothing changed: the old defect is not reported and does not fail the run
    let o = locklint(dir.path(), &["check", "--changed-since", "HEAD"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("0 findings in 1 file"),
        "{}",
        out(&o)
    );

    // a changed clean file (untracked, then committed)
    std::fs::write(dir.path().join("cache.rs"), CLEAN).unwrap();
    let o = locklint(dir.path(), &["check", "--changed-since", "HEAD"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    git(dir.path(), &["add", "."]);
    git(dir.path(), &["commit", "-q", "-m", "cache"]);
    let o = locklint(dir.path(), &["check", "--changed-since", "HEAD~1"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));

    // a changed file with a defect
    std::fs::write(dir.path().join("old.rs"), format!("{OLD}// touched\n")).unwrap();
    let o = locklint(
        dir.path(),
        &["check", "--changed-since", "HEAD", "--format", "json"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert_eq!(rules(&o), vec!["unconditional-release@old.rs"]);

    // together with a baseline that records it: nothing fails
    let o = locklint(dir.path(), &["check", "--write-baseline", "bl.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let o = locklint(
        dir.path(),
        &["check", "--changed-since", "HEAD", "--baseline", "bl.json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
}

#[test]
fn add_suppressions_counts_with_plurals() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.rs"), OLD).unwrap();
    let o = locklint(dir.path(), &["check", "--add-suppressions", "legacy"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("added 1 suppression in 1 file\n"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}
