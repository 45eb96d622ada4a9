//! One master of a Redis Cluster down, its replica not promoted yet: the
//! worker's sweeps and renewals of the other masters' queues go on as if
//! nothing happened (a dead worker's jobs there are swept within their TTL
//! and one sweep interval; a live worker keeps every lease it holds there).

use std::time::{Duration, Instant};

use leasehold_core::{
    BoxFuture, Client, Inspector, JobId, JobState, NewJob, Pipeline, PipelineOptions, Queue,
    QueueConfig, StepContext, StepError, StepSpec, Worker,
};
use leasehold_testkit::{wait_until_async, RedisCluster};
use serde::{Deserialize, Serialize};

/// One queue per master of a 3-master kit cluster (see `cluster.rs`): `q0`
/// on the first master's slots, `q1` on the second's, `q2` on the third's.
const QUEUES: [&str; 3] = ["q0", "q1", "q2"];
/// The pipeline of each queue, served by the live worker.
const PIPELINES: [&str; 3] = ["slow0", "slow1", "slow2"];
/// The pipeline of the dead worker's jobs (served by no live worker).
const GHOST: &str = "ghost";
/// Generous deadline for every condition the test waits on.
const WAIT: Duration = Duration::from_secs(60);
/// The live worker's sweep interval.
const SWEEP: Duration = Duration::from_millis(500);
/// The dead worker's lease TTL.
const DEAD_TTL: Duration = Duration::from_secs(2);
/// Slack for a loaded machine on top of TTL + one sweep interval.
const SLACK: Duration = Duration::from_millis(1500);

leasehold_testkit::step_enum!(Only, "sleep"; Run = "run");

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Input {
    /// How long the step takes, in ms.
    ms: u64,
}

/// Pipeline `PIPELINES[I]` on queue `QUEUES[I]`: sleeps `ms`.
struct Slow<const I: usize>;

impl<const I: usize> Pipeline for Slow<I> {
    type Input = Input;
    type Step = Only;
    const NAME: &'static str = PIPELINES[I];
    const STEPS: &'static [StepSpec] = &[StepSpec::new("run")];
    fn options() -> PipelineOptions {
        PipelineOptions::new().queue(QUEUES[I])
    }
    fn run_step<'a>(
        &'a self,
        _index: usize,
        _ctx: &'a StepContext,
        input: &'a Input,
        _previous: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, StepError>> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(input.ms)).await;
            Ok("{}".to_owned())
        })
    }
}

/// Enqueues one job of `pipeline` on `queue` taking `ms`.
async fn enqueue(queue: &Queue, pipeline: &str, ms: u64) -> JobId {
    let job = NewJob::new(pipeline, &Input { ms }).expect("a job");
    queue.enqueue(job).await.expect("enqueue on the cluster").id
}

/// Waits until job `id` of `queue` is in `state`.
async fn wait_state(queue: &Queue, id: &JobId, state: JobState, what: &str) {
    wait_until_async(WAIT, what, || {
        let (queue, id) = (queue.clone(), id.clone());
        async move { matches!(queue.job(&id).await, Ok(Some(j)) if j.state == state) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_master_delays_no_sweep_or_renewal_of_the_other_masters_queues() {
    // a node timeout of 10 minutes: the dead master stays unpromoted for the test
    let mut cluster = RedisCluster::start_with(3, 1, |_| {
        vec!["--cluster-node-timeout".to_owned(), "600000".to_owned()]
    });
    let url = cluster.url();
    let client = Client::connect(&url, QueueConfig::default()).await.unwrap();
    let queues: Vec<Queue> = QUEUES.iter().map(|q| client.queue(q).unwrap()).collect();
    let owners: Vec<usize> = queues
        .iter()
        .map(|q| cluster.owner_of_key(q.keys().base()))
        .collect();
    assert_eq!(owners, [0, 1, 2], "one queue per master");

    // a live worker holding long jobs on every master (TTL 3 s: renewed each second)
    let w = Worker::builder(&url)
        .pipeline(Slow::<0>)
        .pipeline(Slow::<1>)
        .pipeline(Slow::<2>)
        .concurrency(8)
        .lease_ttl(Duration::from_secs(3))
        .sweep_interval(SWEEP)
        .max_idle_wait(Duration::from_secs(30))
        .build()
        .await
        .expect("a worker on the cluster");
    let mut long = Vec::new();
    for (i, q) in queues.iter().enumerate() {
        long.push(enqueue(q, PIPELINES[i], 9_000).await);
    }
    let handle = tokio::spawn(w.run_until(std::future::pending()));
    for (i, q) in queues.iter().enumerate() {
        wait_state(q, &long[i], JobState::Running, "the live worker runs it").await;
    }

    // a worker that dies holding jobs on the healthy masters' queues: one
    // started (swept STALE), one only leased (swept back to QUEUED)
    // (queue, job, Redis's clock at its lease, the state its sweep leaves)
    let mut dead: Vec<(usize, JobId, i64, JobState)> = Vec::new();
    for (i, q) in queues.iter().enumerate().skip(1) {
        let started = enqueue(q, GHOST, 0).await;
        let leased = q
            .lease_and_start("dead-worker", &[GHOST], &["run"], 1, DEAD_TTL)
            .await
            .unwrap();
        assert_eq!(leased.leases.len(), 1);
        assert_eq!(leased.leases[0].job, started);
        dead.push((i, started, leased.now, JobState::Stale));
        let only_leased = enqueue(q, GHOST, 0).await;
        let leased = q.lease("dead-worker", &[GHOST], 1, DEAD_TTL).await.unwrap();
        assert_eq!(leased.leases[0].job, only_leased);
        dead.push((i, only_leased, leased.now, JobState::Queued));
    }
    // then the first master dies; its replica is not promoted
    cluster.kill(0);
    let killed = Instant::now();

    for (i, id, leased_at, want) in &dead {
        let q = &queues[*i];
        wait_state(q, id, *want, "the dead worker's job is swept").await;
        let events = Inspector::new(q.clone()).job_events(id).await.unwrap();
        let sweep = events
            .iter()
            .find(|e| e.op == "sweep")
            .unwrap_or_else(|| panic!("a sweep event: {events:?}"));
        let late = sweep.at - leased_at;
        let bound = (DEAD_TTL + SWEEP + SLACK).as_millis() as i64;
        assert!(
            late <= bound,
            "queue {}: swept {late} ms after the lease, more than TTL + one sweep interval + slack ({bound} ms)",
            QUEUES[*i]
        );
    }
    // the dead master is still unpromoted: the sweeps did not wait for it
    let replication = cluster.node(3).info("replication");
    assert!(
        replication.contains("role:slave"),
        "the replica was promoted after {:?}: {replication}",
        killed.elapsed()
    );

    // the live worker kept its leases on the healthy masters: their long
    // jobs succeed in their first attempt, while the first master is still down
    for i in 1..3 {
        let q = &queues[i];
        let ended = tokio::time::timeout(WAIT, async {
            loop {
                match q.job(&long[i]).await {
                    Ok(Some(j)) if j.state.is_terminal() || j.state == JobState::Stale => break,
                    _ => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        })
        .await;
        let job = q.job(&long[i]).await.unwrap().unwrap();
        assert!(
            ended.is_ok(),
            "the long job of {} did not end: {job:?}",
            QUEUES[i]
        );
        assert_eq!(job.state, JobState::Succeeded, "{job:?}");
        let job = q.job(&long[i]).await.unwrap().unwrap();
        assert_eq!(job.attempt, 1, "a healthy queue's lease was lost: {job:?}");
    }
    assert!(cluster.node(3).info("replication").contains("role:slave"));
    // the first master's job cannot end while it is down: the worker is
    // stopped without waiting for it
    handle.abort();
    let _ = handle.await;
}

/// A worker serving the three queues, waiting at most `wait` at its start.
async fn build_worker(url: &str, wait: Duration) -> leasehold_core::Result<Worker> {
    Worker::builder(url)
        .pipeline(Slow::<0>)
        .pipeline(Slow::<1>)
        .pipeline(Slow::<2>)
        .startup_wait(wait)
        .build()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_started_while_a_master_is_down_waits_then_names_it() {
    let mut cluster = RedisCluster::start_with(3, 1, |_| {
        vec!["--cluster-node-timeout".to_owned(), "600000".to_owned()]
    });
    let url = cluster.url();
    let dead_port = cluster.node(0).port().expect("a TCP node");
    cluster.kill(0);

    // the master stays down: the worker waits its startup wait, then names
    // the master, the queue and the likely cause
    let began = Instant::now();
    let err = build_worker(&url, Duration::from_secs(2))
        .await
        .expect_err("no worker starts while a served queue's master is down");
    let waited = began.elapsed();
    assert!(
        waited >= Duration::from_secs(1),
        "gave up at once: {waited:?}"
    );
    assert!(waited < WAIT, "waited {waited:?}");
    match &err {
        leasehold_core::Error::StartupUnanswered(gave_up) => {
            let leasehold_core::StartupUnanswered {
                master,
                queue,
                pipelines,
                cause,
                ..
            } = gave_up.as_ref();
            assert_eq!(master, &format!("127.0.0.1:{dead_port}"), "{err}");
            assert_eq!(queue, QUEUES[0], "{err}");
            assert_eq!(pipelines, &[PIPELINES[0].to_owned()], "{err}");
            assert!(cause.contains("failover"), "{err}");
        }
        other => panic!("not a startup error: {other}"),
    }

    // the replica is promoted while a worker waits: it starts
    let starting = tokio::spawn({
        let url = url.clone();
        async move { build_worker(&url, WAIT).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster.take_over(3);
    let w = tokio::time::timeout(WAIT + Duration::from_secs(5), starting)
        .await
        .expect("the worker's start ended")
        .unwrap()
        .expect("the worker starts once the replica took over");
    assert_eq!(w.queues().len(), 3);
}
