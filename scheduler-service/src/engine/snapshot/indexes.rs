//! Indexes built from a snapshot's nodes and pods: topologies, the pod label index, image
//! postings, and the whole cluster a view was cut from.

use std::sync::Arc;

use super::nodes::NodeEntry;
use super::pods::BoundPod;

/// The nodes of a snapshot grouped by the value of one label (a topology key).
#[derive(Debug, Default)]
pub struct Topology {
    /// Per node (in the snapshot's topology order, [`Snapshot::topology_node`]: its own nodes in
    /// [`Snapshot::nodes`] order, then, for a view, the rest of the cluster), the index of its
    /// value in `values`, or [`Topology::NONE`] when the node lacks the label.
    pub node_domain: Vec<u32>,
    /// The distinct values.
    pub values: Vec<String>,
}

impl Topology {
    /// The domain of a node without the label.
    pub const NONE: u32 = u32::MAX;
}

/// The cluster a view ([`Snapshot::restrict`]) was cut from.
#[derive(Debug)]
pub(super) struct Whole {
    /// Every node of the cluster, sorted by name.
    pub(super) nodes: Arc<[Arc<NodeEntry>]>,
    /// Per node of the view, its index in `nodes`.
    pub(super) positions: Vec<u32>,
    /// Where the view's topology order puts the other nodes; built on first use.
    pub(super) order: std::sync::OnceLock<WholeOrder>,
}

/// The topology order of a view: its own nodes, then the others in name order.
#[derive(Debug)]
pub(super) struct WholeOrder {
    /// The nodes after the view's own, as indices into [`Whole::nodes`].
    pub(super) outside: Vec<u32>,
    /// Per node of [`Whole::nodes`], its index in the topology order.
    pub(super) topology_of: Vec<u32>,
}

impl Whole {
    pub(super) fn order(&self) -> &WholeOrder {
        self.order.get_or_init(|| {
            let mut topology_of = vec![u32::MAX; self.nodes.len()];
            for (i, &p) in self.positions.iter().enumerate() {
                if let Some(t) = topology_of.get_mut(p as usize) {
                    *t = i as u32;
                }
            }
            let mut outside = Vec::with_capacity(self.nodes.len().saturating_sub(self.positions.len()));
            let mut next = self.positions.len() as u32;
            for (w, t) in topology_of.iter_mut().enumerate() {
                if *t == u32::MAX {
                    *t = next;
                    next += 1;
                    outside.push(w as u32);
                }
            }
            WholeOrder { outside, topology_of }
        })
    }
}

/// The bound pods of a snapshot on known nodes, with a label index; built on first use.
#[derive(Debug, Default)]
pub struct PodIndex {
    /// Each pod with the index of its node in [`Snapshot::nodes`].
    pub pods: Vec<(u32, Arc<BoundPod>)>,
    /// Hash of `key=value` to the positions in `pods` of the pods with that label.
    pub(super) by_label: std::collections::HashMap<u64, Vec<u32>>,
}

/// Hash of a label pair, for the label index.
pub(super) fn label_hash(key: &str, value: &str) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(key.as_bytes());
    h.update(&[0]);
    h.update(value.as_bytes());
    h.digest()
}

impl PodIndex {
    /// Positions in [`PodIndex::pods`] of every pod that may match the selector: the postings of
    /// its most selective `In` requirement, or every pod when it has none. Callers still match.
    pub fn candidates(&self, selector: &crate::engine::model::LabelSelector) -> Vec<u32> {
        use crate::engine::model::SelectorOp;
        let mut best: Option<Vec<u32>> = None;
        for r in &selector.requirements {
            if let SelectorOp::In(values) = &r.op {
                let mut v: Vec<u32> = values
                    .iter()
                    .filter_map(|x| self.by_label.get(&label_hash(&r.key, x)))
                    .flatten()
                    .copied()
                    .collect();
                if best.as_ref().is_none_or(|b| v.len() < b.len()) {
                    if values.len() > 1 {
                        v.sort_unstable();
                        v.dedup();
                    }
                    best = Some(v);
                }
            }
        }
        best.unwrap_or_else(|| (0..self.pods.len() as u32).collect())
    }
}

/// Image hash to (node index, image size) of every node having the image.
pub type ImagePostings = std::collections::HashMap<u64, Vec<(u32, i64)>>;

/// Bytes of an image postings index.
pub(super) fn postings_bytes(p: &ImagePostings) -> usize {
    p.values().map(|v| 64 + 16 * v.capacity()).sum()
}
