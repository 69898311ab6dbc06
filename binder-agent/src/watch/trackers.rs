//! The trackers of nodes, namespaces and PodDisruptionBudgets: each turns its watch's events into
//! cluster events and remembers the keys it has seen ([`KnownKeys`], which the pod tracker shares),
//! so that a relist reports what vanished while the watch was down.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::watcher::Event;

use crate::binder::ClusterEvent;
use crate::projection::{namespace_info, node_info, pdb_info, pdb_key};

/// The keys a watcher has seen, to turn a relist into deletions.
#[derive(Debug, Default)]
pub struct KnownKeys {
    known: HashSet<String>,
    relisting: Option<HashSet<String>>,
}

impl KnownKeys {
    /// Keys currently known.
    pub fn len(&self) -> usize {
        self.known.len()
    }

    /// Whether no key is known.
    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    /// A relist starts.
    pub fn init(&mut self) {
        self.relisting = Some(HashSet::new());
    }

    /// A relisted object.
    pub fn init_apply(&mut self, key: &str) {
        match &mut self.relisting {
            Some(seen) => seen.insert(key.to_string()),
            None => self.known.insert(key.to_string()),
        };
    }

    /// An object added or changed.
    pub fn apply(&mut self, key: &str) {
        self.known.insert(key.to_string());
    }

    /// An object deleted.
    pub fn delete(&mut self, key: &str) {
        self.known.remove(key);
    }

    /// The relist is complete: returns the keys known before that it did not list (deleted while
    /// the watch was down).
    pub fn init_done(&mut self) -> Vec<String> {
        let Some(seen) = self.relisting.take() else {
            return Vec::new();
        };
        let mut gone: Vec<String> = self.known.difference(&seen).cloned().collect();
        gone.sort();
        self.known = seen;
        gone
    }
}

/// Turns node watch events into cluster events.
#[derive(Debug, Default)]
pub struct NodeTracker {
    keys: KnownKeys,
}

impl NodeTracker {
    /// The cluster events for one watch event; `true` with them when an initial list completed.
    pub fn on_event(&mut self, event: Event<Node>) -> (Vec<ClusterEvent>, bool) {
        match event {
            Event::Init => {
                self.keys.init();
                (Vec::new(), false)
            }
            Event::InitApply(node) => {
                let info = node_info(&node);
                self.keys.init_apply(&info.name);
                (vec![ClusterEvent::NodeApplied(info)], false)
            }
            Event::Apply(node) => {
                let info = node_info(&node);
                self.keys.apply(&info.name);
                (vec![ClusterEvent::NodeApplied(info)], false)
            }
            Event::Delete(node) => {
                let name = node.metadata.name.unwrap_or_default();
                self.keys.delete(&name);
                (vec![ClusterEvent::NodeDeleted(name)], false)
            }
            Event::InitDone => {
                let gone = self
                    .keys
                    .init_done()
                    .into_iter()
                    .map(ClusterEvent::NodeDeleted)
                    .collect();
                (gone, true)
            }
        }
    }

    /// Nodes known.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no node is known.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Turns namespace watch events into cluster events.
#[derive(Debug, Default)]
pub struct NamespaceTracker {
    keys: KnownKeys,
}

impl NamespaceTracker {
    /// The cluster events for one watch event; `true` with them when an initial list completed.
    pub fn on_event(&mut self, event: Event<Namespace>) -> (Vec<ClusterEvent>, bool) {
        match event {
            Event::Init => {
                self.keys.init();
                (Vec::new(), false)
            }
            Event::InitApply(ns) => {
                let info = namespace_info(&ns);
                self.keys.init_apply(&info.name);
                (vec![ClusterEvent::NamespaceApplied(info)], false)
            }
            Event::Apply(ns) => {
                let info = namespace_info(&ns);
                self.keys.apply(&info.name);
                (vec![ClusterEvent::NamespaceApplied(info)], false)
            }
            Event::Delete(ns) => {
                let name = ns.metadata.name.unwrap_or_default();
                self.keys.delete(&name);
                (vec![ClusterEvent::NamespaceDeleted(name)], false)
            }
            Event::InitDone => {
                let gone = self
                    .keys
                    .init_done()
                    .into_iter()
                    .map(ClusterEvent::NamespaceDeleted)
                    .collect();
                (gone, true)
            }
        }
    }
}

/// Turns PodDisruptionBudget watch events into cluster events.
#[derive(Debug, Default)]
pub struct PdbTracker {
    keys: KnownKeys,
}

impl PdbTracker {
    /// The cluster events for one watch event; `true` with them when an initial list completed.
    pub fn on_event(&mut self, event: Event<PodDisruptionBudget>) -> (Vec<ClusterEvent>, bool) {
        match event {
            Event::Init => {
                self.keys.init();
                (Vec::new(), false)
            }
            Event::InitApply(pdb) => {
                let info = pdb_info(&pdb);
                self.keys.init_apply(&info.key());
                (vec![ClusterEvent::PdbApplied(info)], false)
            }
            Event::Apply(pdb) => {
                let info = pdb_info(&pdb);
                self.keys.apply(&info.key());
                (vec![ClusterEvent::PdbApplied(info)], false)
            }
            Event::Delete(pdb) => {
                let key = pdb_key(
                    pdb.metadata.namespace.as_deref().unwrap_or_default(),
                    pdb.metadata.name.as_deref().unwrap_or_default(),
                );
                self.keys.delete(&key);
                (vec![ClusterEvent::PdbDeleted(key)], false)
            }
            Event::InitDone => {
                let gone = self
                    .keys
                    .init_done()
                    .into_iter()
                    .map(ClusterEvent::PdbDeleted)
                    .collect();
                (gone, true)
            }
        }
    }
}
