//! The cluster snapshot: nodes sorted by name, each with the usage of the pods bound to it.
//!
//! Usage is computed here, once, from the bound pods, the same way for every caller. A snapshot is
//! immutable; [`Snapshot::apply`] makes a new one from a delta and shares every unchanged node and
//! pod with its base (nodes are `Arc`s, the pod index is a persistent map), so a delta that touches
//! one node costs in proportion to the change, not to the cluster.
//!
//! Its parts: [`pods`] (bound pods and node usage), [`nodes`] (node entries and classes),
//! [`delta`] (changes and errors), [`apply`] (deltas and views), [`groups`] (budgets, PodGroups,
//! storage and DRA objects), [`indexes`] and [`lazy`] (what is built on first use, kept in one
//! [`caches::Caches`]).

mod apply;
mod caches;
mod delta;
mod groups;
mod indexes;
mod lazy;
mod nodes;
mod pods;

use std::sync::Arc;

pub use delta::{Delta, SnapshotError};
pub use indexes::{ImagePostings, PodIndex, Topology};
pub use nodes::{image_hash, name_hash, NodeEntry, NodeView, NODE_UNIQUE_LABELS};
pub use pods::{BoundPod, NodeUsage, PodMeta};

pub use crate::engine::hot::{keys_conflict, port_bits, port_key, port_mask, NodeHot, PortKeys};
use crate::engine::model::{Labels, NodeSpec, PodSpec};
use crate::engine::pdb::Pdb;
use indexes::Whole;
use nodes::namespace_bytes;
use pods::{FastHasher, Interner, PodMap};

/// An immutable cluster snapshot.
#[derive(Debug, Default)]
pub struct Snapshot {
    nodes: Vec<Arc<NodeEntry>>,
    pods: PodMap,
    /// Usage of pods bound to nodes the snapshot does not (yet) have, by node name.
    orphans: imbl::HashMap<Arc<str>, NodeUsage>,
    /// Image name to the number of nodes that have it.
    image_nodes: imbl::HashMap<Arc<str>, u32>,
    /// Node classes (append-only within a lineage of deltas): the static view of a node.
    classes: imbl::Vector<Arc<NodeSpec>>,
    /// Class key hash to the classes with that hash.
    class_index: imbl::HashMap<u64, Vec<u32>>,
    /// Namespace labels by name (for namespace selectors).
    namespaces: imbl::HashMap<Arc<str>, Arc<Labels>>,
    /// Bound pods with pod affinity or anti-affinity terms, by uid.
    affinity_pods: imbl::OrdMap<Arc<str>, Arc<BoundPod>>,
    /// For a view of some nodes ([`Snapshot::restrict`]): the classes its nodes have, ascending.
    class_subset: Option<Arc<[u32]>>,
    /// For a view of some nodes ([`Snapshot::restrict`]): the whole cluster it was cut from, which
    /// the topology plugins still see.
    whole: Option<Arc<Whole>>,
    /// PodDisruptionBudgets by "namespace/name".
    pdbs: imbl::OrdMap<String, Arc<Pdb>>,
    /// PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes.
    storage: crate::engine::volumes::StorageObjects,
    /// DeviceClasses, ResourceClaims and ResourceSlices.
    devices: crate::engine::devices::DeviceObjects,
    /// DynamicResources' allocation verdicts, shared by the snapshots derived from one by deltas
    /// that change no DeviceClass (see [`crate::engine::devices::SharedVerdicts`]).
    device_verdicts: Arc<crate::engine::devices::SharedVerdicts>,
    /// PodGroups by "namespace/name".
    pod_groups: imbl::OrdMap<crate::engine::model::PodGroupKey, Arc<crate::engine::model::PodGroup>>,
    /// CompositePodGroups by "namespace/name".
    composite_pod_groups: imbl::OrdMap<Arc<str>, Arc<crate::engine::model::CompositePodGroup>>,
    /// The bound pods of each PodGroup (uid to node), by the group's key; kept as pods come and go.
    pod_group_pods: imbl::HashMap<crate::engine::model::PodGroupKey, imbl::OrdMap<Arc<str>, Arc<str>>>,
    /// Static predicates per node class of the pods evaluated so far, shared by the snapshots
    /// derived from one full snapshot by deltas (their classes only grow).
    static_cache: Arc<std::sync::Mutex<crate::engine::accel::class_cache::StaticCache>>,
    approx_bytes: usize,
    /// The parts built on first use.
    caches: caches::Caches,
}

impl Snapshot {
    /// Builds a snapshot from nodes and bound pods.
    pub fn build(nodes: Vec<NodeSpec>, pods: Vec<PodSpec>) -> Result<Self, SnapshotError> {
        Self::build_with_namespaces(nodes, pods, Vec::new())
    }

    /// Builds a snapshot from nodes, bound pods and namespaces (name, labels).
    pub fn build_with_namespaces(
        nodes: Vec<NodeSpec>,
        pods: Vec<PodSpec>,
        namespaces: Vec<(String, Labels)>,
    ) -> Result<Self, SnapshotError> {
        let mut seen = std::collections::HashSet::with_capacity(nodes.len());
        for (index, n) in nodes.iter().enumerate() {
            if !seen.insert(n.name.as_str()) {
                return Err(SnapshotError::DuplicateNode {
                    index,
                    name: n.name.clone(),
                });
            }
        }
        drop(seen);
        let mut snap = Snapshot::default();
        let mut entries: Vec<NodeEntry> = Vec::with_capacity(nodes.len());
        for (i, spec) in nodes.into_iter().enumerate() {
            if crate::engine::cancel::requested_at(i) {
                return Err(SnapshotError::Cancelled);
            }
            snap.count_images(&spec, 1);
            snap.approx_bytes += spec.approx_bytes() + std::mem::size_of::<NodeEntry>() + 16;
            entries.push(snap.entry(spec, NodeUsage::default()));
        }
        entries.sort_unstable_by(|a, b| a.spec.name.cmp(&b.spec.name));
        // Inserted in uid order once all are known: an ordered map fills fastest from the right.
        let mut by_uid: Vec<(Arc<str>, Arc<BoundPod>)> = Vec::with_capacity(pods.len());
        let mut seen: std::collections::HashSet<Arc<str>, FastHasher> =
            std::collections::HashSet::with_capacity_and_hasher(pods.len(), FastHasher::default());
        let mut interner = Interner::default();
        // The specs stay alive until the end and are freed together (freeing them one by one
        // between the allocations of the snapshot fragments the heap for every later evaluation).
        let mut pods = pods;
        for (index, pod) in pods.iter_mut().enumerate() {
            if crate::engine::cancel::requested_at(index) {
                return Err(SnapshotError::Cancelled);
            }
            let bound = BoundPod::take_from(pod, &mut interner).ok_or(SnapshotError::UnboundPod { index })?;
            if !seen.insert(pod.uid.clone()) {
                return Err(SnapshotError::DuplicatePod {
                    index,
                    uid: pod.uid.to_string(),
                });
            }
            snap.approx_bytes += bound.approx_bytes() + pod.uid.len();
            let bound = Arc::new(bound);
            match entries.binary_search_by(|e| e.spec.name.as_str().cmp(&bound.node_name)) {
                Ok(i) => entries[i].usage.bind(Arc::clone(&bound)),
                Err(_) => snap
                    .orphans
                    .entry(bound.node_name.clone())
                    .or_default()
                    .bind(Arc::clone(&bound)),
            }
            if bound.affinity.is_some() {
                snap.affinity_pods.insert(pod.uid.clone(), Arc::clone(&bound));
            }
            snap.track_pod_group(&pod.uid, &bound, true);
            by_uid.push((pod.uid.clone(), bound));
        }
        drop(seen);
        by_uid.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let pod_index: PodMap = by_uid.into_iter().collect();
        for (name, labels) in namespaces {
            snap.approx_bytes += namespace_bytes(&name, &labels);
            snap.namespaces.insert(Arc::from(name.as_str()), Arc::new(labels));
        }
        snap.nodes = entries.into_iter().map(Arc::new).collect();
        snap.pods = pod_index;
        snap.static_cache = crate::engine::accel::class_cache::StaticCache::shared(snap.classes.len());
        Ok(snap)
    }

    /// Nodes the topology plugins see: [`Snapshot::nodes`], then, for a view
    /// ([`Snapshot::restrict`]), every other node of the cluster it was cut from.
    pub fn topology_len(&self) -> usize {
        match &self.whole {
            Some(w) => self.nodes.len() + w.nodes.len().saturating_sub(w.positions.len()),
            None => self.nodes.len(),
        }
    }

    /// The node at index `i` of the topology order (see [`Snapshot::topology_len`]): for `i` below
    /// `nodes().len()` the same node as [`Snapshot::nodes`]; `None` past the end.
    pub fn topology_node(&self, i: usize) -> Option<&Arc<NodeEntry>> {
        if let Some(n) = self.nodes.get(i) {
            return Some(n);
        }
        let w = self.whole.as_ref()?;
        let at = *w.order().outside.get(i - self.nodes.len())?;
        w.nodes.get(at as usize)
    }

    /// For a view of some of a snapshot's nodes ([`Snapshot::restrict`]): the classes they have,
    /// ascending (the class list is the whole lineage's); `None` for a whole snapshot.
    pub fn class_subset(&self) -> Option<&[u32]> {
        self.class_subset.as_deref()
    }

    /// Node classes: nodes with equal labels (but [`NODE_UNIQUE_LABELS`]), taints and cordon
    /// share one, so static predicates are evaluated once per class. May hold classes no node
    /// uses any more.
    pub fn classes(&self) -> &imbl::Vector<Arc<NodeSpec>> {
        &self.classes
    }

    pub(in crate::engine) fn position(&self, name: &str) -> Result<usize, usize> {
        self.nodes.binary_search_by(|e| e.spec.name.as_str().cmp(name))
    }

    /// The labels of a namespace, `None` when the snapshot does not know it.
    pub fn namespace_labels(&self, name: &str) -> Option<&Labels> {
        self.namespaces.get(name).map(|l| &**l)
    }

    /// Bound pods with pod affinity or anti-affinity terms (on known nodes or not).
    pub fn affinity_pods(&self) -> impl Iterator<Item = &Arc<BoundPod>> {
        self.affinity_pods.values()
    }

    /// Whether some bound pod has pod affinity or anti-affinity terms.
    pub fn has_affinity_pods(&self) -> bool {
        !self.affinity_pods.is_empty()
    }

    /// The index of the node with this name in the topology order ([`Snapshot::topology_node`]):
    /// its index in [`Snapshot::nodes`] when the snapshot has it; for a view, a node of the rest of
    /// the cluster has an index past them.
    pub fn node_index(&self, name: &str) -> Option<usize> {
        if let Ok(i) = self.position(name) {
            return Some(i);
        }
        let w = self.whole.as_ref()?;
        let at = w.nodes.binary_search_by(|e| e.spec.name.as_str().cmp(name)).ok()?;
        let t = w.order().topology_of.get(at).copied()?;
        (t != u32::MAX).then_some(t as usize)
    }

    /// Nodes sorted by name.
    pub fn nodes(&self) -> &[Arc<NodeEntry>] {
        &self.nodes
    }

    /// Number of bound pods.
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// The index in [`Snapshot::nodes`] of the node with this name, if present.
    pub fn position_of(&self, name: &str) -> Option<usize> {
        self.position(name).ok()
    }

    /// The node with this name, if present.
    pub fn node(&self, name: &str) -> Option<&NodeEntry> {
        self.position(name).ok().map(|i| &*self.nodes[i])
    }

    /// How many nodes have an image (kube-scheduler's `ImageStateSummary.NumNodes`).
    pub fn image_node_count(&self, image: &str) -> u32 {
        self.image_nodes.get(image).copied().unwrap_or(0)
    }

    /// Whether a pod with this uid is bound in the snapshot.
    pub fn has_pod(&self, uid: &str) -> bool {
        self.pods.contains_key(uid)
    }

    /// The static predicates cache of this snapshot's lineage (see [`crate::engine::accel::class_cache::StaticCache`]).
    pub(in crate::engine) fn static_cache(&self) -> &std::sync::Mutex<crate::engine::accel::class_cache::StaticCache> {
        &self.static_cache
    }
}

#[cfg(test)]
mod tests;
