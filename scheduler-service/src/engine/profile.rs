//! A policy prepared for evaluation ([`Profile`]): the score slots, the filters the plain pass
//! and the class cache run, the resources the scores read and the compiled CEL rules, computed
//! once per policy (kube-scheduler's `frameworkImpl` built from a profile's plugin set).

use std::sync::Arc;

use super::accel::class_cache::StaticFilters;
use super::plugins::noderesources::fit;
use super::policy::{FilterPlugin, Policy, ScorePlugin, ScoringStrategy, ShapePoint};
use super::registry::Reads;
use super::resources::ResourceName;
use super::rules::CompiledRules;

use super::plugins::MAX_NODE_SCORE;

/// A policy prepared for evaluation.
#[derive(Debug, Clone)]
pub struct Profile {
    pub(super) policy: Policy,
    pub(super) score_plugins: Vec<(ScorePlugin, i64)>,
    pub(super) fit_resources: Vec<(ResourceName, i64)>,
    pub(super) balanced_resources: Vec<ResourceName>,
    pub(super) shape: Vec<ShapePoint>,
    /// Weights when NodeResourcesFit scores exactly cpu then memory with Least/MostAllocated.
    pub(crate) fit_cpu_memory: Option<(i64, i64)>,
    /// BalancedAllocation compares exactly cpu then memory.
    pub(super) balanced_cpu_memory: bool,
    /// The filters without those reading topology or volume state (their registry rows'
    /// [`Reads`]), for pods neither has work for.
    pub(super) plain_filters: Vec<FilterPlugin>,
    /// (slot, plugin, weight) of every score plugin.
    pub(super) all_slots: Vec<(usize, ScorePlugin, i64)>,
    /// The same without the plugins reading topology state (PodTopologySpread and
    /// InterPodAffinity by their registry rows), which give 0 to every node of a pod they have no
    /// work for.
    pub(crate) plain_slots: Vec<(usize, ScorePlugin, i64)>,
    /// The score slot of each plugin the plain pass computes per node, if the policy scores it.
    pub(crate) slot_of: PlainSlots,
    /// Whether the filters reading node classes (cordon, taints, node affinity) are enabled, in
    /// that order.
    pub(super) static_filters: StaticFilters,
    /// Which volume filters are enabled.
    pub(super) volume_filters: super::volumes::VolumeFilters,
    /// DynamicResources' filter is enabled.
    pub(super) dynamic_resources: bool,
    /// DynamicResources' `filterTimeout` (`None`: no limit).
    pub(super) dra_filter_timeout: Option<std::time::Duration>,
    /// DynamicResources' `bindingTimeout`.
    pub(super) dra_binding_timeout: std::time::Duration,
    /// `DevicePacking`'s arguments, when the policy scores with it.
    pub(super) device_packing: Option<Arc<super::policy::DevicePackingArgs>>,
    /// The policy's CEL rules, compiled; `None` without rules (the plain pass stays open), or
    /// the compile error (every node is then rejected with it).
    pub(super) rules: Option<Result<Arc<CompiledRules>, Arc<str>>>,
    /// The feature gates it decides under (the process's when it was made, see
    /// [`super::gates`]).
    pub(super) gates: super::gates::FeatureGates,
}

/// Score slots the plain pass (see [`Evaluator::evaluate_plain`]) fills in per node.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PlainSlots {
    pub(crate) fit: Option<usize>,
    pub(crate) balanced: Option<usize>,
    pub(crate) image: Option<usize>,
    /// NodeAffinity and TaintToleration, whose raw scores come from the node's class.
    pub(crate) affinity: Option<usize>,
    pub(crate) taints: Option<usize>,
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
            gates: super::gates::process_default(),
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
                .filter(|(_, s)| !matches!(s.plugin.row().reads, Reads::Topology | Reads::Devices))
                .map(|(slot, s)| (slot, s.plugin, s.weight))
                .collect(),
            plain_filters: policy
                .filters
                .iter()
                .copied()
                .filter(|f| !matches!(f.row().reads, Reads::Topology | Reads::Volumes | Reads::Devices))
                .collect(),
            volume_filters: super::volumes::VolumeFilters {
                restrictions: policy.filters.contains(&FilterPlugin::VolumeRestrictions),
                limits: policy.filters.contains(&FilterPlugin::NodeVolumeLimits),
                binding: policy.filters.contains(&FilterPlugin::VolumeBinding),
                zone: policy.filters.contains(&FilterPlugin::VolumeZone),
            },
            dynamic_resources: policy.filters.contains(&FilterPlugin::DynamicResources),
            dra_filter_timeout: Some(policy.dynamic_resources.filter_timeout).filter(|t| !t.is_zero()),
            dra_binding_timeout: policy.dynamic_resources.binding_timeout,
            device_packing: policy
                .scores
                .iter()
                .any(|s| s.plugin == ScorePlugin::DevicePacking)
                .then(|| Arc::new(policy.device_packing.clone())),
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

    /// The profile deciding under `gates` instead of the process's (see [`super::gates`]).
    pub fn with_gates(mut self, gates: super::gates::FeatureGates) -> Self {
        self.gates = gates;
        self
    }

    /// The feature gates it decides under.
    pub fn gates(&self) -> super::gates::FeatureGates {
        self.gates
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
    pub(crate) fn rules_in_sink(&self) -> Option<&CompiledRules> {
        match &self.rules {
            Some(Ok(r)) if !r.scores.is_empty() || r.filters.iter().any(|f| !f.class_level) => Some(r),
            _ => None,
        }
    }

    /// The number of score rules.
    pub(crate) fn score_rules(&self) -> usize {
        match &self.rules {
            Some(Ok(r)) => r.scores.len(),
            _ => 0,
        }
    }
}

/// Maximum number of score plugins (one slot per [`ScorePlugin`]).
pub(super) const MAX_SCORES: usize = super::registry::SCORES.len();
