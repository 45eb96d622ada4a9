use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};

struct Rows(Vec<u8>);

struct Sync;

#[pipeline]
impl Sync {
    #[step]
    async fn fetch(&self, _ctx: &StepContext, input: &u32) -> Result<Rows, StepError> {
        Ok(Rows(vec![*input as u8]))
    }

    #[step]
    async fn load(&self, _ctx: &StepContext) -> Result<u32, StepError> {
        Ok(1)
    }
}

// The error type must convert into `StepError` too.
#[derive(Debug)]
struct NotAnError;

struct Load;

#[pipeline]
impl Load {
    #[step]
    async fn load(&self, _ctx: &StepContext, input: &u32) -> Result<u32, NotAnError> {
        Ok(*input)
    }
}

fn main() {}
