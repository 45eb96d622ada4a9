use leasehold::pipeline;
use leasehold::pipeline::{CleanupContext, StepContext, StepError};

struct Sync;

#[pipeline]
impl Sync {
    #[step]
    async fn fetch(&self, _ctx: StepContext, input: &u32) -> Result<u32, StepError> {
        Ok(*input)
    }

    #[step]
    async fn load(&self, _ctx: &mut StepContext, n: u32) -> Result<u32, StepError> {
        Ok(n)
    }

    #[step]
    async fn report(&self, _ctx: &CleanupContext, n: u32) -> Result<u32, StepError> {
        Ok(n)
    }

    #[cleanup]
    async fn undo(&self, _ctx: &StepContext) {}
}

fn main() {}
