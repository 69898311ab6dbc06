//! The parts of a snapshot built on first use (kept in its [`super::caches::Caches`]): image
//! postings, hot fields and their columns, the pod index, topologies, and the values the layers
//! above keep with it; and the bytes they hold.

use std::sync::Arc;

use super::caches::{MAX_CACHED_TOPOLOGIES, MAX_KEPT};
use super::indexes::{label_hash, postings_bytes, ImagePostings, PodIndex, Topology};
use super::pods::BoundPod;
use super::{NodeHot, Snapshot};
use crate::engine::model::Labels;

impl Snapshot {
    /// For each image (by hash), the nodes that have it, as (index in [`Snapshot::nodes`], size).
    pub fn image_postings(&self) -> &ImagePostings {
        self.caches.image_postings.get_or_init(|| {
            let mut m: std::collections::HashMap<u64, Vec<(u32, i64)>> = std::collections::HashMap::new();
            for (i, e) in self.nodes.iter().enumerate() {
                for (h, size) in e.images.iter() {
                    m.entry(*h).or_default().push((i as u32, *size));
                }
            }
            self.add_derived(postings_bytes(&m));
            Arc::new(m)
        })
    }

    /// The hot fields of every node, in the order of [`Snapshot::nodes`].
    pub fn hot(&self) -> &[NodeHot] {
        self.caches.hot.get_or_init(|| {
            self.add_derived(self.nodes.len() * std::mem::size_of::<NodeHot>());
            self.nodes.iter().map(|e| NodeHot::of(e, &e.usage)).collect()
        })
    }

    /// [`Snapshot::hot`] by column (see [`crate::engine::accel::columns`]).
    pub fn columns(&self) -> &crate::engine::accel::columns::HotColumns {
        self.caches.columns.get_or_init(|| {
            let columns = crate::engine::accel::columns::HotColumns::of(self.hot());
            self.add_derived(columns.approx_bytes());
            columns
        })
    }

    /// The bound pods on known nodes with a label index.
    pub fn pod_index(&self) -> &PodIndex {
        self.caches.pod_index.get_or_init(|| {
            let mut index = PodIndex::default();
            // Pods share their label sets (interned): hash each set once.
            let mut hashed: std::collections::HashMap<*const Labels, Vec<u64>> = std::collections::HashMap::new();
            for node in 0..self.topology_len() {
                let Some(entry) = self.topology_node(node) else {
                    break;
                };
                for pod in &entry.usage.pods {
                    let at = index.pods.len() as u32;
                    let hashes = hashed
                        .entry(Arc::as_ptr(&pod.labels))
                        .or_insert_with(|| pod.labels.iter().map(|(k, v)| label_hash(k, v)).collect());
                    for h in hashes.iter() {
                        index.by_label.entry(*h).or_default().push(at);
                    }
                    index.pods.push((node as u32, Arc::clone(pod)));
                }
            }
            let postings: usize = index.by_label.values().map(|v| 64 + 4 * v.capacity()).sum();
            self.add_derived(index.pods.capacity() * std::mem::size_of::<(u32, Arc<BoundPod>)>() + postings);
            index
        })
    }

    /// The nodes grouped by the value of the label `key`.
    pub fn topology(&self, key: &str) -> Arc<Topology> {
        let mut cache = self.caches.topologies.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = cache.get(key) {
            return Arc::clone(t);
        }
        let mut index: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        let mut values = Vec::new();
        let node_domain = (0..self.topology_len())
            .filter_map(|i| self.topology_node(i))
            .map(|e| match e.spec.labels.get(key) {
                None => Topology::NONE,
                Some(v) => *index.entry(v.as_str()).or_insert_with(|| {
                    values.push(v.clone());
                    (values.len() - 1) as u32
                }),
            })
            .collect();
        let topo = Topology { node_domain, values };
        let topo = Arc::new(topo);
        // Pods name topology keys freely: past a few dozen, one is built for each use instead of
        // kept, so a snapshot holds at most that many.
        if cache.len() < MAX_CACHED_TOPOLOGIES {
            let bytes = 4 * topo.node_domain.len()
                + topo.values.iter().map(|v| 24 + v.len() + 16).sum::<usize>()
                + 2 * key.len()
                + 96;
            self.add_derived(bytes);
            cache.insert(key.to_string(), Arc::clone(&topo));
        }
        topo
    }

    /// Approximate memory held by the snapshot (ignoring sharing with other snapshots): its
    /// nodes, pods, namespaces and budgets, the parts built since on first use, and its lineage's
    /// static predicates cache. It grows as evaluations build those parts.
    pub fn approx_bytes(&self) -> usize {
        let statics = self
            .static_cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .approx_bytes();
        self.approx_bytes
            + std::mem::size_of::<Self>()
            + self.caches.derived.load(std::sync::atomic::Ordering::Relaxed)
            + statics
    }

    /// The value kept with this snapshot for `key` (the same object, by address), made by `make`
    /// on first use and counted with the derived parts (`bytes` of it); the most recent
    /// [`MAX_KEPT`] values are kept. The layers above keep what they derive from a snapshot here
    /// (the node outcomes of a policy's rules, see [`crate::engine::rules`]) without the snapshot
    /// knowing their types.
    pub(in crate::engine) fn kept<K, V>(
        &self,
        key: &Arc<K>,
        make: impl FnOnce(&Self) -> V,
        bytes: impl Fn(&V) -> usize,
    ) -> Arc<V>
    where
        K: Send + Sync + 'static,
        V: Send + Sync + 'static,
    {
        let mut kept = self.caches.kept.lock().unwrap_or_else(|e| e.into_inner());
        let found = kept.iter().find_map(|(k, v, _)| {
            let same = std::ptr::addr_eq(Arc::as_ptr(k), Arc::as_ptr(key));
            same.then(|| Arc::clone(v).downcast::<V>().ok()).flatten()
        });
        if let Some(value) = found {
            return value;
        }
        let value = Arc::new(make(self));
        if kept.len() >= MAX_KEPT {
            let (_, _, gone) = kept.remove(0);
            self.sub_derived(gone);
        }
        let size = bytes(&value);
        self.add_derived(size);
        let key: Arc<dyn std::any::Any + Send + Sync> = Arc::clone(key) as _;
        let stored: Arc<dyn std::any::Any + Send + Sync> = Arc::clone(&value) as _;
        kept.push((key, stored, size));
        value
    }

    /// Counts `bytes` fewer of the parts built on first use (let go since).
    pub(in crate::engine) fn sub_derived(&self, bytes: usize) {
        if bytes > 0 {
            let _ = self.caches.derived.fetch_update(
                std::sync::atomic::Ordering::Relaxed,
                std::sync::atomic::Ordering::Relaxed,
                |d| Some(d.saturating_sub(bytes)),
            );
        }
    }

    /// Counts `bytes` more of the parts built on first use.
    pub(in crate::engine) fn add_derived(&self, bytes: usize) {
        self.caches
            .derived
            .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }
}
