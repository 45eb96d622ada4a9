//! `enqueue`: one job, or one job per time window of a range (a backfill),
//! with the pipeline's published defaults.

use leasehold_core::{NewJob, PipelineSpec};
use serde_json::json;

use super::print_json;
use crate::context::Ctx;
use crate::time;
use crate::{EnqueueArgs, Failure, Outcome};

/// Jobs per `enqueue_bulk` call of a backfill (one progress line each).
const ENQUEUE_CHUNK: usize = 500;

/// The job `args` describe, with this input, key and resource.
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

/// `enqueue`.
pub(crate) async fn enqueue(ctx: &Ctx, args: EnqueueArgs) -> Outcome {
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
