//! The core of leasehold: job records in Redis, every state transition as an
//! atomic Lua script compared by lease token, per-resource locks, the recovery
//! sweeper's rules, retention, and the [`Queue`] client over all of it.
//!
//! ```no_run
//! use std::time::Duration;
//! use leasehold_core::{NewJob, Outcome, Queue, QueueConfig, Started};
//!
//! # async fn demo() -> Result<(), leasehold_core::Error> {
//! let queue = Queue::connect("redis://127.0.0.1:6379", "orders", QueueConfig::default()).await?;
//! queue
//!     .enqueue(NewJob::new("sync", &serde_json::json!({"shop": "a"}))?.resource("shop:a"))
//!     .await?;
//! let leased = queue.lease("worker-1", &["sync"], 10, Duration::from_secs(30)).await?;
//! for lease in &leased.leases {
//!     if queue.start(lease, "fetch").await? == Started::Running {
//!         queue.checkpoint(lease, "fetch", "{\"rows\":3}", None).await?;
//!         queue.finish(lease, &Outcome::Succeeded).await?;
//!     }
//! }
//! # Ok(())
//! # }
//! ```

pub mod config;
pub mod error;
pub mod id;
pub mod job_spec;
pub mod keys;
pub mod lease;
pub mod queue;
pub mod record;
mod reply;
mod scripts;
pub mod state;
pub mod transitions;

pub use config::{QueueConfig, Retention};
pub use error::{Error, Result};
pub use id::JobId;
pub use job_spec::NewJob;
pub use keys::QueueKeys;
pub use lease::{
    Cancelled, Finished, Lease, Leased, Outcome, Renewal, RetryMode, Started, SweepReport,
    SweptJob,
};
pub use queue::{connect_pool, Enqueued, Queue};
pub use record::{
    AttemptError, AttemptRecord, CancelRequest, Job, LeaseInfo, Millis, Resolution, StaleLock,
    StepDone,
};
pub use state::JobState;
pub use transitions::{Op, Transition, TRANSITIONS};

/// The `redis` crate leasehold uses (re-exported from `deadpool-redis`).
pub use deadpool_redis::redis;
