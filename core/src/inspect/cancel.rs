//! What became of a cancel request, worked out from a job's record.

use serde::{Deserialize, Serialize};

use crate::record::{CancelRequest, Job};
use crate::state::JobState;

/// What became of a cancel request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum CancelOutcome {
    /// The attempt ended CANCELLED.
    Honoured,
    /// LEASED or RUNNING: the holder is told at once (the queue's cancel
    /// channel), at worst at its next renewal, checkpoint or start.
    Pending,
    /// QUEUED: the holder released the job first; the next start cancels it.
    PendingNextStart,
    /// The job completed (SUCCEEDED) before the request was honoured: its
    /// last step returned `Ok` after the request was accepted (or before the
    /// worker saw it). A legitimate outcome; its results stand.
    CompletedFirst,
    /// The attempt ended FAILED before the request was honoured (no automatic
    /// retry was made while it was pending).
    NotHonoured {
        /// How it ended.
        ended: JobState,
    },
    /// STALE: its worker died; an operator must retry or resolve it.
    Stale,
}

/// A cancel request and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelStatus {
    /// The request.
    pub request: CancelRequest,
    /// The attempt it concerned.
    pub attempt: u32,
    /// What became of it.
    #[serde(flatten)]
    pub outcome: CancelOutcome,
}

impl CancelStatus {
    /// A sentence for humans.
    pub fn explain(&self) -> String {
        match self.outcome {
            CancelOutcome::Honoured => {
                format!("honoured: attempt {} ended CANCELLED", self.attempt)
            }
            CancelOutcome::Pending => {
                "pending: the holder is told at once, at worst at its next renewal, checkpoint or start".into()
            }
            CancelOutcome::PendingNextStart => {
                "pending: the job was handed back before honouring it; the next start cancels it"
                    .into()
            }
            CancelOutcome::CompletedFirst => format!(
                "not honoured: the job completed first (attempt {} ended SUCCEEDED after the \
                 request was made; its results stand)",
                self.attempt
            ),
            CancelOutcome::NotHonoured { ended } => format!(
                "not honoured: attempt {} ended {ended} before the request was honoured",
                self.attempt
            ),
            CancelOutcome::Stale => {
                "not honoured: the worker died while RUNNING (STALE); retry or resolve the job"
                    .into()
            }
        }
    }
}

/// The cancel request of `job`'s current attempt, or the latest one recorded in
/// an ended attempt, with what became of it.
pub fn cancel_status(job: &Job) -> Option<CancelStatus> {
    if let Some(request) = &job.cancel {
        let outcome = match job.state {
            JobState::Cancelled => CancelOutcome::Honoured,
            JobState::Leased | JobState::Running => CancelOutcome::Pending,
            JobState::Queued => CancelOutcome::PendingNextStart,
            JobState::Stale => CancelOutcome::Stale,
            JobState::Succeeded => CancelOutcome::CompletedFirst,
            JobState::Failed => CancelOutcome::NotHonoured {
                ended: JobState::Failed,
            },
        };
        return Some(CancelStatus {
            request: request.clone(),
            attempt: job.attempt,
            outcome,
        });
    }
    job.attempts.iter().rev().find_map(|a| {
        let request = a.cancel.clone()?;
        let outcome = match a.state {
            JobState::Cancelled => CancelOutcome::Honoured,
            JobState::Succeeded => CancelOutcome::CompletedFirst,
            ended => CancelOutcome::NotHonoured { ended },
        };
        Some(CancelStatus {
            request,
            attempt: a.n,
            outcome,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_status_follows_the_state() {
        let mut job: Job = serde_json::from_value(serde_json::json!({
            "id": "j", "queue": "q", "pipeline": "p", "input": {}, "input_key": null, "resource": null,
            "priority": 0, "not_before": 0, "max_attempts": 1, "stale_lock": "hold", "created_at": 1,
            "updated_at": 1, "attempt": 1, "state": "RUNNING", "step": null, "last_step": null,
            "outputs": {}, "cancel": {"reason": "stop", "at": 2, "by": "alice"}, "cleanup_needed": false,
            "lease": null, "worker": null, "fence": null, "leased_at": null, "started_at": null,
            "steps": [], "stale_at": null, "attempts": []
        }))
        .unwrap();
        assert_eq!(cancel_status(&job).unwrap().outcome, CancelOutcome::Pending);
        job.state = JobState::Cancelled;
        assert_eq!(
            cancel_status(&job).unwrap().outcome,
            CancelOutcome::Honoured
        );
        job.state = JobState::Succeeded;
        let status = cancel_status(&job).unwrap();
        assert_eq!(status.outcome, CancelOutcome::CompletedFirst);
        assert!(
            status.explain().contains("the job completed first"),
            "{}",
            status.explain()
        );
        job.state = JobState::Failed;
        assert_eq!(
            cancel_status(&job).unwrap().outcome,
            CancelOutcome::NotHonoured {
                ended: JobState::Failed
            }
        );
        job.cancel = None;
        assert_eq!(cancel_status(&job), None);
    }
}
