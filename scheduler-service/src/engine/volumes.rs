//! The storage objects the volume plugins read (`plugins::{volumerestrictions,
//! nodevolumelimits, volumebinding, volumezone}`): PersistentVolumeClaims, PersistentVolumes,
//! StorageClasses, CSINodes, CSIDrivers and CSIStorageCapacities, validated and kept in a snapshot
//! as copy-on-write maps that deltas change, and what a batch chose for its claims.

use std::sync::Arc;

use super::model::{labels_bytes, string_bytes, LabelSelector, Labels, SelectorTerm};
use super::quantity::Quantity;

pub use super::model::{PodVolume, VolumeSource};

/// A PersistentVolume access mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AccessMode {
    /// `ReadWriteOnce`.
    ReadWriteOnce,
    /// `ReadOnlyMany`.
    ReadOnlyMany,
    /// `ReadWriteMany`.
    ReadWriteMany,
    /// `ReadWriteOncePod`.
    ReadWriteOncePod,
}

impl AccessMode {
    /// The mode of its API name, if it is one.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ReadWriteOnce" => Self::ReadWriteOnce,
            "ReadOnlyMany" => Self::ReadOnlyMany,
            "ReadWriteMany" => Self::ReadWriteMany,
            "ReadWriteOncePod" => Self::ReadWriteOncePod,
            _ => return None,
        })
    }
}

/// A PersistentVolumeClaim.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Claim {
    /// metadata.namespace.
    pub namespace: String,
    /// metadata.name.
    pub name: String,
    /// metadata.uid.
    pub uid: String,
    /// The claim's class (the beta annotation, else spec.storageClassName; "" for none).
    pub class: String,
    /// spec.volumeName ("" when none).
    pub volume_name: String,
    /// The annotation `pv.kubernetes.io/bind-completed` is present.
    pub bind_completed: bool,
    /// spec.accessModes.
    pub access_modes: Vec<AccessMode>,
    /// spec.resources.requests["storage"] (zero when none).
    pub request: Quantity,
    /// spec.resources.requests["storage"] is present (storage capacity is checked only then).
    pub request_set: bool,
    /// spec.selector.
    pub selector: Option<LabelSelector>,
    /// spec.volumeMode is `Block`.
    pub block: bool,
    /// status.phase is `Lost`.
    pub lost: bool,
    /// metadata.deletionTimestamp is set.
    pub deleting: bool,
    /// The annotation `volume.kubernetes.io/selected-node` ("" when absent or empty).
    pub selected_node: String,
    /// The annotation is present (kube-scheduler tests the key: an empty value fits no node).
    pub selected_node_set: bool,
    /// spec.volumeAttributesClassName.
    pub volume_attributes_class: String,
    /// The uid of the controller owner reference ("" when none).
    pub controller_uid: String,
}

impl Claim {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        claim_key(&self.namespace, &self.name)
    }

    /// Kubernetes' `isPVCFullyBound`: a volume name and the bind-completed annotation.
    pub fn fully_bound(&self) -> bool {
        !self.volume_name.is_empty() && self.bind_completed
    }

    /// Approximate bytes, inline and heap.
    pub fn approx_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + [
                &self.namespace,
                &self.name,
                &self.uid,
                &self.class,
                &self.volume_name,
                &self.selected_node,
                &self.volume_attributes_class,
                &self.controller_uid,
            ]
            .iter()
            .map(|s| string_bytes(s))
            .sum::<usize>()
            + self.access_modes.len()
            + self.selector.as_ref().map_or(0, LabelSelector::approx_bytes)
    }
}

/// `namespace/name` of a claim, the key deltas remove claims by.
pub fn claim_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// A PersistentVolume's spec.claimRef.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClaimRef {
    /// namespace.
    pub namespace: String,
    /// name.
    pub name: String,
    /// uid ("" when not set).
    pub uid: String,
}

/// A PersistentVolume's status.phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VolumePhase {
    /// Not reported ("").
    #[default]
    Unknown,
    /// `Pending`.
    Pending,
    /// `Available`.
    Available,
    /// `Bound`.
    Bound,
    /// `Released`.
    Released,
    /// `Failed`.
    Failed,
}

/// A PersistentVolume.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PersistentVolume {
    /// metadata.name.
    pub name: String,
    /// metadata.labels.
    pub labels: Labels,
    /// The volume's class (the beta annotation, else spec.storageClassName).
    pub class: String,
    /// spec.capacity["storage"].
    pub capacity: Quantity,
    /// spec.accessModes.
    pub access_modes: Vec<AccessMode>,
    /// spec.volumeMode is `Block`.
    pub block: bool,
    /// spec.nodeAffinity.required terms (ORed); `None` for no requirement.
    pub node_affinity: Option<Vec<SelectorTerm>>,
    /// spec.claimRef.
    pub claim_ref: Option<ClaimRef>,
    /// status.phase.
    pub phase: VolumePhase,
    /// metadata.deletionTimestamp is set.
    pub deleting: bool,
    /// spec.csi (driver, volumeHandle), for a CSI volume.
    pub csi: Option<(String, String)>,
    /// spec.volumeAttributesClassName.
    pub volume_attributes_class: String,
}

impl PersistentVolume {
    /// Approximate bytes, inline and heap.
    pub fn approx_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + string_bytes(&self.name)
            + labels_bytes(&self.labels)
            + string_bytes(&self.class)
            + self.access_modes.len()
            + self.node_affinity.as_ref().map_or(0, |terms| {
                terms
                    .iter()
                    .flat_map(|t| t.match_expressions.iter().chain(&t.match_fields))
                    .map(|r| 64 + string_bytes(&r.key))
                    .sum()
            })
            + self.claim_ref.as_ref().map_or(0, |c| {
                std::mem::size_of::<ClaimRef>()
                    + string_bytes(&c.namespace)
                    + string_bytes(&c.name)
                    + string_bytes(&c.uid)
            })
            + self.csi.as_ref().map_or(0, |(d, h)| string_bytes(d) + string_bytes(h))
            + string_bytes(&self.volume_attributes_class)
    }
}

/// A StorageClass's volumeBindingMode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingMode {
    /// `Immediate`: the PV controller binds or provisions as soon as the claim exists.
    Immediate,
    /// `WaitForFirstConsumer`: the scheduler picks the node first.
    WaitForFirstConsumer,
}

/// One term of a StorageClass's allowedTopologies: every (key, values) must match.
pub type TopologyTerm = Vec<(String, Vec<String>)>;

/// A StorageClass.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StorageClass {
    /// metadata.name.
    pub name: String,
    /// provisioner.
    pub provisioner: String,
    /// volumeBindingMode; `None` when unset.
    pub binding_mode: Option<BindingMode>,
    /// allowedTopologies.
    pub allowed_topologies: Vec<TopologyTerm>,
}

impl StorageClass {
    /// Approximate bytes, inline and heap.
    pub fn approx_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + string_bytes(&self.name)
            + string_bytes(&self.provisioner)
            + self
                .allowed_topologies
                .iter()
                .flatten()
                .map(|(k, vs)| 48 + string_bytes(k) + vs.iter().map(|v| string_bytes(v)).sum::<usize>())
                .sum::<usize>()
    }
}

/// A CSINode: the attach limit of each driver on one node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CsiNode {
    /// metadata.name (the node's name).
    pub name: String,
    /// (driver name, allocatable.count) of each driver; `None` for no limit.
    pub drivers: Vec<(String, Option<i32>)>,
}

impl CsiNode {
    /// Approximate bytes, inline and heap.
    pub fn approx_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + string_bytes(&self.name)
            + self.drivers.iter().map(|(d, _)| 32 + string_bytes(d)).sum::<usize>()
    }
}

/// A CSIDriver: whether VolumeBinding checks storage capacity for its provisioning.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CsiDriver {
    /// metadata.name (a StorageClass's provisioner).
    pub name: String,
    /// spec.storageCapacity (unset is false).
    pub storage_capacity: bool,
    /// spec.preventPodSchedulingIfMissing (unset is false).
    pub prevent_pod_scheduling_if_missing: bool,
}

impl CsiDriver {
    /// Approximate bytes, inline and heap.
    pub fn approx_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + string_bytes(&self.name)
    }
}

/// A CSIStorageCapacity: the room a driver reports for one class in one part of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StorageCapacity {
    /// metadata.namespace.
    pub namespace: String,
    /// metadata.name.
    pub name: String,
    /// storageClassName.
    pub class: String,
    /// nodeTopology; `None` gives no node access.
    pub node_topology: Option<super::pdb::LabelSelector>,
    /// capacity; `None` when unset.
    pub capacity: Option<Quantity>,
    /// maximumVolumeSize; `None` when unset.
    pub maximum_volume_size: Option<Quantity>,
}

impl StorageCapacity {
    /// `namespace/name`, the key deltas remove capacities by.
    pub fn key(&self) -> String {
        claim_key(&self.namespace, &self.name)
    }

    /// Approximate bytes, inline and heap.
    pub fn approx_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + string_bytes(&self.namespace)
            + string_bytes(&self.name)
            + string_bytes(&self.class)
            + self.node_topology.as_ref().map_or(0, |t| {
                t.match_labels
                    .iter()
                    .map(|(k, v)| 48 + string_bytes(k) + string_bytes(v))
                    .sum::<usize>()
                    + t.match_expressions
                        .iter()
                        .map(|r| 64 + string_bytes(&r.key))
                        .sum::<usize>()
            })
    }

    /// Kubernetes' `capacitySufficient`: maximumVolumeSize when set, else capacity, at least
    /// the size (an unset limit has room for nothing).
    pub fn sufficient(&self, size: i64) -> bool {
        self.maximum_volume_size
            .or(self.capacity)
            .is_some_and(|limit| limit.value() >= size)
    }

    /// Kubernetes' `nodeHasAccess`: the node's labels match nodeTopology (unset: no access).
    pub fn reaches(&self, labels: &NodeLabels) -> bool {
        self.node_topology.as_ref().is_some_and(|t| {
            t.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
                && t.match_expressions
                    .iter()
                    .all(|r| r.matches(labels.get(&r.key).map(String::as_str)))
        })
    }
}

/// The storage objects of a snapshot.
#[derive(Debug, Clone, Default)]
pub struct StorageObjects {
    /// PersistentVolumeClaims by `namespace/name`.
    pub claims: imbl::OrdMap<String, Arc<Claim>>,
    /// PersistentVolumes by name.
    pub volumes: imbl::OrdMap<String, Arc<PersistentVolume>>,
    /// StorageClasses by name.
    pub classes: imbl::OrdMap<String, Arc<StorageClass>>,
    /// CSINodes by name.
    pub csi_nodes: imbl::OrdMap<String, Arc<CsiNode>>,
    /// CSIDrivers by name.
    pub csi_drivers: imbl::OrdMap<String, Arc<CsiDriver>>,
    /// CSIStorageCapacities by `namespace/name`.
    pub capacities: imbl::OrdMap<String, Arc<StorageCapacity>>,
    /// Approximate bytes of all of them.
    pub approx_bytes: usize,
}

/// The storage objects of a full snapshot, validated.
#[derive(Debug, Clone, Default)]
pub struct StorageParts {
    /// PersistentVolumeClaims.
    pub claims: Vec<Claim>,
    /// PersistentVolumes.
    pub volumes: Vec<PersistentVolume>,
    /// StorageClasses.
    pub classes: Vec<StorageClass>,
    /// CSINodes.
    pub csi_nodes: Vec<CsiNode>,
    /// CSIDrivers.
    pub csi_drivers: Vec<CsiDriver>,
    /// CSIStorageCapacities.
    pub capacities: Vec<StorageCapacity>,
}

impl StorageParts {
    /// Whether there is no object.
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
            && self.volumes.is_empty()
            && self.classes.is_empty()
            && self.csi_nodes.is_empty()
            && self.csi_drivers.is_empty()
            && self.capacities.is_empty()
    }
}

/// A change to the storage objects. Removals apply before upserts; unknown keys are ignored.
#[derive(Debug, Clone, Default)]
pub struct StorageDelta {
    /// Claims added or replaced by namespace and name.
    pub upsert_claims: Vec<Claim>,
    /// Claims removed, as `namespace/name`.
    pub remove_claims: Vec<String>,
    /// PersistentVolumes added or replaced by name.
    pub upsert_volumes: Vec<PersistentVolume>,
    /// Names of PersistentVolumes removed.
    pub remove_volumes: Vec<String>,
    /// StorageClasses added or replaced by name.
    pub upsert_classes: Vec<StorageClass>,
    /// Names of StorageClasses removed.
    pub remove_classes: Vec<String>,
    /// CSINodes added or replaced by name.
    pub upsert_csi_nodes: Vec<CsiNode>,
    /// Names of CSINodes removed.
    pub remove_csi_nodes: Vec<String>,
    /// CSIDrivers added or replaced by name.
    pub upsert_csi_drivers: Vec<CsiDriver>,
    /// Names of CSIDrivers removed.
    pub remove_csi_drivers: Vec<String>,
    /// CSIStorageCapacities added or replaced by namespace and name.
    pub upsert_capacities: Vec<StorageCapacity>,
    /// CSIStorageCapacities removed, as `namespace/name`.
    pub remove_capacities: Vec<String>,
}

impl StorageDelta {
    /// Whether the delta changes nothing.
    pub fn is_empty(&self) -> bool {
        self.upsert_claims.is_empty()
            && self.remove_claims.is_empty()
            && self.upsert_volumes.is_empty()
            && self.remove_volumes.is_empty()
            && self.upsert_classes.is_empty()
            && self.remove_classes.is_empty()
            && self.upsert_csi_nodes.is_empty()
            && self.remove_csi_nodes.is_empty()
            && self.upsert_csi_drivers.is_empty()
            && self.remove_csi_drivers.is_empty()
            && self.upsert_capacities.is_empty()
            && self.remove_capacities.is_empty()
    }
}

/// Two objects of one kind with the same key in one list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{list}[{index}]: duplicate {kind} {key:?}")]
pub struct DuplicateStorageObject {
    /// The list's field name (e.g. `persistent_volume_claims`).
    pub list: &'static str,
    /// Index of the second occurrence.
    pub index: usize,
    /// The kind's name.
    pub kind: &'static str,
    /// Its key.
    pub key: String,
}

pub(super) fn upsert<T>(
    map: &mut imbl::OrdMap<String, Arc<T>>,
    bytes: &mut usize,
    items: Vec<T>,
    key: impl Fn(&T) -> String,
    size: impl Fn(&T) -> usize,
    list: &'static str,
    kind: &'static str,
) -> Result<(), DuplicateStorageObject> {
    let mut seen = std::collections::HashSet::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let k = key(&item);
        if !seen.insert(k.clone()) {
            return Err(DuplicateStorageObject {
                list,
                index,
                kind,
                key: k,
            });
        }
        *bytes += size(&item) + k.len() + 32;
        if let Some(old) = map.insert(k.clone(), Arc::new(item)) {
            *bytes = bytes.saturating_sub(size(&old) + k.len() + 32);
        }
    }
    Ok(())
}

pub(super) fn remove<T>(
    map: &mut imbl::OrdMap<String, Arc<T>>,
    bytes: &mut usize,
    keys: &[String],
    size: impl Fn(&T) -> usize,
) {
    for k in keys {
        if let Some(old) = map.remove(k) {
            *bytes = bytes.saturating_sub(size(&old) + k.len() + 32);
        }
    }
}

impl StorageObjects {
    /// Whether the snapshot holds no storage object.
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
            && self.volumes.is_empty()
            && self.classes.is_empty()
            && self.csi_nodes.is_empty()
            && self.csi_drivers.is_empty()
            && self.capacities.is_empty()
    }

    /// Applies a delta; `full` when it carries a full snapshot's objects as upserts (errors then
    /// name the snapshot's lists rather than the delta's).
    pub fn apply(&mut self, d: StorageDelta, full: bool) -> Result<(), DuplicateStorageObject> {
        let b = &mut self.approx_bytes;
        remove(&mut self.claims, b, &d.remove_claims, Claim::approx_bytes);
        remove(&mut self.volumes, b, &d.remove_volumes, PersistentVolume::approx_bytes);
        remove(&mut self.classes, b, &d.remove_classes, StorageClass::approx_bytes);
        remove(&mut self.csi_nodes, b, &d.remove_csi_nodes, CsiNode::approx_bytes);
        remove(&mut self.csi_drivers, b, &d.remove_csi_drivers, CsiDriver::approx_bytes);
        remove(
            &mut self.capacities,
            b,
            &d.remove_capacities,
            StorageCapacity::approx_bytes,
        );
        let name = |full_name: &'static str, delta_name: &'static str| if full { full_name } else { delta_name };
        upsert(
            &mut self.claims,
            b,
            d.upsert_claims,
            Claim::key,
            Claim::approx_bytes,
            name("persistent_volume_claims", "upsert_persistent_volume_claims"),
            "PersistentVolumeClaim",
        )?;
        upsert(
            &mut self.volumes,
            b,
            d.upsert_volumes,
            |v| v.name.clone(),
            PersistentVolume::approx_bytes,
            name("persistent_volumes", "upsert_persistent_volumes"),
            "PersistentVolume",
        )?;
        upsert(
            &mut self.classes,
            b,
            d.upsert_classes,
            |c| c.name.clone(),
            StorageClass::approx_bytes,
            name("storage_classes", "upsert_storage_classes"),
            "StorageClass",
        )?;
        upsert(
            &mut self.csi_nodes,
            b,
            d.upsert_csi_nodes,
            |c| c.name.clone(),
            CsiNode::approx_bytes,
            name("csi_nodes", "upsert_csi_nodes"),
            "CSINode",
        )?;
        upsert(
            &mut self.csi_drivers,
            b,
            d.upsert_csi_drivers,
            |c| c.name.clone(),
            CsiDriver::approx_bytes,
            name("csi_drivers", "upsert_csi_drivers"),
            "CSIDriver",
        )?;
        upsert(
            &mut self.capacities,
            b,
            d.upsert_capacities,
            StorageCapacity::key,
            StorageCapacity::approx_bytes,
            name("csi_storage_capacities", "upsert_csi_storage_capacities"),
            "CSIStorageCapacity",
        )?;
        Ok(())
    }

    /// The objects of a full snapshot.
    pub fn from_parts(parts: StorageParts) -> Result<Self, DuplicateStorageObject> {
        let mut out = Self::default();
        out.apply(
            StorageDelta {
                upsert_claims: parts.claims,
                upsert_volumes: parts.volumes,
                upsert_classes: parts.classes,
                upsert_csi_nodes: parts.csi_nodes,
                upsert_csi_drivers: parts.csi_drivers,
                upsert_capacities: parts.capacities,
                ..Default::default()
            },
            true,
        )?;
        Ok(out)
    }

    /// The claim `namespace/name`.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&Arc<Claim>> {
        self.claims.get(&claim_key(namespace, name))
    }
}

/// A node's labels.
pub(crate) type NodeLabels = std::collections::HashMap<String, String>;

/// Which volume filters a policy runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VolumeFilters {
    /// VolumeRestrictions.
    pub restrictions: bool,
    /// NodeVolumeLimits.
    pub limits: bool,
    /// VolumeBinding.
    pub binding: bool,
    /// VolumeZone.
    pub zone: bool,
}

impl VolumeFilters {
    /// Whether any runs.
    pub fn any(self) -> bool {
        self.restrictions || self.limits || self.binding || self.zone
    }
}

/// What a batch chose for an unbound WaitForFirstConsumer claim, as kube-scheduler's assume
/// cache records it for the pods after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeChoice {
    /// Bound to this existing volume.
    Static(String),
    /// Provisioned on this node (the claim's selected node).
    Provision(String),
}

/// The claims of the pods a batch placed so far and the choices made for them (the nodes count
/// the placed pods' volumes themselves, in their usage).
#[derive(Debug, Clone, Default)]
pub struct BatchVolumes {
    /// Choices by claim key (`namespace/name`).
    pub choices: std::collections::HashMap<String, VolumeChoice>,
    /// Claim keys used by placed pods (for ReadWriteOncePod).
    pub claims_in_use: std::collections::HashSet<String>,
}

impl BatchVolumes {
    /// Records a placed pod's claims and the choices made for them.
    pub fn record(&mut self, namespace: &str, volumes: &[PodVolume], choices: Vec<(String, VolumeChoice)>) {
        for v in volumes {
            if let Some(c) = v.claim_name() {
                self.claims_in_use.insert(claim_key(namespace, c));
            }
        }
        self.choices.extend(choices);
    }
}

impl StorageObjects {
    /// What kube-scheduler's `AssumePodVolumes` puts in its assume caches for `choices` (claim
    /// key → choice): each chosen volume with its `claimRef` set to the claim (uid included), each
    /// claim to provision with its selected node set. Choices naming a claim or volume that is
    /// not here are skipped (nothing to assume on); a volume already referring to its claim and a
    /// claim already selecting its node are left as they are.
    pub fn assumed<'c>(&self, choices: impl IntoIterator<Item = &'c (String, VolumeChoice)>) -> StorageDelta {
        let mut delta = StorageDelta::default();
        for (key, choice) in choices {
            let Some(claim) = self.claims.get(key) else { continue };
            match choice {
                VolumeChoice::Static(pv) => {
                    let Some(v) = self.volumes.get(pv) else { continue };
                    let claim_ref = ClaimRef {
                        namespace: claim.namespace.clone(),
                        name: claim.name.clone(),
                        uid: claim.uid.clone(),
                    };
                    if v.claim_ref.as_ref() != Some(&claim_ref) {
                        let mut v = PersistentVolume::clone(v);
                        v.claim_ref = Some(claim_ref);
                        delta.upsert_volumes.retain(|o| o.name != v.name);
                        delta.upsert_volumes.push(v);
                    }
                }
                VolumeChoice::Provision(node) => {
                    if claim.selected_node != *node {
                        let mut c = Claim::clone(claim);
                        c.selected_node = node.clone();
                        c.selected_node_set = true;
                        delta.upsert_claims.retain(|o| o.key() != c.key());
                        delta.upsert_claims.push(c);
                    }
                }
            }
        }
        delta
    }
}

/// Per node name, how many volumes of the bound pods there refer to a claim (by its key).
pub type ClaimUsers<'a> = dyn Fn(&str) -> Vec<(Arc<str>, usize)> + 'a;

/// The message of a PreFilter that finds no object `name` of kind `resource`.
pub(crate) fn not_found(resource: &str, name: &str) -> String {
    format!("{resource} \"{name}\" not found")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(ns: &str, name: &str) -> Claim {
        Claim {
            namespace: ns.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn deltas_replace_and_remove_by_key_and_duplicates_are_refused() {
        let mut s = StorageObjects::from_parts(StorageParts {
            claims: vec![claim("a", "x"), claim("b", "x")],
            classes: vec![StorageClass {
                name: "fast".into(),
                ..Default::default()
            }],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(s.claims.len(), 2);
        let before = s.approx_bytes;
        assert!(before > 0);
        let mut bound = claim("a", "x");
        bound.volume_name = "pv-1".into();
        s.apply(
            StorageDelta {
                upsert_claims: vec![bound],
                remove_claims: vec!["b/x".into(), "nowhere/y".into()],
                remove_classes: vec!["fast".into()],
                ..Default::default()
            },
            false,
        )
        .unwrap();
        assert_eq!(s.claims.len(), 1);
        assert_eq!(s.claim("a", "x").unwrap().volume_name, "pv-1");
        assert!(s.classes.is_empty());
        assert!(s.approx_bytes < before);
        let err = s
            .apply(
                StorageDelta {
                    upsert_claims: vec![claim("a", "y"), claim("a", "y")],
                    ..Default::default()
                },
                false,
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "upsert_persistent_volume_claims[1]: duplicate PersistentVolumeClaim \"a/y\""
        );
    }
}
