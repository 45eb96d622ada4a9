use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};

struct Sync;

#[pipeline]
impl Sync {
    #[step]
    async fn fetch(&self, _ctx: &StepContext, input: &u32) -> Result<u32, StepError> {
        Ok(*input)
    }

    #[step]
    #[allow(non_snake_case)]
    async fn Fetch(&self, _ctx: &StepContext, n: u32) -> Result<u32, StepError> {
        Ok(n)
    }

    #[step]
    async fn load_rows(&self, _ctx: &StepContext, n: u32) -> Result<u32, StepError> {
        Ok(n)
    }

    #[step]
    #[allow(non_snake_case)]
    async fn loadRows(&self, _ctx: &StepContext, n: u32) -> Result<u32, StepError> {
        Ok(n)
    }
}

struct Twice;

#[pipeline]
impl Twice {
    #[step]
    async fn fetch(&self, _ctx: &StepContext, input: &u32) -> Result<u32, StepError> {
        Ok(*input)
    }

    #[step]
    async fn fetch(&self, _ctx: &StepContext, n: u32) -> Result<u32, StepError> {
        Ok(n)
    }
}

fn main() {}
