//! Redis leases with fencing tokens.
//!
//! A [`RedisLocker`] takes a lock with one atomic Lua script that runs
//! `SET <prefix>:{<name>}:lock <token> NX PX <ttl>` and, for the winner only, raises the
//! counter `<prefix>:{<name>}:fence` to `max(counter + 1, server time in microseconds)`, so a
//! counter lost with the server's data cannot issue an old fence again. The winner gets a [`Lease`] holding its random token
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
mod wake;

pub use backoff::Backoff;
pub use error::{LockError, LostReason};
pub use lease::{Lease, LeaseHandle};
pub use locker::{RedisLocker, DEFAULT_MAX_HOLD, DEFAULT_PREFIX};

/// Connections a [`RedisLocker`] can use: any cheaply cloneable async Redis connection that can
/// be shared between tasks, such as [`redis::aio::MultiplexedConnection`],
/// [`redis::aio::ConnectionManager`] or `redis::cluster_async::ClusterConnection` (feature `redis-cluster`).
///
/// ```no_run
/// # async fn demo() -> redis::RedisResult<()> {
/// use locklint_runtime::redis_lock::RedisLocker;
/// let client = redis::Client::open("redis://127.0.0.1:6379")?;
/// let reconnecting = RedisLocker::new(redis::aio::ConnectionManager::new(client.clone()).await?);
/// let plain = RedisLocker::new(client.get_multiplexed_async_connection().await?);
/// # let _ = (reconnecting, plain); Ok(()) }
/// ```
pub trait LockConnection: redis::aio::ConnectionLike + Clone + Send + Sync + 'static {}

impl<T> LockConnection for T where T: redis::aio::ConnectionLike + Clone + Send + Sync + 'static {}

impl From<LockError> for crate::lock::LeaseError {
    fn from(e: LockError) -> Self {
        match e {
            LockError::Lost { name, .. } => crate::lock::LeaseError::Lost { name },
            LockError::TimedOut { name, .. } => crate::lock::LeaseError::Busy { name },
            other => crate::lock::LeaseError::Backend(Box::new(other)),
        }
    }
}

impl<C: LockConnection> crate::lock::Lock for RedisLocker<C> {
    type Lease = Lease<C>;

    async fn try_acquire(
        &self,
        name: &str,
        ttl: std::time::Duration,
    ) -> Result<Lease<C>, crate::lock::LeaseError> {
        RedisLocker::try_acquire(self, name, ttl)
            .await?
            .ok_or_else(|| crate::lock::LeaseError::Busy {
                name: name.to_owned(),
            })
    }

    async fn acquire_timeout(
        &self,
        name: &str,
        ttl: std::time::Duration,
        timeout: std::time::Duration,
    ) -> Result<Lease<C>, crate::lock::LeaseError> {
        Ok(RedisLocker::acquire_timeout(self, name, ttl, timeout).await?)
    }
}

impl<C: LockConnection> crate::lock::Lease for Lease<C> {
    fn name(&self) -> &str {
        Lease::name(self)
    }

    fn fence(&self) -> crate::FencingToken {
        Lease::fence(self)
    }

    fn is_held(&self) -> bool {
        Lease::is_held(self)
    }

    fn lost(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let lost = Lease::lost(self);
        async move {
            lost.await;
        }
    }

    /// Keeps the lease alive with the issuing locker's maximum hold time
    /// ([`RedisLocker::with_max_hold`], [`DEFAULT_MAX_HOLD`] unless set).
    fn spawn_keep_alive(&mut self) {
        let max_hold = self.max_hold();
        Lease::spawn_keep_alive(self, max_hold)
    }

    async fn renew(&mut self, ttl: std::time::Duration) -> Result<(), crate::lock::LeaseError> {
        Ok(Lease::renew(self, ttl).await?)
    }

    async fn unlock(mut self) -> Result<(), crate::lock::LeaseError> {
        if Lease::release(&mut self).await? {
            Ok(())
        } else {
            Err(crate::lock::LeaseError::Lost {
                name: self.name().to_owned(),
            })
        }
    }
}
