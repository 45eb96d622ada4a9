//! A cleanup hook runs through `Pipeline::cleanup`; a hook may skip the input.
#![deny(warnings)]

use std::sync::atomic::{AtomicBool, Ordering};

use leasehold::{pipeline, schemars, JsonSchema};
use leasehold::pipeline::{CleanupContext, CleanupReason, Pipeline, StepContext, StepError};
use leasehold::queue::JobId;

#[derive(serde::Serialize, serde::Deserialize, JsonSchema)]
struct Export(String);

#[derive(Default)]
struct FileCollect {
    cleaned: AtomicBool,
}

#[pipeline(resource = "dir:{0}")]
impl FileCollect {
    #[step]
    async fn collect(&self, _ctx: &StepContext, export: &Export) -> Result<usize, StepError> {
        Ok(export.0.len())
    }

    #[cleanup]
    async fn remove_partial_files(&self, ctx: &CleanupContext, export: &Export) {
        assert_eq!(ctx.last_completed_step, None);
        assert_eq!(export.0, "in");
        self.cleaned.store(true, Ordering::SeqCst);
    }
}

struct NoInputHook;

#[pipeline]
impl NoInputHook {
    #[step]
    async fn only(&self, _ctx: &StepContext, _input: &bool) -> Result<(), StepError> {
        Ok(())
    }

    #[cleanup]
    async fn hook(&self, _ctx: &CleanupContext) {}
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let ctx = CleanupContext {
        job: JobId::new(),
        attempt: 1,
        reason: CleanupReason::Cancelled {
            reason: "operator".into(),
        },
        last_completed_step: None,
        cut_mid_step: true,
    };
    let p = FileCollect::default();
    let input = Export("in".into());
    assert_eq!(FileCollect::resource_key(&input).as_deref(), Some("dir:in"));
    runtime.block_on(p.cleanup(&ctx, &input));
    assert!(p.cleaned.load(Ordering::SeqCst));
    runtime.block_on(NoInputHook.cleanup(&ctx, &true));
}
