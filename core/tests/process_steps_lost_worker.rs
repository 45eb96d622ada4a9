//! Process steps whose worker is lost: cut off from Redis (its script is
//! killed before the lease deadline), killed with `kill -9` (no child left
//! alive, the tail kept and the loss recorded), woken after its job was swept
//! (no process spawned), frozen with SIGSTOP (the script dies before the
//! lease does), and a step ending while Redis is out of reach.
//!
//! The scripts are small `sh` and `python3` programs written by each test into
//! a temporary directory (`support/process.rs`). Every wait is on a condition
//! with a generous deadline.

mod support;

use std::time::Duration;

use leasehold_core::process::{read_records, DeclaredPipeline, ProcessStep, StepOutcome};
use leasehold_core::{JobState, PipelineOptions};
use leasehold_testkit::{wait_until_async, RedisServer};
use serde_json::json;
use support::process::*;
use support::{connect, redis_now, wait_for_held_settle};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cut_off_from_redis_kills_its_script_before_the_lease_deadline() {
    let srv = RedisServer::start_tcp();
    let target: std::net::SocketAddr = format!("127.0.0.1:{}", srv.port().unwrap())
        .parse()
        .unwrap();
    let proxy = leasehold_testkit::TcpProxy::start(target);
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let body = format!(
        "trap '' TERM\necho $$ > '{0}.tmp'; mv '{0}.tmp' '{0}'\nwhile true; do sleep 0.05; done\n",
        ready.display()
    );
    let path = script(dir.path(), "stubborn.sh", &body);
    let pipeline = DeclaredPipeline::new("cutoff")
        .step("work", ProcessStep::new("sh").arg(&path))
        .options(PipelineOptions::new().lease_ttl(Duration::from_secs(5)));
    let worker = serve(&proxy.url(), pipeline).await;
    let q = connect(&srv.url(), "cutoff").await;
    let id = enqueue(&srv.url(), "cutoff", &json!({})).await;
    wait_until_async(WAIT, "the script started", || {
        let ok = ready.exists();
        async move { ok }
    })
    .await;
    let pid: i32 = std::fs::read_to_string(&ready)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    proxy.stall();
    // the renewals hang from now on: Redis keeps the last deadline they set
    wait_until_async(WAIT, "the script is gone", || async move { gone(pid) }).await;
    let dead_at = now_ms();
    let job = q.job(&id).await.unwrap().unwrap();
    let deadline = job
        .lease
        .as_ref()
        .map(|l| l.deadline)
        .expect("still leased in Redis");
    assert!(
        dead_at < deadline,
        "the script was still alive {} ms past the lease deadline",
        dead_at - deadline
    );
    // the cut-off attempt wrote nothing (no record, the job still RUNNING until swept)
    assert!(read_records(&q, id.as_str()).await.unwrap().is_empty());
    proxy.resume();
    stop(worker).await;
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_worker_leaves_no_child_alive() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let path = script(
        dir.path(),
        "orphan.sh",
        // a script that starts a program of its own (a grandchild of the
        // worker, which a parent-death signal alone would leave running)
        &format!(
            "sleep 600 &\necho \"$$ $!\" > '{0}.tmp'; mv '{0}.tmp' '{0}'\nwait\n",
            ready.display()
        ),
    );
    let (mut fixture, _) = Fixture::start(&srv.url(), "orphan", &[], "sh", &[path.as_os_str()]);
    enqueue(&srv.url(), "orphan", &json!({})).await;
    wait_until_async(WAIT, "the script started", || {
        let ok = ready.exists();
        async move { ok }
    })
    .await;
    let pids: Vec<i32> = std::fs::read_to_string(&ready)
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    let (script_pid, grandchild) = (pids[0], pids[1]);
    assert!(!gone(script_pid) && !gone(grandchild));
    fixture.signal(libc::SIGKILL);
    let _ = fixture.child.wait();
    wait_until_async(WAIT, "the worker's child died with it", || async move {
        gone(script_pid)
    })
    .await;
    wait_until_async(
        WAIT,
        "the program the script started died with it",
        || async move { gone(grandchild) },
    )
    .await;
}

/// A worker frozen (SIGSTOP) with its lease-and-start call in flight: the call
/// is held in a stalled proxy (the job is enqueued meanwhile) until the worker
/// is stopped, then let through, so Redis leases and starts the job (its first step a process step) for a
/// worker that cannot run yet. When the lease has run out and the job was
/// swept STALE, the woken worker gives the attempt up before the step: the
/// script never runs and Redis is not written to.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_woken_after_its_job_was_swept_spawns_no_process() {
    let srv = RedisServer::start_tcp();
    let proxy = leasehold_testkit::TcpProxy::start(
        format!("127.0.0.1:{}", srv.port().unwrap())
            .parse()
            .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("spawned");
    let path = script(
        dir.path(),
        "marker.sh",
        &format!("echo $$ > '{}'\n", marker.display()),
    );
    let (worker, logs) = Fixture::start(
        &proxy.url(),
        "frozen",
        &[
            "--lease-ttl-ms",
            "1000",
            // the worker's own sweeper stays out of it (the test sweeps)
            "--sweep-ms",
            "60000",
            "--concurrency",
            "1",
            // idle lease calls every 100 ms, slept between (no blocking wait)
            "--max-idle-ms",
            "100",
        ],
        "sh",
        &[path.as_os_str()],
    );
    let q = connect(&srv.url(), "frozen").await;
    // hold one of the worker's idle lease calls (sent while no job is
    // queued; Redis runs it only when the proxy lets it through). A stall that
    // caught a call already on its way to Redis holds its reply instead, and
    // the worker's next call waits on that connection: let it go and try again.
    let started = std::time::Instant::now();
    loop {
        proxy.stall();
        let held = wait_for_held_settle(&proxy, Duration::from_secs(3)).await;
        if held {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "no lease call of the worker was held"
        );
        proxy.resume();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let id = enqueue(&srv.url(), "frozen", &json!({})).await;
    worker.signal(libc::SIGSTOP);
    proxy.resume();
    wait_until_async(WAIT, "the job is started for the frozen worker", || {
        let (q, id) = (&q, &id);
        async move { matches!(q.job(id).await, Ok(Some(j)) if j.state == JobState::Running) }
    })
    .await;
    assert_eq!(q.job(&id).await.unwrap().unwrap().attempt, 1);

    // the lease runs out while the worker is frozen, and the job is swept
    let deadline = q
        .job(&id)
        .await
        .unwrap()
        .unwrap()
        .lease
        .expect("a live lease")
        .deadline;
    wait_until_async(WAIT, "the lease's deadline passes", || {
        let q = &q;
        async move { redis_now(q).await > deadline + 50 }
    })
    .await;
    wait_until_async(WAIT, "the job is swept STALE", || {
        let (q, id) = (&q, &id);
        async move {
            q.sweep(100).await.expect("sweep");
            matches!(q.job(id).await, Ok(Some(j)) if j.state == JobState::Stale)
        }
    })
    .await;
    let job_key = q.keys().job(id.as_str());
    let snapshot = srv.dump(&job_key);
    worker.signal(libc::SIGCONT);

    // it reads the lease reply only now, past the lease's local deadline
    wait_until_async(WAIT, "the woken worker gives the attempt up", || {
        let found = logs
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("abandoned before step run began"));
        async move { found }
    })
    .await;
    drop(worker);
    assert!(!marker.exists(), "the step's script ran");
    assert!(read_records(&q, id.as_str()).await.unwrap().is_empty());
    assert_eq!(
        srv.dump(&job_key),
        snapshot,
        "the woken worker wrote nothing"
    );
    assert_eq!(q.job(&id).await.unwrap().unwrap().state, JobState::Stale);
}

/// A worker frozen by SIGSTOP while its script writes: the step's monitor,
/// with no help from the worker, sends the group SIGTERM at the lease's local
/// deadline and SIGKILL after the capped grace (the script ignores SIGTERM),
/// so the script's last write comes before Redis's deadline for the lease.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_workers_script_dies_before_its_lease_does() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let writes = dir.path().join("writes");
    let path = script(
        dir.path(),
        "writer.py",
        &format!(
            "import os, signal, time\n\
             signal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
             with open('{}', 'a') as f:\n\
             \x20   f.write('pid %d\\n' % os.getpid()); f.flush()\n\
             \x20   while True:\n\
             \x20       f.write('%d\\n' % int(time.time() * 1000)); f.flush()\n\
             \x20       time.sleep(0.01)\n",
            writes.display()
        ),
    );
    let (fixture, _logs) = Fixture::start(
        &srv.url(),
        "freeze",
        &["--lease-ttl-ms", "3000", "--concurrency", "1"],
        PYTHON,
        &[path.as_os_str()],
    );
    let q = connect(&srv.url(), "freeze").await;
    let id = enqueue(&srv.url(), "freeze", &json!({})).await;
    wait_until_async(WAIT, "the script writes", || {
        let n = lines(&writes).len();
        async move { n > 5 }
    })
    .await;
    let pid: i32 = lines(&writes)[0]
        .strip_prefix("pid ")
        .unwrap()
        .parse()
        .unwrap();
    fixture.signal(libc::SIGSTOP);
    wait_until_async(WAIT, "the frozen worker's script is dead", || async move {
        gone(pid)
    })
    .await;
    let died_by_redis = redis_now(&q).await;
    // the worker is still frozen: the monitor did it on its own
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", fixture.pid())).unwrap();
    let state = stat.rsplit(')').next().unwrap().trim_start().chars().next();
    assert_eq!(state, Some('T'), "the worker was not frozen: {stat}");
    // no renewal since the freeze: the deadline Redis holds now is the last
    let job = q.job(&id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Running);
    let deadline = job.lease.expect("the frozen worker's lease").deadline;
    let last: i64 = lines(&writes).last().unwrap().parse().unwrap();
    eprintln!(
        "last write {} ms before the lease deadline; script gone {} ms before it",
        deadline - last,
        deadline - died_by_redis
    );
    assert!(
        last < deadline,
        "the script wrote at {last}, after the lease deadline {deadline}"
    );
    assert!(died_by_redis < deadline, "the script outlived the lease");
    fixture.signal(libc::SIGCONT);
    drop(fixture);
}

/// `kill -9` of the worker mid-step: the record it flushed while the step ran
/// keeps the output's last lines and the progress, and once the attempt is
/// swept STALE the record says when the worker was lost.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_workers_step_keeps_its_tail_and_says_when_the_worker_was_lost() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let path = script(
        dir.path(),
        "talk.sh",
        "echo 'first line'\necho '::progress 46'\necho 'last words before the end'\n\
         echo 'a warning' >&2\nexec sleep 600\n",
    );
    let (mut fixture, _logs) = Fixture::start(
        &srv.url(),
        "lost",
        &["--lease-ttl-ms", "1000", "--sweep-ms", "60000"],
        "sh",
        &[path.as_os_str()],
    );
    let q = connect(&srv.url(), "lost").await;
    let id = enqueue(&srv.url(), "lost", &json!({})).await;
    let running = record_when(&q, &id, 1, "run", "the tails flushed while running", |r| {
        r.stdout_tail.contains("last words before the end") && r.stderr_tail.contains("a warning")
    })
    .await;
    assert_eq!(running.progress, Some(46.0));
    fixture.signal(libc::SIGKILL);
    let _ = fixture.child.wait();
    wait_until_async(WAIT, "the job is swept STALE", || {
        let (q, id) = (&q, &id);
        async move {
            q.sweep(100).await.expect("sweep");
            matches!(q.job(id).await, Ok(Some(j)) if j.state == JobState::Stale)
        }
    })
    .await;
    let job = q.job(&id).await.unwrap().unwrap();
    let r = record(&q, &id, 1, "run").await;
    assert_eq!(r.outcome, StepOutcome::Running);
    assert!(r.stdout_tail.contains("last words before the end"), "{r:?}");
    assert_eq!(r.worker_lost_at(&job), job.stale_at);
    assert!(job.stale_at.is_some());
}

/// A step that ends while Redis is out of reach: the final process record's
/// write is retried, and lands once Redis answers again (within the lease).
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_ending_while_redis_is_out_of_reach_keeps_its_record() {
    let srv = RedisServer::start_tcp();
    let proxy = leasehold_testkit::TcpProxy::start(
        format!("127.0.0.1:{}", srv.port().unwrap())
            .parse()
            .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let (ready, go) = (dir.path().join("ready"), dir.path().join("go"));
    let path = script(
        dir.path(),
        "late.sh",
        &format!(
            "echo started > '{0}'\nwhile [ ! -e '{1}' ]; do sleep 0.02; done\n\
             echo 'the last line before Redis came back'\n",
            ready.display(),
            go.display()
        ),
    );
    let (fixture, logs) = Fixture::start(
        &proxy.url(),
        "outage",
        &["--lease-ttl-ms", "20000", "--concurrency", "1"],
        "sh",
        &[path.as_os_str()],
    );
    let q = connect(&srv.url(), "outage").await;
    let id = enqueue(&srv.url(), "outage", &json!({})).await;
    file(&ready).await;
    proxy.block();
    std::fs::write(&go, "").unwrap();
    wait_until_async(WAIT, "the record's write failed and is retried", || {
        let found = logs
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("process record not written; retrying"));
        async move { found }
    })
    .await;
    proxy.unblock();
    let job = ended(&q, &id).await;
    assert_eq!(job.state, JobState::Succeeded);
    let r = record(&q, &id, 1, "run").await;
    assert_eq!(r.outcome, StepOutcome::Succeeded);
    assert!(
        r.stdout_tail
            .contains("the last line before Redis came back"),
        "{r:?}"
    );
    drop(fixture);
}
