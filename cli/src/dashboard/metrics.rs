//! `GET /metrics`: what the dashboard computes for its pages, as Prometheus
//! (OpenMetrics) text, read from Redis at each scrape into a fresh registry
//! (so a queue that vanished loses its series). Names follow Prometheus'
//! conventions: the unit in the name (`_seconds`), gauges without `_total`
//! (these are all gauges: counts as of now), `HELP` and `TYPE` for each.
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `leasehold_jobs` | queue, state | jobs per state (terminal states: among the newest sampled) |
//! | `leasehold_terminal_jobs` | queue | terminal jobs kept (the retention index) |
//! | `leasehold_waiting_jobs` | queue, pipeline | ready + delayed jobs |
//! | `leasehold_oldest_waiting_age_seconds` | queue | age of the job waiting longest (0: none) |
//! | `leasehold_parked_jobs` | queue | QUEUED jobs parked on a locked resource |
//! | `leasehold_flow_waiting_jobs` | queue | QUEUED jobs waiting for a flow-control slot |
//! | `leasehold_stale_jobs` | queue | STALE jobs waiting for an operator |
//! | `leasehold_stale_holding_age_seconds` | queue | how long the oldest STALE job still holding its lock or a flow-control slot has been STALE (0: none) |
//! | `leasehold_stale_stalled_jobs` | queue, pipeline | QUEUED jobs waiting for a lock or slot a STALE job holds |
//! | `leasehold_live_workers` | queue | workers whose registration is live |
//! | `leasehold_expired_leases` | queue | leases past their deadline no sweep has handled |
//! | `leasehold_quarantined_jobs` | queue | jobs set aside as unreadable |
//! | `leasehold_schedule_failing` | queue, schedule | failed ticks of a failing schedule since its last claimed one (only failing schedules have a series) |
//! | `leasehold_queue_reachable` | queue, master | 1: the queue was read; 0: on a Redis Cluster with a master down, a queue (or, `queue=""`, a master whose queues could not be listed) that was not, with its master when known (`master=""` otherwise, and for the queues read) |

use std::sync::atomic::AtomicU64;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use leasehold_core::metrics::{PipelineLabels, QueueLabels, ScheduleLabels, StateLabels};
use leasehold_core::{JobState, QueueStatus};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::error::Res;
use super::state::{App, Shared};
use crate::context::Unreachable;

/// Labels of `leasehold_queue_reachable`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReachLabels {
    /// The queue; empty for a master whose queues could not be listed.
    queue: String,
    /// The master (`host:port`) of a queue not read, when known; empty
    /// otherwise.
    master: String,
}

/// The route of the metrics.
pub(super) fn routes() -> Router<Shared> {
    Router::new().route("/metrics", get(metrics))
}

/// `GET /metrics`: Prometheus text; `leasehold_jobs{queue,state}` read from Redis now.
async fn metrics(State(app): State<Shared>) -> Response {
    match app.scrape().await {
        Ok(text) => (
            [(header::CONTENT_TYPE, leasehold_core::metrics::CONTENT_TYPE)],
            text,
        )
            .into_response(),
        Err(e) => {
            let status = e.status();
            eprintln!("leasehold dashboard: /metrics: {}", e.message());
            (status, format!("# {}\n", e.message().replace('\n', " "))).into_response()
        }
    }
}

impl App {
    /// Every queue's status as Prometheus text, one scrape at a time.
    async fn scrape(&self) -> Res<String> {
        let _one_at_a_time = self.scrape.lock().await;
        let overview = self.overview().await?;
        Ok(encode(&overview.queues, &overview.unreachable))
    }
}

fn gauge(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The OpenMetrics text of `statuses`, with each queue or master `lost`
/// (not read) as `leasehold_queue_reachable` 0.
fn encode(statuses: &[QueueStatus], lost: &[Unreachable]) -> String {
    let reachable = Family::<ReachLabels, Gauge>::default();
    for s in statuses {
        reachable
            .get_or_create(&ReachLabels {
                queue: s.queue.clone(),
                master: String::new(),
            })
            .set(1);
    }
    for l in lost {
        reachable
            .get_or_create(&ReachLabels {
                queue: l.queue.clone().unwrap_or_default(),
                master: l.master.clone().unwrap_or_default(),
            })
            .set(0);
    }
    let jobs = Family::<StateLabels, Gauge>::default();
    let terminal = Family::<QueueLabels, Gauge>::default();
    let waiting = Family::<PipelineLabels, Gauge>::default();
    let oldest = Family::<QueueLabels, Gauge<f64, AtomicU64>>::default();
    let parked = Family::<QueueLabels, Gauge>::default();
    let flow = Family::<QueueLabels, Gauge>::default();
    let stale = Family::<QueueLabels, Gauge>::default();
    let stale_holding = Family::<QueueLabels, Gauge<f64, AtomicU64>>::default();
    let stalled = Family::<PipelineLabels, Gauge>::default();
    let workers = Family::<QueueLabels, Gauge>::default();
    let expired = Family::<QueueLabels, Gauge>::default();
    let quarantined = Family::<QueueLabels, Gauge>::default();
    let failing = Family::<ScheduleLabels, Gauge>::default();
    for s in statuses {
        for f in &s.failing_schedules {
            failing
                .get_or_create(&ScheduleLabels {
                    queue: s.queue.clone(),
                    schedule: f.name.clone(),
                })
                .set(gauge(f.failing.failures));
        }
        let q = QueueLabels {
            queue: s.queue.clone(),
        };
        let c = &s.counts;
        for (state, n) in [
            (JobState::Queued, c.queued),
            (JobState::Leased, c.leased),
            (JobState::Running, c.running),
            (JobState::Stale, c.stale),
            (JobState::Succeeded, c.succeeded),
            (JobState::Failed, c.failed),
            (JobState::Cancelled, c.cancelled),
        ] {
            jobs.get_or_create(&StateLabels {
                queue: s.queue.clone(),
                state: state.as_str().to_owned(),
            })
            .set(gauge(n));
        }
        terminal.get_or_create(&q).set(gauge(c.terminal));
        for p in &s.pipelines {
            waiting
                .get_or_create(&PipelineLabels {
                    queue: s.queue.clone(),
                    pipeline: p.pipeline.clone(),
                })
                .set(gauge(p.ready + p.delayed));
        }
        let age = s.oldest_waiting.as_ref().map_or(0, |o| o.age_ms.max(0));
        oldest.get_or_create(&q).set(age as f64 / 1000.0);
        parked.get_or_create(&q).set(gauge(s.parked));
        flow.get_or_create(&q).set(gauge(s.flow_waiting));
        stale.get_or_create(&q).set(gauge(c.stale));
        let holding = s
            .stale
            .iter()
            .filter(|j| j.holds_something())
            .map(|j| (s.now - j.stale_at).max(0))
            .max()
            .unwrap_or(0);
        stale_holding.get_or_create(&q).set(holding as f64 / 1000.0);
        let mut per_pipeline = std::collections::BTreeMap::<&str, u64>::new();
        for (p, n) in s.stale.iter().flat_map(|j| j.stalls.iter()) {
            *per_pipeline.entry(p).or_insert(0) += n;
        }
        for (p, n) in per_pipeline {
            stalled
                .get_or_create(&PipelineLabels {
                    queue: s.queue.clone(),
                    pipeline: p.to_owned(),
                })
                .set(gauge(n));
        }
        workers.get_or_create(&q).set(gauge(s.workers.len() as u64));
        expired.get_or_create(&q).set(gauge(s.expired_leases));
        quarantined.get_or_create(&q).set(gauge(c.quarantined));
    }
    let mut r = Registry::default();
    r.register(
        "leasehold_jobs",
        "Jobs per state (terminal states counted among the newest sampled terminal jobs)",
        jobs,
    );
    r.register(
        "leasehold_terminal_jobs",
        "Terminal jobs kept by retention",
        terminal,
    );
    r.register(
        "leasehold_waiting_jobs",
        "QUEUED jobs ready or delayed, per pipeline",
        waiting,
    );
    r.register(
        "leasehold_oldest_waiting_age_seconds",
        "Age of the job waiting longest (0 when none waits)",
        oldest,
    );
    r.register(
        "leasehold_parked_jobs",
        "QUEUED jobs parked on a locked resource",
        parked,
    );
    r.register(
        "leasehold_flow_waiting_jobs",
        "QUEUED jobs waiting for a flow-control slot",
        flow,
    );
    r.register(
        "leasehold_stale_jobs",
        "STALE jobs waiting for an operator's decision",
        stale,
    );
    r.register(
        "leasehold_stale_holding_age_seconds",
        "How long the oldest STALE job still holding its resource lock or a flow-control slot has been STALE (0 when none holds one)",
        stale_holding,
    );
    r.register(
        "leasehold_stale_stalled_jobs",
        "QUEUED jobs waiting for a lock or flow-control slot that a STALE job holds, per pipeline",
        stalled,
    );
    r.register(
        "leasehold_live_workers",
        "Workers whose registration is live",
        workers,
    );
    r.register(
        "leasehold_expired_leases",
        "Leases past their deadline that no sweep has handled yet",
        expired,
    );
    r.register(
        "leasehold_quarantined_jobs",
        "Jobs set aside as unreadable",
        quarantined,
    );
    r.register(
        "leasehold_schedule_failing",
        "Failed ticks of a failing schedule since its last claimed one",
        failing,
    );
    r.register(
        "leasehold_queue_reachable",
        "1 when the queue was read; 0 for a queue (or, with an empty queue label, a cluster master whose queues could not be listed) that could not be read, its master down",
        reachable,
    );
    let mut out = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &r) {
        eprintln!("leasehold dashboard: cannot encode metrics: {e}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_or_master_not_read_is_unreachable_with_its_labels_escaped() {
        let lost = [
            Unreachable {
                queue: Some("odd\"q\\".into()),
                master: Some("127.0.0.1:7001".into()),
                line: "queue odd: master 127.0.0.1:7001 unreachable".into(),
            },
            Unreachable {
                queue: None,
                master: Some("127.0.0.1:7002".into()),
                line: "master 127.0.0.1:7002 unreachable".into(),
            },
            Unreachable {
                queue: Some("nomaster".into()),
                master: None,
                line: "queue nomaster: its master is unreachable".into(),
            },
        ];
        let text = encode(&[], &lost);
        assert!(
            text.contains("# TYPE leasehold_queue_reachable gauge\n"),
            "{text}"
        );
        for line in [
            r#"leasehold_queue_reachable{queue="odd\"q\\",master="127.0.0.1:7001"} 0"#,
            r#"leasehold_queue_reachable{queue="",master="127.0.0.1:7002"} 0"#,
            r#"leasehold_queue_reachable{queue="nomaster",master=""} 0"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
    }
}
