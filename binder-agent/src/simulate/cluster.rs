//! The in-memory cluster standing in for the API server.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::resource::v1::ResourceClaim;
use parking_lot::Mutex;
use placement_scheduler::proto;
use prost::Message as _;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::api::{scheduled_message, ApiError, ClaimRef, ClaimWrite, ClusterApi, PodGroupCondition, PodRef, Preemptor};
use crate::binder::{Binder, ClusterEvent};
use crate::projection::{Owner, PodInfo, TrackedKey, TrackedObject};

use super::config::*;
use super::latency::Recorder;
use super::workload::mix;

/// What the in-memory cluster knows of one pod.
#[derive(Debug, Clone)]
pub struct PodRecord {
    /// The pod (node_name set once bound).
    pub info: PodInfo,
    /// Whether the binder was asked to schedule it (it was not bound when the run began).
    pub pending: bool,
    /// Binding requests received.
    pub bind_calls: u32,
    /// Bindings applied (at most 1 by construction: a bound pod answers 409).
    pub binds_applied: u32,
    /// Binding requests answered 409 or 404.
    pub rejected_binds: u32,
    /// Binding requests failed by injected faults (not applied).
    pub failed_binds: u32,
    /// A binding was applied but its reply was lost (so a later 409 is expected).
    pub reply_lost: bool,
    /// Scheduled events recorded.
    pub scheduled_events: u32,
    /// A Scheduled event whose message was not kube-scheduler's for this binding.
    pub wrong_scheduled_message: bool,
    /// The latest `PodScheduled=False` message.
    pub unschedulable_message: Option<String>,
    /// The latest `status.nominatedNodeName`.
    pub nominated_node: Option<String>,
    /// FailedScheduling events recorded.
    pub failed_scheduling_events: u32,
    /// When the pod was submitted.
    pub arrived: Option<Instant>,
    /// When the binding was applied.
    pub bound_at: Option<Instant>,
    /// `status.extendedResourceClaimStatus.resourceClaimName`: the special claim PreBind created
    /// for the pod's extended resources backed by DRA.
    pub extended_resource_claim: Option<String>,
}

impl PodRecord {
    fn new(info: PodInfo, pending: bool) -> Self {
        PodRecord {
            info,
            pending,
            bind_calls: 0,
            binds_applied: 0,
            rejected_binds: 0,
            failed_binds: 0,
            reply_lost: false,
            scheduled_events: 0,
            wrong_scheduled_message: false,
            unschedulable_message: None,
            nominated_node: None,
            extended_resource_claim: None,
            failed_scheduling_events: 0,
            arrived: pending.then(Instant::now),
            bound_at: None,
        }
    }
}

/// A pod bound before the run began that nothing has touched since: kept protobuf-encoded, a few
/// hundred bytes instead of a decoded [`PodRecord`] (a million of these decoded cost gigabytes).
/// Anything that reads or changes one (a bind, an event, a preemption) decodes it into `pods`.
#[derive(Debug)]
struct Settled {
    /// The [`proto::Pod`], encoded.
    spec: Box<[u8]>,
    /// spec.schedulerName.
    scheduler_name: String,
    /// metadata.creationTimestamp (ms).
    created_ms: i64,
    /// Succeeded or Failed.
    terminal: bool,
    /// metadata.deletionTimestamp is set.
    deleting: bool,
    /// Owner, `placement.dev/` annotations and scheduling gates, when it has any.
    rest: Option<Box<SettledRest>>,
}

/// The rarer parts of a settled pod's [`PodInfo`]: owner, `placement.dev/` annotations, gates.
type SettledRest = (Option<Owner>, BTreeMap<String, String>, Vec<String>);

impl Settled {
    fn of(info: PodInfo) -> Self {
        let PodInfo {
            spec,
            scheduler_name,
            created_ms,
            terminal,
            deleting,
            owner,
            annotations,
            scheduling_gates,
        } = info;
        let rest = (owner.is_some() || !annotations.is_empty() || !scheduling_gates.is_empty())
            .then(|| Box::new((owner, annotations, scheduling_gates)));
        Settled {
            spec: spec.encode_to_vec().into_boxed_slice(),
            scheduler_name,
            created_ms,
            terminal,
            deleting,
            rest,
        }
    }

    /// The pod (it was encoded from a valid message, so it decodes).
    fn spec(&self) -> proto::Pod {
        proto::Pod::decode(&*self.spec).unwrap_or_default()
    }

    fn info(&self) -> PodInfo {
        let (owner, annotations, scheduling_gates) = self.rest.as_deref().cloned().unwrap_or_default();
        PodInfo {
            spec: self.spec(),
            scheduler_name: self.scheduler_name.clone(),
            created_ms: self.created_ms,
            terminal: self.terminal,
            deleting: self.deleting,
            owner,
            annotations,
            scheduling_gates,
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Store {
    pub(super) nodes: HashMap<String, proto::Node>,
    /// Pods the run schedules, and pods bound before it that something touched, by uid.
    pub(super) pods: HashMap<String, PodRecord>,
    /// Pods bound before the run and untouched since, by uid.
    settled: HashMap<String, Settled>,
    /// Pods deleted by preemption: (victim, preemptor uid, node).
    pub(super) preempted: Vec<(PodRecord, String, String)>,
    /// `namespace/name` → uid.
    by_name: HashMap<(String, String), String>,
    /// Claims, volumes, storage classes and CSINodes.
    storage: HashMap<TrackedKey, TrackedObject>,
    /// The PodGroupInitiallyScheduled condition last written per PodGroup (`namespace/name`),
    /// and how many times it was written.
    pub(super) group_conditions: HashMap<String, (PodGroupCondition, u32)>,
}

impl Store {
    /// A pod's record, decoding a settled pod first.
    fn record_mut(&mut self, uid: &str) -> Option<&mut PodRecord> {
        if let Some(settled) = self.settled.remove(uid) {
            self.pods.insert(uid.to_string(), PodRecord::new(settled.info(), false));
        }
        self.pods.get_mut(uid)
    }

    /// Every pod bound before the run began that is still there: `pods`' and the settled ones.
    pub(super) fn prebound_specs(&self) -> impl Iterator<Item = std::borrow::Cow<'_, proto::Pod>> {
        let touched = self
            .pods
            .values()
            .filter(|p| !p.pending)
            .map(|p| std::borrow::Cow::Borrowed(&p.info.spec));
        touched.chain(self.settled.values().map(|s| std::borrow::Cow::Owned(s.spec())))
    }

    /// Every DeviceClass.
    pub(super) fn device_classes(&self) -> impl Iterator<Item = &proto::DeviceClass> {
        self.storage.values().filter_map(|o| match o {
            TrackedObject::DeviceClass(c) => Some(c),
            _ => None,
        })
    }

    /// Every ResourceClaim.
    pub(super) fn resource_claims(&self) -> impl Iterator<Item = &proto::ResourceClaim> {
        self.storage.values().filter_map(|o| match o {
            TrackedObject::ResourceClaim(c) => Some(c),
            _ => None,
        })
    }

    /// The ResourceClaim `namespace/name`, if any.
    pub(super) fn resource_claim(&self, namespace: &str, name: &str) -> Option<&proto::ResourceClaim> {
        match self
            .storage
            .get(&TrackedKey::ResourceClaim(format!("{namespace}/{name}")))
        {
            Some(TrackedObject::ResourceClaim(c)) => Some(c),
            _ => None,
        }
    }

    /// Every PodGroup.
    pub(super) fn pod_groups(&self) -> impl Iterator<Item = &proto::PodGroup> {
        self.storage.values().filter_map(|o| match o {
            TrackedObject::PodGroup(g) => Some(g),
            _ => None,
        })
    }

    /// Every pod, decoded (settled ones included).
    pub(super) fn all_records(&self) -> Vec<PodRecord> {
        let settled = self.settled.values().map(|s| PodRecord::new(s.info(), false));
        self.pods.values().cloned().chain(settled).collect()
    }
}

/// A binding (or a deletion) on its way to the binder through the simulated watch.
#[derive(Debug)]
pub(super) struct WatchEvent {
    deliver_at: Instant,
    change: Change,
}

/// What a simulated watch event says.
#[derive(Debug)]
pub(super) enum Change {
    /// A pod added or changed (bound).
    Pod(PodInfo),
    /// A pod deleted.
    Deleted(PodInfo),
    /// A claim or volume the simulated PV controller changed.
    Storage(TrackedObject),
}

/// The in-memory API server: pods and nodes, Bindings, events and conditions.
#[derive(Debug)]
pub struct SimCluster {
    pub(super) store: Mutex<Store>,
    watch_tx: mpsc::UnboundedSender<WatchEvent>,
    watch_latency: Duration,
    faults: Faults,
    draws: AtomicU64,
    bound_pending: AtomicUsize,
    pub(super) bind_latency: Recorder,
    pub(super) e2e_latency: Recorder,
    events_in_flight: AtomicUsize,
    pub(super) max_events_in_flight: AtomicUsize,
}

/// The watch stream of a [`SimCluster`]: run [`SimWatch::feed`] to deliver bindings to a binder.
#[derive(Debug)]
pub struct SimWatch {
    rx: mpsc::UnboundedReceiver<WatchEvent>,
}

impl SimWatch {
    /// Delivers each binding to `binder` as a bound `PodApplied`, after the watch latency, in order.
    pub async fn feed(mut self, binder: Binder<SimCluster>) {
        while let Some(ev) = self.rx.recv().await {
            if ev.deliver_at > Instant::now() {
                tokio::time::sleep_until(ev.deliver_at).await;
            }
            binder.handle(match ev.change {
                Change::Deleted(pod) => ClusterEvent::PodDeleted { uid: pod.spec.uid },
                Change::Pod(pod) => ClusterEvent::PodApplied(pod),
                Change::Storage(obj) => ClusterEvent::ObjectApplied(obj),
            });
        }
    }
}

impl SimCluster {
    /// An empty cluster with the given faults and watch latency, and its watch stream.
    pub fn new(faults: Faults, watch_latency: Duration) -> (Self, SimWatch) {
        let (watch_tx, rx) = mpsc::unbounded_channel();
        let cluster = Self {
            store: Mutex::new(Store::default()),
            watch_tx,
            watch_latency,
            faults,
            draws: AtomicU64::new(0),
            bound_pending: AtomicUsize::new(0),
            bind_latency: Recorder::default(),
            e2e_latency: Recorder::default(),
            events_in_flight: AtomicUsize::new(0),
            max_events_in_flight: AtomicUsize::new(0),
        };
        (cluster, SimWatch { rx })
    }

    /// Adds or replaces a node.
    pub fn add_node(&self, node: proto::Node) {
        self.store.lock().nodes.insert(node.name.clone(), node);
    }

    /// Adds a pod; `pending` marks one the binder is to schedule (its arrival time is now).
    pub fn add_pod(&self, info: PodInfo, pending: bool) {
        let mut s = self.store.lock();
        let key = (info.spec.namespace.clone(), info.spec.name.clone());
        let uid = info.spec.uid.clone();
        if pending {
            s.by_name.insert(key, uid.clone());
        } else {
            s.by_name.entry(key).or_insert_with(|| uid.clone());
        }
        s.settled.remove(&uid);
        if pending || info.node_name().is_none() {
            s.pods.insert(uid, PodRecord::new(info, pending));
        } else {
            s.pods.remove(&uid);
            s.settled.insert(uid, Settled::of(info));
        }
    }

    /// Adds or replaces a claim, volume, storage class or CSINode.
    pub fn add_storage(&self, obj: TrackedObject) {
        self.store.lock().storage.insert(obj.key(), obj);
    }

    /// A claim, volume, storage class or CSINode.
    pub fn storage_object(&self, key: &TrackedKey) -> Option<TrackedObject> {
        self.store.lock().storage.get(key).cloned()
    }

    /// The PV controller, at once: binds `claim` to the volume `volume` (the volume's phase
    /// `Bound` and claimRef, the claim's volume name and `bind-completed`), and sends both
    /// changes through the watch.
    fn complete_binding(
        &self,
        s: &mut Store,
        mut claim: proto::PersistentVolumeClaim,
        mut volume: proto::PersistentVolume,
    ) {
        volume.claim_ref = Some(proto::VolumeClaimRef {
            namespace: claim.namespace.clone(),
            name: claim.name.clone(),
            uid: claim.uid.clone(),
        });
        volume.phase = "Bound".into();
        claim.volume_name = volume.name.clone();
        claim.bind_completed = true;
        let deliver_at = Instant::now() + self.watch_latency;
        for obj in [TrackedObject::Volume(volume), TrackedObject::Claim(claim)] {
            s.storage.insert(obj.key(), obj.clone());
            let _ = self.watch_tx.send(WatchEvent {
                deliver_at,
                change: Change::Storage(obj),
            });
        }
    }

    fn claim_of(s: &Store, claim: &ClaimRef) -> Result<proto::PersistentVolumeClaim, ApiError> {
        match s.storage.get(&TrackedKey::Claim(claim.key())) {
            Some(TrackedObject::Claim(c)) if claim.uid.is_empty() || c.uid == claim.uid => Ok(c.clone()),
            Some(TrackedObject::Claim(_)) => Err(ApiError::Conflict(format!(
                "persistentvolumeclaim {} was recreated",
                claim.key()
            ))),
            _ => Err(ApiError::NotFound(format!(
                "persistentvolumeclaims \"{}\" not found",
                claim.name
            ))),
        }
    }

    /// A ResourceClaim of the store, as the API server would answer a get of it.
    fn resource_claim_of(s: &Store, claim: &ClaimRef) -> Result<proto::ResourceClaim, ApiError> {
        match s.storage.get(&TrackedKey::ResourceClaim(claim.key())) {
            Some(TrackedObject::ResourceClaim(c)) => Ok(c.clone()),
            _ => Err(ApiError::NotFound(format!(
                "resourceclaims.resource.k8s.io \"{}\" not found",
                claim.name
            ))),
        }
    }

    /// Stores a changed ResourceClaim and sends it through the watch.
    fn update_resource_claim(&self, s: &mut Store, claim: proto::ResourceClaim) {
        let obj = TrackedObject::ResourceClaim(claim);
        s.storage.insert(obj.key(), obj.clone());
        let _ = self.watch_tx.send(WatchEvent {
            deliver_at: Instant::now() + self.watch_latency,
            change: Change::Storage(obj),
        });
    }

    /// kube's resourceclaim controller for a deleted pod: the pod taken out of the `reservedFor`
    /// of the claims reserved for it, and a claim reserved for no one any more deallocated.
    fn release_claims_of(&self, s: &mut Store, pod_uid: &str) {
        let reserved: Vec<proto::ResourceClaim> = s
            .storage
            .values()
            .filter_map(|o| match o {
                TrackedObject::ResourceClaim(c) if c.reserved_for.iter().any(|r| r.uid == pod_uid) => Some(c.clone()),
                _ => None,
            })
            .collect();
        for mut c in reserved {
            c.reserved_for.retain(|r| r.uid != pod_uid);
            if c.reserved_for.is_empty() {
                c.allocation = None;
            }
            self.update_resource_claim(s, c);
        }
    }

    /// One pod's record.
    pub fn pod(&self, uid: &str) -> Option<PodRecord> {
        let s = self.store.lock();
        match s.pods.get(uid) {
            Some(p) => Some(p.clone()),
            None => s.settled.get(uid).map(|p| PodRecord::new(p.info(), false)),
        }
    }

    /// Every pod the binder was asked to schedule.
    pub fn pending_pods(&self) -> Vec<PodRecord> {
        self.store.lock().pods.values().filter(|p| p.pending).cloned().collect()
    }

    /// Pending pods bound so far.
    pub fn bound_count(&self) -> usize {
        self.bound_pending.load(Ordering::Relaxed)
    }

    /// The PodGroupInitiallyScheduled condition last written on the PodGroup `namespace/name`,
    /// and how many times it was written.
    pub fn pod_group_condition(&self, namespace: &str, name: &str) -> Option<(PodGroupCondition, u32)> {
        self.store
            .lock()
            .group_conditions
            .get(&crate::projection::pod_group_key(namespace, name))
            .cloned()
    }

    /// PodGroups with a pending pod decided (bound, or reported unschedulable other than as an
    /// invalid pod, which no PodGroup cycle decides) whose condition has not been written yet.
    pub fn pod_groups_awaiting_condition(&self) -> usize {
        let s = self.store.lock();
        let mut decided: std::collections::HashSet<String> = std::collections::HashSet::new();
        for p in s.pods.values().filter(|p| p.pending) {
            let spec = &p.info.spec;
            if spec.gang.is_some() || spec.scheduling_group.is_empty() {
                continue;
            }
            let invalid = p
                .unschedulable_message
                .as_deref()
                .is_some_and(|m| m.starts_with("invalid pod:"));
            if p.info.node_name().is_some() || (p.unschedulable_message.is_some() && !invalid) {
                decided.insert(crate::projection::pod_group_key(
                    &spec.namespace,
                    &spec.scheduling_group,
                ));
            }
        }
        decided.iter().filter(|k| !s.group_conditions.contains_key(*k)).count()
    }

    /// Pending pods not bound whose unschedulable message has been written.
    pub fn unschedulable_recorded(&self) -> usize {
        self.store
            .lock()
            .pods
            .values()
            .filter(|p| p.pending && p.info.node_name().is_none() && p.unschedulable_message.is_some())
            .count()
    }

    fn chance(&self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        let n = self.draws.fetch_add(1, Ordering::Relaxed);
        let x = mix(self.faults.seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        ((x >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    fn bind_now(&self, pod: &PodRef, node: &str, annotations: &BTreeMap<String, String>) -> Result<(), ApiError> {
        let fail = self.chance(self.faults.bind_failure_rate);
        let lose = self.chance(self.faults.lost_reply_rate);
        let mut s = self.store.lock();
        let uid = s.by_name.get(&(pod.namespace.clone(), pod.name.clone())).cloned();
        let Some(record) = uid.as_ref().and_then(|u| s.record_mut(u)) else {
            return Err(ApiError::NotFound(format!("pods \"{}\" not found", pod.name)));
        };
        record.bind_calls += 1;
        if record.info.spec.uid != pod.uid {
            record.rejected_binds += 1;
            return Err(ApiError::Conflict(format!(
                "Operation cannot be fulfilled on pods/binding \"{}\": the UID in the precondition ({}) does not match the UID in record ({})",
                pod.name, pod.uid, record.info.spec.uid
            )));
        }
        if let Some(current) = record.info.node_name() {
            record.rejected_binds += 1;
            return Err(ApiError::Conflict(format!(
                "Operation cannot be fulfilled on pods/binding \"{}\": pod {} is already assigned to node \"{current}\"",
                pod.name, pod.name
            )));
        }
        if fail {
            record.failed_binds += 1;
            return Err(ApiError::Other("Internal error occurred: injected failure".into()));
        }
        let now = Instant::now();
        record.info.spec.node_name = node.to_string();
        // As the API server does, the Binding's annotations land on the pod.
        record
            .info
            .annotations
            .extend(annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
        record.binds_applied += 1;
        record.bound_at = Some(now);
        record.reply_lost = lose;
        let bound = record.info.clone();
        if record.pending {
            self.bound_pending.fetch_add(1, Ordering::Relaxed);
            if let Some(arrived) = record.arrived {
                self.e2e_latency.record(now - arrived);
            }
        }
        drop(s);
        let _ = self.watch_tx.send(WatchEvent {
            deliver_at: now + self.watch_latency,
            change: Change::Pod(bound),
        });
        if lose {
            return Err(ApiError::Other(
                "context deadline exceeded (injected: the binding was applied)".into(),
            ));
        }
        Ok(())
    }
}

impl ClusterApi for SimCluster {
    async fn bind_volume(&self, volume: &str, claim: &ClaimRef) -> Result<(), ApiError> {
        let mut s = self.store.lock();
        let c = Self::claim_of(&s, claim)?;
        let Some(TrackedObject::Volume(v)) = s.storage.get(&TrackedKey::Volume(volume.to_string())).cloned() else {
            return Err(ApiError::NotFound(format!("persistentvolumes \"{volume}\" not found")));
        };
        if v.claim_ref
            .as_ref()
            .is_some_and(|r| r.namespace != c.namespace || r.name != c.name)
        {
            return Err(ApiError::Conflict(format!(
                "persistentvolume {volume} is bound to another claim already"
            )));
        }
        self.complete_binding(&mut s, c, v);
        Ok(())
    }

    async fn select_node(&self, claim: &ClaimRef, node: &str) -> Result<(), ApiError> {
        let mut s = self.store.lock();
        let mut c = Self::claim_of(&s, claim)?;
        let provisioner = match s.storage.get(&TrackedKey::Class(c.storage_class_name.clone())) {
            Some(TrackedObject::Class(class)) => class.provisioner.clone(),
            _ => String::new(),
        };
        c.selected_node = node.to_string();
        // The provisioner creates a volume on the node, of the claim's size, modes and class.
        let volume = proto::PersistentVolume {
            name: format!(
                "pvc-{}",
                if c.uid.is_empty() {
                    c.name.clone()
                } else {
                    c.uid.clone()
                }
            ),
            storage_class_name: c.storage_class_name.clone(),
            capacity: c.storage_request.clone(),
            access_modes: c.access_modes.clone(),
            volume_mode: c.volume_mode.clone(),
            csi_driver: provisioner.clone(),
            csi_volume_handle: format!("{}-{}", c.namespace, c.name),
            node_affinity: Some(proto::NodeSelector {
                terms: vec![proto::NodeSelectorTerm {
                    match_expressions: vec![proto::NodeSelectorRequirement {
                        key: "kubernetes.io/hostname".into(),
                        operator: "In".into(),
                        values: vec![node.to_string()],
                    }],
                    ..Default::default()
                }],
            }),
            ..Default::default()
        };
        self.complete_binding(&mut s, c, volume);
        Ok(())
    }

    /// As kube's `bindClaim` through the API server (see [`crate::kube_api`]): the allocation
    /// (when given) and the pod in `reservedFor`, refused as the API server and kube refuse them
    /// (a claim recreated or being deleted, allocated meanwhile, deallocated meanwhile); the
    /// change goes through the watch.
    async fn reserve_claim(&self, write: ClaimWrite<'_>) -> Result<Option<ResourceClaim>, ApiError> {
        let ClaimWrite {
            claim, pod, allocation, ..
        } = write;
        let key = claim.key();
        let mut s = self.store.lock();
        let mut c = Self::resource_claim_of(&s, claim)
            .map_err(|e| ApiError::NotFound(format!("get updated claim {key}: {e}")))?;
        if (!claim.uid.is_empty() && c.uid != claim.uid) || c.deleting {
            return Err(ApiError::Conflict(format!("claim {key} got deleted in the meantime")));
        }
        if c.reserved_for.iter().any(|r| r.uid == pod.uid) {
            return Ok(None);
        }
        match allocation {
            Some(_) if c.allocation.is_some() => {
                return Err(ApiError::Conflict(format!(
                    "claim {key} got allocated elsewhere in the meantime"
                )))
            }
            Some(a) => c.allocation = Some(a.clone()),
            None if c.allocation.is_none() => {
                return Err(ApiError::Conflict(format!(
                    "claim {key} got deallocated elsewhere in the meantime"
                )))
            }
            None => {}
        }
        c.reserved_for.push(proto::ResourceClaimConsumer {
            api_group: String::new(),
            resource: "pods".into(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
        });
        self.update_resource_claim(&mut s, c);
        Ok(None)
    }

    /// As the API server creates the special claim for a pod's extended resources: the name
    /// generated from `<pod>-extended-resources-` with five of the API server's name characters
    /// (derived from the pod, where the API server's are random, so that runs repeat).
    async fn create_extended_claim(
        &self,
        pod: &PodRef,
        claim: &proto::ExtendedResourceClaim,
    ) -> Result<ResourceClaim, ApiError> {
        let mut s = self.store.lock();
        let mut h = xxhash_rust::xxh3::xxh3_64(format!("{}/{}/extended", pod.key(), pod.uid).as_bytes());
        let alphabet = super::workload::NAME_SUFFIX_ALPHABET;
        let suffix: String = (0..5)
            .map(|_| {
                let c = alphabet[(h % alphabet.len() as u64) as usize];
                h /= alphabet.len() as u64;
                c as char
            })
            .collect();
        let name = format!("{}-extended-resources-{suffix}", pod.name);
        let created = ClaimRef {
            namespace: pod.namespace.clone(),
            uid: format!("simulated-{}-{name}", pod.namespace),
            name,
        };
        if s.storage.contains_key(&TrackedKey::ResourceClaim(created.key())) {
            return Err(ApiError::Conflict(format!(
                "create claim for extended resources {}/: resourceclaims.resource.k8s.io \"{}\" already exists",
                pod.namespace, created.name
            )));
        }
        let c = proto::ResourceClaim {
            namespace: created.namespace.clone(),
            name: created.name.clone(),
            uid: created.uid.clone(),
            requests: claim.requests.clone(),
            ..Default::default()
        };
        self.update_resource_claim(&mut s, c);
        Ok(ResourceClaim {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                namespace: Some(created.namespace),
                name: Some(created.name),
                uid: Some(created.uid),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    /// The pod's `status.extendedResourceClaimStatus`, kept on its record.
    async fn set_extended_resource_claim_status(
        &self,
        pod: &PodRef,
        claim_name: &str,
        _mappings: &[proto::ContainerExtendedResourceRequest],
    ) -> Result<(), ApiError> {
        let mut s = self.store.lock();
        let record = s.record_mut(&pod.uid).ok_or_else(|| {
            ApiError::NotFound(format!(
                "update pod {} ExtendedResourceClaimStatus: pods \"{}\" not found",
                pod.key(),
                pod.name
            ))
        })?;
        record.extended_resource_claim = Some(claim_name.to_string());
        Ok(())
    }

    /// The special claim deleted (its finalizer goes with it here). The simulated watch carries
    /// no deletions of claims: the binder is shown it deallocated, its devices free.
    async fn delete_claim(&self, claim: &ClaimRef, _cached: Option<&ResourceClaim>) -> Result<(), ApiError> {
        let mut s = self.store.lock();
        if let Ok(mut c) = Self::resource_claim_of(&s, claim) {
            c.allocation = None;
            c.reserved_for.clear();
            self.update_resource_claim(&mut s, c);
        }
        s.storage.remove(&TrackedKey::ResourceClaim(claim.key()));
        Ok(())
    }

    /// The claim's allocation and reservations cleared (DynamicResources' PostFilter).
    async fn deallocate_claim(
        &self,
        claim: &ClaimRef,
        _cached: Option<&ResourceClaim>,
    ) -> Result<Option<ResourceClaim>, ApiError> {
        let mut s = self.store.lock();
        let mut c = Self::resource_claim_of(&s, claim)?;
        if !claim.uid.is_empty() && c.uid != claim.uid {
            return Err(ApiError::Conflict(format!(
                "Precondition failed: UID in precondition: {}, UID in object meta: {}",
                claim.uid, c.uid
            )));
        }
        c.reserved_for.clear();
        c.allocation = None;
        self.update_resource_claim(&mut s, c);
        Ok(None)
    }

    /// The pod taken out of the claim's `reservedFor` (the binder's Unreserve).
    async fn unreserve_claim(&self, claim: &ClaimRef, pod: &PodRef) -> Result<(), ApiError> {
        let mut s = self.store.lock();
        let mut c = Self::resource_claim_of(&s, claim)?;
        if !claim.uid.is_empty() && c.uid != claim.uid {
            return Err(ApiError::Conflict(format!(
                "Precondition failed: UID in precondition: {}, UID in object meta: {}",
                claim.uid, c.uid
            )));
        }
        c.reserved_for.retain(|r| r.uid != pod.uid);
        self.update_resource_claim(&mut s, c);
        Ok(())
    }

    async fn bind(&self, pod: &PodRef, node: &str, annotations: &BTreeMap<String, String>) -> Result<(), ApiError> {
        let started = Instant::now();
        if !self.faults.bind_delay.is_zero() {
            tokio::time::sleep(self.faults.bind_delay).await;
        }
        let result = self.bind_now(pod, node, annotations);
        self.bind_latency.record(started.elapsed());
        result
    }

    async fn record_scheduled(&self, pod: &PodRef, node: &str, _at: std::time::SystemTime) -> Result<(), ApiError> {
        let now = self.events_in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.max_events_in_flight.fetch_max(now, Ordering::Relaxed);
        if !self.faults.event_delay.is_zero() {
            tokio::time::sleep(self.faults.event_delay).await;
        }
        self.events_in_flight.fetch_sub(1, Ordering::Relaxed);
        let mut s = self.store.lock();
        let record = s
            .record_mut(&pod.uid)
            .ok_or_else(|| ApiError::NotFound(format!("pods \"{}\" not found", pod.name)))?;
        record.scheduled_events += 1;
        let expected = record.info.node_name().map(|n| scheduled_message(pod, n));
        if expected != Some(scheduled_message(pod, node)) {
            record.wrong_scheduled_message = true;
        }
        Ok(())
    }

    async fn record_unschedulable(&self, pod: &PodRef, message: &str) -> Result<(), ApiError> {
        let mut s = self.store.lock();
        let record = s
            .record_mut(&pod.uid)
            .ok_or_else(|| ApiError::NotFound(format!("pods \"{}\" not found", pod.name)))?;
        record.unschedulable_message = Some(message.to_string());
        record.failed_scheduling_events += 1;
        Ok(())
    }

    async fn nominate(&self, pod: &PodRef, node: &str) -> Result<(), ApiError> {
        let mut s = self.store.lock();
        let record = s
            .record_mut(&pod.uid)
            .ok_or_else(|| ApiError::NotFound(format!("pods \"{}\" not found", pod.name)))?;
        record.nominated_node = Some(node.to_string());
        Ok(())
    }

    async fn clear_nomination(&self, pod: &PodRef) -> Result<(), ApiError> {
        let mut s = self.store.lock();
        let record = s
            .record_mut(&pod.uid)
            .ok_or_else(|| ApiError::NotFound(format!("pods \"{}\" not found", pod.name)))?;
        record.nominated_node = None;
        Ok(())
    }

    /// Keeps the condition (the summary reports it) and, as the API server's status does, shows
    /// the PodGroup with its PodGroupInitiallyScheduled status through the watch when it changes.
    async fn record_pod_group_condition(&self, condition: &PodGroupCondition) -> Result<(), ApiError> {
        let key = crate::projection::pod_group_key(&condition.namespace, &condition.name);
        let mut s = self.store.lock();
        let Some(TrackedObject::PodGroup(mut group)) = s.storage.get(&TrackedKey::PodGroup(key.clone())).cloned()
        else {
            return Err(ApiError::NotFound(format!(
                "podgroups.scheduling.k8s.io \"{}\" not found",
                condition.name
            )));
        };
        let written = s.group_conditions.entry(key).or_insert((condition.clone(), 0));
        written.0 = condition.clone();
        written.1 += 1;
        if group.initially_scheduled != condition.scheduled {
            group.initially_scheduled = condition.scheduled;
            let obj = TrackedObject::PodGroup(group);
            s.storage.insert(obj.key(), obj.clone());
            let _ = self.watch_tx.send(WatchEvent {
                deliver_at: Instant::now() + self.watch_latency,
                change: Change::Storage(obj),
            });
        }
        Ok(())
    }

    /// Deletes the victim at once (the simulation has no kubelet and no grace period) and delivers
    /// the deletion through the watch.
    async fn preempt(
        &self,
        victim: &PodRef,
        preemptor: &Preemptor,
        node: &str,
        _scheduler_name: &str,
    ) -> Result<(), ApiError> {
        let mut s = self.store.lock();
        s.record_mut(&victim.uid);
        let Some(record) = s.pods.remove(&victim.uid) else {
            return Ok(());
        };
        let key = (record.info.spec.namespace.clone(), record.info.spec.name.clone());
        if s.by_name.get(&key) == Some(&victim.uid) {
            s.by_name.remove(&key);
        }
        if record.pending && record.info.node_name().is_some() {
            self.bound_pending.fetch_sub(1, Ordering::Relaxed);
        }
        let info = record.info.clone();
        s.preempted
            .push((record, preemptor.object().uid.clone(), node.to_string()));
        self.release_claims_of(&mut s, &victim.uid);
        drop(s);
        let _ = self.watch_tx.send(WatchEvent {
            deliver_at: Instant::now() + self.watch_latency,
            change: Change::Deleted(info),
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prebound() -> PodInfo {
        PodInfo {
            spec: proto::Pod {
                uid: "u-1".into(),
                name: "web-1".into(),
                namespace: "shop".into(),
                node_name: "node-a".into(),
                labels: [("app".to_string(), "web".to_string())].into(),
                ..Default::default()
            },
            scheduler_name: "placement".into(),
            created_ms: 42,
            owner: Some(Owner {
                kind: "ReplicaSet".into(),
                name: "web-5d9".into(),
            }),
            annotations: [("placement.dev/policy".to_string(), "spread".to_string())].into(),
            ..Default::default()
        }
    }

    fn pod_ref() -> PodRef {
        PodRef {
            namespace: "shop".into(),
            name: "web-1".into(),
            uid: "u-1".into(),
        }
    }

    #[tokio::test]
    async fn a_settled_pod_reads_back_whole_and_is_decoded_when_touched() {
        let (cluster, _watch) = SimCluster::new(Faults::default(), Duration::ZERO);
        cluster.add_pod(prebound(), false);
        assert!(
            cluster.store.lock().pods.is_empty(),
            "an untouched bound pod stays encoded"
        );
        assert_eq!(cluster.pod("u-1").map(|p| p.info), Some(prebound()));

        // Binding it again is refused as the API server refuses it, and counted on its record.
        let err = cluster.bind(&pod_ref(), "node-b", &BTreeMap::new()).await.unwrap_err();
        assert!(
            matches!(&err, ApiError::Conflict(m) if m.contains("already assigned to node \"node-a\"")),
            "{err:?}"
        );
        let record = cluster.pod("u-1").unwrap();
        assert_eq!((record.bind_calls, record.rejected_binds), (1, 1));
        assert_eq!(record.info, prebound());
        assert!(cluster.store.lock().settled.is_empty());
    }

    /// The condition is kept with its count of writes; the PodGroup shows its new status through
    /// the watch once, when it turns True; a missing group answers 404.
    #[tokio::test]
    async fn pod_group_conditions_are_kept_and_the_group_seen_scheduled() {
        let (cluster, mut watch) = SimCluster::new(Faults::default(), Duration::ZERO);
        cluster.add_storage(TrackedObject::PodGroup(proto::PodGroup {
            namespace: "ml".into(),
            name: "train".into(),
            generation: 2,
            ..Default::default()
        }));
        let condition = |scheduled: bool, reason: &str, message: &str| PodGroupCondition {
            namespace: "ml".into(),
            name: "train".into(),
            scheduled,
            reason: reason.into(),
            message: message.into(),
            observed_generation: 2,
            current: None,
        };
        let unschedulable = condition(false, "Unschedulable", "pod group is unschedulable, …");
        cluster.record_pod_group_condition(&unschedulable).await.unwrap();
        assert_eq!(cluster.pod_group_condition("ml", "train"), Some((unschedulable, 1)));
        assert!(watch.rx.try_recv().is_err(), "False as before: the group is unchanged");
        let scheduled = condition(true, "Scheduled", "");
        cluster.record_pod_group_condition(&scheduled).await.unwrap();
        assert_eq!(cluster.pod_group_condition("ml", "train"), Some((scheduled, 2)));
        let event = watch.rx.recv().await.unwrap();
        assert!(
            matches!(&event.change, Change::Storage(TrackedObject::PodGroup(g)) if g.initially_scheduled),
            "{event:?}"
        );
        let mut other = condition(true, "Scheduled", "");
        other.name = "gone".into();
        assert!(matches!(
            cluster.record_pod_group_condition(&other).await,
            Err(ApiError::NotFound(_))
        ));
        assert_eq!(cluster.pod_group_condition("ml", "gone"), None);
    }

    #[tokio::test]
    async fn a_settled_victim_is_deleted_whole() {
        let (cluster, mut watch) = SimCluster::new(Faults::default(), Duration::ZERO);
        cluster.add_pod(prebound(), false);
        let preemptor = PodRef {
            namespace: "shop".into(),
            name: "big".into(),
            uid: "u-big".into(),
        };
        cluster
            .preempt(&pod_ref(), &Preemptor::Pod(preemptor.clone()), "node-a", "placement")
            .await
            .unwrap();
        {
            let s = cluster.store.lock();
            assert!(s.settled.is_empty() && s.pods.is_empty());
            assert_eq!(s.preempted.len(), 1);
            assert_eq!(s.preempted[0].0.info, prebound());
        }
        let event = watch.rx.recv().await.unwrap();
        assert!(matches!(event.change, Change::Deleted(info) if info == prebound()));
    }
}
