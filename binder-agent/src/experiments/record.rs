//! The per-arm record: what the scheduling cycle reports of each group and pod (decided, failed,
//! unschedulable, bound, shadows compared), behind `/experiments` and the
//! `binder_experiment_*` / `binder_shadow_*` metrics; keyed by experiment and arm names so it
//! survives reloads.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use placement_scheduler::proto;

use super::report::{empty_node_count, node_usage, pct, ArmRow, MeanStddev, Report, ShadowRow};
use super::routing::{Route, Routing, ShadowRoute};
use crate::metrics::BinderMetrics;
use crate::state::ClusterState;

/// How a shadow's placement of a pod compares with the placement that was acted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agreement {
    /// Both placed it on the same node.
    SameNode,
    /// Both placed it, on different nodes.
    DifferentNode,
    /// Neither found a node.
    BothUnschedulable,
    /// One placed it, the other found no node.
    FeasibilityDiffers,
}

impl Agreement {
    /// Compares two placements of the same pod; with the score difference (shadow − primary)
    /// when both placed it.
    pub fn of(primary: &proto::Placement, shadow: &proto::Placement) -> Option<(Self, Option<i64>)> {
        use proto::placement::Outcome;
        Some(match (primary.outcome.as_ref()?, shadow.outcome.as_ref()?) {
            (Outcome::NodeName(a), Outcome::NodeName(b)) => {
                let diff = Some(shadow.score - primary.score);
                if a == b {
                    (Self::SameNode, diff)
                } else {
                    (Self::DifferentNode, diff)
                }
            }
            (Outcome::Unschedulable(_), Outcome::Unschedulable(_)) => (Self::BothUnschedulable, None),
            _ => (Self::FeasibilityDiffers, None),
        })
    }

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::SameNode => "same_node",
            Self::DifferentNode => "different_node",
            Self::BothUnschedulable => "both_unschedulable",
            Self::FeasibilityDiffers => "feasibility_differs",
        }
    }
}

#[derive(Debug, Default, Clone)]
struct ArmStats {
    policy: String,
    backend: String,
    bound: u64,
    unschedulable: u64,
    decision_errors: u64,
    bind_failures: u64,
    pinned: u64,
    decisions: u64,
    decision_seconds: f64,
    decision_max_seconds: f64,
}

#[derive(Debug, Default, Clone)]
struct ShadowStats {
    policy: String,
    compared: u64,
    same_node: u64,
    different_node: u64,
    both_unschedulable: u64,
    feasibility_differs: u64,
    errors: u64,
    score_diff_sum: i64,
    score_diff_count: u64,
}

#[derive(Debug, Default)]
struct Record {
    arms: BTreeMap<(String, String), ArmStats>,
    /// `(experiment, arm, shadow)`.
    shadows: BTreeMap<(String, String, String), ShadowStats>,
    /// Pods this binder bound, by uid: their row and node, while they exist.
    bound: HashMap<String, ((String, String), String)>,
}

/// The live experiments: the current [`Routing`] and the record. An observer of the scheduling
/// cycle: the cycle tells it what happened to each group and pod, and it records nothing while
/// no experiment or shadow is configured.
pub struct Experiments {
    routing: RwLock<Arc<Routing>>,
    /// The live routing has an experiment or a shadow.
    active: AtomicBool,
    record: Mutex<Record>,
    metrics: Arc<BinderMetrics>,
}

impl fmt::Debug for Experiments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Experiments")
            .field("routing", &*self.routing.read())
            .finish_non_exhaustive()
    }
}

impl Experiments {
    /// Starts with `routing` live.
    pub fn new(routing: Routing, metrics: Arc<BinderMetrics>) -> Self {
        Self {
            active: AtomicBool::new(routing.active()),
            routing: RwLock::new(Arc::new(routing)),
            record: Mutex::new(Record::default()),
            metrics,
        }
    }

    /// The routing live now.
    pub fn current(&self) -> Arc<Routing> {
        Arc::clone(&self.routing.read())
    }

    /// Makes `routing` live (its backends' pools already set up: [`ReplicaPools::make_live`](crate::replica_pools::ReplicaPools::make_live)).
    pub fn install(&self, routing: Routing) {
        self.active.store(routing.active(), Ordering::Relaxed);
        *self.routing.write() = Arc::new(routing);
    }

    /// Whether an experiment or shadow is live (outcomes are recorded).
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Counts a reload of the file (`binder_experiments_reloads_total`).
    pub fn count_reload(&self, ok: bool) {
        self.metrics.experiments.reload(if ok { "ok" } else { "invalid" });
    }

    fn arm<'a>(record: &'a mut Record, route: &Route) -> &'a mut ArmStats {
        let s = record.arms.entry(route.key()).or_default();
        if s.policy.is_empty() {
            s.policy = route.policy_label().to_string();
            s.backend = route.backend_name.to_string();
        }
        s
    }

    /// A group was decided (or failed) in `took`.
    pub fn decided(&self, route: &Route, took: Duration) {
        if !self.active() {
            return;
        }
        let secs = took.as_secs_f64();
        self.metrics
            .experiments
            .decision_duration(&route.experiment, &route.arm)
            .observe(secs);
        let mut r = self.record.lock();
        let s = Self::arm(&mut r, route);
        s.decisions += 1;
        s.decision_seconds += secs;
        s.decision_max_seconds = s.decision_max_seconds.max(secs);
    }

    /// `n` pods of a group got no decision (their backend failed); they back off.
    pub fn decision_failed(&self, route: &Route, n: usize) {
        if !self.active() {
            return;
        }
        self.metrics
            .experiments
            .pods(&route.experiment, &route.arm, "error")
            .inc_by(n as u64);
        Self::arm(&mut self.record.lock(), route).decision_errors += n as u64;
    }

    /// A pod was found unschedulable.
    pub fn unschedulable(&self, route: &Route) {
        if !self.active() {
            return;
        }
        self.metrics
            .experiments
            .pods(&route.experiment, &route.arm, "unschedulable")
            .inc();
        Self::arm(&mut self.record.lock(), route).unschedulable += 1;
    }

    /// A Binding request failed (it is retried or the pod decided again).
    pub fn bind_failed(&self, route: &Route) {
        if !self.active() {
            return;
        }
        self.metrics
            .experiments
            .bind_failure(&route.experiment, &route.arm)
            .inc();
        Self::arm(&mut self.record.lock(), route).bind_failures += 1;
    }

    /// A pod was bound to `node`.
    pub fn bound(&self, route: &Route, uid: &str, node: &str) {
        if !self.active() {
            return;
        }
        self.metrics
            .experiments
            .pods(&route.experiment, &route.arm, "scheduled")
            .inc();
        let mut r = self.record.lock();
        let s = Self::arm(&mut r, route);
        s.bound += 1;
        s.pinned += u64::from(route.pinned);
        r.bound.insert(uid.to_string(), (route.key(), node.to_string()));
    }

    /// A pod is gone (deleted or finished): it no longer counts on its node.
    pub fn pod_gone(&self, uid: &str) {
        if !self.active() {
            return;
        }
        self.record.lock().bound.remove(uid);
    }

    /// The row of `shadow` evaluated on `route`'s groups.
    fn shadow<'a>(record: &'a mut Record, route: &Route, shadow: &ShadowRoute) -> &'a mut ShadowStats {
        let s = record
            .shadows
            .entry((route.experiment.clone(), route.arm.clone(), shadow.name.clone()))
            .or_default();
        s.policy = shadow_policy(shadow);
        s
    }

    /// A shadow's verdicts on a group, compared with the placements acted on.
    pub fn shadow_compared(
        &self,
        route: &Route,
        shadow: &ShadowRoute,
        primary: &HashMap<&str, &proto::Placement>,
        verdicts: &[proto::Placement],
    ) {
        if !self.active() {
            return;
        }
        let mut r = self.record.lock();
        let s = Self::shadow(&mut r, route, shadow);
        for v in verdicts {
            let Some((agreement, diff)) = primary.get(v.pod_uid.as_str()).and_then(|p| Agreement::of(p, v)) else {
                continue;
            };
            s.compared += 1;
            match agreement {
                Agreement::SameNode => s.same_node += 1,
                Agreement::DifferentNode => s.different_node += 1,
                Agreement::BothUnschedulable => s.both_unschedulable += 1,
                Agreement::FeasibilityDiffers => s.feasibility_differs += 1,
            }
            if let Some(d) = diff {
                s.score_diff_sum += d;
                s.score_diff_count += 1;
            }
            self.metrics
                .experiments
                .shadow(&route.experiment, &route.arm, &shadow.name, agreement.label())
                .inc();
        }
        if s.score_diff_count > 0 {
            self.metrics
                .experiments
                .shadow_score_difference(&route.experiment, &route.arm, &shadow.name)
                .set(s.score_diff_sum as f64 / s.score_diff_count as f64);
        }
    }

    /// A shadow could not evaluate a group of `n` pods.
    pub fn shadow_failed(&self, route: &Route, shadow: &ShadowRoute, n: usize) {
        if !self.active() {
            return;
        }
        let mut r = self.record.lock();
        Self::shadow(&mut r, route, shadow).errors += n as u64;
        self.metrics
            .experiments
            .shadow(&route.experiment, &route.arm, &shadow.name, "error")
            .inc_by(n as u64);
    }

    /// The per-arm comparison now, with node utilization from `state`; also sets the node gauges.
    pub fn report(&self, state: &ClusterState) -> Report {
        let routing = self.current();
        let r = self.record.lock();
        let usage = node_usage(state);
        let mut by_row: BTreeMap<&(String, String), HashSet<&str>> = BTreeMap::new();
        for (key, node) in r.bound.values() {
            by_row.entry(key).or_default().insert(node.as_str());
        }
        // Rows for every configured arm (even before its first pod), then any recorded.
        let mut keys: Vec<(String, String)> = Vec::new();
        for e in &routing.set.experiments {
            for a in &e.arms {
                keys.push((e.name.clone(), a.name.clone()));
            }
        }
        for k in r.arms.keys() {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
        let mut arms = Vec::new();
        for key in keys {
            let s = r.arms.get(&key).cloned().unwrap_or_else(|| {
                let arm = routing
                    .set
                    .experiments
                    .iter()
                    .enumerate()
                    .find(|(_, e)| e.name == key.0)
                    .and_then(|(i, e)| e.arms.iter().position(|a| a.name == key.1).map(|j| (i, j)));
                let (policy, backend) = match arm {
                    Some((i, j)) => {
                        let p = &routing.set.experiments[i].arms[j].policy;
                        (
                            if p.is_empty() { "default".into() } else { p.clone() },
                            routing.backend_name(routing.arm_backend(i, j)).to_string(),
                        )
                    }
                    None => (String::new(), String::new()),
                };
                ArmStats {
                    policy,
                    backend,
                    ..ArmStats::default()
                }
            });
            let nodes = by_row.get(&key);
            let (mut cpu, mut memory) = (Vec::new(), Vec::new());
            for n in nodes.into_iter().flatten() {
                if let Some((c, m)) = usage.get(*n) {
                    cpu.extend(*c);
                    memory.extend(*m);
                }
            }
            let row = ArmRow {
                experiment: key.0.clone(),
                arm: key.1.clone(),
                policy: s.policy,
                backend: s.backend,
                pods_bound: s.bound,
                pods_pinned: s.pinned,
                unschedulable: s.unschedulable,
                decision_errors: s.decision_errors,
                bind_failures: s.bind_failures,
                decisions: s.decisions,
                decision_mean_ms: (s.decisions > 0).then(|| s.decision_seconds * 1e3 / s.decisions as f64),
                decision_max_ms: (s.decisions > 0).then_some(s.decision_max_seconds * 1e3),
                nodes_used: nodes.map_or(0, HashSet::len),
                cpu: MeanStddev::of(&cpu),
                memory: MeanStddev::of(&memory),
            };
            let g = &self.metrics.experiments;
            g.nodes_used(&row.experiment, &row.arm).set(row.nodes_used as i64);
            g.utilization(&row.experiment, &row.arm, "cpu", "mean")
                .set(row.cpu.mean);
            g.utilization(&row.experiment, &row.arm, "cpu", "stddev")
                .set(row.cpu.stddev);
            g.utilization(&row.experiment, &row.arm, "memory", "mean")
                .set(row.memory.mean);
            g.utilization(&row.experiment, &row.arm, "memory", "stddev")
                .set(row.memory.stddev);
            arms.push(row);
        }
        let shadows = r
            .shadows
            .iter()
            .map(|((e, a, name), s)| ShadowRow {
                experiment: e.clone(),
                arm: a.clone(),
                shadow: name.clone(),
                policy: s.policy.clone(),
                compared: s.compared,
                same_node: s.same_node,
                different_node: s.different_node,
                both_unschedulable: s.both_unschedulable,
                feasibility_differs: s.feasibility_differs,
                errors: s.errors,
                same_node_pct: pct(s.same_node, s.compared),
                same_feasibility_pct: pct(s.compared - s.feasibility_differs, s.compared),
                mean_score_difference: (s.score_diff_count > 0)
                    .then(|| s.score_diff_sum as f64 / s.score_diff_count as f64),
            })
            .collect();
        Report {
            nodes: state.node_count(),
            empty_nodes: empty_node_count(state),
            arms,
            shadows,
        }
    }
}

pub(super) fn shadow_policy(s: &ShadowRoute) -> String {
    if s.policy.is_empty() {
        "default".into()
    } else {
        s.policy.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::ExperimentSet;
    use crate::projection::PodInfo;

    fn placed(uid: &str, node: &str, score: i64) -> proto::Placement {
        proto::Placement {
            pod_uid: uid.into(),
            outcome: Some(proto::placement::Outcome::NodeName(node.into())),
            score,
            feasible_nodes: 1,
            claim_bindings: Vec::new(),
            claim_allocations: Vec::new(),
        }
    }

    fn unschedulable(uid: &str) -> proto::Placement {
        proto::Placement {
            pod_uid: uid.into(),
            outcome: Some(proto::placement::Outcome::Unschedulable(proto::Unschedulable::default())),
            score: 0,
            feasible_nodes: 0,
            claim_bindings: Vec::new(),
            claim_allocations: Vec::new(),
        }
    }

    #[test]
    fn agreement_compares_node_and_feasibility() {
        assert_eq!(
            Agreement::of(&placed("a", "n1", 50), &placed("a", "n1", 70)),
            Some((Agreement::SameNode, Some(20)))
        );
        assert_eq!(
            Agreement::of(&placed("a", "n1", 50), &placed("a", "n2", 40)),
            Some((Agreement::DifferentNode, Some(-10)))
        );
        assert_eq!(
            Agreement::of(&unschedulable("a"), &unschedulable("a")),
            Some((Agreement::BothUnschedulable, None))
        );
        assert_eq!(
            Agreement::of(&placed("a", "n1", 50), &unschedulable("a")),
            Some((Agreement::FeasibilityDiffers, None))
        );
    }

    #[tokio::test]
    async fn shadow_accounting_adds_up() {
        let set = ExperimentSet::parse("shadows: [{name: pack, policy: bin-packing}]").unwrap();
        let metrics = Arc::new(BinderMetrics::new());
        let exp = Experiments::new(Routing::build(set).unwrap(), Arc::clone(&metrics));
        let routing = exp.current();
        let route = routing.route(&PodInfo::default(), "");
        assert!(!route.in_experiment());
        let primary = [
            placed("a", "n1", 10),
            placed("b", "n1", 10),
            unschedulable("c"),
            placed("d", "n2", 10),
        ];
        let shadow = [
            placed("a", "n1", 30),
            placed("b", "n2", 20),
            unschedulable("c"),
            unschedulable("d"),
            placed("not-in-batch", "n1", 1),
        ];
        let by_uid: HashMap<&str, &proto::Placement> = primary.iter().map(|p| (p.pod_uid.as_str(), p)).collect();
        exp.shadow_compared(&route, &routing.shadows[0], &by_uid, &shadow);
        exp.shadow_failed(&route, &routing.shadows[0], 3);
        let report = exp.report(&ClusterState::new());
        let s = &report.shadows[0];
        assert_eq!(
            (
                s.compared,
                s.same_node,
                s.different_node,
                s.both_unschedulable,
                s.feasibility_differs,
                s.errors
            ),
            (4, 1, 1, 1, 1, 3)
        );
        assert_eq!(s.same_node_pct, Some(25.0));
        assert_eq!(s.same_feasibility_pct, Some(75.0));
        assert_eq!(s.mean_score_difference, Some(15.0), "(20 + 10) / 2");
        let text = metrics.encode();
        for line in [
            r#"binder_shadow_comparisons_total{experiment="-",arm="-",shadow="pack",result="same_node"} 1"#,
            r#"binder_shadow_comparisons_total{experiment="-",arm="-",shadow="pack",result="feasibility_differs"} 1"#,
            r#"binder_shadow_comparisons_total{experiment="-",arm="-",shadow="pack",result="error"} 3"#,
            r#"binder_shadow_score_difference_mean{experiment="-",arm="-",shadow="pack"} 15.0"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }

    #[test]
    fn nothing_is_recorded_without_an_experiment_or_shadow() {
        let metrics = Arc::new(BinderMetrics::new());
        let exp = Experiments::new(Routing::none(), Arc::clone(&metrics));
        let route = exp.current().route(&PodInfo::default(), "");
        exp.decided(&route, Duration::from_millis(3));
        exp.unschedulable(&route);
        exp.bound(&route, "u1", "n1");
        let report = exp.report(&ClusterState::new());
        assert!(report.arms.is_empty(), "{report:?}");
        let set = ExperimentSet::parse("shadows: [{name: pack, policy: bin-packing}]").unwrap();
        exp.install(Routing::build(set).unwrap());
        exp.bound(&route, "u1", "n1");
        let report = exp.report(&ClusterState::new());
        assert_eq!(report.arms.iter().map(|a| a.pods_bound).sum::<u64>(), 1, "{report:?}");
    }
}
