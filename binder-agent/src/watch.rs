//! Feeds a [`Binder`] from the API server with kube-runtime watchers: every node, every namespace
//! (whose labels pod affinity namespace selectors read), every policy/v1 PodDisruptionBudget
//! (which preemption tries not to violate), every PersistentVolumeClaim, PersistentVolume,
//! StorageClass and CSINode (which the volume filters read), every DeviceClass, ResourceClaim,
//! ResourceSlice and DeviceTaintRule (which DynamicResources reads), every PodGroup (scheduling.k8s.io/v1beta1, the
//! groups pods name in `spec.schedulingGroup`), and every pod that is not finished.
//!
//! Pods come from ONE watch over all namespaces with the field selector
//! `status.phase!=Succeeded,status.phase!=Failed`, as kube-scheduler's own pod informer. Two
//! watches (pending pods, bound pods) would race: a pod being bound would leave the first before
//! it appears in the second, and the first's delete event would then wipe the usage the second
//! just recorded (or the pod would count nowhere for a while, and a batch would overcommit its
//! node). With one watch a binding is a single modification of one object, and the binder
//! classifies each pod itself: ours and unbound → the queue, bound → node usage. A pod that
//! finishes leaves the selector; the API server reports that as a deletion, which frees its node.
//!
//! A watcher restart relists (`Init`, `InitApply`…, `InitDone`); objects that vanished while the
//! watch was down are not reported by the API server, so each watcher keeps the set of keys it has
//! seen (node names, pod uids — not the objects) and reports the difference as deletions when the
//! relist completes. The binder is marked synced once every initial list is done. Lists use the
//! default consistent (most recent) semantic, not `resourceVersion=0`: a stale list would make
//! recently created bound pods look deleted and free their nodes for a moment.

use std::borrow::Cow;
use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};
use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass};
use kube::api::{ApiResource, DynamicObject, ObjectMeta};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};

use crate::api::ClusterApi;
use crate::binder::{Binder, ClusterEvent};
use crate::claim_cache::DeviceObject;
use crate::lean::{self, Lean};
use crate::projection::{
    claim_info, composite_pod_group_info, csi_driver_info, csi_node_info, device_class_info, device_taint_rule_info,
    dynamic_storage_capacity_info, initially_scheduled_condition, namespace_info, node_info, pdb_info, pdb_key,
    pod_group_info, pod_group_key, pod_info, resource_claim_info, resource_slice_info, storage_class_info, volume_info,
    PodInfo, StorageKey, StorageObject,
};

/// kube-scheduler's pod field selector: every pod that may still use (or need) a node.
pub const POD_FIELD_SELECTOR: &str = "status.phase!=Succeeded,status.phase!=Failed";

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

/// A storage kind the binder watches: how an object is projected and identified.
pub trait StorageKind: Sized {
    /// The object as the binder tracks it.
    fn project(&self) -> StorageObject;
    /// The identity of a deleted object.
    fn deleted_key(&self) -> StorageKey;
}

fn name_of(meta: &kube::api::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

impl StorageKind for PersistentVolumeClaim {
    fn project(&self) -> StorageObject {
        StorageObject::Claim(claim_info(self))
    }
    fn deleted_key(&self) -> StorageKey {
        StorageKey::Claim(format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or_default(),
            name_of(&self.metadata)
        ))
    }
}

impl StorageKind for PersistentVolume {
    fn project(&self) -> StorageObject {
        StorageObject::Volume(volume_info(self))
    }
    fn deleted_key(&self) -> StorageKey {
        StorageKey::Volume(name_of(&self.metadata))
    }
}

impl StorageKind for StorageClass {
    fn project(&self) -> StorageObject {
        StorageObject::Class(storage_class_info(self))
    }
    fn deleted_key(&self) -> StorageKey {
        StorageKey::Class(name_of(&self.metadata))
    }
}

impl StorageKind for CSINode {
    fn project(&self) -> StorageObject {
        StorageObject::CsiNode(csi_node_info(self))
    }
    fn deleted_key(&self) -> StorageKey {
        StorageKey::CsiNode(name_of(&self.metadata))
    }
}

impl StorageKind for CSIDriver {
    fn project(&self) -> StorageObject {
        StorageObject::CsiDriver(csi_driver_info(self))
    }
    fn deleted_key(&self) -> StorageKey {
        StorageKey::CsiDriver(name_of(&self.metadata))
    }
}

/// A CSIStorageCapacity read as a dynamic object, so that storage.k8s.io/v1beta1 (the only
/// version API servers before 1.24 serve, with the same fields) reads as v1 does.
impl StorageKind for DynamicObject {
    fn project(&self) -> StorageObject {
        StorageObject::Capacity(dynamic_storage_capacity_info(self))
    }
    fn deleted_key(&self) -> StorageKey {
        StorageKey::Capacity(format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or_default(),
            name_of(&self.metadata)
        ))
    }
}

impl StorageKind for DeviceClass {
    fn project(&self) -> StorageObject {
        StorageObject::DeviceClass(device_class_info(self))
    }
    fn deleted_key(&self) -> StorageKey {
        StorageKey::DeviceClass(name_of(&self.metadata))
    }
}

impl StorageKind for ResourceClaim {
    fn project(&self) -> StorageObject {
        StorageObject::ResourceClaim(resource_claim_info(self))
    }
    fn deleted_key(&self) -> StorageKey {
        StorageKey::ResourceClaim(format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or_default(),
            name_of(&self.metadata)
        ))
    }
}

impl StorageKind for ResourceSlice {
    fn project(&self) -> StorageObject {
        StorageObject::ResourceSlice(resource_slice_info(self))
    }
    fn deleted_key(&self) -> StorageKey {
        StorageKey::ResourceSlice(name_of(&self.metadata))
    }
}

impl StorageKind for DeviceTaintRule {
    fn project(&self) -> StorageObject {
        StorageObject::DeviceTaintRule(device_taint_rule_info(self))
    }
    fn deleted_key(&self) -> StorageKey {
        StorageKey::DeviceTaintRule(name_of(&self.metadata))
    }
}

impl StorageKind for CompositePodGroup {
    fn project(&self) -> StorageObject {
        StorageObject::CompositePodGroup(composite_pod_group_info(self))
    }
    fn deleted_key(&self) -> StorageKey {
        StorageKey::CompositePodGroup(pod_group_key(
            self.metadata.namespace.as_deref().unwrap_or_default(),
            self.metadata.name.as_deref().unwrap_or_default(),
        ))
    }
}

impl StorageKind for PodGroup {
    fn project(&self) -> StorageObject {
        StorageObject::PodGroup(pod_group_info(self))
    }
    fn deleted_key(&self) -> StorageKey {
        StorageKey::PodGroup(pod_group_key(
            self.metadata.namespace.as_deref().unwrap_or_default(),
            self.metadata.name.as_deref().unwrap_or_default(),
        ))
    }
}

/// Whether the API server serves `resource.k8s.io/v1` (Kubernetes 1.34 and later), found by a
/// list of at most one DeviceClass; an answer other than 404 counts as served (the watches retry
/// with backoff).
pub async fn serves_dra(client: &Client) -> bool {
    let api: Api<DeviceClass> = Api::all(client.clone());
    !matches!(
        api.list(&kube::api::ListParams::default().limit(1)).await,
        Err(kube::Error::Api(e)) if e.code == 404
    )
}

/// Whether the API server serves `resource.k8s.io/v1` DeviceTaintRules (Kubernetes 1.37 and
/// later; 1.35 and 1.36 serve them only as alpha and beta versions, off by default), found by a
/// list of at most one; an answer other than 404 counts as served (the watch retries with
/// backoff).
pub async fn serves_device_taint_rules(client: &Client) -> bool {
    let api: Api<DeviceTaintRule> = Api::all(client.clone());
    !matches!(
        api.list(&kube::api::ListParams::default().limit(1)).await,
        Err(kube::Error::Api(e)) if e.code == 404
    )
}

/// Watches DeviceTaintRules where `resource.k8s.io/v1` serves them (kube-scheduler's ResourceSlice
/// tracker applies them to the slices' devices); elsewhere the initial list counts as done.
async fn device_taint_rule_watch<A: ClusterApi>(client: Client, barrier: Arc<SyncBarrier<A>>) {
    if !serves_device_taint_rules(&client).await {
        tracing::info!("the API server serves no resource.k8s.io/v1 DeviceTaintRules: only the slices' taints apply");
        barrier.done();
        return;
    }
    let rules = watcher(Api::<DeviceTaintRule>::all(client), watcher::Config::default()).default_backoff();
    drive(
        "devicetaintrules",
        rules,
        StorageTracker::default(),
        StorageTracker::on_event,
        barrier,
    )
    .await;
}

/// Watches DeviceClasses, ResourceClaims, ResourceSlices and DeviceTaintRules (DynamicResources);
/// on an API server without `resource.k8s.io/v1` there is nothing to track, it says so once and
/// the four initial lists count as done.
async fn device_watches<A: ClusterApi>(client: Client, barrier: Arc<SyncBarrier<A>>) {
    if !serves_dra(&client).await {
        tracing::info!("the API server serves no resource.k8s.io/v1: pods with resource claims wait for their claims");
        for _ in 0..4 {
            barrier.done();
        }
        return;
    }
    let classes = watcher(Api::<DeviceClass>::all(client.clone()), watcher::Config::default()).default_backoff();
    // Claims and slices are read without their managed fields (`lean`): most of a claim's bytes.
    let claims = watcher(
        Api::<Lean<ResourceClaim>>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .map_ok(lean::event);
    let slices = watcher(
        Api::<Lean<ResourceSlice>>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .map_ok(lean::event);
    tokio::join!(
        device_taint_rule_watch(client, Arc::clone(&barrier)),
        drive(
            "deviceclasses",
            classes,
            StorageTracker::default(),
            device_object_events,
            Arc::clone(&barrier),
        ),
        drive(
            "resourceclaims",
            claims,
            StorageTracker::default(),
            device_object_events,
            Arc::clone(&barrier),
        ),
        drive(
            "resourceslices",
            slices,
            StorageTracker::default(),
            StorageTracker::on_event,
            barrier,
        ),
    );
}

/// Whether the API server serves `scheduling.k8s.io/v1beta1` PodGroups (Kubernetes 1.37 with the
/// `GenericWorkload` feature gate and the API version enabled), found by a list of at most one
/// PodGroup; an answer other than 404 counts as served (the watch retries with backoff).
pub async fn serves_pod_groups(client: &Client) -> bool {
    let api: Api<PodGroup> = Api::all(client.clone());
    !matches!(
        api.list(&kube::api::ListParams::default().limit(1)).await,
        Err(kube::Error::Api(e)) if e.code == 404
    )
}

/// Watches PodGroups; on an API server without `scheduling.k8s.io/v1beta1` PodGroups there is
/// nothing to track, it says so once and the initial list counts as done. Either way the binder
/// learns whether they are served before that.
async fn pod_group_watch<A: ClusterApi>(client: Client, barrier: Arc<SyncBarrier<A>>) {
    let served = serves_pod_groups(&client).await;
    barrier.binder.handle(ClusterEvent::PodGroupsServed(served));
    if !served {
        tracing::info!("the API server serves no scheduling.k8s.io/v1beta1 PodGroups: PodGroups are not tracked");
        barrier.done();
        return;
    }
    let groups = watcher(Api::<PodGroup>::all(client), watcher::Config::default()).default_backoff();
    drive(
        "podgroups",
        groups,
        StorageTracker::default(),
        pod_group_events,
        barrier,
    )
    .await;
}

/// Whether the API server serves `scheduling.k8s.io/v1alpha3` CompositePodGroups (Kubernetes
/// 1.37 with the `CompositePodGroup` gate and that API version on), found as
/// [`serves_pod_groups`] finds PodGroups.
pub async fn serves_composite_pod_groups(client: &Client) -> bool {
    let api: Api<CompositePodGroup> = Api::all(client.clone());
    !matches!(
        api.list(&kube::api::ListParams::default().limit(1)).await,
        Err(kube::Error::Api(e)) if e.code == 404
    )
}

/// Watches CompositePodGroups; on an API server without them (kube's default: the gate is
/// alpha) there is nothing to track: a debug line, and the initial list counts as done.
async fn composite_pod_group_watch<A: ClusterApi>(client: Client, barrier: Arc<SyncBarrier<A>>) {
    if !serves_composite_pod_groups(&client).await {
        tracing::debug!("the API server serves no scheduling.k8s.io/v1alpha3 CompositePodGroups");
        barrier.done();
        return;
    }
    tracing::info!("watching scheduling.k8s.io/v1alpha3 CompositePodGroups");
    let groups = watcher(Api::<CompositePodGroup>::all(client), watcher::Config::default()).default_backoff();
    drive(
        "compositepodgroups",
        groups,
        StorageTracker::default(),
        StorageTracker::on_event,
        barrier,
    )
    .await;
}

/// The storage.k8s.io version that serves CSIStorageCapacity: v1 (Kubernetes 1.24 and later),
/// else v1beta1 (1.21 to 1.23, and 1.24's pre-releases); `None` when neither does. Found by a
/// list of at most one object (the list permission the binder has anyway); an answer other than
/// 404 keeps the version, and the watch retries it with backoff.
pub async fn capacity_resource(client: &Client) -> Option<ApiResource> {
    for version in ["v1", "v1beta1"] {
        let resource = ApiResource {
            group: "storage.k8s.io".into(),
            version: version.into(),
            api_version: format!("storage.k8s.io/{version}"),
            kind: "CSIStorageCapacity".into(),
            plural: "csistoragecapacities".into(),
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        match api.list(&kube::api::ListParams::default().limit(1)).await {
            Err(kube::Error::Api(e)) if e.code == 404 => continue,
            _ => return Some(resource),
        }
    }
    None
}

/// Watches CSIStorageCapacities in the version the API server serves; with none, there is
/// nothing to track and the initial list counts as done.
async fn capacity_watch<A: ClusterApi>(client: Client, barrier: Arc<SyncBarrier<A>>) {
    let Some(resource) = capacity_resource(&client).await else {
        tracing::info!("the API server serves no CSIStorageCapacity: storage capacity is not tracked");
        barrier.done();
        return;
    };
    tracing::info!(api_version = %resource.api_version, "watching CSIStorageCapacities");
    let capacities = watcher(
        Api::<DynamicObject>::all_with(client, &resource),
        watcher::Config::default(),
    )
    .default_backoff();
    drive(
        "csistoragecapacities",
        capacities,
        StorageTracker::default(),
        StorageTracker::on_event,
        barrier,
    )
    .await;
}

/// A PodGroup watch event's cluster events: its `PodGroupInitiallyScheduled` condition as the
/// object shows it (which the binder keeps, as kube-scheduler's informer cache does, to keep
/// its transition time), then the group itself.
pub fn pod_group_events(t: &mut StorageTracker, event: Event<PodGroup>) -> (Vec<ClusterEvent>, bool) {
    let condition = match &event {
        Event::InitApply(g) | Event::Apply(g) => Some(ClusterEvent::PodGroupCondition {
            key: pod_group_key(
                g.metadata.namespace.as_deref().unwrap_or_default(),
                g.metadata.name.as_deref().unwrap_or_default(),
            ),
            condition: initially_scheduled_condition(g),
        }),
        _ => None,
    };
    let (events, done) = t.on_event(event);
    (condition.into_iter().chain(events).collect(), done)
}

/// A DRA object the binder keeps whole (a ResourceClaim or a DeviceClass: PreBind writes claims
/// from them, [`crate::claim_cache`]).
pub trait WholeDeviceObject: Clone {
    /// The object as the claim cache keeps it.
    fn device_object(self) -> DeviceObject;
}

impl WholeDeviceObject for ResourceClaim {
    fn device_object(self) -> DeviceObject {
        DeviceObject::claim(self)
    }
}

impl WholeDeviceObject for DeviceClass {
    fn device_object(self) -> DeviceObject {
        DeviceObject::class(self)
    }
}

/// A ResourceClaim or DeviceClass watch event's cluster events: the object whole
/// ([`ClusterEvent::DeviceObject`]), then its projection as for any storage kind.
pub fn device_object_events<K: StorageKind + WholeDeviceObject>(
    t: &mut StorageTracker,
    event: Event<K>,
) -> (Vec<ClusterEvent>, bool) {
    let whole = match &event {
        Event::InitApply(o) | Event::Apply(o) => Some(ClusterEvent::DeviceObject(o.clone().device_object())),
        _ => None,
    };
    let (events, done) = t.on_event(event);
    (whole.into_iter().chain(events).collect(), done)
}

/// Turns watch events of one storage kind into cluster events.
#[derive(Debug, Default)]
pub struct StorageTracker {
    keys: std::collections::HashMap<String, StorageKey>,
    relisting: Option<HashSet<String>>,
}

fn key_string(k: &StorageKey) -> String {
    format!("{k:?}")
}

impl StorageTracker {
    /// The cluster events for one watch event; `true` with them when an initial list completed.
    pub fn on_event<K: StorageKind>(&mut self, event: Event<K>) -> (Vec<ClusterEvent>, bool) {
        match event {
            Event::Init => {
                self.relisting = Some(HashSet::new());
                (Vec::new(), false)
            }
            Event::InitApply(obj) | Event::Apply(obj) => {
                let projected = obj.project();
                let key = projected.key();
                let s = key_string(&key);
                if let Some(seen) = &mut self.relisting {
                    seen.insert(s.clone());
                }
                self.keys.insert(s, key);
                (vec![ClusterEvent::StorageApplied(projected)], false)
            }
            Event::Delete(obj) => {
                let key = obj.deleted_key();
                self.keys.remove(&key_string(&key));
                (vec![ClusterEvent::StorageDeleted(key)], false)
            }
            Event::InitDone => {
                let Some(seen) = self.relisting.take() else {
                    return (Vec::new(), true);
                };
                let mut gone: Vec<StorageKey> = Vec::new();
                self.keys.retain(|s, k| {
                    let keep = seen.contains(s);
                    if !keep {
                        gone.push(k.clone());
                    }
                    keep
                });
                gone.sort();
                (gone.into_iter().map(ClusterEvent::StorageDeleted).collect(), true)
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

/// Marks the binder synced when every watcher finished its first list.
struct SyncBarrier<A> {
    remaining: AtomicUsize,
    binder: Binder<A>,
}

impl<A: ClusterApi> SyncBarrier<A> {
    fn done(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            tracing::info!(
                "initial node, namespace, PodDisruptionBudget, storage (claims, volumes, classes, CSINodes, CSIDrivers, \
                 CSIStorageCapacities), device (DeviceClasses, ResourceClaims, ResourceSlices, DeviceTaintRules), \
                 PodGroup and pod \
                 lists done: binder synced"
            );
            self.binder.set_synced();
        }
    }
}

async fn drive<K, T, A>(
    what: &'static str,
    stream: impl futures::Stream<Item = Result<Event<K>, watcher::Error>>,
    mut tracker: T,
    on_event: impl Fn(&mut T, Event<K>) -> (Vec<ClusterEvent>, bool),
    barrier: Arc<SyncBarrier<A>>,
) where
    A: ClusterApi,
{
    let mut stream = std::pin::pin!(stream);
    let mut synced = false;
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => {
                let (events, list_done) = on_event(&mut tracker, event);
                for e in events {
                    barrier.binder.handle(e);
                }
                if list_done && !synced {
                    synced = true;
                    barrier.done();
                }
            }
            // The stream backs off and relists by itself.
            Err(e) => tracing::warn!(watch = what, error = %e, "watch failed; retrying with backoff"),
        }
    }
}

/// Watches the storage objects the volume filters read.
async fn storage_watches<A: ClusterApi>(client: Client, barrier: Arc<SyncBarrier<A>>) {
    let claims = watcher(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff();
    let volumes = watcher(Api::<PersistentVolume>::all(client.clone()), watcher::Config::default()).default_backoff();
    let classes = watcher(Api::<StorageClass>::all(client.clone()), watcher::Config::default()).default_backoff();
    let csi_nodes = watcher(Api::<CSINode>::all(client.clone()), watcher::Config::default()).default_backoff();
    let csi_drivers = watcher(Api::<CSIDriver>::all(client.clone()), watcher::Config::default()).default_backoff();
    tokio::join!(
        drive(
            "persistentvolumeclaims",
            claims,
            StorageTracker::default(),
            StorageTracker::on_event,
            Arc::clone(&barrier),
        ),
        drive(
            "persistentvolumes",
            volumes,
            StorageTracker::default(),
            StorageTracker::on_event,
            Arc::clone(&barrier),
        ),
        drive(
            "storageclasses",
            classes,
            StorageTracker::default(),
            StorageTracker::on_event,
            Arc::clone(&barrier),
        ),
        drive(
            "csinodes",
            csi_nodes,
            StorageTracker::default(),
            StorageTracker::on_event,
            Arc::clone(&barrier),
        ),
        drive(
            "csidrivers",
            csi_drivers,
            StorageTracker::default(),
            StorageTracker::on_event,
            Arc::clone(&barrier),
        ),
        capacity_watch(client.clone(), Arc::clone(&barrier)),
    );
}

/// Watches nodes, namespaces, PodDisruptionBudgets, storage objects, DRA objects, PodGroups and
/// pods and feeds `binder` until `shutdown` resolves.
pub async fn run<A: ClusterApi>(client: Client, binder: Binder<A>, shutdown: impl Future<Output = ()>) {
    let barrier = Arc::new(SyncBarrier {
        remaining: AtomicUsize::new(16),
        binder,
    });
    // Each group of watches is a task of its own: one task polling every watcher would nest
    // their futures deep enough to overflow a worker's stack in unoptimized builds.
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(storage_watches(client.clone(), Arc::clone(&barrier)));
    tasks.spawn(device_watches(client.clone(), Arc::clone(&barrier)));
    tasks.spawn(pod_group_watch(client.clone(), Arc::clone(&barrier)));
    tasks.spawn(composite_pod_group_watch(client.clone(), Arc::clone(&barrier)));
    let nodes = watcher(Api::<Lean<Node>>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .map_ok(lean::event);
    let namespaces = watcher(Api::<Namespace>::all(client.clone()), watcher::Config::default()).default_backoff();
    let pdbs = watcher(
        Api::<PodDisruptionBudget>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff();
    let pods = watcher(
        Api::<WatchedPod>::all(client),
        watcher::Config::default().fields(POD_FIELD_SELECTOR),
    )
    .default_backoff();
    tasks.spawn(drive(
        "nodes",
        nodes,
        NodeTracker::default(),
        NodeTracker::on_event,
        Arc::clone(&barrier),
    ));
    tasks.spawn(drive(
        "namespaces",
        namespaces,
        NamespaceTracker::default(),
        NamespaceTracker::on_event,
        Arc::clone(&barrier),
    ));
    tasks.spawn(drive(
        "poddisruptionbudgets",
        pdbs,
        PdbTracker::default(),
        PdbTracker::on_event,
        Arc::clone(&barrier),
    ));
    tasks.spawn(drive(
        "pods",
        pods,
        PodTracker::default(),
        PodTracker::on_event,
        barrier,
    ));
    tokio::select! {
        () = shutdown => {}
        _ = async { while tasks.join_next().await.is_some() {} } => {}
    }
    // Dropping the set aborts the watches still running.
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name}, "status": {"allocatable": {"cpu": "4"}}})).unwrap()
    }

    fn pod(name: &str, uid: &str, node: Option<&str>) -> WatchedPod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": uid},
            "spec": {"schedulerName": "placement-scheduler", "nodeName": node, "containers": [{"name": "c"}]},
            "status": {"phase": "Pending"}
        }))
        .unwrap()
    }

    fn deleted_uids(events: &[ClusterEvent]) -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match e {
                ClusterEvent::PodDeleted { uid } => Some(uid.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn relist_reports_pods_that_vanished() {
        let mut t = PodTracker::default();
        assert!(t.on_event(Event::Init).0.is_empty());
        for (n, u) in [("a", "ua"), ("b", "ub"), ("c", "uc")] {
            let (ev, done) = t.on_event(Event::InitApply(pod(n, u, None)));
            assert!(matches!(ev.as_slice(), [ClusterEvent::PodApplied(_)]) && !done);
        }
        let (ev, done) = t.on_event(Event::InitDone);
        assert!(ev.is_empty() && done);
        t.on_event(Event::Apply(pod("d", "ud", Some("n1"))));
        t.on_event(Event::Delete(pod("a", "ua", None)));
        assert_eq!(t.len(), 3);

        // The watch broke; meanwhile b was deleted and c recreated under a new uid.
        t.on_event(Event::Init);
        t.on_event(Event::InitApply(pod("c", "uc2", None)));
        t.on_event(Event::InitApply(pod("d", "ud", Some("n1"))));
        let (ev, done) = t.on_event(Event::InitDone);
        assert!(done);
        assert_eq!(deleted_uids(&ev), ["ub", "uc"]);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn a_watched_pod_is_the_projection_of_the_pod_it_decodes() {
        let json = json!({
            "metadata": {"name": "web-1", "namespace": "shop", "uid": "u1", "resourceVersion": "42",
                         "labels": {"app": "web"}, "annotations": {"placement.dev/pin-arm": "a"},
                         "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
            "spec": {"schedulerName": "placement-scheduler", "nodeName": "n1", "priority": 5,
                     "containers": [{"name": "c", "image": "nginx", "env": [{"name": "A", "value": "1"}],
                                     "resources": {"requests": {"cpu": "250m"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        });
        let pod: Pod = serde_json::from_value(json.clone()).unwrap();
        let watched: WatchedPod = serde_json::from_value(json).unwrap();
        assert_eq!(*watched.info(), pod_info(&pod));
        use kube::ResourceExt;
        assert_eq!(
            watched.resource_version().as_deref(),
            Some("42"),
            "the watcher resumes from it"
        );
        assert_eq!(watched.uid().as_deref(), Some("u1"));
        assert_eq!(
            <WatchedPod as kube::Resource>::url_path(&(), None),
            <Pod as kube::Resource>::url_path(&(), None)
        );
    }

    #[test]
    fn pod_deletion_frees_by_uid() {
        let mut t = PodTracker::default();
        t.on_event(Event::Apply(pod("a", "ua", Some("n1"))));
        let (ev, _) = t.on_event(Event::Delete(pod("a", "ua", Some("n1"))));
        assert_eq!(deleted_uids(&ev), ["ua"]);
        assert!(t.is_empty());
    }

    #[test]
    fn namespaces_are_applied_and_relists_report_the_vanished() {
        let ns = |name: &str| -> Namespace {
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {"team": "a"}}})).unwrap()
        };
        let mut t = NamespaceTracker::default();
        t.on_event(Event::Init);
        let (events, _) = t.on_event(Event::InitApply(ns("shop")));
        assert!(
            matches!(&events[..], [ClusterEvent::NamespaceApplied(n)] if n.name == "shop" && n.labels["team"] == "a")
        );
        t.on_event(Event::InitApply(ns("batch")));
        assert!(t.on_event(Event::InitDone).1);
        t.on_event(Event::Init);
        t.on_event(Event::InitApply(ns("shop")));
        let (gone, done) = t.on_event(Event::InitDone);
        assert!(done);
        assert!(matches!(&gone[..], [ClusterEvent::NamespaceDeleted(n)] if n == "batch"));
    }

    #[test]
    fn pdbs_are_applied_deleted_and_relists_report_the_vanished() {
        let pdb = |name: &str, allowed: i32| -> PodDisruptionBudget {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "shop"},
                "spec": {"selector": {"matchLabels": {"app": name}}},
                "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
            }))
            .unwrap()
        };
        let mut t = PdbTracker::default();
        t.on_event(Event::Init);
        let (events, _) = t.on_event(Event::InitApply(pdb("db", 0)));
        assert!(matches!(&events[..], [ClusterEvent::PdbApplied(p)] if p.key() == "shop/db"));
        t.on_event(Event::InitApply(pdb("cache", 1)));
        assert!(t.on_event(Event::InitDone).1);
        let (events, _) = t.on_event(Event::Apply(pdb("db", 1)));
        assert!(matches!(&events[..], [ClusterEvent::PdbApplied(p)] if p.pdb.disruptions_allowed == 1));
        let (events, _) = t.on_event(Event::Delete(pdb("db", 1)));
        assert!(matches!(&events[..], [ClusterEvent::PdbDeleted(k)] if k == "shop/db"));
        t.on_event(Event::Init);
        let (gone, done) = t.on_event(Event::InitDone);
        assert!(done);
        assert!(matches!(&gone[..], [ClusterEvent::PdbDeleted(k)] if k == "shop/cache"));
    }

    #[test]
    fn pod_groups_are_applied_deleted_and_relists_report_the_vanished() {
        let group = |ns: &str, name: &str, min: i32| -> PodGroup {
            serde_json::from_value(json!({
                "metadata": {"namespace": ns, "name": name, "uid": format!("u-{name}")},
                "spec": {"schedulingPolicy": {"gang": {"minCount": min}}}
            }))
            .unwrap()
        };
        let mut t = StorageTracker::default();
        t.on_event::<PodGroup>(Event::Init);
        let (events, _) = t.on_event(Event::InitApply(group("ml", "a", 2)));
        assert!(matches!(&events[..],
            [ClusterEvent::StorageApplied(StorageObject::PodGroup(g))] if g.name == "a" && g.gang.as_ref().is_some_and(|g| g.min_count == 2)));
        t.on_event(Event::InitApply(group("ml", "b", 1)));
        t.on_event(Event::InitApply(group("other", "a", 1)));
        assert!(t.on_event::<PodGroup>(Event::InitDone).1);
        let (events, _) = t.on_event(Event::Delete(group("ml", "b", 1)));
        assert!(matches!(&events[..], [ClusterEvent::StorageDeleted(StorageKey::PodGroup(k))] if k == "ml/b"));
        // The watch broke; meanwhile other/a was deleted.
        t.on_event::<PodGroup>(Event::Init);
        t.on_event(Event::InitApply(group("ml", "a", 3)));
        let (gone, done) = t.on_event::<PodGroup>(Event::InitDone);
        assert!(done);
        assert!(matches!(&gone[..], [ClusterEvent::StorageDeleted(StorageKey::PodGroup(k))] if k == "other/a"));
    }

    #[test]
    fn a_pod_groups_condition_is_told_before_the_group() {
        let with_condition: PodGroup = serde_json::from_value(json!({
            "metadata": {"namespace": "ml", "name": "a", "uid": "u-a"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
            "status": {"conditions": [{
                "type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable",
                "message": "pod group is unschedulable", "observedGeneration": 4,
                "lastTransitionTime": "2026-11-29T00:00:00Z"}]}
        }))
        .unwrap();
        let mut t = StorageTracker::default();
        let (events, _) = pod_group_events(&mut t, Event::Apply(with_condition));
        match &events[..] {
            [ClusterEvent::PodGroupCondition {
                key,
                condition: Some(c),
            }, ClusterEvent::StorageApplied(StorageObject::PodGroup(g))] => {
                assert_eq!((key.as_str(), g.name.as_str()), ("ml/a", "a"));
                assert_eq!(
                    c,
                    &crate::api::ObservedCondition {
                        status: "False".into(),
                        reason: "Unschedulable".into(),
                        message: "pod group is unschedulable".into(),
                        observed_generation: 4,
                        last_transition_time: "2026-11-29T00:00:00Z".into(),
                    }
                );
            }
            other => panic!("{other:?}"),
        }
        let bare: PodGroup = serde_json::from_value(json!({"metadata": {"namespace": "ml", "name": "b"},
            "spec": {"schedulingPolicy": {"basic": {}}}}))
        .unwrap();
        let (events, _) = pod_group_events(&mut t, Event::Apply(bare));
        assert!(matches!(
            &events[..],
            [
                ClusterEvent::PodGroupCondition { condition: None, .. },
                ClusterEvent::StorageApplied(_)
            ]
        ));
    }

    #[test]
    fn relist_reports_nodes_that_vanished() {
        let mut t = NodeTracker::default();
        t.on_event(Event::Init);
        t.on_event(Event::InitApply(node("n1")));
        t.on_event(Event::InitApply(node("n2")));
        assert!(t.on_event(Event::InitDone).1);
        t.on_event(Event::Init);
        t.on_event(Event::InitApply(node("n2")));
        let (ev, _) = t.on_event(Event::InitDone);
        assert!(matches!(ev.as_slice(), [ClusterEvent::NodeDeleted(n)] if n == "n1"));
        assert_eq!(t.len(), 1);
    }
}
