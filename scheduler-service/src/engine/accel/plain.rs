//! The plain pass: the common pod (no topology state, no node name, not selecting per node,
//! resource scores on cpu and memory only) filtered and scored from each node's hot fields and
//! its class, the class-wide scores normalized once per class, through the vector kernel where
//! it applies; what it keeps of each feasible node is up to a sink (every candidate, Rank's
//! totals, Schedule's best node, the score rules' extrema).
//!
//! Mirrors the general pass (`Evaluator::evaluate`: the framework's filters and scores on every
//! node, then normalization); held to it by `plain_pass_equals_the_general_one_on_the_synthetic_cluster`
//! and `plain_pass_equals_the_general_one` (bit for bit the same candidates, extrema and totals),
//! with `kernel_filters_and_scores_as_the_scalar_pass` for the kernel (`plain_tests.rs`).

use std::sync::Arc;

use crate::engine::accel::class_cache::StaticEval;
use crate::engine::accel::columns::{BlockScores, ImageAsk, Kernel, PartWeights, PodAsk, BLOCK};
use crate::engine::accel::rule_columns::{RuleColumns, EXACT_SCORE};
use crate::engine::parallel;
use crate::engine::plugins::image_locality::{ImageScale, MIN_IMAGE_THRESHOLD};
use crate::engine::plugins::node_ports;
use crate::engine::plugins::noderesources::{balanced_allocation, fit};
use crate::engine::policy::{FilterPlugin, ScorePlugin, ScoringStrategy};
use crate::engine::pool::pooled_buffer;
use crate::engine::snapshot::{NodeEntry, NodeHot};

use super::sinks::*;
use crate::engine::batch_usage::BatchUsage;
use crate::engine::framework::{settled, Deadline, DeadlinePassed, Evaluator, TopoActive, MAX_NODE_SCORE};
use crate::engine::plan::PodPlan;
use crate::engine::profile::{Profile, MAX_SCORES};
use crate::engine::select::best_candidate;

pub(in crate::engine) use super::resource_scores::plain_resource_scores;

/// The node [`Evaluator::evaluate_best`] picked (index and total) and how many were feasible.
#[derive(Debug, Clone, Copy)]
pub(in crate::engine) struct BestNode {
    pub(in crate::engine) best: Option<(usize, i64)>,
    pub(in crate::engine) feasible: usize,
}

/// The per-node score slots of the plain pass and their weights.
#[derive(Debug, Clone, Copy)]
pub(in crate::engine) struct PerNodeSlots {
    slots: [(usize, i64); MAX_SCORES],
    len: usize,
}

/// One pod's plain pass over the nodes (see [`Evaluator::plain_nodes`]): what it reads, worked
/// out once per pod.
pub(in crate::engine) struct PlainNodes<'e, 'p> {
    profile: &'e Profile,
    plan: &'e PodPlan<'p>,
    usage: &'e BatchUsage<'e>,
    hot: &'e [NodeHot],
    evals: &'e [StaticEval],
    nodes: &'e [Arc<NodeEntry>],
    image_sums: &'e [i64],
    /// Some extended resource is requested: only nodes that have some can fit.
    want_scalars: bool,
    check_fit: bool,
    check_ports: bool,
    /// NodeResourcesFit's slot and cpu and memory weights, when it is scored.
    fit: Option<(usize, (i64, i64))>,
    /// BalancedAllocation's slot and the pod's requests, when it is scored.
    balanced: Option<(usize, &'e [i64])>,
    image: bool,
    /// ImageLocality's scale for the pod.
    image_scale: ImageScale,
    /// The pair of requests each resource score reads (see `plain_resource_scores`).
    fit_requests: [i64; 2],
    balanced_requests: [i64; 2],
    most_allocated: bool,
}

impl<'e, 'p> PlainNodes<'e, 'p> {
    #[inline(always)]
    fn new(ev: &'e Evaluator<'_>, plan: &'e PodPlan<'p>, usage: &'e BatchUsage<'e>) -> Self {
        let profile = ev.profile;
        let slots = profile.slot_of;
        let req = &plan.pod.requests;
        let balanced = slots.balanced.zip(plan.balanced_requests.as_deref());
        let pair = |r: &[i64]| [r.first().copied().unwrap_or(0), r.get(1).copied().unwrap_or(0)];
        Self {
            profile,
            plan,
            usage,
            hot: &usage.hot,
            evals: plan.plain_evals.as_deref().unwrap_or(&plan.class_evals),
            nodes: ev.snapshot.nodes(),
            image_sums: ev.fast.image_sums.get(),
            want_scalars: req.scalars.iter().any(|(_, want)| *want > 0),
            check_fit: profile.policy.filters.contains(&FilterPlugin::NodeResourcesFit),
            check_ports: profile.policy.filters.contains(&FilterPlugin::NodePorts) && !plan.port_masks.is_empty(),
            fit: slots.fit.zip(profile.fit_cpu_memory),
            balanced,
            image: slots.image.is_some() && !plan.images.is_empty(),
            image_scale: ImageScale::of(plan.pod.images.len()),
            fit_requests: pair(&plan.fit_requests),
            balanced_requests: balanced.map_or([0, 0], |(_, r)| pair(r)),
            most_allocated: matches!(profile.policy.scoring_strategy, ScoringStrategy::MostAllocated),
        }
    }

    /// The kernel's view of the pod, when the kernel can take it: NodeResourcesFit filters and
    /// both resource scores are on (what the kernel computes), with requests in its exact range.
    fn ask(&self) -> Option<PodAsk> {
        if !(self.check_fit && self.fit.is_some() && self.balanced.is_some()) || self.usage.cols.len() != self.hot.len()
        {
            return None;
        }
        let req = &self.plan.pod.requests;
        let ask = PodAsk::new(
            [req.milli_cpu, req.memory, req.ephemeral_storage],
            self.fit_requests,
            self.balanced_requests,
            self.most_allocated,
        )?;
        if !self.image || self.image_sums.len() < self.usage.cols.len().div_ceil(BLOCK) * BLOCK {
            return Some(ask);
        }
        Some(ask.with_image(ImageAsk {
            min: MIN_IMAGE_THRESHOLD,
            max: self.image_scale.max,
        }))
    }

    /// The nodes block by block: the kernel filters on resources and scores them, the class and
    /// the rest are checked on the nodes it passed, in node order; a node it flags as out of its
    /// range goes through [`PlainNodes::node`].
    #[inline(always)]
    fn blocks<S: PlainSink>(
        &self,
        kernel: Kernel,
        ask: &PodAsk,
        bases: impl Iterator<Item = usize>,
        deadline: Deadline,
        sink: &mut S,
    ) -> Result<(), DeadlinePassed> {
        let cols = &*self.usage.cols;
        let mut out = BlockScores::default();
        let mut bounds = [0.0; BLOCK];
        let weights = self.fit.map_or((0, 0), |(_, w)| w);
        // -1 for a class the pod's static predicates allow, 0 for one they reject (or unknown).
        let mut allowed = ClassAllowed::take_spare();
        allowed.clear();
        allowed.extend(self.evals.iter().map(|se| -i32::from(!se.rejected)));
        let classes = allowed.len().max(cols.max_class() as usize + 1);
        allowed.resize(classes, 0);
        // A sink that rules nodes out is asked first, block by block, by the kernel (its bars
        // gathered by class) rather than by a branch per node; only the nodes the kernel passes
        // that are surely feasible are ruled out (and counted as feasible): not with extended
        // resources to check node by node, nor a node where a host port of the pod may be in
        // use; and only when the kernel has every score of the part.
        let part_weights = PartWeights::new(weights, sink.part_weights()).filter(|_| {
            S::RULES_OUT
                && sink.rules_out()
                && !(self.check_fit && self.want_scalars)
                && (ask.scores_image() || !self.image)
        });
        let scores_of = |out: &BlockScores, j: usize, i: usize| {
            let mut scores = NodeScores {
                fit: fit::weigh(i64::from(out.cpu[j]), i64::from(out.memory[j]), weights),
                balanced: i64::from(out.balanced[j]),
                image: 0,
            };
            if ask.scores_image() {
                scores.image = i64::from(out.image[j]);
            } else {
                self.image(i, &mut scores);
            }
            scores
        };
        for base in bases {
            if base % 4096 == 0 && base > 0 && deadline.passed() {
                return Err(DeadlinePassed);
            }
            let masks = if S::WHOLE_BLOCKS {
                kernel.masks(cols, base, ask, &allowed)
            } else {
                kernel.block(cols, base, ask, &allowed, self.image_sums, &mut out)
            };
            let admitted = sink.admitted(base);
            let (mut fast, slow) = (masks.fast & admitted, masks.slow & admitted);
            if self.check_fit && self.want_scalars {
                // A pod requesting an extended resource fits only nodes that have some.
                fast &= cols.scalar_nodes(base);
            }
            if S::WHOLE_BLOCKS {
                if self.has_rest() {
                    fast = self.fitting_rest(base, fast);
                }
                sink.block(base, fast);
                fast = 0;
            }
            if let Some(w) = part_weights.as_ref().filter(|_| fast != 0) {
                let sure = if self.check_ports {
                    fast & !self.ports_maybe(base, fast)
                } else {
                    fast
                };
                let extra = sink.part_bounds(base, &mut bounds).then_some(&bounds);
                let keep = sure & kernel.reaching(cols, base, &out, w, extra, sink.bars());
                sink.skip((sure & !keep).count_ones() as usize);
                fast &= keep | !sure;
            }
            let mut todo = fast | slow;
            while todo != 0 {
                let j = todo.trailing_zeros() as usize;
                todo &= todo - 1;
                let i = base + j;
                if slow & (1 << j) != 0 {
                    self.node(i, sink);
                    continue;
                }
                if !self.fits_rest(i) {
                    continue;
                }
                let class = cols.class(i);
                sink.feasible(i, class, &self.evals[class as usize], scores_of(&out, j, i));
            }
        }
        Ok(())
    }

    /// The nodes of `range` (its start a multiple of [`BLOCK`]) to `sink`: through `kernel`
    /// block by block where it takes the pod, node by node otherwise.
    #[inline(always)]
    fn range<S: PlainSink>(
        &self,
        kernel: Option<(Kernel, PodAsk)>,
        range: std::ops::Range<usize>,
        deadline: Deadline,
        sink: &mut S,
    ) -> Result<(), DeadlinePassed> {
        if let Some((kernel, ask)) = kernel {
            return self.blocks(kernel, &ask, range.step_by(BLOCK), deadline, sink);
        }
        for i in range.start..range.end.min(self.hot.len()) {
            if i % 4096 == 4095 && deadline.passed() {
                return Err(DeadlinePassed);
            }
            self.node(i, sink);
        }
        Ok(())
    }

    /// Whether the pod has filters the kernel leaves to the node (host ports, extended resources).
    #[inline(always)]
    fn has_rest(&self) -> bool {
        self.check_ports || (self.check_fit && self.want_scalars)
    }

    /// The filters the kernel leaves to the node: host ports and extended resources (the node's
    /// hot fields are read only for a pod that has either).
    #[inline(always)]
    fn fits_rest(&self, i: usize) -> bool {
        let plan = self.plan;
        if !self.has_rest() {
            return true;
        }
        // The node's port list (behind two pointers) only when its keys do not say.
        if self.check_ports
            && plan.may_conflict(self.usage.cols.port_bits(i))
            && plan
                .keyed_conflict(self.usage.cols.port_keys(i))
                .unwrap_or_else(|| node_ports::conflicts(&plan.pod.host_ports, &self.usage.get(i).host_ports))
        {
            return false;
        }
        !(self.check_fit
            && self.want_scalars
            && !(self.hot[i].has_scalars
                && fit::fits_scalars(&plan.pod.requests.scalars, &self.nodes[i].spec, self.usage.get(i))))
    }

    /// Of the `nodes` of the block at `base`, those that pass [`PlainNodes::fits_rest`].
    fn fitting_rest(&self, base: usize, nodes: u64) -> u64 {
        let (mut fit, mut left) = (0u64, nodes);
        while left != 0 {
            let j = left.trailing_zeros() as usize;
            left &= left - 1;
            if self.fits_rest(base + j) {
                fit |= 1 << j;
            }
        }
        fit
    }

    /// Of the `nodes` of the block at `base`, those on which a host port of the pod may be in use
    /// (the others have none of its ports in use).
    fn ports_maybe(&self, base: usize, nodes: u64) -> u64 {
        let (mut maybe, mut left) = (0u64, nodes);
        let cols = &self.usage.cols;
        while left != 0 {
            let j = left.trailing_zeros() as usize;
            left &= left - 1;
            if self.plan.may_conflict(cols.port_bits(base + j))
                && self.plan.keyed_conflict(cols.port_keys(base + j)) != Some(false)
            {
                maybe |= 1 << j;
            }
        }
        maybe
    }

    /// Adds ImageLocality's score of node `i`.
    #[inline(always)]
    fn image(&self, i: usize, scores: &mut NodeScores) {
        if self.image {
            // A node without the pod's images scores 0 (a sum under the minimum threshold).
            let sum = self.image_sums[i];
            if sum != 0 {
                scores.image = self.image_scale.score(sum);
            }
        }
    }

    /// Filters and scores node `i` alone, handing it to `sink` when feasible.
    #[inline(always)]
    fn node(&self, i: usize, sink: &mut impl PlainSink) {
        let h = &self.hot[i];
        let Some(se) = self.evals.get(h.class as usize) else {
            return;
        };
        if se.rejected {
            return;
        }
        let req = &self.plan.pod.requests;
        let (want_cpu, want_memory, want_ephemeral) = (req.milli_cpu, req.memory, req.ephemeral_storage);
        if self.check_fit
            && (h.pod_count + 1 > h.allowed_pods
                || (want_cpu > 0 && want_cpu > h.alloc_cpu.saturating_sub(h.req_cpu))
                || (want_memory > 0 && want_memory > h.alloc_memory.saturating_sub(h.req_memory))
                || (want_ephemeral > 0 && want_ephemeral > h.alloc_ephemeral.saturating_sub(h.req_ephemeral)))
        {
            return;
        }
        if !self.fits_rest(i) {
            return;
        }
        let mut scores = NodeScores::default();
        let paired = self.fit.zip(self.balanced).and_then(|((_, weights), _)| {
            plain_resource_scores(h, self.fit_requests, self.balanced_requests, self.most_allocated)
                .map(|(cpu, memory, b)| (fit::weigh(cpu, memory, weights), b))
        });
        if let Some((f, b)) = paired {
            scores.fit = f;
            scores.balanced = b;
        } else {
            if let Some((_, weights)) = self.fit {
                scores.fit = fit::score_cpu_memory(
                    &self.profile.policy.scoring_strategy,
                    weights,
                    &self.plan.fit_requests,
                    h,
                );
            }
            if let Some((_, requests)) = self.balanced {
                scores.balanced = balanced_allocation::score_cpu_memory(requests, h);
            }
        }
        self.image(i, &mut scores);
        sink.feasible(i, h.class, se, scores);
    }
}

pooled_buffer!(
    pub(in crate::engine) ClassAllowed,
    i32,
    SPARE_CLASS_ALLOWED,
    "Per node class, whether the pod's static predicates allow it, as the kernel reads it."
);

impl Evaluator<'_> {
    /// [`Evaluator::evaluate`] for the common pod, when no reasons are wanted: no topology state,
    /// no node name, not selecting per node, under a policy
    /// whose resource scores read cpu and memory only. Every filter then reads the node's hot
    /// fields or its class, and NodeAffinity's and TaintToleration's scores are per class, so they
    /// are normalized once per class instead of once per node. Bit for bit the same candidates,
    /// extrema and totals as the general pass (`plain_pass_equals_the_general_one`).
    pub(in crate::engine) fn evaluate_plain(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
    ) -> Result<(), DeadlinePassed> {
        let slots = self.profile.slot_of;
        let mut sink = KeepAll {
            candidates: std::mem::take(&mut *self.candidates),
            slots,
            maxima: ClassMaxima::NONE,
        };
        sink.candidates.clear();
        let (sink, passed) = self.plain_pass_ruled(plan, usage, deadline, sink);
        let KeepAll { candidates, maxima, .. } = sink;
        *self.candidates = candidates;
        passed?;
        // The extrema the general normalization finds: NodeAffinity's and TaintToleration's
        // maxima over the feasible nodes (0 when none), and the score rules' extrema.
        // (The score rules' extrema were set by the pass: see `plain_pass_ruled`.)
        self.set_class_extrema(!self.candidates.is_empty(), maxima);
        let ruled = self.profile.score_rules() > 0;
        let (class_part, per_node) = self.plain_weights(&plan.class_evals);
        let per_node = &per_node.slots[..per_node.len];
        let hot = &*usage.hot;
        let scaling = self.rule_scaling();
        let n = self.profile.score_rules();
        let rule_raw = self.rule_raw.borrow();
        for c in self.candidates.iter_mut() {
            let mut total = class_part[hot[c.index as usize].class as usize];
            for &(slot, weight) in per_node {
                total += c.raw[slot] * weight;
            }
            if ruled {
                let i = c.index as usize;
                if let Some(scores) = rule_raw.get(i * n..(i + 1) * n) {
                    total += scaling.part(scores);
                }
            }
            c.total = total;
        }
        Ok(())
    }

    /// [`Evaluator::plain_pass`] with `sink`, through a [`RuleSink`] when the policy's rules
    /// need one; gives the sink back.
    fn plain_pass_ruled<S: PlainSink>(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
        mut sink: S,
    ) -> (S, Result<(), DeadlinePassed>) {
        let profile = self.profile;
        let Some(rules) = profile.rules_in_sink() else {
            let passed = self.plain_pass(plan, usage, deadline, &mut sink);
            return (sink, passed);
        };
        debug_assert!(!S::RULES_OUT, "a sink that bars nodes would skip the rules");
        let mut raw = std::mem::take(self.rule_raw.get_mut());
        let mut statics = std::mem::take(self.node_statics.get_mut());
        let mut changed = std::mem::take(&mut self.fast.changed_rules);
        let kept = self.fast.node_rules.clone();
        let snapshot = self.snapshot;
        let mut ruled = RuleSink {
            inner: sink,
            rules,
            plan,
            usage,
            nodes: snapshot.nodes(),
            kept: kept.as_deref(),
            changed: &mut changed,
            statics: &mut statics,
            raw: &mut raw,
            node_filters: (0..rules.filters.len()).filter(|&k| !rules.class_level(k)).collect(),
            score_rules: (rules.filters.len()..rules.width())
                .map(|k| (k, rules.class_level(k)))
                .collect(),
            extrema: vec![(i64::MAX, i64::MIN); rules.scores.len()],
        };
        let passed = self.plain_pass(plan, usage, deadline, &mut ruled);
        let extrema = std::mem::take(&mut ruled.extrema);
        let sink = ruled.inner;
        self.rule_extrema = settled(extrema);
        *self.rule_raw.get_mut() = raw;
        *self.node_statics.get_mut() = statics;
        self.fast.changed_rules = changed;
        (sink, passed)
    }

    /// The plain pass keeping only the best feasible node and the count of feasible ones: what
    /// Schedule needs of a pod whose candidates no later pod re-scores. Per node class it keeps
    /// the node with the best per-node part of the total (the class-wide part is the same for all
    /// of a class's nodes, and known only once every node is filtered); the best of those winners
    /// is the node [`best_candidate`] picks from the full list, ties broken alike
    /// (`plain_pass_equals_the_general_one`). Entered from the general path's
    /// `Evaluator::evaluate_best` (`engine/evaluate.rs`) when the plain pass applies.
    pub(in crate::engine) fn plain_best(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
    ) -> Result<BestNode, DeadlinePassed> {
        // Score rules are normalized over the feasible nodes, and node rules would have to run
        // before the bars: those pods keep each feasible node's total (16 bytes, not a
        // candidate) and the best is picked from them as from the candidates.
        if self.profile.rules_in_sink().is_some() {
            if let Some(cols) = self.rule_columns(usage) {
                let best = self.evaluate_best_ruled(plan, usage, deadline, &cols);
                self.fast.rule_cols = Some(cols);
                return best;
            }
            let totals = match self.evaluate_totals(plan, usage, deadline) {
                Ok(t) => t,
                Err(DeadlinePassed) => return Err(DeadlinePassed),
            };
            let hot = &*usage.hot;
            let best = best_candidate(
                totals.iter(),
                |s| (s.total, s.index),
                |s| plan.tie_break(hot[s.index as usize].name_hash),
            )
            .map(|s| (s.index as usize, s.total));
            return Ok(BestNode {
                best,
                feasible: totals.len(),
            });
        }
        self.best_of_classes(plan, usage, deadline, None)
    }

    /// [`Evaluator::plain_best`]'s pass keeping each node class's best node: with `rules`,
    /// the part includes the score rules' and only the nodes the pod-free node rules keep are
    /// feasible.
    fn best_of_classes(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
        rules: Option<BestRules<'_>>,
    ) -> Result<BestNode, DeadlinePassed> {
        self.candidates.clear();
        let weights = self.per_node_weights();
        let buffers = (
            std::mem::take(&mut self.fast.class_best),
            std::mem::take(&mut self.fast.class_bars),
        );
        let mut sink = KeepBest::new(rules, buffers, weights, usage, plan);
        let split = parallel::halves(usage.cols.len(), BLOCK, self.fast.split_from)
            .filter(|_| self.fast.split_when_busy || parallel::alone());
        let passed = match split {
            // A large cluster's nodes in two halves, each keeping its classes' best nodes, on
            // two cores; then per class the better of the two (`KeepBest::merge`).
            Some(mid) => {
                // The second half's buffers are kept for the next pod: freeing them per pod
                // would hand their pages back to the OS each time (the purge's TLB shootdown
                // then interrupts the helper's core).
                let buffers = std::mem::take(&mut self.fast.second_best);
                let mut second = KeepBest::new(sink.rules.clone(), buffers, weights, usage, plan);
                let passed = self.plain_pass_halves(plan, usage, deadline, mid, &mut sink, &mut second);
                self.fast.second_best = sink.merge(second);
                passed
            }
            None => self.plain_pass(plan, usage, deadline, &mut sink),
        };
        let KeepBest {
            winners,
            bars,
            feasible,
            ..
        } = sink;
        if passed.is_err() {
            self.fast.class_best = winners;
            self.fast.class_bars = bars;
            return Err(DeadlinePassed);
        }
        let evals = &*plan.class_evals;
        let mut maxima = ClassMaxima::NONE;
        for (w, se) in winners.iter().zip(evals) {
            if w.index != u32::MAX {
                maxima.see(se);
            }
        }
        self.set_class_extrema(feasible > 0, maxima);
        let hot = &*usage.hot;
        // Each class's winner with its class-wide part added: the best of them is the best node.
        // The part depends on two raw scores most classes share: the last one is remembered.
        let mut last_part: Option<((i64, i64), i64)> = None;
        let finalists = winners
            .iter()
            .zip(evals)
            .zip(&bars)
            .enumerate()
            .filter(|(_, ((w, _), _))| w.index != u32::MAX)
            .map(|(class, ((w, se), part))| {
                let raw = (se.affinity_weight, se.prefer_taints);
                let class_part = match last_part {
                    Some((r, p)) if r == raw => p,
                    _ => {
                        let p = self.class_part(se);
                        last_part = Some((raw, p));
                        p
                    }
                };
                Scored {
                    index: w.index,
                    class: class as u32,
                    total: part + class_part,
                }
            });
        let best = best_candidate(
            finalists,
            |s| (s.total, s.index),
            |s| plan.tie_break(hot[s.index as usize].name_hash),
        );
        self.fast.class_bars = bars;
        self.fast.class_best = winners;
        Ok(BestNode {
            best: best.map(|s| (s.index as usize, s.total)),
            feasible,
        })
    }

    /// [`Evaluator::evaluate_best`] under a policy whose pod-free node rules sit in `cols`: the
    /// score rules' extrema over the feasible nodes those rules keep (the normalization's) come
    /// from each rule's order, or else from a first pass over the kernel's masks; then a pass
    /// keeps each class's best node as without rules, its part including the score rules'
    /// (bounded above per node for the kernel's rule-out). The same node and total as keeping
    /// every feasible node's total (`plain_pass_equals_the_general_one`).
    fn evaluate_best_ruled(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
        cols: &RuleColumns,
    ) -> Result<BestNode, DeadlinePassed> {
        let profile = self.profile;
        let Some(rules) = profile.rules_in_sink() else {
            return self.best_of_classes(plan, usage, deadline, None);
        };
        self.image_sums(plan);
        let by_order = self.extrema_by_order(plan, usage, cols);
        self.fast.image_sums.deactivate();
        self.rule_extrema = match by_order {
            Some(extrema) => extrema,
            None => {
                let mut first = RuleExtrema {
                    cols,
                    kernel: self.fast.kernel,
                    extrema: vec![(i64::MAX, i64::MIN); rules.scores.len()],
                    feasible: 0,
                };
                self.plain_pass(plan, usage, deadline, &mut first)?;
                if first.feasible == 0 {
                    self.rule_extrema = settled(first.extrema);
                    self.set_class_extrema(false, ClassMaxima::NONE);
                    return Ok(BestNode {
                        best: None,
                        feasible: 0,
                    });
                }
                settled(first.extrema)
            }
        };
        let within = |v: i64| (-EXACT_SCORE..=EXACT_SCORE).contains(&v);
        let exact = self.rule_extrema.iter().all(|&(lo, hi)| within(lo) && within(hi));
        let bounds = rules
            .scores
            .iter()
            .zip(&self.rule_extrema)
            .map(|(rule, &(lo, hi))| {
                let scale = if hi > lo {
                    MAX_NODE_SCORE as f64 * rule.weight as f64 / (hi - lo) as f64
                } else {
                    0.0
                };
                (lo as f64, scale)
            })
            .collect();
        let rules = BestRules {
            cols,
            scaling: self.rule_scaling(),
            bounds,
            exact,
        };
        self.best_of_classes(plan, usage, deadline, Some(rules))
    }

    /// The score rules' extrema over the feasible nodes the pod-free node rules keep, read off
    /// each rule's order ([`RuleColumns::by_score`]): from either end, the first node feasible
    /// for the pod holds the extremum, since no node before it is. Feasibility is the plain
    /// pass's through the kernel, a block at a time (kept per block). `None` when that would
    /// take more than [`ORDER_PROBES`] blocks (or no node is feasible), or the kernel does not
    /// take the pod: a pass over every block finds them then. The pod's image sums must be
    /// active.
    fn extrema_by_order(
        &self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        cols: &RuleColumns,
    ) -> Option<Vec<(i64, i64)>> {
        let pass = PlainNodes::new(self, plan, usage);
        let (kernel, ask) = (self.fast.kernel?, pass.ask()?);
        let mut probed: Vec<(usize, u64)> = Vec::with_capacity(ORDER_PROBES);
        let mut walked = 0usize;
        let mut feasible = |i: usize| -> Option<bool> {
            // A node of a class the pod's static predicates reject is not feasible: no probe.
            walked += 1;
            if walked > ORDER_WALK {
                return None;
            }
            let class = usage.cols.class(i) as usize;
            if pass.evals.get(class).is_none_or(|se| se.rejected) || !usage.cols.may_fit(i, &ask) {
                return Some(false);
            }
            let base = i - i % BLOCK;
            let mask = match probed.iter().find(|(b, _)| *b == base) {
                Some(&(_, mask)) => mask,
                None => {
                    if probed.len() == ORDER_PROBES {
                        return None;
                    }
                    let mut probe = Probe { cols, mask: 0 };
                    pass.blocks(kernel, &ask, std::iter::once(base), Deadline::none(), &mut probe)
                        .ok()?;
                    probed.push((base, probe.mask));
                    probe.mask
                }
            };
            Some(mask >> (i % BLOCK) & 1 != 0)
        };
        let rules = self.profile.score_rules();
        let mut extrema = Vec::with_capacity(rules);
        for j in 0..rules {
            let mut least = None;
            for (v, i) in cols.by_score(j) {
                if feasible(i as usize)? {
                    least = Some(v);
                    break;
                }
            }
            let mut greatest = None;
            for (v, i) in cols.by_score(j).rev() {
                if feasible(i as usize)? {
                    greatest = Some(v);
                    break;
                }
            }
            extrema.push((least?, greatest?));
        }
        Some(extrema)
    }

    /// The pod-free node rules' [`RuleColumns`] as `usage` leaves them, taken out of the
    /// evaluator (built on first use, then updated on the nodes whose usage moved since), when
    /// Schedule's best-node pass can read them: the policy's score rules are all pod-free (a
    /// class-level score rule's values are the pod's), and the vector kernel runs.
    fn rule_columns(&mut self, usage: &BatchUsage<'_>) -> Option<RuleColumns> {
        let profile = self.profile;
        let rules = profile.rules_in_sink()?;
        if self.fast.kernel.is_none() || rules.scores.iter().any(|s| s.class_level) {
            return None;
        }
        let snapshot = self.snapshot;
        let built = self.fast.rule_cols.take();
        let fresh = built.is_none();
        let mut cols = built.unwrap_or_else(|| RuleColumns::new(snapshot.nodes().len(), rules.scores.len()));
        let mut kept = KeptRules {
            rules,
            kept: self.fast.node_rules.as_deref(),
            changed: &mut self.fast.changed_rules,
            statics: self.node_statics.get_mut(),
            nodes: snapshot.nodes(),
        };
        if fresh {
            for i in 0..cols.len() {
                kept.set_node(&mut cols, usage, i);
            }
            cols.sort();
            return Some(cols);
        }
        // Every node whose entries are not the snapshot's is listed as moved: those and the
        // nodes the batch changed are all that can be out of date.
        for i in cols.take_moved() {
            if usage.stamp(i as usize) != cols.stamp(i as usize) {
                kept.set_node(&mut cols, usage, i as usize);
            }
            cols.keep_moved(i);
        }
        for &i in usage.changed_nodes() {
            if usage.stamp(i as usize) != cols.stamp(i as usize) {
                kept.set_node(&mut cols, usage, i as usize);
            }
        }
        if cols.overlay_is_large() {
            cols.sort();
        }
        Some(cols)
    }

    /// The plain pass keeping each feasible node's index and total, in node order: Rank's list to
    /// pick the top k from, a fifth of the bytes of the candidates `evaluate_plain` writes.
    pub(in crate::engine) fn evaluate_totals(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
    ) -> Result<TotalsBuffer, DeadlinePassed> {
        self.candidates.clear();
        let mut totals = TotalsBuffer::take_spare();
        totals.clear();
        totals.reserve(usage.hot.len());
        let sink = KeepTotals {
            totals,
            weights: self.per_node_weights(),
            maxima: ClassMaxima::NONE,
        };
        let (sink, passed) = self.plain_pass_ruled(plan, usage, deadline, sink);
        let KeepTotals { mut totals, maxima, .. } = sink;
        if passed.is_err() {
            return Err(DeadlinePassed);
        }
        self.set_class_extrema(!totals.is_empty(), maxima);
        // (The score rules' extrema were set by the pass: see `plain_pass_ruled`.)
        let ruled = self.profile.score_rules() > 0;
        let (class_part, _) = self.plain_weights(&plan.class_evals);
        let scaling = self.rule_scaling();
        let n = self.profile.score_rules();
        let rule_raw = self.rule_raw.borrow();
        for s in totals.iter_mut() {
            s.total += class_part[s.class as usize];
            if ruled {
                let i = s.index as usize;
                if let Some(scores) = rule_raw.get(i * n..(i + 1) * n) {
                    s.total += scaling.part(scores);
                }
            }
        }
        drop(rule_raw);
        Ok(totals)
    }

    /// The weights of the fit, balanced and image scores in the plain pass (0 when not scored).
    fn per_node_weights(&self) -> [i64; 3] {
        let weight_of = |slot: Option<usize>| {
            slot.and_then(|s| self.profile.plain_slots.iter().find(|(x, _, _)| *x == s))
                .map_or(0, |(_, _, w)| *w)
        };
        let slots = self.profile.slot_of;
        [weight_of(slots.fit), weight_of(slots.balanced), weight_of(slots.image)]
    }

    /// Sets the extrema the plain pass normalizes with: NodeAffinity's and TaintToleration's
    /// maxima over the feasible nodes (0 when none is feasible), nothing else.
    fn set_class_extrema(&mut self, any_feasible: bool, maxima: ClassMaxima) {
        let slots = self.profile.slot_of;
        self.topo_active = TopoActive::default();
        self.norm_max = [0; MAX_SCORES];
        self.norm_min = [0; MAX_SCORES];
        if any_feasible {
            if let Some(slot) = slots.affinity {
                self.norm_max[slot] = maxima.affinity;
            }
            if let Some(slot) = slots.taints {
                self.norm_max[slot] = maxima.taints;
            }
        }
    }

    /// The plain pass's weights: per class, the weighted normalized NodeAffinity and
    /// TaintToleration scores (with the extrema set last); per node, the other slots and weights.
    fn plain_weights(&self, evals: &[StaticEval]) -> (Vec<i64>, PerNodeSlots) {
        let mut per_node = PerNodeSlots {
            slots: [(0, 0); MAX_SCORES],
            len: 0,
        };
        for &(slot, plugin, weight) in &self.profile.plain_slots {
            // A plain pod has no volumes: VolumeBinding scores every node 0.
            if !matches!(
                plugin,
                ScorePlugin::NodeAffinity | ScorePlugin::TaintToleration | ScorePlugin::VolumeBinding
            ) {
                per_node.slots[per_node.len] = (slot, weight);
                per_node.len += 1;
            }
        }
        // A view of a few nodes (a PodGroup's placement) reads a few classes of the lineage's.
        let class_part = match self.snapshot.class_subset() {
            Some(subset) => {
                let mut part = vec![0; evals.len()];
                for &c in subset {
                    if let Some(se) = evals.get(c as usize) {
                        part[c as usize] = self.class_part(se);
                    }
                }
                part
            }
            None => evals.iter().map(|se| self.class_part(se)).collect(),
        };
        (class_part, per_node)
    }

    /// The class-wide part of the total of a node of a class with these static predicates: its
    /// weighted normalized NodeAffinity and TaintToleration scores (with the extrema set last).
    #[inline]
    fn class_part(&self, se: &StaticEval) -> i64 {
        let mut part = 0;
        for &(slot, plugin, weight) in &self.profile.plain_slots {
            let raw = match plugin {
                ScorePlugin::NodeAffinity => se.affinity_weight,
                ScorePlugin::TaintToleration => se.prefer_taints,
                _ => continue,
            };
            part += self.normalized(plugin, slot, raw) * weight;
        }
        part
    }

    /// Filters every node through the hot fields and the class's static predicates, and hands
    /// each feasible node's raw per-node scores to `sink` (see [`Evaluator::evaluate_plain`]).
    #[inline(always)]
    fn plain_pass(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
        sink: &mut impl PlainSink,
    ) -> Result<(), DeadlinePassed> {
        self.image_sums(plan);
        let passed = self.plain_nodes(plan, usage, deadline, sink);
        self.fast.image_sums.deactivate();
        passed
    }

    /// [`Evaluator::plain_pass`] in two halves on two cores: the nodes before `mid` (a multiple
    /// of [`BLOCK`]) to `first`, the others to `second`.
    fn plain_pass_halves<S: PlainSink + Send>(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
        mid: usize,
        first: &mut S,
        second: &mut S,
    ) -> Result<(), DeadlinePassed> {
        self.image_sums(plan);
        let pass = PlainNodes::new(self, plan, usage);
        let kernel = self.fast.kernel.zip(pass.ask());
        let len = usage.cols.len();
        let (a, b) = parallel::join(
            || pass.range(kernel, 0..mid, deadline, first),
            || pass.range(kernel, mid..len, deadline, second),
        );
        self.fast.image_sums.deactivate();
        a.and(b)
    }

    /// The loop of [`Evaluator::plain_pass`], between adding and removing the pod's image sums:
    /// through the vector kernel block by block where it applies, node by node otherwise.
    #[inline(always)]
    fn plain_nodes(
        &self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        deadline: Deadline,
        sink: &mut impl PlainSink,
    ) -> Result<(), DeadlinePassed> {
        let pass = PlainNodes::new(self, plan, usage);
        pass.range(self.fast.kernel.zip(pass.ask()), 0..usage.cols.len(), deadline, sink)
    }
}

#[cfg(test)]
#[path = "plain_tests.rs"]
mod tests;
