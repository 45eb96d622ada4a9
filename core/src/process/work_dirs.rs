//! The work directories of process steps: `$TMPDIR/leasehold-step-*` (the
//! worker's `std::env::temp_dir()`), one per step run, holding the job's
//! input, the previous step's output and the step's output. The running
//! worker holds an exclusive lock (`flock`) on the `owner.lock` file inside
//! for as long as the step runs, and removes the directory when the step
//! ends; a worker killed with `kill -9` leaves it behind, and the next worker
//! started on the machine removes it (the kernel released the lock with its
//! dead owner).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tracing::{info, warn};

/// The prefix of a work directory's name.
const PREFIX: &str = "leasehold-step-";
/// The lock file its owner holds.
const LOCK: &str = "owner.lock";
/// A directory younger than this is left alone (its owner may be between
/// creating it and locking it).
const YOUNG: Duration = Duration::from_secs(60);
/// A directory with no lock file (made before the lock was kept) is removed
/// only when it has not changed for this long.
const OLD_UNLOCKED: Duration = Duration::from_secs(3600);

/// Takes the exclusive lock of `file` without waiting; fails when another
/// open file (a live worker's) holds it.
fn try_lock(file: &File) -> io::Result<()> {
    rustix::fs::flock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        .map_err(io::Error::from)
}

/// A step's work directory, removed when dropped, locked while held.
#[derive(Debug)]
pub(crate) struct WorkDir {
    /// The directory (removed on drop).
    dir: tempfile::TempDir,
    /// The locked `owner.lock` (released on drop, or by the kernel when the
    /// worker dies).
    _lock: File,
}

impl WorkDir {
    /// Makes and locks a new work directory under the temporary directory.
    pub(crate) fn create() -> io::Result<WorkDir> {
        let dir = tempfile::Builder::new().prefix(PREFIX).tempdir()?;
        let lock = File::create(dir.path().join(LOCK))?;
        try_lock(&lock)?;
        Ok(WorkDir { dir, _lock: lock })
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Whether work directory `dir` belongs to no live worker.
fn orphaned(dir: &Path) -> bool {
    let age = |p: &Path| {
        std::fs::metadata(p)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .unwrap_or_default()
    };
    if age(dir) < YOUNG {
        return false;
    }
    match File::options().write(true).open(dir.join(LOCK)) {
        // the lock is free: its owner is gone
        Ok(lock) => try_lock(&lock).is_ok(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => age(dir) >= OLD_UNLOCKED,
        Err(_) => false,
    }
}

/// Removes the work directories under `root` that no live worker owns;
/// returns how many were removed.
pub(crate) fn remove_orphans(root: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    let dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(PREFIX))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    let mut removed = 0;
    for dir in dirs {
        if !orphaned(&dir) {
            continue;
        }
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => removed += 1,
            Err(e) => {
                warn!(dir = %dir.display(), error = %e, "cannot remove a dead worker's step work directory")
            }
        }
    }
    if removed > 0 {
        info!(removed, root = %root.display(), "removed step work directories left by dead workers");
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ages `dir` by setting its modification time back by `by`.
    fn age(dir: &Path, by: Duration) {
        let when = std::time::SystemTime::now() - by;
        File::open(dir).unwrap().set_modified(when).unwrap();
    }

    #[test]
    fn only_unlocked_old_work_directories_are_removed() {
        let root = tempfile::tempdir().unwrap();
        let make = |name: &str, lock: bool| {
            let dir = root.path().join(format!("{PREFIX}{name}"));
            std::fs::create_dir(&dir).unwrap();
            if lock {
                File::create(dir.join(LOCK)).unwrap();
            }
            dir
        };
        // a dead owner's: unlocked, old
        let dead = make("dead", true);
        // a live owner's: locked, old
        let live = make("live", true);
        let held = File::options().write(true).open(live.join(LOCK)).unwrap();
        try_lock(&held).unwrap();
        // just made: unlocked, young
        let young = make("young", true);
        // no lock file, recent enough to belong to an older worker still running
        let unlocked = make("unlocked", false);
        // not a work directory
        let other = root.path().join("other-dir");
        std::fs::create_dir(&other).unwrap();
        for dir in [&dead, &live, &unlocked, &other] {
            age(dir, Duration::from_secs(120));
        }
        assert_eq!(remove_orphans(root.path()), 1);
        assert!(!dead.exists());
        assert!(live.exists() && young.exists() && unlocked.exists() && other.exists());
        drop(held);
        age(&live, Duration::from_secs(120));
        assert_eq!(remove_orphans(root.path()), 1);
        assert!(!live.exists());
    }
}
