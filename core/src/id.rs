//! Job identifiers.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// A job id: a UUIDv7 in its text form, so ids sort by creation time.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(String);

impl JobId {
    /// A new, time-sortable id.
    pub fn new() -> Self {
        JobId(uuid::Uuid::now_v7().to_string())
    }

    /// Checks that `s` can be an id: 1 to 128 characters, none of them braces, whitespace or control.
    pub fn parse(s: &str) -> Result<Self, Error> {
        if s.is_empty()
            || s.len() > 128
            || s.chars()
                .any(|c| c == '{' || c == '}' || c.is_whitespace() || c.is_control())
        {
            return Err(Error::InvalidArgument(format!("not a job id: {s:?}")));
        }
        Ok(JobId(s.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for JobId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for JobId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}
