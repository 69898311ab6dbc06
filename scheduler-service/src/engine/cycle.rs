//! The scheduling cycle, as kube-scheduler's `schedule_one.go` runs it: for one pod (Rank) or a
//! batch in order (Schedule), make the pod's plan, filter every node, score the feasible ones,
//! normalize and weigh, pick the best; a pod no node fits goes to PostFilter (preemption), and a
//! batch's label gangs are placed whole or not at all ([`super::label_gang`]).
//!
//! The per-node work is the framework's ([`super::framework`]): the plugins' filters and scores,
//! and the fast paths that give the same answers with less work.

use super::accel::class_replay::ClassReplay;
use super::accel::sinks::TotalsBuffer;
use super::batch_usage::BatchUsage;
use super::diagnosis::RejectedNode;
use super::framework::{
    Candidate, Deadline, DeadlinePassed, Decision, Diagnosis, EvalError, Evaluator, FlagBuffer, RankedNode, Ranking,
    Reason, Rejections,
};
use super::model::PodSpec;
use super::plan::{same_constraints, PodPlan, TopoState};
use super::plugins::dynamicresources::device_packing as packing;
use super::plugins::dynamicresources::{RequestFailure, CANNOT_ALLOCATE};
use super::policy::FilterPlugin;
use super::profile::MAX_SCORES;
use super::select::{best_candidate, keep_top_k};
use super::snapshot::NodeEntry;
use super::topology::Placed;
use std::collections::HashMap;
use std::sync::Arc;

/// Says, on each listed node DynamicResources refused because the pod's claims cannot be
/// allocated there, which requests fail and why (Rank only: the scheduling path never does this
/// work). Nodes with one device signature share the answer; past the deadline the rest are left
/// without one.
fn diagnose_devices(plan: &PodPlan<'_>, nodes: &[Arc<NodeEntry>], rejected: &mut [RejectedNode], deadline: Deadline) {
    let Some(devices) = plan.devices.as_deref() else {
        return;
    };
    let mut by_signature: HashMap<u64, Vec<RequestFailure>> = HashMap::new();
    for r in rejected {
        let refused = r.plugin == FilterPlugin::DynamicResources
            && r.reasons
                .iter()
                .any(|x| matches!(x, Reason::DynamicResources(m) if &**m == CANNOT_ALLOCATE));
        let Some(node) = nodes.get(r.node).filter(|_| refused) else {
            continue;
        };
        if deadline.passed() {
            return;
        }
        r.devices = match devices.diagnosis_signature(r.node, &node.spec) {
            Some(signature) => by_signature
                .entry(signature)
                .or_insert_with(|| devices.diagnose(&node.spec))
                .clone(),
            None => devices.diagnose(&node.spec),
        };
    }
}

/// KEP-5927's spans in the decision replica: a `SchedulePod` span per pod with a child per phase
/// (`preFilter`, `filterAndScore`: the engine filters and scores a node in one pass, `postFilter`,
/// `reserve`), made only when the call's trace is sampled (checked once per pass), so an
/// untraced batch pays nothing per pod.
struct PodTrace {
    on: bool,
}

impl PodTrace {
    fn for_current_call() -> Self {
        PodTrace {
            on: crate::telemetry::current_is_sampled(),
        }
    }

    fn pod(&self, pod: &PodSpec, profile: &str) -> tracing::Span {
        if !self.on {
            return tracing::Span::none();
        }
        tracing::info_span!(
            "SchedulePod",
            k8s.pod.name = %pod.name,
            k8s.pod.namespace = %pod.namespace,
            k8s.pod.uid = %pod.uid,
            k8s.scheduler.profile = profile,
            k8s.scheduler.result = tracing::field::Empty,
            k8s.scheduler.selected_node = tracing::field::Empty,
        )
    }

    fn phase(pod: &tracing::Span, name: &'static str) -> tracing::Span {
        if pod.is_none() {
            return tracing::Span::none();
        }
        tracing::info_span!(parent: pod, "phase", otel.name = name, k8s.scheduler.phase = name)
    }
}

impl Evaluator<'_> {
    /// Ranks every node for one pod: the `top_k` best feasible nodes (0 for all) and every rejected node.
    pub fn rank(&mut self, pod: &PodSpec, top_k: usize, seed: u64, deadline: Deadline) -> Result<Ranking, EvalError> {
        let _busy = super::parallel::Busy::enter();
        self.fast.image_sums.forget();
        let plan = PodPlan::new(self.profile, self.snapshot, pod, seed, &Placed::default(), true);
        let usage = BatchUsage::new(self.snapshot);
        // Rejections are counted as they come, in node order (see `Rejections`).
        let mut rejections = Rejections::new(self.snapshot.nodes(), pod, self.rejected_limit);
        let timeout = || EvalError::DeadlineExceeded { done: 0, total: 1 };
        // With a top k wanted, the plain pass keeps each feasible node's index and total only;
        // the k best are scored plugin by plugin afterwards (see `Evaluator::evaluate_totals`).
        let mut totals: Option<TotalsBuffer> = None;
        if self.fast.allow_plain && plan.plain && plan.topo.is_none() {
            // The plain pass scores; the nodes it left out are filtered again for their reasons,
            // unless nothing would show them (no list wanted and some node feasible).
            if top_k > 0 {
                totals = Some(
                    self.evaluate_totals(&plan, &usage, deadline)
                        .map_err(|DeadlinePassed| timeout())?,
                );
            } else {
                self.evaluate_plain(&plan, &usage, deadline)
                    .map_err(|DeadlinePassed| timeout())?;
            }
            let none_feasible = totals.as_ref().map_or(self.candidates.is_empty(), |t| t.is_empty());
            if none_feasible || self.rejected_limit != Some(0) {
                let feasible: Vec<u32> = match &totals {
                    Some(t) => t.iter().map(|s| s.index).collect(),
                    None => self.candidates.iter().map(|c| c.index).collect(),
                };
                let mut feasible = feasible.into_iter().peekable();
                let mut replay = ClassReplay::new();
                for (i, entry) in self.snapshot.nodes().iter().enumerate() {
                    if feasible.next_if_eq(&(i as u32)).is_some() {
                        continue;
                    }
                    // Rejected by the plain pass, so no candidate comes back: only its reasons,
                    // read from the hot fields as the general pass reads them.
                    let _ = self.filter_with_reasons(&plan, &usage, i, entry, &mut replay, &mut rejections);
                }
                replay.count(&mut rejections);
            }
        } else {
            self.evaluate(&plan, &usage, &Placed::default(), deadline, Some(&mut rejections))
                .map_err(|DeadlinePassed| timeout())?;
        }
        let feasible_count = totals.as_ref().map_or(self.candidates.len(), |t| t.len());
        let nodes = self.snapshot.nodes();
        let Rejections {
            counts,
            listed: mut rejected,
            unresolvable,
            ..
        } = rejections;
        diagnose_devices(&plan, nodes, &mut rejected, deadline);
        let mut diagnosis = Diagnosis {
            node_count: nodes.len(),
            reasons: counts.into_iter().collect(),
            ..Diagnosis::default()
        };
        if feasible_count == 0 && !nodes.is_empty() {
            let potential = (0..nodes.len()).filter(|&i| !unresolvable[i]).collect();
            super::plugins::defaultpreemption::post_filter(
                self.profile,
                self.snapshot,
                &plan,
                pod,
                &usage,
                &mut diagnosis,
                potential,
            );
        }
        let k = if top_k == 0 {
            feasible_count
        } else {
            top_k.min(feasible_count)
        };
        let hot = self.snapshot.hot();
        let key = |index: u32, total: i64| (total, plan.tie_break(hot[index as usize].name_hash));
        let cmp = |a: &Candidate, b: &Candidate| key(b.index, b.total).cmp(&key(a.index, a.total));
        if let Some(mut totals) = totals {
            keep_top_k(
                &mut totals,
                k,
                |s| s.total,
                |a, b| key(b.index, b.total).cmp(&key(a.index, a.total)),
            );
            // The k best, scored plugin by plugin as the general pass scores them (the image
            // sums are back for ImageLocality).
            self.candidates.clear();
            self.image_sums(&plan);
            for s in totals.iter() {
                let i = s.index as usize;
                let entry = &nodes[i];
                if let Some(c) = self.eval_node(&plan, &usage, i, entry, &usage.hot, &mut |_, _| {}) {
                    self.candidates.push(Candidate { total: s.total, ..c });
                }
            }
            self.fast.image_sums.deactivate();
        } else {
            keep_top_k(&mut self.candidates, k, |c| c.total, cmp);
        }
        self.candidates.sort_unstable_by(cmp);
        let feasible = self
            .candidates
            .iter()
            .map(|c| RankedNode {
                node: nodes[c.index as usize].spec.name.clone(),
                total: c.total,
                scores: self
                    .profile
                    .score_plugins
                    .iter()
                    .take(MAX_SCORES)
                    .enumerate()
                    .map(|(slot, (p, w))| (*p, self.normalized(*p, slot, c.raw[slot]), *w))
                    .collect(),
            })
            .collect();
        Ok(Ranking {
            feasible,
            feasible_count,
            rejected,
            diagnosis,
        })
    }

    /// Places a batch in order; each placement consumes its node's capacity for the pods after it.
    /// A pod that fits nowhere may be nominated to a node where preemption makes room (the
    /// nomination reserves the pod's room for the pods after it); a label gang is placed whole or
    /// not at all (see [`super::label_gang`]). PodGroups are not this cycle's: see
    /// [`super::entry::schedule`], the engine's entry for a batch.
    pub fn schedule(&mut self, pods: &[PodSpec], seed: u64, deadline: Deadline) -> Result<Vec<Decision>, EvalError> {
        // While another call evaluates too, no pass is split (the cores are taken).
        let _busy = super::parallel::Busy::enter();
        self.fast.image_sums.forget();
        // With DevicePacking, the batch's larger device claims go first (within a priority).
        if let Some(order) = self
            .profile
            .device_packing
            .as_ref()
            .and_then(|_| packing::batch_order(self.snapshot().devices(), pods))
        {
            let permuted: Vec<PodSpec> = order.iter().map(|&i| pods[i].clone()).collect();
            let decided = self.place_batch(&permuted, seed, deadline)?;
            let mut out: Vec<Option<Decision>> = vec![None; pods.len()];
            for (d, &i) in decided.into_iter().zip(&order) {
                out[i] = Some(d);
            }
            return Ok(out.into_iter().flatten().collect());
        }
        self.place_batch(pods, seed, deadline)
    }

    /// A batch without PodGroup members placed in its order: label gangs all or nothing
    /// ([`super::label_gang`]) when some pod belongs to one, plain pods one by one
    /// ([`Evaluator::schedule_pass`]) otherwise (the choice `engine::entry::BatchKind` names).
    fn place_batch(&mut self, pods: &[PodSpec], seed: u64, deadline: Deadline) -> Result<Vec<Decision>, EvalError> {
        if pods.iter().any(|p| p.gang.is_some()) {
            super::label_gang::schedule(self, pods, seed, deadline)
        } else {
            self.schedule_pass(pods, seed, deadline, &|_| false)
        }
    }

    /// A PodGroup's members placed in order, as one pass, ending once `stop` holds for the
    /// decision just made (see [`super::podgroup`]).
    pub(super) fn schedule_group(
        &mut self,
        pods: &[PodSpec],
        seed: u64,
        deadline: Deadline,
        stop: &mut dyn FnMut(&Decision) -> bool,
    ) -> Result<Vec<Decision>, EvalError> {
        let _busy = super::parallel::Busy::enter();
        self.fast.image_sums.forget();
        self.schedule_pass_until(pods, seed, deadline, &|_| false, stop)
    }

    /// One pass over the batch in order; pods for which `skip` holds are left out (their decision is
    /// a placeholder the caller replaces) and take no room.
    pub(super) fn schedule_pass(
        &mut self,
        pods: &[PodSpec],
        seed: u64,
        deadline: Deadline,
        skip: &dyn Fn(&PodSpec) -> bool,
    ) -> Result<Vec<Decision>, EvalError> {
        self.schedule_pass_until(pods, seed, deadline, skip, &mut |_| false)
    }

    /// [`Evaluator::schedule_pass`] that ends early, before the next pod, once `stop` holds for
    /// the decision just made: the decisions made so far are returned (fewer than `pods`).
    pub(super) fn schedule_pass_until(
        &mut self,
        pods: &[PodSpec],
        seed: u64,
        deadline: Deadline,
        skip: &dyn Fn(&PodSpec) -> bool,
        stop: &mut dyn FnMut(&Decision) -> bool,
    ) -> Result<Vec<Decision>, EvalError> {
        let mut usage = BatchUsage::new(self.snapshot);
        let mut out = Vec::with_capacity(pods.len());
        let node_count = self.snapshot.nodes().len();
        // Replicas of one workload arrive together: for a pod whose constraints equal those the
        // candidates were computed for, only the node that took the previous pod changed.
        let mut plan: Option<(usize, PodPlan<'_>)> = None;
        let mut changed: Option<usize> = None;
        let mut reusable = false;
        let policy_seed = seed ^ self.profile.policy.seed;
        // Pods placed so far in this batch, for the topology plugins.
        let mut placed = Placed::default();
        let trace = PodTrace::for_current_call();
        for (done, pod) in pods.iter().enumerate() {
            let timeout = EvalError::DeadlineExceeded {
                done,
                total: pods.len(),
            };
            if deadline.passed() {
                return Err(timeout);
            }
            if out.last().is_some_and(&mut *stop) {
                break;
            }
            if skip(pod) {
                out.push(Decision::Unschedulable(Diagnosis::default()));
                continue;
            }
            let pod_span = trace.pod(pod, &self.profile.policy.name);
            let mut filter_span = tracing::Span::none();
            // After `evaluate_best` no candidates are left for a replica to re-score.
            let reused = match plan.as_mut() {
                Some((p, current)) if self.fast.reuse && reusable && same_constraints(&pods[*p], pod) => {
                    filter_span = PodTrace::phase(&pod_span, "filterAndScore");
                    current.tie_seed = PodPlan::tie_seed_for(policy_seed, pod);
                    current.pod = pod;
                    let had_topo = current.topo.is_some();
                    current.topo = TopoState::build(self.profile, self.snapshot, &placed, current);
                    if had_topo || current.topo.is_some() {
                        // Inter-pod terms and spreading see every placement: evaluate afresh,
                        // keeping the per-class static predicates.
                        self.evaluate_quiet(current, &usage, &placed, deadline)
                            .map_err(|DeadlinePassed| timeout.clone())?;
                        changed = None;
                    } else if let Some(x) = changed.take() {
                        self.update_placed(current, &usage, x);
                    }
                    true
                }
                _ => false,
            };
            // Extenders need every feasible node of a pod they are interested in.
            let extended = self.extenders.filter(|h| h.interested(pod));
            let mut quick = None;
            if !reused {
                let prefilter_span = PodTrace::phase(&pod_span, "preFilter");
                let fresh = PodPlan::new(self.profile, self.snapshot, pod, seed, &placed, true);
                drop(prefilter_span);
                filter_span = PodTrace::phase(&pod_span, "filterAndScore");
                // A pod the next one will not re-score from needs only the best node: the plain
                // pass keeps no candidate list for it when it applies.
                let next_reuses = self.fast.reuse && pods.get(done + 1).is_some_and(|next| same_constraints(pod, next));
                if !next_reuses && extended.is_none() {
                    quick = self
                        .evaluate_best(&fresh, &usage, deadline)
                        .transpose()
                        .map_err(|DeadlinePassed| timeout.clone())?;
                }
                // Most pods fit somewhere, so reasons are only gathered (in a second pass, from
                // the same usage) for a pod that fits nowhere.
                if quick.is_none() {
                    self.evaluate_quiet(&fresh, &usage, &placed, deadline)
                        .map_err(|DeadlinePassed| timeout.clone())?;
                }
                reusable = quick.is_none();
                plan = Some((done, fresh));
                changed = None;
            }
            let Some((_, plan)) = plan.as_ref() else {
                continue;
            };
            let (chosen, feasible) = match quick {
                Some(q) => (q.best, q.feasible),
                None => (
                    best_candidate(
                        self.candidates.iter(),
                        |c| (c.total, c.index),
                        |c| plan.tie_break(usage.hot[c.index as usize].name_hash),
                    )
                    .map(|c| (c.index as usize, c.total)),
                    self.candidates.len(),
                ),
            };
            let mut outcome = None;
            let (chosen, feasible) = match extended {
                Some(hook) if feasible > 0 => {
                    let o = self.call_extenders(hook, plan, &usage, &placed);
                    reusable = false;
                    let kept = (o.best, o.feasible);
                    outcome = Some(o);
                    kept
                }
                _ => (chosen, feasible),
            };
            if let Some(error) = outcome.as_mut().and_then(|o| o.error.take()) {
                out.push(Decision::Unschedulable(Diagnosis {
                    node_count,
                    error: Some(error),
                    ..Diagnosis::default()
                }));
                continue;
            }
            // A DynamicResources Filter error on any node ends the pod's cycle with it (kube's
            // `running "DynamicResources" filter plugin: …`), whatever other nodes gave.
            if let Some(error) = plan.devices.as_ref().and_then(|d| d.error()) {
                out.push(Decision::Unschedulable(Diagnosis {
                    node_count,
                    error: Some(error),
                    ..Diagnosis::default()
                }));
                continue;
            }
            let mut reasons: Vec<(Reason, u32)> = Vec::new();
            // For preemption: the nodes some reason marks unresolvable.
            let mut unresolvable = FlagBuffer::default();
            if feasible == 0 {
                let mut rejections = Rejections::new(self.snapshot.nodes(), pod, Some(0));
                self.evaluate(plan, &usage, &placed, deadline, Some(&mut rejections))
                    .map_err(|DeadlinePassed| timeout)?;
                if let Some(o) = outcome.take() {
                    // Every node the filters kept, the extenders turned down: with their message
                    // (resolvable or not, as they said), or silently (unresolvable, as a node with
                    // no status is to kube-scheduler's preemption).
                    for c in self.candidates.iter() {
                        rejections.unresolvable[c.index as usize] = true;
                    }
                    for (i, message) in o.failed {
                        rejections.unresolvable[i] = false;
                        rejections.count(&Reason::Extender(message), 1);
                    }
                    for (i, message) in o.failed_unresolvable {
                        rejections.unresolvable[i] = true;
                        rejections.count(&Reason::Extender(message), 1);
                    }
                }
                (reasons, unresolvable) = (rejections.counts, rejections.unresolvable);
            }
            drop(filter_span);
            let nodes = self.snapshot.nodes();
            match chosen {
                Some((i, score)) => {
                    let _reserve = PodTrace::phase(&pod_span, "reserve");
                    pod_span.record("k8s.scheduler.result", "Success");
                    pod_span.record("k8s.scheduler.selected_node", nodes[i].spec.name.as_str());
                    let mut volumes = Vec::new();
                    if let Some(v) = &plan.volumes {
                        // The volumes chosen for its WaitForFirstConsumer claims are no one else's.
                        volumes = v.binding(&nodes[i].spec).unwrap_or_default();
                        placed.volumes.record(&pod.namespace, &pod.volumes, volumes.clone());
                    }
                    let mut devices = Vec::new();
                    if let Some(d) = &plan.devices {
                        // The devices allocated for its claims are no one else's (Reserve).
                        devices = d.reserve(&nodes[i].spec);
                        placed.devices.record(&self.snapshot.device_index().slices, i, &devices);
                    }
                    out.push(Decision::Node {
                        node: nodes[i].spec.name.clone(),
                        score,
                        feasible,
                        volumes,
                        devices,
                    });
                    usage.assume(i, pod);
                    placed.push(i, pod);
                    changed = Some(i);
                }
                None => {
                    pod_span.record("k8s.scheduler.result", "Unschedulable");
                    let _postfilter = PodTrace::phase(&pod_span, "postFilter");
                    let mut diagnosis = Diagnosis {
                        node_count,
                        reasons: reasons.into_iter().collect(),
                        ..Diagnosis::default()
                    };
                    // Gang members do not preempt: a gang's victims would be evicted even when the
                    // gang as a whole cannot be placed.
                    // Nor do a PodGroup's: its cycle preempts for the group as a whole.
                    if node_count > 0 && pod.gang.is_none() && pod.pod_group.is_none() {
                        // Every node was rejected: those with only resolvable reasons may be helped.
                        let potential = (0..node_count).filter(|&i| !unresolvable[i]).collect();
                        super::plugins::defaultpreemption::post_filter(
                            self.profile,
                            self.snapshot,
                            plan,
                            pod,
                            &usage,
                            &mut diagnosis,
                            potential,
                        );
                    }
                    if let Some(i) = diagnosis
                        .nomination
                        .as_ref()
                        .and_then(|n| self.snapshot.position_of(&n.node))
                    {
                        // kube-scheduler counts a nominated pod on its node for the pods after it:
                        // the victims' room is the preemptor's, not theirs.
                        usage.assume(i, pod);
                        placed.push(i, pod);
                        changed = Some(i);
                    }
                    out.push(Decision::Unschedulable(diagnosis));
                }
            }
        }
        Ok(out)
    }
}
