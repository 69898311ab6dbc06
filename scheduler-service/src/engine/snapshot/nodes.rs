//! A snapshot's nodes: each with its class, its images and the usage of its pods.

use std::sync::Arc;

use super::pods::NodeUsage;
use crate::engine::hot::{port_bits, NodeHot, PortKeys};
use crate::engine::model::{Labels, NodeSpec};

/// Label keys whose value is unique per node. They are left out of node classes; a pod whose
/// selector or affinity names one is evaluated node by node instead of class by class.
pub const NODE_UNIQUE_LABELS: &[&str] = &["kubernetes.io/hostname"];

impl NodeHot {
    /// The hot fields of an entry with the given usage.
    pub fn of(entry: &NodeEntry, usage: &NodeUsage) -> Self {
        let a = &entry.spec.allocatable;
        Self {
            alloc_cpu: a.milli_cpu,
            alloc_memory: a.memory,
            alloc_ephemeral: a.ephemeral_storage,
            allowed_pods: entry.spec.allowed_pods,
            req_cpu: usage.requested.milli_cpu,
            req_memory: usage.requested.memory,
            req_ephemeral: usage.requested.ephemeral_storage,
            non_zero_cpu: usage.non_zero_cpu,
            non_zero_memory: usage.non_zero_memory,
            pod_count: usage.pod_count,
            name_hash: entry.name_hash,
            port_bits: port_bits(&usage.host_ports),
            port_keys: PortKeys::of(&usage.host_ports),
            class: entry.class,
            has_scalars: !a.scalars.is_empty(),
        }
    }
}

/// A node with the usage of its pods.
#[derive(Debug, Clone)]
pub struct NodeEntry {
    /// The node.
    pub spec: Arc<NodeSpec>,
    /// Hash of the node name, for tie-breaking.
    pub name_hash: u64,
    /// Index of the node's class in [`Snapshot::classes`].
    pub class: u32,
    /// The node's images as (hash of the name, size in bytes), sorted by hash.
    pub images: Arc<[(u64, i64)]>,
    /// Usage of the pods bound to it.
    pub usage: NodeUsage,
}

/// The node as one evaluation sees it: its hot fields, and the entry and detailed usage for the
/// rare checks that need them (host ports, extended resources, a pinned node name).
pub struct NodeView<'n> {
    /// The node's index in the snapshot.
    pub index: usize,
    /// Its hot fields (with the batch's placements so far).
    pub hot: &'n NodeHot,
    /// Its entry: the node itself, its class, its images.
    pub entry: &'n NodeEntry,
    /// The usage of its pods (with the batch's placements so far).
    pub usage: &'n NodeUsage,
}

/// The static view of a node that its class shares: labels but the unique ones, taints, cordon.
pub(super) fn class_view(spec: &NodeSpec) -> NodeSpec {
    NodeSpec {
        name: String::new(),
        labels: spec
            .labels
            .iter()
            .filter(|(k, _)| !NODE_UNIQUE_LABELS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        taints: spec.taints.clone(),
        unschedulable: spec.unschedulable,
        ..NodeSpec::default()
    }
}

pub(super) fn class_hash(view: &NodeSpec) -> u64 {
    let mut labels: Vec<(&String, &String)> = view.labels.iter().collect();
    labels.sort_unstable();
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for (k, v) in labels {
        h.update(k.as_bytes());
        h.update(&[0]);
        h.update(v.as_bytes());
        h.update(&[1]);
    }
    for t in &view.taints {
        h.update(t.key.as_bytes());
        h.update(&[0]);
        h.update(t.value.as_bytes());
        h.update(&[t.effect as u8 + 2]);
    }
    h.update(&[u8::from(view.unschedulable)]);
    h.digest()
}

pub(super) fn image_index(spec: &NodeSpec) -> Arc<[(u64, i64)]> {
    let mut v: Vec<(u64, i64)> = spec.images.iter().map(|(n, s)| (image_hash(n), *s)).collect();
    v.sort_unstable();
    v.into()
}

pub(super) fn namespace_bytes(name: &str, labels: &Labels) -> usize {
    name.len() + 64 + labels.iter().map(|(k, v)| k.len() + v.len() + 48).sum::<usize>()
}

/// Hash of an image name, for the per-node image index.
pub fn image_hash(name: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(name.as_bytes())
}

/// Hash of a node name used to break score ties; stable across processes and versions.
pub fn name_hash(name: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(name.as_bytes())
}
