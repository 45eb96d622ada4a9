//! The notifier: one task per served queue whose pipelines name a notice
//! hook (none otherwise, so a worker without hooks pays nothing). It reads
//! the queue's events stream through the consumer group `notify`, so each
//! entry goes to one replica, and fires the hook of a job that ended FAILED
//! or went STALE. The schedule side (a schedule starting to fail) fires from
//! the scheduler, on the replica whose failed tick began the spell.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::redis;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::inspect::events::{parse_entry, RawEntries};
use crate::notify::{Notify, NotifyEvent};
use crate::queue::Queue;
use crate::state::JobState;

/// The consumer group the notifiers of every replica share.
const GROUP: &str = "notify";
/// How long one read blocks waiting for events.
const BLOCK: Duration = Duration::from_secs(2);
/// Entries read at most per call.
const COUNT: usize = 100;

/// The hooks of one queue's pipelines.
pub(crate) struct QueueNotifier {
    /// The queue.
    pub queue: Queue,
    /// Pipeline name → its hook.
    pub hooks: BTreeMap<String, Arc<Notify>>,
}

/// A job notice's JSON: the event, the job whole (its attempts, errors, input).
fn job_notice(event: NotifyEvent, job: &crate::record::Job) -> serde_json::Value {
    let error = job
        .attempts
        .iter()
        .find(|a| a.n == job.attempt)
        .and_then(|a| a.error.as_ref())
        .map(|e| e.message.clone())
        .unwrap_or_default();
    serde_json::json!({
        "event": event.as_str(),
        "summary": format!(
            "{} job {} of pipeline {} (queue {}), attempt {}{}",
            match event {
                NotifyEvent::JobFailed => "FAILED:",
                _ => "STALE:",
            },
            job.id,
            job.pipeline,
            job.queue,
            job.attempt,
            if error.is_empty() { String::new() } else { format!(": {error}") }
        ),
        "queue": job.queue,
        "pipeline": job.pipeline,
        "job": job,
    })
}

/// Runs `n` until `stop`.
pub(crate) async fn run(n: QueueNotifier, worker: String, stop: CancellationToken) {
    let key = n.queue.keys().events();
    let mut failures: u32 = 0;
    loop {
        if stop.is_cancelled() {
            return;
        }
        let served = tokio::select! {
            r = serve(&n, &key, &worker, &stop) => r,
            _ = stop.cancelled() => return,
        };
        if let Err(e) = served {
            failures += 1;
            if failures == 1 {
                warn!(queue = %n.queue.name(), error = %e, "notifier: cannot read the events stream; retrying");
            }
            let wait = Duration::from_millis(500u64 << failures.min(4));
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.cancelled() => return,
            }
        }
    }
}

/// Reads and handles entries on one connection until an error.
async fn serve(
    n: &QueueNotifier,
    key: &str,
    worker: &str,
    stop: &CancellationToken,
) -> crate::error::Result<()> {
    let mut conn = n.queue.pool().dedicated(BLOCK * 2).await?;
    let created: redis::RedisResult<()> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(key)
        .arg(GROUP)
        .arg("$")
        .arg("MKSTREAM")
        .query_async(&mut conn)
        .await;
    if let Err(e) = created {
        if e.code() != Some("BUSYGROUP") {
            return Err(e.into());
        }
    }
    while !stop.is_cancelled() {
        let reply: Option<Vec<(String, RawEntries)>> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(worker)
            .arg("COUNT")
            .arg(COUNT)
            .arg("BLOCK")
            .arg(BLOCK.as_millis() as u64)
            .arg("STREAMS")
            .arg(key)
            .arg(">")
            .query_async(&mut conn)
            .await?;
        let entries: RawEntries = reply
            .into_iter()
            .flatten()
            .flat_map(|(_, entries)| entries)
            .collect();
        for (id, flat) in entries {
            handle(n, key, id.clone(), flat).await;
            // taken: at most once, whether or not the hook succeeded
            let _: redis::RedisResult<u64> = redis::cmd("XACK")
                .arg(key)
                .arg(GROUP)
                .arg(&id)
                .query_async(&mut conn)
                .await;
        }
    }
    Ok(())
}

/// Fires the hooks one stream entry calls for.
async fn handle(n: &QueueNotifier, key: &str, id: String, flat: Vec<String>) {
    let events = match parse_entry(n.queue.name(), key, id, flat) {
        Ok(e) => e,
        Err(e) => {
            debug!(queue = %n.queue.name(), error = %e, "notifier: an event entry not readable");
            return;
        }
    };
    for e in events {
        let event = match e.to {
            JobState::Failed => NotifyEvent::JobFailed,
            JobState::Stale if e.from != Some(JobState::Stale) => NotifyEvent::JobStale,
            _ => continue,
        };
        // the job as it is now: a FAILED attempt a retry follows is no notice
        let job = match n.queue.job(&e.job).await {
            Ok(Some(job)) => job,
            Ok(None) => continue,
            Err(err) => {
                warn!(job = %e.job, error = %err, "notifier: cannot read the job");
                continue;
            }
        };
        let wanted = match event {
            NotifyEvent::JobFailed => job.state == JobState::Failed && job.attempt == e.attempt,
            _ => job.attempt == e.attempt,
        };
        let Some(hook) = n.hooks.get(&job.pipeline).filter(|h| h.wants(event)) else {
            continue;
        };
        if wanted {
            super::notice::fire(hook, event, &job_notice(event, &job)).await;
        }
    }
}
