//! Leasing: take as many jobs as there are free slots, then block on Redis
//! until work arrives or a delayed job comes due.

use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::redis::{self, aio::MultiplexedConnection, AsyncConnectionConfig};
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use super::runner::Runner;
use super::{job, RedisSource, Shared};
use crate::error::{Error, Result};
use crate::metrics::{PipelineLabels, QueueLabels};
use crate::queue::Queue;

/// Pipelines of one queue leased with one TTL.
pub(crate) struct LeaseGroup {
    pub(crate) queue: Queue,
    pub(crate) ttl: Duration,
    pub(crate) runners: Vec<Arc<dyn Runner>>,
}

pub(crate) struct LeaseLoop {
    pub(crate) shared: Arc<Shared>,
    pub(crate) group: LeaseGroup,
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) jobs: TaskTracker,
    pub(crate) source: RedisSource,
    pub(crate) max_idle_wait: Duration,
    pub(crate) batch: usize,
}

impl LeaseLoop {
    pub(crate) async fn run(self) {
        let pipelines: Vec<&'static str> = self.group.runners.iter().map(|r| r.name()).collect();
        let stop = self.shared.stop_leasing.clone();
        let mut waiter = Waiter::new(&self.source, self.group.queue.keys().wake());
        let mut backoff = Duration::from_millis(100);
        loop {
            let first = tokio::select! {
                p = self.slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
                _ = stop.cancelled() => return,
            };
            let mut permits = vec![first];
            while permits.len() < self.batch {
                match self.slots.clone().try_acquire_owned() {
                    Ok(p) => permits.push(p),
                    Err(_) => break,
                }
            }
            let want = permits.len();
            let leased = tokio::select! {
                r = self.group.queue.lease(&self.shared.id, &pipelines, want, self.group.ttl) => r,
                _ = stop.cancelled() => return,
            };
            match leased {
                Ok(leased) => {
                    backoff = Duration::from_millis(100);
                    let got = leased.leases.len();
                    let metrics = &self.shared.metrics;
                    if leased.parked > 0 {
                        metrics
                            .lock_waits
                            .get_or_create(&QueueLabels { queue: self.group.queue.name().to_owned() })
                            .inc_by(leased.parked);
                    }
                    for lease in &leased.leases {
                        let labels = PipelineLabels {
                            queue: self.group.queue.name().to_owned(),
                            pipeline: lease.pipeline.clone(),
                        };
                        let waited = (leased.now - lease.not_before).max(0) as f64 / 1000.0;
                        metrics.queue_wait_seconds.get_or_create(&labels).observe(waited);
                        metrics.transition(&labels.queue, &labels.pipeline, "QUEUED", "LEASED");
                    }
                    for lease in leased.leases {
                        let Some(runner) = self.group.runners.iter().find(|r| r.name() == lease.pipeline).cloned() else {
                            warn!(job = %lease.job, pipeline = %lease.pipeline, "leased a pipeline this worker does not serve");
                            continue;
                        };
                        let permit = permits.pop();
                        let shared = self.shared.clone();
                        let queue = self.group.queue.clone();
                        self.jobs.spawn(async move {
                            job::run(shared, runner, queue, lease).await;
                            drop(permit);
                        });
                    }
                    drop(permits);
                    if got == 0 {
                        let wait = match leased.next_due {
                            Some(due) => due_in(due).min(self.max_idle_wait),
                            None => self.max_idle_wait,
                        };
                        tokio::select! {
                            _ = waiter.wait(wait) => {}
                            _ = stop.cancelled() => return,
                        }
                    }
                }
                Err(e) => {
                    drop(permits);
                    warn!(queue = %self.group.queue.name(), error = %e, retry_in = ?backoff, "lease failed");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.cancelled() => return,
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}

/// Time until `due` (ms since epoch, Redis clock), by this machine's clock.
fn due_in(due: i64) -> Duration {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    Duration::from_millis(u64::try_from(due - now).unwrap_or(0).max(5))
}

/// Blocks on the queue's wake list with a connection of its own.
struct Waiter {
    source: RedisSource,
    key: String,
    conn: Option<MultiplexedConnection>,
}

impl Waiter {
    fn new(source: &RedisSource, key: String) -> Self {
        Waiter {
            source: source.clone(),
            key,
            conn: None,
        }
    }

    /// A connection of its own: opened from the URL, or taken out of the pool for good.
    async fn connect(&self, wait: Duration) -> Result<MultiplexedConnection> {
        match &self.source {
            RedisSource::Url(url) => {
                let client = redis::Client::open(url.as_str())?;
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(Duration::from_secs(5)))
                    .set_response_timeout(Some(wait + Duration::from_secs(5)));
                Ok(client.get_multiplexed_async_connection_with_config(&config).await?)
            }
            RedisSource::Pool(pool) => {
                let conn = pool.get().await.map_err(|e| Error::Pool(e.to_string()))?;
                Ok(deadpool_redis::Connection::take(conn))
            }
        }
    }

    /// Waits up to `wait` for a wake-up token.
    async fn wait(&mut self, wait: Duration) {
        let max_block = Duration::from_secs(60);
        let wait = wait.min(max_block);
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
        let Some(conn) = self.conn.as_mut() else { return };
        let secs = wait.as_secs_f64().max(0.01);
        let reply: std::result::Result<Option<(String, String)>, Error> = redis::cmd("BLPOP")
            .arg(&self.key)
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
