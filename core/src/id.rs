//! Job identifiers.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::name::is_forbidden_char;

/// The longest job id, in bytes of UTF-8.
pub const MAX_ID_BYTES: usize = 128;

/// A job id: a UUIDv7 in its text form, so ids sort by creation time. Every
/// way to build one checks it ([`JobId::parse`], deserialisation too).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct JobId(String);

impl JobId {
    /// A new, time-sortable id.
    pub fn new() -> Self {
        JobId(uuid::Uuid::now_v7().to_string())
    }

    /// Checks that `s` can be an id: 1 to [`MAX_ID_BYTES`] bytes, none of them
    /// braces, whitespace, control or format characters.
    pub fn parse(s: &str) -> Result<Self, Error> {
        Self::check(s)?;
        Ok(JobId(s.to_owned()))
    }

    fn check(s: &str) -> Result<(), Error> {
        if s.is_empty() || s.len() > MAX_ID_BYTES || s.chars().any(is_forbidden_char) {
            let shown: String = s.chars().take(64).collect();
            return Err(Error::InvalidArgument(format!(
                "not a job id: {shown:?}{} (1 to {MAX_ID_BYTES} bytes, no braces, whitespace, control or format characters)",
                if shown.len() < s.len() { "…" } else { "" }
            )));
        }
        Ok(())
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

impl TryFrom<String> for JobId {
    type Error = Error;

    fn try_from(s: String) -> Result<Self, Error> {
        Self::check(&s)?;
        Ok(JobId(s))
    }
}

impl From<JobId> for String {
    fn from(id: JobId) -> String {
        id.0
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deserialising_checks_like_parse() {
        for bad in [
            "{",
            "x}:job:y",
            "a b",
            "a\nb",
            "a\u{0}b",
            "",
            "a\u{200B}b",
            "a\u{202E}b",
        ] {
            let json = serde_json::to_string(bad).unwrap_or_default();
            assert!(
                serde_json::from_str::<JobId>(&json).is_err(),
                "{bad:?} deserialised"
            );
            assert!(JobId::parse(bad).is_err(), "{bad:?} parsed");
        }
        let long = "x".repeat(10_000);
        assert!(serde_json::from_str::<JobId>(&format!("\"{long}\"")).is_err());
        let id = JobId::new();
        let back: JobId = serde_json::from_str(&serde_json::to_string(&id).unwrap_or_default())
            .expect("a real id round-trips");
        assert_eq!(back, id);
    }
}
