//! A lock table: leases stored as rows in an ordinary SQL table (PostgreSQL, MySQL/MariaDB,
//! SQLite), with a fencing token per acquisition.
//!
//! Each lock name is one row `(name, owner, fence, expires_at)`. Acquiring is a single
//! upsert that takes the row **only if it is expired**, judged by the **database clock**
//! (`now()` in PostgreSQL, `UTC_TIMESTAMP(6)` in MySQL/MariaDB, `julianday('now')` in
//! SQLite), so the clocks of the competing clients do not matter. SQLite runs inside the
//! client process, so its clock is the wall clock of the host the processes share: a step of
//! that clock (NTP setting it back or forward) shortens or lengthens every live lease by the
//! step; use PostgreSQL or MariaDB where that host's clock cannot be trusted. Every takeover increments
//! the row's `fence`, which is returned as the lease's [`FencingToken`]. Rows are never
//! deleted (release only marks the row expired), so the fence keeps growing for the life of
//! the table.
//!
//! PostgreSQL acquire statement (the other dialects are equivalent):
//!
//! ```sql
//! INSERT INTO locklint_locks AS l (name, owner, fence, expires_at)
//! VALUES ($1, $2, 1, now() + $3 * interval '1 millisecond')
//! ON CONFLICT (name) DO UPDATE
//!   SET owner = EXCLUDED.owner, fence = l.fence + 1, expires_at = EXCLUDED.expires_at
//!   WHERE l.expires_at < now()
//! RETURNING fence;
//! ```
//!
//! [`TableLease::renew`] and [`TableLease::release`] only touch the row while it still
//! carries the lease's owner id (random, 128 bits, unique per acquisition), so a holder whose
//! lease was taken over cannot extend or free the new holder's lease.
//!
//! [`TableLease::spawn_keep_alive`] renews the lease every TTL/3 in the background and signals
//! loss like a Redis lease: [`TableLease::lost`] resolves, [`TableLease::is_held`] turns false
//! and the [`cancellation_token`](TableLease::cancellation_token) is cancelled as soon as a
//! renewal finds the row expired or taken over, or once renewals have kept failing until
//! less than one renewal interval of validity is left (one interval before the validity
//! ends, so the holder has that long to stop).
//!
//! A lease is still only a lease: a holder paused past its TTL keeps running. Protect the
//! writes with the fence (see [`crate::fence`]).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[cfg(feature = "mysql")]
use sqlx::MySqlPool;
#[cfg(feature = "postgres")]
use sqlx::PgPool;
#[cfg(feature = "sqlite")]
use sqlx::SqlitePool;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::fence::{fence_from_i64, FencingToken};
use crate::ident::{unqualified, validate_identifier, InvalidIdentifier};
use crate::lock::LeaseError;
use crate::renewal::{self, Schedule};
use crate::trace::{Op, OpSpan};

/// The default lock table name.
///
/// ```
/// assert_eq!(locklint_runtime::table::DEFAULT_TABLE, "locklint_locks");
/// ```
pub const DEFAULT_TABLE: &str = "locklint_locks";

/// Migration creating the default lock table in PostgreSQL.
///
/// ```
/// assert!(locklint_runtime::table::MIGRATION_POSTGRES.contains("locklint_locks"));
/// ```
pub const MIGRATION_POSTGRES: &str = include_str!("../migrations/postgres/0001_locklint_locks.sql");
/// Migration creating the default lock table in MySQL / MariaDB.
///
/// ```
/// assert!(locklint_runtime::table::MIGRATION_MYSQL.contains("locklint_locks"));
/// ```
pub const MIGRATION_MYSQL: &str = include_str!("../migrations/mysql/0001_locklint_locks.sql");
/// Migration creating the default lock table in SQLite.
///
/// ```
/// assert!(locklint_runtime::table::MIGRATION_SQLITE.contains("locklint_locks"));
/// ```
pub const MIGRATION_SQLITE: &str = include_str!("../migrations/sqlite/0001_locklint_locks.sql");

/// The SQL dialect of a database.
///
/// ```
/// use locklint_runtime::table::{migration_sql, Dialect};
/// assert!(migration_sql(Dialect::MySql, "app_locks").unwrap().contains("app_locks"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// PostgreSQL (9.5 or newer).
    Postgres,
    /// MySQL 5.7+ or MariaDB 10.3+.
    MySql,
    /// SQLite 3.35 or newer.
    Sqlite,
}

impl Dialect {
    fn lock_migration(self) -> &'static str {
        match self {
            Dialect::Postgres => MIGRATION_POSTGRES,
            Dialect::MySql => MIGRATION_MYSQL,
            Dialect::Sqlite => MIGRATION_SQLITE,
        }
    }
}

/// The migration SQL creating a lock table named `table` (validated) in `dialect`.
///
/// ```
/// use locklint_runtime::table::{migration_sql, Dialect};
/// let sql = migration_sql(Dialect::Postgres, "app.locks").unwrap();
/// assert!(sql.contains("app.locks"));
/// assert!(migration_sql(Dialect::Sqlite, "locks; --").is_err());
/// ```
pub fn migration_sql(dialect: Dialect, table: &str) -> Result<String, InvalidIdentifier> {
    validate_identifier(table)?;
    Ok(dialect.lock_migration().replace(DEFAULT_TABLE, table))
}

/// Runs the same sqlx expression on whichever pool backs the lock (the pools' types differ,
/// so the expression is instantiated once per database).
macro_rules! on_pool {
    ($pool:expr, |$p:ident| $body:expr) => {
        match $pool {
            #[cfg(feature = "postgres")]
            LockPool::Postgres($p) => $body,
            #[cfg(feature = "mysql")]
            LockPool::MySql($p) => $body,
            #[cfg(feature = "sqlite")]
            LockPool::Sqlite($p) => $body,
        }
    };
}

/// A connection pool of one of the supported databases.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use locklint_runtime::table::{Dialect, LockPool};
/// let pool = sqlx::SqlitePool::connect_lazy("sqlite::memory:").unwrap();
/// assert_eq!(LockPool::from(pool).dialect(), Dialect::Sqlite);
/// # }
/// ```
#[derive(Debug, Clone)]
pub enum LockPool {
    /// A PostgreSQL pool.
    #[cfg(feature = "postgres")]
    Postgres(PgPool),
    /// A MySQL / MariaDB pool.
    #[cfg(feature = "mysql")]
    MySql(MySqlPool),
    /// A SQLite pool.
    #[cfg(feature = "sqlite")]
    Sqlite(SqlitePool),
}

impl LockPool {
    /// The dialect of this pool's database.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use locklint_runtime::table::{Dialect, TableLock};
    /// let locks = TableLock::new(sqlx::SqlitePool::connect_lazy("sqlite::memory:").unwrap());
    /// assert_eq!(locks.pool().dialect(), Dialect::Sqlite);
    /// # }
    /// ```
    pub fn dialect(&self) -> Dialect {
        match self {
            #[cfg(feature = "postgres")]
            LockPool::Postgres(_) => Dialect::Postgres,
            #[cfg(feature = "mysql")]
            LockPool::MySql(_) => Dialect::MySql,
            #[cfg(feature = "sqlite")]
            LockPool::Sqlite(_) => Dialect::Sqlite,
        }
    }
}

#[cfg(feature = "postgres")]
impl From<PgPool> for LockPool {
    fn from(pool: PgPool) -> Self {
        #[cfg(feature = "postgres")]
        LockPool::Postgres(pool)
    }
}

#[cfg(feature = "mysql")]
impl From<MySqlPool> for LockPool {
    fn from(pool: MySqlPool) -> Self {
        #[cfg(feature = "mysql")]
        LockPool::MySql(pool)
    }
}

#[cfg(feature = "sqlite")]
impl From<SqlitePool> for LockPool {
    fn from(pool: SqlitePool) -> Self {
        #[cfg(feature = "sqlite")]
        LockPool::Sqlite(pool)
    }
}

/// The errors of [`TableLease::renew`] and [`TableLease::release`].
///
/// ```
/// use locklint_runtime::table::TableError;
/// let e = TableError::Lost { name: "job".into() };
/// assert!(e.is_lost());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TableError {
    /// The lease is no longer ours: it expired or was taken over (or was released).
    #[error("lock `{name}` was lost")]
    Lost {
        /// The lock name.
        name: String,
    },
    /// The database reported an error.
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

impl TableError {
    /// True for [`TableError::Lost`].
    ///
    /// ```
    /// # use locklint_runtime::table::TableError;
    /// assert!(TableError::Lost { name: "a".into() }.is_lost());
    /// ```
    pub fn is_lost(&self) -> bool {
        matches!(self, TableError::Lost { .. })
    }
}

impl From<TableError> for LeaseError {
    fn from(e: TableError) -> Self {
        match e {
            TableError::Lost { name } => LeaseError::Lost { name },
            TableError::Database(e) => LeaseError::Backend(Box::new(e)),
        }
    }
}

/// State shared by a lease, its clones and its keep-alive task.
#[derive(Debug)]
struct Shared {
    valid_until: Mutex<Instant>,
    ended: CancellationToken,
}

impl Shared {
    fn valid_until(&self) -> Instant {
        *self.valid_until.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn extend(&self, until: Instant) {
        *self.valid_until.lock().unwrap_or_else(|e| e.into_inner()) = until;
    }

    fn is_held(&self) -> bool {
        !self.ended.is_cancelled() && Instant::now() < self.valid_until()
    }
}

/// Aborts the keep-alive task when the last clone of the lease is dropped.
#[derive(Debug)]
struct KeepAlive(JoinHandle<()>);

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A held lease on one row of a lock table.
///
/// Dropping a lease does not release it (dropping cannot run SQL); it then expires after its
/// TTL. Call [`TableLease::release`]. Clones share the lease's state and keep-alive.
///
/// ```no_run
/// # async fn demo(pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use locklint_runtime::table::TableLock;
///
/// let locks = TableLock::new(pool);
/// if let Some(mut lease) = locks.try_acquire("billing", Duration::from_secs(30)).await? {
///     lease.spawn_keep_alive(); // renew every 10 s; loss is signalled
///     tokio::select! {
///         _ = async { /* fenced work with lease.fence() */ } => {}
///         _ = lease.lost() => eprintln!("lease lost"),
///     }
///     lease.release().await?; // Ok(false) if it was no longer ours
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct TableLease {
    lock: TableLock,
    name: String,
    owner: String,
    fence: FencingToken,
    ttl: Duration,
    shared: Arc<Shared>,
    keep_alive: Option<Arc<KeepAlive>>,
}

impl PartialEq for TableLease {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.owner == other.owner && self.fence == other.fence
    }
}

impl Eq for TableLease {}

impl TableLease {
    /// The lock name.
    ///
    /// ```no_run
    /// # async fn demo(locks: locklint_runtime::table::TableLock) -> Result<(), sqlx::Error> {
    /// # use std::time::Duration;
    /// let lease = locks.try_acquire("job", Duration::from_secs(5)).await?.expect("free");
    /// assert_eq!(lease.name(), "job");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The random owner id written to the row for this acquisition.
    ///
    /// ```no_run
    /// # async fn demo(locks: locklint_runtime::table::TableLock) -> Result<(), sqlx::Error> {
    /// # use std::time::Duration;
    /// let lease = locks.try_acquire("job", Duration::from_secs(5)).await?.expect("free");
    /// assert_eq!(lease.owner().len(), 32);
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The fencing token of this acquisition: larger than that of every earlier acquisition
    /// of the same name in the same table.
    ///
    /// ```no_run
    /// # async fn demo(locks: locklint_runtime::table::TableLock) -> Result<(), sqlx::Error> {
    /// # use std::time::Duration;
    /// let lease = locks.try_acquire("job", Duration::from_secs(5)).await?.expect("free");
    /// let fence = lease.fence(); // pass it to the protected resource
    /// # let _ = fence; Ok(()) }
    /// ```
    pub fn fence(&self) -> FencingToken {
        self.fence
    }

    /// The TTL the lease was acquired with (and that the keep-alive renews to).
    ///
    /// ```no_run
    /// # async fn demo(locks: locklint_runtime::table::TableLock) -> Result<(), sqlx::Error> {
    /// # use std::time::Duration;
    /// let lease = locks.try_acquire("job", Duration::from_secs(5)).await?.expect("free");
    /// assert_eq!(lease.ttl(), Duration::from_secs(5));
    /// # Ok(()) }
    /// ```
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A conservative local estimate of the lease's end: the TTL counted from *before* the
    /// acquire (or renew) request was sent, minus a drift allowance (1% of the TTL plus
    /// 2 ms). Useful to stop starting new work in time; it is no
    /// substitute for fencing, since the process may pause right after checking it.
    ///
    /// ```no_run
    /// # async fn demo(locks: locklint_runtime::table::TableLock) -> Result<(), sqlx::Error> {
    /// # use std::time::Duration;
    /// let lease = locks.try_acquire("job", Duration::from_secs(5)).await?.expect("free");
    /// assert!(lease.valid_until() > std::time::Instant::now());
    /// # Ok(()) }
    /// ```
    pub fn valid_until(&self) -> Instant {
        self.shared.valid_until()
    }

    /// True while [`Self::valid_until`] lies in the future and the lease is not known lost
    /// (same as [`Self::is_held`]).
    ///
    /// ```no_run
    /// # async fn demo(locks: locklint_runtime::table::TableLock) -> Result<(), sqlx::Error> {
    /// # use std::time::Duration;
    /// let lease = locks.try_acquire("job", Duration::from_secs(5)).await?.expect("free");
    /// assert!(lease.is_probably_valid());
    /// # Ok(()) }
    /// ```
    pub fn is_probably_valid(&self) -> bool {
        self.shared.is_held()
    }

    /// Whether the lease is still held as far as this process knows: not released, not
    /// found lost by a renewal, and not past [`Self::valid_until`].
    ///
    /// ```no_run
    /// # async fn demo(locks: locklint_runtime::table::TableLock) -> Result<(), sqlx::Error> {
    /// # use std::time::Duration;
    /// let lease = locks.try_acquire("job", Duration::from_secs(5)).await?.expect("free");
    /// assert!(lease.is_held());
    /// # Ok(()) }
    /// ```
    pub fn is_held(&self) -> bool {
        self.shared.is_held()
    }

    /// A future that resolves when the lease ends: its validity ran out, a renewal found the
    /// row expired or taken over, or it was released. With the keep-alive running, renewals
    /// that keep failing resolve it once less than one renewal interval (TTL/3) of validity
    /// is left: within one interval of the first failed renewal and before the validity
    /// ends. It owns what it needs, so it can be awaited in a `select!` next to the work.
    ///
    /// ```no_run
    /// # async fn demo(locks: locklint_runtime::table::TableLock) -> Result<(), sqlx::Error> {
    /// # use std::time::Duration;
    /// let mut lease = locks.try_acquire("job", Duration::from_secs(5)).await?.expect("free");
    /// lease.spawn_keep_alive();
    /// tokio::select! {
    ///     _ = tokio::time::sleep(Duration::from_secs(1)) => {} // the work
    ///     _ = lease.lost() => eprintln!("lost"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let shared = Arc::clone(&self.shared);
        async move {
            loop {
                let until = shared.valid_until();
                tokio::select! {
                    biased;
                    _ = shared.ended.cancelled() => return,
                    _ = tokio::time::sleep_until(until.into()) => {
                        if shared.valid_until() <= Instant::now() {
                            shared.ended.cancel();
                            return;
                        }
                    }
                }
            }
        }
    }

    /// A token cancelled as soon as the lease is known to have ended.
    ///
    /// ```no_run
    /// # async fn demo(locks: locklint_runtime::table::TableLock) -> Result<(), sqlx::Error> {
    /// # use std::time::Duration;
    /// let lease = locks.try_acquire("job", Duration::from_secs(5)).await?.expect("free");
    /// let token = lease.cancellation_token();
    /// assert!(!token.is_cancelled());
    /// # Ok(()) }
    /// ```
    pub fn cancellation_token(&self) -> CancellationToken {
        self.shared.ended.clone()
    }

    /// Extends a live lease to `ttl` from now (database clock). [`TableError::Lost`],
    /// changing nothing, when the lease has expired, been taken over or been released: the
    /// caller no longer holds the lock and must stop. On success, updates
    /// [`Self::valid_until`]. The same contract as the Redis lease's `renew`.
    ///
    /// ```no_run
    /// # async fn demo(locks: locklint_runtime::table::TableLock) -> Result<(), locklint_runtime::table::TableError> {
    /// # use std::time::Duration;
    /// let mut lease = locks.try_acquire("job", Duration::from_secs(5)).await?.expect("free");
    /// lease.renew(Duration::from_secs(5)).await?; // Err(Lost) once it is no longer ours
    /// # Ok(()) }
    /// ```
    pub async fn renew(&mut self, ttl: Duration) -> Result<(), TableError> {
        if self.shared.ended.is_cancelled() {
            return Err(self.lost_error());
        }
        let started = Instant::now();
        if self
            .lock
            .renew_row(&self.name, &self.owner, self.fence, ttl)
            .await?
        {
            self.shared.extend(renewal::valid_until(started, ttl));
            Ok(())
        } else {
            self.shared.ended.cancel();
            Err(self.lost_error())
        }
    }

    /// Releases the lease so the next acquirer need not wait for the TTL. Returns `false`,
    /// changing nothing, when the row no longer carries this lease's owner (it was taken over
    /// after expiring). The row is kept, so the fence keeps increasing. Stops the keep-alive.
    ///
    /// ```no_run
    /// # async fn demo(locks: locklint_runtime::table::TableLock) -> Result<(), sqlx::Error> {
    /// # use std::time::Duration;
    /// let lease = locks.try_acquire("job", Duration::from_secs(5)).await?.expect("free");
    /// assert!(lease.release().await?);
    /// # Ok(()) }
    /// ```
    pub async fn release(&self) -> Result<bool, sqlx::Error> {
        let owned = self
            .lock
            .release_row(&self.name, &self.owner, self.fence)
            .await?;
        self.shared.ended.cancel();
        Ok(owned)
    }

    /// Starts a background task that renews the lease to its TTL every TTL/3. A renewal that
    /// fails with a database error is retried every TTL/24 (at most 250 ms) while more than
    /// one renewal interval of validity is left; after that, or when a renewal finds the row
    /// expired or taken over, or gets no reply in time, the lease ends ([`Self::lost`], [`Self::is_held`],
    /// [`Self::cancellation_token`]). It never revives an expired lease. The task stops when
    /// the lease (and every clone) is dropped or released. Must be called within a tokio
    /// runtime.
    ///
    /// ```no_run
    /// # async fn demo(locks: locklint_runtime::table::TableLock) -> Result<(), sqlx::Error> {
    /// # use std::time::Duration;
    /// let mut lease = locks.try_acquire("job", Duration::from_secs(30)).await?.expect("free");
    /// lease.spawn_keep_alive();
    /// # Ok(()) }
    /// ```
    pub fn spawn_keep_alive(&mut self) {
        let task = tokio::spawn(keep_alive(
            self.lock.clone(),
            self.name.clone(),
            self.owner.clone(),
            self.fence,
            self.ttl,
            Arc::clone(&self.shared),
        ));
        self.keep_alive = Some(Arc::new(KeepAlive(task)));
    }

    fn lost_error(&self) -> TableError {
        TableError::Lost {
            name: self.name.clone(),
        }
    }
}

/// The outcome of one lock-table acquisition attempt, for its span.
fn table_acquire_outcome(
    result: &Result<Option<TableLease>, sqlx::Error>,
) -> (&'static str, Option<u64>) {
    match result {
        Ok(Some(lease)) => ("acquired", Some(lease.fence.0)),
        Ok(None) => ("busy", None),
        Err(_) => ("error", None),
    }
}

async fn keep_alive(
    lock: TableLock,
    name: String,
    owner: String,
    fence: FencingToken,
    ttl: Duration,
    shared: Arc<Shared>,
) {
    let schedule = Schedule::for_ttl(ttl);
    let mut next = Instant::now() + schedule.interval;
    let mut failing = false;
    loop {
        tokio::select! {
            biased;
            _ = shared.ended.cancelled() => return,
            _ = tokio::time::sleep_until(next.into()) => {}
        }
        let now = Instant::now();
        let valid_until = shared.valid_until();
        if now >= valid_until || (failing && now >= schedule.give_up_at(valid_until)) {
            // Expired, or less than one renewal interval left after failed renewals.
            shared.ended.cancel();
            return;
        }
        let answer_by = schedule.answer_by(now, valid_until);
        let reply = tokio::time::timeout(
            answer_by.saturating_duration_since(now),
            lock.renew_row(&name, &owner, fence, ttl),
        )
        .await;
        match reply {
            Ok(Ok(true)) => {
                shared.extend(renewal::valid_until(now, ttl));
                failing = false;
                next = now + schedule.interval;
            }
            // Expired, taken over or released: the row is no longer ours; or no reply in time.
            Ok(Ok(false)) | Err(_) => {
                shared.ended.cancel();
                return;
            }
            // The row is ours until it expires; a later renewal may get through while more
            // than one renewal interval of validity is left.
            Ok(Err(_)) => {
                failing = true;
                match schedule.retry_at(Instant::now(), valid_until) {
                    Some(at) => next = at,
                    None => {
                        shared.ended.cancel();
                        return;
                    }
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
struct Statements {
    acquire: String,
    /// MySQL only: read back the fence after the upsert.
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    acquired_fence: String,
    renew: String,
    release: String,
}

impl Statements {
    fn new(dialect: Dialect, t: &str) -> Self {
        match dialect {
            Dialect::Postgres => Statements {
                acquire: format!(
                    "INSERT INTO {t} AS l (name, owner, fence, expires_at) \
                     VALUES ($1, $2, 1, now() + $3::bigint * interval '1 millisecond') \
                     ON CONFLICT (name) DO UPDATE \
                     SET owner = EXCLUDED.owner, fence = l.fence + 1, expires_at = EXCLUDED.expires_at \
                     WHERE l.expires_at < now() \
                     RETURNING fence"
                ),
                acquired_fence: String::new(),
                renew: format!(
                    "UPDATE {t} SET expires_at = now() + $3::bigint * interval '1 millisecond' \
                     WHERE name = $1 AND owner = $2 AND expires_at >= now()"
                ),
                release: format!(
                    "UPDATE {t} SET owner = '', expires_at = '-infinity' \
                     WHERE name = $1 AND owner = $2"
                ),
            },
            // Assignments in ON DUPLICATE KEY UPDATE run left to right and later ones see the
            // new values, so `expires_at` must be assigned last.
            Dialect::MySql => Statements {
                acquire: format!(
                    "INSERT INTO {t} (name, owner, fence, expires_at) \
                     VALUES (?, ?, 1, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) \
                     ON DUPLICATE KEY UPDATE \
                     owner = IF(expires_at < UTC_TIMESTAMP(6), VALUES(owner), owner), \
                     fence = IF(expires_at < UTC_TIMESTAMP(6), fence + 1, fence), \
                     expires_at = IF(expires_at < UTC_TIMESTAMP(6), VALUES(expires_at), expires_at)"
                ),
                acquired_fence: format!("SELECT fence FROM {t} WHERE name = ? AND owner = ?"),
                renew: format!(
                    "UPDATE {t} SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND \
                     WHERE name = ? AND owner = ? AND expires_at >= UTC_TIMESTAMP(6)"
                ),
                release: format!(
                    "UPDATE {t} SET owner = '', expires_at = '1000-01-01 00:00:00' \
                     WHERE name = ? AND owner = ?"
                ),
            },
            Dialect::Sqlite => {
                const NOW_MS: &str = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)";
                let u = unqualified(t);
                Statements {
                    acquire: format!(
                        "INSERT INTO {t} (name, owner, fence, expires_at) \
                         VALUES (?1, ?2, 1, {NOW_MS} + ?3) \
                         ON CONFLICT (name) DO UPDATE \
                         SET owner = excluded.owner, fence = {u}.fence + 1, expires_at = excluded.expires_at \
                         WHERE {u}.expires_at < {NOW_MS} \
                         RETURNING fence"
                    ),
                    acquired_fence: String::new(),
                    renew: format!(
                        "UPDATE {t} SET expires_at = {NOW_MS} + ?3 \
                         WHERE name = ?1 AND owner = ?2 AND expires_at >= {NOW_MS}"
                    ),
                    release: format!(
                        "UPDATE {t} SET owner = '', expires_at = 0 WHERE name = ?1 AND owner = ?2"
                    ),
                }
            }
        }
    }
}

/// Leases stored in a SQL lock table; see the [module docs](self).
///
/// ```no_run
/// # async fn demo(pool: sqlx::PgPool) -> Result<(), sqlx::Error> {
/// use std::time::Duration;
/// use locklint_runtime::table::TableLock;
///
/// let locks = TableLock::new(pool);
/// locks.migrate().await?;
/// if let Some(lease) = locks.try_acquire("nightly-report", Duration::from_secs(30)).await? {
///     // ... fenced writes with lease.fence() ...
///     locks.release(&lease).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct TableLock {
    pool: LockPool,
    table: String,
    sql: Statements,
}

impl TableLock {
    /// A lock table named [`DEFAULT_TABLE`] (`locklint_locks`) in `pool`'s database.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use locklint_runtime::table::TableLock;
    /// let locks = TableLock::new(sqlx::SqlitePool::connect_lazy("sqlite::memory:").unwrap());
    /// assert_eq!(locks.table(), "locklint_locks");
    /// # }
    /// ```
    pub fn new(pool: impl Into<LockPool>) -> Self {
        Self::with_table(pool, DEFAULT_TABLE).expect("default table name is valid")
    }

    /// A lock table named `table` (validated as an identifier; may be `schema.table`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use locklint_runtime::table::TableLock;
    /// let locks = TableLock::with_table(sqlx::SqlitePool::connect_lazy("sqlite::memory:").unwrap(), "main.app_locks").unwrap();
    /// assert_eq!(locks.table(), "main.app_locks");
    /// assert!(TableLock::with_table(sqlx::SqlitePool::connect_lazy("sqlite::memory:").unwrap(), "x; DROP TABLE y").is_err());
    /// # }
    /// ```
    pub fn with_table(pool: impl Into<LockPool>, table: &str) -> Result<Self, InvalidIdentifier> {
        validate_identifier(table)?;
        let pool = pool.into();
        Ok(TableLock {
            sql: Statements::new(pool.dialect(), table),
            table: table.to_owned(),
            pool,
        })
    }

    /// The table name.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let locks = locklint_runtime::table::TableLock::new(sqlx::SqlitePool::connect_lazy("sqlite::memory:").unwrap());
    /// assert_eq!(locks.table(), locklint_runtime::table::DEFAULT_TABLE);
    /// # }
    /// ```
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The pool the lock table lives in.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use locklint_runtime::table::{LockPool, TableLock};
    /// let locks = TableLock::new(sqlx::SqlitePool::connect_lazy("sqlite::memory:").unwrap());
    /// assert!(matches!(locks.pool(), LockPool::Sqlite(_)));
    /// # }
    /// ```
    pub fn pool(&self) -> &LockPool {
        &self.pool
    }

    /// The migration SQL creating this lock table (see also [`migration_sql`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let locks = locklint_runtime::table::TableLock::with_table(sqlx::SqlitePool::connect_lazy("sqlite::memory:").unwrap(), "app_locks").unwrap();
    /// assert!(locks.migration_sql().contains("app_locks"));
    /// # }
    /// ```
    pub fn migration_sql(&self) -> String {
        self.pool
            .dialect()
            .lock_migration()
            .replace(DEFAULT_TABLE, &self.table)
    }

    /// Creates the lock table if it does not exist.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), sqlx::Error> {
    /// let locks = locklint_runtime::table::TableLock::new(sqlx::SqlitePool::connect("sqlite::memory:").await?);
    /// locks.migrate().await?;
    /// locks.migrate().await?; // idempotent
    /// # Ok(()) }
    /// ```
    pub async fn migrate(&self) -> Result<(), sqlx::Error> {
        let sql = self.migration_sql();
        on_pool!(&self.pool, |p| sqlx::raw_sql(&sql)
            .execute(p)
            .await
            .map(|_| ()))
    }

    /// Takes the lock `name` for `ttl` if it is free (never acquired, released, or expired by
    /// the database clock); returns `None` while another lease is live. Never blocks on the
    /// current holder. The TTL is rounded up to whole milliseconds (at least 1 ms).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), sqlx::Error> {
    /// use std::time::Duration;
    /// let locks = locklint_runtime::table::TableLock::new(sqlx::SqlitePool::connect("sqlite::memory:").await?);
    /// locks.migrate().await?;
    /// let lease = locks.try_acquire("job", Duration::from_secs(30)).await?.expect("free");
    /// assert!(locks.try_acquire("job", Duration::from_secs(30)).await?.is_none()); // held
    /// assert!(lease.release().await?);
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(
        &self,
        name: &str,
        ttl: Duration,
    ) -> Result<Option<TableLease>, sqlx::Error> {
        OpSpan::new(Op::Acquire, "table", name)
            .traced(self.try_acquire_once(name, ttl), table_acquire_outcome)
            .await
    }

    /// One acquisition attempt, without a span of its own.
    async fn try_acquire_once(
        &self,
        name: &str,
        ttl: Duration,
    ) -> Result<Option<TableLease>, sqlx::Error> {
        let owner = random_owner()?;
        let ttl_ms = ttl_millis(ttl);
        let started = Instant::now();
        let fence: Option<i64> = match &self.pool {
            #[cfg(feature = "postgres")]
            LockPool::Postgres(p) => {
                sqlx::query_scalar(&self.sql.acquire)
                    .bind(name)
                    .bind(&owner)
                    .bind(ttl_ms)
                    .fetch_optional(p)
                    .await?
            }
            #[cfg(feature = "sqlite")]
            LockPool::Sqlite(p) => {
                sqlx::query_scalar(&self.sql.acquire)
                    .bind(name)
                    .bind(&owner)
                    .bind(ttl_ms)
                    .fetch_optional(p)
                    .await?
            }
            #[cfg(feature = "mysql")]
            LockPool::MySql(p) => {
                let mut attempt = 0;
                loop {
                    let res = sqlx::query(&self.sql.acquire)
                        .bind(name)
                        .bind(&owner)
                        .bind(ttl_ms.saturating_mul(1000))
                        .execute(p)
                        .await;
                    match res {
                        Ok(_) => break,
                        // Concurrent first inserts of one key can deadlock in InnoDB; the
                        // statement was rolled back, so it is safe to run it again.
                        Err(e) if is_mysql_deadlock(&e) && attempt < 5 => attempt += 1,
                        Err(e) => return Err(e),
                    }
                }
                sqlx::query_scalar(&self.sql.acquired_fence)
                    .bind(name)
                    .bind(&owner)
                    .fetch_optional(p)
                    .await?
            }
        };
        Ok(fence.map(|fence| TableLease {
            lock: self.clone(),
            name: name.to_owned(),
            owner,
            fence: FencingToken(fence_from_i64(fence)),
            ttl,
            shared: Arc::new(Shared {
                valid_until: Mutex::new(renewal::valid_until(started, ttl)),
                ended: CancellationToken::new(),
            }),
            keep_alive: None,
        }))
    }

    /// Like [`Self::try_acquire`], retrying with a short randomized backoff (5 to 55 ms)
    /// until the lock is taken or `timeout` has passed; `None` on timeout.
    ///
    /// ```no_run
    /// # async fn demo(locks: locklint_runtime::table::TableLock) -> Result<(), sqlx::Error> {
    /// use std::time::Duration;
    /// match locks.acquire_timeout("job", Duration::from_secs(30), Duration::from_secs(5)).await? {
    ///     Some(lease) => { lease.release().await?; }
    ///     None => println!("still held after 5 s"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(
        &self,
        name: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Option<TableLease>, sqlx::Error> {
        let waiting = async {
            let deadline = Instant::now() + timeout;
            let mut backoff = Duration::from_millis(5);
            loop {
                if let Some(lease) = self.try_acquire_once(name, ttl).await? {
                    return Ok(Some(lease));
                }
                let now = Instant::now();
                if now >= deadline {
                    return Ok(None);
                }
                let jitter = Duration::from_micros(u64::from(random_u32()? % 5_000));
                tokio::time::sleep((backoff + jitter).min(deadline - now)).await;
                backoff = (backoff * 2).min(Duration::from_millis(50));
            }
        };
        OpSpan::new(Op::Acquire, "table", name)
            .traced(waiting, |r| match r {
                Ok(None) => ("timed_out", None),
                other => table_acquire_outcome(other),
            })
            .await
    }

    /// Extends a live lease to `ttl` from now; the same as [`TableLease::renew`]
    /// ([`TableError::Lost`] once it is no longer ours).
    ///
    /// ```no_run
    /// # async fn demo(locks: locklint_runtime::table::TableLock) -> Result<(), locklint_runtime::table::TableError> {
    /// # use std::time::Duration;
    /// let mut lease = locks.try_acquire("job", Duration::from_secs(5)).await?.expect("free");
    /// locks.renew(&mut lease, Duration::from_secs(5)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn renew(&self, lease: &mut TableLease, ttl: Duration) -> Result<(), TableError> {
        lease.renew(ttl).await
    }

    /// Releases the lease; the same as [`TableLease::release`] (`false` when it was no
    /// longer ours).
    ///
    /// ```no_run
    /// # async fn demo(locks: locklint_runtime::table::TableLock) -> Result<(), sqlx::Error> {
    /// # use std::time::Duration;
    /// let lease = locks.try_acquire("job", Duration::from_secs(5)).await?.expect("free");
    /// assert!(locks.release(&lease).await?);
    /// # Ok(()) }
    /// ```
    pub async fn release(&self, lease: &TableLease) -> Result<bool, sqlx::Error> {
        lease.release().await
    }

    /// Extends the row `name` owned by `owner` to `ttl` from now; `false` if it is not ours
    /// or already expired.
    async fn renew_row(
        &self,
        name: &str,
        owner: &str,
        fence: FencingToken,
        ttl: Duration,
    ) -> Result<bool, sqlx::Error> {
        OpSpan::with_fence(Op::Renew, "table", name, fence.0)
            .traced(self.renew_row_untraced(name, owner, ttl), |r| match r {
                Ok(true) => ("renewed", None),
                Ok(false) => ("lost", None),
                Err(_) => ("error", None),
            })
            .await
    }

    async fn renew_row_untraced(
        &self,
        name: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, sqlx::Error> {
        let ttl_ms = ttl_millis(ttl);
        let rows = match &self.pool {
            #[cfg(feature = "postgres")]
            LockPool::Postgres(p) => sqlx::query(&self.sql.renew)
                .bind(name)
                .bind(owner)
                .bind(ttl_ms)
                .execute(p)
                .await?
                .rows_affected(),
            #[cfg(feature = "sqlite")]
            LockPool::Sqlite(p) => sqlx::query(&self.sql.renew)
                .bind(name)
                .bind(owner)
                .bind(ttl_ms)
                .execute(p)
                .await?
                .rows_affected(),
            #[cfg(feature = "mysql")]
            LockPool::MySql(p) => sqlx::query(&self.sql.renew)
                .bind(ttl_ms.saturating_mul(1000))
                .bind(name)
                .bind(owner)
                .execute(p)
                .await?
                .rows_affected(),
        };
        Ok(rows > 0)
    }

    /// Marks the row `name` owned by `owner` expired; `false` if it is not ours.
    async fn release_row(
        &self,
        name: &str,
        owner: &str,
        fence: FencingToken,
    ) -> Result<bool, sqlx::Error> {
        OpSpan::with_fence(Op::Release, "table", name, fence.0)
            .traced(self.release_row_untraced(name, owner), |r| match r {
                Ok(true) => ("released", None),
                Ok(false) => ("lost", None),
                Err(_) => ("error", None),
            })
            .await
    }

    async fn release_row_untraced(&self, name: &str, owner: &str) -> Result<bool, sqlx::Error> {
        let rows = on_pool!(&self.pool, |p| sqlx::query(&self.sql.release)
            .bind(name)
            .bind(owner)
            .execute(p)
            .await?
            .rows_affected());
        Ok(rows > 0)
    }
}

impl crate::lock::Lock for TableLock {
    type Lease = TableLease;

    async fn try_acquire(&self, name: &str, ttl: Duration) -> Result<TableLease, LeaseError> {
        match TableLock::try_acquire(self, name, ttl).await {
            Ok(Some(lease)) => Ok(lease),
            Ok(None) => Err(LeaseError::Busy {
                name: name.to_owned(),
            }),
            Err(e) => Err(LeaseError::Backend(Box::new(e))),
        }
    }

    async fn acquire_timeout(
        &self,
        name: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<TableLease, LeaseError> {
        match TableLock::acquire_timeout(self, name, ttl, timeout).await {
            Ok(Some(lease)) => Ok(lease),
            Ok(None) => Err(LeaseError::Busy {
                name: name.to_owned(),
            }),
            Err(e) => Err(LeaseError::Backend(Box::new(e))),
        }
    }
}

impl crate::lock::Lease for TableLease {
    fn name(&self) -> &str {
        TableLease::name(self)
    }

    fn fence(&self) -> FencingToken {
        TableLease::fence(self)
    }

    fn is_held(&self) -> bool {
        TableLease::is_held(self)
    }

    fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        TableLease::lost(self)
    }

    fn spawn_keep_alive(&mut self) {
        TableLease::spawn_keep_alive(self)
    }

    async fn renew(&mut self, ttl: Duration) -> Result<(), LeaseError> {
        Ok(TableLease::renew(self, ttl).await?)
    }

    async fn unlock(self) -> Result<(), LeaseError> {
        match TableLease::release(&self).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(LeaseError::Lost {
                name: self.name.clone(),
            }),
            Err(e) => Err(LeaseError::Backend(Box::new(e))),
        }
    }
}

fn ttl_millis(ttl: Duration) -> i64 {
    let ms = ttl.as_nanos().div_ceil(1_000_000).max(1);
    i64::try_from(ms).unwrap_or(i64::MAX / 1000)
}

#[cfg(feature = "mysql")]
fn is_mysql_deadlock(e: &sqlx::Error) -> bool {
    // ER_LOCK_DEADLOCK (1213) and ER_LOCK_WAIT_TIMEOUT (1205) both report SQLSTATE 40001/HY000;
    // match on the SQLSTATE of a deadlock.
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("40001"))
}

fn random_owner() -> Result<String, sqlx::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| sqlx::Error::Protocol(format!("getrandom: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn random_u32() -> Result<u32, sqlx::Error> {
    getrandom::u32().map_err(|e| sqlx::Error::Protocol(format!("getrandom: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_rounds_up_to_milliseconds() {
        assert_eq!(ttl_millis(Duration::ZERO), 1);
        assert_eq!(ttl_millis(Duration::from_micros(1)), 1);
        assert_eq!(ttl_millis(Duration::from_micros(1500)), 2);
        assert_eq!(ttl_millis(Duration::from_secs(3)), 3000);
    }

    #[test]
    fn migrations_substitute_the_table_name() {
        let sql = migration_sql(Dialect::Postgres, "app.my_locks").unwrap();
        assert!(sql.contains("CREATE TABLE IF NOT EXISTS app.my_locks"));
        assert!(migration_sql(Dialect::Sqlite, "x; drop").is_err());
    }

    #[test]
    fn owners_are_random_hex() {
        let a = random_owner().unwrap();
        assert_eq!(a.len(), 32);
        assert_ne!(a, random_owner().unwrap());
    }
}
