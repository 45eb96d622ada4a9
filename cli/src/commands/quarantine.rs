//! The quarantine: `quarantine list` (and `jobs --state quarantined`),
//! `quarantine repair` (re-validate and requeue) and `quarantine purge`
//! (delete), through the quarantine scripts (each recorded as an event by
//! `--by`).

use leasehold_core::{Error, JobId, QuarantineEntry};
use serde::Serialize;
use serde_json::json;

use super::print_json;
use crate::context::Ctx;
use crate::failure::{Failure, Outcome};
use crate::render;

/// A quarantined job with its queue, as `--json` prints it.
#[derive(Serialize)]
struct Listed<'a> {
    queue: &'a str,
    #[serde(flatten)]
    entry: &'a QuarantineEntry,
}

/// `quarantine list` and `jobs --state quarantined`.
pub(crate) async fn list(ctx: &Ctx, queues: &[String]) -> Outcome {
    let mut rows = Vec::new();
    for q in ctx.queues(queues).await? {
        let queue = ctx.queue(&q)?;
        for e in queue.quarantined().await.map_err(|e| ctx.fail(e))? {
            rows.push((q.clone(), e));
        }
    }
    if ctx.json {
        let listed: Vec<Listed<'_>> = rows
            .iter()
            .map(|(queue, entry)| Listed { queue, entry })
            .collect();
        return print_json(&listed);
    }
    outp!("{}", render::quarantine(&rows));
    Ok(())
}

/// A quarantine action's error in the operator's words.
fn action_error(ctx: &Ctx, op: &str, id: &JobId, queue: &str, e: Error) -> Failure {
    match e {
        Error::Corrupt { field, problem, .. } => Failure::Refused(format!(
            "cannot {op} job {id} in queue {queue}: field {field} {problem}"
        )),
        Error::InvalidArgument(m) => Failure::Refused(format!("cannot {op}: {m}")),
        other => ctx.fail(other),
    }
}

/// `quarantine repair`.
pub(crate) async fn repair(ctx: &Ctx, id: &JobId, queue: Option<&str>) -> Outcome {
    let q = ctx.locate(id, queue).await?;
    let pipeline = q
        .repair_quarantined(id, &ctx.by)
        .await
        .map_err(|e| action_error(ctx, "repair", id, q.name(), e))?;
    if ctx.json {
        return print_json(
            &json!({"job": id, "queue": q.name(), "pipeline": pipeline, "state": "QUEUED", "by": ctx.by}),
        );
    }
    outln!("job {id} repaired: QUEUED again in the ready set of pipeline {pipeline}");
    Ok(())
}

/// `quarantine purge`.
pub(crate) async fn purge(ctx: &Ctx, id: &JobId, queue: Option<&str>) -> Outcome {
    let q = ctx.locate(id, queue).await?;
    q.purge_quarantined(id, &ctx.by)
        .await
        .map_err(|e| action_error(ctx, "purge", id, q.name(), e))?;
    if ctx.json {
        return print_json(&json!({"job": id, "queue": q.name(), "purged": true, "by": ctx.by}));
    }
    outln!("job {id} deleted from queue {}", q.name());
    Ok(())
}
