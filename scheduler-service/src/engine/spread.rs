//! PodTopologySpread as kube-scheduler 1.34 implements it
//! (`pkg/scheduler/framework/plugins/podtopologyspread`).
//!
//! Filter (DoNotSchedule): `matching pods in the node's domain + (1 if the pod matches itself) −
//! global minimum ≤ maxSkew`, where domains and counts come from the nodes that have every
//! constraint's key and pass its node inclusion policies, and the global minimum is 0 while fewer
//! than minDomains domains exist. Score (ScheduleAnyway, or the default constraints for pods
//! without any): per constraint `count × ln(domains + 2) + maxSkew − 1`, normalized so that the
//! node with the fewest matching pods scores 100.

use std::sync::Arc;

use super::model::{
    LabelSelector, Labels, NodeInclusionPolicy, PodSpec, Requirement, SelectorOp, SpreadConstraint, WhenUnsatisfiable,
};
use super::policy::PodTopologySpreadArgs;
use super::snapshot::{Snapshot, Topology};
use super::topology::Existing;

/// kube-scheduler's `ErrReasonConstraintsNotMatch`.
pub const CONSTRAINTS_REASON: &str = "node(s) didn't match pod topology spread constraints";
/// kube-scheduler's `ErrReasonNodeLabelNotMatch`.
pub const MISSING_LABEL_REASON: &str = "node(s) didn't match pod topology spread constraints (missing required label)";

/// The hostname label, whose domains kube-scheduler scores node by node.
const HOSTNAME: &str = "kubernetes.io/hostname";

/// Which spread rule rejected a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Violation {
    /// The node lacks a constraint's topology key.
    MissingLabel,
    /// Placing the pod there would exceed maxSkew.
    Skew,
}

/// A constraint as kube-scheduler's `topologySpreadConstraint`: the selector with matchLabelKeys
/// merged in, and the policies' defaults applied.
#[derive(Debug, Clone)]
struct Constraint {
    max_skew: i64,
    key: String,
    selector: Option<LabelSelector>,
    min_domains: i64,
    honor_affinity: bool,
    honor_taints: bool,
}

/// kube-scheduler's `filterTopologySpreadConstraints`: the constraints with `action`, with the
/// pod's values of matchLabelKeys ANDed to each selector (`mergeLabelSetWithSelector`: a nil
/// selector then becomes just those values).
fn explicit(pod: &PodSpec, action: WhenUnsatisfiable) -> Vec<Constraint> {
    pod.spread_constraints
        .iter()
        .filter(|c| c.when_unsatisfiable == action)
        .map(|c: &SpreadConstraint| {
            let extra: Vec<Requirement> = c
                .match_label_keys
                .iter()
                .filter_map(|k| {
                    pod.labels.get(k).map(|v| Requirement {
                        key: k.clone(),
                        op: SelectorOp::In(vec![v.clone()]),
                    })
                })
                .collect();
            let selector = if extra.is_empty() {
                c.selector.clone()
            } else {
                let mut requirements = extra;
                requirements.extend(c.selector.iter().flat_map(|s| s.requirements.iter().cloned()));
                Some(LabelSelector { requirements })
            };
            Constraint {
                max_skew: i64::from(c.max_skew),
                key: c.topology_key.clone(),
                selector,
                min_domains: i64::from(c.min_domains.max(1)),
                honor_affinity: c.node_affinity_policy == NodeInclusionPolicy::Honor,
                honor_taints: c.node_taints_policy == NodeInclusionPolicy::Honor,
            }
        })
        .collect()
}

/// kube-scheduler's `buildDefaultConstraints`: the default constraints with `action`, each with
/// the pod's workload selector; none when the pod has no (or an empty) workload selector.
fn defaults(pod: &PodSpec, args: &PodTopologySpreadArgs, action: WhenUnsatisfiable) -> Vec<Constraint> {
    let Some(selector) = pod
        .default_spread_selector
        .as_ref()
        .filter(|s| !s.requirements.is_empty())
    else {
        return Vec::new();
    };
    let wanted = match action {
        WhenUnsatisfiable::DoNotSchedule => "DoNotSchedule",
        WhenUnsatisfiable::ScheduleAnyway => "ScheduleAnyway",
    };
    args.effective_defaults()
        .into_iter()
        .filter(|c| c.when_unsatisfiable == wanted)
        .map(|c| Constraint {
            max_skew: i64::from(c.max_skew),
            key: c.topology_key,
            selector: Some(selector.clone()),
            min_domains: 1,
            honor_affinity: true,
            honor_taints: false,
        })
        .collect()
}

/// The pod's constraints with `action`: its own, or the defaults when it has none at all.
fn constraints(pod: &PodSpec, args: &PodTopologySpreadArgs, action: WhenUnsatisfiable) -> Vec<Constraint> {
    if pod.spread_constraints.is_empty() {
        defaults(pod, args, action)
    } else {
        explicit(pod, action)
    }
}

/// What the static filters say of a node for the incoming pod: (required node affinity fails,
/// an untolerated NoSchedule/NoExecute taint).
pub type NodeStatics<'f> = &'f dyn Fn(usize) -> (bool, bool);

impl Constraint {
    /// kube-scheduler's `matchNodeInclusionPolicies`.
    fn includes(&self, statics: (bool, bool)) -> bool {
        let (mismatched, untolerated) = statics;
        let excluded = (self.honor_affinity && mismatched) || (self.honor_taints && untolerated);
        !excluded
    }
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
            if super::cancel::requested_at(node) {
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

/// PodTopologySpread's scoring constraints for one pod.
#[derive(Debug)]
pub struct SpreadScore {
    constraints: Vec<Constraint>,
    /// Nodes lacking a topology key are ignored (false only for the system defaults).
    require_all: bool,
}

/// kube-scheduler's `invalidScore`: a node ignored by scoring.
pub const IGNORED: i64 = -1;

impl SpreadScore {
    /// PreScore's constraints; `None` when the pod has no ScheduleAnyway constraint.
    pub fn new(pod: &PodSpec, args: &PodTopologySpreadArgs) -> Option<Self> {
        let constraints = constraints(pod, args, WhenUnsatisfiable::ScheduleAnyway);
        if constraints.is_empty() {
            return None;
        }
        let system = args.defaulting_type == super::policy::DefaultingType::System;
        Some(Self {
            constraints,
            require_all: !pod.spread_constraints.is_empty() || !system,
        })
    }

    /// PreScore and Score: the raw score of each candidate node ([`IGNORED`] for ignored nodes).
    pub fn scores(
        &self,
        existing: &Existing<'_>,
        pod: &PodSpec,
        candidates: &[usize],
        statics: NodeStatics<'_>,
    ) -> Vec<i64> {
        let snapshot: &Snapshot = existing.snapshot;
        let n = snapshot.nodes().len();
        let topos: Vec<Arc<Topology>> = self.constraints.iter().map(|c| snapshot.topology(&c.key)).collect();
        // A node without the key counts in the domain of the empty value, as a Go map lookup does.
        let domain = |i: usize, node: usize| -> usize {
            let t = &topos[i];
            match t.node_domain[node] {
                Topology::NONE => t.values.iter().position(|v| v.is_empty()).unwrap_or(t.values.len()),
                d => d as usize,
            }
        };
        let has_all = |node: usize| topos.iter().all(|t| t.node_domain[node] != Topology::NONE);
        let ignored: Vec<bool> = candidates.iter().map(|&c| self.require_all && !has_all(c)).collect();
        let kept = ignored.iter().filter(|x| !**x).count();
        let mut out = vec![0i64; candidates.len()];
        let mut weights = Vec::with_capacity(self.constraints.len());
        let mut per_constraint: Vec<Vec<i64>> = Vec::with_capacity(self.constraints.len());
        for (i, c) in self.constraints.iter().enumerate() {
            let hostname = c.key == HOSTNAME;
            let size = topos[i].values.len() + 1;
            let mut present = vec![false; size];
            let mut domains = 0usize;
            if !hostname {
                for (&node, ign) in candidates.iter().zip(&ignored) {
                    let d = domain(i, node);
                    if !*ign && !present[d] {
                        present[d] = true;
                        domains += 1;
                    }
                }
            }
            let sz = if hostname { kept } else { domains };
            weights.push(((sz + 2) as f64).ln());
            // Matching pods per domain (per node for hostname).
            let mut counts = vec![0i64; if hostname { n } else { size }];
            existing.matching(c.selector.as_ref(), |other| {
                // kube-scheduler's countPodsMatchSelector bypasses terminating pods.
                if other.terminating || other.namespace != pod.namespace {
                    return;
                }
                if hostname {
                    counts[other.node] += 1;
                    return;
                }
                if self.require_all && !has_all(other.node) {
                    return;
                }
                if !c.includes(statics(other.node)) {
                    return;
                }
                let d = domain(i, other.node);
                if present[d] {
                    counts[d] += 1;
                }
            });
            per_constraint.push(counts);
        }
        for (k, &node) in candidates.iter().enumerate() {
            if ignored[k] {
                out[k] = IGNORED;
                continue;
            }
            let mut score = 0f64;
            for (i, c) in self.constraints.iter().enumerate() {
                if topos[i].node_domain[node] == Topology::NONE {
                    continue;
                }
                let cnt = if c.key == HOSTNAME {
                    per_constraint[i][node]
                } else {
                    per_constraint[i][domain(i, node)]
                };
                score += cnt as f64 * weights[i] + (c.max_skew - 1) as f64;
            }
            out[k] = score.round() as i64;
        }
        out
    }
}

/// NormalizeScore: ignored nodes 0; every node 100 when the highest score is 0; else
/// `100 × (max + min − score) / max`.
pub fn normalize(raw: i64, min: i64, max: i64) -> i64 {
    if raw == IGNORED {
        0
    } else if max == 0 {
        super::plugins::MAX_NODE_SCORE
    } else {
        super::plugins::MAX_NODE_SCORE * (max + min - raw) / max
    }
}
