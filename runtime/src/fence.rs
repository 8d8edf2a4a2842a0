//! Fencing tokens: a number issued with each acquisition, checked by the protected resource.
//!
//! A lock alone cannot stop a holder that was paused (GC, swap, VM migration, a long
//! `await`) from writing after its lease expired and somebody else took over. A fencing
//! token closes that gap: every acquisition hands out a larger number, the protected rows
//! remember the largest number that wrote them, and a write carrying a smaller or equal
//! number is refused *by the resource itself*.
//!
//! # The SQL pattern
//!
//! Give the protected table a fence column (see [`FencedTable::add_fence_column_sql`]):
//!
//! ```sql
//! ALTER TABLE accounts ADD COLUMN IF NOT EXISTS fence BIGINT NOT NULL DEFAULT 0;
//! ```
//!
//! and make every write conditional on the token, binding the token as `$1`:
//!
//! ```sql
//! UPDATE accounts SET balance = $3, fence = $1 WHERE id = $2 AND fence < $1;
//! ```
//!
//! One affected row means the write happened and the row now remembers the token; zero rows
//! means a newer holder has already written (or the row does not exist). [`FencedWrite`] runs
//! such a statement and turns zero affected rows into [`FenceError::StaleFence`].
//!
//! Using `fence < $1` (rather than `<=`) also makes one holder's writes to a row happen at
//! most once per token; a holder that writes the same row several times uses
//! `fence <= $1` instead.
//!
//! Tokens come from [`crate::table::TableLock`] (its fence column), from the Redis leases in
//! [`crate::redis_lock`], or from a [`FenceCounter`] bumped while holding any lock.

use sqlx::postgres::{PgArguments, PgExecutor};
use sqlx::query::Query;
use sqlx::{Acquire, Postgres};

use crate::ident::{validate_identifier, validate_simple_identifier, InvalidIdentifier};

/// A fencing token: strictly increasing across successive acquisitions of one lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(pub u64);

impl FencingToken {
    /// The token as a signed 64-bit integer, the type SQL databases bind most easily.
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
pub(crate) fn fence_from_i64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// The error returned by a fenced write.
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    /// The statement affected no rows: the resource has already accepted a token at least as
    /// new as `presented` (or the target row does not exist). The write did not happen.
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

impl FenceError {
    /// True for [`FenceError::StaleFence`].
    pub fn is_stale(&self) -> bool {
        matches!(self, FenceError::StaleFence { .. })
    }
}

/// A PostgreSQL statement whose first parameter (`$1`) is a fencing token.
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
#[must_use = "a fenced write does nothing until executed"]
pub struct FencedWrite<'q> {
    token: FencingToken,
    query: Query<'q, Postgres, PgArguments>,
    lookup: Option<Query<'q, Postgres, PgArguments>>,
}

impl<'q> FencedWrite<'q> {
    /// Prepares `sql` with `token` bound as `$1`. The statement must compare the stored fence
    /// with `$1` (for example `WHERE ... AND fence < $1`) and store `$1` on success.
    pub fn new(sql: &'q str, token: FencingToken) -> Self {
        FencedWrite {
            token,
            query: sqlx::query(sql).bind(token.as_i64()),
            lookup: None,
        }
    }

    /// Binds the next parameter (`$2`, `$3`, ...).
    pub fn bind<T>(mut self, value: T) -> Self
    where
        T: 'q + sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres>,
    {
        self.query = self.query.bind(value);
        self
    }

    /// On rejection, read the row's current fence from `table` (keyed by `key`) so that
    /// [`FenceError::StaleFence::current`] is filled in. The lookup runs on the same
    /// connection (and transaction) as the write.
    pub fn current_fence_from<K>(mut self, table: &'q FencedTable, key: K) -> Self
    where
        K: 'q + sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres>,
    {
        self.lookup = Some(sqlx::query(&table.current_sql).bind(key));
        self
    }

    /// The token bound as `$1`.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// Runs the statement on `conn` (a `&PgPool`, `&mut PgConnection` or
    /// `&mut Transaction<Postgres>`) and returns the number of affected rows, which is at
    /// least 1; zero affected rows become [`FenceError::StaleFence`].
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
            let current = match self.lookup {
                Some(lookup) => {
                    use sqlx::Row;
                    lookup
                        .fetch_optional(&mut *conn)
                        .await?
                        .map(|row| row.try_get::<i64, _>(0).map(fence_from_i64))
                        .transpose()?
                }
                None => None,
            };
            Err(FenceError::StaleFence {
                presented: self.token,
                current,
            })
        }
    }
}

/// A table whose rows carry a fence column (PostgreSQL).
///
/// Holds the validated table, key column and fence column names and produces the SQL of the
/// fencing pattern described in the [module docs](self).
#[derive(Debug, Clone)]
pub struct FencedTable {
    table: String,
    key_column: String,
    fence_column: String,
    current_sql: String,
}

impl FencedTable {
    /// A table keyed by `id` with its fence in `fence`. `table` may be schema-qualified.
    pub fn new(table: &str) -> Result<Self, InvalidIdentifier> {
        Self::with_columns(table, "id", "fence")
    }

    /// A table keyed by `key_column` with its fence in `fence_column`.
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
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The migration adding the fence column:
    /// `ALTER TABLE <table> ADD COLUMN IF NOT EXISTS <fence> BIGINT NOT NULL DEFAULT 0`.
    pub fn add_fence_column_sql(&self) -> String {
        format!(
            "ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} BIGINT NOT NULL DEFAULT 0",
            self.table, self.fence_column
        )
    }

    /// Runs [`Self::add_fence_column_sql`]; idempotent.
    pub async fn add_fence_column<'e, E: PgExecutor<'e>>(
        &self,
        executor: E,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(&self.add_fence_column_sql())
            .execute(executor)
            .await
            .map(|_| ())
    }

    /// A fenced `UPDATE` of one row: `UPDATE <table> SET <set_clause>, <fence> = $1
    /// WHERE <key> = $2 AND <fence> < $1`. Parameters of `set_clause` start at `$3`.
    pub fn update_sql(&self, set_clause: &str) -> String {
        let (t, k, f) = (&self.table, &self.key_column, &self.fence_column);
        format!("UPDATE {t} SET {set_clause}, {f} = $1 WHERE {k} = $2 AND {f} < $1")
    }

    /// The fence currently stored on the row with key `key`, or `None` if there is no such row.
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

/// The PostgreSQL migration creating the default fence counter table `locklint_fences`.
pub const FENCE_COUNTER_MIGRATION_POSTGRES: &str =
    include_str!("../migrations/postgres/0003_locklint_fences.sql");

/// A named, strictly increasing counter in PostgreSQL, used to mint fencing tokens for locks
/// that have none of their own (such as [advisory locks](crate::advisory)).
///
/// Call [`FenceCounter::next`] *after* acquiring the lock: every later holder then draws a
/// larger token than every earlier one, and fenced writes reject the earlier holders.
#[derive(Debug, Clone)]
pub struct FenceCounter {
    table: String,
    next_sql: String,
}

impl Default for FenceCounter {
    fn default() -> Self {
        Self::with_table("locklint_fences").expect("default table name is valid")
    }
}

impl FenceCounter {
    /// A counter table named `table` (may be schema-qualified).
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
    pub fn migration_sql(&self) -> String {
        FENCE_COUNTER_MIGRATION_POSTGRES.replace("locklint_fences", &self.table)
    }

    /// Creates the counter table if it does not exist.
    pub async fn migrate<'e, E: PgExecutor<'e>>(&self, executor: E) -> Result<(), sqlx::Error> {
        let sql = self.migration_sql();
        executor.execute(sqlx::raw_sql(&sql)).await.map(|_| ())
    }

    /// Atomically increments the counter `name` (starting at 1) and returns the new value.
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
