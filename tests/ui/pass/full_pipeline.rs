//! A four-step pipeline with every option, driven end to end.
#![deny(warnings, missing_docs)]

use std::time::Duration;

use leasehold::__private::serde_json;
use leasehold::{pipeline, schemars, JsonSchema};
use leasehold::pipeline::{Pipeline, StepContext, StepError, Steps};
use leasehold::queue::{JobId, StaleLock};
use serde::{Deserialize, Serialize};

/// The job input.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Window {
    shop_id: String,
    hour: u32,
}

/// An order.
#[derive(Debug, Serialize, Deserialize)]
pub struct Order {
    id: u64,
    cents: i64,
}

/// The user's own error type.
#[derive(Debug)]
pub struct SinkError;

impl std::fmt::Display for SinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("sink error")
    }
}

impl std::error::Error for SinkError {}

/// Syncs orders.
pub struct OrdersSync {
    rate: i64,
}

#[pipeline(
    name = "orders_sync",
    queue = "orders",
    resource = "shop:{shop_id}",
    input_key = "orders:{shop_id}:{hour}",
    lease_ttl = "30s",
    max_attempts = 3,
    backoff = "1s",
    max_backoff = "1h30m",
    multiplier = 3,
    jitter = 0.2,
    on_stale = "hold"
)]
impl OrdersSync {
    #[step(timeout = "1d")]
    async fn fetch(&self, ctx: &StepContext, input: &Window) -> Result<Vec<Order>, StepError> {
        ctx.check_cancelled()?;
        Ok(vec![
            Order {
                id: u64::from(input.hour),
                cents: 100,
            },
            Order { id: 2, cents: -5 },
        ])
    }

    #[step(retry(max_attempts = 5, backoff = "2s"))]
    async fn validate(
        &self,
        _ctx: &StepContext,
        orders: Vec<Order>,
    ) -> Result<Vec<Order>, StepError> {
        Ok(orders.into_iter().filter(|o| o.cents > 0).collect())
    }

    #[step]
    async fn load(
        &self,
        _ctx: &StepContext,
        input: &Window,
        orders: Vec<Order>,
    ) -> Result<u64, SinkError> {
        if input.shop_id.is_empty() {
            return Err(SinkError);
        }
        Ok(orders.iter().map(|o| (o.cents * self.rate) as u64).sum())
    }

    #[step]
    async fn aggregate(&self, ctx: &StepContext, loaded: u64) -> Result<(), StepError> {
        assert_eq!(ctx.step(), "aggregate");
        assert_eq!(loaded, 300);
        Ok(())
    }

    fn helper(&self) -> i64 {
        self.rate
    }
}

fn main() {
    use OrdersSyncStep::*;

    // The step enum.
    assert_eq!(OrdersSyncStep::ALL, &[Fetch, Validate, Load, Aggregate]);
    assert_eq!(OrdersSyncStep::first(), Fetch);
    assert_eq!(OrdersSyncStep::last(), Aggregate);
    assert_eq!(Fetch.next(), Some(Validate));
    assert_eq!(Aggregate.next(), None);
    assert_eq!(Validate.to_string(), "validate");
    assert_eq!("load".parse::<OrdersSyncStep>(), Ok(Load));
    assert!("nope".parse::<OrdersSyncStep>().is_err());
    let json = serde_json::to_string(&[Fetch, Aggregate]).unwrap();
    assert_eq!(json, r#"["fetch","aggregate"]"#);
    let back: Vec<OrdersSyncStep> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, [Fetch, Aggregate]);

    // The trait impl.
    assert_eq!(OrdersSync::NAME, "orders_sync");
    assert_eq!(OrdersSync::STEPS.len(), 4);
    assert_eq!(OrdersSync::STEPS[0].timeout, Some(Duration::from_secs(86_400)));
    assert_eq!(OrdersSync::options().retry.max_backoff, Duration::from_secs(5_400));
    assert_eq!(OrdersSync::STEPS[1].retry.map(|r| r.max_attempts), Some(5));
    let options = OrdersSync::options();
    assert_eq!(options.queue, Some("orders"));
    assert_eq!(options.lease_ttl, Some(Duration::from_secs(30)));
    assert_eq!(options.retry.multiplier, 3.0);
    assert_eq!(options.stale_lock, StaleLock::Hold);
    let input = Window {
        shop_id: "a".into(),
        hour: 1,
    };
    assert_eq!(OrdersSync::resource_key(&input).as_deref(), Some("shop:a"));
    assert_eq!(OrdersSync::input_key(&input).as_deref(), Some("orders:a:1"));

    // Every step, end to end, on a runtime built by hand.
    let pipeline = OrdersSync { rate: 3 };
    assert_eq!(pipeline.helper(), 3);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut previous: Option<String> = None;
    for step in OrdersSyncStep::ALL {
        let ctx = StepContext::detached(JobId::new(), 1, 7, step.name());
        let output = runtime
            .block_on(pipeline.run_step(step.index(), &ctx, &input, previous.as_deref()))
            .unwrap();
        previous = Some(output);
    }
    assert_eq!(previous.as_deref(), Some("null"));
    let past_the_end = StepContext::detached(JobId::new(), 1, 7, "none");
    let error: StepError = runtime
        .block_on(pipeline.run_step(4, &past_the_end, &input, None))
        .unwrap_err();
    assert!(!error.retryable);
}
