//! The kit's long-lived spawner thread: every `redis-server` is forked from
//! it, with `PR_SET_PDEATHSIG = SIGKILL` on Linux, so that a server dies with
//! the test process but not with whichever thread asked for it.

use std::io;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

/// A spawn request: the command and where to send the spawned child.
type SpawnJob = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `command` from the kit's long-lived spawner thread, with
/// `PR_SET_PDEATHSIG = SIGKILL` on Linux. The thread never exits before the
/// process does, so the death signal fires only when the test process dies.
pub(crate) fn spawn_from_kit_thread(mut command: Command) -> io::Result<Child> {
    set_parent_death_signal(&mut command);
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        let spawned = std::thread::Builder::new()
            .name("leasehold-testkit-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
            });
        if let Err(e) = spawned {
            panic!("cannot start the testkit's spawner thread: {e}");
        }
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    {
        let sender = sender
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if sender.send((command, reply_tx)).is_err() {
            panic!("the testkit's spawner thread is gone");
        }
    }
    match reply_rx.recv() {
        Ok(result) => result,
        Err(_) => panic!("the testkit's spawner thread dropped a spawn request"),
    }
}

#[cfg(target_os = "linux")]
fn set_parent_death_signal(command: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the hook only calls async-signal-safe functions (prctl, getppid).
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() != parent {
                return Err(io::Error::other(
                    "test process exited while spawning redis-server",
                ));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn set_parent_death_signal(_command: &mut Command) {}
