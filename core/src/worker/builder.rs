//! A worker's settings ([`WorkerBuilder`]) and `build`, which checks them,
//! connects, and turns them into a [`Worker`] with its lease groups.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, info};

use super::shared::RedisSource;
use super::{lease_loop, scheduler, startup, Worker};
use crate::config::QueueConfig;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::pipeline::runner::{PipelineRunner, Runner};
use crate::pipeline::Pipeline;
use crate::queue::{connect_pool, Queue};
#[cfg(feature = "metrics-server")]
use std::net::SocketAddr;

/// Settings of a worker; build one with [`Worker::builder`] or [`Worker::builder_with_pool`].
pub struct WorkerBuilder {
    source: RedisSource,
    config: QueueConfig,
    concurrency: usize,
    prefetch: Option<usize>,
    lease_ttl: Duration,
    renew_interval: Option<Duration>,
    sweep_interval: Duration,
    sweep_batch: usize,
    shutdown_grace: Duration,
    cancel_grace: Duration,
    max_idle_wait: Duration,
    startup_wait: Duration,
    runners: Vec<Arc<dyn Runner>>,
    metrics: Option<Arc<Metrics>>,
    #[cfg(feature = "metrics-server")]
    metrics_addr: Option<SocketAddr>,
    schedules: Vec<(&'static str, crate::schedule::Schedule)>,
    /// Notice hooks, by pipeline name.
    notify: Vec<(String, crate::notify::Notify)>,
}

impl std::fmt::Debug for WorkerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("concurrency", &self.concurrency)
            .field("prefetch", &self.prefetch)
            .field("lease_ttl", &self.lease_ttl)
            .field(
                "pipelines",
                &self.runners.iter().map(|r| r.name()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl WorkerBuilder {
    /// Settings with their defaults, connecting through `source`.
    pub(super) fn from_source(source: RedisSource) -> Self {
        Self {
            source,
            config: QueueConfig::default(),
            concurrency: 10,
            prefetch: None,
            lease_ttl: Duration::from_secs(30),
            renew_interval: None,
            sweep_interval: Duration::from_secs(5),
            sweep_batch: 500,
            shutdown_grace: Duration::from_secs(30),
            cancel_grace: Duration::from_secs(5),
            max_idle_wait: Duration::from_secs(5),
            startup_wait: super::startup::DEFAULT_STARTUP_WAIT,
            runners: Vec::new(),
            metrics: None,
            #[cfg(feature = "metrics-server")]
            metrics_addr: None,
            schedules: Vec::new(),
            notify: Vec::new(),
        }
    }

    /// How long `build` waits, on a Redis Cluster, for the master of a
    /// served queue's slot to answer (a failover in progress) before it
    /// fails with [`Error::StartupUnanswered`] (default 30 s).
    #[must_use]
    pub fn startup_wait(mut self, wait: Duration) -> Self {
        self.startup_wait = wait;
        self
    }

    /// Client settings (key prefix, retention, timeouts).
    #[must_use]
    pub fn config(mut self, config: QueueConfig) -> Self {
        self.config = config;
        self
    }
    /// Jobs run at once (default 10).
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }
    /// Jobs leased ahead of free run slots (default 0: none).
    ///
    /// By default a job is leased when a run slot frees (a running job sends its
    /// final operation), in the call that carries that operation, and starts in
    /// that same call: one round trip and one script call share per job, and
    /// nothing waits LEASED on this worker. A prefetched job instead waits LEASED
    /// here until a run slot frees, then starts with a call of its own; it is
    /// handed back on shutdown and requeued by the sweeper if the worker dies,
    /// but another replica with free slots cannot take it meanwhile. While a
    /// worker prefetches, no job starts in its lease call.
    #[must_use]
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = Some(n);
        self
    }
    /// Lease time-to-live for pipelines that do not set one (default 30 s).
    #[must_use]
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }
    /// How often all leases are renewed in one call (default: a third of the shortest lease TTL).
    #[must_use]
    pub fn renew_interval(mut self, every: Duration) -> Self {
        self.renew_interval = Some(every);
        self
    }
    /// How often this worker sweeps expired leases (default 5 s).
    #[must_use]
    pub fn sweep_interval(mut self, every: Duration) -> Self {
        self.sweep_interval = every;
        self
    }
    /// Most expired leases handled per sweep call (default 500).
    #[must_use]
    pub fn sweep_batch(mut self, n: usize) -> Self {
        self.sweep_batch = n.max(1);
        self
    }
    /// How long running jobs get, on shutdown, to reach a step boundary (default 30 s).
    #[must_use]
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }
    /// How long a step may run on after its cancellation token fired before it is dropped (default 5 s).
    #[must_use]
    pub fn cancel_grace(mut self, grace: Duration) -> Self {
        self.cancel_grace = grace;
        self
    }
    /// Longest an idle worker blocks before looking again (default 5 s; wake-ups normally come sooner).
    #[must_use]
    pub fn max_idle_wait(mut self, wait: Duration) -> Self {
        self.max_idle_wait = wait;
        self
    }
    /// Records metrics into `metrics` (shared with other workers or an HTTP server of yours).
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }
    /// Serves Prometheus metrics at `http://addr/metrics` while the worker runs
    /// (opt-in; feature `metrics-server`).
    #[cfg(feature = "metrics-server")]
    #[must_use]
    pub fn metrics_addr(mut self, addr: SocketAddr) -> Self {
        self.metrics_addr = Some(addr);
        self
    }
    /// Serves pipeline `P`.
    #[must_use]
    pub fn pipeline<P: Pipeline>(mut self, pipeline: P) -> Self {
        self.runners
            .push(Arc::new(PipelineRunner(Arc::new(pipeline))));
        self
    }
    /// Adds `schedule` to pipeline `P` (served by this worker), beside those
    /// its `#[pipeline(schedule(...))]` declares. Its input type must carry
    /// the window as a `window: leasehold::Window` field.
    #[must_use]
    pub fn schedule<P: Pipeline>(mut self, schedule: crate::schedule::Schedule) -> Self {
        self.schedules.push((P::NAME, schedule));
        self
    }
    /// Serves a pipeline of process steps declared at run time (a pipelines
    /// file): checked here, so a worker never starts with half of it.
    #[cfg(unix)]
    pub fn declared(mut self, pipeline: crate::process::DeclaredPipeline) -> Result<Self> {
        if let Some(hook) = pipeline.notify_hook() {
            self.notify.push((pipeline.name().to_owned(), hook.clone()));
        }
        self.runners.push(pipeline.into_runner()?);
        Ok(self)
    }
    /// Runs `hook` when a job of pipeline `pipeline` ends FAILED, goes STALE,
    /// or one of its schedules starts failing (see [`crate::notify`]); once
    /// per event across the replicas that name it.
    #[must_use]
    pub fn notify(mut self, pipeline: &str, hook: crate::notify::Notify) -> Self {
        self.notify.retain(|(p, _)| p != pipeline);
        self.notify.push((pipeline.to_owned(), hook));
        self
    }
    /// Serves pipeline `P`, shared with other code.
    #[must_use]
    pub fn pipeline_arc<P: Pipeline>(mut self, pipeline: Arc<P>) -> Self {
        self.runners.push(Arc::new(PipelineRunner(pipeline)));
        self
    }

    /// Connects and returns the worker, ready to run.
    pub async fn build(self) -> Result<Worker> {
        if self.runners.is_empty() {
            return Err(Error::InvalidArgument(
                "a worker needs at least one pipeline".into(),
            ));
        }
        let mut names: Vec<&str> = self.runners.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::InvalidArgument(format!(
                "pipeline {} is served twice",
                w[0]
            )));
        }
        let pool = match &self.source {
            RedisSource::Url(url) => connect_pool(url, &self.config)?,
            RedisSource::Pool(pool) => pool.clone(),
        };
        let probe = Queue::with_pool(pool.clone(), "probe", self.config.clone())?;
        let began = Instant::now();
        let deadline = began + self.startup_wait;
        loop {
            match probe.ping().await {
                Ok(()) => break,
                Err(e) if startup::worth_waiting(&probe, &e) => {
                    if !startup::pause_before_retry(deadline).await {
                        return Err(startup::gave_up(&probe, &[], began.elapsed(), e).await);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        // lease groups: one per (queue, lease ttl)
        let mut groups: BTreeMap<(String, Duration), Vec<Arc<dyn Runner>>> = BTreeMap::new();
        for runner in &self.runners {
            let options = runner.options();
            let queue = options.queue.unwrap_or(runner.name()).to_owned();
            let ttl = options.lease_ttl.unwrap_or(self.lease_ttl);
            groups.entry((queue, ttl)).or_default().push(runner.clone());
        }
        // every schedule, checked before anything is written
        let mut declared: Vec<(Arc<dyn Runner>, crate::schedule::Schedule)> = Vec::new();
        for runner in &self.runners {
            for schedule in runner.schedules()? {
                declared.push((runner.clone(), schedule));
            }
        }
        for (pipeline, schedule) in &self.schedules {
            let Some(runner) = self.runners.iter().find(|r| r.name() == *pipeline) else {
                return Err(Error::InvalidArgument(format!(
                    "schedule {} is for pipeline {pipeline}, which this worker does not serve",
                    schedule.name()
                )));
            };
            declared.push((runner.clone(), schedule.clone()));
        }
        let mut seen: Vec<(String, String)> = Vec::new();
        for (runner, schedule) in &declared {
            schedule.check()?;
            let queue = runner.options().queue.unwrap_or(runner.name()).to_owned();
            let key = (queue, schedule.name().to_owned());
            if seen.contains(&key) {
                return Err(Error::InvalidArgument(format!(
                    "schedule {} is declared twice in queue {}",
                    key.1, key.0
                )));
            }
            seen.push(key);
        }
        for (pipeline, _) in &self.notify {
            if !self.runners.iter().any(|r| r.name() == pipeline) {
                return Err(Error::InvalidArgument(format!(
                    "a notice hook is for pipeline {pipeline}, which this worker does not serve"
                )));
            }
        }
        // a hook given to the builder, else the pipeline's own (`#[pipeline(notify(...))]`)
        let hook_of = |pipeline: &str| {
            self.notify
                .iter()
                .find(|(p, _)| p == pipeline)
                .map(|(_, h)| h.clone())
                .or_else(|| {
                    self.runners
                        .iter()
                        .find(|r| r.name() == pipeline)
                        .and_then(|r| r.notify())
                })
                .map(Arc::new)
        };
        let id = instance_id();
        let mut lease_groups = Vec::new();
        let mut scheduled = Vec::new();
        let mut notifiers: Vec<super::notifier::QueueNotifier> = Vec::new();
        for ((queue, ttl), runners) in groups {
            let queue = probe.sibling(&queue)?;
            // a failover in progress: wait for the slot's master, within the bound
            let found = loop {
                match start_queue(&queue, &runners, &declared, &id, &hook_of).await {
                    Ok(found) => break found,
                    Err(e) if startup::worth_waiting(&queue, &e) => {
                        if !startup::pause_before_retry(deadline).await {
                            let names: Vec<&str> = runners.iter().map(|r| r.name()).collect();
                            return Err(startup::gave_up(&queue, &names, began.elapsed(), e).await);
                        }
                        debug!(queue = %queue.name(), error = %e, "the queue's master does not answer yet; waiting");
                    }
                    Err(e) => return Err(e),
                }
            };
            scheduled.extend(found);
            let hooks: BTreeMap<String, Arc<crate::notify::Notify>> = runners
                .iter()
                .filter_map(|r| hook_of(r.name()).map(|h| (r.name().to_owned(), h)))
                .collect();
            if !hooks.is_empty() {
                match notifiers
                    .iter_mut()
                    .find(|n| n.queue.name() == queue.name())
                {
                    Some(n) => n.hooks.extend(hooks),
                    None => notifiers.push(super::notifier::QueueNotifier {
                        queue: queue.clone(),
                        hooks,
                    }),
                }
            }
            lease_groups.push(lease_loop::LeaseGroup {
                queue,
                ttl,
                runners,
            });
        }
        let min_ttl = lease_groups
            .iter()
            .map(|g| g.ttl)
            .min()
            .unwrap_or(self.lease_ttl);
        let renew_interval = self
            .renew_interval
            .unwrap_or(min_ttl / 3)
            .max(Duration::from_millis(10));
        Ok(Worker {
            id,
            scheduled,
            notifiers,
            source: self.source,
            concurrency: self.concurrency,
            prefetch: self.prefetch,
            renew_interval,
            sweep_interval: self.sweep_interval,
            sweep_batch: self.sweep_batch,
            shutdown_grace: self.shutdown_grace,
            cancel_grace: self.cancel_grace,
            max_idle_wait: self.max_idle_wait,
            groups: lease_groups,
            metrics: self.metrics.unwrap_or_default(),
            #[cfg(feature = "metrics-server")]
            metrics_addr: self.metrics_addr,
        })
    }
}

/// Loads the scripts on `queue`'s master and registers its `runners` and
/// their schedules (of `declared`) for worker `id`: what a worker writes
/// before it starts, safe to run again after a failure.
async fn start_queue(
    queue: &Queue,
    runners: &[Arc<dyn Runner>],
    declared: &[(Arc<dyn Runner>, crate::schedule::Schedule)],
    id: &str,
    hook_of: &(dyn Fn(&str) -> Option<Arc<crate::notify::Notify>> + Sync),
) -> Result<Vec<scheduler::Scheduled>> {
    let mut scheduled = Vec::new();
    queue.load_scripts().await?;
    for runner in runners {
        let spec = runner.spec();
        queue.register_pipeline(&spec).await?;
        let mine: Vec<&crate::schedule::Schedule> = declared
            .iter()
            .filter(|(r, _)| r.name() == runner.name())
            .map(|(_, s)| s)
            .collect();
        if mine.is_empty() {
            continue;
        }
        let contract = Arc::new(crate::contract::Contract::new(spec)?);
        for schedule in mine {
            let registered = queue.register_schedule(runner.name(), schedule, id).await?;
            info!(schedule = schedule.name(), pipeline = runner.name(), outcome = %registered.outcome,
                cursor = %crate::record::utc(registered.cursor), "schedule registered");
            scheduled.push(scheduler::Scheduled {
                queue: queue.clone(),
                contract: contract.clone(),
                schedule: schedule.clone(),
                cursor: registered.cursor,
                now: registered.now,
                notify: hook_of(runner.name()),
            });
        }
    }
    Ok(scheduled)
}

/// A unique id for this worker instance: host, process id and a random suffix.
fn instance_id() -> String {
    let host = gethostname::gethostname()
        .to_string_lossy()
        .trim()
        .to_owned();
    let host = if host.is_empty() {
        "host".to_owned()
    } else {
        host
    };
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}-{}", std::process::id(), &suffix[..8])
}
