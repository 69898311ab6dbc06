//! What the plain pass keeps of each feasible node: a [`PlainSink`] gets every feasible node's
//! raw scores and decides what to keep of it: every candidate ([`KeepAll`]), Rank's totals
//! ([`KeepTotals`]), Schedule's best node ([`KeepBest`], with its probes of the class order),
//! the score rules' extrema ([`RuleExtrema`], [`RuleSink`]).

use std::collections::HashMap;
use std::sync::Arc;

use crate::engine::accel::class_cache::StaticEval;
use crate::engine::accel::columns::{HotColumns, Kernel, BLOCK};
use crate::engine::accel::rule_columns::RuleColumns;
use crate::engine::pool::pooled_buffer;
use crate::engine::rules::{self as cel_rules, CompiledRules, NodeStatic, RuleOutcome, SnapshotRules};
use crate::engine::snapshot::NodeEntry;

use super::state::ClassBest;
use crate::engine::batch_usage::BatchUsage;
use crate::engine::framework::{rule_node_value, Candidate, RuleScaling};
use crate::engine::plan::PodPlan;
use crate::engine::profile::{PlainSlots, MAX_SCORES};

/// The raw per-node scores of one feasible node in the plain pass (0 for a plugin not scored).
#[derive(Debug, Clone, Copy, Default)]
pub(in crate::engine) struct NodeScores {
    /// NodeResourcesFit's weighted cpu and memory score.
    pub(in crate::engine) fit: i64,
    /// BalancedAllocation's score.
    pub(in crate::engine) balanced: i64,
    /// ImageLocality's score.
    pub(in crate::engine) image: i64,
}

impl NodeScores {
    /// The per-node part of the node's total: the scores weighed by `[fit, balanced, image]`.
    #[inline(always)]
    pub(in crate::engine) fn weighed(&self, [fit, balanced, image]: [i64; 3]) -> i64 {
        self.fit * fit + self.balanced * balanced + self.image * image
    }
}

/// What the plain pass does with each feasible node (see [`Evaluator::plain_pass`]).
pub(in crate::engine) trait PlainSink {
    /// Whether [`PlainSink::bars`] rules nodes out (the pass then checks them first, and counts
    /// the nodes ruled out with [`PlainSink::skip`] instead of handing them over).
    const RULES_OUT: bool = false;

    /// Per class, the per-node part (weighed by [`PlainSink::part_weights`]) a feasible node must
    /// reach to change what the sink keeps; a node below its class's bar stays below it for the
    /// rest of the pass. Covers every class a node may have (see `HotColumns::max_class`).
    fn bars(&self) -> &[i64] {
        &[]
    }

    /// The weights of the fit, balanced and image scores in the part [`PlainSink::bars`] bars.
    fn part_weights(&self) -> [i64; 3] {
        [0; 3]
    }

    /// Counts `n` feasible nodes that [`PlainSink::bars`] ruled out.
    fn skip(&mut self, _n: usize) {}

    /// Whether [`PlainSink::bars`] rule nodes out for this pod ([`PlainSink::RULES_OUT`] says
    /// whether they may).
    fn rules_out(&self) -> bool {
        Self::RULES_OUT
    }

    /// Of the block at `base`, the nodes the sink takes at all: the others are not feasible to
    /// it (nodes a pod-free CEL rule rejects). Every node by default.
    #[inline(always)]
    fn admitted(&self, _base: usize) -> u64 {
        !0
    }

    /// Writes, per node of the block at `base`, an upper bound of what the sink adds to the
    /// node's part beyond the scores [`PlainSink::part_weights`] weighs (see
    /// `RuleColumns::bounds`), for the rule-out; `false` when it adds nothing.
    #[inline(always)]
    fn part_bounds(&self, _base: usize, _out: &mut [f64; BLOCK]) -> bool {
        false
    }

    /// Whether the sink takes a block's feasible nodes as a mask, through [`PlainSink::block`]
    /// instead of [`PlainSink::feasible`] (which still takes the nodes checked one by one).
    const WHOLE_BLOCKS: bool = false;

    /// Takes the `feasible` nodes (bits) of the block at `base` (a [`PlainSink::WHOLE_BLOCKS`]
    /// sink: no scores are worked out for them).
    fn block(&mut self, _base: usize, _feasible: u64) {}

    /// Takes feasible node `i`, its class, the class's static predicates and the node's scores.
    fn feasible(&mut self, i: usize, class: u32, se: &StaticEval, scores: NodeScores);
}

/// NodeAffinity's and TaintToleration's raw scores at their highest over the feasible nodes seen:
/// the plain pass normalizes the class-wide scores with them.
#[derive(Debug, Clone, Copy)]
pub(in crate::engine) struct ClassMaxima {
    pub(super) affinity: i64,
    pub(super) taints: i64,
}

impl ClassMaxima {
    /// No feasible node seen yet.
    pub(super) const NONE: Self = Self {
        affinity: i64::MIN,
        taints: i64::MIN,
    };

    /// Counts a feasible node of a class with these static predicates.
    #[inline(always)]
    pub(super) fn see(&mut self, se: &StaticEval) {
        self.affinity = self.affinity.max(se.affinity_weight);
        self.taints = self.taints.max(se.prefer_taints);
    }
}

/// Keeps every feasible node as a candidate with its raw scores, and the class-wide maxima.
pub(in crate::engine) struct KeepAll {
    pub(super) candidates: Vec<Candidate>,
    pub(super) slots: PlainSlots,
    pub(super) maxima: ClassMaxima,
}

impl PlainSink for KeepAll {
    #[inline(always)]
    fn feasible(&mut self, i: usize, _: u32, se: &StaticEval, scores: NodeScores) {
        // Written in place: a raw array built on the stack and then copied is reloaded wider
        // than it was stored, which stalls store forwarding on every node.
        self.candidates.push(Candidate {
            index: i as u32,
            raw: [0; MAX_SCORES],
            total: 0,
        });
        let Some(Candidate { raw, .. }) = self.candidates.last_mut() else {
            return;
        };
        let slots = self.slots;
        if let Some(slot) = slots.fit {
            raw[slot] = scores.fit;
        }
        if let Some(slot) = slots.balanced {
            raw[slot] = scores.balanced;
        }
        if let Some(slot) = slots.image {
            raw[slot] = scores.image;
        }
        if let Some(slot) = slots.affinity {
            raw[slot] = se.affinity_weight;
        }
        if let Some(slot) = slots.taints {
            raw[slot] = se.prefer_taints;
        }
        self.maxima.see(se);
    }
}

/// A feasible node's index, class and total (Rank's compact candidate).
#[derive(Debug, Clone, Copy)]
pub(in crate::engine) struct Scored {
    pub(in crate::engine) index: u32,
    /// Its class (where the class-wide part of its total is read, without the node's hot row).
    pub(in crate::engine) class: u32,
    pub(in crate::engine) total: i64,
}

/// Keeps every feasible node's index and per-node part of the total, and the class-wide maxima.
pub(in crate::engine) struct KeepTotals {
    pub(super) totals: TotalsBuffer,
    /// The weights of the fit, balanced and image scores.
    pub(super) weights: [i64; 3],
    pub(super) maxima: ClassMaxima,
}

impl PlainSink for KeepTotals {
    #[inline(always)]
    fn feasible(&mut self, i: usize, class: u32, se: &StaticEval, scores: NodeScores) {
        self.totals.push(Scored {
            index: i as u32,
            class,
            total: scores.weighed(self.weights),
        });
        self.maxima.see(se);
    }
}

/// The policy's CEL rules in the plain pass (under a policy whose rules [`CompiledRules::plain`]
/// takes): the class-level ones were folded into the class predicates (see
/// [`PodPlan::fold_class_rules`]); this runs the pod-free node rules on each node the pass finds
/// feasible, from the snapshot's kept outcomes or the batch's, writes the score rules' raw scores
/// to `raw`, and hands the nodes no rule rejects to `inner`. Never used with a sink that
/// [`PlainSink::RULES_OUT`]: a node it bars would skip the rules.
pub(in crate::engine) struct RuleSink<'e, 'p, S> {
    pub(super) inner: S,
    pub(super) rules: &'e CompiledRules,
    pub(super) plan: &'e PodPlan<'p>,
    pub(super) usage: &'e BatchUsage<'e>,
    pub(super) nodes: &'e [Arc<NodeEntry>],
    pub(super) kept: Option<&'e SnapshotRules>,
    pub(super) changed: &'e mut HashMap<(u32, u32), (u64, RuleOutcome)>,
    pub(super) statics: &'e mut Vec<Option<NodeStatic>>,
    /// Score rules' raw scores per node (`rules.scores.len()` per node).
    pub(super) raw: &'e mut Vec<i64>,
    /// The filter rules evaluated node by node (the others were folded into the classes).
    pub(super) node_filters: Vec<usize>,
    /// Each score rule's index among the rules (after the filters) and whether it is read per
    /// class.
    pub(super) score_rules: Vec<(usize, bool)>,
    /// Each score rule's least and greatest raw score over the nodes handed to `inner`.
    pub(super) extrema: Vec<(i64, i64)>,
}

impl<S: PlainSink> RuleSink<'_, '_, S> {
    /// Rule `k`'s value on node `i` (a pod-free node rule, or a class-level one): a score rule's
    /// raw score, 0 for a filter rule that keeps the node, `None` when the rule rejects it.
    #[inline(always)]
    pub(super) fn value(&mut self, i: usize, k: usize, class_level: bool) -> Option<i64> {
        if class_level {
            return self.plan.class_outcome(k, self.nodes[i].class as usize).ok();
        }
        let stamp = self.usage.stamp(i);
        if stamp == 0 {
            if let Some(outcome) = self.kept.and_then(|kept| kept.nodes.get(i, k)) {
                return outcome.as_ref().ok().copied();
            }
        }
        self.evaluate(i, k, stamp)
    }

    /// [`RuleSink::value`] of a pod-free node rule not kept yet: evaluated, and kept.
    #[cold]
    #[inline(never)]
    pub(super) fn evaluate(&mut self, i: usize, k: usize, stamp: u64) -> Option<i64> {
        if self.plan.rule_pod.is_none() {
            return Some(0);
        }
        let mut kept = KeptRules {
            rules: self.rules,
            kept: self.kept,
            changed: self.changed,
            statics: self.statics,
            nodes: self.nodes,
        };
        kept.outcome(self.usage, i, k, stamp).ok()
    }
}

/// Where the outcomes of a policy's pod-free node rules are kept (see [`KeptRules::outcome`]).
pub(in crate::engine) struct KeptRules<'e> {
    pub(super) rules: &'e CompiledRules,
    /// The snapshot's outcomes, for nodes whose usage is the snapshot's.
    pub(super) kept: Option<&'e SnapshotRules>,
    /// The outcomes on nodes a batch changed, by node and rule, under the usage's stamp.
    pub(super) changed: &'e mut HashMap<(u32, u32), (u64, RuleOutcome)>,
    pub(super) statics: &'e mut Vec<Option<NodeStatic>>,
    pub(super) nodes: &'e [Arc<NodeEntry>],
}

impl KeptRules<'_> {
    /// Pod-free node rule `k`'s outcome on node `i` with `usage`, whose stamp there is `stamp`:
    /// kept in the snapshot's outcomes while that is 0, else under the stamp, and evaluated on
    /// first use.
    pub(super) fn outcome(&mut self, usage: &BatchUsage<'_>, i: usize, k: usize, stamp: u64) -> RuleOutcome {
        let entry = &self.nodes[i];
        let rules = self.rules;
        let statics = &mut *self.statics;
        // The node's value: cut to what the rule reads when it says (built afresh: cheap), else
        // whole from the node's kept static part.
        let mut eval = || {
            let node = match rules.node_paths(k) {
                Some(paths) => cel_rules::node_value_reading(&entry.spec, usage.get(i), paths),
                None => rule_node_value(statics, i, entry, usage.get(i)),
            };
            rules.run(k, &rules.node_context(node))
        };
        match self.kept {
            Some(kept) if stamp == 0 => kept.nodes.get_or_eval(i, k, eval),
            _ => match self.changed.get(&(i as u32, k as u32)) {
                Some((s, outcome)) if *s == stamp => outcome.clone(),
                _ => {
                    let outcome = eval();
                    self.changed.insert((i as u32, k as u32), (stamp, outcome.clone()));
                    outcome
                }
            },
        }
    }

    /// Node `i`'s entries in `cols` as `usage` leaves them (see [`RuleColumns::set`]).
    pub(super) fn set_node(&mut self, cols: &mut RuleColumns, usage: &BatchUsage<'_>, i: usize) {
        let stamp = usage.stamp(i);
        let filters = self.rules.filters.len();
        let mut scores = [0i64; cel_rules::MAX_RULES];
        let mut kept = true;
        for k in (0..filters).filter(|&k| !self.rules.class_level(k)) {
            if kept && self.outcome(usage, i, k, stamp).is_err() {
                kept = false;
            }
        }
        for (j, score) in scores.iter_mut().enumerate().take(self.rules.scores.len()) {
            if !kept {
                break;
            }
            match self.outcome(usage, i, filters + j, stamp) {
                Ok(v) => *score = v,
                Err(_) => kept = false,
            }
        }
        cols.set(i, stamp, kept.then_some(&scores[..self.rules.scores.len()]));
    }
}

impl<S: PlainSink> PlainSink for RuleSink<'_, '_, S> {
    #[inline]
    fn feasible(&mut self, i: usize, class: u32, se: &StaticEval, scores: NodeScores) {
        for j in 0..self.node_filters.len() {
            let k = self.node_filters[j];
            if self.value(i, k, false).is_none() {
                return;
            }
        }
        let n = self.score_rules.len();
        let mut values = [0i64; cel_rules::MAX_RULES];
        for (j, value) in values.iter_mut().enumerate().take(n) {
            let (k, class_level) = self.score_rules[j];
            match self.value(i, k, class_level) {
                Some(v) => *value = v,
                None => return,
            }
        }
        if let Some(out) = self.raw.get_mut(i * n..(i + 1) * n) {
            out.copy_from_slice(&values[..n]);
        }
        for (e, &v) in self.extrema.iter_mut().zip(&values[..n]) {
            *e = (e.0.min(v), e.1.max(v));
        }
        self.inner.feasible(i, class, se, scores);
    }
}

/// The score rules' side of [`KeepBest`] under a policy whose pod-free node rules sit in
/// [`RuleColumns`]: which nodes they keep, and the part their scores add.
#[derive(Clone)]
pub(in crate::engine) struct BestRules<'b> {
    pub(super) cols: &'b RuleColumns,
    /// How the score rules' raw scores become the node's part (exact).
    pub(super) scaling: RuleScaling,
    /// Per score rule, its least raw score and `100 · weight / span` (see
    /// [`RuleColumns::bounds`]).
    pub(super) bounds: Vec<(f64, f64)>,
    /// Whether the extrema are within [`EXACT_SCORE`], where the bounds hold: otherwise no node
    /// is ruled out.
    pub(super) exact: bool,
}

impl BestRules<'_> {
    /// The exact part node `i`'s score rules add.
    #[inline(always)]
    pub(in crate::engine) fn part(&self, i: usize) -> i64 {
        let mut raw = [0i64; cel_rules::MAX_RULES];
        let raw = &mut raw[..self.scaling.len];
        self.cols.scores_of(i, raw);
        self.scaling.part(raw)
    }
}

/// The first pass of [`Evaluator::evaluate_best_ruled`] when the score rules' order does not
/// settle their extrema (see [`Evaluator::extrema_by_order`]): counts the feasible nodes the
/// pod-free node rules keep, and each score rule's extrema over them, from the kernel's masks.
pub(in crate::engine) struct RuleExtrema<'b> {
    pub(super) cols: &'b RuleColumns,
    pub(super) kernel: Option<Kernel>,
    pub(super) extrema: Vec<(i64, i64)>,
    pub(super) feasible: usize,
}

impl PlainSink for RuleExtrema<'_> {
    const WHOLE_BLOCKS: bool = true;

    #[inline(always)]
    fn admitted(&self, base: usize) -> u64 {
        self.cols.pass(base)
    }

    fn block(&mut self, base: usize, feasible: u64) {
        self.feasible += feasible.count_ones() as usize;
        self.cols.widen(self.kernel, base, feasible, &mut self.extrema);
    }

    fn feasible(&mut self, i: usize, _: u32, _: &StaticEval, _: NodeScores) {
        if self.cols.admits(i) {
            self.block(i - i % BLOCK, 1 << (i % BLOCK));
        }
    }
}

/// The feasible nodes the pod-free node rules keep, of the blocks a pass was given (see
/// [`Evaluator::extrema_by_order`]).
pub(in crate::engine) struct Probe<'b> {
    pub(super) cols: &'b RuleColumns,
    /// The nodes found, of the one block probed.
    pub(super) mask: u64,
}

impl PlainSink for Probe<'_> {
    const WHOLE_BLOCKS: bool = true;

    #[inline(always)]
    fn admitted(&self, base: usize) -> u64 {
        self.cols.pass(base)
    }

    fn block(&mut self, _: usize, feasible: u64) {
        self.mask |= feasible;
    }

    fn feasible(&mut self, i: usize, _: u32, _: &StaticEval, _: NodeScores) {
        if self.cols.admits(i) {
            self.mask |= 1 << (i % BLOCK);
        }
    }
}

/// How many blocks [`Evaluator::extrema_by_order`] may probe for one pod before leaving the
/// extrema to a pass over every block.
pub(in crate::engine) const ORDER_PROBES: usize = 8;

/// How many nodes [`Evaluator::extrema_by_order`] may walk for one pod (see [`ORDER_PROBES`]).
pub(in crate::engine) const ORDER_WALK: usize = 256;

/// Keeps, per node class, the feasible node with the best per-node score, and counts them all.
pub(in crate::engine) struct KeepBest<'b, 'p> {
    /// The score rules' side, under a policy with pod-free node rules (the part then includes
    /// their scores).
    pub(super) rules: Option<BestRules<'b>>,
    pub(super) winners: Vec<ClassBest>,
    /// Per class (padded to every class a node may have), the per-node part of its best node so
    /// far (weighted fit, balanced and image scores); `i64::MIN` while it has none.
    pub(super) bars: Vec<i64>,
    /// The weights of the fit, balanced and image scores.
    pub(super) weights: [i64; 3],
    pub(super) cols: &'b HotColumns,
    pub(super) plan: &'b PodPlan<'p>,
    pub(super) feasible: usize,
}

impl PlainSink for KeepBest<'_, '_> {
    const RULES_OUT: bool = true;

    /// A node below its class's best part cannot win (the best part only grows).
    fn bars(&self) -> &[i64] {
        &self.bars
    }

    fn part_weights(&self) -> [i64; 3] {
        self.weights
    }

    #[inline(always)]
    fn skip(&mut self, n: usize) {
        self.feasible += n;
    }

    fn rules_out(&self) -> bool {
        self.rules.as_ref().is_none_or(|r| r.exact)
    }

    #[inline(always)]
    fn admitted(&self, base: usize) -> u64 {
        match &self.rules {
            Some(r) => r.cols.pass(base),
            None => !0,
        }
    }

    #[inline(always)]
    fn part_bounds(&self, base: usize, out: &mut [f64; BLOCK]) -> bool {
        match &self.rules {
            Some(r) => {
                r.cols.bounds(base, &r.bounds, out);
                true
            }
            None => false,
        }
    }

    #[inline(always)]
    fn feasible(&mut self, i: usize, class: u32, _: &StaticEval, scores: NodeScores) {
        let mut part = scores.weighed(self.weights);
        if let Some(r) = &self.rules {
            if !r.cols.admits(i) {
                return;
            }
            part += r.part(i);
        }
        self.feasible += 1;
        let (Some(w), Some(bar)) = (self.winners.get_mut(class as usize), self.bars.get_mut(class as usize)) else {
            return;
        };
        // Equal parts: the higher tie-break wins, then the later node (as in `best_candidate`).
        if part < *bar {
            return;
        }
        if part > *bar || w.index == u32::MAX {
            *w = ClassBest {
                tie: None,
                index: i as u32,
            };
            *bar = part;
            return;
        }
        let key = |i: usize| self.plan.tie_break(self.cols.name_hash(i));
        let (tie, held) = (key(i), w.tie.unwrap_or_else(|| key(w.index as usize)));
        *w = if tie >= held {
            ClassBest {
                tie: Some(tie),
                index: i as u32,
            }
        } else {
            ClassBest {
                tie: Some(held),
                index: w.index,
            }
        };
    }
}

impl<'b, 'p> KeepBest<'b, 'p> {
    /// A sink with no node yet for each of the pod's node classes, in the buffers `(winners,
    /// bars)` (cleared; the bars padded to every class a node may have).
    pub(super) fn new(
        rules: Option<BestRules<'b>>,
        (mut winners, mut bars): (Vec<ClassBest>, Vec<i64>),
        weights: [i64; 3],
        usage: &'b BatchUsage<'_>,
        plan: &'b PodPlan<'p>,
    ) -> Self {
        winners.clear();
        winners.resize(plan.class_evals.len(), ClassBest::NONE);
        bars.clear();
        bars.resize(winners.len().max(usage.cols.max_class() as usize + 1), i64::MIN);
        Self {
            rules,
            winners,
            bars,
            weights,
            cols: &usage.cols,
            plan,
            feasible: 0,
        }
    }

    /// Takes in what `later` kept of the nodes after this sink's: per class the better of the two
    /// winners as [`PlainSink::feasible`] would have picked had it seen them all in order (the
    /// higher part, then the higher tie-break, then the later node), and the sum of the counts.
    /// Gives back `later`'s buffers.
    pub(super) fn merge(&mut self, later: Self) -> (Vec<ClassBest>, Vec<i64>) {
        self.feasible += later.feasible;
        let key = |i: u32| self.plan.tie_break(self.cols.name_hash(i as usize));
        for (class, (&w, &bar)) in later.winners.iter().zip(&later.bars).enumerate() {
            let (Some(held), Some(held_bar)) = (self.winners.get_mut(class), self.bars.get_mut(class)) else {
                continue;
            };
            if w.index == u32::MAX || bar < *held_bar {
                continue;
            }
            if held.index == u32::MAX || bar > *held_bar {
                (*held, *held_bar) = (w, bar);
                continue;
            }
            let (tie, held_tie) = (
                w.tie.unwrap_or_else(|| key(w.index)),
                held.tie.unwrap_or_else(|| key(held.index)),
            );
            if tie >= held_tie {
                *held = ClassBest {
                    tie: Some(tie),
                    index: w.index,
                };
            } else {
                held.tie = Some(held_tie);
            }
        }
        (later.winners, later.bars)
    }
}

pooled_buffer!(
    pub(in crate::engine) TotalsBuffer,
    Scored,
    SPARE_TOTALS,
    "Rank's list of feasible nodes and their totals (see `Evaluator::evaluate_totals`)."
);
