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

/// The scheme of a cluster URL (plain TCP).
const CLUSTER_SCHEME: &str = "redis+cluster://";
/// The scheme of a cluster URL over TLS.
const CLUSTER_TLS_SCHEME: &str = "rediss+cluster://";

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

/// One master of a cluster, as `CLUSTER SLOTS` names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Master {
    /// Its host (as the cluster announces it).
    pub host: String,
    /// Its port.
    pub port: u16,
}

/// Whether `url` names a cluster (`redis+cluster://` or `rediss+cluster://`).
pub fn is_cluster_url(url: &str) -> bool {
    cluster_seed_urls(url).is_some()
}

/// The seed nodes of a cluster URL as one `redis://` (or `rediss://`) URL
/// each, carrying the URL's user, password, path and query; `None` when
/// `url` is not a cluster URL.
///
/// `redis+cluster://app:secret@10.0.0.1:7000,10.0.0.2:7000/?protocol=resp3`
/// gives `redis://app:secret@10.0.0.1:7000/?protocol=resp3` and
/// `redis://app:secret@10.0.0.2:7000/?protocol=resp3`.
pub fn cluster_seed_urls(url: &str) -> Option<Result<Vec<String>>> {
    let (scheme, rest) = if url
        .get(..CLUSTER_TLS_SCHEME.len())
        .is_some_and(|s| s.eq_ignore_ascii_case(CLUSTER_TLS_SCHEME))
    {
        ("rediss://", &url[CLUSTER_TLS_SCHEME.len()..])
    } else if url
        .get(..CLUSTER_SCHEME.len())
        .is_some_and(|s| s.eq_ignore_ascii_case(CLUSTER_SCHEME))
    {
        ("redis://", &url[CLUSTER_SCHEME.len()..])
    } else {
        return None;
    };
    // authority up to the first '/', '?' or '#'; the rest is kept for every seed
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => (&authority[..=at], &authority[at + 1..]),
        None => ("", authority),
    };
    let seeds: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| format!("{scheme}{userinfo}{h}{tail}"))
        .collect();
    if seeds.is_empty() {
        return Some(Err(Error::InvalidArgument(
            "a cluster URL names at least one seed node: redis+cluster://host:port[,host:port...]"
                .into(),
        )));
    }
    Some(Ok(seeds))
}

/// Builds the connections for `url`: a pool of `config.pool_size`
/// connections to one server, or a cluster client for a cluster URL, with
/// explicit connect and reply timeouts.
pub fn connect_pool(url: &str, config: &QueueConfig) -> Result<RedisPool> {
    // redis-rs gives each connection its own defaults (1 s to connect, 500 ms per
    // reply) unless told otherwise, which silently capped `response_timeout`: a
    // script slower than 500 ms failed even with a 10 s `response_timeout`. The
    // connection's reply timeout is a backstop just above the client's own timer,
    // so `Queue` calls report `Error::Timeout` and direct pool users stay bounded.
    let reply_backstop = config
        .response_timeout
        .saturating_add(Duration::from_secs(1));
    if let Some(seeds) = cluster_seed_urls(url) {
        let seeds = seeds?;
        let client = cluster_builder(&seeds, config.connect_timeout, reply_backstop)
            .build()
            .map_err(|e| Error::Pool(format!("cannot build a cluster client for {url}: {e}")))?;
        return Ok(RedisPool::Cluster(ClusterPool {
            client: Arc::new(client),
            shared: Arc::new(tokio::sync::Mutex::new(None)),
            connect_timeout: config.connect_timeout,
            response_timeout: reply_backstop,
        }));
    }
    let connection = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(config.connect_timeout))
        .set_response_timeout(Some(reply_backstop));
    let manager = deadpool_redis::Manager::new_with_config(url, connection)
        .map_err(|e| Error::Pool(format!("cannot build a pool for {url}: {e}")))?;
    Pool::builder(manager)
        .config(PoolConfig {
            max_size: config.pool_size.max(1),
            timeouts: Timeouts {
                wait: Some(config.connect_timeout),
                create: Some(config.connect_timeout),
                recycle: Some(config.connect_timeout),
            },
            ..PoolConfig::default()
        })
        .runtime(Runtime::Tokio1)
        .build()
        .map(RedisPool::Server)
        .map_err(|e| Error::Pool(format!("cannot build a pool for {url}: {e}")))
}

/// A cluster client builder over `seeds` with the crate's timeouts. Retries
/// (redirects, `TRYAGAIN` while a slot migrates, reconnects after a failover)
/// wait 10 ms to 500 ms each instead of redis-rs's 1.28 s minimum, so a call
/// that meets a short migration finishes well within the response timeout.
fn cluster_builder(
    seeds: &[String],
    connect_timeout: Duration,
    response_timeout: Duration,
) -> ClusterClientBuilder {
    ClusterClientBuilder::new(seeds.iter().map(String::as_str))
        .connection_timeout(connect_timeout)
        .response_timeout(response_timeout)
        .min_retry_wait(10)
        .max_retry_wait(500)
        .retry_wait_formula(10, 2)
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

    /// The masters of the cluster (`CLUSTER SLOTS`), sorted; empty for one server.
    pub async fn masters(&self) -> Result<Vec<Master>> {
        let mut masters: Vec<Master> = Vec::new();
        for (_, _, master) in self.slot_ranges().await? {
            if !masters.contains(&master) {
                masters.push(master);
            }
        }
        masters.sort();
        Ok(masters)
    }

    /// The replicas of `master` (`CLUSTER NODES`, as a reachable node sees
    /// them: `CLUSTER SLOTS` leaves out the replicas of a failed master).
    pub async fn replicas_of(&self, master: &Master) -> Result<Vec<Master>> {
        let text: String = self
            .ask_any_node(redis::cmd("CLUSTER").arg("NODES"))
            .await?;
        // <id> <ip:port@cport[,hostname]> <flags> <master id or -> ...
        let nodes: Vec<(&str, Option<Master>, &str)> = text
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                let id = words.next()?;
                let addr = words.next()?;
                let _flags = words.next()?;
                let of = words.next()?;
                let (host, rest) = addr.rsplit_once(':')?;
                let port = rest.split(['@', ',']).next()?.parse().ok()?;
                let node = Master {
                    host: host.to_owned(),
                    port,
                };
                Some((id, Some(node), of))
            })
            .collect();
        let Some(master_id) = nodes
            .iter()
            .find(|(_, node, _)| node.as_ref() == Some(master))
            .map(|(id, _, _)| *id)
        else {
            return Ok(Vec::new());
        };
        Ok(nodes
            .into_iter()
            .filter(|(_, _, of)| *of == master_id)
            .filter_map(|(_, node, _)| node)
            .collect())
    }

    /// Runs `cmd` on a random node of the cluster, asking another when the
    /// one asked does not answer (a master killed, its replica not promoted).
    async fn ask_any_node<T: FromRedisValue>(&self, cmd: &mut Cmd) -> Result<T> {
        let RedisPool::Cluster(cluster) = self else {
            return Err(Error::InvalidArgument("not a Redis Cluster".into()));
        };
        let mut conn = cluster.shared().await?;
        let mut tries = 0;
        loop {
            tries += 1;
            let reply = bounded(
                cluster.response_timeout,
                conn.route_command(
                    cmd.to_owned(),
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
                ),
            )
            .await;
            match reply {
                Err(e) if tries < 8 && !e.is_auth_failure() => continue,
                other => return Ok(parse(other?)?),
            }
        }
    }

    /// The master serving the slot of `key` (`CLUSTER SLOTS`, as a reachable
    /// node sees it); `None` for one server or a slot no master serves.
    pub async fn master_of(&self, key: &str) -> Result<Option<Master>> {
        let slot = key_slot(key.as_bytes());
        Ok(self
            .slot_ranges()
            .await?
            .into_iter()
            .find(|(from, to, _)| (*from..=*to).contains(&slot))
            .map(|(_, _, master)| master))
    }

    /// The slot ranges of the cluster and their masters (`CLUSTER SLOTS`);
    /// empty for one server.
    async fn slot_ranges(&self) -> Result<Vec<(u16, u16, Master)>> {
        Ok(self
            .slot_nodes()
            .await?
            .into_iter()
            .map(|(from, to, master, _)| (from, to, master))
            .collect())
    }

    /// The slot ranges of the cluster, their masters and replicas
    /// (`CLUSTER SLOTS`); empty for one server.
    async fn slot_nodes(&self) -> Result<Vec<(u16, u16, Master, Vec<Master>)>> {
        let RedisPool::Cluster(cluster) = self else {
            return Ok(Vec::new());
        };
        let mut conn = cluster.shared().await?;
        // asked of a random node: one that is down (a master killed, its
        // replica not promoted yet) fails the ask, another node answers
        let mut tries = 0;
        let reply = loop {
            tries += 1;
            let reply = bounded(
                cluster.response_timeout,
                conn.route_command(
                    redis::cmd("CLUSTER").arg("SLOTS").to_owned(),
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
                ),
            )
            .await;
            match reply {
                Err(e) if tries < 8 && !e.is_auth_failure() => continue,
                other => break other?,
            }
        };
        let ranges: Vec<Vec<Value>> = parse(reply)?;
        let mut out = Vec::new();
        for range in ranges {
            let (Some(from), Some(to), Some(node)) = (range.first(), range.get(1), range.get(2))
            else {
                continue;
            };
            let from: u16 = parse(from.clone())?;
            let to: u16 = parse(to.clone())?;
            let Some(master) = node_of(node)? else {
                continue;
            };
            let mut replicas = Vec::new();
            for replica in range.iter().skip(3) {
                replicas.extend(node_of(replica)?);
            }
            out.push((from, to, master, replicas));
        }
        Ok(out)
    }
}

/// The host and port of one node entry of a `CLUSTER SLOTS` range.
fn node_of(node: &Value) -> redis::RedisResult<Option<Master>> {
    let node: Vec<Value> = parse(node.clone())?;
    let (Some(host), Some(port)) = (node.first(), node.get(1)) else {
        return Ok(None);
    };
    Ok(Some(Master {
        host: parse(host.clone())?,
        port: parse(port.clone())?,
    }))
}

/// The Redis Cluster hash slot of `key`: CRC16 (XMODEM) of its hash tag (the
/// part between the first `{` and the next `}`, when not empty) or of the
/// whole key, modulo 16384, as Redis computes it.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|b| *b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|b| *b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    let mut crc: u16 = 0;
    for byte in tagged {
        crc ^= u16::from(*byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
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
