//! `POST /api/queues/{queue}/pipelines/{pipeline}/jobs`: enqueue from anywhere
//! that speaks HTTP and JSON, under the pipeline's published contract (its
//! input's JSON Schema, its resource and input-key templates, its policies),
//! with the dashboard's token like every other state-changing action.
//!
//! The body is one job or a batch:
//!
//! ```text
//! {"input": {...}, "rerun": false, "priority": 5, "delay_ms": 60000, "max_attempts": 3, "id": "..."}
//! {"jobs": [{"input": {...}, ...}, ...], "rerun": false, "priority": 5, "delay_ms": 0, "max_attempts": 3}
//! ```
//!
//! In a batch the top-level `rerun`, `priority`, `delay_ms` and
//! `max_attempts` are defaults that a job's own value overrides; `id`,
//! `resource` and `input_key` belong to one job and are given inside it.
//! A `resource` or `input_key` given for a registered pipeline is taken when
//! the pipeline has no template for it and refused when it has one, the rule
//! of the CLI and the client (`jobs_from_json`, `Contract::computed_given`).
//! `"unregistered": true` (top level) enqueues for a pipeline no worker has
//! registered, with each job's `resource` and `input_key` taken as given.
//! `"group": "<name>"` and `"depends_on": ["<job id>", "group:<name>"]` (top
//! level) apply to every job of the request: they join the group (created and
//! open) and wait for those parents (which must exist).
//! Unknown fields are refused (a misspelt `rerun` must not be ignored).
//!
//! Every job is checked (and its keys computed) before the first write: a bad
//! job refuses the whole request, naming its index (`job`) and the JSON path of
//! the bad value (`field`). The answer is 201 when at least one job was
//! created, else 200. The enqueue script records each new job's `enqueue`
//! event, so no other event is written.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::DefaultBodyLimit;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use leasehold_core::json_jobs::JobProblem;
use leasehold_core::{
    discover_queues, jobs_from_json, BadJob, Contract, EnqueueStatus, Error, JobId, JsonJob,
    NewJob, Queue, Terms,
};
use serde::Serialize;
use serde_json::{json, Map, Value};

mod body;

use self::body::{core_message, items, parse, token_field, Item};
use super::auth::authorise;
use super::error::{ApiError, DashError};
use super::state::{App, Shared};

/// The route of the enqueue, with its larger body limit.
pub(super) fn routes() -> Router<Shared> {
    Router::new().route(
        "/api/queues/{queue}/pipelines/{pipeline}/jobs",
        post(enqueue).layer(DefaultBodyLimit::max(MAX_BODY)),
    )
}

/// Largest request body accepted (bigger: 413).
/// (the CLI's `--input @FILE` and `--input -` take the same).
pub(super) const MAX_BODY: usize = crate::input_arg::MAX_INPUT_BYTES;

/// What the enqueue did with one job.
#[derive(Debug, Serialize)]
pub(super) struct JobReply {
    /// The job's id (the existing job's, for `existing` and `succeeded`).
    pub id: JobId,
    /// `created`, `rerun`, `existing` or `succeeded`.
    pub status: EnqueueStatus,
    /// For a re-run: the input key's previous latest job.
    pub previous: Option<JobId>,
}

/// The answer to an enqueue.
#[derive(Debug, Serialize)]
pub(super) struct EnqueueReply {
    /// The queue.
    pub queue: String,
    /// The pipeline.
    pub pipeline: String,
    /// One entry per job asked for, in order.
    pub jobs: Vec<JobReply>,
    /// New jobs.
    pub created: usize,
    /// Jobs answered by a job with the same input key (or id) not finished yet.
    pub existing: usize,
    /// Jobs answered by the input key's SUCCEEDED job.
    pub succeeded: usize,
    /// New jobs linked to the key's previous job.
    pub rerun: usize,
    /// Whether the inputs were checked against the pipeline's published
    /// input schema.
    pub input_checked: bool,
    /// Why they were not (`"input not checked: pipeline X publishes no input
    /// schema"`), when they were not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A refused enqueue: a dashboard error, or one that names the bad part.
#[derive(Debug)]
pub(super) enum Refusal {
    /// As every other API failure.
    Dash(DashError),
    /// With details: `field` (JSON pointer), `problem`, `job` (index), ...
    Detailed {
        /// The status.
        status: StatusCode,
        /// The machine-readable kind.
        error: &'static str,
        /// For humans.
        message: String,
        /// The details.
        detail: Map<String, Value>,
    },
}

impl From<DashError> for Refusal {
    fn from(e: DashError) -> Self {
        Refusal::Dash(e)
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::Dash(e) => ApiError(e).into_response(),
            Refusal::Detailed {
                status,
                error,
                message,
                mut detail,
            } => {
                detail.insert("error".into(), json!(error));
                detail.insert("message".into(), json!(message));
                detail.insert("status".into(), json!(status.as_u16()));
                (status, Json(Value::Object(detail))).into_response()
            }
        }
    }
}

/// A refusal with `detail` (an object of extra fields).
pub(super) fn refusal(
    status: StatusCode,
    error: &'static str,
    message: String,
    detail: Value,
) -> Refusal {
    let detail = match detail {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    Refusal::Detailed {
        status,
        error,
        message,
        detail,
    }
}

/// 400 naming `field` (a JSON pointer into the request body).
pub(super) fn bad_field(field: &str, job: Option<usize>, message: String) -> Refusal {
    let mut detail = json!({ "field": field });
    if let Some(i) = job {
        detail["job"] = json!(i);
    }
    refusal(StatusCode::BAD_REQUEST, "bad_request", message, detail)
}

/// Job `i` of the request could not be made: 422 for
/// an input that does not fit the pipeline's schema or templates, 400 for a
/// bad option or a key the pipeline computes.
fn bad_job(app: &App, pipeline: &str, items: &[Item], bad: BadJob) -> Refusal {
    let i = bad.index;
    match bad.problem {
        JobProblem::Computed { key, .. } => leave_out(pipeline, items, i, key.field()),
        JobProblem::Job(Error::InvalidInput {
            pipeline,
            path,
            problem,
        }) => refusal(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_input",
            format!("job {i}: the input of pipeline {pipeline} is invalid at {path}: {problem}; nothing was enqueued"),
            json!({ "field": path, "problem": problem, "job": i }),
        ),
        JobProblem::Job(Error::InvalidArgument(m)) => refusal(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("job {i}: {m}; nothing was enqueued"),
            json!({ "job": i }),
        ),
        JobProblem::Job(other) => app.fail(other).into(),
    }
}

/// 400 for job `i` of a registered pipeline that gives its key `name`
/// (`resource`, `input_key`) although the pipeline's published template
/// computes it (without a template the value given is taken).
fn leave_out(pipeline: &str, items: &[Item], i: usize, name: &str) -> Refusal {
    let at = items
        .get(i)
        .map(|item| item.at.as_str())
        .unwrap_or_default();
    refusal(
        StatusCode::BAD_REQUEST,
        "bad_request",
        format!(
            "job {i}: pipeline {pipeline} computes its {name} from its input \
             (its published template): leave {name} out"
        ),
        json!({ "field": format!("{at}/{name}"), "job": i }),
    )
}

/// The queues other than `queue` in which a worker registered `pipeline`
/// (for the 404's hint; a failure to look only loses the hint). Looked up
/// afresh, not from the pages' cache: the hint matters most just after a
/// worker started.
async fn registered_elsewhere(app: &App, queue: &str, pipeline: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(queues) = discover_queues(app.base.pool(), &app.config).await else {
        return found;
    };
    for q in queues.into_iter().filter(|q| q != queue) {
        let Ok(client) = app.queue(&q) else { continue };
        if let Ok(Some(_)) = client.pipeline_spec(pipeline).await {
            found.push(q);
        }
    }
    found
}

/// The jobs of `items` under the contract `pipeline` published in `q`, or as
/// given when the request says the pipeline is unregistered.
async fn jobs_for(
    app: &App,
    q: &Queue,
    pipeline: &str,
    items: &[Item],
    unregistered: bool,
) -> Result<(Vec<NewJob>, Option<String>), Refusal> {
    let queue = q.name();
    let spec = q.pipeline_spec(pipeline).await.map_err(|e| app.fail(e))?;
    let Some(spec) = spec else {
        if !unregistered {
            let elsewhere = registered_elsewhere(app, queue, pipeline).await;
            let hint = if elsewhere.is_empty() {
                String::new()
            } else {
                format!(" (it is registered in queue {})", elsewhere.join(", "))
            };
            return Err(refusal(
                StatusCode::NOT_FOUND,
                "unregistered_pipeline",
                format!(
                    "pipeline {pipeline} is not registered in queue {queue}{hint}: no worker serving it \
                     has started there, so its input type, resource and input key are unknown; \
                     start a worker, or send \"unregistered\": true with each job's \"resource\" \
                     and \"input_key\" (both optional)"
                ),
                json!({ "pipeline": pipeline, "queue": queue, "registered_in": elsewhere }),
            ));
        }
        return built(app, pipeline, items, Terms::Unregistered(pipeline));
    };
    if unregistered {
        return Err(refusal(
            StatusCode::CONFLICT,
            "registered_pipeline",
            format!(
                "pipeline {pipeline} is registered in queue {queue}: its published contract \
                 builds its jobs (input schema, templates, policies); drop \"unregistered\""
            ),
            json!({ "pipeline": pipeline, "queue": queue }),
        ));
    }
    if let Some(own) = spec.queue.as_deref().filter(|own| *own != queue) {
        return Err(refusal(
            StatusCode::CONFLICT,
            "wrong_queue",
            format!(
                "pipeline {pipeline}'s spec sends its jobs to queue {own}, not {queue}: \
                 post to /api/queues/{own}/pipelines/{pipeline}/jobs"
            ),
            json!({ "pipeline": pipeline, "queue": queue, "spec_queue": own }),
        ));
    }
    let contract = Contract::new(spec).map_err(|e| DashError::Internal(core_message(e)))?;
    // a given resource or input key is judged by jobs_from_json, as for the
    // CLI and the client: refused only where the pipeline has a template
    built(app, pipeline, items, Terms::Published(&contract))
}

/// The jobs of `items` under `terms`, and why their inputs were not checked
/// (when they were not).
fn built(
    app: &App,
    pipeline: &str,
    items: &[Item],
    terms: Terms<'_>,
) -> Result<(Vec<NewJob>, Option<String>), Refusal> {
    let asked: Vec<JsonJob> = items
        .iter()
        .map(|item| JsonJob::new(item.input.clone(), item.options.clone()))
        .collect();
    let built = jobs_from_json(terms, &asked).map_err(|bad| bad_job(app, pipeline, items, bad))?;
    Ok((built.jobs, built.unchecked))
}

/// `POST /api/queues/{queue}/pipelines/{pipeline}/jobs`.
async fn enqueue(
    State(app): State<Shared>,
    Path((queue, pipeline)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<EnqueueReply>), Refusal> {
    let parsed = parse(&body);
    // the token first: nothing is said about the body or the pipeline without it
    let field = match &parsed {
        Ok(b) => b.token.clone(),
        Err(_) => token_field(&body),
    };
    authorise(&app, &headers, field.as_deref())?;
    let request = parsed?;
    let unregistered = request.unregistered;
    let group = request.group.clone();
    let mut parents = Vec::new();
    for (i, d) in request.depends_on.iter().flatten().enumerate() {
        let parent = d.parse::<leasehold_core::Dependency>();
        parents
            .push(parent.map_err(|e| bad_field(&format!("/depends_on/{i}"), None, e.to_string()))?);
    }
    let q = app.queue(&queue)?;
    let mut items = items(request, &queue)?;
    for item in &mut items {
        item.options.group.clone_from(&group);
        item.options.depends_on.clone_from(&parents);
    }
    let (jobs, note) = jobs_for(&app, &q, &pipeline, &items, unregistered).await?;
    let done = q.enqueue_bulk(jobs).await.map_err(|e| app.fail(e))?;
    let count = |s: EnqueueStatus| done.iter().filter(|e| e.status == s).count();
    let reply = EnqueueReply {
        created: count(EnqueueStatus::Created),
        existing: count(EnqueueStatus::Existing),
        succeeded: count(EnqueueStatus::Succeeded),
        rerun: count(EnqueueStatus::Rerun),
        input_checked: note.is_none(),
        note,
        queue,
        pipeline,
        jobs: done
            .into_iter()
            .map(|e| JobReply {
                id: e.id,
                status: e.status,
                previous: e.previous,
            })
            .collect(),
    };
    let status = if reply.created + reply.rerun > 0 {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(reply)))
}
