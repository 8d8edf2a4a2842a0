//! Mutual exclusion under contention against a real Redis.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use locklint_runtime::redis_lock::{Backoff, RedisLocker};
use support::redis::redis;

const WORKERS: usize = 16;
const ROUNDS: usize = 200;

/// 16 workers x 200 acquisitions of one lock (acquire with full-jitter backoff, plus some
/// `try_acquire` loops). Inside the critical section an `inside` counter must never exceed 1,
/// and a deliberately non-atomic read-yield-write counter must end at exactly 3200 (any
/// overlap would lose an increment). Fences recorded inside the critical section, i.e. in
/// acquisition order, must be strictly increasing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mutual_exclusion_under_contention() {
    let redis = redis();
    let prefix = redis.unique("contention");
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let counter = Arc::new(AtomicUsize::new(0));
    let fences = Arc::new(Mutex::new(Vec::with_capacity(WORKERS * ROUNDS)));

    let mut tasks = Vec::new();
    for worker in 0..WORKERS {
        let conn = redis.conn().await;
        let locker = RedisLocker::new(conn)
            .with_prefix(prefix.clone())
            .unwrap()
            .with_backoff(Backoff {
                base: Duration::from_micros(200),
                max: Duration::from_millis(4),
            });
        let (inside, max_inside, counter, fences) = (
            Arc::clone(&inside),
            Arc::clone(&max_inside),
            Arc::clone(&counter),
            Arc::clone(&fences),
        );
        tasks.push(tokio::spawn(async move {
            for round in 0..ROUNDS {
                let ttl = Duration::from_secs(10);
                let mut lease = if (worker + round) % 4 == 0 {
                    // Hand-rolled retry loop over try_acquire.
                    let mut attempt = 0;
                    loop {
                        if let Some(lease) = locker.try_acquire("shared", ttl).await.unwrap() {
                            break lease;
                        }
                        tokio::time::sleep(Backoff::default().delay(attempt.min(2))).await;
                        attempt += 1;
                    }
                } else {
                    locker.acquire("shared", ttl).await.unwrap()
                };

                let now_inside = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max_inside.fetch_max(now_inside, Ordering::SeqCst);
                fences.lock().unwrap().push(lease.fence().0);
                let read = counter.load(Ordering::SeqCst);
                tokio::task::yield_now().await;
                counter.store(read + 1, Ordering::SeqCst);
                inside.fetch_sub(1, Ordering::SeqCst);

                assert!(lease.release().await.unwrap(), "still owned at release");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }

    assert_eq!(max_inside.load(Ordering::SeqCst), 1, "two holders at once");
    assert_eq!(
        counter.load(Ordering::SeqCst),
        WORKERS * ROUNDS,
        "lost updates"
    );
    let fences = fences.lock().unwrap();
    assert_eq!(fences.len(), WORKERS * ROUNDS);
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences not strictly increasing in acquisition order"
    );
}
