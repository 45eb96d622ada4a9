use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};

struct P;

#[pipeline(notify(run = ["sh", "mail.sh"], on = ["job_exploded"]))]
impl P {
    #[step]
    async fn one(&self, _ctx: &StepContext, _input: &u32) -> Result<(), StepError> {
        Ok(())
    }
}

fn main() {}
