//! OpenTelemetry export of leasehold's `tracing` spans (the `otel` cargo
//! feature, off by default): an OTLP/HTTP exporter as a `tracing` layer, and
//! the crates it is built from, re-exported at the versions leasehold uses.
//! A job enqueued inside a span carries that span's trace context, and the
//! worker's `job` and `step` spans join it (see `crate::trace`).

pub use opentelemetry;
pub use opentelemetry_otlp;
pub use opentelemetry_sdk;
pub use tracing_opentelemetry;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{SdkTracerProvider, Tracer};
use opentelemetry_sdk::Resource;

use crate::error::Error;

/// A `tracing` layer exporting spans over OTLP/HTTP (protobuf) to the
/// collector the standard `OTEL_EXPORTER_OTLP_ENDPOINT` /
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` variables name (default
/// `http://localhost:4318`), as service `service_name`, with the provider
/// that owns the exporter: call `shutdown()` on it before exiting so the last
/// batch is sent.
///
/// ```no_run
/// // no_run: it needs an OTLP collector.
/// use tracing_subscriber::layer::SubscriberExt as _;
///
/// let (layer, provider) = leasehold_core::otel::otlp_layer("orders-worker")?;
/// tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
///     .expect("one global subscriber");
/// // ... run workers ...
/// provider.shutdown().ok();
/// # Ok::<(), leasehold_core::Error>(())
/// ```
pub fn otlp_layer<S>(
    service_name: &str,
) -> Result<
    (
        tracing_opentelemetry::OpenTelemetryLayer<S, Tracer>,
        SdkTracerProvider,
    ),
    Error,
>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(|e| Error::InvalidArgument(format!("cannot build the OTLP exporter: {e}")))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name(service_name.to_owned())
                .build(),
        )
        .build();
    let tracer = provider.tracer("leasehold");
    Ok((tracing_opentelemetry::layer().with_tracer(tracer), provider))
}
