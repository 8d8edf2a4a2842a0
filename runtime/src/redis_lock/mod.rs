//! Redis leases with fencing tokens.
//!
//! A [`RedisLocker`] takes a lock with one atomic Lua script that runs
//! `SET <prefix>:{<name>}:lock <token> NX PX <ttl>` and, for the winner only,
//! `INCR <prefix>:{<name>}:fence`. The winner gets a [`Lease`] holding its random token
//! (128 bits from the OS RNG) and its [`FencingToken`](crate::FencingToken). Both keys share
//! the hash tag `{<name>}`, so the script works on Redis Cluster.
//!
//! The lease is renewed with a compare-and-`PEXPIRE` ([`Lease::renew`], or automatically by
//! [`Lease::spawn_keep_alive`]) and released with a compare-and-delete ([`Lease::release`]):
//! neither ever touches a key that holds another holder's token.
//!
//! ```no_run
//! use std::time::Duration;
//! use locklint_runtime::redis_lock::RedisLocker;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let client = redis::Client::open("redis://127.0.0.1:6379")?;
//! let conn = client.get_multiplexed_async_connection().await?;
//! let locker = RedisLocker::new(conn);
//!
//! // Manual lease.
//! let mut lease = locker
//!     .acquire_timeout("invoices", Duration::from_secs(10), Duration::from_secs(2))
//!     .await?;
//! let fence = lease.fence(); // send it along with every write to the protected resource
//! # let _ = fence;
//! lease.release().await?;
//!
//! // Scoped: keep-alive while the closure runs, released on every exit path.
//! let total = locker
//!     .with_lock("invoices", Duration::from_secs(10), |lease| async move {
//!         lease.fence().0 * 2
//!     })
//!     .await?;
//! # let _ = total;
//! # Ok(())
//! # }
//! ```

mod backoff;
mod error;
mod lease;
mod locker;
mod release_mode;
mod scripts;

pub use backoff::Backoff;
pub use error::{LockError, LostReason};
pub use lease::{Lease, LeaseHandle};
pub use locker::{RedisLocker, DEFAULT_MAX_HOLD, DEFAULT_PREFIX};

/// Connections a [`RedisLocker`] can use: any cheaply cloneable async Redis connection that can
/// be shared between tasks, such as [`redis::aio::MultiplexedConnection`],
/// [`redis::aio::ConnectionManager`] or [`redis::cluster_async::ClusterConnection`].
pub trait LockConnection: redis::aio::ConnectionLike + Clone + Send + Sync + 'static {}

impl<T> LockConnection for T where T: redis::aio::ConnectionLike + Clone + Send + Sync + 'static {}
