//! Redis steps the proofs share: forcing a take-over, reading a lock's state, cleaning up.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;

/// The time to live of the other holder's lock after a take-over: longer than any proof
/// needs, shorter than any TTL a renewal under test writes.
pub const OTHER_TTL_MS: i64 = 15_000;

/// The lock at `key` expires (a forced `PEXPIRE key 1`, then waiting until it is gone) and
/// holder `other` takes it with `SET key other NX PX` [`OTHER_TTL_MS`], as another worker
/// would.
pub async fn expire_and_take_over(con: &mut MultiplexedConnection, key: &str, other: &str) {
    let _: bool = con.pexpire(key, 1).await.expect("PEXPIRE");
    let deadline = Instant::now() + Duration::from_secs(5);
    while con.exists::<_, bool>(key).await.expect("EXISTS") {
        assert!(Instant::now() < deadline, "{key} never expired");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let taken: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(other)
        .arg("NX")
        .arg("PX")
        .arg(OTHER_TTL_MS)
        .query_async(con)
        .await
        .expect("SET NX PX");
    assert!(
        taken.is_some(),
        "the other holder could not take the expired lock {key}"
    );
}

/// The lock's value.
pub async fn value(con: &mut MultiplexedConnection, key: &str) -> Option<String> {
    con.get(key).await.expect("GET")
}

/// The lock's remaining time to live in ms (`-1`: no expiry, `-2`: no key).
pub async fn pttl(con: &mut MultiplexedConnection, key: &str) -> i64 {
    con.pttl(key).await.expect("PTTL")
}

/// Deletes the given keys (on a shared server, keys that carry no unique prefix).
pub async fn delete(con: &mut MultiplexedConnection, keys: &[&str]) {
    let _: i64 = con.del(keys).await.expect("DEL");
}

/// A random id, so that keys built from it do not collide with other tests on a shared
/// server.
pub fn random_id() -> u64 {
    getrandom::u64().expect("getrandom") >> 12
}

/// The holder that takes the lock over in the interleavings.
pub const OTHER: &str = "other-holder-token";

/// Commands a release sends (plain, or through a script).
pub const RELEASE: &[&str] = &["DEL", "UNLINK", "EVALSHA", "EVAL"];

/// Commands a renewal sends (plain, or through a script).
pub const RENEW: &[&str] = &["EXPIRE", "PEXPIRE", "EVALSHA", "EVAL"];

/// Opens a multiplexed connection to `url`.
pub async fn connect(url: &str) -> MultiplexedConnection {
    crate::redis_support::connect(url).await
}

/// Runs `call` with the URL of a proxy in front of `url`: just before the first command
/// named in `watch` reaches Redis, the lock at `key` expires and [`OTHER`] takes it. Returns
/// what `call` returned and the value `key` holds afterwards.
pub async fn after_take_over<T, F, Fut>(
    url: &str,
    key: &str,
    watch: &[&str],
    call: F,
) -> (T, Option<String>)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let (hook_url, hook_key) = (url.to_string(), key.to_string());
    let proxy = crate::proxy::Proxy::start(url, watch, move || {
        let (url, key) = (hook_url.clone(), hook_key.clone());
        async move {
            let mut con = connect(&url).await;
            expire_and_take_over(&mut con, &key, OTHER).await;
            crate::proxy::Action::Forward
        }
    })
    .await;
    let out = call(proxy.url().to_string()).await;
    assert!(
        proxy.fired(),
        "the watched command {watch:?} never reached Redis"
    );
    let mut con = connect(url).await;
    (out, value(&mut con, key).await)
}

/// Runs `call` with the URL of a proxy in front of `url` that cuts the connection at the
/// first command named in `watch`: the process dies there. Returns what `call` returned.
pub async fn dies_at<T, F, Fut>(url: &str, watch: &[&str], call: F) -> T
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let proxy =
        crate::proxy::Proxy::start(url, watch, || async { crate::proxy::Action::Cut }).await;
    let out = call(proxy.url().to_string()).await;
    assert!(
        proxy.fired(),
        "the watched command {watch:?} never reached Redis"
    );
    out
}

/// `SET key token PX 60000`: `token` holds the lock.
pub async fn hold(con: &mut MultiplexedConnection, key: &str, token: &str) {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(token)
        .arg("PX")
        .arg(60_000)
        .query_async(con)
        .await
        .expect("SET PX");
}

/// Runs `call` through a proxy that reads what `key` holds just before the first command
/// named in `watch` reaches Redis (the lock as the function holds it); returns what `call`
/// returned and that value.
pub async fn peek_before<T, F, Fut>(
    url: &str,
    key: &str,
    watch: &[&str],
    call: F,
) -> (T, Option<String>)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let (hook_url, hook_key, hook_seen) = (url.to_string(), key.to_string(), seen.clone());
    let proxy = crate::proxy::Proxy::start(url, watch, move || {
        let (url, key, seen) = (hook_url.clone(), hook_key.clone(), hook_seen.clone());
        async move {
            let v = value(&mut connect(&url).await, &key).await;
            *seen.lock().unwrap_or_else(|e| e.into_inner()) = v;
            crate::proxy::Action::Forward
        }
    })
    .await;
    let out = call(proxy.url().to_string()).await;
    assert!(
        proxy.fired(),
        "the watched command {watch:?} never reached Redis"
    );
    let v = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    (out, v)
}

/// A connected fred client for `url`.
pub async fn fred_client(url: &str) -> fred::prelude::Client {
    use fred::prelude::*;
    let config = Config::from_url(url).expect("fred config from the URL");
    let client = Builder::from_config(config).build().expect("fred client");
    client.init().await.expect("fred connects");
    client
}

/// The lock at `key` exists and has no expiry: nobody can ever take it again.
pub async fn assert_never_expires(con: &mut MultiplexedConnection, key: &str, what: &str) {
    assert_eq!(
        pttl(con, key).await,
        -1,
        "{what}: the lock {key} never expires"
    );
}

/// The lock at `key` exists and expires within `ms`.
pub async fn assert_expires_within(
    con: &mut MultiplexedConnection,
    key: &str,
    ms: i64,
    what: &str,
) {
    let ttl = pttl(con, key).await;
    assert!(
        ttl > 0 && ttl <= ms,
        "{what}: the lock {key} should expire within {ms} ms (PTTL {ttl})"
    );
}

/// `EVAL script <keys> <args>`: a script run as written.
pub async fn eval(
    con: &mut MultiplexedConnection,
    script: &str,
    keys: &[&str],
    args: &[&str],
) -> redis::Value {
    redis::cmd("EVAL")
        .arg(script)
        .arg(keys.len())
        .arg(keys)
        .arg(args)
        .query_async(con)
        .await
        .expect("EVAL")
}

/// What [`shorten`] leaves of a lock's TTL: long enough to outlast a slow machine, shorter
/// than any TTL a renewal under test writes.
pub const SHORT_MS: i64 = 5_000;

/// Shortens a lock to [`SHORT_MS`], so that a renewal to a longer TTL shows.
pub async fn shorten(con: &mut MultiplexedConnection, key: &str) {
    let _: bool = con.pexpire(key, SHORT_MS).await.expect("PEXPIRE");
}
