//! Large SQL and Lua inputs are analysed in time linear in their size, with the same findings
//! as small ones. Each input here is large enough that quadratic work (re-lexing a whole text
//! per finding, pairing every lock with every unlock, scanning every local per lookup) would
//! take minutes; the tests assert the findings, not the time.

use locklint::diagnostic::Diagnostic;
use locklint::engine::{self, Options};
use locklint::frontend;
use locklint::source::SourceFile;

fn analyse(path: &str, text: String) -> Vec<Diagnostic> {
    let irs = vec![frontend::analyze(0, SourceFile::new(path.into(), text))];
    engine::findings(&irs, &Options::default())
}

fn count(found: &[Diagnostic], rule: &str) -> usize {
    found.iter().filter(|d| d.rule == rule).count()
}

const LOCK_TABLE: &str = "CREATE TABLE job_locks (name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at TIMESTAMPTZ NOT NULL);\n";

/// A renewal that writes the client's time: one `lock-table-client-clock` finding.
const CLIENT_CLOCK_RENEW: &str =
    "UPDATE job_locks SET expires_at = $3 WHERE name = $1 AND owner = $2;\n";

#[test]
fn many_identical_lock_table_updates_in_one_sql_file() {
    let n = 20_000;
    let text = format!("{LOCK_TABLE}{}", CLIENT_CLOCK_RENEW.repeat(n));
    let found = analyse("locks.sql", text);
    assert_eq!(count(&found, "lock-table-client-clock"), n);
    assert_eq!(found.len(), n, "{:#?}", &found[..3.min(found.len())]);
}

#[test]
fn one_rust_literal_holding_thousands_of_statements() {
    let n = 10_000;
    let text = format!(
        "pub async fn renew(pool: &sqlx::PgPool) -> sqlx::Result<()> {{\n    sqlx::query(r\"{LOCK_TABLE}{}\").execute(pool).await?;\n    Ok(())\n}}\n",
        CLIENT_CLOCK_RENEW.repeat(n)
    );
    let found = analyse("src/renew.rs", text);
    assert_eq!(count(&found, "lock-table-client-clock"), n);
    // each finding points at its own statement
    let mut lines: Vec<usize> = found
        .iter()
        .filter(|d| d.rule == "lock-table-client-clock")
        .map(|d| d.primary.start().line)
        .collect();
    lines.dedup();
    assert_eq!(lines.len(), n);
}

#[test]
fn thousands_of_advisory_lock_statements() {
    let n = 20_000;
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!("SELECT pg_advisory_lock({i});\n"));
    }
    // every other lock is released, one of them in shared mode (which does not release it)
    for i in (0..n).step_by(2) {
        text.push_str(&format!("SELECT pg_advisory_unlock({i});\n"));
    }
    text.push_str("SELECT pg_advisory_unlock_shared(1);\n");
    let found = analyse("jobs.sql", text);
    assert_eq!(count(&found, "advisory-lock-unbalanced"), n / 2);
    assert_eq!(found.len(), n / 2);
}

/// A release script of `k` top-level parts, each a local bound to the lock key and a delete
/// through it that no comparison guards.
fn long_release_script(k: usize) -> String {
    let mut s = String::from("local token = ARGV[1]\n");
    for i in 0..k {
        s.push_str(&format!(
            "local key{i} = KEYS[1]\nlocal count{i} = tonumber(ARGV[2]) + {i}\nif count{i} > 0 then\n  redis.call('del', key{i})\nend\n"
        ));
    }
    s
}

#[test]
fn a_long_lua_file_is_analysed_whole() {
    // about 1 MB: many top-level locals, each looked up again
    let k = 12_000;
    let script = long_release_script(k);
    assert!(script.len() > 1_000_000, "{}", script.len());
    let found = analyse("release_lock.lua", script);
    assert_eq!(count(&found, "lua-release-no-compare"), k);
    assert_eq!(found.len(), k);
    // each finding is the delete of its own part
    let first = found.iter().map(|d| d.primary.start().line).min();
    assert_eq!(first, Some(5));
}

#[test]
fn a_guard_at_the_top_of_a_long_script_covers_its_end() {
    let mut script = String::from(
        "if redis.call('get', KEYS[1]) ~= ARGV[1] then\n  return 0\nend\nlocal lock = KEYS[1]\n",
    );
    for i in 0..20_000 {
        script.push_str(&format!(
            "local v{i} = redis.call('hget', KEYS[2], 'f{i}')\n"
        ));
    }
    script.push_str("return redis.call('del', lock)\n");
    assert!(script.len() > 500_000);
    let found = analyse("release_lock.lua", script.clone());
    assert!(found.is_empty(), "{found:#?}");
    // without the guard, the delete at the end is reported
    let unguarded = script.replacen("~= ARGV[1]", "== nil", 1);
    let found = analyse("release_lock.lua", unguarded);
    assert_eq!(count(&found, "lua-release-no-compare"), 1, "{found:#?}");
    assert_eq!(found[0].primary.start().line, 20_005);
}

#[test]
fn a_syntax_error_deep_in_a_long_script_is_located() {
    let mut script = long_release_script(8_000);
    let line = script.lines().count() + 1;
    script.push_str("local broken = (1 +\n");
    script.push_str(&long_release_script(100));
    let found = analyse("release_lock.lua", script);
    let parse: Vec<_> = found.iter().filter(|d| d.rule == "parse-error").collect();
    assert_eq!(parse.len(), 1, "{parse:#?}");
    assert!(
        parse[0].primary.start().line >= line,
        "{:?}",
        parse[0].primary.start()
    );
    assert!(parse[0].primary.start().line <= line + 1);
}
