//! The [`Inspector`]: a queue client's read-only views, and the plumbing its
//! views share (connection, timed commands, `TIME`, capped index reads).

use std::future::Future;

use crate::pool::RedisConn;
use deadpool_redis::redis::{self, RedisResult};

use super::conn::{pooled, timed};
use super::discover::discover_queues;
use crate::config::QueueConfig;
use crate::error::Result;
use crate::keys::QueueKeys;
use crate::queue::Queue;
use crate::record::Millis;

/// Read-only views of one queue. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Inspector {
    queue: Queue,
}

impl From<Queue> for Inspector {
    fn from(queue: Queue) -> Self {
        Inspector::new(queue)
    }
}

impl Inspector {
    /// Views of the queue that `queue` is a client of, over its connection pool.
    pub fn new(queue: Queue) -> Self {
        Inspector { queue }
    }

    /// The inspector of another queue over the same pool and settings.
    pub fn sibling(&self, queue: &str) -> Result<Self> {
        Ok(Inspector::new(self.queue.sibling(queue)?))
    }

    /// The queue client.
    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    /// The queue's keys.
    pub(super) fn keys(&self) -> &QueueKeys {
        self.queue.keys()
    }

    /// The queue's settings.
    pub(super) fn config(&self) -> &QueueConfig {
        self.queue.config()
    }

    /// A connection from the queue's pool.
    pub(super) async fn conn(&self) -> Result<RedisConn> {
        pooled(self.queue.pool(), self.config()).await
    }

    /// Runs `fut` within the queue's response timeout.
    pub(super) async fn timed<T>(&self, fut: impl Future<Output = RedisResult<T>>) -> Result<T> {
        timed(self.config(), fut).await
    }

    /// Every queue under the same prefix (see [`discover_queues`]).
    pub async fn discover_queues(&self) -> Result<Vec<String>> {
        discover_queues(self.queue.pool(), self.config()).await
    }

    /// Redis `TIME` in ms.
    pub async fn now(&self) -> Result<Millis> {
        let mut conn = self.conn().await?;
        self.now_on(&mut conn).await
    }

    /// Up to `max` members of a sorted set, lowest score first, and whether more exist.
    pub(super) async fn zrange_capped(
        &self,
        conn: &mut RedisConn,
        key: &str,
        max: usize,
    ) -> Result<(Vec<String>, bool)> {
        if max == 0 {
            let n: u64 = self
                .timed(redis::cmd("ZCARD").arg(key).query_async(conn))
                .await?;
            return Ok((Vec::new(), n > 0));
        }
        let mut ids: Vec<String> = self
            .timed(
                redis::cmd("ZRANGE")
                    .arg(key)
                    .arg(0)
                    .arg(max)
                    .query_async(conn),
            )
            .await?;
        let more = ids.len() > max;
        ids.truncate(max);
        Ok((ids, more))
    }

    /// Redis `TIME` in ms, over `conn`.
    pub(super) async fn now_on(&self, conn: &mut RedisConn) -> Result<Millis> {
        let (secs, micros): (i64, i64) = self.timed(redis::cmd("TIME").query_async(conn)).await?;
        Ok(secs * 1000 + micros / 1000)
    }
}
