//! The worker runtime end to end in one process, with a hand-written pipeline.

use std::time::Duration;

use leasehold_core::{
    BoxFuture, Client, JobState, Pipeline, PipelineOptions, QueueConfig, RetryPolicy, StepContext,
    StepError, StepSpec, Worker,
};
use leasehold_testkit::{wait_until_async, RedisCluster, RedisServer};
use serde::{Deserialize, Serialize};

leasehold_testkit::step_enum!(Step, "math"; Double = "double", Add = "add");

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Input {
    n: i64,
    fail_first: bool,
}

struct Math;

impl Pipeline for Math {
    type Input = Input;
    type Step = Step;
    const NAME: &'static str = "math";
    const STEPS: &'static [StepSpec] = &[
        StepSpec::new("double"),
        StepSpec::new("add").timeout(Duration::from_secs(5)),
    ];
    fn options() -> PipelineOptions {
        PipelineOptions::new()
            .retry(RetryPolicy::exponential(2).initial_backoff(Duration::from_millis(10)))
    }
    fn run_step<'a>(
        &'a self,
        index: usize,
        ctx: &'a StepContext,
        input: &'a Input,
        previous: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, StepError>> {
        Box::pin(async move {
            match index {
                0 => Ok((input.n * 2).to_string()),
                _ => {
                    let prev: i64 = previous
                        .unwrap_or("0")
                        .parse()
                        .map_err(StepError::permanent)?;
                    if input.fail_first && ctx.attempt() == 1 {
                        return Err(StepError::retryable("transient"));
                    }
                    Ok((prev + 1).to_string())
                }
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_runs_jobs_retries_and_shuts_down() {
    let srv = RedisServer::start();
    runs_jobs_retries_and_shuts_down(&srv.url()).await;
}

/// The same run through a cluster client of a private 3-master cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_runs_jobs_retries_and_shuts_down_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    runs_jobs_retries_and_shuts_down(&cluster.url()).await;
    assert_eq!(cluster.error_count("CROSSSLOT"), 0);
}

async fn runs_jobs_retries_and_shuts_down(url: &str) {
    let client = Client::connect(url, QueueConfig::default()).await.unwrap();
    let mut ids = Vec::new();
    for n in 0..20 {
        ids.push(
            client
                .enqueue::<Math>(&Input {
                    n,
                    fail_first: n % 5 == 0,
                })
                .await
                .unwrap()
                .id,
        );
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let metrics_addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let worker = Worker::builder(url)
        .pipeline(Math)
        .concurrency(4)
        .lease_ttl(Duration::from_secs(5))
        .metrics_addr(metrics_addr)
        .build()
        .await
        .unwrap();
    let metrics = worker.metrics();
    // the worker published the pipeline's spec for tools that cannot run its code
    let spec = client
        .queue_for::<Math>()
        .unwrap()
        .pipeline_spec("math")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(spec.steps, ["double", "add"]);
    assert_eq!(spec.max_attempts, 2);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(worker.run_until(async {
        let _ = rx.await;
    }));
    let queue = client.queue_for::<Math>().unwrap();
    wait_until_async(Duration::from_secs(20), "all jobs succeeded", || {
        let queue = queue.clone();
        let ids = ids.clone();
        async move {
            for id in &ids {
                match queue.job(id).await {
                    Ok(Some(job)) if job.state == JobState::Succeeded => {}
                    _ => return false,
                }
            }
            true
        }
    })
    .await;
    for (n, id) in ids.iter().enumerate() {
        let job = queue.job(id).await.unwrap().unwrap();
        assert_eq!(job.outputs["add"], serde_json::json!(n as i64 * 2 + 1));
        if n % 5 == 0 {
            assert_eq!(job.attempt, 2, "{job:?}");
            assert_eq!(job.attempts[0].state, JobState::Failed);
            // resumed after `double`: the second attempt ran only `add`
            assert_eq!(job.attempts[1].steps.len(), 1);
        }
    }
    // the Prometheus endpoint shows what happened
    let scrape = http_get(metrics_addr, "/metrics").await;
    assert!(scrape.contains("leasehold_transitions_total{queue=\"math\",pipeline=\"math\",from=\"RUNNING\",to=\"SUCCEEDED\"} 20"), "{scrape}");
    assert!(scrape.contains("leasehold_step_duration_seconds_count{pipeline=\"math\",step=\"add\",outcome=\"failed\"} 4"), "{scrape}");
    assert!(
        scrape.contains("leasehold_queue_wait_seconds_count"),
        "{scrape}"
    );
    assert_eq!(metrics.encode(), metrics.encode());
    tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(20), handle)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// A bare HTTP/1.0 GET, enough for a metrics scrape.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut body = String::new();
    stream.read_to_string(&mut body).await.unwrap();
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_built_on_a_pool_of_yours_blocks_on_a_connection_of_its_own() {
    let srv = RedisServer::start();
    let pool = leasehold_core::connect_pool(&srv.url(), &QueueConfig::default()).unwrap();
    let worker = Worker::builder_with_pool(pool.clone())
        .pipeline(Math)
        .concurrency(2)
        .max_idle_wait(Duration::from_secs(2))
        .build()
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(worker.run_until(async {
        let _ = rx.await;
    }));
    let client = Client::connect(&srv.url(), QueueConfig::default())
        .await
        .unwrap();
    let queue = client.queue_for::<Math>().unwrap();
    // the worker is idle and blocked; an enqueue wakes it
    let id = client
        .enqueue::<Math>(&Input {
            n: 20,
            fail_first: false,
        })
        .await
        .unwrap()
        .id;
    wait_until_async(Duration::from_secs(10), "the job succeeded", || {
        let queue = queue.clone();
        let id = id.clone();
        async move { matches!(queue.job(&id).await, Ok(Some(job)) if job.state == JobState::Succeeded) }
    })
    .await;
    // idle again, the worker blocks on a connection of its own (not a pooled one)
    let client_list = || match srv.cmd(&["CLIENT", "LIST"]) {
        leasehold_core::redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        leasehold_core::redis::Value::VerbatimString { text, .. } => text,
        other => panic!("{other:?}"),
    };
    wait_until_async(
        Duration::from_secs(10),
        "the idle worker blocks in BLPOP",
        || {
            let blocked = client_list().contains("cmd=blpop");
            async move { blocked }
        },
    )
    .await;
    tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(20), handle)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
