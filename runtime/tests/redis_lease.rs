//! Lease basics against a real Redis: acquisition, fencing, renewal, release, scoped use and
//! drop behaviour.

mod support;

use std::time::{Duration, Instant};

use locklint_runtime::redis_lock::{Backoff, LockError, LostReason, RedisLocker};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use support::redis::redis;

fn locker(conn: MultiplexedConnection, prefix: String) -> RedisLocker<MultiplexedConnection> {
    RedisLocker::new(conn)
        .with_prefix(prefix)
        .expect("valid prefix")
        .with_backoff(Backoff {
            base: Duration::from_millis(2),
            max: Duration::from_millis(20),
        })
}

async fn value(conn: &mut MultiplexedConnection, key: &str) -> Option<String> {
    conn.get(key).await.expect("GET")
}

async fn wait_for_absent(conn: &mut MultiplexedConnection, key: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if value(conn, key).await.is_none() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn acquire_and_release_round_trip() {
    let redis = redis();
    let mut conn = redis.conn().await;
    let locker = locker(conn.clone(), redis.unique("roundtrip"));
    let ttl = Duration::from_secs(5);
    let mut lease = locker.acquire("job", ttl).await.expect("acquire");

    assert_eq!(lease.key(), locker.lock_key("job"));
    assert!(lease.key().ends_with(":{job}:lock"));
    assert_eq!(lease.token().len(), 32);
    assert_eq!(
        value(&mut conn, lease.key()).await.as_deref(),
        Some(lease.token())
    );
    let pttl: i64 = conn.pttl(lease.key()).await.unwrap();
    assert!(pttl > 0 && pttl <= 5000, "pttl {pttl}");
    let fence: u64 = conn.get(locker.fence_key("job")).await.unwrap();
    assert_eq!(lease.fence().0, fence);
    // The first fence of a fresh name is the server's time in microseconds (a floor that
    // survives the loss of the counter), well above any plain counter.
    assert!(
        lease.fence().0 > 1_600_000_000_000_000,
        "first fence {} is not a microsecond time floor",
        lease.fence()
    );
    assert!(lease.is_held());

    assert!(lease.release().await.expect("release"), "we owned it");
    assert_eq!(value(&mut conn, lease.key()).await, None);
    assert!(!lease.is_held());
    assert_eq!(lease.lost_reason(), Some(LostReason::Released));
    assert!(
        !lease.release().await.expect("second release"),
        "already released"
    );
    assert!(
        lease.renew(ttl).await.is_err(),
        "renewing a released lease fails"
    );
}

#[tokio::test]
async fn try_acquire_returns_none_while_held() {
    let redis = redis();
    let locker = locker(redis.conn().await, redis.unique("contended"));
    let ttl = Duration::from_secs(5);
    let mut first = locker
        .try_acquire("x", ttl)
        .await
        .unwrap()
        .expect("free lock");
    assert!(locker.try_acquire("x", ttl).await.unwrap().is_none());
    first.release().await.unwrap();
    let mut second = locker
        .try_acquire("x", ttl)
        .await
        .unwrap()
        .expect("free again");
    assert!(second.fence() > first.fence());
    second.release().await.unwrap();
}

#[tokio::test]
async fn acquire_timeout_gives_up_then_waits_for_release() {
    let redis = redis();
    let locker = locker(redis.conn().await, redis.unique("timeout"));
    let ttl = Duration::from_secs(5);
    let mut held = locker.acquire("x", ttl).await.unwrap();

    let started = Instant::now();
    let err = locker
        .acquire_timeout("x", ttl, Duration::from_millis(150))
        .await
        .expect_err("held elsewhere");
    assert!(matches!(err, LockError::TimedOut { .. }), "{err}");
    assert!(started.elapsed() >= Duration::from_millis(150));

    let waiter = {
        let locker = locker.clone();
        tokio::spawn(async move {
            locker
                .acquire_timeout("x", ttl, Duration::from_secs(10))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    held.release().await.unwrap();
    let mut next = waiter.await.unwrap().expect("acquired after release");
    assert!(next.fence() > held.fence());
    next.release().await.unwrap();
}

#[tokio::test]
async fn validity_is_measured_from_the_attempt_start() {
    let redis = redis();
    let locker = locker(redis.conn().await, redis.unique("validity"));
    let ttl = Duration::from_millis(800);
    let before = Instant::now();
    let mut lease = locker.acquire("x", ttl).await.unwrap();
    let after = Instant::now();
    assert!(lease.acquired_at() >= before && lease.acquired_at() <= after);
    assert!(lease.valid_until() <= lease.acquired_at() + ttl);
    assert!(lease.valid_until() > lease.acquired_at() + ttl / 2);
    assert!(lease.remaining() <= ttl);
    lease.release().await.unwrap();
    assert_eq!(lease.remaining(), Duration::ZERO);
}

/// Without a keep-alive, `lost()` still fires once the validity window has elapsed.
#[tokio::test]
async fn lost_fires_at_expiry_without_keep_alive() {
    let redis = redis();
    let locker = locker(redis.conn().await, redis.unique("expiry"));
    let lease = locker
        .acquire("x", Duration::from_millis(200))
        .await
        .unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(3), lease.lost())
        .await
        .expect("lost() fires");
    assert_eq!(reason, LostReason::Expired);
    assert!(!lease.is_held());
    assert!(lease.cancellation_token().is_cancelled());
}

/// Spec item 2: a stale holder at the Redis level. A's lease expires while A sleeps, B takes
/// the lock; B's fence is larger, A's release reports `false` and leaves B's key, and A's
/// renewal fails.
#[tokio::test]
async fn stale_holder_is_fenced_out() {
    let redis = redis();
    let mut conn = redis.conn().await;
    let locker = locker(conn.clone(), redis.unique("stale"));
    let mut a = locker
        .acquire("x", Duration::from_millis(200))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(350)).await;
    let mut b = locker
        .acquire_timeout("x", Duration::from_secs(5), Duration::from_secs(5))
        .await
        .expect("A's key expired");
    assert!(b.fence() > a.fence(), "{} > {}", b.fence(), a.fence());

    let renew = a.renew(Duration::from_secs(5)).await;
    assert!(
        matches!(
            renew,
            Err(LockError::Lost {
                reason: LostReason::NotOwner,
                ..
            })
        ),
        "{renew:?}"
    );
    assert!(!a.release().await.unwrap(), "A no longer owned the lock");
    assert_eq!(value(&mut conn, b.key()).await.as_deref(), Some(b.token()));
    let pttl: i64 = conn.pttl(b.key()).await.unwrap();
    assert!(pttl > 1000, "A's renewal did not touch B's expiry: {pttl}");
    assert!(b.is_held());
    assert!(b.release().await.unwrap());
}

/// Spec item 4: a release by a non-owner (its lease expired, another holder took over) leaves
/// the new holder's key intact, including when the release comes from the drop path.
#[tokio::test]
async fn release_by_non_owner_keeps_successor_key() {
    let redis = redis();
    let mut conn = redis.conn().await;
    let locker = locker(conn.clone(), redis.unique("nonowner"));
    let mut old = locker
        .acquire("x", Duration::from_millis(150))
        .await
        .unwrap();
    let dropped = locker
        .acquire("y", Duration::from_millis(150))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut new = locker.acquire("x", Duration::from_secs(5)).await.unwrap();
    let mut new_y = locker.acquire("y", Duration::from_secs(5)).await.unwrap();

    assert!(!old.release().await.unwrap());
    drop(dropped); // spawns a background compare-and-delete
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        value(&mut conn, new.key()).await.as_deref(),
        Some(new.token())
    );
    assert_eq!(
        value(&mut conn, new_y.key()).await.as_deref(),
        Some(new_y.token())
    );
    assert!(new.release().await.unwrap());
    assert!(new_y.release().await.unwrap());
}

#[tokio::test]
async fn dropped_lease_is_released_in_the_background() {
    let redis = redis();
    let mut conn = redis.conn().await;
    let locker = locker(conn.clone(), redis.unique("drop"));
    let lease = locker.acquire("x", Duration::from_secs(30)).await.unwrap();
    let key = lease.key().to_owned();
    drop(lease);
    assert!(wait_for_absent(&mut conn, &key, Duration::from_secs(3)).await);
}

/// A release whose future is dropped before Redis answered keeps the token: the lease can be
/// released again, and the key ends up deleted.
#[tokio::test]
async fn cancelled_release_keeps_the_token() {
    let redis = redis();
    let mut conn = redis.conn().await;
    let locker = locker(conn.clone(), redis.unique("cancelrelease"));
    let mut lease = locker.acquire("x", Duration::from_secs(30)).await.unwrap();
    let token = lease.token().to_owned();
    tokio::select! {
        biased;
        _ = lease.release() => panic!("a network round trip cannot finish on first poll"),
        _ = std::future::ready(()) => {}
    }
    assert_eq!(lease.token(), token);
    assert!(lease.is_held(), "release was not confirmed");
    let _ = lease.release().await.unwrap();
    assert_eq!(value(&mut conn, lease.key()).await, None);
}

/// An acquisition attempt dropped midway does not leave an orphaned lock behind.
#[tokio::test]
async fn cancelled_acquire_leaves_no_key() {
    let redis = redis();
    let mut conn = redis.conn().await;
    let locker = locker(conn.clone(), redis.unique("cancelacquire"));
    for _ in 0..5 {
        tokio::select! {
            biased;
            _ = locker.try_acquire("x", Duration::from_secs(30)) => panic!("no reply on first poll"),
            _ = std::future::ready(()) => {}
        }
    }
    let key = locker.lock_key("x");
    assert!(wait_for_absent(&mut conn, &key, Duration::from_secs(3)).await);
    let mut lease = locker
        .acquire_timeout("x", Duration::from_secs(5), Duration::from_secs(3))
        .await
        .expect("free");
    lease.release().await.unwrap();
}

#[tokio::test]
async fn renew_extends_the_key() {
    let redis = redis();
    let mut conn = redis.conn().await;
    let locker = locker(conn.clone(), redis.unique("renew"));
    let mut lease = locker
        .acquire("x", Duration::from_millis(300))
        .await
        .unwrap();
    let before = lease.valid_until();
    lease.renew(Duration::from_secs(10)).await.unwrap();
    assert!(lease.valid_until() > before);
    let pttl: i64 = conn.pttl(lease.key()).await.unwrap();
    assert!(pttl > 5000, "{pttl}");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(lease.is_held());
    assert!(lease.release().await.unwrap());
}

#[tokio::test]
async fn invalid_names_and_ttls_are_rejected() {
    let redis = redis();
    let conn = redis.conn().await;
    assert!(matches!(
        RedisLocker::new(conn.clone()).with_prefix("a{b}"),
        Err(LockError::InvalidName { .. })
    ));
    let locker = locker(conn, redis.unique("invalid"));
    for name in ["", "a{b", "c}d"] {
        let err = locker.try_acquire(name, Duration::from_secs(1)).await;
        assert!(
            matches!(err, Err(LockError::InvalidName { .. })),
            "{name}: {err:?}"
        );
    }
    let err = locker.try_acquire("x", Duration::from_micros(10)).await;
    assert!(matches!(err, Err(LockError::InvalidTtl(_))), "{err:?}");
}

#[tokio::test]
async fn works_over_connection_manager() {
    let redis = redis();
    let manager = redis.client().get_connection_manager().await.unwrap();
    let locker = RedisLocker::new(manager)
        .with_prefix(redis.unique("manager"))
        .unwrap();
    let mut a = locker.acquire("x", Duration::from_secs(5)).await.unwrap();
    assert!(locker
        .try_acquire("x", Duration::from_secs(5))
        .await
        .unwrap()
        .is_none());
    a.renew(Duration::from_secs(5)).await.unwrap();
    assert!(a.release().await.unwrap());
    let mut b = locker.acquire("x", Duration::from_secs(5)).await.unwrap();
    assert!(b.fence() > a.fence());
    assert!(b.release().await.unwrap());
}

#[tokio::test]
async fn with_lock_returns_the_value_and_releases() {
    let redis = redis();
    let mut conn = redis.conn().await;
    let locker = locker(conn.clone(), redis.unique("withlock"));
    let mut probe = conn.clone();
    let key = locker.lock_key("x");
    let (fence, seen) = locker
        .with_lock("x", Duration::from_millis(300), |lease| async move {
            // Outlive the TTL: the keep-alive must hold on to the lock.
            tokio::time::sleep(Duration::from_millis(700)).await;
            let seen: Option<String> = probe.get(lease.key()).await.unwrap();
            assert!(lease.is_held());
            (lease.fence(), seen == Some(lease.token().to_owned()))
        })
        .await
        .expect("with_lock");
    assert!(seen, "the key still held our token after 2x the TTL");
    assert!(fence.0 >= 1);
    assert_eq!(value(&mut conn, &key).await, None);

    let err: Result<Result<(), &str>, _> = locker
        .with_lock("x", Duration::from_secs(5), |_| async { Err("boom") })
        .await;
    assert_eq!(err.unwrap(), Err("boom"));
    assert_eq!(value(&mut conn, &key).await, None);
}

#[tokio::test]
async fn with_lock_releases_after_a_panic() {
    let redis = redis();
    let mut conn = redis.conn().await;
    let locker = locker(conn.clone(), redis.unique("panic"));
    let key = locker.lock_key("x");
    let task = {
        let locker = locker.clone();
        tokio::spawn(async move {
            locker
                .with_lock("x", Duration::from_secs(30), |_| async {
                    tokio::task::yield_now().await;
                    panic!("work failed");
                })
                .await
        })
    };
    let err = task.await.expect_err("the panic propagates");
    assert!(err.is_panic());
    assert_eq!(
        value(&mut conn, &key).await,
        None,
        "released before unwinding on"
    );
}

/// When the lock is lost mid-work, `with_lock` drops the work and returns `Err(Lost)`.
#[tokio::test]
async fn with_lock_cancels_work_when_the_lock_is_lost() {
    let redis = redis();
    let conn = redis.conn().await;
    let locker = locker(conn.clone(), redis.unique("withlost"));
    let mut saboteur = conn.clone();
    let started = Instant::now();
    let result = locker
        .with_lock("x", Duration::from_millis(300), |lease| async move {
            let _: () = saboteur.del(lease.key()).await.unwrap();
            std::future::pending::<()>().await
        })
        .await;
    assert!(
        matches!(
            result,
            Err(LockError::Lost {
                reason: LostReason::NotOwner,
                ..
            })
        ),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
}

/// Dropping the `with_lock` future (the caller gave up) releases the lease in the background.
#[tokio::test]
async fn dropped_with_lock_future_releases() {
    let redis = redis();
    let mut conn = redis.conn().await;
    let locker = locker(conn.clone(), redis.unique("withlockdrop"));
    let key = locker.lock_key("x");
    let (inside_tx, inside_rx) = tokio::sync::oneshot::channel();
    let work = locker.with_lock("x", Duration::from_secs(30), |_| async move {
        inside_tx.send(()).unwrap();
        std::future::pending::<()>().await
    });
    tokio::select! {
        _ = work => unreachable!("the work never finishes"),
        _ = inside_rx => {}
    }
    assert!(wait_for_absent(&mut conn, &key, Duration::from_secs(3)).await);
}

/// `with_lock` enforces the locker's maximum hold time: the work is cancelled with
/// `Lost(MaxHoldReached)` and the key is gone right afterwards.
#[tokio::test]
async fn with_lock_enforces_max_hold() {
    let redis = redis();
    let mut conn = redis.conn().await;
    let locker =
        locker(conn.clone(), redis.unique("withlockmax")).with_max_hold(Duration::from_millis(500));
    let started = Instant::now();
    let result = locker
        .with_lock("x", Duration::from_millis(300), |_| {
            std::future::pending::<()>()
        })
        .await;
    assert!(
        matches!(
            result,
            Err(LockError::Lost {
                reason: LostReason::MaxHoldReached,
                ..
            })
        ),
        "{result:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(450));
    assert!(started.elapsed() < Duration::from_secs(3));
    // The loss is reported at once; the release runs in the background and the key is gone
    // right after (it would expire on its own at the hold deadline anyway).
    let deadline = Instant::now() + Duration::from_millis(500);
    while value(&mut conn, &locker.lock_key("x")).await.is_some() {
        assert!(Instant::now() < deadline, "key outlived the lost lease");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
