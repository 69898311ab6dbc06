//! NodeResourcesFit and NodeResourcesBalancedAllocation, as kube-scheduler's
//! `pkg/scheduler/framework/plugins/noderesources` has them: [`fit`] (`fit.go`, with the scoring
//! strategies of `least_allocated.go`, `most_allocated.go` and `requested_to_capacity_ratio.go`)
//! and [`balanced_allocation`] (`balanced_allocation.go`); what both read of a node is here
//! (`resource_allocation.go`).

pub mod balanced_allocation;
pub mod fit;
pub mod placement_score;

use crate::engine::resources::ResourceName;
use crate::engine::snapshot::NodeView;

/// kube-scheduler's `calculateResourceAllocatableRequest`: (allocatable, requested after placing the pod).
#[inline]
pub fn allocatable_and_requested(
    resource: &ResourceName,
    node: &NodeView<'_>,
    pod_request: i64,
    use_requested: bool,
) -> (i64, i64) {
    let h = node.hot;
    match resource {
        ResourceName::Cpu => {
            let used = if use_requested { h.req_cpu } else { h.non_zero_cpu };
            (h.alloc_cpu, used.saturating_add(pod_request))
        }
        ResourceName::Memory => {
            let used = if use_requested { h.req_memory } else { h.non_zero_memory };
            (h.alloc_memory, used.saturating_add(pod_request))
        }
        ResourceName::EphemeralStorage => (h.alloc_ephemeral, h.req_ephemeral.saturating_add(pod_request)),
        ResourceName::Pods => (0, 0),
        ResourceName::Scalar(name) => {
            // An extended resource the pod does not request is left out of the score.
            if pod_request == 0 {
                return (0, 0);
            }
            let alloc = node.entry.spec.allocatable.scalar(name);
            if alloc == 0 {
                return (0, 0);
            }
            (alloc, node.usage.requested.scalar(name).saturating_add(pod_request))
        }
    }
}
