//! The trackers of nodes, namespaces, PodDisruptionBudgets and pods: each turns its watch's
//! events into cluster events and remembers the keys it has seen, so that a relist reports what
//! vanished while the watch was down; and the pod as the pod watch decodes it ([`WatchedPod`]).

use std::borrow::Cow;
use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::ObjectMeta;
use kube::runtime::watcher::Event;

use crate::binder::ClusterEvent;
use crate::lean::Lean;
use crate::projection::{namespace_info, node_info, pdb_info, pdb_key, pod_info, PodInfo};

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

/// A pod as the pod watch decodes it: projected ([`pod_info`]) as each object of a list page or
/// watch event is decoded. A page of 500 then holds projections instead of whole k8s-openapi Pods
/// (about 2 KB each before their heap parts, moved through every layer of the watcher's stream),
/// and each decoded Pod is dropped while it is still in cache. Its metadata keeps the identity and
/// the resourceVersion, which the watcher reads.
#[derive(Debug, Clone)]
pub struct WatchedPod(Box<WatchedPodParts>);

#[derive(Debug, Clone)]
struct WatchedPodParts {
    metadata: ObjectMeta,
    info: PodInfo,
}

impl WatchedPod {
    /// The projection of `pod`.
    pub fn new(pod: &Pod) -> Self {
        let m = &pod.metadata;
        Self(Box::new(WatchedPodParts {
            metadata: ObjectMeta {
                name: m.name.clone(),
                namespace: m.namespace.clone(),
                uid: m.uid.clone(),
                resource_version: m.resource_version.clone(),
                ..ObjectMeta::default()
            },
            info: pod_info(pod),
        }))
    }

    /// What the binder tracks of the pod.
    pub fn info(&self) -> &PodInfo {
        &self.0.info
    }

    /// The projection, taken.
    pub fn into_info(self) -> PodInfo {
        self.0.info
    }
}

impl From<Pod> for WatchedPod {
    fn from(pod: Pod) -> Self {
        Self::new(&pod)
    }
}

impl<'de> serde::Deserialize<'de> for WatchedPod {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Without its managed fields, which the projection never reads.
        Lean::<Pod>::deserialize(d).map(|pod| Self::new(&pod.0))
    }
}

/// The core/v1 `pods` resource, as [`Pod`].
impl kube::Resource for WatchedPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        <Pod as kube::Resource>::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        <Pod as kube::Resource>::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        <Pod as kube::Resource>::version(dt)
    }
    fn api_version(dt: &()) -> Cow<'_, str> {
        <Pod as kube::Resource>::api_version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        <Pod as kube::Resource>::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

/// Turns pod watch events into cluster events.
#[derive(Debug, Default)]
pub struct PodTracker {
    keys: KnownKeys,
}

impl PodTracker {
    /// The cluster events for one watch event; `true` with them when an initial list completed.
    pub fn on_event(&mut self, event: Event<WatchedPod>) -> (Vec<ClusterEvent>, bool) {
        match event {
            Event::Init => {
                self.keys.init();
                (Vec::new(), false)
            }
            Event::InitApply(pod) | Event::Apply(pod) if pod.info().spec.uid.is_empty() => {
                tracing::debug!(pod = %pod.info().spec.name, "pod without uid ignored");
                (Vec::new(), false)
            }
            Event::InitApply(pod) => {
                let info = pod.into_info();
                self.keys.init_apply(&info.spec.uid);
                (vec![ClusterEvent::PodApplied(info)], false)
            }
            Event::Apply(pod) => {
                let info = pod.into_info();
                self.keys.apply(&info.spec.uid);
                (vec![ClusterEvent::PodApplied(info)], false)
            }
            Event::Delete(pod) => {
                let uid = pod.into_info().spec.uid;
                if uid.is_empty() {
                    return (Vec::new(), false);
                }
                self.keys.delete(&uid);
                (vec![ClusterEvent::PodDeleted { uid }], false)
            }
            Event::InitDone => {
                let gone = self
                    .keys
                    .init_done()
                    .into_iter()
                    .map(|uid| ClusterEvent::PodDeleted { uid })
                    .collect();
                (gone, true)
            }
        }
    }

    /// Pods known.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no pod is known.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}
