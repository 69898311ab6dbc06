//! The storage objects the volume filters read (kube-scheduler's VolumeRestrictions,
//! NodeVolumeLimits, VolumeBinding and VolumeZone): PersistentVolumeClaims, PersistentVolumes,
//! StorageClasses and CSINodes, and the volumes of a pod, validated and kept in a snapshot as
//! copy-on-write maps that deltas change.

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
    /// The annotation `volume.kubernetes.io/selected-node` ("" when absent).
    pub selected_node: String,
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
    fn sufficient(&self, size: i64) -> bool {
        self.maximum_volume_size
            .or(self.capacity)
            .is_some_and(|limit| limit.value() >= size)
    }

    /// Kubernetes' `nodeHasAccess`: the node's labels match nodeTopology (unset: no access).
    fn reaches(&self, labels: &NodeLabels) -> bool {
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

fn upsert<T>(
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

fn remove<T>(map: &mut imbl::OrdMap<String, Arc<T>>, bytes: &mut usize, keys: &[String], size: impl Fn(&T) -> usize) {
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

    /// Kubernetes' `hasEnoughCapacity`: whether provisioning a volume for the claim with the
    /// class's provisioner has room reachable from the node. Only a provisioner with a CSIDriver
    /// whose `storageCapacity` is true is checked (and a claim with a storage request); then some
    /// CSIStorageCapacity of the class must reach the node with room for the request. Sizes of
    /// volumes chosen earlier are not subtracted, as kube-scheduler does not.
    pub fn has_enough_capacity(&self, class: &StorageClass, claim: &Claim, labels: &NodeLabels) -> bool {
        if !claim.request_set {
            return true;
        }
        if !self
            .csi_drivers
            .get(&class.provisioner)
            .is_some_and(|d| d.storage_capacity)
        {
            return true;
        }
        let size = claim.request.value();
        self.capacities
            .values()
            .any(|c| c.class == class.name && c.sufficient(size) && c.reaches(labels))
    }

    /// The claim `namespace/name`.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&Arc<Claim>> {
        self.claims.get(&claim_key(namespace, name))
    }
}

/// A node's labels.
type NodeLabels = std::collections::HashMap<String, String>;

/// kube-scheduler's volume filter reasons, with its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VolumeReason {
    /// VolumeRestrictions: an in-tree disk the pod mounts is mounted by a pod on the node.
    DiskConflict,
    /// VolumeRestrictions: a ReadWriteOncePod claim of the pod is used by another pod.
    ReadWriteOncePodConflict,
    /// NodeVolumeLimits: the node's attach limit of a CSI driver would be exceeded.
    MaxVolumeCount,
    /// VolumeBinding: a bound claim's volume is not reachable from the node.
    NodeConflict,
    /// VolumeBinding: an unbound claim finds neither a volume nor provisioning on the node.
    BindConflict,
    /// VolumeBinding: no CSIStorageCapacity reachable from the node has room to provision.
    NotEnoughSpace,
    /// VolumeBinding: a bound claim's volume does not exist.
    PvNotExist,
    /// VolumeZone: a bound volume's zone or region is not the node's.
    ZoneConflict,
}

impl VolumeReason {
    /// Whether preemption may resolve it (kube-scheduler's `Unschedulable`, against
    /// `UnschedulableAndUnresolvable` for VolumeBinding's and VolumeZone's reasons).
    pub fn resolvable(self) -> bool {
        matches!(
            self,
            Self::DiskConflict | Self::ReadWriteOncePodConflict | Self::MaxVolumeCount
        )
    }
}

impl std::fmt::Display for VolumeReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::DiskConflict => "node(s) had no available disk",
            Self::ReadWriteOncePodConflict => {
                "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
            }
            Self::MaxVolumeCount => "node(s) exceed max volume count",
            Self::NodeConflict => "node(s) had volume node affinity conflict",
            Self::BindConflict => "node(s) didn't find available persistent volumes to bind",
            Self::NotEnoughSpace => "node(s) did not have enough free storage",
            Self::PvNotExist => "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)",
            Self::ZoneConflict => "node(s) had no available volume zone",
        })
    }
}

/// VolumeBinding's PreFilter message for a pod with an unbound claim of an Immediate class.
pub const UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";
/// The provisioner of classes that provision nothing (local volumes).
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// The zone and region labels VolumeZone compares, beta ones first (its `topologyLabels`).
const TOPOLOGY_LABELS: [&str; 4] = [
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];
/// The prefix of the handle NodeVolumeLimits gives a claim whose volume it cannot read (counted
/// by its class's provisioner under `<prefix>-<namespace>/<name>`).
const SC_HANDLE_PREFIX: &str = "placement-unbound";

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

/// The volumes of one pod as the filters read them, resolved once per pod (the plugins' PreFilter).
#[derive(Debug, Clone, Default)]
pub struct PodVolumes {
    /// The snapshot's storage objects (shared, copy-on-write).
    storage: StorageObjects,
    filters: VolumeFilters,
    namespace: String,
    /// The pod's in-tree volumes VolumeRestrictions compares.
    in_tree: Vec<PodVolume>,
    /// The keys of the pod's ReadWriteOncePod claims.
    rwop_claims: Vec<String>,
    /// References to them by pods other than the ones on a node being filtered (kube's
    /// `conflictingPVCRefCount`): by the pods placed earlier in the batch, plus, per node, by the
    /// bound pods elsewhere (`rwop_total` minus the node's entry in `rwop_on_node`).
    rwop_batch: usize,
    /// References by the snapshot's bound pods, over every node.
    rwop_total: usize,
    /// References by the snapshot's bound pods, per node name.
    rwop_on_node: std::collections::HashMap<Arc<str>, usize>,
    /// The pod's CSI volumes as NodeVolumeLimits counts them: (driver, unique name).
    csi: Vec<(String, String)>,
    /// Bound claims and their volume (`None` when it does not exist).
    bound: Vec<Option<Arc<PersistentVolume>>>,
    /// Unbound WaitForFirstConsumer claims, smallest request first, each with the node chosen
    /// for it already (its selected node, or a batch's provisioning choice).
    delayed: Vec<(Arc<Claim>, Option<String>)>,
    /// Volumes of the delayed claims' classes.
    by_class: std::collections::HashMap<String, Vec<Arc<PersistentVolume>>>,
    /// Volumes the batch bound to other claims.
    taken: std::collections::HashSet<String>,
    /// Volumes the batch bound to each of this pod's claims (by claim key).
    prebound: std::collections::HashMap<String, String>,
    /// VolumeZone's (label key, allowed values) of the bound volumes.
    zones: Vec<(&'static str, Vec<String>)>,
}

fn not_found(resource: &str, name: &str) -> String {
    format!("{resource} \"{name}\" not found")
}

/// Kubernetes' `LabelZonesToSet`: a zone label's value lists zones separated by `__`.
fn zones_of(value: &str) -> Vec<String> {
    value
        .split("__")
        .filter(|z| !z.is_empty())
        .map(str::to_string)
        .collect()
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

impl PodVolumes {
    /// The PreFilter of the enabled volume plugins, in kube-scheduler's order
    /// (VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone): `Ok(None)` when no
    /// plugin has work for the pod, `Err` with the first rejecting plugin's message (every node
    /// is then rejected, unresolvably).
    pub fn pre_filter(
        storage: &StorageObjects,
        filters: VolumeFilters,
        pod: &super::model::PodSpec,
        claim_users: &ClaimUsers<'_>,
        batch: &BatchVolumes,
    ) -> Result<Option<Self>, String> {
        let (pod_uid, namespace, pod_name, volumes) =
            (&*pod.uid, pod.namespace.as_str(), pod.name.as_str(), &pod.volumes);
        if volumes.is_empty() || !filters.any() {
            return Ok(None);
        }
        let mut out = Self {
            storage: storage.clone(),
            filters,
            namespace: namespace.to_string(),
            ..Default::default()
        };
        // VolumeRestrictions: every persistentVolumeClaim volume's claim must exist.
        if filters.restrictions {
            for v in volumes {
                match &v.source {
                    VolumeSource::Claim {
                        claim_name,
                        ephemeral: false,
                    } => {
                        let Some(c) = storage.claim(namespace, claim_name) else {
                            return Err(not_found("persistentvolumeclaim", claim_name));
                        };
                        if c.access_modes.contains(&AccessMode::ReadWriteOncePod) {
                            let key = c.key();
                            if !out.rwop_claims.contains(&key) {
                                for (node, n) in claim_users(&key) {
                                    out.rwop_total += n;
                                    *out.rwop_on_node.entry(node).or_default() += n;
                                }
                                out.rwop_batch += usize::from(batch.claims_in_use.contains(&key));
                                out.rwop_claims.push(key);
                            }
                        }
                    }
                    VolumeSource::Claim { .. } => {}
                    _ => out.in_tree.push(v.clone()),
                }
            }
        }
        if filters.limits {
            out.csi = csi_volumes(storage, namespace, volumes.iter());
        }
        if filters.binding {
            out.binding_pre_filter(storage, pod_uid, namespace, pod_name, volumes, batch)?;
        }
        if filters.zone {
            out.zone_pre_filter(storage, namespace, volumes)?;
        }
        Ok(Some(out))
    }

    fn binding_pre_filter(
        &mut self,
        storage: &StorageObjects,
        pod_uid: &str,
        namespace: &str,
        pod_name: &str,
        volumes: &[PodVolume],
        batch: &BatchVolumes,
    ) -> Result<(), String> {
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
                self.bound.push(storage.volumes.get(&c.volume_name).cloned());
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
                    self.prebound.insert(key, pv.clone());
                    None
                }
                None => None,
            };
            let chosen = chosen.or_else(|| (!c.selected_node.is_empty()).then(|| c.selected_node.clone()));
            if !self.by_class.contains_key(&c.class) {
                let pvs = storage
                    .volumes
                    .values()
                    .filter(|v| v.class == c.class)
                    .cloned()
                    .collect();
                self.by_class.insert(c.class.clone(), pvs);
            }
            self.delayed.push((c, chosen));
        }
        if immediate {
            return Err(UNBOUND_IMMEDIATE.to_string());
        }
        // byPVCSize: smallest request first.
        self.delayed.sort_by_key(|(c, _)| c.request);
        for (key, choice) in &batch.choices {
            if let VolumeChoice::Static(pv) = choice {
                if !self.prebound.contains_key(key) {
                    self.taken.insert(pv.clone());
                }
            }
        }
        Ok(())
    }

    fn zone_pre_filter(
        &mut self,
        storage: &StorageObjects,
        namespace: &str,
        volumes: &[PodVolume],
    ) -> Result<(), String> {
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
                    self.zones.push((key, zones_of(value)));
                }
            }
        }
        Ok(())
    }

    /// VolumeRestrictions' Filter: in-tree disk conflicts with the node's pods (`on_node`, with
    /// their namespaces), then the ReadWriteOncePod conflict: a reference to one of the pod's
    /// ReadWriteOncePod claims by any pod left — elsewhere, placed earlier in the batch, or among
    /// `on_node` (which preemption's dry run shrinks by the victims, as kube's `RemovePod` lowers
    /// its `conflictingPVCRefCount`).
    pub fn restrictions<'p>(
        &self,
        node_name: &str,
        on_node: impl Iterator<Item = (&'p str, &'p PodVolume)>,
    ) -> Option<VolumeReason> {
        if !self.filters.restrictions {
            return None;
        }
        let existing: Vec<(&str, &PodVolume)> = on_node.collect();
        if !self.in_tree.is_empty()
            && self
                .in_tree
                .iter()
                .any(|v| existing.iter().any(|(_, e)| disk_conflict(v, e)))
        {
            return Some(VolumeReason::DiskConflict);
        }
        if self.rwop_claims.is_empty() {
            return None;
        }
        let here = self.rwop_on_node.get(node_name).copied().unwrap_or(0);
        let left_here = existing
            .iter()
            .filter(|(ns, v)| {
                v.claim_name()
                    .is_some_and(|c| self.rwop_claims.iter().any(|k| *k == claim_key(ns, c)))
            })
            .count();
        let conflicts = self.rwop_total - here.min(self.rwop_total) + left_here + self.rwop_batch;
        (conflicts > 0).then_some(VolumeReason::ReadWriteOncePodConflict)
    }

    /// NodeVolumeLimits' Filter: the node's CSI attach limits against the unique volumes of its
    /// pods (`on_node`, with their namespaces) and the pod's new ones.
    pub fn limits<'p>(
        &self,
        storage: &StorageObjects,
        node_name: &str,
        on_node: impl Iterator<Item = (&'p str, &'p PodVolume)>,
    ) -> Option<VolumeReason> {
        if !self.filters.limits || self.csi.is_empty() {
            return None;
        }
        let limits: Vec<(&str, i32)> = storage
            .csi_nodes
            .get(node_name)
            .map(|n| {
                n.drivers
                    .iter()
                    .filter_map(|(d, c)| c.map(|c| (d.as_str(), c)))
                    .collect()
            })
            .unwrap_or_default();
        if limits.is_empty() {
            return None;
        }
        let mut attached: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
        for (ns, v) in on_node {
            attached.extend(csi_volumes(storage, ns, std::iter::once(v)));
        }
        let mut new: std::collections::HashSet<&(String, String)> = self.csi.iter().collect();
        new.retain(|v| !attached.contains(*v));
        for (driver, limit) in limits {
            let adding = new.iter().filter(|(d, _)| d == driver).count();
            if adding == 0 {
                continue;
            }
            let current = attached.iter().filter(|(d, _)| d == driver).count();
            if current + adding > usize::try_from(limit).unwrap_or(0) {
                return Some(VolumeReason::MaxVolumeCount);
            }
        }
        None
    }

    /// VolumeBinding's Filter (`FindPodVolumes`): the reasons the node is rejected, or the
    /// choices made for the pod's unbound WaitForFirstConsumer claims on it.
    pub fn binding(
        &self,
        storage: &StorageObjects,
        node: &super::model::NodeSpec,
    ) -> Result<Vec<(String, VolumeChoice)>, Vec<VolumeReason>> {
        if !self.filters.binding {
            return Ok(Vec::new());
        }
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
                    if !storage.has_enough_capacity(class, c, &node.labels) {
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
            reasons.push(VolumeReason::NodeConflict);
        }
        if !unbound_ok {
            reasons.push(VolumeReason::BindConflict);
        }
        if !space_ok {
            reasons.push(VolumeReason::NotEnoughSpace);
        }
        if !pvs_found {
            reasons.push(VolumeReason::PvNotExist);
        }
        if reasons.is_empty() {
            Ok(choices)
        } else {
            Err(reasons)
        }
    }

    /// Kubernetes' `FindMatchingVolume` on the scheduler's path: a volume pre-bound to the claim
    /// (if reachable), else the smallest available one of its class that fits, matches its
    /// selector, access modes and volume mode, and is reachable from the node.
    fn matching_volume<'s>(
        &'s self,
        c: &Claim,
        node: &super::model::NodeSpec,
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

    /// VolumeZone's Filter.
    pub fn zone(&self, node: &super::model::NodeSpec) -> Option<VolumeReason> {
        if !self.filters.zone || self.zones.is_empty() || !TOPOLOGY_LABELS.iter().any(|k| node.labels.contains_key(*k))
        {
            return None;
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
                return Some(VolumeReason::ZoneConflict);
            }
        }
        None
    }

    /// The pod's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The storage objects the pod's volumes were resolved against.
    pub fn storage(&self) -> &StorageObjects {
        &self.storage
    }
}

/// The CSI volumes NodeVolumeLimits counts for volumes of a pod in `namespace`: (driver, unique
/// name) of each claim whose volume is CSI, or, for a claim without a readable volume, its class's
/// provisioner and a handle naming the claim.
fn csi_volumes<'v>(
    storage: &StorageObjects,
    namespace: &str,
    volumes: impl Iterator<Item = &'v PodVolume>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for v in volumes {
        let Some(name) = v.claim_name() else { continue };
        let Some(c) = storage.claim(namespace, name) else {
            continue;
        };
        let from_class = || {
            let class = storage.classes.get(&c.class)?;
            (!c.class.is_empty()).then(|| {
                (
                    class.provisioner.clone(),
                    format!("{SC_HANDLE_PREFIX}-{namespace}/{}", c.name),
                )
            })
        };
        let info = if c.volume_name.is_empty() {
            from_class()
        } else {
            match storage.volumes.get(&c.volume_name) {
                None => from_class(),
                Some(pv) => pv.csi.clone(),
            }
        };
        if let Some((driver, handle)) = info.filter(|(d, h)| !d.is_empty() && !h.is_empty()) {
            out.push((driver.clone(), format!("{driver}/{handle}")));
        }
    }
    out
}

/// VolumeRestrictions' `isVolumeConflict` for one volume of the pod and one of a pod on the node.
fn disk_conflict(v: &PodVolume, e: &PodVolume) -> bool {
    use VolumeSource as S;
    match (&v.source, &e.source) {
        (
            S::GcePersistentDisk {
                pd_name: a,
                read_only: ra,
            },
            S::GcePersistentDisk {
                pd_name: b,
                read_only: rb,
            },
        ) => a == b && !(*ra && *rb),
        (S::AwsElasticBlockStore { volume_id: a }, S::AwsElasticBlockStore { volume_id: b }) => a == b,
        (S::Iscsi { iqn: a, read_only: ra }, S::Iscsi { iqn: b, read_only: rb }) => a == b && !(*ra && *rb),
        (
            S::Rbd {
                monitors: ma,
                pool: pa,
                image: ia,
                read_only: ra,
            },
            S::Rbd {
                monitors: mb,
                pool: pb,
                image: ib,
                read_only: rb,
            },
        ) => ma.iter().any(|m| mb.contains(m)) && pa == pb && ia == ib && !(*ra && *rb),
        _ => false,
    }
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
