//! `enqueue`: one job, or one job per time window of a range (a backfill),
//! under the pipeline's published contract (its queue, input schema, resource
//! and input-key templates, policies); re-running a window that succeeded is
//! an explicit `--rerun`.

use leasehold_core::{
    jobs_from_json, BadJob, Client, Contract, Dependency, EnqueueOptions, EnqueueStatus, Enqueued,
    JsonJob, NewGroup, ParentFailure, Queue, Terms,
};
use serde_json::json;

use super::print_json;
use crate::context::Ctx;
use crate::failure::{Failure, Outcome};
use crate::grammar::{EnqueueArgs, ParentFailureArg};
use crate::input_arg::{self, Source};
use crate::progress::Progress;
use crate::time;

/// Jobs per `enqueue_bulk` call of a backfill (one progress update each).
const ENQUEUE_CHUNK: usize = 500;

/// The options `args` give (the group among them; the parents are
/// [`dependencies`]).
fn options(args: &EnqueueArgs) -> Outcome<EnqueueOptions> {
    if args.max_attempts == Some(0) {
        return Err(Failure::Usage("--max-attempts must be at least 1".into()));
    }
    let mut o = EnqueueOptions::new();
    o.queue = args.queue.clone();
    o.rerun = args.rerun;
    o.priority = args.priority;
    o.delay = args.delay;
    o.max_attempts = args.max_attempts;
    o.unregistered = args.unregistered;
    o.group = args.group.clone();
    o.on_parent_failure = Some(match args.on_parent_failure {
        ParentFailureArg::Cancel => ParentFailure::Cancel,
        ParentFailureArg::Run => ParentFailure::Run,
    });
    Ok(o)
}

/// The parents `--depends-on` names: job ids, or `group:<name>`.
fn dependencies(args: &EnqueueArgs) -> Outcome<Vec<Dependency>> {
    args.depends_on
        .iter()
        .map(|d| {
            d.parse::<Dependency>()
                .map_err(|e| Failure::Usage(format!("--depends-on {d:?}: {e}")))
        })
        .collect()
}

/// Creates `--group` in `q` when it does not exist yet (no completion job:
/// `group create` gives one).
async fn ensure_group(ctx: &Ctx, q: &Queue, args: &EnqueueArgs) -> Outcome {
    if let Some(g) = &args.group {
        leasehold_core::check_group_name(g).map_err(|e| Failure::Usage(e.to_string()))?;
        if q.create_group(&NewGroup::new(g), &ctx.by)
            .await
            .map_err(|e| ctx.fail(e))?
        {
            eprintln!("created group {g} in queue {}", q.name());
        }
    }
    Ok(())
}

/// Seals `--group` after its last child, unless `--keep-open`.
async fn seal_group(ctx: &Ctx, q: &Queue, args: &EnqueueArgs) -> Outcome {
    if let (Some(g), false) = (&args.group, args.keep_open) {
        let status = q.seal_group(g, &ctx.by).await.map_err(|e| ctx.fail(e))?;
        eprintln!("group {g} sealed ({status}): `leasehold group show {g}` follows it");
    }
    Ok(())
}

/// Where jobs go and how they are built: the pipeline's contract, or (with
/// `--unregistered`) what the caller gave.
enum Target {
    Registered(Box<Contract>),
    Unregistered,
}

impl Target {
    /// The terms [`jobs_from_json`] builds the jobs of `pipeline` under.
    fn terms<'t>(&'t self, pipeline: &'t str) -> Terms<'t> {
        match self {
            Target::Registered(c) => Terms::Published(c),
            Target::Unregistered => Terms::Unregistered(pipeline),
        }
    }
}

/// A job that could not be built, as the CLI says it (naming the file or
/// standard input its input came from).
fn bad_job(ctx: &Ctx, bad: BadJob, from: &Source) -> Failure {
    let failure = ctx.fail(bad.problem.into());
    match from.describe() {
        Some(place) => failure.context(&format!("input read from {place}")),
        None => failure,
    }
}

/// Counts of what a backfill did.
#[derive(Default)]
pub(super) struct Counts {
    pub(super) created: usize,
    pub(super) rerun: usize,
    pub(super) running: usize,
    pub(super) succeeded: usize,
}

impl Counts {
    fn add(&mut self, e: &Enqueued) {
        match e.status {
            EnqueueStatus::Created => self.created += 1,
            EnqueueStatus::Rerun => self.rerun += 1,
            EnqueueStatus::Existing => self.running += 1,
            _ => self.succeeded += 1,
        }
    }

    /// The summary line: created, already enqueued (live), already succeeded, re-run.
    pub(super) fn line(&self) -> String {
        format!(
            "{} created, {} already enqueued (same input key, not finished), {} already succeeded, {} re-run",
            self.created, self.running, self.succeeded, self.rerun
        )
    }

    /// The short form, for progress lines.
    fn short(&self) -> String {
        format!(
            "{} created, {} existing, {} succeeded, {} re-run",
            self.created, self.running, self.succeeded, self.rerun
        )
    }
}

/// What one enqueue did, in words.
fn said(done: &Enqueued, q: &Queue) -> String {
    let previous = done
        .previous
        .as_ref()
        .map(|p| format!(" (re-run of {p})"))
        .unwrap_or_default();
    match done.status {
        EnqueueStatus::Created => format!("created job {} in queue {}", done.id, q.name()),
        EnqueueStatus::Rerun => format!(
            "created job {} in queue {}{previous}",
            done.id,
            q.name()
        ),
        EnqueueStatus::Existing => format!(
            "job {} with the same input key is not finished yet; nothing created (queue {})",
            done.id,
            q.name()
        ),
        _ => format!(
            "job {} with the same input key already SUCCEEDED; nothing created (use --rerun to run it again; queue {})",
            done.id,
            q.name()
        ),
    }
}

/// `enqueue`.
pub(crate) async fn enqueue(ctx: &Ctx, args: EnqueueArgs) -> Outcome {
    let mut o = options(&args)?;
    let input = args
        .input
        .as_deref()
        .map(|v| input_arg::read("--input", v))
        .transpose()?;
    let template = args
        .input_template
        .as_deref()
        .map(|v| input_arg::read("--input-template", v))
        .transpose()?;
    let client = Client::from_queue(ctx.base.clone());
    let (q, target) = if args.unregistered {
        let name = args.queue.clone().unwrap_or_default();
        eprintln!(
            "note: pipeline {} is enqueued unregistered in queue {name}: no input check, and only the resource and input key given",
            args.pipeline
        );
        (ctx.queue(&name)?, Target::Unregistered)
    } else {
        let (q, contract) = client
            .contract(&args.pipeline, args.queue.as_deref())
            .await
            .map_err(|e| ctx.fail(e))?;
        if let Some(note) = contract.unchecked_note() {
            eprintln!("note: {note}");
        }
        (q, Target::Registered(Box::new(contract)))
    };
    o.depends_on = dependencies(&args)?;
    ensure_group(ctx, &q, &args).await?;
    let Some((template, template_from)) = &template else {
        o.resource = args.resource.clone();
        o.input_key = args.input_key.clone();
        let (input, from) = input.unwrap_or((String::new(), Source::Argument));
        let built = jobs_from_json(target.terms(&args.pipeline), &[JsonJob::new(input, o)])
            .map_err(|bad| bad_job(ctx, bad, &from))?;
        let input_checked = built.input_checked();
        let Some(job) = built.into_first() else {
            return Err(Failure::Other("no job was built".into()));
        };
        let done = q.enqueue(job).await.map_err(|e| ctx.fail(e))?;
        seal_group(ctx, &q, &args).await?;
        if ctx.json {
            return print_json(&json!({
                "queue": q.name(), "pipeline": args.pipeline, "id": done.id,
                "created": done.created, "status": done.status, "previous": done.previous,
                "input_checked": input_checked,
            }));
        }
        outln!("{}", said(&done, &q));
        return Ok(());
    };
    // the range form (clap makes --from, --to and --step go with the template)
    let missing = || Failure::Usage("the range form needs --from, --to and --step".into());
    let (from, to) = (args.from.ok_or_else(missing)?, args.to.ok_or_else(missing)?);
    let step = args.step.ok_or_else(missing)?;
    let windows = time::windows(from, to, step).map_err(Failure::Usage)?;
    // every window is built and checked before anything is written
    let asked: Vec<JsonJob> = windows
        .iter()
        .map(|w| {
            let mut o = o.clone();
            o.input_key = args
                .input_key_template
                .as_deref()
                .map(|t| time::render(t, w));
            o.resource = args.resource.as_deref().map(|r| time::render(r, w));
            JsonJob::new(time::render(template, w), o)
        })
        .collect();
    let labels: Vec<(String, String)> = windows
        .iter()
        .map(|w| (w.from.to_string(), w.to.to_string()))
        .collect();
    let WindowsEnqueued {
        counts,
        listed,
        input_checked,
    } = enqueue_windows(
        ctx,
        &q,
        target.terms(&args.pipeline),
        &labels,
        asked,
        template_from,
    )
    .await?;
    let total = listed.len();
    seal_group(ctx, &q, &args).await?;
    if ctx.json {
        return print_json(&json!({
            "queue": q.name(),
            "pipeline": args.pipeline,
            "windows": total,
            "created": counts.created,
            "rerun": counts.rerun,
            "existing": counts.running,
            "succeeded": counts.succeeded,
            "input_checked": input_checked,
            "jobs": listed,
        }));
    }
    outln!(
        "{total} windows of {} from {from} to {to} in queue {}: {}",
        args.pipeline,
        q.name(),
        counts.line()
    );
    let joined = counts.running + counts.succeeded;
    if let (Some(g), true) = (&args.group, joined > 0) {
        outln!(
            "{joined} of them existed already and are children of group {g} as they are \
             ({} already succeeded)",
            counts.succeeded
        );
    }
    Ok(())
}

/// What [`enqueue_windows`] did.
pub(super) struct WindowsEnqueued {
    /// How many were created, existed, succeeded, re-run.
    pub(super) counts: Counts,
    /// Each window's job, for `--json`.
    pub(super) listed: Vec<serde_json::Value>,
    /// Whether the inputs were checked against a schema.
    pub(super) input_checked: bool,
}

/// Builds the jobs `asked` (one a window; `windows` their `(from, to)` as
/// text; `from` where their template came from) under `terms`, every one
/// checked before anything is written, then enqueues them in chunks with a
/// progress line.
pub(super) async fn enqueue_windows(
    ctx: &Ctx,
    q: &Queue,
    terms: Terms<'_>,
    windows: &[(String, String)],
    asked: Vec<JsonJob>,
    from: &Source,
) -> Outcome<WindowsEnqueued> {
    let built = jobs_from_json(terms, &asked).map_err(|bad| {
        let window = windows
            .get(bad.index)
            .map(|(from, to)| format!("window {from} to {to}"));
        let failure = bad_job(ctx, bad, from);
        match window {
            Some(w) => failure.context(&w),
            None => failure,
        }
    })?;
    let input_checked = built.input_checked();
    let jobs = built.jobs;
    if jobs.iter().any(|j| j.input_key.is_none()) {
        eprintln!(
            "note: the windows have no input key (the pipeline has no input-key template and no --input-key-template was given): running this again enqueues them again"
        );
    }
    let total = jobs.len();
    let mut counts = Counts::default();
    let mut listed = Vec::with_capacity(total);
    let mut windows_left = windows.iter();
    let mut done_count = 0usize;
    let mut rest = jobs;
    let progress = Progress::lines(ctx.json, total as u64, "enqueued", "windows");
    while !rest.is_empty() {
        let tail = rest.split_off(rest.len().min(ENQUEUE_CHUNK));
        let chunk = std::mem::replace(&mut rest, tail);
        let keys: Vec<Option<String>> = chunk.iter().map(|j| j.input_key.clone()).collect();
        let replies = q.enqueue_bulk(chunk).await.map_err(|e| {
            ctx.fail(e).context(&format!(
                "after {done_count} of {total} windows; run the same command again: it is idempotent on the input key"
            ))
        })?;
        for (reply, key) in replies.into_iter().zip(keys) {
            counts.add(&reply);
            let w = windows_left.next();
            listed.push(json!({
                "id": reply.id,
                "created": reply.created,
                "status": reply.status,
                "previous": reply.previous,
                "input_key": key,
                "from": w.map(|w| w.0.clone()),
                "to": w.map(|w| w.1.clone()),
            }));
            done_count += 1;
        }
        progress.update(done_count as u64, &counts.short());
    }
    progress.finish();
    Ok(WindowsEnqueued {
        counts,
        listed,
        input_checked,
    })
}
