use leasehold::{pipeline, schemars, JsonSchema};
use leasehold::pipeline::{StepContext, StepError};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, JsonSchema)]
struct NoWindow {
    table: String,
}

struct Nightly;

// a cron expression with an hour of 25
#[pipeline(schedule(cron = "0 25 * * *", zone = "UTC"))]
impl Nightly {
    #[step]
    async fn run(&self, _ctx: &StepContext, input: &NoWindow) -> Result<(), StepError> {
        let _ = &input.table;
        Ok(())
    }
}

struct Hourly;

// a valid schedule, but the input has no `window` field
#[pipeline(schedule(every = "1h", overlap = "queue"))]
impl Hourly {
    #[step]
    async fn run(&self, _ctx: &StepContext, input: &NoWindow) -> Result<(), StepError> {
        let _ = &input.table;
        Ok(())
    }
}

fn main() {}
