//! Fixes: every fixable `bad_*` fixture, fixed with safe and unsafe fixes until nothing
//! changes, must equal its `bad_*.fixed` file, still parse, and no longer trigger its rule;
//! and `--fix` / `--diff` on the command line.

use locklint::diagnostic::Applicability;
use locklint::engine::{self, Options};
use locklint::fix::{self, Level};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[path = "support/bin.rs"]
mod bin;
use bin::locklint;
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
        squeezed(&added(&text)).contains(
            "redis::Script::new(COMPARE_AND_DELETE).key(\"lock:report\").arg(token).invoke_async(con).await?"
        ),
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

/// Typed redis-rs releases and renewals on connections of each kind: a `&mut` parameter, an
/// owned local, a struct field, a blocking connection.
const TYPED_SCRIPT_FIXES: &str = r#"use redis::{AsyncCommands, Commands};

pub struct Lock {
    con: redis::aio::MultiplexedConnection,
}

impl Lock {
    pub async fn release(&mut self, token: &str) -> redis::RedisResult<i64> {
        self.con.del::<_, i64>("lock:report").await
    }
}

pub async fn renew(mut con: redis::aio::MultiplexedConnection, token: &str) -> redis::RedisResult<()> {
    con.pexpire::<_, ()>("lock:report", 30_000).await?;
    Ok(())
}

pub fn release(con: &mut redis::Connection, token: &str) -> redis::RedisResult<bool> {
    let n: i32 = con.del("lock:report")?;
    Ok(n == 1)
}
"#;

/// redis-rs's `invoke_script` sends a bare `EVALSHA`, which fails with `NOSCRIPT` on a server
/// that never loaded the script: the fixes run their scripts with `Script::invoke_async` /
/// `invoke`, which load the script on `NOSCRIPT`.
#[test]
fn script_fixes_load_their_script_on_noscript() {
    let fixed = fixed_file(TYPED_SCRIPT_FIXES);
    assert!(!fixed.contains("invoke_script"), "{fixed}");
    let code = squeezed(&fixed);
    for expected in [
        // a field: borrowed; the reply type stays the turbofish's
        "redis::Script::new(COMPARE_AND_DELETE).key(\"lock:report\").arg(token).invoke_async::<i64>(&mutself.con).await",
        // an owned connection: borrowed; a dropped reply is `()`
        "redis::Script::new(COMPARE_AND_PEXPIRE).key(\"lock:report\").arg(token).arg(30_000).invoke_async::<()>(&mutcon).await?;",
        // a `&mut` parameter on a blocking connection: passed as it is, with `invoke`
        "letn:i32=redis::Script::new(COMPARE_AND_DELETE).key(\"lock:report\").arg(token).invoke(con)?;",
    ] {
        assert!(code.contains(&squeezed(expected)), "{expected}\n{fixed}");
    }
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

const CLIENT_CLOCK_COMPARE: &str = r#"use std::time::SystemTime;

pub async fn take_over(pool: &sqlx::PgPool, name: &str, me: &str) -> sqlx::Result<bool> {
    let now = SystemTime::now();
    let res = sqlx::query(
        "UPDATE job_locks SET owner = $3 WHERE name = $1 AND expires_at < $2",
    )
    .bind(name)
    .bind(now)
    .bind(me)
    .execute(pool)
    .await?;
    Ok(res.rows_affected() == 1)
}
"#;

#[test]
fn client_clock_fixes_drop_the_parameter_and_its_bind() {
    // the compared time: `now()`, the bind and the clock read that fed it go, `$3` becomes `$2`
    let fixed = fixed_file(CLIENT_CLOCK_COMPARE);
    assert_eq!(
        fixed,
        r#"
pub async fn take_over(pool: &sqlx::PgPool, name: &str, me: &str) -> sqlx::Result<bool> {
    let res = sqlx::query(
        "UPDATE job_locks SET owner = $2 WHERE name = $1 AND expires_at < now()",
    )
    .bind(name)
    .bind(me)
    .execute(pool)
    .await?;
    Ok(res.rows_affected() == 1)
}
"#
    );
    // the clock read is used again later: it stays, and so does its import
    let logged = CLIENT_CLOCK_COMPARE.replace(
        "    Ok(res.rows_affected() == 1)",
        "    log::info!(\"{now:?}\");\n    Ok(res.rows_affected() == 1)",
    );
    let fixed = fixed_file(&logged);
    assert!(fixed.contains("let now = SystemTime::now();"), "{fixed}");
    assert!(fixed.starts_with("use std::time::SystemTime;"), "{fixed}");
    // a clock read with effects, or a parameter, cannot be left unused: shown only
    for text in [
        CLIENT_CLOCK_COMPARE.replace("SystemTime::now()", "clock.read().await"),
        CLIENT_CLOCK_COMPARE
            .replace("    let now = SystemTime::now();\n", "")
            .replace("me: &str)", "me: &str, now: SystemTime)"),
    ] {
        assert_eq!(applicabilities(&text), ["display-only"], "{text}");
    }

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
        assert_eq!(applicabilities(&text), ["display-only"], "{text}");
    }
}

/// The applicability of every `lock-table-client-clock` fix in a file.
fn applicabilities(text: &str) -> Vec<String> {
    let dir = project(&[("a.rs", text)]);
    let out = locklint(
        dir.path(),
        &["check", "--isolated", "--format", "json", "."],
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "lock-table-client-clock")
        .map(|f| f["fix"]["applicability"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn fix_handles_a_file_as_deep_as_check_does() {
    // a chain as long as the depth guard lets through: the fixed text is parsed again on
    // the analysis threads' large stack, not the main thread's
    let chain = vec!["x"; 1_400].join(" + ");
    let text = format!(
        "// locklint: allow(get-then-set) -- nothing here reads then writes\npub fn total(x: u64) -> u64 {{\n    {chain}\n}}\n"
    );
    let dir = project(&[("a.rs", &text)]);
    let out = locklint(dir.path(), &["check", "--isolated", "--fix", "."]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let fixed = std::fs::read_to_string(dir.path().join("a.rs")).unwrap();
    assert_eq!(fixed, text.split_once('\n').unwrap().1);
}

#[cfg(unix)]
#[test]
fn fix_through_a_symlink_fixes_its_target_and_keeps_the_link() {
    let dir = project(&[]);
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/a.rs"), SEPARATE).unwrap();
    std::os::unix::fs::symlink("src/a.rs", dir.path().join("link.rs")).unwrap();
    let out = locklint(dir.path(), &["check", "--isolated", "--fix", "link.rs"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let link = dir.path().join("link.rs");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/a.rs")).unwrap(),
        SEPARATE_FIXED
    );
}

#[cfg(unix)]
#[test]
fn fix_keeps_hard_links_and_the_owner() {
    use std::os::unix::fs::MetadataExt;
    let dir = project(&[("a.rs", SEPARATE)]);
    let p = dir.path().join("a.rs");
    std::fs::hard_link(&p, dir.path().join("b.txt")).unwrap();
    // tests run as root in CI: the file belongs to another user
    let other = std::os::unix::fs::chown(&p, Some(65534), Some(65534)).is_ok();
    let out = locklint(dir.path(), &["check", "--isolated", "--fix", "a.rs"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("b.txt")).unwrap(),
        SEPARATE_FIXED
    );
    let m = std::fs::metadata(&p).unwrap();
    assert_eq!(m.nlink(), 2);
    if other {
        assert_eq!((m.uid(), m.gid()), (65534, 65534));
    }
    // one link: the fixed text is renamed over the file, with its owner
    std::fs::remove_file(dir.path().join("b.txt")).unwrap();
    std::fs::write(&p, SEPARATE).unwrap();
    let out = locklint(dir.path(), &["check", "--isolated", "--fix", "a.rs"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&p).unwrap(), SEPARATE_FIXED);
    if other {
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!((m.uid(), m.gid()), (65534, 65534));
    }
}

/// Fixtures whose fix would change what the code means apart from the defect: the fix is
/// shown only (with its reason in the message), or not offered where it would be wrong.
#[test]
fn fixes_that_would_change_the_meaning_are_not_applied() {
    use Applicability::DisplayOnly;
    let cases: &[(&str, &str, Option<Applicability>, &str)] = &[
        // ARGV[1] is the TTL: a guard may not compare the lock with it
        (
            "lua-renew-no-compare",
            "bad_pexpire_ttl_is_argv1.rs",
            Some(DisplayOnly),
            "pass the token as `ARGV[2]`",
        ),
        // no call site: nothing says ARGV[1] is the token
        (
            "lua-renew-no-compare",
            "bad_renew_lock_plain_pexpire.lua",
            Some(DisplayOnly),
            "pass the token as `ARGV[1]`",
        ),
        // a hash (GET fails with WRONGTYPE), several keys (GET takes one)
        ("lua-release-no-compare", "bad_hash_owner_hget.rs", None, ""),
        ("lua-release-no-compare", "bad_multi_key_mget.rs", None, ""),
        // a client that is not redis-rs: no redis-rs calls written on it
        ("unconditional-release", "bad_cache_client_del.rs", None, ""),
        // the caller's duration is not in the code: the TTL would be a guess
        (
            "lock-table-client-clock",
            "bad_renew_client_time_sqlx.rs",
            Some(DisplayOnly),
            "keep the lock's own duration",
        ),
    ];
    for (rule, name, applicability, message) in cases {
        let path = fixtures_root().join(rule).join(name);
        let report = engine::run(&options(&relative(&path), &FLAVOURS[0], None));
        let found: Vec<_> = report.findings.iter().filter(|d| d.rule == *rule).collect();
        assert!(!found.is_empty(), "{name}: {rule} does not fire");
        for d in found {
            assert_eq!(
                d.fix.as_ref().map(|f| f.applicability),
                *applicability,
                "{name}: {:?}",
                d.fix
            );
            if let Some(f) = &d.fix {
                assert!(f.message.contains(message), "{name}: {}", f.message);
            }
        }
    }
}

#[test]
fn a_fence_guard_is_added_once_with_mixed_placeholders() {
    let sql = "CREATE TABLE documents (id BIGINT PRIMARY KEY, body TEXT, fence BIGINT NOT NULL);\n\nUPDATE documents SET body = ?, fence = $2 WHERE id = ?;\n";
    let dir = project(&[("a.sql", sql)]);
    let out = locklint(dir.path(), &["check", "--isolated", "--fix", "a.sql"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("still changing"), "{stderr}");
    let fixed = std::fs::read_to_string(dir.path().join("a.sql")).unwrap();
    // at most one guard (the fix may also be only shown: `$2` shares the statement with `?`)
    assert!(fixed.matches("AND fence <").count() <= 1, "{fixed}");
    // a second run adds nothing
    locklint(dir.path(), &["check", "--isolated", "--fix", "a.sql"]);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.sql")).unwrap(),
        fixed
    );
}

#[test]
fn long_fixes_in_conditions_are_laid_out() {
    let text = r#"pub async fn release(con: &mut redis::aio::MultiplexedConnection, job: u64, token: &str) -> redis::RedisResult<bool> {
    let key = format!("lock:report-generation:{job}");
    if redis::cmd("DEL").arg(&key).query_async::<i32>(&mut *con).await? == 1 {
        return Ok(true);
    }
    Ok(false)
}
"#;
    let fixed = fixed_file(text);
    assert!(
        fixed.contains(
            "    if redis::cmd(\"EVAL\")\n        .arg(COMPARE_AND_DELETE)\n        .arg(1)\n        .arg(&key)\n        .arg(token)\n        .query_async::<i32>(&mut *con)\n        .await? == 1 {\n        return Ok(true);"
        ),
        "{fixed}"
    );
    let body = fixed.split_once("pub async fn").unwrap().1;
    assert!(body.lines().skip(1).all(|l| l.len() <= 100), "{fixed}");
}

/// A helper releasing with a plain `DEL`, and callers that reach it `calls` times in one
/// function and once from each of `callers` other functions.
fn helper_called(calls: usize, callers: usize) -> String {
    let mut src = String::from(
        "use redis::Commands;\n\npub fn release(con: &mut redis::Connection, key: &str, token: &str) -> redis::RedisResult<()> {\n    let _ = token;\n    let _: () = con.del(key)?;\n    Ok(())\n}\n",
    );
    src.push_str(
        "\npub fn many(con: &mut redis::Connection, token: &str) -> redis::RedisResult<()> {\n",
    );
    for i in 0..calls {
        src.push_str(&format!("    release(con, \"lock:job:{i}\", token)?;\n"));
    }
    src.push_str("    Ok(())\n}\n");
    for c in 0..callers {
        src.push_str(&format!(
            "\npub fn caller_{c}(con: &mut redis::Connection, token: &str) -> redis::RedisResult<()> {{\n    release(con, \"lock:report:{c}\", token)\n}}\n"
        ));
    }
    src
}

#[test]
fn a_defect_reached_from_many_callers_gets_the_fix_it_gets_alone() {
    let fixes_of = |src: String| {
        let dir = project(&[("locks.rs", &src)]);
        let report = engine::run(&Options {
            paths: vec![dir.path().join("locks.rs")],
            ..Default::default()
        });
        let found: Vec<_> = report
            .findings
            .iter()
            .filter(|d| d.rule == "unconditional-release")
            .map(|d| {
                let fix = d.fix.as_ref().expect("the finding has its fix");
                let edits: Vec<(usize, usize, String)> = fix
                    .edits
                    .iter()
                    .map(|e| {
                        (
                            e.location.span.start,
                            e.location.span.end,
                            e.replacement.clone(),
                        )
                    })
                    .collect();
                (d.primary.span.start, fix.applicability, edits)
            })
            .collect();
        found
    };
    let alone = fixes_of(helper_called(0, 0));
    assert_eq!(alone.len(), 1);
    assert_eq!(alone[0].1, Applicability::Unsafe);
    // the helper's text comes first, so its spans do not move with the callers
    assert_eq!(fixes_of(helper_called(300, 0)), alone);
    assert_eq!(fixes_of(helper_called(40, 40)), alone);
}

/// The findings of a JSON report, each without its fix (a fixed file's fixes are the same;
/// comparing the rest is enough) and the summary.
fn json_findings(stdout: &[u8]) -> (Vec<serde_json::Value>, serde_json::Value) {
    let v: serde_json::Value = serde_json::from_slice(stdout).expect("JSON report");
    let findings = v["findings"].as_array().expect("findings").clone();
    (findings, v["summary"].clone())
}

#[test]
fn the_report_after_fix_is_what_a_new_check_reports() {
    // one file fixed whole, one fixed in part (its constant value stays), one left alone
    let partly = r#"use redis::Commands;

fn acquire(con: &mut redis::Connection) -> redis::RedisResult<bool> {
    let ok: bool = con.set_nx("lock:export", "1")?;
    let _: () = con.expire("lock:export", 30)?;
    Ok(ok)
}
"#;
    let dir = project(&[("a.rs", SEPARATE), ("b.rs", partly), ("c.rs", NO_EXPIRY)]);
    let out = locklint(
        dir.path(),
        &["check", "--isolated", "--fix", "--format", "json", "."],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_ne!(
        std::fs::read_to_string(dir.path().join("b.rs")).unwrap(),
        partly
    );
    let (after_fix, summary) = json_findings(&out.stdout);
    let fresh = locklint(
        dir.path(),
        &["check", "--isolated", "--format", "json", "."],
    );
    let (fresh, fresh_summary) = json_findings(&fresh.stdout);
    assert_eq!(after_fix, fresh);
    assert!(!fresh.is_empty());
    assert_eq!(summary["findings"], fresh_summary["findings"]);
    assert_eq!(summary["files"], fresh_summary["files"]);
    let rules: Vec<&str> = fresh.iter().filter_map(|f| f["rule"].as_str()).collect();
    assert!(!rules.contains(&"separate-expire"), "{rules:?}");
}
