//! Late step outputs: what a checkpoint appended to `<base>:out:<id>` after its
//! attempt was sealed counts for no one. Owns three cases, each against a
//! private `redis-server`: a holder whose lease was swept and whose job was
//! retried under another holder appends late (driven at client level, lease
//! expiry forced with `ZADD XX 0`); a real worker replica frozen with SIGSTOP
//! after its first checkpoint, woken after another replica finished the
//! retried attempt; and a Redis restart (AOF, `appendfsync everysec`) between
//! a checkpoint and the finish that seals it, which may lose the step but never
//! doubles it.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use leasehold_core::redis::Value;
use leasehold_core::{
    Error, Finished, Inspector, Job, JobId, JobState, NewJob, Outcome, Queue, RetryMode, Started,
};
use leasehold_testkit::{wait_until_async, RedisServer};
use serde_json::json;
use support::replica::Replica;
use support::server::{force_expire, get, read as job};
use support::{connect, redis_now};

/// A lease that never expires by itself during a test.
const TTL: Duration = Duration::from_secs(60);
/// Deadline of every wait.
const WAIT: Duration = Duration::from_secs(30);

// ---- reading Redis directly ---------------------------------------------------------

/// Whether `key` exists.
fn exists(srv: &RedisServer, key: &str) -> bool {
    get::<i64>(srv, &["EXISTS", key]) == 1
}

/// The entries of the outputs list `key` (pairs `<fence>@<token>@<ms>@<next>@<step>`,
/// output) as field maps (`fence`, `token`, `at`, `next`, `step`, `out`), oldest first.
fn list_entries(srv: &RedisServer, key: &str) -> Vec<BTreeMap<String, String>> {
    let flat: Vec<String> = get(srv, &["LRANGE", key, "0", "-1"]);
    flat.chunks(2)
        .map(|pair| {
            let mut e: BTreeMap<String, String> = ["fence", "token", "at", "next", "step"]
                .iter()
                .map(|k| (*k).to_owned())
                .zip(pair[0].splitn(5, '@').map(str::to_owned))
                .collect();
            e.insert("out".into(), pair.get(1).cloned().unwrap_or_default());
            e
        })
        .collect()
}

/// One field of the job hash.
fn hget(srv: &RedisServer, q: &Queue, id: &JobId, field: &str) -> Option<String> {
    get(srv, &["HGET", &q.keys().job(id.as_str()), field])
}

/// How many times `step` counts as completed in the job: in each attempt's
/// record, and in the current attempt's steps where it has no record yet (a
/// success keeps its steps in the hash and copies them into its record: that
/// is one completion, not two).
fn times_completed(j: &Job, step: &str) -> usize {
    let count =
        |steps: &[leasehold_core::StepDone]| steps.iter().filter(|s| s.step == step).count();
    let recorded: usize = j.attempts.iter().map(|a| count(&a.steps)).sum();
    if j.attempts.iter().any(|a| a.n == j.attempt) {
        recorded
    } else {
        recorded + count(&j.steps)
    }
}

// ---- a. a frozen holder's late outputs, at client level ------------------------------------

#[tokio::test]
async fn a_frozen_holders_late_outputs_never_count() {
    let srv = RedisServer::start();
    let q = connect(&srv.url(), "late").await;
    let id = q
        .enqueue(NewJob::from_json("p", "{}").max_attempts(1))
        .await
        .unwrap()
        .id;
    let out_key = q.keys().outputs(id.as_str());

    // holder A runs step a, then freezes
    let a = q
        .lease("holder-a", &["p"], 1, TTL)
        .await
        .unwrap()
        .leases
        .remove(0);
    assert_eq!(q.start(&a, "a").await.unwrap(), Started::Running);
    let a_step_a = r#"{"by":"A","step":"a"}"#;
    assert_eq!(
        q.checkpoint(&a, "a", a_step_a, Some("b")).await.unwrap(),
        None
    );
    assert!(
        exists(&srv, &out_key),
        "the checkpoint appended to {out_key}"
    );

    // its lease runs out and the sweep seals what it appended
    force_expire(&srv, &q, &id);
    let swept = q.sweep(10).await.unwrap();
    assert_eq!(swept.stale, 1, "{swept:?}");
    assert_eq!(job(&q, &id).await.state, JobState::Stale);
    assert_eq!(hget(&srv, &q, &id, "last_step").as_deref(), Some("a"));
    assert_eq!(hget(&srv, &q, &id, "out:a").as_deref(), Some(a_step_a));
    let steps = hget(&srv, &q, &id, "steps").expect("the sealed steps");
    assert!(steps.starts_with("a@") && !steps.contains(','), "{steps}");
    assert!(!exists(&srv, &out_key), "the sweep's seal deleted the list");

    // the operator retries after the last completed step
    assert_eq!(
        q.retry(&id, RetryMode::Resume, "ops", "holder A froze")
            .await
            .unwrap(),
        2
    );

    // A wakes before anyone leases the new attempt: refused, but appended
    let a_step_b = r#"{"by":"A","step":"b"}"#;
    let early = q.checkpoint(&a, "b", a_step_b, Some("c")).await;
    assert!(
        matches!(
            early,
            Err(Error::Refused {
                state: JobState::Queued,
                ..
            })
        ),
        "{early:?}"
    );
    assert_eq!(list_entries(&srv, &out_key).len(), 1, "a late write landed");

    // (ii) B's lease resumes after the sealed step a, never after A's late b
    let b = q
        .lease("holder-b", &["p"], 1, TTL)
        .await
        .unwrap()
        .leases
        .remove(0);
    assert!(b.fence > a.fence, "B has a new fence");
    assert_eq!(b.attempt, 2);
    assert_eq!(b.last_step.as_deref(), Some("a"));
    assert_eq!(b.last_output.as_deref(), Some(a_step_a));
    assert_eq!(q.start(&b, "b").await.unwrap(), Started::Running);

    // A, still believing it holds the job, checkpoints b again: lease lost,
    // and its entry is in the list
    let late = q.checkpoint(&a, "b", a_step_b, Some("c")).await;
    assert!(
        matches!(
            late,
            Err(Error::LeaseLost {
                state: JobState::Running,
                ..
            })
        ),
        "{late:?}"
    );
    let entries = list_entries(&srv, &out_key);
    assert!(
        entries.iter().any(|e| e["fence"] == a.fence.to_string()
            && e["token"] == a.token
            && e["step"] == "b"
            && e["out"] == a_step_b),
        "A's late entry is in the list: {entries:?}"
    );

    // (i) while B runs, show lays only B's entries over the hash
    let during = job(&q, &id).await;
    assert_eq!(during.state, JobState::Running);
    assert_eq!(during.fence, Some(b.fence));
    assert_eq!(during.last_step.as_deref(), Some("a"), "{during:?}");
    assert_eq!(during.step.as_deref(), Some("b"), "{during:?}");
    assert!(!during.outputs.contains_key("b"), "{during:?}");
    assert!(during.steps.iter().all(|s| s.step != "b"), "{during:?}");

    // (iii) B completes b with its own output and finishes
    let b_step_b = r#"{"by":"B","step":"b"}"#;
    assert_eq!(
        q.checkpoint(&b, "b", b_step_b, Some("c")).await.unwrap(),
        None
    );
    let running = job(&q, &id).await;
    assert_eq!(running.outputs["b"], json!({"by": "B", "step": "b"}));
    assert_eq!(running.last_step.as_deref(), Some("b"));
    assert_eq!(running.step.as_deref(), Some("c"));
    assert_eq!(
        q.finish(&b, &Outcome::Succeeded).await.unwrap(),
        Finished::Ended(JobState::Succeeded)
    );
    let done = job(&q, &id).await;
    assert_eq!(done.state, JobState::Succeeded);
    assert_eq!(done.outputs["a"], json!({"by": "A", "step": "a"}));
    assert_eq!(done.outputs["b"], json!({"by": "B", "step": "b"}));
    assert_eq!(done.last_step.as_deref(), Some("b"));
    assert_eq!(hget(&srv, &q, &id, "out:b").as_deref(), Some(b_step_b));
    assert_eq!(times_completed(&done, "a"), 1, "{done:?}");
    assert_eq!(times_completed(&done, "b"), 1, "{done:?}");

    // (iv) the finish's seal deleted the list, A's late entry with it
    assert!(!exists(&srv, &out_key), "the list outlived the finish");

    // a packet of A's still in flight lands after the finish: nothing changes
    for (fence, token) in [(a.fence, &a.token), (b.fence, &b.token)] {
        let reply = srv.cmd(&[
            "RPUSH",
            &out_key,
            &format!("{fence}@{token}@1@@c"),
            r#"{"late":true}"#,
        ]);
        assert!(matches!(reply, Value::Int(_)), "{reply:?}");
    }
    assert_eq!(job(&q, &id).await, done, "late entries changed the record");
    let late = q.checkpoint(&a, "c", r#"{"late":true}"#, None).await;
    assert!(
        matches!(
            late,
            Err(Error::Refused {
                state: JobState::Succeeded,
                ..
            })
        ),
        "{late:?}"
    );
    assert_eq!(
        job(&q, &id).await,
        done,
        "a late checkpoint changed the record"
    );
    assert_eq!(list_entries(&srv, &out_key).len(), 3);

    // deleting the job deletes them
    assert_eq!(
        q.delete_job(&id, "ops", "done with it").await.unwrap(),
        JobState::Succeeded
    );
    assert!(!exists(&srv, &out_key), "delete left the outputs list");
    assert!(q.job(&id).await.unwrap().is_none());
}

// ---- b. a real replica frozen mid-pipeline -------------------------------------------------

/// The step records (`fixture:spans`) of job `id`, as JSON.
fn spans_of(srv: &RedisServer, id: &JobId) -> Vec<serde_json::Value> {
    let raw: Vec<String> = get(srv, &["LRANGE", "fixture:spans", "0", "-1"]);
    raw.iter()
        .map(|s| serde_json::from_str::<serde_json::Value>(s).expect("a span record"))
        .filter(|v| v["job"] == id.as_str())
        .collect()
}

fn wall_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_frozen_after_its_first_checkpoint_wakes_to_outputs_that_count_for_no_one() {
    let srv = RedisServer::start();
    let q = connect(&srv.url(), "etl").await;
    let mut a = Replica::worker(
        "frozen",
        &srv.url(),
        &[
            ("sweep-ms", "60000"),
            ("concurrency", "1"),
            ("max-idle-ms", "200"),
        ],
    );
    a.ready().await;
    // validate works 3 s on attempt 1 (the frozen one), at once on attempt 2
    let input = json!({
        "label": "frozen",
        "steps": {
            "fetch": {"ms": 20},
            "validate": {"ms": 20, "ms_on_attempt": {"1": 3000}},
            "load": {"ms": 20},
            "aggregate": {"ms": 20},
        }
    });
    let id = q
        .enqueue(NewJob::new("etl", &input).unwrap().max_attempts(3))
        .await
        .unwrap()
        .id;
    let out_key = q.keys().outputs(id.as_str());

    // A is in validate and its fetch checkpoint has landed: freeze it
    let validate = wait_for_span(&srv, &id, "validate", "begin", 1).await;
    wait_until_async(WAIT, "A's fetch checkpoint lands", || {
        let (q, id) = (&q, &id);
        async move { job(q, id).await.last_step.as_deref() == Some("fetch") }
    })
    .await;
    a.signal(libc::SIGSTOP);
    let a_fence = validate["fence"].as_u64().expect("a fence");

    // its lease runs out; the sweep seals fetch
    let deadline = job(&q, &id).await.lease.expect("a live lease").deadline;
    wait_until_async(WAIT, "A's lease deadline passes", || {
        let q = &q;
        async move { redis_now(q).await > deadline + 50 }
    })
    .await;
    wait_until_async(WAIT, "the job is swept STALE", || {
        let (q, id) = (&q, &id);
        async move {
            q.sweep(10).await.expect("sweep");
            job(q, id).await.state == JobState::Stale
        }
    })
    .await;
    let sealed_fetch = hget(&srv, &q, &id, "out:fetch").expect("fetch's output is sealed");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&sealed_fetch).unwrap()["attempt"],
        1
    );
    assert!(!exists(&srv, &out_key), "the sweep deleted the list");

    // another replica runs the retried attempt to the end
    q.retry(&id, RetryMode::Resume, "ops", "A froze")
        .await
        .unwrap();
    let mut b = Replica::worker(
        "second",
        &srv.url(),
        &[("concurrency", "1"), ("max-idle-ms", "200")],
    );
    b.ready().await;
    wait_until_async(WAIT, "the retried attempt succeeds", || {
        let (q, id) = (&q, &id);
        async move { job(q, id).await.state == JobState::Succeeded }
    })
    .await;
    b.stop_cleanly(WAIT).await;
    let finished = job(&q, &id).await;

    // A wakes once its validate work is due, completes it, and tries to checkpoint
    let due = validate["t"].as_u64().expect("a begin time") + 3_100_000;
    wait_until_async(WAIT, "A's frozen validate is due", || async move {
        wall_us() > due
    })
    .await;
    a.signal(libc::SIGCONT);
    wait_for_span(&srv, &id, "validate", "end", 1).await;
    a.stop_cleanly(WAIT).await;

    let j = job(&q, &id).await;
    assert_eq!(j, finished, "the woken replica changed the record");
    assert_eq!(j.state, JobState::Succeeded);
    assert_eq!(j.attempt, 2);
    assert_eq!(j.outputs["fetch"]["attempt"], 1, "{j:?}");
    assert_eq!(times_completed(&j, "fetch"), 1, "{j:?}");
    for step in ["validate", "load", "aggregate"] {
        assert_eq!(j.outputs[step]["attempt"], 2, "{step}: {j:?}");
        assert_eq!(times_completed(&j, step), 1, "{step}: {j:?}");
    }
    let succeeded = Inspector::new(q.clone())
        .job_events(&id)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.to == JobState::Succeeded && e.from != Some(JobState::Succeeded))
        .count();
    assert_eq!(succeeded, 1, "the job succeeded once");
    assert!(
        spans_of(&srv, &id)
            .iter()
            .all(|s| s["attempt"] == 2 || s["step"] != "load"),
        "A ran no step after the lost one"
    );

    // whatever A appended on waking is its own fence's, after the seal: it
    // counts for no one, and the job's delete takes it
    let late = list_entries(&srv, &out_key);
    assert!(
        late.iter().all(|e| e["fence"] == a_fence.to_string()),
        "only A's late entries may follow the seal: {late:?}"
    );
    eprintln!("late entries of the woken replica: {late:?}");
    q.delete_job(&id, "ops", "done").await.unwrap();
    assert!(!exists(&srv, &out_key));
}

/// Waits for the `ev` record of `step` of attempt `attempt` of job `id`.
async fn wait_for_span(
    srv: &RedisServer,
    id: &JobId,
    step: &str,
    ev: &str,
    attempt: u32,
) -> serde_json::Value {
    let started = Instant::now();
    loop {
        if let Some(s) = spans_of(srv, id)
            .into_iter()
            .find(|s| s["step"] == step && s["ev"] == ev && s["attempt"] == attempt)
        {
            return s;
        }
        assert!(
            started.elapsed() < WAIT,
            "no {ev} record of {step} (attempt {attempt}) of {id}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---- c. a Redis restart between a write and its seal ---------------------------------------

/// How Redis goes down between the checkpoint and the finish.
#[derive(Debug, Clone, Copy)]
enum Outage {
    /// SIGTERM: Redis writes and fsyncs its AOF before exiting.
    Clean,
    /// SIGKILL: what `appendfsync everysec` had not written may be lost.
    Crash,
}

/// Checkpoints step `a`, takes Redis down as `outage` and up again (same AOF),
/// then finishes the attempt. Returns the final record (`None`: the job was
/// lost with the window) and how many times step `a` is in it.
async fn checkpoint_restart_finish(outage: Outage) -> (Option<Job>, usize) {
    let mut srv = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "everysec"]);
    let q = connect(&srv.url(), "aof").await;
    let id = q
        .enqueue(NewJob::from_json("p", "{}").max_attempts(1))
        .await
        .unwrap()
        .id;
    let lease = q.lease("w", &["p"], 1, TTL).await.unwrap().leases.remove(0);
    assert_eq!(q.start(&lease, "a").await.unwrap(), Started::Running);
    assert_eq!(
        q.checkpoint(&lease, "a", r#"{"n":1}"#, Some("b"))
            .await
            .unwrap(),
        None
    );
    match outage {
        Outage::Clean => srv.restart(),
        Outage::Crash => {
            srv.kill();
            srv.restart();
        }
    }

    // the pool's connections died with the server: retry until one answers
    let started = Instant::now();
    let before = loop {
        match q.job(&id).await {
            Ok(j) => break j,
            Err(e) => {
                assert!(started.elapsed() < WAIT, "Redis did not come back: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let Some(before) = before else {
        // the whole job was in the unsynced window
        assert!(
            matches!(outage, Outage::Crash),
            "a clean restart lost the job"
        );
        assert!(!exists(&srv, &q.keys().outputs(id.as_str())));
        return (None, 0);
    };
    if before.state == JobState::Running && before.fence == Some(lease.fence) {
        let finished = loop {
            match q.finish(&lease, &Outcome::Succeeded).await {
                Ok(f) => break f,
                Err(e @ (Error::Refused { .. } | Error::LeaseLost { .. })) => {
                    panic!("the finish after the restart was refused: {e}")
                }
                Err(e) => {
                    assert!(started.elapsed() < WAIT, "the finish never ran: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        assert_eq!(finished, Finished::Ended(JobState::Succeeded));
    }
    let after = job(&q, &id).await;
    let times = times_completed(&after, "a");
    assert!(times <= 1, "step a counted {times} times: {after:?}");
    if times == 1 {
        assert_eq!(after.outputs["a"], json!({"n": 1}), "{after:?}");
        assert_eq!(after.last_step.as_deref(), Some("a"));
    } else {
        assert!(!after.outputs.contains_key("a"), "{after:?}");
    }
    if after.state == JobState::Succeeded {
        assert!(
            !exists(&srv, &q.keys().outputs(id.as_str())),
            "the finish's seal deleted the list"
        );
    }
    (Some(after), times)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_restart_between_a_checkpoint_and_its_seal_keeps_the_step_exactly_once() {
    let (after, times) = checkpoint_restart_finish(Outage::Clean).await;
    let after = after.expect("a clean restart keeps the job");
    assert_eq!(after.state, JobState::Succeeded);
    assert_eq!(times, 1, "{after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_a_checkpoint_and_its_seal_keeps_the_step_at_most_once() {
    let (after, times) = checkpoint_restart_finish(Outage::Crash).await;
    // what survived ends consistently: succeeded (the step once or not at
    // all), or, had the start itself been lost, not RUNNING under the lease
    if let Some(after) = after {
        assert!(times <= 1);
        eprintln!("after the crash: {:?}, step a {times} time(s)", after.state);
    }
}
