//! What InterPodAffinity and PodTopologySpread share: the existing pods (the snapshot's and those
//! placed earlier in a batch) and counts per topology domain.

use std::sync::Arc;

use super::model::{LabelSelector, Labels, PodAffinityTerms, PodSpec};
use super::snapshot::{Snapshot, Topology};

/// An existing pod as the topology plugins see it.
#[derive(Debug, Clone, Copy)]
pub struct PodRef<'a> {
    /// Index of its node in [`Snapshot::nodes`].
    pub node: usize,
    /// metadata.namespace.
    pub namespace: &'a str,
    /// metadata.labels.
    pub labels: &'a Labels,
    /// Pod affinity terms, if any.
    pub affinity: Option<&'a PodAffinityTerms>,
    /// Pod anti-affinity terms, if any.
    pub anti_affinity: Option<&'a PodAffinityTerms>,
    /// metadata.deletionTimestamp is set. InterPodAffinity counts such a pod like any other;
    /// PodTopologySpread skips it (kube-scheduler's `countPodsMatchSelector`).
    pub terminating: bool,
}

/// The pods a batch has placed so far, as (node index, pod).
#[derive(Debug, Default)]
pub struct Placed<'p> {
    pods: Vec<(usize, &'p PodSpec)>,
    /// Some placed pod has pod affinity or anti-affinity terms.
    affinity: bool,
    /// The claims the placed pods use and the volumes chosen for them.
    pub(crate) volumes: super::volumes::BatchVolumes,
    /// The ResourceClaims the placed pods had allocated, and their devices.
    pub(crate) devices: super::plugins::dynamicresources::BatchDevices,
}

impl<'p> Placed<'p> {
    /// Records a placement.
    pub fn push(&mut self, node: usize, pod: &'p PodSpec) {
        self.affinity |= pod.has_pod_affinity();
        self.pods.push((node, pod));
    }
}

/// The pods already on nodes when a pod is evaluated: the snapshot's bound pods and the pods of
/// the batch placed before it.
#[derive(Clone, Copy)]
pub struct Existing<'a> {
    /// The snapshot.
    pub snapshot: &'a Snapshot,
    /// Pods placed earlier in the batch.
    pub placed: &'a Placed<'a>,
}

fn placed_ref<'a>(node: usize, p: &'a PodSpec) -> PodRef<'a> {
    PodRef {
        node,
        namespace: &p.namespace,
        labels: &p.labels,
        affinity: (!p.pod_affinity.is_empty()).then_some(&p.pod_affinity),
        anti_affinity: (!p.pod_anti_affinity.is_empty()).then_some(&p.pod_anti_affinity),
        terminating: p.terminating,
    }
}

impl<'a> Existing<'a> {
    /// Whether some existing pod has pod affinity or anti-affinity terms.
    pub fn any_affinity(&self) -> bool {
        self.snapshot.has_affinity_pods() || self.placed.affinity
    }

    /// Calls `f` for every existing pod on a known node that has affinity or anti-affinity terms
    /// (stopping early once the call has ended, [`super::cancel`]).
    pub fn with_affinity(&self, mut f: impl FnMut(PodRef<'_>)) {
        for (k, pod) in self.snapshot.affinity_pods().enumerate() {
            if super::cancel::requested_at(k) {
                return;
            }
            let Some(node) = self.snapshot.node_index(&pod.node_name) else {
                continue;
            };
            let Some(terms) = pod.affinity.as_deref() else {
                continue;
            };
            f(PodRef {
                node,
                namespace: &pod.namespace,
                labels: &pod.labels,
                affinity: (!terms.0.is_empty()).then_some(&terms.0),
                anti_affinity: (!terms.1.is_empty()).then_some(&terms.1),
                terminating: pod.terminating,
            });
        }
        for (node, p) in &self.placed.pods {
            if p.has_pod_affinity() {
                f(placed_ref(*node, p));
            }
        }
    }

    /// Calls `f` for every existing pod whose labels match `selector` (none for `None`; stopping
    /// early once the call has ended, [`super::cancel`]).
    pub fn matching(&self, selector: Option<&LabelSelector>, mut f: impl FnMut(PodRef<'_>)) {
        let Some(selector) = selector else {
            return;
        };
        let index = self.snapshot.pod_index();
        for (k, at) in index.candidates(selector).into_iter().enumerate() {
            if super::cancel::requested_at(k) {
                return;
            }
            let (node, pod) = &index.pods[at as usize];
            if selector.matches(&pod.labels) {
                let terms = pod.affinity.as_deref();
                f(PodRef {
                    node: *node as usize,
                    namespace: &pod.namespace,
                    labels: &pod.labels,
                    affinity: terms.map(|t| &t.0).filter(|t| !t.is_empty()),
                    anti_affinity: terms.map(|t| &t.1).filter(|t| !t.is_empty()),
                    terminating: pod.terminating,
                });
            }
        }
        for (node, p) in &self.placed.pods {
            if selector.matches(&p.labels) {
                f(placed_ref(*node, p));
            }
        }
    }
}

/// Counts per (topology key, value) pair, as kube-scheduler's `topologyToMatchedTermCount`.
#[derive(Debug, Default, Clone)]
pub struct DomainCounts {
    keys: Vec<(String, Arc<Topology>, Vec<i64>)>,
}

impl DomainCounts {
    /// The slot of a topology key, added on first use.
    pub fn slot(&mut self, snapshot: &Snapshot, key: &str) -> usize {
        if let Some(i) = self.keys.iter().position(|(k, _, _)| k == key) {
            return i;
        }
        let topo = snapshot.topology(key);
        let counts = vec![0; topo.values.len()];
        self.keys.push((key.to_string(), topo, counts));
        self.keys.len() - 1
    }

    /// Adds `value` to the pair of the node's value of the slot's key (nothing when it lacks it).
    pub fn add(&mut self, slot: usize, node: usize, value: i64) {
        let (_, topo, counts) = &mut self.keys[slot];
        let d = topo.node_domain[node];
        if d != Topology::NONE {
            counts[d as usize] += value;
        }
    }

    /// The count of the node's pair for the slot's key; `None` when the node lacks the key.
    pub fn get(&self, slot: usize, node: usize) -> Option<i64> {
        let (_, topo, counts) = &self.keys[slot];
        let d = topo.node_domain[node];
        (d != Topology::NONE).then(|| counts[d as usize])
    }

    /// True when every pair counts zero (kube-scheduler's map would be empty).
    pub fn all_zero(&self) -> bool {
        self.keys.iter().all(|(_, _, c)| c.iter().all(|x| *x == 0))
    }

    /// Whether any pair of the node counts more than zero.
    pub fn any_positive(&self, node: usize) -> bool {
        (0..self.keys.len()).any(|s| self.get(s, node).is_some_and(|c| c > 0))
    }

    /// The sum over keys of the node's pairs.
    pub fn sum(&self, node: usize) -> i64 {
        (0..self.keys.len()).filter_map(|s| self.get(s, node)).sum()
    }
}
