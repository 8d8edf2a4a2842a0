//! A held Redis lock: token, fence, renewal, keep-alive and release.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::release_mode::{release_key, ReleaseModes};
use super::scripts::RENEW;
use super::{LockConnection, LockError, LostReason};
use crate::renewal::{self, add_saturating, Schedule};
use crate::trace::{Op, OpSpan};
use crate::FencingToken;

/// Converts a TTL to whole milliseconds, rejecting zero and out-of-range values.
pub(crate) fn ttl_millis(ttl: Duration) -> Result<u64, LockError> {
    let ms = ttl.as_millis();
    if ms == 0 || ms > i64::MAX as u128 {
        return Err(LockError::InvalidTtl(ttl));
    }
    Ok(ms as u64)
}

/// State shared by a [`Lease`], its [`LeaseHandle`]s and its keep-alive task.
pub(crate) struct Shared {
    pub(crate) name: String,
    pub(crate) key: String,
    pub(crate) token: String,
    pub(crate) fence: FencingToken,
    pub(crate) ttl: Duration,
    pub(crate) acquired_at: Instant,
    valid_until: Mutex<Instant>,
    ended: CancellationToken,
    reason: OnceLock<LostReason>,
    /// Cleared once Redis confirmed the key is not (or no longer) ours.
    needs_release: AtomicBool,
    /// Set once the keep-alive has made its last renewal because of the maximum hold time.
    hold_capped: AtomicBool,
    /// The last renewal error while renewals are failing transiently (cleared on success).
    renewal_failing: Mutex<Option<String>>,
}

impl Shared {
    pub(crate) fn new(
        name: String,
        key: String,
        token: String,
        fence: FencingToken,
        ttl: Duration,
        acquired_at: Instant,
    ) -> Self {
        let valid_until = renewal::valid_until(acquired_at, ttl);
        Shared {
            name,
            key,
            token,
            fence,
            ttl,
            acquired_at,
            valid_until: Mutex::new(valid_until),
            ended: CancellationToken::new(),
            reason: OnceLock::new(),
            needs_release: AtomicBool::new(true),
            hold_capped: AtomicBool::new(false),
            renewal_failing: Mutex::new(None),
        }
    }

    fn valid_until(&self) -> Instant {
        *self.valid_until.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn extend(&self, attempt_start: Instant, ttl: Duration) {
        let until = renewal::valid_until(attempt_start, ttl);
        *self.valid_until.lock().unwrap_or_else(|e| e.into_inner()) = until;
    }

    fn mark_lost(&self, reason: LostReason) {
        let _ = self.reason.set(reason);
        self.ended.cancel();
    }

    fn reason(&self) -> LostReason {
        self.reason.get().cloned().unwrap_or(LostReason::Expired)
    }

    fn expiry_reason(&self) -> LostReason {
        let failing = self
            .renewal_failing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(error) = failing {
            LostReason::RenewalFailed(error)
        } else if self.hold_capped.load(Ordering::SeqCst) {
            LostReason::MaxHoldReached
        } else {
            LostReason::Expired
        }
    }

    fn is_renewal_failing(&self) -> bool {
        self.renewal_failing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    fn set_renewal_failing(&self, error: Option<String>) {
        *self
            .renewal_failing
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = error;
    }

    fn is_held(&self) -> bool {
        !self.ended.is_cancelled() && Instant::now() < self.valid_until()
    }

    fn remaining(&self) -> Duration {
        if self.ended.is_cancelled() {
            return Duration::ZERO;
        }
        self.valid_until().saturating_duration_since(Instant::now())
    }

    fn lost_error(&self) -> LockError {
        LockError::Lost {
            name: self.name.clone(),
            reason: self.reason(),
        }
    }

    fn lost(self: &Arc<Self>) -> impl Future<Output = LostReason> + Send + 'static {
        let shared = Arc::clone(self);
        async move {
            loop {
                let until = shared.valid_until();
                tokio::select! {
                    biased;
                    _ = shared.ended.cancelled() => return shared.reason(),
                    _ = tokio::time::sleep_until(until.into()) => {
                        if shared.valid_until() <= Instant::now() {
                            shared.mark_lost(shared.expiry_reason());
                            return shared.reason();
                        }
                    }
                }
            }
        }
    }
}

/// A held Redis lock.
///
/// Obtained from [`RedisLocker`](super::RedisLocker). The lease knows its random token and
/// its [`FencingToken`]; pass the fence to the protected resource so it can reject writes
/// from a holder whose lease has expired.
///
/// # Drop behaviour
///
/// Dropping a lease that was not released never blocks. It stops the keep-alive and, when
/// called inside a tokio runtime, spawns the compare-and-delete release on that runtime
/// (fire and forget). Outside a runtime nothing is sent and the key simply expires after its
/// TTL. Either way a successor's key is never touched: release only deletes the key while it
/// still holds this lease's token.
///
/// The token is kept until a release is confirmed by Redis: if [`Lease::release`] fails or
/// its future is dropped midway, the release can be retried and is attempted again on drop.
///
/// ```no_run
/// # async fn demo(locker: locklint_runtime::redis_lock::RedisLocker<redis::aio::ConnectionManager>) -> Result<(), locklint_runtime::redis_lock::LockError> {
/// use std::time::Duration;
/// let mut lease = locker.acquire("report", Duration::from_secs(30)).await?;
/// lease.spawn_keep_alive(Duration::from_secs(300));
/// // ... writes carrying lease.fence() ...
/// lease.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping a lease releases the lock in the background"]
pub struct Lease<C: LockConnection> {
    shared: Arc<Shared>,
    conn: C,
    release_mode: Arc<ReleaseModes>,
    keep_alive: Option<JoinHandle<()>>,
    /// The maximum hold time of the locker that issued the lease, for keep-alives started
    /// through the [`Lease`](crate::lock::Lease) trait.
    max_hold: Duration,
}

impl<C: LockConnection> std::fmt::Debug for Lease<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("name", &self.shared.name)
            .field("key", &self.shared.key)
            .field("fence", &self.shared.fence)
            .field("remaining", &self.shared.remaining())
            .field("keep_alive", &self.keep_alive.is_some())
            .finish_non_exhaustive()
    }
}

impl<C: LockConnection> Lease<C> {
    pub(crate) fn new(
        shared: Shared,
        conn: C,
        release_mode: Arc<ReleaseModes>,
        max_hold: Duration,
    ) -> Self {
        Lease {
            shared: Arc::new(shared),
            conn,
            release_mode,
            keep_alive: None,
            max_hold,
        }
    }

    /// The maximum hold time of the locker that issued this lease
    /// ([`RedisLocker::with_max_hold`](super::RedisLocker::with_max_hold)), used when the
    /// keep-alive is started through the [`Lease`](crate::lock::Lease) trait.
    ///
    /// ```no_run
    /// # fn demo(lease: &locklint_runtime::redis_lock::Lease<redis::aio::ConnectionManager>) {
    /// assert!(lease.max_hold() >= std::time::Duration::from_secs(1));
    /// # }
    /// ```
    pub fn max_hold(&self) -> Duration {
        self.max_hold
    }

    /// The lock name this lease was acquired for.
    ///
    /// ```no_run
    /// # fn demo(lease: &locklint_runtime::redis_lock::Lease<redis::aio::ConnectionManager>) {
    /// assert_eq!(lease.name(), "report");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The Redis key holding the lock (`<prefix>:{<name>}:lock`).
    ///
    /// ```no_run
    /// # fn demo(lease: &locklint_runtime::redis_lock::Lease<redis::aio::ConnectionManager>) {
    /// assert_eq!(lease.key(), "locklint:{report}:lock");
    /// # }
    /// ```
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// This lease's random token (128 bits from the OS RNG, 32 hex digits), stored as the
    /// lock key's value.
    ///
    /// ```no_run
    /// # fn demo(lease: &locklint_runtime::redis_lock::Lease<redis::aio::ConnectionManager>) {
    /// assert_eq!(lease.token().len(), 32);
    /// # }
    /// ```
    pub fn token(&self) -> &str {
        &self.shared.token
    }

    /// The fencing token minted together with the lock: strictly greater than the fence of
    /// every earlier acquisition of the same lock name, also across a loss of the Redis
    /// data (see [`RedisLocker::try_acquire`](super::RedisLocker::try_acquire)).
    ///
    /// ```no_run
    /// # fn demo(lease: &locklint_runtime::redis_lock::Lease<redis::aio::ConnectionManager>) {
    /// let fence: i64 = lease.fence().as_i64(); // bind it in the fenced write
    /// # let _ = fence;
    /// # }
    /// ```
    pub fn fence(&self) -> FencingToken {
        self.shared.fence
    }

    /// The TTL the lease was acquired with (and that the keep-alive renews to).
    ///
    /// ```no_run
    /// # fn demo(lease: &locklint_runtime::redis_lock::Lease<redis::aio::ConnectionManager>) {
    /// let renew_every = lease.ttl() / 3;
    /// # let _ = renew_every;
    /// # }
    /// ```
    pub fn ttl(&self) -> Duration {
        self.shared.ttl
    }

    /// When the attempt that won the lock started (monotonic clock).
    ///
    /// ```no_run
    /// # fn demo(lease: &locklint_runtime::redis_lock::Lease<redis::aio::ConnectionManager>) {
    /// let held_for = lease.acquired_at().elapsed();
    /// # let _ = held_for;
    /// # }
    /// ```
    pub fn acquired_at(&self) -> Instant {
        self.shared.acquired_at
    }

    /// The instant until which the lease is valid, measured from the start of the winning
    /// attempt (or of the last successful renewal) minus a small clock-drift allowance.
    ///
    /// ```no_run
    /// # fn demo(lease: &locklint_runtime::redis_lock::Lease<redis::aio::ConnectionManager>) {
    /// if lease.valid_until() < std::time::Instant::now() + std::time::Duration::from_secs(1) {
    ///     // too little time left to start another batch
    /// }
    /// # }
    /// ```
    pub fn valid_until(&self) -> Instant {
        self.shared.valid_until()
    }

    /// Time left before [`valid_until`](Self::valid_until); zero once the lease has ended.
    ///
    /// ```no_run
    /// # fn demo(lease: &locklint_runtime::redis_lock::Lease<redis::aio::ConnectionManager>) {
    /// if lease.remaining() < std::time::Duration::from_secs(1) {
    ///     // too little time left to start another batch
    /// }
    /// # }
    /// ```
    pub fn remaining(&self) -> Duration {
        self.shared.remaining()
    }

    /// Whether the lease is still valid: not released, not lost, and not past its validity.
    ///
    /// ```no_run
    /// # fn demo(lease: &locklint_runtime::redis_lock::Lease<redis::aio::ConnectionManager>) {
    /// if !lease.is_held() {
    ///     return; // stop working under it
    /// }
    /// # }
    /// ```
    pub fn is_held(&self) -> bool {
        self.shared.is_held()
    }

    /// A future that resolves when the lease ends, with the reason: its validity elapsed, a
    /// renewal found the key gone or failed, the maximum hold time was reached, or the lease
    /// was released. It owns what it needs, so it can be awaited in a `select!` next to the
    /// work protected by the lock.
    ///
    /// With the [keep-alive](Self::spawn_keep_alive) running, a renewal that keeps failing
    /// (a dead connection, a server that does not answer) resolves it once less than one
    /// renewal interval (TTL/3) of validity is left without a successful renewal: within one
    /// interval of the first failed renewal, and always before the validity ends, so the
    /// holder has that interval to stop. Without a keep-alive it resolves when the validity
    /// ends.
    ///
    /// ```no_run
    /// # async fn demo(locker: locklint_runtime::redis_lock::RedisLocker<redis::aio::ConnectionManager>) -> Result<(), locklint_runtime::redis_lock::LockError> {
    /// # async fn work(_fence: u64) {}
    /// use std::time::Duration;
    /// let mut lease = locker.acquire("report", Duration::from_secs(30)).await?;
    /// lease.spawn_keep_alive(Duration::from_secs(300));
    /// tokio::select! {
    ///     _ = work(lease.fence().0) => {}
    ///     reason = lease.lost() => eprintln!("lock lost: {reason}"),
    /// }
    /// lease.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        self.shared.lost()
    }

    /// A token cancelled as soon as the lease is known to have ended (failed renewal,
    /// keep-alive expiry or maximum hold time, release, or an expiry observed by
    /// [`lost`](Self::lost)). Hand it to code that should stop working under the lock.
    ///
    /// Without a keep-alive nothing watches the clock, so check [`is_held`](Self::is_held)
    /// or await [`lost`](Self::lost) as well.
    ///
    /// ```no_run
    /// # fn demo(lease: &locklint_runtime::redis_lock::Lease<redis::aio::ConnectionManager>) {
    /// let token = lease.cancellation_token(); // hand it to code that stops on cancellation
    /// # drop(token);
    /// # }
    /// ```
    pub fn cancellation_token(&self) -> CancellationToken {
        self.shared.ended.clone()
    }

    /// Why the lease ended, if it has.
    ///
    /// ```no_run
    /// # fn demo(lease: &locklint_runtime::redis_lock::Lease<redis::aio::ConnectionManager>) {
    /// if let Some(reason) = lease.lost_reason() {
    ///     eprintln!("lost: {reason}");
    /// }
    /// # }
    /// ```
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.shared.reason.get().cloned()
    }

    /// A cheap, cloneable view of this lease for the code running under the lock.
    ///
    /// ```no_run
    /// # fn demo(lease: &locklint_runtime::redis_lock::Lease<redis::aio::ConnectionManager>) {
    /// let handle = lease.handle(); // cheap to clone, hand it to tasks
    /// # drop(handle);
    /// # }
    /// ```
    pub fn handle(&self) -> LeaseHandle {
        LeaseHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Extends the lease to `ttl` from now with an atomic compare-and-`PEXPIRE`: the key's
    /// expiry only changes while it still holds this lease's token.
    ///
    /// Returns [`LockError::Lost`] when the key is gone or belongs to someone else (the lease
    /// is then marked lost) or when the lease had already ended, and [`LockError::Redis`] on a
    /// transport error (the lease is left as is).
    ///
    /// ```no_run
    /// # async fn demo(locker: locklint_runtime::redis_lock::RedisLocker<redis::aio::ConnectionManager>) -> Result<(), locklint_runtime::redis_lock::LockError> {
    /// use std::time::Duration;
    /// let mut lease = locker.acquire("report", Duration::from_secs(10)).await?;
    /// // ... a first batch of work ...
    /// lease.renew(Duration::from_secs(10)).await?; // Err(Lost) once the key is not ours
    /// // ... a second batch ...
    /// lease.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn renew(&self, ttl: Duration) -> Result<(), LockError> {
        let ttl_ms = ttl_millis(ttl)?;
        if self.shared.ended.is_cancelled() {
            return Err(self.shared.lost_error());
        }
        let mut conn = self.conn.clone();
        match renew_once(&mut conn, &self.shared, ttl_ms).await? {
            true => Ok(()),
            false => Err(self.shared.lost_error()),
        }
    }

    /// Starts a background task that renews the lease to its TTL every TTL/3.
    ///
    /// A renewal that fails transiently (a dropped or refused connection, a timeout, a server
    /// loading or failing over) is retried every TTL/24 (at most 250 ms), but only while more
    /// than one renewal interval of validity is left: once less than one interval remains
    /// without a successful renewal, the lease is declared lost
    /// ([`LostReason::RenewalFailed`]). Loss is therefore signalled within one renewal
    /// interval of the first failed renewal and one interval (TTL/3) before the validity
    /// ends, which leaves the holder that long to stop. The task also stops, and marks the
    /// lease lost, when a renewal finds the key gone or owned by someone else
    /// ([`LostReason::NotOwner`]) or fails for another reason. A loss wakes
    /// [`lost`](Self::lost), cancels the [`cancellation_token`](Self::cancellation_token) and
    /// makes [`is_held`](Self::is_held) false. It never recreates a key: renewal is a
    /// compare-and-`PEXPIRE`.
    ///
    /// `max_hold` bounds the total hold time, measured from [`acquired_at`](Self::acquired_at):
    /// the last renewal is shortened to end at that point, after which renewing stops and the
    /// lease is reported lost with [`LostReason::MaxHoldReached`] when it runs out. This keeps a
    /// stalled holder from being kept alive forever.
    ///
    /// Calling it again replaces the previous keep-alive task. Must be called within a tokio
    /// runtime.
    ///
    /// ```no_run
    /// # async fn demo(locker: locklint_runtime::redis_lock::RedisLocker<redis::aio::ConnectionManager>) -> Result<(), locklint_runtime::redis_lock::LockError> {
    /// use std::time::Duration;
    /// // Renewed every 10 s; a dead connection is reported lost at most 20 s after it died,
    /// // while 10 s of the lease are still left.
    /// let mut lease = locker.acquire("report", Duration::from_secs(30)).await?;
    /// lease.spawn_keep_alive(Duration::from_secs(600));
    /// # Ok(()) }
    /// ```
    pub fn spawn_keep_alive(&mut self, max_hold: Duration) {
        self.stop_keep_alive();
        let shared = Arc::clone(&self.shared);
        let conn = self.conn.clone();
        self.keep_alive = Some(tokio::spawn(keep_alive(shared, conn, max_hold)));
    }

    /// Stops the keep-alive task, if any, without releasing the lease.
    ///
    /// ```no_run
    /// # fn demo(lease: &mut locklint_runtime::redis_lock::Lease<redis::aio::ConnectionManager>) {
    /// lease.spawn_keep_alive(std::time::Duration::from_secs(60));
    /// lease.stop_keep_alive(); // the lease now ends at its TTL unless renewed
    /// assert!(!lease.keep_alive_running());
    /// # }
    /// ```
    pub fn stop_keep_alive(&mut self) {
        if let Some(task) = self.keep_alive.take() {
            task.abort();
        }
    }

    /// Whether a keep-alive task is attached and still running.
    ///
    /// ```no_run
    /// # fn demo(lease: &mut locklint_runtime::redis_lock::Lease<redis::aio::ConnectionManager>) {
    /// if !lease.keep_alive_running() && lease.is_held() {
    ///     lease.spawn_keep_alive(std::time::Duration::from_secs(60));
    /// }
    /// # }
    /// ```
    pub fn keep_alive_running(&self) -> bool {
        self.keep_alive.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Releases the lock with an atomic compare-and-delete: `DELEX key IFEQ token` on Redis
    /// 8.4 and later (detected once per [`RedisLocker`](super::RedisLocker) via `INFO server`),
    /// a Lua compare-and-delete script otherwise.
    ///
    /// Returns whether the key still held this lease's token (and was deleted). `Ok(false)`
    /// means the lease had already expired or been taken over; the current holder's key is
    /// left intact. Stops the keep-alive first. On error the lease keeps its token, so the
    /// call can be retried (a drop also retries in the background). Releasing an already
    /// released lease returns `Ok(false)` without contacting Redis.
    ///
    /// This is the method `lease.release()` calls, whether or not the
    /// [`Lease`](crate::lock::Lease) trait is in scope: the trait ends a lease with
    /// [`unlock`](crate::lock::Lease::unlock) (by value, `Err(Lost)` when it was no longer
    /// ours), a different name, so an import never changes which one runs.
    ///
    /// ```no_run
    /// # async fn demo(locker: locklint_runtime::redis_lock::RedisLocker<redis::aio::ConnectionManager>) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use locklint_runtime::lock::{Lease as _, Lock};
    ///
    /// // This method, trait in scope or not: keeps the lease, `Ok(false)` if it was no
    /// // longer ours, and can be retried after an error.
    /// let mut lease = locker.acquire("report", Duration::from_secs(30)).await?;
    /// let still_ours: bool = lease.release().await?;
    ///
    /// // The trait's: consumes the lease, `Err(LeaseError::Lost)` if it was no longer ours.
    /// let lease = Lock::try_acquire(&locker, "report", Duration::from_secs(30)).await?;
    /// let (): () = lease.unlock().await?;
    /// # let _ = still_ours; Ok(()) }
    /// ```
    pub async fn release(&mut self) -> Result<bool, LockError> {
        self.stop_keep_alive();
        let span = OpSpan::with_fence(Op::Release, "redis", &self.shared.name, self.shared.fence.0);
        if !self.shared.needs_release.load(Ordering::SeqCst) {
            self.shared.mark_lost(LostReason::Released);
            span.outcome("lost");
            return Ok(false);
        }
        let mut conn = self.conn.clone();
        let released = span.run(release_key(
            &mut conn,
            &self.release_mode,
            &self.shared.key,
            &self.shared.token,
        ));
        let owned = match released.await {
            Ok(owned) => owned,
            Err(e) => {
                span.outcome("error");
                return Err(e);
            }
        };
        self.shared.needs_release.store(false, Ordering::SeqCst);
        self.shared.mark_lost(LostReason::Released);
        span.outcome(if owned { "released" } else { "lost" });
        Ok(owned)
    }
}

impl<C: LockConnection> Drop for Lease<C> {
    fn drop(&mut self) {
        self.stop_keep_alive();
        if !self.shared.needs_release.swap(false, Ordering::SeqCst) {
            return;
        }
        self.shared.mark_lost(LostReason::Released);
        spawn_release(
            self.conn.clone(),
            Arc::clone(&self.release_mode),
            self.shared.key.clone(),
            self.shared.token.clone(),
            OpSpan::with_fence(Op::Release, "redis", &self.shared.name, self.shared.fence.0),
        );
    }
}

/// Fire-and-forget compare-and-delete on the current tokio runtime, if any, inside `span`
/// (which gets the outcome: `released`, `lost` when the key was not ours, or `error`).
pub(crate) fn spawn_release<C: LockConnection>(
    mut conn: C,
    mode: Arc<ReleaseModes>,
    key: String,
    token: String,
    span: OpSpan,
) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            let released = span.run(release_key(&mut conn, &mode, &key, &token)).await;
            span.outcome(match released {
                Ok(true) => "released",
                Ok(false) => "lost",
                Err(_) => "error",
            });
        });
    }
}

/// One compare-and-PEXPIRE. `Ok(false)` (and the lease marked lost) when the key is not ours.
async fn renew_once<C: LockConnection>(
    conn: &mut C,
    shared: &Shared,
    ttl_ms: u64,
) -> Result<bool, LockError> {
    let span = OpSpan::with_fence(Op::Renew, "redis", &shared.name, shared.fence.0);
    let start = Instant::now();
    let mut invocation = RENEW.key(&shared.key);
    invocation.arg(&shared.token).arg(ttl_ms);
    let renewed: i64 = match span.run(invocation.invoke_async(conn)).await {
        Ok(renewed) => renewed,
        Err(e) => {
            span.outcome("error");
            return Err(e.into());
        }
    };
    if renewed == 1 {
        shared.extend(start, Duration::from_millis(ttl_ms));
        span.outcome("renewed");
        Ok(true)
    } else {
        shared.needs_release.store(false, Ordering::SeqCst);
        shared.mark_lost(LostReason::NotOwner);
        span.outcome("lost");
        Ok(false)
    }
}

async fn keep_alive<C: LockConnection>(shared: Arc<Shared>, mut conn: C, max_hold: Duration) {
    let schedule = Schedule::for_ttl(shared.ttl);
    let interval = schedule.interval;
    let hold_deadline = add_saturating(shared.acquired_at, max_hold);
    let mut next = add_saturating(shared.acquired_at, interval);
    loop {
        if next >= hold_deadline || shared.valid_until() >= hold_deadline {
            // No renewal may extend past the maximum hold time: let the lease run out.
            shared.hold_capped.store(true, Ordering::SeqCst);
            next = next.min(hold_deadline);
        }
        tokio::select! {
            biased;
            _ = shared.ended.cancelled() => return,
            _ = tokio::time::sleep_until(next.into()) => {}
        }
        let now = Instant::now();
        let valid_until = shared.valid_until();
        if now >= valid_until {
            shared.mark_lost(shared.expiry_reason());
            return;
        }
        if now >= hold_deadline || shared.hold_capped.load(Ordering::SeqCst) {
            shared.hold_capped.store(true, Ordering::SeqCst);
            tokio::select! {
                biased;
                _ = shared.ended.cancelled() => return,
                _ = tokio::time::sleep_until(valid_until.into()) => {}
            }
            shared.mark_lost(LostReason::MaxHoldReached);
            return;
        }
        if shared.is_renewal_failing() && now >= schedule.give_up_at(valid_until) {
            // Less than one renewal interval left and no renewal got through: say so now,
            // while the holder still has that interval to stop.
            shared.mark_lost(shared.expiry_reason());
            return;
        }
        // Renew to the full TTL, or only up to the hold deadline if that comes first.
        let ttl = shared.ttl.min(hold_deadline.saturating_duration_since(now));
        let ttl_ms = (ttl.as_millis() as u64).max(1);
        let answer_by = schedule.answer_by(now, valid_until);
        let reply = tokio::time::timeout(
            answer_by.saturating_duration_since(now),
            renew_once(&mut conn, &shared, ttl_ms),
        )
        .await;
        match reply {
            Ok(Ok(true)) => {
                shared.set_renewal_failing(None);
                if ttl < shared.ttl {
                    // This renewal ended at the hold deadline: from now on, running out is
                    // due to it.
                    shared.hold_capped.store(true, Ordering::SeqCst);
                }
                next = add_saturating(now, interval);
            }
            Ok(Ok(false)) => return,
            // A transient failure is retried while more than one renewal interval of
            // validity is left: the key is still ours until it expires, and a reconnecting
            // client may get through.
            Ok(Err(e)) if e.is_transient() => {
                shared.set_renewal_failing(Some(e.to_string()));
                match schedule.retry_at(Instant::now(), valid_until) {
                    Some(at) => next = at,
                    None => {
                        shared.mark_lost(shared.expiry_reason());
                        return;
                    }
                }
            }
            Ok(Err(e)) => {
                shared.mark_lost(LostReason::RenewalFailed(e.to_string()));
                return;
            }
            Err(_) => {
                if !shared.is_renewal_failing() {
                    shared.set_renewal_failing(Some(format!(
                        "no reply to the renewal within {:?}",
                        answer_by.saturating_duration_since(now)
                    )));
                }
                shared.mark_lost(shared.expiry_reason());
                return;
            }
        }
    }
}

/// A cloneable, read-only view of a [`Lease`], handed to the closure run by
/// [`RedisLocker::with_lock`](super::RedisLocker::with_lock).
///
/// ```no_run
/// # async fn demo(locker: locklint_runtime::redis_lock::RedisLocker<redis::aio::ConnectionManager>) -> Result<(), locklint_runtime::redis_lock::LockError> {
/// use std::time::Duration;
/// let fence = locker
///     .with_lock("report", Duration::from_secs(30), |handle| async move {
///         let worker = tokio::spawn({
///             let handle = handle.clone();
///             async move { handle.fence() }
///         });
///         worker.await.expect("worker")
///     })
///     .await?;
/// # let _ = fence; Ok(()) }
/// ```
#[derive(Clone)]
pub struct LeaseHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LeaseHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseHandle")
            .field("name", &self.shared.name)
            .field("fence", &self.shared.fence)
            .finish_non_exhaustive()
    }
}

impl LeaseHandle {
    /// See [`Lease::name`].
    ///
    /// ```no_run
    /// # fn demo(lease: locklint_runtime::redis_lock::LeaseHandle) {
    /// assert_eq!(lease.name(), "report");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// See [`Lease::key`].
    ///
    /// ```no_run
    /// # fn demo(lease: locklint_runtime::redis_lock::LeaseHandle) {
    /// assert!(lease.key().ends_with(":lock"));
    /// # }
    /// ```
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// See [`Lease::token`].
    ///
    /// ```no_run
    /// # fn demo(lease: locklint_runtime::redis_lock::LeaseHandle) {
    /// assert_eq!(lease.token().len(), 32);
    /// # }
    /// ```
    pub fn token(&self) -> &str {
        &self.shared.token
    }

    /// See [`Lease::fence`].
    ///
    /// ```no_run
    /// # fn demo(lease: locklint_runtime::redis_lock::LeaseHandle) {
    /// let fence = lease.fence();
    /// # let _ = fence;
    /// # }
    /// ```
    pub fn fence(&self) -> FencingToken {
        self.shared.fence
    }

    /// See [`Lease::valid_until`].
    ///
    /// ```no_run
    /// # fn demo(lease: locklint_runtime::redis_lock::LeaseHandle) {
    /// let until = lease.valid_until();
    /// # let _ = until;
    /// # }
    /// ```
    pub fn valid_until(&self) -> Instant {
        self.shared.valid_until()
    }

    /// See [`Lease::remaining`].
    ///
    /// ```no_run
    /// # fn demo(lease: locklint_runtime::redis_lock::LeaseHandle) {
    /// let left = lease.remaining();
    /// # let _ = left;
    /// # }
    /// ```
    pub fn remaining(&self) -> Duration {
        self.shared.remaining()
    }

    /// See [`Lease::is_held`].
    ///
    /// ```no_run
    /// # fn demo(lease: locklint_runtime::redis_lock::LeaseHandle) {
    /// if !lease.is_held() {
    ///     return; // stop working under it
    /// }
    /// # }
    /// ```
    pub fn is_held(&self) -> bool {
        self.shared.is_held()
    }

    /// See [`Lease::lost`].
    ///
    /// ```no_run
    /// # fn demo(lease: locklint_runtime::redis_lock::LeaseHandle) {
    /// let lost = lease.lost(); // await it in a `select!` next to the work
    /// # drop(lost);
    /// # }
    /// ```
    pub fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        self.shared.lost()
    }

    /// See [`Lease::cancellation_token`].
    ///
    /// ```no_run
    /// # fn demo(lease: locklint_runtime::redis_lock::LeaseHandle) {
    /// let token = lease.cancellation_token(); // hand it to code that stops on cancellation
    /// # drop(token);
    /// # }
    /// ```
    pub fn cancellation_token(&self) -> CancellationToken {
        self.shared.ended.clone()
    }
}
