//! Billing jobs: they take the workspace's locks and write shipments under them.

use crate::keys::{shipment_key, INVOICE_RUN, RELEASE_SCRIPT};
use redis::AsyncCommands;
use sqlx::PgPool;

pub async fn close_run(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {
    let _: bool = con.set_nx(INVOICE_RUN, "worker-1").await?;
    let _: bool = con.expire(INVOICE_RUN, 30).await?;
    Ok(())
}

pub async fn dispatch(
    con: &mut redis::aio::MultiplexedConnection,
    pool: &PgPool,
    shipment: i64,
    token: &str,
) -> anyhow::Result<bool> {
    let key = shipment_key(shipment);
    if !locks::try_lock(con, &key, token, 10_000).await? {
        return Ok(false);
    }
    sqlx::query("UPDATE shipments SET status = 'dispatched' WHERE id = $1")
        .bind(shipment)
        .execute(pool)
        .await?;
    locks::release_lock(con, &key).await?;
    Ok(true)
}

pub async fn finish(
    con: &mut redis::aio::MultiplexedConnection,
    shipment: i64,
) -> redis::RedisResult<()> {
    let _: i64 = redis::Script::new(RELEASE_SCRIPT)
        .key(shipment_key(shipment))
        .invoke_async(con)
        .await?;
    Ok(())
}
