//! The workspace's lock helpers, used by the other crates.

use redis::AsyncCommands;

/// Takes `key` for `ttl_ms` when nobody holds it.
pub async fn try_lock(
    con: &mut redis::aio::MultiplexedConnection,
    key: &str,
    token: &str,
    ttl_ms: u64,
) -> redis::RedisResult<bool> {
    let reply: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(ttl_ms)
        .query_async(con)
        .await?;
    Ok(reply.is_some())
}

/// Deletes `key` whoever holds it.
pub async fn release_lock(
    con: &mut redis::aio::MultiplexedConnection,
    key: &str,
) -> redis::RedisResult<()> {
    let _: i64 = con.del(key).await?;
    Ok(())
}
