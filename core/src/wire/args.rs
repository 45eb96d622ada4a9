//! How values are written as script arguments.

use std::time::Duration;

/// A flag as the scripts read it: `"1"` or `"0"`.
pub(crate) fn bool_arg(b: bool) -> &'static str {
    if b {
        "1"
    } else {
        "0"
    }
}

/// A duration in whole milliseconds (saturating).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A lock key lives an hour past its lease: while any worker runs, the sweeper
/// (not the TTL) decides what happens to a dead holder's resource — released
/// with a LEASED job, held with a STALE one. The TTL only guards against leaks
/// when no worker runs at all.
pub(crate) fn lock_ttl(ttl: Duration) -> u64 {
    millis(ttl).saturating_add(3_600_000)
}
