//! The Dynamic Resource Allocation objects (`resource.k8s.io/v1`) the DynamicResources plugin
//! reads (`plugins::dynamicresources`): DeviceClasses, ResourceClaims, ResourceSlices and
//! DeviceTaintRules (applied to the slices' devices by `device_taint_rules`), validated and kept
//! in a snapshot as copy-on-write maps that deltas change. ResourceClaimTemplates are not
//! here: kube-scheduler never reads them (the cluster's resourceclaim controller turns them into
//! claims, and a pod waits until its claims exist).
//!
//! Names follow the API: a device is identified by driver, pool and device name
//! ([`DeviceId`]); attribute and capacity names are fully qualified (`domain/id`; an unqualified
//! name in a slice is qualified with the slice's driver when the slice is read).

mod index;
mod objects;

pub use index::*;
pub use objects::*;
