//! NodeResourcesBalancedAllocation: nodes whose resources would be used in more even proportions
//! once the pod is placed score higher. kube-scheduler 1.37 scores the change the pod makes:
//! `balance = 100 × (1 − standard deviation of the requested fractions)` with and without the
//! pod, then `50 + (50 + balance with − balance without) / 2` (integer division), in 50..=100.
//!
//! Mirrors kube-scheduler's `pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go`
//! (`balancedResourceScorer`, `balancedResourceScore`). The plugin has no filter and no
//! normalization; a best-effort pod skips it (kubernetes#129138). The plain pass computes the cpu
//! and memory case with the same operations (`plain_resource_scores` in the framework, and
//! `engine/accel/columns.rs`).

use super::super::MAX_NODE_SCORE;
use crate::engine::hot::NodeHot;
use crate::engine::resources::ResourceName;
use crate::engine::snapshot::NodeView;

/// `balancedResourceScore`'s last step: `100 × (1 − std)`, truncated.
#[inline(always)]
pub fn balance(std: f64) -> i64 {
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// `balancedResourceScorer`: the balance with the pod against the balance without it, brought
/// back to [50, 100] (both balances are in [50, 100], so the sum is never negative).
#[inline(always)]
pub fn improvement(with_pod: i64, without_pod: i64) -> i64 {
    MAX_NODE_SCORE / 2 + (MAX_NODE_SCORE / 2 + with_pod - without_pod) / 2
}

/// Score: BalancedAllocation over exactly cpu and memory: the two-fraction case, from the hot fields.
#[inline]
pub fn score_cpu_memory(requests: &[i64], h: &NodeHot) -> i64 {
    let fraction = |used: i64, alloc: i64| (used as f64 / alloc as f64).min(1.0);
    let std = |cpu: i64, memory: i64| {
        if h.alloc_cpu != 0 && h.alloc_memory != 0 {
            ((fraction(cpu, h.alloc_cpu) - fraction(memory, h.alloc_memory)) / 2.0).abs()
        } else {
            0.0
        }
    };
    let with_pod = balance(std(
        h.req_cpu.saturating_add(requests[0]),
        h.req_memory.saturating_add(requests[1]),
    ));
    improvement(with_pod, balance(std(h.req_cpu, h.req_memory)))
}

/// `balancedResourceScore` over the fractions `used / alloc` (capped at 1) of the resources with
/// a capacity.
fn balance_of(pairs: &[(i64, i64)]) -> i64 {
    let fractions = pairs
        .iter()
        .filter(|(alloc, _)| *alloc != 0)
        .map(|(alloc, used)| (*used as f64 / *alloc as f64).min(1.0));
    let (n, total) = fractions.clone().fold((0usize, 0f64), |(n, t), f| (n + 1, t + f));
    let std = match n {
        0 | 1 => 0.0,
        2 => {
            let mut two = fractions;
            let (a, b) = (two.next().unwrap_or(0.0), two.next().unwrap_or(0.0));
            ((a - b) / 2.0).abs()
        }
        _ => {
            let mean = total / n as f64;
            (fractions.map(|f| (f - mean) * (f - mean)).sum::<f64>() / n as f64).sqrt()
        }
    };
    balance(std)
}

/// Score: BalancedAllocation over any `resources`, given the pod's `requests` of each
/// (`calculateNodeAllocatableRequest`: a resource the node has no capacity of, or an extended
/// resource the pod does not request, is left out of both balances).
pub fn score_general(resources: &[ResourceName], requests: &[i64], node: &NodeView<'_>) -> i64 {
    let mut with_pod = Vec::with_capacity(resources.len());
    let mut without_pod = Vec::with_capacity(resources.len());
    for (resource, pod_request) in resources.iter().zip(requests) {
        let (alloc, req) = super::allocatable_and_requested(resource, node, *pod_request, true);
        if alloc == 0 {
            continue;
        }
        with_pod.push((alloc, req));
        without_pod.push((alloc, req.saturating_sub(*pod_request)));
    }
    improvement(balance_of(&with_pod), balance_of(&without_pod))
}

/// The plugin in the framework's contract: [`score_cpu_memory`] when the profile balances cpu
/// and memory only, [`score_general`] otherwise; 0 for a pod it skips (no requests to balance).
#[derive(Debug, Clone, Copy)]
pub struct NodeResourcesBalancedAllocation;

impl crate::engine::plugins::contract::Score for NodeResourcesBalancedAllocation {
    /// (cpu and memory only, the resources balanced, the pod's requests per resource).
    type In<'a> = (bool, &'a [ResourceName], Option<&'a [i64]>);
    #[inline(always)]
    fn score((cpu_memory, resources, requests): Self::In<'_>, node: &NodeView<'_>) -> i64 {
        let Some(requests) = requests else { return 0 };
        if cpu_memory {
            return score_cpu_memory(requests, node.hot);
        }
        score_general(resources, requests, node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::plugins::testing::{node, only, pod, scores, snapshot};
    use crate::engine::policy::{ScorePlugin as S, ScoringStrategy};

    /// `balanced_allocation_test.go`'s arithmetic over cpu and memory: requested fractions with
    /// and without the pod to `100 × (1 − |fc − fm| / 2)` each, then `50 + (50 + with − without) / 2`.
    #[test]
    fn score_table() {
        let hot = |alloc_cpu, alloc_memory, req_cpu, req_memory| NodeHot {
            alloc_cpu,
            alloc_memory,
            req_cpu,
            req_memory,
            ..NodeHot::default()
        };
        let cases = [
            ("nothing requested", hot(4000, 10000, 0, 0), [0, 0], 75),
            // With the pod 3/4 and 1/2 (87), without it 0 and 0 (100): 50 + 37 / 2.
            ("3/4 and 1/2 on an empty node", hot(4000, 10000, 0, 0), [3000, 5000], 68),
            ("equal fractions", hot(4000, 10000, 1000, 2500), [1000, 2500], 75),
            // With 1 and 1/2 (75), without 1 and 0 (50): the pod improves the balance.
            ("over capacity counts as 1", hot(4000, 10000, 4000, 0), [4000, 5000], 87),
            ("a node without memory", hot(4000, 0, 0, 0), [3000, 5000], 75),
            // The report's example: node 1/4 and 1/2 (87), with the pod 1/2 and 5/8 (93): 78.
            ("kube's own example", hot(4000, 8000, 1000, 4000), [1000, 1000], 78),
        ];
        for (name, h, requests, want) in cases {
            assert_eq!(score_cpu_memory(&requests, &h), want, "{name}");
        }
    }

    #[test]
    fn balanced_allocation_matches_kube_scheduler() {
        // balanced_allocation_test.go: cpu fraction 3000/4000 = 0.75, memory 5000/10000 = 0.5,
        // std = |0.75 - 0.5| / 2 = 0.125 → (1 - 0.125) × 100 = 87 with the pod; the empty node's
        // balance is 100; 50 + (50 + 87 − 100) / 2 = 68.
        let snap = snapshot(vec![node("n", 4000, 10000)]);
        let prof = only(S::NodeResourcesBalancedAllocation, ScoringStrategy::LeastAllocated);
        assert_eq!(scores(&prof, &snap, &pod("p", 3000, 5000)), [("n".into(), 68)]);
        // Best-effort pods skip the plugin (kubernetes#129138).
        assert_eq!(scores(&prof, &snap, &pod("q", 0, 0)), [("n".into(), 0)]);
    }
}
