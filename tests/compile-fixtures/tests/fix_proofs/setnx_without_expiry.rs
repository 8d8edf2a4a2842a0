//! `setnx-without-expiry`: the fix gives the acquiring `SET NX` an expiry (`PX 30000`).
//! Interleaving (rules/setnx-without-expiry.md): the holder dies while it holds the lock
//! (before its release, or the function never releases): the original's lock never expires,
//! the fixed lock does. The fixed acquire still takes a free lock and refuses a held one.

use std::collections::HashMap;

use locklint_compile_fixtures::lock_result_ignored as lri;
use locklint_compile_fixtures::setnx_without_expiry as fx;
use locklint_compile_fixtures::suppression_unknown_rule as sur;

use crate::redis_state::{
    assert_expires_within, assert_never_expires, connect, delete, dies_at, fred_client, hold,
    value, OTHER, RELEASE,
};
use crate::redis_support::{redis, RedisServer};
use crate::source::{commands, set_options_calls};

const TOKEN: &str = "this-holder-token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fred_nx_no_expiration() {
    let redis = redis();
    let mut con = redis.conn().await;
    let week = (crate::redis_state::random_id() % u64::from(u32::MAX)) as u32;
    let key = format!("lock:digest:{week}");

    let died = dies_at(&redis.url(), RELEASE, |url| async move {
        fx::bad_fred_nx_no_expiration::send_weekly_digest(&fred_client(&url).await, week).await
    })
    .await;
    assert!(died.is_err());
    assert_never_expires(&mut con, &key, "original").await;
    delete(&mut con, &[&key]).await;

    let died = dies_at(&redis.url(), RELEASE, |url| async move {
        fx::bad_fred_nx_no_expiration_fixed::send_weekly_digest(&fred_client(&url).await, week)
            .await
    })
    .await;
    assert!(died.is_err());
    assert_expires_within(&mut con, &key, 30_000, "fixed").await;

    let client = fred_client(&redis.url()).await;
    hold(&mut con, &key, OTHER).await;
    fx::bad_fred_nx_no_expiration_fixed::send_weekly_digest(&client, week)
        .await
        .unwrap();
    assert_eq!(
        value(&mut con, &key).await.as_deref(),
        Some(OTHER),
        "the fixed acquire refused a held lock"
    );
    delete(&mut con, &[&key]).await;
    fx::bad_fred_nx_no_expiration_fixed::send_weekly_digest(&client, week)
        .await
        .unwrap();
    assert_eq!(value(&mut con, &key).await, None, "acquired and released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_key_script_release() {
    let redis = redis();
    let mut con = redis.conn().await;
    let feed = redis.unique("fix-setnx-owner-key");
    let key = format!("import:{feed}:owner");

    let f = feed.clone();
    let died = dies_at(&redis.url(), RELEASE, |url| async move {
        fx::bad_owner_key_script_release::run_import(&mut connect(&url).await, &f).await
    })
    .await;
    assert!(died.is_err());
    assert_never_expires(&mut con, &key, "original").await;
    delete(&mut con, &[&key]).await;

    let f = feed.clone();
    let died = dies_at(&redis.url(), RELEASE, |url| async move {
        fx::bad_owner_key_script_release_fixed::run_import(&mut connect(&url).await, &f).await
    })
    .await;
    assert!(died.is_err());
    assert_expires_within(&mut con, &key, 30_000, "fixed").await;

    hold(&mut con, &key, OTHER).await;
    assert!(
        !fx::bad_owner_key_script_release_fixed::run_import(&mut con, &feed)
            .await
            .unwrap()
    );
    assert_eq!(value(&mut con, &key).await.as_deref(), Some(OTHER));
    delete(&mut con, &[&key]).await;
    assert!(
        fx::bad_owner_key_script_release_fixed::run_import(&mut con, &feed)
            .await
            .unwrap()
    );
    assert_eq!(value(&mut con, &key).await, None, "acquired and released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_nx_async() {
    let redis = redis();
    let mut con = redis.conn().await;
    let id = crate::redis_state::random_id();
    let key = format!("lock:order:{id}:fulfil");

    let died = dies_at(&redis.url(), RELEASE, |url| async move {
        fx::bad_set_nx_async::fulfil_order(&mut connect(&url).await, id).await
    })
    .await;
    assert!(died.is_err());
    assert_never_expires(&mut con, &key, "original").await;
    delete(&mut con, &[&key]).await;

    let died = dies_at(&redis.url(), RELEASE, |url| async move {
        fx::bad_set_nx_async_fixed::fulfil_order(&mut connect(&url).await, id).await
    })
    .await;
    assert!(died.is_err());
    assert_expires_within(&mut con, &key, 30_000, "fixed").await;

    hold(&mut con, &key, OTHER).await;
    fx::bad_set_nx_async_fixed::fulfil_order(&mut con, id)
        .await
        .unwrap();
    assert_eq!(
        value(&mut con, &key).await.as_deref(),
        Some(OTHER),
        "the fixed acquire refused a held lock"
    );
    delete(&mut con, &[&key]).await;
    fx::bad_set_nx_async_fixed::fulfil_order(&mut con, id)
        .await
        .unwrap();
    assert_eq!(value(&mut con, &key).await, None, "acquired and released");
}

/// `Compactor`'s pool field is private, so its acquire is taken from the files: the
/// `redis::cmd("SET")` builder with its arguments as written.
async fn builder_acquire(original: &str) {
    let fixed = format!("{original}.fixed");
    let redis = redis();
    let mut con = redis.conn().await;
    let key = format!("{}:lock", redis.unique("fix-setnx-builder"));
    let env = HashMap::from([("key", key.clone()), ("token", TOKEN.to_string())]);
    let acquire = |rel: &str| {
        let cmds: Vec<Vec<String>> = commands(rel, &env)
            .into_iter()
            .filter(|c| c[0] == "SET")
            .collect();
        assert_eq!(cmds.len(), 1, "{rel}: one SET builder: {cmds:?}");
        let mut cmd = redis::cmd(&cmds[0][0]);
        for a in &cmds[0][1..] {
            cmd.arg(a);
        }
        cmd
    };
    let (bad, fixed) = (acquire(original), acquire(&fixed));

    // the holder dies after its acquire
    let won: Option<String> = bad.query_async(&mut con).await.unwrap();
    assert!(won.is_some());
    assert_never_expires(&mut con, &key, original).await;
    delete(&mut con, &[&key]).await;

    let won: Option<String> = fixed.query_async(&mut con).await.unwrap();
    assert!(won.is_some(), "the fixed acquire took a free lock");
    assert_expires_within(&mut con, &key, 30_000, "fixed").await;
    let again: Option<String> = fixed.query_async(&mut con).await.unwrap();
    assert!(again.is_none(), "the fixed acquire refused a held lock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_nx_builder_local_statements() {
    builder_acquire("setnx-without-expiry/bad_set_nx_builder_local_statements.rs").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_nx_builder_no_px() {
    builder_acquire("setnx-without-expiry/bad_set_nx_builder_no_px.rs").await;
}

/// `Reconciler`'s fields are private, so its acquire is taken from the files: the
/// `set_options` call with the options built by the same redis-rs calls as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_options_nx_only() {
    let redis = redis();
    let mut con = redis.conn().await;
    let key = format!("{}:lock", redis.unique("fix-setnx-options"));
    let env = HashMap::from([("key", key.clone()), ("token", TOKEN.to_string())]);
    let acquire = |rel: &str| {
        let mut calls = set_options_calls(rel, &env);
        assert_eq!(calls.len(), 1, "{rel}: one set_options call");
        calls.remove(0)
    };
    let (k, v, opts) = acquire("setnx-without-expiry/bad_set_options_nx_only.rs");
    let won: bool = redis::AsyncCommands::set_options(&mut con, &k, &v, opts)
        .await
        .unwrap();
    assert!(won);
    assert_never_expires(&mut con, &key, "original").await;
    delete(&mut con, &[&key]).await;

    let (k, v, opts) = acquire("setnx-without-expiry/bad_set_options_nx_only.rs.fixed");
    let won: bool = redis::AsyncCommands::set_options(&mut con, &k, &v, opts)
        .await
        .unwrap();
    assert!(won, "the fixed acquire took a free lock");
    assert_expires_within(&mut con, &key, 30_000, "fixed").await;
    let (k, v, opts) = acquire("setnx-without-expiry/bad_set_options_nx_only.rs.fixed");
    let again: bool = redis::AsyncCommands::set_options(&mut con, &k, &v, opts)
        .await
        .unwrap();
    assert!(!again, "the fixed acquire refused a held lock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_helper() {
    let redis = redis();
    let mut con = redis.conn().await;
    let key = format!("{}:cron", redis.unique("fix-setnx-try-lock"));

    assert!(fx::bad_try_lock_helper::try_lock(&mut con, &key, TOKEN)
        .await
        .unwrap());
    // the holder dies before `unlock`
    assert_never_expires(&mut con, &key, "original").await;
    delete(&mut con, &[&key]).await;

    assert!(
        fx::bad_try_lock_helper_fixed::try_lock(&mut con, &key, TOKEN)
            .await
            .unwrap()
    );
    assert_expires_within(&mut con, &key, 30_000, "fixed").await;
    assert!(
        !fx::bad_try_lock_helper_fixed::try_lock(&mut con, &key, "another")
            .await
            .unwrap(),
        "refused while held"
    );
    assert!(fx::bad_try_lock_helper_fixed::unlock(&mut con, &key, TOKEN)
        .await
        .unwrap());
    assert_eq!(value(&mut con, &key).await, None);
}

/// The setnx-without-expiry fix in a fixture of `lock-result-ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn const_option_words() {
    let redis = redis();
    let mut con = redis.conn().await;
    let job = crate::redis_state::random_id();
    let key = format!("lock:job:{job}");

    // `take` never releases: the holder's lock outlives it
    lri::bad_const_option_words::take(&mut con, job, TOKEN)
        .await
        .unwrap();
    assert_never_expires(&mut con, &key, "original").await;
    delete(&mut con, &[&key]).await;

    lri::bad_const_option_words_fixed::take(&mut con, job, TOKEN)
        .await
        .unwrap();
    assert_expires_within(&mut con, &key, 30_000, "fixed").await;
    assert_eq!(
        value(&mut con, &key).await.as_deref(),
        Some(TOKEN),
        "the fixed acquire took a free lock"
    );
    lri::bad_const_option_words_fixed::take(&mut con, job, "another")
        .await
        .unwrap();
    assert_eq!(
        value(&mut con, &key).await.as_deref(),
        Some(TOKEN),
        "the fixed acquire refused a held lock"
    );
    delete(&mut con, &[&key]).await;
}

/// The setnx-without-expiry fix in a fixture of `suppression-unknown-rule`; `lock:nightly` is a
/// fixed key, so this runs on a server of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typo() {
    let server = RedisServer::start();
    let mut con = server.conn().await;
    let key = "lock:nightly";

    assert!(sur::bad_typo::take(&mut con, TOKEN).await.unwrap());
    assert_never_expires(&mut con, key, "original").await;
    delete(&mut con, &[key]).await;

    assert!(sur::bad_typo_fixed::take(&mut con, TOKEN).await.unwrap());
    assert_expires_within(&mut con, key, 30_000, "fixed").await;
    assert!(
        !sur::bad_typo_fixed::take(&mut con, "another")
            .await
            .unwrap(),
        "refused while held"
    );
}

/// The acquires are the functions' returned values (a tail expression, a `return` in a match
/// arm): the holder that dies after acquiring leaves a lock that never expires before the fix,
/// one that expires after it; the fixed acquire still refuses a held lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_nx_tail_expression() {
    use fx::bad_set_nx_tail_expression as bad;
    use fx::bad_set_nx_tail_expression_fixed as fixed;
    let redis = redis();
    let mut con = redis.conn().await;
    // never 0: report 0 is never built
    let id = crate::redis_state::random_id() | 1;
    for export in [true, false] {
        let key = if export {
            format!("lock:export:{id}")
        } else {
            format!("lock:report:{id}:build")
        };
        let original = if export {
            bad::try_lock_export(&mut con, id, TOKEN).await
        } else {
            bad::try_lock_report(&mut con, id, TOKEN).await
        };
        assert!(original.unwrap(), "{key}: the original took a free lock");
        // the holder dies here: the lock is never released
        assert_never_expires(&mut con, &key, "original").await;
        delete(&mut con, &[&key]).await;

        let take = |con: &mut redis::aio::MultiplexedConnection, token: &'static str| {
            let mut con = con.clone();
            async move {
                if export {
                    fixed::try_lock_export(&mut con, id, token).await
                } else {
                    fixed::try_lock_report(&mut con, id, token).await
                }
                .unwrap()
            }
        };
        assert!(
            take(&mut con, TOKEN).await,
            "{key}: the fixed acquire took a free lock"
        );
        assert!(
            !take(&mut con, OTHER).await,
            "{key}: the fixed acquire refused a held lock"
        );
        assert_expires_within(&mut con, &key, 30_000, "fixed").await;
        assert_eq!(value(&mut con, &key).await.as_deref(), Some(TOKEN));
        delete(&mut con, &[&key]).await;
    }
}
