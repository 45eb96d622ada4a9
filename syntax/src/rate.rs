//! Start rates: `"<n>/s"`, `"<n>/m"` or `"<n>/h"` (`"10/s"`), the `rate` of a
//! pipeline's flow control.
//!
//! ```
//! use leasehold_syntax::Rate;
//!
//! let rate: Rate = "10/s".parse().unwrap();
//! assert_eq!((rate.count, rate.per_ms, rate.period_ms()), (10, 1_000, 100));
//! assert!("0/s".parse::<Rate>().is_err());
//! ```

use std::fmt;
use std::str::FromStr;

/// A start rate: `count` per `per_ms` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Starts allowed per period.
    pub count: u32,
    /// The period, in ms (1,000, 60,000 or 3,600,000).
    pub per_ms: u64,
}

impl Rate {
    /// The time between two starts, in ms, rounded up (the rate enforced is
    /// never above the one declared).
    pub fn period_ms(&self) -> u64 {
        self.per_ms.div_ceil(u64::from(self.count.max(1))).max(1)
    }
}

/// Why a string is not a rate: the text and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateError {
    /// The text as given.
    pub text: String,
    /// What is wrong with it.
    pub why: &'static str,
}

impl fmt::Display for RateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rate {:?}: {} (write \"<n>/s\", \"<n>/m\" or \"<n>/h\", like \"10/s\")",
            self.text, self.why
        )
    }
}

impl std::error::Error for RateError {}

impl FromStr for Rate {
    type Err = RateError;

    fn from_str(s: &str) -> Result<Self, RateError> {
        let bad = |why| RateError {
            text: s.to_owned(),
            why,
        };
        let (count, unit) = s
            .split_once('/')
            .ok_or_else(|| bad("no `/` between the count and the unit"))?;
        let count: u32 = count
            .trim()
            .parse()
            .map_err(|_| bad("the count is not a whole number"))?;
        if count == 0 {
            return Err(bad("the count must be at least 1"));
        }
        let per_ms = match unit.trim() {
            "s" | "sec" | "second" => 1_000,
            "m" | "min" | "minute" => 60_000,
            "h" | "hour" => 3_600_000,
            _ => return Err(bad("unknown unit")),
        };
        if u64::from(count) > per_ms {
            return Err(bad("more than one start per millisecond"));
        }
        Ok(Rate { count, per_ms })
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.per_ms {
            1_000 => "s",
            60_000 => "m",
            _ => "h",
        };
        write!(f, "{}/{unit}", self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_round_their_period_up() {
        let r: Rate = "3/s".parse().unwrap();
        assert_eq!(r.period_ms(), 334);
        assert_eq!("60/m".parse::<Rate>().unwrap().period_ms(), 1_000);
        assert_eq!("1/h".parse::<Rate>().unwrap().period_ms(), 3_600_000);
        assert_eq!(" 5 / minute ".parse::<Rate>().unwrap().to_string(), "5/m");
        for bad in [
            "10",
            "0/s",
            "x/s",
            "10/d",
            "2000/s",
            "-1/s",
            "99999999999/h",
        ] {
            assert!(bad.parse::<Rate>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_error_says_what_to_write() {
        let e = "10/d".parse::<Rate>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "rate \"10/d\": unknown unit (write \"<n>/s\", \"<n>/m\" or \"<n>/h\", like \"10/s\")"
        );
    }
}
