//! The scheduling loop: cluster events in, batches out to a decision replica, Bindings written.
//!
//! By default decisions are serial (one batch at a time, so every batch sees the assumptions of the
//! ones before it and no node is overcommitted), while binds run many at a time, bounded and rate
//! limited. With [`BinderConfig::batches_in_flight`] above 1, batches are decided at once on
//! different replicas, each on its own partition of the nodes ([`crate::partitions`]).
//! The same loop drives a real API server and the simulation; only the [`ClusterApi`] differs.
//!
//! One pass, top-down, as kube-scheduler's `pkg/scheduler/schedule_one.go` (`ScheduleOne` →
//! `schedulingCycle` → `assume` → `runBindingCycle` → `bindingCycle` → `handleBindingCycleError`):
//!
//! 1. [`Binder::handle`] applies each watch event to the state and the queue (`events.rs`).
//! 2. [`Binder::run`] (`cycle.rs`, `ScheduleOne`) pops a batch and dispatches it
//!    (`dispatch_batch`): decided now on the whole cluster, or, with node partitions, on one in a
//!    task of its own (`partitioned.rs`, off by default). `schedule_batch` holds back the pods
//!    whose resource claims are not there yet (`claims.rs`) and holds back or completes its gangs
//!    (`gangs.rs`), splits the batch by route (experiment arm, or one group), and runs each
//!    group's scheduling cycle (`schedule_group`).
//! 3. The group is decided (`decide.rs`: a replica's snapshot synced, the pods placed on it,
//!    failing over to other replicas; a refused pod taken out); the shadow policies start on it
//!    off the critical path; `handle_decision` assumes every placement (`assume`) and handles
//!    each pod's outcome (`handle_outcome`).
//! 4. Placed, a pod's binding cycle runs in a task of its own (`bind.rs`: Permit, PreBind of its
//!    volumes and devices in `prebind.rs`, wait to lead, bind by extender or Binding, on bound,
//!    `handle_binding_cycle_error`); nominated, its victims are preempted and it waits for them
//!    (`preemption.rs`); unschedulable or failed with an error, it is reported as
//!    kube-scheduler's `handleSchedulingFailure` reports it (`failures.rs`); with no answer, it is
//!    backed off.
//!
//! Every outcome is told once to the `CycleObserver` (`observer.rs`), which feeds the
//! metrics and the experiments record alike.
//!
//! ```text
//!  watch --> events.rs  handle: the state and the queue
//!
//!  cycle.rs  run --> dispatch_batch --+-- partitions on --> partitioned.rs  dispatch_on_partitions
//!             |                       |                       '--> decide_group, handle_decision
//!             |                       v
//!             |     schedule_batch --> claims.rs  gate_claims, gangs.rs  gate_gangs
//!             |           |
//!             |           v
//!             |     schedule_group --> decide.rs  decide_group (sync, Schedule)
//!             |           +-- shadows (spawned) --> decide.rs  plan_decision, decide_planned
//!             |           v
//!             |     handle_decision --> assume
//!             |           | handle_outcome:
//!             |           +-- placed ---------> bind.rs  spawn_binding_cycle --> binding_cycle
//!             |           |                       permit, pre_bind (prebind.rs), wait_to_bind,
//!             |           |                       bind, on_bound | handle_binding_cycle_error
//!             |           +-- nominated ------> preemption.rs  start_preemption
//!             |           +-- unschedulable --> failures.rs  spawn_unschedulable
//!             |           +-- error ----------> failures.rs  spawn_scheduler_error
//!             |           +-- no answer ------> backed off in the queue
//!             |
//!             +-- waiting preemptors ---------> preemption.rs  retry_waiting_preemptors
//!             +-- before a pop, partitions on -> partitioned.rs  wait_for_partitions
//!             +-- victims gone ---------------> bind.rs  spawn_binding_cycle
//! ```
//!
//! Experiments are not part of the cycle: it routes each batch through the live
//! [`crate::experiments::Routing`] (one group on the binder's own policy and replicas when none is
//! configured), decides each group on its backend's pool ([`crate::replica_pools::ReplicaPools`];
//! the binder's own is [`crate::experiments::Backend::MAIN`]), and tells the outcomes to the
//! observer, which records nothing in [`crate::experiments::Experiments`] without an experiment.
//! `cycle_tests.rs` drives the cycle alone: a scripted replica, a recording API.

mod bind;
mod binding_conditions;
mod claims;
mod cycle;
#[cfg(test)]
mod cycle_tests;
mod decide;
mod events;
mod failures;
mod gangs;
mod observer;
mod partitioned;
mod prebind;
mod preemption;

use std::collections::HashSet;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota};
use parking_lot::Mutex;
use placement_scheduler::proto;
use tokio::sync::{watch, Notify, Semaphore};

use crate::api::{ClusterApi, PodRef};
use crate::claim_cache::ClaimCache;
use crate::experiments::{ExperimentSet, Experiments, Route, Routing, RoutingError};
use crate::metrics::BinderMetrics;
use crate::nominations::{NominationTiming, Nominations};
use crate::partitions::PartitionSlots;
use crate::projection::PodInfo;
use crate::queue::{QueueConfig, SchedulingQueue};
use crate::replica_pools::ReplicaPools;
use crate::replicas::ReplicaPool;
use crate::state::ClusterState;

/// Why a batch got no decision.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    /// No replica is configured or resolvable.
    #[error("no decision replica available")]
    NoReplica,
    /// Every replica tried failed; the last error.
    #[error("every decision replica failed; last error: {0}")]
    AllFailed(String),
    /// Every replica of an experiment's or shadow's backend is out after failures: not called
    /// until one is back in, so a dead backend costs the other arms nothing.
    #[error("every replica of the backend is out after failures")]
    BackendOut,
}

/// How the loop goes on after a step that may wait.
enum Flow {
    /// On with this pass.
    Go,
    /// Back to the top of the loop.
    Again,
    /// Stop: shutdown, or leadership can never come back.
    Stop,
}

/// What a bind task needs besides the pod and its node.
struct BindRequest {
    /// The Binding's annotations.
    annotations: std::collections::BTreeMap<String, String>,
    /// Who decided the pod (its policy for metrics, its arm for the experiments record).
    route: Route,
    /// VolumeBinding's choices for the pod's unbound WaitForFirstConsumer claims: written and
    /// waited for (its PreBind) before the Binding.
    volumes: Vec<proto::ClaimBinding>,
    /// DynamicResources' allocations for the pod's claims that had none: written with the pod's
    /// reservations (its PreBind) before the Binding.
    devices: Vec<proto::ClaimAllocation>,
}

/// A change the watchers (or the simulation) saw.
// Events are consumed as soon as they are made; boxing the pod would add an allocation per event.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum ClusterEvent {
    /// A node was added or changed.
    NodeApplied(proto::Node),
    /// A node was deleted.
    NodeDeleted(String),
    /// A pod was added or changed (bound or not, ours or not).
    PodApplied(PodInfo),
    /// A pod was deleted.
    PodDeleted {
        /// metadata.uid.
        uid: String,
    },
    /// A namespace was added or changed (its labels feed pod affinity namespace selectors).
    NamespaceApplied(proto::Namespace),
    /// A namespace was deleted.
    NamespaceDeleted(String),
    /// A PodDisruptionBudget was added or changed (preemption tries not to violate it).
    PdbApplied(crate::projection::PdbInfo),
    /// A PodDisruptionBudget was deleted (`namespace/name`).
    PdbDeleted(String),
    /// A storage object (PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode, ...), a
    /// DRA object or a PodGroup was added or changed.
    ObjectApplied(crate::projection::TrackedObject),
    /// A storage object, a DRA object or a PodGroup was deleted.
    ObjectDeleted(crate::projection::TrackedKey),
    /// A ResourceClaim or DeviceClass as the watch delivers it (said before its
    /// [`ClusterEvent::ObjectApplied`]): DynamicResources' PreBind writes claims from it
    /// ([`crate::claim_cache`]).
    DeviceObject(crate::claim_cache::DeviceObject),
    /// Whether the API server serves scheduling.k8s.io/v1beta1 PodGroups (said once, before the
    /// PodGroup watch's initial list counts as done).
    PodGroupsServed(bool),
    /// A PodGroup's `PodGroupInitiallyScheduled` condition as the watch shows it (said before
    /// the group's [`ClusterEvent::ObjectApplied`]); `None` when it has none.
    PodGroupCondition {
        /// `namespace/name`.
        key: String,
        /// The condition.
        condition: Option<crate::api::ObservedCondition>,
    },
}

/// How the binder batches and binds.
#[derive(Debug, Clone)]
pub struct BinderConfig {
    /// Scheduler names whose pods this binder places.
    pub scheduler_names: Vec<String>,
    /// Most pods per decision call.
    pub batch_size: usize,
    /// How long to wait for a batch to fill once a pod is ready.
    pub batch_window: Duration,
    /// Binds in flight at once (a pod with resource claims holds its slot from its claim writes
    /// through its first Binding attempt).
    pub bind_concurrency: usize,
    /// `Scheduled` events in flight at once. Binds have the rest of the API server: in a burst
    /// the events trail the binds (each keeps its binding's time) instead of taking every other
    /// write from them.
    pub event_concurrency: usize,
    /// API writes per second (bindings, events, status patches); 0 for no limit.
    pub api_qps: u32,
    /// Burst above `api_qps`.
    pub api_burst: u32,
    /// Policy name sent with each batch (empty: the service's default).
    pub policy: String,
    /// Tie-break seed sent with each batch.
    pub seed: u64,
    /// Tries of one Binding to its node before the pod is decided again (ambiguous errors only).
    pub bind_attempts: u32,
    /// Wait before the second try of a Binding; doubled per try, up to 5s.
    pub bind_retry_backoff: Duration,
    /// Queue timing.
    pub queue: QueueConfig,
    /// How long a gang's members wait for the rest before they are reported unschedulable.
    pub gang_timeout: Duration,
    /// How long a preemptor keeps its reservation on the nominated node while its victims
    /// terminate; then the reservation and `nominatedNodeName` are given up.
    pub nomination_timeout: Duration,
    /// How long a pod's PreBind waits for the PV controller to bind the claims it wrote a
    /// binding for before the pod is decided again (kube-scheduler's `bindTimeoutSeconds`).
    pub volume_bind_timeout: Duration,
    /// How long a pod's PreBind waits for its devices' binding conditions, counted from each
    /// claim's allocation (kube-scheduler's DynamicResources `bindingTimeout`).
    pub dra_binding_timeout: Duration,
    /// The extenders of the scheduler configuration, read for their `bindVerb`: a pod one of
    /// them is interested in is bound by asking that extender (kube-scheduler's
    /// `ExtenderBindingArgs`) instead of writing the Binding.
    pub extenders: Option<Arc<placement_scheduler::extender::ExtenderSet>>,
    /// Batches decided at once, each on its own partition of the nodes and its own replica
    /// ([`crate::partitions`]); 1 decides one batch at a time on the whole cluster. Also the number
    /// of partitions the nodes are split into. Fewer run at once while fewer replicas are ready,
    /// and none in partitions while an experiment or shadow policy is active.
    pub batches_in_flight: usize,
}

impl Default for BinderConfig {
    fn default() -> Self {
        Self {
            scheduler_names: vec!["placement-scheduler".into()],
            batch_size: 256,
            batch_window: Duration::from_millis(5),
            bind_concurrency: 64,
            event_concurrency: 8,
            api_qps: 0,
            api_burst: 100,
            policy: String::new(),
            seed: 0,
            bind_attempts: 5,
            bind_retry_backoff: Duration::from_millis(200),
            queue: QueueConfig::default(),
            gang_timeout: Duration::from_secs(60),
            nomination_timeout: Duration::from_secs(90),
            volume_bind_timeout: Duration::from_secs(600),
            dra_binding_timeout: Duration::from_secs(600),
            extenders: None,
            batches_in_flight: 1,
        }
    }
}

struct Shared<A> {
    config: BinderConfig,
    api: A,
    /// The decision replicas by backend: the binder's own and the experiments'.
    pools: Arc<ReplicaPools>,
    metrics: Arc<BinderMetrics>,
    /// The live routing and the observer of outcomes (records nothing with no experiment).
    experiments: Arc<Experiments>,
    state: Mutex<ClusterState>,
    queue: Mutex<SchedulingQueue>,
    wake: Notify,
    leader: watch::Receiver<bool>,
    binds: Arc<Semaphore>,
    events: Arc<Semaphore>,
    limiter: Option<DefaultDirectRateLimiter>,
    synced: AtomicBool,
    nominations: Mutex<Nominations<BindRequest>>,
    /// Bumped on every claim, volume and pod deletion event: PreBinds waiting for the PV
    /// controller look again.
    storage_seen: watch::Sender<u64>,
    /// Set once [`Binder::run`] stops taking work: waiting PreBinds give up (the pod stays
    /// pending for the next leader, which finds the bindings written so far).
    stopping: AtomicBool,
    /// The ResourceClaims and DeviceClasses PreBind writes from, the claims it wrote, and the
    /// turns pods take on shared claims.
    claims: ClaimCache,
    /// The node partitions decisions in flight hold ([`crate::partitions`]).
    slots: Mutex<PartitionSlots>,
    /// Pods a partitioned decision sent back: decided alone on the whole cluster next.
    whole_cluster_next: Mutex<HashSet<String>>,
    /// The state versions full syncs in progress started from: the log is not compacted past
    /// them.
    full_syncs: Mutex<Vec<u64>>,
}

/// The binder: feed it events with [`Binder::handle`], drive it with [`Binder::run`].
pub struct Binder<A> {
    shared: Arc<Shared<A>>,
}

impl<A> Clone for Binder<A> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// The node partitions of a configuration: its batches in flight, or none (0) for one at a time.
fn partitions(config: &BinderConfig) -> u32 {
    match config.batches_in_flight {
        0 | 1 => 0,
        n => u32::try_from(n).unwrap_or(u32::MAX),
    }
}

fn pod_ref(p: &proto::Pod) -> PodRef {
    PodRef {
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        uid: p.uid.clone(),
    }
}

impl<A: ClusterApi> Binder<A> {
    /// A binder writing through `api`, deciding with `replicas`, binding only while `leader` is true.
    pub fn new(
        config: BinderConfig,
        api: A,
        replicas: Arc<ReplicaPool>,
        metrics: Arc<BinderMetrics>,
        leader: watch::Receiver<bool>,
    ) -> Self {
        let limiter = NonZeroU32::new(config.api_qps).map(|qps| {
            let burst = NonZeroU32::new(config.api_burst).unwrap_or(qps);
            governor::RateLimiter::direct(Quota::per_second(qps).allow_burst(burst))
        });
        let partitions = partitions(&config);
        let timing = NominationTiming {
            timeout: config.nomination_timeout,
            initial_retry: config.queue.initial_backoff,
            max_retry: config.queue.max_backoff,
        };
        Self {
            shared: Arc::new(Shared {
                binds: Arc::new(Semaphore::new(config.bind_concurrency.max(1))),
                events: Arc::new(Semaphore::new(config.event_concurrency.max(1))),
                queue: Mutex::new(SchedulingQueue::new(config.queue.clone())),
                config,
                api,
                experiments: Arc::new(Experiments::new(Routing::none(), Arc::clone(&metrics))),
                pools: Arc::new(ReplicaPools::new(replicas)),
                metrics,
                state: Mutex::new(ClusterState::with_partitions(partitions)),
                wake: Notify::new(),
                leader,
                limiter,
                synced: AtomicBool::new(false),
                nominations: Mutex::new(Nominations::new(timing)),
                storage_seen: watch::Sender::new(0),
                stopping: AtomicBool::new(false),
                claims: ClaimCache::default(),
                slots: Mutex::new(PartitionSlots::new(partitions)),
                whole_cluster_next: Mutex::new(HashSet::new()),
                full_syncs: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The writer (the API server client or the in-memory cluster).
    pub fn api(&self) -> &A {
        &self.shared.api
    }

    /// Metrics.
    pub fn metrics(&self) -> &Arc<BinderMetrics> {
        &self.shared.metrics
    }

    /// Experiments and shadows: the live routing and the record. Make a file live with
    /// [`Binder::replace_experiments`] (or [`ReplicaPools::reload_text`] with [`Binder::pools`]),
    /// read the comparison with [`Binder::experiment_report`].
    pub fn experiments(&self) -> &Arc<Experiments> {
        &self.shared.experiments
    }

    /// The decision replicas by backend.
    pub fn pools(&self) -> &Arc<ReplicaPools> {
        &self.shared.pools
    }

    /// Makes `set` live: its backends' replica pools, then its routing; on error nothing changes.
    pub fn replace_experiments(&self, set: ExperimentSet) -> Result<(), RoutingError> {
        self.shared.pools.make_live(&self.shared.experiments, set)
    }

    /// The per-arm comparison now (node utilization from the binder's state).
    pub fn experiment_report(&self) -> crate::experiments::Report {
        let st = self.shared.state.lock();
        self.shared.experiments.report(&st)
    }

    /// Marks the initial lists done: the binder is ready once it also has a replica.
    pub fn set_synced(&self) {
        self.shared.synced.store(true, Ordering::Relaxed);
        self.shared.wake.notify_one();
    }

    /// Ready: caches synced and at least one decision replica in.
    pub fn is_ready(&self) -> bool {
        self.shared.synced.load(Ordering::Relaxed) && self.shared.pools.main().ready_count() > 0
    }

    /// Pods pending anywhere in the queue (in flight included).
    pub fn pending(&self) -> usize {
        self.shared.queue.lock().len()
    }

    /// Queue sizes.
    pub fn queue_counts(&self) -> crate::queue::QueueCounts {
        self.shared.queue.lock().counts()
    }

    /// The storage objects the binder knows (claims, volumes, classes, CSINodes, CSIDrivers,
    /// capacities), the DRA objects and the PodGroups, as a full snapshot carries them (its other
    /// lists left empty).
    pub fn storage_snapshot(&self) -> proto::Snapshot {
        self.shared.state.lock().storage_snapshot()
    }

    /// The PodGroup `namespace/name` as the watch shows it.
    pub fn pod_group(&self, namespace: &str, name: &str) -> Option<proto::PodGroup> {
        self.shared.state.lock().pod_group(namespace, name).cloned()
    }

    /// Whether the API server serves scheduling.k8s.io/v1beta1 PodGroups (false until the
    /// PodGroup watch found them served; known once the binder is synced).
    pub fn pod_groups_served(&self) -> bool {
        self.shared.state.lock().pod_groups_served()
    }

    /// The PodDisruptionBudgets as the decision service gets them (disruptedPods resolved to uids).
    pub fn pod_disruption_budgets(&self) -> Vec<proto::PodDisruptionBudget> {
        self.shared.state.lock().pod_disruption_budgets()
    }

    /// Preemptors waiting for their victims (with a reservation on their nominated node).
    pub fn nominations_waiting(&self) -> usize {
        self.shared.nominations.lock().waiting()
    }

    /// Assumed placements not yet seen bound.
    pub fn assumed(&self) -> usize {
        self.shared.state.lock().assumed_count()
    }

    /// Assumed volume choices (a volume's claimRef, a claim's selected node) the watches have
    /// not shown yet.
    pub fn assumed_volume_choices(&self) -> usize {
        self.shared.state.lock().assumed_storage_count()
    }

    /// ResourceClaims this binder wrote that its watch has not shown yet.
    pub fn assumed_resource_claims(&self) -> usize {
        self.shared.claims.assumed_count()
    }

    /// Most decisions in flight at once on node partitions so far.
    pub fn most_batches_in_flight(&self) -> usize {
        self.shared.slots.lock().most_in_flight()
    }

    fn update_queue_gauges(&self, q: &SchedulingQueue) {
        self.shared.metrics.set_pending(q.counts());
    }
}
