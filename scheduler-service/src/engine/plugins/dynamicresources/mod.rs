//! DynamicResources (Dynamic Resource Allocation, `resource.k8s.io/v1`): kube's structured
//! device allocator ([`allocator`], after `k8s.io/dynamic-resource-allocation/structured`'s
//! incubating implementation) and the CEL environment of device selectors ([`cel`], after
//! `k8s.io/dynamic-resource-allocation/cel`). Both are pure: they read the DRA objects of
//! `engine::devices` and a node, and keep no state between calls beyond compiled selectors.

pub mod allocator;
pub mod cel;

#[cfg(test)]
mod allocator_tests;
