//! Where the `redis-server` binary the kit runs comes from:
//! `LEASEHOLD_REDIS_SERVER`, else `PATH`, else the usual system directories.

use std::path::{Path, PathBuf};

/// Name of the environment variable that overrides the `redis-server` binary.
const BINARY_ENV: &str = "LEASEHOLD_REDIS_SERVER";

/// The `redis-server` binary the kit runs: the `LEASEHOLD_REDIS_SERVER`
/// environment variable if set (and non-empty), else the first executable
/// `redis-server` on `PATH`, else one in `/usr/bin`, `/usr/sbin`,
/// `/usr/local/bin`.
///
/// # Panics
///
/// If none is found, saying how to install it; or if the variable names a
/// file that does not exist.
pub fn redis_server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os(BINARY_ENV).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        if !is_executable(&path) {
            panic!("{BINARY_ENV}={} is not an executable file", path.display());
        }
        return path;
    }
    let path_dirs = std::env::var_os("PATH").unwrap_or_default();
    let fallback = ["/usr/bin", "/usr/sbin", "/usr/local/bin"].map(PathBuf::from);
    std::env::split_paths(&path_dirs)
        .chain(fallback)
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| is_executable(candidate))
        .unwrap_or_else(|| {
            panic!(
                "redis-server not found on PATH: install it with `apt-get install redis-server` \
                 (or point {BINARY_ENV} at a redis-server binary)"
            )
        })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}
