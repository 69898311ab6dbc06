//! CompositePodGroups (`scheduling.k8s.io/v1alpha3`, kube 1.37's alpha `CompositePodGroup` gate
//! with `TopologyAwareWorkloadScheduling`): PodGroups over several topology levels (a block, its
//! racks, their hosts). A CompositePodGroup's children are PodGroups and CompositePodGroups naming it as their
//! parent (`spec.parentCompositePodGroupName`); the whole hierarchy is one entity in kube's queue
//! and is decided in one cycle, as kube-scheduler's `schedule_one_podgroup.go` does
//! (`podGroupSchedulingRecursiveAlgorithm`, `compositePodGroupSchedulingPlacementAlgorithm`,
//! `compositePodGroupSchedulingDefaultAlgorithm`, `completeCompositePodGroupAlgorithmResultMap`),
//! with the plugins of `framework/plugins/topologyaware/topology_placement.go` (placements of a
//! composite), `gangscheduling/gangscheduling.go` (`PlacementFeasible` with `minGroupCount`) and
//! `podgrouppodscount/podgroup_pods_count.go` (the pods of every PodGroup below):
//!
//! ```text
//!  composite C on the nodes of its parent's placement (every node at the root):
//!    placements: one per domain of C's topology key among those nodes (once a pod of the
//!                hierarchy below C is bound, only its domain), or those nodes without a key
//!    per placement: the children in order, each on the placement's nodes
//!        a PodGroup: its own PodGroup cycle (placements of its key inside, the best one); the
//!                    pods it placed are assumed for the next child
//!        a composite: this, recursively
//!      after each child PlacementFeasible: placed + remaining < minGroupCount ⇒ infeasible, stop
//!    best feasible placement: PodGroupPodsCount (pods of the hierarchy below C bound and
//!      placed, normalized) + NodeResourcesFit's placement score over its nodes with them
//!  the root placed nothing at all ⇒ unschedulable
//!  a failed composite's status goes down to its children that were placed (none is bound)
//! ```
//!
//! kube orders a composite's children and the placements of a level by Go map iteration (at
//! random) and breaks score ties at random; here children go by name and placements by domain
//! name, and the first best wins.
//!
//! kube's PodGroup PostFilter (DefaultPreemption) runs for a hierarchy that does not fit; its
//! status is appended to each result's status, once per result sharing it (a failed parent's
//! status object is shared with the children it went down to, so their condition carries it more
//! than once, as kube writes it). Here its first steps are kube's (`not eligible due to
//! preemptionPolicy=Never.`, `No preemption victims found for incoming preemptor`, and, with
//! lower-priority pods, the hierarchy's cycle on the cluster without them: its status when it still
//! does not fit); a hierarchy that would fit once they are gone evicts nothing here and its
//! messages carry no `pod group preemption:` part.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::group_cycle::{
    assumed_delta, complete, error_decisions, find_placement, fit_score, fit_scoring, group_diagnosis, nowhere_message,
    scoring_request, trial_status, validate, Ctx, CycleError, DomainViews, Found, GroupOutcome, GroupReason, Level,
};
use crate::engine::framework::{Decision, EvalError};
use crate::engine::model::{CompositePodGroup, PodGroup, PodGroupKey, PodSpec};
use crate::engine::plugins::podgrouppodscount;
use crate::engine::snapshot::{Snapshot, Topology};

/// `errPodGroupUnschedulable`.
const UNSCHEDULABLE: &str = "pod group is unschedulable";
/// `RunPlacementGeneratePlugins`' status when the plugin generated no placement.
const NO_PLACEMENTS: &str = "no feasible placements found";
/// The deepest hierarchy kube accepts (the `Invalid` condition's "maximum depth of 4").
const MAX_DEPTH: usize = 4;

/// The root CompositePodGroup key (`namespace/name`) of the PodGroup `key`'s hierarchy: `None`
/// when the group names no parent (or is not in the snapshot), `Err` with the message its pods
/// wait with when a CompositePodGroup on the way is missing or the parents form a cycle (kube's
/// GangScheduling PreEnqueue keeps them out of the queue then).
pub fn root_of(snapshot: &Snapshot, key: &PodGroupKey) -> Option<Result<Arc<str>, String>> {
    let group = snapshot.pod_group(key)?;
    let mut parent = Arc::clone(group.parent.as_ref()?);
    let namespace = &group.namespace;
    let mut seen: HashSet<Arc<str>> = HashSet::new();
    loop {
        let cpg_key = format!("{namespace}/{parent}");
        let Some(cpg) = snapshot.composite_pod_group(&cpg_key) else {
            return Some(Err(format!(
                "failed to build hierarchy snapshot: composite pod group object not found in state for {cpg_key}"
            )));
        };
        if !seen.insert(Arc::clone(&parent)) {
            return Some(Err(format!(
                "failed to build hierarchy snapshot: cycle detected in composite pod group hierarchy at {cpg_key}"
            )));
        }
        match &cpg.parent {
            None => return Some(Ok(Arc::from(cpg_key))),
            Some(p) => parent = Arc::clone(p),
        }
    }
}

/// A hierarchy as kube's queue builds it (`workload_forest.go`).
enum Node {
    /// A PodGroup: its key and its pending members (positions in the tree's batch).
    Leaf {
        key: Arc<str>,
        group: Arc<PodGroup>,
        members: Vec<usize>,
    },
    /// A CompositePodGroup and its children.
    Composite {
        cpg: Arc<CompositePodGroup>,
        children: Vec<Node>,
    },
}

impl Node {
    /// The key results are kept by (PodGroups and CompositePodGroups may share names).
    fn id(&self) -> String {
        match self {
            Node::Leaf { key, .. } => format!("pg:{key}"),
            Node::Composite { cpg, .. } => format!("cpg:{}", cpg.key()),
        }
    }

    /// Every PodGroup below (or this one).
    fn leaves<'n>(&'n self, out: &mut Vec<&'n Node>) {
        match self {
            Node::Leaf { .. } => out.push(self),
            Node::Composite { children, .. } => children.iter().for_each(|c| c.leaves(out)),
        }
    }
}

/// Builds the hierarchy under the CompositePodGroup `key`; `Err` when it is deeper than kube
/// accepts.
fn build(
    snapshot: &Snapshot,
    cpg: &Arc<CompositePodGroup>,
    members: &HashMap<Arc<str>, Vec<usize>>,
    depth: usize,
) -> Result<Node, String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "invalid composite pod group hierarchy: deeper than the maximum depth of {MAX_DEPTH} at {}",
            cpg.key()
        ));
    }
    let mut children: Vec<(Arc<str>, Node)> = Vec::new();
    for g in snapshot.pod_groups() {
        if g.namespace == cpg.namespace && g.parent.as_deref() == Some(&*cpg.name) {
            let key: Arc<str> = Arc::from(g.key());
            children.push((
                Arc::clone(&g.name),
                Node::Leaf {
                    members: members.get(&key).cloned().unwrap_or_default(),
                    key,
                    group: Arc::clone(g),
                },
            ));
        }
    }
    for c in snapshot.composite_pod_groups() {
        if c.namespace == cpg.namespace && c.parent.as_deref() == Some(&*cpg.name) {
            children.push((Arc::clone(&c.name), build(snapshot, c, members, depth + 1)?));
        }
    }
    children.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Node::Composite {
        cpg: Arc::clone(cpg),
        children: children.into_iter().map(|(_, n)| n).collect(),
    })
}

/// A status of kube's framework as the cycle reads it.
#[derive(Debug, Clone)]
enum Status {
    Success,
    /// Unschedulable: its `Message()` and its `AsError()` text.
    Unschedulable {
        message: String,
        as_error: String,
    },
    /// An error (SchedulerError).
    Error(String),
}

impl Status {
    fn ok(&self) -> bool {
        matches!(self, Status::Success)
    }
}

/// The result of one node of the hierarchy (kube's `podGroupAlgorithmResult`).
#[derive(Debug, Clone)]
struct NodeResult {
    status: Status,
    /// A PodGroup's members' decisions, as far as its cycle got.
    made: Vec<Decision>,
    /// A PodGroup's domain, a composite's (with its key), when placed.
    domain: Option<String>,
    /// Some pod below was placed.
    any_placed: bool,
}

/// The results of a subtree's evaluation, by [`Node::id`].
type Results = HashMap<String, NodeResult>;

/// The cycle of the hierarchy rooted at the CompositePodGroup `root` (`namespace/name`) for
/// `members` (the pending pods of all its PodGroups, in queue order): one decision per member and
/// one outcome per PodGroup of the hierarchy that has members in the batch or was evaluated.
pub(super) fn tree_cycle(
    ctx: &Ctx<'_>,
    snapshot: &Snapshot,
    root: &Arc<str>,
    members: &[PodSpec],
) -> Result<(Vec<Decision>, Vec<GroupOutcome>), EvalError> {
    let waiting = |message: &str| -> Vec<Decision> {
        members
            .iter()
            .map(|p| {
                let key = p.pod_group.as_ref().map(PodGroupKey::as_arc);
                Decision::Unschedulable(group_diagnosis(key.unwrap_or(&Arc::from("")), message))
            })
            .collect()
    };
    let Some(cpg) = snapshot.composite_pod_group(root).map(Arc::clone) else {
        let message =
            format!("failed to build hierarchy snapshot: composite pod group object not found in state for {root}");
        return Ok((waiting(&message), Vec::new()));
    };
    let mut by_leaf: HashMap<Arc<str>, Vec<usize>> = HashMap::new();
    for (i, p) in members.iter().enumerate() {
        if let Some(k) = &p.pod_group {
            by_leaf.entry(Arc::clone(k.as_arc())).or_default().push(i);
        }
    }
    let tree = match build(snapshot, &cpg, &by_leaf, 1) {
        Ok(t) => t,
        Err(message) => return Ok((error_decisions(members.len(), &message), Vec::new())),
    };
    let mut leaves = Vec::new();
    tree.leaves(&mut leaves);
    // kube's validatePodGroup: every member has the root's priority and one preemption policy.
    if let Err(message) = validate(ctx.profile, cpg.priority, cpg.preemption_policy, members) {
        let outcomes = leaves
            .iter()
            .filter_map(|l| outcome(l, GroupReason::SchedulerError, message.clone(), None, Vec::new()))
            .collect();
        return Ok((error_decisions(members.len(), &message), outcomes));
    }
    let mut results = Results::new();
    let root_result = eval(ctx, snapshot, None, &tree, members, &mut results)?;
    let mut root_status = root_result.status.clone();
    if root_status.ok() && !root_result.any_placed {
        // The framework requires at least one pod placed for a success.
        root_status = Status::Unschedulable {
            message: UNSCHEDULABLE.to_string(),
            as_error: UNSCHEDULABLE.to_string(),
        };
    }
    results.insert(
        tree.id(),
        NodeResult {
            status: root_status,
            ..root_result
        },
    );
    // completeCompositePodGroupAlgorithmResultMap: a failed parent's status goes down to the
    // children that succeeded and to those never evaluated.
    let mut finals: HashMap<String, NodeResult> = HashMap::new();
    let mut owners: HashMap<String, String> = HashMap::new();
    settle(&tree, &results, None, &mut finals, &mut owners);
    // The PostFilter for a hierarchy that does not fit (see the module documentation).
    let postfilter = match &finals.get(&tree.id()).map(|r| &r.status) {
        Some(Status::Unschedulable { .. }) => {
            match crate::engine::plugins::defaultpreemption::podgroup::hierarchy_without_victims(
                ctx.profile,
                snapshot,
                cpg.priority,
                cpg.preemption_policy,
                members,
            ) {
                Some(status) => Some(status.to_string()),
                None => {
                    let freed = snapshot
                        .apply(crate::engine::snapshot::Delta {
                            remove_pod_uids: lower_priority_uids(snapshot, cpg.priority),
                            ..crate::engine::snapshot::Delta::default()
                        })
                        .map_err(|e| EvalError::Snapshot(e.to_string()))?;
                    freed_root_message(ctx, &freed, root, members)?
                }
            }
        }
        _ => None,
    };
    // Each status object is appended to once per result sharing it.
    let mut sharing: HashMap<&str, usize> = HashMap::new();
    for owner in owners.values() {
        *sharing.entry(owner.as_str()).or_default() += 1;
    }
    let suffix = |leaf: &Node| -> String {
        let Some(status) = &postfilter else {
            return String::new();
        };
        let n = owners
            .get(&leaf.id())
            .and_then(|o| sharing.get(o.as_str()))
            .copied()
            .unwrap_or(1);
        format!(", pod group preemption: {status}").repeat(n)
    };
    let mut decisions: Vec<Option<Decision>> = (0..members.len()).map(|_| None).collect();
    let mut outcomes = Vec::new();
    for leaf in &leaves {
        let Node::Leaf { key, members: idx, .. } = leaf else {
            continue;
        };
        let Some(r) = finals.get(&leaf.id()) else {
            continue;
        };
        let levels = if r.status.ok() {
            levels_to(&tree, key, &finals)
        } else {
            Vec::new()
        };
        let (reason, message, made) = match &r.status {
            Status::Success => (
                GroupReason::Scheduled,
                String::new(),
                complete(r.made.clone(), idx.len(), UNSCHEDULABLE, key),
            ),
            Status::Unschedulable {
                message: cycle_message, ..
            } => {
                // The condition (and the placed members) carry the PostFilter's status; the
                // members the cycle did not reach were given the status before it.
                let message = &format!("{cycle_message}{}", suffix(leaf));
                // Members the cycle placed: the group's message under errPodGroupUnschedulable;
                // members that failed on their own: their FitError; the rest: the group's.
                let mut made: Vec<Decision> = r
                    .made
                    .iter()
                    .cloned()
                    .map(|d| match d {
                        Decision::Node { .. } => {
                            Decision::Unschedulable(group_diagnosis(key, &format!("{UNSCHEDULABLE}, {message}")))
                        }
                        Decision::Unschedulable(mut diag) => {
                            diag.gang = Some(crate::engine::framework::GangFailure {
                                gang: Arc::clone(key),
                                message: message.clone(),
                                own: true,
                            });
                            Decision::Unschedulable(diag)
                        }
                    })
                    .collect();
                made.extend(
                    (made.len()..idx.len()).map(|_| Decision::Unschedulable(group_diagnosis(key, cycle_message))),
                );
                (GroupReason::Unschedulable, message.clone(), made)
            }
            Status::Error(message) => (
                GroupReason::SchedulerError,
                message.clone(),
                error_decisions(idx.len(), message),
            ),
        };
        for (&i, d) in idx.iter().zip(made) {
            decisions[i] = Some(d);
        }
        let domain = if r.status.ok() { r.domain.clone() } else { None };
        outcomes.extend(outcome(leaf, reason, message, domain, levels));
    }
    let decisions = decisions
        .into_iter()
        .zip(members)
        .map(|(d, p)| {
            d.unwrap_or_else(|| {
                let key = p.pod_group.as_ref().map(PodGroupKey::as_arc);
                Decision::Unschedulable(group_diagnosis(key.unwrap_or(&Arc::from("")), UNSCHEDULABLE))
            })
        })
        .collect();
    Ok((decisions, outcomes))
}

/// The outcome of a PodGroup of the hierarchy.
fn outcome(
    leaf: &Node,
    reason: GroupReason,
    message: String,
    domain: Option<String>,
    levels: Vec<Level>,
) -> Option<GroupOutcome> {
    let Node::Leaf { group, .. } = leaf else {
        return None;
    };
    Some(GroupOutcome {
        namespace: Arc::clone(&group.namespace),
        name: Arc::clone(&group.name),
        reason,
        message,
        domain,
        levels,
    })
}

/// The composites' domains from the root down to the PodGroup `key`'s parent.
fn levels_to(node: &Node, key: &Arc<str>, finals: &HashMap<String, NodeResult>) -> Vec<Level> {
    fn walk(node: &Node, key: &Arc<str>, finals: &HashMap<String, NodeResult>, path: &mut Vec<Level>) -> bool {
        match node {
            Node::Leaf { key: k, .. } => k == key,
            Node::Composite { cpg, children } => {
                path.push(Level {
                    composite: Arc::clone(&cpg.name),
                    topology_key: cpg.topology_key.clone(),
                    domain: finals.get(&node.id()).and_then(|r| r.domain.clone()),
                });
                if children.iter().any(|c| walk(c, key, finals, path)) {
                    return true;
                }
                path.pop();
                false
            }
        }
    }
    let mut path = Vec::new();
    walk(node, key, finals, &mut path);
    path
}

/// kube's `completeCompositePodGroupAlgorithmResultMap`: each node's final result, and whose
/// status object it holds (`owners`: the node's own, or the parent's it inherited).
fn settle(
    node: &Node,
    results: &Results,
    parent: Option<(&NodeResult, &str)>,
    out: &mut HashMap<String, NodeResult>,
    owners: &mut HashMap<String, String>,
) {
    let own = results.get(&node.id());
    let inherits = match (own, parent) {
        (Some(r), Some((p, _))) => !p.status.ok() && r.status.ok(),
        (None, Some(_)) => true,
        (_, None) => false,
    };
    let owner = match parent {
        Some((_, o)) if inherits => o.to_string(),
        _ => node.id(),
    };
    let parent = parent.map(|(p, _)| p);
    let result = match (own, parent) {
        (Some(r), Some(p)) if !p.status.ok() && r.status.ok() => NodeResult {
            status: p.status.clone(),
            made: Vec::new(),
            domain: None,
            any_placed: false,
        },
        (Some(r), _) => r.clone(),
        (None, p) => NodeResult {
            status: p.map_or(
                Status::Unschedulable {
                    message: UNSCHEDULABLE.to_string(),
                    as_error: UNSCHEDULABLE.to_string(),
                },
                |p| p.status.clone(),
            ),
            made: Vec::new(),
            domain: None,
            any_placed: false,
        },
    };
    if let Node::Composite { children, .. } = node {
        for c in children {
            settle(c, results, Some((&result, &owner)), out, owners);
        }
    }
    owners.insert(node.id(), owner);
    out.insert(node.id(), result);
}

/// The uids of the bound pods of lower priority than `priority` (a PodGroup's pod has its group's
/// priority): the PostFilter's potential victims.
fn lower_priority_uids(snapshot: &Snapshot, priority: i32) -> Vec<String> {
    let mut out = Vec::new();
    for node in snapshot.nodes() {
        for p in &node.usage.pods {
            let Some(meta) = &p.meta else { continue };
            let pod_priority = meta
                .pod_group
                .as_ref()
                .and_then(|k| snapshot.pod_group(k))
                .map_or(meta.priority, |g| g.priority);
            if pod_priority < priority {
                out.push(meta.uid.to_string());
            }
        }
    }
    out
}

/// The root's status message of the hierarchy's cycle on `freed` (kube's PodGroupSchedulingFunc
/// status, which the PostFilter returns when the hierarchy still does not fit).
fn freed_root_message(
    ctx: &Ctx<'_>,
    freed: &Snapshot,
    root: &Arc<str>,
    members: &[PodSpec],
) -> Result<Option<String>, EvalError> {
    let Some(cpg) = freed.composite_pod_group(root).map(Arc::clone) else {
        return Ok(None);
    };
    let mut by_leaf: HashMap<Arc<str>, Vec<usize>> = HashMap::new();
    for (i, p) in members.iter().enumerate() {
        if let Some(k) = &p.pod_group {
            by_leaf.entry(Arc::clone(k.as_arc())).or_default().push(i);
        }
    }
    let Ok(tree) = build(freed, &cpg, &by_leaf, 1) else {
        return Ok(None);
    };
    let mut results = Results::new();
    let r = eval(ctx, freed, None, &tree, members, &mut results)?;
    Ok(match r.status {
        Status::Unschedulable { message, .. } => Some(message),
        Status::Error(e) => Some(e),
        Status::Success if !r.any_placed => Some(UNSCHEDULABLE.to_string()),
        Status::Success => None,
    })
}

/// One node of the hierarchy on `snapshot`, inside the parent's placement `within` (kube's
/// `podGroupSchedulingRecursiveAlgorithm`); the results of the nodes below go into `results`.
fn eval(
    ctx: &Ctx<'_>,
    snapshot: &Snapshot,
    within: Option<&[usize]>,
    node: &Node,
    members: &[PodSpec],
    results: &mut Results,
) -> Result<NodeResult, EvalError> {
    match node {
        Node::Leaf {
            key,
            group,
            members: idx,
        } => {
            let batch: Vec<PodSpec> = idx.iter().map(|&i| members[i].clone()).collect();
            let all: Vec<usize>;
            let within = match within {
                Some(w) => w,
                None => {
                    all = (0..snapshot.nodes().len()).collect();
                    &all
                }
            };
            let mut views = DomainViews::default();
            let r = match find_placement(ctx, snapshot, &mut views, group, key, &batch, Some(within))? {
                Ok(Found::Placed { made, domain }) => NodeResult {
                    any_placed: made.iter().any(|d| matches!(d, Decision::Node { .. })),
                    status: Status::Success,
                    made,
                    domain,
                },
                Ok(Found::Nowhere {
                    placements,
                    first_failure,
                }) => {
                    let first = first_failure
                        .as_ref()
                        .map(|t| trial_status(t, true))
                        .unwrap_or_default();
                    let message = nowhere_message(placements, &first);
                    let as_error = if placements == 0 { NO_PLACEMENTS } else { UNSCHEDULABLE };
                    NodeResult {
                        status: Status::Unschedulable {
                            message,
                            as_error: as_error.to_string(),
                        },
                        made: first_failure.map(|t| t.made).unwrap_or_default(),
                        domain: None,
                        any_placed: false,
                    }
                }
                Err(CycleError::Group(message)) => NodeResult {
                    status: Status::Error(message),
                    made: Vec::new(),
                    domain: None,
                    any_placed: false,
                },
                Err(CycleError::Member { error, .. }) => NodeResult {
                    status: Status::Error(format!("failed to schedule other pod from a pod group: {error}")),
                    made: Vec::new(),
                    domain: None,
                    any_placed: false,
                },
            };
            results.insert(node.id(), r.clone());
            Ok(r)
        }
        Node::Composite { cpg, children } => {
            eval_composite(ctx, snapshot, within, node, cpg, children, members, results)
        }
    }
}

/// A composite's placement: a domain of its key (or the parent's nodes) and its nodes.
struct CompositePlacement {
    domain: Option<String>,
    nodes: Vec<usize>,
}

/// The placements of a composite (kube's TopologyPlacement for a CompositePodGroup), by domain
/// name; `Err` with a SchedulerError's message when the pods already bound below it are not in
/// one domain.
fn composite_placements(
    snapshot: &Snapshot,
    within: Option<&[usize]>,
    node: &Node,
    cpg: &CompositePodGroup,
) -> Result<Vec<CompositePlacement>, String> {
    let inside: Vec<usize> = within.map_or_else(|| (0..snapshot.nodes().len()).collect(), <[usize]>::to_vec);
    let Some(key) = &cpg.topology_key else {
        return Ok(vec![CompositePlacement {
            domain: None,
            nodes: inside,
        }]);
    };
    let topology = snapshot.topology(key);
    // Once a pod of the hierarchy below is bound, only its domain.
    let mut leaves = Vec::new();
    node.leaves(&mut leaves);
    let mut required: Option<u32> = None;
    for leaf in leaves {
        let Node::Leaf { key: group, .. } = leaf else {
            continue;
        };
        for n in snapshot.pod_group_nodes(&PodGroupKey::from_arc(group)) {
            let Some(i) = snapshot.position_of(&n) else {
                return Err(format!(
                    "cannot determine domain for already scheduled pods: getting node for pod of pod group {group}: node {n:?} not found"
                ));
            };
            let d = topology.node_domain[i];
            if d == Topology::NONE {
                return Err(format!(
                    "cannot determine domain for already scheduled pods: no topology domain found for pod of pod group {group} on node {n:?}"
                ));
            }
            if let Some(r) = required.filter(|&r| r != d) {
                return Err(format!(
                    "cannot determine domain for already scheduled pods: more than 1 domain found for pod group: {}, {}",
                    topology.values[r as usize], topology.values[d as usize]
                ));
            }
            required = Some(d);
        }
    }
    let mut by_domain: Vec<Vec<usize>> = vec![Vec::new(); topology.values.len()];
    for i in inside {
        let Some(&d) = topology.node_domain.get(i) else {
            continue;
        };
        if d != Topology::NONE && required.is_none_or(|r| r == d) {
            by_domain[d as usize].push(i);
        }
    }
    let mut out: Vec<CompositePlacement> = by_domain
        .into_iter()
        .enumerate()
        .filter(|(_, n)| !n.is_empty())
        .map(|(d, nodes)| CompositePlacement {
            domain: topology.values.get(d).cloned(),
            nodes,
        })
        .collect();
    out.sort_by(|a, b| a.domain.cmp(&b.domain));
    Ok(out)
}

/// kube's `compositePodGroupSchedulingPlacementAlgorithm`: every placement of the composite, its
/// children in each, the best feasible one.
#[allow(clippy::too_many_arguments)]
fn eval_composite(
    ctx: &Ctx<'_>,
    snapshot: &Snapshot,
    within: Option<&[usize]>,
    node: &Node,
    cpg: &CompositePodGroup,
    children: &[Node],
    members: &[PodSpec],
    results: &mut Results,
) -> Result<NodeResult, EvalError> {
    let error = |message: String| NodeResult {
        status: Status::Error(message),
        made: Vec::new(),
        domain: None,
        any_placed: false,
    };
    let placements = match composite_placements(snapshot, within, node, cpg) {
        Ok(p) => p,
        Err(message) => return Ok(error(message)),
    };
    if placements.is_empty() {
        return Ok(NodeResult {
            status: Status::Unschedulable {
                message: NO_PLACEMENTS.to_string(),
                as_error: NO_PLACEMENTS.to_string(),
            },
            made: Vec::new(),
            domain: None,
            any_placed: false,
        });
    }
    let mut leaves = Vec::new();
    node.leaves(&mut leaves);
    let leaf_keys: Vec<&Arc<str>> = leaves
        .iter()
        .filter_map(|l| match l {
            Node::Leaf { key, .. } => Some(key),
            Node::Composite { .. } => None,
        })
        .collect();
    let bound: usize = leaf_keys
        .iter()
        .map(|k| snapshot.pod_group_bound(&PodGroupKey::from_arc(k)))
        .sum();
    let min = cpg.min_group_count() as usize;
    // Per feasible placement: its results, the pods it placed (positions in `members`).
    let mut feasible: Vec<(usize, Results, Vec<usize>, bool)> = Vec::new();
    let mut first: Option<(NodeResult, Results)> = None;
    for (p, placement) in placements.iter().enumerate() {
        let mut sub = Results::new();
        // The snapshot with the children placed so far assumed.
        let mut owned: Option<Snapshot> = None;
        let (mut scheduled, mut remaining) = (0usize, children.len());
        let mut failure: Option<String> = None;
        let mut placed: Vec<usize> = Vec::new();
        let mut any_placed = false;
        if remaining + scheduled < min {
            failure = Some(format!(
                "minCount ({min}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"
            ));
        } else {
            for child in children {
                let local: &Snapshot = owned.as_ref().unwrap_or(snapshot);
                let r = eval(ctx, local, Some(&placement.nodes), child, members, &mut sub)?;
                if let Status::Error(e) = &r.status {
                    return Ok(error(format!(
                        "composite pod group evaluation failed due to child error: {e}"
                    )));
                }
                if r.status.ok() {
                    scheduled += 1;
                    any_placed |= r.any_placed;
                    // The child's best result is assumed for the next one.
                    let mut child_leaves = Vec::new();
                    child.leaves(&mut child_leaves);
                    let mut pods: Vec<&PodSpec> = Vec::new();
                    let mut made: Vec<Decision> = Vec::new();
                    for l in child_leaves {
                        let Node::Leaf { members: idx, .. } = l else {
                            continue;
                        };
                        let Some(lr) = sub.get(&l.id()).filter(|lr| lr.status.ok()) else {
                            continue;
                        };
                        for (&i, d) in idx.iter().zip(&lr.made) {
                            if matches!(d, Decision::Node { .. }) {
                                placed.push(i);
                                pods.push(&members[i]);
                                made.push(d.clone());
                            }
                        }
                    }
                    if let Some(delta) = assumed_delta(local, &pods, &made) {
                        let next = local.apply(delta).map_err(|e| EvalError::Snapshot(e.to_string()))?;
                        owned = Some(next);
                    }
                }
                remaining -= 1;
                if remaining + scheduled < min {
                    failure = Some(format!(
                        "minCount ({min}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"
                    ));
                    break;
                }
            }
        }
        let status = match failure {
            None => Status::Success,
            Some(m) => Status::Unschedulable {
                as_error: m.clone(),
                message: m,
            },
        };
        let result = NodeResult {
            status,
            made: Vec::new(),
            domain: placement.domain.clone(),
            any_placed,
        };
        sub.insert(node.id(), result.clone());
        if result.status.ok() {
            feasible.push((p, sub, placed, any_placed));
        } else if first.is_none() {
            first = Some((result, sub));
        }
    }
    if feasible.is_empty() {
        let Some((first_result, first_sub)) = first else {
            return Ok(error("no placement was evaluated".to_string()));
        };
        let first_error = match &first_result.status {
            Status::Unschedulable { as_error, .. } => as_error.clone(),
            Status::Error(e) => e.clone(),
            Status::Success => String::new(),
        };
        // The first placement's results stand for the subtree (kube copies them so its pods keep
        // their own statuses).
        results.extend(first_sub);
        let r = NodeResult {
            status: Status::Unschedulable {
                message: format!(
                    "{UNSCHEDULABLE}, 0/{} placements are available, first placement status: {first_error}",
                    placements.len()
                ),
                as_error: UNSCHEDULABLE.to_string(),
            },
            made: Vec::new(),
            domain: None,
            any_placed: false,
        };
        results.insert(node.id(), r.clone());
        return Ok(r);
    }
    // findBestPlacement: PodGroupPodsCount normalized by the most, plus NodeResourcesFit's
    // placement score; kube scores only when more than one placement is feasible.
    let best = if feasible.len() == 1 {
        0
    } else {
        let most = podgrouppodscount::most(feasible.iter().map(|f| bound + f.2.len()));
        let fit = fit_scoring(ctx.profile);
        let mut best: Option<(usize, i64)> = None;
        for (at, (p, _, placed, _)) in feasible.iter().enumerate() {
            let fit_part = fit.map_or(0, |(w, resources)| {
                let requests: Vec<i64> = resources
                    .iter()
                    .map(|(name, _)| placed.iter().map(|&i| scoring_request(&members[i], name)).sum())
                    .collect();
                w * fit_score(snapshot, &placements[*p].nodes, resources, &requests)
            });
            let total = fit_part + podgrouppodscount::normalized(bound + placed.len(), most);
            if best.is_none_or(|(_, b)| total > b) {
                best = Some((at, total));
            }
        }
        best.map_or(0, |(at, _)| at)
    };
    let (_, sub, _, _) = feasible.swap_remove(best);
    let r = sub.get(&node.id()).cloned().unwrap_or(NodeResult {
        status: Status::Success,
        made: Vec::new(),
        domain: None,
        any_placed: false,
    });
    results.extend(sub);
    Ok(r)
}

/// One level of a hierarchy in [`explain_levels`]: a CompositePodGroup on the way from the root to
/// a PodGroup, and how many of the pods below it fit each of its domains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelFit {
    /// The CompositePodGroup's name.
    pub composite: Arc<str>,
    /// Its topology key (`None`: one placement, the level above's nodes).
    pub topology_key: Option<Arc<str>>,
    /// Pending pods below it (of all its PodGroups).
    pub members: usize,
    /// Per domain (inside the domain taken, or looked into, one level up), how many of them fit,
    /// each tried in order taking its room (none stopped early): [`super::group_cycle::PlacementFit`]
    /// with `bound` the pods below already bound.
    pub domains: Vec<super::group_cycle::PlacementFit>,
    /// The domain the hierarchy took at this level; `None` when it was not placed (the one
    /// looked into further down is then the one most pods fit, the first by name on a tie).
    pub chosen: Option<String>,
}

/// The levels of [`explain_levels`] and the nodes of the domain looked into last.
pub(super) type Levels = (Vec<LevelFit>, Option<Vec<usize>>);

/// For the PodGroup `key` in a CompositePodGroup hierarchy (the gate on), each level from the
/// root down to its parent: the domains and how many of the pods below fit each ([`LevelFit`]),
/// following the domains `taken` (the outcome's levels; empty when the hierarchy was not placed).
/// Also the nodes of the domain finally looked into, within which the PodGroup's own placements
/// are explained. `None` when `key` is in no hierarchy.
pub(super) fn explain_levels(
    ctx: &Ctx<'_>,
    snapshot: &Snapshot,
    group_key: &PodGroupKey,
    members: &[PodSpec],
    taken: &[Level],
) -> Result<Option<Levels>, EvalError> {
    let key = group_key.as_str();
    let Some(Ok(root)) = root_of(snapshot, group_key) else {
        return Ok(None);
    };
    let Some(cpg) = snapshot.composite_pod_group(&root).map(Arc::clone) else {
        return Ok(None);
    };
    let mut by_leaf: HashMap<Arc<str>, Vec<usize>> = HashMap::new();
    for (i, p) in members.iter().enumerate() {
        if let Some(k) = &p.pod_group {
            by_leaf.entry(Arc::clone(k.as_arc())).or_default().push(i);
        }
    }
    let Ok(tree) = build(snapshot, &cpg, &by_leaf, 1) else {
        return Ok(None);
    };
    // The composites from the root to the PodGroup's parent.
    fn path<'n>(node: &'n Node, key: &str, out: &mut Vec<&'n Node>) -> bool {
        match node {
            Node::Leaf { key: k, .. } => &**k == key,
            Node::Composite { children, .. } => {
                out.push(node);
                if children.iter().any(|c| path(c, key, out)) {
                    return true;
                }
                out.pop();
                false
            }
        }
    }
    let mut on_path = Vec::new();
    if !path(&tree, key, &mut on_path) {
        return Ok(None);
    }
    let mut within: Option<Vec<usize>> = None;
    let mut levels = Vec::new();
    for (depth, node) in on_path.into_iter().enumerate() {
        let Node::Composite { cpg, .. } = node else {
            continue;
        };
        let mut leaves = Vec::new();
        node.leaves(&mut leaves);
        let mut below: Vec<usize> = Vec::new();
        let mut bound = 0usize;
        for l in leaves {
            if let Node::Leaf { key, members: idx, .. } = l {
                below.extend(idx.iter().copied());
                bound += snapshot.pod_group_bound(&PodGroupKey::from_arc(key));
            }
        }
        below.sort_unstable();
        let pods: Vec<PodSpec> = below.iter().map(|&i| members[i].clone()).collect();
        let placements = composite_placements(snapshot, within.as_deref(), node, cpg).unwrap_or_default();
        let mut domains = Vec::with_capacity(placements.len());
        for p in &placements {
            let view = snapshot.restrict(&p.nodes);
            let made = ctx
                .evaluator(&view)
                .schedule_group(&pods, ctx.seed, ctx.deadline, &mut |_| false)?;
            let fit = made.iter().filter(|d| matches!(d, Decision::Node { .. })).count();
            domains.push(super::group_cycle::PlacementFit {
                domain: p.domain.clone(),
                nodes: p.nodes.len(),
                fit,
                members: pods.len(),
                bound,
                feasible: fit > 0,
            });
        }
        let chosen = taken
            .get(depth)
            .filter(|l| l.composite == cpg.name)
            .and_then(|l| l.domain.clone());
        let into = match &chosen {
            Some(d) => placements.iter().position(|p| p.domain.as_ref() == Some(d)),
            None => domains
                .iter()
                .enumerate()
                .max_by(|(ia, a), (ib, b)| a.fit.cmp(&b.fit).then(ib.cmp(ia)))
                .map(|(i, _)| i),
        };
        within = into.and_then(|i| placements.get(i)).map(|p| p.nodes.clone());
        levels.push(LevelFit {
            composite: Arc::clone(&cpg.name),
            topology_key: cpg.topology_key.clone(),
            members: pods.len(),
            domains,
            chosen: if taken.is_empty() { None } else { chosen },
        });
    }
    Ok(Some((levels, within)))
}

#[cfg(test)]
#[path = "composite_tests.rs"]
mod tests;
