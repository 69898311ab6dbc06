//! The gRPC server: PlacementService, health, reflection (v1 and v1alpha), size limits, and
//! graceful shutdown that drains in-flight calls; optionally TLS or mutual TLS (rustls).

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tonic::codegen::http;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

use super::budget::{BudgetLayer, DecodeLimits, RequestBudget};
use super::conn::{ConnLimits, Incoming};
use super::metrics::{Metrics, ReloadLabels};
use super::policy_file::{parse_policies, PolicyFileConfig, PolicyFileError, PolicyWatcher};
use super::service::{ConfigError, PlacementApi, PolicySource, ServiceConfig};
use crate::proto;
use crate::proto::placement_service_server::PlacementServiceServer;

/// Everything needed to run a decision replica.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Service limits and policies.
    pub service: ServiceConfig,
    /// Largest request or response message in bytes.
    pub max_message_bytes: usize,
    /// Memory the requests in flight may take together (see [`super::budget`]).
    pub request_memory_bytes: usize,
    /// How long connections may take to start and stay idle (see [`super::conn`]).
    pub connections: ConnLimits,
    /// TLS of the gRPC port; `None` serves plaintext HTTP/2.
    pub tls: Option<ServerTls>,
    /// A policy file replacing the service's policies, read at start and reloaded on change.
    pub policy_file: Option<PolicyFileConfig>,
}

/// TLS of the gRPC port, as PEM. With a client CA the server requires mutual TLS: every client must
/// present a certificate signed by that CA.
#[derive(Clone)]
pub struct ServerTls {
    /// The server's certificate chain (PEM), leaf first.
    pub cert_pem: Vec<u8>,
    /// The server certificate's private key (PEM).
    pub key_pem: Vec<u8>,
    /// CA certificates (PEM) client certificates must chain to; `None` accepts any client.
    pub client_ca_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for ServerTls {
    // Never prints the private key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("cert_pem", &format_args!("{} bytes", self.cert_pem.len()))
            .field("key_pem", &"<redacted>")
            .field("mutual", &self.client_ca_pem.is_some())
            .finish()
    }
}

impl ServerTls {
    /// tonic's configuration, after checking the PEM holds the blocks it must (tonic's own error
    /// for a missing block does not say which file is wrong).
    fn to_tonic(&self) -> Result<ServerTlsConfig, ServeError> {
        if !pem_has(&self.cert_pem, "CERTIFICATE") {
            return Err(ServeError::Tls(
                "the server certificate holds no PEM CERTIFICATE block".into(),
            ));
        }
        if !pem_has(&self.key_pem, "PRIVATE KEY") {
            return Err(ServeError::Tls("the server key holds no PEM PRIVATE KEY block".into()));
        }
        let mut config = ServerTlsConfig::new().identity(Identity::from_pem(&self.cert_pem, &self.key_pem));
        if let Some(ca) = &self.client_ca_pem {
            if !pem_has(ca, "CERTIFICATE") {
                return Err(ServeError::Tls("the client CA holds no PEM CERTIFICATE block".into()));
            }
            config = config.client_ca_root(Certificate::from_pem(ca));
        }
        Ok(config)
    }
}

/// An error and its sources, `: `-separated (tonic's transport error alone says only "transport
/// error").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Whether `pem` has a `-----BEGIN ...{label}-----` block (`PRIVATE KEY` matches the PKCS#8, RSA
/// and EC forms).
fn pem_has(pem: &[u8], label: &str) -> bool {
    String::from_utf8_lossy(pem)
        .lines()
        .any(|l| l.starts_with("-----BEGIN ") && l.trim_end().ends_with(&format!("{label}-----")))
}

/// [`ServerConfig::request_memory_bytes`]'s default: with the snapshot cache's 512 MiB and the
/// process's own (about 100 MiB), within the 2 GiB a replica of `deploy/base` may use; a full
/// snapshot of 5,000 nodes and 150,000 pods takes about 1.1 GiB of it while it is decoded and built.
pub const DEFAULT_REQUEST_MEMORY_BYTES: usize = 1280 << 20;

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            service: ServiceConfig::default(),
            max_message_bytes: 256 << 20,
            request_memory_bytes: DEFAULT_REQUEST_MEMORY_BYTES,
            connections: ConnLimits::default(),
            tls: None,
            policy_file: None,
        }
    }
}

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The policy file cannot be used.
    #[error(transparent)]
    PolicyFile(#[from] PolicyFileError),
    /// Reflection could not be built from the descriptors.
    #[error("building reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The TLS configuration is invalid.
    #[error("TLS configuration: {0}")]
    Tls(String),
    /// The transport failed.
    #[error("serving gRPC: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Whether a status in `headers` (a trailers-only answer's headers, or trailers) is tonic's
/// OUT_OF_RANGE for a message over the size limit.
fn is_size_limit(headers: &http::HeaderMap) -> bool {
    headers.get("grpc-status").is_some_and(|v| v == "11")
        && headers
            .get("grpc-message")
            .and_then(|m| m.to_str().ok())
            .is_some_and(|m| m.contains("message%20length%20too%20large") || m.contains("message length too large"))
}

/// Answers RESOURCE_EXHAUSTED where tonic answers OUT_OF_RANGE for a message over the size
/// limit, as gRPC's own implementations (C++, Java, Go) do, so every client sees the standard
/// status: for a request too large (in the answer's headers) and for an answer too large to send
/// (in its trailers, as the answer is encoded while it streams out).
fn size_limit_status(response: http::Response<tonic::body::Body>) -> http::Response<tonic::body::Body> {
    let (mut parts, body) = response.into_parts();
    if is_size_limit(&parts.headers) {
        parts.headers.insert("grpc-status", http::HeaderValue::from_static("8"));
    }
    http::Response::from_parts(parts, tonic::body::Body::new(SizeLimitTrailers(body)))
}

/// A response body whose trailers get [`size_limit_status`]'s code.
struct SizeLimitTrailers(tonic::body::Body);

impl http_body::Body for SizeLimitTrailers {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, tonic::Status>>> {
        let frame = std::task::ready!(std::pin::Pin::new(&mut self.0).poll_frame(cx));
        std::task::Poll::Ready(frame.map(|f| {
            f.map(|frame| match frame.into_trailers() {
                Ok(mut trailers) => {
                    if is_size_limit(&trailers) {
                        trailers.insert("grpc-status", http::HeaderValue::from_static("8"));
                    }
                    http_body::Frame::trailers(trailers)
                }
                Err(frame) => frame,
            })
        }))
    }

    fn is_end_stream(&self) -> bool {
        http_body::Body::is_end_stream(&self.0)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::Body::size_hint(&self.0)
    }
}

/// Serves PlacementService, health and reflection on `listener` until `shutdown` resolves, then
/// stops accepting calls, reports NOT_SERVING and waits for in-flight calls to finish.
pub async fn serve(
    listener: TcpListener,
    config: ServerConfig,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let tls = config.tls.as_ref().map(ServerTls::to_tonic).transpose()?;
    let mut service = config.service;
    let limits = DecodeLimits {
        max_batch_size: service.max_batch_size,
    };
    let budget = RequestBudget::with_metrics(config.request_memory_bytes, &metrics);
    let mut watcher = None;
    match &config.policy_file {
        None => metrics.policy_config_in_use("built-in", "built-in", service.policies.len()),
        Some(file) => {
            // Read once: what is validated is exactly what the watcher compares against.
            let loaded = std::fs::read(&file.path)
                .map_err(|source| PolicyFileError::Read {
                    path: file.path.display().to_string(),
                    source,
                })
                .and_then(|bytes| Ok((parse_policies(&file.path, &bytes)?, bytes)))
                .inspect_err(|_| {
                    metrics
                        .policy_reloads
                        .get_or_create(&ReloadLabels { result: "error" })
                        .inc();
                });
            let (loaded, bytes) = loaded?;
            let shown = file.path.display().to_string();
            tracing::info!(
                path = %shown,
                format = loaded.format.kind(),
                digest = %loaded.digest,
                policies = ?loaded.policies.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
                ignored = ?loaded.ignored,
                "policy file loaded"
            );
            metrics
                .policy_reloads
                .get_or_create(&ReloadLabels { result: "ok" })
                .inc();
            metrics.policy_config_in_use(&shown, &loaded.digest, loaded.policies.len());
            service.policy_source = PolicySource::File {
                path: shown,
                format: loaded.format,
            };
            service.policies = loaded.policies;
            watcher = file.reload_interval.map(|every| (file.path.clone(), bytes, every));
        }
    }
    let api = PlacementApi::new(service, Arc::clone(&metrics))?;
    let watcher = watcher.map(|(path, bytes, every)| {
        let w = PolicyWatcher::new(api.clone(), Arc::clone(&metrics), path, Some(&bytes));
        AbortOnDrop(tokio::spawn(w.run(every)))
    });
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_serving::<PlacementServiceServer<PlacementApi>>().await;
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    let service = PlacementServiceServer::new(api)
        .max_decoding_message_size(config.max_message_bytes)
        .max_encoding_message_size(config.max_message_bytes);
    let health_reporter = reporter.clone();
    let shutdown = async move {
        shutdown.await;
        tracing::info!("shutting down: draining in-flight calls");
        health_reporter
            .set_not_serving::<PlacementServiceServer<PlacementApi>>()
            .await;
    };
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls).map_err(|e| ServeError::Tls(error_chain(&e)))?;
    }
    builder
        .layer(tower::util::MapResponseLayer::new(size_limit_status))
        .layer(BudgetLayer::new(budget, limits))
        .add_service(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(service)
        .serve_with_incoming_shutdown(Incoming::new(listener, config.connections), shutdown)
        .await?;
    drop(watcher);
    Ok(())
}

/// Stops the policy watcher when the server stops, however it stops.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
