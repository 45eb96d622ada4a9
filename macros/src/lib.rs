//! The `#[pipeline]` attribute macro of leasehold (arrives with the runtime).
