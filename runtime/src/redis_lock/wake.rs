//! Wake-on-release: a waiting acquisition learns from a pub/sub message that the lock was
//! released, instead of only polling.
//!
//! Every release (compare-and-delete) that deletes the key also `PUBLISH`es on the lock's
//! release channel, `<prefix>:{<name>}:released`. A locker built with
//! [`RedisLocker::with_wake_on_release`](super::RedisLocker::with_wake_on_release) keeps one
//! pub/sub connection (shared by its clones), subscribes to the channel of every lock one of
//! its acquisitions waits for, and wakes those acquisitions when a message arrives. A waiter
//! still sleeps at most its full-jitter backoff, so a lost message (a dropped pub/sub
//! connection, a lock that expired instead of being released, a server without the message)
//! only costs the wait: correctness never depends on the message.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::aio::PubSubSink;
use tokio::sync::watch;

/// How long after a failed connection attempt no new one is made (waiters poll meanwhile).
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// The release channel of the lock key `key` (`<prefix>:{<name>}:lock`):
/// `<prefix>:{<name>}:released`.
pub(crate) fn release_channel(key: &str) -> String {
    let base = key.strip_suffix(":lock").unwrap_or(key);
    format!("{base}:released")
}

/// One channel somebody waits on.
struct Channel {
    waiters: usize,
    /// Counts the messages received on the channel.
    seen: watch::Sender<u64>,
}

/// The live pub/sub connection, or when the last attempt to open one failed.
enum Connection {
    Closed { failed_at: Option<Instant> },
    Open { sink: PubSubSink, generation: u64 },
}

/// The shared pub/sub state of one locker and its clones.
pub(crate) struct Wakeups {
    client: redis::Client,
    connection: tokio::sync::Mutex<Connection>,
    channels: Mutex<HashMap<String, Channel>>,
    generation: Mutex<u64>,
}

impl std::fmt::Debug for Wakeups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wakeups").finish_non_exhaustive()
    }
}

impl Wakeups {
    pub(crate) fn new(client: redis::Client) -> Arc<Self> {
        Arc::new(Wakeups {
            client,
            connection: tokio::sync::Mutex::new(Connection::Closed { failed_at: None }),
            channels: Mutex::new(HashMap::new()),
            generation: Mutex::new(0),
        })
    }

    fn channels(&self) -> std::sync::MutexGuard<'_, HashMap<String, Channel>> {
        self.channels.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a waiter on `channel`; it is subscribed by [`Watch::arm`].
    pub(crate) fn watch(self: &Arc<Self>, channel: String) -> Watch {
        let seen = {
            let mut channels = self.channels();
            let entry = channels.entry(channel.clone()).or_insert_with(|| Channel {
                waiters: 0,
                seen: watch::channel(0).0,
            });
            entry.waiters += 1;
            entry.seen.subscribe()
        };
        Watch {
            wakeups: Arc::clone(self),
            channel,
            seen,
            subscribed_on: None,
        }
    }

    /// Makes sure `channel` is subscribed on a live connection, opening one (and subscribing
    /// every watched channel on it) if needed. Returns the connection's generation, or `None`
    /// when there is no connection (the waiter then polls).
    async fn subscribe(self: &Arc<Self>, channel: &str, known: Option<u64>) -> Option<u64> {
        let mut connection = self.connection.lock().await;
        if let Connection::Open { generation, .. } = &*connection {
            if known == Some(*generation) {
                return known;
            }
        }
        if let Connection::Closed {
            failed_at: Some(at),
        } = &*connection
        {
            if at.elapsed() < RECONNECT_PAUSE {
                return None;
            }
        }
        let fresh = !matches!(&*connection, Connection::Open { .. });
        if fresh {
            match self.open().await {
                Some(open) => *connection = open,
                None => {
                    *connection = Connection::Closed {
                        failed_at: Some(Instant::now()),
                    };
                    return None;
                }
            }
        }
        let Connection::Open { sink, generation } = &mut *connection else {
            return None;
        };
        let generation = *generation;
        if !fresh && sink.subscribe(channel).await.is_err() {
            *connection = Connection::Closed {
                failed_at: Some(Instant::now()),
            };
            return None;
        }
        Some(generation)
    }

    /// Opens the pub/sub connection, subscribes every watched channel and starts the task
    /// that turns messages into wake-ups.
    async fn open(self: &Arc<Self>) -> Option<Connection> {
        let (mut sink, mut stream) = self.client.get_async_pubsub().await.ok()?.split();
        let watched: Vec<String> = self.channels().keys().cloned().collect();
        if !watched.is_empty() {
            sink.subscribe(&watched).await.ok()?;
        }
        let generation = {
            let mut generation = self.generation.lock().unwrap_or_else(|e| e.into_inner());
            *generation += 1;
            *generation
        };
        let wakeups = Arc::downgrade(self);
        tokio::spawn(async move {
            while let Some(message) = stream.next().await {
                let Some(wakeups) = wakeups.upgrade() else {
                    return;
                };
                let channels = wakeups.channels();
                if let Some(channel) = channels.get(message.get_channel_name()) {
                    channel.seen.send_modify(|n| *n = n.wrapping_add(1));
                }
            }
            // The connection is gone: forget it, and wake every waiter to poll (and, on its
            // next wait, to reconnect).
            let Some(wakeups) = wakeups.upgrade() else {
                return;
            };
            {
                let mut connection = wakeups.connection.lock().await;
                if matches!(&*connection, Connection::Open { generation: g, .. } if *g == generation)
                {
                    *connection = Connection::Closed { failed_at: None };
                }
            }
            let channels = wakeups.channels();
            for channel in channels.values() {
                channel.seen.send_modify(|n| *n = n.wrapping_add(1));
            }
        });
        Some(Connection::Open { sink, generation })
    }

    /// Unsubscribes `channel` if nobody waits on it any more. Runs under the connection
    /// lock, so it cannot overtake the subscription of a waiter that arrived meanwhile.
    async fn unsubscribe_if_idle(&self, channel: String) {
        let mut connection = self.connection.lock().await;
        if self.channels().contains_key(&channel) {
            return;
        }
        if let Connection::Open { sink, .. } = &mut *connection {
            let _ = sink.unsubscribe(&channel).await;
        }
    }
}

/// One waiting acquisition's interest in a lock's release channel.
pub(crate) struct Watch {
    wakeups: Arc<Wakeups>,
    channel: String,
    seen: watch::Receiver<u64>,
    /// The connection generation the channel is known to be subscribed on.
    subscribed_on: Option<u64>,
}

impl Watch {
    /// Called before each attempt: subscribes the channel if needed and marks every message
    /// so far as seen, so that a release after this point wakes [`wait`](Self::wait).
    pub(crate) async fn arm(&mut self) {
        self.subscribed_on = self
            .wakeups
            .subscribe(&self.channel, self.subscribed_on)
            .await;
        self.seen.borrow_and_update();
    }

    /// Sleeps for `pause`, or until a release message arrives, whichever comes first.
    pub(crate) async fn wait(&mut self, pause: Duration) {
        if self.subscribed_on.is_none() {
            tokio::time::sleep(pause).await;
            return;
        }
        tokio::select! {
            changed = self.seen.changed() => {
                if changed.is_err() {
                    tokio::time::sleep(pause).await;
                }
            }
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let idle = {
            let mut channels = self.wakeups.channels();
            match channels.get_mut(&self.channel) {
                Some(channel) => {
                    channel.waiters -= 1;
                    if channel.waiters == 0 {
                        channels.remove(&self.channel);
                        true
                    } else {
                        false
                    }
                }
                None => false,
            }
        };
        if idle {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let wakeups = Arc::clone(&self.wakeups);
                let channel = std::mem::take(&mut self.channel);
                runtime.spawn(async move { wakeups.unsubscribe_if_idle(channel).await });
            }
        }
    }
}

/// Sleeps `pause`, or, with a watch, until the lock's release is announced.
pub(crate) async fn pause(watch: Option<&mut Watch>, delay: Duration) {
    match watch {
        Some(watch) => watch.wait(delay).await,
        None => tokio::time::sleep(delay).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_channel_shares_the_lock_keys_hash_tag() {
        assert_eq!(
            release_channel("locklint:{job}:lock"),
            "locklint:{job}:released"
        );
        assert_eq!(release_channel("{job}:lock"), "{job}:released");
    }
}
