//! The shapes `cross-slot-lock-keys` reports, run against a real three-primary Redis Cluster:
//! lock keys without a common hash tag in one command or one script invocation are refused
//! with `CROSSSLOT` (a multi-key `DEL` by the server; redis-rs's cluster client splits it by
//! slot instead), a script that touches a key it was not given in `KEYS` is refused, and the
//! forms the rule's page recommends (one hash tag, every key in `KEYS`) work and still act as a
//! lock: a second holder is refused and only the holder's token releases it.

mod support;

use redis::cluster_async::ClusterConnection;
use redis::Script;
use support::redis::{connect, unique, RedisCluster};

/// Takes the lock in `KEYS[1]` and raises the fence in `KEYS[2]` (the shape of
/// `fixtures/cross-slot-lock-keys/bad_script_lock_and_fence_keys.rs`).
const ACQUIRE_FENCED: &str = r"if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('incr', KEYS[2])
end
return 0";

/// Takes the lock in `KEYS[1]` and raises a fence it derives from it (the shape of
/// `fixtures/cross-slot-lock-keys/bad_derived_fence_key.rs`).
const ACQUIRE_DERIVED_FENCE: &str = r"if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('incr', KEYS[1] .. ':fence')
end
return 0";

/// Compare-and-delete of `KEYS[1]`.
const RELEASE: &str = r"if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0";

/// Releases `KEYS[1]` and counts the release under a key named in `ARGV[2]` (the shape of
/// `fixtures/cross-slot-lock-keys/bad_literal_and_built_keys.lua`).
// locklint: allow(cross-slot-lock-keys) -- the undeclared key is the defect this test runs on the cluster
const RELEASE_AND_COUNT: &str = r"if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('incr', ARGV[2])
  return 1
end
return 0";

async fn slot(cluster: &RedisCluster, key: &str) -> i64 {
    let mut direct = connect(&cluster.urls()[0]).await;
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(&mut direct)
        .await
        .unwrap()
}

async fn acquire(
    conn: &mut ClusterConnection,
    keys: &[&str],
    token: &str,
) -> redis::RedisResult<i64> {
    let script = Script::new(ACQUIRE_FENCED);
    let mut invocation = script.prepare_invoke();
    for k in keys {
        invocation.key(*k);
    }
    invocation.arg(token).arg(10_000).invoke_async(conn).await
}

fn assert_crossslot<T: std::fmt::Debug>(r: redis::RedisResult<T>, what: &str) {
    let e = r.expect_err(what);
    assert_eq!(e.code(), Some("CROSSSLOT"), "{what}: {e}");
    assert!(
        e.to_string()
            .contains("Keys in request don't hash to the same slot"),
        "{what}: {e}"
    );
}

/// The node serving a key's slot: the one that answers `EXISTS` instead of `MOVED`.
async fn owner(cluster: &RedisCluster, key: &str) -> usize {
    for (i, url) in cluster.urls().iter().enumerate() {
        let mut node = connect(url).await;
        let answer: redis::RedisResult<i64> =
            redis::cmd("EXISTS").arg(key).query_async(&mut node).await;
        if answer.is_ok() {
            return i;
        }
    }
    panic!("no node serves {key}")
}

/// A report id whose lock key `lock:report:<id>` and derived fence `<lock>:fence` are served
/// by different nodes (`apart`) or by the same node in different slots.
async fn report_id(cluster: &RedisCluster, base: &str, apart: bool) -> String {
    for n in 0..1000 {
        let id = format!("{base}-{n}");
        let lock = format!("lock:report:{id}");
        let fence = format!("{lock}:fence");
        let same_node = owner(cluster, &lock).await == owner(cluster, &fence).await;
        if same_node != apart && slot(cluster, &lock).await != slot(cluster, &fence).await {
            return id;
        }
    }
    panic!("no id found")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_keys_without_a_common_hash_tag_are_refused_and_tagged_ones_lock() {
    let cluster = RedisCluster::start();
    let mut conn = cluster.conn().await;
    let id = unique("slots");

    // the bad form: `lock:order:<id>` and `lock:fence:<id>` hash to different slots
    let (lock, fence) = (format!("lock:order:{id}"), format!("lock:fence:{id}"));
    assert_ne!(slot(&cluster, &lock).await, slot(&cluster, &fence).await);
    // the server refuses the command, on any node
    for url in cluster.urls() {
        let mut node = connect(&url).await;
        assert_crossslot(
            redis::cmd("DEL")
                .arg(&lock)
                .arg(&fence)
                .query_async::<i64>(&mut node)
                .await,
            "DEL of two lock keys",
        );
    }
    // redis-rs's cluster client splits such a `DEL` by slot: it runs as one command per node,
    // no longer one atomic step
    for k in [&lock, &fence] {
        let _: () = redis::cmd("SET")
            .arg(k)
            .arg("x")
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let deleted: i64 = redis::cmd("DEL")
        .arg(&lock)
        .arg(&fence)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(deleted, 2, "split over the slots' nodes");
    assert_crossslot(
        acquire(&mut conn, &[&lock, &fence], "t1").await,
        "a script on two lock keys",
    );
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&lock)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 0, "the refused script took no lock");

    // the good form: one hash tag for both keys
    let (lock, fence) = (
        format!("lock:{{order:{id}}}"),
        format!("fence:{{order:{id}}}"),
    );
    assert_eq!(slot(&cluster, &lock).await, slot(&cluster, &fence).await);
    let first = acquire(&mut conn, &[&lock, &fence], "t1").await.unwrap();
    assert!(first >= 1, "the first holder gets a fence");
    assert_eq!(
        acquire(&mut conn, &[&lock, &fence], "t2").await.unwrap(),
        0,
        "a second holder is refused"
    );
    let release = Script::new(RELEASE);
    let foreign: i64 = release
        .key(&lock)
        .arg("t2")
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(foreign, 0, "another token does not release the lock");
    let own: i64 = release
        .key(&lock)
        .arg("t1")
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(own, 1, "the holder's token releases it");
    let next = acquire(&mut conn, &[&lock, &fence], "t2").await.unwrap();
    assert!(next > first, "the next holder gets a larger fence");
    let deleted: i64 = redis::cmd("DEL")
        .arg(&lock)
        .arg(&fence)
        .query_async(&mut conn)
        .await
        .expect("DEL of two keys with one hash tag");
    assert_eq!(deleted, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_touching_keys_not_in_keys_are_refused_unless_they_share_the_tag() {
    let cluster = RedisCluster::start();
    let mut conn = cluster.conn().await;
    let id = unique("undeclared");

    // a fence derived from an untagged lock key lands in another slot; when another node
    // serves it, the script fails at the call
    let lock = format!("lock:report:{}", report_id(&cluster, &id, true).await);
    let derived = Script::new(ACQUIRE_DERIVED_FENCE);
    let e = derived
        .key(&lock)
        .arg("t1")
        .arg(10_000)
        .invoke_async::<i64>(&mut conn)
        .await
        .expect_err("a derived key in another slot");
    assert!(
        e.to_string()
            .contains("Script attempted to access a non local key in a cluster node"),
        "derived key: {e}"
    );
    // the script's `SET` ran before the call that failed: a script is not rolled back, so
    // the caller holds a lock it was told it did not get, and no fence was issued
    let holder: Option<String> = redis::cmd("GET")
        .arg(&lock)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(holder.as_deref(), Some("t1"));

    // served by the same node, the script runs although the keys are in two slots: nothing
    // holds them together once the cluster moves one of the slots
    let lock = format!("lock:report:{}", report_id(&cluster, &id, false).await);
    let fence: i64 = derived
        .key(&lock)
        .arg("t1")
        .arg(10_000)
        .invoke_async(&mut conn)
        .await
        .expect("same node, two slots");
    assert!(fence >= 1);

    // derived from a tagged key, it shares the slot: the script works and locks
    let lock = format!("lock:{{report:{id}}}");
    let fence: i64 = derived
        .key(&lock)
        .arg("t1")
        .arg(10_000)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert!(fence >= 1);
    let again: i64 = derived
        .key(&lock)
        .arg("t2")
        .arg(10_000)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(again, 0, "a second holder is refused");

    // a key not in KEYS, in another slot: refused, and the release did not happen
    let mut n = 0;
    let counter = loop {
        let c = format!("lock:releases:{id}-{n}");
        if owner(&cluster, &c).await != owner(&cluster, &lock).await {
            break c;
        }
        n += 1;
    };
    let counting = Script::new(RELEASE_AND_COUNT);
    let e = counting
        .key(&lock)
        .arg("t1")
        .arg(&counter)
        .invoke_async::<i64>(&mut conn)
        .await
        .expect_err("an undeclared key in another slot");
    assert!(
        e.to_string()
            .contains("Script attempted to access a non local key in a cluster node"),
        "undeclared key: {e}"
    );
    let holder: Option<String> = redis::cmd("GET")
        .arg(&lock)
        .query_async(&mut conn)
        .await
        .unwrap();
    // the error came after the script's `DEL`: the caller sees a failure, yet its lock is
    // gone (a script is not rolled back)
    assert_eq!(
        holder, None,
        "the lock was deleted before the script failed"
    );
    let fence: i64 = derived
        .key(&lock)
        .arg("t1")
        .arg(10_000)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert!(fence >= 1, "retaken");

    // the same script with the counter under the lock's tag
    let counter = format!("lock:{{report:{id}}}:releases");
    let released: i64 = counting
        .key(&lock)
        .arg("t1")
        .arg(&counter)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(released, 1);
}

/// `MULTI`, `SET lock token NX PX ..`, `INCR fence`, `EXEC` on one node connection: the reply
/// of `EXEC`.
async fn take_in_transaction(
    node: &mut redis::aio::MultiplexedConnection,
    lock: &str,
    fence: &str,
    token: &str,
) -> redis::RedisResult<redis::Value> {
    let _: () = redis::cmd("MULTI").query_async(node).await?;
    let queued: String = redis::cmd("SET")
        .arg(lock)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(10_000)
        .query_async(node)
        .await?;
    assert_eq!(queued, "QUEUED");
    let queued: String = redis::cmd("INCR").arg(fence).query_async(node).await?;
    assert_eq!(queued, "QUEUED");
    redis::cmd("EXEC").query_async(node).await
}

/// A `MULTI`/`EXEC` transaction over a lock key and a fence of another slot is refused as a
/// whole, even on the node that serves both slots; with one hash tag it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_over_two_slots_are_refused() {
    let cluster = RedisCluster::start();
    let id = unique("multi");
    let lock = format!("lock:report:{}", report_id(&cluster, &id, false).await);
    let fence = format!("{lock}:fence");
    let mut node = connect(&cluster.urls()[owner(&cluster, &lock).await]).await;
    assert_crossslot(
        take_in_transaction(&mut node, &lock, &fence, "t1").await,
        "EXEC over two slots",
    );
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&lock)
        .query_async(&mut node)
        .await
        .unwrap();
    assert_eq!(exists, 0, "nothing of the transaction ran");

    let lock = format!("lock:{{report:{id}}}");
    let fence = format!("fence:{{report:{id}}}");
    let mut node = connect(&cluster.urls()[owner(&cluster, &lock).await]).await;
    let reply = take_in_transaction(&mut node, &lock, &fence, "t1")
        .await
        .expect("EXEC in one slot");
    assert!(
        matches!(reply, redis::Value::Array(ref r) if r.len() == 2),
        "{reply:?}"
    );
    let holder: String = redis::cmd("GET")
        .arg(&lock)
        .query_async(&mut node)
        .await
        .unwrap();
    assert_eq!(holder, "t1");
}
