//! A schedule's cadence and its policies after downtime and while a window's job runs.

use std::time::Duration;

use croner::Cron;
use serde::{Deserialize, Serialize};

/// When a schedule's ticks are.
#[derive(Debug, Clone)]
pub enum Cadence {
    /// A cron expression (5 fields, or 6 with seconds first), evaluated in the
    /// schedule's zone.
    Cron {
        /// The expression as written.
        expr: String,
        /// The parsed expression.
        cron: Box<Cron>,
    },
    /// A fixed interval, anchored at the schedule's start (or the Unix epoch):
    /// ticks at anchor + k × interval, whatever the zone.
    Every(Duration),
}

/// What a tick does with windows that fell due while no scheduler ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Every missed window, oldest first, the latest `max` of them (older ones
    /// are recorded as missed).
    All {
        /// The most windows one catch-up enqueues.
        max: u32,
    },
    /// Only the most recent missed window; the older ones are recorded as skipped.
    Latest,
    /// No missed window: a window claimed more than the grace after its due
    /// time is recorded as missed, not enqueued.
    None,
}

impl CatchUp {
    /// The policy's name as stored and shown (`all`, `latest`, `none`).
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::All { .. } => "all",
            CatchUp::Latest => "latest",
            CatchUp::None => "none",
        }
    }
}

/// What a tick does while the previous window's job is not finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// Enqueue anyway (jobs of two windows may run at once).
    Allow,
    /// Do not enqueue this window: record it as skipped.
    Skip,
    /// Hold the window (recorded as delayed) until the previous job ends.
    Wait,
}

impl Overlap {
    /// The policy's name as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Allow => "allow",
            Overlap::Skip => "skip",
            Overlap::Wait => "wait",
        }
    }
}
