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

/// A project whose facts sit in files of their own: `src/jobs.rs` takes a lock through the
/// helper of `src/locks.rs` (ignoring whether it acquired) on a key of `src/keys.rs` (a file
/// with no client in sight, parsed for its const), and writes a table that
/// `migrations/0001_reports.sql` declares fenced. A git repository; the path is canonical.
pub fn layered() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap().join("layered");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(root.join("migrations")).unwrap();
    let files = [
        ("src/lib.rs", "pub mod jobs;\npub mod keys;\npub mod locks;\n".to_string()),
        (
            "src/jobs.rs",
            "use crate::keys::NIGHTLY;\nuse crate::locks::try_lock;\n\npub async fn nightly(\n    con: &mut redis::aio::MultiplexedConnection,\n    pool: &sqlx::PgPool,\n    token: &str,\n) -> anyhow::Result<()> {\n    let _ = try_lock(con, NIGHTLY, token, 60_000).await;\n    sqlx::query(\"UPDATE reports SET done = true WHERE id = $1\")\n        .bind(1_i64)\n        .execute(pool)\n        .await?;\n    Ok(())\n}\n".to_string(),
        ),
        (
            "src/keys.rs",
            "//! The keys of the nightly jobs' locks.\n\npub const NIGHTLY: &str = \"lock:nightly\";\n\npub fn report_title(day: u32) -> String {\n    format!(\"nightly report {day}\")\n}\n".to_string(),
        ),
        ("src/locks.rs", try_lock_helper(true)),
        (
            "migrations/0001_reports.sql",
            "CREATE TABLE reports (\n    id    BIGINT PRIMARY KEY,\n    done  BOOLEAN NOT NULL,\n    fence BIGINT NOT NULL DEFAULT 0\n);\n".to_string(),
        ),
    ];
    for (path, text) in files {
        std::fs::write(root.join(path), text).unwrap();
    }
    (tmp, root)
}

/// Edits of [`layered`] that change facts other files' findings rest on, as (file, text
/// replaced, replacement): the helper stops acquiring, the const no longer names a lock, the
/// fencing column goes from the schema.
pub const FACT_EDITS: [(&str, &str, &str); 3] = [
    ("src/locks.rs", "\"SET\"", "\"GET\""),
    ("src/keys.rs", "lock:nightly", "nightly"),
    (
        "migrations/0001_reports.sql",
        ",\n    fence BIGINT NOT NULL DEFAULT 0",
        "",
    ),
];
