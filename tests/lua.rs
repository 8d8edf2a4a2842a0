//! Lua scripts: parse problems are located exactly and do not stop the rest of the file, the
//! canonical release and renew scripts (and the runtime crate's own) stay silent, and unguarded
//! deletes and expiry changes of lock keys are reported inside the Rust literal or `.lua` file.

use locklint::diagnostic::Diagnostic;
use locklint::engine::{self, Options};
use locklint::frontend;
use locklint::source::SourceFile;

fn run(files: &[(&str, &str)]) -> Vec<Diagnostic> {
    let irs: Vec<_> = files
        .iter()
        .enumerate()
        .map(|(i, (p, t))| frontend::analyze(i, SourceFile::new((*p).into(), (*t).to_string())))
        .collect();
    engine::findings(&irs, &Options::default())
}

fn at(d: &Diagnostic) -> (usize, usize) {
    let lc = d.primary.file.line_col(d.primary.span.start);
    (lc.line, lc.column)
}

const MALFORMED: &str = r####"use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;

pub async fn release_lock(con: &mut MultiplexedConnection, key: &str, token: &str) -> redis::RedisResult<i32> {
    redis::Script::new("if redis.call('get', KEYS[1]) == ARGV[1] then\n  return redis.call('del', KEYS[1]\nend")
        .key(key)
        .arg(token)
        .invoke_async(con)
        .await
}

pub async fn unlock(con: &mut MultiplexedConnection, key: &str) -> redis::RedisResult<i32> {
    redis::Script::new("return redis.call('del', KEYS[1])").key(key).invoke_async(con).await
}

pub async fn drop_lock(con: &mut MultiplexedConnection) -> redis::RedisResult<()> {
    con.del::<_, ()>("lock:nightly").await
}
"####;

#[test]
fn malformed_embedded_script_is_located_and_the_rest_is_analysed() {
    let found = run(&[("src/locks.rs", MALFORMED)]);
    let parse: Vec<_> = found.iter().filter(|d| d.rule == "parse-error").collect();
    assert_eq!(parse.len(), 1, "{found:#?}");
    // inside the literal, after the `\n` escape: line 4 of the file
    let p = parse[0];
    assert!(p.message.contains("embedded Lua script"), "{}", p.message);
    let (line, col) = at(p);
    assert_eq!(line, 5);
    let src_line = MALFORMED.lines().nth(4).unwrap();
    let start = src_line.find("redis.call('del'").unwrap() + "redis.call".len();
    assert_eq!(col, start + 1, "{}", p.message);
    // the other script in the same file is still checked
    let lua: Vec<_> = found
        .iter()
        .filter(|d| d.rule == "lua-release-no-compare")
        .collect();
    assert_eq!(lua.len(), 1, "{found:#?}");
    assert_eq!(at(lua[0]), (13, 32));
    assert!(
        found.iter().any(|d| d.rule == "unconditional-release"),
        "{found:#?}"
    );
    assert_eq!(
        lua[0].primary.file.snippet(lua[0].primary.span),
        "redis.call('del', KEYS[1])"
    );
}

#[test]
fn malformed_lua_file_is_located() {
    let text = "-- release\nif redis.call('get', KEYS[1]) = ARGV[1] then\n  return redis.call('del', KEYS[1])\nend\n";
    let found = run(&[("release_lock.lua", text)]);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].rule, "parse-error");
    assert_eq!(at(&found[0]), (2, 31));
}

#[test]
fn lua_files_that_are_not_redis_scripts_may_use_newer_lua() {
    let text =
        "for i = 1, 3 do\n  if i == 2 then goto continue end\n  print(i)\n  ::continue::\nend\n";
    assert!(run(&[("plugin/init.lua", text)]).is_empty());
}

/// Every letter case and comparison order of the canonical scripts.
fn canonical_scripts() -> Vec<String> {
    let mut out = Vec::new();
    for (get, del, pexpire) in [
        ("get", "del", "pexpire"),
        ("GET", "DEL", "PEXPIRE"),
        ("Get", "Unlink", "Expire"),
    ] {
        for cmp in [
            format!("redis.call('{get}', KEYS[1]) == ARGV[1]"),
            format!("ARGV[1] == redis.call(\"{get}\", KEYS[1])"),
            format!("tostring(redis.call('{get}', KEYS[1])) == tostring(ARGV[1])"),
        ] {
            out.push(format!(
                "if {cmp} then return redis.call('{del}', KEYS[1]) end return 0"
            ));
            out.push(format!(
                "if {cmp} then\n  return redis.call('{pexpire}', KEYS[1], ARGV[2])\nelse\n  return 0\nend"
            ));
            let ne = cmp.replace("==", "~=");
            out.push(format!(
                "if {ne} then return 0 end\nreturn redis.call('{pexpire}', KEYS[1], ARGV[2])"
            ));
            out.push(format!(
                "if {ne} then return 0 else return redis.call('{del}', KEYS[1]) end"
            ));
            out.push(format!(
                "if redis.call('exists', KEYS[1]) == 1 and {cmp} then return redis.call('{del}', KEYS[1]) end return 0"
            ));
        }
    }
    out
}

#[test]
fn canonical_scripts_are_silent_in_lua_files_and_rust_literals() {
    for script in canonical_scripts() {
        let rust = format!(
            "pub async fn release_lock(con: &mut redis::aio::MultiplexedConnection, key: &str) -> redis::RedisResult<i32> {{\n    redis::Script::new(r#\"{script}\"#).key(key).invoke_async(con).await\n}}\n"
        );
        let found = run(&[("release_lock.lua", &script), ("src/lock.rs", &rust)]);
        assert!(found.is_empty(), "{script}\n{found:#?}");
    }
}

#[test]
fn unguarded_versions_of_the_canonical_scripts_are_reported() {
    for script in canonical_scripts() {
        // compared with a constant instead of the caller's token: no ownership check
        let broken = script.replace("ARGV[1]", "'held'");
        let found = run(&[("release_lock.lua", &broken)]);
        assert_eq!(found.len(), 1, "{broken}\n{found:#?}");
        assert!(found[0].rule.starts_with("lua-"), "{broken}");
        assert!(
            found[0]
                .primary
                .file
                .snippet(found[0].primary.span)
                .starts_with("redis.call("),
            "{broken}"
        );
    }
}

#[test]
fn the_runtime_crate_scripts_are_silent() {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/runtime/src/redis_lock/scripts.rs"
    ))
    .unwrap();
    let mut scripts = Vec::new();
    let mut rest = src.as_str();
    while let Some(i) = rest.find("r\"") {
        let after = &rest[i + 2..];
        let end = after.find('"').unwrap();
        scripts.push(after[..end].to_string());
        rest = &after[end + 1..];
    }
    assert!(scripts.len() >= 3, "{scripts:?}");
    assert!(scripts.iter().any(|s| s.contains("'del'")));
    assert!(scripts.iter().any(|s| s.contains("'pexpire'")));
    for s in &scripts {
        let found = run(&[("release_lock.lua", s), ("renew_lease.lua", s)]);
        assert!(found.is_empty(), "{s}\n{found:#?}");
    }
    // and the crate as a whole
    let report = engine::run(&Options {
        paths: vec![concat!(env!("CARGO_MANIFEST_DIR"), "/runtime/src").into()],
        ..Default::default()
    });
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
}

#[test]
fn cache_scripts_without_a_lock_name_or_read_are_silent() {
    let script = "for _, k in ipairs(KEYS) do redis.call('del', k) end\nreturn #KEYS";
    assert!(run(&[("invalidate.lua", script)]).is_empty());
    let found = run(&[("release_locks.lua", script)]);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].message.contains("`k`"), "{}", found[0].message);
    let rate = "local n = redis.call('incr', KEYS[1])\nif n == 1 then redis.call('expire', KEYS[1], ARGV[1]) end\nreturn n";
    assert!(run(&[("rate_limit.lua", rate)]).is_empty());
}

#[test]
fn pathological_nesting_is_refused_before_parsing() {
    let text = format!(
        "redis.call('get', KEYS[1])\n{}return 1{}",
        "do ".repeat(100_000),
        " end".repeat(100_000)
    );
    let found = run(&[("release_lock.lua", &text)]);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].rule, "parse-error");
    assert!(
        found[0].message.contains("levels deep"),
        "{}",
        found[0].message
    );
    assert_eq!(at(&found[0]), (2, 3 * 256 + 1));
}

#[test]
fn escapes_outside_strings_are_a_parse_error_at_the_first_backslash() {
    // `\u{e9}` written outside a Lua string: the parser is not run on it (it kept hundreds of
    // bytes per byte of such a script), and the other script of the file is analysed
    let escapes = "\\\\u{e9}".repeat(2000);
    let rust = format!(
        "pub fn broken() -> redis::Script {{\n    redis::Script::new(\"local v = redis.call('get', KEYS[1]) {escapes}\")\n}}\n\npub async fn unlock(con: &mut redis::aio::MultiplexedConnection, key: &str) -> redis::RedisResult<i32> {{\n    redis::Script::new(\"return redis.call('del', KEYS[1])\").key(key).invoke_async(con).await\n}}\n"
    );
    let found = run(&[("src/locks.rs", &rust)]);
    let parse: Vec<_> = found.iter().filter(|d| d.rule == "parse-error").collect();
    assert_eq!(parse.len(), 1, "{found:#?}");
    assert!(
        parse[0].message.contains("unexpected character '\\'"),
        "{}",
        parse[0].message
    );
    let s = parse[0].primary.span;
    // the first character of the Rust escape `\\` that makes the script's backslash
    assert_eq!(&parse[0].primary.file.text[s.start..s.end], "\\");
    assert_eq!(
        at(parse[0]),
        (
            2,
            "    redis::Script::new(\"local v = redis.call('get', KEYS[1]) ".len() + 1
        )
    );
    assert!(
        found.iter().any(|d| d.rule == "lua-release-no-compare"),
        "{found:#?}"
    );
}

#[test]
fn a_stray_backtick_is_a_parse_error_of_its_script_only() {
    // the Lua parser has no backtick strings for Lua 5.1 and used to panic on one
    let rust = r#"pub async fn release_lock(con: &mut redis::aio::MultiplexedConnection, key: &str) -> redis::RedisResult<i32> {
    redis::Script::new("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call(`del`, KEYS[1]) end return 0")
        .key(key)
        .invoke_async(con)
        .await
}

pub async fn unlock(con: &mut redis::aio::MultiplexedConnection, key: &str) -> redis::RedisResult<i32> {
    redis::Script::new("return redis.call('del', KEYS[1])").key(key).invoke_async(con).await
}
"#;
    let lua = "if redis.call('get', KEYS[1]) == ARGV[1] then\n  return redis.call('del', KEYS[1])\nend\nreturn `0`\n";
    let found = run(&[("src/locks.rs", rust), ("scripts/release_lock.lua", lua)]);
    let parse: Vec<_> = found.iter().filter(|d| d.rule == "parse-error").collect();
    assert_eq!(parse.len(), 2, "{found:#?}");
    for p in &parse {
        assert!(p.message.contains("'`'"), "{}", p.message);
        let s = p.primary.span;
        assert_eq!(&p.primary.file.text[s.start..s.end], "`");
    }
    let lines: Vec<(String, usize)> = parse
        .iter()
        .map(|p| (p.primary.file.display.clone(), at(p).0))
        .collect();
    assert_eq!(
        lines,
        [
            ("scripts/release_lock.lua".to_string(), 4),
            ("src/locks.rs".to_string(), 2)
        ]
    );
    // the other script of the Rust file is still analysed
    let lua: Vec<_> = found
        .iter()
        .filter(|d| d.rule == "lua-release-no-compare")
        .collect();
    assert_eq!(lua.len(), 1, "{found:#?}");
    assert_eq!(at(lua[0]).0, 9);
}
