//! Why a schedule cannot be declared or evaluated.

/// Why a schedule cannot be declared or evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The cron expression does not parse (or has other than 5 or 6 fields).
    #[error("schedule {schedule}: bad cron expression {expr:?}: {why}")]
    BadCron {
        /// The schedule.
        schedule: String,
        /// The expression as given.
        expr: String,
        /// What is wrong.
        why: String,
    },
    /// The time zone is not an IANA name the bundled database knows.
    #[error("schedule {schedule}: unknown time zone {zone:?}: {why}")]
    BadZone {
        /// The schedule.
        schedule: String,
        /// The zone as given.
        zone: String,
        /// What is wrong.
        why: String,
    },
    /// Some other setting is out of range (interval, start after end, static
    /// input that is not an object or has a `window` field, a bad name).
    #[error("schedule {schedule}: {why}")]
    Invalid {
        /// The schedule.
        schedule: String,
        /// What is wrong.
        why: String,
    },
}
