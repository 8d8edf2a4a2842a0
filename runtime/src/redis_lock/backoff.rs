//! Full-jitter exponential backoff and random tokens.

use std::time::Duration;

use super::LockError;

/// Retry pacing for [`RedisLocker::acquire`](super::RedisLocker::acquire) and friends.
///
/// Attempt `n` (starting at 0) sleeps a uniformly random duration in
/// `[0, min(max, base * 2^n)]` ("full jitter"), which spreads contenders out instead of
/// letting them retry in lock step.
///
/// ```
/// use std::time::Duration;
/// use locklint_runtime::redis_lock::Backoff;
/// let patient = Backoff { base: Duration::from_millis(20), max: Duration::from_secs(2) };
/// assert_eq!(patient.ceiling(2), Duration::from_millis(80));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Upper bound of the first sleep.
    pub base: Duration,
    /// Cap on the upper bound of any sleep.
    pub max: Duration,
}

impl Default for Backoff {
    /// 5 ms base, 500 ms cap.
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(5),
            max: Duration::from_millis(500),
        }
    }
}

impl Backoff {
    /// The upper bound of the sleep after failed attempt `attempt` (0-based), saturating.
    ///
    /// ```
    /// use std::time::Duration;
    /// use locklint_runtime::redis_lock::Backoff;
    /// let backoff = Backoff::default(); // 5 ms base, 500 ms cap
    /// assert_eq!(backoff.ceiling(0), Duration::from_millis(5));
    /// assert_eq!(backoff.ceiling(3), Duration::from_millis(40));
    /// assert_eq!(backoff.ceiling(20), Duration::from_millis(500));
    /// ```
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// A random sleep in `[0, ceiling(attempt)]`.
    ///
    /// ```
    /// use locklint_runtime::redis_lock::Backoff;
    /// let backoff = Backoff::default();
    /// assert!(backoff.delay(3) <= backoff.ceiling(3));
    /// ```
    pub fn delay(&self, attempt: u32) -> Duration {
        let ceiling = self.ceiling(attempt);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        if nanos == 0 {
            return Duration::ZERO;
        }
        // A failing OS RNG only degrades jitter here; sleep the full ceiling in that case.
        let r = getrandom::u64().unwrap_or(u64::MAX);
        Duration::from_nanos(r % nanos.saturating_add(1))
    }
}

/// 128 random bits from the operating system RNG, as 32 lowercase hex digits.
pub(crate) fn random_token() -> Result<String, LockError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(LockError::Random)?;
    let mut out = String::with_capacity(32);
    for b in bytes {
        out.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(b & 0x0f), 16).unwrap_or('0'));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_doubles_and_caps() {
        let b = Backoff {
            base: Duration::from_millis(2),
            max: Duration::from_millis(50),
        };
        assert_eq!(b.ceiling(0), Duration::from_millis(2));
        assert_eq!(b.ceiling(1), Duration::from_millis(4));
        assert_eq!(b.ceiling(4), Duration::from_millis(32));
        assert_eq!(b.ceiling(5), Duration::from_millis(50));
        assert_eq!(b.ceiling(u32::MAX), Duration::from_millis(50));
        for attempt in 0..40 {
            assert!(b.delay(attempt) <= b.ceiling(attempt));
        }
    }

    #[test]
    fn tokens_are_128_bit_hex_and_distinct() {
        let a = random_token().unwrap();
        let b = random_token().unwrap();
        assert_eq!(a.len(), 32);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
    }
}
