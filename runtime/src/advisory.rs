//! PostgreSQL advisory locks held on a dedicated connection.
//!
//! A *session* advisory lock belongs to the database session (connection) that took it, not
//! to the task that asked. With a connection pool that is a trap: lock on one pooled
//! connection, unlock on another, and the unlock silently fails while the first connection
//! goes back to the pool still holding the lock, to be handed to some unrelated task.
//!
//! [`AdvisoryLock::try_lock`] and [`AdvisoryLock::lock_timeout`] therefore take **one**
//! connection, lock on it and keep it inside the [`AdvisoryGuard`]; [`AdvisoryGuard::unlock`]
//! unlocks on that same connection and only then returns it to the pool. Whenever ownership
//! is uncertain (an error during lock or unlock, the acquiring future dropped mid-call, the
//! guard dropped without `unlock`), the connection is **detached from the pool and closed**;
//! ending the session makes the server release every lock it held. A connection holding an
//! advisory lock is never returned to the pool.
//!
//! The transaction-scoped variants ([`AdvisoryLock::try_lock_xact`],
//! [`AdvisoryLock::lock_xact`]) take `pg_try_advisory_xact_lock`/`pg_advisory_xact_lock`
//! inside a [`Transaction`]; the server releases them at commit or rollback, so they cannot
//! leak.
//!
//! # Keys
//!
//! Advisory locks are identified by a 64-bit integer. [`AdvisoryKey::from_name`] derives it
//! from a name as the **first 8 bytes of the SHA-256 digest of the UTF-8 name, read as a
//! big-endian two's-complement `i64`**. The mapping is fixed (it is part of this crate's
//! stable interface and identical on every platform) and can be reproduced in SQL:
//!
//! ```sql
//! SELECT ('x' || left(encode(sha256(convert_to('my-lock', 'UTF8')), 'hex'), 16))::bit(64)::bigint;
//! ```
//!
//! Session locks need a real session: behind a transaction-pooling proxy (PgBouncer in
//! `pool_mode = transaction`) consecutive statements may run on different server sessions,
//! so use the transaction-scoped variants there, or connect to the server directly.
//!
//! # What an advisory lock does not do
//!
//! It is held exactly as long as the session lives. If the session dies (network partition,
//! `pg_terminate_backend`, server restart, failover), the lock is gone while the client may
//! still believe it holds it; and a client paused after acquiring keeps running. Use it for
//! efficiency, and protect correctness-critical writes with a fence
//! ([`crate::fence`]) or a unique key ([`crate::idempotency`]).

use std::sync::Arc;
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::postgres::PgConnection;
use sqlx::{Connection, Executor, PgPool, Postgres, Transaction};
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::fence::FenceCounter;
use crate::lock::LeaseError;
use crate::trace::{Op, OpSpan};
use crate::FencingToken;

/// A 64-bit advisory lock key.
///
/// ```
/// use locklint_runtime::advisory::AdvisoryKey;
/// assert_eq!(AdvisoryKey::from(42).value(), 42);
/// assert_eq!(AdvisoryKey::from("nightly"), AdvisoryKey::from_name("nightly"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AdvisoryKey(pub i64);

impl AdvisoryKey {
    /// The key for `name`: the first 8 bytes of SHA-256(`name` as UTF-8), big-endian, as an
    /// `i64`. Stable across versions and platforms (see the [module docs](self)).
    ///
    /// ```
    /// use locklint_runtime::advisory::AdvisoryKey;
    /// // SHA-256("abc") begins ba 78 16 bf 8f 01 cf ea
    /// assert_eq!(AdvisoryKey::from_name("abc").value(), 0xba78_16bf_8f01_cfea_u64 as i64);
    /// ```
    pub fn from_name(name: &str) -> Self {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(name.as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        AdvisoryKey(i64::from_be_bytes(first))
    }

    /// The key sqlx's [`PgAdvisoryLock::new`](sqlx::postgres::PgAdvisoryLock::new) derives
    /// for `name` (an HKDF-SHA-256 of the name, little-endian), so a service moving between
    /// sqlx's advisory locks and this crate's excludes its other version during the move.
    ///
    /// It differs from [`Self::from_name`]: the same name gives two different keys, and
    /// a holder using one does not exclude a holder using the other.
    ///
    /// ```
    /// use locklint_runtime::advisory::AdvisoryKey;
    /// let key = AdvisoryKey::sqlx_compatible("nightly-report");
    /// assert_ne!(key, AdvisoryKey::from_name("nightly-report"));
    /// ```
    pub fn sqlx_compatible(name: &str) -> Self {
        let lock = sqlx::postgres::PgAdvisoryLock::new(name);
        AdvisoryKey(
            lock.key()
                .as_bigint()
                .expect("sqlx's PgAdvisoryLock::new derives a key in the 64-bit keyspace"),
        )
    }

    /// The raw key.
    ///
    /// ```
    /// assert_eq!(locklint_runtime::advisory::AdvisoryKey(7).value(), 7);
    /// ```
    pub fn value(self) -> i64 {
        self.0
    }
}

impl From<i64> for AdvisoryKey {
    fn from(key: i64) -> Self {
        AdvisoryKey(key)
    }
}

impl From<&str> for AdvisoryKey {
    fn from(name: &str) -> Self {
        AdvisoryKey::from_name(name)
    }
}

impl From<&String> for AdvisoryKey {
    fn from(name: &String) -> Self {
        AdvisoryKey::from_name(name)
    }
}

impl std::fmt::Display for AdvisoryKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Errors of the session advisory lock operations.
///
/// ```no_run
/// # async fn demo(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
/// use locklint_runtime::advisory::{AdvisoryError, AdvisoryLock};
/// let guard = AdvisoryLock::try_lock(pool, "job").await.map_err(|e| match e {
///     AdvisoryError::Database(e) => e,
///     other => panic!("{other}"),
/// })?;
/// # drop(guard); Ok(()) }
/// ```
#[derive(Debug, thiserror::Error)]
pub enum AdvisoryError {
    /// The database reported an error. The connection involved has been closed, so any lock
    /// it might have held is released by the server.
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// `pg_advisory_unlock` reported that the guard's session did not hold the lock (it was
    /// released behind the guard's back, e.g. with `pg_advisory_unlock_all()` through
    /// [`AdvisoryGuard::connection`]). The connection has been closed.
    #[error("advisory lock {key} was not held by the guard's session")]
    NotHeld {
        /// The key of the lock.
        key: AdvisoryKey,
    },
}

/// Where the dedicated connection for a session lock comes from.
///
/// ```no_run
/// # async fn demo(pool: sqlx::PgPool) -> Result<(), locklint_runtime::advisory::AdvisoryError> {
/// use locklint_runtime::advisory::AdvisoryLock;
/// // From the pool, or on a connection already taken from it.
/// let a = AdvisoryLock::try_lock(&pool, "a").await?;
/// let conn = pool.acquire().await?;
/// let b = AdvisoryLock::try_lock(conn, "b").await?;
/// # drop((a, b)); Ok(()) }
/// ```
#[derive(Debug)]
pub enum LockSource {
    /// Acquire one connection from this pool.
    Pool(PgPool),
    /// Use this pooled connection.
    Pooled(PoolConnection<Postgres>),
    /// Use this standalone connection.
    Standalone(PgConnection),
}

impl From<&PgPool> for LockSource {
    fn from(pool: &PgPool) -> Self {
        LockSource::Pool(pool.clone())
    }
}

impl From<PgPool> for LockSource {
    fn from(pool: PgPool) -> Self {
        LockSource::Pool(pool)
    }
}

impl From<PoolConnection<Postgres>> for LockSource {
    fn from(conn: PoolConnection<Postgres>) -> Self {
        LockSource::Pooled(conn)
    }
}

impl From<PgConnection> for LockSource {
    fn from(conn: PgConnection) -> Self {
        LockSource::Standalone(conn)
    }
}

enum Slot {
    Pooled(PoolConnection<Postgres>),
    Standalone(PgConnection),
}

/// A connection that is closed (never returned to a pool) when dropped, unless released with
/// [`Dedicated::release_clean`] after its state is known.
struct Dedicated {
    slot: Option<Slot>,
}

impl Dedicated {
    async fn open(source: LockSource) -> Result<Self, sqlx::Error> {
        let slot = match source {
            LockSource::Pool(pool) => Slot::Pooled(pool.acquire().await?),
            LockSource::Pooled(conn) => Slot::Pooled(conn),
            LockSource::Standalone(conn) => Slot::Standalone(conn),
        };
        Ok(Dedicated { slot: Some(slot) })
    }

    fn conn(&mut self) -> &mut PgConnection {
        match self
            .slot
            .as_mut()
            .expect("connection present until release")
        {
            Slot::Pooled(c) => c,
            Slot::Standalone(c) => c,
        }
    }

    /// The connection holds no lock of ours: a pooled connection goes back to its pool, a
    /// standalone one is closed.
    fn release_clean(mut self) {
        match self.slot.take() {
            Some(Slot::Pooled(conn)) => drop(conn),
            Some(Slot::Standalone(conn)) => close_in_background(conn),
            None => {}
        }
    }
}

impl Drop for Dedicated {
    fn drop(&mut self) {
        match self.slot.take() {
            Some(Slot::Pooled(conn)) => close_in_background(conn.detach()),
            Some(Slot::Standalone(conn)) => close_in_background(conn),
            None => {}
        }
    }
}

/// Ends the session: gracefully if a Tokio runtime is available, otherwise by dropping the
/// socket. Either way the server ends the session and releases its locks.
fn close_in_background(conn: PgConnection) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn(async move {
                let _ = conn.close().await;
            });
        }
        Err(_) => drop(conn),
    }
}

fn is_lock_not_available(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("55P03"))
}

fn is_invalid_parameter_value(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("22023"))
}

/// Entry points for PostgreSQL advisory locks; see the [module docs](self).
///
/// ```no_run
/// # async fn demo(pool: &sqlx::PgPool) -> Result<(), locklint_runtime::advisory::AdvisoryError> {
/// use locklint_runtime::advisory::AdvisoryLock;
///
/// if let Some(guard) = AdvisoryLock::try_lock(pool, "nightly-report").await? {
///     // ... work; the lock lives on guard's own connection ...
///     guard.unlock().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct AdvisoryLock;

impl AdvisoryLock {
    /// Takes the session lock `key` with `pg_try_advisory_lock` on a dedicated connection
    /// from `source` without waiting. `None` if another session holds it; the connection then
    /// goes back to its pool (or, if standalone, is closed).
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), locklint_runtime::advisory::AdvisoryError> {
    /// use locklint_runtime::advisory::AdvisoryLock;
    /// match AdvisoryLock::try_lock(pool, "nightly-report").await? {
    ///     Some(guard) => guard.unlock().await?,
    ///     None => println!("another session is running it"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(
        source: impl Into<LockSource>,
        key: impl Into<AdvisoryKey>,
    ) -> Result<Option<AdvisoryGuard>, AdvisoryError> {
        let key = key.into();
        OpSpan::new(Op::Acquire, "advisory", &key.to_string())
            .traced(Self::try_lock_once(source.into(), key), |r| {
                guard_outcome(r, "busy")
            })
            .await
    }

    async fn try_lock_once(
        source: LockSource,
        key: AdvisoryKey,
    ) -> Result<Option<AdvisoryGuard>, AdvisoryError> {
        let mut conn = Dedicated::open(source).await?;
        let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(key.0)
            .fetch_one(conn.conn())
            .await?;
        if locked {
            Ok(Some(AdvisoryGuard::new(conn, key)))
        } else {
            conn.release_clean();
            Ok(None)
        }
    }

    /// Waits up to `timeout` for the session lock `key` on a dedicated connection from
    /// `source`; `None` when the time is up.
    ///
    /// The wait happens in the server (`pg_advisory_lock` under a session `lock_timeout`,
    /// restored afterwards), so the server stops waiting by itself at the deadline even if
    /// this future is dropped. On PostgreSQL 14+ `client_connection_check_interval` is also
    /// set to 1 s during the wait, so a server-side wait whose client went away ends early.
    /// If the future is dropped mid-wait the connection is closed, never pooled.
    /// A zero `timeout` behaves like [`Self::try_lock`]; timeouts beyond `i32::MAX`
    /// milliseconds (PostgreSQL's limit for `lock_timeout`) are capped.
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), locklint_runtime::advisory::AdvisoryError> {
    /// use std::time::Duration;
    /// use locklint_runtime::advisory::AdvisoryLock;
    /// if let Some(guard) = AdvisoryLock::lock_timeout(pool, "rebuild", Duration::from_secs(5)).await? {
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn lock_timeout(
        source: impl Into<LockSource>,
        key: impl Into<AdvisoryKey>,
        timeout: Duration,
    ) -> Result<Option<AdvisoryGuard>, AdvisoryError> {
        let key = key.into();
        OpSpan::new(Op::Acquire, "advisory", &key.to_string())
            .traced(Self::lock_timeout_once(source.into(), key, timeout), |r| {
                guard_outcome(r, "timed_out")
            })
            .await
    }

    async fn lock_timeout_once(
        source: LockSource,
        key: AdvisoryKey,
        timeout: Duration,
    ) -> Result<Option<AdvisoryGuard>, AdvisoryError> {
        // lock_timeout is an int of milliseconds; longer waits are capped at ~24.8 days.
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128);
        if ms == 0 {
            return Self::try_lock_once(source, key).await;
        }
        let mut conn = Dedicated::open(source).await?;
        let mut check_interval = conn.conn().server_version_num().unwrap_or(0) >= 140_000;
        let wait = format!("{ms}ms");
        if check_interval {
            let set = sqlx::query(
                "SELECT set_config('lock_timeout', $1, false), \
                        set_config('client_connection_check_interval', '1000', false)",
            )
            .bind(&wait)
            .execute(conn.conn())
            .await;
            match set {
                Ok(_) => {}
                // Platforms without the check (Windows) reject any value but 0.
                Err(e) if is_invalid_parameter_value(&e) => check_interval = false,
                Err(e) => return Err(e.into()),
            }
        }
        if !check_interval {
            sqlx::query("SELECT set_config('lock_timeout', $1, false)")
                .bind(&wait)
                .execute(conn.conn())
                .await?;
        }
        let locked = match sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(key.0)
            .execute(conn.conn())
            .await
        {
            Ok(_) => true,
            Err(e) if is_lock_not_available(&e) => false,
            Err(e) => return Err(e.into()),
        };
        let reset = if check_interval {
            "RESET lock_timeout; RESET client_connection_check_interval"
        } else {
            "RESET lock_timeout"
        };
        conn.conn().execute(sqlx::raw_sql(reset)).await?;
        if locked {
            Ok(Some(AdvisoryGuard::new(conn, key)))
        } else {
            conn.release_clean();
            Ok(None)
        }
    }

    /// Takes the transaction-scoped lock `key` with `pg_try_advisory_xact_lock`; `false` if
    /// another session holds it. The server releases it when `tx` commits or rolls back
    /// (including when the `Transaction` is dropped), and there is no unlock call.
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
    /// use locklint_runtime::advisory::AdvisoryLock;
    /// let mut tx = pool.begin().await?;
    /// if AdvisoryLock::try_lock_xact(&mut tx, "rebuild-index").await? {
    ///     // ... work in tx ...
    /// }
    /// tx.commit().await // releases the lock
    /// # }
    /// ```
    pub async fn try_lock_xact(
        tx: &mut Transaction<'_, Postgres>,
        key: impl Into<AdvisoryKey>,
    ) -> Result<bool, sqlx::Error> {
        let key = key.into();
        let attempt = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
            .bind(key.0)
            .fetch_one(&mut **tx);
        OpSpan::new(Op::Acquire, "advisory", &key.to_string())
            .traced(attempt, |r| match r {
                Ok(true) => ("acquired", None),
                Ok(false) => ("busy", None),
                Err(_) => ("error", None),
            })
            .await
    }

    /// Waits for the transaction-scoped lock `key` with `pg_advisory_xact_lock`, bounded only
    /// by the session's `lock_timeout`/`statement_timeout` (set them with `SET LOCAL` in `tx`
    /// to bound the wait). Released at commit or rollback.
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
    /// use locklint_runtime::advisory::AdvisoryLock;
    /// let mut tx = pool.begin().await?;
    /// sqlx::query("SET LOCAL lock_timeout = '5s'").execute(&mut *tx).await?;
    /// AdvisoryLock::lock_xact(&mut tx, "rebuild-index").await?;
    /// // ... work in tx ...
    /// tx.commit().await
    /// # }
    /// ```
    pub async fn lock_xact(
        tx: &mut Transaction<'_, Postgres>,
        key: impl Into<AdvisoryKey>,
    ) -> Result<(), sqlx::Error> {
        let key = key.into();
        let wait = sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(key.0)
            .execute(&mut **tx);
        OpSpan::new(Op::Acquire, "advisory", &key.to_string())
            .traced(wait, |r| match r {
                Ok(_) => ("acquired", None),
                Err(e) if is_lock_not_available(e) => ("timed_out", None),
                Err(_) => ("error", None),
            })
            .await
            .map(|_| ())
    }
}

/// A held session advisory lock and the one connection (session) that holds it.
///
/// Release it with [`AdvisoryGuard::unlock`]. Dropping the guard instead closes the
/// connection (the server then releases the lock); it is never returned to the pool.
///
/// [`AdvisoryGuard::spawn_keep_alive`] watches the session: a query on the guard's own
/// connection every interval checks that the session is alive and still holds the lock, and
/// the first failure (the backend terminated, the connection dropped, the lock released
/// behind the guard's back) ends the guard: [`AdvisoryGuard::lost`] resolves,
/// [`AdvisoryGuard::is_held`] turns false and the
/// [`cancellation_token`](AdvisoryGuard::cancellation_token) is cancelled.
///
/// ```no_run
/// # async fn demo(pool: &sqlx::PgPool) -> Result<(), locklint_runtime::advisory::AdvisoryError> {
/// use std::time::Duration;
/// use locklint_runtime::advisory::AdvisoryLock;
///
/// if let Some(mut guard) = AdvisoryLock::try_lock(pool, "nightly-report").await? {
///     guard.spawn_keep_alive(Duration::from_secs(1));
///     tokio::select! {
///         _ = async { /* work */ } => {}
///         _ = guard.lost() => eprintln!("the session holding the lock died"),
///     }
///     guard.unlock().await?; // fails (and closes the connection) if the session died
/// }
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard closes its connection and releases the lock"]
pub struct AdvisoryGuard {
    conn: Arc<Mutex<Dedicated>>,
    key: AdvisoryKey,
    /// The lock's name in tracing spans: the name it was taken by, or the key.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    label: String,
    fence: Option<FencingToken>,
    ended: CancellationToken,
    /// Asks the keep-alive to stop between two queries.
    stop: CancellationToken,
    keep_alive: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for AdvisoryGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdvisoryGuard")
            .field("key", &self.key)
            .field("fence", &self.fence)
            .field("held", &self.is_held())
            .finish_non_exhaustive()
    }
}

/// Whether the session of `conn` still holds the advisory lock `key` (a 64-bit key is
/// shown in `pg_locks` as `classid` = high half, `objid` = low half, `objsubid` = 1).
async fn holds(conn: &mut PgConnection, key: AdvisoryKey) -> Result<bool, sqlx::Error> {
    let high = i64::from((key.0 >> 32) as u32);
    let low = i64::from(key.0 as u32);
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' \
         AND pid = pg_backend_pid() AND granted AND objsubid = 1 \
         AND classid::bigint = $1 AND objid::bigint = $2)",
    )
    .bind(high)
    .bind(low)
    .fetch_one(conn)
    .await
}

async fn keep_alive(
    conn: Arc<Mutex<Dedicated>>,
    key: AdvisoryKey,
    interval: Duration,
    ended: CancellationToken,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            _ = ended.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        let held = {
            let mut conn = conn.lock().await;
            if stop.is_cancelled() {
                return;
            }
            holds(conn.conn(), key).await
        };
        if !matches!(held, Ok(true)) {
            // The session is gone (its locks with it) or no longer holds this lock.
            ended.cancel();
            return;
        }
    }
}

impl AdvisoryGuard {
    fn new(conn: Dedicated, key: AdvisoryKey) -> Self {
        AdvisoryGuard {
            conn: Arc::new(Mutex::new(conn)),
            key,
            label: key.to_string(),
            fence: None,
            ended: CancellationToken::new(),
            stop: CancellationToken::new(),
            keep_alive: None,
        }
    }

    /// The key of the held lock.
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), locklint_runtime::advisory::AdvisoryError> {
    /// use locklint_runtime::advisory::{AdvisoryKey, AdvisoryLock};
    /// let guard = AdvisoryLock::try_lock(pool, AdvisoryKey(42)).await?.expect("free");
    /// assert_eq!(guard.key(), AdvisoryKey(42));
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> AdvisoryKey {
        self.key
    }

    /// The fencing token drawn for this lock, when it was taken through an
    /// [`AdvisoryLocker`] (which draws one from its [`FenceCounter`]); `None` for the
    /// [`AdvisoryLock`] entry points, which draw none.
    ///
    /// ```no_run
    /// # async fn demo(pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use locklint_runtime::advisory::AdvisoryLocker;
    /// let locks = AdvisoryLocker::new(pool);
    /// let guard = locks.try_lock("job").await?.expect("free");
    /// assert!(guard.fence().is_some());
    /// # Ok(()) }
    /// ```
    pub fn fence(&self) -> Option<FencingToken> {
        self.fence
    }

    /// The session holding the lock, e.g. to run work on it. Do not release the lock through
    /// it (`pg_advisory_unlock*`, `DISCARD ALL`); [`Self::unlock`] would then report
    /// [`AdvisoryError::NotHeld`]. While the returned guard is alive the keep-alive waits.
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), locklint_runtime::advisory::AdvisoryError> {
    /// use locklint_runtime::advisory::AdvisoryLock;
    /// let mut guard = AdvisoryLock::try_lock(pool, "job").await?.expect("free");
    /// let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
    ///     .fetch_one(&mut *guard.connection().await)
    ///     .await?;
    /// # let _ = pid; Ok(()) }
    /// ```
    pub async fn connection(&mut self) -> MappedMutexGuard<'_, PgConnection> {
        MutexGuard::map(self.conn.lock().await, |d| d.conn())
    }

    /// Starts watching the session: every `interval`, a query on the guard's connection
    /// checks that the session is alive and still holds the lock; the first failure marks
    /// the guard lost (see [`Self::lost`]). A terminated backend is noticed within one
    /// interval. Calling it again replaces the previous watch. Must be called within a
    /// tokio runtime.
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), locklint_runtime::advisory::AdvisoryError> {
    /// use std::time::Duration;
    /// use locklint_runtime::advisory::AdvisoryLock;
    /// let mut guard = AdvisoryLock::try_lock(pool, "job").await?.expect("free");
    /// guard.spawn_keep_alive(Duration::from_secs(1));
    /// # Ok(()) }
    /// ```
    pub fn spawn_keep_alive(&mut self, interval: Duration) {
        self.stop_keep_alive_now();
        self.stop = CancellationToken::new();
        self.keep_alive = Some(tokio::spawn(keep_alive(
            Arc::clone(&self.conn),
            self.key,
            interval.max(Duration::from_millis(1)),
            self.ended.clone(),
            self.stop.clone(),
        )));
    }

    fn stop_keep_alive_now(&mut self) {
        self.stop.cancel();
        if let Some(task) = self.keep_alive.take() {
            task.abort();
        }
    }

    /// Whether the guard still holds the lock as far as it knows: false once the keep-alive
    /// found the session dead or the lock gone. Without a keep-alive it stays true until
    /// [`Self::unlock`].
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), locklint_runtime::advisory::AdvisoryError> {
    /// # use locklint_runtime::advisory::AdvisoryLock;
    /// let guard = AdvisoryLock::try_lock(pool, "job").await?.expect("free");
    /// assert!(guard.is_held());
    /// # Ok(()) }
    /// ```
    pub fn is_held(&self) -> bool {
        !self.ended.is_cancelled()
    }

    /// A future that resolves once the keep-alive finds the session dead or the lock gone.
    /// It owns what it needs, so it can be awaited in a `select!` next to the work.
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), locklint_runtime::advisory::AdvisoryError> {
    /// # use std::time::Duration;
    /// # use locklint_runtime::advisory::AdvisoryLock;
    /// let mut guard = AdvisoryLock::try_lock(pool, "job").await?.expect("free");
    /// guard.spawn_keep_alive(Duration::from_secs(1));
    /// let lost = guard.lost();
    /// tokio::select! { _ = lost => {}, _ = tokio::time::sleep(Duration::from_secs(5)) => {} }
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let ended = self.ended.clone();
        async move { ended.cancelled().await }
    }

    /// A token cancelled as soon as the guard is known to have lost the lock.
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), locklint_runtime::advisory::AdvisoryError> {
    /// # use locklint_runtime::advisory::AdvisoryLock;
    /// let guard = AdvisoryLock::try_lock(pool, "job").await?.expect("free");
    /// let token = guard.cancellation_token();
    /// assert!(!token.is_cancelled());
    /// # Ok(()) }
    /// ```
    pub fn cancellation_token(&self) -> CancellationToken {
        self.ended.clone()
    }

    /// Takes the connection back from the keep-alive, waiting for a query in flight.
    async fn take_connection(&mut self) -> Option<Dedicated> {
        self.stop.cancel();
        if let Some(task) = self.keep_alive.take() {
            let _ = task.await;
        }
        let conn = std::mem::replace(
            &mut self.conn,
            Arc::new(Mutex::new(Dedicated { slot: None })),
        );
        Arc::try_unwrap(conn).ok().map(Mutex::into_inner)
    }

    /// Releases the lock with `pg_advisory_unlock` on the same connection that took it. On
    /// success a pooled connection returns to its pool and a standalone one is closed. On any
    /// failure the connection is closed, which releases the lock server-side.
    ///
    /// A connection whose session still holds any advisory lock afterwards (one taken through
    /// [`Self::connection`], or this key taken a second time, which PostgreSQL counts) is
    /// closed instead of pooled, so no lock ever reaches another user of the pool.
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), locklint_runtime::advisory::AdvisoryError> {
    /// # use locklint_runtime::advisory::AdvisoryLock;
    /// let guard = AdvisoryLock::try_lock(pool, "job").await?.expect("free");
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn unlock(mut self) -> Result<(), AdvisoryError> {
        let span = OpSpan::new(Op::Release, "advisory", &self.label);
        if let Some(fence) = self.fence {
            span.fence(fence.0);
        }
        let result = span.run(self.unlock_untraced()).await;
        span.outcome(match &result {
            Ok(()) => "released",
            Err(AdvisoryError::NotHeld { .. }) => "lost",
            Err(AdvisoryError::Database(_)) => "error",
        });
        result
    }

    async fn unlock_untraced(&mut self) -> Result<(), AdvisoryError> {
        let Some(mut conn) = self.take_connection().await else {
            return Err(AdvisoryError::NotHeld { key: self.key });
        };
        self.ended.cancel();
        let unlocked: bool = sqlx::query_scalar("SELECT pg_advisory_unlock($1)")
            .bind(self.key.0)
            .fetch_one(conn.conn())
            .await?;
        if unlocked {
            let still_holding: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM pg_locks \
                 WHERE locktype = 'advisory' AND pid = pg_backend_pid())",
            )
            .fetch_one(conn.conn())
            .await?;
            if !still_holding {
                conn.release_clean();
            }
            // Otherwise dropping the connection closes the session, which releases the rest.
            Ok(())
        } else {
            Err(AdvisoryError::NotHeld { key: self.key })
        }
    }
}

impl Drop for AdvisoryGuard {
    fn drop(&mut self) {
        // The keep-alive's clone of the connection goes with the task; the last clone closes
        // the connection.
        self.stop_keep_alive_now();
        self.ended.cancel();
    }
}

/// Advisory locks by name with fencing tokens and a session watch: the
/// [`Lock`](crate::lock::Lock) implementation for PostgreSQL advisory locks.
///
/// Each acquisition takes a session lock on a dedicated connection from the pool (the key
/// is [`AdvisoryKey::from_name`]), draws a fencing token from a [`FenceCounter`] on that
/// connection, and starts the keep-alive ([`AdvisoryGuard::spawn_keep_alive`]) with the
/// locker's interval (1 s by default). The TTL of the [`Lock`](crate::lock::Lock) methods is
/// ignored: an advisory lock lasts as long as its session.
///
/// ```no_run
/// # async fn demo(pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use locklint_runtime::advisory::AdvisoryLocker;
///
/// let locks = AdvisoryLocker::new(pool).with_keep_alive(Duration::from_millis(500));
/// locks.migrate().await?; // the fence counter table
/// if let Some(guard) = locks.try_lock("nightly-report").await? {
///     let fence = guard.fence().expect("drawn by the locker");
///     // ... fenced writes with `fence` ...
///     guard.unlock().await?;
/// #   let _ = fence;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct AdvisoryLocker {
    pool: PgPool,
    fences: FenceCounter,
    keep_alive: Duration,
}

impl AdvisoryLocker {
    /// A locker on `pool` with the default [`FenceCounter`] table and a 1 s keep-alive.
    ///
    /// ```no_run
    /// # fn demo(pool: sqlx::PgPool) {
    /// let locks = locklint_runtime::advisory::AdvisoryLocker::new(pool);
    /// # let _ = locks; }
    /// ```
    pub fn new(pool: PgPool) -> Self {
        AdvisoryLocker {
            pool,
            fences: FenceCounter::default(),
            keep_alive: Duration::from_secs(1),
        }
    }

    /// Draws fences from `fences` instead of the default counter table.
    ///
    /// ```no_run
    /// # fn demo(pool: sqlx::PgPool) -> Result<(), locklint_runtime::ident::InvalidIdentifier> {
    /// use locklint_runtime::advisory::AdvisoryLocker;
    /// use locklint_runtime::fence::FenceCounter;
    /// let locks = AdvisoryLocker::new(pool).with_fences(FenceCounter::with_table("app.fences")?);
    /// # let _ = locks; Ok(()) }
    /// ```
    pub fn with_fences(mut self, fences: FenceCounter) -> Self {
        self.fences = fences;
        self
    }

    /// Checks each held session every `interval` (see [`AdvisoryGuard::spawn_keep_alive`]).
    ///
    /// ```no_run
    /// # fn demo(pool: sqlx::PgPool) {
    /// # use std::time::Duration;
    /// let locks = locklint_runtime::advisory::AdvisoryLocker::new(pool)
    ///     .with_keep_alive(Duration::from_millis(250));
    /// # let _ = locks; }
    /// ```
    pub fn with_keep_alive(mut self, interval: Duration) -> Self {
        self.keep_alive = interval;
        self
    }

    /// Creates the fence counter table if it does not exist.
    ///
    /// ```no_run
    /// # async fn demo(pool: sqlx::PgPool) -> Result<(), sqlx::Error> {
    /// locklint_runtime::advisory::AdvisoryLocker::new(pool).migrate().await?;
    /// # Ok(()) }
    /// ```
    pub async fn migrate(&self) -> Result<(), sqlx::Error> {
        self.fences.migrate(&self.pool).await
    }

    async fn finish(
        &self,
        name: &str,
        guard: Option<AdvisoryGuard>,
    ) -> Result<Option<AdvisoryGuard>, AdvisoryError> {
        let Some(mut guard) = guard else {
            return Ok(None);
        };
        guard.label = name.to_owned();
        let fence = self
            .fences
            .next(&mut *guard.connection().await, name)
            .await?;
        guard.fence = Some(fence);
        guard.spawn_keep_alive(self.keep_alive);
        Ok(Some(guard))
    }

    /// Takes the lock `name` without waiting, with a fence and a keep-alive; `None` if
    /// another session holds it.
    ///
    /// ```no_run
    /// # async fn demo(pool: sqlx::PgPool) -> Result<(), locklint_runtime::advisory::AdvisoryError> {
    /// let locks = locklint_runtime::advisory::AdvisoryLocker::new(pool);
    /// if let Some(guard) = locks.try_lock("job").await? {
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self, name: &str) -> Result<Option<AdvisoryGuard>, AdvisoryError> {
        let attempt = async {
            let guard = AdvisoryLock::try_lock_once((&self.pool).into(), name.into()).await?;
            self.finish(name, guard).await
        };
        OpSpan::new(Op::Acquire, "advisory", name)
            .traced(attempt, |r| guard_outcome(r, "busy"))
            .await
    }

    /// Waits up to `timeout` for the lock `name` (see [`AdvisoryLock::lock_timeout`]), with
    /// a fence and a keep-alive; `None` when the time is up.
    ///
    /// ```no_run
    /// # async fn demo(pool: sqlx::PgPool) -> Result<(), locklint_runtime::advisory::AdvisoryError> {
    /// # use std::time::Duration;
    /// let locks = locklint_runtime::advisory::AdvisoryLocker::new(pool);
    /// let guard = locks.lock_timeout("job", Duration::from_secs(5)).await?;
    /// # let _ = guard; Ok(()) }
    /// ```
    pub async fn lock_timeout(
        &self,
        name: &str,
        timeout: Duration,
    ) -> Result<Option<AdvisoryGuard>, AdvisoryError> {
        let wait = async {
            let guard =
                AdvisoryLock::lock_timeout_once((&self.pool).into(), name.into(), timeout).await?;
            self.finish(name, guard).await
        };
        OpSpan::new(Op::Acquire, "advisory", name)
            .traced(wait, |r| guard_outcome(r, "timed_out"))
            .await
    }
}

impl From<AdvisoryError> for LeaseError {
    fn from(e: AdvisoryError) -> Self {
        LeaseError::Backend(Box::new(e))
    }
}

/// An [`AdvisoryGuard`] held through the [`Lock`](crate::lock::Lock) trait: it has a fence
/// and a keep-alive.
///
/// ```no_run
/// # async fn demo(pool: sqlx::PgPool) -> Result<(), locklint_runtime::lock::LeaseError> {
/// use std::time::Duration;
/// use locklint_runtime::advisory::AdvisoryLocker;
/// use locklint_runtime::lock::{Lease, Lock};
/// let locks = AdvisoryLocker::new(pool);
/// let lease = locks.try_acquire("job", Duration::from_secs(30)).await?;
/// lease.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct AdvisoryLease {
    guard: AdvisoryGuard,
    name: String,
    fence: FencingToken,
    interval: Duration,
}

impl AdvisoryLease {
    /// The guard, e.g. for its connection.
    ///
    /// ```no_run
    /// # async fn demo(pool: sqlx::PgPool) -> Result<(), locklint_runtime::lock::LeaseError> {
    /// # use std::time::Duration;
    /// # use locklint_runtime::advisory::AdvisoryLocker;
    /// # use locklint_runtime::lock::Lock;
    /// let mut lease = AdvisoryLocker::new(pool).try_acquire("job", Duration::from_secs(30)).await?;
    /// let key = lease.guard().key();
    /// # let _ = key; Ok(()) }
    /// ```
    pub fn guard(&mut self) -> &mut AdvisoryGuard {
        &mut self.guard
    }
}

impl crate::lock::Lock for AdvisoryLocker {
    type Lease = AdvisoryLease;

    async fn try_acquire(&self, name: &str, _ttl: Duration) -> Result<AdvisoryLease, LeaseError> {
        match self.try_lock(name).await? {
            Some(guard) => Ok(advisory_lease(guard, name, self.keep_alive)),
            None => Err(LeaseError::Busy {
                name: name.to_owned(),
            }),
        }
    }

    async fn acquire_timeout(
        &self,
        name: &str,
        _ttl: Duration,
        timeout: Duration,
    ) -> Result<AdvisoryLease, LeaseError> {
        match self.lock_timeout(name, timeout).await? {
            Some(guard) => Ok(advisory_lease(guard, name, self.keep_alive)),
            None => Err(LeaseError::Busy {
                name: name.to_owned(),
            }),
        }
    }
}

/// The outcome of an advisory acquisition for its span (`none` when no guard came back).
fn guard_outcome(
    result: &Result<Option<AdvisoryGuard>, AdvisoryError>,
    none: &'static str,
) -> (&'static str, Option<u64>) {
    match result {
        Ok(Some(guard)) => ("acquired", guard.fence.map(|f| f.0)),
        Ok(None) => (none, None),
        Err(_) => ("error", None),
    }
}

fn advisory_lease(guard: AdvisoryGuard, name: &str, interval: Duration) -> AdvisoryLease {
    AdvisoryLease {
        fence: guard.fence.unwrap_or(FencingToken(0)),
        guard,
        name: name.to_owned(),
        interval,
    }
}

impl crate::lock::Lease for AdvisoryLease {
    fn name(&self) -> &str {
        &self.name
    }

    fn fence(&self) -> FencingToken {
        self.fence
    }

    fn is_held(&self) -> bool {
        self.guard.is_held()
    }

    fn lost(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.guard.lost()
    }

    /// Restarts the session watch with the locker's interval (the locker already started
    /// one).
    fn spawn_keep_alive(&mut self) {
        self.guard.spawn_keep_alive(self.interval)
    }

    /// No TTL to extend: checks on the guard's connection that the session still holds the
    /// lock.
    async fn renew(&mut self, _ttl: Duration) -> Result<(), LeaseError> {
        let span = OpSpan::with_fence(Op::Renew, "advisory", &self.name, self.fence.0);
        span.traced(self.check_held(), crate::trace::lease_outcome("renewed"))
            .await
    }

    async fn unlock(self) -> Result<(), LeaseError> {
        let name = self.name;
        if !self.guard.is_held() {
            drop(self.guard); // closes the connection
            return Err(LeaseError::Lost { name });
        }
        match self.guard.unlock().await {
            Ok(()) => Ok(()),
            Err(AdvisoryError::NotHeld { .. }) => Err(LeaseError::Lost { name }),
            // The session failed: the connection is closed and the lock with it.
            Err(AdvisoryError::Database(_)) => Err(LeaseError::Lost { name }),
        }
    }
}

impl AdvisoryLease {
    /// Whether the session still holds the lock, asked on the guard's connection.
    async fn check_held(&mut self) -> Result<(), LeaseError> {
        if !self.guard.is_held() {
            return Err(LeaseError::Lost {
                name: self.name.clone(),
            });
        }
        let key = self.guard.key;
        let held = holds(&mut *self.guard.connection().await, key).await;
        match held {
            Ok(true) => Ok(()),
            _ => {
                self.guard.ended.cancel();
                Err(LeaseError::Lost {
                    name: self.name.clone(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_from_name_is_sha256_prefix() {
        // SHA-256("abc") = ba7816bf8f01cfea...; SHA-256("") = e3b0c44298fc1c14...
        assert_eq!(
            AdvisoryKey::from_name("abc").0,
            i64::from_be_bytes([0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea])
        );
        assert_eq!(
            AdvisoryKey::from_name("").0,
            0xe3b0_c442_98fc_1c14_u64 as i64
        );
        assert_eq!(AdvisoryKey::from(7), AdvisoryKey(7));
    }
}
