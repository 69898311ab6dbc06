//! Policy files: placement's own YAML format and kube-scheduler's `KubeSchedulerConfiguration`
//! (`kubescheduler.config.k8s.io/v1`), parsed and mapped to [`Policy`]s. Plain Rust with no I/O:
//! the caller reads the file and hands over its text.
//!
//! The format is detected by `apiVersion`/`kind`:
//!
//! - `placement/v1` `PolicyConfiguration`: a list of policies, each naming its filters, weighted
//!   scores, NodeResourcesFit scoring strategy (the shape of kube-scheduler's
//!   `NodeResourcesFitArgs.scoringStrategy`), balanced-allocation resources, tie-break seed, and
//!   `interPodAffinity`/`podTopologySpread` args (the fields of kube-scheduler's args).
//! - `kubescheduler.config.k8s.io/v1` `KubeSchedulerConfiguration`: each profile becomes a policy
//!   named by its `schedulerName`, with kube-scheduler's semantics: the default plugin set
//!   (multiPoint, with the default weights), `plugins.<point>.enabled/disabled` merged into it
//!   (`"*"` disables every default at that point), multiPoint expansion with per-point overrides,
//!   score weights (0 or unset means 1), and `pluginConfig` args for NodeResourcesFit,
//!   NodeResourcesBalancedAllocation, InterPodAffinity and PodTopologySpread with
//!   kube-scheduler's defaults and validation.
//!
//! Fields with no effect here (process settings such as `leaderElection`, and
//! `percentageOfNodesToScore`, since every node is always evaluated) are accepted and listed in
//! [`PolicyFile::ignored`]; settings that would change decisions in ways the engine cannot follow
//! (an explicitly enabled plugin it does not implement, an extender's `preemptVerb`,
//! `ignoredResources`, `addedAffinity`) are errors naming the field. `extenders` (kube-scheduler's
//! HTTP extenders, see [`super::extender`]) are read with kube-scheduler's defaulting and
//! validation from either format and apply to every policy of the file. Unknown fields are errors, as kube-scheduler's
//! strict decoding makes them.

use std::collections::HashSet;

use serde_json::Value;

mod plugin_sets;
mod specs;

use super::extender::{extenders_from_specs, ExtenderConfig, ExtenderSpec};
use super::policy::{
    DynamicResourcesArgs, FilterPlugin, InterPodAffinityArgs, PodTopologySpreadArgs, Policy, PolicyError,
    ResourceWeight, ScorePlugin, ScoringStrategy, ShapePoint, WeightedScore,
};
use super::registry::{self, Runs};
use super::resources::ResourceName;
use plugin_sets::{expand, is_post_filter, merge_plugin_set, AlreadyRegistered, Entry};
use specs::{
    DynamicResourcesArgsSpec, KubeSchedulerConfigurationSpec, NodeAffinityArgs, NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs, PlacementFileSpec, PluginSetSpec, PluginsSpec, ProfileSpec, ResourceSpec,
    ScoringStrategySpec, TypeMeta,
};

/// `apiVersion` of placement's own policy file.
pub const PLACEMENT_API_VERSION: &str = "placement/v1";
/// `kind` of placement's own policy file.
pub const PLACEMENT_KIND: &str = "PolicyConfiguration";
/// `apiVersion` of the kube-scheduler configuration this module reads.
pub const KUBE_SCHEDULER_API_VERSION: &str = "kubescheduler.config.k8s.io/v1";
/// `kind` of the kube-scheduler configuration.
pub const KUBE_SCHEDULER_KIND: &str = "KubeSchedulerConfiguration";
/// kube-scheduler's name of a profile when a configuration has one profile and names none.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// The format a policy file was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// `placement/v1` `PolicyConfiguration`.
    Placement,
    /// `kubescheduler.config.k8s.io/v1` `KubeSchedulerConfiguration`.
    KubeSchedulerConfiguration,
}

impl FileFormat {
    /// The `kind` of the format.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Placement => PLACEMENT_KIND,
            Self::KubeSchedulerConfiguration => KUBE_SCHEDULER_KIND,
        }
    }
}

/// The policies of a file, in file order (the first is the default), and what was ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyFile {
    /// The detected format.
    pub format: FileFormat,
    /// The policies; validated, names unique, at least one.
    pub policies: Vec<Policy>,
    /// Settings accepted without effect, each `field: why`.
    pub ignored: Vec<String>,
}

/// Why a policy file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyConfigError {
    /// The text is not YAML of the expected shape (the message carries the line and column).
    #[error("{0}")]
    Yaml(String),
    /// The document is neither of the supported kinds.
    #[error(
        "apiVersion {api_version:?}, kind {kind:?}: not a policy file; expected apiVersion {PLACEMENT_API_VERSION} kind \
         {PLACEMENT_KIND}, or apiVersion {KUBE_SCHEDULER_API_VERSION} kind {KUBE_SCHEDULER_KIND}"
    )]
    UnknownDocument {
        /// The document's apiVersion.
        api_version: String,
        /// The document's kind.
        kind: String,
    },
    /// A field has a value the service refuses.
    #[error("{field}: {message}")]
    Invalid {
        /// Path of the field, e.g. `profiles[0].pluginConfig[1].args.scoringStrategy.type`.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A plugin the engine does not implement is explicitly enabled.
    #[error("{field}: plugin {plugin:?} of profile {profile:?} is not implemented by placement")]
    NotImplemented {
        /// The policy (profile) name.
        profile: String,
        /// The plugin name.
        plugin: String,
        /// Path of the field that enables it.
        field: String,
    },
    /// A mapped policy fails the engine's own validation.
    #[error("{field}: {source}")]
    Policy {
        /// Path of the policy in the file.
        field: String,
        /// The engine's reason.
        source: PolicyError,
    },
}

impl From<AlreadyRegistered> for PolicyConfigError {
    fn from(e: AlreadyRegistered) -> Self {
        invalid(e.field, e.message)
    }
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> PolicyConfigError {
    PolicyConfigError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// serde-saphyr's message, first line only (`line L column C: what`); the source snippet it
/// appends is left out of logs and metrics.
fn yaml_error(e: impl std::fmt::Display) -> PolicyConfigError {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    PolicyConfigError::Yaml(first.strip_prefix("error: ").unwrap_or(first).to_string())
}

// ---------------------------------------------------------------------------------------------
// Shared pieces: resource specs and the scoring strategy (NodeResourcesFitArgs.scoringStrategy)
// ---------------------------------------------------------------------------------------------

fn resource_name(field: &str, name: &str) -> Result<ResourceName, PolicyConfigError> {
    ResourceName::parse(name).map_err(|e| invalid(field, format!("invalid resource name {name:?}: {e}")))
}

/// The cpu/memory weight-1 default of both resource lists.
fn default_resources() -> Vec<ResourceWeight> {
    [ResourceName::Cpu, ResourceName::Memory]
        .into_iter()
        .map(|name| ResourceWeight { name, weight: 1 })
        .collect()
}

/// NodeResourcesFit's strategy and resources, with kube-scheduler's defaults (no resources means
/// cpu and memory; weight 0 means 1) and validation (weights in (0, 100], the shape).
fn scoring_strategy(
    path: &str,
    spec: Option<&ScoringStrategySpec>,
) -> Result<(ScoringStrategy, Vec<ResourceWeight>), PolicyConfigError> {
    let Some(spec) = spec else {
        return Ok((ScoringStrategy::LeastAllocated, default_resources()));
    };
    let mut resources = Vec::with_capacity(spec.resources.len());
    for (i, r) in spec.resources.iter().enumerate() {
        let weight = if r.weight == 0 { 1 } else { r.weight };
        if !(1..=100).contains(&weight) {
            return Err(invalid(
                format!("{path}.resources[{i}].weight"),
                format!("resource weight of {} not in valid range (0, 100]: {weight}", r.name),
            ));
        }
        resources.push(ResourceWeight {
            name: resource_name(&format!("{path}.resources[{i}].name"), &r.name)?,
            weight,
        });
    }
    if resources.is_empty() {
        resources = default_resources();
    }
    let ratio_path = format!("{path}.requestedToCapacityRatio");
    let strategy = match spec.type_.as_str() {
        "LeastAllocated" | "MostAllocated" if spec.requested_to_capacity_ratio.is_some() => {
            return Err(invalid(
                ratio_path,
                "must be nil when type is not RequestedToCapacityRatio",
            ))
        }
        "LeastAllocated" => ScoringStrategy::LeastAllocated,
        "MostAllocated" => ScoringStrategy::MostAllocated,
        "RequestedToCapacityRatio" => {
            let Some(ratio) = &spec.requested_to_capacity_ratio else {
                return Err(invalid(
                    ratio_path,
                    "must be specified when type is RequestedToCapacityRatio",
                ));
            };
            let shape_path = format!("{ratio_path}.shape");
            if ratio.shape.is_empty() {
                return Err(invalid(shape_path, "at least one point must be specified"));
            }
            for (i, p) in ratio.shape.iter().enumerate() {
                if i > 0 && ratio.shape[i - 1].utilization >= p.utilization {
                    return Err(invalid(
                        format!("{shape_path}[{i}].utilization"),
                        "values must be sorted in increasing order",
                    ));
                }
                if !(0..=100).contains(&p.utilization) {
                    return Err(invalid(
                        format!("{shape_path}[{i}].utilization"),
                        format!("{} not in valid range [0, 100]", p.utilization),
                    ));
                }
                if !(0..=10).contains(&p.score) {
                    return Err(invalid(
                        format!("{shape_path}[{i}].score"),
                        format!("{} not in valid range [0, 10]", p.score),
                    ));
                }
            }
            ScoringStrategy::RequestedToCapacityRatio {
                shape: ratio
                    .shape
                    .iter()
                    .map(|p| ShapePoint {
                        utilization: p.utilization,
                        score: p.score,
                    })
                    .collect(),
            }
        }
        other => {
            return Err(invalid(
                format!("{path}.type"),
                format!(
                    "unsupported value {other:?}: supported values are \"LeastAllocated\", \"MostAllocated\", \
                     \"RequestedToCapacityRatio\""
                ),
            ))
        }
    };
    Ok((strategy, resources))
}

/// NodeResourcesBalancedAllocation's resources: cpu and memory when empty; every weight must be 1
/// (0 means 1), names unique, as kube-scheduler validates them.
fn balanced_resources(path: &str, specs: &[ResourceSpec]) -> Result<Vec<ResourceWeight>, PolicyConfigError> {
    if specs.is_empty() {
        return Ok(default_resources());
    }
    let mut out: Vec<ResourceWeight> = Vec::with_capacity(specs.len());
    for (i, r) in specs.iter().enumerate() {
        let name = resource_name(&format!("{path}[{i}].name"), &r.name)?;
        if out.iter().any(|o| o.name == name) {
            return Err(invalid(
                format!("{path}[{i}].name"),
                format!("duplicate value {:?}", r.name),
            ));
        }
        let weight = if r.weight == 0 { 1 } else { r.weight };
        if weight != 1 {
            return Err(invalid(
                format!("{path}[{i}].weight"),
                format!("must be 1, got {weight}"),
            ));
        }
        out.push(ResourceWeight { name, weight });
    }
    Ok(out)
}

/// Whether kube-scheduler has a plugin of this name (a row of the registry).
fn kube_knows(name: &str) -> bool {
    registry::by_name(name).is_some()
}

fn not_implemented(profile: &str, plugin: &str, field: String) -> PolicyConfigError {
    PolicyConfigError::NotImplemented {
        profile: profile.to_string(),
        plugin: plugin.to_string(),
        field,
    }
}

fn check_policy(field: String, policy: &Policy) -> Result<(), PolicyConfigError> {
    policy
        .validate()
        .map_err(|source| PolicyConfigError::Policy { field, source })
}

// ---------------------------------------------------------------------------------------------
// Detection
// ---------------------------------------------------------------------------------------------

/// Parses a policy file (either format), maps and validates every policy.
pub fn parse_policy_file(text: &str) -> Result<PolicyFile, PolicyConfigError> {
    let meta: Option<TypeMeta> = serde_saphyr::from_str(text).map_err(yaml_error)?;
    let Some(meta) = meta else {
        return Err(invalid("", "the file is empty"));
    };
    let file = match (meta.api_version.as_str(), meta.kind.as_str()) {
        (PLACEMENT_API_VERSION, PLACEMENT_KIND) => placement_file(text)?,
        (KUBE_SCHEDULER_API_VERSION, KUBE_SCHEDULER_KIND) => kube_scheduler_configuration(text)?,
        (v, KUBE_SCHEDULER_KIND) if v.starts_with("kubescheduler.config.k8s.io/") => {
            return Err(invalid(
                "apiVersion",
                format!("{v:?} is not supported; convert the configuration to {KUBE_SCHEDULER_API_VERSION}"),
            ))
        }
        _ => {
            return Err(PolicyConfigError::UnknownDocument {
                api_version: meta.api_version,
                kind: meta.kind,
            })
        }
    };
    let mut names = HashSet::new();
    for (i, p) in file.policies.iter().enumerate() {
        if !names.insert(p.name.as_str()) {
            let field = match file.format {
                FileFormat::Placement => format!("policies[{i}].name"),
                FileFormat::KubeSchedulerConfiguration => format!("profiles[{i}].schedulerName"),
            };
            return Err(invalid(field, format!("duplicate value {:?}", p.name)));
        }
    }
    Ok(file)
}

// ---------------------------------------------------------------------------------------------
// placement/v1 PolicyConfiguration
// ---------------------------------------------------------------------------------------------

fn placement_file(text: &str) -> Result<PolicyFile, PolicyConfigError> {
    let spec: PlacementFileSpec = serde_saphyr::from_str(text).map_err(yaml_error)?;
    if spec.policies.is_empty() {
        return Err(invalid("policies", "at least one policy is required"));
    }
    let defaults = Policy::kube_default();
    let extenders = extenders("extenders", &spec.extenders)?;
    let mut policies = Vec::with_capacity(spec.policies.len());
    for (i, p) in spec.policies.into_iter().enumerate() {
        let path = format!("policies[{i}]");
        if p.name.is_empty() {
            return Err(invalid(format!("{path}.name"), "required"));
        }
        let filters = match &p.filters {
            None => defaults.filters.clone(),
            Some(names) => names
                .iter()
                .enumerate()
                .map(|(j, n)| {
                    FilterPlugin::from_name(n).ok_or_else(|| {
                        let field = format!("{path}.filters[{j}]");
                        if kube_knows(n) {
                            not_implemented(&p.name, n, field)
                        } else {
                            let known: Vec<&str> = FilterPlugin::ALL.iter().map(|f| f.name()).collect();
                            invalid(
                                field,
                                format!("unknown filter plugin {n:?}; known: {}", known.join(", ")),
                            )
                        }
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        let scores = match &p.scores {
            None => defaults.scores.clone(),
            Some(specs) => specs
                .iter()
                .enumerate()
                .map(|(j, s)| {
                    let field = format!("{path}.scores[{j}]");
                    let plugin = ScorePlugin::from_name(&s.name).ok_or_else(|| {
                        if kube_knows(&s.name) {
                            not_implemented(&p.name, &s.name, format!("{field}.name"))
                        } else {
                            let known: Vec<&str> = ScorePlugin::ALL.iter().map(|f| f.name()).collect();
                            invalid(
                                format!("{field}.name"),
                                format!("unknown score plugin {:?}; known: {}", s.name, known.join(", ")),
                            )
                        }
                    })?;
                    let weight = s.weight.unwrap_or_else(|| defaults.weight(plugin).unwrap_or(1));
                    Ok(WeightedScore { plugin, weight })
                })
                .collect::<Result<_, PolicyConfigError>>()?,
        };
        let (scoring_strategy, fit_resources) =
            scoring_strategy(&format!("{path}.scoringStrategy"), p.scoring_strategy.as_ref())?;
        let balanced_resources = balanced_resources(
            &format!("{path}.balancedResources"),
            p.balanced_resources.as_deref().unwrap_or_default(),
        )?;
        // Fields this format does not set keep the default profile's values.
        let mut policy = defaults.clone();
        policy.name = p.name;
        policy.description = p.description;
        policy.filters = filters;
        policy.scores = scores;
        policy.scoring_strategy = scoring_strategy;
        policy.fit_resources = fit_resources;
        policy.balanced_resources = balanced_resources;
        policy.seed = p.seed;
        if let Some(args) = p.inter_pod_affinity {
            policy.inter_pod_affinity = typed_args(&format!("{path}.interPodAffinity"), args)?;
        }
        if let Some(args) = p.pod_topology_spread {
            policy.pod_topology_spread = spread_args(&format!("{path}.podTopologySpread"), args)?;
        }
        if let Some(args) = p.dynamic_resources {
            let field = format!("{path}.dynamicResources");
            let a: DynamicResourcesArgsSpec = typed_args(&field, args)?;
            policy.dynamic_resources.binding_timeout =
                dynamic_resources_binding_timeout(&field, a.binding_timeout.as_deref())?;
            policy.dynamic_resources.filter_timeout =
                dynamic_resources_filter_timeout(&field, a.filter_timeout.as_deref())?;
        }
        if let Some(args) = p.device_packing {
            policy.device_packing = device_packing_args(&format!("{path}.devicePacking"), args)?;
        }
        // Rules are compiled here, so a bad expression names its field in the file.
        p.rules
            .validate()
            .map_err(|e| invalid(format!("{path}.{}", e.field), e.message))?;
        policy.rules = p.rules;
        policy.extenders = extenders.clone();
        check_policy(path, &policy)?;
        policies.push(policy);
    }
    Ok(PolicyFile {
        format: FileFormat::Placement,
        policies,
        ignored: Vec::new(),
    })
}

// ---------------------------------------------------------------------------------------------
// kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration
// ---------------------------------------------------------------------------------------------

/// `DevicePacking`'s args, read strictly and checked.
fn device_packing_args(path: &str, args: Value) -> Result<super::policy::DevicePackingArgs, PolicyConfigError> {
    let a: super::policy::DevicePackingArgs = typed_args(path, args)?;
    a.validate()
        .map_err(|(i, message)| invalid(format!("{path}.matchAttributes[{i}]"), message))?;
    Ok(a)
}

/// kube's `DynamicResourcesArgs.filterTimeout` with its defaulting (`SetDefaults_DynamicResourcesArgs`:
/// 10s when unset, `DRASchedulerFilterTimeout` being on) and validation
/// (`ValidateDynamicResourcesArgs`: zero or positive; zero disables the timeout).
fn dynamic_resources_filter_timeout(path: &str, value: Option<&str>) -> Result<std::time::Duration, PolicyConfigError> {
    let Some(text) = value else {
        return Ok(DynamicResourcesArgs::DEFAULT_FILTER_TIMEOUT);
    };
    let field = format!("{path}.filterTimeout");
    if text.trim().starts_with('-') {
        return Err(invalid(field, format!("{text:?}: must be zero or positive")));
    }
    super::extender::parse_go_duration(text).map_err(|e| invalid(field, e))
}

/// kube's `DynamicResourcesArgs.bindingTimeout` with its defaulting (600s when unset) and
/// validation (`ValidateDynamicResourcesArgs`: at least 1 second).
fn dynamic_resources_binding_timeout(
    path: &str,
    value: Option<&str>,
) -> Result<std::time::Duration, PolicyConfigError> {
    let Some(text) = value else {
        return Ok(DynamicResourcesArgs::DEFAULT_BINDING_TIMEOUT);
    };
    let field = format!("{path}.bindingTimeout");
    let d = if text.trim().starts_with('-') {
        None
    } else {
        Some(super::extender::parse_go_duration(text).map_err(|e| invalid(field.clone(), e))?)
    };
    match d {
        Some(d) if d >= std::time::Duration::from_secs(1) => Ok(d),
        _ => Err(invalid(field, format!("{text:?}: must be at least 1 second"))),
    }
}

fn note_ignored(ignored: &mut Vec<String>, field: impl std::fmt::Display, why: &str) {
    ignored.push(format!("{field}: {why}"));
}

fn kube_scheduler_configuration(text: &str) -> Result<PolicyFile, PolicyConfigError> {
    let spec: KubeSchedulerConfigurationSpec = serde_saphyr::from_str(text).map_err(yaml_error)?;
    let mut ignored = Vec::new();
    let extenders = extenders("extenders", &spec.extenders)?;
    let process = "a kube-scheduler process setting; the binder and the decision service have their own flags";
    for (present, field) in [
        (spec.parallelism.is_some(), "parallelism"),
        (spec.leader_election.is_some(), "leaderElection"),
        (spec.client_connection.is_some(), "clientConnection"),
        (spec.enable_profiling.is_some(), "enableProfiling"),
        (spec.enable_contention_profiling.is_some(), "enableContentionProfiling"),
        (spec.pod_initial_backoff_seconds.is_some(), "podInitialBackoffSeconds"),
        (spec.pod_max_backoff_seconds.is_some(), "podMaxBackoffSeconds"),
        (spec.delay_cache_until_active.is_some(), "delayCacheUntilActive"),
    ] {
        if present {
            note_ignored(&mut ignored, field, process);
        }
    }
    let every_node = "placement evaluates every node, as percentageOfNodesToScore 100 does";
    if let Some(p) = spec.percentage_of_nodes_to_score {
        check_percentage("percentageOfNodesToScore", p)?;
        note_ignored(&mut ignored, "percentageOfNodesToScore", every_node);
    }
    let mut profiles = spec.profiles;
    if profiles.is_empty() {
        profiles.push(ProfileSpec::default());
    }
    let single = profiles.len() == 1;
    let mut policies = Vec::with_capacity(profiles.len());
    for (i, profile) in profiles.into_iter().enumerate() {
        let path = format!("profiles[{i}]");
        let name = match profile.scheduler_name.clone() {
            Some(n) if !n.is_empty() => n,
            None if single => DEFAULT_SCHEDULER_NAME.to_string(),
            _ => return Err(invalid(format!("{path}.schedulerName"), "required")),
        };
        if let Some(p) = profile.percentage_of_nodes_to_score {
            let field = format!("{path}.percentageOfNodesToScore");
            check_percentage(&field, p)?;
            note_ignored(&mut ignored, field, every_node);
        }
        let mut policy = kube_profile(&path, name, &profile, &mut ignored)?;
        policy.extenders = extenders.clone();
        check_policy(path, &policy)?;
        policies.push(policy);
    }
    Ok(PolicyFile {
        format: FileFormat::KubeSchedulerConfiguration,
        policies,
        ignored,
    })
}

/// The file's extenders, mapped and validated (see [`extenders_from_specs`]).
fn extenders(path: &str, specs: &[ExtenderSpec]) -> Result<Vec<ExtenderConfig>, PolicyConfigError> {
    extenders_from_specs(path, specs).map_err(|e| invalid(e.field, e.message))
}

fn check_percentage(field: &str, p: i64) -> Result<(), PolicyConfigError> {
    if (0..=100).contains(&p) {
        Ok(())
    } else {
        Err(invalid(field, format!("{p} not in valid range [0, 100]")))
    }
}

/// Maps one kube-scheduler profile to a policy.
fn kube_profile(
    path: &str,
    name: String,
    profile: &ProfileSpec,
    ignored: &mut Vec<String>,
) -> Result<Policy, PolicyConfigError> {
    let empty = PluginsSpec::default();
    let plugins = profile.plugins.as_ref().unwrap_or(&empty);
    let pp = format!("{path}.plugins");

    // Every plugin the operator enables must be one placement runs (or one whose job the binder
    // does); the other extension points have no counterpart and are noted as ignored.
    let points: [(&str, &PluginSetSpec); 16] = [
        ("multiPoint", &plugins.multi_point),
        ("preEnqueue", &plugins.pre_enqueue),
        ("queueSort", &plugins.queue_sort),
        ("preFilter", &plugins.pre_filter),
        ("filter", &plugins.filter),
        ("postFilter", &plugins.post_filter),
        ("preScore", &plugins.pre_score),
        ("score", &plugins.score),
        ("reserve", &plugins.reserve),
        ("permit", &plugins.permit),
        ("preBind", &plugins.pre_bind),
        ("bind", &plugins.bind),
        ("postBind", &plugins.post_bind),
        ("placementGenerate", &plugins.placement_generate),
        ("placementScore", &plugins.placement_score),
        ("podGroupPostFilter", &plugins.pod_group_post_filter),
    ];
    for (point, set) in points {
        let ours = |n: &str| FilterPlugin::from_name(n).is_some() || ScorePlugin::from_name(n).is_some();
        let mut seen = HashSet::new();
        for (j, p) in set.enabled.iter().enumerate() {
            let field = format!("{pp}.{point}.enabled[{j}]");
            if !seen.insert(p.name.as_str()) {
                return Err(invalid(
                    format!("{field}.name"),
                    format!("plugin {:?} is listed twice", p.name),
                ));
            }
            // Plugins whose job the binder does the same way may be named at their point.
            if let Some(Runs::Binder { why, .. }) = registry::by_name(&p.name)
                .map(|r| r.runs)
                .filter(|runs| matches!(runs, Runs::Binder { point: at, .. } if point == "multiPoint" || point == *at))
            {
                note_ignored(ignored, format!("{field} ({})", p.name), why);
                continue;
            }
            // kube's PodGroup plugins: placement's PodGroup cycle does their job in every profile.
            if let Some(Runs::PodGroupCycle { points }) = registry::by_name(&p.name).map(|r| r.runs) {
                if point != "multiPoint" && !points.contains(&point) {
                    return Err(invalid(
                        format!("{field}.name"),
                        format!("plugin {:?} does not extend {point}", p.name),
                    ));
                }
                note_ignored(
                    ignored,
                    format!("{field} ({})", p.name),
                    "placement's PodGroup cycle does its job in every profile, with the service's feature gates",
                );
                continue;
            }
            // DefaultPreemption: the engine's PostFilter, on where the profile's postFilter set
            // holds it (resolved below); its PreEnqueue and PodGroupPostFilter are placement's
            // in every profile.
            if let Some(Runs::PostFilter { points }) = registry::by_name(&p.name).map(|r| r.runs) {
                if point != "multiPoint" && !points.contains(&point) {
                    return Err(invalid(
                        format!("{field}.name"),
                        format!("plugin {:?} does not extend {point}", p.name),
                    ));
                }
                if !matches!(point, "multiPoint" | "postFilter") {
                    note_ignored(
                        ignored,
                        format!("{field} ({})", p.name),
                        "placement runs its job at this extension point in every profile",
                    );
                }
                continue;
            }
            if !ours(&p.name) {
                return Err(not_implemented(&name, &p.name, field));
            }
            match point {
                "multiPoint" | "filter" | "score" => {}
                "preFilter" | "preScore" => note_ignored(
                    ignored,
                    format!("{field} ({})", p.name),
                    "placement's plugins have no separate pre-phase: the plugin's filter or score runs whole",
                ),
                _ => {
                    return Err(invalid(
                        format!("{field}.name"),
                        format!("plugin {:?} does not extend {point}", p.name),
                    ))
                }
            }
        }
        for (j, p) in set.disabled.iter().enumerate() {
            if let Some(Runs::PodGroupCycle { .. }) = registry::by_name(&p.name).map(|r| r.runs) {
                return Err(invalid(
                    format!("{pp}.{point}.disabled[{j}].name"),
                    format!(
                        "placement's PodGroup cycle does {:?}'s job in every profile: it cannot be disabled (turn the feature gate off instead)",
                        p.name
                    ),
                ));
            }
        }
        if !matches!(point, "multiPoint" | "filter" | "score") {
            for (j, p) in set.disabled.iter().enumerate() {
                // DefaultPreemption's PostFilter is off where postFilter disables it (or `*`).
                if point == "postFilter" && (p.name == "*" || is_post_filter(&p.name)) {
                    if p.name == "*" {
                        note_ignored(
                            ignored,
                            format!("{pp}.{point}.disabled[{j}] ({})", p.name),
                            "DefaultPreemption's PostFilter is off; DynamicResources' runs wherever its filter does",
                        );
                    }
                    continue;
                }
                note_ignored(
                    ignored,
                    format!("{pp}.{point}.disabled[{j}] ({})", p.name),
                    "placement runs no plugins at this extension point",
                );
            }
        }
    }

    // kube-scheduler's default plugins (the registry's default rows); those the engine does not
    // run are skipped when they are merely implied.
    let defaults: Vec<Entry> = registry::REGISTRY
        .iter()
        .filter(|r| r.default_enabled)
        .map(|r| Entry {
            name: r.name.to_string(),
            weight: r.default_weight,
            explicit: false,
            field: String::new(),
        })
        .collect();
    let multi_point = merge_plugin_set(defaults, &plugins.multi_point, &format!("{pp}.multiPoint"));
    let filter_point = merge_plugin_set(Vec::new(), &plugins.filter, &format!("{pp}.filter"));
    let score_point = merge_plugin_set(Vec::new(), &plugins.score, &format!("{pp}.score"));
    for e in &filter_point {
        if FilterPlugin::from_name(&e.name).is_none() {
            return Err(invalid(
                format!("{}.name", e.field),
                format!("plugin {:?} does not extend filter", e.name),
            ));
        }
    }
    for e in &score_point {
        if ScorePlugin::from_name(&e.name).is_none() {
            return Err(invalid(
                format!("{}.name", e.field),
                format!("plugin {:?} does not extend score", e.name),
            ));
        }
    }
    // kube-scheduler's PostFilter set: DefaultPreemption's runs where it holds it. Its
    // PodGroupPostFilter runs in placement's PodGroup cycle whatever that set says.
    let post_filter_point = merge_plugin_set(Vec::new(), &plugins.post_filter, &format!("{pp}.postFilter"));
    let post_filters = expand(
        &multi_point,
        &post_filter_point,
        &plugins.post_filter,
        is_post_filter,
        &format!("{pp}.postFilter"),
    )?;
    let default_preemption = post_filters.iter().any(|e| is_post_filter(&e.name));
    let group_post_filter_point = merge_plugin_set(
        Vec::new(),
        &plugins.pod_group_post_filter,
        &format!("{pp}.podGroupPostFilter"),
    );
    let group_post_filters = expand(
        &multi_point,
        &group_post_filter_point,
        &plugins.pod_group_post_filter,
        is_post_filter,
        &format!("{pp}.podGroupPostFilter"),
    )?;
    if !group_post_filters.iter().any(|e| is_post_filter(&e.name)) {
        note_ignored(
            ignored,
            format!("{pp}.podGroupPostFilter (DefaultPreemption)"),
            "placement's PodGroup cycle runs DefaultPreemption's PodGroupPostFilter in every profile",
        );
    }
    let filters = expand(
        &multi_point,
        &filter_point,
        &plugins.filter,
        |n| FilterPlugin::from_name(n).is_some(),
        &format!("{pp}.filter"),
    )?;
    let scores = expand(
        &multi_point,
        &score_point,
        &plugins.score,
        |n| ScorePlugin::from_name(n).is_some(),
        &format!("{pp}.score"),
    )?;

    // Args a profile does not set keep kube-scheduler's defaults, which the default policy has.
    let mut policy = Policy::kube_default();
    policy.default_preemption = default_preemption;
    policy.name = name.clone();
    policy.description = format!("{KUBE_SCHEDULER_KIND} profile {name:?}");
    policy.filters = filters
        .iter()
        .filter_map(|e| FilterPlugin::from_name(&e.name))
        .collect();
    policy.scores = Vec::with_capacity(scores.len());
    for e in &scores {
        let Some(plugin) = ScorePlugin::from_name(&e.name) else {
            continue;
        };
        let weight = match e.weight {
            None | Some(0) => 1,
            Some(w) if w < 0 => {
                let field = if e.explicit { e.field.clone() } else { pp.clone() };
                return Err(invalid(
                    format!("{field}.weight"),
                    format!("must not be negative, got {w}"),
                ));
            }
            Some(w) => w,
        };
        policy.scores.push(WeightedScore { plugin, weight });
    }

    // pluginConfig: args of the plugins placement configures; others are noted.
    let enabled: HashSet<&str> = filters.iter().chain(&scores).map(|e| e.name.as_str()).collect();
    let mut seen = HashSet::new();
    for (j, c) in profile.plugin_config.iter().enumerate() {
        let field = format!("{path}.pluginConfig[{j}]");
        if !seen.insert(c.name.as_str()) {
            return Err(invalid(
                format!("{field}.name"),
                format!("duplicate value {:?}", c.name),
            ));
        }
        let args_path = format!("{field}.args");
        let args = strip_type_meta(&args_path, &c.name, &c.args)?;
        match c.name.as_str() {
            "NodeResourcesFit" => {
                let a: NodeResourcesFitArgs = typed_args(&args_path, args)?;
                if !a.ignored_resources.is_empty() {
                    return Err(invalid(
                        format!("{args_path}.ignoredResources"),
                        "not supported: placement checks every requested resource",
                    ));
                }
                if !a.ignored_resource_groups.is_empty() {
                    return Err(invalid(
                        format!("{args_path}.ignoredResourceGroups"),
                        "not supported: placement checks every requested resource",
                    ));
                }
                let (strategy, resources) =
                    scoring_strategy(&format!("{args_path}.scoringStrategy"), a.scoring_strategy.as_ref())?;
                policy.scoring_strategy = strategy;
                policy.fit_resources = resources;
            }
            "NodeResourcesBalancedAllocation" => {
                let a: NodeResourcesBalancedAllocationArgs = typed_args(&args_path, args)?;
                policy.balanced_resources = balanced_resources(&format!("{args_path}.resources"), &a.resources)?;
            }
            "InterPodAffinity" => {
                policy.inter_pod_affinity = typed_args::<InterPodAffinityArgs>(&args_path, args)?;
            }
            "PodTopologySpread" => {
                policy.pod_topology_spread = spread_args(&args_path, args)?;
            }
            "DynamicResources" => {
                let a: DynamicResourcesArgsSpec = typed_args(&args_path, args)?;
                policy.dynamic_resources.filter_timeout =
                    dynamic_resources_filter_timeout(&args_path, a.filter_timeout.as_deref())?;
                policy.dynamic_resources.binding_timeout =
                    dynamic_resources_binding_timeout(&args_path, a.binding_timeout.as_deref())?;
            }
            "DevicePacking" => {
                policy.device_packing = device_packing_args(&args_path, args)?;
            }
            "NodeAffinity" => {
                let a: NodeAffinityArgs = typed_args(&args_path, args)?;
                if !a.added_affinity.is_null() {
                    return Err(invalid(
                        format!("{args_path}.addedAffinity"),
                        "not supported: placement applies only the pod's own node affinity",
                    ));
                }
            }
            other if enabled.contains(other) => {
                note_ignored(
                    ignored,
                    format!("{field} ({other})"),
                    "placement's plugin takes no args",
                );
            }
            other => {
                note_ignored(
                    ignored,
                    format!("{field} ({other})"),
                    "placement does not run this plugin",
                );
            }
        }
    }
    Ok(policy)
}

/// The args without `apiVersion`/`kind`, which must name `<plugin>Args` of v1 when present.
fn strip_type_meta(path: &str, plugin: &str, args: &Value) -> Result<Value, PolicyConfigError> {
    let mut args = match args {
        Value::Null => return Ok(Value::Object(Default::default())),
        Value::Object(m) => m.clone(),
        _ => return Err(invalid(path, "must be a mapping")),
    };
    if let Some(kind) = args.remove("kind") {
        let want = format!("{plugin}Args");
        if kind.as_str() != Some(want.as_str()) {
            return Err(invalid(
                format!("{path}.kind"),
                format!("has to match plugin args: want {want:?}, got {kind}"),
            ));
        }
    }
    if let Some(v) = args.remove("apiVersion") {
        if v.as_str() != Some(KUBE_SCHEDULER_API_VERSION) {
            return Err(invalid(
                format!("{path}.apiVersion"),
                format!("want {KUBE_SCHEDULER_API_VERSION:?}, got {v}"),
            ));
        }
    }
    Ok(Value::Object(args))
}

fn typed_args<T: serde::de::DeserializeOwned>(path: &str, args: Value) -> Result<T, PolicyConfigError> {
    serde_json::from_value(args).map_err(|e| invalid(path, e.to_string()))
}

/// PodTopologySpread's args with kube-scheduler's defaulting of `defaultingType`.
fn spread_args(path: &str, args: Value) -> Result<PodTopologySpreadArgs, PolicyConfigError> {
    PodTopologySpreadArgs::from_json(args).map_err(|e| invalid(path, e.to_string()))
}

#[cfg(test)]
#[path = "policy_config_tests.rs"]
mod tests;
