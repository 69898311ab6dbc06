//! VolumeBinding's PreFilter and Filter (kube-scheduler's `volumebinding/volume_binding.go`):
//! PreFilter resolves the pod's claims (`podHasPVCs`, then the binder's `GetPodVolumeClaims`:
//! bound, to bind later on the chosen node, or unbound of an Immediate class, which rejects the
//! pod with [`UNBOUND_IMMEDIATE`]); Filter asks the binder ([`super::binder`]) for the node.

use std::sync::Arc;

use super::binder::{Conflict, PodVolumeClaims};
use crate::engine::model::NodeSpec;
use crate::engine::volumes::{
    not_found, BatchVolumes, BindingMode, PodVolume, StorageObjects, VolumeChoice, VolumeSource,
};

/// VolumeBinding's PreFilter message for a pod with an unbound claim of an Immediate class.
pub const UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// What PreFilter resolved for one pod (kube's `stateData`).
#[derive(Debug, Clone, Default)]
pub struct PreFilterState {
    /// The pod's claims by kind.
    claims: PodVolumeClaims,
}

impl PreFilterState {
    /// PreFilter: the pod's claims as the binder reads them, or the message rejecting the pod
    /// (every node, unresolvably).
    pub fn pre_filter(
        storage: &StorageObjects,
        pod_uid: &str,
        namespace: &str,
        pod_name: &str,
        volumes: &[PodVolume],
        batch: &BatchVolumes,
    ) -> Result<Self, String> {
        let mut out = PodVolumeClaims::default();
        // podHasPVCs.
        let mut claims = Vec::new();
        for v in volumes {
            let VolumeSource::Claim { claim_name, ephemeral } = &v.source else {
                continue;
            };
            let Some(c) = storage.claim(namespace, claim_name) else {
                return Err(if *ephemeral {
                    format!(
                        "waiting for ephemeral volume controller to create the persistentvolumeclaim \"{claim_name}\""
                    )
                } else {
                    not_found("persistentvolumeclaim", claim_name)
                });
            };
            if c.lost {
                return Err(format!(
                    "persistentvolumeclaim \"{}\" bound to non-existent persistentvolume \"{}\"",
                    c.name, c.volume_name
                ));
            }
            if c.deleting {
                return Err(format!("persistentvolumeclaim \"{}\" is being deleted", c.name));
            }
            if *ephemeral && c.controller_uid != pod_uid {
                return Err(format!(
                    "PVC {namespace}/{} was not created for pod {namespace}/{pod_name} (pod is not owner)",
                    c.name
                ));
            }
            claims.push(Arc::clone(c));
        }
        // GetPodVolumeClaims.
        let mut immediate = false;
        for c in claims {
            if c.fully_bound() {
                out.bound.push(storage.volumes.get(&c.volume_name).cloned());
                continue;
            }
            let delay = match storage.classes.get(&c.class) {
                _ if c.class.is_empty() => false,
                None => false,
                Some(class) => match class.binding_mode {
                    None => return Err(format!("VolumeBindingMode not set for StorageClass {:?}", c.class)),
                    Some(mode) => mode == BindingMode::WaitForFirstConsumer,
                },
            };
            if !delay || !c.volume_name.is_empty() {
                immediate = true;
                continue;
            }
            let key = c.key();
            let chosen = match batch.choices.get(&key) {
                Some(VolumeChoice::Provision(node)) => Some(node.clone()),
                Some(VolumeChoice::Static(pv)) => {
                    out.prebound.insert(key, pv.clone());
                    None
                }
                None => None,
            };
            let chosen = chosen.or_else(|| c.selected_node_set.then(|| c.selected_node.clone()));
            if !out.by_class.contains_key(&c.class) {
                let pvs = storage
                    .volumes
                    .values()
                    .filter(|v| v.class == c.class)
                    .cloned()
                    .collect();
                out.by_class.insert(c.class.clone(), pvs);
            }
            out.delayed.push((c, chosen));
        }
        if immediate {
            return Err(UNBOUND_IMMEDIATE.to_string());
        }
        // byPVCSize: smallest request first.
        out.delayed.sort_by_key(|(c, _)| c.request);
        for (key, choice) in &batch.choices {
            if let VolumeChoice::Static(pv) = choice {
                if !out.prebound.contains_key(key) {
                    out.taken.insert(pv.clone());
                }
            }
        }
        Ok(Self { claims: out })
    }

    /// Filter: the binder's `FindPodVolumes` on the node: the reasons it is rejected, or the
    /// choices made for the pod's unbound WaitForFirstConsumer claims on it.
    pub fn filter(
        &self,
        storage: &StorageObjects,
        node: &NodeSpec,
    ) -> Result<Vec<(String, VolumeChoice)>, Vec<Conflict>> {
        self.claims.find_pod_volumes(storage, node)
    }

    /// Score: [`PodVolumeClaims::score`] on the node.
    pub fn score(&self, storage: &StorageObjects, node: &NodeSpec) -> i64 {
        self.claims.score(storage, node)
    }
}
