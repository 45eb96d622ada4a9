//! What a script prints, or an input holds, never drives the operator's
//! terminal: terminal sequences (clear screen, window title, colour, a
//! one-byte C1 CSI), carriage returns and DEL are shown as visible escapes in
//! `show` (error line, tails, timeline, events), the job and event lists,
//! `status` (an operator's pause reason), the dashboard's job page and the
//! worker's log line, with colour off and on; `--json` keeps the exact text.

mod support;

use std::time::Duration;

use leasehold_testkit::{wait_until_async, RedisServer};
use serde_json::Value;
use support::binary::{command, run_cmd};
use support::dashboard::{http, Dashboard};

/// Deadline of every wait.
const WAIT: Duration = Duration::from_secs(60);

/// The step: hostile lines on stdout, a hostile last line on stderr, exit 65
/// (a data error: permanent, so the job fails at once).
const SCRIPT: &str = r#"printf 'plain line\n'
printf 'clear \033[2J screen\n'
printf 'title \033]0;pwned\007 set\n'
printf 'colour \033[31mred\033[0m\n'
printf 'over\rwrite\n'
printf 'del \177 c1 \302\2332J\n'
printf 'fatal: \033[2Jboom\r \302\2332J\n' >&2
exit 65
"#;

/// How the script's lines must be shown.
const SHOWN: &[&str] = &[
    "plain line",
    "clear \\x1b[2J screen",
    "title \\x1b]0;pwned\\x07 set",
    "colour \\x1b[31mred\\x1b[0m",
    "over\\rwrite",
    "del \\x7f c1 \\x9b2J",
    "fatal: \\x1b[2Jboom\\r \\x9b2J",
];

/// `text` without the colour sequences (`ESC [ digits ; ... m`) that the CLI
/// or the log paints itself.
fn without_colour(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("\x1b[") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let len = after
            .find(|c: char| !(c.is_ascii_digit() || c == ';'))
            .unwrap_or(after.len());
        if after[len..].starts_with('m') {
            rest = &after[len + 1..];
        } else {
            // not a colour: keep it, so the check below sees it
            out.push('\x1b');
            rest = &rest[i + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// Asserts `text` holds no control character but newlines and tabs.
#[track_caller]
fn no_controls(what: &str, text: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|&c| c.is_control() && c != '\n' && c != '\t')
        .collect();
    assert!(bad.is_empty(), "{what} holds {bad:?}:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripts_control_characters_are_shown_never_sent() {
    let srv = RedisServer::start();
    let url = srv.url();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hostile.sh"), SCRIPT).unwrap();
    let file = dir.path().join("pipelines.toml");
    std::fs::write(
        &file,
        "[[pipeline]]\nname = \"hostile\"\n[[pipeline.step]]\nname = \"print\"\nrun = [\"sh\", \"hostile.sh\"]\n",
    )
    .unwrap();
    let log = dir.path().join("worker.log");
    let mut worker = command(&url, &["worker", "--pipelines", file.to_str().unwrap()]);
    // a step's output lines log at DEBUG (the tails keep them anyway)
    worker
        .env("RUST_LOG", "info,leasehold::process=debug")
        .stderr(std::fs::File::create(&log).unwrap());
    let mut worker = worker.spawn().unwrap();
    wait_until_async(WAIT, "the worker registered the pipeline", || {
        let url = url.clone();
        async move {
            run_cmd(command(&url, &["--json", "jobs"])).await.code == 0
                && !run_cmd(command(
                    &url,
                    &[
                        "enqueue",
                        "hostile",
                        "--input",
                        "{}",
                        "--input-key",
                        "probe",
                    ],
                ))
                .await
                .stderr
                .contains("not registered")
        }
    })
    .await;
    // an input holding ESC, C1 CSI and DEL (JSON escapes only the first)
    let input = r#"{"note":"in\u001b[2Jput \u009b \u007f"}"#;
    let run = run_cmd(command(
        &url,
        &["--json", "enqueue", "hostile", "--input", input],
    ))
    .await
    .ok();
    let id = run.json()["id"].as_str().unwrap().to_owned();
    wait_until_async(WAIT, "the job failed", || {
        let (url, id) = (url.clone(), id.clone());
        async move {
            let run = run_cmd(command(&url, &["--json", "show", &id])).await;
            serde_json::from_str::<Value>(&run.stdout).is_ok_and(|v| {
                v["job"]["state"] == "FAILED" && !v["process_steps"][0]["stderr_tail"].is_null()
            })
        }
    })
    .await;

    // --json keeps the exact bytes
    let json = run_cmd(command(&url, &["--json", "show", &id]))
        .await
        .ok()
        .json();
    let step = &json["process_steps"][0];
    assert!(
        step["stdout_tail"]
            .as_str()
            .unwrap()
            .contains("clear \x1b[2J screen\n"),
        "{json:#}"
    );
    assert_eq!(json["job"]["input"]["note"], "in\x1b[2Jput \u{9b} \x7f");

    // show, with colour off (a pipe) and forced on (as on a terminal)
    for colour in [false, true] {
        let mut cmd = command(&url, &["show", &id]);
        if colour {
            cmd.env("CLICOLOR_FORCE", "1");
        }
        let run = run_cmd(cmd).await.ok();
        if colour {
            assert!(run.stdout.contains("\x1b["), "no colour: {run:#?}");
        }
        let text = without_colour(&run.stdout);
        no_controls("show", &text);
        for line in SHOWN {
            assert!(text.contains(line), "show lacks {line:?}:\n{text}");
        }
        // the error line and the input
        assert!(
            text.contains("error: ") && text.contains("\\x1b[2Jboom\\r \\x9b2J"),
            "{text}"
        );
        assert!(text.contains("\\x9b \\x7f"), "{text}");

        let mut cmd = command(&url, &["jobs"]);
        if colour {
            cmd.env("CLICOLOR_FORCE", "1");
        }
        let run = run_cmd(cmd).await.ok();
        let text = without_colour(&run.stdout);
        no_controls("jobs", &text);
        // the list cuts the error to its column: the escape is shown at its start
        assert!(text.contains("fatal: \\x1b[2J"), "{text}");

        let run = run_cmd(command(&url, &["events"])).await.ok();
        no_controls("events", &run.stdout);
    }

    // the dashboard's job page (a terminal that fetches it gets no control either)
    let dash = Dashboard::start(&url, &[], None).await;
    let page = http()
        .get(dash.url(&format!("/jobs/hostile/{id}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    no_controls("the job page", &page);
    for line in SHOWN {
        assert!(page.contains(line), "the job page lacks {line:?}:\n{page}");
    }
    dash.stop().await;

    // SIGTERM: a graceful stop; then the log, with its colours taken out
    // SAFETY: the worker is this test's own child
    unsafe { libc::kill(worker.id().unwrap() as i32, libc::SIGTERM) };
    let _ = tokio::time::timeout(WAIT, worker.wait()).await;
    let log = std::fs::read_to_string(&log).unwrap();
    let text = without_colour(&log);
    no_controls("the worker's log", &text);
    for line in SHOWN {
        assert!(text.contains(line), "the log lacks {line:?}:\n{text}");
    }

    // an operator's reason: status and the events table show it visibly
    run_cmd(command(
        &url,
        &[
            "pause",
            "hostile",
            "--reason",
            "maint \x1b]0;pwned\x07 \u{9b}2J",
        ],
    ))
    .await
    .ok();
    for view in ["status", "events"] {
        let mut cmd = command(&url, &[view]);
        cmd.env("CLICOLOR_FORCE", "1");
        let run = run_cmd(cmd).await.ok();
        let text = without_colour(&run.stdout);
        no_controls(view, &text);
        assert!(
            text.contains("maint \\x1b]0;pwned\\x07 \\x9b2J"),
            "{view}:\n{text}"
        );
    }
}

/// A JSON input of `n` bytes or more: `{"blob":"xxx..."}`.
fn big_input(n: usize) -> String {
    format!("{{\"blob\":\"{}\"}}", "x".repeat(n))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_above_128_kib_is_enqueued_from_a_file_and_from_stdin() {
    use tokio::io::AsyncWriteExt;
    let srv = RedisServer::start();
    let url = srv.url();
    let dir = tempfile::tempdir().unwrap();
    let base = ["--json", "enqueue", "big", "--queue", "q", "--unregistered"];

    // from a file
    let input = big_input(200 * 1024);
    let path = dir.path().join("input.json");
    std::fs::write(&path, &input).unwrap();
    let arg = format!("@{}", path.display());
    let mut args = base.to_vec();
    args.extend(["--input", &arg, "--input-key", "from-file"]);
    let id = run_cmd(command(&url, &args)).await.ok().json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let shown = run_cmd(command(&url, &["--json", "show", &id]))
        .await
        .ok()
        .json();
    assert_eq!(
        shown["job"]["input"]["blob"].as_str().map(str::len),
        Some(200 * 1024)
    );

    // from standard input
    let input = big_input(300 * 1024);
    let mut args = base.to_vec();
    args.extend(["--input", "-", "--input-key", "from-stdin"]);
    let mut cmd = command(&url, &args);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = reply["id"].as_str().unwrap();
    let shown = run_cmd(command(&url, &["--json", "show", id]))
        .await
        .ok()
        .json();
    assert_eq!(
        shown["job"]["input"]["blob"].as_str().map(str::len),
        Some(300 * 1024)
    );

    // a missing file and a file that is not JSON: usage errors naming the file
    let missing = dir.path().join("missing.json");
    let arg = format!("@{}", missing.display());
    let mut args = base.to_vec();
    args.extend(["--input", &arg]);
    let run = run_cmd(command(&url, &args)).await.code(2);
    assert!(
        run.stderr.contains(&format!(
            "--input: cannot read file \"{}\"",
            missing.display()
        )),
        "{run:#?}"
    );
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"blob\": nope}").unwrap();
    let arg = format!("@{}", bad.display());
    let mut args = base.to_vec();
    args.extend(["--input", &arg]);
    let run = run_cmd(command(&url, &args)).await;
    assert!(
        run.code != 0
            && run
                .stderr
                .contains(&format!("input read from file \"{}\"", bad.display())),
        "{run:#?}"
    );
}
