//! Acquiring leases.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;

use super::backoff::{random_token, Backoff};
use super::lease::{spawn_release, ttl_millis, Lease, LeaseHandle, Shared};
use super::release_mode::ReleaseModes;
use super::scripts::ACQUIRE;
use super::wake::{self, Wakeups, Watch};
use super::{LockConnection, LockError};
use crate::renewal::add_saturating;
use crate::trace::{Op, OpSpan};
use crate::FencingToken;

/// Default key prefix: keys are `locklint:{<name>}:lock` and `locklint:{<name>}:fence`.
///
/// ```no_run
/// # async fn demo(conn: redis::aio::ConnectionManager) {
/// use locklint_runtime::redis_lock::{RedisLocker, DEFAULT_PREFIX};
/// assert_eq!(RedisLocker::new(conn).prefix(), DEFAULT_PREFIX);
/// # }
/// ```
pub const DEFAULT_PREFIX: &str = "locklint";

/// Default maximum total hold time for [`RedisLocker::with_lock`].
///
/// ```no_run
/// # async fn demo(conn: redis::aio::ConnectionManager) {
/// use locklint_runtime::redis_lock::{RedisLocker, DEFAULT_MAX_HOLD};
/// let locker = RedisLocker::new(conn).with_max_hold(DEFAULT_MAX_HOLD * 3); // 30 minutes
/// # let _ = locker; }
/// ```
pub const DEFAULT_MAX_HOLD: Duration = Duration::from_secs(600);

/// Acquires Redis leases over one connection.
///
/// Generic over any async connection that can be cloned cheaply and shared between tasks:
/// [`redis::aio::MultiplexedConnection`], [`redis::aio::ConnectionManager`] and
/// `redis::cluster_async::ClusterConnection` (feature `redis-cluster`) all qualify. Cloning a locker is cheap and
/// clones share the server-version probe.
///
/// Each lock name uses two keys that share the hash tag `{<name>}`, so both land in the same
/// Redis Cluster slot: `<prefix>:{<name>}:lock` holds the current holder's token with a TTL,
/// and `<prefix>:{<name>}:fence` is the fencing counter (no TTL; if it is lost, the next
/// fence starts again from the server's time in microseconds, above every earlier fence).
///
/// ```no_run
/// # async fn demo() -> Result<(), locklint_runtime::redis_lock::LockError> {
/// use std::time::Duration;
/// use locklint_runtime::redis_lock::RedisLocker;
/// let client = redis::Client::open("redis://127.0.0.1:6379")?;
/// let locker = RedisLocker::new(redis::aio::ConnectionManager::new(client).await?);
/// if let Some(mut lease) = locker.try_acquire("report", Duration::from_secs(30)).await? {
///     lease.release().await?;
/// }
/// # Ok(()) }
/// ```
pub struct RedisLocker<C: LockConnection> {
    conn: C,
    prefix: Arc<str>,
    backoff: Backoff,
    max_hold: Duration,
    release_mode: Arc<ReleaseModes>,
    wakeups: Option<Arc<Wakeups>>,
}

impl<C: LockConnection> Clone for RedisLocker<C> {
    fn clone(&self) -> Self {
        RedisLocker {
            conn: self.conn.clone(),
            prefix: Arc::clone(&self.prefix),
            backoff: self.backoff,
            max_hold: self.max_hold,
            release_mode: Arc::clone(&self.release_mode),
            wakeups: self.wakeups.clone(),
        }
    }
}

impl<C: LockConnection> std::fmt::Debug for RedisLocker<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLocker")
            .field("prefix", &self.prefix)
            .field("backoff", &self.backoff)
            .field("max_hold", &self.max_hold)
            .field("wake_on_release", &self.wakeups.is_some())
            .finish_non_exhaustive()
    }
}

fn check_part(part: &str, what: &'static str, allow_empty: bool) -> Result<(), LockError> {
    if !allow_empty && part.is_empty() {
        return Err(LockError::InvalidName {
            name: part.to_owned(),
            why: what,
        });
    }
    if part.contains(['{', '}']) {
        return Err(LockError::InvalidName {
            name: part.to_owned(),
            why: "must not contain `{` or `}` (the name is used as the cluster hash tag)",
        });
    }
    Ok(())
}

/// Outcome of running the protected work in [`RedisLocker::with_lock`].
enum Outcome<T> {
    Done(std::thread::Result<T>),
    Lost(super::LostReason),
}

impl<C: LockConnection> RedisLocker<C> {
    /// A locker with the [`DEFAULT_PREFIX`], the default [`Backoff`] and
    /// [`DEFAULT_MAX_HOLD`].
    ///
    /// ```no_run
    /// # async fn demo() -> redis::RedisResult<()> {
    /// use locklint_runtime::redis_lock::RedisLocker;
    /// let client = redis::Client::open("redis://127.0.0.1:6379")?;
    /// let locker = RedisLocker::new(redis::aio::ConnectionManager::new(client).await?);
    /// assert_eq!(locker.prefix(), "locklint");
    /// # Ok(()) }
    /// ```
    pub fn new(conn: C) -> Self {
        RedisLocker {
            conn,
            prefix: Arc::from(DEFAULT_PREFIX),
            backoff: Backoff::default(),
            max_hold: DEFAULT_MAX_HOLD,
            release_mode: Arc::new(ReleaseModes::default()),
            wakeups: None,
        }
    }

    /// Uses `prefix` instead of [`DEFAULT_PREFIX`]. It may be empty but must not contain
    /// braces, which would change the cluster hash tag.
    ///
    /// ```no_run
    /// # async fn demo(conn: redis::aio::ConnectionManager) -> Result<(), locklint_runtime::redis_lock::LockError> {
    /// use locklint_runtime::redis_lock::RedisLocker;
    /// let locker = RedisLocker::new(conn).with_prefix("billing")?;
    /// assert_eq!(locker.lock_key("invoices"), "billing:{invoices}:lock");
    /// assert!(RedisLocker::new(locker.connection().clone()).with_prefix("a{b}").is_err());
    /// # Ok(()) }
    /// ```
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Result<Self, LockError> {
        let prefix = prefix.into();
        check_part(&prefix, "", true)?;
        self.prefix = Arc::from(prefix);
        Ok(self)
    }

    /// Uses `backoff` between acquisition attempts.
    ///
    /// ```no_run
    /// # fn demo(conn: redis::aio::ConnectionManager) {
    /// use std::time::Duration;
    /// use locklint_runtime::redis_lock::{Backoff, RedisLocker};
    /// let locker = RedisLocker::new(conn).with_backoff(Backoff {
    ///     base: Duration::from_millis(2),
    ///     max: Duration::from_millis(100),
    /// });
    /// # let _ = locker; }
    /// ```
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Sets the maximum total hold time of the keep-alive started by
    /// [`with_lock`](Self::with_lock) and by [`Lease::spawn_keep_alive`](crate::lock::Lease::spawn_keep_alive)
    /// through the [`Lease`](crate::lock::Lease) trait (the inherent
    /// [`Lease::spawn_keep_alive`] takes it as an argument). [`DEFAULT_MAX_HOLD`] unless set.
    ///
    /// ```no_run
    /// # async fn demo(conn: redis::aio::ConnectionManager) {
    /// use std::time::Duration;
    /// use locklint_runtime::redis_lock::RedisLocker;
    /// let locker = RedisLocker::new(conn).with_max_hold(Duration::from_secs(120));
    /// # let _ = locker; }
    /// ```
    pub fn with_max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = max_hold;
        self
    }

    /// Wakes waiting acquisitions ([`acquire`](Self::acquire),
    /// [`acquire_timeout`](Self::acquire_timeout), [`acquire_until`](Self::acquire_until),
    /// [`with_lock`](Self::with_lock)) as soon as the lock they wait for is released, instead
    /// of only at their next backoff attempt.
    ///
    /// Every release publishes on the lock's [`release_channel`](Self::release_channel)
    /// (with or without this option). With it, the locker opens one pub/sub connection from
    /// `client` (shared by its clones, opened at the first wait, reopened after a failure)
    /// and subscribes to the channels of the locks its acquisitions wait for. A waiter sleeps
    /// until the message or its backoff delay, whichever comes first, so a lost message, a
    /// lock that expired instead of being released, or a pub/sub connection that failed only
    /// make it wait as it would without this option. On Redis Cluster, a client for any node
    /// will do (messages are broadcast to every node).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), locklint_runtime::redis_lock::LockError> {
    /// use locklint_runtime::redis_lock::RedisLocker;
    /// let client = redis::Client::open("redis://127.0.0.1:6379")?;
    /// let conn = redis::aio::ConnectionManager::new(client.clone()).await?;
    /// let locker = RedisLocker::new(conn).with_wake_on_release(client);
    /// # let _ = locker; Ok(()) }
    /// ```
    pub fn with_wake_on_release(mut self, client: redis::Client) -> Self {
        self.wakeups = Some(Wakeups::new(client));
        self
    }

    /// The connection this locker uses.
    ///
    /// ```no_run
    /// # async fn demo(locker: locklint_runtime::redis_lock::RedisLocker<redis::aio::ConnectionManager>) -> Result<(), locklint_runtime::redis_lock::LockError> {
    /// let mut conn = locker.connection().clone();
    /// let pong: String = redis::cmd("PING").query_async(&mut conn).await?;
    /// # let _ = pong; Ok(()) }
    /// ```
    pub fn connection(&self) -> &C {
        &self.conn
    }

    /// The key prefix.
    ///
    /// ```no_run
    /// # async fn demo(conn: redis::aio::ConnectionManager) {
    /// use locklint_runtime::redis_lock::RedisLocker;
    /// let locker = RedisLocker::new(conn).with_prefix("billing").unwrap();
    /// assert_eq!(locker.prefix(), "billing");
    /// # }
    /// ```
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn key(&self, name: &str, suffix: &str) -> String {
        if self.prefix.is_empty() {
            format!("{{{name}}}:{suffix}")
        } else {
            format!("{}:{{{name}}}:{suffix}", self.prefix)
        }
    }

    /// The key holding the lock `name`: `<prefix>:{<name>}:lock`.
    ///
    /// ```no_run
    /// # async fn demo(conn: redis::aio::ConnectionManager) {
    /// let locker = locklint_runtime::redis_lock::RedisLocker::new(conn);
    /// assert_eq!(locker.lock_key("invoices"), "locklint:{invoices}:lock");
    /// # }
    /// ```
    pub fn lock_key(&self, name: &str) -> String {
        self.key(name, "lock")
    }

    /// The fencing counter of the lock `name`: `<prefix>:{<name>}:fence`.
    ///
    /// ```no_run
    /// # async fn demo(conn: redis::aio::ConnectionManager) {
    /// let locker = locklint_runtime::redis_lock::RedisLocker::new(conn);
    /// assert_eq!(locker.fence_key("invoices"), "locklint:{invoices}:fence");
    /// # }
    /// ```
    pub fn fence_key(&self, name: &str) -> String {
        self.key(name, "fence")
    }

    /// The channel on which releases of the lock `name` are published:
    /// `<prefix>:{<name>}:released` (see [`with_wake_on_release`](Self::with_wake_on_release)).
    ///
    /// ```no_run
    /// # async fn demo(conn: redis::aio::ConnectionManager) {
    /// let locker = locklint_runtime::redis_lock::RedisLocker::new(conn);
    /// assert_eq!(locker.release_channel("invoices"), "locklint:{invoices}:released");
    /// # }
    /// ```
    pub fn release_channel(&self, name: &str) -> String {
        self.key(name, "released")
    }

    /// One attempt to take the lock `name` for `ttl`.
    ///
    /// A single Lua script runs `SET <lock key> <token> NX PX <ttl>` and, only if that
    /// succeeded, raises the fence key to `max(fence + 1, server time in microseconds)`, so
    /// the fencing token is minted for the winner alone and never goes backwards, even after
    /// Redis lost the counter.
    /// Returns `Ok(None)` when someone else holds the lock. The lease's validity is measured
    /// from the start of this attempt; if the reply arrives after the TTL has already run out,
    /// the key is released again and `Ok(None)` is returned.
    ///
    /// Dropping the returned future midway is safe: if the script may already have run, a
    /// compare-and-delete with the attempt's token is spawned on the current runtime.
    ///
    /// ```no_run
    /// # async fn demo(locker: locklint_runtime::redis_lock::RedisLocker<redis::aio::ConnectionManager>) -> Result<(), locklint_runtime::redis_lock::LockError> {
    /// use std::time::Duration;
    /// match locker.try_acquire("report", Duration::from_secs(30)).await? {
    ///     Some(mut lease) => {
    ///         // ... work, passing lease.fence() to the protected resource ...
    ///         lease.release().await?;
    ///     }
    ///     None => println!("someone else is generating the report"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(
        &self,
        name: &str,
        ttl: Duration,
    ) -> Result<Option<Lease<C>>, LockError> {
        OpSpan::new(Op::Acquire, "redis", name)
            .traced(self.try_acquire_once(name, ttl), |r| match r {
                Ok(Some(lease)) => ("acquired", Some(lease.fence().0)),
                Ok(None) => ("busy", None),
                Err(_) => ("error", None),
            })
            .await
    }

    /// One acquisition attempt, without a span of its own.
    async fn try_acquire_once(
        &self,
        name: &str,
        ttl: Duration,
    ) -> Result<Option<Lease<C>>, LockError> {
        check_part(name, "must not be empty", false)?;
        let ttl_ms = ttl_millis(ttl)?;
        let token = random_token()?;
        let key = self.lock_key(name);
        let mut guard = AttemptGuard {
            armed: true,
            name,
            conn: self.conn.clone(),
            mode: Arc::clone(&self.release_mode),
            key: key.clone(),
            token: token.clone(),
        };
        let start = Instant::now();
        let mut conn = self.conn.clone();
        let mut invocation = ACQUIRE.key(&key);
        invocation.key(self.fence_key(name)).arg(&token).arg(ttl_ms);
        let fence: i64 = match invocation.invoke_async(&mut conn).await {
            Ok(fence) => fence,
            // The script may or may not have run: the still-armed guard cleans up.
            Err(e) => return Err(e.into()),
        };
        guard.armed = false;
        if fence <= 0 {
            return Ok(None);
        }
        let shared = Shared::new(
            name.to_owned(),
            key,
            token,
            FencingToken(fence as u64),
            Duration::from_millis(ttl_ms),
            start,
        );
        let mut lease = Lease::new(
            shared,
            self.conn.clone(),
            Arc::clone(&self.release_mode),
            self.max_hold,
        );
        if !lease.is_held() {
            lease.release().await?;
            return Ok(None);
        }
        Ok(Some(lease))
    }

    /// Takes the lock `name` for `ttl`, retrying with full-jitter exponential backoff until
    /// it is acquired. Transient Redis errors (a dropped or refused connection, a timeout, a
    /// server that is loading or failing over) are retried like a busy lock; other errors are
    /// returned at once. Drop the future to give up.
    ///
    /// ```no_run
    /// # async fn demo(locker: locklint_runtime::redis_lock::RedisLocker<redis::aio::ConnectionManager>) -> Result<(), locklint_runtime::redis_lock::LockError> {
    /// use std::time::Duration;
    /// let mut lease = locker.acquire("report", Duration::from_secs(30)).await?;
    /// lease.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self, name: &str, ttl: Duration) -> Result<Lease<C>, LockError> {
        OpSpan::new(Op::Acquire, "redis", name)
            .traced(self.wait_for(name, ttl, None), acquire_outcome)
            .await
    }

    /// Like [`acquire`](Self::acquire), but gives up with [`LockError::TimedOut`] once
    /// `timeout` has passed since the call.
    ///
    /// ```no_run
    /// # async fn demo(locker: locklint_runtime::redis_lock::RedisLocker<redis::aio::ConnectionManager>) -> Result<(), locklint_runtime::redis_lock::LockError> {
    /// use std::time::Duration;
    /// use locklint_runtime::redis_lock::LockError;
    /// match locker
    ///     .acquire_timeout("report", Duration::from_secs(30), Duration::from_secs(5))
    ///     .await
    /// {
    ///     Ok(mut lease) => {
    ///         lease.release().await?;
    ///     }
    ///     Err(LockError::TimedOut { waited, .. }) => println!("busy for {waited:?}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(
        &self,
        name: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Lease<C>, LockError> {
        self.acquire_until(name, ttl, add_saturating(Instant::now(), timeout))
            .await
    }

    /// Like [`acquire`](Self::acquire), but gives up with [`LockError::TimedOut`] at
    /// `deadline` (or with the last transient error, when the last attempt failed). At least
    /// one attempt is made; the last backoff sleep is shortened so that a final attempt
    /// happens at the deadline.
    ///
    /// ```no_run
    /// # async fn demo(locker: locklint_runtime::redis_lock::RedisLocker<redis::aio::ConnectionManager>) -> Result<(), locklint_runtime::redis_lock::LockError> {
    /// use std::time::{Duration, Instant};
    /// let deadline = Instant::now() + Duration::from_secs(5);
    /// let mut lease = locker.acquire_until("report", Duration::from_secs(30), deadline).await?;
    /// lease.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_until(
        &self,
        name: &str,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Lease<C>, LockError> {
        OpSpan::new(Op::Acquire, "redis", name)
            .traced(self.wait_for(name, ttl, Some(deadline)), acquire_outcome)
            .await
    }

    /// Attempts until the lock is won, a non-transient error occurs, or `deadline` (if any)
    /// passes. Between attempts it sleeps the backoff delay or, with wake-on-release, until
    /// the lock's release is announced if that comes first.
    async fn wait_for(
        &self,
        name: &str,
        ttl: Duration,
        deadline: Option<Instant>,
    ) -> Result<Lease<C>, LockError> {
        let started = Instant::now();
        let mut attempt: u32 = 0;
        let mut watch: Option<Watch> = None;
        loop {
            if let Some(watch) = watch.as_mut() {
                watch.arm().await;
            }
            let failure = match self.try_acquire_once(name, ttl).await {
                Ok(Some(lease)) => return Ok(lease),
                Ok(None) => None,
                Err(e) if e.is_transient() => Some(e),
                Err(e) => return Err(e),
            };
            let now = Instant::now();
            let mut pause = self.backoff.delay(attempt);
            if let Some(deadline) = deadline {
                if now >= deadline {
                    // A deadline reached while the server was failing reports the failure.
                    return Err(failure.unwrap_or_else(|| LockError::TimedOut {
                        name: name.to_owned(),
                        waited: now.saturating_duration_since(started),
                    }));
                }
                pause = pause.min(deadline.saturating_duration_since(now));
            }
            if watch.is_none() {
                if let Some(wakeups) = &self.wakeups {
                    // Subscribe, then try again at once: a release that came before the
                    // subscription is seen by that attempt, every later one by the message.
                    watch = Some(wakeups.watch(self.release_channel(name)));
                    continue;
                }
            }
            wake::pause(watch.as_mut(), pause).await;
            attempt = attempt.saturating_add(1);
        }
    }

    /// Runs `work` while holding the lock `name`.
    ///
    /// Acquires with [`acquire`](Self::acquire) (waiting as long as it takes), starts a
    /// keep-alive bounded by the locker's maximum hold time (see
    /// [`Lease::spawn_keep_alive`]), and runs the future returned by `work`, which receives a
    /// [`LeaseHandle`] (for its fencing token, among others).
    ///
    /// **If the lease is lost while the work runs, the work's future is dropped** (cancelled
    /// at its current `.await`) and `Err(LockError::Lost)` is returned. Work that must not be
    /// interrupted should check [`LeaseHandle::is_held`] itself and rely on the fencing token.
    ///
    /// The lease is released on every exit path: after success, after loss, and after a panic
    /// in `work`, which is then resumed. Loss is reported at once: the release of a lost lease
    /// runs in the background. After the work completes, the release is awaited only while
    /// the lease is still valid; past that it continues in the background (a server that
    /// stopped answering cannot hold the result back). If the caller drops the `with_lock`
    /// future, the lease's drop releases it in the background. A failed release after the work
    /// completed is not reported (the key expires after its TTL).
    ///
    /// ```no_run
    /// # async fn demo(locker: locklint_runtime::redis_lock::RedisLocker<redis::aio::ConnectionManager>) -> Result<(), locklint_runtime::redis_lock::LockError> {
    /// use std::time::Duration;
    /// use locklint_runtime::redis_lock::LockError;
    /// # async fn write_invoices(_fence: u64) -> usize { 0 }
    /// match locker
    ///     .with_lock("invoices", Duration::from_secs(10), |lease| async move {
    ///         write_invoices(lease.fence().0).await
    ///     })
    ///     .await
    /// {
    ///     Ok(count) => println!("wrote {count} invoices"),
    ///     Err(LockError::Lost { reason, .. }) => eprintln!("stopped: {reason}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn with_lock<F, Fut, T>(
        &self,
        name: &str,
        ttl: Duration,
        work: F,
    ) -> Result<T, LockError>
    where
        F: FnOnce(LeaseHandle) -> Fut,
        Fut: Future<Output = T>,
    {
        let mut lease = self.acquire(name, ttl).await?;
        lease.spawn_keep_alive(self.max_hold);
        let handle = lease.handle();
        let lost = lease.lost();
        let outcome = match std::panic::catch_unwind(AssertUnwindSafe(|| work(handle))) {
            Err(panic) => Outcome::Done(Err(panic)),
            Ok(fut) => {
                let fut = AssertUnwindSafe(fut).catch_unwind();
                tokio::pin!(fut);
                tokio::pin!(lost);
                tokio::select! {
                    biased;
                    done = &mut fut => Outcome::Done(done),
                    reason = &mut lost => Outcome::Lost(reason),
                }
            }
        };
        let done = match outcome {
            Outcome::Done(done) => done,
            Outcome::Lost(reason) => {
                // Dropping the lease spawns its compare-and-delete; the caller learns now.
                drop(lease);
                return Err(LockError::Lost {
                    name: name.to_owned(),
                    reason,
                });
            }
        };
        let remaining = lease.remaining();
        // A release cut short keeps its token, and the lease's drop sends it again.
        let _ = tokio::time::timeout(remaining, lease.release()).await;
        drop(lease);
        match done {
            Ok(value) => Ok(value),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

/// Cleans up after an acquisition attempt whose outcome is unknown (error or cancellation).
struct AttemptGuard<'a, C: LockConnection> {
    armed: bool,
    name: &'a str,
    conn: C,
    mode: Arc<ReleaseModes>,
    key: String,
    token: String,
}

impl<C: LockConnection> Drop for AttemptGuard<'_, C> {
    fn drop(&mut self) {
        if self.armed {
            spawn_release(
                self.conn.clone(),
                Arc::clone(&self.mode),
                std::mem::take(&mut self.key),
                std::mem::take(&mut self.token),
                OpSpan::new(Op::Release, "redis", self.name),
            );
        }
    }
}

/// The outcome of a waiting acquisition, for its span.
fn acquire_outcome<C: LockConnection>(
    result: &Result<Lease<C>, LockError>,
) -> (&'static str, Option<u64>) {
    match result {
        Ok(lease) => ("acquired", Some(lease.fence().0)),
        Err(LockError::TimedOut { .. }) => ("timed_out", None),
        Err(_) => ("error", None),
    }
}
