//! A worker's start on a cluster in the middle of a failover: what it waits
//! for and how it says it gave up.
//!
//! Duties:
//! - tells a failure worth waiting out (a master unreachable, `MOVED` or
//!   `READONLY` from a node whose role is changing, `CLUSTERDOWN`,
//!   `TRYAGAIN`) from one that will not pass (a bad URL, a refused script);
//! - paces the retries of a queue's start-up calls within the worker's
//!   startup wait ([`DEFAULT_STARTUP_WAIT`] unless set);
//! - turns the last failure into [`Error::StartupUnanswered`], naming the
//!   master of the queue's slot, the queue and its pipelines, and the likely cause.

use std::time::{Duration, Instant};

use crate::error::{Error, StartupUnanswered};
use crate::queue::Queue;

/// How long a starting worker waits for a cluster to answer by default.
pub(crate) const DEFAULT_STARTUP_WAIT: Duration = Duration::from_secs(30);

/// Pause between two tries.
const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// Whether `e`, met while starting on `queue`, may pass if the worker waits
/// (on a cluster only: on one server the caller's own reconnects apply).
pub(crate) fn worth_waiting(queue: &Queue, e: &Error) -> bool {
    queue.pool().is_cluster() && (e.is_transient() || failover_code(e).is_some())
}

/// The error code of a node whose role or slots are changing, if `e` is one
/// (its code, or its kind as the client prints it, `Moved: ...`, also inside
/// a failed pipeline's text).
fn failover_code(e: &Error) -> Option<&'static str> {
    let Error::Redis(r) = e else { return None };
    let text = r.to_string();
    [
        ("MOVED", "Moved:"),
        ("ASK", "Ask:"),
        ("READONLY", "ReadOnly:"),
        ("CLUSTERDOWN", "ClusterDown:"),
        ("TRYAGAIN", "TryAgain:"),
        ("MASTERDOWN", "MasterDown:"),
    ]
    .into_iter()
    .find(|(code, kind)| r.code() == Some(*code) || text.contains(code) || text.contains(kind))
    .map(|(code, _)| code)
}

/// Sleeps before the next try; false when `deadline` would pass first.
pub(crate) async fn pause_before_retry(deadline: Instant) -> bool {
    if Instant::now() + RETRY_PAUSE >= deadline {
        return false;
    }
    tokio::time::sleep(RETRY_PAUSE).await;
    true
}

/// The error a worker gives up with after waiting `waited` for `queue`
/// (serving `pipelines`), the last failure being `last`.
pub(crate) async fn gave_up(
    queue: &Queue,
    pipelines: &[&str],
    waited: Duration,
    last: Error,
) -> Error {
    let master = match tokio::time::timeout(
        Duration::from_secs(5),
        queue.pool().master_of(queue.keys().base()),
    )
    .await
    {
        Ok(Ok(Some(m))) => m.to_string(),
        Ok(Ok(None)) => "none (no master serves its slot)".to_owned(),
        _ => "unknown (no node said)".to_owned(),
    };
    let cause = match failover_code(&last) {
        Some("MOVED" | "ASK") => {
            "the queue's slot is served elsewhere than the nodes say (MOVED/ASK): a failover or a slot move in progress"
        }
        Some("READONLY") => {
            "the node answering for the slot is a replica (READONLY): a failover in progress"
        }
        Some("CLUSTERDOWN" | "MASTERDOWN") => {
            "the cluster is down for this slot: its master is gone and no replica took over"
        }
        Some(_) => "the slot is being moved (TRYAGAIN)",
        None => "the master is unreachable: down, its replica not promoted yet (a failover in progress?)",
    };
    Error::StartupUnanswered(Box::new(StartupUnanswered {
        master,
        queue: queue.name().to_owned(),
        pipelines: pipelines.iter().map(|p| p.to_string()).collect(),
        waited,
        cause: cause.to_owned(),
        last: last.to_string(),
    }))
}
