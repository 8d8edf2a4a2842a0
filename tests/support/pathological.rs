//! Generators of pathological inputs: Rust that nests deeply without brackets, long chains,
//! huge functions, long lines, and huge SQL and Lua texts. Shared by `tests/robustness.rs`
//! (regression tests at a depth or size the analyser once failed on) and
//! `benches/pathological.rs` (the same inputs at about 1 MB, timed and measured).

#![allow(dead_code)]

/// A Rust syntax form that nests `depth` levels deep.
pub struct Form {
    pub name: &'static str,
    /// The file's text at a given depth.
    pub build: fn(usize) -> String,
}

fn repeat(unit: &str, n: usize) -> String {
    unit.repeat(n)
}

/// A function body (statements) in a file that talks to Redis.
fn in_fn(body: &str) -> String {
    format!(
        "use redis::Commands;\n\npub fn deep(con: &mut redis::Connection, x: Option<u8>) {{\n    {body}\n}}\n"
    )
}

/// Every recursive form the parser and the walkers must survive.
pub const FORMS: &[Form] = &[
    Form {
        name: "closures",
        build: |n| in_fn(&format!("let _f = {}0;", repeat("|x| ", n))),
    },
    Form {
        name: "move_closures",
        build: |n| in_fn(&format!("let _f = {}0;", repeat("move |x| ", n))),
    },
    Form {
        name: "fn_pointer_args",
        build: |n| format!("type T = {}(){};\n", repeat("fn(", n), repeat(")", n)),
    },
    Form {
        name: "fn_pointer_returns",
        build: |n| format!("type T = {}();\n", repeat("fn() -> ", n)),
    },
    Form {
        name: "impl_fn_returns",
        build: |n| {
            format!(
                "pub fn f() -> {}u8 {{\n    todo!()\n}}\n",
                repeat("impl Fn() -> ", n)
            )
        },
    },
    Form {
        name: "reference_types",
        build: |n| format!("type T = {}u8;\n", repeat("&", n)),
    },
    Form {
        name: "mut_reference_types",
        build: |n| format!("type T<'a> = {}u8;\n", repeat("&'a mut ", n)),
    },
    Form {
        name: "raw_pointer_types",
        build: |n| format!("type T = {}u8;\n", repeat("*const ", n)),
    },
    Form {
        name: "generics",
        build: |n| format!("type T = {}u8{};\n", repeat("Vec<", n), repeat(">", n)),
    },
    Form {
        name: "qualified_paths",
        build: |n| format!("type T = {}u8{};\n", repeat("<", n), repeat(" as A>::B", n)),
    },
    Form {
        name: "assignments",
        build: |n| in_fn(&format!("let mut a = 0;\n    {}0;", repeat("a = ", n))),
    },
    Form {
        name: "compound_assignments",
        build: |n| in_fn(&format!("let mut a = 0;\n    {}1;", repeat("a += ", n))),
    },
    Form {
        name: "not_chain",
        build: |n| in_fn(&format!("let _b = {}true;", repeat("!", n))),
    },
    Form {
        name: "neg_chain",
        build: |n| in_fn(&format!("let _b = {}1;", repeat("- ", n))),
    },
    Form {
        name: "deref_chain",
        build: |n| in_fn(&format!("let _b = {}x;", repeat("*", n))),
    },
    Form {
        name: "mut_borrow_chain",
        build: |n| in_fn(&format!("let _b = {}x;", repeat("&mut ", n))),
    },
    Form {
        name: "return_chain",
        build: |n| in_fn(&format!("{};", repeat("return ", n))),
    },
    Form {
        name: "break_chain",
        build: |n| {
            in_fn(&format!(
                "loop {{\n        {};\n    }}",
                repeat("break ", n)
            ))
        },
    },
    Form {
        name: "ranges",
        build: |n| in_fn(&format!("let _r = {}0;", repeat(".. ", n))),
    },
    Form {
        name: "casts",
        build: |n| in_fn(&format!("let _c = 0{};", repeat(" as u8", n))),
    },
    Form {
        name: "try_chain",
        build: |n| in_fn(&format!("let _t = x{};", repeat("?", n))),
    },
    Form {
        name: "method_chain",
        build: |n| in_fn(&format!("let _m = x{};", repeat(".map(f)", n))),
    },
    Form {
        name: "field_chain",
        build: |n| in_fn(&format!("let _m = x{};", repeat(".a", n))),
    },
    Form {
        name: "call_chain",
        build: |n| in_fn(&format!("let _m = f{};", repeat("()", n))),
    },
    Form {
        name: "index_chain",
        build: |n| in_fn(&format!("let _m = x{};", repeat("[0]", n))),
    },
    Form {
        name: "binary_chain",
        build: |n| in_fn(&format!("let _s = 1{};", repeat(" + 1", n))),
    },
    Form {
        name: "else_if_ladder",
        build: |n| {
            in_fn(&format!(
                "if x.is_some() {{}}{}",
                repeat(" else if x.is_none() {}", n)
            ))
        },
    },
    Form {
        name: "if_let_else_ladder",
        build: |n| {
            in_fn(&format!(
                "if let Some(_) = x {{}}{}",
                repeat(" else if let Some(_) = x {}", n)
            ))
        },
    },
    Form {
        name: "nested_blocks",
        build: |n| in_fn(&format!("{}0{};", repeat("{", n), repeat("}", n))),
    },
    Form {
        name: "nested_loops",
        build: |n| in_fn(&format!("{}{}", repeat("loop { ", n), repeat("}", n))),
    },
    Form {
        name: "nested_unsafe",
        build: |n| in_fn(&format!("{}(){}", repeat("unsafe { ", n), repeat(" }", n))),
    },
    Form {
        name: "expression_attributes",
        build: |n| in_fn(&format!("let _a = {}0;", repeat("#[allow(unused)] ", n))),
    },
    Form {
        name: "statement_attributes",
        build: |n| in_fn(&format!("{}let _a = 0;", repeat("#[allow(unused)] ", n))),
    },
    Form {
        name: "nested_macros",
        build: |n| in_fn(&format!("{}0{};", repeat("vec![", n), repeat("]", n))),
    },
    Form {
        name: "binding_patterns",
        build: |n| in_fn(&format!("let {}_ = 0;", repeat("a @ ", n))),
    },
    Form {
        name: "tuple_fields",
        build: |n| in_fn(&format!("let _t = x{};", repeat(".0", n))),
    },
    Form {
        name: "await_chain",
        build: |n| {
            format!(
                "pub async fn f(x: X) {{\n    let _a = x{};\n}}\n",
                repeat(".await", n)
            )
        },
    },
    Form {
        name: "let_chains",
        build: |n| {
            in_fn(&format!(
                "if let Some(_) = x{} {{}}",
                repeat(" && let Some(_) = x", n)
            ))
        },
    },
];

/// A healthy file with one known finding (`setnx-without-expiry`), to show that other files'
/// findings survive a pathological one.
pub const HEALTHY: &str = r#"use redis::AsyncCommands;

pub async fn fulfil(con: &mut redis::aio::MultiplexedConnection, id: u64) -> redis::RedisResult<()> {
    let key = format!("lock:order:{id}");
    let acquired: bool = con.set_nx(&key, "1").await?;
    if !acquired {
        return Ok(());
    }
    let _: () = con.del(&key).await?;
    Ok(())
}
"#;

fn rust_fn(body: impl Iterator<Item = String>) -> String {
    let mut out = String::from(
        "use redis::AsyncCommands;\n\npub async fn big(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {\n",
    );
    for line in body {
        out.push_str("    ");
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str("    Ok(())\n}\n");
    out
}

/// `n` `let` bindings, each reading the one before.
pub fn many_lets(n: usize) -> String {
    rust_fn(
        std::iter::once("let v0 = 0u64;".to_string())
            .chain((1..n).map(|i| format!("let v{i} = v{} + 1;", i - 1))),
    )
}

/// `n` Redis writes in one function, each on its own key.
pub fn many_redis_calls(n: usize) -> String {
    rust_fn(
        (0..n).map(|i| format!("let _: () = con.set(format!(\"cache:{{}}\", {i}), {i}).await?;")),
    )
}

/// `n` lock acquires without expiry in one function: `n` findings.
pub fn many_findings(n: usize) -> String {
    rust_fn(
        (0..n).map(|i| {
            format!("if !con.set_nx(\"lock:job:{i}\", \"1\").await? {{ return Ok(()); }}")
        }),
    )
}

/// `n` acquires without expiry, each followed by a separate expiry, in one function: `n`
/// findings, each with a safe fix that merges the two commands (into nine lines).
pub fn separate_expires(n: usize) -> String {
    rust_fn((0..n).map(|i| {
        format!(
            "if !con.set_nx(\"lock:job:{i}\", token).await? {{ return Ok(()); }}\n    let _: () = con.expire(\"lock:job:{i}\", 30).await?;"
        )
    }))
}

/// `n` reads bound to locals and `n` acquires whose result is checked, all inside one `if`
/// block nested in a `tokio::spawn(async move { .. })`: one statement of the function holds
/// every other.
pub fn nested_block(n: usize) -> String {
    let mut body = vec![
        "tokio::spawn(async move {".to_string(),
        "if std::env::var(\"GO\").is_ok() {".to_string(),
    ];
    for i in 0..n {
        body.push(format!(
            "let v{i}: Option<String> = con.get(\"cache:{i}\").await?; if !con.set_nx(\"lock:job:{i}\", \"1\").await? {{ return Ok(()); }}"
        ));
    }
    body.push("}".to_string());
    body.push("Ok::<(), redis::RedisError>(())".to_string());
    body.push("});".to_string());
    rust_fn(body.into_iter())
}

/// `n` GET-then-SET pairs on the same lock key in one function.
pub fn get_then_set_chain(n: usize) -> String {
    rust_fn((0..n).map(|i| {
        format!(
            "let h{i}: Option<String> = con.get(\"lock:billing\").await?; if h{i}.is_none() {{ let _: () = con.set(\"lock:billing\", \"me\").await?; }}"
        )
    }))
}

/// A helper that releases a lock, called `n` times.
pub fn many_helper_calls(n: usize) -> String {
    let mut out = String::from(
        "use redis::AsyncCommands;\n\nasync fn release(con: &mut redis::aio::MultiplexedConnection, key: &str) -> redis::RedisResult<()> {\n    let _: () = con.del(key).await?;\n    Ok(())\n}\n\n",
    );
    out.push_str(&rust_fn(
        (0..n).map(|i| format!("release(con, \"lock:job:{i}\").await?;")),
    ));
    out
}

/// Helpers five levels deep, each calling the one below `n` times: expanding every call at
/// every level would make `n^4` operations.
pub fn helper_fan_out(n: usize) -> String {
    let mut out = String::from(
        "use redis::AsyncCommands;\n\nasync fn level0(con: &mut redis::aio::MultiplexedConnection, key: &str) -> redis::RedisResult<()> {\n    let _: () = con.del(key).await?;\n    Ok(())\n}\n",
    );
    for level in 1..5 {
        out.push_str(&format!(
            "\nasync fn level{level}(con: &mut redis::aio::MultiplexedConnection, key: &str) -> redis::RedisResult<()> {{\n"
        ));
        for _ in 0..n {
            out.push_str(&format!("    level{}(con, key).await?;\n", level - 1));
        }
        out.push_str("    Ok(())\n}\n");
    }
    out
}

/// About `size` bytes of doc lines (`//!` with `inner`, else `///` before one function), every
/// line as short as a doc line can be.
pub fn doc_lines(size: usize, inner: bool) -> String {
    let line = if inner { "//!\n" } else { "///\n" };
    let mut out = line.repeat(size / line.len());
    out.push_str("fn main() {}\n");
    out
}

/// One function written on a single line of about `size` bytes; with `wide`, the line holds
/// a non-ASCII character near its start.
pub fn long_line(size: usize, wide: bool) -> String {
    let mut out = String::from(
        "use redis::AsyncCommands;\npub async fn big(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {",
    );
    if wide {
        out.push_str(" let _é = 0;");
    }
    let mut i = 0;
    while out.len() < size {
        out.push_str(&format!(
            " if !con.set_nx(\"lock:job:{i}\", \"1\").await? {{ return Ok(()); }}"
        ));
        i += 1;
    }
    out.push_str(" Ok(()) }\n");
    out
}

/// One `sqlx::query` literal holding `n` statements.
pub fn sql_literal_statements(n: usize) -> String {
    let mut sql = String::new();
    for i in 0..n {
        sql.push_str(&format!(
            "UPDATE accounts SET balance = balance - 1 WHERE id = {i};\n"
        ));
    }
    format!(
        "pub async fn run(pool: &sqlx::PgPool) -> sqlx::Result<()> {{\n    sqlx::query(\"{sql}\").execute(pool).await?;\n    Ok(())\n}}\n"
    )
}

/// A `.sql` file of `n` advisory-lock statements, none released.
pub fn advisory_statements(n: usize) -> String {
    (0..n)
        .map(|i| format!("SELECT pg_advisory_lock({i});\n"))
        .collect()
}

/// A `.sql` file with a lock table and `n` identical acquires that use the client's clock.
pub fn lock_table_updates(n: usize) -> String {
    let mut out = String::from(
        "CREATE TABLE job_locks (\n    name TEXT PRIMARY KEY,\n    owner TEXT NOT NULL,\n    expires_at TIMESTAMPTZ NOT NULL\n);\n\n",
    );
    for _ in 0..n {
        out.push_str(
            "UPDATE job_locks SET owner = $1, expires_at = $2 WHERE name = $3 AND expires_at < $4;\n",
        );
    }
    out
}

/// A `.lua` file of about `size` bytes: many releases without an owner check.
pub fn lua_file(size: usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    while out.len() < size {
        out.push_str(&format!(
            "local v{i} = redis.call('get', KEYS[1])\nif v{i} then redis.call('del', KEYS[1]) end\n"
        ));
        i += 1;
    }
    out.push_str("return 0\n");
    out
}

/// A `.sql` file of `n` statements that do not parse.
pub fn sql_parse_errors(n: usize) -> String {
    (0..n)
        .map(|i| format!("UPDATE jobs SET a = 1 WHERE id = {i} AND b = = 2;\n"))
        .collect()
}

/// A `.sql` file of one advisory lock, one `SELECT a + a + ..` statement of about `size`
/// bytes, and another advisory lock.
pub fn sql_long_statement(size: usize) -> String {
    format!(
        "SELECT pg_advisory_lock(1);\nSELECT {}1;\nSELECT pg_advisory_lock(2);\n",
        "a + ".repeat(size / 4)
    )
}

/// A PL/pgSQL function whose body nests `n` `IF a THEN` around one advisory lock.
pub fn plpgsql_nested_ifs(n: usize) -> String {
    format!(
        "CREATE FUNCTION f() RETURNS void AS $$\nBEGIN\n{}PERFORM pg_advisory_lock(1);\n{}END;\n$$ LANGUAGE plpgsql;\n",
        "IF a THEN\n".repeat(n),
        "END IF;\n".repeat(n)
    )
}

/// One PL/pgSQL function of `n` session locks, each on its own key, released together at the
/// end after a `RAISE`: every lock is asked about the statements after it.
pub fn plpgsql_locks_before_raise(n: usize) -> String {
    let mut out = String::from("CREATE FUNCTION f() RETURNS void AS $$\nBEGIN\n");
    for i in 0..n {
        out.push_str(&format!("PERFORM pg_advisory_lock({i});\n"));
    }
    out.push_str(
        "RAISE EXCEPTION 'stop';\nPERFORM pg_advisory_unlock_all();\nEND;\n$$ LANGUAGE plpgsql;\n",
    );
    out
}

/// A `.lua` file of about `size` bytes of top-level calls, ending in an unguarded delete.
pub fn lua_top_level_calls(size: usize) -> String {
    let mut out = String::new();
    while out.len() < size {
        out.push_str("redis.call('GET', KEYS[1])\n");
    }
    out.push_str("redis.call('DEL', KEYS[1])\n");
    out
}

/// A Rust file whose lock script holds `n` `\u{e9}` escapes outside any Lua string.
/// About `size` bytes of a Lua script of top-level `if` statements whose condition breaks at
/// once (`if n =f n =f .. then`), each just under the 32 KB a statement may take: the parser
/// recovers from each error over the rest of its piece.
pub fn lua_broken_statements(size: usize) -> String {
    let mut out = String::from("local n = redis.call('incr', KEYS[1])\n");
    while out.len() < size {
        out.push_str("if n ");
        let start = out.len();
        while out.len() - start < 30_000 {
            out.push_str("=f n ");
        }
        out.push_str("then\nend\n");
    }
    out
}

pub fn lua_escapes_outside_strings(n: usize) -> String {
    format!(
        "pub fn broken() -> redis::Script {{\n    redis::Script::new(\"local v = redis.call('get', KEYS[1]) {}\")\n}}\n",
        "\\\\u{e9}".repeat(n)
    )
}

/// A release of a lock key after a statement naming the key `n` times (`3n` tokens).
pub fn wide_call(n: usize) -> String {
    format!(
        "use redis::AsyncCommands;\n\nasync fn release(con: &mut redis::aio::MultiplexedConnection) {{\n    let key = \"lock:job\";\n    let keys = [{}];\n    let _: () = con.del(&key).await.unwrap();\n}}\n",
        "&key, ".repeat(n)
    )
}

/// A lock helper whose signature has `n` parameters (`5n` tokens outside any body).
pub fn wide_signature(n: usize) -> String {
    format!(
        "use redis::AsyncCommands;\n\nasync fn release(con: &mut redis::aio::MultiplexedConnection, {}) {{\n    let _: () = con.del(\"lock:job\").await.unwrap();\n}}\n",
        (0..n).map(|i| format!("t{i}: &str, ")).collect::<String>()
    )
}

/// A table of `n` pairs in a `const` beside a lock acquire (`5n` tokens outside any body).
pub fn wide_table(n: usize) -> String {
    format!(
        "use redis::AsyncCommands;\n\nconst RANGES: &[(u32, u32)] = &[{}];\n\nasync fn acquire(con: &mut redis::aio::MultiplexedConnection) -> bool {{\n    con.set_nx(\"lock:job\", \"1\").await.unwrap()\n}}\n",
        "(0x1F600, 0x1F64F), ".repeat(n)
    )
}

/// A lock acquire after `n` one-word statements (`a;`, two tokens each) in one function.
pub fn dense_statements(n: usize) -> String {
    format!(
        "use redis::AsyncCommands;\n\nasync fn acquire(con: &mut redis::aio::MultiplexedConnection, a: u8) -> bool {{\n{}\n    con.set_nx(\"lock:job\", \"1\").await.unwrap()\n}}\n",
        "a;".repeat(n)
    )
}

/// A lock table whose lease column has `n` `NULL` options: one statement of `n + 12` tokens,
/// each option a node of the parser's tree.
pub fn sql_column_options(n: usize) -> String {
    format!(
        "CREATE TABLE locks (name text PRIMARY KEY, locked_until timestamptz{});\nUPDATE locks SET locked_until = now() + interval '30 seconds' WHERE name = 'job';\n",
        " NULL".repeat(n)
    )
}

/// How many repetitions of a unit of `unit` bytes make about `size` bytes.
pub fn count_for(size: usize, unit: usize) -> usize {
    (size / unit.max(1)).max(1)
}
