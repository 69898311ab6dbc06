//! The cluster snapshot: nodes sorted by name, each with the usage of the pods bound to it.
//!
//! Usage is computed here, once, from the bound pods, the same way for every caller. A snapshot is
//! immutable; [`Snapshot::apply`] makes a new one from a delta and shares every unchanged node and
//! pod with its base (nodes are `Arc`s, the pod index is a persistent map), so a delta that touches
//! one node costs in proportion to the change, not to the cluster.

use std::sync::Arc;

use super::model::{HostPort, Labels, NodeSpec, PodAffinityTerms, PodSpec};
use super::pdb::Pdb;
use super::resources::Resources;

pub use super::hot::{keys_conflict, port_bits, port_key, port_mask, NodeHot, PortKeys};

/// The resources that the pods bound to a node use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeUsage {
    /// Sum of the pods' effective requests.
    pub requested: Resources,
    /// Sum of the pods' cpu requests with scoring defaults for missing ones (millicores).
    pub non_zero_cpu: i64,
    /// Sum of the pods' memory requests with scoring defaults for missing ones (bytes).
    pub non_zero_memory: i64,
    /// Number of pods.
    pub pod_count: i64,
    /// Host ports in use (a multiset: one entry per pod and port).
    pub host_ports: Vec<HostPort>,
    /// The volumes of the node's pods the volume filters read, with each pod's namespace (a
    /// multiset, like `host_ports`).
    pub volumes: Vec<(Arc<str>, super::volumes::PodVolume)>,
    /// The bound pods themselves, lowest priority first (then by uid): preemption's order. Only
    /// [`NodeUsage::bind`] and [`NodeUsage::unbind`] keep it; [`NodeUsage::add`] counts a pod only.
    pub pods: Vec<Arc<BoundPod>>,
}

/// The order of a node's pods for preemption: lowest priority first, then by uid.
fn victim_order(p: &BoundPod) -> Option<(i32, &str)> {
    p.meta.as_ref().map(|m| (m.priority, &*m.uid))
}

impl NodeUsage {
    /// Counts a pod against the node.
    pub fn add(&mut self, pod: &BoundPod) {
        self.requested.add(&pod.requests);
        self.non_zero_cpu = self.non_zero_cpu.saturating_add(pod.non_zero_cpu);
        self.non_zero_memory = self.non_zero_memory.saturating_add(pod.non_zero_memory);
        self.pod_count += 1;
        self.host_ports.extend(pod.host_ports.iter().cloned());
        if let Some(volumes) = &pod.volumes {
            self.volumes
                .extend(volumes.iter().map(|v| (Arc::clone(&pod.namespace), v.clone())));
        }
    }

    /// Takes a pod counted by [`NodeUsage::add`] back off the node.
    pub fn remove(&mut self, pod: &BoundPod) {
        self.requested.sub(&pod.requests);
        self.non_zero_cpu = self.non_zero_cpu.saturating_sub(pod.non_zero_cpu);
        self.non_zero_memory = self.non_zero_memory.saturating_sub(pod.non_zero_memory);
        self.pod_count -= 1;
        for hp in &pod.host_ports {
            if let Some(i) = self.host_ports.iter().position(|x| x == hp) {
                self.host_ports.swap_remove(i);
            }
        }
        for v in pod.volumes.iter().flat_map(|v| v.iter()) {
            if let Some(i) = self.volumes.iter().position(|(ns, x)| x == v && **ns == *pod.namespace) {
                self.volumes.swap_remove(i);
            }
        }
    }

    /// Counts a bound pod and keeps it in [`NodeUsage::pods`], in order.
    pub fn bind(&mut self, pod: Arc<BoundPod>) {
        self.add(&pod);
        let key = victim_order(&pod);
        let at = self.pods.partition_point(|p| victim_order(p) <= key);
        self.pods.insert(at, pod);
    }

    /// Takes a pod counted by [`NodeUsage::bind`] back off the node and out of its list.
    pub fn unbind(&mut self, pod: &Arc<BoundPod>) {
        self.remove(pod);
        if let Some(i) = self.pods.iter().position(|p| Arc::ptr_eq(p, pod)) {
            self.pods.remove(i);
        }
    }

    /// True when no pod is counted.
    pub fn is_empty(&self) -> bool {
        self.pod_count == 0
    }
}

/// What the snapshot keeps of a bound pod: enough to count it and to take it off again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundPod {
    /// Node the pod is bound to.
    pub node_name: Arc<str>,
    /// Effective request.
    pub requests: Resources,
    /// Cpu with scoring defaults (millicores).
    pub non_zero_cpu: i64,
    /// Memory with scoring defaults (bytes).
    pub non_zero_memory: i64,
    /// Host ports.
    pub host_ports: Vec<HostPort>,
    /// metadata.namespace.
    pub namespace: Arc<str>,
    /// metadata.labels.
    pub labels: Arc<Labels>,
    /// Pod affinity and anti-affinity terms, when the pod has any.
    pub affinity: Option<Arc<(PodAffinityTerms, PodAffinityTerms)>>,
    /// Priority, start time and gang, for preemption and gangs; `None` for a pod a batch placed.
    pub meta: Option<Arc<PodMeta>>,
    /// metadata.deletionTimestamp is set: still counted against its node (resources, ports,
    /// affinity), but not by PodTopologySpread.
    pub terminating: bool,
    /// The volumes the volume filters read, when the pod has any.
    pub volumes: Option<Arc<[super::volumes::PodVolume]>>,
}

/// What preemption and gangs read of a bound pod (besides its namespace and labels).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodMeta {
    /// metadata.uid.
    pub uid: Arc<str>,
    /// spec.priority.
    pub priority: i32,
    /// status.startTime in Unix seconds; 0 when unknown.
    pub start_time: i64,
    /// The gang's key ("namespace/name"), if the pod belongs to one.
    pub gang: Option<Arc<str>>,
    /// Its PodGroup's key ("namespace/name"), if it names one.
    pub pod_group: Option<Arc<str>>,
}

impl PodMeta {
    /// The meta of a pod spec.
    pub fn of(pod: &PodSpec) -> Arc<Self> {
        Arc::new(Self {
            uid: pod.uid.clone(),
            priority: pod.priority,
            start_time: pod.start_time,
            gang: pod.gang.as_ref().map(|g| g.key.clone()),
            pod_group: pod.pod_group.clone(),
        })
    }
}

impl BoundPod {
    /// The part of a pod spec the snapshot keeps; `None` when the pod has no node.
    pub fn from_spec(pod: &PodSpec) -> Option<Self> {
        let node = pod.node_name.as_deref().filter(|n| !n.is_empty())?;
        Some(Self {
            node_name: Arc::from(node),
            requests: pod.requests.clone(),
            non_zero_cpu: pod.non_zero_requests.milli_cpu,
            non_zero_memory: pod.non_zero_requests.memory,
            host_ports: pod.host_ports.clone(),
            namespace: Arc::from(pod.namespace.as_str()),
            labels: Arc::new(pod.labels.clone()),
            affinity: pod
                .has_pod_affinity()
                .then(|| Arc::new((pod.pod_affinity.clone(), pod.pod_anti_affinity.clone()))),
            meta: Some(PodMeta::of(pod)),
            terminating: pod.terminating,
            volumes: (!pod.volumes.is_empty()).then(|| Arc::from(pod.volumes.as_slice())),
        })
    }

    /// Like [`BoundPod::from_spec`], moving the labels out of the spec instead of copying them and
    /// sharing namespace names and equal label maps (the pods of one workload have the same
    /// labels) through `interner`, so a snapshot holds few small allocations per pod.
    fn take_from(pod: &mut PodSpec, interner: &mut Interner) -> Option<Self> {
        let node = pod.node_name.as_deref().filter(|n| !n.is_empty())?;
        let namespace = match interner.namespaces.get(&pod.namespace) {
            Some(ns) => Arc::clone(ns),
            None => {
                let ns: Arc<str> = Arc::from(pod.namespace.as_str());
                interner.namespaces.insert(pod.namespace.clone(), Arc::clone(&ns));
                ns
            }
        };
        let labels = match interner.labels.get(&pod.labels) {
            Some(l) => Arc::clone(l),
            None => {
                let l = Arc::new(std::mem::take(&mut pod.labels));
                interner.labels.insert((*l).clone(), Arc::clone(&l));
                l
            }
        };
        let meta = Some(PodMeta::of(pod));
        Some(Self {
            meta,
            terminating: pod.terminating,
            volumes: (!pod.volumes.is_empty()).then(|| Arc::from(std::mem::take(&mut pod.volumes))),
            node_name: Arc::from(node),
            requests: pod.requests.clone(),
            non_zero_cpu: pod.non_zero_requests.milli_cpu,
            non_zero_memory: pod.non_zero_requests.memory,
            host_ports: std::mem::take(&mut pod.host_ports),
            namespace,
            labels,
            affinity: pod.has_pod_affinity().then(|| {
                Arc::new((
                    std::mem::take(&mut pod.pod_affinity),
                    std::mem::take(&mut pod.pod_anti_affinity),
                ))
            }),
        })
    }

    /// Approximate bytes a snapshot holds for the pod: its own, its entries in the pod map and
    /// its node's lists, its host ports (kept by its node too), its labels and terms. Label maps
    /// and namespace names shared between pods are counted for each (an upper bound).
    fn approx_bytes(&self) -> usize {
        use super::model::{labels_bytes, string_bytes};
        let ports: usize = self
            .host_ports
            .iter()
            .map(|p| std::mem::size_of::<HostPort>() + string_bytes(&p.ip))
            .sum();
        std::mem::size_of::<Self>()
            + 96
            + string_bytes(&self.node_name)
            + string_bytes(&self.namespace)
            + self.requests.approx_bytes()
            + 2 * ports
            + 16
            + labels_bytes(&self.labels)
            + self.affinity.as_ref().map_or(0, |a| {
                96 + std::mem::size_of::<(PodAffinityTerms, PodAffinityTerms)>()
                    + a.0.approx_bytes()
                    + a.1.approx_bytes()
            })
            + self.meta.as_ref().map_or(0, |m| {
                std::mem::size_of::<PodMeta>() + 16 + m.gang.as_deref().map_or(0, string_bytes)
            })
            + self.volumes.as_ref().map_or(0, |v| {
                16 + v.iter().map(super::volumes::PodVolume::approx_bytes).sum::<usize>()
            })
    }
}

/// Shares namespace names and label maps between the pods of a snapshot being built.
#[derive(Default)]
struct Interner {
    namespaces: std::collections::HashMap<String, Arc<str>, FastHasher>,
    labels: std::collections::HashMap<Labels, Arc<Labels>, FastHasher>,
}

/// The hasher of the interners: foldhash, seeded per map from a per-process random seed (keys
/// are callers' labels, so the seed keeps collisions from being chosen), in place of SipHash.
type FastHasher = foldhash::fast::RandomState;

/// Bound pods by uid, ordered: a full sync's chunks carry pods in uid order, so each chunk adds
/// at the map's right edge and copies only that edge from the snapshot it applies to. A hash map
/// spreads a chunk over the whole map, and copied most of it once per chunk (at 1,000,000 pods
/// in chunks of 50,000, applying a chunk took 68 ms for the first and 137 ms for the last).
type PodMap = imbl::OrdMap<Arc<str>, Arc<BoundPod>>;

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
    DuplicateStorage(#[from] super::volumes::DuplicateStorageObject),
    /// The call building the snapshot ended before it was built ([`super::cancel`]).
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
    pub storage: super::volumes::StorageDelta,
    /// DeviceClasses, ResourceClaims and ResourceSlices changed.
    pub devices: super::devices::DeviceDelta,
    /// PodGroups added or replaced by namespace and name.
    pub upsert_pod_groups: Vec<super::model::PodGroup>,
    /// PodGroups removed, as "namespace/name" (unknown ones are ignored).
    pub remove_pod_groups: Vec<String>,
    /// CompositePodGroups added or replaced by namespace and name.
    pub upsert_composite_pod_groups: Vec<super::model::CompositePodGroup>,
    /// CompositePodGroups removed, as "namespace/name" (unknown ones are ignored).
    pub remove_composite_pod_groups: Vec<String>,
}

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
struct Whole {
    /// Every node of the cluster, sorted by name.
    nodes: Arc<[Arc<NodeEntry>]>,
    /// Per node of the view, its index in `nodes`.
    positions: Vec<u32>,
    /// Where the view's topology order puts the other nodes; built on first use.
    order: std::sync::OnceLock<WholeOrder>,
}

/// The topology order of a view: its own nodes, then the others in name order.
#[derive(Debug)]
struct WholeOrder {
    /// The nodes after the view's own, as indices into [`Whole::nodes`].
    outside: Vec<u32>,
    /// Per node of [`Whole::nodes`], its index in the topology order.
    topology_of: Vec<u32>,
}

impl Whole {
    fn order(&self) -> &WholeOrder {
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
    by_label: std::collections::HashMap<u64, Vec<u32>>,
}

/// Hash of a label pair, for the label index.
fn label_hash(key: &str, value: &str) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(key.as_bytes());
    h.update(&[0]);
    h.update(value.as_bytes());
    h.digest()
}

impl PodIndex {
    /// Positions in [`PodIndex::pods`] of every pod that may match the selector: the postings of
    /// its most selective `In` requirement, or every pod when it has none. Callers still match.
    pub fn candidates(&self, selector: &super::model::LabelSelector) -> Vec<u32> {
        use super::model::SelectorOp;
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
    /// Image hash to (node index, image size) for every node having it; built on first use,
    /// because node indices change with deltas that add or remove nodes (a delta that changes no
    /// node shares its base's).
    image_postings: std::sync::OnceLock<Arc<ImagePostings>>,
    /// The hot fields of every node, in node order; built on first use.
    hot: std::sync::OnceLock<Vec<NodeHot>>,
    /// The same by column, for the plain pass's vector kernel; built on first use.
    columns: std::sync::OnceLock<super::accel::columns::HotColumns>,
    /// Namespace labels by name (for namespace selectors).
    namespaces: imbl::HashMap<Arc<str>, Arc<Labels>>,
    /// Bound pods with pod affinity or anti-affinity terms, by uid.
    affinity_pods: imbl::OrdMap<Arc<str>, Arc<BoundPod>>,
    /// Bound pods by node with a label index; built on first use.
    pod_index: std::sync::OnceLock<PodIndex>,
    /// Topologies by key; built on first use of each key.
    topologies: std::sync::Mutex<std::collections::HashMap<String, Arc<Topology>>>,
    /// For a view of some nodes ([`Snapshot::restrict`]): the classes its nodes have, ascending.
    class_subset: Option<Arc<[u32]>>,
    /// For a view of some nodes ([`Snapshot::restrict`]): the whole cluster it was cut from, which
    /// the topology plugins still see.
    whole: Option<Arc<Whole>>,
    /// [`Snapshot::nodes`] as a shared slice, for the views cut from this snapshot; built on
    /// first use.
    shared_nodes: std::sync::OnceLock<Arc<[Arc<NodeEntry>]>>,
    /// PodDisruptionBudgets by "namespace/name".
    pdbs: imbl::OrdMap<String, Arc<Pdb>>,
    /// PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes.
    storage: super::volumes::StorageObjects,
    /// DeviceClasses, ResourceClaims and ResourceSlices.
    devices: super::devices::DeviceObjects,
    /// What DynamicResources' PreFilter reads of them for every pod; built on first use.
    device_index: std::sync::OnceLock<Arc<super::devices::DeviceIndex>>,
    /// DynamicResources' allocation verdicts, shared by the snapshots derived from one by deltas
    /// that change no DeviceClass (see [`super::devices::SharedVerdicts`]).
    device_verdicts: Arc<super::devices::SharedVerdicts>,
    /// Bound members per gang key; built on first use.
    gang_members: std::sync::OnceLock<std::collections::HashMap<Arc<str>, u32>>,
    /// PodGroups by "namespace/name".
    pod_groups: imbl::OrdMap<Arc<str>, Arc<super::model::PodGroup>>,
    /// CompositePodGroups by "namespace/name".
    composite_pod_groups: imbl::OrdMap<Arc<str>, Arc<super::model::CompositePodGroup>>,
    /// The bound pods of each PodGroup (uid to node), by the group's key; kept as pods come and go.
    pod_group_pods: imbl::HashMap<Arc<str>, imbl::OrdMap<Arc<str>, Arc<str>>>,
    /// Static predicates per node class of the pods evaluated so far, shared by the snapshots
    /// derived from one full snapshot by deltas (their classes only grow).
    static_cache: Arc<std::sync::Mutex<super::accel::class_cache::StaticCache>>,
    /// Values derived from this snapshot for objects of the layers above (the node outcomes of a
    /// policy's rules), found by the object's address: the most recent [`MAX_KEPT`].
    kept: std::sync::Mutex<Vec<KeptEntry>>,
    approx_bytes: usize,
    /// Bytes of the parts built on first use (hot fields, columns, indexes, topologies).
    derived: std::sync::atomic::AtomicUsize,
}

/// A value kept with a snapshot: the object it is for (kept, so the entry is found by address),
/// the value, and its bytes.
type KeptEntry = (
    Arc<dyn std::any::Any + Send + Sync>,
    Arc<dyn std::any::Any + Send + Sync>,
    usize,
);

/// Values a snapshot keeps (see [`Snapshot::kept`]).
const MAX_KEPT: usize = 8;

/// Topology keys a snapshot keeps the [`Topology`] of.
const MAX_CACHED_TOPOLOGIES: usize = 64;

/// Bytes of an image postings index.
fn postings_bytes(p: &ImagePostings) -> usize {
    p.values().map(|v| 64 + 16 * v.capacity()).sum()
}

/// Hash of an image name, for the per-node image index.
pub fn image_hash(name: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(name.as_bytes())
}

/// The static view of a node that its class shares: labels but the unique ones, taints, cordon.
fn class_view(spec: &NodeSpec) -> NodeSpec {
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

fn class_hash(view: &NodeSpec) -> u64 {
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

fn image_index(spec: &NodeSpec) -> Arc<[(u64, i64)]> {
    let mut v: Vec<(u64, i64)> = spec.images.iter().map(|(n, s)| (image_hash(n), *s)).collect();
    v.sort_unstable();
    v.into()
}

fn namespace_bytes(name: &str, labels: &Labels) -> usize {
    name.len() + 64 + labels.iter().map(|(k, v)| k.len() + v.len() + 48).sum::<usize>()
}

/// Hash of a node name used to break score ties; stable across processes and versions.
pub fn name_hash(name: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(name.as_bytes())
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
            if super::cancel::requested_at(i) {
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
            if super::cancel::requested_at(index) {
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
        snap.static_cache = super::accel::class_cache::StaticCache::shared(snap.classes.len());
        Ok(snap)
    }

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
        if let Some(p) = self.image_postings.get().filter(|_| nodes_unchanged) {
            let _ = image_postings.set(Arc::clone(p));
        }
        let mut next = Snapshot {
            nodes: self.nodes.clone(),
            pods: self.pods.clone(),
            orphans: self.orphans.clone(),
            image_nodes: self.image_nodes.clone(),
            classes: self.classes.clone(),
            class_index: self.class_index.clone(),
            image_postings,
            hot: std::sync::OnceLock::new(),
            columns: std::sync::OnceLock::new(),
            namespaces: self.namespaces.clone(),
            affinity_pods: self.affinity_pods.clone(),
            pod_index: std::sync::OnceLock::new(),
            // A topology reads node labels only: kept while no node changes.
            topologies: std::sync::Mutex::new(if nodes_unchanged {
                self.topologies.lock().unwrap_or_else(|e| e.into_inner()).clone()
            } else {
                Default::default()
            }),
            class_subset: None,
            whole: None,
            shared_nodes: std::sync::OnceLock::new(),
            pdbs: self.pdbs.clone(),
            storage: self.storage.clone(),
            devices: self.devices.clone(),
            device_index: std::sync::OnceLock::new(),
            device_verdicts: if delta.devices.upsert_classes.is_empty() && delta.devices.remove_classes.is_empty() {
                Arc::clone(&self.device_verdicts)
            } else {
                Arc::default()
            },
            gang_members: std::sync::OnceLock::new(),
            pod_groups: self.pod_groups.clone(),
            composite_pod_groups: self.composite_pod_groups.clone(),
            pod_group_pods: self.pod_group_pods.clone(),
            static_cache: Arc::clone(&self.static_cache),
            kept: Default::default(),
            approx_bytes: self.approx_bytes,
            derived: std::sync::atomic::AtomicUsize::new(0),
        };
        if let Some(p) = next.image_postings.get() {
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
            if let Some(old) = next.pod_groups.remove(key.as_str()) {
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
            if super::cancel::requested_at(i) {
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
                next.static_cache = super::accel::class_cache::StaticCache::shared(next.classes.len());
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
                nodes: Arc::clone(self.shared_nodes.get_or_init(|| {
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
            image_postings: std::sync::OnceLock::new(),
            hot: std::sync::OnceLock::new(),
            columns: std::sync::OnceLock::new(),
            namespaces: self.namespaces.clone(),
            affinity_pods: self.affinity_pods.clone(),
            pod_index: std::sync::OnceLock::new(),
            topologies: Default::default(),
            class_subset: Some({
                let mut classes: Vec<u32> = nodes.iter().map(|n| n.class).collect();
                classes.sort_unstable();
                classes.dedup();
                Arc::from(classes)
            }),
            whole: Some(Arc::new(whole)),
            shared_nodes: std::sync::OnceLock::new(),
            pdbs: self.pdbs.clone(),
            storage: self.storage.clone(),
            devices: self.devices.clone(),
            device_index: std::sync::OnceLock::new(),
            device_verdicts: Arc::clone(&self.device_verdicts),
            gang_members: std::sync::OnceLock::new(),
            pod_groups: self.pod_groups.clone(),
            composite_pod_groups: self.composite_pod_groups.clone(),
            pod_group_pods: self.pod_group_pods.clone(),
            static_cache: Arc::clone(&self.static_cache),
            kept: Default::default(),
            approx_bytes: self.approx_bytes,
            derived: std::sync::atomic::AtomicUsize::new(0),
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
        let current_nodes = current.shared_nodes.get_or_init(|| {
            current.add_derived(current.nodes.len() * std::mem::size_of::<Arc<NodeEntry>>());
            Arc::from(current.nodes.as_slice())
        });
        if Arc::ptr_eq(&whole.nodes, current_nodes) {
            return true;
        }
        let looked_past = whole.order.get().is_some()
            || self.pod_index.get().is_some()
            || !self.topologies.lock().unwrap_or_else(|e| e.into_inner()).is_empty();
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

    /// Takes the hot fields and their columns from `base` (the snapshot this one was applied on,
    /// with the same nodes in the same order) where `base` has built them: copied, and computed
    /// again only for the nodes whose entry changed (a batch's pods touch hundreds of nodes of
    /// tens of thousands), rather than for every node on first use.
    fn follow_hot_fields(&mut self, base: &Snapshot) {
        let Some(base_hot) = base.hot.get() else {
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
        if let Some(base_columns) = base.columns.get() {
            let mut columns = base_columns.clone();
            for &i in &touched {
                columns.set(i, &hot[i]);
            }
            self.add_derived(columns.approx_bytes());
            let _ = self.columns.set(columns);
        }
        self.add_derived(hot.len() * std::mem::size_of::<NodeHot>());
        let _ = self.hot.set(hot);
    }

    /// This snapshot with these PodDisruptionBudgets (replacing any with the same namespace and name).
    pub fn with_pdbs(mut self, pdbs: Vec<Pdb>) -> Result<Self, SnapshotError> {
        self.insert_pdbs(pdbs)?;
        Ok(self)
    }

    fn insert_pdbs(&mut self, pdbs: Vec<Pdb>) -> Result<(), SnapshotError> {
        let mut seen = std::collections::HashSet::new();
        for (index, pdb) in pdbs.into_iter().enumerate() {
            let key = pdb.key();
            if !seen.insert(key.clone()) {
                return Err(SnapshotError::DuplicatePdb { index, key });
            }
            self.approx_bytes += pdb.approx_bytes();
            if let Some(old) = self.pdbs.insert(key, Arc::new(pdb)) {
                self.approx_bytes = self.approx_bytes.saturating_sub(old.approx_bytes());
            }
        }
        Ok(())
    }

    /// This snapshot with these PodGroups (replacing any with the same namespace and name).
    pub fn with_pod_groups(mut self, groups: Vec<super::model::PodGroup>) -> Result<Self, SnapshotError> {
        self.insert_pod_groups(groups)?;
        Ok(self)
    }

    fn insert_pod_groups(&mut self, groups: Vec<super::model::PodGroup>) -> Result<(), SnapshotError> {
        let mut seen = std::collections::HashSet::new();
        for (index, group) in groups.into_iter().enumerate() {
            let key: Arc<str> = Arc::from(group.key());
            if !seen.insert(Arc::clone(&key)) {
                return Err(SnapshotError::DuplicatePodGroup {
                    index,
                    key: key.to_string(),
                });
            }
            self.approx_bytes += group.approx_bytes();
            if let Some(old) = self.pod_groups.insert(key, Arc::new(group)) {
                self.approx_bytes = self.approx_bytes.saturating_sub(old.approx_bytes());
            }
        }
        Ok(())
    }

    /// This snapshot with these CompositePodGroups (replacing any with the same namespace and
    /// name).
    pub fn with_composite_pod_groups(
        mut self,
        groups: Vec<super::model::CompositePodGroup>,
    ) -> Result<Self, SnapshotError> {
        self.insert_composite_pod_groups(groups)?;
        Ok(self)
    }

    fn insert_composite_pod_groups(
        &mut self,
        groups: Vec<super::model::CompositePodGroup>,
    ) -> Result<(), SnapshotError> {
        let mut seen = std::collections::HashSet::new();
        for (index, group) in groups.into_iter().enumerate() {
            let key: Arc<str> = Arc::from(group.key());
            if !seen.insert(Arc::clone(&key)) {
                return Err(SnapshotError::DuplicateCompositePodGroup {
                    index,
                    key: key.to_string(),
                });
            }
            self.approx_bytes += group.approx_bytes();
            if let Some(old) = self.composite_pod_groups.insert(key, Arc::new(group)) {
                self.approx_bytes = self.approx_bytes.saturating_sub(old.approx_bytes());
            }
        }
        Ok(())
    }

    /// The CompositePodGroup `key` ("namespace/name").
    pub fn composite_pod_group(&self, key: &str) -> Option<&Arc<super::model::CompositePodGroup>> {
        self.composite_pod_groups.get(key)
    }

    /// The CompositePodGroups, ordered by namespace and name.
    pub fn composite_pod_groups(&self) -> impl Iterator<Item = &Arc<super::model::CompositePodGroup>> {
        self.composite_pod_groups.values()
    }

    /// The PodGroup `key` ("namespace/name").
    pub fn pod_group(&self, key: &str) -> Option<&Arc<super::model::PodGroup>> {
        self.pod_groups.get(key)
    }

    /// The PodGroups, ordered by namespace and name.
    pub fn pod_groups(&self) -> impl Iterator<Item = &Arc<super::model::PodGroup>> {
        self.pod_groups.values()
    }

    /// The nodes of the bound pods of the PodGroup `key` (kube's `ScheduledPods`), one entry per
    /// pod, in uid order.
    pub fn pod_group_nodes(&self, key: &str) -> Vec<Arc<str>> {
        self.pod_group_pods
            .get(key)
            .map(|pods| pods.values().cloned().collect())
            .unwrap_or_default()
    }

    /// How many pods of the PodGroup `key` are bound.
    pub fn pod_group_bound(&self, key: &str) -> usize {
        self.pod_group_pods.get(key).map_or(0, imbl::OrdMap::len)
    }

    fn track_pod_group(&mut self, uid: &Arc<str>, bound: &BoundPod, add: bool) {
        let Some(group) = bound.meta.as_ref().and_then(|m| m.pod_group.as_ref()) else {
            return;
        };
        if add {
            self.pod_group_pods
                .entry(Arc::clone(group))
                .or_default()
                .insert(Arc::clone(uid), Arc::clone(&bound.node_name));
        } else if let Some(pods) = self.pod_group_pods.get_mut(group) {
            pods.remove(uid);
            if pods.is_empty() {
                self.pod_group_pods.remove(group);
            }
        }
    }

    /// This snapshot with these storage objects (a full snapshot's; replacing any it has).
    pub fn with_storage(mut self, parts: super::volumes::StorageParts) -> Result<Self, SnapshotError> {
        if parts.is_empty() && self.storage.is_empty() {
            return Ok(self);
        }
        self.approx_bytes = self.approx_bytes.saturating_sub(self.storage.approx_bytes);
        self.storage = super::volumes::StorageObjects::from_parts(parts)?;
        self.approx_bytes += self.storage.approx_bytes;
        Ok(self)
    }

    /// This snapshot with these DRA objects (a full snapshot's; replacing any it has).
    pub fn with_devices(mut self, parts: super::devices::DeviceParts) -> Result<Self, SnapshotError> {
        if parts.is_empty() && self.devices.is_empty() {
            return Ok(self);
        }
        self.approx_bytes = self.approx_bytes.saturating_sub(self.devices.approx_bytes);
        self.devices = super::devices::DeviceObjects::from_parts(parts)?;
        self.device_verdicts = Arc::default();
        self.approx_bytes += self.devices.approx_bytes;
        Ok(self)
    }

    /// The DeviceClasses, ResourceClaims and ResourceSlices.
    pub fn devices(&self) -> &super::devices::DeviceObjects {
        &self.devices
    }

    /// Every ResourceSlice (with the DeviceTaintRules' taints applied) and the devices in use,
    /// gathered once per snapshot.
    pub fn device_index(&self) -> &Arc<super::devices::DeviceIndex> {
        self.device_index.get_or_init(|| {
            Arc::new(super::devices::DeviceIndex::of(
                &self.devices,
                super::device_taint_rules::patched_slices(&self.devices),
                self.nodes.iter().map(|n| n.spec.name.as_str()),
                Arc::clone(&self.device_verdicts),
            ))
        })
    }

    /// The PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes.
    pub fn storage(&self) -> &super::volumes::StorageObjects {
        &self.storage
    }

    /// The PodDisruptionBudgets, ordered by namespace and name.
    pub fn pdbs(&self) -> impl Iterator<Item = &Arc<Pdb>> {
        self.pdbs.values()
    }

    /// How many pods of the gang `key` ("namespace/name") are bound.
    pub fn gang_members(&self, key: &str) -> u32 {
        let counts = self.gang_members.get_or_init(|| {
            let mut m = std::collections::HashMap::new();
            for (_, pod) in self.pods.iter() {
                if let Some(g) = pod.meta.as_ref().and_then(|m| m.gang.clone()) {
                    *m.entry(g).or_insert(0) += 1;
                }
            }
            self.add_derived(m.capacity() * 32);
            m
        });
        counts.get(key).copied().unwrap_or(0)
    }

    /// A node entry, with its class found or added.
    fn entry(&mut self, spec: NodeSpec, usage: NodeUsage) -> NodeEntry {
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

    fn position(&self, name: &str) -> Result<usize, usize> {
        self.nodes.binary_search_by(|e| e.spec.name.as_str().cmp(name))
    }

    fn add_pod(&mut self, uid: Arc<str>, bound: BoundPod) {
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

    fn remove_pod(&mut self, uid: &str) {
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

    fn remove_node(&mut self, name: &str) {
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

    fn count_images(&mut self, spec: &NodeSpec, delta: i64) {
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

    /// For each image (by hash), the nodes that have it, as (index in [`Snapshot::nodes`], size).
    pub fn image_postings(&self) -> &ImagePostings {
        self.image_postings.get_or_init(|| {
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

    /// The static predicates cache of this snapshot's lineage (see [`super::accel::class_cache::StaticCache`]).
    pub(super) fn static_cache(&self) -> &std::sync::Mutex<super::accel::class_cache::StaticCache> {
        &self.static_cache
    }

    /// The hot fields of every node, in the order of [`Snapshot::nodes`].
    pub fn hot(&self) -> &[NodeHot] {
        self.hot.get_or_init(|| {
            self.add_derived(self.nodes.len() * std::mem::size_of::<NodeHot>());
            self.nodes.iter().map(|e| NodeHot::of(e, &e.usage)).collect()
        })
    }

    /// [`Snapshot::hot`] by column (see [`super::accel::columns`]).
    pub fn columns(&self) -> &super::accel::columns::HotColumns {
        self.columns.get_or_init(|| {
            let columns = super::accel::columns::HotColumns::of(self.hot());
            self.add_derived(columns.approx_bytes());
            columns
        })
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

    /// The bound pods on known nodes with a label index.
    pub fn pod_index(&self) -> &PodIndex {
        self.pod_index.get_or_init(|| {
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
        let mut cache = self.topologies.lock().unwrap_or_else(|e| e.into_inner());
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
            + self.derived.load(std::sync::atomic::Ordering::Relaxed)
            + statics
    }

    /// The value kept with this snapshot for `key` (the same object, by address), made by `make`
    /// on first use and counted with the derived parts (`bytes` of it); the most recent
    /// [`MAX_KEPT`] values are kept. The layers above keep what they derive from a snapshot here
    /// (the node outcomes of a policy's rules, see [`super::rules`]) without the snapshot
    /// knowing their types.
    pub(super) fn kept<K, V>(&self, key: &Arc<K>, make: impl FnOnce(&Self) -> V, bytes: impl Fn(&V) -> usize) -> Arc<V>
    where
        K: Send + Sync + 'static,
        V: Send + Sync + 'static,
    {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
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
    pub(super) fn sub_derived(&self, bytes: usize) {
        if bytes > 0 {
            let _ = self.derived.fetch_update(
                std::sync::atomic::Ordering::Relaxed,
                std::sync::atomic::Ordering::Relaxed,
                |d| Some(d.saturating_sub(bytes)),
            );
        }
    }

    /// Counts `bytes` more of the parts built on first use.
    pub(super) fn add_derived(&self, bytes: usize) {
        self.derived.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, cpu: i64) -> NodeSpec {
        NodeSpec {
            name: name.into(),
            allocatable: Resources {
                milli_cpu: cpu,
                memory: 1 << 30,
                ..Default::default()
            },
            allowed_pods: 110,
            ..Default::default()
        }
    }

    fn pod(uid: &str, node: &str, cpu: i64) -> PodSpec {
        PodSpec {
            uid: Arc::from(uid),
            node_name: Some(node.into()),
            requests: Resources {
                milli_cpu: cpu,
                ..Default::default()
            },
            non_zero_requests: Resources {
                milli_cpu: cpu,
                memory: 200 << 20,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// `s` after one delta removing node `name` and another adding it again with `cpu`.
    fn removed_and_added_again(s: &Snapshot, name: &str, cpu: i64) -> Snapshot {
        let gone = s
            .apply(Delta {
                remove_nodes: vec![name.into()],
                ..Default::default()
            })
            .unwrap();
        gone.apply(Delta {
            upsert_nodes: vec![node(name, cpu)],
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn a_delta_on_pods_keeps_the_hot_fields_of_untouched_nodes_and_recomputes_the_others() {
        let base = Snapshot::build(
            vec![node("a", 1000), node("b", 1000), node("c", 1000)],
            vec![pod("p1", "a", 100), pod("p2", "c", 300)],
        )
        .unwrap();
        // The base's columns are built (as a Schedule on it builds them); the next follows them.
        base.columns();
        let next = base
            .apply(Delta {
                upsert_pods: vec![pod("p3", "b", 200), pod("p4", "b", 50)],
                remove_pod_uids: vec!["p1".into()],
                ..Default::default()
            })
            .unwrap();
        assert!(
            next.hot.get().is_some() && next.columns.get().is_some(),
            "followed, not left to build"
        );
        let fresh = Snapshot::build(
            vec![node("a", 1000), node("b", 1000), node("c", 1000)],
            vec![pod("p2", "c", 300), pod("p3", "b", 200), pod("p4", "b", 50)],
        )
        .unwrap();
        assert_eq!(next.hot(), fresh.hot());
        assert_eq!(
            format!("{:?}", next.columns()),
            format!("{:?}", crate::engine::accel::columns::HotColumns::of(fresh.hot()))
        );
        assert_eq!(next.hot()[1].req_cpu, 250);
        assert_eq!(next.hot()[0].req_cpu, 0);
        // A delta on nodes leaves them to be built again (positions may shift).
        let moved = next
            .apply(Delta {
                upsert_nodes: vec![node("aa", 1000)],
                ..Default::default()
            })
            .unwrap();
        assert!(moved.hot.get().is_none());
        assert_eq!(moved.hot().len(), 4);
    }

    #[test]
    fn usage_is_summed_per_node_and_nodes_sorted() {
        let s = Snapshot::build(
            vec![node("b", 1000), node("a", 1000)],
            vec![pod("p1", "a", 100), pod("p2", "a", 200), pod("p3", "b", 50)],
        )
        .unwrap();
        assert_eq!(s.nodes()[0].spec.name, "a");
        assert_eq!(s.node("a").unwrap().usage.requested.milli_cpu, 300);
        assert_eq!(s.node("a").unwrap().usage.pod_count, 2);
        assert_eq!(s.node("b").unwrap().usage.non_zero_memory, 200 << 20);
    }

    #[test]
    fn delta_moves_pods_and_keeps_base_untouched() {
        let base = Snapshot::build(vec![node("a", 1000), node("b", 1000)], vec![pod("p1", "a", 100)]).unwrap();
        let next = base
            .apply(Delta {
                upsert_pods: vec![pod("p1", "b", 100), pod("p2", "b", 10)],
                ..Default::default()
            })
            .unwrap();
        assert_eq!(next.node("a").unwrap().usage.pod_count, 0);
        assert_eq!(next.node("b").unwrap().usage.requested.milli_cpu, 110);
        assert_eq!(base.node("a").unwrap().usage.pod_count, 1, "base is immutable");
        assert!(
            Arc::ptr_eq(&base.nodes()[0].spec, &next.nodes()[0].spec),
            "specs are shared"
        );
    }

    #[test]
    fn pods_on_unknown_nodes_count_once_the_node_appears() {
        let base = Snapshot::build(vec![node("a", 1000)], vec![pod("p1", "ghost", 300)]).unwrap();
        assert!(base.node("ghost").is_none());
        let next = base
            .apply(Delta {
                upsert_nodes: vec![node("ghost", 2000)],
                ..Default::default()
            })
            .unwrap();
        assert_eq!(next.node("ghost").unwrap().usage.requested.milli_cpu, 300);
        // Removing the node and re-adding it keeps the pod's usage.
        let back = removed_and_added_again(&next, "ghost", 2000);
        assert_eq!(back.node("ghost").unwrap().usage.requested.milli_cpu, 300);
        let empty = back
            .apply(Delta {
                remove_pod_uids: vec!["p1".into()],
                ..Default::default()
            })
            .unwrap();
        assert_eq!(empty.node("ghost").unwrap().usage, NodeUsage::default());
    }

    /// The uids of a node's pods in the snapshot's order.
    fn uids_on(s: &Snapshot, node: &str) -> Vec<String> {
        s.node(node)
            .unwrap()
            .usage
            .pods
            .iter()
            .map(|p| p.meta.as_ref().unwrap().uid.to_string())
            .collect()
    }

    fn with_priority(mut p: PodSpec, priority: i32) -> PodSpec {
        p.priority = priority;
        p
    }

    #[test]
    fn each_node_lists_its_pods_lowest_priority_first_through_deltas() {
        let base = Snapshot::build(
            vec![node("a", 1000)],
            vec![
                with_priority(pod("p3", "a", 1), 10),
                with_priority(pod("p1", "a", 1), 100),
                with_priority(pod("p2", "a", 1), 10),
                with_priority(pod("g1", "ghost", 1), 5),
            ],
        )
        .unwrap();
        assert_eq!(uids_on(&base, "a"), ["p2", "p3", "p1"], "priority, then uid");
        let next = base
            .apply(Delta {
                upsert_pods: vec![
                    with_priority(pod("p0", "a", 1), 50),
                    with_priority(pod("p3", "ghost", 1), 10),
                ],
                remove_pod_uids: vec!["p2".into()],
                upsert_nodes: vec![node("ghost", 1000)],
                ..Default::default()
            })
            .unwrap();
        assert_eq!(uids_on(&next, "a"), ["p0", "p1"]);
        assert_eq!(
            uids_on(&next, "ghost"),
            ["g1", "p3"],
            "orphans keep their list until the node appears"
        );
        assert_eq!(uids_on(&base, "a"), ["p2", "p3", "p1"], "base is immutable");
        let back = removed_and_added_again(&next, "ghost", 1000);
        assert_eq!(uids_on(&back, "ghost"), ["g1", "p3"]);
    }

    #[test]
    fn image_postings_are_shared_by_a_delta_that_changes_no_node_and_rebuilt_otherwise() {
        let mut a = node("a", 1000);
        a.images.insert("img".into(), 5 << 20);
        let base = Snapshot::build(vec![a, node("c", 1000)], vec![]).unwrap();
        let h = image_hash("img");
        assert_eq!(base.image_postings()[&h], [(0, 5 << 20)]);
        let pods_only = base
            .apply(Delta {
                upsert_pods: vec![pod("p1", "a", 100)],
                ..Default::default()
            })
            .unwrap();
        assert!(
            std::ptr::eq(pods_only.image_postings(), base.image_postings()),
            "shared"
        );
        let mut b = node("b", 1000);
        b.images.insert("img".into(), 7 << 20);
        let with_b = pods_only
            .apply(Delta {
                upsert_nodes: vec![b],
                ..Default::default()
            })
            .unwrap();
        assert_eq!(
            with_b.image_postings()[&h],
            [(0, 5 << 20), (1, 7 << 20)],
            "b sorts before c"
        );
        assert_eq!(base.image_postings()[&h], [(0, 5 << 20)]);
    }

    #[test]
    fn upserting_a_node_keeps_its_usage() {
        let base = Snapshot::build(vec![node("a", 1000)], vec![pod("p1", "a", 300)]).unwrap();
        let next = base
            .apply(Delta {
                upsert_nodes: vec![node("a", 4000)],
                ..Default::default()
            })
            .unwrap();
        let a = next.node("a").unwrap();
        assert_eq!((a.spec.allocatable.milli_cpu, a.usage.requested.milli_cpu), (4000, 300));
    }

    #[test]
    fn duplicates_and_unbound_pods_are_refused() {
        assert!(matches!(
            Snapshot::build(vec![node("a", 1), node("a", 1)], vec![]),
            Err(SnapshotError::DuplicateNode { index: 1, .. })
        ));
        assert!(matches!(
            Snapshot::build(vec![node("a", 1)], vec![pod("p", "a", 1), pod("p", "a", 1)]),
            Err(SnapshotError::DuplicatePod { index: 1, .. })
        ));
        let mut unbound = pod("p", "a", 1);
        unbound.node_name = None;
        assert!(matches!(
            Snapshot::build(vec![node("a", 1)], vec![unbound]),
            Err(SnapshotError::UnboundPod { index: 0 })
        ));
    }

    #[test]
    fn image_counts_follow_node_changes() {
        let mut n = node("a", 1);
        n.images.insert("nginx:latest".into(), 100);
        let mut m = node("b", 1);
        m.images.insert("nginx:latest".into(), 100);
        let s = Snapshot::build(vec![n, m], vec![]).unwrap();
        assert_eq!(s.image_node_count("nginx:latest"), 2);
        let s = s
            .apply(Delta {
                remove_nodes: vec!["a".into()],
                ..Default::default()
            })
            .unwrap();
        assert_eq!(s.image_node_count("nginx:latest"), 1);
    }
}
