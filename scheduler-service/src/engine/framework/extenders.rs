//! The extenders' part of a pod's cycle (kube-scheduler's `findNodesThatPassExtenders` and the
//! extenders' `prioritizeNodes` in `schedule_one.go`).

use super::*;

/// What the extenders made of one pod's feasible nodes.
pub(in crate::engine) struct ExtenderOutcome {
    /// The best node left and its total (extenders' scores added).
    pub(in crate::engine) best: Option<(usize, i64)>,
    /// How many nodes are left.
    pub(in crate::engine) feasible: usize,
    /// Nodes turned down with a message, evicting pods might help.
    pub(in crate::engine) failed: Vec<(usize, Arc<str>)>,
    /// Nodes turned down with a message, for good.
    pub(in crate::engine) failed_unresolvable: Vec<(usize, Arc<str>)>,
    /// A failed extender that is not ignorable: the pod's scheduling fails with this.
    pub(in crate::engine) error: Option<String>,
}

impl Evaluator<'_> {
    /// kube-scheduler's `findNodesThatPassExtenders`, then `prioritizeNodes` over what is left,
    /// as its `schedulePod` orders them: the candidates of `plan` are narrowed to the nodes the
    /// extenders kept and scored again (PodTopologySpread's PreScore and every normalization see
    /// only those nodes), then the extenders' scores are added. Prioritize runs only when more
    /// than one node is left, as kube-scheduler scores nothing then. The candidates no longer
    /// hold every feasible node afterwards: the next pod must not re-score from them.
    pub(in crate::engine) fn call_extenders(
        &mut self,
        hook: &dyn ExtenderHook,
        plan: &PodPlan<'_>,
        usage: &BatchUsage,
        placed: &Placed<'_>,
    ) -> ExtenderOutcome {
        let pod = plan.pod;
        let nodes: Vec<usize> = self.candidates.iter().map(|c| c.index as usize).collect();
        let mut outcome = ExtenderOutcome {
            best: None,
            feasible: 0,
            failed: Vec::new(),
            failed_unresolvable: Vec::new(),
            error: None,
        };
        let filtered = match hook.filter(self.snapshot, pod, &nodes) {
            Ok(f) => f,
            Err(e) => {
                outcome.error = Some(e);
                return outcome;
            }
        };
        let mut keep = vec![false; self.snapshot.nodes().len()];
        for &i in &filtered.feasible {
            if let Some(k) = keep.get_mut(i) {
                *k = true;
            }
        }
        self.candidates.retain(|c| keep[c.index as usize]);
        self.topo_scores(plan, placed);
        self.normalize();
        let mut kept: Vec<(u32, i64)> = self.candidates.iter().map(|c| (c.index, c.total)).collect();
        if kept.len() > 1 {
            let indices: Vec<usize> = kept.iter().map(|(i, _)| *i as usize).collect();
            let mut added = vec![0i64; self.snapshot.nodes().len()];
            for (i, score) in hook.prioritize(self.snapshot, pod, &indices) {
                if let Some(a) = added.get_mut(i) {
                    *a = a.saturating_add(score);
                }
            }
            for (i, total) in kept.iter_mut() {
                *total = total.saturating_add(added[*i as usize]);
            }
        }
        outcome.feasible = kept.len();
        outcome.best = best_candidate(
            kept.iter(),
            |(i, total)| (*total, *i),
            |(i, _)| plan.tie_break(usage.hot[*i as usize].name_hash),
        )
        .map(|(i, total)| (*i as usize, *total));
        outcome.failed = filtered.failed;
        outcome.failed_unresolvable = filtered.failed_unresolvable;
        outcome
    }
}
