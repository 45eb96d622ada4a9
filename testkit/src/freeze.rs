//! Freezing a test's own child process with SIGSTOP, and knowing it is frozen.
//!
//! `kill(pid, SIGSTOP)` returns before the process stops: the kernel wakes one
//! thread to take the signal, and the others stop only when that thread has
//! run. On a loaded machine the rest of the process may run on for
//! milliseconds (a worker may read a reply and begin a step). [`freeze`] waits
//! until every thread of the process is stopped, as `/proc` shows it.

use std::time::{Duration, Instant};

/// How long [`freeze`] waits for every thread to stop.
const FREEZE_DEADLINE: Duration = Duration::from_secs(30);

/// Sends SIGSTOP to `pid` (a child of this test) and waits until every one of
/// its threads is stopped; panics if it does not stop within 30 s. (On a
/// system without `/proc`, the signal only: nothing shows the threads.)
#[track_caller]
pub fn freeze(pid: u32) {
    send(pid, libc::SIGSTOP);
    if !cfg!(target_os = "linux") {
        return;
    }
    let started = Instant::now();
    while !all_threads_stopped(pid) {
        assert!(
            started.elapsed() < FREEZE_DEADLINE,
            "process {pid} did not stop within {FREEZE_DEADLINE:?} of SIGSTOP"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Sends SIGCONT to `pid` (a child of this test, frozen by [`freeze`]).
#[track_caller]
pub fn thaw(pid: u32) {
    send(pid, libc::SIGCONT);
}

#[track_caller]
fn send(pid: u32, signal: libc::c_int) {
    let target = libc::pid_t::try_from(pid).unwrap_or_else(|_| panic!("pid {pid} out of range"));
    // SAFETY: a plain kill(2) on a process id the caller owns.
    let rc = unsafe { libc::kill(target, signal) };
    assert_eq!(rc, 0, "signal {signal} to process {pid}");
}

/// Whether `/proc/<pid>/task/*/stat` shows every thread stopped (`T`).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut any = false;
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue; // a thread that just exited
        };
        // the state follows the command name, which is in parentheses and may hold any byte
        let state = stat
            .rfind(')')
            .and_then(|end| stat[end + 1..].split_whitespace().next());
        match state {
            Some("T" | "t") => any = true,
            _ => return false,
        }
    }
    any
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::{all_threads_stopped, freeze, thaw};

    #[test]
    fn a_frozen_child_has_every_thread_stopped_and_runs_again_when_thawed() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let pid = child.id();
        assert!(!all_threads_stopped(pid));
        freeze(pid);
        assert!(all_threads_stopped(pid));
        thaw(pid);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while all_threads_stopped(pid) {
            assert!(std::time::Instant::now() < until, "still stopped");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child.kill().expect("kill");
        child.wait().expect("reap");
    }
}
