//! Idempotent claims: "do this at most once per (scope, key)", enforced by a unique
//! constraint instead of a lock.
//!
//! A lock can only make duplicate work *unlikely* (a paused holder can lose its lock and
//! carry on). A unique key makes it *impossible*: the database accepts the first insert of
//! `(scope, key)` and refuses every later one, however the callers interleave. This is the
//! fix for the classic "invoice generated twice" bug: claim `(period, customer_id)` before
//! (ideally in the same transaction as) creating the invoice.
//!
//! ```no_run
//! # async fn demo(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
//! use locklint_runtime::idempotency::{claim_once, Claim};
//!
//! let mut tx = pool.begin().await?;
//! if claim_once(&mut *tx, "invoice:2026-11", "customer-42").await? == Claim::Claimed {
//!     // ... insert the invoice with the same transaction ...
//! }
//! tx.commit().await?; // the claim and the invoice become visible together, or neither does
//! # Ok(()) }
//! ```
//!
//! Statements per database (table `locklint_claims`, primary key `(scope, claim_key)`):
//!
//! | Database | Statement | Duplicate detected by |
//! |---|---|---|
//! | PostgreSQL | `INSERT .. ON CONFLICT (scope, claim_key) DO NOTHING` | 0 rows affected |
//! | SQLite | `INSERT .. ON CONFLICT (scope, claim_key) DO NOTHING` | 0 rows affected |
//! | MySQL / MariaDB | plain `INSERT` | duplicate-key error (1062) |
//!
//! MySQL uses a plain `INSERT` rather than `INSERT IGNORE` because `IGNORE` also downgrades
//! other errors to warnings (an over-long key would be silently truncated and could collide
//! with another key). A duplicate-key error in MySQL only rolls back the statement, not the
//! surrounding transaction.

use futures_util::future::BoxFuture;
#[cfg(feature = "mysql")]
use sqlx::MySql;
#[cfg(feature = "postgres")]
use sqlx::Postgres;
#[cfg(feature = "sqlite")]
use sqlx::Sqlite;
use sqlx::{Database, Executor};

use crate::ident::{validate_identifier, InvalidIdentifier};
use crate::table::Dialect;

/// The default claims table name.
///
/// ```
/// assert_eq!(locklint_runtime::idempotency::ClaimTable::default().table(), "locklint_claims");
/// ```
pub const DEFAULT_TABLE: &str = "locklint_claims";

/// Migration creating the default claims table in PostgreSQL.
///
/// ```
/// assert!(locklint_runtime::idempotency::MIGRATION_POSTGRES.contains("locklint_claims"));
/// ```
pub const MIGRATION_POSTGRES: &str =
    include_str!("../migrations/postgres/0002_locklint_claims.sql");
/// Migration creating the default claims table in MySQL / MariaDB.
///
/// ```
/// assert!(locklint_runtime::idempotency::MIGRATION_MYSQL.contains("locklint_claims"));
/// ```
pub const MIGRATION_MYSQL: &str = include_str!("../migrations/mysql/0002_locklint_claims.sql");
/// Migration creating the default claims table in SQLite.
///
/// ```
/// assert!(locklint_runtime::idempotency::MIGRATION_SQLITE.contains("locklint_claims"));
/// ```
pub const MIGRATION_SQLITE: &str = include_str!("../migrations/sqlite/0002_locklint_claims.sql");

/// The outcome of a claim.
///
/// ```no_run
/// # async fn demo(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
/// use locklint_runtime::idempotency::{claim_once, Claim};
/// match claim_once(pool, "welcome-mail", "user-42").await? {
///     Claim::Claimed => { /* send it */ }
///     Claim::AlreadyDone => { /* sent before: skip */ }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Claim {
    /// This call inserted the claim: the caller should do the work.
    Claimed,
    /// The claim already existed (committed, or pending in a concurrent transaction that
    /// then committed): the work is done or being done elsewhere; skip it.
    AlreadyDone,
}

/// Databases supported by [`claim_once`] and [`ClaimTable`]: PostgreSQL, MySQL/MariaDB and
/// SQLite. Sealed; implemented by `sqlx::Postgres`, `sqlx::MySql` and `sqlx::Sqlite` (each
/// with its cargo feature).
///
/// ```
/// use locklint_runtime::idempotency::ClaimDatabase;
/// use locklint_runtime::table::Dialect;
/// assert_eq!(<sqlx::Postgres as ClaimDatabase>::DIALECT, Dialect::Postgres);
/// ```
pub trait ClaimDatabase: Database + private::Sealed {
    /// The dialect of this database.
    const DIALECT: Dialect;

    #[doc(hidden)]
    fn run<'a, 'e, E>(
        sql: &'a str,
        executor: E,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<u64, sqlx::Error>>
    where
        E: Executor<'e, Database = Self> + 'a,
        'e: 'a;
}

mod private {
    pub trait Sealed {}
    #[cfg(feature = "postgres")]
    impl Sealed for sqlx::Postgres {}
    #[cfg(feature = "mysql")]
    impl Sealed for sqlx::MySql {}
    #[cfg(feature = "sqlite")]
    impl Sealed for sqlx::Sqlite {}
}

macro_rules! claim_database {
    ($db:ty, $dialect:expr) => {
        impl ClaimDatabase for $db {
            const DIALECT: Dialect = $dialect;

            fn run<'a, 'e, E>(
                sql: &'a str,
                executor: E,
                scope: &'a str,
                key: &'a str,
            ) -> BoxFuture<'a, Result<u64, sqlx::Error>>
            where
                E: Executor<'e, Database = Self> + 'a,
                'e: 'a,
            {
                Box::pin(async move {
                    let query = sqlx::query::<$db>(sql).bind(scope).bind(key);
                    Ok(executor.execute(query).await?.rows_affected())
                })
            }
        }
    };
}

#[cfg(feature = "postgres")]
claim_database!(Postgres, Dialect::Postgres);
#[cfg(feature = "mysql")]
claim_database!(MySql, Dialect::MySql);
#[cfg(feature = "sqlite")]
claim_database!(Sqlite, Dialect::Sqlite);

/// A claims table (default [`DEFAULT_TABLE`], `locklint_claims`).
///
/// ```no_run
/// # async fn demo(pool: &sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
/// use locklint_runtime::idempotency::{Claim, ClaimTable};
/// let invoices = ClaimTable::new("invoice_claims")?;
/// invoices.migrate(pool).await?;
/// let mut tx = pool.begin().await?;
/// if invoices.claim(&mut *tx, "2026-11", "customer-7").await? == Claim::Claimed {
///     // create the invoice in the same transaction
/// }
/// tx.commit().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ClaimTable {
    table: String,
}

impl Default for ClaimTable {
    fn default() -> Self {
        ClaimTable {
            table: DEFAULT_TABLE.to_owned(),
        }
    }
}

impl ClaimTable {
    /// A claims table named `table` (validated as an identifier; may be `schema.table`).
    ///
    /// ```
    /// use locklint_runtime::idempotency::ClaimTable;
    /// assert_eq!(ClaimTable::new("app.claims").unwrap().table(), "app.claims");
    /// assert!(ClaimTable::new("claims; DROP TABLE x").is_err());
    /// ```
    pub fn new(table: &str) -> Result<Self, InvalidIdentifier> {
        validate_identifier(table)?;
        Ok(ClaimTable {
            table: table.to_owned(),
        })
    }

    /// The table name.
    ///
    /// ```
    /// assert_eq!(locklint_runtime::idempotency::ClaimTable::default().table(), "locklint_claims");
    /// ```
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The migration SQL creating this claims table in `dialect`.
    ///
    /// ```
    /// use locklint_runtime::idempotency::ClaimTable;
    /// use locklint_runtime::table::Dialect;
    /// let sql = ClaimTable::new("mail_claims").unwrap().migration_sql(Dialect::Sqlite);
    /// assert!(sql.contains("mail_claims"));
    /// ```
    pub fn migration_sql(&self, dialect: Dialect) -> String {
        let sql = match dialect {
            Dialect::Postgres => MIGRATION_POSTGRES,
            Dialect::MySql => MIGRATION_MYSQL,
            Dialect::Sqlite => MIGRATION_SQLITE,
        };
        sql.replace(DEFAULT_TABLE, &self.table)
    }

    /// Creates the claims table if it does not exist.
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
    /// locklint_runtime::idempotency::ClaimTable::default().migrate(pool).await?;
    /// # Ok(()) }
    /// ```
    pub async fn migrate<'e, E>(&self, executor: E) -> Result<(), sqlx::Error>
    where
        E: Executor<'e>,
        E::Database: ClaimDatabase,
    {
        let sql = self.migration_sql(<E::Database as ClaimDatabase>::DIALECT);
        executor.execute(sqlx::raw_sql(&sql)).await.map(|_| ())
    }

    fn insert_sql(&self, dialect: Dialect) -> String {
        let t = &self.table;
        match dialect {
            Dialect::Postgres | Dialect::Sqlite => format!(
                "INSERT INTO {t} (scope, claim_key) VALUES ($1, $2) \
                 ON CONFLICT (scope, claim_key) DO NOTHING"
            ),
            Dialect::MySql => format!("INSERT INTO {t} (scope, claim_key) VALUES (?, ?)"),
        }
    }

    fn delete_sql(&self, dialect: Dialect) -> String {
        let t = &self.table;
        match dialect {
            Dialect::Postgres | Dialect::Sqlite => {
                format!("DELETE FROM {t} WHERE scope = $1 AND claim_key = $2")
            }
            Dialect::MySql => format!("DELETE FROM {t} WHERE scope = ? AND claim_key = ?"),
        }
    }

    /// Claims `(scope, key)`: [`Claim::Claimed`] for exactly one caller, however many claim
    /// concurrently; [`Claim::AlreadyDone`] for all others. Run it in the same transaction as
    /// the work it guards, so that a failed attempt leaves no claim behind.
    ///
    /// While a concurrent transaction holds an uncommitted claim of the same key, this call
    /// waits for it to commit (then `AlreadyDone`) or roll back (then `Claimed`).
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
    /// use locklint_runtime::idempotency::{Claim, ClaimTable};
    /// let claims = ClaimTable::default();
    /// let first = claims.claim(pool, "export", "2026-12-01").await?;
    /// let again = claims.claim(pool, "export", "2026-12-01").await?;
    /// assert_eq!((first, again), (Claim::Claimed, Claim::AlreadyDone));
    /// # Ok(()) }
    /// ```
    pub async fn claim<'e, E>(
        &self,
        executor: E,
        scope: &str,
        key: &str,
    ) -> Result<Claim, sqlx::Error>
    where
        E: Executor<'e>,
        E::Database: ClaimDatabase,
    {
        let dialect = <E::Database as ClaimDatabase>::DIALECT;
        let sql = self.insert_sql(dialect);
        match <E::Database as ClaimDatabase>::run(&sql, executor, scope, key).await {
            Ok(0) => Ok(Claim::AlreadyDone),
            Ok(_) => Ok(Claim::Claimed),
            Err(sqlx::Error::Database(db))
                if dialect == Dialect::MySql
                    && db.kind() == sqlx::error::ErrorKind::UniqueViolation =>
            {
                Ok(Claim::AlreadyDone)
            }
            Err(e) => Err(e),
        }
    }

    /// Deletes the claim of `(scope, key)` so the work can be claimed again; returns whether
    /// a claim existed. Only for compensating a claim made outside the transaction of its
    /// work, after that work is known to have failed.
    ///
    /// ```no_run
    /// # async fn demo(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
    /// use locklint_runtime::idempotency::{Claim, ClaimTable};
    /// # async fn upload() -> Result<(), ()> { Ok(()) }
    /// let claims = ClaimTable::default();
    /// if claims.claim(pool, "upload", "report-7").await? == Claim::Claimed && upload().await.is_err() {
    ///     claims.unclaim(pool, "upload", "report-7").await?; // let a later run try again
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn unclaim<'e, E>(
        &self,
        executor: E,
        scope: &str,
        key: &str,
    ) -> Result<bool, sqlx::Error>
    where
        E: Executor<'e>,
        E::Database: ClaimDatabase,
    {
        let sql = self.delete_sql(<E::Database as ClaimDatabase>::DIALECT);
        Ok(<E::Database as ClaimDatabase>::run(&sql, executor, scope, key).await? > 0)
    }
}

/// [`ClaimTable::claim`] on the default table `locklint_claims` (create it with
/// [`ClaimTable::migrate`]). `executor` is a pool, connection or transaction
/// (`&mut *tx`) of PostgreSQL, MySQL/MariaDB or SQLite.
///
/// ```no_run
/// # async fn demo(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
/// use locklint_runtime::idempotency::{claim_once, Claim};
/// let mut tx = pool.begin().await?;
/// if claim_once(&mut *tx, "invoice:2026-11", "customer-7").await? == Claim::Claimed {
///     // create the invoice in the same transaction
/// }
/// tx.commit().await?;
/// # Ok(()) }
/// ```
pub async fn claim_once<'e, E>(executor: E, scope: &str, key: &str) -> Result<Claim, sqlx::Error>
where
    E: Executor<'e>,
    E::Database: ClaimDatabase,
{
    ClaimTable::default().claim(executor, scope, key).await
}
