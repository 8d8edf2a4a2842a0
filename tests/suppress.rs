//! Suppression comments: every form, what they cover, and what they never match.

use locklint::engine::{self, Options};

fn findings(name: &str, code: &str) -> Vec<(String, usize)> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, code).unwrap();
    let report = engine::run(&Options {
        paths: vec![path],
        ..Default::default()
    });
    report
        .findings
        .iter()
        .map(|d| (d.rule.to_string(), d.primary.start().line))
        .collect()
}

const HEAD: &str = "use redis::AsyncCommands;\nasync fn f(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {\n";

fn body(lines: &str) -> String {
    format!("{HEAD}{lines}    Ok(())\n}}\n")
}

#[test]
fn line_above_and_trailing_suppress_only_their_statement() {
    let code = body(
        "    // locklint: allow(unconditional-release) -- operator tool\n    let _: () = con.del(\"lock:a\").await?;\n    let _: () = con.del(\"lock:b\").await?;\n    let _: () = con.del(\"lock:c\").await?; // locklint: allow(unconditional-release) -- same\n",
    );
    assert_eq!(
        findings("a.rs", &code),
        vec![("unconditional-release".to_string(), 5)]
    );
}

#[test]
fn a_suppression_covers_a_statement_over_several_lines() {
    let code = body(
        "    // locklint: allow(unconditional-release) -- teardown\n    let _: () = con\n        .del(\n            \"lock:a\",\n        )\n        .await?;\n    let _: () = con.del(\"lock:b\").await?;\n",
    );
    assert_eq!(
        findings("a.rs", &code),
        vec![("unconditional-release".to_string(), 9)]
    );
}

#[test]
fn text_in_a_string_literal_never_suppresses() {
    let code = body(
        "    let _doc = \"// locklint: allow(unconditional-release) -- not a comment\";\n    let _: () = con.del(\"lock:a\").await?;\n    let _raw = r#\"/* locklint: allow-file(unconditional-release) -- nor this */\"#;\n",
    );
    assert_eq!(
        findings("a.rs", &code),
        vec![("unconditional-release".to_string(), 4)]
    );
}

#[test]
fn several_rules_and_file_level() {
    let code = body("    let ok: bool = con.set_nx(\"lock:a\", \"1\").await?; // locklint: allow(constant-lock-value, setnx-without-expiry) -- dev only\n    let _ = ok;\n");
    assert!(findings("a.rs", &code).is_empty());
    let code = format!("// locklint: allow-file(unconditional-release) -- janitor module\n{}", body("    let _: () = con.del(\"lock:a\").await?;\n    let _: () = con.del(\"lock:b\").await?;\n"));
    assert!(findings("a.rs", &code).is_empty());
}

#[test]
fn problems_with_suppressions_are_reported() {
    let code = body(
        "    // locklint: allow(unconditional-release)\n    let _: () = con.del(\"lock:a\").await?;\n    // locklint: allow(unconditional-delete) -- typo\n    let _: () = con.del(\"lock:b\").await?;\n    // locklint: allow(get-then-set) -- nothing here\n    let _: () = con.del(\"lock:c\").await?;\n",
    );
    let got = findings("a.rs", &code);
    assert_eq!(
        got,
        vec![
            ("suppression-without-reason".to_string(), 3),
            ("suppression-unknown-rule".to_string(), 5),
            ("unconditional-release".to_string(), 6),
            ("unused-suppression".to_string(), 7),
            ("unconditional-release".to_string(), 8),
        ]
    );
}

#[test]
fn a_suppression_of_a_rule_that_did_not_run_is_not_unused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.rs");
    std::fs::write(&path, body("    // locklint: allow(get-then-set) -- x\n    let _: () = con.del(\"lock:c\").await?;\n")).unwrap();
    let report = engine::run(&Options {
        paths: vec![path],
        select: vec!["unconditional-release".to_string()],
        ..Default::default()
    });
    let rules: Vec<&str> = report.findings.iter().map(|d| d.rule).collect();
    assert_eq!(rules, vec!["unconditional-release"]);
}

#[test]
fn the_unused_suppression_fix_removes_the_comment() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.rs");
    let code = body("    // locklint: allow(get-then-set) -- stale\n    let _: () = con.set_ex(\"user:1:profile\", \"{}\", 60).await?; // locklint: allow(unconditional-renew) -- stale too\n");
    std::fs::write(&path, &code).unwrap();
    let report = engine::run(&Options {
        paths: vec![path],
        ..Default::default()
    });
    let mut edited = code.clone();
    let mut edits: Vec<_> = report
        .findings
        .iter()
        .filter(|d| d.rule == "unused-suppression")
        .flat_map(|d| d.fix.as_ref().unwrap().edits.clone())
        .collect();
    assert_eq!(edits.len(), 2);
    edits.sort_by_key(|e| std::cmp::Reverse(e.location.span.start));
    for e in edits {
        edited.replace_range(e.location.span.start..e.location.span.end, &e.replacement);
    }
    assert_eq!(
        edited,
        body("    let _: () = con.set_ex(\"user:1:profile\", \"{}\", 60).await?;\n")
    );
}

const LOCK_TABLE: &str = "CREATE TABLE job_locks (name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at TIMESTAMPTZ NOT NULL);\n";

#[test]
fn sql_block_comments_suppress_and_quoted_text_never_does() {
    let sql = format!(
        "{LOCK_TABLE}/* locklint: allow(lock-table-no-owner-check) -- operator tool */\nDELETE FROM job_locks WHERE name = $1;\nSELECT '-- locklint: allow(lock-table-no-owner-check) -- not a comment';\nDELETE FROM job_locks WHERE name = $2;\n"
    );
    assert_eq!(
        findings("locks.sql", &sql),
        vec![("lock-table-no-owner-check".to_string(), 5)]
    );
}

#[test]
fn lua_long_strings_never_suppress_and_long_comments_are_comments() {
    // the text in the long string is data; the long comment holds no suppression
    let lua = "local doc = [[\n-- locklint: allow(lua-release-no-compare) -- not a comment\n]]\n--[[ release the lock ]]\nreturn redis.call('DEL', KEYS[1]) -- locklint: allow(lua-release-no-compare) -- admin tool\n";
    assert_eq!(findings("release_lock.lua", lua), vec![]);
    let lua = "local doc = [[\n-- locklint: allow(lua-release-no-compare) -- not a comment\n]]\nreturn redis.call('DEL', KEYS[1])\n";
    assert_eq!(
        findings("release_lock.lua", lua),
        vec![("lua-release-no-compare".to_string(), 4)]
    );
}
