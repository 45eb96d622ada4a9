//! A tick's fixed input window.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The window a tick covers: `[start, end)`, both UTC instants. A scheduled
/// pipeline's input carries it as its `window` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Window {
    /// The previous tick (inclusive).
    pub start: Timestamp,
    /// This tick (exclusive): when the window is due.
    pub end: Timestamp,
}

impl Window {
    /// The window's start in milliseconds since the Unix epoch.
    pub fn start_ms(&self) -> i64 {
        self.start.as_millisecond()
    }
    /// The window's end (its due time) in milliseconds since the Unix epoch.
    pub fn end_ms(&self) -> i64 {
        self.end.as_millisecond()
    }
}
