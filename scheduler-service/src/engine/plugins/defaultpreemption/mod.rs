//! kube-scheduler's DefaultPreemption (`pkg/scheduler/framework/preemption/preemption.go` and
//! `plugins/defaultpreemption/default_preemption.go`, v1.34): when a pod fits nowhere, find the node
//! where evicting the fewest, least important lower-priority pods makes room.
//!
//! - Eligibility: a pod with `preemptionPolicy: Never` never preempts.
//! - Candidate nodes: only nodes that failed with a resolvable status (NodePorts, NodeResourcesFit
//!   short of room, PodTopologySpread's skew, InterPodAffinity's anti-affinity rules, the pod's or
//!   existing pods'); a node failing NodeUnschedulable, NodeName, TaintToleration or NodeAffinity,
//!   too small for the pod even when empty, lacking a spread constraint's topology label, or failing
//!   the pod's own required affinity is UnschedulableAndUnresolvable.
//! - The dry run keeps the topology filters' state in step with the pods it removes and reprieves
//!   (kube-scheduler's PreFilterExtensions `RemovePod`/`AddPod`), so evicting a pod that an
//!   anti-affinity rule or a skew counts can make room.
//! - Victims on a node (`SelectVictimsOnNode`): remove every lower-priority pod; if the pod still
//!   does not fit, the node is no candidate. Otherwise reprieve pods, most important first,
//!   PodDisruptionBudget-violating ones before the others, keeping each one that still lets the
//!   pod fit.
//! - The node (`pickOneNodeForPreemption`): fewest PDB violations, then the lowest highest victim
//!   priority, the smallest sum of priorities, the fewest victims, the latest start time of the
//!   highest-priority victims, then the first node by name.
//!
//! - Sampling (`DryRunPreemption`): like kube-scheduler, the dry run walks the potential nodes from
//!   an offset and stops once it has found `max(10 % of them, 100)` candidates, at least one of them
//!   without PDB violations (DefaultPreemptionArgs' defaults). kube-scheduler draws the offset at
//!   random; here it comes from the pod's tie-break seed, so a decision can be replayed.
//!
//! Only pods bound in the snapshot are victims; pods placed earlier in the same batch are not.

pub mod podgroup;

use std::sync::Arc;

use crate::engine::batch_usage::BatchUsage;
use crate::engine::framework::{filter_node, Diagnosis, Nomination};
use crate::engine::model::PodSpec;
use crate::engine::plan::{PodPlan, TopoState};
use crate::engine::plugins::dynamicresources::{DEALLOCATED, NOT_AVAILABLE};
use crate::engine::profile::Profile;
use crate::engine::snapshot::{BoundPod, Snapshot};

pub use crate::engine::model::PreemptionPolicy;
pub use crate::engine::pdb::{LabelSelector, Pdb};

/// kube-scheduler's reason for a node whose pods cannot be preempted.
const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
/// kube-scheduler 1.37's PostFilter message for a pod a volume PreFilter rejected (see
/// [`post_filter`]): the cycle state's `ErrNotFound`.
pub const POST_FILTER_STATE_NOT_FOUND: &str = "not found";

/// kube-scheduler's reason for the nodes preemption cannot help.
const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";

/// A node where preemption makes room, with its victims (most important first).
struct Candidate {
    node: usize,
    victims: Vec<Arc<BoundPod>>,
    pdb_violations: usize,
}

fn priority(p: &BoundPod) -> i32 {
    p.meta.as_ref().map_or(0, |m| m.priority)
}

/// kube-scheduler's `GetPodStartTime`: a pod not started yet counts as starting now (the latest).
fn start_time(p: &BoundPod) -> i64 {
    match p.meta.as_ref().map_or(0, |m| m.start_time) {
        0 => i64::MAX,
        t => t,
    }
}

fn uid(p: &BoundPod) -> Arc<str> {
    p.meta.as_ref().map_or_else(|| Arc::from(""), |m| m.uid.clone())
}

/// kube-scheduler's `MoreImportantPod` as an ordering (most important first): higher priority,
/// then earlier start; the uid makes the order total.
fn importance(a: &BoundPod, b: &BoundPod) -> std::cmp::Ordering {
    priority(b)
        .cmp(&priority(a))
        .then(start_time(a).cmp(&start_time(b)))
        .then_with(|| uid(a).cmp(&uid(b)))
}

/// kube-scheduler's PostFilter with DefaultPreemption, for a pod no node fits under `usage`: sets
/// `diag.nomination` when some node can make room, else `diag.post_filter` to kube-scheduler's
/// `preemption: …` message.
///
/// `plan` may have been made for an earlier pod of the batch with the same constraints; identity,
/// priority and preemption policy are read from `pod`. `potential` are the nodes whose every
/// reason is [`resolvable`](crate::engine::diagnosis::resolvable), in node order: the caller knows them from filtering every node.
pub(in crate::engine) fn post_filter(
    profile: &Profile,
    snapshot: &Snapshot,
    plan: &PodPlan<'_>,
    pod: &PodSpec,
    usage: &BatchUsage<'_>,
    diag: &mut Diagnosis,
    potential: Vec<usize>,
) {
    // kube-scheduler 1.37's default profile runs DynamicResources' PostFilter before
    // DefaultPreemption's (`default_plugins.go`'s `applyDynamicResources`). When a PreFilter
    // ordered before DynamicResources' rejected the pod (VolumeRestrictions', VolumeBinding's or
    // VolumeZone's: a missing, lost or deleting claim, an unbound Immediate one), DynamicResources
    // never wrote its cycle state: its PostFilter fails reading it (`getStateData`, the cycle
    // state's "not found"), `RunPostFilterPlugins` returns that error before DefaultPreemption
    // runs, and the FitError ends with it. No preemption, whatever the pod's policy. A profile
    // without DynamicResources has no such PostFilter: DefaultPreemption runs.
    if plan.volume_error.is_some() && profile.dynamic_resources {
        diag.post_filter = POST_FILTER_STATE_NOT_FOUND.to_string();
        return;
    }
    // DynamicResources' PostFilter (`dynamicresources.go`): an unused allocated claim that
    // Filter found unavailable on some node is deallocated, and the plugin returns Unschedulable
    // with "deallocation of ResourceClaim completed". `RunPostFilterPlugins` then runs
    // DefaultPreemption: when it succeeds its status alone is returned (the deallocation is not
    // in the message); otherwise the statuses' reasons are joined with ", ".
    let filter_found_unavailable = diag
        .reasons
        .keys()
        .any(|r| matches!(r, crate::engine::diagnosis::Reason::DynamicResources(m) if &**m == NOT_AVAILABLE));
    if profile.dynamic_resources && filter_found_unavailable {
        diag.deallocate = plan
            .devices
            .as_ref()
            .and_then(|d| d.post_filter(pod, snapshot.nodes().iter().map(|n| &*n.spec)));
    }
    if !profile.policy().default_preemption {
        // A profile without DefaultPreemption at postFilter: DynamicResources' PostFilter alone
        // (`RunPostFilterPlugins`: its reasons, none unless it deallocated a claim).
        if diag.deallocate.is_some() {
            diag.post_filter = DEALLOCATED.to_string();
        }
        return;
    }
    default_preemption(profile, snapshot, plan, pod, usage, diag, potential);
    if diag.deallocate.is_some() && diag.nomination.is_none() {
        diag.post_filter = format!("{DEALLOCATED}, {}", diag.post_filter);
    }
}

/// DefaultPreemption's PostFilter (`defaultpreemption/default_preemption.go`).
fn default_preemption(
    profile: &Profile,
    snapshot: &Snapshot,
    plan: &PodPlan<'_>,
    pod: &PodSpec,
    usage: &BatchUsage<'_>,
    diag: &mut Diagnosis,
    potential: Vec<usize>,
) {
    if pod.preemption_policy == PreemptionPolicy::Never {
        diag.post_filter = "preemption: not eligible due to preemptionPolicy=Never.".to_string();
        return;
    }
    let nodes = snapshot.nodes();
    let pdbs: Vec<&Pdb> = snapshot.pdbs().map(|p| &**p).collect();
    let mut candidates = Vec::new();
    // Statuses of the nodes the dry run tried; every other node is "not helpful".
    let mut statuses: Vec<(String, u32)> = Vec::new();
    let mut tried = 0u32;
    let mut count = |reason: String| match statuses.iter_mut().find(|(r, _)| *r == reason) {
        Some((_, n)) => *n += 1,
        None => statuses.push((reason, 1)),
    };
    let (offset, wanted) = dry_run_window(potential.len(), plan.tie_seed());
    let mut without_violations = 0usize;
    for k in 0..potential.len() {
        // Each dry run filters a node again, at the cost of the pod's terms: the call's end is
        // polled between them.
        if crate::engine::cancel::requested() {
            break;
        }
        let i = potential[(offset + k) % potential.len()];
        tried += 1;
        match select_victims(profile, snapshot, plan, pod.priority, usage, i, &pdbs) {
            Ok(c) => {
                without_violations += usize::from(c.pdb_violations == 0);
                candidates.push(c);
                if without_violations > 0 && candidates.len() >= wanted {
                    break;
                }
            }
            Err(reasons) => reasons.into_iter().for_each(&mut count),
        }
    }
    // The last tie-break is the node name: candidates in node order.
    candidates.sort_by_key(|c| c.node);
    let Some(best) = pick_one(candidates) else {
        let not_helpful = nodes.len() as u32 - tried;
        if not_helpful > 0 {
            count(NOT_HELPFUL.to_string());
        }
        let mut parts: Vec<String> = statuses
            .into_iter()
            .map(|(r, n)| {
                let n = if r == NOT_HELPFUL { not_helpful } else { n };
                format!("{n} {r}")
            })
            .collect();
        parts.sort();
        diag.post_filter = format!(
            "preemption: 0/{} nodes are available: {}.",
            nodes.len(),
            parts.join(", ")
        );
        return;
    };
    let node = nodes[best.node].spec.name.clone();
    // preemption.go's `Preempt`: Success with this message, which DefaultPreemption's PostFilter
    // prefixes and kube-scheduler 1.37 appends to the pod's FitError.
    diag.post_filter = format!(
        "preemption: found a potential placement for pod on node {node}, preempting {} victims",
        best.victims.len()
    );
    diag.nomination = Some(Nomination {
        node,
        victims: best.victims.iter().map(|v| uid(v)).collect(),
    });
}

/// DefaultPreemptionArgs' defaults: the dry run looks for at least this share of the potential
/// nodes (percent) ...
const MIN_CANDIDATE_NODES_PERCENTAGE: usize = 10;
/// ... and at least this many.
const MIN_CANDIDATE_NODES_ABSOLUTE: usize = 100;

/// Where the dry run over `potential` nodes starts and how many candidates it looks for
/// (kube-scheduler's `GetOffsetAndNumCandidates`, the offset drawn from `seed` instead of at random).
pub(in crate::engine) fn dry_run_window(potential: usize, seed: u64) -> (usize, usize) {
    if potential == 0 {
        return (0, 0);
    }
    let wanted = (potential * MIN_CANDIDATE_NODES_PERCENTAGE / 100)
        .max(MIN_CANDIDATE_NODES_ABSOLUTE)
        .min(potential);
    ((seed % potential as u64) as usize, wanted)
}

/// kube-scheduler's `SelectVictimsOnNode`: the fewest, least important lower-priority pods whose
/// eviction lets the pod fit on node `i`, or the reasons the node is no candidate.
#[allow(clippy::too_many_arguments)]
fn select_victims(
    profile: &Profile,
    snapshot: &Snapshot,
    plan: &PodPlan<'_>,
    preemptor_priority: i32,
    usage: &BatchUsage<'_>,
    i: usize,
    pdbs: &[&Pdb],
) -> Result<Candidate, Vec<String>> {
    let entry = &snapshot.nodes()[i];
    // The node's pods are sorted by priority, lowest first.
    let mut potential: Vec<Arc<BoundPod>> = entry
        .usage
        .pods
        .iter()
        .take_while(|p| priority(p) < preemptor_priority)
        .cloned()
        .collect();
    if potential.is_empty() {
        return Err(vec![NO_VICTIMS.to_string()]);
    }
    let mut node_usage = usage.get(i).clone();
    // The topology filters' state follows the pods removed and reprieved (RemovePod / AddPod).
    let mut topo = plan.topo.as_deref().map(TopoState::filters);
    for p in &potential {
        node_usage.remove(p);
        if let Some(t) = topo.as_mut() {
            t.update_filters(snapshot, plan.pod, p, i, -1);
        }
    }
    let mut reasons = Vec::new();
    if !filter_node(profile, plan, topo.as_ref(), i, entry, &node_usage, &mut |_, r| {
        reasons.push(r.to_string())
    }) {
        return Err(reasons);
    }
    potential.sort_by(|a, b| importance(a, b));
    let (violating, non_violating) = split_by_pdb_violation(&potential, pdbs);
    let mut victims = Vec::new();
    let mut pdb_violations = 0;
    let mut reprieve = |p: &Arc<BoundPod>, node_usage: &mut crate::engine::snapshot::NodeUsage| {
        node_usage.add(p);
        if let Some(t) = topo.as_mut() {
            t.update_filters(snapshot, plan.pod, p, i, 1);
        }
        if filter_node(profile, plan, topo.as_ref(), i, entry, node_usage, &mut |_, _| {}) {
            true
        } else {
            node_usage.remove(p);
            if let Some(t) = topo.as_mut() {
                t.update_filters(snapshot, plan.pod, p, i, -1);
            }
            victims.push(Arc::clone(p));
            false
        }
    };
    for p in &violating {
        if !reprieve(p, &mut node_usage) {
            pdb_violations += 1;
        }
    }
    for p in &non_violating {
        reprieve(p, &mut node_usage);
    }
    if !violating.is_empty() && !non_violating.is_empty() {
        victims.sort_by(|a, b| importance(a, b));
    }
    if victims.is_empty() {
        // The pod fits with every pod reprieved: not a preemption (kube-scheduler reports an error).
        return Err(vec![NO_VICTIMS.to_string()]);
    }
    Ok(Candidate {
        node: i,
        victims,
        pdb_violations,
    })
}

/// kube-scheduler's `filterPodsWithPDBViolation`: splits the pods (keeping their order) into those
/// whose eviction would exceed some PDB's disruptionsAllowed, counting the pods before them, and
/// the others; a pod in a budget's disruptedPods uses none of it.
fn split_by_pdb_violation(pods: &[Arc<BoundPod>], pdbs: &[&Pdb]) -> (Vec<Arc<BoundPod>>, Vec<Arc<BoundPod>>) {
    let mut allowed: Vec<i32> = pdbs.iter().map(|p| p.disruptions_allowed).collect();
    let (mut violating, mut non_violating) = (Vec::new(), Vec::new());
    for p in pods {
        let mut violated = false;
        if let Some(meta) = &p.meta {
            for (j, pdb) in pdbs.iter().enumerate() {
                // A pod in the budget's disruptedPods was processed by the API server already: it
                // is not counted again and its eviction is no violation.
                if pdb.covers(&p.namespace, &p.labels) && !pdb.already_disrupted(&meta.uid) {
                    allowed[j] -= 1;
                    if allowed[j] < 0 {
                        violated = true;
                    }
                }
            }
        }
        if violated {
            violating.push(Arc::clone(p));
        } else {
            non_violating.push(Arc::clone(p));
        }
    }
    (violating, non_violating)
}

/// kube-scheduler's `pickOneNodeForPreemption`: each rule in turn keeps the best-scoring
/// candidates; the first left (lowest node name) wins.
fn pick_one(mut candidates: Vec<Candidate>) -> Option<Candidate> {
    type Score = fn(&Candidate) -> i64;
    let rules: [Score; 5] = [
        // Fewest PDB violations.
        |c| -(c.pdb_violations as i64),
        // The lowest highest-priority victim.
        |c| -i64::from(priority(&c.victims[0])),
        // The smallest sum of priorities (each shifted to be non-negative).
        |c| {
            -c.victims
                .iter()
                .map(|v| i64::from(priority(v)) + i64::from(i32::MAX) + 1)
                .sum::<i64>()
        },
        // The fewest victims.
        |c| -(c.victims.len() as i64),
        // The latest start time of the highest-priority victims (`GetEarliestPodStartTime`).
        |c| {
            let top = c.victims.iter().map(|v| priority(v)).max().unwrap_or(0);
            c.victims
                .iter()
                .filter(|v| priority(v) == top)
                .map(|v| start_time(v))
                .min()
                .unwrap_or(i64::MIN)
        },
    ];
    for rule in rules {
        if candidates.len() <= 1 {
            break;
        }
        let best = candidates.iter().map(rule).max()?;
        candidates.retain(|c| rule(c) == best);
    }
    candidates.into_iter().next()
}

#[cfg(test)]
mod tests;
