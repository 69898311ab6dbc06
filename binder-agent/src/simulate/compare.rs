//! Per-arm comparison of an experiment: the same workload run once per arm.

use std::fmt::{self, Write as _};

use serde::Serialize;

use crate::experiments::ExperimentSet;

use super::config::*;
use super::run::simulate;
use super::summary::Summary;

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
