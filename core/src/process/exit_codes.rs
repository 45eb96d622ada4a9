//! How a program's exit code maps to a step's outcome.

/// The exit code of a retryable failure (`EX_TEMPFAIL`).
pub const EXIT_RETRYABLE: i32 = 75;
/// The conventional exit code of a permanent failure (`EX_DATAERR`); by
/// default every non-zero code but [`EXIT_RETRYABLE`] is permanent.
pub const EXIT_PERMANENT: i32 = 65;

/// How a process step's exit codes map to outcomes (0 is always success).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExitCodes {
    /// Codes meaning "a new attempt may succeed" (default: 75).
    pub retryable: Vec<i32>,
    /// Codes meaning "no retry can fix this" (default: 65).
    pub permanent: Vec<i32>,
    /// Whether any other non-zero code is retryable (default: permanent).
    pub others_retryable: bool,
}

impl Default for ExitCodes {
    fn default() -> Self {
        ExitCodes {
            retryable: vec![EXIT_RETRYABLE],
            permanent: vec![EXIT_PERMANENT],
            others_retryable: false,
        }
    }
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
        if self.retryable.contains(&code) {
            true
        } else if self.permanent.contains(&code) {
            false
        } else {
            self.others_retryable
        }
    }
}
