use leasehold::pipeline;
use leasehold::pipeline::{Pipeline, StepContext, StepError};

struct Sync;

#[pipeline]
impl Sync {
    #[step]
    async fn fetch(&self, _ctx: &StepContext, input: &u32) -> Result<u32, StepError> {
        Ok(*input)
    }

    #[step]
    fn load(&self, _ctx: &StepContext, rows: u32) -> Result<u32, StepError> {
        Ok(rows)
    }
}

fn main() {
    // The step enum and the trait impl still exist: no cascade of errors here.
    let _ = SyncStep::Load;
    let _ = <Sync as Pipeline>::NAME;
}
