//! `worker --pipelines FILE`: runs a worker serving the pipelines a TOML file
//! declares, their steps as commands (process steps), until SIGINT or
//! SIGTERM. The file is read and checked whole before the worker connects
//! (see `pipelines_file.rs`), so a worker never starts half-configured.

use leasehold_core::{shutdown_signal, Worker};

use crate::context::Ctx;
use crate::failure::{Failure, Outcome};
use crate::grammar::WorkerArgs;

/// What `--check` prints: the pipelines and their steps.
pub(crate) fn describe(args: &WorkerArgs) -> Outcome<String> {
    let pipelines = crate::pipelines_file::load(&args.pipelines).map_err(Failure::Usage)?;
    let mut out = format!(
        "{}: {} pipeline(s), valid\n",
        args.pipelines.display(),
        pipelines.len()
    );
    for p in &pipelines {
        let spec = p.spec();
        out.push_str(&format!(
            "  {} (queue {}): {}\n",
            spec.name,
            p.queue_name(),
            spec.steps.join(" → ")
        ));
    }
    Ok(out)
}

/// The worker's log timestamps in the operator's time convention: UTC
/// unless `--local-time` (or `LEASEHOLD_LOCAL_TIME`) chose the host's zone.
struct LogClock;

impl tracing_subscriber::fmt::time::FormatTime for LogClock {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        w.write_str(&crate::time::stamp(jiff::Timestamp::now().as_millisecond()))
    }
}

/// `worker`.
pub(crate) async fn run(ctx: &Ctx, args: WorkerArgs) -> Outcome {
    let pipelines = crate::pipelines_file::load(&args.pipelines).map_err(Failure::Usage)?;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_timer(LogClock)
        .try_init();
    let mut builder = Worker::builder(ctx.url.clone())
        .config(ctx.config.clone())
        .concurrency(args.concurrency)
        .lease_ttl(args.lease_ttl)
        .shutdown_grace(args.shutdown_grace)
        .startup_wait(args.startup_wait);
    for pipeline in pipelines {
        builder = builder.declared(pipeline).map_err(|e| ctx.fail(e))?;
    }
    let worker = builder.build().await.map_err(|e| ctx.fail(e))?;
    eprintln!(
        "leasehold worker: serving the pipelines of {} (Ctrl-C or SIGTERM stops it)",
        args.pipelines.display()
    );
    worker
        .run_until(shutdown_signal())
        .await
        .map_err(|e| ctx.fail(e))
}
