//! Every plugin, one row each, as kube-scheduler's `framework/plugins/registry.go` lists them:
//! its name, whether it filters and scores, whether kube-scheduler's default profile enables it
//! and with which weight, whether preemption may resolve its rejections, what per-pod state it
//! reads, and the kube-scheduler file it mirrors; with the plugin enums ([`FilterPlugin`],
//! [`ScorePlugin`], re-exported by `policy`). The enums' names and lists, the default policy,
//! the `KubeSchedulerConfiguration` mapping, the diagnosis and the profile all read these facts
//! here; the framework's `run_filter` and `Evaluator::eval_node` keep one dispatch arm per
//! plugin (the concrete call, for speed).
//!
//! The rows are in kube-scheduler v1.37's default plugin order (`multiPoint` in
//! `pkg/scheduler/apis/config/v1/default_plugins.go`, with the feature gates on by default:
//! DynamicResources, NodeDeclaredFeatures last), then placement's own CEL rules. kube-scheduler's
//! default plugins this engine does not run have rows too, so a configuration naming them is
//! read as kube-scheduler reads it.

use serde::{Deserialize, Serialize};

/// A filter plugin, named as kube-scheduler names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FilterPlugin {
    /// Rejects cordoned nodes unless the pod tolerates `node.kubernetes.io/unschedulable:NoSchedule`.
    NodeUnschedulable,
    /// Rejects every node but `spec.nodeName` when it is set.
    NodeName,
    /// Rejects nodes with a NoSchedule or NoExecute taint the pod does not tolerate.
    TaintToleration,
    /// Rejects nodes that do not match nodeSelector and required node affinity.
    NodeAffinity,
    /// Rejects nodes where a requested host port is taken.
    NodePorts,
    /// Rejects nodes without room for the pod's requests or another pod.
    NodeResourcesFit,
    /// Rejects nodes where an in-tree disk of the pod is in use, and every node while a
    /// ReadWriteOncePod claim of the pod is in use.
    VolumeRestrictions,
    /// Rejects nodes where the pod's CSI volumes would exceed a driver's attach limit.
    NodeVolumeLimits,
    /// Rejects nodes the pod's claims cannot be bound on (volume node affinity, a matching
    /// available volume or dynamic provisioning for WaitForFirstConsumer claims).
    VolumeBinding,
    /// Rejects nodes outside the zone or region of the pod's bound volumes.
    VolumeZone,
    /// Rejects nodes that would break a DoNotSchedule topology spread constraint.
    PodTopologySpread,
    /// Rejects nodes breaking required pod affinity or anti-affinity (the pod's or existing pods').
    InterPodAffinity,
    /// Rejects nodes where the pod's ResourceClaims cannot be allocated (or, allocated, are not
    /// available).
    DynamicResources,
    /// Rejects nodes that do not declare every node feature the pod needs.
    NodeDeclaredFeatures,
    /// The policy's CEL filter rules (and a score rule's evaluation error): not configurable as
    /// a filter plugin, they run after every plugin when the policy has rules.
    Rules,
}

impl FilterPlugin {
    /// Every filter plugin a configuration names, in kube-scheduler's default order: the
    /// registry's rows with a filter (see [`REGISTRY`]); name lookups go through this table.
    pub const ALL: &'static [Self] = &FILTERS;

    /// The plugin kube-scheduler calls `name`, if this engine implements it as a filter.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|p| p.name() == name)
    }

    /// kube-scheduler's name of the plugin (its registry row's).
    pub fn name(self) -> &'static str {
        self.row().name
    }
}

/// A score plugin, named as kube-scheduler names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ScorePlugin {
    /// Prefers nodes with fewer untolerated PreferNoSchedule taints.
    TaintToleration,
    /// Prefers nodes matching the pod's preferred node affinity terms.
    NodeAffinity,
    /// Scores by requested resources with the policy's [`ScoringStrategy`].
    NodeResourcesFit,
    /// Prefers nodes where the pod's volumes use less of the capacity (StorageCapacityScoring).
    VolumeBinding,
    /// Prefers nodes whose resource fractions stay balanced.
    NodeResourcesBalancedAllocation,
    /// Prefers nodes that already have the pod's images.
    ImageLocality,
    /// Prefers nodes whose domains have fewer pods matching ScheduleAnyway (or default) constraints.
    PodTopologySpread,
    /// Prefers nodes by preferred pod (anti-)affinity, both the pod's and existing pods'.
    InterPodAffinity,
    /// Prefers nodes where the pod's prioritized lists get their earlier choices.
    DynamicResources,
    /// Placement's own: prefers nodes whose devices the pod's claims fill without breaking
    /// whole units (`dynamicresources::device_packing`); off by default.
    DevicePacking,
}

impl ScorePlugin {
    /// Every score plugin, in kube-scheduler's default order: the registry's rows with a score
    /// (see [`REGISTRY`]); name lookups go through this table.
    pub const ALL: &'static [Self] = &SCORES;

    /// The plugin kube-scheduler calls `name`, if this engine implements it as a score plugin.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|p| p.name() == name)
    }

    /// kube-scheduler's name of the plugin (its registry row's).
    pub fn name(self) -> &'static str {
        self.row().name
    }
}

/// Whether evicting pods may resolve a plugin's rejection: kube-scheduler's `Unschedulable` as
/// opposed to `UnschedulableAndUnresolvable` (see `diagnosis::resolvable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preemption {
    /// Every rejection is `UnschedulableAndUnresolvable`.
    Never,
    /// Every rejection is `Unschedulable`.
    Always,
    /// It depends on the reason (and the node): `diagnosis::resolvable` asks per reason.
    ByReason,
}

/// What a filter or score plugin reads beyond the pod and the node, which decides the passes it
/// runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// The node's class alone (labels, taints, cordon): the static predicates computed once per
    /// node class and pod (`accel::class_cache`).
    Class,
    /// The node itself (its usage, ports, features, images): every pass runs it.
    Node,
    /// InterPodAffinity's and PodTopologySpread's state (`plan::TopoState`): skipped for a pod
    /// neither has work for.
    Topology,
    /// The volume plugins' PreFilter state (`plan::PodVolumes`): as a filter, skipped for a pod
    /// without volumes they read.
    Volumes,
    /// DynamicResources' PreFilter state (`dynamicresources::PodDevices`): skipped for a pod
    /// without resource claims (as a score too: it gives every node 0).
    Devices,
}

/// Who does a plugin's job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// The engine: the row's filter and score plugins.
    Engine,
    /// The binder, the same way as kube-scheduler: a configuration may enable it at `point` (or
    /// multiPoint), noted as ignored with `why`.
    Binder {
        /// kube-scheduler's extension point.
        point: &'static str,
        /// What the binder does instead.
        why: &'static str,
    },
    /// Nobody placement lets a configuration enable: merely implied by the default set it is
    /// skipped, enabled explicitly it is an error.
    No,
    /// Placement's PodGroup cycle (`engine::podgroup`), in every profile while the feature gate
    /// the plugin belongs to is on (the service's `--feature-gates`): a configuration may enable
    /// it at multiPoint or its `points` (noted: nothing to configure), and may not disable it by
    /// name (placement cannot leave a profile without it).
    PodGroupCycle {
        /// kube-scheduler's extension points of the plugin.
        points: &'static [&'static str],
    },
    /// The engine's PostFilter (`plugins::defaultpreemption`), for a pod no node fits: it runs
    /// in a profile whose postFilter set holds the plugin once multiPoint is expanded as
    /// kube-scheduler expands it (on by default; disabled at postFilter or multiPoint, off). A
    /// configuration may enable it at multiPoint or its `points`.
    PostFilter {
        /// kube-scheduler's extension points of the plugin.
        points: &'static [&'static str],
    },
}

/// One plugin.
#[derive(Debug, Clone, Copy)]
pub struct PluginRow {
    /// kube-scheduler's name of the plugin (placement's own for [`FilterPlugin::Rules`]).
    pub name: &'static str,
    /// Its filter, if the engine runs it as one.
    pub filter: Option<FilterPlugin>,
    /// Its score, if the engine runs it as one.
    pub score: Option<ScorePlugin>,
    /// Who does its job.
    pub runs: Runs,
    /// In kube-scheduler's default plugin set (and the default policy, where the engine runs it).
    pub default_enabled: bool,
    /// The weight kube-scheduler's default set gives its score (`None`: unset, which is 1).
    pub default_weight: Option<i64>,
    /// Whether preemption may resolve its rejections.
    pub preemption: Preemption,
    /// What it reads beyond the pod and the node.
    pub reads: Reads,
    /// The kube-scheduler file it mirrors (under `pkg/scheduler/framework/plugins/`); `None`
    /// for placement's own.
    pub mirrors: Option<&'static str>,
    /// Whether a configuration may name its filter or score (every kube-scheduler plugin the
    /// engine runs, and placement's own `DevicePacking`; not the CEL rules).
    pub configurable: bool,
}

impl PluginRow {
    /// The weight of its score in kube-scheduler's default profile (unset is 1).
    pub const fn weight(&self) -> i64 {
        match self.default_weight {
            Some(w) => w,
            None => 1,
        }
    }
}

/// A row of a plugin kube-scheduler has and this engine runs.
const fn engine(
    name: &'static str,
    filter: Option<FilterPlugin>,
    score: Option<ScorePlugin>,
    default_weight: Option<i64>,
    preemption: Preemption,
    reads: Reads,
    mirrors: &'static str,
) -> PluginRow {
    PluginRow {
        name,
        filter,
        score,
        runs: Runs::Engine,
        default_enabled: true,
        default_weight,
        preemption,
        reads,
        mirrors: Some(mirrors),
        configurable: true,
    }
}

/// A row of one of kube-scheduler's PodGroup plugins (in its default set only with their feature
/// gates on, so not in the rows' default set: the gates are the service's).
const fn pod_group(
    name: &'static str,
    points: &'static [&'static str],
    default_weight: Option<i64>,
    mirrors: &'static str,
) -> PluginRow {
    PluginRow {
        name,
        filter: None,
        score: None,
        runs: Runs::PodGroupCycle { points },
        default_enabled: false,
        default_weight,
        preemption: Never,
        reads: Node,
        mirrors: Some(mirrors),
        configurable: false,
    }
}

/// A row of a default plugin of kube-scheduler's the engine does not run.
const fn elsewhere(name: &'static str, runs: Runs, mirrors: &'static str) -> PluginRow {
    PluginRow {
        name,
        filter: None,
        score: None,
        runs,
        default_enabled: true,
        default_weight: None,
        preemption: Preemption::Never,
        reads: Reads::Node,
        mirrors: Some(mirrors),
        configurable: false,
    }
}

use FilterPlugin as F;
use Preemption::{Always, ByReason, Never};
use Reads::{Class, Devices, Node, Topology, Volumes};
use ScorePlugin as S;

/// Every plugin, in kube-scheduler's default order (see the module's documentation).
pub const REGISTRY: &[PluginRow] = &[
    elsewhere("SchedulingGates", Runs::No, "schedulinggates/scheduling_gates.go"),
    elsewhere(
        "PrioritySort",
        Runs::Binder {
            point: "queueSort",
            why: "the binder's queue orders pods by priority, then age",
        },
        "queuesort/priority_sort.go",
    ),
    engine(
        "NodeName",
        Some(F::NodeName),
        None,
        None,
        Never,
        Node,
        "nodename/node_name.go",
    ),
    engine(
        "NodeUnschedulable",
        Some(F::NodeUnschedulable),
        None,
        None,
        Never,
        Class,
        "nodeunschedulable/node_unschedulable.go",
    ),
    engine(
        "TaintToleration",
        Some(F::TaintToleration),
        Some(S::TaintToleration),
        Some(3),
        Never,
        Class,
        "tainttoleration/taint_toleration.go",
    ),
    engine(
        "NodeAffinity",
        Some(F::NodeAffinity),
        Some(S::NodeAffinity),
        Some(2),
        Never,
        Class,
        "nodeaffinity/node_affinity.go",
    ),
    engine(
        "NodePorts",
        Some(F::NodePorts),
        None,
        None,
        Always,
        Node,
        "nodeports/node_ports.go",
    ),
    // Too many pods, or a request the node's allocatable holds, may be resolved.
    engine(
        "NodeResourcesFit",
        Some(F::NodeResourcesFit),
        Some(S::NodeResourcesFit),
        Some(1),
        ByReason,
        Node,
        "noderesources/fit.go",
    ),
    // Evicting the node's pods frees their disks and ReadWriteOncePod claims.
    engine(
        "VolumeRestrictions",
        Some(F::VolumeRestrictions),
        None,
        None,
        Always,
        Volumes,
        "volumerestrictions/volume_restrictions.go",
    ),
    // Evicting frees attach slots; kube's status for a missing driver is Unschedulable too.
    engine(
        "NodeVolumeLimits",
        Some(F::NodeVolumeLimits),
        None,
        None,
        Always,
        Volumes,
        "nodevolumelimits/csi.go",
    ),
    // Its score is StorageCapacityScoring's (on by default in 1.37), weight unset.
    engine(
        "VolumeBinding",
        Some(F::VolumeBinding),
        Some(S::VolumeBinding),
        None,
        Never,
        Volumes,
        "volumebinding/volume_binding.go",
    ),
    engine(
        "VolumeZone",
        Some(F::VolumeZone),
        None,
        None,
        Never,
        Volumes,
        "volumezone/volume_zone.go",
    ),
    // Skew may clear when pods go; a missing topology label may not.
    engine(
        "PodTopologySpread",
        Some(F::PodTopologySpread),
        Some(S::PodTopologySpread),
        Some(2),
        ByReason,
        Topology,
        "podtopologyspread/plugin.go",
    ),
    // Anti-affinity may clear when pods go; the pod's own affinity may not.
    engine(
        "InterPodAffinity",
        Some(F::InterPodAffinity),
        Some(S::InterPodAffinity),
        Some(2),
        ByReason,
        Topology,
        "interpodaffinity/plugin.go",
    ),
    // Every rejection is UnschedulableAndUnresolvable (`statusUnschedulable`).
    engine(
        "DynamicResources",
        Some(F::DynamicResources),
        Some(S::DynamicResources),
        Some(2),
        Never,
        Devices,
        "dynamicresources/dynamicresources.go",
    ),
    // `plugins::defaultpreemption`, where the profile's postFilter set holds it.
    elsewhere(
        "DefaultPreemption",
        Runs::PostFilter {
            points: &["preEnqueue", "postFilter", "podGroupPostFilter"],
        },
        "defaultpreemption/default_preemption.go",
    ),
    engine(
        "NodeResourcesBalancedAllocation",
        None,
        Some(S::NodeResourcesBalancedAllocation),
        Some(1),
        Never,
        Node,
        "noderesources/balanced_allocation.go",
    ),
    engine(
        "ImageLocality",
        None,
        Some(S::ImageLocality),
        Some(1),
        Never,
        Node,
        "imagelocality/image_locality.go",
    ),
    elsewhere(
        "DefaultBinder",
        Runs::Binder {
            point: "bind",
            why: "the binder writes the Binding",
        },
        "defaultbinder/default_binder.go",
    ),
    engine(
        "NodeDeclaredFeatures",
        Some(F::NodeDeclaredFeatures),
        None,
        None,
        Never,
        Node,
        "nodedeclaredfeatures/nodedeclaredfeatures.go",
    ),
    // kube 1.37's PodGroup plugins, in kube's default set with their gates on (GenericWorkload:
    // GangScheduling; TopologyAwareWorkloadScheduling: TopologyPlacementGenerator,
    // PodGroupPodsCount with weight 1); the PodGroup cycle (`engine::podgroup`) runs them, their
    // parts in `plugins::{gangscheduling, topologyaware, podgrouppodscount}`.
    pod_group(
        "GangScheduling",
        &["preEnqueue", "permit"],
        None,
        "gangscheduling/gangscheduling.go",
    ),
    pod_group(
        "TopologyPlacementGenerator",
        &["placementGenerate"],
        None,
        "topologyaware/topology_placement.go",
    ),
    pod_group(
        "PodGroupPodsCount",
        &["placementScore"],
        Some(1),
        "podgrouppodscount/podgroup_pods_count.go",
    ),
    // The policy's CEL rules: run after every filter plugin when the policy has rules, never
    // configured by name.
    PluginRow {
        name: "Rules",
        filter: Some(F::Rules),
        score: None,
        runs: Runs::Engine,
        default_enabled: false,
        default_weight: None,
        preemption: Never,
        reads: Node,
        mirrors: None,
        configurable: false,
    },
    // Placement's device packing (`dynamicresources::device_packing`): off unless a policy
    // enables it.
    PluginRow {
        name: "DevicePacking",
        filter: None,
        score: Some(S::DevicePacking),
        runs: Runs::Engine,
        default_enabled: false,
        default_weight: None,
        preemption: Never,
        reads: Devices,
        mirrors: None,
        configurable: true,
    },
];

/// The row of a kube-scheduler plugin of this name, if there is one.
pub fn by_name(name: &str) -> Option<&'static PluginRow> {
    REGISTRY.iter().find(|r| r.name == name && r.mirrors.is_some())
}

/// One past the largest discriminant among the rows' filter (`filters`) or score plugins.
const fn variants(filters: bool) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < REGISTRY.len() {
        let d = if filters {
            match REGISTRY[i].filter {
                Some(f) => f as usize + 1,
                None => 0,
            }
        } else {
            match REGISTRY[i].score {
                Some(s) => s as usize + 1,
                None => 0,
            }
        };
        if d > n {
            n = d;
        }
        i += 1;
    }
    n
}

/// Per filter (`filters`) or score plugin, by discriminant, the index of its row
/// (`usize::MAX` for none, which the tests rule out).
const fn rows_by_variant<const N: usize>(filters: bool) -> [usize; N] {
    let mut out = [usize::MAX; N];
    let mut i = 0;
    while i < REGISTRY.len() {
        let d = if filters {
            match REGISTRY[i].filter {
                Some(f) => f as usize,
                None => usize::MAX,
            }
        } else {
            match REGISTRY[i].score {
                Some(s) => s as usize,
                None => usize::MAX,
            }
        };
        if d != usize::MAX {
            out[d] = i;
        }
        i += 1;
    }
    out
}

const FILTER_VARIANTS: usize = variants(true);
const SCORE_VARIANTS: usize = variants(false);
const FILTER_ROWS: [usize; FILTER_VARIANTS] = rows_by_variant(true);
const SCORE_ROWS: [usize; SCORE_VARIANTS] = rows_by_variant(false);

/// How many rows kube-scheduler has with a filter (`filters`) or score plugin: those a
/// configuration names.
const fn configurable(filters: bool) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < REGISTRY.len() {
        let r = &REGISTRY[i];
        if r.configurable && (if filters { r.filter.is_some() } else { r.score.is_some() }) {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The filter plugins a configuration names, in the rows' order ([`FilterPlugin::ALL`]).
pub(crate) const FILTERS: [FilterPlugin; configurable(true)] = {
    let mut out = [FilterPlugin::Rules; configurable(true)];
    let (mut i, mut n) = (0, 0);
    while i < REGISTRY.len() {
        if let (Some(f), true) = (REGISTRY[i].filter, REGISTRY[i].configurable) {
            out[n] = f;
            n += 1;
        }
        i += 1;
    }
    out
};

/// The score plugins a configuration names, in the rows' order ([`ScorePlugin::ALL`]).
pub(crate) const SCORES: [ScorePlugin; configurable(false)] = {
    let mut out = [ScorePlugin::ImageLocality; configurable(false)];
    let (mut i, mut n) = (0, 0);
    while i < REGISTRY.len() {
        if let (Some(s), true) = (REGISTRY[i].score, REGISTRY[i].configurable) {
            out[n] = s;
            n += 1;
        }
        i += 1;
    }
    out
};

impl FilterPlugin {
    /// Its row.
    #[inline]
    pub fn row(self) -> &'static PluginRow {
        &REGISTRY[FILTER_ROWS[self as usize]]
    }
}

impl ScorePlugin {
    /// Its row.
    #[inline]
    pub fn row(self) -> &'static PluginRow {
        &REGISTRY[SCORE_ROWS[self as usize]]
    }
}

/// The filters of kube-scheduler's default profile the engine runs, in order.
pub fn default_filters() -> impl Iterator<Item = FilterPlugin> {
    REGISTRY.iter().filter(|r| r.default_enabled).filter_map(|r| r.filter)
}

/// The scores of kube-scheduler's default profile the engine runs, in order, with their weights.
pub fn default_scores() -> impl Iterator<Item = (ScorePlugin, i64)> {
    REGISTRY
        .iter()
        .filter(|r| r.default_enabled)
        .filter_map(|r| Some((r.score?, r.weight())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant, listed through a match that stops compiling when one is added.
    fn every_filter() -> Vec<FilterPlugin> {
        let all = [
            F::NodeUnschedulable,
            F::NodeName,
            F::TaintToleration,
            F::NodeAffinity,
            F::NodePorts,
            F::NodeResourcesFit,
            F::VolumeRestrictions,
            F::NodeVolumeLimits,
            F::VolumeBinding,
            F::VolumeZone,
            F::PodTopologySpread,
            F::InterPodAffinity,
            F::DynamicResources,
            F::NodeDeclaredFeatures,
            F::Rules,
        ];
        for f in all {
            match f {
                F::NodeUnschedulable
                | F::NodeName
                | F::TaintToleration
                | F::NodeAffinity
                | F::NodePorts
                | F::NodeResourcesFit
                | F::VolumeRestrictions
                | F::NodeVolumeLimits
                | F::VolumeBinding
                | F::VolumeZone
                | F::PodTopologySpread
                | F::InterPodAffinity
                | F::DynamicResources
                | F::NodeDeclaredFeatures
                | F::Rules => {}
            }
        }
        all.to_vec()
    }

    fn every_score() -> Vec<ScorePlugin> {
        let all = [
            S::TaintToleration,
            S::NodeAffinity,
            S::NodeResourcesFit,
            S::VolumeBinding,
            S::NodeResourcesBalancedAllocation,
            S::ImageLocality,
            S::PodTopologySpread,
            S::InterPodAffinity,
            S::DynamicResources,
            S::DevicePacking,
        ];
        for s in all {
            match s {
                S::TaintToleration
                | S::NodeAffinity
                | S::NodeResourcesFit
                | S::VolumeBinding
                | S::NodeResourcesBalancedAllocation
                | S::ImageLocality
                | S::PodTopologySpread
                | S::InterPodAffinity
                | S::DynamicResources
                | S::DevicePacking => {}
            }
        }
        all.to_vec()
    }

    #[test]
    fn every_variant_has_exactly_one_row_and_names_are_unique() {
        for f in every_filter() {
            let rows: Vec<_> = REGISTRY.iter().filter(|r| r.filter == Some(f)).collect();
            assert_eq!(rows.len(), 1, "{f:?}");
            assert_eq!(f.row().filter, Some(f));
        }
        for s in every_score() {
            let rows: Vec<_> = REGISTRY.iter().filter(|r| r.score == Some(s)).collect();
            assert_eq!(rows.len(), 1, "{s:?}");
            assert_eq!(s.row().score, Some(s));
        }
        assert_eq!(FILTER_VARIANTS, every_filter().len());
        assert_eq!(SCORE_VARIANTS, every_score().len());
        let mut names: Vec<&str> = REGISTRY.iter().map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), REGISTRY.len());
        for r in REGISTRY {
            assert_eq!(by_name(r.name).is_some(), r.mirrors.is_some(), "{}", r.name);
            // A row the engine does not run has no plugin; one it runs has at least one.
            assert_eq!(
                r.runs == Runs::Engine,
                r.filter.is_some() || r.score.is_some(),
                "{}",
                r.name
            );
            // Preemption's verdict is a filter's.
            assert!(r.filter.is_some() || r.preemption == Never, "{}", r.name);
        }
    }

    /// kube-scheduler v1.37's `getDefaultPlugins` (`pkg/scheduler/apis/config/v1/default_plugins.go`).
    #[test]
    fn the_default_profile_is_kube_schedulers() {
        let names: Vec<&str> = REGISTRY.iter().filter(|r| r.default_enabled).map(|r| r.name).collect();
        assert_eq!(
            names,
            [
                "SchedulingGates",
                "PrioritySort",
                "NodeName",
                "NodeUnschedulable",
                "TaintToleration",
                "NodeAffinity",
                "NodePorts",
                "NodeResourcesFit",
                "VolumeRestrictions",
                "NodeVolumeLimits",
                "VolumeBinding",
                "VolumeZone",
                "PodTopologySpread",
                "InterPodAffinity",
                "DynamicResources",
                "DefaultPreemption",
                "NodeResourcesBalancedAllocation",
                "ImageLocality",
                "DefaultBinder",
                "NodeDeclaredFeatures",
            ]
        );
        let scores: Vec<(&str, i64)> = default_scores().map(|(s, w)| (s.name(), w)).collect();
        assert_eq!(
            scores,
            [
                ("TaintToleration", 3),
                ("NodeAffinity", 2),
                ("NodeResourcesFit", 1),
                ("VolumeBinding", 1),
                ("PodTopologySpread", 2),
                ("InterPodAffinity", 2),
                ("DynamicResources", 2),
                ("NodeResourcesBalancedAllocation", 1),
                ("ImageLocality", 1),
            ]
        );
        assert_eq!(FilterPlugin::ALL, default_filters().collect::<Vec<_>>().as_slice());
        // Placement's own DevicePacking last, off by default.
        let mut configurable: Vec<ScorePlugin> = default_scores().map(|(s, _)| s).collect();
        configurable.push(S::DevicePacking);
        assert_eq!(ScorePlugin::ALL, configurable.as_slice());
        assert!(!S::DevicePacking.row().default_enabled);
        for f in FilterPlugin::ALL {
            assert_eq!(f.name(), f.row().name);
        }
    }
}
