//! `lua-release-no-compare`: the fix guards the script's `DEL`/`UNLINK` with a comparison of
//! the lock's value and the holder's token. Interleaving (rules/lua-release-no-compare.md):
//! the holder's lock expired and another holder took it before the release script runs.

use locklint_compile_fixtures::lua_release_no_compare as fx;

use crate::redis_state::{eval, expire_and_take_over, hold, value, OTHER};
use crate::redis_support::redis;
use crate::source::text;

const TOKEN: &str = "this-holder-token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn const_escapes() {
    let redis = redis();
    let mut con = redis.conn().await;
    let key = format!("{}:lock", redis.unique("fix-lua-release-escapes"));

    hold(&mut con, &key, TOKEN).await;
    expire_and_take_over(&mut con, &key, OTHER).await;
    let ours = fx::bad_const_escapes::finish(&mut con, &key, TOKEN)
        .await
        .unwrap();
    assert!(!ours);
    assert_eq!(
        value(&mut con, &key).await,
        None,
        "the original deleted the other holder's lock"
    );

    hold(&mut con, &key, TOKEN).await;
    expire_and_take_over(&mut con, &key, OTHER).await;
    let ours = fx::bad_const_escapes_fixed::finish(&mut con, &key, TOKEN)
        .await
        .unwrap();
    assert!(
        !ours,
        "the fixed release reports that the lock was not its own"
    );
    assert_eq!(
        value(&mut con, &key).await.as_deref(),
        Some(OTHER),
        "the fixed release kept the other holder's lock"
    );

    hold(&mut con, &key, TOKEN).await;
    assert!(fx::bad_const_escapes_fixed::finish(&mut con, &key, TOKEN)
        .await
        .unwrap());
    assert_eq!(
        value(&mut con, &key).await,
        None,
        "the fixed release released its own lock"
    );
}

/// A `.lua` file: the script is the file's text, run with `KEYS[1]` the lock and `ARGV[1]`
/// the holder's token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_not_guarding() {
    let redis = redis();
    let mut con = redis.conn().await;
    let key = format!("{}:lock", redis.unique("fix-lua-release-unlink"));
    let bad = text("lua-release-no-compare/bad_get_not_guarding.lua");
    let fixed = text("lua-release-no-compare/bad_get_not_guarding.lua.fixed");

    hold(&mut con, &key, TOKEN).await;
    expire_and_take_over(&mut con, &key, OTHER).await;
    eval(&mut con, &bad, &[&key], &[TOKEN]).await;
    assert_eq!(
        value(&mut con, &key).await,
        None,
        "the original deleted the other holder's lock"
    );

    hold(&mut con, &key, TOKEN).await;
    expire_and_take_over(&mut con, &key, OTHER).await;
    let reply = eval(&mut con, &fixed, &[&key], &[TOKEN]).await;
    assert_eq!(reply, redis::Value::Nil, "false: not the holder's lock");
    assert_eq!(
        value(&mut con, &key).await.as_deref(),
        Some(OTHER),
        "the fixed release kept the other holder's lock"
    );

    hold(&mut con, &key, TOKEN).await;
    let reply = eval(&mut con, &fixed, &[&key], &[TOKEN]).await;
    assert_eq!(reply, redis::Value::Int(1), "true: the holder's own lock");
    assert_eq!(
        value(&mut con, &key).await,
        None,
        "the fixed release released its own lock"
    );
}
