//! Correct distributed-lock primitives.
//!
//! | Module | Primitive | Backing store |
//! |---|---|---|
//! | [`redis_lock`] | leases (`SET NX PX` + compare-and-delete) with a fencing token | Redis |
//! | [`advisory`] | session and transaction advisory locks on a dedicated connection | PostgreSQL |
//! | [`table`] | leases in a lock table, judged by the database clock, with a fence column | PostgreSQL, MySQL/MariaDB, SQLite |
//! | [`fence`] | fenced writes: the resource rejects stale tokens | PostgreSQL |
//! | [`idempotency`] | `claim_once`: at most once per key, by a unique constraint | PostgreSQL, MySQL/MariaDB, SQLite |
//! | [`lock`] | the [`Lock`](lock::Lock)/[`Lease`](lock::Lease) traits every backend implements, and an in-memory implementation for tests | any |
//!
//! # Efficiency or correctness?
//!
//! Decide first what happens if two processes run the critical section at the same time.
//!
//! * **For efficiency** the lock only avoids *wasted* work: two workers re-rendering the same
//!   report, or hammering the same upstream API. An occasional overlap costs some CPU and
//!   nothing else. Any lock is fine here, including a single Redis node ([`redis_lock`]) or
//!   a session advisory lock ([`advisory`]); do not pay for more.
//! * **For correctness** an overlap corrupts data: an invoice issued twice, a balance updated
//!   from a stale read, a file overwritten by an old writer. *No lock alone is enough*: a
//!   holder can be paused (GC, swap, VM freeze, a slow `await`) after its lease expired, or
//!   cut off by a partition after its session died, and still believe it holds the lock. The
//!   protected resource must take part:
//!   * **fence** every write: pass the lease's [`FencingToken`] and let the resource refuse
//!     tokens older than the last one it accepted (`UPDATE .. SET .., fence = $1 WHERE id = $2
//!     AND fence < $1`, see [`fence`]), or
//!   * make the effect **idempotent** with a unique key (`claim_once`, or a unique
//!     `(period, customer_id)` on the invoices table itself, see [`idempotency`]), so that
//!     doing it twice is harmless.
//!
//!   The lock then remains useful, but only for efficiency.
//!
//! # Guarantees
//!
//! What each primitive protects against ("yes" = the failure cannot cause two effective
//! holders / a duplicate or lost write; "no" = it can):
//!
//! | Primitive | Process pause past the TTL | Clock drift between clients | Failover without replication | Network partition | Connection or server lost mid-hold (with the keep-alive) |
//! |---|---|---|---|---|---|
//! | Redis lease ([`redis_lock`]) | no: the paused holder resumes and writes | yes (expiry runs on the Redis server), but a jump of the *server* clock can expire a lease early | no: a promoted replica that missed the `SET` grants the lock again | no: the cut-off holder keeps working after expiry | `lost()` within one renewal interval (TTL/3) of the first failed renewal, one interval before the validity ends; a client that reconnects before then keeps the lease |
//! | Redis lease + fence checked by the resource | yes: the old token is rejected | yes | yes for the fence: a lost counter restarts at the server's time in microseconds, above every earlier fence (unless the new primary's clock is behind by more than the failover took) | yes: writes through the partitioned holder's old token are rejected | as the Redis lease; writes after the loss are refused by the fence |
//! | Advisory session lock ([`advisory`]) | no: the lock lasts while the session lives, but a paused holder whose session was killed keeps running | yes (no clocks involved) | no: advisory locks are not replicated, a promoted standby has none | no: the server ends the session when it notices, the client may not | `lost()` at the first failed session check (every keep-alive interval) |
//! | Advisory xact lock | no (same as the session lock), but work done *in the same transaction* is safe: if the session dies the transaction rolls back | yes | no for external effects; in-transaction writes are lost with the transaction, not duplicated | no for external effects; in-transaction writes roll back | the transaction fails at its next statement and rolls back |
//! | Lock table ([`table`]) + fence | yes with the fence (without it: no) | yes: expiry is judged by the database clock only (for SQLite, the clock of the host the processes share) | yes if the table is replicated synchronously (the lock and the fence fail over together) | yes with the fence | as the Redis lease |
//! | `claim_once` ([`idempotency`]) | yes: the second claim sees the first | yes | yes if the claims table is replicated synchronously; a lost committed claim can be claimed again | yes: the unique key is checked by the database | not a lease: the claim commits or it does not |
//!
//! Rules of thumb: prefer the fence or claim to live **in the same database and transaction**
//! as the data it protects; use the lock to avoid duplicate work, the fence/claim to make
//! duplicate work harmless.
//!
//! # Example
//!
//! ```no_run
//! # async fn demo(pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use locklint_runtime::fence::{FencedTable, FencedWrite};
//! use locklint_runtime::table::TableLock;
//!
//! let locks = TableLock::new(pool.clone());
//! locks.migrate().await?;
//! let accounts = FencedTable::new("accounts")?;
//! accounts.add_fence_column(&pool).await?;
//!
//! if let Some(lease) = locks.try_acquire("account-42", Duration::from_secs(10)).await? {
//!     let sql = accounts.update_sql("balance = balance + $3");
//!     FencedWrite::new(&sql, lease.fence())
//!         .bind(42_i64)
//!         .bind(100_i64)
//!         .execute(&pool)
//!         .await?; // Err(StaleFence) if a newer holder has written since
//!     locks.release(&lease).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! # Cargo features
//!
//! | Feature | Enables |
//! |---|---|
//! | `redis` (default) | [`redis_lock`] |
//! | `redis-cluster` | `redis` plus Redis Cluster connections |
//! | `postgres` | [`advisory`], the SQL half of [`fence`], and PostgreSQL for [`table`] and [`idempotency`] |
//! | `mysql` | MySQL/MariaDB for [`table`] and [`idempotency`] |
//! | `sqlite` | SQLite for [`table`] and [`idempotency`] |
//! | `tracing` (off by default) | a `tracing` span per acquire, renew and release: `locklint.acquire`, `locklint.renew`, `locklint.release`, with the fields `backend`, `lock`, `fence` and `outcome` |
//!
//! [`lock`] (the traits and [`MemoryLock`](lock::MemoryLock)) and [`FencingToken`] are always
//! available.
//!
//! Migrations for every table used here ship in `migrations/{postgres,mysql,sqlite}/` and are
//! also applied by the `migrate` functions ([`table::TableLock::migrate`],
//! [`idempotency::ClaimTable::migrate`], [`fence::FenceCounter::migrate`]).
//!
// Links to modules of features that are off lead to the feature table.
#![cfg_attr(not(feature = "redis"), doc = "[`redis_lock`]: crate#cargo-features")]
#![cfg_attr(
    not(feature = "postgres"),
    doc = "[`advisory`]: crate#cargo-features\n[`fence::FenceCounter::migrate`]: crate#cargo-features"
)]
#![cfg_attr(
    not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
    doc = "[`table`]: crate#cargo-features\n[`idempotency`]: crate#cargo-features\n[`table::TableLock::migrate`]: crate#cargo-features\n[`idempotency::ClaimTable::migrate`]: crate#cargo-features"
)]
#![warn(missing_docs)]

#[cfg(feature = "postgres")]
pub mod advisory;
pub mod fence;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub mod idempotency;
pub mod ident;
pub mod lock;
#[cfg(feature = "redis")]
pub mod redis_lock;
#[cfg(any(
    feature = "redis",
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite"
))]
mod renewal;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub mod table;
mod trace;

pub use fence::FencingToken;
