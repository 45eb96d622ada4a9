//! What every handler shares: the [`App`] (the Redis client and settings,
//! the discovered queues, the token, the sessions, the accepted hosts).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold_core::{Queue, QueueConfig};
use tokio::sync::Mutex;

use super::session::{Sessions, Token};
use crate::context::Unreachable;

/// How long the list of discovered queues is reused.
pub(super) const QUEUE_CACHE: Duration = Duration::from_secs(10);

/// A discovery: when, the queues found, and one entry per cluster master
/// that did not answer.
pub(crate) type Discovered = (Instant, Vec<String>, Vec<Unreachable>);

/// What every handler shares.
pub(crate) struct App {
    /// A client whose pool every queue client shares.
    pub base: Queue,
    /// Queue settings (prefix, timeouts).
    pub config: QueueConfig,
    /// The Redis URL for messages (password redacted).
    pub shown_url: String,
    /// `--queue`, if given.
    pub pinned: Vec<String>,
    /// Discovered queues and when, with an entry per cluster master that did
    /// not answer (its queues are not listed).
    pub discovered: Mutex<Option<Discovered>>,
    /// The action token, if configured.
    pub token: Option<Token>,
    /// Serialises scrapes (each reads every queue's status).
    pub scrape: Mutex<()>,
    /// The logged-in operators.
    pub sessions: Sessions,
    /// Accepted `Host` names; `None`: any.
    pub hosts: Option<BTreeSet<String>>,
}

/// The state every handler gets.
pub(crate) type Shared = Arc<App>;
