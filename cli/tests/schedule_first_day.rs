//! A cron team's first day with a pipelines file: `run_on_start` runs the
//! latest whole window at once (nothing waits for the next tick),
//! `window_offset` shifts the window a tick's input carries (cron's `--hour
//! prev`), and a `start` added later is honoured: the cursor moves to it and
//! the windows since are caught up, recorded as `restarted`.

mod support;

use std::time::Duration;

use leasehold_testkit::{wait_until_async, RedisServer};
use serde_json::Value;
use support::binary::{command, run_cmd};

const WAIT: Duration = Duration::from_secs(30);

/// The schedule `hourly` as `schedules --json` lists it.
async fn listed(url: &str) -> Value {
    let run = run_cmd(command(url, &["--json", "schedules"])).await;
    serde_json::from_str::<Value>(&run.stdout).unwrap_or_default()[0]["schedule"].clone()
}

async fn worker(url: &str, file: &std::path::Path) -> tokio::process::Child {
    let mut cmd = command(url, &["worker", "--pipelines", file.to_str().unwrap()]);
    cmd.stderr(std::process::Stdio::null());
    cmd.spawn().unwrap()
}

async fn stop(mut child: tokio::process::Child) {
    // SAFETY: the worker is this test's own child
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
    let _ = tokio::time::timeout(WAIT, child.wait()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_on_start_window_offset_and_a_start_added_later() {
    let srv = RedisServer::start();
    let url = srv.url();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pipelines.toml");
    let head = "[[pipeline]]\nname = \"sales\"\n[[pipeline.step]]\nname = \"load\"\nrun = [\"true\"]\n[[pipeline.schedule]]\nname = \"hourly\"\nevery = \"1h\"\nwindow_offset = \"-1h\"\n";
    std::fs::write(&file, format!("{head}run_on_start = true\n")).unwrap();
    let w = worker(&url, &file).await;
    wait_until_async(WAIT, "the latest window enqueued at start", || {
        let url = url.clone();
        async move { listed(&url).await["last_job"].is_string() }
    })
    .await;
    let s = listed(&url).await;
    let (start, end) = (
        s["last_window"][0].as_i64().unwrap(),
        s["last_window"][1].as_i64().unwrap(),
    );
    let now = jiff::Timestamp::now().as_millisecond();
    assert_eq!(end - start, 3_600_000, "{s:#}");
    assert!(
        end <= now && now - end < 3_600_000,
        "the latest whole hour: {s:#}"
    );
    // the job's window is the hour before the tick's window
    let job = s["last_job"].as_str().unwrap().to_owned();
    let shown = run_cmd(command(&url, &["--json", "show", &job]))
        .await
        .ok()
        .json();
    let input = match &shown["job"]["input"] {
        Value::String(t) => serde_json::from_str::<Value>(t).unwrap(),
        other => other.clone(),
    };
    let window_start: jiff::Timestamp = input["window"]["start"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        window_start.as_millisecond(),
        start - 3_600_000,
        "{input:#}"
    );
    stop(w).await;

    // a start added later, three hours back: honoured, the windows since caught up
    let from = jiff::Timestamp::from_millisecond(start - 3 * 3_600_000).unwrap();
    std::fs::write(
        &file,
        format!("{head}start = \"{from}\"\ncatch_up = \"all\"\n"),
    )
    .unwrap();
    let w = worker(&url, &file).await;
    wait_until_async(WAIT, "the windows since the new start enqueued", || {
        let url = url.clone();
        async move { listed(&url).await["counts"]["caught_up"].as_u64() >= Some(2) }
    })
    .await;
    let ticks = run_cmd(command(&url, &["--json", "schedules", "ticks", "hourly"]))
        .await
        .ok()
        .json();
    assert!(
        ticks
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["outcome"] == "restarted"),
        "{ticks:#}"
    );
    stop(w).await;
}
