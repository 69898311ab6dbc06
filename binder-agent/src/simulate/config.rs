//! What a simulation runs: its configuration (cluster, workload, decision source, faults), its
//! errors and its progress.

use crate::binder::BinderConfig;
use crate::experiments::ExperimentSet;
use crate::experiments::RoutingError;
use crate::projection::{self, PodInfo, TrackedObject};
use crate::replicas::{ReplicaConfig, ReplicaError};
use placement_scheduler::grpc::ServerConfig;
use placement_scheduler::proto;
use placement_scheduler::synth::ClusterShape;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::watch;

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
    /// List each pending pod's outcome in [`Summary::outcomes`](super::Summary::outcomes).
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
    /// Gang PodGroups mixed into the pending pods (in addition to `pending`).
    pub pod_groups: Option<SyntheticPodGroups>,
}

/// Gang PodGroups (`scheduling.k8s.io/v1beta1`) of a synthetic workload: `groups` groups whose
/// pods name them in `spec.schedulingGroup`, each with minCount its size, and with a topology
/// key every group in one domain of that node label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntheticPodGroups {
    /// How many groups.
    pub groups: usize,
    /// Pods per group: the smallest and the largest size (equal for one size); sizes are spread
    /// deterministically over the range.
    pub size: (usize, usize),
    /// The groups' topology key (`spec.schedulingConstraints.topology[0].key`); `None` places
    /// a group anywhere in the cluster, still all or nothing.
    pub topology_key: Option<String>,
    /// Nodes per domain of the topology key, for the synthetic nodes that lack the label (nodes
    /// that have it, as every node has `topology.kubernetes.io/zone`, keep theirs).
    pub nodes_per_domain: usize,
}

impl Default for SyntheticPodGroups {
    fn default() -> Self {
        Self {
            groups: 0,
            size: (8, 8),
            topology_key: None,
            nodes_per_domain: 20,
        }
    }
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
            pod_groups: None,
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
    pub pdbs: Vec<projection::PdbInfo>,
    /// PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers and
    /// CSIStorageCapacities (the volume filters read them; the simulated PV controller binds the
    /// claims the binder writes for), and DeviceClasses, ResourceClaims (those generated from
    /// templates included) and ResourceSlices (DynamicResources reads them; the in-memory
    /// cluster takes the allocations and reservations the binder writes).
    pub storage: Vec<TrackedObject>,
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
    /// Fraction of binds failing with [`ApiError::Other`](crate::api::ApiError::Other) without binding (like a 500).
    pub bind_failure_rate: f64,
    /// Fraction of binds that bind but answer [`ApiError::Other`](crate::api::ApiError::Other) (a reply lost after the write).
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
