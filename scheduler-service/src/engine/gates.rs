//! The kube-scheduler feature gates that change a decision (kube 1.37's
//! `pkg/features/kube_features.go`), given as kube-scheduler's `--feature-gates` flag is
//! (`Name=true,Other=false`). Like kube's `utilfeature.DefaultFeatureGate` they are set once for the
//! process ([`set_process_default`], from `scheduler-service --feature-gates` or the binder's in-process
//! engines); each [`super::profile::Profile`] takes a copy when it is made, so a test can give a
//! profile its own ([`super::profile::Profile::with_gates`]).
//!
//! | gate | kube 1.37 default | placement's default | what it changes here |
//! |---|---|---|---|
//! | `GenericWorkload` (beta) | off | **on** | PodGroup cycles for pods naming a PodGroup; off: they are scheduled one by one as plain pods, as kube does. On by default because the binder sends PodGroups only when the API server serves them, which takes the same gate there |
//! | `TopologyAwareWorkloadScheduling` (alpha) | off | off | on: a group's placements are the domains of its topology key (TopologyPlacement); off: kube's default PodGroup algorithm on every node, the key ignored |
//! | `PodGroupPreemptionPolicy` (alpha) | off | off | on: a group's preemption policy is its own field and every member must say the same; off: members must agree with each other and the group is `Never` when they say `Never` |
//! | `CompositePodGroup` (alpha) | off | off | on (with `TopologyAwareWorkloadScheduling`): a PodGroup naming a parent CompositePodGroup is scheduled with its whole hierarchy, top-down through the levels' topology keys (`podgroup/composite.rs`); off: the parent is not read |

use std::sync::RwLock;

/// The gates placement reads, by kube's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureGates {
    /// `GenericWorkload`.
    pub generic_workload: bool,
    /// `TopologyAwareWorkloadScheduling`.
    pub topology_aware_workload_scheduling: bool,
    /// `PodGroupPreemptionPolicy`.
    pub pod_group_preemption_policy: bool,
    /// `CompositePodGroup`.
    pub composite_pod_group: bool,
}

/// Why a `--feature-gates` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// Not `Name=true|false`.
    #[error("invalid feature gate setting {0:?}: want Name=true or Name=false")]
    Malformed(String),
    /// A gate kube 1.37 does not know (kube-scheduler refuses it the same way).
    #[error("unrecognized feature gate: {0}")]
    Unknown(String),
    /// A gate on whose dependencies are off (kube's feature-gate validation, same message).
    #[error("{0} is enabled, but depends on features that are disabled: [{1}]")]
    Dependency(String, String),
}

impl Default for FeatureGates {
    fn default() -> Self {
        Self::PLACEMENT_DEFAULT
    }
}

/// kube 1.37's gates that placement accepts but whose setting changes nothing it decides (they
/// gate API fields or other components, or features placement always has): accepted so a
/// cluster's `--feature-gates` value can be given unchanged.
const ACCEPTED: &[&str] = &[
    "DRAExtendedResource",
    "DRADeviceTaints",
    "DRADeviceTaintRules",
    "DRAConsumableCapacity",
    "DRAFractionalCapacityRange",
    "DRADeviceBindingConditions",
    "DRAResourceClaimDeviceStatus",
    "DRAPrioritizedList",
    "DRAAdminAccess",
    "DRAPartitionableDevices",
    "DRASchedulerFilterTimeout",
    "DynamicResourceAllocation",
    "PodLevelResources",
    "InPlacePodVerticalScaling",
    "SchedulerAsyncPreemption",
    "SchedulerQueueingHints",
    "SchedulerPopFromBackoffQ",
    "NodeDeclaredFeatures",
    "WorkloadWithJob",
    "DRAWorkloadResourceClaims",
];

impl FeatureGates {
    /// What placement runs with unless told: kube 1.37's defaults but `GenericWorkload` (see the
    /// module documentation).
    pub const PLACEMENT_DEFAULT: Self = Self {
        generic_workload: true,
        topology_aware_workload_scheduling: false,
        pod_group_preemption_policy: false,
        composite_pod_group: false,
    };

    /// `self` with kube's `--feature-gates` value applied (`A=true,B=false`; spaces around the
    /// parts are ignored; an empty value changes nothing).
    pub fn with(mut self, spec: &str) -> Result<Self, GateError> {
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part
                .split_once('=')
                .map(|(n, v)| (n.trim(), v.trim()))
                .ok_or_else(|| GateError::Malformed(part.to_string()))?;
            let on = match value.to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => return Err(GateError::Malformed(part.to_string())),
            };
            match name {
                "GenericWorkload" => self.generic_workload = on,
                "TopologyAwareWorkloadScheduling" => self.topology_aware_workload_scheduling = on,
                "PodGroupPreemptionPolicy" => self.pod_group_preemption_policy = on,
                "CompositePodGroup" => self.composite_pod_group = on,
                n if ACCEPTED.contains(&n) => {}
                n => return Err(GateError::Unknown(n.to_string())),
            }
        }
        // kube_features.go: CompositePodGroup depends on GenericWorkload and
        // TopologyAwareWorkloadScheduling.
        if self.composite_pod_group {
            let off: Vec<&str> = [
                ("GenericWorkload", self.generic_workload),
                (
                    "TopologyAwareWorkloadScheduling",
                    self.topology_aware_workload_scheduling,
                ),
            ]
            .into_iter()
            .filter(|(_, on)| !on)
            .map(|(n, _)| n)
            .collect();
            if !off.is_empty() {
                return Err(GateError::Dependency("CompositePodGroup".into(), off.join(" ")));
            }
        }
        Ok(self)
    }

    /// The gates as kube's flag value, every gate named.
    pub fn to_flag(self) -> String {
        format!(
            "GenericWorkload={},TopologyAwareWorkloadScheduling={},PodGroupPreemptionPolicy={},CompositePodGroup={}",
            self.generic_workload,
            self.topology_aware_workload_scheduling,
            self.pod_group_preemption_policy,
            self.composite_pod_group
        )
    }
}

static PROCESS: RwLock<FeatureGates> = RwLock::new(FeatureGates::PLACEMENT_DEFAULT);

/// Sets the gates the profiles made from now on take (kube's process-wide feature gates).
pub fn set_process_default(gates: FeatureGates) {
    *PROCESS.write().unwrap_or_else(|e| e.into_inner()) = gates;
}

/// The process's gates (see [`set_process_default`]).
pub fn process_default() -> FeatureGates {
    *PROCESS.read().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubes_flag_format_sets_the_gates_it_names_and_keeps_the_rest() {
        let g = FeatureGates::PLACEMENT_DEFAULT
            .with("TopologyAwareWorkloadScheduling=true, PodGroupPreemptionPolicy=True")
            .expect("valid");
        assert!(g.generic_workload && g.topology_aware_workload_scheduling && g.pod_group_preemption_policy);
        let off = g.with("GenericWorkload=false,DRAExtendedResource=true").expect("valid");
        assert!(!off.generic_workload && off.topology_aware_workload_scheduling);
        assert_eq!(
            FeatureGates::PLACEMENT_DEFAULT.with("").expect("empty"),
            FeatureGates::PLACEMENT_DEFAULT
        );
        let round = FeatureGates::PLACEMENT_DEFAULT.with(&g.to_flag()).expect("round trip");
        assert_eq!(round, g);
    }

    #[test]
    fn bad_values_are_refused_naming_the_part() {
        let d = FeatureGates::PLACEMENT_DEFAULT;
        assert_eq!(
            d.with("GenericWorkload"),
            Err(GateError::Malformed("GenericWorkload".into()))
        );
        assert_eq!(
            d.with("GenericWorkload=yes"),
            Err(GateError::Malformed("GenericWorkload=yes".into()))
        );
        assert_eq!(d.with("NoSuchGate=true"), Err(GateError::Unknown("NoSuchGate".into())));
        assert_eq!(
            d.with("CompositePodGroup=true").map_err(|e| e.to_string()),
            Err("CompositePodGroup is enabled, but depends on features that are disabled: [TopologyAwareWorkloadScheduling]".into())
        );
        assert!(d.with("CompositePodGroup=false").is_ok());
        let on = d
            .with("TopologyAwareWorkloadScheduling=true,CompositePodGroup=true")
            .expect("valid");
        assert!(on.composite_pod_group);
    }
}
