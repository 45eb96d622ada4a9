//! The forbidden moves of `docs/design.md`, and the moves of callers that no
//! longer hold a job's lease, are refused by the scripts with a typed error
//! that names the job, its current state and the refused operation, and
//! change nothing: every key of the queue (hashes, zsets, streams, strings,
//! TTL presence) is byte-for-byte the same before and after.
//!
//! Lease expiry is forced by rewriting the job's score in `<base>:leases` to 0
//! (`ZADD XX`) and sweeping, never by waiting.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold_core::redis::Value;
use leasehold_core::transitions::Op;
use leasehold_core::Error;
use leasehold_core::{AttemptError, JobId, JobState, NewJob, Queue, QueueConfig};
use leasehold_core::{Finished, Lease, Outcome, Renewal, Started};
use leasehold_testkit::RedisServer;
use support::server::get;

const QUEUE: &str = "q";
const PATTERN: &str = "leasehold:{q}:*";
const PIPELINE: &str = "orders_sync";
const TTL: Duration = Duration::from_secs(300);

struct Fixture {
    srv: RedisServer,
    queue: Queue,
}

impl Fixture {
    async fn new() -> Fixture {
        let srv = RedisServer::start();
        let queue = Queue::connect(&srv.url(), QUEUE, QueueConfig::default())
            .await
            .expect("connect to the private redis-server");
        Fixture { srv, queue }
    }

    fn dump(&self) -> BTreeMap<String, String> {
        self.srv.dump_but_outputs(PATTERN)
    }

    async fn enqueue(&self) -> JobId {
        let job = NewJob::from_json(PIPELINE, r#"{"shop":"a","hour":0}"#)
            .resource("shop:a")
            .input_key("shop:a:hour:0");
        let enqueued = self.queue.enqueue(job).await.expect("enqueue");
        assert!(enqueued.created);
        enqueued.id
    }

    async fn lease_one(&self, worker: &str, id: &JobId) -> Lease {
        let mut leased = self
            .queue
            .lease(worker, &[PIPELINE], 1, TTL)
            .await
            .expect("lease");
        assert_eq!(leased.leases.len(), 1, "{worker} leases one job");
        let lease = leased.leases.remove(0);
        assert_eq!(&lease.job, id);
        lease
    }

    async fn running(&self, worker: &str, id: &JobId) -> Lease {
        let lease = self.lease_one(worker, id).await;
        assert_eq!(
            self.queue.start(&lease, "fetch").await.expect("start"),
            Started::Running
        );
        self.queue
            .checkpoint(&lease, "fetch", r#"{"rows":10}"#, Some("load"))
            .await
            .expect("checkpoint");
        lease
    }

    async fn state(&self, id: &JobId) -> JobState {
        self.queue
            .job(id)
            .await
            .expect("read job")
            .expect("job exists")
            .state
    }

    /// Forces the job's lease expired and sweeps; returns the sweep's single move.
    async fn expire_and_sweep(&self, id: &JobId) -> (JobState, JobState) {
        let reply = self
            .srv
            .cmd(&["ZADD", &self.queue.keys().leases(), "XX", "0", id.as_str()]);
        assert!(matches!(reply, Value::Int(0)), "ZADD XX answered {reply:?}");
        let report = self.queue.sweep(100).await.expect("sweep");
        assert_eq!(report.moves.len(), 1, "{report:?}");
        assert_eq!(&report.moves[0].job, id);
        (report.moves[0].from, report.moves[0].to)
    }

    fn lock_holder(&self) -> Option<String> {
        get(&self.srv, &["GET", &self.queue.keys().lock("shop:a")])
    }
}

fn failed(retryable: bool) -> Outcome {
    Outcome::Failed {
        error: AttemptError {
            kind: "validation".into(),
            message: "3 orders have negative totals".into(),
            retryable,
            retries_exhausted: false,
        },
        backoff: Duration::ZERO,
        cleanup_needed: false,
    }
}

fn cancelled() -> Outcome {
    Outcome::Cancelled {
        reason: "operator asked".into(),
        cleanup_needed: false,
    }
}

/// What a refusal must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// `Error::Refused`: the table has no such move from the job's state.
    Refused,
    /// `Error::LeaseLost`: the caller does not hold the lease.
    LeaseLost,
}

/// Asserts `result` is the expected typed refusal for `job` in `state` by
/// `op`, that its Display names all three, and that it counts as a lost lease.
#[track_caller]
fn assert_refusal<T: std::fmt::Debug>(
    result: Result<T, Error>,
    expect: Expect,
    job: &JobId,
    state: JobState,
    op: Op,
) {
    let e = match result {
        Ok(v) => panic!("{op} on a {state} job was accepted: {v:?}"),
        Err(e) => e,
    };
    match (&e, expect) {
        (
            Error::Refused {
                job: j,
                state: s,
                op: o,
                ..
            },
            Expect::Refused,
        )
        | (
            Error::LeaseLost {
                job: j,
                state: s,
                op: o,
            },
            Expect::LeaseLost,
        ) => {
            assert_eq!(j, job.as_str(), "{e}");
            assert_eq!(*s, state, "{e}");
            assert_eq!(*o, op, "{e}");
        }
        _ => panic!("{op} on a {state} job: expected {expect:?}, got {e:?}"),
    }
    let display = e.to_string();
    for needle in [job.as_str(), state.as_str(), op.as_str()] {
        assert!(
            display.contains(needle),
            "error {display:?} does not name {needle:?}"
        );
    }
    assert!(e.is_lease_lost(), "{e:?} must tell the caller to stop");
}

/// Runs `f`, asserting every key of the queue is unchanged by it.
macro_rules! unchanged {
    ($fx:expr, $what:expr, $body:expr) => {{
        let before = $fx.dump();
        let out = $body;
        let after = $fx.dump();
        assert_eq!(before, after, "{} changed the queue's keys", $what);
        out
    }};
}

#[tokio::test]
async fn queued_to_succeeded_via_finish_is_refused() {
    let fx = Fixture::new().await;
    let id = fx.enqueue().await;

    // A holder that handed the job back, then tries to finish it anyway.
    let lease = fx.lease_one("worker-1", &id).await;
    fx.queue.release(&lease).await.expect("release");
    assert_eq!(fx.state(&id).await, JobState::Queued);
    for outcome in [Outcome::Succeeded, failed(false), failed(true), cancelled()] {
        let result = unchanged!(fx, format!("finish {outcome:?} on QUEUED"), {
            fx.queue.finish(&lease, &outcome).await
        });
        assert_refusal(result, Expect::Refused, &id, JobState::Queued, Op::Finish);
    }

    // A caller that never held a lease, with a made-up one.
    let forged = Lease {
        token: "forged".into(),
        fence: 0,
        ..lease.clone()
    };
    let result = unchanged!(fx, "forged finish on QUEUED", {
        fx.queue.finish(&forged, &Outcome::Succeeded).await
    });
    assert_refusal(result, Expect::Refused, &id, JobState::Queued, Op::Finish);
    assert_eq!(fx.state(&id).await, JobState::Queued);
}

#[tokio::test]
async fn failed_to_running_via_start_is_refused() {
    let fx = Fixture::new().await;
    let id = fx.enqueue().await;
    let lease = fx.running("worker-1", &id).await;
    assert_eq!(
        fx.queue
            .finish(&lease, &failed(false))
            .await
            .expect("finish"),
        Finished::Ended(JobState::Failed)
    );
    let result = unchanged!(fx, "start on FAILED", {
        fx.queue.start(&lease, "fetch").await
    });
    assert_refusal(result, Expect::Refused, &id, JobState::Failed, Op::Start);

    // Also after a retryable failure on the last attempt.
    let id2 = {
        let job = NewJob::from_json(PIPELINE, r#"{"shop":"b"}"#).max_attempts(1);
        fx.queue.enqueue(job).await.expect("enqueue").id
    };
    let lease2 = fx.running("worker-2", &id2).await;
    assert_eq!(
        fx.queue
            .finish(&lease2, &failed(true))
            .await
            .expect("finish"),
        Finished::Ended(JobState::Failed)
    );
    let result = unchanged!(fx, "start on FAILED (retryable, exhausted)", {
        fx.queue.start(&lease2, "fetch").await
    });
    assert_refusal(result, Expect::Refused, &id2, JobState::Failed, Op::Start);
    assert_eq!(fx.state(&id).await, JobState::Failed);
    assert_eq!(fx.state(&id2).await, JobState::Failed);
}

#[tokio::test]
async fn succeeded_to_failed_via_finish_is_refused() {
    let fx = Fixture::new().await;
    let id = fx.enqueue().await;
    let lease = fx.running("worker-1", &id).await;
    assert_eq!(
        fx.queue
            .finish(&lease, &Outcome::Succeeded)
            .await
            .expect("finish"),
        Finished::Ended(JobState::Succeeded)
    );
    let record_before = fx.queue.job(&id).await.unwrap().unwrap().attempts;
    for outcome in [failed(false), failed(true), cancelled(), Outcome::Succeeded] {
        let result = unchanged!(fx, format!("finish {outcome:?} on SUCCEEDED"), {
            fx.queue.finish(&lease, &outcome).await
        });
        assert_refusal(
            result,
            Expect::Refused,
            &id,
            JobState::Succeeded,
            Op::Finish,
        );
    }
    let job = fx.queue.job(&id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Succeeded);
    assert_eq!(job.attempts, record_before, "the terminal record is kept");
}

#[tokio::test]
async fn running_to_queued_via_release_is_refused() {
    let fx = Fixture::new().await;
    let id = fx.enqueue().await;
    let lease = fx.running("worker-1", &id).await;
    let result = unchanged!(fx, "release on RUNNING", { fx.queue.release(&lease).await });
    assert_refusal(result, Expect::Refused, &id, JobState::Running, Op::Release);
    assert_eq!(fx.state(&id).await, JobState::Running);
    assert_eq!(fx.lock_holder().as_deref(), Some(id.as_str()));
    // The holder still holds it.
    assert_eq!(
        fx.queue.renew(&[&lease]).await.expect("renew"),
        vec![Renewal::Held]
    );
}

#[tokio::test]
async fn a_wrong_token_moves_nothing() {
    let fx = Fixture::new().await;
    let id = fx.enqueue().await;
    let lease = fx.lease_one("worker-1", &id).await;
    let wrong = Lease {
        token: format!("{}x", lease.token),
        ..lease.clone()
    };

    // LEASED
    let result = unchanged!(fx, "start with a wrong token", {
        fx.queue.start(&wrong, "fetch").await
    });
    assert_refusal(result, Expect::LeaseLost, &id, JobState::Leased, Op::Start);
    let result = unchanged!(fx, "release with a wrong token", {
        fx.queue.release(&wrong).await
    });
    assert_refusal(
        result,
        Expect::LeaseLost,
        &id,
        JobState::Leased,
        Op::Release,
    );
    let result = unchanged!(fx, "finish(cancelled) with a wrong token", {
        fx.queue.finish(&wrong, &cancelled()).await
    });
    assert_refusal(result, Expect::LeaseLost, &id, JobState::Leased, Op::Finish);
    let renewal = unchanged!(fx, "renew with a wrong token", {
        fx.queue.renew(&[&wrong]).await.expect("renew")
    });
    assert_eq!(
        renewal,
        vec![Renewal::Lost {
            state: Some(JobState::Leased)
        }]
    );

    // RUNNING
    assert_eq!(
        fx.queue.start(&lease, "fetch").await.expect("start"),
        Started::Running
    );
    let result = unchanged!(fx, "checkpoint with a wrong token", {
        fx.queue.checkpoint(&wrong, "fetch", "{}", None).await
    });
    assert_refusal(
        result,
        Expect::LeaseLost,
        &id,
        JobState::Running,
        Op::Checkpoint,
    );
    for outcome in [Outcome::Succeeded, failed(false), failed(true), cancelled()] {
        let result = unchanged!(fx, format!("finish {outcome:?} with a wrong token"), {
            fx.queue.finish(&wrong, &outcome).await
        });
        assert_refusal(
            result,
            Expect::LeaseLost,
            &id,
            JobState::Running,
            Op::Finish,
        );
    }
    let renewal = unchanged!(fx, "renew with a wrong token", {
        fx.queue.renew(&[&wrong]).await.expect("renew")
    });
    assert_eq!(
        renewal,
        vec![Renewal::Lost {
            state: Some(JobState::Running)
        }]
    );

    // A batched renewal reports each lease on its own.
    assert_eq!(
        fx.queue.renew(&[&wrong, &lease]).await.expect("renew"),
        vec![
            Renewal::Lost {
                state: Some(JobState::Running)
            },
            Renewal::Held
        ]
    );
    assert_eq!(
        fx.queue
            .finish(&lease, &Outcome::Succeeded)
            .await
            .expect("the real holder finishes"),
        Finished::Ended(JobState::Succeeded)
    );
}

#[tokio::test]
async fn a_holder_swept_to_stale_is_refused() {
    let fx = Fixture::new().await;
    let id = fx.enqueue().await;
    let lease = fx.running("worker-1", &id).await;
    assert_eq!(
        fx.expire_and_sweep(&id).await,
        (JobState::Running, JobState::Stale)
    );
    assert_eq!(fx.state(&id).await, JobState::Stale);
    // The default STALE policy keeps the resource locked for the operator.
    assert_eq!(fx.lock_holder().as_deref(), Some(id.as_str()));

    let result = unchanged!(fx, "checkpoint on STALE", {
        fx.queue
            .checkpoint(&lease, "load", r#"{"rows":10}"#, None)
            .await
    });
    assert_refusal(
        result,
        Expect::Refused,
        &id,
        JobState::Stale,
        Op::Checkpoint,
    );
    for outcome in [Outcome::Succeeded, failed(false), failed(true), cancelled()] {
        let result = unchanged!(fx, format!("finish {outcome:?} on STALE"), {
            fx.queue.finish(&lease, &outcome).await
        });
        assert_refusal(result, Expect::Refused, &id, JobState::Stale, Op::Finish);
    }
    let result = unchanged!(fx, "start on STALE", {
        fx.queue.start(&lease, "fetch").await
    });
    assert_refusal(result, Expect::Refused, &id, JobState::Stale, Op::Start);
    let result = unchanged!(fx, "release on STALE", { fx.queue.release(&lease).await });
    assert_refusal(result, Expect::Refused, &id, JobState::Stale, Op::Release);
    // Renewal is a batch call: a lost lease is reported in its slot, not as an error.
    let renewal = unchanged!(fx, "renew on STALE", {
        fx.queue.renew(&[&lease]).await.expect("renew")
    });
    assert_eq!(
        renewal,
        vec![Renewal::Lost {
            state: Some(JobState::Stale)
        }]
    );
    // A second sweep finds nothing to do.
    let report = unchanged!(fx, "a second sweep", {
        fx.queue.sweep(100).await.expect("sweep")
    });
    assert!(report.moves.is_empty(), "{report:?}");
    assert_eq!(fx.state(&id).await, JobState::Stale);
}

#[tokio::test]
async fn a_holder_swept_back_to_queued_and_re_leased_is_refused() {
    let fx = Fixture::new().await;
    let id = fx.enqueue().await;
    let old = fx.lease_one("worker-1", &id).await;
    assert_eq!(
        fx.expire_and_sweep(&id).await,
        (JobState::Leased, JobState::Queued)
    );
    assert_eq!(fx.lock_holder(), None, "the lock went with the lease");

    // While QUEUED, the old holder can do nothing.
    let result = unchanged!(fx, "start on QUEUED by the swept holder", {
        fx.queue.start(&old, "fetch").await
    });
    assert_refusal(result, Expect::Refused, &id, JobState::Queued, Op::Start);

    let new = fx.lease_one("worker-2", &id).await;
    assert!(
        new.fence > old.fence,
        "fences grow: {} > {}",
        new.fence,
        old.fence
    );
    assert_ne!(new.token, old.token);
    assert_eq!(
        new.attempt, old.attempt,
        "a sweep back to QUEUED is the same attempt"
    );
    assert_eq!(fx.lock_holder().as_deref(), Some(id.as_str()));

    // LEASED by worker-2: worker-1's calls are refused.
    let result = unchanged!(fx, "start by the old holder", {
        fx.queue.start(&old, "fetch").await
    });
    assert_refusal(result, Expect::LeaseLost, &id, JobState::Leased, Op::Start);
    let result = unchanged!(fx, "release by the old holder", {
        fx.queue.release(&old).await
    });
    assert_refusal(
        result,
        Expect::LeaseLost,
        &id,
        JobState::Leased,
        Op::Release,
    );
    let result = unchanged!(fx, "finish(cancelled) by the old holder", {
        fx.queue.finish(&old, &cancelled()).await
    });
    assert_refusal(result, Expect::LeaseLost, &id, JobState::Leased, Op::Finish);
    // LEASED→SUCCEEDED does not exist, whoever asks.
    let result = unchanged!(fx, "finish(succeeded) by the old holder", {
        fx.queue.finish(&old, &Outcome::Succeeded).await
    });
    assert_refusal(result, Expect::Refused, &id, JobState::Leased, Op::Finish);
    let renewal = unchanged!(fx, "renew by the old holder", {
        fx.queue.renew(&[&old]).await.expect("renew")
    });
    assert_eq!(
        renewal,
        vec![Renewal::Lost {
            state: Some(JobState::Leased)
        }]
    );

    // The new holder is unaffected.
    assert_eq!(
        fx.queue.renew(&[&new]).await.expect("renew"),
        vec![Renewal::Held]
    );
    assert_eq!(
        fx.queue.start(&new, "fetch").await.expect("start"),
        Started::Running
    );

    // RUNNING under worker-2: worker-1's calls are still refused.
    let result = unchanged!(fx, "checkpoint by the old holder", {
        fx.queue.checkpoint(&old, "fetch", "{}", Some("load")).await
    });
    assert_refusal(
        result,
        Expect::LeaseLost,
        &id,
        JobState::Running,
        Op::Checkpoint,
    );
    for outcome in [Outcome::Succeeded, failed(false), failed(true), cancelled()] {
        let result = unchanged!(fx, format!("finish {outcome:?} by the old holder"), {
            fx.queue.finish(&old, &outcome).await
        });
        assert_refusal(
            result,
            Expect::LeaseLost,
            &id,
            JobState::Running,
            Op::Finish,
        );
    }
    let result = unchanged!(fx, "start by the old holder", {
        fx.queue.start(&old, "fetch").await
    });
    // a RUNNING job may be started again by its holder (a lost reply), so the
    // old holder's start is refused for its token
    assert_refusal(result, Expect::LeaseLost, &id, JobState::Running, Op::Start);
    let renewal = unchanged!(fx, "renew by the old holder", {
        fx.queue.renew(&[&old]).await.expect("renew")
    });
    assert_eq!(
        renewal,
        vec![Renewal::Lost {
            state: Some(JobState::Running)
        }]
    );

    // ... and worker-2 completes the job normally.
    assert_eq!(
        fx.queue
            .checkpoint(&new, "fetch", r#"{"rows":10}"#, Some("load"))
            .await
            .expect("checkpoint"),
        None
    );
    assert_eq!(
        fx.queue.renew(&[&new]).await.expect("renew"),
        vec![Renewal::Held]
    );
    assert_eq!(
        fx.queue
            .finish(&new, &Outcome::Succeeded)
            .await
            .expect("finish"),
        Finished::Ended(JobState::Succeeded)
    );
    let job = fx.queue.job(&id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Succeeded);
    assert_eq!(job.attempts.len(), 1);
    assert_eq!(job.attempts[0].worker, "worker-2");
    assert_eq!(job.attempts[0].fence, new.fence);
    assert_eq!(fx.lock_holder(), None);
}
