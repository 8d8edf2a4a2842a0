//! The Lua scripts and server commands behind leases.

use std::sync::LazyLock;

use redis::Script;

/// Takes the lock and mints the fencing token in one atomic step.
///
/// `KEYS[1]` lock key, `KEYS[2]` fence counter key (same hash tag), `ARGV[1]` token,
/// `ARGV[2]` TTL in milliseconds. Returns the new fencing token (>= 1) to the winner and 0 to
/// everyone else, so a fence is only ever issued to the holder of the lock.
///
/// The fence is `max(counter + 1, server time in microseconds)`, and the counter is set to
/// it. The time floor keeps the fence from going backwards when the counter is lost (a
/// restart without persistence, `FLUSHALL`, a failover to a replica that missed the last
/// write): the first fence after the loss is the server's current time, which is larger
/// than every fence issued before as long as the server clock has not been set back. At
/// most one fence is issued per lock per acquisition, far fewer than one per microsecond, so
/// the counter stays within a few microseconds of the clock and cannot run away from it.
/// The time is built as a decimal string (seconds, then six digits of microseconds) because
/// Lua numbers would print a 16-digit value in exponent notation.
/// `redis.replicate_commands()` lets Redis 3.2 to 4 replicate the effects of a script that
/// read the time (later versions always do).
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
if redis.replicate_commands then redis.replicate_commands() end
local now = redis.call('time')
local micros = now[1] .. string.rep('0', 6 - string.len(now[2])) .. now[2]
local fence = redis.call('incr', KEYS[2])
if fence < tonumber(micros) then
  redis.call('set', KEYS[2], micros)
  return tonumber(micros)
end
return fence",
    )
});

/// Compare-and-delete: deletes the lock key only if it still holds our token, and then
/// announces the release on the channel `ARGV[2]` (see [`super::wake`]).
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('get',KEYS[1]) == ARGV[1] then
  redis.call('del',KEYS[1])
  redis.call('publish',ARGV[2],'released')
  return 1
end
return 0",
    )
});

/// Compare-and-PEXPIRE: extends the lock key only if it still holds our token.
pub(crate) static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('pexpire',KEYS[1],ARGV[2]) else return 0 end",
    )
});

/// How a release is sent to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReleaseMode {
    /// `DELEX key IFEQ token` (Redis 8.4 and later).
    DelEx,
    /// The [`RELEASE`] Lua script.
    Lua,
}

/// First server version with `DELEX ... IFEQ`.
const DELEX_SINCE: (u32, u32) = (8, 4);

/// Chooses the release mode from an `INFO server` reply.
///
/// On a cluster the reply covers every primary; the lowest version found decides, so a
/// half-upgraded cluster keeps using the script. Anything unparseable selects the script.
pub(crate) fn release_mode_from_info(info: &redis::Value) -> ReleaseMode {
    let mut texts = Vec::new();
    collect_strings(info, &mut texts);
    let mut lowest: Option<(u32, u32)> = None;
    let mut saw_any = false;
    for text in &texts {
        for line in text.lines() {
            if let Some(v) = line.trim().strip_prefix("redis_version:") {
                saw_any = true;
                let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
                let version = match (parts.next().flatten(), parts.next().flatten()) {
                    (Some(major), Some(minor)) => (major, minor),
                    _ => return ReleaseMode::Lua,
                };
                lowest = Some(lowest.map_or(version, |l| l.min(version)));
            }
        }
    }
    match lowest {
        Some(v) if saw_any && v >= DELEX_SINCE => ReleaseMode::DelEx,
        _ => ReleaseMode::Lua,
    }
}

fn collect_strings(value: &redis::Value, out: &mut Vec<String>) {
    use redis::Value;
    match value {
        Value::BulkString(bytes) => out.push(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(s) => out.push(s.clone()),
        Value::VerbatimString { text, .. } => out.push(text.clone()),
        Value::Array(items) | Value::Set(items) => {
            items.iter().for_each(|v| collect_strings(v, out));
        }
        Value::Map(pairs) => pairs.iter().for_each(|(_, v)| collect_strings(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn old_servers_use_lua() {
        let info = bulk("# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n");
        assert_eq!(release_mode_from_info(&info), ReleaseMode::Lua);
    }

    #[test]
    fn new_servers_use_delex() {
        assert_eq!(
            release_mode_from_info(&bulk("redis_version:8.4.0\r\n")),
            ReleaseMode::DelEx
        );
        assert_eq!(
            release_mode_from_info(&bulk("redis_version:9.0.1\r\n")),
            ReleaseMode::DelEx
        );
    }

    #[test]
    fn mixed_cluster_uses_lowest_version() {
        let info = Value::Map(vec![
            (bulk("a:1"), bulk("redis_version:8.4.0\r\n")),
            (bulk("b:2"), bulk("redis_version:8.2.1\r\n")),
        ]);
        assert_eq!(release_mode_from_info(&info), ReleaseMode::Lua);
    }

    #[test]
    fn garbage_uses_lua() {
        assert_eq!(release_mode_from_info(&Value::Nil), ReleaseMode::Lua);
        assert_eq!(
            release_mode_from_info(&bulk("redis_version:banana")),
            ReleaseMode::Lua
        );
    }
}
