//! leasehold: operable long-running data jobs on Redis.
//!
//! Re-exports [`leasehold_core`]; the `#[pipeline]` macro and the worker runtime
//! arrive in the next milestone.

pub use leasehold_core::*;
