//! The fence never goes backwards: a Redis restarted without persistence loses the fence
//! counter, and the fences issued afterwards are still larger than every earlier one.

mod support;

use std::time::Duration;

use locklint_runtime::redis_lock::RedisLocker;
use support::redis::RedisServer;

/// Takes and releases the lock `name` `rounds` times, returning every fence issued.
async fn take_fences(server: &RedisServer, name: &str, rounds: usize) -> Vec<u64> {
    let locker = RedisLocker::new(server.conn().await);
    let mut fences = Vec::new();
    for _ in 0..rounds {
        let mut lease = locker
            .try_acquire(name, Duration::from_secs(10))
            .await
            .unwrap()
            .expect("free lock");
        fences.push(lease.fence().0);
        assert!(lease.release().await.unwrap());
    }
    fences
}

#[tokio::test]
async fn fences_after_a_restart_without_persistence_exceed_every_earlier_fence() {
    let mut server = RedisServer::start(); // --save "" --appendonly no
    let names = ["invoices", "payouts"];
    let mut before = Vec::new();
    for name in names {
        let fences = take_fences(&server, name, 20).await;
        assert!(
            fences.windows(2).all(|w| w[0] < w[1]),
            "{name}: fences strictly increase: {fences:?}"
        );
        before.push(fences);
    }

    server.restart(); // the dataset, fence counters included, is gone
    let mut conn = server.conn().await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(keys.is_empty(), "the restarted server kept {keys:?}");

    for (name, before) in names.iter().zip(&before) {
        let after = take_fences(&server, name, 20).await;
        let (max_before, min_after) = (before.iter().max().unwrap(), after.iter().min().unwrap());
        assert!(
            min_after > max_before,
            "{name}: a fence issued after the restart ({min_after}) is not above every fence \
             issued before it ({max_before})"
        );
        assert!(after.windows(2).all(|w| w[0] < w[1]));
    }
}
