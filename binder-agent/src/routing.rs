//! Experiments and shadows at run time: which policy and decision backend decide each pending pod,
//! the annotations its Binding carries, and the per-arm record behind `/experiments` and the
//! `binder_experiment_*` / `binder_shadow_*` metrics.
//!
//! A [`Routing`] is one version of the experiments file made live: the validated
//! [`ExperimentSet`] and a [`ReplicaPool`] per distinct backend (index 0 is the binder's own
//! replicas). [`Experiments`] holds the current routing (swapped on reload, pools reused when a
//! backend is unchanged) and the record, keyed by experiment and arm names so it survives reloads.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::{self, Write as _};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use placement_scheduler::engine::resources::Resources;
use placement_scheduler::grpc::convert;
use placement_scheduler::proto;
use serde::Serialize;

use placement_scheduler::labels::{
    ARM_ANNOTATION, ASSIGNMENT_ANNOTATION, EXPERIMENT_ANNOTATION, PIN_ANNOTATION, POLICY_ANNOTATION,
};

use crate::experiments::{client_tls, BackendSpec, ConfigError, ExperimentSet, PodFacts};
use crate::metrics::BinderMetrics;
use crate::model::PodInfo;
use crate::queue::QueuedPod;
use crate::replicas::{EndpointSource, ReplicaConfig, ReplicaError, ReplicaPool};
use crate::state::ClusterState;

/// The experiment and arm label of pods no experiment selects (not a DNS label, so it never
/// collides with a configured name).
pub const NONE: &str = "-";

/// Why a routing could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RoutingError {
    /// The file is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A backend's replicas could not be set up.
    #[error("{field}: {source}")]
    Backend {
        /// The field path of the backend.
        field: String,
        /// Why.
        source: ReplicaError,
    },
}

/// Who decides a group of pods.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Route {
    /// Experiment name, or [`NONE`].
    pub experiment: String,
    /// Arm name, or [`NONE`].
    pub arm: String,
    /// Policy sent with the batch (empty: the backend's default).
    pub policy: String,
    /// Index of the backend in [`Routing::backends`] (0: the binder's replicas).
    pub backend: usize,
    /// Chosen by the pin annotation.
    pub pinned: bool,
}

impl Route {
    /// Whether an experiment selected the pods.
    pub fn in_experiment(&self) -> bool {
        self.experiment != NONE
    }

    /// The annotations the Binding carries: the policy the service applied, and the experiment,
    /// arm and how the arm was chosen when an experiment selected the pod.
    pub fn annotations(&self, applied_policy: &str) -> BTreeMap<String, String> {
        let mut a = BTreeMap::new();
        let policy = if applied_policy.is_empty() {
            self.policy_label()
        } else {
            applied_policy
        };
        a.insert(POLICY_ANNOTATION.to_string(), policy.to_string());
        if self.in_experiment() {
            a.insert(EXPERIMENT_ANNOTATION.to_string(), self.experiment.clone());
            a.insert(ARM_ANNOTATION.to_string(), self.arm.clone());
            let how = if self.pinned { "pin" } else { "hash" };
            a.insert(ASSIGNMENT_ANNOTATION.to_string(), how.to_string());
        }
        a
    }

    /// The policy for labels: `default` when empty.
    pub fn policy_label(&self) -> &str {
        if self.policy.is_empty() {
            "default"
        } else {
            &self.policy
        }
    }

    fn key(&self) -> (String, String) {
        (self.experiment.clone(), self.arm.clone())
    }
}

/// A shadow made live.
#[derive(Debug, Clone)]
pub struct ShadowRoute {
    /// Name.
    pub name: String,
    /// Policy evaluated.
    pub policy: String,
    /// Index of its backend.
    pub backend: usize,
}

/// One version of the experiments file made live.
#[derive(Debug)]
pub struct Routing {
    /// The validated file.
    pub set: ExperimentSet,
    /// Backends: 0 is the binder's own replicas, then one per distinct backend of the file.
    pub backends: Vec<Arc<ReplicaPool>>,
    specs: Vec<Option<BackendSpec>>,
    /// `arm_backend[experiment][arm]`: index of the arm's backend.
    arm_backend: Vec<Vec<usize>>,
    /// Shadows.
    pub shadows: Vec<ShadowRoute>,
}

impl Routing {
    /// Routing with no experiment and no shadow: every pod to the binder's replicas.
    pub fn none(main: Arc<ReplicaPool>) -> Self {
        Self {
            set: ExperimentSet::default(),
            backends: vec![main],
            specs: vec![None],
            arm_backend: Vec::new(),
            shadows: Vec::new(),
        }
    }

    /// Makes `set` live: a pool per distinct backend, reusing those of `previous` that are
    /// unchanged (so their snapshot sync state carries over). Replica settings other than TLS
    /// come from `main`'s.
    pub fn build(set: ExperimentSet, main: Arc<ReplicaPool>, previous: Option<&Routing>) -> Result<Self, RoutingError> {
        let mut r = Self::none(Arc::clone(&main));
        let backend_of = |r: &mut Self, field: String, spec: &Option<BackendSpec>| -> Result<usize, RoutingError> {
            let Some(spec) = spec else { return Ok(0) };
            if let Some(i) = r.specs.iter().position(|s| s.as_ref() == Some(spec)) {
                return Ok(i);
            }
            let reused = previous.and_then(|p| {
                p.specs
                    .iter()
                    .position(|s| s.as_ref() == Some(spec))
                    .map(|i| Arc::clone(&p.backends[i]))
            });
            let pool = match reused {
                Some(pool) => pool,
                None => {
                    let config = ReplicaConfig {
                        tls: client_tls(&field, spec)?,
                        ..main.config.clone()
                    };
                    Arc::new(
                        ReplicaPool::new(EndpointSource::Static(spec.endpoints.clone()), config)
                            .map_err(|source| RoutingError::Backend { field, source })?,
                    )
                }
            };
            r.backends.push(pool);
            r.specs.push(Some(spec.clone()));
            Ok(r.backends.len() - 1)
        };
        for (i, e) in set.experiments.iter().enumerate() {
            let mut arms = Vec::new();
            for (j, a) in e.arms.iter().enumerate() {
                arms.push(backend_of(
                    &mut r,
                    format!("experiments[{i}].arms[{j}].backend"),
                    &a.backend,
                )?);
            }
            r.arm_backend.push(arms);
        }
        for (i, s) in set.shadows.iter().enumerate() {
            let backend = backend_of(&mut r, format!("shadows[{i}].backend"), &s.backend)?;
            r.shadows.push(ShadowRoute {
                name: s.name.clone(),
                policy: s.policy.clone(),
                backend,
            });
        }
        r.set = set;
        Ok(r)
    }

    /// Whether any experiment or shadow is configured.
    pub fn active(&self) -> bool {
        !self.set.is_empty()
    }

    /// Who decides a pod; `default_policy` for pods no experiment selects.
    pub fn route(&self, info: &PodInfo, default_policy: &str) -> Route {
        let facts = PodFacts {
            namespace: &info.spec.namespace,
            name: &info.spec.name,
            labels: &info.spec.labels,
            owner: info.owner.as_ref(),
            pin: info.annotations.get(PIN_ANNOTATION).map(String::as_str),
        };
        match self.set.assign(&facts) {
            Some(a) => {
                let e = &self.set.experiments[a.experiment];
                let arm = &e.arms[a.arm];
                Route {
                    experiment: e.name.clone(),
                    arm: arm.name.clone(),
                    policy: arm.policy.clone(),
                    backend: self.arm_backend[a.experiment][a.arm],
                    pinned: a.pinned,
                }
            }
            None => Route {
                experiment: NONE.into(),
                arm: NONE.into(),
                policy: default_policy.to_string(),
                backend: 0,
                pinned: false,
            },
        }
    }

    /// Splits a batch by route, keeping the batch's order inside each group and ordering groups
    /// by their first pod (so the highest-priority pod's group is decided first).
    pub fn split(&self, batch: Vec<QueuedPod>, default_policy: &str) -> Vec<(Route, Vec<QueuedPod>)> {
        let mut groups: Vec<(Route, Vec<QueuedPod>)> = Vec::new();
        let mut index: HashMap<Route, usize> = HashMap::new();
        for p in batch {
            let route = self.route(&p.info, default_policy);
            match index.get(&route) {
                Some(&i) => groups[i].1.push(p),
                None => {
                    index.insert(route.clone(), groups.len());
                    groups.push((route, vec![p]));
                }
            }
        }
        groups
    }

    /// A description of a backend for the table: `main` or its endpoints.
    pub fn backend_name(&self, i: usize) -> String {
        match self.specs.get(i).and_then(|s| s.as_ref()) {
            Some(s) => s.endpoints.join(","),
            None => "main".into(),
        }
    }

    /// The lowest state version a synced replica of any backend holds (replicas that hold
    /// nothing get a full snapshot anyway, so they hold no history back); `None` when none.
    pub fn min_synced_version(&self) -> Option<u64> {
        self.backends
            .iter()
            .flat_map(|p| p.all())
            .filter_map(|r| r.synced.lock().as_ref().map(|h| h.version))
            .min()
    }
}

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

/// The live experiments: the current [`Routing`] and the record.
pub struct Experiments {
    routing: RwLock<Arc<Routing>>,
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
            routing: RwLock::new(Arc::new(routing)),
            record: Mutex::new(Record::default()),
            metrics,
        }
    }

    /// The routing live now.
    pub fn current(&self) -> Arc<Routing> {
        Arc::clone(&self.routing.read())
    }

    /// Makes `set` live (reusing unchanged backends).
    pub fn replace(&self, set: ExperimentSet) -> Result<(), RoutingError> {
        let current = self.current();
        let main = Arc::clone(&current.backends[0]);
        let next = Routing::build(set, main, Some(&current))?;
        *self.routing.write() = Arc::new(next);
        Ok(())
    }

    /// Reads `path` and makes it live; on error the current routing stays.
    pub fn reload(&self, path: &Path) -> Result<(), RoutingError> {
        let set = ExperimentSet::load(path)?;
        self.replace(set)
    }

    /// Makes a changed file's text live, counting the reload (`binder_experiments_reloads_total`);
    /// on error the current routing stays.
    pub fn reload_text(&self, text: &str) -> Result<(), RoutingError> {
        let result = ExperimentSet::parse(text)
            .map_err(RoutingError::from)
            .and_then(|set| self.replace(set));
        self.metrics
            .experiments
            .reload(if result.is_ok() { "ok" } else { "invalid" });
        result
    }

    fn arm<'a>(record: &'a mut Record, route: &Route, routing: &Routing) -> &'a mut ArmStats {
        let s = record.arms.entry(route.key()).or_default();
        if s.policy.is_empty() {
            s.policy = route.policy_label().to_string();
            s.backend = routing.backend_name(route.backend);
        }
        s
    }

    /// A group was decided (or failed) in `took`.
    pub fn decided(&self, routing: &Routing, route: &Route, took: Duration) {
        let secs = took.as_secs_f64();
        self.metrics
            .experiments
            .decision_duration(&route.experiment, &route.arm)
            .observe(secs);
        let mut r = self.record.lock();
        let s = Self::arm(&mut r, route, routing);
        s.decisions += 1;
        s.decision_seconds += secs;
        s.decision_max_seconds = s.decision_max_seconds.max(secs);
    }

    /// `n` pods of a group got no decision (their backend failed); they back off.
    pub fn decision_failed(&self, routing: &Routing, route: &Route, n: usize) {
        self.metrics
            .experiments
            .pods(&route.experiment, &route.arm, "error")
            .inc_by(n as u64);
        Self::arm(&mut self.record.lock(), route, routing).decision_errors += n as u64;
    }

    /// A pod was found unschedulable.
    pub fn unschedulable(&self, routing: &Routing, route: &Route) {
        self.metrics
            .experiments
            .pods(&route.experiment, &route.arm, "unschedulable")
            .inc();
        Self::arm(&mut self.record.lock(), route, routing).unschedulable += 1;
    }

    /// A Binding request failed (it is retried or the pod decided again).
    pub fn bind_failed(&self, routing: &Routing, route: &Route) {
        self.metrics
            .experiments
            .bind_failure(&route.experiment, &route.arm)
            .inc();
        Self::arm(&mut self.record.lock(), route, routing).bind_failures += 1;
    }

    /// A pod was bound to `node`.
    pub fn bound(&self, routing: &Routing, route: &Route, uid: &str, node: &str) {
        self.metrics
            .experiments
            .pods(&route.experiment, &route.arm, "scheduled")
            .inc();
        let mut r = self.record.lock();
        let s = Self::arm(&mut r, route, routing);
        s.bound += 1;
        s.pinned += u64::from(route.pinned);
        r.bound.insert(uid.to_string(), (route.key(), node.to_string()));
    }

    /// A pod is gone (deleted or finished): it no longer counts on its node.
    pub fn pod_gone(&self, uid: &str) {
        self.record.lock().bound.remove(uid);
    }

    /// A shadow's verdicts on a group, compared with the placements acted on.
    pub fn shadow_compared(
        &self,
        route: &Route,
        shadow: &ShadowRoute,
        primary: &HashMap<&str, &proto::Placement>,
        verdicts: &[proto::Placement],
    ) {
        let mut r = self.record.lock();
        let s = r
            .shadows
            .entry((route.experiment.clone(), route.arm.clone(), shadow.name.clone()))
            .or_default();
        s.policy = shadow_policy(shadow);
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
        let mut r = self.record.lock();
        let s = r
            .shadows
            .entry((route.experiment.clone(), route.arm.clone(), shadow.name.clone()))
            .or_default();
        s.policy = shadow_policy(shadow);
        s.errors += n as u64;
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
                            routing.backend_name(routing.arm_backend[i][j]),
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

fn shadow_policy(s: &ShadowRoute) -> String {
    if s.policy.is_empty() {
        "default".into()
    } else {
        s.policy.clone()
    }
}

fn pct(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 * 100.0 / whole as f64)
}

/// Nodes with no pod at all (bound or assumed).
fn empty_node_count(state: &ClusterState) -> usize {
    let used: HashSet<String> = state.pods().map(|p| p.node_name).collect();
    state.nodes().keys().filter(|n| !used.contains(n.as_str())).count()
}

/// Requested over allocatable per node, in percent (cpu, memory), with the engine's rules.
fn node_usage(state: &ClusterState) -> HashMap<String, (Option<f64>, Option<f64>)> {
    let mut used: HashMap<String, Resources> = HashMap::new();
    for p in state.pods() {
        if let Ok(spec) = convert::pod("pod", &p) {
            used.entry(p.node_name).or_default().add(&spec.requests);
        }
    }
    let ratio = |u: i64, a: i64| (a > 0).then(|| u as f64 * 100.0 / a as f64);
    state
        .nodes()
        .iter()
        .filter_map(|(name, node)| {
            let a = convert::node("node", node).ok()?.allocatable;
            let u = used.get(name.as_str()).cloned().unwrap_or_default();
            Some((
                name.clone(),
                (ratio(u.milli_cpu, a.milli_cpu), ratio(u.memory, a.memory)),
            ))
        })
        .collect()
}

/// Mean and population standard deviation of a per-node percentage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct MeanStddev {
    /// Mean, percent.
    pub mean: f64,
    /// Population standard deviation, percentage points.
    pub stddev: f64,
}

impl MeanStddev {
    fn of(v: &[f64]) -> Self {
        if v.is_empty() {
            return Self::default();
        }
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        Self {
            mean,
            stddev: var.sqrt(),
        }
    }
}

/// One arm's row of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmRow {
    /// Experiment name ([`NONE`] for pods outside every experiment).
    pub experiment: String,
    /// Arm name.
    pub arm: String,
    /// Policy.
    pub policy: String,
    /// `main` or the backend's endpoints.
    pub backend: String,
    /// Pods bound.
    pub pods_bound: u64,
    /// Of which pinned by annotation.
    pub pods_pinned: u64,
    /// Unschedulable verdicts.
    pub unschedulable: u64,
    /// Pods whose decision failed (backend unavailable); they were queued again.
    pub decision_errors: u64,
    /// Failed Binding requests.
    pub bind_failures: u64,
    /// Decision calls (one per batch and arm).
    pub decisions: u64,
    /// Mean decision latency (sync + Schedule), milliseconds.
    pub decision_mean_ms: Option<f64>,
    /// Slowest decision, milliseconds.
    pub decision_max_ms: Option<f64>,
    /// Distinct nodes holding this arm's pods.
    pub nodes_used: usize,
    /// Cpu requested / allocatable of those nodes (all pods counted), percent.
    pub cpu: MeanStddev,
    /// Memory requested / allocatable of those nodes, percent.
    pub memory: MeanStddev,
}

/// One shadow's agreement with the placements of one arm.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShadowRow {
    /// Experiment of the pods compared.
    pub experiment: String,
    /// Arm of the pods compared.
    pub arm: String,
    /// Shadow name.
    pub shadow: String,
    /// Shadow policy.
    pub policy: String,
    /// Pods compared.
    pub compared: u64,
    /// Same node.
    pub same_node: u64,
    /// Both placed, different nodes.
    pub different_node: u64,
    /// Neither placed.
    pub both_unschedulable: u64,
    /// One placed, the other not.
    pub feasibility_differs: u64,
    /// Pods the shadow could not evaluate.
    pub errors: u64,
    /// Same node, percent of compared (pods both found unschedulable count against it).
    pub same_node_pct: Option<f64>,
    /// Same feasibility, percent of compared.
    pub same_feasibility_pct: Option<f64>,
    /// Mean of (shadow score − acted-on score) where both placed; each in its policy's scale.
    pub mean_score_difference: Option<f64>,
}

/// The per-arm comparison: `/experiments`, `binder-agent experiments` and `simulate`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Report {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Nodes with no pod at all.
    pub empty_nodes: usize,
    /// A row per arm (and one for pods outside experiments, once any is seen).
    pub arms: Vec<ArmRow>,
    /// A row per shadow and arm compared.
    pub shadows: Vec<ShadowRow>,
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut o = String::new();
        writeln!(o, "{} nodes, {} empty", self.nodes, self.empty_nodes)?;
        writeln!(
            o,
            "{:<14} {:<12} {:<14} {:>7} {:>7} {:>7} {:>6} {:>7} {:>9} {:>9} {:>7} {:>9} {:>9}",
            "EXPERIMENT",
            "ARM",
            "POLICY",
            "BOUND",
            "PINNED",
            "UNSCHED",
            "ERRORS",
            "BINDERR",
            "DEC-MS",
            "DEC-MAX",
            "NODES",
            "CPU-MEAN%",
            "CPU-SD"
        )?;
        for r in &self.arms {
            writeln!(
                o,
                "{:<14} {:<12} {:<14} {:>7} {:>7} {:>7} {:>6} {:>7} {:>9} {:>9} {:>7} {:>9.1} {:>9.1}",
                r.experiment,
                r.arm,
                r.policy,
                r.pods_bound,
                r.pods_pinned,
                r.unschedulable,
                r.decision_errors,
                r.bind_failures,
                opt(r.decision_mean_ms, 2),
                opt(r.decision_max_ms, 2),
                r.nodes_used,
                r.cpu.mean,
                r.cpu.stddev
            )?;
        }
        if !self.shadows.is_empty() {
            writeln!(
                o,
                "{:<14} {:<12} {:<16} {:<14} {:>8} {:>10} {:>11} {:>7} {:>11}",
                "EXPERIMENT", "ARM", "SHADOW", "POLICY", "COMPARED", "SAME-NODE%", "SAME-FEAS%", "ERRORS", "SCORE-DIFF"
            )?;
            for s in &self.shadows {
                writeln!(
                    o,
                    "{:<14} {:<12} {:<16} {:<14} {:>8} {:>10} {:>11} {:>7} {:>11}",
                    s.experiment,
                    s.arm,
                    s.shadow,
                    s.policy,
                    s.compared,
                    opt(s.same_node_pct, 1),
                    opt(s.same_feasibility_pct, 1),
                    s.errors,
                    opt(s.mean_score_difference, 1)
                )?;
            }
        }
        f.write_str(&o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(uid: &str, node: &str, score: i64) -> proto::Placement {
        proto::Placement {
            pod_uid: uid.into(),
            outcome: Some(proto::placement::Outcome::NodeName(node.into())),
            score,
            feasible_nodes: 1,
            claim_bindings: Vec::new(),
        }
    }

    fn unschedulable(uid: &str) -> proto::Placement {
        proto::Placement {
            pod_uid: uid.into(),
            outcome: Some(proto::placement::Outcome::Unschedulable(proto::Unschedulable::default())),
            score: 0,
            feasible_nodes: 0,
            claim_bindings: Vec::new(),
        }
    }

    fn pool() -> Arc<ReplicaPool> {
        Arc::new(
            ReplicaPool::new(
                EndpointSource::Static(vec!["http://127.0.0.1:1".into()]),
                ReplicaConfig::default(),
            )
            .unwrap(),
        )
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
        let exp = Experiments::new(Routing::build(set, pool(), None).unwrap(), Arc::clone(&metrics));
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

    #[tokio::test]
    async fn routes_split_a_batch_and_backends_are_shared_and_reused() {
        let yaml = r#"
experiments:
  - name: e
    unit: pod
    arms:
      - {name: a, weight: 1, policy: default}
      - {name: b, weight: 1, policy: bin-packing, backend: {endpoints: ["http://127.0.0.1:2"]}}
shadows:
  - {name: s, policy: bin-packing, backend: {endpoints: ["http://127.0.0.1:2"]}}
"#;
        let main = pool();
        let r1 = Routing::build(ExperimentSet::parse(yaml).unwrap(), Arc::clone(&main), None).unwrap();
        assert_eq!(r1.backends.len(), 2, "the arm and the shadow share one backend");
        assert_eq!(r1.shadows[0].backend, 1);
        let r2 = Routing::build(ExperimentSet::parse(yaml).unwrap(), main, Some(&r1)).unwrap();
        assert!(
            Arc::ptr_eq(&r1.backends[1], &r2.backends[1]),
            "an unchanged backend is reused"
        );

        let pods: Vec<QueuedPod> = (0..40)
            .map(|i| {
                let mut q = crate::queue::SchedulingQueue::new(Default::default());
                let info = PodInfo {
                    spec: proto::Pod {
                        uid: format!("u{i}"),
                        namespace: "ns".into(),
                        name: format!("p{i}"),
                        ..Default::default()
                    },
                    ..PodInfo::default()
                };
                q.add_or_update(info, tokio::time::Instant::now());
                q.pop_batch(1, tokio::time::Instant::now()).remove(0)
            })
            .collect();
        let groups = r1.split(pods, "");
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].1[0].info.spec.uid, "u0", "the first pod's group goes first");
        assert_eq!(groups.iter().map(|g| g.1.len()).sum::<usize>(), 40);
        for (route, pods) in &groups {
            assert_eq!(route.backend, usize::from(route.arm == "b"));
            for p in pods {
                assert_eq!(r1.route(&p.info, "").arm, route.arm);
            }
            let a = route.annotations("");
            assert_eq!(a[EXPERIMENT_ANNOTATION], "e");
            assert_eq!(a[ARM_ANNOTATION], route.arm);
            assert_eq!(a[ASSIGNMENT_ANNOTATION], "hash");
            assert_eq!(a[POLICY_ANNOTATION], route.policy_label());
        }
    }
}
