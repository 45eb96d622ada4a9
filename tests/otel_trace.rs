//! With the `otel` feature (`cargo test -p leasehold --features otel --test
//! otel_trace`): a job enqueued inside a span carries that span's W3C trace
//! context into Redis, and the worker's `job` span is its child, so the job's
//! `step` spans have the enqueuer's trace id; a job enqueued outside any span
//! stores no `trace` field. Spans are collected by an in-memory exporter.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold::otel::opentelemetry::trace::{TraceContextExt as _, TraceId, TracerProvider as _};
use leasehold::otel::opentelemetry_sdk::error::OTelSdkResult;
use leasehold::otel::opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use leasehold::otel::tracing_opentelemetry::{self, OpenTelemetrySpanExt as _};
use leasehold::prelude::*;
use leasehold::queue::Queue;
use leasehold::redis::AsyncCommands as _;
use leasehold_testkit::RedisServer;
use tracing::Instrument as _;
use tracing_subscriber::layer::SubscriberExt as _;

/// Keeps every exported span.
#[derive(Debug, Clone, Default)]
struct Collected(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Collected {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().expect("the span list").extend(batch);
        Ok(())
    }
}

impl Collected {
    fn named(&self, name: &str) -> Vec<SpanData> {
        let spans = self.0.lock().expect("the span list");
        spans.iter().filter(|s| s.name == name).cloned().collect()
    }
}

struct Traced;

#[pipeline(queue = "traced")]
impl Traced {
    #[step]
    async fn fetch(&self, _ctx: &StepContext, n: &u32) -> Result<u32, StepError> {
        Ok(n + 1)
    }

    #[step]
    async fn load(&self, _ctx: &StepContext, n: u32) -> Result<u32, StepError> {
        Ok(n * 2)
    }
}

async fn wait_done(queue: &Queue, id: &JobId) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let job = queue.job(id).await.expect("read").expect("the job");
        if job.state.is_terminal() {
            assert_eq!(job.state, JobState::Succeeded);
            return;
        }
        assert!(
            Instant::now() < deadline,
            "job {id} did not end: {:?}",
            job.state
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_spans_join_the_enqueuers_trace() {
    let spans = Collected::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(spans.clone())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
        .expect("the only subscriber of this test binary");

    let redis = RedisServer::start();
    let url = redis.url();
    let client = Client::connect(&url, QueueConfig::default()).await.unwrap();
    let queue = client.queue_for::<Traced>().unwrap();

    // enqueued inside a request's span: the job carries its context
    let request = tracing::info_span!("request");
    let enqueuer_trace: TraceId = request.context().span().span_context().trace_id();
    let enqueuer_span = request.context().span().span_context().span_id();
    assert_ne!(enqueuer_trace, TraceId::INVALID, "the layer records spans");
    let traced = async { client.enqueue::<Traced>(&1).await.unwrap() }
        .instrument(request)
        .await;
    // enqueued outside any span: a plain job, no field
    let plain = client.enqueue::<Traced>(&2).await.unwrap();

    let mut redis_conn = leasehold::redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let stored: Option<String> = redis_conn
        .hget(queue.keys().job(traced.id.as_str()), "trace")
        .await
        .unwrap();
    let stored = stored.expect("the traced job has a trace field");
    assert!(stored.contains(&enqueuer_trace.to_string()), "{stored}");
    let none: bool = redis_conn
        .hexists(queue.keys().job(plain.id.as_str()), "trace")
        .await
        .unwrap();
    assert!(!none, "a plain job stores no trace field");

    let worker = Worker::builder(url.as_str())
        .pipeline(Traced)
        .concurrency(1)
        .build()
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    wait_done(&queue, &traced.id).await;
    wait_done(&queue, &plain.id).await;
    let _ = stop.send(());
    running.await.unwrap().unwrap();
    provider.force_flush().unwrap();

    // the traced job's span is a child of the request span, and its steps
    // are in the request's trace; the plain job's are in a trace of their own
    let deadline = Instant::now() + Duration::from_secs(30);
    while spans.named("job").len() < 2 || spans.named("step").len() < 4 {
        assert!(Instant::now() < deadline, "spans were exported");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let jobs = spans.named("job");
    let joined: Vec<&SpanData> = jobs
        .iter()
        .filter(|s| s.span_context.trace_id() == enqueuer_trace)
        .collect();
    assert_eq!(joined.len(), 1, "one job span in the request's trace");
    assert_eq!(joined[0].parent_span_id, enqueuer_span);
    assert!(joined[0].parent_span_is_remote);
    let steps = spans.named("step");
    let in_trace = steps
        .iter()
        .filter(|s| s.span_context.trace_id() == enqueuer_trace)
        .count();
    assert_eq!(in_trace, 2, "both steps of the traced job: {steps:#?}");
    assert_eq!(steps.len(), 4);
}
