//! VolumeBinding: a pod's claims must be bound to volumes reachable from the node, or be
//! bindable or provisionable there.
//!
//! Mirrors kube-scheduler's `pkg/scheduler/framework/plugins/volumebinding/`, split as it is:
//! [`volume_binding`] is `volume_binding.go` (PreFilter, Filter, the PreFilter message
//! [`volume_binding::UNBOUND_IMMEDIATE`]) and [`binder`] is `binder.go` (`FindPodVolumes`, the
//! reasons a node is rejected for, and the score of `StorageCapacityScoring`, beta and on in
//! kube-scheduler 1.37, with VolumeBindingArgs' default shape). Reserve and PreBind are the
//! binder-agent's (the placement carries the choices, [`crate::engine::volumes::VolumeChoice`]).

pub mod binder;
pub mod volume_binding;

pub use binder::Conflict;
pub use volume_binding::PreFilterState;

/// The plugin in the framework's contract: [`PreFilterState::filter`] on the node (the
/// binder's `FindPodVolumes`), each of its reasons given.
#[derive(Debug, Clone, Copy)]
pub struct VolumeBinding;

impl crate::engine::plugins::contract::Filter for VolumeBinding {
    /// The pod's PreFilter state and the storage objects (`None`: the plugin skips the pod).
    type In<'a> = Option<(&'a PreFilterState, &'a crate::engine::volumes::StorageObjects)>;
    type Rejection = Conflict;
    #[inline(always)]
    fn filter(
        state: Self::In<'_>,
        node: &crate::engine::snapshot::NodeView<'_>,
        reject: &mut impl FnMut(Conflict),
    ) -> bool {
        match state.map(|(s, storage)| s.filter(storage, &node.entry.spec)) {
            Some(Err(conflicts)) => {
                for c in conflicts {
                    reject(c);
                }
                false
            }
            _ => true,
        }
    }
}

impl crate::engine::plugins::contract::Score for VolumeBinding {
    /// The pod's PreFilter state and the storage objects (`None`: the pod has no claims).
    type In<'a> = Option<(&'a PreFilterState, &'a crate::engine::volumes::StorageObjects)>;
    #[inline]
    fn score(state: Self::In<'_>, node: &crate::engine::snapshot::NodeView<'_>) -> i64 {
        state.map_or(0, |(s, storage)| s.score(storage, &node.entry.spec))
    }
}

#[cfg(test)]
mod tests;
