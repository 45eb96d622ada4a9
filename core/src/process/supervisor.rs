//! The child of a process step, from spawn to reaping: its own process group,
//! a parent-death signal on Linux, signals sent to the whole group, and the
//! group killed when the supervisor is dropped (nothing is left behind).
//!
//! On Linux the program does not run as the worker's direct child: between
//! fork and exec the child forks once more and stays behind as a small
//! monitor (async-signal-safe calls only: `waitpid`, `getppid`, `poll`,
//! `kill`, `_exit`) while its own child execs the program, in the same
//! process group. The monitor ignores the termination signals the worker
//! sends the group (the program gets them and its grace), passes the
//! program's exit code or death signal on as its own, and, should the worker
//! die (`kill -9`: the monitor's parent changes), kills the whole group —
//! the scripts a step's program started as well, which a parent-death signal
//! alone would leave running.

use std::io;
use std::process::{ExitStatus, Stdio};

use tokio::process::{Child, ChildStderr, ChildStdout, Command};

/// A running child in a process group of its own (its id is the child's pid).
#[derive(Debug)]
pub(crate) struct Supervised {
    /// The child (the group's leader: on Linux the monitor of the program).
    child: Child,
    /// The process group: the child's pid.
    pgid: libc::pid_t,
    /// Set once the child was reaped.
    reaped: bool,
}

/// The parent-death signal, set in the child between fork and exec: SIGKILL
/// when the thread that forked it dies. A parent that died before the
/// signal was set is caught by comparing the parent's pid.
#[cfg(target_os = "linux")]
fn set_parent_death_signal(parent: libc::pid_t) -> io::Result<()> {
    // SAFETY: prctl and getppid are async-signal-safe system calls; nothing
    // here allocates (the child of a multi-threaded parent must not).
    let set = unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if set == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::getppid() } != parent {
        // the parent died between the fork and the prctl: do not run at all
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

/// How often the monitor looks at its program and its parent.
#[cfg(target_os = "linux")]
const MONITOR_POLL_MS: libc::c_int = 20;

/// Runs in the child between fork and exec (its process group already set):
/// forks the program's process, which returns here to exec, while this
/// process becomes its monitor and never returns (see the module docs).
///
/// # Safety
///
/// Only async-signal-safe calls: this runs in the forked child of a
/// multi-threaded process.
#[cfg(target_os = "linux")]
unsafe fn fork_monitor(worker: libc::pid_t) -> io::Result<()> {
    // no parent-death signal for the monitor: it polls its parent instead
    // (below), and a signal would kill it before it could kill the group
    // SAFETY: fork in a child between fork and exec, async-signal-safe.
    let program = unsafe { libc::fork() };
    if program == -1 {
        return Err(io::Error::last_os_error());
    }
    if program == 0 {
        // the program's process: dies with its monitor, then goes on to exec
        // SAFETY: getpid is async-signal-safe.
        let monitor = unsafe { libc::getppid() };
        return set_parent_death_signal(monitor);
    }
    // the monitor: the group's signals are for the program (it has its grace)
    // SAFETY: signal, close, waitpid, getppid, poll, kill and _exit are
    // async-signal-safe; nothing allocates.
    unsafe {
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_IGN);
        }
        // hold no copy of the worker's descriptors: not the program's output
        // (the worker reads it to its end), and above all not the pipe on
        // which the spawn waits to learn that the exec succeeded (it would
        // wait for this process, which never execs)
        libc::close(0);
        libc::close(1);
        libc::close(2);
        if libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            0 as libc::c_uint,
        ) != 0
        {
            // kernels before 5.9: one by one
            for fd in 3..65_536 {
                libc::close(fd);
            }
        }
        let group = libc::getpgrp();
        let mut status: libc::c_int = 0;
        loop {
            let reaped = libc::waitpid(program, &mut status, libc::WNOHANG);
            if reaped == program {
                break;
            }
            if reaped == -1 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(127);
            }
            if libc::getppid() != worker {
                // the worker died: nothing may outlive its lease
                libc::kill(-group, libc::SIGKILL);
            }
            libc::poll(std::ptr::null_mut(), 0, MONITOR_POLL_MS);
        }
        if libc::WIFSIGNALED(status) {
            // die the way the program died, so the worker reads the same signal
            let sig = libc::WTERMSIG(status);
            libc::signal(sig, libc::SIG_DFL);
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
        libc::_exit(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            127
        });
    }
}

impl Supervised {
    /// Spawns `command` in a process group of its own, stdin from /dev/null,
    /// stdout and stderr piped (returned for the log readers).
    pub(crate) fn spawn(
        mut command: Command,
    ) -> io::Result<(Supervised, ChildStdout, ChildStderr)> {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            // the group is killed by `Drop` below, not just the leader
            .kill_on_drop(false);
        #[cfg(target_os = "linux")]
        {
            let parent = std::process::id() as libc::pid_t;
            // SAFETY: the closure only makes async-signal-safe calls (above).
            unsafe {
                command.pre_exec(move || fork_monitor(parent));
            }
        }
        let mut child = command.spawn()?;
        let pid = child
            .id()
            .ok_or_else(|| io::Error::other("the child exited at once"))?;
        let pgid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(io::Error::other("the child's output pipes are missing"));
        };
        Ok((
            Supervised {
                child,
                pgid,
                reaped: false,
            },
            stdout,
            stderr,
        ))
    }

    /// The child's pid (and its process group's id).
    pub(crate) fn pid(&self) -> u32 {
        self.pgid as u32
    }

    /// Sends `signal` to the child's whole process group. After the leader
    /// was reaped its id stays reserved while any member of its group lives,
    /// so the signal reaches only what is left of that group (or nothing).
    pub(crate) fn signal_group(&self, signal: libc::c_int) {
        // SAFETY: kill(2) with a negative pid signals a process group.
        unsafe {
            libc::kill(-self.pgid, signal);
        }
    }

    /// Waits for the child to exit and reaps it.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.child.wait().await?;
        self.reaped = true;
        Ok(status)
    }
}

impl Drop for Supervised {
    /// Kills the group: whatever the step left running (the leader when the
    /// step was dropped mid-run, children it started) does not outlive it.
    fn drop(&mut self) {
        self.signal_group(libc::SIGKILL);
        if !self.reaped {
            // reap the leader now if it is gone already; tokio reaps it later otherwise
            let _ = self.child.try_wait();
        }
    }
}
