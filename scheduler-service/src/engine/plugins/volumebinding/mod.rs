//! VolumeBinding: a pod's claims must be bound to volumes reachable from the node, or be
//! bindable or provisionable there.
//!
//! Mirrors kube-scheduler's `pkg/scheduler/framework/plugins/volumebinding/`, split as it is:
//! [`volume_binding`] is `volume_binding.go` (PreFilter, Filter, the PreFilter message
//! [`volume_binding::UNBOUND_IMMEDIATE`]) and [`binder`] is `binder.go` (`FindPodVolumes`, the
//! reasons a node is rejected for). Its score (`StorageCapacityScoring`, off by default in
//! kube-scheduler) is not implemented; Reserve and PreBind are the binder-agent's (the
//! placement carries the choices, [`crate::engine::volumes::VolumeChoice`]).

pub mod binder;
pub mod volume_binding;

pub use binder::Conflict;
pub use volume_binding::PreFilterState;

#[cfg(test)]
mod tests;
