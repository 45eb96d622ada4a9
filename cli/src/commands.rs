//! The commands: each reads through `leasehold_core::inspect` or acts through
//! the `Queue` client (the same Lua scripts the workers use).

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold_core::{
    discover_queues, Cancelled, Error, Event, EventFollower, Inspector, JobFilter, JobId, JobPage,
    JobState, NewJob, Page, PipelineSpec, Queue, QueueConfig, RetryMode,
};
use serde::Serialize;
use serde_json::json;

use crate::render;
use crate::time::{self, human_duration};
use crate::{classify, job_id, Command, EnqueueArgs, Failure, JobsArgs, Outcome};

/// Jobs per `enqueue_bulk` call of a backfill (one progress line each).
const ENQUEUE_CHUNK: usize = 500;
/// How long one `XREAD BLOCK` of `events --follow` waits.
const FOLLOW_BLOCK: Duration = Duration::from_secs(2);

/// Connection and settings shared by the commands.
pub struct Ctx {
    /// The URL as given (with credentials), for dedicated connections.
    pub url: String,
    /// The URL for messages (password redacted).
    pub shown_url: String,
    /// A client whose pool every queue client shares.
    pub base: Queue,
    /// Queue settings (prefix, retention, timeouts).
    pub config: QueueConfig,
    /// Print JSON.
    pub json: bool,
    /// Who acts.
    pub by: String,
}

impl Ctx {
    fn fail(&self, e: Error) -> Failure {
        classify(&self.shown_url, e)
    }

    fn queue(&self, name: &str) -> Outcome<Queue> {
        self.base.sibling(name).map_err(|e| self.fail(e))
    }

    fn inspector(&self, name: &str) -> Outcome<Inspector> {
        Ok(Inspector::new(self.queue(name)?))
    }

    /// The queues named, or every queue found under the prefix.
    async fn queues(&self, given: &[String]) -> Outcome<Vec<String>> {
        if !given.is_empty() {
            for q in given {
                self.queue(q)?;
            }
            return Ok(given.to_vec());
        }
        discover_queues(self.base.pool(), &self.config)
            .await
            .map_err(|e| self.fail(e))
    }

    /// The queue of `job`: the one given, or the only known queue holding it.
    async fn locate(&self, job: &JobId, given: Option<&str>) -> Outcome<Queue> {
        if let Some(q) = given {
            let queue = self.queue(q)?;
            return match queue.job(job).await.map_err(|e| self.fail(e))? {
                Some(_) => Ok(queue),
                None => Err(Failure::UnknownJob(format!(
                    "job {job} not found in queue {q}"
                ))),
            };
        }
        let queues = self.queues(&[]).await?;
        let mut found = Vec::new();
        for q in &queues {
            let queue = self.queue(q)?;
            if queue.job(job).await.map_err(|e| self.fail(e))?.is_some() {
                found.push(queue);
            }
        }
        match found.len() {
            1 => Ok(found.remove(0)),
            0 => Err(Failure::UnknownJob(format!(
                "job {job} not found in any queue under prefix {:?} (looked in: {}); it may have been purged by retention, or give --queue",
                self.config.prefix,
                if queues.is_empty() { "no queues found".to_owned() } else { queues.join(", ") }
            ))),
            _ => Err(Failure::Usage(format!(
                "job {job} exists in several queues ({}): give --queue",
                found.iter().map(Queue::name).collect::<Vec<_>>().join(", ")
            ))),
        }
    }
}

fn print_json(value: &impl Serialize) -> Outcome {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Failure::Other(format!("cannot write JSON: {e}")))?;
    println!("{text}");
    Ok(())
}

fn print_json_line(value: &impl Serialize) -> Outcome {
    let text = serde_json::to_string(value)
        .map_err(|e| Failure::Other(format!("cannot write JSON: {e}")))?;
    println!("{text}");
    Ok(())
}

/// Runs one command.
pub async fn dispatch(ctx: &Ctx, command: Command) -> Outcome {
    match command {
        Command::Status { queue } => status(ctx, &queue).await,
        Command::Jobs(args) => jobs(ctx, args).await,
        Command::Show { job, queue } => show(ctx, &job_id(&job)?, queue.as_deref()).await,
        Command::Cancel { job, queue, reason } => {
            cancel(ctx, &job_id(&job)?, queue.as_deref(), &reason).await
        }
        Command::Retry {
            job,
            queue,
            resume: _,
            from_start,
            reason,
        } => {
            let mode = if from_start {
                RetryMode::FromStart
            } else {
                RetryMode::Resume
            };
            retry(ctx, &job_id(&job)?, queue.as_deref(), mode, &reason).await
        }
        Command::Resolve {
            job,
            queue,
            outcome,
            reason,
        } => {
            resolve(
                ctx,
                &job_id(&job)?,
                queue.as_deref(),
                outcome.state(),
                &reason,
            )
            .await
        }
        Command::Enqueue(args) => enqueue(ctx, args).await,
        Command::Locks { queue } => locks(ctx, queue).await,
        Command::Workers { queue } => workers(ctx, queue).await,
        Command::Events {
            queue,
            job,
            follow,
            limit,
        } => events(ctx, queue, job, follow, limit).await,
        Command::Sweep {
            queue,
            dry_run,
            batch,
        } => sweep(ctx, queue, dry_run, batch).await,
        Command::Purge { queue, batch } => purge(ctx, queue, batch).await,
        Command::Dashboard(args) => crate::dashboard::run(ctx, args).await,
    }
}

fn one(queue: Option<String>) -> Vec<String> {
    queue.into_iter().collect()
}

// ---- reads --------------------------------------------------------------------

async fn status(ctx: &Ctx, queues: &[String]) -> Outcome {
    let names = ctx.queues(queues).await?;
    let mut all = Vec::with_capacity(names.len());
    for q in &names {
        all.push(ctx.inspector(q)?.status().await.map_err(|e| ctx.fail(e))?);
    }
    if ctx.json {
        return print_json(&all);
    }
    if all.is_empty() {
        println!(
            "no queues found under prefix {:?} at {}",
            ctx.config.prefix, ctx.shown_url
        );
        return Ok(());
    }
    print!("{}", render::status(&all));
    Ok(())
}

async fn jobs(ctx: &Ctx, args: JobsArgs) -> Outcome {
    let filter = JobFilter {
        state: args.state,
        pipeline: args.pipeline,
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
    if ctx.json {
        return print_json(&page);
    }
    print!("{}", render::jobs(&page, args.offset));
    Ok(())
}

/// One page of the jobs matching `filter` in the queues of `inspectors`, newest
/// change first. With several queues, each queue's first `offset + limit`
/// matches are read and merged.
pub async fn list_jobs_across(
    inspectors: &[Inspector],
    filter: &JobFilter,
    page: Page,
) -> Result<JobPage, Error> {
    if let [only] = inspectors {
        return only.list_jobs(filter, page).await;
    }
    let need = Page {
        offset: 0,
        limit: page.offset.saturating_add(page.limit),
    };
    let mut merged = JobPage {
        jobs: Vec::new(),
        examined: 0,
        has_more: false,
        truncated: false,
    };
    for inspector in inspectors {
        let p = inspector.list_jobs(filter, need).await?;
        merged.jobs.extend(p.jobs);
        merged.examined += p.examined;
        merged.has_more |= p.has_more;
        merged.truncated |= p.truncated;
    }
    merged.jobs.sort_by(|a, b| {
        b.updated_at
            .cmp(&a.updated_at)
            .then_with(|| b.id.cmp(&a.id))
    });
    merged.has_more |= merged.jobs.len() > need.limit;
    merged.jobs = merged
        .jobs
        .into_iter()
        .skip(page.offset)
        .take(page.limit)
        .collect();
    Ok(merged)
}

async fn show(ctx: &Ctx, id: &JobId, queue: Option<&str>) -> Outcome {
    let queue = ctx.locate(id, queue).await?;
    let detail = Inspector::new(queue.clone())
        .job_detail(id)
        .await
        .map_err(|e| ctx.fail(e))?
        .ok_or_else(|| {
            Failure::UnknownJob(format!("job {id} not found in queue {}", queue.name()))
        })?;
    let mut detail = detail;
    if let Some(lease) = &mut detail.job.lease {
        lease.token = "(redacted)".into();
    }
    let timeline = render::timeline(&detail.job);
    if ctx.json {
        #[derive(Serialize)]
        struct Shown<'a> {
            #[serde(flatten)]
            detail: &'a leasehold_core::JobDetail,
            timeline: &'a [render::Moment],
            cancel_explained: Option<String>,
        }
        return print_json(&Shown {
            detail: &detail,
            timeline: &timeline,
            cancel_explained: detail.cancel.as_ref().map(|c| c.explain()),
        });
    }
    print!("{}", render::show(&detail, &timeline));
    Ok(())
}

async fn locks(ctx: &Ctx, queue: Option<String>) -> Outcome {
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
    print!("{}", render::locks(&rows));
    Ok(())
}

async fn workers(ctx: &Ctx, queue: Option<String>) -> Outcome {
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
    print!("{}", render::workers(&rows));
    Ok(())
}

async fn events(
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
                Some(q) => ctx.queue(q)?,
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
            println!("no events");
        } else {
            print!("{}", render::events(&first));
        }
        return Ok(());
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
            println!("{}", render::event_line(e));
            Ok(())
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
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        for e in batch
            .iter()
            .filter(|e| job.as_ref().is_none_or(|j| e.job == *j))
        {
            print(e)?;
        }
    }
}

// ---- actions ------------------------------------------------------------------

/// The refusal message for `op` on a job in `state`.
pub(crate) fn refused(op: &str, id: &JobId, queue: &str, e: Error) -> Failure {
    let why = |state: JobState| -> String {
        match (op, state) {
            ("cancel", JobState::Stale) => "its worker died mid-step and side effects may exist; decide with `leasehold retry` or `leasehold resolve --as cancelled`".into(),
            ("cancel", s) if s.is_terminal() => "it has already ended; a terminal result is never rewritten".into(),
            ("retry", JobState::Succeeded) => "a SUCCEEDED result is never rewritten; enqueue a new job to run the input again".into(),
            ("retry", _) => "retry applies only to FAILED, CANCELLED and STALE jobs; cancel it first, or wait for it to end".into(),
            ("resolve", _) => "resolve applies only to STALE jobs (a worker died while RUNNING); use cancel or retry for other states".into(),
            _ => "the transition table has no such move".into(),
        }
    };
    match e {
        Error::Refused { state, .. } | Error::AlreadyTerminal { state, .. } | Error::LeaseLost { state, .. } => {
            Failure::Refused(format!("cannot {op} job {id} in queue {queue}: it is {state}; {}", why(state)))
        }
        Error::InputKeyTaken { holder, .. } => Failure::Refused(format!(
            "cannot {op} job {id} in queue {queue}: job {holder} holds its input key and has not finished (the same input would be processed twice)"
        )),
        other => Failure::Other(other.to_string()),
    }
}

fn action_error(ctx: &Ctx, op: &str, id: &JobId, queue: &str, e: Error) -> Failure {
    match e {
        Error::Refused { .. }
        | Error::AlreadyTerminal { .. }
        | Error::LeaseLost { .. }
        | Error::InputKeyTaken { .. } => refused(op, id, queue, e),
        other => ctx.fail(other),
    }
}

async fn cancel(ctx: &Ctx, id: &JobId, queue: Option<&str>, reason: &str) -> Outcome {
    if reason.trim().is_empty() {
        return Err(Failure::Usage("--reason must not be empty".into()));
    }
    let q = ctx.locate(id, queue).await?;
    let result = q
        .cancel(id, reason, &ctx.by)
        .await
        .map_err(|e| action_error(ctx, "cancel", id, q.name(), e))?;
    let (outcome, state, text) = match &result {
        Cancelled::Now => (
            "cancelled",
            JobState::Cancelled,
            format!("job {id} cancelled (it was QUEUED)"),
        ),
        Cancelled::Requested { state } => (
            "requested",
            *state,
            format!("cancel requested for job {id} ({state}): its worker honours it at the next renewal, checkpoint or start; `leasehold show {id}` tells when it is honoured"),
        ),
        Cancelled::AlreadyRequested { state, reason } => (
            "already_requested",
            *state,
            format!("job {id} ({state}) already has a cancel request ({reason:?}); it stands"),
        ),
    };
    if ctx.json {
        return print_json(
            &json!({"job": id, "queue": q.name(), "outcome": outcome, "state": state, "by": ctx.by}),
        );
    }
    println!("{text}");
    Ok(())
}

async fn retry(
    ctx: &Ctx,
    id: &JobId,
    queue: Option<&str>,
    mode: RetryMode,
    reason: &str,
) -> Outcome {
    let q = ctx.locate(id, queue).await?;
    let attempt = q
        .retry(id, mode, &ctx.by, reason)
        .await
        .map_err(|e| action_error(ctx, "retry", id, q.name(), e))?;
    let mode_name = match mode {
        RetryMode::Resume => "resume",
        RetryMode::FromStart => "from_start",
    };
    if ctx.json {
        return print_json(
            &json!({"job": id, "queue": q.name(), "attempt": attempt, "mode": mode_name, "state": JobState::Queued, "by": ctx.by}),
        );
    }
    let how = match mode {
        RetryMode::Resume => "resuming after the last completed step",
        RetryMode::FromStart => "from the first step",
    };
    println!("job {id} queued again as attempt {attempt}, {how}");
    Ok(())
}

async fn resolve(
    ctx: &Ctx,
    id: &JobId,
    queue: Option<&str>,
    state: JobState,
    reason: &str,
) -> Outcome {
    if reason.trim().is_empty() {
        return Err(Failure::Usage("--reason must not be empty".into()));
    }
    let q = ctx.locate(id, queue).await?;
    q.resolve(id, state, &ctx.by, reason)
        .await
        .map_err(|e| action_error(ctx, "resolve", id, q.name(), e))?;
    if ctx.json {
        return print_json(
            &json!({"job": id, "queue": q.name(), "state": state, "by": ctx.by, "reason": reason}),
        );
    }
    println!("job {id} resolved as {state}");
    Ok(())
}

fn new_job(
    args: &EnqueueArgs,
    spec: Option<&PipelineSpec>,
    input: String,
    key: Option<String>,
    resource: Option<String>,
) -> Outcome<NewJob> {
    serde_json::from_str::<serde::de::IgnoredAny>(&input)
        .map_err(|e| Failure::Usage(format!("the input is not JSON: {e}: {input}")))?;
    let mut job = NewJob::from_json(&args.pipeline, input);
    // the pipeline's own defaults, as its workers published them
    if let Some(spec) = spec {
        job = job
            .max_attempts(spec.max_attempts)
            .stale_lock(spec.stale_lock);
    }
    if let Some(k) = key {
        job = job.input_key(k);
    }
    if let Some(r) = resource {
        job = job.resource(r);
    }
    if let Some(p) = args.priority {
        job = job.priority(p);
    }
    if let Some(d) = args.delay {
        job = job.delay(d);
    }
    if let Some(n) = args.max_attempts {
        if n == 0 {
            return Err(Failure::Usage("--max-attempts must be at least 1".into()));
        }
        job = job.max_attempts(n);
    }
    Ok(job)
}

async fn enqueue(ctx: &Ctx, args: EnqueueArgs) -> Outcome {
    let queue_name = args.queue.clone().unwrap_or_else(|| args.pipeline.clone());
    let q = ctx.queue(&queue_name)?;
    let spec = q
        .pipeline_spec(&args.pipeline)
        .await
        .map_err(|e| ctx.fail(e))?;
    if spec.is_none() && args.max_attempts.is_none() {
        eprintln!(
            "note: no worker serving pipeline {} has registered it in queue {} yet: its jobs get max attempts 1 and the default STALE lock policy (use --max-attempts to choose)",
            args.pipeline,
            q.name()
        );
    }
    let spec = spec.as_ref();
    let Some(template) = &args.input_template else {
        let input = args.input.clone().unwrap_or_default();
        let job = new_job(
            &args,
            spec,
            input,
            args.input_key.clone(),
            args.resource.clone(),
        )?;
        let done = q.enqueue(job).await.map_err(|e| ctx.fail(e))?;
        if ctx.json {
            return print_json(
                &json!({"queue": q.name(), "pipeline": args.pipeline, "id": done.id, "created": done.created}),
            );
        }
        if done.created {
            println!("created job {} in queue {}", done.id, q.name());
        } else {
            println!(
                "job {} with the same input key is not finished yet; nothing created (queue {})",
                done.id,
                q.name()
            );
        }
        return Ok(());
    };
    // the range form (clap makes the four range options go together)
    let missing = || {
        Failure::Usage("the range form needs --from, --to, --step and --input-key-template".into())
    };
    let (from, to) = (args.from.ok_or_else(missing)?, args.to.ok_or_else(missing)?);
    let step = args.step.ok_or_else(missing)?;
    let key_template = args.input_key_template.clone().ok_or_else(missing)?;
    let windows = time::windows(from, to, step).map_err(Failure::Usage)?;
    let mut jobs = Vec::with_capacity(windows.len());
    for w in &windows {
        let key = time::render(&key_template, w);
        let resource = args.resource.as_deref().map(|r| time::render(r, w));
        jobs.push(new_job(
            &args,
            spec,
            time::render(template, w),
            Some(key),
            resource,
        )?);
    }
    let total = jobs.len();
    let (mut created, mut existing) = (0usize, 0usize);
    let mut listed = Vec::with_capacity(total);
    let mut windows_left = windows.iter();
    let mut done_count = 0usize;
    let mut rest = jobs;
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
            if reply.created {
                created += 1;
            } else {
                existing += 1;
            }
            let w = windows_left.next();
            listed.push(json!({
                "id": reply.id,
                "created": reply.created,
                "input_key": key,
                "from": w.map(|w| w.from.to_string()),
                "to": w.map(|w| w.to.to_string()),
            }));
            done_count += 1;
        }
        eprintln!("enqueued {done_count}/{total} windows ({created} created, {existing} existing)");
    }
    if ctx.json {
        return print_json(&json!({
            "queue": q.name(),
            "pipeline": args.pipeline,
            "windows": total,
            "created": created,
            "existing": existing,
            "jobs": listed,
        }));
    }
    println!(
        "{total} windows of {} from {from} to {to} in queue {}: {created} created, {existing} already enqueued (same input key)",
        args.pipeline,
        q.name()
    );
    Ok(())
}

async fn sweep(ctx: &Ctx, queue: Option<String>, dry_run: bool, batch: usize) -> Outcome {
    let mut reports = Vec::new();
    for name in ctx.queues(&one(queue)).await? {
        let q = ctx.queue(&name)?;
        let r = if dry_run {
            q.sweep_dry_run(batch).await
        } else {
            q.sweep(batch).await
        }
        .map_err(|e| ctx.fail(e))?;
        reports.push(json!({
            "queue": name,
            "dry_run": dry_run,
            "requeued": r.requeued,
            "cancelled": r.cancelled,
            "stale": r.stale,
            "unparked": r.unparked,
            "purged": r.purged,
            "moves": r.moves.iter().map(|m| json!({"job": m.job, "from": m.from, "to": m.to})).collect::<Vec<_>>(),
        }));
    }
    if ctx.json {
        return print_json(&reports);
    }
    if reports.is_empty() {
        println!("no queues found under prefix {:?}", ctx.config.prefix);
    }
    for r in &reports {
        println!(
            "{}{}: {} requeued, {} cancelled, {} STALE, {} unparked, {}",
            r["queue"].as_str().unwrap_or(""),
            if dry_run {
                " (dry run: nothing changed)"
            } else {
                ""
            },
            r["requeued"],
            r["cancelled"],
            r["stale"],
            r["unparked"],
            if dry_run {
                "retention not evaluated".to_owned()
            } else {
                format!("{} purged", r["purged"])
            }
        );
        for m in r["moves"].as_array().into_iter().flatten() {
            println!(
                "  {}  {} -> {}",
                m["job"].as_str().unwrap_or(""),
                m["from"].as_str().unwrap_or(""),
                m["to"].as_str().unwrap_or("")
            );
        }
    }
    Ok(())
}

async fn purge(ctx: &Ctx, queue: Option<String>, batch: usize) -> Outcome {
    let mut out = BTreeMap::new();
    for name in ctx.queues(&one(queue)).await? {
        let n = ctx
            .queue(&name)?
            .purge(batch)
            .await
            .map_err(|e| ctx.fail(e))?;
        out.insert(name, n);
    }
    let retention = &ctx.config.retention;
    if ctx.json {
        let rows: Vec<_> = out
            .iter()
            .map(|(q, n)| json!({"queue": q, "purged": n, "keep_count": retention.keep_count, "keep_age_ms": retention.keep_age.as_millis() as u64}))
            .collect();
        return print_json(&rows);
    }
    if out.is_empty() {
        println!("no queues found under prefix {:?}", ctx.config.prefix);
    }
    for (q, n) in &out {
        println!(
            "{q}: purged {n} terminal jobs beyond retention (keep {} jobs, at most {} old)",
            retention.keep_count,
            human_duration(retention.keep_age)
        );
    }
    Ok(())
}

impl Failure {
    /// The same failure with `extra` appended to its message.
    fn context(self, extra: &str) -> Failure {
        let add = |m: String| format!("{m} ({extra})");
        match self {
            Failure::Usage(m) => Failure::Usage(add(m)),
            Failure::UnknownJob(m) => Failure::UnknownJob(add(m)),
            Failure::Refused(m) => Failure::Refused(add(m)),
            Failure::Unreachable(m) => Failure::Unreachable(add(m)),
            Failure::Other(m) => Failure::Other(add(m)),
        }
    }
}
