//! What `show` and the dashboard tell an operator about how a real worker's job
//! ended, where the easy answer is wrong: a retryable failure whose automatic
//! retries are used up (the step's verdict and the exhaustion are recorded
//! apart and both are said), and an accepted cancel that the job outran (it
//! SUCCEEDED: "cancel requested at T by X, the job completed first").
//!
//! A real in-process `Worker` runs `#[pipeline]`s against a private Redis; the
//! binary reads the result.

mod support;

use std::time::{Duration, Instant};

use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};
use leasehold::queue::{Client, JobId, JobState, Queue, QueueConfig};
use leasehold::worker::{Worker, WorkerBuilder};
use leasehold::{schemars, JsonSchema};
use leasehold_testkit::RedisServer;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use support::binary::{command, run_cmd, Run};
use support::dashboard::{http, Dashboard};

/// The job input.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Input {
    n: u32,
}

/// Every attempt fails with a retryable `io` error; three attempts in all.
struct AlwaysIo;

#[pipeline(queue = "verdicts", max_attempts = 3, backoff = "10ms", jitter = 0.0)]
impl AlwaysIo {
    #[step]
    async fn load(&self, _ctx: &StepContext, _input: &Input) -> Result<u32, StepError> {
        Err(StepError::retryable("disk full while writing the batch").with_kind("io"))
    }
}

/// The step's own retry policy allows one attempt; the pipeline allows three.
struct StepPolicySpent;

#[pipeline(queue = "verdicts", max_attempts = 3, backoff = "10ms", jitter = 0.0)]
impl StepPolicySpent {
    #[step(retry(max_attempts = 1, backoff = "10ms"))]
    async fn fetch(&self, _ctx: &StepContext, _input: &Input) -> Result<u32, StepError> {
        Err(StepError::retryable("source timed out").with_kind("source"))
    }
}

/// The one step waits for a cancel, then finishes its work anyway (`Ok`).
struct FinishesAnyway;

#[pipeline(queue = "verdicts", max_attempts = 1)]
impl FinishesAnyway {
    #[step]
    async fn work(&self, ctx: &StepContext, input: &Input) -> Result<u32, StepError> {
        tokio::select! {
            _ = ctx.cancelled() => {}
            _ = tokio::time::sleep(Duration::from_secs(60)) => {}
        }
        Ok(input.n)
    }
}

/// A worker of all three pipelines, renewing often (a cancel is seen quickly).
fn worker(url: String) -> WorkerBuilder {
    Worker::builder(url)
        .pipeline(AlwaysIo)
        .pipeline(StepPolicySpent)
        .pipeline(FinishesAnyway)
        .concurrency(4)
        .lease_ttl(Duration::from_secs(10))
        .renew_interval(Duration::from_millis(100))
}

/// Runs the worker until the returned sender is dropped or sent to.
async fn run(builder: WorkerBuilder) -> tokio::sync::oneshot::Sender<()> {
    let worker = builder.build().await.expect("worker");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    stop
}

async fn wait_for(
    q: &Queue,
    id: &JobId,
    what: &str,
    cond: impl Fn(&leasehold::queue::Job) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let job = q.job(id).await.unwrap().expect("job exists");
        if cond(&job) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "job {id} never became {what}: {} attempt {}",
            job.state,
            job.attempt
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn cli(srv: &RedisServer, args: &[&str]) -> Run {
    run_cmd(command(&srv.url(), args)).await
}

/// The dashboard's page of job `id`, as text.
async fn job_page(dash: &Dashboard, id: &JobId) -> String {
    let page = http()
        .get(dash.url(&format!("/jobs/verdicts/{id}")))
        .send()
        .await
        .unwrap();
    assert!(page.status().is_success(), "{}", page.status());
    page.text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retryable_failure_with_retries_used_up_is_not_called_not_retryable() {
    let srv = RedisServer::start();
    let client = Client::connect(&srv.url(), QueueConfig::default())
        .await
        .unwrap();
    let all_io = client
        .enqueue::<AlwaysIo>(&Input { n: 1 })
        .await
        .unwrap()
        .id;
    let spent = client
        .enqueue::<StepPolicySpent>(&Input { n: 2 })
        .await
        .unwrap()
        .id;
    let stop = run(worker(srv.url())).await;
    let q = client.queue_for::<AlwaysIo>().unwrap();
    wait_for(&q, &all_io, "FAILED at attempt 3", |j| {
        j.state == JobState::Failed && j.attempt == 3
    })
    .await;
    wait_for(&q, &spent, "FAILED", |j| j.state == JobState::Failed).await;
    let _ = stop.send(());

    // the record: the step's verdict, and the exhaustion apart from it
    let v = cli(&srv, &["show", all_io.as_str(), "--json"])
        .await
        .ok()
        .json();
    let attempts = v["job"]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3, "{v:#}");
    for (i, a) in attempts.iter().enumerate() {
        assert_eq!(a["error"]["kind"], "io", "{a:#}");
        assert_eq!(a["error"]["retryable"], true, "attempt {}: {a:#}", i + 1);
    }
    assert!(
        attempts[..2]
            .iter()
            .all(|a| a["error"].get("retries_exhausted").is_none()),
        "attempts 1 and 2 were retried: {v:#}"
    );
    assert_eq!(attempts[2]["error"]["retries_exhausted"], true, "{v:#}");

    // show says both
    let human = cli(&srv, &["show", all_io.as_str()]).await.ok().stdout;
    assert!(
        human.contains("retryable (io), but automatic retries are used up (3 of 3)"),
        "{human}"
    );
    assert!(
        human.contains("(retryable: yes; automatic retries used up)"),
        "{human}"
    );
    assert!(!human.contains("not retryable"), "{human}");

    // the step's own policy ran out before the job's
    let v = cli(&srv, &["show", spent.as_str(), "--json"])
        .await
        .ok()
        .json();
    let error = &v["job"]["attempts"][0]["error"];
    assert_eq!(
        (&error["retryable"], &error["retries_exhausted"]),
        (&Value::Bool(true), &Value::Bool(true)),
        "{v:#}"
    );
    assert_eq!(v["job"]["attempt"], 1, "no automatic retry: {v:#}");
    let human = cli(&srv, &["show", spent.as_str()]).await.ok().stdout;
    assert!(
        human.contains("the failing step's retry policy allows no more"),
        "{human}"
    );

    // the dashboard says the same
    let dash = Dashboard::start(&srv.url(), &[], None).await;
    let page = job_page(&dash, &all_io).await;
    assert!(
        page.contains("retryable (io), but automatic retries are used up (3 of 3)"),
        "{page}"
    );
    assert!(
        page.contains("retryable: yes; automatic retries used up"),
        "{page}"
    );
    assert!(!page.contains("not retryable"), "{page}");
    dash.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_cancel_the_job_outran_is_reported_as_completed_first() {
    let srv = RedisServer::start();
    let client = Client::connect(&srv.url(), QueueConfig::default())
        .await
        .unwrap();
    let id = client
        .enqueue::<FinishesAnyway>(&Input { n: 7 })
        .await
        .unwrap()
        .id;
    let stop = run(worker(srv.url())).await;
    let q = client.queue_for::<FinishesAnyway>().unwrap();
    wait_for(&q, &id, "RUNNING", |j| j.state == JobState::Running).await;
    let run = cli(
        &srv,
        &[
            "--by",
            "alice",
            "cancel",
            id.as_str(),
            "--reason",
            "wrong window",
        ],
    )
    .await
    .ok();
    assert!(run.stdout.contains("cancel requested"), "{run:?}");
    wait_for(&q, &id, "SUCCEEDED", |j| j.state == JobState::Succeeded).await;
    let _ = stop.send(());

    let human = cli(&srv, &["show", id.as_str()]).await.ok().stdout;
    let verdict = human
        .lines()
        .find(|l| l.trim_start().starts_with("verdict"))
        .unwrap_or_else(|| panic!("no verdict line:\n{human}"));
    assert!(
        verdict.contains("cancel requested at 20")
            && verdict.contains("by alice, the job completed first"),
        "{verdict}"
    );
    assert!(
        human.contains("not honoured: the job completed first"),
        "{human}"
    );
    assert!(
        human.contains("ended SUCCEEDED: completed first, before the cancel request was honoured"),
        "{human}"
    );
    assert!(
        human.contains("completed first: the cancel requested by alice was not honoured"),
        "the finish event says it:\n{human}"
    );

    let v = cli(&srv, &["show", id.as_str(), "--json"])
        .await
        .ok()
        .json();
    assert_eq!(v["cancel"]["outcome"], "completed_first", "{v:#}");
    assert_eq!(v["job"]["state"], "SUCCEEDED");
    assert_eq!(v["job"]["cancel"]["by"], "alice");
    assert!(v["job"]["cancel"]["at"].is_u64(), "{v:#}");

    let dash = Dashboard::start(&srv.url(), &[], None).await;
    let page = job_page(&dash, &id).await;
    assert!(page.contains("data-outcome=\"completed first\""), "{page}");
    assert!(page.contains("the job completed first"), "{page}");
    dash.stop().await;
}

/// Cleanup needed, retryable and cancel honoured, as `show`, `show --json`,
/// the dashboard's job page and its API say them for job `id`; all four agree.
async fn verdicts_agree(srv: &RedisServer, dash: &Dashboard, id: &JobId) -> Value {
    let v = cli(srv, &["show", id.as_str(), "--json"]).await.ok().json();
    let verdicts = v["verdicts"].clone();
    let api: Value = http()
        .get(dash.url(&format!("/api/jobs/verdicts/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(api["verdicts"], verdicts, "the API and show --json");

    let human = cli(srv, &["show", id.as_str()]).await.ok().stdout;
    let line = |key: &str| -> Option<String> {
        human
            .lines()
            .find(|l| l.trim_start().starts_with(key))
            .map(|l| l.trim_start()[key.len()..].trim().to_owned())
    };
    let yes_no = |b: &Value| match b.as_bool() {
        Some(true) => Some("yes"),
        Some(false) => Some("no"),
        None => None,
    };
    let cleanup = line("cleanup ").expect("a cleanup line");
    let page = job_page(dash, id).await;
    for (code, words) in [
        ("not_needed", "not needed"),
        ("needed", "needed (a step was cut mid-way)"),
        ("possible", "probably needed"),
    ] {
        if verdicts["cleanup"] == code {
            assert!(cleanup.starts_with(words), "show: {cleanup:?} for {code}");
            assert!(
                page.contains(&format!("data-cleanup=\"{code}\">{words}")),
                "the page for {code}: {page}"
            );
        }
    }
    match yes_no(&verdicts["retryable"]) {
        Some(r) => {
            assert!(
                line("retryable ").is_some_and(|l| l.starts_with(r)),
                "show: {human}"
            );
            assert!(page.contains(&format!("data-retryable=\"{r}\"")), "{page}");
        }
        None => {
            assert_eq!(line("retryable "), None, "{human}");
            assert!(!page.contains("data-retryable"), "{page}");
        }
    }
    match yes_no(&verdicts["cancel_honoured"]) {
        Some(h) => {
            assert!(page.contains(&format!("data-honoured=\"{h}\"")), "{page}");
            let honoured = v["cancel"]["outcome"] == "honoured";
            assert_eq!(h == "yes", honoured, "{v:#}");
            assert_eq!(
                human.contains("\n  honoured: "),
                honoured,
                "show's cancel section: {human}"
            );
        }
        None => assert!(!page.contains("data-honoured"), "{page}"),
    }
    verdicts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_retryable_and_cancel_verdicts_agree_in_every_view() {
    use leasehold_core::{AttemptError, Outcome};
    use support::jobs::{enqueue, job, lease_one, queue, start};

    let srv = RedisServer::start();
    let q = queue(&srv, "verdicts").await;
    // STALE: its worker died in `load`
    let stale = enqueue(&q, job("sync", 1)).await;
    let l = lease_one(&q, "w-dead", "sync", Duration::from_millis(800)).await;
    start(&q, &l).await;
    q.checkpoint(&l, "fetch", "{}", Some("load")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(q.sweep(100).await.unwrap().stale, 1);
    // FAILED for good
    let failed = enqueue(&q, job("sync", 2)).await;
    let l = lease_one(&q, "w1", "sync", Duration::from_secs(60)).await;
    start(&q, &l).await;
    q.finish(
        &l,
        &Outcome::Failed {
            error: AttemptError {
                kind: "validation".into(),
                message: "negative totals".into(),
                retryable: false,
                retries_exhausted: false,
            },
            backoff: Duration::ZERO,
            cleanup_needed: false,
        },
    )
    .await
    .unwrap();
    // CANCELLED at a worker's request, a step cut mid-way
    let cancelled = enqueue(&q, job("sync", 3)).await;
    let l = lease_one(&q, "w1", "sync", Duration::from_secs(60)).await;
    start(&q, &l).await;
    cli(
        &srv,
        &[
            "--by",
            "bob",
            "cancel",
            cancelled.as_str(),
            "--reason",
            "wrong shop",
        ],
    )
    .await
    .ok();
    q.finish(
        &l,
        &Outcome::Cancelled {
            reason: "wrong shop".into(),
            cleanup_needed: true,
        },
    )
    .await
    .unwrap();

    let dash = Dashboard::start(&srv.url(), &[], None).await;
    let v = verdicts_agree(&srv, &dash, &stale).await;
    assert_eq!(
        (&v["cleanup"], &v["retryable"], &v["cancel_honoured"]),
        (&Value::from("possible"), &Value::Bool(true), &Value::Null),
        "STALE: {v:#}"
    );
    let v = verdicts_agree(&srv, &dash, &failed).await;
    assert_eq!(
        (&v["cleanup"], &v["retryable"], &v["cancel_honoured"]),
        (
            &Value::from("not_needed"),
            &Value::Bool(false),
            &Value::Null
        ),
        "FAILED: {v:#}"
    );
    let v = verdicts_agree(&srv, &dash, &cancelled).await;
    assert_eq!(
        (&v["cleanup"], &v["retryable"], &v["cancel_honoured"]),
        (
            &Value::from("needed"),
            &Value::Bool(true),
            &Value::Bool(true)
        ),
        "CANCELLED: {v:#}"
    );
    dash.stop().await;
}
