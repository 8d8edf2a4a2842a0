//! Leases when the connection or the server fails: acquisitions ride out transient errors
//! until their deadline, the keep-alive signals a dead connection while the lease is still
//! valid but rides out a reconnecting one, and `with_lock` reports a loss without waiting on
//! a dead server.

mod support;

use std::time::{Duration, Instant};

use locklint_runtime::redis_lock::{LockError, LostReason, RedisLocker};
use redis::aio::ConnectionManager;
use support::redis::{client_id, redis, unique, RedisServer};

async fn manager(url: &str) -> ConnectionManager {
    ConnectionManager::new(redis::Client::open(url).unwrap())
        .await
        .expect("connection manager")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_timeout_rides_out_a_killed_connection() {
    let redis = redis();
    let prefix = redis.unique("fail-kill");
    let holder = RedisLocker::new(redis.conn().await)
        .with_prefix(prefix.clone())
        .unwrap();
    let mut held = holder
        .try_acquire("job", Duration::from_secs(10))
        .await
        .unwrap()
        .expect("free");

    let mut waiter_conn = manager(&redis.url()).await;
    let waiter_id: i64 = redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut waiter_conn)
        .await
        .unwrap();
    let waiter = RedisLocker::new(waiter_conn).with_prefix(prefix).unwrap();
    let wait = tokio::spawn(async move {
        waiter
            .acquire_timeout("job", Duration::from_secs(10), Duration::from_secs(8))
            .await
    });

    // Kill the waiter's connection mid-wait, then free the lock.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(waiter_id)
        .query_async(&mut redis.conn().await)
        .await
        .unwrap();
    assert_eq!(killed, 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(held.release().await.unwrap());

    let mut lease = wait
        .await
        .unwrap()
        .expect("the wait survives a killed connection and takes the freed lock");
    assert!(lease.is_held());
    assert!(lease.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_timeout_reports_the_failure_when_the_server_stays_down() {
    let mut server = RedisServer::start();
    let locker = RedisLocker::new(manager(&server.url()).await);
    server.kill();
    let err = locker
        .acquire_timeout("job", Duration::from_secs(1), Duration::from_millis(800))
        .await
        .expect_err("no server");
    assert!(
        matches!(err, LockError::Redis(_)),
        "a deadline reached while the server was down names the failure, got {err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lock_reports_loss_without_waiting_on_a_dead_server() {
    let mut server = RedisServer::start();
    let locker = RedisLocker::new(manager(&server.url()).await);
    let ttl = Duration::from_millis(300);
    let run = tokio::spawn(async move {
        locker
            .with_lock("job", ttl, |_lease| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    let killed_at = Instant::now();
    server.kill();

    // The keep-alive notices within about one TTL; the release of the lost lease must not
    // hold the result back while the connection manager retries a dead server.
    let result = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("with_lock kept waiting on the dead server")
        .unwrap();
    assert!(
        matches!(result, Err(LockError::Lost { .. })),
        "got {result:?}"
    );
    eprintln!("loss reported {:?} after the kill", killed_at.elapsed());
}

/// `CLIENT KILL ID <id>` through a separate connection to `url`.
async fn kill_client(url: &str, id: i64) {
    let mut probe = support::redis::connect(url).await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .query_async(&mut probe)
        .await
        .unwrap();
    assert_eq!(killed, 1);
}

/// A plain `MultiplexedConnection` never reconnects: once it is killed every renewal fails.
/// The keep-alive retries, but declares the lease lost as soon as less than one renewal
/// interval of validity is left: within two renewal intervals of the kill, while the key
/// still exists on the server and before the lease's validity ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_signals_a_killed_connection_while_the_lease_is_still_valid() {
    let server = RedisServer::start();
    let mut probe = server.conn().await;
    let mut conn = server.conn().await;
    let id = client_id(&mut conn).await;
    let ttl = Duration::from_millis(900);
    let interval = ttl / 3;
    let locker = RedisLocker::new(conn)
        .with_prefix(unique("fail-ka-kill"))
        .unwrap();
    let mut lease = locker.acquire("job", ttl).await.expect("acquire");
    lease.spawn_keep_alive(Duration::from_secs(60));
    // Past the first renewal, so the kill lands between two renewals.
    tokio::time::sleep(interval + interval / 2).await;
    assert!(lease.is_held());
    let killed_at = Instant::now();
    kill_client(&server.url(), id).await;

    let reason = tokio::time::timeout(Duration::from_secs(10), lease.lost())
        .await
        .expect("lost() never fired");
    let lost_at = Instant::now();
    let key_ttl: i64 = redis::cmd("PTTL")
        .arg(lease.key())
        .query_async(&mut probe)
        .await
        .unwrap();
    let took = lost_at - killed_at;
    eprintln!(
        "lost() {took:?} after CLIENT KILL ({reason}); the key had {key_ttl} ms left; renewal every {interval:?}"
    );
    assert!(matches!(reason, LostReason::RenewalFailed(_)), "{reason:?}");
    assert!(
        lost_at < lease.valid_until(),
        "signalled only at the end of the validity"
    );
    assert!(
        key_ttl > 0,
        "the key had expired before the holder was told"
    );
    assert!(took < ttl, "took {took:?}, longer than the TTL");
    assert!(
        took <= interval * 2 + Duration::from_millis(150),
        "took {took:?}, more than two renewal intervals"
    );
    assert!(!lease.is_held());
    assert!(lease.cancellation_token().is_cancelled());
    // The dead connection cannot release; the key then expires on its own, never renewed.
    assert!(lease.release().await.is_err());
    tokio::time::sleep(ttl).await;
    let left: Option<String> = redis::cmd("GET")
        .arg(lease.key())
        .query_async(&mut probe)
        .await
        .unwrap();
    assert_eq!(left, None, "the key was renewed after the loss");
}

/// A killed connection behind a `ConnectionManager` is a short blip: the renewal that meets
/// it fails, the manager reconnects, the retry gets through well before less than one
/// renewal interval of validity is left, and the lease is never declared lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_rides_out_a_killed_connection_that_reconnects() {
    let server = RedisServer::start();
    let mut probe = server.conn().await;
    let mut conn = manager(&server.url()).await;
    let id: i64 = redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut conn)
        .await
        .unwrap();
    let ttl = Duration::from_secs(1);
    let locker = RedisLocker::new(conn)
        .with_prefix(unique("fail-ka-reconnect"))
        .unwrap();
    let mut lease = locker.acquire("job", ttl).await.expect("acquire");
    lease.spawn_keep_alive(Duration::from_secs(60));
    let lost = lease.lost();
    kill_client(&server.url(), id).await;
    tokio::select! {
        reason = lost => panic!("declared lost after a reconnect: {reason}"),
        _ = tokio::time::sleep(ttl * 3) => {}
    }
    assert!(lease.is_held());
    let value: Option<String> = redis::cmd("GET")
        .arg(lease.key())
        .query_async(&mut probe)
        .await
        .unwrap();
    assert_eq!(value.as_deref(), Some(lease.token()));
    assert!(lease.release().await.unwrap(), "still ours after 3 TTLs");
}
