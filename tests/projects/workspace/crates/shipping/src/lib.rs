//! Shipping: a worker whose lock key is a field set where the worker is built.

pub mod worker;

pub async fn ship(
    con: &mut redis::aio::MultiplexedConnection,
    id: i64,
) -> redis::RedisResult<bool> {
    let w = worker::Worker::new(id);
    w.run(con).await
}
