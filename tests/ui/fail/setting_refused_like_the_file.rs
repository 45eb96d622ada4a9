// Settings out of their bounds or words: the macro refuses them with the
// words of the pipelines file and of --lease-ttl (one definition of each
// setting, leasehold_syntax::setting); old names are checked as the new.
use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};

struct Sync;

#[pipeline(
    lease_ttl = "500ms",
    backoff = "8d",
    multiplier = 0.5,
    max_running = 0,
    stale_lock = "keep",
    on_stale = "hold"
)]
impl Sync {
    #[step(timeout = "30d")]
    async fn fetch(&self, _ctx: &StepContext, input: &u32) -> Result<u32, StepError> {
        Ok(*input)
    }
}

fn main() {}
