//! The trace context a job carries from its enqueuer to its worker: a W3C
//! `traceparent` stored in the job hash's `trace` field only when there is
//! one (a plain job has no field and costs nothing). With the `otel`
//! feature, enqueueing inside a span records that span's context, and the
//! worker makes the job's span a child of it, so the job's step spans join
//! the trace that created the job; without the feature a traceparent given
//! with [`crate::NewJob::traceparent`] is stored and handed to the lease, and
//! nothing reads the current span.

use crate::error::Error;

/// Checks that `tp` is a W3C `traceparent`: version `00`, a 32-hex trace id
/// and a 16-hex parent id (neither all zeros), 2-hex flags, lower case (the
/// enqueue script checks the same before any write).
pub fn check_traceparent(tp: &str) -> Result<(), Error> {
    let bad = || {
        Error::InvalidArgument(format!(
            "trace context {tp:?} is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)"
        ))
    };
    let parts: Vec<&str> = tp.split('-').collect();
    let [version, trace_id, parent_id, flags] = parts.as_slice() else {
        return Err(bad());
    };
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let zero = |s: &str| s.bytes().all(|b| b == b'0');
    if *version != "00"
        || !hex(trace_id, 32)
        || !hex(parent_id, 16)
        || !hex(flags, 2)
        || zero(trace_id)
        || zero(parent_id)
    {
        return Err(bad());
    }
    Ok(())
}

/// The current span's trace context as a `traceparent`, when the `otel`
/// feature is on and the span belongs to a sampled or recorded trace.
#[cfg(feature = "otel")]
pub(crate) fn current() -> Option<String> {
    use opentelemetry::propagation::TextMapPropagator as _;
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;

    let cx = tracing::Span::current().context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = std::collections::HashMap::new();
    opentelemetry_sdk::propagation::TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier
        .remove("traceparent")
        .filter(|tp| check_traceparent(tp).is_ok())
}

/// Without the `otel` feature no span has a trace context.
#[cfg(not(feature = "otel"))]
pub(crate) fn current() -> Option<String> {
    None
}

/// Makes `span` (a job's span) a child of the trace context `traceparent`.
#[cfg(feature = "otel")]
pub(crate) fn join(span: &tracing::Span, traceparent: &str) {
    use opentelemetry::propagation::TextMapPropagator as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;

    let carrier =
        std::collections::HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
    let cx = opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
    let _ = span.set_parent(cx);
}

/// Without the `otel` feature there is no trace to join.
#[cfg(not(feature = "otel"))]
pub(crate) fn join(_span: &tracing::Span, _traceparent: &str) {}

#[cfg(test)]
mod tests {
    use super::check_traceparent;

    #[test]
    fn traceparents() {
        assert!(
            check_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").is_ok()
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
        ] {
            assert!(check_traceparent(bad).is_err(), "{bad:?}");
        }
    }
}
