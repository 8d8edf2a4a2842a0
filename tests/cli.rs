//! The `locklint` binary end to end: exit codes, formats, rule selection, bad input.

use std::path::Path;
use std::process::{Command, Output};

#[path = "support/bin.rs"]
mod bin;
#[path = "support/sources.rs"]
mod sources;
use sources::RULE_PAGE_SECTIONS;

use bin::locklint;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const BAD: &str = r#"use redis::Commands;

fn acquire(con: &mut redis::Connection) -> redis::RedisResult<bool> {
    let ok: bool = con.set_nx("lock:report", "1")?;
    if ok {
        let _: () = con.expire("lock:report", 30)?;
    }
    Ok(ok)
}
"#;

const CLEAN: &str = r#"use redis::Commands;

fn profile(con: &mut redis::Connection, id: u64) -> redis::RedisResult<Option<String>> {
    let key = format!("user:{id}:profile");
    let cached: Option<String> = con.get(&key)?;
    if cached.is_none() {
        let _: () = con.set_ex(&key, "{}", 60)?;
    }
    Ok(cached)
}
"#;

fn tree(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in files {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    dir
}

#[test]
fn exit_codes_follow_findings() {
    let clean = tree(&[("src/cache.rs", CLEAN.as_bytes())]);
    let o = locklint(clean.path(), &["check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("0 findings in 1 file"));

    let bad = tree(&[
        ("src/lock.rs", BAD.as_bytes()),
        ("src/cache.rs", CLEAN.as_bytes()),
    ]);
    let o = locklint(bad.path(), &["check"]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains("separate-expire"), "{out}");
    assert!(out.contains("src/lock.rs:6:"), "{out}");
    assert!(out.contains("2 findings in 1 of 2 files"), "{out}");
}

#[test]
fn missing_path_is_an_error_but_the_rest_is_analysed() {
    let bad = tree(&[("lock.rs", BAD.as_bytes())]);
    let o = locklint(bad.path(), &["check", "lock.rs", "does-not-exist"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("error: does-not-exist: no such file or directory"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "one clear line: {err}");
    assert!(stdout(&o).contains("separate-expire"));
}

#[test]
fn usage_errors_exit_2_with_a_suggestion() {
    let dir = tree(&[("lock.rs", BAD.as_bytes())]);
    let o = locklint(dir.path(), &["check", "--select", "separate-expiry"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("did you mean `separate-expire`?"),
        "{}",
        stderr(&o)
    );
    let o = locklint(dir.path(), &["check", "--format", "xml"]);
    assert_eq!(o.status.code(), Some(2));
    let o = locklint(dir.path(), &["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!stderr(&o).contains("panicked"));
}

#[test]
fn select_and_ignore_filter_rules() {
    let dir = tree(&[("lock.rs", BAD.as_bytes())]);
    let json = |args: &[&str]| {
        let mut a = vec!["check", "--format", "json"];
        a.extend_from_slice(args);
        let o = locklint(dir.path(), &a);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let mut rules: Vec<String> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["rule"].as_str().unwrap().to_string())
            .collect();
        rules.sort();
        (o.status.code(), rules)
    };
    let (code, all) = json(&[]);
    assert_eq!(code, Some(1));
    assert_eq!(all, vec!["constant-lock-value", "separate-expire"]);
    let (_, only) = json(&["--select", "separate-expire"]);
    assert_eq!(only, vec!["separate-expire"]);
    let (code, none) = json(&["--ignore", "separate-expire,constant-lock-value"]);
    assert_eq!(code, Some(0));
    assert!(none.is_empty());
}

#[test]
fn json_has_the_documented_shape() {
    let dir = tree(&[("src/lock.rs", BAD.as_bytes())]);
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let top: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    assert_eq!(top, vec!["findings", "summary", "version"]);
    assert_eq!(v["version"], 1);
    assert_eq!(v["summary"]["files"], 1);
    assert_eq!(v["summary"]["findings"], 2);
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "separate-expire")
        .unwrap();
    let mut keys: Vec<&str> = f.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    keys.sort();
    assert_eq!(
        keys,
        vec![
            "column",
            "end_column",
            "end_line",
            "fix",
            "help",
            "line",
            "message",
            "path",
            "related",
            "rule",
            "severity"
        ]
    );
    assert_eq!(f["path"], "src/lock.rs");
    assert_eq!(f["severity"], "error");
    assert_eq!(
        (f["line"].as_u64(), f["column"].as_u64()),
        (Some(6), Some(25))
    );
    assert_eq!(
        (f["end_line"].as_u64(), f["end_column"].as_u64()),
        (Some(6), Some(50))
    );
    assert_eq!(f["fix"]["applicability"], "safe");
    assert_eq!(f["fix"]["edits"].as_array().map(Vec::len), Some(2));
    let msg = f["message"].as_str().unwrap();
    assert!(msg.chars().next().unwrap().is_lowercase() && !msg.ends_with('.'));
    let rel = &f["related"][0];
    assert_eq!(rel["path"], "src/lock.rs");
    assert_eq!(
        (rel["line"].as_u64(), rel["column"].as_u64()),
        (Some(4), Some(24))
    );
    assert_eq!(rel["label"], "acquired here without an expiry");
}

#[test]
fn quiet_drops_the_summary_and_notes() {
    let dir = tree(&[("lock.rs", BAD.as_bytes()), ("latin1.rs", b"// caf\xe9\n")]);
    let o = locklint(dir.path(), &["check"]);
    assert!(stdout(&o).contains("findings in"));
    assert!(stderr(&o).contains("note: latin1.rs: skipped: not valid UTF-8"));
    let o = locklint(dir.path(), &["check", "--quiet"]);
    assert!(!stdout(&o).contains("findings in"));
    assert!(stdout(&o).contains("separate-expire"));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
}

#[test]
fn colour_is_off_with_no_color_and_the_flag() {
    let dir = tree(&[("lock.rs", BAD.as_bytes())]);
    let run = |envs: &[(&str, &str)], args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_locklint"));
        c.arg("check").args(args).current_dir(dir.path());
        c.env_remove("NO_COLOR").env_remove("CLICOLOR_FORCE");
        for (k, v) in envs {
            c.env(k, v);
        }
        stdout(&c.output().unwrap())
    };
    assert!(run(&[("CLICOLOR_FORCE", "1")], &[]).contains("\u{1b}["));
    assert!(!run(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")], &[]).contains("\u{1b}["));
    assert!(!run(&[("CLICOLOR_FORCE", "1")], &["--no-color"]).contains("\u{1b}["));
    assert!(
        !run(&[], &[]).contains("\u{1b}["),
        "no colour when not a terminal"
    );
}

#[test]
fn rules_lists_every_rule_and_explain_prints_its_page() {
    let dir = tempfile::tempdir().unwrap();
    let o = locklint(dir.path(), &["rules"]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    for info in locklint::rules::infos() {
        let line = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(info.name))
            .unwrap_or_else(|| panic!("{} missing from:\n{out}", info.name));
        assert!(line.contains(&info.severity.to_string()) && line.contains(info.summary));
        let o = locklint(dir.path(), &["explain", info.name]);
        assert_eq!(o.status.code(), Some(0));
        let page = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("rules/{}.md", info.name)),
        )
        .unwrap();
        assert_eq!(stdout(&o), page);
    }
    let o = locklint(dir.path(), &["explain", "get-then-sett"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("did you mean `get-then-set`?"));
}

#[test]
fn the_rule_index_lists_every_rule() {
    let index =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("rules/README.md"))
            .unwrap();
    for info in locklint::rules::infos() {
        assert!(
            index.contains(&format!("| [{}] |", info.name)),
            "{} missing from rules/README.md",
            info.name
        );
        assert!(index.contains(&format!("[{0}]: {0}.md", info.name)));
    }
}

#[test]
fn every_rule_has_a_complete_page() {
    for info in locklint::rules::infos() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("rules/{}.md", info.name));
        let page = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "rule `{}` has no page at {}: {e}",
                info.name,
                path.display()
            )
        });
        assert!(
            page.starts_with(&format!("# {}", info.name)),
            "{}",
            path.display()
        );
        let meta = info.name == "parse-error" || info.name.contains("suppression");
        if !meta {
            for section in RULE_PAGE_SECTIONS {
                assert!(
                    page.contains(section),
                    "{} lacks `{section}`",
                    path.display()
                );
            }
        }
    }
}

#[test]
fn gitignored_and_target_directories_are_skipped() {
    let dir = tree(&[
        ("src/cache.rs", CLEAN.as_bytes()),
        (".gitignore", b"generated/\n"),
        ("generated/lock.rs", BAD.as_bytes()),
        ("target/debug/lock.rs", BAD.as_bytes()),
        ("notes.txt", BAD.as_bytes()),
    ]);
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["summary"]["files"], 1, "{}", stdout(&o));
    assert_eq!(o.status.code(), Some(0));
    // an explicitly named file is analysed even when ignored
    let o = locklint(dir.path(), &["check", "generated/lock.rs", "-q"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn bad_input_is_reported_and_the_run_goes_on() {
    // each file also reads Redis, so that it can hold lock code and is parsed
    const READS: &str = "use redis::Commands;\nfn g(c: &mut redis::Connection) -> redis::RedisResult<Option<String>> { c.get(\"cache:x\") }\n";
    let deep_parens = format!(
        "{READS}fn f() {{ let x = {}1{}; }}\n",
        "(".repeat(30_000),
        ")".repeat(30_000)
    );
    let deep_unary = format!("{READS}fn f() {{ let x = {}true; }}\n", "!".repeat(30_000));
    let long_sum = format!("{READS}fn f() {{ let x = 1{}; }}\n", " + 1".repeat(60_000));
    let long_chain = format!("{READS}fn f() {{ let x = a{}; }}\n", ".b()".repeat(30_000));
    let nested_if = format!(
        "{READS}fn f() {{ let x = {}{{ 2 }}; }}\n",
        "if a { 1 } else ".repeat(20_000)
    );
    let broken = format!("fn main( {{\n    let x = ;\n{READS}");
    let dir = tree(&[
        ("broken.rs", broken.as_bytes()),
        // nothing in it can be lock code: not parsed, so its syntax error is not reported
        ("plain_broken.rs", b"fn main( {\n    let x = ;\n"),
        ("lock.rs", BAD.as_bytes()),
        ("empty.rs", b""),
        ("latin1.rs", b"fn caf\xe9() {}\n"),
        ("binary.rs", b"\x7fELF\x00\x00\x01\x02"),
        ("deep_parens.rs", deep_parens.as_bytes()),
        ("deep_unary.rs", deep_unary.as_bytes()),
        ("long_sum.rs", long_sum.as_bytes()),
        ("long_chain.rs", long_chain.as_bytes()),
        ("nested_if.rs", nested_if.as_bytes()),
    ]);
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("note: latin1.rs: skipped: not valid UTF-8"),
        "{err}"
    );
    assert!(
        err.contains("note: binary.rs: skipped: binary file"),
        "{err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("overflow"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let findings = v["findings"].as_array().unwrap();
    let parse_errors: Vec<(&str, u64)> = findings
        .iter()
        .filter(|f| f["rule"] == "parse-error")
        .map(|f| (f["path"].as_str().unwrap(), f["line"].as_u64().unwrap()))
        .collect();
    assert!(
        parse_errors.contains(&("broken.rs", 1)) || parse_errors.contains(&("broken.rs", 2)),
        "{parse_errors:?}"
    );
    assert!(parse_errors.iter().any(|(p, _)| *p == "deep_parens.rs"));
    assert!(parse_errors.iter().any(|(p, _)| *p == "deep_unary.rs"));
    assert!(!parse_errors.iter().any(|(p, _)| *p == "plain_broken.rs"));
    for f in findings.iter().filter(|f| f["rule"] == "parse-error") {
        assert_eq!(f["severity"], "warning");
    }
    // the valid files were analysed: the lock defect is still found
    assert!(findings
        .iter()
        .any(|f| f["rule"] == "separate-expire" && f["path"] == "lock.rs"));
    // analysed files: everything except the two skipped ones
    assert_eq!(v["summary"]["files"], 9);
}

#[test]
fn findings_on_very_long_lines_are_rendered_without_a_snippet() {
    let long = format!(
        "use redis::Commands;\nfn f(c: &mut redis::Connection) {{ let _s = \"{}\"; let _: () = c.del(\"lock:x\").unwrap(); }}\n",
        "x".repeat(120_000)
    );
    let dir = tree(&[("long.rs", long.as_bytes())]);
    let o = locklint(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).contains("error[unconditional-release]"));
    assert!(stdout(&o).contains("long.rs:2:"));
    assert!(!stderr(&o).contains("internal error"));
}

/// `SET NX` with a constant value and an expiry: only `constant-lock-value`, a warning.
const WARNING_ONLY: &str = r#"use redis::Commands;

fn acquire(con: &mut redis::Connection) -> redis::RedisResult<bool> {
    let ok: bool = redis::cmd("SET").arg("lock:report").arg("1").arg("NX").arg("PX").arg(30_000).query(con)?;
    Ok(ok)
}
"#;

fn rules_found(o: &Output) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(o), stderr(o)));
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{}:{}",
                f["rule"].as_str().unwrap(),
                f["severity"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn warnings_fail_unless_fail_on_is_error() {
    let dir = tree(&[("lock.rs", WARNING_ONLY.as_bytes())]);
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    assert_eq!(rules_found(&o), vec!["constant-lock-value:warning"]);
    assert_eq!(o.status.code(), Some(1));
    std::fs::write(dir.path().join("locklint.toml"), "fail-on = \"error\"\n").unwrap();
    let o = locklint(dir.path(), &["check", "--format", "json"]);
    assert_eq!(rules_found(&o), vec!["constant-lock-value:warning"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // an error still fails
    std::fs::write(dir.path().join("more.rs"), BAD).unwrap();
    let o = locklint(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn suppressed_findings_do_not_fail_the_run() {
    let suppressed = BAD
        .replace(
            "    let ok: bool",
            "    // locklint: allow(constant-lock-value) -- a local development tool\n    let ok: bool",
        )
        .replace(
            "        let _: () = con.expire",
            "        // locklint: allow(separate-expire) -- a local development tool\n        let _: () = con.expire",
        );
    let dir = tree(&[("lock.rs", suppressed.as_bytes())]);
    let o = locklint(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("0 findings in 1 file"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn an_unreadable_named_path_exits_2() {
    let dir = tree(&[("lock.rs", CLEAN.as_bytes())]);
    std::os::unix::fs::symlink("nowhere.rs", dir.path().join("dangling.rs")).unwrap();
    let o = locklint(dir.path(), &["check", "dangling.rs", "lock.rs"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("error: dangling.rs: no such file or directory"),
        "{}",
        stderr(&o)
    );
    // the rest was analysed
    assert!(
        stdout(&o).contains("0 findings in 1 file"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn a_named_path_with_nothing_to_analyse_warns_and_exits_2() {
    let dir = tree(&[
        ("src/cache.rs", CLEAN.as_bytes()),
        ("docs/guide.md", b"# guide\n"),
        ("docs/.gitignore", b"*.rs\n"),
        ("docs/example.rs", BAD.as_bytes()),
    ]);
    for path in ["docs", "docs/"] {
        let o = locklint(dir.path(), &["check", path]);
        assert_eq!(o.status.code(), Some(2), "{path}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("warning: docs: no .rs, .sql or .lua files to analyse")
                || stderr(&o).contains("warning: docs/: no .rs, .sql or .lua files to analyse"),
            "{}",
            stderr(&o)
        );
    }
    // one empty path among others still exits 2, after analysing the rest
    let o = locklint(dir.path(), &["check", "src", "docs"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).contains("0 findings in 1 file"));
    // everything excluded by the configuration
    std::fs::write(dir.path().join("locklint.toml"), "exclude = [\"src\"]\n").unwrap();
    let o = locklint(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("warning: .: no .rs, .sql or .lua files to analyse"));
    let empty = tempfile::tempdir().unwrap();
    let o = locklint(empty.path(), &["check"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn the_summary_counts_files_analysed_and_files_with_findings_with_plurals() {
    let one = BAD.replace("let _: () = con.expire(\"lock:report\", 30)?;", "");
    let dir = tree(&[("a.rs", one.as_bytes())]);
    let o = locklint(dir.path(), &["check", "--select", "constant-lock-value"]);
    assert!(
        stdout(&o).contains("\n1 finding in 1 file\n"),
        "{}",
        stdout(&o)
    );
    let dir = tree(&[
        ("a.rs", BAD.as_bytes()),
        ("b.rs", BAD.as_bytes()),
        ("c.rs", CLEAN.as_bytes()),
    ]);
    let o = locklint(dir.path(), &["check"]);
    let out = stdout(&o);
    assert!(out.contains("\n4 findings in 2 of 3 files\n"), "{out}");
    assert!(out.contains("\n2 fixes available with --fix\n"), "{out}");
    let o = locklint(dir.path(), &["check", "a.rs"]);
    assert!(
        stdout(&o).contains("\n2 findings in 1 file\n1 fix available with --fix\n"),
        "{}",
        stdout(&o)
    );
    let o = locklint(dir.path(), &["check", "--diff", "a.rs"]);
    assert!(
        stderr(&o).contains("1 fix would be applied to 1 file"),
        "{}",
        stderr(&o)
    );
    let o = locklint(dir.path(), &["check", "--fix"]);
    assert!(
        stdout(&o).contains("fixed 2 findings; 2 findings remaining in 2 of 3 files"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn statistics_count_each_rule_and_severity() {
    let dir = tree(&[
        ("a.rs", BAD.as_bytes()),
        ("strict/b.rs", BAD.as_bytes()),
        ("strict/c.rs", BAD.as_bytes()),
    ]);
    std::fs::write(
        dir.path().join("strict/locklint.toml"),
        "[severity]\nconstant-lock-value = \"error\"\n",
    )
    .unwrap();
    // with a machine-readable format the statistics go to stderr
    let o = locklint(dir.path(), &["check", "--statistics", "--format", "json"]);
    let out = stderr(&o);
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines,
        vec![
            vec!["3", "separate-expire", "error"],
            vec!["2", "constant-lock-value", "error"],
            vec!["1", "constant-lock-value", "warning"],
        ],
        "{out}"
    );
}

#[test]
fn audit_exits_0_on_findings_and_2_on_unreadable_or_empty_paths() {
    let dir = tree(&[
        ("src/lock.rs", BAD.as_bytes()),
        ("docs/guide.md", b"# guide\n"),
    ]);
    let o = locklint(dir.path(), &["audit"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("lock:report"), "{}", stdout(&o));
    let o = locklint(dir.path(), &["audit", "src", "missing"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("error: missing: no such file or directory"));
    let o = locklint(dir.path(), &["audit", "docs"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("warning: docs: no .rs, .sql or .lua files to analyse"),
        "{}",
        stderr(&o)
    );
}
