//! How a release is sent to the server, learned from the server and shared by a locker's
//! clones and leases: `DELEX key IFEQ token` where the server has it, else the Lua script.

use std::sync::atomic::{AtomicU8, Ordering};

use super::scripts::{release_mode_from_info, ReleaseMode, RELEASE};
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

/// Compare-and-delete of `key` if it holds `token`; returns whether a key was deleted.
pub(crate) async fn release_key<C: LockConnection>(
    conn: &mut C,
    modes: &ReleaseModes,
    key: &str,
    token: &str,
) -> Result<bool, LockError> {
    if modes.current(conn).await == ReleaseMode::DelEx {
        let deleted: Result<i64, redis::RedisError> = redis::cmd("DELEX")
            .arg(key)
            .arg("IFEQ")
            .arg(token)
            .query_async(conn)
            .await;
        match deleted {
            Ok(n) => return Ok(n == 1),
            // The server reports 8.4+ but rejects DELEX: use the script from now on.
            Err(e)
                if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError) =>
            {
                modes.learn(ReleaseMode::Lua);
            }
            Err(e) => return Err(e.into()),
        }
    }
    let mut invocation = RELEASE.key(key);
    invocation.arg(token);
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
            let name = match cmd.args_iter().next() {
                Some(redis::Arg::Simple(b)) => String::from_utf8_lossy(b).to_uppercase(),
                _ => String::new(),
            };
            self.seen.lock().unwrap().push(name.clone());
            let reply = match name.as_str() {
                "INFO" => match self.info.lock().unwrap().remove(0) {
                    Some(text) => Ok(Value::BulkString(text.as_bytes().to_vec())),
                    None => Err(redis::RedisError::from((
                        redis::ErrorKind::Io,
                        "connection reset",
                    ))),
                },
                "DELEX" if self.delex_rejected => Err(redis::RedisError::from((
                    redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
                    "unknown command",
                ))),
                _ => Ok(Value::Int(1)),
            };
            Box::pin(async move { reply })
        }

        fn req_packed_commands<'a>(
            &'a mut self,
            _: &'a redis::Pipeline,
            _: usize,
            _: usize,
        ) -> RedisFuture<'a, Vec<Value>> {
            Box::pin(async { Ok(vec![]) })
        }

        fn get_db(&self) -> i64 {
            0
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
            assert_eq!(conn.seen(), ["INFO", "DELEX"]);
            assert!(release_key(&mut conn, &modes, "k", "t").await.unwrap());
            assert_eq!(conn.seen(), ["DELEX"], "a successful probe is remembered");
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
            assert_eq!(conn.seen(), ["INFO", "DELEX", "EVALSHA"]);
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
