use redis::AsyncCommands;

pub struct Worker {
    slot: String,
}

impl Worker {
    pub fn new(id: i64) -> Self {
        Worker {
            slot: format!("lock:ship:{id}"),
        }
    }

    pub async fn run(
        &self,
        con: &mut redis::aio::MultiplexedConnection,
    ) -> redis::RedisResult<bool> {
        let held: bool = con.set_nx(&self.slot, "me").await?;
        if held {
            let _: i64 = con.del(&self.slot).await?;
        }
        Ok(held)
    }
}
