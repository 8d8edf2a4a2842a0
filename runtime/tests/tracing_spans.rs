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

const ACQUIRE: &str = "locklint.acquire";
const RENEW: &str = "locklint.renew";
const RELEASE: &str = "locklint.release";

/// The spans one backend is expected to open on one lock.
struct Expected {
    backend: &'static str,
    lock: &'static str,
    fence: String,
}

impl Expected {
    fn new(backend: &'static str, lock: &'static str, fence: u64) -> Self {
        Expected {
            backend,
            lock,
            fence: fence.to_string(),
        }
    }

    /// The span `name` of an operation that knew the fence, ended with `outcome`.
    fn fenced(&self, name: &'static str, outcome: &str) -> SeenSpan {
        let mut span = self.unfenced(name, outcome);
        span.fields.insert("fence", self.fence.clone());
        span
    }

    /// The span `name` of an operation that got no fence (a busy or timed-out acquisition).
    fn unfenced(&self, name: &'static str, outcome: &str) -> SeenSpan {
        SeenSpan {
            name,
            fields: HashMap::from([
                ("backend", self.backend.to_owned()),
                ("lock", self.lock.to_owned()),
                ("outcome", outcome.to_owned()),
            ]),
        }
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
    let fence = lease.fence().0;
    let busy = locker
        .try_acquire("ledger", Duration::from_secs(5))
        .await
        .expect("second attempt");
    assert!(busy.is_none());
    lease.renew(Duration::from_secs(5)).await.expect("renew");
    assert!(lease.release().await.expect("release"));
    assert!(!lease.release().await.expect("second release"));

    let expected = Expected::new("redis", "ledger", fence);
    assert_eq!(
        recorder.spans(),
        vec![
            expected.fenced(ACQUIRE, "acquired"),
            expected.unfenced(ACQUIRE, "busy"),
            expected.fenced(RENEW, "renewed"),
            expected.fenced(RELEASE, "released"),
            expected.fenced(RELEASE, "lost"),
        ]
    );
}

/// A lease dropped without `release()` is released in the background, inside its own
/// `locklint.release` span.
#[tokio::test]
async fn redis_release_on_drop_is_traced() {
    let redis = redis();
    let mut probe = redis.conn().await;
    let locker = RedisLocker::new(redis.conn().await)
        .with_prefix(redis.unique("tracing-drop"))
        .expect("valid prefix");
    let recorder = Recorder::default();
    let _default = tracing::subscriber::set_default(recorder.clone());

    let lease = locker
        .try_acquire("ledger", Duration::from_secs(5))
        .await
        .expect("acquire")
        .expect("free");
    let fence = lease.fence().0;
    let key = lease.key().to_owned();
    drop(lease);
    let expected = Expected::new("redis", "ledger", fence);
    let expected = vec![
        expected.fenced(ACQUIRE, "acquired"),
        expected.fenced(RELEASE, "released"),
    ];
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while recorder.spans() != expected {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            recorder.spans()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&key)
        .query_async(&mut probe)
        .await
        .expect("EXISTS");
    assert_eq!(exists, 0, "the drop released the key");
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
    let fence = lease.fence().0;
    lease.renew(Duration::from_secs(5)).await.expect("renew");
    lease.unlock().await.expect("release");

    let expected = Expected::new("memory", "ledger", fence);
    assert_eq!(
        recorder.spans(),
        vec![
            expected.fenced(ACQUIRE, "acquired"),
            expected.fenced(RENEW, "renewed"),
            expected.fenced(RELEASE, "released"),
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
    let fence = lease.fence().0;
    assert!(locks
        .acquire_timeout("ledger", Duration::from_secs(5), Duration::from_millis(20))
        .await
        .expect("second attempt")
        .is_none());
    lease.renew(Duration::from_secs(5)).await.expect("renew");
    assert!(lease.release().await.expect("release"));
    assert!(!lease.release().await.expect("second release"));

    let expected = Expected::new("table", "ledger", fence);
    assert_eq!(
        recorder.spans(),
        vec![
            expected.fenced(ACQUIRE, "acquired"),
            expected.unfenced(ACQUIRE, "timed_out"),
            expected.fenced(RENEW, "renewed"),
            expected.fenced(RELEASE, "released"),
            expected.fenced(RELEASE, "lost"),
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
    let fence = guard.fence().expect("a fence").0;
    assert!(locks.try_lock("ledger").await.expect("second").is_none());
    guard.unlock().await.expect("unlock");

    let expected = Expected::new("advisory", "ledger", fence);
    assert_eq!(
        recorder.spans(),
        vec![
            expected.fenced(ACQUIRE, "acquired"),
            expected.unfenced(ACQUIRE, "busy"),
            expected.fenced(RELEASE, "released"),
        ]
    );
    drop(_default);
    db.cleanup().await;
}
