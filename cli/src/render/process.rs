//! `show`'s section on a job's process steps: how each child ended (exit
//! code, signal, or the worker's cut-off), its progress and the last lines of
//! its stdout and stderr, with their control characters made visible. A step
//! still "running" in an attempt that went STALE reads "worker lost at T".

use std::fmt::Write as _;

use leasehold_core::process::{ProcessRecord, StepOutcome};
use leasehold_core::Job;

use crate::time::{human, stamp};

/// Lines of each tail shown (`--json` has the whole kept tail).
const TAIL_LINES: usize = 20;

/// How a process step's child ended (or that its worker was lost), in words.
pub(crate) fn ending(r: &ProcessRecord, job: &Job) -> String {
    match (r.outcome, r.exit_code, r.signal) {
        (StepOutcome::Running, _, _) => match r.worker_lost_at(job) {
            Some(at) => format!("worker lost at {}", stamp(at)),
            None => "running".to_owned(),
        },
        (outcome, Some(code), _) => format!("exited with code {code} ({outcome})"),
        (outcome, None, Some(signal)) => format!("killed by signal {signal} ({outcome})"),
        (outcome, None, None) => outcome.as_str().to_owned(),
    }
}

/// The section, empty when the job ran no process step.
pub(crate) fn process_steps(records: &[ProcessRecord], job: &Job) -> String {
    if records.is_empty() {
        return String::new();
    }
    let mut out = String::from("process steps\n");
    for r in records {
        let ended = ending(r, job);
        let _ = write!(out, "  attempt {} · {} · {ended}", r.attempt, r.step);
        if let Some(pid) = r.pid {
            let _ = write!(out, " · pid {pid}");
            if let Some(pgid) = r.pgid {
                let _ = write!(out, " (process group {pgid})");
            }
        }
        if let Some(end) = r.ended_at {
            let _ = write!(out, " · ran {}", human(end - r.started_at));
        }
        if let Some(p) = r.progress {
            let _ = write!(out, " · progress {p}%");
        }
        out.push('\n');
        if let Some(cut) = &r.cut_off {
            let how = if cut.killed {
                "SIGTERM, then SIGKILL at the end of its grace"
            } else {
                "SIGTERM; it ended within its grace"
            };
            let _ = writeln!(
                out,
                "    cut off by the worker: {} at {} ({}); {how}",
                cut.why.as_str(),
                stamp(cut.at),
                cut.reason
            );
        }
        for (name, tail, total) in [
            ("stdout", &r.stdout_tail, r.stdout_bytes),
            ("stderr", &r.stderr_tail, r.stderr_bytes),
        ] {
            if tail.is_empty() {
                continue;
            }
            let lines: Vec<&str> = tail.lines().collect();
            let shown = &lines[lines.len().saturating_sub(TAIL_LINES)..];
            let _ = writeln!(
                out,
                "    {name} ({total} bytes in all; its last {} lines kept here):",
                shown.len()
            );
            for line in shown {
                let _ = writeln!(out, "    | {line}");
            }
        }
    }
    leasehold_core::visible(&out).into_owned()
}
