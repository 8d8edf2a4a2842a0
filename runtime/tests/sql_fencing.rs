//! Fencing at the resource: a stale lock holder's writes are rejected by PostgreSQL.

mod support;

use std::time::Duration;

use locklint_runtime::advisory::AdvisoryLock;
use locklint_runtime::fence::{FenceCounter, FenceError, FencedClaim, FencedTable, FencedWrite};
use locklint_runtime::table::{TableLease, TableLock};
use locklint_runtime::FencingToken;
use sqlx::PgPool;
use support::sql::{pg, pg_with, PgDb};

/// An account whose balance is protected by a fence, and a ledger recording every accepted
/// write (its primary key rejects a duplicate entry for the same fence).
async fn setup(pool: &PgPool) -> FencedTable {
    sqlx::raw_sql(
        "CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL);
         INSERT INTO accounts (id, balance) VALUES (1, 0);
         CREATE TABLE ledger (fence BIGINT PRIMARY KEY, writer TEXT NOT NULL, amount BIGINT NOT NULL);",
    )
    .execute(pool)
    .await
    .unwrap();
    let accounts = FencedTable::new("accounts").unwrap();
    accounts.add_fence_column(pool).await.unwrap();
    accounts.add_fence_column(pool).await.unwrap(); // idempotent
    accounts
}

/// A private schema with the accounts and the ledger (see [`setup`]) and a migrated lock
/// table, on a pool of up to `max` connections.
async fn with_locks(max: u32) -> (PgDb, FencedTable, TableLock) {
    let db = pg_with(max).await;
    let accounts = setup(&db.pool).await;
    let locks = TableLock::new(db.pool.clone());
    locks.migrate().await.unwrap();
    (db, accounts, locks)
}

/// One fenced write: the balance update and its ledger entry commit together or not at all.
async fn deposit(
    pool: &PgPool,
    accounts: &FencedTable,
    token: FencingToken,
    writer: &str,
    amount: i64,
) -> Result<(), FenceError> {
    let mut tx = pool.begin().await?;
    let sql = accounts.update_sql("balance = balance + $3");
    FencedWrite::new(&sql, token)
        .bind(1_i64)
        .bind(amount)
        .current_fence_from(accounts, 1_i64)
        .execute(&mut tx)
        .await?;
    sqlx::query("INSERT INTO ledger (fence, writer, amount) VALUES ($1, $2, $3)")
        .bind(token.as_i64())
        .bind(writer)
        .bind(amount)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

async fn ledger(pool: &PgPool) -> Vec<(i64, String, i64)> {
    sqlx::query_as("SELECT fence, writer, amount FROM ledger ORDER BY fence")
        .fetch_all(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn stale_table_lock_holder_is_fenced_out() {
    let (db, accounts, locks) = with_locks(6).await;
    let ttl = Duration::from_millis(500);

    // A acquires, then is paused (GC, swap, VM freeze...) past its TTL before writing.
    let a = locks.try_acquire("account-1", ttl).await.unwrap().unwrap();
    let a_task = {
        let (pool, accounts) = (db.pool.clone(), accounts.clone());
        let token = a.fence();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1500)).await; // the pause
            deposit(&pool, &accounts, token, "A", 100).await
        })
    };

    // B waits for the lease to expire (judged by the database clock), takes over with a
    // higher fence and writes.
    let b = locks
        .acquire_timeout(
            "account-1",
            Duration::from_secs(30),
            Duration::from_secs(10),
        )
        .await
        .unwrap()
        .expect("B takes over after A's lease expires");
    assert!(b.fence() > a.fence());
    deposit(&db.pool, &accounts, b.fence(), "B", 100)
        .await
        .unwrap();

    // A wakes up, still believing it holds the lock: the database refuses its write.
    match a_task.await.unwrap() {
        Err(FenceError::StaleFence { presented, current }) => {
            assert_eq!(presented, a.fence());
            assert_eq!(current, Some(b.fence().0));
        }
        other => panic!("expected StaleFence, got {other:?}"),
    }
    // Its lease bookkeeping fails too, without touching B's lease.
    assert!(!locks.release(&a).await.unwrap());
    assert!(locks.release(&b).await.unwrap());

    // No lost write (B's is there), no duplicate (A's is not): exactly one deposit.
    assert_eq!(
        ledger(&db.pool).await,
        vec![(b.fence().as_i64(), "B".into(), 100)]
    );
    let balance = balance(&db.pool).await;
    assert_eq!(balance, 100);
    assert_eq!(
        accounts.current_fence(&db.pool, 1_i64).await.unwrap(),
        Some(b.fence().0)
    );
    db.cleanup().await;
}

#[tokio::test]
async fn stale_advisory_holder_with_fence_counter_is_fenced_out() {
    let db = pg_with(6).await;
    let accounts = setup(&db.pool).await;
    let fences = FenceCounter::default();
    fences.migrate(&db.pool).await.unwrap();
    let key = support::sql::unique("fenced-advisory");

    // A takes the advisory lock and draws a fence.
    let mut a_guard = AdvisoryLock::try_lock(&db.pool, key.as_str())
        .await
        .unwrap()
        .unwrap();
    let a_token = fences.next(&db.pool, &key).await.unwrap();
    let a_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *a_guard.connection().await)
        .await
        .unwrap();

    // A's session dies (network partition, failover, idle timeout) while A is paused.
    sqlx::query("SELECT pg_terminate_backend($1)")
        .bind(a_pid)
        .execute(&db.pool)
        .await
        .unwrap();

    // B gets the lock and a higher fence, and writes.
    let b_guard = AdvisoryLock::lock_timeout(&db.pool, key.as_str(), Duration::from_secs(10))
        .await
        .unwrap()
        .expect("lock freed by the terminated session");
    let b_token = fences.next(&db.pool, &key).await.unwrap();
    assert!(b_token > a_token);
    deposit(&db.pool, &accounts, b_token, "B", 7).await.unwrap();

    // A resumes and writes: rejected.
    let err = deposit(&db.pool, &accounts, a_token, "A", 7)
        .await
        .unwrap_err();
    assert!(err.is_stale(), "{err:?}");
    // Replaying B's own write with the same token is rejected as well (at most once).
    let err = deposit(&db.pool, &accounts, b_token, "B", 7)
        .await
        .unwrap_err();
    assert!(
        matches!(err, FenceError::StaleFence { presented, current: Some(c) } if presented == b_token && c == b_token.0)
    );
    b_guard.unlock().await.unwrap();
    assert_eq!(
        ledger(&db.pool).await,
        vec![(b_token.as_i64(), "B".into(), 7)]
    );
    // A's guard cannot unlock: its session is gone. Unlocking consumes the guard and closes
    // its connection, so the pool can shut down.
    assert!(a_guard.unlock().await.is_err());
    db.cleanup().await;
}

#[tokio::test]
async fn fenced_write_without_lookup_and_on_missing_row() {
    let db = pg().await;
    let accounts = setup(&db.pool).await;
    let sql = accounts.update_sql("balance = $3");
    // Missing row: rejected, no current fence.
    let err = FencedWrite::new(&sql, FencingToken(5))
        .bind(99_i64)
        .bind(1_i64)
        .current_fence_from(&accounts, 99_i64)
        .execute(&db.pool)
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        FenceError::StaleFence {
            presented: FencingToken(5),
            current: None
        }
    ));
    // Accepted write on a standalone connection reports the affected rows.
    let mut conn = db.connect().await;
    let rows = FencedWrite::new(&sql, FencingToken(5))
        .bind(1_i64)
        .bind(10_i64)
        .execute(&mut conn)
        .await
        .unwrap();
    assert_eq!(rows, 1);
    // Older token without lookup: rejected, current unknown.
    let err = FencedWrite::new(&sql, FencingToken(4))
        .bind(1_i64)
        .bind(20_i64)
        .execute(&db.pool)
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        FenceError::StaleFence {
            presented: FencingToken(4),
            current: None
        }
    ));
    assert_eq!(
        accounts.current_fence(&db.pool, 1_i64).await.unwrap(),
        Some(5)
    );
    assert_eq!(
        accounts.add_fence_column_sql(),
        "ALTER TABLE accounts ADD COLUMN IF NOT EXISTS fence BIGINT NOT NULL DEFAULT 0"
    );
    assert!(FencedTable::new("accounts; --").is_err());
    db.cleanup().await;
}

/// Many workers with short leases, some pausing past their TTL before writing: every write
/// that was accepted is in the ledger exactly once, the balance is the sum of the ledger,
/// accepted fences strictly increase in commit order, and every rejected write carried an
/// older fence than the row had.
#[tokio::test]
async fn fenced_writes_under_expiring_leases_lose_and_duplicate_nothing() {
    const WORKERS: usize = 6;
    const ROUNDS: usize = 12;
    let (db, accounts, locks) = with_locks(12).await;
    sqlx::query("ALTER TABLE ledger ADD COLUMN seq BIGSERIAL")
        .execute(&db.pool)
        .await
        .unwrap();

    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let (pool, accounts, locks) = (db.pool.clone(), accounts.clone(), locks.clone());
        tasks.push(tokio::spawn(async move {
            let (mut accepted, mut rejected) = (0u32, 0u32);
            for round in 0..ROUNDS {
                let lease = locks
                    .acquire_timeout(
                        "account-1",
                        Duration::from_millis(80),
                        Duration::from_secs(60),
                    )
                    .await
                    .unwrap()
                    .expect("acquired");
                if (w + round) % 3 == 0 {
                    tokio::time::sleep(Duration::from_millis(150)).await; // paused past the TTL
                }
                match deposit(&pool, &accounts, lease.fence(), &format!("w{w}"), 1).await {
                    Ok(()) => accepted += 1,
                    Err(FenceError::StaleFence { presented, current }) => {
                        assert!(current.expect("row exists") >= presented.0);
                        rejected += 1;
                    }
                    Err(e) => panic!("{e}"),
                }
                locks.release(&lease).await.unwrap();
            }
            (accepted, rejected)
        }));
    }
    let (mut accepted, mut rejected) = (0, 0);
    for t in tasks {
        let (a, r) = t.await.unwrap();
        accepted += a;
        rejected += r;
    }
    assert_eq!(accepted + rejected, (WORKERS * ROUNDS) as u32);
    eprintln!("accepted {accepted}, rejected as stale {rejected}");
    assert!(accepted > 0);
    assert!(
        rejected > 0,
        "some paused holders must have been fenced out"
    );

    let rows: Vec<(i64, i64)> = sqlx::query_as("SELECT fence, seq FROM ledger ORDER BY seq")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    assert_eq!(
        rows.len() as u32,
        accepted,
        "every accepted write is in the ledger once"
    );
    assert!(
        rows.windows(2).all(|w| w[0].0 < w[1].0),
        "accepted fences strictly increase in commit order"
    );
    let balance = balance(&db.pool).await;
    assert_eq!(
        balance,
        i64::from(accepted),
        "no lost and no duplicate deposit"
    );
    db.cleanup().await;
}

async fn balance(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT balance FROM accounts WHERE id = 1")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// B waits until A's lease has expired by the database clock (A is paused meanwhile) and
/// takes over with a newer fence.
async fn b_takes_over(locks: &TableLock, a: &TableLease) -> TableLease {
    let b = locks
        .acquire_timeout(
            "account-1",
            Duration::from_secs(30),
            Duration::from_secs(10),
        )
        .await
        .unwrap()
        .expect("B takes over after A's lease expires");
    assert!(b.fence() > a.fence());
    b
}

/// The write-only form (`fence < $1` compared only at the write) loses a read-modify-write
/// update: A reads, A's lease expires, B reads the same balance, A writes first (accepted:
/// the row has not seen B's fence yet), then B writes its value computed from the same old
/// read. Both deposits were accepted and one of them is gone.
#[tokio::test]
async fn write_only_fence_loses_a_read_modify_write_update() {
    let (db, accounts, locks) = with_locks(4).await;
    let write = accounts.update_sql("balance = $3");

    let a = locks
        .try_acquire("account-1", Duration::from_millis(300))
        .await
        .unwrap()
        .expect("free lock");
    let a_read = balance(&db.pool).await;
    let b = b_takes_over(&locks, &a).await;
    let b_read = balance(&db.pool).await;
    FencedWrite::new(&write, a.fence())
        .bind(1_i64)
        .bind(a_read + 100)
        .execute(&db.pool)
        .await
        .expect("the write-only form accepts A: no newer fence has reached the row");
    FencedWrite::new(&write, b.fence())
        .bind(1_i64)
        .bind(b_read + 100)
        .execute(&db.pool)
        .await
        .unwrap();
    assert_eq!(
        balance(&db.pool).await,
        100,
        "two accepted deposits of 100, one of them lost"
    );
    db.cleanup().await;
}

/// The same interleaving with the claim form: the read claims the row with the fence and the
/// write requires the claimed fence. B's claim raises the row's fence, so A's write is
/// refused (StaleFence) whatever the order of the writes, and nothing is lost: A learns its
/// deposit did not happen and redoes it under a new lease.
#[tokio::test]
async fn claim_form_refuses_the_stale_holder_and_loses_nothing() {
    let (db, accounts, locks) = with_locks(4).await;
    let claim = accounts.claim_sql("balance");
    let write = accounts.claimed_update_sql("balance = $3");

    let a = locks
        .try_acquire("account-1", Duration::from_millis(300))
        .await
        .unwrap()
        .expect("free lock");
    let (a_read,): (i64,) = FencedClaim::new(&claim, a.fence())
        .bind(1_i64)
        .fetch(&db.pool)
        .await
        .unwrap();
    // Claiming again with the same token is the same holder reading again.
    let (again,): (i64,) = FencedClaim::new(&claim, a.fence())
        .bind(1_i64)
        .fetch(&db.pool)
        .await
        .unwrap();
    assert_eq!(again, a_read);
    // A is paused; B takes over once A's lease has expired and claims the row.
    let b = b_takes_over(&locks, &a).await;
    let (b_read,): (i64,) = FencedClaim::new(&claim, b.fence())
        .bind(1_i64)
        .fetch(&db.pool)
        .await
        .unwrap();
    assert_eq!(b_read, a_read);

    // A resumes and writes first: refused, the row carries B's claim.
    let err = FencedWrite::new(&write, a.fence())
        .bind(1_i64)
        .bind(a_read + 100)
        .current_fence_from(&accounts, 1_i64)
        .execute(&db.pool)
        .await
        .unwrap_err();
    assert!(
        matches!(err, FenceError::StaleFence { presented, current: Some(c) } if presented == a.fence() && c == b.fence().0),
        "{err:?}"
    );
    // A cannot claim the row again either.
    let err = FencedClaim::<(i64,)>::new(&claim, a.fence())
        .bind(1_i64)
        .current_fence_from(&accounts, 1_i64)
        .fetch(&db.pool)
        .await
        .unwrap_err();
    assert!(
        matches!(err, FenceError::StaleFence { current: Some(c), .. } if c == b.fence().0),
        "{err:?}"
    );
    FencedWrite::new(&write, b.fence())
        .bind(1_i64)
        .bind(b_read + 100)
        .execute(&db.pool)
        .await
        .unwrap();
    assert!(locks.release(&b).await.unwrap());

    // A redoes its refused deposit under a new lease: both deposits count.
    let a2 = locks
        .try_acquire("account-1", Duration::from_secs(30))
        .await
        .unwrap()
        .expect("released by B");
    let mut tx = db.pool.begin().await.unwrap();
    let (read,): (i64,) = FencedClaim::new(&claim, a2.fence())
        .bind(1_i64)
        .fetch(&mut *tx)
        .await
        .unwrap();
    FencedWrite::new(&write, a2.fence())
        .bind(1_i64)
        .bind(read + 100)
        .execute(&mut tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(balance(&db.pool).await, 200, "no deposit lost");
    // A missing row cannot be claimed.
    let err = FencedClaim::<(i64,)>::new(&claim, a2.fence())
        .bind(99_i64)
        .current_fence_from(&accounts, 99_i64)
        .fetch(&db.pool)
        .await
        .unwrap_err();
    assert!(matches!(err, FenceError::StaleFence { current: None, .. }));
    db.cleanup().await;
}
