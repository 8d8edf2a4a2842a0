//! The `tracing` feature: one span per acquire, renew and release, with the lock name, the
//! fence and the outcome, observed by a subscriber installed for the test.

mod support;

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use locklint_runtime::redis_lock::RedisLocker;
use support::redis::redis;
use support::sql::{pg, sqlite};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// One span as the subscriber saw it: its name and every field recorded on it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SeenSpan {
    name: &'static str,
    fields: HashMap<&'static str, String>,
}

/// A subscriber that keeps every span in creation order.
#[derive(Clone, Default)]
struct Recorder {
    spans: Arc<Mutex<Vec<SeenSpan>>>,
}

struct FieldVisitor<'a>(&'a mut HashMap<&'static str, String>);

impl Visit for FieldVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name(), value.to_owned());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name(), format!("{value:?}"));
    }
}

impl Recorder {
    /// This crate's spans (a driver may open spans of its own).
    fn spans(&self) -> Vec<SeenSpan> {
        let spans = self.spans.lock().unwrap();
        spans
            .iter()
            .filter(|s| s.name.starts_with("locklint."))
            .cloned()
            .collect()
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut fields = HashMap::new();
        span.record(&mut FieldVisitor(&mut fields));
        let mut spans = self.spans.lock().unwrap();
        spans.push(SeenSpan {
            name: span.metadata().name(),
            fields,
        });
        Id::from_u64(spans.len() as u64)
    }
    fn record(&self, id: &Id, values: &Record<'_>) {
        let mut spans = self.spans.lock().unwrap();
        if let Some(span) = spans.get_mut(id.into_u64() as usize - 1) {
            values.record(&mut FieldVisitor(&mut span.fields));
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn span(name: &'static str, fields: &[(&'static str, String)]) -> SeenSpan {
    SeenSpan {
        name,
        fields: fields.iter().cloned().collect(),
    }
}

#[tokio::test]
async fn redis_acquire_renew_release_each_open_one_span_with_name_fence_and_outcome() {
    let redis = redis();
    let conn = redis.conn().await;
    let locker = RedisLocker::new(conn)
        .with_prefix(redis.unique("tracing"))
        .expect("valid prefix");
    let recorder = Recorder::default();
    let _default = tracing::subscriber::set_default(recorder.clone());

    let mut lease = locker
        .acquire_timeout("ledger", Duration::from_secs(5), Duration::from_secs(2))
        .await
        .expect("acquire");
    let fence = lease.fence().0.to_string();
    let busy = locker
        .try_acquire("ledger", Duration::from_secs(5))
        .await
        .expect("second attempt");
    assert!(busy.is_none());
    lease.renew(Duration::from_secs(5)).await.expect("renew");
    assert!(lease.release().await.expect("release"));
    assert!(!lease.release().await.expect("second release"));

    let redis = || ("backend", "redis".to_owned());
    let lock = || ("lock", "ledger".to_owned());
    let fence = || ("fence", fence.clone());
    let outcome = |o: &str| ("outcome", o.to_owned());
    assert_eq!(
        recorder.spans(),
        vec![
            span(
                "locklint.acquire",
                &[redis(), lock(), fence(), outcome("acquired")]
            ),
            span("locklint.acquire", &[redis(), lock(), outcome("busy")]),
            span(
                "locklint.renew",
                &[redis(), lock(), fence(), outcome("renewed")]
            ),
            span(
                "locklint.release",
                &[redis(), lock(), fence(), outcome("released")]
            ),
            span(
                "locklint.release",
                &[redis(), lock(), fence(), outcome("lost")]
            ),
        ]
    );
}

#[tokio::test]
async fn memory_lock_traces_like_the_other_backends() {
    use locklint_runtime::lock::{Lease as _, Lock as _, MemoryLock};

    let locks = MemoryLock::new();
    let recorder = Recorder::default();
    let _default = tracing::subscriber::set_default(recorder.clone());

    let mut lease = locks
        .try_acquire("ledger", Duration::from_secs(5))
        .await
        .expect("acquire");
    let fence = lease.fence().0.to_string();
    lease.renew(Duration::from_secs(5)).await.expect("renew");
    lease.release().await.expect("release");

    let memory = || ("backend", "memory".to_owned());
    let lock = || ("lock", "ledger".to_owned());
    let fence = || ("fence", fence.clone());
    let outcome = |o: &str| ("outcome", o.to_owned());
    assert_eq!(
        recorder.spans(),
        vec![
            span(
                "locklint.acquire",
                &[memory(), lock(), fence(), outcome("acquired")]
            ),
            span(
                "locklint.renew",
                &[memory(), lock(), fence(), outcome("renewed")]
            ),
            span(
                "locklint.release",
                &[memory(), lock(), fence(), outcome("released")]
            ),
        ]
    );
}

#[tokio::test]
async fn lock_table_acquire_renew_release_are_traced() {
    use locklint_runtime::table::TableLock;

    let db = sqlite().await;
    let locks = TableLock::new(db.pool.clone());
    locks.migrate().await.expect("migrate");
    let recorder = Recorder::default();
    let _default = tracing::subscriber::set_default(recorder.clone());

    let mut lease = locks
        .try_acquire("ledger", Duration::from_secs(5))
        .await
        .expect("acquire")
        .expect("free");
    let fence = lease.fence().0.to_string();
    assert!(locks
        .acquire_timeout("ledger", Duration::from_secs(5), Duration::from_millis(20))
        .await
        .expect("second attempt")
        .is_none());
    lease.renew(Duration::from_secs(5)).await.expect("renew");
    assert!(lease.release().await.expect("release"));
    assert!(!lease.release().await.expect("second release"));

    let table = || ("backend", "table".to_owned());
    let lock = || ("lock", "ledger".to_owned());
    let fence = || ("fence", fence.clone());
    let outcome = |o: &str| ("outcome", o.to_owned());
    assert_eq!(
        recorder.spans(),
        vec![
            span(
                "locklint.acquire",
                &[table(), lock(), fence(), outcome("acquired")]
            ),
            span("locklint.acquire", &[table(), lock(), outcome("timed_out")]),
            span(
                "locklint.renew",
                &[table(), lock(), fence(), outcome("renewed")]
            ),
            span(
                "locklint.release",
                &[table(), lock(), fence(), outcome("released")]
            ),
            span(
                "locklint.release",
                &[table(), lock(), fence(), outcome("lost")]
            ),
        ]
    );
}

#[tokio::test]
async fn advisory_lock_acquire_and_release_are_traced() {
    use locklint_runtime::advisory::AdvisoryLocker;

    let db = pg().await;
    let locks = AdvisoryLocker::new(db.pool.clone());
    locks.migrate().await.expect("migrate");
    let recorder = Recorder::default();
    let _default = tracing::subscriber::set_default(recorder.clone());

    let guard = locks
        .try_lock("ledger")
        .await
        .expect("acquire")
        .expect("free");
    let fence = guard.fence().expect("a fence").0.to_string();
    assert!(locks.try_lock("ledger").await.expect("second").is_none());
    guard.unlock().await.expect("unlock");

    let advisory = || ("backend", "advisory".to_owned());
    let lock = || ("lock", "ledger".to_owned());
    let fence = || ("fence", fence.clone());
    let outcome = |o: &str| ("outcome", o.to_owned());
    assert_eq!(
        recorder.spans(),
        vec![
            span(
                "locklint.acquire",
                &[advisory(), lock(), fence(), outcome("acquired")]
            ),
            span("locklint.acquire", &[advisory(), lock(), outcome("busy")]),
            span(
                "locklint.release",
                &[advisory(), lock(), fence(), outcome("released")]
            ),
        ]
    );
    drop(_default);
    db.cleanup().await;
}
