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
    /// The bound of `catch_up = "all"` when the pipelines file gives no
    /// `catch_up_max` (the `#[pipeline]` macro leaves it unbounded).
    pub const DEFAULT_MAX: u32 = 24;

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

/// The setting's word (`catch_up = "all"`), read by its one definition
/// (`leasehold_syntax::setting::CATCH_UP`); `"all"` is bounded by
/// [`CatchUp::DEFAULT_MAX`] until a `catch_up_max` says otherwise.
impl std::str::FromStr for CatchUp {
    type Err = leasehold_syntax::setting::SettingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let word = leasehold_syntax::setting::CATCH_UP.parse(s)?;
        let all = CatchUp::All {
            max: CatchUp::DEFAULT_MAX,
        };
        Ok([all, CatchUp::Latest, CatchUp::None]
            .into_iter()
            .find(|c| c.as_str() == word)
            .unwrap_or(CatchUp::Latest))
    }
}

/// The setting's word (`overlap = "skip"`), read by its one definition
/// (`leasehold_syntax::setting::OVERLAP`).
impl std::str::FromStr for Overlap {
    type Err = leasehold_syntax::setting::SettingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let word = leasehold_syntax::setting::OVERLAP.parse(s)?;
        Ok([Overlap::Allow, Overlap::Skip, Overlap::Wait]
            .into_iter()
            .find(|o| o.as_str() == word)
            .unwrap_or(Overlap::Allow))
    }
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

#[cfg(test)]
mod words {
    use super::*;

    /// The words the settings' definitions accept are the values stored.
    #[test]
    fn the_setting_words_are_the_stored_names() {
        for word in leasehold_syntax::setting::CATCH_UP.words {
            assert_eq!(word.parse::<CatchUp>().map(CatchUp::as_str), Ok(*word));
        }
        for word in leasehold_syntax::setting::OVERLAP.words {
            assert_eq!(word.parse::<Overlap>().map(Overlap::as_str), Ok(*word));
        }
        assert!("queue".parse::<Overlap>().is_err());
    }
}
