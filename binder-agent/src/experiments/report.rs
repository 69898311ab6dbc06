//! The per-arm comparison a running binder serves (`/experiments`, `binder-agent experiments`):
//! its rows and how they print.

use std::collections::{HashMap, HashSet};
use std::fmt::{self, Write as _};

use placement_scheduler::engine::resources::Resources;
use placement_scheduler::grpc::convert;
use serde::Serialize;

use crate::state::ClusterState;

pub(super) fn pct(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 * 100.0 / whole as f64)
}

/// Nodes with no pod at all (bound or assumed).
pub(super) fn empty_node_count(state: &ClusterState) -> usize {
    let used: HashSet<String> = state.pods().map(|p| p.node_name).collect();
    state.nodes().keys().filter(|n| !used.contains(n.as_str())).count()
}

/// Requested over allocatable per node, in percent (cpu, memory), with the engine's rules.
pub(super) fn node_usage(state: &ClusterState) -> HashMap<String, (Option<f64>, Option<f64>)> {
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
    pub(super) fn of(v: &[f64]) -> Self {
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
    /// Experiment name ([`NONE`](super::NONE) for pods outside every experiment).
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
