//! PodGroup cycles: whole groups in one domain, kube's messages word for word (as kube-scheduler
//! 1.37.2 wrote them for the same cluster), the domain kube's placement scores pick.

use super::*;
use crate::engine::model::{NodeSpec, PodGroup, PreemptionPolicy};
use crate::engine::policy::Policy;
use crate::engine::resources::Resources;

/// The gates of the control plane these cases were read from (cluster.sh --workload-api):
/// TopologyAwareWorkloadScheduling on.
const TAS: crate::engine::gates::FeatureGates = crate::engine::gates::FeatureGates {
    topology_aware_workload_scheduling: true,
    ..crate::engine::gates::FeatureGates::PLACEMENT_DEFAULT
};

fn node(name: &str, rack: Option<&str>, cpu: i64) -> NodeSpec {
    let mut labels = std::collections::HashMap::new();
    if let Some(r) = rack {
        labels.insert("rack".to_string(), r.to_string());
    }
    NodeSpec {
        name: name.into(),
        labels,
        allocatable: Resources {
            milli_cpu: cpu,
            memory: 8 << 30,
            ..Default::default()
        },
        allowed_pods: 110,
        ..Default::default()
    }
}

fn pod(uid: &str, cpu: i64, group: Option<&str>) -> PodSpec {
    let requests = Resources {
        milli_cpu: cpu,
        ..Default::default()
    };
    PodSpec {
        uid: Arc::from(uid),
        namespace: "default".into(),
        name: uid.into(),
        non_zero_requests: Resources {
            memory: 200 << 20,
            ..requests.clone()
        },
        requests,
        pod_group: group.map(|g| crate::engine::model::PodGroupKey::new("default", g)),
        ..Default::default()
    }
}

fn bound(uid: &str, cpu: i64, node: &str, group: Option<&str>) -> PodSpec {
    PodSpec {
        node_name: Some(node.into()),
        ..pod(uid, cpu, group)
    }
}

fn group(name: &str, min_count: Option<u32>, key: Option<&str>) -> PodGroup {
    PodGroup {
        namespace: "default".into(),
        name: name.into(),
        uid: Arc::from(format!("uid-{name}")),
        generation: 1,
        min_count,
        topology_key: key.map(Arc::from),
        priority: 0,
        preemption_policy: PreemptionPolicy::PreemptLowerPriority,
        disruption_all: false,
        initially_scheduled: false,
        parent: None,
    }
}

/// Two racks of two 4-cpu nodes (the cluster the messages below were read from).
fn racks() -> Vec<NodeSpec> {
    vec![
        node("n1", Some("a"), 4000),
        node("n2", Some("a"), 4000),
        node("n3", Some("b"), 4000),
        node("n4", Some("b"), 4000),
    ]
}

fn run(
    nodes: Vec<NodeSpec>,
    pods: Vec<PodSpec>,
    groups: Vec<PodGroup>,
    batch: &[PodSpec],
) -> (Vec<Decision>, Vec<GroupOutcome>) {
    let snap = Snapshot::build(nodes, pods)
        .and_then(|s| s.with_pod_groups(groups))
        .expect("snapshot");
    let profile = Profile::new(Policy::kube_default()).with_gates(TAS);
    schedule(&profile, &snap, None, batch, 7, Deadline::none()).expect("schedule")
}

fn node_of(d: &Decision) -> Option<&str> {
    match d {
        Decision::Node { node, .. } => Some(node),
        Decision::Unschedulable(_) => None,
    }
}

fn message(d: &Decision) -> String {
    match d {
        Decision::Node { node, .. } => panic!("placed on {node}"),
        Decision::Unschedulable(diag) => diag.message(),
    }
}

fn rack_of(node: &str) -> &'static str {
    match node {
        "n1" | "n2" => "a",
        "n3" | "n4" => "b",
        _ => "none",
    }
}

#[test]
fn a_group_no_rack_holds_is_unschedulable_with_kubes_messages() {
    // Four 3-cpu pods, minCount 4, one rack: each rack holds two. kube-scheduler 1.37.2 wrote
    // these messages for this cluster and group.
    let batch: Vec<PodSpec> = (1..=4).map(|i| pod(&format!("big-{i}"), 3000, Some("big"))).collect();
    let (d, outcomes) = run(racks(), vec![], vec![group("big", Some(4), Some("rack"))], &batch);
    let group_message =
        "pod group is unschedulable, 0/2 placements are available, first placement status: minCount (4) \
                         cannot be satisfied: 2 scheduled, 1 remaining, pod group preemption: No preemption victims \
                         found for incoming preemptor";
    assert_eq!(
        outcomes,
        vec![GroupOutcome {
            namespace: "default".into(),
            name: "big".into(),
            reason: GroupReason::Unschedulable,
            message: group_message.to_string(),
            domain: None,
            levels: Vec::new(),
        }]
    );
    assert_eq!(message(&d[0]), format!("pod group is unschedulable, {group_message}"));
    assert_eq!(message(&d[1]), format!("pod group is unschedulable, {group_message}"));
    assert_eq!(message(&d[2]), "0/2 nodes are available: 2 Insufficient cpu.");
    assert_eq!(
        message(&d[3]),
        "pod group is unschedulable, 0/2 placements are available, first placement status: minCount (4) cannot \
         be satisfied: 2 scheduled, 1 remaining"
    );
    for d in &d {
        let Decision::Unschedulable(diag) = d else {
            unreachable!()
        };
        assert_eq!(diag.gang.as_ref().map(|g| &*g.gang), Some("default/big"));
    }
}

#[test]
fn a_group_lands_whole_in_one_rack_and_the_condition_says_scheduled() {
    let batch: Vec<PodSpec> = (1..=2).map(|i| pod(&format!("ok-{i}"), 3000, Some("ok"))).collect();
    let (d, outcomes) = run(racks(), vec![], vec![group("ok", Some(2), Some("rack"))], &batch);
    let nodes: Vec<&str> = d.iter().map(|d| node_of(d).expect("placed")).collect();
    assert_eq!(rack_of(nodes[0]), rack_of(nodes[1]), "{nodes:?}");
    assert_ne!(nodes[0], nodes[1]);
    assert_eq!(outcomes[0].reason, GroupReason::Scheduled);
    assert_eq!(outcomes[0].message, "");
    assert_eq!(outcomes[0].domain.as_deref(), Some(rack_of(nodes[0])));
}

#[test]
fn the_fullest_rack_that_holds_the_group_is_chosen() {
    // NodeResourcesFit's placement score is MostAllocated: rack b, half full, beats empty rack a.
    let nodes = racks();
    let busy = vec![bound("x", 1000, "n3", None)];
    let batch: Vec<PodSpec> = (1..=2).map(|i| pod(&format!("g-{i}"), 1000, Some("g"))).collect();
    let (d, outcomes) = run(nodes, busy, vec![group("g", Some(2), Some("rack"))], &batch);
    for d in &d {
        assert_eq!(rack_of(node_of(d).expect("placed")), "b");
    }
    assert_eq!(outcomes[0].domain.as_deref(), Some("b"));
}

#[test]
fn a_group_never_spans_two_racks_even_when_the_cluster_holds_it() {
    // Three 3-cpu pods: the cluster has room for four, no rack for more than two.
    let batch: Vec<PodSpec> = (1..=3).map(|i| pod(&format!("s-{i}"), 3000, Some("s"))).collect();
    let (d, outcomes) = run(racks(), vec![], vec![group("s", Some(3), Some("rack"))], &batch);
    assert!(d.iter().all(|d| node_of(d).is_none()));
    assert_eq!(outcomes[0].reason, GroupReason::Unschedulable);
    // Without the constraint the same group fits.
    let (d, outcomes) = run(racks(), vec![], vec![group("s", Some(3), None)], &batch);
    assert!(d.iter().all(|d| node_of(d).is_some()));
    assert_eq!(outcomes[0].reason, GroupReason::Scheduled);
    assert_eq!(outcomes[0].domain, None);
}

#[test]
fn a_bound_member_pins_the_group_to_its_rack() {
    // One member already runs in rack a: the others go there, or nowhere.
    let done = vec![bound("m-0", 3000, "n1", Some("m"))];
    let batch = vec![pod("m-1", 3000, Some("m"))];
    let (d, _) = run(racks(), done.clone(), vec![group("m", Some(2), Some("rack"))], &batch);
    assert_eq!(node_of(&d[0]), Some("n2"));
    // Rack a full: the member does not go to rack b.
    let mut full = done;
    full.push(bound("x", 3000, "n2", None));
    let (d, outcomes) = run(racks(), full, vec![group("m", Some(2), Some("rack"))], &batch);
    assert_eq!(node_of(&d[0]), None);
    assert_eq!(outcomes[0].reason, GroupReason::Unschedulable);
    assert!(
        outcomes[0].message.contains("0/1 placements are available"),
        "{}",
        outcomes[0].message
    );
}

#[test]
fn a_basic_group_places_what_fits_in_one_rack() {
    let batch: Vec<PodSpec> = (1..=3).map(|i| pod(&format!("b-{i}"), 3000, Some("b"))).collect();
    let (d, outcomes) = run(racks(), vec![], vec![group("b", None, Some("rack"))], &batch);
    let placed: Vec<&str> = d.iter().filter_map(node_of).collect();
    assert_eq!(placed.len(), 2, "{d:?}");
    assert_eq!(rack_of(placed[0]), rack_of(placed[1]));
    assert_eq!(outcomes[0].reason, GroupReason::Scheduled);
    // The third failed on its own, with its FitError in its rack.
    let missing = d.iter().find(|d| node_of(d).is_none()).expect("one left");
    assert_eq!(message(missing), "0/2 nodes are available: 2 Insufficient cpu.");
}

#[test]
fn nodes_without_the_topology_label_take_no_group() {
    let nodes = vec![node("free", None, 64000), node("n1", Some("a"), 4000)];
    let batch: Vec<PodSpec> = (1..=2).map(|i| pod(&format!("g-{i}"), 3000, Some("g"))).collect();
    let (d, outcomes) = run(nodes, vec![], vec![group("g", Some(2), Some("rack"))], &batch);
    assert!(d.iter().all(|d| node_of(d).is_none()), "{d:?}");
    assert!(
        outcomes[0].message.contains("0/1 placements are available"),
        "{}",
        outcomes[0].message
    );
}

#[test]
fn pods_after_a_group_in_the_batch_see_its_placements() {
    // The group takes rack b (fuller); the single pod after it needs 3 cpu: rack a only.
    let busy = vec![bound("x", 1000, "n3", None)];
    let mut batch: Vec<PodSpec> = (1..=2).map(|i| pod(&format!("g-{i}"), 3000, Some("g"))).collect();
    batch.push(pod("solo-1", 3000, None));
    batch.push(pod("solo-2", 3000, None));
    batch.push(pod("solo-3", 3000, None));
    let (d, _) = run(racks(), busy, vec![group("g", Some(2), Some("rack"))], &batch);
    let group_nodes: Vec<&str> = d[..2].iter().map(|d| node_of(d).expect("group placed")).collect();
    let solo: Vec<Option<&str>> = d[2..].iter().map(node_of).collect();
    for n in solo.iter().flatten() {
        assert!(!group_nodes.contains(n), "{n} taken twice: {d:?}");
    }
    assert_eq!(solo.iter().filter(|n| n.is_some()).count(), 2, "{solo:?}");
}

#[test]
fn a_missing_pod_group_holds_its_pods() {
    let batch = vec![pod("w-1", 1000, Some("absent"))];
    let (d, outcomes) = run(racks(), vec![], vec![], &batch);
    assert_eq!(
        message(&d[0]),
        "waiting for pods's pod group \"absent\" to appear in scheduling queue"
    );
    assert!(outcomes.is_empty());
}

#[test]
fn a_pod_whose_priority_differs_from_its_groups_is_a_scheduler_error() {
    let mut p = pod("w-1", 1000, Some("g"));
    p.priority = 5;
    let (d, outcomes) = run(racks(), vec![], vec![group("g", Some(1), None)], &[p]);
    let expected =
        "all pods in a single pod group should have the same priority as the pod group's priority, got 5 and 0";
    assert_eq!(message(&d[0]), expected);
    assert_eq!(outcomes[0].reason, GroupReason::SchedulerError);
    assert_eq!(outcomes[0].message, expected);
}

const NOT_ELIGIBLE: &str = ", pod group preemption: not eligible due to preemptionPolicy=Never.";
const NO_VICTIMS: &str = ", pod group preemption: No preemption victims found for incoming preemptor";

/// Three 3-cpu members of a group `s` (minCount 3) that fits no rack, each member's preemption
/// policy from `policies`, the group's from `group_policy`; the group's condition message.
fn unplaceable_with_policies(
    gates: crate::engine::gates::FeatureGates,
    group_policy: PreemptionPolicy,
    policies: [PreemptionPolicy; 3],
) -> GroupOutcome {
    let batch: Vec<PodSpec> = policies
        .iter()
        .enumerate()
        .map(|(i, &p)| PodSpec {
            preemption_policy: p,
            ..pod(&format!("s-{i}"), 3000, Some("s"))
        })
        .collect();
    let mut g = group("s", Some(3), Some("rack"));
    g.preemption_policy = group_policy;
    let snap = Snapshot::build(racks(), vec![])
        .and_then(|s| s.with_pod_groups(vec![g]))
        .expect("snapshot");
    let profile = Profile::new(Policy::kube_default()).with_gates(gates);
    let (_, mut outcomes) = schedule(&profile, &snap, None, &batch, 7, Deadline::none()).expect("schedule");
    outcomes.remove(0)
}

#[test]
fn without_the_pod_group_preemption_policy_gate_the_members_never_makes_the_group_never() {
    use PreemptionPolicy::{Never, PreemptLowerPriority as Lower};
    // kube 1.37's default gates: the group's own field is not read, the members' is.
    let never = unplaceable_with_policies(TAS, Lower, [Never; 3]);
    assert!(never.message.ends_with(NOT_ELIGIBLE), "{}", never.message);
    let field_only = unplaceable_with_policies(TAS, Never, [Lower; 3]);
    assert!(field_only.message.ends_with(NO_VICTIMS), "{}", field_only.message);
}

#[test]
fn with_the_pod_group_preemption_policy_gate_the_groups_field_decides() {
    use PreemptionPolicy::{Never, PreemptLowerPriority as Lower};
    let gated = crate::engine::gates::FeatureGates {
        pod_group_preemption_policy: true,
        ..TAS
    };
    let never = unplaceable_with_policies(gated, Never, [Never; 3]);
    assert!(never.message.ends_with(NOT_ELIGIBLE), "{}", never.message);
    let lower = unplaceable_with_policies(gated, Lower, [Lower; 3]);
    assert!(lower.message.ends_with(NO_VICTIMS), "{}", lower.message);
}

#[test]
fn members_disagreeing_on_preemption_policy_are_a_scheduler_error_as_kube_validates_them() {
    use PreemptionPolicy::{Never, PreemptLowerPriority as Lower};
    let mixed = unplaceable_with_policies(TAS, Lower, [Lower, Never, Lower]);
    assert_eq!(mixed.reason, GroupReason::SchedulerError);
    assert_eq!(
        mixed.message,
        "all pods in a single pod group should have the same preemption policy, got Never and PreemptLowerPriority"
    );
    let gated = crate::engine::gates::FeatureGates {
        pod_group_preemption_policy: true,
        ..TAS
    };
    let against_group = unplaceable_with_policies(gated, Never, [Never, Lower, Never]);
    assert_eq!(against_group.reason, GroupReason::SchedulerError);
    assert_eq!(
        against_group.message,
        "all pods in a single pod group should have the same preemption policy as the pod group's preemption \
         policy, got PreemptLowerPriority and Never"
    );
}

#[test]
fn without_topology_aware_scheduling_the_key_is_not_read_and_kubes_default_algorithm_answers() {
    // kube 1.37's default gates: TopologyAwareWorkloadScheduling off. Four 2.5-cpu pods fit the
    // cluster (one per node) but no rack: the group is placed over both racks.
    let off = crate::engine::gates::FeatureGates::PLACEMENT_DEFAULT;
    let batch: Vec<PodSpec> = (1..=4).map(|i| pod(&format!("w-{i}"), 2500, Some("w"))).collect();
    let snap = Snapshot::build(racks(), vec![])
        .and_then(|s| s.with_pod_groups(vec![group("w", Some(4), Some("rack"))]))
        .expect("snapshot");
    let profile = Profile::new(Policy::kube_default()).with_gates(off);
    let (d, outcomes) = schedule(&profile, &snap, None, &batch, 7, Deadline::none()).expect("schedule");
    let used: std::collections::BTreeSet<&str> = d.iter().filter_map(node_of).map(rack_of).collect();
    assert_eq!(used.len(), 2, "{d:?}");
    assert_eq!(outcomes[0].reason, GroupReason::Scheduled);
    assert_eq!(outcomes[0].domain, None);
    // Five such pods fit nowhere: the default algorithm's own status, no placements wrapper.
    let batch: Vec<PodSpec> = (1..=5).map(|i| pod(&format!("w-{i}"), 2500, Some("w"))).collect();
    let snap = Snapshot::build(racks(), vec![])
        .and_then(|s| s.with_pod_groups(vec![group("w", Some(5), Some("rack"))]))
        .expect("snapshot");
    let (d, outcomes) = schedule(&profile, &snap, None, &batch, 7, Deadline::none()).expect("schedule");
    let cycle = "minCount (5) cannot be satisfied: 4 scheduled, 0 remaining";
    assert_eq!(outcomes[0].message, format!("{cycle}{NO_VICTIMS}"));
    assert_eq!(
        message(&d[0]),
        format!("pod group is unschedulable, {cycle}{NO_VICTIMS}")
    );
    assert_eq!(message(&d[4]), "0/4 nodes are available: 4 Insufficient cpu.");
}

#[test]
fn with_topology_aware_scheduling_and_no_node_carrying_the_key_no_placement_is_found() {
    let batch: Vec<PodSpec> = (1..=2).map(|i| pod(&format!("k-{i}"), 100, Some("k"))).collect();
    let (d, outcomes) = run(racks(), vec![], vec![group("k", Some(2), Some("zone"))], &batch);
    assert_eq!(outcomes[0].reason, GroupReason::Unschedulable);
    assert!(
        outcomes[0]
            .message
            .starts_with("no feasible placements found, pod group preemption: "),
        "{}",
        outcomes[0].message
    );
    assert!(d.iter().all(|d| node_of(d).is_none()));
}

#[test]
fn without_the_generic_workload_gate_members_are_scheduled_one_by_one() {
    // Four 3-cpu members, minCount 4: no rack holds them, but kube without GenericWorkload reads
    // no PodGroup and binds the two that fit.
    let off = crate::engine::gates::FeatureGates {
        generic_workload: false,
        ..TAS
    };
    let batch: Vec<PodSpec> = (1..=4).map(|i| pod(&format!("big-{i}"), 3000, Some("big"))).collect();
    let snap = Snapshot::build(racks(), vec![])
        .and_then(|s| s.with_pod_groups(vec![group("big", Some(4), Some("rack"))]))
        .expect("snapshot");
    let profile = Profile::new(Policy::kube_default()).with_gates(off);
    let (d, outcomes) = schedule(&profile, &snap, None, &batch, 7, Deadline::none()).expect("schedule");
    assert_eq!(d.iter().filter(|d| node_of(d).is_some()).count(), 4);
    assert!(outcomes.is_empty());
}

#[test]
fn the_walk_picks_what_evaluating_every_rack_picks() {
    // 12 racks of 3 nodes with assorted usage: the pruned walk's rack is one of the racks of best
    // total that scoring every feasible rack (kube's way) finds.
    let mut nodes = Vec::new();
    let mut busy = Vec::new();
    for r in 0..12 {
        for n in 0..3 {
            let name = format!("r{r}-n{n}");
            nodes.push(node(&name, Some(&format!("r{r:02}")), 8000));
            let used = ((r * 7 + n * 3) % 9) as i64 * 700;
            if used > 0 {
                busy.push(bound(&format!("x-{name}"), used, &name, None));
            }
        }
    }
    let snap = Snapshot::build(nodes, busy)
        .and_then(|s| s.with_pod_groups(vec![group("g", Some(4), Some("rack"))]))
        .expect("snapshot");
    let profile = Profile::new(Policy::kube_default()).with_gates(TAS);
    let batch: Vec<PodSpec> = (1..=4).map(|i| pod(&format!("g-{i}"), 2500, Some("g"))).collect();
    let ctx = Ctx {
        profile: &profile,
        extenders: None,
        seed: 7,
        deadline: Deadline::none(),
    };
    let g = snap
        .pod_group(&crate::engine::model::PodGroupKey::new("default", "g"))
        .expect("group")
        .clone();
    let topology = snap.topology("rack");
    let all = placements(&profile, &snap, &g, Some(&topology), &batch, None).expect("placements");
    let mut views = DomainViews::default();
    let mut totals = Vec::new();
    for p in &all {
        let t = try_placement(&ctx, &snap, &mut views, &g, p, &batch, 0, false).expect("trial");
        if t.failure.is_none() {
            assert_eq!(t.fit + 100, p.bound, "a placement taking every member scores its bound");
            totals.push((t.fit + 100, topology.values[p.domain.expect("domain") as usize].clone()));
        }
    }
    let best = totals.iter().map(|(t, _)| *t).max().expect("some rack holds the group");
    let (d, outcomes) = run_snapshot(&snap, &batch);
    let chosen = outcomes[0].domain.clone().expect("placed");
    assert!(
        totals.iter().any(|(t, r)| *t == best && *r == chosen),
        "chose {chosen}, best {best} in {totals:?}"
    );
    assert!(d.iter().all(|d| node_of(d).is_some_and(|n| n.starts_with(&format!(
        "r{}-",
        &chosen[1..].trim_start_matches('0').parse::<u32>().unwrap_or(0)
    )))));
}

fn run_snapshot(snap: &Snapshot, batch: &[PodSpec]) -> (Vec<Decision>, Vec<GroupOutcome>) {
    let profile = Profile::new(Policy::kube_default()).with_gates(TAS);
    schedule(&profile, snap, None, batch, 7, Deadline::none()).expect("schedule")
}

fn explained(
    nodes: Vec<NodeSpec>,
    pods: Vec<PodSpec>,
    groups: Vec<PodGroup>,
    key: &str,
    batch: &[PodSpec],
) -> GroupExplanation {
    let snap = Snapshot::build(nodes, pods)
        .and_then(|s| s.with_pod_groups(groups))
        .expect("snapshot");
    let profile = Profile::new(Policy::kube_default()).with_gates(TAS);
    explain(&profile, &snap, None, key, batch, 7, Deadline::none()).expect("explain")
}

fn fits(e: &GroupExplanation) -> Vec<(Option<&str>, usize, usize, bool)> {
    e.placements
        .iter()
        .map(|p| (p.domain.as_deref(), p.nodes, p.fit, p.feasible))
        .collect()
}

#[test]
fn explain_counts_the_members_each_rack_holds_and_gives_the_cycles_own_outcome() {
    // Four 3-cpu pods, minCount 4: each rack holds two of them; kube's cycle stops a rack at the
    // third, the trial goes on and counts two of four.
    let batch: Vec<PodSpec> = (1..=4).map(|i| pod(&format!("big-{i}"), 3000, Some("big"))).collect();
    let groups = vec![group("big", Some(4), Some("rack"))];
    let e = explained(racks(), vec![], groups.clone(), "default/big", &batch);
    assert_eq!(e.min_count, 4);
    assert_eq!(fits(&e), [(Some("a"), 2, 2, false), (Some("b"), 2, 2, false)]);
    assert!(e.placements.iter().all(|p| (p.members, p.bound) == (4, 0)));
    // The decisions and the outcome are schedule's, word for word.
    let (d, outcomes) = run(racks(), vec![], groups, &batch);
    assert_eq!(e.decisions, d);
    assert_eq!(e.outcome.as_ref(), outcomes.first());
    assert_eq!(e.outcome.map(|o| o.reason), Some(GroupReason::Unschedulable));
}

#[test]
fn explain_names_the_rack_the_group_takes_and_the_racks_too_full_for_it() {
    // Rack a has 1 cpu free on n1 and 2 on n2: one 2-cpu member fits there; rack b holds both.
    let busy = vec![bound("x", 3000, "n1", None), bound("y", 2000, "n2", None)];
    let batch: Vec<PodSpec> = (1..=2).map(|i| pod(&format!("g-{i}"), 2000, Some("g"))).collect();
    let e = explained(
        racks(),
        busy,
        vec![group("g", Some(2), Some("rack"))],
        "default/g",
        &batch,
    );
    let outcome = e.outcome.clone().expect("an outcome");
    assert_eq!(
        (outcome.reason, outcome.domain.as_deref()),
        (GroupReason::Scheduled, Some("b"))
    );
    let mut by_domain = fits(&e);
    by_domain.sort();
    assert_eq!(by_domain, [(Some("a"), 2, 1, false), (Some("b"), 2, 2, true)]);
    for d in &e.decisions {
        assert_eq!(rack_of(node_of(d).expect("placed")), "b");
    }
}

#[test]
fn explain_without_a_topology_key_tries_every_node_and_without_the_group_nothing() {
    let batch: Vec<PodSpec> = (1..=3).map(|i| pod(&format!("s-{i}"), 3000, Some("s"))).collect();
    let e = explained(racks(), vec![], vec![group("s", Some(3), None)], "default/s", &batch);
    assert_eq!(fits(&e), [(None, 4, 3, true)]);
    assert_eq!(e.outcome.map(|o| o.reason), Some(GroupReason::Scheduled));
    // No PodGroup in the snapshot: no outcome (the pods wait for it), no placement.
    let e = explained(racks(), vec![], vec![], "default/s", &batch);
    assert_eq!((e.outcome, e.min_count, e.placements.len()), (None, 0, 0));
    assert!(e.decisions.iter().all(|d| node_of(d).is_none()));
}

#[test]
fn explain_counts_bound_members_and_only_their_rack() {
    let done = vec![bound("m-0", 3000, "n1", Some("m"))];
    let batch = vec![pod("m-1", 3000, Some("m"))];
    let e = explained(
        racks(),
        done,
        vec![group("m", Some(2), Some("rack"))],
        "default/m",
        &batch,
    );
    assert_eq!(fits(&e), [(Some("a"), 2, 1, true)]);
    assert_eq!(e.placements[0].bound, 1);
    assert_eq!(node_of(&e.decisions[0]), Some("n2"));
}

/// Nodes a0 (rack ra, zone z1), b0 (rack rb, zone z1), c0 (rack rc, zone z2), 4 cpus each: the
/// cluster of the report on the 1.37 control plane.
fn zoned_racks() -> Vec<NodeSpec> {
    [("a0", "ra", "z1"), ("b0", "rb", "z1"), ("c0", "rc", "z2")]
        .into_iter()
        .map(|(n, r, z)| {
            let mut spec = node(n, Some(r), 4000);
            spec.labels.insert("zone".into(), z.into());
            spec
        })
        .collect()
}

fn labelled(mut p: PodSpec, key: &str, value: &str) -> PodSpec {
    p.labels.insert(key.into(), value.into());
    p
}

fn zone_term(app: &str) -> crate::engine::model::PodAffinityTerm {
    crate::engine::model::PodAffinityTerm {
        selector: Some(crate::engine::model::LabelSelector::from_labels([("app", app)])),
        namespaces: Vec::new(),
        namespace_selector: None,
        topology_key: "zone".into(),
    }
}

#[test]
fn a_members_required_anti_affinity_sees_pods_bound_in_other_racks() {
    // kube-scheduler 1.37.2 on the control plane bound both members on c0: a0 shares x's zone
    // although x is bound in another rack. A placement narrows the candidate nodes only; the
    // topology plugins count the whole cluster.
    let x = labelled(bound("x", 100, "b0", None), "app", "x");
    let batch: Vec<PodSpec> = (1..=2)
        .map(|i| {
            let mut p = pod(&format!("m-{i}"), 100, Some("g"));
            p.pod_anti_affinity.required.push(zone_term("x"));
            p
        })
        .collect();
    let (d, outcomes) = run(zoned_racks(), vec![x], vec![group("g", Some(2), Some("rack"))], &batch);
    assert_eq!(d.iter().map(node_of).collect::<Vec<_>>(), vec![Some("c0"), Some("c0")]);
    assert_eq!(outcomes[0].reason, GroupReason::Scheduled);
    assert_eq!(outcomes[0].domain.as_deref(), Some("rc"));
}

#[test]
fn an_existing_pods_anti_affinity_from_another_rack_keeps_members_out_of_its_zone() {
    // x, bound on b0 (rack rb), refuses app=m pods in its zone: the group cannot take rack ra
    // (zone z1 too), only rc.
    let mut x = bound("x", 100, "b0", None);
    x.pod_anti_affinity.required.push(zone_term("m"));
    let batch: Vec<PodSpec> = (1..=2)
        .map(|i| labelled(pod(&format!("m-{i}"), 100, Some("g")), "app", "m"))
        .collect();
    let (d, _) = run(zoned_racks(), vec![x], vec![group("g", Some(2), Some("rack"))], &batch);
    assert_eq!(d.iter().map(node_of).collect::<Vec<_>>(), vec![Some("c0"), Some("c0")]);
}

#[test]
fn a_members_required_affinity_finds_its_peer_in_another_rack_of_the_zone() {
    // The member must share a zone with y, bound on b0 (rack rb, zone z1), which y fills. Only
    // a0 (rack ra, also z1) can take it: its rack's view must see y, bound in another rack.
    let batch: Vec<PodSpec> = (1..=1)
        .map(|i| {
            let mut p = pod(&format!("m-{i}"), 100, Some("g"));
            p.pod_affinity.required.push(zone_term("y"));
            p
        })
        .collect();
    let y = labelled(bound("y", 3950, "b0", None), "app", "y");
    let (d, outcomes) = run(zoned_racks(), vec![y], vec![group("g", Some(1), Some("rack"))], &batch);
    assert_eq!(node_of(&d[0]), Some("a0"));
    assert_eq!(outcomes[0].domain.as_deref(), Some("ra"));
}

#[test]
fn spreading_counts_the_pods_of_the_whole_cluster() {
    // A DoNotSchedule spread over zones (maxSkew 1) of app=s pods: two are bound in zone z2 (on
    // c0), none in z1. A member may go to z1 only: rack ra (a0) or rb (b0), never rc, although
    // rc is the fullest rack (MostAllocated placement score would pick it).
    let bound_s: Vec<PodSpec> = (1..=2)
        .map(|i| labelled(bound(&format!("s-{i}"), 1000, "c0", None), "app", "s"))
        .collect();
    let spread = crate::engine::model::SpreadConstraint {
        max_skew: 1,
        topology_key: "zone".into(),
        when_unsatisfiable: crate::engine::model::WhenUnsatisfiable::DoNotSchedule,
        selector: Some(crate::engine::model::LabelSelector::from_labels([("app", "s")])),
        min_domains: 1,
        node_affinity_policy: crate::engine::model::NodeInclusionPolicy::Honor,
        node_taints_policy: crate::engine::model::NodeInclusionPolicy::Ignore,
        match_label_keys: Vec::new(),
    };
    let mut m = labelled(pod("m-1", 100, Some("g")), "app", "s");
    m.spread_constraints.push(spread);
    let (d, outcomes) = run(zoned_racks(), bound_s, vec![group("g", Some(1), Some("rack"))], &[m]);
    let placed = node_of(&d[0]).expect("placed");
    assert!(placed == "a0" || placed == "b0", "placed on {placed}");
    assert_ne!(outcomes[0].domain.as_deref(), Some("rc"));
}

#[test]
fn a_later_group_in_the_batch_sees_an_earlier_groups_pods_in_other_racks() {
    // g1's member x (app=x) fits only rack rb (node selector): its cycle tries ra first, then
    // binds x on b0. g2's members refuse x's zone: the views of g1's cycle, kept for g2's, must
    // show x on b0, so ra (zone z1) is refused and g2 goes to rc.
    let mut x = labelled(pod("x", 100, Some("g1")), "app", "x");
    x.node_selector.push(("rack".into(), "rb".into()));
    let mut batch = vec![x];
    batch.extend((1..=2).map(|i| {
        let mut p = pod(&format!("m-{i}"), 100, Some("g2"));
        p.pod_anti_affinity.required.push(zone_term("x"));
        p
    }));
    let groups = vec![group("g1", Some(1), Some("rack")), group("g2", Some(2), Some("rack"))];
    let (d, outcomes) = run(zoned_racks(), vec![], groups, &batch);
    assert_eq!(
        d.iter().map(node_of).collect::<Vec<_>>(),
        vec![Some("b0"), Some("c0"), Some("c0")]
    );
    assert_eq!(outcomes[1].domain.as_deref(), Some("rc"));
}

/// An extender interested in the pods named in `fails`, whose filter call fails for them.
struct FailingExtender {
    fails: &'static [&'static str],
}

impl crate::engine::extender::ExtenderHook for FailingExtender {
    fn interested(&self, pod: &PodSpec) -> bool {
        self.fails.contains(&pod.name.as_str())
    }

    fn filter(
        &self,
        _: &Snapshot,
        pod: &PodSpec,
        _: &[usize],
    ) -> Result<crate::engine::extender::ExtenderFiltered, String> {
        Err(format!("extender example failed for {}", pod.name))
    }

    fn prioritize(&self, _: &Snapshot, _: &PodSpec, _: &[usize]) -> Vec<(usize, i64)> {
        Vec::new()
    }
}

#[test]
fn a_members_error_fails_the_whole_group_with_a_scheduler_error() {
    // kube's default algorithm stops at a member whose attempt ended with an error: the group's
    // condition is a SchedulerError, no member is placed, the failing member keeps its own error.
    let batch: Vec<PodSpec> = (1..=3).map(|i| pod(&format!("e-{i}"), 100, Some("e"))).collect();
    let snap = Snapshot::build(racks(), vec![])
        .and_then(|s| s.with_pod_groups(vec![group("e", Some(2), Some("rack"))]))
        .expect("snapshot");
    let extender = FailingExtender { fails: &["e-2"] };
    for gates in [TAS, crate::engine::gates::FeatureGates::PLACEMENT_DEFAULT] {
        let profile = Profile::new(Policy::kube_default()).with_gates(gates);
        let (d, outcomes) = schedule(&profile, &snap, Some(&extender), &batch, 7, Deadline::none()).expect("schedule");
        let group_error = "failed to schedule other pod from a pod group: extender example failed for e-2";
        assert_eq!(outcomes[0].reason, GroupReason::SchedulerError);
        assert_eq!(outcomes[0].message, group_error);
        assert!(d.iter().all(|d| node_of(d).is_none()), "{d:?}");
        assert_eq!(message(&d[0]), group_error);
        assert_eq!(message(&d[1]), "extender example failed for e-2");
        assert_eq!(message(&d[2]), group_error);
    }
}
