//! The `.sqlx/` query data that `sqlx::query!` in the fixtures compiles against must describe
//! `schema.sql` as a live PostgreSQL sees it, and must belong to a query some fixture still
//! contains. Regenerate it with `scripts/sqlx-prepare-fixtures.sh`.

#[allow(dead_code)]
#[path = "../../../runtime/tests/support/sql.rs"]
mod sql;

use sha2::{Digest, Sha256};
use sqlx::Executor;
use std::path::{Path, PathBuf};

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The text of every Rust fixture (sources and fixed files).
fn fixture_texts() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let root = crate_dir().join("../../fixtures");
    for rule in std::fs::read_dir(&root).expect("fixtures directory") {
        let rule = rule.expect("fixture dir entry").path();
        let Ok(entries) = std::fs::read_dir(&rule) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("fixture entry").path();
            // a directory example's Rust files are fixtures too
            let example = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let files = if path.is_dir() {
                if !(example.starts_with("bad_") || example.starts_with("good_")) {
                    continue;
                }
                std::fs::read_dir(&path)
                    .expect("example directory")
                    .map(|e| e.expect("example entry").path())
                    .collect()
            } else {
                vec![path]
            };
            for path in files {
                let name = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default();
                if name.ends_with(".rs") || (name.contains(".rs.") && name.ends_with(".fixed")) {
                    let text = std::fs::read_to_string(&path).expect("fixture text");
                    out.push((path, text));
                }
            }
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn offline_query_data_matches_the_schema() {
    let db = sql::pg().await;
    let schema = std::fs::read_to_string(crate_dir().join("schema.sql")).expect("schema.sql");
    sqlx::raw_sql(&schema)
        .execute(&db.pool)
        .await
        .expect("schema.sql applies");
    let mut conn = db.connect().await;
    let fixtures = fixture_texts();

    let mut files: Vec<PathBuf> = std::fs::read_dir(crate_dir().join(".sqlx"))
        .expect(".sqlx directory")
        .map(|e| e.expect(".sqlx entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no query data in .sqlx/");
    let mut problems = Vec::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let data: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(file).expect("query data"))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        let query = data["query"].as_str().expect("query text");
        let hash = hex(&Sha256::digest(query.as_bytes()));
        if name != format!("query-{hash}.json") || data["hash"] != hash.as_str() {
            problems.push(format!("{name}: the hash does not match the query text"));
        }
        if data["db_name"] != "PostgreSQL" {
            problems.push(format!("{name}: not PostgreSQL data: {}", data["db_name"]));
        }
        if !fixtures.iter().any(|(_, text)| text.contains(query)) {
            problems.push(format!("{name}: no fixture contains this query any more"));
        }
        match conn.describe(query).await {
            Ok(live) => {
                let live = serde_json::to_value(&live).expect("describe serialises");
                if live != data["describe"] {
                    problems.push(format!(
                        "{name}: stale description\n  stored: {}\n  live:   {live}",
                        data["describe"]
                    ));
                }
            }
            Err(e) => problems.push(format!("{name}: PostgreSQL rejects the query: {e}")),
        }
    }
    drop(conn);
    db.cleanup().await;
    assert!(
        problems.is_empty(),
        "{}\n(regenerate with scripts/sqlx-prepare-fixtures.sh)",
        problems.join("\n")
    );
}

#[test]
fn every_rust_fixture_is_compiled() {
    let mut sources = 0;
    let mut fixed = 0;
    let root = crate_dir().join("../../fixtures");
    for (path, _) in fixture_texts() {
        // `<rule>/<example>` or `<rule>/<example>/<file>`
        let parts: Vec<String> = path
            .strip_prefix(&root)
            .unwrap()
            .iter()
            .map(|c| c.to_string_lossy().to_string())
            .collect();
        let (rule, example) = (&parts[0], &parts[1]);
        let stem = example.split_once('.').map_or(example.as_str(), |(s, _)| s);
        if rule == "parse-error"
            || !(example.starts_with("bad_") || example.starts_with("good_"))
            || locklint_compile_fixtures::NOT_COMPILED
                .iter()
                .any(|s| stem.ends_with(s))
        {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy();
        if name.ends_with(".fixed") {
            fixed += 1;
        } else {
            sources += 1;
        }
    }
    assert!(
        fixed >= 27 && sources >= 100,
        "{fixed} fixed, {sources} sources"
    );
    assert_eq!(locklint_compile_fixtures::FIXED_FIXTURES, fixed);
    assert_eq!(locklint_compile_fixtures::SOURCE_FIXTURES, sources);
}
