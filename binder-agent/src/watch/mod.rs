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
//!
//! Here: the pod watch ([`WatchedPod`], [`PodTracker`]), the table of watched resources
//! (`watched!`) that the sync barrier counts, and the tasks that start the watches. The trackers of
//! nodes, namespaces and budgets are in `trackers.rs`, the storage and DRA kinds (one table,
//! `tracked_kinds!`) in `kinds.rs`, the checks of which optional APIs are served in `served.rs`.

mod kinds;
mod served;
#[cfg(test)]
mod tests;
mod trackers;

use std::borrow::Cow;
use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};
use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass};
use kube::api::{DynamicObject, ObjectMeta};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use parking_lot::Mutex;

use crate::api::ClusterApi;
use crate::binder::{Binder, ClusterEvent};
use crate::lean::{self, Lean};
use crate::projection::{pod_info, PodInfo};

pub use kinds::{device_object_events, pod_group_events, ObjectTracker, TrackedKind, WholeDeviceObject};
pub use served::{
    capacity_resource, serves_composite_pod_groups, serves_device_taint_rules, serves_dra, serves_pod_groups,
};
pub use trackers::{KnownKeys, NamespaceTracker, NodeTracker, PdbTracker};

/// kube-scheduler's pod field selector: every pod that may still use (or need) a node.
pub const POD_FIELD_SELECTOR: &str = "status.phase!=Succeeded,status.phase!=Failed";

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
        let _step = tracing::debug_span!("on_event").entered();
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

/// The task that starts a watch ([`run`] itself for the core ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    /// Nodes, namespaces, PodDisruptionBudgets and pods.
    Core,
    /// The storage objects the volume filters read ([`storage_watches`]).
    Storage,
    /// The DRA objects, all under `resource.k8s.io/v1` ([`device_watches`]).
    Devices,
    /// PodGroups and CompositePodGroups, each watched where served.
    PodGroups,
}

/// The watched resources, one row each: the [`Watch`] the code names it by, the resource (its
/// name in logs) and the [`Group`] that starts it. The binder is synced once every row's initial
/// list is done, or its watch skipped (the API not served): [`Watch::ALL`] is what it waits for.
macro_rules! watched {
    ($($watch:ident => $name:literal, $group:ident;)*) => {
        /// A watched resource (a row of the `watched!` table).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        enum Watch {
            $($watch,)*
        }

        impl Watch {
            /// Every watched resource, in table order.
            const ALL: &'static [Watch] = &[$(Watch::$watch,)*];

            /// The resource (plural), as logs name it.
            fn name(self) -> &'static str {
                match self {
                    $(Watch::$watch => $name,)*
                }
            }

            /// The task that starts the watch.
            fn group(self) -> Group {
                match self {
                    $(Watch::$watch => Group::$group,)*
                }
            }
        }
    };
}

watched! {
    Nodes => "nodes", Core;
    Namespaces => "namespaces", Core;
    PodDisruptionBudgets => "poddisruptionbudgets", Core;
    Pods => "pods", Core;
    PersistentVolumeClaims => "persistentvolumeclaims", Storage;
    PersistentVolumes => "persistentvolumes", Storage;
    StorageClasses => "storageclasses", Storage;
    CsiNodes => "csinodes", Storage;
    CsiDrivers => "csidrivers", Storage;
    CsiStorageCapacities => "csistoragecapacities", Storage;
    DeviceClasses => "deviceclasses", Devices;
    ResourceClaims => "resourceclaims", Devices;
    ResourceSlices => "resourceslices", Devices;
    DeviceTaintRules => "devicetaintrules", Devices;
    PodGroups => "podgroups", PodGroups;
    CompositePodGroups => "compositepodgroups", PodGroups;
}

/// The watches whose initial list is not done yet.
#[derive(Debug)]
struct Pending(HashSet<Watch>);

impl Pending {
    /// Every watch of the table.
    fn all() -> Self {
        Self(Watch::ALL.iter().copied().collect())
    }

    /// `watch`'s initial list is done; `true` when it was the last one pending.
    fn done(&mut self, watch: Watch) -> bool {
        self.0.remove(&watch) && self.0.is_empty()
    }

    /// Every watch of `group` is skipped (its API not served); `true` when that left none pending.
    fn skip(&mut self, group: Group) -> bool {
        let mut last = false;
        for watch in Watch::ALL.iter().filter(|w| w.group() == group) {
            last |= self.done(*watch);
        }
        last
    }
}

/// Marks the binder synced when every watcher finished its first list.
struct SyncBarrier<A> {
    pending: Mutex<Pending>,
    binder: Binder<A>,
}

impl<A: ClusterApi> SyncBarrier<A> {
    fn new(binder: Binder<A>) -> Self {
        Self {
            pending: Mutex::new(Pending::all()),
            binder,
        }
    }

    /// `watch`'s initial list is done (or the watch is skipped).
    fn done(&self, watch: Watch) {
        let last = self.pending.lock().done(watch);
        self.synced_if(last);
    }

    /// Every watch of `group` is skipped (the API server does not serve its API).
    fn skip(&self, group: Group) {
        let last = self.pending.lock().skip(group);
        self.synced_if(last);
    }

    fn synced_if(&self, last: bool) {
        if last {
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
    what: Watch,
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
                    barrier.done(what);
                }
            }
            // The stream backs off and relists by itself.
            Err(e) => tracing::warn!(watch = what.name(), error = %e, "watch failed; retrying with backoff"),
        }
    }
}

/// Watches DeviceTaintRules where `resource.k8s.io/v1` serves them (kube-scheduler's ResourceSlice
/// tracker applies them to the slices' devices); elsewhere the initial list counts as done.
async fn device_taint_rule_watch<A: ClusterApi>(client: Client, barrier: Arc<SyncBarrier<A>>) {
    if !serves_device_taint_rules(&client).await {
        tracing::info!("the API server serves no resource.k8s.io/v1 DeviceTaintRules: only the slices' taints apply");
        barrier.done(Watch::DeviceTaintRules);
        return;
    }
    let rules = watcher(Api::<DeviceTaintRule>::all(client), watcher::Config::default()).default_backoff();
    drive(
        Watch::DeviceTaintRules,
        rules,
        ObjectTracker::default(),
        ObjectTracker::on_event,
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
        barrier.skip(Group::Devices);
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
            Watch::DeviceClasses,
            classes,
            ObjectTracker::default(),
            device_object_events,
            Arc::clone(&barrier),
        ),
        drive(
            Watch::ResourceClaims,
            claims,
            ObjectTracker::default(),
            device_object_events,
            Arc::clone(&barrier),
        ),
        drive(
            Watch::ResourceSlices,
            slices,
            ObjectTracker::default(),
            ObjectTracker::on_event,
            barrier,
        ),
    );
}

/// Watches PodGroups; on an API server without `scheduling.k8s.io/v1beta1` PodGroups there is
/// nothing to track, it says so once and the initial list counts as done. Either way the binder
/// learns whether they are served before that.
async fn pod_group_watch<A: ClusterApi>(client: Client, barrier: Arc<SyncBarrier<A>>) {
    let served = serves_pod_groups(&client).await;
    barrier.binder.handle(ClusterEvent::PodGroupsServed(served));
    if !served {
        tracing::info!("the API server serves no scheduling.k8s.io/v1beta1 PodGroups: PodGroups are not tracked");
        barrier.done(Watch::PodGroups);
        return;
    }
    let groups = watcher(Api::<PodGroup>::all(client), watcher::Config::default()).default_backoff();
    drive(
        Watch::PodGroups,
        groups,
        ObjectTracker::default(),
        pod_group_events,
        barrier,
    )
    .await;
}

/// Watches CompositePodGroups; on an API server without them (kube's default: the gate is
/// alpha) there is nothing to track: a debug line, and the initial list counts as done.
async fn composite_pod_group_watch<A: ClusterApi>(client: Client, barrier: Arc<SyncBarrier<A>>) {
    if !serves_composite_pod_groups(&client).await {
        tracing::debug!("the API server serves no scheduling.k8s.io/v1alpha3 CompositePodGroups");
        barrier.done(Watch::CompositePodGroups);
        return;
    }
    tracing::info!("watching scheduling.k8s.io/v1alpha3 CompositePodGroups");
    let groups = watcher(Api::<CompositePodGroup>::all(client), watcher::Config::default()).default_backoff();
    drive(
        Watch::CompositePodGroups,
        groups,
        ObjectTracker::default(),
        ObjectTracker::on_event,
        barrier,
    )
    .await;
}

/// Watches CSIStorageCapacities in the version the API server serves; with none, there is
/// nothing to track and the initial list counts as done.
async fn capacity_watch<A: ClusterApi>(client: Client, barrier: Arc<SyncBarrier<A>>) {
    let Some(resource) = capacity_resource(&client).await else {
        tracing::info!("the API server serves no CSIStorageCapacity: storage capacity is not tracked");
        barrier.done(Watch::CsiStorageCapacities);
        return;
    };
    tracing::info!(api_version = %resource.api_version, "watching CSIStorageCapacities");
    let capacities = watcher(
        Api::<DynamicObject>::all_with(client, &resource),
        watcher::Config::default(),
    )
    .default_backoff();
    drive(
        Watch::CsiStorageCapacities,
        capacities,
        ObjectTracker::default(),
        ObjectTracker::on_event,
        barrier,
    )
    .await;
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
            Watch::PersistentVolumeClaims,
            claims,
            ObjectTracker::default(),
            ObjectTracker::on_event,
            Arc::clone(&barrier),
        ),
        drive(
            Watch::PersistentVolumes,
            volumes,
            ObjectTracker::default(),
            ObjectTracker::on_event,
            Arc::clone(&barrier),
        ),
        drive(
            Watch::StorageClasses,
            classes,
            ObjectTracker::default(),
            ObjectTracker::on_event,
            Arc::clone(&barrier),
        ),
        drive(
            Watch::CsiNodes,
            csi_nodes,
            ObjectTracker::default(),
            ObjectTracker::on_event,
            Arc::clone(&barrier),
        ),
        drive(
            Watch::CsiDrivers,
            csi_drivers,
            ObjectTracker::default(),
            ObjectTracker::on_event,
            Arc::clone(&barrier),
        ),
        capacity_watch(client.clone(), Arc::clone(&barrier)),
    );
}

/// Watches nodes, namespaces, PodDisruptionBudgets, storage objects, DRA objects, PodGroups and
/// pods and feeds `binder` until `shutdown` resolves.
pub async fn run<A: ClusterApi>(client: Client, binder: Binder<A>, shutdown: impl Future<Output = ()>) {
    let barrier = Arc::new(SyncBarrier::new(binder));
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
        Watch::Nodes,
        nodes,
        NodeTracker::default(),
        NodeTracker::on_event,
        Arc::clone(&barrier),
    ));
    tasks.spawn(drive(
        Watch::Namespaces,
        namespaces,
        NamespaceTracker::default(),
        NamespaceTracker::on_event,
        Arc::clone(&barrier),
    ));
    tasks.spawn(drive(
        Watch::PodDisruptionBudgets,
        pdbs,
        PdbTracker::default(),
        PdbTracker::on_event,
        Arc::clone(&barrier),
    ));
    tasks.spawn(drive(
        Watch::Pods,
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
