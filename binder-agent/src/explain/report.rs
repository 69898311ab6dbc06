//! The explanation as data: built from Rank answers (and, for what would make a pod fit, the
//! snapshot that was ranked) by pure functions, serialized as-is for `-o json` and rendered for a
//! terminal by [`super::render`].

use std::collections::{BTreeMap, HashMap};

use placement_scheduler::engine::model::PodSpec;
use placement_scheduler::engine::Snapshot;
use placement_scheduler::proto;
use serde::Serialize;

use super::blockers::{blockers, Blocker, Shortfall};
use crate::api::{scheduled_message, PodRef};

/// The whole explanation of one pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    /// The pod.
    pub pod: PodSummary,
    /// Remarks on how the pod was explained (bound pod, other scheduler, lists that failed, …).
    pub notes: Vec<String>,
    /// The cluster the pod was explained against.
    pub cluster: ClusterSize,
    /// For a pod naming a PodGroup: the group's cycle under the policy in use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_group: Option<GroupReport>,
    /// The answer under the policy in use (for a PodGroup's pod: the pod alone).
    pub current: Outcome,
    /// The answer under `--policy` / `--policy-file`, when asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub what_if: Option<Outcome>,
}

/// The pod, as explained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodSummary {
    /// metadata.namespace.
    pub namespace: String,
    /// metadata.name.
    pub name: String,
    /// metadata.uid.
    pub uid: String,
    /// spec.schedulerName.
    pub scheduler_name: String,
    /// status.phase.
    pub phase: String,
    /// spec.nodeName, when the pod is bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_to: Option<String>,
    /// The pod's effective requests (what the filters compare), as quantities.
    pub requests: BTreeMap<String, String>,
}

/// How big the explained cluster is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ClusterSize {
    /// Nodes.
    pub nodes: usize,
    /// Pods bound to them (the explained pod left out).
    pub bound_pods: usize,
}

/// The verdict under one policy, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// The policy applied.
    pub policy: String,
    /// Who decided: the in-process engine or a decision replica.
    pub decided_by: String,
    /// Whether some node fits.
    pub schedulable: bool,
    /// The best node, when some node fits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Its total score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<i64>,
    /// kube-scheduler's message: `Successfully assigned …` or `0/N nodes are available: …`.
    pub message: String,
    /// Nodes that pass every filter.
    pub feasible_count: u32,
    /// Nodes in the cluster.
    pub node_count: u32,
    /// When no node fits and preemption would make room: the node the pod would be nominated to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nominated_node: Option<String>,
    /// The pods preemption would evict there (`namespace/name`, or the uid when unknown).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub victims: Vec<String>,
    /// The best nodes, best first, with each plugin's part.
    pub best: Vec<ScoredNode>,
    /// The refused nodes, grouped by filter and reason, most common first.
    pub refused: Vec<RefusedGroup>,
    /// On the nodes DynamicResources refused because the pod's claims cannot be allocated
    /// there: the requests that fail, grouped by claim, request and why, most nodes first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceGroup>,
    /// For a pod that fits nowhere: what would make it fit, where that is cheap to tell.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<HintOut>,
    /// Why the hints may not be the whole story (filters they do not re-check).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hints_caveat: Option<String>,
    /// The node asked about with `--node` (or the node a bound pod is on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_detail: Option<NodeVerdict>,
}

/// A feasible node and its score, plugin by plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScoredNode {
    /// 1 for the best node.
    pub rank: usize,
    /// Node name.
    pub node: String,
    /// Sum of the weighted scores.
    pub total: i64,
    /// Each score plugin's part.
    pub plugins: Vec<PluginPart>,
}

/// One score plugin's part of a node's total.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginPart {
    /// Plugin name, as kube-scheduler names it.
    pub plugin: String,
    /// Normalized score, 0 to 100.
    pub score: i64,
    /// The plugin's weight in the policy.
    pub weight: i64,
    /// `score × weight`, this plugin's part of the total.
    pub weighted: i64,
}

/// Refused nodes that share a filter and a reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusedGroup {
    /// The filter that refused them (the first that did, in the policy's order).
    pub filter: String,
    /// The reason, in kube-scheduler's words.
    pub reason: String,
    /// How many nodes.
    pub count: usize,
    /// The first few of them, in name order.
    pub nodes: Vec<String>,
}

/// Why a request of the pod's claims cannot be met on a node (Rank's `device_failures`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceFailure {
    /// The claim's name.
    pub claim: String,
    /// The request (`request/subrequest` for a prioritized list's entry; a constraint's requests).
    pub request: String,
    /// `no_matching_device`, `devices_allocated`, `constraint_unmet`, `device_tainted` (or
    /// `unspecified`).
    pub kind: String,
    /// What was found on the node.
    pub message: String,
}

/// Refused nodes on which one request fails for one kind of reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceGroup {
    /// The claim's name.
    pub claim: String,
    /// The request.
    pub request: String,
    /// The kind, as [`DeviceFailure::kind`].
    pub kind: String,
    /// The kind in words.
    pub why: String,
    /// How many nodes.
    pub count: usize,
    /// The first few of them, in name order.
    pub nodes: Vec<String>,
    /// The first of them, in name order.
    pub example_node: String,
    /// What was found there.
    pub example: String,
}

/// The kind of a device failure: its JSON name and its words.
fn device_kind(kind: i32) -> (&'static str, &'static str) {
    match proto::DeviceFailureKind::try_from(kind).unwrap_or(proto::DeviceFailureKind::Unspecified) {
        proto::DeviceFailureKind::NoMatchingDevice => {
            ("no_matching_device", "too few devices match the class and selectors")
        }
        proto::DeviceFailureKind::DevicesAllocated => ("devices_allocated", "not enough free devices"),
        proto::DeviceFailureKind::ConstraintUnmet => ("constraint_unmet", "constraint unmet"),
        proto::DeviceFailureKind::DeviceTainted => ("device_tainted", "devices tainted"),
        proto::DeviceFailureKind::Unspecified => ("unspecified", "cannot be met"),
    }
}

fn device_failure(f: &proto::DeviceRequestFailure) -> DeviceFailure {
    DeviceFailure {
        claim: f.claim.clone(),
        request: f.request.clone(),
        kind: device_kind(f.kind).0.to_string(),
        message: f.message.clone(),
    }
}

/// The refused nodes' device failures grouped by (claim, request, kind), most nodes first, each
/// with the first node's message.
pub fn device_groups(infeasible: &[proto::InfeasibleNode], examples: usize) -> Vec<DeviceGroup> {
    // (claim, request, kind) → (node, message) of each node.
    type Groups<'a> = BTreeMap<(&'a str, &'a str, i32), Vec<(&'a str, &'a str)>>;
    let mut groups: Groups<'_> = BTreeMap::new();
    for n in infeasible {
        for f in &n.device_failures {
            groups
                .entry((&f.claim, &f.request, f.kind))
                .or_default()
                .push((&n.node, &f.message));
        }
    }
    let mut out: Vec<DeviceGroup> = groups
        .into_iter()
        .map(|((claim, request, kind), mut nodes)| {
            nodes.sort_unstable();
            let (kind, why) = device_kind(kind);
            DeviceGroup {
                claim: claim.to_string(),
                request: request.to_string(),
                kind: kind.to_string(),
                why: why.to_string(),
                count: nodes.len(),
                example_node: nodes.first().map(|(n, _)| n.to_string()).unwrap_or_default(),
                example: nodes.first().map(|(_, m)| m.to_string()).unwrap_or_default(),
                nodes: nodes.iter().take(examples).map(|(n, _)| n.to_string()).collect(),
            }
        })
        .collect();
    out.sort_by_key(|g| std::cmp::Reverse(g.count));
    out
}

/// One node's verdict for the pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeVerdict {
    /// Node name.
    pub node: String,
    /// Whether it passes every filter.
    pub feasible: bool,
    /// Its place among the feasible nodes (1 is the best).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
    /// Its scores, when feasible.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scores: Option<ScoredNode>,
    /// The node it is compared with: the best node, or the runner-up when it is the best.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compared_with: Option<ScoredNode>,
    /// The filter that refused it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// That filter's reasons, in kube-scheduler's words.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Everything the cheap filters find in the way on this node (see [`super::blockers`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blockers: Vec<Blocker>,
    /// When DynamicResources refused it: the requests of the pod's claims that fail there, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceFailure>,
}

/// What would make a pod fit somewhere.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Hint {
    /// Resources alone keep the pod off `count` nodes; `closest` is the nearest to fitting.
    Resources {
        /// The node that lacks the least (relative to its size).
        closest: String,
        /// What it lacks.
        shortfalls: Vec<Shortfall>,
        /// Nodes refused for resources only.
        count: usize,
    },
    /// The same untolerated taints alone keep the pod off `count` nodes.
    Taints {
        /// The taints, `key=value:Effect`.
        taints: Vec<String>,
        /// The first few nodes.
        nodes: Vec<String>,
        /// How many.
        count: usize,
    },
    /// The same unmet node selector or required affinity alone keeps the pod off `count` nodes.
    Labels {
        /// The requirements, e.g. `nodeSelector disk=ssd`.
        requirements: Vec<String>,
        /// The first few nodes.
        nodes: Vec<String>,
        /// How many.
        count: usize,
    },
    /// Being cordoned alone keeps the pod off `count` nodes.
    Cordoned {
        /// The first few nodes.
        nodes: Vec<String>,
        /// How many.
        count: usize,
    },
    /// Host ports in use alone keep the pod off `count` nodes.
    Ports {
        /// The ports.
        ports: Vec<String>,
        /// The first few nodes.
        nodes: Vec<String>,
        /// How many.
        count: usize,
    },
    /// No node is kept off by one kind of thing only: the node with the fewest in the way.
    Closest {
        /// The node.
        node: String,
        /// What is in its way.
        blockers: Vec<Blocker>,
    },
}

/// A hint and its sentence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HintOut {
    /// The hint.
    #[serde(flatten)]
    pub hint: Hint,
    /// In words.
    pub text: String,
}

fn nodes_text(nodes: &[String], count: usize) -> String {
    let more = count.saturating_sub(nodes.len());
    let s = if count == 1 { "" } else { "s" };
    if more > 0 {
        format!("{count} node{s} ({}, and {more} more)", nodes.join(", "))
    } else {
        format!("{count} node{s} ({})", nodes.join(", "))
    }
}

impl Hint {
    /// The hint in one sentence.
    pub fn describe(&self) -> String {
        match self {
            Self::Resources {
                closest,
                shortfalls,
                count,
            } => {
                let parts: Vec<String> = shortfalls.iter().map(Shortfall::describe).collect();
                let s = if *count == 1 { "" } else { "s" };
                format!(
                    "closest to fitting: {closest}, short of {}; resources alone keep the pod off {count} node{s}",
                    parts.join(", ")
                )
            }
            Self::Taints { taints, nodes, count } => {
                let s = if taints.len() == 1 { "" } else { "s" };
                format!(
                    "only the untolerated taint{s} {} keep{} the pod off {}",
                    taints.join(", "),
                    if taints.len() == 1 { "s" } else { "" },
                    nodes_text(nodes, *count)
                )
            }
            Self::Labels {
                requirements,
                nodes,
                count,
            } => format!(
                "only the unmet {} keep{} the pod off {}",
                requirements.join(" and "),
                if requirements.len() == 1 { "s" } else { "" },
                nodes_text(nodes, *count)
            ),
            Self::Cordoned { nodes, count } => {
                format!("only being cordoned keeps the pod off {}", nodes_text(nodes, *count))
            }
            Self::Ports { ports, nodes, count } => format!(
                "only host port {} in use keeps the pod off {}",
                ports.join(", "),
                nodes_text(nodes, *count)
            ),
            Self::Closest { node, blockers } => {
                let parts: Vec<String> = blockers.iter().map(Blocker::describe).collect();
                format!("closest node: {node}: {}", parts.join("; "))
            }
        }
    }
}

/// What an [`Outcome`] is built from besides the Rank answer.
pub struct Subject<'a> {
    /// The pod as it was ranked, in the engine's terms.
    pub pod: &'a PodSpec,
    /// The snapshot that was ranked, in the engine's terms (for the hints and `--node`).
    pub cluster: &'a Snapshot,
    /// `namespace/name` of pods by uid (at least of the victims preemption names).
    pub pod_names: &'a HashMap<String, String>,
}

/// How much to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Best nodes listed.
    pub top: usize,
    /// Node names listed per group of refused nodes and per hint.
    pub examples: usize,
    /// The node to explain on its own, if any.
    pub node: Option<String>,
}

fn scored(rank: usize, n: &proto::NodeScore) -> ScoredNode {
    ScoredNode {
        rank,
        node: n.node.clone(),
        total: n.total,
        plugins: n
            .plugin_scores
            .iter()
            .map(|p| PluginPart {
                plugin: p.plugin.clone(),
                score: p.score,
                weight: p.weight,
                weighted: p.score.saturating_mul(p.weight),
            })
            .collect(),
    }
}

/// The refused nodes grouped by (filter, reason), most nodes first; a node with several reasons
/// counts in each, as in kube-scheduler's message.
pub fn refused_groups(infeasible: &[proto::InfeasibleNode], examples: usize) -> Vec<RefusedGroup> {
    let mut groups: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for n in infeasible {
        for r in &n.reasons {
            groups.entry((&n.plugin, r)).or_default().push(&n.node);
        }
        if n.reasons.is_empty() {
            groups.entry((&n.plugin, "")).or_default().push(&n.node);
        }
    }
    let mut out: Vec<RefusedGroup> = groups
        .into_iter()
        .map(|((filter, reason), mut nodes)| {
            nodes.sort_unstable();
            RefusedGroup {
                filter: filter.to_string(),
                reason: reason.to_string(),
                count: nodes.len(),
                nodes: nodes.iter().take(examples).map(|n| n.to_string()).collect(),
            }
        })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.filter.cmp(&b.filter)));
    out
}

/// The blockers of one node of the snapshot (empty for a node it does not have).
fn node_blockers(subject: &Subject<'_>, node: &str) -> Vec<Blocker> {
    subject
        .cluster
        .node(node)
        .map(|e| blockers(subject.pod, &e.spec, &e.usage))
        .unwrap_or_default()
}

/// One node's verdict from a Rank answer that lists every feasible and infeasible node.
pub fn node_verdict(rank: &proto::RankResponse, subject: &Subject<'_>, node: &str) -> NodeVerdict {
    if let Some(i) = rank.feasible.iter().position(|n| n.node == node) {
        let other = if i == 0 {
            rank.feasible.get(1).map(|n| (2, n))
        } else {
            Some((1, &rank.feasible[0]))
        };
        return NodeVerdict {
            node: node.to_string(),
            feasible: true,
            rank: Some(i + 1),
            scores: Some(scored(i + 1, &rank.feasible[i])),
            compared_with: other.map(|(r, n)| scored(r, n)),
            filter: None,
            reasons: Vec::new(),
            blockers: Vec::new(),
            devices: Vec::new(),
        };
    }
    let refused = rank.infeasible.iter().find(|n| n.node == node);
    NodeVerdict {
        node: node.to_string(),
        feasible: false,
        rank: None,
        scores: None,
        compared_with: None,
        filter: refused.map(|n| n.plugin.clone()),
        reasons: refused.map(|n| n.reasons.clone()).unwrap_or_default(),
        blockers: node_blockers(subject, node),
        devices: refused
            .map(|n| n.device_failures.iter().map(device_failure).collect())
            .unwrap_or_default(),
    }
}

/// Whether filters the hints do not re-check may refuse nodes for this pod.
fn hints_caveat(subject: &Subject<'_>) -> Option<String> {
    let p = subject.pod;
    let mut unchecked = Vec::new();
    if !p.spread_constraints.is_empty()
        || p.default_spread_selector.is_some()
        || !p.pod_affinity.required.is_empty()
        || !p.pod_anti_affinity.required.is_empty()
        || subject.cluster.has_affinity_pods()
    {
        unchecked.extend(["PodTopologySpread", "InterPodAffinity"]);
    }
    // A node another filter refused first was not asked about the pod's devices.
    if !p.resource_claims.is_empty() {
        unchecked.push("DynamicResources");
    }
    let (last, rest) = unchecked.split_last()?;
    let filters = if rest.is_empty() {
        last.to_string()
    } else {
        format!("{} and {last}", rest.join(", "))
    };
    Some(format!(
        "these re-check cordons, taints, node labels, host ports and resources only; \
         {filters} may still refuse the nodes named"
    ))
}

/// Label keys that name one node: a requirement on them pins the pod, and relabelling other nodes
/// is no fix worth suggesting.
const PINNING_KEYS: &[&str] = &["kubernetes.io/hostname", "metadata.name"];

/// What would make the pod fit, from the refused nodes of a Rank answer: the nodes kept off by one
/// kind of thing only, grouped (not the nodes a pod pinned by name to another node lacks the name
/// of), and the closest on resources; when there are none, the node with the fewest things in its
/// way.
pub fn hints(rank: &proto::RankResponse, subject: &Subject<'_>, examples: usize) -> Vec<HintOut> {
    let mut resources: Vec<(&str, Vec<Shortfall>)> = Vec::new();
    let mut taints: BTreeMap<Vec<String>, Vec<&str>> = BTreeMap::new();
    let mut labels: BTreeMap<Vec<String>, Vec<&str>> = BTreeMap::new();
    let mut ports: BTreeMap<Vec<String>, Vec<&str>> = BTreeMap::new();
    let mut cordoned: Vec<&str> = Vec::new();
    let mut mixed: Option<(&str, Vec<Blocker>)> = None;
    for n in &rank.infeasible {
        let b = node_blockers(subject, &n.node);
        match &b[..] {
            [] | [Blocker::NodeName { .. }] => {}
            [Blocker::NodeUnschedulable] => cordoned.push(&n.node),
            [Blocker::TaintToleration { taints: t }] => taints.entry(t.clone()).or_default().push(&n.node),
            // A pod pinned to a node by name (hostname label or metadata.name) is not helped
            // by relabelling the others.
            [Blocker::NodeAffinity { unmet }] if unmet.iter().any(|m| PINNING_KEYS.contains(&m.key.as_str())) => {}
            [Blocker::NodeAffinity { unmet }] => labels
                .entry(unmet.iter().map(|m| m.requirement.clone()).collect())
                .or_default()
                .push(&n.node),
            [Blocker::NodePorts { ports: p }] => ports.entry(p.clone()).or_default().push(&n.node),
            [Blocker::NodeResourcesFit { shortfalls }] => resources.push((&n.node, shortfalls.clone())),
            _ => {
                let fewer = mixed.as_ref().is_none_or(|(_, m)| b.len() < m.len());
                if fewer {
                    mixed = Some((&n.node, b));
                }
            }
        }
    }
    let examples_of = |nodes: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
        v.sort();
        v.truncate(examples);
        v
    };
    // The largest groups first; two of each kind at most.
    let biggest = |groups: BTreeMap<Vec<String>, Vec<&str>>| -> Vec<(Vec<String>, Vec<String>, usize)> {
        let mut g: Vec<(Vec<String>, Vec<&str>)> = groups.into_iter().collect();
        g.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
        g.into_iter()
            .take(2)
            .map(|(k, nodes)| (k, examples_of(&nodes), nodes.len()))
            .collect()
    };
    let mut out = Vec::new();
    if !cordoned.is_empty() {
        out.push(Hint::Cordoned {
            nodes: examples_of(&cordoned),
            count: cordoned.len(),
        });
    }
    for (t, nodes, count) in biggest(taints) {
        out.push(Hint::Taints {
            taints: t,
            nodes,
            count,
        });
    }
    for (requirements, nodes, count) in biggest(labels) {
        out.push(Hint::Labels {
            requirements,
            nodes,
            count,
        });
    }
    for (p, nodes, count) in biggest(ports) {
        out.push(Hint::Ports { ports: p, nodes, count });
    }
    let distance = |s: &[Shortfall]| s.iter().map(|x| x.fraction).sum::<f64>();
    if let Some((closest, shortfalls)) = resources
        .iter()
        .min_by(|a, b| distance(&a.1).total_cmp(&distance(&b.1)).then_with(|| a.0.cmp(b.0)))
    {
        out.push(Hint::Resources {
            closest: closest.to_string(),
            shortfalls: shortfalls.clone(),
            count: resources.len(),
        });
    }
    if out.is_empty() {
        if let Some((node, blockers)) = mixed {
            out.push(Hint::Closest {
                node: node.to_string(),
                blockers,
            });
        }
    }
    out.into_iter()
        .map(|hint| HintOut {
            text: hint.describe(),
            hint,
        })
        .collect()
}

/// The outcome of one Rank answer for the pod of `subject`.
pub fn outcome(
    rank: &proto::RankResponse,
    decided_by: &str,
    pod: &PodRef,
    subject: &Subject<'_>,
    limits: &Limits,
) -> Outcome {
    let best = rank.feasible.first();
    let schedulable = rank.feasible_count > 0;
    let message = match best {
        Some(b) => scheduled_message(pod, &b.node),
        None => rank.message.clone(),
    };
    let hints = if schedulable {
        Vec::new()
    } else {
        hints(rank, subject, limits.examples)
    };
    Outcome {
        policy: rank.policy.clone(),
        decided_by: decided_by.to_string(),
        schedulable,
        node: best.map(|b| b.node.clone()),
        score: best.map(|b| b.total),
        message,
        feasible_count: rank.feasible_count,
        node_count: rank.node_count,
        nominated_node: Some(rank.nominated_node_name.clone()).filter(|n| !n.is_empty()),
        victims: rank
            .victim_uids
            .iter()
            .map(|u| subject.pod_names.get(u).cloned().unwrap_or_else(|| u.clone()))
            .collect(),
        best: rank
            .feasible
            .iter()
            .take(limits.top)
            .enumerate()
            .map(|(i, n)| scored(i + 1, n))
            .collect(),
        refused: refused_groups(&rank.infeasible, limits.examples),
        devices: device_groups(&rank.infeasible, limits.examples),
        hints_caveat: if hints.is_empty() { None } else { hints_caveat(subject) },
        hints,
        node_detail: limits.node.as_deref().map(|n| node_verdict(rank, subject, n)),
    }
}

/// The PodGroup a pod names (`spec.schedulingGroup`), and how kube's PodGroup cycle goes for its
/// pending pods: which domain the group would take, or why none holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupReport {
    /// The PodGroup's namespace (the pod's).
    pub namespace: String,
    /// The PodGroup's name.
    pub name: String,
    /// Whether the PodGroup exists.
    pub found: bool,
    /// Its minCount (1 for the basic policy), when it exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_count: Option<u32>,
    /// Its topology key: the group goes whole into one domain of this node label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology_key: Option<String>,
    /// The group's pods pending that the binder would decide together, this one included.
    pub pending: usize,
    /// The group's pods bound.
    pub bound: usize,
    /// Why the binder holds the group's pods without deciding them (GangScheduling's
    /// PreEnqueue), when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
    /// Who ran the cycle (empty when none ran).
    pub decided_by: String,
    /// The cycle placed the group.
    pub schedulable: bool,
    /// The domain the group would take (with a topology key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// The PodGroupInitiallyScheduled condition the cycle would write: its reason (`Scheduled`,
    /// `Unschedulable`, `SchedulerError`; empty when no cycle ran) and message, as kube writes
    /// them.
    pub reason: String,
    /// The condition's message (empty when scheduled).
    pub message: String,
    /// The node the cycle gives this pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_node: Option<String>,
    /// kube-scheduler's message for this pod: `Successfully assigned …`, or its FailedScheduling
    /// message.
    pub pod_message: String,
    /// Each placement the cycle considers (a domain of the topology key, or every node), the
    /// one the group takes first, then those that hold minCount, then by members fitting.
    pub domains: Vec<DomainFit>,
    /// Why `domains` is empty although a cycle ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domains_note: Option<String>,
    /// In a CompositePodGroup hierarchy: each level from the root down to the group's parent
    /// (then `domains` are inside the domain taken, or looked into, at the last level).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<LevelReport>,
}

/// One level of a CompositePodGroup hierarchy: the domain the hierarchy takes there, and per
/// domain how many of the pending pods below it fit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LevelReport {
    /// The CompositePodGroup's name.
    pub composite: String,
    /// Its topology key (absent: one placement, the level above's nodes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology_key: Option<String>,
    /// The domain taken; absent when the hierarchy is not placed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chosen: Option<String>,
    /// Per domain (inside the one taken or looked into a level up), the pending pods below that
    /// fit: the one taken first, then by pods fitting, then by name.
    pub domains: Vec<DomainFit>,
}

/// A hierarchy's levels as the report lists them.
pub fn level_reports(levels: &[placement_scheduler::engine::podgroup::LevelFit]) -> Vec<LevelReport> {
    levels
        .iter()
        .map(|l| {
            let mut domains = domain_fits(&l.domains, l.chosen.as_deref(), l.chosen.is_some());
            // A level has no minCount of pods: "feasible" says only that some pod fits.
            domains.sort_by(|a, b| {
                (b.chosen, b.fit)
                    .cmp(&(a.chosen, a.fit))
                    .then_with(|| a.domain.cmp(&b.domain))
            });
            LevelReport {
                composite: l.composite.to_string(),
                topology_key: l.topology_key.as_deref().map(str::to_string),
                chosen: l.chosen.clone(),
                domains,
            }
        })
        .collect()
}

/// How many of a group's pods fit one placement: each tried in order, taking its room.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DomainFit {
    /// The domain (value of the topology key); absent for the placement of every node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Its nodes.
    pub nodes: usize,
    /// Pending pods of the group that fit there.
    pub fit: usize,
    /// Pending pods tried.
    pub pending: usize,
    /// The group's pods already bound (there: bound pods fix the domain).
    pub bound: usize,
    /// It holds minCount.
    pub feasible: bool,
    /// The group takes it.
    pub chosen: bool,
}

/// The placements of a group's cycle as the report lists them: the one taken (`chosen`, a
/// domain's value, or `None` with `taken` for the placement of every node) first, then those
/// holding minCount, then by pods fitting (most first), then by name.
pub fn domain_fits(
    placements: &[placement_scheduler::engine::podgroup::PlacementFit],
    chosen: Option<&str>,
    taken: bool,
) -> Vec<DomainFit> {
    let mut out: Vec<DomainFit> = placements
        .iter()
        .map(|p| DomainFit {
            domain: p.domain.clone(),
            nodes: p.nodes,
            fit: p.fit,
            pending: p.members,
            bound: p.bound,
            feasible: p.feasible,
            chosen: taken && p.domain.as_deref() == chosen,
        })
        .collect();
    out.sort_by(|a, b| {
        (b.chosen, b.feasible, b.fit)
            .cmp(&(a.chosen, a.feasible, a.fit))
            .then_with(|| a.domain.cmp(&b.domain))
    });
    out
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
