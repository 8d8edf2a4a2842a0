//! `unconditional-renew`: the fix replaces a plain `EXPIRE`/`PEXPIRE` (or `GET`, compare,
//! `PEXPIRE`) with a compare-and-expire script. Interleaving (rules/unconditional-renew.md):
//! the holder's lock expires and another holder takes it with a short lease just before the
//! renewal reaches Redis; the original then extends the other holder's lock.

use std::collections::HashMap;
use std::time::Duration;

use locklint_compile_fixtures::unconditional_renew as fx;

use crate::redis_state::{
    after_take_over, expire_and_take_over, hold, pttl, shorten, value, OTHER, OTHER_TTL_MS, RENEW,
    SHORT_MS,
};
use crate::redis_support::{unique, RedisServer};
use crate::source::{method_args, script_calls};

const TOKEN: &str = "this-holder-token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_compare_pexpire_sync() {
    // a server of its own: no script is loaded there unless the code under test loads it
    let redis = RedisServer::start();
    let shard = (crate::redis_state::random_id() % u64::from(u32::MAX)) as u32;
    let key = format!("lease:shard:{shard}");
    let mut con = redis.conn().await;
    let renew = |url: String, fixed: bool| async move {
        tokio::task::spawn_blocking(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            if fixed {
                fx::bad_get_compare_pexpire_sync_fixed::renew(&mut c, shard, TOKEN, 30_000).unwrap()
            } else {
                fx::bad_get_compare_pexpire_sync::renew(&mut c, shard, TOKEN, 30_000).unwrap()
            }
        })
        .await
        .unwrap()
    };

    // original: GET sees this holder's token, then PEXPIRE extends the other holder's lock
    hold(&mut con, &key, TOKEN).await;
    let (renewed, left) = after_take_over(&redis.url(), &key, RENEW, |url| renew(url, false)).await;
    assert!(renewed, "the original believes it renewed");
    assert_eq!(left.as_deref(), Some(OTHER));
    assert!(
        pttl(&mut con, &key).await > OTHER_TTL_MS,
        "the original extended the other holder's lock"
    );

    // fixed: refuses, the other holder's lease is untouched
    hold(&mut con, &key, TOKEN).await;
    let (renewed, left) = after_take_over(&redis.url(), &key, RENEW, |url| renew(url, true)).await;
    assert!(!renewed, "the fixed renewal reports the lock lost");
    assert_eq!(left.as_deref(), Some(OTHER));
    let ttl = pttl(&mut con, &key).await;
    assert!(
        ttl > 0 && ttl <= OTHER_TTL_MS,
        "the fixed renewal left the other holder's lock alone ({ttl} ms)"
    );

    // fixed: renews the holder's own lock
    hold(&mut con, &key, TOKEN).await;
    shorten(&mut con, &key).await;
    assert!(
        renew(redis.url(), true).await,
        "the fixed renewal renews its own lock"
    );
    assert!(
        pttl(&mut con, &key).await > SHORT_MS,
        "the fixed renewal extended the TTL"
    );
    crate::redis_state::delete(&mut con, &[&key]).await;
}

/// The heartbeat only renews after ten seconds and is aborted as soon as the (empty) work is
/// done, so its renewal is taken from the files: the original's `pexpire(..)` call and the
/// fixed file's script call, with their arguments as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_pexpire() {
    // a server of its own: no script is loaded there unless the code under test loads it
    let redis = RedisServer::start();
    let key = format!("{}:lock", unique("fix-renew-heartbeat"));
    let env = HashMap::from([("hb_key", key.clone()), ("token", TOKEN.to_string())]);
    let bad = method_args(
        "unconditional-renew/bad_heartbeat_pexpire.rs",
        "pexpire",
        &env,
    );
    assert_eq!(bad.len(), 1, "one PEXPIRE in the original: {bad:?}");
    let fixed = script_calls("unconditional-renew/bad_heartbeat_pexpire.rs.fixed", &env);
    assert_eq!(
        fixed.len(),
        1,
        "one script in the fixed heartbeat: {fixed:?}"
    );
    let fixed = &fixed[0];
    assert!(
        method_args(
            "unconditional-renew/bad_heartbeat_pexpire.rs.fixed",
            "pexpire",
            &env
        )
        .is_empty(),
        "the fixed heartbeat has no plain PEXPIRE left"
    );
    let mut con = redis.conn().await;
    let run_bad = |mut con: redis::aio::MultiplexedConnection| {
        let mut cmd = redis::cmd("PEXPIRE");
        cmd.arg(&bad[0]);
        async move { cmd.query_async::<i64>(&mut con).await.unwrap() }
    };
    // the script, its keys and arguments, run by the call the fixed file makes
    let script = redis::Script::new(&fixed.script);
    let run_fixed = |mut con: redis::aio::MultiplexedConnection| {
        let mut invocation = script.prepare_invoke();
        for k in &fixed.keys {
            invocation.key(k);
        }
        for a in &fixed.args {
            invocation.arg(a);
        }
        async move {
            match fixed.runner.as_str() {
                "invoke_script" => {
                    redis::AsyncCommands::invoke_script::<i64>(&mut con, &invocation).await
                }
                "invoke_async" => invocation.invoke_async::<i64>(&mut con).await,
                other => panic!("the fixed heartbeat runs its script with `{other}`"),
            }
        }
    };

    hold(&mut con, &key, TOKEN).await;
    expire_and_take_over(&mut con, &key, OTHER).await;
    assert_eq!(run_bad(con.clone()).await, 1, "the original renewed");
    assert!(
        pttl(&mut con, &key).await > OTHER_TTL_MS,
        "the original extended the other holder's lock"
    );

    crate::redis_state::delete(&mut con, &[&key]).await;
    hold(&mut con, &key, TOKEN).await;
    expire_and_take_over(&mut con, &key, OTHER).await;
    assert_eq!(
        run_fixed(con.clone()).await.unwrap(),
        0,
        "the fixed heartbeat refuses"
    );
    let ttl = pttl(&mut con, &key).await;
    assert!(
        ttl > 0 && ttl <= OTHER_TTL_MS,
        "the fixed heartbeat left the other holder's lock alone"
    );
    assert_eq!(value(&mut con, &key).await.as_deref(), Some(OTHER));

    crate::redis_state::delete(&mut con, &[&key]).await;
    hold(&mut con, &key, TOKEN).await;
    shorten(&mut con, &key).await;
    assert_eq!(
        run_fixed(con.clone()).await.unwrap(),
        1,
        "the fixed heartbeat renews its own lock"
    );
    assert!(
        pttl(&mut con, &key).await > SHORT_MS,
        "the fixed heartbeat extended the TTL"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lock_extend() {
    // a server of its own: no script is loaded there unless the code under test loads it
    let redis = RedisServer::start();
    let name = unique("fix-renew-redis-lock");
    let key = format!("lock:{name}");
    let mut con = redis.conn().await;
    let ttl = Duration::from_secs(30);

    let mut lock = fx::bad_redis_lock_extend::RedisLock::new(redis.conn().await, &name, ttl);
    assert!(lock.acquire().await.unwrap());
    expire_and_take_over(&mut con, &key, OTHER).await;
    assert!(
        lock.extend().await.unwrap(),
        "the original believes it renewed"
    );
    assert!(
        pttl(&mut con, &key).await > OTHER_TTL_MS,
        "the original extended the other holder's lock"
    );
    crate::redis_state::delete(&mut con, &[&key]).await;

    let mut lock = fx::bad_redis_lock_extend_fixed::RedisLock::new(redis.conn().await, &name, ttl);
    assert!(lock.acquire().await.unwrap());
    expire_and_take_over(&mut con, &key, OTHER).await;
    assert!(
        !lock.extend().await.unwrap(),
        "the fixed renewal reports the lock lost"
    );
    let left = pttl(&mut con, &key).await;
    assert!(
        left > 0 && left <= OTHER_TTL_MS,
        "the fixed renewal left the other holder's lock alone"
    );
    assert!(
        !lock.acquire().await.unwrap(),
        "the fixed acquire refuses a held lock"
    );
    crate::redis_state::delete(&mut con, &[&key]).await;

    let mut lock = fx::bad_redis_lock_extend_fixed::RedisLock::new(redis.conn().await, &name, ttl);
    assert!(lock.acquire().await.unwrap());
    shorten(&mut con, &key).await;
    assert!(
        lock.extend().await.unwrap(),
        "the fixed renewal renews its own lock"
    );
    assert!(
        pttl(&mut con, &key).await > SHORT_MS,
        "the fixed renewal extended the TTL"
    );
}
