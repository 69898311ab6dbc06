//! The framework the scheduling cycle (`engine/cycle.rs`) runs, the general path for any pod:
//! a policy prepared as a [`Profile`], a pod's plan (its PreFilter state), the profile's filters
//! run on every node, the scores weighed and normalized, the best nodes picked; the reasons and
//! the diagnosis are in [`super::diagnosis`]. The fast paths that give the same answers with
//! less work for the common pod (the plain pass, class replay) are in [`super::accel`].
//!
//! Read top-down, as kube-scheduler's `schedule_one.go`: the answers ([`Ranking`],
//! [`Decision`]); the [`Evaluator`] and its pass over the nodes (`evaluate`: filter and score
//! each node, `eval_node`; then `normalize`); the filters (`filter_node`, `run_filter`, the
//! volume plugins' PreFilter states); the scores; selecting the best (`best_candidate`,
//! `keep_top_k`); then what they read: the [`Profile`], the pod's plan (`PodPlan`,
//! `TopoState`), a batch's usage (`BatchUsage`); the extenders last.
//!
//! Each plugin follows kube-scheduler's implementation, in [`super::plugins`]: the same
//! feasibility rules, the same integer arithmetic for scores, the same normalization, and the
//! same reason strings. A node fails at the first filter that rejects it, as in kube-scheduler's
//! `RunFilterPlugins`, and NodeResourcesFit reports every insufficient resource.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use super::accel::class_cache::{StaticEval, StaticFilters, StaticKey};
use super::accel::class_labels::{affinity_by_class, ClassLabels};
use super::accel::class_replay::{class_decides, ClassReplay};
use super::accel::columns::{HotColumns, Kernel, BLOCK};
use super::accel::image_sums::ImageSums;
use super::accel::rule_columns::RuleColumns;
use super::accel::top_k::kth_total_small;
pub use super::diagnosis::{Diagnosis, GangFailure, Nomination, Reason, RejectedNode};
pub(super) use super::diagnosis::{FlagBuffer, Rejections};
use super::extender::ExtenderHook;
use super::model::{NodeSpec, PodSpec, Toleration};
use super::plugins::interpodaffinity::filtering::InterPodFilter;
use super::plugins::interpodaffinity::scoring as interpod_scoring;
use super::plugins::noderesources::fit;
use super::plugins::podtopologyspread::filtering::SpreadFilter;
use super::plugins::podtopologyspread::scoring::{self as spread_scoring, SpreadScore};
use super::plugins::volumebinding::{self, binder as volume_binder};
use super::plugins::{
    node_affinity, node_declared_features, node_name, node_ports, node_unschedulable, nodevolumelimits,
    taint_toleration, volumerestrictions, volumezone,
};
use super::policy::{FilterPlugin, Policy, ScorePlugin, ScoringStrategy, ShapePoint};
use super::pool::pooled_buffer;
use super::resources::ResourceName;
use super::rules::{self as cel_rules, ClassOutcomes, CompiledRules, NodeStatic, RuleOutcome, SnapshotRules};
use super::snapshot::{
    image_hash, port_key, port_mask, BoundPod, NodeEntry, NodeHot, NodeUsage, NodeView, PortKeys, Snapshot,
    NODE_UNIQUE_LABELS,
};
use super::topology::{DomainCounts, Existing, Placed};

use super::plugins::contract::{Filter, Score};
use super::plugins::image_locality::ImageLocality;
use super::plugins::interpodaffinity::InterPodAffinity;
use super::plugins::node_affinity::NodeAffinity;
use super::plugins::noderesources::balanced_allocation::NodeResourcesBalancedAllocation;
use super::plugins::noderesources::fit::NodeResourcesFit;
use super::plugins::taint_toleration::TaintToleration;
pub use super::plugins::MAX_NODE_SCORE;

/// Why evaluation stopped early.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// The caller's deadline passed.
    #[error("deadline exceeded after {done} of {total} pods")]
    DeadlineExceeded {
        /// Pods decided before the deadline.
        done: usize,
        /// Pods in the batch.
        total: usize,
    },
}

/// When to stop working: a caller's deadline, checked between pods and every few hundred nodes, or
/// the end of the call the work belongs to ([`super::cancel`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    /// No deadline.
    pub fn none() -> Self {
        Self(None)
    }

    /// Stop at this instant.
    pub fn at(instant: Instant) -> Self {
        Self(Some(instant))
    }

    /// True once the deadline has passed or the call has ended.
    pub fn passed(&self) -> bool {
        self.0.is_some_and(|d| Instant::now() >= d) || super::cancel::requested()
    }
}

/// Work stopped early: the call's deadline passed, or the call ended ([`Deadline::passed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DeadlinePassed;

/// A feasible node with its per-plugin normalized scores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankedNode {
    /// Node name.
    pub node: String,
    /// Weighted total.
    pub total: i64,
    /// (plugin, normalized score, weight), in the policy's order.
    pub scores: Vec<(ScorePlugin, i64, i64)>,
}

/// The answer of [`rank`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranking {
    /// The best feasible nodes, best first.
    pub feasible: Vec<RankedNode>,
    /// All feasible nodes.
    pub feasible_count: usize,
    /// The rejected nodes, in name order: all, or the first [`Evaluator::with_rejected_limit`].
    pub rejected: Vec<RejectedNode>,
    /// The reason histogram.
    pub diagnosis: Diagnosis,
}

/// The verdict for one pod of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Place the pod on this node.
    Node {
        /// Node name.
        node: String,
        /// Its total score.
        score: i64,
        /// How many nodes were feasible.
        feasible: usize,
        /// VolumeBinding's choices for the pod's unbound WaitForFirstConsumer claims on the
        /// node, by claim key (`namespace/name`); empty when it has none.
        volumes: Vec<(String, super::volumes::VolumeChoice)>,
    },
    /// No node fits.
    Unschedulable(Diagnosis),
}

/// Evaluates pods against one snapshot with one profile.
pub struct Evaluator<'a> {
    pub(super) profile: &'a Profile,
    pub(super) snapshot: &'a Snapshot,
    pub(super) candidates: CandidateBuffer,
    /// Per node, the sum of the current pod's image sizes there, each scaled by its spread
    /// (kept per set of images for the pods to come).
    pub(super) image_sums: ImageSums,
    /// The maxima the last normalization used, per score slot.
    pub(crate) norm_max: [i64; MAX_SCORES],
    /// The minima the last normalization used, per score slot (InterPodAffinity, PodTopologySpread).
    pub(crate) norm_min: [i64; MAX_SCORES],
    /// Whether InterPodAffinity and PodTopologySpread scored the current pod (PreScore not skipped).
    pub(crate) topo_active: TopoActive,
    /// Whether Schedule re-scores only the node that changed for a pod identical to the one before.
    pub(super) reuse: bool,
    /// Whether Schedule may take the plain pass (tests turn it off to compare with the general one).
    pub(super) allow_plain: bool,
    /// Whether the reasons pass answers a class's nodes from its first one where the class alone
    /// rejects them (see `ClassReplay`); tests turn it off to compare with every node filtered.
    pub(crate) class_replay: bool,
    /// The plain pass's vector kernel, `None` on a CPU without one (and when tests turn it off).
    pub(crate) kernel: Option<Kernel>,
    /// Nodes from which Schedule's plain pass splits a pod's nodes in two halves run on two
    /// cores ([`super::parallel`]): [`super::parallel::MIN_SPLIT_NODES`] with two threads, never
    /// with one (tests lower it to compare split and whole passes).
    pub(crate) split_from: usize,
    /// Whether the pass is split while other calls evaluate too (`parallel::alone` false); tests
    /// set it so that running alongside other tests does not change what they compare.
    pub(crate) split_when_busy: bool,
    /// How many rejected nodes Rank lists; `None` lists all.
    pub(super) rejected_limit: Option<usize>,
    /// Per node class, the best node so far of [`Evaluator::evaluate_best`] (kept for its buffer).
    pub(crate) class_best: Vec<ClassBest>,
    /// Per node class, the part of that node (kept for its buffer).
    pub(crate) class_bars: Vec<i64>,
    /// [`Evaluator::class_best`] and [`Evaluator::class_bars`] of the second half of a split
    /// pass (kept for their buffers).
    pub(crate) second_best: (Vec<ClassBest>, Vec<i64>),
    /// Raw scores of the policy's score rules, per node (`score_rules` per node, node order).
    pub(crate) rule_raw: RefCell<Vec<i64>>,
    /// Per score rule, the minimum and maximum raw score over the feasible nodes.
    pub(crate) rule_extrema: Vec<(i64, i64)>,
    /// Per node, the parts of its CEL value that do not change with usage, built on first use.
    pub(crate) node_statics: RefCell<Vec<Option<NodeStatic>>>,
    /// What the snapshot keeps of the policy's rules (the pod-free node rules' outcomes on its
    /// nodes among them: see [`SnapshotRules`]); `None` without rules.
    pub(crate) node_rules: Option<Arc<SnapshotRules>>,
    /// The same on the nodes a batch changed, by node and rule, under the usage's stamp.
    pub(crate) changed_rules: HashMap<(u32, u32), (u64, RuleOutcome)>,
    /// The pod-free node rules' outcomes by column, as the last batch left them (see
    /// [`Evaluator::rule_columns`]).
    pub(crate) rule_cols: Option<RuleColumns>,
    /// The policy's extenders, called by Schedule for the pods they are interested in.
    pub(super) extenders: Option<&'a dyn ExtenderHook>,
}

pooled_buffer!(
    pub(super) CandidateBuffer,
    Candidate,
    SPARE_CANDIDATES,
    "An evaluator's candidate list (cleared before each use)."
);

impl<'a> Evaluator<'a> {
    /// An evaluator of `snapshot` under `profile`.
    pub fn new(profile: &'a Profile, snapshot: &'a Snapshot) -> Self {
        let mut candidates = CandidateBuffer::take_spare();
        candidates.clear();
        candidates.reserve(snapshot.nodes().len());
        Self {
            profile,
            snapshot,
            candidates,
            image_sums: ImageSums::new(),
            norm_max: [0; MAX_SCORES],
            norm_min: [0; MAX_SCORES],
            topo_active: TopoActive::default(),
            reuse: true,
            allow_plain: true,
            class_replay: true,
            kernel: Kernel::detect(),
            split_from: if super::parallel::threads() >= 2 {
                super::parallel::MIN_SPLIT_NODES
            } else {
                usize::MAX
            },
            split_when_busy: false,
            rejected_limit: None,
            class_best: Vec::new(),
            class_bars: Vec::new(),
            second_best: (Vec::new(), Vec::new()),
            rule_raw: RefCell::new(vec![0; snapshot.nodes().len() * profile.score_rules()]),
            rule_extrema: vec![(0, 0); profile.score_rules()],
            node_statics: RefCell::new(if profile.has_rules() {
                vec![None; snapshot.nodes().len()]
            } else {
                Vec::new()
            }),
            node_rules: match &profile.rules {
                Some(Ok(rules)) => Some(cel_rules::snapshot_rules(snapshot, rules)),
                _ => None,
            },
            changed_rules: HashMap::new(),
            rule_cols: None,
            extenders: None,
        }
        .reusing(!profile.has_rules())
    }

    /// Whether Schedule re-scores only the changed node for a pod like the one before (rules
    /// may read any field of the pod, its name included, so not under a policy with rules).
    fn reusing(mut self, reuse: bool) -> Self {
        self.reuse = reuse;
        self
    }

    /// Lists at most `limit` rejected nodes (in name order) in each [`Ranking`]; the diagnosis
    /// still counts every node, except that with `Some(0)` and some node feasible no reasons are
    /// gathered at all (nothing would show them). `None` (the default) lists all.
    pub fn with_rejected_limit(mut self, limit: Option<usize>) -> Self {
        self.rejected_limit = limit;
        self
    }

    /// Calls `hook` in Schedule, after the filters and rules, for the pods it is interested in
    /// (see [`super::extender`]).
    pub fn with_extenders(mut self, hook: &'a dyn ExtenderHook) -> Self {
        self.extenders = Some(hook);
        self
    }

    /// The snapshot evaluated.
    pub fn snapshot(&self) -> &'a Snapshot {
        self.snapshot
    }

    /// Makes the pod's per-node sums of scaled image sizes current (see [`ImageSums`]), unless
    /// it has no image on any node or ImageLocality does not score; [`ImageSums::deactivate`]
    /// after the pod.
    pub(super) fn image_sums(&mut self, plan: &PodPlan<'_>) {
        if plan.images.is_empty()
            || !self
                .profile
                .score_plugins
                .iter()
                .any(|(p, _)| *p == ScorePlugin::ImageLocality)
        {
            return;
        }
        let total_nodes = self.snapshot.nodes().len();
        // Padded to whole blocks for the plain pass's kernel (the padding stays 0).
        let padded = total_nodes.div_ceil(BLOCK) * BLOCK;
        self.image_sums
            .activate(&plan.images, self.snapshot.image_postings(), total_nodes, padded);
    }

    /// Filters and scores every node for one pod, leaving normalized candidates in `self.candidates`.
    pub(super) fn evaluate(
        &mut self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        placed: &Placed<'_>,
        deadline: Deadline,
        mut rejections: Option<&mut Rejections<'_>>,
    ) -> Result<(), DeadlinePassed> {
        self.candidates.clear();
        self.image_sums(plan);
        let snapshot = self.snapshot;
        let hot = &*usage.hot;
        let mut replay = ClassReplay::new();
        // A node's CEL rules may each spend a whole evaluation's budget (`rule_cost`): with
        // rules, every node is a poll.
        let every_node = self.profile.rules.is_some();
        for (i, entry) in snapshot.nodes().iter().enumerate() {
            // A node of the general pass may cost much (per-node selectors, topology terms): poll
            // often enough that a deadline or a cancelled call stops it promptly.
            if (every_node || i % 256 == 255) && deadline.passed() {
                self.image_sums.deactivate();
                return Err(DeadlinePassed);
            }
            let candidate = match rejections.as_deref_mut() {
                Some(rejections) => self.filter_with_reasons(plan, usage, i, entry, &mut replay, rejections),
                None => self.eval_node(plan, usage, i, entry, hot, &mut |_, _| {}),
            };
            if let Some(c) = candidate {
                self.candidates.push(c);
            }
        }
        if let Some(rejections) = rejections {
            replay.count(rejections);
        }
        self.image_sums.deactivate();
        self.topo_scores(plan, placed);
        self.normalize();
        Ok(())
    }

    /// Filters and scores node `i` as [`Evaluator::eval_node`] does, its reasons taken by
    /// `rejections`, or only those from its class when `replay` knows them.
    pub(super) fn filter_with_reasons(
        &self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        i: usize,
        entry: &NodeEntry,
        replay: &mut ClassReplay,
        rejections: &mut Rejections<'_>,
    ) -> Option<Candidate> {
        let class = usage.cols.class(i) as usize;
        if plan.per_node || !self.class_replay || replay.node_by_node(class) {
            return self.eval_node(plan, usage, i, entry, &usage.hot, &mut |plugin, reason| {
                rejections.add(i, plugin, reason)
            });
        }
        if replay.replay(class, i, rejections) {
            return None;
        }
        // The first filter that rejected the node; its reasons go to the arena from `start` on.
        let mut seen: Option<FilterPlugin> = None;
        let start = replay.reasons.len();
        let candidate = self.eval_node(plan, usage, i, entry, &usage.hot, &mut |plugin, reason| {
            seen.get_or_insert(plugin);
            replay.reasons.push(reason.clone());
            rejections.add(i, plugin, reason);
        });
        // The filters `eval_node` ran (see there).
        let filters = if plan.topo.is_some() || plan.volumes.is_some() {
            &self.profile.policy.filters
        } else {
            &self.profile.plain_filters
        };
        let by_class = seen.is_some_and(|f| class_decides(filters, plan.per_node, plan.pod, f));
        replay.learn(class, seen, start, by_class, rejections.unresolvable[i]);
        candidate
    }

    /// PodTopologySpread's raw scores, which depend on the set of feasible nodes, and which of the
    /// topology plugins score this pod.
    fn topo_scores(&mut self, plan: &PodPlan<'_>, placed: &Placed<'_>) {
        let topo = plan.topo.as_deref();
        let interpod = topo.is_some_and(|t| t.interpod_score.is_some());
        let spread_score = topo.and_then(|t| t.spread_score.as_ref());
        self.topo_active = TopoActive {
            interpod,
            spread: spread_score.is_some() && !self.candidates.is_empty(),
        };
        let (Some(score), Some(slot)) = (
            spread_score,
            self.profile
                .score_plugins
                .iter()
                .position(|(p, _)| *p == ScorePlugin::PodTopologySpread),
        ) else {
            return;
        };
        if self.candidates.is_empty() || slot >= MAX_SCORES {
            return;
        }
        let snapshot = self.snapshot;
        let statics = |i: usize| {
            let se = plan.static_at(snapshot, i);
            (se.mismatched, se.untolerated)
        };
        let nodes: Vec<usize> = self.candidates.iter().map(|c| c.index as usize).collect();
        let raw = score.scores(&Existing { snapshot, placed }, plan.pod, &nodes, &statics);
        for (c, r) in self.candidates.iter_mut().zip(raw) {
            c.raw[slot] = r;
        }
    }

    /// Filters one node and computes its raw scores; `None` when a filter rejects it.
    pub(super) fn eval_node(
        &self,
        plan: &PodPlan<'_>,
        usage: &BatchUsage<'_>,
        i: usize,
        entry: &NodeEntry,
        hot: &[NodeHot],
        on_reject: &mut impl FnMut(FilterPlugin, Reason),
    ) -> Option<Candidate> {
        let profile = self.profile;
        let h = &hot[i];
        let se = if plan.per_node {
            plan.static_eval(&entry.spec)
        } else {
            plan.class_evals[h.class as usize]
        };
        let node = NodeView {
            index: i,
            hot: h,
            entry,
            usage: usage.get(i),
        };
        if let Some(message) = &plan.volume_error {
            on_reject(
                FilterPlugin::VolumeBinding,
                Reason::VolumePreFilter(Arc::clone(message)),
            );
            return None;
        }
        // Without topology or volume state those filters pass every node: skip them.
        let filters = if plan.topo.is_some() || plan.volumes.is_some() {
            &profile.policy.filters
        } else {
            &profile.plain_filters
        };
        for &f in filters {
            if !run_filter(f, plan, plan.topo.as_deref(), &se, &node, &mut |r| on_reject(f, r)) {
                return None;
            }
        }
        if let Some(rules) = &profile.rules {
            if let Err(reason) = self.eval_rules(rules, plan, i, entry, node.usage) {
                on_reject(FilterPlugin::Rules, Reason::Rule(reason));
                return None;
            }
        }
        let mut raw = [0i64; MAX_SCORES];
        let slots = if plan.topo.is_some() {
            &profile.all_slots
        } else {
            &profile.plain_slots
        };
        for &(slot, plugin, _) in slots {
            // Each line registers a score plugin through the plugins' contract ([`Score`]).
            raw[slot] = match plugin {
                ScorePlugin::NodeResourcesFit => score::<NodeResourcesFit>(
                    fit::ScoreInput {
                        strategy: &profile.policy.scoring_strategy,
                        cpu_memory: profile.fit_cpu_memory,
                        shape: &profile.shape,
                        resources: &profile.fit_resources,
                        requests: &plan.fit_requests,
                    },
                    &node,
                ),
                ScorePlugin::NodeResourcesBalancedAllocation => score::<NodeResourcesBalancedAllocation>(
                    (
                        profile.balanced_cpu_memory,
                        &profile.balanced_resources,
                        plan.balanced_requests.as_deref(),
                    ),
                    &node,
                ),
                ScorePlugin::NodeAffinity => score::<NodeAffinity>(se.affinity_weight, &node),
                ScorePlugin::TaintToleration => score::<TaintToleration>(se.prefer_taints, &node),
                ScorePlugin::ImageLocality => {
                    let sum = self.image_sums.get().get(i).copied().unwrap_or(0);
                    score::<ImageLocality>((!plan.images.is_empty()).then_some((plan.pod.images.len(), sum)), &node)
                }
                ScorePlugin::InterPodAffinity => {
                    score::<InterPodAffinity>(plan.topo.as_ref().and_then(|t| t.interpod_score.as_ref()), &node)
                }
                ScorePlugin::VolumeBinding => score::<volumebinding::VolumeBinding>(
                    plan.volumes
                        .as_deref()
                        .and_then(|v| Some((v.binding.as_ref()?, &v.storage))),
                    &node,
                ),
                // Filled in after filtering: it depends on the feasible nodes.
                ScorePlugin::PodTopologySpread => 0,
            };
        }
        Some(Candidate {
            index: i as u32,
            raw,
            total: 0,
        })
    }

    /// Runs the policy's CEL rules on node `i` after the filter plugins passed it: its score
    /// rules' raw scores go to `rule_raw`; the reason when a rule rejects it or fails.
    fn eval_rules(
        &self,
        rules: &Result<Arc<CompiledRules>, Arc<str>>,
        plan: &PodPlan<'_>,
        i: usize,
        entry: &NodeEntry,
        usage: &NodeUsage,
    ) -> Result<(), Arc<str>> {
        let rules = rules.as_ref().map_err(Arc::clone)?;
        let Some(pod) = &plan.rule_pod else {
            return Ok(());
        };
        // The node's context, built when a rule reads the node itself.
        let node_context = || {
            let node = rule_node_value(&mut self.node_statics.borrow_mut(), i, entry, usage);
            rules.context(pod, node)
        };
        // The rules that read only what the node's class shares: evaluated once per class for
        // the pod (see `PodPlan::class_rule_outcomes`).
        let class = entry.class as usize;
        let filters = rules.filters.len();
        plan.class_rule_outcomes(rules, self.snapshot, class);
        let mut node_ctx = None;
        let mut outcome = |k: usize| {
            if rules.class_level(k) {
                plan.class_outcome(k, class)
            } else {
                rules.run(k, node_ctx.get_or_insert_with(node_context))
            }
        };
        for k in 0..filters {
            outcome(k)?;
        }
        let n = rules.scores.len();
        let mut raw = self.rule_raw.borrow_mut();
        let mut spare = [0i64; cel_rules::MAX_RULES];
        let out = match raw.get_mut(i * n..(i + 1) * n) {
            Some(out) => out,
            None => &mut spare[..n],
        };
        for (k, out) in out.iter_mut().enumerate() {
            *out = outcome(filters + k)?;
        }
        Ok(())
    }

    /// The weighted, normalized scores of the score rules for node `i`: each raw score min-max
    /// scaled to 0..=100 over the feasible nodes (0 when they all score alike).
    fn rules_part(&self, i: usize) -> i64 {
        let n = self.profile.score_rules();
        let raw = self.rule_raw.borrow();
        match raw.get(i * n..(i + 1) * n) {
            Some(scores) => self.rule_scaling().part(scores),
            None => 0,
        }
    }

    /// How [`Evaluator::rules_part`] scales each score rule with the extrema set last.
    pub(crate) fn rule_scaling(&self) -> RuleScaling {
        let mut scaling = RuleScaling::default();
        if let Some(Ok(rules)) = &self.profile.rules {
            for (rule, &(min, max)) in rules.scores.iter().zip(&self.rule_extrema) {
                scaling.rules[scaling.len] = (min, max, rule.weight);
                scaling.len += 1;
            }
        }
        scaling
    }

    /// The extrema of each score rule's raw scores over the candidates.
    fn rule_extrema_of_candidates(&mut self) {
        let n = self.profile.score_rules();
        if n == 0 {
            return;
        }
        let raw = self.rule_raw.borrow();
        let mut extrema = vec![(i64::MAX, i64::MIN); n];
        for c in self.candidates.iter() {
            let i = c.index as usize;
            if let Some(scores) = raw.get(i * n..(i + 1) * n) {
                for (e, &r) in extrema.iter_mut().zip(scores) {
                    *e = (e.0.min(r), e.1.max(r));
                }
            }
        }
        drop(raw);
        self.rule_extrema = settled(extrema);
    }

    /// After a pod identical to the one the candidates were computed for was placed on node `x`:
    /// re-filters and re-scores that node only (every other node's scores are unchanged, and its
    /// static and image scores are too), and redoes normalization only if its maxima moved.
    pub(super) fn update_placed(&mut self, plan: &PodPlan<'_>, usage: &BatchUsage<'_>, x: usize) {
        // Candidates stay in node order (evaluation pushes them so, removal keeps it).
        let Ok(pos) = self.candidates.binary_search_by_key(&(x as u32), |c| c.index) else {
            return;
        };
        let entry = &self.snapshot.nodes()[x];
        match self.eval_node(plan, usage, x, entry, &usage.hot, &mut |_, _| {}) {
            Some(fresh) => {
                let c = &mut self.candidates[pos];
                for (slot, (plugin, _)) in self.profile.score_plugins.iter().enumerate().take(MAX_SCORES) {
                    if matches!(
                        plugin,
                        ScorePlugin::NodeResourcesFit | ScorePlugin::NodeResourcesBalancedAllocation
                    ) {
                        c.raw[slot] = fresh.raw[slot];
                    }
                }
                let mut c = *c;
                self.normalize_one(&mut c);
                self.candidates[pos] = c;
            }
            None => {
                let gone = self.candidates.remove(pos);
                if gone.raw.iter().zip(&self.norm_max).any(|(r, m)| r == m) {
                    self.normalize();
                }
            }
        }
    }

    /// The normalized score of one plugin (at `slot`) from its raw score, with the extrema of the
    /// last [`Evaluator::normalize`].
    #[inline]
    pub(super) fn normalized(&self, plugin: ScorePlugin, slot: usize, raw: i64) -> i64 {
        let max = self.norm_max[slot];
        match plugin {
            ScorePlugin::NodeAffinity => node_affinity::normalize(raw, max),
            ScorePlugin::TaintToleration => taint_toleration::normalize(raw, max),
            ScorePlugin::InterPodAffinity if self.topo_active.interpod => {
                interpod_scoring::normalize(raw, self.norm_min[slot], max)
            }
            ScorePlugin::PodTopologySpread if self.topo_active.spread => {
                spread_scoring::normalize(raw, self.norm_min[slot], max)
            }
            // PreScore skipped: the plugin gives every node 0.
            ScorePlugin::PodTopologySpread => 0,
            _ => raw,
        }
    }

    /// Normalizes one candidate with the extrema of the last [`Evaluator::normalize`], and weighs it.
    fn normalize_one(&self, c: &mut Candidate) {
        let mut total = 0;
        // Inactive topology plugins give every node 0.
        let slots = if self.topo_active.interpod || self.topo_active.spread {
            &self.profile.all_slots
        } else {
            &self.profile.plain_slots
        };
        for &(slot, plugin, weight) in slots {
            total += self.normalized(plugin, slot, c.raw[slot]) * weight;
        }
        if self.profile.rules.is_some() {
            total += self.rules_part(c.index as usize);
        }
        c.total = total;
    }

    /// kube-scheduler's `DefaultNormalizeScore` for NodeAffinity and (reversed) TaintToleration,
    /// then the weighted totals.
    fn normalize(&mut self) {
        /// What normalization needs of a slot's raw scores.
        #[derive(Clone, Copy, PartialEq)]
        enum Need {
            Nothing,
            Max,
            MaxMin,
            /// PodTopologySpread: max (at least 0) and min over the scores that are not ignored.
            Spread,
        }
        let mut need = [Need::Nothing; MAX_SCORES];
        for (slot, (plugin, _)) in self.profile.score_plugins.iter().enumerate().take(MAX_SCORES) {
            need[slot] = match plugin {
                ScorePlugin::NodeAffinity | ScorePlugin::TaintToleration => Need::Max,
                ScorePlugin::InterPodAffinity if self.topo_active.interpod => Need::MaxMin,
                ScorePlugin::PodTopologySpread if self.topo_active.spread => Need::Spread,
                _ => Need::Nothing,
            };
        }
        // One pass over the candidates for every slot's extrema.
        let mut max = [i64::MIN; MAX_SCORES];
        let mut min = [i64::MAX; MAX_SCORES];
        if need.iter().any(|n| *n != Need::Nothing) {
            for c in self.candidates.iter() {
                for slot in 0..MAX_SCORES {
                    let r = c.raw[slot];
                    match need[slot] {
                        Need::Nothing => {}
                        Need::Max => max[slot] = max[slot].max(r),
                        Need::MaxMin => {
                            max[slot] = max[slot].max(r);
                            min[slot] = min[slot].min(r);
                        }
                        Need::Spread if r != spread_scoring::IGNORED => {
                            max[slot] = max[slot].max(r);
                            min[slot] = min[slot].min(r);
                        }
                        Need::Spread => {}
                    }
                }
            }
        }
        for slot in 0..MAX_SCORES {
            let any = max[slot] != i64::MIN;
            (max[slot], min[slot]) = match need[slot] {
                Need::Nothing => (0, 0),
                Need::Max if any => (max[slot], 0),
                Need::Max => (0, 0),
                Need::MaxMin if any => (max[slot], min[slot]),
                Need::MaxMin => (0, 0),
                // No kept score: max 0 and min i64::MAX, as before.
                Need::Spread => (max[slot].max(0), min[slot]),
            };
        }
        self.norm_max = max;
        self.norm_min = min;
        self.rule_extrema_of_candidates();
        let mut candidates = std::mem::take(&mut self.candidates);
        for c in candidates.iter_mut() {
            self.normalize_one(c);
        }
        self.candidates = candidates;
    }
}

/// Runs every filter of the profile for the pod on node `i` with the given usage and topology
/// state (preemption's dry runs pass theirs; otherwise the plan's); reports each rejection and
/// returns whether the node passes.
pub(super) fn filter_node(
    profile: &Profile,
    plan: &PodPlan<'_>,
    topo: Option<&TopoState>,
    index: usize,
    entry: &NodeEntry,
    usage: &NodeUsage,
    report: &mut impl FnMut(FilterPlugin, Reason),
) -> bool {
    let hot = NodeHot::of(entry, usage);
    let se = if plan.per_node {
        plan.static_eval(&entry.spec)
    } else {
        plan.class_evals[entry.class as usize]
    };
    let node = NodeView {
        index,
        hot: &hot,
        entry,
        usage,
    };
    profile
        .policy
        .filters
        .iter()
        .all(|&f| run_filter(f, plan, topo, &se, &node, &mut |r| report(f, r)))
}

/// Runs one filter plugin of the profile on a node, through the plugins' contract
/// ([`Filter`]): each line below registers a plugin, with the input its PreFilter resolved for
/// the pod and the [`Reason`] its rejections are worded as. Reports each rejection and returns
/// whether the node passes.
fn run_filter(
    plugin: FilterPlugin,
    plan: &PodPlan<'_>,
    topo: Option<&TopoState>,
    se: &StaticEval,
    node: &NodeView<'_>,
    report: &mut impl FnMut(Reason),
) -> bool {
    use super::plugins::podtopologyspread::PodTopologySpread;
    use super::plugins::volumebinding::VolumeBinding;
    use node_declared_features::NodeDeclaredFeatures;
    use node_name::NodeName;
    use node_ports::NodePorts;
    use node_unschedulable::NodeUnschedulable;
    use nodevolumelimits::NodeVolumeLimits;
    use volumerestrictions::VolumeRestrictions;
    use volumezone::VolumeZone;
    let (pod, volumes) = (plan.pod, plan.volumes.as_deref());
    match plugin {
        FilterPlugin::NodeUnschedulable => {
            filter::<NodeUnschedulable>(se.cordoned, node, |()| Reason::NodeUnschedulable, report)
        }
        FilterPlugin::NodeName => filter::<NodeName>(pod, node, |()| Reason::NodeNameMismatch, report),
        FilterPlugin::NodeDeclaredFeatures => {
            filter::<NodeDeclaredFeatures>(pod, node, |()| Reason::NodeDeclaredFeatures, report)
        }
        FilterPlugin::TaintToleration => {
            filter::<TaintToleration>(se.untolerated, node, |()| Reason::UntoleratedTaint, report)
        }
        FilterPlugin::NodeAffinity => {
            filter::<NodeAffinity>(se.mismatched, node, |()| Reason::NodeAffinityMismatch, report)
        }
        FilterPlugin::NodePorts => filter::<NodePorts>(
            (plan.may_conflict(node.hot.port_bits), &pod.host_ports),
            node,
            |()| Reason::NodePortsConflict,
            report,
        ),
        FilterPlugin::NodeResourcesFit => filter::<NodeResourcesFit>(
            &pod.requests,
            node,
            |r| match r {
                ResourceName::Pods => Reason::TooManyPods,
                r => Reason::Insufficient(r),
            },
            report,
        ),
        FilterPlugin::PodTopologySpread => filter::<PodTopologySpread>(
            topo.and_then(|t| t.spread_filter.as_ref()),
            node,
            Reason::TopologySpread,
            report,
        ),
        FilterPlugin::InterPodAffinity => filter::<InterPodAffinity>(
            topo.and_then(|t| t.interpod_filter.as_ref()),
            node,
            Reason::InterPodAffinity,
            report,
        ),
        FilterPlugin::VolumeRestrictions => filter::<VolumeRestrictions>(
            volumes.and_then(|v| v.restrictions.as_ref()),
            node,
            Reason::VolumeRestrictions,
            report,
        ),
        FilterPlugin::NodeVolumeLimits => filter::<NodeVolumeLimits>(
            volumes.and_then(|v| Some((v.limits.as_ref()?, &v.storage))),
            node,
            |v| match v {
                nodevolumelimits::Violation::MaxVolumeCount => Reason::NodeVolumeLimits,
                nodevolumelimits::Violation::DriverNotInstalled(d) => Reason::CsiDriverNotInstalled(Arc::from(d)),
            },
            report,
        ),
        FilterPlugin::VolumeBinding => filter::<VolumeBinding>(
            volumes.and_then(|v| Some((v.binding.as_ref()?, &v.storage))),
            node,
            Reason::VolumeBinding,
            report,
        ),
        FilterPlugin::VolumeZone => filter::<VolumeZone>(
            volumes.and_then(|v| v.zone.as_ref()),
            node,
            |()| Reason::VolumeZone,
            report,
        ),
        // Never in a policy's filter list: rules run after the filters (see `Evaluator::eval_node`).
        FilterPlugin::Rules => true,
    }
}

/// Calls plugin `P`'s Score with `input`.
#[inline(always)]
fn score<P: Score>(input: P::In<'_>, node: &NodeView<'_>) -> i64 {
    P::score(input, node)
}

/// Calls plugin `P`'s Filter with `input`, its rejections worded by `reason`.
#[inline(always)]
fn filter<P: Filter>(
    input: P::In<'_>,
    node: &NodeView<'_>,
    reason: impl Fn(P::Rejection) -> Reason,
    report: &mut impl FnMut(Reason),
) -> bool {
    P::filter(input, node, &mut |r| report(reason(r)))
}

/// The volume plugins' PreFilter states for one pod (kube-scheduler's `CycleState` entries of
/// VolumeRestrictions, NodeVolumeLimits, VolumeBinding and VolumeZone), each `None` when its
/// plugin is not in the profile.
#[derive(Debug, Clone, Default)]
pub struct PodVolumes {
    /// The snapshot's storage objects (shared, copy-on-write).
    storage: super::volumes::StorageObjects,
    /// VolumeRestrictions'.
    restrictions: Option<volumerestrictions::PreFilterState>,
    /// NodeVolumeLimits'.
    limits: Option<nodevolumelimits::PreFilterState>,
    /// VolumeBinding's.
    binding: Option<volumebinding::PreFilterState>,
    /// VolumeZone's.
    zone: Option<volumezone::PreFilterState>,
}

impl PodVolumes {
    /// The PreFilter of the enabled volume plugins, in kube-scheduler's order
    /// (VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone): `Ok(None)` when no
    /// plugin has work for the pod, `Err` with the first rejecting plugin's message (every node
    /// is then rejected, unresolvably).
    pub fn pre_filter(
        storage: &super::volumes::StorageObjects,
        filters: super::volumes::VolumeFilters,
        pod: &PodSpec,
        claim_users: &super::volumes::ClaimUsers<'_>,
        batch: &super::volumes::BatchVolumes,
    ) -> Result<Option<Self>, String> {
        let (namespace, volumes) = (pod.namespace.as_str(), &pod.volumes);
        if volumes.is_empty() || !filters.any() {
            return Ok(None);
        }
        let mut out = Self {
            storage: storage.clone(),
            ..Default::default()
        };
        if filters.restrictions {
            out.restrictions = Some(volumerestrictions::PreFilterState::pre_filter(
                storage,
                namespace,
                volumes,
                claim_users,
                batch,
            )?);
        }
        if filters.limits {
            out.limits = Some(nodevolumelimits::PreFilterState::pre_filter(
                storage, namespace, volumes,
            ));
        }
        if filters.binding {
            out.binding = Some(volumebinding::PreFilterState::pre_filter(
                storage, &pod.uid, namespace, &pod.name, volumes, batch,
            )?);
        }
        if filters.zone {
            out.zone = Some(volumezone::PreFilterState::pre_filter(storage, namespace, volumes)?);
        }
        Ok(Some(out))
    }

    /// VolumeBinding's Filter on the node (no choices when the plugin is not in the profile).
    pub fn binding(
        &self,
        node: &NodeSpec,
    ) -> Result<Vec<(String, super::volumes::VolumeChoice)>, Vec<volume_binder::Conflict>> {
        match &self.binding {
            Some(b) => b.filter(&self.storage, node),
            None => Ok(Vec::new()),
        }
    }
}

/// Score rules' extrema as gathered (least, greatest), with (0, 0) for a rule no node was
/// scored by.
pub(crate) fn settled(extrema: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    extrema
        .into_iter()
        .map(|e| if e.0 > e.1 { (0, 0) } else { e })
        .collect()
}

/// Node `i`'s CEL value with `usage`, its usage-independent part built once in `statics` (when
/// it has room for the node).
pub(crate) fn rule_node_value(
    statics: &mut [Option<NodeStatic>],
    i: usize,
    entry: &NodeEntry,
    usage: &NodeUsage,
) -> cel::Value {
    match statics.get_mut(i) {
        Some(slot) => cel_rules::node_value(slot.get_or_insert_with(|| NodeStatic::of(&entry.spec)), usage),
        None => cel_rules::node_value(&NodeStatic::of(&entry.spec), usage),
    }
}

/// Each score rule's extrema over the feasible nodes and weight: what turns its raw scores into
/// the node's part of the total (see [`Evaluator::rules_part`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RuleScaling {
    rules: [(i64, i64, i64); cel_rules::MAX_RULES],
    pub(crate) len: usize,
}

impl RuleScaling {
    /// The weighted sum of `scores` (one per score rule), each min-max scaled to 0..=100 (0 when
    /// every feasible node scores alike); 64-bit arithmetic where it cannot overflow.
    #[inline]
    pub(crate) fn part(&self, scores: &[i64]) -> i64 {
        let mut total = 0i64;
        for (&(min, max, weight), &r) in self.rules[..self.len].iter().zip(scores) {
            if max <= min {
                continue;
            }
            let normalized = match (max.checked_sub(min), r.checked_sub(min)) {
                (Some(span), Some(d)) if (0..=i64::MAX / MAX_NODE_SCORE).contains(&d) => MAX_NODE_SCORE * d / span,
                _ => {
                    let span = i128::from(max) - i128::from(min);
                    (i128::from(MAX_NODE_SCORE) * (i128::from(r) - i128::from(min)) / span) as i64
                }
            };
            total += normalized * weight;
        }
        total
    }
}

/// The item with the highest (total, tie-break, node index) by `key` (total and index), in one
/// pass that hashes only items tied with the best total so far. For a list in node order, the
/// last of equals, as `max_by_key` picks.
pub(super) fn best_candidate<T>(
    items: impl IntoIterator<Item = T>,
    key: impl Fn(&T) -> (i64, u32),
    tie_break: impl Fn(&T) -> u64,
) -> Option<T> {
    let mut iter = items.into_iter();
    let mut best = iter.next()?;
    let mut best_hash: Option<u64> = None;
    for c in iter {
        let ((total, index), (best_total, best_index)) = (key(&c), key(&best));
        if total > best_total {
            best = c;
            best_hash = None;
        } else if total == best_total {
            let bh = *best_hash.get_or_insert_with(|| tie_break(&best));
            let ch = tie_break(&c);
            if (ch, index) > (bh, best_index) {
                best = c;
                best_hash = Some(ch);
            }
        }
    }
    Some(best)
}

/// Keeps the `k` best of `items` by `cmp` (best first in `cmp`'s order), in no particular
/// order: partitions on the total alone (no hashing), keeps every item above the k-th total, and
/// breaks ties only among the items equal to it. Keeps all when `k` is 0 or covers them.
pub(super) fn keep_top_k<T: Copy>(
    items: &mut Vec<T>,
    k: usize,
    total: impl Fn(&T) -> i64,
    cmp: impl Fn(&T, &T) -> std::cmp::Ordering,
) {
    if k == 0 || k >= items.len() {
        return;
    }
    let threshold = match kth_total_small(items, k, &total) {
        Some(t) => t,
        None => {
            items.select_nth_unstable_by(k - 1, |a, b| total(b).cmp(&total(a)));
            total(&items[k - 1])
        }
    };
    let mut tied: Vec<T> = items.iter().filter(|c| total(c) == threshold).copied().collect();
    items.retain(|c| total(c) > threshold);
    let need = k - items.len();
    if need < tied.len() {
        tied.select_nth_unstable_by(need - 1, cmp);
        tied.truncate(need);
    }
    items.extend(tied);
}

/// A policy prepared for evaluation.
#[derive(Debug, Clone)]
pub struct Profile {
    pub(super) policy: Policy,
    pub(super) score_plugins: Vec<(ScorePlugin, i64)>,
    fit_resources: Vec<(ResourceName, i64)>,
    balanced_resources: Vec<ResourceName>,
    shape: Vec<ShapePoint>,
    /// Weights when NodeResourcesFit scores exactly cpu then memory with Least/MostAllocated.
    pub(crate) fit_cpu_memory: Option<(i64, i64)>,
    /// BalancedAllocation compares exactly cpu then memory.
    balanced_cpu_memory: bool,
    /// The filters without PodTopologySpread and InterPodAffinity, for pods neither has work for.
    plain_filters: Vec<FilterPlugin>,
    /// (slot, plugin, weight) of every score plugin.
    all_slots: Vec<(usize, ScorePlugin, i64)>,
    /// The same without PodTopologySpread and InterPodAffinity, which give 0 to every node of a
    /// pod they have no work for.
    pub(crate) plain_slots: Vec<(usize, ScorePlugin, i64)>,
    /// The score slot of each plugin the plain pass computes per node, if the policy scores it.
    pub(crate) slot_of: PlainSlots,
    /// Whether the filters reading node classes (cordon, taints, node affinity) are enabled, in
    /// that order.
    static_filters: StaticFilters,
    /// Which volume filters are enabled.
    volume_filters: super::volumes::VolumeFilters,
    /// The policy's CEL rules, compiled; `None` without rules (the plain pass stays open), or
    /// the compile error (every node is then rejected with it).
    rules: Option<Result<Arc<CompiledRules>, Arc<str>>>,
}

/// Score slots the plain pass (see [`Evaluator::evaluate_plain`]) fills in per node.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PlainSlots {
    pub(crate) fit: Option<usize>,
    pub(crate) balanced: Option<usize>,
    pub(crate) image: Option<usize>,
    /// NodeAffinity and TaintToleration, whose raw scores come from the node's class.
    pub(crate) affinity: Option<usize>,
    pub(crate) taints: Option<usize>,
}

impl Profile {
    /// Prepares a validated policy.
    pub fn new(policy: Policy) -> Self {
        let shape = match &policy.scoring_strategy {
            ScoringStrategy::RequestedToCapacityRatio { shape } => shape
                .iter()
                .map(|p| ShapePoint {
                    utilization: p.utilization,
                    score: p.score * (MAX_NODE_SCORE / fit::MAX_CUSTOM_PRIORITY_SCORE),
                })
                .collect(),
            _ => Vec::new(),
        };
        let fit_cpu_memory = match (&policy.scoring_strategy, policy.fit_resources.as_slice()) {
            (ScoringStrategy::LeastAllocated | ScoringStrategy::MostAllocated, [c, m])
                if c.name == ResourceName::Cpu && m.name == ResourceName::Memory =>
            {
                Some((c.weight, m.weight))
            }
            _ => None,
        };
        let balanced_cpu_memory = matches!(
            policy.balanced_resources.as_slice(),
            [c, m] if c.name == ResourceName::Cpu && m.name == ResourceName::Memory
        );
        let slot = |p: ScorePlugin| policy.scores.iter().take(MAX_SCORES).position(|s| s.plugin == p);
        let slot_of = PlainSlots {
            fit: slot(ScorePlugin::NodeResourcesFit),
            balanced: slot(ScorePlugin::NodeResourcesBalancedAllocation),
            image: slot(ScorePlugin::ImageLocality),
            affinity: slot(ScorePlugin::NodeAffinity),
            taints: slot(ScorePlugin::TaintToleration),
        };
        let has = |f: FilterPlugin| policy.filters.contains(&f);
        let static_filters = StaticFilters {
            node_unschedulable: has(FilterPlugin::NodeUnschedulable),
            taint_toleration: has(FilterPlugin::TaintToleration),
            node_affinity: has(FilterPlugin::NodeAffinity),
        };
        let rules = (!policy.rules.is_empty()).then(|| {
            policy
                .rules
                .compile()
                .map(Arc::new)
                .map_err(|e| Arc::from(format!("policy rules do not compile: {e}")))
        });
        Self {
            rules,
            slot_of,
            static_filters,
            fit_cpu_memory,
            all_slots: policy
                .scores
                .iter()
                .take(MAX_SCORES)
                .enumerate()
                .map(|(slot, s)| (slot, s.plugin, s.weight))
                .collect(),
            plain_slots: policy
                .scores
                .iter()
                .take(MAX_SCORES)
                .enumerate()
                .filter(|(_, s)| !matches!(s.plugin, ScorePlugin::PodTopologySpread | ScorePlugin::InterPodAffinity))
                .map(|(slot, s)| (slot, s.plugin, s.weight))
                .collect(),
            plain_filters: policy
                .filters
                .iter()
                .copied()
                .filter(|f| {
                    !matches!(
                        f,
                        FilterPlugin::PodTopologySpread
                            | FilterPlugin::InterPodAffinity
                            | FilterPlugin::VolumeRestrictions
                            | FilterPlugin::NodeVolumeLimits
                            | FilterPlugin::VolumeBinding
                            | FilterPlugin::VolumeZone
                    )
                })
                .collect(),
            volume_filters: super::volumes::VolumeFilters {
                restrictions: policy.filters.contains(&FilterPlugin::VolumeRestrictions),
                limits: policy.filters.contains(&FilterPlugin::NodeVolumeLimits),
                binding: policy.filters.contains(&FilterPlugin::VolumeBinding),
                zone: policy.filters.contains(&FilterPlugin::VolumeZone),
            },
            balanced_cpu_memory,
            score_plugins: policy.scores.iter().map(|s| (s.plugin, s.weight)).collect(),
            fit_resources: policy
                .fit_resources
                .iter()
                .map(|r| (r.name.clone(), r.weight))
                .collect(),
            balanced_resources: policy.balanced_resources.iter().map(|r| r.name.clone()).collect(),
            shape,
            policy,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The score plugins and weights, in the policy's order.
    pub fn score_plugins(&self) -> &[(ScorePlugin, i64)] {
        &self.score_plugins
    }

    /// Whether the policy has CEL rules.
    pub fn has_rules(&self) -> bool {
        self.rules.is_some()
    }

    /// The rules, when the plain pass must run some of them node by node or keep score rules'
    /// raw scores (see [`RuleSink`]).
    pub(crate) fn rules_in_sink(&self) -> Option<&CompiledRules> {
        match &self.rules {
            Some(Ok(r)) if !r.scores.is_empty() || r.filters.iter().any(|f| !f.class_level) => Some(r),
            _ => None,
        }
    }

    /// The number of score rules.
    pub(crate) fn score_rules(&self) -> usize {
        match &self.rules {
            Some(Ok(r)) => r.scores.len(),
            _ => 0,
        }
    }
}

/// Maximum number of score plugins (one slot per [`ScorePlugin`]).
pub(super) const MAX_SCORES: usize = 8;

/// A feasible node's raw scores and, after normalization, its weighted total. The normalized
/// per-plugin scores are recomputed from the raw ones for the nodes a Rank returns, which keeps
/// candidates small for the passes Schedule makes over them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Candidate {
    pub(super) index: u32,
    /// Raw plugin scores (before normalization), kept so normalization can be redone.
    pub(super) raw: [i64; MAX_SCORES],
    pub(super) total: i64,
}

/// What a pod needs, computed once per pod instead of once per node.
pub(super) struct PodPlan<'a> {
    pub(super) pod: &'a PodSpec,
    /// NodeResourcesFit scoring request per fit resource (scoring defaults for cpu and memory).
    pub(crate) fit_requests: Vec<i64>,
    /// BalancedAllocation request per resource; `None` for a best-effort pod (plugin skipped).
    pub(crate) balanced_requests: Option<Vec<i64>>,
    /// Tolerations with effect PreferNoSchedule or empty, for TaintToleration's score.
    prefer_tolerations: Vec<Toleration>,
    /// The pod's images present on some node: (hash of the name, count of nodes having it).
    pub(crate) images: Vec<(u64, i64)>,
    tolerates_unschedulable: bool,
    /// [`port_mask`] of each of the pod's host ports.
    pub(crate) port_masks: Vec<u64>,
    /// [`port_key`] of each of the pod's host ports; `None` when one has none.
    port_keys: Option<Vec<u64>>,
    pub(super) tie_seed: u64,
    /// The pod selects on a per-node label or field, so static predicates run node by node.
    per_node: bool,
    /// Static predicates per node class (empty when `per_node`), shared by pods that select and
    /// tolerate alike.
    pub(crate) class_evals: Arc<[StaticEval]>,
    /// The plain pass applies when, besides, the pod has no topology state: see
    /// [`Evaluator::evaluate_plain`].
    pub(super) plain: bool,
    /// The volume plugins' PreFilter state; `None` when the pod has no volume they read.
    pub(super) volumes: Option<Box<PodVolumes>>,
    /// A volume plugin's PreFilter rejected the pod: its message.
    pub(super) volume_error: Option<Arc<str>>,
    /// The profile's [`Profile::static_filters`].
    static_filters: StaticFilters,
    /// InterPodAffinity's and PodTopologySpread's state; `None` when neither has work.
    pub(super) topo: Option<Box<TopoState>>,
    /// The pod as the policy's CEL rules read it; `None` when the policy has none.
    pub(crate) rule_pod: Option<cel::Value>,
    /// Per rule (filters first, then scores), for those that read only what a node class
    /// shares: their outcomes per class (a filter's passing outcome is 0), evaluated on first
    /// use and shared with the pods that read alike (see [`CompiledRules::pod_key`]).
    rule_classes: Vec<Option<Arc<ClassOutcomes>>>,
    /// For the plain pass under a policy with rules read per class: `class_evals` with the
    /// classes those rules reject (or fail on) marked rejected.
    pub(crate) plain_evals: Option<Arc<[StaticEval]>>,
}

impl<'a> PodPlan<'a> {
    /// What `pod` needs of every node; with `cached`, per-class static predicates are reused
    /// from (and added to) the snapshot lineage's [`super::accel::class_cache::StaticCache`].
    pub(super) fn new(
        profile: &Profile,
        snapshot: &Snapshot,
        pod: &'a PodSpec,
        seed: u64,
        placed: &Placed<'_>,
        cached: bool,
    ) -> Self {
        let fit_requests = profile
            .fit_resources
            .iter()
            .map(|(r, _)| match r {
                ResourceName::Cpu | ResourceName::Memory => pod.score_requests().get(r),
                _ => pod.requests.get(r),
            })
            .collect();
        let balanced: Vec<i64> = profile.balanced_resources.iter().map(|r| pod.requests.get(r)).collect();
        let balanced_requests = (!balanced.iter().all(|r| *r == 0)).then_some(balanced);
        let images = pod
            .images
            .iter()
            .filter_map(|name| {
                let n = snapshot.image_node_count(name);
                (n > 0).then_some((image_hash(name), i64::from(n)))
            })
            .collect();
        let seed = seed ^ profile.policy.seed;
        // The volume plugins' PreFilter; a pod with volumes they read is evaluated node by node.
        let (volumes, volume_error) = if pod.volumes.is_empty() || !profile.volume_filters.any() {
            (None, None)
        } else {
            // The references to a claim by the bound pods, per node.
            let claim_users = |key: &str| -> Vec<(Arc<str>, usize)> {
                snapshot
                    .nodes()
                    .iter()
                    .filter_map(|n| {
                        let refs = n
                            .usage
                            .volumes
                            .iter()
                            .filter(|(ns, v)| v.claim_name().is_some_and(|c| super::volumes::claim_key(ns, c) == key))
                            .count();
                        (refs > 0).then(|| (Arc::from(n.spec.name.as_str()), refs))
                    })
                    .collect()
            };
            match PodVolumes::pre_filter(
                snapshot.storage(),
                profile.volume_filters,
                pod,
                &claim_users,
                &placed.volumes,
            ) {
                Ok(v) => (v.map(Box::new), None),
                Err(message) => (None, Some(Arc::from(message))),
            }
        };
        let per_node = needs_per_node(pod) || volumes.is_some() || volume_error.is_some();
        let mut plan = Self {
            pod,
            fit_requests,
            balanced_requests,
            prefer_tolerations: taint_toleration::prefer_no_schedule_tolerations(&pod.tolerations),
            images,
            tolerates_unschedulable: node_unschedulable::tolerates_unschedulable(&pod.tolerations),
            port_masks: pod.host_ports.iter().map(port_mask).collect(),
            port_keys: pod.host_ports.iter().map(port_key).collect(),
            tie_seed: Self::tie_seed_for(seed, pod),
            per_node,
            class_evals: Arc::from(Vec::new()),
            plain: false,
            volumes,
            volume_error,
            static_filters: profile.static_filters,
            topo: None,
            rule_pod: match &profile.rules {
                Some(Ok(rules)) => Some(rules.pod_value(pod)),
                Some(Err(_)) => Some(cel_rules::pod_value(pod)),
                None => None,
            },
            rule_classes: Vec::new(),
            plain_evals: None,
        };
        if let (Some(Ok(rules)), Some(value)) = (&profile.rules, &plan.rule_pod) {
            let kept = cel_rules::snapshot_rules(snapshot, rules);
            plan.rule_classes = (0..rules.width())
                .map(|k| {
                    rules.class_level(k).then(|| match rules.pod_key(k, value) {
                        Some(key) => {
                            let (outcomes, added, freed) = kept.class_outcomes(k, key);
                            snapshot.add_derived(added);
                            snapshot.sub_derived(freed);
                            outcomes
                        }
                        None => Arc::new(ClassOutcomes::new(snapshot.classes().len())),
                    })
                })
                .collect();
        }
        if !per_node {
            let classes = snapshot.classes();
            plan.class_evals = if cached {
                let filters = profile.static_filters;
                let hash = StaticKey::hash_of(pod, filters);
                let lock = || snapshot.static_cache().lock().unwrap_or_else(|e| e.into_inner());
                // A usable entry, or else the label columns to evaluate with (an entry from
                // before new classes appeared is redone).
                let found = {
                    let mut cache = lock();
                    match cache.by_hash.get(&hash) {
                        Some((key, evals)) if key.is_of(pod, filters) && evals.len() >= classes.len() => {
                            Ok(Arc::clone(evals))
                        }
                        _ => Err(cache.labels_of(classes)),
                    }
                };
                match found {
                    Ok(evals) => evals,
                    Err(labels) => {
                        // Evaluated outside the lock; an evaluation cut short by the call's end is
                        // incomplete and never cached.
                        let evals = plan.class_statics(classes, &labels);
                        if !super::cancel::requested() {
                            lock().insert(hash, StaticKey::of(pod, filters), Arc::clone(&evals));
                        }
                        evals
                    }
                }
            } else {
                classes
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        if super::cancel::requested_at(i) {
                            StaticEval::default()
                        } else {
                            plan.static_eval(c)
                        }
                    })
                    .collect()
            };
        }
        let has = |f: FilterPlugin| profile.policy.filters.contains(&f);
        let slots = profile.slot_of;
        plan.plain = !per_node
            && profile
                .rules
                .as_ref()
                .is_none_or(|r| r.as_ref().is_ok_and(|r| r.plain()))
            && (pod.node_name.as_deref().is_none_or(str::is_empty) || !has(FilterPlugin::NodeName))
            && (pod.required_features.is_empty() || !has(FilterPlugin::NodeDeclaredFeatures))
            && (slots.fit.is_none() || profile.fit_cpu_memory.is_some())
            && (slots.balanced.is_none() || profile.balanced_cpu_memory || plan.balanced_requests.is_none())
            && profile.score_plugins.iter().take(MAX_SCORES).all(|(p, _)| {
                matches!(
                    p,
                    ScorePlugin::NodeResourcesFit
                        | ScorePlugin::NodeResourcesBalancedAllocation
                        | ScorePlugin::VolumeBinding
                        | ScorePlugin::ImageLocality
                        | ScorePlugin::NodeAffinity
                        | ScorePlugin::TaintToleration
                        | ScorePlugin::InterPodAffinity
                        | ScorePlugin::PodTopologySpread
                )
            });
        if plan.plain {
            if let Some(Ok(rules)) = &profile.rules {
                if (0..rules.width()).any(|k| rules.class_level(k)) {
                    plan.plain_evals = Some(plan.fold_class_rules(rules, snapshot));
                }
            }
        }
        plan.topo = TopoState::build(profile, snapshot, placed, &plan);
        plan
    }

    /// `class_evals` with the classes the policy's class-level rules reject (or fail on) marked
    /// rejected: the plain pass, which gathers no reasons, then skips their nodes as the general
    /// pass rejects them (the reasons pass runs the rules again, node by node).
    fn fold_class_rules(&self, rules: &CompiledRules, snapshot: &Snapshot) -> Arc<[StaticEval]> {
        let mut evals = self.class_evals.to_vec();
        for (class, se) in evals.iter_mut().enumerate() {
            if se.rejected {
                continue;
            }
            // Each class's evaluations may spend their budgets: a call that has ended stops here
            // (its plan is discarded; the outcomes kept are whole evaluations).
            if super::cancel::requested() {
                break;
            }
            self.class_rule_outcomes(rules, snapshot, class);
            se.rejected = (0..rules.width()).any(|k| self.class_outcome(k, class).is_err());
        }
        Arc::from(evals)
    }

    /// Evaluates, for the pod, the policy's class-level rules on node class `class` (its shared
    /// labels, taints and cordon) where not done yet (by this pod or one reading alike).
    fn class_rule_outcomes(&self, rules: &CompiledRules, snapshot: &Snapshot, class: usize) {
        let Some(pod) = &self.rule_pod else {
            return;
        };
        let mut context = None;
        for (k, outcomes) in self.rule_classes.iter().enumerate() {
            let Some(outcomes) = outcomes else {
                continue;
            };
            if outcomes.get(class).is_some() {
                continue;
            }
            let _ = outcomes.get_or_eval(class, || {
                let context = context.get_or_insert_with(|| {
                    let spec = snapshot.classes().get(class).map(|c| NodeStatic::of(c));
                    let spec = spec.unwrap_or_else(|| NodeStatic::of(&NodeSpec::default()));
                    rules.context(pod, cel_rules::node_value(&spec, &NodeUsage::default()))
                });
                rules.run(k, context)
            });
        }
    }

    /// Class-level rule `k`'s outcome on class `class`, once [`PodPlan::class_rule_outcomes`]
    /// evaluated it (`Ok(0)` for another rule).
    pub(crate) fn class_outcome(&self, k: usize, class: usize) -> RuleOutcome {
        self.rule_classes
            .get(k)
            .and_then(Option::as_ref)
            .and_then(|o| o.get(class))
            .cloned()
            .unwrap_or(Ok(0))
    }

    /// The static predicates on the node at index `i` of the snapshot.
    fn static_at(&self, snapshot: &Snapshot, i: usize) -> StaticEval {
        if self.per_node {
            self.static_eval(&snapshot.nodes()[i].spec)
        } else {
            self.class_evals[snapshot.hot()[i].class as usize]
        }
    }

    /// The static predicates on one node (or a node class's view of its nodes).
    fn static_eval(&self, node: &NodeSpec) -> StaticEval {
        let pod = self.pod;
        let mismatched = !pod.matches_node_selector_and_affinity(node);
        self.static_eval_with(node, mismatched, node_affinity::score(pod, node))
    }

    /// [`PodPlan::static_eval`] given NodeAffinity's verdict and raw score on the node.
    fn static_eval_with(&self, node: &NodeSpec, mismatched: bool, affinity_weight: i64) -> StaticEval {
        let cordoned = node_unschedulable::rejects(node, self.tolerates_unschedulable);
        let untolerated = taint_toleration::untolerated(&self.pod.tolerations, &node.taints);
        let StaticFilters {
            node_unschedulable: f_cordon,
            taint_toleration: f_taints,
            node_affinity: f_affinity,
        } = self.static_filters;
        StaticEval {
            cordoned,
            untolerated,
            mismatched,
            affinity_weight,
            prefer_taints: taint_toleration::score(&self.prefer_tolerations, node),
            rejected: (cordoned && f_cordon) || (untolerated && f_taints) || (mismatched && f_affinity),
        }
    }

    /// [`PodPlan::static_eval`] of every class, with each label requirement of the pod matched
    /// once per distinct value of its key (`labels`: the columns of these classes) rather than
    /// looked up class by class.
    fn class_statics(&self, classes: &imbl::Vector<Arc<NodeSpec>>, labels: &ClassLabels) -> Arc<[StaticEval]> {
        let (selected, weights) = affinity_by_class(self.pod, classes.len(), labels);
        classes
            .iter()
            .zip(selected.iter().zip(&weights))
            .map(|(c, (s, w))| self.static_eval_with(c, !s, *w))
            .collect()
    }

    /// Whether one of the pod's host ports may conflict with the ports in use on a node whose
    /// [`super::snapshot::port_bits`] are `bits` (if so, the port lists are compared).
    #[inline]
    pub(crate) fn may_conflict(&self, bits: u64) -> bool {
        self.port_masks.iter().any(|m| bits & m == *m)
    }

    /// Whether one of the pod's host ports conflicts with the ports in use on a node whose
    /// [`PortKeys`] are `keys`: `None` when the keys do not say (the port lists are compared).
    #[inline(always)]
    pub(crate) fn keyed_conflict(&self, keys: PortKeys) -> Option<bool> {
        keys.conflict(self.port_keys.as_deref()?)
    }

    /// The tie-break seed of a pod (`seed` already mixed with the policy's).
    pub(super) fn tie_seed_for(seed: u64, pod: &PodSpec) -> u64 {
        mix(seed ^ xxhash_rust::xxh3::xxh3_64(pod.uid.as_bytes()))
    }

    /// The pod's tie-break seed (the policy's and the request's seed mixed with the pod's uid).
    pub(super) fn tie_seed(&self) -> u64 {
        self.tie_seed
    }

    pub(super) fn tie_break(&self, name_hash: u64) -> u64 {
        mix(self.tie_seed ^ name_hash)
    }
}

/// Whether a pod's node selection names a label unique to each node (or a node field), so node
/// classes cannot stand for their nodes.
fn needs_per_node(pod: &PodSpec) -> bool {
    let unique = |k: &str| NODE_UNIQUE_LABELS.contains(&k);
    let term_unique = |t: &super::model::SelectorTerm| {
        !t.match_fields.is_empty() || t.match_expressions.iter().any(|r| unique(&r.key))
    };
    pod.node_selector.iter().any(|(k, _)| unique(k))
        || pod.required_affinity.iter().flatten().any(term_unique)
        || pod.preferred_affinity.iter().any(|p| term_unique(&p.term))
}

/// splitmix64's finalizer: a fast, well-mixed 64-bit hash step.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

/// Whether two pods ask the same of nodes: equal requests, node name, selectors, affinity,
/// tolerations, host ports and images (identity and labels aside), so they filter and score alike.
pub(super) fn same_constraints(a: &PodSpec, b: &PodSpec) -> bool {
    a.requests == b.requests
        && a.non_zero_requests == b.non_zero_requests
        && a.score_requests == b.score_requests
        && a.required_features == b.required_features
        && a.node_name == b.node_name
        && a.node_selector == b.node_selector
        && a.required_affinity == b.required_affinity
        && a.preferred_affinity == b.preferred_affinity
        && a.tolerations == b.tolerations
        && a.host_ports == b.host_ports
        && a.images == b.images
        // Each pod's claims are its own, and every placement changes what the next one finds.
        && a.volumes.is_empty()
        && b.volumes.is_empty()
}

/// The topology plugins' PreFilter and PreScore state for one pod.
#[derive(Debug, Default)]
pub(super) struct TopoState {
    spread_filter: Option<SpreadFilter>,
    interpod_filter: Option<InterPodFilter>,
    interpod_score: Option<DomainCounts>,
    spread_score: Option<SpreadScore>,
}

/// Whether the pod itself has inter-pod affinity or spreading (explicit or default) to evaluate.
fn has_topology_terms(pod: &PodSpec) -> bool {
    pod.has_pod_affinity()
        || !pod.spread_constraints.is_empty()
        || pod
            .default_spread_selector
            .as_ref()
            .is_some_and(|s| !s.requirements.is_empty())
}

impl TopoState {
    /// A copy of the filters' state alone, for a preemption dry run to update.
    pub(super) fn filters(&self) -> Self {
        Self {
            spread_filter: self.spread_filter.clone(),
            interpod_filter: self.interpod_filter.clone(),
            interpod_score: None,
            spread_score: None,
        }
    }

    /// kube-scheduler's PreFilterExtensions AddPod (`delta` 1) / RemovePod (−1) for both topology
    /// filters: counts the bound pod `other`, on node `node`, in or out for the incoming `pod`.
    pub(super) fn update_filters(
        &mut self,
        snapshot: &Snapshot,
        pod: &PodSpec,
        other: &BoundPod,
        node: usize,
        delta: i64,
    ) {
        if let Some(f) = self.spread_filter.as_mut() {
            f.update(&pod.namespace, &other.namespace, &other.labels, node, delta);
        }
        if let Some(f) = self.interpod_filter.as_mut() {
            let terms = other.affinity.as_deref();
            let other = super::topology::PodRef {
                node,
                namespace: &other.namespace,
                labels: &other.labels,
                affinity: terms.map(|t| &t.0).filter(|t| !t.is_empty()),
                anti_affinity: terms.map(|t| &t.1).filter(|t| !t.is_empty()),
                terminating: other.terminating,
            };
            let placed = Placed::default();
            f.update(
                &Existing {
                    snapshot,
                    placed: &placed,
                },
                pod,
                &other,
                delta,
            );
        }
    }

    /// PreFilter and PreScore of both plugins for `plan`'s pod, with `placed` already on their
    /// nodes; `None` (at no cost) when neither the pod nor any existing pod has such terms.
    pub(super) fn build(
        profile: &Profile,
        snapshot: &Snapshot,
        placed: &Placed<'_>,
        plan: &PodPlan<'_>,
    ) -> Option<Box<Self>> {
        let pod = plan.pod;
        let existing = Existing { snapshot, placed };
        if !has_topology_terms(pod) && !existing.any_affinity() {
            return None;
        }
        let policy = &profile.policy;
        let statics = |i: usize| {
            let se = plan.static_at(snapshot, i);
            (se.mismatched, se.untolerated)
        };
        let scored = |p: ScorePlugin| profile.score_plugins.iter().any(|(x, _)| *x == p);
        let state = TopoState {
            spread_filter: if policy.filters.contains(&FilterPlugin::PodTopologySpread) {
                SpreadFilter::new(&existing, pod, &policy.pod_topology_spread, &statics)
            } else {
                None
            },
            interpod_filter: if policy.filters.contains(&FilterPlugin::InterPodAffinity) {
                InterPodFilter::new(&existing, pod)
            } else {
                None
            },
            interpod_score: if scored(ScorePlugin::InterPodAffinity) {
                interpod_scoring::score_state(&existing, pod, &policy.inter_pod_affinity)
            } else {
                None
            },
            spread_score: if scored(ScorePlugin::PodTopologySpread) {
                SpreadScore::new(pod, &policy.pod_topology_spread)
            } else {
                None
            },
        };
        let idle = state.spread_filter.is_none()
            && state.interpod_filter.is_none()
            && state.interpod_score.is_none()
            && state.spread_score.is_none();
        (!idle).then(|| Box::new(state))
    }
}

/// Which topology score plugins scored the current pod (PreScore not skipped); the others give
/// every node 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TopoActive {
    /// InterPodAffinity scored.
    interpod: bool,
    /// PodTopologySpread scored.
    spread: bool,
}

/// A batch's copies of the hot fields and columns and its slot list, kept per thread when the
/// batch ends so the next batch copies into the same memory (fresh copies are ~1.3 MB of newly
/// mapped pages per batch at 5,000 nodes).
#[derive(Default)]
struct UsageCopies {
    hot: Vec<NodeHot>,
    cols: Option<HotColumns>,
    slot: Vec<u32>,
}

thread_local! {
    /// This thread's spare [`UsageCopies`].
    static SPARE_COPIES: std::cell::RefCell<UsageCopies> = std::cell::RefCell::new(UsageCopies::default());
}

/// Usage of the nodes as a batch goes: the snapshot's, with the batch's placements on top.
pub(super) struct BatchUsage<'s> {
    snapshot: &'s Snapshot,
    /// Hot fields, copied from the snapshot on the first placement of the batch.
    pub(super) hot: std::borrow::Cow<'s, [NodeHot]>,
    /// The same by column, copied with them.
    pub(crate) cols: std::borrow::Cow<'s, HotColumns>,
    /// For each node, the slot in `changed` or `u32::MAX` when unchanged.
    slot: Vec<u32>,
    changed: Vec<NodeUsage>,
    /// For each entry of `changed`, a number no other usage of the process had (see
    /// [`BatchUsage::stamp`]).
    stamps: Vec<u64>,
    /// For each entry of `changed`, its node.
    nodes: Vec<u32>,
}

/// The last number [`BatchUsage::assume`] stamped a changed usage with.
static USAGE_STAMP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl<'s> BatchUsage<'s> {
    pub(super) fn new(snapshot: &'s Snapshot) -> Self {
        Self {
            snapshot,
            hot: std::borrow::Cow::Borrowed(snapshot.hot()),
            cols: std::borrow::Cow::Borrowed(snapshot.columns()),
            slot: Vec::new(),
            changed: Vec::new(),
            stamps: Vec::new(),
            nodes: Vec::new(),
        }
    }

    /// The nodes whose usage the batch changed.
    pub(crate) fn changed_nodes(&self) -> &[u32] {
        &self.nodes
    }

    /// 0 while node `i`'s usage is the snapshot's; after the batch changed it, a number that
    /// changes with each change and that no other usage had: what the outcomes of the rules
    /// reading the usage are kept under.
    #[inline]
    pub(crate) fn stamp(&self, i: usize) -> u64 {
        match self.slot.get(i) {
            Some(&s) if s != u32::MAX => self.stamps[s as usize],
            _ => 0,
        }
    }

    /// Copies the hot fields and columns, and starts the slot list, into this thread's spare
    /// buffers (see [`UsageCopies`]).
    fn copy_on_first_placement(&mut self) {
        use std::borrow::Cow;
        let spare = SPARE_COPIES
            .try_with(|s| std::mem::take(&mut *s.borrow_mut()))
            .unwrap_or_default();
        let mut slot = spare.slot;
        slot.clear();
        slot.resize(self.snapshot.nodes().len(), u32::MAX);
        self.slot = slot;
        if let Cow::Borrowed(hot) = self.hot {
            let mut copy = spare.hot;
            copy.clear();
            copy.extend_from_slice(hot);
            self.hot = Cow::Owned(copy);
        }
        if let Cow::Borrowed(cols) = self.cols {
            let mut copy = spare.cols.unwrap_or_default();
            copy.clone_from(cols);
            self.cols = Cow::Owned(copy);
        }
    }

    #[inline]
    pub(super) fn get(&self, i: usize) -> &NodeUsage {
        match self.slot.get(i) {
            Some(&s) if s != u32::MAX => &self.changed[s as usize],
            _ => &self.snapshot.nodes()[i].usage,
        }
    }

    pub(super) fn assume(&mut self, i: usize, pod: &PodSpec) {
        if self.slot.is_empty() {
            self.copy_on_first_placement();
        }
        if self.slot[i] == u32::MAX {
            self.slot[i] = self.changed.len() as u32;
            self.changed.push(self.snapshot.nodes()[i].usage.clone());
            self.stamps.push(0);
            self.nodes.push(i as u32);
        }
        self.stamps[self.slot[i] as usize] = USAGE_STAMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let bound = BoundPod {
            node_name: std::sync::Arc::from(""),
            requests: pod.requests.clone(),
            non_zero_cpu: pod.non_zero_requests.milli_cpu,
            non_zero_memory: pod.non_zero_requests.memory,
            host_ports: pod.host_ports.clone(),
            // The volume filters count a placed pod's volumes on its node (attach limits, disk
            // conflicts), by namespace.
            namespace: if pod.volumes.is_empty() {
                std::sync::Arc::from("")
            } else {
                std::sync::Arc::from(pod.namespace.as_str())
            },
            labels: Default::default(),
            affinity: None,
            meta: None,
            terminating: pod.terminating,
            volumes: (!pod.volumes.is_empty()).then(|| std::sync::Arc::from(pod.volumes.as_slice())),
        };
        let usage = &mut self.changed[self.slot[i] as usize];
        usage.add(&bound);
        let hot = NodeHot::of(&self.snapshot.nodes()[i], usage);
        self.cols.to_mut().set(i, &hot);
        self.hot.to_mut()[i] = hot;
    }
}

impl Drop for BatchUsage<'_> {
    /// Gives the batch's copies back to the thread's spares (not after a panic: they may be half
    /// written, and a spare is overwritten whole anyway, but nothing is kept that a panic touched).
    fn drop(&mut self) {
        use std::borrow::Cow;
        if std::thread::panicking() || self.slot.capacity() == 0 {
            return;
        }
        let copies = UsageCopies {
            hot: match std::mem::take(&mut self.hot) {
                Cow::Owned(hot) => hot,
                Cow::Borrowed(_) => Vec::new(),
            },
            cols: match std::mem::replace(&mut self.cols, Cow::Owned(HotColumns::default())) {
                Cow::Owned(cols) => Some(cols),
                Cow::Borrowed(_) => None,
            },
            slot: std::mem::take(&mut self.slot),
        };
        let _ = SPARE_COPIES.try_with(|s| *s.borrow_mut() = copies);
    }
}

/// The best node of one class so far in [`Evaluator::evaluate_best`] (its per-node part is the
/// class's entry in [`KeepBest::bars`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClassBest {
    /// Its tie-break key (see [`PodPlan::tie_break`]), once a node of equal part needed it: most
    /// nodes that reach the bar pass it, and their keys are never compared.
    pub(crate) tie: Option<u64>,
    /// Its index, `u32::MAX` while the class has no feasible node.
    pub(crate) index: u32,
}

impl ClassBest {
    /// No feasible node yet: any node replaces it (its bar is `i64::MIN`, no part is below).
    pub(crate) const NONE: Self = Self {
        tie: None,
        index: u32::MAX,
    };
}

/// What the extenders made of one pod's feasible nodes.
pub(super) struct ExtenderOutcome {
    /// The best node left and its total (extenders' scores added).
    pub(super) best: Option<(usize, i64)>,
    /// How many nodes are left.
    pub(super) feasible: usize,
    /// Nodes turned down with a message, evicting pods might help.
    pub(super) failed: Vec<(usize, Arc<str>)>,
    /// Nodes turned down with a message, for good.
    pub(super) failed_unresolvable: Vec<(usize, Arc<str>)>,
    /// A failed extender that is not ignorable: the pod's scheduling fails with this.
    pub(super) error: Option<String>,
}

impl Evaluator<'_> {
    /// kube-scheduler's `findNodesThatPassExtenders`, then `prioritizeNodes` over what is left,
    /// as its `schedulePod` orders them: the candidates of `plan` are narrowed to the nodes the
    /// extenders kept and scored again (PodTopologySpread's PreScore and every normalization see
    /// only those nodes), then the extenders' scores are added. Prioritize runs only when more
    /// than one node is left, as kube-scheduler scores nothing then. The candidates no longer
    /// hold every feasible node afterwards: the next pod must not re-score from them.
    pub(super) fn call_extenders(
        &mut self,
        hook: &dyn ExtenderHook,
        plan: &PodPlan<'_>,
        usage: &BatchUsage,
        placed: &Placed<'_>,
    ) -> ExtenderOutcome {
        let pod = plan.pod;
        let nodes: Vec<usize> = self.candidates.iter().map(|c| c.index as usize).collect();
        let mut outcome = ExtenderOutcome {
            best: None,
            feasible: 0,
            failed: Vec::new(),
            failed_unresolvable: Vec::new(),
            error: None,
        };
        let filtered = match hook.filter(self.snapshot, pod, &nodes) {
            Ok(f) => f,
            Err(e) => {
                outcome.error = Some(e);
                return outcome;
            }
        };
        let mut keep = vec![false; self.snapshot.nodes().len()];
        for &i in &filtered.feasible {
            if let Some(k) = keep.get_mut(i) {
                *k = true;
            }
        }
        self.candidates.retain(|c| keep[c.index as usize]);
        self.topo_scores(plan, placed);
        self.normalize();
        let mut kept: Vec<(u32, i64)> = self.candidates.iter().map(|c| (c.index, c.total)).collect();
        if kept.len() > 1 {
            let indices: Vec<usize> = kept.iter().map(|(i, _)| *i as usize).collect();
            let mut added = vec![0i64; self.snapshot.nodes().len()];
            for (i, score) in hook.prioritize(self.snapshot, pod, &indices) {
                if let Some(a) = added.get_mut(i) {
                    *a = a.saturating_add(score);
                }
            }
            for (i, total) in kept.iter_mut() {
                *total = total.saturating_add(added[*i as usize]);
            }
        }
        outcome.feasible = kept.len();
        outcome.best = best_candidate(
            kept.iter(),
            |(i, total)| (*total, *i),
            |(i, _)| plan.tie_break(usage.hot[*i as usize].name_hash),
        )
        .map(|(i, total)| (*i as usize, *total));
        outcome.failed = filtered.failed;
        outcome.failed_unresolvable = filtered.failed_unresolvable;
        outcome
    }
}

#[cfg(test)]
#[path = "framework_tests.rs"]
pub(crate) mod tests;

#[cfg(test)]
#[path = "topology_tests.rs"]
mod topology_tests;
