//! The lock table on PostgreSQL, MariaDB and SQLite against real databases.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use locklint_runtime::table::{LockPool, TableLock};
use locklint_runtime::FencingToken;
use support::sql::{mysql_with, pg_with, sqlite_with, unique};

/// (owner, fence) of the row `name`, read directly from the table.
async fn row(lock: &TableLock, name: &str) -> Option<(String, i64)> {
    let sql = format!("SELECT owner, fence FROM {} WHERE name = ", lock.table());
    match lock.pool() {
        LockPool::Postgres(p) => sqlx::query_as(&format!("{sql}$1"))
            .bind(name)
            .fetch_optional(p)
            .await
            .unwrap(),
        LockPool::MySql(p) => sqlx::query_as(&format!("{sql}?"))
            .bind(name)
            .fetch_optional(p)
            .await
            .unwrap(),
        LockPool::Sqlite(p) => sqlx::query_as(&format!("{sql}?"))
            .bind(name)
            .fetch_optional(p)
            .await
            .unwrap(),
    }
}

/// A live lease is not stolen; after expiry it is taken over with a higher fence; the stale
/// holder can neither renew nor release the new holder's lease.
async fn takeover_only_after_expiry(lock: TableLock) {
    lock.migrate().await.unwrap();
    lock.migrate().await.unwrap(); // idempotent
    let ttl = Duration::from_millis(700);
    let mut a = lock
        .try_acquire("job", ttl)
        .await
        .unwrap()
        .expect("free lock");
    assert_eq!(a.fence(), FencingToken(1));
    assert_eq!(a.name(), "job");

    // Live: not stolen, however often others try.
    for _ in 0..3 {
        assert!(lock.try_acquire("job", ttl).await.unwrap().is_none());
    }
    // A different name is independent.
    let other = lock.try_acquire("other", ttl).await.unwrap().unwrap();
    assert_eq!(other.fence(), FencingToken(1));

    // Renewing while live works and keeps the row's fence.
    lock.renew(&mut a, ttl).await.unwrap();
    assert_eq!(row(&lock, "job").await.unwrap(), (a.owner().to_owned(), 1));

    tokio::time::sleep(ttl + Duration::from_millis(300)).await;
    let mut b = lock
        .try_acquire("job", Duration::from_secs(30))
        .await
        .unwrap()
        .expect("expired lock is taken over");
    assert_eq!(b.fence(), FencingToken(2));
    assert!(b.fence() > a.fence());

    // The stale holder (a non-owner now) changes nothing.
    assert!(lock
        .renew(&mut a, Duration::from_secs(60))
        .await
        .unwrap_err()
        .is_lost());
    assert!(!lock.release(&a).await.unwrap());
    assert_eq!(row(&lock, "job").await.unwrap(), (b.owner().to_owned(), 2));
    assert!(lock.try_acquire("job", ttl).await.unwrap().is_none());

    // The owner renews and releases; the next acquirer gets fence 3 without waiting.
    lock.renew(&mut b, Duration::from_secs(30)).await.unwrap();
    assert!(lock.release(&b).await.unwrap());
    assert!(
        !lock.release(&b).await.unwrap(),
        "second release is a no-op"
    );
    let c = lock.try_acquire("job", ttl).await.unwrap().unwrap();
    assert_eq!(c.fence(), FencingToken(3));
    // A released lease cannot be renewed back to life.
    assert!(lock.renew(&mut b, ttl).await.unwrap_err().is_lost());
    assert_eq!(row(&lock, "job").await.unwrap(), (c.owner().to_owned(), 3));
}

/// Every acquisition (after release or after expiry) increments the fence.
async fn fence_increments_on_each_takeover(lock: TableLock) {
    lock.migrate().await.unwrap();
    let mut last = FencingToken(0);
    for i in 0..6 {
        let ttl = Duration::from_millis(if i % 2 == 0 { 30_000 } else { 50 });
        let lease = lock
            .acquire_timeout("counter", ttl, Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(lease.fence(), FencingToken(last.0 + 1));
        last = lease.fence();
        if i % 2 == 0 {
            assert!(lock.release(&lease).await.unwrap());
        } // odd rounds: let it expire
    }
}

/// 8 workers x `rounds` acquisitions: no two critical sections overlap (in-process detector
/// plus a non-atomic read-modify-write counter in the database), fences strictly increase
/// in acquisition order.
async fn mutual_exclusion_under_contention(lock: TableLock, rounds: usize) {
    const WORKERS: usize = 8;
    lock.migrate().await.unwrap();
    let counter_table = unique("counter");
    let exec = |sql: String| {
        let pool = lock.pool().clone();
        async move {
            match pool {
                LockPool::Postgres(p) => sqlx::raw_sql(&sql).execute(&p).await.map(|_| ()),
                LockPool::MySql(p) => sqlx::raw_sql(&sql).execute(&p).await.map(|_| ()),
                LockPool::Sqlite(p) => sqlx::raw_sql(&sql).execute(&p).await.map(|_| ()),
            }
            .unwrap()
        }
    };
    exec(format!("CREATE TABLE {counter_table} (n BIGINT NOT NULL)")).await;
    exec(format!("INSERT INTO {counter_table} (n) VALUES (0)")).await;

    let inside = Arc::new(AtomicUsize::new(0));
    let fences = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..WORKERS {
        let (lock, inside, fences, table) = (
            lock.clone(),
            inside.clone(),
            fences.clone(),
            counter_table.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let lease = lock
                    .acquire_timeout(
                        "contended",
                        Duration::from_secs(30),
                        Duration::from_secs(120),
                    )
                    .await
                    .unwrap()
                    .expect("acquired within the timeout");
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "overlap detected");
                fences.lock().unwrap().push(lease.fence());
                // Read-modify-write without atomicity: loses updates if sections overlap.
                let select = format!("SELECT n FROM {table}");
                let n: i64 = match lock.pool() {
                    LockPool::Postgres(p) => sqlx::query_scalar(&select).fetch_one(p).await,
                    LockPool::MySql(p) => sqlx::query_scalar(&select).fetch_one(p).await,
                    LockPool::Sqlite(p) => sqlx::query_scalar(&select).fetch_one(p).await,
                }
                .unwrap();
                tokio::task::yield_now().await;
                let update = format!("UPDATE {table} SET n = {}", n + 1);
                match lock.pool() {
                    LockPool::Postgres(p) => sqlx::query(&update).execute(p).await.map(|_| ()),
                    LockPool::MySql(p) => sqlx::query(&update).execute(p).await.map(|_| ()),
                    LockPool::Sqlite(p) => sqlx::query(&update).execute(p).await.map(|_| ()),
                }
                .unwrap();
                assert_eq!(inside.fetch_sub(1, Ordering::SeqCst), 1, "overlap detected");
                assert!(lock.release(&lease).await.unwrap());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let total = WORKERS * rounds;
    let select = format!("SELECT n FROM {counter_table}");
    let n: i64 = match lock.pool() {
        LockPool::Postgres(p) => sqlx::query_scalar(&select).fetch_one(p).await,
        LockPool::MySql(p) => sqlx::query_scalar(&select).fetch_one(p).await,
        LockPool::Sqlite(p) => sqlx::query_scalar(&select).fetch_one(p).await,
    }
    .unwrap();
    assert_eq!(
        n, total as i64,
        "lost updates mean overlapping critical sections"
    );
    let fences = fences.lock().unwrap().clone();
    assert_eq!(fences.len(), total);
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences must increase in acquisition order"
    );
    assert_eq!(fences.last(), Some(&FencingToken(total as u64)));
}

/// Runs `sql` (with `?`/`$n` already in the dialect's syntax) on the lock's pool.
async fn exec(lock: &TableLock, sql: &str) {
    match lock.pool() {
        LockPool::Postgres(p) => sqlx::query(sql).execute(p).await.map(|_| ()),
        LockPool::MySql(p) => sqlx::query(sql).execute(p).await.map(|_| ()),
        LockPool::Sqlite(p) => sqlx::query(sql).execute(p).await.map(|_| ()),
    }
    .unwrap();
}

/// The keep-alive holds a lease past its TTL; when the row is taken over behind the holder's
/// back (here: another owner written into the row, as a takeover after a missed renewal
/// would), the next renewal finds it and signals the loss: `lost()` resolves, `is_held()`
/// turns false, the cancellation token fires, and the stale holder's release is refused.
/// Through the `Lock` trait the same lease reports `Busy` to others and `Lost` afterwards.
async fn keep_alive_signals_loss(lock: TableLock) {
    use locklint_runtime::lock::{Lease, Lock};
    lock.migrate().await.unwrap();
    let ttl = Duration::from_millis(450);
    let mut lease = Lock::try_acquire(&lock, "job", ttl).await.unwrap();
    Lease::spawn_keep_alive(&mut lease);
    let lost = lease.lost();
    let token = lease.cancellation_token();
    // Several TTLs pass: renewed, never taken over.
    for _ in 0..4 {
        tokio::time::sleep(ttl / 2).await;
        assert!(lease.is_held());
        assert!(Lock::try_acquire(&lock, "job", ttl)
            .await
            .unwrap_err()
            .is_busy());
    }
    exec(
        &lock,
        &format!("UPDATE {} SET owner = 'intruder'", lock.table()),
    )
    .await;
    let taken = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(20), lost)
        .await
        .expect("the next renewal signals the loss");
    eprintln!(
        "{:?}: loss signalled {:?} after the takeover (renewal every {:?})",
        lock.pool().dialect(),
        taken.elapsed(),
        ttl / 3
    );
    assert!(!lease.is_held());
    assert!(token.is_cancelled());
    assert!(lease.clone().renew(ttl).await.unwrap_err().is_lost());
    assert!(Lease::unlock(lease).await.unwrap_err().is_lost());
    assert_eq!(row(&lock, "job").await.unwrap().0, "intruder");
}

// ---- PostgreSQL

#[tokio::test]
async fn pg_takeover_only_after_expiry() {
    let db = pg_with(4).await;
    takeover_only_after_expiry(TableLock::new(db.pool.clone())).await;
    db.cleanup().await;
}

#[tokio::test]
async fn pg_fence_increments_on_each_takeover() {
    let db = pg_with(4).await;
    // Schema-qualified custom table name.
    let table = format!("{}.my_locks", db.schema);
    fence_increments_on_each_takeover(TableLock::with_table(db.pool.clone(), &table).unwrap())
        .await;
    db.cleanup().await;
}

#[tokio::test]
async fn pg_mutual_exclusion_under_contention() {
    let db = pg_with(10).await;
    mutual_exclusion_under_contention(TableLock::new(db.pool.clone()), 50).await;
    db.cleanup().await;
}

#[tokio::test]
async fn pg_keep_alive_signals_loss() {
    let db = pg_with(4).await;
    keep_alive_signals_loss(TableLock::new(db.pool.clone())).await;
    db.cleanup().await;
}

// ---- MariaDB / MySQL

#[tokio::test]
async fn mysql_keep_alive_signals_loss() {
    let db = mysql_with(4).await;
    keep_alive_signals_loss(TableLock::new(db.pool.clone())).await;
    db.cleanup().await;
}

#[tokio::test]
async fn mysql_takeover_only_after_expiry() {
    let db = mysql_with(4).await;
    takeover_only_after_expiry(TableLock::new(db.pool.clone())).await;
    db.cleanup().await;
}

#[tokio::test]
async fn mysql_fence_increments_on_each_takeover() {
    let db = mysql_with(4).await;
    fence_increments_on_each_takeover(TableLock::with_table(db.pool.clone(), "my_locks").unwrap())
        .await;
    db.cleanup().await;
}

#[tokio::test]
async fn mysql_mutual_exclusion_under_contention() {
    let db = mysql_with(10).await;
    mutual_exclusion_under_contention(TableLock::new(db.pool.clone()), 50).await;
    db.cleanup().await;
}

// ---- SQLite

#[tokio::test]
async fn sqlite_keep_alive_signals_loss() {
    let db = sqlite_with(4).await;
    keep_alive_signals_loss(TableLock::new(db.pool.clone())).await;
}

/// Renewals that keep failing (here: the pool is closed, so every renewal errors) are
/// retried, but the lease is declared lost as soon as less than one renewal interval of
/// validity is left: within two renewal intervals of the failure and before the validity
/// ends, never at its end.
#[tokio::test]
async fn sqlite_keep_alive_gives_up_one_interval_before_the_validity_ends() {
    let db = sqlite_with(2).await;
    let lock = TableLock::new(db.pool.clone());
    lock.migrate().await.unwrap();
    let ttl = Duration::from_millis(900);
    let interval = ttl / 3;
    let mut lease = lock.try_acquire("job", ttl).await.unwrap().expect("free");
    lease.spawn_keep_alive();
    tokio::time::sleep(interval + interval / 2).await;
    assert!(lease.is_held(), "renewed once");
    let failing_from = std::time::Instant::now();
    db.pool.close().await;
    tokio::time::timeout(Duration::from_secs(10), lease.lost())
        .await
        .expect("lost() never fired");
    let lost_at = std::time::Instant::now();
    let took = lost_at - failing_from;
    eprintln!(
        "lost() {took:?} after renewals started failing, {:?} before the validity ends",
        lease.valid_until().saturating_duration_since(lost_at)
    );
    assert!(lost_at < lease.valid_until(), "signalled only at the end");
    assert!(
        took <= interval * 2 + Duration::from_millis(150),
        "took {took:?}"
    );
    assert!(!lease.is_held());
    assert!(lease.cancellation_token().is_cancelled());
}

#[tokio::test]
async fn sqlite_takeover_only_after_expiry() {
    let db = sqlite_with(4).await;
    takeover_only_after_expiry(TableLock::new(db.pool.clone())).await;
}

#[tokio::test]
async fn sqlite_fence_increments_on_each_takeover() {
    let db = sqlite_with(4).await;
    fence_increments_on_each_takeover(TableLock::with_table(db.pool.clone(), "my_locks").unwrap())
        .await;
}

#[tokio::test]
async fn sqlite_mutual_exclusion_under_contention() {
    let db = sqlite_with(8).await;
    mutual_exclusion_under_contention(TableLock::new(db.pool.clone()), 50).await;
}

#[tokio::test]
async fn table_names_are_validated() {
    let pool = sqlx::SqlitePool::connect_lazy("sqlite::memory:").unwrap();
    assert!(TableLock::with_table(pool.clone(), "locks; DROP TABLE users").is_err());
    assert!(TableLock::with_table(pool, "main.locks").is_ok());
}
