//! The gRPC layer: a thin adapter that maps `placement.v1` messages to the engine and back.

pub mod budget;
pub mod cache;
pub mod codec;
pub mod conn;
pub mod convert;
pub mod metrics;
pub mod policy_file;
pub mod server;
pub mod service;
mod status;
pub mod wire;

pub use metrics::Metrics;
pub use policy_file::{PolicyFileConfig, PolicyFileError, PolicyWatcher};
pub use server::{serve, ServeError, ServerConfig, ServerTls};
pub use service::{PlacementApi, PolicySource, ServiceConfig, ERROR_DOMAIN, SNAPSHOT_NOT_FOUND};
