//! The service recipes of the binary-only way in, run as their managers
//! would: `examples/service/leasehold-worker.service` (its `ExecStartPre`,
//! `ExecStart`, `ExecReload` and `KillSignal`, with its `Environment=`) and
//! `examples/service/Dockerfile` (its `ENTRYPOINT` and `STOPSIGNAL`). The
//! paths they name are mapped onto the binary under test, a copy of
//! `examples/service/pipelines.toml` and a free port; the Redis URL is the
//! test's own (as the unit's `EnvironmentFile` would set it).

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold_testkit::{wait_until_async, RedisServer};
use serde_json::Value;
use support::binary::{command, run_cmd, BIN};

const WAIT: Duration = Duration::from_secs(30);
const UNIT: &str = include_str!("../../examples/service/leasehold-worker.service");
const DOCKERFILE: &str = include_str!("../../examples/service/Dockerfile");
const PIPELINES: &str = include_str!("../../examples/service/pipelines.toml");

/// The `[Service]` settings of the unit, each key with its values in order.
fn service_settings() -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut in_service = false;
    for line in UNIT.lines().map(str::trim) {
        if line.starts_with('[') {
            in_service = line == "[Service]";
        } else if in_service && !line.starts_with('#') {
            if let Some((k, v)) = line.split_once('=') {
                out.entry(k.to_owned()).or_default().push(v.to_owned());
            }
        }
    }
    out
}

/// The recipe's paths mapped onto this test's: the binary, the file, the port.
struct Mapping {
    file: String,
    metrics: String,
}

impl Mapping {
    fn argv(&self, words: &[&str]) -> Vec<String> {
        words
            .iter()
            .map(|w| match *w {
                "/usr/local/bin/leasehold" => BIN.to_owned(),
                "/etc/leasehold/pipelines.toml" => self.file.clone(),
                "127.0.0.1:9464" | "0.0.0.0:9464" => self.metrics.clone(),
                other => other.to_owned(),
            })
            .collect()
    }
}

fn spawn(argv: &[String], env: &[(String, String)], url: &str) -> tokio::process::Child {
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_remove("LEASEHOLD_REDIS_URL")
        .envs(env.iter().cloned())
        .env("REDIS_URL", url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    cmd.spawn().unwrap()
}

/// A job of `hello` runs to SUCCEEDED.
async fn serves(url: &str) {
    let id = run_cmd(command(
        url,
        &["--json", "enqueue", "hello", "--input", "{}"],
    ))
    .await
    .ok()
    .json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_until_async(WAIT, "the job succeeded", || {
        let (url, id) = (url.to_owned(), id.clone());
        async move {
            let run = run_cmd(command(&url, &["--json", "show", &id])).await;
            serde_json::from_str::<Value>(&run.stdout)
                .is_ok_and(|v| v["job"]["state"] == "SUCCEEDED")
        }
    })
    .await;
}

async fn registered(url: &str) {
    wait_until_async(WAIT, "the worker registered its pipeline", || {
        let url = url.to_owned();
        async move {
            run_cmd(command(&url, &["enqueue", "hello", "--input", "{}"]))
                .await
                .code
                == 0
        }
    })
    .await;
}

fn mapping(dir: &std::path::Path) -> Mapping {
    let file = dir.join("pipelines.toml");
    std::fs::write(&file, PIPELINES).unwrap();
    Mapping {
        file: file.to_str().unwrap().to_owned(),
        metrics: std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_systemd_unit_starts_reloads_and_stops_the_worker() {
    let srv = RedisServer::start();
    let url = srv.url();
    let dir = tempfile::tempdir().unwrap();
    let map = mapping(dir.path());
    let s = service_settings();
    let env: Vec<(String, String)> = s["Environment"]
        .iter()
        .filter_map(|e| e.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .filter(|(k, _)| k != "REDIS_URL")
        .collect();
    // ExecStartPre: the check passes
    let pre: Vec<&str> = s["ExecStartPre"][0].split_whitespace().collect();
    let mut check = spawn(&map.argv(&pre), &env, &url);
    assert!(check.wait().await.unwrap().success(), "ExecStartPre failed");
    // ExecStart: the worker serves the file
    let start: Vec<&str> = s["ExecStart"][0].split_whitespace().collect();
    let mut worker = spawn(&map.argv(&start), &env, &url);
    let pid = worker.id().unwrap().to_string();
    registered(&url).await;
    serves(&url).await;
    let metrics = reqwest::get(format!("http://{}/metrics", map.metrics))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("leasehold_"), "{metrics}");
    // ExecReload: SIGHUP; the worker keeps serving
    let reload: Vec<String> = s["ExecReload"][0]
        .replace("$MAINPID", &pid)
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let mut kill = spawn(&reload, &[], &url);
    assert!(kill.wait().await.unwrap().success());
    serves(&url).await;
    assert!(
        worker.try_wait().unwrap().is_none(),
        "the reload stopped the worker"
    );
    // KillSignal: a clean stop, so Restart=on-failure does not restart it
    assert_eq!(s["KillSignal"][0], "SIGTERM");
    assert_eq!(s["Restart"][0], "on-failure");
    // SAFETY: the worker is this test's own child
    unsafe { libc::kill(worker.id().unwrap() as i32, libc::SIGTERM) };
    let status = tokio::time::timeout(WAIT, worker.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_container_recipes_entrypoint_serves_and_stops_on_its_stop_signal() {
    let srv = RedisServer::start();
    let url = srv.url();
    let dir = tempfile::tempdir().unwrap();
    let map = mapping(dir.path());
    let entrypoint = DOCKERFILE
        .lines()
        .find_map(|l| l.strip_prefix("ENTRYPOINT "))
        .expect("an ENTRYPOINT");
    let words: Vec<String> = serde_json::from_str(entrypoint).expect("the exec form");
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let stop = DOCKERFILE
        .lines()
        .find_map(|l| l.strip_prefix("STOPSIGNAL "))
        .expect("a STOPSIGNAL");
    assert_eq!(stop, "SIGTERM");
    let mut worker = spawn(
        &map.argv(&words),
        &[("RUST_LOG".into(), "info".into())],
        &url,
    );
    registered(&url).await;
    serves(&url).await;
    // SAFETY: the worker is this test's own child
    unsafe { libc::kill(worker.id().unwrap() as i32, libc::SIGTERM) };
    let status = tokio::time::timeout(WAIT, worker.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}
