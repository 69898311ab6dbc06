//! Node partitions: how a binder deciding several batches at once on different replicas keeps
//! them off each other's nodes. Each node the binder sends carries its partition in the label
//! [`PARTITION_LABEL`]; a batch decided on partition `k` has its pods select `k` on that label,
//! so two batches in flight never place pods on the same node. `binder-agent`'s
//! `--batches-in-flight` and `placement-load`'s partitioned runs use it.

pub use crate::labels::PARTITION_LABEL;

/// The partition of node `name` among `count`: a stable hash of the name, so every binder,
/// replica and restart agrees.
pub fn partition_of(name: &str, count: u32) -> u32 {
    (xxhash_rust::xxh3::xxh3_64(name.as_bytes()) % u64::from(count.max(1))) as u32
}
