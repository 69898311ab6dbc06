//! Class replay: when a pod fits nowhere (Schedule's diagnosis, Rank's reasons), a class whose
//! first node is rejected by a filter that decides by the class alone (NodeUnschedulable,
//! TaintToleration, NodeAffinity, with no filter before it that reads the node) gives its other
//! nodes the same reasons without filtering them.
//!
//! Mirrors filtering node by node (the framework's `RunFilterPlugins` on every node, as
//! `Evaluator::filter_with_reasons` does with replay off); held to it by
//! `reasons_from_the_class_equal_reasons_node_by_node` (`accel/plain_tests.rs`), which compares
//! every answer with it turned off.

use crate::engine::diagnosis::{Reason, Rejections};
use crate::engine::model::PodSpec;
use crate::engine::policy::FilterPlugin;
use crate::engine::pool::pooled_buffer;

pooled_buffer!(
    pub(crate) ClassStates,
    ClassReasons,
    SPARE_CLASS_STATES,
    "[`ClassReplay`]'s state per class."
);

pooled_buffer!(
    pub(crate) ReasonArena,
    Reason,
    SPARE_REASONS,
    "[`ClassReplay`]'s reasons of every class it knows, one run per class."
);

/// What the reasons pass has learned of each class's nodes (index: class), so that a class's
/// nodes are not filtered one by one when the class alone rejects them (see `class_decides`):
/// most nodes a pod fits nowhere on are rejected by their class's taints or affinity.
#[derive(Debug)]
pub(crate) struct ClassReplay {
    /// Per class, what is known of its nodes.
    classes: ClassStates,
    /// The reasons of the classes known, each class's run at its `reasons` range.
    pub(crate) reasons: ReasonArena,
}

impl ClassReplay {
    /// Takes node `i`'s reasons from its class when they are known: counted in bulk by
    /// [`ClassReplay::count`], listed while the list takes more. False when it must be filtered.
    #[inline]
    pub(crate) fn replay(&mut self, class: usize, i: usize, rejections: &mut Rejections<'_>) -> bool {
        let Some(ClassReasons::Known {
            plugin,
            reasons,
            unresolvable,
            more,
        }) = self.classes.get_mut(class)
        else {
            return false;
        };
        *more += 1;
        rejections.unresolvable[i] = *unresolvable;
        if rejections.lists_more(i) {
            for reason in &self.reasons[reasons.start as usize..reasons.end as usize] {
                rejections.list(i, *plugin, reason.clone());
            }
        }
        true
    }

    /// None known yet (its buffers from the thread's spares).
    pub(crate) fn new() -> Self {
        let mut classes = ClassStates::take_spare();
        classes.clear();
        let mut reasons = ReasonArena::take_spare();
        reasons.clear();
        Self { classes, reasons }
    }

    /// Learns from a class's first node filtered: the first filter that rejected it (`None`: it
    /// passed), whose reasons are the arena's from `start` on, `by_class` whether that filter's
    /// verdict is the class's, and whether the node was marked unresolvable.
    #[inline]
    pub(crate) fn learn(
        &mut self,
        class: usize,
        seen: Option<FilterPlugin>,
        start: usize,
        by_class: bool,
        unresolvable: bool,
    ) {
        if self.classes.len() <= class {
            self.classes.resize(class + 1, ClassReasons::Unknown);
        }
        let known = match (seen, &self.classes[class]) {
            (Some(plugin), ClassReasons::Unknown) if by_class => ClassReasons::Known {
                plugin,
                reasons: start as u32..self.reasons.len() as u32,
                unresolvable,
                more: 0,
            },
            (_, ClassReasons::Unknown) => ClassReasons::NodeByNode,
            _ => return self.reasons.truncate(start),
        };
        if !matches!(known, ClassReasons::Known { .. }) {
            self.reasons.truncate(start);
        }
        self.classes[class] = known;
    }

    /// Whether the class's nodes after its first are filtered one by one.
    #[inline]
    pub(crate) fn node_by_node(&self, class: usize) -> bool {
        matches!(self.classes.get(class), Some(ClassReasons::NodeByNode))
    }

    /// Counts the reasons of the nodes replayed.
    pub(crate) fn count(self, rejections: &mut Rejections<'_>) {
        for class in self.classes.iter() {
            if let ClassReasons::Known { reasons, more, .. } = class {
                for reason in &self.reasons[reasons.start as usize..reasons.end as usize] {
                    rejections.count(reason, *more);
                }
            }
        }
    }
}

/// What the reasons pass knows of a class's nodes.
#[derive(Debug, Clone)]
pub(crate) enum ClassReasons {
    /// No node of the class filtered yet.
    Unknown,
    /// Every node of the class is rejected by `plugin` with the reasons at `reasons` in
    /// [`ClassReplay::reasons`] (whether evicting pods cannot resolve them: `unresolvable`);
    /// `more` nodes after the first so far.
    Known {
        plugin: FilterPlugin,
        reasons: std::ops::Range<u32>,
        unresolvable: bool,
        more: u32,
    },
    /// Its nodes are filtered one by one.
    NodeByNode,
}

/// Whether a node's rejection by `failed` is its class's: `failed` and every filter before it in
/// `filters` decide by the class's static predicates alone (NodeUnschedulable, TaintToleration,
/// NodeAffinity, with static predicates per class: not `per_node`), or pass every node (NodeName, when the pod
/// names none). Filters stop at the first that fails, so every node of the class fails the same.
#[inline]
pub(crate) fn class_decides(filters: &[FilterPlugin], per_node: bool, pod: &PodSpec, failed: FilterPlugin) -> bool {
    let by_class = |f: FilterPlugin| match f {
        FilterPlugin::NodeUnschedulable | FilterPlugin::TaintToleration | FilterPlugin::NodeAffinity => !per_node,
        FilterPlugin::NodeName => pod.node_name.as_deref().is_none_or(str::is_empty),
        _ => false,
    };
    failed != FilterPlugin::NodeName
        && filters
            .iter()
            .position(|&f| f == failed)
            .is_some_and(|k| filters[..=k].iter().all(|&f| by_class(f)))
}
