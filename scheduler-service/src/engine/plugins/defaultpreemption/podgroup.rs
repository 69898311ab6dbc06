//! Preemption for a whole PodGroup: kube-scheduler 1.37's DefaultPreemption `PodGroupPostFilter`
//! (`pkg/scheduler/framework/preemption/podgrouppreemption.go`, workload-aware preemption of
//! KEP-5710), run when a group's cycle found no placement.
//!
//! ```text
//!  preemptionPolicy Never ──────────────────────────────▶ "not eligible due to preemptionPolicy=Never."
//!  victims: every bound pod of lower priority (a pod of a PodGroup has its group's priority);
//!           the bound pods of a PodGroup with disruptionMode All are one victim, evicted together
//!  none ────────────────────────────────────────────────▶ "No preemption victims found for incoming preemptor"
//!  the group's cycle on the cluster without any of them
//!  no placement ────────────────────────────────────────▶ that cycle's message
//!  reprieve, most important first (PDB-violating victims before the others): put the victim
//!  back; kept when every member still passes Filter on the node the cycle gave it (each member
//!  with the members before it on their nodes), else evicted
//!  ────────────────────────────────────────────────────▶ members nominated to their nodes,
//!                                                         "found a placement for podgroup, preempting N victims"
//! ```
//!
//! kube-scheduler's domain is the whole cluster: the group's cycle after removing the victims picks
//! the placement (one rack, say), and only victims whose room a member needs there are evicted.
//! A victim is never evicted in part. Victim order (`MoreImportantVictim`): higher priority, then a
//! PodGroup's pods before a plain pod, then more pods, then the earliest start; the uid last, where
//! kube's sort leaves the order open.
//!
//! Not done: the check kube makes first for a group whose members are already nominated with
//! lower-priority pods terminating there ("ongoing preemption on nominated nodes"); the binder
//! does not decide such members again until their victims are gone or their wait ends.

use std::collections::HashMap;
use std::sync::Arc;

use crate::engine::framework::{filter_node, EvalError};
use crate::engine::model::{PodGroup, PodSpec, PreemptionPolicy};
use crate::engine::pdb::Pdb;
use crate::engine::plan::{PodPlan, TopoState};
use crate::engine::profile::Profile;
use crate::engine::snapshot::{BoundPod, Delta, NodeUsage, Snapshot};
use crate::engine::topology::Placed;

/// kube's status when no pod of lower priority exists.
pub const NO_VICTIMS: &str = "No preemption victims found for incoming preemptor";
/// kube's status for a group whose preemptionPolicy is Never.
pub const NOT_ELIGIBLE: &str = "not eligible due to preemptionPolicy=Never.";

/// What the PostFilter decided for a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupPreemption {
    /// Room is made: the members nominated (per member in batch order, its node; `None` for a
    /// member the cycle on the freed cluster did not place) and the pods to evict, by uid, most
    /// important first.
    Preempt {
        /// Per member, its nominated node.
        nominated: Vec<Option<String>>,
        /// The victims' uids.
        victims: Vec<Arc<str>>,
    },
    /// No room can be made; kube's status message (without the `pod group preemption: ` prefix).
    Fail(String),
}

impl GroupPreemption {
    /// The message DefaultPreemption's PodGroupPostFilter gives, as kube appends it to the group's.
    pub fn message(&self) -> String {
        match self {
            Self::Preempt { victims, .. } => format!(
                "pod group preemption: found a placement for podgroup, preempting {} victims",
                victims.len()
            ),
            Self::Fail(status) => format!("pod group preemption: {status}"),
        }
    }
}

/// The group's cycle on a snapshot, as the PostFilter runs it (kube's `PodGroupSchedulingFunc`):
/// per member its node, or the cycle's message when no placement holds the group.
pub type GroupCycle<'f> = dyn FnMut(&Snapshot) -> Result<Result<Vec<Option<String>>, String>, EvalError> + 'f;

/// One preemption unit: a pod, or every bound pod of a PodGroup with disruptionMode All.
struct Victim {
    pods: Vec<Arc<BoundPod>>,
    priority: i32,
    /// Its pods belong to a PodGroup (kube's `PodGroupKeyType`, ranked before a plain pod's).
    group: bool,
    /// The earliest start time of its pods (Unix seconds; `i64::MAX` when none is known).
    earliest: i64,
}

impl Victim {
    fn uid(&self) -> Arc<str> {
        self.pods
            .first()
            .and_then(|p| p.meta.as_ref())
            .map_or_else(|| Arc::from(""), |m| Arc::clone(&m.uid))
    }

    /// kube's `MoreImportantVictim` as an ordering, most important first.
    fn importance(&self, other: &Self) -> std::cmp::Ordering {
        other
            .priority
            .cmp(&self.priority)
            .then(other.group.cmp(&self.group))
            .then(other.pods.len().cmp(&self.pods.len()))
            .then(self.earliest.cmp(&other.earliest))
            .then_with(|| self.uid().cmp(&other.uid()))
    }
}

fn start_time(p: &BoundPod) -> i64 {
    match p.meta.as_ref().map_or(0, |m| m.start_time) {
        0 => i64::MAX,
        t => t,
    }
}

/// The bound pods of lower priority than `priority`, as preemption units (kube's
/// `getCrossNodesVictims` with `isPreemptionAllowed`), in node order.
fn potential_victims(snapshot: &Snapshot, priority: i32) -> Vec<Victim> {
    let mut out: Vec<Victim> = Vec::new();
    let mut whole_groups: HashMap<crate::engine::model::PodGroupKey, usize> = HashMap::new();
    for node in snapshot.nodes() {
        for p in &node.usage.pods {
            let Some(meta) = &p.meta else { continue };
            let group = meta
                .pod_group
                .as_ref()
                .and_then(|k| snapshot.pod_group(k).map(|g| (k, g)));
            let pod_priority = group.map_or(meta.priority, |(_, g)| g.priority);
            if pod_priority >= priority {
                continue;
            }
            match group {
                Some((key, g)) if g.disruption_all => {
                    if let Some(&i) = whole_groups.get(key) {
                        let v = &mut out[i];
                        v.earliest = v.earliest.min(start_time(p));
                        v.pods.push(Arc::clone(p));
                        continue;
                    }
                    whole_groups.insert(key.clone(), out.len());
                }
                _ => {}
            }
            out.push(Victim {
                pods: vec![Arc::clone(p)],
                priority: pod_priority,
                group: meta.pod_group.is_some(),
                earliest: start_time(p),
            });
        }
    }
    out
}

/// kube's `FilterVictimsWithPDBViolation` for units: a unit any of whose pods would exceed a
/// budget is violating (with how many of its pods do), keeping the order.
fn split_by_pdb_violation(victims: Vec<Victim>, pdbs: &[&Pdb]) -> (Vec<(Victim, usize)>, Vec<Victim>) {
    let mut allowed: Vec<i32> = pdbs.iter().map(|p| p.disruptions_allowed).collect();
    let (mut violating, mut other) = (Vec::new(), Vec::new());
    for v in victims {
        let mut count = 0;
        for p in &v.pods {
            let Some(meta) = &p.meta else { continue };
            let mut violated = false;
            for (j, pdb) in pdbs.iter().enumerate() {
                if pdb.covers(&p.namespace, &p.labels) && !pdb.already_disrupted(&meta.uid) {
                    allowed[j] -= 1;
                    if allowed[j] < 0 {
                        violated = true;
                        break;
                    }
                }
            }
            count += usize::from(violated);
        }
        if count > 0 {
            violating.push((v, count));
        } else {
            other.push(v);
        }
    }
    (violating, other)
}

/// kube's `resolvePreemptionPolicy` (`framework/preemption/types.go`): with the
/// `PodGroupPreemptionPolicy` gate, the group's own field; without it, `Never` when any member
/// says `Never`.
pub(crate) fn resolved_policy(profile: &Profile, group: &PodGroup, members: &[PodSpec]) -> PreemptionPolicy {
    if profile.gates().pod_group_preemption_policy {
        return group.preemption_policy;
    }
    if members.iter().any(|p| p.preemption_policy == PreemptionPolicy::Never) {
        PreemptionPolicy::Never
    } else {
        PreemptionPolicy::PreemptLowerPriority
    }
}

/// The first steps of DefaultPreemption's PodGroupPostFilter for a CompositePodGroup hierarchy
/// (its root's `priority` and `policy`, the `members` of all its PodGroups): kube's status when
/// the hierarchy may not preempt or no pod of lower priority exists; `None` when there are
/// potential victims.
pub(crate) fn hierarchy_without_victims(
    profile: &Profile,
    snapshot: &Snapshot,
    priority: i32,
    policy: PreemptionPolicy,
    members: &[PodSpec],
) -> Option<&'static str> {
    let never = if profile.gates().pod_group_preemption_policy {
        policy == PreemptionPolicy::Never
    } else {
        members.iter().any(|p| p.preemption_policy == PreemptionPolicy::Never)
    };
    if never {
        return Some(NOT_ELIGIBLE);
    }
    potential_victims(snapshot, priority).is_empty().then_some(NO_VICTIMS)
}

/// DefaultPreemption's PodGroupPostFilter for `group` (its `members` pending, in batch order) on
/// `snapshot`, the cluster its cycle found no placement on; `cycle` runs the group's cycle on
/// another snapshot.
pub fn preempt(
    profile: &Profile,
    snapshot: &Snapshot,
    group: &PodGroup,
    members: &[PodSpec],
    seed: u64,
    cycle: &mut GroupCycle<'_>,
) -> Result<GroupPreemption, EvalError> {
    if resolved_policy(profile, group, members) == PreemptionPolicy::Never {
        return Ok(GroupPreemption::Fail(NOT_ELIGIBLE.to_string()));
    }
    let mut victims = potential_victims(snapshot, group.priority);
    if victims.is_empty() {
        return Ok(GroupPreemption::Fail(NO_VICTIMS.to_string()));
    }
    // The cluster without every potential victim, and the group's cycle on it.
    let remove_pod_uids = victims
        .iter()
        .flat_map(|v| v.pods.iter())
        .filter_map(|p| p.meta.as_ref().map(|m| m.uid.to_string()))
        .collect();
    let freed = snapshot
        .apply(Delta {
            remove_pod_uids,
            ..Delta::default()
        })
        .map_err(|e| EvalError::Snapshot(e.to_string()))?;
    let nominated = match cycle(&freed)? {
        Ok(nodes) => nodes,
        Err(message) => return Ok(GroupPreemption::Fail(message)),
    };
    victims.sort_by(Victim::importance);
    let pdbs: Vec<&Pdb> = snapshot.pdbs().map(|p| &**p).collect();
    let (violating, non_violating) = split_by_pdb_violation(victims, &pdbs);
    let mut room = Reprieve::new(profile, &freed, members, &nominated, seed);
    let mut evicted: Vec<Victim> = Vec::new();
    for v in violating.into_iter().map(|(v, _)| v).chain(non_violating) {
        if !room.reprieve(&v) {
            evicted.push(v);
        }
    }
    evicted.sort_by(Victim::importance);
    let victims = evicted
        .iter()
        .flat_map(|v| v.pods.iter())
        .filter_map(|p| p.meta.as_ref().map(|m| Arc::clone(&m.uid)))
        .collect();
    Ok(GroupPreemption::Preempt { nominated, victims })
}

/// The freed cluster with the victims reprieved so far put back, and the members' plans on it.
struct Reprieve<'a> {
    profile: &'a Profile,
    freed: &'a Snapshot,
    /// The members the cycle placed, with their node's index in `freed`.
    assigned: Vec<(&'a PodSpec, usize)>,
    /// Per assigned member, its plan with the members before it on their nodes (the cycle state
    /// kube keeps from the cycle on the freed cluster).
    plans: Vec<PodPlan<'a>>,
    /// Per assigned member, its topology filters' state, following the victims put back.
    topo: Vec<Option<TopoState>>,
    /// Usage of the nodes victims were put back on.
    usage: HashMap<usize, NodeUsage>,
    /// Nodes some member is assigned to.
    member_nodes: std::collections::HashSet<usize>,
    /// No member has topology filters to keep: a victim elsewhere than a member's node, without
    /// affinity terms of its own, cannot change a member's Filter.
    local: bool,
}

impl<'a> Reprieve<'a> {
    fn new(
        profile: &'a Profile,
        freed: &'a Snapshot,
        members: &'a [PodSpec],
        nominated: &[Option<String>],
        seed: u64,
    ) -> Self {
        let assigned: Vec<(&PodSpec, usize)> = members
            .iter()
            .zip(nominated)
            .filter_map(|(m, n)| Some((m, freed.position_of(n.as_deref()?)?)))
            .collect();
        let mut placed = Placed::default();
        let mut plans = Vec::with_capacity(assigned.len());
        for &(m, i) in &assigned {
            plans.push(PodPlan::new(profile, freed, m, seed, &placed, true));
            placed.push(i, m);
        }
        let topo: Vec<Option<TopoState>> = plans
            .iter()
            .map(|p| p.topo.as_deref().map(TopoState::filters))
            .collect();
        let local = topo.iter().all(Option::is_none);
        Self {
            profile,
            freed,
            member_nodes: assigned.iter().map(|&(_, i)| i).collect(),
            assigned,
            plans,
            topo,
            usage: HashMap::new(),
            local,
        }
    }

    fn node_usage(&self, i: usize) -> &NodeUsage {
        self.usage.get(&i).unwrap_or(&self.freed.nodes()[i].usage)
    }

    /// Puts the victim back; keeps it (true) when every assigned member still passes Filter on
    /// its node, else takes it out again (false).
    fn reprieve(&mut self, v: &Victim) -> bool {
        let freed = self.freed;
        let nodes: Vec<Option<usize>> = v.pods.iter().map(|p| freed.position_of(&p.node_name)).collect();
        let untouched = self.local
            && v.pods.iter().all(|p| p.affinity.is_none())
            && nodes.iter().all(|i| i.is_none_or(|i| !self.member_nodes.contains(&i)));
        if untouched {
            return true;
        }
        self.put(v, &nodes, true);
        if self.members_fit() {
            return true;
        }
        self.put(v, &nodes, false);
        false
    }

    /// Adds (`back`) or removes the victim's pods on their nodes, with the topology filters'
    /// state (kube's PreFilterExtensions AddPod / RemovePod for every member).
    fn put(&mut self, v: &Victim, nodes: &[Option<usize>], back: bool) {
        for (p, &i) in v.pods.iter().zip(nodes) {
            let Some(i) = i else { continue };
            let usage = self
                .usage
                .entry(i)
                .or_insert_with(|| self.freed.nodes()[i].usage.clone());
            if back {
                usage.add(p);
            } else {
                usage.remove(p);
            }
            for (t, &(m, _)) in self.topo.iter_mut().zip(&self.assigned) {
                if let Some(t) = t {
                    t.update_filters(self.freed, m, p, i, if back { 1 } else { -1 });
                }
            }
        }
    }

    /// Every assigned member passes Filter on its node, each with the members before it there.
    fn members_fit(&self) -> bool {
        let mut with_members: HashMap<usize, NodeUsage> = HashMap::new();
        for (k, &(m, i)) in self.assigned.iter().enumerate() {
            let usage = with_members.get(&i).unwrap_or_else(|| self.node_usage(i));
            let entry = &self.freed.nodes()[i];
            if !filter_node(
                self.profile,
                &self.plans[k],
                self.topo[k].as_ref(),
                i,
                entry,
                usage,
                &mut |_, _| {},
            ) {
                return false;
            }
            let mut next = usage.clone();
            let bound = PodSpec {
                node_name: Some(entry.spec.name.clone()),
                ..m.clone()
            };
            if let Some(b) = BoundPod::from_spec(&bound) {
                next.add(&b);
            }
            with_members.insert(i, next);
        }
        true
    }
}

#[cfg(test)]
#[path = "podgroup_tests.rs"]
mod tests;
