//! VolumeBinding's binder (kube-scheduler's `volumebinding/binder.go`): `FindPodVolumes` checks a
//! node for the pod's bound claims (`checkBoundClaims`), matches its unbound WaitForFirstConsumer
//! claims to available volumes (`findMatchingVolumes`, `FindMatchingVolume`) or to provisioning
//! (`checkVolumeProvisions`, with `hasEnoughCapacity` against CSIStorageCapacity), with its
//! `ConflictReason`s ([`ERR_REASON_NODE_CONFLICT`], [`ERR_REASON_BIND_CONFLICT`],
//! [`ERR_REASON_NOT_ENOUGH_SPACE`], [`ERR_REASON_PV_NOT_EXIST`]).

use std::sync::Arc;

use crate::engine::model::NodeSpec;
use crate::engine::volumes::{
    Claim, NodeLabels, PersistentVolume, StorageCapacity, StorageClass, StorageObjects, TopologyTerm, VolumeChoice,
    VolumePhase,
};

/// kube-scheduler's `ErrReasonNodeConflict`.
pub const ERR_REASON_NODE_CONFLICT: &str = "node(s) didn't match PersistentVolume's node affinity";
/// kube-scheduler's `ErrReasonBindConflict`.
pub const ERR_REASON_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
/// kube-scheduler's `ErrReasonNotEnoughSpace`.
pub const ERR_REASON_NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
/// kube-scheduler's `ErrReasonPVNotExist`.
pub const ERR_REASON_PV_NOT_EXIST: &str = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
/// The provisioner of classes that provision nothing (local volumes).
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// Why the binder rejects a node (kube's `ConflictReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Conflict {
    /// A bound claim's volume is not reachable from the node.
    NodeConflict,
    /// An unbound claim finds neither a volume nor provisioning on the node.
    BindConflict,
    /// No CSIStorageCapacity reachable from the node has room to provision.
    NotEnoughSpace,
    /// A bound claim's volume does not exist.
    PvNotExist,
}

impl Conflict {
    /// kube-scheduler's words for it.
    pub fn reason(self) -> &'static str {
        match self {
            Self::NodeConflict => ERR_REASON_NODE_CONFLICT,
            Self::BindConflict => ERR_REASON_BIND_CONFLICT,
            Self::NotEnoughSpace => ERR_REASON_NOT_ENOUGH_SPACE,
            Self::PvNotExist => ERR_REASON_PV_NOT_EXIST,
        }
    }
}

/// The node matches one of the terms: Kubernetes' `CheckNodeAffinity`, which matches the node's
/// labels only (a `metadata.name` field requirement matches no node there).
fn volume_reachable(v: &PersistentVolume, labels: &NodeLabels) -> bool {
    v.node_affinity.as_ref().is_none_or(|terms| {
        terms.iter().any(|t| {
            !(t.match_expressions.is_empty() && t.match_fields.is_empty())
                && t.match_fields.is_empty()
                && t.match_expressions
                    .iter()
                    .all(|r| r.matches(labels.get(&r.key).map(String::as_str)))
        })
    })
}

/// Kubernetes' `MatchTopologySelectorTerms`: no term matches everything, an empty term nothing.
fn topology_allows(terms: &[TopologyTerm], labels: &NodeLabels) -> bool {
    terms.is_empty()
        || terms.iter().any(|t| {
            !t.is_empty()
                && t.iter()
                    .all(|(k, values)| labels.get(k).is_some_and(|v| values.contains(v)))
        })
}

/// Kubernetes' `IsVolumeBoundToClaim`.
fn bound_to(v: &PersistentVolume, c: &Claim) -> bool {
    v.claim_ref
        .as_ref()
        .is_some_and(|r| r.name == c.name && r.namespace == c.namespace && (r.uid.is_empty() || r.uid == c.uid))
}

/// Kubernetes' `hasEnoughCapacity`: whether provisioning a volume for the claim with the class's
/// provisioner has room reachable from the node. Only a provisioner with a CSIDriver whose
/// `storageCapacity` is true is checked (and a claim with a storage request); then some
/// CSIStorageCapacity of the class must reach the node with room for the request. Sizes of
/// volumes chosen earlier are not subtracted, as kube-scheduler does not.
fn has_enough_capacity(storage: &StorageObjects, class: &StorageClass, claim: &Claim, labels: &NodeLabels) -> bool {
    node_capacity(storage, class, claim, labels).is_ok()
}

/// `hasEnoughCapacity` with the CSIStorageCapacity it found (kube's `ProvisionedPVC.NodeCapacity`):
/// `Ok(None)` when nothing is checked, `Err(())` when no capacity has room. kube takes the first
/// of its informer's list; placement the first by `namespace/name`.
fn node_capacity<'s>(
    storage: &'s StorageObjects,
    class: &StorageClass,
    claim: &Claim,
    labels: &NodeLabels,
) -> Result<Option<&'s StorageCapacity>, ()> {
    if !claim.request_set {
        return Ok(None);
    }
    if !storage
        .csi_drivers
        .get(&class.provisioner)
        .is_some_and(|d| d.storage_capacity)
    {
        return Ok(None);
    }
    let size = claim.request.value();
    storage
        .capacities
        .values()
        .find(|c| c.class == class.name && c.sufficient(size) && c.reaches(labels))
        .map(|c| Some(&**c))
        .ok_or(())
}

/// The utilization (0..=100) at which the default `shape` of VolumeBindingArgs scores 0; it
/// scores 100 (`MaxCustomPriorityScore` 10, scaled to MaxNodeScore) at utilization 0.
const MAX_UTILIZATION: i64 = 100;

/// kube's `buildScorerFunction` with the default shape (utilization 0 → 100, 100 → 0): a class's
/// score from its requested and capacity bytes.
fn class_score(requested: i64, capacity: i64) -> i64 {
    let utilization = if capacity == 0 || requested > capacity {
        MAX_UTILIZATION
    } else {
        // kube's int64 arithmetic; i128 where it would overflow.
        (i128::from(requested) * i128::from(MAX_UTILIZATION) / i128::from(capacity)) as i64
    };
    MAX_UTILIZATION - utilization
}

/// A pod's claims by kind (kube's `PodVolumeClaims`, from `GetPodVolumeClaims`), as VolumeBinding's
/// PreFilter resolves them.
#[derive(Debug, Clone, Default)]
pub struct PodVolumeClaims {
    /// Bound claims and their volume (`None` when it does not exist).
    pub(super) bound: Vec<Option<Arc<PersistentVolume>>>,
    /// Unbound WaitForFirstConsumer claims, smallest request first, each with the node chosen
    /// for it already (its selected node, or a batch's provisioning choice).
    pub(super) delayed: Vec<(Arc<Claim>, Option<String>)>,
    /// Volumes of the delayed claims' classes.
    pub(super) by_class: std::collections::HashMap<String, Vec<Arc<PersistentVolume>>>,
    /// Volumes the batch bound to other claims.
    pub(super) taken: std::collections::HashSet<String>,
    /// Volumes the batch bound to each of this pod's claims (by claim key).
    pub(super) prebound: std::collections::HashMap<String, String>,
}

impl PodVolumeClaims {
    /// Kubernetes' `FindPodVolumes`: the reasons the node is rejected, or the choices made for the pod's unbound WaitForFirstConsumer claims on it.
    pub fn find_pod_volumes(
        &self,
        storage: &StorageObjects,
        node: &NodeSpec,
    ) -> Result<Vec<(String, VolumeChoice)>, Vec<Conflict>> {
        let (mut bound_ok, mut pvs_found, mut unbound_ok, mut space_ok) = (true, true, true, true);
        let mut choices = Vec::new();
        'find: {
            // checkBoundClaims: stops at the first missing or unreachable volume.
            for pv in &self.bound {
                match pv {
                    None => {
                        pvs_found = false;
                        break;
                    }
                    Some(pv) if !volume_reachable(pv, &node.labels) => {
                        bound_ok = false;
                        break;
                    }
                    Some(_) => {}
                }
            }
            if self.delayed.is_empty() {
                break 'find;
            }
            let mut to_match = Vec::new();
            let mut to_provision = Vec::new();
            for (c, chosen) in &self.delayed {
                match chosen {
                    Some(n) if *n != node.name => {
                        unbound_ok = false;
                        break 'find;
                    }
                    Some(_) => to_provision.push(c),
                    None => to_match.push(c),
                }
            }
            // findMatchingVolumes.
            let mut chosen_here: std::collections::HashSet<&str> = std::collections::HashSet::new();
            for c in to_match {
                match self.matching_volume(c, node, &chosen_here) {
                    Some(pv) => {
                        chosen_here.insert(&pv.name);
                        choices.push((c.key(), VolumeChoice::Static(pv.name.clone())));
                    }
                    None => {
                        unbound_ok = false;
                        to_provision.push(c);
                    }
                }
            }
            // checkVolumeProvisions.
            if !to_provision.is_empty() {
                unbound_ok = true;
                for c in to_provision {
                    let class = storage.classes.get(&c.class);
                    let provisions = class.filter(|class| {
                        !class.provisioner.is_empty()
                            && class.provisioner != NO_PROVISIONER
                            && topology_allows(&class.allowed_topologies, &node.labels)
                    });
                    let Some(class) = provisions else {
                        unbound_ok = false;
                        choices.retain(|(_, ch)| matches!(ch, VolumeChoice::Static(_)));
                        break;
                    };
                    if !has_enough_capacity(storage, class, c, &node.labels) {
                        space_ok = false;
                        choices.retain(|(_, ch)| matches!(ch, VolumeChoice::Static(_)));
                        break;
                    }
                    choices.push((c.key(), VolumeChoice::Provision(node.name.clone())));
                }
            }
        }
        let mut reasons = Vec::new();
        if !bound_ok {
            reasons.push(Conflict::NodeConflict);
        }
        if !unbound_ok {
            reasons.push(Conflict::BindConflict);
        }
        if !space_ok {
            reasons.push(Conflict::NotEnoughSpace);
        }
        if !pvs_found {
            reasons.push(Conflict::PvNotExist);
        }
        if reasons.is_empty() {
            Ok(choices)
        } else {
            Err(reasons)
        }
    }

    /// kube-scheduler 1.37's `VolumeBinding.Score` (StorageCapacityScoring, beta and on): on a node
    /// the filter kept, the static bindings' requested and volume capacity bytes by the volume's
    /// class; without static bindings, the provisioned claims' requested bytes against the
    /// CSIStorageCapacity found for them, by the claim's class (claims of a driver without
    /// capacity tracking count nothing); each class scored by its utilization on the default
    /// shape, the node's score their rounded mean (0 without any).
    pub fn score(&self, storage: &StorageObjects, node: &NodeSpec) -> i64 {
        let Ok(choices) = self.find_pod_volumes(storage, node) else {
            return 0;
        };
        let claim = |key: &str| self.delayed.iter().map(|(c, _)| c).find(|c| c.key() == key);
        let mut by_class: std::collections::BTreeMap<&str, (i64, i64)> = std::collections::BTreeMap::new();
        let statics: Vec<(&String, &String)> = choices
            .iter()
            .filter_map(|(key, ch)| match ch {
                VolumeChoice::Static(pv) => Some((key, pv)),
                VolumeChoice::Provision(_) => None,
            })
            .collect();
        if !statics.is_empty() {
            for (key, pv) in statics {
                let (Some(c), Some(pv)) = (claim(key), storage.volumes.get(pv)) else {
                    continue;
                };
                let e = by_class.entry(pv.class.as_str()).or_default();
                e.0 = e.0.saturating_add(c.request.value());
                e.1 = e.1.saturating_add(pv.capacity.value());
            }
        } else {
            for (key, _) in choices
                .iter()
                .filter(|(_, ch)| matches!(ch, VolumeChoice::Provision(_)))
            {
                let Some(c) = claim(key) else { continue };
                let Some(class) = storage.classes.get(&c.class) else {
                    continue;
                };
                let Ok(Some(capacity)) = node_capacity(storage, class, c, &node.labels) else {
                    continue;
                };
                let e = by_class.entry(c.class.as_str()).or_default();
                // Not a sum: two claims of one class on a node have that node's one capacity.
                e.1 = capacity.capacity.map_or(0, |q| q.value());
                e.0 = e.0.saturating_add(c.request.value());
            }
        }
        if by_class.is_empty() {
            return 0;
        }
        let sum: i64 = by_class.values().map(|&(r, c)| class_score(r, c)).sum();
        (sum as f64 / by_class.len() as f64).round() as i64
    }

    /// Kubernetes' `FindMatchingVolume` on the scheduler's path: a volume pre-bound to the claim
    /// (if reachable), else the smallest available one of its class that fits, matches its
    /// selector, access modes and volume mode, and is reachable from the node.
    fn matching_volume<'s>(
        &'s self,
        c: &Claim,
        node: &NodeSpec,
        chosen_here: &std::collections::HashSet<&str>,
    ) -> Option<&'s Arc<PersistentVolume>> {
        let prebound = self.prebound.get(&c.key());
        let mut best: Option<&Arc<PersistentVolume>> = None;
        for v in self.by_class.get(&c.class).into_iter().flatten() {
            if chosen_here.contains(v.name.as_str()) || (self.taken.contains(&v.name) && prebound != Some(&v.name)) {
                continue;
            }
            let is_bound_to = bound_to(v, c) || prebound == Some(&v.name);
            if v.claim_ref.is_some() && !is_bound_to {
                continue;
            }
            if v.capacity < c.request || v.block != c.block {
                continue;
            }
            if c.volume_attributes_class != v.volume_attributes_class || v.deleting {
                continue;
            }
            let reachable = volume_reachable(v, &node.labels);
            if is_bound_to {
                return reachable.then_some(v);
            }
            if v.phase != VolumePhase::Available
                || c.selector.as_ref().is_some_and(|s| !s.matches(&v.labels))
                || v.class != c.class
                || !reachable
                || !c.access_modes.iter().all(|m| v.access_modes.contains(m))
            {
                continue;
            }
            if best.is_none_or(|b| b.capacity > v.capacity) {
                best = Some(v);
            }
        }
        best
    }
}
