use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};

struct Sync;

#[pipeline]
impl Sync {
    #[step]
    async fn fetch(&self, _ctx: &StepContext, input: &u32) -> Result<Vec<String>, StepError> {
        Ok(vec![input.to_string()])
    }

    #[step]
    async fn load(&self, _ctx: &StepContext, rows: u64) -> Result<u64, StepError> {
        Ok(rows)
    }

    #[step]
    async fn report(&self, _ctx: &StepContext, input: &String) -> Result<(), StepError> {
        let _ = input;
        Ok(())
    }
}

fn main() {}
