//! InterPodAffinity's PreScore, Score and NormalizeScore (kube-scheduler's
//! `interpodaffinity/scoring.go`): preferred terms of the incoming pod, existing pods' required
//! (hardPodAffinityWeight) and preferred terms, summed per topology domain, then min-max
//! normalized.

use super::{namespace_labels, own_term_matches, their_term_matches};
use crate::engine::model::{PodAffinityTerm, PodSpec};
use crate::engine::plugins::MAX_NODE_SCORE;
use crate::engine::policy::InterPodAffinityArgs;
use crate::engine::topology::{DomainCounts, Existing};

/// InterPodAffinity's PreScore: the score of each topology pair; `None` when every node scores 0.
pub fn score_state(existing: &Existing<'_>, pod: &PodSpec, args: &InterPodAffinityArgs) -> Option<DomainCounts> {
    let snapshot = existing.snapshot;
    let has_constraints = !pod.pod_affinity.preferred.is_empty() || !pod.pod_anti_affinity.preferred.is_empty();
    if args.ignore_preferred_terms_of_existing_pods && !has_constraints {
        return None;
    }
    if !has_constraints && !existing.any_affinity() {
        return None;
    }
    let mut scores = DomainCounts::default();
    // The incoming pod's preferred terms against every existing pod.
    for (terms, sign) in [(&pod.pod_affinity.preferred, 1), (&pod.pod_anti_affinity.preferred, -1)] {
        for wt in terms {
            let slot = scores.slot(snapshot, &wt.term.topology_key);
            existing.matching(wt.term.selector.as_ref(), |other| {
                if own_term_matches(existing, pod, &wt.term, &other) {
                    scores.add(slot, other.node, sign * wt.weight);
                }
            });
        }
    }
    // Existing pods' terms against the incoming pod.
    let ns_labels = namespace_labels(existing, pod);
    let hard = args.hard_pod_affinity_weight;
    existing.with_affinity(|other| {
        let mut add = |term: &PodAffinityTerm, weight: i64| {
            if weight != 0 && their_term_matches(term, &other, pod, ns_labels) {
                let slot = scores.slot(snapshot, &term.topology_key);
                scores.add(slot, other.node, weight);
            }
        };
        if let Some(a) = other.affinity {
            if hard > 0 {
                for t in &a.required {
                    add(t, hard);
                }
            }
            for wt in &a.preferred {
                add(&wt.term, wt.weight);
            }
        }
        if let Some(a) = other.anti_affinity {
            for wt in &a.preferred {
                add(&wt.term, -wt.weight);
            }
        }
    });
    (!scores.all_zero()).then_some(scores)
}

/// NormalizeScore: `100 × (score − min) / (max − min)` in floating point, truncated; all 0 when
/// every score is equal.
pub fn normalize(raw: i64, min: i64, max: i64) -> i64 {
    let diff = max - min;
    if diff > 0 {
        (MAX_NODE_SCORE as f64 * ((raw - min) as f64 / diff as f64)) as i64
    } else {
        0
    }
}

impl crate::engine::plugins::contract::Score for super::InterPodAffinity {
    /// The pod's PreScore state, [`score_state`] (`None`: every node scores 0).
    type In<'a> = Option<&'a DomainCounts>;
    #[inline(always)]
    fn score(state: Option<&DomainCounts>, node: &crate::engine::snapshot::NodeView<'_>) -> i64 {
        state.map_or(0, |s| s.sum(node.index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::{LabelSelector, PodAffinityTerms, WeightedPodAffinityTerm};
    use crate::engine::plugins::testing::{exists, is_in, labelled_pod, labelled_pod_on as on, zone_nodes};
    use crate::engine::snapshot::Snapshot;
    use crate::engine::topology::Placed;

    fn term(selector: LabelSelector, key: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            selector: Some(selector),
            topology_key: key.into(),
            ..Default::default()
        }
    }

    fn preferred(weight: i64, t: PodAffinityTerm) -> PodAffinityTerms {
        PodAffinityTerms {
            required: vec![],
            preferred: vec![WeightedPodAffinityTerm { weight, term: t }],
        }
    }

    /// `scoring_test.go`'s `TestPreferredAffinity` in our words: the pods on the cluster, the
    /// incoming pod, then each node's raw score (PreScore and Score, before normalization): the
    /// weights of the terms that match, summed over the node's topology pairs.
    #[test]
    fn raw_score_table() {
        const SCAN: (&str, &str) = ("service", "securityscan");
        let scan = || is_in("service", &["securityscan"]);
        let none = PodAffinityTerms::default;
        struct Case {
            name: &'static str,
            existing: Vec<PodSpec>,
            pod: PodSpec,
            want: [i64; 4],
        }
        let with = |labels: &[(&str, &str)], affinity: PodAffinityTerms, anti: PodAffinityTerms| PodSpec {
            pod_affinity: affinity,
            pod_anti_affinity: anti,
            ..labelled_pod("p", labels)
        };
        let cases = [
            Case {
                name: "no preferred terms, no existing pod with terms",
                existing: vec![on("node-a", "s1", &[SCAN])],
                pod: with(&[], none(), none()),
                want: [0; 4],
            },
            Case {
                name: "preferred affinity to a pod in zone1 scores zone1 its weight",
                existing: vec![on("node-a", "s1", &[SCAN])],
                pod: with(&[], preferred(5, term(scan(), "zone")), none()),
                want: [5, 5, 0, 0],
            },
            Case {
                name: "two matching pods in a zone count twice",
                existing: vec![on("node-x", "s1", &[SCAN]), on("node-y", "s2", &[SCAN])],
                pod: with(&[], preferred(5, term(scan(), "zone")), none()),
                want: [0, 0, 10, 10],
            },
            Case {
                name: "preferred anti-affinity to a pod in zone2 subtracts its weight there",
                existing: vec![on("node-y", "s1", &[SCAN])],
                pod: with(&[], none(), preferred(3, term(scan(), "zone"))),
                want: [0, 0, -3, -3],
            },
            Case {
                name: "affinity on zone and anti-affinity on hostname add",
                existing: vec![on("node-a", "s1", &[SCAN]), on("node-x", "b1", &[("service", "b")])],
                pod: with(
                    &[],
                    preferred(5, term(scan(), "zone")),
                    preferred(2, term(is_in("service", &["b"]), "kubernetes.io/hostname")),
                ),
                want: [5, 5, -2, 0],
            },
            Case {
                name: "an existing pod's required affinity counts hardPodAffinityWeight",
                existing: vec![PodSpec {
                    pod_affinity: PodAffinityTerms {
                        required: vec![term(exists("foo"), "zone")],
                        preferred: vec![],
                    },
                    ..on("node-y", "e1", &[])
                }],
                pod: with(&[("foo", "")], none(), none()),
                want: [0, 0, 1, 1],
            },
            Case {
                name: "an existing pod's preferred anti-affinity subtracts its weight",
                existing: vec![PodSpec {
                    pod_anti_affinity: preferred(4, term(exists("foo"), "kubernetes.io/hostname")),
                    ..on("node-a", "e1", &[])
                }],
                pod: with(&[("foo", "")], none(), none()),
                want: [-4, 0, 0, 0],
            },
        ];
        for c in cases {
            let snap = Snapshot::build(zone_nodes(), c.existing).unwrap();
            let placed = Placed::default();
            let existing = Existing {
                snapshot: &snap,
                placed: &placed,
            };
            let got: Vec<i64> = match score_state(&existing, &c.pod, &InterPodAffinityArgs::default()) {
                Some(counts) => (0..4).map(|i| counts.sum(i)).collect(),
                None => vec![0; 4],
            };
            assert_eq!(got, c.want, "{}", c.name);
        }
    }

    /// `scoring_test.go`'s NormalizeScore: (raw, min, max) to `100 × (raw − min) / (max − min)`
    /// truncated, every node 0 when all scores are equal. (The cycle's tests,
    /// `topology_tests.rs`, run PreFilter, Filter and Score on snapshots.)
    #[test]
    fn normalize_table() {
        let cases = [
            ("all equal", 3, 3, 3, 0),
            ("the lowest", 0, 0, 10, 0),
            ("the highest", 10, 0, 10, 100),
            ("half way", 5, 0, 10, 50),
            ("negative scores", -5, -10, 10, 25),
            ("a third, truncated", 1, 0, 3, 33),
        ];
        for (name, raw, min, max, want) in cases {
            assert_eq!(normalize(raw, min, max), want, "{name}");
        }
    }
}
