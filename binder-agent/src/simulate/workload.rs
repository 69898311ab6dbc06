//! The workload of a run: a synthetic cluster or a recorded one read from `kubectl get -o json`.

use std::collections::HashSet;

use placement_scheduler::grpc::convert;
use placement_scheduler::proto;
use placement_scheduler::synth::{self};

use crate::experiments::Owner;
use crate::projection::{self, PodInfo, StorageObject};

use super::config::*;

/// First creation timestamp given to synthetic pending pods (ms since the epoch).
pub(super) const SYNTHETIC_EPOCH_MS: i64 = 1_767_225_600_000;

pub(super) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A synthetic workload replica (`{app}-{hash}-{suffix}` with a `pod-template-hash` label) is
/// owned by the ReplicaSet `{app}-{hash}`, as a Deployment's pods are.
pub(super) fn synthetic_owner(pod: &proto::Pod) -> Option<Owner> {
    let hash = pod.labels.get("pod-template-hash")?;
    let end = pod.name.find(&format!("-{hash}-"))? + hash.len() + 1;
    Some(Owner {
        kind: "ReplicaSet".into(),
        name: pod.name[..end].to_string(),
    })
}

impl Workload {
    /// Builds a synthetic cluster; pending pods name `scheduler_name` and arrive interleaved.
    pub fn synthetic(config: &SyntheticCluster, scheduler_name: &str) -> Self {
        let snapshot = synth::cluster(&config.shape, config.seed);
        let bound = snapshot
            .pods
            .into_iter()
            .map(|spec| PodInfo {
                spec,
                scheduler_name: scheduler_name.to_string(),
                created_ms: SYNTHETIC_EPOCH_MS,
                terminal: false,
                deleting: false,
                ..PodInfo::default()
            })
            .collect();
        let n = config.pending;
        let replicas = config.replicas_per_workload.max(1);
        let from_workloads = if replicas > 1 {
            ((n as f64 * config.workload_share.clamp(0.0, 1.0)).round() as usize).min(n)
        } else {
            0
        };
        let from_topology =
            ((n as f64 * config.topology_share.clamp(0.0, 1.0)).round() as usize).min(n - from_workloads);
        let mut specs = synth::distinct_pods(n - from_workloads - from_topology, config.seed);
        specs.extend(synth::topology_pods(from_topology, 8, mix(config.seed ^ 0x70_b0)));
        let mut workload = 0u64;
        let mut left = from_workloads;
        while left > 0 {
            let count = left.min(replicas);
            let template_seed = mix(config.seed ^ 0x51_7e_a1).wrapping_add(workload);
            specs.extend(synth::replica_pods(count, template_seed));
            left -= count;
            workload += 1;
        }
        // Interleave distinct pods and replicas deterministically, as arrivals would.
        specs.sort_by_key(|p| xxhash_rust::xxh3::xxh3_64_with_seed(p.uid.as_bytes(), config.seed));
        let mut seen = HashSet::new();
        specs.retain(|p| seen.insert(p.uid.clone()));
        let pending = specs
            .into_iter()
            .enumerate()
            .map(|(i, spec)| PodInfo {
                owner: synthetic_owner(&spec),
                spec,
                scheduler_name: scheduler_name.to_string(),
                created_ms: SYNTHETIC_EPOCH_MS + i as i64,
                terminal: false,
                deleting: false,
                ..PodInfo::default()
            })
            .collect();
        Self {
            nodes: snapshot.nodes,
            bound,
            pending,
            ignored: 0,
            pdbs: Vec::new(),
            storage: Vec::new(),
        }
    }

    /// Reads `kubectl get nodes,pods -A -o json` output (a `v1 List` of Nodes and Pods; nested
    /// lists and `NodeList`/`PodList` are accepted too, and PodDisruptionBudgets,
    /// PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers and
    /// CSIStorageCapacities, as `kubectl get
    /// nodes,pods,pdb,pvc,pv,storageclass,csinode,csidriver,csistoragecapacity -A -o json` lists
    /// them). Bound pods count against their nodes; unbound pods naming one of `scheduler_names` (or every unbound pod with `all_pending`) are
    /// pending, in creation order.
    pub fn from_kubectl_json(text: &str, scheduler_names: &[String], all_pending: bool) -> Result<Self, SimError> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| SimError::Json(e.to_string()))?;
        let ours = scheduler_names.first().cloned().unwrap_or_default();
        let mut w = Self::default();
        w.collect(value, scheduler_names, &ours, all_pending)?;
        w.pending.sort_by_key(|p| p.created_ms);
        Ok(w)
    }

    fn collect(
        &mut self,
        value: serde_json::Value,
        names: &[String],
        ours: &str,
        all_pending: bool,
    ) -> Result<(), SimError> {
        let kind = value
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or_default()
            .to_string();
        match kind.as_str() {
            "Node" => {
                let node: k8s_openapi::api::core::v1::Node =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a Node: {e}")))?;
                self.nodes.push(projection::node_info(&node));
            }
            "PodDisruptionBudget" => {
                let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a PodDisruptionBudget: {e}")))?;
                self.pdbs.push(projection::pdb_info(&pdb));
            }
            "PersistentVolumeClaim" => {
                let pvc: k8s_openapi::api::core::v1::PersistentVolumeClaim = serde_json::from_value(value)
                    .map_err(|e| SimError::Json(format!("a PersistentVolumeClaim: {e}")))?;
                self.storage.push(StorageObject::Claim(projection::claim_info(&pvc)));
            }
            "PersistentVolume" => {
                let pv: k8s_openapi::api::core::v1::PersistentVolume =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a PersistentVolume: {e}")))?;
                self.storage.push(StorageObject::Volume(projection::volume_info(&pv)));
            }
            "StorageClass" => {
                let sc: k8s_openapi::api::storage::v1::StorageClass =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a StorageClass: {e}")))?;
                self.storage
                    .push(StorageObject::Class(projection::storage_class_info(&sc)));
            }
            "CSINode" => {
                let n: k8s_openapi::api::storage::v1::CSINode =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a CSINode: {e}")))?;
                self.storage.push(StorageObject::CsiNode(projection::csi_node_info(&n)));
            }
            "CSIDriver" => {
                let d: k8s_openapi::api::storage::v1::CSIDriver =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a CSIDriver: {e}")))?;
                self.storage
                    .push(StorageObject::CsiDriver(projection::csi_driver_info(&d)));
            }
            "CSIStorageCapacity" => {
                let c: k8s_openapi::api::storage::v1::CSIStorageCapacity =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a CSIStorageCapacity: {e}")))?;
                self.storage
                    .push(StorageObject::Capacity(projection::storage_capacity_info(&c)));
            }
            "Pod" => {
                let pod: k8s_openapi::api::core::v1::Pod =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a Pod: {e}")))?;
                let mut info = projection::pod_info(&pod);
                if info.spec.uid.is_empty() {
                    info.spec.uid = info.key();
                }
                if info.terminal {
                    self.ignored += 1;
                } else if info.node_name().is_some() {
                    self.bound.push(info);
                } else if info.deleting || !(all_pending || names.contains(&info.scheduler_name)) {
                    self.ignored += 1;
                } else {
                    info.scheduler_name = ours.to_string();
                    self.pending.push(info);
                }
            }
            _ => match value.get("items").and_then(|i| i.as_array()) {
                Some(items) => {
                    let list_kind = kind.strip_suffix("List").filter(|k| !k.is_empty()).map(str::to_string);
                    for mut item in items.clone() {
                        if let (Some(k), Some(obj)) = (&list_kind, item.as_object_mut()) {
                            obj.entry("kind")
                                .or_insert_with(|| serde_json::Value::String(k.clone()));
                        }
                        self.collect(item, names, ours, all_pending)?;
                    }
                }
                None => self.ignored += 1,
            },
        }
        Ok(())
    }

    /// Checks what the decision service would refuse in a snapshot: invalid nodes or bound pods,
    /// duplicate node names or pod uids.
    pub fn validate(&self) -> Result<(), SimError> {
        let mut names = HashSet::new();
        for (i, n) in self.nodes.iter().enumerate() {
            convert::node(&format!("nodes[{i}]"), n).map_err(|e| SimError::Invalid(e.to_string()))?;
            if !names.insert(n.name.as_str()) {
                return Err(SimError::Invalid(format!("duplicate node name {:?}", n.name)));
            }
        }
        let mut uids = HashSet::new();
        for (i, p) in self.bound.iter().enumerate() {
            convert::pod(&format!("bound[{i}]"), &p.spec).map_err(|e| SimError::Invalid(e.to_string()))?;
            if !uids.insert(p.spec.uid.as_str()) {
                return Err(SimError::Invalid(format!("duplicate pod uid {:?}", p.spec.uid)));
            }
        }
        for p in &self.pending {
            if !uids.insert(p.spec.uid.as_str()) {
                return Err(SimError::Invalid(format!("duplicate pod uid {:?}", p.spec.uid)));
            }
        }
        // As a full snapshot carries them: each valid, none twice.
        let mut snapshot = proto::Snapshot::default();
        for o in &self.storage {
            o.clone().push_into(&mut snapshot);
        }
        let parts = convert::storage("storage", &snapshot).map_err(|e| SimError::Invalid(e.to_string()))?;
        placement_scheduler::engine::volumes::StorageObjects::from_parts(parts)
            .map_err(|e| SimError::Invalid(format!("{} {:?} appears twice", e.kind, e.key)))?;
        Ok(())
    }
}
