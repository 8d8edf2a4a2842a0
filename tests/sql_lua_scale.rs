//! Large SQL and Lua inputs are analysed in time linear in their size, with the same findings
//! as small ones. Each input here is large enough that quadratic work (re-lexing a whole text
//! per finding, pairing every lock with every unlock, scanning every local per lookup) would
//! take minutes; the tests assert the findings, not the time.

use locklint::diagnostic::Diagnostic;
use locklint::engine::{self, Options};
use locklint::frontend;
use locklint::source::SourceFile;

/// Analyse one file on a thread with the stack the engine gives its analysis threads (a long
/// `OR` chain is a deep syntax tree).
fn analyse(path: &str, text: String) -> Vec<Diagnostic> {
    let path = path.to_string();
    std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(move || {
            let irs = vec![frontend::analyze(0, SourceFile::new(path.into(), text))];
            engine::findings(&irs, &Options::default())
        })
        .unwrap()
        .join()
        .unwrap()
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

fn on_line(found: &[Diagnostic], rule: &str) -> Vec<usize> {
    found
        .iter()
        .filter(|d| d.rule == rule)
        .map(|d| d.primary.start().line)
        .collect()
}

#[test]
fn a_statement_past_the_token_limit_is_a_parse_error_and_its_neighbours_are_analysed() {
    let limit = locklint::frontend::sql::statements::MAX_STATEMENT_TOKENS;
    // `a +` is two tokens
    let long = format!("SELECT {}1;\n", "a + ".repeat(limit / 2 + 10));
    let text = format!("SELECT pg_advisory_lock(1);\n{long}SELECT pg_advisory_lock(2);\n");
    let found = analyse("locks.sql", text);
    assert_eq!(
        on_line(&found, "advisory-lock-unbalanced"),
        [1, 3],
        "{found:#?}"
    );
    assert_eq!(on_line(&found, "parse-error"), [2], "{found:#?}");
    assert_eq!(found.len(), 3);
    let error = found.iter().find(|d| d.rule == "parse-error").unwrap();
    assert!(error.message.contains("tokens"), "{}", error.message);
}

#[test]
fn a_long_statement_within_the_token_limit_is_analysed() {
    // a generated `IN` list and a long `OR` chain under the limit parse as usual
    let list: Vec<String> = (0..15_000).map(|i| i.to_string()).collect();
    let ors: Vec<String> = (0..4_000).map(|i| format!("id = {i}")).collect();
    let text = format!(
        "{LOCK_TABLE}UPDATE job_locks SET expires_at = $3 WHERE name IN ({}) AND owner = $2 AND ({});\n",
        list.join(", "),
        ors.join(" OR ")
    );
    let found = analyse("locks.sql", text);
    assert_eq!(
        on_line(&found, "lock-table-client-clock"),
        [2],
        "{found:#?}"
    );
    assert_eq!(found.len(), 1);
}

#[test]
fn parse_errors_of_many_statements_are_each_placed_on_their_own_token() {
    let n = 5_000;
    let text: String = (0..n)
        .map(|i| format!("UPDATE jobs SET a = 1 WHERE id = {i} AND b = = 2;\n"))
        .collect();
    let found = analyse("jobs.sql", text);
    let errors: Vec<_> = found.iter().filter(|d| d.rule == "parse-error").collect();
    // the first hundred one by one, then one that counts the rest, at the next statement
    assert_eq!(errors.len(), 101);
    for (i, d) in errors.iter().enumerate() {
        let at = d.primary.start();
        assert_eq!(at.line, i + 1);
        if i == 100 {
            assert!(
                d.message
                    .starts_with(&format!("this and {} more SQL statements", n - 101)),
                "{}",
                d.message
            );
            continue;
        }
        // the second `=`
        let col = format!("UPDATE jobs SET a = 1 WHERE id = {i} AND b = ").len() + 1;
        assert_eq!(at.column, col, "{}", d.message);
    }
}

#[test]
fn comparisons_nested_in_comparisons_are_refused_and_the_rest_is_analysed() {
    // `a = a = a ..` parses as comparisons nested in their left operands: analysing each
    // operand took time quadratic in the chain
    let text = format!(
        "{LOCK_TABLE}UPDATE job_locks SET owner = $1 WHERE name{};\n{CLIENT_CLOCK_RENEW}",
        " = name".repeat(30_000)
    );
    let found = analyse("locks.sql", text);
    assert_eq!(on_line(&found, "parse-error"), [2], "{found:#?}");
    assert_eq!(
        on_line(&found, "lock-table-client-clock"),
        [3],
        "{found:#?}"
    );
    assert_eq!(found.len(), 2);
}

#[test]
fn unbalanced_calls_in_one_statement() {
    // every `pg_advisory_lock(` opens a parenthesis that is never closed
    let n = 40_000;
    let text = format!(
        "SELECT pg_advisory_lock(7);\nSELECT {}1;\nSELECT pg_advisory_unlock(7);\n",
        "pg_advisory_lock(".repeat(n)
    );
    let found = analyse("locks.sql", text);
    assert_eq!(on_line(&found, "parse-error"), [2], "{found:#?}");
    assert!(
        on_line(&found, "advisory-lock-unbalanced").is_empty(),
        "{found:#?}"
    );
}

/// A PL/pgSQL function whose body nests `n` `IF .. THEN` around one advisory lock: one
/// statement of `3 n` tokens for the body's splitter.
fn nested_ifs(n: usize) -> String {
    format!(
        "CREATE FUNCTION f() RETURNS void AS $$\nBEGIN\n{}PERFORM pg_advisory_lock(1);\n{}END;\n$$ LANGUAGE plpgsql;\n",
        "IF a THEN\n".repeat(n),
        "END IF;\n".repeat(n)
    )
}

#[test]
fn runs_of_if_and_end_if_in_a_plpgsql_body() {
    // `3 n` tokens, under the statement limit
    let n = 16_000;
    let found = analyse("locks.sql", nested_ifs(n));
    assert_eq!(
        on_line(&found, "advisory-lock-unbalanced"),
        [n + 3],
        "{found:#?}"
    );
    assert_eq!(found.len(), 1);
    // many bodies, each ending its block with `END $$`
    let body = "DO $$ BEGIN IF a THEN PERFORM pg_advisory_lock(2); END IF; END $$;\n";
    let found = analyse("locks.sql", body.repeat(n));
    assert_eq!(
        count(&found, "advisory-lock-unbalanced"),
        n,
        "{:#?}",
        &found[..2]
    );
}

#[test]
fn a_long_script_of_top_level_calls_is_parsed_in_pieces() {
    // about 600 KB of valid Lua with no `local`, `if` or `return` to split at
    let mut script = String::new();
    let mut calls = 0;
    while script.len() < 600_000 {
        script.push_str("redis.call('GET', KEYS[1])\n");
        calls += 1;
    }
    script.push_str("redis.call('DEL', KEYS[1])\n");
    let pieces = locklint::frontend::lua::guard::pieces(&script).unwrap();
    assert!(pieces.len() > 4, "{} pieces", pieces.len());
    let found = analyse("release_lock.lua", script);
    assert_eq!(count(&found, "parse-error"), 0, "{found:#?}");
    assert_eq!(
        on_line(&found, "lua-release-no-compare"),
        [calls + 1],
        "{found:#?}"
    );
    assert_eq!(found.len(), 1);
}

#[test]
fn statements_split_across_lines_and_semicolons_stay_whole() {
    // names after a value start a statement; an operator, `.`, `:` or an open bracket does not
    let unit =
        "redis.call('GET', KEYS[1]); x = a\n  .b\n  :c(1)\n  + d\nredis.call('SET', KEYS[2], x)\n";
    let script = format!(
        "if redis.call('get', KEYS[1]) == ARGV[1] then\n{}  redis.call('del', KEYS[1])\nend\n{}",
        unit.repeat(2),
        unit.repeat(200_000 / unit.len() + 1)
    );
    assert!(script.len() > 200_000);
    let found = analyse("release_lock.lua", script);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn a_top_level_statement_past_the_piece_limit_is_a_parse_error() {
    // one `do .. end` block of about 300 KB, between two healthy parts
    let mut script = String::from("redis.call('del', KEYS[1])\n");
    script.push_str("do\n");
    while script.len() < 320_000 {
        script.push_str("  redis.call('GET', KEYS[2])\n");
    }
    script.push_str("end\nredis.call('del', KEYS[3])\n");
    let found = analyse("release_lock.lua", script);
    let errors: Vec<_> = found.iter().filter(|d| d.rule == "parse-error").collect();
    assert_eq!(errors.len(), 1, "{found:#?}");
    assert_eq!(errors[0].primary.start().line, 2, "{}", errors[0].message);
}

#[test]
fn a_long_broken_statement_is_refused_before_the_parser_recovers_from_it() {
    // found by fuzzing (`lua` target): the parser's recovery from an `if` whose condition
    // breaks at once (`if n =f n =f ..`) kept about a kilobyte per byte of what followed
    let mut script = String::from("local n = redis.call('incr', KEYS[1])\nif n ");
    while script.len() < 100_000 {
        script.push_str("=f n ");
    }
    script.push_str("then\n  redis.call('del', KEYS[1])\nend\n");
    let found = analyse("limiter.lua", script);
    let errors: Vec<_> = found.iter().filter(|d| d.rule == "parse-error").collect();
    assert_eq!(errors.len(), 1, "{found:#?}");
    assert_eq!(errors[0].primary.start().line, 2, "{}", errors[0].message);
    assert!(
        errors[0].message.contains("longer than 32 KB"),
        "{}",
        errors[0].message
    );
    // broken within the bound, it is the parser's error that is reported
    let short = "local n = redis.call('incr', KEYS[1])\nif n =f n =f n then\nend\n";
    let found = analyse("limiter.lua", short.to_string());
    assert!(
        found
            .iter()
            .any(|d| d.rule == "parse-error" && d.message.contains("expected `then`")),
        "{found:#?}"
    );
}

#[test]
fn a_redis_call_of_many_tokens() {
    // found by fuzzing (`lua` target): the end of a call was found by walking its tokens from
    // the first, which the parser's token iterator does in time quadratic in their number
    // (20,000 arguments: the statement stays under the 32 KB a top-level statement may take)
    let script = format!(
        "redis.call('get', KEYS[1])\nredis.call('del', KEYS[1], {{{}}})\n",
        "1, ".repeat(10_000)
    );
    let found = analyse("release_lock.lua", script.clone());
    assert_eq!(on_line(&found, "lua-release-no-compare"), [2], "{found:#?}");
    let d = found
        .iter()
        .find(|d| d.rule == "lua-release-no-compare")
        .unwrap();
    // the finding covers the whole call, to its closing parenthesis
    assert_eq!(d.primary.span.end, script.len() - 1);
}
