//! PodTopologySpread's PreScore, Score and NormalizeScore (kube-scheduler's
//! `podtopologyspread/scoring.go`): ScheduleAnyway constraints (or the default ones), per
//! constraint `count × ln(domains + 2) + maxSkew − 1`, normalized so the node with the fewest
//! matching pods scores 100.

use std::sync::Arc;

use super::{constraints, Constraint, NodeStatics};
use crate::engine::model::{PodSpec, WhenUnsatisfiable};
use crate::engine::plugins::MAX_NODE_SCORE;
use crate::engine::policy::PodTopologySpreadArgs;
use crate::engine::snapshot::{Snapshot, Topology};
use crate::engine::topology::Existing;

/// The hostname label, whose domains kube-scheduler scores node by node.
const HOSTNAME: &str = "kubernetes.io/hostname";

/// PodTopologySpread's scoring constraints for one pod.
#[derive(Debug)]
pub struct SpreadScore {
    constraints: Vec<Constraint>,
    /// Nodes lacking a topology key are ignored (false only for the system defaults).
    require_all: bool,
}

/// kube-scheduler's `invalidScore`: a node ignored by scoring.
pub const IGNORED: i64 = -1;

impl SpreadScore {
    /// PreScore's constraints; `None` when the pod has no ScheduleAnyway constraint.
    pub fn new(pod: &PodSpec, args: &PodTopologySpreadArgs) -> Option<Self> {
        let constraints = constraints(pod, args, WhenUnsatisfiable::ScheduleAnyway);
        if constraints.is_empty() {
            return None;
        }
        let system = args.defaulting_type == crate::engine::policy::DefaultingType::System;
        Some(Self {
            constraints,
            require_all: !pod.spread_constraints.is_empty() || !system,
        })
    }

    /// PreScore and Score: the raw score of each candidate node ([`IGNORED`] for ignored nodes).
    pub fn scores(
        &self,
        existing: &Existing<'_>,
        pod: &PodSpec,
        candidates: &[usize],
        statics: NodeStatics<'_>,
    ) -> Vec<i64> {
        let snapshot: &Snapshot = existing.snapshot;
        // Per-node counts cover every node of the cluster (a view's others too, see
        // Snapshot::topology_node).
        let n = snapshot.topology_len();
        let topos: Vec<Arc<Topology>> = self.constraints.iter().map(|c| snapshot.topology(&c.key)).collect();
        // A node without the key counts in the domain of the empty value, as a Go map lookup does.
        let domain = |i: usize, node: usize| -> usize {
            let t = &topos[i];
            match t.node_domain[node] {
                Topology::NONE => t.values.iter().position(|v| v.is_empty()).unwrap_or(t.values.len()),
                d => d as usize,
            }
        };
        let has_all = |node: usize| topos.iter().all(|t| t.node_domain[node] != Topology::NONE);
        let ignored: Vec<bool> = candidates.iter().map(|&c| self.require_all && !has_all(c)).collect();
        let kept = ignored.iter().filter(|x| !**x).count();
        let mut out = vec![0i64; candidates.len()];
        let mut weights = Vec::with_capacity(self.constraints.len());
        let mut per_constraint: Vec<Vec<i64>> = Vec::with_capacity(self.constraints.len());
        for (i, c) in self.constraints.iter().enumerate() {
            let hostname = c.key == HOSTNAME;
            let size = topos[i].values.len() + 1;
            let mut present = vec![false; size];
            let mut domains = 0usize;
            if !hostname {
                for (&node, ign) in candidates.iter().zip(&ignored) {
                    let d = domain(i, node);
                    if !*ign && !present[d] {
                        present[d] = true;
                        domains += 1;
                    }
                }
            }
            let sz = if hostname { kept } else { domains };
            weights.push(((sz + 2) as f64).ln());
            // Matching pods per domain (per node for hostname).
            let mut counts = vec![0i64; if hostname { n } else { size }];
            existing.matching(super::counted(c.selector.as_ref()), |other| {
                // kube-scheduler's countPodsMatchSelector bypasses terminating pods.
                if other.terminating || other.namespace != pod.namespace {
                    return;
                }
                if hostname {
                    counts[other.node] += 1;
                    return;
                }
                if self.require_all && !has_all(other.node) {
                    return;
                }
                if !c.includes(statics(other.node)) {
                    return;
                }
                let d = domain(i, other.node);
                if present[d] {
                    counts[d] += 1;
                }
            });
            per_constraint.push(counts);
        }
        for (k, &node) in candidates.iter().enumerate() {
            if ignored[k] {
                out[k] = IGNORED;
                continue;
            }
            let mut score = 0f64;
            for (i, c) in self.constraints.iter().enumerate() {
                if topos[i].node_domain[node] == Topology::NONE {
                    continue;
                }
                let cnt = if c.key == HOSTNAME {
                    per_constraint[i][node]
                } else {
                    per_constraint[i][domain(i, node)]
                };
                score += cnt as f64 * weights[i] + (c.max_skew - 1) as f64;
            }
            out[k] = score.round() as i64;
        }
        out
    }
}

/// NormalizeScore: ignored nodes 0; every node 100 when the highest score is 0; else
/// `100 × (max + min − score) / max`.
pub fn normalize(raw: i64, min: i64, max: i64) -> i64 {
    if raw == IGNORED {
        0
    } else if max == 0 {
        MAX_NODE_SCORE
    } else {
        MAX_NODE_SCORE * (max + min - raw) / max
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::{NodeInclusionPolicy, NodeSpec, SpreadConstraint};
    use crate::engine::plugins::testing::{exists, foo_pods_on, labelled_node, labelled_pod, zone_nodes};
    use crate::engine::topology::Placed;

    fn soft(max_skew: i32, key: &str) -> SpreadConstraint {
        SpreadConstraint {
            max_skew,
            topology_key: key.into(),
            when_unsatisfiable: WhenUnsatisfiable::ScheduleAnyway,
            selector: Some(exists("foo")),
            min_domains: 1,
            node_affinity_policy: NodeInclusionPolicy::Honor,
            node_taints_policy: NodeInclusionPolicy::Ignore,
            match_label_keys: vec![],
        }
    }

    /// `scoring_test.go`'s `TestPodTopologySpreadScore` in our words: the cluster, the incoming
    /// pod's ScheduleAnyway constraints, then each node's raw score (PreScore and Score, before
    /// normalization; [`IGNORED`] for a node scoring ignores): per constraint, matching pods in
    /// the node's domain × ln(domains + 2) + maxSkew − 1, summed and rounded.
    #[test]
    fn raw_score_table() {
        const HOST: &str = "kubernetes.io/hostname";
        struct Case {
            name: &'static str,
            nodes: Vec<NodeSpec>,
            existing: &'static [(&'static str, usize)],
            constraints: Vec<SpreadConstraint>,
            want: [i64; 4],
        }
        let zone_b_missing = || {
            let mut n = zone_nodes();
            n[1] = labelled_node("node-b", &[(HOST, "node-b")]);
            n
        };
        let cases = [
            Case {
                name: "no existing pods",
                nodes: zone_nodes(),
                existing: &[],
                constraints: vec![soft(1, HOST)],
                want: [0, 0, 0, 0],
            },
            Case {
                name: "hostname, pods 2/1/0/3: 2·ln 6, 1·ln 6, 0, 3·ln 6",
                nodes: zone_nodes(),
                existing: &[("node-a", 2), ("node-b", 1), ("node-y", 3)],
                constraints: vec![soft(1, HOST)],
                want: [4, 2, 0, 5],
            },
            Case {
                name: "zone, pods 3/3: every node 3·ln 4",
                nodes: zone_nodes(),
                existing: &[("node-a", 1), ("node-b", 2), ("node-x", 2), ("node-y", 1)],
                constraints: vec![soft(1, "zone")],
                want: [4, 4, 4, 4],
            },
            Case {
                name: "zone, pods 1/3, maxSkew 2: adds maxSkew − 1",
                nodes: zone_nodes(),
                existing: &[("node-a", 1), ("node-x", 3)],
                constraints: vec![soft(2, "zone")],
                want: [2, 2, 5, 5],
            },
            Case {
                name: "a node without the zone label is ignored and its pods do not count",
                nodes: zone_b_missing(),
                existing: &[("node-a", 1), ("node-b", 1), ("node-x", 2)],
                constraints: vec![soft(1, "zone")],
                want: [1, IGNORED, 3, 3],
            },
            Case {
                name: "two constraints add before rounding",
                nodes: zone_nodes(),
                existing: &[("node-a", 1), ("node-x", 2)],
                constraints: vec![soft(1, "zone"), soft(1, HOST)],
                want: [3, 1, 6, 3],
            },
        ];
        for c in cases {
            let bound: Vec<PodSpec> = c.existing.iter().flat_map(|(n, k)| foo_pods_on(n, *k)).collect();
            let snap = Snapshot::build(c.nodes, bound).unwrap();
            let placed = Placed::default();
            let existing = Existing {
                snapshot: &snap,
                placed: &placed,
            };
            let pod = PodSpec {
                spread_constraints: c.constraints,
                ..labelled_pod("p", &[("foo", "")])
            };
            let score = SpreadScore::new(&pod, &PodTopologySpreadArgs::default()).expect("ScheduleAnyway constraints");
            let got = score.scores(&existing, &pod, &[0, 1, 2, 3], &|_| (false, false));
            assert_eq!(got, c.want, "{}", c.name);
        }
    }

    /// `scoring_test.go`'s NormalizeScore: (raw, min, max) to the normalized score; fewer
    /// matching pods score higher, ignored nodes 0. (The cycle's tests, `topology_tests.rs`, run
    /// PreFilter, Filter and Score on snapshots.)
    #[test]
    fn normalize_table() {
        let cases = [
            ("ignored node", IGNORED, 0, 10, 0),
            ("every score 0", 0, 0, 0, 100),
            ("the fewest", 1, 1, 5, 100),
            ("the most", 5, 1, 5, 20),
            ("between", 3, 1, 5, 60),
        ];
        for (name, raw, min, max, want) in cases {
            assert_eq!(normalize(raw, min, max), want, "{name}");
        }
    }
}
