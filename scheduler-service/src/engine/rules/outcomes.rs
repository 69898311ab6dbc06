//! What a snapshot keeps of a policy's rules: the outcomes of the rules that do not read the pod,
//! per node, and of the class-level rules, per node class and pod key.

use std::collections::HashMap;
use std::sync::Arc;

use super::evaluate::{CompiledRules, RuleOutcome};
use crate::engine::snapshot::Snapshot;

/// The outcomes, on every node of one snapshot as it stands, of a policy's rules that are
/// evaluated node by node but do not read the pod: the same for every pod, so each is evaluated
/// once per snapshot (on first use), and again only for a node whose usage a batch changed.
#[derive(Debug)]
pub struct NodeRuleValues {
    /// Rules per node: the policy's filter rules, then its score rules.
    width: usize,
    values: Vec<std::sync::OnceLock<RuleOutcome>>,
}

impl NodeRuleValues {
    /// Room for `nodes` nodes and `width` rules each, none evaluated yet.
    pub fn new(nodes: usize, width: usize) -> Self {
        Self {
            width,
            values: (0..nodes * width).map(|_| std::sync::OnceLock::new()).collect(),
        }
    }

    /// Rule `k`'s outcome on node `i`, evaluated by `eval` the first time.
    pub fn get_or_eval(&self, i: usize, k: usize, eval: impl FnOnce() -> RuleOutcome) -> RuleOutcome {
        match self.values.get(i * self.width + k) {
            Some(cell) => cell.get_or_init(eval).clone(),
            None => eval(),
        }
    }

    /// Rule `k`'s outcome on node `i`, if evaluated.
    #[inline]
    pub fn get(&self, i: usize, k: usize) -> Option<&RuleOutcome> {
        self.values.get(i * self.width + k).and_then(std::sync::OnceLock::get)
    }

    /// Bytes this holds (reasons are shared with the compiled rules or short).
    pub fn bytes(&self) -> usize {
        self.values.len() * std::mem::size_of::<std::sync::OnceLock<RuleOutcome>>()
    }
}

/// A class-level rule's outcomes for one pod (or the pods reading alike) per node class of a
/// snapshot, each evaluated on first use.
#[derive(Debug)]
pub struct ClassOutcomes(Vec<std::sync::OnceLock<RuleOutcome>>);

impl ClassOutcomes {
    /// Room for `classes` classes, none evaluated yet.
    pub fn new(classes: usize) -> Self {
        Self((0..classes).map(|_| std::sync::OnceLock::new()).collect())
    }

    /// The outcome on class `class`, evaluated by `eval` the first time.
    pub fn get_or_eval(&self, class: usize, eval: impl FnOnce() -> RuleOutcome) -> RuleOutcome {
        match self.0.get(class) {
            Some(cell) => cell.get_or_init(eval).clone(),
            None => eval(),
        }
    }

    /// The outcome on class `class` if evaluated.
    pub fn get(&self, class: usize) -> Option<&RuleOutcome> {
        self.0.get(class).and_then(std::sync::OnceLock::get)
    }

    /// Bytes this holds.
    pub fn bytes(&self) -> usize {
        self.0.len() * std::mem::size_of::<std::sync::OnceLock<RuleOutcome>>()
    }
}

/// Most pod keys a snapshot keeps class outcomes for, per policy (then it starts over).
pub const MAX_POD_KEYS: usize = 512;

/// What one snapshot keeps of a policy's rules: the pod-free node rules' outcomes per node, and
/// the class-level rules' outcomes per class for each pod key (see [`CompiledRules::pod_key`]).
#[derive(Debug)]
pub struct SnapshotRules {
    /// The pod-free node rules' outcomes.
    pub nodes: NodeRuleValues,
    classes: usize,
    by_key: std::sync::Mutex<HashMap<(u32, String), Arc<ClassOutcomes>>>,
}

/// What `snapshot` keeps of `rules` (see [`SnapshotRules`]), made on first use and kept with the
/// snapshot (its bytes counted with the snapshot's derived parts).
pub(in crate::engine) fn snapshot_rules(snapshot: &Snapshot, rules: &Arc<CompiledRules>) -> Arc<SnapshotRules> {
    snapshot.kept(
        rules,
        |s| SnapshotRules::new(rules, s.nodes().len(), s.classes().len()),
        SnapshotRules::bytes,
    )
}

impl SnapshotRules {
    /// Room for a snapshot of `nodes` nodes and `classes` classes under `rules`.
    pub fn new(rules: &CompiledRules, nodes: usize, classes: usize) -> Self {
        let pod_free = rules.pod_free_per_node();
        Self {
            nodes: NodeRuleValues::new(if pod_free { nodes } else { 0 }, rules.width()),
            classes,
            by_key: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Rule `k`'s outcomes per class for the pods of key `key`, the bytes newly held and the
    /// bytes let go (the kept keys start over past [`MAX_POD_KEYS`]).
    pub fn class_outcomes(&self, k: usize, key: String) -> (Arc<ClassOutcomes>, usize, usize) {
        let mut kept = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        let id = (k as u32, key);
        if let Some(o) = kept.get(&id) {
            return (Arc::clone(o), 0, 0);
        }
        let mut freed = 0;
        if kept.len() >= MAX_POD_KEYS {
            freed = kept.iter().map(|((_, key), o)| o.bytes() + key.len()).sum();
            kept.clear();
        }
        let outcomes = Arc::new(ClassOutcomes::new(self.classes));
        let bytes = outcomes.bytes() + id.1.len();
        kept.insert(id, Arc::clone(&outcomes));
        (outcomes, bytes, freed)
    }

    /// Bytes held: the node outcomes and the class outcomes kept.
    pub fn bytes(&self) -> usize {
        let kept = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        self.nodes.bytes() + kept.iter().map(|((_, key), o)| o.bytes() + key.len()).sum::<usize>()
    }
}
