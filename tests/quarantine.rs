//! Corrupted job keys, with a real worker: a wrong-type key in a lease batch
//! strands no good job, unreadable jobs go to the quarantine on first sight
//! (never leased again), an operator repairs or purges them, and the sweeper
//! quarantines what it cannot read instead of requeueing it.

mod support;

use std::time::Duration;

use leasehold::inspect::Inspector;
use leasehold::pipeline::{StepContext, StepError};
use leasehold::queue::{Client, JobId, JobState, Queue, QueueConfig};
use leasehold::redis;
use leasehold::worker::Worker;
use leasehold::{pipeline, Error};
use leasehold::{schemars, JsonSchema};
use leasehold_testkit::{wait_until_async, RedisServer};
use serde::{Deserialize, Serialize};
use support::{events, force_expire, get, zscore};

const WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Item {
    i: u64,
}

/// One step that does nothing.
#[derive(Clone)]
struct Noop;

#[pipeline(name = "noop", queue = "qz", max_attempts = 1)]
impl Noop {
    #[step]
    async fn work(&self, _ctx: &StepContext, _input: &Item) -> Result<(), StepError> {
        Ok(())
    }
}

async fn connect(redis: &RedisServer) -> (Client, Queue) {
    let client = Client::connect(&redis.url(), QueueConfig::default())
        .await
        .expect("client");
    let queue = client.queue_for::<Noop>().expect("queue");
    (client, queue)
}

async fn enqueue(client: &Client, n: u64) -> Vec<JobId> {
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(
            client
                .enqueue::<Noop>(&Item { i })
                .await
                .expect("enqueue")
                .id,
        );
    }
    ids
}

/// A worker running in a task until stopped.
struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    run: tokio::task::JoinHandle<leasehold::Result<()>>,
}

async fn start_worker(redis: &RedisServer, concurrency: usize) -> Running {
    let worker = Worker::builder(redis.url())
        .pipeline(Noop)
        .concurrency(concurrency)
        .lease_ttl(Duration::from_secs(2))
        .build()
        .await
        .expect("worker");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    Running { stop, run }
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(());
        self.run.await.expect("join").expect("worker ran");
    }
}

async fn succeeded(queue: &Queue, id: &JobId) -> bool {
    matches!(queue.job(id).await, Ok(Some(j)) if j.state == JobState::Succeeded)
}

async fn wait_succeeded(queue: &Queue, ids: &[JobId], what: &str) {
    wait_until_async(WAIT, what, || {
        let queue = queue.clone();
        let ids = ids.to_vec();
        async move {
            for id in &ids {
                if !succeeded(&queue, id).await {
                    return false;
                }
            }
            true
        }
    })
    .await;
}

/// How many `lease` events the job has.
fn leases_of(redis: &RedisServer, queue: &Queue, id: &JobId) -> usize {
    events(redis, queue)
        .iter()
        .filter(|e| e["op"] == "lease" && e["job"] == id.as_str())
        .count()
}

/// Writes raw bytes into a job hash field.
fn hset_bytes(redis: &RedisServer, key: &str, field: &str, value: &[u8]) {
    let mut con = redis.connection();
    let _: i64 = redis::cmd("HSET")
        .arg(key)
        .arg(field)
        .arg(value)
        .query(&mut con)
        .expect("HSET");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_type_job_key_in_a_lease_batch_strands_no_good_job() {
    let redis = RedisServer::start();
    let (client, queue) = connect(&redis).await;
    let ids = enqueue(&client, 10).await;
    let bad = ids[2].clone();
    let _: String = get(&redis, &["SET", &queue.keys().job(bad.as_str()), "oops"]);
    let worker = start_worker(&redis, 8).await;
    let good: Vec<JobId> = ids.iter().filter(|id| **id != bad).cloned().collect();
    wait_succeeded(&queue, &good, "the nine good jobs succeeded").await;
    worker.stop().await;

    let entry = queue
        .quarantine_entry(bad.as_str())
        .await
        .expect("read")
        .expect("the wrong-type job is quarantined");
    assert_eq!(entry.field, "(key)");
    assert!(entry.reason.contains("string"), "{entry:?}");
    assert_eq!(entry.from_index, "ready:noop");
    // nothing is left outside every index
    let ready: i64 = get(&redis, &["ZCARD", &queue.keys().ready("noop")]);
    let leases: i64 = get(&redis, &["ZCARD", &queue.keys().leases()]);
    assert_eq!((ready, leases), (0, 0));
    // the listing names the bad key and lists the rest
    let status = Inspector::new(queue.clone())
        .status()
        .await
        .expect("status");
    assert_eq!(status.counts.quarantined, 1);
    assert_eq!(status.quarantined[0].id, bad.as_str());
}

/// The corruptions of item 4: field, value.
const CORRUPTIONS: [(&str, &[u8]); 5] = [
    ("attempt", b"-1"),
    ("attempt", b"two"),
    ("input", b"\xff\xfe{\"i\":1}"),
    ("pipeline", b""), // deleted, below
    ("pipeline", b"no\xffop"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_jobs_are_quarantined_on_first_sight_and_never_leased_again() {
    let redis = RedisServer::start();
    let (client, queue) = connect(&redis).await;
    let bad = enqueue(&client, CORRUPTIONS.len() as u64).await;
    for (id, (field, value)) in bad.iter().zip(CORRUPTIONS) {
        let key = queue.keys().job(id.as_str());
        if value.is_empty() {
            let _: i64 = get(&redis, &["HDEL", &key, field]);
        } else {
            hset_bytes(&redis, &key, field, value);
        }
    }
    let first = enqueue(&client, 3).await;
    let worker = start_worker(&redis, 4).await;
    wait_succeeded(&queue, &first, "the good jobs succeeded").await;
    wait_until_async(WAIT, "every bad job quarantined", || {
        let queue = queue.clone();
        async move { queue.quarantined().await.map(|q| q.len()).unwrap_or(0) == bad_len() }
    })
    .await;
    // more lease calls pass (a second batch runs), and none of the bad jobs
    // is leased (before: leased, left LEASED, swept and leased again)
    let later = enqueue(&client, 3).await;
    wait_succeeded(&queue, &later, "a later batch succeeded").await;
    for (id, (field, _)) in bad.iter().zip(CORRUPTIONS) {
        assert_eq!(leases_of(&redis, &queue, id), 0, "{field}: leased");
        let e = queue
            .quarantine_entry(id.as_str())
            .await
            .expect("read")
            .unwrap_or_else(|| panic!("{field}: not quarantined"));
        assert_eq!(e.field, field, "{e:?}");
    }
    let inspector = Inspector::new(queue.clone());
    let status = inspector.status().await.expect("status");
    assert_eq!(status.counts.quarantined, CORRUPTIONS.len() as u64);
    assert_eq!(status.counts.queued, 0);

    // repair: a job still unreadable is refused, naming the field
    let attempt_bad = &bad[1];
    match queue.repair_quarantined(attempt_bad, "alice").await {
        Err(Error::Corrupt { field, .. }) => assert_eq!(field, "attempt"),
        other => panic!("repair of an unfixed job: {other:?}"),
    }
    // fixed, it is requeued and runs
    let _: i64 = get(
        &redis,
        &[
            "HSET",
            &queue.keys().job(attempt_bad.as_str()),
            "attempt",
            "1",
        ],
    );
    let pipeline = queue
        .repair_quarantined(attempt_bad, "alice")
        .await
        .expect("repair");
    assert_eq!(pipeline, "noop");
    wait_succeeded(
        &queue,
        std::slice::from_ref(attempt_bad),
        "the repaired job ran",
    )
    .await;
    assert!(queue
        .quarantine_entry(attempt_bad.as_str())
        .await
        .expect("read")
        .is_none());
    // purge deletes the job and its records
    let purged = &bad[2];
    queue
        .purge_quarantined(purged, "alice")
        .await
        .expect("purge");
    let exists: i64 = get(&redis, &["EXISTS", &queue.keys().job(purged.as_str())]);
    assert_eq!(exists, 0);
    assert!(zscore(&redis, &queue.keys().quarantine(), purged.as_str()).is_none());
    assert!(matches!(
        queue.purge_quarantined(purged, "alice").await,
        Err(Error::InvalidArgument(_))
    ));
    worker.stop().await;
}

fn bad_len() -> usize {
    CORRUPTIONS.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_quarantines_an_expired_lease_it_cannot_read_instead_of_dropping_it() {
    let redis = RedisServer::start();
    let (client, queue) = connect(&redis).await;
    let ids = enqueue(&client, 2).await;
    let leased = queue
        .lease("w1", &["noop"], 2, Duration::from_secs(60))
        .await
        .expect("lease");
    assert_eq!(leased.leases.len(), 2);
    let (bogus, typed) = (&ids[0], &ids[1]);
    let _: i64 = get(
        &redis,
        &["HSET", &queue.keys().job(bogus.as_str()), "state", "BOGUS"],
    );
    force_expire(&redis, &queue, bogus);
    force_expire(&redis, &queue, typed);
    let _: i64 = get(&redis, &["DEL", &queue.keys().job(typed.as_str())]);
    let _: i64 = get(&redis, &["RPUSH", &queue.keys().job(typed.as_str()), "x"]);
    // before: the BOGUS job was dropped from every index, the list key failed every sweep
    queue
        .sweep(100)
        .await
        .expect("sweep reads past unreadable jobs");
    let q = queue.quarantined().await.expect("read");
    let fields: Vec<(&str, &str)> = q
        .iter()
        .map(|e| (e.id.as_str(), e.field.as_str()))
        .collect();
    assert!(fields.contains(&(bogus.as_str(), "state")), "{q:?}");
    assert!(fields.contains(&(typed.as_str(), "(key)")), "{q:?}");
    assert!(q.iter().all(|e| e.from_index == "leases"));
    let leases: i64 = get(&redis, &["ZCARD", &queue.keys().leases()]);
    assert_eq!(leases, 0);
}

/// A job hash whose `id` field names another job is corrupt: the lease that
/// pops it quarantines it (field `id`) and leases the others, the sweep that
/// meets it quarantines it too, and reading it names its key and the field;
/// it is never handed out as the other job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_hash_naming_another_job_is_quarantined_never_processed() {
    let redis = RedisServer::start();
    let (client, queue) = connect(&redis).await;
    let ids = enqueue(&client, 3).await;
    let (liar, named, good) = (&ids[0], &ids[1], &ids[2]);
    let liar_key = queue.keys().job(liar.as_str());
    let _: i64 = get(&redis, &["HSET", &liar_key, "id", named.as_str()]);
    // jobs: listed apart as unreadable (key and field), not as the other job
    let page = Inspector::new(queue.clone())
        .list_jobs(&Default::default(), Default::default())
        .await
        .expect("jobs");
    let listed: Vec<&JobId> = page.jobs.iter().map(|s| &s.id).collect();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed.iter().all(|id| *id != liar), "{listed:?}");
    assert!(
        page.unreadable
            .iter()
            .any(|u| u.key == liar_key && u.field == "id"),
        "{:?}",
        page.unreadable
    );
    let leased = queue
        .lease("w1", &["noop"], 3, Duration::from_secs(60))
        .await
        .expect("lease");
    let jobs: Vec<&JobId> = leased.leases.iter().map(|l| &l.job).collect();
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    assert!(jobs.contains(&named) && jobs.contains(&good), "{jobs:?}");
    let entry = queue
        .quarantine_entry(liar.as_str())
        .await
        .expect("read")
        .expect("the lying hash is quarantined");
    assert_eq!(entry.field, "id");
    assert!(entry.reason.contains(named.as_str()), "{entry:?}");
    assert_eq!(leases_of(&redis, &queue, liar), 0);
    // show: the key and the field, not the other job
    match Inspector::new(queue.clone()).job_detail(liar).await {
        Err(Error::Corrupt {
            key,
            field,
            problem,
        }) => {
            assert_eq!((key.as_str(), field.as_str()), (liar_key.as_str(), "id"));
            assert!(problem.contains(named.as_str()), "{problem}");
        }
        other => panic!("show of the lying hash: {other:?}"),
    }
    // repair refuses it while it still lies
    match queue.repair_quarantined(liar, "alice").await {
        Err(Error::Corrupt { field, .. }) => assert_eq!(field, "id"),
        other => panic!("repair of a lying hash: {other:?}"),
    }

    // a leased job whose hash starts lying is quarantined by the sweep
    let named_key = queue.keys().job(named.as_str());
    let _: i64 = get(&redis, &["HSET", &named_key, "id", good.as_str()]);
    force_expire(&redis, &queue, named);
    queue.sweep(100).await.expect("sweep");
    let entry = queue
        .quarantine_entry(named.as_str())
        .await
        .expect("read")
        .expect("the sweep quarantines it");
    assert_eq!(
        (entry.field.as_str(), entry.from_index.as_str()),
        ("id", "leases")
    );
    let state: Option<String> = get(&redis, &["HGET", &named_key, "state"]);
    assert_eq!(
        state.as_deref(),
        Some("LEASED"),
        "not requeued as another job"
    );
}

/// `show`, `jobs` and `status` name the key of the wrong Redis type (Redis's
/// own WRONGTYPE reply does not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_the_wrong_type_is_named_by_show_jobs_and_status() {
    let redis = RedisServer::start();
    let (client, queue) = connect(&redis).await;
    let ids = enqueue(&client, 2).await;
    let inspector = Inspector::new(queue.clone());
    let job_key = queue.keys().job(ids[0].as_str());
    let _: i64 = get(&redis, &["DEL", &job_key]);
    let _: i64 = get(&redis, &["RPUSH", &job_key, "x"]);
    let named = |e: Error, key: &str| match e {
        Error::Corrupt { key: k, field, .. } => {
            assert_eq!((k.as_str(), field.as_str()), (key, "(key)"));
        }
        other => panic!("not naming {key}: {other:?}"),
    };
    named(
        inspector.job_detail(&ids[0]).await.expect_err("show"),
        &job_key,
    );
    named(queue.job(&ids[0]).await.expect_err("read"), &job_key);
    // a fixed key of the wrong type fails status and jobs: the key is named
    let leases = queue.keys().leases();
    let _: String = get(&redis, &["SET", &leases, "oops"]);
    named(inspector.status().await.expect_err("status"), &leases);
    // a good job read beside it: the lease index is named, not the job
    named(queue.job(&ids[1]).await.expect_err("read"), &leases);
    named(
        inspector
            .list_jobs(&Default::default(), Default::default())
            .await
            .expect_err("jobs"),
        &leases,
    );
    let _: i64 = get(&redis, &["DEL", &leases]);
    let ready = queue.keys().ready("noop");
    let _: i64 = get(&redis, &["DEL", &ready]);
    let _: i64 = get(&redis, &["SADD", &ready, ids[1].as_str()]);
    named(inspector.status().await.expect_err("status"), &ready);
}
