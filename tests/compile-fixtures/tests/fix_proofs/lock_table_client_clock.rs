//! `lock-table-client-clock`: the fix compares and computes lock expiries with the
//! database's clock (`now()`) instead of a time the client computed. Interleaving
//! (rules/lock-table-client-clock.md): the client's clock and the database's disagree by
//! 40 s; the original takes a live lock (client ahead) or writes a lease that runs on the
//! client's clock; the fixed statements use the database's clock only, with the caller's
//! duration.

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

/// A pool whose connections call the schema's `now()` (see [`set_clock_behind`]).
async fn shadowed_pool(db: &crate::sql_support::PgDb) -> PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect_with(
            db.options
                .clone()
                .options([("search_path", format!("{},pg_catalog", db.schema))]),
        )
        .await
        .expect("a pool on the schema's clock")
}

/// Seconds left on the lock `name` by the database's clock.
async fn seconds_left(pool: &PgPool, name: &str) -> f64 {
    sqlx::query_scalar(
        "SELECT extract(epoch FROM expires_at - now())::float8 FROM job_locks WHERE name = $1",
    )
    .bind(name)
    .fetch_one(pool)
    .await
    .expect("read the lease")
}

/// A's clock runs 40 s ahead of the database's: A acquires an expired lock for 30 s. The
/// original writes A's time plus 30 s, a lease of 70 s by the database's clock; the fixed
/// acquire writes the database's time plus the caller's 30 s, takes an expired lock and
/// refuses a live one.
#[tokio::test]
async fn acquire_client_time_plus_duration() {
    let db = db().await;
    set_clock_behind(&db, "40 seconds").await;
    let pool = shadowed_pool(&db).await;
    let pg = client(&db, true).await;
    let ttl = std::time::Duration::from_secs(30);

    held_by_a(&pg, "original", "-1 second").await;
    assert!(
        fx::bad_acquire_client_time_plus_duration::acquire(&pool, "original", "b", ttl)
            .await
            .unwrap()
    );
    let left = seconds_left(&pool, "original").await;
    assert!(
        left > 60.0,
        "the original's lease runs on the client's clock ({left} s by the database's)"
    );

    held_by_a(&pg, "fixed", "-1 second").await;
    assert!(
        fx::bad_acquire_client_time_plus_duration_fixed::acquire(&pool, "fixed", "b", ttl)
            .await
            .unwrap(),
        "the fixed acquire takes an expired lock"
    );
    assert_eq!(owner(&db.pool, "fixed").await, "b");
    let left = seconds_left(&pool, "fixed").await;
    assert!(
        left > 25.0 && left <= 30.0,
        "the fixed lease is the caller's 30 s by the database's clock ({left} s)"
    );

    held_by_a(&pg, "fixed", "30 seconds").await;
    assert!(
        !fx::bad_acquire_client_time_plus_duration_fixed::acquire(&pool, "fixed", "b", ttl)
            .await
            .unwrap(),
        "the fixed acquire refuses a live lock"
    );
    assert_eq!(owner(&db.pool, "fixed").await, "a");
    drop(pg);
    pool.close().await;
    db.cleanup().await;
}

/// A work table leased through `lease_owner` / `lease_expires_at`. B's clock runs 40 s ahead
/// of the database's: the original claim compares A's live lease with B's time and takes the
/// task; the fixed claim compares with the database's clock, refuses it, and still takes a
/// task whose lease has passed or that nobody has claimed yet.
#[tokio::test]
async fn work_table_lease_client_clock_sqlx() {
    let db = db().await;
    set_clock_behind(&db, "40 seconds").await;
    sqlx::raw_sql(
        "CREATE TABLE proof_tasks (id bigint PRIMARY KEY, lease_owner text, \
         lease_expires_at timestamptz, finished_at timestamptz)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let pool = shadowed_pool(&db).await;
    let pg = client(&db, true).await;
    let task = |id: i64, expires: Option<&str>| {
        let lease = match expires {
            Some(e) => format!("'a', now() + interval '{e}'"),
            None => "NULL, NULL".to_string(),
        };
        format!(
            "INSERT INTO proof_tasks (id, lease_owner, lease_expires_at) VALUES ({id}, {lease}) \
             ON CONFLICT (id) DO UPDATE SET lease_owner = EXCLUDED.lease_owner, \
             lease_expires_at = EXCLUDED.lease_expires_at"
        )
    };
    let owner = |id: i64| {
        let pool = db.pool.clone();
        async move {
            sqlx::query_scalar::<_, Option<String>>(
                "SELECT lease_owner FROM proof_tasks WHERE id = $1",
            )
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };

    pg.batch_execute(&task(1, Some("30 seconds")))
        .await
        .unwrap();
    assert!(
        fx::bad_work_table_lease_client_clock_sqlx::claim(&pool, "b", 1)
            .await
            .unwrap(),
        "the original claims the task"
    );
    assert_eq!(
        owner(1).await.as_deref(),
        Some("b"),
        "the original took A's live lease: two workers on one task"
    );

    pg.batch_execute(&task(2, Some("30 seconds")))
        .await
        .unwrap();
    assert!(
        !fx::bad_work_table_lease_client_clock_sqlx_fixed::claim(&pool, "b", 2)
            .await
            .unwrap(),
        "the fixed claim refuses a live lease"
    );
    assert_eq!(owner(2).await.as_deref(), Some("a"));

    pg.batch_execute(&task(2, Some("-1 second"))).await.unwrap();
    assert!(
        fx::bad_work_table_lease_client_clock_sqlx_fixed::claim(&pool, "b", 2)
            .await
            .unwrap(),
        "the fixed claim takes a lapsed lease"
    );
    assert_eq!(owner(2).await.as_deref(), Some("b"));

    pg.batch_execute(&task(3, None)).await.unwrap();
    assert!(
        fx::bad_work_table_lease_client_clock_sqlx_fixed::claim(&pool, "b", 3)
            .await
            .unwrap(),
        "the fixed claim takes a task nobody claimed"
    );
    assert_eq!(owner(3).await.as_deref(), Some("b"));
    drop(pg);
    pool.close().await;
    db.cleanup().await;
}
