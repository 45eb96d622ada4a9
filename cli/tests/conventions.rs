//! The command-line conventions, through the binary: shell completions and man
//! pages for every shell and command, colour only on a terminal and never with
//! `NO_COLOR` (or into a pipe), and a progress bar on a terminal's stderr that
//! never reaches stdout or a `--json` run. A terminal is a pseudo-terminal
//! from util-linux's `script`.

mod support;

use std::path::Path;
use std::process::Stdio;

use leasehold::queue::{JobState, NewJob};
use leasehold_testkit::RedisServer;
use support::binary::{command, run_cmd, Run, BIN};
use support::jobs::queue;

async fn cli(srv: &RedisServer, args: &[&str]) -> Run {
    run_cmd(command(&srv.url(), args)).await
}

/// Runs `line` (a shell command line) with a pseudo-terminal as its stdin,
/// stdout and stderr, in `dir`, with `env` set; what the terminal showed.
/// `None` when util-linux's `script` is not installed.
async fn on_terminal(dir: &Path, line: &str, env: &[(&str, &str)]) -> Option<Run> {
    if std::process::Command::new("script")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        eprintln!("util-linux's `script` is not installed: the terminal checks are skipped");
        return None;
    }
    let mut cmd = tokio::process::Command::new("script");
    cmd.args(["-q", "-e", "-c", line, "/dev/null"])
        .current_dir(dir)
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR")
        .env_remove("CLICOLOR_FORCE")
        .env("TERM", "xterm-256color")
        .env("USER", "tester")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Some(run_cmd(cmd).await)
}

#[tokio::test]
async fn completions_generate_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let run = run_cmd(command("redis://127.0.0.1:1", &["completions", shell]))
            .await
            .ok();
        assert!(
            run.stdout.len() > 1000 && run.stdout.contains("leasehold"),
            "{shell}: {run:?}"
        );
        // every command is offered, down to the nested ones
        for sub in ["enqueue", "quarantine", "trigger", "completions"] {
            assert!(run.stdout.contains(sub), "{shell} lacks {sub}");
        }
    }
    // the bash script is valid bash
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("leasehold.bash");
    let bash = run_cmd(command("redis://127.0.0.1:1", &["completions", "bash"]))
        .await
        .ok();
    std::fs::write(&script, bash.stdout).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .expect("bash runs");
    assert!(check.status.success(), "{check:?}");
    // an unknown shell is a usage error
    run_cmd(command("redis://127.0.0.1:1", &["completions", "tcsh"]))
        .await
        .code(2);
}

#[tokio::test]
async fn man_pages_generate_for_every_command() {
    let page = run_cmd(command("redis://127.0.0.1:1", &["man"])).await.ok();
    assert!(page.stdout.contains(".TH leasehold 1"), "{page:?}");
    assert!(
        page.stdout.contains("Examples"),
        "the examples are in the page"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    let run = run_cmd(command(
        "redis://127.0.0.1:1",
        &["man", "--dir", out.to_str().unwrap()],
    ))
    .await
    .ok();
    let mut pages: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for want in [
        "leasehold.1",
        "leasehold-status.1",
        "leasehold-enqueue.1",
        "leasehold-group-show.1",
        "leasehold-schedules-trigger.1",
        "leasehold-man.1",
    ] {
        assert!(
            pages.iter().any(|p| p == want),
            "{want} in {pages:?} ({run:?})"
        );
    }
    for p in &pages {
        let text = std::fs::read_to_string(out.join(p)).unwrap();
        assert!(text.contains(".TH "), "{p} is a man page");
    }
}

/// A queue with a QUEUED and a CANCELLED job (two coloured states).
async fn two_states(srv: &RedisServer) {
    let q = queue(srv, "orders").await;
    let cancelled = q
        .enqueue(NewJob::from_json("sync", "{\"n\":1}"))
        .await
        .unwrap()
        .id;
    q.enqueue(NewJob::from_json("sync", "{\"n\":2}"))
        .await
        .unwrap();
    let _ = q.cancel(&cancelled, "not needed", "tester").await.unwrap();
    let job = q.job(&cancelled).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Cancelled);
}

#[tokio::test]
async fn colour_only_on_a_terminal_and_never_with_no_color() {
    let srv = RedisServer::start();
    two_states(&srv).await;
    // into a pipe: plain
    for args in [&["jobs"][..], &["status"]] {
        let run = cli(&srv, args).await.ok();
        assert!(run.stdout.contains("CANCELLED"), "{run:?}");
        assert!(
            !run.stdout.contains('\x1b'),
            "escape codes in a pipe: {run:?}"
        );
    }
    // CLICOLOR_FORCE colours even a pipe, and NO_COLOR wins over it
    let mut forced = command(&srv.url(), &["jobs"]);
    forced.env("CLICOLOR_FORCE", "1");
    let forced = run_cmd(forced).await.ok();
    assert!(forced.stdout.contains("\x1b["), "{forced:?}");
    let mut both = command(&srv.url(), &["jobs"]);
    both.env("CLICOLOR_FORCE", "1").env("NO_COLOR", "1");
    let both = run_cmd(both).await.ok();
    assert!(!both.stdout.contains('\x1b'), "{both:?}");
    assert!(both.stdout.contains("CANCELLED"));

    // on a terminal: coloured, unless NO_COLOR
    let dir = tempfile::tempdir().unwrap();
    let line = format!("{BIN} --redis-url {} jobs", srv.url());
    let Some(tty) = on_terminal(dir.path(), &line, &[]).await else {
        return;
    };
    let tty = tty.ok();
    assert!(
        tty.stdout.contains("\x1b[") && tty.stdout.contains("CANCELLED"),
        "{tty:?}"
    );
    let plain = on_terminal(dir.path(), &line, &[("NO_COLOR", "1")])
        .await
        .unwrap()
        .ok();
    assert!(plain.stdout.contains("CANCELLED"), "{plain:?}");
    assert!(
        !plain.stdout.contains('\x1b'),
        "NO_COLOR on a terminal: {plain:?}"
    );
}

#[tokio::test]
async fn progress_is_drawn_on_a_terminal_and_json_stays_parseable() {
    let srv = RedisServer::start();
    let backfill = |key: &str| {
        format!(
            "{BIN} --redis-url {} enqueue sync --unregistered --queue orders \
             --input-template '{{\"from\":\"{{from}}\"}}' --from 2026-04-01 --to 2026-05-01 \
             --step 1h --input-key-template '{key}:{{from}}'",
            srv.url()
        )
    };
    let dir = tempfile::tempdir().unwrap();
    // a terminal's stderr gets the bar; stdout (a file here) only the summary
    let Some(run) = on_terminal(dir.path(), &format!("{} > summary.txt", backfill("a")), &[]).await
    else {
        return;
    };
    let run = run.ok();
    assert!(
        run.stdout.contains("/720 (") && run.stdout.contains("created"),
        "a bar on the terminal: {run:?}"
    );
    let summary = std::fs::read_to_string(dir.path().join("summary.txt")).unwrap();
    assert!(summary.starts_with("720 windows of sync"), "{summary}");
    assert!(
        !summary.contains('\x1b') && !summary.contains("/720"),
        "{summary}"
    );

    // --json on the same terminal: no bar, and the document parses
    let json_run = on_terminal(
        dir.path(),
        &format!("{} --json > out.json", backfill("b")),
        &[],
    )
    .await
    .unwrap()
    .ok();
    assert!(
        !json_run.stdout.contains("/720"),
        "no bar with --json: {json_run:?}"
    );
    let text = std::fs::read_to_string(dir.path().join("out.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).expect("stdout is one JSON document");
    assert_eq!((&v["windows"], &v["created"]), (&720.into(), &720.into()));

    // --json into pipes: stdout parses, stderr has no progress
    let run = cli(
        &srv,
        &[
            "--json",
            "enqueue",
            "sync",
            "--unregistered",
            "--queue",
            "orders",
            "--input-template",
            "{\"from\":\"{from}\"}",
            "--from",
            "2026-04-01",
            "--to",
            "2026-05-01",
            "--step",
            "1h",
            "--input-key-template",
            "c:{from}",
        ],
    )
    .await
    .ok();
    assert_eq!(run.json()["created"], 720);
    assert!(!run.stderr.contains("/720"), "{}", run.stderr);
}

/// The strings the agreement test tries: accepted and refused ones of every
/// kind (`#[pipeline]` takes the same: tests/ui/pass/full_pipeline.rs uses
/// "1d" and "1h30m", tests/ui/fail/bad_option_values.rs refuses "1mo" and
/// "250us").
const DURATIONS: &[(&str, bool)] = &[
    ("250ms", true),
    ("30s", true),
    ("1h30m", true),
    ("1d", true),
    ("2w", true),
    ("1.5s", true),
    ("PT5M", true),
    ("1 day", true),
    ("0s", true),
    ("1mo", false),
    ("1y", false),
    ("-5m", false),
    ("250us", false),
    ("", false),
    ("30", false),
    ("soon", false),
];

#[tokio::test]
async fn the_cli_and_the_library_accept_the_same_durations() {
    for (text, accepted) in DURATIONS {
        assert_eq!(
            leasehold::parse_duration(text).is_ok(),
            *accepted,
            "library on {text:?}"
        );
        // --timeout is read before anything connects; `completions` needs no Redis
        let arg = format!("--timeout={text}");
        let run = run_cmd(command(
            "redis://127.0.0.1:1",
            &[&arg, "completions", "bash"],
        ))
        .await;
        let want = if *accepted { 0 } else { 2 };
        assert_eq!(run.code, want, "CLI on {text:?}: {}", run.stderr);
        if !accepted {
            let why = leasehold::parse_duration(text).unwrap_err().to_string();
            assert!(
                run.stderr.contains(&why),
                "the CLI gives the library's reason: {}",
                run.stderr
            );
        }
    }
}
