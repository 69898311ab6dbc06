//! DynamicResources (Dynamic Resource Allocation, `resource.k8s.io/v1`), kube-scheduler's
//! `framework/plugins/dynamicresources`:
//!
//! - `dynamic_resources.rs`: the plugin (`dynamicresources.go`): PreFilter ([`PodDevices`]),
//!   Filter, Score and Reserve, and what a batch allocated ([`BatchDevices`]);
//! - [`allocator`]: kube's structured device allocator (`k8s.io/dynamic-resource-allocation/
//!   structured`'s incubating implementation, the one kube 1.37's default feature gates select);
//! - [`cel`]: the CEL environment of device selectors (`k8s.io/dynamic-resource-allocation/cel`),
//!   with the libraries of kube's environment for them, compiled once per expression.
//!
//! The allocator and the CEL environment are pure: they read the DRA objects of
//! `engine::devices` and a node, and keep no state between calls beyond compiled selectors.
//!
//! ```text
//!  PodPlan::new ──> PodDevices::pre_filter (claims exist, classes exist, allocated ones pin nodes)
//!                        │
//!  run_filter ─────> PodDevices::filter(node) ──> Allocator::allocate(node, claims to allocate)
//!                        │                              │ pools → slices → devices (first fit,
//!                        │                              │ backtracking), CEL selectors, constraints,
//!                        │                              │ taints, counters
//!  the chosen node ─> PodDevices::reserve ──> BatchDevices::record (devices no one else's)
//!                        └──> Decision::Node.devices ──> Placement.claim_allocations (binder PreBind)
//! ```

pub mod allocator;
pub mod cel;
pub mod device_packing;
mod dynamic_resources;
pub mod extended_resources;

pub use allocator::diagnose::{FailureKind, RequestFailure};
pub use dynamic_resources::{
    selectors, BatchDevices, ClaimAllocation, ClaimDeallocation, DevicePacking, DynamicResources, PodDevices,
    Rejection, CANNOT_ALLOCATE, DEALLOCATED, FIRST_AVAILABLE_MAX, NOT_AVAILABLE,
};

#[cfg(test)]
mod allocator_tests;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod lifecycle_tests;

#[cfg(test)]
mod taint_rule_tests;
