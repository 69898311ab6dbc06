//! PodTopologySpread as kube-scheduler 1.37 implements it
//! (`pkg/scheduler/framework/plugins/podtopologyspread`: the constraints here as `common.go` has
//! them, [`filtering`] as `filtering.go`, [`scoring`] as `scoring.go`).
//!
//! Filter (DoNotSchedule): `matching pods in the node's domain + (1 if the pod matches itself) −
//! global minimum ≤ maxSkew`, where domains and counts come from the nodes that have every
//! constraint's key and pass its node inclusion policies, and the global minimum is 0 while fewer
//! than minDomains domains exist. Score (ScheduleAnyway, or the default constraints for pods
//! without any): per constraint `count × ln(domains + 2) + maxSkew − 1`, normalized so that the
//! node with the fewest matching pods scores 100.

pub mod filtering;
pub mod scoring;

use crate::engine::model::{
    LabelSelector, NodeInclusionPolicy, PodSpec, Requirement, SelectorOp, SpreadConstraint, WhenUnsatisfiable,
};
use crate::engine::policy::PodTopologySpreadArgs;

/// A constraint as kube-scheduler's `topologySpreadConstraint`: the selector with matchLabelKeys
/// merged in, and the policies' defaults applied.
#[derive(Debug, Clone)]
pub(super) struct Constraint {
    pub(super) max_skew: i64,
    pub(super) key: String,
    pub(super) selector: Option<LabelSelector>,
    pub(super) min_domains: i64,
    pub(super) honor_affinity: bool,
    pub(super) honor_taints: bool,
}

/// The selector kube-scheduler's `countPodsMatchSelector` (`common.go`) counts pods with, in
/// PreFilter and PreScore: an empty one (`labelSelector: {}`, `labels.Everything()`) counts no
/// pod (`if selector.Empty() { return 0 }`), though the incoming pod still matches itself and
/// AddPod/RemovePod (`updateWithPod`) still count with it.
pub(super) fn counted(selector: Option<&LabelSelector>) -> Option<&LabelSelector> {
    selector.filter(|s| !s.requirements.is_empty())
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
pub(super) fn constraints(pod: &PodSpec, args: &PodTopologySpreadArgs, action: WhenUnsatisfiable) -> Vec<Constraint> {
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
    pub(super) fn includes(&self, statics: (bool, bool)) -> bool {
        let (mismatched, untolerated) = statics;
        let excluded = (self.honor_affinity && mismatched) || (self.honor_taints && untolerated);
        !excluded
    }
}

/// The plugin in the framework's contract (Filter in [`filtering`]; its Score depends on the
/// feasible nodes, so the framework calls [`scoring::SpreadScore::scores`] after filtering).
#[derive(Debug, Clone, Copy)]
pub struct PodTopologySpread;
