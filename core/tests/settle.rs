//! `Queue::settle`: many holder operations and a lease in one call, each
//! operation compared by its own token, refusals isolated.

use std::time::Duration;

use leasehold_core::{
    Error, Finished, HolderOp, HolderReply, JobState, LeaseRequest, NewJob, Outcome, Queue,
    QueueConfig, Started,
};
use leasehold_testkit::RedisServer;

const TTL: Duration = Duration::from_secs(30);

/// Script calls since the last reset: `FCALL` of the library and `EVALSHA`.
fn script_calls(srv: &RedisServer) -> u64 {
    let stats = srv.info("commandstats");
    ["cmdstat_fcall:", "cmdstat_evalsha:"]
        .iter()
        .filter_map(|prefix| stats.lines().find(|l| l.starts_with(prefix)))
        .filter_map(|l| l.split("calls=").nth(1))
        .filter_map(|s| s.split(',').next())
        .filter_map(|n| n.parse::<u64>().ok())
        .sum()
}

#[tokio::test]
async fn settle_starts_checkpoints_finishes_and_leases_in_one_call_each() {
    let srv = RedisServer::start();
    let q = Queue::connect(&srv.url(), "s", QueueConfig::default())
        .await
        .unwrap();
    let jobs: Vec<NewJob> = (0..25)
        .map(|i| {
            let job = NewJob::from_json("p", format!("{{\"i\":{i}}}"));
            if i % 5 == 0 {
                job.resource("r")
            } else {
                job
            }
        })
        .collect();
    q.enqueue_bulk(jobs).await.unwrap();
    q.load_scripts().await.unwrap();
    let req = LeaseRequest {
        worker: "w1",
        pipelines: &["p"],
        n: 10,
        start: 0,
        first_steps: &[],
    };

    srv.cmd(&["CONFIG", "RESETSTAT"]);
    let first = q.settle(&[], Some(req), TTL).await.unwrap();
    assert_eq!(script_calls(&srv), 1);
    // five jobs share resource r: only one of them is leased, the others park
    assert_eq!(first.leased.leases.len(), 10);
    let leases = first.leased.leases;

    let starts: Vec<HolderOp<'_>> = leases
        .iter()
        .map(|l| HolderOp::Start {
            lease: l,
            first_step: "a",
        })
        .collect();
    let started = q.settle(&starts, None, TTL).await.unwrap();
    assert!(started
        .replies
        .iter()
        .all(|r| matches!(r, Ok(HolderReply::Started(Started::Running)))));

    // checkpoint one, finish the rest with their last step, and lease more: one call
    let mut ops = vec![HolderOp::Checkpoint {
        lease: &leases[0],
        step: "a",
        output: "1",
        next_step: Some("b"),
    }];
    for l in &leases[1..] {
        ops.push(HolderOp::Finish {
            lease: l,
            outcome: &Outcome::Succeeded,
            last_step: Some(("a", "\"done\"")),
        });
    }
    srv.cmd(&["CONFIG", "RESETSTAT"]);
    let settled = q.settle(&ops, Some(req), TTL).await.unwrap();
    assert_eq!(script_calls(&srv), 1);
    assert_eq!(
        settled.replies[0].as_ref().unwrap(),
        &HolderReply::Checkpointed(None)
    );
    for r in &settled.replies[1..] {
        assert_eq!(
            r.as_ref().unwrap(),
            &HolderReply::Finished(Finished::Ended(JobState::Succeeded))
        );
    }
    assert!(!settled.leased.leases.is_empty());
    for l in &leases[1..] {
        let job = q.job(&l.job).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Succeeded);
        assert_eq!(job.outputs["a"], serde_json::json!("done"));
        assert_eq!(job.attempts[0].steps.len(), 1);
    }
    let job0 = q.job(&leases[0].job).await.unwrap().unwrap();
    assert_eq!(job0.state, JobState::Running);
    assert_eq!(job0.last_step.as_deref(), Some("a"));
}

#[tokio::test]
async fn a_refused_operation_does_not_affect_the_others_in_the_batch() {
    let srv = RedisServer::start();
    let q = Queue::connect(&srv.url(), "s", QueueConfig::default())
        .await
        .unwrap();
    q.enqueue_bulk(
        (0..3)
            .map(|i| NewJob::from_json("p", format!("{i}")))
            .collect(),
    )
    .await
    .unwrap();
    let leases = q.lease("w1", &["p"], 3, TTL).await.unwrap().leases;
    let mut forged = leases[1].clone();
    forged.token = "not-the-token".into();
    let ops = [
        HolderOp::Start {
            lease: &leases[0],
            first_step: "a",
        },
        HolderOp::Start {
            lease: &forged,
            first_step: "a",
        },
        HolderOp::Release { lease: &leases[2] },
        // finishing a LEASED job as SUCCEEDED is not a move the table has
        HolderOp::Finish {
            lease: &leases[1],
            outcome: &Outcome::Succeeded,
            last_step: None,
        },
    ];
    let settled = q.settle(&ops, None, TTL).await.unwrap();
    assert!(matches!(
        settled.replies[0],
        Ok(HolderReply::Started(Started::Running))
    ));
    assert!(
        matches!(
            settled.replies[1],
            Err(Error::LeaseLost {
                state: JobState::Leased,
                ..
            })
        ),
        "{:?}",
        settled.replies[1]
    );
    assert_eq!(
        settled.replies[2].as_ref().unwrap(),
        &HolderReply::Released(JobState::Queued)
    );
    assert!(
        matches!(
            settled.replies[3],
            Err(Error::Refused {
                state: JobState::Leased,
                ..
            })
        ),
        "{:?}",
        settled.replies[3]
    );
    assert_eq!(
        q.job(&leases[1].job).await.unwrap().unwrap().state,
        JobState::Leased
    );
    assert_eq!(
        q.job(&leases[2].job).await.unwrap().unwrap().state,
        JobState::Queued
    );
}

#[tokio::test]
async fn a_cancel_pending_is_reported_by_a_batched_checkpoint() {
    let srv = RedisServer::start();
    let q = Queue::connect(&srv.url(), "s", QueueConfig::default())
        .await
        .unwrap();
    let id = q.enqueue(NewJob::from_json("p", "{}")).await.unwrap().id;
    let lease = q
        .lease("w1", &["p"], 1, TTL)
        .await
        .unwrap()
        .leases
        .remove(0);
    let _ = q.start(&lease, "a").await.unwrap();
    q.cancel(&id, "stop", "op").await.unwrap();
    let settled = q
        .settle(
            &[HolderOp::Checkpoint {
                lease: &lease,
                step: "a",
                output: "{}",
                next_step: Some("b"),
            }],
            None,
            TTL,
        )
        .await
        .unwrap();
    assert_eq!(
        settled.replies[0].as_ref().unwrap(),
        &HolderReply::Checkpointed(Some("stop".into()))
    );
}

/// A job whose fields were corrupted in Redis fails only its own operation
/// (and, when it would be leased, is quarantined) instead of failing the whole call.
#[tokio::test]
async fn a_corrupted_job_does_not_fail_the_rest_of_the_batch() {
    let srv = RedisServer::start();
    let q = Queue::connect(&srv.url(), "c", QueueConfig::default())
        .await
        .unwrap();
    let jobs: Vec<NewJob> = (0..3)
        .map(|i| NewJob::from_json("p", format!("{{\"i\":{i}}}")))
        .collect();
    q.enqueue_bulk(jobs).await.unwrap();
    let req = LeaseRequest {
        worker: "w1",
        pipelines: &["p"],
        n: 3,
        start: 0,
        first_steps: &[],
    };
    let leases = q.settle(&[], Some(req), TTL).await.unwrap().leased.leases;
    assert_eq!(leases.len(), 3);
    let starts: Vec<HolderOp<'_>> = leases
        .iter()
        .map(|l| HolderOp::Start {
            lease: l,
            first_step: "a",
        })
        .collect();
    q.settle(&starts, None, TTL).await.unwrap();
    let (bad, good, no_id) = (&leases[0], &leases[1], &leases[2]);
    let bad_key = q.keys().job(bad.job.as_str());
    srv.cmd(&["HSET", &bad_key, "attempt", "x"]);
    // a job whose id field is empty: its failed finish is refused (the field is
    // checked before anything is written; an absent id would be the key's)
    let no_id_key = q.keys().job(no_id.job.as_str());
    srv.cmd(&["HSET", &no_id_key, "id", ""]);
    let no_id_before = srv.dump(&no_id_key);

    // two more waiting jobs, one of them corrupted too
    let fresh = q
        .enqueue_bulk(
            (2..4)
                .map(|i| NewJob::from_json("p", format!("{{\"i\":{i}}}")))
                .collect(),
        )
        .await
        .unwrap();
    let waiting_bad = q.keys().job(fresh[0].id.as_str());
    srv.cmd(&["HSET", &waiting_bad, "attempt", "x"]);

    let failed = Outcome::Failed {
        error: leasehold_core::AttemptError {
            kind: "k".into(),
            message: "m".into(),
            retryable: false,
            retries_exhausted: false,
        },
        backoff: std::time::Duration::ZERO,
        cleanup_needed: false,
    };
    let ops = [
        HolderOp::Finish {
            lease: bad,
            outcome: &Outcome::Succeeded,
            last_step: None,
        },
        HolderOp::Finish {
            lease: good,
            outcome: &Outcome::Succeeded,
            last_step: None,
        },
        HolderOp::Finish {
            lease: no_id,
            outcome: &failed,
            last_step: None,
        },
    ];
    let settled = q.settle(&ops, Some(req), TTL).await.unwrap();
    match &settled.replies[0] {
        Err(Error::Corrupt {
            key,
            field,
            problem,
        }) => {
            assert_eq!(key, &bad_key);
            assert_eq!(field, "attempt");
            assert!(problem.contains("is not an integer"), "{problem}");
        }
        other => panic!("the corrupted job's finish answered {other:?}"),
    }
    assert!(
        matches!(
            settled.replies[1],
            Ok(HolderReply::Finished(Finished::Ended(JobState::Succeeded)))
        ),
        "{:?}",
        settled.replies[1]
    );
    match &settled.replies[2] {
        Err(Error::Corrupt { key, field, .. }) => {
            assert_eq!(key, &no_id_key);
            assert_eq!(field, "id");
        }
        other => panic!("the finish of the job with an empty id answered {other:?}"),
    }
    assert_eq!(srv.dump(&no_id_key), no_id_before, "nothing written");
    // the corrupted running job is left as it was
    let state: String = match srv.cmd(&["HGET", &bad_key, "state"]) {
        leasehold_core::redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    };
    assert_eq!(state, "RUNNING");
    // the lease part: the readable job is handed out, the corrupted one is
    // quarantined by the script (not leased, so not reported unreadable)
    assert_eq!(settled.leased.leases.len(), 1);
    assert_eq!(settled.leased.leases[0].job, fresh[1].id);
    assert!(settled.leased.unreadable.is_empty());
    let entry = q
        .quarantine_entry(fresh[0].id.as_str())
        .await
        .unwrap()
        .expect("quarantined");
    assert_eq!(entry.field, "attempt");
    assert_eq!(entry.reason, "not a positive integer");
}

/// The values of `fields` of job `id` in queue `q`'s hash.
fn job_fields(srv: &RedisServer, q: &Queue, id: &str, fields: &[&str]) -> Vec<Option<String>> {
    let key = q.keys().job(id);
    let mut args = vec!["HMGET", key.as_str()];
    args.extend_from_slice(fields);
    leasehold_core::redis::from_redis_value(srv.cmd(&args)).unwrap()
}

#[tokio::test]
async fn a_lease_starts_the_jobs_of_its_run_slots_in_the_same_call() {
    let srv = RedisServer::start();
    let q = Queue::connect(&srv.url(), "ls", QueueConfig::default())
        .await
        .unwrap();
    let ids: Vec<String> = q
        .enqueue_bulk(
            (0..4)
                .map(|i| NewJob::from_json("p", format!("{{\"i\":{i}}}")).max_attempts(2))
                .collect(),
        )
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id.to_string())
        .collect();
    q.load_scripts().await.unwrap();
    // four leased, the first three into run slots: those start in this call
    let req = LeaseRequest {
        worker: "w1",
        pipelines: &["p"],
        n: 4,
        start: 3,
        first_steps: &["a"],
    };
    srv.cmd(&["CONFIG", "RESETSTAT"]);
    let leases = q.settle(&[], Some(req), TTL).await.unwrap().leased.leases;
    assert_eq!(script_calls(&srv), 1);
    assert_eq!(leases.len(), 4);
    let started: Vec<bool> = leases.iter().map(|l| l.started).collect();
    assert_eq!(started, [true, true, true, false]);
    for l in &leases[..3] {
        let f = job_fields(
            &srv,
            &q,
            l.job.as_str(),
            &["state", "step", "leased_at", "started_at"],
        );
        assert_eq!(f[0].as_deref(), Some("RUNNING"));
        assert_eq!(f[1].as_deref(), Some("a"));
        // started when leased: `leased_at` only, which readers take for both
        assert!(
            f[2].is_some() && f[3].is_none(),
            "leased_at, started_at: {f:?}"
        );
        let j = q.job(&l.job).await.unwrap().unwrap();
        assert_eq!(j.started_at, j.leased_at);
    }
    let f = job_fields(&srv, &q, leases[3].job.as_str(), &["state", "started_at"]);
    assert_eq!(f, [Some("LEASED".to_owned()), None]);
    // the events: one start from QUEUED for a started job, a lease for the other
    let events: Vec<(String, Vec<(String, String)>)> =
        leasehold_core::redis::from_redis_value(srv.cmd(&["XRANGE", &q.keys().events(), "-", "+"]))
            .unwrap();
    // an entry's own event, then those the call gathered into `more` (five words each)
    let moves: Vec<String> = events
        .iter()
        .flat_map(|(_, f)| {
            let get = |n: &str| {
                f.iter()
                    .find(|(k, _)| k == n)
                    .map_or("", |(_, v)| v.as_str())
            };
            let mut out = vec![format!(
                "{} {} {}->{}",
                get("op"),
                get("job"),
                get("from"),
                get("to")
            )];
            let words: Vec<&str> = get("more").split_whitespace().collect();
            for w in words.chunks(5) {
                out.push(format!("{} {} {}->{}", w[0], w[1], w[3], w[4]));
            }
            out
        })
        .filter(|m| !m.starts_with("enqueue"))
        .collect();
    let want: Vec<String> = leases
        .iter()
        .map(|l| {
            if l.started {
                format!("start {} QUEUED->RUNNING", l.job)
            } else {
                format!("lease {} QUEUED->LEASED", l.job)
            }
        })
        .collect();
    assert_eq!(moves, want);
    // a started job is the holder's like any RUNNING one: checkpoint, then a
    // retryable failure with attempts left queues attempt 2 after step a
    let failed = Outcome::Failed {
        error: leasehold_core::AttemptError {
            kind: "k".into(),
            message: "m".into(),
            retryable: true,
            retries_exhausted: false,
        },
        backoff: Duration::ZERO,
        cleanup_needed: false,
    };
    let ops = [
        HolderOp::Checkpoint {
            lease: &leases[0],
            step: "a",
            output: "1",
            next_step: Some("b"),
        },
        HolderOp::Finish {
            lease: &leases[0],
            outcome: &failed,
            last_step: None,
        },
    ];
    let settled = q.settle(&ops, None, TTL).await.unwrap();
    assert!(matches!(
        settled.replies[0],
        Ok(HolderReply::Checkpointed(None))
    ));
    assert!(
        matches!(
            settled.replies[1],
            Ok(HolderReply::Finished(Finished::Retrying { .. }))
        ),
        "{:?}",
        settled.replies[1]
    );
    // a job with a completed step to resume from is leased, not started: its
    // holder finds its next step
    let again = q
        .lease_and_start("w2", &["p"], &["a"], 1, TTL)
        .await
        .unwrap()
        .leases;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].job.as_str(), ids[0]);
    assert!(!again[0].started);
    assert_eq!(again[0].last_step.as_deref(), Some("a"));
    let f = job_fields(&srv, &q, &ids[0], &["state"]);
    assert_eq!(f[0].as_deref(), Some("LEASED"));
    // a first step that no step could be named is refused before anything is sent
    let bad = q.lease_and_start("w2", &["p"], &["a b"], 1, TTL).await;
    assert!(matches!(bad, Err(Error::InvalidArgument(_))), "{bad:?}");
}

/// A job's checkpoints and the finish of the same attempt in one call: the
/// finish answers for them (they count when it is accepted, and are refused
/// with it); a finish under another token answers for nothing.
#[tokio::test]
async fn checkpoints_followed_by_their_finish_are_answered_by_it() {
    let srv = RedisServer::start();
    let q = Queue::connect(&srv.url(), "s", QueueConfig::default())
        .await
        .unwrap();
    q.enqueue_bulk(
        (0..3)
            .map(|i| NewJob::from_json("p", format!("{i}")))
            .collect(),
    )
    .await
    .unwrap();
    let leases = q.lease("w1", &["p"], 3, TTL).await.unwrap().leases;
    for l in &leases {
        assert_eq!(q.start(l, "a").await.unwrap(), Started::Running);
    }
    let mut forged_1 = leases[1].clone();
    forged_1.token = "not-the-token".into();
    let mut forged_2 = leases[2].clone();
    forged_2.token = "not-the-token".into();
    let checkpoint = |lease, step, next| HolderOp::Checkpoint {
        lease,
        step,
        output: "7",
        next_step: Some(next),
    };
    let finish = |lease| HolderOp::Finish {
        lease,
        outcome: &Outcome::Succeeded,
        last_step: Some(("c", "9")),
    };
    let ops = [
        // job 0: its attempt's checkpoints, then its finish
        checkpoint(&leases[0], "a", "b"),
        checkpoint(&leases[0], "b", "c"),
        finish(&leases[0]),
        // job 1: checkpoints and finish under a token that is not the job's
        checkpoint(&forged_1, "a", "b"),
        finish(&forged_1),
        // job 2: the holder's checkpoint, a finish under another token
        checkpoint(&leases[2], "a", "b"),
        finish(&forged_2),
    ];
    let settled = q.settle(&ops, None, TTL).await.unwrap();
    let r = &settled.replies;
    assert_eq!(r[0].as_ref().unwrap(), &HolderReply::Checkpointed(None));
    assert_eq!(r[1].as_ref().unwrap(), &HolderReply::Checkpointed(None));
    assert_eq!(
        r[2].as_ref().unwrap(),
        &HolderReply::Finished(Finished::Ended(JobState::Succeeded))
    );
    for i in [3, 4, 6] {
        assert!(
            matches!(
                r[i],
                Err(Error::LeaseLost {
                    state: JobState::Running,
                    ..
                })
            ),
            "reply {i}: {:?}",
            r[i]
        );
    }
    assert_eq!(r[5].as_ref().unwrap(), &HolderReply::Checkpointed(None));

    let job0 = q.job(&leases[0].job).await.unwrap().unwrap();
    assert_eq!(job0.state, JobState::Succeeded);
    let steps: Vec<&str> = job0.attempts[0]
        .steps
        .iter()
        .map(|s| s.step.as_str())
        .collect();
    assert_eq!(steps, ["a", "b", "c"]);
    assert_eq!(job0.outputs["a"], serde_json::json!(7));
    assert_eq!(job0.outputs["c"], serde_json::json!(9));
    // the forged append landed but counts for no one
    let job1 = q.job(&leases[1].job).await.unwrap().unwrap();
    assert_eq!(job1.state, JobState::Running);
    assert!(job1.outputs.is_empty(), "{job1:?}");
    // job 2's own checkpoint stands; its attempt goes on
    let job2 = q.job(&leases[2].job).await.unwrap().unwrap();
    assert_eq!(job2.state, JobState::Running);
    let done = q
        .settle(&[finish(&leases[2])], None, TTL)
        .await
        .unwrap()
        .replies;
    assert!(done[0].is_ok(), "{done:?}");
    let job2 = q.job(&leases[2].job).await.unwrap().unwrap();
    let steps: Vec<&str> = job2.attempts[0]
        .steps
        .iter()
        .map(|s| s.step.as_str())
        .collect();
    assert_eq!(steps, ["a", "c"]);
}

/// A checkpoint of a job not yet started, then its cancel in one call: the
/// cancel (accepted from LEASED) does not answer for the checkpoint, which is
/// refused as the read-back finds the job.
#[tokio::test]
async fn a_cancel_from_leased_does_not_answer_for_a_checkpoint() {
    let srv = RedisServer::start();
    let q = Queue::connect(&srv.url(), "s", QueueConfig::default())
        .await
        .unwrap();
    q.enqueue(NewJob::from_json("p", "{}")).await.unwrap();
    let lease = q
        .lease("w1", &["p"], 1, TTL)
        .await
        .unwrap()
        .leases
        .remove(0);
    let cancelled = Outcome::Cancelled {
        reason: "stop".into(),
        cleanup_needed: false,
    };
    let ops = [
        HolderOp::Checkpoint {
            lease: &lease,
            step: "a",
            output: "1",
            next_step: Some("b"),
        },
        HolderOp::Finish {
            lease: &lease,
            outcome: &cancelled,
            last_step: None,
        },
    ];
    let r = q.settle(&ops, None, TTL).await.unwrap().replies;
    assert!(
        matches!(
            r[0],
            Err(Error::Refused {
                state: JobState::Leased,
                ..
            })
        ),
        "{:?}",
        r[0]
    );
    assert!(r[1].is_ok(), "{:?}", r[1]);
    let job = q.job(&lease.job).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Cancelled);
    assert!(job.outputs.is_empty(), "{job:?}");
}

#[tokio::test]
async fn a_job_started_by_its_lease_and_a_plain_success_keep_no_field_readers_derive() {
    let srv = RedisServer::start();
    let q = Queue::connect(&srv.url(), "s", QueueConfig::default())
        .await
        .unwrap();
    q.enqueue_bulk(
        (0..2)
            .map(|i| NewJob::from_json("p", format!("{i}")))
            .collect(),
    )
    .await
    .unwrap();
    // job 0 started by its lease (leased_at = started_at), job 1 started later
    let req = LeaseRequest {
        worker: "w1",
        pipelines: &["p"],
        n: 2,
        start: 1,
        first_steps: &["a"],
    };
    let leases = q.settle(&[], Some(req), TTL).await.unwrap().leased.leases;
    assert_eq!(leases.len(), 2);
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(q.start(&leases[1], "a").await.unwrap(), Started::Running);
    let before: Vec<_> = {
        let mut v = Vec::new();
        for l in &leases {
            v.push(q.job(&l.job).await.unwrap().unwrap());
        }
        v
    };
    assert_eq!(before[0].leased_at, before[0].started_at);
    assert!(
        before[1].started_at > before[1].leased_at,
        "{:?}",
        before[1]
    );
    let ops: Vec<HolderOp<'_>> = leases
        .iter()
        .flat_map(|l| {
            [
                HolderOp::Checkpoint {
                    lease: l,
                    step: "a",
                    output: "1",
                    next_step: Some("b"),
                },
                HolderOp::Finish {
                    lease: l,
                    outcome: &Outcome::Succeeded,
                    last_step: Some(("b", "2")),
                },
            ]
        })
        .collect();
    let settled = q.settle(&ops, None, TTL).await.unwrap();
    assert!(
        settled.replies.iter().all(Result::is_ok),
        "{:?}",
        settled.replies
    );
    for (l, was) in leases.iter().zip(&before) {
        let id = l.job.as_str();
        // the hash: no last_step (the last entry of steps); no started_at
        // when the lease started the job
        assert_eq!(job_fields(&srv, &q, id, &["last_step"])[0], None, "{id}");
        assert_eq!(
            job_fields(&srv, &q, id, &["started_at"])[0].is_some(),
            was.started_at != was.leased_at,
            "{id}"
        );
        // the record: both, as they were
        let j = q.job(&l.job).await.unwrap().unwrap();
        assert_eq!(j.state, JobState::Succeeded);
        assert_eq!(j.last_step.as_deref(), Some("b"));
        assert_eq!(j.started_at, was.started_at);
        assert_eq!(j.leased_at, was.leased_at);
        let steps: Vec<&str> = j.steps.iter().map(|s| s.step.as_str()).collect();
        assert_eq!(steps, ["a", "b"]);
        assert!(j.steps.iter().all(|s| Some(s.at) >= j.started_at));
        assert_eq!(j.outputs["b"], serde_json::json!(2));
        // Queue::job adds the plain success's record, built from the hash
        let rec = j.attempts.last().expect("the plain success's record");
        assert_eq!((rec.n, rec.state), (1, JobState::Succeeded));
        assert_eq!(rec.started_at, was.started_at);
        assert_eq!(rec.steps, j.steps);
        // the listing names the last step too
        let page = leasehold_core::Inspector::new(q.clone())
            .list_jobs(
                &leasehold_core::JobFilter::default(),
                leasehold_core::Page {
                    offset: 0,
                    limit: 10,
                },
            )
            .await
            .unwrap();
        let row = page.jobs.iter().find(|r| r.id == l.job).expect("listed");
        assert_eq!(row.last_step.as_deref(), Some("b"), "{row:?}");
    }
}
