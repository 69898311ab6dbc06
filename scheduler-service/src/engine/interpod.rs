//! InterPodAffinity as kube-scheduler 1.34 implements it
//! (`pkg/scheduler/framework/plugins/interpodaffinity`).
//!
//! Filter: the incoming pod's required affinity (with the rule that lets the first pod of a group
//! that matches its own terms land when no pod matches them yet), its required anti-affinity, and
//! the required anti-affinity of existing pods against it. Score: the incoming pod's preferred
//! terms, existing pods' required affinity terms (hardPodAffinityWeight) and preferred terms,
//! summed per topology domain, then min-max normalized.

use super::model::{Labels, PodAffinityTerm, PodSpec};
use super::policy::InterPodAffinityArgs;
use super::topology::{DomainCounts, Existing, PodRef};

/// kube-scheduler's `ErrReasonAffinityRulesNotMatch`.
pub const AFFINITY_REASON: &str = "node(s) didn't match pod affinity rules";
/// kube-scheduler's `ErrReasonAntiAffinityRulesNotMatch`.
pub const ANTI_AFFINITY_REASON: &str = "node(s) didn't match pod anti-affinity rules";
/// kube-scheduler's `ErrReasonExistingAntiAffinityRulesNotMatch`.
pub const EXISTING_ANTI_AFFINITY_REASON: &str = "node(s) didn't satisfy existing pods anti-affinity rules";

/// Which InterPodAffinity rule rejected a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Violation {
    /// The incoming pod's required affinity.
    Affinity,
    /// The incoming pod's required anti-affinity.
    AntiAffinity,
    /// An existing pod's required anti-affinity.
    ExistingAntiAffinity,
}

static NO_LABELS: std::sync::LazyLock<Labels> = std::sync::LazyLock::new(Labels::new);

/// Whether an incoming pod's term matches an existing pod. The term's namespace selector is
/// resolved against the namespaces the snapshot knows (kube-scheduler merges it into the
/// namespace list from its namespace informer).
fn own_term_matches(existing: &Existing<'_>, owner: &PodSpec, term: &PodAffinityTerm, other: &PodRef<'_>) -> bool {
    term.matches(
        &owner.namespace,
        other.namespace,
        other.labels,
        existing.snapshot.namespace_labels(other.namespace),
    )
}

/// Whether an existing pod's term matches the incoming pod, whose namespace has `ns_labels`.
fn their_term_matches(term: &PodAffinityTerm, owner: &PodRef<'_>, pod: &PodSpec, ns_labels: &Labels) -> bool {
    term.matches(owner.namespace, &pod.namespace, &pod.labels, Some(ns_labels))
}

/// The incoming pod's namespace labels, empty when unknown (kube-scheduler's
/// `GetNamespaceLabelsSnapshot`).
fn namespace_labels<'a>(existing: &Existing<'a>, pod: &PodSpec) -> &'a Labels {
    existing.snapshot.namespace_labels(&pod.namespace).unwrap_or(&NO_LABELS)
}

/// InterPodAffinity's PreFilter state for one pod.
#[derive(Debug, Clone)]
pub struct InterPodFilter {
    affinity: DomainCounts,
    affinity_slots: Vec<usize>,
    /// The pod matches all its own required affinity terms.
    self_match: bool,
    anti: DomainCounts,
    anti_slots: Vec<usize>,
    existing_anti: DomainCounts,
}

impl InterPodFilter {
    /// PreFilter; `None` when the plugin has nothing to check (kube-scheduler's Skip).
    pub fn new(existing: &Existing<'_>, pod: &PodSpec) -> Option<Self> {
        let snapshot = existing.snapshot;
        let mut existing_anti = DomainCounts::default();
        if existing.any_affinity() {
            let ns_labels = namespace_labels(existing, pod);
            existing.with_affinity(|other| {
                for term in other.anti_affinity.map(|t| t.required.as_slice()).unwrap_or(&[]) {
                    if their_term_matches(term, &other, pod, ns_labels) {
                        let slot = existing_anti.slot(snapshot, &term.topology_key);
                        existing_anti.add(slot, other.node, 1);
                    }
                }
            });
        }
        let required = &pod.pod_affinity.required;
        let required_anti = &pod.pod_anti_affinity.required;
        if existing_anti.all_zero() && required.is_empty() && required_anti.is_empty() {
            return None;
        }
        let mut affinity = DomainCounts::default();
        let affinity_slots: Vec<usize> = required
            .iter()
            .map(|t| affinity.slot(snapshot, &t.topology_key))
            .collect();
        if let Some(first) = required.first() {
            // Only pods matching the first term can match all of them.
            existing.matching(first.selector.as_ref(), |other| {
                if required.iter().all(|t| own_term_matches(existing, pod, t, &other)) {
                    for &slot in &affinity_slots {
                        affinity.add(slot, other.node, 1);
                    }
                }
            });
        }
        let mut anti = DomainCounts::default();
        let anti_slots: Vec<usize> = required_anti
            .iter()
            .map(|t| anti.slot(snapshot, &t.topology_key))
            .collect();
        for (term, &slot) in required_anti.iter().zip(&anti_slots) {
            existing.matching(term.selector.as_ref(), |other| {
                if own_term_matches(existing, pod, term, &other) {
                    anti.add(slot, other.node, 1);
                }
            });
        }
        let me = PodRef {
            node: 0,
            namespace: &pod.namespace,
            labels: &pod.labels,
            affinity: None,
            anti_affinity: None,
            terminating: pod.terminating,
        };
        let self_match = required.iter().all(|t| own_term_matches(existing, pod, t, &me));
        Some(Self {
            affinity,
            affinity_slots,
            self_match,
            anti,
            anti_slots,
            existing_anti,
        })
    }

    /// kube-scheduler's PreFilterExtensions AddPod (`delta` 1) and RemovePod (−1,
    /// `updateWithPod`): counts `other` in or out of the state for the incoming `pod`, exactly as
    /// [`InterPodFilter::new`] counted each existing pod.
    pub fn update(&mut self, existing: &Existing<'_>, pod: &PodSpec, other: &PodRef<'_>, delta: i64) {
        let snapshot = existing.snapshot;
        let ns_labels = namespace_labels(existing, pod);
        for term in other.anti_affinity.map(|t| t.required.as_slice()).unwrap_or(&[]) {
            if their_term_matches(term, other, pod, ns_labels) {
                let slot = self.existing_anti.slot(snapshot, &term.topology_key);
                self.existing_anti.add(slot, other.node, delta);
            }
        }
        let required = &pod.pod_affinity.required;
        if required.first().is_some_and(|first| {
            first.selector.as_ref().is_some_and(|s| s.matches(other.labels))
                && required.iter().all(|t| own_term_matches(existing, pod, t, other))
        }) {
            for &slot in &self.affinity_slots {
                self.affinity.add(slot, other.node, delta);
            }
        }
        for (term, &slot) in pod.pod_anti_affinity.required.iter().zip(&self.anti_slots) {
            if term.selector.as_ref().is_some_and(|s| s.matches(other.labels))
                && own_term_matches(existing, pod, term, other)
            {
                self.anti.add(slot, other.node, delta);
            }
        }
    }

    /// Filter: the first rule the node breaks, in kube-scheduler's order.
    pub fn check(&self, node: usize) -> Option<Violation> {
        let mut pods_exist = true;
        for &slot in &self.affinity_slots {
            match self.affinity.get(slot, node) {
                None => return Some(Violation::Affinity),
                Some(c) if c <= 0 => pods_exist = false,
                Some(_) => {}
            }
        }
        // The first pod of a group with affinity to itself may land where the keys exist.
        let first_of_group = self.affinity.all_zero() && self.self_match;
        if !(pods_exist || first_of_group) {
            return Some(Violation::Affinity);
        }
        if self
            .anti_slots
            .iter()
            .any(|&slot| self.anti.get(slot, node).is_some_and(|c| c > 0))
        {
            return Some(Violation::AntiAffinity);
        }
        if self.existing_anti.any_positive(node) {
            return Some(Violation::ExistingAntiAffinity);
        }
        None
    }
}

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
        (super::plugins::MAX_NODE_SCORE as f64 * ((raw - min) as f64 / diff as f64)) as i64
    } else {
        0
    }
}
