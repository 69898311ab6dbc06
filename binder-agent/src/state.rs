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

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use placement_scheduler::proto;
use prost::Message;

use crate::projection::{PdbInfo, StorageKey, StorageObject};

/// What changed, by identity; the current value is read from the state when a delta is built.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    Node(String),
    Pod(String),
    Namespace(String),
    Pdb(String),
    Storage(StorageKey),
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

/// The identity fields of an encoded `proto::Pod` (same tags), decoded without the rest.
#[derive(Clone, PartialEq, prost::Message)]
struct PodIdentity {
    #[prost(string, tag = "1")]
    uid: String,
    #[prost(string, tag = "2")]
    namespace: String,
    #[prost(string, tag = "3")]
    name: String,
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
    storage: HashMap<StorageKey, StorageObject>,
    /// Volume choices of decided pods not yet seen through the watches (kube-scheduler's assume
    /// caches): a volume with its claimRef set to the chosen claim, a claim with its selected
    /// node; each with the uid of the pod it was chosen for. Snapshots show these in place of
    /// the watched objects.
    assumed_storage: HashMap<StorageKey, (StorageObject, String)>,
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

/// Most log entries kept; a replica further behind gets a full snapshot.
const MAX_LOG: usize = 1 << 20;

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

    fn record(&mut self, key: Key) {
        self.version += 1;
        self.log.push_back((self.version, key));
        while self.log.len() > MAX_LOG {
            if let Some((v, _)) = self.log.pop_front() {
                self.compacted = v;
            }
        }
    }

    /// The current version: a snapshot synced now reflects every change up to it.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Adds or replaces a node.
    pub fn apply_node(&mut self, mut node: proto::Node) {
        if self.partitions >= 2 {
            let p = crate::partitions::partition_of(&node.name, self.partitions);
            node.labels
                .insert(crate::partitions::PARTITION_LABEL.to_string(), p.to_string());
        }
        if self.nodes.get(&node.name) == Some(&node) {
            return;
        }
        let key = Key::Node(node.name.clone());
        self.nodes.insert(node.name.clone(), node);
        self.record(key);
    }

    /// Removes a node.
    pub fn delete_node(&mut self, name: &str) {
        if self.nodes.remove(name).is_some() {
            self.record(Key::Node(name.to_string()));
        }
    }

    /// Adds or replaces a namespace.
    pub fn apply_namespace(&mut self, ns: proto::Namespace) {
        if self.namespaces.get(&ns.name) == Some(&ns) {
            return;
        }
        let key = Key::Namespace(ns.name.clone());
        self.namespaces.insert(ns.name.clone(), ns);
        self.record(key);
    }

    /// Removes a namespace.
    pub fn delete_namespace(&mut self, name: &str) {
        if self.namespaces.remove(name).is_some() {
            self.record(Key::Namespace(name.to_string()));
        }
    }

    /// Adds or replaces a claim, volume, storage class or CSINode; returns whether it changed.
    /// An assumed volume choice the object now shows (the volume refers to the claim; the claim
    /// selects the node or is bound) is dropped: the watched object takes its place.
    pub fn apply_storage(&mut self, obj: StorageObject) -> bool {
        let key = obj.key();
        if self.storage.get(&key) == Some(&obj) {
            return false;
        }
        if self
            .assumed_storage
            .get(&key)
            .is_some_and(|(assumed, _)| shows_assumption(&obj, assumed))
        {
            self.assumed_storage.remove(&key);
        }
        // A claim allocated and reserved for a pod whose special claim for extended resources
        // is assumed, with the same devices: the claim PreBind created; it takes the assumed
        // one's place.
        if let StorageObject::ResourceClaim(c) = &obj {
            if let Some(allocation) = &c.allocation {
                for r in &c.reserved_for {
                    let assumed =
                        StorageKey::ResourceClaim(format!("{}/{}", c.namespace, assumed_extended_claim(&r.uid)));
                    let devices = |a: &proto::AllocationResult| -> Vec<(String, String, String)> {
                        let mut d: Vec<_> = a
                            .devices
                            .iter()
                            .map(|d| (d.driver.clone(), d.pool.clone(), d.device.clone()))
                            .collect();
                        d.sort();
                        d
                    };
                    let same = matches!(
                        self.assumed_storage.get(&assumed),
                        Some((StorageObject::ResourceClaim(a), _))
                            if a.allocation.as_ref().map(devices) == Some(devices(allocation))
                    );
                    if same {
                        self.assumed_storage.remove(&assumed);
                        self.record(Key::Storage(assumed));
                    }
                }
            }
        }
        self.storage.insert(key.clone(), obj);
        self.record(Key::Storage(key));
        true
    }

    /// Removes a claim, volume, storage class or CSINode (and any assumption on it); returns
    /// whether it was known.
    pub fn delete_storage(&mut self, key: &StorageKey) -> bool {
        self.assumed_storage.remove(key);
        if self.storage.remove(key).is_some() {
            self.record(Key::Storage(key.clone()));
            return true;
        }
        false
    }

    /// Assumes the volume choices of a decided pod (`uid`) as the decision service assumed them:
    /// each chosen volume's `claim_ref` set to its claim (uid included), each claim to provision
    /// with its `selected_node`. Returns the keys assumed anew; a choice whose claim or volume is
    /// unknown, or that the object shows already (watched or assumed), assumes nothing.
    pub fn assume_storage(&mut self, uid: &str, bindings: &[proto::ClaimBinding]) -> Vec<StorageKey> {
        use proto::claim_binding::Target;
        let mut keys = Vec::new();
        for b in bindings {
            let claim_key = StorageKey::Claim(format!("{}/{}", b.claim_namespace, b.claim_name));
            // As the decision service assumes them: on the objects as snapshots show them (an
            // earlier assumption included), so a choice assumed already is not assumed again.
            let Some(StorageObject::Claim(claim)) = self.storage_view(&claim_key) else {
                continue;
            };
            let (key, assumed) = match &b.target {
                Some(Target::VolumeName(pv)) => {
                    let key = StorageKey::Volume(pv.clone());
                    let Some(StorageObject::Volume(v)) = self.storage_view(&key) else {
                        continue;
                    };
                    let claim_ref = proto::VolumeClaimRef {
                        namespace: claim.namespace.clone(),
                        name: claim.name.clone(),
                        uid: claim.uid.clone(),
                    };
                    if v.claim_ref.as_ref() == Some(&claim_ref) {
                        continue;
                    }
                    let mut v = v.clone();
                    v.claim_ref = Some(claim_ref);
                    (key, StorageObject::Volume(v))
                }
                Some(Target::SelectedNode(node)) => {
                    if claim.selected_node == *node {
                        continue;
                    }
                    let mut c = claim.clone();
                    c.selected_node = node.clone();
                    (claim_key, StorageObject::Claim(c))
                }
                None => continue,
            };
            self.assumed_storage.insert(key.clone(), (assumed, uid.to_string()));
            self.record(Key::Storage(key.clone()));
            keys.push(key);
        }
        keys
    }

    /// Assumes the device allocations of a decided pod (`uid`, named `name`) as the decision
    /// service assumed them: each claim allocated, with the pod in `reservedFor`, until the watch
    /// shows the claim allocated or its PreBind gives it up. Returns the keys assumed anew; an
    /// allocation of a claim that is unknown, or allocated already (watched or assumed), assumes
    /// nothing.
    pub fn assume_devices(&mut self, uid: &str, name: &str, allocations: &[proto::ClaimAllocation]) -> Vec<StorageKey> {
        let mut keys = Vec::new();
        for a in allocations {
            if a.extended_resource_claim.is_some() {
                // The special claim for extended resources does not exist yet: its devices are
                // assumed under a name no real claim has, until the watch shows the claim PreBind
                // creates (see `apply_storage`).
                let key = StorageKey::ResourceClaim(format!("{}/{}", a.claim_namespace, assumed_extended_claim(uid)));
                let c = proto::ResourceClaim {
                    namespace: a.claim_namespace.clone(),
                    name: assumed_extended_claim(uid),
                    allocation: a.allocation.clone(),
                    reserved_for: vec![proto::ResourceClaimConsumer {
                        api_group: String::new(),
                        resource: "pods".into(),
                        name: name.to_string(),
                        uid: uid.to_string(),
                    }],
                    ..Default::default()
                };
                self.assumed_storage
                    .insert(key.clone(), (StorageObject::ResourceClaim(c), uid.to_string()));
                self.record(Key::Storage(key.clone()));
                keys.push(key);
                continue;
            }
            let key = StorageKey::ResourceClaim(format!("{}/{}", a.claim_namespace, a.claim_name));
            let Some(StorageObject::ResourceClaim(claim)) = self.storage_view(&key) else {
                continue;
            };
            if claim.allocation.is_some() {
                continue;
            }
            let mut c = claim.clone();
            c.allocation = a.allocation.clone();
            c.reserved_for.push(proto::ResourceClaimConsumer {
                api_group: String::new(),
                resource: "pods".into(),
                name: name.to_string(),
                uid: uid.to_string(),
            });
            self.assumed_storage
                .insert(key.clone(), (StorageObject::ResourceClaim(c), uid.to_string()));
            self.record(Key::Storage(key.clone()));
            keys.push(key);
        }
        keys
    }

    /// Drops the volume choices assumed for the pod `uid` (its PreBind failed or was given up).
    pub fn forget_storage(&mut self, uid: &str) {
        let keys: Vec<StorageKey> = self
            .assumed_storage
            .iter()
            .filter(|(_, (_, owner))| owner == uid)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.assumed_storage.remove(&key);
            self.record(Key::Storage(key));
        }
    }

    /// Number of assumed volume choices not yet seen through the watches.
    pub fn assumed_storage_count(&self) -> usize {
        self.assumed_storage.len()
    }

    /// A storage object as snapshots show it: the assumed choice, else the watched object.
    fn storage_view(&self, key: &StorageKey) -> Option<&StorageObject> {
        self.assumed_storage
            .get(key)
            .map(|(o, _)| o)
            .or_else(|| self.storage.get(key))
    }

    /// The DeviceClasses, as the watch shows them.
    pub fn device_classes(&self) -> Vec<proto::DeviceClass> {
        self.storage
            .values()
            .filter_map(|o| match o {
                StorageObject::DeviceClass(c) => Some(c.clone()),
                _ => None,
            })
            .collect()
    }

    /// The storage object with this identity.
    pub fn storage_object(&self, key: &StorageKey) -> Option<&StorageObject> {
        self.storage.get(key)
    }

    /// The PodGroup `namespace/name`, as the watch shows it.
    pub fn pod_group(&self, namespace: &str, name: &str) -> Option<&proto::PodGroup> {
        match self
            .storage
            .get(&StorageKey::PodGroup(crate::projection::pod_group_key(namespace, name)))
        {
            Some(StorageObject::PodGroup(g)) => Some(g),
            _ => None,
        }
    }

    /// The PodGroup `namespace/name`'s CompositePodGroup hierarchy, when it names a parent and
    /// every CompositePodGroup up to the root is known: the root's key and the hierarchy's
    /// PodGroups (`namespace/name`) with the CompositePodGroups (kube's workload forest).
    pub fn pod_group_tree(&self, namespace: &str, name: &str) -> Option<PodGroupTree> {
        let group = self.pod_group(namespace, name)?;
        if group.parent_composite_pod_group_name.is_empty() {
            return None;
        }
        let composite =
            |n: &str| match self
                .storage
                .get(&StorageKey::CompositePodGroup(crate::projection::pod_group_key(
                    namespace, n,
                ))) {
                Some(StorageObject::CompositePodGroup(g)) => Some(g),
                _ => None,
            };
        let mut root = composite(&group.parent_composite_pod_group_name)?;
        let mut seen = std::collections::HashSet::new();
        while !root.parent_composite_pod_group_name.is_empty() {
            if !seen.insert(root.name.clone()) {
                return None;
            }
            root = composite(&root.parent_composite_pod_group_name)?;
        }
        let mut tree = PodGroupTree {
            root: crate::projection::pod_group_key(namespace, &root.name),
            ..PodGroupTree::default()
        };
        for obj in self.storage.values() {
            match obj {
                StorageObject::PodGroup(g)
                    if g.namespace == namespace && !g.parent_composite_pod_group_name.is_empty() =>
                {
                    tree.groups.push((
                        crate::projection::pod_group_key(namespace, &g.name),
                        g.parent_composite_pod_group_name.clone(),
                        g.gang.as_ref().map_or(1, |g| g.min_count.max(1) as u32),
                    ));
                }
                StorageObject::CompositePodGroup(g) if g.namespace == namespace => {
                    tree.composites.push((
                        g.name.clone(),
                        g.parent_composite_pod_group_name.clone(),
                        g.min_group_count.map_or(1, |n| n.max(1) as u32),
                    ));
                }
                _ => {}
            }
        }
        // Keep the root's subtree only.
        let mut inside: std::collections::HashSet<String> = std::collections::HashSet::from([root.name.clone()]);
        loop {
            let before = inside.len();
            for (n, parent, _) in &tree.composites {
                if inside.contains(parent) {
                    inside.insert(n.clone());
                }
            }
            if inside.len() == before {
                break;
            }
        }
        tree.composites.retain(|(n, ..)| inside.contains(n));
        tree.groups.retain(|(_, parent, _)| inside.contains(parent));
        Some(tree)
    }

    /// Records the PodGroup `key`'s `PodGroupInitiallyScheduled` condition as the watch shows it
    /// (`None`: the group has none, or is gone).
    pub fn set_pod_group_condition(&mut self, key: &str, condition: Option<crate::api::ObservedCondition>) {
        match condition {
            Some(c) => {
                self.pod_group_conditions.insert(key.to_string(), c);
            }
            None => {
                self.pod_group_conditions.remove(key);
            }
        }
    }

    /// The PodGroup `namespace/name`'s `PodGroupInitiallyScheduled` condition as the watch shows it.
    pub fn pod_group_condition(&self, namespace: &str, name: &str) -> Option<&crate::api::ObservedCondition> {
        self.pod_group_conditions
            .get(&crate::projection::pod_group_key(namespace, name))
    }

    /// Records whether the API server serves scheduling.k8s.io/v1beta1 PodGroups.
    pub fn set_pod_groups_served(&mut self, served: bool) {
        self.pod_groups_served = served;
    }

    /// Whether the API server serves scheduling.k8s.io/v1beta1 PodGroups: false until the
    /// PodGroup watch found them served, which it does before the binder is synced. Without them
    /// no PodGroup is ever known, and a pod's `scheduling_group` names nothing the binder can see.
    pub fn pod_groups_served(&self) -> bool {
        self.pod_groups_served
    }

    /// Adds or replaces a PodDisruptionBudget, resolving its disruptedPods names to uids.
    pub fn apply_pdb(&mut self, info: PdbInfo) {
        let key = info.key();
        let mut entry = PdbEntry {
            pdb: info.pdb,
            names: info.disrupted_pods,
            resolved: Vec::new(),
        };
        entry.names.sort();
        entry.names.dedup();
        if let Some(old) = self.pdbs.get(&key) {
            // Names resolved before keep their uid (the pod may be gone by now).
            entry.resolved = old
                .resolved
                .iter()
                .filter(|(n, _)| entry.names.binary_search(n).is_ok())
                .cloned()
                .collect();
        }
        let wanted: HashSet<String> = entry.unresolved().cloned().collect();
        if !wanted.is_empty() {
            let namespace = entry.pdb.namespace.clone();
            entry.resolved.extend(self.find_pods(&namespace, &wanted));
        }
        entry.set_uids();
        let before = self.pdbs.get(&key);
        if before == Some(&entry) {
            return;
        }
        let was_unresolved = before.is_some_and(|e| e.unresolved().next().is_some());
        let is_unresolved = entry.unresolved().next().is_some();
        self.unresolved_pdbs = self.unresolved_pdbs + usize::from(is_unresolved) - usize::from(was_unresolved);
        self.pdbs.insert(key.clone(), entry);
        self.record(Key::Pdb(key));
    }

    /// Removes a PodDisruptionBudget by `namespace/name`.
    pub fn delete_pdb(&mut self, key: &str) {
        let key = key.to_string();
        if let Some(old) = self.pdbs.remove(&key) {
            if old.unresolved().next().is_some() {
                self.unresolved_pdbs -= 1;
            }
            self.record(Key::Pdb(key));
        }
    }

    /// The (name, uid) of the stored pods of `namespace` named in `names`: one pass that decodes
    /// only the identity of each bound pod.
    fn find_pods(&self, namespace: &str, names: &HashSet<String>) -> Vec<(String, String)> {
        let bound = self.bound.values().filter_map(|b| PodIdentity::decode(&b[..]).ok());
        let assumed = self.assumed.values().map(|p| PodIdentity {
            uid: p.uid.clone(),
            namespace: p.namespace.clone(),
            name: p.name.clone(),
        });
        bound
            .chain(assumed)
            .filter(|p| p.namespace == namespace && names.contains(&p.name))
            .map(|p| (p.name, p.uid))
            .collect()
    }

    /// A pod arrived: it resolves the disruptedPods names that name it.
    fn resolve_disrupted(&mut self, pod: &proto::Pod) {
        if self.unresolved_pdbs == 0 {
            return;
        }
        let mut changed = Vec::new();
        for (key, entry) in self.pdbs.iter_mut() {
            if entry.pdb.namespace != pod.namespace || !entry.unresolved().any(|n| *n == pod.name) {
                continue;
            }
            entry.resolved.push((pod.name.clone(), pod.uid.clone()));
            entry.set_uids();
            if entry.unresolved().next().is_none() {
                self.unresolved_pdbs -= 1;
            }
            changed.push(key.clone());
        }
        for key in changed {
            self.record(Key::Pdb(key));
        }
    }

    /// Records a pod the API server shows bound; it replaces an assumption for the same uid.
    pub fn apply_bound_pod(&mut self, pod: proto::Pod) {
        self.resolve_disrupted(&pod);
        let uid = pod.uid.clone();
        let was_assumed = self.assumed.remove(&uid);
        let encoded: Arc<[u8]> = pod.encode_to_vec().into();
        if self.bound.get(&uid) == Some(&encoded) && was_assumed.is_none() {
            return;
        }
        // An assumption on the same node with the same spec is already counted as it is.
        let unchanged = was_assumed.as_ref() == Some(&pod);
        self.bound.insert(uid.clone(), encoded);
        if !unchanged {
            self.record(Key::Pod(uid));
        }
    }

    /// Removes a pod (deleted, or finished so it no longer uses its node).
    pub fn delete_pod(&mut self, uid: &str) -> bool {
        let a = self.assumed.remove(uid).is_some();
        let b = self.bound.remove(uid).is_some();
        if a || b {
            self.record(Key::Pod(uid.to_string()));
        }
        b
    }

    /// Counts a decided pod against its node until the binding is seen or fails.
    pub fn assume(&mut self, mut pod: proto::Pod, node: &str) {
        if self.bound.contains_key(&pod.uid) {
            return;
        }
        pod.node_name = node.to_string();
        let uid = pod.uid.clone();
        self.assumed.insert(uid.clone(), pod);
        self.record(Key::Pod(uid));
    }

    /// Drops an assumption (the bind failed or conflicted).
    pub fn forget(&mut self, uid: &str) {
        if self.assumed.remove(uid).is_some() && !self.bound.contains_key(uid) {
            self.record(Key::Pod(uid.to_string()));
        }
    }

    /// Whether a pod is assumed (decided, not yet seen bound).
    pub fn is_assumed(&self, uid: &str) -> bool {
        self.assumed.contains_key(uid)
    }

    /// Whether the API server shows the pod bound.
    pub fn is_bound(&self, uid: &str) -> bool {
        self.bound.contains_key(uid)
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Number of bound and assumed pods.
    pub fn pod_count(&self) -> usize {
        self.bound.len() + self.assumed.len()
    }

    /// Number of assumed pods.
    pub fn assumed_count(&self) -> usize {
        self.assumed.len()
    }

    /// Nodes by name.
    pub fn nodes(&self) -> &HashMap<String, proto::Node> {
        &self.nodes
    }

    /// Bound pods (as the API server shows them) and assumed pods, each once.
    pub fn pods(&self) -> impl Iterator<Item = proto::Pod> + '_ {
        self.bound
            .values()
            .filter_map(|b| decode(b))
            .chain(self.assumed.values().cloned())
    }

    /// The bound or assumed pod with this uid.
    pub fn pod(&self, uid: &str) -> Option<proto::Pod> {
        match self.assumed.get(uid) {
            Some(p) => Some(p.clone()),
            None => self.bound.get(uid).and_then(|b| decode(b)),
        }
    }

    /// The PodDisruptionBudgets, by namespace and name.
    pub fn pod_disruption_budgets(&self) -> Vec<proto::PodDisruptionBudget> {
        let mut pdbs: Vec<(&String, &PdbEntry)> = self.pdbs.iter().collect();
        pdbs.sort_by(|a, b| a.0.cmp(b.0));
        pdbs.into_iter().map(|(_, e)| e.pdb.clone()).collect()
    }

    /// The whole cluster as a snapshot, with assumed pods counted on their nodes (pods in uid order).
    pub fn full(&self) -> proto::Snapshot {
        let parts = self.full_parts();
        let mut snapshot = parts.rest;
        snapshot.pods = parts.pods.iter().filter_map(|b| decode(b)).collect();
        snapshot
    }

    /// The whole state as a full snapshot without its pods, and the pods in uid order still
    /// encoded (bound pods shared with the state, not copied): they can go on the wire as they
    /// are, where the decoded list alone would take gigabytes at a million pods.
    pub fn full_parts(&self) -> FullParts {
        let mut parts = self.full_parts_unordered();
        sort_by_uid(&mut parts.pods);
        parts
    }

    /// [`ClusterState::full_parts`] with the pods in no particular order, for a caller that
    /// sorts them with [`sort_by_uid`] once the state is unlocked (a million pods take half a
    /// second to sort).
    pub fn full_parts_unordered(&self) -> FullParts {
        let mut nodes: Vec<proto::Node> = self.nodes.values().cloned().collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let pods: Vec<Arc<[u8]>> = self
            .bound
            .values()
            .cloned()
            .chain(self.assumed.values().map(|p| p.encode_to_vec().into()))
            .collect();
        let mut namespaces: Vec<proto::Namespace> = self.namespaces.values().cloned().collect();
        namespaces.sort_by(|a, b| a.name.cmp(&b.name));
        let mut rest = proto::Snapshot {
            nodes,
            namespaces,
            pod_disruption_budgets: self.pod_disruption_budgets(),
            ..Default::default()
        };
        self.fill_storage(&mut rest);
        FullParts { rest, pods }
    }

    /// The claims, volumes, storage classes and CSINodes as a full snapshot carries them (the
    /// snapshot's other lists left empty).
    pub fn storage_snapshot(&self) -> proto::Snapshot {
        let mut snapshot = proto::Snapshot::default();
        self.fill_storage(&mut snapshot);
        snapshot
    }

    fn fill_storage(&self, snapshot: &mut proto::Snapshot) {
        // The watched objects as assumed, and the assumed objects no watch shows yet (a pod's
        // special claim for extended resources before PreBind creates it).
        let mut storage: Vec<(&StorageKey, &StorageObject)> = self
            .storage
            .keys()
            .filter_map(|k| self.storage_view(k).map(|o| (k, o)))
            .chain(
                self.assumed_storage
                    .iter()
                    .filter(|(k, _)| !self.storage.contains_key(k))
                    .map(|(k, (o, _))| (k, o)),
            )
            .collect();
        storage.sort_by(|a, b| a.0.cmp(b.0));
        for (_, obj) in storage {
            obj.clone().push_into(snapshot);
        }
    }

    /// The changes after `since` as a delta (without its base id), or `None` when the log no longer
    /// reaches back that far and a full snapshot is needed.
    pub fn delta_since(&self, since: u64) -> Option<proto::SnapshotDelta> {
        self.delta_since_except(since, None)
    }

    /// The changes after `since` but those logged in `except` (`(from, to]`: what the receiver
    /// holds already) as a delta, or `None` when the log no longer reaches back that far. A key
    /// changed again outside `except` is carried, with its value now.
    pub fn delta_since_except(&self, since: u64, except: Option<(u64, u64)>) -> Option<proto::SnapshotDelta> {
        let skipped = |v: u64| except.is_some_and(|(from, to)| v > from && v <= to);
        let keys: HashSet<&Key> = self
            .versioned_changes_since(since)?
            .filter(|(v, _)| !skipped(*v))
            .map(|(_, k)| k)
            .collect();
        let mut delta = proto::SnapshotDelta::default();
        let mut keys: Vec<&Key> = keys.into_iter().collect();
        keys.sort_unstable();
        for key in keys {
            match key {
                Key::Node(name) => match self.nodes.get(name) {
                    Some(n) => delta.upsert_nodes.push(n.clone()),
                    None => delta.remove_nodes.push(name.clone()),
                },
                Key::Pod(uid) => match self.pod(uid) {
                    Some(p) => delta.upsert_pods.push(p),
                    None => delta.remove_pod_uids.push(uid.clone()),
                },
                Key::Namespace(name) => match self.namespaces.get(name) {
                    Some(n) => delta.upsert_namespaces.push(n.clone()),
                    None => delta.remove_namespaces.push(name.clone()),
                },
                Key::Pdb(key) => match self.pdbs.get(key) {
                    Some(e) => delta.upsert_pod_disruption_budgets.push(e.pdb.clone()),
                    None => delta.remove_pod_disruption_budgets.push(key.clone()),
                },
                Key::Storage(key) => match (self.storage_view(key).cloned(), key) {
                    (Some(StorageObject::Claim(c)), _) => delta.upsert_persistent_volume_claims.push(c),
                    (Some(StorageObject::Volume(v)), _) => delta.upsert_persistent_volumes.push(v),
                    (Some(StorageObject::Class(c)), _) => delta.upsert_storage_classes.push(c),
                    (Some(StorageObject::CsiNode(n)), _) => delta.upsert_csi_nodes.push(n),
                    (None, StorageKey::Claim(k)) => delta.remove_persistent_volume_claims.push(k.clone()),
                    (None, StorageKey::Volume(k)) => delta.remove_persistent_volumes.push(k.clone()),
                    (None, StorageKey::Class(k)) => delta.remove_storage_classes.push(k.clone()),
                    (None, StorageKey::CsiNode(k)) => delta.remove_csi_nodes.push(k.clone()),
                    (Some(StorageObject::CsiDriver(d)), _) => delta.upsert_csi_drivers.push(d),
                    (Some(StorageObject::Capacity(c)), _) => delta.upsert_csi_storage_capacities.push(c),
                    (None, StorageKey::CsiDriver(k)) => delta.remove_csi_drivers.push(k.clone()),
                    (None, StorageKey::Capacity(k)) => delta.remove_csi_storage_capacities.push(k.clone()),
                    (Some(StorageObject::DeviceClass(c)), _) => delta.upsert_device_classes.push(c),
                    (Some(StorageObject::ResourceClaim(c)), _) => delta.upsert_resource_claims.push(c),
                    (Some(StorageObject::ResourceSlice(s)), _) => delta.upsert_resource_slices.push(s),
                    (None, StorageKey::DeviceClass(k)) => delta.remove_device_classes.push(k.clone()),
                    (None, StorageKey::ResourceClaim(k)) => delta.remove_resource_claims.push(k.clone()),
                    (None, StorageKey::ResourceSlice(k)) => delta.remove_resource_slices.push(k.clone()),
                    (Some(StorageObject::DeviceTaintRule(r)), _) => delta.upsert_device_taint_rules.push(r),
                    (None, StorageKey::DeviceTaintRule(k)) => delta.remove_device_taint_rules.push(k.clone()),
                    (Some(StorageObject::PodGroup(g)), _) => delta.upsert_pod_groups.push(g),
                    (None, StorageKey::PodGroup(k)) => delta.remove_pod_groups.push(k.clone()),
                    (Some(StorageObject::CompositePodGroup(g)), _) => delta.upsert_composite_pod_groups.push(g),
                    (None, StorageKey::CompositePodGroup(k)) => delta.remove_composite_pod_groups.push(k.clone()),
                },
            }
        }
        Some(delta)
    }

    /// Whether every pod of `placed` (uid → node) is assumed on its node now.
    pub fn all_assumed(&self, placed: &HashMap<&str, &str>) -> bool {
        placed
            .iter()
            .all(|(uid, node)| self.assumed.get(*uid).is_some_and(|p| p.node_name == *node))
    }

    /// What changed after `since`, oldest first, with the version each change was logged at (a
    /// key may repeat), or `None` when the log no longer reaches back that far or `since` is
    /// ahead of the state.
    fn versioned_changes_since(&self, since: u64) -> Option<impl Iterator<Item = (u64, &Key)>> {
        if since < self.compacted || since > self.version {
            return None;
        }
        let start = self.log.partition_point(|(v, _)| *v <= since);
        Some(self.log.range(start..).map(|(v, k)| (*v, k)))
    }

    /// Forgets log entries every replica has synced past.
    pub fn compact(&mut self, synced_by_all: u64) {
        while let Some((v, _)) = self.log.front() {
            if *v > synced_by_all {
                break;
            }
            self.compacted = *v;
            self.log.pop_front();
        }
    }
}

/// Sorts encoded pods by uid, read from their encoding: `uid` is field 1 of `proto::Pod`, so prost
/// writes it first (tag, length, bytes), and byte order is `str` order.
pub fn sort_by_uid(pods: &mut [Arc<[u8]>]) {
    pods.sort_unstable_by(|a, b| encoded_uid(a).cmp(encoded_uid(b)));
}

/// The uid at the start of an encoded `proto::Pod`; empty if it does not start with one.
fn encoded_uid(pod: &[u8]) -> &[u8] {
    let mut rest = pod;
    if rest.first() != Some(&0x0a) {
        return &[];
    }
    rest = &rest[1..];
    match prost::encoding::decode_varint(&mut rest) {
        Ok(len) => usize::try_from(len).ok().and_then(|len| rest.get(..len)).unwrap_or(&[]),
        Err(_) => &[],
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

/// A bound pod stored by [`ClusterState::apply_bound_pod`]; it was encoded from a `proto::Pod`, so
/// decoding fails only on a bug, and such a pod is left out rather than taking the binder down.
/// Whether a watched storage object shows an assumed choice: the volume refers to the same
/// claim; the claim selects the same node, or is bound.
fn shows_assumption(watched: &StorageObject, assumed: &StorageObject) -> bool {
    match (watched, assumed) {
        (StorageObject::Volume(w), StorageObject::Volume(a)) => match (&w.claim_ref, &a.claim_ref) {
            (Some(w), Some(a)) => w.namespace == a.namespace && w.name == a.name,
            _ => false,
        },
        (StorageObject::Claim(w), StorageObject::Claim(a)) => {
            w.selected_node == a.selected_node || !w.volume_name.is_empty()
        }
        // Allocated (by this PreBind, or by whoever won a race: the watched object decides).
        (StorageObject::ResourceClaim(w), StorageObject::ResourceClaim(_)) => w.allocation.is_some(),
        _ => false,
    }
}

fn decode(bytes: &[u8]) -> Option<proto::Pod> {
    match proto::Pod::decode(bytes) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::error!(error = %e, "a stored bound pod does not decode; left out of the snapshot");
            None
        }
    }
}

/// The name under which the devices of a pod's special claim for extended resources are assumed
/// until the claim PreBind creates is watched (not a valid object name: no real claim has it).
pub fn assumed_extended_claim(pod_uid: &str) -> String {
    format!("<extended-resources>-{pod_uid}")
}

/// A CompositePodGroup hierarchy as the binder knows it ([`ClusterState::pod_group_tree`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodGroupTree {
    /// The root CompositePodGroup, `namespace/name`.
    pub root: String,
    /// Its PodGroups: `namespace/name`, the parent's name, minCount (1 for basic).
    pub groups: Vec<(String, String, u32)>,
    /// Its CompositePodGroups: name, the parent's name (empty for the root), minGroupCount (1
    /// for basic).
    pub composites: Vec<(String, String, u32)>,
}

impl PodGroupTree {
    /// kube's GangScheduling `isCPGTreeReady` from the root: each PodGroup is ready when
    /// `present` (its pods pending and scheduled) reaches its minCount, each composite when
    /// minGroupCount of its children are.
    pub fn ready(&self, present: &dyn Fn(&str) -> usize) -> bool {
        let root = self.root.split_once('/').map_or(self.root.as_str(), |(_, n)| n);
        self.composite_ready(root, present, 0)
    }

    fn composite_ready(&self, name: &str, present: &dyn Fn(&str) -> usize, depth: usize) -> bool {
        if depth > 8 {
            return false;
        }
        let Some((_, _, min)) = self.composites.iter().find(|(n, ..)| n == name) else {
            return false;
        };
        let groups = self
            .groups
            .iter()
            .filter(|(_, parent, _)| parent == name)
            .filter(|(key, _, min)| present(key) >= *min as usize)
            .count();
        let composites = self
            .composites
            .iter()
            .filter(|(_, parent, _)| parent == name)
            .filter(|(n, ..)| self.composite_ready(n, present, depth + 1))
            .count();
        groups + composites >= *min as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> proto::Node {
        proto::Node {
            name: name.into(),
            ..Default::default()
        }
    }

    fn pod(uid: &str, node: &str) -> proto::Pod {
        proto::Pod {
            uid: uid.into(),
            node_name: node.into(),
            ..Default::default()
        }
    }

    #[test]
    fn nodes_carry_their_partition_only_when_decisions_run_in_partitions() {
        use crate::partitions::{partition_of, PARTITION_LABEL};
        let mut s = ClusterState::with_partitions(3);
        s.apply_node(node("a"));
        let v = s.version();
        // The same node again (as the watch relists it) changes nothing.
        s.apply_node(node("a"));
        assert_eq!(s.version(), v);
        let label = s.nodes()["a"].labels.get(PARTITION_LABEL).cloned();
        assert_eq!(label, Some(partition_of("a", 3).to_string()));
        let mut plain = ClusterState::new();
        plain.apply_node(node("a"));
        assert!(plain.nodes()["a"].labels.is_empty());
    }

    #[test]
    fn delta_carries_latest_value_of_each_change() {
        let mut s = ClusterState::new();
        s.apply_node(node("a"));
        let v = s.version();
        s.apply_node(node("b"));
        s.apply_bound_pod(pod("p1", "a"));
        s.delete_node("a");
        let d = s.delta_since(v).unwrap();
        assert_eq!(
            d.upsert_nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
            ["b"]
        );
        assert_eq!(d.remove_nodes, ["a"]);
        assert_eq!(d.upsert_pods.len(), 1);
        assert!(s.delta_since(s.version()).unwrap().upsert_nodes.is_empty());
    }

    #[test]
    fn full_parts_hold_every_pod_in_uid_order_shared_with_the_state() {
        let mut s = ClusterState::new();
        s.apply_node(node("b"));
        s.apply_node(node("a"));
        for uid in ["p3", "p1", "p4"] {
            s.apply_bound_pod(pod(uid, "a"));
        }
        s.assume(pod("p2", ""), "b");
        let parts = s.full_parts();
        assert!(parts.rest.pods.is_empty(), "the pods travel apart");
        assert_eq!(
            parts.rest.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let pods: Vec<proto::Pod> = parts.pods.iter().filter_map(|b| decode(b)).collect();
        assert_eq!(
            pods.iter()
                .map(|p| (p.uid.as_str(), p.node_name.as_str()))
                .collect::<Vec<_>>(),
            [("p1", "a"), ("p2", "b"), ("p3", "a"), ("p4", "a")]
        );
        assert_eq!(s.full().pods, pods, "full() is the parts joined");
        // Bound pods are the state's bytes, not copies.
        assert!(Arc::ptr_eq(&parts.pods[0], &s.bound["p1"]));
        // Sorted apart, the unordered parts are the same.
        let mut unordered = s.full_parts_unordered();
        sort_by_uid(&mut unordered.pods);
        assert_eq!(unordered.pods, parts.pods);
    }

    #[test]
    fn an_encoded_pod_sorts_by_its_uid() {
        let long = "u".repeat(200);
        let mut pods: Vec<Arc<[u8]>> = ["b", long.as_str(), "a", "ab"]
            .iter()
            .map(|uid| pod(uid, "n").encode_to_vec().into())
            .collect();
        sort_by_uid(&mut pods);
        let uids: Vec<String> = pods.iter().filter_map(|b| decode(b)).map(|p| p.uid).collect();
        assert_eq!(uids, ["a", "ab", "b", long.as_str()]);
        assert_eq!(encoded_uid(&[]), b"");
        assert_eq!(encoded_uid(&[0x0a, 0x09, b'x']), b"", "a length past the end");
    }

    #[test]
    fn assumptions_count_until_confirmed_or_forgotten() {
        let mut s = ClusterState::new();
        s.apply_node(node("a"));
        s.assume(pod("p1", ""), "a");
        assert_eq!(s.full().pods[0].node_name, "a");
        let v = s.version();
        // The watch shows the binding: same pod, no change for the replicas.
        s.apply_bound_pod(pod("p1", "a"));
        assert!(!s.is_assumed("p1") && s.is_bound("p1"));
        assert_eq!(s.version(), v, "confirming an identical assumption changes nothing");
        assert_eq!(s.pod_count(), 1);
        // A failed bind forgets the assumption.
        s.assume(pod("p2", ""), "a");
        s.forget("p2");
        assert_eq!(s.pod_count(), 1);
        assert_eq!(s.delta_since(v).unwrap().remove_pod_uids, ["p2"]);
    }

    #[test]
    fn namespaces_travel_in_full_snapshots_and_deltas() {
        let mut s = ClusterState::new();
        let ns = |name: &str, team: &str| proto::Namespace {
            name: name.into(),
            labels: [("team".to_string(), team.to_string())].into(),
        };
        s.apply_namespace(ns("a", "x"));
        let v = s.version();
        assert_eq!(s.full().namespaces, [ns("a", "x")]);
        s.apply_namespace(ns("a", "x"));
        assert_eq!(s.version(), v, "an unchanged namespace is not a change");
        s.apply_namespace(ns("a", "y"));
        s.apply_namespace(ns("b", "z"));
        s.delete_namespace("b");
        let d = s.delta_since(v).unwrap();
        assert_eq!(d.upsert_namespaces, [ns("a", "y")]);
        assert_eq!(d.remove_namespaces, ["b"]);
    }

    fn pdb(name: &str, allowed: i32, disrupted: &[&str]) -> PdbInfo {
        PdbInfo {
            pdb: proto::PodDisruptionBudget {
                namespace: "shop".into(),
                name: name.into(),
                selector: Some(proto::LabelSelector {
                    match_labels: [("app".to_string(), "db".to_string())].into(),
                    ..Default::default()
                }),
                disruptions_allowed: allowed,
                disrupted_pod_uids: vec![],
            },
            disrupted_pods: disrupted.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn named(uid: &str, namespace: &str, name: &str) -> proto::Pod {
        proto::Pod {
            namespace: namespace.into(),
            name: name.into(),
            ..pod(uid, "a")
        }
    }

    #[test]
    fn pdbs_travel_in_full_snapshots_and_deltas() {
        let mut s = ClusterState::new();
        let v = s.version();
        s.apply_pdb(pdb("db", 0, &[]));
        assert_eq!(s.full().pod_disruption_budgets.len(), 1);
        assert_eq!(s.full().pod_disruption_budgets[0].disruptions_allowed, 0);
        let d = s.delta_since(v).unwrap();
        assert_eq!(d.upsert_pod_disruption_budgets[0].name, "db");
        let v = s.version();
        s.apply_pdb(pdb("db", 0, &[]));
        assert_eq!(s.version(), v, "an unchanged budget is not a change");
        s.apply_pdb(pdb("db", 1, &[]));
        assert_eq!(
            s.delta_since(v).unwrap().upsert_pod_disruption_budgets[0].disruptions_allowed,
            1
        );
        let v = s.version();
        s.delete_pdb("shop/db");
        assert!(s.full().pod_disruption_budgets.is_empty());
        assert_eq!(s.delta_since(v).unwrap().remove_pod_disruption_budgets, ["shop/db"]);
    }

    #[test]
    fn disrupted_pod_names_resolve_to_the_uids_of_the_namespaces_pods() {
        let mut s = ClusterState::new();
        s.apply_bound_pod(named("u0", "shop", "db-0"));
        s.apply_bound_pod(named("x0", "other", "db-1"));
        // db-0 is known; db-1 exists only in another namespace, so it waits for its pod.
        s.apply_pdb(pdb("db", 0, &["db-1", "db-0"]));
        assert_eq!(s.full().pod_disruption_budgets[0].disrupted_pod_uids, ["u0"]);
        let v = s.version();
        s.apply_bound_pod(named("u1", "shop", "db-1"));
        let d = s.delta_since(v).unwrap();
        assert_eq!(d.upsert_pod_disruption_budgets[0].disrupted_pod_uids, ["u0", "u1"]);
        // Once the pod is gone, the resolved uid stays until the disruption controller drops the
        // name; a pod recreated under the name is not taken for the evicted one.
        s.delete_pod("u0");
        s.apply_pdb(pdb("db", 0, &["db-1", "db-0"]));
        s.apply_bound_pod(named("u0b", "shop", "db-0"));
        assert_eq!(s.full().pod_disruption_budgets[0].disrupted_pod_uids, ["u0", "u1"]);
        // The controller clears the list.
        s.apply_pdb(pdb("db", 2, &[]));
        assert!(s.full().pod_disruption_budgets[0].disrupted_pod_uids.is_empty());
        s.apply_bound_pod(named("u9", "shop", "db-9"));
        assert_eq!(s.unresolved_pdbs, 0);
    }

    #[test]
    fn bound_pods_come_back_whole_from_their_encoded_form() {
        let mut s = ClusterState::new();
        s.apply_node(node("a"));
        let v = s.version();
        let mut p = pod("p1", "a");
        p.namespace = "shop".into();
        p.labels.insert("app".into(), "cart".into());
        p.containers.push(proto::Container {
            name: "app".into(),
            image: "registry.example/cart:1".into(),
            requests: [("cpu".to_string(), "250m".to_string())].into(),
            ..Default::default()
        });
        s.apply_bound_pod(p.clone());
        assert_eq!(s.full().pods, [p.clone()]);
        assert_eq!(s.delta_since(v).unwrap().upsert_pods, [p.clone()]);
        let v = s.version();
        s.apply_bound_pod(p.clone());
        assert_eq!(s.version(), v, "the same bound pod again changes nothing");
        p.labels.insert("tier".into(), "web".into());
        s.apply_bound_pod(p.clone());
        assert_eq!(s.delta_since(v).unwrap().upsert_pods, [p]);
    }

    #[test]
    fn a_replicas_own_assumed_placements_are_left_out_of_its_next_delta() {
        let mut s = ClusterState::new();
        s.apply_node(node("a"));
        s.apply_node(node("b"));
        // The replica decided on `v`; meanwhile another batch assumed p0.
        let v = s.version();
        s.assume(pod("p0", ""), "b");
        // Its own batch: p1 and p2, logged in (from, to].
        let from = s.version();
        s.assume(pod("p1", ""), "a");
        s.assume(pod("p2", ""), "b");
        let to = s.version();
        let placed: HashMap<&str, &str> = [("p1", "a"), ("p2", "b")].into();
        assert!(s.all_assumed(&placed));
        assert!(!s.all_assumed(&[("p1", "b")].into()), "assumed elsewhere");
        assert!(!s.all_assumed(&[("p3", "a")].into()), "not assumed");
        let uids = |d: &proto::SnapshotDelta| d.upsert_pods.iter().map(|p| p.uid.clone()).collect::<Vec<_>>();
        let d = s.delta_since_except(v, Some((from, to))).unwrap();
        assert_eq!(uids(&d), ["p0"], "only what else changed");
        assert_eq!(uids(&s.delta_since(v).unwrap()), ["p0", "p1", "p2"]);
        // Nothing else changed: an empty delta.
        assert_eq!(
            s.delta_since_except(from, Some((from, to))).unwrap(),
            proto::SnapshotDelta::default()
        );
        // A later change to one of its own pods is carried, with its value now.
        s.forget("p1");
        let d = s.delta_since_except(v, Some((from, to))).unwrap();
        assert_eq!(uids(&d), ["p0"]);
        assert_eq!(d.remove_pod_uids, ["p1"]);
        // A version the log no longer reaches.
        s.compact(to);
        assert!(s.delta_since_except(v, Some((from, to))).is_none());
    }

    #[test]
    fn storage_objects_travel_in_full_snapshots_and_deltas() {
        let claim = |volume: &str| {
            StorageObject::Claim(proto::PersistentVolumeClaim {
                namespace: "shop".into(),
                name: "data-db-0".into(),
                volume_name: volume.into(),
                ..Default::default()
            })
        };
        let class = StorageObject::Class(proto::StorageClass {
            name: "local".into(),
            provisioner: "kubernetes.io/no-provisioner".into(),
            volume_binding_mode: "WaitForFirstConsumer".into(),
            ..Default::default()
        });
        let mut s = ClusterState::new();
        assert!(s.apply_storage(claim("")));
        assert!(s.apply_storage(class.clone()));
        let v = s.version();
        assert!(!s.apply_storage(claim("")), "an unchanged object is not a change");
        assert_eq!(s.version(), v);
        let full = s.full();
        assert_eq!(full.persistent_volume_claims.len(), 1);
        assert_eq!(full.storage_classes[0].name, "local");
        s.apply_storage(claim("pv-1"));
        s.apply_storage(StorageObject::CsiNode(proto::CsiNode {
            name: "n1".into(),
            drivers: vec![proto::CsiNodeDriver {
                name: "ebs.csi.aws.com".into(),
                allocatable_count: Some(25),
            }],
        }));
        assert!(s.delete_storage(&StorageKey::Class("local".into())));
        assert!(!s.delete_storage(&StorageKey::Volume("nowhere".into())));
        let d = s.delta_since(v).unwrap();
        assert_eq!(d.upsert_persistent_volume_claims[0].volume_name, "pv-1");
        assert_eq!(d.upsert_csi_nodes[0].drivers[0].allocatable_count, Some(25));
        assert_eq!(d.remove_storage_classes, ["local"]);
        assert!(s.full().storage_classes.is_empty());
    }

    #[test]
    fn volume_choices_are_assumed_until_the_watch_shows_them_or_they_are_forgotten() {
        use proto::claim_binding::Target;
        let claim = |name: &str| proto::PersistentVolumeClaim {
            namespace: "shop".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            ..Default::default()
        };
        let volume = proto::PersistentVolume {
            name: "pv-1".into(),
            ..Default::default()
        };
        let binding = |name: &str, target: Target| proto::ClaimBinding {
            claim_namespace: "shop".into(),
            claim_name: name.into(),
            target: Some(target),
        };
        let mut s = ClusterState::new();
        s.apply_storage(StorageObject::Claim(claim("a")));
        s.apply_storage(StorageObject::Claim(claim("b")));
        s.apply_storage(StorageObject::Volume(volume.clone()));
        let v = s.version();
        let keys = s.assume_storage(
            "p1",
            &[
                binding("a", Target::VolumeName("pv-1".into())),
                binding("b", Target::SelectedNode("n2".into())),
                binding("gone", Target::SelectedNode("n2".into())),
            ],
        );
        assert_eq!(
            keys,
            [StorageKey::Volume("pv-1".into()), StorageKey::Claim("shop/b".into())]
        );
        // Snapshots show the assumptions; the watched objects are kept as they are.
        let want_ref = proto::VolumeClaimRef {
            namespace: "shop".into(),
            name: "a".into(),
            uid: "uid-a".into(),
        };
        let d = s.delta_since(v).unwrap();
        assert_eq!(d.upsert_persistent_volumes[0].claim_ref.as_ref(), Some(&want_ref));
        assert_eq!(d.upsert_persistent_volume_claims[0].selected_node, "n2");
        assert_eq!(s.full().persistent_volumes[0].claim_ref.as_ref(), Some(&want_ref));
        assert!(matches!(s.storage_object(&StorageKey::Volume("pv-1".into())),
            Some(StorageObject::Volume(v)) if v.claim_ref.is_none()));
        // A replica that assumed the same choices needs no delta for them.
        let assumed = s.version();
        assert_eq!(assumed - v, 2, "one change per choice");
        assert_eq!(
            s.delta_since_except(v, Some((v, assumed))).unwrap(),
            proto::SnapshotDelta::default()
        );
        // A second pod of the same claims: nothing new to assume, the first pod keeps them.
        assert!(s
            .assume_storage("p1b", &[binding("a", Target::VolumeName("pv-1".into()))])
            .is_empty());
        assert_eq!(s.version(), assumed, "nothing logged");
        // A watched volume without the claimRef (an older object) leaves the assumption; the one
        // showing it replaces the assumption.
        s.apply_storage(StorageObject::Volume(proto::PersistentVolume {
            phase: "Available".into(),
            ..volume.clone()
        }));
        assert_eq!(s.assumed_storage_count(), 2);
        s.apply_storage(StorageObject::Volume(proto::PersistentVolume {
            claim_ref: Some(want_ref.clone()),
            ..volume.clone()
        }));
        assert_eq!(s.assumed_storage_count(), 1);
        // Forgetting the pod's choices shows the watched claim again, in a delta too.
        let v = s.version();
        s.forget_storage("p1");
        assert_eq!(s.assumed_storage_count(), 0);
        let d = s.delta_since(v).unwrap();
        assert_eq!(d.upsert_persistent_volume_claims[0].selected_node, "");
        // A choice the watched object already shows assumes nothing.
        assert!(s
            .assume_storage("p2", &[binding("a", Target::VolumeName("pv-1".into()))])
            .is_empty());
    }

    #[test]
    fn a_hierarchy_is_found_from_any_of_its_pod_groups_and_is_ready_level_by_level() {
        let mut s = ClusterState::new();
        let pg = |name: &str, parent: &str, min: i32| {
            StorageObject::PodGroup(proto::PodGroup {
                namespace: "ml".into(),
                name: name.into(),
                gang: Some(proto::GangSchedulingPolicy { min_count: min }),
                parent_composite_pod_group_name: parent.into(),
                ..Default::default()
            })
        };
        let cpg = |name: &str, parent: &str, min: Option<i32>| {
            StorageObject::CompositePodGroup(proto::CompositePodGroup {
                namespace: "ml".into(),
                name: name.into(),
                parent_composite_pod_group_name: parent.into(),
                min_group_count: min,
                ..Default::default()
            })
        };
        s.apply_storage(pg("a", "block", 2));
        s.apply_storage(pg("b", "block", 2));
        s.apply_storage(pg("c", "other", 1));
        s.apply_storage(pg("plain", "", 1));
        // The parent is not known yet: no hierarchy.
        assert!(s.pod_group_tree("ml", "a").is_none());
        s.apply_storage(cpg("block", "job", Some(2)));
        assert!(s.pod_group_tree("ml", "a").is_none(), "the root is missing");
        s.apply_storage(cpg("job", "", None));
        s.apply_storage(cpg("other", "", None));
        assert!(s.pod_group_tree("ml", "plain").is_none());
        let tree = s.pod_group_tree("ml", "b").expect("a hierarchy");
        assert_eq!(tree.root, "ml/job");
        let mut groups: Vec<&str> = tree.groups.iter().map(|(k, ..)| k.as_str()).collect();
        groups.sort();
        assert_eq!(groups, ["ml/a", "ml/b"], "ml/c is under another root");
        // block needs both a and b (minGroupCount 2), each two pods; job needs block (basic).
        let counts = |a: usize, b: usize| {
            move |k: &str| {
                if k == "ml/a" {
                    a
                } else if k == "ml/b" {
                    b
                } else {
                    0
                }
            }
        };
        assert!(tree.ready(&counts(2, 2)));
        assert!(!tree.ready(&counts(2, 1)));
        assert!(!tree.ready(&counts(0, 3)));
        assert!(s
            .delta_since(0)
            .is_some_and(|d| d.upsert_composite_pod_groups.len() == 3));
        assert_eq!(s.full().composite_pod_groups.len(), 3);
    }

    #[test]
    fn pod_groups_travel_in_full_snapshots_and_deltas_and_are_found_by_namespace_and_name() {
        let group = |ns: &str, name: &str, min: i32| {
            StorageObject::PodGroup(proto::PodGroup {
                namespace: ns.into(),
                name: name.into(),
                uid: format!("u-{ns}-{name}"),
                gang: Some(proto::GangSchedulingPolicy { min_count: min }),
                ..Default::default()
            })
        };
        let mut s = ClusterState::new();
        assert!(!s.pod_groups_served(), "not served until the watch says so");
        s.set_pod_groups_served(true);
        assert!(s.pod_groups_served());
        let v = s.version();
        assert!(s.apply_storage(group("ml", "b", 2)));
        assert!(s.apply_storage(group("ml", "a", 4)));
        assert!(s.apply_storage(group("batch", "a", 1)));
        assert!(
            !s.apply_storage(group("ml", "a", 4)),
            "an unchanged group is not a change"
        );
        // Sorted by namespace/name in a full snapshot.
        let names: Vec<(String, String)> = s
            .full()
            .pod_groups
            .iter()
            .map(|g| (g.namespace.clone(), g.name.clone()))
            .collect();
        assert_eq!(
            names,
            [
                ("batch".into(), "a".into()),
                ("ml".into(), "a".into()),
                ("ml".into(), "b".into())
            ]
        );
        assert_eq!(s.delta_since(v).unwrap().upsert_pod_groups.len(), 3);
        assert_eq!(
            s.pod_group("ml", "a").and_then(|g| g.gang).map(|g| g.min_count),
            Some(4)
        );
        assert_eq!(s.pod_group("batch", "a").map(|g| g.uid.as_str()), Some("u-batch-a"));
        assert!(s.pod_group("ml", "c").is_none());
        assert!(
            s.pod_group("other", "a").is_none(),
            "a group is found in its own namespace only"
        );
        // minCount changed, a group deleted: the delta carries both.
        let v = s.version();
        s.apply_storage(group("ml", "a", 3));
        assert!(s.delete_storage(&StorageKey::PodGroup("ml/b".into())));
        let d = s.delta_since(v).unwrap();
        assert_eq!(d.upsert_pod_groups.len(), 1);
        assert_eq!(d.upsert_pod_groups[0].gang.as_ref().map(|g| g.min_count), Some(3));
        assert_eq!(d.remove_pod_groups, ["ml/b"]);
        assert!(s.pod_group("ml", "b").is_none());
        assert_eq!(s.full().pod_groups.len(), 2);
    }

    #[test]
    fn compacted_history_forces_a_full_sync() {
        let mut s = ClusterState::new();
        s.apply_node(node("a"));
        s.apply_node(node("b"));
        s.compact(2);
        assert!(s.delta_since(1).is_none());
        assert!(s.delta_since(2).is_some());
    }

    /// A pod's special claim for extended resources is assumed (its devices in the snapshots)
    /// until the watch shows the claim its PreBind created, with the same devices and reserved
    /// for the pod; a claim of another pod leaves the assumption.
    #[test]
    fn an_extended_resource_claim_is_assumed_until_the_created_claim_is_watched() {
        let allocation = proto::AllocationResult {
            devices: vec![proto::DeviceRequestAllocationResult {
                request: "container-0-request-0".into(),
                driver: "gpu.example.com".into(),
                pool: "n1".into(),
                device: "gpu-0".into(),
                ..Default::default()
            }],
            node_selector: None,
            allocation_timestamp_seconds: None,
        };
        let mut s = ClusterState::new();
        let keys = s.assume_devices(
            "p1",
            "web",
            &[proto::ClaimAllocation {
                claim_namespace: "shop".into(),
                allocation: Some(allocation.clone()),
                extended_resource_claim: Some(proto::ExtendedResourceClaim::default()),
                ..Default::default()
            }],
        );
        assert_eq!(keys, [StorageKey::ResourceClaim("shop/<extended-resources>-p1".into())]);
        let claims = |s: &ClusterState| -> Vec<String> {
            s.storage_snapshot()
                .resource_claims
                .iter()
                .map(|c| c.name.clone())
                .collect()
        };
        assert_eq!(claims(&s), ["<extended-resources>-p1"]);
        let created = |name: &str, uid: &str| proto::ResourceClaim {
            namespace: "shop".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            allocation: Some(allocation.clone()),
            reserved_for: vec![proto::ResourceClaimConsumer {
                resource: "pods".into(),
                name: "x".into(),
                uid: uid.into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        // Another pod's claim with those devices (a stale view) does not replace it.
        s.apply_storage(StorageObject::ResourceClaim(created("other", "p2")));
        assert_eq!(s.assumed_storage_count(), 1);
        s.apply_storage(StorageObject::ResourceClaim(created(
            "web-extended-resources-x7k2p",
            "p1",
        )));
        assert_eq!(s.assumed_storage_count(), 0);
        let mut names = claims(&s);
        names.sort();
        assert_eq!(names, ["other", "web-extended-resources-x7k2p"]);
    }
}
