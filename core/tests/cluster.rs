//! The client and the worker against a private 3-master Redis Cluster: eight
//! queues spread over the shards served by one worker with 0 CROSSSLOT
//! errors, the function library on every master (and reloaded where it went
//! missing), queue discovery and the event follower across shards, a queue's
//! slot moved to another master mid-run, and a master killed with a replica.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use leasehold_core::redis::{self, Value};
use leasehold_core::{
    discover_queues, BoxFuture, Client, EventFollower, JobId, JobState, Pipeline, PipelineOptions,
    Queue, QueueConfig, RetryPolicy, StepContext, StepError, StepSpec, Worker,
};
use leasehold_testkit::{wait_until_async, RedisCluster};
use serde::{Deserialize, Serialize};

/// Eight queues: three on the first master's slots, three on the second's,
/// two on the third's (checked by `spread`).
const QUEUES: [&str; 8] = ["q0", "q1", "q2", "q4", "q5", "q3", "q8", "q9"];
/// The pipeline of each queue.
const PIPELINES: [&str; 8] = ["p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"];
/// Generous deadline for every condition a test waits on.
const WAIT: Duration = Duration::from_secs(60);

/// How many times each job's step ran, by job id (every pipeline of the file).
static RUNS: Mutex<BTreeMap<String, u32>> = Mutex::new(BTreeMap::new());

leasehold_testkit::step_enum!(Only, "echo"; Run = "run");

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Input {
    n: u64,
    /// How long the step takes, in ms.
    ms: u64,
}

/// Pipeline `PIPELINES[I]` on queue `QUEUES[I]`: counts its runs and echoes `n`.
struct Echo<const I: usize>;

impl<const I: usize> Pipeline for Echo<I> {
    type Input = Input;
    type Step = Only;
    const NAME: &'static str = PIPELINES[I];
    const STEPS: &'static [StepSpec] = &[StepSpec::new("run")];
    fn options() -> PipelineOptions {
        PipelineOptions::new()
            .queue(QUEUES[I])
            .retry(RetryPolicy::exponential(3).initial_backoff(Duration::from_millis(10)))
    }
    fn run_step<'a>(
        &'a self,
        _index: usize,
        ctx: &'a StepContext,
        input: &'a Input,
        _previous: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, StepError>> {
        Box::pin(async move {
            if input.ms > 0 {
                tokio::time::sleep(Duration::from_millis(input.ms)).await;
            }
            if let Ok(mut runs) = RUNS.lock() {
                *runs.entry(ctx.job().to_string()).or_default() += 1;
            }
            Ok(input.n.to_string())
        })
    }
}

/// A worker serving every queue of [`QUEUES`].
async fn worker(url: &str) -> Worker {
    serving_all(Worker::builder(url)).await
}

/// `builder` serving every queue of [`QUEUES`], built.
async fn serving_all(builder: leasehold_core::WorkerBuilder) -> Worker {
    builder
        .pipeline(Echo::<0>)
        .pipeline(Echo::<1>)
        .pipeline(Echo::<2>)
        .pipeline(Echo::<3>)
        .pipeline(Echo::<4>)
        .pipeline(Echo::<5>)
        .pipeline(Echo::<6>)
        .pipeline(Echo::<7>)
        .concurrency(8)
        .lease_ttl(Duration::from_secs(3))
        .max_idle_wait(Duration::from_secs(30))
        .build()
        .await
        .expect("a worker on the cluster")
}

/// Enqueues `per_queue` jobs on queue `i` and returns their ids.
async fn enqueue(client: &Client, i: usize, per_queue: u64, ms: u64) -> Vec<JobId> {
    let q = client.queue(QUEUES[i]).expect("a queue");
    let mut ids = Vec::new();
    for n in 0..per_queue {
        let job = leasehold_core::NewJob::new(PIPELINES[i], &Input { n, ms }).expect("a job");
        ids.push(q.enqueue(job).await.expect("enqueue on the cluster").id);
    }
    ids
}

/// Waits until every job of `ids` on `queue` is in a terminal state.
async fn wait_terminal(queue: &Queue, ids: &[JobId]) {
    wait_until_async(WAIT, "every job ended", || {
        let queue = queue.clone();
        let ids = ids.to_vec();
        async move {
            for id in &ids {
                match queue.job(id).await {
                    Ok(Some(job)) if job.state.is_terminal() => {}
                    _ => return false,
                }
            }
            true
        }
    })
    .await;
}

/// The queues are spread over the three masters as the file says.
fn spread(cluster: &RedisCluster) {
    let owners: Vec<usize> = QUEUES
        .iter()
        .map(|q| cluster.owner_of_key(&format!("leasehold:{{{q}}}")))
        .collect();
    let masters = cluster.masters();
    for m in &masters {
        assert!(
            owners.contains(m),
            "no queue on master {m}: owners {owners:?}"
        );
    }
}

/// The clients blocked in a command, by name, on node `i` (`CLIENT LIST`).
fn blocked_in(cluster: &RedisCluster, i: usize, cmd: &str) -> bool {
    let list = match cluster.node(i).cmd(&["CLIENT", "LIST"]) {
        Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        Value::VerbatimString { text, .. } => text,
        other => panic!("CLIENT LIST answered {other:?}"),
    };
    list.contains(&format!("cmd={cmd}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_serves_eight_queues_on_three_shards_without_crossslot() {
    let cluster = RedisCluster::start(3, 0);
    spread(&cluster);
    let url = cluster.url();
    let client = Client::connect(&url, QueueConfig::default())
        .await
        .expect("a client of the cluster");
    let mut ids: Vec<Vec<JobId>> = Vec::new();
    for i in 0..QUEUES.len() {
        ids.push(enqueue(&client, i, 6, 0).await);
    }
    // the library is on every master
    for m in cluster.masters() {
        let libs = format!("{:?}", cluster.node(m).cmd(&["FUNCTION", "LIST"]));
        assert!(libs.contains("leasehold_"), "master {m}: {libs}");
    }
    let w = worker(&url).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(w.run_until(async {
        let _ = stopped.await;
    }));
    for (i, ids) in ids.iter().enumerate() {
        let q = client.queue(QUEUES[i]).unwrap();
        wait_terminal(&q, ids).await;
        for id in ids {
            let job = q.job(id).await.unwrap().unwrap();
            assert_eq!(job.state, JobState::Succeeded, "{job:?}");
            assert_eq!(job.attempt, 1, "{job:?}");
        }
        // every key of the queue lives on the master of its slot
        let owner = cluster.owner_of_key(q.keys().base());
        let on_owner: i64 =
            redis::from_redis_value(cluster.node(owner).cmd(&["EXISTS", &q.keys().events()]))
                .unwrap();
        assert_eq!(on_owner, 1, "queue {} on node {owner}", QUEUES[i]);
    }
    // idle, the worker blocks once per queue, on every shard at the same time
    let masters = cluster.masters();
    wait_until_async(WAIT, "every master has a blocked BLPOP", || {
        let all = masters.iter().all(|m| blocked_in(&cluster, *m, "blpop"));
        async move { all }
    })
    .await;
    // and an enqueue on any shard wakes its queue's wait
    let mut woken = Vec::new();
    for i in 0..QUEUES.len() {
        woken.push(enqueue(&client, i, 1, 0).await);
    }
    for (i, ids) in woken.iter().enumerate() {
        wait_terminal(&client.queue(QUEUES[i]).unwrap(), ids).await;
    }
    // discovery scans every master
    let found = discover_queues(client.queue("q0").unwrap().pool(), &QueueConfig::default())
        .await
        .unwrap();
    let mut want: Vec<String> = QUEUES.iter().map(|q| (*q).to_owned()).collect();
    want.sort();
    assert_eq!(found, want);
    let _ = stop.send(());
    tokio::time::timeout(WAIT, handle)
        .await
        .expect("the worker stopped")
        .unwrap()
        .unwrap();
    assert_eq!(cluster.error_count("CROSSSLOT"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_follower_reads_each_queues_stream_on_its_shard() {
    let cluster = RedisCluster::start(3, 0);
    let url = cluster.url();
    let client = Client::connect(&url, QueueConfig::default()).await.unwrap();
    let queues: Vec<String> = QUEUES.iter().map(|q| (*q).to_owned()).collect();
    let mut follower = EventFollower::connect(
        &url,
        &QueueConfig::default(),
        &queues,
        Duration::from_millis(500),
    )
    .await
    .expect("a follower of eight queues on three shards");
    for i in 0..QUEUES.len() {
        enqueue(&client, i, 1, 0).await;
    }
    let mut seen = std::collections::BTreeSet::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while seen.len() < QUEUES.len() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "events seen only from {seen:?}"
        );
        for event in follower.next_batch(100).await.expect("a batch of events") {
            seen.insert(event.queue.clone());
        }
    }
    assert_eq!(cluster.error_count("CROSSSLOT"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_without_the_library_gets_it_on_its_first_call() {
    let cluster = RedisCluster::start(3, 0);
    let url = cluster.url();
    let client = Client::connect(&url, QueueConfig::default()).await.unwrap();
    enqueue(&client, 0, 1, 0).await;
    // the master of q2 loses its functions (a new node, a FUNCTION FLUSH)
    let q2 = client.queue(QUEUES[2]).unwrap();
    let owner = cluster.owner_of_key(q2.keys().base());
    assert!(matches!(
        cluster.node(owner).cmd(&["FUNCTION", "FLUSH"]),
        Value::Okay
    ));
    let ids = enqueue(&client, 2, 1, 0).await;
    assert!(q2.job(&ids[0]).await.unwrap().is_some());
    let libs = format!("{:?}", cluster.node(owner).cmd(&["FUNCTION", "LIST"]));
    assert!(
        libs.contains("leasehold_"),
        "reloaded on node {owner}: {libs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_moved_mid_run_loses_no_job_and_runs_none_twice() {
    let cluster = RedisCluster::start(3, 0);
    let url = cluster.url();
    let client = Client::connect(&url, QueueConfig::default()).await.unwrap();
    let q = client.queue(QUEUES[0]).unwrap();
    let slot = cluster.slot_of(q.keys().base());
    let from = cluster.owner_of_slot(slot);
    let to = cluster
        .masters()
        .into_iter()
        .find(|m| *m != from)
        .expect("another master");
    let ids = enqueue(&client, 0, 60, 20).await;
    let w = worker(&url).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(w.run_until(async {
        let _ = stopped.await;
    }));
    // some jobs done, the others queued or running: move the slot
    wait_until_async(WAIT, "a few jobs succeeded", || {
        let q = q.clone();
        let ids = ids.clone();
        async move {
            let mut done = 0;
            for id in &ids {
                if matches!(q.job(id).await, Ok(Some(j)) if j.state == JobState::Succeeded) {
                    done += 1;
                }
            }
            done >= 5
        }
    })
    .await;
    let tryagain_before = cluster.error_count("TRYAGAIN");
    let migration = cluster.begin_slot_migration(slot, to);
    // half the keys moved: the queue is split over two nodes
    let keys: i64 = redis::from_redis_value(cluster.node(from).cmd(&[
        "CLUSTER",
        "COUNTKEYSINSLOT",
        &slot.to_string(),
    ]))
    .unwrap();
    cluster.move_slot_keys(migration, (keys as usize / 2).max(1));
    // a script call now is refused before it runs (its KEYS[1], the base, is
    // never a key: some named keys are missing) and retried by the client
    // (the client retries TRYAGAIN for a few seconds; a loaded machine may
    // take longer to finish the move, so a transient error is tried again,
    // with an input key: the job is created once however often it is sent)
    let late = {
        let q = q.clone();
        tokio::spawn(async move {
            loop {
                let job = leasehold_core::NewJob::new(PIPELINES[0], &Input { n: 999, ms: 0 })
                    .expect("a job")
                    .input_key("late");
                match q.enqueue(job).await {
                    Ok(e) => break vec![e.id],
                    Err(e) if e.is_transient() => continue,
                    Err(e) => panic!("enqueue during the move: {e}"),
                }
            }
        })
    };
    wait_until_async(WAIT, "a script met TRYAGAIN", || {
        let n = cluster.error_count("TRYAGAIN");
        async move { n > tryagain_before }
    })
    .await;
    while cluster.move_slot_keys(migration, 10) > 0 {}
    cluster.finish_slot_migration(migration);
    let mut all = ids.clone();
    all.extend(late.await.expect("the enqueue during the move"));
    wait_terminal(&q, &all).await;
    let _ = stop.send(());
    tokio::time::timeout(WAIT, handle)
        .await
        .expect("the worker stopped")
        .unwrap()
        .unwrap();
    assert_eq!(cluster.owner_of_slot(slot), to);
    let left: i64 = redis::from_redis_value(cluster.node(from).cmd(&[
        "CLUSTER",
        "COUNTKEYSINSLOT",
        &slot.to_string(),
    ]))
    .unwrap();
    assert_eq!(left, 0, "keys left behind on node {from}");
    let runs = RUNS.lock().unwrap().clone();
    for id in &all {
        let job = q.job(id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Succeeded, "{job:?}");
        assert_eq!(job.attempt, 1, "{job:?}");
        assert_eq!(job.attempts.len(), 1, "one attempt record: {job:?}");
        assert_eq!(runs.get(id.as_str()), Some(&1), "job {id} ran once");
    }
    assert_eq!(cluster.error_count("CROSSSLOT"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_fails_over_to_its_replica_and_jobs_end_truthfully() {
    let mut cluster = RedisCluster::start(3, 1);
    let url = cluster.url();
    let client = Client::connect(&url, QueueConfig::default()).await.unwrap();
    let mut ids: Vec<Vec<JobId>> = Vec::new();
    for i in 0..QUEUES.len() {
        ids.push(enqueue(&client, i, 8, 30).await);
    }
    let w = worker(&url).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(w.run_until(async {
        let _ = stopped.await;
    }));
    let q0 = client.queue(QUEUES[0]).unwrap();
    wait_until_async(WAIT, "q0 has a succeeded job", || {
        let q0 = q0.clone();
        let first = ids[0].clone();
        async move {
            for id in &first {
                if matches!(q0.job(id).await, Ok(Some(j)) if j.state == JobState::Succeeded) {
                    return true;
                }
            }
            false
        }
    })
    .await;
    let victim = cluster.owner_of_key(q0.keys().base());
    let replica = 3 + victim;
    cluster.kill(victim);
    cluster.take_over(replica);
    assert_eq!(cluster.owner_of_key(q0.keys().base()), replica);
    // every job the promoted replica knows ends in a terminal state, and a
    // job's state agrees with its attempt records
    for (i, ids) in ids.iter().enumerate() {
        let q = client.queue(QUEUES[i]).unwrap();
        let mut known = Vec::new();
        for id in ids {
            let found = loop {
                match q.job(id).await {
                    Ok(found) => break found,
                    Err(e) if e.is_transient() => {
                        tokio::time::sleep(Duration::from_millis(50)).await
                    }
                    Err(e) => panic!("reading job {id}: {e}"),
                }
            };
            if found.is_some() {
                known.push(id.clone());
            }
        }
        // settled: terminal, or STALE (a lease the promoted replica holds
        // but whose holder's later writes it never received expired and was
        // swept: an operator's decision, as after an AOF crash)
        wait_until_async(WAIT, "every known job settled", || {
            let q = q.clone();
            let known = known.clone();
            async move {
                for id in &known {
                    match q.job(id).await {
                        Ok(Some(job))
                            if job.state.is_terminal() || job.state == JobState::Stale => {}
                        _ => return false,
                    }
                }
                true
            }
        })
        .await;
        for id in &known {
            let job = q.job(id).await.unwrap().unwrap();
            assert!(
                matches!(job.state, JobState::Succeeded | JobState::Stale),
                "queue {}: {job:?}",
                QUEUES[i]
            );
            // the job's state and its attempt records agree
            let last = job.attempts.last().expect("an attempt record");
            assert_eq!(last.n, job.attempt, "{job:?}");
            if job.state == JobState::Succeeded {
                assert_eq!(last.state, JobState::Succeeded, "{job:?}");
            }
        }
        if i != 0 && cluster.owner_of_key(q.keys().base()) != replica {
            assert_eq!(known.len(), ids.len(), "a surviving shard lost no job");
        }
    }
    let _ = stop.send(());
    tokio::time::timeout(WAIT, handle)
        .await
        .expect("the worker stopped")
        .unwrap()
        .unwrap();
    assert_eq!(cluster.error_count("CROSSSLOT"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_user_in_the_url_is_used_on_every_node() {
    let cluster = RedisCluster::start(3, 0);
    for m in cluster.masters() {
        let reply = cluster.node(m).cmd(&[
            "ACL",
            "SETUSER",
            "app",
            "on",
            ">s3cret",
            "~leasehold:*",
            "resetchannels",
            "+@all",
            "-@dangerous",
            "+cluster|slots",
            "+cluster|shards",
            "+cluster|nodes",
            "+info",
        ]);
        assert!(
            matches!(reply, Value::Okay),
            "ACL SETUSER on {m}: {reply:?}"
        );
    }
    let url = cluster
        .url()
        .replace("redis+cluster://", "redis+cluster://app:s3cret@");
    let client = Client::connect(&url, QueueConfig::default())
        .await
        .expect("a client as user app");
    for i in 0..QUEUES.len() {
        enqueue(&client, i, 1, 0).await;
    }
    let found = discover_queues(client.queue("q0").unwrap().pool(), &QueueConfig::default())
        .await
        .unwrap();
    assert_eq!(found.len(), QUEUES.len());
    for m in cluster.masters() {
        let list = match cluster.node(m).cmd(&["CLIENT", "LIST"]) {
            Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
            Value::VerbatimString { text, .. } => text,
            other => panic!("CLIENT LIST answered {other:?}"),
        };
        assert!(
            list.contains("user=app"),
            "master {m} has no client as app: {list}"
        );
    }
    // a wrong password is refused as such
    let bad = cluster
        .url()
        .replace("redis+cluster://", "redis+cluster://app:wrong@");
    let err = Client::connect(&bad, QueueConfig::default())
        .await
        .expect_err("a wrong password");
    assert!(err.is_auth_failure(), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_on_a_cluster_pool_of_yours_waits_on_every_shard() {
    let cluster = RedisCluster::start(3, 0);
    let url = cluster.url();
    let pool = leasehold_core::connect_pool(&url, &QueueConfig::default()).unwrap();
    assert!(pool.is_cluster());
    let w = serving_all(Worker::builder_with_pool(pool.clone())).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(w.run_until(async {
        let _ = stopped.await;
    }));
    let masters = cluster.masters();
    wait_until_async(WAIT, "every master has a blocked BLPOP", || {
        let all = masters.iter().all(|m| blocked_in(&cluster, *m, "blpop"));
        async move { all }
    })
    .await;
    let client = Client::from_queue(Queue::with_pool(pool, "q0", QueueConfig::default()).unwrap());
    for (i, name) in QUEUES.iter().enumerate() {
        let ids = enqueue(&client, i, 1, 0).await;
        wait_terminal(&client.queue(name).unwrap(), &ids).await;
    }
    let _ = stop.send(());
    tokio::time::timeout(WAIT, handle)
        .await
        .expect("the worker stopped")
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_functions_scripts_run_by_evalsha_and_a_flushed_master_gets_them_again() {
    let cluster = RedisCluster::start(3, 0);
    for m in cluster.masters() {
        let reply = cluster.node(m).cmd(&[
            "ACL",
            "SETUSER",
            "nofn",
            "on",
            ">pw",
            "~*",
            "&*",
            "+@all",
            "-fcall",
            "-function",
        ]);
        assert!(
            matches!(reply, Value::Okay),
            "ACL SETUSER on {m}: {reply:?}"
        );
    }
    let url = cluster
        .url()
        .replace("redis+cluster://", "redis+cluster://nofn:pw@");
    let client = Client::connect(&url, QueueConfig::default())
        .await
        .expect("a client as a user without FCALL");
    for i in 0..QUEUES.len() {
        enqueue(&client, i, 1, 0).await;
    }
    // the master of q2 loses its script cache (a restart, a new node, SCRIPT FLUSH):
    // its next call answers NOSCRIPT, the client loads the script and calls again
    let q2 = client.queue(QUEUES[2]).unwrap();
    let owner = cluster.owner_of_key(q2.keys().base());
    assert!(matches!(
        cluster.node(owner).cmd(&["SCRIPT", "FLUSH"]),
        Value::Okay
    ));
    let ids = enqueue(&client, 2, 1, 0).await;
    assert!(q2.job(&ids[0]).await.unwrap().is_some());
    let stats = cluster.node(owner).info("commandstats");
    assert!(stats.contains("cmdstat_evalsha"), "{stats}");
    assert!(
        !stats.contains("cmdstat_fcall:calls"),
        "no FCALL ran: {stats}"
    );
    assert!(stats.contains("cmdstat_script|load"), "{stats}");
}
