//! Logs and traces for both binaries: `tracing` to text or JSON lines, OpenTelemetry spans exported
//! over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, and W3C trace context carried in gRPC
//! metadata, so a binder's batch span and the decision service's call span form one trace.

use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The OTLP exporter could not be built (a bad `OTEL_EXPORTER_OTLP_ENDPOINT`, for instance).
    #[error("building the OTLP span exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// A global subscriber was already installed.
    #[error("installing the tracing subscriber: {0}")]
    Subscriber(#[from] tracing_subscriber::util::TryInitError),
}

/// Keeps the tracer provider alive; dropping it flushes and stops span export.
#[must_use = "dropping the guard stops span export"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            let _ = p.shutdown();
        }
    }
}

/// Sets the W3C trace-context propagator as the process's propagator (idempotent).
pub fn install_propagator() {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
}

/// Installs the process's subscriber: `RUST_LOG` filtering (default `default_filter`), text or JSON lines,
/// and, when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, OpenTelemetry spans exported over OTLP/gRPC
/// with `service.name` = `service`.
pub fn init(service: &'static str, json: bool, default_filter: &str) -> Result<Telemetry, TelemetryError> {
    install_propagator();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let provider = match std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT") {
        Ok(endpoint) if !endpoint.is_empty() => {
            let exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic().build()?;
            Some(
                SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_resource(
                        opentelemetry_sdk::Resource::builder()
                            .with_service_name(service)
                            .build(),
                    )
                    .build(),
            )
        }
        _ => None,
    };
    let otel = provider
        .as_ref()
        .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer(service)));
    // Logs go to stderr, leaving stdout to command output (the simulation's summary).
    let (text, json_layer) = if json {
        (
            None,
            Some(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_writer(std::io::stderr),
            ),
        )
    } else {
        (
            Some(tracing_subscriber::fmt::layer().with_writer(std::io::stderr)),
            None,
        )
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(text)
        .with(json_layer)
        .with(otel)
        .try_init()?;
    Ok(Telemetry { provider })
}

/// Like [`init`], but a subscriber already installed (tests running several agents in one process)
/// is not an error: telemetry is then left as it is.
pub fn init_once(service: &'static str, json: bool, default_filter: &str) -> Result<Option<Telemetry>, TelemetryError> {
    match init(service, json, default_filter) {
        Ok(t) => Ok(Some(t)),
        Err(TelemetryError::Subscriber(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes trace-context headers into gRPC metadata.
pub struct MetadataInjector<'a>(pub &'a mut MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(k), Ok(v)) = (MetadataKey::from_bytes(key.as_bytes()), MetadataValue::try_from(&value)) {
            self.0.insert(k, v);
        }
    }
}

/// Reads trace-context headers from gRPC metadata.
pub struct MetadataExtractor<'a>(pub &'a MetadataMap);

impl Extractor for MetadataExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|k| match k {
                tonic::metadata::KeyRef::Ascii(k) => Some(k.as_str()),
                tonic::metadata::KeyRef::Binary(_) => None,
            })
            .collect()
    }
}

/// Puts the current span's trace context (`traceparent`) into an outgoing request's metadata.
pub fn inject_current(metadata: &mut MetadataMap) {
    let cx = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut MetadataInjector(metadata)));
}

/// Makes `span` a child of the trace context an incoming request carries, if any.
pub fn set_remote_parent(span: &tracing::Span, metadata: &MetadataMap) {
    let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&MetadataExtractor(metadata)));
    let _ = span.set_parent(parent);
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};

    #[test]
    fn trace_context_round_trips_through_grpc_metadata() {
        let propagator = TraceContextPropagator::new();
        let sc = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let cx = opentelemetry::Context::new().with_remote_span_context(sc.clone());
        let mut md = MetadataMap::new();
        propagator.inject_context(&cx, &mut MetadataInjector(&mut md));
        assert_eq!(
            md.get("traceparent").unwrap().to_str().unwrap(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        let back = propagator.extract(&MetadataExtractor(&md));
        assert_eq!(back.span().span_context().trace_id(), sc.trace_id());
        assert_eq!(back.span().span_context().span_id(), sc.span_id());
    }
}
