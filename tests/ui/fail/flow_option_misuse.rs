use leasehold::{pipeline, schemars, JsonSchema};
use leasehold::pipeline::{StepContext, StepError};

#[derive(serde::Serialize, serde::Deserialize, JsonSchema)]
struct Load {
    warehouse: String,
}

struct LimitWithoutResource;

#[pipeline(resource_limit = 3, max_running = 0)]
impl LimitWithoutResource {
    #[step]
    async fn load(&self, _ctx: &StepContext, _input: &Load) -> Result<(), StepError> {
        Ok(())
    }
}

struct BadRates;

#[pipeline(resource = "wh:{warehouse}", rate = "10 per second", limiter = "api:{warehouse}")]
impl BadRates {
    #[step]
    async fn load(&self, _ctx: &StepContext, _input: &Load) -> Result<(), StepError> {
        Ok(())
    }
}

struct ZeroRate;

#[pipeline(limiter = "api:{warehouse}", rate = "0/s")]
impl ZeroRate {
    #[step]
    async fn load(&self, _ctx: &StepContext, _input: &Load) -> Result<(), StepError> {
        Ok(())
    }
}

struct LimiterAlone;

#[pipeline(limiter = "api:{warehouse}")]
impl LimiterAlone {
    #[step]
    async fn load(&self, _ctx: &StepContext, _input: &Load) -> Result<(), StepError> {
        Ok(())
    }
}

fn main() {}
