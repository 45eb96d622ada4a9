//! Private `redis-server` processes for leasehold's tests.
//!
//! Every test of the project talks to its **own** `redis-server`, spawned by
//! this kit in a fresh temporary directory, never to a Redis that happens to be
//! running on the machine (one may well be listening on 6379: it is ignored).
//!
//! ```no_run
//! use leasehold_testkit::RedisServer;
//!
//! let srv = RedisServer::start(); // unix socket, no TCP, no persistence
//! srv.cmd(&["SET", "k", "v"]);
//! let before = srv.dump("*");
//! // ... run an operation that must be refused ...
//! assert_eq!(before, srv.dump("*"), "a refused operation changed nothing");
//! ```
//!
//! # Process hygiene
//!
//! * [`RedisServer`]'s `Drop` SIGKILLs and reaps the server, then removes its
//!   temporary directory (socket, log).
//! * On Linux the server is additionally spawned with
//!   `PR_SET_PDEATHSIG = SIGKILL`, so a test process that is itself killed
//!   (SIGKILL, abort, timeout) does not leak `redis-server` processes.
//!   The kernel sends that signal when the *thread* that forked the child
//!   exits, not the process. To make this harmless the kit forks every server
//!   from one dedicated spawner thread that lives as long as the test process,
//!   so a [`RedisServer`] may be created on any thread (a tokio worker, a
//!   short-lived `std::thread`, ...) and moved freely between threads.
//!
//! # Finding the binary
//!
//! See [`redis_server_binary`]: `LEASEHOLD_REDIS_SERVER` overrides, otherwise
//! `redis-server` is looked up on `PATH`.
//!
//! # Layout
//!
//! * [`server`]: the [`RedisServer`] process: start, stop, restart, kill,
//!   connections and one-off commands;
//! * [`dump`]: [`RedisServer::dump`], the deterministic rendering of keys;
//! * [`proxy`]: [`TcpProxy`], a loopback proxy that can cut clients off;
//! * [`cluster`]: [`RedisCluster`], a private local Redis Cluster (masters,
//!   optionally replicas) with failover, slot migration and queue names per shard;
//! * [`wait`]: [`wait_until`] and [`wait_until_async`];
//! * [`freeze`]: SIGSTOP a child and wait until every thread of it stopped;
//! * [`binary`]: [`redis_server_binary`], where the `redis-server` comes from;
//! * `steps`: [`step_enum!`], the step enum of a hand-written test pipeline;
//! * `spawner` and `log` (private): the long-lived thread every server is
//!   forked from, and reading the tail of a server's log.

#![warn(missing_docs)]

pub mod binary;
pub mod cluster;
pub mod dump;
pub mod freeze;
mod log;
pub mod proxy;
pub mod server;
mod spawner;
mod steps;
pub mod wait;

pub use binary::redis_server_binary;
pub use cluster::RedisCluster;
pub use proxy::TcpProxy;
pub use server::RedisServer;
pub use wait::{wait_until, wait_until_async};
