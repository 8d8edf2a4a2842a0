//! `separate-expire`: the fix moves the expiry into the acquiring `SET` and deletes the
//! separate `EXPIRE`/`PEXPIRE`. Interleaving (rules/separate-expire.md): the process dies
//! right after its acquire, before any further command: the original leaves a lock without a
//! TTL that nobody can ever take again; the fixed lock expires.

use std::time::Duration;

use locklint_compile_fixtures::{constant_lock_value as clv, separate_expire as fx};

use crate::redis_state::{connect, dies_at, fred_client, hold, pttl, value, OTHER};
use crate::redis_support::redis;

/// The commands any of these functions sends after its acquire.
const AFTER_ACQUIRE: &[&str] = &["EXPIRE", "PEXPIRE", "EVALSHA", "EVAL", "LPOP", "DEL"];

/// The rule page's interleaving: the process dies right after its acquire. The original leaves
/// `key` without a TTL (it is then removed); the fixed code leaves it with the expiry it asked
/// for (at most 60 s).
async fn dies_after_acquire<O, OF, F, FF, T, E>(
    url: &str,
    con: &mut redis::aio::MultiplexedConnection,
    key: &str,
    original: O,
    fixed: F,
) where
    O: FnOnce(String) -> OF,
    OF: std::future::Future<Output = Result<T, E>>,
    F: FnOnce(String) -> FF,
    FF: std::future::Future<Output = Result<T, E>>,
{
    let died = dies_at(url, AFTER_ACQUIRE, original).await;
    assert!(died.is_err());
    assert_eq!(
        pttl(con, key).await,
        -1,
        "the original left a lock that never expires"
    );
    crate::redis_state::delete(con, &[key]).await;

    let died = dies_at(url, AFTER_ACQUIRE, fixed).await;
    assert!(died.is_err());
    let ttl = pttl(con, key).await;
    assert!(
        ttl > 0 && ttl <= 60_000,
        "the fixed acquire set the expiry ({ttl} ms)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_nx_then_expire() {
    let redis = redis();
    let mut con = redis.conn().await;
    let id = crate::redis_state::random_id();
    let key = format!("lock:payouts:{id}");

    dies_after_acquire(
        &redis.url(),
        &mut con,
        &key,
        |url| async move {
            fx::bad_set_nx_then_expire::settle_payouts(&mut connect(&url).await, id).await
        },
        |url| async move {
            fx::bad_set_nx_then_expire_fixed::settle_payouts(&mut connect(&url).await, id).await
        },
    )
    .await;

    // held: refused, untouched; free: acquired and released
    hold(&mut con, &key, OTHER).await;
    fx::bad_set_nx_then_expire_fixed::settle_payouts(&mut con, id)
        .await
        .unwrap();
    assert_eq!(
        value(&mut con, &key).await.as_deref(),
        Some(OTHER),
        "the fixed acquire refused a held lock"
    );
    crate::redis_state::delete(&mut con, &[&key]).await;
    fx::bad_set_nx_then_expire_fixed::settle_payouts(&mut con, id)
        .await
        .unwrap();
    assert_eq!(value(&mut con, &key).await, None, "acquired and released");
}

/// The acquire is the condition of a spin loop; the same interleaving: the process dies after
/// it won the loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_loop_break() {
    let redis = redis();
    let mut con = redis.conn().await;
    let shard = crate::redis_state::random_id() as u32;
    let key = format!("lock:index-rebuild:{shard}");

    dies_after_acquire(
        &redis.url(),
        &mut con,
        &key,
        |url| async move {
            fx::bad_spin_loop_break::rebuild_index(&mut connect(&url).await, shard, "me").await
        },
        |url| async move {
            fx::bad_spin_loop_break_fixed::rebuild_index(&mut connect(&url).await, shard, "me")
                .await
        },
    )
    .await;
    crate::redis_state::delete(&mut con, &[&key]).await;

    // free: acquired and released
    fx::bad_spin_loop_break_fixed::rebuild_index(&mut con, shard, "me")
        .await
        .unwrap();
    assert_eq!(value(&mut con, &key).await, None, "acquired and released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fred_set_then_pexpire() {
    let redis = redis();
    let mut con = redis.conn().await;
    let region = redis.unique("fix-separate-expire-fred");
    let key = format!("lock:catalog-warmup:{region}");

    let r = region.clone();
    let died = dies_at(&redis.url(), AFTER_ACQUIRE, |url| async move {
        fx::bad_fred_set_then_pexpire::warm_catalog(&fred_client(&url).await, &r).await
    })
    .await;
    assert!(died.is_err());
    assert_eq!(
        pttl(&mut con, &key).await,
        -1,
        "the original left a lock that never expires"
    );
    crate::redis_state::delete(&mut con, &[&key]).await;

    let r = region.clone();
    let died = dies_at(&redis.url(), AFTER_ACQUIRE, |url| async move {
        fx::bad_fred_set_then_pexpire_fixed::warm_catalog(&fred_client(&url).await, &r).await
    })
    .await;
    assert!(died.is_err());
    let ttl = pttl(&mut con, &key).await;
    assert!(
        ttl > 0 && ttl <= 45_000,
        "the fixed acquire set the expiry ({ttl} ms)"
    );

    let client = fred_client(&redis.url()).await;
    assert!(
        !fx::bad_fred_set_then_pexpire_fixed::warm_catalog(&client, &region)
            .await
            .unwrap(),
        "the fixed acquire refused a held lock"
    );
    crate::redis_state::delete(&mut con, &[&key]).await;
    assert!(
        fx::bad_fred_set_then_pexpire_fixed::warm_catalog(&client, &region)
            .await
            .unwrap(),
        "the fixed acquire took a free lock"
    );
    assert_eq!(value(&mut con, &key).await, None, "acquired and released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lock_struct() {
    let redis = redis();
    let mut con = redis.conn().await;
    let name = redis.unique("fix-separate-expire-struct");
    let key = format!("lock:{name}");
    let ttl = Duration::from_secs(30);
    let manager = |url: String| async move {
        redis::aio::ConnectionManager::new(redis::Client::open(url).unwrap())
            .await
            .unwrap()
    };

    let n = name.clone();
    let died = dies_at(&redis.url(), AFTER_ACQUIRE, |url| async move {
        fx::bad_redis_lock_struct::RedisLock::new(manager(url).await, &n, ttl)
            .acquire()
            .await
    })
    .await;
    assert!(died.is_err());
    assert_eq!(
        pttl(&mut con, &key).await,
        -1,
        "the original left a lock that never expires"
    );
    crate::redis_state::delete(&mut con, &[&key]).await;

    // the fixed acquire is one command: the process dies after it, before anything else
    let mut lock =
        fx::bad_redis_lock_struct_fixed::RedisLock::new(manager(redis.url()).await, &name, ttl);
    assert!(
        lock.acquire().await.unwrap(),
        "the fixed acquire took a free lock"
    );
    let left = pttl(&mut con, &key).await;
    assert!(
        left > 0 && left <= 30_000,
        "the fixed acquire set the expiry ({left} ms)"
    );
    let mut other =
        fx::bad_redis_lock_struct_fixed::RedisLock::new(manager(redis.url()).await, &name, ttl);
    assert!(
        !other.acquire().await.unwrap(),
        "the fixed acquire refused a held lock"
    );
    lock.release().await.unwrap();
    assert_eq!(value(&mut con, &key).await, None);
}

/// The separate-expire fix in a fixture of `constant-lock-value` (whose own fix is
/// display-only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_worker_name() {
    let redis = redis();
    let mut con = redis.conn().await;
    let queue = format!("{}:queue", redis.unique("fix-separate-expire-worker"));
    let key = format!("{queue}:drain-lock");

    let q = queue.clone();
    let died = dies_at(&redis.url(), AFTER_ACQUIRE, |url| async move {
        clv::bad_local_worker_name::drain_queue(&mut connect(&url).await, &q).await
    })
    .await;
    assert!(died.is_err());
    assert_eq!(
        pttl(&mut con, &key).await,
        -1,
        "the original left a lock that never expires"
    );
    crate::redis_state::delete(&mut con, &[&key]).await;

    let q = queue.clone();
    let died = dies_at(&redis.url(), AFTER_ACQUIRE, |url| async move {
        clv::bad_local_worker_name_fixed::drain_queue(&mut connect(&url).await, &q).await
    })
    .await;
    assert!(died.is_err());
    let ttl = pttl(&mut con, &key).await;
    assert!(
        ttl > 0 && ttl <= 20_000,
        "the fixed acquire set the expiry ({ttl} ms)"
    );

    // held: refused and the queue untouched; free: acquired, the queue drained
    let _: i64 = redis::AsyncCommands::rpush(&mut con, &queue, &["a", "b"])
        .await
        .unwrap();
    assert_eq!(
        clv::bad_local_worker_name_fixed::drain_queue(&mut con, &queue)
            .await
            .unwrap(),
        0
    );
    crate::redis_state::delete(&mut con, &[&key]).await;
    assert_eq!(
        clv::bad_local_worker_name_fixed::drain_queue(&mut con, &queue)
            .await
            .unwrap(),
        2
    );
}
