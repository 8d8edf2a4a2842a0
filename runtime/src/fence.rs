//! Fencing tokens: a number issued with each acquisition, checked by the protected resource.
//!
//! A lock alone cannot stop a holder that was paused (GC, swap, VM migration, a long
//! `await`) from writing after its lease expired and somebody else took over. A fencing
//! token closes that gap: every acquisition hands out a larger number, the protected rows
//! remember the largest number that touched them, and a statement carrying a smaller number
//! is refused *by the resource itself*.
//!
//! Give the protected table a fence column (see [`FencedTable::add_fence_column_sql`]):
//!
//! ```sql
//! ALTER TABLE accounts ADD COLUMN IF NOT EXISTS fence BIGINT NOT NULL DEFAULT 0;
//! ```
//!
//! There are two ways to use it. Which one is needed depends on whether the value written
//! was computed from a read made under the lock.
//!
//! # Read-modify-write: claim the row when reading
//!
//! When the new value depends on what the holder read (`balance = <read balance> + 100`),
//! the row must learn the holder's token **at the read**. The read claims the row, and every
//! later write requires the claimed token (the token is bound as `$1`, the key as `$2`):
//!
//! ```sql
//! -- FencedTable::claim_sql("balance"): the read
//! UPDATE accounts SET fence = $1 WHERE id = $2 AND fence <= $1 RETURNING balance;
//! -- FencedTable::claimed_update_sql("balance = $3"): the write
//! UPDATE accounts SET balance = $3 WHERE id = $2 AND fence = $1;
//! ```
//!
//! [`FencedClaim`] runs the claim and returns the row; [`FencedWrite`] runs the write. Both
//! turn zero affected rows into [`FenceError::StaleFence`]. A holder whose row was claimed by
//! a newer token is refused at its next claim *and* at its next write, in every interleaving:
//! the newer holder's claim raises the fence before the newer holder reads, so the stale
//! holder's write (which requires `fence = <its token>`) can no longer match, whether it comes
//! before or after the newer holder's write. Claiming again with the token already claimed
//! (`fence <= $1`) is allowed, so one holder can read and write the row several times.
//! Inside one transaction the claim also row-locks the row until commit, so a newer holder's
//! claim waits and then reads the committed result.
//!
//! # Blind writes: compare the fence when writing
//!
//! When the written value does not depend on a read made under the lock (`status =
//! 'closed'`, or an increment computed by the database itself, `balance = balance + $3`), a
//! fence compared at the write is enough:
//!
//! ```sql
//! -- FencedTable::update_sql("balance = balance + $3")
//! UPDATE accounts SET balance = balance + $3, fence = $1 WHERE id = $2 AND fence < $1;
//! ```
//!
//! This write-only form refuses a stale holder whose write arrives *after* a newer holder's
//! first write. It is **not enough for a read-modify-write**: if the stale holder A read the
//! row, its lease expired, the newer holder B read the same row, and A then writes first, A's
//! write is accepted (the row has not seen B's token yet) and B's write, computed from the
//! same old read, overwrites it. One update is lost and no `StaleFence` is raised.
//! `tests/sql_fencing.rs` reproduces that interleaving, and shows the claim form refusing A.
//!
//! Using `fence < $1` (rather than `<=`) also makes one holder's writes to a row happen at
//! most once per token; a holder that writes the same row several times uses
//! `fence <= $1` instead.
//!
//! Tokens come from [`crate::table::TableLock`] (its fence column), from the Redis leases in
//! [`crate::redis_lock`], or from a [`FenceCounter`] bumped while holding any lock.
//!
#![cfg_attr(
    not(feature = "postgres"),
    doc = "[`FencedTable::add_fence_column_sql`]: crate#cargo-features\n[`FencedClaim`]: crate#cargo-features\n[`FencedWrite`]: crate#cargo-features\n[`FenceError::StaleFence`]: crate#cargo-features\n[`FenceCounter`]: crate#cargo-features"
)]
#![cfg_attr(
    not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
    doc = "[`crate::table::TableLock`]: crate#cargo-features"
)]
#![cfg_attr(
    not(feature = "redis"),
    doc = "[`crate::redis_lock`]: crate#cargo-features"
)]

#[cfg(feature = "postgres")]
use sqlx::postgres::{PgArguments, PgExecutor, PgRow};
#[cfg(feature = "postgres")]
use sqlx::query::{Query, QueryAs};
#[cfg(feature = "postgres")]
use sqlx::{Acquire, Postgres};

#[cfg(feature = "postgres")]
use crate::ident::{validate_identifier, validate_simple_identifier, InvalidIdentifier};

/// A fencing token: strictly increasing across successive acquisitions of one lock.
///
/// ```
/// use locklint_runtime::FencingToken;
/// assert!(FencingToken(2) > FencingToken(1));
/// assert_eq!(FencingToken(7).to_string(), "7");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(pub u64);

impl FencingToken {
    /// The token as a signed 64-bit integer, the type SQL databases bind most easily.
    /// Tokens above `i64::MAX` (never issued by this crate) saturate.
    ///
    /// ```
    /// use locklint_runtime::FencingToken;
    /// assert_eq!(FencingToken(42).as_i64(), 42);
    /// assert_eq!(FencingToken(u64::MAX).as_i64(), i64::MAX);
    /// ```
    pub fn as_i64(self) -> i64 {
        i64::try_from(self.0).unwrap_or(i64::MAX)
    }
}

impl std::fmt::Display for FencingToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Converts a fence read from a `BIGINT` column; negative values (never written by this
/// crate) map to 0.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub(crate) fn fence_from_i64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

#[cfg(feature = "postgres")]
/// The error returned by a fenced write.
///
/// ```no_run
/// # async fn demo(pool: &sqlx::PgPool, token: locklint_runtime::FencingToken) -> Result<(), sqlx::Error> {
/// use locklint_runtime::fence::{FenceError, FencedTable, FencedWrite};
/// let sql = FencedTable::new("jobs").unwrap().update_sql("state = 'done'");
/// match FencedWrite::new(&sql, token).bind(7_i64).execute(pool).await {
///     Ok(_) => {}
///     Err(FenceError::StaleFence { presented, .. }) => eprintln!("{presented} is stale: stop"),
///     Err(FenceError::Database(e)) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    /// The statement affected no rows: the resource has already accepted a token at least as
    /// new as `presented` (a newer one, for a claim or a write requiring the claimed token),
    /// or the target row does not exist. The write (or claim) did not happen.
    #[error("stale fencing token {presented}: the resource is at fence {current:?}")]
    StaleFence {
        /// The token that was presented with the refused write.
        presented: FencingToken,
        /// The fence currently stored on the target row, when a lookup was configured with
        /// [`FencedWrite::current_fence_from`] and the row exists; `None` otherwise.
        current: Option<u64>,
    },
    /// The database reported an error. As with any SQL statement, if the error arose after
    /// the statement was sent (e.g. a connection loss), the write may have been applied.
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

#[cfg(feature = "postgres")]
impl FenceError {
    /// True for [`FenceError::StaleFence`].
    ///
    /// ```
    /// use locklint_runtime::fence::FenceError;
    /// use locklint_runtime::FencingToken;
    /// let e = FenceError::StaleFence { presented: FencingToken(3), current: Some(4) };
    /// assert!(e.is_stale());
    /// ```
    pub fn is_stale(&self) -> bool {
        matches!(self, FenceError::StaleFence { .. })
    }
}

#[cfg(feature = "postgres")]
/// A PostgreSQL statement whose first parameter (`$1`) is a fencing token, being built:
/// [`FencedWrite`] (run with [`execute`](FencedWrite::execute)) or [`FencedClaim`] (run with
/// [`fetch`](FencedClaim::fetch)). Both bind their parameters and configure the
/// current-fence lookup the same way.
///
/// ```
/// use locklint_runtime::fence::{FencedTable, FencedWrite};
/// use locklint_runtime::FencingToken;
/// let sql = FencedTable::new("jobs").unwrap().update_sql("state = $3");
/// let write = FencedWrite::new(&sql, FencingToken(5)).bind(7_i64).bind("done");
/// assert_eq!(write.token(), FencingToken(5));
/// ```
#[must_use = "a fenced statement does nothing until executed or fetched"]
pub struct FencedStatement<'q, Q> {
    token: FencingToken,
    query: Q,
    lookup: Option<Query<'q, Postgres, PgArguments>>,
}

#[cfg(feature = "postgres")]
mod sealed {
    use sqlx::postgres::PgArguments;
    use sqlx::query::{Query, QueryAs};
    use sqlx::Postgres;

    /// A sqlx query that takes one more bind parameter.
    pub trait BindNext<'q>: Sized {
        fn bind_next<T>(self, value: T) -> Self
        where
            T: 'q + sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres>;
    }

    impl<'q> BindNext<'q> for Query<'q, Postgres, PgArguments> {
        fn bind_next<T>(self, value: T) -> Self
        where
            T: 'q + sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres>,
        {
            self.bind(value)
        }
    }

    impl<'q, R> BindNext<'q> for QueryAs<'q, Postgres, R, PgArguments> {
        fn bind_next<T>(self, value: T) -> Self
        where
            T: 'q + sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres>,
        {
            self.bind(value)
        }
    }
}

#[cfg(feature = "postgres")]
impl<'q, Q: sealed::BindNext<'q>> FencedStatement<'q, Q> {
    /// Binds the next parameter (`$2`, `$3`, ...).
    ///
    /// ```
    /// # use locklint_runtime::fence::FencedClaim;
    /// let claim = FencedClaim::<(i64,)>::new("UPDATE t SET fence = $1 WHERE id = $2 AND fence <= $1 RETURNING v", locklint_runtime::FencingToken(1))
    ///     .bind(42_i64);
    /// # let _ = claim;
    /// ```
    pub fn bind<T>(mut self, value: T) -> Self
    where
        T: 'q + sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres>,
    {
        self.query = self.query.bind_next(value);
        self
    }

    /// On rejection, read the row's current fence from `table` (keyed by `key`) so that
    /// [`FenceError::StaleFence::current`] is filled in. The lookup runs on the same
    /// connection (and transaction) as the statement.
    ///
    /// ```
    /// # use locklint_runtime::fence::{FencedClaim, FencedTable};
    /// let accounts = FencedTable::new("accounts").unwrap();
    /// let sql = accounts.claim_sql("balance");
    /// let claim = FencedClaim::<(i64,)>::new(&sql, locklint_runtime::FencingToken(1))
    ///     .bind(42_i64)
    ///     .current_fence_from(&accounts, 42_i64);
    /// # let _ = claim;
    /// ```
    pub fn current_fence_from<K>(mut self, table: &'q FencedTable, key: K) -> Self
    where
        K: 'q + sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres>,
    {
        self.lookup = Some(sqlx::query(&table.current_sql).bind(key));
        self
    }

    /// The token bound as `$1`.
    ///
    /// ```
    /// # use locklint_runtime::fence::FencedClaim;
    /// # use locklint_runtime::FencingToken;
    /// assert_eq!(FencedClaim::<(i64,)>::new("..", FencingToken(3)).token(), FencingToken(3));
    /// ```
    pub fn token(&self) -> FencingToken {
        self.token
    }
}

#[cfg(feature = "postgres")]
/// A fenced write: a PostgreSQL statement whose first parameter (`$1`) is a fencing token
/// and that affects no row when the token is stale.
///
/// ```no_run
/// # async fn demo(pool: &sqlx::PgPool, token: locklint_runtime::FencingToken) -> Result<(), locklint_runtime::fence::FenceError> {
/// use locklint_runtime::fence::{FencedTable, FencedWrite};
///
/// let accounts = FencedTable::new("accounts").expect("valid name");
/// let sql = accounts.update_sql("balance = $3"); // ... fence = $1 WHERE id = $2 AND fence < $1
/// FencedWrite::new(&sql, token)
///     .bind(42_i64) // $2: the row id
///     .bind(100_i64) // $3: the new balance
///     .current_fence_from(&accounts, 42_i64) // fill `current` on rejection
///     .execute(pool)
///     .await?;
/// # Ok(()) }
/// ```
pub type FencedWrite<'q> = FencedStatement<'q, Query<'q, Postgres, PgArguments>>;

#[cfg(feature = "postgres")]
impl<'q> FencedWrite<'q> {
    /// Prepares `sql` with `token` bound as `$1`. The statement must compare the stored fence
    /// with `$1`: `WHERE ... AND fence < $1` storing `$1` on success (write-only form, see
    /// [`FencedTable::update_sql`]), or `WHERE ... AND fence = $1` after a claim
    /// ([`FencedTable::claimed_update_sql`]).
    ///
    /// ```
    /// use locklint_runtime::fence::FencedWrite;
    /// use locklint_runtime::FencingToken;
    /// let write = FencedWrite::new(
    ///     "UPDATE jobs SET state = 'done', fence = $1 WHERE id = $2 AND fence < $1",
    ///     FencingToken(5),
    /// )
    /// .bind(7_i64);
    /// # let _ = write;
    /// ```
    pub fn new(sql: &'q str, token: FencingToken) -> Self {
        FencedStatement {
            token,
            query: sqlx::query(sql).bind(token.as_i64()),
            lookup: None,
        }
    }

    /// Runs the statement on `conn` (a `&PgPool`, `&mut PgConnection` or
    /// `&mut Transaction<Postgres>`) and returns the number of affected rows, which is at
    /// least 1; zero affected rows become [`FenceError::StaleFence`].
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool, token: locklint_runtime::FencingToken) -> Result<(), locklint_runtime::fence::FenceError> {
    /// use locklint_runtime::fence::{FencedTable, FencedWrite};
    /// let sql = FencedTable::new("jobs").unwrap().update_sql("state = 'done'");
    /// let mut tx = pool.begin().await?;
    /// let rows = FencedWrite::new(&sql, token).bind(7_i64).execute(&mut tx).await?;
    /// assert_eq!(rows, 1);
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn execute<'a, 'c, A>(
        self,
        conn: A,
    ) -> impl std::future::Future<Output = Result<u64, FenceError>> + Send + use<'a, 'q, A>
    where
        'q: 'a,
        A: Acquire<'c, Database = Postgres> + Send + 'a,
    {
        // Written as a plain fn returning `impl Future + Send` (rather than `async fn`) so the
        // future stays `Send` for `tokio::spawn` with a generic `Acquire`.
        async move {
            let mut conn = conn.acquire().await?;
            let rows = self.query.execute(&mut *conn).await?.rows_affected();
            if rows > 0 {
                return Ok(rows);
            }
            Err(refusal(self.token, self.lookup, &mut conn).await?)
        }
    }
}

#[cfg(feature = "postgres")]
/// A PostgreSQL claim: a statement that stamps the row with the fencing token (`$1`) and
/// returns it, so that later writes can require that token. See the
/// [module docs](self#read-modify-write-claim-the-row-when-reading).
///
/// ```no_run
/// # async fn demo(pool: &sqlx::PgPool, token: locklint_runtime::FencingToken) -> Result<(), locklint_runtime::fence::FenceError> {
/// use locklint_runtime::fence::{FencedClaim, FencedTable, FencedWrite};
///
/// let accounts = FencedTable::new("accounts").expect("valid name");
/// let claim = accounts.claim_sql("balance"); // UPDATE .. SET fence = $1 WHERE id = $2 AND fence <= $1 RETURNING balance
/// let write = accounts.claimed_update_sql("balance = $3"); // UPDATE .. WHERE id = $2 AND fence = $1
/// let (balance,): (i64,) = FencedClaim::new(&claim, token)
///     .bind(42_i64) // $2: the row id
///     .fetch(pool)
///     .await?; // Err(StaleFence) if a newer holder has claimed the row
/// FencedWrite::new(&write, token)
///     .bind(42_i64)
///     .bind(balance + 100) // computed from the claimed read
///     .execute(pool)
///     .await?; // Err(StaleFence) if a newer holder claimed the row since
/// # Ok(()) }
/// ```
pub type FencedClaim<'q, R> = FencedStatement<'q, QueryAs<'q, Postgres, R, PgArguments>>;

#[cfg(feature = "postgres")]
impl<'q, R> FencedClaim<'q, R>
where
    R: for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin,
{
    /// Prepares the claim `sql` (for example [`FencedTable::claim_sql`]) with `token` bound as
    /// `$1`. The statement must set the fence to `$1` only where the stored fence is not newer
    /// and return the row (`RETURNING ..`).
    ///
    /// ```
    /// use locklint_runtime::fence::{FencedClaim, FencedTable};
    /// use locklint_runtime::FencingToken;
    /// let sql = FencedTable::new("accounts").unwrap().claim_sql("balance");
    /// let claim = FencedClaim::<(i64,)>::new(&sql, FencingToken(7)).bind(42_i64);
    /// assert_eq!(claim.token(), FencingToken(7));
    /// ```
    pub fn new(sql: &'q str, token: FencingToken) -> Self {
        FencedStatement {
            token,
            query: sqlx::query_as(sql).bind(token.as_i64()),
            lookup: None,
        }
    }

    /// Runs the claim on `conn` (a `&PgPool`, `&mut PgConnection` or
    /// `&mut Transaction<Postgres>`) and returns the claimed row; no row becomes
    /// [`FenceError::StaleFence`] (a newer token has claimed or written the row, or the row
    /// does not exist), and the row is then left unchanged.
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), locklint_runtime::fence::FenceError> {
    /// # use locklint_runtime::fence::{FencedClaim, FencedTable};
    /// let sql = FencedTable::new("accounts").unwrap().claim_sql("balance");
    /// let (balance,): (i64,) = FencedClaim::new(&sql, locklint_runtime::FencingToken(9))
    ///     .bind(42_i64)
    ///     .fetch(pool)
    ///     .await?;
    /// # let _ = balance; Ok(()) }
    /// ```
    pub fn fetch<'a, 'c, A>(
        self,
        conn: A,
    ) -> impl std::future::Future<Output = Result<R, FenceError>> + Send + use<'a, 'q, A, R>
    where
        'q: 'a,
        R: 'a,
        A: Acquire<'c, Database = Postgres> + Send + 'a,
    {
        async move {
            let mut conn = conn.acquire().await?;
            if let Some(row) = self.query.fetch_optional(&mut *conn).await? {
                return Ok(row);
            }
            Err(refusal(self.token, self.lookup, &mut conn).await?)
        }
    }
}

#[cfg(feature = "postgres")]
/// The error of a fenced statement that matched no row, with the row's current fence when a
/// lookup was configured.
async fn refusal(
    presented: FencingToken,
    lookup: Option<Query<'_, Postgres, PgArguments>>,
    conn: &mut sqlx::PgConnection,
) -> Result<FenceError, sqlx::Error> {
    Ok(FenceError::StaleFence {
        presented,
        current: current_fence(lookup, conn).await?,
    })
}

#[cfg(feature = "postgres")]
/// Runs the optional current-fence lookup of a refused statement.
async fn current_fence(
    lookup: Option<Query<'_, Postgres, PgArguments>>,
    conn: &mut sqlx::PgConnection,
) -> Result<Option<u64>, sqlx::Error> {
    use sqlx::Row;
    match lookup {
        Some(lookup) => lookup
            .fetch_optional(conn)
            .await?
            .map(|row| row.try_get::<i64, _>(0).map(fence_from_i64))
            .transpose(),
        None => Ok(None),
    }
}

#[cfg(feature = "postgres")]
/// A table whose rows carry a fence column (PostgreSQL).
///
/// Holds the validated table, key column and fence column names and produces the SQL of the
/// fencing pattern described in the [module docs](self).
///
/// ```
/// use locklint_runtime::fence::FencedTable;
/// let jobs = FencedTable::with_columns("app.jobs", "job_id", "job_fence").unwrap();
/// assert_eq!(
///     jobs.claimed_update_sql("state = $3"),
///     "UPDATE app.jobs SET state = $3 WHERE job_id = $2 AND job_fence = $1"
/// );
/// assert!(FencedTable::new("jobs; DROP TABLE jobs").is_err());
/// ```
#[derive(Debug, Clone)]
pub struct FencedTable {
    table: String,
    key_column: String,
    fence_column: String,
    current_sql: String,
}

#[cfg(feature = "postgres")]
impl FencedTable {
    /// A table keyed by `id` with its fence in `fence`. `table` may be schema-qualified.
    ///
    /// ```
    /// let accounts = locklint_runtime::fence::FencedTable::new("billing.accounts").unwrap();
    /// assert_eq!(accounts.table(), "billing.accounts");
    /// ```
    pub fn new(table: &str) -> Result<Self, InvalidIdentifier> {
        Self::with_columns(table, "id", "fence")
    }

    /// A table keyed by `key_column` with its fence in `fence_column`; every name is
    /// validated as an identifier.
    ///
    /// ```
    /// use locklint_runtime::fence::FencedTable;
    /// let jobs = FencedTable::with_columns("jobs", "job_id", "job_fence").unwrap();
    /// assert!(jobs.update_sql("state = $3").ends_with("WHERE job_id = $2 AND job_fence < $1"));
    /// ```
    pub fn with_columns(
        table: &str,
        key_column: &str,
        fence_column: &str,
    ) -> Result<Self, InvalidIdentifier> {
        validate_identifier(table)?;
        validate_simple_identifier(key_column)?;
        validate_simple_identifier(fence_column)?;
        Ok(FencedTable {
            current_sql: format!("SELECT {fence_column} FROM {table} WHERE {key_column} = $1"),
            table: table.to_owned(),
            key_column: key_column.to_owned(),
            fence_column: fence_column.to_owned(),
        })
    }

    /// The table name.
    ///
    /// ```
    /// let accounts = locklint_runtime::fence::FencedTable::new("billing.accounts").unwrap();
    /// assert_eq!(accounts.table(), "billing.accounts");
    /// ```
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The migration adding the fence column:
    /// `ALTER TABLE <table> ADD COLUMN IF NOT EXISTS <fence> BIGINT NOT NULL DEFAULT 0`.
    ///
    /// ```
    /// let accounts = locklint_runtime::fence::FencedTable::new("accounts").unwrap();
    /// assert_eq!(
    ///     accounts.add_fence_column_sql(),
    ///     "ALTER TABLE accounts ADD COLUMN IF NOT EXISTS fence BIGINT NOT NULL DEFAULT 0"
    /// );
    /// ```
    pub fn add_fence_column_sql(&self) -> String {
        format!(
            "ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} BIGINT NOT NULL DEFAULT 0",
            self.table, self.fence_column
        )
    }

    /// Runs [`Self::add_fence_column_sql`]; idempotent.
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
    /// let accounts = locklint_runtime::fence::FencedTable::new("accounts").unwrap();
    /// accounts.add_fence_column(pool).await?;
    /// # Ok(()) }
    /// ```
    pub async fn add_fence_column<'e, E: PgExecutor<'e>>(
        &self,
        executor: E,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(&self.add_fence_column_sql())
            .execute(executor)
            .await
            .map(|_| ())
    }

    /// A write-only fenced `UPDATE` of one row: `UPDATE <table> SET <set_clause>, <fence> = $1
    /// WHERE <key> = $2 AND <fence> < $1`. Parameters of `set_clause` start at `$3`.
    ///
    /// Enough for blind writes only. When `set_clause` uses a value read earlier under the
    /// lock, use [`Self::claim_sql`] for the read and [`Self::claimed_update_sql`] for the
    /// write instead: with this form a stale holder that writes before the newer holder's
    /// first write is accepted, and the newer holder's write then loses its update (see the
    /// [module docs](self)).
    ///
    /// ```
    /// use locklint_runtime::fence::FencedTable;
    /// let accounts = FencedTable::new("accounts").unwrap();
    /// assert_eq!(
    ///     accounts.update_sql("balance = balance + $3"),
    ///     "UPDATE accounts SET balance = balance + $3, fence = $1 WHERE id = $2 AND fence < $1"
    /// );
    /// ```
    pub fn update_sql(&self, set_clause: &str) -> String {
        let (t, k, f) = (&self.table, &self.key_column, &self.fence_column);
        format!("UPDATE {t} SET {set_clause}, {f} = $1 WHERE {k} = $2 AND {f} < $1")
    }

    /// The claim that starts a read-modify-write: `UPDATE <table> SET <fence> = $1
    /// WHERE <key> = $2 AND <fence> <= $1 RETURNING <returning>`. Run it with
    /// [`FencedClaim`]; it returns the row only if no newer token has claimed it, and stamps
    /// the row with the token so that an older holder's later writes are refused.
    ///
    /// ```
    /// use locklint_runtime::fence::FencedTable;
    /// let accounts = FencedTable::new("accounts").unwrap();
    /// assert_eq!(
    ///     accounts.claim_sql("balance"),
    ///     "UPDATE accounts SET fence = $1 WHERE id = $2 AND fence <= $1 RETURNING balance"
    /// );
    /// ```
    pub fn claim_sql(&self, returning: &str) -> String {
        let (t, k, f) = (&self.table, &self.key_column, &self.fence_column);
        format!("UPDATE {t} SET {f} = $1 WHERE {k} = $2 AND {f} <= $1 RETURNING {returning}")
    }

    /// The write of a read-modify-write, after [`Self::claim_sql`]: `UPDATE <table> SET
    /// <set_clause> WHERE <key> = $2 AND <fence> = $1`. It matches only while the row still
    /// carries the claimed token. Parameters of `set_clause` start at `$3`. Run it with
    /// [`FencedWrite`].
    ///
    /// ```
    /// use locklint_runtime::fence::FencedTable;
    /// let accounts = FencedTable::new("accounts").unwrap();
    /// assert_eq!(
    ///     accounts.claimed_update_sql("balance = $3"),
    ///     "UPDATE accounts SET balance = $3 WHERE id = $2 AND fence = $1"
    /// );
    /// ```
    pub fn claimed_update_sql(&self, set_clause: &str) -> String {
        let (t, k, f) = (&self.table, &self.key_column, &self.fence_column);
        format!("UPDATE {t} SET {set_clause} WHERE {k} = $2 AND {f} = $1")
    }

    /// The fence currently stored on the row with key `key`, or `None` if there is no such row.
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
    /// let accounts = locklint_runtime::fence::FencedTable::new("accounts").unwrap();
    /// let fence: Option<u64> = accounts.current_fence(pool, 42_i64).await?;
    /// # let _ = fence; Ok(()) }
    /// ```
    pub async fn current_fence<'e, 'q, E, K>(
        &'q self,
        executor: E,
        key: K,
    ) -> Result<Option<u64>, sqlx::Error>
    where
        E: PgExecutor<'e>,
        K: 'q + sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres>,
    {
        let fence: Option<i64> = sqlx::query_scalar(&self.current_sql)
            .bind(key)
            .fetch_optional(executor)
            .await?;
        Ok(fence.map(fence_from_i64))
    }
}

#[cfg(feature = "postgres")]
/// The PostgreSQL migration creating the default fence counter table `locklint_fences`.
///
/// ```
/// assert!(locklint_runtime::fence::FENCE_COUNTER_MIGRATION_POSTGRES.contains("locklint_fences"));
/// ```
pub const FENCE_COUNTER_MIGRATION_POSTGRES: &str =
    include_str!("../migrations/postgres/0003_locklint_fences.sql");

#[cfg(feature = "postgres")]
/// A named, strictly increasing counter in PostgreSQL, used to mint fencing tokens for locks
/// that have none of their own (such as [advisory locks](crate::advisory)).
///
/// Call [`FenceCounter::next`] *after* acquiring the lock: every later holder then draws a
/// larger token than every earlier one, and fenced writes reject the earlier holders.
#[derive(Debug, Clone)]
///
/// ```no_run
/// # async fn demo(pool: &sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
/// use locklint_runtime::advisory::AdvisoryLock;
/// use locklint_runtime::fence::FenceCounter;
/// let fences = FenceCounter::default(); // the table `locklint_fences`
/// fences.migrate(pool).await?;
/// if let Some(mut guard) = AdvisoryLock::try_lock(pool, "billing").await? {
///     let token = fences.next(&mut *guard.connection().await, "billing").await?;
///     // ... fenced writes with `token` ...
///     # let _ = token;
///     guard.unlock().await?;
/// }
/// # Ok(()) }
/// ```
pub struct FenceCounter {
    table: String,
    next_sql: String,
}

#[cfg(feature = "postgres")]
impl Default for FenceCounter {
    fn default() -> Self {
        Self::with_table("locklint_fences").expect("default table name is valid")
    }
}

#[cfg(feature = "postgres")]
impl FenceCounter {
    /// A counter table named `table` (may be schema-qualified).
    ///
    /// ```
    /// use locklint_runtime::fence::FenceCounter;
    /// let fences = FenceCounter::with_table("app.fences").unwrap();
    /// assert!(fences.migration_sql().contains("app.fences"));
    /// ```
    pub fn with_table(table: &str) -> Result<Self, InvalidIdentifier> {
        validate_identifier(table)?;
        Ok(FenceCounter {
            next_sql: format!(
                "INSERT INTO {table} AS c (name, fence) VALUES ($1, 1) \
                 ON CONFLICT (name) DO UPDATE SET fence = c.fence + 1 RETURNING fence"
            ),
            table: table.to_owned(),
        })
    }

    /// The migration creating this counter table.
    ///
    /// ```
    /// let sql = locklint_runtime::fence::FenceCounter::default().migration_sql();
    /// assert!(sql.contains("CREATE TABLE IF NOT EXISTS locklint_fences"));
    /// ```
    pub fn migration_sql(&self) -> String {
        FENCE_COUNTER_MIGRATION_POSTGRES.replace("locklint_fences", &self.table)
    }

    /// Creates the counter table if it does not exist.
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
    /// locklint_runtime::fence::FenceCounter::default().migrate(pool).await?;
    /// # Ok(()) }
    /// ```
    pub async fn migrate<'e, E: PgExecutor<'e>>(&self, executor: E) -> Result<(), sqlx::Error> {
        let sql = self.migration_sql();
        executor.execute(sqlx::raw_sql(&sql)).await.map(|_| ())
    }

    /// Atomically increments the counter `name` (starting at 1) and returns the new value.
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
    /// let fences = locklint_runtime::fence::FenceCounter::default();
    /// let a = fences.next(pool, "billing").await?;
    /// let b = fences.next(pool, "billing").await?;
    /// assert!(b > a);
    /// # Ok(()) }
    /// ```
    pub async fn next<'e, E: PgExecutor<'e>>(
        &self,
        executor: E,
        name: &str,
    ) -> Result<FencingToken, sqlx::Error> {
        let fence: i64 = sqlx::query_scalar(&self.next_sql)
            .bind(name)
            .fetch_one(executor)
            .await?;
        Ok(FencingToken(fence_from_i64(fence)))
    }
}
