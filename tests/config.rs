//! Configuration files: discovery, nearest wins, `extend`, Cargo metadata, `--config`,
//! `--isolated`, every key that changes results, and errors with file, line and suggestion.

use std::path::Path;
use std::process::Output;

#[path = "support/bin.rs"]
mod bin;
use bin::locklint;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn found(o: &Output) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {} {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    let mut out: Vec<String> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{}:{}:{}",
                f["path"].as_str().unwrap(),
                f["rule"].as_str().unwrap(),
                f["severity"].as_str().unwrap()
            )
        })
        .collect();
    out.sort();
    out
}

/// SETNX with a constant value and no expiry, then a plain DEL.
const LOCKY: &str = "use redis::AsyncCommands;\npub async fn job(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {\n    let ok: bool = con.set_nx(\"lock:job\", \"1\").await?;\n    if ok {\n        let _: () = con.del(\"lock:job\").await?;\n    }\n    Ok(())\n}\n";

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.rs", LOCKY);
    write(dir.path(), "sub/b.rs", LOCKY);
    dir
}

#[test]
fn the_nearest_configuration_applies() {
    let dir = tree();
    write(
        dir.path(),
        "locklint.toml",
        "ignore = [\"constant-lock-value\"]\n",
    );
    write(
        dir.path(),
        "sub/.locklint.toml",
        "select = [\"unconditional-release\"]\n",
    );
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    assert_eq!(
        found(&o),
        vec![
            "a.rs:setnx-without-expiry:error",
            "a.rs:unconditional-release:error",
            "sub/b.rs:unconditional-release:error"
        ]
    );
    // --isolated ignores every file; --config uses one for everything
    let o = locklint(dir.path(), &["check", "--format", "json", "--isolated"]);
    assert_eq!(found(&o).len(), 6);
    let o = locklint(
        dir.path(),
        &[
            "check",
            "--format",
            "json",
            "--config",
            "sub/.locklint.toml",
        ],
    );
    assert_eq!(
        found(&o),
        vec![
            "a.rs:unconditional-release:error",
            "sub/b.rs:unconditional-release:error"
        ]
    );
}

#[test]
fn extend_inherits_and_extend_select_adds() {
    let dir = tree();
    write(
        dir.path(),
        "base.toml",
        "select = [\"constant-lock-value\"]\n[severity]\nconstant-lock-value = \"error\"\n",
    );
    write(
        dir.path(),
        "sub/locklint.toml",
        "extend = \"../base.toml\"\nextend-select = [\"unconditional-release\"]\n",
    );
    let o = locklint(&dir.path().join("sub"), &["check", "--format", "json"]);
    assert_eq!(
        found(&o),
        vec![
            "b.rs:constant-lock-value:error",
            "b.rs:unconditional-release:error"
        ]
    );
}

#[test]
fn cargo_metadata_tables_are_read() {
    let dir = tree();
    write(
        dir.path(),
        "Cargo.toml",
        "[package]\nname = \"x\"\nversion = \"0.1.0\"\n\n[package.metadata.locklint]\nselect = [\"setnx-without-expiry\"]\n",
    );
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    assert_eq!(
        found(&o),
        vec![
            "a.rs:setnx-without-expiry:error",
            "sub/b.rs:setnx-without-expiry:error"
        ]
    );
}

#[test]
fn exclude_per_path_ignores_severity_and_fail_on() {
    let dir = tree();
    write(dir.path(), "gen/c.rs", LOCKY);
    write(
        dir.path(),
        "locklint.toml",
        "exclude = [\"gen\"]\nfail-on = \"error\"\n\n[per-path-ignores]\n\"sub/**\" = [\"unconditional-release\", \"setnx-without-expiry\"]\n\n[severity]\nunconditional-release = \"warning\"\nsetnx-without-expiry = \"warning\"\n",
    );
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    assert_eq!(
        found(&o),
        vec![
            "a.rs:constant-lock-value:warning",
            "a.rs:setnx-without-expiry:warning",
            "a.rs:unconditional-release:warning",
            "sub/b.rs:constant-lock-value:warning"
        ]
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "warnings pass with fail-on = \"error\""
    );
}

#[test]
fn lock_key_patterns_extend_what_counts_as_a_lock() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.rs", "use redis::AsyncCommands;\npub async fn f(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {\n    let _: () = con.del(\"job:guard:7\").await?;\n    Ok(())\n}\n");
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    assert!(found(&o).is_empty());
    write(
        dir.path(),
        "locklint.toml",
        "lock-key-patterns = [\"guard\"]\n",
    );
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    assert_eq!(found(&o), vec!["a.rs:unconditional-release:error"]);
}

/// A script invoked on a lock key and its fence without a common hash tag (a
/// `cross-slot-lock-keys` finding and nothing else).
const CROSS_SLOT: &str = "pub async fn f(con: &mut redis::aio::MultiplexedConnection, id: u64) -> redis::RedisResult<i64> {\n    redis::Script::new(\"if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', 30000) then return redis.call('incr', KEYS[2]) end return 0\")\n        .key(format!(\"lock:order:{id}\"))\n        .key(format!(\"lock:fence:{id}\"))\n        .arg(\"t\")\n        .invoke_async(con)\n        .await\n}\n";

#[test]
fn redis_cluster_false_turns_the_cross_slot_rule_off_where_it_governs() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.rs", CROSS_SLOT);
    write(dir.path(), "standalone/b.rs", CROSS_SLOT);
    let both = vec![
        "a.rs:cross-slot-lock-keys:warning",
        "standalone/b.rs:cross-slot-lock-keys:warning",
    ];
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    assert_eq!(found(&o), both, "on by default");
    write(dir.path(), "locklint.toml", "redis-cluster = true\n");
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    assert_eq!(found(&o), both, "redis-cluster = true keeps it on");
    write(
        dir.path(),
        "standalone/locklint.toml",
        "redis-cluster = false\n",
    );
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    assert_eq!(found(&o), vec!["a.rs:cross-slot-lock-keys:warning"]);
    let o = locklint(dir.path(), &["config", "--show", "standalone/b.rs"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("redis-cluster = false"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // Cargo metadata, and a value that is not a boolean
    write(
        dir.path(),
        "Cargo.toml",
        "[package]\nname = \"x\"\nversion = \"0.1.0\"\n\n[package.metadata.locklint]\nredis-cluster = false\n",
    );
    std::fs::remove_file(dir.path().join("locklint.toml")).unwrap();
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    assert!(found(&o).is_empty(), "{:?}", found(&o));
    write(dir.path(), "locklint.toml", "redis-cluster = \"no\"\n");
    let o = locklint(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("redis-cluster"), "{}", stderr(&o));
}

#[test]
fn errors_name_the_file_line_and_a_suggestion() {
    let dir = tree();
    write(
        dir.path(),
        "locklint.toml",
        "# settings\nselect = [\"separate-expire\"]\nignroe = [\"get-then-set\"]\n",
    );
    let o = locklint(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("locklint.toml"), "{err}");
    assert!(err.contains("unknown field `ignroe`"), "{err}");
    assert!(err.contains("did you mean `ignore`?"), "{err}");
    assert!(
        err.contains(":3:1]") || err.contains("3 │"),
        "points at line 3: {err}"
    );

    write(
        dir.path(),
        "locklint.toml",
        "select = [\"separate-expiry\"]\n",
    );
    let o = locklint(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("unknown rule `separate-expiry`")
            && err.contains("did you mean `separate-expire`?"),
        "{err}"
    );

    write(dir.path(), "locklint.toml", "fail-on = 3\n");
    let o = locklint(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("fail-on"));

    write(dir.path(), "locklint.toml", "default-ttl = \"soon\"\n");
    let o = locklint(dir.path(), &["check"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("default-ttl must be a duration"));

    // a broken configuration is an error even with nothing to analyse
    let empty = tempfile::tempdir().unwrap();
    write(empty.path(), "locklint.toml", "selct = []\n");
    let o = locklint(empty.path(), &["check"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("did you mean `select`?"));
}

#[test]
fn config_show_prints_the_effective_settings() {
    let dir = tree();
    write(dir.path(), "locklint.toml", "ignore = [\"constant-lock-value\"]\nredis-version = \"8.4\"\n[locks.\"lock:report:{}\"]\npurpose = \"efficiency\"\n");
    let o = locklint(dir.path(), &["config", "--show", "sub/b.rs"]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("locklint.toml"), "{out}");
    assert!(out.contains("ignore = [\"constant-lock-value\"]"), "{out}");
    assert!(out.contains("redis-version = \"8.4\""), "{out}");
    assert!(out.contains("purpose = \"efficiency\""), "{out}");
}

#[test]
fn fence_columns_lock_table_columns_and_efficiency_locks() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "schema.sql", "CREATE TABLE reports (id BIGINT PRIMARY KEY, body TEXT, epoch BIGINT NOT NULL DEFAULT 0);\nCREATE TABLE job_slots (name TEXT PRIMARY KEY, taken_by TEXT NOT NULL, valid_until TIMESTAMPTZ NOT NULL);\n");
    write(dir.path(), "queries.sql", "UPDATE reports SET body = 'x', epoch = 5 WHERE id = 1;\nDELETE FROM job_slots WHERE name = 'nightly';\n");
    write(
        dir.path(),
        "job.rs",
        "use redis::AsyncCommands;\nuse redis::{SetOptions, SetExpiry, ExistenceCheck};\npub async fn job(con: &mut redis::aio::MultiplexedConnection, pool: &sqlx::PgPool, token: &str) -> anyhow::Result<()> {\n    let opts = SetOptions::default().conditional_set(ExistenceCheck::NX).with_expiration(SetExpiry::PX(30_000));\n    let ok: bool = con.set_options(\"lock:report:7\", token, opts).await?;\n    if !ok { return Ok(()); }\n    sqlx::query(\"UPDATE report_state SET done = true WHERE id = 7\").execute(pool).await?;\n    Ok(())\n}\n",
    );
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    let before = found(&o);
    assert_eq!(
        before,
        vec!["job.rs:unfenced-write:warning"],
        "defaults know neither `epoch` nor `taken_by`"
    );
    write(
        dir.path(),
        "locklint.toml",
        "fence-columns = [\"epoch\"]\nlock-table = { owner-columns = [\"taken_by\"], expiry-columns = [\"valid_until\"] }\n\n[locks.\"lock:report:{id}\"]\npurpose = \"efficiency\"\n",
    );
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    assert_eq!(
        found(&o),
        vec![
            "queries.sql:lock-table-no-owner-check:error",
            "queries.sql:unfenced-write:error"
        ]
    );
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A package whose `Cargo.toml` is deliberately not a valid manifest, as test fixtures of
/// cargo-related tools hold.
const BROKEN_MANIFEST: &str = "[package\nname = \"broken\"\n";

#[test]
fn a_manifest_that_does_not_parse_contributes_nothing_and_gets_one_note() {
    let dir = tree();
    write(
        dir.path(),
        "locklint.toml",
        "ignore = [\"constant-lock-value\"]\n",
    );
    write(dir.path(), "tests/x/in/Cargo.toml", BROKEN_MANIFEST);
    write(dir.path(), "tests/x/in/src/lib.rs", LOCKY);
    write(dir.path(), "tests/x/in/src/more.rs", LOCKY);
    let o = locklint(dir.path(), &["check", ".", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // every file analysed, under the configuration above the broken manifest
    assert_eq!(
        found(&o),
        vec![
            "a.rs:setnx-without-expiry:error",
            "a.rs:unconditional-release:error",
            "sub/b.rs:setnx-without-expiry:error",
            "sub/b.rs:unconditional-release:error",
            "tests/x/in/src/lib.rs:setnx-without-expiry:error",
            "tests/x/in/src/lib.rs:unconditional-release:error",
            "tests/x/in/src/more.rs:setnx-without-expiry:error",
            "tests/x/in/src/more.rs:unconditional-release:error",
        ]
    );
    let err = stderr(&o);
    assert_eq!(
        err.lines()
            .filter(|l| l.starts_with("note: tests/x/in/Cargo.toml: not valid TOML at 1:"))
            .count(),
        1,
        "{err}"
    );
    assert!(!err.contains("error"), "{err}");
}

#[test]
fn excluded_and_ignored_directories_are_never_read_for_configuration() {
    let dir = tree();
    write(dir.path(), "locklint.toml", "exclude = [\"tests/x\"]\n");
    excluded_and_ignored_configuration_is_never_read(dir);
    // `dir/**` leaves the directory out as well
    let dir = tree();
    write(dir.path(), "locklint.toml", "exclude = [\"tests/x/**\"]\n");
    excluded_and_ignored_configuration_is_never_read(dir);
}

fn excluded_and_ignored_configuration_is_never_read(dir: tempfile::TempDir) {
    // a valid manifest with an unknown locklint key, and a broken one, both excluded
    write(
        dir.path(),
        "tests/x/a/Cargo.toml",
        "[package]\nname = \"a\"\nversion = \"0.1.0\"\n\n[package.metadata.locklint]\nselct = []\n",
    );
    write(dir.path(), "tests/x/a/src/lib.rs", LOCKY);
    write(dir.path(), "tests/x/b/Cargo.toml", BROKEN_MANIFEST);
    write(dir.path(), "tests/x/b/src/lib.rs", LOCKY);
    // a broken locklint configuration in a git-ignored directory
    write(dir.path(), ".gitignore", "fixtures/\n");
    write(dir.path(), "fixtures/locklint.toml", "select = [\n");
    write(dir.path(), "fixtures/c.rs", LOCKY);
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let paths: std::collections::BTreeSet<String> = found(&o)
        .into_iter()
        .map(|f| f.split(':').next().unwrap().to_string())
        .collect();
    assert_eq!(
        paths.into_iter().collect::<Vec<_>>(),
        vec!["a.rs", "sub/b.rs"]
    );
    assert!(
        stderr(&o).is_empty(),
        "nothing excluded was read: {}",
        stderr(&o)
    );
}

#[test]
fn an_unknown_key_in_a_manifest_that_governs_nothing_analysed_does_not_stop_the_run() {
    let dir = tree();
    // a package with no source file (only a README)
    write(
        dir.path(),
        "docs/Cargo.toml",
        "[package]\nname = \"docs\"\nversion = \"0.1.0\"\n\n[package.metadata.locklint]\nselct = []\n",
    );
    write(dir.path(), "docs/README.md", "# docs\n");
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(found(&o).len(), 6);
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
}

#[test]
fn a_locklint_table_with_an_unknown_key_that_governs_analysed_files_is_one_clear_error() {
    let dir = tree();
    write(
        dir.path(),
        "crates/jobs/Cargo.toml",
        "[package]\nname = \"jobs\"\nversion = \"0.1.0\"\n\n[package.metadata.locklint]\nselect = [\"separate-expire\"]\nignroe = [\"get-then-set\"]\n",
    );
    write(dir.path(), "crates/jobs/src/lib.rs", LOCKY);
    write(dir.path(), "crates/jobs/src/more.rs", LOCKY);
    let o = locklint(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let err = stderr(&o);
    assert_eq!(
        err.matches("crates/jobs/Cargo.toml").count(),
        1,
        "the file is named once: {err}"
    );
    assert!(err.contains("crates/jobs/Cargo.toml:7:1"), "{err}");
    assert!(err.contains("unknown field `ignroe`"), "{err}");
    assert!(err.contains("did you mean `ignore`?"), "{err}");
    assert_eq!(err.matches("error").count(), 1, "{err}");

    // the same for a broken locklint.toml
    let dir = tree();
    write(dir.path(), "sub/locklint.toml", "select = [\n");
    let o = locklint(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert_eq!(err.matches("locklint.toml").count(), 1, "{err}");
    assert!(err.contains("sub/locklint.toml:"), "{err}");
}

#[test]
fn audit_and_config_show_read_configuration_the_same_way() {
    let dir = tree();
    write(dir.path(), "tests/x/in/Cargo.toml", BROKEN_MANIFEST);
    write(dir.path(), "tests/x/in/src/lib.rs", LOCKY);
    let o = locklint(dir.path(), &["audit"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("lock:job"));
    assert!(stderr(&o).contains("note: tests/x/in/Cargo.toml: not valid TOML"));
    let o = locklint(dir.path(), &["config", "--show", "tests/x/in/src/lib.rs"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("no configuration file applies"));

    write(dir.path(), "locklint.toml", "selct = []\n");
    let o = locklint(dir.path(), &["audit"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("did you mean `select`?"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_broken_file_that_extend_or_config_names_is_an_error() {
    let dir = tree();
    write(dir.path(), "base/Cargo.toml", BROKEN_MANIFEST);
    write(
        dir.path(),
        "locklint.toml",
        "extend = \"base/Cargo.toml\"\n",
    );
    let o = locklint(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("base/Cargo.toml"), "{err}");
    assert!(err.contains("not valid TOML at 1:"), "{err}");
    std::fs::remove_file(dir.path().join("locklint.toml")).unwrap();
    let o = locklint(dir.path(), &["check", "--config", "base/Cargo.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not valid TOML at 1:"),
        "{}",
        stderr(&o)
    );
}

/// Found by fuzzing (`config` target): an error on a line past 65,535 columns made the
/// snippet renderer panic, and the run ended with an internal error.
#[test]
fn an_error_on_a_very_long_line_is_reported_without_a_snippet() {
    let dir = tempfile::tempdir().unwrap();
    let long = format!(
        "select = [{}\"nope\"]\n",
        "\"separate-expire\", ".repeat(5000)
    );
    write(dir.path(), "locklint.toml", &long);
    write(dir.path(), "a.rs", "fn f() {}\n");
    let o = locklint(dir.path(), &["check", "."]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("internal error"), "{stderr}");
    assert!(
        stderr.contains("error: invalid configuration: "),
        "{stderr}"
    );
    assert!(stderr.contains("locklint.toml:1:"), "{stderr}");
    assert!(stderr.contains("nope"), "{stderr}");
}

/// Found by fuzzing (`config` target): a glob repeated thousands of times, thousands of
/// per-path entries, and a file that extends itself took seconds to minutes (every glob
/// compiled again, a matcher built per entry and per file of the chain).
#[test]
fn thousands_of_globs_and_per_path_entries_give_the_same_result() {
    let dir = tree();
    write(dir.path(), "gen/c.rs", LOCKY);
    let n = 5_000;
    let mut text = String::from("extend = \"locklint.toml\"\nexclude = [");
    for i in 0..n {
        // the same globs again and again, and globs that match nothing
        text.push_str(if i % 2 == 0 {
            "\"gen\", "
        } else {
            "\"gen/**\", "
        });
        text.push_str(&format!("\"src/**/*{{a,b}}[0-9]?x\", \"nothing{i}/**\", "));
    }
    text.push_str("]\n\n[per-path-ignores]\n");
    for i in 0..n {
        text.push_str(&format!(
            "\"elsewhere/*{{a,b}}[0-9]?x{i}/**\" = [\"setnx-without-expiry\"]\n"
        ));
    }
    text.push_str("\"sub/**\" = [\"unconditional-release\", \"setnx-without-expiry\"]\n");
    text.push_str("\"*.rs\" = [\"constant-lock-value\"]\n");
    assert!(text.len() > 200_000);
    write(dir.path(), "locklint.toml", &text);
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    assert_eq!(
        found(&o),
        vec![
            "a.rs:setnx-without-expiry:error",
            "a.rs:unconditional-release:error",
        ]
    );
    // the file that extends itself is read once
    let show = locklint(dir.path(), &["config", "--show"]);
    let shown = String::from_utf8_lossy(&show.stdout);
    assert_eq!(shown.matches("# from ").count(), 1, "{}", &shown[..200]);
}

/// Found by fuzzing (`config` target): a misspelt rule name of a million characters took
/// seconds (its distance to every rule name was computed for the suggestion), and a glob of
/// 300,000 `*` took 437 MB to compile.
#[test]
fn a_huge_rule_name_or_glob_is_a_prompt_error() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.rs", LOCKY);
    let name = "unconditional-releas".repeat(50_000);
    write(
        dir.path(),
        "locklint.toml",
        &format!("[per-path-ignores]\n\"tests/**\" = [\"{name}\"]\n"),
    );
    let o = locklint(dir.path(), &["check", "."]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("unknown rule"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("did you mean"), "{}", stderr(&o));

    let glob = format!("vendor/{}", "*".repeat(300_000));
    write(
        dir.path(),
        "locklint.toml",
        &format!("exclude = [\"generated\", \"{glob}\"]\n"),
    );
    let o = locklint(dir.path(), &["check", "."]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("glob longer than 1024 bytes"),
        "{}",
        stderr(&o)
    );
    // a long glob within the limit is used
    let others: String = (0..120).map(|i| format!(",b{i}.rs")).collect();
    let glob = format!("{{a.rs{others}}}");
    assert!(glob.len() > 800 && glob.len() <= 1024);
    write(
        dir.path(),
        "locklint.toml",
        &format!("exclude = [\"{glob}\"]\n"),
    );
    let o = locklint(dir.path(), &["check", "--format", "json", "."]);
    assert_eq!(found(&o), Vec::<String>::new());
}
