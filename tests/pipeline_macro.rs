//! `#[pipeline]` end to end, without Redis: the generated `Pipeline` impl runs
//! its steps, passing outputs from step to step as JSON.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use leasehold::pipeline;
use leasehold::pipeline::{
    queue_of, CleanupContext, CleanupReason, Pipeline, RetryPolicy, StepContext, StepError, Steps,
    UnknownStep,
};
use leasehold::queue::{JobId, StaleLock};
use leasehold::{schemars, JsonSchema};
use serde::{Deserialize, Serialize};

/// The input window of the test pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Window {
    shop_id: String,
    hour: u32,
    fail: Option<String>,
}

/// One generated order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Order {
    id: u64,
    cents: i64,
}

/// A user error type: any `std::error::Error` converts into a retryable `StepError`.
#[derive(Debug)]
pub struct LoadError(String);

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "load failed: {}", self.0)
    }
}

impl std::error::Error for LoadError {}

/// The test pipeline.
#[derive(Default)]
pub struct OrdersSync {
    loads: AtomicU32,
    cleaned: Mutex<Vec<String>>,
}

#[pipeline(
    name = "orders_sync",
    queue = "orders",
    resource = "shop:{shop_id}",
    input_key = "orders:{shop_id}:{hour}",
    lease_ttl = "30s",
    max_attempts = 4,
    backoff = "2s",
    max_backoff = "1m",
    jitter = 0.1,
    on_stale = "release"
)]
impl OrdersSync {
    #[step(timeout = "60s")]
    async fn fetch(&self, ctx: &StepContext, input: &Window) -> Result<Vec<Order>, StepError> {
        ctx.check_cancelled()?;
        if input.fail.as_deref() == Some("fetch") {
            return Err(StepError::retryable("source unavailable").with_kind("source"));
        }
        Ok(vec![
            Order { id: 1, cents: 250 },
            Order { id: 2, cents: -100 },
            Order { id: 3, cents: 700 },
        ])
    }

    #[step(retry(max_attempts = 5, backoff = "500ms"))]
    async fn validate(
        &self,
        _ctx: &StepContext,
        orders: Vec<Order>,
    ) -> Result<Vec<Order>, StepError> {
        if orders.is_empty() {
            return Err(StepError::permanent("no orders"));
        }
        Ok(orders.into_iter().filter(|o| o.cents > 0).collect())
    }

    #[step]
    async fn load(
        &self,
        _ctx: &StepContext,
        input: &Window,
        orders: Vec<Order>,
    ) -> Result<u64, LoadError> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        if input.fail.as_deref() == Some("load") {
            return Err(LoadError("sink refused".into()));
        }
        Ok(orders.iter().map(|o| o.cents as u64).sum())
    }

    #[step]
    async fn aggregate(&self, _ctx: &StepContext, loaded: u64) -> Result<(), StepError> {
        if loaded == 0 {
            return Err(StepError::permanent("nothing loaded").with_kind("empty"));
        }
        Ok(())
    }

    #[cleanup]
    async fn on_cleanup(&self, ctx: &CleanupContext, input: &Window) {
        self.cleaned.lock().unwrap().push(format!(
            "{}:{}",
            input.shop_id,
            ctx.last_completed_step.unwrap_or("-")
        ));
    }

    /// Unmarked methods stay as they are.
    fn loads(&self) -> u32 {
        self.loads.load(Ordering::SeqCst)
    }
}

fn window(fail: Option<&str>) -> Window {
    Window {
        shop_id: "shop-a".into(),
        hour: 7,
        fail: fail.map(Into::into),
    }
}

fn ctx(step: &'static str) -> StepContext {
    StepContext::detached(JobId::new(), 1, 1, step)
}

/// Runs every step in order, as a worker would, returning each output.
async fn run_all(p: &OrdersSync, input: &Window) -> Result<Vec<String>, (usize, StepError)> {
    let mut outputs: Vec<String> = Vec::new();
    for step in OrdersSyncStep::ALL {
        let i = step.index();
        let ctx = ctx(step.name());
        let previous = outputs.last().map(String::as_str);
        let output = p
            .run_step(i, &ctx, input, previous)
            .await
            .map_err(|e| (i, e))?;
        outputs.push(output);
    }
    Ok(outputs)
}

#[tokio::test]
async fn outputs_flow_from_step_to_step_as_json() {
    let p = OrdersSync::default();
    let outputs = run_all(&p, &window(None)).await.unwrap();
    assert_eq!(
        outputs,
        vec![
            r#"[{"id":1,"cents":250},{"id":2,"cents":-100},{"id":3,"cents":700}]"#.to_string(),
            r#"[{"id":1,"cents":250},{"id":3,"cents":700}]"#.to_string(),
            "950".to_string(),
            "null".to_string(),
        ]
    );
    assert_eq!(p.loads(), 1);
}

#[tokio::test]
async fn a_step_runs_alone_from_a_stored_output() {
    // A resumed attempt starts after the last completed step, from its checkpoint.
    let p = OrdersSync::default();
    let out = p
        .run_step(
            2,
            &ctx("load"),
            &window(None),
            Some(r#"[{"id":9,"cents":5}]"#),
        )
        .await
        .unwrap();
    assert_eq!(out, "5");
}

#[tokio::test]
async fn step_errors_keep_their_class_and_kind() {
    let p = OrdersSync::default();

    let (at, e) = run_all(&p, &window(Some("fetch"))).await.unwrap_err();
    assert_eq!(at, 0);
    assert_eq!(
        e,
        StepError::retryable("source unavailable").with_kind("source")
    );

    let e = p
        .run_step(1, &ctx("validate"), &window(None), Some("[]"))
        .await
        .unwrap_err();
    assert_eq!(e, StepError::permanent("no orders"));

    let e = p
        .run_step(3, &ctx("aggregate"), &window(None), Some("0"))
        .await
        .unwrap_err();
    assert!(!e.retryable);
    assert_eq!(e.kind, "empty");
}

#[tokio::test]
async fn std_errors_convert_into_retryable_step_errors() {
    let p = OrdersSync::default();
    let (at, e) = run_all(&p, &window(Some("load"))).await.unwrap_err();
    assert_eq!(at, 2);
    assert!(e.retryable);
    assert_eq!(e.kind, "error");
    assert_eq!(e.message, "load failed: sink refused");
}

#[tokio::test]
async fn bad_or_missing_previous_output_is_a_permanent_output_error() {
    let p = OrdersSync::default();
    let e = p
        .run_step(1, &ctx("validate"), &window(None), Some("{not json"))
        .await
        .unwrap_err();
    assert!(!e.retryable);
    assert_eq!(e.kind, "output");
    assert!(e.message.contains("validate"), "{e}");

    let e = p
        .run_step(2, &ctx("load"), &window(None), Some(r#""a string""#))
        .await
        .unwrap_err();
    assert_eq!(e.kind, "output");

    let e = p
        .run_step(1, &ctx("validate"), &window(None), None)
        .await
        .unwrap_err();
    assert_eq!(e.kind, "output");
    assert!(!e.retryable);
}

#[tokio::test]
async fn an_index_past_the_last_step_is_a_permanent_error() {
    let p = OrdersSync::default();
    let e = p
        .run_step(4, &ctx("nope"), &window(None), Some("null"))
        .await
        .unwrap_err();
    assert!(!e.retryable);
    assert!(e.message.contains("orders_sync"), "{e}");
}

#[tokio::test]
async fn cleanup_calls_the_hook() {
    let p = OrdersSync::default();
    let ctx = CleanupContext {
        job: JobId::new(),
        attempt: 2,
        reason: CleanupReason::Cancelled {
            reason: "operator".into(),
        },
        last_completed_step: Some("validate"),
        cut_mid_step: true,
    };
    p.cleanup(&ctx, &window(None)).await;
    assert_eq!(
        *p.cleaned.lock().unwrap(),
        vec!["shop-a:validate".to_string()]
    );
}

#[test]
fn keys_come_from_the_templates() {
    let w = window(None);
    assert_eq!(OrdersSync::resource_key(&w).as_deref(), Some("shop:shop-a"));
    assert_eq!(
        OrdersSync::input_key(&w).as_deref(),
        Some("orders:shop-a:7")
    );
}

#[test]
fn options_and_step_specs() {
    assert_eq!(OrdersSync::NAME, "orders_sync");
    assert_eq!(queue_of::<OrdersSync>(), "orders");
    let options = OrdersSync::options();
    assert_eq!(options.queue, Some("orders"));
    assert_eq!(options.lease_ttl, Some(Duration::from_secs(30)));
    assert_eq!(options.stale_lock, StaleLock::Release);
    let pipeline_retry = RetryPolicy::NONE
        .max_attempts(4)
        .initial_backoff(Duration::from_secs(2))
        .max_backoff(Duration::from_secs(60))
        .multiplier(2.0)
        .jitter(0.1);
    assert_eq!(options.retry, pipeline_retry);

    let names: Vec<&str> = OrdersSync::STEPS.iter().map(|s| s.name).collect();
    assert_eq!(names, ["fetch", "validate", "load", "aggregate"]);
    assert_eq!(OrdersSync::STEPS[0].timeout, Some(Duration::from_secs(60)));
    assert_eq!(OrdersSync::STEPS[0].retry, None);
    // A step's retry settings override the pipeline's, field by field.
    assert_eq!(
        OrdersSync::STEPS[1].retry,
        Some(
            pipeline_retry
                .max_attempts(5)
                .initial_backoff(Duration::from_millis(500))
        )
    );
    assert_eq!(OrdersSync::STEPS[3].timeout, None);
}

#[test]
fn the_step_enum() {
    use OrdersSyncStep::*;
    assert_eq!(OrdersSyncStep::ALL, &[Fetch, Validate, Load, Aggregate]);
    assert_eq!(OrdersSyncStep::first(), Fetch);
    assert_eq!(OrdersSyncStep::last(), Aggregate);
    assert_eq!(Fetch.next(), Some(Validate));
    assert_eq!(Aggregate.next(), None);
    assert_eq!(Load.prev(), Some(Validate));
    assert_eq!(Load.index(), 2);
    assert!(Fetch < Aggregate);
    assert_eq!(Validate.to_string(), "validate");
    assert_eq!("load".parse::<OrdersSyncStep>(), Ok(Load));
    assert_eq!(
        "Load".parse::<OrdersSyncStep>(),
        Err(UnknownStep {
            pipeline: "orders_sync",
            name: "Load".into()
        })
    );
    assert_eq!(serde_json::to_string(&Aggregate).unwrap(), r#""aggregate""#);
    assert_eq!(
        serde_json::from_str::<OrdersSyncStep>(r#""fetch""#).unwrap(),
        Fetch
    );
    let err = serde_json::from_str::<OrdersSyncStep>(r#""nope""#)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown variant `nope`, expected one of `fetch`"),
        "{err}"
    );
}

// The defaults: name from the type, queue from the name, the core's retry
// policy, no keys; a step after a `()` output takes no previous output, and a
// later step may ignore the previous output while taking the input.
/// A pipeline declared with every default.
pub struct NightlyHTTPRollup;

#[pipeline]
impl NightlyHTTPRollup {
    #[step]
    async fn start(&self, _ctx: &StepContext, input: &u32) -> Result<(), StepError> {
        if *input == 0 {
            return Err(StepError::permanent("zero"));
        }
        Ok(())
    }

    #[step]
    async fn double(&self, _ctx: &StepContext, input: &u32) -> Result<u32, StepError> {
        Ok(input * 2)
    }

    #[step]
    async fn report(&self, _ctx: &StepContext, input: &u32) -> Result<String, StepError> {
        Ok(format!("input was {input}"))
    }
}

#[tokio::test]
async fn defaults() {
    assert_eq!(NightlyHTTPRollup::NAME, "nightly_http_rollup");
    assert_eq!(queue_of::<NightlyHTTPRollup>(), "nightly_http_rollup");
    let options = NightlyHTTPRollup::options();
    assert_eq!(options.retry, RetryPolicy::default());
    assert_eq!(options.lease_ttl, None);
    assert_eq!(options.stale_lock, StaleLock::Hold);
    assert_eq!(NightlyHTTPRollup::resource_key(&3), None);
    assert_eq!(NightlyHTTPRollup::input_key(&3), None);
    assert!(NightlyHTTPRollup::STEPS
        .iter()
        .all(|s| s.timeout.is_none() && s.retry.is_none()));

    let p = NightlyHTTPRollup;
    let c = ctx("start");
    assert_eq!(p.run_step(0, &c, &21, None).await.unwrap(), "null");
    assert_eq!(p.run_step(1, &c, &21, Some("null")).await.unwrap(), "42");
    assert_eq!(
        p.run_step(2, &c, &21, Some("42")).await.unwrap(),
        r#""input was 21""#
    );
    // No cleanup hook: the trait's default does nothing.
    let cleanup = CleanupContext {
        job: JobId::new(),
        attempt: 1,
        reason: CleanupReason::Failed(StepError::permanent("x")),
        last_completed_step: None,
        cut_mid_step: false,
    };
    p.cleanup(&cleanup, &21).await;
    assert_eq!(NightlyHTTPRollupStep::Report.to_string(), "report");
}
