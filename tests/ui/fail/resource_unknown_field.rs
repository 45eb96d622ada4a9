use leasehold::{pipeline, schemars, JsonSchema};
use leasehold::pipeline::{StepContext, StepError};

#[derive(serde::Serialize, serde::Deserialize, JsonSchema)]
struct Window {
    shop_id: String,
    hour: u32,
}

struct Sync;

#[pipeline(resource = "shop:{shop}", input_key = "sync:{shop_id}:{hour}")]
impl Sync {
    #[step]
    async fn fetch(&self, _ctx: &StepContext, input: &Window) -> Result<u32, StepError> {
        Ok(input.hour)
    }
}

fn main() {}
