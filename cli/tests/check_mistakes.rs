//! `leasehold worker --pipelines FILE --check` over a table of broken files:
//! each is refused with exit 2, every mistake named at its line (and column)
//! in one pass, and nothing connects to Redis (the URL given is a listener
//! of this test's that must never see a connection).

mod support;

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use support::binary::{command, run_cmd};

/// The head of a pipeline (lines 1-2).
const H: &str = "[[pipeline]]\nname = \"p\"\n";
/// A good step (lines 3-5 after [`H`]).
const STEP: &str = "[[pipeline.step]]\nname = \"s\"\nrun = [\"true\"]\n";

/// A broken file and what `--check` must say of it: each `(line, words)` is a
/// line of the output that starts with `FILE:line:` and holds `words`.
struct Case {
    name: &'static str,
    text: Vec<u8>,
    expect: Vec<(usize, &'static str)>,
}

fn case(name: &'static str, text: impl Into<Vec<u8>>, expect: &[(usize, &'static str)]) -> Case {
    Case {
        name,
        text: text.into(),
        expect: expect.to_vec(),
    }
}

/// A file of [`H`], [`STEP`] and `extra` (from line 6 on).
fn step_with(extra: &str) -> String {
    format!("{H}{STEP}{extra}")
}

/// A file of [`H`], `pipeline` settings (from line 3), then [`STEP`].
fn pipeline_with(settings: &str) -> String {
    format!("{H}{settings}{STEP}")
}

/// A file whose schedule (from line 3) holds `settings` (from line 5).
fn schedule_with(settings: &str) -> String {
    format!("{H}[[pipeline.schedule]]\nname = \"h\"\n{settings}{STEP}")
}

const SCHEMA: &str = "input_schema = { type = \"object\", required = [\"source\"], properties = { source = { type = \"string\" }, cfg = { type = \"object\" } }, additionalProperties = false }\n";

fn cases() -> Vec<Case> {
    let big = format!("{}{}", step_with(""), "#".repeat(1024 * 1024));
    let mut bad_utf8 = step_with("").into_bytes();
    bad_utf8.extend_from_slice(b"# caf\xe9\n");
    vec![
        // the file as a whole
        case("syntax", "[[pipeline]\nname = ", &[(1, "")]),
        case("unknown table", "[[pipelines]]\nname = \"p\"\n", &[(1, "unknown setting `pipelines`")]),
        case("empty", "", &[(1, "no pipeline declared")]),
        case("invalid utf-8", bad_utf8, &[(6, "not valid UTF-8 (byte 0xe9)")]),
        case("too large", big, &[]),
        case("pipeline twice", format!("{H}{STEP}{H}{STEP}"), &[(7, "pipeline \"p\" is declared twice")]),
        // a pipeline's settings
        case("pipeline without name", format!("[[pipeline]]\n{STEP}"), &[(1, "`name` is required here")]),
        case("pipeline without steps", H, &[(1, "has no steps")]),
        case("bad pipeline name", format!("[[pipeline]]\nname = \"a b{{\"\n{STEP}"), &[(2, "pipeline")]),
        case("unknown pipeline setting", pipeline_with("colour = \"red\"\n"), &[(3, "unknown setting `colour`")]),
        case("lease_ttl too short", pipeline_with("lease_ttl = \"500ms\"\n"), &[(3, "lease_ttl is 500ms: it must be at least 1s")]),
        case("lease_ttl zero", pipeline_with("lease_ttl = \"0s\"\n"), &[(3, "lease_ttl is")]),
        case("lease_ttl too long", pipeline_with("lease_ttl = \"2d\"\n"), &[(3, "at most")]),
        case("lease_ttl negative", pipeline_with("lease_ttl = \"-5s\"\n"), &[(3, "lease_ttl:")]),
        case("stale_lock word", pipeline_with("stale_lock = \"keep\"\n"), &[(3, "stale_lock is \"keep\"")]),
        case("on_stale word (old name)", pipeline_with("on_stale = \"keep\"\n"), &[(3, "stale_lock is \"keep\": expected \"hold\" or \"release\"")]),
        case("both names of stale_lock", pipeline_with("stale_lock = \"hold\"\non_stale = \"hold\"\n"), &[(4, "duplicate setting `stale_lock` (`on_stale` is its old name)")]),
        case("resource_limit zero", pipeline_with("resource = \"r\"\nflow = { resource_limit = 0 }\n"), &[(4, "resource_limit must be at least 1")]),
        case("max_running zero", pipeline_with("flow = { max_running = 0 }\n"), &[(3, "max_running must be at least 1")]),
        case("max_attempts zero", pipeline_with("retry = { max_attempts = 0 }\n"), &[(3, "max_attempts must be at least 1")]),
        case("multiplier", pipeline_with("retry = { multiplier = 0.5 }\n"), &[(3, "multiplier must be")]),
        case("jitter", pipeline_with("retry = { jitter = 2.0 }\n"), &[(3, "jitter must be between 0 and 1")]),
        case("backoffs crossed", pipeline_with("retry = { initial_backoff = \"10m\", max_backoff = \"1m\" }\n"), &[(3, "longer than max_backoff")]),
        case("negative backoff", pipeline_with("retry = { initial_backoff = \"-1s\" }\n"), &[(3, "initial_backoff:")]),
        case("unknown retry setting", pipeline_with("retry = { tries = 3 }\n"), &[(3, "unknown setting `tries`")]),
        case("rate", pipeline_with("flow = { rate = \"fast\" }\n"), &[(3, "rate:")]),
        case("limiter template", pipeline_with("flow = { limiter = \"{oops\" }\n"), &[(3, "limiter template")]),
        case("resource template", pipeline_with("resource = \"x:{oops\"\n"), &[(3, "")]),
        case("template names a forbidden field", pipeline_with(&format!("{SCHEMA}resource = \"src:{{shop}}\"\n")), &[(4, "names field `shop`, which the input schema forbids")]),
        case("template names an object", pipeline_with(&format!("{SCHEMA}input_key = \"{{cfg}}\"\n")), &[(4, "field `cfg` is of type object")]),
        case("limiter names a forbidden field", pipeline_with(&format!("{SCHEMA}flow = {{ limiter = \"{{region}}\" }}\n")), &[(4, "field `region`")]),
        case("schema not an object", pipeline_with("input_schema = 5\n"), &[(3, "")]),
        // a step's command
        case("step without name", format!("{H}[[pipeline.step]]\nrun = [\"true\"]\n"), &[(3, "a step needs a name")]),
        case("step without command", format!("{H}[[pipeline.step]]\nname = \"s\"\n"), &[(3, "has no command")]),
        case("run and shell", step_with("shell = \"true\"\n"), &[(6, "not both")]),
        case("empty run", format!("{H}[[pipeline.step]]\nname = \"s\"\nrun = []\n"), &[(5, "run must name a program")]),
        case("empty program", format!("{H}[[pipeline.step]]\nname = \"s\"\nrun = [\"\"]\n"), &[(5, "run's program is empty")]),
        case("empty shell", format!("{H}[[pipeline.step]]\nname = \"s\"\nshell = \" \"\n"), &[(5, "shell is empty")]),
        case("run as a string", format!("{H}[[pipeline.step]]\nname = \"s\"\nrun = \"true\"\n"), &[(5, "expected a sequence")]),
        case("program not on PATH", format!("{H}[[pipeline.step]]\nname = \"s\"\nrun = [\"no-such-program-anywhere\"]\n"), &[(5, "is not found on PATH")]),
        case("program path missing", format!("{H}[[pipeline.step]]\nname = \"s\"\nrun = [\"./missing.sh\"]\n"), &[(5, "does not exist")]),
        case("program not executable", format!("{H}[[pipeline.step]]\nname = \"s\"\nrun = [\"./noexec.sh\"]\n"), &[(5, "is not executable")]),
        case("program is a directory", format!("{H}[[pipeline.step]]\nname = \"s\"\nrun = [\"./scripts\"]\n"), &[(5, "is a directory")]),
        case("program not on the step's PATH", format!("{H}[[pipeline.step]]\nname = \"s\"\nenv = {{ PATH = \"/nonexistent\" }}\nrun = [\"ok.sh\"]\n"), &[(6, "is not found on PATH (/nonexistent)")]),
        case("program relative to cwd", format!("{H}[[pipeline.step]]\nname = \"s\"\ncwd = \"scripts\"\nrun = [\"./ok.sh\"]\n"), &[(6, "does not exist")]),
        case("cwd missing", step_with("cwd = \"nope\"\n"), &[(6, "does not exist")]),
        case("cwd a file", step_with("cwd = \"noexec.sh\"\n"), &[(6, "is not a directory")]),
        case("timeout zero", step_with("timeout = \"0s\"\n"), &[(6, "timeout is 0s: it must be more than 0s")]),
        case("timeout negative", step_with("timeout = \"-5m\"\n"), &[(6, "timeout:")]),
        case("timeout too long", step_with("timeout = \"30d\"\n"), &[(6, "timeout is")]),
        case("timeout words", step_with("timeout = \"soon\"\n"), &[(6, "timeout:")]),
        case("grace too long", step_with("grace = \"2h\"\n"), &[(6, "grace is")]),
        case("grace negative", step_with("grace = \"-1s\"\n"), &[(6, "grace:")]),
        case("exit code 300", step_with("retryable_exit_codes = [300]\n"), &[(6, "retryable_exit_codes holds 300")]),
        case("exit code 0 permanent", step_with("permanent_exit_codes = [0]\n"), &[(6, "permanent_exit_codes holds 0")]),
        case("exit code negative", step_with("permanent_exit_codes = [-1]\n"), &[(6, "holds -1")]),
        case("exit code in both", step_with("retryable_exit_codes = [65]\npermanent_exit_codes = [65]\n"), &[(6, "exit code 65 is in both")]),
        case("other_exits word", step_with("other_exits = \"maybe\"\n"), &[(6, "other_exits is \"maybe\"")]),
        case("tail_bytes negative", step_with("tail_bytes = -5\n"), &[(6, "")]),
        case("unknown step setting", step_with("colour = \"red\"\n"), &[(6, "unknown setting `colour`")]),
        case("step twice", format!("{H}{STEP}{STEP}"), &[(7, "step \"s\" is declared twice")]),
        case("step retry", step_with("retry = { max_attempts = 0 }\n"), &[(6, "max_attempts must be at least 1")]),
        // the cleanup command
        case("cleanup named", step_with("[pipeline.cleanup]\nname = \"c\"\nrun = [\"true\"]\n"), &[(7, "the cleanup command has no name")]),
        case("cleanup retried", step_with("[pipeline.cleanup]\nrun = [\"true\"]\nretry = { max_attempts = 2 }\n"), &[(8, "the cleanup command is not retried")]),
        case("cleanup program", step_with("[pipeline.cleanup]\nrun = [\"no-such-cleanup-program\"]\n"), &[(7, "is not found on PATH")]),
        case("cleanup cwd", step_with("[pipeline.cleanup]\nrun = [\"true\"]\ncwd = \"gone\"\n"), &[(8, "does not exist")]),
        // schedules
        case("cron", schedule_with("cron = \"61 * * * *\"\n"), &[(5, "")]),
        case("cron and every", schedule_with("cron = \"0 * * * *\"\nevery = \"1h\"\n"), &[(3, "needs exactly one of cron")]),
        case("no cadence", schedule_with(""), &[(3, "needs exactly one of cron")]),
        case("every too short", schedule_with("every = \"500ms\"\n"), &[(5, "at least 1s")]),
        case("every words", schedule_with("every = \"hourly\"\n"), &[(5, "every:")]),
        case("zone", schedule_with("cron = \"0 * * * *\"\nzone = \"Mars/Olympus\"\n"), &[(6, "")]),
        case("start", schedule_with("cron = \"0 * * * *\"\nstart = \"yesterday\"\n"), &[(6, "")]),
        case("catch_up word", schedule_with("cron = \"0 * * * *\"\ncatch_up = \"some\"\n"), &[(6, "catch_up is \"some\"")]),
        case("catch_up_max alone", schedule_with("cron = \"0 * * * *\"\ncatch_up_max = 3\n"), &[(6, "catch_up_max goes with")]),
        case("catch_up_max with latest", schedule_with("cron = \"0 * * * *\"\ncatch_up = \"latest\"\ncatch_up_max = 3\n"), &[(7, "catch_up_max goes with catch_up = \"all\"")]),
        case("catch_up_max zero", schedule_with("cron = \"0 * * * *\"\ncatch_up = \"all\"\ncatch_up_max = 0\n"), &[(7, "catch_up_max must be at least 1")]),
        case("overlap word", schedule_with("cron = \"0 * * * *\"\noverlap = \"never\"\n"), &[(6, "overlap is \"never\"")]),
        case("schedule grace", schedule_with("cron = \"0 * * * *\"\ngrace = \"30d\"\n"), &[(6, "grace is")]),
        case("input with window", schedule_with("cron = \"0 * * * *\"\ninput = { window = 1 }\n"), &[(6, "")]),
        case("schedule twice", format!("{H}[[pipeline.schedule]]\nname = \"h\"\nevery = \"1h\"\n[[pipeline.schedule]]\nname = \"h\"\nevery = \"1h\"\n{STEP}"), &[(7, "schedule \"h\" is declared twice")]),
        case(
            "first tick refused by the schema",
            format!("{H}{SCHEMA}[[pipeline.schedule]]\nname = \"h\"\ncron = \"0 * * * *\"\ninput = {{ source = 5 }}\n{STEP}"),
            &[(7, "schedule \"h\" can never enqueue")],
        ),
        case(
            "first tick misses a required field",
            format!("{H}input_schema = {{ type = \"object\", required = [\"source\"] }}\n[[pipeline.schedule]]\nname = \"h\"\nevery = \"1h\"\n{STEP}"),
            &[(4, "can never enqueue")],
        ),
        case(
            "first tick's window forbidden",
            format!("{H}input_schema = {{ type = \"object\", properties = {{ source = {{ type = \"string\" }} }}, additionalProperties = false }}\n[[pipeline.schedule]]\nname = \"h\"\nevery = \"1h\"\ninput = {{ source = \"a\" }}\n{STEP}"),
            &[(7, "can never enqueue")],
        ),
        // arguments that take the job
        case(
            "argument names a forbidden field",
            format!("{H}{SCHEMA}[[pipeline.step]]\nname = \"s\"\nrun = [\"echo\", \"--shop={{shop}}\"]\n"),
            &[(6, "run's arguments: it names field `shop`")],
        ),
        case(
            "argument formats a field that is no instant",
            format!("{H}[[pipeline.schedule]]\nname = \"h\"\nevery = \"1h\"\ninput = {{ source = \"a\" }}\n[[pipeline.step]]\nname = \"s\"\nrun = [\"echo\", \"{{source:%H}}\"]\n"),
            &[(9, "cannot fill argument \"{source:%H}\"")],
        ),
        case(
            "argument the first tick lacks",
            format!("{H}[[pipeline.schedule]]\nname = \"h\"\nevery = \"1h\"\n[[pipeline.step]]\nname = \"s\"\nrun = [\"echo\", \"{{region}}\"]\n"),
            &[(8, "no field `region`")],
        ),
        // several mistakes: all of them, in one pass
        case(
            "three mistakes at once",
            step_with("timeout = \"0s\"\ncwd = \"nope\"\nretryable_exit_codes = [300]\n"),
            &[(6, "timeout is 0s"), (7, "does not exist"), (8, "holds 300"), (0, "3 mistakes in all")],
        ),
        case(
            "mistakes in two pipelines",
            format!("{}[[pipeline]]\nname = \"q\"\nlease_ttl = \"0s\"\n{STEP}", step_with("grace = \"-1s\"\n")),
            &[(6, "grace:"), (9, "lease_ttl is"), (0, "2 mistakes in all")],
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_broken_file_is_refused_whole_before_redis_is_touched() {
    // a Redis URL nobody answers: a connection would show up in its backlog
    let redis = TcpListener::bind("127.0.0.1:0").unwrap();
    redis.set_nonblocking(true).unwrap();
    let url = format!("redis://{}", redis.local_addr().unwrap());
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("scripts")).unwrap();
    std::fs::write(dir.path().join("noexec.sh"), "#!/bin/sh\n").unwrap();
    let ok = dir.path().join("ok.sh");
    std::fs::write(&ok, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&ok, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cases = cases();
    assert!(cases.len() >= 50, "{} cases", cases.len());
    let mut failures = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let file = dir.path().join(format!("case{i}.toml"));
        std::fs::write(&file, &c.text).unwrap();
        let path = file.to_str().unwrap();
        let run = run_cmd(command(&url, &["worker", "--pipelines", path, "--check"])).await;
        let mut wrong = Vec::new();
        if run.code != 2 {
            wrong.push(format!("exit {} (expected 2)", run.code));
        }
        if c.name == "too large" && !run.stderr.contains("larger than 1024 KiB") {
            wrong.push("no size limit named".into());
        }
        if run.stderr.contains("TOML parse error") || run.stderr.contains("unknown field") {
            wrong.push("parser-library wording".into());
        }
        for (line, words) in &c.expect {
            let found = run.stderr.lines().any(|l| {
                let at = if *line == 0 {
                    true
                } else {
                    l.contains(&format!("{path}:{line}:"))
                };
                at && l.contains(words)
            });
            if !found {
                wrong.push(format!("no line {line} with {words:?}"));
            }
        }
        if !wrong.is_empty() {
            failures.push(format!("{}: {}\n{}", c.name, wrong.join("; "), run.stderr));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    match redis.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("--check connected to Redis: {other:?}"),
    }
    // a good file passes, still without Redis
    let good = dir.path().join("good.toml");
    std::fs::write(&good, step_with("cwd = \"scripts\"\n")).unwrap();
    let run = run_cmd(command(
        &url,
        &["worker", "--pipelines", good.to_str().unwrap(), "--check"],
    ))
    .await;
    assert_eq!(run.code, 0, "{run:#?}");
    assert!(Path::new(&good).exists());
}
