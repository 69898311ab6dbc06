//! One PodGroup's cycle (`schedule_one_podgroup.go`'s `podGroupCycle` for a single group): its
//! placements, each tried with its members, the best feasible one taken; the module
//! documentation of [`super`] draws it. The pieces CompositePodGroup hierarchies reuse
//! ([`super::composite`]) live here too, so that both read them from one place.

use std::collections::HashMap;
use std::sync::Arc;

use crate::engine::diagnosis::Nomination;
use crate::engine::extender::ExtenderHook;
use crate::engine::framework::{Deadline, Decision, Diagnosis, EvalError, Evaluator, GangFailure};
use crate::engine::model::{PodGroup, PodGroupKey, PodSpec, PreemptionPolicy};
use crate::engine::plugins::defaultpreemption::podgroup::{self as podgroup_preemption, GroupPreemption};
use crate::engine::plugins::podgrouppodscount;
use crate::engine::profile::Profile;
use crate::engine::snapshot::{Delta, Snapshot, Topology};

pub(super) use crate::engine::plugins::gangscheduling::placement_feasible;
pub(super) use crate::engine::plugins::noderesources::placement_score::{fit_score, fit_scoring, scoring_request};
pub(super) use crate::engine::plugins::topologyaware::{placements, Placement};

/// `errPodGroupUnschedulable`.
pub(super) const UNSCHEDULABLE: &str = "pod group is unschedulable";

/// `RunPlacementGeneratePlugins`' status when the plugin generated no placement.
pub(super) const NO_PLACEMENTS: &str = "no feasible placements found";

/// What a group's cycle writes as its PodGroupInitiallyScheduled condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOutcome {
    /// The PodGroup's namespace.
    pub namespace: Arc<str>,
    /// The PodGroup's name.
    pub name: Arc<str>,
    /// The condition's reason.
    pub reason: GroupReason,
    /// The condition's message (empty when scheduled, as kube writes it).
    pub message: String,
    /// With a topology key: the domain the group took (or would have taken).
    pub domain: Option<String>,
    /// In a CompositePodGroup hierarchy: the domain chosen at each level above the group, from
    /// the root down (empty otherwise, and when the hierarchy was not placed).
    pub levels: Vec<Level>,
}

/// The domain a CompositePodGroup of a hierarchy was placed in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Level {
    /// The CompositePodGroup's name (of the group's namespace).
    pub composite: Arc<str>,
    /// Its topology key; `None` without one.
    pub topology_key: Option<Arc<str>>,
    /// The key's value it was placed in; `None` without a key.
    pub domain: Option<String>,
}

/// The reason of a PodGroupInitiallyScheduled condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupReason {
    /// The group was placed (condition True).
    Scheduled,
    /// It fits no placement (condition False).
    Unschedulable,
    /// The cycle failed with an error (condition False).
    SchedulerError,
}

impl GroupReason {
    /// The condition reason's text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "Scheduled",
            Self::Unschedulable => "Unschedulable",
            Self::SchedulerError => "SchedulerError",
        }
    }
}

/// What every evaluation of a call shares.
pub(super) struct Ctx<'a> {
    pub(super) profile: &'a Profile,
    pub(super) extenders: Option<&'a dyn ExtenderHook>,
    pub(super) seed: u64,
    pub(super) deadline: Deadline,
}

impl<'a> Ctx<'a> {
    pub(super) fn evaluator<'s>(&self, snapshot: &'s Snapshot) -> Evaluator<'s>
    where
        'a: 's,
    {
        let ev = Evaluator::new(self.profile, snapshot);
        match self.extenders {
            Some(hook) => ev.with_extenders(hook),
            None => ev,
        }
    }
}

/// The delta binding a segment's placed pods, with the volumes and devices chosen for them;
/// `None` when it placed none.
pub(super) fn assumed_delta(snapshot: &Snapshot, pods: &[&PodSpec], made: &[Decision]) -> Option<Delta> {
    let mut upsert_pods = Vec::new();
    let mut choices = Vec::new();
    let mut allocated = Vec::new();
    for (pod, d) in pods.iter().zip(made) {
        let Decision::Node {
            node, volumes, devices, ..
        } = d
        else {
            continue;
        };
        let mut bound = (*pod).clone();
        bound.node_name = Some(node.clone());
        upsert_pods.push(bound);
        choices.extend(volumes.iter());
        for c in devices {
            let consumer = crate::engine::devices::Consumer {
                api_group: String::new(),
                resource: "pods".into(),
                name: pod.name.clone(),
                uid: pod.uid.to_string(),
            };
            allocated.push((format!("{}/{}", c.namespace, c.name), &c.allocation, consumer));
        }
    }
    if upsert_pods.is_empty() {
        return None;
    }
    Some(Delta {
        upsert_pods,
        storage: snapshot.storage().assumed(choices),
        devices: snapshot
            .devices()
            .assumed(allocated.iter().map(|(k, a, c)| (k.as_str(), *a, c.clone()))),
        ..Delta::default()
    })
}

/// The views of one topology key's domains made so far in a batch. A view sees its domain's
/// nodes as candidates and the whole cluster through the topology plugins: it stays valid across a
/// segment that placed pods while its own nodes are unchanged and it never looked past them (or
/// nothing else changed either); otherwise it is cut again. Any device allocation drops them all.
#[derive(Default)]
pub(super) struct DomainViews {
    views: HashMap<(Arc<str>, u32), Arc<Snapshot>>,
}

impl DomainViews {
    /// Keeps the views that still show `next`, the snapshot after a segment placed pods.
    pub(super) fn follow(&mut self, next: &Snapshot, devices: bool) {
        if devices {
            self.views.clear();
            return;
        }
        self.views
            .retain(|_, view| Arc::get_mut(view).is_some_and(|v| v.follow_whole(next)));
    }
}

/// How one placement went.
pub(super) struct Trial {
    /// The members' decisions, as far as the cycle got (kube stops once minCount cannot be met).
    pub(super) made: Vec<Decision>,
    /// Members placed.
    pub(super) placed: usize,
    /// `None` when feasible, else the PlacementFeasible status's reasons.
    pub(super) failure: Option<String>,
    /// NodeResourcesFit's weighted placement score (feasible ones).
    pub(super) fit: i64,
    /// PlacementFeasible refused before any member was tried (kube then wraps its reasons in
    /// `errPodGroupUnschedulable`).
    pub(super) upfront: bool,
}

/// Why a group's cycle ended with a SchedulerError.
pub(super) enum CycleError {
    /// The placements could not be made: the group's message.
    Group(String),
    /// The attempt of the member at `at` (in batch order) ended with an error.
    Member { at: usize, error: String },
}

/// The first member whose attempt ended with an error (an extender's, a PreFilter's, a CEL
/// selector's), not a rejection.
pub(super) fn member_error(made: &[Decision]) -> Option<(usize, String)> {
    made.iter().enumerate().find_map(|(i, d)| match d {
        Decision::Unschedulable(diag) => diag.error.clone().map(|e| (i, e)),
        Decision::Node { .. } => None,
    })
}

/// A failed trial's status message, as kube's default algorithm leaves it: PlacementFeasible's
/// reasons (under `errPodGroupUnschedulable` when it refused before any member), or the bare
/// error when no member was placed. Inside TopologyPlacement's wrapper kube prints the status's
/// error, which for a refusal before any member is `errPodGroupUnschedulable` alone.
pub(super) fn trial_status(t: &Trial, tas: bool) -> String {
    let reason = t.failure.clone().unwrap_or_default();
    match (t.upfront, tas) {
        (false, _) => reason,
        (true, true) => UNSCHEDULABLE.to_string(),
        (true, false) => format!("{UNSCHEDULABLE}, {reason}"),
    }
}

/// The topology the group's placements follow: its key's, with TopologyAwareWorkloadScheduling;
/// none without (kube then runs its default algorithm on every node, the key unread).
pub(super) fn topology_of(profile: &Profile, snapshot: &Snapshot, group: &PodGroup) -> Option<Arc<Topology>> {
    if !profile.gates().topology_aware_workload_scheduling {
        return None;
    }
    group.topology_key.as_ref().map(|k| snapshot.topology(k))
}

/// kube's `validatePodGroup` for the pending members (`schedule_one_podgroup.go`), pod by pod in
/// order: the group's priority, then the preemption policy (with the `PodGroupPreemptionPolicy`
/// gate the group's; without it, the first member's).
pub(super) fn validate(
    profile: &Profile,
    priority: i32,
    policy: PreemptionPolicy,
    members: &[PodSpec],
) -> Result<(), String> {
    let name = |p: PreemptionPolicy| match p {
        PreemptionPolicy::Never => "Never",
        PreemptionPolicy::PreemptLowerPriority => "PreemptLowerPriority",
    };
    let gated = profile.gates().pod_group_preemption_policy;
    let mut group_policy = gated.then_some(policy);
    for p in members {
        if p.priority != priority {
            return Err(format!(
                "all pods in a single pod group should have the same priority as the pod group's priority, got {} and {}",
                p.priority, priority
            ));
        }
        match group_policy {
            None => group_policy = Some(p.preemption_policy),
            Some(g) if g != p.preemption_policy => {
                return Err(if gated {
                    format!(
                        "all pods in a single pod group should have the same preemption policy as the pod group's preemption policy, got {} and {}",
                        name(p.preemption_policy),
                        name(g)
                    )
                } else {
                    format!(
                        "all pods in a single pod group should have the same preemption policy, got {} and {}",
                        name(p.preemption_policy),
                        name(g)
                    )
                });
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// The cycle of one PodGroup on `snapshot`: its members' decisions (in order) and its outcome
/// (`None` when the PodGroup is not in the snapshot: its pods wait for it, as kube's PreEnqueue
/// holds them).
pub(super) fn group_cycle(
    ctx: &Ctx<'_>,
    snapshot: &Snapshot,
    views: &mut DomainViews,
    group_key: &PodGroupKey,
    members: &[PodSpec],
) -> Result<(Vec<Decision>, Option<GroupOutcome>), EvalError> {
    let key = group_key.as_arc();
    let Some(group) = snapshot.pod_group(group_key).map(Arc::clone) else {
        let name = key.split_once('/').map_or(&**key, |(_, n)| n);
        let message = format!("waiting for pods's pod group {name:?} to appear in scheduling queue");
        return Ok((group_failure(members.len(), key, &message), None));
    };
    let outcome = |reason: GroupReason, message: String, domain: Option<String>| GroupOutcome {
        namespace: Arc::clone(&group.namespace),
        name: Arc::clone(&group.name),
        reason,
        message,
        domain,
        levels: Vec::new(),
    };
    if let Err(message) = validate(ctx.profile, group.priority, group.preemption_policy, members) {
        return Ok((
            error_decisions(members.len(), &message),
            Some(outcome(GroupReason::SchedulerError, message, None)),
        ));
    }
    let found = match find_placement(ctx, snapshot, views, &group, key, members, None)? {
        Ok(found) => found,
        Err(CycleError::Group(message)) => {
            return Ok((
                error_decisions(members.len(), &message),
                Some(outcome(GroupReason::SchedulerError, message, None)),
            ))
        }
        Err(CycleError::Member { at, error }) => {
            // kube's podGroupSchedulingDefaultAlgorithm stops at a member whose attempt ended
            // with an error (not a rejection): the group fails with a SchedulerError; that member
            // keeps its own error, every other member gets the group's.
            let message = format!("failed to schedule other pod from a pod group: {error}");
            let mut made = error_decisions(members.len(), &message);
            if let Some(d) = made.get_mut(at) {
                *d = error_decisions(1, &error).remove(0);
            }
            return Ok((made, Some(outcome(GroupReason::SchedulerError, message, None))));
        }
    };
    let (placements, first_failure) = match found {
        Found::Placed { made, domain } => {
            let made = complete(made, members.len(), UNSCHEDULABLE, key);
            return Ok((made, Some(outcome(GroupReason::Scheduled, String::new(), domain))));
        }
        Found::Nowhere {
            placements,
            first_failure,
        } => (placements, first_failure),
    };
    // No placement: kube's "0/N placements are available" with the first one's status, and what
    // the group's PostFilter (DefaultPreemption's PodGroupPostFilter) said.
    let tas = ctx.profile.gates().topology_aware_workload_scheduling;
    let first = first_failure.map(|t| (trial_status(&t, tas), t.made));
    let (first_status, first_made) = match first {
        Some((status, made)) => (status, made),
        None => (String::new(), Vec::new()),
    };
    let cycle_message = if ctx.profile.gates().topology_aware_workload_scheduling {
        nowhere_message(placements, &first_status)
    } else {
        // kube's default algorithm on one implicit placement: its own status, unwrapped.
        first_status
    };
    let preemption = podgroup_preemption::preempt(ctx.profile, snapshot, &group, members, ctx.seed, &mut |freed| {
        // The group's cycle on the cluster without the victims (kube's PodGroupSchedulingFunc).
        let mut views = DomainViews::default();
        Ok(
            match find_placement(ctx, freed, &mut views, &group, key, members, None)? {
                Err(CycleError::Group(message)) => Err(message),
                Err(CycleError::Member { error, .. }) => {
                    Err(format!("failed to schedule other pod from a pod group: {error}"))
                }
                Ok(Found::Placed { made, .. }) => Ok(made
                    .iter()
                    .map(|d| match d {
                        Decision::Node { node, .. } => Some(node.clone()),
                        Decision::Unschedulable(_) => None,
                    })
                    .collect()),
                Ok(Found::Nowhere {
                    placements,
                    first_failure,
                }) => {
                    let first = first_failure.map(|t| trial_status(&t, tas)).unwrap_or_default();
                    Err(if tas {
                        nowhere_message(placements, &first)
                    } else {
                        first
                    })
                }
            },
        )
    })?;
    let group_message = format!("{cycle_message}, {}", preemption.message());
    // Members the cycle placed before it failed: the group's message; members that failed on
    // their own: their FitError; members it did not reach: the cycle's message.
    let mut made: Vec<Decision> = first_made
        .into_iter()
        .map(|d| match d {
            Decision::Node { .. } => {
                Decision::Unschedulable(group_diagnosis(key, &format!("{UNSCHEDULABLE}, {group_message}")))
            }
            Decision::Unschedulable(mut diag) => {
                diag.gang = Some(GangFailure {
                    gang: Arc::clone(key),
                    message: group_message.clone(),
                    own: true,
                });
                Decision::Unschedulable(diag)
            }
        })
        .collect();
    made.extend((made.len()..members.len()).map(|_| Decision::Unschedulable(group_diagnosis(key, &cycle_message))));
    // Room made: every member the cycle on the freed cluster placed is nominated to its node and
    // waits for all the group's victims (evicted once, whichever member the binder acts on first).
    if let GroupPreemption::Preempt { nominated, victims } = &preemption {
        for (d, node) in made.iter_mut().zip(nominated) {
            if let (Decision::Unschedulable(diag), Some(node)) = (d, node) {
                diag.nomination = Some(Nomination {
                    node: node.clone(),
                    victims: victims.clone(),
                });
            }
        }
    }
    Ok((made, Some(outcome(GroupReason::Unschedulable, group_message, None))))
}

/// kube's status for a group no placement holds.
pub(super) fn nowhere_message(placements: usize, first_status: &str) -> String {
    if placements == 0 {
        // TopologyPlacement generated none (no node carries the key): the framework's status.
        return NO_PLACEMENTS.to_string();
    }
    let first = if first_status.is_empty() {
        String::new()
    } else {
        format!(", first placement status: {first_status}")
    };
    format!("{UNSCHEDULABLE}, 0/{placements} placements are available{first}")
}

/// What a group's cycle found, before its PostFilter.
pub(super) enum Found {
    /// The best placement: the members' decisions (as far as the cycle got) and its domain.
    Placed {
        made: Vec<Decision>,
        domain: Option<String>,
    },
    /// No placement holds the group: how many were considered and the first one's trial.
    Nowhere {
        placements: usize,
        first_failure: Option<Trial>,
    },
}

/// The placements of the group's cycle on `snapshot` and the best one (kube's
/// `podGroupSchedulingAlgorithm` up to its PostFilter); `Err` with a SchedulerError's message when
/// the placements cannot be made.
///
/// `within`: in a CompositePodGroup hierarchy, the nodes of the parent's placement (kube's
/// `ListNodesInPlacement`): the group's placements are cut from them, and a group that places no
/// pod because every member is bound is feasible there (kube requires a placed pod at the root
/// only).
pub(super) fn find_placement(
    ctx: &Ctx<'_>,
    snapshot: &Snapshot,
    views: &mut DomainViews,
    group: &PodGroup,
    key: &Arc<str>,
    members: &[PodSpec],
    within: Option<&[usize]>,
) -> Result<Result<Found, CycleError>, EvalError> {
    let scheduled = snapshot.pod_group_bound(&PodGroupKey::from_arc(key));
    let topology = topology_of(ctx.profile, snapshot, group);
    let placements = match placements(ctx.profile, snapshot, group, topology.as_deref(), members, within) {
        Ok(p) => p,
        Err(message) => return Ok(Err(CycleError::Group(message))),
    };
    let full = scheduled + members.len();
    let mut first_failure: Option<Trial> = None;
    let mut feasible: Vec<(Trial, usize)> = Vec::new();
    for (i, placement) in placements.iter().enumerate() {
        // A placement that took every member scores PodGroupPodsCount's full 100: none after
        // it (bounded by their score with every member) can beat it.
        let settled = feasible
            .iter()
            .any(|(t, _)| scheduled + t.placed == full && t.fit + 100 >= placement.bound);
        if settled {
            break;
        }
        if placement.hopeless && first_failure.is_some() {
            continue;
        }
        let trial = try_placement(
            ctx,
            snapshot,
            views,
            group,
            placement,
            members,
            scheduled,
            within.is_some(),
        )?;
        if let Some((at, error)) = member_error(&trial.made) {
            return Ok(Err(CycleError::Member { at, error }));
        }
        if trial.failure.is_some() {
            if first_failure.is_none() {
                first_failure = Some(trial);
            }
        } else {
            feasible.push((trial, i));
        }
    }
    // PodGroupPodsCount: pods scheduled and proposed, normalized by the most of any feasible
    // placement; the best total wins, the first evaluated on a tie.
    let most = podgrouppodscount::most(feasible.iter().map(|(t, _)| scheduled + t.placed));
    let total = |t: &Trial| t.fit + podgrouppodscount::normalized(scheduled + t.placed, most);
    let mut best: Option<(Trial, usize)> = None;
    for (t, i) in feasible {
        if best.as_ref().is_none_or(|(b, _)| total(&t) > total(b)) {
            best = Some((t, i));
        }
    }
    Ok(Ok(match best {
        Some((trial, i)) => Found::Placed {
            made: trial.made,
            domain: placements[i]
                .domain
                .and_then(|d| topology.as_ref().and_then(|t| t.values.get(d as usize).cloned())),
        },
        None => Found::Nowhere {
            placements: placements.len(),
            first_failure,
        },
    }))
}

/// Fills the decisions the cycle did not reach (a feasible placement reaches every member).
pub(super) fn complete(mut made: Vec<Decision>, n: usize, message: &str, key: &Arc<str>) -> Vec<Decision> {
    made.extend((made.len()..n).map(|_| Decision::Unschedulable(group_diagnosis(key, message))));
    made
}

/// A member's diagnosis carrying only its group's message.
pub(super) fn group_diagnosis(key: &Arc<str>, message: &str) -> Diagnosis {
    Diagnosis {
        gang: Some(GangFailure {
            gang: Arc::clone(key),
            message: message.to_string(),
            own: false,
        }),
        ..Diagnosis::default()
    }
}

pub(super) fn group_failure(n: usize, key: &Arc<str>, message: &str) -> Vec<Decision> {
    (0..n)
        .map(|_| Decision::Unschedulable(group_diagnosis(key, message)))
        .collect()
}

pub(super) fn error_decisions(n: usize, message: &str) -> Vec<Decision> {
    (0..n)
        .map(|_| {
            Decision::Unschedulable(Diagnosis {
                error: Some(message.to_string()),
                ..Diagnosis::default()
            })
        })
        .collect()
}

/// Runs the group on one placement (kube's `podGroupSchedulingDefaultAlgorithm` on the assumed
/// placement).
#[allow(clippy::too_many_arguments)]
pub(super) fn try_placement(
    ctx: &Ctx<'_>,
    snapshot: &Snapshot,
    views: &mut DomainViews,
    group: &PodGroup,
    placement: &Placement,
    members: &[PodSpec],
    scheduled: usize,
    in_tree: bool,
) -> Result<Trial, EvalError> {
    let profile = ctx.profile;
    let min = group.min_count();
    if let Err(reason) = placement_feasible(min, scheduled, members.len()) {
        return Ok(Trial {
            made: Vec::new(),
            placed: 0,
            failure: Some(reason),
            fit: 0,
            upfront: true,
        });
    }
    let view: Arc<Snapshot>;
    let on: &Snapshot = match placement.domain {
        _ if in_tree => {
            view = Arc::new(snapshot.restrict(&placement.nodes));
            &view
        }
        None => snapshot,
        Some(d) => {
            let topology_key: Arc<str> = group.topology_key.clone().unwrap_or_else(|| Arc::from(""));
            view = Arc::clone(
                views
                    .views
                    .entry((topology_key, d))
                    .or_insert_with(|| Arc::new(snapshot.restrict(&placement.nodes))),
            );
            &view
        }
    };
    let (mut remaining, mut placed) = (members.len(), 0usize);
    let mut failure: Option<String> = None;
    let made = {
        let mut stop = |d: &Decision| {
            remaining -= 1;
            if matches!(d, Decision::Node { .. }) {
                placed += 1;
            }
            match placement_feasible(min, scheduled + placed, remaining) {
                Err(reason) => {
                    failure = Some(reason);
                    true
                }
                Ok(_) => false,
            }
        };
        ctx.evaluator(on)
            .schedule_group(members, ctx.seed, ctx.deadline, &mut stop)?
    };
    let placed = made.iter().filter(|d| matches!(d, Decision::Node { .. })).count();
    if failure.is_none() {
        // The pass checks each decision before the next pod: the last one is checked here.
        let remaining = members.len() - made.len();
        failure = placement_feasible(min, scheduled + placed, remaining).err();
    }
    if failure.is_none() && placed == 0 && !in_tree {
        // kube: a cycle must schedule at least one pod to succeed.
        failure = Some(UNSCHEDULABLE.to_string());
    }
    let fit = match (&failure, fit_scoring(profile)) {
        (None, Some((w, resources))) => {
            let requests: Vec<i64> = resources
                .iter()
                .map(|(name, _)| {
                    members
                        .iter()
                        .zip(&made)
                        .filter(|(_, d)| matches!(d, Decision::Node { .. }))
                        .map(|(p, _)| scoring_request(p, name))
                        .sum()
                })
                .collect();
            w * fit_score(snapshot, &placement.nodes, resources, &requests)
        }
        _ => 0,
    };
    Ok(Trial {
        made,
        placed,
        failure,
        fit,
        upfront: false,
    })
}

/// How one placement of a group fares in [`explain`]: every member tried there, in order, each
/// taking its room, none stopped early (kube's cycle stops a placement once minCount cannot be
/// met; this goes on to count how many fit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementFit {
    /// The domain's value (of the group's topology key); `None` for the placement of every node
    /// (a group without a topology key).
    pub domain: Option<String>,
    /// Nodes in the placement.
    pub nodes: usize,
    /// Members (of those asked about) that fit there.
    pub fit: usize,
    /// Members asked about.
    pub members: usize,
    /// Members already bound (they count towards minCount, and fix the group's domain).
    pub bound: usize,
    /// minCount is met there: `bound + fit >= minCount`, with at least one member fitting.
    pub feasible: bool,
}
