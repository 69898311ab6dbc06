//! PodTopologySpread's PreFilter and Filter (kube-scheduler's `podtopologyspread/filtering.go`):
//! DoNotSchedule constraints, `matching pods in the node's domain + (1 if the pod matches itself)
//! − global minimum ≤ maxSkew`, with the reasons a node is rejected for.

use std::sync::Arc;

use super::{constraints, NodeStatics};
use crate::engine::model::{LabelSelector, Labels, PodSpec, WhenUnsatisfiable};
use crate::engine::policy::PodTopologySpreadArgs;
use crate::engine::snapshot::Topology;
use crate::engine::topology::Existing;

/// kube-scheduler's `ErrReasonConstraintsNotMatch`.
pub const CONSTRAINTS_REASON: &str = "node(s) didn't match pod topology spread constraints";
/// kube-scheduler's `ErrReasonNodeLabelNotMatch`.
pub const MISSING_LABEL_REASON: &str = "node(s) didn't match pod topology spread constraints (missing required label)";

/// Which spread rule rejected a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Violation {
    /// The node lacks a constraint's topology key.
    MissingLabel,
    /// Placing the pod there would exceed maxSkew.
    Skew,
}

#[derive(Debug, Clone)]
struct FilterConstraint {
    topo: Arc<Topology>,
    max_skew: i64,
    self_match: bool,
    /// Matching pods per domain (eligible nodes only).
    counts: Vec<i64>,
    /// The global minimum (0 while fewer than minDomains domains exist).
    min_match: i64,
    /// The selector, for [`SpreadFilter::update`].
    selector: Option<LabelSelector>,
    /// Per node, whether it counts (has every key, passes the node policies).
    eligible: Arc<[bool]>,
    /// Per domain, whether some eligible node is in it.
    present: Arc<[bool]>,
    /// Fewer domains than minDomains: the global minimum stays 0.
    short_of_domains: bool,
}

impl FilterConstraint {
    /// The global minimum over the domains present, from the counts.
    fn min_of(counts: &[i64], present: &[bool], short_of_domains: bool) -> i64 {
        if short_of_domains {
            return 0;
        }
        counts
            .iter()
            .zip(present)
            .filter(|(_, p)| **p)
            .map(|(c, _)| *c)
            .min()
            .unwrap_or(i64::from(i32::MAX))
    }
}

/// PodTopologySpread's PreFilter state for one pod.
#[derive(Debug, Clone)]
pub struct SpreadFilter {
    constraints: Vec<FilterConstraint>,
}

impl SpreadFilter {
    /// PreFilter; `None` when the pod has no DoNotSchedule constraint (kube-scheduler's Skip).
    pub fn new(
        existing: &Existing<'_>,
        pod: &PodSpec,
        args: &PodTopologySpreadArgs,
        statics: NodeStatics<'_>,
    ) -> Option<Self> {
        let cs = constraints(pod, args, WhenUnsatisfiable::DoNotSchedule);
        if cs.is_empty() {
            return None;
        }
        let snapshot = existing.snapshot;
        let topos: Vec<Arc<Topology>> = cs.iter().map(|c| snapshot.topology(&c.key)).collect();
        // Every node of the cluster, also those outside a PodGroup placement's view (kube's
        // PreFilter lists all nodes; the placement narrows the candidates only).
        let n = snapshot.topology_len();
        // Per constraint, per node: whether the node counts (has every key, passes the policies).
        let mut eligible = vec![vec![false; n]; cs.len()];
        let mut present: Vec<Vec<bool>> = topos.iter().map(|t| vec![false; t.values.len()]).collect();
        for node in 0..n {
            if crate::engine::cancel::requested_at(node) {
                break;
            }
            if topos.iter().any(|t| t.node_domain[node] == Topology::NONE) {
                continue;
            }
            let st = statics(node);
            for (i, c) in cs.iter().enumerate() {
                if c.includes(st) {
                    eligible[i][node] = true;
                    present[i][topos[i].node_domain[node] as usize] = true;
                }
            }
        }
        let constraints = cs
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let topo = &topos[i];
                let mut counts = vec![0i64; topo.values.len()];
                existing.matching(super::counted(c.selector.as_ref()), |other| {
                    // kube-scheduler's countPodsMatchSelector bypasses terminating pods.
                    if !other.terminating && other.namespace == pod.namespace && eligible[i][other.node] {
                        counts[topo.node_domain[other.node] as usize] += 1;
                    }
                });
                let domains = present[i].iter().filter(|p| **p).count() as i64;
                let short_of_domains = domains < c.min_domains;
                FilterConstraint {
                    topo: Arc::clone(topo),
                    max_skew: c.max_skew,
                    self_match: c.selector.as_ref().is_some_and(|s| s.matches(&pod.labels)),
                    min_match: FilterConstraint::min_of(&counts, &present[i], short_of_domains),
                    counts,
                    selector: c.selector.clone(),
                    eligible: Arc::from(std::mem::take(&mut eligible[i])),
                    present: Arc::from(present[i].as_slice()),
                    short_of_domains,
                }
            })
            .collect();
        Some(Self { constraints })
    }

    /// kube-scheduler's PreFilterExtensions AddPod (`delta` 1) and RemovePod (−1): counts a pod
    /// of namespace `namespace` with `labels` on `node` in or out, for the incoming pod of
    /// namespace `own_namespace`. Like kube-scheduler's `updateWithPod`, this does not look at
    /// whether the pod is terminating: preemption's dry run that removes a terminating victim
    /// takes it off its domain's count although PreFilter never counted it.
    pub fn update(&mut self, own_namespace: &str, namespace: &str, labels: &Labels, node: usize, delta: i64) {
        if namespace != own_namespace {
            return;
        }
        for c in &mut self.constraints {
            if !c.eligible.get(node).copied().unwrap_or(false)
                || !c.selector.as_ref().is_some_and(|s| s.matches(labels))
            {
                continue;
            }
            let d = c.topo.node_domain[node];
            if d == Topology::NONE {
                continue;
            }
            c.counts[d as usize] += delta;
            c.min_match = FilterConstraint::min_of(&c.counts, &c.present, c.short_of_domains);
        }
    }

    /// Filter: the first constraint the node breaks.
    pub fn check(&self, node: usize) -> Option<Violation> {
        for c in &self.constraints {
            let d = c.topo.node_domain[node];
            if d == Topology::NONE {
                return Some(Violation::MissingLabel);
            }
            let skew = c.counts[d as usize] + i64::from(c.self_match) - c.min_match;
            if skew > c.max_skew {
                return Some(Violation::Skew);
            }
        }
        None
    }
}

impl crate::engine::plugins::contract::Filter for super::PodTopologySpread {
    /// The pod's PreFilter state (`None`: the plugin skips the pod).
    type In<'a> = Option<&'a SpreadFilter>;
    type Rejection = Violation;
    #[inline(always)]
    fn filter(
        state: Option<&SpreadFilter>,
        node: &crate::engine::snapshot::NodeView<'_>,
        reject: &mut impl FnMut(Violation),
    ) -> bool {
        crate::engine::plugins::contract::verdict(state.and_then(|f| f.check(node.index)), reject)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::{LabelSelector, NodeInclusionPolicy, NodeSpec, SpreadConstraint};
    use crate::engine::plugins::testing::{exists, foo_pods_on, labelled_node, labelled_pod, zone_nodes};
    use crate::engine::snapshot::Snapshot;
    use crate::engine::topology::Placed;

    fn hard(max_skew: i32, key: &str) -> SpreadConstraint {
        SpreadConstraint {
            max_skew,
            topology_key: key.into(),
            when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
            selector: Some(exists("foo")),
            min_domains: 1,
            node_affinity_policy: NodeInclusionPolicy::Honor,
            node_taints_policy: NodeInclusionPolicy::Ignore,
            match_label_keys: vec![],
        }
    }

    /// Pods bound as (node, count) pairs.
    fn bound(counts: &[(&str, usize)]) -> Vec<PodSpec> {
        counts.iter().flat_map(|(n, c)| foo_pods_on(n, *c)).collect()
    }

    /// `filtering_test.go`'s `TestSingleConstraint` and `TestMultipleConstraints` in our words: the
    /// cluster, the incoming pod's DoNotSchedule constraints, the nodes the pod's node affinity
    /// excludes (what the static filters say), then the spread filter's verdict per node
    /// (`None`: passes).
    #[test]
    fn filter_table() {
        use Violation::{MissingLabel, Skew};
        const HOST: &str = "kubernetes.io/hostname";
        let zone_b_missing = || {
            let mut n = zone_nodes();
            n[1] = labelled_node("node-b", &[("kubernetes.io/hostname", "node-b")]);
            n
        };
        struct Case {
            name: &'static str,
            nodes: Vec<NodeSpec>,
            existing: Vec<PodSpec>,
            pod_labels: &'static [(&'static str, &'static str)],
            constraints: Vec<SpreadConstraint>,
            mismatched: &'static [usize],
            want: [Option<Violation>; 4],
        }
        let cases = [
            Case {
                name: "no existing pods",
                nodes: zone_nodes(),
                existing: vec![],
                pod_labels: &[("foo", "")],
                constraints: vec![hard(1, "zone")],
                mismatched: &[],
                want: [None; 4],
            },
            Case {
                name: "no existing pods, the incoming pod does not match itself",
                nodes: zone_nodes(),
                existing: vec![],
                pod_labels: &[("bar", "")],
                constraints: vec![hard(1, "zone")],
                mismatched: &[],
                want: [None; 4],
            },
            Case {
                name: "pods in another namespace do not count",
                nodes: zone_nodes(),
                existing: bound(&[("node-a", 2)])
                    .into_iter()
                    .map(|mut p| {
                        p.namespace = "other".into();
                        p
                    })
                    .collect(),
                pod_labels: &[("foo", "")],
                constraints: vec![hard(1, "zone")],
                mismatched: &[],
                want: [None; 4],
            },
            Case {
                name: "pods spread across zones as 3/3: every node fits",
                nodes: zone_nodes(),
                existing: bound(&[("node-a", 1), ("node-b", 2), ("node-x", 2), ("node-y", 1)]),
                pod_labels: &[("foo", "")],
                constraints: vec![hard(1, "zone")],
                mismatched: &[],
                want: [None; 4],
            },
            Case {
                name: "pods spread across zones as 1/2, node-b without the zone label",
                nodes: zone_b_missing(),
                existing: bound(&[("node-a", 1), ("node-b", 1), ("node-x", 1), ("node-y", 1)]),
                pod_labels: &[("foo", "")],
                constraints: vec![hard(1, "zone")],
                mismatched: &[],
                want: [None, Some(MissingLabel), Some(Skew), Some(Skew)],
            },
            Case {
                name: "pods spread across nodes as 2/1/0/3: only node-x fits",
                nodes: zone_nodes(),
                existing: bound(&[("node-a", 2), ("node-b", 1), ("node-y", 3)]),
                pod_labels: &[("foo", "")],
                constraints: vec![hard(1, HOST)],
                mismatched: &[],
                want: [Some(Skew), Some(Skew), None, Some(Skew)],
            },
            Case {
                name: "pods spread across nodes as 2/1/0/3, maxSkew 2: node-b and node-x fit",
                nodes: zone_nodes(),
                existing: bound(&[("node-a", 2), ("node-b", 1), ("node-y", 3)]),
                pod_labels: &[("foo", "")],
                constraints: vec![hard(2, HOST)],
                mismatched: &[],
                want: [Some(Skew), None, None, Some(Skew)],
            },
            Case {
                name: "nodes the pod's node affinity excludes do not count (nodeAffinityPolicy Honor)",
                nodes: zone_nodes(),
                existing: bound(&[("node-a", 2), ("node-b", 1), ("node-y", 3)]),
                pod_labels: &[("foo", "")],
                constraints: vec![hard(1, HOST)],
                mismatched: &[1, 2],
                want: [None, None, None, Some(Skew)],
            },
            Case {
                name: "fewer domains than minDomains: the global minimum is 0",
                nodes: zone_nodes(),
                existing: bound(&[("node-a", 1), ("node-x", 1)]),
                pod_labels: &[("foo", "")],
                constraints: vec![SpreadConstraint {
                    min_domains: 3,
                    ..hard(1, "zone")
                }],
                mismatched: &[],
                want: [Some(Skew); 4],
            },
            Case {
                name: "two constraints: zone 3/3 fits everywhere, hostname 2/1/0/3 only node-x",
                nodes: zone_nodes(),
                existing: bound(&[("node-a", 2), ("node-b", 1), ("node-y", 3)]),
                pod_labels: &[("foo", "")],
                constraints: vec![hard(1, "zone"), hard(1, HOST)],
                mismatched: &[],
                want: [Some(Skew), Some(Skew), None, Some(Skew)],
            },
            Case {
                // common.go's countPodsMatchSelector: `if selector.Empty() { return 0 }`; the
                // incoming pod matches itself (1 + 0 − 0 ≤ 1 everywhere).
                name: "labelSelector {} counts no pod",
                nodes: zone_nodes(),
                existing: bound(&[("node-a", 3), ("node-x", 0)]),
                pod_labels: &[("foo", "")],
                constraints: vec![SpreadConstraint {
                    selector: Some(LabelSelector { requirements: vec![] }),
                    ..hard(1, "zone")
                }],
                mismatched: &[],
                want: [None; 4],
            },
            Case {
                // A nil selector is labels.Nothing(): it counts no pod, not even the incoming one.
                name: "no labelSelector counts no pod",
                nodes: zone_nodes(),
                existing: bound(&[("node-a", 3)]),
                pod_labels: &[("foo", "")],
                constraints: vec![SpreadConstraint {
                    selector: None,
                    ..hard(1, "zone")
                }],
                mismatched: &[],
                want: [None; 4],
            },
            Case {
                // matchLabelKeys merged into {} make it a selector like any other.
                name: "labelSelector {} with matchLabelKeys counts the pods with the pod's values",
                nodes: zone_nodes(),
                existing: bound(&[("node-a", 3)]),
                pod_labels: &[("foo", "")],
                constraints: vec![SpreadConstraint {
                    selector: Some(LabelSelector { requirements: vec![] }),
                    match_label_keys: vec!["foo".into()],
                    ..hard(1, "zone")
                }],
                mismatched: &[],
                want: [Some(Skew), Some(Skew), None, None],
            },
        ];
        for c in cases {
            let snap = Snapshot::build(c.nodes, c.existing).unwrap();
            let placed = Placed::default();
            let existing = Existing {
                snapshot: &snap,
                placed: &placed,
            };
            let pod = PodSpec {
                spread_constraints: c.constraints,
                ..labelled_pod("p", c.pod_labels)
            };
            let statics = |i: usize| (c.mismatched.contains(&i), false);
            let filter = SpreadFilter::new(&existing, &pod, &PodTopologySpreadArgs::default(), &statics)
                .expect("the pod has DoNotSchedule constraints");
            let got: Vec<Option<Violation>> = (0..4).map(|i| filter.check(i)).collect();
            assert_eq!(got, c.want, "{}", c.name);
        }
    }
}
