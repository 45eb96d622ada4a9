//! Queue configuration: key prefix, retention, event stream length, timeouts.

use std::time::Duration;

/// How many terminal jobs a queue keeps, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retention {
    /// Keep at most this many terminal jobs (0: no count limit).
    pub keep_count: u64,
    /// Delete terminal jobs older than this (zero: no age limit).
    pub keep_age: Duration,
}

impl Retention {
    /// Keep at most `keep_count` terminal jobs (0: no count limit), none older
    /// than `keep_age` (zero: no age limit).
    #[must_use]
    pub const fn new(keep_count: u64, keep_age: Duration) -> Self {
        Retention {
            keep_count,
            keep_age,
        }
    }
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            keep_count: 100_000,
            keep_age: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

/// Settings of a [`crate::Queue`] client: the defaults, changed with the
/// setters.
///
/// ```
/// use std::time::Duration;
/// use leasehold_core::{QueueConfig, Retention};
///
/// let config = QueueConfig::default()
///     .prefix("staging")
///     .retention(Retention::new(10_000, Duration::from_secs(86_400)))
///     .response_timeout(Duration::from_secs(2));
/// assert_eq!(config.prefix, "staging");
/// assert_eq!(config.retention.keep_count, 10_000);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct QueueConfig {
    /// First part of every key (default `leasehold`).
    pub prefix: String,
    /// Retention of terminal jobs.
    pub retention: Retention,
    /// Approximate maximum length of the queue's event stream (default 10,000).
    pub events_max_len: u64,
    /// How long to wait for a connection to Redis.
    pub connect_timeout: Duration,
    /// How long to wait for a reply from Redis.
    pub response_timeout: Duration,
    /// Maximum number of pooled connections.
    pub pool_size: usize,
    /// How long the outcome of an input key's latest job is remembered after
    /// the job ended (default 30 days; zero: never forgotten): within it, enqueueing a key whose latest job SUCCEEDED
    /// returns that job instead of creating one (see [`crate::NewJob::rerun`]),
    /// even after retention deleted the job. About 270 bytes of Redis memory
    /// per input key remembered (measured with 30-byte keys: one field of the
    /// `outcomes` hash and one member of the `outcomes:at` zset).
    pub input_window: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            prefix: "leasehold".to_owned(),
            retention: Retention::default(),
            events_max_len: 10_000,
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(10),
            pool_size: 16,
            input_window: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

impl QueueConfig {
    /// Sets the first part of every key.
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets the retention of terminal jobs.
    #[must_use]
    pub fn retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// Sets the approximate maximum length of the event stream.
    #[must_use]
    pub fn events_max_len(mut self, events_max_len: u64) -> Self {
        self.events_max_len = events_max_len;
        self
    }

    /// Sets how long to wait for a connection to Redis.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets how long to wait for a reply from Redis.
    #[must_use]
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Sets the maximum number of pooled connections.
    #[must_use]
    pub fn pool_size(mut self, pool_size: usize) -> Self {
        self.pool_size = pool_size;
        self
    }

    /// Sets how long an input key's latest outcome is remembered.
    #[must_use]
    pub fn input_window(mut self, window: Duration) -> Self {
        self.input_window = window;
        self
    }
}
