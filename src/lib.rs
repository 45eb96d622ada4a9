//! leasehold: operable long-running data jobs on Redis.
//!
//! A job is a pipeline of async steps over a fixed input boundary. Workers
//! lease jobs from Redis, run their steps, checkpoint each step's output, renew
//! their leases with a heartbeat, honour cancel requests, and record every
//! attempt; every state change is an atomic Lua script compared by lease token
//! (see the state model in the README and `docs/redis-keys.md`).
//!
//! This crate re-exports [`leasehold_core`] (the [`Queue`] and [`Client`]
//! clients, the [`Worker`] runtime, the records) and the
//! [`pipeline`](macro@pipeline) attribute macro, which turns an impl block of
//! async methods into a [`Pipeline`].
//!
//! ```
//! use std::time::Duration;
//! use leasehold::{pipeline, Client, JobState, QueueConfig, StepContext, StepError, Worker};
//! use serde::{Deserialize, Serialize};
//!
//! /// The fixed input boundary of one job.
//! #[derive(Serialize, Deserialize)]
//! struct Window { shop_id: String, hour: u32 }
//!
//! struct HourlySales;
//!
//! #[pipeline(resource = "shop:{shop_id}", input_key = "sales:{shop_id}:{hour}", max_attempts = 3)]
//! impl HourlySales {
//!     #[step(timeout = "30s")]
//!     async fn fetch(&self, _ctx: &StepContext, input: &Window) -> Result<Vec<i64>, StepError> {
//!         Ok(vec![1200, 350, i64::from(input.hour)])
//!     }
//!
//!     #[step]
//!     async fn aggregate(&self, ctx: &StepContext, orders: Vec<i64>) -> Result<i64, StepError> {
//!         ctx.check_cancelled()?; // a cheap phase-B check between units of work
//!         Ok(orders.iter().sum())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let redis = leasehold_testkit::RedisServer::start();
//! # let url = redis.url();
//! // `url` names a Redis you may write to, e.g. "redis://127.0.0.1:6379"
//! let client = Client::connect(&url, QueueConfig::default()).await?;
//! let job = client.enqueue::<HourlySales>(&Window { shop_id: "a".into(), hour: 7 }).await?;
//!
//! let worker = Worker::builder(url.as_str()).pipeline(HourlySales).concurrency(4).build().await?;
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let running = tokio::spawn(worker.run_until(async { let _ = stopped.await; }));
//!
//! let queue = client.queue_for::<HourlySales>()?;
//! let done = loop {
//!     match queue.job(&job.id).await? {
//!         Some(j) if j.state.is_terminal() => break j,
//!         _ => tokio::time::sleep(Duration::from_millis(10)).await,
//!     }
//! };
//! assert_eq!(done.state, JobState::Succeeded);
//! assert_eq!(done.outputs["aggregate"], serde_json::json!(1557));
//! let _ = stop.send(());
//! running.await??;
//! # Ok(())
//! # }
//! ```

pub use leasehold_core::*;

pub use leasehold_macros::pipeline;
