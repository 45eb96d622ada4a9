//! What a process step writes back: its output file read as the step's
//! output, its progress lines as a metric and a field, and its record.

use std::time::Duration;

use super::logs::Sink;
use super::record::{self, ProcessRecord};
use tokio::sync::watch;
use tracing::warn;

use crate::pipeline::{StepContext, StepError, StopWhy};
use crate::record::Millis;

/// The largest output file read back.
const MAX_OUTPUT_BYTES: u64 = 64 * 1024 * 1024;
/// How often at most a step's progress is written to Redis.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// The output the child wrote: checked to be JSON, `null` when it wrote none.
pub(super) fn read_output(path: &std::path::Path) -> Result<String, StepError> {
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

/// A log reader's result (none if it could not finish: a process that left
/// the group keeps the pipe open).
pub(super) async fn collect(handle: tokio::task::JoinHandle<Sink>) -> Option<Sink> {
    let abort = handle.abort_handle();
    match tokio::time::timeout(Duration::from_secs(2), handle).await {
        Ok(Ok(sink)) => Some(sink),
        _ => {
            abort.abort();
            None
        }
    }
}

/// Writes the step's progress while it runs, at most once per [`PROGRESS_EVERY`].
pub(super) async fn report_progress(
    ctx: StepContext,
    mut progress: watch::Receiver<Option<f64>>,
    started_at: Millis,
    pid: u32,
) {
    while progress.changed().await.is_ok() {
        let value = *progress.borrow_and_update();
        if let (Some(metrics), Some(labels), Some(value)) =
            (ctx.metrics(), progress_labels(&ctx), value)
        {
            metrics.step_progress.get_or_create(&labels).set(value);
        }
        let record = ProcessRecord {
            attempt: ctx.attempt(),
            step: ctx.step().to_owned(),
            pid: Some(pid),
            started_at,
            ended_at: None,
            exit_code: None,
            signal: None,
            outcome: "running".to_owned(),
            cut_off: None,
            progress: value,
            stdout_tail: String::new(),
            stderr_tail: String::new(),
            stdout_bytes: 0,
            stderr_bytes: 0,
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

/// Writes `record` while the attempt holds its lease (nothing once it is lost).
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
