//! Process steps with real processes, what goes in and out: bounded log
//! tails and progress lines under ten megabytes of stdout, and hostile
//! arguments, inputs and file names, and the job's fields and window as
//! arguments, reaching the child unchanged.
//!
//! The scripts are small `sh` and `python3` programs written by each test into
//! a temporary directory (`support/process.rs`). Every wait is on a condition
//! with a generous deadline.

mod support;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use leasehold_core::process::{read_records, DeclaredPipeline, ProcessStep, StepOutcome};
use leasehold_core::{JobState, PipelineOptions, RetryPolicy};
use leasehold_testkit::{wait_until_async, RedisServer};
use serde_json::{json, Value};
use support::connect;
use support::process::*;

/// The most the worker's peak resident memory may grow while its step writes
/// 10 MB to stdout. The worker reads the pipes in chunks and keeps a 16 KiB
/// tail per stream, so what it holds does not depend on how much the child
/// writes; 4 MiB leaves room for allocator arenas and tokio's buffers on a
/// loaded machine and is still far below the 10.3 MB a worker that buffered
/// the output (or a tenth of it twice over) would add.
#[cfg(target_os = "linux")]
const FLAT_MEMORY_BOUND: u64 = 4 * 1024 * 1024;

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_megabytes_of_stdout_keep_the_stored_tail_bounded_and_progress_is_reported() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let body = format!(
        r#"
import os, sys, time
print("::progress 40", flush=True)
while not os.path.exists({go:?}):
    time.sleep(0.01)
line = "x" * 99 + "\n"
for _ in range(100 * 1024):
    sys.stdout.write(line)
sys.stdout.write("y" * (300 * 1024))
sys.stdout.write("\nlast line\n")
sys.stderr.write("warning: something\n")
"#,
        go = go.to_str().unwrap()
    );
    let path = script(dir.path(), "loud.py", &body);
    // the worker in its own process, so its memory is its own in /proc
    let (mut worker, _) = Fixture::start(&srv.url(), "loud", &[], PYTHON, &[path.as_os_str()]);
    let q = connect(&srv.url(), "loud").await;
    let id = enqueue(&srv.url(), "loud", &json!({})).await;
    wait_until_async(WAIT, "the progress is recorded", || {
        let q = q.clone();
        let id = id.clone();
        async move {
            read_records(&q, id.as_str()).await.is_ok_and(|r| {
                r.iter()
                    .any(|r| r.progress == Some(40.0) && r.outcome == StepOutcome::Running)
            })
        }
    })
    .await;
    let series = format!(
        "leasehold_step_progress_percent{{queue=\"loud\",pipeline=\"loud\",step=\"run\",job=\"{id}\"}} 40.0"
    );
    let metrics = worker.metrics();
    assert!(metrics.contains(&series), "{metrics}");
    // the step runs, its child waits for `go`: the worker is fully set up
    let (rss_before, peak_before) = worker.memory();
    std::fs::write(&go, "").unwrap();
    let job = ended(&q, &id).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    let (rss_after, peak_after) = worker.memory();
    eprintln!(
        "worker memory: VmRSS {rss_before} -> {rss_after} B, VmHWM {peak_before} -> {peak_after} B"
    );
    assert!(
        peak_after.saturating_sub(peak_before) < FLAT_MEMORY_BOUND,
        "the worker's peak memory grew by {} B while its child wrote 10 MB",
        peak_after - peak_before
    );
    assert!(
        rss_after.saturating_sub(rss_before) < FLAT_MEMORY_BOUND,
        "the worker's memory grew by {} B while its child wrote 10 MB",
        rss_after - rss_before
    );
    let rec = record(&q, &id, 1, "run").await;
    assert_eq!(rec.stdout_bytes, 100 * 1024 * 100 + 300 * 1024 + 11);
    assert!(
        rec.stdout_tail.len() <= 16 * 1024,
        "{}",
        rec.stdout_tail.len()
    );
    // the 300 KiB line without a newline was cut into pieces, and the tail starts at a line
    assert_eq!(rec.stdout_tail, "last line\n");
    assert_eq!(rec.stderr_tail, "warning: something\n");
    assert_eq!(rec.progress, Some(40.0));
    // the series goes with the step
    let metrics = worker.metrics();
    assert!(
        !metrics.contains("leasehold_step_progress_percent{"),
        "{metrics}"
    );
    // what Redis keeps for it
    let mut conn = q.pool().get().await.unwrap();
    let bytes: i64 = leasehold_core::redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(q.keys().process_log(id.as_str()))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(bytes < 64 * 1024, "{bytes}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_arguments_inputs_and_file_names_reach_the_child_unchanged() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("pwned");
    let weird_name = OsString::from_vec(b"odd \xff\xfe name $(x).txt".to_vec());
    let weird_path = dir.path().join(&weird_name);
    std::fs::write(&weird_path, b"content\n").unwrap();
    let dump = script(
        dir.path(),
        "dump.py",
        r#"
import json, os, sys
env = {k: v for k, v in os.environ.items() if k.startswith("LEASEHOLD_")}
out = {
    "argv": [os.fsencode(a).hex() for a in sys.argv[1:]],
    "input": open(os.environ["LEASEHOLD_INPUT"], "rb").read().hex(),
    "env": env,
    "file": open(os.fsencode(sys.argv[-1]), "rb").read().decode(),
}
json.dump(out, open(os.environ["LEASEHOLD_OUTPUT"], "w"))
"#,
    );
    let args: Vec<OsString> = vec![
        "it's \"quoted\"".into(),
        "two words".into(),
        "line one\nline two".into(),
        format!("$(touch {})", marker.display()).into(),
        "`touch x`; rm -rf /nonexistent".into(),
        OsString::from_vec(b"bytes \xff\x80 here".to_vec()),
        weird_path.clone().into_os_string(),
    ];
    let pipeline = DeclaredPipeline::new("hostile")
        .step(
            "dump",
            ProcessStep::new(PYTHON).arg(&dump).args(args.clone()),
        )
        .resource_template("shop:{shop}")
        .unwrap()
        .input_key_template("{shop}:{window.start}")
        .unwrap();
    let worker = serve(&srv.url(), pipeline).await;
    let q = connect(&srv.url(), "hostile").await;
    let input = json!({
        "shop": "acme",
        "note": "a \"b\" $(c) `d`\n'e' ünïcödé \u{0000} \\ tab\t",
        "window": {"start": "2026-01-01T10:00:00Z", "end": "2026-01-01T11:00:00Z"},
    });
    let id = enqueue(&srv.url(), "hostile", &input).await;
    let job = ended(&q, &id).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    let out: &Value = &job.outputs["dump"];
    let hex = |b: &[u8]| b.iter().map(|c| format!("{c:02x}")).collect::<String>();
    let expected: Vec<String> = args.iter().map(|a| hex(a.as_encoded_bytes())).collect();
    assert_eq!(out["argv"], json!(expected));
    assert_eq!(out["file"], "content\n");
    assert!(!marker.exists(), "a shell interpreted an argument");
    let input_text = String::from_utf8(
        (0..out["input"].as_str().unwrap().len() / 2)
            .map(|i| {
                u8::from_str_radix(&out["input"].as_str().unwrap()[2 * i..2 * i + 2], 16).unwrap()
            })
            .collect(),
    )
    .unwrap();
    assert_eq!(serde_json::from_str::<Value>(&input_text).unwrap(), input);
    let env = &out["env"];
    assert_eq!(env["LEASEHOLD_JOB_ID"], id.as_str());
    assert_eq!(env["LEASEHOLD_QUEUE"], "hostile");
    assert_eq!(env["LEASEHOLD_PIPELINE"], "hostile");
    assert_eq!(env["LEASEHOLD_STEP"], "dump");
    assert_eq!(env["LEASEHOLD_ATTEMPT"], "1");
    assert_eq!(env["LEASEHOLD_FENCE"], job.attempts[0].fence.to_string());
    assert_eq!(
        env["LEASEHOLD_RESOURCE"],
        format!("shop:{}", input["shop"].as_str().unwrap())
    );
    assert_eq!(
        env["LEASEHOLD_INPUT_KEY"],
        format!("{}:2026-01-01T10:00:00Z", input["shop"].as_str().unwrap())
    );
    assert_eq!(env["LEASEHOLD_WINDOW_START"], "2026-01-01T10:00:00Z");
    assert_eq!(env["LEASEHOLD_WINDOW_END"], "2026-01-01T11:00:00Z");
    assert!(env.get("LEASEHOLD_PREVIOUS").is_none());
    stop(worker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_take_the_jobs_fields_and_window_each_as_one_argument() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("pwned");
    let dump = script(
        dir.path(),
        "argv.py",
        "import json, os, sys\njson.dump(sys.argv[1:], open(os.environ['LEASEHOLD_OUTPUT'], 'w'))\n",
    );
    let pipeline = DeclaredPipeline::new("argv")
        .step(
            "dump",
            ProcessStep::new(PYTHON).arg(&dump).args([
                "{note}",
                "--hour={window.start:%Y-%m-%dT%H}",
                "{window.end}",
                "{\"literal\": 1}",
                "{{.Go}}",
            ]),
        )
        .options(PipelineOptions::new().retry(RetryPolicy::exponential(3)));
    let worker = serve(&srv.url(), pipeline).await;
    let q = connect(&srv.url(), "argv").await;
    let note = format!("a b; $(touch {}) `x`", marker.display());
    let input = json!({
        "note": note,
        "window": {"start": "2026-01-01T10:00:00Z", "end": "2026-01-01T11:00:00Z"},
    });
    let id = enqueue(&srv.url(), "argv", &input).await;
    let job = ended(&q, &id).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    assert_eq!(
        job.outputs["dump"],
        json!([
            note,
            "--hour=2026-01-01T10",
            "2026-01-01T11:00:00Z",
            "{\"literal\": 1}",
            "{{.Go}}"
        ])
    );
    assert!(!marker.exists(), "a shell interpreted a field");
    // a field the input lacks: a permanent failure that names the argument,
    // and nothing runs
    let id = enqueue(&srv.url(), "argv", &json!({"window": input["window"]})).await;
    let job = ended(&q, &id).await;
    assert_eq!((job.state, job.attempt), (JobState::Failed, 1), "{job:?}");
    let error = job.attempts[0].error.as_ref().unwrap();
    assert_eq!(error.kind, "input", "{error:?}");
    assert!(!error.retryable);
    assert!(
        error
            .message
            .contains("argument 2 (\"{note}\"): the input has no field `note`"),
        "{error:?}"
    );
    stop(worker).await;
}
