//! kube-scheduler's GangScheduling (`framework/plugins/gangscheduling/gangscheduling.go`): its
//! PlacementFeasible, which the PodGroup cycle ([`crate::engine::podgroup`]) asks after each
//! member placed on a placement. Its PreEnqueue and Permit are the PodGroup cycle's and the
//! binder's (the registry's row: `Runs::PodGroupCycle`).

/// kube's `GangScheduling.PlacementFeasible`: `Ok(true)` when minCount is met, `Ok(false)` while
/// it may still be (Wait), `Err(reason)` when it cannot be any more.
pub(in crate::engine) fn placement_feasible(
    min_count: u32,
    scheduled: usize,
    remaining: usize,
) -> Result<bool, String> {
    let min = min_count as usize;
    if remaining + scheduled < min {
        return Err(format!(
            "minCount ({min}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"
        ));
    }
    Ok(scheduled >= min)
}
