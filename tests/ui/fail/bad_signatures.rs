use leasehold::pipeline;
use leasehold::pipeline::{CleanupContext, StepContext, StepError};

struct Sync;

#[pipeline]
impl Sync {
    #[step]
    async fn fetch(&self, _ctx: &StepContext) -> Result<u32, StepError> {
        Ok(1)
    }

    #[step]
    async fn validate(_ctx: &StepContext, n: u32) -> Result<u32, StepError> {
        Ok(n)
    }

    #[step]
    async fn load(&self, _ctx: &StepContext, n: u32, m: u32) -> Result<u32, StepError> {
        Ok(n + m)
    }

    #[step]
    async fn report(&self, _ctx: &StepContext, n: u32) -> u32 {
        n
    }

    #[cleanup]
    async fn undo(&self, _ctx: &CleanupContext) {}

    #[cleanup]
    async fn undo_again(&self, _ctx: &CleanupContext) {}
}

fn main() {}
