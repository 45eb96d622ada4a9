//! Durations, parsed by one function for every place that reads one: the
//! `#[pipeline]` attribute (`timeout = "30s"`), the `leasehold` command line
//! (`--delay 5m`, `--keep-age 7d`) and the library ([`parse_duration`],
//! re-exported by `leasehold`).
//!
//! The grammar is jiff's "friendly" format and ISO 8601 durations: `250ms`,
//! `30s`, `5m`, `1h30m`, `2d`, `1 day 2 hours`, `1.5s`, `PT5M`. A day is 24
//! hours and a week 7 days; months and years are refused (their length
//! depends on the calendar), as are negative durations and any precision
//! finer than a millisecond (leasehold keeps times in milliseconds).
//!
//! ```
//! use std::time::Duration;
//! use leasehold_syntax::parse_duration;
//!
//! assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
//! assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
//! assert!(parse_duration("1mo").is_err());
//! ```

use std::fmt;
use std::str::FromStr as _;
use std::time::Duration;

use jiff::{Span, SpanRelativeTo};

/// Why a string is not a duration.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DurationError {
    /// The string is empty (or only blanks).
    Empty,
    /// The string is not written in the grammar (jiff's explanation).
    Syntax(String),
    /// Months or years: their length depends on the calendar.
    CalendarUnit,
    /// A negative duration.
    Negative,
    /// Finer than a millisecond (such as `250us`).
    SubMillisecond,
    /// Longer than leasehold can hold.
    TooLarge,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const HOW: &str =
            "write a number and a unit, like \"250ms\", \"30s\", \"5m\", \"1h30m\" or \"2d\"";
        match self {
            DurationError::Empty => write!(f, "it is empty; {HOW}"),
            DurationError::Syntax(why) => write!(f, "{why}; {HOW}"),
            DurationError::CalendarUnit => write!(
                f,
                "months and years have no fixed length; use days, like \"30d\""
            ),
            DurationError::Negative => write!(f, "it must not be negative"),
            DurationError::SubMillisecond => write!(
                f,
                "it is finer than a millisecond; leasehold keeps whole milliseconds"
            ),
            DurationError::TooLarge => write!(f, "it is too large"),
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses a duration: `"250ms"`, `"30s"`, `"1h30m"`, `"2d"`, `"PT5M"` (see
/// the crate docs for the grammar). Surrounding blanks are ignored.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    let span = Span::from_str(text).map_err(|e| DurationError::Syntax(e.to_string()))?;
    if span.get_years() != 0 || span.get_months() != 0 {
        return Err(DurationError::CalendarUnit);
    }
    if span.is_negative() {
        return Err(DurationError::Negative);
    }
    let signed = span
        .to_duration(SpanRelativeTo::days_are_24_hours())
        .map_err(|_| DurationError::TooLarge)?;
    let duration = Duration::try_from(signed).map_err(|_| DurationError::Negative)?;
    if duration.subsec_nanos() % 1_000_000 != 0 {
        return Err(DurationError::SubMillisecond);
    }
    if u64::try_from(duration.as_millis()).is_err() {
        return Err(DurationError::TooLarge);
    }
    Ok(duration)
}

/// A duration that may be negative, in signed milliseconds (`"-1h"` is
/// -3,600,000; `"15m"` and `"+15m"` are 900,000): a schedule's window offset.
pub fn parse_offset_ms(text: &str) -> Result<i64, DurationError> {
    let text = text.trim();
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let ms =
        i64::try_from(parse_duration(rest)?.as_millis()).map_err(|_| DurationError::TooLarge)?;
    Ok(if negative { -ms } else { ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted() {
        let ms = Duration::from_millis;
        for (text, want) in [
            ("250ms", ms(250)),
            ("30s", ms(30_000)),
            ("5m", ms(300_000)),
            ("1h", ms(3_600_000)),
            ("1m30s", ms(90_000)),
            ("1h30m", ms(5_400_000)),
            ("0s", Duration::ZERO),
            ("1d", ms(86_400_000)),
            ("7d", ms(7 * 86_400_000)),
            ("1w", ms(7 * 86_400_000)),
            ("1.5s", ms(1_500)),
            ("30 seconds", ms(30_000)),
            ("PT5M", ms(300_000)),
            (" 5m ", ms(300_000)),
        ] {
            assert_eq!(parse_duration(text), Ok(want), "{text:?}");
        }
    }

    #[test]
    fn refused() {
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert_eq!(parse_duration("1mo"), Err(DurationError::CalendarUnit));
        assert_eq!(parse_duration("1y"), Err(DurationError::CalendarUnit));
        assert_eq!(parse_duration("-5m"), Err(DurationError::Negative));
        assert_eq!(parse_duration("250us"), Err(DurationError::SubMillisecond));
        for bad in [
            "s",
            "30",
            "soon",
            "1.5.5s",
            "99999999999999999999h",
            "5 parsecs",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn offsets_take_a_sign() {
        assert_eq!(parse_offset_ms("-1h"), Ok(-3_600_000));
        assert_eq!(parse_offset_ms("+15m"), Ok(900_000));
        assert_eq!(parse_offset_ms(" 90s "), Ok(90_000));
        assert_eq!(parse_offset_ms("-0s"), Ok(0));
        assert!(parse_offset_ms("--1h").is_err());
        assert!(parse_offset_ms("-").is_err());
    }
}
