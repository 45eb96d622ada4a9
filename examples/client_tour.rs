//! A tour of the core client: enqueue jobs, lease them, run their steps with
//! checkpoints, finish them, cancel one, and read back what Redis recorded.
//!
//! Run: `cargo run --example client_tour` (starts a throwaway redis-server
//! when `REDIS_URL` is unset).

mod common;

use std::time::Duration;

use leasehold::lease::{Outcome, Started};
use leasehold::queue::{AttemptError, Cancelled, JobState, NewJob, Queue, QueueConfig};
use serde_json::json;

const STEPS: [&str; 4] = ["fetch", "validate", "load", "aggregate"];

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let redis = common::ExampleRedis::from_env_or_spawn()?;
    let queue = Queue::connect(&redis.url, "tour", QueueConfig::default()).await?;

    println!("\n1. enqueue four hourly windows of shop A, B and C (input key = shop+hour, resource = shop)");
    let mut ids = Vec::new();
    for (shop, hour) in [("a", 0), ("a", 1), ("b", 0), ("c", 0)] {
        let input = json!({"shop": shop, "from": format!("2026-05-06T{hour:02}:00Z"), "hours": 1});
        let job = NewJob::new("orders_sync", &input)?
            .input_key(format!("shop:{shop}:hour:{hour}"))
            .resource(format!("shop:{shop}"))
            .max_attempts(2);
        let enqueued = queue.enqueue(job).await?;
        println!(
            "   job {} for shop {shop} hour {hour}: created",
            enqueued.id
        );
        ids.push(enqueued.id);
    }
    let again = queue
        .enqueue(NewJob::new("orders_sync", &json!({"shop": "a"}))?.input_key("shop:a:hour:0"))
        .await?;
    println!(
        "   enqueue shop:a:hour:0 again -> created={} (returns existing job {})",
        again.created, again.id
    );

    println!("\n2. cancel shop C's job while it waits");
    let c = ids[3].clone();
    match queue
        .cancel(&c, "shop C is closed today", "operator:alice")
        .await?
    {
        Cancelled::Now => println!("   job {c} cancelled at once (it was QUEUED)"),
        other => println!("   job {c}: {other:?}"),
    }

    println!("\n3. worker-1 leases what it can: shop A's second hour waits for shop A's lock");
    let ttl = Duration::from_secs(30);
    let leased = queue.lease("worker-1", &["orders_sync"], 10, ttl).await?;
    for lease in &leased.leases {
        println!(
            "   leased {} (attempt {}, fence {}, resource {:?})",
            lease.job, lease.attempt, lease.fence, lease.resource
        );
    }

    println!("\n4. run each leased job step by step, checkpointing after every step");
    for (i, lease) in leased.leases.iter().enumerate() {
        if let Started::Cancelled { reason } = queue.start(lease, STEPS[0]).await? {
            println!("   {} was cancelled before it started: {reason}", lease.job);
            continue;
        }
        for (s, step) in STEPS.iter().enumerate() {
            let output = json!({"step": step, "rows": 100 + s});
            let next = STEPS.get(s + 1).copied();
            queue
                .checkpoint(lease, step, &output.to_string(), next)
                .await?;
            if i == 1 && *step == "validate" {
                let error = AttemptError {
                    kind: "validation".into(),
                    message: "3 orders have negative totals".into(),
                    retryable: true,
                    retries_exhausted: false,
                };
                let finished = queue
                    .finish(
                        lease,
                        &Outcome::Failed {
                            error,
                            backoff: Duration::ZERO,
                            cleanup_needed: false,
                        },
                    )
                    .await?;
                println!(
                    "   {} failed at validate (retryable) -> {finished:?}",
                    lease.job
                );
                break;
            }
            if s == STEPS.len() - 1 {
                let finished = queue.finish(lease, &Outcome::Succeeded).await?;
                println!("   {} ran {} -> {finished:?}", lease.job, STEPS.join(" → "));
            }
        }
    }

    println!("\n5. the lock on shop A is free again: lease the rest (the retry resumes after 'validate')");
    loop {
        let leased = queue.lease("worker-2", &["orders_sync"], 10, ttl).await?;
        if leased.leases.is_empty() {
            break;
        }
        for lease in &leased.leases {
            let resume_at = match &lease.last_step {
                Some(last) => STEPS.iter().position(|s| s == last).map_or(0, |p| p + 1),
                None => 0,
            };
            println!(
                "   worker-2 leased {} attempt {} (resumes at {})",
                lease.job, lease.attempt, STEPS[resume_at]
            );
            let _ = queue.start(lease, STEPS[resume_at]).await?;
            for (s, step) in STEPS.iter().enumerate().skip(resume_at) {
                queue
                    .checkpoint(
                        lease,
                        step,
                        &json!({"rows": s}).to_string(),
                        STEPS.get(s + 1).copied(),
                    )
                    .await?;
            }
            println!(
                "   -> {:?}",
                queue.finish(lease, &Outcome::Succeeded).await?
            );
        }
    }

    println!("\n6. what Redis says now");
    for id in &ids {
        let Some(job) = queue.job(id).await? else {
            continue;
        };
        println!(
            "   {} {:<9} attempts={} last_step={:?}",
            job.id,
            job.state.to_string(),
            job.attempt,
            job.last_step
        );
        for a in &job.attempts {
            let steps: Vec<&str> = a.steps.iter().map(|s| s.step.as_str()).collect();
            println!(
                "      attempt {} {} by {:?} fence {} steps {:?} error {:?}",
                a.n,
                a.state,
                a.worker,
                a.fence,
                steps,
                a.error.as_ref().map(|e| &e.message)
            );
        }
    }

    println!("\n7. a forbidden move is refused and changes nothing:");
    let done = queue.job(&ids[0]).await?.ok_or("job vanished")?;
    assert_eq!(done.state, JobState::Succeeded);
    match queue.cancel(&ids[0], "too late", "operator:alice").await {
        Err(e) => println!("   cancel of a SUCCEEDED job: {e}"),
        Ok(x) => println!("   unexpected: {x:?}"),
    }
    println!(
        "\ninspect it yourself: redis-cli HGETALL 'leasehold:{{tour}}:job:{id}'\n\
         (a job that succeeded keeps its last attempt in that hash; the records of other\n\
         attempts are in: redis-cli HSCAN 'leasehold:{{tour}}:attempts' 0 MATCH '{id}:*')",
        id = ids[0]
    );
    Ok(())
}
