//! One test per analyzer rule about Redis locks. Each test first runs the anti-pattern the
//! rule flags against a real Redis, under an interleaving forced with barriers, channels or
//! explicit waits (never timing luck), and asserts that the failure the rule predicts really
//! happens. It then runs this crate's replacement under the same interleaving and asserts that
//! the failure does not happen.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use locklint_runtime::redis_lock::{Backoff, LockError, LostReason, RedisLocker};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use support::redis::redis;
use tokio::sync::{oneshot, Barrier};

fn locker(conn: MultiplexedConnection, prefix: String) -> RedisLocker<MultiplexedConnection> {
    RedisLocker::new(conn)
        .with_prefix(prefix)
        .unwrap()
        .with_backoff(Backoff {
            base: Duration::from_millis(2),
            max: Duration::from_millis(20),
        })
}

/// Waits (polling) until `key` no longer exists: a forced, not a guessed, expiry.
async fn wait_until_gone(conn: &mut MultiplexedConnection, key: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let exists: bool = conn.exists(key).await.unwrap();
        if !exists {
            return;
        }
        assert!(Instant::now() < deadline, "{key} never expired");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// `get-then-set`: `GET` to check the lock is free, then `SET` to take it.
///
/// Interleaving: A and B both run `GET` (both see no lock), meet at a barrier, then both run
/// `SET`. Both believe they hold the lock: two holders at once.
/// Replacement: both meet at the barrier, then both call `try_acquire`, whose check and write
/// are one atomic `SET NX PX`: exactly one of them gets a lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proof_get_then_set() {
    let redis = redis();
    let key = format!("{}:lock", redis.unique("get-then-set"));

    let barrier = Arc::new(Barrier::new(2));
    let holders = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for me in ["a", "b"] {
        let (mut conn, key) = (redis.conn().await, key.clone());
        let (barrier, holders) = (Arc::clone(&barrier), Arc::clone(&holders));
        tasks.push(tokio::spawn(async move {
            let current: Option<String> = conn.get(&key).await.unwrap();
            barrier.wait().await;
            if current.is_none() {
                let _: () = conn.set_ex(&key, me, 10).await.unwrap();
                holders.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        holders.load(Ordering::SeqCst),
        2,
        "anti-pattern: both took the lock"
    );

    let locker = locker(redis.conn().await, redis.unique("get-then-set-fixed"));
    let barrier = Arc::new(Barrier::new(2));
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let (locker, barrier) = (locker.clone(), Arc::clone(&barrier));
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            locker
                .try_acquire("x", Duration::from_secs(10))
                .await
                .unwrap()
        }));
    }
    let mut leases = Vec::new();
    for t in tasks {
        leases.extend(t.await.unwrap());
    }
    assert_eq!(leases.len(), 1, "replacement: exactly one holder");
}

/// `setnx-without-expiry`: `SETNX` now, `EXPIRE` as a later step.
///
/// Interleaving: A runs `SETNX`, then crashes (its task is aborted while parked before the
/// `EXPIRE`). The key has no TTL (`TTL` = -1) and B can never take the lock, even long after
/// A's intended lease would have ended.
/// Replacement: A acquires with a 500 ms TTL (the expiry is part of the atomic `SET NX PX`)
/// and crashes the same way without releasing (the lease is leaked, so not even its drop
/// runs). The key carries a TTL, and B gets the lock once it runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proof_setnx_without_expiry() {
    let redis = redis();
    let mut probe = redis.conn().await;
    let key = format!("{}:lock", redis.unique("setnx-without-expiry"));

    let (took_tx, took_rx) = oneshot::channel();
    let crashed = {
        let (mut conn, key) = (redis.conn().await, key.clone());
        tokio::spawn(async move {
            let won: bool = conn.set_nx(&key, "a").await.unwrap();
            took_tx.send(won).unwrap();
            std::future::pending::<()>().await; // crashes here, before EXPIRE
            let _: () = conn.expire(&key, 1).await.unwrap();
        })
    };
    assert!(took_rx.await.unwrap());
    crashed.abort();
    let _ = crashed.await;
    let ttl: i64 = probe.ttl(&key).await.unwrap();
    assert_eq!(ttl, -1, "anti-pattern: the lock has no expiry");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let b_won: bool = probe.set_nx(&key, "b").await.unwrap();
    assert!(!b_won, "anti-pattern: the lock is stuck forever");
    let _: () = probe.del(&key).await.unwrap();

    let locker = locker(
        redis.conn().await,
        redis.unique("setnx-without-expiry-fixed"),
    );
    let (took_tx, took_rx) = oneshot::channel();
    let crashed = {
        let locker = locker.clone();
        tokio::spawn(async move {
            let lease = locker
                .acquire("x", Duration::from_millis(500))
                .await
                .unwrap();
            std::mem::forget(lease); // a crashed process releases nothing
            took_tx.send(()).unwrap();
            std::future::pending::<()>().await;
        })
    };
    took_rx.await.unwrap();
    crashed.abort();
    let _ = crashed.await;
    let pttl: i64 = probe.pttl(locker.lock_key("x")).await.unwrap();
    assert!(
        pttl > 0 && pttl <= 500,
        "replacement: the lock has a TTL ({pttl})"
    );
    let mut b = locker
        .acquire_timeout("x", Duration::from_secs(5), Duration::from_secs(3))
        .await
        .expect("replacement: B gets the lock after the TTL");
    assert!(b.release().await.unwrap());
}

/// `separate-expire`: `SETNX` and `EXPIRE` sent together (here in `MULTI`/`EXEC`), the
/// `EXPIRE` not conditional on the `SETNX` result.
///
/// Interleaving: H holds the lock with a 1 s TTL. A then runs `MULTI; SETNX; EXPIRE 60; EXEC`:
/// the `SETNX` loses, but the `EXPIRE` still runs and pushes H's lock to 60 s, so a crash of H
/// would now block everyone for a minute.
/// Replacement: A calls `try_acquire`, which sets the expiry only together with a winning
/// `SET NX`; it gets nothing and H's TTL is untouched.
#[tokio::test]
async fn proof_separate_expire() {
    let redis = redis();
    let mut probe = redis.conn().await;
    let locker = locker(redis.conn().await, redis.unique("separate-expire"));
    let ttl = Duration::from_secs(1);

    let mut h = locker.acquire("x", ttl).await.unwrap();
    let mut a = redis.conn().await;
    let (won, extended): (bool, bool) = redis::pipe()
        .atomic()
        .set_nx(h.key(), "a")
        .expire(h.key(), 60)
        .query_async(&mut a)
        .await
        .unwrap();
    assert!(!won && extended);
    let pttl: i64 = probe.pttl(h.key()).await.unwrap();
    let owner: String = probe.get(h.key()).await.unwrap();
    assert_eq!(owner, h.token(), "still H's lock");
    assert!(
        pttl > 10_000,
        "anti-pattern: H's lock extended to {pttl} ms"
    );
    assert!(h.release().await.unwrap());

    let mut h = locker.acquire("x", ttl).await.unwrap();
    assert!(locker
        .try_acquire("x", Duration::from_secs(60))
        .await
        .unwrap()
        .is_none());
    let pttl: i64 = probe.pttl(h.key()).await.unwrap();
    assert!(
        pttl > 0 && pttl <= 1000,
        "replacement: H's TTL untouched ({pttl})"
    );
    assert!(h.release().await.unwrap());
}

/// `unconditional-release`: releasing with a plain `DEL`.
///
/// Interleaving: A takes the lock with a 150 ms TTL and stalls until its key has expired
/// (waited for, not guessed); B takes the lock; A resumes and runs `DEL`, deleting B's lock.
/// C then takes the lock while B still holds a valid lease: two holders at once.
/// Replacement: A calls `release()`, a compare-and-delete, which reports that A no longer
/// owned the lock and leaves B's key intact; C does not get the lock.
#[tokio::test]
async fn proof_unconditional_release() {
    let redis = redis();
    let mut probe = redis.conn().await;
    let locker = locker(redis.conn().await, redis.unique("unconditional-release"));
    let short = Duration::from_millis(150);
    let long = Duration::from_secs(10);

    for fixed in [false, true] {
        let mut a = locker.acquire("x", short).await.unwrap();
        wait_until_gone(&mut probe, a.key()).await;
        let mut b = locker.acquire("x", long).await.unwrap();
        if fixed {
            assert!(!a.release().await.unwrap(), "A no longer owned it");
        } else {
            let _: () = probe.del(a.key()).await.unwrap();
        }
        let c = locker.try_acquire("x", long).await.unwrap();
        assert!(b.is_held(), "B's lease is still valid locally");
        if fixed {
            let owner: Option<String> = probe.get(b.key()).await.unwrap();
            assert_eq!(
                owner.as_deref(),
                Some(b.token()),
                "replacement: B's key intact"
            );
            assert!(c.is_none(), "replacement: single holder");
            assert!(b.release().await.unwrap());
        } else {
            let mut c = c.expect("anti-pattern: C took the lock B still holds");
            assert!(c.fence() > b.fence());
            assert!(!b.release().await.unwrap());
            assert!(c.release().await.unwrap());
        }
    }
}

/// `unconditional-renew`: extending with a plain `PEXPIRE`.
///
/// Interleaving: A takes the lock with a 150 ms TTL and stalls until its key has expired; B
/// takes the lock for 2 s; A resumes and runs `PEXPIRE key 60000`, extending B's lock to a
/// minute (a crash of B now blocks everyone for 60 s, and A believes it still holds the lock).
/// Replacement: A calls `renew()`, a compare-and-`PEXPIRE`, which fails with `Lost` and
/// leaves B's expiry alone.
#[tokio::test]
async fn proof_unconditional_renew() {
    let redis = redis();
    let mut probe = redis.conn().await;
    let locker = locker(redis.conn().await, redis.unique("unconditional-renew"));
    let short = Duration::from_millis(150);
    let b_ttl = Duration::from_secs(2);

    let a = locker.acquire("x", short).await.unwrap();
    wait_until_gone(&mut probe, a.key()).await;
    let mut b = locker.acquire("x", b_ttl).await.unwrap();
    let extended: bool = probe.pexpire(a.key(), 60_000).await.unwrap();
    assert!(extended, "anti-pattern: A's PEXPIRE 'succeeded'");
    let pttl: i64 = probe.pttl(b.key()).await.unwrap();
    assert!(
        pttl > 10_000,
        "anti-pattern: B's lock extended to {pttl} ms"
    );
    assert!(b.release().await.unwrap());

    let a = locker.acquire("x", short).await.unwrap();
    wait_until_gone(&mut probe, a.key()).await;
    let mut b = locker.acquire("x", b_ttl).await.unwrap();
    let renewed = a.renew(Duration::from_secs(60)).await;
    assert!(
        matches!(
            renewed,
            Err(LockError::Lost {
                reason: LostReason::NotOwner,
                ..
            })
        ),
        "replacement: A learns it lost the lock ({renewed:?})"
    );
    let pttl: i64 = probe.pttl(b.key()).await.unwrap();
    assert!(
        pttl > 0 && pttl <= 2000,
        "replacement: B's TTL untouched ({pttl})"
    );
    assert!(b.release().await.unwrap());
}

/// `lock-result-ignored`: sending `SETNX` and proceeding whatever it answered.
///
/// Interleaving: A holds the lock and stays inside its critical section until told to leave.
/// B runs `SETNX` (losing, reply discarded) and enters the critical section; only then is A
/// told to leave. The overlap counter sees two workers inside at once.
/// Replacement: B calls `try_acquire`, whose `Option<Lease>` must be inspected to get a
/// lease at all; B gets `None` and stays out. The counter never exceeds one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proof_lock_result_ignored() {
    let redis = redis();
    for fixed in [false, true] {
        let locker = locker(redis.conn().await, redis.unique("lock-result-ignored"));
        let inside = Arc::new(AtomicUsize::new(0));
        let max_inside = Arc::new(AtomicUsize::new(0));
        let enter = |inside: &AtomicUsize, max: &AtomicUsize| {
            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
            max.fetch_max(now, Ordering::SeqCst);
        };

        let (a_inside_tx, a_inside_rx) = oneshot::channel();
        let (a_leave_tx, a_leave_rx) = oneshot::channel::<()>();
        let a = {
            let (locker, inside, max_inside) =
                (locker.clone(), Arc::clone(&inside), Arc::clone(&max_inside));
            tokio::spawn(async move {
                let mut lease = locker.acquire("x", Duration::from_secs(10)).await.unwrap();
                enter(&inside, &max_inside);
                a_inside_tx.send(lease.key().to_owned()).unwrap();
                a_leave_rx.await.unwrap();
                inside.fetch_sub(1, Ordering::SeqCst);
                assert!(lease.release().await.unwrap());
            })
        };
        let key = a_inside_rx.await.unwrap();

        let b_entered = if fixed {
            match locker
                .try_acquire("x", Duration::from_secs(10))
                .await
                .unwrap()
            {
                Some(_lease) => {
                    enter(&inside, &max_inside);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    true
                }
                None => false,
            }
        } else {
            let mut b = redis.conn().await;
            let _ignored: bool = b.set_nx(&key, "b").await.unwrap();
            enter(&inside, &max_inside);
            inside.fetch_sub(1, Ordering::SeqCst);
            true
        };
        a_leave_tx.send(()).unwrap();
        a.await.unwrap();

        if fixed {
            assert!(!b_entered, "replacement: B stayed out");
            assert_eq!(
                max_inside.load(Ordering::SeqCst),
                1,
                "replacement: no overlap"
            );
        } else {
            assert!(b_entered);
            assert_eq!(
                max_inside.load(Ordering::SeqCst),
                2,
                "anti-pattern: B worked while A held the lock"
            );
        }
    }
}

/// The compare-and-delete script of a careful release, used here with a constant value.
const COMPARE_AND_DELETE: &str = r"
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
";

/// `constant-lock-value`: every holder writes the same value (`"1"`).
///
/// Interleaving: A takes the lock with `SET key 1 NX PX 150` and stalls until its key has
/// expired (waited for, not guessed); B takes the lock with the same constant; A resumes and
/// releases with a *correct* compare-and-delete script, comparing against `"1"`: the value
/// matches B's, so A deletes B's lock. C then takes the lock while B still works: two holders.
/// Replacement: leases carry a unique 128-bit token each, so A's release compares A's token
/// against B's, deletes nothing, and C does not get the lock.
#[tokio::test]
async fn proof_constant_lock_value() {
    let redis = redis();
    let mut probe = redis.conn().await;
    let key = format!("{}:lock", redis.unique("constant-lock-value"));
    let script = redis::Script::new(COMPARE_AND_DELETE);

    // the anti-pattern
    let a: bool = redis::cmd("SET")
        .arg(&key)
        .arg("1")
        .arg("NX")
        .arg("PX")
        .arg(150)
        .query_async::<Option<String>>(&mut probe)
        .await
        .unwrap()
        .is_some();
    assert!(a);
    wait_until_gone(&mut probe, &key).await;
    let b: Option<String> = redis::cmd("SET")
        .arg(&key)
        .arg("1")
        .arg("NX")
        .arg("PX")
        .arg(10_000)
        .query_async(&mut probe)
        .await
        .unwrap();
    assert!(b.is_some(), "B took the lock");
    let deleted: i64 = script
        .key(&key)
        .arg("1")
        .invoke_async(&mut probe)
        .await
        .unwrap();
    assert_eq!(
        deleted, 1,
        "anti-pattern: A's release matched B's value and deleted B's lock"
    );
    let c: Option<String> = redis::cmd("SET")
        .arg(&key)
        .arg("1")
        .arg("NX")
        .arg("PX")
        .arg(10_000)
        .query_async(&mut probe)
        .await
        .unwrap();
    assert!(c.is_some(), "anti-pattern: C took the lock B still holds");
    let _: i64 = script
        .key(&key)
        .arg("1")
        .invoke_async(&mut probe)
        .await
        .unwrap();

    // the replacement
    let locker = locker(
        redis.conn().await,
        redis.unique("constant-lock-value-fixed"),
    );
    let mut a = locker
        .acquire("x", Duration::from_millis(150))
        .await
        .unwrap();
    wait_until_gone(&mut probe, a.key()).await;
    let mut b = locker.acquire("x", Duration::from_secs(10)).await.unwrap();
    assert_ne!(a.token(), b.token(), "each holder has its own token");
    assert!(
        !a.release().await.unwrap(),
        "replacement: A's token does not match B's"
    );
    let owner: Option<String> = probe.get(b.key()).await.unwrap();
    assert_eq!(
        owner.as_deref(),
        Some(b.token()),
        "replacement: B's key intact"
    );
    assert!(locker
        .try_acquire("x", Duration::from_secs(10))
        .await
        .unwrap()
        .is_none());
    assert!(b.release().await.unwrap());
}
