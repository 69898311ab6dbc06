//! New snapshots from one: a delta applied ([`Snapshot::apply`]), a view of some nodes
//! ([`Snapshot::restrict`]), and the node and pod bookkeeping both do.

use std::sync::Arc;

use super::caches::Caches;
use super::indexes::{postings_bytes, Whole};
use super::nodes::{class_hash, class_view, image_index, name_hash, namespace_bytes, NodeEntry};
use super::pods::{BoundPod, Interner, NodeUsage};
use super::{Delta, NodeHot, Snapshot, SnapshotError};
use crate::engine::model::NodeSpec;

impl Snapshot {
    /// A new snapshot: this one with the delta applied.
    pub fn apply(&self, delta: Delta) -> Result<Self, SnapshotError> {
        let mut seen = std::collections::HashSet::new();
        for (index, n) in delta.upsert_nodes.iter().enumerate() {
            if !seen.insert(n.name.as_str()) {
                return Err(SnapshotError::DuplicateNode {
                    index,
                    name: n.name.clone(),
                });
            }
        }
        let mut seen = std::collections::HashSet::new();
        for (index, p) in delta.upsert_pods.iter().enumerate() {
            if p.node_name.as_deref().is_none_or(str::is_empty) {
                return Err(SnapshotError::UnboundPod { index });
            }
            if !seen.insert(&*p.uid) {
                return Err(SnapshotError::DuplicatePod {
                    index,
                    uid: p.uid.to_string(),
                });
            }
        }
        // The lazily built caches index nodes by position, which the delta may shift: they are
        // left behind, not copied, but for the image postings when no node changes.
        let nodes_unchanged = delta.upsert_nodes.is_empty() && delta.remove_nodes.is_empty();
        let image_postings = std::sync::OnceLock::new();
        if let Some(p) = self.caches.image_postings.get().filter(|_| nodes_unchanged) {
            let _ = image_postings.set(Arc::clone(p));
        }
        let mut next = Snapshot {
            nodes: self.nodes.clone(),
            pods: self.pods.clone(),
            orphans: self.orphans.clone(),
            image_nodes: self.image_nodes.clone(),
            classes: self.classes.clone(),
            class_index: self.class_index.clone(),
            namespaces: self.namespaces.clone(),
            affinity_pods: self.affinity_pods.clone(),
            class_subset: None,
            whole: None,
            pdbs: self.pdbs.clone(),
            storage: self.storage.clone(),
            devices: self.devices.clone(),
            device_verdicts: if delta.devices.upsert_classes.is_empty() && delta.devices.remove_classes.is_empty() {
                Arc::clone(&self.device_verdicts)
            } else {
                Arc::default()
            },
            pod_groups: self.pod_groups.clone(),
            composite_pod_groups: self.composite_pod_groups.clone(),
            pod_group_pods: self.pod_group_pods.clone(),
            static_cache: Arc::clone(&self.static_cache),
            approx_bytes: self.approx_bytes,
            caches: Caches {
                image_postings,
                // A topology reads node labels only: kept while no node changes.
                topologies: std::sync::Mutex::new(if nodes_unchanged {
                    self.caches.topologies.lock().unwrap_or_else(|e| e.into_inner()).clone()
                } else {
                    Default::default()
                }),
                ..Caches::default()
            },
        };
        if let Some(p) = next.caches.image_postings.get() {
            next.add_derived(postings_bytes(p));
        }
        for name in &delta.remove_namespaces {
            if let Some(old) = next.namespaces.remove(name.as_str()) {
                next.approx_bytes = next.approx_bytes.saturating_sub(namespace_bytes(name, &old));
            }
        }
        for (name, labels) in delta.upsert_namespaces {
            next.approx_bytes += namespace_bytes(&name, &labels);
            if let Some(old) = next.namespaces.insert(Arc::from(name.as_str()), Arc::new(labels)) {
                next.approx_bytes = next.approx_bytes.saturating_sub(namespace_bytes(&name, &old));
            }
        }
        for key in &delta.remove_pdbs {
            if let Some(old) = next.pdbs.remove(key) {
                next.approx_bytes = next.approx_bytes.saturating_sub(old.approx_bytes());
            }
        }
        next.insert_pdbs(delta.upsert_pdbs)?;
        for key in &delta.remove_pod_groups {
            if let Some(old) = next
                .pod_groups
                .remove(&crate::engine::model::PodGroupKey::from_key(key))
            {
                next.approx_bytes = next.approx_bytes.saturating_sub(old.approx_bytes());
            }
        }
        next.insert_pod_groups(delta.upsert_pod_groups)?;
        for key in &delta.remove_composite_pod_groups {
            if let Some(old) = next.composite_pod_groups.remove(key.as_str()) {
                next.approx_bytes = next.approx_bytes.saturating_sub(old.approx_bytes());
            }
        }
        next.insert_composite_pod_groups(delta.upsert_composite_pod_groups)?;
        if !delta.storage.is_empty() {
            next.approx_bytes = next.approx_bytes.saturating_sub(next.storage.approx_bytes);
            next.storage.apply(delta.storage, false)?;
            next.approx_bytes += next.storage.approx_bytes;
        }
        if !delta.devices.is_empty() {
            next.approx_bytes = next.approx_bytes.saturating_sub(next.devices.approx_bytes);
            next.devices.apply(delta.devices, false)?;
            next.approx_bytes += next.devices.approx_bytes;
        }
        for uid in &delta.remove_pod_uids {
            next.remove_pod(uid);
        }
        for name in &delta.remove_nodes {
            next.remove_node(name);
        }
        let mut added = Vec::new();
        for spec in delta.upsert_nodes {
            next.count_images(&spec, 1);
            next.approx_bytes += spec.approx_bytes() + std::mem::size_of::<NodeEntry>() + 16;
            match next.position(&spec.name) {
                Ok(i) => {
                    let old = Arc::clone(&next.nodes[i].spec);
                    next.count_images(&old, -1);
                    next.approx_bytes = next
                        .approx_bytes
                        .saturating_sub(old.approx_bytes() + std::mem::size_of::<NodeEntry>() + 16);
                    let usage = next.nodes[i].usage.clone();
                    next.nodes[i] = Arc::new(next.entry(spec, usage));
                }
                Err(_) => {
                    let usage = next.orphans.remove(spec.name.as_str()).unwrap_or_default();
                    added.push(Arc::new(next.entry(spec, usage)));
                }
            }
        }
        if !added.is_empty() {
            next.nodes.extend(added);
            next.nodes.sort_unstable_by(|a, b| a.spec.name.cmp(&b.spec.name));
        }
        let mut interner = Interner::default();
        for (i, mut pod) in delta.upsert_pods.into_iter().enumerate() {
            if crate::engine::cancel::requested_at(i) {
                return Err(SnapshotError::Cancelled);
            }
            next.remove_pod(&pod.uid);
            if let Some(bound) = BoundPod::take_from(&mut pod, &mut interner) {
                next.add_pod(pod.uid.clone(), bound);
            }
        }
        if nodes_unchanged {
            next.follow_hot_fields(self);
        }
        if next.classes.len() > self.classes.len() {
            // Class ids index the static predicates cache: only one delta may extend a class list.
            let mut cache = self.static_cache.lock().unwrap_or_else(|e| e.into_inner());
            if !cache.extend(self.classes.len(), next.classes.len()) {
                drop(cache);
                next.static_cache = crate::engine::accel::class_cache::StaticCache::shared(next.classes.len());
            }
        }
        Ok(next)
    }

    /// This snapshot seen through the nodes at `positions` (ascending indices into
    /// [`Snapshot::nodes`]), everything else shared: what kube-scheduler's `AssumePlacement`
    /// shows a PodGroup cycle evaluating one placement (one topology domain). Only the candidate
    /// nodes are narrowed, as kube's `ListNodesInPlacement` narrows them: the topology plugins
    /// (InterPodAffinity, PodTopologySpread) still count the pods of the whole cluster, as kube's
    /// PreFilter and PreScore read `List()` (see [`Snapshot::topology_node`]). Costs the chosen
    /// nodes, not the snapshot: the rest is shared persistent maps and one shared node list.
    pub fn restrict(&self, positions: &[usize]) -> Snapshot {
        let nodes: Vec<Arc<NodeEntry>> = positions
            .iter()
            .filter_map(|&i| self.nodes.get(i).map(Arc::clone))
            .collect();
        // A view of a view is cut from the same whole cluster.
        let whole = match &self.whole {
            Some(w) => Whole {
                nodes: Arc::clone(&w.nodes),
                positions: positions.iter().filter_map(|&i| w.positions.get(i).copied()).collect(),
                order: std::sync::OnceLock::new(),
            },
            None => Whole {
                nodes: Arc::clone(self.caches.shared_nodes.get_or_init(|| {
                    self.add_derived(self.nodes.len() * std::mem::size_of::<Arc<NodeEntry>>());
                    Arc::from(self.nodes.as_slice())
                })),
                positions: positions
                    .iter()
                    .filter(|&&i| i < self.nodes.len())
                    .map(|&i| i as u32)
                    .collect(),
                order: std::sync::OnceLock::new(),
            },
        };
        Snapshot {
            pods: self.pods.clone(),
            orphans: self.orphans.clone(),
            image_nodes: self.image_nodes.clone(),
            classes: self.classes.clone(),
            class_index: self.class_index.clone(),
            namespaces: self.namespaces.clone(),
            affinity_pods: self.affinity_pods.clone(),
            class_subset: Some({
                let mut classes: Vec<u32> = nodes.iter().map(|n| n.class).collect();
                classes.sort_unstable();
                classes.dedup();
                Arc::from(classes)
            }),
            whole: Some(Arc::new(whole)),
            pdbs: self.pdbs.clone(),
            storage: self.storage.clone(),
            devices: self.devices.clone(),
            device_verdicts: Arc::clone(&self.device_verdicts),
            pod_groups: self.pod_groups.clone(),
            composite_pod_groups: self.composite_pod_groups.clone(),
            pod_group_pods: self.pod_group_pods.clone(),
            static_cache: Arc::clone(&self.static_cache),
            approx_bytes: self.approx_bytes,
            caches: Caches::default(),
            nodes,
        }
    }

    /// Whether this view ([`Snapshot::restrict`]) still shows the cluster of `current`, of which
    /// it was cut from an earlier state: its own nodes are the same as `current`'s, and so is
    /// every other node, unless the view never looked past its own nodes (no topology, pod index
    /// or topology order built), in which case it is pointed at `current`'s nodes and kept.
    /// `false`: the view is stale and must be cut again.
    pub(crate) fn follow_whole(&mut self, current: &Snapshot) -> bool {
        let Some(whole) = self.whole.as_mut() else {
            return false;
        };
        if whole.nodes.len() != current.nodes.len() {
            return false;
        }
        let own_same = whole
            .positions
            .iter()
            .zip(&self.nodes)
            .all(|(&p, n)| current.nodes.get(p as usize).is_some_and(|c| Arc::ptr_eq(c, n)));
        if !own_same {
            return false;
        }
        let current_nodes = current.caches.shared_nodes.get_or_init(|| {
            current.add_derived(current.nodes.len() * std::mem::size_of::<Arc<NodeEntry>>());
            Arc::from(current.nodes.as_slice())
        });
        if Arc::ptr_eq(&whole.nodes, current_nodes) {
            return true;
        }
        let looked_past = whole.order.get().is_some()
            || self.caches.pod_index.get().is_some()
            || !self
                .caches
                .topologies
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty();
        if looked_past {
            return false;
        }
        match Arc::get_mut(whole) {
            Some(w) => {
                w.nodes = Arc::clone(current_nodes);
                true
            }
            None => false,
        }
    }

    /// Takes the hot fields and their columns from `base` (the snapshot this one was applied on,
    /// with the same nodes in the same order) where `base` has built them: copied, and computed
    /// again only for the nodes whose entry changed (a batch's pods touch hundreds of nodes of
    /// tens of thousands), rather than for every node on first use.
    pub(in crate::engine) fn follow_hot_fields(&mut self, base: &Snapshot) {
        let Some(base_hot) = base.caches.hot.get() else {
            return;
        };
        if base.nodes.len() != self.nodes.len() {
            return;
        }
        let touched: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| !Arc::ptr_eq(&base.nodes[i], &self.nodes[i]))
            .collect();
        let mut hot = base_hot.clone();
        for &i in &touched {
            hot[i] = NodeHot::of(&self.nodes[i], &self.nodes[i].usage);
        }
        if let Some(base_columns) = base.caches.columns.get() {
            let mut columns = base_columns.clone();
            for &i in &touched {
                columns.set(i, &hot[i]);
            }
            self.add_derived(columns.approx_bytes());
            let _ = self.caches.columns.set(columns);
        }
        self.add_derived(hot.len() * std::mem::size_of::<NodeHot>());
        let _ = self.caches.hot.set(hot);
    }

    /// A node entry, with its class found or added.
    pub(in crate::engine) fn entry(&mut self, spec: NodeSpec, usage: NodeUsage) -> NodeEntry {
        let view = class_view(&spec);
        let hash = class_hash(&view);
        let existing = self.class_index.get(&hash).and_then(|ids| {
            ids.iter().copied().find(|&id| {
                let c = &self.classes[id as usize];
                c.labels == view.labels && c.taints == view.taints && c.unschedulable == view.unschedulable
            })
        });
        let class = match existing {
            Some(id) => id,
            None => {
                let id = self.classes.len() as u32;
                self.approx_bytes += view.approx_bytes() + 16;
                self.classes.push_back(Arc::new(view));
                self.class_index.entry(hash).or_default().push(id);
                id
            }
        };
        NodeEntry {
            name_hash: name_hash(&spec.name),
            class,
            images: image_index(&spec),
            spec: Arc::new(spec),
            usage,
        }
    }

    pub(in crate::engine) fn add_pod(&mut self, uid: Arc<str>, bound: BoundPod) {
        self.approx_bytes += bound.approx_bytes() + uid.len();
        let bound = Arc::new(bound);
        match self.position(&bound.node_name) {
            Ok(i) => Arc::make_mut(&mut self.nodes[i]).usage.bind(Arc::clone(&bound)),
            Err(_) => self
                .orphans
                .entry(bound.node_name.clone())
                .or_default()
                .bind(Arc::clone(&bound)),
        }
        if bound.affinity.is_some() {
            self.affinity_pods.insert(uid.clone(), Arc::clone(&bound));
        }
        self.track_pod_group(&uid, &bound, true);
        self.pods.insert(uid, bound);
    }

    pub(in crate::engine) fn remove_pod(&mut self, uid: &str) {
        // A persistent map's remove copies the path to where the key would be even when it is
        // absent: a full sync's pods (all new) would copy most of the map once per chunk.
        if !self.pods.contains_key(uid) {
            return;
        }
        let Some(bound) = self.pods.remove(uid) else {
            return;
        };
        if bound.affinity.is_some() {
            self.affinity_pods.remove(uid);
        }
        self.track_pod_group(&Arc::from(uid), &bound, false);
        self.approx_bytes = self.approx_bytes.saturating_sub(bound.approx_bytes() + uid.len());
        match self.position(&bound.node_name) {
            Ok(i) => Arc::make_mut(&mut self.nodes[i]).usage.unbind(&bound),
            Err(_) => {
                if let Some(u) = self.orphans.get_mut(&bound.node_name) {
                    u.unbind(&bound);
                    if u.is_empty() {
                        self.orphans.remove(&bound.node_name);
                    }
                }
            }
        }
    }

    pub(in crate::engine) fn remove_node(&mut self, name: &str) {
        let Ok(i) = self.position(name) else {
            return;
        };
        let entry = self.nodes.remove(i);
        self.count_images(&entry.spec, -1);
        self.approx_bytes = self
            .approx_bytes
            .saturating_sub(entry.spec.approx_bytes() + std::mem::size_of::<NodeEntry>() + 16);
        if !entry.usage.is_empty() {
            // Pods stay bound to a deleted node until they are deleted too, as in kube-scheduler's cache.
            self.orphans.insert(Arc::from(name), entry.usage.clone());
        }
    }

    pub(in crate::engine) fn count_images(&mut self, spec: &NodeSpec, delta: i64) {
        for name in spec.images.keys() {
            let key: &str = name;
            match self.image_nodes.get_mut(key) {
                Some(c) => {
                    *c = (*c as i64 + delta).max(0) as u32;
                    if *c == 0 {
                        self.image_nodes.remove(key);
                    }
                }
                None if delta > 0 => {
                    self.image_nodes.insert(Arc::from(key), delta as u32);
                }
                None => {}
            }
        }
    }
}
