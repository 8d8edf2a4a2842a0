//! The renewal schedule of leases with a TTL (Redis leases, lock-table leases) and the rule
//! by which their keep-alives declare a lease lost.
//!
//! A lease is valid until the start of its last successful acquire or renew plus the TTL,
//! minus a drift allowance, on the monotonic clock. The keep-alive renews every TTL/3 and
//! retries a renewal that failed transiently, but only while more than one renewal interval
//! of validity is left: once the remaining validity is less than one renewal interval
//! without a successful renewal, the lease is declared lost. Loss is therefore signalled
//! within one renewal interval of the first failed renewal, and always one renewal interval
//! before the validity ends, which leaves the holder that long to stop.

use std::time::{Duration, Instant};

/// `instant + duration`, saturating far in the future instead of panicking on overflow.
pub(crate) fn add_saturating(instant: Instant, duration: Duration) -> Instant {
    instant
        .checked_add(duration)
        .or_else(|| instant.checked_add(Duration::from_secs(100 * 365 * 86_400)))
        .unwrap_or(instant)
}

/// Safety margin subtracted from a TTL when computing how long a lease is valid locally:
/// 1% of the TTL plus 2 ms for clock-rate differences between this host and the server,
/// never more than half the TTL.
pub(crate) fn drift_allowance(ttl: Duration) -> Duration {
    (ttl / 100 + Duration::from_millis(2)).min(ttl / 2)
}

/// The end of the validity of a lease whose successful acquire or renew started at `start`.
pub(crate) fn valid_until(start: Instant, ttl: Duration) -> Instant {
    add_saturating(start, ttl.saturating_sub(drift_allowance(ttl)))
}

/// When a keep-alive renews and how long it keeps retrying.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schedule {
    /// The time between two renewals: TTL/3 (at least 1 ms).
    pub(crate) interval: Duration,
    /// The pause before retrying a renewal that failed transiently: TTL/24, between 1 ms and
    /// 250 ms, so several retries fit in one interval.
    retry: Duration,
}

impl Schedule {
    pub(crate) fn for_ttl(ttl: Duration) -> Self {
        let interval = (ttl / 3).max(Duration::from_millis(1));
        let retry = (interval / 8).clamp(Duration::from_millis(1), Duration::from_millis(250));
        Schedule { interval, retry }
    }

    /// The moment a lease valid until `valid_until` is declared lost unless a renewal has
    /// succeeded by then: one renewal interval before its validity ends.
    pub(crate) fn give_up_at(&self, valid_until: Instant) -> Instant {
        valid_until
            .checked_sub(self.interval)
            .unwrap_or(valid_until)
    }

    /// How long a renewal sent at `now` may wait for its reply: until the lease would be
    /// given up, or, for a renewal that only starts after that point because the keep-alive
    /// itself did not run (the process was paused, the runtime busy), until the validity
    /// ends.
    pub(crate) fn answer_by(&self, now: Instant, valid_until: Instant) -> Instant {
        let give_up = self.give_up_at(valid_until);
        if give_up > now {
            give_up
        } else {
            valid_until
        }
    }

    /// When to retry a renewal that failed transiently at `now`: after the retry pause, but
    /// no later than the moment the lease is given up. `None` when that moment has come: the
    /// lease is lost.
    pub(crate) fn retry_at(&self, now: Instant, valid_until: Instant) -> Option<Instant> {
        let give_up = self.give_up_at(valid_until);
        (now < give_up).then(|| add_saturating(now, self.retry).min(give_up))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_lease_is_given_up_one_interval_before_it_ends() {
        let ttl = Duration::from_millis(900);
        let schedule = Schedule::for_ttl(ttl);
        assert_eq!(schedule.interval, Duration::from_millis(300));
        let start = Instant::now();
        let until = valid_until(start, ttl);
        assert_eq!(until, start + Duration::from_millis(900 - 11));
        let give_up = schedule.give_up_at(until);
        assert_eq!(until - give_up, schedule.interval);

        // The first renewal is due one interval after the acquire and may wait for its reply
        // until the lease is given up.
        let first = start + schedule.interval;
        assert_eq!(schedule.answer_by(first, until), give_up);
        // Failed at once: retried shortly after, never past the give-up point.
        let retry = schedule
            .retry_at(first, until)
            .expect("still time to retry");
        assert_eq!(retry, first + Duration::from_micros(37_500));
        let late = give_up - Duration::from_millis(1);
        assert_eq!(schedule.retry_at(late, until), Some(give_up));
        assert_eq!(schedule.retry_at(give_up, until), None);
        // Loss within one interval of the first failure, one interval before the end.
        assert!(give_up - first <= schedule.interval);

        // A renewal that only starts after the give-up point (a paused process) may use what
        // is left of the validity.
        assert_eq!(schedule.answer_by(give_up, until), until);
    }

    #[test]
    fn tiny_ttls_keep_a_positive_interval() {
        let schedule = Schedule::for_ttl(Duration::from_millis(1));
        assert_eq!(schedule.interval, Duration::from_millis(1));
        let now = Instant::now();
        let until = valid_until(now, Duration::from_millis(1));
        assert!(schedule.give_up_at(until) <= until);
        assert_eq!(schedule.retry_at(until, until), None);
    }
}
