//! Reading a server's log file: its length and its last lines, as quoted in
//! panic messages.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Lines of the server log quoted in panic messages.
const LOG_TAIL_LINES: usize = 40;

/// The log's current length in bytes (0 if it does not exist yet).
pub(crate) fn log_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// The last lines of the whole log.
pub(crate) fn log_tail(path: &Path) -> String {
    log_tail_from(path, 0)
}

/// The last lines of the log written since byte `from`.
pub(crate) fn log_tail_from(path: &Path, from: u64) -> String {
    let mut text = String::new();
    let read = File::open(path).and_then(|mut f| {
        f.seek(SeekFrom::Start(from))?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)?;
        text = String::from_utf8_lossy(&bytes).into_owned();
        Ok(())
    });
    if let Err(e) = read {
        return format!("(cannot read {}: {e})", path.display());
    }
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return format!("({} is empty)", path.display());
    }
    let start = lines.len().saturating_sub(LOG_TAIL_LINES);
    lines[start..].join("\n")
}
