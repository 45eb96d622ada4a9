//! Following the event streams of queues as events arrive: one `XREAD BLOCK`
//! over every stream on one server; on a cluster, one `XREAD` per queue (each
//! stream read on the node of its queue's slot, never two slots in one
//! command), polled concurrently.

use std::time::{Duration, Instant};

use deadpool_redis::redis;

use super::conn::timed;
use super::events::{parse_entry, RawEntries};
use super::Event;
use crate::config::QueueConfig;
use crate::error::{Error, Result};
use crate::keys::QueueKeys;
use crate::pool::{connect_pool, is_cluster_url, Multiplexed};

/// On a cluster, how long the follower waits between two rounds of reads
/// that found nothing.
const CLUSTER_POLL: Duration = Duration::from_millis(200);

/// Follows the event streams of one or more queues with `XREAD BLOCK` on a
/// dedicated connection (pooled connections time out long before a block ends).
/// On a Redis Cluster the queues' streams live on different nodes: each is
/// read by an `XREAD` of its own (without `BLOCK`, all at once on a cluster
/// connection of the follower's own), every 200 ms while nothing arrives, so
/// no blocking read on one node holds up another's.
pub struct EventFollower {
    conn: Multiplexed,
    cluster: bool,
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
        let response_timeout = block + config.response_timeout;
        let cluster = is_cluster_url(url);
        let mut conn = if cluster {
            connect_pool(url, config)?
                .dedicated(response_timeout)
                .await?
        } else {
            let client = redis::Client::open(url)?;
            let conn_config = redis::AsyncConnectionConfig::new()
                .set_connection_timeout(Some(config.connect_timeout))
                .set_response_timeout(Some(response_timeout));
            match tokio::time::timeout(
                config.connect_timeout + config.response_timeout,
                client.get_multiplexed_async_connection_with_config(&conn_config),
            )
            .await
            {
                Ok(conn) => Multiplexed::Server(conn?),
                Err(_) => return Err(Error::Timeout(config.connect_timeout)),
            }
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
            cluster,
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
        if self.cluster {
            return self.next_batch_per_stream(count).await;
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
        self.take(reply.unwrap_or_default())
    }

    /// [`EventFollower::next_batch`] on a cluster: one `XREAD` per stream,
    /// all sent at once, in rounds [`CLUSTER_POLL`] apart until one finds
    /// events or the block time ran out.
    async fn next_batch_per_stream(&mut self, count: usize) -> Result<Vec<Event>> {
        let until = Instant::now() + self.block;
        loop {
            let reads = self.streams.iter().map(|(_, key, position)| {
                let mut conn = self.conn.clone();
                let mut cmd = redis::cmd("XREAD");
                cmd.arg("COUNT")
                    .arg(count.max(1))
                    .arg("STREAMS")
                    .arg(key)
                    .arg(position);
                let limit = self.response_timeout;
                async move {
                    match tokio::time::timeout(
                        limit,
                        cmd.query_async::<Option<Vec<(String, RawEntries)>>>(&mut conn),
                    )
                    .await
                    {
                        Ok(r) => Ok(r?.unwrap_or_default()),
                        Err(_) => Err(Error::Timeout(limit)),
                    }
                }
            });
            let mut replies = Vec::new();
            for reply in futures_util::future::join_all(reads).await {
                replies.extend(reply?);
            }
            let out = self.take(replies)?;
            let now = Instant::now();
            if !out.is_empty() || now >= until {
                return Ok(out);
            }
            tokio::time::sleep(CLUSTER_POLL.min(until - now)).await;
        }
    }

    /// The events of `reply`, oldest first, moving each stream's position on.
    fn take(&mut self, reply: Vec<(String, RawEntries)>) -> Result<Vec<Event>> {
        let mut out = Vec::new();
        for (key, entries) in reply {
            let Some(stream) = self.streams.iter_mut().find(|(_, k, _)| *k == key) else {
                continue;
            };
            for (id, flat) in entries {
                stream.2 = id.clone();
                out.extend(parse_entry(&stream.0, &key, id, flat)?);
            }
        }
        out.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.id.cmp(&b.id)));
        Ok(out)
    }
}
