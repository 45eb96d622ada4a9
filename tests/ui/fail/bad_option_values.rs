use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};

struct Sync;

#[pipeline(
    lease_ttl = "1mo",
    backoff = 5,
    max_attempts = 0,
    jitter = 1.5,
    on_stale = "drop",
    queue = "my queue",
    input_key = "sync:{shop_id"
)]
impl Sync {
    #[step(timeout = "250us")]
    async fn fetch(&self, _ctx: &StepContext, input: &u32) -> Result<u32, StepError> {
        Ok(*input)
    }
}

fn main() {}
