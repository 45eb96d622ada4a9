//! The quarantine: jobs set aside as unreadable (`quarantine list`, `jobs
//! --state quarantined`), the raw key of a job whose record cannot be read
//! (`show`), and the keys a listing could not read.

use std::fmt::Write as _;

use leasehold_core::{QuarantineEntry, RawJob, Unreadable};

use crate::table::Table;
use crate::time::stamp;

/// A table of quarantined jobs, each with its queue.
pub(crate) fn quarantine(rows: &[(String, QuarantineEntry)]) -> String {
    if rows.is_empty() {
        return "no quarantined jobs\n".to_owned();
    }
    let mut t = Table::new(&["ID", "QUEUE", "FIELD", "PROBLEM", "FOUND IN", "SINCE"]);
    for (queue, e) in rows {
        t.row(vec![
            e.id.clone(),
            queue.clone(),
            e.field.clone(),
            e.reason.clone(),
            e.from_index.clone(),
            stamp(e.at),
        ]);
    }
    let mut out = t.render("");
    let _ = writeln!(
        out,
        "{} quarantined; inspect with `leasehold show ID`, fix the field, then `leasehold quarantine repair ID` (or `purge ID`)",
        rows.len()
    );
    out
}

/// Lines naming what a listing could not read, indented by `indent` (control
/// characters made visible: a key's name is anyone's).
pub(crate) fn unreadable(items: &[Unreadable], indent: &str) -> String {
    let mut out = String::new();
    for u in items {
        let _ = writeln!(
            out,
            "{indent}{} field {}: {}",
            u.key,
            if u.field.is_empty() { "-" } else { &u.field },
            u.problem
        );
    }
    leasehold_core::visible(&out).into_owned()
}

/// The quarantine section of `show` (control characters made visible).
pub(crate) fn quarantine_section(e: &QuarantineEntry) -> String {
    let text = format!(
        "quarantined since {}: field {} {} (found in {}); fix it, then `leasehold quarantine repair {}` requeues it, or `leasehold quarantine purge {}` deletes it\n",
        stamp(e.at),
        e.field,
        e.reason,
        e.from_index,
        e.id,
        e.id
    );
    leasehold_core::visible(&text).into_owned()
}

/// `show` of a job whose record cannot be read: why, and its key as Redis holds it.
pub(crate) fn raw_job(raw: &RawJob, problem: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "job key {} ({})", raw.key, raw.key_type);
    if let Some(e) = &raw.quarantine {
        out.push_str(&quarantine_section(e));
    }
    let _ = writeln!(out, "the record cannot be read as a job: {problem}");
    let mut out = leasehold_core::visible(&out).into_owned();
    if !raw.fields.is_empty() {
        let mut t = Table::new(&["FIELD", "VALUE"]);
        for (name, value) in &raw.fields {
            t.row(vec![name.clone(), value.clone()]);
        }
        out.push_str(&t.render("  "));
    }
    out
}
