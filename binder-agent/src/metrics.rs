//! Prometheus metrics of the binder: kube-scheduler 1.37's names, labels and buckets where the
//! meaning is the same (`scheduler_schedule_attempts_total{result,profile}`,
//! `scheduler_scheduling_attempt_duration_seconds{result,profile}`,
//! `scheduler_pod_scheduling_sli_duration_seconds{attempts}`, `scheduler_pod_scheduling_attempts`,
//! `scheduler_pending_pods{queue}`, `scheduler_framework_extension_point_duration_seconds`
//! for the extension points the binder runs, `scheduler_preemption_attempts_total`,
//! `scheduler_preemption_victims`, `scheduler_volume_scheduling_stage_error_total`), and the
//! binder's own under `binder_` for what kube-scheduler has no series for.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::api::ApiError;
use crate::queue::QueueCounts;

/// `{result, profile}` labels, as kube-scheduler's attempt metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttemptLabels {
    /// `scheduled`, `unschedulable` or `error`.
    pub result: String,
    /// Policy (kube-scheduler's profile).
    pub profile: String,
}

/// `{queue}` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabel {
    /// `active`, `backoff`, `unschedulable` or `gated` (kube-scheduler's queue names; in-flight
    /// pods, which kube counts in no queue, are `binder_pods_in_flight`).
    pub queue: &'static str,
}

/// `{attempts}` label of `scheduler_pod_scheduling_sli_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SliLabel {
    /// Attempts until bound, `1` to `14`, then `15+` (kube's `getAttemptsLabel`).
    pub attempts: String,
}

/// `{extension_point, status, profile}` labels of
/// `scheduler_framework_extension_point_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExtensionPointLabels {
    /// `PreBind`, `Bind` or `Permit` (the ones the binder runs).
    pub extension_point: &'static str,
    /// kube's status code name: `Success`, `Error`, `Unschedulable`, ….
    pub status: &'static str,
    /// Policy (kube-scheduler's profile).
    pub profile: String,
}

/// `{profile, driver, status}` labels of kube's DRA binding-conditions metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BindingConditionsLabels {
    /// Policy (kube-scheduler's profile).
    pub profile: String,
    /// The device's driver.
    pub driver: String,
    /// How PreBind's wait ended: `success`, `failure`, `timeout` or `error` (kube's
    /// `BindingConditionsStatus*`).
    pub status: &'static str,
}

/// `{operation}` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabel {
    /// The volume scheduling stage.
    pub operation: &'static str,
}

/// `{result}` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// Outcome.
    pub result: &'static str,
}

/// `{replica}` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReplicaLabel {
    /// Replica endpoint.
    pub replica: String,
}

/// `{kind}` label of snapshot syncs.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SyncLabel {
    /// `full` or `delta`.
    pub kind: &'static str,
}

type Hist = Family<AttemptLabels, Histogram, fn() -> Histogram>;

/// `{experiment, arm}` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ArmLabels {
    /// Experiment name (`-` outside experiments).
    pub experiment: String,
    /// Arm name (`-` outside experiments).
    pub arm: String,
}

/// `{experiment, arm, result}` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ArmResultLabels {
    /// Experiment name.
    pub experiment: String,
    /// Arm name.
    pub arm: String,
    /// `scheduled`, `unschedulable` or `error` (no decision: the backend failed).
    pub result: &'static str,
}

/// `{experiment, arm, shadow, result}` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShadowLabels {
    /// Experiment of the pods compared.
    pub experiment: String,
    /// Arm of the pods compared.
    pub arm: String,
    /// Shadow name.
    pub shadow: String,
    /// `same_node`, `different_node`, `both_unschedulable`, `feasibility_differs` or `error`.
    pub result: &'static str,
}

/// `{experiment, arm, shadow}` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShadowArmLabels {
    /// Experiment of the pods compared.
    pub experiment: String,
    /// Arm of the pods compared.
    pub arm: String,
    /// Shadow name.
    pub shadow: String,
}

/// `{experiment, arm, resource, stat}` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UtilizationLabels {
    /// Experiment name.
    pub experiment: String,
    /// Arm name.
    pub arm: String,
    /// `cpu` or `memory`.
    pub resource: &'static str,
    /// `mean` or `stddev`.
    pub stat: &'static str,
}

type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// Metrics per experiment and arm, and of shadow policies.
#[derive(Debug)]
pub struct ExperimentMetrics {
    pods: Family<ArmResultLabels, Counter>,
    bind_failures: Family<ArmLabels, Counter>,
    decision_duration: Family<ArmLabels, Histogram, fn() -> Histogram>,
    shadow: Family<ShadowLabels, Counter>,
    shadow_score: Family<ShadowArmLabels, FloatGauge>,
    nodes_used: Family<ArmLabels, Gauge>,
    utilization: Family<UtilizationLabels, FloatGauge>,
    reloads: Family<ResultLabel, Counter>,
}

fn arm(experiment: &str, arm: &str) -> ArmLabels {
    ArmLabels {
        experiment: experiment.to_string(),
        arm: arm.to_string(),
    }
}

impl ExperimentMetrics {
    fn new() -> Self {
        Self {
            pods: Family::default(),
            bind_failures: Family::default(),
            decision_duration: Family::new_with_constructor(latency as fn() -> Histogram),
            shadow: Family::default(),
            shadow_score: Family::default(),
            nodes_used: Family::default(),
            utilization: Family::default(),
            reloads: Family::default(),
        }
    }

    fn register(&self, r: &mut Registry) {
        r.register(
            "binder_experiment_pods",
            "Pods by experiment, arm and result (scheduled, unschedulable, error: no decision)",
            self.pods.clone(),
        );
        r.register(
            "binder_experiment_bind_failures",
            "Failed Binding requests by experiment and arm",
            self.bind_failures.clone(),
        );
        r.register(
            "binder_experiment_decision_duration_seconds",
            "Snapshot sync plus Schedule per batch, by experiment and arm",
            self.decision_duration.clone(),
        );
        r.register(
            "binder_shadow_comparisons",
            "Shadow verdicts compared with the placements acted on, by result",
            self.shadow.clone(),
        );
        r.register(
            "binder_shadow_score_difference_mean",
            "Mean of shadow score minus acted-on score where both placed the pod",
            self.shadow_score.clone(),
        );
        r.register(
            "binder_experiment_nodes_used",
            "Distinct nodes holding an arm's bound pods",
            self.nodes_used.clone(),
        );
        r.register(
            "binder_experiment_node_utilization_percent",
            "Requested over allocatable of the nodes holding an arm's pods: mean and standard deviation",
            self.utilization.clone(),
        );
        r.register(
            "binder_experiments_reloads",
            "Changed experiments files read while running, by result (ok, invalid)",
            self.reloads.clone(),
        );
    }

    /// Counts a reload of a changed experiments file (`ok` or `invalid`).
    pub fn reload(&self, result: &'static str) {
        self.reloads.get_or_create(&ResultLabel { result }).inc();
    }

    /// Reloads with a result.
    pub fn reloads_total(&self, result: &'static str) -> u64 {
        self.reloads.get_or_create(&ResultLabel { result }).get()
    }

    /// Pods of an arm with a result.
    pub fn pods(&self, experiment: &str, arm: &str, result: &'static str) -> Counter {
        self.pods
            .get_or_create(&ArmResultLabels {
                experiment: experiment.to_string(),
                arm: arm.to_string(),
                result,
            })
            .clone()
    }

    /// Failed Binding requests of an arm.
    pub fn bind_failure(&self, experiment: &str, a: &str) -> Counter {
        self.bind_failures.get_or_create(&arm(experiment, a)).clone()
    }

    /// Decision latency of an arm.
    pub fn decision_duration(&self, experiment: &str, a: &str) -> Histogram {
        self.decision_duration.get_or_create(&arm(experiment, a)).clone()
    }

    /// Shadow comparisons with a result.
    pub fn shadow(&self, experiment: &str, arm: &str, shadow: &str, result: &'static str) -> Counter {
        self.shadow
            .get_or_create(&ShadowLabels {
                experiment: experiment.to_string(),
                arm: arm.to_string(),
                shadow: shadow.to_string(),
                result,
            })
            .clone()
    }

    /// Mean score difference of a shadow on an arm.
    pub fn shadow_score_difference(&self, experiment: &str, arm: &str, shadow: &str) -> FloatGauge {
        self.shadow_score
            .get_or_create(&ShadowArmLabels {
                experiment: experiment.to_string(),
                arm: arm.to_string(),
                shadow: shadow.to_string(),
            })
            .clone()
    }

    /// Nodes used by an arm.
    pub fn nodes_used(&self, experiment: &str, a: &str) -> Gauge {
        self.nodes_used.get_or_create(&arm(experiment, a)).clone()
    }

    /// Utilization statistic of an arm's nodes.
    pub fn utilization(&self, experiment: &str, arm: &str, resource: &'static str, stat: &'static str) -> FloatGauge {
        self.utilization
            .get_or_create(&UtilizationLabels {
                experiment: experiment.to_string(),
                arm: arm.to_string(),
                resource,
                stat,
            })
            .clone()
    }
}

fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.000_5, 2.0, 18))
}

/// kube's `scheduler_pod_scheduling_attempts` buckets: `ExponentialBuckets(1, 2, 5)`.
fn attempts_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 5))
}

/// kube's `scheduler_scheduling_attempt_duration_seconds` buckets: `ExponentialBuckets(0.001, 2, 15)`.
fn attempt_duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// kube's `scheduler_pod_scheduling_sli_duration_seconds` buckets: `ExponentialBuckets(0.01, 2, 20)`.
fn sli_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 2.0, 20))
}

/// kube's `scheduler_framework_extension_point_duration_seconds` buckets:
/// `ExponentialBuckets(0.0001, 2, 12)`.
fn extension_point_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_1, 2.0, 12))
}

/// kube's `scheduler_dra_bindingconditions_wait_duration_seconds` buckets:
/// `ExponentialBuckets(0.1, 2, 14)`.
fn binding_conditions_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.1, 2.0, 14))
}

/// kube's `getAttemptsLabel`: the attempts, capped at `15+`.
pub fn attempts_label(attempts: u32) -> String {
    if attempts >= 15 {
        "15+".to_string()
    } else {
        attempts.to_string()
    }
}

/// Every binder metric.
pub struct BinderMetrics {
    /// The registry.
    pub registry: Registry,
    attempts: Family<AttemptLabels, Counter>,
    attempt_duration: Hist,
    pending: Family<QueueLabel, Gauge>,
    in_flight: Gauge,
    sli: Family<SliLabel, Histogram, fn() -> Histogram>,
    pod_attempts: Histogram,
    extension_points: Family<ExtensionPointLabels, Histogram, fn() -> Histogram>,
    binding_conditions_allocations: Family<BindingConditionsLabels, Counter>,
    binding_conditions_wait: Family<BindingConditionsLabels, Histogram, fn() -> Histogram>,
    /// `binder_batch_size`: pods per decision call.
    pub batch_size: Histogram,
    /// `binder_decision_duration_seconds`: sync plus Schedule, per batch.
    pub decision_duration: Histogram,
    bind_duration: Histogram,
    binds: Family<ResultLabel, Counter>,
    replica_errors: Family<ReplicaLabel, Counter>,
    syncs: Family<SyncLabel, Counter>,
    sync_bytes: Family<SyncLabel, Counter>,
    sync_duration: Family<SyncLabel, Histogram, fn() -> Histogram>,
    /// `binder_leader`: 1 while this binder holds the lease.
    pub leader: Gauge,
    /// `binder_experiment_*` and `binder_shadow_*`.
    pub experiments: ExperimentMetrics,
    /// `binder_preemptions_total`: nominations acted on (victims preempted for a pod).
    pub preemptions: Counter,
    /// `scheduler_preemption_victims`: victims per preemption, as kube-scheduler's.
    pub preemption_victims: Histogram,
    /// `scheduler_preemption_attempts_total`: pods found unschedulable, for which the service
    /// looked for victims (kube-scheduler counts each run of its PostFilter the same way).
    pub preemption_attempts: Counter,
    gangs: Family<ResultLabel, Counter>,
    pod_group_cycles: Family<ResultLabel, Counter>,
    pod_group_condition_updates: Family<ResultLabel, Counter>,
    nominations: Family<ResultLabel, Counter>,
    claim_deallocations: Family<ResultLabel, Counter>,
    assumed_snapshots: Family<ResultLabel, Counter>,
    volume_prebinds: Family<ResultLabel, Counter>,
    volume_prebind_duration: Histogram,
    volume_stage_errors: Family<OperationLabel, Counter>,
    /// `binder_extender_*`: the bindVerb calls to a scheduler extender.
    pub extenders: placement_scheduler::extender::ExtenderMetrics,
    /// `binder_batches_in_flight`: decisions in flight on node partitions.
    pub batches_in_flight: Gauge,
    batches: Family<ResultLabel, Counter>,
    partition_returns: Family<ResultLabel, Counter>,
}

impl Default for BinderMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl BinderMetrics {
    /// Creates and registers every metric.
    pub fn new() -> Self {
        let mut r = Registry::default();
        let m = Self {
            attempts: Family::default(),
            attempt_duration: Family::new_with_constructor(attempt_duration_histogram as fn() -> Histogram),
            pending: Family::default(),
            in_flight: Gauge::default(),
            sli: Family::new_with_constructor(sli_histogram as fn() -> Histogram),
            pod_attempts: attempts_histogram(),
            extension_points: Family::new_with_constructor(extension_point_histogram as fn() -> Histogram),
            binding_conditions_allocations: Family::default(),
            binding_conditions_wait: Family::new_with_constructor(binding_conditions_histogram as fn() -> Histogram),
            batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 14)),
            decision_duration: latency(),
            bind_duration: latency(),
            binds: Family::default(),
            replica_errors: Family::default(),
            syncs: Family::default(),
            sync_bytes: Family::default(),
            sync_duration: Family::new_with_constructor(latency as fn() -> Histogram),
            leader: Gauge::default(),
            experiments: ExperimentMetrics::new(),
            preemptions: Counter::default(),
            preemption_victims: Histogram::new(exponential_buckets(1.0, 2.0, 7)),
            preemption_attempts: Counter::default(),
            gangs: Family::default(),
            pod_group_cycles: Family::default(),
            pod_group_condition_updates: Family::default(),
            nominations: Family::default(),
            claim_deallocations: Family::default(),
            assumed_snapshots: Family::default(),
            volume_prebinds: Family::default(),
            volume_prebind_duration: Histogram::new(exponential_buckets(0.01, 2.0, 17)),
            volume_stage_errors: Family::default(),
            extenders: placement_scheduler::extender::ExtenderMetrics::default(),
            batches_in_flight: Gauge::default(),
            batches: Family::default(),
            partition_returns: Family::default(),
            registry: Registry::default(),
        };
        m.extenders.register(r.sub_registry_with_prefix("binder"));
        r.register(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
            m.attempts.clone(),
        );
        r.register(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            m.attempt_duration.clone(),
        );
        r.register(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulableEntities that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
            m.pending.clone(),
        );
        r.register(
            "binder_pods_in_flight",
            "Pods popped and not yet decided or bound (kube-scheduler counts them in no queue of scheduler_pending_pods)",
            m.in_flight.clone(),
        );
        r.register(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts.",
            m.sli.clone(),
        );
        r.register(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            m.pod_attempts.clone(),
        );
        r.register(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            m.extension_points.clone(),
        );
        r.register(
            "scheduler_dra_bindingconditions_allocations",
            "Number of allocations using devices with BindingConditions, counted per driver per scheduling attempt",
            m.binding_conditions_allocations.clone(),
        );
        r.register(
            "scheduler_dra_bindingconditions_wait_duration_seconds",
            "Time in seconds spent waiting for BindingConditions to be satisfied during PreBind.",
            m.binding_conditions_wait.clone(),
        );
        r.register("binder_batch_size", "Pods per decision call", m.batch_size.clone());
        r.register(
            "binder_decision_duration_seconds",
            "Snapshot sync plus Schedule, per batch",
            m.decision_duration.clone(),
        );
        r.register(
            "binder_bind_duration_seconds",
            "Latency of Binding requests",
            m.bind_duration.clone(),
        );
        r.register("binder_binds", "Binding requests by result", m.binds.clone());
        r.register(
            "binder_replica_errors",
            "Failed calls by decision replica",
            m.replica_errors.clone(),
        );
        r.register("binder_snapshot_syncs", "Snapshot syncs by kind", m.syncs.clone());
        r.register(
            "binder_snapshot_sync_bytes",
            "Bytes of snapshot syncs by kind",
            m.sync_bytes.clone(),
        );
        r.register(
            "binder_snapshot_sync_duration_seconds",
            "Latency of snapshot syncs by kind",
            m.sync_duration.clone(),
        );
        r.register(
            "binder_assumed_snapshots",
            "Snapshots a replica returned with a batch assumed: adopted (kept as the snapshot it holds: the next sync sends it only what else changed) or stale (not kept: another sync moved the replica on, or it assumed a placement the binder did not act on)",
            m.assumed_snapshots.clone(),
        );
        r.register("binder_leader", "1 while this binder holds the lease", m.leader.clone());
        m.experiments.register(&mut r);
        r.register(
            "binder_preemptions",
            "Nominations acted on: victims preempted for a pod",
            m.preemptions.clone(),
        );
        r.register(
            "scheduler_preemption_attempts",
            "Total preemption attempts in the cluster till now",
            m.preemption_attempts.clone(),
        );
        r.register(
            "scheduler_preemption_victims",
            "Number of selected preemption victims for preemption initiated by a single pod",
            m.preemption_victims.clone(),
        );
        r.register(
            "binder_gang_decisions",
            "Gangs popped in a batch: sent whole, held for members, or given up after the timeout",
            m.gangs.clone(),
        );
        r.register(
            "binder_pod_group_cycles",
            "PodGroup scheduling cycles by outcome (the PodGroupInitiallyScheduled condition written): scheduled, \
             unschedulable or error",
            m.pod_group_cycles.clone(),
        );
        r.register(
            "binder_pod_group_condition_updates",
            "PodGroupInitiallyScheduled condition updates finished after a cycle: ok (written, or already so: \
             nothing to write) or error",
            m.pod_group_condition_updates.clone(),
        );
        r.register(
            "binder_nominations",
            "Nominations ended, by how: victims_gone (bound to the nominated node), placed_on_retry (fit \
             when decided again), timed_out and node_gone (reservation given up), preemption_failed, cancelled",
            m.nominations.clone(),
        );
        r.register(
            "binder_claim_deallocations",
            "ResourceClaims deallocated by DynamicResources' PostFilter (an unused claim whose allocation \
             pins its pod to nodes it cannot use), by result: deallocated or error",
            m.claim_deallocations.clone(),
        );
        r.register(
            "binder_volume_prebinds",
            "VolumeBinding PreBinds (claim bindings written, then waited for) by result: bound, failed, timed_out, cancelled",
            m.volume_prebinds.clone(),
        );
        r.register(
            "binder_volume_prebind_duration_seconds",
            "From the first claim binding written to every claim bound (or the PreBind given up)",
            m.volume_prebind_duration.clone(),
        );
        r.register(
            "scheduler_volume_scheduling_stage_error",
            "Volume scheduling stage error count, as kube-scheduler's (operation bind: a PreBind that failed or timed out)",
            m.volume_stage_errors.clone(),
        );
        r.register(
            "binder_batches_in_flight",
            "Decisions in flight on node partitions (--batches-in-flight)",
            m.batches_in_flight.clone(),
        );
        r.register(
            "binder_batches",
            "Batches decided, by how: alone (on the whole cluster, nothing else in flight) or partition (on one node partition, others in flight)",
            m.batches.clone(),
        );
        r.register(
            "binder_partition_returns",
            "Pods a partitioned decision sent back to be decided alone, by why: no_fit (no node of the partition fits) or outside (the replica chose a node outside its partition)",
            m.partition_returns.clone(),
        );
        Self { registry: r, ..m }
    }

    /// Counts a batch decided `alone` or in a `partition`.
    pub fn batch(&self, result: &'static str) {
        self.batches.get_or_create(&ResultLabel { result }).inc();
    }

    /// Counts a pod a partitioned decision sent back, and why (`no_fit`, `outside`).
    pub fn partition_return(&self, result: &'static str) {
        self.partition_returns.get_or_create(&ResultLabel { result }).inc();
    }

    /// Records a VolumeBinding PreBind that ended with `result` (`bound`, `failed`, `timed_out`,
    /// `cancelled`) after `took`.
    pub fn volume_prebind(&self, result: &'static str, took: Duration) {
        self.volume_prebinds.get_or_create(&ResultLabel { result }).inc();
        self.volume_prebind_duration.observe(took.as_secs_f64());
        if matches!(result, "failed" | "timed_out") {
            self.volume_stage_errors
                .get_or_create(&OperationLabel { operation: "bind" })
                .inc();
        }
    }

    /// Counts one scheduling attempt that ended with `result` (`scheduled`: bound, `unschedulable`
    /// or `error`) after `took` since the pod was popped, as kube's
    /// `observeScheduleAttemptAndLatency`: `scheduler_schedule_attempts_total` and
    /// `scheduler_scheduling_attempt_duration_seconds`.
    pub fn attempt(&self, profile: &str, result: &str, took: Duration) {
        let labels = AttemptLabels {
            result: result.to_string(),
            profile: profile.to_string(),
        };
        self.attempts.get_or_create(&labels).inc();
        self.attempt_duration.get_or_create(&labels).observe(took.as_secs_f64());
    }

    /// Records a bound pod, as kube's `bindingCycle` does after a successful Bind:
    /// `scheduler_pod_scheduling_attempts` and
    /// `scheduler_pod_scheduling_sli_duration_seconds{attempts}` (`since_queued`: from the pod's
    /// first entry in the active queue, after its last scheduling gate went).
    pub fn pod_bound(&self, since_queued: Duration, attempts: u32) {
        self.pod_attempts.observe(f64::from(attempts));
        self.sli
            .get_or_create(&SliLabel {
                attempts: attempts_label(attempts),
            })
            .observe(since_queued.as_secs_f64());
    }

    /// Records one run of an extension point the binder runs (`PreBind`, `Bind`, `Permit`) in
    /// `scheduler_framework_extension_point_duration_seconds`; `status` is kube's status code name
    /// (`Success`, `Error`).
    pub fn extension_point(&self, extension_point: &'static str, status: &'static str, profile: &str, took: Duration) {
        self.extension_points
            .get_or_create(&ExtensionPointLabels {
                extension_point,
                status,
                profile: profile.to_string(),
            })
            .observe(took.as_secs_f64());
    }

    /// Sets the pending gauges.
    pub fn set_pending(&self, c: QueueCounts) {
        for (queue, n) in [
            ("active", c.active),
            ("backoff", c.backoff),
            ("unschedulable", c.unschedulable),
            ("gated", c.gated),
            ("incomplete", c.incomplete),
        ] {
            self.pending.get_or_create(&QueueLabel { queue }).set(n as i64);
        }
        self.in_flight.set(c.in_flight as i64);
    }

    /// Records a Binding request.
    pub fn bind(&self, result: &Result<(), ApiError>, latency: Duration) {
        self.bind_duration.observe(latency.as_secs_f64());
        let result = match result {
            Ok(()) => "ok",
            Err(ApiError::Conflict(_)) => "conflict",
            Err(ApiError::NotFound(_)) => "not_found",
            Err(ApiError::Other(_)) => "error",
        };
        self.binds.get_or_create(&ResultLabel { result }).inc();
    }

    /// Binding requests with a result (`ok`, `conflict`, `not_found`, `error`).
    pub fn binds_total(&self, result: &'static str) -> u64 {
        self.binds.get_or_create(&ResultLabel { result }).get()
    }

    /// Counts a failed call to a replica.
    pub fn replica_error(&self, replica: &str) {
        self.replica_errors
            .get_or_create(&ReplicaLabel {
                replica: replica.to_string(),
            })
            .inc();
    }

    /// Records a snapshot sync.
    pub fn sync(&self, full: bool, bytes: usize, latency: Duration) {
        let kind = if full { "full" } else { "delta" };
        self.syncs.get_or_create(&SyncLabel { kind }).inc();
        self.sync_bytes.get_or_create(&SyncLabel { kind }).inc_by(bytes as u64);
        self.sync_duration
            .get_or_create(&SyncLabel { kind })
            .observe(latency.as_secs_f64());
    }

    /// Counts a snapshot a replica returned with a batch assumed: `adopted` or `stale`.
    pub fn assumed_snapshot(&self, result: &'static str) {
        self.assumed_snapshots.get_or_create(&ResultLabel { result }).inc();
    }

    /// Assumed snapshots with a result (`adopted` or `stale`).
    pub fn assumed_snapshots_total(&self, result: &'static str) -> u64 {
        self.assumed_snapshots.get_or_create(&ResultLabel { result }).get()
    }

    /// Batches decided `alone` or in a `partition`.
    pub fn batches_total(&self, result: &'static str) -> u64 {
        self.batches.get_or_create(&ResultLabel { result }).get()
    }

    /// Pods partitioned decisions sent back, for any reason.
    pub fn partition_returns_total(&self) -> u64 {
        ["no_fit", "outside"]
            .into_iter()
            .map(|result| self.partition_returns.get_or_create(&ResultLabel { result }).get())
            .sum()
    }

    /// Syncs of a kind (`full` or `delta`).
    pub fn syncs_total(&self, kind: &'static str) -> u64 {
        self.syncs.get_or_create(&SyncLabel { kind }).get()
    }

    /// Counts one PodGroup cycle's outcome: `Scheduled`, `Unschedulable` or `SchedulerError`
    /// (kube's PodGroupInitiallyScheduled reasons).
    pub fn pod_group_cycle(&self, reason: &str) {
        let result = match reason {
            "Scheduled" => "scheduled",
            "Unschedulable" => "unschedulable",
            _ => "error",
        };
        self.pod_group_cycles.get_or_create(&ResultLabel { result }).inc();
    }

    /// Counts one finished update of a PodGroup's condition: `ok` (written, or already so) or
    /// `error`.
    pub fn pod_group_condition_update(&self, result: &'static str) {
        self.pod_group_condition_updates
            .get_or_create(&ResultLabel { result })
            .inc();
    }

    /// Counts one gang verdict: `sent`, `held` or `timed_out`.
    pub fn gang(&self, result: &'static str) {
        self.gangs.get_or_create(&ResultLabel { result }).inc();
    }

    /// Counts a nomination ended (see `binder_nominations_total`).
    pub fn nomination_ended(&self, result: &'static str) {
        self.nominations.get_or_create(&ResultLabel { result }).inc();
    }

    /// Records how DynamicResources' PreBind wait for binding conditions ended, as kube's PreBind
    /// does: the wait's duration once per device result of every allocated claim
    /// (`scheduler_dra_bindingconditions_wait_duration_seconds`), and one allocation per device
    /// with binding conditions (`scheduler_dra_bindingconditions_allocations_total`); `devices`
    /// holds each result's driver and whether it has binding conditions.
    pub fn binding_conditions_wait(
        &self,
        profile: &str,
        status: &'static str,
        took: Duration,
        devices: &[(String, bool)],
    ) {
        for (driver, with_conditions) in devices {
            let labels = BindingConditionsLabels {
                profile: profile.to_string(),
                driver: driver.clone(),
                status,
            };
            self.binding_conditions_wait
                .get_or_create(&labels)
                .observe(took.as_secs_f64());
            if *with_conditions {
                self.binding_conditions_allocations.get_or_create(&labels).inc();
            }
        }
    }

    /// Allocations with binding conditions counted so far for `profile`, `driver` and `status`.
    pub fn binding_conditions_allocations_total(&self, profile: &str, driver: &str, status: &'static str) -> u64 {
        self.binding_conditions_allocations
            .get_or_create(&BindingConditionsLabels {
                profile: profile.to_string(),
                driver: driver.to_string(),
                status,
            })
            .get()
    }

    /// Counts a claim DynamicResources' PostFilter deallocated (`deallocated`) or failed to (`error`).
    pub fn claim_deallocation(&self, result: &'static str) {
        self.claim_deallocations.get_or_create(&ResultLabel { result }).inc();
    }

    /// Claims deallocated by PostFilter so far, by result.
    pub fn claim_deallocations_total(&self, result: &'static str) -> u64 {
        self.claim_deallocations.get_or_create(&ResultLabel { result }).get()
    }

    /// Nominations ended a given way so far.
    pub fn nominations_total(&self, result: &'static str) -> u64 {
        self.nominations.get_or_create(&ResultLabel { result }).get()
    }

    /// Gang verdicts of a kind so far.
    pub fn gangs_total(&self, result: &'static str) -> u64 {
        self.gangs.get_or_create(&ResultLabel { result }).get()
    }

    /// The metrics in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buckets(text: &str, name: &str) -> Vec<String> {
        let prefix = format!("{name}_bucket{{");
        let mut seen = Vec::new();
        for line in text.lines().filter(|l| l.starts_with(&prefix)) {
            let le = line
                .split("le=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or_default();
            if !seen.iter().any(|s| s == le) {
                seen.push(le.to_string());
            }
        }
        seen
    }

    fn kube_buckets(start: f64, factor: f64, count: i32) -> Vec<f64> {
        (0..count).map(|i| start * factor.powi(i)).collect()
    }

    fn parsed(les: &[String]) -> Vec<f64> {
        les.iter()
            .filter(|l| *l != "+Inf")
            .map(|l| l.parse().unwrap())
            .collect()
    }

    fn assert_buckets(text: &str, name: &str, want: Vec<f64>) {
        let got = parsed(&buckets(text, name));
        assert_eq!(got.len(), want.len(), "{name}: {got:?}");
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= w * 1e-9, "{name}: {got:?} != {want:?}");
        }
    }

    #[test]
    fn kube_scheduler_names_labels_and_buckets() {
        let m = BinderMetrics::new();
        m.attempt("default", "scheduled", Duration::from_millis(3));
        m.attempt("default", "unschedulable", Duration::from_millis(1));
        m.pod_bound(Duration::from_millis(40), 2);
        m.pod_bound(Duration::from_millis(40), 20);
        m.extension_point("Bind", "Success", "default", Duration::from_micros(300));
        m.extension_point("PreBind", "Success", "default", Duration::ZERO);
        m.extension_point("Permit", "Success", "default", Duration::ZERO);
        m.preemption_victims.observe(2.0);
        m.preemption_attempts.inc();
        m.set_pending(QueueCounts {
            active: 1,
            backoff: 2,
            unschedulable: 3,
            in_flight: 4,
            gated: 5,
            incomplete: 6,
            held: 6,
        });
        let text = m.encode();
        for line in [
            "scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"default\"} 1",
            "scheduler_schedule_attempts_total{result=\"unschedulable\",profile=\"default\"} 1",
            "scheduler_scheduling_attempt_duration_seconds_count{result=\"scheduled\",profile=\"default\"} 1",
            "scheduler_pod_scheduling_sli_duration_seconds_count{attempts=\"2\"} 1",
            "scheduler_pod_scheduling_sli_duration_seconds_count{attempts=\"15+\"} 1",
            "scheduler_pod_scheduling_attempts_count 2",
            "scheduler_framework_extension_point_duration_seconds_count{extension_point=\"Bind\",status=\"Success\",profile=\"default\"} 1",
            "scheduler_preemption_attempts_total 1",
            "scheduler_preemption_victims_count 1",
            "scheduler_pending_pods{queue=\"active\"} 1",
            "scheduler_pending_pods{queue=\"backoff\"} 2",
            "scheduler_pending_pods{queue=\"unschedulable\"} 3",
            "scheduler_pending_pods{queue=\"gated\"} 5",
            "scheduler_pending_pods{queue=\"incomplete\"} 6",
            "binder_pods_in_flight 4",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
        // kube has no `in_flight` queue and no e2e histogram any more.
        assert!(!text.contains("queue=\"in_flight\""), "{text}");
        assert!(!text.contains("scheduler_e2e_scheduling_duration_seconds"), "{text}");
        // kube 1.37's buckets (pkg/scheduler/metrics/metrics.go).
        assert_buckets(
            &text,
            "scheduler_scheduling_attempt_duration_seconds",
            kube_buckets(0.001, 2.0, 15),
        );
        assert_buckets(
            &text,
            "scheduler_pod_scheduling_sli_duration_seconds",
            kube_buckets(0.01, 2.0, 20),
        );
        assert_buckets(&text, "scheduler_pod_scheduling_attempts", kube_buckets(1.0, 2.0, 5));
        assert_buckets(
            &text,
            "scheduler_framework_extension_point_duration_seconds",
            kube_buckets(0.0001, 2.0, 12),
        );
        assert_buckets(&text, "scheduler_preemption_victims", kube_buckets(1.0, 2.0, 7));
    }

    #[test]
    fn attempts_label_is_capped_as_kube_does() {
        assert_eq!(attempts_label(1), "1");
        assert_eq!(attempts_label(14), "14");
        assert_eq!(attempts_label(15), "15+");
        assert_eq!(attempts_label(40), "15+");
    }
}
