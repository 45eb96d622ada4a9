//! Enqueue validates everything before its first write: ids however they are
//! built (deserialisation included), names with control or format characters,
//! and the typed client's options land on the job as given.

mod support;

use std::time::Duration;

use leasehold::pipeline::{StepContext, StepError};
use leasehold::queue::{Client, JobId, NewJob, Queue, QueueConfig};
use leasehold::{pipeline, Error};
use leasehold::{schemars, JsonSchema};
use leasehold_testkit::RedisServer;
use serde::{Deserialize, Serialize};
use support::{connect, get};

/// Every key in the server.
fn dbsize(srv: &RedisServer) -> i64 {
    get(srv, &["DBSIZE"])
}

#[test]
fn a_bad_id_cannot_be_built_through_serde() {
    let long = "x".repeat(10 * 1024);
    for bad in [
        "{",
        "x}:job:y",
        "a b",
        "a\nb",
        "a\u{0}b",
        long.as_str(),
        "",
        "zero\u{200B}width",
        "bidi\u{202E}override",
    ] {
        let json = serde_json::to_string(bad).expect("a JSON string");
        let err = serde_json::from_str::<JobId>(&json).expect_err(bad);
        assert!(err.to_string().contains("not a job id"), "{bad:?}: {err}");
        // inside a larger document too (a request body, a stored spec)
        let doc = format!("{{\"id\":{json}}}");
        #[derive(Deserialize)]
        #[allow(dead_code)]
        struct Body {
            id: JobId,
        }
        assert!(serde_json::from_str::<Body>(&doc).is_err(), "{bad:?}");
    }
}

#[tokio::test]
async fn names_with_format_characters_are_refused_and_nothing_is_written() {
    let srv = RedisServer::start();
    let q = connect(&srv, "names").await;
    let before = dbsize(&srv);
    for (what, job) in [
        ("pipeline", NewJob::from_json("orders\u{200B}", "{}")),
        ("pipeline", NewJob::from_json("orders\u{202E}", "{}")),
        (
            "resource",
            NewJob::from_json("orders", "{}").resource("shop\u{200B}a"),
        ),
    ] {
        let err = q.enqueue(job).await.expect_err(what);
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("format characters")),
            "{what}: {err}"
        );
    }
    // one bad job in a bulk call: none of the good ones is written either
    let err = q
        .enqueue_bulk(vec![
            NewJob::from_json("orders", "{}"),
            NewJob::from_json("orders", "{}").resource("a\u{2066}b"),
        ])
        .await
        .expect_err("a bad resource in the batch");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(dbsize(&srv), before, "a refused enqueue wrote something");
    // queue names follow the same rule, before any connection is used
    for bad in ["orders\u{200B}", "orders\u{202E}", &"q".repeat(201)] {
        let err = Queue::with_pool(q.pool().clone(), bad, QueueConfig::default())
            .expect_err("a bad queue name");
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }
    // the limit is in bytes: 100 two-byte characters fit, 101 do not
    assert!(Queue::with_pool(q.pool().clone(), &"é".repeat(100), QueueConfig::default()).is_ok());
    assert!(Queue::with_pool(q.pool().clone(), &"é".repeat(101), QueueConfig::default()).is_err());
}

// no `#[schemars(crate = ...)]` line: `schemars` is in scope from the import
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Window {
    shop: String,
    hour: u32,
}

#[derive(Clone)]
struct Sync;

#[pipeline(
    name = "sync",
    queue = "typed",
    max_attempts = 3,
    input_key = "{shop}:{hour}",
    resource = "shop:{shop}"
)]
impl Sync {
    #[step]
    async fn load(&self, _ctx: &StepContext, _input: &Window) -> Result<(), StepError> {
        Ok(())
    }
}

#[tokio::test]
async fn the_typed_client_takes_delay_priority_attempts_and_an_id() {
    let srv = RedisServer::start();
    let client = Client::connect(&srv.url(), QueueConfig::default())
        .await
        .expect("client");
    let id = JobId::parse("backfill-a-7").expect("an id");
    let input = Window {
        shop: "a".into(),
        hour: 7,
    };
    let done = client
        .enqueue_with::<Sync>(&input)
        .delay(Duration::from_secs(60))
        .priority(9)
        .max_attempts(5)
        .id(id.clone())
        .send()
        .await
        .expect("enqueue");
    assert_eq!(done.id, id);
    assert!(done.created);
    let key = client
        .queue_for::<Sync>()
        .expect("queue")
        .keys()
        .job(id.as_str());
    let field = |f: &str| -> String { get(&srv, &["HGET", &key, f]) };
    assert_eq!(field("priority"), "9");
    assert_eq!(field("max_attempts"), "5");
    assert_eq!(field("input_key"), "a:7");
    let created: i64 = field("created_at").parse().expect("created_at");
    let not_before: i64 = field("not_before").parse().expect("not_before");
    assert_eq!(
        not_before - created,
        60_000,
        "the delay counts on Redis's clock"
    );
    let delayed = client
        .queue_for::<Sync>()
        .expect("queue")
        .keys()
        .delayed("sync");
    assert_eq!(get::<i64>(&srv, &["ZCARD", &delayed]), 1);

    // not_before in the past is no delay at all; the pipeline's own max attempts apply
    let now = client
        .enqueue_with::<Sync>(&Window {
            shop: "b".into(),
            hour: 1,
        })
        .not_before(std::time::SystemTime::UNIX_EPOCH)
        .send()
        .await
        .expect("enqueue");
    let q = client.queue_for::<Sync>().expect("queue");
    let key = q.keys().job(now.id.as_str());
    // read as a job: a not-before equal to the creation time may be left out of the hash
    let job = q.job(&now.id).await.expect("read").expect("the job");
    assert_eq!(job.not_before, job.created_at);
    assert_eq!(get::<String>(&srv, &["HGET", &key, "max_attempts"]), "3");
}

/// An input whose pipeline opts out of publishing a schema
/// (`input_schema = false`): the spec says so and enqueues check JSON only.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Plain {
    n: u32,
}

#[derive(Clone)]
struct Loose;

#[pipeline(name = "loose", queue = "typed", input_schema = false)]
impl Loose {
    #[step]
    async fn only(&self, _ctx: &StepContext, _input: &Plain) -> Result<(), StepError> {
        Ok(())
    }
}

#[test]
fn the_published_spec_carries_queue_templates_schema_and_a_version() {
    let spec = leasehold::pipeline::spec_of::<Sync>();
    assert_eq!(spec.queue.as_deref(), Some("typed"));
    assert_eq!(spec.resource_template.as_deref(), Some("shop:{shop}"));
    assert_eq!(spec.input_key_template.as_deref(), Some("{shop}:{hour}"));
    let schema = spec
        .input_schema
        .as_ref()
        .expect("Window derives JsonSchema");
    assert_eq!(schema["properties"]["hour"]["type"], "integer", "{schema}");
    assert_eq!(spec.version, spec.digest());
    assert_eq!(spec.version.len(), 16);
    let loose = leasehold::pipeline::spec_of::<Loose>();
    assert_eq!(loose.input_schema, None);
    assert_ne!(loose.version, spec.version);
}

#[tokio::test]
async fn enqueue_json_applies_the_published_contract() {
    let srv = RedisServer::start();
    let client = Client::connect(&srv.url(), QueueConfig::default())
        .await
        .expect("client");
    let opts = leasehold::queue::EnqueueOptions::new();
    // nothing registered yet: refused, nothing written
    let err = client
        .enqueue_json("sync", r#"{"shop":"a","hour":1}"#, &opts)
        .await
        .expect_err("unregistered");
    assert!(matches!(err, Error::UnregisteredPipeline { .. }), "{err}");
    assert_eq!(dbsize(&srv), 0);

    let q = client.queue_for::<Sync>().expect("queue");
    q.register_pipeline(&leasehold::pipeline::spec_of::<Sync>())
        .await
        .expect("register");
    // the queue is found from the spec; resource and key from the templates
    let done = client
        .enqueue_json("sync", r#"{"shop":"a","hour":1}"#, &opts)
        .await
        .expect("enqueue");
    let job = q.job(&done.id).await.expect("read").expect("a job");
    assert_eq!(job.resource.as_deref(), Some("shop:a"));
    assert_eq!(job.input_key.as_deref(), Some("a:1"));
    assert_eq!(job.max_attempts, 3);
    // the same key again: the same job
    let again = client
        .enqueue_json("sync", r#"{"shop":"a","hour":1}"#, &opts)
        .await
        .expect("enqueue");
    assert_eq!(again.id, done.id);
    // a wrong shape is refused with its JSON path, and nothing is written
    let keys = dbsize(&srv);
    for (bad, path) in [
        (r#"{"shop":"a","hour":"one"}"#, "/hour"),
        (r#"{"shop":"a"}"#, "/"),
        (r#"{"shop":7,"hour":1}"#, "/shop"),
        ("not json", "/"),
    ] {
        let err = client
            .enqueue_json("sync", bad, &opts)
            .await
            .expect_err(bad);
        assert!(
            matches!(&err, Error::InvalidInput { path: p, .. } if p == path),
            "{bad}: {err}"
        );
    }
    assert_eq!(dbsize(&srv), keys);
    // an unregistered pipeline with everything given explicitly
    let mut explicit = leasehold::queue::EnqueueOptions::new();
    explicit.unregistered = true;
    explicit.queue = Some("elsewhere".into());
    explicit.resource = Some("r1".into());
    explicit.input_key = Some("k1".into());
    let done = client
        .enqueue_json("adhoc", r#"{"any":"thing"}"#, &explicit)
        .await
        .expect("explicit");
    let job = client
        .queue("elsewhere")
        .expect("queue")
        .job(&done.id)
        .await
        .expect("read")
        .expect("a job");
    assert_eq!(
        (job.resource.as_deref(), job.input_key.as_deref()),
        (Some("r1"), Some("k1"))
    );
}

/// The key templates are parsed twice, by `#[pipeline]` (into typed code) and by
/// the contract (over JSON): both give the same resource and input key.
#[test]
fn the_contract_renders_the_keys_the_typed_code_computes() {
    use leasehold::pipeline::Pipeline;
    let contract =
        leasehold::queue::Contract::new(leasehold::pipeline::spec_of::<Sync>()).expect("contract");
    for input in [
        Window {
            shop: "a".into(),
            hour: 7,
        },
        Window {
            shop: "shop with {braces}".into(),
            hour: 0,
        },
    ] {
        let json = serde_json::to_string(&input).expect("json");
        let job = contract
            .job(&json, &leasehold::queue::EnqueueOptions::new())
            .expect("the contract accepts what the type serialises");
        assert_eq!(job.input_key, Sync::input_key(&input));
        assert_eq!(job.resource, Sync::resource_key(&input));
    }
}

/// A W3C traceparent for the trace-context tests.
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[tokio::test]
async fn a_trace_context_is_stored_only_when_given_and_reaches_the_lease() {
    let srv = RedisServer::start();
    let q = connect(&srv, "traced").await;
    let traced = support::enqueue(&q, support::job("p", 1).traceparent(TRACEPARENT)).await;
    let plain = support::enqueue(&q, support::job("p", 2)).await;
    let field = |id: &JobId| -> Option<String> {
        get(&srv, &["HGET", &q.keys().job(id.as_str()), "trace"])
    };
    assert_eq!(field(&traced).as_deref(), Some(TRACEPARENT));
    assert_eq!(field(&plain), None, "a plain job has no trace field");
    let first = support::lease_one(&q, "w", "p").await;
    let second = support::lease_one(&q, "w", "p").await;
    assert_eq!(first.job, traced);
    assert_eq!(first.traceparent.as_deref(), Some(TRACEPARENT));
    assert_eq!(second.job, plain);
    assert_eq!(second.traceparent, None);
}

#[tokio::test]
async fn a_malformed_trace_context_is_refused_before_any_write() {
    let srv = RedisServer::start();
    let q = connect(&srv, "traced").await;
    let before = dbsize(&srv);
    for bad in [
        "",
        "not a traceparent",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
    ] {
        let err = q
            .enqueue(support::job("p", 1).traceparent(bad))
            .await
            .expect_err(bad);
        assert!(
            matches!(&err, Error::InvalidArgument(why) if why.contains("traceparent")),
            "{bad:?}: {err:?}"
        );
    }
    assert_eq!(dbsize(&srv), before, "nothing was written");
}
