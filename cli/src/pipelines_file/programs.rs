//! Whether a step's program can be run, resolved as the worker resolves it:
//! a name with a `/` relative to the step's working directory, a bare name on
//! `PATH` (the step's own `PATH` when its `env` sets one).

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Why `path` cannot be executed, if it cannot.
fn not_executable(path: &Path) -> Option<&'static str> {
    match std::fs::metadata(path) {
        Err(_) => Some("does not exist"),
        Ok(m) if m.is_dir() => Some("is a directory"),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => Some(
            "is not executable (chmod +x it, or run it through its interpreter: run = [\"sh\", \"script.sh\"])",
        ),
        Ok(_) => None,
    }
}

/// The program `program` of a step working in `cwd`, with `path_var` the
/// step's own `PATH` if it sets one: its path, or why it cannot be run.
pub(super) fn resolve(
    program: &str,
    cwd: &Path,
    path_var: Option<&OsStr>,
) -> Result<PathBuf, String> {
    if program.contains('/') {
        let path = cwd.join(program);
        return match not_executable(&path) {
            None => Ok(path),
            Some(why) => Err(format!("program {}: {why}", path.display())),
        };
    }
    let searched = path_var
        .map(ToOwned::to_owned)
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    let mut found_unexecutable = None;
    for dir in std::env::split_paths(&searched) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let candidate = cwd.join(dir).join(program);
        match not_executable(&candidate) {
            None => return Ok(candidate),
            Some("does not exist") => {}
            Some(why) => {
                found_unexecutable.get_or_insert_with(|| format!("{}: {why}", candidate.display()));
            }
        }
    }
    Err(match found_unexecutable {
        Some(why) => format!("program {program:?} cannot be run: {why}"),
        None => format!(
            "program {program:?} is not found on PATH ({}); give its path, or set PATH in the step's env",
            searched.to_string_lossy()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_resolve_as_the_worker_runs_them() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("run.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert!(resolve("./run.sh", dir.path(), None)
            .unwrap_err()
            .contains("is not executable"));
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            resolve("./run.sh", dir.path(), None).unwrap(),
            dir.path().join("./run.sh")
        );
        assert!(resolve("sh", dir.path(), None).is_ok());
        assert!(resolve("no-such-program-here", dir.path(), None)
            .unwrap_err()
            .contains("is not found on PATH"));
        // the step's own PATH is the one searched
        assert!(resolve("run.sh", dir.path(), Some(dir.path().as_os_str())).is_ok());
        assert!(resolve("./missing.py", dir.path(), None)
            .unwrap_err()
            .contains("does not exist"));
    }
}
