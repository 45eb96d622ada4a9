use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};

struct Sync;

#[pipeline(queue = "sync", lease_tll = "30s", priority = 3)]
impl Sync {
    #[step(timout = "5s", retry(max_attempts = 2, backof = "1s"))]
    async fn fetch(&self, _ctx: &StepContext, input: &u32) -> Result<u32, StepError> {
        Ok(*input)
    }
}

fn main() {}
