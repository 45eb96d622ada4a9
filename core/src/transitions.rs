//! The transition table: the one place, as data, that says which moves exist.
//!
//! The scripts enforce this table itself: the script registry writes it into
//! every script as Lua (`gen/moves`, see `core/src/wire/scripts.rs`), so the
//! states each operation accepts in Redis are the rows below.
//! `tests/transition_table.rs` proves that they agree by driving every
//! operation from every state against Redis, one at a time and in settle
//! batches, and `docs/design.md` shows the table (checked by `tests/design_doc.rs`).

use std::fmt;

use crate::state::JobState::{self, *};

/// An operation that may change a job's state: a script (`enqueue`, `renew`,
/// `cancel`, `sweep`, `retry`, `resolve`) or a transition run by `settle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Create a job (nothing → QUEUED).
    Enqueue,
    /// A worker takes a job (QUEUED → LEASED, or → RUNNING when it starts in the same call).
    Lease,
    /// The holder starts the first step (LEASED → RUNNING, or → CANCELLED if a cancel is pending).
    Start,
    /// The holder records a completed step. Not a move of the table: an
    /// append to the job's outputs list that counts once the attempt's end
    /// seals it (named here for the refusals of a checkpoint not RUNNING or
    /// not the holder's).
    Checkpoint,
    /// The holder extends its lease (LEASED and RUNNING stay).
    Renew,
    /// The holder ends the attempt (→ SUCCEEDED, FAILED or CANCELLED).
    Finish,
    /// The holder hands back an unstarted job (LEASED → QUEUED).
    Release,
    /// Cancel: at once when QUEUED, a recorded request when LEASED or RUNNING.
    Cancel,
    /// Recovery of an expired lease.
    Sweep,
    /// Operator retry: a new attempt in QUEUED.
    Retry,
    /// Operator decision on a STALE job.
    Resolve,
}

impl Op {
    /// Every operation, in the order of the enum.
    pub const ALL: [Op; 11] = [
        Enqueue, Lease, Start, Checkpoint, Renew, Finish, Release, Cancel, Sweep, Retry, Resolve,
    ];

    /// Lower-case name, as recorded in the `op` field of events.
    pub const fn as_str(self) -> &'static str {
        match self {
            Op::Enqueue => "enqueue",
            Op::Lease => "lease",
            Op::Start => "start",
            Op::Checkpoint => "checkpoint",
            Op::Renew => "renew",
            Op::Finish => "finish",
            Op::Release => "release",
            Op::Cancel => "cancel",
            Op::Sweep => "sweep",
            Op::Retry => "retry",
            Op::Resolve => "resolve",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a transition relates to attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The current attempt changes state.
    Move,
    /// The state does not change (a renewal, a recorded cancel request).
    Stay,
    /// The current attempt is over; a new attempt begins in QUEUED.
    NewAttempt,
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// The operation (script) that performs it.
    pub op: Op,
    /// State before.
    pub from: JobState,
    /// State after.
    pub to: JobState,
    /// Move, stay, or new attempt.
    pub kind: Kind,
    /// When it happens, in words.
    pub when: &'static str,
}

const fn row(op: Op, from: JobState, to: JobState, kind: Kind, when: &'static str) -> Transition {
    Transition {
        op,
        from,
        to,
        kind,
        when,
    }
}

use Op::*;

/// Every transition leasehold performs. Anything not listed is refused.
pub const TRANSITIONS: &[Transition] = &[
    row(Lease, Queued, Leased, Kind::Move, "a worker leases the job"),
    row(
        Lease,
        Queued,
        Running,
        Kind::Move,
        "a worker leases the job into a free run slot and starts it",
    ),
    row(Start, Leased, Running, Kind::Move, "the holder starts it"),
    row(
        Start,
        Leased,
        Cancelled,
        Kind::Move,
        "the holder starts it but a cancel was requested",
    ),
    row(
        Start,
        Running,
        Running,
        Kind::Stay,
        "the holder repeats a start whose reply was lost",
    ),
    row(
        Renew,
        Leased,
        Leased,
        Kind::Stay,
        "the holder renews its lease",
    ),
    row(
        Renew,
        Running,
        Running,
        Kind::Stay,
        "the holder renews its lease",
    ),
    row(
        Finish,
        Running,
        Succeeded,
        Kind::Move,
        "every step completed",
    ),
    row(Finish, Running, Failed, Kind::Move, "a step failed"),
    row(
        Finish,
        Running,
        Queued,
        Kind::NewAttempt,
        "a step failed, retryable, attempts left",
    ),
    row(
        Finish,
        Running,
        Cancelled,
        Kind::Move,
        "the holder honoured a cancel",
    ),
    row(
        Finish,
        Leased,
        Cancelled,
        Kind::Move,
        "the holder honoured a cancel before starting",
    ),
    row(
        Release,
        Leased,
        Queued,
        Kind::Move,
        "the holder hands it back (shutdown)",
    ),
    row(
        Release,
        Leased,
        Cancelled,
        Kind::Move,
        "the holder hands it back with a cancel pending",
    ),
    row(
        Cancel,
        Queued,
        Cancelled,
        Kind::Move,
        "cancel while waiting",
    ),
    row(
        Cancel,
        Leased,
        Leased,
        Kind::Stay,
        "cancel requested; the holder honours it",
    ),
    row(
        Cancel,
        Running,
        Running,
        Kind::Stay,
        "cancel requested; the holder honours it",
    ),
    row(
        Sweep,
        Leased,
        Queued,
        Kind::Move,
        "lease expired, no cancel",
    ),
    row(
        Sweep,
        Leased,
        Cancelled,
        Kind::Move,
        "lease expired, cancel requested",
    ),
    row(
        Sweep,
        Running,
        Stale,
        Kind::Move,
        "lease expired while running",
    ),
    row(Retry, Failed, Queued, Kind::NewAttempt, "operator retry"),
    row(Retry, Cancelled, Queued, Kind::NewAttempt, "operator retry"),
    row(Retry, Stale, Queued, Kind::NewAttempt, "operator retry"),
    row(Resolve, Stale, Failed, Kind::Move, "operator resolves"),
    row(Resolve, Stale, Cancelled, Kind::Move, "operator resolves"),
    row(Resolve, Stale, Succeeded, Kind::Move, "operator resolves"),
];

/// Rows of the table for `op` starting in `from`.
pub fn rows(op: Op, from: JobState) -> impl Iterator<Item = &'static Transition> {
    TRANSITIONS
        .iter()
        .filter(move |t| t.op == op && t.from == from)
}

/// Whether `op` may act on a job in state `from` at all.
pub fn op_allowed(op: Op, from: JobState) -> bool {
    rows(op, from).next().is_some()
}

/// Whether `op` may take a job from `from` to `to`.
pub fn allowed(op: Op, from: JobState, to: JobState) -> bool {
    rows(op, from).any(|t| t.to == to)
}

/// Whether the attempt-level move `from → to` exists at all (by any operation,
/// not counting new attempts). QUEUED→SUCCEEDED, FAILED→RUNNING,
/// SUCCEEDED→FAILED and RUNNING→QUEUED are not among them.
pub fn move_exists(from: JobState, to: JobState) -> bool {
    TRANSITIONS
        .iter()
        .any(|t| t.kind == Kind::Move && t.from == from && t.to == to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn design_moves_are_allowed_and_forbidden_ones_are_not() {
        for (from, to) in [
            (Queued, Leased),
            (Leased, Running),
            (Running, Succeeded),
            (Running, Failed),
            (Running, Cancelled),
            (Running, Stale),
            (Leased, Queued),
            (Leased, Cancelled),
            (Queued, Cancelled),
        ] {
            assert!(move_exists(from, to), "{from}→{to} must exist");
        }
        for (from, to) in [
            (Queued, Succeeded),
            (Failed, Running),
            (Succeeded, Failed),
            (Running, Queued),
        ] {
            assert!(!move_exists(from, to), "{from}→{to} must not exist");
        }
    }

    #[test]
    fn terminal_states_only_leave_by_new_attempt_and_succeeded_never() {
        for t in TRANSITIONS {
            if t.from.is_terminal() {
                assert_eq!(t.kind, Kind::NewAttempt, "{t:?}");
                assert_ne!(t.from, Succeeded);
            }
        }
    }
}
