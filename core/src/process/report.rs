//! What a process step writes back: its output file read as the step's
//! output, its progress lines as a metric, its progress and log tails while
//! it runs (at most once a second, only when they changed), and its record
//! when it ended (retried while Redis is out of reach and the lease valid).

use std::sync::Arc;
use std::time::Duration;

use super::logs::Captured;
use super::record::{self, ProcessRecord};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::pipeline::{StepContext, StepError, StopWhy};
use crate::record::Millis;

/// The largest output file read back.
const MAX_OUTPUT_BYTES: u64 = 64 * 1024 * 1024;
/// How often at most a step's progress and tails are written to Redis.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// How long the log readers may go on once the program exited (a process
/// that left the group may hold the pipes open for ever).
const READ_AFTER_EXIT: Duration = Duration::from_secs(1);
/// The longest pause between two tries of the final record's write.
const SAVE_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// The output the child wrote: checked to be JSON, `null` when it wrote none;
/// read and checked (up to 64 MiB) on a blocking thread, not on the runtime's.
pub(super) async fn read_output(path: std::path::PathBuf) -> Result<String, StepError> {
    tokio::task::spawn_blocking(move || read_output_now(&path))
        .await
        .unwrap_or_else(|e| {
            // not the output's fault (a panic, a runtime shutting down): retryable
            Err(
                StepError::retryable(format!("cannot read its output file: {e}"))
                    .with_kind("output"),
            )
        })
}

/// [`read_output`], on the calling thread.
fn read_output_now(path: &std::path::Path) -> Result<String, StepError> {
    let bad = |why: String| Err(StepError::permanent(why).with_kind("output"));
    let len = match std::fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok("null".to_owned()),
        Err(e) => return bad(format!("cannot read its output file: {e}")),
    };
    if len > MAX_OUTPUT_BYTES {
        return bad(format!(
            "its output file has {len} bytes, more than the {MAX_OUTPUT_BYTES} allowed"
        ));
    }
    let text = match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(_) => return bad("its output file is not UTF-8".to_owned()),
        },
        Err(e) => return bad(format!("cannot read its output file: {e}")),
    };
    let text = text.trim();
    if text.is_empty() {
        return Ok("null".to_owned());
    }
    match serde_json::from_str::<serde::de::IgnoredAny>(text) {
        Ok(_) => Ok(text.to_owned()),
        Err(e) => bad(format!("its output is not JSON: {e}")),
    }
}

/// Lets the two log readers read to the end of their pipes, for
/// [`READ_AFTER_EXIT`] at most; then stops them (what is already in a pipe
/// is read first). What they read is kept in their [`Captured`] either way.
pub(super) async fn finish_readers(
    mut out: tokio::task::JoinHandle<()>,
    mut err: tokio::task::JoinHandle<()>,
    stop: &CancellationToken,
) {
    let both = async {
        let _ = (&mut out).await;
        let _ = (&mut err).await;
    };
    if tokio::time::timeout(READ_AFTER_EXIT, both).await.is_err() {
        // a process that left the group (`setsid`) holds a pipe open
        stop.cancel();
        for handle in [&mut out, &mut err] {
            if tokio::time::timeout(READ_AFTER_EXIT, &mut *handle)
                .await
                .is_err()
            {
                handle.abort();
            }
        }
    }
}

/// Writes the step's progress and log tails while it runs, when they
/// changed and at most once per [`PROGRESS_EVERY`]: a worker that dies
/// leaves them at most a second old. `pid` is the program's (and its group's).
pub(super) async fn report_progress(
    ctx: StepContext,
    captured: Arc<Captured>,
    started_at: Millis,
    pid: u32,
) {
    loop {
        captured.changed().await;
        let now = captured.snapshot();
        if let (Some(metrics), Some(labels), Some(value)) =
            (ctx.metrics(), progress_labels(&ctx), now.progress)
        {
            metrics.step_progress.get_or_create(&labels).set(value);
        }
        let record = ProcessRecord {
            attempt: ctx.attempt(),
            step: ctx.step().to_owned(),
            pid: Some(pid),
            pgid: Some(pid),
            started_at,
            ended_at: None,
            exit_code: None,
            signal: None,
            outcome: super::record::StepOutcome::Running,
            cut_off: None,
            progress: now.progress,
            stdout_tail: now.stdout_tail,
            stderr_tail: now.stderr_tail,
            stdout_bytes: now.stdout_bytes,
            stderr_bytes: now.stderr_bytes,
        };
        save(&ctx, &record).await;
        tokio::time::sleep(PROGRESS_EVERY).await;
    }
}

/// The labels of the step's progress metric (none outside a worker).
pub(super) fn progress_labels(ctx: &StepContext) -> Option<crate::metrics::ProgressLabels> {
    Some(crate::metrics::ProgressLabels {
        queue: ctx.queue()?.name().to_owned(),
        pipeline: ctx.lease()?.pipeline.clone(),
        step: ctx.step().to_owned(),
        job: ctx.job().to_string(),
    })
}

/// Writes `record` while the attempt holds its lease (nothing once it is
/// lost); one try: a progress report that fails is replaced by the next.
pub(super) async fn save(ctx: &StepContext, record: &ProcessRecord) {
    let (Some(queue), Some(lease)) = (ctx.queue(), ctx.lease()) else {
        return;
    };
    if matches!(ctx.stop_why(), Some(StopWhy::Lost(_))) {
        return;
    }
    match record::write(queue, lease, record).await {
        Ok(true) => {}
        Ok(false) => {
            warn!(job = %ctx.job(), step = ctx.step(), "process record not written: the lease is gone")
        }
        Err(e) => {
            warn!(job = %ctx.job(), step = ctx.step(), error = %e, "process record not written")
        }
    }
}

/// Writes the step's final `record`, retrying transient Redis failures with
/// backoff (as the holder's other writes are) while the lease is valid by
/// the worker's clock; nothing once it is lost or past its local deadline.
pub(super) async fn save_final(ctx: &StepContext, record: &ProcessRecord) {
    let (Some(queue), Some(lease)) = (ctx.queue(), ctx.lease()) else {
        return;
    };
    let mut backoff = Duration::from_millis(50);
    loop {
        if matches!(ctx.stop_why(), Some(StopWhy::Lost(_))) || !ctx.lease_valid() {
            warn!(job = %ctx.job(), step = ctx.step(), "process record not written: the lease is lost or past its local deadline");
            return;
        }
        match record::write(queue, lease, record).await {
            Ok(true) => return,
            Ok(false) => {
                warn!(job = %ctx.job(), step = ctx.step(), "process record not written: the lease is gone");
                return;
            }
            Err(e) if e.is_lease_lost() => {
                warn!(job = %ctx.job(), step = ctx.step(), error = %e, "process record not written: the lease is gone");
                return;
            }
            Err(e) => {
                warn!(job = %ctx.job(), step = ctx.step(), error = %e, retry_in = ?backoff, "process record not written; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(SAVE_BACKOFF_MAX);
            }
        }
    }
}
