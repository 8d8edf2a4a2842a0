//! `embedded`: Rust files whose string literals hold SQL or Lua handed to sqlx, `Script::new`,
//! `EVAL` and the like. The input is the embedded text; the target wraps it in each form.

use super::{check_text, has_ext, Target};
use crate::gen::{self, rust_literal};
use crate::rng::{Draw, Rng};

/// Ways Rust hands text to a database or to Redis; `{}` is the literal.
const FORMS: &[&str] = &[
    "pub async fn run(pool: &sqlx::PgPool, t: &str) -> sqlx::Result<()> {\n    sqlx::query({}).bind(t).execute(pool).await?;\n    Ok(())\n}\n",
    "pub async fn run(pool: &sqlx::PgPool, t: &str) -> sqlx::Result<()> {\n    let mut tx = pool.begin().await?;\n    sqlx::query({}).bind(t).fetch_optional(&mut *tx).await?;\n    tx.commit().await\n}\n",
    "pub async fn release_lock(con: &mut redis::aio::MultiplexedConnection, key: &str, token: &str) -> redis::RedisResult<i32> {\n    redis::Script::new({}).key(key).arg(token).invoke_async(con).await\n}\n",
    "const RELEASE_LOCK: &str = {};\npub async fn unlock(con: &mut redis::aio::MultiplexedConnection, key: &str) -> redis::RedisResult<i32> {\n    redis::cmd(\"EVAL\").arg(RELEASE_LOCK).arg(1).arg(key).query_async(con).await\n}\n",
    "pub async fn renew(client: &fred::clients::Client, key: &str) -> fred::error::Error {\n    client.eval({}, vec![key], vec![\"30000\"]).await\n}\n",
    "pub fn q(c: &mut postgres::Client) { c.batch_execute({}).unwrap(); }\n",
    "static UNLOCK: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| redis::Script::new({}));\n",
];

/// The literal's text, quoted one way or another, in one of [`FORMS`].
fn wrap(input: &[u8]) -> String {
    let text = String::from_utf8_lossy(input);
    let h = input
        .iter()
        .fold(0u64, |h, &b| h.wrapping_mul(31).wrapping_add(b as u64));
    let mut rng = Rng::with_seed(h);
    let form = rng.pick(FORMS);
    let lit = rust_literal(&mut rng, &text);
    form.replacen("{}", &lit, 1)
}

pub const TARGET: Target = Target {
    name: "embedded",
    about: "SQL and Lua in Rust string literals (sqlx, Script::new, EVAL, fred, postgres)",
    ext: "txt",
    seed: |path, bytes| (has_ext(path, "sql") || has_ext(path, "lua")).then(|| bytes.to_vec()),
    builtin: &[],
    generate: Some(|rng: &mut Rng, max| {
        if rng.one_in(2) {
            gen::sql::generate(rng, max).into_bytes()
        } else {
            gen::lua::generate(rng, max).into_bytes()
        }
    }),
    dictionary: &[
        "\"",
        "\\",
        "\\n",
        "\\\n",
        "#",
        "{",
        "}",
        "$$",
        "'",
        "`",
        "(",
        "--",
        "redis.call('del', KEYS[1])",
        "UPDATE locks SET owner = $1 WHERE name = $2;",
        "é",
        "\\u{e9}",
    ],
    run: |input| check_text("rs", &wrap(input)),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_text_is_rust() {
        for s in [
            "SELECT 1",
            "return redis.call('del', KEYS[1])",
            "a\"b\\c\"#",
            "é\n\t",
        ] {
            let src = wrap(s.as_bytes());
            syn::parse_file(&src).unwrap_or_else(|e| panic!("{src}: {e}"));
        }
    }
}
