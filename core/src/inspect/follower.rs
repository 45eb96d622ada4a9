//! Following the event streams of queues as events arrive (`XREAD BLOCK`).

use std::time::Duration;

use deadpool_redis::redis;

use super::conn::timed;
use super::events::{parse_event, RawEntries};
use super::Event;
use crate::config::QueueConfig;
use crate::error::{Error, Result};
use crate::keys::QueueKeys;

/// Follows the event streams of one or more queues with `XREAD BLOCK` on a
/// dedicated connection (pooled connections time out long before a block ends).
/// The streams are read in one call, so in Redis Cluster all must be on one
/// node; follow one queue per follower there.
pub struct EventFollower {
    conn: redis::aio::MultiplexedConnection,
    /// Per stream: the queue, its events key, and the last entry id read.
    streams: Vec<(String, String, String)>,
    block: Duration,
    response_timeout: Duration,
}

impl std::fmt::Debug for EventFollower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventFollower")
            .field("streams", &self.streams)
            .field("block", &self.block)
            .finish_non_exhaustive()
    }
}

impl EventFollower {
    /// Connects to `url` and positions after the current last event of each of `queues`.
    /// Each read blocks at most `block` waiting for new events.
    pub async fn connect(
        url: &str,
        config: &QueueConfig,
        queues: &[String],
        block: Duration,
    ) -> Result<Self> {
        let client = redis::Client::open(url)?;
        let response_timeout = block + config.response_timeout;
        let conn_config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(config.connect_timeout))
            .set_response_timeout(Some(response_timeout));
        let mut conn = match tokio::time::timeout(
            config.connect_timeout + config.response_timeout,
            client.get_multiplexed_async_connection_with_config(&conn_config),
        )
        .await
        {
            Ok(conn) => conn?,
            Err(_) => return Err(Error::Timeout(config.connect_timeout)),
        };
        let mut streams = Vec::with_capacity(queues.len());
        for queue in queues {
            let keys = QueueKeys::new(&config.prefix, queue)?;
            let last: RawEntries = timed(
                config,
                redis::cmd("XREVRANGE")
                    .arg(keys.events())
                    .arg("+")
                    .arg("-")
                    .arg("COUNT")
                    .arg(1)
                    .query_async(&mut conn),
            )
            .await?;
            let position = last
                .into_iter()
                .next()
                .map_or_else(|| "0-0".to_owned(), |(id, _)| id);
            streams.push((queue.clone(), keys.events(), position));
        }
        Ok(EventFollower {
            conn,
            streams,
            block,
            response_timeout,
        })
    }

    /// Continues `queue`'s stream after entry `id` (exclusive) instead.
    pub fn resume_after(&mut self, queue: &str, id: &str) {
        for (q, _, position) in &mut self.streams {
            if q == queue {
                *position = id.to_owned();
            }
        }
    }

    /// The next events (at most `count` per queue), oldest first; empty when
    /// none arrived within the block time.
    pub async fn next_batch(&mut self, count: usize) -> Result<Vec<Event>> {
        if self.streams.is_empty() {
            tokio::time::sleep(self.block).await;
            return Ok(Vec::new());
        }
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT")
            .arg(count.max(1))
            .arg("BLOCK")
            .arg(u64::try_from(self.block.as_millis()).unwrap_or(u64::MAX))
            .arg("STREAMS");
        for (_, key, _) in &self.streams {
            cmd.arg(key);
        }
        for (_, _, position) in &self.streams {
            cmd.arg(position);
        }
        let reply: Option<Vec<(String, RawEntries)>> = match tokio::time::timeout(
            self.response_timeout,
            cmd.query_async(&mut self.conn),
        )
        .await
        {
            Ok(r) => r?,
            Err(_) => return Err(Error::Timeout(self.response_timeout)),
        };
        let mut out = Vec::new();
        for (key, entries) in reply.unwrap_or_default() {
            let Some(stream) = self.streams.iter_mut().find(|(_, k, _)| *k == key) else {
                continue;
            };
            for (id, flat) in entries {
                stream.2 = id.clone();
                out.push(parse_event(&stream.0, &key, id, flat)?);
            }
        }
        out.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.id.cmp(&b.id)));
        Ok(out)
    }
}
