//! Leases when the connection or the server fails: acquisitions ride out transient errors
//! until their deadline, and `with_lock` reports a loss without waiting on a dead server.

mod support;

use std::time::{Duration, Instant};

use locklint_runtime::redis_lock::{LockError, RedisLocker};
use redis::aio::ConnectionManager;
use support::redis::{redis, RedisServer};

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
