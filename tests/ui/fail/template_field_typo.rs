use leasehold::{pipeline, schemars, InputFields, JsonSchema};
use leasehold::pipeline::{StepContext, StepError};

#[derive(serde::Serialize, serde::Deserialize, JsonSchema, InputFields)]
struct Sync {
    resource: String,
    hour: u32,
}

struct ShopSync;

// `{resourc}`: a typo of the input's `resource` field
#[pipeline(resource = "shop:{resourc}", input_key = "sync:{resource}:{hour}")]
impl ShopSync {
    #[step]
    async fn fetch(&self, _ctx: &StepContext, input: &Sync) -> Result<u32, StepError> {
        Ok(input.hour)
    }
}

fn main() {}
