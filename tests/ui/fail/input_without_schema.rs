use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};
use serde::{Deserialize, Serialize};

// no `#[derive(JsonSchema)]`: the pipeline has no input schema to publish
#[derive(Serialize, Deserialize)]
struct Sync {
    shop_id: String,
}

struct ShopSync;

#[pipeline(resource = "shop:{shop_id}")]
impl ShopSync {
    #[step]
    async fn fetch(&self, _ctx: &StepContext, input: &Sync) -> Result<usize, StepError> {
        Ok(input.shop_id.len())
    }
}

// the same input with the opt-out compiles: its enqueues say they are not checked
struct Unchecked;

#[pipeline(input_schema = false)]
impl Unchecked {
    #[step]
    async fn fetch(&self, _ctx: &StepContext, input: &Sync) -> Result<usize, StepError> {
        Ok(input.shop_id.len())
    }
}

// a misspelt value
struct Misspelt;

#[pipeline(input_schema = "no")]
impl Misspelt {
    #[step]
    async fn fetch(&self, _ctx: &StepContext, input: &Sync) -> Result<usize, StepError> {
        Ok(input.shop_id.len())
    }
}

fn main() {}
