//! `tracing` spans for lock operations, compiled only with the `tracing` cargo feature.
//!
//! Every acquire, renew and release of every backend runs inside one span named
//! `locklint.acquire`, `locklint.renew` or `locklint.release` at the `INFO` level, with the
//! fields
//!
//! | Field | Value |
//! |---|---|
//! | `backend` | `redis`, `advisory`, `table` or `memory` |
//! | `lock` | the lock's name (for an advisory lock taken by key, the key as a decimal number) |
//! | `fence` | the fencing token, once known (empty when the lock has none) |
//! | `outcome` | `acquired`, `busy`, `timed_out`, `renewed`, `released`, `lost` or `error` |
//!
//! Without the feature [`OpSpan`] is an empty struct and every call compiles to nothing.

use std::future::Future;

/// Which operation a span covers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    Acquire,
    Renew,
    Release,
}

/// The span of one lock operation: created at its start, given the fence when known and the
/// outcome at the end.
#[derive(Debug)]
pub(crate) struct OpSpan {
    #[cfg(feature = "tracing")]
    span: tracing::Span,
}

impl OpSpan {
    /// Opens the span of `op` on the lock `lock` of `backend`.
    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
    pub(crate) fn new(op: Op, backend: &'static str, lock: &str) -> Self {
        #[cfg(feature = "tracing")]
        {
            use tracing::field::Empty;
            let span = match op {
                Op::Acquire => tracing::info_span!(
                    "locklint.acquire",
                    backend,
                    lock,
                    fence = Empty,
                    outcome = Empty
                ),
                Op::Renew => tracing::info_span!(
                    "locklint.renew",
                    backend,
                    lock,
                    fence = Empty,
                    outcome = Empty
                ),
                Op::Release => tracing::info_span!(
                    "locklint.release",
                    backend,
                    lock,
                    fence = Empty,
                    outcome = Empty
                ),
            };
            OpSpan { span }
        }
        #[cfg(not(feature = "tracing"))]
        OpSpan {}
    }

    /// Opens the span and records the fence at once (renewals and releases know it).
    pub(crate) fn with_fence(op: Op, backend: &'static str, lock: &str, fence: u64) -> Self {
        let span = Self::new(op, backend, lock);
        span.fence(fence);
        span
    }

    /// Records the fencing token.
    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
    pub(crate) fn fence(&self, fence: u64) {
        #[cfg(feature = "tracing")]
        self.span.record("fence", fence);
    }

    /// Records how the operation ended.
    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
    pub(crate) fn outcome(&self, outcome: &'static str) {
        #[cfg(feature = "tracing")]
        self.span.record("outcome", outcome);
    }

    /// Runs `fut` inside the span (events and spans it creates become children of it).
    pub(crate) async fn run<F: Future>(&self, fut: F) -> F::Output {
        #[cfg(feature = "tracing")]
        {
            use tracing::Instrument;
            fut.instrument(self.span.clone()).await
        }
        #[cfg(not(feature = "tracing"))]
        fut.await
    }

    /// Runs `fut` inside the span and records its outcome as `classify` judges the result
    /// (and, for an acquisition, the fence it returns).
    pub(crate) async fn traced<T, F: Future<Output = T>>(
        &self,
        fut: F,
        classify: impl FnOnce(&T) -> (&'static str, Option<u64>),
    ) -> T {
        let result = self.run(fut).await;
        let (outcome, fence) = classify(&result);
        if let Some(fence) = fence {
            self.fence(fence);
        }
        self.outcome(outcome);
        result
    }
}

/// The outcome of a [`Lock`](crate::lock::Lock) acquisition.
pub(crate) fn acquire_outcome<L: crate::lock::Lease>(
    result: &Result<L, crate::lock::LeaseError>,
) -> (&'static str, Option<u64>) {
    use crate::lock::LeaseError;
    match result {
        Ok(lease) => ("acquired", Some(lease.fence().0)),
        Err(LeaseError::Busy { .. }) => ("busy", None),
        Err(LeaseError::Lost { .. }) => ("lost", None),
        Err(LeaseError::Backend(_)) => ("error", None),
    }
}

/// The outcome of a [`Lease`](crate::lock::Lease) renewal (`ok` = `"renewed"`) or release
/// (`ok` = `"released"`).
pub(crate) fn lease_outcome(
    ok: &'static str,
) -> impl FnOnce(&Result<(), crate::lock::LeaseError>) -> (&'static str, Option<u64>) {
    use crate::lock::LeaseError;
    move |result| match result {
        Ok(()) => (ok, None),
        Err(LeaseError::Busy { .. }) => ("busy", None),
        Err(LeaseError::Lost { .. }) => ("lost", None),
        Err(LeaseError::Backend(_)) => ("error", None),
    }
}
