//! Uncontended lease round trips against a local Redis (`REDIS_URL`, default
//! `redis://127.0.0.1:6379`).
//!
//! Measures `try_acquire` + `release` (acquire script: `SET NX PX` and, for the winner, the
//! fence counter raised to `max(counter + 1, server time in µs)`; release: compare-and-delete)
//! against the bare, unsafe pair `SET key value NX PX` / `DEL key` on the same connection,
//! in alternating rounds, and prints both rates and their ratio.
//!
//! Run with `cargo bench -p locklint-runtime --bench redis_roundtrip`.

use std::time::{Duration, Instant};

use locklint_runtime::redis_lock::RedisLocker;
use redis::aio::MultiplexedConnection;

const ITERATIONS: u32 = 5000;
const WARMUP: u32 = 200;
const ROUNDS: usize = 3;

async fn lease_round_trips(locker: &RedisLocker<MultiplexedConnection>, n: u32) -> Duration {
    let ttl = Duration::from_secs(10);
    let started = Instant::now();
    for _ in 0..n {
        let mut lease = locker
            .try_acquire("bench", ttl)
            .await
            .expect("acquire")
            .expect("uncontended");
        assert!(lease.release().await.expect("release"));
    }
    started.elapsed()
}

async fn bare_round_trips(conn: &mut MultiplexedConnection, key: &str, n: u32) -> Duration {
    let started = Instant::now();
    for i in 0..n {
        let set: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(i)
            .arg("NX")
            .arg("PX")
            .arg(10_000)
            .query_async(conn)
            .await
            .expect("SET");
        assert!(set.is_some(), "uncontended");
        // locklint: allow(unconditional-release) -- the bare SET NX / DEL pair is the baseline the lease is measured against
        let deleted: i64 = redis::cmd("DEL")
            .arg(key)
            .query_async(conn)
            .await
            .expect("DEL");
        assert_eq!(deleted, 1);
    }
    started.elapsed()
}

fn rate(n: u32, took: Duration) -> f64 {
    f64::from(n) / took.as_secs_f64()
}

fn main() {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let client = redis::Client::open(url.as_str()).expect("REDIS_URL");
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .unwrap_or_else(|e| panic!("no Redis at {url}: {e}"));
        let suffix = getrandom::u64().expect("OS RNG");
        let prefix = format!("llbench-{suffix:016x}");
        let locker = RedisLocker::new(conn.clone())
            .with_prefix(prefix.clone())
            .expect("prefix");
        let mut bare_conn = conn.clone();
        let bare_key = format!("{prefix}:bare");

        lease_round_trips(&locker, WARMUP).await;
        bare_round_trips(&mut bare_conn, &bare_key, WARMUP).await;

        let (mut best_lease, mut best_bare) = (0f64, 0f64);
        for _ in 0..ROUNDS {
            best_lease = best_lease.max(rate(
                ITERATIONS,
                lease_round_trips(&locker, ITERATIONS).await,
            ));
            best_bare = best_bare.max(rate(
                ITERATIONS,
                bare_round_trips(&mut bare_conn, &bare_key, ITERATIONS).await,
            ));
        }
        let _: i64 = redis::cmd("DEL")
            .arg(locker.fence_key("bench"))
            .query_async(&mut bare_conn)
            .await
            .expect("cleanup");

        println!(
            "redis_roundtrip: {ITERATIONS} iterations x {ROUNDS} rounds against {url} (best round)"
        );
        println!("  lease   try_acquire + release : {best_lease:>10.0} round trips/s");
        println!("  bare    SET NX PX + DEL       : {best_bare:>10.0} round trips/s");
        println!(
            "  ratio   bare / lease          : {:>10.2}x",
            best_bare / best_lease
        );
    });
}
