//! PodTopologySpread's PreFilter and Filter (kube-scheduler's `podtopologyspread/filtering.go`):
//! DoNotSchedule constraints, `matching pods in the node's domain + (1 if the pod matches itself)
//! − global minimum ≤ maxSkew`, with the reasons a node is rejected for.

use std::sync::Arc;

use super::{constraints, NodeStatics};
use crate::engine::model::{LabelSelector, Labels, PodSpec, WhenUnsatisfiable};
use crate::engine::policy::PodTopologySpreadArgs;
use crate::engine::snapshot::Topology;
use crate::engine::topology::Existing;

/// kube-scheduler's `ErrReasonConstraintsNotMatch`.
pub const CONSTRAINTS_REASON: &str = "node(s) didn't match pod topology spread constraints";
/// kube-scheduler's `ErrReasonNodeLabelNotMatch`.
pub const MISSING_LABEL_REASON: &str = "node(s) didn't match pod topology spread constraints (missing required label)";

/// Which spread rule rejected a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Violation {
    /// The node lacks a constraint's topology key.
    MissingLabel,
    /// Placing the pod there would exceed maxSkew.
    Skew,
}

#[derive(Debug, Clone)]
struct FilterConstraint {
    topo: Arc<Topology>,
    max_skew: i64,
    self_match: bool,
    /// Matching pods per domain (eligible nodes only).
    counts: Vec<i64>,
    /// The global minimum (0 while fewer than minDomains domains exist).
    min_match: i64,
    /// The selector, for [`SpreadFilter::update`].
    selector: Option<LabelSelector>,
    /// Per node, whether it counts (has every key, passes the node policies).
    eligible: Arc<[bool]>,
    /// Per domain, whether some eligible node is in it.
    present: Arc<[bool]>,
    /// Fewer domains than minDomains: the global minimum stays 0.
    short_of_domains: bool,
}

impl FilterConstraint {
    /// The global minimum over the domains present, from the counts.
    fn min_of(counts: &[i64], present: &[bool], short_of_domains: bool) -> i64 {
        if short_of_domains {
            return 0;
        }
        counts
            .iter()
            .zip(present)
            .filter(|(_, p)| **p)
            .map(|(c, _)| *c)
            .min()
            .unwrap_or(i64::from(i32::MAX))
    }
}

/// PodTopologySpread's PreFilter state for one pod.
#[derive(Debug, Clone)]
pub struct SpreadFilter {
    constraints: Vec<FilterConstraint>,
}

impl SpreadFilter {
    /// PreFilter; `None` when the pod has no DoNotSchedule constraint (kube-scheduler's Skip).
    pub fn new(
        existing: &Existing<'_>,
        pod: &PodSpec,
        args: &PodTopologySpreadArgs,
        statics: NodeStatics<'_>,
    ) -> Option<Self> {
        let cs = constraints(pod, args, WhenUnsatisfiable::DoNotSchedule);
        if cs.is_empty() {
            return None;
        }
        let snapshot = existing.snapshot;
        let topos: Vec<Arc<Topology>> = cs.iter().map(|c| snapshot.topology(&c.key)).collect();
        let n = snapshot.nodes().len();
        // Per constraint, per node: whether the node counts (has every key, passes the policies).
        let mut eligible = vec![vec![false; n]; cs.len()];
        let mut present: Vec<Vec<bool>> = topos.iter().map(|t| vec![false; t.values.len()]).collect();
        for node in 0..n {
            if crate::engine::cancel::requested_at(node) {
                break;
            }
            if topos.iter().any(|t| t.node_domain[node] == Topology::NONE) {
                continue;
            }
            let st = statics(node);
            for (i, c) in cs.iter().enumerate() {
                if c.includes(st) {
                    eligible[i][node] = true;
                    present[i][topos[i].node_domain[node] as usize] = true;
                }
            }
        }
        let constraints = cs
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let topo = &topos[i];
                let mut counts = vec![0i64; topo.values.len()];
                existing.matching(c.selector.as_ref(), |other| {
                    // kube-scheduler's countPodsMatchSelector bypasses terminating pods.
                    if !other.terminating && other.namespace == pod.namespace && eligible[i][other.node] {
                        counts[topo.node_domain[other.node] as usize] += 1;
                    }
                });
                let domains = present[i].iter().filter(|p| **p).count() as i64;
                let short_of_domains = domains < c.min_domains;
                FilterConstraint {
                    topo: Arc::clone(topo),
                    max_skew: c.max_skew,
                    self_match: c.selector.as_ref().is_some_and(|s| s.matches(&pod.labels)),
                    min_match: FilterConstraint::min_of(&counts, &present[i], short_of_domains),
                    counts,
                    selector: c.selector.clone(),
                    eligible: Arc::from(std::mem::take(&mut eligible[i])),
                    present: Arc::from(present[i].as_slice()),
                    short_of_domains,
                }
            })
            .collect();
        Some(Self { constraints })
    }

    /// kube-scheduler's PreFilterExtensions AddPod (`delta` 1) and RemovePod (−1): counts a pod
    /// of namespace `namespace` with `labels` on `node` in or out, for the incoming pod of
    /// namespace `own_namespace`. Like kube-scheduler's `updateWithPod`, this does not look at
    /// whether the pod is terminating: preemption's dry run that removes a terminating victim
    /// takes it off its domain's count although PreFilter never counted it.
    pub fn update(&mut self, own_namespace: &str, namespace: &str, labels: &Labels, node: usize, delta: i64) {
        if namespace != own_namespace {
            return;
        }
        for c in &mut self.constraints {
            if !c.eligible.get(node).copied().unwrap_or(false)
                || !c.selector.as_ref().is_some_and(|s| s.matches(labels))
            {
                continue;
            }
            let d = c.topo.node_domain[node];
            if d == Topology::NONE {
                continue;
            }
            c.counts[d as usize] += delta;
            c.min_match = FilterConstraint::min_of(&c.counts, &c.present, c.short_of_domains);
        }
    }

    /// Filter: the first constraint the node breaks.
    pub fn check(&self, node: usize) -> Option<Violation> {
        for c in &self.constraints {
            let d = c.topo.node_domain[node];
            if d == Topology::NONE {
                return Some(Violation::MissingLabel);
            }
            let skew = c.counts[d as usize] + i64::from(c.self_match) - c.min_match;
            if skew > c.max_skew {
                return Some(Violation::Skew);
            }
        }
        None
    }
}
