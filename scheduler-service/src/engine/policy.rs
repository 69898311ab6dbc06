//! Scheduling policies: which filter and score plugins run, with which weights and strategy.
//!
//! A [`Policy`] is plain configuration (serde), so it can come from a file later; the built-in
//! [`Policy::kube_default`] mirrors kube-scheduler v1's default profile for the plugins we implement.

use serde::{Deserialize, Serialize};

use super::resources::ResourceName;
use super::rules::{RuleError, Rules};

pub use super::registry::{FilterPlugin, ScorePlugin};

/// A resource and its weight in a scoring function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceWeight {
    /// Resource name.
    pub name: ResourceName,
    /// Weight (at least 1).
    pub weight: i64,
}

/// One point of RequestedToCapacityRatio's utilization-to-score shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapePoint {
    /// Utilization in percent, 0 to 100, increasing along the shape.
    pub utilization: i64,
    /// Score, 0 to 10 (scaled to 0 to 100 as kube-scheduler does).
    pub score: i64,
}

/// NodeResourcesFit's scoring strategy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScoringStrategy {
    /// Prefers the least requested nodes (spreads load); kube-scheduler's default.
    LeastAllocated,
    /// Prefers the most requested nodes (bin packing).
    MostAllocated,
    /// Scores by a piecewise-linear function of utilization.
    RequestedToCapacityRatio {
        /// The shape, sorted by utilization.
        shape: Vec<ShapePoint>,
    },
}

impl ScoringStrategy {
    /// kube-scheduler's name of the strategy.
    pub fn name(&self) -> &'static str {
        match self {
            Self::LeastAllocated => "LeastAllocated",
            Self::MostAllocated => "MostAllocated",
            Self::RequestedToCapacityRatio { .. } => "RequestedToCapacityRatio",
        }
    }
}

/// A weighted score plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WeightedScore {
    /// The plugin.
    pub plugin: ScorePlugin,
    /// Its weight.
    pub weight: i64,
}

/// kube-scheduler's `InterPodAffinityArgs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct InterPodAffinityArgs {
    /// Score weight of an existing pod's required affinity term the incoming pod matches (0 to 100).
    pub hard_pod_affinity_weight: i64,
    /// Skip existing pods' preferred terms when the incoming pod has no preferred terms.
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl Default for InterPodAffinityArgs {
    fn default() -> Self {
        Self {
            hard_pod_affinity_weight: 1,
            ignore_preferred_terms_of_existing_pods: false,
        }
    }
}

/// Placement's `DevicePacking` score plugin's arguments.
pub use super::plugins::dynamicresources::device_packing::Packing as DevicePackingArgs;

/// kube-scheduler's `DynamicResourcesArgs` (the field placement uses).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct DynamicResourcesArgs {
    /// How long Filter's device allocation on one node may search (`filterTimeout`, kube's
    /// `DRASchedulerFilterTimeout`); zero: no limit. Default 10s (kube's
    /// `DynamicResourcesFilterTimeoutDefault`).
    pub filter_timeout: std::time::Duration,
    /// How long PreBind waits for the binding conditions of allocated devices
    /// (`bindingTimeout`, kube's `DRADeviceBindingConditions`); a claim still not ready that long
    /// after its allocation is not available on any node. Default 600s (kube's
    /// `DynamicResourcesBindingTimeoutDefault`).
    pub binding_timeout: std::time::Duration,
}

impl DynamicResourcesArgs {
    /// kube's default `filterTimeout`.
    pub const DEFAULT_FILTER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

    /// kube's default `bindingTimeout`.
    pub const DEFAULT_BINDING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

    /// Whether these are kube's defaults.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

impl Default for DynamicResourcesArgs {
    fn default() -> Self {
        Self {
            filter_timeout: Self::DEFAULT_FILTER_TIMEOUT,
            binding_timeout: Self::DEFAULT_BINDING_TIMEOUT,
        }
    }
}

/// How PodTopologySpread finds constraints for pods that have none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DefaultingType {
    /// kube-scheduler's system defaults: zone maxSkew 5 and hostname maxSkew 3, ScheduleAnyway.
    System,
    /// The `default_constraints` of the args.
    List,
}

/// A default topology spread constraint (no selector: the pod's workload selector is used).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultConstraint {
    /// maxSkew.
    pub max_skew: i32,
    /// topologyKey.
    pub topology_key: String,
    /// "DoNotSchedule" or "ScheduleAnyway".
    pub when_unsatisfiable: String,
}

/// kube-scheduler's `PodTopologySpreadArgs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct PodTopologySpreadArgs {
    /// Constraints for pods without any, when `defaulting_type` is List.
    pub default_constraints: Vec<DefaultConstraint>,
    /// System (kube-scheduler's default) or List.
    pub defaulting_type: DefaultingType,
}

impl Default for PodTopologySpreadArgs {
    fn default() -> Self {
        Self {
            default_constraints: Vec::new(),
            defaulting_type: DefaultingType::System,
        }
    }
}

impl PodTopologySpreadArgs {
    /// Parses kube-scheduler's `PodTopologySpreadArgs` (v1) with its defaulting: without
    /// `defaultingType`, List when `defaultConstraints` is given, else System.
    pub fn from_json(args: serde_json::Value) -> Result<Self, serde_json::Error> {
        let explicit_type = args.get("defaultingType").is_some();
        let mut parsed: Self = serde_json::from_value(args)?;
        if !explicit_type && !parsed.default_constraints.is_empty() {
            parsed.defaulting_type = DefaultingType::List;
        }
        Ok(parsed)
    }

    /// The default constraints in force: kube-scheduler's system ones or the listed ones.
    pub fn effective_defaults(&self) -> Vec<DefaultConstraint> {
        match self.defaulting_type {
            DefaultingType::List => self.default_constraints.clone(),
            DefaultingType::System => vec![
                DefaultConstraint {
                    max_skew: 3,
                    topology_key: "kubernetes.io/hostname".into(),
                    when_unsatisfiable: "ScheduleAnyway".into(),
                },
                DefaultConstraint {
                    max_skew: 5,
                    topology_key: "topology.kubernetes.io/zone".into(),
                    when_unsatisfiable: "ScheduleAnyway".into(),
                },
            ],
        }
    }
}

/// A named scheduling policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Name used in requests.
    pub name: String,
    /// What the policy is for.
    pub description: String,
    /// Filters, in the order they run; a node fails at the first that rejects it.
    pub filters: Vec<FilterPlugin>,
    /// Score plugins and weights.
    pub scores: Vec<WeightedScore>,
    /// NodeResourcesFit's scoring strategy.
    pub scoring_strategy: ScoringStrategy,
    /// Resources NodeResourcesFit scores, with weights (default cpu 1, memory 1).
    pub fit_resources: Vec<ResourceWeight>,
    /// Resources NodeResourcesBalancedAllocation compares (default cpu, memory).
    pub balanced_resources: Vec<ResourceWeight>,
    /// Seed of the tie-break hash, mixed with the request's seed.
    pub seed: u64,
    /// InterPodAffinity's arguments.
    #[serde(default)]
    pub inter_pod_affinity: InterPodAffinityArgs,
    /// PodTopologySpread's arguments.
    #[serde(default)]
    pub pod_topology_spread: PodTopologySpreadArgs,
    /// DynamicResources' arguments.
    #[serde(default, skip_serializing_if = "DynamicResourcesArgs::is_default")]
    pub dynamic_resources: DynamicResourcesArgs,
    /// Placement's `DevicePacking` arguments (used when `scores` names it).
    #[serde(default, skip_serializing_if = "DevicePackingArgs::is_default")]
    pub device_packing: DevicePackingArgs,
    /// CEL filter and score rules (see [`super::rules`]); none in the built-in policies.
    #[serde(default, skip_serializing_if = "Rules::is_empty")]
    pub rules: Rules,
    /// kube-scheduler extenders called for the policy's pods (see [`super::extender`]); a
    /// KubeSchedulerConfiguration's `extenders` apply to every profile, as in kube-scheduler.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extenders: Vec<super::extender::ExtenderConfig>,
    /// DefaultPreemption's PostFilter runs for a pod no node fits (kube-scheduler's default);
    /// false for a KubeSchedulerConfiguration profile whose postFilter set does not hold it.
    #[serde(default = "enabled", skip_serializing_if = "is_enabled")]
    pub default_preemption: bool,
}

fn enabled() -> bool {
    true
}

fn is_enabled(on: &bool) -> bool {
    *on
}

/// Why a policy cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The policy has no name.
    #[error("policy name must not be empty")]
    EmptyName,
    /// A weight is zero or negative.
    #[error("policy {policy}: weight of {what} must be positive, got {weight}")]
    BadWeight {
        /// Policy name.
        policy: String,
        /// What carries the weight.
        what: String,
        /// The weight given.
        weight: i64,
    },
    /// The RequestedToCapacityRatio shape is malformed.
    #[error("policy {policy}: RequestedToCapacityRatio shape {reason}")]
    BadShape {
        /// Policy name.
        policy: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A plugin's arguments are invalid.
    #[error("policy {policy}: {field}: {reason}")]
    BadArgs {
        /// Policy name.
        policy: String,
        /// The argument.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A rule is invalid (its expression does not compile, breaks a limit, …).
    #[error("policy {policy}: {source}")]
    Rule {
        /// Policy name.
        policy: String,
        /// The field and what is wrong.
        source: RuleError,
    },
    /// A plugin is listed twice.
    #[error("policy {policy}: plugin {plugin} is listed more than once")]
    Duplicate {
        /// Policy name.
        policy: String,
        /// Plugin name.
        plugin: &'static str,
    },
}

fn cpu_memory() -> Vec<ResourceWeight> {
    vec![
        ResourceWeight {
            name: ResourceName::Cpu,
            weight: 1,
        },
        ResourceWeight {
            name: ResourceName::Memory,
            weight: 1,
        },
    ]
}

impl Policy {
    /// kube-scheduler v1's default profile, limited to the plugins this engine implements, with
    /// its default weights (the registry's default rows: TaintToleration 3, NodeAffinity 2,
    /// NodeResourcesFit 1, VolumeBinding 1, PodTopologySpread 2, InterPodAffinity 2,
    /// NodeResourcesBalancedAllocation 1, ImageLocality 1) and LeastAllocated.
    pub fn kube_default() -> Self {
        Self {
            name: "default".into(),
            description:
                "kube-scheduler's default profile: spread load (LeastAllocated) with the default plugin weights".into(),
            filters: super::registry::default_filters().collect(),
            scores: super::registry::default_scores()
                .map(|(plugin, weight)| WeightedScore { plugin, weight })
                .collect(),
            scoring_strategy: ScoringStrategy::LeastAllocated,
            fit_resources: cpu_memory(),
            balanced_resources: cpu_memory(),
            seed: 0,
            inter_pod_affinity: InterPodAffinityArgs::default(),
            pod_topology_spread: PodTopologySpreadArgs::default(),
            dynamic_resources: DynamicResourcesArgs::default(),
            device_packing: DevicePackingArgs::default(),
            rules: Rules::default(),
            extenders: Vec::new(),
            default_preemption: true,
        }
    }

    /// The default profile with MostAllocated: packs pods onto the fullest nodes.
    pub fn bin_packing() -> Self {
        Self {
            name: "bin-packing".into(),
            description: "the default profile with MostAllocated: pack pods onto the fullest feasible nodes".into(),
            scoring_strategy: ScoringStrategy::MostAllocated,
            ..Self::kube_default()
        }
    }

    /// The default profile with RequestedToCapacityRatio favouring nodes near 100% utilization.
    pub fn requested_to_capacity_ratio() -> Self {
        Self {
            name: "requested-to-capacity-ratio".into(),
            description:
                "the default profile with RequestedToCapacityRatio, shape (0%,0) to (100%,10): favour full nodes".into(),
            scoring_strategy: ScoringStrategy::RequestedToCapacityRatio {
                shape: vec![
                    ShapePoint {
                        utilization: 0,
                        score: 0,
                    },
                    ShapePoint {
                        utilization: 100,
                        score: 10,
                    },
                ],
            },
            ..Self::kube_default()
        }
    }

    /// The policies every replica has without configuration; the first is the default.
    pub fn built_in() -> Vec<Self> {
        vec![
            Self::kube_default(),
            Self::bin_packing(),
            Self::requested_to_capacity_ratio(),
        ]
    }

    /// Checks weights, the shape and duplicates.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.name.is_empty() {
            return Err(PolicyError::EmptyName);
        }
        let bad_weight = |what: String, weight: i64| PolicyError::BadWeight {
            policy: self.name.clone(),
            what,
            weight,
        };
        for (i, s) in self.scores.iter().enumerate() {
            if s.weight <= 0 {
                return Err(bad_weight(s.plugin.name().into(), s.weight));
            }
            if self.scores[..i].iter().any(|o| o.plugin == s.plugin) {
                return Err(PolicyError::Duplicate {
                    policy: self.name.clone(),
                    plugin: s.plugin.name(),
                });
            }
        }
        for (i, f) in self.filters.iter().enumerate() {
            if self.filters[..i].contains(f) {
                return Err(PolicyError::Duplicate {
                    policy: self.name.clone(),
                    plugin: f.name(),
                });
            }
        }
        for r in self.fit_resources.iter().chain(&self.balanced_resources) {
            if r.weight <= 0 {
                return Err(bad_weight(format!("resource {}", r.name), r.weight));
            }
        }
        if !(0..=100).contains(&self.inter_pod_affinity.hard_pod_affinity_weight) {
            return Err(PolicyError::BadArgs {
                policy: self.name.clone(),
                field: "interPodAffinity.hardPodAffinityWeight",
                reason: "must be within 0..=100".into(),
            });
        }
        let spread = &self.pod_topology_spread;
        if spread.defaulting_type == DefaultingType::System && !spread.default_constraints.is_empty() {
            return Err(PolicyError::BadArgs {
                policy: self.name.clone(),
                field: "podTopologySpread.defaultConstraints",
                reason: "must be empty with defaultingType System".into(),
            });
        }
        for c in &spread.default_constraints {
            let reason = if c.max_skew < 1 {
                Some(format!("maxSkew must be at least 1, got {}", c.max_skew))
            } else if c.topology_key.is_empty() {
                Some("topologyKey must not be empty".to_string())
            } else if !matches!(c.when_unsatisfiable.as_str(), "DoNotSchedule" | "ScheduleAnyway") {
                Some(format!(
                    "whenUnsatisfiable must be DoNotSchedule or ScheduleAnyway, got {:?}",
                    c.when_unsatisfiable
                ))
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(PolicyError::BadArgs {
                    policy: self.name.clone(),
                    field: "podTopologySpread.defaultConstraints",
                    reason,
                });
            }
        }
        self.rules.validate().map_err(|source| PolicyError::Rule {
            policy: self.name.clone(),
            source,
        })?;
        if let ScoringStrategy::RequestedToCapacityRatio { shape } = &self.scoring_strategy {
            let bad = |reason| PolicyError::BadShape {
                policy: self.name.clone(),
                reason,
            };
            if shape.is_empty() {
                return Err(bad("must have at least one point"));
            }
            if shape.iter().any(|p| !(0..=100).contains(&p.utilization)) {
                return Err(bad("utilization must be within 0..=100"));
            }
            if shape.iter().any(|p| !(0..=10).contains(&p.score)) {
                return Err(bad("score must be within 0..=10"));
            }
            if shape.windows(2).any(|w| w[0].utilization >= w[1].utilization) {
                return Err(bad("utilization must increase strictly"));
            }
        }
        Ok(())
    }

    /// Hex digest of the policy's configuration: equal digests mean equal behaviour.
    pub fn digest(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&json))
    }

    /// The weight of a score plugin, if the policy runs it.
    pub fn weight(&self, plugin: ScorePlugin) -> Option<i64> {
        self.scores.iter().find(|s| s.plugin == plugin).map(|s| s.weight)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_weights_are_kube_schedulers() {
        let p = Policy::kube_default();
        assert_eq!(p.weight(ScorePlugin::TaintToleration), Some(3));
        assert_eq!(p.weight(ScorePlugin::NodeAffinity), Some(2));
        assert_eq!(p.weight(ScorePlugin::NodeResourcesFit), Some(1));
        assert_eq!(p.weight(ScorePlugin::NodeResourcesBalancedAllocation), Some(1));
        assert_eq!(p.weight(ScorePlugin::ImageLocality), Some(1));
        assert_eq!(p.weight(ScorePlugin::PodTopologySpread), Some(2));
        assert_eq!(p.weight(ScorePlugin::InterPodAffinity), Some(2));
        assert_eq!(p.inter_pod_affinity.hard_pod_affinity_weight, 1);
        assert!(!p.inter_pod_affinity.ignore_preferred_terms_of_existing_pods);
        assert_eq!(p.pod_topology_spread.defaulting_type, DefaultingType::System);
        assert_eq!(p.weight(ScorePlugin::DynamicResources), Some(2));
        assert_eq!(
            p.filters[p.filters.len() - 4..],
            [
                FilterPlugin::PodTopologySpread,
                FilterPlugin::InterPodAffinity,
                FilterPlugin::DynamicResources,
                FilterPlugin::NodeDeclaredFeatures
            ],
            "kube-scheduler runs them after NodeResourcesFit, NodeDeclaredFeatures last"
        );
        assert_eq!(p.scoring_strategy, ScoringStrategy::LeastAllocated);
    }

    #[test]
    fn built_ins_validate_and_digests_differ() {
        let all = Policy::built_in();
        for p in &all {
            p.validate().unwrap();
        }
        assert_ne!(all[0].digest(), all[1].digest());
        assert_eq!(all[0].digest(), Policy::kube_default().digest());
    }

    #[test]
    fn invalid_policies_are_refused() {
        let mut p = Policy::kube_default();
        p.scores[0].weight = 0;
        assert!(matches!(p.validate(), Err(PolicyError::BadWeight { .. })));
        let mut p = Policy::requested_to_capacity_ratio();
        p.scoring_strategy = ScoringStrategy::RequestedToCapacityRatio {
            shape: vec![
                ShapePoint {
                    utilization: 50,
                    score: 1,
                },
                ShapePoint {
                    utilization: 50,
                    score: 2,
                },
            ],
        };
        assert!(matches!(p.validate(), Err(PolicyError::BadShape { .. })));
        let mut p = Policy::kube_default();
        p.filters.push(FilterPlugin::NodePorts);
        assert!(matches!(p.validate(), Err(PolicyError::Duplicate { .. })));
    }
}
