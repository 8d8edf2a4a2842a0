//! Leases on a real three-primary Redis Cluster started for this test.

mod support;

use std::collections::HashSet;
use std::time::Duration;

use locklint_runtime::redis_lock::{LockError, RedisLocker};
use redis::AsyncCommands;
use support::redis::{connect, unique, RedisCluster};

/// Acquire (with its fence), renew and release go through
/// `redis::cluster_async::ClusterConnection` without a CROSSSLOT error, because the lock key
/// and the fence key share the `{name}` hash tag; different lock names spread over several
/// slots and nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_work_on_redis_cluster() {
    let cluster = RedisCluster::start();
    let conn = cluster.conn().await;
    let locker = RedisLocker::new(conn.clone())
        .with_prefix(unique("cluster"))
        .unwrap();

    let mut first = locker
        .acquire("orders", Duration::from_secs(5))
        .await
        .expect("acquire");
    assert!(first.fence().0 > 1_600_000_000_000_000, "time floor");
    assert!(locker
        .try_acquire("orders", Duration::from_secs(5))
        .await
        .unwrap()
        .is_none());
    first.renew(Duration::from_secs(10)).await.expect("renew");
    let mut probe = conn.clone();
    let pttl: i64 = probe.pttl(first.key()).await.unwrap();
    assert!(pttl > 5000, "{pttl}");
    assert!(first.release().await.expect("release"));
    let mut second = locker
        .acquire("orders", Duration::from_secs(5))
        .await
        .unwrap();
    assert!(second.fence() > first.fence());
    second.spawn_keep_alive(Duration::from_secs(60));
    assert!(second.release().await.unwrap());

    // Many names: each acquisition must succeed (no CROSSSLOT), and the keys must land on
    // more than one slot and more than one node.
    let mut leases = Vec::new();
    for i in 0..24 {
        let lease = locker
            .acquire(&format!("name-{i}"), Duration::from_secs(10))
            .await
            .unwrap_or_else(|e: LockError| panic!("name-{i}: {e}"));
        leases.push(lease);
    }
    let mut slots = HashSet::new();
    let mut direct = connect(&cluster.urls()[0]).await;
    for lease in &leases {
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(lease.key())
            .query_async(&mut direct)
            .await
            .unwrap();
        let fence_slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(locker.fence_key(lease.name()))
            .query_async(&mut direct)
            .await
            .unwrap();
        assert_eq!(slot, fence_slot, "lock and fence keys share a slot");
        slots.insert(slot);
    }
    assert!(slots.len() > 1, "all names hashed to one slot");
    let mut nodes_with_keys = 0;
    for url in cluster.urls() {
        let mut node = connect(&url).await;
        let keys: Vec<String> = node
            .keys(format!("{}:*:lock", locker.prefix()))
            .await
            .unwrap();
        if !keys.is_empty() {
            nodes_with_keys += 1;
        }
    }
    assert!(nodes_with_keys > 1, "all locks on one node");
    for mut lease in leases {
        assert!(lease.release().await.unwrap());
    }
}
