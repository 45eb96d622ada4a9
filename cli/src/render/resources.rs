//! `locks` and `workers`: who holds which resource, and which workers are live.

use std::fmt::Write as _;

use leasehold_core::{LockInfo, Workers};

use crate::table::Table;
use crate::time::{human, stamp};
use crate::wording::{holder_state, lock_ttl};

/// The live jobs claiming a lock's resource: `JOB (STATE), ...` or `-`.
fn claims(lock: &LockInfo) -> String {
    if lock.claims.is_empty() {
        return "-".into();
    }
    lock.claims
        .iter()
        .map(|c| format!("{} ({})", c.job, c.state))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `locks`.
pub(crate) fn locks(rows: &[(String, LockInfo)]) -> String {
    if rows.is_empty() {
        return "no locks held and no live job claims a resource\n".into();
    }
    let mut out = String::new();
    let mut t = Table::new(&[
        "QUEUE",
        "RESOURCE",
        "HOLDER",
        "STATE",
        "TIME LEFT",
        "PARKED",
        "LIVE JOBS ON IT",
    ]);
    for (q, l) in rows {
        t.row(vec![
            q.clone(),
            l.resource.clone(),
            l.holder.as_ref().map_or("-".into(), ToString::to_string),
            l.holder
                .as_ref()
                .map_or("-".into(), |_| holder_state(l).to_owned()),
            lock_ttl(l),
            l.parked.to_string(),
            claims(l),
        ]);
    }
    out.push_str(&t.render(""));
    for (q, l) in rows.iter().filter(|(_, l)| l.claims.len() > 1) {
        let _ = writeln!(
            out,
            "warning: resource {} in queue {q} is claimed by {} live jobs ({}): it may be processed twice; sinks can reject the lower fence",
            l.resource,
            l.claims.len(),
            claims(l)
        );
    }
    out
}

/// `workers`.
pub(crate) fn workers(rows: &[(String, Workers)]) -> String {
    let mut out = String::new();
    let mut t = Table::new(&[
        "QUEUE",
        "WORKER",
        "PID",
        "PIPELINES",
        "BUSY",
        "STARTED",
        "EXPIRES IN",
        "STATUS",
    ]);
    for (q, w) in rows {
        for info in &w.live {
            t.row(vec![
                q.clone(),
                info.id.clone(),
                info.pid.map_or("-".into(), |p| p.to_string()),
                if info.pipelines.is_empty() {
                    "-".into()
                } else {
                    info.pipelines.join(",")
                },
                match (info.active, info.concurrency) {
                    (Some(a), Some(c)) => format!("{a}/{c}"),
                    (Some(a), None) => a.to_string(),
                    _ => "-".into(),
                },
                info.started_at.map_or("-".into(), stamp),
                info.expires_in_ms.map_or("-".into(), human),
                if info.shutting_down {
                    "shutting down".into()
                } else {
                    "live".into()
                },
            ]);
        }
    }
    if t.is_empty() {
        out.push_str("no live workers\n");
    } else {
        out.push_str(&t.render(""));
    }
    for (q, w) in rows.iter().filter(|(_, w)| !w.pruned.is_empty()) {
        let _ = writeln!(
            out,
            "{q}: pruned expired registrations: {}",
            w.pruned.join(", ")
        );
    }
    out
}
