//! Errors and loss reasons for Redis leases.

use std::time::Duration;

/// Why a [`Lease`](super::Lease) stopped being held.
///
/// ```no_run
/// # async fn demo(lease: locklint_runtime::redis_lock::Lease<redis::aio::ConnectionManager>) {
/// use locklint_runtime::redis_lock::LostReason;
/// match lease.lost().await {
///     LostReason::NotOwner => eprintln!("someone else holds it now"),
///     LostReason::RenewalFailed(e) => eprintln!("could not renew: {e}"),
///     other => eprintln!("ended: {other}"),
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// The lease's validity window elapsed without a successful renewal.
    Expired,
    /// Redis no longer holds our token under the lock key: the key expired, was deleted
    /// (`DEL`, `FLUSHALL`, a restart without persistence) or now belongs to another holder.
    NotOwner,
    /// A renewal failed with a Redis or connection error; ownership can no longer be vouched for.
    RenewalFailed(String),
    /// The keep-alive reached the maximum total hold time and stopped renewing.
    MaxHoldReached,
    /// The lease was released by its holder.
    Released,
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LostReason::Expired => f.write_str("the lease expired before it was renewed"),
            LostReason::NotOwner => f.write_str("the lock key no longer holds this lease's token"),
            LostReason::RenewalFailed(e) => write!(f, "renewal failed: {e}"),
            LostReason::MaxHoldReached => f.write_str("the maximum hold time was reached"),
            LostReason::Released => f.write_str("the lease was released"),
        }
    }
}

/// Errors returned by the Redis lease API.
///
/// ```no_run
/// # async fn demo(locker: locklint_runtime::redis_lock::RedisLocker<redis::aio::ConnectionManager>) -> Result<(), locklint_runtime::redis_lock::LockError> {
/// use std::time::Duration;
/// use locklint_runtime::redis_lock::LockError;
/// match locker.acquire_timeout("report", Duration::from_secs(30), Duration::from_secs(2)).await {
///     Ok(mut lease) => { lease.release().await?; }
///     Err(LockError::TimedOut { waited, .. }) => eprintln!("busy for {waited:?}"),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Redis (or the connection to it) returned an error.
    #[error("redis error: {0}")]
    Redis(#[from] redis::RedisError),
    /// The lock could not be acquired before the deadline.
    #[error("timed out after {waited:?} waiting for lock `{name}`")]
    TimedOut {
        /// Lock name.
        name: String,
        /// How long acquisition was attempted.
        waited: Duration,
    },
    /// The lease is no longer held (see [`LostReason`]).
    #[error("lock `{name}` was lost: {reason}")]
    Lost {
        /// Lock name.
        name: String,
        /// Why the lease was lost.
        reason: LostReason,
    },
    /// The lock name or key prefix cannot be used to build cluster-safe keys.
    #[error("invalid lock name or prefix `{name}`: {why}")]
    InvalidName {
        /// The offending name or prefix.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The TTL is zero or too large to express in milliseconds.
    #[error("invalid ttl {0:?}: must be at least 1 ms and fit in an i64 number of milliseconds")]
    InvalidTtl(Duration),
    /// Redis answered with a reply this crate does not understand.
    #[error("unexpected reply from redis: {0}")]
    UnexpectedReply(String),
    /// The operating system random number generator failed.
    #[error("could not generate a lease token: {0}")]
    Random(getrandom::Error),
}

impl LockError {
    /// Worth another attempt: the connection or the server is failing (a dropped or refused
    /// connection, a timeout, a server loading or failing over), not the request.
    pub(crate) fn is_transient(&self) -> bool {
        let LockError::Redis(e) = self else {
            return false;
        };
        if e.is_io_error()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_timeout()
        {
            return true;
        }
        matches!(e.kind(), redis::ErrorKind::Server(_))
            && !matches!(e.retry_method(), redis::RetryMethod::NoRetry)
    }
}
