//! Shared by the root crate's integration tests that drive the `Queue` client
//! against a private `redis-server`. The helpers are core's own
//! (`core/tests/support/server.rs`: reading Redis directly, connecting,
//! enqueueing and leasing one job, forcing a lease expired, polling), included
//! here rather than copied, since the facade's `Queue` is core's.
//!
//! Each test file includes it with `mod support;` and uses what it needs, so
//! some items are unused in any one file.

#![allow(dead_code)]

#[path = "../../core/tests/support/server.rs"]
mod server;

pub(crate) use server::*;
