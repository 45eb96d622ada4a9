//! leasehold: operable long-running data jobs on Redis.
//!
//! Re-exports [`leasehold_core`] and the [`pipeline`](macro@pipeline) attribute macro, which
//! turns an impl block of async methods into a [`Pipeline`].

pub use leasehold_core::*;

pub use leasehold_macros::pipeline;
