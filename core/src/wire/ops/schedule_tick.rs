//! `schedule_tick.lua`: claims a schedule's due windows on Redis time and
//! enqueues their jobs in the same call (a tick of the scheduler, or an
//! operator's trigger of one window).

use deadpool_redis::redis::Value;

use super::{enqueue_status, ms_of, schedule_keys, ScriptOp};
use crate::answers::{TickReply, TickedWindow};
use crate::error::{Error, Result};
use crate::id::JobId;
use crate::job_spec::NewJob;
use crate::schedule::{DueWindows, Schedule};
use crate::wire::args::millis;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::new_job::{push_new_job, JOB_VALUES};
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// The values of one window in ARGV (`WINDOW_VALUES` of the script): its
/// start, its end (ms), then its job's [`JOB_VALUES`].
pub(crate) const WINDOW_VALUES: usize = 2 + JOB_VALUES;

/// A tick (`cursor` given: the cursor the windows were computed from) or a
/// trigger of `schedule`'s windows `due`, whose jobs are `jobs` (validated,
/// one per window) of `pipeline`, created under `ids`.
pub(crate) struct ScheduleTick<'a> {
    pub(crate) schedule: &'a Schedule,
    pub(crate) pipeline: &'a str,
    pub(crate) cursor: Option<i64>,
    pub(crate) due: &'a DueWindows,
    pub(crate) jobs: &'a [NewJob],
    pub(crate) ids: &'a [JobId],
    pub(crate) by: &'a str,
}

/// A protocol error of `schedule_tick`.
fn protocol(detail: String) -> Error {
    Error::Protocol {
        script: "schedule_tick",
        detail,
    }
}

impl ScriptOp for ScheduleTick<'_> {
    type Output = TickReply;

    fn script(&self) -> &'static LuaScript {
        &scripts::SCHEDULE_TICK
    }

    /// KEYS: the schedule's, ready, delayed, wake, then one job key per
    /// window; ARGV: queue, pipeline, schedule, digest, mode, cursor,
    /// catch-up, overlap, grace (ms), next due, windows left out, who, window
    /// count, then [`WINDOW_VALUES`] per window.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        let schedule = self.schedule;
        schedule_keys(keys, call, schedule.name());
        call.key(keys.ready(self.pipeline))
            .key(keys.delayed(self.pipeline))
            .key(keys.wake(self.pipeline));
        call.arg(keys.queue())
            .arg(self.pipeline)
            .arg(schedule.name())
            .arg(schedule.definition().digest())
            .arg(if self.cursor.is_some() {
                "tick"
            } else {
                "trigger"
            })
            .arg(self.cursor.map(|c| c.to_string()).unwrap_or_default())
            .arg(schedule.catch_up_policy().as_str())
            .arg(schedule.overlap_policy().as_str())
            .arg(millis(schedule.grace_period()))
            .arg(
                self.due
                    .next_due
                    .map(|t| t.as_millisecond().to_string())
                    .unwrap_or_default(),
            )
            .arg(self.due.left_out)
            .arg(self.by)
            .arg(self.due.windows.len());
        for ((w, job), id) in self.due.windows.iter().zip(self.jobs).zip(self.ids) {
            let before = call.arg_count();
            call.key(keys.job(id.as_str()));
            call.arg(w.start_ms()).arg(w.end_ms());
            push_new_job(call, id, job);
            debug_assert_eq!(call.arg_count() - before, WINDOW_VALUES);
        }
    }

    /// `{'OK' | 'WAITING', cursor, next due, now, then start, outcome, job,
    /// status per window}`, `{'EARLY', now}`, `{'MOVED', cursor}`,
    /// `{'UNREGISTERED'}` or `{'VERSION', digest}`.
    fn decode(&self, _keys: &QueueKeys, reply: Value) -> Result<TickReply> {
        let ms = |text: &str, what: &str| ms_of("schedule_tick", text, what);
        let mut reply = Reply::new("schedule_tick", reply)?;
        let status = reply.text()?;
        match status.as_str() {
            "OK" | "WAITING" => {
                let cursor_text = reply.text()?;
                let cursor = if cursor_text.is_empty() {
                    0
                } else {
                    ms(&cursor_text, "cursor")?
                };
                let next = reply.text()?;
                let next_due = if next.is_empty() || next == "inf" {
                    None
                } else {
                    Some(ms(&next, "next due")?)
                };
                let now = ms(&reply.text()?, "now")?;
                let mut windows = Vec::new();
                while reply.remaining() >= 4 {
                    let start_ms = ms(&reply.text()?, "window start")?;
                    let outcome = reply.text()?;
                    let job = reply.opt_text()?.map(|j| JobId::parse(&j)).transpose()?;
                    let status = match reply.text()?.as_str() {
                        "" | "paused" | "overlap" => None,
                        other => Some(enqueue_status(other).ok_or_else(|| {
                            protocol(format!("unknown enqueue status {other:?}"))
                        })?),
                    };
                    windows.push(TickedWindow {
                        start_ms,
                        outcome,
                        job,
                        status,
                    });
                }
                Ok(TickReply::Claimed {
                    cursor,
                    next_due,
                    now,
                    waiting: status == "WAITING",
                    windows,
                })
            }
            "EARLY" => Ok(TickReply::Early {
                now: ms(&reply.text()?, "now")?,
            }),
            "MOVED" => Ok(TickReply::Moved {
                cursor: ms(&reply.text()?, "cursor")?,
            }),
            "UNREGISTERED" => Ok(TickReply::Unregistered),
            "VERSION" => Ok(TickReply::Version {
                digest: reply.text()?,
            }),
            other => Err(protocol(format!("unknown status {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The script reads each window at the same stride.
    #[test]
    fn the_script_reads_windows_at_the_same_stride() {
        let lua = include_str!("../../../lua/schedule_tick.lua");
        assert!(lua.contains("\nlocal WINDOW_VALUES = 2 + JOB_VALUES\n"));
        assert!(lua.contains(&format!(
            "per window WINDOW_VALUES ({WINDOW_VALUES}) values"
        )));
    }
}
