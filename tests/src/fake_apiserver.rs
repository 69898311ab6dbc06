//! An in-memory fake Kubernetes API server that speaks the real HTTP/JSON wire protocol.
//!
//! Real `kube::Client` code (typed `Api`s, `kube::runtime::watcher`, lease managers, event
//! recorders) runs against it unmodified. It serves core/v1 `nodes`, `pods` (with the `status`
//! and `binding` subresources), `events` and `namespaces`, events.k8s.io/v1 `events`,
//! coordination.k8s.io/v1 `leases`, policy/v1 `poddisruptionbudgets`, core/v1
//! `persistentvolumeclaims` and `persistentvolumes` (with the `status` subresource), and
//! storage.k8s.io/v1 `storageclasses`, `csinodes`, `csidrivers` and `csistoragecapacities`, and
//! resource.k8s.io/v1 `deviceclasses`, `resourceclaims` (with the `status` subresource),
//! `resourceslices` and `devicetaintrules`, and scheduling.k8s.io/v1beta1 `podgroups` and v1alpha3
//! `compositepodgroups` (each with the `status` subresource; left out with
//! [`FakeApiServerConfig::serve_pod_groups`] off, as on an API server without the Workload API), with one global, monotonically increasing resourceVersion like etcd.
//!
//! Supported, with the API server's semantics:
//! - GET/LIST (label and field selectors; pages with `limit`/`continue`), WATCH (replay from an in-memory history, then live; selector transitions become
//!   ADDED/DELETED; periodic BOOKMARKs; `timeoutSeconds`; `sendInitialEvents` streaming lists;
//!   410 `Expired` ERROR events for compacted resourceVersions), POST, PUT (optimistic
//!   concurrency on `metadata.resourceVersion`), PATCH (merge, strategic merge, JSON patch and
//!   server-side apply with field-ownership conflicts), DELETE (preconditions, finalizers) and
//!   DELETE of a collection.
//! - `pods/{name}/binding`: sets `spec.nodeName` and the `PodScheduled` condition; 409 when the
//!   pod is already bound, being deleted, still has scheduling gates, or the uid/resourceVersion
//!   precondition fails.
//! - Pod strategies: create resets `status` to `Pending`, applies a few defaults and gives a pod
//!   with scheduling gates `PodScheduled=False` (reason `SchedulingGated`); updates of the main
//!   resource keep `status`, reject changes to immutable `spec` fields and added scheduling gates
//!   (422); the
//!   `status` subresource changes only `status`. Node updates keep `status` likewise.
//!
//! - The PV controller, when a test asks ([`FakeApiServer::play_pv_controller`]): it binds the
//!   claims a volume's `claimRef` names and provisions the claims with a selected node.
//! - Graceful pod deletion: DELETE of a pod scheduled to a node sets `deletionTimestamp` (now +
//!   grace) and `deletionGracePeriodSeconds` (the request's `gracePeriodSeconds`, else the pod's
//!   `terminationGracePeriodSeconds`, else 30) and keeps the pod, as the API server does until the
//!   kubelet deletes it again with grace 0 (tests play the kubelet); an unscheduled pod or a grace
//!   of 0 is removed at once (after its finalizers).
//!
//! Not modelled: authentication, namespaces as objects beyond storing them (no cascading deletion), `dryRun`, protobuf, consistent snapshots across list pages, `managedFields` in
//! returned objects (ownership is tracked on the side, see [`FakeApiServer::field_managers`]).
//!
//! Note that `kube::Client` retries 429, 503 and 504 answers on its own (up to 15 times), so
//! [`FakeApiServer::fail_next`] with those codes is usually invisible to the caller except in the
//! request log.

mod patch;
mod pv_controller;
mod select;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State as AxumState};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use axum::serve::ListenerExt;
use axum::Router;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Node, Pod};
use k8s_openapi::api::events::v1::Event as EventV1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use patch::{ApplyError, Ownership, PackedOwnership};
use select::{FieldSelector, LabelSelector, Selectable};

/// The resource kinds the fake API server stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// core/v1 `nodes` (cluster-scoped).
    Node,
    /// core/v1 `pods` (namespaced).
    Pod,
    /// core/v1 `events` (namespaced).
    CoreEvent,
    /// events.k8s.io/v1 `events` (namespaced).
    Event,
    /// coordination.k8s.io/v1 `leases` (namespaced).
    Lease,
    /// core/v1 `namespaces` (cluster-scoped; only their labels matter to the binder).
    Namespace,
    /// policy/v1 `poddisruptionbudgets` (namespaced; tests play the disruption controller and
    /// write `status`).
    PodDisruptionBudget,
    /// core/v1 `persistentvolumeclaims` (namespaced; tests play the PV controller).
    PersistentVolumeClaim,
    /// core/v1 `persistentvolumes` (cluster-scoped).
    PersistentVolume,
    /// storage.k8s.io/v1 `storageclasses` (cluster-scoped).
    StorageClass,
    /// storage.k8s.io/v1 `csinodes` (cluster-scoped).
    CsiNode,
    /// storage.k8s.io/v1 `csidrivers` (cluster-scoped).
    CsiDriver,
    /// storage.k8s.io/v1 `csistoragecapacities` (namespaced).
    CsiStorageCapacity,
    /// resource.k8s.io/v1 `deviceclasses` (cluster-scoped).
    DeviceClass,
    /// resource.k8s.io/v1 `resourceclaims` (namespaced, with the `status` subresource).
    ResourceClaim,
    /// resource.k8s.io/v1 `resourceslices` (cluster-scoped).
    ResourceSlice,
    /// resource.k8s.io/v1 `devicetaintrules` (cluster-scoped).
    DeviceTaintRule,
    /// scheduling.k8s.io/v1beta1 `podgroups` (namespaced, with the `status` subresource).
    PodGroup,
    /// scheduling.k8s.io/v1alpha3 `compositepodgroups` (namespaced, with the `status`
    /// subresource), served with the PodGroups.
    CompositePodGroup,
}

/// Static description of a served resource.
struct ResourceInfo {
    kind: Kind,
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind_name: &'static str,
    namespaced: bool,
    subresources: &'static [&'static str],
}

const RESOURCES: &[ResourceInfo] = &[
    ResourceInfo {
        kind: Kind::Node,
        group: "",
        version: "v1",
        plural: "nodes",
        singular: "node",
        kind_name: "Node",
        namespaced: false,
        subresources: &["status"],
    },
    ResourceInfo {
        kind: Kind::Pod,
        group: "",
        version: "v1",
        plural: "pods",
        singular: "pod",
        kind_name: "Pod",
        namespaced: true,
        subresources: &["status", "binding"],
    },
    ResourceInfo {
        kind: Kind::CoreEvent,
        group: "",
        version: "v1",
        plural: "events",
        singular: "event",
        kind_name: "Event",
        namespaced: true,
        subresources: &[],
    },
    ResourceInfo {
        kind: Kind::Event,
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        singular: "event",
        kind_name: "Event",
        namespaced: true,
        subresources: &[],
    },
    ResourceInfo {
        kind: Kind::Lease,
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        singular: "lease",
        kind_name: "Lease",
        namespaced: true,
        subresources: &[],
    },
    ResourceInfo {
        kind: Kind::Namespace,
        group: "",
        version: "v1",
        plural: "namespaces",
        singular: "namespace",
        kind_name: "Namespace",
        namespaced: false,
        subresources: &[],
    },
    ResourceInfo {
        kind: Kind::PodDisruptionBudget,
        group: "policy",
        version: "v1",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        kind_name: "PodDisruptionBudget",
        namespaced: true,
        subresources: &["status"],
    },
    ResourceInfo {
        kind: Kind::PersistentVolumeClaim,
        group: "",
        version: "v1",
        plural: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        kind_name: "PersistentVolumeClaim",
        namespaced: true,
        subresources: &["status"],
    },
    ResourceInfo {
        kind: Kind::PersistentVolume,
        group: "",
        version: "v1",
        plural: "persistentvolumes",
        singular: "persistentvolume",
        kind_name: "PersistentVolume",
        namespaced: false,
        subresources: &["status"],
    },
    ResourceInfo {
        kind: Kind::StorageClass,
        group: "storage.k8s.io",
        version: "v1",
        plural: "storageclasses",
        singular: "storageclass",
        kind_name: "StorageClass",
        namespaced: false,
        subresources: &[],
    },
    ResourceInfo {
        kind: Kind::CsiNode,
        group: "storage.k8s.io",
        version: "v1",
        plural: "csinodes",
        singular: "csinode",
        kind_name: "CSINode",
        namespaced: false,
        subresources: &[],
    },
    ResourceInfo {
        kind: Kind::CsiDriver,
        group: "storage.k8s.io",
        version: "v1",
        plural: "csidrivers",
        singular: "csidriver",
        kind_name: "CSIDriver",
        namespaced: false,
        subresources: &[],
    },
    ResourceInfo {
        kind: Kind::CsiStorageCapacity,
        group: "storage.k8s.io",
        version: "v1",
        plural: "csistoragecapacities",
        singular: "csistoragecapacity",
        kind_name: "CSIStorageCapacity",
        namespaced: true,
        subresources: &[],
    },
    ResourceInfo {
        kind: Kind::DeviceClass,
        group: "resource.k8s.io",
        version: "v1",
        plural: "deviceclasses",
        singular: "deviceclass",
        kind_name: "DeviceClass",
        namespaced: false,
        subresources: &[],
    },
    ResourceInfo {
        kind: Kind::ResourceClaim,
        group: "resource.k8s.io",
        version: "v1",
        plural: "resourceclaims",
        singular: "resourceclaim",
        kind_name: "ResourceClaim",
        namespaced: true,
        subresources: &["status"],
    },
    ResourceInfo {
        kind: Kind::ResourceSlice,
        group: "resource.k8s.io",
        version: "v1",
        plural: "resourceslices",
        singular: "resourceslice",
        kind_name: "ResourceSlice",
        namespaced: false,
        subresources: &[],
    },
    ResourceInfo {
        kind: Kind::DeviceTaintRule,
        group: "resource.k8s.io",
        version: "v1",
        plural: "devicetaintrules",
        singular: "devicetaintrule",
        kind_name: "DeviceTaintRule",
        namespaced: false,
        subresources: &[],
    },
    ResourceInfo {
        kind: Kind::PodGroup,
        group: "scheduling.k8s.io",
        version: "v1beta1",
        plural: "podgroups",
        singular: "podgroup",
        kind_name: "PodGroup",
        namespaced: true,
        subresources: &["status"],
    },
    ResourceInfo {
        kind: Kind::CompositePodGroup,
        group: "scheduling.k8s.io",
        version: "v1alpha3",
        plural: "compositepodgroups",
        singular: "compositepodgroup",
        kind_name: "CompositePodGroup",
        namespaced: true,
        subresources: &["status"],
    },
];

impl Kind {
    fn info(self) -> &'static ResourceInfo {
        RESOURCES
            .iter()
            .find(|r| r.kind == self)
            .expect("every kind is in RESOURCES")
    }

    /// The `apiVersion` of objects of this kind, e.g. `v1` or `coordination.k8s.io/v1`.
    pub fn api_version(self) -> String {
        let i = self.info();
        if i.group.is_empty() {
            i.version.to_string()
        } else {
            format!("{}/{}", i.group, i.version)
        }
    }

    /// The `kind` field of objects of this kind, e.g. `Pod`.
    pub fn kind_name(self) -> &'static str {
        self.info().kind_name
    }

    /// Whether objects of this kind live in a namespace.
    pub fn namespaced(self) -> bool {
        self.info().namespaced
    }

    /// `plural` or `plural.group`, as the API server names the resource in error messages.
    fn qualified(self) -> String {
        let i = self.info();
        if i.group.is_empty() {
            i.plural.to_string()
        } else {
            format!("{}.{}", i.plural, i.group)
        }
    }

    fn details(self, name: &str) -> Value {
        let i = self.info();
        let mut d = json!({"name": name, "kind": i.plural});
        if !i.group.is_empty() {
            d["group"] = json!(i.group);
        }
        d
    }
}

/// An error answered as a `Status` object.
#[derive(Debug, Clone)]
struct ApiError {
    code: u16,
    reason: String,
    message: String,
    details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
        }
    }

    fn details(mut self, d: Value) -> Self {
        self.details = Some(d);
        self
    }

    fn not_found(kind: Kind, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{} \"{name}\" not found", kind.qualified())).details(kind.details(name))
    }

    fn already_exists(kind: Kind, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", kind.qualified()),
        )
        .details(kind.details(name))
    }

    fn conflict(kind: Kind, name: &str, msg: &str) -> Self {
        Self::conflict_on(&kind.qualified(), kind.details(name), name, msg)
    }

    fn conflict_on(resource: &str, details: Value, name: &str, msg: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {resource} \"{name}\": {msg}"),
        )
        .details(details)
    }

    fn modified(kind: Kind, name: &str) -> Self {
        Self::conflict(
            kind,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    fn bad_request(msg: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", msg)
    }

    fn invalid(kind: Kind, name: &str, field: &str, cause_reason: &str, msg: &str) -> Self {
        let i = kind.info();
        let mut d = json!({
            "name": name,
            "kind": i.kind_name,
            "causes": [{"reason": cause_reason, "message": msg, "field": field}],
        });
        if !i.group.is_empty() {
            d["group"] = json!(i.group);
        }
        Self::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {field}: {msg}", i.kind_name),
        )
        .details(d)
    }

    fn to_json(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

/// The conventional `reason` for an HTTP status code.
fn reason_for(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

/// Identity of a stored object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    kind: Kind,
    namespace: String,
    name: String,
}

/// A stored object, kept encoded: a million pods as `serde_json::Value`s with their field
/// ownership would take tens of GB, and lists serve the encoded items as they are.
struct Stored {
    /// The object's JSON without `kind` and `apiVersion` (a list item), encoded when written.
    item: Box<[u8]>,
    /// What label and field selectors read (`None`: they read the decoded object).
    select: Option<Selectable>,
    owners: PackedOwnership,
}

impl Stored {
    fn new(kind: Kind, obj: &Value, owners: &Ownership) -> Self {
        Self {
            item: serde_json::to_vec(&ListItem(obj))
                .expect("JSON values serialize")
                .into_boxed_slice(),
            select: Selectable::of(kind, obj),
            owners: owners.pack(),
        }
    }

    /// The object, decoded, with the `kind` and `apiVersion` of `kind`.
    fn value(&self, kind: Kind) -> Value {
        let mut v: Value = serde_json::from_slice(&self.item).expect("stored JSON decodes");
        set_type_meta(kind, &mut v);
        v
    }

    /// The object's field ownership.
    fn owners(&self) -> Ownership {
        self.owners.unpack()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChangeType {
    Added,
    Modified,
    Deleted,
}

/// One committed change, kept in the history for watch replay.
struct Change {
    rv: u64,
    kind: Kind,
    typ: ChangeType,
    /// The object after the change (for deletes: the last state, with the delete's RV).
    obj: Arc<Value>,
    /// The object before the change.
    prev: Option<Arc<Value>>,
}

struct WatcherReg {
    id: u64,
    kind: Kind,
    tx: mpsc::UnboundedSender<Arc<Change>>,
}

/// The first resourceVersion the server hands out.
const BASE_RV: u64 = 100;

struct StoreState {
    rv: u64,
    objects: BTreeMap<Key, Stored>,
    history: VecDeque<Arc<Change>>,
    /// Watches from a resourceVersion below this get 410 Expired.
    compacted_rv: u64,
    watchers: Vec<WatcherReg>,
    next_watcher_id: u64,
    rng: u64,
}

fn set_rv(obj: &mut Value, rv: u64) {
    meta_mut(obj).insert("resourceVersion".into(), json!(rv.to_string()));
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let m = obj.as_object_mut().expect("object");
    let meta = m.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    meta.as_object_mut().expect("object")
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn now_time() -> Value {
    serde_json::to_value(Time(k8s_openapi::jiff::Timestamp::now())).expect("Time serializes")
}

impl StoreState {
    fn new() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9E37_79B9_7F4A_7C15);
        Self {
            rv: BASE_RV,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            compacted_rv: BASE_RV,
            watchers: Vec::new(),
            next_watcher_id: 1,
            rng: seed | 1,
        }
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn new_uid(&mut self) -> String {
        let a = self.next_random();
        let b = self.next_random();
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | (b >> 48 & 0x3fff),
            b & 0xffff_ffff_ffff
        )
    }

    fn generate_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..5)
            .map(|_| ALPHABET[(self.next_random() % ALPHABET.len() as u64) as usize] as char)
            .collect()
    }

    fn get(&self, key: &Key) -> Option<&Stored> {
        self.objects.get(key)
    }

    fn of_kind(&self, kind: Kind) -> impl Iterator<Item = (&Key, &Stored)> {
        let start = Key {
            kind,
            namespace: String::new(),
            name: String::new(),
        };
        self.objects.range(start..).take_while(move |(k, _)| k.kind == kind)
    }

    /// The objects of `kind` after `after` (all of them without it), in key order.
    fn of_kind_after(&self, kind: Kind, after: Option<&Key>) -> impl Iterator<Item = (&Key, &Stored)> {
        use std::ops::Bound;
        let start = match after {
            Some(a) => Bound::Excluded(a.clone()),
            None => Bound::Included(Key {
                kind,
                namespace: String::new(),
                name: String::new(),
            }),
        };
        self.objects
            .range((start, Bound::Unbounded))
            .take_while(move |(k, _)| k.kind == kind)
    }

    /// Stores `obj` under `key`, bumping the resourceVersion unless nothing changed.
    fn put(&mut self, key: Key, mut obj: Value, owners: Ownership, limit: usize) -> Value {
        set_type_meta(key.kind, &mut obj);
        let prev = self.objects.get(&key).map(|s| s.value(key.kind));
        if let Some(p) = &prev {
            let mut same = obj.clone();
            if let Some(rv) = meta_str(p, "resourceVersion") {
                meta_mut(&mut same).insert("resourceVersion".into(), json!(rv));
            }
            if same == *p {
                if let Some(s) = self.objects.get_mut(&key) {
                    s.owners = owners.pack();
                }
                return p.clone();
            }
        }
        self.rv += 1;
        let rv = self.rv;
        set_rv(&mut obj, rv);
        self.objects.insert(key.clone(), Stored::new(key.kind, &obj, &owners));
        let typ = if prev.is_some() {
            ChangeType::Modified
        } else {
            ChangeType::Added
        };
        self.record(
            Change {
                rv,
                kind: key.kind,
                typ,
                obj: Arc::new(obj.clone()),
                prev: prev.map(Arc::new),
            },
            limit,
        );
        obj
    }

    /// Removes the object, returning its last state stamped with the delete's resourceVersion.
    fn remove(&mut self, key: &Key, limit: usize) -> Option<Value> {
        let stored = self.objects.remove(key)?.value(key.kind);
        self.rv += 1;
        let rv = self.rv;
        let mut obj = stored.clone();
        set_rv(&mut obj, rv);
        self.record(
            Change {
                rv,
                kind: key.kind,
                typ: ChangeType::Deleted,
                obj: Arc::new(obj.clone()),
                prev: Some(Arc::new(stored)),
            },
            limit,
        );
        Some(obj)
    }

    fn record(&mut self, change: Change, limit: usize) {
        let change = Arc::new(change);
        self.history.push_back(change.clone());
        while self.history.len() > limit {
            if let Some(old) = self.history.pop_front() {
                self.compacted_rv = old.rv;
            }
        }
        self.watchers
            .retain(|w| w.kind != change.kind || w.tx.send(change.clone()).is_ok());
    }
}

/// Which objects a list or watch selects.
#[derive(Clone)]
struct Filter {
    kind: Kind,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn from_query(kind: Kind, namespace: Option<String>, q: &Query) -> Result<Self, ApiError> {
        let labels = LabelSelector::parse(q.get("labelSelector").unwrap_or_default())
            .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
        let fields =
            FieldSelector::parse(q.get("fieldSelector").unwrap_or_default(), kind).map_err(ApiError::bad_request)?;
        Ok(Self {
            kind,
            namespace,
            labels,
            fields,
        })
    }

    fn matches(&self, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace {
            if meta_str(obj, "namespace") != Some(ns.as_str()) {
                return false;
            }
        }
        self.labels.matches(obj) && self.fields.matches(self.kind, obj)
    }

    /// Whether the stored object under `key` passes, read from its selectable view.
    fn matches_stored(&self, key: &Key, s: &Stored) -> bool {
        if self.namespace.as_ref().is_some_and(|ns| *ns != key.namespace) {
            return false;
        }
        match &s.select {
            Some(view) => {
                self.labels.matches_labels(|k| view.label(k)) && self.fields.matches_fields(|f| view.field(f))
            }
            None => self.matches(&s.value(key.kind)),
        }
    }

    /// The watch event this change produces for this filter, like the API server's watch cache.
    fn to_event(&self, ch: &Change) -> Option<Value> {
        let cur = ch.typ != ChangeType::Deleted && self.matches(&ch.obj);
        let old = ch.prev.as_deref().is_some_and(|p| self.matches(p));
        match (cur, old) {
            (true, false) => Some(watch_event("ADDED", &ch.obj)),
            (true, true) => Some(watch_event("MODIFIED", &ch.obj)),
            (false, true) => {
                let mut gone = ch.prev.as_deref().cloned().expect("old passes");
                set_rv(&mut gone, ch.rv);
                Some(watch_event("DELETED", &gone))
            }
            (false, false) => None,
        }
    }
}

fn watch_event(typ: &str, obj: &Value) -> Value {
    json!({"type": typ, "object": obj})
}

/// Query parameters of a request (last value wins).
struct Query(HashMap<String, String>);

impl Query {
    fn parse(q: &str) -> Self {
        Self(
            form_urlencoded::parse(q.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str)
    }

    fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true" | "1"))
    }
}

/// Settings of a [`FakeApiServer`].
#[derive(Debug, Clone)]
pub struct FakeApiServerConfig {
    /// Interval between BOOKMARK events on watches that set `allowWatchBookmarks=true`.
    pub bookmark_interval: Duration,
    /// How many changes are kept for watch replay; older ones are compacted away (410 Expired).
    pub history_limit: usize,
    /// Server-side timeout of watches that do not send `timeoutSeconds`.
    pub default_watch_timeout: Duration,
    /// Whether scheduling.k8s.io/v1beta1 `podgroups` are served (Kubernetes 1.37 with the
    /// `GenericWorkload` gate and the API version on). Off, the group version is not discovered
    /// and its paths answer 404, as on an API server without them.
    pub serve_pod_groups: bool,
}

impl Default for FakeApiServerConfig {
    fn default() -> Self {
        Self {
            bookmark_interval: Duration::from_secs(1),
            history_limit: 20_000,
            default_watch_timeout: Duration::from_secs(1800),
            serve_pod_groups: true,
        }
    }
}

/// Selects requests by method and a substring of the path and query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestMatcher {
    method: Option<String>,
    path_contains: Option<String>,
    watch: Option<bool>,
}

/// A matcher for `method` (`"*"` or `""` = any) and requests whose path+query contains `path_contains`.
pub fn matcher(method: &str, path_contains: &str) -> RequestMatcher {
    RequestMatcher {
        method: (!method.is_empty() && method != "*").then(|| method.to_ascii_uppercase()),
        path_contains: (!path_contains.is_empty()).then(|| path_contains.to_string()),
        watch: None,
    }
}

impl RequestMatcher {
    /// A matcher that matches every request.
    pub fn any() -> Self {
        Self::default()
    }

    /// Restricts the matcher to watch requests (`true`) or to everything but watches (`false`).
    pub fn watch(mut self, is_watch: bool) -> Self {
        self.watch = Some(is_watch);
        self
    }

    fn matches_parts(&self, method: &str, path_and_query: &str, is_watch: bool) -> bool {
        self.method.as_deref().is_none_or(|m| m == method)
            && self.path_contains.as_deref().is_none_or(|p| path_and_query.contains(p))
            && self.watch.is_none_or(|w| w == is_watch)
    }

    /// Whether a logged request matches.
    pub fn matches(&self, r: &RequestRecord) -> bool {
        self.matches_parts(&r.method, &r.path_and_query, r.watch)
    }
}

/// One request the server answered.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRecord {
    /// HTTP method, e.g. `POST`.
    pub method: String,
    /// The path, e.g. `/api/v1/namespaces/default/pods/p/binding`.
    pub path: String,
    /// Path plus `?query` when the query is not empty.
    pub path_and_query: String,
    /// HTTP status code answered (for watches: the status the stream started with).
    pub status: u16,
    /// Whether this was a watch request.
    pub watch: bool,
    /// The request's `Content-Type`, if any.
    pub content_type: Option<String>,
    /// The request body, when it was JSON.
    pub body: Option<Value>,
}

/// How a failed request is answered by [`FakeApiServer::fail_next_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// HTTP status code (and `Status.code`).
    pub code: u16,
    /// `Status.reason`; defaults to the conventional one for the code.
    pub reason: Option<String>,
    /// `Status.message`; defaults to a message naming the injected fault.
    pub message: Option<String>,
    /// A `Retry-After` header in seconds, if any.
    pub retry_after_seconds: Option<u64>,
}

impl Failure {
    /// A failure with `code` and the default reason and message.
    pub fn new(code: u16) -> Self {
        Self {
            code,
            reason: None,
            message: None,
            retry_after_seconds: None,
        }
    }
}

enum FaultAction {
    Fail(Failure),
    Delay(Duration),
}

struct Fault {
    remaining: usize,
    matcher: RequestMatcher,
    action: FaultAction,
}

/// A summary of a stored core/v1 or events.k8s.io/v1 Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    /// `v1` or `events.k8s.io/v1`.
    pub api_version: String,
    /// Namespace of the Event object.
    pub namespace: String,
    /// Name of the Event object.
    pub name: String,
    /// `Normal` or `Warning`.
    pub event_type: Option<String>,
    /// The event's reason, e.g. `FailedScheduling`.
    pub reason: Option<String>,
    /// `message` (core/v1) or `note` (events.k8s.io/v1).
    pub message: Option<String>,
    /// `action` (events.k8s.io/v1 only).
    pub action: Option<String>,
    /// Kind of the object the event is about (`involvedObject` / `regarding`).
    pub regarding_kind: Option<String>,
    /// Namespace of the object the event is about.
    pub regarding_namespace: Option<String>,
    /// Name of the object the event is about.
    pub regarding_name: Option<String>,
    /// `source.component` (core/v1) or `reportingController` (events.k8s.io/v1).
    pub reporting_controller: Option<String>,
}

#[derive(Default)]
struct Counters {
    bindings_attempted: AtomicU64,
    bindings_succeeded: AtomicU64,
    bindings_conflicted: AtomicU64,
    watches_opened: AtomicU64,
    watches_expired: AtomicU64,
    active_watches: AtomicU64,
    /// Requests held by an injected delay and not yet processed.
    delayed: AtomicU64,
}

struct Inner {
    state: Mutex<StoreState>,
    config: FakeApiServerConfig,
    log: Mutex<Vec<RequestRecord>>,
    faults: Mutex<Vec<Fault>>,
    counters: Counters,
    drop_tx: watch::Sender<u64>,
    shutdown_tx: watch::Sender<bool>,
    addr: SocketAddr,
}

/// Who performs a write: decides the pod create strategy and the default field manager.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    Http,
    Test,
}

/// The field manager of writes made through the test control API.
const TEST_MANAGER: &str = "fake-apiserver-test";

/// A running fake API server; shuts down when dropped.
pub struct FakeApiServer {
    inner: Arc<Inner>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for FakeApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeApiServer")
            .field("url", &self.url())
            .finish_non_exhaustive()
    }
}

fn json_response(code: u16, body: &Value) -> Response {
    json_bytes_response(code, serde_json::to_vec(body).expect("JSON values serialize"))
}

fn json_bytes_response(code: u16, body: Vec<u8>) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn error_response(e: &ApiError) -> Response {
    json_response(e.code, &e.to_json())
}

fn success_status(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}

/// Where a request is aimed.
enum Target {
    Version,
    Health,
    CoreVersions,
    Groups,
    Resources(&'static str, &'static str),
    Collection {
        kind: Kind,
        namespace: Option<String>,
    },
    Item {
        kind: Kind,
        namespace: Option<String>,
        name: String,
        sub: Option<String>,
    },
}

fn parse_target(path: &str, served: impl Fn(&ResourceInfo) -> bool) -> Result<Target, ApiError> {
    let not_found = || ApiError::new(404, "NotFound", "the server could not find the requested resource");
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Ok(Target::Version),
        ["healthz" | "readyz" | "livez"] => return Ok(Target::Health),
        ["api"] => return Ok(Target::CoreVersions),
        ["apis"] => return Ok(Target::Groups),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(not_found()),
    };
    let find = |plural: &str| {
        RESOURCES
            .iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural && served(r))
    };
    if rest.is_empty() {
        let r = RESOURCES
            .iter()
            .find(|r| r.group == group && r.version == version && served(r))
            .ok_or_else(not_found)?;
        return Ok(Target::Resources(r.group, r.version));
    }
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, tail @ ..] if find(plural).is_some_and(|r| r.namespaced) => {
            (Some((*ns).to_string()), [&[*plural][..], tail].concat())
        }
        _ => (None, rest.to_vec()),
    };
    let info = find(rest[0]).ok_or_else(not_found)?;
    match rest.as_slice() {
        [_] => Ok(Target::Collection {
            kind: info.kind,
            namespace,
        }),
        [_, _] | [_, _, _] if info.namespaced && namespace.is_none() => Err(not_found()),
        [_, name] => Ok(Target::Item {
            kind: info.kind,
            namespace,
            name: (*name).to_string(),
            sub: None,
        }),
        [_, name, sub] if info.subresources.contains(sub) => Ok(Target::Item {
            kind: info.kind,
            namespace,
            name: (*name).to_string(),
            sub: Some((*sub).to_string()),
        }),
        _ => Err(not_found()),
    }
}

/// A request as the processing task sees it.
struct Incoming {
    method: String,
    path: String,
    query: String,
    content_type: Option<String>,
    user_agent: Option<String>,
    /// Whether the client asked for `PartialObjectMetadata` (metadata-only) answers.
    metadata_only: bool,
    body: Bytes,
}

impl Incoming {
    fn path_and_query(&self) -> String {
        if self.query.is_empty() {
            self.path.clone()
        } else {
            format!("{}?{}", self.path, self.query)
        }
    }

    fn json_body(&self) -> Result<Value, ApiError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| ApiError::bad_request(format!("the body of the request was in an unknown format: {e}")))
    }

    /// The field manager of a non-apply write: `fieldManager`, else the User-Agent's product.
    fn manager(&self, q: &Query) -> String {
        q.get("fieldManager")
            .map(str::to_string)
            .or_else(|| {
                self.user_agent
                    .as_deref()
                    .and_then(|ua| ua.split('/').next())
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "unknown".to_string())
    }
}

fn pod_qos(pod: &Value) -> &'static str {
    let mut any = false;
    let mut guaranteed = true;
    for list in ["containers", "initContainers"] {
        for c in pod
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for r in ["cpu", "memory"] {
                let lim = c.pointer(&format!("/resources/limits/{r}"));
                let req = c.pointer(&format!("/resources/requests/{r}")).or(lim);
                if lim.is_some() || req.is_some() {
                    any = true;
                }
                if lim.is_none() || req != lim {
                    guaranteed = false;
                }
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// The API server's pod defaulting (the subset that matters to schedulers).
fn default_pod(pod: &mut Value) {
    let spec = pod
        .as_object_mut()
        .expect("object")
        .entry("spec")
        .or_insert_with(|| json!({}));
    if let Some(spec) = spec.as_object_mut() {
        spec.entry("schedulerName").or_insert(json!("default-scheduler"));
        spec.entry("restartPolicy").or_insert(json!("Always"));
        spec.entry("dnsPolicy").or_insert(json!("ClusterFirst"));
        spec.entry("terminationGracePeriodSeconds").or_insert(json!(30));
        if !spec.contains_key("priorityClassName") {
            spec.entry("priority").or_insert(json!(0));
        }
        for list in ["containers", "initContainers"] {
            for c in spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
                let Some(limits) = c.pointer("/resources/limits").and_then(Value::as_object).cloned() else {
                    continue;
                };
                let res = c
                    .as_object_mut()
                    .and_then(|c| c.get_mut("resources"))
                    .and_then(Value::as_object_mut)
                    .expect("resources has limits");
                let req = res.entry("requests").or_insert_with(|| json!({}));
                if let Some(req) = req.as_object_mut() {
                    for (k, v) in limits {
                        req.entry(k).or_insert(v);
                    }
                }
            }
        }
    }
}

/// The API server's `applySchedulingGatedCondition` on create (1.26 and later): a pod with
/// scheduling gates and no `PodScheduled` condition gets `PodScheduled=False`, reason
/// `SchedulingGated`.
fn apply_scheduling_gated_condition(pod: &mut Value) {
    let gated = pod
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty());
    let has_condition = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled"));
    if gated && !has_condition {
        set_pod_condition(
            pod,
            "PodScheduled",
            "False",
            Some("SchedulingGated"),
            Some("Scheduling is blocked due to non-empty scheduling gates"),
        );
    }
}

/// The first gate of `new` that `old` did not have (its index and name): pod validation allows
/// scheduling gates to be removed only.
fn added_scheduling_gate(old_spec: &Value, new_spec: &Value) -> Option<(usize, String)> {
    let names = |spec: &Value| -> Vec<String> {
        spec.get("schedulingGates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|g| g.get("name").and_then(Value::as_str).map(str::to_string))
            .collect()
    };
    let old = names(old_spec);
    names(new_spec).into_iter().enumerate().find(|(_, g)| !old.contains(g))
}

/// Masks the pod spec fields an update may change.
fn mutable_pod_spec_masked(spec: &Value) -> Value {
    let mut s = spec.clone();
    if let Some(m) = s.as_object_mut() {
        for f in [
            "activeDeadlineSeconds",
            "tolerations",
            "schedulingGates",
            "terminationGracePeriodSeconds",
        ] {
            m.remove(f);
        }
        for list in ["containers", "initContainers"] {
            for c in m.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
                if let Some(c) = c.as_object_mut() {
                    c.remove("image");
                }
            }
        }
    }
    s
}

fn typed<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("stored object deserializes into its k8s-openapi type")
}

fn untyped<T: Serialize>(t: &T) -> Value {
    serde_json::to_value(t).expect("k8s-openapi objects serialize")
}

/// A stored object as a list item: without `kind` and `apiVersion`, which the list carries.
struct ListItem<'a>(&'a Value);

impl Serialize for ListItem<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_object() {
            Some(m) => s.collect_map(m.iter().filter(|(k, _)| *k != "kind" && *k != "apiVersion")),
            None => self.0.serialize(s),
        }
    }
}

fn strip_type_meta(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.remove("kind");
        m.remove("apiVersion");
    }
    v
}

impl Inner {
    fn limit(&self) -> usize {
        self.config.history_limit.max(1)
    }

    fn key(kind: Kind, namespace: Option<&str>, name: &str) -> Key {
        Key {
            kind,
            namespace: if kind.namespaced() {
                namespace.unwrap_or("default").to_string()
            } else {
                String::new()
            },
            name: name.to_string(),
        }
    }

    /// Validates and stores a new object.
    fn create(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        mut obj: Value,
        origin: Origin,
        manager: &str,
    ) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request was in an unknown format",
            ));
        }
        check_type_meta(kind, &obj)?;
        let mut st = self.state.lock();
        let meta = meta_mut(&mut obj);
        let name = match meta.get("name").and_then(Value::as_str).filter(|s| !s.is_empty()) {
            Some(n) => n.to_string(),
            None => {
                let Some(prefix) = meta.get("generateName").and_then(Value::as_str).map(str::to_string) else {
                    return Err(ApiError::invalid(
                        kind,
                        "",
                        "metadata.name",
                        "FieldValueRequired",
                        "Required value: name or generateName is required",
                    ));
                };
                let n = format!("{prefix}{}", st.generate_suffix());
                meta_mut(&mut obj).insert("name".into(), json!(n));
                n
            }
        };
        let meta = meta_mut(&mut obj);
        let ns = if kind.namespaced() {
            let path_ns = namespace.unwrap_or("default");
            if let Some(body_ns) = meta.get("namespace").and_then(Value::as_str).filter(|s| !s.is_empty()) {
                if body_ns != path_ns && origin == Origin::Http {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
            }
            meta.insert("namespace".into(), json!(path_ns));
            Some(path_ns.to_string())
        } else {
            meta.remove("namespace");
            None
        };
        let key = Self::key(kind, ns.as_deref(), &name);
        if st.get(&key).is_some() {
            return Err(ApiError::already_exists(kind, &name));
        }
        let uid = st.new_uid();
        let meta = meta_mut(&mut obj);
        meta.insert("uid".into(), json!(uid));
        meta.insert("creationTimestamp".into(), now_time());
        meta.remove("resourceVersion");
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        meta.remove("managedFields");
        set_type_meta(kind, &mut obj);
        if matches!(kind, Kind::ResourceClaim | Kind::PodGroup | Kind::CompositePodGroup) && origin == Origin::Http {
            // "Status must not be set by user on create."
            obj.as_object_mut().expect("object").remove("status");
        }
        if kind == Kind::Pod {
            default_pod(&mut obj);
            let qos = pod_qos(&obj);
            let m = obj.as_object_mut().expect("object");
            if origin == Origin::Http {
                m.insert("status".into(), json!({"phase": "Pending", "qosClass": qos}));
            } else {
                let status = m.entry("status").or_insert_with(|| json!({}));
                if let Some(s) = status.as_object_mut() {
                    s.entry("phase").or_insert(json!("Pending"));
                    s.entry("qosClass").or_insert(json!(qos));
                }
            }
            apply_scheduling_gated_condition(&mut obj);
        }
        let mut owners = Ownership::default();
        owners.record_update(manager, None, &obj);
        let limit = self.limit();
        Ok(st.put(key, obj, owners, limit))
    }

    /// Applies the update strategy of `kind`/`sub` to `new` given the stored `old`.
    fn prepare_update(
        kind: Kind,
        sub: Option<&str>,
        name: &str,
        old: &Value,
        mut new: Value,
    ) -> Result<Value, ApiError> {
        if !new.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request was in an unknown format",
            ));
        }
        check_type_meta(kind, &new)?;
        if let Some(n) = meta_str(&new, "name") {
            if n != name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
        }
        if kind.namespaced() {
            if let (Some(a), Some(b)) = (meta_str(&new, "namespace"), meta_str(old, "namespace")) {
                if a != b {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
            }
        }
        if let Some(rv) = meta_str(&new, "resourceVersion") {
            if Some(rv) != meta_str(old, "resourceVersion") {
                return Err(ApiError::modified(kind, name));
            }
        }
        if let Some(uid) = meta_str(&new, "uid") {
            let cur = meta_str(old, "uid").unwrap_or_default();
            if uid != cur {
                return Err(ApiError::conflict(
                    kind,
                    name,
                    &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {cur}"),
                ));
            }
        }
        if sub == Some("status") {
            // The status subresource changes nothing but status.
            let mut merged = old.clone();
            let status = new.get("status").cloned().unwrap_or_else(|| json!({}));
            merged.as_object_mut().expect("object").insert("status".into(), status);
            return Ok(merged);
        }
        {
            let old_meta = old
                .get("metadata")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let meta = meta_mut(&mut new);
            for f in [
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generateName",
                "resourceVersion",
            ] {
                match old_meta.get(f) {
                    Some(v) => meta.insert(f.to_string(), v.clone()),
                    None => meta.remove(f),
                };
            }
            meta.remove("managedFields");
        }
        set_type_meta(kind, &mut new);
        match kind {
            Kind::Pod
            | Kind::Node
            | Kind::PodDisruptionBudget
            | Kind::PersistentVolumeClaim
            | Kind::PersistentVolume
            | Kind::ResourceClaim
            | Kind::PodGroup
            | Kind::CompositePodGroup => {
                let m = new.as_object_mut().expect("object");
                match old.get("status") {
                    Some(s) => m.insert("status".into(), s.clone()),
                    None => m.remove("status"),
                };
            }
            _ => {}
        }
        if kind == Kind::Pod {
            let mut new_spec = new.get("spec").cloned().unwrap_or(Value::Null);
            // Defaulting applies on update too, so omitted defaulted fields are not changes.
            let mut tmp = json!({"spec": new_spec});
            default_pod(&mut tmp);
            new_spec = tmp["spec"].take();
            let old_spec = old.get("spec").cloned().unwrap_or(Value::Null);
            if let Some((index, gate)) = added_scheduling_gate(&old_spec, &new_spec) {
                return Err(ApiError::invalid(
                    kind,
                    name,
                    &format!("spec.schedulingGates[{index}].name"),
                    "FieldValueForbidden",
                    &format!("Forbidden: only deletion is allowed, but found new scheduling gate '{gate}'"),
                ));
            }
            if mutable_pod_spec_masked(&new_spec) != mutable_pod_spec_masked(&old_spec) {
                return Err(ApiError::invalid(
                    kind,
                    name,
                    "spec",
                    "FieldValueForbidden",
                    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
                ));
            }
            new.as_object_mut().expect("object").insert("spec".into(), new_spec);
        }
        Ok(new)
    }

    /// Commits an update; an object marked for deletion whose finalizers are gone is removed.
    fn commit_update(st: &mut StoreState, key: Key, obj: Value, owners: Ownership, limit: usize) -> Value {
        let finalizers_empty = obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if meta_str(&obj, "deletionTimestamp").is_some() && finalizers_empty {
            st.put(key.clone(), obj, owners, limit);
            return st.remove(&key, limit).expect("just stored");
        }
        st.put(key, obj, owners, limit)
    }

    fn update(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        name: &str,
        sub: Option<&str>,
        new: Value,
        manager: &str,
    ) -> Result<Value, ApiError> {
        let key = Self::key(kind, namespace, name);
        let mut st = self.state.lock();
        let stored = st.get(&key).ok_or_else(|| ApiError::not_found(kind, name))?;
        let old = stored.value(kind);
        let mut owners = stored.owners();
        let new = Self::prepare_update(kind, sub, name, &old, new)?;
        owners.record_update(manager, Some(&old), &new);
        let limit = self.limit();
        Ok(Self::commit_update(&mut st, key, new, owners, limit))
    }

    #[allow(clippy::too_many_arguments)]
    fn patch(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        name: &str,
        sub: Option<&str>,
        content_type: &str,
        body: &Value,
        q: &Query,
        manager: &str,
    ) -> Result<(u16, Value), ApiError> {
        let key = Self::key(kind, namespace, name);
        let limit = self.limit();
        let ct = content_type.split(';').next().unwrap_or_default().trim();
        if ct == "application/apply-patch+yaml" || ct == "application/apply-patch+cbor" {
            let Some(manager) = q.get("fieldManager").filter(|m| !m.is_empty()) else {
                let mut e = ApiError::invalid(
                    kind,
                    "",
                    "fieldManager",
                    "FieldValueRequired",
                    "Required value: is required for apply patch",
                );
                e.message = "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch".into();
                return Err(e);
            };
            let force = q.flag("force");
            check_type_meta(kind, body)?;
            if let Some(n) = meta_str(body, "name") {
                if n != name {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({n}) does not match the name on the URL ({name})"
                    )));
                }
            }
            let mut st = self.state.lock();
            let existing = st.get(&key).map(|s| (s.value(kind), s.owners()));
            let Some((old, mut owners)) = existing else {
                // Server-side apply creates missing objects.
                drop(st);
                let mut owners = Ownership::default();
                let mut obj = Value::Null;
                owners
                    .apply(kind, manager, &mut obj, body, force)
                    .map_err(|e| apply_error(kind, name, e))?;
                meta_mut(&mut obj).insert("name".into(), json!(name));
                let created = self.create(kind, namespace, obj, Origin::Http, manager)?;
                let mut st = self.state.lock();
                if let Some(s) = st.objects.get_mut(&key) {
                    s.owners = owners.pack();
                }
                return Ok((201, created));
            };
            let mut new = old.clone();
            owners
                .apply(kind, manager, &mut new, body, force)
                .map_err(|e| apply_error(kind, name, e))?;
            let new = Self::prepare_update(kind, sub, name, &old, new)?;
            return Ok((200, Self::commit_update(&mut st, key, new, owners, limit)));
        }
        let mut st = self.state.lock();
        let stored = st.get(&key).ok_or_else(|| ApiError::not_found(kind, name))?;
        let old = stored.value(kind);
        let mut owners = stored.owners();
        let mut new = old.clone();
        match ct {
            "application/merge-patch+json" => patch::merge_patch(&mut new, body),
            "application/strategic-merge-patch+json" => patch::strategic_merge(kind, &mut new, body)
                .map_err(ApiError::bad_request)?,
            "application/json-patch+json" => patch::json_patch(&mut new, body).map_err(|e| {
                ApiError::new(422, "Invalid", e)
            })?,
            other => {
                return Err(ApiError::new(
                    415,
                    "UnsupportedMediaType",
                    format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {other:?})"),
                ))
            }
        }
        let new = Self::prepare_update(kind, sub, name, &old, new)?;
        owners.record_update(manager, Some(&old), &new);
        Ok((200, Self::commit_update(&mut st, key, new, owners, limit)))
    }

    fn delete(&self, kind: Kind, namespace: Option<&str>, name: &str, opts: &Value) -> Result<(u16, Value), ApiError> {
        let key = Self::key(kind, namespace, name);
        let limit = self.limit();
        let mut st = self.state.lock();
        let old = st
            .get(&key)
            .map(|s| s.value(kind))
            .ok_or_else(|| ApiError::not_found(kind, name))?;
        if let Some(uid) = opts.pointer("/preconditions/uid").and_then(Value::as_str) {
            let cur = meta_str(&old, "uid").unwrap_or_default();
            if uid != cur {
                return Err(ApiError::conflict(
                    kind,
                    name,
                    &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {cur}"),
                ));
            }
        }
        if let Some(rv) = opts.pointer("/preconditions/resourceVersion").and_then(Value::as_str) {
            let cur = meta_str(&old, "resourceVersion").unwrap_or_default();
            if rv != cur {
                return Err(ApiError::conflict(
                    kind,
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {cur}"
                    ),
                ));
            }
        }
        let has_finalizers = old
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        // Graceful pod deletion (the pod strategy's CheckGracefulDelete): a pod scheduled to a node
        // is only marked, with deletionTimestamp = now + grace, for its kubelet to stop it and
        // delete it again with grace 0; an unscheduled pod, or a grace of 0, goes at once.
        if kind == Kind::Pod
            && old
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty())
        {
            let grace = opts
                .get("gracePeriodSeconds")
                .and_then(Value::as_i64)
                .or_else(|| {
                    old.pointer("/spec/terminationGracePeriodSeconds")
                        .and_then(Value::as_i64)
                })
                .unwrap_or(30)
                .max(0);
            let marked_grace = old
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64);
            if grace > 0 && marked_grace.is_none_or(|g| grace < g) {
                let owners = st.get(&key).map(|s| s.owners()).unwrap_or_default();
                let mut marked = old;
                let until = k8s_openapi::jiff::Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_secs(grace);
                let meta = meta_mut(&mut marked);
                meta.insert(
                    "deletionTimestamp".into(),
                    serde_json::to_value(Time(until)).expect("Time serializes"),
                );
                meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
                return Ok((200, st.put(key, marked, owners, limit)));
            }
            if grace > 0 {
                // Already terminating with a grace no longer than this one: nothing changes.
                return Ok((200, old));
            }
        }
        if has_finalizers {
            if meta_str(&old, "deletionTimestamp").is_some() {
                return Ok((202, old));
            }
            let owners = st.get(&key).map(|s| s.owners()).unwrap_or_default();
            let mut marked = old;
            let meta = meta_mut(&mut marked);
            meta.insert("deletionTimestamp".into(), now_time());
            meta.insert("deletionGracePeriodSeconds".into(), json!(0));
            return Ok((202, st.put(key, marked, owners, limit)));
        }
        Ok((200, st.remove(&key, limit).expect("present")))
    }

    fn bind(&self, namespace: &str, name: &str, binding: &Value) -> Result<Value, ApiError> {
        self.counters.bindings_attempted.fetch_add(1, Ordering::SeqCst);
        let res = self.bind_inner(namespace, name, binding);
        match &res {
            Ok(_) => self.counters.bindings_succeeded.fetch_add(1, Ordering::SeqCst),
            Err(e) if e.code == 409 => self.counters.bindings_conflicted.fetch_add(1, Ordering::SeqCst),
            Err(_) => 0,
        };
        res
    }

    fn bind_inner(&self, namespace: &str, name: &str, binding: &Value) -> Result<Value, ApiError> {
        let binding_details = || json!({"name": name, "kind": "pods/binding"});
        let conflict = |msg: &str| ApiError::conflict_on("pods/binding", binding_details(), name, msg);
        if let Some(kind) = binding.get("kind").and_then(Value::as_str) {
            if kind != "Binding" {
                return Err(ApiError::bad_request(format!(
                    "the body of the request was in an unknown format: expected kind Binding, got {kind}"
                )));
            }
        }
        if let Some(n) = meta_str(binding, "name") {
            if n != name {
                return Err(ApiError::bad_request(
                    "name in URL does not match name in Binding object",
                ));
            }
        }
        let target = binding
            .pointer("/target/name")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                ApiError::new(
                    422,
                    "Invalid",
                    format!("Binding.core \"{name}\" is invalid: target.name: Required value"),
                )
                .details(json!({"name": name, "kind": "Binding", "causes": [
                    {"reason": "FieldValueRequired", "message": "Required value", "field": "target.name"}
                ]}))
            })?;
        if let Some(k) = binding.pointer("/target/kind").and_then(Value::as_str) {
            if !k.is_empty() && k != "Node" {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    format!("Binding.core \"{name}\" is invalid: target.kind: Unsupported value: \"{k}\": supported values: \"Node\", \"\""),
                ));
            }
        }
        let key = Self::key(Kind::Pod, Some(namespace), name);
        let limit = self.limit();
        let mut st = self.state.lock();
        let stored = st.get(&key).ok_or_else(|| ApiError::not_found(Kind::Pod, name))?;
        let mut pod = stored.value(Kind::Pod);
        let owners = stored.owners();
        if let Some(uid) = meta_str(binding, "uid") {
            let cur = meta_str(&pod, "uid").unwrap_or_default();
            if uid != cur {
                return Err(conflict(&format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {cur}"
                )));
            }
        }
        if let Some(rv) = meta_str(binding, "resourceVersion") {
            let cur = meta_str(&pod, "resourceVersion").unwrap_or_default();
            if rv != cur {
                return Err(conflict(&format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {cur}"
                )));
            }
        }
        if meta_str(&pod, "deletionTimestamp").is_some() {
            return Err(conflict(&format!(
                "pod {name} is being deleted, cannot be assigned to a host"
            )));
        }
        if let Some(node) = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            return Err(conflict(&format!("pod {name} is already assigned to node \"{node}\"")));
        }
        if pod
            .pointer("/spec/schedulingGates")
            .and_then(Value::as_array)
            .is_some_and(|g| !g.is_empty())
        {
            return Err(conflict(&format!("pod {name} has non-empty .spec.schedulingGates")));
        }
        pod["spec"]["nodeName"] = json!(target);
        if let Some(annotations) = binding.pointer("/metadata/annotations").and_then(Value::as_object) {
            let meta = meta_mut(&mut pod);
            let a = meta.entry("annotations").or_insert_with(|| json!({}));
            if let Some(a) = a.as_object_mut() {
                for (k, v) in annotations {
                    a.insert(k.clone(), v.clone());
                }
            }
        }
        set_pod_condition(&mut pod, "PodScheduled", "True", None, None);
        st.put(key, pod, owners, limit);
        Ok(success_status(201))
    }

    /// A list, in pages of `limit` when the query sets it (as kube-rs' watcher does, 500 by
    /// default). `continue` is `<resourceVersion>:<namespace>/<name>` of the last item served;
    /// every page reports the first page's resourceVersion. Unlike etcd, a later page shows
    /// objects as they are now, not as of that version; a watch from that version replays the
    /// changes in between, so a lister and watcher still converge.
    ///
    /// A page starts at its continue key (a B-tree range, not a scan from the first object of
    /// the kind) and concatenates the JSON each object was encoded to when written; with
    /// `metadata_only` the items are `PartialObjectMetadata`.
    fn list(&self, filter: &Filter, q: &Query, metadata_only: bool) -> Result<Vec<u8>, ApiError> {
        let limit = match q.get("limit") {
            None | Some("") => None,
            Some(l) => Some(
                l.parse::<usize>()
                    .map_err(|_| ApiError::new(400, "BadRequest", format!("limit: invalid value {l:?}")))?,
            ),
        }
        .filter(|l| *l > 0);
        let cont = q.get("continue").filter(|c| !c.is_empty());
        let st = self.state.lock();
        let (rv, after) = match cont {
            None => (st.rv, None),
            Some(c) => {
                let invalid = || ApiError::new(400, "BadRequest", format!("continue key is not valid: {c:?}"));
                let (rv, key) = c.split_once(':').ok_or_else(invalid)?;
                let (namespace, name) = key.split_once('/').ok_or_else(invalid)?;
                let rv = rv.parse::<u64>().map_err(|_| invalid())?;
                let key = Key {
                    kind: filter.kind,
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                };
                (rv, Some(key))
            }
        };
        let matching = st
            .of_kind_after(filter.kind, after.as_ref())
            .filter(|(k, s)| filter.matches_stored(k, s));
        let mut items = Vec::new();
        let mut last = None;
        let mut more = false;
        for (k, s) in matching {
            if limit.is_some_and(|l| items.len() == l) {
                more = true;
                break;
            }
            items.push(&s.item);
            last = Some(k);
        }
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if let (true, Some(k)) = (more, last) {
            metadata["continue"] = json!(format!("{rv}:{}/{}", k.namespace, k.name));
        }
        if metadata_only {
            let items: Vec<Value> = items
                .into_iter()
                .map(|i| partial_metadata(&serde_json::from_slice(i).expect("stored JSON decodes")))
                .collect();
            let list = json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": metadata,
                "items": items,
            });
            return Ok(serde_json::to_vec(&list).expect("JSON values serialize"));
        }
        // The items as they were encoded when written, concatenated.
        let head = json!({
            "kind": format!("{}List", filter.kind.kind_name()),
            "apiVersion": filter.kind.api_version(),
            "metadata": metadata,
        });
        let mut body = serde_json::to_vec(&head).expect("JSON values serialize");
        body.pop(); // the closing brace
        body.reserve(items.iter().map(|i| i.len() + 1).sum::<usize>() + 16);
        body.extend_from_slice(b",\"items\":[");
        for (n, item) in items.into_iter().enumerate() {
            if n > 0 {
                body.push(b',');
            }
            body.extend_from_slice(item);
        }
        body.extend_from_slice(b"]}");
        Ok(body)
    }

    fn delete_collection(&self, filter: &Filter) -> Value {
        let limit = self.limit();
        let mut st = self.state.lock();
        let keys: Vec<Key> = st
            .of_kind(filter.kind)
            .filter(|(k, s)| filter.matches_stored(k, s))
            .map(|(k, _)| k.clone())
            .collect();
        let mut items = Vec::new();
        for k in keys {
            if let Some(o) = st.remove(&k, limit) {
                items.push(strip_type_meta(o));
            }
        }
        json!({
            "kind": format!("{}List", filter.kind.kind_name()),
            "apiVersion": filter.kind.api_version(),
            "metadata": {"resourceVersion": st.rv.to_string()},
            "items": items,
        })
    }

    /// Opens a watch: replays history (or the current state) and registers for live changes.
    fn open_watch(self: &Arc<Self>, filter: Filter, q: &Query, metadata_only: bool) -> Result<Response, ApiError> {
        let rv_param = q.get("resourceVersion").unwrap_or_default().to_string();
        let bookmarks = q.flag("allowWatchBookmarks");
        let send_initial = q.flag("sendInitialEvents");
        let timeout = match q.get("timeoutSeconds") {
            Some(t) => t
                .parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {t:?}")))?,
            None => 0,
        };
        // Like the API server, an absent or zero timeout means the server's default.
        let timeout = match timeout {
            0 => self.config.default_watch_timeout,
            t => Duration::from_secs(t),
        };
        let requested: Option<u64> = if rv_param.is_empty() || rv_param == "0" {
            None
        } else {
            Some(
                rv_param
                    .parse()
                    .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv_param:?}")))?,
            )
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let mut initial = Vec::new();
        let start_rv;
        let mut id = 0;
        {
            let mut st = self.state.lock();
            match requested {
                None => {
                    for (k, s) in st.of_kind(filter.kind) {
                        if filter.matches_stored(k, s) {
                            initial.push(watch_event("ADDED", &s.value(filter.kind)));
                        }
                    }
                    start_rv = st.rv;
                }
                Some(n) if n < st.compacted_rv => {
                    let status = ApiError::new(
                        410,
                        "Expired",
                        format!("too old resource version: {n} ({})", st.compacted_rv),
                    );
                    initial.push(watch_event("ERROR", &status.to_json()));
                    self.counters.watches_expired.fetch_add(1, Ordering::SeqCst);
                    start_rv = n;
                }
                Some(n) => {
                    let mut last = n;
                    for ch in st.history.iter().filter(|c| c.rv > n && c.kind == filter.kind) {
                        last = ch.rv;
                        if let Some(ev) = filter.to_event(ch) {
                            initial.push(ev);
                        }
                    }
                    start_rv = last;
                }
            }
            let expired = matches!(requested, Some(n) if n < st.compacted_rv);
            if !expired {
                id = st.next_watcher_id;
                st.next_watcher_id += 1;
                st.watchers.push(WatcherReg {
                    id,
                    kind: filter.kind,
                    tx,
                });
            }
        }
        if send_initial && requested.is_none() && bookmarks {
            initial.push(bookmark(filter.kind, start_rv, true));
        }
        self.counters.watches_opened.fetch_add(1, Ordering::SeqCst);
        let (out_tx, out_rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
        let task = WatchTask {
            inner: self.clone(),
            id,
            filter,
            rx: (id != 0).then_some(rx),
            out: out_tx,
            last_rv: start_rv,
            bookmarks,
            timeout,
            metadata_only,
        };
        self.counters.active_watches.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(task.run(initial));
        let mut r = Response::new(Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(out_rx)));
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Ok(r)
    }

    fn forget_watcher(&self, id: u64) {
        self.state.lock().watchers.retain(|w| w.id != id);
    }
}

fn apply_error(kind: Kind, name: &str, e: ApplyError) -> ApiError {
    match e {
        ApplyError::Invalid(msg) => ApiError::new(422, "Invalid", msg),
        ApplyError::Conflicts(conflicts) => {
            let n = conflicts.len();
            let api_version = kind.api_version();
            let lines: Vec<String> = conflicts
                .iter()
                .map(|(m, p)| format!("conflict with \"{m}\" using {api_version}: .{p}"))
                .collect();
            let message = if n == 1 {
                format!("Apply failed with 1 conflict: {}", lines[0])
            } else {
                format!("Apply failed with {n} conflicts: {}", lines.join("\n"))
            };
            let causes: Vec<Value> = conflicts
                .iter()
                .map(|(m, p)| {
                    json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{m}\" using {api_version}"), "field": format!(".{p}")})
                })
                .collect();
            let mut d = kind.details(name);
            d["causes"] = json!(causes);
            ApiError::new(409, "Conflict", message).details(d)
        }
    }
}

fn check_type_meta(kind: Kind, obj: &Value) -> Result<(), ApiError> {
    let k = obj.get("kind").and_then(Value::as_str).filter(|s| !s.is_empty());
    let av = obj.get("apiVersion").and_then(Value::as_str).filter(|s| !s.is_empty());
    if k.is_some_and(|k| k != kind.kind_name()) || av.is_some_and(|a| a != kind.api_version()) {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({}) or kind ({}) does not match {}",
            av.unwrap_or_default(),
            kind.api_version(),
            k.unwrap_or_default(),
            kind.kind_name()
        )));
    }
    Ok(())
}

fn set_type_meta(kind: Kind, obj: &mut Value) {
    let m = obj.as_object_mut().expect("object");
    m.insert("apiVersion".into(), json!(kind.api_version()));
    m.insert("kind".into(), json!(kind.kind_name()));
}

/// Sets a pod condition like `podutil.UpdatePodCondition` (transition time moves on change).
fn set_pod_condition(pod: &mut Value, typ: &str, status: &str, reason: Option<&str>, message: Option<&str>) {
    let m = pod.as_object_mut().expect("object");
    let st = m.entry("status").or_insert_with(|| json!({}));
    if !st.is_object() {
        *st = json!({});
    }
    let conds = st
        .as_object_mut()
        .expect("object")
        .entry("conditions")
        .or_insert_with(|| json!([]));
    if !conds.is_array() {
        *conds = json!([]);
    }
    let list = conds.as_array_mut().expect("array");
    let mut cond = json!({"type": typ, "status": status, "lastProbeTime": null, "lastTransitionTime": now_time()});
    if let Some(r) = reason {
        cond["reason"] = json!(r);
    }
    if let Some(msg) = message {
        cond["message"] = json!(msg);
    }
    match list
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(typ))
    {
        Some(existing) => {
            if existing.get("status").and_then(Value::as_str) == Some(status) {
                cond["lastTransitionTime"] = existing.get("lastTransitionTime").cloned().unwrap_or(Value::Null);
            }
            *existing = cond;
        }
        None => list.push(cond),
    }
}

/// Resolves once the shutdown flag is set (or its sender is gone).
async fn wait_true(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

fn bookmark(kind: Kind, rv: u64, initial_end: bool) -> Value {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    watch_event(
        "BOOKMARK",
        &json!({"kind": kind.kind_name(), "apiVersion": kind.api_version(), "metadata": meta}),
    )
}

/// The `meta.k8s.io/v1` `PartialObjectMetadata` view of an object.
fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({}))})
}

fn line(ev: &Value) -> Bytes {
    let mut v = serde_json::to_vec(ev).expect("JSON values serialize");
    v.push(b'\n');
    Bytes::from(v)
}

/// The task feeding one watch response body.
struct WatchTask {
    inner: Arc<Inner>,
    id: u64,
    filter: Filter,
    rx: Option<mpsc::UnboundedReceiver<Arc<Change>>>,
    out: mpsc::Sender<Result<Bytes, std::io::Error>>,
    last_rv: u64,
    bookmarks: bool,
    timeout: Duration,
    metadata_only: bool,
}

impl WatchTask {
    async fn send(&self, ev: &Value) -> bool {
        let bytes = if self.metadata_only && ev["type"] != "ERROR" {
            line(&json!({"type": ev["type"], "object": partial_metadata(&ev["object"])}))
        } else {
            line(ev)
        };
        self.out.send(Ok(bytes)).await.is_ok()
    }

    async fn handle_change(&mut self, ch: &Change) -> bool {
        self.last_rv = self.last_rv.max(ch.rv);
        match self.filter.to_event(ch) {
            Some(ev) => self.send(&ev).await,
            None => true,
        }
    }

    async fn run(mut self, initial: Vec<Value>) {
        let mut drop_rx = self.inner.drop_tx.subscribe();
        let mut shutdown_rx = self.inner.shutdown_tx.subscribe();
        'stream: {
            for ev in &initial {
                if !self.send(ev).await {
                    break 'stream;
                }
            }
            let Some(mut rx) = self.rx.take() else {
                break 'stream; // expired: the ERROR event was the whole stream
            };
            let deadline = tokio::time::sleep(self.timeout);
            tokio::pin!(deadline);
            let period = self.inner.config.bookmark_interval.max(Duration::from_millis(10));
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    biased;
                    _ = drop_rx.changed() => {
                        // Abort the response mid-stream, like a dropped connection.
                        let _ = self.out.send(Err(std::io::Error::other("watch dropped by test"))).await;
                        break;
                    }
                    () = wait_true(&mut shutdown_rx) => break,
                    () = &mut deadline => break,
                    () = self.out.closed() => break,
                    ch = rx.recv() => match ch {
                        Some(ch) => if !self.handle_change(&ch).await { break },
                        None => break,
                    },
                    _ = tick.tick(), if self.bookmarks => {
                        // Deliver everything already queued so the bookmark does not skip events.
                        while let Ok(ch) = rx.try_recv() {
                            if !self.handle_change(&ch).await {
                                break 'stream;
                            }
                        }
                        if !self.send(&bookmark(self.filter.kind, self.last_rv, false)).await {
                            break;
                        }
                    }
                }
            }
        }
        if self.id != 0 {
            self.inner.forget_watcher(self.id);
        }
        self.inner.counters.active_watches.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Inner {
    fn take_faults(&self, method: &str, target: &str, is_watch: bool) -> (Option<Duration>, Option<Failure>) {
        let mut faults = self.faults.lock();
        let mut delay = None;
        let mut fail = None;
        for f in faults.iter_mut() {
            if f.remaining == 0 || !f.matcher.matches_parts(method, target, is_watch) {
                continue;
            }
            match &f.action {
                FaultAction::Delay(d) if delay.is_none() => {
                    delay = Some(*d);
                    f.remaining -= 1;
                }
                FaultAction::Fail(x) if fail.is_none() => {
                    fail = Some(x.clone());
                    f.remaining -= 1;
                }
                _ => {}
            }
        }
        faults.retain(|f| f.remaining > 0);
        (delay, fail)
    }

    async fn process(self: Arc<Self>, req: Incoming) -> Response {
        let q = Query::parse(&req.query);
        let is_watch = req.method == "GET" && q.flag("watch");
        let target = req.path_and_query();
        let (delay, failure) = self.take_faults(&req.method, &target, is_watch);
        if let Some(d) = delay {
            self.counters.delayed.fetch_add(1, Ordering::SeqCst);
            let mut shutdown = self.shutdown_tx.subscribe();
            tokio::select! {
                () = tokio::time::sleep(d) => {}
                () = wait_true(&mut shutdown) => {}
            }
        }
        let resp = match failure {
            Some(f) => {
                let e = ApiError::new(
                    f.code,
                    f.reason.as_deref().unwrap_or(reason_for(f.code)),
                    f.message
                        .clone()
                        .unwrap_or_else(|| format!("injected failure ({}) for {} {}", f.code, req.method, req.path)),
                );
                let mut r = error_response(&e);
                if let Some(s) = f.retry_after_seconds {
                    r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(s));
                }
                r
            }
            None => match self.route(&req, &q, is_watch) {
                Ok(r) => r,
                Err(e) => error_response(&e),
            },
        };
        if delay.is_some() {
            self.counters.delayed.fetch_sub(1, Ordering::SeqCst);
        }
        self.log.lock().push(RequestRecord {
            method: req.method.clone(),
            path: req.path.clone(),
            path_and_query: target,
            status: resp.status().as_u16(),
            watch: is_watch,
            content_type: req.content_type.clone(),
            body: serde_json::from_slice(&req.body).ok(),
        });
        resp
    }

    /// Whether the resource is served ([`FakeApiServerConfig::serve_pod_groups`]).
    fn serves(&self, r: &ResourceInfo) -> bool {
        !matches!(r.kind, Kind::PodGroup | Kind::CompositePodGroup) || self.config.serve_pod_groups
    }

    fn route(self: &Arc<Self>, req: &Incoming, q: &Query, is_watch: bool) -> Result<Response, ApiError> {
        let method_not_allowed = || {
            ApiError::new(
                405,
                "MethodNotAllowed",
                format!(
                    "the server does not allow this method on the requested resource ({})",
                    req.method
                ),
            )
        };
        let ok = |code: u16, v: Value| {
            // Metadata-only clients get PartialObjectMetadata(List) instead of full objects.
            let v = match v.get("kind").and_then(Value::as_str) {
                Some(k)
                    if req.metadata_only && k.ends_with("List") && k != "APIResourceList" && k != "APIGroupList" =>
                {
                    let items: Vec<Value> = v["items"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(partial_metadata)
                        .collect();
                    json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                           "metadata": v["metadata"], "items": items})
                }
                Some(k) if req.metadata_only && k != "Status" && RESOURCES.iter().any(|r| r.kind_name == k) => {
                    partial_metadata(&v)
                }
                _ => v,
            };
            Ok(json_response(code, &v))
        };
        match parse_target(&req.path, |r| self.serves(r))? {
            Target::Version => ok(
                200,
                json!({
                    "major": "1", "minor": "34", "gitVersion": "v1.34.0-fake", "gitCommit": "fake",
                    "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.24",
                    "compiler": "gc", "platform": "linux/amd64"
                }),
            ),
            Target::Health => {
                let mut r = Response::new(Body::from("ok"));
                r.headers_mut()
                    .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
                Ok(r)
            }
            Target::CoreVersions => ok(
                200,
                json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": self.addr.to_string()}
                ]}),
            ),
            Target::Groups => {
                let mut groups: Vec<Value> = Vec::new();
                for r in RESOURCES.iter().filter(|r| !r.group.is_empty() && self.serves(r)) {
                    let gv = json!({"groupVersion": format!("{}/{}", r.group, r.version), "version": r.version});
                    match groups.iter_mut().find(|g| g["name"] == r.group) {
                        None => groups.push(json!({"name": r.group, "versions": [gv.clone()], "preferredVersion": gv})),
                        Some(g) => {
                            if let Some(versions) = g["versions"].as_array_mut().filter(|v| !v.contains(&gv)) {
                                versions.push(gv);
                            }
                        }
                    }
                }
                ok(
                    200,
                    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
                )
            }
            Target::Resources(group, version) => {
                let mut resources = Vec::new();
                for r in RESOURCES
                    .iter()
                    .filter(|r| r.group == group && r.version == version && self.serves(r))
                {
                    resources.push(json!({
                        "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
                        "kind": r.kind_name,
                        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
                    }));
                    for sub in r.subresources {
                        let (kind, verbs) = if *sub == "binding" {
                            ("Binding", json!(["create"]))
                        } else {
                            (r.kind_name, json!(["get", "patch", "update"]))
                        };
                        resources.push(json!({
                            "name": format!("{}/{sub}", r.plural), "singularName": "", "namespaced": r.namespaced,
                            "kind": kind, "verbs": verbs
                        }));
                    }
                }
                let gv = if group.is_empty() {
                    version.to_string()
                } else {
                    format!("{group}/{version}")
                };
                ok(
                    200,
                    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
                )
            }
            Target::Collection { kind, namespace } => {
                let filter = Filter::from_query(kind, namespace.clone(), q)?;
                match req.method.as_str() {
                    "GET" if is_watch => self.open_watch(filter, q, req.metadata_only),
                    "GET" => {
                        let body = self.list(&filter, q, req.metadata_only)?;
                        Ok(json_bytes_response(200, body))
                    }
                    "POST" => {
                        if kind.namespaced() && namespace.is_none() {
                            return Err(method_not_allowed());
                        }
                        let obj = self.create(
                            kind,
                            namespace.as_deref(),
                            req.json_body()?,
                            Origin::Http,
                            &req.manager(q),
                        )?;
                        ok(201, obj)
                    }
                    "DELETE" => ok(200, self.delete_collection(&filter)),
                    _ => Err(method_not_allowed()),
                }
            }
            Target::Item {
                kind,
                namespace,
                name,
                sub,
            } => {
                let ns = namespace.as_deref();
                let sub = sub.as_deref();
                match (req.method.as_str(), sub) {
                    ("GET", None | Some("status")) => {
                        let st = self.state.lock();
                        let s = st
                            .get(&Self::key(kind, ns, &name))
                            .ok_or_else(|| ApiError::not_found(kind, &name))?;
                        ok(200, s.value(kind))
                    }
                    ("PUT", None | Some("status")) => {
                        let obj = self.update(kind, ns, &name, sub, req.json_body()?, &req.manager(q))?;
                        ok(200, obj)
                    }
                    ("PATCH", None | Some("status")) => {
                        let ct = req.content_type.clone().unwrap_or_default();
                        let (code, obj) =
                            self.patch(kind, ns, &name, sub, &ct, &req.json_body()?, q, &req.manager(q))?;
                        ok(code, obj)
                    }
                    ("DELETE", None) => {
                        let opts = if req.body.is_empty() {
                            Value::Null
                        } else {
                            req.json_body()?
                        };
                        let (code, obj) = self.delete(kind, ns, &name, &opts)?;
                        ok(code, obj)
                    }
                    ("POST", Some("binding")) => {
                        let v = self.bind(ns.unwrap_or("default"), &name, &req.json_body()?)?;
                        ok(201, v)
                    }
                    _ => Err(method_not_allowed()),
                }
            }
        }
    }
}

async fn handle(AxumState(inner): AxumState<Arc<Inner>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, 64 << 20).await {
        Ok(b) => b,
        Err(e) => return error_response(&ApiError::bad_request(format!("reading the request body: {e}"))),
    };
    let header_str = |h: header::HeaderName| parts.headers.get(h).and_then(|v| v.to_str().ok()).map(str::to_string);
    let incoming = Incoming {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().unwrap_or_default().to_string(),
        content_type: header_str(header::CONTENT_TYPE),
        user_agent: header_str(header::USER_AGENT),
        metadata_only: header_str(header::ACCEPT).is_some_and(|a| a.contains("as=PartialObjectMetadata")),
        body,
    };
    // Processing runs in its own task so that a client giving up (e.g. on a delayed request)
    // does not cancel it: the request still takes effect, as on a real server.
    match tokio::spawn(inner.process(incoming)).await {
        Ok(r) => r,
        Err(e) => error_response(&ApiError::new(500, "InternalError", format!("handler panicked: {e}"))),
    }
}

impl FakeApiServer {
    /// Starts a server on `127.0.0.1` (random port) with the default configuration.
    pub async fn start() -> FakeApiServer {
        Self::start_with(FakeApiServerConfig::default()).await
    }

    /// Starts a server on `127.0.0.1` (random port) with `config`.
    pub async fn start_with(config: FakeApiServerConfig) -> FakeApiServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let (drop_tx, _) = watch::channel(0u64);
        let (shutdown_tx, _) = watch::channel(false);
        let inner = Arc::new(Inner {
            state: Mutex::new(StoreState::new()),
            config,
            log: Mutex::new(Vec::new()),
            faults: Mutex::new(Vec::new()),
            counters: Counters::default(),
            drop_tx,
            shutdown_tx,
            addr,
        });
        let app = Router::new().fallback(handle).with_state(inner.clone());
        let mut shutdown_rx = inner.shutdown_tx.subscribe();
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = shutdown_rx.wait_for(|s| *s).await;
                })
                .await;
        });
        FakeApiServer {
            inner,
            task: Some(task),
        }
    }

    /// The base URL, e.g. `http://127.0.0.1:39457`.
    pub fn url(&self) -> String {
        format!("http://{}", self.inner.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    /// A `kube::Config` for this server (default namespace `default`).
    pub fn kube_config(&self) -> kube::Config {
        kube::Config::new(self.url().parse().expect("valid URL"))
    }

    /// A new `kube::Client` talking to this server.
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.kube_config()).expect("build kube client")
    }

    /// Stops accepting connections, ends every watch and waits (up to 5 s) for the server task.
    pub async fn shutdown(mut self) {
        self.inner.shutdown_tx.send_replace(true);
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), task).await.is_err() {
                abort.abort();
            }
        }
    }

    fn create_typed<T: Serialize + DeserializeOwned>(&self, kind: Kind, obj: &T) -> T {
        let v = untyped(obj);
        let ns = meta_str(&v, "namespace").map(str::to_string);
        let created = self
            .inner
            .create(kind, ns.as_deref(), v, Origin::Test, TEST_MANAGER)
            .unwrap_or_else(|e| panic!("create {kind:?}: {}", e.message));
        typed(created)
    }

    /// Replaces a stored object wholesale (spec, status and metadata), bumping its resourceVersion.
    fn replace_raw(&self, kind: Kind, mut obj: Value) -> Value {
        let name = meta_str(&obj, "name")
            .unwrap_or_else(|| panic!("{kind:?} without metadata.name"))
            .to_string();
        let ns = meta_str(&obj, "namespace").map(str::to_string);
        let key = Inner::key(kind, ns.as_deref(), &name);
        let limit = self.inner.limit();
        let mut st = self.inner.state.lock();
        let stored = st
            .get(&key)
            .unwrap_or_else(|| panic!("{kind:?} {}/{name} does not exist", key.namespace));
        let old = stored.value(kind);
        let mut owners = stored.owners();
        {
            let old_meta = old
                .get("metadata")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let meta = meta_mut(&mut obj);
            for f in ["uid", "creationTimestamp", "namespace"] {
                if !meta.contains_key(f) {
                    if let Some(v) = old_meta.get(f) {
                        meta.insert(f.to_string(), v.clone());
                    }
                }
            }
            meta.remove("resourceVersion");
        }
        set_type_meta(kind, &mut obj);
        owners.record_update(TEST_MANAGER, Some(&old), &obj);
        Inner::commit_update(&mut st, key, obj, owners, limit)
    }

    fn get_typed<T: DeserializeOwned>(&self, kind: Kind, namespace: Option<&str>, name: &str) -> Option<T> {
        self.get_raw(kind, namespace, name).map(typed)
    }

    /// The stored JSON of an object (`namespace` is ignored for cluster-scoped kinds).
    pub fn get_raw(&self, kind: Kind, namespace: Option<&str>, name: &str) -> Option<Value> {
        let st = self.inner.state.lock();
        st.get(&Inner::key(kind, namespace, name)).map(|s| s.value(kind))
    }

    /// Every stored object of `kind`, ordered by namespace and name.
    pub fn list_raw(&self, kind: Kind) -> Vec<Value> {
        let st = self.inner.state.lock();
        st.of_kind(kind).map(|(_, s)| s.value(kind)).collect()
    }

    /// Creates any object from JSON through the create strategy, like a test-side POST.
    pub fn create_raw(&self, kind: Kind, obj: Value) -> Value {
        let ns = meta_str(&obj, "namespace").map(str::to_string);
        self.inner
            .create(kind, ns.as_deref(), obj, Origin::Test, TEST_MANAGER)
            .unwrap_or_else(|e| panic!("create {kind:?}: {}", e.message))
    }

    /// Deletes any object at once (finalizers are ignored); returns its last state.
    pub fn delete_raw(&self, kind: Kind, namespace: Option<&str>, name: &str) -> Option<Value> {
        let limit = self.inner.limit();
        self.inner
            .state
            .lock()
            .remove(&Inner::key(kind, namespace, name), limit)
    }

    /// Field managers of an object and the leaf fields each owns (`name/Apply` or `name/Update`).
    pub fn field_managers(&self, kind: Kind, namespace: Option<&str>, name: &str) -> BTreeMap<String, Vec<String>> {
        let st = self.inner.state.lock();
        st.get(&Inner::key(kind, namespace, name))
            .map(|s| s.owners().managers())
            .unwrap_or_default()
    }

    /// Creates a node (server assigns uid, resourceVersion, creationTimestamp); panics if it exists.
    pub fn create_node(&self, node: Node) -> Node {
        self.create_typed(Kind::Node, &node)
    }

    /// The node named `name`, if stored.
    pub fn get_node(&self, name: &str) -> Option<Node> {
        self.get_typed(Kind::Node, None, name)
    }

    /// Every node, ordered by name.
    pub fn nodes(&self) -> Vec<Node> {
        self.list_raw(Kind::Node).into_iter().map(typed).collect()
    }

    /// Replaces a node (spec and status); panics if it does not exist.
    pub fn update_node(&self, node: Node) -> Node {
        typed(self.replace_raw(Kind::Node, untyped(&node)))
    }

    /// Edits a node in place with `f`; panics if it does not exist.
    pub fn modify_node(&self, name: &str, f: impl FnOnce(&mut Node)) -> Node {
        let mut node = self
            .get_node(name)
            .unwrap_or_else(|| panic!("node {name} does not exist"));
        f(&mut node);
        self.update_node(node)
    }

    /// Deletes a node; returns its last state.
    pub fn delete_node(&self, name: &str) -> Option<Node> {
        self.delete_raw(Kind::Node, None, name).map(typed)
    }

    /// Creates a pod (namespace defaults to `default`; its status is kept, phase defaults to `Pending`).
    pub fn create_pod(&self, pod: Pod) -> Pod {
        self.create_typed(Kind::Pod, &pod)
    }

    /// The pod `namespace/name`, if stored.
    pub fn get_pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        self.get_typed(Kind::Pod, Some(namespace), name)
    }

    /// Every pod, ordered by namespace and name.
    pub fn pods(&self) -> Vec<Pod> {
        self.list_raw(Kind::Pod).into_iter().map(typed).collect()
    }

    /// Replaces a pod (any field, including spec.nodeName and status); panics if it does not exist.
    pub fn update_pod(&self, pod: Pod) -> Pod {
        typed(self.replace_raw(Kind::Pod, untyped(&pod)))
    }

    /// Edits a pod in place with `f`; panics if it does not exist.
    pub fn modify_pod(&self, namespace: &str, name: &str, f: impl FnOnce(&mut Pod)) -> Pod {
        let mut pod = self
            .get_pod(namespace, name)
            .unwrap_or_else(|| panic!("pod {namespace}/{name} does not exist"));
        f(&mut pod);
        self.update_pod(pod)
    }

    /// Deletes a pod at once (no grace period, finalizers ignored); returns its last state.
    pub fn delete_pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        self.delete_raw(Kind::Pod, Some(namespace), name).map(typed)
    }

    /// Creates a namespace object (its labels feed pod affinity namespace selectors).
    pub fn create_namespace(&self, ns: k8s_openapi::api::core::v1::Namespace) -> k8s_openapi::api::core::v1::Namespace {
        self.create_typed(Kind::Namespace, &ns)
    }

    /// Creates a PodDisruptionBudget with its `status` as given (the test plays the disruption
    /// controller); panics if it exists.
    pub fn create_pdb(
        &self,
        pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget,
    ) -> k8s_openapi::api::policy::v1::PodDisruptionBudget {
        self.create_typed(Kind::PodDisruptionBudget, &pdb)
    }

    /// Replaces a PodDisruptionBudget whole, `status` included, as the disruption controller's
    /// status update does; panics if it does not exist.
    pub fn update_pdb(
        &self,
        pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget,
    ) -> k8s_openapi::api::policy::v1::PodDisruptionBudget {
        typed(self.replace_raw(Kind::PodDisruptionBudget, untyped(&pdb)))
    }

    /// Replaces a namespace object (its labels); panics if it does not exist.
    pub fn update_namespace(&self, ns: k8s_openapi::api::core::v1::Namespace) -> k8s_openapi::api::core::v1::Namespace {
        typed(self.replace_raw(Kind::Namespace, untyped(&ns)))
    }

    /// Creates a lease (namespace defaults to `default`); panics if it exists.
    pub fn create_lease(&self, lease: Lease) -> Lease {
        self.create_typed(Kind::Lease, &lease)
    }

    /// The lease `namespace/name`, if stored.
    pub fn get_lease(&self, namespace: &str, name: &str) -> Option<Lease> {
        self.get_typed(Kind::Lease, Some(namespace), name)
    }

    /// Every lease, ordered by namespace and name.
    pub fn leases(&self) -> Vec<Lease> {
        self.list_raw(Kind::Lease).into_iter().map(typed).collect()
    }

    /// Every stored core/v1 Event.
    pub fn core_events(&self) -> Vec<CoreEvent> {
        self.list_raw(Kind::CoreEvent).into_iter().map(typed).collect()
    }

    /// Every stored events.k8s.io/v1 Event.
    pub fn events_v1(&self) -> Vec<EventV1> {
        self.list_raw(Kind::Event).into_iter().map(typed).collect()
    }

    /// Every stored Event of both APIs, summarised (core/v1 first).
    pub fn events(&self) -> Vec<EventRecord> {
        let s = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
        let mut out = Vec::new();
        for e in self.list_raw(Kind::CoreEvent) {
            out.push(EventRecord {
                api_version: "v1".into(),
                namespace: s(&e, "/metadata/namespace").unwrap_or_default(),
                name: s(&e, "/metadata/name").unwrap_or_default(),
                event_type: s(&e, "/type"),
                reason: s(&e, "/reason"),
                message: s(&e, "/message"),
                action: s(&e, "/action"),
                regarding_kind: s(&e, "/involvedObject/kind"),
                regarding_namespace: s(&e, "/involvedObject/namespace"),
                regarding_name: s(&e, "/involvedObject/name"),
                reporting_controller: s(&e, "/source/component").or_else(|| s(&e, "/reportingComponent")),
            });
        }
        for e in self.list_raw(Kind::Event) {
            out.push(EventRecord {
                api_version: "events.k8s.io/v1".into(),
                namespace: s(&e, "/metadata/namespace").unwrap_or_default(),
                name: s(&e, "/metadata/name").unwrap_or_default(),
                event_type: s(&e, "/type"),
                reason: s(&e, "/reason"),
                message: s(&e, "/note"),
                action: s(&e, "/action"),
                regarding_kind: s(&e, "/regarding/kind"),
                regarding_namespace: s(&e, "/regarding/namespace"),
                regarding_name: s(&e, "/regarding/name"),
                reporting_controller: s(&e, "/reportingController"),
            });
        }
        out
    }

    /// The current (latest issued) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.inner.state.lock().rv
    }

    /// Every answered request, in completion order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.inner.log.lock().clone()
    }

    /// The answered requests that `m` matches.
    pub fn requests_matching(&self, m: &RequestMatcher) -> Vec<RequestRecord> {
        self.inner.log.lock().iter().filter(|r| m.matches(r)).cloned().collect()
    }

    /// How many answered requests `m` matches.
    pub fn count_requests(&self, m: &RequestMatcher) -> usize {
        self.inner.log.lock().iter().filter(|r| m.matches(r)).count()
    }

    /// Empties the request log.
    pub fn clear_requests(&self) {
        self.inner.log.lock().clear();
    }

    /// Answers the next `n` requests matching `m` with `code` and a `Status` body, without effect.
    pub fn fail_next(&self, n: usize, m: RequestMatcher, code: u16) {
        self.fail_next_with(n, m, Failure::new(code));
    }

    /// Answers the next `n` requests matching `m` with `failure`, without effect.
    pub fn fail_next_with(&self, n: usize, m: RequestMatcher, failure: Failure) {
        self.inner.faults.lock().push(Fault {
            remaining: n,
            matcher: m,
            action: FaultAction::Fail(failure),
        });
    }

    /// Holds the next `n` requests matching `m` for `d` before processing them (they still take
    /// effect even if the client gave up meanwhile).
    pub fn delay_next(&self, n: usize, m: RequestMatcher, d: Duration) {
        self.inner.faults.lock().push(Fault {
            remaining: n,
            matcher: m,
            action: FaultAction::Delay(d),
        });
    }

    /// How many requests an injected delay holds right now (arrived, not yet processed).
    pub fn requests_delayed(&self) -> u64 {
        self.inner.counters.delayed.load(Ordering::SeqCst)
    }

    /// Removes every pending injected failure and delay.
    pub fn clear_faults(&self) {
        self.inner.faults.lock().clear();
    }

    /// Aborts every open watch stream mid-response (the client sees the connection break).
    pub fn drop_watches(&self) {
        self.inner.drop_tx.send_modify(|g| *g += 1);
    }

    /// Forgets the change history: a watch from any resourceVersion issued so far gets a 410
    /// `Expired` ERROR event (so watchers relist); lists return a fresh, watchable version.
    pub fn compact(&self) {
        let mut st = self.inner.state.lock();
        st.rv += 1;
        st.compacted_rv = st.rv;
        st.history.clear();
    }

    /// How many `pods/binding` POSTs were processed (injected failures excluded).
    pub fn bindings_attempted(&self) -> u64 {
        self.inner.counters.bindings_attempted.load(Ordering::SeqCst)
    }

    /// How many bindings succeeded.
    pub fn bindings_succeeded(&self) -> u64 {
        self.inner.counters.bindings_succeeded.load(Ordering::SeqCst)
    }

    /// How many bindings were refused with 409 Conflict.
    pub fn bindings_conflicted(&self) -> u64 {
        self.inner.counters.bindings_conflicted.load(Ordering::SeqCst)
    }

    /// How many watch streams were opened so far.
    pub fn watches_opened(&self) -> u64 {
        self.inner.counters.watches_opened.load(Ordering::SeqCst)
    }

    /// How many watches were answered with a 410 `Expired` ERROR event.
    pub fn watches_expired(&self) -> u64 {
        self.inner.counters.watches_expired.load(Ordering::SeqCst)
    }

    /// How many watch streams are open now.
    pub fn active_watches(&self) -> u64 {
        self.inner.counters.active_watches.load(Ordering::SeqCst)
    }

    /// Polls `pred` every 10 ms until it holds or `timeout` passes; returns whether it held.
    pub async fn wait_until(&self, timeout: Duration, mut pred: impl FnMut(&Self) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if pred(self) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.inner.shutdown_tx.send_replace(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
