//! `unfenced-write`: the fix makes the write conditional on a newer fencing token
//! (`AND fence < $n`, or `WHERE stored < EXCLUDED` in an upsert). Interleaving
//! (rules/unfenced-write.md): A (fence 41) pauses, its lease expires, B (fence 42) writes;
//! then A's stale write arrives. The original accepts it; the fixed write refuses it and
//! still applies a write with the current (newer) fence.

use locklint_compile_fixtures::unfenced_write as fx;

use crate::pg::{db, db_of_sql_fixture};
use crate::source::sql_statement;

/// A `.sql` file: its `CREATE TABLE` and its fenced `UPDATE`, exactly as written.
#[tokio::test]
async fn fenced_table_update() {
    let rel = "unfenced-write/bad_fenced_table_update.sql";
    let db = db_of_sql_fixture(rel).await;
    let fence = |period: &'static str| {
        let pool = db.pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT fence FROM invoice_runs WHERE period = $1")
                .bind(period)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    for (bad, file, period) in [
        (true, rel.to_string(), "2026-05"),
        (false, format!("{rel}.fixed"), "2026-06"),
    ] {
        let close = sql_statement(&file, "UPDATE");
        sqlx::query("INSERT INTO invoice_runs (period, status) VALUES ($1, 'open')")
            .bind(period)
            .execute(&db.pool)
            .await
            .unwrap();
        let write = |f: i64| {
            let (pool, close) = (db.pool.clone(), close.clone());
            async move {
                sqlx::query(&close)
                    .bind(f)
                    .bind(period)
                    .execute(&pool)
                    .await
                    .unwrap()
                    .rows_affected()
            }
        };
        assert_eq!(write(42).await, 1, "B's write with fence 42 applies");
        let stale = write(41).await;
        if bad {
            assert_eq!(stale, 1, "the original accepts A's stale write");
            assert_eq!(
                fence(period).await,
                41,
                "the original replaced B's write with a stale holder's"
            );
        } else {
            assert_eq!(stale, 0, "the fixed write refuses A's stale write");
            assert_eq!(fence(period).await, 42, "B's write stands");
            assert_eq!(
                write(43).await,
                1,
                "the fixed write applies with the current fence"
            );
            assert_eq!(fence(period).await, 43);
        }
    }
    db.cleanup().await;
}

#[tokio::test]
async fn upsert_writes_fence_macro() {
    let db = db().await;
    let state = |job: i64| {
        let pool = db.pool.clone();
        async move {
            sqlx::query_scalar::<_, String>("SELECT state FROM job_checkpoints WHERE job_id = $1")
                .bind(job)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };

    fx::bad_upsert_writes_fence_macro::save_checkpoint(&db.pool, 1, "b-state", 42)
        .await
        .unwrap();
    fx::bad_upsert_writes_fence_macro::save_checkpoint(&db.pool, 1, "a-stale", 41)
        .await
        .unwrap();
    assert_eq!(
        state(1).await,
        "a-stale",
        "the original replaced B's checkpoint with a stale holder's"
    );

    fx::bad_upsert_writes_fence_macro_fixed::save_checkpoint(&db.pool, 2, "b-state", 42)
        .await
        .unwrap();
    assert_eq!(
        state(2).await,
        "b-state",
        "the fixed upsert inserts a new checkpoint"
    );
    fx::bad_upsert_writes_fence_macro_fixed::save_checkpoint(&db.pool, 2, "a-stale", 41)
        .await
        .unwrap();
    assert_eq!(
        state(2).await,
        "b-state",
        "the fixed upsert refuses A's stale write"
    );
    fx::bad_upsert_writes_fence_macro_fixed::save_checkpoint(&db.pool, 2, "c-state", 43)
        .await
        .unwrap();
    assert_eq!(
        state(2).await,
        "c-state",
        "the fixed upsert applies with the current fence"
    );
    db.cleanup().await;
}
