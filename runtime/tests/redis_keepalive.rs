//! Keep-alive against a real Redis: it holds a lease past its TTL, notices every way the lock
//! can disappear within about one renewal interval, never recreates a key, and stops at the
//! maximum hold time. Destructive cases run on their own throwaway `redis-server`. Killed
//! connections are in `redis_failures.rs`.

mod support;

use std::time::{Duration, Instant};

use locklint_runtime::redis_lock::{Lease, LostReason, RedisLocker};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use support::redis::{redis, unique, RedisServer};

const TTL: Duration = Duration::from_millis(300);
const INTERVAL: Duration = Duration::from_millis(100); // TTL / 3

/// Generous bound for noticing a loss: two renewal intervals plus scheduling slack.
fn detection_bound() -> Duration {
    INTERVAL * 2 + Duration::from_millis(500)
}

async fn hold(
    conn: MultiplexedConnection,
    prefix: String,
    max_hold: Duration,
) -> Lease<MultiplexedConnection> {
    let locker = RedisLocker::new(conn).with_prefix(prefix).unwrap();
    let mut lease = locker.acquire("job", TTL).await.expect("acquire");
    lease.spawn_keep_alive(max_hold);
    lease
}

async fn value(conn: &mut MultiplexedConnection, key: &str) -> Option<String> {
    conn.get(key).await.expect("GET")
}

/// Waits for `lost()` and returns the reason and how long it took from `since`.
async fn lost_within(
    lease: &Lease<MultiplexedConnection>,
    since: Instant,
) -> (LostReason, Duration) {
    let reason = tokio::time::timeout(Duration::from_secs(10), lease.lost())
        .await
        .expect("lost() never fired");
    (reason, since.elapsed())
}

/// After a loss: the lease reports it everywhere, the task is gone, and waiting several
/// renewal intervals does not bring the key back.
async fn assert_stopped(lease: &Lease<MultiplexedConnection>, probe: &mut MultiplexedConnection) {
    assert!(!lease.is_held());
    assert!(lease.cancellation_token().is_cancelled());
    tokio::time::sleep(INTERVAL * 3).await;
    assert!(!lease.keep_alive_running(), "keep-alive still running");
    assert_eq!(value(probe, lease.key()).await, None, "key recreated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_holds_for_five_ttls() {
    let redis = redis();
    let mut probe = redis.conn().await;
    let mut lease = hold(
        redis.conn().await,
        redis.unique("ka-hold"),
        Duration::from_secs(60),
    )
    .await;
    let until = Instant::now() + TTL * 5;
    let mut samples = 0;
    while Instant::now() < until {
        assert_eq!(
            value(&mut probe, lease.key()).await.as_deref(),
            Some(lease.token()),
            "key lost after {samples} samples"
        );
        assert!(lease.is_held());
        samples += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(samples >= 10);
    assert!(lease.keep_alive_running());
    assert!(lease.release().await.unwrap());
    assert!(!lease.keep_alive_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_notices_a_deleted_key() {
    let redis = redis();
    let mut probe = redis.conn().await;
    let lease = hold(
        redis.conn().await,
        redis.unique("ka-del"),
        Duration::from_secs(60),
    )
    .await;
    tokio::time::sleep(TTL).await;
    let _: () = probe.del(lease.key()).await.unwrap();
    let (reason, took) = lost_within(&lease, Instant::now()).await;
    assert_eq!(reason, LostReason::NotOwner);
    assert!(took < detection_bound(), "took {took:?}");
    assert_stopped(&lease, &mut probe).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_notices_flushall() {
    let server = RedisServer::start();
    let mut probe = server.conn().await;
    let lease = hold(
        server.conn().await,
        unique("ka-flush"),
        Duration::from_secs(60),
    )
    .await;
    tokio::time::sleep(TTL).await;
    let _: () = redis::cmd("FLUSHALL")
        .query_async(&mut probe)
        .await
        .unwrap();
    let (reason, took) = lost_within(&lease, Instant::now()).await;
    assert_eq!(reason, LostReason::NotOwner);
    assert!(took < detection_bound(), "took {took:?}");
    assert_stopped(&lease, &mut probe).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_notices_a_server_restart() {
    let mut server = RedisServer::start();
    let lease = hold(
        server.conn().await,
        unique("ka-restart"),
        Duration::from_secs(60),
    )
    .await;
    tokio::time::sleep(TTL).await;
    let killed_at = Instant::now();
    tokio::task::block_in_place(|| server.restart());
    let (reason, took) = lost_within(&lease, killed_at).await;
    assert!(matches!(reason, LostReason::RenewalFailed(_)), "{reason:?}");
    assert!(took < detection_bound(), "took {took:?}");
    let mut probe = server.conn().await;
    assert_stopped(&lease, &mut probe).await;
}

/// With a maximum hold time of 700 ms and a 300 ms TTL, renewals stop at the hold deadline:
/// the last renewal is shortened to end there, `lost()` fires with `MaxHoldReached`, and the
/// key expires on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_stops_at_max_hold() {
    let redis = redis();
    let mut probe = redis.conn().await;
    let max_hold = Duration::from_millis(700);
    let lease = hold(redis.conn().await, redis.unique("ka-maxhold"), max_hold).await;
    let (reason, _) = lost_within(&lease, Instant::now()).await;
    let held_for = lease.acquired_at().elapsed();
    assert_eq!(reason, LostReason::MaxHoldReached);
    assert!(
        held_for >= max_hold - Duration::from_millis(50),
        "{held_for:?}"
    );
    assert!(held_for < max_hold + detection_bound(), "{held_for:?}");
    // Renewed twice or more in between, else the 300 ms TTL would have ended it earlier.
    assert!(held_for > TTL * 2);
    let deadline = Instant::now() + Duration::from_millis(500);
    while value(&mut probe, lease.key()).await.is_some() {
        assert!(
            Instant::now() < deadline,
            "key outlived the maximum hold time"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_stopped(&lease, &mut probe).await;
}

/// Through the `Lease` trait, the keep-alive stops at the maximum hold time configured on
/// the locker (`with_max_hold`), not at the default of ten minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trait_keep_alive_uses_the_lockers_max_hold() {
    use locklint_runtime::lock::{Lease as LeaseTrait, Lock};
    let redis = redis();
    let max_hold = Duration::from_millis(700);
    let locker = RedisLocker::new(redis.conn().await)
        .with_prefix(redis.unique("ka-trait-maxhold"))
        .unwrap()
        .with_max_hold(max_hold);
    let mut lease = Lock::try_acquire(&locker, "job", TTL)
        .await
        .expect("acquire");
    assert_eq!(lease.max_hold(), max_hold);
    LeaseTrait::spawn_keep_alive(&mut lease);
    let (reason, _) = lost_within(&lease, Instant::now()).await;
    let held_for = lease.acquired_at().elapsed();
    assert_eq!(reason, LostReason::MaxHoldReached);
    assert!(held_for > TTL * 2, "renewed before the cap: {held_for:?}");
    assert!(held_for < max_hold + detection_bound(), "{held_for:?}");
}
