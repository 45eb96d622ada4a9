//! The smallest useful pipeline: two steps, three jobs, one worker.
//!
//! Run: `cargo run --example quickstart` (starts a throwaway redis-server when
//! `REDIS_URL` is unset).

mod common;

use std::time::Duration;

use leasehold::prelude::*;
use serde::{Deserialize, Serialize};

/// The job input: the fixed input boundary of one job. `JsonSchema` (from
/// the prelude) publishes its schema with the pipeline, so `leasehold enqueue
/// greet --input '{"name":5}'` is refused before anything is written.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, InputFields)]
struct Greeting {
    name: String,
}

/// The pipeline; its fields would hold clients, pools, settings.
struct Greet;

#[pipeline(input_key = "greet:{name}", max_attempts = 3)]
impl Greet {
    /// First step: takes the input, returns an output persisted at its checkpoint.
    #[step(timeout = "5s")]
    async fn compose(&self, _ctx: &StepContext, input: &Greeting) -> Result<String, StepError> {
        Ok(format!("Hello, {}!", input.name))
    }

    /// Second step: takes the first step's output.
    #[step]
    async fn shout(&self, ctx: &StepContext, text: String) -> Result<String, StepError> {
        ctx.check_cancelled()?;
        Ok(text.to_uppercase())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let redis = common::ExampleRedis::from_env_or_spawn()?;
    let client = Client::connect(&redis.url, QueueConfig::default()).await?;

    let mut ids = Vec::new();
    for name in ["Ada", "Grace", "Edsger"] {
        let job = client
            .enqueue::<Greet>(&Greeting { name: name.into() })
            .await?;
        println!("enqueued job {} for {name}", job.id);
        ids.push(job.id);
    }

    let worker = Worker::builder(redis.url.clone())
        .pipeline(Greet)
        .concurrency(2)
        .build()
        .await?;
    println!("worker {} started", worker.id());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));

    let queue = client.queue_for::<Greet>()?;
    for id in &ids {
        let job = loop {
            let job = queue.job(id).await?.ok_or("job vanished")?;
            if job.state.is_terminal() {
                break job;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(job.state, JobState::Succeeded);
        let attempt = job.attempts.last().ok_or("no attempt record")?;
        println!(
            "job {} {} by {}: compose → {}, shout → {}",
            job.id, job.state, attempt.worker, job.outputs["compose"], job.outputs["shout"]
        );
    }
    let _ = stop.send(());
    running.await??;
    println!("worker stopped cleanly");
    Ok(())
}
