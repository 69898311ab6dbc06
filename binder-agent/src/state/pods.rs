//! Nodes, namespaces, and the pods counted on the nodes: bound (as the API server shows them)
//! and assumed (decided, not yet seen bound).

use std::collections::HashMap;
use std::sync::Arc;

use placement_scheduler::proto;
use prost::Message;

use super::encoding::decode;
use super::{ClusterState, Key};

impl ClusterState {
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

    /// Whether every pod of `placed` (uid → node) is assumed on its node now.
    pub fn all_assumed(&self, placed: &HashMap<&str, &str>) -> bool {
        placed
            .iter()
            .all(|(uid, node)| self.assumed.get(*uid).is_some_and(|p| p.node_name == *node))
    }
}
