//! Wake-on-release: every release announces itself on the lock's release channel, and a
//! waiting acquisition of a locker built `with_wake_on_release` wakes on that message
//! instead of sleeping out its backoff.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use locklint_runtime::redis_lock::{Backoff, RedisLocker};
use support::redis::redis;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_is_published_on_the_locks_channel() {
    let redis = redis();
    let locker = RedisLocker::new(redis.conn().await)
        .with_prefix(redis.unique("wake-publish"))
        .unwrap();
    let channel = locker.release_channel("job");
    assert_eq!(channel, format!("{}:{{job}}:released", locker.prefix()));
    let mut pubsub = redis.client().get_async_pubsub().await.unwrap();
    pubsub.subscribe(&channel).await.unwrap();
    let mut messages = pubsub.into_on_message();

    let mut lease = locker
        .try_acquire("job", Duration::from_secs(10))
        .await
        .unwrap()
        .expect("free");
    assert!(lease.release().await.unwrap());
    let message = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .expect("no release message")
        .expect("pub/sub stream ended");
    assert_eq!(message.get_channel_name(), channel);
}

/// With a backoff of a full minute, only the release message can wake the waiter in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_wakes_on_the_release_message() {
    let redis = redis();
    let prefix = redis.unique("wake-waiter");
    let holder = RedisLocker::new(redis.conn().await)
        .with_prefix(prefix.clone())
        .unwrap();
    let mut held = holder
        .try_acquire("job", Duration::from_secs(30))
        .await
        .unwrap()
        .expect("free");
    let minute = Duration::from_secs(60);
    let waiter = RedisLocker::new(redis.conn().await)
        .with_prefix(prefix)
        .unwrap()
        .with_backoff(Backoff {
            base: minute,
            max: minute,
        })
        .with_wake_on_release(redis.client());
    let wait = tokio::spawn(async move {
        waiter
            .acquire_timeout("job", Duration::from_secs(10), minute * 2)
            .await
    });
    // Let the waiter find the lock busy, subscribe and go to sleep.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!wait.is_finished());
    assert!(held.release().await.unwrap());
    let mut lease = tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("the release message did not wake the waiter")
        .unwrap()
        .expect("acquired");
    assert!(lease.fence() > held.fence());
    assert!(lease.release().await.unwrap());
}
