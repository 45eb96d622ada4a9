//! Wake-up lists: one per pipeline. Making a job ready pushes a token on its
//! pipeline's list only, so an idle worker of another pipeline never takes it;
//! a lease that empties a pipeline's ready set deletes the tokens nobody needs.

mod support;

use std::time::Duration;

use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};
use leasehold::queue::{Client, JobId, JobState, NewJob, QueueConfig};
use leasehold::worker::Worker;
use leasehold::{schemars, JsonSchema};
use leasehold_testkit::{wait_until_async, RedisServer};
use serde::{Deserialize, Serialize};
use support::{connect, get, TTL};

/// Deadline for the waits of this file (worker start-up included).
const WAIT: Duration = Duration::from_secs(30);

fn llen(srv: &RedisServer, key: &str) -> i64 {
    get(srv, &["LLEN", key])
}

#[tokio::test]
async fn tokens_go_to_their_pipeline_and_a_lease_that_drains_it_drops_them() {
    let srv = RedisServer::start();
    let q = connect(&srv, "wk").await;
    let k = q.keys().clone();
    for _ in 0..3 {
        q.enqueue(NewJob::from_json("pa", "{}"))
            .await
            .expect("enqueue");
    }
    q.enqueue(NewJob::from_json("pb", "{}"))
        .await
        .expect("enqueue");
    assert_eq!(llen(&srv, &k.wake("pa")), 3);
    assert_eq!(llen(&srv, &k.wake("pb")), 1);

    // a lease that leaves a job ready keeps the tokens: a worker may still need one
    let first = q.lease("w1", &["pa"], 2, TTL).await.expect("lease");
    assert_eq!(first.leases.len(), 2);
    assert_eq!(llen(&srv, &k.wake("pa")), 3);
    // the one that takes the last ready job drops them; pb's are not touched
    let second = q.lease("w1", &["pa"], 2, TTL).await.expect("lease");
    assert_eq!(second.leases.len(), 1);
    assert_eq!(llen(&srv, &k.wake("pa")), 0);
    assert_eq!(llen(&srv, &k.wake("pb")), 1);

    // a lease over both pipelines that finds them empty drops both
    let both = q.lease("w2", &["pa", "pb"], 5, TTL).await.expect("lease");
    assert_eq!(both.leases.len(), 1);
    assert_eq!(llen(&srv, &k.wake("pb")), 0);

    // a job handed back wakes its own pipeline again
    q.release(&first.leases[0]).await.expect("release");
    assert_eq!(llen(&srv, &k.wake("pa")), 1);
    assert_eq!(llen(&srv, &k.wake("pb")), 0);

    // while a delayed job waits, its token stays even when the ready set empties:
    // it tells an idle worker a due time sooner than the one it may sleep until
    q.enqueue(NewJob::from_json("pc", "{}").delay(Duration::from_secs(3600)))
        .await
        .expect("enqueue");
    q.enqueue(NewJob::from_json("pc", "{}"))
        .await
        .expect("enqueue");
    assert_eq!(llen(&srv, &k.wake("pc")), 2);
    let ready = q.lease("w3", &["pc"], 5, TTL).await.expect("lease");
    assert_eq!(ready.leases.len(), 1);
    assert!(ready.next_due.is_some(), "the delayed job's due time");
    assert_eq!(llen(&srv, &k.wake("pc")), 2);
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Item {
    i: u64,
}

#[derive(Clone)]
struct Alpha;

#[pipeline(name = "alpha", queue = "wk2", max_attempts = 1)]
impl Alpha {
    #[step]
    async fn only(&self, _ctx: &StepContext, _input: &Item) -> Result<(), StepError> {
        Ok(())
    }
}

#[derive(Clone)]
struct Beta;

#[pipeline(name = "beta", queue = "wk2", max_attempts = 1)]
impl Beta {
    #[step]
    async fn only(&self, _ctx: &StepContext, _input: &Item) -> Result<(), StepError> {
        Ok(())
    }
}

/// Two idle workers of one queue, one per pipeline, blocked with an idle wait
/// far longer than the test: every job must be picked up through its own
/// pipeline's wake-up, never after a token went to the other worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_workers_of_different_pipelines_each_get_their_own_wake_ups() {
    let srv = RedisServer::start();
    let client = Client::connect(&srv.url(), QueueConfig::default())
        .await
        .expect("client");
    let mut stops = Vec::new();
    let mut runs = Vec::new();
    for which in ["alpha", "beta"] {
        let builder = Worker::builder(srv.url())
            .concurrency(1)
            .max_idle_wait(Duration::from_secs(120));
        let builder = if which == "alpha" {
            builder.pipeline(Alpha)
        } else {
            builder.pipeline(Beta)
        };
        let worker = builder.build().await.expect("worker");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        runs.push(tokio::spawn(worker.run_until(async {
            let _ = stopped.await;
        })));
        stops.push(stop);
    }
    let queue = client.queue_for::<Alpha>().expect("queue");
    let blocked = || {
        let list = match srv.cmd(&["CLIENT", "LIST"]) {
            leasehold::redis::Value::BulkString(b) => String::from_utf8(b).expect("utf8"),
            leasehold::redis::Value::VerbatimString { text, .. } => text,
            other => panic!("CLIENT LIST: {other:?}"),
        };
        list.matches("cmd=blpop").count()
    };
    for round in 0..4u64 {
        wait_until_async(WAIT, "both workers blocked on their wake lists", || {
            let n = blocked();
            async move { n == 2 }
        })
        .await;
        // alternate which pipeline's job comes first
        let id: JobId = if round % 2 == 0 {
            client.enqueue::<Beta>(&Item { i: round }).await
        } else {
            client.enqueue::<Alpha>(&Item { i: round }).await
        }
        .expect("enqueue")
        .id;
        wait_until_async(
            Duration::from_secs(10),
            "the job picked up by its pipeline's idle worker",
            || {
                let queue = queue.clone();
                let id = id.clone();
                async move {
                    matches!(queue.job(&id).await, Ok(Some(job)) if job.state == JobState::Succeeded)
                }
            },
        )
        .await;
    }
    for stop in stops {
        let _ = stop.send(());
    }
    for run in runs {
        run.await.expect("join").expect("worker ran");
    }
}
