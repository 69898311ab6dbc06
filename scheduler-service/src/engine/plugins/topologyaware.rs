//! kube-scheduler's TopologyPlacementGenerator (`TopologyPlacement`,
//! `framework/plugins/topologyaware/topology_placement.go`): a PodGroup's placements, one per
//! domain of its topology key (only the domain of its bound pods once one is bound), or every
//! node for a group without a key. The PodGroup cycle ([`crate::engine::podgroup`]) tries them.

use crate::engine::model::{PodGroup, PodSpec};
use crate::engine::plugins::noderesources::placement_score::{fit_score, fit_scoring, scoring_request};
use crate::engine::profile::Profile;
use crate::engine::snapshot::{Snapshot, Topology};

/// One placement of a group: a domain (or every node) and what it offers.
pub(in crate::engine) struct Placement {
    /// The domain's value; `None` for the placement of every node.
    pub(in crate::engine) domain: Option<u32>,
    /// Positions of its nodes in the snapshot.
    pub(in crate::engine) nodes: Vec<usize>,
    /// Its score were every member placed there: the walk's bound.
    pub(in crate::engine) bound: i64,
    /// Its free capacity cannot hold minCount's smallest members.
    pub(in crate::engine) hopeless: bool,
}

/// The group's placements (kube's TopologyPlacement), best bound first.
pub(in crate::engine) fn placements(
    profile: &Profile,
    snapshot: &Snapshot,
    group: &PodGroup,
    topology: Option<&Topology>,
    members: &[PodSpec],
    within: Option<&[usize]>,
) -> Result<Vec<Placement>, String> {
    let fit = fit_scoring(profile);
    let requests: Vec<i64> = fit.map_or_else(Vec::new, |(_, resources)| {
        resources
            .iter()
            .map(|(name, _)| members.iter().map(|p| scoring_request(p, name)).sum())
            .collect()
    });
    let key = group.group_key();
    let Some(topology) = topology.filter(|_| group.topology_key.is_some()) else {
        let nodes: Vec<usize> = within.map_or_else(|| (0..snapshot.nodes().len()).collect(), <[usize]>::to_vec);
        return Ok(vec![Placement {
            domain: None,
            nodes,
            bound: 0,
            hopeless: false,
        }]);
    };
    // Once a member is bound, the group's domain is its.
    let mut required: Option<u32> = None;
    for node in &snapshot.pod_group_nodes(&key) {
        let Some(i) = snapshot.position_of(node) else {
            return Err(format!(
                "cannot determine domain for already scheduled pods: getting node for pod of pod group {key}: node {node:?} not found"
            ));
        };
        let d = topology.node_domain[i];
        if d == Topology::NONE {
            return Err(format!(
                "cannot determine domain for already scheduled pods: no topology domain found for pod of pod group {key} on node {node:?}"
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
    let inside: Option<Vec<bool>> = within.map(|w| {
        let mut mask = vec![false; snapshot.nodes().len()];
        for &i in w {
            if let Some(m) = mask.get_mut(i) {
                *m = true;
            }
        }
        mask
    });
    let mut by_domain: Vec<Vec<usize>> = vec![Vec::new(); topology.values.len()];
    for (i, &d) in topology.node_domain.iter().enumerate().take(snapshot.nodes().len()) {
        if d != Topology::NONE
            && required.is_none_or(|r| r == d)
            && inside.as_ref().is_none_or(|m| m.get(i).copied().unwrap_or(false))
        {
            by_domain[d as usize].push(i);
        }
    }
    // The least a placement must hold: minCount's smallest members, less those bound.
    let need = (group.min_count() as usize).saturating_sub(snapshot.pod_group_bound(&key));
    let smallest = |f: &dyn Fn(&PodSpec) -> i64| -> i64 {
        let mut v: Vec<i64> = members.iter().map(f).collect();
        v.sort_unstable();
        v.iter().take(need).sum()
    };
    let need_cpu = smallest(&|p| p.requests.milli_cpu);
    let need_memory = smallest(&|p| p.requests.memory);
    let nodes = snapshot.nodes();
    let fit_weight = fit.map_or(0, |(w, _)| w);
    let mut out: Vec<Placement> = by_domain
        .into_iter()
        .enumerate()
        .filter(|(_, n)| !n.is_empty())
        .map(|(d, domain_nodes)| {
            let (mut free_cpu, mut free_memory) = (0i64, 0i64);
            for &i in &domain_nodes {
                let n = &nodes[i];
                free_cpu += (n.spec.allocatable.milli_cpu - n.usage.requested.milli_cpu).max(0);
                free_memory += (n.spec.allocatable.memory - n.usage.requested.memory).max(0);
            }
            let bound = 100
                + fit.map_or(0, |(_, resources)| {
                    fit_weight * fit_score(snapshot, &domain_nodes, resources, &requests)
                });
            Placement {
                domain: Some(d as u32),
                hopeless: free_cpu < need_cpu || free_memory < need_memory,
                nodes: domain_nodes,
                bound,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.bound.cmp(&a.bound).then_with(|| {
            let name = |p: &Placement| p.domain.map(|d| topology.values[d as usize].as_str());
            name(a).cmp(&name(b))
        })
    });
    Ok(out)
}
