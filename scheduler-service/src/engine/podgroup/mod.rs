//! PodGroups (`scheduling.k8s.io/v1beta1`): kube-scheduler 1.37's PodGroup cycle
//! (`pkg/scheduler/schedule_one_podgroup.go`) with the `GenericWorkload` and
//! `TopologyAwareWorkloadScheduling` gates on, and the plugins it runs: GangScheduling's
//! `PlacementFeasible` (`framework/plugins/gangscheduling/gangscheduling.go`), TopologyPlacement
//! (`framework/plugins/topologyaware/topology_placement.go`), PodGroupPodsCount
//! (`framework/plugins/podgrouppodscount/podgroup_pods_count.go`) and NodeResourcesFit's placement
//! score (`framework/plugins/noderesources/resource_allocation.go`, `scorePlacement`).
//!
//! A batch is cut into segments in order: runs of pods without a PodGroup (scheduled as any
//! batch), and each PodGroup with every member of the batch, at its first member. A group's
//! cycle:
//!
//! ```text
//!  placements  ── one per domain of the topology key (nodes without the label take none; once a
//!      │          member is bound, only its domain), or one of every node without a key
//!      ▼
//!  per placement, on the snapshot seen through its nodes (Snapshot::restrict: the candidates
//!  are the domain's nodes, while InterPodAffinity and PodTopologySpread count the pods of the
//!  whole cluster, as kube's PreFilter and PreScore list every node):
//!      members placed in order as a batch; PlacementFeasible after each:
//!      scheduled + remaining < minCount ⇒ infeasible, stop
//!      ▼
//!  best feasible placement: PodGroupPodsCount (placed pods, normalized) + NodeResourcesFit
//!  (MostAllocated over the placement's nodes with the group on them); ties: the first evaluated
//!      ▼
//!  members placed there, or none: kube's PodGroupInitiallyScheduled condition and messages
//! ```
//!
//! kube evaluates every placement; here they are evaluated best bound first, and the walk stops
//! once a placement that took every member scores at least the next one's bound (its score were
//! every member placed): the same choice, up to kube's random tie-break. A placement whose free
//! capacity cannot hold minCount's smallest members is not simulated. Segments after a group see
//! its pods bound (the snapshot is derived by a delta, with its volume and device choices).

use std::collections::HashMap;
use std::sync::Arc;

use super::extender::ExtenderHook;
use super::framework::{Deadline, Decision, Diagnosis, EvalError};
use super::model::{PodGroupKey, PodSpec};
use super::profile::Profile;
use super::snapshot::Snapshot;

mod composite;
mod group_cycle;

pub use composite::LevelFit;
use group_cycle::*;
pub use group_cycle::{GroupOutcome, GroupReason, Level, PlacementFit};

/// A batch cut at its PodGroups.
enum Segment {
    /// Pods without a PodGroup, by position in the batch.
    Pods(Vec<usize>),
    /// A PodGroup's key and its members, by position.
    Group(PodGroupKey, Vec<usize>),
    /// A CompositePodGroup hierarchy (with the `CompositePodGroup` gate): its root's key, or why
    /// it cannot be built (the pods wait), and the members of all its PodGroups, by position.
    Tree(Result<Arc<str>, String>, Vec<usize>),
}

/// The batch's segments; without the `GenericWorkload` gate every pod is a plain pod (kube then
/// reads no PodGroup).
fn segments(pods: &[PodSpec], profile: &Profile, snapshot: &Snapshot) -> Vec<Segment> {
    let gates = profile.gates();
    let mut out: Vec<Segment> = Vec::new();
    let mut group_at: HashMap<Arc<str>, usize> = HashMap::new();
    let mut tree_of: HashMap<PodGroupKey, Option<Result<Arc<str>, String>>> = HashMap::new();
    for (i, pod) in pods.iter().enumerate() {
        match pod.pod_group.as_ref().filter(|_| gates.generic_workload) {
            Some(key) => {
                // With the CompositePodGroup gate, a group naming a parent is scheduled with its
                // whole hierarchy: the segment is its root's.
                let tree = tree_of
                    .entry(key.clone())
                    .or_insert_with(|| {
                        gates
                            .composite_pod_group
                            .then(|| composite::root_of(snapshot, key))
                            .flatten()
                    })
                    .clone();
                let seg_key: Arc<str> = match &tree {
                    Some(Ok(root)) => Arc::from(format!("cpg:{root}")),
                    Some(Err(_)) => Arc::from(format!("cpg?{key}")),
                    None => Arc::clone(key.as_arc()),
                };
                match group_at.get(&seg_key) {
                    Some(&s) => match &mut out[s] {
                        Segment::Group(_, members) | Segment::Tree(_, members) => members.push(i),
                        Segment::Pods(_) => {}
                    },
                    None => {
                        group_at.insert(seg_key, out.len());
                        out.push(match tree {
                            Some(t) => Segment::Tree(t, vec![i]),
                            None => Segment::Group(key.clone(), vec![i]),
                        });
                    }
                }
            }
            None => match out.last_mut() {
                Some(Segment::Pods(run)) => run.push(i),
                _ => out.push(Segment::Pods(vec![i])),
            },
        }
    }
    out
}

/// Schedules a batch with PodGroup members (see the module documentation): one decision per pod,
/// in order, and one outcome per PodGroup found in the snapshot, in the order of first members.
pub fn schedule(
    profile: &Profile,
    snapshot: &Snapshot,
    extenders: Option<&dyn ExtenderHook>,
    pods: &[PodSpec],
    seed: u64,
    deadline: Deadline,
) -> Result<(Vec<Decision>, Vec<GroupOutcome>), EvalError> {
    let ctx = Ctx {
        profile,
        extenders,
        seed,
        deadline,
    };
    let segments = segments(pods, profile, snapshot);
    let mut decisions: Vec<Option<Decision>> = (0..pods.len()).map(|_| None).collect();
    let mut outcomes = Vec::new();
    let mut derived: Option<Snapshot> = None;
    let mut domains = DomainViews::default();
    let last = segments.len().saturating_sub(1);
    for (s, segment) in segments.iter().enumerate() {
        let current = derived.as_ref().unwrap_or(snapshot);
        let (members, made) = match segment {
            Segment::Pods(run) => {
                let batch: Vec<PodSpec> = run.iter().map(|&i| pods[i].clone()).collect();
                let made = ctx.evaluator(current).schedule(&batch, seed, deadline)?;
                (run, made)
            }
            Segment::Group(key, members) => {
                let batch: Vec<PodSpec> = members.iter().map(|&i| pods[i].clone()).collect();
                let (made, outcome) = group_cycle(&ctx, current, &mut domains, key, &batch)?;
                outcomes.extend(outcome);
                (members, made)
            }
            Segment::Tree(root, members) => {
                let batch: Vec<PodSpec> = members.iter().map(|&i| pods[i].clone()).collect();
                let (made, tree_outcomes) = match root {
                    Ok(root) => composite::tree_cycle(&ctx, current, root, &batch)?,
                    Err(message) => (
                        (0..batch.len())
                            .map(|i| {
                                let key = batch[i].pod_group.as_ref().map(PodGroupKey::as_arc);
                                Decision::Unschedulable(group_diagnosis(key.unwrap_or(&Arc::from("")), message))
                            })
                            .collect(),
                        Vec::new(),
                    ),
                };
                outcomes.extend(tree_outcomes);
                (members, made)
            }
        };
        if s < last {
            let batch: Vec<&PodSpec> = members.iter().map(|&i| &pods[i]).collect();
            if let Some(delta) = assumed_delta(current, &batch, &made) {
                let touched_devices = !delta.devices.is_empty();
                let next = current.apply(delta).map_err(|e| EvalError::Snapshot(e.to_string()))?;
                domains.follow(&next, touched_devices);
                derived = Some(next);
            }
        }
        for (&i, d) in members.iter().zip(made) {
            decisions[i] = Some(d);
        }
    }
    let decisions = decisions
        .into_iter()
        .map(|d| d.unwrap_or_else(|| Decision::Unschedulable(Diagnosis::default())))
        .collect();
    Ok((decisions, outcomes))
}

/// A PodGroup cycle with its placements' trials: what [`explain`] answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupExplanation {
    /// The members' decisions, as [`schedule`] makes them.
    pub decisions: Vec<Decision>,
    /// The cycle's outcome, as [`schedule`] gives it; `None` when the PodGroup is not in the
    /// snapshot (its pods wait for it).
    pub outcome: Option<GroupOutcome>,
    /// The group's minCount (1 for the basic policy); 0 when the PodGroup is not in the snapshot.
    pub min_count: u32,
    /// Each placement the cycle would consider, in the order it evaluates them (best bound first);
    /// empty when the PodGroup is missing or its placements cannot be made (a SchedulerError).
    /// In a CompositePodGroup hierarchy: inside the domain taken (or looked into) at the level
    /// above, for the group's own pods.
    pub placements: Vec<PlacementFit>,
    /// In a CompositePodGroup hierarchy (the gate on): each level from the root down to the
    /// group's parent, with its domains; empty otherwise.
    pub levels: Vec<composite::LevelFit>,
}

/// The PodGroup cycle of `members` (the pending pods of the group `key`, `namespace/name`, in
/// queue order) on `snapshot`, explained: the decisions and outcome [`schedule`] gives for them,
/// and, for each placement the cycle considers, how many of them fit there. Scheduling is not
/// changed by it: the decisions and outcome are [`schedule`]'s own; the trials are extra passes.
pub fn explain(
    profile: &Profile,
    snapshot: &Snapshot,
    extenders: Option<&dyn ExtenderHook>,
    key: &str,
    members: &[PodSpec],
    seed: u64,
    deadline: Deadline,
) -> Result<GroupExplanation, EvalError> {
    let (decisions, outcomes) = schedule(profile, snapshot, extenders, members, seed, deadline)?;
    let outcome = outcomes
        .into_iter()
        .find(|o| format!("{}/{}", o.namespace, o.name) == key);
    let key = PodGroupKey::from_key(key);
    let Some(group) = snapshot.pod_group(&key).map(Arc::clone) else {
        return Ok(GroupExplanation {
            decisions,
            outcome,
            min_count: 0,
            placements: Vec::new(),
            levels: Vec::new(),
        });
    };
    let min_count = group.min_count();
    let topology = topology_of(profile, snapshot, &group);
    let ctx = Ctx {
        profile,
        extenders,
        seed,
        deadline,
    };
    // In a hierarchy: its levels, and the group's own pods inside the domain looked into.
    let hierarchy = if profile.gates().composite_pod_group {
        let taken = outcome.as_ref().map(|o| o.levels.clone()).unwrap_or_default();
        composite::explain_levels(&ctx, snapshot, &key, members, &taken)?
    } else {
        None
    };
    let (levels, within) = hierarchy.unwrap_or_default();
    let own: Vec<PodSpec>;
    let members: &[PodSpec] = if levels.is_empty() {
        members
    } else {
        own = members
            .iter()
            .filter(|p| p.pod_group.as_ref() == Some(&key))
            .cloned()
            .collect();
        &own
    };
    let in_tree = !levels.is_empty();
    let within = within.filter(|_| in_tree);
    let Ok(placements) = placements(
        profile,
        snapshot,
        &group,
        topology.as_deref(),
        members,
        within.as_deref(),
    ) else {
        return Ok(GroupExplanation {
            decisions,
            outcome,
            min_count,
            placements: Vec::new(),
            levels,
        });
    };
    let bound = snapshot.pod_group_bound(&key);
    let mut fits = Vec::with_capacity(placements.len());
    for p in &placements {
        let view;
        let on: &Snapshot = match p.domain {
            None if !in_tree => snapshot,
            _ => {
                view = snapshot.restrict(&p.nodes);
                &view
            }
        };
        let made = ctx
            .evaluator(on)
            .schedule_group(members, seed, deadline, &mut |_| false)?;
        let fit = made.iter().filter(|d| matches!(d, Decision::Node { .. })).count();
        fits.push(PlacementFit {
            domain: p
                .domain
                .and_then(|d| topology.as_ref().and_then(|t| t.values.get(d as usize).cloned())),
            nodes: p.nodes.len(),
            fit,
            members: members.len(),
            bound,
            feasible: fit > 0 && bound + fit >= min_count as usize,
        });
    }
    Ok(GroupExplanation {
        decisions,
        outcome,
        min_count,
        placements: fits,
        levels,
    })
}

#[cfg(test)]
mod tests;
