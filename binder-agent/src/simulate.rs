//! `binder-agent simulate`: the real binder loop against an in-memory cluster and in-process
//! decision replicas, with no API server needed.
//!
//! [`SimCluster`] stands in for the API server: it keeps pods and nodes, applies Bindings (409 when
//! a pod is already bound, 404 when it is gone), and shows each binding to the binder through an
//! asynchronous watch, so the binder's assume-until-seen path runs as it does on a cluster. It
//! counts every binding attempt per pod (to prove none is bound twice) and records the Scheduled
//! events and unschedulable conditions the binder writes. Faults can be injected: a fraction of
//! binds failing like a 500, replies lost after the binding was applied, slow binds.
//!
//! [`simulate`] builds a synthetic cluster (from `placement_scheduler::synth`) or loads the output
//! of `kubectl get nodes,pods -A -o json` (PodDisruptionBudgets and storage objects too), starts decision replicas in-process (or uses given ones),
//! feeds the nodes and bound pods, marks the binder synced, submits the pending pods (all at once
//! or at an arrival rate) and runs the binder until every pending pod is bound or parked
//! unschedulable. The [`Summary`] has throughput, latencies, batching, snapshot syncs, node
//! utilization and the consistency checks.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use parking_lot::Mutex;
use placement_scheduler::engine::resources::Resources;
use placement_scheduler::grpc::convert;
use placement_scheduler::grpc::{Metrics as ServiceMetrics, PlacementApi, ServerConfig};
use placement_scheduler::proto;
use placement_scheduler::proto::placement_service_server::{PlacementService, PlacementServiceServer};
use placement_scheduler::synth::{self, ClusterShape};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::api::{scheduled_message, ApiError, ClaimRef, ClusterApi, PodRef};
use crate::binder::{Binder, BinderConfig, ClusterEvent};
use crate::experiments::{ExperimentSet, Owner};
use crate::metrics::BinderMetrics;
use crate::model::{self, PodInfo, StorageKey, StorageObject};
use crate::queue::QueueConfig;
use crate::replicas::{EndpointSource, ReplicaConfig, ReplicaError, ReplicaPool};
use crate::routing::{Report, RoutingError};

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

/// Everything a simulation run needs.
#[derive(Debug)]
pub struct SimConfig {
    /// Where the nodes and pods come from.
    pub cluster: ClusterSource,
    /// Which decision replicas to use.
    pub decision: DecisionSource,
    /// The binder's configuration (its scheduler names also select the pending pods of a file).
    pub binder: BinderConfig,
    /// Timeouts and ejection of decision replicas.
    pub replica: ReplicaConfig,
    /// Configuration of in-process decision replicas.
    pub server: ServerConfig,
    /// Pending pods submitted per second; `None` submits them all at once.
    pub arrival_rate: Option<f64>,
    /// Longest run; the summary then reports the pods still pending.
    pub timeout: Duration,
    /// Delay between a binding and the binder seeing it through the watch.
    pub watch_latency: Duration,
    /// Faults the in-memory cluster injects.
    pub faults: Faults,
    /// Print a progress line to stderr every second.
    pub progress: bool,
    /// Receives the progress every few milliseconds (for tests that act mid-run).
    pub progress_tx: Option<watch::Sender<Progress>>,
    /// List each pending pod's outcome in [`Summary::outcomes`].
    pub record_outcomes: bool,
    /// Experiments and shadows, as the binder's `--experiments-file`.
    pub experiments: Option<ExperimentSet>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            cluster: ClusterSource::Synthetic(SyntheticCluster::default()),
            decision: DecisionSource::InProcess { replicas: 1 },
            binder: BinderConfig::default(),
            replica: ReplicaConfig::default(),
            server: ServerConfig::default(),
            arrival_rate: None,
            timeout: Duration::from_secs(600),
            watch_latency: Duration::ZERO,
            faults: Faults::default(),
            progress: false,
            progress_tx: None,
            record_outcomes: false,
            experiments: None,
        }
    }
}

/// Where the simulated cluster comes from.
#[derive(Debug, Clone)]
pub enum ClusterSource {
    /// A deterministic synthetic cluster.
    Synthetic(SyntheticCluster),
    /// A file holding `kubectl get nodes,pods -A -o json` output.
    File {
        /// The file.
        path: PathBuf,
        /// Schedule every unbound pod, whatever scheduler it names.
        all_pending: bool,
    },
    /// Nodes and pods already built.
    Workload(Workload),
}

/// A synthetic cluster and its pending pods.
#[derive(Debug, Clone)]
pub struct SyntheticCluster {
    /// Nodes, labels, taints, and pods already bound (`pods_per_node`, 0 for empty nodes).
    pub shape: ClusterShape,
    /// Pending pods to schedule.
    pub pending: usize,
    /// Replicas per workload; 1 makes every pending pod distinct.
    pub replicas_per_workload: usize,
    /// Share of the pending pods that are workload replicas when `replicas_per_workload > 1`.
    pub workload_share: f64,
    /// Share of the pending pods that are replicas of highly available workloads (8 each) with
    /// required per-node anti-affinity and zone spreading (`synth::topology_pods`).
    pub topology_share: f64,
    /// Seed of every random choice.
    pub seed: u64,
}

impl Default for SyntheticCluster {
    fn default() -> Self {
        Self {
            shape: ClusterShape {
                pods_per_node: 0,
                ..ClusterShape::default()
            },
            pending: 20_000,
            replicas_per_workload: 1,
            workload_share: 0.5,
            topology_share: 0.0,
            seed: 1,
        }
    }
}

/// Nodes, bound pods and pending pods, as the watchers would deliver them.
#[derive(Debug, Clone, Default)]
pub struct Workload {
    /// Nodes.
    pub nodes: Vec<proto::Node>,
    /// Pods already bound (they count against their nodes).
    pub bound: Vec<PodInfo>,
    /// Pods to schedule, in arrival order; each names one of the binder's schedulers.
    pub pending: Vec<PodInfo>,
    /// Pods left out: finished, being deleted, or unbound for another scheduler.
    pub ignored: usize,
    /// PodDisruptionBudgets (preemption spares the pods they protect where it can).
    pub pdbs: Vec<model::PdbInfo>,
    /// PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers and
    /// CSIStorageCapacities (the volume filters read them; the simulated PV controller binds the
    /// claims the binder writes for).
    pub storage: Vec<StorageObject>,
}

/// First creation timestamp given to synthetic pending pods (ms since the epoch).
const SYNTHETIC_EPOCH_MS: i64 = 1_767_225_600_000;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A synthetic workload replica (`{app}-{hash}-{suffix}` with a `pod-template-hash` label) is
/// owned by the ReplicaSet `{app}-{hash}`, as a Deployment's pods are.
fn synthetic_owner(pod: &proto::Pod) -> Option<Owner> {
    let hash = pod.labels.get("pod-template-hash")?;
    let end = pod.name.find(&format!("-{hash}-"))? + hash.len() + 1;
    Some(Owner {
        kind: "ReplicaSet".into(),
        name: pod.name[..end].to_string(),
    })
}

impl Workload {
    /// Builds a synthetic cluster; pending pods name `scheduler_name` and arrive interleaved.
    pub fn synthetic(config: &SyntheticCluster, scheduler_name: &str) -> Self {
        let snapshot = synth::cluster(&config.shape, config.seed);
        let bound = snapshot
            .pods
            .into_iter()
            .map(|spec| PodInfo {
                spec,
                scheduler_name: scheduler_name.to_string(),
                created_ms: SYNTHETIC_EPOCH_MS,
                terminal: false,
                deleting: false,
                ..PodInfo::default()
            })
            .collect();
        let n = config.pending;
        let replicas = config.replicas_per_workload.max(1);
        let from_workloads = if replicas > 1 {
            ((n as f64 * config.workload_share.clamp(0.0, 1.0)).round() as usize).min(n)
        } else {
            0
        };
        let from_topology =
            ((n as f64 * config.topology_share.clamp(0.0, 1.0)).round() as usize).min(n - from_workloads);
        let mut specs = synth::distinct_pods(n - from_workloads - from_topology, config.seed);
        specs.extend(synth::topology_pods(from_topology, 8, mix(config.seed ^ 0x70_b0)));
        let mut workload = 0u64;
        let mut left = from_workloads;
        while left > 0 {
            let count = left.min(replicas);
            let template_seed = mix(config.seed ^ 0x51_7e_a1).wrapping_add(workload);
            specs.extend(synth::replica_pods(count, template_seed));
            left -= count;
            workload += 1;
        }
        // Interleave distinct pods and replicas deterministically, as arrivals would.
        specs.sort_by_key(|p| xxhash_rust::xxh3::xxh3_64_with_seed(p.uid.as_bytes(), config.seed));
        let mut seen = HashSet::new();
        specs.retain(|p| seen.insert(p.uid.clone()));
        let pending = specs
            .into_iter()
            .enumerate()
            .map(|(i, spec)| PodInfo {
                owner: synthetic_owner(&spec),
                spec,
                scheduler_name: scheduler_name.to_string(),
                created_ms: SYNTHETIC_EPOCH_MS + i as i64,
                terminal: false,
                deleting: false,
                ..PodInfo::default()
            })
            .collect();
        Self {
            nodes: snapshot.nodes,
            bound,
            pending,
            ignored: 0,
            pdbs: Vec::new(),
            storage: Vec::new(),
        }
    }

    /// Reads `kubectl get nodes,pods -A -o json` output (a `v1 List` of Nodes and Pods; nested
    /// lists and `NodeList`/`PodList` are accepted too, and PodDisruptionBudgets,
    /// PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers and
    /// CSIStorageCapacities, as `kubectl get
    /// nodes,pods,pdb,pvc,pv,storageclass,csinode,csidriver,csistoragecapacity -A -o json` lists
    /// them). Bound pods count against their nodes; unbound pods naming one of `scheduler_names` (or every unbound pod with `all_pending`) are
    /// pending, in creation order.
    pub fn from_kubectl_json(text: &str, scheduler_names: &[String], all_pending: bool) -> Result<Self, SimError> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| SimError::Json(e.to_string()))?;
        let ours = scheduler_names.first().cloned().unwrap_or_default();
        let mut w = Self::default();
        w.collect(value, scheduler_names, &ours, all_pending)?;
        w.pending.sort_by_key(|p| p.created_ms);
        Ok(w)
    }

    fn collect(
        &mut self,
        value: serde_json::Value,
        names: &[String],
        ours: &str,
        all_pending: bool,
    ) -> Result<(), SimError> {
        let kind = value
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or_default()
            .to_string();
        match kind.as_str() {
            "Node" => {
                let node: k8s_openapi::api::core::v1::Node =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a Node: {e}")))?;
                self.nodes.push(model::node_info(&node));
            }
            "PodDisruptionBudget" => {
                let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a PodDisruptionBudget: {e}")))?;
                self.pdbs.push(model::pdb_info(&pdb));
            }
            "PersistentVolumeClaim" => {
                let pvc: k8s_openapi::api::core::v1::PersistentVolumeClaim = serde_json::from_value(value)
                    .map_err(|e| SimError::Json(format!("a PersistentVolumeClaim: {e}")))?;
                self.storage.push(StorageObject::Claim(model::claim_info(&pvc)));
            }
            "PersistentVolume" => {
                let pv: k8s_openapi::api::core::v1::PersistentVolume =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a PersistentVolume: {e}")))?;
                self.storage.push(StorageObject::Volume(model::volume_info(&pv)));
            }
            "StorageClass" => {
                let sc: k8s_openapi::api::storage::v1::StorageClass =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a StorageClass: {e}")))?;
                self.storage.push(StorageObject::Class(model::storage_class_info(&sc)));
            }
            "CSINode" => {
                let n: k8s_openapi::api::storage::v1::CSINode =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a CSINode: {e}")))?;
                self.storage.push(StorageObject::CsiNode(model::csi_node_info(&n)));
            }
            "CSIDriver" => {
                let d: k8s_openapi::api::storage::v1::CSIDriver =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a CSIDriver: {e}")))?;
                self.storage.push(StorageObject::CsiDriver(model::csi_driver_info(&d)));
            }
            "CSIStorageCapacity" => {
                let c: k8s_openapi::api::storage::v1::CSIStorageCapacity =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a CSIStorageCapacity: {e}")))?;
                self.storage
                    .push(StorageObject::Capacity(model::storage_capacity_info(&c)));
            }
            "Pod" => {
                let pod: k8s_openapi::api::core::v1::Pod =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a Pod: {e}")))?;
                let mut info = model::pod_info(&pod);
                if info.spec.uid.is_empty() {
                    info.spec.uid = info.key();
                }
                if info.terminal {
                    self.ignored += 1;
                } else if info.node_name().is_some() {
                    self.bound.push(info);
                } else if info.deleting || !(all_pending || names.contains(&info.scheduler_name)) {
                    self.ignored += 1;
                } else {
                    info.scheduler_name = ours.to_string();
                    self.pending.push(info);
                }
            }
            _ => match value.get("items").and_then(|i| i.as_array()) {
                Some(items) => {
                    let list_kind = kind.strip_suffix("List").filter(|k| !k.is_empty()).map(str::to_string);
                    for mut item in items.clone() {
                        if let (Some(k), Some(obj)) = (&list_kind, item.as_object_mut()) {
                            obj.entry("kind")
                                .or_insert_with(|| serde_json::Value::String(k.clone()));
                        }
                        self.collect(item, names, ours, all_pending)?;
                    }
                }
                None => self.ignored += 1,
            },
        }
        Ok(())
    }

    /// Checks what the decision service would refuse in a snapshot: invalid nodes or bound pods,
    /// duplicate node names or pod uids.
    pub fn validate(&self) -> Result<(), SimError> {
        let mut names = HashSet::new();
        for (i, n) in self.nodes.iter().enumerate() {
            convert::node(&format!("nodes[{i}]"), n).map_err(|e| SimError::Invalid(e.to_string()))?;
            if !names.insert(n.name.as_str()) {
                return Err(SimError::Invalid(format!("duplicate node name {:?}", n.name)));
            }
        }
        let mut uids = HashSet::new();
        for (i, p) in self.bound.iter().enumerate() {
            convert::pod(&format!("bound[{i}]"), &p.spec).map_err(|e| SimError::Invalid(e.to_string()))?;
            if !uids.insert(p.spec.uid.as_str()) {
                return Err(SimError::Invalid(format!("duplicate pod uid {:?}", p.spec.uid)));
            }
        }
        for p in &self.pending {
            if !uids.insert(p.spec.uid.as_str()) {
                return Err(SimError::Invalid(format!("duplicate pod uid {:?}", p.spec.uid)));
            }
        }
        // As a full snapshot carries them: each valid, none twice.
        let mut snapshot = proto::Snapshot::default();
        for o in &self.storage {
            match o.clone() {
                StorageObject::Claim(c) => snapshot.persistent_volume_claims.push(c),
                StorageObject::Volume(v) => snapshot.persistent_volumes.push(v),
                StorageObject::Class(c) => snapshot.storage_classes.push(c),
                StorageObject::CsiNode(n) => snapshot.csi_nodes.push(n),
                StorageObject::CsiDriver(d) => snapshot.csi_drivers.push(d),
                StorageObject::Capacity(c) => snapshot.csi_storage_capacities.push(c),
            }
        }
        let parts = convert::storage("storage", &snapshot).map_err(|e| SimError::Invalid(e.to_string()))?;
        placement_scheduler::engine::volumes::StorageObjects::from_parts(parts)
            .map_err(|e| SimError::Invalid(format!("{} {:?} appears twice", e.kind, e.key)))?;
        Ok(())
    }
}

/// Where decisions are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionSource {
    /// Start this many decision replicas in this process, on 127.0.0.1 ports of their own.
    InProcess {
        /// Number of replicas (at least 1).
        replicas: usize,
    },
    /// Use running replicas at these `http://host:port` URLs.
    Endpoints(Vec<String>),
}

/// Faults the in-memory cluster injects into Binding requests.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Fraction of binds failing with [`ApiError::Other`] without binding (like a 500).
    pub bind_failure_rate: f64,
    /// Fraction of binds that bind but answer [`ApiError::Other`] (a reply lost after the write).
    pub lost_reply_rate: f64,
    /// Added latency of every bind.
    pub bind_delay: Duration,
    /// Added latency of every `Scheduled` event write.
    pub event_delay: Duration,
    /// Seed of the fault draws.
    pub seed: u64,
}

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The cluster file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The cluster file is not the expected JSON.
    #[error("parsing the cluster file: {0}")]
    Json(String),
    /// A node or bound pod would be refused by the decision service.
    #[error("invalid cluster: {0}")]
    Invalid(String),
    /// The binder is configured with no scheduler name.
    #[error("the binder needs at least one scheduler name")]
    NoSchedulerName,
    /// The decision replicas could not be set up.
    #[error(transparent)]
    Replicas(#[from] ReplicaError),
    /// An in-process decision replica could not start.
    #[error("starting an in-process decision replica: {0}")]
    Replica(String),
    /// The experiments could not be made live.
    #[error("experiments: {0}")]
    Experiments(#[from] RoutingError),
}

/// How far a run has got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Progress {
    /// Time since the first pending pod was submitted.
    pub elapsed_seconds: f64,
    /// Pending pods submitted so far.
    pub submitted: usize,
    /// Pending pods bound.
    pub bound: usize,
    /// Pods parked unschedulable.
    pub unschedulable: usize,
    /// Pods active, backing off or in flight.
    pub pending: usize,
}

// ---------------------------------------------------------------------------------------------
// Latency recorder
// ---------------------------------------------------------------------------------------------

/// Exact latency percentiles over every sample.
#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<Duration>>);

impl Recorder {
    fn record(&self, d: Duration) {
        self.0.lock().push(d);
    }

    fn summary(&self) -> Option<LatencySummary> {
        LatencySummary::of(&self.0.lock())
    }
}

/// Percentiles of a latency, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Samples.
    pub count: usize,
    /// Mean.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

impl LatencySummary {
    /// Nearest-rank percentiles of `samples` (`None` when empty).
    pub fn of(samples: &[Duration]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        let mut v: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        v.sort_by(f64::total_cmp);
        Some(Self {
            count: v.len(),
            mean_ms: v.iter().sum::<f64>() / v.len() as f64,
            p50_ms: percentile(&v, 0.50),
            p99_ms: percentile(&v, 0.99),
            max_ms: v[v.len() - 1],
        })
    }
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

// ---------------------------------------------------------------------------------------------
// The in-memory cluster
// ---------------------------------------------------------------------------------------------

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
}

#[derive(Debug, Default)]
struct Store {
    nodes: HashMap<String, proto::Node>,
    pods: HashMap<String, PodRecord>,
    /// Pods deleted by preemption: (victim, preemptor uid, node).
    preempted: Vec<(PodRecord, String, String)>,
    /// `namespace/name` → uid.
    by_name: HashMap<(String, String), String>,
    /// Claims, volumes, storage classes and CSINodes.
    storage: HashMap<StorageKey, StorageObject>,
}

/// A binding (or a deletion) on its way to the binder through the simulated watch.
#[derive(Debug)]
struct WatchEvent {
    deliver_at: Instant,
    change: Change,
}

/// What a simulated watch event says.
#[derive(Debug)]
enum Change {
    /// A pod added or changed (bound).
    Pod(PodInfo),
    /// A pod deleted.
    Deleted(PodInfo),
    /// A claim or volume the simulated PV controller changed.
    Storage(StorageObject),
}

/// The in-memory API server: pods and nodes, Bindings, events and conditions.
#[derive(Debug)]
pub struct SimCluster {
    store: Mutex<Store>,
    watch_tx: mpsc::UnboundedSender<WatchEvent>,
    watch_latency: Duration,
    faults: Faults,
    draws: AtomicU64,
    bound_pending: AtomicUsize,
    bind_latency: Recorder,
    e2e_latency: Recorder,
    events_in_flight: AtomicUsize,
    max_events_in_flight: AtomicUsize,
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
                Change::Storage(obj) => ClusterEvent::StorageApplied(obj),
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
        s.pods.insert(
            uid,
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
                failed_scheduling_events: 0,
                arrived: pending.then(Instant::now),
                bound_at: None,
            },
        );
    }

    /// Adds or replaces a claim, volume, storage class or CSINode.
    pub fn add_storage(&self, obj: StorageObject) {
        self.store.lock().storage.insert(obj.key(), obj);
    }

    /// A claim, volume, storage class or CSINode.
    pub fn storage_object(&self, key: &StorageKey) -> Option<StorageObject> {
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
        for obj in [StorageObject::Volume(volume), StorageObject::Claim(claim)] {
            s.storage.insert(obj.key(), obj.clone());
            let _ = self.watch_tx.send(WatchEvent {
                deliver_at,
                change: Change::Storage(obj),
            });
        }
    }

    fn claim_of(s: &Store, claim: &ClaimRef) -> Result<proto::PersistentVolumeClaim, ApiError> {
        match s.storage.get(&StorageKey::Claim(claim.key())) {
            Some(StorageObject::Claim(c)) if claim.uid.is_empty() || c.uid == claim.uid => Ok(c.clone()),
            Some(StorageObject::Claim(_)) => Err(ApiError::Conflict(format!(
                "persistentvolumeclaim {} was recreated",
                claim.key()
            ))),
            _ => Err(ApiError::NotFound(format!(
                "persistentvolumeclaims \"{}\" not found",
                claim.name
            ))),
        }
    }

    /// One pod's record.
    pub fn pod(&self, uid: &str) -> Option<PodRecord> {
        self.store.lock().pods.get(uid).cloned()
    }

    /// Every pod the binder was asked to schedule.
    pub fn pending_pods(&self) -> Vec<PodRecord> {
        self.store.lock().pods.values().filter(|p| p.pending).cloned().collect()
    }

    /// Pending pods bound so far.
    pub fn bound_count(&self) -> usize {
        self.bound_pending.load(Ordering::Relaxed)
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
        let Some(record) = uid.as_ref().and_then(|u| s.pods.get_mut(u)) else {
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
        let Some(StorageObject::Volume(v)) = s.storage.get(&StorageKey::Volume(volume.to_string())).cloned() else {
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
        let provisioner = match s.storage.get(&StorageKey::Class(c.storage_class_name.clone())) {
            Some(StorageObject::Class(class)) => class.provisioner.clone(),
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
            .pods
            .get_mut(&pod.uid)
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
            .pods
            .get_mut(&pod.uid)
            .ok_or_else(|| ApiError::NotFound(format!("pods \"{}\" not found", pod.name)))?;
        record.unschedulable_message = Some(message.to_string());
        record.failed_scheduling_events += 1;
        Ok(())
    }

    async fn nominate(&self, pod: &PodRef, node: &str) -> Result<(), ApiError> {
        let mut s = self.store.lock();
        let record = s
            .pods
            .get_mut(&pod.uid)
            .ok_or_else(|| ApiError::NotFound(format!("pods \"{}\" not found", pod.name)))?;
        record.nominated_node = Some(node.to_string());
        Ok(())
    }

    async fn clear_nomination(&self, pod: &PodRef) -> Result<(), ApiError> {
        let mut s = self.store.lock();
        let record = s
            .pods
            .get_mut(&pod.uid)
            .ok_or_else(|| ApiError::NotFound(format!("pods \"{}\" not found", pod.name)))?;
        record.nominated_node = None;
        Ok(())
    }

    /// Deletes the victim at once (the simulation has no kubelet and no grace period) and delivers
    /// the deletion through the watch.
    async fn preempt(
        &self,
        victim: &PodRef,
        preemptor: &PodRef,
        node: &str,
        _scheduler_name: &str,
    ) -> Result<(), ApiError> {
        let mut s = self.store.lock();
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
        s.preempted.push((record, preemptor.uid.clone(), node.to_string()));
        drop(s);
        let _ = self.watch_tx.send(WatchEvent {
            deliver_at: Instant::now() + self.watch_latency,
            change: Change::Deleted(info),
        });
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// In-process decision replicas
// ---------------------------------------------------------------------------------------------

/// Server-side timings of the in-process replicas.
#[derive(Debug, Default)]
struct DecisionTimings {
    /// SyncSnapshot plus Schedule, per batch.
    decisions: Recorder,
    /// Schedule alone.
    schedule: Recorder,
    /// SyncSnapshot alone.
    syncs: Recorder,
}

/// PlacementService that times each call, delegating to the real service.
struct TimedApi {
    inner: PlacementApi,
    timings: Arc<DecisionTimings>,
    /// The sync the next Schedule follows (the binder decides one batch at a time).
    last_sync: Mutex<Option<Duration>>,
}

#[tonic::async_trait]
impl PlacementService for TimedApi {
    async fn sync_snapshot(
        &self,
        request: tonic::Request<proto::SyncSnapshotRequest>,
    ) -> Result<tonic::Response<proto::SyncSnapshotResponse>, tonic::Status> {
        let started = Instant::now();
        let r = self.inner.sync_snapshot(request).await;
        let took = started.elapsed();
        self.timings.syncs.record(took);
        let mut last = self.last_sync.lock();
        *last = Some(last.unwrap_or_default() + took);
        r
    }

    async fn rank(
        &self,
        request: tonic::Request<proto::RankRequest>,
    ) -> Result<tonic::Response<proto::RankResponse>, tonic::Status> {
        self.inner.rank(request).await
    }

    async fn schedule(
        &self,
        request: tonic::Request<proto::ScheduleRequest>,
    ) -> Result<tonic::Response<proto::ScheduleResponse>, tonic::Status> {
        let started = Instant::now();
        let r = self.inner.schedule(request).await;
        let took = started.elapsed();
        if r.is_ok() {
            self.timings.schedule.record(took);
            let sync = self.last_sync.lock().take().unwrap_or_default();
            self.timings.decisions.record(sync + took);
        }
        r
    }

    async fn list_policies(
        &self,
        request: tonic::Request<proto::ListPoliciesRequest>,
    ) -> Result<tonic::Response<proto::ListPoliciesResponse>, tonic::Status> {
        self.inner.list_policies(request).await
    }
}

/// A decision replica serving on a local port, on a runtime of its own (its own worker threads),
/// as a replica in its own process would: its connection tasks do not queue behind the binder's.
struct LocalReplica {
    url: String,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<Result<(), tonic::transport::Error>>,
    _runtime: OwnRuntime,
}

/// A runtime that may be dropped anywhere: dropping a [`tokio::runtime::Runtime`] blocks, which
/// an async context must not do (it panics), so this one shuts down in the background, also when
/// a simulation ends early with an error.
struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl LocalReplica {
    async fn start(
        config: &ServerConfig,
        timings: Arc<DecisionTimings>,
        metrics: Arc<ServiceMetrics>,
    ) -> Result<Self, SimError> {
        let inner = PlacementApi::new(config.service.clone(), metrics).map_err(|e| SimError::Replica(e.to_string()))?;
        let service = PlacementServiceServer::new(TimedApi {
            inner,
            timings,
            last_sync: Mutex::new(None),
        })
        .max_decoding_message_size(config.max_message_bytes)
        .max_encoding_message_size(config.max_message_bytes);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| SimError::Replica(e.to_string()))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| SimError::Replica(e.to_string()))?;
        let addr = listener.local_addr().map_err(|e| SimError::Replica(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sim-replica")
            .enable_all()
            .build()
            .map_err(|e| SimError::Replica(e.to_string()))?;
        let handle = runtime.handle().clone();
        let runtime = OwnRuntime(Some(runtime));
        let listener = {
            let _in_runtime = handle.enter();
            tokio::net::TcpListener::from_std(listener).map_err(|e| SimError::Replica(e.to_string()))?
        };
        let (shutdown, stop) = oneshot::channel::<()>();
        let task = handle.spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                // TCP_NODELAY on accepted connections: without it, responses larger than a segment
                // wait for the client's delayed ACK (40 ms per call on Linux).
                .serve_with_incoming_shutdown(
                    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
                    async {
                        let _ = stop.await;
                    },
                ),
        );
        Ok(Self {
            url: format!("http://{addr}"),
            shutdown,
            task,
            _runtime: runtime,
        })
    }

    async fn stop(self) {
        let _ = self.shutdown.send(());
        if let Ok(Ok(Err(e))) = tokio::time::timeout(Duration::from_secs(5), self.task).await {
            tracing::warn!(error = %e, "in-process decision replica failed");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

/// Pods submitted between two yields to the runtime.
const SUBMIT_CHUNK: usize = 500;

/// Submits pending pods to the cluster and the binder, all at once or at `rate` per second.
async fn submit(binder: Binder<SimCluster>, pods: Vec<PodInfo>, rate: Option<f64>, submitted: Arc<AtomicUsize>) {
    let total = pods.len();
    let started = Instant::now();
    let mut pods = pods.into_iter();
    let mut done = 0usize;
    while done < total {
        let due = match rate {
            Some(r) if r > 0.0 => ((started.elapsed().as_secs_f64() * r) as usize).clamp(done.max(1).min(total), total),
            _ => total,
        };
        for info in pods.by_ref().take(due - done) {
            binder.api().add_pod(info.clone(), true);
            binder.handle(ClusterEvent::PodApplied(info));
            done += 1;
            submitted.store(done, Ordering::Relaxed);
            if done.is_multiple_of(SUBMIT_CHUNK) {
                // Let the binder run meanwhile, as a watch delivers events while pods are created:
                // without a yield the binder's loop, woken from this task (so queued in this
                // worker's LIFO slot, which no other worker steals), starts only after the last pod.
                tokio::task::yield_now().await;
            }
        }
        if done < total {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Runs a simulation to the end (every pending pod bound or unschedulable) or the timeout.
pub async fn simulate(config: SimConfig) -> Result<Summary, SimError> {
    Ok(run(config, false).await?.0)
}

/// [`simulate`], also returning every pod of the in-memory cluster as it ended (its node and the
/// annotations its Binding set).
pub async fn simulate_with_pods(config: SimConfig) -> Result<(Summary, Vec<PodRecord>), SimError> {
    run(config, true).await
}

async fn run(config: SimConfig, keep_pods: bool) -> Result<(Summary, Vec<PodRecord>), SimError> {
    let SimConfig {
        cluster,
        decision,
        binder: binder_config,
        replica,
        server,
        arrival_rate,
        timeout,
        watch_latency,
        faults,
        progress,
        progress_tx,
        record_outcomes,
        experiments,
    } = config;
    let ours = binder_config
        .scheduler_names
        .first()
        .cloned()
        .ok_or(SimError::NoSchedulerName)?;
    let workload = match cluster {
        ClusterSource::Synthetic(s) => Workload::synthetic(&s, &ours),
        ClusterSource::File { path, all_pending } => {
            let text = read(&path)?;
            Workload::from_kubectl_json(&text, &binder_config.scheduler_names, all_pending)?
        }
        ClusterSource::Workload(w) => w,
    };
    workload.validate()?;

    let timings = Arc::new(DecisionTimings::default());
    // The in-process replicas' metrics, each pod's time in extender calls kept.
    let service_metrics = Arc::new(ServiceMetrics::new().keeping_extender_samples());
    let mut local = Vec::new();
    let (endpoints, in_process) = match decision {
        DecisionSource::InProcess { replicas } => {
            for _ in 0..replicas.max(1) {
                local.push(LocalReplica::start(&server, Arc::clone(&timings), Arc::clone(&service_metrics)).await?);
            }
            (local.iter().map(|r| r.url.clone()).collect(), true)
        }
        DecisionSource::Endpoints(list) => (list, false),
    };
    let pool = Arc::new(ReplicaPool::new(EndpointSource::Static(endpoints.clone()), replica)?);

    let (api, sim_watch) = SimCluster::new(faults.clone(), watch_latency);
    for n in &workload.nodes {
        api.add_node(n.clone());
    }
    for o in &workload.storage {
        api.add_storage(o.clone());
    }
    let metrics = Arc::new(BinderMetrics::new());
    let (_leader, leader_rx) = watch::channel(true);
    let batch_size = binder_config.batch_size;
    let binder_config_in_flight = binder_config.batches_in_flight;
    let binder = Binder::new(binder_config, api, Arc::clone(&pool), Arc::clone(&metrics), leader_rx);
    if let Some(set) = experiments {
        binder.experiments().replace(set)?;
    }
    let feeder = tokio::spawn(sim_watch.feed(binder.clone()));

    let node_count = workload.nodes.len();
    let prebound = workload.bound.len();
    let ignored = workload.ignored;
    for n in workload.nodes {
        binder.handle(ClusterEvent::NodeApplied(n));
    }
    for pdb in workload.pdbs {
        binder.handle(ClusterEvent::PdbApplied(pdb));
    }
    for o in workload.storage {
        binder.handle(ClusterEvent::StorageApplied(o));
    }
    // Each pod moves into the in-memory cluster once the binder has its copy: the whole list is
    // never held twice.
    for p in workload.bound {
        binder.handle(ClusterEvent::PodApplied(p.clone()));
        binder.api().add_pod(p, false);
    }
    binder.set_synced();

    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let runner = tokio::spawn({
        let b = binder.clone();
        async move {
            b.run(async {
                let _ = stop_rx.await;
            })
            .await;
        }
    });
    let total = workload.pending.len();
    let submitted = Arc::new(AtomicUsize::new(0));
    let cpu_before = placement_scheduler::procstat::Proc::Myself.cpu();
    let started = Instant::now();
    let arrivals = tokio::spawn(submit(
        binder.clone(),
        workload.pending,
        arrival_rate,
        Arc::clone(&submitted),
    ));

    let deadline = started + timeout;
    let mut next_print = started + Duration::from_secs(1);
    let mut first_bound: Option<Instant> = None;
    let (completed, wall) = loop {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let c = binder.queue_counts();
        let now = Instant::now();
        let p = Progress {
            elapsed_seconds: (now - started).as_secs_f64(),
            submitted: submitted.load(Ordering::Relaxed),
            bound: binder.api().bound_count(),
            unschedulable: c.unschedulable,
            pending: c.active + c.backoff + c.in_flight,
        };
        if p.bound > 0 && first_bound.is_none() {
            first_bound = Some(now);
        }
        if let Some(tx) = &progress_tx {
            tx.send_replace(p);
        }
        if progress && now >= next_print {
            next_print += Duration::from_secs(1);
            eprintln!(
                "[{:6.1}s] bound {:>7}  unschedulable {:>6}  pending {:>7}  {:>8.0} pods/s",
                p.elapsed_seconds,
                p.bound,
                p.unschedulable,
                p.pending + (total - p.submitted),
                p.bound as f64 / p.elapsed_seconds.max(1e-9)
            );
        }
        // Nothing left to decide or bind, and every binding seen by the binder.
        if p.submitted == total && p.pending == 0 && binder.assumed() == 0 {
            break (true, now - started);
        }
        if now >= deadline {
            break (false, now - started);
        }
    };
    let cpu_seconds = placement_scheduler::procstat::Proc::Myself
        .cpu()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before).as_secs_f64());
    arrivals.abort();
    let _ = stop_tx.send(());
    let _ = runner.await;
    feeder.abort();
    let replica_errors: u64 = pool.all().iter().map(|r| r.errors.load(Ordering::Relaxed)).sum();
    for r in local {
        r.stop().await;
    }

    let sim = binder.api();
    // The histograms' sums and counts are only readable through the text exposition.
    let exposition = metrics.encode();
    let mut s = Summary {
        completed,
        nodes: node_count,
        prebound_pods: prebound,
        pending_pods: total,
        ignored_pods: ignored,
        decision_replicas: endpoints.len(),
        in_process_replicas: in_process,
        wall_seconds: wall.as_secs_f64(),
        decision: timings.decisions.summary(),
        schedule_call: timings.schedule.summary(),
        sync_call: timings.syncs.summary(),
        extender_per_pod: LatencySummary::of(&service_metrics.extenders.samples()),
        decision_client_mean_ms: mean_ms(
            exposed(&exposition, "binder_decision_duration_seconds_sum"),
            exposed(&exposition, "binder_decision_duration_seconds_count"),
        ),
        sync_client_mean_ms: mean_ms(
            exposed(&exposition, "binder_snapshot_sync_duration_seconds_sum"),
            exposed(&exposition, "binder_snapshot_sync_duration_seconds_count"),
        ),
        bind: sim.bind_latency.summary(),
        arrival_to_bound: sim.e2e_latency.summary(),
        batches: exposed(&exposition, "binder_batch_size_count") as u64,
        max_batch_size: batch_size,
        mean_batch_size: mean_ms(
            exposed(&exposition, "binder_batch_size_sum"),
            exposed(&exposition, "binder_batch_size_count"),
        )
        .map_or(0.0, |ms| ms / 1e3),
        syncs_full: metrics.syncs_total("full"),
        syncs_delta: metrics.syncs_total("delta"),
        assumed_adopted: metrics.assumed_snapshots_total("adopted"),
        assumed_stale: metrics.assumed_snapshots_total("stale"),
        batches_in_flight: binder_config_in_flight,
        most_batches_in_flight: binder.most_batches_in_flight(),
        first_bound_seconds: first_bound.map(|t| (t - started).as_secs_f64()),
        batches_partitioned: metrics.batches_total("partition"),
        batches_alone: metrics.batches_total("alone"),
        partition_returns: metrics.partition_returns_total(),
        cpu_seconds,
        replica_errors,
        binds_ok: metrics.binds_total("ok"),
        binds_failed: metrics.binds_total("error"),
        binds_conflict: metrics.binds_total("conflict") + metrics.binds_total("not_found"),
        max_events_in_flight: sim.max_events_in_flight.load(Ordering::Relaxed),
        ..Summary::default()
    };
    if binder.experiments().current().active() {
        s.experiments = Some(binder.experiment_report());
    }
    let store = sim.store.lock();
    s.fill_from(&store, binder.queue_counts().unschedulable);
    if record_outcomes {
        s.outcomes = store
            .pods
            .values()
            .filter(|p| p.pending)
            .map(|p| {
                let outcome = match (p.info.node_name(), &p.unschedulable_message) {
                    (Some(node), _) => Outcome::Bound(node.to_string()),
                    (None, Some(m)) => Outcome::Unschedulable(m.clone()),
                    (None, None) => Outcome::Pending,
                };
                (p.info.key(), outcome)
            })
            .collect();
    }
    let pods = if keep_pods {
        store.pods.values().cloned().collect()
    } else {
        Vec::new()
    };
    Ok((s, pods))
}

fn read(path: &Path) -> Result<String, SimError> {
    std::fs::read_to_string(path).map_err(|source| SimError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn mean_ms(sum_seconds: f64, count: f64) -> Option<f64> {
    (count > 0.0).then(|| sum_seconds * 1e3 / count)
}

/// The sum over every label set of a sample in a Prometheus text exposition (0 when absent).
fn exposed(text: &str, name: &str) -> f64 {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let value = match rest.strip_prefix('{') {
                Some(labelled) => labelled.split_once("} ")?.1,
                None => rest.strip_prefix(' ')?,
            };
            value.trim().parse::<f64>().ok()
        })
        .sum()
}

// ---------------------------------------------------------------------------------------------
// Summary
// ---------------------------------------------------------------------------------------------

/// Where a pending pod ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Bound to the node.
    Bound(String),
    /// Left unbound with kube-scheduler's message.
    Unschedulable(String),
    /// Neither (the run timed out).
    Pending,
}

/// A message and how many pods got it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MessageCount {
    /// kube-scheduler's message.
    pub message: String,
    /// Pods.
    pub count: usize,
}

/// Distribution of a per-node ratio, in percent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
    /// Population standard deviation.
    pub stddev: f64,
}

impl Spread {
    fn of(values: &mut [f64]) -> Self {
        if values.is_empty() {
            return Self::default();
        }
        values.sort_by(f64::total_cmp);
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        Self {
            min: values[0],
            p50: percentile(values, 0.5),
            max: values[values.len() - 1],
            mean,
            stddev: var.sqrt(),
        }
    }
}

/// Requested over allocatable per node after the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Utilization {
    /// Cpu requested / allocatable, percent.
    pub cpu: Spread,
    /// Memory requested / allocatable, percent.
    pub memory: Spread,
    /// Nodes with no pod at all.
    pub empty_nodes: usize,
    /// Nodes that received at least one of the pending pods.
    pub nodes_used: usize,
}

/// Consistency checks over the final state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Checks {
    /// No pod bound twice, no bind request for a pod the binder had seen bound, one Scheduled
    /// event per binding the binder saw succeed.
    pub every_pod_bound_once: bool,
    /// Pods with more than one binding applied.
    pub double_bound: usize,
    /// Bind requests answered 409/404 that the binder should not have made (not after a lost reply).
    pub unexpected_rejections: usize,
    /// Pods whose Scheduled events do not match their binding.
    pub bad_scheduled_events: usize,
    /// Pods bound to a node the cluster does not have.
    pub bound_to_unknown_node: usize,
    /// Nodes whose bound pods request more than allocatable (cpu, memory, storage, extended
    /// resources) or number more than its `pods`, after the run.
    pub nodes_overcommitted: usize,
    /// Nodes already overcommitted before the run (a recorded cluster may have some).
    pub nodes_overcommitted_before: usize,
    /// Pods the engine's conversion refused when computing usage (should be 0).
    pub unparsable_pods: usize,
    /// placed + unschedulable + still pending = pending pods, and the binder's counters agree.
    pub counts_add_up: bool,
    /// Pending pods with required per-node anti-affinity against their own app.
    pub anti_affinity_pods: usize,
    /// Of those, pods placed on a node holding another pod of their app (should be 0).
    pub anti_affinity_broken: usize,
    /// Apps whose pods spread over zones with DoNotSchedule maxSkew 1 and select no nodes by
    /// affinity (those whose final spread is checked).
    pub spread_apps: usize,
    /// Of those, apps left more than one pod apart between two zones (should be 0).
    pub spread_broken: usize,
}

/// The result of a simulation run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Every pending pod ended bound or unschedulable before the timeout.
    pub completed: bool,
    /// Nodes.
    pub nodes: usize,
    /// Pods already bound before the run.
    pub prebound_pods: usize,
    /// Pods the binder was asked to schedule.
    pub pending_pods: usize,
    /// Pods of a recorded cluster left out (finished, deleting, another scheduler's).
    pub ignored_pods: usize,
    /// Decision replicas.
    pub decision_replicas: usize,
    /// Whether the replicas ran in this process (then server-side timings are known).
    pub in_process_replicas: bool,
    /// Pending pods bound.
    pub placed: usize,
    /// Pending pods left unbound with an unschedulable condition.
    pub unschedulable: usize,
    /// Pending pods neither bound nor unschedulable (only when the run timed out).
    pub still_pending: usize,
    /// Pods deleted by preemption (to make room for more important pending pods).
    pub preempted: usize,
    /// Of those, pods that were pending in this run (decided, then preempted, bound or not yet).
    pub preempted_pending: usize,
    /// Of those, pods whose binding had been applied before they were preempted.
    pub preempted_after_bind: usize,
    /// The most frequent unschedulable messages (up to 3).
    pub top_unschedulable: Vec<MessageCount>,
    /// Distinct unschedulable messages.
    pub distinct_unschedulable_messages: usize,
    /// From the first submission to the last binding seen.
    pub wall_seconds: f64,
    /// Pods placed per second of wall time.
    pub pods_per_second: f64,
    /// Per batch: SyncSnapshot plus Schedule, server side (in-process replicas only).
    pub decision: Option<LatencySummary>,
    /// Schedule calls alone, server side.
    pub schedule_call: Option<LatencySummary>,
    /// SyncSnapshot calls alone, server side.
    pub sync_call: Option<LatencySummary>,
    /// Mean decision latency per batch as the binder measured it (network and failover included).
    pub decision_client_mean_ms: Option<f64>,
    /// Mean SyncSnapshot latency as the binder measured it.
    pub sync_client_mean_ms: Option<f64>,
    /// Per pod sent to an extender, the time its extender calls took (filter and prioritize,
    /// in-process replicas only).
    pub extender_per_pod: Option<LatencySummary>,
    /// Binding requests (in the in-memory cluster, injected delay included).
    pub bind: Option<LatencySummary>,
    /// From submission to binding, per placed pod.
    pub arrival_to_bound: Option<LatencySummary>,
    /// Decision batches.
    pub batches: u64,
    /// Configured most pods per batch.
    pub max_batch_size: usize,
    /// Mean pods per batch.
    pub mean_batch_size: f64,
    /// Full snapshot syncs.
    pub syncs_full: u64,
    /// Delta snapshot syncs.
    pub syncs_delta: u64,
    /// Batches whose assumed snapshot the replica kept was the binder's state after them, so the
    /// next batch needed no sync to carry their placements back.
    pub assumed_adopted: u64,
    /// Batches whose assumed snapshot was not the state (something else changed meanwhile).
    pub assumed_stale: u64,
    /// Configured batches decided at once (`--batches-in-flight`).
    pub batches_in_flight: usize,
    /// Most batches decided at once.
    pub most_batches_in_flight: usize,
    /// When the first pod was bound, from the start of the run (after the first full sync).
    pub first_bound_seconds: Option<f64>,
    /// Pods placed per second from the first binding on: the rate once the replicas hold the
    /// cluster, without the first full sync.
    pub steady_pods_per_second: f64,
    /// Batches decided on one node partition while others were in flight.
    pub batches_partitioned: u64,
    /// Batches decided alone on the whole cluster.
    pub batches_alone: u64,
    /// Pods a partitioned decision sent back to be decided alone (no node of the partition fit).
    pub partition_returns: u64,
    /// CPU time of the whole process over the run (user + system, every thread: the in-memory
    /// cluster, the binder and in-process replicas), when the platform tells it.
    pub cpu_seconds: Option<f64>,
    /// Failed calls to decision replicas.
    pub replica_errors: u64,
    /// Binding requests answered OK.
    pub binds_ok: u64,
    /// Binding requests that failed and were retried.
    pub binds_failed: u64,
    /// Binding requests answered 409 or 404.
    pub binds_conflict: u64,
    /// Most `Scheduled` event writes in flight at once.
    pub max_events_in_flight: usize,
    /// Node utilization after the run.
    pub utilization: Utilization,
    /// Consistency checks.
    pub checks: Checks,
    /// Each pending pod's outcome by `namespace/name` (with [`SimConfig::record_outcomes`]).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub outcomes: std::collections::BTreeMap<String, Outcome>,
    /// The per-arm comparison, when experiments or shadows ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experiments: Option<Report>,
}

/// Usage per node, with the engine's parsing and effective-request rules.
fn usage<'a>(
    nodes: &HashMap<String, proto::Node>,
    pods: impl Iterator<Item = &'a proto::Pod>,
    unparsable: &mut usize,
) -> HashMap<String, (Resources, i64)> {
    let mut used: HashMap<String, (Resources, i64)> =
        nodes.keys().map(|n| (n.clone(), (Resources::default(), 0))).collect();
    for p in pods {
        let Some(u) = used.get_mut(&p.node_name) else {
            continue;
        };
        match convert::pod("pod", p) {
            Ok(spec) => u.0.add(&spec.requests),
            Err(_) => *unparsable += 1,
        }
        u.1 += 1;
    }
    used
}

fn overcommitted(allocatable: &Resources, allowed_pods: i64, used: &Resources, pods: i64) -> bool {
    used.milli_cpu > allocatable.milli_cpu
        || used.memory > allocatable.memory
        || used.ephemeral_storage > allocatable.ephemeral_storage
        || used.scalars.iter().any(|(name, v)| *v > allocatable.scalar(name))
        || pods > allowed_pods
}

fn ratio(used: i64, allocatable: i64) -> Option<f64> {
    (allocatable > 0).then(|| used as f64 * 100.0 / allocatable as f64)
}

impl Summary {
    fn fill_from(&mut self, store: &Store, binder_unschedulable: usize) {
        let mut messages: HashMap<&str, usize> = HashMap::new();
        let mut c = Checks::default();
        for p in store.pods.values().filter(|p| p.pending) {
            if p.info.node_name().is_some() {
                self.placed += 1;
                if !store.nodes.contains_key(&p.info.spec.node_name) {
                    c.bound_to_unknown_node += 1;
                }
            } else if let Some(m) = &p.unschedulable_message {
                self.unschedulable += 1;
                *messages.entry(m.as_str()).or_default() += 1;
            } else {
                self.still_pending += 1;
            }
            if p.binds_applied > 1 {
                c.double_bound += 1;
            }
            if p.rejected_binds > 0 && !p.reply_lost {
                c.unexpected_rejections += 1;
            }
            let expected_events = u32::from(p.binds_applied == 1 && !p.reply_lost);
            if p.wrong_scheduled_message || p.scheduled_events != expected_events {
                c.bad_scheduled_events += 1;
            }
        }
        self.pods_per_second = self.placed as f64 / self.wall_seconds.max(1e-9);
        if let Some(first) = self.first_bound_seconds {
            self.steady_pods_per_second = self.placed as f64 / (self.wall_seconds - first).max(1e-9);
        }
        let mut top: Vec<MessageCount> = messages
            .into_iter()
            .map(|(m, count)| MessageCount {
                message: m.to_string(),
                count,
            })
            .collect();
        top.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.message.cmp(&b.message)));
        self.distinct_unschedulable_messages = top.len();
        top.truncate(3);
        self.top_unschedulable = top;

        // Usage before (pre-bound pods only) and after the run.
        let before = usage(
            &store.nodes,
            store.pods.values().filter(|p| !p.pending).map(|p| &p.info.spec),
            &mut 0,
        );
        let after = usage(
            &store.nodes,
            store.pods.values().map(|p| &p.info.spec),
            &mut c.unparsable_pods,
        );
        let used_nodes: HashSet<&str> = store
            .pods
            .values()
            .filter(|p| p.pending)
            .filter_map(|p| p.info.node_name())
            .collect();
        let (mut cpu, mut memory) = (Vec::new(), Vec::new());
        for (name, node) in &store.nodes {
            let Ok(spec) = convert::node("node", node) else {
                continue;
            };
            let a = &spec.allocatable;
            if let Some((u, n)) = before.get(name) {
                if overcommitted(a, spec.allowed_pods, u, *n) {
                    c.nodes_overcommitted_before += 1;
                }
            }
            if let Some((u, n)) = after.get(name) {
                if overcommitted(a, spec.allowed_pods, u, *n) {
                    c.nodes_overcommitted += 1;
                }
                if *n == 0 {
                    self.utilization.empty_nodes += 1;
                }
                cpu.extend(ratio(u.milli_cpu, a.milli_cpu));
                memory.extend(ratio(u.memory, a.memory));
            }
        }
        self.utilization.cpu = Spread::of(&mut cpu);
        self.utilization.memory = Spread::of(&mut memory);
        self.utilization.nodes_used = used_nodes.len();

        self.check_topology(store, &mut c);
        c.every_pod_bound_once = c.double_bound == 0 && c.unexpected_rejections == 0 && c.bad_scheduled_events == 0;
        self.preempted = store.preempted.len();
        self.preempted_pending = store.preempted.iter().filter(|(p, ..)| p.pending).count();
        self.preempted_after_bind = store
            .preempted
            .iter()
            .filter(|(p, ..)| p.pending && p.binds_applied > 0)
            .count();
        let lost: usize = store.pods.values().filter(|p| p.pending && p.reply_lost).count()
            + store
                .preempted
                .iter()
                .filter(|(p, ..)| p.pending && p.reply_lost)
                .count();
        c.counts_add_up = self.placed + self.unschedulable + self.still_pending + self.preempted_pending
            == self.pending_pods
            && self.binds_ok as usize + lost == self.placed + self.preempted_after_bind
            && (!self.completed || (self.still_pending == 0 && self.unschedulable == binder_unschedulable));
        self.checks = c;
    }

    /// Checks required per-node anti-affinity and zone spreading (maxSkew 1) among pending pods
    /// that use them on their own app label, as `synth::topology_pods` makes them.
    fn check_topology(&self, store: &Store, c: &mut Checks) {
        let zone_key = "topology.kubernetes.io/zone";
        let host_key = "kubernetes.io/hostname";
        let own_app = |sel: Option<&proto::LabelSelector>, spec: &proto::Pod| {
            sel.is_some_and(|s| s.match_expressions.is_empty() && s.match_labels.len() == 1)
                && sel.and_then(|s| s.match_labels.get("app")) == spec.labels.get("app")
        };
        let mut per_node: HashMap<(&str, &str), usize> = HashMap::new();
        let mut per_zone: HashMap<&str, HashMap<&str, usize>> = HashMap::new();
        let zones: HashSet<&str> = store
            .nodes
            .values()
            .filter_map(|n| n.labels.get(zone_key).map(String::as_str))
            .collect();
        for p in store.pods.values().filter(|p| p.pending) {
            let spec = &p.info.spec;
            let Some(app) = spec.labels.get("app").map(String::as_str) else {
                continue;
            };
            let anti = spec.pod_anti_affinity.as_ref().is_some_and(|a| {
                a.required
                    .iter()
                    .any(|t| t.topology_key == host_key && own_app(t.label_selector.as_ref(), spec))
            });
            let spread = spec.node_selector.is_empty()
                && spec.node_affinity.as_ref().is_none_or(|a| a.required.is_none())
                && spec.topology_spread_constraints.iter().any(|t| {
                    t.topology_key == zone_key
                        && t.max_skew == 1
                        && t.when_unsatisfiable == "DoNotSchedule"
                        && own_app(t.label_selector.as_ref(), spec)
                });
            if anti {
                c.anti_affinity_pods += 1;
            }
            let Some(node) = p.info.node_name() else {
                if spread {
                    per_zone.entry(app).or_default();
                }
                continue;
            };
            if anti {
                *per_node.entry((app, node)).or_default() += 1;
            }
            if spread {
                let zone = store
                    .nodes
                    .get(node)
                    .and_then(|n| n.labels.get(zone_key))
                    .map_or("", String::as_str);
                *per_zone.entry(app).or_default().entry(zone).or_default() += 1;
            }
        }
        c.spread_apps = per_zone.len();
        c.anti_affinity_broken = per_node.values().filter(|n| **n > 1).copied().sum();
        c.spread_broken = per_zone
            .values()
            .filter(|counts| {
                let of = |z: &str| counts.get(z).copied().unwrap_or(0);
                let max = zones.iter().map(|z| of(z)).max().unwrap_or(0);
                let min = zones.iter().map(|z| of(z)).min().unwrap_or(0);
                max > min + 1
            })
            .count();
    }

    /// Whether the run completed and every check passed.
    pub fn passed(&self) -> bool {
        let c = &self.checks;
        self.completed
            && c.anti_affinity_broken == 0
            && c.spread_broken == 0
            && c.every_pod_bound_once
            && c.bound_to_unknown_node == 0
            && c.nodes_overcommitted <= c.nodes_overcommitted_before
            && c.unparsable_pods == 0
            && c.counts_add_up
    }
}

fn latency_line(out: &mut String, label: &str, l: Option<&LatencySummary>, note: &str) -> fmt::Result {
    match l {
        Some(l) => writeln!(
            out,
            "  {label:<20} p50 {:>9.3} ms   p99 {:>9.3} ms   max {:>9.3} ms   mean {:>9.3} ms   ({} samples{note})",
            l.p50_ms, l.p99_ms, l.max_ms, l.mean_ms, l.count
        ),
        None => writeln!(out, "  {label:<20} n/a{note}"),
    }
}

fn spread_line(out: &mut String, label: &str, s: &Spread) -> fmt::Result {
    writeln!(
        out,
        "    {label:<7} min {:>5.1}%   p50 {:>5.1}%   max {:>5.1}%   mean {:>5.1}%   stddev {:>5.1}",
        s.min, s.p50, s.max, s.mean, s.stddev
    )
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut o = String::new();
        let yes = |b: bool| if b { "yes" } else { "no" };
        writeln!(
            o,
            "simulation: {} nodes, {} pods already bound, {} pending pods, {} decision replica(s){}",
            self.nodes,
            self.prebound_pods,
            self.pending_pods,
            self.decision_replicas,
            if self.in_process_replicas { " in-process" } else { "" }
        )?;
        if !self.completed {
            writeln!(o, "  TIMED OUT before every pod was bound or found unschedulable")?;
        }
        writeln!(o, "  {:<20} {}", "pods placed", self.placed)?;
        if self.preempted > 0 {
            writeln!(
                o,
                "  {:<20} {} ({} of them pending pods bound earlier in the run)",
                "pods preempted", self.preempted, self.preempted_pending
            )?;
        }
        writeln!(
            o,
            "  {:<20} {} ({} distinct messages)",
            "unschedulable", self.unschedulable, self.distinct_unschedulable_messages
        )?;
        for m in &self.top_unschedulable {
            writeln!(o, "    {:>6} × {}", m.count, m.message)?;
        }
        if self.still_pending > 0 {
            writeln!(o, "  {:<20} {}", "still pending", self.still_pending)?;
        }
        if self.ignored_pods > 0 {
            writeln!(o, "  {:<20} {}", "pods ignored", self.ignored_pods)?;
        }
        writeln!(o, "  {:<20} {:.3} s", "wall time", self.wall_seconds)?;
        writeln!(o, "  {:<20} {:.0} pods/s", "throughput", self.pods_per_second)?;
        if let Some(first) = self.first_bound_seconds {
            writeln!(
                o,
                "  {:<20} {:.0} pods/s from the first binding (at {first:.1} s, after the first full sync)",
                "steady throughput", self.steady_pods_per_second
            )?;
        }
        latency_line(
            &mut o,
            "decision per batch",
            self.decision.as_ref(),
            "; server side: sync + Schedule",
        )?;
        latency_line(&mut o, "  Schedule call", self.schedule_call.as_ref(), "")?;
        latency_line(&mut o, "  SyncSnapshot call", self.sync_call.as_ref(), "")?;
        if let Some(m) = self.decision_client_mean_ms {
            write!(o, "  {:<20} mean {m:.3} ms (as the binder measured it", "  binder side")?;
            if let Some(s) = self.sync_client_mean_ms {
                write!(o, "; SyncSnapshot mean {s:.3} ms")?;
            }
            writeln!(o, ")")?;
        }
        if self.extender_per_pod.is_some() {
            latency_line(
                &mut o,
                "extenders per pod",
                self.extender_per_pod.as_ref(),
                "; filter + prioritize calls",
            )?;
        }
        latency_line(&mut o, "bind", self.bind.as_ref(), "")?;
        latency_line(&mut o, "arrival → bound", self.arrival_to_bound.as_ref(), "")?;
        writeln!(
            o,
            "  {:<20} {} (mean size {:.1} of at most {})",
            "batches", self.batches, self.mean_batch_size, self.max_batch_size
        )?;
        if self.batches_in_flight > 1 {
            writeln!(
                o,
                "  {:<20} up to {} ({} at most seen): {} batches on a node partition, {} alone on the whole cluster; {} pods sent back by a partition",
                "batches in flight", self.batches_in_flight, self.most_batches_in_flight, self.batches_partitioned, self.batches_alone, self.partition_returns
            )?;
        }
        if let Some(cpu) = self.cpu_seconds {
            writeln!(
                o,
                "  {:<20} {cpu:.2} s over the run, {:.0} µs per placed pod (this process: cluster, binder and in-process replicas)",
                "CPU",
                cpu * 1e6 / (self.placed.max(1) as f64)
            )?;
        }
        writeln!(
            o,
            "  {:<20} {} full, {} delta; {} batches assumed on the replica (its snapshot kept: the next sync sends only what else changed), {} stale",
            "snapshot syncs", self.syncs_full, self.syncs_delta, self.assumed_adopted, self.assumed_stale
        )?;
        writeln!(
            o,
            "  {:<20} {} ok, {} failed and retried, {} conflict/not found; {} replica errors",
            "bind requests", self.binds_ok, self.binds_failed, self.binds_conflict, self.replica_errors
        )?;
        writeln!(
            o,
            "  node utilization (requested / allocatable, {} nodes received pods, {} empty):",
            self.utilization.nodes_used, self.utilization.empty_nodes
        )?;
        spread_line(&mut o, "cpu", &self.utilization.cpu)?;
        spread_line(&mut o, "memory", &self.utilization.memory)?;
        let c = &self.checks;
        writeln!(o, "  checks:")?;
        writeln!(o, "    every pod bound exactly once: {}", yes(c.every_pod_bound_once))?;
        if !c.every_pod_bound_once {
            writeln!(
                o,
                "      ({} double-bound, {} unexpected 409/404, {} wrong Scheduled events)",
                c.double_bound, c.unexpected_rejections, c.bad_scheduled_events
            )?;
        }
        if c.nodes_overcommitted_before > 0 {
            writeln!(
                o,
                "    nodes overcommitted: {} ({} before the run)",
                c.nodes_overcommitted, c.nodes_overcommitted_before
            )?;
        } else {
            writeln!(o, "    nodes overcommitted: {}", c.nodes_overcommitted)?;
        }
        if c.bound_to_unknown_node > 0 || c.unparsable_pods > 0 {
            writeln!(
                o,
                "    pods bound to unknown nodes: {}; pods with unparsable requests: {}",
                c.bound_to_unknown_node, c.unparsable_pods
            )?;
        }
        if c.anti_affinity_pods > 0 {
            writeln!(
                o,
                "    pod anti-affinity and zone spreading honoured: {} ({} pods with anti-affinity; {} sharing a node, {} apps skewed)",
                yes(c.anti_affinity_broken == 0 && c.spread_broken == 0),
                c.anti_affinity_pods,
                c.anti_affinity_broken,
                c.spread_broken
            )?;
        }
        writeln!(o, "    counts add up: {}", yes(c.counts_add_up))?;
        if let Some(r) = &self.experiments {
            writeln!(o, "  experiments:")?;
            for line in r.to_string().lines() {
                writeln!(o, "    {line}")?;
            }
        }
        f.write_str(&o)
    }
}

// ---------------------------------------------------------------------------------------------
// CLI
// ---------------------------------------------------------------------------------------------

/// How the summary is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object.
    Json,
}

/// Parses `250ms`, `5s`, `2m`, `1h` or plain seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("invalid duration {s:?}"))?;
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1e3,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("invalid duration unit in {s:?} (use ms, s, m or h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("invalid duration {s:?}: {e}"))
}

/// Flags of `binder-agent simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// Nodes of the synthetic cluster.
    #[arg(long, default_value_t = 5000)]
    pub nodes: usize,
    /// Pending pods to schedule (synthetic cluster).
    #[arg(long, default_value_t = 20_000)]
    pub pods: usize,
    /// Pods already bound on each synthetic node before the run (DaemonSets first, then
    /// applications filling `--utilization-min`..`--utilization-max` of the node); 0 starts every
    /// node empty. Kubernetes' scalability envelope is 30.
    #[arg(long, default_value_t = 0)]
    pub bound_per_node: usize,
    /// Zones of the synthetic cluster.
    #[arg(long, default_value_t = 3)]
    pub zones: usize,
    /// Fraction of GPU nodes (tainted).
    #[arg(long, default_value_t = 0.02)]
    pub gpu_fraction: f64,
    /// Fraction of other nodes dedicated to a team (tainted).
    #[arg(long, default_value_t = 0.10)]
    pub tainted_fraction: f64,
    /// Fraction of spot nodes (PreferNoSchedule taint).
    #[arg(long, default_value_t = 0.20)]
    pub spot_fraction: f64,
    /// Fraction of cordoned nodes.
    #[arg(long, default_value_t = 0.01)]
    pub cordoned_fraction: f64,
    /// The `pods` allocatable of every node.
    #[arg(long, default_value_t = 110)]
    pub max_pods: i64,
    /// Lowest fraction of a node the already-bound pods request.
    #[arg(long, default_value_t = 0.40)]
    pub utilization_min: f64,
    /// Highest fraction of a node the already-bound pods request.
    #[arg(long, default_value_t = 0.60)]
    pub utilization_max: f64,
    /// Replicas per workload (Deployment-like pods sharing a spec); 1 makes every pod distinct.
    #[arg(long, default_value_t = 1)]
    pub replicas_per_workload: usize,
    /// Share of pending pods that are workload replicas when `--replicas-per-workload` > 1.
    #[arg(long, default_value_t = 0.5)]
    pub workload_share: f64,
    /// Share of pending pods that are replicas of highly available workloads (8 each) with
    /// required per-node pod anti-affinity and zone topology spreading (DoNotSchedule, maxSkew 1).
    #[arg(long, default_value_t = 0.0)]
    pub topology_share: f64,
    /// Seed of the synthetic cluster, the tie-breaks and the injected faults.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Load the cluster from `kubectl get nodes,pods -A -o json` output instead of synthesizing it
    /// (`kubectl get nodes,pods,pdb -A -o json` includes the PodDisruptionBudgets preemption honours;
    /// add `pvc,pv,storageclass,csinode,csidriver,csistoragecapacity` for the volume filters: the
    /// simulated PV controller binds every claim the binder writes a binding for, at once).
    #[arg(long, value_name = "FILE")]
    pub from_file: Option<PathBuf>,
    /// With `--from-file`, schedule every unbound pod, whatever scheduler it names.
    #[arg(long)]
    pub all_pending: bool,
    /// Scheduler names whose pods the binder places.
    #[arg(long = "scheduler-name", default_value = "placement-scheduler")]
    pub scheduler_names: Vec<String>,
    /// Use running decision replicas at these URLs instead of in-process ones.
    #[arg(long = "decision-address", value_name = "URL")]
    pub decision_addresses: Vec<String>,
    /// In-process decision replicas to start and balance over.
    #[arg(long, default_value_t = 1)]
    pub decision_replicas: usize,
    /// Submit pending pods at this many per second instead of all at once.
    #[arg(long)]
    pub arrival_rate: Option<f64>,
    /// Give up after this long (e.g. 90s, 10m).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Most pods per decision call.
    #[arg(long, default_value_t = 256)]
    pub batch_size: usize,
    /// How long a partial batch waits to fill.
    #[arg(long, default_value = "5ms", value_parser = parse_duration)]
    pub batch_window: Duration,
    /// Batches decided at once, each on its own partition of the nodes and its own replica
    /// (at most `--decision-replicas` run at once).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub batches_in_flight: u32,
    /// Binds in flight at once.
    #[arg(long, default_value_t = 64)]
    pub bind_concurrency: usize,
    /// API writes per second (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub api_qps: u32,
    /// Scheduling policy (empty: the service's default).
    #[arg(long, default_value = "")]
    pub policy: String,
    /// Policy file of the in-process decision replicas (the service's `--policy-file`: a
    /// KubeSchedulerConfiguration or placement's PolicyConfiguration), extenders included. An
    /// extender with a `bindVerb` is refused: it would bind in a real cluster, not this one.
    #[arg(long, value_name = "FILE")]
    pub policy_file: Option<PathBuf>,
    /// Delay before the binder sees a binding through the watch.
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    pub watch_latency: Duration,
    /// Fraction of binds failing like a 500 (retried with backoff).
    #[arg(long, default_value_t = 0.0)]
    pub bind_failure_rate: f64,
    /// Fraction of binds whose reply is lost after the binding was applied.
    #[arg(long, default_value_t = 0.0)]
    pub lost_reply_rate: f64,
    /// Added latency of every bind.
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    pub bind_delay: Duration,
    /// Backoff after a first failure (kube-scheduler: 1s).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub initial_backoff: Duration,
    /// Experiments and shadow policies (the binder's `--experiments-file` format): pods are split
    /// into arms as the binder would, and the summary ends with the per-arm table.
    #[arg(long, value_name = "FILE")]
    pub experiments_file: Option<PathBuf>,
    /// With `--experiments-file`: run the whole workload once per arm of each experiment (every
    /// selected pod in that arm, on a fresh copy of the cluster) and print one comparison table.
    #[arg(long, requires = "experiments_file")]
    pub compare_arms: bool,
    /// Summary format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// The policies of `--policy-file`, where they come from, and the file's format.
pub type LoadedPolicyFile = (PathBuf, placement_scheduler::grpc::policy_file::LoadedPolicies);

impl SimulateArgs {
    /// Reads `--policy-file` (when given); an extender with a `bindVerb` is refused, since
    /// simulate's cluster is in memory and an extender binds in a real one.
    pub fn policies(&self) -> anyhow::Result<Option<LoadedPolicyFile>> {
        let Some(path) = &self.policy_file else {
            return Ok(None);
        };
        let loaded = placement_scheduler::grpc::policy_file::load_policies(path)?;
        anyhow::ensure!(
            !loaded
                .policies
                .iter()
                .any(|p| p.extenders.iter().any(|e| e.is_binder())),
            "--policy-file {}: an extender with a bindVerb would bind in a real cluster; simulate's cluster is in \
             memory, so bindVerb is not supported here",
            path.display()
        );
        Ok(Some((path.clone(), loaded)))
    }

    /// [`SimulateArgs::config`] with the in-process replicas serving `policies` (from
    /// [`SimulateArgs::policies`]).
    pub fn config_with(&self, policies: Option<&LoadedPolicyFile>) -> SimConfig {
        let mut config = self.config();
        if let Some((path, loaded)) = policies {
            config.server.service.policies = loaded.policies.clone();
            config.server.service.policy_source = placement_scheduler::grpc::PolicySource::File {
                path: path.display().to_string(),
                format: loaded.format,
            };
        }
        config
    }

    /// The run these flags describe.
    pub fn config(&self) -> SimConfig {
        let cluster = match &self.from_file {
            Some(path) => ClusterSource::File {
                path: path.clone(),
                all_pending: self.all_pending,
            },
            None => ClusterSource::Synthetic(SyntheticCluster {
                shape: ClusterShape {
                    nodes: self.nodes,
                    pods_per_node: self.bound_per_node,
                    zones: self.zones,
                    gpu_fraction: self.gpu_fraction,
                    tainted_fraction: self.tainted_fraction,
                    spot_fraction: self.spot_fraction,
                    cordoned_fraction: self.cordoned_fraction,
                    max_pods: self.max_pods,
                    utilization: (self.utilization_min, self.utilization_max),
                    ..ClusterShape::default()
                },
                pending: self.pods,
                replicas_per_workload: self.replicas_per_workload,
                workload_share: self.workload_share,
                topology_share: self.topology_share,
                seed: self.seed,
            }),
        };
        let decision = if self.decision_addresses.is_empty() {
            DecisionSource::InProcess {
                replicas: self.decision_replicas,
            }
        } else {
            DecisionSource::Endpoints(self.decision_addresses.clone())
        };
        SimConfig {
            cluster,
            decision,
            binder: BinderConfig {
                scheduler_names: self.scheduler_names.clone(),
                batch_size: self.batch_size,
                batch_window: self.batch_window,
                batches_in_flight: self.batches_in_flight as usize,
                bind_concurrency: self.bind_concurrency,
                api_qps: self.api_qps,
                policy: self.policy.clone(),
                seed: self.seed,
                queue: QueueConfig {
                    initial_backoff: self.initial_backoff,
                    ..QueueConfig::default()
                },
                ..BinderConfig::default()
            },
            arrival_rate: self.arrival_rate,
            timeout: self.timeout,
            watch_latency: self.watch_latency,
            faults: Faults {
                bind_failure_rate: self.bind_failure_rate,
                lost_reply_rate: self.lost_reply_rate,
                bind_delay: self.bind_delay,
                event_delay: Duration::ZERO,
                seed: self.seed,
            },
            progress: !self.quiet,
            ..SimConfig::default()
        }
    }
}

/// One arm's run of a per-arm comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmRun {
    /// Experiment.
    pub experiment: String,
    /// Arm.
    pub arm: String,
    /// Policy.
    pub policy: String,
    /// Pods of the experiment (all in this arm for this run) bound.
    pub arm_pods_bound: u64,
    /// Distinct nodes holding them.
    pub arm_nodes_used: usize,
    /// The run's summary (every pending pod, the experiment's and the others).
    pub summary: Summary,
}

/// Per-arm comparison: the same workload run once per arm.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Comparison {
    /// One run per arm.
    pub runs: Vec<ArmRun>,
}

impl Comparison {
    /// The run of an arm.
    pub fn run(&self, experiment: &str, arm: &str) -> Option<&ArmRun> {
        self.runs.iter().find(|r| r.experiment == experiment && r.arm == arm)
    }

    /// Whether every run completed and passed its checks.
    pub fn passed(&self) -> bool {
        self.runs.iter().all(|r| r.summary.passed())
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut o = String::new();
        if let Some(first) = self.runs.first() {
            let s = &first.summary;
            writeln!(
                o,
                "per-arm comparison: {} nodes, {} pods already bound, {} pending pods; the whole workload once per arm",
                s.nodes, s.prebound_pods, s.pending_pods
            )?;
        }
        writeln!(
            o,
            "{:<14} {:<12} {:<14} {:>8} {:>7} {:>8} {:>10} {:>7} {:>9} {:>7} {:>9} {:>7} {:>8} {:>7}",
            "EXPERIMENT",
            "ARM",
            "POLICY",
            "PLACED",
            "UNSCHED",
            "ARM-PODS",
            "ARM-NODES",
            "EMPTY",
            "CPU-MEAN%",
            "CPU-SD",
            "MEM-MEAN%",
            "MEM-SD",
            "PODS/S",
            "CHECKS"
        )?;
        for r in &self.runs {
            let s = &r.summary;
            writeln!(
                o,
                "{:<14} {:<12} {:<14} {:>8} {:>7} {:>8} {:>10} {:>7} {:>9.1} {:>7.1} {:>9.1} {:>7.1} {:>8.0} {:>7}",
                r.experiment,
                r.arm,
                r.policy,
                s.placed,
                s.unschedulable,
                r.arm_pods_bound,
                r.arm_nodes_used,
                s.utilization.empty_nodes,
                s.utilization.cpu.mean,
                s.utilization.cpu.stddev,
                s.utilization.memory.mean,
                s.utilization.memory.stddev,
                s.pods_per_second,
                if s.passed() { "ok" } else { "FAILED" }
            )?;
        }
        f.write_str(&o)
    }
}

/// Runs the workload `config` builds once per arm of every experiment of `set`.
pub async fn compare_arms(config: impl Fn() -> SimConfig, set: &ExperimentSet) -> Result<Comparison, SimError> {
    let mut out = Comparison::default();
    for (i, e) in set.experiments.iter().enumerate() {
        for (j, a) in e.arms.iter().enumerate() {
            let mut c = config();
            c.experiments = set.only_arm(i, j);
            let summary = simulate(c).await?;
            let row = summary
                .experiments
                .as_ref()
                .and_then(|r| r.arms.iter().find(|r| r.experiment == e.name && r.arm == a.name));
            out.runs.push(ArmRun {
                experiment: e.name.clone(),
                arm: a.name.clone(),
                policy: if a.policy.is_empty() {
                    "default".into()
                } else {
                    a.policy.clone()
                },
                arm_pods_bound: row.map_or(0, |r| r.pods_bound),
                arm_nodes_used: row.map_or(0, |r| r.nodes_used),
                summary,
            });
        }
    }
    Ok(out)
}

/// Runs a simulation and prints its summary.
pub async fn main(args: SimulateArgs) -> anyhow::Result<()> {
    let _telemetry = placement_scheduler::telemetry::init_once("binder-agent-simulate", false, "error")?;
    let policies = args.policies()?;
    // The in-process replicas serve the file's policies (and call its extenders).
    let config = || args.config_with(policies.as_ref());
    let set = match &args.experiments_file {
        Some(path) => {
            Some(ExperimentSet::load(path).with_context(|| format!("--experiments-file {}", path.display()))?)
        }
        None => None,
    };
    if args.compare_arms {
        let set = set.unwrap_or_default();
        let comparison = compare_arms(config, &set).await?;
        match args.output {
            OutputFormat::Text => print!("{comparison}"),
            OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&comparison)?),
        }
        anyhow::ensure!(comparison.passed(), "a run timed out or failed its consistency checks");
        return Ok(());
    }
    let mut config = config();
    config.experiments = set;
    let summary = simulate(config).await?;
    match args.output {
        OutputFormat::Text => print!("{summary}"),
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&summary)?),
    }
    if !summary.completed {
        anyhow::bail!("timed out with {} pods still pending", summary.still_pending);
    }
    if !summary.passed() {
        anyhow::bail!("consistency checks failed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("2 weeks").is_err());
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let s = LatencySummary::of(&v).unwrap();
        assert_eq!((s.p50_ms, s.p99_ms, s.max_ms), (50.0, 99.0, 100.0));
        assert!(LatencySummary::of(&[]).is_none());
    }
}
