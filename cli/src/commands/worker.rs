//! `worker --pipelines FILE`: runs a worker serving the pipelines a TOML file
//! declares, their steps as commands (process steps), until SIGINT or
//! SIGTERM. The file is read and checked whole before the worker connects
//! (see `pipelines_file.rs`), so a worker never starts half-configured.

use std::io::IsTerminal;

use leasehold_core::process::DeclaredPipeline;
use leasehold_core::{shutdown_signal, Worker};

use crate::context::Ctx;
use crate::failure::{Failure, Outcome};
use crate::grammar::WorkerArgs;

/// Reads and checks the pipelines file, once: `--check` describes what it
/// read, the worker serves it.
pub(crate) fn load(args: &WorkerArgs) -> Outcome<Vec<DeclaredPipeline>> {
    crate::pipelines_file::load(&args.pipelines).map_err(Failure::Usage)
}

/// What `--check` prints: the pipelines and their steps.
pub(crate) fn describe(args: &WorkerArgs, pipelines: &[DeclaredPipeline]) -> String {
    let mut out = format!(
        "{}: {} pipeline(s), valid\n",
        args.pipelines.display(),
        pipelines.len()
    );
    for p in pipelines {
        let spec = p.spec();
        out.push_str(&format!(
            "  {} (queue {}): {}\n",
            spec.name,
            p.queue_name(),
            spec.steps.join(" → ")
        ));
    }
    out
}

/// The worker's log timestamps in the operator's time convention: UTC
/// unless `--local-time` (or `LEASEHOLD_LOCAL_TIME`) chose the host's zone.
struct LogClock;

impl tracing_subscriber::fmt::time::FormatTime for LogClock {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        w.write_str(&crate::time::stamp(jiff::Timestamp::now().as_millisecond()))
    }
}

/// Whether the worker's log has colour: only on a terminal, and never with
/// `NO_COLOR` set (a log file or a journal gets plain text).
fn log_colour(stderr_is_terminal: bool) -> bool {
    stderr_is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// `worker`: serves `pipelines`, read from `args.pipelines` by [`load`].
pub(crate) async fn run(ctx: &Ctx, args: &WorkerArgs, pipelines: Vec<DeclaredPipeline>) -> Outcome {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(log_colour(std::io::stderr().is_terminal()))
        .with_timer(LogClock)
        .try_init();
    let mut pipelines = pipelines;
    loop {
        let mut builder = Worker::builder(ctx.url.clone())
            .config(ctx.config.clone())
            .concurrency(args.concurrency)
            .lease_ttl(args.lease_ttl)
            .shutdown_grace(args.shutdown_grace)
            .startup_wait(args.startup_wait);
        if let Some(addr) = args.metrics_addr {
            builder = builder.metrics_addr(addr);
        }
        for pipeline in pipelines {
            builder = builder.declared(pipeline).map_err(|e| ctx.fail(e))?;
        }
        let worker = builder.build().await.map_err(|e| ctx.fail(e))?;
        eprintln!(
            "leasehold worker: serving the pipelines of {} (Ctrl-C or SIGTERM stops it, SIGHUP reloads the file)",
            args.pipelines.display()
        );
        let next = std::sync::Mutex::new(None);
        worker
            .run_until(async {
                let n = next_signal(&args.pipelines).await;
                if let Ok(mut slot) = next.lock() {
                    *slot = Some(n);
                }
            })
            .await
            .map_err(|e| ctx.fail(e))?;
        match next.into_inner().ok().flatten() {
            Some(Next::Reload(new)) => pipelines = new,
            _ => return Ok(()),
        }
    }
}

/// Why a worker's run ended.
enum Next {
    /// SIGINT or SIGTERM: stop.
    Exit,
    /// SIGHUP with a file that passed its check: serve these pipelines instead.
    Reload(Vec<DeclaredPipeline>),
}

/// Waits for SIGINT or SIGTERM (stop), or for a SIGHUP whose file passes its
/// check whole (reload); a SIGHUP whose file is refused keeps the running
/// pipelines, and says why.
async fn next_signal(path: &std::path::Path) -> Next {
    let stop = shutdown_signal();
    tokio::pin!(stop);
    let mut hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGHUP: reloading is off");
            stop.await;
            return Next::Exit;
        }
    };
    loop {
        tokio::select! {
            _ = &mut stop => return Next::Exit,
            _ = hangup.recv() => match crate::pipelines_file::load(path) {
                Ok(pipelines) => {
                    tracing::info!(file = %path.display(), "SIGHUP: the file passed its check; reloading (running steps finish first)");
                    return Next::Reload(pipelines);
                }
                Err(errors) => tracing::error!(
                    file = %path.display(),
                    "SIGHUP: the new file is refused; the running pipelines stay:\n{errors}"
                ),
            },
        }
    }
}
