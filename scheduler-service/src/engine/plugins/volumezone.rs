//! VolumeZone: a pod's bound volumes must be in the node's zone and region.
//!
//! Mirrors kube-scheduler's `pkg/scheduler/framework/plugins/volumezone/volume_zone.go`: PreFilter
//! (`getPVbyPod`: the zone and region labels of each bound claim's volume, `topologyLabels` beta
//! ones first, values split as `LabelZonesToSet` does; a claim with neither volume nor class, an
//! unknown class or an Immediate one without a volume rejects the pod), Filter (each label's value
//! on the node, beta or GA, among the volume's), with its reason [`ERR_REASON_CONFLICT`]. The
//! plugin has no score.

use crate::engine::model::NodeSpec;
use crate::engine::volumes::{not_found, BindingMode, PodVolume, StorageObjects, VolumeSource};

/// kube-scheduler's `ErrReasonConflict`.
pub const ERR_REASON_CONFLICT: &str = "node(s) had no available volume zone";
/// The zone and region labels the plugin compares, beta ones first (its `topologyLabels`).
const TOPOLOGY_LABELS: [&str; 4] = [
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

/// What PreFilter resolved for one pod.
#[derive(Debug, Clone, Default)]
pub struct PreFilterState {
    /// (label key, allowed values) of the bound volumes.
    zones: Vec<(&'static str, Vec<String>)>,
}

/// Kubernetes' `LabelZonesToSet`: a zone label's value lists zones separated by `__`.
fn zones_of(value: &str) -> Vec<String> {
    value
        .split("__")
        .filter(|z| !z.is_empty())
        .map(str::to_string)
        .collect()
}

impl PreFilterState {
    /// PreFilter: the zones of the pod's bound volumes, or the message rejecting the pod.
    pub fn pre_filter(storage: &StorageObjects, namespace: &str, volumes: &[PodVolume]) -> Result<Self, String> {
        let mut out = Self::default();
        for v in volumes {
            let VolumeSource::Claim {
                claim_name,
                ephemeral: false,
            } = &v.source
            else {
                continue;
            };
            let Some(c) = storage.claim(namespace, claim_name) else {
                return Err(not_found("persistentvolumeclaim", claim_name));
            };
            if c.volume_name.is_empty() {
                if c.class.is_empty() {
                    return Err("PersistentVolumeClaim had no pv name and storageClass name".to_string());
                }
                let Some(class) = storage.classes.get(&c.class) else {
                    return Err(not_found("storageclass.storage.k8s.io", &c.class));
                };
                match class.binding_mode {
                    None => return Err(format!("VolumeBindingMode not set for StorageClass {:?}", c.class)),
                    Some(BindingMode::WaitForFirstConsumer) => continue,
                    Some(BindingMode::Immediate) => return Err("PersistentVolume had no name".to_string()),
                }
            }
            let Some(pv) = storage.volumes.get(&c.volume_name) else {
                return Err(not_found("persistentvolume", &c.volume_name));
            };
            for key in TOPOLOGY_LABELS {
                if let Some(value) = pv.labels.get(key) {
                    out.zones.push((key, zones_of(value)));
                }
            }
        }
        Ok(out)
    }

    /// Filter: whether a bound volume's zone or region is not the node's (the node is rejected).
    pub fn conflicts(&self, node: &NodeSpec) -> bool {
        if self.zones.is_empty() || !TOPOLOGY_LABELS.iter().any(|k| node.labels.contains_key(*k)) {
            return false;
        }
        for (key, values) in &self.zones {
            let value = node.labels.get(*key).or_else(|| {
                let ga = match *key {
                    "failure-domain.beta.kubernetes.io/zone" => "topology.kubernetes.io/zone",
                    "failure-domain.beta.kubernetes.io/region" => "topology.kubernetes.io/region",
                    other => other,
                };
                node.labels.get(ga)
            });
            if value.is_none_or(|v| !values.contains(v)) {
                return true;
            }
        }
        false
    }
}

/// The plugin in the framework's contract: [`PreFilterState::conflicts`] on the node.
#[derive(Debug, Clone, Copy)]
pub struct VolumeZone;

impl crate::engine::plugins::contract::Filter for VolumeZone {
    /// The pod's PreFilter state (`None`: the plugin skips the pod).
    type In<'a> = Option<&'a PreFilterState>;
    type Rejection = ();
    #[inline(always)]
    fn filter(
        state: Option<&PreFilterState>,
        node: &crate::engine::snapshot::NodeView<'_>,
        reject: &mut impl FnMut(()),
    ) -> bool {
        let conflicts = state.is_some_and(|z| z.conflicts(&node.entry.spec));
        if conflicts {
            reject(());
        }
        !conflicts
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::plugins::volume_testing::*;

    #[test]
    fn volume_zone() {
        let zone = |z: &'static str| [("topology.kubernetes.io/zone", z)];
        let nodes = vec![
            node("n1", &zone("a")),
            node("n2", &zone("b")),
            node("n3", &[("failure-domain.beta.kubernetes.io/zone", "a")]),
        ];
        struct Case {
            name: &'static str,
            pv_labels: Vec<(&'static str, &'static str)>,
            want: Vec<&'static str>,
        }
        let cases = [
            Case {
                name: "GA zone label",
                pv_labels: vec![("topology.kubernetes.io/zone", "a")],
                want: vec!["n1"],
            },
            Case {
                name: "beta label on the volume matches the node's GA or beta label",
                pv_labels: vec![("failure-domain.beta.kubernetes.io/zone", "a")],
                want: vec!["n1", "n3"],
            },
            Case {
                name: "several zones separated by __",
                pv_labels: vec![("topology.kubernetes.io/zone", "a__b")],
                want: vec!["n1", "n2"],
            },
            Case {
                name: "no zone label",
                pv_labels: vec![],
                want: vec!["n1", "n2", "n3"],
            },
        ];
        for c in cases {
            let cluster = Cluster {
                nodes: nodes.clone(),
                bound: vec![],
                storage: StorageParts {
                    claims: vec![Claim {
                        class: String::new(),
                        ..bound_claim("data", "pv-z")
                    }],
                    volumes: vec![PersistentVolume {
                        labels: c
                            .pv_labels
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect(),
                        ..pv("pv-z", "", 10, None)
                    }],
                    classes: vec![],
                    csi_nodes: vec![],
                    ..Default::default()
                },
            };
            let p = pod("p", vec![claim_volume("data", "data")]);
            assert_eq!(feasible(&cluster, &p), c.want, "{}", c.name);
        }
        // A node without zone labels takes any volume (single-zone clusters); the message counts
        // the others.
        let cluster = Cluster {
            nodes: vec![node("n1", &zone("a")), node("plain", &[])],
            bound: vec![],
            storage: StorageParts {
                claims: vec![bound_claim("data", "pv-z")],
                volumes: vec![PersistentVolume {
                    labels: [("topology.kubernetes.io/zone".to_string(), "b".to_string())].into(),
                    ..pv("pv-z", "local", 10, None)
                }],
                classes: vec![local_wffc()],
                csi_nodes: vec![],
                ..Default::default()
            },
        };
        assert_eq!(
            feasible(&cluster, &pod("p", vec![claim_volume("data", "data")])),
            ["plain"]
        );
    }
}
