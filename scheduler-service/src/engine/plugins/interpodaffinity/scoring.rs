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

#[cfg(test)]
mod tests {
    use super::*;

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
