//! The request body of an enqueue: its shape (one job or a batch, unknown
//! fields refused), parsed with the JSON pointer of whatever does not fit, and
//! turned into one input and [`EnqueueOptions`] per job, the batch's defaults
//! applied.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use leasehold_core::{EnqueueOptions, Error, JobId};
use serde::{Deserialize, Deserializer};
use serde_json::{json, Value};

use super::{bad_field, refusal, Refusal, MAX_BODY};

/// Keeps an explicit `null` apart from a missing field.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// One job of a request.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobBody {
    /// The pipeline's input.
    #[serde(default, deserialize_with = "present")]
    input: Option<Value>,
    /// Create a new job even when the input key's latest job SUCCEEDED.
    rerun: Option<bool>,
    /// Higher runs first (0 to 255).
    priority: Option<u8>,
    /// Not leased before this many milliseconds have passed.
    delay_ms: Option<u64>,
    /// Overrides the pipeline's max attempts.
    max_attempts: Option<u32>,
    /// The job's id.
    id: Option<String>,
    /// The resource (a registered pipeline with a resource template computes it).
    resource: Option<String>,
    /// The input key (a registered pipeline with an input-key template computes it).
    input_key: Option<String>,
}

/// The request body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RequestBody {
    /// One job: its input.
    #[serde(default, deserialize_with = "present")]
    input: Option<Value>,
    /// A batch.
    jobs: Option<Vec<JobBody>>,
    /// One job's, or the batch's default.
    rerun: Option<bool>,
    /// One job's, or the batch's default.
    priority: Option<u8>,
    /// One job's, or the batch's default.
    delay_ms: Option<u64>,
    /// One job's, or the batch's default.
    max_attempts: Option<u32>,
    /// One job's id.
    id: Option<String>,
    /// One job's resource (a registered pipeline with a resource template computes it).
    resource: Option<String>,
    /// One job's input key (a registered pipeline with an input-key template computes it).
    input_key: Option<String>,
    /// The pipeline has no published spec: take resource and input key as given.
    #[serde(default)]
    pub(super) unregistered: bool,
    /// The group every job of the request joins (it must exist and be open).
    pub(super) group: Option<String>,
    /// Parents every job of the request waits for: job ids, or `group:<name>`.
    pub(super) depends_on: Option<Vec<String>>,
    /// The token, when not in `Authorization`.
    pub(super) token: Option<String>,
}

/// `segment` escaped for a JSON pointer.
fn pointer_segment(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// The JSON pointer of a deserialisation error's path (`/jobs/3/priority`).
fn pointer(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("/{index}")),
            Segment::Map { key } => out.push_str(&format!("/{}", pointer_segment(key))),
            Segment::Enum { variant } => out.push_str(&format!("/{}", pointer_segment(variant))),
            Segment::Unknown => out.push_str("/?"),
        }
    }
    if out.is_empty() {
        "/".into()
    } else {
        out
    }
}

/// The body parsed, or the 400/413 saying what is wrong with it.
pub(super) fn parse(body: &Result<Bytes, BytesRejection>) -> Result<RequestBody, Refusal> {
    let bytes = body.as_ref().map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            refusal(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!(
                    "the request body is larger than {} MiB: send the batch in smaller parts",
                    MAX_BODY / (1024 * 1024)
                ),
                json!({ "limit_bytes": MAX_BODY }),
            )
        } else {
            bad_field(
                "/",
                None,
                format!("the request body could not be read: {r}"),
            )
        }
    })?;
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let body: RequestBody = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
        let field = pointer(e.path());
        let inner = e.into_inner();
        let message = if inner.is_data() {
            format!("the request body does not fit at {field}: {inner}")
        } else {
            format!("the request body is not JSON: {inner}")
        };
        bad_field(&field, None, message)
    })?;
    de.end().map_err(|e| {
        bad_field(
            "/",
            None,
            format!("the request body is not JSON: {e} (after the object)"),
        )
    })?;
    Ok(body)
}

/// The token field of a body that did not parse as a request (so that a
/// wrong-typed option is answered 400, not 401, when the token is in the body).
pub(super) fn token_field(body: &Result<Bytes, BytesRejection>) -> Option<String> {
    let bytes = body.as_ref().ok()?;
    let v: Value = serde_json::from_slice(bytes).ok()?;
    v.get("token")?.as_str().map(str::to_owned)
}

/// A job asked for: its input (JSON text) and options, before the contract.
pub(super) struct Item {
    /// The JSON pointer of the job in the body (empty, or `/jobs/3`).
    pub(super) at: String,
    /// The input, as JSON text.
    pub(super) input: String,
    /// The options, the batch's defaults applied.
    pub(super) options: EnqueueOptions,
}

/// The jobs of `body` for `queue`: one, or the batch with its defaults applied.
pub(super) fn items(body: RequestBody, queue: &str) -> Result<Vec<Item>, Refusal> {
    let defaults = JobBody {
        input: None,
        rerun: body.rerun,
        priority: body.priority,
        delay_ms: body.delay_ms,
        max_attempts: body.max_attempts,
        id: None,
        resource: None,
        input_key: None,
    };
    let (jobs, batch) =
        match (body.input, body.jobs) {
            (Some(_), Some(_)) => {
                return Err(bad_field(
                    "/jobs",
                    None,
                    "give either input (one job) or jobs (a batch), not both".into(),
                ))
            }
            (None, None) => return Err(bad_field(
                "/input",
                None,
                "the body names no job: give input (one job) or jobs (a batch of {\"input\": ...})"
                    .into(),
            )),
            (Some(input), None) => {
                let one = JobBody {
                    input: Some(input),
                    id: body.id,
                    resource: body.resource,
                    input_key: body.input_key,
                    ..defaults
                };
                (vec![one], false)
            }
            (None, Some(jobs)) => {
                for (name, given) in [
                    ("id", body.id.is_some()),
                    ("resource", body.resource.is_some()),
                    ("input_key", body.input_key.is_some()),
                ] {
                    if given {
                        return Err(bad_field(
                            &format!("/{name}"),
                            None,
                            format!("{name} belongs to one job: give it inside each job of jobs"),
                        ));
                    }
                }
                if jobs.is_empty() {
                    return Err(bad_field(
                        "/jobs",
                        None,
                        "jobs is empty: nothing to enqueue".into(),
                    ));
                }
                (jobs, true)
            }
        };
    let unregistered = body.unregistered;
    jobs.into_iter()
        .enumerate()
        .map(|(i, job)| {
            let base = if batch {
                format!("/jobs/{i}")
            } else {
                String::new()
            };
            let at = |name: &str| format!("{base}/{name}");
            let Some(input) = job.input else {
                return Err(bad_field(
                    &at("input"),
                    Some(i),
                    format!("job {i} has no input"),
                ));
            };
            let mut options = EnqueueOptions::new();
            options.queue = Some(queue.to_owned());
            options.rerun = job.rerun.or(defaults.rerun).unwrap_or(false);
            options.priority = job.priority.or(defaults.priority);
            options.delay = job
                .delay_ms
                .or(defaults.delay_ms)
                .map(Duration::from_millis);
            options.max_attempts = job.max_attempts.or(defaults.max_attempts);
            options.id = match job.id {
                None => None,
                Some(id) => Some(JobId::parse(&id).map_err(|e| {
                    bad_field(&at("id"), Some(i), format!("job {i}: {}", core_message(e)))
                })?),
            };
            options.resource = job.resource;
            options.input_key = job.input_key;
            options.unregistered = unregistered;
            Ok(Item {
                at: base.clone(),
                input: input.to_string(),
                options,
            })
        })
        .collect()
}

/// A core error's message without the `invalid argument: ` lead.
pub(super) fn core_message(e: Error) -> String {
    match e {
        Error::InvalidArgument(m) => m,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<RequestBody, Value> {
        parse(&Ok(Bytes::from(text.to_owned()))).map_err(|r| match r {
            Refusal::Detailed { detail, .. } => Value::Object(detail),
            Refusal::Dash(e) => json!({ "dash": e.message() }),
        })
    }

    #[test]
    fn a_wrong_typed_option_names_its_json_pointer() {
        let e = parsed(r#"{"jobs": [{"input": {}}, {"input": {}, "priority": 300}]}"#).unwrap_err();
        assert_eq!(e["field"], "/jobs/1/priority");
        let e = parsed(r#"{"input": {}, "rerrun": true}"#).unwrap_err();
        assert!(e["field"].as_str().unwrap().contains("rerrun"), "{e}");
        let e = parsed(r#"{"input": {"a": "#).unwrap_err();
        assert_eq!(e["field"].as_str().map(|f| f.starts_with('/')), Some(true));
        assert!(parsed(r#"{"input": null}"#).unwrap().input.is_some());
        assert!(parsed(r#"{"input": 1} trailing"#).is_err());
    }

    #[test]
    fn batch_defaults_yield_to_each_jobs_own_value() {
        let body = parsed(
            r#"{"jobs": [{"input": 1}, {"input": 2, "priority": 9, "rerun": false}], "priority": 5, "rerun": true, "delay_ms": 1000}"#,
        )
        .unwrap();
        let items = items(body, "q").unwrap();
        assert_eq!(items[0].options.priority, Some(5));
        assert!(items[0].options.rerun);
        assert_eq!(items[1].options.priority, Some(9));
        assert!(!items[1].options.rerun);
        assert_eq!(items[1].options.delay, Some(Duration::from_secs(1)));
        assert_eq!(items[1].input, "2");
    }

    #[test]
    fn one_jobs_fields_are_refused_at_batch_level() {
        let body = parsed(r#"{"jobs": [{"input": 1}], "id": "x"}"#).unwrap();
        assert!(items(body, "q").is_err());
        let body = parsed(r#"{"jobs": []}"#).unwrap();
        assert!(items(body, "q").is_err());
        let body = parsed(r#"{"priority": 1}"#).unwrap();
        assert!(items(body, "q").is_err());
    }
}
