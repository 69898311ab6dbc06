//! What the fast paths keep in an [`Evaluator`](crate::engine::framework::Evaluator) from one
//! pod to the next ([`FastPathState`]): buffers, switches tests turn off to compare with the
//! general pass, and what the plain pass's rule columns carry across batches. The general pass
//! reads none of it but `image_sums` (ImageLocality's score) and `class_replay` (the reasons
//! pass).

use std::collections::HashMap;
use std::sync::Arc;

use super::columns::Kernel;
use super::image_sums::ImageSums;
use super::rule_columns::RuleColumns;
use crate::engine::parallel;
use crate::engine::rules::{RuleOutcome, SnapshotRules};

/// The evaluator's fast-path state, each field with the fast path that reads it.
pub(in crate::engine) struct FastPathState {
    /// Per node, the sum of the current pod's image sizes there, each scaled by its spread
    /// (kept per set of images for the pods to come): ImageLocality's score in the general pass
    /// (`Evaluator::eval_node`) and the plain pass's kernel ([`super::image_sums`]).
    pub(in crate::engine) image_sums: ImageSums,
    /// Whether Schedule re-scores only the node that changed for a pod identical to the one
    /// before (`engine/cycle.rs`; off under a policy with rules, which may read any field of the
    /// pod, its name included).
    pub(in crate::engine) reuse: bool,
    /// Whether Schedule may take the plain pass ([`super::plain`]; tests turn it off to compare
    /// with the general one).
    pub(in crate::engine) allow_plain: bool,
    /// Whether the reasons pass answers a class's nodes from its first one where the class alone
    /// rejects them ([`super::class_replay`]); tests turn it off to compare with every node
    /// filtered.
    pub(in crate::engine) class_replay: bool,
    /// The plain pass's vector kernel ([`super::columns`]), `None` on a CPU without one (and
    /// when tests turn it off).
    pub(in crate::engine) kernel: Option<Kernel>,
    /// Nodes from which Schedule's plain pass splits a pod's nodes in two halves run on two
    /// cores ([`crate::engine::parallel`]): [`parallel::MIN_SPLIT_NODES`] with two threads,
    /// never with one (tests lower it to compare split and whole passes).
    pub(in crate::engine) split_from: usize,
    /// Whether the plain pass is split while other calls evaluate too (`parallel::alone`
    /// false); tests set it so that running alongside other tests does not change what they
    /// compare.
    pub(in crate::engine) split_when_busy: bool,
    /// Per node class, the best node so far of the plain pass's `Evaluator::evaluate_best`
    /// (kept for its buffer).
    pub(in crate::engine) class_best: Vec<ClassBest>,
    /// Per node class, the part of that node (the same pass; kept for its buffer).
    pub(in crate::engine) class_bars: Vec<i64>,
    /// `class_best` and `class_bars` of the second half of a split plain pass (kept for their
    /// buffers).
    pub(in crate::engine) second_best: (Vec<ClassBest>, Vec<i64>),
    /// What the snapshot keeps of the policy's rules (the pod-free node rules' outcomes on its
    /// nodes among them: see [`SnapshotRules`]), for the plain pass's rule columns; `None`
    /// without rules.
    pub(in crate::engine) node_rules: Option<Arc<SnapshotRules>>,
    /// The same on the nodes a batch changed, by node and rule, under the usage's stamp (the
    /// plain pass's rule columns).
    pub(in crate::engine) changed_rules: HashMap<(u32, u32), (u64, RuleOutcome)>,
    /// The pod-free node rules' outcomes by column, as the last batch left them
    /// ([`super::rule_columns`], built by `Evaluator::rule_columns`).
    pub(in crate::engine) rule_cols: Option<RuleColumns>,
}

impl FastPathState {
    /// Every fast path open (the kernel where the CPU has one, the split with two threads);
    /// `node_rules` what the snapshot keeps of the policy's rules; `reuse` as given.
    pub(in crate::engine) fn new(node_rules: Option<Arc<SnapshotRules>>, reuse: bool) -> Self {
        Self {
            image_sums: ImageSums::new(),
            reuse,
            allow_plain: true,
            class_replay: true,
            kernel: Kernel::detect(),
            split_from: if parallel::threads() >= 2 {
                parallel::MIN_SPLIT_NODES
            } else {
                usize::MAX
            },
            split_when_busy: false,
            class_best: Vec::new(),
            class_bars: Vec::new(),
            second_best: (Vec::new(), Vec::new()),
            node_rules,
            changed_rules: HashMap::new(),
            rule_cols: None,
        }
    }
}

/// The best node of one class so far in `Evaluator::evaluate_best` (its per-node part is the
/// class's entry in `KeepBest::bars`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClassBest {
    /// Its tie-break key (see `PodPlan::tie_break`), once a node of equal part needed it: most
    /// nodes that reach the bar pass it, and their keys are never compared.
    pub(in crate::engine) tie: Option<u64>,
    /// Its index, `u32::MAX` while the class has no feasible node.
    pub(in crate::engine) index: u32,
}

impl ClassBest {
    /// No feasible node yet: any node replaces it (its bar is `i64::MIN`, no part is below).
    pub(crate) const NONE: Self = Self {
        tie: None,
        index: u32::MAX,
    };
}
