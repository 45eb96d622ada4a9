//! How a program's exit code maps to a step's outcome, and which setting
//! decided it (the verdict names it).
//!
//! The defaults follow what scripts mean: 0 is success, 75 (`EX_TEMPFAIL`) is
//! retryable, the sysexits for a usage, data, input or configuration error
//! (64, 65, 66, 78) are permanent, and every other non-zero exit (a Python
//! exception, a `set -e` script: exit 1) is retryable within the attempts
//! allowed.

use std::fmt;

/// The exit code of a retryable failure (`EX_TEMPFAIL`).
pub const EXIT_RETRYABLE: i32 = 75;
/// The conventional exit code of a permanent failure (`EX_DATAERR`).
pub const EXIT_PERMANENT: i32 = 65;
/// The exit codes permanent by default: `EX_USAGE` (64), `EX_DATAERR` (65),
/// `EX_NOINPUT` (66) and `EX_CONFIG` (78).
pub const DEFAULT_PERMANENT: [i32; 4] = [64, 65, 66, 78];

/// How a process step's exit codes map to outcomes (0 is always success).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExitCodes {
    /// Codes meaning "a new attempt may succeed" (default: 75).
    pub retryable: Vec<i32>,
    /// Codes meaning "no retry can fix this" (default: 64, 65, 66, 78).
    pub permanent: Vec<i32>,
    /// Whether any other non-zero code is retryable (default: retryable).
    pub others_retryable: bool,
}

impl Default for ExitCodes {
    fn default() -> Self {
        ExitCodes {
            retryable: vec![EXIT_RETRYABLE],
            permanent: DEFAULT_PERMANENT.to_vec(),
            others_retryable: true,
        }
    }
}

/// Which setting decided the outcome of a non-zero exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitRule {
    /// The code is in `retryable_exit_codes`.
    RetryableList,
    /// The code is in `permanent_exit_codes`.
    PermanentList,
    /// The code is in neither list: `other_exits` decided.
    Others,
}

/// The outcome of a non-zero exit: retryable or not, and the setting that said so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitVerdict {
    /// Whether a new attempt may succeed.
    pub retryable: bool,
    /// The setting that decided.
    pub rule: ExitRule,
}

impl fmt::Display for ExitVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outcome = if self.retryable {
            "retryable"
        } else {
            "permanent"
        };
        match self.rule {
            ExitRule::RetryableList => write!(f, "{outcome}: listed in retryable_exit_codes"),
            ExitRule::PermanentList => write!(f, "{outcome}: listed in permanent_exit_codes"),
            ExitRule::Others => write!(f, "{outcome}: other_exits = \"{outcome}\""),
        }
    }
}

/// A mistake in a step's exit-code lists.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExitCodesError {
    /// A code outside 1–255 (0 is success and belongs to no list).
    #[error("{list} holds {code}: an exit code in a list must be 1-255 (0 is always success)")]
    OutOfRange {
        /// The list's setting name.
        list: &'static str,
        /// The code.
        code: i32,
    },
    /// A code in both lists.
    #[error("exit code {code} is in both retryable_exit_codes and permanent_exit_codes")]
    InBoth {
        /// The code.
        code: i32,
    },
}

impl ExitCodes {
    /// Sets the retryable codes.
    #[must_use]
    pub fn retryable(mut self, codes: impl IntoIterator<Item = i32>) -> Self {
        self.retryable = codes.into_iter().collect();
        self
    }
    /// Sets the permanent codes.
    #[must_use]
    pub fn permanent(mut self, codes: impl IntoIterator<Item = i32>) -> Self {
        self.permanent = codes.into_iter().collect();
        self
    }
    /// Sets whether codes in neither list are retryable.
    #[must_use]
    pub fn others_retryable(mut self, retryable: bool) -> Self {
        self.others_retryable = retryable;
        self
    }
    /// Whether a failure with non-zero `code` is retryable.
    pub fn is_retryable(&self, code: i32) -> bool {
        self.verdict(code).retryable
    }
    /// The outcome of a failure with non-zero `code`, and the setting that decided it.
    pub fn verdict(&self, code: i32) -> ExitVerdict {
        let (retryable, rule) = if self.retryable.contains(&code) {
            (true, ExitRule::RetryableList)
        } else if self.permanent.contains(&code) {
            (false, ExitRule::PermanentList)
        } else {
            (self.others_retryable, ExitRule::Others)
        };
        ExitVerdict { retryable, rule }
    }
    /// Every mistake in the lists: codes outside 1–255, codes in both lists.
    pub fn check(&self) -> Vec<ExitCodesError> {
        let mut errors = Vec::new();
        for (list, codes) in [
            ("retryable_exit_codes", &self.retryable),
            ("permanent_exit_codes", &self.permanent),
        ] {
            for &code in codes {
                if !(1..=255).contains(&code) {
                    errors.push(ExitCodesError::OutOfRange { list, code });
                }
            }
        }
        for &code in &self.retryable {
            if self.permanent.contains(&code) && !errors.contains(&ExitCodesError::InBoth { code })
            {
                errors.push(ExitCodesError::InBoth { code });
            }
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_what_scripts_mean() {
        let codes = ExitCodes::default();
        assert!(codes.is_retryable(1), "exit 1 is an ordinary failure");
        assert!(codes.is_retryable(2));
        assert!(codes.is_retryable(75));
        assert!(codes.is_retryable(137));
        for code in [64, 65, 66, 78] {
            assert!(!codes.is_retryable(code), "{code} is permanent");
        }
        assert_eq!(
            codes.verdict(1).to_string(),
            "retryable: other_exits = \"retryable\""
        );
        assert_eq!(
            codes.verdict(65).to_string(),
            "permanent: listed in permanent_exit_codes"
        );
        assert!(codes.check().is_empty());
    }

    #[test]
    fn a_step_names_its_own_lists() {
        let codes = ExitCodes::default()
            .retryable([3])
            .permanent([1])
            .others_retryable(false);
        assert!(codes.is_retryable(3));
        assert!(!codes.is_retryable(1));
        assert!(!codes.is_retryable(75), "75 is no longer listed");
        assert_eq!(
            codes.verdict(9).to_string(),
            "permanent: other_exits = \"permanent\""
        );
    }

    #[test]
    fn check_finds_every_mistake() {
        let codes = ExitCodes::default()
            .retryable([0, 65, 300, 65])
            .permanent([65, -1]);
        let errors = codes.check();
        assert_eq!(
            errors,
            vec![
                ExitCodesError::OutOfRange {
                    list: "retryable_exit_codes",
                    code: 0
                },
                ExitCodesError::OutOfRange {
                    list: "retryable_exit_codes",
                    code: 300
                },
                ExitCodesError::OutOfRange {
                    list: "permanent_exit_codes",
                    code: -1
                },
                ExitCodesError::InBoth { code: 65 },
            ]
        );
    }
}
