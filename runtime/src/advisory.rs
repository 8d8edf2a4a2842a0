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

use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::postgres::PgConnection;
use sqlx::{Connection, Executor, PgPool, Postgres, Transaction};

/// A 64-bit advisory lock key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AdvisoryKey(pub i64);

impl AdvisoryKey {
    /// The key for `name`: the first 8 bytes of SHA-256(`name` as UTF-8), big-endian, as an
    /// `i64`. Stable across versions and platforms (see the [module docs](self)).
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
    pub async fn try_lock(
        source: impl Into<LockSource>,
        key: impl Into<AdvisoryKey>,
    ) -> Result<Option<AdvisoryGuard>, AdvisoryError> {
        let key = key.into();
        let mut conn = Dedicated::open(source.into()).await?;
        let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(key.0)
            .fetch_one(conn.conn())
            .await?;
        if locked {
            Ok(Some(AdvisoryGuard { conn, key }))
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
    pub async fn lock_timeout(
        source: impl Into<LockSource>,
        key: impl Into<AdvisoryKey>,
        timeout: Duration,
    ) -> Result<Option<AdvisoryGuard>, AdvisoryError> {
        let key = key.into();
        // lock_timeout is an int of milliseconds; longer waits are capped at ~24.8 days.
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128);
        if ms == 0 {
            return Self::try_lock(source, key).await;
        }
        let mut conn = Dedicated::open(source.into()).await?;
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
            Ok(Some(AdvisoryGuard { conn, key }))
        } else {
            conn.release_clean();
            Ok(None)
        }
    }

    /// Takes the transaction-scoped lock `key` with `pg_try_advisory_xact_lock`; `false` if
    /// another session holds it. The server releases it when `tx` commits or rolls back
    /// (including when the `Transaction` is dropped), and there is no unlock call.
    pub async fn try_lock_xact(
        tx: &mut Transaction<'_, Postgres>,
        key: impl Into<AdvisoryKey>,
    ) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
            .bind(key.into().0)
            .fetch_one(&mut **tx)
            .await
    }

    /// Waits for the transaction-scoped lock `key` with `pg_advisory_xact_lock`, bounded only
    /// by the session's `lock_timeout`/`statement_timeout` (set them with `SET LOCAL` in `tx`
    /// to bound the wait). Released at commit or rollback.
    pub async fn lock_xact(
        tx: &mut Transaction<'_, Postgres>,
        key: impl Into<AdvisoryKey>,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(key.into().0)
            .execute(&mut **tx)
            .await
            .map(|_| ())
    }
}

/// A held session advisory lock and the one connection (session) that holds it.
///
/// Release it with [`AdvisoryGuard::unlock`]. Dropping the guard instead closes the
/// connection (the server then releases the lock); it is never returned to the pool.
#[must_use = "dropping the guard closes its connection and releases the lock"]
pub struct AdvisoryGuard {
    conn: Dedicated,
    key: AdvisoryKey,
}

impl std::fmt::Debug for AdvisoryGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdvisoryGuard")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl AdvisoryGuard {
    /// The key of the held lock.
    pub fn key(&self) -> AdvisoryKey {
        self.key
    }

    /// The session holding the lock, e.g. to run work on it. Do not release the lock through
    /// it (`pg_advisory_unlock*`, `DISCARD ALL`); [`Self::unlock`] would then report
    /// [`AdvisoryError::NotHeld`].
    pub fn connection(&mut self) -> &mut PgConnection {
        self.conn.conn()
    }

    /// Releases the lock with `pg_advisory_unlock` on the same connection that took it. On
    /// success a pooled connection returns to its pool and a standalone one is closed. On any
    /// failure the connection is closed, which releases the lock server-side.
    ///
    /// A connection whose session still holds any advisory lock afterwards (one taken through
    /// [`Self::connection`], or this key taken a second time, which PostgreSQL counts) is
    /// closed instead of pooled, so no lock ever reaches another user of the pool.
    pub async fn unlock(mut self) -> Result<(), AdvisoryError> {
        let unlocked: bool = sqlx::query_scalar("SELECT pg_advisory_unlock($1)")
            .bind(self.key.0)
            .fetch_one(self.conn.conn())
            .await?;
        if unlocked {
            let still_holding: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM pg_locks \
                 WHERE locktype = 'advisory' AND pid = pg_backend_pid())",
            )
            .fetch_one(self.conn.conn())
            .await?;
            if !still_holding {
                self.conn.release_clean();
            }
            // Otherwise dropping the guard closes the session, which releases the rest.
            Ok(())
        } else {
            Err(AdvisoryError::NotHeld { key: self.key })
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
