//! The gRPC server: PlacementService, health, reflection (v1 and v1alpha), size limits, and
//! graceful shutdown that drains in-flight calls.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tonic::codegen::http;

use super::metrics::Metrics;
use super::service::{ConfigError, PlacementApi, ServiceConfig};
use crate::proto;
use crate::proto::placement_service_server::PlacementServiceServer;

/// Everything needed to run a decision replica.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Service limits and policies.
    pub service: ServiceConfig,
    /// Largest request or response message in bytes.
    pub max_message_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            service: ServiceConfig::default(),
            max_message_bytes: 256 << 20,
        }
    }
}

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Reflection could not be built from the descriptors.
    #[error("building reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The transport failed.
    #[error("serving gRPC: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Rewrites tonic's OUT_OF_RANGE for a request over the size limit to RESOURCE_EXHAUSTED, the code
/// gRPC's own implementations (C++, Java, Go) answer, so every client sees the standard status.
fn size_limit_status<B>(mut response: http::Response<B>) -> http::Response<B> {
    let headers = response.headers();
    let too_large = headers.get("grpc-status").is_some_and(|v| v == "11")
        && headers
            .get("grpc-message")
            .and_then(|m| m.to_str().ok())
            .is_some_and(|m| m.contains("message%20length%20too%20large") || m.contains("message length too large"));
    if too_large {
        response
            .headers_mut()
            .insert("grpc-status", http::HeaderValue::from_static("8"));
    }
    response
}

/// Serves PlacementService, health and reflection on `listener` until `shutdown` resolves, then
/// stops accepting calls, reports NOT_SERVING and waits for in-flight calls to finish.
pub async fn serve(
    listener: TcpListener,
    config: ServerConfig,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let api = PlacementApi::new(config.service, metrics)?;
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
    tonic::transport::Server::builder()
        .layer(tower::util::MapResponseLayer::new(
            size_limit_status::<tonic::body::Body>,
        ))
        .add_service(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(service)
        // TCP_NODELAY: without it every response waits for the client's delayed ACK (about 40 ms).
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown,
        )
        .await?;
    Ok(())
}
