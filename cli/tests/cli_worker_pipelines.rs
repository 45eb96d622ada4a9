//! `leasehold worker --pipelines FILE` as a real process: a malformed file is
//! refused with its line and column before anything connects (Redis stays
//! empty: no worker starts half-configured); a good file's pipeline runs its
//! scripts, and `show` has their exit, progress and log tails; the worker's
//! log times follow the operator's time convention (UTC unless local).

mod support;

use std::time::Duration;

use leasehold_testkit::{wait_until_async, RedisServer};
use serde_json::Value;
use support::binary::{command, run_cmd};

/// Deadline of every wait.
const WAIT: Duration = Duration::from_secs(30);

/// Every key in the server.
fn keys(srv: &RedisServer) -> Vec<String> {
    let client = leasehold_core::redis::Client::open(srv.url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    leasehold_core::redis::cmd("KEYS")
        .arg("*")
        .query(&mut conn)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_pipelines_file_is_refused_with_line_and_column_and_nothing_starts() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pipelines.toml");
    // the first pipeline is fine, the second's schedule is not: nothing may start
    std::fs::write(
        &file,
        r#"[[pipeline]]
name = "good"
[[pipeline.step]]
name = "a"
run = ["true"]

[[pipeline]]
name = "bad"
[[pipeline.schedule]]
name = "hourly"
cron = "0 * * *  * * *"
[[pipeline.step]]
name = "b"
run = ["true"]
"#,
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let run = run_cmd(command(&srv.url(), &["worker", "--pipelines", path]))
        .await
        .code(2);
    assert!(run.stderr.contains(&format!("{path}:11:8: ")), "{run:#?}");
    assert!(
        keys(&srv).is_empty(),
        "the worker wrote to Redis: {:?}",
        keys(&srv)
    );

    std::fs::write(&file, "[[pipeline]]\nname = \"x\"\nsteps = 3\n").unwrap();
    let run = run_cmd(command(&srv.url(), &["worker", "--pipelines", path]))
        .await
        .code(2);
    assert!(
        run.stderr
            .contains(&format!("{path}:3:1: unknown setting `steps`")),
        "{run:#?}"
    );

    std::fs::write(&file, "[[pipeline]]\nname = \"x\"\n[[pipeline.step]]\nname = \"s\"\nrun = [\"true\"]\ntimeout = \"forever\"\n").unwrap();
    let run = run_cmd(command(&srv.url(), &["worker", "--pipelines", path]))
        .await
        .code(2);
    assert!(
        run.stderr.contains(&format!("{path}:6:11: timeout")),
        "{run:#?}"
    );
    assert!(keys(&srv).is_empty());

    // --check needs no Redis at all
    std::fs::write(
        &file,
        "[[pipeline]]\nname = \"x\"\n[[pipeline.step]]\nname = \"s\"\nrun = [\"true\"]\n",
    )
    .unwrap();
    run_cmd(command(
        "redis://127.0.0.1:1",
        &["worker", "--pipelines", path, "--check"],
    ))
    .await
    .ok()
    .shows(&["1 pipeline(s), valid", "x (queue x): s"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_pipeline_runs_its_scripts_and_show_has_their_logs() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("fetch.sh"),
        "echo \"fetching $LEASEHOLD_RESOURCE\"\necho '::progress 50'\nprintf '{\"rows\": 3}' > \"$LEASEHOLD_OUTPUT\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("load.py"),
        "import json, os, sys\nrows = json.load(open(os.environ['LEASEHOLD_PREVIOUS']))['rows']\nprint('loaded', rows, 'rows', file=sys.stderr)\njson.dump({'loaded': rows}, open(os.environ['LEASEHOLD_OUTPUT'], 'w'))\n",
    )
    .unwrap();
    let file = dir.path().join("pipelines.toml");
    std::fs::write(
        &file,
        r#"[[pipeline]]
name = "report"
queue = "reports"
resource = "source:{source}"
input_schema = { type = "object", required = ["source"] }
retry = { max_attempts = 2, initial_backoff = "100ms" }

[[pipeline.step]]
name = "fetch"
run = ["sh", "fetch.sh"]

[[pipeline.step]]
name = "load"
run = ["python3", "load.py"]
"#,
    )
    .unwrap();
    // a free loopback port for the worker's metrics
    let metrics_addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let mut worker = command(
        &srv.url(),
        &[
            "worker",
            "--pipelines",
            file.to_str().unwrap(),
            "--metrics-addr",
            &metrics_addr,
        ],
    );
    worker.stderr(std::process::Stdio::null());
    let mut worker = worker.spawn().unwrap();
    // the worker publishes the spec: the enqueue contract applies (schema, templates)
    let url = srv.url();
    wait_until_async(WAIT, "the worker registered the pipeline", || {
        let url = url.clone();
        async move {
            !run_cmd(command(&url, &["enqueue", "report", "--input", "{}"]))
                .await
                .stderr
                .contains("not registered")
        }
    })
    .await;
    // the input schema the file gives is checked
    let refused = run_cmd(command(&url, &["enqueue", "report", "--input", "{}"])).await;
    assert!(
        refused.code != 0 && refused.stderr.contains("source"),
        "{refused:#?}"
    );
    let run = run_cmd(command(
        &url,
        &[
            "--json",
            "enqueue",
            "report",
            "--input",
            r#"{"source":"shop-a"}"#,
        ],
    ))
    .await
    .ok();
    let id = run.json()["id"].as_str().unwrap().to_owned();
    wait_until_async(WAIT, "the job succeeded", || {
        let (url, id) = (url.clone(), id.clone());
        async move {
            let run = run_cmd(command(&url, &["--json", "show", &id])).await;
            serde_json::from_str::<Value>(&run.stdout)
                .is_ok_and(|v| v["job"]["state"] == "SUCCEEDED")
        }
    })
    .await;
    let shown = run_cmd(command(&url, &["--json", "show", &id]))
        .await
        .ok()
        .json();
    assert_eq!(shown["job"]["outputs"]["load"]["loaded"], 3, "{shown:#}");
    assert_eq!(shown["job"]["resource"], "source:shop-a");
    let steps = shown["process_steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{shown:#}");
    assert_eq!(steps[0]["stdout_tail"], "fetching source:shop-a\n");
    assert_eq!(steps[0]["progress"], 50.0);
    assert_eq!(steps[1]["stderr_tail"], "loaded 3 rows\n");
    run_cmd(command(&url, &["show", &id])).await.ok().shows(&[
        "process steps",
        "attempt 1 · fetch · exited with code 0 (succeeded)",
        "progress 50%",
        "| fetching source:shop-a",
        "| loaded 3 rows",
    ]);
    // --metrics-addr: the worker's own Prometheus metrics count the job's steps
    let metrics = reqwest::get(format!("http://{metrics_addr}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("leasehold_step_duration_seconds_count{")
            && metrics.contains("step=\"load\""),
        "{metrics}"
    );
    // SIGTERM: a graceful stop, exit 0
    // SAFETY: the worker is this test's own child
    unsafe { libc::kill(worker.id().unwrap() as i32, libc::SIGTERM) };
    let status = tokio::time::timeout(WAIT, worker.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}

/// The first log line of `leasehold [--local-time] worker` in zone `tz`
/// (the banner before it skipped).
async fn first_log_line(url: &str, local: bool, tz: &str, file: &std::path::Path) -> String {
    use tokio::io::AsyncBufReadExt;
    let mut args = vec!["worker", "--pipelines", file.to_str().unwrap()];
    if local {
        args.insert(0, "--local-time");
    }
    let mut cmd = command(url, &args);
    cmd.env("TZ", tz).env_remove("LEASEHOLD_LOCAL_TIME");
    cmd.stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    // the first line that starts with a time (a banner comes before the log)
    let line = tokio::time::timeout(WAIT, async {
        while let Ok(Some(line)) = lines.next_line().await {
            // stderr is a pipe here, not a terminal: no colour codes
            assert!(!line.contains('\u{1b}'), "colour in a piped log: {line:?}");
            if line.starts_with(|c: char| c.is_ascii_digit()) {
                return line;
            }
        }
        String::new()
    })
    .await
    .expect("the worker logs within the deadline");
    // SAFETY: the worker is this test's own child
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
    let _ = tokio::time::timeout(WAIT, child.wait()).await;
    line
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_log_times_are_utc_unless_the_operator_chose_local_time() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pipelines.toml");
    std::fs::write(
        &file,
        "[[pipeline]]\nname = \"tick\"\nqueue = \"logs\"\n\n[[pipeline.step]]\nname = \"one\"\nrun = [\"true\"]\n",
    )
    .unwrap();
    let utc = first_log_line(&srv.url(), false, "Asia/Seoul", &file).await;
    let stamp = utc.split_whitespace().next().unwrap_or_default();
    assert!(stamp.ends_with('Z') && stamp.len() == 24, "{utc:?}");
    let local = first_log_line(&srv.url(), true, "Asia/Seoul", &file).await;
    let stamp = local.split_whitespace().next().unwrap_or_default();
    assert!(stamp.ends_with("+09:00"), "{local:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_a_good_file_and_keeps_the_running_one_on_a_bad_one() {
    let srv = RedisServer::start();
    let url = srv.url();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pipelines.toml");
    let one = "[[pipeline]]\nname = \"a\"\nqueue = \"reload\"\n[[pipeline.step]]\nname = \"s\"\nrun = [\"true\"]\n";
    std::fs::write(&file, one).unwrap();
    let metrics_addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let mut worker = command(
        &url,
        &[
            "worker",
            "--pipelines",
            file.to_str().unwrap(),
            "--metrics-addr",
            &metrics_addr,
        ],
    );
    worker.stderr(std::process::Stdio::null());
    let mut worker = worker.spawn().unwrap();
    let pid = worker.id().unwrap() as i32;
    // a job of `name` runs to SUCCEEDED
    let runs = |name: &'static str| {
        let url = url.clone();
        async move {
            let run = run_cmd(command(&url, &["--json", "enqueue", name, "--input", "{}"])).await;
            let Some(id) = serde_json::from_str::<Value>(&run.stdout)
                .ok()
                .and_then(|v| v["id"].as_str().map(str::to_owned))
            else {
                return false;
            };
            for _ in 0..100 {
                let shown = run_cmd(command(&url, &["--json", "show", &id])).await;
                if serde_json::from_str::<Value>(&shown.stdout)
                    .is_ok_and(|v| v["job"]["state"] == "SUCCEEDED")
                {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            false
        }
    };
    wait_until_async(WAIT, "pipeline a runs", || runs("a")).await;
    // a second pipeline, then SIGHUP: the worker serves both
    std::fs::write(
        &file,
        format!("{one}[[pipeline]]\nname = \"b\"\nqueue = \"reload\"\n[[pipeline.step]]\nname = \"s\"\nrun = [\"true\"]\n"),
    )
    .unwrap();
    // SAFETY: the worker is this test's own child
    unsafe { libc::kill(pid, libc::SIGHUP) };
    wait_until_async(WAIT, "pipeline b runs after the reload", || runs("b")).await;
    // a broken file: refused, the running pipelines stay
    std::fs::write(&file, "[[pipeline]]\nname = \"a\"\nlease_ttl = \"0s\"\n").unwrap();
    // SAFETY: as above
    unsafe { libc::kill(pid, libc::SIGHUP) };
    assert!(runs("a").await && runs("b").await);
    assert!(worker.try_wait().unwrap().is_none(), "the worker exited");
    // SAFETY: as above
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = tokio::time::timeout(WAIT, worker.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}
