//! Running the `leasehold` binary: the one command builder every test uses
//! (a clean environment, so no variable of the machine running the tests
//! leaks in) and what one run did.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

/// Path of the `leasehold` binary under test.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_leasehold");

/// Every environment variable the binary reads for its options; the builder
/// removes them all so that only the arguments a test passes count.
const OPTION_VARS: &[&str] = &[
    "LEASEHOLD_REDIS_URL",
    "REDIS_URL",
    "LEASEHOLD_PREFIX",
    "LEASEHOLD_BY",
    "LEASEHOLD_KEEP_COUNT",
    "LEASEHOLD_KEEP_AGE",
    "LEASEHOLD_EVENTS_MAX_LEN",
    "LEASEHOLD_DASHBOARD_TOKEN",
];

/// The variables that turn colour on or off: removed too, so that output is
/// plain (stdout is a pipe) unless a test sets one.
const COLOUR_VARS: &[&str] = &["NO_COLOR", "CLICOLOR", "CLICOLOR_FORCE"];

/// `leasehold --redis-url URL ARGS...` with a clean environment: the option
/// and colour variables removed, `USER=tester`, stdin closed, killed when dropped.
pub(crate) fn command(url: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("--redis-url").arg(url).args(args);
    for var in OPTION_VARS.iter().chain(COLOUR_VARS) {
        cmd.env_remove(var);
    }
    cmd.env("USER", "tester")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// What one run of the binary did.
#[derive(Debug)]
pub(crate) struct Run {
    /// The exit code (-1 if killed by a signal).
    pub code: i32,
    /// Everything written to stdout.
    pub stdout: String,
    /// Everything written to stderr.
    pub stderr: String,
}

impl Run {
    /// Asserts the run exited 0.
    #[track_caller]
    pub(crate) fn ok(self) -> Run {
        assert_eq!(self.code, 0, "expected success: {self:#?}");
        self
    }

    /// Asserts the run exited with `code`.
    #[track_caller]
    pub(crate) fn code(self, code: i32) -> Run {
        assert_eq!(self.code, code, "expected exit {code}: {self:#?}");
        self
    }

    /// stdout parsed as JSON.
    #[track_caller]
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:#?}"))
    }

    /// Asserts that stdout contains every one of `parts`.
    #[track_caller]
    pub(crate) fn shows(self, parts: &[&str]) -> Run {
        for part in parts {
            assert!(
                self.stdout.contains(part),
                "stdout lacks {part:?}:\n{}\n(stderr: {})",
                self.stdout,
                self.stderr
            );
        }
        self
    }
}

/// Runs `cmd` to its end (within 60 s) and collects its exit code and output.
pub(crate) async fn run_cmd(mut cmd: Command) -> Run {
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("the binary finished within 60 s")
        .expect("the binary runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
