//! The framework the scheduling cycle (`engine/cycle.rs`) runs, the general path for any pod:
//! the [`Evaluator`] runs a [`Profile`]'s filters on every node for a pod's plan
//! ([`super::plan`]), weighs and normalizes the scores; the reasons and the diagnosis are in
//! [`super::diagnosis`], picking the best nodes in [`super::select`]. The fast paths that give
//! the same answers with less work for the common pod (the plain pass, class replay) are in
//! [`super::accel`], their state in the evaluator's [`FastPathState`].
//!
//! Read top-down, as kube-scheduler's `schedule_one.go`: the answers ([`Ranking`],
//! [`Decision`]); the [`Evaluator`] and its pass over the nodes (`evaluate`: filter and score
//! each node, `eval_node`; then `normalize`); the filters (`filter_node`, `run_filter`); the
//! scores; the extenders last. What they read is in [`super::profile`] (the prepared policy),
//! [`super::plan`] (the pod's PreFilter and PreScore state) and `super::batch_usage` (the nodes'
//! usage as a batch goes).
//!
//! Each plugin follows kube-scheduler's implementation, in [`super::plugins`]: the same
//! feasibility rules, the same integer arithmetic for scores, the same normalization, and the
//! same reason strings. A node fails at the first filter that rejects it, as in kube-scheduler's
//! `RunFilterPlugins`, and NodeResourcesFit reports every insufficient resource. Which plugins
//! exist, their names and defaults, is [`super::registry`].
use std::cell::RefCell;

use std::sync::Arc;
use std::time::Instant;

use super::accel::class_cache::StaticEval;
use super::accel::class_replay::{class_decides, ClassReplay};
use super::accel::columns::BLOCK;
use super::accel::state::FastPathState;
pub use super::diagnosis::{Diagnosis, GangFailure, Nomination, Reason, RejectedNode};
pub(super) use super::diagnosis::{FlagBuffer, Rejections};
use super::extender::ExtenderHook;
use super::plugins::interpodaffinity::scoring as interpod_scoring;
use super::plugins::noderesources::fit;
use super::plugins::podtopologyspread::scoring::{self as spread_scoring};
use super::plugins::volumebinding::{self};
use super::plugins::{
    node_affinity, node_declared_features, node_name, node_ports, node_unschedulable, nodevolumelimits,
    taint_toleration, volumerestrictions, volumezone,
};
use super::policy::{FilterPlugin, ScorePlugin};
use super::pool::pooled_buffer;
use super::resources::ResourceName;
use super::rules::{self as cel_rules, CompiledRules, NodeStatic};
use super::snapshot::{NodeEntry, NodeHot, NodeUsage, NodeView, Snapshot};
use super::topology::{Existing, Placed};

use super::batch_usage::BatchUsage;
use super::plan::{PodPlan, TopoState};
use super::profile::{Profile, MAX_SCORES};
use super::select::best_candidate;

use super::plugins::contract::{Filter, Score};
use super::plugins::dynamicresources::{DevicePacking, DynamicResources};
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
    /// A PodGroup's placements could not be carried to the pods after it: the snapshot they are
    /// bound in could not be derived (the call ended meanwhile).
    #[error("scheduling a batch with pod groups: {0}")]
    Snapshot(String),
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
        /// DynamicResources' allocations for the pod's claims that had none (its Reserve);
        /// empty when it has none.
        devices: Vec<super::plugins::dynamicresources::ClaimAllocation>,
    },
    /// No node fits.
    Unschedulable(Diagnosis),
}

/// Evaluates pods against one snapshot with one profile.
pub struct Evaluator<'a> {
    pub(super) profile: &'a Profile,
    pub(super) snapshot: &'a Snapshot,
    pub(super) candidates: CandidateBuffer,
    /// The maxima the last normalization used, per score slot.
    pub(crate) norm_max: [i64; MAX_SCORES],
    /// The minima the last normalization used, per score slot (InterPodAffinity, PodTopologySpread).
    pub(crate) norm_min: [i64; MAX_SCORES],
    /// Whether InterPodAffinity and PodTopologySpread scored the current pod (PreScore not skipped).
    pub(crate) topo_active: TopoActive,
    /// What the fast paths keep from one pod to the next (see [`FastPathState`]).
    pub(super) fast: FastPathState,
    /// How many rejected nodes Rank lists; `None` lists all.
    pub(super) rejected_limit: Option<usize>,
    /// Raw scores of the policy's score rules, per node (`score_rules` per node, node order).
    pub(crate) rule_raw: RefCell<Vec<i64>>,
    /// Per score rule, the minimum and maximum raw score over the feasible nodes.
    pub(crate) rule_extrema: Vec<(i64, i64)>,
    /// Per node, the parts of its CEL value that do not change with usage, built on first use.
    pub(crate) node_statics: RefCell<Vec<Option<NodeStatic>>>,
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
            norm_max: [0; MAX_SCORES],
            norm_min: [0; MAX_SCORES],
            topo_active: TopoActive::default(),
            fast: FastPathState::new(
                match &profile.rules {
                    Some(Ok(rules)) => Some(cel_rules::snapshot_rules(snapshot, rules)),
                    _ => None,
                },
                !profile.has_rules(),
            ),
            rejected_limit: None,
            rule_raw: RefCell::new(vec![0; snapshot.nodes().len() * profile.score_rules()]),
            rule_extrema: vec![(0, 0); profile.score_rules()],
            node_statics: RefCell::new(if profile.has_rules() {
                vec![None; snapshot.nodes().len()]
            } else {
                Vec::new()
            }),
            extenders: None,
        }
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
        self.fast
            .image_sums
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
                self.fast.image_sums.deactivate();
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
        self.fast.image_sums.deactivate();
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
        if plan.per_node || !self.fast.class_replay || replay.node_by_node(class) {
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
            devices: plan.devices.as_ref().is_some_and(|d| d.scores()),
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
        if let Some(message) = &plan.device_error {
            on_reject(
                FilterPlugin::DynamicResources,
                Reason::DevicePreFilter(Arc::clone(message)),
            );
            return None;
        }
        // Without topology, volume or device state those filters pass every node: skip them.
        let filters = if plan.topo.is_some() || plan.volumes.is_some() || plan.devices.is_some() {
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
        let slots = if plan.topo.is_some() || plan.devices.is_some() {
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
                    let sum = self.fast.image_sums.get().get(i).copied().unwrap_or(0);
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
                ScorePlugin::DynamicResources => score::<DynamicResources>(plan.devices.as_deref(), &node),
                ScorePlugin::DevicePacking => score::<DevicePacking>(plan.devices.as_deref(), &node),
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
            // kube's `DefaultNormalizeScore` (not reversed).
            ScorePlugin::DynamicResources if self.topo_active.devices => node_affinity::normalize(raw, max),
            ScorePlugin::DynamicResources => 0,
            // Raw 0 to 100 for a pod with claims; a pod without gives every node 0.
            ScorePlugin::DevicePacking if self.topo_active.devices => raw,
            ScorePlugin::DevicePacking => 0,
            // PreScore skipped: the plugin gives every node 0.
            ScorePlugin::PodTopologySpread => 0,
            _ => raw,
        }
    }

    /// Normalizes one candidate with the extrema of the last [`Evaluator::normalize`], and weighs it.
    fn normalize_one(&self, c: &mut Candidate) {
        let mut total = 0;
        // Inactive topology plugins give every node 0.
        let slots = if self.topo_active.interpod || self.topo_active.spread || self.topo_active.devices {
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
                ScorePlugin::DynamicResources if self.topo_active.devices => Need::Max,
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
            (&pod.requests, &plan.dra_extended),
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
        FilterPlugin::DynamicResources => {
            filter::<DynamicResources>(plan.devices.as_deref(), node, Reason::DynamicResources, report)
        }
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

/// Which topology score plugins scored the current pod (PreScore not skipped); the others give
/// every node 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TopoActive {
    /// InterPodAffinity scored.
    interpod: bool,
    /// PodTopologySpread scored.
    spread: bool,
    /// DynamicResources scored (the pod has a prioritized list).
    devices: bool,
}

mod extenders;

#[cfg(test)]
#[path = "framework_tests.rs"]
pub(crate) mod tests;

#[cfg(test)]
#[path = "topology_tests.rs"]
mod topology_tests;
