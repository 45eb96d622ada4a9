//! Which Redis a URL names: one server, or a cluster by its seed nodes
//! (`redis+cluster://`, `rediss+cluster://`), and the pool made for it.

use super::*;

/// The scheme of a cluster URL (plain TCP).
const CLUSTER_SCHEME: &str = "redis+cluster://";
/// The scheme of a cluster URL over TLS.
const CLUSTER_TLS_SCHEME: &str = "rediss+cluster://";

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
            url: Arc::from(url),
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
