//! The fault scenarios, shared by the `faults` example (full size, prints the figures) and
//! `tests/fault_suite.rs` (reduced size, asserts the safety results).
//!
//! Every scenario runs against servers this process started itself (a `redis-server` and a
//! PostgreSQL cluster made with `initdb`, both on free loopback ports) and returns figures
//! (measured, printed) and checks (safety properties: no stale write accepted, loss
//! signalled, clear errors). Only the checks decide whether the run passed.

use std::io::Write as _;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use locklint_runtime::advisory::AdvisoryLocker;
use locklint_runtime::fence::{FenceError, FencedWrite};
use locklint_runtime::redis_lock::{Backoff, LockError, RedisLocker};
use locklint_runtime::table::TableLock;
use locklint_runtime::FencingToken;
use redis::aio::{ConnectionManager, MultiplexedConnection};
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::redis::{client_id, connect, RedisServer};

/// Any error a scenario can hit; a scenario that fails this way fails the run.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Set (to `1`) in the environment of the holder child process of [`sigstop`].
pub const HOLDER_ENV: &str = "LOCKLINT_FAULTS_HOLDER";
const HOLDER_REDIS: &str = "LOCKLINT_FAULTS_REDIS_URL";
const HOLDER_PG: &str = "LOCKLINT_FAULTS_PG_URL";
const HOLDER_TTL_MS: &str = "LOCKLINT_FAULTS_TTL_MS";

/// The resource rows of the fenced store, one per scenario that writes to it.
const CONTENTION_ROW: i32 = 1;
const SIGSTOP_ROW: i32 = 2;

/// The fenced write: stamps the row with the token and logs the accepted write in the
/// order the row accepted it (the `UPDATE` holds the row lock while the log sequence is
/// drawn, so `seq` follows the row's history). `<=`: one holder may write several times.
const FENCED_WRITE: &str = "WITH w AS (UPDATE faults_resource SET fence = $1, writes = writes + 1 \
     WHERE id = $2 AND fence <= $1 RETURNING id, fence) \
     INSERT INTO faults_log (resource, fence, writer) SELECT id, fence, $3 FROM w";

/// Accepted writes whose fence is below a fence the row had already accepted: a stale
/// holder's write that got through. Must be 0.
const STALE_ACCEPTED: &str = "SELECT count(*) FROM (SELECT fence, max(fence) OVER \
     (ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before \
     FROM faults_log WHERE resource = $1) t WHERE fence < before";

/// How big a run is.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    /// Contending tasks in the contention scenarios.
    pub workers: usize,
    /// Acquisitions per task in the mutual-exclusion scenario.
    pub rounds: usize,
    /// How long each wake-up variant of the throughput scenario runs.
    pub throughput_for: Duration,
}

impl Size {
    /// The published figures: 16 tasks x 150 acquisitions, 3 s per throughput variant.
    pub const FULL: Size = Size {
        workers: 16,
        rounds: 150,
        throughput_for: Duration::from_secs(3),
    };
    /// The `cargo test` run: the same scenarios, fewer rounds.
    pub const SMOKE: Size = Size {
        workers: 16,
        rounds: 12,
        throughput_for: Duration::from_millis(400),
    };
}

/// Figures and checks of a run.
#[derive(Debug, Default)]
pub struct Report {
    /// `(scenario, measure, value)`, in order.
    pub figures: Vec<(String, String, String)>,
    /// `(safety property, held)`.
    pub checks: Vec<(String, bool)>,
}

impl Report {
    fn figure(&mut self, scenario: &str, measure: &str, value: impl std::fmt::Display) {
        self.figures
            .push((scenario.to_owned(), measure.to_owned(), value.to_string()));
    }

    fn check(&mut self, property: impl Into<String>, held: bool) {
        self.checks.push((property.into(), held));
    }

    /// The checks that failed.
    pub fn failures(&self) -> Vec<&str> {
        self.checks
            .iter()
            .filter(|(_, held)| !held)
            .map(|(p, _)| p.as_str())
            .collect()
    }

    /// The figures as a Markdown table, then the checks.
    pub fn render(&self) -> String {
        let mut out = String::from("| Scenario | Measure | Result |\n|---|---|---|\n");
        for (scenario, measure, value) in &self.figures {
            out.push_str(&format!("| {scenario} | {measure} | {value} |\n"));
        }
        out.push('\n');
        for (property, held) in &self.checks {
            let mark = if *held { "ok    " } else { "FAILED" };
            out.push_str(&format!("{mark} {property}\n"));
        }
        out
    }
}

/// The servers of a run: a throwaway Redis (restarted by the Redis scenarios) and a
/// throwaway PostgreSQL.
pub struct Servers {
    /// The Redis server.
    pub redis: RedisServer,
    /// The PostgreSQL URL.
    pub pg_url: String,
    /// A pool on it, holding the fenced store.
    pub pool: PgPool,
}

impl Servers {
    /// Starts both servers. Must run on a multi-threaded runtime (the Redis server is started
    /// with blocking calls).
    pub async fn start() -> Result<Servers, BoxError> {
        let redis = tokio::task::block_in_place(RedisServer::start);
        let pg_url = crate::support::sql::start_postgres().await?;
        let pool = PgPoolOptions::new()
            .max_connections(20)
            .connect(&pg_url)
            .await?;
        sqlx::raw_sql(
            "CREATE TABLE faults_resource (id int PRIMARY KEY, fence bigint NOT NULL DEFAULT 0, \
                 writes bigint NOT NULL DEFAULT 0); \
             CREATE TABLE faults_log (seq bigserial PRIMARY KEY, resource int NOT NULL, \
                 fence bigint NOT NULL, writer text NOT NULL); \
             INSERT INTO faults_resource (id) VALUES (1), (2);",
        )
        .execute(&pool)
        .await?;
        Ok(Servers {
            redis,
            pg_url,
            pool,
        })
    }
}

/// Runs every scenario in order, at [`Size::SMOKE`] or [`Size::FULL`].
pub async fn run_all(servers: &mut Servers, smoke: bool) -> Result<Report, BoxError> {
    let size = if smoke { Size::SMOKE } else { Size::FULL };
    let mut report = Report::default();
    contention(servers, size, &mut report).await?;
    sigstop(servers, &mut report).await?;
    redis_restart(servers, &mut report).await?;
    client_kill(servers, &mut report).await?;
    advisory_terminate(servers, &mut report).await?;
    lock_table(servers, &mut report).await?;
    wake_on_release(servers, size, &mut report).await?;
    Ok(report)
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn unix_micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0)
}

/// A random integer in `[0, n)`.
fn below(n: u64) -> u64 {
    getrandom::u64().unwrap_or(0) % n.max(1)
}

/// Whether a fenced write was accepted (`Ok(true)`) or refused as stale (`Ok(false)`).
async fn fenced_write(
    pool: &PgPool,
    fence: FencingToken,
    row: i32,
    writer: &str,
) -> Result<bool, BoxError> {
    match FencedWrite::new(FENCED_WRITE, fence)
        .bind(row)
        .bind(writer.to_owned())
        .execute(pool)
        .await
    {
        Ok(_) => Ok(true),
        Err(FenceError::StaleFence { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

async fn stale_accepted(pool: &PgPool, row: i32) -> Result<i64, BoxError> {
    Ok(sqlx::query_scalar(STALE_ACCEPTED)
        .bind(row)
        .fetch_one(pool)
        .await?)
}

async fn manager(url: &str) -> Result<ConnectionManager, BoxError> {
    Ok(ConnectionManager::new(redis::Client::open(url)?).await?)
}

// ------------------------------------------------------------------ (a) contention

/// 16 tasks take one lock over and over with a short TTL; now and then a holder pauses past
/// the TTL before writing. The lock alone lets a second holder in (overlaps); the fenced
/// store refuses every write of a holder that a newer fence overtook.
async fn contention(servers: &Servers, size: Size, report: &mut Report) -> Result<(), BoxError> {
    const SCENARIO: &str = "(a) contention";
    let ttl = Duration::from_millis(40);
    let conn = servers.redis.conn().await;
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let pauses = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let accepted = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..size.workers {
        let locker = RedisLocker::new(conn.clone())
            .with_prefix("faults-a")?
            .with_backoff(Backoff {
                base: Duration::from_millis(1),
                max: Duration::from_millis(16),
            });
        let pool = servers.pool.clone();
        let counters = [
            Arc::clone(&inside),
            Arc::clone(&overlaps),
            Arc::clone(&pauses),
            Arc::clone(&refused),
            Arc::clone(&accepted),
        ];
        let rounds = size.rounds;
        tasks.push(tokio::spawn(async move {
            let [inside, overlaps, pauses, refused, accepted] = counters;
            let writer = format!("worker-{worker}");
            for _ in 0..rounds {
                let mut lease = locker.acquire("shared", ttl).await?;
                if inside.fetch_add(1, Ordering::SeqCst) > 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                if below(16) == 0 {
                    // A pause (GC, swap, a slow await) past the TTL, before the write.
                    pauses.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(ttl + Duration::from_millis(5 + below(40))).await;
                }
                let ok = fenced_write(&pool, lease.fence(), CONTENTION_ROW, &writer).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                if ok? {
                    accepted.fetch_add(1, Ordering::SeqCst);
                } else {
                    refused.fetch_add(1, Ordering::SeqCst);
                }
                lease.release().await?;
            }
            Ok::<(), BoxError>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let took = started.elapsed();
    let stale = stale_accepted(&servers.pool, CONTENTION_ROW).await?;
    let total = size.workers * size.rounds;
    report.figure(
        SCENARIO,
        "acquisitions (tasks x rounds), TTL",
        format!("{total} ({} x {}), {}", size.workers, size.rounds, ms(ttl)),
    );
    report.figure(
        SCENARIO,
        "holders paused past the TTL",
        pauses.load(Ordering::SeqCst),
    );
    report.figure(
        SCENARIO,
        "overlaps seen by the lock alone",
        overlaps.load(Ordering::SeqCst),
    );
    report.figure(
        SCENARIO,
        "fenced writes accepted / refused as stale",
        format!(
            "{} / {}",
            accepted.load(Ordering::SeqCst),
            refused.load(Ordering::SeqCst)
        ),
    );
    report.figure(SCENARIO, "stale writes accepted by the fenced store", stale);
    report.figure(SCENARIO, "run time", ms(took));
    report.check("(a) no stale write accepted under contention", stale == 0);
    report.check(
        "(a) every write was either accepted or refused",
        accepted.load(Ordering::SeqCst) + refused.load(Ordering::SeqCst) == total,
    );
    Ok(())
}

// ------------------------------------------------------------------ (b) SIGSTOP

/// Sends `signal` (`STOP`, `CONT`) to the process `pid`.
fn signal(pid: u32, signal: &str) -> Result<(), BoxError> {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()?;
    if !status.success() {
        return Err(format!("kill -{signal} {pid} failed: {status}").into());
    }
    Ok(())
}

/// A child process (this program in holder mode) holds the lock with a keep-alive and
/// keeps writing; it is stopped with SIGSTOP past its TTL, another holder takes over and
/// writes, then the child is continued with SIGCONT.
async fn sigstop(servers: &Servers, report: &mut Report) -> Result<(), BoxError> {
    const SCENARIO: &str = "(b) SIGSTOP past the TTL";
    let ttl = Duration::from_millis(400);
    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .env(HOLDER_ENV, "1")
        .env(HOLDER_REDIS, servers.redis.url())
        .env(HOLDER_PG, &servers.pg_url)
        .env(HOLDER_TTL_MS, ttl.as_millis().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().ok_or("the holder exited at once")?;
    let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let mut next_line = async || -> Result<String, BoxError> {
        match tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await {
            Ok(Ok(Some(line))) => Ok(line),
            Ok(Ok(None)) => Err("the holder closed its output".into()),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err("the holder said nothing for 30 s".into()),
        }
    };
    let holding = next_line().await?;
    let child_fence: u64 = holding
        .strip_prefix("holding ")
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| format!("unexpected holder output: {holding}"))?;
    // Let it write a few times under its valid lease.
    tokio::time::sleep(Duration::from_millis(100)).await;

    signal(pid, "STOP")?;
    let stopped_at = Instant::now();
    let locker = RedisLocker::new(servers.redis.conn().await).with_prefix("faults-b")?;
    let mut lease = locker
        .acquire_timeout("holder", ttl, Duration::from_secs(10))
        .await?;
    let taken_after = stopped_at.elapsed();
    let successor_wrote =
        fenced_write(&servers.pool, lease.fence(), SIGSTOP_ROW, "successor").await?;
    tokio::time::sleep_until((stopped_at + ttl * 3).into()).await;
    // Taken before the signal is sent, so the delays below are upper bounds.
    let resumed = unix_micros();
    signal(pid, "CONT")?;
    let paused_for = stopped_at.elapsed();

    let (mut refused_at, mut lost_at, mut lost_reason) = (None, None, String::new());
    while refused_at.is_none() || lost_at.is_none() {
        let line = next_line().await?;
        let mut words = line.splitn(3, ' ');
        let (what, at) = (
            words.next(),
            words.next().and_then(|t| t.parse::<u128>().ok()),
        );
        match (what, at) {
            (Some("refused"), Some(at)) => refused_at = Some(at),
            (Some("lost"), Some(at)) => {
                lost_at = Some(at);
                lost_reason = words.next().unwrap_or_default().to_owned();
            }
            _ => return Err(format!("unexpected holder output: {line}").into()),
        }
    }
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await??;
    lease.release().await?;
    let stale = stale_accepted(&servers.pool, SIGSTOP_ROW).await?;
    let after = |at: Option<u128>| {
        at.map(|at| format!("{:.1} ms", at.saturating_sub(resumed) as f64 / 1000.0))
            .unwrap_or_else(|| "never".into())
    };
    report.figure(
        SCENARIO,
        "TTL, pause, lock free again after",
        format!("{}, {}, {}", ms(ttl), ms(paused_for), ms(taken_after)),
    );
    report.figure(
        SCENARIO,
        "fences: paused holder / successor",
        format!("{child_fence} / {}", lease.fence()),
    );
    report.figure(
        SCENARIO,
        "paused holder's first write after `kill -CONT`",
        format!("refused, {} after resume", after(refused_at)),
    );
    report.figure(
        SCENARIO,
        "paused holder's `lost()` after `kill -CONT`",
        format!("{} ({lost_reason})", after(lost_at)),
    );
    report.figure(SCENARIO, "stale writes accepted", stale);
    report.check(
        "(b) the successor's fenced write was accepted",
        successor_wrote,
    );
    report.check(
        "(b) the resumed holder's fenced write was refused",
        refused_at.is_some(),
    );
    report.check("(b) the resumed holder's lost() fired", lost_at.is_some());
    report.check("(b) no stale write accepted after SIGCONT", stale == 0);
    report.check("(b) the holder process exited cleanly", status.success());
    Ok(())
}

/// The holder child of [`sigstop`]: takes the lock, keeps it alive and writes every 10 ms
/// until a write is refused and `lost()` has fired, reporting both on stdout.
pub async fn holder_main() -> Result<(), BoxError> {
    let env = |name: &str| std::env::var(name).map_err(|_| format!("{name} is not set"));
    let ttl = Duration::from_millis(env(HOLDER_TTL_MS)?.parse()?);
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(&env(HOLDER_PG)?)
        .await?;
    let locker = RedisLocker::new(manager(&env(HOLDER_REDIS)?).await?).with_prefix("faults-b")?;
    let mut lease = locker
        .acquire_timeout("holder", ttl, Duration::from_secs(10))
        .await?;
    lease.spawn_keep_alive(Duration::from_secs(60));
    if !fenced_write(&pool, lease.fence(), SIGSTOP_ROW, "holder").await? {
        return Err("the holder's first write was refused".into());
    }
    let say = |line: String| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    say(format!("holding {}", lease.fence()));
    let lost = lease.lost();
    let watch = tokio::spawn(async move {
        let reason = lost.await;
        say(format!("lost {} {reason}", unix_micros()));
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while fenced_write(&pool, lease.fence(), SIGSTOP_ROW, "holder").await? {
        if Instant::now() > deadline {
            return Err("the holder's writes were never refused".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    say(format!("refused {}", unix_micros()));
    tokio::time::timeout(Duration::from_secs(10), watch).await??;
    drop(lease);
    Ok(())
}

// ------------------------------------------------------------------ (c) Redis faults

/// The Redis server is killed and started again (empty) on the same port while a lease is
/// held with a keep-alive; then a lease is released while the server is down.
async fn redis_restart(servers: &mut Servers, report: &mut Report) -> Result<(), BoxError> {
    const SCENARIO: &str = "(c) Redis restarted";
    let ttl = Duration::from_millis(600);
    let url = servers.redis.url();
    let locker = RedisLocker::new(manager(&url).await?).with_prefix("faults-c")?;
    let mut lease = locker
        .try_acquire("restart", ttl)
        .await?
        .ok_or("restart lock busy")?;
    lease.spawn_keep_alive(Duration::from_secs(60));
    let lost = lease.lost();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let killed = Instant::now();
    tokio::task::block_in_place(|| servers.redis.restart());
    let back_after = killed.elapsed();
    let back = Instant::now();
    let reason = tokio::time::timeout(Duration::from_secs(5), lost)
        .await
        .ok();
    let lost_after = back.elapsed();

    // A successor takes the (now free) lock; the old lease's release must not touch it.
    let successor_locker = RedisLocker::new(connect(&url).await).with_prefix("faults-c")?;
    let mut successor = successor_locker
        .acquire_timeout("restart", ttl, Duration::from_secs(5))
        .await?;
    let old_release = lease.release().await;
    let successor_kept = successor.renew(ttl).await.is_ok();
    successor.release().await?;

    report.figure(
        SCENARIO,
        "TTL, renewal interval, server back after",
        format!("{}, {}, {}", ms(ttl), ms(ttl / 3), ms(back_after)),
    );
    report.figure(
        SCENARIO,
        "`lost()` after the server came back",
        match &reason {
            Some(reason) => format!(
                "{} ({reason}); within one renewal interval: {}",
                ms(lost_after),
                if lost_after <= ttl / 3 { "yes" } else { "no" }
            ),
            None => "not within 5 s".into(),
        },
    );
    report.figure(
        SCENARIO,
        "release of the lost lease",
        format!("{old_release:?}"),
    );
    report.check(
        "(c) loss signalled after a Redis restart mid-hold",
        reason.is_some(),
    );
    report.check(
        "(c) the lost lease's release did not delete the successor's key",
        matches!(old_release, Ok(false)) && successor_kept,
    );

    // Released while the server is down: an error, no panic; then the server comes back.
    let mut lease = locker
        .try_acquire("down", ttl)
        .await?
        .ok_or("down lock busy")?;
    tokio::task::block_in_place(|| servers.redis.kill());
    let started = Instant::now();
    let released = tokio::time::timeout(Duration::from_secs(20), lease.release()).await;
    let took = started.elapsed();
    tokio::task::block_in_place(|| servers.redis.restart());
    let clear_error = matches!(&released, Ok(Err(LockError::Redis(_))));
    report.figure(
        SCENARIO,
        "release while the server is down",
        match &released {
            Ok(Err(e)) => format!("`Err({e})` after {}", ms(took)),
            Ok(Ok(owned)) => format!("Ok({owned})"),
            Err(_) => "no answer within 20 s".into(),
        },
    );
    report.check(
        "(c) a release while the server is down returns an error",
        clear_error,
    );
    drop(lease);
    Ok(())
}

/// A lease's connection is killed with `CLIENT KILL` mid-hold (a plain multiplexed
/// connection, which never reconnects, and a `ConnectionManager`, which does), and a
/// waiter's connection mid-acquire.
async fn client_kill(servers: &Servers, report: &mut Report) -> Result<(), BoxError> {
    const SCENARIO: &str = "(c) `CLIENT KILL`";
    let ttl = Duration::from_millis(600);
    let url = servers.redis.url();
    let mut admin = connect(&url).await;
    let kill = async |admin: &mut MultiplexedConnection, id: i64| -> Result<(), BoxError> {
        let killed: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(id)
            .query_async(admin)
            .await?;
        if killed != 1 {
            return Err(format!("CLIENT KILL ID {id} killed {killed} clients").into());
        }
        Ok(())
    };

    // Mid-hold, on a connection that never reconnects: the keep-alive's renewals fail, and
    // the lease is declared lost once less than one renewal interval of validity is left.
    let mut plain = connect(&url).await;
    let plain_id = client_id(&mut plain).await;
    let locker = RedisLocker::new(plain).with_prefix("faults-c")?;
    let mut lease = locker
        .try_acquire("kill-plain", ttl)
        .await?
        .ok_or("kill-plain busy")?;
    lease.spawn_keep_alive(Duration::from_secs(60));
    let lost = lease.lost();
    tokio::time::sleep(Duration::from_millis(50)).await;
    kill(&mut admin, plain_id).await?;
    let killed = Instant::now();
    let reason = tokio::time::timeout(Duration::from_secs(5), lost)
        .await
        .ok();
    let lost_after = killed.elapsed();
    let lost_at = Instant::now();
    // what was left of the key on the server when the holder was told
    let key_left: i64 = redis::cmd("PTTL")
        .arg(lease.key())
        .query_async(&mut admin)
        .await?;
    let before_the_end = reason.is_some() && lost_at < lease.valid_until() && key_left > 0;
    let release = lease.release().await;
    report.figure(
        SCENARIO,
        "mid-hold, plain connection: TTL, renewal interval",
        format!("{}, {}", ms(ttl), ms(ttl / 3)),
    );
    report.figure(
        SCENARIO,
        "mid-hold, plain connection: `lost()` after the kill",
        match &reason {
            Some(reason) => format!(
                "{} ({reason}); the key had {key_left} ms left",
                ms(lost_after)
            ),
            None => "not within 5 s".into(),
        },
    );
    report.figure(
        SCENARIO,
        "mid-hold, plain connection: release",
        match &release {
            Ok(owned) => format!("Ok({owned})"),
            Err(e) => format!("`Err({e})`"),
        },
    );
    report.check(
        "(c) loss signalled when the holder's connection is killed for good",
        reason.is_some(),
    );
    report.check(
        "(c) the killed holder was told before its lease's validity ended (its key still on the server)",
        before_the_end,
    );
    report.check(
        "(c) the release on a dead connection returns an error",
        release.is_err(),
    );

    // Mid-hold, on a ConnectionManager: it reconnects and the next renewal goes through, so
    // the lease (whose key is still ours) is kept.
    let mut managed = manager(&url).await?;
    let managed_id: i64 = redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut managed)
        .await?;
    let locker = RedisLocker::new(managed.clone()).with_prefix("faults-c")?;
    let mut lease = locker
        .try_acquire("kill-managed", ttl)
        .await?
        .ok_or("kill-managed busy")?;
    lease.spawn_keep_alive(Duration::from_secs(60));
    tokio::time::sleep(Duration::from_millis(50)).await;
    kill(&mut admin, managed_id).await?;
    tokio::time::sleep(ttl * 3).await;
    let stored: Option<String> = redis::cmd("GET")
        .arg(lease.key())
        .query_async(&mut admin)
        .await?;
    let kept = lease.is_held() && stored.as_deref() == Some(lease.token());
    let released = lease.release().await;
    report.figure(
        SCENARIO,
        "mid-hold, `ConnectionManager`: lease after 3 TTLs",
        if kept {
            "kept (renewed after reconnecting)"
        } else {
            "lost"
        },
    );
    report.check(
        "(c) a reconnecting holder keeps a lease whose key is still its own",
        kept && matches!(released, Ok(true)),
    );

    // Mid-acquire: the waiter's connection is killed while it waits; it reconnects and takes
    // the lock once the holder releases it.
    let holder = RedisLocker::new(connect(&url).await).with_prefix("faults-c")?;
    let mut held = holder
        .try_acquire("kill-waiter", Duration::from_secs(10))
        .await?
        .ok_or("kill-waiter busy")?;
    let mut waiter_conn = manager(&url).await?;
    let waiter_id: i64 = redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut waiter_conn)
        .await?;
    let waiter = RedisLocker::new(waiter_conn)
        .with_prefix("faults-c")?
        .with_wake_on_release(redis::Client::open(url.as_str())?);
    let wait = tokio::spawn(async move {
        let lease = waiter
            .acquire_timeout("kill-waiter", ttl, Duration::from_secs(10))
            .await;
        (lease, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    kill(&mut admin, waiter_id).await?;
    // Its pub/sub connection too: the wait falls back to polling.
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut admin)
        .await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released_at = Instant::now();
    held.release().await?;
    let (lease, acquired_at) = wait.await?;
    let acquired = lease.is_ok();
    report.figure(
        SCENARIO,
        "mid-acquire (its connection and its pub/sub connection killed): lock taken after the release",
        match &lease {
            Ok(_) => ms(acquired_at.saturating_duration_since(released_at)),
            Err(e) => format!("`Err({e})`"),
        },
    );
    report.check(
        "(c) a waiter whose connection was killed still acquires the freed lock",
        acquired,
    );
    if let Ok(mut lease) = lease {
        lease.release().await?;
    }
    Ok(())
}

// ------------------------------------------------------------------ (d) advisory

/// `pg_terminate_backend` on the session holding an advisory lock.
async fn advisory_terminate(servers: &Servers, report: &mut Report) -> Result<(), BoxError> {
    const SCENARIO: &str = "(d) `pg_terminate_backend`";
    let max = 3;
    let interval = Duration::from_millis(200);
    let pool = PgPoolOptions::new()
        .max_connections(max)
        .connect(&servers.pg_url)
        .await?;
    let locker = AdvisoryLocker::new(pool.clone()).with_keep_alive(interval);
    locker.migrate().await?;
    let mut lease = locklint_runtime::lock::Lock::try_acquire(
        &locker,
        "faults-advisory",
        Duration::from_secs(10),
    )
    .await?;
    let holder_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *lease.guard().connection().await)
        .await?;
    let lost = locklint_runtime::lock::Lease::lost(&lease);
    let terminated: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(holder_pid)
        .fetch_one(&servers.pool)
        .await?;
    let killed = Instant::now();
    let noticed = tokio::time::timeout(Duration::from_secs(10), lost)
        .await
        .is_ok();
    let lost_after = killed.elapsed();
    let held_after = locklint_runtime::lock::Lease::is_held(&lease);
    let released = locklint_runtime::lock::Lease::unlock(lease).await;
    // Every connection the pool can hand out: none may be the terminated session.
    let mut conns = Vec::new();
    let mut pids = Vec::new();
    for _ in 0..max {
        let mut conn = pool.acquire().await?;
        pids.push(
            sqlx::query_scalar::<_, i32>("SELECT pg_backend_pid()")
                .fetch_one(&mut *conn)
                .await?,
        );
        conns.push(conn);
    }
    drop(conns);
    pool.close().await;
    report.figure(
        SCENARIO,
        "keep-alive interval, `lost()` after the termination",
        format!(
            "{}, {}",
            ms(interval),
            if noticed {
                ms(lost_after)
            } else {
                "never".into()
            }
        ),
    );
    report.figure(
        SCENARIO,
        "release of the lost lock",
        match &released {
            Ok(()) => "Ok(())".to_owned(),
            Err(e) => format!("`Err({e})`"),
        },
    );
    report.figure(
        SCENARIO,
        "terminated session handed out by the pool again",
        if pids.contains(&holder_pid) {
            "yes"
        } else {
            "no"
        },
    );
    report.check(
        "(d) the holder learns its session was terminated",
        terminated && noticed && !held_after,
    );
    report.check(
        "(d) the release of the lost advisory lock is an error",
        released.is_err(),
    );
    report.check(
        "(d) the terminated connection never returns to the pool",
        !pids.contains(&holder_pid),
    );
    Ok(())
}

// ------------------------------------------------------------------ (e) lock table

/// Takeover of a live row (refused) and of an expired row (granted, next fence), and the
/// old owner's release (refused), on PostgreSQL and SQLite.
async fn lock_table(servers: &Servers, report: &mut Report) -> Result<(), BoxError> {
    let pg = TableLock::new(servers.pool.clone());
    table_takeover("PostgreSQL", pg, report).await?;
    let dir = tempfile::tempdir()?;
    let sqlite = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(2)
        .connect_with(
            sqlx::sqlite::SqliteConnectOptions::new()
                .filename(dir.path().join("faults.db"))
                .create_if_missing(true)
                .busy_timeout(Duration::from_secs(10)),
        )
        .await?;
    table_takeover("SQLite", TableLock::new(sqlite.clone()), report).await?;
    sqlite.close().await;
    Ok(())
}

async fn table_takeover(db: &str, locks: TableLock, report: &mut Report) -> Result<(), BoxError> {
    let scenario = format!("(e) lock table, {db}");
    let ttl = Duration::from_millis(300);
    locks.migrate().await?;
    let mut first = locks
        .try_acquire("faults-table", ttl)
        .await?
        .ok_or("table lock busy")?;
    let live_refused = locks.try_acquire("faults-table", ttl).await?.is_none();
    tokio::time::sleep(ttl + Duration::from_millis(50)).await;
    let second = locks.try_acquire("faults-table", ttl).await?;
    let Some(mut second) = second else {
        report.check(format!("{scenario}: an expired row is taken over"), false);
        return Ok(());
    };
    let old_release = first.release().await?;
    let old_renew = first.renew(ttl).await;
    let holder_renew = second.renew(ttl).await;
    let holder_release = second.release().await?;
    report.figure(
        &scenario,
        "takeover of a live row / of an expired row",
        format!(
            "{} / granted, fence {} -> {}",
            if live_refused { "refused" } else { "GRANTED" },
            first.fence(),
            second.fence()
        ),
    );
    report.figure(
        &scenario,
        "old owner's release / renew",
        format!(
            "Ok({old_release}) / {}",
            match &old_renew {
                Ok(()) => "Ok(())".to_owned(),
                Err(e) => format!("`Err({e})`"),
            }
        ),
    );
    report.check(
        format!("{scenario}: a live row is not taken over"),
        live_refused,
    );
    report.check(
        format!("{scenario}: the takeover of an expired row gets a larger fence"),
        second.fence() > first.fence(),
    );
    report.check(
        format!("{scenario}: the old owner's release and renew are refused"),
        !old_release && old_renew.is_err_and(|e| e.is_lost()),
    );
    report.check(
        format!("{scenario}: the new owner is unaffected"),
        holder_renew.is_ok() && holder_release,
    );
    Ok(())
}

// ------------------------------------------------------------------ (f) wake-on-release

/// What one contention run measured.
struct Contended {
    acquisitions: usize,
    took: Duration,
    /// Every acquisition's wait, sorted.
    waits: Vec<Duration>,
    overlaps: usize,
}

impl Contended {
    fn quantile(&self, q: f64) -> Duration {
        let i = ((self.waits.len() as f64 - 1.0) * q).round() as usize;
        self.waits.get(i).copied().unwrap_or_default()
    }
}

/// `workers` tasks take one lock over and over for `size.throughput_for`, holding it about
/// 1 ms each time and working 1 ms outside it between two acquisitions, with the default
/// backoff; with or without wake-on-release.
async fn contend(url: &str, size: Size, wake: bool) -> Result<Contended, BoxError> {
    let client = redis::Client::open(url)?;
    let mut locker = RedisLocker::new(client.get_multiplexed_async_connection().await?)
        .with_prefix(if wake {
            "faults-f-wake"
        } else {
            "faults-f-poll"
        })?;
    if wake {
        locker = locker.with_wake_on_release(client);
    }
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let stop_at = started + size.throughput_for;
    let mut tasks = Vec::new();
    for _ in 0..size.workers {
        let locker = locker.clone();
        let (inside, overlaps) = (Arc::clone(&inside), Arc::clone(&overlaps));
        tasks.push(tokio::spawn(async move {
            let mut waits = Vec::new();
            while Instant::now() < stop_at {
                let asked = Instant::now();
                let mut lease = locker.acquire("hot", Duration::from_secs(10)).await?;
                waits.push(asked.elapsed());
                if inside.fetch_add(1, Ordering::SeqCst) > 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                lease.release().await?;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Ok::<_, BoxError>(waits)
        }));
    }
    let mut waits = Vec::new();
    for task in tasks {
        waits.extend(task.await??);
    }
    let took = started.elapsed();
    waits.sort();
    Ok(Contended {
        acquisitions: waits.len(),
        took,
        waits,
        overlaps: overlaps.load(Ordering::SeqCst),
    })
}

/// Throughput and fairness of 16 contenders, polling only vs woken by release messages.
async fn wake_on_release(
    servers: &Servers,
    size: Size,
    report: &mut Report,
) -> Result<(), BoxError> {
    const SCENARIO: &str = "(f) 16 contenders, 1 ms hold, 1 ms between holds";
    let url = servers.redis.url();
    for (variant, wake) in [("polling only", false), ("wake-on-release", true)] {
        let run = contend(&url, size, wake).await?;
        report.figure(
            SCENARIO,
            &format!("{variant}: acquisitions/s; wait p50 / p99 / max"),
            format!(
                "{:.0}; {} / {} / {}",
                run.acquisitions as f64 / run.took.as_secs_f64(),
                ms(run.quantile(0.5)),
                ms(run.quantile(0.99)),
                ms(run.quantile(1.0))
            ),
        );
        report.check(
            format!("(f) {variant}: no two holders at once"),
            run.overlaps == 0,
        );
        report.check(
            format!("(f) {variant}: every contender acquired"),
            run.acquisitions >= size.workers,
        );
    }
    Ok(())
}
