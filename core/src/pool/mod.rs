//! Where Redis is: one server or a Redis Cluster, behind one pool type
//! ([`RedisPool`]) whose connections ([`RedisConn`]) the rest of the crate
//! uses without asking which it is. Slot routing, `MOVED`/`ASK` redirects,
//! `TRYAGAIN` waits and reconnects after a failover are redis-rs's
//! (`cluster-async`); this module chooses the kind from the URL, sets the
//! timeouts, and offers the few cluster-wide things a queue needs: a command
//! on every master (discovery `SCAN`), a command on the master of one queue's
//! slot, and connections of their own for blocking reads.
//!
//! URLs: `redis://`, `rediss://`, `redis+unix://` name one server;
//! `redis+cluster://[user[:password]@]host:port[,host:port...][/?...]` (and
//! `rediss+cluster://` for TLS) name a cluster by seed nodes: any reachable
//! seed is enough, the client learns the rest from `CLUSTER SLOTS`.

use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::redis::aio::{ConnectionLike, MultiplexedConnection};
use deadpool_redis::redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConfig};
use deadpool_redis::redis::cluster_async::ClusterConnection;
use deadpool_redis::redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use deadpool_redis::redis::{self, Cmd, FromRedisValue, Pipeline, RedisFuture, Value};
use deadpool_redis::{Pool, PoolConfig, Runtime, Timeouts};

use crate::config::QueueConfig;
use crate::error::{Error, Result};

mod subscriber;
mod topology;
mod url;

pub(crate) use subscriber::{Message, Subscriber};
pub use topology::{key_slot, Master};
pub use url::{cluster_seed_urls, connect_pool, is_cluster_url};

/// Connections to Redis: a pool of connections to one server, or a client of
/// a Redis Cluster. Cheap to clone; clones share the connections.
#[derive(Clone)]
pub enum RedisPool {
    /// One server (`redis://`, `rediss://`, `redis+unix://`).
    Server(Pool),
    /// A Redis Cluster (`redis+cluster://`, `rediss+cluster://`).
    Cluster(ClusterPool),
}

impl std::fmt::Debug for RedisPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RedisPool::Server(_) => f.write_str("RedisPool::Server"),
            RedisPool::Cluster(_) => f.write_str("RedisPool::Cluster"),
        }
    }
}

impl From<Pool> for RedisPool {
    fn from(pool: Pool) -> Self {
        RedisPool::Server(pool)
    }
}

/// A client of a Redis Cluster: one multiplexed cluster connection (it holds
/// a connection per node and follows the slot map) shared by every caller,
/// opened on first use and opened again when opening failed.
#[derive(Clone)]
pub struct ClusterPool {
    client: Arc<ClusterClient>,
    url: Arc<str>,
    shared: Arc<tokio::sync::Mutex<Option<ClusterConnection>>>,
    connect_timeout: Duration,
    response_timeout: Duration,
}

/// A connection from a [`RedisPool`]; use it like any redis-rs async
/// connection (`query_async`, `AsyncCommands`).
pub enum RedisConn {
    /// A pooled connection to one server.
    Server(deadpool_redis::Connection),
    /// The cluster client's shared connection.
    Cluster(ClusterConnection),
}

impl std::fmt::Debug for RedisConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RedisConn::Server(_) => f.write_str("RedisConn::Server"),
            RedisConn::Cluster(_) => f.write_str("RedisConn::Cluster"),
        }
    }
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RedisConn::Server(c) => c.req_packed_command(cmd),
            RedisConn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RedisConn::Server(c) => c.req_packed_commands(cmd, offset, count),
            RedisConn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConn::Server(c) => c.get_db(),
            RedisConn::Cluster(c) => c.get_db(),
        }
    }
}

/// A multiplexed connection: to one server, or a cluster connection. Script
/// calls pipeline on a shared one; blocking reads get one of their own.
#[derive(Clone)]
pub(crate) enum Multiplexed {
    /// To one server.
    Server(MultiplexedConnection),
    /// To a cluster.
    Cluster(ClusterConnection),
}

impl ConnectionLike for Multiplexed {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Multiplexed::Server(c) => c.req_packed_command(cmd),
            Multiplexed::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Multiplexed::Server(c) => c.req_packed_commands(cmd, offset, count),
            Multiplexed::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Multiplexed::Server(c) => c.get_db(),
            Multiplexed::Cluster(c) => c.get_db(),
        }
    }
}

/// A pool error as the crate's error.
fn pool_error(e: deadpool_redis::PoolError, wait: Duration) -> Error {
    match e {
        deadpool_redis::PoolError::Backend(e) => Error::Redis(e),
        deadpool_redis::PoolError::Timeout(_) => Error::Timeout(wait),
        other => Error::Pool(other.to_string()),
    }
}

impl ClusterPool {
    /// The shared cluster connection, opened on first use.
    async fn shared(&self) -> Result<ClusterConnection> {
        let mut slot = self.shared.lock().await;
        if let Some(conn) = slot.as_ref() {
            return Ok(conn.clone());
        }
        let conn = match tokio::time::timeout(
            self.connect_timeout.saturating_mul(2),
            self.client.get_async_connection(),
        )
        .await
        {
            Ok(conn) => conn?,
            Err(_) => return Err(Error::Timeout(self.connect_timeout)),
        };
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// A cluster connection of its own, whose replies may take up to `reply`.
    async fn dedicated(&self, reply: Duration) -> Result<ClusterConnection> {
        let config = ClusterConfig::new()
            .set_connection_timeout(self.connect_timeout)
            .set_response_timeout(reply);
        match tokio::time::timeout(
            self.connect_timeout.saturating_mul(2),
            self.client.get_async_connection_with_config(config),
        )
        .await
        {
            Ok(conn) => Ok(conn?),
            Err(_) => Err(Error::Timeout(self.connect_timeout)),
        }
    }
}

impl RedisPool {
    /// Builds the connections for `url` (see [`connect_pool`]).
    pub fn connect(url: &str, config: &QueueConfig) -> Result<Self> {
        connect_pool(url, config)
    }

    /// Whether this is a cluster client.
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisPool::Cluster(_))
    }

    /// The URL a pub/sub subscription of its own opens: a cluster's (its
    /// client was built from one); none for a pool of one server, whose
    /// connection details are the pool's own.
    pub(crate) fn subscribe_url(&self) -> Option<String> {
        match self {
            RedisPool::Server(_) => None,
            RedisPool::Cluster(cluster) => Some(cluster.url.to_string()),
        }
    }

    /// A connection for plain commands: a pooled one to the server, or the
    /// cluster client's shared connection.
    pub async fn get(&self) -> Result<RedisConn> {
        match self {
            RedisPool::Server(pool) => {
                let wait = pool.timeouts().wait.unwrap_or(Duration::from_secs(5));
                pool.get()
                    .await
                    .map(RedisConn::Server)
                    .map_err(|e| pool_error(e, wait))
            }
            RedisPool::Cluster(cluster) => cluster.shared().await.map(RedisConn::Cluster),
        }
    }

    /// A multiplexed connection to share between concurrent calls (script
    /// calls pipeline on it and skip the pool's per-checkout health check).
    pub(crate) async fn shared(&self) -> Result<Multiplexed> {
        match self {
            RedisPool::Server(_) => match self.get().await? {
                RedisConn::Server(pooled) => Ok(Multiplexed::Server((*pooled).clone())),
                RedisConn::Cluster(c) => Ok(Multiplexed::Cluster(c)),
            },
            RedisPool::Cluster(cluster) => cluster.shared().await.map(Multiplexed::Cluster),
        }
    }

    /// A connection of its own for blocking reads (`BLPOP`, `XREAD BLOCK`),
    /// never shared with other calls (a blocked connection stalls every call
    /// multiplexed on it): made by the pool's manager outside the pool, or a
    /// cluster connection of its own whose replies may take up to `reply`.
    pub(crate) async fn dedicated(&self, reply: Duration) -> Result<Multiplexed> {
        match self {
            RedisPool::Server(pool) => {
                use deadpool::managed::Manager as _;
                Ok(Multiplexed::Server(pool.manager().create().await?))
            }
            RedisPool::Cluster(cluster) => cluster.dedicated(reply).await.map(Multiplexed::Cluster),
        }
    }
}

/// Where a keyless command (`SCAN`) runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target<'a> {
    /// On the master of the slot of this key (a queue's base: its keys' node).
    SlotOf(&'a str),
    /// On this master of the cluster (`None`: wherever the connection goes).
    Master(Option<&'a Master>),
}

impl RedisConn {
    /// Runs `cmd` on `target` (one server: on it) and converts the reply.
    pub(crate) async fn query_at<T: FromRedisValue>(
        &mut self,
        target: Target<'_>,
        cmd: &Cmd,
    ) -> redis::RedisResult<T> {
        let RedisConn::Cluster(c) = self else {
            return cmd.query_async(self).await;
        };
        let routing = match target {
            Target::SlotOf(key) => {
                SingleNodeRoutingInfo::SpecificNode(Route::with_key(key, SlotAddr::Master))
            }
            Target::Master(Some(m)) => SingleNodeRoutingInfo::ByAddress {
                host: m.host.clone(),
                port: m.port,
            },
            Target::Master(None) => SingleNodeRoutingInfo::RandomPrimary,
        };
        let reply = c
            .route_command(cmd.clone(), RoutingInfo::SingleNode(routing))
            .await?;
        parse(reply)
    }
}

/// Converts a reply.
fn parse<T: FromRedisValue>(value: Value) -> redis::RedisResult<T> {
    Ok(redis::from_redis_value(value)?)
}

/// Runs `fut`, failing with [`Error::Timeout`] after `timeout`.
async fn bounded<T>(
    timeout: Duration,
    fut: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(Error::Timeout(timeout)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_slots_are_the_ones_redis_computes() {
        // CRC16/XMODEM check value, and the examples of the cluster spec
        assert_eq!(key_slot(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"leasehold:{orders}:fence"), key_slot(b"orders"));
    }

    #[test]
    fn cluster_urls_give_one_seed_url_per_node() {
        let seeds = cluster_seed_urls("redis+cluster://app:s%40cret@10.0.0.1:7000,10.0.0.2:7001/")
            .unwrap()
            .unwrap();
        assert_eq!(
            seeds,
            [
                "redis://app:s%40cret@10.0.0.1:7000/",
                "redis://app:s%40cret@10.0.0.2:7001/"
            ]
        );
        let tls = cluster_seed_urls("rediss+cluster://h1:7000,h2:7000?protocol=resp3")
            .unwrap()
            .unwrap();
        assert_eq!(
            tls,
            [
                "rediss://h1:7000?protocol=resp3",
                "rediss://h2:7000?protocol=resp3"
            ]
        );
        assert!(cluster_seed_urls("redis://h1:6379").is_none());
        assert!(cluster_seed_urls("redis+cluster://").unwrap().is_err());
        assert!(is_cluster_url("REDIS+CLUSTER://h:1"));
        assert!(is_cluster_url("rediss+cluster://h:1"));
        assert!(!is_cluster_url("rediss://h:1"));
    }
}
