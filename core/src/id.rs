//! Job identifiers.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::name::is_forbidden_char;

/// The longest job id, in bytes of UTF-8.
pub const MAX_ID_BYTES: usize = 128;

/// A job id. A new one is the 128 bits of a UUIDv7 written as 22 characters
/// of base62 (`0-9A-Za-z`, most significant first, zero-padded), so new ids
/// sort by creation time as text, as the UUIDv7 text form (36 characters, the
/// form of ids created before) did; ids of either form, and any id a caller
/// chose, parse alike. Every way to build one checks it ([`JobId::parse`],
/// deserialisation too).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct JobId(String);

impl JobId {
    /// A new, time-sortable id (22 characters of base62).
    pub fn new() -> Self {
        JobId(base62_22(uuid::Uuid::now_v7().as_u128()))
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

/// The digits of base62 in ASCII order, so that fixed-width texts sort as their numbers.
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Length of a 128-bit number in base62 (62^22 > 2^128).
const BASE62_LEN: usize = 22;

/// `n` as [`BASE62_LEN`] base62 digits, most significant first, zero-padded.
fn base62_22(mut n: u128) -> String {
    let mut digits = [b'0'; BASE62_LEN];
    for d in digits.iter_mut().rev() {
        *d = BASE62[(n % 62) as usize];
        n /= 62;
    }
    digits.iter().map(|&b| b as char).collect()
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

    #[test]
    fn new_ids_are_22_base62_characters_in_creation_order() {
        assert_eq!(base62_22(0), "0000000000000000000000");
        assert_eq!(base62_22(61), "000000000000000000000z");
        assert_eq!(base62_22(62), "0000000000000000000010");
        assert_eq!(base62_22(u128::MAX), "7n42DGM5Tflk9n8mt7Fhc7");
        // text order is number order
        let mut nums = [
            0u128,
            1,
            61,
            62,
            3843,
            1 << 64,
            u128::MAX / 3,
            u128::MAX - 1,
            u128::MAX,
        ];
        nums.sort_unstable();
        let texts: Vec<String> = nums.iter().map(|&n| base62_22(n)).collect();
        let mut sorted = texts.clone();
        sorted.sort();
        assert_eq!(texts, sorted);
        let ids: Vec<JobId> = (0..200).map(|_| JobId::new()).collect();
        for pair in ids.windows(2) {
            assert_eq!(pair[0].as_str().len(), 22);
            assert!(pair[0] < pair[1], "{} then {}", pair[0], pair[1]);
        }
        // the form of ids created before still parses
        assert!(JobId::parse("019ad7a1-53c2-7b3e-9f0a-2c4d5e6f7a8b").is_ok());
    }
}
