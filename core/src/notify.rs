//! Failure notices, as cron's MAILTO gave them: a pipeline names a command
//! that runs when one of its jobs ends FAILED, goes STALE, or one of its
//! schedules starts failing, with the event as JSON on its standard input.
//!
//! Each event fires once across a pipeline's replicas: job events are read
//! from the queue's events stream through one consumer group, so one replica
//! takes each entry; a schedule's failing spell fires on the replica whose
//! failed tick was the spell's first (its count in Redis says so). A notice
//! is delivered at most once: a worker that dies while its command runs does
//! not hand it on.
//!
//! This module declares a hook; the worker delivers it
//! (`worker/notice.rs`: the command in its own process group, the webhook).
//!
//! ```
//! use leasehold_core::notify::{Notify, NotifyEvent};
//!
//! let mail = Notify::command(["sh", "-c", "mail -s \"leasehold: $(jq -r .summary)\" data-team@example.com"])
//!     .on([NotifyEvent::JobFailed, NotifyEvent::ScheduleFailing]);
//! assert!(mail.wants(NotifyEvent::JobFailed));
//! assert!(!mail.wants(NotifyEvent::JobStale));
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The default time a notice command may run before its group is killed.
pub const DEFAULT_NOTIFY_TIMEOUT: Duration = Duration::from_secs(30);

/// What a notice is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyEvent {
    /// A job ended FAILED (its last attempt failed, no retry follows).
    JobFailed,
    /// A job went STALE (its worker died mid-step): an operator must decide.
    JobStale,
    /// A schedule's ticks started failing: its windows are not enqueued.
    ScheduleFailing,
}

impl NotifyEvent {
    /// Every event, in the order the docs list them.
    pub const ALL: [NotifyEvent; 3] = [
        NotifyEvent::JobFailed,
        NotifyEvent::JobStale,
        NotifyEvent::ScheduleFailing,
    ];

    /// The event's name (`job_failed`, `job_stale`, `schedule_failing`).
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::JobFailed => "job_failed",
            NotifyEvent::JobStale => "job_stale",
            NotifyEvent::ScheduleFailing => "schedule_failing",
        }
    }
}

impl std::str::FromStr for NotifyEvent {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        NotifyEvent::ALL
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| {
                format!("unknown event {s:?}: expected \"job_failed\", \"job_stale\" or \"schedule_failing\"")
            })
    }
}

/// The default attempts of a webhook POST (the first and two retries).
pub const DEFAULT_WEBHOOK_ATTEMPTS: u32 = 3;

/// A pipeline's notice hook: a command (argv, no shell unless it names one)
/// given each event as JSON on standard input, a webhook the same JSON is
/// POSTed to (the `webhook` feature), or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notify {
    pub(crate) argv: Vec<String>,
    pub(crate) webhook: Option<String>,
    pub(crate) attempts: u32,
    pub(crate) on: Vec<NotifyEvent>,
    pub(crate) timeout: Duration,
    pub(crate) current_dir: Option<std::path::PathBuf>,
}

impl Notify {
    /// Runs `argv` (the program, then its arguments) for every event.
    pub fn command<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Notify {
            argv: argv.into_iter().map(Into::into).collect(),
            webhook: None,
            attempts: DEFAULT_WEBHOOK_ATTEMPTS,
            on: NotifyEvent::ALL.to_vec(),
            timeout: DEFAULT_NOTIFY_TIMEOUT,
            current_dir: None,
        }
    }

    /// POSTs every event's JSON to `url` (`http://` or `https://`), each try
    /// bounded by the timeout, retried with a backoff (1 s, then 2 s, ...) up
    /// to the attempts (default 3) until it answers 2xx.
    #[cfg(feature = "webhook")]
    pub fn webhook(url: impl Into<String>) -> Self {
        let mut hook = Notify::command(Vec::<String>::new());
        hook.webhook = Some(url.into());
        hook
    }

    /// Also POSTs to `url` (a command and a webhook).
    #[cfg(feature = "webhook")]
    #[must_use]
    pub fn and_webhook(mut self, url: impl Into<String>) -> Self {
        self.webhook = Some(url.into());
        self
    }

    /// How many times a webhook POST is tried (at least once).
    #[must_use]
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts.max(1);
        self
    }

    /// The webhook's URL, if it has one.
    pub fn webhook_url(&self) -> Option<&str> {
        self.webhook.as_deref()
    }

    /// Only for `events` (default: all of them).
    #[must_use]
    pub fn on(mut self, events: impl IntoIterator<Item = NotifyEvent>) -> Self {
        self.on = events.into_iter().collect();
        self
    }

    /// How long the command may run before its process group is killed
    /// (default 30 s).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Runs the command in `dir` (default: the worker's working directory).
    #[must_use]
    pub fn current_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }

    /// Whether `event` is notified.
    pub fn wants(&self, event: NotifyEvent) -> bool {
        self.on.contains(&event)
    }

    /// The command.
    pub fn argv(&self) -> &[String] {
        &self.argv
    }
}
