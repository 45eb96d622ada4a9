//! Steps returning `()` chain without a previous-output parameter; a step
//! may also ignore the previous output, and `Result<T>` aliases work.
#![deny(warnings)]

use leasehold::pipeline;
use leasehold::pipeline::{Pipeline, StepContext, StepError};
use leasehold::queue::JobId;

type Result<T> = std::result::Result<T, StepError>;

struct Retention;

#[pipeline(name = "retention", on_stale = "release")]
impl Retention {
    #[step]
    async fn scan(&self, _ctx: &StepContext, _days: &u32) -> Result<()> {
        Ok(())
    }

    #[step]
    async fn delete(&self, _ctx: &StepContext, days: &u32) -> Result<u64> {
        Ok(u64::from(*days) * 10)
    }

    #[step]
    async fn compact(&self, _ctx: &StepContext) -> Result<()> {
        Ok(())
    }

    #[step]
    async fn report(&self, _ctx: &StepContext, previous: ()) -> Result<String> {
        let () = previous;
        Ok("done".into())
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let ctx = StepContext::detached(JobId::new(), 1, 1, "scan");
    let p = Retention;
    assert_eq!(
        runtime.block_on(p.run_step(0, &ctx, &3, None)).unwrap(),
        "null"
    );
    assert_eq!(
        runtime
            .block_on(p.run_step(1, &ctx, &3, Some("null")))
            .unwrap(),
        "30"
    );
    assert_eq!(
        runtime
            .block_on(p.run_step(2, &ctx, &3, Some("30")))
            .unwrap(),
        "null"
    );
    assert_eq!(
        runtime
            .block_on(p.run_step(3, &ctx, &3, Some("null")))
            .unwrap(),
        r#""done""#
    );
    assert_eq!(RetentionStep::Compact.to_string(), "compact");
    assert_eq!(
        Retention::options().stale_lock,
        leasehold::queue::StaleLock::Release
    );
}
