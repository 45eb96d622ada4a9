//! The cancel listener: the worker's background task that hears cancel
//! requests as they are recorded and stops the step at once.
//!
//! Duties:
//! - keeps one pub/sub subscription (`pool::Subscriber`) to the cancel
//!   channel of every served queue (`B:cancels`, where `cancel` and
//!   `group_cancel` publish the id of a LEASED or RUNNING job they asked to
//!   cancel), opened again with a backoff when it ends or cannot be opened;
//! - on a message naming a job this worker holds, reads the job's token and
//!   `cancel_reason` (one `HMGET`, for a cancel only: a message is a hint,
//!   never trusted on its own) and, when the lease is still this worker's and
//!   a cancel is requested, stops the job exactly as a renewal reporting the
//!   request would (`heartbeat.rs`): a Rust step's token is cancelled, a
//!   process step's group gets SIGTERM;
//! - is idle otherwise: nothing is sent per job on the happy path. A message
//!   missed (the subscription was down) is made up for by the next renewal.
//!
//! A worker built on a pool of the caller's for one server has no URL to
//! subscribe with: it hears cancels at its renewals only.

use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::redis;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::active::ActiveJob;
use super::shared::{RedisSource, Shared};
use crate::pipeline::StopWhy;
use crate::pool::{Message, RedisPool, Subscriber};
use crate::queue::Queue;

/// The first wait before opening a subscription again; it doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait before opening a subscription again.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Settings and handles of a worker's cancel listener.
pub(crate) struct CancelListener {
    /// The worker's shared state (the held jobs).
    pub(crate) shared: Arc<Shared>,
    /// The served queues.
    pub(crate) queues: Vec<Queue>,
    /// Where the worker's Redis is.
    pub(crate) source: RedisSource,
    /// Fired when the worker has stopped: the task ends.
    pub(crate) stop: CancellationToken,
}

/// Runs the listener until `listener.stop` fires.
pub(crate) async fn run(listener: CancelListener) {
    let url = match &listener.source {
        RedisSource::Url(url) => url.clone(),
        RedisSource::Pool(pool) => match pool.subscribe_url() {
            Some(url) => url,
            None => {
                info!("cancel requests are heard at lease renewals only (a worker on a pool of the caller's has no URL to subscribe with)");
                return;
            }
        },
    };
    let channels: Vec<String> = listener.queues.iter().map(|q| q.keys().cancels()).collect();
    let mut backoff = MIN_BACKOFF;
    loop {
        let opened = tokio::select! {
            opened = Subscriber::open(&url, &channels) => opened,
            _ = listener.stop.cancelled() => return,
        };
        match opened {
            Ok(mut subscriber) => {
                debug!(?channels, "listening for cancel requests");
                backoff = MIN_BACKOFF;
                loop {
                    let message = tokio::select! {
                        message = subscriber.next() => message,
                        _ = listener.stop.cancelled() => return,
                    };
                    let Some(message) = message else {
                        warn!("cancel subscription ended; opening it again (renewals still report cancels)");
                        break;
                    };
                    heard(&listener, message);
                }
            }
            Err(e) => {
                warn!(error = %e, retry_in = ?backoff, "cannot subscribe to cancel requests (renewals still report them)")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = listener.stop.cancelled() => return,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Acts on a message: when it names a job this worker holds (and is not
/// already stopping), confirms the request in Redis and stops the job.
fn heard(listener: &CancelListener, message: Message) {
    let Some(queue) = listener
        .queues
        .iter()
        .find(|q| q.keys().cancels() == message.channel)
    else {
        return;
    };
    let Some(job) = listener.shared.active.get(&message.payload) else {
        return;
    };
    if job.why().is_some() || job.is_ending() {
        return;
    }
    let queue = queue.clone();
    // a task of its own: a slow read never holds up the next message
    tokio::spawn(async move { confirm_and_stop(&queue, &job).await });
}

/// Reads the job's token and cancel request; stops the job when its lease is
/// still this worker's and a cancel is requested.
async fn confirm_and_stop(queue: &Queue, job: &ActiveJob) {
    let key = queue.keys().job(job.lease.job.as_str());
    let fields = read_request(queue.pool(), &key).await;
    match fields {
        Ok((Some(token), Some(reason))) if token == job.lease.token && !reason.is_empty() => {
            if job.why().is_none() {
                info!(job = %job.lease.job, %reason, "cancel requested: interrupting the running step (phase B, pushed)");
            }
            job.stop(StopWhy::Cancel(reason));
        }
        Ok(_) => {
            debug!(job = %job.lease.job, "cancel message not confirmed by the job (another lease, or no request)")
        }
        Err(e) => {
            debug!(job = %job.lease.job, error = %e, "cannot confirm a cancel message; the next renewal reports it")
        }
    }
}

/// The job's `token` and `cancel_reason`.
async fn read_request(
    pool: &RedisPool,
    key: &str,
) -> crate::error::Result<(Option<String>, Option<String>)> {
    let mut conn = pool.get().await?;
    let fields: (Option<String>, Option<String>) = redis::cmd("HMGET")
        .arg(key)
        .arg("token")
        .arg("cancel_reason")
        .query_async(&mut conn)
        .await?;
    Ok(fields)
}
