use leasehold::{pipeline, schemars, InputFields, JsonSchema};
use leasehold::pipeline::{StepContext, StepError};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, JsonSchema, InputFields)]
struct Tick {
    table: String,
}

struct Minutely;

// a scheduled pipeline's input carries the tick's window; this one has none
#[pipeline(schedule(every = "1m"))]
impl Minutely {
    #[step]
    async fn run(&self, _ctx: &StepContext, input: &Tick) -> Result<(), StepError> {
        let _ = &input.table;
        Ok(())
    }
}

/// The window is there but of the wrong type.
#[derive(Serialize, Deserialize, JsonSchema, InputFields)]
struct WrongWindow {
    window: String,
}

struct Hourly;

#[pipeline(schedule(every = "1h"))]
impl Hourly {
    #[step]
    async fn run(&self, _ctx: &StepContext, input: &WrongWindow) -> Result<(), StepError> {
        let _ = &input.window;
        Ok(())
    }
}

fn main() {}
