//! The framework the scheduling cycle (`engine/cycle.rs`) runs: a policy prepared as a
//! [`Profile`], a pod's plan, the profile's filters run on a node, the scores weighed and
//! normalized, the reasons and the diagnosis; and the plain pass, which gives the same answers for
//! the common pod with less work (`docs/engine.md`).
//!
//! Each plugin follows kube-scheduler's implementation, in [`super::plugins`]: the same
//! feasibility rules, the same integer arithmetic for scores, the same normalization, and the
//! same reason strings. A node fails at the first filter that rejects it, as in kube-scheduler's
//! `RunFilterPlugins`, and NodeResourcesFit reports every insufficient resource.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use super::accel::class_cache::{StaticEval, StaticFilters, StaticKey};
use super::accel::class_labels::ClassLabels;
use super::accel::columns::{BlockScores, HotColumns, ImageAsk, Kernel, PartWeights, PodAsk, BLOCK};
use super::accel::image_sums::ImageSums;
use super::accel::rule_columns::{RuleColumns, EXACT_SCORE};
use super::extender::ExtenderHook;
use super::model::{NodeSpec, PodSpec, Toleration};
use super::plugins::image_locality::{self, ImageScale, MIN_IMAGE_THRESHOLD};
use super::plugins::interpodaffinity::filtering::{self as interpod_filtering, InterPodFilter};
use super::plugins::interpodaffinity::scoring as interpod_scoring;
use super::plugins::noderesources::{balanced_allocation, fit};
use super::plugins::podtopologyspread::filtering::{self as spread_filtering, SpreadFilter};
use super::plugins::podtopologyspread::scoring::{self as spread_scoring, SpreadScore};
use super::plugins::volumebinding::{self, binder as volume_binder};
use super::plugins::{
    node_affinity, node_name, node_ports, node_unschedulable, nodevolumelimits, taint_toleration, volumerestrictions,
    volumezone,
};
use super::policy::{FilterPlugin, Policy, ScorePlugin, ScoringStrategy, ShapePoint};
use super::resources::ResourceName;
use super::rules::{self as cel_rules, ClassOutcomes, CompiledRules, NodeStatic, RuleOutcome, SnapshotRules};
use super::snapshot::{
    image_hash, port_key, port_mask, BoundPod, NodeEntry, NodeHot, NodeUsage, NodeView, PortKeys, Snapshot,
    NODE_UNIQUE_LABELS,
};
use super::topology::{DomainCounts, Existing, Placed};

pub use super::plugins::MAX_NODE_SCORE;

/// Why a node was rejected, in kube-scheduler's words.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// NodeUnschedulable: the node is cordoned.
    NodeUnschedulable,
    /// NodeName: the pod names another node.
    NodeNameMismatch,
    /// TaintToleration: a NoSchedule or NoExecute taint is not tolerated.
    UntoleratedTaint,
    /// NodeAffinity: nodeSelector or required affinity does not match.
    NodeAffinityMismatch,
    /// NodePorts: a requested host port is in use.
    NodePortsConflict,
    /// NodeResourcesFit: the node has no room for another pod.
    TooManyPods,
    /// NodeResourcesFit: not enough of a resource.
    Insufficient(ResourceName),
    /// PodTopologySpread: a DoNotSchedule constraint.
    TopologySpread(spread_filtering::Violation),
    /// InterPodAffinity: required affinity or anti-affinity.
    InterPodAffinity(interpod_filtering::Violation),
    /// A policy's CEL rule: the filter rule's reason, or what went wrong evaluating a rule.
    Rule(Arc<str>),
    /// VolumeRestrictions: a disk or ReadWriteOncePod claim of the pod is in use.
    VolumeRestrictions(volumerestrictions::Conflict),
    /// NodeVolumeLimits: the node's attach limit of a CSI driver would be exceeded.
    NodeVolumeLimits,
    /// VolumeBinding: the pod's claims cannot be bound or provisioned on the node.
    VolumeBinding(volume_binder::Conflict),
    /// VolumeZone: a bound volume's zone or region is not the node's.
    VolumeZone,
    /// A volume plugin's PreFilter rejected the pod (every node gets it): its message, which
    /// kube-scheduler's `FitError` shows alone instead of counting nodes.
    VolumePreFilter(Arc<str>),
    /// An extender's message for a node in `FailedNodes` or `FailedAndUnresolvableNodes`.
    Extender(Arc<str>),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NodeUnschedulable => f.write_str(node_unschedulable::ERR_REASON_UNSCHEDULABLE),
            Self::NodeNameMismatch => f.write_str(node_name::ERR_REASON),
            Self::UntoleratedTaint => f.write_str(taint_toleration::ERR_REASON),
            Self::NodeAffinityMismatch => f.write_str(node_affinity::ERR_REASON_POD),
            Self::NodePortsConflict => f.write_str(node_ports::ERR_REASON),
            Self::TooManyPods => f.write_str(fit::ERR_REASON_TOO_MANY_PODS),
            Self::Insufficient(r) => write!(f, "{} {r}", fit::ERR_REASON_INSUFFICIENT),
            Self::TopologySpread(spread_filtering::Violation::MissingLabel) => {
                f.write_str(spread_filtering::MISSING_LABEL_REASON)
            }
            Self::TopologySpread(spread_filtering::Violation::Skew) => {
                f.write_str(spread_filtering::CONSTRAINTS_REASON)
            }
            Self::InterPodAffinity(interpod_filtering::Violation::Affinity) => {
                f.write_str(interpod_filtering::AFFINITY_REASON)
            }
            Self::InterPodAffinity(interpod_filtering::Violation::AntiAffinity) => {
                f.write_str(interpod_filtering::ANTI_AFFINITY_REASON)
            }
            Self::InterPodAffinity(interpod_filtering::Violation::ExistingAntiAffinity) => {
                f.write_str(interpod_filtering::EXISTING_ANTI_AFFINITY_REASON)
            }
            Self::Rule(reason) | Self::Extender(reason) => f.write_str(reason),
            Self::VolumeRestrictions(c) => f.write_str(c.reason()),
            Self::NodeVolumeLimits => f.write_str(nodevolumelimits::ERR_REASON_MAX_VOLUME_COUNT),
            Self::VolumeBinding(c) => f.write_str(c.reason()),
            Self::VolumeZone => f.write_str(volumezone::ERR_REASON_CONFLICT),
            Self::VolumePreFilter(m) => f.write_str(m),
        }
    }
}

/// Whether a filter rejection can be resolved by evicting pods (kube-scheduler's `Unschedulable`
/// as opposed to `UnschedulableAndUnresolvable`).
pub(super) fn resolvable(
    pod_requests: &super::resources::Resources,
    entry: &NodeEntry,
    plugin: FilterPlugin,
    r: &Reason,
) -> bool {
    match (plugin, r) {
        (FilterPlugin::NodePorts, _) => true,
        (FilterPlugin::NodeResourcesFit, Reason::TooManyPods) => true,
        // NodeResourcesFit marks a request larger than the node's whole allocatable unresolvable.
        (FilterPlugin::NodeResourcesFit, Reason::Insufficient(name)) => {
            let alloc = match name {
                ResourceName::Cpu => entry.spec.allocatable.milli_cpu,
                ResourceName::Memory => entry.spec.allocatable.memory,
                ResourceName::EphemeralStorage => entry.spec.allocatable.ephemeral_storage,
                ResourceName::Pods => entry.spec.allowed_pods,
                ResourceName::Scalar(s) => entry.spec.allocatable.scalar(s),
            };
            pod_requests.get(name) <= alloc
        }
        // PodTopologySpread's skew and InterPodAffinity's anti-affinity rules may clear when pods
        // go (kube-scheduler's Unschedulable); a missing topology label and the pod's own
        // affinity may not (UnschedulableAndUnresolvable).
        (FilterPlugin::PodTopologySpread, Reason::TopologySpread(v)) => *v == spread_filtering::Violation::Skew,
        (FilterPlugin::InterPodAffinity, Reason::InterPodAffinity(v)) => *v != interpod_filtering::Violation::Affinity,
        // Evicting the node's pods frees their disks, attach slots and ReadWriteOncePod claims
        // (kube-scheduler's Unschedulable: the dry run clears a ReadWriteOncePod conflict when
        // every other user of the claim is a victim on the node); VolumeBinding's and
        // VolumeZone's reasons are unresolvable.
        (FilterPlugin::VolumeRestrictions, Reason::VolumeRestrictions(_)) => true,
        (FilterPlugin::NodeVolumeLimits, Reason::NodeVolumeLimits) => true,
        _ => false,
    }
}

/// Counts of reasons over the rejected nodes, from which kube-scheduler's message is built.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnosis {
    /// Nodes in the snapshot.
    pub node_count: usize,
    /// How many nodes gave each reason.
    pub reasons: HashMap<Reason, u32>,
    /// kube-scheduler's `PostFilterMsg`: what preemption said, e.g. `preemption: not eligible due to
    /// preemptionPolicy=Never.`; empty when preemption found victims or did not run.
    pub post_filter: String,
    /// Where preemption would make room, and whom it would evict.
    pub nomination: Option<Nomination>,
    /// Set when the pod's gang could not be placed whole: why.
    pub gang: Option<GangFailure>,
    /// Set when scheduling failed with an error rather than for want of a node (an extender that
    /// is not ignorable failed): kube-scheduler's error text, shown instead of the fit message.
    pub error: Option<String>,
}

/// A preemption's outcome: the node the pod is nominated to and the pods to evict there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nomination {
    /// The nominated node.
    pub node: String,
    /// Uids of the victims, most important first.
    pub victims: Vec<Arc<str>>,
}

/// Why a gang member is not placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GangFailure {
    /// The gang, "namespace/name".
    pub gang: Arc<str>,
    /// The explanation shown to users.
    pub message: String,
}

impl Diagnosis {
    /// kube-scheduler's `FitError.Error()`: `0/N nodes are available: <count> <reason>, ….` with
    /// the "count reason" strings sorted, or its message for a cluster with no nodes.
    pub fn message(&self) -> String {
        if let Some(e) = &self.error {
            return e.clone();
        }
        let own = self.fit_message();
        match &self.gang {
            Some(g) if self.reasons.is_empty() => g.message.clone(),
            Some(g) => format!("{} This pod: {own}", g.message),
            None => own,
        }
    }

    /// The message of the pod's own scheduling attempt, with preemption's part.
    fn fit_message(&self) -> String {
        if self.node_count == 0 {
            return "no nodes available to schedule pods".to_string();
        }
        let mut parts: Vec<String> = self.reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
        parts.sort();
        let mut msg = format!("0/{} nodes are available:", self.node_count);
        // A PreFilter rejection is shown alone, without node counts (`FitError.Error()`).
        let pre_filter = self.reasons.keys().find_map(|r| match r {
            Reason::VolumePreFilter(m) => Some(m),
            _ => None,
        });
        if let Some(m) = pre_filter {
            msg.push(' ');
            msg.push_str(m);
            msg.push('.');
        } else if !parts.is_empty() {
            msg.push(' ');
            msg.push_str(&parts.join(", "));
            msg.push('.');
        }
        if !self.post_filter.is_empty() {
            msg.push(' ');
            msg.push_str(&self.post_filter);
        }
        msg
    }
}

/// Why evaluation stopped early.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// The caller's deadline passed.
    #[error("deadline exceeded after {done} of {total} pods")]
    DeadlineExceeded {
        /// Pods decided before the deadline.
        done: usize,
        /// Pods in the batch.
        total: usize,
    },
}

/// Which topology score plugins scored the current pod (PreScore not skipped); the others give
/// every node 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct TopoActive {
    /// InterPodAffinity scored.
    interpod: bool,
    /// PodTopologySpread scored.
    spread: bool,
}

/// Work stopped early: the call's deadline passed, or the call ended ([`Deadline::passed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DeadlinePassed;

/// When to stop working: a caller's deadline, checked between pods and every few hundred nodes, or
/// the end of the call the work belongs to ([`super::cancel`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    /// No deadline.
    pub fn none() -> Self {
        Self(None)
    }

    /// Stop at this instant.
    pub fn at(instant: Instant) -> Self {
        Self(Some(instant))
    }

    /// True once the deadline has passed or the call has ended.
    pub fn passed(&self) -> bool {
        self.0.is_some_and(|d| Instant::now() >= d) || super::cancel::requested()
    }
}

/// A policy prepared for evaluation.
#[derive(Debug, Clone)]
pub struct Profile {
    pub(super) policy: Policy,
    pub(super) score_plugins: Vec<(ScorePlugin, i64)>,
    fit_resources: Vec<(ResourceName, i64)>,
    balanced_resources: Vec<ResourceName>,
    shape: Vec<ShapePoint>,
    /// Weights when NodeResourcesFit scores exactly cpu then memory with Least/MostAllocated.
    fit_cpu_memory: Option<(i64, i64)>,
    /// BalancedAllocation compares exactly cpu then memory.
    balanced_cpu_memory: bool,
    /// The filters without PodTopologySpread and InterPodAffinity, for pods neither has work for.
    plain_filters: Vec<FilterPlugin>,
    /// (slot, plugin, weight) of every score plugin.
    all_slots: Vec<(usize, ScorePlugin, i64)>,
    /// The same without PodTopologySpread and InterPodAffinity, which give 0 to every node of a
    /// pod they have no work for.
    plain_slots: Vec<(usize, ScorePlugin, i64)>,
    /// The score slot of each plugin the plain pass computes per node, if the policy scores it.
    slot_of: PlainSlots,
    /// Whether the filters reading node classes (cordon, taints, node affinity) are enabled, in
    /// that order.
    static_filters: StaticFilters,
    /// Which volume filters are enabled.
    volume_filters: super::volumes::VolumeFilters,
    /// The policy's CEL rules, compiled; `None` without rules (the plain pass stays open), or
    /// the compile error (every node is then rejected with it).
    rules: Option<Result<Arc<CompiledRules>, Arc<str>>>,
}

/// Score slots the plain pass (see [`Evaluator::evaluate_plain`]) fills in per node.
#[derive(Debug, Clone, Copy, Default)]
struct PlainSlots {
    fit: Option<usize>,
    balanced: Option<usize>,
    image: Option<usize>,
    /// NodeAffinity and TaintToleration, whose raw scores come from the node's class.
    affinity: Option<usize>,
    taints: Option<usize>,
}

impl Profile {
    /// Prepares a validated policy.
    pub fn new(policy: Policy) -> Self {
        let shape = match &policy.scoring_strategy {
            ScoringStrategy::RequestedToCapacityRatio { shape } => shape
                .iter()
                .map(|p| ShapePoint {
                    utilization: p.utilization,
                    score: p.score * (MAX_NODE_SCORE / fit::MAX_CUSTOM_PRIORITY_SCORE),
                })
                .collect(),
            _ => Vec::new(),
        };
        let fit_cpu_memory = match (&policy.scoring_strategy, policy.fit_resources.as_slice()) {
            (ScoringStrategy::LeastAllocated | ScoringStrategy::MostAllocated, [c, m])
                if c.name == ResourceName::Cpu && m.name == ResourceName::Memory =>
            {
                Some((c.weight, m.weight))
            }
            _ => None,
        };
        let balanced_cpu_memory = matches!(
            policy.balanced_resources.as_slice(),
            [c, m] if c.name == ResourceName::Cpu && m.name == ResourceName::Memory
        );
        let slot = |p: ScorePlugin| policy.scores.iter().take(MAX_SCORES).position(|s| s.plugin == p);
        let slot_of = PlainSlots {
            fit: slot(ScorePlugin::NodeResourcesFit),
            balanced: slot(ScorePlugin::NodeResourcesBalancedAllocation),
            image: slot(ScorePlugin::ImageLocality),
            affinity: slot(ScorePlugin::NodeAffinity),
            taints: slot(ScorePlugin::TaintToleration),
        };
        let has = |f: FilterPlugin| policy.filters.contains(&f);
        let static_filters = StaticFilters {
            node_unschedulable: has(FilterPlugin::NodeUnschedulable),
            taint_toleration: has(FilterPlugin::TaintToleration),
            node_affinity: has(FilterPlugin::NodeAffinity),
        };
        let rules = (!policy.rules.is_empty()).then(|| {
            policy
                .rules
                .compile()
                .map(Arc::new)
                .map_err(|e| Arc::from(format!("policy rules do not compile: {e}")))
        });
        Self {
            rules,
            slot_of,
            static_filters,
            fit_cpu_memory,
            all_slots: policy
                .scores
                .iter()
                .take(MAX_SCORES)
                .enumerate()
                .map(|(slot, s)| (slot, s.plugin, s.weight))
                .collect(),
            plain_slots: policy
                .scores
                .iter()
                .take(MAX_SCORES)
                .enumerate()
                .filter(|(_, s)| !matches!(s.plugin, ScorePlugin::PodTopologySpread | ScorePlugin::InterPodAffinity))
                .map(|(slot, s)| (slot, s.plugin, s.weight))
                .collect(),
            plain_filters: policy
                .filters
                .iter()
                .copied()
                .filter(|f| {
                    !matches!(
                        f,
                        FilterPlugin::PodTopologySpread
                            | FilterPlugin::InterPodAffinity
                            | FilterPlugin::VolumeRestrictions
                            | FilterPlugin::NodeVolumeLimits
                            | FilterPlugin::VolumeBinding
                            | FilterPlugin::VolumeZone
                    )
                })
                .collect(),
            volume_filters: super::volumes::VolumeFilters {
                restrictions: policy.filters.contains(&FilterPlugin::VolumeRestrictions),
                limits: policy.filters.contains(&FilterPlugin::NodeVolumeLimits),
                binding: policy.filters.contains(&FilterPlugin::VolumeBinding),
                zone: policy.filters.contains(&FilterPlugin::VolumeZone),
            },
            balanced_cpu_memory,
            score_plugins: policy.scores.iter().map(|s| (s.plugin, s.weight)).collect(),
            fit_resources: policy
                .fit_resources
                .iter()
                .map(|r| (r.name.clone(), r.weight))
                .collect(),
            balanced_resources: policy.balanced_resources.iter().map(|r| r.name.clone()).collect(),
            shape,
            policy,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The score plugins and weights, in the policy's order.
    pub fn score_plugins(&self) -> &[(ScorePlugin, i64)] {
        &self.score_plugins
    }

    /// Whether the policy has CEL rules.
    pub fn has_rules(&self) -> bool {
        self.rules.is_some()
    }

    /// The rules, when the plain pass must run some of them node by node or keep score rules'
    /// raw scores (see [`RuleSink`]).
    fn rules_in_sink(&self) -> Option<&CompiledRules> {
        match &self.rules {
            Some(Ok(r)) if !r.scores.is_empty() || r.filters.iter().any(|f| !f.class_level) => Some(r),
            _ => None,
        }
    }

    /// The number of score rules.
    fn score_rules(&self) -> usize {
        match &self.rules {
            Some(Ok(r)) => r.scores.len(),
            _ => 0,
        }
    }
}

/// Maximum number of score plugins (one slot per [`ScorePlugin`]).
pub(super) const MAX_SCORES: usize = 7;

/// A feasible node's raw scores and, after normalization, its weighted total. The normalized
/// per-plugin scores are recomputed from the raw ones for the nodes a Rank returns, which keeps
/// candidates small for the passes Schedule makes over them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Candidate {
    pub(super) index: u32,
    /// Raw plugin scores (before normalization), kept so normalization can be redone.
    pub(super) raw: [i64; MAX_SCORES],
    pub(super) total: i64,
}

/// What a pod needs, computed once per pod instead of once per node.
pub(super) struct PodPlan<'a> {
    pub(super) pod: &'a PodSpec,
    /// NodeResourcesFit scoring request per fit resource (scoring defaults for cpu and memory).
    fit_requests: Vec<i64>,
    /// BalancedAllocation request per resource; `None` for a best-effort pod (plugin skipped).
    balanced_requests: Option<Vec<i64>>,
    /// Tolerations with effect PreferNoSchedule or empty, for TaintToleration's score.
    prefer_tolerations: Vec<Toleration>,
    /// The pod's images present on some node: (hash of the name, count of nodes having it).
    images: Vec<(u64, i64)>,
    tolerates_unschedulable: bool,
    /// [`port_mask`] of each of the pod's host ports.
    port_masks: Vec<u64>,
    /// [`port_key`] of each of the pod's host ports; `None` when one has none.
    port_keys: Option<Vec<u64>>,
    pub(super) tie_seed: u64,
    /// The pod selects on a per-node label or field, so static predicates run node by node.
    per_node: bool,
    /// Static predicates per node class (empty when `per_node`), shared by pods that select and
    /// tolerate alike.
    class_evals: Arc<[StaticEval]>,
    /// The plain pass applies when, besides, the pod has no topology state: see
    /// [`Evaluator::evaluate_plain`].
    pub(super) plain: bool,
    /// The volume plugins' PreFilter state; `None` when the pod has no volume they read.
    pub(super) volumes: Option<Box<PodVolumes>>,
    /// A volume plugin's PreFilter rejected the pod: its message.
    volume_error: Option<Arc<str>>,
    /// The profile's [`Profile::static_filters`].
    static_filters: StaticFilters,
    /// InterPodAffinity's and PodTopologySpread's state; `None` when neither has work.
    pub(super) topo: Option<Box<TopoState>>,
    /// The pod as the policy's CEL rules read it; `None` when the policy has none.
    rule_pod: Option<cel::Value>,
    /// Per rule (filters first, then scores), for those that read only what a node class
    /// shares: their outcomes per class (a filter's passing outcome is 0), evaluated on first
    /// use and shared with the pods that read alike (see [`CompiledRules::pod_key`]).
    rule_classes: Vec<Option<Arc<ClassOutcomes>>>,
    /// For the plain pass under a policy with rules read per class: `class_evals` with the
    /// classes those rules reject (or fail on) marked rejected.
    plain_evals: Option<Arc<[StaticEval]>>,
}

/// The topology plugins' PreFilter and PreScore state for one pod.
#[derive(Debug, Default)]
pub(super) struct TopoState {
    spread_filter: Option<SpreadFilter>,
    interpod_filter: Option<InterPodFilter>,
    interpod_score: Option<DomainCounts>,
    spread_score: Option<SpreadScore>,
}

/// Whether the pod itself has inter-pod affinity or spreading (explicit or default) to evaluate.
fn has_topology_terms(pod: &PodSpec) -> bool {
    pod.has_pod_affinity()
        || !pod.spread_constraints.is_empty()
        || pod
            .default_spread_selector
            .as_ref()
            .is_some_and(|s| !s.requirements.is_empty())
}

impl TopoState {
    /// A copy of the filters' state alone, for a preemption dry run to update.
    pub(super) fn filters(&self) -> Self {
        Self {
            spread_filter: self.spread_filter.clone(),
            interpod_filter: self.interpod_filter.clone(),
            interpod_score: None,
            spread_score: None,
        }
    }

    /// kube-scheduler's PreFilterExtensions AddPod (`delta` 1) / RemovePod (−1) for both topology
    /// filters: counts the bound pod `other`, on node `node`, in or out for the incoming `pod`.
    pub(super) fn update_filters(
        &mut self,
        snapshot: &Snapshot,
        pod: &PodSpec,
        other: &BoundPod,
        node: usize,
        delta: i64,
    ) {
        if let Some(f) = self.spread_filter.as_mut() {
            f.update(&pod.namespace, &other.namespace, &other.labels, node, delta);
        }
        if let Some(f) = self.interpod_filter.as_mut() {
            let terms = other.affinity.as_deref();
            let other = super::topology::PodRef {
                node,
                namespace: &other.namespace,
                labels: &other.labels,
                affinity: terms.map(|t| &t.0).filter(|t| !t.is_empty()),
                anti_affinity: terms.map(|t| &t.1).filter(|t| !t.is_empty()),
                terminating: other.terminating,
            };
            let placed = Placed::default();
            f.update(
                &Existing {
                    snapshot,
                    placed: &placed,
                },
                pod,
                &other,
                delta,
            );
        }
    }

    /// PreFilter and PreScore of both plugins for `plan`'s pod, with `placed` already on their
    /// nodes; `None` (at no cost) when neither the pod nor any existing pod has such terms.
    pub(super) fn build(
        profile: &Profile,
        snapshot: &Snapshot,
        placed: &Placed<'_>,
        plan: &PodPlan<'_>,
    ) -> Option<Box<Self>> {
        let pod = plan.pod;
        let existing = Existing { snapshot, placed };
        if !has_topology_terms(pod) && !existing.any_affinity() {
            return None;
        }
        let policy = &profile.policy;
        let statics = |i: usize| {
            let se = plan.static_at(snapshot, i);
            (se.mismatched, se.untolerated)
        };
        let scored = |p: ScorePlugin| profile.score_plugins.iter().any(|(x, _)| *x == p);
        let state = TopoState {
            spread_filter: if policy.filters.contains(&FilterPlugin::PodTopologySpread) {
                SpreadFilter::new(&existing, pod, &policy.pod_topology_spread, &statics)
            } else {
                None
            },
            interpod_filter: if policy.filters.contains(&FilterPlugin::InterPodAffinity) {
                InterPodFilter::new(&existing, pod)
            } else {
                None
            },
            interpod_score: if scored(ScorePlugin::InterPodAffinity) {
                interpod_scoring::score_state(&existing, pod, &policy.inter_pod_affinity)
            } else {
                None
            },
            spread_score: if scored(ScorePlugin::PodTopologySpread) {
                SpreadScore::new(pod, &policy.pod_topology_spread)
            } else {
                None
            },
        };
        let idle = state.spread_filter.is_none()
            && state.interpod_filter.is_none()
            && state.interpod_score.is_none()
            && state.spread_score.is_none();
        (!idle).then(|| Box::new(state))
    }
}

/// Whether two pods ask the same of nodes: equal requests, node name, selectors, affinity,
/// tolerations, host ports and images (identity and labels aside), so they filter and score alike.
pub(super) fn same_constraints(a: &PodSpec, b: &PodSpec) -> bool {
    a.requests == b.requests
        && a.non_zero_requests == b.non_zero_requests
        && a.node_name == b.node_name
        && a.node_selector == b.node_selector
        && a.required_affinity == b.required_affinity
        && a.preferred_affinity == b.preferred_affinity
        && a.tolerations == b.tolerations
        && a.host_ports == b.host_ports
        && a.images == b.images
        // Each pod's claims are its own, and every placement changes what the next one finds.
        && a.volumes.is_empty()
        && b.volumes.is_empty()
}

/// Whether a pod's node selection names a label unique to each node (or a node field), so node
/// classes cannot stand for their nodes.
fn needs_per_node(pod: &PodSpec) -> bool {
    let unique = |k: &str| NODE_UNIQUE_LABELS.contains(&k);
    let term_unique = |t: &super::model::SelectorTerm| {
        !t.match_fields.is_empty() || t.match_expressions.iter().any(|r| unique(&r.key))
    };
    pod.node_selector.iter().any(|(k, _)| unique(k))
        || pod.required_affinity.iter().flatten().any(term_unique)
        || pod.preferred_affinity.iter().any(|p| term_unique(&p.term))
}

/// splitmix64's finalizer: a fast, well-mixed 64-bit hash step.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

impl<'a> PodPlan<'a> {
    /// What `pod` needs of every node; with `cached`, per-class static predicates are reused
    /// from (and added to) the snapshot lineage's [`super::accel::class_cache::StaticCache`].
    pub(super) fn new(
        profile: &Profile,
        snapshot: &Snapshot,
        pod: &'a PodSpec,
        seed: u64,
        placed: &Placed<'_>,
        cached: bool,
    ) -> Self {
        let fit_requests = profile
            .fit_resources
            .iter()
            .map(|(r, _)| match r {
                ResourceName::Cpu | ResourceName::Memory => pod.non_zero_requests.get(r),
                _ => pod.requests.get(r),
            })
            .collect();
        let balanced: Vec<i64> = profile.balanced_resources.iter().map(|r| pod.requests.get(r)).collect();
        let balanced_requests = (!balanced.iter().all(|r| *r == 0)).then_some(balanced);
        let images = pod
            .images
            .iter()
            .filter_map(|name| {
                let n = snapshot.image_node_count(name);
                (n > 0).then_some((image_hash(name), i64::from(n)))
            })
            .collect();
        let seed = seed ^ profile.policy.seed;
        // The volume plugins' PreFilter; a pod with volumes they read is evaluated node by node.
        let (volumes, volume_error) = if pod.volumes.is_empty() || !profile.volume_filters.any() {
            (None, None)
        } else {
            // The references to a claim by the bound pods, per node.
            let claim_users = |key: &str| -> Vec<(Arc<str>, usize)> {
                snapshot
                    .nodes()
                    .iter()
                    .filter_map(|n| {
                        let refs = n
                            .usage
                            .volumes
                            .iter()
                            .filter(|(ns, v)| v.claim_name().is_some_and(|c| super::volumes::claim_key(ns, c) == key))
                            .count();
                        (refs > 0).then(|| (Arc::from(n.spec.name.as_str()), refs))
                    })
                    .collect()
            };
            match PodVolumes::pre_filter(
                snapshot.storage(),
                profile.volume_filters,
                pod,
                &claim_users,
                &placed.volumes,
            ) {
                Ok(v) => (v.map(Box::new), None),
                Err(message) => (None, Some(Arc::from(message))),
            }
        };
        let per_node = needs_per_node(pod) || volumes.is_some() || volume_error.is_some();
        let mut plan = Self {
            pod,
            fit_requests,
            balanced_requests,
            prefer_tolerations: taint_toleration::prefer_no_schedule_tolerations(&pod.tolerations),
            images,
            tolerates_unschedulable: node_unschedulable::tolerates_unschedulable(&pod.tolerations),
            port_masks: pod.host_ports.iter().map(port_mask).collect(),
            port_keys: pod.host_ports.iter().map(port_key).collect(),
            tie_seed: Self::tie_seed_for(seed, pod),
            per_node,
            class_evals: Arc::from(Vec::new()),
            plain: false,
            volumes,
            volume_error,
            static_filters: profile.static_filters,
            topo: None,
            rule_pod: match &profile.rules {
                Some(Ok(rules)) => Some(rules.pod_value(pod)),
                Some(Err(_)) => Some(cel_rules::pod_value(pod)),
                None => None,
            },
            rule_classes: Vec::new(),
            plain_evals: None,
        };
        if let (Some(Ok(rules)), Some(value)) = (&profile.rules, &plan.rule_pod) {
            let kept = cel_rules::snapshot_rules(snapshot, rules);
            plan.rule_classes = (0..rules.width())
                .map(|k| {
                    rules.class_level(k).then(|| match rules.pod_key(k, value) {
                        Some(key) => {
                            let (outcomes, added, freed) = kept.class_outcomes(k, key);
                            snapshot.add_derived(added);
                            snapshot.sub_derived(freed);
                            outcomes
                        }
                        None => Arc::new(ClassOutcomes::new(snapshot.classes().len())),
                    })
                })
                .collect();
        }
        if !per_node {
            let classes = snapshot.classes();
            plan.class_evals = if cached {
                let filters = profile.static_filters;
                let hash = StaticKey::hash_of(pod, filters);
                let lock = || snapshot.static_cache().lock().unwrap_or_else(|e| e.into_inner());
                // A usable entry, or else the label columns to evaluate with (an entry from
                // before new classes appeared is redone).
                let found = {
                    let mut cache = lock();
                    match cache.by_hash.get(&hash) {
                        Some((key, evals)) if key.is_of(pod, filters) && evals.len() >= classes.len() => {
                            Ok(Arc::clone(evals))
                        }
                        _ => Err(cache.labels_of(classes)),
                    }
                };
                match found {
                    Ok(evals) => evals,
                    Err(labels) => {
                        // Evaluated outside the lock; an evaluation cut short by the call's end is
                        // incomplete and never cached.
                        let evals = plan.class_statics(classes, &labels);
                        if !super::cancel::requested() {
                            lock().insert(hash, StaticKey::of(pod, filters), Arc::clone(&evals));
                        }
                        evals
                    }
                }
            } else {
                classes
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        if super::cancel::requested_at(i) {
                            StaticEval::default()
                        } else {
                            plan.static_eval(c)
                        }
                    })
                    .collect()
            };
        }
        let has = |f: FilterPlugin| profile.policy.filters.contains(&f);
        let slots = profile.slot_of;
        plan.plain = !per_node
            && profile
                .rules
                .as_ref()
                .is_none_or(|r| r.as_ref().is_ok_and(|r| r.plain()))
            && (pod.node_name.as_deref().is_none_or(str::is_empty) || !has(FilterPlugin::NodeName))
            && (slots.fit.is_none() || profile.fit_cpu_memory.is_some())
            && (slots.balanced.is_none() || profile.balanced_cpu_memory || plan.balanced_requests.is_none())
            && profile.score_plugins.iter().take(MAX_SCORES).all(|(p, _)| {
                matches!(
                    p,
                    ScorePlugin::NodeResourcesFit
                        | ScorePlugin::NodeResourcesBalancedAllocation
                        | ScorePlugin::ImageLocality
                        | ScorePlugin::NodeAffinity
                        | ScorePlugin::TaintToleration
                        | ScorePlugin::InterPodAffinity
                        | ScorePlugin::PodTopologySpread
                )
            });
        if plan.plain {
            if let Some(Ok(rules)) = &profile.rules {
                if (0..rules.width()).any(|k| rules.class_level(k)) {
                    plan.plain_evals = Some(plan.fold_class_rules(rules, snapshot));
                }
            }
        }
        plan.topo = TopoState::build(profile, snapshot, placed, &plan);
        plan
    }

    /// `class_evals` with the classes the policy's class-level rules reject (or fail on) marked
    /// rejected: the plain pass, which gathers no reasons, then skips their nodes as the general
    /// pass rejects them (the reasons pass runs the rules again, node by node).
    fn fold_class_rules(&self, rules: &CompiledRules, snapshot: &Snapshot) -> Arc<[StaticEval]> {
        let mut evals = self.class_evals.to_vec();
        for (class, se) in evals.iter_mut().enumerate() {
            if se.rejected {
                continue;
            }
            self.class_rule_outcomes(rules, snapshot, class);
            se.rejected = (0..rules.width()).any(|k| self.class_outcome(k, class).is_err());
        }
        Arc::from(evals)
    }

    /// Evaluates, for the pod, the policy's class-level rules on node class `class` (its shared
    /// labels, taints and cordon) where not done yet (by this pod or one reading alike).
    fn class_rule_outcomes(&self, rules: &CompiledRules, snapshot: &Snapshot, class: usize) {
        let Some(pod) = &self.rule_pod else {
            return;
        };
        let mut context = None;
        for (k, outcomes) in self.rule_classes.iter().enumerate() {
            let Some(outcomes) = outcomes else {
                continue;
            };
            if outcomes.get(class).is_some() {
                continue;
            }
            let _ = outcomes.get_or_eval(class, || {
                let context = context.get_or_insert_with(|| {
                    let spec = snapshot.classes().get(class).map(|c| NodeStatic::of(c));
                    let spec = spec.unwrap_or_else(|| NodeStatic::of(&NodeSpec::default()));
                    rules.context(pod, cel_rules::node_value(&spec, &NodeUsage::default()))
                });
                rules.run(k, context)
            });
        }
    }

    /// Class-level rule `k`'s outcome on class `class`, once [`PodPlan::class_rule_outcomes`]
    /// evaluated it (`Ok(0)` for another rule).
    fn class_outcome(&self, k: usize, class: usize) -> RuleOutcome {
        self.rule_classes
            .get(k)
            .and_then(Option::as_ref)
            .and_then(|o| o.get(class))
            .cloned()
            .unwrap_or(Ok(0))
    }

    /// The static predicates on the node at index `i` of the snapshot.
    fn static_at(&self, snapshot: &Snapshot, i: usize) -> StaticEval {
        if self.per_node {
            self.static_eval(&snapshot.nodes()[i].spec)
        } else {
            self.class_evals[snapshot.hot()[i].class as usize]
        }
    }

    /// The static predicates on one node (or a node class's view of its nodes).
    fn static_eval(&self, node: &NodeSpec) -> StaticEval {
        let pod = self.pod;
        let mismatched = !pod.matches_node_selector_and_affinity(node);
        self.static_eval_with(node, mismatched, node_affinity::score(pod, node))
    }

    /// [`PodPlan::static_eval`] given NodeAffinity's verdict and raw score on the node.
    fn static_eval_with(&self, node: &NodeSpec, mismatched: bool, affinity_weight: i64) -> StaticEval {
        let cordoned = node_unschedulable::rejects(node, self.tolerates_unschedulable);
        let untolerated = taint_toleration::untolerated(&self.pod.tolerations, &node.taints);
        let StaticFilters {
            node_unschedulable: f_cordon,
            taint_toleration: f_taints,
            node_affinity: f_affinity,
        } = self.static_filters;
        StaticEval {
            cordoned,
            untolerated,
            mismatched,
            affinity_weight,
            prefer_taints: taint_toleration::score(&self.prefer_tolerations, node),
            rejected: (cordoned && f_cordon) || (untolerated && f_taints) || (mismatched && f_affinity),
        }
    }

    /// [`PodPlan::static_eval`] of every class, with each label requirement of the pod matched
    /// once per distinct value of its key (`labels`: the columns of these classes) rather than
    /// looked up class by class.
    fn class_statics(&self, classes: &imbl::Vector<Arc<NodeSpec>>, labels: &ClassLabels) -> Arc<[StaticEval]> {
        let pod = self.pod;
        let n = classes.len();
        // A term over every class, as `SelectorTerm::matches` on each class (whose name is empty).
        let term = |t: &super::model::SelectorTerm, out: &mut Vec<bool>| {
            out.clear();
            let empty = t.match_expressions.is_empty() && t.match_fields.is_empty();
            let fields = t.match_fields.iter().all(|r| r.matches(Some("")));
            out.resize(n, !empty && fields);
            for r in &t.match_expressions {
                if super::cancel::requested() {
                    break;
                }
                labels.retain_requirement(r, out);
            }
        };
        // Each selector part costs a pass over the classes: the call's end is polled between them
        // (what is left then is incomplete, and the caller does not cache it).
        let mut selected = vec![true; n];
        for (k, v) in &pod.node_selector {
            if super::cancel::requested() {
                break;
            }
            labels.retain_label(k, v, &mut selected);
        }
        let mut matched = Vec::with_capacity(n);
        if let Some(terms) = &pod.required_affinity {
            let mut any = vec![false; n];
            for t in terms {
                if super::cancel::requested() {
                    break;
                }
                term(t, &mut matched);
                for (a, m) in any.iter_mut().zip(&matched) {
                    *a |= *m;
                }
            }
            for (s, a) in selected.iter_mut().zip(&any) {
                *s &= *a;
            }
        }
        let mut weights = vec![0i64; n];
        for p in &pod.preferred_affinity {
            if super::cancel::requested() {
                break;
            }
            term(&p.term, &mut matched);
            for (w, m) in weights.iter_mut().zip(&matched) {
                *w += if *m { p.weight } else { 0 };
            }
        }
        classes
            .iter()
            .zip(selected.iter().zip(&weights))
            .map(|(c, (s, w))| self.static_eval_with(c, !s, *w))
            .collect()
    }

    /// Whether one of the pod's host ports may conflict with the ports in use on a node whose
    /// [`super::snapshot::port_bits`] are `bits` (if so, the port lists are compared).
    #[inline]
    fn may_conflict(&self, bits: u64) -> bool {
        self.port_masks.iter().any(|m| bits & m == *m)
    }

    /// Whether one of the pod's host ports conflicts with the ports in use on a node whose
    /// [`PortKeys`] are `keys`: `None` when the keys do not say (the port lists are compared).
    #[inline(always)]
    fn keyed_conflict(&self, keys: PortKeys) -> Option<bool> {
        keys.conflict(self.port_keys.as_deref()?)
    }

    /// The tie-break seed of a pod (`seed` already mixed with the policy's).
    pub(super) fn tie_seed_for(seed: u64, pod: &PodSpec) -> u64 {
        mix(seed ^ xxhash_rust::xxh3::xxh3_64(pod.uid.as_bytes()))
    }

    /// The pod's tie-break seed (the policy's and the request's seed mixed with the pod's uid).
    pub(super) fn tie_seed(&self) -> u64 {
        self.tie_seed
    }

    pub(super) fn tie_break(&self, name_hash: u64) -> u64 {
        mix(self.tie_seed ^ name_hash)
    }
}

/// Runs one filter; reports its reasons and returns false when the node is rejected.
fn run_filter(
    plugin: FilterPlugin,
    plan: &PodPlan<'_>,
    topo: Option<&TopoState>,
    se: &StaticEval,
    node: &NodeView<'_>,
    report: &mut impl FnMut(Reason),
) -> bool {
    let pod = plan.pod;
    match plugin {
        FilterPlugin::NodeUnschedulable => {
            if se.cordoned {
                report(Reason::NodeUnschedulable);
                return false;
            }
        }
        FilterPlugin::NodeName => {
            if !node_name::fits(pod, &node.entry.spec) {
                report(Reason::NodeNameMismatch);
                return false;
            }
        }
        FilterPlugin::TaintToleration => {
            if se.untolerated {
                report(Reason::UntoleratedTaint);
                return false;
            }
        }
        FilterPlugin::NodeAffinity => {
            if se.mismatched {
                report(Reason::NodeAffinityMismatch);
                return false;
            }
        }
        FilterPlugin::NodePorts => {
            if plan.may_conflict(node.hot.port_bits) && node_ports::conflicts(&pod.host_ports, &node.usage.host_ports) {
                report(Reason::NodePortsConflict);
                return false;
            }
        }
        FilterPlugin::NodeResourcesFit => {
            return fit::fits(&pod.requests, node, &mut |r| {
                report(match r {
                    ResourceName::Pods => Reason::TooManyPods,
                    r => Reason::Insufficient(r),
                })
            })
        }
        FilterPlugin::PodTopologySpread => {
            if let Some(v) = topo
                .and_then(|t| t.spread_filter.as_ref())
                .and_then(|f| f.check(node.index))
            {
                report(Reason::TopologySpread(v));
                return false;
            }
        }
        FilterPlugin::InterPodAffinity => {
            if let Some(v) = topo
                .and_then(|t| t.interpod_filter.as_ref())
                .and_then(|f| f.check(node.index))
            {
                report(Reason::InterPodAffinity(v));
                return false;
            }
        }
        FilterPlugin::VolumeRestrictions => {
            if let Some(c) = plan.volumes.as_ref().and_then(|v| {
                v.restrictions.as_ref()?.filter(
                    &node.entry.spec.name,
                    node.usage.volumes.iter().map(|(ns, v)| (&**ns, v)),
                )
            }) {
                report(Reason::VolumeRestrictions(c));
                return false;
            }
        }
        FilterPlugin::NodeVolumeLimits => {
            if plan.volumes.as_ref().is_some_and(|v| {
                v.limits.as_ref().is_some_and(|l| {
                    l.exceeds(
                        &v.storage,
                        &node.entry.spec.name,
                        node.usage.volumes.iter().map(|(ns, v)| (&**ns, v)),
                    )
                })
            }) {
                report(Reason::NodeVolumeLimits);
                return false;
            }
        }
        FilterPlugin::VolumeBinding => {
            if let Some(Err(conflicts)) = plan.volumes.as_ref().map(|v| v.binding(&node.entry.spec)) {
                for c in conflicts {
                    report(Reason::VolumeBinding(c));
                }
                return false;
            }
        }
        FilterPlugin::VolumeZone => {
            if plan
                .volumes
                .as_ref()
                .and_then(|v| v.zone.as_ref())
                .is_some_and(|z| z.conflicts(&node.entry.spec))
            {
                report(Reason::VolumeZone);
                return false;
            }
        }
        // Never in a policy's filter list: rules run after the filters (see `Evaluator::eval_node`).
        FilterPlugin::Rules => {}
    }
    true
}

/// The volume plugins' PreFilter states for one pod (kube-scheduler's `CycleState` entries of
/// VolumeRestrictions, NodeVolumeLimits, VolumeBinding and VolumeZone), each `None` when its
/// plugin is not in the profile.
#[derive(Debug, Clone, Default)]
pub struct PodVolumes {
    /// The snapshot's storage objects (shared, copy-on-write).
    storage: super::volumes::StorageObjects,
    /// VolumeRestrictions'.
    restrictions: Option<volumerestrictions::PreFilterState>,
    /// NodeVolumeLimits'.
    limits: Option<nodevolumelimits::PreFilterState>,
    /// VolumeBinding's.
    binding: Option<volumebinding::PreFilterState>,
    /// VolumeZone's.
    zone: Option<volumezone::PreFilterState>,
}

impl PodVolumes {
    /// The PreFilter of the enabled volume plugins, in kube-scheduler's order
    /// (VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone): `Ok(None)` when no
    /// plugin has work for the pod, `Err` with the first rejecting plugin's message (every node
    /// is then rejected, unresolvably).
    pub fn pre_filter(
        storage: &super::volumes::StorageObjects,
        filters: super::volumes::VolumeFilters,
        pod: &PodSpec,
        claim_users: &super::volumes::ClaimUsers<'_>,
        batch: &super::volumes::BatchVolumes,
    ) -> Result<Option<Self>, String> {
        let (namespace, volumes) = (pod.namespace.as_str(), &pod.volumes);
        if volumes.is_empty() || !filters.any() {
            return Ok(None);
        }
        let mut out = Self {
            storage: storage.clone(),
            ..Default::default()
        };
        if filters.restrictions {
            out.restrictions = Some(volumerestrictions::PreFilterState::pre_filter(
                storage,
                namespace,
                volumes,
                claim_users,
                batch,
            )?);
        }
        if filters.limits {
            out.limits = Some(nodevolumelimits::PreFilterState::pre_filter(
                storage, namespace, volumes,
            ));
        }
        if filters.binding {
            out.binding = Some(volumebinding::PreFilterState::pre_filter(
                storage, &pod.uid, namespace, &pod.name, volumes, batch,
            )?);
        }
        if filters.zone {
            out.zone = Some(volumezone::PreFilterState::pre_filter(storage, namespace, volumes)?);
        }
        Ok(Some(out))
    }

    /// VolumeBinding's Filter on the node (no choices when the plugin is not in the profile).
    pub fn binding(
        &self,
        node: &NodeSpec,
    ) -> Result<Vec<(String, super::volumes::VolumeChoice)>, Vec<volume_binder::Conflict>> {
        match &self.binding {
            Some(b) => b.filter(&self.storage, node),
            None => Ok(Vec::new()),
        }
    }
}

/// Runs every filter of the profile for the pod on node `i` with the given usage and topology
/// state (preemption's dry runs pass theirs; otherwise the plan's); reports each rejection and
/// returns whether the node passes.
pub(super) fn filter_node(
    profile: &Profile,
    plan: &PodPlan<'_>,
    topo: Option<&TopoState>,
    index: usize,
    entry: &NodeEntry,
    usage: &NodeUsage,
    report: &mut impl FnMut(FilterPlugin, Reason),
) -> bool {
    let hot = NodeHot::of(entry, usage);
    let se = if plan.per_node {
        plan.static_eval(&entry.spec)
    } else {
        plan.class_evals[entry.class as usize]
    };
    let node = NodeView {
        index,
        hot: &hot,
        entry,
        usage,
    };
    profile
        .policy
        .filters
        .iter()
        .all(|&f| run_filter(f, plan, topo, &se, &node, &mut |r| report(f, r)))
}

/// NodeResourcesFit's score with the profile's strategy.
fn fit_score(profile: &Profile, plan: &PodPlan<'_>, node: &NodeView<'_>) -> i64 {
    let strategy = &profile.policy.scoring_strategy;
    if let Some(weights) = profile.fit_cpu_memory {
        return fit::score_cpu_memory(strategy, weights, &plan.fit_requests, node.hot);
    }
    fit::score_general(
        strategy,
        &profile.shape,
        &profile.fit_resources,
        &plan.fit_requests,
        node,
    )
}

/// Capacities at or above this are scored by the integer path in [`plain_resource_scores`].
const EXACT_CAPACITY: i64 = 1 << 46;

/// NodeResourcesFit's cpu and memory scores (unweighted) and BalancedAllocation's score on one
/// node, as [`fit::score_cpu_memory`] and [`balanced_allocation::score_cpu_memory`] compute them, with their
/// four divisions all in floating point (two of them were integer divisions, several times slower).
///
/// Exact: the integer quotient `n · 100 / c` (0 ≤ n ≤ c) is the truncated float quotient, since
/// both convert exactly (below 2⁵³) and a true quotient that is not an integer lies at least
/// `1 / (101 · c)` below the next one, more than the rounding error when `c < 2⁴⁶`. `None` (the
/// caller takes the integer path) for a capacity out of that range or a negative request.
#[inline(always)]
fn plain_resource_scores(h: &NodeHot, fit: [i64; 2], balanced: [i64; 2], most: bool) -> Option<(i64, i64, i64)> {
    let in_range = |c: i64| c > 0 && c < EXACT_CAPACITY;
    if !(in_range(h.alloc_cpu) && in_range(h.alloc_memory)) {
        return None;
    }
    let requested = [
        h.non_zero_cpu.saturating_add(fit[0]),
        h.non_zero_memory.saturating_add(fit[1]),
    ];
    if requested[0] < 0 || requested[1] < 0 {
        return None;
    }
    let alloc = [h.alloc_cpu, h.alloc_memory];
    let capped = [requested[0].min(alloc[0]), requested[1].min(alloc[1])];
    let numerator = if most {
        capped
    } else {
        [alloc[0] - capped[0], alloc[1] - capped[1]]
    };
    let alloc = [alloc[0] as f64, alloc[1] as f64];
    let n = [
        (numerator[0] * MAX_NODE_SCORE) as f64,
        (numerator[1] * MAX_NODE_SCORE) as f64,
    ];
    let q = [n[0] / alloc[0], n[1] / alloc[1]];
    // BalancedAllocation, operation for operation as `balanced_allocation::score_cpu_memory`.
    let used = [
        h.req_cpu.saturating_add(balanced[0]) as f64,
        h.req_memory.saturating_add(balanced[1]) as f64,
    ];
    let f = [(used[0] / alloc[0]).min(1.0), (used[1] / alloc[1]).min(1.0)];
    let std = ((f[0] - f[1]) / 2.0).abs();
    Some((q[0] as i64, q[1] as i64, ((1.0 - std) * MAX_NODE_SCORE as f64) as i64))
}

/// NodeResourcesBalancedAllocation's score: 100 × (1 − standard deviation of the fractions).
fn balanced_score(profile: &Profile, requests: &[i64], node: &NodeView<'_>) -> i64 {
    if profile.balanced_cpu_memory {
        return balanced_allocation::score_cpu_memory(requests, node.hot);
    }
    balanced_allocation::score_general(&profile.balanced_resources, requests, node)
}

/// ImageLocality's score from the node's sum of scaled image sizes (see [`Evaluator::image_sums`]).
fn image_score(plan: &PodPlan<'_>, sum: i64) -> i64 {
    if plan.images.is_empty() {
        return 0;
    }
    image_locality::score(plan.pod.images.len(), sum)
}

/// The item with the highest (total, tie-break, node index) by `key` (total and index), in one
/// pass that hashes only items tied with the best total so far. For a list in node order, the
/// last of equals, as `max_by_key` picks.
pub(super) fn best_candidate<T>(
    items: impl IntoIterator<Item = T>,
    key: impl Fn(&T) -> (i64, u32),
    tie_break: impl Fn(&T) -> u64,
) -> Option<T> {
    let mut iter = items.into_iter();
    let mut best = iter.next()?;
    let mut best_hash: Option<u64> = None;
    for c in iter {
        let ((total, index), (best_total, best_index)) = (key(&c), key(&best));
        if total > best_total {
            best = c;
            best_hash = None;
        } else if total == best_total {
            let bh = *best_hash.get_or_insert_with(|| tie_break(&best));
            let ch = tie_break(&c);
            if (ch, index) > (bh, best_index) {
                best = c;
                best_hash = Some(ch);
            }
        }
    }
    Some(best)
}

/// The raw per-node scores of one feasible node in the plain pass (0 for a plugin not scored).
#[derive(Debug, Clone, Copy, Default)]
struct NodeScores {
    /// NodeResourcesFit's weighted cpu and memory score.
    fit: i64,
    /// BalancedAllocation's score.
    balanced: i64,
    /// ImageLocality's score.
    image: i64,
}

impl NodeScores {
    /// The per-node part of the node's total: the scores weighed by `[fit, balanced, image]`.
    #[inline(always)]
    fn weighed(&self, [fit, balanced, image]: [i64; 3]) -> i64 {
        self.fit * fit + self.balanced * balanced + self.image * image
    }
}

/// What the plain pass does with each feasible node (see [`Evaluator::plain_pass`]).
trait PlainSink {
    /// Whether [`PlainSink::bars`] rules nodes out (the pass then checks them first, and counts
    /// the nodes ruled out with [`PlainSink::skip`] instead of handing them over).
    const RULES_OUT: bool = false;

    /// Per class, the per-node part (weighed by [`PlainSink::part_weights`]) a feasible node must
    /// reach to change what the sink keeps; a node below its class's bar stays below it for the
    /// rest of the pass. Covers every class a node may have (see `HotColumns::max_class`).
    fn bars(&self) -> &[i64] {
        &[]
    }

    /// The weights of the fit, balanced and image scores in the part [`PlainSink::bars`] bars.
    fn part_weights(&self) -> [i64; 3] {
        [0; 3]
    }

    /// Counts `n` feasible nodes that [`PlainSink::bars`] ruled out.
    fn skip(&mut self, _n: usize) {}

    /// Whether [`PlainSink::bars`] rule nodes out for this pod ([`PlainSink::RULES_OUT`] says
    /// whether they may).
    fn rules_out(&self) -> bool {
        Self::RULES_OUT
    }

    /// Of the block at `base`, the nodes the sink takes at all: the others are not feasible to
    /// it (nodes a pod-free CEL rule rejects). Every node by default.
    #[inline(always)]
    fn admitted(&self, _base: usize) -> u64 {
        !0
    }

    /// Writes, per node of the block at `base`, an upper bound of what the sink adds to the
    /// node's part beyond the scores [`PlainSink::part_weights`] weighs (see
    /// `RuleColumns::bounds`), for the rule-out; `false` when it adds nothing.
    #[inline(always)]
    fn part_bounds(&self, _base: usize, _out: &mut [f64; BLOCK]) -> bool {
        false
    }

    /// Whether the sink takes a block's feasible nodes as a mask, through [`PlainSink::block`]
    /// instead of [`PlainSink::feasible`] (which still takes the nodes checked one by one).
    const WHOLE_BLOCKS: bool = false;

    /// Takes the `feasible` nodes (bits) of the block at `base` (a [`PlainSink::WHOLE_BLOCKS`]
    /// sink: no scores are worked out for them).
    fn block(&mut self, _base: usize, _feasible: u64) {}

    /// Takes feasible node `i`, its class, the class's static predicates and the node's scores.
    fn feasible(&mut self, i: usize, class: u32, se: &StaticEval, scores: NodeScores);
}

/// NodeAffinity's and TaintToleration's raw scores at their highest over the feasible nodes seen:
/// the plain pass normalizes the class-wide scores with them.
#[derive(Debug, Clone, Copy)]
struct ClassMaxima {
    affinity: i64,
    taints: i64,
}

impl ClassMaxima {
    /// No feasible node seen yet.
    const NONE: Self = Self {
        affinity: i64::MIN,
        taints: i64::MIN,
    };

    /// Counts a feasible node of a class with these static predicates.
    #[inline(always)]
    fn see(&mut self, se: &StaticEval) {
        self.affinity = self.affinity.max(se.affinity_weight);
        self.taints = self.taints.max(se.prefer_taints);
    }
}

/// Keeps every feasible node as a candidate with its raw scores, and the class-wide maxima.
struct KeepAll {
    candidates: Vec<Candidate>,
    slots: PlainSlots,
    maxima: ClassMaxima,
}

impl PlainSink for KeepAll {
    #[inline(always)]
    fn feasible(&mut self, i: usize, _: u32, se: &StaticEval, scores: NodeScores) {
        // Written in place: a raw array built on the stack and then copied is reloaded wider
        // than it was stored, which stalls store forwarding on every node.
        self.candidates.push(Candidate {
            index: i as u32,
            raw: [0; MAX_SCORES],
            total: 0,
        });
        let Some(Candidate { raw, .. }) = self.candidates.last_mut() else {
            return;
        };
        let slots = self.slots;
        if let Some(slot) = slots.fit {
            raw[slot] = scores.fit;
        }
        if let Some(slot) = slots.balanced {
            raw[slot] = scores.balanced;
        }
        if let Some(slot) = slots.image {
            raw[slot] = scores.image;
        }
        if let Some(slot) = slots.affinity {
            raw[slot] = se.affinity_weight;
        }
        if let Some(slot) = slots.taints {
            raw[slot] = se.prefer_taints;
        }
        self.maxima.see(se);
    }
}

/// A feasible node's index, class and total (Rank's compact candidate).
#[derive(Debug, Clone, Copy)]
pub(super) struct Scored {
    pub(super) index: u32,
    /// Its class (where the class-wide part of its total is read, without the node's hot row).
    pub(super) class: u32,
    pub(super) total: i64,
}

/// Keeps every feasible node's index and per-node part of the total, and the class-wide maxima.
struct KeepTotals {
    totals: TotalsBuffer,
    /// The weights of the fit, balanced and image scores.
    weights: [i64; 3],
    maxima: ClassMaxima,
}

impl PlainSink for KeepTotals {
    #[inline(always)]
    fn feasible(&mut self, i: usize, class: u32, se: &StaticEval, scores: NodeScores) {
        self.totals.push(Scored {
            index: i as u32,
            class,
            total: scores.weighed(self.weights),
        });
        self.maxima.see(se);
    }
}

/// Score rules' extrema as gathered (least, greatest), with (0, 0) for a rule no node was
/// scored by.
fn settled(extrema: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    extrema
        .into_iter()
        .map(|e| if e.0 > e.1 { (0, 0) } else { e })
        .collect()
}

/// Node `i`'s CEL value with `usage`, its usage-independent part built once in `statics` (when
/// it has room for the node).
fn rule_node_value(statics: &mut [Option<NodeStatic>], i: usize, entry: &NodeEntry, usage: &NodeUsage) -> cel::Value {
    match statics.get_mut(i) {
        Some(slot) => cel_rules::node_value(slot.get_or_insert_with(|| NodeStatic::of(&entry.spec)), usage),
        None => cel_rules::node_value(&NodeStatic::of(&entry.spec), usage),
    }
}

/// Each score rule's extrema over the feasible nodes and weight: what turns its raw scores into
/// the node's part of the total (see [`Evaluator::rules_part`]).
#[derive(Debug, Clone, Copy, Default)]
struct RuleScaling {
    rules: [(i64, i64, i64); cel_rules::MAX_RULES],
    len: usize,
}

impl RuleScaling {
    /// The weighted sum of `scores` (one per score rule), each min-max scaled to 0..=100 (0 when
    /// every feasible node scores alike); 64-bit arithmetic where it cannot overflow.
    #[inline]
    fn part(&self, scores: &[i64]) -> i64 {
        let mut total = 0i64;
        for (&(min, max, weight), &r) in self.rules[..self.len].iter().zip(scores) {
            if max <= min {
                continue;
            }
            let normalized = match (max.checked_sub(min), r.checked_sub(min)) {
                (Some(span), Some(d)) if (0..=i64::MAX / MAX_NODE_SCORE).contains(&d) => MAX_NODE_SCORE * d / span,
                _ => {
                    let span = i128::from(max) - i128::from(min);
                    (i128::from(MAX_NODE_SCORE) * (i128::from(r) - i128::from(min)) / span) as i64
                }
            };
            total += normalized * weight;
        }
        total
    }
}

/// The policy's CEL rules in the plain pass (under a policy whose rules [`CompiledRules::plain`]
/// takes): the class-level ones were folded into the class predicates (see
/// [`PodPlan::fold_class_rules`]); this runs the pod-free node rules on each node the pass finds
/// feasible, from the snapshot's kept outcomes or the batch's, writes the score rules' raw scores
/// to `raw`, and hands the nodes no rule rejects to `inner`. Never used with a sink that
/// [`PlainSink::RULES_OUT`]: a node it bars would skip the rules.
struct RuleSink<'e, 'p, S> {
    inner: S,
    rules: &'e CompiledRules,
    plan: &'e PodPlan<'p>,
    usage: &'e BatchUsage<'e>,
    nodes: &'e [Arc<NodeEntry>],
    kept: Option<&'e SnapshotRules>,
    changed: &'e mut HashMap<(u32, u32), (u64, RuleOutcome)>,
    statics: &'e mut Vec<Option<NodeStatic>>,
    /// Score rules' raw scores per node (`rules.scores.len()` per node).
    raw: &'e mut Vec<i64>,
    /// The filter rules evaluated node by node (the others were folded into the classes).
    node_filters: Vec<usize>,
    /// Each score rule's index among the rules (after the filters) and whether it is read per
    /// class.
    score_rules: Vec<(usize, bool)>,
    /// Each score rule's least and greatest raw score over the nodes handed to `inner`.
    extrema: Vec<(i64, i64)>,
}

impl<S: PlainSink> RuleSink<'_, '_, S> {
    /// Rule `k`'s value on node `i` (a pod-free node rule, or a class-level one): a score rule's
    /// raw score, 0 for a filter rule that keeps the node, `None` when the rule rejects it.
    #[inline(always)]
    fn value(&mut self, i: usize, k: usize, class_level: bool) -> Option<i64> {
        if class_level {
            return self.plan.class_outcome(k, self.nodes[i].class as usize).ok();
        }
        let stamp = self.usage.stamp(i);
        if stamp == 0 {
            if let Some(outcome) = self.kept.and_then(|kept| kept.nodes.get(i, k)) {
                return outcome.as_ref().ok().copied();
            }
        }
        self.evaluate(i, k, stamp)
    }

    /// [`RuleSink::value`] of a pod-free node rule not kept yet: evaluated, and kept.
    #[cold]
    #[inline(never)]
    fn evaluate(&mut self, i: usize, k: usize, stamp: u64) -> Option<i64> {
        if self.plan.rule_pod.is_none() {
            return Some(0);
        }
        let mut kept = KeptRules {
            rules: self.rules,
            kept: self.kept,
            changed: self.changed,
            statics: self.statics,
            nodes: self.nodes,
        };
        kept.outcome(self.usage, i, k, stamp).ok()
    }
}

/// Where the outcomes of a policy's pod-free node rules are kept (see [`KeptRules::outcome`]).
struct KeptRules<'e> {
    rules: &'e CompiledRules,
    /// The snapshot's outcomes, for nodes whose usage is the snapshot's.
    kept: Option<&'e SnapshotRules>,
    /// The outcomes on nodes a batch changed, by node and rule, under the usage's stamp.
    changed: &'e mut HashMap<(u32, u32), (u64, RuleOutcome)>,
    statics: &'e mut Vec<Option<NodeStatic>>,
    nodes: &'e [Arc<NodeEntry>],
}

impl KeptRules<'_> {
    /// Pod-free node rule `k`'s outcome on node `i` with `usage`, whose stamp there is `stamp`:
    /// kept in the snapshot's outcomes while that is 0, else under the stamp, and evaluated on
    /// first use.
    fn outcome(&mut self, usage: &BatchUsage<'_>, i: usize, k: usize, stamp: u64) -> RuleOutcome {
        let entry = &self.nodes[i];
        let rules = self.rules;
        let statics = &mut *self.statics;
        // The node's value: cut to what the rule reads when it says (built afresh: cheap), else
        // whole from the node's kept static part.
        let mut eval = || {
            let node = match rules.node_paths(k) {
                Some(paths) => cel_rules::node_value_reading(&entry.spec, usage.get(i), paths),
                None => rule_node_value(statics, i, entry, usage.get(i)),
            };
            rules.run(k, &rules.node_context(node))
        };
        match self.kept {
            Some(kept) if stamp == 0 => kept.nodes.get_or_eval(i, k, eval),
            _ => match self.changed.get(&(i as u32, k as u32)) {
                Some((s, outcome)) if *s == stamp => outcome.clone(),
                _ => {
                    let outcome = eval();
                    self.changed.insert((i as u32, k as u32), (stamp, outcome.clone()));
                    outcome
                }
            },
        }
    }

    /// Node `i`'s entries in `cols` as `usage` leaves them (see [`RuleColumns::set`]).
    fn set_node(&mut self, cols: &mut RuleColumns, usage: &BatchUsage<'_>, i: usize) {
        let stamp = usage.stamp(i);
        let filters = self.rules.filters.len();
        let mut scores = [0i64; cel_rules::MAX_RULES];
        let mut kept = true;
        for k in (0..filters).filter(|&k| !self.rules.class_level(k)) {
            if kept && self.outcome(usage, i, k, stamp).is_err() {
                kept = false;
            }
        }
        for (j, score) in scores.iter_mut().enumerate().take(self.rules.scores.len()) {
            if !kept {
                break;
            }
            match self.outcome(usage, i, filters + j, stamp) {
                Ok(v) => *score = v,
                Err(_) => kept = false,
            }
        }
        cols.set(i, stamp, kept.then_some(&scores[..self.rules.scores.len()]));
    }
}

impl<S: PlainSink> PlainSink for RuleSink<'_, '_, S> {
    #[inline]
    fn feasible(&mut self, i: usize, class: u32, se: &StaticEval, scores: NodeScores) {
        for j in 0..self.node_filters.len() {
            let k = self.node_filters[j];
            if self.value(i, k, false).is_none() {
                return;
            }
        }
        let n = self.score_rules.len();
        let mut values = [0i64; cel_rules::MAX_RULES];
        for (j, value) in values.iter_mut().enumerate().take(n) {
            let (k, class_level) = self.score_rules[j];
            match self.value(i, k, class_level) {
                Some(v) => *value = v,
                None => return,
            }
        }
        if let Some(out) = self.raw.get_mut(i * n..(i + 1) * n) {
            out.copy_from_slice(&values[..n]);
        }
        for (e, &v) in self.extrema.iter_mut().zip(&values[..n]) {
            *e = (e.0.min(v), e.1.max(v));
        }
        self.inner.feasible(i, class, se, scores);
    }
}

/// Keeps the `k` best of `items` by `cmp` (best first in `cmp`'s order), in no particular
/// order: partitions on the total alone (no hashing), keeps every item above the k-th total, and
/// breaks ties only among the items equal to it. Keeps all when `k` is 0 or covers them.
pub(super) fn keep_top_k<T: Copy>(
    items: &mut Vec<T>,
    k: usize,
    total: impl Fn(&T) -> i64,
    cmp: impl Fn(&T, &T) -> std::cmp::Ordering,
) {
    if k == 0 || k >= items.len() {
        return;
    }
    let threshold = match kth_total_small(items, k, &total) {
        Some(t) => t,
        None => {
            items.select_nth_unstable_by(k - 1, |a, b| total(b).cmp(&total(a)));
            total(&items[k - 1])
        }
    };
    let mut tied: Vec<T> = items.iter().filter(|c| total(c) == threshold).copied().collect();
    items.retain(|c| total(c) > threshold);
    let need = k - items.len();
    if need < tied.len() {
        tied.select_nth_unstable_by(need - 1, cmp);
        tied.truncate(need);
    }
    items.extend(tied);
}

/// The `k`-th largest total of `items` (counting equal totals apart), for a `k` of at most
/// [`SMALL_K`] (`None` beyond): one pass keeping the `k` largest so far in order, where most
/// items fail the first comparison (Rank's usual top 10 of ~3,000 feasible nodes), instead of a
/// selection that moves every item.
fn kth_total_small<T>(items: &[T], k: usize, total: impl Fn(&T) -> i64) -> Option<i64> {
    if k == 0 || k > SMALL_K || k > items.len() {
        return None;
    }
    let mut best = [i64::MIN; SMALL_K];
    let mut len = 0;
    for item in items {
        let t = total(item);
        if len == k && t <= best[k - 1] {
            continue;
        }
        // Insert in descending order, dropping the smallest when full.
        let mut at = len.min(k - 1);
        while at > 0 && best[at - 1] < t {
            best[at] = best[at - 1];
            at -= 1;
        }
        best[at] = t;
        len = (len + 1).min(k);
    }
    Some(best[k - 1])
}

/// The largest `k` that [`kth_total_small`] takes.
const SMALL_K: usize = 32;

/// The best node of one class so far in [`Evaluator::evaluate_best`] (its per-node part is the
/// class's entry in [`KeepBest::bars`]).
#[derive(Debug, Clone, Copy)]
struct ClassBest {
    /// Its tie-break key (see [`PodPlan::tie_break`]), once a node of equal part needed it: most
    /// nodes that reach the bar pass it, and their keys are never compared.
    tie: Option<u64>,
    /// Its index, `u32::MAX` while the class has no feasible node.
    index: u32,
}

impl ClassBest {
    /// No feasible node yet: any node replaces it (its bar is `i64::MIN`, no part is below).
    const NONE: Self = Self {
        tie: None,
        index: u32::MAX,
    };
}

/// The score rules' side of [`KeepBest`] under a policy whose pod-free node rules sit in
/// [`RuleColumns`]: which nodes they keep, and the part their scores add.
struct BestRules<'b> {
    cols: &'b RuleColumns,
    /// How the score rules' raw scores become the node's part (exact).
    scaling: RuleScaling,
    /// Per score rule, its least raw score and `100 · weight / span` (see
    /// [`RuleColumns::bounds`]).
    bounds: Vec<(f64, f64)>,
    /// Whether the extrema are within [`EXACT_SCORE`], where the bounds hold: otherwise no node
    /// is ruled out.
    exact: bool,
}

impl BestRules<'_> {
    /// The exact part node `i`'s score rules add.
    #[inline(always)]
    fn part(&self, i: usize) -> i64 {
        let mut raw = [0i64; cel_rules::MAX_RULES];
        let raw = &mut raw[..self.scaling.len];
        self.cols.scores_of(i, raw);
        self.scaling.part(raw)
    }
}

/// The first pass of [`Evaluator::evaluate_best_ruled`] when the score rules' order does not
/// settle their extrema (see [`Evaluator::extrema_by_order`]): counts the feasible nodes the
/// pod-free node rules keep, and each score rule's extrema over them, from the kernel's masks.
struct RuleExtrema<'b> {
    cols: &'b RuleColumns,
    kernel: Option<Kernel>,
    extrema: Vec<(i64, i64)>,
    feasible: usize,
}

impl PlainSink for RuleExtrema<'_> {
    const WHOLE_BLOCKS: bool = true;

    #[inline(always)]
    fn admitted(&self, base: usize) -> u64 {
        self.cols.pass(base)
    }

    fn block(&mut self, base: usize, feasible: u64) {
        self.feasible += feasible.count_ones() as usize;
        self.cols.widen(self.kernel, base, feasible, &mut self.extrema);
    }

    fn feasible(&mut self, i: usize, _: u32, _: &StaticEval, _: NodeScores) {
        if self.cols.admits(i) {
            self.block(i - i % BLOCK, 1 << (i % BLOCK));
        }
    }
}

/// The feasible nodes the pod-free node rules keep, of the blocks a pass was given (see
/// [`Evaluator::extrema_by_order`]).
struct Probe<'b> {
    cols: &'b RuleColumns,
    /// The nodes found, of the one block probed.
    mask: u64,
}

impl PlainSink for Probe<'_> {
    const WHOLE_BLOCKS: bool = true;

    #[inline(always)]
    fn admitted(&self, base: usize) -> u64 {
        self.cols.pass(base)
    }

    fn block(&mut self, _: usize, feasible: u64) {
        self.mask |= feasible;
    }

    fn feasible(&mut self, i: usize, _: u32, _: &StaticEval, _: NodeScores) {
        if self.cols.admits(i) {
            self.mask |= 1 << (i % BLOCK);
        }
    }
}

/// How many blocks [`Evaluator::extrema_by_order`] may probe for one pod before leaving the
/// extrema to a pass over every block.
const ORDER_PROBES: usize = 8;

/// How many nodes [`Evaluator::extrema_by_order`] may walk for one pod (see [`ORDER_PROBES`]).
const ORDER_WALK: usize = 256;

/// Keeps, per node class, the feasible node with the best per-node score, and counts them all.
struct KeepBest<'b, 'p> {
    /// The score rules' side, under a policy with pod-free node rules (the part then includes
    /// their scores).
    rules: Option<BestRules<'b>>,
    winners: Vec<ClassBest>,
    /// Per class (padded to every class a node may have), the per-node part of its best node so
    /// far (weighted fit, balanced and image scores); `i64::MIN` while it has none.
    bars: Vec<i64>,
    /// The weights of the fit, balanced and image scores.
    weights: [i64; 3],
    cols: &'b HotColumns,
    plan: &'b PodPlan<'p>,
    feasible: usize,
}

impl PlainSink for KeepBest<'_, '_> {
    const RULES_OUT: bool = true;

    /// A node below its class's best part cannot win (the best part only grows).
    fn bars(&self) -> &[i64] {
        &self.bars
    }

    fn part_weights(&self) -> [i64; 3] {
        self.weights
    }

    #[inline(always)]
    fn skip(&mut self, n: usize) {
        self.feasible += n;
    }

    fn rules_out(&self) -> bool {
        self.rules.as_ref().is_none_or(|r| r.exact)
    }

    #[inline(always)]
    fn admitted(&self, base: usize) -> u64 {
        match &self.rules {
            Some(r) => r.cols.pass(base),
            None => !0,
        }
    }

    #[inline(always)]
    fn part_bounds(&self, base: usize, out: &mut [f64; BLOCK]) -> bool {
        match &self.rules {
            Some(r) => {
                r.cols.bounds(base, &r.bounds, out);
                true
            }
            None => false,
        }
    }

    #[inline(always)]
    fn feasible(&mut self, i: usize, class: u32, _: &StaticEval, scores: NodeScores) {
        let mut part = scores.weighed(self.weights);
        if let Some(r) = &self.rules {
            if !r.cols.admits(i) {
                return;
            }
            part += r.part(i);
        }
        self.feasible += 1;
        let (Some(w), Some(bar)) = (self.winners.get_mut(class as usize), self.bars.get_mut(class as usize)) else {
            return;
        };
        // Equal parts: the higher tie-break wins, then the later node (as in `best_candidate`).
        if part < *bar {
            return;
        }
        if part > *bar || w.index == u32::MAX {
            *w = ClassBest {
                tie: None,
                index: i as u32,
            };
            *bar = part;
            return;
        }
        let key = |i: usize| self.plan.tie_break(self.cols.name_hash(i));
        let (tie, held) = (key(i), w.tie.unwrap_or_else(|| key(w.index as usize)));
        *w = if tie >= held {
            ClassBest {
                tie: Some(tie),
                index: i as u32,
            }
        } else {
            ClassBest {
                tie: Some(held),
                index: w.index,
            }
        };
    }
}

/// The node [`Evaluator::evaluate_best`] picked (index and total) and how many were feasible.
#[derive(Debug, Clone, Copy)]
pub(super) struct BestNode {
    pub(super) best: Option<(usize, i64)>,
    pub(super) feasible: usize,
}

/// The per-node score slots of the plain pass and their weights.
#[derive(Debug, Clone, Copy)]
struct PerNodeSlots {
    slots: [(usize, i64); MAX_SCORES],
    len: usize,
}

/// One pod's plain pass over the nodes (see [`Evaluator::plain_nodes`]): what it reads, worked
/// out once per pod.
struct PlainNodes<'e, 'p> {
    profile: &'e Profile,
    plan: &'e PodPlan<'p>,
    usage: &'e BatchUsage<'e>,
    hot: &'e [NodeHot],
    evals: &'e [StaticEval],
    nodes: &'e [Arc<NodeEntry>],
    image_sums: &'e [i64],
    /// Some extended resource is requested: only nodes that have some can fit.
    want_scalars: bool,
    check_fit: bool,
    check_ports: bool,
    /// NodeResourcesFit's slot and cpu and memory weights, when it is scored.
    fit: Option<(usize, (i64, i64))>,
    /// BalancedAllocation's slot and the pod's requests, when it is scored.
    balanced: Option<(usize, &'e [i64])>,
    image: bool,
    /// ImageLocality's scale for the pod.
    image_scale: ImageScale,
    /// The pair of requests each resource score reads (see `plain_resource_scores`).
    fit_requests: [i64; 2],
    balanced_requests: [i64; 2],
    most_allocated: bool,
}

impl<'e, 'p> PlainNodes<'e, 'p> {
    #[inline(always)]
    fn new(ev: &'e Evaluator<'_>, plan: &'e PodPlan<'p>, usage: &'e BatchUsage<'e>) -> Self {
        let profile = ev.profile;
        let slots = profile.slot_of;
        let req = &plan.pod.requests;
        let balanced = slots.balanced.zip(plan.balanced_requests.as_deref());
        let pair = |r: &[i64]| [r.first().copied().unwrap_or(0), r.get(1).copied().unwrap_or(0)];
        Self {
            profile,
            plan,
            usage,
            hot: &usage.hot,
            evals: plan.plain_evals.as_deref().unwrap_or(&plan.class_evals),
            nodes: ev.snapshot.nodes(),
            image_sums: ev.image_sums.get(),
            want_scalars: req.scalars.iter().any(|(_, want)| *want > 0),
            check_fit: profile.policy.filters.contains(&FilterPlugin::NodeResourcesFit),
            check_ports: profile.policy.filters.contains(&FilterPlugin::NodePorts) && !plan.port_masks.is_empty(),
            fit: slots.fit.zip(profile.fit_cpu_memory),
            balanced,
            image: slots.image.is_some() && !plan.images.is_empty(),
            image_scale: ImageScale::of(plan.pod.images.len()),
            fit_requests: pair(&plan.fit_requests),
            balanced_requests: balanced.map_or([0, 0], |(_, r)| pair(r)),
            most_allocated: matches!(profile.policy.scoring_strategy, ScoringStrategy::MostAllocated),
        }
    }

    /// The kernel's view of the pod, when the kernel can take it: NodeResourcesFit filters and
    /// both resource scores are on (what the kernel computes), with requests in its exact range.
    fn ask(&self) -> Option<PodAsk> {
        if !(self.check_fit && self.fit.is_some() && self.balanced.is_some()) || self.usage.cols.len() != self.hot.len()
        {
            return None;
        }
        let req = &self.plan.pod.requests;
        let ask = PodAsk::new(
            [req.milli_cpu, req.memory, req.ephemeral_storage],
            self.fit_requests,
            self.balanced_requests,
            self.most_allocated,
        )?;
        if !self.image || self.image_sums.len() < self.usage.cols.len().div_ceil(BLOCK) * BLOCK {
            return Some(ask);
        }
        Some(ask.with_image(ImageAsk {
            min: MIN_IMAGE_THRESHOLD,
            max: self.image_scale.max,
        }))
    }

    /// The nodes block by block: the kernel filters on resources and scores them, the class and
    /// the rest are checked on the nodes it passed, in node order; a node it flags as out of its
    /// range goes through [`PlainNodes::node`].
    #[inline(always)]
    fn blocks<S: PlainSink>(
        &self,
        kernel: Kernel,
        ask: &PodAsk,
        bases: impl Iterator<Item = usize>,
        deadline: Deadline,
        sink: &mut S,
    ) -> Result<(), DeadlinePassed> {
        let cols = &*self.usage.cols;
        let mut out = BlockScores::default();
        let mut bounds = [0.0; BLOCK];
        let weights = self.fit.map_or((0, 0), |(_, w)| w);
        // -1 for a class the pod's static predicates allow, 0 for one they reject (or unknown).
        let mut allowed = ClassAllowed::take_spare();
        allowed.clear();
        allowed.extend(self.evals.iter().map(|se| -i32::from(!se.rejected)));
        let classes = allowed.len().max(cols.max_class() as usize + 1);
        allowed.resize(classes, 0);
        // A sink that rules nodes out is asked first, block by block, by the kernel (its bars
        // gathered by class) rather than by a branch per node; only the nodes the kernel passes
        // that are surely feasible are ruled out (and counted as feasible): not with extended
        // resources to check node by node, nor a node where a host port of the pod may be in
        // use; and only when the kernel has every score of the part.
        let part_weights = PartWeights::new(weights, sink.part_weights()).filter(|_| {
            S::RULES_OUT
                && sink.rules_out()
                && !(self.check_fit && self.want_scalars)
                && (ask.scores_image() || !self.image)
        });
        let scores_of = |out: &BlockScores, j: usize, i: usize| {
            let mut scores = NodeScores {
                fit: fit::weigh(i64::from(out.cpu[j]), i64::from(out.memory[j]), weights),
                balanced: i64::from(out.balanced[j]),
                image: 0,
            };
            if ask.scores_image() {
                scores.image = i64::from(out.image[j]);
            } else {
                self.image(i, &mut scores);
            }
            scores
        };
        for base in bases {
            if base % 4096 == 0 && base > 0 && deadline.passed() {
                return Err(DeadlinePassed);
            }
            let masks = if S::WHOLE_BLOCKS {
                kernel.masks(cols, base, ask, &allowed)
            } else {
                kernel.block(cols, base, ask, &allowed, self.image_sums, &mut out)
            };
            let admitted = sink.admitted(base);
            let (mut fast, slow) = (masks.fast & admitted, masks.slow & admitted);
            if self.check_fit && self.want_scalars {
                // A pod requesting an extended resource fits only nodes that have some.
                fast &= cols.scalar_nodes(base);
            }
            if S::WHOLE_BLOCKS {
                if self.has_rest() {
                    fast = self.fitting_rest(base, fast);
                }
                sink.block(base, fast);
                fast = 0;
            }
            if let Some(w) = part_weights.as_ref().filter(|_| fast != 0) {
                let sure = if self.check_ports {
                    fast & !self.ports_maybe(base, fast)
                } else {
                    fast
                };
                let extra = sink.part_bounds(base, &mut bounds).then_some(&bounds);
                let keep = sure & kernel.reaching(cols, base, &out, w, extra, sink.bars());
                sink.skip((sure & !keep).count_ones() as usize);
                fast &= keep | !sure;
            }
            let mut todo = fast | slow;
            while todo != 0 {
                let j = todo.trailing_zeros() as usize;
                todo &= todo - 1;
                let i = base + j;
                if slow & (1 << j) != 0 {
                    self.node(i, sink);
                    continue;
                }
                if !self.fits_rest(i) {
                    continue;
                }
                let class = cols.class(i);
                sink.feasible(i, class, &self.evals[class as usize], scores_of(&out, j, i));
            }
        }
        Ok(())
    }

    /// Whether the pod has filters the kernel leaves to the node (host ports, extended resources).
    #[inline(always)]
    fn has_rest(&self) -> bool {
        self.check_ports || (self.check_fit && self.want_scalars)
    }

    /// The filters the kernel leaves to the node: host ports and extended resources (the node's
    /// hot fields are read only for a pod that has either).
    #[inline(always)]
    fn fits_rest(&self, i: usize) -> bool {
        let plan = self.plan;
        if !self.has_rest() {
            return true;
        }
        // The node's port list (behind two pointers) only when its keys do not say.
        if self.check_ports
            && plan.may_conflict(self.usage.cols.port_bits(i))
            && plan
                .keyed_conflict(self.usage.cols.port_keys(i))
                .unwrap_or_else(|| node_ports::conflicts(&plan.pod.host_ports, &self.usage.get(i).host_ports))
        {
            return false;
        }
        !(self.check_fit
            && self.want_scalars
            && !(self.hot[i].has_scalars
                && fit::fits_scalars(&plan.pod.requests.scalars, &self.nodes[i].spec, self.usage.get(i))))
    }

    /// Of the `nodes` of the block at `base`, those that pass [`PlainNodes::fits_rest`].
    fn fitting_rest(&self, base: usize, nodes: u64) -> u64 {
        let (mut fit, mut left) = (0u64, nodes);
        while left != 0 {
            let j = left.trailing_zeros() as usize;
            left &= left - 1;
            if self.fits_rest(base + j) {
                fit |= 1 << j;
            }
        }
        fit
    }

    /// Of the `nodes` of the block at `base`, those on which a host port of the pod may be in use
    /// (the others have none of its ports in use).
    fn ports_maybe(&self, base: usize, nodes: u64) -> u64 {
        let (mut maybe, mut left) = (0u64, nodes);
        let cols = &self.usage.cols;
        while left != 0 {
            let j = left.trailing_zeros() as usize;
            left &= left - 1;
            if self.plan.may_conflict(cols.port_bits(base + j))
                && self.plan.keyed_conflict(cols.port_keys(base + j)) != Some(false)
            {
                maybe |= 1 << j;
            }
        }
        maybe
    }

    /// Adds ImageLocality's score of node `i`.
    #[inline(always)]
    fn image(&self, i: usize, scores: &mut NodeScores) {
        if self.image {
            // A node without the pod's images scores 0 (a sum under the minimum threshold).
            let sum = self.image_sums[i];
            if sum != 0 {
                scores.image = self.image_scale.score(sum);
            }
        }
    }

    /// Filters and scores node `i` alone, handing it to `sink` when feasible.
    #[inline(always)]
    fn node(&self, i: usize, sink: &mut impl PlainSink) {
        let h = &self.hot[i];
        let Some(se) = self.evals.get(h.class as usize) else {
            return;
        };
        if se.rejected {
            return;
        }
        let req = &self.plan.pod.requests;
        let (want_cpu, want_memory, want_ephemeral) = (req.milli_cpu, req.memory, req.ephemeral_storage);
        if self.check_fit
            && (h.pod_count + 1 > h.allowed_pods
                || (want_cpu > 0 && want_cpu > h.alloc_cpu.saturating_sub(h.req_cpu))
                || (want_memory > 0 && want_memory > h.alloc_memory.saturating_sub(h.req_memory))
                || (want_ephemeral > 0 && want_ephemeral > h.alloc_ephemeral.saturating_sub(h.req_ephemeral)))
        {
            return;
        }
        if !self.fits_rest(i) {
            return;
        }
        let mut scores = NodeScores::default();
        let paired = self.fit.zip(self.balanced).and_then(|((_, weights), _)| {
            plain_resource_scores(h, self.fit_requests, self.balanced_requests, self.most_allocated)
                .map(|(cpu, memory, b)| (fit::weigh(cpu, memory, weights), b))
        });
        if let Some((f, b)) = paired {
            scores.fit = f;
            scores.balanced = b;
        } else {
            if let Some((_, weights)) = self.fit {
                scores.fit = fit::score_cpu_memory(
                    &self.profile.policy.scoring_strategy,
                    weights,
                    &self.plan.fit_requests,
                    h,
                );
            }
            if let Some((_, requests)) = self.balanced {
                scores.balanced = balanced_allocation::score_cpu_memory(requests, h);
            }
        }
        self.image(i, &mut scores);
        sink.feasible(i, h.class, se, scores);
    }
}

/// A batch's copies of the hot fields and columns and its slot list, kept per thread when the
/// batch ends so the next batch copies into the same memory (fresh copies are ~1.3 MB of newly
/// mapped pages per batch at 5,000 nodes).
#[derive(Default)]
struct UsageCopies {
    hot: Vec<NodeHot>,
    cols: Option<HotColumns>,
    slot: Vec<u32>,
}

thread_local! {
    /// This thread's spare [`UsageCopies`].
    static SPARE_COPIES: std::cell::RefCell<UsageCopies> = std::cell::RefCell::new(UsageCopies::default());
}

/// Usage of the nodes as a batch goes: the snapshot's, with the batch's placements on top.
pub(super) struct BatchUsage<'s> {
    snapshot: &'s Snapshot,
    /// Hot fields, copied from the snapshot on the first placement of the batch.
    pub(super) hot: std::borrow::Cow<'s, [NodeHot]>,
    /// The same by column, copied with them.
    cols: std::borrow::Cow<'s, HotColumns>,
    /// For each node, the slot in `changed` or `u32::MAX` when unchanged.
    slot: Vec<u32>,
    changed: Vec<NodeUsage>,
    /// For each entry of `changed`, a number no other usage of the process had (see
    /// [`BatchUsage::stamp`]).
    stamps: Vec<u64>,
    /// For each entry of `changed`, its node.
    nodes: Vec<u32>,
}

/// The last number [`BatchUsage::assume`] stamped a changed usage with.
static USAGE_STAMP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl<'s> BatchUsage<'s> {
    pub(super) fn new(snapshot: &'s Snapshot) -> Self {
        Self {
            snapshot,
            hot: std::borrow::Cow::Borrowed(snapshot.hot()),
            cols: std::borrow::Cow::Borrowed(snapshot.columns()),
            slot: Vec::new(),
            changed: Vec::new(),
            stamps: Vec::new(),
            nodes: Vec::new(),
        }
    }

    /// The nodes whose usage the batch changed.
    fn changed_nodes(&self) -> &[u32] {
        &self.nodes
    }

    /// 0 while node `i`'s usage is the snapshot's; after the batch changed it, a number that
    /// changes with each change and that no other usage had: what the outcomes of the rules
    /// reading the usage are kept under.
    #[inline]
    fn stamp(&self, i: usize) -> u64 {
        match self.slot.get(i) {
            Some(&s) if s != u32::MAX => self.stamps[s as usize],
            _ => 0,
        }
    }

    /// Copies the hot fields and columns, and starts the slot list, into this thread's spare
    /// buffers (see [`UsageCopies`]).
    fn copy_on_first_placement(&mut self) {
        use std::borrow::Cow;
        let spare = SPARE_COPIES
            .try_with(|s| std::mem::take(&mut *s.borrow_mut()))
            .unwrap_or_default();
        let mut slot = spare.slot;
        slot.clear();
        slot.resize(self.snapshot.nodes().len(), u32::MAX);
        self.slot = slot;
        if let Cow::Borrowed(hot) = self.hot {
            let mut copy = spare.hot;
            copy.clear();
            copy.extend_from_slice(hot);
            self.hot = Cow::Owned(copy);
        }
        if let Cow::Borrowed(cols) = self.cols {
            let mut copy = spare.cols.unwrap_or_default();
            copy.clone_from(cols);
            self.cols = Cow::Owned(copy);
        }
    }

    #[inline]
    pub(super) fn get(&self, i: usize) -> &NodeUsage {
        match self.slot.get(i) {
            Some(&s) if s != u32::MAX => &self.changed[s as usize],
            _ => &self.snapshot.nodes()[i].usage,
        }
    }

    pub(super) fn assume(&mut self, i: usize, pod: &PodSpec) {
        if self.slot.is_empty() {
            self.copy_on_first_placement();
        }
        if self.slot[i] == u32::MAX {
            self.slot[i] = self.changed.len() as u32;
            self.changed.push(self.snapshot.nodes()[i].usage.clone());
            self.stamps.push(0);
            self.nodes.push(i as u32);
        }
        self.stamps[self.slot[i] as usize] = USAGE_STAMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let bound = BoundPod {
            node_name: std::sync::Arc::from(""),
            requests: pod.requests.clone(),
            non_zero_cpu: pod.non_zero_requests.milli_cpu,
            non_zero_memory: pod.non_zero_requests.memory,
            host_ports: pod.host_ports.clone(),
            // The volume filters count a placed pod's volumes on its node (attach limits, disk
            // conflicts), by namespace.
            namespace: if pod.volumes.is_empty() {
                std::sync::Arc::from("")
            } else {
                std::sync::Arc::from(pod.namespace.as_str())
            },
            labels: Default::default(),
            affinity: None,
            meta: None,
            terminating: pod.terminating,
            volumes: (!pod.volumes.is_empty()).then(|| std::sync::Arc::from(pod.volumes.as_slice())),
        };
        let usage = &mut self.changed[self.slot[i] as usize];
        usage.add(&bound);
        let hot = NodeHot::of(&self.snapshot.nodes()[i], usage);
        self.cols.to_mut().set(i, &hot);
        self.hot.to_mut()[i] = hot;
    }
}

impl Drop for BatchUsage<'_> {
    /// Gives the batch's copies back to the thread's spares (not after a panic: they may be half
    /// written, and a spare is overwritten whole anyway, but nothing is kept that a panic touched).
    fn drop(&mut self) {
        use std::borrow::Cow;
        if std::thread::panicking() || self.slot.capacity() == 0 {
            return;
        }
        let copies = UsageCopies {
            hot: match std::mem::take(&mut self.hot) {
                Cow::Owned(hot) => hot,
                Cow::Borrowed(_) => Vec::new(),
            },
            cols: match std::mem::replace(&mut self.cols, Cow::Owned(HotColumns::default())) {
                Cow::Owned(cols) => Some(cols),
                Cow::Borrowed(_) => None,
            },
            slot: std::mem::take(&mut self.slot),
        };
        let _ = SPARE_COPIES.try_with(|s| *s.borrow_mut() = copies);
    }
}

/// A feasible node with its per-plugin normalized scores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankedNode {
    /// Node name.
    pub node: String,
    /// Weighted total.
    pub total: i64,
    /// (plugin, normalized score, weight), in the policy's order.
    pub scores: Vec<(ScorePlugin, i64, i64)>,
}

/// A node rejected by a filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedNode {
    /// The node's index in the ranked snapshot's [`Snapshot::nodes`] (its name:
    /// [`RejectedNode::name`]). An index, not a name, so that ranking copies no node name: the
    /// caller copies the names it answers with.
    pub node: usize,
    /// The filter that rejected it.
    pub plugin: FilterPlugin,
    /// Its reasons.
    pub reasons: Vec<Reason>,
}

impl RejectedNode {
    /// The node's name in `snapshot`, the snapshot that was ranked (empty for an index that
    /// snapshot does not have, as from another snapshot's ranking).
    pub fn name<'s>(&self, snapshot: &'s Snapshot) -> &'s str {
        snapshot.nodes().get(self.node).map_or("", |n| n.spec.name.as_str())
    }
}

/// The answer of [`rank`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranking {
    /// The best feasible nodes, best first.
    pub feasible: Vec<RankedNode>,
    /// All feasible nodes.
    pub feasible_count: usize,
    /// The rejected nodes, in name order: all, or the first [`Evaluator::with_rejected_limit`].
    pub rejected: Vec<RejectedNode>,
    /// The reason histogram.
    pub diagnosis: Diagnosis,
}

/// The verdict for one pod of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Place the pod on this node.
    Node {
        /// Node name.
        node: String,
        /// Its total score.
        score: i64,
        /// How many nodes were feasible.
        feasible: usize,
        /// VolumeBinding's choices for the pod's unbound WaitForFirstConsumer claims on the
        /// node, by claim key (`namespace/name`); empty when it has none.
        volumes: Vec<(String, super::volumes::VolumeChoice)>,
    },
    /// No node fits.
    Unschedulable(Diagnosis),
}

/// Evaluates pods against one snapshot with one profile.
pub struct Evaluator<'a> {
    pub(super) profile: &'a Profile,
    pub(super) snapshot: &'a Snapshot,
    pub(super) candidates: CandidateBuffer,
    /// Per node, the sum of the current pod's image sizes there, each scaled by its spread
    /// (kept per set of images for the pods to come).
    pub(super) image_sums: ImageSums,
    /// The maxima the last normalization used, per score slot.
    norm_max: [i64; MAX_SCORES],
    /// The minima the last normalization used, per score slot (InterPodAffinity, PodTopologySpread).
    norm_min: [i64; MAX_SCORES],
    /// Whether InterPodAffinity and PodTopologySpread scored the current pod (PreScore not skipped).
    topo_active: TopoActive,
    /// Whether Schedule re-scores only the node that changed for a pod identical to the one before.
    pub(super) reuse: bool,
    /// Whether Schedule may take the plain pass (tests turn it off to compare with the general one).
    pub(super) allow_plain: bool,
    /// Whether the reasons pass answers a class's nodes from its first one where the class alone
    /// rejects them (see `ClassReplay`); tests turn it off to compare with every node filtered.
    class_replay: bool,
    /// The plain pass's vector kernel, `None` on a CPU without one (and when tests turn it off).
    kernel: Option<Kernel>,
    /// How many rejected nodes Rank lists; `None` lists all.
    pub(super) rejected_limit: Option<usize>,
    /// Per node class, the best node so far of [`Evaluator::evaluate_best`] (kept for its buffer).
    class_best: Vec<ClassBest>,
    /// Per node class, the part of that node (kept for its buffer).
    class_bars: Vec<i64>,
    /// Raw scores of the policy's score rules, per node (`score_rules` per node, node order).
    rule_raw: RefCell<Vec<i64>>,
    /// Per score rule, the minimum and maximum raw score over the feasible nodes.
    rule_extrema: Vec<(i64, i64)>,
    /// Per node, the parts of its CEL value that do not change with usage, built on first use.
    node_statics: RefCell<Vec<Option<NodeStatic>>>,
    /// What the snapshot keeps of the policy's rules (the pod-free node rules' outcomes on its
    /// nodes among them: see [`SnapshotRules`]); `None` without rules.
    node_rules: Option<Arc<SnapshotRules>>,
    /// The same on the nodes a batch changed, by node and rule, under the usage's stamp.
    changed_rules: HashMap<(u32, u32), (u64, RuleOutcome)>,
    /// The pod-free node rules' outcomes by column, as the last batch left them (see
    /// [`Evaluator::rule_columns`]).
    rule_cols: Option<RuleColumns>,
    /// The policy's extenders, called by Schedule for the pods they are interested in.
    pub(super) extenders: Option<&'a dyn ExtenderHook>,
}

/// A buffer that goes back to its thread's spare slot when dropped, so the next evaluator on the
/// thread reuses it: a fresh 5,000-node candidate list is a few hundred KB of newly mapped pages
/// per request (~100 µs of page faults per Rank). It holds no borrow, so evaluators stay free to
/// drop after what they borrow.
macro_rules! pooled_buffer {
    ($vis:vis $name:ident, $item:ty, $spare:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug, Default)]
        $vis struct $name(Vec<$item>);

        thread_local! {
            static $spare: std::cell::RefCell<Vec<$item>> = const { std::cell::RefCell::new(Vec::new()) };
        }

        impl $name {
            /// This thread's spare buffer (empty when there is none).
            $vis fn take_spare() -> Self {
                Self(
                    $spare
                        .try_with(|s| std::mem::take(&mut *s.borrow_mut()))
                        .unwrap_or_default(),
                )
            }
        }

        impl std::ops::Deref for $name {
            type Target = Vec<$item>;
            fn deref(&self) -> &Vec<$item> {
                &self.0
            }
        }

        impl std::ops::DerefMut for $name {
            fn deref_mut(&mut self) -> &mut Vec<$item> {
                &mut self.0
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                // A panic may have left the buffer half updated: it is not reused.
                if std::thread::panicking() || self.0.capacity() == 0 {
                    return;
                }
                let mut buffer = std::mem::take(&mut self.0);
                buffer.clear();
                let _ = $spare.try_with(|s| *s.borrow_mut() = buffer);
            }
        }
    };
}

pooled_buffer!(
    pub(super) CandidateBuffer,
    Candidate,
    SPARE_CANDIDATES,
    "An evaluator's candidate list (cleared before each use)."
);

pooled_buffer!(
    pub(super) TotalsBuffer,
    Scored,
    SPARE_TOTALS,
    "Rank's list of feasible nodes and their totals (see [`Evaluator::evaluate_totals`])."
);

pooled_buffer!(
    pub(super) FlagBuffer,
    bool,
    SPARE_FLAGS,
    "A flag per node: [`Rejections::unresolvable`]."
);

pooled_buffer!(
    ClassAllowed,
    i32,
    SPARE_CLASS_ALLOWED,
    "Per node class, whether the pod's static predicates allow it, as the kernel reads it."
);

pooled_buffer!(
    ClassStates,
    ClassReasons,
    SPARE_CLASS_STATES,
    "[`ClassReplay`]'s state per class."
);

pooled_buffer!(
    ReasonArena,
    Reason,
    SPARE_REASONS,
    "[`ClassReplay`]'s reasons of every class it knows, one run per class."
);

/// The rejections of a reasons pass (Rank's, and Schedule's for a pod that fits nowhere), taken as
/// the filters report them in node order: counted by reason, listed by node up to a limit, and
/// marked unresolvable for preemption.
pub(super) struct Rejections<'r> {
    /// The snapshot's nodes (names for the list, allocatable for [`resolvable`]).
    pub(super) nodes: &'r [Arc<NodeEntry>],
    /// The pod being placed (its requests, for [`resolvable`]).
    pub(super) pod: &'r PodSpec,
    /// At most this many nodes listed (`None`: all).
    pub(super) limit: Option<usize>,
    /// How many nodes gave each reason.
    pub(super) counts: Vec<(Reason, u32)>,
    /// The rejected nodes listed, each with its reasons.
    pub(super) listed: Vec<RejectedNode>,
    /// The node whose reasons are being listed (a node's reasons are consecutive).
    pub(super) listing: usize,
    /// Per node, whether some reason is one evicting pods cannot resolve.
    pub(super) unresolvable: FlagBuffer,
}

impl<'r> Rejections<'r> {
    /// None yet, for `pod` on `nodes`.
    pub(super) fn new(nodes: &'r [Arc<NodeEntry>], pod: &'r PodSpec, limit: Option<usize>) -> Self {
        Self {
            nodes,
            pod,
            limit,
            counts: Vec::new(),
            listed: Vec::new(),
            listing: usize::MAX,
            unresolvable: {
                let mut flags = FlagBuffer::take_spare();
                flags.clear();
                flags.resize(nodes.len(), false);
                flags
            },
        }
    }

    /// Takes one reason `plugin` gave for rejecting node `i`.
    fn add(&mut self, i: usize, plugin: FilterPlugin, reason: Reason) {
        if let Some(u) = self.unresolvable.get_mut(i) {
            if !*u && !resolvable(&self.pod.requests, &self.nodes[i], plugin, &reason) {
                *u = true;
            }
        }
        self.count(&reason, 1);
        self.list(i, plugin, reason);
    }

    /// Counts `n` more nodes rejected for `reason` (few distinct reasons occur: a short list
    /// beats hashing one per rejected node).
    pub(super) fn count(&mut self, reason: &Reason, n: u32) {
        if n == 0 {
            return;
        }
        match self.counts.iter_mut().find(|(r, _)| r == reason) {
            Some((_, c)) => *c += n,
            None => self.counts.push((reason.clone(), n)),
        }
    }

    /// Whether a reason for node `i` would be listed.
    fn lists_more(&self, i: usize) -> bool {
        i == self.listing || self.limit.is_none_or(|limit| self.listed.len() < limit)
    }

    /// Lists one reason `plugin` gave for rejecting node `i` (unless the list is full).
    fn list(&mut self, i: usize, plugin: FilterPlugin, reason: Reason) {
        if !self.lists_more(i) {
            return;
        }
        if i == self.listing {
            if let Some(node) = self.listed.last_mut() {
                node.reasons.push(reason);
            }
        } else {
            self.listed.push(RejectedNode {
                node: i,
                plugin,
                reasons: vec![reason],
            });
            self.listing = i;
        }
    }
}

/// What the reasons pass has learned of each class's nodes (index: class), so that a class's
/// nodes are not filtered one by one when the class alone rejects them (see `class_decides`):
/// most nodes a pod fits nowhere on are rejected by their class's taints or affinity.
#[derive(Debug)]
pub(super) struct ClassReplay {
    /// Per class, what is known of its nodes.
    classes: ClassStates,
    /// The reasons of the classes known, each class's run at its `reasons` range.
    reasons: ReasonArena,
}

impl ClassReplay {
    /// Takes node `i`'s reasons from its class when they are known: counted in bulk by
    /// [`ClassReplay::count`], listed while the list takes more. False when it must be filtered.
    fn replay(&mut self, class: usize, i: usize, rejections: &mut Rejections<'_>) -> bool {
        let Some(ClassReasons::Known {
            plugin,
            reasons,
            unresolvable,
            more,
        }) = self.classes.get_mut(class)
        else {
            return false;
        };
        *more += 1;
        rejections.unresolvable[i] = *unresolvable;
        if rejections.lists_more(i) {
            for reason in &self.reasons[reasons.start as usize..reasons.end as usize] {
                rejections.list(i, *plugin, reason.clone());
            }
        }
        true
    }

    /// None known yet (its buffers from the thread's spares).
    pub(super) fn new() -> Self {
        let mut classes = ClassStates::take_spare();
        classes.clear();
        let mut reasons = ReasonArena::take_spare();
        reasons.clear();
        Self { classes, reasons }
    }

    /// Learns from a class's first node filtered: the first filter that rejected it (`None`: it
    /// passed), whose reasons are the arena's from `start` on, `by_class` whether that filter's
    /// verdict is the class's, and whether the node was marked unresolvable.
    fn learn(&mut self, class: usize, seen: Option<FilterPlugin>, start: usize, by_class: bool, unresolvable: bool) {
        if self.classes.len() <= class {
            self.classes.resize(class + 1, ClassReasons::Unknown);
        }
        let known = match (seen, &self.classes[class]) {
            (Some(plugin), ClassReasons::Unknown) if by_class => ClassReasons::Known {
                plugin,
                reasons: start as u32..self.reasons.len() as u32,
                unresolvable,
                more: 0,
            },
            (_, ClassReasons::Unknown) => ClassReasons::NodeByNode,
            _ => return self.reasons.truncate(start),
        };
        if !matches!(known, ClassReasons::Known { .. }) {
            self.reasons.truncate(start);
        }
        self.classes[class] = known;
    }

    /// Whether the class's nodes after its first are filtered one by one.
    fn node_by_node(&self, class: usize) -> bool {
        matches!(self.classes.get(class), Some(ClassReasons::NodeByNode))
    }

    /// Counts the reasons of the nodes replayed.
    pub(super) fn count(self, rejections: &mut Rejections<'_>) {
        for class in self.classes.iter() {
            if let ClassReasons::Known { reasons, more, .. } = class {
                for reason in &self.reasons[reasons.start as usize..reasons.end as usize] {
                    rejections.count(reason, *more);
                }
            }
        }
    }
}

/// What the reasons pass knows of a class's nodes.
#[derive(Debug, Clone)]
enum ClassReasons {
    /// No node of the class filtered yet.
    Unknown,
    /// Every node of the class is rejected by `plugin` with the reasons at `reasons` in
    /// [`ClassReplay::reasons`] (whether evicting pods cannot resolve them: `unresolvable`);
    /// `more` nodes after the first so far.
    Known {
        plugin: FilterPlugin,
        reasons: std::ops::Range<u32>,
        unresolvable: bool,
        more: u32,
    },
    /// Its nodes are filtered one by one.
    NodeByNode,
}

/// Whether a node's rejection by `failed` is its class's: `failed` and every filter before it in
/// `filters` decide by the class's static predicates alone (NodeUnschedulable, TaintToleration,
/// NodeAffinity, with static predicates per class), or pass every node (NodeName, when the pod
/// names none). Filters stop at the first that fails, so every node of the class fails the same.
fn class_decides(filters: &[FilterPlugin], plan: &PodPlan<'_>, failed: FilterPlugin) -> bool {
    let by_class = |f: FilterPlugin| match f {
        FilterPlugin::NodeUnschedulable | FilterPlugin::TaintToleration | FilterPlugin::NodeAffinity => !plan.per_node,
        FilterPlugin::NodeName => plan.pod.node_name.as_deref().is_none_or(str::is_empty),
        _ => false,
    };
    failed != FilterPlugin::NodeName
        && filters
            .iter()
            .position(|&f| f == failed)
            .is_some_and(|k| filters[..=k].iter().all(|&f| by_class(f)))
}

impl<'a> Evaluator<'a> {
    /// An evaluator of `snapshot` under `profile`.
    pub fn new(profile: &'a Profile, snapshot: &'a Snapshot) -> Self {
        let mut candidates = CandidateBuffer::take_spare();
        candidates.clear();
        candidates.reserve(snapshot.nodes().len());
        Self {
            profile,
            snapshot,
            candidates,
            image_sums: ImageSums::new(),
            norm_max: [0; MAX_SCORES],
            norm_min: [0; MAX_SCORES],
            topo_active: TopoActive::default(),
            reuse: true,
            allow_plain: true,
            class_replay: true,
            kernel: Kernel::detect(),
            rejected_limit: None,
            class_best: Vec::new(),
            class_bars: Vec::new(),
            rule_raw: RefCell::new(vec![0; snapshot.nodes().len() * profile.score_rules()]),
            rule_extrema: vec![(0, 0); profile.score_rules()],
            node_statics: RefCell::new(if profile.has_rules() {
                vec![None; snapshot.nodes().len()]
            } else {
                Vec::new()
            }),
            node_rules: match &profile.rules {
                Some(Ok(rules)) => Some(cel_rules::snapshot_rules(snapshot, rules)),
                _ => None,
            },
            changed_rules: HashMap::new(),
            rule_cols: None,
            extenders: None,
        }
        .reusing(!profile.has_rules())
    }

    /// Whether Schedule re-scores only the changed node for a pod like the one before (rules
    /// may read any field of the pod, its name included, so not under a policy with rules).
    fn reusing(mut self, reuse: bool) -> Self {
        self.reuse = reuse;
        self
    }

    /// Lists at most `limit` rejected nodes (in name order) in each [`Ranking`]; the diagnosis
    /// still counts every node, except that with `Some(0)` and some node feasible no reasons are
    /// gathered at all (nothing would show them). `None` (the default) lists all.
    pub fn with_rejected_limit(mut self, limit: Option<usize>) -> Self {
        self.rejected_limit = limit;
        self
    }

    /// Calls `hook` in Schedule, after the filters and rules, for the pods it is interested in
    /// (see [`super::extender`]).
    pub fn with_extenders(mut self, hook: &'a dyn ExtenderHook) -> Self {
        self.extenders = Some(hook);
        self
    }

    /// The snapshot evaluated.
    pub fn snapshot(&self) -> &'a Snapshot {
        self.snapshot
    }

    /// Makes the pod's per-node sums of scaled image sizes current (see [`ImageSums`]), unless
    /// it has no image on any node or ImageLocality does not score; [`ImageSums::deactivate`]
    /// after the pod.
    pub(super) fn image_sums(&mut self, plan: &PodPlan<'_>) {
        if plan.images.is_empty()
            || !self
                .profile
                .score_plugins
                .iter()
                .any(|(p, _)| *p == ScorePlugin::ImageLocality)
        {
            return;
        }
        let total_nodes = self.snapshot.nodes().len();
        // Padded to whole blocks for the plain pass's kernel (the padding stays 0).
        let padded = total_nodes.div_ceil(BLOCK) * BLOCK;
        self.image_sums
            .activate(&plan.images, self.snapshot.image_postings(), total_nodes, padded);
    }

    /// Filters and scores every node for one pod, leaving normalized candidates in `self.candidates`.
    pub(super) fn evaluate(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        placed: &Placed<'_>,
        deadline: Deadline,
        mut rejections: Option<&mut Rejections<'_>>,
    ) -> Result<(), DeadlinePassed> {
        self.candidates.clear();
        self.image_sums(plan);
        let snapshot = self.snapshot;
        let hot = &*usage.hot;
        let mut replay = ClassReplay::new();
        for (i, entry) in snapshot.nodes().iter().enumerate() {
            // A node of the general pass may cost much (per-node selectors, topology terms): poll
            // often enough that a deadline or a cancelled call stops it promptly.
            if i % 256 == 255 && deadline.passed() {
                self.image_sums.deactivate();
                return Err(DeadlinePassed);
            }
            let candidate = match rejections.as_deref_mut() {
                Some(rejections) => self.filter_with_reasons(plan, usage, i, entry, &mut replay, rejections),
                None => self.eval_node(plan, usage, i, entry, hot, &mut |_, _| {}),
            };
            if let Some(c) = candidate {
                self.candidates.push(c);
            }
        }
        if let Some(rejections) = rejections {
            replay.count(rejections);
        }
        self.image_sums.deactivate();
        self.topo_scores(plan, placed);
        self.normalize();
        Ok(())
    }

    /// Filters and scores node `i` as [`Evaluator::eval_node`] does, its reasons taken by
    /// `rejections`, or only those from its class when `replay` knows them.
    pub(super) fn filter_with_reasons(
        &self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        i: usize,
        entry: &NodeEntry,
        replay: &mut ClassReplay,
        rejections: &mut Rejections<'_>,
    ) -> Option<Candidate> {
        let class = usage.cols.class(i) as usize;
        if plan.per_node || !self.class_replay || replay.node_by_node(class) {
            return self.eval_node(plan, usage, i, entry, &usage.hot, &mut |plugin, reason| {
                rejections.add(i, plugin, reason)
            });
        }
        if replay.replay(class, i, rejections) {
            return None;
        }
        // The first filter that rejected the node; its reasons go to the arena from `start` on.
        let mut seen: Option<FilterPlugin> = None;
        let start = replay.reasons.len();
        let candidate = self.eval_node(plan, usage, i, entry, &usage.hot, &mut |plugin, reason| {
            seen.get_or_insert(plugin);
            replay.reasons.push(reason.clone());
            rejections.add(i, plugin, reason);
        });
        // The filters `eval_node` ran (see there).
        let filters = if plan.topo.is_some() || plan.volumes.is_some() {
            &self.profile.policy.filters
        } else {
            &self.profile.plain_filters
        };
        let by_class = seen.is_some_and(|f| class_decides(filters, plan, f));
        replay.learn(class, seen, start, by_class, rejections.unresolvable[i]);
        candidate
    }

    /// [`Evaluator::evaluate`] without reasons: the plain pass when it applies.
    pub(super) fn evaluate_quiet(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        placed: &Placed<'_>,
        deadline: Deadline,
    ) -> Result<(), DeadlinePassed> {
        if self.allow_plain && plan.plain && plan.topo.is_none() {
            self.evaluate_plain(plan, usage, deadline)
        } else {
            self.evaluate(plan, usage, placed, deadline, None)
        }
    }

    /// [`Evaluator::evaluate`] for the common pod, when no reasons are wanted: no topology state,
    /// no node name, not selecting per node, under a policy
    /// whose resource scores read cpu and memory only. Every filter then reads the node's hot
    /// fields or its class, and NodeAffinity's and TaintToleration's scores are per class, so they
    /// are normalized once per class instead of once per node. Bit for bit the same candidates,
    /// extrema and totals as the general pass (`plain_pass_equals_the_general_one`).
    pub(super) fn evaluate_plain(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
    ) -> Result<(), DeadlinePassed> {
        let slots = self.profile.slot_of;
        let mut sink = KeepAll {
            candidates: std::mem::take(&mut *self.candidates),
            slots,
            maxima: ClassMaxima::NONE,
        };
        sink.candidates.clear();
        let (sink, passed) = self.plain_pass_ruled(plan, usage, deadline, sink);
        let KeepAll { candidates, maxima, .. } = sink;
        *self.candidates = candidates;
        passed?;
        // The extrema the general normalization finds: NodeAffinity's and TaintToleration's
        // maxima over the feasible nodes (0 when none), and the score rules' extrema.
        // (The score rules' extrema were set by the pass: see `plain_pass_ruled`.)
        self.set_class_extrema(!self.candidates.is_empty(), maxima);
        let ruled = self.profile.score_rules() > 0;
        let (class_part, per_node) = self.plain_weights(&plan.class_evals);
        let per_node = &per_node.slots[..per_node.len];
        let hot = &*usage.hot;
        let scaling = self.rule_scaling();
        let n = self.profile.score_rules();
        let rule_raw = self.rule_raw.borrow();
        for c in self.candidates.iter_mut() {
            let mut total = class_part[hot[c.index as usize].class as usize];
            for &(slot, weight) in per_node {
                total += c.raw[slot] * weight;
            }
            if ruled {
                let i = c.index as usize;
                if let Some(scores) = rule_raw.get(i * n..(i + 1) * n) {
                    total += scaling.part(scores);
                }
            }
            c.total = total;
        }
        Ok(())
    }

    /// [`Evaluator::plain_pass`] with `sink`, through a [`RuleSink`] when the policy's rules
    /// need one; gives the sink back.
    fn plain_pass_ruled<S: PlainSink>(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
        mut sink: S,
    ) -> (S, Result<(), DeadlinePassed>) {
        let profile = self.profile;
        let Some(rules) = profile.rules_in_sink() else {
            let passed = self.plain_pass(plan, usage, deadline, &mut sink);
            return (sink, passed);
        };
        debug_assert!(!S::RULES_OUT, "a sink that bars nodes would skip the rules");
        let mut raw = std::mem::take(self.rule_raw.get_mut());
        let mut statics = std::mem::take(self.node_statics.get_mut());
        let mut changed = std::mem::take(&mut self.changed_rules);
        let kept = self.node_rules.clone();
        let snapshot = self.snapshot;
        let mut ruled = RuleSink {
            inner: sink,
            rules,
            plan,
            usage,
            nodes: snapshot.nodes(),
            kept: kept.as_deref(),
            changed: &mut changed,
            statics: &mut statics,
            raw: &mut raw,
            node_filters: (0..rules.filters.len()).filter(|&k| !rules.class_level(k)).collect(),
            score_rules: (rules.filters.len()..rules.width())
                .map(|k| (k, rules.class_level(k)))
                .collect(),
            extrema: vec![(i64::MAX, i64::MIN); rules.scores.len()],
        };
        let passed = self.plain_pass(plan, usage, deadline, &mut ruled);
        let extrema = std::mem::take(&mut ruled.extrema);
        let sink = ruled.inner;
        self.rule_extrema = settled(extrema);
        *self.rule_raw.get_mut() = raw;
        *self.node_statics.get_mut() = statics;
        self.changed_rules = changed;
        (sink, passed)
    }

    /// The plain pass keeping only the best feasible node and the count of feasible ones: what
    /// Schedule needs of a pod whose candidates no later pod re-scores. Per node class it keeps
    /// the node with the best per-node part of the total (the class-wide part is the same for all
    /// of a class's nodes, and known only once every node is filtered); the best of those winners
    /// is the node [`best_candidate`] picks from the full list, ties broken alike
    /// (`plain_pass_equals_the_general_one`). `None` when the plain pass does not apply.
    pub(super) fn evaluate_best(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
    ) -> Option<Result<BestNode, DeadlinePassed>> {
        if !(self.allow_plain && plan.plain && plan.topo.is_none()) {
            return None;
        }
        // Score rules are normalized over the feasible nodes, and node rules would have to run
        // before the bars: those pods keep each feasible node's total (16 bytes, not a
        // candidate) and the best is picked from them as from the candidates.
        if self.profile.rules_in_sink().is_some() {
            if let Some(cols) = self.rule_columns(usage) {
                let best = self.evaluate_best_ruled(plan, usage, deadline, &cols);
                self.rule_cols = Some(cols);
                return Some(best);
            }
            let totals = match self.evaluate_totals(plan, usage, deadline) {
                Ok(t) => t,
                Err(DeadlinePassed) => return Some(Err(DeadlinePassed)),
            };
            let hot = &*usage.hot;
            let best = best_candidate(
                totals.iter(),
                |s| (s.total, s.index),
                |s| plan.tie_break(hot[s.index as usize].name_hash),
            )
            .map(|s| (s.index as usize, s.total));
            return Some(Ok(BestNode {
                best,
                feasible: totals.len(),
            }));
        }
        Some(self.best_of_classes(plan, usage, deadline, None))
    }

    /// [`Evaluator::evaluate_best`]'s pass keeping each node class's best node: with `rules`,
    /// the part includes the score rules' and only the nodes the pod-free node rules keep are
    /// feasible.
    fn best_of_classes(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
        rules: Option<BestRules<'_>>,
    ) -> Result<BestNode, DeadlinePassed> {
        self.candidates.clear();
        let weights = self.per_node_weights();
        let mut winners = std::mem::take(&mut self.class_best);
        winners.clear();
        winners.resize(plan.class_evals.len(), ClassBest::NONE);
        let mut bars = std::mem::take(&mut self.class_bars);
        bars.clear();
        bars.resize(winners.len().max(usage.cols.max_class() as usize + 1), i64::MIN);
        let mut sink = KeepBest {
            rules,
            winners,
            bars,
            weights,
            cols: &usage.cols,
            plan,
            feasible: 0,
        };
        let passed = self.plain_pass(plan, usage, deadline, &mut sink);
        let KeepBest {
            winners,
            bars,
            feasible,
            ..
        } = sink;
        if passed.is_err() {
            self.class_best = winners;
            self.class_bars = bars;
            return Err(DeadlinePassed);
        }
        let evals = &*plan.class_evals;
        let mut maxima = ClassMaxima::NONE;
        for (w, se) in winners.iter().zip(evals) {
            if w.index != u32::MAX {
                maxima.see(se);
            }
        }
        self.set_class_extrema(feasible > 0, maxima);
        let hot = &*usage.hot;
        // Each class's winner with its class-wide part added: the best of them is the best node.
        // The part depends on two raw scores most classes share: the last one is remembered.
        let mut last_part: Option<((i64, i64), i64)> = None;
        let finalists = winners
            .iter()
            .zip(evals)
            .zip(&bars)
            .enumerate()
            .filter(|(_, ((w, _), _))| w.index != u32::MAX)
            .map(|(class, ((w, se), part))| {
                let raw = (se.affinity_weight, se.prefer_taints);
                let class_part = match last_part {
                    Some((r, p)) if r == raw => p,
                    _ => {
                        let p = self.class_part(se);
                        last_part = Some((raw, p));
                        p
                    }
                };
                Scored {
                    index: w.index,
                    class: class as u32,
                    total: part + class_part,
                }
            });
        let best = best_candidate(
            finalists,
            |s| (s.total, s.index),
            |s| plan.tie_break(hot[s.index as usize].name_hash),
        );
        self.class_bars = bars;
        self.class_best = winners;
        Ok(BestNode {
            best: best.map(|s| (s.index as usize, s.total)),
            feasible,
        })
    }

    /// [`Evaluator::evaluate_best`] under a policy whose pod-free node rules sit in `cols`: the
    /// score rules' extrema over the feasible nodes those rules keep (the normalization's) come
    /// from each rule's order, or else from a first pass over the kernel's masks; then a pass
    /// keeps each class's best node as without rules, its part including the score rules'
    /// (bounded above per node for the kernel's rule-out). The same node and total as keeping
    /// every feasible node's total (`plain_pass_equals_the_general_one`).
    fn evaluate_best_ruled(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
        cols: &RuleColumns,
    ) -> Result<BestNode, DeadlinePassed> {
        let profile = self.profile;
        let Some(rules) = profile.rules_in_sink() else {
            return self.best_of_classes(plan, usage, deadline, None);
        };
        self.image_sums(plan);
        let by_order = self.extrema_by_order(plan, usage, cols);
        self.image_sums.deactivate();
        self.rule_extrema = match by_order {
            Some(extrema) => extrema,
            None => {
                let mut first = RuleExtrema {
                    cols,
                    kernel: self.kernel,
                    extrema: vec![(i64::MAX, i64::MIN); rules.scores.len()],
                    feasible: 0,
                };
                self.plain_pass(plan, usage, deadline, &mut first)?;
                if first.feasible == 0 {
                    self.rule_extrema = settled(first.extrema);
                    self.set_class_extrema(false, ClassMaxima::NONE);
                    return Ok(BestNode {
                        best: None,
                        feasible: 0,
                    });
                }
                settled(first.extrema)
            }
        };
        let within = |v: i64| (-EXACT_SCORE..=EXACT_SCORE).contains(&v);
        let exact = self.rule_extrema.iter().all(|&(lo, hi)| within(lo) && within(hi));
        let bounds = rules
            .scores
            .iter()
            .zip(&self.rule_extrema)
            .map(|(rule, &(lo, hi))| {
                let scale = if hi > lo {
                    MAX_NODE_SCORE as f64 * rule.weight as f64 / (hi - lo) as f64
                } else {
                    0.0
                };
                (lo as f64, scale)
            })
            .collect();
        let rules = BestRules {
            cols,
            scaling: self.rule_scaling(),
            bounds,
            exact,
        };
        self.best_of_classes(plan, usage, deadline, Some(rules))
    }

    /// The score rules' extrema over the feasible nodes the pod-free node rules keep, read off
    /// each rule's order ([`RuleColumns::by_score`]): from either end, the first node feasible
    /// for the pod holds the extremum, since no node before it is. Feasibility is the plain
    /// pass's through the kernel, a block at a time (kept per block). `None` when that would
    /// take more than [`ORDER_PROBES`] blocks (or no node is feasible), or the kernel does not
    /// take the pod: a pass over every block finds them then. The pod's image sums must be
    /// active.
    fn extrema_by_order(
        &self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        cols: &RuleColumns,
    ) -> Option<Vec<(i64, i64)>> {
        let pass = PlainNodes::new(self, plan, usage);
        let (kernel, ask) = (self.kernel?, pass.ask()?);
        let mut probed: Vec<(usize, u64)> = Vec::with_capacity(ORDER_PROBES);
        let mut walked = 0usize;
        let mut feasible = |i: usize| -> Option<bool> {
            // A node of a class the pod's static predicates reject is not feasible: no probe.
            walked += 1;
            if walked > ORDER_WALK {
                return None;
            }
            let class = usage.cols.class(i) as usize;
            if pass.evals.get(class).is_none_or(|se| se.rejected) || !usage.cols.may_fit(i, &ask) {
                return Some(false);
            }
            let base = i - i % BLOCK;
            let mask = match probed.iter().find(|(b, _)| *b == base) {
                Some(&(_, mask)) => mask,
                None => {
                    if probed.len() == ORDER_PROBES {
                        return None;
                    }
                    let mut probe = Probe { cols, mask: 0 };
                    pass.blocks(kernel, &ask, std::iter::once(base), Deadline::none(), &mut probe)
                        .ok()?;
                    probed.push((base, probe.mask));
                    probe.mask
                }
            };
            Some(mask >> (i % BLOCK) & 1 != 0)
        };
        let rules = self.profile.score_rules();
        let mut extrema = Vec::with_capacity(rules);
        for j in 0..rules {
            let mut least = None;
            for (v, i) in cols.by_score(j) {
                if feasible(i as usize)? {
                    least = Some(v);
                    break;
                }
            }
            let mut greatest = None;
            for (v, i) in cols.by_score(j).rev() {
                if feasible(i as usize)? {
                    greatest = Some(v);
                    break;
                }
            }
            extrema.push((least?, greatest?));
        }
        Some(extrema)
    }

    /// The pod-free node rules' [`RuleColumns`] as `usage` leaves them, taken out of the
    /// evaluator (built on first use, then updated on the nodes whose usage moved since), when
    /// Schedule's best-node pass can read them: the policy's score rules are all pod-free (a
    /// class-level score rule's values are the pod's), and the vector kernel runs.
    fn rule_columns(&mut self, usage: &BatchUsage<'_>) -> Option<RuleColumns> {
        let profile = self.profile;
        let rules = profile.rules_in_sink()?;
        if self.kernel.is_none() || rules.scores.iter().any(|s| s.class_level) {
            return None;
        }
        let snapshot = self.snapshot;
        let built = self.rule_cols.take();
        let fresh = built.is_none();
        let mut cols = built.unwrap_or_else(|| RuleColumns::new(snapshot.nodes().len(), rules.scores.len()));
        let mut kept = KeptRules {
            rules,
            kept: self.node_rules.as_deref(),
            changed: &mut self.changed_rules,
            statics: self.node_statics.get_mut(),
            nodes: snapshot.nodes(),
        };
        if fresh {
            for i in 0..cols.len() {
                kept.set_node(&mut cols, usage, i);
            }
            cols.sort();
            return Some(cols);
        }
        // Every node whose entries are not the snapshot's is listed as moved: those and the
        // nodes the batch changed are all that can be out of date.
        for i in cols.take_moved() {
            if usage.stamp(i as usize) != cols.stamp(i as usize) {
                kept.set_node(&mut cols, usage, i as usize);
            }
            cols.keep_moved(i);
        }
        for &i in usage.changed_nodes() {
            if usage.stamp(i as usize) != cols.stamp(i as usize) {
                kept.set_node(&mut cols, usage, i as usize);
            }
        }
        if cols.overlay_is_large() {
            cols.sort();
        }
        Some(cols)
    }

    /// The plain pass keeping each feasible node's index and total, in node order: Rank's list to
    /// pick the top k from, a fifth of the bytes of the candidates `evaluate_plain` writes.
    pub(super) fn evaluate_totals(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
    ) -> Result<TotalsBuffer, DeadlinePassed> {
        self.candidates.clear();
        let mut totals = TotalsBuffer::take_spare();
        totals.clear();
        totals.reserve(usage.hot.len());
        let sink = KeepTotals {
            totals,
            weights: self.per_node_weights(),
            maxima: ClassMaxima::NONE,
        };
        let (sink, passed) = self.plain_pass_ruled(plan, usage, deadline, sink);
        let KeepTotals { mut totals, maxima, .. } = sink;
        if passed.is_err() {
            return Err(DeadlinePassed);
        }
        self.set_class_extrema(!totals.is_empty(), maxima);
        // (The score rules' extrema were set by the pass: see `plain_pass_ruled`.)
        let ruled = self.profile.score_rules() > 0;
        let (class_part, _) = self.plain_weights(&plan.class_evals);
        let scaling = self.rule_scaling();
        let n = self.profile.score_rules();
        let rule_raw = self.rule_raw.borrow();
        for s in totals.iter_mut() {
            s.total += class_part[s.class as usize];
            if ruled {
                let i = s.index as usize;
                if let Some(scores) = rule_raw.get(i * n..(i + 1) * n) {
                    s.total += scaling.part(scores);
                }
            }
        }
        drop(rule_raw);
        Ok(totals)
    }

    /// The weights of the fit, balanced and image scores in the plain pass (0 when not scored).
    fn per_node_weights(&self) -> [i64; 3] {
        let weight_of = |slot: Option<usize>| {
            slot.and_then(|s| self.profile.plain_slots.iter().find(|(x, _, _)| *x == s))
                .map_or(0, |(_, _, w)| *w)
        };
        let slots = self.profile.slot_of;
        [weight_of(slots.fit), weight_of(slots.balanced), weight_of(slots.image)]
    }

    /// Sets the extrema the plain pass normalizes with: NodeAffinity's and TaintToleration's
    /// maxima over the feasible nodes (0 when none is feasible), nothing else.
    fn set_class_extrema(&mut self, any_feasible: bool, maxima: ClassMaxima) {
        let slots = self.profile.slot_of;
        self.topo_active = TopoActive::default();
        self.norm_max = [0; MAX_SCORES];
        self.norm_min = [0; MAX_SCORES];
        if any_feasible {
            if let Some(slot) = slots.affinity {
                self.norm_max[slot] = maxima.affinity;
            }
            if let Some(slot) = slots.taints {
                self.norm_max[slot] = maxima.taints;
            }
        }
    }

    /// The plain pass's weights: per class, the weighted normalized NodeAffinity and
    /// TaintToleration scores (with the extrema set last); per node, the other slots and weights.
    fn plain_weights(&self, evals: &[StaticEval]) -> (Vec<i64>, PerNodeSlots) {
        let mut per_node = PerNodeSlots {
            slots: [(0, 0); MAX_SCORES],
            len: 0,
        };
        for &(slot, plugin, weight) in &self.profile.plain_slots {
            if !matches!(plugin, ScorePlugin::NodeAffinity | ScorePlugin::TaintToleration) {
                per_node.slots[per_node.len] = (slot, weight);
                per_node.len += 1;
            }
        }
        let class_part = evals.iter().map(|se| self.class_part(se)).collect();
        (class_part, per_node)
    }

    /// The class-wide part of the total of a node of a class with these static predicates: its
    /// weighted normalized NodeAffinity and TaintToleration scores (with the extrema set last).
    #[inline]
    fn class_part(&self, se: &StaticEval) -> i64 {
        let mut part = 0;
        for &(slot, plugin, weight) in &self.profile.plain_slots {
            let raw = match plugin {
                ScorePlugin::NodeAffinity => se.affinity_weight,
                ScorePlugin::TaintToleration => se.prefer_taints,
                _ => continue,
            };
            part += self.normalized(plugin, slot, raw) * weight;
        }
        part
    }

    /// Filters every node through the hot fields and the class's static predicates, and hands
    /// each feasible node's raw per-node scores to `sink` (see [`Evaluator::evaluate_plain`]).
    #[inline(always)]
    fn plain_pass(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
        sink: &mut impl PlainSink,
    ) -> Result<(), DeadlinePassed> {
        self.image_sums(plan);
        let passed = self.plain_nodes(plan, usage, deadline, sink);
        self.image_sums.deactivate();
        passed
    }

    /// The loop of [`Evaluator::plain_pass`], between adding and removing the pod's image sums:
    /// through the vector kernel block by block where it applies, node by node otherwise.
    #[inline(always)]
    fn plain_nodes(
        &self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
        sink: &mut impl PlainSink,
    ) -> Result<(), DeadlinePassed> {
        let pass = PlainNodes::new(self, plan, usage);
        if let (Some(kernel), Some(ask)) = (self.kernel, pass.ask()) {
            return pass.blocks(kernel, &ask, (0..usage.cols.len()).step_by(BLOCK), deadline, sink);
        }
        for i in 0..pass.hot.len() {
            if i % 4096 == 4095 && deadline.passed() {
                return Err(DeadlinePassed);
            }
            pass.node(i, sink);
        }
        Ok(())
    }

    /// PodTopologySpread's raw scores, which depend on the set of feasible nodes, and which of the
    /// topology plugins score this pod.
    fn topo_scores(&mut self, plan: &PodPlan<'_>, placed: &Placed<'_>) {
        let topo = plan.topo.as_deref();
        let interpod = topo.is_some_and(|t| t.interpod_score.is_some());
        let spread_score = topo.and_then(|t| t.spread_score.as_ref());
        self.topo_active = TopoActive {
            interpod,
            spread: spread_score.is_some() && !self.candidates.is_empty(),
        };
        let (Some(score), Some(slot)) = (
            spread_score,
            self.profile
                .score_plugins
                .iter()
                .position(|(p, _)| *p == ScorePlugin::PodTopologySpread),
        ) else {
            return;
        };
        if self.candidates.is_empty() || slot >= MAX_SCORES {
            return;
        }
        let snapshot = self.snapshot;
        let statics = |i: usize| {
            let se = plan.static_at(snapshot, i);
            (se.mismatched, se.untolerated)
        };
        let nodes: Vec<usize> = self.candidates.iter().map(|c| c.index as usize).collect();
        let raw = score.scores(&Existing { snapshot, placed }, plan.pod, &nodes, &statics);
        for (c, r) in self.candidates.iter_mut().zip(raw) {
            c.raw[slot] = r;
        }
    }

    /// Filters one node and computes its raw scores; `None` when a filter rejects it.
    pub(super) fn eval_node(
        &self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        i: usize,
        entry: &NodeEntry,
        hot: &[NodeHot],
        on_reject: &mut impl FnMut(FilterPlugin, Reason),
    ) -> Option<Candidate> {
        let profile = self.profile;
        let h = &hot[i];
        let se = if plan.per_node {
            plan.static_eval(&entry.spec)
        } else {
            plan.class_evals[h.class as usize]
        };
        let node = NodeView {
            index: i,
            hot: h,
            entry,
            usage: usage.get(i),
        };
        if let Some(message) = &plan.volume_error {
            on_reject(
                FilterPlugin::VolumeBinding,
                Reason::VolumePreFilter(Arc::clone(message)),
            );
            return None;
        }
        // Without topology or volume state those filters pass every node: skip them.
        let filters = if plan.topo.is_some() || plan.volumes.is_some() {
            &profile.policy.filters
        } else {
            &profile.plain_filters
        };
        for &f in filters {
            if !run_filter(f, plan, plan.topo.as_deref(), &se, &node, &mut |r| on_reject(f, r)) {
                return None;
            }
        }
        if let Some(rules) = &profile.rules {
            if let Err(reason) = self.eval_rules(rules, plan, i, entry, node.usage) {
                on_reject(FilterPlugin::Rules, Reason::Rule(reason));
                return None;
            }
        }
        let mut raw = [0i64; MAX_SCORES];
        let slots = if plan.topo.is_some() {
            &profile.all_slots
        } else {
            &profile.plain_slots
        };
        for &(slot, plugin, _) in slots {
            raw[slot] = match plugin {
                ScorePlugin::NodeResourcesFit => fit_score(profile, plan, &node),
                ScorePlugin::NodeResourcesBalancedAllocation => match &plan.balanced_requests {
                    Some(req) => balanced_score(profile, req, &node),
                    None => 0,
                },
                ScorePlugin::NodeAffinity => se.affinity_weight,
                ScorePlugin::TaintToleration => se.prefer_taints,
                ScorePlugin::ImageLocality => image_score(plan, self.image_sums.get().get(i).copied().unwrap_or(0)),
                ScorePlugin::InterPodAffinity => plan
                    .topo
                    .as_ref()
                    .and_then(|t| t.interpod_score.as_ref())
                    .map_or(0, |s| s.sum(i)),
                // Filled in after filtering: it depends on the feasible nodes.
                ScorePlugin::PodTopologySpread => 0,
            };
        }
        Some(Candidate {
            index: i as u32,
            raw,
            total: 0,
        })
    }

    /// Runs the policy's CEL rules on node `i` after the filter plugins passed it: its score
    /// rules' raw scores go to `rule_raw`; the reason when a rule rejects it or fails.
    fn eval_rules(
        &self,
        rules: &Result<Arc<CompiledRules>, Arc<str>>,
        plan: &PodPlan<'_>,
        i: usize,
        entry: &NodeEntry,
        usage: &NodeUsage,
    ) -> Result<(), Arc<str>> {
        let rules = rules.as_ref().map_err(Arc::clone)?;
        let Some(pod) = &plan.rule_pod else {
            return Ok(());
        };
        // The node's context, built when a rule reads the node itself.
        let node_context = || {
            let node = rule_node_value(&mut self.node_statics.borrow_mut(), i, entry, usage);
            rules.context(pod, node)
        };
        // The rules that read only what the node's class shares: evaluated once per class for
        // the pod (see `PodPlan::class_rule_outcomes`).
        let class = entry.class as usize;
        let filters = rules.filters.len();
        plan.class_rule_outcomes(rules, self.snapshot, class);
        let mut node_ctx = None;
        let mut outcome = |k: usize| {
            if rules.class_level(k) {
                plan.class_outcome(k, class)
            } else {
                rules.run(k, node_ctx.get_or_insert_with(node_context))
            }
        };
        for k in 0..filters {
            outcome(k)?;
        }
        let n = rules.scores.len();
        let mut raw = self.rule_raw.borrow_mut();
        let mut spare = [0i64; cel_rules::MAX_RULES];
        let out = match raw.get_mut(i * n..(i + 1) * n) {
            Some(out) => out,
            None => &mut spare[..n],
        };
        for (k, out) in out.iter_mut().enumerate() {
            *out = outcome(filters + k)?;
        }
        Ok(())
    }

    /// The weighted, normalized scores of the score rules for node `i`: each raw score min-max
    /// scaled to 0..=100 over the feasible nodes (0 when they all score alike).
    fn rules_part(&self, i: usize) -> i64 {
        let n = self.profile.score_rules();
        let raw = self.rule_raw.borrow();
        match raw.get(i * n..(i + 1) * n) {
            Some(scores) => self.rule_scaling().part(scores),
            None => 0,
        }
    }

    /// How [`Evaluator::rules_part`] scales each score rule with the extrema set last.
    fn rule_scaling(&self) -> RuleScaling {
        let mut scaling = RuleScaling::default();
        if let Some(Ok(rules)) = &self.profile.rules {
            for (rule, &(min, max)) in rules.scores.iter().zip(&self.rule_extrema) {
                scaling.rules[scaling.len] = (min, max, rule.weight);
                scaling.len += 1;
            }
        }
        scaling
    }

    /// The extrema of each score rule's raw scores over the candidates.
    fn rule_extrema_of_candidates(&mut self) {
        let n = self.profile.score_rules();
        if n == 0 {
            return;
        }
        let raw = self.rule_raw.borrow();
        let mut extrema = vec![(i64::MAX, i64::MIN); n];
        for c in self.candidates.iter() {
            let i = c.index as usize;
            if let Some(scores) = raw.get(i * n..(i + 1) * n) {
                for (e, &r) in extrema.iter_mut().zip(scores) {
                    *e = (e.0.min(r), e.1.max(r));
                }
            }
        }
        drop(raw);
        self.rule_extrema = settled(extrema);
    }

    /// After a pod identical to the one the candidates were computed for was placed on node `x`:
    /// re-filters and re-scores that node only (every other node's scores are unchanged, and its
    /// static and image scores are too), and redoes normalization only if its maxima moved.
    pub(super) fn update_placed(&mut self, plan: &PodPlan<'_>, usage: &BatchUsage<'_>, x: usize) {
        // Candidates stay in node order (evaluation pushes them so, removal keeps it).
        let Ok(pos) = self.candidates.binary_search_by_key(&(x as u32), |c| c.index) else {
            return;
        };
        let entry = &self.snapshot.nodes()[x];
        match self.eval_node(plan, usage, x, entry, &usage.hot, &mut |_, _| {}) {
            Some(fresh) => {
                let c = &mut self.candidates[pos];
                for (slot, (plugin, _)) in self.profile.score_plugins.iter().enumerate().take(MAX_SCORES) {
                    if matches!(
                        plugin,
                        ScorePlugin::NodeResourcesFit | ScorePlugin::NodeResourcesBalancedAllocation
                    ) {
                        c.raw[slot] = fresh.raw[slot];
                    }
                }
                let mut c = *c;
                self.normalize_one(&mut c);
                self.candidates[pos] = c;
            }
            None => {
                let gone = self.candidates.remove(pos);
                if gone.raw.iter().zip(&self.norm_max).any(|(r, m)| r == m) {
                    self.normalize();
                }
            }
        }
    }

    /// The normalized score of one plugin (at `slot`) from its raw score, with the extrema of the
    /// last [`Evaluator::normalize`].
    #[inline]
    pub(super) fn normalized(&self, plugin: ScorePlugin, slot: usize, raw: i64) -> i64 {
        let max = self.norm_max[slot];
        match plugin {
            ScorePlugin::NodeAffinity => node_affinity::normalize(raw, max),
            ScorePlugin::TaintToleration => taint_toleration::normalize(raw, max),
            ScorePlugin::InterPodAffinity if self.topo_active.interpod => {
                interpod_scoring::normalize(raw, self.norm_min[slot], max)
            }
            ScorePlugin::PodTopologySpread if self.topo_active.spread => {
                spread_scoring::normalize(raw, self.norm_min[slot], max)
            }
            // PreScore skipped: the plugin gives every node 0.
            ScorePlugin::PodTopologySpread => 0,
            _ => raw,
        }
    }

    /// Normalizes one candidate with the extrema of the last [`Evaluator::normalize`], and weighs it.
    fn normalize_one(&self, c: &mut Candidate) {
        let mut total = 0;
        // Inactive topology plugins give every node 0.
        let slots = if self.topo_active.interpod || self.topo_active.spread {
            &self.profile.all_slots
        } else {
            &self.profile.plain_slots
        };
        for &(slot, plugin, weight) in slots {
            total += self.normalized(plugin, slot, c.raw[slot]) * weight;
        }
        if self.profile.rules.is_some() {
            total += self.rules_part(c.index as usize);
        }
        c.total = total;
    }

    /// kube-scheduler's `DefaultNormalizeScore` for NodeAffinity and (reversed) TaintToleration,
    /// then the weighted totals.
    fn normalize(&mut self) {
        /// What normalization needs of a slot's raw scores.
        #[derive(Clone, Copy, PartialEq)]
        enum Need {
            Nothing,
            Max,
            MaxMin,
            /// PodTopologySpread: max (at least 0) and min over the scores that are not ignored.
            Spread,
        }
        let mut need = [Need::Nothing; MAX_SCORES];
        for (slot, (plugin, _)) in self.profile.score_plugins.iter().enumerate().take(MAX_SCORES) {
            need[slot] = match plugin {
                ScorePlugin::NodeAffinity | ScorePlugin::TaintToleration => Need::Max,
                ScorePlugin::InterPodAffinity if self.topo_active.interpod => Need::MaxMin,
                ScorePlugin::PodTopologySpread if self.topo_active.spread => Need::Spread,
                _ => Need::Nothing,
            };
        }
        // One pass over the candidates for every slot's extrema.
        let mut max = [i64::MIN; MAX_SCORES];
        let mut min = [i64::MAX; MAX_SCORES];
        if need.iter().any(|n| *n != Need::Nothing) {
            for c in self.candidates.iter() {
                for slot in 0..MAX_SCORES {
                    let r = c.raw[slot];
                    match need[slot] {
                        Need::Nothing => {}
                        Need::Max => max[slot] = max[slot].max(r),
                        Need::MaxMin => {
                            max[slot] = max[slot].max(r);
                            min[slot] = min[slot].min(r);
                        }
                        Need::Spread if r != spread_scoring::IGNORED => {
                            max[slot] = max[slot].max(r);
                            min[slot] = min[slot].min(r);
                        }
                        Need::Spread => {}
                    }
                }
            }
        }
        for slot in 0..MAX_SCORES {
            let any = max[slot] != i64::MIN;
            (max[slot], min[slot]) = match need[slot] {
                Need::Nothing => (0, 0),
                Need::Max if any => (max[slot], 0),
                Need::Max => (0, 0),
                Need::MaxMin if any => (max[slot], min[slot]),
                Need::MaxMin => (0, 0),
                // No kept score: max 0 and min i64::MAX, as before.
                Need::Spread => (max[slot].max(0), min[slot]),
            };
        }
        self.norm_max = max;
        self.norm_min = min;
        self.rule_extrema_of_candidates();
        let mut candidates = std::mem::take(&mut self.candidates);
        for c in candidates.iter_mut() {
            self.normalize_one(c);
        }
        self.candidates = candidates;
    }
}

/// What the extenders made of one pod's feasible nodes.
pub(super) struct ExtenderOutcome {
    /// The best node left and its total (extenders' scores added).
    pub(super) best: Option<(usize, i64)>,
    /// How many nodes are left.
    pub(super) feasible: usize,
    /// Nodes turned down with a message, evicting pods might help.
    pub(super) failed: Vec<(usize, Arc<str>)>,
    /// Nodes turned down with a message, for good.
    pub(super) failed_unresolvable: Vec<(usize, Arc<str>)>,
    /// A failed extender that is not ignorable: the pod's scheduling fails with this.
    pub(super) error: Option<String>,
}

impl Evaluator<'_> {
    /// kube-scheduler's `findNodesThatPassExtenders` and the extenders' part of
    /// `prioritizeNodes`, over the candidates of `plan` (left as they are: the next pod may
    /// re-score from them). Prioritize runs only when more than one node is left, as
    /// kube-scheduler scores nothing then.
    pub(super) fn call_extenders(
        &self,
        hook: &dyn ExtenderHook,
        plan: &PodPlan<'_>,
        pod: &PodSpec,
        usage: &BatchUsage,
    ) -> ExtenderOutcome {
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
        let mut kept: Vec<(u32, i64)> = self
            .candidates
            .iter()
            .filter(|c| keep[c.index as usize])
            .map(|c| (c.index, c.total))
            .collect();
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

#[cfg(test)]
#[path = "framework_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "topology_tests.rs"]
mod topology_tests;
