//! Round trips per second of the PostgreSQL lock primitives, uncontended, against the server
//! at `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`):
//!
//! * bare: `SELECT pg_try_advisory_lock($1)` + `SELECT pg_advisory_unlock($1)` on one
//!   connection (the floor: two round trips),
//! * `AdvisoryLock::try_lock` + `AdvisoryGuard::unlock` on a pool (the same two statements
//!   plus the pool checkout and return; sqlx pings an idle connection before handing it out
//!   unless `test_before_acquire(false)`, measured separately),
//! * `TableLock::try_acquire` + `TableLock::release` (an upsert and an update, each a
//!   committed write).
//!
//! The variants run interleaved for `BENCH_ROUNDS` rounds (default 5) of `BENCH_ITERS` pairs
//! each (default 1000, capped at 100000), so background load hits them alike; the median
//! round is reported. Run with `cargo bench -p locklint-runtime --bench pg_roundtrip`.

use std::time::{Duration, Instant};

use locklint_runtime::advisory::{AdvisoryKey, AdvisoryLock};
use locklint_runtime::table::TableLock;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};

type BoxError = Box<dyn std::error::Error>;

const VARIANTS: [&str; 4] = [
    "bare pg_try_advisory_lock + unlock, one conn",
    "AdvisoryLock::try_lock + unlock (pool)",
    "  same, pool with test_before_acquire(false)",
    "TableLock::try_acquire + release",
];

struct Bench {
    conn: PgConnection,
    pool: PgPool,
    unpinged: PgPool,
    locks: TableLock,
    key: AdvisoryKey,
}

impl Bench {
    /// Runs `n` acquire+release pairs of `variant` and returns the elapsed time.
    async fn run(&mut self, variant: usize, n: u64) -> Result<Duration, BoxError> {
        let key = self.key;
        let start = Instant::now();
        for _ in 0..n {
            match variant {
                0 => {
                    let ok: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
                        .bind(key.0)
                        .fetch_one(&mut self.conn)
                        .await?;
                    assert!(ok);
                    let ok: bool = sqlx::query_scalar("SELECT pg_advisory_unlock($1)")
                        .bind(key.0)
                        .fetch_one(&mut self.conn)
                        .await?;
                    assert!(ok);
                }
                1 | 2 => {
                    let pool = if variant == 1 {
                        &self.pool
                    } else {
                        &self.unpinged
                    };
                    let guard = AdvisoryLock::try_lock(pool, key)
                        .await?
                        .expect("uncontended");
                    guard.unlock().await?;
                }
                _ => {
                    let lease = self
                        .locks
                        .try_acquire("bench", Duration::from_secs(30))
                        .await?
                        .expect("uncontended");
                    assert!(self.locks.release(&lease).await?);
                }
            }
        }
        Ok(start.elapsed())
    }
}

fn env_u64(name: &str, default: u64, max: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
        .clamp(1, max)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let iters = env_u64("BENCH_ITERS", 1000, 100_000);
    let rounds = env_u64("BENCH_ROUNDS", 5, 50);
    let base = url.parse::<PgConnectOptions>()?.disable_statement_logging();
    let schema = format!("locklint_bench_{}", std::process::id());
    let mut admin = PgConnection::connect_with(&base).await?;
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut admin)
        .await?;
    let options = base.clone().options([("search_path", schema.as_str())]);
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect_with(options.clone())
        .await?;
    let unpinged = PgPoolOptions::new()
        .max_connections(4)
        .test_before_acquire(false)
        .connect_with(options.clone())
        .await?;
    let locks = TableLock::new(pool.clone());
    locks.migrate().await?;
    let mut bench = Bench {
        conn: PgConnection::connect_with(&options).await?,
        pool,
        unpinged,
        locks,
        key: AdvisoryKey::from_name(&schema),
    };

    let warmup = (iters / 10).max(10);
    for v in 0..VARIANTS.len() {
        bench.run(v, warmup).await?;
    }
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); VARIANTS.len()];
    for _ in 0..rounds {
        for (v, r) in rates.iter_mut().enumerate() {
            let elapsed = bench.run(v, iters).await?;
            r.push(iters as f64 / elapsed.as_secs_f64());
        }
    }
    let median = |r: &mut Vec<f64>| {
        r.sort_by(f64::total_cmp);
        r[r.len() / 2]
    };
    let medians: Vec<f64> = rates.iter_mut().map(median).collect();
    println!(
        "PostgreSQL lock round trips, uncontended acquire+release pairs \
         (median of {rounds} interleaved rounds x {iters} pairs):"
    );
    for (name, rate) in VARIANTS.iter().zip(&medians) {
        println!(
            "  {name:<46} {rate:>9.0} pairs/s  {:>8.1} us/pair  {:>6.2}x bare",
            1e6 / rate,
            medians[0] / rate
        );
    }

    bench.conn.close().await?;
    bench.pool.close().await;
    bench.unpinged.close().await;
    sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut admin)
        .await?;
    admin.close().await?;
    Ok(())
}
