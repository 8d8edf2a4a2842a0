//! One interface over every backend: the [`Lock`] and [`Lease`] traits.
//!
//! A service written against these traits can switch between the Redis leases
//! ([`RedisLocker`]), PostgreSQL advisory locks ([`AdvisoryLocker`]) and lock tables
//! ([`TableLock`]), and its tests can use the in-memory
//! [`MemoryLock`]. Every backend reports the same three failures ([`LeaseError`]):
//!
//! * [`LeaseError::Busy`]: someone else holds the lock (after the wait, if any),
//! * [`LeaseError::Lost`]: the lease ended (expired, taken over, its session died, released),
//! * [`LeaseError::Backend`]: the backend failed; ownership is unknown.
//!
//! ```
//! use std::time::Duration;
//! use locklint_runtime::lock::{Lease, LeaseError, Lock, MemoryLock};
//!
//! /// Written once, run against any backend.
//! async fn run_job<L: Lock>(locks: &L) -> Result<u64, LeaseError> {
//!     let mut lease = locks.try_acquire("nightly", Duration::from_secs(30)).await?;
//!     lease.spawn_keep_alive(); // renew in the background; lease.lost() signals a loss
//!     let fence = lease.fence(); // pass it to the protected resource
//!     lease.renew(Duration::from_secs(30)).await?; // Err(Lost) once it is no longer ours
//!     lease.unlock().await?;
//!     Ok(fence.0)
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let locks = MemoryLock::new();
//! assert_eq!(run_job(&locks).await.unwrap(), 1);
//! assert_eq!(run_job(&locks).await.unwrap(), 2);
//! # }
//! ```
//!
#![cfg_attr(
    feature = "redis",
    doc = "[`RedisLocker`]: crate::redis_lock::RedisLocker"
)]
#![cfg_attr(not(feature = "redis"), doc = "[`RedisLocker`]: crate#cargo-features")]
#![cfg_attr(
    feature = "postgres",
    doc = "[`AdvisoryLocker`]: crate::advisory::AdvisoryLocker"
)]
#![cfg_attr(
    not(feature = "postgres"),
    doc = "[`AdvisoryLocker`]: crate#cargo-features"
)]
#![cfg_attr(
    any(feature = "postgres", feature = "mysql", feature = "sqlite"),
    doc = "[`TableLock`]: crate::table::TableLock"
)]
#![cfg_attr(
    not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
    doc = "[`TableLock`]: crate#cargo-features"
)]

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::trace::{acquire_outcome, lease_outcome, Op, OpSpan};
use crate::FencingToken;

/// A boxed backend error.
///
/// ```
/// use locklint_runtime::lock::{BoxError, LeaseError};
/// let e: BoxError = "connection reset".into();
/// assert!(matches!(LeaseError::backend(e), LeaseError::Backend(_)));
/// ```
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The failures every [`Lock`] and [`Lease`] reports.
///
/// ```
/// use locklint_runtime::lock::LeaseError;
/// let e = LeaseError::Busy { name: "job".into() };
/// assert!(e.is_busy() && !e.is_lost());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// Another holder has the lock (and kept it until the end of the wait, if any).
    #[error("lock `{name}` is held by another holder")]
    Busy {
        /// The lock name.
        name: String,
    },
    /// The lease is no longer held: it expired, was taken over, was released, or the
    /// session holding it died. Stop working under it.
    #[error("lock `{name}` was lost")]
    Lost {
        /// The lock name.
        name: String,
    },
    /// The backend (Redis, the database, the connection) failed. Whether the lock is held
    /// is unknown; the fence still protects the resource.
    #[error("lock backend error: {0}")]
    Backend(#[source] BoxError),
}

impl LeaseError {
    /// True for [`LeaseError::Busy`].
    ///
    /// ```
    /// # use locklint_runtime::lock::LeaseError;
    /// assert!(LeaseError::Busy { name: "a".into() }.is_busy());
    /// ```
    pub fn is_busy(&self) -> bool {
        matches!(self, LeaseError::Busy { .. })
    }

    /// True for [`LeaseError::Lost`].
    ///
    /// ```
    /// # use locklint_runtime::lock::LeaseError;
    /// assert!(LeaseError::Lost { name: "a".into() }.is_lost());
    /// ```
    pub fn is_lost(&self) -> bool {
        matches!(self, LeaseError::Lost { .. })
    }

    /// Wraps a backend error.
    ///
    /// ```
    /// # use locklint_runtime::lock::LeaseError;
    /// let e = LeaseError::backend(std::io::Error::other("down"));
    /// assert!(matches!(e, LeaseError::Backend(_)));
    /// ```
    pub fn backend(error: impl Into<BoxError>) -> Self {
        LeaseError::Backend(error.into())
    }
}

/// A held lock of any backend.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// use locklint_runtime::lock::{Lease, Lock, MemoryLock};
///
/// let locks = MemoryLock::new();
/// let lease = locks.try_acquire("job", Duration::from_secs(5)).await.unwrap();
/// assert!(lease.is_held());
/// tokio::select! {
///     _ = lease.lost() => unreachable!("not lost"),
///     _ = async {} => {} // the work done under the lock
/// }
/// lease.unlock().await.unwrap();
/// # }
/// ```
pub trait Lease: Send {
    /// The lock name.
    fn name(&self) -> &str;

    /// The fencing token of this acquisition: larger than that of every earlier acquisition
    /// of the same name. Pass it to the protected resource ([`crate::fence`]).
    fn fence(&self) -> FencingToken;

    /// Whether the lease is still believed held: not released, not known lost, and (for
    /// leases with a TTL) not past its validity.
    fn is_held(&self) -> bool;

    /// A future that resolves once the lease is known to be lost (or released). It owns
    /// what it needs, so it can be awaited in a `select!` next to the work.
    ///
    /// For leases with a TTL (Redis, lock table) and the keep-alive running, renewals that
    /// keep failing resolve it once less than one renewal interval (TTL/3) of validity is
    /// left without a successful renewal: within one interval of the first failed renewal,
    /// and always before the validity ends, so the holder has that interval to stop. An
    /// advisory lease resolves it at the first failed session check.
    fn lost(&self) -> impl Future<Output = ()> + Send + 'static;

    /// Starts renewing the lease in the background (every TTL/3 for leases with a TTL; a
    /// session check every interval for advisory locks), so that [`Self::lost`] and
    /// [`Self::is_held`] report a loss found by a renewal and not only an expiry. Redis
    /// leases stop renewing after the default maximum hold time (10 minutes). Must be called
    /// within a tokio runtime.
    fn spawn_keep_alive(&mut self);

    /// Extends the lease to `ttl` from now. [`LeaseError::Lost`] once it is no longer ours
    /// (never extends someone else's lease). Backends without a TTL check that the lock is
    /// still held.
    fn renew(&mut self, ttl: Duration) -> impl Future<Output = Result<(), LeaseError>> + Send;

    /// Ends the lease and releases the lock: `Ok(())` if it was still ours,
    /// [`LeaseError::Lost`] if it was not (someone else's lock is never released),
    /// [`LeaseError::Backend`] if the backend failed.
    ///
    /// It is named `unlock` rather than `release` so that it never shares a name with the
    /// inherent `release` of the concrete leases (`redis_lock::Lease::release`,
    /// `table::TableLease::release`), which keep the lease and return whether it was still
    /// ours (`Ok(false)` instead of `Err(Lost)`). Had both been called `release`, Rust would
    /// pick this by-value method over the inherent `&mut self` one whenever this trait is in
    /// scope, so the same line would change meaning with an import. With two names, a call
    /// says which one it is (see the example on `redis_lock::Lease::release`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    /// use locklint_runtime::lock::{Lease, Lock, MemoryLock};
    /// let locks = MemoryLock::new();
    /// let lease = locks.try_acquire("job", Duration::from_secs(5)).await.unwrap();
    /// locks.expire("job"); // lost before it was released
    /// assert!(lease.unlock().await.unwrap_err().is_lost());
    /// # }
    /// ```
    fn unlock(self) -> impl Future<Output = Result<(), LeaseError>> + Send;
}

/// A lock service of any backend: it hands out [`Lease`]s.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// use locklint_runtime::lock::{Lock, MemoryLock};
///
/// let locks = MemoryLock::new();
/// let held = locks.try_acquire("job", Duration::from_secs(5)).await.unwrap();
/// let busy = locks.try_acquire("job", Duration::from_secs(5)).await.unwrap_err();
/// assert!(busy.is_busy());
/// # drop(held); }
/// ```
pub trait Lock: Send + Sync {
    /// The lease this backend hands out.
    type Lease: Lease;

    /// One attempt to take the lock `name` for `ttl`; [`LeaseError::Busy`] while another
    /// lease is live.
    fn try_acquire(
        &self,
        name: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<Self::Lease, LeaseError>> + Send;

    /// Waits up to `timeout` for the lock `name`; [`LeaseError::Busy`] when the time is up.
    fn acquire_timeout(
        &self,
        name: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> impl Future<Output = Result<Self::Lease, LeaseError>> + Send;
}

// ---------------------------------------------------------------- in memory

#[derive(Debug)]
struct Entry {
    owner: u64,
    fence: u64,
    expires: Instant,
    ended: CancellationToken,
}

#[derive(Debug, Default)]
struct Table {
    entries: HashMap<String, Entry>,
    /// The last fence issued per name; kept after release so fences keep increasing.
    fences: HashMap<String, u64>,
    next_owner: u64,
}

/// An in-memory [`Lock`] for tests of code written against the traits.
///
/// It behaves like the real backends in one process: a live lease is never handed out
/// twice, each acquisition gets a larger fence, a lease expires after its TTL (by
/// [`tokio::time::Instant`], so tests can use `tokio::time::pause` and `advance`), renewing
/// or releasing a lease that was taken over fails with [`LeaseError::Lost`], and
/// [`MemoryLock::expire`] ends a lease at once, as a crashed server or a killed session
/// would. Clones share the same locks.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// use locklint_runtime::lock::{Lease, Lock, MemoryLock};
///
/// let locks = MemoryLock::new();
/// let mut a = locks.try_acquire("job", Duration::from_secs(5)).await.unwrap();
/// locks.expire("job"); // simulate a lost lock
/// assert!(!a.is_held());
/// a.lost().await; // resolves at once
/// assert!(a.renew(Duration::from_secs(5)).await.unwrap_err().is_lost());
/// let b = locks.try_acquire("job", Duration::from_secs(5)).await.unwrap();
/// assert!(b.fence() > a.fence());
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryLock {
    table: Arc<Mutex<Table>>,
}

impl MemoryLock {
    /// An empty lock service.
    ///
    /// ```
    /// let locks = locklint_runtime::lock::MemoryLock::new();
    /// # let _ = locks;
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends the live lease of `name`, if any, as if the server had lost it: the holder's
    /// [`Lease::lost`] resolves, [`Lease::is_held`] turns false, and the lock is free.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    /// use locklint_runtime::lock::{Lease, Lock, MemoryLock};
    /// let locks = MemoryLock::new();
    /// let lease = locks.try_acquire("job", Duration::from_secs(5)).await.unwrap();
    /// locks.expire("job");
    /// assert!(!lease.is_held());
    /// # }
    /// ```
    pub fn expire(&self, name: &str) {
        if let Some(entry) = self.table().entries.remove(name) {
            entry.ended.cancel();
        }
    }

    /// The fence of the live lease of `name`, if one is live.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    /// use locklint_runtime::lock::{Lock, MemoryLock};
    /// let locks = MemoryLock::new();
    /// assert_eq!(locks.holder_fence("job"), None);
    /// let lease = locks.try_acquire("job", Duration::from_secs(5)).await.unwrap();
    /// assert_eq!(locks.holder_fence("job"), Some(1));
    /// # drop(lease); }
    /// ```
    pub fn holder_fence(&self, name: &str) -> Option<u64> {
        let now = Instant::now();
        self.table()
            .entries
            .get(name)
            .filter(|e| e.expires > now)
            .map(|e| e.fence)
    }

    fn attempt(&self, name: &str, ttl: Duration) -> Option<MemoryLease> {
        let now = Instant::now();
        let mut table = self.table();
        if let Some(entry) = table.entries.get(name) {
            if entry.expires > now {
                return None;
            }
            entry.ended.cancel();
        }
        let fence = {
            let last = table.fences.entry(name.to_owned()).or_insert(0);
            *last += 1;
            *last
        };
        table.next_owner += 1;
        let owner = table.next_owner;
        let ended = CancellationToken::new();
        let expires = now + ttl;
        table.entries.insert(
            name.to_owned(),
            Entry {
                owner,
                fence,
                expires,
                ended: ended.clone(),
            },
        );
        Some(MemoryLease {
            locks: self.clone(),
            name: name.to_owned(),
            owner,
            fence: FencingToken(fence),
            ttl,
            expires: Arc::new(Mutex::new(expires)),
            ended,
            keep_alive: None,
        })
    }
}

impl Lock for MemoryLock {
    type Lease = MemoryLease;

    async fn try_acquire(&self, name: &str, ttl: Duration) -> Result<MemoryLease, LeaseError> {
        let attempt = async {
            self.attempt(name, ttl).ok_or_else(|| LeaseError::Busy {
                name: name.to_owned(),
            })
        };
        OpSpan::new(Op::Acquire, "memory", name)
            .traced(attempt, acquire_outcome)
            .await
    }

    async fn acquire_timeout(
        &self,
        name: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<MemoryLease, LeaseError> {
        let waiting = async {
            let deadline = Instant::now() + timeout;
            loop {
                if let Some(lease) = self.attempt(name, ttl) {
                    return Ok(lease);
                }
                let now = Instant::now();
                if now >= deadline {
                    return Err(LeaseError::Busy {
                        name: name.to_owned(),
                    });
                }
                tokio::time::sleep((deadline - now).min(Duration::from_millis(5))).await;
            }
        };
        OpSpan::new(Op::Acquire, "memory", name)
            .traced(waiting, acquire_outcome)
            .await
    }
}

/// A lease of a [`MemoryLock`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// use locklint_runtime::lock::{Lease, Lock, MemoryLock};
/// let lease = MemoryLock::new().try_acquire("job", Duration::from_secs(5)).await.unwrap();
/// assert_eq!(lease.name(), "job");
/// # }
/// ```
#[derive(Debug)]
pub struct MemoryLease {
    locks: MemoryLock,
    name: String,
    owner: u64,
    fence: FencingToken,
    ttl: Duration,
    expires: Arc<Mutex<Instant>>,
    ended: CancellationToken,
    keep_alive: Option<AbortOnDrop>,
}

/// Stops a keep-alive task when its lease is dropped.
#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl MemoryLease {
    fn lost_error(&self) -> LeaseError {
        LeaseError::Lost {
            name: self.name.clone(),
        }
    }

    /// Whether the table still holds this lease, unexpired.
    fn owned(&self) -> bool {
        let now = Instant::now();
        self.locks
            .table()
            .entries
            .get(&self.name)
            .is_some_and(|e| e.owner == self.owner && e.expires > now)
    }
}

impl Lease for MemoryLease {
    fn name(&self) -> &str {
        &self.name
    }

    fn fence(&self) -> FencingToken {
        self.fence
    }

    fn is_held(&self) -> bool {
        !self.ended.is_cancelled() && self.owned()
    }

    fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let (ended, expires) = (self.ended.clone(), Arc::clone(&self.expires));
        async move {
            loop {
                let until = *expires.lock().unwrap_or_else(|e| e.into_inner());
                tokio::select! {
                    biased;
                    _ = ended.cancelled() => return,
                    _ = tokio::time::sleep_until(until) => {
                        if *expires.lock().unwrap_or_else(|e| e.into_inner()) <= Instant::now() {
                            ended.cancel();
                            return;
                        }
                    }
                }
            }
        }
    }

    fn spawn_keep_alive(&mut self) {
        let mut lease = MemoryLease {
            locks: self.locks.clone(),
            name: self.name.clone(),
            owner: self.owner,
            fence: self.fence,
            ttl: self.ttl,
            expires: Arc::clone(&self.expires),
            ended: self.ended.clone(),
            keep_alive: None,
        };
        let interval = (self.ttl / 3).max(Duration::from_millis(1));
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    biased;
                    _ = lease.ended.cancelled() => return,
                    _ = tokio::time::sleep(interval) => {}
                }
                if lease.renew(lease.ttl).await.is_err() {
                    return;
                }
            }
        });
        self.keep_alive = Some(AbortOnDrop(task));
    }

    async fn renew(&mut self, ttl: Duration) -> Result<(), LeaseError> {
        let span = OpSpan::with_fence(Op::Renew, "memory", &self.name, self.fence.0);
        let renewal = async {
            let now = Instant::now();
            let mut table = self.locks.table();
            match table.entries.get_mut(&self.name) {
                Some(e)
                    if e.owner == self.owner && e.expires > now && !self.ended.is_cancelled() =>
                {
                    e.expires = now + ttl;
                    *self.expires.lock().unwrap_or_else(|e| e.into_inner()) = now + ttl;
                    Ok(())
                }
                _ => {
                    self.ended.cancel();
                    Err(self.lost_error())
                }
            }
        };
        span.traced(renewal, lease_outcome("renewed")).await
    }

    async fn unlock(self) -> Result<(), LeaseError> {
        let span = OpSpan::with_fence(Op::Release, "memory", &self.name, self.fence.0);
        span.traced(self.release_untraced(), lease_outcome("released"))
            .await
    }
}

impl MemoryLease {
    async fn release_untraced(self) -> Result<(), LeaseError> {
        let now = Instant::now();
        let owned = {
            let mut table = self.locks.table();
            let owned = table
                .entries
                .get(&self.name)
                .is_some_and(|e| e.owner == self.owner && e.expires > now);
            if owned {
                table.entries.remove(&self.name);
            }
            owned
        };
        self.ended.cancel();
        if owned {
            Ok(())
        } else {
            Err(self.lost_error())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(10);

    #[tokio::test(start_paused = true)]
    async fn one_holder_at_a_time_with_increasing_fences() {
        let locks = MemoryLock::new();
        let a = locks.try_acquire("job", TTL).await.unwrap();
        assert_eq!(a.fence(), FencingToken(1));
        assert!(locks.try_acquire("job", TTL).await.unwrap_err().is_busy());
        let other = locks.try_acquire("other", TTL).await.unwrap();
        assert_eq!(other.fence(), FencingToken(1), "fences are per name");
        a.unlock().await.unwrap();
        let b = locks.try_acquire("job", TTL).await.unwrap();
        assert_eq!(b.fence(), FencingToken(2), "fences survive a release");
        assert!(b.is_held());
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_expires_after_its_ttl_and_is_taken_over() {
        let locks = MemoryLock::new();
        let mut a = locks.try_acquire("job", TTL).await.unwrap();
        let lost = a.lost();
        tokio::time::advance(TTL / 2).await;
        a.renew(TTL).await.unwrap(); // now valid until 1.5 TTL
        tokio::time::advance(TTL * 3 / 4).await; // 1.25 TTL: past the original expiry
        assert!(a.is_held(), "renewed");
        assert!(locks.try_acquire("job", TTL).await.unwrap_err().is_busy());
        tokio::time::advance(TTL).await;
        assert!(!a.is_held(), "expired");
        lost.await; // resolves once expired
        let b = locks.try_acquire("job", TTL).await.unwrap();
        assert!(b.fence() > a.fence());
        // The stale holder can neither renew nor release the new holder's lease.
        assert!(a.renew(TTL).await.unwrap_err().is_lost());
        assert!(a.unlock().await.unwrap_err().is_lost());
        assert_eq!(locks.holder_fence("job"), Some(b.fence().0));
        assert!(b.is_held());
    }

    #[tokio::test(start_paused = true)]
    async fn acquire_timeout_waits_for_expiry_or_gives_up_busy() {
        let locks = MemoryLock::new();
        let a = locks.try_acquire("job", TTL).await.unwrap();
        let err = locks
            .acquire_timeout("job", TTL, TTL / 2)
            .await
            .unwrap_err();
        assert!(err.is_busy());
        let b = locks.acquire_timeout("job", TTL, TTL).await.unwrap();
        assert!(b.fence() > a.fence());
    }

    #[tokio::test(start_paused = true)]
    async fn keep_alive_holds_the_lease_past_its_ttl_until_released() {
        let locks = MemoryLock::new();
        let mut a = locks.try_acquire("job", TTL).await.unwrap();
        a.spawn_keep_alive();
        for _ in 0..10 {
            tokio::time::sleep(TTL / 2).await;
            assert!(a.is_held());
            assert!(locks.try_acquire("job", TTL).await.unwrap_err().is_busy());
        }
        a.unlock().await.unwrap();
        assert!(locks.try_acquire("job", TTL).await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn expire_signals_the_holder_at_once() {
        let locks = MemoryLock::new();
        let a = locks.try_acquire("job", TTL).await.unwrap();
        let lost = a.lost();
        locks.expire("job");
        lost.await;
        assert!(!a.is_held());
        assert_eq!(locks.holder_fence("job"), None);
    }
}
