//! Prometheus metrics of a worker (and of the dashboard, which adds the
//! per-state job counts it reads from Redis).

#[cfg(feature = "metrics-server")]
use std::net::SocketAddr;
#[cfg(feature = "metrics-server")]
use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
#[cfg(feature = "metrics-server")]
use tracing::info;
use tracing::warn;

/// Labels: queue.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// The queue.
    pub queue: String,
}

/// Labels: queue and pipeline.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PipelineLabels {
    /// The queue.
    pub queue: String,
    /// The pipeline.
    pub pipeline: String,
}

/// Labels of a transition.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabels {
    /// The queue.
    pub queue: String,
    /// The pipeline.
    pub pipeline: String,
    /// State before.
    pub from: String,
    /// State after.
    pub to: String,
}

/// Labels of a flow-control wait.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WaitLabels {
    /// The queue.
    pub queue: String,
    /// `resource_limit`, `max_running`, `rate` or `paused`.
    pub cause: String,
}

/// Labels of a step run.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StepLabels {
    /// The pipeline.
    pub pipeline: String,
    /// The step.
    pub step: String,
    /// `ok`, `failed` or `stopped`.
    pub outcome: String,
}

/// Labels of a sweeper recovery.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RecoveryLabels {
    /// The queue.
    pub queue: String,
    /// `QUEUED`, `CANCELLED` or `STALE`.
    pub to: String,
}

/// Labels of a job count by state.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    /// The queue.
    pub queue: String,
    /// The state.
    pub state: String,
}

/// Labels of a schedule's tick.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TickLabels {
    /// The queue.
    pub queue: String,
    /// The schedule.
    pub schedule: String,
    /// `enqueued`, `caught_up`, `skipped`, `missed` or `delayed`.
    pub outcome: String,
}

/// Labels: queue and schedule.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScheduleLabels {
    /// The queue.
    pub queue: String,
    /// The schedule.
    pub schedule: String,
}

/// Labels of a running process step's progress.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProgressLabels {
    /// The queue.
    pub queue: String,
    /// The pipeline.
    pub pipeline: String,
    /// The step.
    pub step: String,
    /// The job.
    pub job: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn seconds_histogram() -> Histogram {
    // 1 ms to ~9 h
    Histogram::new(exponential_buckets(0.001, 2.0, 25))
}

/// Every metric leasehold exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Transitions this process performed.
    pub transitions: Family<TransitionLabels, Counter>,
    /// Step run times.
    pub step_seconds: HistogramFamily<StepLabels>,
    /// Time from a job being due to being leased.
    pub queue_wait_seconds: HistogramFamily<PipelineLabels>,
    /// Leases renewed.
    pub lease_renewals: Family<QueueLabels, Counter>,
    /// Leases found lost (swept, re-leased, or cut off from Redis).
    pub leases_lost: Family<QueueLabels, Counter>,
    /// Attempts given up before a step began, their lease past its local
    /// deadline (a worker that woke from a freeze, or was starved of CPU).
    pub steps_abandoned: Family<PipelineLabels, Counter>,
    /// Expired leases the sweeper recovered, by outcome.
    pub sweeper_recoveries: Family<RecoveryLabels, Counter>,
    /// Jobs parked because their resource was locked.
    pub lock_waits: Family<QueueLabels, Counter>,
    /// Jobs set aside by flow control, by cause (`resource_limit`,
    /// `max_running`, `rate`), and lease calls that met a paused pipeline (`paused`).
    pub flow_waits: Family<WaitLabels, Counter>,
    /// Jobs this process is running.
    pub jobs_active: Family<PipelineLabels, Gauge>,
    /// Jobs by state, as read from Redis (dashboard).
    pub jobs_by_state: Family<StateLabels, Gauge>,
    /// Schedule windows this process claimed, by outcome.
    pub schedule_ticks: Family<TickLabels, Counter>,
    /// Time from a window's due time to its enqueue, on Redis's clock.
    pub schedule_lag_seconds: HistogramFamily<ScheduleLabels>,
    /// Schedule ticks this process tried that failed (a refused input, a
    /// template that cannot render, Redis out of reach).
    pub schedule_tick_failures: Family<ScheduleLabels, Counter>,
    /// The progress (0 to 100) running process steps reported with
    /// `::progress N`, per job; a step's series goes when the step ends.
    pub step_progress: Family<ProgressLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric, prefixed `leasehold_`.
    pub fn new() -> Self {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("leasehold");
        let transitions = Family::<TransitionLabels, Counter>::default();
        registry.register(
            "transitions",
            "Job state transitions performed by this process",
            transitions.clone(),
        );
        let step_seconds: HistogramFamily<StepLabels> =
            Family::new_with_constructor(seconds_histogram);
        registry.register(
            "step_duration_seconds",
            "Run time of a step",
            step_seconds.clone(),
        );
        let queue_wait_seconds: HistogramFamily<PipelineLabels> =
            Family::new_with_constructor(seconds_histogram);
        registry.register(
            "queue_wait_seconds",
            "Time from a job being due to being leased",
            queue_wait_seconds.clone(),
        );
        let lease_renewals = Family::<QueueLabels, Counter>::default();
        registry.register("lease_renewals", "Leases renewed", lease_renewals.clone());
        let leases_lost = Family::<QueueLabels, Counter>::default();
        registry.register(
            "leases_lost",
            "Leases found lost: swept, re-leased, or cut off from Redis",
            leases_lost.clone(),
        );
        let steps_abandoned = Family::<PipelineLabels, Counter>::default();
        registry.register(
            "steps_abandoned",
            "Attempts given up before a step began, their lease past its local deadline",
            steps_abandoned.clone(),
        );
        let sweeper_recoveries = Family::<RecoveryLabels, Counter>::default();
        registry.register(
            "sweeper_recoveries",
            "Expired leases recovered by the sweeper",
            sweeper_recoveries.clone(),
        );
        let lock_waits = Family::<QueueLabels, Counter>::default();
        registry.register(
            "lock_waits",
            "Jobs parked because their resource was locked",
            lock_waits.clone(),
        );
        let flow_waits = Family::<WaitLabels, Counter>::default();
        registry.register(
            "flow_waits",
            "Jobs set aside by flow control by cause (resource_limit, max_running, rate), and lease calls that met a paused pipeline (paused)",
            flow_waits.clone(),
        );
        let jobs_active = Family::<PipelineLabels, Gauge>::default();
        registry.register(
            "jobs_active",
            "Jobs this process is running",
            jobs_active.clone(),
        );
        let jobs_by_state = Family::<StateLabels, Gauge>::default();
        registry.register(
            "jobs",
            "Jobs by state, read from Redis",
            jobs_by_state.clone(),
        );
        let schedule_ticks = Family::<TickLabels, Counter>::default();
        registry.register(
            "schedule_ticks",
            "Schedule windows this process claimed, by outcome",
            schedule_ticks.clone(),
        );
        let schedule_lag_seconds: HistogramFamily<ScheduleLabels> =
            Family::new_with_constructor(seconds_histogram);
        registry.register(
            "schedule_lag_seconds",
            "Time from a schedule window's due time to its enqueue (Redis clock)",
            schedule_lag_seconds.clone(),
        );
        let schedule_tick_failures = Family::<ScheduleLabels, Counter>::default();
        registry.register(
            "schedule_tick_failures",
            "Schedule ticks this process tried that failed",
            schedule_tick_failures.clone(),
        );
        let step_progress =
            Family::<ProgressLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "step_progress_percent",
            "Progress (0 to 100) a running process step reported with ::progress N, per job; removed when the step ends",
            step_progress.clone(),
        );
        Metrics {
            registry: root,
            step_progress,
            schedule_ticks,
            schedule_lag_seconds,
            schedule_tick_failures,
            transitions,
            step_seconds,
            queue_wait_seconds,
            lease_renewals,
            leases_lost,
            steps_abandoned,
            sweeper_recoveries,
            lock_waits,
            flow_waits,
            jobs_active,
            jobs_by_state,
        }
    }

    /// Counts a transition.
    pub fn transition(&self, queue: &str, pipeline: &str, from: &str, to: &str) {
        self.transitions
            .get_or_create(&TransitionLabels {
                queue: queue.to_owned(),
                pipeline: pipeline.to_owned(),
                from: from.to_owned(),
                to: to.to_owned(),
            })
            .inc();
    }

    /// The metrics in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            warn!(error = %e, "cannot encode metrics");
        }
        out
    }
}

/// The content type of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// An axum router serving `GET /metrics` (feature `metrics-server`).
#[cfg(feature = "metrics-server")]
pub fn router(metrics: Arc<Metrics>) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let metrics = metrics.clone();
            async move {
                (
                    [(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)],
                    metrics.encode(),
                )
            }
        }),
    )
}

/// Serves `GET /metrics` on `addr` until `stop` completes (feature
/// `metrics-server`).
#[cfg(feature = "metrics-server")]
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    info!(%bound, "serving Prometheus metrics at /metrics");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router(metrics))
            .with_graceful_shutdown(stop)
            .await
        {
            warn!(error = %e, "metrics server stopped");
        }
    });
    Ok(bound)
}
