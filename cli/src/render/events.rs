//! `events`: the event stream as a table, or one line per event for `--follow`.

use std::fmt::Write as _;

use leasehold_core::Event;

use crate::table::Table;
use crate::time::stamp;

/// The events as a table (`events`, and the events of `show`).
pub(super) fn events_table(events: &[Event]) -> Table {
    let mut t = Table::new(&[
        "TIME", "QUEUE", "JOB", "ATTEMPT", "OP", "MOVE", "BY", "REASON",
    ]);
    for e in events {
        t.row(vec![
            stamp(e.at),
            e.queue.clone(),
            e.job.to_string(),
            e.attempt.to_string(),
            e.op.clone(),
            format!(
                "{}->{}",
                e.from.map_or(String::new(), |s| s.to_string()),
                e.to
            ),
            e.by.clone(),
            e.reason.clone(),
        ]);
    }
    t
}

/// `events`.
pub(crate) fn events(events: &[Event]) -> String {
    events_table(events).render("")
}

/// One event on one line, for `events --follow` (control characters made visible).
pub(crate) fn event_line(e: &Event) -> String {
    let mv = format!(
        "{}->{}",
        e.from.map_or(String::new(), |s| s.to_string()),
        e.to
    );
    let mut line = format!(
        "{}  {}  {}  #{}  {:<8} {:<20}",
        stamp(e.at),
        e.queue,
        e.job,
        e.attempt,
        e.op,
        mv
    );
    if !e.by.is_empty() {
        let _ = write!(line, "  by {}", e.by);
    }
    if !e.reason.is_empty() {
        let _ = write!(line, "  {}", e.reason.replace('\n', " "));
    }
    leasehold_core::visible_line(line.trim_end()).into_owned()
}
