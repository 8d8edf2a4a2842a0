//! `lock-table-client-clock`: the fix compares and computes lock expiries with the
//! database's clock (`now()`) instead of a time the client computed. Interleaving
//! (rules/lock-table-client-clock.md): the client's clock and the database's disagree by
//! 40 s; the original takes a live lock (client ahead) or writes an expiry that has already
//! passed (client behind); the fixed statements use the database's clock only.

use locklint_compile_fixtures::lock_table_client_clock as fx;
use sqlx::PgPool;

use crate::pg::{client, db, set_clock_behind};

async fn owner(pool: &PgPool, name: &str) -> String {
    sqlx::query_scalar("SELECT owner FROM job_locks WHERE name = $1")
        .bind(name)
        .fetch_one(pool)
        .await
        .expect("read the lock row")
}

/// A takes `name` for 30 s (or sets it `expires` from now), by the database's clock.
async fn held_by_a(pg: &tokio_postgres::Client, name: &str, expires: &str) {
    pg.execute(
        &format!(
            "INSERT INTO job_locks (name, owner, expires_at) VALUES ($1, 'a', now() + interval '{expires}')
             ON CONFLICT (name) DO UPDATE SET owner = 'a', expires_at = EXCLUDED.expires_at"
        ),
        &[&name],
    )
    .await
    .expect("A takes the lock");
}

/// B's clock runs 40 s ahead of the database's: B's take-over of A's live lock.
#[tokio::test]
async fn take_over_client_now_postgres() {
    let db = db().await;
    set_clock_behind(&db, "40 seconds").await;
    let pg = client(&db, true).await;

    held_by_a(&pg, "original", "30 seconds").await;
    assert!(
        fx::bad_take_over_client_now_postgres::take_over(&pg, "original", "b")
            .await
            .unwrap(),
        "the original takes over"
    );
    assert_eq!(
        owner(&db.pool, "original").await,
        "b",
        "the original took A's live lock: two holders"
    );

    held_by_a(&pg, "fixed", "30 seconds").await;
    assert!(
        !fx::bad_take_over_client_now_postgres_fixed::take_over(&pg, "fixed", "b")
            .await
            .unwrap(),
        "the fixed take-over refuses a live lock"
    );
    assert_eq!(owner(&db.pool, "fixed").await, "a");

    held_by_a(&pg, "fixed", "-1 second").await;
    assert!(
        fx::bad_take_over_client_now_postgres_fixed::take_over(&pg, "fixed", "b")
            .await
            .unwrap(),
        "the fixed take-over takes an expired lock"
    );
    assert_eq!(owner(&db.pool, "fixed").await, "b");
    drop(pg);
    db.cleanup().await;
}

/// A's clock runs 40 s behind the database's: A renews for 30 s by its own clock, which by
/// the database's clock expired 10 s ago, and B (taking over by the database's clock) takes
/// the lock A believes it holds.
#[tokio::test]
async fn renew_client_time_sqlx() {
    let db = db().await;
    let pg = client(&db, false).await;
    let a_clock_until =
        chrono::Utc::now() - chrono::Duration::seconds(40) + chrono::Duration::seconds(30);
    let b_takes_over = |name: &'static str| {
        let pg = &pg;
        async move {
            fx::bad_take_over_client_now_postgres_fixed::take_over(pg, name, "b")
                .await
                .unwrap()
        }
    };

    held_by_a(&pg, "original", "5 seconds").await;
    assert!(
        fx::bad_renew_client_time_sqlx::renew(&db.pool, "original", "a", a_clock_until)
            .await
            .unwrap()
    );
    assert!(
        b_takes_over("original").await,
        "the original's renewal left a lock B can take"
    );
    assert_eq!(
        owner(&db.pool, "original").await,
        "b",
        "two holders: A renewed, B took it"
    );

    held_by_a(&pg, "fixed", "5 seconds").await;
    assert!(
        fx::bad_renew_client_time_sqlx_fixed::renew(&db.pool, "fixed", "a", a_clock_until)
            .await
            .unwrap(),
        "the fixed renewal renews A's own lock"
    );
    let left: f64 = sqlx::query_scalar(
        "SELECT extract(epoch FROM expires_at - now())::float8 FROM job_locks WHERE name = 'fixed'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(
        left > 5.0,
        "the fixed renewal extended the lease by the database's clock ({left} s left)"
    );
    assert!(
        !b_takes_over("fixed").await,
        "B cannot take the renewed lock"
    );
    assert!(
        !fx::bad_renew_client_time_sqlx_fixed::renew(&db.pool, "fixed", "c", a_clock_until)
            .await
            .unwrap(),
        "the fixed renewal refuses a foreign lock"
    );
    assert_eq!(owner(&db.pool, "fixed").await, "a");
    drop(pg);
    db.cleanup().await;
}
