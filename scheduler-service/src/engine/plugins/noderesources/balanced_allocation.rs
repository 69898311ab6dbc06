//! NodeResourcesBalancedAllocation: nodes whose resources would be used in the most even
//! proportions (after placing the pod) score higher: `100 × (1 − standard deviation of the
//! requested fractions)`.
//!
//! Mirrors kube-scheduler's `pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go`.
//! The plugin has no filter and no normalization; a best-effort pod skips it (kubernetes#129138).
//! The plain pass computes the cpu and memory case with the same operations
//! (`plain_resource_scores` in the framework, and `engine/accel/columns.rs`).

use super::super::MAX_NODE_SCORE;
use crate::engine::hot::NodeHot;
use crate::engine::resources::ResourceName;
use crate::engine::snapshot::NodeView;

/// Score: BalancedAllocation over exactly cpu and memory: the two-fraction case, from the hot fields.
#[inline]
pub fn score_cpu_memory(requests: &[i64], h: &NodeHot) -> i64 {
    {
        let fraction = |used: i64, req: i64, alloc: i64| (used.saturating_add(req) as f64 / alloc as f64).min(1.0);
        let std = if h.alloc_cpu != 0 && h.alloc_memory != 0 {
            let fc = fraction(h.req_cpu, requests[0], h.alloc_cpu);
            let fm = fraction(h.req_memory, requests[1], h.alloc_memory);
            ((fc - fm) / 2.0).abs()
        } else {
            0.0
        };
        ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
    }
}

/// Score: BalancedAllocation over any `resources`, given the pod's `requests` of each.
pub fn score_general(resources: &[ResourceName], requests: &[i64], node: &NodeView<'_>) -> i64 {
    let mut fractions = [0f64; 8];
    let mut extra = Vec::new();
    let mut n = 0usize;
    let mut total = 0f64;
    for (resource, pod_request) in resources.iter().zip(requests) {
        let (alloc, req) = super::allocatable_and_requested(resource, node, *pod_request, true);
        if alloc == 0 {
            continue;
        }
        let f = (req as f64 / alloc as f64).min(1.0);
        total += f;
        if n < fractions.len() {
            fractions[n] = f;
        } else {
            extra.push(f);
        }
        n += 1;
    }
    let all = fractions[..n.min(fractions.len())].iter().chain(&extra);
    let std = match n {
        0 | 1 => 0.0,
        2 => ((fractions[0] - fractions[1]) / 2.0).abs(),
        _ => {
            let mean = total / n as f64;
            (all.map(|f| (f - mean) * (f - mean)).sum::<f64>() / n as f64).sqrt()
        }
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
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

    /// `balanced_allocation_test.go`'s arithmetic over cpu and memory: requested fractions (after
    /// placing the pod) to `100 × (1 − |fc − fm| / 2)`.
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
            ("nothing requested", hot(4000, 10000, 0, 0), [0, 0], 100),
            ("3/4 and 1/2", hot(4000, 10000, 0, 0), [3000, 5000], 87),
            ("equal fractions", hot(4000, 10000, 1000, 2500), [1000, 2500], 100),
            ("over capacity counts as 1", hot(4000, 10000, 4000, 0), [4000, 5000], 75),
            ("a node without memory", hot(4000, 0, 0, 0), [3000, 5000], 100),
        ];
        for (name, h, requests, want) in cases {
            assert_eq!(score_cpu_memory(&requests, &h), want, "{name}");
        }
    }

    #[test]
    fn balanced_allocation_matches_kube_scheduler() {
        // balanced_allocation_test.go: cpu fraction 3000/4000 = 0.75, memory 5000/10000 = 0.5,
        // std = |0.75 - 0.5| / 2 = 0.125 → (1 - 0.125) × 100 = 87.
        let snap = snapshot(vec![node("n", 4000, 10000)]);
        let prof = only(S::NodeResourcesBalancedAllocation, ScoringStrategy::LeastAllocated);
        assert_eq!(scores(&prof, &snap, &pod("p", 3000, 5000)), [("n".into(), 87)]);
        // Best-effort pods skip the plugin (kubernetes#129138).
        assert_eq!(scores(&prof, &snap, &pod("q", 0, 0)), [("n".into(), 0)]);
    }
}
