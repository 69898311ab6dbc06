//! The kinds the binder tracks beside pods and nodes (volumes, DRA objects, PodGroups), in one table: how each
//! object is projected and what identifies it once deleted; and the tracker their watches share.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};
use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass};
use kube::api::{DynamicObject, ObjectMeta};
use kube::runtime::watcher::Event;

use crate::binder::ClusterEvent;
use crate::claim_cache::DeviceObject;
use crate::projection::{
    claim_info, composite_pod_group_info, csi_driver_info, csi_node_info, device_class_info, device_taint_rule_info,
    dynamic_storage_capacity_info, initially_scheduled_condition, pod_group_info, pod_group_key, resource_claim_info,
    resource_slice_info, storage_class_info, volume_info, TrackedKey, TrackedObject,
};

/// A storage kind the binder watches: how an object is projected and identified.
pub trait TrackedKind: Sized {
    /// The object as the binder tracks it.
    fn project(&self) -> TrackedObject;
    /// The identity of a deleted object.
    fn deleted_key(&self) -> TrackedKey;
}

/// The name of a cluster-scoped object.
fn name_of(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// The `namespace/name` of a namespaced object.
fn namespaced_key(meta: &ObjectMeta) -> String {
    format!("{}/{}", meta.namespace.as_deref().unwrap_or_default(), name_of(meta))
}

/// One [`TrackedKind`] implementation per row: the watched type, the [`TrackedObject`] and
/// [`TrackedKey`] variant it is tracked under, the projection that makes the object, and whether
/// the key of a deleted object is `namespace/name` (`namespaced`) or its name (`cluster`).
macro_rules! tracked_kinds {
    ($($(#[$doc:meta])* $kind:ty => $variant:ident, $project:path, $scope:ident;)*) => {
        $(
            $(#[$doc])*
            impl TrackedKind for $kind {
                fn project(&self) -> TrackedObject {
                    TrackedObject::$variant($project(self))
                }
                fn deleted_key(&self) -> TrackedKey {
                    TrackedKey::$variant(tracked_kinds!(@key $scope, &self.metadata))
                }
            }
        )*
    };
    (@key namespaced, $meta:expr) => {
        namespaced_key($meta)
    };
    (@key cluster, $meta:expr) => {
        name_of($meta)
    };
}

tracked_kinds! {
    PersistentVolumeClaim => Claim, claim_info, namespaced;
    PersistentVolume => Volume, volume_info, cluster;
    StorageClass => Class, storage_class_info, cluster;
    CSINode => CsiNode, csi_node_info, cluster;
    CSIDriver => CsiDriver, csi_driver_info, cluster;
    /// A CSIStorageCapacity read as a dynamic object, so that storage.k8s.io/v1beta1 (the only
    /// version API servers before 1.24 serve, with the same fields) reads as v1 does.
    DynamicObject => Capacity, dynamic_storage_capacity_info, namespaced;
    DeviceClass => DeviceClass, device_class_info, cluster;
    ResourceClaim => ResourceClaim, resource_claim_info, namespaced;
    ResourceSlice => ResourceSlice, resource_slice_info, cluster;
    DeviceTaintRule => DeviceTaintRule, device_taint_rule_info, cluster;
    CompositePodGroup => CompositePodGroup, composite_pod_group_info, namespaced;
    PodGroup => PodGroup, pod_group_info, namespaced;
}

/// A PodGroup watch event's cluster events: its `PodGroupInitiallyScheduled` condition as the
/// object shows it (which the binder keeps, as kube-scheduler's informer cache does, to keep
/// its transition time), then the group itself.
pub fn pod_group_events(t: &mut ObjectTracker, event: Event<PodGroup>) -> (Vec<ClusterEvent>, bool) {
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
pub fn device_object_events<K: TrackedKind + WholeDeviceObject>(
    t: &mut ObjectTracker,
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
pub struct ObjectTracker {
    keys: HashMap<String, TrackedKey>,
    relisting: Option<HashSet<String>>,
}

fn key_string(k: &TrackedKey) -> String {
    format!("{k:?}")
}

impl ObjectTracker {
    /// The cluster events for one watch event; `true` with them when an initial list completed.
    pub fn on_event<K: TrackedKind>(&mut self, event: Event<K>) -> (Vec<ClusterEvent>, bool) {
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
                (vec![ClusterEvent::ObjectApplied(projected)], false)
            }
            Event::Delete(obj) => {
                let key = obj.deleted_key();
                self.keys.remove(&key_string(&key));
                (vec![ClusterEvent::ObjectDeleted(key)], false)
            }
            Event::InitDone => {
                let Some(seen) = self.relisting.take() else {
                    return (Vec::new(), true);
                };
                let mut gone: Vec<TrackedKey> = Vec::new();
                self.keys.retain(|s, k| {
                    let keep = seen.contains(s);
                    if !keep {
                        gone.push(k.clone());
                    }
                    keep
                });
                gone.sort();
                (gone.into_iter().map(ClusterEvent::ObjectDeleted).collect(), true)
            }
        }
    }
}
