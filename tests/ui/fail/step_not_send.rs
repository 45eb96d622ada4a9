use std::rc::Rc;

use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};

struct Sync;

#[pipeline]
impl Sync {
    #[step]
    async fn fetch(&self, ctx: &StepContext, input: &u32) -> Result<u32, StepError> {
        let local = Rc::new(*input);
        ctx.cancelled().await;
        Ok(*local)
    }
}

fn main() {}
