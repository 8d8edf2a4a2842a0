//! Rust-ish text: modules of lock code (redis-rs, fred, sqlx, scripts) mixed with the syntax
//! forms that nest without brackets (closure chains, `fn(fn(..))` types, `impl Fn() -> impl
//! Fn()`, reference and pointer types, long operator chains).

use super::{lua, rust_literal, sql, Gen};
use crate::rng::{Draw, Rng};

pub fn generate(rng: &mut Rng, max_len: usize) -> String {
    let mut g = Gen::new(rng, max_len);
    g.push("use redis::AsyncCommands;\n");
    let items = g.rng.range(1, 6);
    for _ in 0..items {
        if g.full() {
            break;
        }
        item(&mut g, 0);
    }
    g.out
}

fn item(g: &mut Gen, depth: usize) {
    match g.rng.below(10) {
        0 => {
            g.push("const ");
            g.pick(&["RELEASE_LOCK", "LOCK_KEY", "UPSERT", "RENEW", "KEY"]);
            g.push(": &str = ");
            let body = embedded_text(g.rng);
            let lit = rust_literal(g.rng, &body);
            g.push(&lit);
            g.push(";\n");
        }
        1 if g.deeper(depth) => {
            g.push("mod m {\n    use super::*;\n");
            item(g, depth + 1);
            g.push("}\n");
        }
        2 => {
            g.push("impl Locker {\n");
            function(g, depth + 1);
            g.push("}\n");
        }
        3 => {
            g.push("#[cfg(test)]\nmod tests {\n");
            function(g, depth + 1);
            g.push("}\n");
        }
        4 => {
            g.push("type T = ");
            ty(g, depth);
            g.push(";\n");
        }
        _ => function(g, depth),
    }
}

fn function(g: &mut Gen, depth: usize) {
    g.pick(&["pub async fn ", "async fn ", "fn ", "pub(crate) async fn "]);
    g.pick(&[
        "acquire_lock",
        "release",
        "renew_lease",
        "run_job",
        "take",
        "unlock",
        "handler",
    ]);
    g.push("(con: &mut redis::aio::MultiplexedConnection, pool: &sqlx::PgPool, key: &str, token: &str, f: ");
    ty(g, depth);
    g.push(") -> redis::RedisResult<()> {\n");
    block_body(g, depth + 1);
    g.push("    Ok(())\n}\n");
}

fn block_body(g: &mut Gen, depth: usize) {
    let n = g.rng.range(1, 8);
    for _ in 0..n {
        if g.full() {
            break;
        }
        stmt(g, depth);
    }
}

fn stmt(g: &mut Gen, depth: usize) {
    match g.rng.below(16) {
        0 => g.push("let acquired: bool = con.set_nx(&key, \"1\").await?;\n"),
        1 => g.push("let _: () = con.expire(key, 30).await?;\n"),
        2 => g.push("let _: () = con.del(key).await?;\n"),
        3 => g.push("let v: Option<String> = con.get(&key).await?;\n"),
        4 => g.push("let ok: Option<String> = redis::cmd(\"SET\").arg(&key).arg(token).arg(\"NX\").arg(\"PX\").arg(30000).query_async(con).await?;\n"),
        5 => {
            g.push("sqlx::query(");
            let s = sql::generate(g.rng, 600);
            let lit = rust_literal(g.rng, &s);
            g.push(&lit);
            g.push(").bind(token).bind(key).execute(pool).await.ok();\n");
        }
        6 => {
            g.push("let _: i32 = redis::Script::new(");
            let s = lua::generate(g.rng, 600);
            let lit = rust_literal(g.rng, &s);
            g.push(&lit);
            g.push(").key(key).arg(token).invoke_async(con).await?;\n");
        }
        7 => g.push("let key = format!(\"lock:job:{}\", id);\n"),
        8 if g.deeper(depth) => {
            g.push("if ");
            expr(g, depth + 1);
            g.push(" {\n");
            block_body(g, depth + 1);
            g.push("} else {\n");
            block_body(g, depth + 1);
            g.push("}\n");
        }
        9 if g.deeper(depth) => {
            g.pick(&["loop {\n", "while acquired {\n", "for i in 0..3 {\n", "async move {\n"]);
            block_body(g, depth + 1);
            g.push("break;\n}\n");
        }
        10 if g.deeper(depth) => {
            g.push("match ");
            expr(g, depth + 1);
            g.push(" {\n    Some(x) => { ");
            stmt(g, depth + 1);
            g.push("}\n    _ => {}\n}\n");
        }
        11 => {
            g.push("let f = ");
            closure_chain(g, depth);
            g.push(";\n");
        }
        _ => {
            g.push("let ");
            g.ident();
            if g.rng.one_in(3) {
                g.push(": ");
                ty(g, depth);
            }
            g.push(" = ");
            expr(g, depth + 1);
            g.push(";\n");
        }
    }
}

/// `|x| |x| move |x| ..`: nesting without brackets.
fn closure_chain(g: &mut Gen, depth: usize) {
    let n = if g.rng.one_in(4) {
        g.rng.size(g.max_depth)
    } else {
        g.rng.range(1, 3)
    };
    let mut braces = 0;
    for _ in 0..n {
        match g.rng.below(5) {
            0 => g.push("|x| "),
            1 => g.push("move |x| "),
            2 => g.push("|| "),
            3 => g.push("async move || "),
            _ => {
                g.push("|x: u32| -> u32 { ");
                braces += 1;
            }
        }
    }
    expr(g, depth + 1);
    for _ in 0..braces {
        g.push(" }");
    }
}

fn ty(g: &mut Gen, depth: usize) {
    if !g.deeper(depth) {
        g.pick(&["u32", "String", "&str", "()", "Option<u8>", "redis::Value"]);
        return;
    }
    match g.rng.below(9) {
        0 => {
            g.push("fn(");
            ty(g, depth + 1);
            g.push(") -> ");
            ty(g, depth + 1);
        }
        1 => {
            g.push("impl Fn() -> ");
            ty(g, depth + 1);
        }
        2 => {
            g.pick(&["&", "&&", "&mut ", "&'a "]);
            ty(g, depth + 1);
        }
        3 => {
            g.pick(&["*const ", "*mut "]);
            ty(g, depth + 1);
        }
        4 => {
            let (open, close) = *g.rng.pick(&[
                ("Vec<", ">"),
                ("Option<", ">"),
                ("Box<dyn Fn(", ")>"),
                ("Result<", ", ()>"),
            ]);
            g.push(open);
            ty(g, depth + 1);
            g.push(close);
        }
        5 => {
            g.push("(");
            ty(g, depth + 1);
            g.push(", ");
            ty(g, depth + 1);
            g.push(")");
        }
        6 => {
            g.push("[");
            ty(g, depth + 1);
            g.push("; 4]");
        }
        _ => g.pick(&["u64", "bool", "Self", "T", "dyn std::any::Any"]),
    }
}

fn expr(g: &mut Gen, depth: usize) {
    if !g.deeper(depth) {
        atom(g);
        return;
    }
    match g.rng.below(18) {
        0 | 1 => {
            expr(g, depth + 1);
            g.pick(&[
                " + ",
                " && ",
                " || ",
                " == ",
                " < ",
                " = ",
                " += ",
                " .. ",
                " as u64 + ",
                " | ",
                " << ",
            ]);
            expr(g, depth + 1);
        }
        2 => {
            g.pick(&["(", "!", "-", "&", "*", "&mut ", "Some(", "Box::new("]);
            let close = matches!(g.out.as_bytes().last(), Some(b'('));
            expr(g, depth + 1);
            if close {
                g.push(")");
            }
        }
        3 => {
            g.push("{ ");
            stmt(g, depth + 1);
            expr(g, depth + 1);
            g.push(" }");
        }
        4 => {
            g.push("if ");
            expr(g, depth + 1);
            g.push(" { ");
            expr(g, depth + 1);
            g.push(" } else { ");
            expr(g, depth + 1);
            g.push(" }");
        }
        5 => closure_chain(g, depth),
        6 => {
            g.push("con.");
            g.pick(&[
                "get", "set_nx", "del", "pexpire", "incr", "exists", "set_ex", "eval",
            ]);
            g.push("(");
            expr(g, depth + 1);
            g.push(", ");
            expr(g, depth + 1);
            g.push(").await?");
        }
        7 => {
            g.push("format!(\"lock:{}:{}\", ");
            expr(g, depth + 1);
            g.push(", ");
            expr(g, depth + 1);
            g.push(")");
        }
        8 => {
            g.push("[");
            expr(g, depth + 1);
            g.push(", ");
            expr(g, depth + 1);
            g.push("]");
        }
        9 => {
            g.push("match ");
            expr(g, depth + 1);
            g.push(" { Ok(v) => ");
            expr(g, depth + 1);
            g.push(", Err(_) => return Ok(()) }");
        }
        10 => {
            expr(g, depth + 1);
            g.pick(&[
                ".await",
                "?",
                ".unwrap()",
                ".0",
                ".clone()",
                ".to_string()",
                "[0]",
            ]);
        }
        11 => {
            g.push("redis::cmd(");
            g.pick(&["\"SET\"", "\"DEL\"", "\"EVAL\"", "\"PEXPIRE\"", "\"GET\""]);
            g.push(").arg(");
            expr(g, depth + 1);
            g.push(").query_async::<()>(con)");
        }
        12 => {
            g.push("S { a: ");
            expr(g, depth + 1);
            g.push(", ..Default::default() }");
        }
        13 => {
            g.push("vec![");
            expr(g, depth + 1);
            g.push("; 2]");
        }
        _ => atom(g),
    }
}

fn atom(g: &mut Gen) {
    match g.rng.below(8) {
        0 => g.number(),
        1 => g.pick(&[
            "\"lock:a\"",
            "r#\"x\"#",
            "b\"\\xff\"",
            "'x'",
            "\"\\u{1F600}\\n\"",
            "\"é\"",
            "c\"nul\"",
            "true",
        ]),
        2 => g.pick(&[
            "key",
            "token",
            "&key",
            "self.key",
            "KEY",
            "Self::LOCK",
            "crate::KEY",
        ]),
        3 => g.pick(&[
            "()",
            "None",
            "Ok(())",
            "[]",
            "..",
            "x?",
            "'a: loop { break 'a 1 }",
        ]),
        _ => g.ident(),
    }
}

/// Text that a constant may hold: SQL, Lua or a key.
fn embedded_text(rng: &mut Rng) -> String {
    match rng.below(3) {
        0 => sql::generate(rng, 400),
        1 => lua::generate(rng, 400),
        _ => "lock:{}:owner".to_string(),
    }
}
