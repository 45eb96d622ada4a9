//! Shared by the `leasehold` binary's integration tests: the command builder
//! and what a run did ([`binary`]), populating a queue through the `Queue`
//! client ([`jobs`]), the populated queue the `cli_*` tests read
//! ([`scene`]), a running dashboard with an HTTP client for it
//! ([`dashboard`]), and a TLS certificate fixture ([`tls`]).
//!
//! Each test file includes it with `mod support;` and uses what it needs, so
//! some items are unused in any one file.

#![allow(dead_code)]

pub(crate) mod binary;
pub(crate) mod dashboard;
pub(crate) mod jobs;
pub(crate) mod scene;
pub(crate) mod tls;
