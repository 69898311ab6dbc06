//! Logs and traces for both binaries: `tracing` to text or JSON lines; OpenTelemetry spans exported
//! over OTLP/gRPC when a tracing configuration file is given (component-base's
//! `TracingConfiguration`, the file kube-apiserver reads with `--tracing-config-file`) or
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set; and W3C trace context carried in gRPC metadata, so a
//! binder's scheduling cycle and the decision replica's spans form one trace.
//!
//! The spans follow KEP-5927 (distributed tracing in kube-scheduler), batched:
//!
//! ```text
//! binder-agent                         scheduler-service
//! schedulingCycle (one per batch)
//!  |-- SyncSnapshot / Schedule ------> Schedule
//!  |                                    `-- SchedulePod (one per pod, sampled traces only)
//!  |                                         |-- preFilter
//!  |                                         |-- filterAndScore
//!  |                                         |-- postFilter (a pod no node fits)
//!  |                                         `-- reserve
//!  `-- bindingCycle (one per placed pod)
//!       |-- preBind -- the API writes (kube-client's spans: patch_subresource, ...)
//!       `-- bind ----- create_subresource (the Binding)
//! ```

use std::path::Path;

use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use serde::Deserialize;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer as _;

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The OTLP exporter could not be built (a bad endpoint, for instance).
    #[error("building the OTLP span exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// A global subscriber was already installed.
    #[error("installing the tracing subscriber: {0}")]
    Subscriber(#[from] tracing_subscriber::util::TryInitError),
    /// The tracing configuration file could not be read.
    #[error("unable to read tracing configuration from {path:?}: {source}")]
    ReadConfig {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The tracing configuration file is not a valid `TracingConfiguration`.
    #[error("unable to decode tracing configuration data: {0}")]
    DecodeConfig(String),
    /// A field of the tracing configuration is invalid (component-base's validation).
    #[error("invalid tracing configuration: {field}: Invalid value: {value}: {reason}")]
    InvalidConfig {
        /// The field's path.
        field: &'static str,
        /// The value given.
        value: String,
        /// Why it is refused.
        reason: String,
    },
}

/// component-base's `TracingConfiguration` (`k8s.io/component-base/tracing/api/v1`), as read from
/// the file kube-apiserver takes with `--tracing-config-file`:
///
/// ```yaml
/// apiVersion: apiserver.config.k8s.io/v1
/// kind: TracingConfiguration
/// endpoint: otel-collector.observability:4317
/// samplingRatePerMillion: 10000
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TracingConfiguration {
    /// The collector's OTLP/gRPC endpoint (insecure, as component-base connects); unset is
    /// `localhost:4317`.
    pub endpoint: Option<String>,
    /// Samples per million root spans; unset or 0 samples no root span (a span whose parent was
    /// sampled, as a decision call from a sampled binder cycle, still is).
    pub sampling_rate_per_million: Option<i32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TracingConfigurationFile {
    api_version: String,
    kind: String,
    #[serde(default)]
    endpoint: Option<String>,
    #[serde(default)]
    sampling_rate_per_million: Option<i32>,
}

/// The API versions of `TracingConfiguration` kube-apiserver 1.37 reads.
const TRACING_API_VERSIONS: [&str; 3] = [
    "apiserver.config.k8s.io/v1",
    "apiserver.config.k8s.io/v1beta1",
    "apiserver.config.k8s.io/v1alpha1",
];

impl TracingConfiguration {
    /// Reads and validates a `TracingConfiguration` file (strictly: an unknown or repeated field is
    /// an error, as kube-apiserver's strict decoding makes it).
    pub fn from_file(path: &Path) -> Result<Self, TelemetryError> {
        let text = std::fs::read_to_string(path).map_err(|source| TelemetryError::ReadConfig {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text)
    }

    /// Parses and validates a `TracingConfiguration` document.
    pub fn parse(text: &str) -> Result<Self, TelemetryError> {
        let file: TracingConfigurationFile = serde_saphyr::from_str(text)
            .map_err(|e| TelemetryError::DecodeConfig(format!("strict decoding error: {e}")))?;
        if !TRACING_API_VERSIONS.contains(&file.api_version.as_str()) || file.kind != "TracingConfiguration" {
            return Err(TelemetryError::DecodeConfig(format!(
                "expected kind TracingConfiguration of {}, got kind {:?} of {:?}",
                TRACING_API_VERSIONS.join(", "),
                file.kind,
                file.api_version
            )));
        }
        let config = TracingConfiguration {
            endpoint: file.endpoint,
            sampling_rate_per_million: file.sampling_rate_per_million,
        };
        config.validate()?;
        Ok(config)
    }

    /// component-base's `ValidateTracingConfiguration`.
    fn validate(&self) -> Result<(), TelemetryError> {
        if let Some(rate) = self.sampling_rate_per_million {
            let reason = if rate < 0 {
                Some("sampling rate must be positive")
            } else if rate > 1_000_000 {
                Some("sampling rate per million must be less than or equal to one million")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(TelemetryError::InvalidConfig {
                    field: "samplingRatePerMillion",
                    value: rate.to_string(),
                    reason: reason.into(),
                });
            }
        }
        if let Some(endpoint) = &self.endpoint {
            self.otlp_uri_of(endpoint)?;
        }
        Ok(())
    }

    /// The endpoint as the URI the OTLP exporter dials: `host:port` and `dns:///host:port`
    /// (component-base's gRPC target forms) become `http://host:port`; the `unix` schemes
    /// component-base also accepts are not supported here.
    fn otlp_uri_of(&self, endpoint: &str) -> Result<String, TelemetryError> {
        let invalid = |reason: String| TelemetryError::InvalidConfig {
            field: "endpoint",
            value: endpoint.to_string(),
            reason,
        };
        let target = match endpoint.split_once("://") {
            None => endpoint,
            Some(("dns", rest)) => rest.split_once('/').map_or(rest, |(_, target)| target),
            Some(("unix" | "unix-abstract", _)) => {
                return Err(invalid("unix socket endpoints are not supported by placement's exporter; give host:port".into()))
            }
            Some((scheme, _)) => {
                return Err(invalid(format!(
                    "unsupported scheme: {scheme}.  Options are none, dns, unix, or unix-abstract.  See https://github.com/grpc/grpc/blob/master/doc/naming.md"
                )))
            }
        };
        if target.is_empty() {
            return Err(invalid("no host:port".into()));
        }
        Ok(format!("http://{target}"))
    }

    /// The collector's URI (`http://localhost:4317` when the endpoint is unset).
    pub fn otlp_uri(&self) -> Result<String, TelemetryError> {
        self.otlp_uri_of(self.endpoint.as_deref().unwrap_or("localhost:4317"))
    }

    /// component-base's sampler: parent-based; a root span sampled at the configured rate, none
    /// when the rate is unset or 0.
    pub fn sampler(&self) -> Sampler {
        let root = match self.sampling_rate_per_million {
            Some(rate) if rate > 0 => Sampler::TraceIdRatioBased(f64::from(rate) / 1_000_000.0),
            _ => Sampler::AlwaysOff,
        };
        Sampler::ParentBased(Box::new(root))
    }
}

/// Where spans go: a `TracingConfiguration` file, else `OTEL_EXPORTER_OTLP_ENDPOINT` (the
/// OpenTelemetry SDK's environment, sampler included), else nowhere.
#[derive(Debug, Clone, Default)]
pub struct TraceExport {
    /// The parsed `--tracing-config-file`.
    pub config: Option<TracingConfiguration>,
}

impl TraceExport {
    /// Reads `path` if given.
    pub fn from_flag(path: Option<&Path>) -> Result<Self, TelemetryError> {
        Ok(TraceExport {
            config: path.map(TracingConfiguration::from_file).transpose()?,
        })
    }

    fn provider(&self, service: &'static str) -> Result<Option<SdkTracerProvider>, TelemetryError> {
        let resource = || {
            opentelemetry_sdk::Resource::builder()
                .with_service_name(service)
                .build()
        };
        if let Some(config) = &self.config {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(config.otlp_uri()?)
                .build()?;
            return Ok(Some(
                SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_sampler(config.sampler())
                    .with_resource(resource())
                    .build(),
            ));
        }
        match std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT") {
            Ok(endpoint) if !endpoint.is_empty() => {
                let exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic().build()?;
                Ok(Some(
                    SdkTracerProvider::builder()
                        .with_batch_exporter(exporter)
                        .with_resource(resource())
                        .build(),
                ))
            }
            _ => Ok(None),
        }
    }
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

/// Installs the process's subscriber: `RUST_LOG` filtering (default `default_filter`) of text or
/// JSON lines, and, where [`TraceExport`] says, OpenTelemetry spans exported over OTLP/gRPC with
/// `service.name` = `service`. What is exported does not depend on `RUST_LOG`: placement's own
/// spans at info and above, and kube-client's request spans (the API writes) inside them.
pub fn init(
    service: &'static str,
    json: bool,
    default_filter: &str,
    export: &TraceExport,
) -> Result<Telemetry, TelemetryError> {
    install_propagator();
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter))
    };
    let provider = export.provider(service)?;
    let otel = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer(service))
            .with_filter(exported())
    });
    // Logs go to stderr, leaving stdout to command output (the simulation's summary).
    let (text, json_layer) = if json {
        (
            None,
            Some(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_writer(std::io::stderr)
                    .with_filter(filter()),
            ),
        )
    } else {
        (
            Some(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_filter(filter()),
            ),
            None,
        )
    };
    tracing_subscriber::registry()
        .with(text)
        .with(json_layer)
        .with(otel)
        .try_init()?;
    Ok(Telemetry { provider })
}

/// What the OpenTelemetry layer sees: placement's spans at info and above and its warnings, and
/// kube-client's HTTP request spans (debug level, named after the call: `create_subresource`,
/// `patch_subresource`, ...) only inside one of placement's spans, so watches and lists outside
/// a cycle make no traces of their own.
fn exported<S>() -> impl tracing_subscriber::layer::Filter<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_subscriber::filter::dynamic_filter_fn(|meta, cx| {
        let target = meta.target();
        if target.starts_with("placement_")
            || target.starts_with("binder_agent")
            || target.starts_with("scheduler_service")
        {
            return if meta.is_span() {
                *meta.level() <= tracing::Level::INFO
            } else {
                *meta.level() <= tracing::Level::WARN
            };
        }
        meta.is_span() && target.starts_with("kube_client") && cx.lookup_current().is_some()
    })
}

/// Whether the current span belongs to a sampled trace (the engine makes its per-pod spans only
/// then).
pub fn current_is_sampled() -> bool {
    tracing::Span::current().context().span().span_context().is_sampled()
}

/// Like [`init`], but a subscriber already installed (tests running several agents in one process)
/// is not an error: telemetry is then left as it is.
pub fn init_once(
    service: &'static str,
    json: bool,
    default_filter: &str,
    export: &TraceExport,
) -> Result<Option<Telemetry>, TelemetryError> {
    match init(service, json, default_filter, export) {
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

    #[test]
    fn a_tracing_configuration_reads_as_kube_apiserver_reads_it() {
        let c = TracingConfiguration::parse(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpoint: collector.observability:4317\nsamplingRatePerMillion: 10000\n",
        )
        .unwrap();
        assert_eq!(c.endpoint.as_deref(), Some("collector.observability:4317"));
        assert_eq!(c.sampling_rate_per_million, Some(10000));
        assert_eq!(c.otlp_uri().unwrap(), "http://collector.observability:4317");
        for version in ["v1beta1", "v1alpha1"] {
            let c = TracingConfiguration::parse(&format!(
                "apiVersion: apiserver.config.k8s.io/{version}\nkind: TracingConfiguration\n"
            ))
            .unwrap();
            assert_eq!(c, TracingConfiguration::default());
            assert_eq!(c.otlp_uri().unwrap(), "http://localhost:4317", "the OTLP default");
        }
        let dns = TracingConfiguration {
            endpoint: Some("dns:///10.0.0.1:4317".into()),
            ..Default::default()
        };
        assert_eq!(dns.otlp_uri().unwrap(), "http://10.0.0.1:4317");
    }

    #[test]
    fn a_bad_tracing_configuration_is_refused_with_the_field() {
        let err = |text: &str| TracingConfiguration::parse(text).unwrap_err().to_string();
        let head = "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\n";
        assert!(err(&format!("{head}foo: bar\n")).contains("strict decoding error"));
        assert!(err(&format!("{head}endpoint: a:4317\nendpoint: b:4317\n")).contains("strict decoding error"));
        assert!(err("apiVersion: apps/v1\nkind: DaemonSet\n").contains("expected kind TracingConfiguration"));
        let e = err(&format!("{head}samplingRatePerMillion: -1\n"));
        assert!(
            e.contains("samplingRatePerMillion") && e.contains("sampling rate must be positive"),
            "{e}"
        );
        let e = err(&format!("{head}samplingRatePerMillion: 1000001\n"));
        assert!(e.contains("less than or equal to one million"), "{e}");
        let e = err(&format!("{head}endpoint: https://collector:4317\n"));
        assert!(e.contains("unsupported scheme: https"), "{e}");
        let e = err(&format!("{head}endpoint: unix:///run/otel.sock\n"));
        assert!(e.contains("unix socket endpoints are not supported"), "{e}");
        let missing = TracingConfiguration::from_file(Path::new("/nonexistent/tracing.yaml")).unwrap_err();
        assert!(missing
            .to_string()
            .starts_with("unable to read tracing configuration from"));
    }

    #[test]
    fn the_sampler_is_component_bases() {
        let rate = |r: Option<i32>| {
            TracingConfiguration {
                sampling_rate_per_million: r,
                ..Default::default()
            }
            .sampler()
        };
        let root = |s: Sampler| match s {
            Sampler::ParentBased(root) => format!("{root:?}"),
            other => panic!("not parent-based: {other:?}"),
        };
        assert_eq!(root(rate(None)), "AlwaysOff");
        assert_eq!(root(rate(Some(0))), "AlwaysOff");
        assert_eq!(root(rate(Some(10_000))), "TraceIdRatioBased(0.01)");
    }
}
