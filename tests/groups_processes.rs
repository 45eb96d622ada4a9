//! Groups and dependencies with real worker processes: this test binary runs
//! itself again as a worker (`worker_process_entry`, when
//! `LEASEHOLD_TEST_WORKER_URL` is set), so a worker can be killed with
//! SIGKILL mid-run. A 1,000-child group whose worker is killed fires its
//! completion job exactly once (after the children the kill left STALE are
//! retried), its counts per state exact at every point checked (each child
//! once, in the state it is in: sum == total); a chain A -> B -> C across three pipelines and a diamond
//! A -> B, A -> C, B + C -> D run in dependency order.

mod support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use leasehold::group::{Dependency, GroupStatus, NewGroup};
use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};
use leasehold::queue::{JobId, JobState, NewJob, Queue, QueueConfig, RetryMode};
use leasehold::redis::AsyncCommands;
use leasehold::worker::Worker;
use leasehold::{schemars, JsonSchema};
use leasehold_testkit::RedisServer;
use serde::{Deserialize, Serialize};
use support::{eventually, get, group_count_errors};

/// The environment variable that makes this binary a worker process.
const ROLE: &str = "LEASEHOLD_TEST_WORKER_URL";
/// The queue of every pipeline here.
const QUEUE: &str = "gp";

/// A window to load; its output is `n`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Item {
    n: u64,
}

/// The completion job's input: the group to aggregate.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct GroupRef {
    group: String,
}

/// Recorded order of the dependency tests' steps.
const ORDER: &str = "test:order";

async fn record(queue: &Queue, what: String) -> Result<(), StepError> {
    let mut conn = queue
        .pool()
        .get()
        .await
        .map_err(|e| StepError::retryable(e.to_string()))?;
    let _: i64 = conn
        .rpush(ORDER, what)
        .await
        .map_err(|e| StepError::retryable(e.to_string()))?;
    Ok(())
}

/// A child window: sleeps a little, then returns its `n`.
struct Win;

#[pipeline(name = "win", queue = "gp", max_attempts = 1)]
impl Win {
    #[step]
    async fn load(&self, _ctx: &StepContext, input: &Item) -> Result<u64, StepError> {
        tokio::time::sleep(Duration::from_millis(15)).await;
        Ok(input.n)
    }
}

/// The completion job: sums its group's outputs and records the sum.
struct Agg {
    queue: Queue,
}

#[pipeline(name = "agg", queue = "gp", max_attempts = 1)]
impl Agg {
    #[step]
    async fn sum(&self, _ctx: &StepContext, input: &GroupRef) -> Result<u64, StepError> {
        let outputs = self
            .queue
            .group_outputs_as::<u64>(&input.group)
            .await
            .map_err(|e| StepError::permanent(e.to_string()))?;
        let sum: u64 = outputs.iter().map(|(_, n)| n).sum();
        record(&self.queue, format!("agg {} {sum}", input.group)).await?;
        Ok(sum)
    }
}

/// What each recording pipeline's step does: a short wait, then its record.
async fn run_recorded(queue: &Queue, name: &str, input: &Item) -> Result<u64, StepError> {
    tokio::time::sleep(Duration::from_millis(20)).await;
    record(queue, format!("{name} {}", input.n)).await?;
    Ok(input.n)
}

/// A one-step pipeline that records its run in `ORDER`.
struct Pa {
    queue: Queue,
}

#[pipeline(name = "pa", queue = "gp", max_attempts = 1)]
impl Pa {
    #[step]
    async fn run(&self, _ctx: &StepContext, input: &Item) -> Result<u64, StepError> {
        run_recorded(&self.queue, "pa", input).await
    }
}

/// A one-step pipeline that records its run in `ORDER`.
struct Pb {
    queue: Queue,
}

#[pipeline(name = "pb", queue = "gp", max_attempts = 1)]
impl Pb {
    #[step]
    async fn run(&self, _ctx: &StepContext, input: &Item) -> Result<u64, StepError> {
        run_recorded(&self.queue, "pb", input).await
    }
}

/// A one-step pipeline that records its run in `ORDER`.
struct Pc {
    queue: Queue,
}

#[pipeline(name = "pc", queue = "gp", max_attempts = 1)]
impl Pc {
    #[step]
    async fn run(&self, _ctx: &StepContext, input: &Item) -> Result<u64, StepError> {
        run_recorded(&self.queue, "pc", input).await
    }
}

/// Not a test: the body of the worker processes the tests start (it returns
/// at once in an ordinary run, where the variable is unset).
#[test]
fn worker_process_entry() {
    let Ok(url) = std::env::var(ROLE) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    rt.block_on(async move {
        let queue = Queue::connect(&url, QUEUE, QueueConfig::default())
            .await
            .expect("connect");
        let worker = Worker::builder(url.clone())
            .pipeline(Win)
            .pipeline(Agg {
                queue: queue.clone(),
            })
            .pipeline(Pa {
                queue: queue.clone(),
            })
            .pipeline(Pb {
                queue: queue.clone(),
            })
            .pipeline(Pc {
                queue: queue.clone(),
            })
            .concurrency(8)
            .lease_ttl(Duration::from_millis(1500))
            .renew_interval(Duration::from_millis(300))
            .sweep_interval(Duration::from_millis(300))
            .build()
            .await
            .expect("build the worker");
        worker.run_until_signal().await.expect("run");
    });
    std::process::exit(0);
}

/// A worker process, SIGKILLed when dropped.
struct WorkerProcess(Child);

impl WorkerProcess {
    fn start(url: &str) -> Self {
        let exe = std::env::current_exe().expect("the test binary");
        let child = Command::new(exe)
            .args([
                "--exact",
                "worker_process_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ROLE, url)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a worker process");
        WorkerProcess(child)
    }

    /// SIGKILL, and reap it.
    fn kill(mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn queue(srv: &RedisServer) -> Queue {
    Queue::connect(&srv.url(), QUEUE, QueueConfig::default())
        .await
        .expect("connect")
}

fn item(pipeline: &str, n: u64) -> NewJob {
    NewJob::new(pipeline, &Item { n }).expect("serialisable")
}

/// Waits (30 s at most) until `f` holds.
async fn until<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !f().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_child_group_fires_its_completion_exactly_once_through_a_kill_9() {
    let srv = RedisServer::start();
    let q = queue(&srv).await;
    let done = JobId::new();
    let completion = NewJob::new(
        "agg",
        &GroupRef {
            group: "big".into(),
        },
    )
    .unwrap()
    .id(done.clone());
    q.create_group(&NewGroup::new("big").completion(completion), "test")
        .await
        .unwrap();
    let jobs: Vec<NewJob> = (1..=1000).map(|n| item("win", n).group("big")).collect();
    q.enqueue_bulk(jobs).await.unwrap();
    q.seal_group("big", "test").await.unwrap();

    // the counts per state are checked against the children's states (in one
    // script run) at every poll, before, during and after the kill
    let checks = std::sync::atomic::AtomicUsize::new(0);
    let exact = || {
        let errors = group_count_errors(&srv, &q, "big");
        assert!(errors.is_empty(), "counts per state: {errors:?}");
        checks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    };
    let doomed = WorkerProcess::start(&srv.url());
    let _other = WorkerProcess::start(&srv.url());
    until("300 children succeeded", || async {
        exact();
        q.group("big").await.unwrap().unwrap().succeeded >= 300
    })
    .await;
    doomed.kill();
    let _replacement = WorkerProcess::start(&srv.url());

    // every child ends or waits for an operator; those the kill left STALE
    // hold the group open, and say so, until an operator retries them
    let retried = std::sync::atomic::AtomicUsize::new(0);
    until("the group completed", || async {
        exact();
        let view = q.group_view("big").await.unwrap().unwrap();
        assert_eq!(view.info.counted(), 1000);
        if view.info.status == GroupStatus::Completed {
            return true;
        }
        if !view.stale.is_empty() {
            let why = view.why().unwrap_or_default();
            assert!(why.contains("waiting for an operator on job"), "{why}");
            for id in &view.stale {
                if q.retry(id, RetryMode::Resume, "test", "worker killed")
                    .await
                    .is_ok()
                {
                    retried.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
        false
    })
    .await;
    let info = q.group("big").await.unwrap().unwrap();
    assert_eq!(
        (info.total, info.succeeded, info.failed, info.stale),
        (1000, 1000, 0, 0)
    );
    until("the completion job succeeded", || async {
        q.job(&done)
            .await
            .unwrap()
            .is_some_and(|j| j.state == JobState::Succeeded)
    })
    .await;
    let order: Vec<String> = get(&srv, &["LRANGE", ORDER, "0", "-1"]);
    assert_eq!(
        order,
        vec![format!("agg big {}", 1000 * 1001 / 2)],
        "ran exactly once"
    );
    let fired = support::events(&srv, &q)
        .iter()
        .filter(|e| {
            e.get("reason")
                .is_some_and(|r| r == "completion of group big")
        })
        .count();
    assert_eq!(fired, 1, "the completion job was enqueued once");
    exact();
    eprintln!("children retried after the kill: {retried:?}; count checks: {checks:?}");
    assert!(checks.load(std::sync::atomic::Ordering::Relaxed) >= 10);
}

/// The order the steps ran in, each as `<pipeline> <n>`.
async fn order(srv: &RedisServer, n: usize) -> Vec<String> {
    eventually("every job recorded its run", || async {
        let order: Vec<String> = get(srv, &["LRANGE", ORDER, "0", "-1"]);
        (order.len() >= n).then_some(order)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_across_three_pipelines_and_a_diamond_run_in_dependency_order() {
    let srv = RedisServer::start();
    let q = queue(&srv).await;
    let _workers = [
        WorkerProcess::start(&srv.url()),
        WorkerProcess::start(&srv.url()),
    ];
    // chain: a -> b -> c, enqueued child-first is impossible (parents must
    // exist), so in order; the workers are already waiting for them
    let a = q.enqueue(item("pa", 1)).await.unwrap().id;
    let b = q.enqueue(item("pb", 1).depends_on(&a)).await.unwrap().id;
    let c = q.enqueue(item("pc", 1).depends_on(&b)).await.unwrap().id;
    assert_eq!(order(&srv, 3).await, ["pa 1", "pb 1", "pc 1"]);
    for id in [&a, &b, &c] {
        until("the chain succeeded", || async {
            q.job(id).await.unwrap().unwrap().state == JobState::Succeeded
        })
        .await;
    }
    let _: i64 = get(&srv, &["DEL", ORDER]);

    // diamond: a -> b, a -> c, b + c -> d
    let a = q.enqueue(item("pa", 2)).await.unwrap().id;
    let b = q.enqueue(item("pb", 2).depends_on(&a)).await.unwrap().id;
    let c = q.enqueue(item("pc", 2).depends_on(&a)).await.unwrap().id;
    let d = q
        .enqueue(
            item("pa", 3)
                .depends_on(&b)
                .depends_on(Dependency::Job(c.clone())),
        )
        .await
        .unwrap()
        .id;
    let seen = order(&srv, 4).await;
    assert_eq!(seen[0], "pa 2");
    assert_eq!(seen[3], "pa 3", "{seen:?}");
    let mut middle = seen[1..3].to_vec();
    middle.sort();
    assert_eq!(middle, ["pb 2", "pc 2"]);
    until("d succeeded", || async {
        q.job(&d).await.unwrap().unwrap().state == JobState::Succeeded
    })
    .await;
}
