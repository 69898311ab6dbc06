//! The documents of a policy file as they are written: the serde shapes of placement's
//! `PolicyConfiguration` and of kube-scheduler's `KubeSchedulerConfiguration` (its profiles, plugin
//! sets and plugins' args), strict as kube-scheduler's decoding. [`super`] maps them to policies.

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

use crate::engine::extender::ExtenderSpec;
use crate::engine::rules::Rules;

/// kube-scheduler's `ResourceSpec`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ResourceSpec {
    pub(super) name: String,
    #[serde(default)]
    pub(super) weight: i64,
}

/// kube-scheduler's `UtilizationShapePoint`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ShapePointSpec {
    #[serde(default)]
    pub(super) utilization: i64,
    #[serde(default)]
    pub(super) score: i64,
}

/// kube-scheduler's `RequestedToCapacityRatioParam`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RequestedToCapacityRatioSpec {
    #[serde(default)]
    pub(super) shape: Vec<ShapePointSpec>,
}

/// kube-scheduler's `ScoringStrategy`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ScoringStrategySpec {
    #[serde(default, rename = "type")]
    pub(super) type_: String,
    #[serde(default)]
    pub(super) resources: Vec<ResourceSpec>,
    pub(super) requested_to_capacity_ratio: Option<RequestedToCapacityRatioSpec>,
}

/// The type fields every document has.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TypeMeta {
    #[serde(default)]
    pub(super) api_version: String,
    #[serde(default)]
    pub(super) kind: String,
}

/// A score plugin with an optional weight (placement's format and kube-scheduler's `Plugin`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct PluginSpec {
    pub(super) name: String,
    pub(super) weight: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct PlacementFileSpec {
    #[allow(dead_code)]
    pub(super) api_version: String,
    #[allow(dead_code)]
    pub(super) kind: String,
    #[serde(default)]
    pub(super) policies: Vec<PlacementPolicySpec>,
    /// kube-scheduler extenders (its `Extender` fields), called for every policy's pods.
    #[serde(default)]
    pub(super) extenders: Vec<ExtenderSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct PlacementPolicySpec {
    #[serde(default)]
    pub(super) name: String,
    #[serde(default)]
    pub(super) description: String,
    pub(super) filters: Option<Vec<String>>,
    pub(super) scores: Option<Vec<PluginSpec>>,
    pub(super) scoring_strategy: Option<ScoringStrategySpec>,
    pub(super) balanced_resources: Option<Vec<ResourceSpec>>,
    #[serde(default)]
    pub(super) seed: u64,
    /// InterPodAffinity's args (kube-scheduler's `InterPodAffinityArgs` fields).
    pub(super) inter_pod_affinity: Option<Value>,
    /// PodTopologySpread's args (kube-scheduler's `PodTopologySpreadArgs` fields).
    pub(super) pod_topology_spread: Option<Value>,
    /// DynamicResources' args (kube-scheduler's `DynamicResourcesArgs` fields).
    pub(super) dynamic_resources: Option<Value>,
    /// DevicePacking's args (`matchAttributes`).
    pub(super) device_packing: Option<Value>,
    /// CEL filter and score rules.
    #[serde(default)]
    pub(super) rules: Rules,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct KubeSchedulerConfigurationSpec {
    #[allow(dead_code)]
    pub(super) api_version: String,
    #[allow(dead_code)]
    pub(super) kind: String,
    pub(super) parallelism: Option<i64>,
    pub(super) leader_election: Option<IgnoredAny>,
    pub(super) client_connection: Option<IgnoredAny>,
    pub(super) enable_profiling: Option<bool>,
    pub(super) enable_contention_profiling: Option<bool>,
    pub(super) percentage_of_nodes_to_score: Option<i64>,
    pub(super) pod_initial_backoff_seconds: Option<i64>,
    pub(super) pod_max_backoff_seconds: Option<i64>,
    #[serde(default)]
    pub(super) profiles: Vec<ProfileSpec>,
    #[serde(default)]
    pub(super) extenders: Vec<ExtenderSpec>,
    pub(super) delay_cache_until_active: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ProfileSpec {
    pub(super) scheduler_name: Option<String>,
    pub(super) percentage_of_nodes_to_score: Option<i64>,
    pub(super) plugins: Option<PluginsSpec>,
    #[serde(default)]
    pub(super) plugin_config: Vec<PluginConfigSpec>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct PluginSetSpec {
    #[serde(default)]
    pub(super) enabled: Vec<PluginSpec>,
    #[serde(default)]
    pub(super) disabled: Vec<PluginSpec>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct PluginsSpec {
    #[serde(default)]
    pub(super) pre_enqueue: PluginSetSpec,
    #[serde(default)]
    pub(super) queue_sort: PluginSetSpec,
    #[serde(default)]
    pub(super) pre_filter: PluginSetSpec,
    #[serde(default)]
    pub(super) filter: PluginSetSpec,
    #[serde(default)]
    pub(super) post_filter: PluginSetSpec,
    #[serde(default)]
    pub(super) pre_score: PluginSetSpec,
    #[serde(default)]
    pub(super) score: PluginSetSpec,
    #[serde(default)]
    pub(super) reserve: PluginSetSpec,
    #[serde(default)]
    pub(super) permit: PluginSetSpec,
    #[serde(default)]
    pub(super) pre_bind: PluginSetSpec,
    #[serde(default)]
    pub(super) bind: PluginSetSpec,
    #[serde(default)]
    pub(super) post_bind: PluginSetSpec,
    #[serde(default)]
    pub(super) multi_point: PluginSetSpec,
    #[serde(default)]
    pub(super) placement_generate: PluginSetSpec,
    #[serde(default)]
    pub(super) placement_score: PluginSetSpec,
    #[serde(default)]
    pub(super) pod_group_post_filter: PluginSetSpec,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct PluginConfigSpec {
    pub(super) name: String,
    #[serde(default)]
    pub(super) args: Value,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NodeResourcesFitArgs {
    #[serde(default)]
    pub(super) ignored_resources: Vec<String>,
    #[serde(default)]
    pub(super) ignored_resource_groups: Vec<String>,
    pub(super) scoring_strategy: Option<ScoringStrategySpec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NodeResourcesBalancedAllocationArgs {
    #[serde(default)]
    pub(super) resources: Vec<ResourceSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NodeAffinityArgs {
    #[serde(default)]
    pub(super) added_affinity: Value,
}

/// kube-scheduler's `DynamicResourcesArgs` (`types_pluginargs.go`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct DynamicResourcesArgsSpec {
    /// A Go duration (`metav1.Duration`).
    pub(super) filter_timeout: Option<String>,
    /// PreBind's wait for binding conditions, a Go duration (`metav1.Duration`).
    pub(super) binding_timeout: Option<String>,
}
