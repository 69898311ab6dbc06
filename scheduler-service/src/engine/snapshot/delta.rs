//! A change to a snapshot, and why a snapshot or a change cannot be built.

use crate::engine::model::{Labels, NodeSpec, PodSpec};
use crate::engine::pdb::Pdb;

/// Why a snapshot or delta cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// Two nodes with the same name.
    #[error("nodes[{index}]: duplicate node name {name:?}")]
    DuplicateNode {
        /// Index of the second occurrence.
        index: usize,
        /// The name.
        name: String,
    },
    /// Two pods with the same uid.
    #[error("pods[{index}]: duplicate pod uid {uid:?}")]
    DuplicatePod {
        /// Index of the second occurrence.
        index: usize,
        /// The uid.
        uid: String,
    },
    /// Two PodDisruptionBudgets with the same namespace and name.
    #[error("pod_disruption_budgets[{index}]: duplicate PodDisruptionBudget {key:?}")]
    DuplicatePdb {
        /// Index of the second occurrence.
        index: usize,
        /// "namespace/name".
        key: String,
    },
    /// Two CompositePodGroups with the same namespace and name.
    #[error("composite_pod_groups[{index}]: duplicate CompositePodGroup {key:?}")]
    DuplicateCompositePodGroup {
        /// Position in the list.
        index: usize,
        /// "namespace/name".
        key: String,
    },
    /// Two PodGroups with the same namespace and name.
    #[error("pod_groups[{index}]: duplicate PodGroup {key:?}")]
    DuplicatePodGroup {
        /// Index of the second occurrence.
        index: usize,
        /// "namespace/name".
        key: String,
    },
    /// A pod in a snapshot without a node.
    #[error("pods[{index}].node_name: a snapshot holds bound pods only; node_name must be set")]
    UnboundPod {
        /// Index of the pod.
        index: usize,
    },
    /// Two storage objects of one kind with the same key.
    #[error(transparent)]
    DuplicateStorage(#[from] crate::engine::volumes::DuplicateStorageObject),
    /// The call building the snapshot ended before it was built ([`crate::engine::cancel`]).
    #[error("the call ended before the snapshot was built")]
    Cancelled,
}

/// A change to a snapshot. Removals apply before upserts.
#[derive(Debug, Clone, Default)]
pub struct Delta {
    /// Nodes added or replaced by name.
    pub upsert_nodes: Vec<NodeSpec>,
    /// Names of nodes removed (unknown names are ignored).
    pub remove_nodes: Vec<String>,
    /// Bound pods added or replaced by uid.
    pub upsert_pods: Vec<PodSpec>,
    /// Uids of pods removed (unknown uids are ignored).
    pub remove_pod_uids: Vec<String>,
    /// Namespaces (name, labels) added or replaced by name.
    pub upsert_namespaces: Vec<(String, Labels)>,
    /// Names of namespaces removed (unknown names are ignored).
    pub remove_namespaces: Vec<String>,
    /// PodDisruptionBudgets added or replaced by namespace and name.
    pub upsert_pdbs: Vec<Pdb>,
    /// PodDisruptionBudgets removed, as "namespace/name" (unknown ones are ignored).
    pub remove_pdbs: Vec<String>,
    /// Claims, volumes, storage classes and CSINodes changed.
    pub storage: crate::engine::volumes::StorageDelta,
    /// DeviceClasses, ResourceClaims and ResourceSlices changed.
    pub devices: crate::engine::devices::DeviceDelta,
    /// PodGroups added or replaced by namespace and name.
    pub upsert_pod_groups: Vec<crate::engine::model::PodGroup>,
    /// PodGroups removed, as "namespace/name" (unknown ones are ignored).
    pub remove_pod_groups: Vec<String>,
    /// CompositePodGroups added or replaced by namespace and name.
    pub upsert_composite_pod_groups: Vec<crate::engine::model::CompositePodGroup>,
    /// CompositePodGroups removed, as "namespace/name" (unknown ones are ignored).
    pub remove_composite_pod_groups: Vec<String>,
}
