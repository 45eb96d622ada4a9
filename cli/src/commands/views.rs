//! The commands that read: `status`, `jobs`, `show`, `locks`, `workers` and
//! `events` (with `--follow`).

use std::time::Duration;

use leasehold_core::{Error, Event, EventFollower, Inspector, JobFilter, JobId, Page};
use serde::Serialize;
use serde_json::json;

use super::{one, out, print_json, print_json_line};
use crate::context::{list_jobs_across, queue_entries, Ctx};
use crate::failure::{Failure, Outcome};
use crate::grammar::{job_id, JobsArgs, StateArg};
use crate::render;
use crate::wording::{self, Moment};

/// How long one `XREAD BLOCK` of `events --follow` waits.
const FOLLOW_BLOCK: Duration = Duration::from_secs(2);

/// `status`. On a Redis Cluster with a master down (its replica not
/// promoted yet), the queues of the other masters are shown and the rest
/// named, and the exit code is 5 (Redis cannot be reached). With `--json`,
/// the entries of `/api/queues`: each queue read (`"reachable": true`) and
/// each queue or master not read (`"reachable": false`, its `master` and the
/// `error` line also printed on stderr). The queues are read at once, so a
/// master that does not answer delays no other master's queues.
pub(crate) async fn status(ctx: &Ctx, queues: &[String]) -> Outcome {
    let (names, mut lost) = ctx.reachable_queues(queues).await?;
    let mut all = Vec::with_capacity(names.len());
    // every queue at once: one whose master does not answer delays no other
    let mut inspectors = Vec::with_capacity(names.len());
    for q in &names {
        inspectors.push(ctx.inspector(q)?);
    }
    let read = inspectors.iter().map(|i| async move {
        match i.status().await {
            Ok(s) => Ok(Ok(s)),
            Err(e) if ctx.is_master_unreachable(&e) => {
                Ok(Err(ctx.unreachable_queue(i.queue().name(), &e).await))
            }
            Err(e) => Err(e),
        }
    });
    for status in futures_util::future::join_all(read).await {
        match status {
            Ok(Ok(s)) => all.push(s),
            Ok(Err(queue_lost)) => lost.push(queue_lost),
            Err(e) => return Err(ctx.fail(e)),
        }
    }
    if ctx.json {
        print_json(&queue_entries(&all, &lost))?;
    } else if all.is_empty() && lost.is_empty() {
        return out(&format!(
            "no queues found under prefix {:?} at {}\n",
            ctx.config.prefix, ctx.shown_url
        ));
    } else if !all.is_empty() {
        out(&render::status(&all))?;
    }
    if lost.is_empty() {
        return Ok(());
    }
    Err(Failure::Unreachable(format!(
        "Redis Cluster at {}: {} shown, not every queue could be read:\n  {}",
        ctx.shown_url,
        match all.len() {
            1 => "1 queue".to_owned(),
            n => format!("{n} queues"),
        },
        lost.iter()
            .map(|l| l.line.as_str())
            .collect::<Vec<_>>()
            .join("\n  ")
    )))
}

/// `jobs`.
pub(crate) async fn jobs(ctx: &Ctx, args: JobsArgs) -> Outcome {
    let state = match args.state {
        Some(StateArg::Quarantined) => {
            return super::quarantine::list(ctx, &one(args.queue)).await;
        }
        Some(StateArg::State(s)) => Some(s),
        None => None,
    };
    let searched = args.input_key.is_some()
        || args.window.is_some()
        || args.id_prefix.is_some()
        || (args.resource.is_some() && args.worker.is_none());
    if searched {
        if args.worker.is_some() {
            return Err(Failure::Usage(
                "--worker does not go with --input-key, --window or --id-prefix".into(),
            ));
        }
        let search = leasehold_core::inspect::JobSearch {
            input_key: args.input_key,
            resource: args.resource,
            window: args.window,
            id_prefix: args.id_prefix,
            state,
            pipeline: args.pipeline.clone(),
            ..Default::default()
        };
        let names = ctx.queues(&one(args.queue)).await?;
        let inspectors = names
            .iter()
            .map(|q| ctx.inspector(q))
            .collect::<Outcome<Vec<_>>>()?;
        let page = crate::context::search_jobs_across(
            &inspectors,
            &search,
            Page {
                offset: args.offset,
                limit: args.limit,
            },
        )
        .await
        .map_err(|e| ctx.fail(e))?;
        if let (true, Some(p)) = (page.jobs.is_empty(), &args.pipeline) {
            ctx.known_pipeline(&inspectors, p).await?;
        }
        if ctx.json {
            return print_json(&page);
        }
        let mut text = render::jobs(&page, args.offset);
        if page.truncated {
            text.push_str(&format!(
                "a criterion matched more than {} index entries: narrow it\n",
                leasehold_core::inspect::SEARCH_CAP
            ));
        }
        return out(&text);
    }
    let filter = JobFilter {
        state,
        pipeline: args.pipeline.clone(),
        resource: args.resource,
        worker: args.worker,
    };
    let names = ctx.queues(&one(args.queue)).await?;
    let inspectors = names
        .iter()
        .map(|q| ctx.inspector(q))
        .collect::<Outcome<Vec<_>>>()?;
    let page = list_jobs_across(
        &inspectors,
        &filter,
        Page {
            offset: args.offset,
            limit: args.limit,
        },
    )
    .await
    .map_err(|e| ctx.fail(e))?;
    if let (true, Some(p)) = (page.jobs.is_empty(), &filter.pipeline) {
        ctx.known_pipeline(&inspectors, p).await?;
    }
    if ctx.json {
        return print_json(&page);
    }
    out(&render::jobs(&page, args.offset))
}

/// `show`.
pub(crate) async fn show(ctx: &Ctx, id: &JobId, queue: Option<&str>) -> Outcome {
    let queue = ctx.locate(id, queue).await?;
    let inspector = Inspector::new(queue.clone());
    let detail = match inspector.job_detail(id).await {
        Ok(detail) => detail,
        Err(e @ (Error::Corrupt { .. } | Error::Redis(_))) if !is_transport(&e) => {
            // the record cannot be read as a job: show the key as Redis holds it
            let raw = inspector
                .raw_job(id.as_str())
                .await
                .map_err(|e| ctx.fail(e))?;
            if ctx.json {
                return print_json(&json!({"raw": raw, "problem": e.to_string()}));
            }
            outp!("{}", render::raw_job(&raw, &e.to_string()));
            return Ok(());
        }
        Err(e) => return Err(ctx.fail(e)),
    };
    let detail = detail.ok_or_else(|| {
        Failure::UnknownJob(format!("job {id} not found in queue {}", queue.name()))
    })?;
    let mut detail = detail;
    if let Some(lease) = &mut detail.job.lease {
        lease.token = "(redacted)".into();
    }
    let timeline = wording::timeline(&detail.job);
    // a dependent QUEUED for its parents (not leasable until they SUCCEEDED)
    let waiting_for: Vec<String> = queue
        .waiting_for(id)
        .await
        .map_err(|e| ctx.fail(e))?
        .iter()
        .map(ToString::to_string)
        .collect();
    // the records of its process steps (exit, cut-off, progress, log tails), if any
    let process_steps = leasehold_core::process::read_records(&queue, id.as_str())
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.json {
        #[derive(Serialize)]
        struct Shown<'a> {
            #[serde(flatten)]
            detail: &'a leasehold_core::JobDetail,
            timeline: &'a [Moment],
            cancel_explained: Option<String>,
            waiting_for: &'a [String],
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            process_steps: &'a [leasehold_core::process::ProcessRecord],
        }
        return print_json(&Shown {
            detail: &detail,
            timeline: &timeline,
            cancel_explained: detail.cancel.as_ref().map(|c| c.explain()),
            waiting_for: &waiting_for,
            process_steps: &process_steps,
        });
    }
    let mut text = render::show(&detail, &timeline);
    text.push_str(&render::process_steps(&process_steps, &detail.job));
    if !waiting_for.is_empty() {
        text.push_str(&format!(
            "waiting for {} (QUEUED, not leasable until they SUCCEEDED)\n",
            waiting_for.join(", ")
        ));
    }
    out(&text)
}

/// Whether `e` is Redis failing to answer (not a bad key).
fn is_transport(e: &Error) -> bool {
    match e {
        Error::Redis(re) => {
            re.is_io_error()
                || re.is_connection_dropped()
                || re.is_connection_refusal()
                || re.is_timeout()
        }
        _ => false,
    }
}

/// `locks`.
pub(crate) async fn locks(ctx: &Ctx, queue: Option<String>) -> Outcome {
    #[derive(Serialize)]
    struct QueueLock {
        queue: String,
        #[serde(flatten)]
        lock: leasehold_core::LockInfo,
    }
    let mut all = Vec::new();
    for q in ctx.queues(&one(queue)).await? {
        for lock in ctx.inspector(&q)?.locks().await.map_err(|e| ctx.fail(e))? {
            all.push(QueueLock {
                queue: q.clone(),
                lock,
            });
        }
    }
    if ctx.json {
        return print_json(&all);
    }
    let rows: Vec<(String, leasehold_core::LockInfo)> =
        all.into_iter().map(|l| (l.queue, l.lock)).collect();
    out(&render::locks(&rows))
}

/// `workers`.
pub(crate) async fn workers(ctx: &Ctx, queue: Option<String>) -> Outcome {
    #[derive(Serialize)]
    struct QueueWorkers {
        queue: String,
        #[serde(flatten)]
        workers: leasehold_core::Workers,
    }
    let mut all = Vec::new();
    for q in ctx.queues(&one(queue)).await? {
        let workers = ctx
            .inspector(&q)?
            .workers()
            .await
            .map_err(|e| ctx.fail(e))?;
        all.push(QueueWorkers { queue: q, workers });
    }
    if ctx.json {
        return print_json(&all);
    }
    let rows: Vec<(String, leasehold_core::Workers)> =
        all.into_iter().map(|w| (w.queue, w.workers)).collect();
    out(&render::workers(&rows))
}

/// `events`, and with `follow` every new event until interrupted.
pub(crate) async fn events(
    ctx: &Ctx,
    queue: Option<String>,
    job: Option<String>,
    follow: bool,
    limit: usize,
) -> Outcome {
    let job = job.as_deref().map(job_id).transpose()?;
    // the queues to read, and the first events
    let (names, mut first): (Vec<String>, Vec<Event>) = match &job {
        Some(id) => {
            let queue = match &queue {
                // a purged job's events may outlive it: read the stream even without the record
                Some(q) => {
                    ctx.known_queue(q).await?;
                    ctx.queue(q)?
                }
                None => ctx.locate(id, None).await?,
            };
            let events = Inspector::new(queue.clone())
                .job_events(id)
                .await
                .map_err(|e| ctx.fail(e))?;
            if events.is_empty() && queue.job(id).await.map_err(|e| ctx.fail(e))?.is_none() {
                return Err(Failure::UnknownJob(format!(
                    "job {id} not found in queue {}",
                    queue.name()
                )));
            }
            (vec![queue.name().to_owned()], events)
        }
        None => {
            let names = ctx.queues(&one(queue)).await?;
            let mut events = Vec::new();
            for q in &names {
                events.extend(
                    ctx.inspector(q)?
                        .events(None, limit)
                        .await
                        .map_err(|e| ctx.fail(e))?,
                );
            }
            (names, events)
        }
    };
    first.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.id.cmp(&b.id)));
    let skip = first.len().saturating_sub(limit);
    let first: Vec<Event> = first.into_iter().skip(skip).collect();
    if !follow {
        if ctx.json {
            return print_json(&first);
        }
        if first.is_empty() {
            return out("no events\n");
        }
        return out(&render::events(&first));
    }
    let mut follower = EventFollower::connect(&ctx.url, &ctx.config, &names, FOLLOW_BLOCK)
        .await
        .map_err(|e| ctx.fail(e))?;
    // continue right after what was read (or from the start of an empty stream)
    for q in &names {
        let last = first
            .iter()
            .rev()
            .find(|e| e.queue == *q)
            .map(|e| e.id.clone());
        if let Some(last) = last {
            follower.resume_after(q, &last);
        }
    }
    let print = |e: &Event| -> Outcome {
        if ctx.json {
            print_json_line(e)
        } else {
            out(&format!("{}\n", render::event_line(e)))
        }
    };
    for e in &first {
        print(e)?;
    }
    if !ctx.json {
        eprintln!("following {} (Ctrl-C to stop)", names.join(", "));
    }
    loop {
        let batch = tokio::select! {
            batch = follower.next_batch(100) => batch.map_err(|e| ctx.fail(e))?,
            _ = tokio::signal::ctrl_c() => return Err(Failure::Interrupted),
        };
        for e in batch
            .iter()
            .filter(|e| job.as_ref().is_none_or(|j| e.job == *j))
        {
            print(e)?;
        }
    }
}
