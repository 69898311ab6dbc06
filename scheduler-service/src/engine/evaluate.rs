//! The general path's entries for one pod's pass over the nodes, as the scheduling cycle
//! ([`super::cycle`]) calls them: the framework's filters and scores on every node
//! ([`Evaluator::evaluate`], `framework.rs`), or, when the pod is a plain one, the fast path's plain
//! pass (`accel/plain.rs`), which gives the same candidates, extrema and totals with less work.
//!
//! The choice is made here, on the general path: the fast path is entered from it, never the
//! other way round (`scripts/engine-deps.py` checks that no general-path entry is defined under
//! `accel/` and that no fast-path module imports the cycle's modules).

use super::accel::plain::BestNode;
use super::batch_usage::BatchUsage;
use super::framework::{Deadline, DeadlinePassed, Evaluator};
use super::plan::PodPlan;
use super::topology::Placed;

impl Evaluator<'_> {
    /// Whether the plain pass applies to the pod: no topology state, no node name, not selecting
    /// per node, resource scores on cpu and memory only ([`PodPlan::plain`]), and the fast path
    /// not turned off.
    fn plain_applies(&self, plan: &PodPlan<'_>) -> bool {
        self.fast.allow_plain && plan.plain && plan.topo.is_none()
    }

    /// [`Evaluator::evaluate`] without reasons: the plain pass when it applies.
    pub(in crate::engine) fn evaluate_quiet(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        placed: &Placed<'_>,
        deadline: Deadline,
    ) -> Result<(), DeadlinePassed> {
        if self.plain_applies(plan) {
            self.evaluate_plain(plan, usage, deadline)
        } else {
            self.evaluate(plan, usage, placed, deadline, None)
        }
    }

    /// Only the best feasible node and the count of feasible ones, for a pod whose candidates no
    /// later pod re-scores: the plain pass keeping each node class's best node
    /// ([`Evaluator::plain_best`]). `None` when the plain pass does not apply (the caller then
    /// takes [`Evaluator::evaluate_quiet`]).
    pub(in crate::engine) fn evaluate_best(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
    ) -> Option<Result<BestNode, DeadlinePassed>> {
        self.plain_applies(plan).then(|| self.plain_best(plan, usage, deadline))
    }
}
