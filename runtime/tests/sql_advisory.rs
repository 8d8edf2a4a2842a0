//! PostgreSQL advisory locks against a real server.

mod support;

use std::time::{Duration, Instant};

use locklint_runtime::advisory::{AdvisoryError, AdvisoryGuard, AdvisoryKey, AdvisoryLock};
use sqlx::{Connection, PgConnection, PgPool};
use support::sql::{pg, pg_with, PgDb};

/// SHA-256 prefixes computed independently (`printf %s NAME | sha256sum`).
const VECTORS: &[(&str, i64)] = &[
    ("abc", -5010229573455851542),
    ("", -2039914840885289964),
    ("locklint", 5007978370049997813),
    ("invoice:2026-11", -8468555035743301671),
    ("tenant/42/report", -5264165213855596743),
    ("ключ", 2153681812738117024),
];

#[test]
fn key_from_name_fixed_vectors() {
    for (name, key) in VECTORS {
        assert_eq!(AdvisoryKey::from_name(name), AdvisoryKey(*key), "{name:?}");
        assert_eq!(AdvisoryKey::from(*name), AdvisoryKey(*key), "{name:?}");
    }
}

#[tokio::test]
async fn key_from_name_matches_documented_sql() {
    let db = pg().await;
    for (name, key) in VECTORS {
        let in_sql: i64 = sqlx::query_scalar(
            "SELECT ('x' || left(encode(sha256(convert_to($1, 'UTF8')), 'hex'), 16))::bit(64)::bigint",
        )
        .bind(*name)
        .fetch_one(&db.pool)
        .await
        .unwrap();
        assert_eq!(in_sql, *key, "{name:?}");
    }
    db.cleanup().await;
}

/// A key unique to this test run, so parallel tests and runs never collide.
fn test_key() -> AdvisoryKey {
    AdvisoryKey::from_name(&support::sql::unique("advisory-test"))
}

/// A private schema with a pool of up to `max` connections, and a fresh key locked by a
/// guard holding one of them.
async fn locked(max: u32) -> (PgDb, AdvisoryKey, AdvisoryGuard) {
    let db = pg_with(max).await;
    let key = test_key();
    let guard = AdvisoryLock::try_lock(&db.pool, key)
        .await
        .unwrap()
        .expect("a fresh key is free");
    (db, key, guard)
}

/// Ends the session `pid` with `pg_terminate_backend`.
async fn terminate(pool: &PgPool, pid: i32) {
    let terminated: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .fetch_one(pool)
        .await
        .unwrap();
    assert!(terminated, "no backend {pid} to terminate");
}

async fn backend_pid(conn: &mut PgConnection) -> i32 {
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(conn)
        .await
        .unwrap()
}

/// Backend pids holding any advisory lock among *all* connections the pool can hand out
/// (the pool is drained to its maximum size while checking).
async fn pooled_sessions_holding_advisory_locks(pool: &PgPool, max: u32) -> Vec<i32> {
    let mut conns = Vec::new();
    for _ in 0..max {
        conns.push(pool.acquire().await.unwrap());
    }
    let mut pids = Vec::new();
    for c in &mut conns {
        pids.push(backend_pid(c).await);
    }
    let holding: Vec<i32> = sqlx::query_scalar(
        "SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'advisory' AND pid = ANY($1)",
    )
    .bind(&pids)
    .fetch_all(&mut *conns[0])
    .await
    .unwrap();
    drop(conns);
    holding
}

/// Whether any backend holds the session lock `key` (bigint keys appear in `pg_locks` as
/// classid = high half, objid = low half, objsubid = 1).
async fn lock_holders(pool: &PgPool, key: AdvisoryKey) -> Vec<i32> {
    sqlx::query_scalar(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 \
         AND classid = (($1 >> 32) & 4294967295)::oid AND objid = ($1 & 4294967295)::oid",
    )
    .bind(key.0)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Polls until a fresh standalone session takes `key` (then releases it).
async fn other_session_can_take(db: &PgDb, key: AdvisoryKey, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let conn = db.connect().await;
        if let Some(guard) = AdvisoryLock::try_lock(conn, key).await.unwrap() {
            guard.unlock().await.unwrap();
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn try_lock_excludes_and_unlock_on_same_connection_releases() {
    let (db, key, mut guard) = locked(3).await;
    assert_eq!(guard.key(), key);
    let holder_pid = backend_pid(&mut *guard.connection().await).await;
    assert_eq!(lock_holders(&db.pool, key).await, vec![holder_pid]);

    // Neither another pooled connection nor a standalone session can take it.
    assert!(AdvisoryLock::try_lock(&db.pool, key)
        .await
        .unwrap()
        .is_none());
    assert!(AdvisoryLock::try_lock(db.connect().await, key)
        .await
        .unwrap()
        .is_none());

    guard.unlock().await.unwrap();
    assert!(lock_holders(&db.pool, key).await.is_empty());
    assert!(pooled_sessions_holding_advisory_locks(&db.pool, 3)
        .await
        .is_empty());
    assert!(other_session_can_take(&db, key, Duration::ZERO).await);
    db.cleanup().await;
}

#[tokio::test]
async fn unlock_reports_lock_released_behind_its_back() {
    let (db, key, mut guard) = locked(2).await;
    sqlx::query("SELECT pg_advisory_unlock_all()")
        .execute(&mut *guard.connection().await)
        .await
        .unwrap();
    match guard.unlock().await {
        Err(AdvisoryError::NotHeld { key: k }) => assert_eq!(k, key),
        other => panic!("expected NotHeld, got {other:?}"),
    }
    db.cleanup().await;
}

#[tokio::test]
async fn terminated_holder_session_releases_the_lock() {
    let (db, key, mut guard) = locked(3).await;
    let holder_pid = backend_pid(&mut *guard.connection().await).await;
    assert!(!other_session_can_take(&db, key, Duration::ZERO).await);

    terminate(&db.pool, holder_pid).await;
    assert!(other_session_can_take(&db, key, Duration::from_secs(10)).await);

    // The stale guard cannot unlock: its session is gone, and it reports an error.
    assert!(matches!(
        guard.unlock().await,
        Err(AdvisoryError::Database(_))
    ));
    assert!(pooled_sessions_holding_advisory_locks(&db.pool, 3)
        .await
        .is_empty());
    db.cleanup().await;
}

#[tokio::test]
async fn dropped_guard_never_returns_its_connection_to_the_pool() {
    let max = 2;
    let db = pg_with(max).await;
    let key = test_key();
    for _ in 0..3 {
        let mut guard = AdvisoryLock::try_lock(&db.pool, key)
            .await
            .unwrap()
            .unwrap();
        let pid = backend_pid(&mut *guard.connection().await).await;
        drop(guard);
        // The holder's session is closed, so the lock is free for another session ...
        assert!(other_session_can_take(&db, key, Duration::from_secs(10)).await);
        // ... and no connection the pool hands out holds an advisory lock or is the old one.
        assert!(pooled_sessions_holding_advisory_locks(&db.pool, max)
            .await
            .is_empty());
        let mut conn = db.pool.acquire().await.unwrap();
        assert_ne!(backend_pid(&mut conn).await, pid);
    }
    db.cleanup().await;
}

#[tokio::test]
async fn lock_timeout_waits_for_release_and_times_out() {
    let (db, key, holder) = locked(4).await;

    let started = Instant::now();
    let none = AdvisoryLock::lock_timeout(&db.pool, key, Duration::from_millis(300))
        .await
        .unwrap();
    assert!(none.is_none());
    assert!(started.elapsed() >= Duration::from_millis(290));

    let pool = db.pool.clone();
    let waiter = tokio::spawn(async move {
        AdvisoryLock::lock_timeout(&pool, key, Duration::from_secs(20)).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder.unlock().await.unwrap();
    let guard = waiter
        .await
        .unwrap()
        .unwrap()
        .expect("acquired after release");

    // The session settings were restored on the guard's connection.
    let mut guard = guard;
    let lock_timeout: String = sqlx::query_scalar("SHOW lock_timeout")
        .fetch_one(&mut *guard.connection().await)
        .await
        .unwrap();
    assert_eq!(lock_timeout, "0");
    guard.unlock().await.unwrap();
    assert!(pooled_sessions_holding_advisory_locks(&db.pool, 4)
        .await
        .is_empty());
    db.cleanup().await;
}

#[tokio::test]
async fn cancelled_lock_timeout_never_leaks_the_lock_into_the_pool() {
    let max = 3;
    let db = pg_with(max).await;
    let key = test_key();
    let mut holder_conn = db.connect().await;
    let holder_pid = backend_pid(&mut holder_conn).await;
    let holder = AdvisoryLock::try_lock(holder_conn, key)
        .await
        .unwrap()
        .unwrap();

    // 1. A blocked acquire cancelled by tokio::time::timeout.
    let cancelled = tokio::time::timeout(
        Duration::from_millis(300),
        AdvisoryLock::lock_timeout(&db.pool, key, Duration::from_secs(30)),
    )
    .await;
    assert!(cancelled.is_err(), "the acquire should still be blocked");

    // 2. A blocked acquire in a task that is aborted.
    let pool = db.pool.clone();
    let task = tokio::spawn(async move {
        AdvisoryLock::lock_timeout(&pool, key, Duration::from_secs(30)).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());

    // Release the real holder; the abandoned waiters must not end up owning the lock.
    holder.unlock().await.unwrap();
    assert!(other_session_can_take(&db, key, Duration::from_secs(10)).await);
    let holders = lock_holders(&db.pool, key).await;
    assert!(
        holders.is_empty(),
        "held by {holders:?} (holder was {holder_pid})"
    );
    assert!(pooled_sessions_holding_advisory_locks(&db.pool, max)
        .await
        .is_empty());
    // The pool still works at full size and can take the lock itself.
    let guard = AdvisoryLock::try_lock(&db.pool, key)
        .await
        .unwrap()
        .unwrap();
    guard.unlock().await.unwrap();
    db.cleanup().await;
}

#[tokio::test]
async fn standalone_connection_can_hold_the_lock() {
    let db = pg().await;
    let key = test_key();
    let guard = AdvisoryLock::try_lock(db.connect().await, key)
        .await
        .unwrap()
        .unwrap();
    assert!(AdvisoryLock::try_lock(&db.pool, key)
        .await
        .unwrap()
        .is_none());
    guard.unlock().await.unwrap();
    assert!(other_session_can_take(&db, key, Duration::ZERO).await);
    let mut conn = PgConnection::connect_with(&db.options).await.unwrap();
    let guard = AdvisoryLock::lock_timeout(db.connect().await, key, Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    assert!(
        !sqlx::query_scalar::<_, bool>("SELECT pg_try_advisory_lock($1)")
            .bind(key.0)
            .fetch_one(&mut conn)
            .await
            .unwrap()
    );
    drop(guard);
    assert!(other_session_can_take(&db, key, Duration::from_secs(10)).await);
    db.cleanup().await;
}

#[tokio::test]
async fn xact_lock_is_released_at_commit_and_rollback() {
    let db = pg_with(4).await;
    let key = test_key();

    let mut tx = db.pool.begin().await.unwrap();
    assert!(AdvisoryLock::try_lock_xact(&mut tx, key).await.unwrap());
    let mut other = db.pool.begin().await.unwrap();
    assert!(!AdvisoryLock::try_lock_xact(&mut other, key).await.unwrap());
    assert!(!other_session_can_take(&db, key, Duration::ZERO).await);
    tx.commit().await.unwrap();
    assert!(AdvisoryLock::try_lock_xact(&mut other, key).await.unwrap());
    other.rollback().await.unwrap();
    assert!(other_session_can_take(&db, key, Duration::ZERO).await);

    // Blocking variant, released by a dropped (rolled back) transaction.
    let mut tx = db.pool.begin().await.unwrap();
    AdvisoryLock::lock_xact(&mut tx, key).await.unwrap();
    assert!(!other_session_can_take(&db, key, Duration::ZERO).await);
    drop(tx);
    assert!(other_session_can_take(&db, key, Duration::from_secs(10)).await);
    assert!(pooled_sessions_holding_advisory_locks(&db.pool, 4)
        .await
        .is_empty());
    db.cleanup().await;
}

#[tokio::test]
async fn sqlx_compatible_keys_exclude_sqlx_advisory_locks() {
    let db = pg().await;
    let name = support::sql::unique("advisory-sqlx");
    let theirs = sqlx::postgres::PgAdvisoryLock::new(&name);
    let held = theirs
        .acquire(db.pool.acquire().await.unwrap())
        .await
        .unwrap();

    // The same name through this crate's own derivation is another key: no exclusion.
    let other = AdvisoryLock::try_lock(&db.pool, AdvisoryKey::from_name(&name))
        .await
        .unwrap();
    assert!(other.is_some(), "from_name is not sqlx's derivation");
    other.unwrap().unlock().await.unwrap();

    // The sqlx-compatible key is the one sqlx holds.
    let ours = AdvisoryLock::try_lock(&db.pool, AdvisoryKey::sqlx_compatible(&name))
        .await
        .unwrap();
    assert!(
        ours.is_none(),
        "sqlx's holder must exclude the compatible key"
    );

    held.release_now().await.unwrap();
    let ours = AdvisoryLock::try_lock(&db.pool, AdvisoryKey::sqlx_compatible(&name))
        .await
        .unwrap()
        .expect("free once sqlx's holder released it");
    ours.unlock().await.unwrap();
    db.cleanup().await;
}

#[tokio::test]
async fn unlock_never_pools_a_session_that_still_holds_advisory_locks() {
    let max = 2;
    let (db, key, mut guard) = locked(max).await;
    let other = test_key();

    // Another key taken through the guard's connection.
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(other.0)
        .execute(&mut *guard.connection().await)
        .await
        .unwrap();
    guard.unlock().await.unwrap();
    assert!(other_session_can_take(&db, other, Duration::from_secs(10)).await);
    assert!(pooled_sessions_holding_advisory_locks(&db.pool, max)
        .await
        .is_empty());

    // The guard's own key taken a second time on its session (PostgreSQL counts it).
    let mut guard = AdvisoryLock::try_lock(&db.pool, key)
        .await
        .unwrap()
        .unwrap();
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(key.0)
        .execute(&mut *guard.connection().await)
        .await
        .unwrap();
    guard.unlock().await.unwrap();
    assert!(other_session_can_take(&db, key, Duration::from_secs(10)).await);
    assert!(pooled_sessions_holding_advisory_locks(&db.pool, max)
        .await
        .is_empty());

    // A clean unlock still returns the connection to the pool.
    let mut guard = AdvisoryLock::try_lock(&db.pool, key)
        .await
        .unwrap()
        .unwrap();
    let pid = backend_pid(&mut *guard.connection().await).await;
    guard.unlock().await.unwrap();
    let mut pids = Vec::new();
    let mut conns = Vec::new();
    for _ in 0..max {
        let mut c = db.pool.acquire().await.unwrap();
        pids.push(backend_pid(&mut c).await);
        conns.push(c);
    }
    assert!(pids.contains(&pid), "a clean session goes back to the pool");
    drop(conns);
    db.cleanup().await;
}

/// The holder's backend is terminated while it works: the keep-alive query on the guard's
/// own connection notices within one interval (`lost()` resolves, `is_held()` turns false,
/// the cancellation token fires), and the dead connection never returns to the pool.
#[tokio::test]
async fn keep_alive_reports_a_terminated_session_and_never_pools_it() {
    let max = 3;
    let (db, _key, mut guard) = locked(max).await;
    let interval = Duration::from_millis(200);
    guard.spawn_keep_alive(interval);
    let holder_pid = backend_pid(&mut *guard.connection().await).await;
    let lost = guard.lost();
    let token = guard.cancellation_token();
    // Several intervals pass with the session alive: no false alarm.
    tokio::time::sleep(interval * 3).await;
    assert!(guard.is_held());

    terminate(&db.pool, holder_pid).await;
    let killed_at = Instant::now();
    tokio::time::timeout(Duration::from_secs(20), lost)
        .await
        .expect("the holder learns that its session was terminated");
    eprintln!(
        "loss noticed {:?} after pg_terminate_backend (keep-alive interval {interval:?})",
        killed_at.elapsed()
    );
    assert!(!guard.is_held());
    assert!(token.is_cancelled());

    assert!(guard.unlock().await.is_err());
    let mut pids = Vec::new();
    let mut conns = Vec::new();
    for _ in 0..max {
        let mut conn = db.pool.acquire().await.unwrap();
        pids.push(backend_pid(&mut conn).await);
        conns.push(conn);
    }
    assert!(
        !pids.contains(&holder_pid),
        "the terminated connection went back to the pool"
    );
    drop(conns);
    db.cleanup().await;
}

/// The lock is released behind the guard's back (through its own connection): the
/// keep-alive notices that the session no longer holds it.
#[tokio::test]
async fn keep_alive_reports_a_lock_released_behind_its_back() {
    let (db, _key, mut guard) = locked(2).await;
    guard.spawn_keep_alive(Duration::from_millis(100));
    sqlx::query("SELECT pg_advisory_unlock_all()")
        .execute(&mut *guard.connection().await)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(20), guard.lost())
        .await
        .expect("lost after the unlock behind the guard's back");
    assert!(matches!(
        guard.unlock().await,
        Err(AdvisoryError::NotHeld { .. })
    ));
    db.cleanup().await;
}

/// Through the `Lock` trait: a fence per acquisition, `Busy` while held, `Lost` after the
/// session died, and a released lock is free again.
#[tokio::test]
async fn advisory_locker_implements_the_lock_trait() {
    use locklint_runtime::advisory::AdvisoryLocker;
    use locklint_runtime::lock::{Lease, Lock};
    let db = pg_with(4).await;
    let locks = AdvisoryLocker::new(db.pool.clone()).with_keep_alive(Duration::from_millis(100));
    locks.migrate().await.unwrap();
    let name = support::sql::unique("trait");
    let ttl = Duration::from_secs(30);

    let mut a = locks.try_acquire(&name, ttl).await.unwrap();
    assert!(a.is_held());
    assert!(locks.try_acquire(&name, ttl).await.unwrap_err().is_busy());
    assert!(locks
        .acquire_timeout(&name, ttl, Duration::from_millis(200))
        .await
        .unwrap_err()
        .is_busy());
    a.renew(ttl).await.unwrap();
    let first = a.fence();
    a.unlock().await.unwrap();

    let mut b = locks.try_acquire(&name, ttl).await.unwrap();
    assert!(b.fence() > first);
    let pid = backend_pid(&mut *b.guard().connection().await).await;
    sqlx::query("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .execute(&db.pool)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(20), b.lost())
        .await
        .expect("loss signalled");
    assert!(b.renew(ttl).await.unwrap_err().is_lost());
    assert!(b.unlock().await.unwrap_err().is_lost());
    let c = locks.try_acquire(&name, ttl).await.unwrap();
    assert!(c.fence() > first);
    c.unlock().await.unwrap();
    db.cleanup().await;
}

/// `advisory-lock-unbalanced` on a PL/pgSQL body that raises between its session lock and
/// its unlock: the error ends the function, the rollback does not release a session lock, and
/// the connection keeps holding it; the transaction-level form is released with the rollback.
#[tokio::test]
async fn a_session_lock_outlives_an_error_raised_before_its_unlock() {
    let db = pg().await;
    let mut conn = db.connect().await;
    for (name, lock, unlock) in [
        (
            "settle_session",
            "pg_advisory_lock",
            "PERFORM pg_advisory_unlock(p_key);",
        ),
        ("settle_xact", "pg_advisory_xact_lock", ""),
    ] {
        sqlx::raw_sql(&format!(
            "CREATE FUNCTION {name}(p_key bigint) RETURNS void AS $$
             BEGIN
                 PERFORM {lock}(p_key);
                 RAISE EXCEPTION 'the work failed';
                 {unlock}
             END;
             $$ LANGUAGE plpgsql"
        ))
        .execute(&mut conn)
        .await
        .unwrap();
    }
    let held = |key: i64| {
        format!(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() \
             AND ((classid::bigint << 32) | objid::bigint) = {key}"
        )
    };
    let key = i64::from(test_key().0 as i32).abs();
    let err = sqlx::query("SELECT settle_session($1)")
        .bind(key)
        .execute(&mut conn)
        .await;
    assert!(err.is_err(), "the function raises");
    let count: i64 = sqlx::query_scalar(&held(key))
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(count, 1, "the session lock is still held after the error");
    let mut other = db.connect().await;
    let free: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(key)
        .fetch_one(&mut other)
        .await
        .unwrap();
    assert!(!free, "another session cannot take it");
    let _: bool = sqlx::query_scalar("SELECT pg_advisory_unlock($1)")
        .bind(key)
        .fetch_one(&mut conn)
        .await
        .unwrap();

    let err = sqlx::query("SELECT settle_xact($1)")
        .bind(key)
        .execute(&mut conn)
        .await;
    assert!(err.is_err(), "the function raises");
    let count: i64 = sqlx::query_scalar(&held(key))
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(count, 0, "the transaction-level lock ended with the error");
    let free: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(key)
        .fetch_one(&mut other)
        .await
        .unwrap();
    assert!(free, "another session takes it");
    drop(conn);
    drop(other);
    db.cleanup().await;
}
