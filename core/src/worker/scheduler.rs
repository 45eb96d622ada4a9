//! The scheduler: one task per worker that serves a scheduled pipeline (none
//! otherwise), firing each schedule's due windows through `schedule_tick.lua`.
//!
//! Every replica runs it; the script's cursor compare makes each window
//! claimed once, by whichever replica calls first. Time is Redis's: each reply
//! carries Redis TIME, and the task sleeps from that reading until the next due
//! time (re-reading at least once a minute, so a drifting local clock cannot
//! carry it far). It never polls: a call is made when a window is due, when a
//! held (`wait`) window is looked at again, or after an error. Nothing is lost
//! by a replica dying between computing and calling: the cursor in Redis did
//! not move, and the next replica claims the same windows.
//!
//! Each schedule runs in a task of its own, so a schedule whose queue's
//! master does not answer (down, failing over) delays no other schedule: its
//! ticks fail and back off (0.5 s doubling to 8 s), logged at warn once per
//! spell, naming the master and the queue, and at info when it answers again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::masters::master_of;

use crate::contract::Contract;
use crate::error::Result;
use crate::metrics::{Metrics, ScheduleLabels, TickLabels};
use crate::notify::NotifyEvent;
use crate::queue::{Queue, TickReply};
use crate::schedule::{Cadence, Schedule};

/// The longest single sleep: the Redis clock is read again at least this often.
const MAX_SLEEP: Duration = Duration::from_secs(60);
/// How soon a window held by the `wait` overlap policy is looked at again, at most.
const WAIT_RECHECK: Duration = Duration::from_secs(5);
/// Longest wait for a node to name a failing schedule's master, for a log line.
const MASTER_LOOKUP: Duration = Duration::from_secs(2);

/// One schedule a worker fires.
pub(crate) struct Scheduled {
    /// The queue of its pipeline.
    pub queue: Queue,
    /// Its pipeline's contract (how a window's input becomes a job).
    pub contract: Arc<Contract>,
    /// The schedule.
    pub schedule: Schedule,
    /// Its cursor and Redis's time when the worker registered it.
    pub cursor: i64,
    /// Redis TIME at registration (ms).
    pub now: i64,
    /// Its pipeline's notice hook, if it names one.
    pub notify: Option<Arc<crate::notify::Notify>>,
}

/// Redis's clock as last read, advanced by local monotonic time since.
struct RedisClock {
    read_ms: i64,
    at: Instant,
}

impl RedisClock {
    fn set(&mut self, ms: i64) {
        self.read_ms = ms;
        self.at = Instant::now();
    }
    fn now_ms(&self) -> i64 {
        self.read_ms + self.at.elapsed().as_millis() as i64
    }
}

fn ts(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Sleeps `d`; false when `stop` fired first.
async fn sleep(d: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => true,
        _ = stop.cancelled() => false,
    }
}

/// Runs every schedule until `stop`.
pub(crate) async fn run(
    schedules: Vec<Scheduled>,
    worker: String,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) {
    let mut tasks = JoinSet::new();
    for s in schedules {
        tasks.spawn(fire(s, worker.clone(), metrics.clone(), stop.clone()));
    }
    while tasks.join_next().await.is_some() {}
}

/// The period of a schedule, roughly (for how long to back off).
fn period(s: &Schedule, cursor: i64) -> Duration {
    match s.cadence() {
        Cadence::Every(d) => *d,
        Cadence::Cron { .. } => s
            .next_after(ts(cursor))
            .and_then(|n| {
                s.next_after(n)
                    .map(|m| (m.as_millisecond() - n.as_millisecond()).max(0))
            })
            .map(|ms| Duration::from_millis(ms as u64))
            .unwrap_or(MAX_SLEEP),
    }
}

async fn fire(s: Scheduled, worker: String, metrics: Arc<Metrics>, stop: CancellationToken) {
    let Scheduled {
        queue,
        contract,
        schedule,
        mut cursor,
        now,
        notify,
    } = s;
    let name = schedule.name().to_owned();
    let mut clock = RedisClock {
        read_ms: now,
        at: Instant::now(),
    };
    let mut failures: u32 = 0;
    let mut warned_version = false;
    loop {
        let Some(due) = schedule.next_after(ts(cursor)) else {
            info!(schedule = %name, "schedule ended: no window after its end");
            return;
        };
        let wait_ms = due.as_millisecond() - clock.now_ms();
        if wait_ms > 0 {
            let d = Duration::from_millis(wait_ms as u64).min(MAX_SLEEP);
            if !sleep(d, &stop).await {
                return;
            }
            if d == MAX_SLEEP {
                // read Redis's clock again before firing
                match queue.redis_time_ms().await {
                    Ok(ms) => clock.set(ms),
                    Err(e) => warn!(schedule = %name, error = %e, "cannot read Redis TIME"),
                }
                continue;
            }
        }
        let mut due_windows = schedule.due_windows(ts(cursor), ts(clock.now_ms()));
        if due_windows.windows.is_empty() {
            // the local estimate is a hair early: send the first window, the
            // script says EARLY with Redis's time if it is not due
            if let Some(w) = schedule.window_from(ts(cursor)) {
                due_windows.next_due = schedule.next_after(w.end);
                due_windows.windows.push(w);
            }
        }
        let result = queue
            .tick_schedule(&contract, &schedule, cursor, &due_windows, &worker)
            .await;
        if failures > 0 && result.is_ok() {
            let master = master_of(&queue, MASTER_LOOKUP).await;
            info!(%master, queue = %queue.name(), schedule = %name, failed = failures,
                "schedule ticks answered again by this master");
        }
        match result {
            Ok(TickReply::Claimed {
                cursor: c,
                now,
                waiting,
                windows,
                ..
            }) => {
                failures = 0;
                cursor = c;
                clock.set(now);
                for w in &windows {
                    metrics
                        .schedule_ticks
                        .get_or_create(&TickLabels {
                            queue: queue.name().to_owned(),
                            schedule: name.clone(),
                            outcome: w.outcome.clone(),
                        })
                        .inc();
                    if w.job.is_some() {
                        if let Some(end) = schedule.next_after(ts(w.start_ms)) {
                            let lag = (now - end.as_millisecond()).max(0) as f64 / 1000.0;
                            metrics
                                .schedule_lag_seconds
                                .get_or_create(&ScheduleLabels {
                                    queue: queue.name().to_owned(),
                                    schedule: name.clone(),
                                })
                                .observe(lag);
                        }
                    }
                }
                if waiting {
                    let d = period(&schedule, cursor).clamp(Duration::from_secs(1), WAIT_RECHECK);
                    if !sleep(d, &stop).await {
                        return;
                    }
                    if let Ok(ms) = queue.redis_time_ms().await {
                        clock.set(ms);
                    }
                }
            }
            Ok(TickReply::Early { now }) => {
                failures = 0;
                clock.set(now);
            }
            Ok(TickReply::Moved { cursor: c }) => {
                failures = 0;
                cursor = c;
            }
            Ok(TickReply::Unregistered) => {
                // Redis lost the schedule (flushed or restarted empty): write it back
                match register_again(&queue, &contract, &schedule, &worker).await {
                    Ok((c, now)) => {
                        info!(schedule = %name, cursor = %crate::record::utc(c), "schedule registered again (Redis had lost it)");
                        cursor = c;
                        clock.set(now);
                    }
                    Err(e) => {
                        warn!(schedule = %name, error = %e, "cannot register the schedule again");
                        failures += 1;
                        if !sleep(backoff(failures), &stop).await {
                            return;
                        }
                    }
                }
            }
            Ok(TickReply::Version { digest }) => {
                if !warned_version {
                    warn!(schedule = %name, registered = %digest, ours = %schedule.definition().digest(),
                        "another build registered this schedule with another definition; this replica leaves its ticks to it");
                    warned_version = true;
                }
                let d = period(&schedule, cursor)
                    .clamp(Duration::from_secs(1), Duration::from_secs(30));
                if !sleep(d, &stop).await {
                    return;
                }
            }
            Err(e) => {
                failures += 1;
                if failures == 1 {
                    let master = master_of(&queue, MASTER_LOOKUP).await;
                    warn!(%master, queue = %queue.name(), schedule = %name, error = %e,
                        "schedule tick failed on this master; the window stays due, retried with backoff (logged again when it answers); other masters' schedules do not wait for it");
                } else {
                    debug!(schedule = %name, error = %e, attempt = failures, "schedule tick failed");
                }
                metrics
                    .schedule_tick_failures
                    .get_or_create(&ScheduleLabels {
                        queue: queue.name().to_owned(),
                        schedule: name.clone(),
                    })
                    .inc();
                // recorded in Redis, so `schedules`, `status`, the dashboard
                // and /metrics show it failing (when Redis itself is the
                // trouble, this fails too: the log and the worker's metrics say it)
                match queue
                    .record_schedule_failure(&name, &worker, &e.to_string())
                    .await
                {
                    // the spell's first failure, of all replicas': this one notifies
                    Ok(1) => {
                        if let Some(hook) = notify
                            .as_ref()
                            .filter(|h| h.wants(NotifyEvent::ScheduleFailing))
                        {
                            let notice = serde_json::json!({
                                "event": NotifyEvent::ScheduleFailing.as_str(),
                                "summary": format!(
                                    "schedule {name} of pipeline {} (queue {}) is failing: {e}",
                                    contract.spec().name,
                                    queue.name()
                                ),
                                "queue": queue.name(),
                                "pipeline": contract.spec().name,
                                "schedule": name,
                                "error": e.to_string(),
                            });
                            super::notice::fire(hook, NotifyEvent::ScheduleFailing, &notice).await;
                        }
                    }
                    Ok(_) => {}
                    Err(record) => {
                        debug!(schedule = %name, error = %record, "cannot record the failed tick");
                    }
                }
                if !sleep(backoff(failures), &stop).await {
                    return;
                }
                if let Ok(ms) = queue.redis_time_ms().await {
                    clock.set(ms);
                }
            }
        }
    }
}

/// Wait after `n` failures in a row: 0.5 s doubling to 8 s.
fn backoff(n: u32) -> Duration {
    Duration::from_millis(500u64 << n.saturating_sub(1).min(4))
}

async fn register_again(
    queue: &Queue,
    contract: &Contract,
    schedule: &Schedule,
    worker: &str,
) -> Result<(i64, i64)> {
    let r = queue
        .register_schedule(&contract.spec().name, schedule, worker)
        .await?;
    Ok((r.cursor, r.now))
}
