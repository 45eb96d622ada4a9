//! The child of a process step, from spawn to reaping: its own process group,
//! a parent-death signal on Linux, signals sent to the whole group, and the
//! group killed when the supervisor is dropped (nothing is left behind).

use std::io;
use std::process::{ExitStatus, Stdio};

use tokio::process::{Child, ChildStderr, ChildStdout, Command};

/// A running child in a process group of its own (its id is the child's pid).
#[derive(Debug)]
pub(crate) struct Supervised {
    /// The child (the group's leader).
    child: Child,
    /// The process group: the child's pid.
    pgid: libc::pid_t,
    /// Set once the child was reaped.
    reaped: bool,
}

/// The parent-death signal, set in the child between fork and exec: SIGKILL
/// when the thread that spawned it (a runtime thread of the worker) dies, so a
/// `kill -9` of the worker takes its children with it. A worker that died
/// before the signal was set is caught by comparing the parent's pid.
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
        // the worker died between the fork and the prctl: do not run at all
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
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
                command.pre_exec(move || set_parent_death_signal(parent));
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
