//! The error a step returns: retryable or permanent, with a kind and a message.

use std::fmt;

/// A step's failure.
///
/// Like `anyhow::Error`, it is the catch-all error of a step: any
/// `std::error::Error` converts into it (retryable) with `?`. For that reason
/// it does not implement `std::error::Error` itself (the conversion would
/// overlap the standard `From<T> for T`); where one is needed, convert it:
/// `Box<dyn std::error::Error + Send + Sync>` implements `From<StepError>`,
/// so `?` works in a function returning such a box.
///
/// ```
/// use leasehold_core::StepError;
///
/// fn parse(text: &str) -> Result<u32, StepError> {
///     Ok(text.parse::<u32>()?) // a ParseIntError becomes a retryable StepError
/// }
///
/// fn caller() -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
///     Ok(parse("12")?) // and a StepError becomes a boxed std error
/// }
/// assert_eq!(caller().unwrap(), 12);
/// assert!(parse("x").unwrap_err().retryable);
/// let boxed: Box<dyn std::error::Error + Send + Sync> = StepError::permanent("bad row").into();
/// assert_eq!(boxed.to_string(), "bad row (permanent, error)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StepError {
    /// A short machine-readable kind (`error`, `timeout`, `panic`, `cancelled`, `output`, ...).
    pub kind: String,
    /// What went wrong.
    pub message: String,
    /// Whether a new attempt may succeed.
    pub retryable: bool,
}

impl StepError {
    /// A failure a retry may fix (network, timeouts, overloaded sinks).
    pub fn retryable(message: impl fmt::Display) -> Self {
        StepError {
            kind: "error".into(),
            message: message.to_string(),
            retryable: true,
        }
    }

    /// A failure no retry can fix (bad input, a violated invariant).
    pub fn permanent(message: impl fmt::Display) -> Self {
        StepError {
            kind: "error".into(),
            message: message.to_string(),
            retryable: false,
        }
    }

    /// Sets the kind.
    #[must_use]
    pub fn with_kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = kind.into();
        self
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let class = if self.retryable {
            "retryable"
        } else {
            "permanent"
        };
        write!(f, "{} ({class}, {})", self.message, self.kind)
    }
}

/// A [`StepError`] as a `std::error::Error` (see [`StepError`] for why it is
/// not one itself).
#[derive(Debug)]
struct StepFailure(StepError);

impl fmt::Display for StepFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for StepFailure {}

impl From<StepError> for Box<dyn std::error::Error + Send + Sync + 'static> {
    fn from(e: StepError) -> Self {
        Box::new(StepFailure(e))
    }
}

impl From<StepError> for Box<dyn std::error::Error + 'static> {
    fn from(e: StepError) -> Self {
        Box::new(StepFailure(e))
    }
}

/// Any error converts into a retryable [`StepError`]; use
/// [`StepError::permanent`] for failures a retry cannot fix.
impl<E: std::error::Error + Send + Sync + 'static> From<E> for StepError {
    fn from(e: E) -> Self {
        StepError::retryable(e)
    }
}

/// The error of a step asked for by an index past the last step (the code
/// `#[pipeline]` generates and a declared pipeline answer it alike).
#[doc(hidden)]
pub fn no_such_step(pipeline: &str, index: usize, steps: usize) -> StepError {
    StepError::permanent(format!(
        "pipeline {pipeline} has {steps} steps; there is no step number {index}"
    ))
    .with_kind("step")
}
