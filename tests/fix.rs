//! Fixes: every fixable `bad_*` fixture, fixed with safe and unsafe fixes until nothing
//! changes, must equal its `bad_*.fixed` file, still parse, and no longer trigger its rule;
//! and `--fix` / `--diff` on the command line.

use locklint::diagnostic::Applicability;
use locklint::engine::{self, Options};
use locklint::fix::{self, Level};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn relative(p: &Path) -> PathBuf {
    p.strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| p.to_path_buf())
}

/// A fix flavour: command-line settings that change which fix is offered, and the infix of
/// its expected file (`bad_x.rs.fixed` for the defaults, `bad_x.rs.<infix>.fixed` otherwise).
struct Flavour {
    infix: Option<&'static str>,
    redis_version: Option<&'static str>,
}

const FLAVOURS: &[Flavour] = &[
    Flavour {
        infix: None,
        redis_version: None,
    },
    // `DELEX key IFEQ token` replaces the compare-and-delete script on Redis 8.4+
    Flavour {
        infix: Some("redis-8.4"),
        redis_version: Some("8.4"),
    },
];

fn options(
    path: &Path,
    flavour: &Flavour,
    overlay: Option<Arc<HashMap<PathBuf, String>>>,
) -> Options {
    Options {
        paths: vec![path.to_path_buf()],
        overlay,
        redis_version: flavour.redis_version.map(str::to_string),
        ..Default::default()
    }
}

/// The fixture's text after every safe and unsafe fix, and whether they settled.
fn fixed_text(path: &Path, flavour: &Flavour) -> (Option<String>, fix::Plan) {
    let first = engine::run(&options(path, flavour, None));
    let plan = fix::plan(first, Level::Unsafe, &|overlay| {
        engine::run(&options(path, flavour, Some(overlay)))
    });
    let text = plan
        .changes
        .iter()
        .find(|c| c.path == path)
        .map(|c| c.new.clone());
    (text, plan)
}

fn parse_problems(path: &Path, text: &str) -> usize {
    let file = locklint::source::SourceFile::new(path.to_path_buf(), text.to_string());
    locklint::frontend::analyze(0, file).problems.len()
}

/// Checks one fixture under one flavour; returns whether any fix applied. The defaults'
/// expected file must exist whenever a fix applies; another flavour's only where its result
/// differs from the defaults'.
fn check_fixture(
    rule: &str,
    rel: &Path,
    flavour: &Flavour,
    default_text: Option<&str>,
    update: bool,
    failures: &mut Vec<String>,
) -> Option<String> {
    let expected_path = match flavour.infix {
        None => PathBuf::from(format!("{}.fixed", rel.display())),
        Some(infix) => PathBuf::from(format!("{}.{infix}.fixed", rel.display())),
    };
    let original = std::fs::read_to_string(rel).unwrap();
    let (text, plan) = fixed_text(rel, flavour);
    let label = match flavour.infix {
        None => rel.display().to_string(),
        Some(infix) => format!("{} ({infix})", rel.display()),
    };
    if plan.unconverged {
        failures.push(format!("{label}: fixes did not converge"));
    }
    if !plan.backed_out.is_empty() {
        failures.push(format!(
            "{label}: fixes were backed out: {:?}",
            plan.backed_out
        ));
    }
    let wanted = match (&text, flavour.infix) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(t), Some(_)) => default_text != Some(t.as_str()),
    };
    if !wanted {
        if expected_path.exists() {
            if update {
                std::fs::remove_file(&expected_path).unwrap();
            } else {
                failures.push(format!(
                    "{label}: no fix of its own applies, but {} exists",
                    expected_path.display()
                ));
            }
        }
        return text;
    }
    let text = text.unwrap();
    if parse_problems(rel, &text) > parse_problems(rel, &original) {
        failures.push(format!("{label}: the fixed code does not parse"));
    }
    // the rule no longer fires on the fixed text
    let mut overlay = HashMap::new();
    overlay.insert(rel.to_path_buf(), text.clone());
    let after = engine::run(&options(rel, flavour, Some(Arc::new(overlay))));
    let still: Vec<_> = after
        .findings
        .iter()
        .filter(|d| {
            d.rule == rule
                && d.fix
                    .as_ref()
                    .is_some_and(|x| x.applicability != Applicability::DisplayOnly)
        })
        .map(|d| d.primary.start().line)
        .collect();
    if !still.is_empty() {
        failures.push(format!(
            "{label}: `{rule}` still fires after fixing, at lines {still:?}"
        ));
    }
    let expected = std::fs::read_to_string(&expected_path).ok();
    if expected.as_deref() != Some(text.as_str()) {
        if update {
            std::fs::write(&expected_path, &text).unwrap();
        } else {
            failures.push(format!(
                "{label}: fixed text differs from {} (INSTA_UPDATE=always updates it):\n{}",
                expected_path.display(),
                text
            ));
        }
    }
    Some(text)
}

#[test]
fn fixable_fixtures_match_their_fixed_files() {
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let update = std::env::var("INSTA_UPDATE").is_ok_and(|v| v == "always")
        || std::env::var_os("LOCKLINT_UPDATE_FIXED").is_some();
    let mut failures = Vec::new();
    let mut fixed_any = 0;
    let mut flavoured = 0;
    for info in locklint::rules::infos() {
        let dir = fixtures_root().join(info.name);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut bad: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                // single-file examples; a directory example (`bad_x/`) has no `.fixed` form
                p.is_file()
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("bad_") && !n.ends_with(".fixed"))
            })
            .collect();
        bad.sort();
        for f in bad {
            let rel = relative(&f);
            let default = check_fixture(info.name, &rel, &FLAVOURS[0], None, update, &mut failures);
            if default.is_some() {
                fixed_any += 1;
            }
            for flavour in &FLAVOURS[1..] {
                let text = check_fixture(
                    info.name,
                    &rel,
                    flavour,
                    default.as_deref(),
                    update,
                    &mut failures,
                );
                if text.is_some() && text != default {
                    flavoured += 1;
                }
            }
        }
    }
    assert!(
        flavoured >= 3,
        "only {flavoured} fixtures have flavoured fixes"
    );
    assert!(fixed_any >= 5, "only {fixed_any} fixtures have fixes");
    assert!(
        failures.is_empty(),
        "fix failures:\n{}",
        failures.join("\n")
    );
}

fn locklint(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_locklint"))
        .args(args)
        .current_dir(dir)
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .output()
        .expect("run locklint")
}

const SEPARATE: &str = r#"use redis::Commands;

fn acquire(con: &mut redis::Connection, token: &str) -> redis::RedisResult<bool> {
    let ok: bool = con.set_nx("lock:report", token)?;
    let _: () = con.expire("lock:report", 30)?;
    Ok(ok)
}
"#;

const SEPARATE_FIXED: &str = r#"use redis::Commands;

fn acquire(con: &mut redis::Connection, token: &str) -> redis::RedisResult<bool> {
    let ok: bool = con
        .set_options(
            "lock:report",
            token,
            redis::SetOptions::default()
                .conditional_set(redis::ExistenceCheck::NX)
                .with_expiration(redis::SetExpiry::EX(30)),
        )?;
    Ok(ok)
}
"#;

const NO_EXPIRY: &str = r#"use redis::Commands;

fn acquire(con: &mut redis::Connection, token: &str) -> redis::RedisResult<bool> {
    let ok: bool = con.set_nx("lock:report", token)?;
    Ok(ok)
}
"#;

fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

#[test]
fn diff_prints_the_change_and_writes_nothing() {
    let dir = project(&[("a.rs", SEPARATE), ("clean.rs", "fn f() {}\n")]);
    let out = locklint(dir.path(), &["check", "--isolated", "--diff", "."]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("--- a/"), "{stdout}");
    assert!(stdout.contains("-    let _: () = con.expire(\"lock:report\", 30)?;"));
    assert!(
        stdout.contains("+    let ok: bool = con\n+        .set_options(\n"),
        "{stdout}"
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.rs")).unwrap(),
        SEPARATE
    );
}

#[test]
fn fix_applies_safe_fixes_once_and_is_idempotent() {
    let dir = project(&[("a.rs", SEPARATE), ("clean.rs", "fn f() {}\n")]);
    let clean_before = std::fs::metadata(dir.path().join("clean.rs"))
        .unwrap()
        .modified()
        .unwrap();
    let out = locklint(dir.path(), &["check", "--isolated", "--fix", "."]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.rs")).unwrap(),
        SEPARATE_FIXED
    );
    assert!(
        stdout.contains("fixed 1 finding; 0 findings remaining"),
        "{stdout}"
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let clean_after = std::fs::metadata(dir.path().join("clean.rs"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(clean_before, clean_after);
    // a second run changes nothing
    let again = locklint(dir.path(), &["check", "--isolated", "--fix", "."]);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.rs")).unwrap(),
        SEPARATE_FIXED
    );
    assert!(String::from_utf8_lossy(&again.stdout).contains("fixed 0 findings"));
}

#[test]
fn unsafe_fixes_need_the_flag() {
    let dir = project(&[("a.rs", NO_EXPIRY)]);
    let out = locklint(dir.path(), &["check", "--isolated", "--fix", "."]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.rs")).unwrap(),
        NO_EXPIRY
    );
    assert!(
        stdout.contains("1 fix available with --unsafe-fixes"),
        "{stdout}"
    );
    assert_eq!(out.status.code(), Some(1));
    let out = locklint(
        dir.path(),
        &[
            "check",
            "--isolated",
            "--fix",
            "--unsafe-fixes",
            "--default-ttl",
            "5s",
            ".",
        ],
    );
    let fixed = std::fs::read_to_string(dir.path().join("a.rs")).unwrap();
    assert!(fixed.contains("redis::SetExpiry::PX(5000)"), "{fixed}");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_read_only_file_is_reported_and_left_alone() {
    let dir = project(&[("a.rs", SEPARATE)]);
    let p = dir.path().join("a.rs");
    let mut perm = std::fs::metadata(&p).unwrap().permissions();
    perm.set_readonly(true);
    std::fs::set_permissions(&p, perm).unwrap();
    let out = locklint(dir.path(), &["check", "--isolated", "--fix", "."]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("read-only"), "{stderr}");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&p).unwrap(), SEPARATE);
}

#[test]
fn a_file_changed_during_the_run_is_not_overwritten() {
    let dir = project(&[("a.rs", SEPARATE)]);
    let p = dir.path().join("a.rs");
    let report = engine::run(&options(&p, &FLAVOURS[0], None));
    let plan = fix::plan(report, Level::Safe, &|overlay| {
        engine::run(&options(&p, &FLAVOURS[0], Some(overlay)))
    });
    assert_eq!(plan.changes.len(), 1);
    // someone edits the file between analysis and writing
    std::fs::write(&p, "// edited\n").unwrap();
    let c = &plan.changes[0];
    assert!(fix::write_atomically(&c.path, &c.original, &c.new).is_err());
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "// edited\n");
}

#[test]
fn json_shows_fixes_with_their_applicability() {
    let dir = project(&[("a.rs", SEPARATE), ("b.rs", NO_EXPIRY)]);
    let out = locklint(
        dir.path(),
        &["check", "--isolated", "--format", "json", "."],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = v.to_string();
    assert!(text.contains("\"applicability\":\"safe\""), "{text}");
    assert!(text.contains("\"applicability\":\"unsafe\""), "{text}");
}

#[test]
fn bad_fix_flags_are_usage_errors() {
    let dir = project(&[("a.rs", SEPARATE)]);
    let out = locklint(dir.path(), &["check", "--redis-version", "eight", "."]);
    assert_eq!(out.status.code(), Some(2));
    let out = locklint(dir.path(), &["check", "--default-ttl", "soon", "."]);
    assert_eq!(out.status.code(), Some(2));
}

const PLAIN_DEL: &str = r#"use redis::AsyncCommands;

pub async fn release(con: &mut redis::aio::MultiplexedConnection, token: &str) -> redis::RedisResult<()> {
    let ok: bool = con.set_nx("lock:report", token).await?;
    let _: i64 = con.del("lock:report").await?;
    Ok(())
}
"#;

#[test]
fn release_fixes_follow_the_redis_version() {
    let dir = project(&[("a.rs", PLAIN_DEL)]);
    let before = locklint(
        dir.path(),
        &[
            "check",
            "--isolated",
            "--select",
            "unconditional-release",
            "--diff",
            "--unsafe-fixes",
            ".",
        ],
    );
    let text = String::from_utf8_lossy(&before.stdout);
    assert!(
        squeezed(&added(&text)).contains("invoke_script(&redis::Script::new(COMPARE_AND_DELETE)"),
        "{text}"
    );
    let after = locklint(
        dir.path(),
        &[
            "check",
            "--isolated",
            "--select",
            "unconditional-release",
            "--diff",
            "--unsafe-fixes",
            "--redis-version",
            "8.4",
            ".",
        ],
    );
    let text = String::from_utf8_lossy(&after.stdout);
    assert!(
        squeezed(&added(&text)).contains(&squeezed(
            "del_ex(\"lock:report\", redis::ValueComparison::ifeq(token))"
        )),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.rs")).unwrap(),
        PLAIN_DEL
    );
}

/// A release through `redis::cmd` in a file with only `//!` docs before its code.
const CMD_DEL_NO_USES: &str = r#"//! Report locks.

pub async fn report(con: &mut redis::aio::MultiplexedConnection, token: &str) -> redis::RedisResult<()> {
    let won: Option<String> = redis::cmd("SET").arg("lock:report").arg(token).arg("NX").arg("PX").arg(5000).query_async(con).await?;
    if won.is_some() {
        let _: i64 = redis::cmd("DEL").arg("lock:report").query_async(con).await?;
    }
    Ok(())
}
"#;

/// The lines a unified diff adds.
fn added(diff: &str) -> String {
    diff.lines()
        .filter(|l| !l.starts_with("+++"))
        .filter_map(|l| l.strip_prefix('+'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Code without whitespace, to compare it whatever its layout.
fn squeezed(code: &str) -> String {
    code.chars().filter(|c| !c.is_whitespace()).collect()
}

fn fixed_file(text: &str) -> String {
    let dir = project(&[("a.rs", text)]);
    let out = locklint(
        dir.path(),
        &["check", "--isolated", "--fix", "--unsafe-fixes", "."],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    std::fs::read_to_string(dir.path().join("a.rs")).unwrap()
}

#[test]
fn scripts_become_constants_after_the_file_header() {
    let fixed = fixed_file(CMD_DEL_NO_USES);
    assert!(
        fixed.starts_with("//! Report locks.\n\n/// Deletes KEYS[1] only while it holds this holder's token (ARGV[1]).\nconst COMPARE_AND_DELETE: &str = \"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end\";\n\npub async fn report("),
        "{fixed}"
    );
    assert!(
        squeezed(&fixed).contains(&squeezed(
            r#"redis::cmd("EVAL").arg(COMPARE_AND_DELETE).arg(1).arg("lock:report").arg(token)"#
        )),
        "{fixed}"
    );
    // with no header at all, the constant opens the file
    let bare = CMD_DEL_NO_USES.trim_start_matches("//! Report locks.\n\n");
    let fixed = fixed_file(bare);
    assert!(
        fixed.starts_with("/// Deletes KEYS[1]") && fixed.contains("\";\n\npub async fn report("),
        "{fixed}"
    );
}

#[test]
fn a_taken_constant_name_keeps_the_script_inline() {
    // the name holds another script; or the same script, but inside a module this code
    // does not see
    let same = "const COMPARE_AND_DELETE: &str = \"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end\";";
    for definition in [
        "const COMPARE_AND_DELETE: &str = \"return 1\";".to_string(),
        format!("mod scripts {{\n    pub {same}\n}}"),
    ] {
        let taken = CMD_DEL_NO_USES.replace(
            "//! Report locks.\n",
            &format!("//! Report locks.\n{definition}\n"),
        );
        let fixed = fixed_file(&taken);
        assert_eq!(
            fixed.matches("const COMPARE_AND_DELETE").count(),
            1,
            "{fixed}"
        );
        assert!(
            squeezed(&fixed).contains(&squeezed(
                r#"redis::cmd("EVAL").arg("if redis.call('get', KEYS[1]) == ARGV[1]"#
            )),
            "{fixed}"
        );
    }
}

#[test]
fn long_fixes_are_laid_out_unless_a_comment_would_be_lost() {
    let fixed = fixed_file(SEPARATE);
    assert_eq!(fixed, SEPARATE_FIXED);
    assert!(fixed.lines().all(|l| l.len() <= 100), "{fixed}");

    // a comment inside the statement: the edit is made in place, the line stays long
    let commented = SEPARATE.replace(
        "con.set_nx(\"lock:report\", token)?",
        "con.set_nx(\"lock:report\", /* this worker */ token)?",
    );
    let fixed = fixed_file(&commented);
    assert!(fixed.contains("/* this worker */ token, redis::SetOptions::default().conditional_set(redis::ExistenceCheck::NX).with_expiration(redis::SetExpiry::EX(30)))?;"), "{fixed}");

    // a fix that fits keeps the statement's own layout
    let short = r#"fn acquire(c: &mut redis::Connection, t: &str) -> redis::RedisResult<bool> {
    let r: Option<()> = redis::cmd("SET").arg("lk:r").arg(t).arg("NX").query(c)?;
    let _: () = redis::cmd("EXPIRE").arg("lk:r").arg(30).query(c)?;
    Ok(r.is_some())
}
"#;
    let fixed = fixed_file(short);
    assert!(
        fixed.contains("\n    let r: Option<()> = redis::cmd(\"SET\").arg(\"lk:r\").arg(t).arg(\"NX\").arg(\"EX\").arg(30).query(c)?;\n    Ok(r.is_some())"),
        "{fixed}"
    );
}

const CLIENT_CLOCK_MACRO: &str = r#"pub async fn renew(pool: &sqlx::PgPool, name: &str, until: chrono::DateTime<chrono::Utc>, me: &str) -> sqlx::Result<bool> {
    let res = sqlx::query!(
        "UPDATE job_locks SET expires_at = $2 WHERE name = $1 AND owner = $3",
        name,
        until,
        me
    )
    .execute(pool)
    .await?;
    Ok(res.rows_affected() == 1)
}
"#;

#[test]
fn client_clock_fixes_drop_the_parameter_and_its_bind() {
    let dir = project(&[("a.rs", CLIENT_CLOCK_MACRO)]);
    let out = locklint(
        dir.path(),
        &[
            "check",
            "--isolated",
            "--fix",
            "--unsafe-fixes",
            "--default-ttl",
            "45s",
            ".",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let fixed = std::fs::read_to_string(dir.path().join("a.rs")).unwrap();
    assert!(
        fixed.contains(
            r#"        "UPDATE job_locks SET expires_at = (now() + interval '45 seconds') WHERE name = $1 AND owner = $2",
        name,
        me
    )"#
        ),
        "{fixed}"
    );

    // the parameter read twice, or the statement in a constant (maybe run elsewhere with
    // other binds): the fix is shown, not applied
    for text in [
        CLIENT_CLOCK_MACRO.replace("AND owner = $3", "AND owner = $3 AND $2 > now()"),
        format!(
            "const RENEW: &str = \"UPDATE job_locks SET expires_at = $2 WHERE name = $1 AND owner = $3\";\n{}",
            CLIENT_CLOCK_MACRO.replace(
                "sqlx::query!(\n        \"UPDATE job_locks SET expires_at = $2 WHERE name = $1 AND owner = $3\",\n        name,\n        until,\n        me\n    )",
                "sqlx::query(RENEW).bind(name).bind(until).bind(me)",
            )
        ),
    ] {
        let dir = project(&[("a.rs", &text)]);
        let out = locklint(
            dir.path(),
            &["check", "--isolated", "--format", "json", "."],
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let fixes: Vec<&str> = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["rule"] == "lock-table-client-clock")
            .map(|f| f["fix"]["applicability"].as_str().unwrap())
            .collect();
        assert_eq!(fixes, ["display-only"], "{text}");
    }
}
