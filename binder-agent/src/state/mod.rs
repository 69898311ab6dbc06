//! The binder's view of the cluster: nodes, bound pods and assumed placements, with a versioned
//! change log from which each decision replica gets the delta since its last sync.
//!
//! An assumed placement counts against its node from the decision until the watch shows the binding
//! (it becomes a bound pod under the same uid) or the bind fails (it is forgotten), so consecutive
//! batches never overcommit a node.
//!
//! Bound pods are kept protobuf-encoded (about 330 bytes each for typical pods, against some
//! 2 KiB as `proto::Pod` with its strings and maps): at 150,000 bound pods that is the difference
//! between about 50 MiB and 340 MiB resident. They are decoded only to go into a delta or a full
//! snapshot.
//!
//! PodDisruptionBudgets travel with the snapshot for preemption. The API lists a budget's
//! already-admitted evictions (status.disruptedPods) by pod name; the decision service matches
//! pods by uid, so the state resolves each name to the uid of the pod of that name it holds (by
//! one pass over the stored pods when a budget names pods it has not resolved yet, and as pods
//! arrive for names still unresolved). A name whose pod is gone stays unresolved: it covers no
//! pod, and one recreated under the name later is not taken for the evicted one.
//!
//! `ClusterState` is defined here; its methods are grouped by concern: `pods.rs` (nodes,
//! namespaces, bound and assumed pods), `pdbs.rs` (budgets and their disrupted pods),
//! `storage.rs` (storage and DRA objects, and the choices assumed on them), `pod_groups.rs`
//! (PodGroups; their hierarchy is `pod_group_tree.rs`), `log.rs` (the change log and the deltas
//! built from it), `snapshot.rs` (full snapshots) and `encoding.rs` (bound pods' encoded form).

mod encoding;
mod log;
mod pdbs;
mod pod_group_tree;
mod pod_groups;
mod pods;
mod snapshot;
mod storage;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use placement_scheduler::proto;

use crate::projection::{TrackedKey, TrackedObject};

pub use encoding::sort_by_uid;
pub use pod_group_tree::PodGroupTree;

/// What changed, by identity; the current value is read from the state when a delta is built.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    Node(String),
    Pod(String),
    Namespace(String),
    Pdb(String),
    Storage(TrackedKey),
}

/// A PodDisruptionBudget and how far its disruptedPods names are resolved.
#[derive(Debug, Clone, PartialEq)]
struct PdbEntry {
    /// The budget as sent, `disrupted_pod_uids` filled with the resolved names' uids.
    pdb: proto::PodDisruptionBudget,
    /// status.disruptedPods (names), sorted.
    names: Vec<String>,
    /// Resolved names and their uids.
    resolved: Vec<(String, String)>,
}

impl PdbEntry {
    fn unresolved(&self) -> impl Iterator<Item = &String> {
        self.names
            .iter()
            .filter(|n| !self.resolved.iter().any(|(r, _)| r == *n))
    }

    fn set_uids(&mut self) {
        let mut uids: Vec<String> = self.resolved.iter().map(|(_, u)| u.clone()).collect();
        uids.sort();
        self.pdb.disrupted_pod_uids = uids;
    }
}

/// Nodes, bound pods and assumed pods, versioned.
#[derive(Debug, Default)]
pub struct ClusterState {
    nodes: HashMap<String, proto::Node>,
    /// Namespaces (for namespace selectors of pod affinity terms).
    namespaces: HashMap<String, proto::Namespace>,
    /// PodDisruptionBudgets by `namespace/name`.
    pdbs: HashMap<String, PdbEntry>,
    /// Budgets with disruptedPods names not resolved to a pod yet.
    unresolved_pdbs: usize,
    /// PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers,
    /// CSIStorageCapacities, the DRA objects and PodGroups.
    storage: HashMap<TrackedKey, TrackedObject>,
    /// Volume choices of decided pods not yet seen through the watches (kube-scheduler's assume
    /// caches): a volume with its claimRef set to the chosen claim, a claim with its selected
    /// node; each with the uid of the pod it was chosen for. Snapshots show these in place of
    /// the watched objects.
    assumed_storage: HashMap<TrackedKey, (TrackedObject, String)>,
    /// Bound pods by uid, protobuf-encoded (shared, so a full snapshot takes them without a copy).
    bound: HashMap<String, Arc<[u8]>>,
    assumed: HashMap<String, proto::Pod>,
    version: u64,
    log: VecDeque<(u64, Key)>,
    /// Changes at or below this version are no longer in the log.
    compacted: u64,
    /// Partitions the nodes are labelled with ([`ClusterState::with_partitions`]).
    partitions: u32,
    /// Whether the API server serves scheduling.k8s.io/v1beta1 PodGroups (the watch found out).
    pod_groups_served: bool,
    /// Each PodGroup's `PodGroupInitiallyScheduled` condition as the watch shows it, by
    /// `namespace/name` (the binder's alone: decision replicas read only whether it is True).
    pod_group_conditions: HashMap<String, crate::api::ObservedCondition>,
}

impl ClusterState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty state whose nodes carry their partition among `partitions` in the label
    /// [`PARTITION_LABEL`](crate::partitions::PARTITION_LABEL) (none below 2).
    pub fn with_partitions(partitions: u32) -> Self {
        Self {
            partitions,
            ..Self::default()
        }
    }

    /// The current version: a snapshot synced now reflects every change up to it.
    pub fn version(&self) -> u64 {
        self.version
    }
}

/// A full snapshot in parts ([`ClusterState::full_parts`]).
#[derive(Debug)]
pub struct FullParts {
    /// Everything but the pods.
    pub rest: proto::Snapshot,
    /// Every bound and assumed pod, in uid order, protobuf-encoded (a `proto::Pod` each).
    pub pods: Vec<Arc<[u8]>>,
}

/// The name under which the devices of a pod's special claim for extended resources are assumed
/// until the claim PreBind creates is watched (not a valid object name: no real claim has it).
pub fn assumed_extended_claim(pod_uid: &str) -> String {
    format!("<extended-resources>-{pod_uid}")
}
