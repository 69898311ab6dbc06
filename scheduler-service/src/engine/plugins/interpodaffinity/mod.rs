//! InterPodAffinity as kube-scheduler 1.34 implements it
//! (`pkg/scheduler/framework/plugins/interpodaffinity`: [`filtering`] as `filtering.go`,
//! [`scoring`] as `scoring.go`, and the term matching both use here).
//!
//! Filter: the incoming pod's required affinity (with the rule that lets the first pod of a group
//! that matches its own terms land when no pod matches them yet), its required anti-affinity, and
//! the required anti-affinity of existing pods against it. Score: the incoming pod's preferred
//! terms, existing pods' required affinity terms (hardPodAffinityWeight) and preferred terms,
//! summed per topology domain, then min-max normalized.

pub mod filtering;
pub mod scoring;

use crate::engine::model::{Labels, PodAffinityTerm, PodSpec};
use crate::engine::topology::{Existing, PodRef};

pub(super) static NO_LABELS: std::sync::LazyLock<Labels> = std::sync::LazyLock::new(Labels::new);

/// Whether an incoming pod's term matches an existing pod. The term's namespace selector is
/// resolved against the namespaces the snapshot knows (kube-scheduler merges it into the
/// namespace list from its namespace informer).
pub(super) fn own_term_matches(
    existing: &Existing<'_>,
    owner: &PodSpec,
    term: &PodAffinityTerm,
    other: &PodRef<'_>,
) -> bool {
    term.matches(
        &owner.namespace,
        other.namespace,
        other.labels,
        existing.snapshot.namespace_labels(other.namespace),
    )
}

/// Whether an existing pod's term matches the incoming pod, whose namespace has `ns_labels`.
pub(super) fn their_term_matches(
    term: &PodAffinityTerm,
    owner: &PodRef<'_>,
    pod: &PodSpec,
    ns_labels: &Labels,
) -> bool {
    term.matches(owner.namespace, &pod.namespace, &pod.labels, Some(ns_labels))
}

/// The incoming pod's namespace labels, empty when unknown (kube-scheduler's
/// `GetNamespaceLabelsSnapshot`).
pub(super) fn namespace_labels<'a>(existing: &Existing<'a>, pod: &PodSpec) -> &'a Labels {
    existing.snapshot.namespace_labels(&pod.namespace).unwrap_or(&NO_LABELS)
}

/// The plugin in the framework's contract (Filter in [`filtering`], Score in [`scoring`]).
#[derive(Debug, Clone, Copy)]
pub struct InterPodAffinity;
