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

/// A window's JSON Schema, for inputs that carry one (`#[derive(JsonSchema)]`
/// on a scheduled pipeline's input): two RFC 3339 instants.
impl schemars::JsonSchema for Window {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Window".into()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        "leasehold::schedule::Window".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "description": "The window a schedule tick covers: [start, end), UTC instants.",
            "properties": {
                "start": { "type": "string", "format": "date-time" },
                "end": { "type": "string", "format": "date-time" }
            },
            "required": ["start", "end"]
        })
    }
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
