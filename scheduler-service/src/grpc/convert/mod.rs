//! Validation and conversion of API messages into engine types.
//!
//! Every check names the offending field with its full path, the way a caller wrote it, for example
//! `pods[3].containers[0].requests["cpu"]: invalid quantity "1.2.3"`.
//!
//! The conversions sit in one file per object family: `pod.rs`, `node.rs`, `storage.rs`, `pdb.rs`,
//! and `snapshot.rs` for full snapshots, deltas and namespaces. `fields.rs` holds the field paths,
//! their errors and the checks every family shares, `resources.rs` quantities and resource lists,
//! `selectors.rs` label and node selectors. This module declares them and re-exports their public
//! items.

mod devices;
mod fields;
mod node;
mod pdb;
mod pod;
mod podgroups;
mod resources;
mod selectors;
mod snapshot;
mod storage;

pub use devices::{
    allocation_result, device_class, device_delta, device_failure_out, devices, extended_resource_claim, pod_claims,
    resource_claim, resource_slice,
};
pub use fields::{
    field_error, list, shown, FieldError, ECHO_CHARS, MAX_ANNOTATIONS_BYTES, MAX_FEATURES, MAX_LABEL_KEY_BYTES,
    MAX_LABEL_VALUE_BYTES, MAX_NAMESPACE_BYTES, MAX_NAME_BYTES,
};
pub use node::node;
pub use pdb::pdb;
pub use pod::{pod, pods, PARALLEL_PODS};
pub use podgroups::{composite_pod_group, composite_pod_groups, pod_group, pod_groups};
pub use snapshot::{delta, snapshot, SnapshotParts};
pub use storage::{claim, csi_driver, csi_node, persistent_volume, storage, storage_capacity, storage_class};
