//! The child of a process step, from spawn to reaping: the program in a
//! process group of its own, a parent-death signal on Linux, signals sent to
//! the whole group, and the group killed when the supervisor is dropped
//! (nothing is left behind).
//!
//! On Linux the program does not run as the worker's direct child: between
//! fork and exec the child forks once more and stays behind as a
//! monitor (async-signal-safe calls only: `waitpid`, `getppid`, `poll`,
//! `read`, `write`, `kill`, `clock_gettime`, `_exit`) while its own child
//! moves to a process group of its own (its pid is the group's id) and execs
//! the program. The monitor stays outside that group, so the signals aimed at
//! the program (the worker's, an operator's `kill <pid>` or
//! `kill -- -<pid>`) never reach it; it passes the program's exit code or
//! death signal on as its own. It is linked to the worker by a socket pair:
//! it reports the program's pid on it, and the worker sends it the lease's
//! local deadline after each confirmed renewal. On its own, with no help from
//! the worker (a worker frozen by SIGSTOP, or starved), it sends the group
//! SIGTERM at that deadline and SIGKILL after the kill grace, which is capped
//! before Redis's deadline for the lease. Should the worker die (`kill -9`:
//! its end of the link closes, the monitor's parent changes), it kills the
//! whole group at once — the scripts a step's program started as well, which
//! a parent-death signal alone would leave running. A process that calls
//! `setsid` (or `setpgid`) leaves the group, and with it every one of these
//! guarantees.
//!
//! The monitor never execs: it keeps the worker's memory copy-on-write for
//! the whole step, and with it the old copy of every page the worker writes
//! meanwhile (up to the worker's written heap per running step:
//! `benches/monitor_memory.rs`, docs/operations.md, "What it costs").

// the link and its frames exist on Linux only (elsewhere there is no monitor)
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]
// the one module of the crate with `unsafe` (fork, signals, the monitor's
// system calls): the crate denies it everywhere else
#![allow(unsafe_code)]

use std::io;
#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::process::{Child, ChildStderr, ChildStdout, Command};

use crate::record::Millis;

/// A running program in a process group of its own, and (on Linux) its monitor.
#[derive(Debug)]
pub(crate) struct Supervised {
    /// The worker's child: on Linux the program's monitor, elsewhere the program.
    child: Child,
    /// The program's process group: its pid.
    pgid: libc::pid_t,
    /// Set once the child was reaped.
    reaped: bool,
}

/// When the monitor cuts the program off on its own: the lease's local
/// deadline, and the kill grace after it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    /// SIGTERM to the group then, unless the worker sent a later deadline.
    pub(crate) term_at: Instant,
    /// SIGKILL this long after `term_at`.
    pub(crate) kill_after: Duration,
}

/// What the monitor did on its own, reported after the fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MonitorCut {
    /// When it sent SIGTERM (the monitor's wall clock, ms since the epoch).
    pub(crate) at: Millis,
    /// Whether it sent SIGKILL after the grace.
    pub(crate) killed: bool,
}

/// The worker's end of the link to the monitor (see the module docs).
#[derive(Debug)]
pub(crate) struct Link {
    stream: tokio::net::UnixStream,
}

/// A frame on the link: 8 bytes of tag, 8 bytes of value, little-endian.
const FRAME: usize = 16;
/// Monitor → worker: the program's pid.
const TAG_PID: u64 = 1;
/// Monitor → worker: SIGTERM sent at the deadline (value: wall-clock ms).
const TAG_TERM: u64 = 2;
/// Monitor → worker: SIGKILL sent after the grace (value: wall-clock ms).
const TAG_KILL: u64 = 3;
/// Worker → monitor: the new SIGTERM instant (value: `CLOCK_MONOTONIC` ns).
const TAG_DEADLINE: u64 = 4;

/// How long the spawn waits for the monitor to report the program's pid.
const PID_WAIT: Duration = Duration::from_secs(10);

/// Nanoseconds on `clock`.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given; it is
    // async-signal-safe (the monitor calls it too).
    unsafe {
        libc::clock_gettime(clock, &mut ts);
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// `at` on `CLOCK_MONOTONIC` (the clock `Instant` reads on Linux), in ns; never 0.
fn monotonic_ns(at: Instant) -> u64 {
    let now_ns = clock_ns(libc::CLOCK_MONOTONIC);
    let now = Instant::now();
    let ns = if at >= now {
        now_ns.saturating_add(u64::try_from((at - now).as_nanos()).unwrap_or(u64::MAX))
    } else {
        now_ns.saturating_sub(u64::try_from((now - at).as_nanos()).unwrap_or(u64::MAX))
    };
    ns.max(1)
}

/// A frame's bytes.
fn frame(tag: u64, value: u64) -> [u8; FRAME] {
    let mut bytes = [0u8; FRAME];
    bytes[..8].copy_from_slice(&tag.to_le_bytes());
    bytes[8..].copy_from_slice(&value.to_le_bytes());
    bytes
}

/// A frame's tag and value.
fn unframe(bytes: &[u8; FRAME]) -> (u64, u64) {
    let mut tag = [0u8; 8];
    let mut value = [0u8; 8];
    tag.copy_from_slice(&bytes[..8]);
    value.copy_from_slice(&bytes[8..]);
    (u64::from_le_bytes(tag), u64::from_le_bytes(value))
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

/// How often at most the monitor sleeps between looks at its program and its parent.
#[cfg(target_os = "linux")]
const MONITOR_POLL_MS: u64 = 20;

/// Writes one frame on the monitor's end of the link (fd 0), async-signal-safe.
///
/// # Safety
///
/// Runs in the monitor: write(2) only.
#[cfg(target_os = "linux")]
unsafe fn monitor_send(tag: u64, value: u64) {
    let bytes = frame(tag, value);
    // SAFETY: write(2) from a live buffer; a short write is not retried (the
    // worker reads whole frames and ignores a torn one).
    unsafe {
        libc::write(0, bytes.as_ptr().cast(), FRAME);
    }
}

/// Runs in the child between fork and exec (its process group already set):
/// forks the program's process, which moves to a group of its own and
/// returns here to exec, while this process becomes its monitor and never
/// returns (see the module docs). `link` is the monitor's end of the socket
/// pair; `watch` the first SIGTERM instant (`CLOCK_MONOTONIC` ns) and the
/// kill grace (ns), if the step runs under a lease.
///
/// # Safety
///
/// Only async-signal-safe calls: this runs in the forked child of a
/// multi-threaded process.
#[cfg(target_os = "linux")]
unsafe fn fork_monitor(
    worker: libc::pid_t,
    link: libc::c_int,
    watch: Option<(u64, u64)>,
) -> io::Result<()> {
    // no parent-death signal for the monitor: it watches its parent instead
    // (below), and a signal would kill it before it could kill the group
    // the monitor's pid, taken before the fork: the program compares its
    // parent with it, so a monitor that died first is caught (after the
    // fork, getppid would name whoever adopted the program instead)
    // SAFETY: getpid is async-signal-safe.
    let monitor = unsafe { libc::getpid() };
    // SAFETY: fork in a child between fork and exec, async-signal-safe.
    let program = unsafe { libc::fork() };
    if program == -1 {
        return Err(io::Error::last_os_error());
    }
    if program == 0 {
        // the program's process: a group of its own (the monitor stays out of
        // the way of the signals aimed at it), dies with its monitor, then
        // goes on to exec (the link is close-on-exec)
        // SAFETY: setpgid is async-signal-safe.
        if unsafe { libc::setpgid(0, 0) } == -1 {
            return Err(io::Error::last_os_error());
        }
        return set_parent_death_signal(monitor);
    }
    // the monitor
    // SAFETY: signal, setpgid, dup2, close, syscall(close_range), getrlimit,
    // waitpid, getppid, poll, read, write, kill, clock_gettime and _exit are
    // async-signal-safe; nothing allocates.
    unsafe {
        // a signal meant for the program that reached the monitor anyway
        // (its own old group, a terminal) leaves it in place
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_IGN);
        }
        // the same group whoever of the two runs first: the worker signals
        // it as soon as it learns the pid
        libc::setpgid(program, program);
        // keep only the link, as fd 0; hold no copy of the worker's other
        // descriptors: not the program's output (the worker reads it to its
        // end), and above all not the pipe on which the spawn waits to learn
        // that the exec succeeded (it would wait for this process, which
        // never execs)
        if link != 0 {
            libc::dup2(link, 0);
        }
        libc::close(1);
        libc::close(2);
        if libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            0 as libc::c_uint,
        ) != 0
        {
            // kernels before 5.9: one by one, up to the descriptor limit
            // (capped: an unlimited RLIMIT_NOFILE would take minutes)
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            let top = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                limit.rlim_cur.min(1 << 20) as libc::c_int
            } else {
                65_536
            };
            for fd in 3..top {
                libc::close(fd);
            }
        }
        monitor_send(TAG_PID, program as u64);
        let group = program;
        let (mut term_at, kill_after) = watch.unwrap_or((0, 0));
        let (mut termed, mut killed, mut linked) = (false, false, true);
        let mut buf = [0u8; FRAME];
        let mut have = 0usize;
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
            let now = clock_ns(libc::CLOCK_MONOTONIC);
            if term_at != 0 && !termed && now >= term_at {
                // the lease's local deadline passed with no renewal from the
                // worker (frozen, starved, cut off): the worker's own cut-off,
                // without the worker
                libc::kill(-group, libc::SIGTERM);
                termed = true;
                monitor_send(TAG_TERM, clock_ns(libc::CLOCK_REALTIME) / 1_000_000);
            }
            let kill_at = term_at.saturating_add(kill_after);
            if termed && !killed && now >= kill_at {
                libc::kill(-group, libc::SIGKILL);
                killed = true;
                monitor_send(TAG_KILL, clock_ns(libc::CLOCK_REALTIME) / 1_000_000);
            }
            let next = match (termed, killed) {
                (false, _) if term_at != 0 => Some(term_at),
                (true, false) => Some(kill_at),
                _ => None,
            };
            let mut wait_ms = MONITOR_POLL_MS;
            if let Some(next) = next {
                wait_ms = wait_ms.min(next.saturating_sub(now).div_ceil(1_000_000));
            }
            let mut pfd = libc::pollfd {
                fd: if linked { 0 } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            };
            libc::poll(&mut pfd, 1, wait_ms as libc::c_int);
            if linked && pfd.revents != 0 {
                let n = libc::read(0, buf[have..].as_mut_ptr().cast(), FRAME - have);
                if n > 0 {
                    have += n as usize;
                    if have == FRAME {
                        have = 0;
                        let (tag, value) = unframe(&buf);
                        if tag == TAG_DEADLINE && !termed {
                            term_at = value;
                        }
                    }
                } else if n == 0
                    || (*libc::__errno_location() != libc::EINTR
                        && *libc::__errno_location() != libc::EAGAIN)
                {
                    // the worker closed its end (it died, or dropped the step
                    // mid-run): nothing may outlive it
                    linked = false;
                    libc::kill(-group, libc::SIGKILL);
                }
            }
        }
        // whatever the program left in its group goes with it, even while the
        // worker cannot see to it (the worker does the same once it reaps this)
        libc::kill(-group, libc::SIGKILL);
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
    /// stdout and stderr piped (returned for the log readers). On Linux it
    /// runs under a monitor that keeps `deadline` on its own; the link to it
    /// is returned.
    pub(crate) async fn spawn(
        mut command: Command,
        deadline: Option<Deadline>,
    ) -> io::Result<(Supervised, Option<Link>, ChildStdout, ChildStderr)> {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            // the group is killed by `Drop` below, not just the leader
            .kill_on_drop(false);
        #[cfg(target_os = "linux")]
        {
            let (mine, theirs) = std::os::unix::net::UnixStream::pair()?;
            // below 3 the child's stdio would overwrite it (a worker started
            // with its standard descriptors closed): a copy above them
            let theirs = if theirs.as_raw_fd() < 3 {
                theirs.try_clone()?
            } else {
                theirs
            };
            let link_fd = theirs.as_raw_fd();
            let watch = deadline.map(|d| {
                (
                    monotonic_ns(d.term_at),
                    u64::try_from(d.kill_after.as_nanos()).unwrap_or(u64::MAX),
                )
            });
            let parent = std::process::id() as libc::pid_t;
            // SAFETY: the closure only makes async-signal-safe calls (above).
            unsafe {
                command.pre_exec(move || fork_monitor(parent, link_fd, watch));
            }
            let mut child = command.spawn()?;
            drop(theirs);
            mine.set_nonblocking(true)?;
            let link = Link {
                stream: tokio::net::UnixStream::from_std(mine)?,
            };
            let pid = match tokio::time::timeout(PID_WAIT, link.read_frame()).await {
                Ok(Ok((TAG_PID, pid))) => libc::pid_t::try_from(pid).map_err(io::Error::other)?,
                Ok(Ok(_)) => return Err(io::Error::other("the monitor sent no pid first")),
                Ok(Err(e)) => {
                    let _ = child.start_kill();
                    return Err(e);
                }
                Err(_) => {
                    let _ = child.start_kill();
                    return Err(io::Error::other(
                        "the monitor did not report the program's pid",
                    ));
                }
            };
            let (stdout, stderr) = Self::pipes(&mut child)?;
            Ok((
                Supervised {
                    child,
                    pgid: pid,
                    reaped: false,
                },
                Some(link),
                stdout,
                stderr,
            ))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = deadline;
            let mut child = command.spawn()?;
            let pid = child
                .id()
                .ok_or_else(|| io::Error::other("the child exited at once"))?;
            let pgid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
            let (stdout, stderr) = Self::pipes(&mut child)?;
            Ok((
                Supervised {
                    child,
                    pgid,
                    reaped: false,
                },
                None,
                stdout,
                stderr,
            ))
        }
    }

    /// The child's output pipes.
    fn pipes(child: &mut Child) -> io::Result<(ChildStdout, ChildStderr)> {
        match (child.stdout.take(), child.stderr.take()) {
            (Some(stdout), Some(stderr)) => Ok((stdout, stderr)),
            _ => Err(io::Error::other("the child's output pipes are missing")),
        }
    }

    /// The program's pid, which is also its process group's id.
    pub(crate) fn pid(&self) -> u32 {
        self.pgid as u32
    }

    /// Sends `signal` to the program's whole process group. After the program
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

/// Sends `signal` to process group `pgid` (a group the caller started);
/// a group that is gone is not an error.
pub(crate) fn signal_process_group(pgid: u32, signal: libc::c_int) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return;
    };
    if pgid <= 1 {
        return;
    }
    // SAFETY: kill(2) with a negative pid signals a process group.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

impl Link {
    /// Reads one frame (the monitor's first: the program's pid).
    async fn read_frame(&self) -> io::Result<(u64, u64)> {
        let mut buf = [0u8; FRAME];
        let mut have = 0;
        while have < FRAME {
            self.stream.readable().await?;
            match self.stream.try_read(&mut buf[have..]) {
                Ok(0) => {
                    return Err(io::Error::other(
                        "the monitor ended before its first report",
                    ))
                }
                Ok(n) => have += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(unframe(&buf))
    }

    /// Tells the monitor the lease's new local deadline (SIGTERM then).
    pub(crate) fn send_deadline(&self, term_at: Instant) -> io::Result<()> {
        let bytes = frame(TAG_DEADLINE, monotonic_ns(term_at));
        // 16 bytes into a socket buffer the monitor keeps empty: all or nothing
        match self.stream.try_write(&bytes)? {
            FRAME => Ok(()),
            _ => Err(io::Error::other("a deadline frame was cut short")),
        }
    }

    /// What the monitor did on its own, read once it has exited (its frames
    /// are all in the socket by then).
    pub(crate) fn cut(&self) -> Option<MonitorCut> {
        let mut buf = [0u8; FRAME * 4];
        let mut have = 0;
        while have < buf.len() {
            match self.stream.try_read(&mut buf[have..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => have += n,
            }
        }
        let mut cut: Option<MonitorCut> = None;
        for chunk in buf[..have - have % FRAME].chunks_exact(FRAME) {
            let mut one = [0u8; FRAME];
            one.copy_from_slice(chunk);
            match unframe(&one) {
                (TAG_TERM, at) => {
                    cut = Some(MonitorCut {
                        at: Millis::try_from(at).unwrap_or(Millis::MAX),
                        killed: false,
                    })
                }
                (TAG_KILL, _) => {
                    if let Some(c) = cut.as_mut() {
                        c.killed = true;
                    }
                }
                _ => {}
            }
        }
        cut
    }
}

impl Drop for Supervised {
    /// Kills the group: whatever the step left running (the program when the
    /// step was dropped mid-run, children it started) does not outlive it.
    fn drop(&mut self) {
        self.signal_group(libc::SIGKILL);
        if !self.reaped {
            // on Linux the monitor dies with its program (or at once, its link
            // closed); reap it now if it is gone already, tokio reaps it later otherwise
            let _ = self.child.try_wait();
        }
    }
}
