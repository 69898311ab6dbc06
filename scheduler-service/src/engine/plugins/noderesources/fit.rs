//! NodeResourcesFit: a node must have room for the pod's requests (and for one more pod); among
//! those that do, the scoring strategy prefers the emptiest (LeastAllocated), the fullest
//! (MostAllocated) or a shape of the requested share (RequestedToCapacityRatio).
//!
//! Mirrors kube-scheduler's `pkg/scheduler/framework/plugins/noderesources/fit.go` (Filter,
//! `fitsRequest`, and Score) with `least_allocated.go`, `most_allocated.go` and
//! `requested_to_capacity_ratio.go`. The plugin has no normalization. The plain pass scores
//! cpu and memory with the same arithmetic in floating point where it is exact
//! (`plain_resource_scores` in the framework, four nodes at a time in `engine/accel/columns.rs`):
//! `kernel_filters_and_scores_as_the_scalar_pass` and the plain-pass equivalence tests compare them.

use std::sync::Arc;

use super::super::scaled;
use crate::engine::hot::NodeHot;
use crate::engine::model::NodeSpec;
use crate::engine::policy::{ScoringStrategy, ShapePoint};
use crate::engine::resources::{ResourceName, Resources};
use crate::engine::snapshot::{NodeUsage, NodeView};

/// The reason of a node with no room for another pod (kube-scheduler's `Too many pods`).
pub const ERR_REASON_TOO_MANY_PODS: &str = "Too many pods";
/// The start of the reason of a node with too little of a resource: `Insufficient <resource>`.
pub const ERR_REASON_INSUFFICIENT: &str = "Insufficient";

/// kube-scheduler's `MaxCustomPriorityScore`: the scale of RequestedToCapacityRatio's shape.
pub const MAX_CUSTOM_PRIORITY_SCORE: i64 = 10;

/// Filter: kube-scheduler's `fitsRequest`, the pod count, then each requested resource; reports
/// each resource the node has too little of ([`ResourceName::Pods`] for the pod count).
#[inline]
pub fn fits(requests: &Resources, node: &NodeView<'_>, report: &mut impl FnMut(ResourceName)) -> bool {
    fits_delegating(requests, &[], node, report)
}

/// [`fits`], leaving to DynamicResources the extended resources in `dra` (those a DeviceClass
/// backs) on a node whose allocatable has none of them: kube's `shouldDelegateResourceToDRA`
/// (`noderesources/fit.go`, DRAExtendedResource).
#[inline]
pub fn fits_delegating(
    requests: &Resources,
    dra: &[Arc<str>],
    node: &NodeView<'_>,
    report: &mut impl FnMut(ResourceName),
) -> bool {
    let h = node.hot;
    let mut ok = true;
    if h.pod_count + 1 > h.allowed_pods {
        report(ResourceName::Pods);
        ok = false;
    }
    let req = requests;
    if req.is_zero() {
        return ok;
    }
    let mut check = |want: i64, have: i64, used: i64, name: &ResourceName| {
        if want > 0 && want > have.saturating_sub(used) {
            report(name.clone());
            ok = false;
        }
    };
    check(req.milli_cpu, h.alloc_cpu, h.req_cpu, &ResourceName::Cpu);
    check(req.memory, h.alloc_memory, h.req_memory, &ResourceName::Memory);
    check(
        req.ephemeral_storage,
        h.alloc_ephemeral,
        h.req_ephemeral,
        &ResourceName::EphemeralStorage,
    );
    for (name, want) in &req.scalars {
        if !dra.is_empty() && node.entry.spec.allocatable.scalar(name) <= 0 && dra.contains(name) {
            continue;
        }
        check(
            *want,
            node.entry.spec.allocatable.scalar(name),
            node.usage.requested.scalar(name),
            &ResourceName::Scalar(name.clone()),
        );
    }
    ok
}

/// NodeResourcesFit's check of the extended resources alone (as [`fits`] makes it).
#[inline]
pub fn fits_scalars(wanted: &[(Arc<str>, i64)], node: &NodeSpec, usage: &NodeUsage) -> bool {
    wanted.iter().all(|(name, want)| {
        *want <= 0
            || *want
                <= node
                    .allocatable
                    .scalar(name)
                    .saturating_sub(usage.requested.scalar(name))
    })
}

/// LeastAllocated's score of one resource (`least_allocated.go`): the free share, 0 to 100.
#[inline]
pub fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity <= 0 || requested > capacity {
        return 0;
    }
    scaled(capacity - requested.max(0), capacity)
}

/// MostAllocated's score of one resource (`most_allocated.go`): the requested share, 0 to 100.
#[inline]
pub fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity <= 0 {
        return 0;
    }
    scaled(requested.clamp(0, capacity), capacity)
}

/// RequestedToCapacityRatio's shape (`requested_to_capacity_ratio.go`): kube-scheduler's
/// `BuildBrokenLinearFunction` over a shape already scaled to 0..=100.
#[inline]
pub fn broken_linear(shape: &[ShapePoint], p: i64) -> i64 {
    for (i, point) in shape.iter().enumerate() {
        if p <= point.utilization {
            if i == 0 {
                return point.score;
            }
            let prev = shape[i - 1];
            return prev.score
                + (point.score - prev.score) * (p - prev.utilization) / (point.utilization - prev.utilization);
        }
    }
    shape.last().map_or(0, |p| p.score)
}

/// Score: NodeResourcesFit's score when it weighs exactly cpu then memory with Least/MostAllocated:
/// the same arithmetic as [`score_general`], from the node's hot fields.
#[inline]
pub fn score_cpu_memory(
    strategy: &ScoringStrategy,
    (w_cpu, w_memory): (i64, i64),
    requests: &[i64],
    h: &NodeHot,
) -> i64 {
    let score = |req: i64, alloc: i64| match strategy {
        ScoringStrategy::MostAllocated => most_requested_score(req, alloc),
        _ => least_requested_score(req, alloc),
    };
    if h.alloc_cpu != 0 && h.alloc_memory != 0 {
        let cpu = score(h.non_zero_cpu.saturating_add(requests[0]), h.alloc_cpu);
        let memory = score(h.non_zero_memory.saturating_add(requests[1]), h.alloc_memory);
        return weigh(cpu, memory, (w_cpu, w_memory));
    }
    // A resource the node has none of is left out, weight included.
    let (mut node_score, mut weight_sum) = (0i64, 0i64);
    if h.alloc_cpu != 0 {
        node_score += score(h.non_zero_cpu.saturating_add(requests[0]), h.alloc_cpu) * w_cpu;
        weight_sum += w_cpu;
    }
    if h.alloc_memory != 0 {
        node_score += score(h.non_zero_memory.saturating_add(requests[1]), h.alloc_memory) * w_memory;
        weight_sum += w_memory;
    }
    if weight_sum == 0 {
        0
    } else {
        node_score / weight_sum
    }
}

/// NodeResourcesFit's weighted score from its cpu and memory scores on a node whose cpu and
/// memory capacities are both non-zero (both passes weigh with it).
#[inline(always)]
pub fn weigh(cpu: i64, memory: i64, (w_cpu, w_memory): (i64, i64)) -> i64 {
    if w_cpu == w_memory {
        // (a·w + b·w) / 2w is exactly (a + b) / 2 for w > 0: no division by a run-time value.
        return (cpu + memory) / 2;
    }
    let weight_sum = w_cpu + w_memory;
    if weight_sum == 0 {
        0
    } else {
        (cpu * w_cpu + memory * w_memory) / weight_sum
    }
}

/// Score: NodeResourcesFit's score for any resources (`resources` with their weights, the
/// pod's `requests` of each, scoring defaults for cpu and memory) and strategy (`shape`:
/// RequestedToCapacityRatio's, scaled to 0..=100).
pub fn score_general(
    strategy: &ScoringStrategy,
    shape: &[ShapePoint],
    resources: &[(ResourceName, i64)],
    requests: &[i64],
    node: &NodeView<'_>,
) -> i64 {
    let mut node_score = 0i64;
    let mut weight_sum = 0i64;
    let rtcr = matches!(strategy, ScoringStrategy::RequestedToCapacityRatio { .. });
    for ((resource, weight), pod_request) in resources.iter().zip(requests) {
        let (alloc, req) = super::allocatable_and_requested(resource, node, *pod_request, false);
        if alloc == 0 {
            continue;
        }
        let score = match strategy {
            ScoringStrategy::LeastAllocated => least_requested_score(req, alloc),
            ScoringStrategy::MostAllocated => most_requested_score(req, alloc),
            ScoringStrategy::RequestedToCapacityRatio { .. } => {
                let s = if req > alloc {
                    broken_linear(shape, 100)
                } else {
                    broken_linear(shape, scaled(req.max(0), alloc))
                };
                // RequestedToCapacityRatio only counts the weights of resources that scored.
                if s <= 0 {
                    continue;
                }
                s
            }
        };
        node_score += score * weight;
        weight_sum += weight;
    }
    if weight_sum == 0 {
        return 0;
    }
    if rtcr {
        (node_score as f64 / weight_sum as f64).round() as i64
    } else {
        node_score / weight_sum
    }
}

/// The plugin in the framework's contract: Filter is [`fits`]; Score is [`score_cpu_memory`]
/// when the profile scores cpu and memory only, [`score_general`] otherwise.
#[derive(Debug, Clone, Copy)]
pub struct NodeResourcesFit;

/// What NodeResourcesFit's Score reads: the profile's strategy and resources, the pod's requests.
#[derive(Debug, Clone, Copy)]
pub struct ScoreInput<'a> {
    /// The scoring strategy.
    pub strategy: &'a ScoringStrategy,
    /// The cpu and memory weights when the profile scores those two only.
    pub cpu_memory: Option<(i64, i64)>,
    /// RequestedToCapacityRatio's shape.
    pub shape: &'a [ShapePoint],
    /// The resources scored and their weights.
    pub resources: &'a [(ResourceName, i64)],
    /// The pod's requests, per resource scored.
    pub requests: &'a [i64],
}

impl crate::engine::plugins::contract::Filter for NodeResourcesFit {
    /// The pod's requests, and those of its extended resources a DeviceClass backs.
    type In<'a> = (&'a Resources, &'a [Arc<str>]);
    type Rejection = ResourceName;
    #[inline(always)]
    fn filter(
        (requests, dra): (&Resources, &[Arc<str>]),
        node: &NodeView<'_>,
        reject: &mut impl FnMut(ResourceName),
    ) -> bool {
        fits_delegating(requests, dra, node, reject)
    }
}

impl crate::engine::plugins::contract::Score for NodeResourcesFit {
    type In<'a> = ScoreInput<'a>;
    #[inline(always)]
    fn score(i: ScoreInput<'_>, node: &NodeView<'_>) -> i64 {
        if let Some(weights) = i.cpu_memory {
            return score_cpu_memory(i.strategy, weights, i.requests, node.hot);
        }
        score_general(i.strategy, i.shape, i.resources, i.requests, node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::plugins::testing::{node, only, pod, rank, scores, snapshot};
    use crate::engine::policy::{FilterPlugin as F, ScorePlugin as S};
    use crate::engine::snapshot::Snapshot;

    /// `fit_test.go`'s filter cases: the pod's requests against the node's free room, every
    /// insufficient resource reported, the pod count first.
    #[test]
    fn filter_table() {
        let gpu = || ResourceName::Scalar(Arc::from("example.com/gpu"));
        // (name, cpu, memory, pods on the node, gpus) → the resources reported.
        type Case = (&'static str, i64, i64, i64, i64, Vec<ResourceName>);
        let cases: [Case; 6] = [
            ("fits", 1000, 1000, 0, 0, vec![]),
            ("no requests", 0, 0, 0, 0, vec![]),
            ("too little cpu", 3000, 1000, 0, 0, vec![ResourceName::Cpu]),
            (
                "too little of both",
                3000,
                3000,
                0,
                0,
                vec![ResourceName::Cpu, ResourceName::Memory],
            ),
            ("no room for a pod", 0, 0, 110, 0, vec![ResourceName::Pods]),
            ("too little of an extended resource", 0, 0, 0, 2, vec![gpu()]),
        ];
        for (name, cpu, memory, pods, gpus, want) in cases {
            let mut n = node("n", 2000, 2000);
            n.allocatable.set(&gpu(), 1);
            let entry = crate::engine::snapshot::NodeEntry {
                spec: Arc::new(n),
                name_hash: 0,
                class: 0,
                images: Arc::from(Vec::new()),
                usage: NodeUsage {
                    pod_count: pods,
                    ..NodeUsage::default()
                },
            };
            let hot = NodeHot::of(&entry, &entry.usage);
            let view = NodeView {
                index: 0,
                hot: &hot,
                entry: &entry,
                usage: &entry.usage,
            };
            let mut p = pod("p", cpu, memory);
            p.requests.set(&gpu(), gpus);
            let mut got = Vec::new();
            let fit = fits(&p.requests, &view, &mut |r| got.push(r));
            assert_eq!(got, want, "{name}");
            assert_eq!(fit, want.is_empty(), "{name}");
        }
    }

    /// The strategies' per-resource scores (`least_allocated_test.go`, `most_allocated_test.go`,
    /// `requested_to_capacity_ratio_test.go`'s shape (0,10),(100,0) scaled to 0..=100).
    #[test]
    fn score_table() {
        let shape = [
            ShapePoint {
                utilization: 0,
                score: 100,
            },
            ShapePoint {
                utilization: 100,
                score: 0,
            },
        ];
        // (requested, capacity) → least, most, shape at the requested share.
        let cases = [
            ((3000, 4000), (25, 75, 25)),
            ((3000, 6000), (50, 50, 50)),
            ((5000, 10000), (50, 50, 50)),
            ((0, 4000), (100, 0, 100)),
            ((5000, 4000), (0, 100, 0)),
            ((1, 0), (0, 0, 100)),
        ];
        for ((requested, capacity), (least, most, shaped)) in cases {
            let at = |r: i64, c: i64| broken_linear(&shape, if c <= 0 { 0 } else { scaled(r.min(c), c) });
            assert_eq!(
                least_requested_score(requested, capacity),
                least,
                "least {requested}/{capacity}"
            );
            assert_eq!(
                most_requested_score(requested, capacity),
                most,
                "most {requested}/{capacity}"
            );
            assert_eq!(at(requested, capacity), shaped, "shape {requested}/{capacity}");
        }
        assert_eq!(weigh(37, 50, (1, 1)), 43, "equal weights: the mean, truncated");
        assert_eq!(weigh(25, 50, (1, 3)), 43, "(25 + 150) / 4");
        assert_eq!(weigh(25, 50, (0, 2)), 50, "memory alone");
    }

    #[test]
    fn resources_fit_reports_every_insufficient_resource() {
        let mut n = node("n", 1000, 1000);
        n.allocatable.set(&ResourceName::Scalar(Arc::from("nvidia.com/gpu")), 1);
        n.allowed_pods = 1;
        let mut existing = pod("old", 0, 0);
        existing.node_name = Some("n".into());
        let snap = Snapshot::build(vec![n.clone()], vec![existing]).unwrap();
        let mut p = pod("p", 2000, 2000);
        p.requests.set(&ResourceName::Scalar(Arc::from("nvidia.com/gpu")), 2);
        let r = rank(&snap, &p);
        assert_eq!(r.rejected[0].plugin, F::NodeResourcesFit);
        assert_eq!(
            r.diagnosis.message(),
            "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 Insufficient nvidia.com/gpu, 1 Too many pods. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        );
        // A pod without requests is checked for the pod count only.
        let empty = snapshot(vec![n]);
        assert_eq!(rank(&empty, &pod("q", 0, 0)).feasible_count, 1);
        // Extended resources the node lacks are insufficient.
        let mut q = pod("q", 0, 0);
        q.requests.set(&ResourceName::Scalar(Arc::from("example.com/fpga")), 1);
        assert_eq!(
            rank(&empty, &q).diagnosis.message(),
            "0/1 nodes are available: 1 Insufficient example.com/fpga. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        );
    }

    #[test]
    fn least_allocated_matches_kube_scheduler() {
        // least_allocated_test.go, "nothing scheduled, resources requested, differently sized nodes".
        let snap = snapshot(vec![node("node1", 4000, 10000), node("node2", 6000, 10000)]);
        let p = pod("p", 3000, 5000);
        let prof = only(S::NodeResourcesFit, ScoringStrategy::LeastAllocated);
        assert_eq!(scores(&prof, &snap, &p), [("node1".into(), 37), ("node2".into(), 50)]);
    }

    #[test]
    fn most_allocated_matches_kube_scheduler() {
        // most_allocated_test.go, "nothing scheduled, resources requested, differently sized nodes".
        let snap = snapshot(vec![node("node1", 4000, 10000), node("node2", 6000, 10000)]);
        let p = pod("p", 3000, 5000);
        let prof = only(S::NodeResourcesFit, ScoringStrategy::MostAllocated);
        assert_eq!(scores(&prof, &snap, &p), [("node1".into(), 62), ("node2".into(), 50)]);
    }

    #[test]
    fn requested_to_capacity_ratio_matches_kube_scheduler() {
        // requested_to_capacity_ratio_test.go: shape (0,10),(100,0), same pods and nodes: 38 and 50.
        let snap = snapshot(vec![node("node1", 4000, 10000), node("node2", 6000, 10000)]);
        let p = pod("p", 3000, 5000);
        let shape = vec![
            ShapePoint {
                utilization: 0,
                score: 10,
            },
            ShapePoint {
                utilization: 100,
                score: 0,
            },
        ];
        let prof = only(S::NodeResourcesFit, ScoringStrategy::RequestedToCapacityRatio { shape });
        assert_eq!(scores(&prof, &snap, &p), [("node1".into(), 38), ("node2".into(), 50)]);
    }

    #[test]
    fn fit_scoring_counts_missing_requests_as_defaults() {
        // A pod with no requests scores as 100m cpu / 200Mi memory (kube-scheduler's non-zero defaults).
        let snap = snapshot(vec![node("n", 1000, 1000 * 1024 * 1024)]);
        let mut p = pod("p", 0, 0);
        p.non_zero_requests = Resources {
            milli_cpu: 100,
            memory: 200 * 1024 * 1024,
            ..Default::default()
        };
        let prof = only(S::NodeResourcesFit, ScoringStrategy::LeastAllocated);
        // cpu (1000-100)*100/1000 = 90, memory (1000-200)*100/1000 = 80 → 85.
        assert_eq!(scores(&prof, &snap, &p), [("n".into(), 85)]);
    }
}
