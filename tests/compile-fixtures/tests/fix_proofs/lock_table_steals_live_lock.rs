//! `lock-table-steals-live-lock`: the fix adds "the lock has expired" to the take-over's
//! `WHERE` (or to the upsert's `DO UPDATE`). Interleaving
//! (rules/lock-table-steals-live-lock.md): A holds a live lock row; B runs the acquire. The
//! original hands B the live lock; the fixed acquire refuses it, and still takes an expired
//! row (and a free name).

use locklint_compile_fixtures::lock_table_steals_live_lock as fx;
use sqlx::PgPool;

use crate::pg::{client, db, db_of_sql_fixture, empty_db};
use crate::source::sql_statement;

/// `job_locks`: `name` held by `owner`, expiring `expires` (an SQL expression) from now.
async fn job_lock(pool: &PgPool, name: &str, owner: &str, expires: &str) {
    sqlx::query(&format!(
        "INSERT INTO job_locks (name, owner, expires_at) VALUES ($1, $2, now() + interval '{expires}')
         ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at"
    ))
    .bind(name)
    .bind(owner)
    .execute(pool)
    .await
    .expect("set up the lock row");
}

async fn job_lock_owner(pool: &PgPool, name: &str) -> Option<String> {
    sqlx::query_scalar("SELECT owner FROM job_locks WHERE name = $1")
        .bind(name)
        .fetch_optional(pool)
        .await
        .expect("read the lock row")
}

/// Runs an acquire statement (`$1` name, `$2` owner) in the interleaving and its
/// after-fix checks; `run` returns whether the acquire took the lock.
async fn proves<F, Fut>(pool: &PgPool, what: &str, bad: bool, run: F)
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let name = format!("{what}-{}", if bad { "original" } else { "fixed" });
    job_lock(pool, &name, "a", "30 seconds").await;
    let took = run(name.clone()).await;
    if bad {
        assert!(took, "{what}: the original acquire reports success");
        assert_eq!(
            job_lock_owner(pool, &name).await.as_deref(),
            Some("b"),
            "{what}: the original stole A's live lock"
        );
        return;
    }
    assert!(!took, "{what}: the fixed acquire refuses a live lock");
    assert_eq!(
        job_lock_owner(pool, &name).await.as_deref(),
        Some("a"),
        "{what}: A keeps its live lock"
    );
    job_lock(pool, &name, "a", "-1 second").await;
    assert!(
        run(name.clone()).await,
        "{what}: the fixed acquire takes an expired lock"
    );
    assert_eq!(job_lock_owner(pool, &name).await.as_deref(), Some("b"));
}

#[tokio::test]
async fn queries_module() {
    let db = db().await;
    for (bad, take) in [
        (true, fx::bad_queries_module::TAKE_LOCK),
        (false, fx::bad_queries_module_fixed::TAKE_LOCK),
    ] {
        proves(&db.pool, "queries-module", bad, |name| {
            let pool = db.pool.clone();
            async move {
                let done = sqlx::query(take)
                    .bind(&name)
                    .bind("b")
                    .execute(&pool)
                    .await
                    .unwrap();
                done.rows_affected() == 1
            }
        })
        .await;
    }
    // a free name is taken
    let done = sqlx::query(fx::bad_queries_module_fixed::TAKE_LOCK)
        .bind("free")
        .bind("b")
        .execute(&db.pool)
        .await
        .unwrap();
    assert_eq!(done.rows_affected(), 1);
    assert_eq!(job_lock_owner(&db.pool, "free").await.as_deref(), Some("b"));
    db.cleanup().await;
}

/// A `.sql` file: its `CREATE TABLE` and its acquire, exactly as written.
#[tokio::test]
async fn upsert_no_where() {
    let rel = "lock-table-steals-live-lock/bad_upsert_no_where.sql";
    let db = db_of_sql_fixture(rel).await;
    for (bad, file) in [(true, rel.to_string()), (false, format!("{rel}.fixed"))] {
        let acquire = sql_statement(&file, "INSERT");
        proves(&db.pool, "upsert-no-where", bad, |name| {
            let (pool, acquire) = (db.pool.clone(), acquire.clone());
            async move {
                let owner: Option<String> = sqlx::query_scalar(&acquire)
                    .bind(&name)
                    .bind("b")
                    .fetch_optional(&pool)
                    .await
                    .unwrap();
                owner.as_deref() == Some("b")
            }
        })
        .await;
    }
    let acquire = sql_statement(&format!("{rel}.fixed"), "INSERT");
    let owner: Option<String> = sqlx::query_scalar(&acquire)
        .bind("free")
        .bind("b")
        .fetch_optional(&db.pool)
        .await
        .unwrap();
    assert_eq!(
        owner.as_deref(),
        Some("b"),
        "the fixed acquire takes a free name"
    );
    db.cleanup().await;
}

#[tokio::test]
async fn update_sets_owner_postgres() {
    let db = empty_db().await;
    sqlx::raw_sql(
        "CREATE TABLE mutexes (name text PRIMARY KEY, locked_by text, locked_until timestamptz)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let pg = client(&db, false).await;
    let row = |name: &str, until: &str| {
        format!("INSERT INTO mutexes VALUES ('{name}', 'a', now() + interval '{until}') ON CONFLICT (name) DO UPDATE SET locked_by = 'a', locked_until = EXCLUDED.locked_until")
    };
    let owner = |name: &'static str| {
        let pool = db.pool.clone();
        async move {
            sqlx::query_scalar::<_, String>("SELECT locked_by FROM mutexes WHERE name = $1")
                .bind(name)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };

    sqlx::raw_sql(&row("original", "1 minute"))
        .execute(&db.pool)
        .await
        .unwrap();
    assert!(
        fx::bad_update_sets_owner_postgres::take(&pg, "b", "original")
            .await
            .unwrap(),
        "the original reports success"
    );
    assert_eq!(
        owner("original").await,
        "b",
        "the original stole A's live lock"
    );

    sqlx::raw_sql(&row("fixed", "1 minute"))
        .execute(&db.pool)
        .await
        .unwrap();
    assert!(
        !fx::bad_update_sets_owner_postgres_fixed::take(&pg, "b", "fixed")
            .await
            .unwrap(),
        "the fixed take refuses a live lock"
    );
    assert_eq!(owner("fixed").await, "a", "A keeps its live lock");

    sqlx::raw_sql(&row("fixed", "-1 second"))
        .execute(&db.pool)
        .await
        .unwrap();
    assert!(
        fx::bad_update_sets_owner_postgres_fixed::take(&pg, "b", "fixed")
            .await
            .unwrap(),
        "the fixed take takes an expired lock"
    );
    assert_eq!(owner("fixed").await, "b");
    drop(pg);
    db.cleanup().await;
}

/// `am_leases`, a lock table by its name whose holder and lease columns are known by their
/// shape (`holder_node`, `hold_until`): the take-over by name alone steals A's live lease; the
/// fixed one refuses it and takes an expired one.
#[tokio::test]
async fn lease_row_taken_by_name_sqlx() {
    let db = empty_db().await;
    sqlx::raw_sql(
        "CREATE TABLE am_leases (name text PRIMARY KEY, holder_node text, hold_until timestamptz)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let held_by_a = |name: &'static str, until: &'static str| {
        let pool = db.pool.clone();
        async move {
            sqlx::raw_sql(&format!(
                "INSERT INTO am_leases VALUES ('{name}', 'a', now() + interval '{until}') \
                 ON CONFLICT (name) DO UPDATE SET holder_node = 'a', hold_until = EXCLUDED.hold_until"
            ))
            .execute(&pool)
            .await
            .expect("A holds the lease");
        }
    };
    let holder = |name: &'static str| {
        let pool = db.pool.clone();
        async move {
            sqlx::query_scalar::<_, String>("SELECT holder_node FROM am_leases WHERE name = $1")
                .bind(name)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };

    held_by_a("original", "1 minute").await;
    assert!(
        fx::bad_lease_row_taken_by_name_sqlx::take(&db.pool, "b", "original")
            .await
            .unwrap(),
        "the original reports success"
    );
    assert_eq!(
        holder("original").await,
        "b",
        "the original stole A's live lease"
    );

    held_by_a("fixed", "1 minute").await;
    assert!(
        !fx::bad_lease_row_taken_by_name_sqlx_fixed::take(&db.pool, "b", "fixed")
            .await
            .unwrap(),
        "the fixed take refuses a live lease"
    );
    assert_eq!(holder("fixed").await, "a", "A keeps its live lease");

    held_by_a("fixed", "-1 second").await;
    assert!(
        fx::bad_lease_row_taken_by_name_sqlx_fixed::take(&db.pool, "b", "fixed")
            .await
            .unwrap(),
        "the fixed take takes an expired lease"
    );
    assert_eq!(holder("fixed").await, "b");
    db.cleanup().await;
}

/// A `.sql` file whose upsert keeps the lease time while it runs but overwrites the holder
/// whatever the lease (`daemon_id = EXCLUDED.daemon_id`): B takes A's live lease row. The
/// fixed upsert (a `WHERE` on the lease added to its `DO UPDATE`) leaves a live lease with A
/// and still takes an expired one and a free repository.
#[tokio::test]
async fn upsert_case_leaves_holder_unconditional() {
    let rel = "lock-table-steals-live-lock/bad_upsert_case_leaves_holder_unconditional.sql";
    let db = db_of_sql_fixture(rel).await;
    let (a, b) = ("a", "b");
    let held_by_a = |repo: String, until: &'static str| {
        let pool = db.pool.clone();
        async move {
            sqlx::query(&format!(
                "INSERT INTO build_leases VALUES ($1, $2, now() + interval '{until}') \
                 ON CONFLICT (repo) DO UPDATE SET daemon_id = EXCLUDED.daemon_id, \
                 lease_until = EXCLUDED.lease_until"
            ))
            .bind(repo)
            .bind(a)
            .execute(&pool)
            .await
            .expect("A holds the lease");
        }
    };
    let holder = |repo: String| {
        let pool = db.pool.clone();
        async move {
            sqlx::query_scalar::<_, String>("SELECT daemon_id FROM build_leases WHERE repo = $1")
                .bind(repo)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    for (bad, file) in [(true, rel.to_string()), (false, format!("{rel}.fixed"))] {
        let acquire = sql_statement(&file, "INSERT");
        let repo = format!("case-upsert-{}", if bad { "original" } else { "fixed" });
        held_by_a(repo.clone(), "30 seconds").await;
        sqlx::query(&acquire)
            .bind(&repo)
            .bind(b)
            .execute(&db.pool)
            .await
            .unwrap();
        if bad {
            assert_eq!(holder(repo).await, b, "the original stole A's live lease");
            continue;
        }
        assert_eq!(holder(repo.clone()).await, a, "A keeps its live lease");
        held_by_a(repo.clone(), "-1 second").await;
        sqlx::query(&acquire)
            .bind(&repo)
            .bind(b)
            .execute(&db.pool)
            .await
            .unwrap();
        assert_eq!(
            holder(repo).await,
            b,
            "the fixed upsert takes an expired lease"
        );
    }
    let acquire = sql_statement(&format!("{rel}.fixed"), "INSERT");
    sqlx::query(&acquire)
        .bind("free-repo")
        .bind(b)
        .execute(&db.pool)
        .await
        .unwrap();
    assert_eq!(
        holder("free-repo".to_string()).await,
        b,
        "a free repository is taken"
    );
    db.cleanup().await;
}
