//! Source texts the integration tests write into projects, and what the tests require of the
//! project's own texts.

#![allow(dead_code)]

/// A lock helper that acquires (`SET .. NX PX`), or one that only reads the key.
pub fn try_lock_helper(acquires: bool) -> String {
    let command = if acquires {
        r#"redis::cmd("SET").arg(key).arg(token).arg("NX").arg("PX").arg(ttl_ms)"#
    } else {
        r#"redis::cmd("GET").arg(key)"#
    };
    format!(
        "pub async fn try_lock(\n    con: &mut redis::aio::MultiplexedConnection,\n    key: &str,\n    token: &str,\n    ttl_ms: u64,\n) -> redis::RedisResult<bool> {{\n    let _ = (token, ttl_ms);\n    let reply: Option<String> = {command}.query_async(con).await?;\n    Ok(reply.is_some())\n}}\n"
    )
}

/// The sections every lock rule's page has (`rules/<rule>.md`).
pub const RULE_PAGE_SECTIONS: &[&str] = &[
    "## Why it is wrong",
    "interleaving",
    "### Bad",
    "### Good",
    "## How to fix",
];
