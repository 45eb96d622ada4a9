//! `jobs`: one page of jobs, newest change first.

use std::fmt::Write as _;

use leasehold_core::JobPage;

use crate::table::Table;
use crate::time::stamp;
use crate::wording::opt;

/// `jobs`.
pub(crate) fn jobs(page: &JobPage, offset: usize) -> String {
    let mut out = String::new();
    if page.jobs.is_empty() {
        out.push_str("no jobs match\n");
    } else {
        let mut t = Table::new(&[
            "ID",
            "QUEUE",
            "PIPELINE",
            "STATE",
            "ATTEMPT",
            "STEP",
            "LAST DONE",
            "RESOURCE",
            "WINDOW",
            "WORKER",
            "CREATED",
            "UPDATED",
            "INPUT",
            "WHY IT ENDED",
        ]);
        for j in &page.jobs {
            let mut state = j.state.to_string();
            if j.cancel_reason.is_some() && !j.state.is_terminal() {
                state.push_str(" (cancel requested)");
            }
            if let (leasehold_core::JobState::Queued, Some(w)) = (j.state, &j.waiting) {
                state.push_str(&format!(
                    " ({})",
                    leasehold_core::flow::describe_wait(w, None)
                ));
            }
            t.painted_row(
                vec![
                    j.id.to_string(),
                    j.queue.clone(),
                    j.pipeline.clone(),
                    state,
                    j.attempt.to_string(),
                    opt(j.step.as_deref()),
                    opt(j.last_step.as_deref()),
                    opt(j.resource.as_deref()),
                    opt(j.window.as_deref()),
                    opt(j.worker.as_deref()),
                    stamp(j.created_at),
                    stamp(j.updated_at),
                    j.input.clone(),
                    j.ended
                        .as_ref()
                        .map_or_else(|| "-".into(), crate::wording::ending),
                ],
                &[(3, crate::style::of_state(j.state))],
            );
        }
        out.push_str(&t.render(""));
        let _ = write!(
            out,
            "{} (offset {offset})",
            crate::wording::jobs(page.jobs.len())
        );
        if page.has_more {
            let _ = write!(
                out,
                "; more may match: --offset {}",
                offset + page.jobs.len()
            );
        }
        out.push('\n');
    }
    if page.quarantined > 0 {
        let _ = writeln!(
            out,
            "{} quarantined (unreadable) jobs not listed: `leasehold jobs --state quarantined`",
            page.quarantined
        );
    }
    if !page.unreadable.is_empty() {
        let _ = writeln!(
            out,
            "{} unreadable, left out of the listing:",
            page.unreadable.len()
        );
        out.push_str(&super::unreadable(&page.unreadable, "  "));
    }
    if page.truncated {
        let _ = writeln!(
            out,
            "note: stopped after reading {} index entries; narrow the filter (--queue, --state, --pipeline)",
            page.examined
        );
    }
    out
}
