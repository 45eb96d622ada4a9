//! Running one step of an attempt: its time limit, catching its panics, and
//! honouring the job's cancellation token with the cancel grace (phase B).

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt;
use tracing::warn;

use super::active::ActiveJob;
use super::shared::Shared;
use crate::pipeline::runner::{AnyInput, Runner};
use crate::pipeline::StopWhy;
use crate::pipeline::{StepContext, StepError};

/// How a step run ended.
pub(crate) enum StepRun {
    /// It completed with this output.
    Done(String),
    /// It failed on its own (error, timeout, panic).
    Failed(StepError),
    /// It was stopped (cancel, lost lease, shutdown) before completing: it was cut mid-way.
    Stopped(StopWhy),
}

/// The text of a panic's payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_owned()
    }
}

/// Runs one step with its timeout, catching panics, and honouring the job's
/// cancellation token: once it fires, the step gets the cancel grace period to
/// return on its own, then it is dropped (phase B).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_step(
    shared: &Shared,
    runner: &dyn Runner,
    active: &ActiveJob,
    index: usize,
    ctx: &StepContext,
    input: &AnyInput,
    previous: Option<&str>,
    timeout: Option<Duration>,
) -> StepRun {
    let step = AssertUnwindSafe(runner.run_step(index, ctx, input, previous)).catch_unwind();
    let timed = async {
        match timeout {
            Some(limit) => tokio::time::timeout(limit, step).await.ok(),
            None => Some(step.await),
        }
    };
    tokio::pin!(timed);
    let classify =
        |r: Option<Result<Result<String, StepError>, Box<dyn std::any::Any + Send>>>| match r {
            Some(Ok(Ok(output))) => StepRun::Done(output),
            Some(Ok(Err(error))) => StepRun::Failed(error),
            Some(Err(panic)) => StepRun::Failed(
                StepError::permanent(format!(
                    "step {} panicked: {}",
                    ctx.step(),
                    panic_message(panic.as_ref())
                ))
                .with_kind("panic"),
            ),
            None => StepRun::Failed(
                StepError::retryable(format!(
                    "step {} timed out after {:?}",
                    ctx.step(),
                    timeout.unwrap_or_default()
                ))
                .with_kind("timeout"),
            ),
        };
    tokio::select! {
        r = &mut timed => classify(r),
        _ = active.token().cancelled() => {
            // a process step that asked for a longer grace (its kill grace) gets it,
            // with a second to reap its child and record how it ended
            let grace = match ctx.requested_grace() {
                Some(asked) => shared.cancel_grace.max(asked + Duration::from_secs(1)),
                None => shared.cancel_grace,
            };
            let grace = tokio::time::sleep(grace);
            tokio::pin!(grace);
            tokio::select! {
                r = &mut timed => match classify(r) {
                    // it finished its work anyway: keep the result, the boundary check handles the cancel
                    StepRun::Done(output) if !active.is_lost() => StepRun::Done(output),
                    _ => StepRun::Stopped(active.why().unwrap_or(StopWhy::Shutdown)),
                },
                _ = &mut grace => {
                    warn!(grace = ?shared.cancel_grace, asked = ?ctx.requested_grace(), "step ignored its cancellation: dropped");
                    StepRun::Stopped(active.why().unwrap_or(StopWhy::Shutdown))
                }
            }
        }
    }
}
