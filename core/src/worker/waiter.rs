//! The idle wait of a lease loop: blocks on its queue's wake lists with a
//! connection of its own until work arrives or the wait runs out.
//!
//! Every lease loop (one per queue and lease TTL) has its own waiter and so
//! its own blocking connection: on a cluster, a worker serving queues on
//! several shards blocks once per queue, each on the node of that queue's
//! slot (a cluster connection of its own routes the `BLPOP` by its first key
//! and follows the slot when it moves), and no queue's wait holds up another's.

use std::time::Duration;

use deadpool_redis::redis::{self, AsyncConnectionConfig};
use tracing::debug;

use super::shared::RedisSource;
use crate::config::QueueConfig;
use crate::error::{Error, Result};
use crate::pool::{connect_pool, is_cluster_url, Multiplexed};

/// Blocks on the queue's wake list with a connection of its own.
pub(crate) struct Waiter {
    /// Where to open the connection.
    source: RedisSource,
    /// The wake lists of the group's pipelines.
    keys: Vec<String>,
    /// The blocking connection, once open; dropped after a failed wait.
    conn: Option<Multiplexed>,
}

/// Waits up to this long are slept instead of blocking in Redis.
const SLEEP_BELOW: Duration = Duration::from_millis(150);

impl Waiter {
    /// A waiter on `keys`, connecting to `source` when it first waits.
    pub(crate) fn new(source: &RedisSource, keys: Vec<String>) -> Self {
        Waiter {
            source: source.clone(),
            keys,
            conn: None,
        }
    }

    /// A connection of its own: opened from the URL, or taken out of the pool for good.
    async fn connect(&self, wait: Duration) -> Result<Multiplexed> {
        let reply = wait + Duration::from_secs(5);
        match &self.source {
            RedisSource::Url(url) if is_cluster_url(url) => {
                let config = QueueConfig {
                    response_timeout: reply,
                    ..QueueConfig::default()
                };
                connect_pool(url, &config)?.dedicated(reply).await
            }
            RedisSource::Url(url) => {
                let client = redis::Client::open(url.as_str())?;
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(Duration::from_secs(5)))
                    .set_response_timeout(Some(reply));
                Ok(Multiplexed::Server(
                    client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await?,
                ))
            }
            // a new connection made by the pool's manager (or a cluster
            // connection of its own), never one of the pool's own: those are
            // shared (multiplexed) with script calls, which a blocking BLPOP
            // would stall
            RedisSource::Pool(pool) => pool.dedicated(reply).await,
        }
    }

    /// Waits up to `wait` for a wake-up token.
    pub(crate) async fn wait(&mut self, wait: Duration) {
        let max_block = Duration::from_secs(60);
        let wait = wait.min(max_block);
        // A short wait (a delayed job, a rate-limited start due in a moment) is
        // slept here: Redis ends a blocking command's timeout only at its next
        // cron tick (every 100 ms at the default hz), which would start such a
        // job up to 100 ms late.
        if wait <= SLEEP_BELOW {
            tokio::time::sleep(wait).await;
            return;
        }
        if self.conn.is_none() {
            match self.connect(max_block).await {
                Ok(c) => self.conn = Some(c),
                Err(e) => {
                    debug!(error = %e, "cannot open the blocking connection; sleeping instead");
                    tokio::time::sleep(wait).await;
                    return;
                }
            }
        }
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let secs = wait.as_secs_f64().max(0.01);
        let reply: std::result::Result<Option<(String, String)>, Error> = redis::cmd("BLPOP")
            .arg(&self.keys)
            .arg(format!("{secs:.3}"))
            .query_async(conn)
            .await
            .map_err(Error::from);
        if let Err(e) = reply {
            debug!(error = %e, "blocking wait failed; reconnecting next time");
            self.conn = None;
            tokio::time::sleep(wait.min(Duration::from_millis(500))).await;
        }
    }
}
