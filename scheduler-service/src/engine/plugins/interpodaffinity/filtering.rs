//! InterPodAffinity's PreFilter and Filter (kube-scheduler's `interpodaffinity/filtering.go`):
//! the incoming pod's required affinity and anti-affinity, and existing pods' required
//! anti-affinity against it, with the reasons a node is rejected for.

use super::{namespace_labels, own_term_matches, their_term_matches};
use crate::engine::model::PodSpec;
use crate::engine::topology::{DomainCounts, Existing, PodRef};

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

impl crate::engine::plugins::contract::Filter for super::InterPodAffinity {
    /// The pod's PreFilter state (`None`: the plugin skips the pod).
    type In<'a> = Option<&'a InterPodFilter>;
    type Rejection = Violation;
    #[inline(always)]
    fn filter(
        state: Option<&InterPodFilter>,
        node: &crate::engine::snapshot::NodeView<'_>,
        reject: &mut impl FnMut(Violation),
    ) -> bool {
        crate::engine::plugins::contract::verdict(state.and_then(|f| f.check(node.index)), reject)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::{LabelSelector, PodAffinityTerm, PodAffinityTerms};
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

    fn required(t: PodAffinityTerm) -> PodAffinityTerms {
        PodAffinityTerms {
            required: vec![t],
            preferred: vec![],
        }
    }

    /// `filtering_test.go`'s `TestRequiredAffinitySingleNode` and `TestRequiredAffinityMultipleNodes`
    /// in our words: the pods on the cluster, the incoming pod (its labels and required terms),
    /// then the filter's verdict per node (`None`: passes).
    #[test]
    fn filter_table() {
        use Violation::{Affinity, AntiAffinity, ExistingAntiAffinity};
        const SCAN: (&str, &str) = ("service", "securityscan");
        let scan = || is_in("service", &["securityscan"]);
        let in_other = |mut p: PodSpec| {
            p.namespace = "other".into();
            p
        };
        struct Case {
            name: &'static str,
            existing: Vec<PodSpec>,
            pod: PodSpec,
            want: [Option<Violation>; 4],
        }
        let with = |labels: &[(&str, &str)], affinity: PodAffinityTerms, anti: PodAffinityTerms| PodSpec {
            pod_affinity: affinity,
            pod_anti_affinity: anti,
            ..labelled_pod("p", labels)
        };
        let none = PodAffinityTerms::default;
        let cases = [
            Case {
                name: "no terms, no existing pod with terms",
                existing: vec![on("node-a", "s1", &[SCAN])],
                pod: with(&[], none(), none()),
                want: [None; 4],
            },
            Case {
                name: "required affinity to a pod in zone1 admits zone1",
                existing: vec![on("node-a", "s1", &[SCAN])],
                pod: with(&[], required(term(scan(), "zone")), none()),
                want: [None, None, Some(Affinity), Some(Affinity)],
            },
            Case {
                name: "required affinity on hostname admits that node only",
                existing: vec![on("node-b", "s1", &[SCAN])],
                pod: with(&[], required(term(scan(), "kubernetes.io/hostname")), none()),
                want: [Some(Affinity), None, Some(Affinity), Some(Affinity)],
            },
            Case {
                name: "required affinity matching no pod, the pod not matching itself",
                existing: vec![on("node-a", "o1", &[("service", "other")])],
                pod: with(&[], required(term(scan(), "zone")), none()),
                want: [Some(Affinity); 4],
            },
            Case {
                name: "required affinity matching no pod but the pod itself: the first of its group",
                existing: vec![],
                pod: with(&[SCAN], required(term(scan(), "zone")), none()),
                want: [None; 4],
            },
            Case {
                name: "the first of its group, but no node has the term's topology key",
                existing: vec![],
                pod: with(&[SCAN], required(term(scan(), "rack")), none()),
                want: [Some(Affinity); 4],
            },
            Case {
                name: "pods in another namespace do not match a term without namespaces",
                existing: vec![in_other(on("node-a", "s1", &[SCAN]))],
                pod: with(&[], required(term(scan(), "zone")), none()),
                want: [Some(Affinity); 4],
            },
            Case {
                name: "a term naming the namespace matches the pods there",
                existing: vec![in_other(on("node-a", "s1", &[SCAN]))],
                pod: with(
                    &[],
                    required(PodAffinityTerm {
                        namespaces: vec!["other".into()],
                        ..term(scan(), "zone")
                    }),
                    none(),
                ),
                want: [None, None, Some(Affinity), Some(Affinity)],
            },
            Case {
                name: "required anti-affinity to a pod in zone1 rejects zone1",
                existing: vec![on("node-a", "s1", &[SCAN])],
                pod: with(&[], none(), required(term(scan(), "zone"))),
                want: [Some(AntiAffinity), Some(AntiAffinity), None, None],
            },
            Case {
                name: "an existing pod's required anti-affinity rejects its zone for a matching pod",
                existing: vec![PodSpec {
                    pod_anti_affinity: required(term(exists("foo"), "zone")),
                    ..on("node-x", "e1", &[])
                }],
                pod: with(&[("foo", "")], none(), none()),
                want: [None, None, Some(ExistingAntiAffinity), Some(ExistingAntiAffinity)],
            },
            Case {
                name: "an existing pod's required anti-affinity ignores a pod it does not select",
                existing: vec![PodSpec {
                    pod_anti_affinity: required(term(exists("foo"), "zone")),
                    ..on("node-x", "e1", &[])
                }],
                pod: with(&[("bar", "")], none(), none()),
                want: [None; 4],
            },
        ];
        for c in cases {
            let snap = Snapshot::build(zone_nodes(), c.existing).unwrap();
            let placed = Placed::default();
            let existing = Existing {
                snapshot: &snap,
                placed: &placed,
            };
            let got: Vec<Option<Violation>> = match InterPodFilter::new(&existing, &c.pod) {
                Some(f) => (0..4).map(|i| f.check(i)).collect(),
                None => vec![None; 4],
            };
            assert_eq!(got, c.want, "{}", c.name);
        }
    }
}
