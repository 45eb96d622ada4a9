//! Process steps: a step that runs a program (`step.rs`), owned from its
//! spawn to its reaping (`supervisor.rs`), with its logs read line by line
//! (`logs.rs`) and a record of how it ended kept with its attempt
//! (`record.rs`, the one part on every platform: the tools read it);
//! `declared.rs` is a pipeline of process steps built at run time. Process
//! steps run on Unix only.
//!
//! A [`ProcessStep`] runs its program in a process group of its own, argv as
//! given (a shell only with [`ProcessStep::shell`]), stdin from `/dev/null`,
//! in a work directory of its own (`$TMPDIR/leasehold-step-*`, see
//! `work_dirs.rs`) holding the job's input
//! (`LEASEHOLD_INPUT`) and the previous step's output (`LEASEHOLD_PREVIOUS`);
//! the child writes its own output as JSON to `LEASEHOLD_OUTPUT`. Exit code 0
//! is success; [`EXIT_RETRYABLE`] (75) is a retryable failure; the sysexits
//! for a usage, data, input or configuration error ([`DEFAULT_PERMANENT`]:
//! 64, 65, 66, 78) are permanent; any other non-zero code is retryable within
//! the attempts allowed ([`ExitCodes`] changes this per step, and the error
//! names the setting that decided); a death by a signal the worker did not
//! send is retryable. When the job's cancellation token
//! fires (an operator's cancel, a lost lease or its local deadline, a worker
//! shutdown past its grace) or the step's time limit passes, the whole group
//! gets SIGTERM, then SIGKILL after the step's grace (default 10 s; on a lost
//! lease at most half the lease's deadline margin, so the child is dead before
//! Redis's deadline). On Linux the program runs under a per-step monitor
//! (`supervisor.rs`) that kills the group when the worker dies and, on its
//! own, cuts it off at the lease's local deadline while the worker is frozen;
//! the reported pid is the program's, which leads its group.
//!
//! ```no_run
//! use leasehold_core::{process::ProcessStep, StepContext, StepError};
//!
//! async fn fetch(ctx: &StepContext) -> Result<serde_json::Value, StepError> {
//!     let output = ProcessStep::new("python3")
//!         .arg("scripts/fetch.py")
//!         .run(ctx, None)
//!         .await?;
//!     Ok(serde_json::from_str(&output).map_err(StepError::permanent)?)
//! }
//! ```

#[cfg(unix)]
mod argv;
#[cfg(unix)]
mod declared;
#[cfg(unix)]
mod exit_codes;
#[cfg(unix)]
mod logs;
mod record;
#[cfg(unix)]
mod report;
#[cfg(unix)]
mod step;
#[cfg(unix)]
mod supervisor;
#[cfg(unix)]
pub(crate) use self::supervisor::signal_process_group;
#[cfg(unix)]
mod work_dirs;

#[cfg(unix)]
pub use self::argv::{arg_fields, render_arg};
#[cfg(unix)]
pub use self::declared::DeclaredPipeline;
#[cfg(unix)]
pub use self::exit_codes::{
    ExitCodes, ExitCodesError, ExitRule, ExitVerdict, DEFAULT_PERMANENT, EXIT_PERMANENT,
    EXIT_RETRYABLE,
};
#[cfg(unix)]
pub use self::logs::PROGRESS_PREFIX;
pub use self::record::{read as read_records, CutOff, CutWhy, ProcessRecord, StepOutcome};
#[cfg(unix)]
pub use self::step::{ProcessStep, DEFAULT_GRACE, DEFAULT_TAIL_BYTES};
#[cfg(unix)]
pub(crate) use self::work_dirs::remove_orphans as remove_orphaned_work_dirs;
