//! The worker runtime: leases jobs of the pipelines it serves, runs them with
//! heartbeats, cancellation and retries, sweeps expired leases, and shuts down
//! gracefully.
//!
//! This file holds the public face ([`WorkerBuilder`], [`Worker`] and its
//! shutdown sequence); the parts live in their own files:
//! - `lease_loop.rs`: one lease loop per lease group, leasing and settling in
//!   batched `settle` calls; `settler.rs` is how job tasks reach it, and
//!   `waiter.rs` its blocking wait when idle;
//! - `attempt.rs`: one attempt at a leased job, step by step; `step.rs` runs
//!   one step;
//! - `heartbeat.rs`: lease renewal and the worker's registration;
//!   `watchdog.rs`: stops a job whose lease passed its local deadline without
//!   a confirmed renewal (cut off from Redis), whatever calls are in flight;
//! - `sweeper.rs`: recovery of expired leases; `cleanup_claims.rs`: cleanup
//!   hooks of resolved STALE jobs;
//! - `scheduler.rs`: the schedules' ticks (a task only when a served
//!   pipeline has a schedule);
//! - `active.rs`: the jobs held right now; `shared.rs`: state all parts share;
//!   `runner.rs`: a pipeline with its input type erased.

mod active;
mod attempt;
mod cleanup_claims;
mod heartbeat;
mod lease_loop;
pub(crate) mod runner;
mod scheduler;
mod settler;
mod shared;
mod step;
mod sweeper;
mod waiter;
mod watchdog;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use self::active::ActiveJobs;
use self::runner::{PipelineRunner, Runner};
use self::shared::{RedisSource, Shared};
pub use self::sweeper::sweep_queues;
use crate::config::QueueConfig;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
pub(crate) use crate::pipeline::StopWhy;
use crate::pipeline::{queue_of, Pipeline};
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
    runners: Vec<Arc<dyn Runner>>,
    metrics: Option<Arc<Metrics>>,
    #[cfg(feature = "metrics-server")]
    metrics_addr: Option<SocketAddr>,
    schedules: Vec<(&'static str, crate::schedule::Schedule)>,
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
        self.runners.push(pipeline.into_runner()?);
        Ok(self)
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
        probe.ping().await?;
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
        let id = instance_id();
        let mut lease_groups = Vec::new();
        let mut scheduled = Vec::new();
        for ((queue, ttl), runners) in groups {
            let queue = probe.sibling(&queue)?;
            queue.load_scripts().await?;
            for runner in &runners {
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
                    let registered = queue
                        .register_schedule(runner.name(), schedule, &id)
                        .await?;
                    info!(schedule = schedule.name(), pipeline = runner.name(), outcome = %registered.outcome,
                        cursor = %crate::record::utc(registered.cursor), "schedule registered");
                    scheduled.push(scheduler::Scheduled {
                        queue: queue.clone(),
                        contract: contract.clone(),
                        schedule: schedule.clone(),
                        cursor: registered.cursor,
                        now: registered.now,
                    });
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

/// A worker replica. Run it with [`Worker::run_until`] or [`Worker::run_until_signal`].
pub struct Worker {
    id: String,
    scheduled: Vec<scheduler::Scheduled>,
    source: RedisSource,
    concurrency: usize,
    prefetch: Option<usize>,
    renew_interval: Duration,
    sweep_interval: Duration,
    sweep_batch: usize,
    shutdown_grace: Duration,
    cancel_grace: Duration,
    max_idle_wait: Duration,
    groups: Vec<lease_loop::LeaseGroup>,
    metrics: Arc<Metrics>,
    #[cfg(feature = "metrics-server")]
    metrics_addr: Option<SocketAddr>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker connecting to `url`.
    pub fn builder(url: impl Into<String>) -> WorkerBuilder {
        Self::builder_from(RedisSource::Url(url.into()))
    }

    /// A worker using a connection pool of yours. Each lease loop takes one
    /// connection out of it for good, to block on while idle: the pool's
    /// response timeout must exceed [`WorkerBuilder::max_idle_wait`].
    pub fn builder_with_pool(pool: impl Into<crate::pool::RedisPool>) -> WorkerBuilder {
        Self::builder_from(RedisSource::Pool(pool.into()))
    }

    fn builder_from(source: RedisSource) -> WorkerBuilder {
        WorkerBuilder {
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
            runners: Vec::new(),
            metrics: None,
            #[cfg(feature = "metrics-server")]
            metrics_addr: None,
            schedules: Vec::new(),
        }
    }

    /// The worker's metrics.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// This instance's unique id (host, pid, random suffix).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The queue clients this worker leases from.
    pub fn queues(&self) -> Vec<Queue> {
        let mut out: Vec<Queue> = Vec::new();
        for g in &self.groups {
            if !out.iter().any(|q| q.name() == g.queue.name()) {
                out.push(g.queue.clone());
            }
        }
        out
    }

    /// Runs until SIGINT or SIGTERM, then shuts down gracefully.
    pub async fn run_until_signal(self) -> Result<()> {
        self.run_until(shutdown_signal()).await
    }

    /// Runs until `shutdown` completes, then shuts down gracefully: stops leasing,
    /// hands unstarted jobs back, lets running jobs reach a step boundary within
    /// the shutdown grace, then interrupts the rest.
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> Result<()> {
        let shared = Arc::new(Shared {
            id: self.id.clone(),
            active: ActiveJobs::default(),
            stop_leasing: CancellationToken::new(),
            stop_at_boundary: CancellationToken::new(),
            cancel_grace: self.cancel_grace,
            metrics: self.metrics.clone(),
            run_slots: Arc::new(Semaphore::new(self.concurrency)),
        });
        let queues = self.queues();
        let runners: Vec<(String, Arc<dyn Runner>)> = self
            .groups
            .iter()
            .flat_map(|g| {
                g.runners
                    .iter()
                    .map(|r| (g.queue.name().to_owned(), r.clone()))
            })
            .collect();
        let pipelines: Vec<&'static str> = self
            .groups
            .iter()
            .flat_map(|g| g.runners.iter().map(|r| r.name()))
            .collect();
        info!(worker = %self.id, ?pipelines, concurrency = self.concurrency, "worker starting");
        // lease slots: one per job that may run, plus the prefetched ones
        let slots = Arc::new(Semaphore::new(self.concurrency));
        let extra = self.prefetch.unwrap_or(0);
        let prefetch_slots = Arc::new(Semaphore::new(extra));
        let jobs = TaskTracker::new();
        let stop_background = CancellationToken::new();
        #[cfg(feature = "metrics-server")]
        if let Some(addr) = self.metrics_addr {
            let stop = stop_background.clone();
            crate::metrics::serve(
                addr,
                self.metrics.clone(),
                async move { stop.cancelled().await },
            )
            .await
            .map_err(|e| Error::InvalidArgument(format!("cannot serve metrics on {addr}: {e}")))?;
        }
        let mut loops = JoinSet::new();
        for group in self.groups {
            let ctx = lease_loop::LeaseLoop {
                shared: shared.clone(),
                group,
                slots: slots.clone(),
                prefetch_slots: prefetch_slots.clone(),
                prefetch: extra,
                jobs: jobs.clone(),
                source: self.source.clone(),
                max_idle_wait: self.max_idle_wait,
                batch: self.concurrency + extra,
            };
            loops.spawn(ctx.run());
        }
        let sweeper = sweeper::Sweeper {
            shared: shared.clone(),
            queues: queues.clone(),
            every: self.sweep_interval,
            batch: self.sweep_batch,
            cleanups: cleanup_claims::CleanupClaimer {
                runners: runners.clone(),
                tasks: jobs.clone(),
            },
        };
        let watchdog = tokio::spawn(watchdog::run(shared.clone(), stop_background.clone()));
        // the spec version of each served pipeline, for the registration
        let versions: std::collections::BTreeMap<String, String> = runners
            .iter()
            .map(|(_, r)| (r.name().to_owned(), r.spec().version))
            .collect();
        let heartbeat = tokio::spawn(heartbeat::run(heartbeat::Heartbeat {
            shared: shared.clone(),
            queues: queues.clone(),
            every: self.renew_interval,
            pipelines: pipelines.iter().map(|p| p.to_string()).collect(),
            versions,
            concurrency: self.concurrency,
            sweeper,
            stop: stop_background.clone(),
        }));

        // the scheduler runs only for a worker serving a scheduled pipeline
        let scheduler = (!self.scheduled.is_empty()).then(|| {
            tokio::spawn(scheduler::run(
                self.scheduled,
                shared.id.clone(),
                self.metrics.clone(),
                shared.stop_leasing.clone(),
            ))
        });

        shutdown.await;
        info!(worker = %shared.id, active = shared.active.len(), "shutting down: no more leases");
        shared.stop_leasing.cancel();
        shared.stop_at_boundary.cancel();
        // the lease loops keep settling for running jobs until every job task ended
        jobs.close();
        let drained = tokio::time::timeout(self.shutdown_grace, jobs.wait())
            .await
            .is_ok();
        if !drained {
            warn!(
                active = shared.active.len(),
                "shutdown grace over: interrupting running steps"
            );
            for job in shared.active.snapshot() {
                job.stop(StopWhy::Shutdown);
            }
            let bound = self.cancel_grace + Duration::from_secs(30);
            if tokio::time::timeout(bound, jobs.wait()).await.is_err() {
                warn!(
                    active = shared.active.len(),
                    "some jobs did not end after being interrupted; leaving them to the sweeper"
                );
            }
        }
        let joined = tokio::time::timeout(Duration::from_secs(10), async {
            while loops.join_next().await.is_some() {}
        })
        .await;
        if joined.is_err() {
            loops.abort_all();
        }
        stop_background.cancel();
        if let Err(e) = heartbeat.await {
            warn!(error = %e, "heartbeat task ended abnormally");
        }
        if let Some(scheduler) = scheduler {
            if let Err(e) = scheduler.await {
                warn!(error = %e, "scheduler task ended abnormally");
            }
        }
        if let Err(e) = watchdog.await {
            warn!(error = %e, "lease deadline watchdog ended abnormally");
        }
        info!(worker = %shared.id, "worker stopped");
        Ok(())
    }
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            warn!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => info!("SIGINT received"),
        _ = term => info!("SIGTERM received"),
    }
}

/// The queue a pipeline's jobs go to, as a client sharing `queue`'s pool.
pub fn queue_for<P: Pipeline>(queue: &Queue) -> Result<Queue> {
    queue.sibling(queue_of::<P>())
}
