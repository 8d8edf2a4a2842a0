//! `unconditional-release`: the fix replaces a plain `DEL` (or `GET`, compare, `DEL`) with a
//! compare-and-delete script. Interleaving (rules/unconditional-release.md): the holder's lock
//! expires and another holder takes it just before the release reaches Redis.

use locklint_compile_fixtures::unconditional_release as fx;
use std::time::Duration;

use crate::redis_state::{after_take_over, connect, hold, peek_before, value, OTHER, RELEASE};
use crate::redis_support::{unique, RedisServer};

const TOKEN: &str = "this-holder-token";

/// A blocking connection (for fixtures written against `redis::Connection`).
async fn blocking<T: Send + 'static>(
    url: String,
    f: impl FnOnce(&mut redis::Connection) -> T + Send + 'static,
) -> T {
    tokio::task::spawn_blocking(move || {
        let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
        f(&mut con)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_compare_del() {
    // a server of its own: no script is loaded there unless the code under test loads it
    let redis = RedisServer::start();
    let report = unique("fix-release-get-compare-del");
    let key = format!("lock:report:{report}");
    let mut con = redis.conn().await;

    // original: the GET sees this holder's token, then the DEL deletes the other's lock
    hold(&mut con, &key, TOKEN).await;
    let r = report.clone();
    let (released, left) =
        after_take_over(&redis.url(), &key, &["DEL", "EVALSHA", "EVAL"], |url| {
            blocking(url, move |c| {
                fx::bad_get_compare_del::release_report_lock(c, &r, TOKEN).unwrap()
            })
        })
        .await;
    assert!(released, "the original reports its release as done");
    assert_eq!(left, None, "the original deleted the other holder's lock");

    // fixed: the script sees the other holder's token and deletes nothing
    hold(&mut con, &key, TOKEN).await;
    let r = report.clone();
    let (released, left) =
        after_take_over(&redis.url(), &key, &["DEL", "EVALSHA", "EVAL"], |url| {
            blocking(url, move |c| {
                fx::bad_get_compare_del_fixed::release_report_lock(c, &r, TOKEN).unwrap()
            })
        })
        .await;
    assert!(
        !released,
        "the fixed release reports that the lock was not its own"
    );
    assert_eq!(
        left.as_deref(),
        Some(OTHER),
        "the fixed release kept the other holder's lock"
    );

    // fixed, no interleaving: the holder's own lock is released
    hold(&mut con, &key, TOKEN).await;
    let r = report.clone();
    let released = blocking(redis.url(), move |c| {
        fx::bad_get_compare_del_fixed::release_report_lock(c, &r, TOKEN).unwrap()
    })
    .await;
    assert!(released);
    assert_eq!(
        value(&mut con, &key).await,
        None,
        "the fixed release released its own lock"
    );
}

/// Two seats locked together: the client compares every holder, then deletes key by key; the
/// first seat passes to another holder just before its release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_all_keys_then_delete() {
    // a server of its own: no script is loaded there unless the code under test loads it
    let redis = RedisServer::start();
    let show = unique("fix-release-compare-all-keys");
    let keys = vec![format!("lock:seat:{show}:1"), format!("lock:seat:{show}:2")];
    let mut con = redis.conn().await;

    for k in &keys {
        hold(&mut con, k, TOKEN).await;
    }
    let ks = keys.clone();
    let (released, left) = after_take_over(&redis.url(), &keys[0], RELEASE, |url| async move {
        let mut c = connect(&url).await;
        fx::bad_compare_all_keys_then_delete::release_seats(&mut c, &ks, TOKEN)
            .await
            .unwrap()
    })
    .await;
    assert!(released, "the original reports its release as done");
    assert_eq!(left, None, "the original deleted the other holder's lock");

    for k in &keys {
        hold(&mut con, k, TOKEN).await;
    }
    let ks = keys.clone();
    let (released, left) = after_take_over(&redis.url(), &keys[0], RELEASE, |url| async move {
        let mut c = connect(&url).await;
        fx::bad_compare_all_keys_then_delete_fixed::release_seats(&mut c, &ks, TOKEN)
            .await
            .unwrap()
    })
    .await;
    assert!(released);
    assert_eq!(
        left.as_deref(),
        Some(OTHER),
        "the fixed release kept the other holder's lock"
    );
    assert_eq!(
        value(&mut con, &keys[1]).await,
        None,
        "the fixed release released its own seat"
    );
    crate::redis_state::delete(&mut con, &[&keys[0]]).await;

    // fixed, no interleaving: every seat is released
    for k in &keys {
        hold(&mut con, k, TOKEN).await;
    }
    assert!(
        fx::bad_compare_all_keys_then_delete_fixed::release_seats(&mut con, &keys, TOKEN)
            .await
            .unwrap()
    );
    for k in &keys {
        assert_eq!(value(&mut con, k).await, None, "released");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_del_async() {
    // a server of its own: no script is loaded there unless the code under test loads it
    let redis = RedisServer::start();
    let id = crate::redis_state::random_id();
    let key = format!("lock:invoice-pdf:{id}");
    let mut con = redis.conn().await;

    // the function acquires, renders, releases; the take-over happens before its release
    let (acquired, left) = after_take_over(&redis.url(), &key, RELEASE, |url| async move {
        let mut c = connect(&url).await;
        fx::bad_plain_del_async::generate_invoice_pdf(&mut c, id)
            .await
            .unwrap()
    })
    .await;
    assert!(acquired);
    assert_eq!(left, None, "the original deleted the other holder's lock");
    crate::redis_state::delete(&mut con, &[&key]).await;

    let (acquired, left) = after_take_over(&redis.url(), &key, RELEASE, |url| async move {
        let mut c = connect(&url).await;
        fx::bad_plain_del_async_fixed::generate_invoice_pdf(&mut c, id)
            .await
            .unwrap()
    })
    .await;
    assert!(acquired);
    assert_eq!(
        left.as_deref(),
        Some(OTHER),
        "the fixed release kept the other holder's lock"
    );

    // fixed: refuses a held lock, acquires and releases a free one
    let mut c = redis.conn().await;
    assert!(
        !fx::bad_plain_del_async_fixed::generate_invoice_pdf(&mut c, id)
            .await
            .unwrap()
    );
    assert_eq!(value(&mut con, &key).await.as_deref(), Some(OTHER));
    crate::redis_state::delete(&mut con, &[&key]).await;
    assert!(
        fx::bad_plain_del_async_fixed::generate_invoice_pdf(&mut c, id)
            .await
            .unwrap()
    );
    assert_eq!(
        value(&mut con, &key).await,
        None,
        "the fixed release released its own lock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lock_release() {
    // a server of its own: no script is loaded there unless the code under test loads it
    let redis = RedisServer::start();
    let name = unique("fix-release-redis-lock");
    let key = format!("lock:{name}");
    let mut con = redis.conn().await;
    let manager = |url: String| async move {
        redis::aio::ConnectionManager::new(redis::Client::open(url).unwrap())
            .await
            .unwrap()
    };

    let n = name.clone();
    let (_, left) = after_take_over(&redis.url(), &key, RELEASE, |url| async move {
        let mut lock = fx::bad_redis_lock_release::RedisLock::new(
            manager(url).await,
            &n,
            Duration::from_secs(30),
        );
        assert!(lock.acquire().await.unwrap());
        lock.release().await.unwrap();
    })
    .await;
    assert_eq!(left, None, "the original deleted the other holder's lock");

    let n = name.clone();
    let (_, left) = after_take_over(&redis.url(), &key, RELEASE, |url| async move {
        let mut lock = fx::bad_redis_lock_release_fixed::RedisLock::new(
            manager(url.clone()).await,
            &n,
            Duration::from_secs(30),
        );
        // held by the other holder: refused
        let mut other = fx::bad_redis_lock_release_fixed::RedisLock::new(
            manager(url).await,
            &n,
            Duration::from_secs(30),
        );
        assert!(lock.acquire().await.unwrap());
        assert!(
            !other.acquire().await.unwrap(),
            "the fixed acquire refuses a held lock"
        );
        lock.release().await.unwrap();
    })
    .await;
    assert_eq!(
        left.as_deref(),
        Some(OTHER),
        "the fixed release kept the other holder's lock"
    );
    crate::redis_state::delete(&mut con, &[&key]).await;

    let mut lock = fx::bad_redis_lock_release_fixed::RedisLock::new(
        manager(redis.url()).await,
        &name,
        Duration::from_secs(30),
    );
    assert!(lock.acquire().await.unwrap());
    assert!(value(&mut con, &key).await.is_some());
    lock.release().await.unwrap();
    assert_eq!(
        value(&mut con, &key).await,
        None,
        "the fixed release released its own lock"
    );
}

/// `lock:settlement`, `lock:search-index` and `lock:session-vacuum` are fixed keys: these
/// proofs run on a server of their own.
async fn own_server() -> (RedisServer, redis::aio::MultiplexedConnection) {
    let server = RedisServer::start();
    let con = server.conn().await;
    (server, con)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_in_inline_module() {
    let (server, mut con) = own_server().await;
    let key = "lock:settlement";
    let (_, left) = after_take_over(&server.url(), key, RELEASE, |url| async move {
        fx::bad_release_in_inline_module::jobs::settle(&mut connect(&url).await, TOKEN)
            .await
            .unwrap();
    })
    .await;
    assert_eq!(left, None, "the original deleted the other holder's lock");
    crate::redis_state::delete(&mut con, &[key]).await;

    let (_, left) = after_take_over(&server.url(), key, RELEASE, |url| async move {
        fx::bad_release_in_inline_module_fixed::jobs::settle(&mut connect(&url).await, TOKEN)
            .await
            .unwrap();
    })
    .await;
    assert_eq!(
        left.as_deref(),
        Some(OTHER),
        "the fixed release kept the other holder's lock"
    );

    // held by the other holder: the fixed function does nothing; free: takes and releases
    fx::bad_release_in_inline_module_fixed::jobs::settle(&mut con, TOKEN)
        .await
        .unwrap();
    assert_eq!(value(&mut con, key).await.as_deref(), Some(OTHER));
    crate::redis_state::delete(&mut con, &[key]).await;
    let mut watcher = con.clone();
    let (_, left) = peek_before(&server.url(), key, RELEASE, |url| async move {
        fx::bad_release_in_inline_module_fixed::jobs::settle(&mut connect(&url).await, TOKEN)
            .await
            .unwrap();
    })
    .await;
    assert_eq!(
        left.as_deref(),
        Some(TOKEN),
        "the fixed function acquired the free lock"
    );
    assert_eq!(
        value(&mut watcher, key).await,
        None,
        "the fixed release released its own lock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_releases_one_file() {
    let (server, mut con) = own_server().await;
    for key in ["lock:search-index", "lock:session-vacuum"] {
        let run = |which: &'static str, url: String| async move {
            let mut c = connect(&url).await;
            match (which, key) {
                ("bad", "lock:search-index") => {
                    fx::bad_two_releases_one_file::rebuild_index(&mut c, TOKEN).await
                }
                ("bad", _) => fx::bad_two_releases_one_file::vacuum_sessions(&mut c, TOKEN).await,
                (_, "lock:search-index") => {
                    fx::bad_two_releases_one_file_fixed::rebuild_index(&mut c, TOKEN).await
                }
                (_, _) => fx::bad_two_releases_one_file_fixed::vacuum_sessions(&mut c, TOKEN).await,
            }
            .unwrap()
        };
        let (_, left) = after_take_over(&server.url(), key, RELEASE, |url| run("bad", url)).await;
        assert_eq!(
            left, None,
            "{key}: the original deleted the other holder's lock"
        );
        crate::redis_state::delete(&mut con, &[key]).await;

        let (_, left) = after_take_over(&server.url(), key, RELEASE, |url| run("fixed", url)).await;
        assert_eq!(
            left.as_deref(),
            Some(OTHER),
            "{key}: the fixed release kept the other holder's lock"
        );
        crate::redis_state::delete(&mut con, &[key]).await;

        let (_, held) = peek_before(&server.url(), key, RELEASE, |url| run("fixed", url)).await;
        assert_eq!(
            held.as_deref(),
            Some(TOKEN),
            "{key}: the fixed function acquired the free lock"
        );
        assert_eq!(
            value(&mut con, key).await,
            None,
            "{key}: the fixed release released its own lock"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_releases_one_import() {
    use fx::bad_three_releases_one_import as bad;
    use fx::bad_three_releases_one_import_fixed as fixed;
    let (server, mut con) = own_server().await;
    for key in [
        "lock:ledger-compaction",
        "lock:key-rotation",
        "lock:trial-expiry",
    ] {
        let run = |which: &'static str, url: String| async move {
            let mut c = connect(&url).await;
            match (which, key) {
                ("bad", "lock:ledger-compaction") => bad::compact_ledger(&mut c, TOKEN).await,
                ("bad", "lock:key-rotation") => bad::rotate_keys(&mut c, TOKEN).await,
                ("bad", _) => bad::expire_trials(&mut c, TOKEN).await,
                (_, "lock:ledger-compaction") => fixed::compact_ledger(&mut c, TOKEN).await,
                (_, "lock:key-rotation") => fixed::rotate_keys(&mut c, TOKEN).await,
                (_, _) => fixed::expire_trials(&mut c, TOKEN).await,
            }
            .unwrap()
        };
        let (_, left) = after_take_over(&server.url(), key, RELEASE, |url| run("bad", url)).await;
        assert_eq!(
            left, None,
            "{key}: the original deleted the other holder's lock"
        );
        crate::redis_state::delete(&mut con, &[key]).await;

        let (_, left) = after_take_over(&server.url(), key, RELEASE, |url| run("fixed", url)).await;
        assert_eq!(
            left.as_deref(),
            Some(OTHER),
            "{key}: the fixed release kept the other holder's lock"
        );
        crate::redis_state::delete(&mut con, &[key]).await;

        let (_, held) = peek_before(&server.url(), key, RELEASE, |url| run("fixed", url)).await;
        assert_eq!(
            held.as_deref(),
            Some(TOKEN),
            "{key}: the fixed function acquired the free lock"
        );
        assert_eq!(
            value(&mut con, key).await,
            None,
            "{key}: the fixed release released its own lock"
        );
    }
}
