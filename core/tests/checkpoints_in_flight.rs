//! Checkpoints in flight: a worker does not wait for a step's append before
//! the next step runs. Owns what that must keep, against a private
//! `redis-server`: every attempt's outputs land in order and complete (a job
//! of quick steps sends its appends and its finish together), and an append
//! whose call was cut off is sent again ahead of the attempt's later
//! operations, so no output is lost, doubled or reordered.

use std::time::Duration;

use leasehold_core::redis;
use leasehold_core::{
    BoxFuture, Client, Job, JobId, JobState, Pipeline, PipelineOptions, QueueConfig, RetryPolicy,
    StepContext, StepError, StepSpec, Worker,
};
use leasehold_testkit::{wait_until_async, RedisServer, TcpProxy};
use serde::{Deserialize, Serialize};

leasehold_testkit::step_enum!(Step, "chain"; A = "a", B = "b", C = "c", D = "d");

/// The steps, in order.
const STEPS: [&str; 4] = ["a", "b", "c", "d"];

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Input {
    n: i64,
    /// How long each step sleeps, ms (0: returns at once).
    sleep_ms: u64,
}

/// Four steps; each adds its index to the previous output.
struct Chain;

impl Pipeline for Chain {
    type Input = Input;
    type Step = Step;
    const NAME: &'static str = "chain";
    const STEPS: &'static [StepSpec] = &[
        StepSpec::new("a"),
        StepSpec::new("b"),
        StepSpec::new("c"),
        StepSpec::new("d"),
    ];
    fn options() -> PipelineOptions {
        PipelineOptions::new()
            .retry(RetryPolicy::exponential(3).initial_backoff(Duration::from_millis(10)))
    }
    fn run_step<'a>(
        &'a self,
        index: usize,
        _ctx: &'a StepContext,
        input: &'a Input,
        previous: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, StepError>> {
        Box::pin(async move {
            if input.sleep_ms > 0 {
                tokio::time::sleep(Duration::from_millis(input.sleep_ms)).await;
            }
            let prev: i64 = match previous {
                Some(p) => p.parse().map_err(StepError::permanent)?,
                None => input.n,
            };
            Ok((prev + index as i64 + 1).to_string())
        })
    }
}

/// What step `i` of job `n` returns.
fn expected(n: i64, i: usize) -> i64 {
    n + (1..=i as i64 + 1).sum::<i64>()
}

/// Checks that `job`'s sealed outputs are a prefix of the steps, complete,
/// in order and right; `full` when the job succeeded.
fn check_record(job: &Job, n: i64, full: bool) {
    let Some(last) = job.attempts.last() else {
        // a lease whose reply was cut off before its attempt began: swept
        // from LEASED, it has no attempt and no output
        assert!(!full, "{job:?}");
        assert_eq!(job.state, JobState::Stale, "{job:?}");
        assert!(job.outputs.is_empty(), "{job:?}");
        return;
    };
    let names: Vec<&str> = job
        .attempts
        .iter()
        .flat_map(|a| a.steps.iter().map(|s| s.step.as_str()))
        .collect();
    // each attempt resumes after the last step sealed before it: taken
    // together, the attempts' steps are the pipeline's, each once, in order
    assert_eq!(names, STEPS[..names.len()], "{job:?}");
    if full {
        assert_eq!(names, STEPS, "{job:?}");
        assert_eq!(last.state, JobState::Succeeded, "{job:?}");
    }
    for (i, step) in names.iter().enumerate() {
        assert_eq!(
            job.outputs.get(*step),
            Some(&serde_json::json!(expected(n, i))),
            "output of {step}: {job:?}"
        );
    }
}

/// Waits until every job in `ids` has ended (SUCCEEDED, or STALE where the
/// test allows it); returns them.
async fn wait_ended(client: &Client, ids: &[JobId], stale_ok: bool) -> Vec<Job> {
    let queue = client.queue_for::<Chain>().unwrap();
    wait_until_async(Duration::from_secs(60), "every job ended", || {
        let queue = queue.clone();
        let ids = ids.to_vec();
        async move {
            for id in &ids {
                match queue.job(id).await {
                    Ok(Some(job)) if job.state == JobState::Succeeded => {}
                    Ok(Some(job)) if stale_ok && job.state == JobState::Stale => {}
                    _ => return false,
                }
            }
            true
        }
    })
    .await;
    let mut jobs = Vec::new();
    for id in ids {
        jobs.push(queue.job(id).await.unwrap().unwrap());
    }
    jobs
}

/// Enqueues `count` jobs of `sleep_ms` steps; their ids, in order of `n`.
async fn enqueue(client: &Client, count: i64, sleep_ms: u64) -> Vec<JobId> {
    let mut ids = Vec::new();
    for n in 0..count {
        ids.push(
            client
                .enqueue::<Chain>(&Input { n, sleep_ms })
                .await
                .unwrap()
                .id,
        );
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_steps_land_complete_and_in_order() {
    let srv = RedisServer::start();
    let client = Client::connect(&srv.url(), QueueConfig::default())
        .await
        .unwrap();
    let ids = enqueue(&client, 300, 0).await;
    let worker = Worker::builder(srv.url())
        .pipeline(Chain)
        .concurrency(10)
        .build()
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(worker.run_until(async {
        let _ = rx.await;
    }));
    let jobs = wait_ended(&client, &ids, false).await;
    let queue = client.queue_for::<Chain>().unwrap();
    let mut conn = redis::Client::open(srv.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for (n, job) in jobs.iter().enumerate() {
        check_record(job, n as i64, true);
        assert_eq!(job.attempt, 1, "{job:?}");
        // the seal deleted the outputs list
        let left: i64 = redis::cmd("EXISTS")
            .arg(queue.keys().outputs(job.id.as_str()))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(left, 0, "{job:?}");
    }
    tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(20), handle)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_cut_off_are_sent_again_in_order() {
    let srv = RedisServer::start_tcp();
    let target: std::net::SocketAddr = srv
        .url()
        .trim_start_matches("redis://")
        .parse()
        .expect("a TCP address");
    let proxy = TcpProxy::start(target);
    let client = Client::connect(&srv.url(), QueueConfig::default())
        .await
        .unwrap();
    let ids = enqueue(&client, 120, 3).await;
    // the worker reaches Redis through the proxy; its sweeper turns a job
    // whose started lease's reply was cut off to STALE
    let worker = Worker::builder(proxy.url())
        .pipeline(Chain)
        .concurrency(10)
        .lease_ttl(Duration::from_secs(2))
        .sweep_interval(Duration::from_millis(300))
        .build()
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(worker.run_until(async {
        let _ = rx.await;
    }));
    // cut every connection of the worker a dozen times while its jobs run
    // (their steps take 3 ms each, so appends are on their way at each cut)
    let queue = client.queue_for::<Chain>().unwrap();
    wait_until_async(Duration::from_secs(20), "the first job succeeded", || {
        let queue = queue.clone();
        let id = ids[0].clone();
        async move { matches!(queue.job(&id).await, Ok(Some(j)) if j.state == JobState::Succeeded) }
    })
    .await;
    for _ in 0..12 {
        proxy.block();
        tokio::time::sleep(Duration::from_millis(20)).await;
        proxy.unblock();
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    let jobs = wait_ended(&client, &ids, true).await;
    let mut succeeded = 0;
    for (n, job) in jobs.iter().enumerate() {
        let full = job.state == JobState::Succeeded;
        succeeded += usize::from(full);
        check_record(job, n as i64, full);
    }
    assert!(succeeded > ids.len() / 2, "{succeeded} of {}", ids.len());
    tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(30), handle)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
