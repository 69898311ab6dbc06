//! The class cache: a pod's static predicates (NodeUnschedulable, TaintToleration, NodeAffinity
//! and their raw scores) per node class, kept per snapshot lineage for every pod that selects and
//! tolerates alike. The snapshot holds the cache of its lineage; the framework fills and reads it.
//!
//! Mirrors `node_unschedulable::rejects`, `taint_toleration::{untolerated, score}` and
//! NodeAffinity's filter and `score` on each node; held to them by
//! `nodes_differing_only_by_hostname_share_a_class_yet_hostname_selection_works` and
//! `a_delta_that_relabels_a_node_moves_it_to_another_class` (`framework_tests.rs`), and the
//! plain/general property tests (`plain_pass_equals_the_general_one`, `accel/plain_tests.rs`),
//! whose general pass evaluates a pod selecting per node without it.

use std::collections::HashMap;
use std::sync::Arc;

use super::class_labels::ClassLabels;
use crate::engine::model::{NodeSpec, PodSpec, PreferredTerm, SelectorTerm, Toleration};

/// The static predicates of one pod on one node (or node class): they depend on labels, taints
/// and cordon only, never on usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(in crate::engine) struct StaticEval {
    /// NodeUnschedulable rejects.
    pub(in crate::engine) cordoned: bool,
    /// TaintToleration rejects.
    pub(in crate::engine) untolerated: bool,
    /// NodeAffinity rejects.
    pub(in crate::engine) mismatched: bool,
    /// NodeAffinity's raw score.
    pub(in crate::engine) affinity_weight: i64,
    /// TaintToleration's raw score.
    pub(in crate::engine) prefer_taints: i64,
    /// Some enabled filter among NodeUnschedulable, TaintToleration and NodeAffinity rejects.
    pub(in crate::engine) rejected: bool,
}

/// Which of the filters that decide by a node's class alone a profile runs: they decide
/// [`StaticEval::rejected`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(in crate::engine) struct StaticFilters {
    /// NodeUnschedulable runs.
    pub(in crate::engine) node_unschedulable: bool,
    /// TaintToleration runs.
    pub(in crate::engine) taint_toleration: bool,
    /// NodeAffinity runs.
    pub(in crate::engine) node_affinity: bool,
}

/// What a pod's static predicates depend on: its node selection and its tolerations.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(in crate::engine) struct StaticKey {
    /// The profile's static filters (`Profile::static_filters`), which [`StaticEval::rejected`]
    /// depends on.
    static_filters: StaticFilters,
    node_selector: Vec<(String, String)>,
    required_affinity: Option<Vec<SelectorTerm>>,
    preferred_affinity: Vec<PreferredTerm>,
    tolerations: Vec<Toleration>,
}

impl StaticKey {
    pub(in crate::engine) fn hash_of(pod: &PodSpec, static_filters: StaticFilters) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        static_filters.hash(&mut h);
        pod.node_selector.hash(&mut h);
        pod.required_affinity.hash(&mut h);
        pod.preferred_affinity.hash(&mut h);
        pod.tolerations.hash(&mut h);
        h.finish()
    }

    pub(in crate::engine) fn is_of(&self, pod: &PodSpec, static_filters: StaticFilters) -> bool {
        self.static_filters == static_filters
            && self.node_selector == pod.node_selector
            && self.required_affinity == pod.required_affinity
            && self.preferred_affinity == pod.preferred_affinity
            && self.tolerations == pod.tolerations
    }

    /// Approximate bytes, inline and heap.
    pub(in crate::engine) fn approx_bytes(&self) -> usize {
        use crate::engine::model::string_bytes;
        let term = |t: &crate::engine::model::SelectorTerm| {
            48 + t
                .match_expressions
                .iter()
                .chain(&t.match_fields)
                .map(crate::engine::model::Requirement::approx_bytes)
                .sum::<usize>()
        };
        std::mem::size_of::<Self>()
            + self
                .node_selector
                .iter()
                .map(|(k, v)| 48 + string_bytes(k) + string_bytes(v))
                .sum::<usize>()
            + self.required_affinity.iter().flatten().map(term).sum::<usize>()
            + self.preferred_affinity.iter().map(|p| 8 + term(&p.term)).sum::<usize>()
            + self
                .tolerations
                .iter()
                .map(|t| std::mem::size_of::<Toleration>() + string_bytes(&t.key) + string_bytes(&t.value))
                .sum::<usize>()
    }

    pub(in crate::engine) fn of(pod: &PodSpec, static_filters: StaticFilters) -> Self {
        Self {
            static_filters,
            node_selector: pod.node_selector.clone(),
            required_affinity: pod.required_affinity.clone(),
            preferred_affinity: pod.preferred_affinity.clone(),
            tolerations: pod.tolerations.clone(),
        }
    }
}

/// The per-class static predicates of the pods evaluated against a lineage of snapshots (one
/// full snapshot and those derived from it by deltas that each extend the latest class list),
/// by what they depend on: pods that differ in requests or identity but select and tolerate alike
/// share them. Node classes are append-only within a lineage, so an entry stays valid; one made
/// before new classes appeared is redone for them all (through the label columns, cheaply).
#[derive(Debug, Default)]
pub struct StaticCache {
    pub(in crate::engine) by_hash: HashMap<u64, (StaticKey, Arc<[StaticEval]>)>,
    /// Approximate bytes of the entries.
    bytes: usize,
    /// The keys of `by_hash`, oldest first: the oldest entry goes when the cache is full.
    order: std::collections::VecDeque<u64>,
    /// Classes of the lineage's latest class list: a delta that adds classes to a snapshot with
    /// fewer (a branch from an older snapshot) starts a lineage of its own.
    classes: usize,
    /// The label columns of the lineage's classes, extended as evaluations meet new classes.
    labels: Arc<ClassLabels>,
}

impl StaticCache {
    /// Entries kept at most (about 9 KB each at 376 classes); the oldest goes beyond. (Starting
    /// over instead freed 4.6 MB at once, under the lock: a 1–2 ms stall on one pod's Rank.)
    pub(in crate::engine) const LIMIT: usize = 512;

    /// Adds (or replaces) an entry, evicting the oldest when the cache is full.
    pub(in crate::engine) fn insert(&mut self, hash: u64, key: StaticKey, evals: Arc<[StaticEval]>) {
        self.bytes += Self::entry_bytes(&key, &evals);
        match self.by_hash.insert(hash, (key, evals)) {
            Some((old_key, old_evals)) => {
                self.bytes = self.bytes.saturating_sub(Self::entry_bytes(&old_key, &old_evals));
            }
            None => {
                self.order.push_back(hash);
                if self.order.len() > Self::LIMIT {
                    if let Some((key, evals)) = self.order.pop_front().and_then(|oldest| self.by_hash.remove(&oldest)) {
                        self.bytes = self.bytes.saturating_sub(Self::entry_bytes(&key, &evals));
                    }
                }
            }
        }
    }

    fn entry_bytes(key: &StaticKey, evals: &[StaticEval]) -> usize {
        96 + key.approx_bytes() + std::mem::size_of_val(evals)
    }

    /// Approximate bytes held: the entries and the lineage's label columns.
    pub(in crate::engine) fn approx_bytes(&self) -> usize {
        self.bytes + self.labels.approx_bytes()
    }

    /// An empty cache, to be shared by the snapshots of a lineage whose class list has `classes` classes.
    pub(in crate::engine) fn shared(classes: usize) -> Arc<std::sync::Mutex<Self>> {
        Arc::new(std::sync::Mutex::new(Self {
            classes,
            ..Self::default()
        }))
    }

    /// The label columns of (at least) these classes of the lineage.
    pub(in crate::engine) fn labels_of(&mut self, classes: &imbl::Vector<Arc<NodeSpec>>) -> Arc<ClassLabels> {
        if self.labels.len() < classes.len() {
            let labels = Arc::make_mut(&mut self.labels);
            let from = labels.len();
            labels.extend(classes.iter().skip(from).map(|c| &**c));
        }
        Arc::clone(&self.labels)
    }

    /// Whether a snapshot with `from` classes, extended to `to`, continues this lineage (its
    /// classes are the latest list); if so the lineage's list is now `to` long.
    pub(in crate::engine) fn extend(&mut self, from: usize, to: usize) -> bool {
        let continues = self.classes == from;
        if continues {
            self.classes = to;
        }
        continues
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full static cache evicts its oldest entry, one per new entry (it used to drop all at once);
    /// replacing an entry evicts nothing.
    #[test]
    fn a_full_static_cache_evicts_its_oldest_entry() {
        let key = |i: usize| StaticKey {
            static_filters: StaticFilters {
                node_unschedulable: true,
                taint_toleration: true,
                node_affinity: true,
            },
            node_selector: vec![(format!("k{i}"), "v".into())],
            required_affinity: None,
            preferred_affinity: Vec::new(),
            tolerations: Vec::new(),
        };
        let evals: Arc<[StaticEval]> = Arc::from(vec![StaticEval::default(); 3]);
        let mut cache = StaticCache::default();
        for i in 0..StaticCache::LIMIT {
            cache.insert(i as u64, key(i), Arc::clone(&evals));
        }
        cache.insert(0, key(0), Arc::clone(&evals));
        assert_eq!(cache.by_hash.len(), StaticCache::LIMIT);
        assert!(cache.by_hash.contains_key(&0), "replacing an entry evicts nothing");
        cache.insert(9_999, key(9_999), Arc::clone(&evals));
        assert_eq!(cache.by_hash.len(), StaticCache::LIMIT);
        assert!(!cache.by_hash.contains_key(&0), "the oldest entry went");
        assert!(cache.by_hash.contains_key(&1) && cache.by_hash.contains_key(&9_999));
    }
}
