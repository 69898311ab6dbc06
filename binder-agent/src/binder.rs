//! The scheduling loop: cluster events in, batches out to a decision replica, Bindings written.
//!
//! By default decisions are serial (one batch at a time, so every batch sees the assumptions of the
//! ones before it and no node is overcommitted), while binds run many at a time, bounded and rate
//! limited. With [`BinderConfig::batches_in_flight`] above 1, batches are decided at once on
//! different replicas, each on its own partition of the nodes ([`crate::parallel`]).
//! The same loop drives a real API server and the simulation; only the [`ClusterApi`] differs.

use std::collections::{HashMap, HashSet};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota};
use parking_lot::Mutex;
use placement_scheduler::grpc::SNAPSHOT_NOT_FOUND;
use placement_scheduler::proto;
use tokio::sync::{watch, Notify, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tonic::Code;
use tonic_types::StatusExt;
use tracing::Instrument;

use crate::api::{ApiError, ClaimRef, ClusterApi, PodRef};
use crate::groups::{
    gang_key, gang_verdict, is_member, GangVerdict, Nomination, NominationTiming, Nominations, RetryEnd,
};
use crate::metrics::BinderMetrics;
use crate::model::{gang_problem, PodInfo, StorageKey, StorageObject};
use crate::parallel::{alone_reason, Partition, Slots};
use crate::queue::{QueueConfig, QueuedPod, SchedulingQueue};
use crate::replicas::{EncodedPodsDelta, Held, Replica, ReplicaPool};
use crate::routing::{Experiments, Route, Routing};
use crate::state::{ClusterState, FullParts};

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
    PdbApplied(crate::model::PdbInfo),
    /// A PodDisruptionBudget was deleted (`namespace/name`).
    PdbDeleted(String),
    /// A PersistentVolumeClaim, PersistentVolume, StorageClass or CSINode was added or changed.
    StorageApplied(crate::model::StorageObject),
    /// A PersistentVolumeClaim, PersistentVolume, StorageClass or CSINode was deleted.
    StorageDeleted(crate::model::StorageKey),
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
    /// Binds in flight at once.
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
    /// The extenders of the scheduler configuration, read for their `bindVerb`: a pod one of
    /// them is interested in is bound by asking that extender (kube-scheduler's
    /// `ExtenderBindingArgs`) instead of writing the Binding.
    pub extenders: Option<Arc<placement_scheduler::extender::ExtenderSet>>,
    /// Batches decided at once, each on its own partition of the nodes and its own replica
    /// ([`crate::parallel`]); 1 decides one batch at a time on the whole cluster. Also the number
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
            extenders: None,
            batches_in_flight: 1,
        }
    }
}

/// A decision and where it was made.
struct Decided {
    /// The replica's answer.
    response: proto::ScheduleResponse,
    /// The replica that answered.
    replica: Arc<Replica>,
    /// The state version of the snapshot it decided on.
    version: u64,
}

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

struct Shared<A> {
    config: BinderConfig,
    api: A,
    replicas: Arc<ReplicaPool>,
    metrics: Arc<BinderMetrics>,
    experiments: Arc<Experiments>,
    state: Mutex<ClusterState>,
    queue: Mutex<SchedulingQueue>,
    wake: Notify,
    leader: watch::Receiver<bool>,
    binds: Arc<Semaphore>,
    events: Arc<Semaphore>,
    limiter: Option<DefaultDirectRateLimiter>,
    synced: AtomicBool,
    nominations: Mutex<Nominations<Bind>>,
    /// Bumped on every claim, volume and pod deletion event: PreBinds waiting for the PV
    /// controller look again.
    storage_seen: watch::Sender<u64>,
    /// Set once [`Binder::run`] stops taking work: waiting PreBinds give up (the pod stays
    /// pending for the next leader, which finds the bindings written so far).
    stopping: AtomicBool,
    /// The node partitions decisions in flight hold ([`crate::parallel`]).
    slots: Mutex<Slots>,
    /// Pods a partitioned decision sent back: decided alone on the whole cluster next.
    alone: Mutex<HashSet<String>>,
    /// The state versions full syncs in progress started from: the log is not compacted past
    /// them.
    full_syncs: Mutex<Vec<u64>>,
}

/// A state version a full sync in progress holds in the log; released when dropped.
struct PinnedVersion<'a> {
    versions: &'a Mutex<Vec<u64>>,
    version: u64,
}

impl<'a> PinnedVersion<'a> {
    fn new(versions: &'a Mutex<Vec<u64>>, version: u64) -> Self {
        versions.lock().push(version);
        Self { versions, version }
    }
}

impl Drop for PinnedVersion<'_> {
    fn drop(&mut self) {
        let mut versions = self.versions.lock();
        if let Some(i) = versions.iter().position(|v| *v == self.version) {
            versions.swap_remove(i);
        }
    }
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

/// A node partition held by a decision in flight: given back, and the loop woken, when dropped.
struct HeldPartition<'a, A> {
    binder: &'a Binder<A>,
    partition: Partition,
}

impl<A> Drop for HeldPartition<'_, A> {
    fn drop(&mut self) {
        let s = &self.binder.shared;
        let in_flight = {
            let mut slots = s.slots.lock();
            slots.give_back(self.partition);
            slots.in_flight()
        };
        s.metrics.batches_in_flight.set(in_flight as i64);
        s.wake.notify_one();
    }
}

/// What a bind task needs of its pod's route.
struct Bind {
    /// The Binding's annotations.
    annotations: std::collections::BTreeMap<String, String>,
    route: Route,
    routing: Arc<Routing>,
    /// VolumeBinding's choices for the pod's unbound WaitForFirstConsumer claims: written and
    /// waited for (its PreBind) before the Binding.
    volumes: Vec<proto::ClaimBinding>,
}

/// Longest a pod that must be decided on the whole cluster waits for others like it while
/// decisions run in partitions.
const ALONE_HOLD: Duration = Duration::from_millis(200);

/// How long a pod's scheduling failure (its `PodScheduled` condition and `FailedScheduling`
/// event) is retried through transient API errors and a lost lease (an API server restarting)
/// before the binder gives up writing it.
const REPORT_RETRY_FOR: Duration = Duration::from_secs(60);

/// The condition reason of a scheduling failure, as kube-scheduler's `handleSchedulingFailure`
/// chooses it.
#[derive(Debug, Clone, Copy)]
enum Failure {
    /// No node fits (`Unschedulable`).
    Unschedulable,
    /// The scheduling or binding cycle failed with an error (`SchedulerError`).
    SchedulerError,
}

/// The node partitions of a configuration: its batches in flight, or none (0) for one at a time.
fn partitions(config: &BinderConfig) -> u32 {
    match config.batches_in_flight {
        0 | 1 => 0,
        n => u32::try_from(n).unwrap_or(u32::MAX),
    }
}

/// kube-scheduler's prefix of a PreBind failure of the VolumeBinding plugin.
const PREBIND_FAILED: &str = "running PreBind plugin \"VolumeBinding\"";

/// Whether a claim is fully bound (`isPVCFullyBound`): it names its volume and the PV
/// controller marked the binding complete.
fn fully_bound(c: &proto::PersistentVolumeClaim) -> bool {
    !c.volume_name.is_empty() && c.bind_completed
}

/// How a PreBind ended.
#[derive(Debug, PartialEq, Eq)]
enum PreBind {
    /// Every claim is bound: the Binding may be written.
    Bound,
    /// Given up (failed, timed out, pod gone, lease lost); the pod is handled already.
    Stopped,
}

fn pod_ref(p: &proto::Pod) -> PodRef {
    PodRef {
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        uid: p.uid.clone(),
    }
}

/// Whether any of the pod's affinity or anti-affinity terms selects namespaces by label.
fn uses_namespace_selector(p: &proto::Pod) -> bool {
    [&p.pod_affinity, &p.pod_anti_affinity].into_iter().flatten().any(|a| {
        a.required.iter().any(|t| t.namespace_selector.is_some())
            || a.preferred
                .iter()
                .any(|w| w.term.as_ref().is_some_and(|t| t.namespace_selector.is_some()))
    })
}

fn is_snapshot_not_found(status: &tonic::Status) -> bool {
    status.code() == Code::NotFound
        && status
            .get_details_error_info()
            .is_some_and(|i| i.reason == SNAPSHOT_NOT_FOUND)
}

/// The index of the pod named by an INVALID_ARGUMENT field path like `pods[3].containers…`.
fn invalid_pod_index(status: &tonic::Status) -> Option<usize> {
    if status.code() != Code::InvalidArgument {
        return None;
    }
    let rest = status.message().strip_prefix("pods[")?;
    rest[..rest.find(']')?].parse().ok()
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
                experiments: Arc::new(Experiments::new(
                    Routing::none(Arc::clone(&replicas)),
                    Arc::clone(&metrics),
                )),
                replicas,
                metrics,
                state: Mutex::new(ClusterState::with_partitions(partitions)),
                wake: Notify::new(),
                leader,
                limiter,
                synced: AtomicBool::new(false),
                nominations: Mutex::new(Nominations::new(timing)),
                storage_seen: watch::Sender::new(0),
                stopping: AtomicBool::new(false),
                slots: Mutex::new(Slots::new(partitions)),
                alone: Mutex::new(HashSet::new()),
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

    /// Experiments and shadows: make a file live with [`Experiments::replace`] or
    /// [`Experiments::reload`], read the comparison with [`Binder::experiment_report`].
    pub fn experiments(&self) -> &Arc<Experiments> {
        &self.shared.experiments
    }

    /// The per-arm comparison now (node utilization from the binder's state).
    pub fn experiment_report(&self) -> crate::routing::Report {
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
        self.shared.synced.load(Ordering::Relaxed) && self.shared.replicas.ready_count() > 0
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
    /// capacities), as a full snapshot carries them (its other lists left empty).
    pub fn storage_snapshot(&self) -> proto::Snapshot {
        self.shared.state.lock().storage_snapshot()
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

    fn ours(&self, info: &PodInfo) -> bool {
        self.shared.config.scheduler_names.contains(&info.scheduler_name)
    }

    fn update_queue_gauges(&self, q: &SchedulingQueue) {
        self.shared.metrics.set_pending(q.counts());
    }

    /// A pod deleted or finished: it leaves the queue and its node; the room it frees may let
    /// unschedulable pods fit (kube-scheduler's AssignedPodDelete event).
    fn pod_gone(&self, uid: &str, now: Instant) {
        let freed = self.shared.state.lock().delete_pod(uid);
        self.shared.alone.lock().remove(uid);
        {
            let mut nominations = self.shared.nominations.lock();
            if nominations.pod_gone(uid) {
                self.shared.wake.notify_one();
            }
            if freed && nominations.waiting() > 0 {
                // Room freed anywhere may fit a waiting preemptor elsewhere.
                nominations.retry_all_now(now);
                self.shared.wake.notify_one();
            }
        }
        self.shared.experiments.pod_gone(uid);
        let mut q = self.shared.queue.lock();
        q.remove(uid);
        if freed {
            q.move_all_unschedulable(now);
        }
        self.update_queue_gauges(&q);
    }

    /// A claim, volume, storage class or CSINode changed: the unschedulable pods with volumes may
    /// fit now (kube-scheduler requeues the pods its volume plugins rejected on these events).
    fn storage_changed(&self, changed: bool, now: Instant) {
        if !changed {
            return;
        }
        let mut q = self.shared.queue.lock();
        q.move_unschedulable_where(now, |i| !i.spec.volumes.is_empty());
        self.update_queue_gauges(&q);
        drop(q);
        self.shared.wake.notify_one();
    }

    /// Applies one cluster event to the state and the queue.
    pub fn handle(&self, event: ClusterEvent) {
        let now = Instant::now();
        let s = &self.shared;
        match event {
            ClusterEvent::NodeApplied(node) => {
                let changed = {
                    let mut st = s.state.lock();
                    let before = st.version();
                    st.apply_node(node);
                    st.version() != before
                };
                if changed {
                    let mut q = s.queue.lock();
                    q.move_all_unschedulable(now);
                    self.update_queue_gauges(&q);
                    drop(q);
                    s.nominations.lock().retry_all_now(now);
                    s.wake.notify_one();
                }
            }
            ClusterEvent::NodeDeleted(name) => {
                s.state.lock().delete_node(&name);
                // The room a preemptor waits for on that node never comes.
                s.nominations.lock().node_gone(&name, now);
                s.wake.notify_one();
            }
            ClusterEvent::NamespaceApplied(ns) => {
                let changed = {
                    let mut st = s.state.lock();
                    let before = st.version();
                    st.apply_namespace(ns);
                    st.version() != before
                };
                if changed {
                    // New namespace labels may now match (or stop matching) the namespaceSelector
                    // of an unschedulable pod's affinity terms.
                    let mut q = s.queue.lock();
                    q.move_unschedulable_where(now, |i| uses_namespace_selector(&i.spec));
                    self.update_queue_gauges(&q);
                    drop(q);
                    s.wake.notify_one();
                }
            }
            ClusterEvent::NamespaceDeleted(name) => s.state.lock().delete_namespace(&name),
            ClusterEvent::PdbApplied(pdb) => s.state.lock().apply_pdb(pdb),
            ClusterEvent::PdbDeleted(key) => s.state.lock().delete_pdb(&key),
            ClusterEvent::StorageApplied(obj) => {
                let changed = s.state.lock().apply_storage(obj);
                self.storage_changed(changed, now);
                s.storage_seen.send_modify(|n| *n += 1);
            }
            ClusterEvent::StorageDeleted(key) => {
                let changed = s.state.lock().delete_storage(&key);
                self.storage_changed(changed, now);
                s.storage_seen.send_modify(|n| *n += 1);
            }
            ClusterEvent::PodDeleted { uid } => {
                self.pod_gone(&uid, now);
                s.storage_seen.send_modify(|n| *n += 1);
            }
            ClusterEvent::PodApplied(info) => {
                let uid = info.spec.uid.clone();
                if info.terminal {
                    // A finished pod no longer uses its node.
                    self.pod_gone(&uid, now);
                } else if info.node_name().is_some() {
                    // A preemptor bound by someone else (a previous leader) waits for nothing.
                    if s.nominations.lock().cancel(&uid).is_some() {
                        s.metrics.nomination_ended("cancelled");
                    }
                    s.state.lock().apply_bound_pod(info.spec);
                    let mut q = s.queue.lock();
                    q.remove(&uid);
                    self.update_queue_gauges(&q);
                } else if self.ours(&info) && !info.deleting {
                    // A stale unbound view of a pod we already decided is ignored until the watch
                    // shows the binding or the bind fails.
                    if s.state.lock().is_assumed(&uid) {
                        return;
                    }
                    let gang = gang_key(&info.spec);
                    if info.is_gated() {
                        tracing::debug!(pod = %info.key(), "{}", info.gated_message());
                    }
                    let mut q = s.queue.lock();
                    let schedulable = q.add_or_update(info, now);
                    if let Some(key) = gang.filter(|_| schedulable) {
                        // A new (or ungated) member may complete its gang: release the ones held
                        // for it.
                        q.activate_where(|i| is_member(i, &key));
                    }
                    self.update_queue_gauges(&q);
                    drop(q);
                    s.wake.notify_one();
                } else {
                    let mut q = s.queue.lock();
                    q.remove(&uid);
                    self.update_queue_gauges(&q);
                }
            }
        }
    }

    /// Runs the loop until `shutdown` resolves, then stops taking work and waits for in-flight binds.
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut tasks = JoinSet::new();
        let mut leader = self.shared.leader.clone();
        // Once the leader's sender is gone its value is final; stop waiting for changes to it.
        let mut leader_open = true;
        // Pods popped while decisions run in partitions that must be decided alone on the whole
        // cluster, gathered so that partitioned decisions stop for them once per batch.
        let mut held: Vec<QueuedPod> = Vec::new();
        let mut held_since: Option<Instant> = None;
        loop {
            while tasks.try_join_next().is_some() {}
            let ready = self.shared.nominations.lock().take_ready();
            for (qp, node, bind) in ready {
                // Every victim is gone: the reserved room is the preemptor's.
                self.shared.metrics.nomination_ended("victims_gone");
                if qp.info.spec.volumes.iter().any(|v| !v.claim_name.is_empty()) {
                    // Its claims may need a volume chosen on that node (and written before the
                    // Binding): it is decided again, as kube-scheduler runs a scheduling cycle
                    // for every preemptor; the room is free for it now.
                    let uid = &qp.info.spec.uid;
                    self.shared.state.lock().forget(uid);
                    self.shared.queue.lock().retry_now(uid);
                    self.shared.wake.notify_one();
                    continue;
                }
                self.spawn_bind(&mut tasks, qp, node, bind);
            }
            if !*leader.borrow_and_update() {
                tokio::select! {
                    () = &mut shutdown => break,
                    r = leader.changed(), if leader_open => if r.is_err() { break } else { continue },
                }
            }
            if self.shared.synced.load(Ordering::Relaxed) {
                // A waiting preemptor is decided again on the whole cluster, with no partitioned
                // decision in flight: new ones wait while one is due.
                let due = self
                    .shared
                    .nominations
                    .lock()
                    .next_wakeup()
                    .is_some_and(|t| t <= Instant::now());
                if due && self.in_flight() > 0 {
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = self.shared.wake.notified() => {},
                    }
                    continue;
                }
                if self.tend_nominations(&mut tasks).await {
                    continue;
                }
            }
            let ready = self.shared.queue.lock().ready(Instant::now());
            let limit = self.parallel_limit();
            // Pods held for a decision on the whole cluster go once a batch of them gathered,
            // nothing else is ready, the oldest waited ALONE_HOLD, or decisions are no longer
            // partitioned: each such decision first waits for every partitioned one to end.
            let alone_due = held_since.is_some_and(|since| {
                limit < 2 || held.len() >= self.shared.config.batch_size || ready == 0 || since.elapsed() >= ALONE_HOLD
            });
            if alone_due {
                let mut stopped = false;
                while self.in_flight() > 0 {
                    tokio::select! {
                        () = &mut shutdown => { stopped = true; break },
                        () = self.shared.wake.notified() => {},
                    }
                }
                if stopped {
                    break;
                }
                held_since = None;
                let alone = self.still_in_flight(std::mem::take(&mut held));
                if !alone.is_empty() {
                    self.shared.metrics.batch("alone");
                    let span = tracing::info_span!("batch", pods = alone.len());
                    self.schedule_batch(alone, &mut tasks).instrument(span).await;
                }
                continue;
            }
            if ready == 0 || !self.shared.synced.load(Ordering::Relaxed) {
                let queue_wakeup = self.shared.queue.lock().next_wakeup();
                let nomination_wakeup = self.shared.nominations.lock().next_wakeup();
                let wakeup = match (queue_wakeup, nomination_wakeup) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                let sleep = tokio::time::sleep_until(wakeup.unwrap_or_else(|| Instant::now() + Duration::from_secs(1)));
                tokio::select! {
                    () = &mut shutdown => break,
                    () = self.shared.wake.notified() => {},
                    () = sleep => {},
                    r = leader.changed(), if leader_open => leader_open = r.is_ok(),
                }
                continue;
            }
            if limit >= 2 && !self.shared.slots.lock().can_take(limit) {
                // The partition whose turn it is, or as many as replicas are ready, are being
                // decided: wait for one, or for the held pods' time.
                let hold_ends = tokio::time::sleep_until(
                    held_since.map_or_else(|| Instant::now() + Duration::from_secs(1), |since| since + ALONE_HOLD),
                );
                tokio::select! {
                    () = &mut shutdown => break,
                    () = self.shared.wake.notified() => {},
                    () = hold_ends => {},
                }
                continue;
            }
            if ready < self.shared.config.batch_size && !self.shared.config.batch_window.is_zero() {
                tokio::select! {
                    () = &mut shutdown => break,
                    () = tokio::time::sleep(self.shared.config.batch_window) => {},
                }
            }
            let batch = {
                let mut q = self.shared.queue.lock();
                let b = q.pop_batch(self.shared.config.batch_size, Instant::now());
                self.update_queue_gauges(&q);
                b
            };
            if batch.is_empty() {
                continue;
            }
            if limit < 2 {
                self.shared.metrics.batch("alone");
                let span = tracing::info_span!("batch", pods = batch.len());
                self.schedule_batch(batch, &mut tasks).instrument(span).await;
                continue;
            }
            let (alone, together) = self.split_alone(batch);
            if !together.is_empty() {
                self.spawn_partitioned(together, limit, &mut tasks);
            }
            if !alone.is_empty() {
                held_since.get_or_insert_with(Instant::now);
                held.extend(alone);
            }
        }
        // Held pods go back to the queue (the next leader, or this one, decides them).
        {
            let mut q = self.shared.queue.lock();
            for p in &held {
                q.retry_now(&p.info.spec.uid);
            }
        }
        tracing::info!(in_flight = tasks.len(), "binder stopping: finishing in-flight binds");
        self.shared.stopping.store(true, Ordering::Relaxed);
        self.shared.storage_seen.send_modify(|n| *n += 1);
        while tasks.join_next().await.is_some() {}
    }

    /// Most decisions in flight at once on node partitions so far.
    pub fn most_batches_in_flight(&self) -> usize {
        self.shared.slots.lock().most_in_flight()
    }

    /// The held pods still waiting for a decision (not deleted or bound meanwhile).
    fn still_in_flight(&self, held: Vec<QueuedPod>) -> Vec<QueuedPod> {
        let q = self.shared.queue.lock();
        held.into_iter()
            .filter(|p| q.place_of(&p.info.spec.uid) == Some(crate::queue::Place::InFlight))
            .collect()
    }

    /// Decisions in flight on node partitions.
    fn in_flight(&self) -> usize {
        self.shared.slots.lock().in_flight()
    }

    /// How many batches may be decided at once on node partitions now: the configured number,
    /// at most the ready replicas; 0 (one batch at a time on the whole cluster) when fewer than
    /// two replicas are ready or an experiment or shadow policy is active.
    fn parallel_limit(&self) -> usize {
        let s = &self.shared;
        if partitions(&s.config) < 2 {
            return 0;
        }
        let routing = s.experiments.current();
        if routing.active() || !routing.shadows.is_empty() {
            return 0;
        }
        match routing.backends.first().map(|pool| pool.ready_count()) {
            Some(ready) if ready >= 2 => ready.min(s.config.batches_in_flight),
            _ => 0,
        }
    }

    /// Splits a batch into the pods decided alone on the whole cluster ([`alone_reason`], or sent
    /// back by a partition before) and those a partition may decide.
    fn split_alone(&self, batch: Vec<QueuedPod>) -> (Vec<QueuedPod>, Vec<QueuedPod>) {
        let mut sent_back = self.shared.alone.lock();
        let (alone, together): (Vec<QueuedPod>, Vec<QueuedPod>) = batch
            .into_iter()
            .partition(|p| sent_back.contains(&p.info.spec.uid) || alone_reason(&p.info.spec).is_some());
        for p in &alone {
            sent_back.remove(&p.info.spec.uid);
        }
        (alone, together)
    }

    /// Decides `batch` on a free node partition in a task of its own; the partition is given
    /// back once its placements are assumed (its binds then go on in the same task).
    fn spawn_partitioned(&self, batch: Vec<QueuedPod>, limit: usize, tasks: &mut JoinSet<()>) {
        let Some(partition) = self.shared.slots.lock().take(limit) else {
            // Not reached: the loop waits for the partition whose turn it is before it pops.
            let mut q = self.shared.queue.lock();
            for p in &batch {
                q.retry_now(&p.info.spec.uid);
            }
            return;
        };
        self.shared.metrics.batches_in_flight.set(self.in_flight() as i64);
        self.shared.metrics.batch("partition");
        let this = self.clone();
        let span = tracing::info_span!("batch", pods = batch.len(), partition = partition.index);
        tasks.spawn(
            async move {
                let mut binds = JoinSet::new();
                {
                    let _held = HeldPartition {
                        binder: &this,
                        partition,
                    };
                    this.schedule_partition(batch, partition, &mut binds).await;
                }
                while binds.join_next().await.is_some() {}
            }
            .instrument(span),
        );
    }

    /// Decides one batch on one node partition (no experiment or shadow is active then).
    async fn schedule_partition(&self, batch: Vec<QueuedPod>, partition: Partition, tasks: &mut JoinSet<()>) {
        let s = &self.shared;
        s.metrics.batch_size.observe(batch.len() as f64);
        let routing = s.experiments.current();
        let route = routing.route(&batch[0].info, &s.config.policy);
        self.schedule_group(&routing, route, batch, tasks, Some(partition))
            .await;
    }

    /// Decides one batch and starts its binds: the batch is split by experiment arm, and each
    /// group is decided in turn by its arm's policy and backend, so every group sees the
    /// placements of the groups before it (one shared state: no node is overcommitted).
    async fn schedule_batch(&self, batch: Vec<QueuedPod>, tasks: &mut JoinSet<()>) {
        let s = &self.shared;
        let batch = self.gate_gangs(batch, tasks, Instant::now());
        if batch.is_empty() {
            return;
        }
        s.metrics.batch_size.observe(batch.len() as f64);
        let routing = s.experiments.current();
        if !routing.active() {
            let route = routing.route(&batch[0].info, &s.config.policy);
            self.schedule_group(&routing, route, batch, tasks, None).await;
            return;
        }
        for (route, group) in routing.split(batch, &s.config.policy) {
            let span = tracing::info_span!("arm", experiment = %route.experiment, arm = %route.arm, pods = group.len());
            self.schedule_group(&routing, route, group, tasks, None)
                .instrument(span)
                .await;
        }
    }

    /// Decides one group of pods with its route's policy and backend and starts their binds.
    async fn schedule_group(
        &self,
        routing: &Arc<Routing>,
        route: Route,
        batch: Vec<QueuedPod>,
        tasks: &mut JoinSet<()>,
        partition: Option<Partition>,
    ) {
        let s = &self.shared;
        let policy = route.policy_label().to_string();
        let pool = &routing.backends[route.backend];
        let fail_fast = route.backend != 0;
        let mut pods: Vec<&proto::Pod> = batch.iter().map(|p| &p.info.spec).collect();
        let mut rejected: Vec<(usize, String)> = Vec::new();
        let started = Instant::now();
        let response = loop {
            match self
                .decide(pool, &route.policy, &pods, fail_fast, true, partition)
                .await
            {
                Ok(r) => break Some(r),
                Err(Ok(status)) => {
                    // One invalid pod must not block the batch: report it and decide the rest.
                    if let Some(i) = invalid_pod_index(&status).filter(|i| *i < pods.len()) {
                        let uid = &pods.remove(i).uid;
                        rejected.push((
                            batch.iter().position(|p| &p.info.spec.uid == uid).unwrap_or(0),
                            status.message().to_string(),
                        ));
                        if pods.is_empty() {
                            break None;
                        }
                        continue;
                    }
                    tracing::warn!(error = %status, experiment = %route.experiment, arm = %route.arm, "decision failed on every replica");
                    break None;
                }
                Err(Err(e)) => {
                    tracing::warn!(error = %e, experiment = %route.experiment, arm = %route.arm, "no decision");
                    break None;
                }
            }
        };
        let took = started.elapsed();
        s.metrics.decision_duration.observe(took.as_secs_f64());
        if routing.active() {
            s.experiments.decided(routing, &route, took);
        }
        let now = Instant::now();
        let refused: Vec<usize> = rejected.iter().map(|(i, _)| *i).collect();
        for (i, message) in rejected {
            let p = &batch[i];
            if self.is_retrying(&p.info.spec.uid) {
                continue;
            }
            s.queue.lock().unschedulable(&p.info.spec.uid, now);
            s.metrics.attempt(&policy, "error");
            self.spawn_unschedulable(tasks, pod_ref(&p.info.spec), format!("invalid pod: {message}"));
        }
        let Some(Decided {
            mut response,
            replica,
            version,
        }) = response
        else {
            let mut q = s.queue.lock();
            let mut failed = 0;
            for p in &batch {
                if q.place_of(&p.info.spec.uid) == Some(crate::queue::Place::InFlight)
                    && !self.is_retrying(&p.info.spec.uid)
                {
                    q.backoff(&p.info.spec.uid, now);
                    s.metrics.attempt(&policy, "error");
                    failed += 1;
                }
            }
            self.update_queue_gauges(&q);
            drop(q);
            if routing.active() {
                s.experiments.decision_failed(routing, &route, failed);
            }
            return;
        };
        if !routing.shadows.is_empty() {
            self.run_shadows(routing, &route, &pods, &response)
                .instrument(tracing::info_span!("shadows"))
                .await;
        }
        let (sent_back, outside) = match partition {
            Some(p) => self.partition_returns(p, &mut response),
            None => (HashSet::new(), false),
        };
        let applied_policy = response.policy.clone();
        // The decided pods (not those the service refused), each taken out as its placement is
        // acted on: what is left at the end had no answer.
        let mut by_uid: HashMap<String, QueuedPod> = batch
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !refused.contains(i))
            .map(|(_, p)| (p.info.spec.uid.clone(), p))
            .collect();
        self.assume_placed(&response, &by_uid, &replica, version, !outside);
        for mut placement in response.placements {
            let volumes = std::mem::take(&mut placement.claim_bindings);
            let Some(qp) = by_uid.remove(placement.pod_uid.as_str()) else {
                continue;
            };
            use proto::placement::Outcome;
            let retrying = self.is_retrying(&placement.pod_uid);
            if let Some(Outcome::Unschedulable(u)) = &placement.outcome {
                // The service ran DefaultPreemption's PostFilter for the pod (gangs do not preempt).
                if u.gang.is_empty() && !u.error {
                    s.metrics.preemption_attempts.inc();
                }
            }
            match placement.outcome {
                Some(Outcome::NodeName(node)) => {
                    if retrying {
                        // A waiting preemptor fits now: it binds here; a nomination elsewhere is
                        // cleared, as its reservation is.
                        if let Some(n) = s.nominations.lock().cancel(&placement.pod_uid) {
                            s.metrics.nomination_ended("placed_on_retry");
                            tracing::info!(pod = %qp.info.key(), nominated = %n.node, %node, "nominated pod fits on retry");
                            if n.node != node {
                                self.spawn_clear_nomination(tasks, pod_ref(&qp.info.spec));
                            }
                        }
                    }
                    // Assumed by `assume_placed` above.
                    let bind = Bind {
                        annotations: route.annotations(&applied_policy),
                        route: route.clone(),
                        routing: Arc::clone(routing),
                        volumes,
                    };
                    self.spawn_bind(tasks, qp, node, bind);
                }
                Some(Outcome::Unschedulable(u)) if retrying => {
                    // Still no room: no new preemption while its victims terminate.
                    s.metrics.attempt(&policy, "unschedulable");
                    self.keep_waiting(tasks, &placement.pod_uid, Some(&u.message), now);
                }
                None if sent_back.contains(&placement.pod_uid) => {
                    // Not decided for the whole cluster: again, alone, at once.
                    s.alone.lock().insert(placement.pod_uid.clone());
                    s.queue.lock().retry_now(&placement.pod_uid);
                }
                None if retrying => {}
                Some(Outcome::Unschedulable(u)) if u.error => {
                    // Scheduling failed with an error (an extender that is not ignorable): as
                    // kube-scheduler, the pod is retried after its backoff, not left for a
                    // cluster event, and its condition's reason is SchedulerError.
                    s.queue.lock().backoff(&qp.info.spec.uid, now);
                    s.metrics.attempt(&policy, "error");
                    self.spawn_scheduler_error(tasks, pod_ref(&qp.info.spec), u.message);
                }
                Some(Outcome::Unschedulable(u)) if !u.nominated_node_name.is_empty() => {
                    s.metrics.attempt(&policy, "unschedulable");
                    if routing.active() {
                        s.experiments.unschedulable(routing, &route);
                    }
                    let bind = Bind {
                        annotations: route.annotations(&applied_policy),
                        route: route.clone(),
                        routing: Arc::clone(routing),
                        volumes: Vec::new(),
                    };
                    self.start_preemption(tasks, qp, u, bind);
                }
                Some(Outcome::Unschedulable(u)) => {
                    s.queue.lock().unschedulable(&qp.info.spec.uid, now);
                    s.metrics.attempt(&policy, "unschedulable");
                    if routing.active() {
                        s.experiments.unschedulable(routing, &route);
                    }
                    self.spawn_unschedulable(tasks, pod_ref(&qp.info.spec), u.message);
                }
                None => {
                    s.queue.lock().backoff(&qp.info.spec.uid, now);
                    s.metrics.attempt(&policy, "error");
                }
            }
        }
        let mut q = s.queue.lock();
        for uid in by_uid.keys() {
            if q.place_of(uid) == Some(crate::queue::Place::InFlight) && !self.is_retrying(uid) {
                q.backoff(uid, now);
            }
        }
        self.update_queue_gauges(&q);
    }

    /// The pods of a partitioned decision decided again alone ([`crate::parallel::send_back`]),
    /// counted by why, and whether one was placed outside the partition.
    fn partition_returns(
        &self,
        partition: Partition,
        response: &mut proto::ScheduleResponse,
    ) -> (HashSet<String>, bool) {
        let mut sent_back = HashSet::new();
        let mut outside = false;
        for (uid, why) in crate::parallel::send_back(partition, response) {
            if why == "outside" {
                outside = true;
                tracing::warn!(pod_uid = %uid, partition = partition.index,
                    "decision replica chose a node outside the batch's partition; the pod is decided again alone");
            }
            self.shared.metrics.partition_return(why);
            sent_back.insert(uid);
        }
        (sent_back, outside)
    }

    /// Evaluates the shadow policies on a decided group (before its placements are assumed, so
    /// they see the same cluster) and records how they agree with the placements acted on.
    async fn run_shadows(
        &self,
        routing: &Arc<Routing>,
        route: &Route,
        pods: &[&proto::Pod],
        response: &proto::ScheduleResponse,
    ) {
        let s = &self.shared;
        let primary: std::collections::HashMap<&str, &proto::Placement> =
            response.placements.iter().map(|p| (p.pod_uid.as_str(), p)).collect();
        let verdicts = futures::future::join_all(routing.shadows.iter().map(|shadow| async move {
            let pool = &routing.backends[shadow.backend];
            (
                shadow,
                self.decide(pool, &shadow.policy, pods, shadow.backend != 0, false, None)
                    .await
                    .map(|d| d.response),
            )
        }))
        .await;
        for (shadow, verdict) in verdicts {
            match verdict {
                Ok(r) => s.experiments.shadow_compared(route, shadow, &primary, &r.placements),
                Err(e) => {
                    let error = match e {
                        Ok(status) => status.to_string(),
                        Err(e) => e.to_string(),
                    };
                    tracing::debug!(shadow = %shadow.name, %error, "shadow policy failed");
                    s.experiments.shadow_failed(route, shadow, pods.len());
                }
            }
        }
    }

    /// Syncs the snapshot to a replica and asks it to place `pods`, failing over to other replicas;
    /// with `assume`, the replica also stores its snapshot with the placements assumed.
    /// `Err(Ok(status))` is a request the service refused (INVALID_ARGUMENT); `Err(Err(_))` means no
    /// replica could answer.
    async fn decide(
        &self,
        pool: &Arc<ReplicaPool>,
        policy: &str,
        pods: &[&proto::Pod],
        fail_fast: bool,
        assume: bool,
        partition: Option<Partition>,
    ) -> Result<Decided, Result<tonic::Status, DecideError>> {
        let s = &self.shared;
        if fail_fast && pool.ready_count() == 0 && !pool.all().is_empty() {
            return Err(Err(DecideError::BackendOut));
        }
        let mut tried: Vec<String> = Vec::new();
        let mut last_error = None;
        while let Some(replica) = pool.pick(&tried) {
            tried.push(replica.endpoint.clone());
            // Counted as busy from the pick on (its sync included), so a batch decided at the
            // same time picks another replica.
            let (_, _busy) = replica.client();
            match self.decide_on(pool, &replica, policy, pods, assume, partition).await {
                Ok((response, version)) => {
                    replica.succeeded();
                    return Ok(Decided {
                        response,
                        replica,
                        version,
                    });
                }
                Err(status) if status.code() == Code::InvalidArgument => return Err(Ok(status)),
                Err(status) => {
                    tracing::warn!(replica = %replica.endpoint, error = %status, "decision replica failed");
                    s.metrics.replica_error(&replica.endpoint);
                    replica.failed(&pool.config);
                    last_error = Some(status.to_string());
                }
            }
        }
        Err(Err(match last_error {
            Some(e) => DecideError::AllFailed(e),
            None => DecideError::NoReplica,
        }))
    }

    /// One replica's decision, and the state version of the snapshot it was made on.
    async fn decide_on(
        &self,
        pool: &ReplicaPool,
        replica: &Arc<Replica>,
        policy: &str,
        pods: &[&proto::Pod],
        assume: bool,
        partition: Option<Partition>,
    ) -> Result<(proto::ScheduleResponse, u64), tonic::Status> {
        let s = &self.shared;
        let timeout = pool.config.call_timeout;
        for _ in 0..2 {
            let (snapshot_id, version) = self.sync(pool, replica).await?;
            let (mut client, _inflight) = replica.client();
            let mut req = tonic::Request::new(proto::ScheduleRequest {
                snapshot: Some(proto::SnapshotRef {
                    source: Some(proto::snapshot_ref::Source::SnapshotId(snapshot_id)),
                }),
                pods: pods
                    .iter()
                    .map(|p| partition.map_or_else(|| (*p).clone(), |part| part.restrict(p)))
                    .collect(),
                policy: policy.to_string(),
                seed: s.config.seed,
                assume,
            });
            req.set_timeout(timeout);
            placement_scheduler::telemetry::inject_current(req.metadata_mut());
            match client.schedule(req).await {
                Ok(r) => return Ok((r.into_inner(), version)),
                Err(status) if is_snapshot_not_found(&status) => {
                    tracing::debug!(replica = %replica.endpoint, "snapshot evicted before the Schedule call");
                    // Evicted between the sync and the call: re-send a full snapshot once.
                    *replica.synced.lock() = None;
                }
                Err(status) => return Err(status),
            }
        }
        Err(tonic::Status::unavailable("snapshot evicted twice in a row"))
    }

    /// Brings a replica's snapshot up to date (a delta on what it holds, or a full snapshot) and
    /// returns its id and the state version it reflects.
    async fn sync(&self, pool: &ReplicaPool, replica: &Arc<Replica>) -> Result<(String, u64), tonic::Status> {
        let s = &self.shared;
        let held = replica.synced.lock().clone();
        let delta = {
            let st = s.state.lock();
            let version = st.version();
            match held {
                Some(h) if h.version == version && h.also.is_none() => return Ok((h.id, version)),
                Some(h) => match st.delta_since_except(h.version, h.also) {
                    // It holds the state already (its own assumed placements, nothing else).
                    Some(d) if d == proto::SnapshotDelta::default() => {
                        drop(st);
                        let mut synced = replica.synced.lock();
                        if synced.as_ref() == Some(&h) {
                            *synced = Some(Held::at(h.id.clone(), version));
                        }
                        return Ok((h.id, version));
                    }
                    d => d.map(|mut d| {
                        d.base_snapshot_id = h.id;
                        (d, version)
                    }),
                },
                None => None,
            }
        };
        if let Some((delta, version)) = delta {
            let started = Instant::now();
            let result = self
                .send_sync(pool, replica, proto::sync_snapshot_request::Kind::Delta(delta))
                .await;
            match result {
                Ok((id, bytes)) => {
                    s.metrics.sync(false, bytes, started.elapsed());
                    *replica.synced.lock() = Some(Held::at(id.clone(), version));
                    self.compact_log();
                    return Ok((id, version));
                }
                // The replica no longer holds the base: a full snapshot instead.
                Err(status) if is_snapshot_not_found(&status) => {
                    tracing::debug!(replica = %replica.endpoint, "replica no longer holds the delta's base: full sync");
                    *replica.synced.lock() = None
                }
                Err(status) => return Err(status),
            }
        }
        self.sync_full(pool, replica).await
    }

    /// Sends a replica the whole state in parts: a full snapshot with every namespace, budget and
    /// storage object, the first [`ReplicaConfig::full_sync_chunk_nodes`] nodes and no pod;
    /// deltas on it with the other nodes, as many each; then deltas of
    /// [`ReplicaConfig::full_sync_chunk_pods`] pods each. The pods go as the state stores them,
    /// encoded and shared: no decoded copy of them is made and no message holds them all.
    ///
    /// [`ReplicaConfig::full_sync_chunk_nodes`]: crate::replicas::ReplicaConfig
    /// [`ReplicaConfig::full_sync_chunk_pods`]: crate::replicas::ReplicaConfig
    async fn sync_full(&self, pool: &ReplicaPool, replica: &Arc<Replica>) -> Result<(String, u64), tonic::Status> {
        let s = &self.shared;
        tracing::debug!(replica = %replica.endpoint, "full sync");
        let started = Instant::now();
        let (FullParts { rest, pods }, version) = {
            let st = s.state.lock();
            (st.full_parts_unordered(), st.version())
        };
        // The pods go in uid order (a replica adds each chunk at its pod map's edge); they are
        // sorted while the nodes are sent.
        let pods = tokio::task::spawn_blocking(move || {
            let mut pods = pods;
            crate::state::sort_by_uid(&mut pods);
            pods
        });
        // The log after `version` is kept until this sync ends (another replica's sync may
        // compact it meanwhile): the next delta to this replica starts there.
        let _pinned = PinnedVersion::new(&s.full_syncs, version);
        // The nodes past the first chunk follow in deltas of their own.
        let mut rest = rest;
        let chunk_nodes = pool.config.full_sync_chunk_nodes.max(1);
        let more_nodes = if rest.nodes.len() > chunk_nodes {
            rest.nodes.split_off(chunk_nodes)
        } else {
            Vec::new()
        };
        let (mut id, mut bytes) = self
            .send_sync(pool, replica, proto::sync_snapshot_request::Kind::Full(rest))
            .await?;
        for chunk in more_nodes.chunks(chunk_nodes) {
            let delta = proto::SnapshotDelta {
                base_snapshot_id: id,
                upsert_nodes: chunk.to_vec(),
                ..Default::default()
            };
            let (next, sent) = self
                .send_sync(pool, replica, proto::sync_snapshot_request::Kind::Delta(delta))
                .await?;
            id = next;
            bytes += sent;
        }
        // Freeing tens of thousands of nodes took longer than sending a chunk of pods.
        drop(tokio::task::spawn_blocking(move || drop(more_nodes)));
        let pods = pods
            .await
            .map_err(|e| tonic::Status::internal(format!("sorting the pods failed: {e}")))?;
        for chunk in pods.chunks(pool.config.full_sync_chunk_pods.max(1)) {
            let delta = EncodedPodsDelta {
                base_snapshot_id: id,
                pods: chunk.to_vec(),
            };
            bytes += prost::Message::encoded_len(&delta);
            id = replica.sync_encoded(delta, &pool.config).await?;
        }
        drop(pods);
        s.metrics.sync(true, bytes, started.elapsed());
        *replica.synced.lock() = Some(Held::at(id.clone(), version));
        self.compact_log();
        Ok((id, version))
    }

    /// One SyncSnapshot call: the id of the snapshot the replica built, and the request's size.
    async fn send_sync(
        &self,
        pool: &ReplicaPool,
        replica: &Arc<Replica>,
        kind: proto::sync_snapshot_request::Kind,
    ) -> Result<(String, usize), tonic::Status> {
        let (mut client, _inflight) = replica.client();
        let mut req = tonic::Request::new(proto::SyncSnapshotRequest { kind: Some(kind) });
        req.set_timeout(pool.config.call_timeout);
        placement_scheduler::telemetry::inject_current(req.metadata_mut());
        let bytes = prost::Message::encoded_len(req.get_ref());
        let id = client.sync_snapshot(req).await?.into_inner().snapshot_id;
        Ok((id, bytes))
    }

    /// Assumes every placed pod of a decision, at once under the state lock. When the replica
    /// stored its snapshot with the same placements assumed, that snapshot is kept as the one it
    /// holds: it reflects the state at the version it decided on plus these assumptions, so the
    /// next sync sends it only what else changed (nothing, when nothing did). `same_view` is
    /// false when the binder did not act on a placement the replica assumed (a node outside its
    /// partition): then the replica's snapshot is not the binder's and is not kept.
    fn assume_placed(
        &self,
        response: &proto::ScheduleResponse,
        by_uid: &HashMap<String, QueuedPod>,
        replica: &Arc<Replica>,
        version: u64,
        same_view: bool,
    ) {
        let s = &self.shared;
        let mut placed: HashMap<&str, &str> = HashMap::new();
        let kept = {
            let mut st = s.state.lock();
            let from = st.version();
            for p in &response.placements {
                if let Some(proto::placement::Outcome::NodeName(node)) = &p.outcome {
                    if let Some(qp) = by_uid.get(p.pod_uid.as_str()) {
                        st.assume(qp.info.spec.clone(), node);
                        // The volumes chosen for it are no other claim's until the watches
                        // show them bound or its PreBind gives them up.
                        st.assume_storage(&p.pod_uid, &p.claim_bindings);
                    }
                    placed.insert(&p.pod_uid, node);
                }
            }
            let assumed = &response.assumed_snapshot_id;
            (!assumed.is_empty() && same_view && st.all_assumed(&placed)).then(|| Held {
                id: assumed.clone(),
                version,
                also: Some((from, st.version())),
            })
        };
        if response.assumed_snapshot_id.is_empty() {
            return;
        }
        let result = match kept {
            Some(next) => {
                let mut held = replica.synced.lock();
                // Unless another sync moved the replica on meanwhile.
                if held.as_ref().is_some_and(|h| h.version == version && h.also.is_none()) {
                    *held = Some(next);
                    "adopted"
                } else {
                    "stale"
                }
            }
            None => "stale",
        };
        s.metrics.assumed_snapshot(result);
    }

    /// Drops the change log every synced replica of every backend is past: no delta needs it.
    fn compact_log(&self) {
        let s = &self.shared;
        if let Some(min) = s.experiments.current().min_synced_version() {
            let pinned = s.full_syncs.lock().iter().copied().min();
            s.state.lock().compact(pinned.map_or(min, |p| p.min(min)));
        }
    }

    async fn rate_limit(&self) {
        if let Some(l) = &self.shared.limiter {
            l.until_ready().await;
        }
    }

    fn spawn_bind(&self, tasks: &mut JoinSet<()>, qp: QueuedPod, node: String, bind: Bind) {
        let this = self.clone();
        tasks.spawn(async move {
            let s = &this.shared;
            let uid = qp.info.spec.uid.clone();
            let pod = pod_ref(&qp.info.spec);
            let policy = bind.route.policy_label();
            let record = bind.routing.active();
            if !bind.volumes.is_empty() {
                let span = tracing::info_span!("prebind_volumes", pod = %pod.key(), %node, claims = bind.volumes.len());
                if this.prebind_volumes(&pod, &node, &bind.volumes, policy).instrument(span).await == PreBind::Stopped {
                    return;
                }
            }
            let mut retry_in = s.config.bind_retry_backoff;
            for attempt in 1..=s.config.bind_attempts.max(1) {
                // A pod deleted or bound meanwhile is no longer queued: nothing to bind.
                if !s.queue.lock().contains(&uid) {
                    if attempt == 1 {
                        let mut st = s.state.lock();
                        st.forget(&uid);
                        st.forget_storage(&uid);
                    }
                    return;
                }
                if !*s.leader.borrow() {
                    if attempt == 1 {
                        // Nothing was written: the pod goes back to the queue for whoever leads
                        // next, its reservation with it.
                        let mut st = s.state.lock();
                        st.forget(&uid);
                        st.forget_storage(&uid);
                        drop(st);
                        s.queue.lock().retry_now(&uid);
                        return;
                    }
                    // An earlier attempt may have gone through: the pod keeps its reservation and
                    // is not decided again; this binder tries the same node once it leads again
                    // (a Conflict then says the earlier attempt bound it), unless the watch shows
                    // the pod bound or deleted first.
                    if !this.lead_again(&uid).await {
                        return;
                    }
                }
                let Ok(permit) = Arc::clone(&s.binds).acquire_owned().await else {
                    return;
                };
                this.rate_limit().await;
                let started = Instant::now();
                let extender = s.config.extenders.as_deref().and_then(|set| {
                    let spec = &qp.info.spec;
                    set.binder_for_names(
                        spec.containers
                            .iter()
                            .chain(&spec.init_containers)
                            .flat_map(|c| c.requests.keys().map(String::as_str)),
                    )
                });
                let result = match extender {
                    // The extender writes the Binding; an error (its own, or no answer) is retried
                    // on the same node like a failed write: the API server refuses a second
                    // Binding, and the watch drops the pod from the queue once it shows it bound.
                    Some(e) => e
                        .bind(&pod.namespace, &pod.name, &pod.uid, &node)
                        .await
                        .map_err(|err| ApiError::Other(format!("extender {}: {err}", e.config().url_prefix))),
                    None => s.api.bind(&pod, &node, &bind.annotations).await,
                };
                s.metrics.bind(&result, started.elapsed());
                drop(permit);
                if record && matches!(result, Err(ApiError::Other(_))) {
                    s.experiments.bind_failed(&bind.routing, &bind.route);
                }
                match result {
                    Ok(()) => {
                        let bound_at = std::time::SystemTime::now();
                        s.queue.lock().remove(&uid);
                        if record {
                            s.experiments.bound(&bind.routing, &bind.route, &uid, &node);
                        }
                        s.metrics.attempt(policy, "scheduled");
                        s.metrics.e2e(policy, qp.first_seen.elapsed(), qp.attempts);
                        // The event waits for one of the few event slots (in bind order).
                        let Ok(_event) = Arc::clone(&s.events).acquire_owned().await else {
                            return;
                        };
                        this.rate_limit().await;
                        if let Err(e) = s.api.record_scheduled(&pod, &node, bound_at).await {
                            tracing::debug!(pod = %pod.key(), error = %e, "recording Scheduled event failed");
                        }
                        return;
                    }
                    Err(ApiError::Conflict(msg) | ApiError::NotFound(msg)) => {
                        // Already bound (the watch will show where; after an ambiguous failure
                        // possibly by our own earlier attempt) or gone (the watch will show the
                        // deletion): never retried. The reservation stays until the watch says
                        // which, so no batch in between can use room the pod may occupy.
                        tracing::debug!(pod = %pod.key(), %node, %msg, attempt, "bind conflict");
                        s.queue.lock().remove(&uid);
                        return;
                    }
                    Err(ApiError::Other(msg)) if attempt < s.config.bind_attempts => {
                        // The write may have gone through (a timeout or 5xx after the fact): retry
                        // the same node, keeping its reservation, so the pod is never counted on
                        // two nodes nor on none.
                        tracing::warn!(pod = %pod.key(), %node, %msg, attempt, "bind failed; retrying the same node");
                        tokio::time::sleep(retry_in).await;
                        retry_in = (retry_in * 2).min(Duration::from_secs(5));
                    }
                    Err(ApiError::Other(msg)) => {
                        // Out of attempts: after this long the watch would have shown a binding
                        // that went through, so the reservation goes and the pod is decided again.
                        tracing::warn!(pod = %pod.key(), %node, %msg, attempt, "bind failed; deciding again after backoff");
                        {
                            let mut st = s.state.lock();
                            st.forget(&uid);
                            st.forget_storage(&uid);
                        }
                        s.queue.lock().backoff(&uid, Instant::now());
                        s.metrics.attempt(policy, "error");
                        s.wake.notify_one();
                        return;
                    }
                }
            }
        });
    }

    /// Waits until this binder leads again (true), or until the pod is no longer queued (bound or
    /// deleted, as the watch shows) or the binder stops (false).
    async fn lead_again(&self, uid: &str) -> bool {
        let s = &self.shared;
        let mut leader = s.leader.clone();
        loop {
            if *leader.borrow_and_update() {
                return true;
            }
            if !s.queue.lock().contains(uid) || s.stopping.load(Ordering::Relaxed) {
                return false;
            }
            tokio::select! {
                r = leader.changed() => if r.is_err() { return false },
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }

    /// VolumeBinding's PreBind (kube's `BindPodVolumes`): writes each claim binding chosen for the
    /// pod (static bindings first, then provisioning, as `bindAPIUpdate` does), then waits,
    /// watch-driven and at most `volume_bind_timeout`, until the PV controller has bound every
    /// claim (`checkBindings`). On failure or timeout the choices and the pod's reservation are
    /// forgotten, the pod gets kube-scheduler's `SchedulerError` condition and `FailedScheduling`
    /// event, and it is decided again after its backoff.
    async fn prebind_volumes(
        &self,
        pod: &PodRef,
        node: &str,
        volumes: &[proto::ClaimBinding],
        policy: &str,
    ) -> PreBind {
        use proto::claim_binding::Target;
        let s = &self.shared;
        let started = Instant::now();
        let mut claims: Vec<(ClaimRef, Target)> = {
            let st = s.state.lock();
            volumes
                .iter()
                .filter_map(|b| {
                    let key = format!("{}/{}", b.claim_namespace, b.claim_name);
                    let uid = match st.storage_object(&StorageKey::Claim(key)) {
                        Some(StorageObject::Claim(c)) => c.uid.clone(),
                        _ => String::new(),
                    };
                    let claim = ClaimRef {
                        namespace: b.claim_namespace.clone(),
                        name: b.claim_name.clone(),
                        uid,
                    };
                    Some((claim, b.target.clone()?))
                })
                .collect()
        };
        claims.sort_by_key(|(_, t)| matches!(t, Target::SelectedNode(_)));
        // kube-scheduler 1.35+ (NominatedNodeNameForExpectation): a pod whose PreBind has work
        // gets `status.nominatedNodeName` set to its node first, so that other schedulers and
        // autoscalers see where it is going while its volumes are bound; the Binding clears it
        // (the API server's ClearingNominatedNodeNameAfterBinding), a failure clears it here. Not
        // fatal, as in kube.
        if !claims.is_empty() && self.may_prebind(pod, started) {
            self.rate_limit().await;
            if let Err(e) = s.api.nominate(pod, node).await {
                tracing::debug!(pod = %pod.key(), %node, error = %e, "setting nominatedNodeName before PreBind failed");
            }
        }
        for (claim, target) in &claims {
            if !self.may_prebind(pod, started) {
                return PreBind::Stopped;
            }
            let Ok(permit) = Arc::clone(&s.binds).acquire_owned().await else {
                return PreBind::Stopped;
            };
            self.rate_limit().await;
            let result = match target {
                Target::VolumeName(pv) => s.api.bind_volume(pv, claim).await,
                Target::SelectedNode(n) => s.api.select_node(claim, n).await,
            };
            drop(permit);
            if let Err(e) = result {
                let (ApiError::Conflict(m) | ApiError::NotFound(m) | ApiError::Other(m)) = e;
                tracing::info!(pod = %pod.key(), claim = %claim.key(), error = %m, "writing a claim binding failed");
                self.fail_prebind(pod, format!("{PREBIND_FAILED}: {m}"), "failed", started, policy)
                    .await;
                return PreBind::Stopped;
            }
        }
        let deadline = Instant::now() + s.config.volume_bind_timeout;
        let mut changes = s.storage_seen.subscribe();
        // Per binding: whether the watch has shown what was written (kube compares resourceVersions
        // to skip objects older than its write; a watched object without the write is older).
        let mut seen = vec![false; claims.len()];
        loop {
            if !self.may_prebind(pod, started) {
                return PreBind::Stopped;
            }
            match self.check_bindings(&claims, node, &mut seen) {
                Ok(true) => {
                    tracing::debug!(pod = %pod.key(), took = ?started.elapsed(), "claims bound");
                    s.metrics.volume_prebind("bound", started.elapsed());
                    return PreBind::Bound;
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::info!(pod = %pod.key(), error = %e, "claim binding undone");
                    self.fail_prebind(
                        pod,
                        format!("{PREBIND_FAILED}: binding volumes: {e}"),
                        "failed",
                        started,
                        policy,
                    )
                    .await;
                    return PreBind::Stopped;
                }
            }
            changes.mark_unchanged();
            tokio::select! {
                _ = changes.changed() => {}
                // The lease and the pod are looked at again at least every second, as kube polls.
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
                () = tokio::time::sleep_until(deadline) => {
                    tracing::info!(pod = %pod.key(), timeout = ?s.config.volume_bind_timeout, "claims not bound in time");
                    self.fail_prebind(
                        pod,
                        format!("{PREBIND_FAILED}: binding volumes: context deadline exceeded"),
                        "timed_out",
                        started,
                        policy,
                    )
                    .await;
                    return PreBind::Stopped;
                }
            }
        }
    }

    /// Whether a PreBind may go on: this binder leads and the pod is still queued. Otherwise its
    /// choices and reservation are forgotten (a pod deleted meanwhile is gone; after a lost
    /// lease, the pod waits for whoever leads next) and the PreBind is counted as cancelled.
    fn may_prebind(&self, pod: &PodRef, started: Instant) -> bool {
        let s = &self.shared;
        let leading = *s.leader.borrow() && !s.stopping.load(Ordering::Relaxed);
        if leading && s.queue.lock().contains(&pod.uid) {
            return true;
        }
        {
            let mut st = s.state.lock();
            st.forget(&pod.uid);
            st.forget_storage(&pod.uid);
        }
        s.queue.lock().retry_now(&pod.uid);
        s.metrics.volume_prebind("cancelled", started.elapsed());
        tracing::debug!(pod = %pod.key(), leading, "PreBind given up: pod gone or lease lost");
        false
    }

    /// kube's `checkBindings` on the watched objects (never the assumed ones): `Ok(true)` when
    /// every claim is fully bound, `Ok(false)` to wait, `Err` when a binding was undone (a
    /// volume's claimRef reset, a claim's selected node removed: the provisioner gave up).
    fn check_bindings(
        &self,
        claims: &[(ClaimRef, proto::claim_binding::Target)],
        node: &str,
        seen: &mut [bool],
    ) -> Result<bool, String> {
        use proto::claim_binding::Target;
        let st = self.shared.state.lock();
        let mut all = true;
        for ((claim, target), seen) in claims.iter().zip(seen.iter_mut()) {
            let Some(StorageObject::Claim(c)) = st.storage_object(&StorageKey::Claim(claim.key())) else {
                return Err(format!(
                    "failed to check binding: could not find v1.PersistentVolumeClaim {:?}",
                    claim.key()
                ));
            };
            match target {
                Target::VolumeName(pv) => {
                    let Some(StorageObject::Volume(v)) = st.storage_object(&StorageKey::Volume(pv.clone())) else {
                        return Err(format!(
                            "failed to check binding: could not find v1.PersistentVolume {pv:?}"
                        ));
                    };
                    let ours = v.claim_ref.as_ref().is_some_and(|r| {
                        r.namespace == claim.namespace
                            && r.name == claim.name
                            && !r.uid.is_empty()
                            && (claim.uid.is_empty() || r.uid == claim.uid)
                    });
                    if ours {
                        *seen = true;
                    } else if *seen {
                        return Err(format!("ClaimRef got reset for pv {pv:?}"));
                    } else {
                        all = false;
                        continue;
                    }
                }
                Target::SelectedNode(_) => {
                    if c.selected_node == node {
                        *seen = true;
                    } else if *seen {
                        return Err(format!("provisioning failed for PVC {:?}", claim.name));
                    } else if !fully_bound(c) {
                        all = false;
                        continue;
                    }
                }
            }
            all &= fully_bound(c);
        }
        Ok(all)
    }

    /// A PreBind failed: its choices and the pod's reservation go, the pod is retried after its
    /// backoff, and it gets what kube-scheduler writes for a failed binding cycle (reason
    /// `SchedulerError`, the Warning event `FailedScheduling` with the message).
    async fn fail_prebind(&self, pod: &PodRef, message: String, result: &'static str, started: Instant, policy: &str) {
        let s = &self.shared;
        {
            let mut st = s.state.lock();
            st.forget(&pod.uid);
            st.forget_storage(&pod.uid);
        }
        s.queue.lock().backoff(&pod.uid, Instant::now());
        s.metrics.attempt(policy, "error");
        s.metrics.volume_prebind(result, started.elapsed());
        s.wake.notify_one();
        tracing::warn!(pod = %pod.key(), %message, "PreBind failed; deciding again after backoff");
        // kube's handleBindingCycleError clears the nominatedNodeName set before PreBind.
        if *s.leader.borrow() {
            self.rate_limit().await;
            if let Err(e) = s.api.clear_nomination(pod).await {
                tracing::debug!(pod = %pod.key(), error = %e, "clearing nominatedNodeName failed");
            }
        }
        self.report_failure(pod, Failure::SchedulerError, &message).await;
    }

    /// Holds back gang members whose gang is short, pulls the waiting members of gangs that are
    /// complete into the batch, reports gangs that waited too long and invalid gang declarations.
    fn gate_gangs(&self, mut batch: Vec<QueuedPod>, tasks: &mut JoinSet<()>, now: Instant) -> Vec<QueuedPod> {
        let s = &self.shared;
        if batch.iter().all(|p| p.info.spec.gang.is_none()) {
            return batch;
        }
        let mut report: Vec<(PodRef, String)> = Vec::new();
        batch.retain(|p| match gang_problem(&p.info.spec) {
            Some(problem) => {
                report.push((pod_ref(&p.info.spec), problem));
                false
            }
            None => true,
        });
        let mut keys: Vec<String> = batch.iter().filter_map(|p| gang_key(&p.info.spec)).collect();
        keys.sort();
        keys.dedup();
        // Members bound or assumed, by gang (the state is read before the queue is locked, the
        // order every other path takes).
        let mut placed: HashMap<String, Vec<String>> = HashMap::new();
        for p in s.state.lock().pods() {
            if let Some(k) = gang_key(&p).filter(|k| keys.binary_search(k).is_ok()) {
                placed.entry(k).or_default().push(p.uid.clone());
            }
        }
        let mut q = s.queue.lock();
        for (pod, _) in &report {
            q.unschedulable(&pod.uid, now);
        }
        for key in keys {
            let in_batch: HashSet<String> = batch
                .iter()
                .filter(|p| is_member(&p.info, &key))
                .map(|p| p.info.spec.uid.clone())
                .collect();
            let min_members = batch
                .iter()
                .filter(|p| in_batch.contains(&p.info.spec.uid))
                .filter_map(|p| p.info.spec.gang.as_ref().map(|g| g.min_members))
                .max()
                .unwrap_or(1);
            let queued = q.find(|i| is_member(i, &key));
            // Gated members are not there yet: the gang waits for their gates to go.
            let waiting: Vec<String> = queued
                .iter()
                .filter(|(uid, place, _)| {
                    !in_batch.contains(uid)
                        && !matches!(place, crate::queue::Place::InFlight | crate::queue::Place::Gated)
                })
                .map(|(uid, ..)| uid.clone())
                .collect();
            let in_flight = queued
                .iter()
                .filter(|(uid, place, _)| !in_batch.contains(uid) && *place == crate::queue::Place::InFlight)
                .count();
            // Members bound or assumed (and not also still queued, as an assumed one is).
            let queued_uids: HashSet<&str> = queued.iter().map(|(uid, ..)| uid.as_str()).collect();
            let scheduled = placed.get(&key).map_or(0, |uids| {
                uids.iter().filter(|u| !queued_uids.contains(u.as_str())).count()
            });
            let first_seen = queued
                .iter()
                .filter(|(_, place, _)| *place != crate::queue::Place::Gated)
                .map(|(.., seen)| *seen)
                .min()
                .unwrap_or(now);
            match gang_verdict(
                &key,
                min_members,
                in_batch.len(),
                &waiting,
                in_flight,
                scheduled,
                first_seen,
                now,
                s.config.gang_timeout,
            ) {
                GangVerdict::Send(pull) => {
                    s.metrics.gang("sent");
                    batch.extend(pull.iter().filter_map(|uid| q.take(uid)));
                }
                GangVerdict::Hold(until) => {
                    s.metrics.gang("held");
                    for uid in &in_batch {
                        q.hold(uid, until);
                    }
                    batch.retain(|p| !in_batch.contains(&p.info.spec.uid));
                }
                GangVerdict::GiveUp(message) => {
                    s.metrics.gang("timed_out");
                    for p in batch.iter().filter(|p| in_batch.contains(&p.info.spec.uid)) {
                        q.unschedulable(&p.info.spec.uid, now);
                        report.push((pod_ref(&p.info.spec), message.clone()));
                    }
                    batch.retain(|p| !in_batch.contains(&p.info.spec.uid));
                }
            }
        }
        self.update_queue_gauges(&q);
        drop(q);
        for (pod, message) in report {
            self.spawn_unschedulable(tasks, pod, message);
        }
        batch
    }

    /// Gives up the nominations past their deadline and decides again, one at a time, the waiting
    /// preemptors whose retry is due. Returns whether it decided any (the loop then looks again).
    async fn tend_nominations(&self, tasks: &mut JoinSet<()>) -> bool {
        let s = &self.shared;
        let now = Instant::now();
        let expired = s.nominations.lock().take_expired(now);
        for n in expired {
            self.give_up_nomination(tasks, n, now);
        }
        let due = s.nominations.lock().take_due(now);
        if due.is_empty() {
            return false;
        }
        for qp in due {
            // Alone in its batch and without its own reservation: it may fit elsewhere now, or on
            // its node if room was made. Every other pod's assumptions still count.
            let uid = qp.info.spec.uid.clone();
            if !s.nominations.lock().is_retrying(&uid) {
                // Deleted, bound or cancelled while the ones before it were decided.
                continue;
            }
            s.state.lock().forget(&uid);
            let span = tracing::info_span!("nominated_retry", pod = %qp.info.key());
            self.schedule_batch(vec![qp], tasks).instrument(span).await;
            // An outcome that did not settle it (no answer at all) keeps it waiting.
            self.keep_waiting(tasks, &uid, None, Instant::now());
        }
        true
    }

    /// A preemptor decided again that fits nowhere else keeps its reservation on its node and its
    /// nomination, and preempts nobody else while its victims terminate; `message` (the service's)
    /// is reported as kube-scheduler reports a pod not eligible to preempt again.
    fn keep_waiting(&self, tasks: &mut JoinSet<()>, uid: &str, message: Option<&str>, now: Instant) {
        let s = &self.shared;
        let (spec, node) = {
            let nominations = s.nominations.lock();
            if !nominations.is_retrying(uid) {
                return;
            }
            match nominations.get(uid) {
                Some(n) => (n.pod.info.spec.clone(), n.node.clone()),
                None => return,
            }
        };
        if !s.queue.lock().contains(uid) {
            // Deleted or bound meanwhile: the nomination ends with it.
            if s.nominations.lock().cancel(uid).is_some() {
                s.metrics.nomination_ended("cancelled");
            }
            return;
        }
        s.state.lock().assume(spec.clone(), &node);
        match s.nominations.lock().retry_failed(uid, now) {
            RetryEnd::Ready => s.wake.notify_one(),
            RetryEnd::Gone => s.state.lock().forget(uid),
            RetryEnd::Waiting => {
                if let Some(message) = message {
                    let fit = message.split(" preemption: ").next().unwrap_or(message);
                    let message =
                        format!("{fit} preemption: not eligible due to a terminating pod on the nominated node.");
                    self.spawn_unschedulable(tasks, pod_ref(&spec), message);
                }
            }
        }
    }

    /// Gives a nomination up (its deadline passed, or its node is gone): the reservation goes,
    /// `nominatedNodeName` is cleared, FailedScheduling says why, and the pod waits as
    /// unschedulable for the next cluster event.
    fn give_up_nomination(&self, tasks: &mut JoinSet<()>, n: Nomination<Bind>, now: Instant) {
        let s = &self.shared;
        let uid = n.pod.info.spec.uid.clone();
        let node_exists = s.state.lock().nodes().contains_key(&n.node);
        let still_there: Vec<String> = {
            let st = s.state.lock();
            let mut v: Vec<String> = n
                .waiting_for
                .iter()
                .map(|v| {
                    st.pod(v)
                        .map_or_else(|| v.clone(), |p| format!("{}/{}", p.namespace, p.name))
                })
                .collect();
            v.sort();
            v
        };
        s.state.lock().forget(&uid);
        {
            let mut q = s.queue.lock();
            q.unschedulable(&uid, now);
            self.update_queue_gauges(&q);
        }
        let (result, message) = if node_exists {
            (
                "timed_out",
                format!(
                    "preemption: gave up the nominated node {} after {}s: {} victim(s) still terminating ({}).",
                    n.node,
                    n.deadline.duration_since(n.since).as_secs(),
                    still_there.len(),
                    still_there.join(", ")
                ),
            )
        } else {
            (
                "node_gone",
                format!("preemption: the nominated node {} was deleted.", n.node),
            )
        };
        tracing::warn!(pod = %n.pod.info.key(), node = %n.node, victims = ?still_there, reason = result, "nomination given up");
        s.metrics.nomination_ended(result);
        let pod = pod_ref(&n.pod.info.spec);
        let this = self.clone();
        tasks.spawn(async move {
            let s = &this.shared;
            if !*s.leader.borrow() {
                return;
            }
            this.rate_limit().await;
            if let Err(e) = s.api.clear_nomination(&pod).await {
                tracing::debug!(pod = %pod.key(), error = %e, "clearing nominatedNodeName failed");
            }
            this.report_failure(&pod, Failure::Unschedulable, &message).await;
        });
    }

    /// Whether the pod is a waiting preemptor being decided again.
    fn is_retrying(&self, uid: &str) -> bool {
        self.shared.nominations.lock().is_retrying(uid)
    }

    fn spawn_clear_nomination(&self, tasks: &mut JoinSet<()>, pod: PodRef) {
        let this = self.clone();
        tasks.spawn(async move {
            if !*this.shared.leader.borrow() {
                return;
            }
            this.rate_limit().await;
            if let Err(e) = this.shared.api.clear_nomination(&pod).await {
                tracing::debug!(pod = %pod.key(), error = %e, "clearing nominatedNodeName failed");
            }
        });
    }

    /// Acts on a nomination (see [`crate::groups`]): reserve the node, nominate, preempt the
    /// victims, report FailedScheduling; the bind follows once the victims are gone.
    fn start_preemption(&self, tasks: &mut JoinSet<()>, qp: QueuedPod, u: proto::Unschedulable, bind: Bind) {
        let s = &self.shared;
        let node = u.nominated_node_name.clone();
        let preemptor = pod_ref(&qp.info.spec);
        let now = Instant::now();
        let mut lost_nomination: Vec<PodRef> = Vec::new();
        // Victims to delete, and every victim to wait for (those whose deletion an earlier
        // nomination already asked for are waited for, never deleted twice).
        let (to_delete, waiting_for): (Vec<PodRef>, Vec<String>) = {
            let mut st = s.state.lock();
            st.assume(qp.info.spec.clone(), &node);
            let mut nominations = s.nominations.lock();
            let mut q = s.queue.lock();
            let mut to_delete = Vec::new();
            let mut waiting_for = Vec::new();
            for uid in &u.victim_uids {
                // A victim that is itself a preemptor waiting for its room is not deleted: its
                // nomination is cleared and it is decided again, as kube-scheduler clears the
                // nominations of lower-priority pods.
                if let Some(lost) = nominations.cancel(uid) {
                    st.forget(uid);
                    q.backoff(uid, now);
                    s.metrics.nomination_ended("cancelled");
                    lost_nomination.push(pod_ref(&lost.pod.info.spec));
                    continue;
                }
                let Some(victim) = st.pod(uid) else { continue };
                waiting_for.push(uid.clone());
                // A victim already being deleted is waited for, not deleted again, as
                // kube-scheduler skips the API call for such a victim.
                if !victim.terminating && nominations.mark_preempted(uid) {
                    to_delete.push(pod_ref(&victim));
                }
            }
            (to_delete, waiting_for)
        };
        tracing::info!(pod = %preemptor.key(), %node, victims = waiting_for.len(), deleting = to_delete.len(), "preempting");
        s.metrics.preemptions.inc();
        s.metrics.preemption_victims.observe(waiting_for.len() as f64);
        s.nominations
            .lock()
            .add(qp.clone(), node.clone(), waiting_for, bind, now);
        for pod in lost_nomination {
            self.spawn_clear_nomination(tasks, pod);
        }
        let scheduler_name = qp.info.scheduler_name.clone();
        let this = self.clone();
        tasks.spawn(async move {
            let s = &this.shared;
            if !*s.leader.borrow() {
                let mut nominations = s.nominations.lock();
                for v in &to_delete {
                    nominations.unmark_preempted(&v.uid);
                }
                return;
            }
            this.rate_limit().await;
            if let Err(e) = s.api.nominate(&preemptor, &node).await {
                tracing::debug!(pod = %preemptor.key(), error = %e, "setting nominatedNodeName failed");
            }
            for (i, victim) in to_delete.iter().enumerate() {
                this.rate_limit().await;
                if let Err(e) = s.api.preempt(victim, &preemptor, &node, &scheduler_name).await {
                    // The room cannot be made: give the reservation up and decide the pod again.
                    tracing::warn!(pod = %preemptor.key(), victim = %victim.key(), error = %e, "preemption failed");
                    {
                        let mut nominations = s.nominations.lock();
                        for v in &to_delete[i..] {
                            nominations.unmark_preempted(&v.uid);
                        }
                    }
                    let cancelled = s.nominations.lock().cancel(&preemptor.uid).is_some();
                    if cancelled {
                        s.metrics.nomination_ended("preemption_failed");
                        s.state.lock().forget(&preemptor.uid);
                        s.queue.lock().backoff(&preemptor.uid, Instant::now());
                        s.wake.notify_one();
                        this.rate_limit().await;
                        if let Err(e) = s.api.clear_nomination(&preemptor).await {
                            tracing::debug!(pod = %preemptor.key(), error = %e, "clearing nominatedNodeName failed");
                        }
                    }
                    break;
                }
            }
            this.report_failure(&preemptor, Failure::Unschedulable, &u.message)
                .await;
        });
    }

    fn spawn_scheduler_error(&self, tasks: &mut JoinSet<()>, pod: PodRef, message: String) {
        let this = self.clone();
        tasks.spawn(async move { this.report_failure(&pod, Failure::SchedulerError, &message).await });
    }

    fn spawn_unschedulable(&self, tasks: &mut JoinSet<()>, pod: PodRef, message: String) {
        let this = self.clone();
        tasks.spawn(async move { this.report_failure(&pod, Failure::Unschedulable, &message).await });
    }

    /// Writes a pod's scheduling failure (condition and event) while this binder leads. A
    /// transient API error is retried with backoff, and a lost lease waited out, for up to
    /// [`REPORT_RETRY_FOR`]: a pod left unschedulable while the API server restarted still gets
    /// its condition. It stops once the pod is no longer queued (bound or deleted: the report is
    /// moot), is gone, or the binder stops.
    async fn report_failure(&self, pod: &PodRef, failure: Failure, message: &str) {
        let s = &self.shared;
        let deadline = Instant::now() + REPORT_RETRY_FOR;
        let mut backoff = Duration::from_millis(200);
        let mut leader = s.leader.clone();
        loop {
            if s.stopping.load(Ordering::Relaxed) || !s.queue.lock().contains(&pod.uid) {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::warn!(pod = %pod.key(), ?failure, "recording FailedScheduling: gave up after {REPORT_RETRY_FOR:?}");
                return;
            }
            if !*leader.borrow_and_update() {
                match tokio::time::timeout(left, leader.changed()).await {
                    Ok(Err(_)) => return,
                    Ok(Ok(())) | Err(_) => continue,
                }
            }
            self.rate_limit().await;
            let written = match failure {
                Failure::Unschedulable => s.api.record_unschedulable(pod, message).await,
                Failure::SchedulerError => s.api.record_scheduler_error(pod, message).await,
            };
            match written {
                Ok(()) | Err(ApiError::NotFound(_) | ApiError::Conflict(_)) => return,
                Err(e) => {
                    tracing::debug!(pod = %pod.key(), error = %e, "recording FailedScheduling failed; retrying");
                    tokio::time::sleep(backoff.min(left)).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_pod_index_reads_the_field_path() {
        let s = tonic::Status::invalid_argument("pods[12].containers[0].requests[\"cpu\"]: invalid quantity");
        assert_eq!(invalid_pod_index(&s), Some(12));
        assert_eq!(
            invalid_pod_index(&tonic::Status::invalid_argument("policy: unknown")),
            None
        );
        assert_eq!(invalid_pod_index(&tonic::Status::internal("pods[1]")), None);
    }
}
