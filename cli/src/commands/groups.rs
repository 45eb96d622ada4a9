//! `groups` and `group ...`: the groups of jobs (a backfill, or any set of
//! jobs with a completion job): list them with progress, show one with its
//! progress bar, ETA and children (`--watch`: a live bar until it settles),
//! create, seal and cancel one, and retry its failed children. Every action
//! runs a script and leaves an event.

use std::time::Duration;

use leasehold_core::{
    jobs_from_json, Client, EnqueueOptions, GroupInfo, GroupPolicy, GroupStatus, GroupView,
    JsonJob, NewGroup, Queue, RetryMode, Terms,
};
use serde_json::json;

use super::{out, print_json};
use crate::context::Ctx;
use crate::failure::{Failure, Outcome};

/// The queue holding group `name`: the one given, or the only one that has it.
pub(crate) async fn locate_group(ctx: &Ctx, name: &str, given: Option<&str>) -> Outcome<Queue> {
    let queues = match given {
        Some(q) => {
            ctx.known_queue(q).await?;
            vec![q.to_owned()]
        }
        None => ctx.queues(&[]).await?,
    };
    let mut found = Vec::new();
    for q in &queues {
        let queue = ctx.queue(q)?;
        if queue.group(name).await.map_err(|e| ctx.fail(e))?.is_some() {
            found.push(queue);
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => {
            let mut known = Vec::new();
            for q in &queues {
                let groups = ctx.queue(q)?.groups().await.map_err(|e| ctx.fail(e))?;
                known.extend(groups.into_iter().map(|g| g.name));
            }
            known.sort();
            known.dedup();
            Err(Failure::UnknownJob(crate::names::unknown(
                "group",
                name,
                &given.map_or_else(|| "in any queue".to_owned(), |q| format!("in queue {q}")),
                &known,
            )))
        }
        _ => Err(Failure::Usage(format!(
            "group {name} exists in several queues ({}): give --queue",
            found.iter().map(Queue::name).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// A text progress bar of `width` cells for `done` of `total`.
pub(crate) fn bar(done: u64, total: u64, width: usize) -> String {
    let filled = if total == 0 {
        width
    } else {
        ((done as f64 / total as f64) * width as f64).round() as usize
    };
    let filled = filled.min(width);
    format!("[{}{}]", "#".repeat(filled), ".".repeat(width - filled))
}

/// The time left at the pace so far (children ended per second since the
/// group was created), or `None` when nothing ended yet or it is settled.
pub(crate) fn eta(info: &GroupInfo, now_ms: i64) -> Option<Duration> {
    let ended = info.ended();
    let left = info.total.saturating_sub(ended);
    let elapsed = now_ms.saturating_sub(info.created_at);
    if ended == 0 || left == 0 || elapsed <= 0 {
        return None;
    }
    let per_child = elapsed as f64 / ended as f64;
    Some(Duration::from_millis((per_child * left as f64) as u64))
}

/// `1m 20s`, `35s`, `2h 5m`.
fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h {}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m {}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// One line of progress: bar, percentage, counts, ETA.
pub(crate) fn progress_line(info: &GroupInfo, now_ms: i64) -> String {
    let ended = info.ended();
    let pct = (ended * 100).checked_div(info.total).unwrap_or(100);
    let eta = match (info.status, eta(info, now_ms)) {
        (GroupStatus::Open | GroupStatus::Sealed, Some(d)) => {
            format!(", ETA {}", short_duration(d))
        }
        _ => String::new(),
    };
    let quarantined = if info.quarantined > 0 {
        format!(", {} quarantined", info.quarantined)
    } else {
        String::new()
    };
    format!(
        "{} {pct:>3}% {ended}/{} ended: {} succeeded, {} failed, {} cancelled{quarantined}, {} stale; \
         {} queued, {} leased, {} running{eta}",
        bar(ended, info.total, 30),
        info.total,
        info.succeeded,
        info.failed,
        info.cancelled,
        info.stale,
        info.queued,
        info.leased,
        info.running
    )
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `groups`: every group of the given queues (default: all), with progress.
pub(crate) async fn list(ctx: &Ctx, queue: Option<String>) -> Outcome {
    let queues = ctx.queues(&super::one(queue)).await?;
    let mut all = Vec::new();
    for q in &queues {
        let queue = ctx.queue(q)?;
        all.extend(queue.groups().await.map_err(|e| ctx.fail(e))?);
    }
    if ctx.json {
        return print_json(&all);
    }
    if all.is_empty() {
        return out("no groups\n");
    }
    let now = now_ms();
    let mut text = String::new();
    for g in &all {
        text.push_str(&format!(
            "{}  {:<10} {:<9} {}\n",
            g.name,
            g.queue,
            g.status.as_str(),
            progress_line(g, now)
        ));
    }
    out(&leasehold_core::visible(&text))
}

fn render(view: &GroupView, now: i64) -> String {
    let info = &view.info;
    let mut text = format!(
        "group {} (queue {}, id {}): {}, policy {}\n  {}\n",
        info.name,
        info.queue,
        info.id,
        info.status,
        info.policy.as_str(),
        progress_line(info, now)
    );
    if let Some(why) = view.why() {
        text.push_str(&format!("  {why}\n"));
    }
    match (&info.completion, &info.completion_pipeline) {
        (Some(id), Some(p)) if info.fired => {
            text.push_str(&format!("  completion job {id} ({p}) enqueued\n"))
        }
        (Some(id), Some(p)) => text.push_str(&format!(
            "  completion job {id} ({p}) not enqueued yet ({})\n",
            match info.policy {
                GroupPolicy::AllSucceeded => "when every child SUCCEEDED",
                GroupPolicy::AllTerminal => "when every child ended",
            }
        )),
        _ => {}
    }
    text.push_str("  children:\n");
    for c in view.children.iter().take(200) {
        let state = c.state.map_or("(deleted)", |s| s.as_str());
        let waiting = if c.waiting {
            " (waiting for its parents)"
        } else {
            ""
        };
        text.push_str(&format!(
            "    {}  {:<9} {}{waiting}\n",
            c.id,
            state,
            c.pipeline.as_deref().unwrap_or("")
        ));
    }
    if view.children.len() > 200 {
        text.push_str(&format!(
            "    ... and {} more (--json lists them all)\n",
            view.children.len() - 200
        ));
    }
    text
}

/// `group show`: the group, its progress bar and ETA, what holds it, its
/// children. `watch`: a live bar until the group completes, is blocked or cancelled.
pub(crate) async fn show(ctx: &Ctx, name: &str, queue: Option<&str>, watch: bool) -> Outcome {
    let q = locate_group(ctx, name, queue).await?;
    let view = q
        .group_view(name)
        .await
        .map_err(|e| ctx.fail(e))?
        .ok_or_else(|| Failure::UnknownJob(format!("group {name} not found")))?;
    if ctx.json {
        return print_json(&json!({
            "group": view.info,
            "why": view.why(),
            "failed": view.failed,
            "cancelled": view.cancelled,
            "stale": view.stale,
            "quarantined": view.quarantined,
            "children": view.children,
        }));
    }
    if !watch {
        return out(&leasehold_core::visible(&render(&view, now_ms())));
    }
    let bar = indicatif::ProgressBar::new(view.info.total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} ended ({percent}%), ETA {eta} {msg}",
        )
        .map_err(|e| Failure::Other(e.to_string()))?,
    );
    loop {
        let info = q
            .group(name)
            .await
            .map_err(|e| ctx.fail(e))?
            .ok_or_else(|| Failure::UnknownJob(format!("group {name} not found")))?;
        bar.set_length(info.total);
        bar.set_position(info.ended());
        bar.set_message(format!(
            "{} succeeded, {} failed, {} cancelled, {} stale",
            info.succeeded, info.failed, info.cancelled, info.stale
        ));
        if matches!(
            info.status,
            GroupStatus::Completed | GroupStatus::Blocked | GroupStatus::Cancelled
        ) {
            bar.finish();
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let view = q
        .group_view(name)
        .await
        .map_err(|e| ctx.fail(e))?
        .ok_or_else(|| Failure::UnknownJob(format!("group {name} not found")))?;
    out(&leasehold_core::visible(&render(&view, now_ms())))
}

/// What `group create` is given.
pub(crate) struct CreateArgs {
    /// The group.
    pub name: String,
    /// Its queue.
    pub queue: String,
    /// The completion job's pipeline.
    pub completion: Option<String>,
    /// Its input (JSON).
    pub completion_input: Option<String>,
    /// When it runs.
    pub policy: GroupPolicy,
}

/// `group create`: a group, optionally with a completion job (built under its
/// pipeline's published contract when registered).
pub(crate) async fn create(ctx: &Ctx, args: CreateArgs) -> Outcome {
    let q = ctx.queue(&args.queue)?;
    let mut group = NewGroup::new(&args.name).policy(args.policy);
    if let Some(pipeline) = &args.completion {
        let (input, from) = match args.completion_input.as_deref() {
            Some(v) => crate::input_arg::read("--completion-input", v)?,
            None => ("{}".to_owned(), crate::input_arg::Source::Argument),
        };
        let client = Client::from_queue(ctx.base.clone());
        let mut o = EnqueueOptions::new();
        o.queue = Some(args.queue.clone());
        let contract = match client.contract(pipeline, Some(&args.queue)).await {
            Ok((_, contract)) => Some(contract),
            Err(leasehold_core::Error::UnregisteredPipeline { .. }) => {
                o.unregistered = true;
                None
            }
            Err(e) => return Err(ctx.fail(e)),
        };
        let terms = match &contract {
            Some(c) => Terms::Published(c),
            None => Terms::Unregistered(pipeline),
        };
        let built = jobs_from_json(terms, &[JsonJob::new(input, o)]).map_err(|bad| {
            let failure = ctx.fail(bad.problem.into());
            match from.describe() {
                Some(place) => failure.context(&format!("input read from {place}")),
                None => failure,
            }
        })?;
        let Some(job) = built.into_first() else {
            return Err(Failure::Other("no completion job was built".into()));
        };
        group = group.completion(job);
    }
    let created = q
        .create_group(&group, &ctx.by)
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.json {
        return print_json(&json!({"queue": q.name(), "group": args.name, "created": created}));
    }
    if created {
        out(&format!(
            "created group {} in queue {} (open: add children with `enqueue --group {}`, then seal it)\n",
            args.name,
            q.name(),
            args.name
        ))
    } else {
        out(&format!(
            "group {} already exists in queue {}; nothing changed\n",
            args.name,
            q.name()
        ))
    }
}

/// `group seal`.
pub(crate) async fn seal(ctx: &Ctx, name: &str, queue: Option<&str>) -> Outcome {
    let q = locate_group(ctx, name, queue).await?;
    let status = q.seal_group(name, &ctx.by).await.map_err(|e| ctx.fail(e))?;
    if ctx.json {
        return print_json(&json!({"queue": q.name(), "group": name, "status": status}));
    }
    out(&format!("group {name} is {status}\n"))
}

/// `group cancel`: the group and every unsettled child (running ones get an
/// in-flight cancel request).
pub(crate) async fn cancel(ctx: &Ctx, name: &str, queue: Option<&str>, reason: &str) -> Outcome {
    let q = locate_group(ctx, name, queue).await?;
    let done = q
        .cancel_group(name, reason, &ctx.by)
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.json {
        return print_json(&json!({"queue": q.name(), "group": name, "children": done}));
    }
    out(&format!(
        "group {name} cancelled: {} queued children cancelled, {} running children asked to stop (their workers honour it), {} already ended\n",
        done.cancelled, done.requested, done.skipped
    ))
}

/// `group retry`: a new attempt of every FAILED and CANCELLED child.
pub(crate) async fn retry(
    ctx: &Ctx,
    name: &str,
    queue: Option<&str>,
    mode: RetryMode,
    reason: &str,
) -> Outcome {
    let q = locate_group(ctx, name, queue).await?;
    let (retried, refused) = q
        .retry_group(name, mode, &ctx.by, reason)
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.json {
        let refused: Vec<_> = refused
            .iter()
            .map(|(id, e)| json!({"id": id, "error": e.to_string()}))
            .collect();
        return print_json(
            &json!({"queue": q.name(), "group": name, "retried": retried, "refused": refused}),
        );
    }
    let mut text = format!(
        "group {name}: {} retried\n",
        crate::wording::count(retried.len(), "child", "children")
    );
    for (id, e) in &refused {
        text.push_str(&format!("  {id} refused: {e}\n"));
    }
    out(&leasehold_core::visible(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_with_the_ended_children() {
        assert_eq!(bar(0, 10, 10), "[..........]");
        assert_eq!(bar(5, 10, 10), "[#####.....]");
        assert_eq!(bar(10, 10, 10), "[##########]");
        assert_eq!(bar(0, 0, 4), "[####]", "an empty group is complete");
    }

    #[test]
    fn the_eta_is_the_pace_so_far_applied_to_what_is_left() {
        let info = GroupInfo {
            queue: "q".into(),
            name: "g".into(),
            id: leasehold_core::JobId::new(),
            status: GroupStatus::Sealed,
            policy: GroupPolicy::AllSucceeded,
            total: 100,
            succeeded: 20,
            failed: 5,
            cancelled: 0,
            stale: 0,
            queued: 60,
            leased: 5,
            running: 10,
            quarantined: 0,
            purged: 0,
            cancel_next: None,
            retry_next: None,
            outcome: None,
            completion: None,
            completion_pipeline: None,
            fired: false,
            created_at: 0,
            sealed_at: None,
            settled_at: None,
            cancel_reason: None,
        };
        // 25 ended in 10 s: 75 left take 30 s
        assert_eq!(eta(&info, 10_000), Some(Duration::from_secs(30)));
        assert!(progress_line(&info, 10_000).contains("25% 25/100 ended"));
        assert!(progress_line(&info, 10_000).contains("ETA 30s"));
        assert!(
            progress_line(&info, 10_000).contains("60 queued, 5 leased, 10 running"),
            "{}",
            progress_line(&info, 10_000)
        );
        assert_eq!(eta(&info, 0), None);
    }
}
