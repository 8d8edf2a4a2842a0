//! How a release is sent to the server, learned from the server and shared by a locker's
//! clones and leases: `DELEX key IFEQ token` where the server has it, else the Lua script.

use std::sync::atomic::{AtomicU8, Ordering};

use super::scripts::{release_mode_from_info, ReleaseMode, RELEASE};
use super::wake::release_channel;
use super::{LockConnection, LockError};

const UNKNOWN: u8 = 0;
const LUA: u8 = 1;
const DELEX: u8 = 2;

/// The release mode of one server, once known.
///
/// A failed `INFO` probe is not remembered: that release uses the script and the next one
/// probes again. A server that reports 8.4+ but rejects `DELEX` (a proxy, a renamed command)
/// is remembered as script-only, so later releases do not pay a failed `DELEX` first.
#[derive(Debug)]
pub(crate) struct ReleaseModes(AtomicU8);

impl Default for ReleaseModes {
    fn default() -> Self {
        ReleaseModes(AtomicU8::new(UNKNOWN))
    }
}

impl ReleaseModes {
    fn known(&self) -> Option<ReleaseMode> {
        match self.0.load(Ordering::Acquire) {
            LUA => Some(ReleaseMode::Lua),
            DELEX => Some(ReleaseMode::DelEx),
            _ => None,
        }
    }

    fn learn(&self, mode: ReleaseMode) {
        let code = match mode {
            ReleaseMode::Lua => LUA,
            ReleaseMode::DelEx => DELEX,
        };
        self.0.store(code, Ordering::Release);
    }

    /// The mode to use now: the known one, else the result of an `INFO server` probe.
    async fn current<C: LockConnection>(&self, conn: &C) -> ReleaseMode {
        if let Some(mode) = self.known() {
            return mode;
        }
        let mut probe = conn.clone();
        match redis::cmd("INFO")
            .arg("server")
            .query_async::<redis::Value>(&mut probe)
            .await
        {
            Ok(info) => {
                let mode = release_mode_from_info(&info);
                self.learn(mode);
                mode
            }
            Err(_) => ReleaseMode::Lua,
        }
    }
}

/// Compare-and-delete of `key` if it holds `token`, announced on the lock's release
/// channel; returns whether a key was deleted.
///
/// With `DELEX` the announcement is a `PUBLISH` pipelined after it (sent whether or not the
/// key was deleted: a needless message only makes waiters try once more); the Lua script
/// publishes only when it deleted the key.
pub(crate) async fn release_key<C: LockConnection>(
    conn: &mut C,
    modes: &ReleaseModes,
    key: &str,
    token: &str,
) -> Result<bool, LockError> {
    let channel = release_channel(key);
    if modes.current(conn).await == ReleaseMode::DelEx {
        // `ignore_errors` keeps each reply as sent, so a rejected DELEX is told apart.
        let replies: Vec<redis::Value> = redis::pipe()
            .cmd("DELEX")
            .arg(key)
            .arg("IFEQ")
            .arg(token)
            .cmd("PUBLISH")
            .arg(&channel)
            .arg("released")
            .ignore_errors()
            .query_async(conn)
            .await?;
        match replies.into_iter().next() {
            Some(redis::Value::Int(n)) => return Ok(n == 1),
            Some(redis::Value::ServerError(e))
                if e.kind() == Some(redis::ServerErrorKind::ResponseError) =>
            {
                // The server reports 8.4+ but rejects DELEX: use the script from now on.
                modes.learn(ReleaseMode::Lua);
            }
            Some(redis::Value::ServerError(e)) => return Err(redis::RedisError::from(e).into()),
            other => return Err(LockError::UnexpectedReply(format!("DELEX: {other:?}"))),
        }
    }
    let mut invocation = RELEASE.key(key);
    invocation.arg(token).arg(&channel);
    let deleted: i64 = invocation.invoke_async(conn).await?;
    Ok(deleted == 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::{Cmd, RedisFuture, Value};
    use std::sync::{Arc, Mutex};

    /// A scripted server: answers `INFO` from a queue of replies, rejects `DELEX` or
    /// answers it, answers scripts with 1, and records every command name it saw.
    #[derive(Clone, Default)]
    struct Fake {
        info: Arc<Mutex<Vec<Option<&'static str>>>>,
        delex_rejected: bool,
        seen: Arc<Mutex<Vec<String>>>,
    }

    impl Fake {
        fn seen(&self) -> Vec<String> {
            std::mem::take(&mut *self.seen.lock().unwrap())
        }
    }

    impl redis::aio::ConnectionLike for Fake {
        fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
            let reply = match self.answer(cmd) {
                Ok(Value::ServerError(e)) => Err(e.into()),
                other => other,
            };
            Box::pin(async move { reply })
        }

        fn req_packed_commands<'a>(
            &'a mut self,
            pipeline: &'a redis::Pipeline,
            offset: usize,
            count: usize,
        ) -> RedisFuture<'a, Vec<Value>> {
            let replies: redis::RedisResult<Vec<Value>> =
                pipeline.cmd_iter().map(|cmd| self.answer(cmd)).collect();
            Box::pin(async move { Ok(replies?.into_iter().skip(offset).take(count).collect()) })
        }

        fn get_db(&self) -> i64 {
            0
        }
    }

    impl Fake {
        fn answer(&self, cmd: &Cmd) -> redis::RedisResult<Value> {
            let name = match cmd.args_iter().next() {
                Some(redis::Arg::Simple(b)) => String::from_utf8_lossy(b).to_uppercase(),
                _ => String::new(),
            };
            self.seen.lock().unwrap().push(name.clone());
            match name.as_str() {
                "INFO" => match self.info.lock().unwrap().remove(0) {
                    Some(text) => Ok(Value::BulkString(text.as_bytes().to_vec())),
                    None => Err(redis::RedisError::from((
                        redis::ErrorKind::Io,
                        "connection reset",
                    ))),
                },
                "DELEX" if self.delex_rejected => {
                    redis::parse_redis_value(b"-ERR unknown command 'DELEX'\r\n")
                }
                _ => Ok(Value::Int(1)),
            }
        }
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn a_failed_probe_is_not_remembered() {
        let mut conn = Fake {
            info: Arc::new(Mutex::new(vec![None, Some("redis_version:8.4.0\r\n")])),
            ..Fake::default()
        };
        let modes = ReleaseModes::default();
        block_on(async {
            assert!(release_key(&mut conn, &modes, "k", "t").await.unwrap());
            assert_eq!(conn.seen(), ["INFO", "EVALSHA"]);
            assert!(release_key(&mut conn, &modes, "k", "t").await.unwrap());
            assert_eq!(conn.seen(), ["INFO", "DELEX", "PUBLISH"]);
            assert!(release_key(&mut conn, &modes, "k", "t").await.unwrap());
            assert_eq!(
                conn.seen(),
                ["DELEX", "PUBLISH"],
                "a successful probe is remembered"
            );
        });
    }

    #[test]
    fn a_rejected_delex_switches_to_the_script_for_good() {
        let mut conn = Fake {
            info: Arc::new(Mutex::new(vec![Some("redis_version:8.4.1\r\n")])),
            delex_rejected: true,
            ..Fake::default()
        };
        let modes = ReleaseModes::default();
        block_on(async {
            assert!(release_key(&mut conn, &modes, "k", "t").await.unwrap());
            assert_eq!(conn.seen(), ["INFO", "DELEX", "PUBLISH", "EVALSHA"]);
            assert!(release_key(&mut conn, &modes, "k", "t").await.unwrap());
            assert_eq!(conn.seen(), ["EVALSHA"]);
        });
    }

    #[test]
    fn old_servers_use_the_script_without_probing_again() {
        let mut conn = Fake {
            info: Arc::new(Mutex::new(vec![Some("redis_version:7.0.15\r\n")])),
            ..Fake::default()
        };
        let modes = ReleaseModes::default();
        block_on(async {
            release_key(&mut conn, &modes, "k", "t").await.unwrap();
            release_key(&mut conn, &modes, "k", "t").await.unwrap();
            assert_eq!(conn.seen(), ["INFO", "EVALSHA", "EVALSHA"]);
        });
    }
}
