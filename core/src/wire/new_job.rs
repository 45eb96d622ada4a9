//! The one encoding of a new job as script arguments: the [`JOB_VALUES`]
//! values `core/lua/lib/create.lua` reads (its `JOB_VALUES`), written the same
//! way by `enqueue` and by `schedule_tick`, so a job made by a schedule carries
//! what an enqueued one does (its flow-control gates and its trace context
//! among them).

use super::args::{bool_arg, millis};
use super::call::ScriptCall;
use crate::id::JobId;
use crate::job_spec::NewJob;

/// The values of one new job in a call's ARGV (`JOB_VALUES` of lib/create):
/// the stride of `enqueue`'s jobs, and part of `schedule_tick`'s windows.
pub(crate) const JOB_VALUES: usize = 11;

/// The trace context a job carries: the one it was given, else (with the
/// `otel` feature) the current span's; `None` for a plain job.
fn trace_of(job: &NewJob) -> Option<String> {
    job.traceparent.clone().or_else(crate::trace::current)
}

/// Appends job `job`, created under id `id`, as lib/create's [`JOB_VALUES`] values: id,
/// input, input key, resource, priority, delay (ms), max attempts, STALE lock
/// policy, re-run flag, flow-control gates, trace context ('' for none).
pub(crate) fn push_new_job(call: &mut ScriptCall<'_>, id: &JobId, job: &NewJob) {
    let before = call.arg_count();
    call.arg(id.as_str())
        .arg(&job.input)
        .arg(job.input_key.as_deref().unwrap_or(""))
        .arg(job.resource.as_deref().unwrap_or(""))
        .arg(job.priority)
        .arg(millis(job.delay))
        .arg(job.max_attempts)
        .arg(job.stale_lock.as_str())
        .arg(bool_arg(job.rerun))
        .arg(job.flow.as_deref().unwrap_or(""))
        .arg(trace_of(job).as_deref().unwrap_or(""));
    debug_assert_eq!(call.arg_count() - before, JOB_VALUES);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Lua side names the same stride.
    #[test]
    fn lib_create_reads_the_same_number_of_values() {
        let lua = include_str!("../../lua/lib/create.lua");
        assert!(lua.contains(&format!("\nlocal JOB_VALUES = {JOB_VALUES}\n")));
    }
}
