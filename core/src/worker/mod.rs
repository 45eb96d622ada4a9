//! The worker runtime: leases jobs of the pipelines it serves, runs them with
//! heartbeats, cancellation and retries, sweeps expired leases, and shuts down
//! gracefully.
//!
//! This file holds the public face ([`Worker`] and its shutdown sequence);
//! the parts live in their own files:
//! - `builder.rs`: [`WorkerBuilder`], the worker's settings, and `build`,
//!   which checks them and connects; `startup.rs`: its bounded wait for a
//!   cluster in the middle of a failover;
//! - `lease_loop.rs`: one lease loop per lease group, leasing and settling in
//!   batched `settle` calls; `settler.rs` is how job tasks reach it, and
//!   `waiter.rs` its blocking wait when idle;
//! - `attempt/`: one attempt at a leased job, step by step, and how it ends;
//!   `holder_call.rs` sends its holder operations; `step.rs` runs
//!   one step;
//! - `heartbeat.rs`: lease renewal and the worker's registration;
//!   `watchdog.rs`: stops a job whose lease passed its local deadline without
//!   a confirmed renewal (cut off from Redis), whatever calls are in flight;
//! - `sweeper.rs`: recovery of expired leases; `cleanup_claims.rs`: cleanup
//!   hooks of resolved STALE jobs;
//! - `masters.rs`: the renewals and sweeps of each master's queues, run
//!   concurrently so one master down never delays another's;
//! - `scheduler.rs`: the schedules' ticks (a task only when a served
//!   pipeline has a schedule);
//! - `notifier.rs`: the failure notices read from the events stream;
//!   `notice.rs`: delivering one (the command, the webhook);
//! - `active.rs`: the jobs held right now; `shared.rs`: state all parts share.
//!
//! The pipelines it serves reach it as `crate::pipeline::runner::Runner`s.

mod active;
mod attempt;
mod builder;
mod cancel_listener;
mod cleanup_claims;
mod heartbeat;
mod holder_call;
mod lease_loop;
mod masters;
mod notice;
mod notifier;
mod scheduler;
mod settler;
mod shared;
mod startup;
mod step;
mod sweeper;
mod waiter;
mod watchdog;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use self::active::ActiveJobs;
pub use self::builder::WorkerBuilder;
use self::shared::{RedisSource, Shared};
pub use self::sweeper::sweep_queues;
use crate::error::Result;
use crate::metrics::Metrics;
use crate::pipeline::runner::Runner;
pub(crate) use crate::pipeline::StopWhy;
use crate::pipeline::{queue_of, Pipeline};
use crate::queue::Queue;
#[cfg(feature = "metrics-server")]
use std::net::SocketAddr;

/// A worker replica. Run it with [`Worker::run_until`] or [`Worker::run_until_signal`].
pub struct Worker {
    id: String,
    scheduled: Vec<scheduler::Scheduled>,
    notifiers: Vec<notifier::QueueNotifier>,
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
        WorkerBuilder::from_source(RedisSource::Url(url.into()))
    }

    /// A worker using a connection pool of yours. Each lease loop takes one
    /// connection out of it for good, to block on while idle: the pool's
    /// response timeout must exceed [`WorkerBuilder::max_idle_wait`].
    pub fn builder_with_pool(pool: impl Into<crate::pool::RedisPool>) -> WorkerBuilder {
        WorkerBuilder::from_source(RedisSource::Pool(pool.into()))
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
            failing_masters: Default::default(),
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
        // the process steps' work directories that dead workers left behind
        #[cfg(unix)]
        tokio::task::spawn_blocking(|| {
            crate::process::remove_orphaned_work_dirs(&std::env::temp_dir())
        });
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
            .map_err(|e| {
                crate::error::Error::InvalidArgument(format!("cannot serve metrics on {addr}: {e}"))
            })?;
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
                failing: Default::default(),
            };
            loops.spawn(ctx.run());
        }
        let sweeper = sweeper::Sweeper {
            shared: shared.clone(),
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

        // cancel requests pushed as they are recorded (the renewal is the fallback)
        let cancel_listener = tokio::spawn(cancel_listener::run(cancel_listener::CancelListener {
            shared: shared.clone(),
            queues: queues.clone(),
            source: self.source.clone(),
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

        // notifiers run only for queues whose pipelines name a notice hook;
        // they end with the other background tasks
        for n in self.notifiers {
            tokio::spawn(notifier::run(n, shared.id.clone(), stop_background.clone()));
        }

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
        if let Err(e) = cancel_listener.await {
            warn!(error = %e, "cancel listener ended abnormally");
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
