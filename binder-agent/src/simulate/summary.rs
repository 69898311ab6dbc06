//! What a run reports: throughput, latencies, batching, syncs, utilization and the consistency checks.

use std::collections::{HashMap, HashSet};
use std::fmt::{self, Write as _};

use placement_scheduler::engine::resources::Resources;
use placement_scheduler::grpc::convert;
use placement_scheduler::proto;
use serde::Serialize;

use crate::experiments::Report;

use super::cluster::Store;
use super::latency::{percentile, LatencySummary};

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
    /// ResourceClaims allocated after the run.
    pub claims_allocated: usize,
    /// Devices in the allocations of more than one claim after the run, admin access aside
    /// (should be 0).
    pub devices_allocated_twice: usize,
    /// Pending pods bound whose claims are not allocated and reserved for them (should be 0).
    pub claims_not_reserved: usize,
}

/// How the PodGroups of a run ended (`scheduling.k8s.io/v1beta1`: each placed all or nothing,
/// at least minCount of its pods, with a topology key in one domain).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PodGroups {
    /// PodGroups with pending pods in the run.
    pub groups: usize,
    /// Their pending pods.
    pub pods: usize,
    /// Groups every pending pod of which was bound.
    pub placed_whole: usize,
    /// Groups bound as far as minCount but not every pending pod (only where minCount is less
    /// than the group's pods).
    pub placed_min_count: usize,
    /// Groups none of whose pending pods was bound.
    pub unplaced: usize,
    /// Groups with some pods bound but fewer than minCount, those bound before the run included
    /// (must be 0: a gang is placed whole or not at all).
    pub partly_bound: usize,
    /// Groups with a topology key whose bound pods are on nodes of more than one domain of it,
    /// or on a node without the label (must be 0).
    pub spanning_domains: usize,
    /// Group pods bound in the run.
    pub pods_placed: usize,
    /// Group pods bound per second of wall time.
    pub pods_per_second: f64,
    /// Groups whose PodGroupInitiallyScheduled condition was last written True (`Scheduled`).
    pub condition_true: usize,
    /// Groups whose condition was last written False (`Unschedulable` or `SchedulerError`).
    pub condition_false: usize,
    /// Groups decided whose condition was never written.
    pub condition_missing: usize,
    /// Groups whose condition disagrees with their pods: True and none bound, or False and
    /// some bound (must be 0).
    pub condition_wrong: usize,
    /// PodGroups whose pods the binder would hold for ever (kube's GangScheduling PreEnqueue),
    /// left out of the run: `namespace/name` and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<(String, String)>,
    /// Their pending pods.
    pub held_pods: usize,
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
    pub batches_whole_cluster: u64,
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
    /// Each pending pod's outcome by `namespace/name` (with [`SimConfig::record_outcomes`](super::SimConfig::record_outcomes)).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub outcomes: std::collections::BTreeMap<String, Outcome>,
    /// The PodGroups, when the run had any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_groups: Option<PodGroups>,
    /// The per-arm comparison, when experiments or shadows ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experiments: Option<Report>,
}

/// Usage per node, with the engine's parsing and effective-request rules.
pub(super) fn usage<P: std::borrow::Borrow<proto::Pod>>(
    nodes: &HashMap<String, proto::Node>,
    pods: impl Iterator<Item = P>,
    unparsable: &mut usize,
) -> HashMap<String, (Resources, i64)> {
    let mut used: HashMap<String, (Resources, i64)> =
        nodes.keys().map(|n| (n.clone(), (Resources::default(), 0))).collect();
    add_usage(&mut used, pods, unparsable);
    used
}

/// Adds pods' requests to `used` (pods on nodes it does not have are left out).
pub(super) fn add_usage<P: std::borrow::Borrow<proto::Pod>>(
    used: &mut HashMap<String, (Resources, i64)>,
    pods: impl Iterator<Item = P>,
    unparsable: &mut usize,
) {
    for p in pods {
        let p = p.borrow();
        let Some(u) = used.get_mut(&p.node_name) else {
            continue;
        };
        match convert::pod("pod", p) {
            Ok(spec) => u.0.add(&spec.requests),
            Err(_) => *unparsable += 1,
        }
        u.1 += 1;
    }
}

/// Whether a node's pods request more than its allocatable; `from_devices` are the extended
/// resources DeviceClasses back, which a node whose allocatable has none of them provides through
/// its devices (kube's DRAExtendedResource: the device checks count those).
pub(super) fn overcommitted(
    allocatable: &Resources,
    allowed_pods: i64,
    used: &Resources,
    pods: i64,
    from_devices: &HashSet<String>,
) -> bool {
    used.milli_cpu > allocatable.milli_cpu
        || used.memory > allocatable.memory
        || used.ephemeral_storage > allocatable.ephemeral_storage
        || used.scalars.iter().any(|(name, v)| {
            let have = allocatable.scalar(name);
            *v > have && !(have == 0 && from_devices.contains(&**name))
        })
        || pods > allowed_pods
}

pub(super) fn ratio(used: i64, allocatable: i64) -> Option<f64> {
    (allocatable > 0).then(|| used as f64 * 100.0 / allocatable as f64)
}

impl Summary {
    pub(super) fn fill_from(&mut self, store: &Store, binder_unschedulable: usize) {
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
        let before = usage(&store.nodes, store.prebound_specs(), &mut c.unparsable_pods);
        let mut after = before.clone();
        add_usage(
            &mut after,
            store.pods.values().filter(|p| p.pending).map(|p| &p.info.spec),
            &mut c.unparsable_pods,
        );
        let used_nodes: HashSet<&str> = store
            .pods
            .values()
            .filter(|p| p.pending)
            .filter_map(|p| p.info.node_name())
            .collect();
        let from_devices: HashSet<String> = store
            .device_classes()
            .flat_map(|c| {
                [
                    Some(format!("deviceclass.resource.kubernetes.io/{}", c.name)),
                    (!c.extended_resource_name.is_empty()).then(|| c.extended_resource_name.clone()),
                ]
            })
            .flatten()
            .collect();
        let (mut cpu, mut memory) = (Vec::new(), Vec::new());
        for (name, node) in &store.nodes {
            let Ok(spec) = convert::node("node", node) else {
                continue;
            };
            let a = &spec.allocatable;
            if let Some((u, n)) = before.get(name) {
                if overcommitted(a, spec.allowed_pods, u, *n, &from_devices) {
                    c.nodes_overcommitted_before += 1;
                }
            }
            if let Some((u, n)) = after.get(name) {
                if overcommitted(a, spec.allowed_pods, u, *n, &from_devices) {
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
        check_devices(store, &mut c);
        self.pod_groups = pod_groups(store, self.wall_seconds);
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
        // A pending pod preempted after it was bound (by a more important one) has left the
        // cluster's pods: it still counts among the pods with anti-affinity, which the workload
        // fixes, whatever the timing let preemption do.
        c.anti_affinity_pods += store
            .preempted
            .iter()
            .filter(|(p, ..)| p.pending)
            .filter(|(p, ..)| {
                let spec = &p.info.spec;
                spec.labels.contains_key("app")
                    && spec.pod_anti_affinity.as_ref().is_some_and(|a| {
                        a.required
                            .iter()
                            .any(|t| t.topology_key == host_key && own_app(t.label_selector.as_ref(), spec))
                    })
            })
            .count();
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
            && c.devices_allocated_twice == 0
            && c.claims_not_reserved == 0
            && c.unparsable_pods == 0
            && c.counts_add_up
            && self
                .pod_groups
                .as_ref()
                .is_none_or(|g| g.partly_bound == 0 && g.spanning_domains == 0 && g.condition_wrong == 0)
    }

    /// Records the PodGroups the binder would hold for ever, left out of the run.
    pub(super) fn held_groups(&mut self, held: super::workload::HeldGroups) {
        if held.groups.is_empty() {
            return;
        }
        let g = self.pod_groups.get_or_insert_with(PodGroups::default);
        g.held = held.groups;
        g.held_pods = held.pods;
    }
}

/// A pod's PodGroup key, when it names one (and carries no gang label, which wins).
fn group_key(p: &proto::Pod) -> Option<String> {
    (p.gang.is_none() && !p.scheduling_group.is_empty())
        .then(|| crate::projection::pod_group_key(&p.namespace, &p.scheduling_group))
}

/// What one group's pods did.
#[derive(Default)]
struct GroupPods<'a> {
    pending: usize,
    /// Pending pods whose binding was applied (preempted since or not).
    bound: usize,
    /// Pods bound before the run.
    prebound: usize,
    /// The nodes of both.
    nodes: Vec<&'a str>,
}

/// The PodGroup checks: groups placed whole, left unplaced, partly bound, spanning domains, and
/// their conditions; `None` when no pending pod names a PodGroup.
fn pod_groups(store: &Store, wall_seconds: f64) -> Option<PodGroups> {
    let mut by_group: HashMap<String, GroupPods<'_>> = HashMap::new();
    let pending = store
        .pods
        .values()
        .filter(|p| p.pending)
        .chain(store.preempted.iter().map(|(p, ..)| p).filter(|p| p.pending));
    for p in pending {
        let Some(key) = group_key(&p.info.spec) else { continue };
        let g = by_group.entry(key).or_default();
        g.pending += 1;
        if p.binds_applied > 0 {
            g.bound += 1;
            g.nodes.push(p.info.spec.node_name.as_str());
        }
    }
    if by_group.is_empty() {
        return None;
    }
    let mut prebound_nodes: Vec<(String, String)> = Vec::new();
    for spec in store.prebound_specs() {
        if let Some(key) = group_key(&spec).filter(|k| by_group.contains_key(k)) {
            prebound_nodes.push((key, spec.node_name.clone()));
        }
    }
    for (key, node) in &prebound_nodes {
        if let Some(g) = by_group.get_mut(key) {
            g.prebound += 1;
            g.nodes.push(node.as_str());
        }
    }
    let groups: HashMap<String, &proto::PodGroup> = store
        .pod_groups()
        .map(|g| (crate::projection::pod_group_key(&g.namespace, &g.name), g))
        .collect();
    let mut out = PodGroups {
        groups: by_group.len(),
        ..PodGroups::default()
    };
    for (key, g) in &by_group {
        out.pods += g.pending;
        out.pods_placed += g.bound;
        let group = groups.get(key);
        let min_count = group
            .and_then(|pg| pg.gang.as_ref())
            .map_or(1, |gang| gang.min_count.max(1) as usize);
        if g.bound == 0 {
            out.unplaced += 1;
        } else if g.prebound + g.bound < min_count {
            out.partly_bound += 1;
        } else if g.bound == g.pending {
            out.placed_whole += 1;
        } else {
            out.placed_min_count += 1;
        }
        // A topology key confines a group to one domain only under TopologyAwareWorkloadScheduling
        // (the gates the in-process replicas decide under).
        let confined = placement_scheduler::engine::gates::process_default().topology_aware_workload_scheduling;
        if let Some(topology_key) = group.and_then(|pg| pg.topology_keys.first()).filter(|_| confined) {
            let mut domains: Vec<Option<&str>> = g
                .nodes
                .iter()
                .map(|n| {
                    store
                        .nodes
                        .get(*n)
                        .and_then(|node| node.labels.get(topology_key))
                        .map(String::as_str)
                })
                .collect();
            domains.sort_unstable();
            domains.dedup();
            if domains.len() > 1 || domains.contains(&None) {
                out.spanning_domains += 1;
            }
        }
        match store.group_conditions.get(key) {
            Some((c, _)) => {
                if c.scheduled {
                    out.condition_true += 1;
                } else {
                    out.condition_false += 1;
                }
                if c.scheduled != (g.bound > 0) {
                    out.condition_wrong += 1;
                }
            }
            None if g.bound > 0 => out.condition_missing += 1,
            None => {}
        }
    }
    out.pods_per_second = out.pods_placed as f64 / wall_seconds.max(1e-9);
    Some(out)
}

/// The device checks: claims allocated, devices given to two claims, bound pods whose claims
/// are not allocated and reserved for them.
fn check_devices(store: &Store, c: &mut Checks) {
    let mut seen: HashSet<(&str, &str, &str)> = HashSet::new();
    for claim in store.resource_claims() {
        let Some(a) = &claim.allocation else { continue };
        c.claims_allocated += 1;
        for d in a.devices.iter().filter(|d| d.admin_access != Some(true)) {
            if !seen.insert((&d.driver, &d.pool, &d.device)) {
                c.devices_allocated_twice += 1;
            }
        }
    }
    for p in store
        .pods
        .values()
        .filter(|p| p.pending && p.info.node_name().is_some())
    {
        let spec = &p.info.spec;
        // The special claim PreBind created for the pod's extended resources backed by DRA.
        if let Some(name) = &p.extended_resource_claim {
            let reserved = store.resource_claim(&spec.namespace, name).is_some_and(|claim| {
                claim.allocation.is_some() && claim.reserved_for.iter().any(|r| r.uid == spec.uid)
            });
            if !reserved {
                c.claims_not_reserved += 1;
            }
        }
        for entry in &spec.resource_claims {
            let name = match (
                entry.resource_claim_name.as_str(),
                entry.generated_claim_name.as_deref(),
            ) {
                ("", Some("") | None) => continue,
                ("", Some(generated)) => generated,
                (named, _) => named,
            };
            let reserved = store.resource_claim(&spec.namespace, name).is_some_and(|claim| {
                claim.allocation.is_some() && claim.reserved_for.iter().any(|r| r.uid == spec.uid)
            });
            if !reserved {
                c.claims_not_reserved += 1;
            }
        }
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The summary's PodGroup lines.
fn pod_group_lines(o: &mut String, g: &PodGroups) -> fmt::Result {
    if g.groups > 0 {
        writeln!(
            o,
            "  {:<20} {} groups ({} pods): {} placed whole, {} left unplaced, {} partly bound, {} spanning two domains{}",
            "pod groups",
            g.groups,
            g.pods,
            g.placed_whole,
            g.unplaced,
            g.partly_bound,
            g.spanning_domains,
            if g.placed_min_count > 0 {
                format!(", {} placed as far as minCount", g.placed_min_count)
            } else {
                String::new()
            }
        )?;
        writeln!(
            o,
            "  {:<20} {} group pods placed, {:.0} group pods/s; PodGroupInitiallyScheduled: {} True, {} False{}",
            "",
            g.pods_placed,
            g.pods_per_second,
            g.condition_true,
            g.condition_false,
            if g.condition_missing > 0 {
                format!(", {} decided groups without one", g.condition_missing)
            } else {
                String::new()
            }
        )?;
    }
    if !g.held.is_empty() {
        let shown: Vec<String> = g.held.iter().take(3).map(|(k, why)| format!("{k} ({why})")).collect();
        writeln!(
            o,
            "  {:<20} {}, {} left out: the binder would hold them for ever (GangScheduling's PreEnqueue): {}{}",
            "pod groups held",
            plural(g.held.len(), "group", "groups"),
            plural(g.held_pods, "pod", "pods"),
            shown.join(", "),
            if g.held.len() > 3 { ", …" } else { "" }
        )?;
    }
    Ok(())
}

pub(super) fn latency_line(out: &mut String, label: &str, l: Option<&LatencySummary>, note: &str) -> fmt::Result {
    match l {
        Some(l) => writeln!(
            out,
            "  {label:<20} p50 {:>9.3} ms   p99 {:>9.3} ms   max {:>9.3} ms   mean {:>9.3} ms   ({} samples{note})",
            l.p50_ms, l.p99_ms, l.max_ms, l.mean_ms, l.count
        ),
        None => writeln!(out, "  {label:<20} n/a{note}"),
    }
}

pub(super) fn spread_line(out: &mut String, label: &str, s: &Spread) -> fmt::Result {
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
        if let Some(g) = &self.pod_groups {
            pod_group_lines(&mut o, g)?;
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
                "batches in flight", self.batches_in_flight, self.most_batches_in_flight, self.batches_partitioned, self.batches_whole_cluster, self.partition_returns
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
        if c.claims_allocated > 0 || c.devices_allocated_twice > 0 || c.claims_not_reserved > 0 {
            writeln!(
                o,
                "    devices: {} claims allocated, {} devices allocated twice, {} bound pods' claims not reserved for them",
                c.claims_allocated, c.devices_allocated_twice, c.claims_not_reserved
            )?;
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
        if let Some(g) = &self.pod_groups {
            writeln!(
                o,
                "    pod groups whole and in one domain: {} ({} partly bound, {} spanning two domains, {} conditions contradicting their pods)",
                yes(g.partly_bound == 0 && g.spanning_domains == 0 && g.condition_wrong == 0),
                g.partly_bound,
                g.spanning_domains,
                g.condition_wrong
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
