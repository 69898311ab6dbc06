//! Storage objects as the volume filters read them (claims, volumes, classes, CSI nodes, drivers
//! and capacities), and the keyed objects the binder tracks besides nodes, pods, namespaces and
//! budgets.

use placement_scheduler::proto;

use super::podgroups::pod_group_key;
use super::selectors::{label_selector, term};

/// The annotation that names a claim's or a volume's class before `storageClassName` (still read
/// first by Kubernetes' `GetPersistentVolumeClaimClass` and `GetPersistentVolumeClass`).
pub const ANN_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// The PV controller's mark of a claim whose binding it completed.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// The node the scheduler chose to provision a WaitForFirstConsumer claim's volume on.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

fn class_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, spec_class: Option<&String>) -> String {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(ANN_STORAGE_CLASS))
        .or(spec_class)
        .cloned()
        .unwrap_or_default()
}

fn annotation(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, key: &str) -> Option<String> {
    meta.annotations.as_ref().and_then(|a| a.get(key)).cloned()
}

/// Projects a PersistentVolumeClaim.
pub fn claim_info(pvc: &k8s_openapi::api::core::v1::PersistentVolumeClaim) -> proto::PersistentVolumeClaim {
    let meta = &pvc.metadata;
    let spec = pvc.spec.as_ref();
    proto::PersistentVolumeClaim {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        storage_class_name: class_of(meta, spec.and_then(|s| s.storage_class_name.as_ref())),
        volume_name: spec.and_then(|s| s.volume_name.clone()).unwrap_or_default(),
        bind_completed: annotation(meta, ANN_BIND_COMPLETED).is_some(),
        access_modes: spec.and_then(|s| s.access_modes.clone()).unwrap_or_default(),
        storage_request: spec
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map(|q| q.0.clone())
            .unwrap_or_default(),
        selector: spec.and_then(|s| s.selector.as_ref()).map(label_selector),
        volume_mode: spec.and_then(|s| s.volume_mode.clone()).unwrap_or_default(),
        phase: pvc.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default(),
        deleting: meta.deletion_timestamp.is_some(),
        selected_node: annotation(meta, ANN_SELECTED_NODE).unwrap_or_default(),
        selected_node_set: annotation(meta, ANN_SELECTED_NODE).is_some(),
        volume_attributes_class_name: spec
            .and_then(|s| s.volume_attributes_class_name.clone())
            .unwrap_or_default(),
        controller_uid: meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| o.uid.clone())
            .unwrap_or_default(),
    }
}

/// Projects a PersistentVolume.
pub fn volume_info(pv: &k8s_openapi::api::core::v1::PersistentVolume) -> proto::PersistentVolume {
    let meta = &pv.metadata;
    let spec = pv.spec.as_ref();
    let csi = spec.and_then(|s| s.csi.as_ref());
    proto::PersistentVolume {
        name: meta.name.clone().unwrap_or_default(),
        labels: meta.labels.clone().unwrap_or_default(),
        storage_class_name: class_of(meta, spec.and_then(|s| s.storage_class_name.as_ref())),
        capacity: spec
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("storage"))
            .map(|q| q.0.clone())
            .unwrap_or_default(),
        access_modes: spec.and_then(|s| s.access_modes.clone()).unwrap_or_default(),
        volume_mode: spec.and_then(|s| s.volume_mode.clone()).unwrap_or_default(),
        node_affinity: spec
            .and_then(|s| s.node_affinity.as_ref())
            .and_then(|a| a.required.as_ref())
            .map(|r| proto::NodeSelector {
                terms: r.node_selector_terms.iter().map(term).collect(),
            }),
        claim_ref: spec.and_then(|s| s.claim_ref.as_ref()).map(|r| proto::VolumeClaimRef {
            namespace: r.namespace.clone().unwrap_or_default(),
            name: r.name.clone().unwrap_or_default(),
            uid: r.uid.clone().unwrap_or_default(),
        }),
        phase: pv.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default(),
        deleting: meta.deletion_timestamp.is_some(),
        csi_driver: csi.map(|c| c.driver.clone()).unwrap_or_default(),
        csi_volume_handle: csi.map(|c| c.volume_handle.clone()).unwrap_or_default(),
        volume_attributes_class_name: spec
            .and_then(|s| s.volume_attributes_class_name.clone())
            .unwrap_or_default(),
    }
}

/// Projects a StorageClass.
pub fn storage_class_info(sc: &k8s_openapi::api::storage::v1::StorageClass) -> proto::StorageClass {
    proto::StorageClass {
        name: sc.metadata.name.clone().unwrap_or_default(),
        provisioner: sc.provisioner.clone(),
        volume_binding_mode: sc.volume_binding_mode.clone().unwrap_or_default(),
        allowed_topologies: sc
            .allowed_topologies
            .iter()
            .flatten()
            .map(|t| proto::TopologySelectorTerm {
                match_label_expressions: t
                    .match_label_expressions
                    .iter()
                    .flatten()
                    .map(|r| proto::TopologySelectorRequirement {
                        key: r.key.clone(),
                        values: r.values.clone(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// Projects a CSINode: each driver's attach limit.
pub fn csi_node_info(n: &k8s_openapi::api::storage::v1::CSINode) -> proto::CsiNode {
    proto::CsiNode {
        name: n.metadata.name.clone().unwrap_or_default(),
        drivers: n
            .spec
            .drivers
            .iter()
            .map(|d| proto::CsiNodeDriver {
                name: d.name.clone(),
                allocatable_count: d.allocatable.as_ref().and_then(|a| a.count),
            })
            .collect(),
    }
}

/// Projects a CSIDriver: whether it asks for storage capacity tracking.
pub fn csi_driver_info(d: &k8s_openapi::api::storage::v1::CSIDriver) -> proto::CsiDriver {
    proto::CsiDriver {
        name: d.metadata.name.clone().unwrap_or_default(),
        storage_capacity: d.spec.storage_capacity.unwrap_or(false),
        prevent_pod_scheduling_if_missing: d.spec.prevent_pod_scheduling_if_missing.unwrap_or(false),
    }
}

/// Projects a CSIStorageCapacity.
pub fn storage_capacity_info(c: &k8s_openapi::api::storage::v1::CSIStorageCapacity) -> proto::CsiStorageCapacity {
    proto::CsiStorageCapacity {
        namespace: c.metadata.namespace.clone().unwrap_or_default(),
        name: c.metadata.name.clone().unwrap_or_default(),
        storage_class_name: c.storage_class_name.clone(),
        node_topology: c.node_topology.as_ref().map(label_selector),
        capacity: c.capacity.as_ref().map(|q| q.0.clone()).unwrap_or_default(),
        maximum_volume_size: c.maximum_volume_size.as_ref().map(|q| q.0.clone()).unwrap_or_default(),
    }
}

/// Projects a CSIStorageCapacity read as a dynamic object (storage.k8s.io/v1 or v1beta1, whose
/// fields are the same).
pub fn dynamic_storage_capacity_info(o: &kube::api::DynamicObject) -> proto::CsiStorageCapacity {
    let field = |name: &str| o.data.get(name).cloned().unwrap_or(serde_json::Value::Null);
    let capacity = k8s_openapi::api::storage::v1::CSIStorageCapacity {
        metadata: o.metadata.clone(),
        storage_class_name: field("storageClassName").as_str().unwrap_or_default().to_string(),
        capacity: serde_json::from_value(field("capacity")).ok().flatten(),
        maximum_volume_size: serde_json::from_value(field("maximumVolumeSize")).ok().flatten(),
        node_topology: serde_json::from_value(field("nodeTopology")).ok().flatten(),
    };
    storage_capacity_info(&capacity)
}

/// A keyed object besides nodes, pods, namespaces and budgets as the binder tracks it: the
/// storage objects the volume filters read, the DRA objects and PodGroups.
#[derive(Debug, Clone, PartialEq)]
pub enum TrackedObject {
    /// A PersistentVolumeClaim.
    Claim(proto::PersistentVolumeClaim),
    /// A PersistentVolume.
    Volume(proto::PersistentVolume),
    /// A StorageClass.
    Class(proto::StorageClass),
    /// A CSINode.
    CsiNode(proto::CsiNode),
    /// A CSIDriver.
    CsiDriver(proto::CsiDriver),
    /// A CSIStorageCapacity.
    Capacity(proto::CsiStorageCapacity),
    /// A DeviceClass.
    DeviceClass(proto::DeviceClass),
    /// A ResourceClaim.
    ResourceClaim(proto::ResourceClaim),
    /// A ResourceSlice.
    ResourceSlice(proto::ResourceSlice),
    /// A DeviceTaintRule.
    DeviceTaintRule(proto::DeviceTaintRule),
    /// A PodGroup (scheduling.k8s.io/v1beta1).
    PodGroup(proto::PodGroup),
    /// A CompositePodGroup (scheduling.k8s.io/v1alpha3).
    CompositePodGroup(proto::CompositePodGroup),
}

/// The identity of a storage object: a namespaced object (claim, capacity, ResourceClaim,
/// PodGroup) by `namespace/name`, the others by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TrackedKey {
    /// A PersistentVolumeClaim, `namespace/name`.
    Claim(String),
    /// A PersistentVolume.
    Volume(String),
    /// A StorageClass.
    Class(String),
    /// A CSINode.
    CsiNode(String),
    /// A CSIDriver.
    CsiDriver(String),
    /// A CSIStorageCapacity, `namespace/name`.
    Capacity(String),
    /// A DeviceClass.
    DeviceClass(String),
    /// A ResourceClaim, `namespace/name`.
    ResourceClaim(String),
    /// A ResourceSlice.
    ResourceSlice(String),
    /// A DeviceTaintRule.
    DeviceTaintRule(String),
    /// A PodGroup, `namespace/name`.
    PodGroup(String),
    /// A CompositePodGroup, `namespace/name`.
    CompositePodGroup(String),
}

impl TrackedObject {
    /// Adds it to the list of its kind in `snapshot`, as a full snapshot carries it.
    pub fn push_into(self, snapshot: &mut proto::Snapshot) {
        match self {
            Self::Claim(c) => snapshot.persistent_volume_claims.push(c),
            Self::Volume(v) => snapshot.persistent_volumes.push(v),
            Self::Class(c) => snapshot.storage_classes.push(c),
            Self::CsiNode(n) => snapshot.csi_nodes.push(n),
            Self::CsiDriver(d) => snapshot.csi_drivers.push(d),
            Self::Capacity(c) => snapshot.csi_storage_capacities.push(c),
            Self::DeviceClass(c) => snapshot.device_classes.push(c),
            Self::ResourceClaim(c) => snapshot.resource_claims.push(c),
            Self::ResourceSlice(s) => snapshot.resource_slices.push(s),
            Self::DeviceTaintRule(r) => snapshot.device_taint_rules.push(r),
            Self::PodGroup(g) => snapshot.pod_groups.push(g),
            Self::CompositePodGroup(g) => snapshot.composite_pod_groups.push(g),
        }
    }

    /// Its identity.
    pub fn key(&self) -> TrackedKey {
        match self {
            Self::Claim(c) => TrackedKey::Claim(format!("{}/{}", c.namespace, c.name)),
            Self::Volume(v) => TrackedKey::Volume(v.name.clone()),
            Self::Class(c) => TrackedKey::Class(c.name.clone()),
            Self::CsiNode(n) => TrackedKey::CsiNode(n.name.clone()),
            Self::CsiDriver(d) => TrackedKey::CsiDriver(d.name.clone()),
            Self::Capacity(c) => TrackedKey::Capacity(format!("{}/{}", c.namespace, c.name)),
            Self::DeviceClass(c) => TrackedKey::DeviceClass(c.name.clone()),
            Self::ResourceClaim(c) => TrackedKey::ResourceClaim(format!("{}/{}", c.namespace, c.name)),
            Self::ResourceSlice(s) => TrackedKey::ResourceSlice(s.name.clone()),
            Self::DeviceTaintRule(r) => TrackedKey::DeviceTaintRule(r.name.clone()),
            Self::PodGroup(g) => TrackedKey::PodGroup(pod_group_key(&g.namespace, &g.name)),
            Self::CompositePodGroup(g) => TrackedKey::CompositePodGroup(pod_group_key(&g.namespace, &g.name)),
        }
    }
}
