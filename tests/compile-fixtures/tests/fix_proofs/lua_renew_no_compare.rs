//! `lua-renew-no-compare`: the fix guards the script's `EXPIRE`/`PEXPIRE`/`SET` with a
//! comparison of the lock's value and the holder's token. Interleaving
//! (rules/lua-renew-no-compare.md): the holder's lock expired and another holder took it with
//! a short lease before the renewal script runs; the original extends (or overwrites) the
//! other holder's lock.

use locklint_compile_fixtures::lua_renew_no_compare as fx;

use crate::redis_state::{
    eval, expire_and_take_over, fred_client, hold, pttl, shorten, value, OTHER, OTHER_TTL_MS,
    SHORT_MS,
};
use crate::redis_support::redis;
use crate::source::text;

const TOKEN: &str = "this-holder-token";

/// The other holder's lock is untouched: its value and its short lease.
async fn untouched(con: &mut redis::aio::MultiplexedConnection, key: &str) {
    assert_eq!(
        value(con, key).await.as_deref(),
        Some(OTHER),
        "the other holder's lock keeps its value"
    );
    let ttl = pttl(con, key).await;
    assert!(
        ttl > 0 && ttl <= OTHER_TTL_MS,
        "the other holder's lease was not extended ({ttl} ms)"
    );
}

/// A `.lua` file run with `KEYS[1]` the lock, `ARGV[1]` the holder's token and `ARGV[2]` the
/// TTL (seconds for `EXPIRE`, milliseconds for `PEXPIRE`).
async fn lua_file(rel: &str, name: &str, ttl: &str) {
    let redis = redis();
    let mut con = redis.conn().await;
    let key = format!("{}:lock", redis.unique(name));
    let bad = text(rel);
    let fixed = text(&format!("{rel}.fixed"));

    hold(&mut con, &key, TOKEN).await;
    expire_and_take_over(&mut con, &key, OTHER).await;
    eval(&mut con, &bad, &[&key], &[TOKEN, ttl]).await;
    assert!(
        pttl(&mut con, &key).await > OTHER_TTL_MS,
        "{rel}: the original extended the other holder's lock"
    );

    hold(&mut con, &key, TOKEN).await;
    expire_and_take_over(&mut con, &key, OTHER).await;
    let reply = eval(&mut con, &fixed, &[&key], &[TOKEN, ttl]).await;
    assert_eq!(
        reply,
        redis::Value::Int(0),
        "{rel}: the fixed renewal reports the lock lost"
    );
    untouched(&mut con, &key).await;

    hold(&mut con, &key, TOKEN).await;
    shorten(&mut con, &key).await;
    let reply = eval(&mut con, &fixed, &[&key], &[TOKEN, ttl]).await;
    assert_eq!(
        reply,
        redis::Value::Int(1),
        "{rel}: the fixed renewal renews its own lock"
    );
    assert!(
        pttl(&mut con, &key).await > SHORT_MS,
        "{rel}: the fixed renewal extended the TTL"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_after_expire() {
    lua_file(
        "lua-renew-no-compare/bad_check_after_expire.lua",
        "fix-lua-renew-check-after",
        "30",
    )
    .await;
}

/// The script's `ARGV[1]` is the TTL and `ARGV[2]` the token: the guard compares with the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pexpire_token_is_argv2() {
    let redis = redis();
    let mut con = redis.conn().await;
    let key = format!("{}:lock", redis.unique("fix-lua-renew-argv2"));

    hold(&mut con, &key, TOKEN).await;
    expire_and_take_over(&mut con, &key, OTHER).await;
    fx::bad_pexpire_token_is_argv2::renew_lock(&mut con, &key, 30_000, TOKEN)
        .await
        .unwrap();
    assert!(
        pttl(&mut con, &key).await > OTHER_TTL_MS,
        "the original extended the other holder's lock"
    );

    hold(&mut con, &key, TOKEN).await;
    expire_and_take_over(&mut con, &key, OTHER).await;
    let reply = fx::bad_pexpire_token_is_argv2_fixed::renew_lock(&mut con, &key, 30_000, TOKEN)
        .await
        .unwrap();
    assert_eq!(reply, 0, "the fixed renewal reports the lock lost");
    untouched(&mut con, &key).await;

    hold(&mut con, &key, TOKEN).await;
    shorten(&mut con, &key).await;
    let reply = fx::bad_pexpire_token_is_argv2_fixed::renew_lock(&mut con, &key, 30_000, TOKEN)
        .await
        .unwrap();
    assert_eq!(reply, 1, "the fixed renewal renews its own lock");
    assert!(
        pttl(&mut con, &key).await > SHORT_MS,
        "the fixed renewal extended the TTL"
    );
}

/// The script re-writes the lock's value with `KEEPTTL`: run on another holder's lock, it
/// makes the lock this holder's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_keepttl() {
    let redis = redis();
    let mut con = redis.conn().await;
    let key = format!("{}:lock", redis.unique("fix-lua-renew-keepttl"));

    hold(&mut con, &key, TOKEN).await;
    expire_and_take_over(&mut con, &key, OTHER).await;
    fx::bad_extend_keepttl::touch(&mut con, &key, TOKEN)
        .await
        .unwrap();
    assert_eq!(
        value(&mut con, &key).await.as_deref(),
        Some(TOKEN),
        "the original took over the other holder's lock"
    );

    hold(&mut con, &key, TOKEN).await;
    expire_and_take_over(&mut con, &key, OTHER).await;
    fx::bad_extend_keepttl_fixed::touch(&mut con, &key, TOKEN)
        .await
        .unwrap();
    untouched(&mut con, &key).await;

    hold(&mut con, &key, TOKEN).await;
    let ttl = fx::bad_extend_keepttl_fixed::touch(&mut con, &key, TOKEN)
        .await
        .unwrap();
    assert!(ttl > 0, "the fixed script reports the holder's own lease");
    assert_eq!(value(&mut con, &key).await.as_deref(), Some(TOKEN));
    assert!(
        pttl(&mut con, &key).await > 0,
        "the fixed script keeps the TTL"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fred_set_xx_px() {
    let redis = redis();
    let mut con = redis.conn().await;
    let client = fred_client(&redis.url()).await;
    let key = format!("{}:lock", redis.unique("fix-lua-renew-fred"));

    hold(&mut con, &key, TOKEN).await;
    expire_and_take_over(&mut con, &key, OTHER).await;
    let reply = fx::bad_fred_set_xx_px::extend_lease(&client, &key, TOKEN, 30_000)
        .await
        .unwrap();
    assert_eq!(reply.as_deref(), Some("OK"));
    assert_eq!(
        value(&mut con, &key).await.as_deref(),
        Some(TOKEN),
        "the original took over the other holder's lock"
    );
    assert!(pttl(&mut con, &key).await > OTHER_TTL_MS);

    hold(&mut con, &key, TOKEN).await;
    expire_and_take_over(&mut con, &key, OTHER).await;
    let reply = fx::bad_fred_set_xx_px_fixed::extend_lease(&client, &key, TOKEN, 30_000)
        .await
        .unwrap();
    assert_eq!(reply, None, "the fixed renewal reports the lock lost");
    untouched(&mut con, &key).await;

    hold(&mut con, &key, TOKEN).await;
    shorten(&mut con, &key).await;
    let reply = fx::bad_fred_set_xx_px_fixed::extend_lease(&client, &key, TOKEN, 30_000)
        .await
        .unwrap();
    assert_eq!(
        reply.as_deref(),
        Some("OK"),
        "the fixed renewal renews its own lock"
    );
    assert!(
        pttl(&mut con, &key).await > SHORT_MS,
        "the fixed renewal extended the TTL"
    );
}
