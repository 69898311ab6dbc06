//! The placement decision service: a scheduling engine with no I/O ([`engine`]) and the thin gRPC
//! layer around it ([`grpc`]).

pub mod allocator;
pub mod engine;
pub mod extender;
pub mod grpc;
pub mod labels;
pub mod partition;
pub mod procstat;
/// Deterministic synthetic clusters and pending pods (API messages) for benchmarks and tests.
pub mod synth;
pub mod telemetry;

/// The `placement.v1` API, generated from `proto/` at build time.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    tonic::include_proto!("placement.v1");

    /// Encoded file descriptor set of the API, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/placement_descriptor.bin"));
}
