//! CompositePodGroup hierarchies: kube 1.37's cases (`schedule_one_podgroup_test.go`:
//! `TestCPGHierarchicalScheduling_Internal`, `TestCPGMinGroupCount_Internal`,
//! `TestCPGBasicWithGangChildren_Internal`, `TestCPGSchedulingPlacementAlgorithm`) on real nodes,
//! and top-down placement over blocks and racks.

use std::sync::Arc;

use crate::engine::framework::{Deadline, Decision};
use crate::engine::gates::FeatureGates;
use crate::engine::model::{CompositePodGroup, NodeSpec, PodGroup, PodSpec, PreemptionPolicy};
use crate::engine::podgroup::{schedule, GroupOutcome, GroupReason};
use crate::engine::policy::Policy;
use crate::engine::profile::Profile;
use crate::engine::resources::Resources;
use crate::engine::snapshot::Snapshot;

/// The control plane's gates for CompositePodGroups.
const CPG: FeatureGates = FeatureGates {
    topology_aware_workload_scheduling: true,
    composite_pod_group: true,
    ..FeatureGates::PLACEMENT_DEFAULT
};

/// A node in block `block` and rack `rack` (labels omitted when `None`).
fn node(name: &str, block: Option<&str>, rack: Option<&str>, cpu: i64) -> NodeSpec {
    let mut labels = std::collections::HashMap::new();
    if let Some(b) = block {
        labels.insert("block".to_string(), b.to_string());
    }
    if let Some(r) = rack {
        labels.insert("rack".to_string(), r.to_string());
    }
    NodeSpec {
        name: name.into(),
        labels,
        allocatable: Resources {
            milli_cpu: cpu,
            memory: 64 << 30,
            ..Default::default()
        },
        allowed_pods: 110,
        ..Default::default()
    }
}

fn pod(uid: &str, cpu: i64, group: &str) -> PodSpec {
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
        pod_group: Some(crate::engine::model::PodGroupKey::new("default", group)),
        ..Default::default()
    }
}

/// `n` pods of `group` named `<group>-pod-<i>`.
fn pods(group: &str, n: usize, cpu: i64) -> Vec<PodSpec> {
    (0..n).map(|i| pod(&format!("{group}-pod-{i}"), cpu, group)).collect()
}

/// A PodGroup: gang with `min_count`, basic with 0 (as kube's test helper makes them).
fn pg(name: &str, min_count: u32, parent: &str, key: Option<&str>) -> PodGroup {
    PodGroup {
        namespace: "default".into(),
        name: name.into(),
        uid: Arc::from(format!("uid-{name}")),
        generation: 1,
        min_count: (min_count > 0).then_some(min_count),
        topology_key: key.map(Arc::from),
        priority: 0,
        preemption_policy: PreemptionPolicy::PreemptLowerPriority,
        disruption_all: false,
        initially_scheduled: false,
        parent: Some(Arc::from(parent)),
    }
}

/// A CompositePodGroup: gang with `min`, basic with 0.
fn cpg(name: &str, min: u32, parent: Option<&str>, key: Option<&str>) -> CompositePodGroup {
    CompositePodGroup {
        namespace: "default".into(),
        name: name.into(),
        uid: Arc::from(format!("uid-{name}")),
        parent: parent.map(Arc::from),
        min_group_count: (min > 0).then_some(min),
        topology_key: key.map(Arc::from),
        priority: 0,
        preemption_policy: PreemptionPolicy::PreemptLowerPriority,
    }
}

fn run_with(
    gates: FeatureGates,
    nodes: Vec<NodeSpec>,
    bound: Vec<PodSpec>,
    groups: Vec<PodGroup>,
    composites: Vec<CompositePodGroup>,
    batch: &[PodSpec],
) -> (Vec<Decision>, Vec<GroupOutcome>) {
    let snap = Snapshot::build(nodes, bound)
        .and_then(|s| s.with_pod_groups(groups))
        .and_then(|s| s.with_composite_pod_groups(composites))
        .expect("snapshot");
    let profile = Profile::new(Policy::kube_default()).with_gates(gates);
    schedule(&profile, &snap, None, batch, 7, Deadline::none()).expect("schedule")
}

fn run(
    nodes: Vec<NodeSpec>,
    groups: Vec<PodGroup>,
    composites: Vec<CompositePodGroup>,
    batch: &[PodSpec],
) -> (Vec<Decision>, Vec<GroupOutcome>) {
    run_with(CPG, nodes, Vec::new(), groups, composites, batch)
}

fn node_of(d: &Decision) -> Option<&str> {
    match d {
        Decision::Node { node, .. } => Some(node),
        Decision::Unschedulable(_) => None,
    }
}

/// The placed pods' names.
fn placed(batch: &[PodSpec], d: &[Decision]) -> Vec<String> {
    batch
        .iter()
        .zip(d)
        .filter(|(_, d)| node_of(d).is_some())
        .map(|(p, _)| p.name.clone())
        .collect()
}

fn outcome<'o>(outcomes: &'o [GroupOutcome], name: &str) -> &'o GroupOutcome {
    outcomes
        .iter()
        .find(|o| &*o.name == name)
        .unwrap_or_else(|| panic!("no outcome for {name}: {outcomes:?}"))
}

#[test]
fn hierarchical_gangs_place_the_subtrees_that_meet_min_group_count() {
    // kube's TestCPGHierarchicalScheduling_Internal: cpg-root (gang 2) over cpg-sub1 (gang 2:
    // pg1, pg2, pg3), cpg-sub2 (basic: pg4 basic, pg5) and cpg-sub3 (gang 2: pg6, pg7); pg3's
    // and pg7's pods fit nowhere. sub1 and sub2 meet their counts, sub3 does not, so pg6 is not
    // placed either although it fits; the root has its two.
    let nodes = vec![node("node1", None, None, 100_000)];
    let groups = vec![
        pg("pg1", 3, "cpg-sub1", None),
        pg("pg2", 3, "cpg-sub1", None),
        pg("pg3", 3, "cpg-sub1", None),
        pg("pg4", 0, "cpg-sub2", None),
        pg("pg5", 3, "cpg-sub2", None),
        pg("pg6", 3, "cpg-sub3", None),
        pg("pg7", 3, "cpg-sub3", None),
    ];
    let composites = vec![
        cpg("cpg-root", 2, None, None),
        cpg("cpg-sub1", 2, Some("cpg-root"), None),
        cpg("cpg-sub2", 0, Some("cpg-root"), None),
        cpg("cpg-sub3", 2, Some("cpg-root"), None),
    ];
    let mut batch = Vec::new();
    for g in ["pg1", "pg2", "pg3", "pg4", "pg5", "pg6", "pg7"] {
        let cpu = if g == "pg3" || g == "pg7" { 200_000 } else { 1000 };
        batch.extend(pods(g, 3, cpu));
    }
    let (d, outcomes) = run(nodes, groups, composites, &batch);
    let mut want: Vec<String> = Vec::new();
    for g in ["pg1", "pg2", "pg4", "pg5"] {
        want.extend((0..3).map(|i| format!("{g}-pod-{i}")));
    }
    assert_eq!(placed(&batch, &d), want);
    for g in ["pg1", "pg2", "pg4", "pg5"] {
        assert_eq!(outcome(&outcomes, g).reason, GroupReason::Scheduled, "{g}");
    }
    for g in ["pg3", "pg6", "pg7"] {
        assert_eq!(outcome(&outcomes, g).reason, GroupReason::Unschedulable, "{g}");
    }
    // pg6 fitted, but its parent failed: it carries cpg-sub3's status (a composite without a
    // key has one placement, its parent's nodes, and kube reports it as one).
    assert_eq!(
        outcome(&outcomes, "pg6").message,
        "pod group is unschedulable, 0/1 placements are available, first placement status: minCount (2) cannot be satisfied: 1 scheduled, 0 remaining"
    );
}

#[test]
fn min_group_count_admits_the_groups_that_fit() {
    // kube's TestCPGMinGroupCount_Internal: cpg-root (gang 2) over pg1, pg2, pg3 (gang 3 each) on
    // one 20-cpu node; pg3's pods ask 100 cpu. pg1 and pg2 are placed, pg3 is not.
    let nodes = vec![node("node1", None, None, 20_000)];
    let groups = vec![
        pg("pg1", 3, "cpg-root", None),
        pg("pg2", 3, "cpg-root", None),
        pg("pg3", 3, "cpg-root", None),
    ];
    let mut batch = pods("pg1", 3, 1000);
    batch.extend(pods("pg2", 3, 1000));
    batch.extend(pods("pg3", 3, 100_000));
    let (d, outcomes) = run(nodes, groups, vec![cpg("cpg-root", 2, None, None)], &batch);
    assert_eq!(placed(&batch, &d).len(), 6);
    assert!(placed(&batch, &d).iter().all(|n| !n.starts_with("pg3")));
    assert_eq!(outcome(&outcomes, "pg3").reason, GroupReason::Unschedulable);
    assert_eq!(outcome(&outcomes, "pg1").reason, GroupReason::Scheduled);
}

#[test]
fn a_gang_composite_short_of_min_group_count_places_nothing() {
    // The same with minGroupCount 3: the root fails, and its status goes down to pg1 and pg2,
    // which fitted.
    let nodes = vec![node("node1", None, None, 20_000)];
    let groups = vec![
        pg("pg1", 3, "cpg-root", None),
        pg("pg2", 3, "cpg-root", None),
        pg("pg3", 3, "cpg-root", None),
    ];
    let mut batch = pods("pg1", 3, 1000);
    batch.extend(pods("pg2", 3, 1000));
    batch.extend(pods("pg3", 3, 100_000));
    let (d, outcomes) = run(nodes, groups, vec![cpg("cpg-root", 3, None, None)], &batch);
    assert!(placed(&batch, &d).is_empty());
    let root = "pod group is unschedulable, 0/1 placements are available, first placement status: minCount (3) cannot be satisfied: 2 scheduled, 0 remaining";
    // The PostFilter's status (no pod of lower priority anywhere) is appended to the root's status
    // object once per result holding it: the root's, pg1's and pg2's.
    let no_victims = ", pod group preemption: No preemption victims found for incoming preemptor";
    let condition = format!("{root}{}", no_victims.repeat(3));
    assert_eq!(outcome(&outcomes, "pg1").message, condition);
    assert_eq!(outcome(&outcomes, "pg2").message, condition);
    // pg3 keeps its own: its one placement could not take a pod.
    assert_eq!(
        outcome(&outcomes, "pg3").message,
        format!("pod group is unschedulable, 0/1 placements are available, first placement status: minCount (3) cannot be satisfied: 0 scheduled, 2 remaining{no_victims}")
    );
    // pg1's pods were given the status before the PostFilter.
    let Decision::Unschedulable(diag) = &d[0] else {
        panic!("pg1-pod-0 placed");
    };
    assert_eq!(diag.message(), root);
}

#[test]
fn basic_composite_places_each_gang_that_fits() {
    // kube's TestCPGBasicWithGangChildren_Internal: a basic root over two gangs, one of which
    // cannot fit: the other is placed.
    let nodes = vec![node("node1", None, None, 10_000)];
    let groups = vec![pg("pg1", 2, "cpg-root", None), pg("pg2", 2, "cpg-root", None)];
    let mut batch = pods("pg1", 2, 1000);
    batch.extend(pods("pg2", 2, 50_000));
    let (d, outcomes) = run(nodes, groups, vec![cpg("cpg-root", 0, None, None)], &batch);
    assert_eq!(placed(&batch, &d), vec!["pg1-pod-0", "pg1-pod-1"]);
    assert_eq!(outcome(&outcomes, "pg1").reason, GroupReason::Scheduled);
    assert_eq!(outcome(&outcomes, "pg2").reason, GroupReason::Unschedulable);
}

/// Two blocks of two racks of two nodes: block x (racks x1, x2) and block y (y1, y2).
fn blocks(cpu: [i64; 8]) -> Vec<NodeSpec> {
    let racks = ["x1", "x1", "x2", "x2", "y1", "y1", "y2", "y2"];
    (0..8)
        .map(|i| {
            let rack = racks[i];
            node(&format!("n{i}"), Some(&rack[..1]), Some(rack), cpu[i])
        })
        .collect()
}

/// A block-keyed root over two rack-keyed gangs of `size` pods of `cpu` each.
fn two_level(size: usize, cpu: i64) -> (Vec<PodGroup>, Vec<CompositePodGroup>, Vec<PodSpec>) {
    let groups = vec![
        pg("rack-a", size as u32, "job", Some("rack")),
        pg("rack-b", size as u32, "job", Some("rack")),
    ];
    let composites = vec![cpg("job", 2, None, Some("block"))];
    let mut batch = pods("rack-a", size, cpu);
    batch.extend(pods("rack-b", size, cpu));
    (groups, composites, batch)
}

fn block_of(node: &str) -> &'static str {
    match node {
        "n0" | "n1" | "n2" | "n3" => "x",
        _ => "y",
    }
}

fn rack_of(node: &str) -> &'static str {
    match node {
        "n0" | "n1" => "x1",
        "n2" | "n3" => "x2",
        "n4" | "n5" => "y1",
        _ => "y2",
    }
}

#[test]
fn two_levels_put_the_whole_job_in_one_block_and_each_gang_in_one_rack() {
    // Block y's nodes are fuller (smaller): MostAllocated over the block prefers it, and inside it
    // each gang takes a rack of its own (the first gang's pods are assumed for the second).
    let (groups, composites, batch) = two_level(4, 1000);
    let (d, outcomes) = run(
        blocks([8000, 8000, 8000, 8000, 2000, 2000, 2000, 2000]),
        groups,
        composites,
        &batch,
    );
    assert_eq!(placed(&batch, &d).len(), 8);
    let nodes: Vec<&str> = d.iter().filter_map(node_of).collect();
    assert!(nodes.iter().all(|n| block_of(n) == "y"), "{nodes:?}");
    let racks_a: std::collections::BTreeSet<&str> = nodes[..4].iter().map(|n| rack_of(n)).collect();
    let racks_b: std::collections::BTreeSet<&str> = nodes[4..].iter().map(|n| rack_of(n)).collect();
    assert_eq!(racks_a.len(), 1);
    assert_eq!(racks_b.len(), 1);
    assert_ne!(racks_a, racks_b);
    let a = outcome(&outcomes, "rack-a");
    assert_eq!(a.reason, GroupReason::Scheduled);
    assert_eq!(a.domain.as_deref(), Some(*racks_a.iter().next().expect("rack")));
    assert_eq!(a.levels.len(), 1);
    assert_eq!(&*a.levels[0].composite, "job");
    assert_eq!(a.levels[0].topology_key.as_deref(), Some("block"));
    assert_eq!(a.levels[0].domain.as_deref(), Some("y"));
}

#[test]
fn a_block_that_cannot_hold_both_gangs_is_passed_over() {
    // Block y is fuller but one of its racks is too small for a gang: only block x holds both.
    let (groups, composites, batch) = two_level(4, 1000);
    let (d, outcomes) = run(
        blocks([8000, 8000, 8000, 8000, 2000, 2000, 1000, 1000]),
        groups,
        composites,
        &batch,
    );
    let nodes: Vec<&str> = d.iter().filter_map(node_of).collect();
    assert_eq!(nodes.len(), 8);
    assert!(nodes.iter().all(|n| block_of(n) == "x"), "{nodes:?}");
    assert_eq!(outcome(&outcomes, "rack-b").levels[0].domain.as_deref(), Some("x"));
}

#[test]
fn no_block_holds_the_job_and_nothing_is_placed() {
    // Each block has one rack big enough for a gang: no block holds both gangs.
    let (groups, composites, batch) = two_level(4, 1000);
    let (d, outcomes) = run(
        blocks([2000, 2000, 1000, 1000, 2000, 2000, 1000, 1000]),
        groups,
        composites,
        &batch,
    );
    assert!(d.iter().all(|d| node_of(d).is_none()));
    // The root's status goes down to the gang that fitted in the first block (x); the other keeps
    // its own (no rack of x left for it).
    // As kube-scheduler 1.37.2 wrote it on the control plane for the same shape (the e2e test's
    // second job): the PostFilter's status twice, for the root's result and rack-a's.
    let root = "pod group is unschedulable, 0/2 placements are available, first placement status: minCount (2) cannot be satisfied: 1 scheduled, 0 remaining, pod group preemption: No preemption victims found for incoming preemptor, pod group preemption: No preemption victims found for incoming preemptor";
    assert_eq!(outcome(&outcomes, "rack-a").message, root);
    assert_eq!(outcome(&outcomes, "rack-a").reason, GroupReason::Unschedulable);
    assert!(outcome(&outcomes, "rack-b")
        .message
        .starts_with("pod group is unschedulable, 0/2 placements are available, first placement status:"));
}

#[test]
fn without_the_gate_the_parent_is_not_read() {
    // The same job with CompositePodGroup off: each gang is its own PodGroup cycle, each taking
    // the fullest rack that holds it, in different blocks.
    let (groups, composites, batch) = two_level(4, 1000);
    let gates = FeatureGates {
        composite_pod_group: false,
        ..CPG
    };
    let (d, outcomes) = run_with(
        gates,
        blocks([8000, 8000, 8000, 8000, 2000, 2000, 1000, 1000]),
        Vec::new(),
        groups,
        composites,
        &batch,
    );
    let nodes: Vec<&str> = d.iter().filter_map(node_of).collect();
    assert_eq!(nodes.len(), 8);
    assert!(outcomes.iter().all(|o| o.levels.is_empty()));
    // rack-a takes y1 (the fullest rack holding it): with the hierarchy it would be in block x.
    assert!(nodes[..4].iter().all(|n| rack_of(n) == "y1"), "{nodes:?}");
}

#[test]
fn a_bound_member_fixes_the_block() {
    // A pod of rack-a is bound in block x: the job's block is x although y is fuller.
    let (groups, composites, batch) = two_level(3, 1000);
    let mut bound = pod("rack-a-pod-9", 1000, "rack-a");
    bound.node_name = Some("n0".into());
    let (d, outcomes) = run_with(
        CPG,
        blocks([8000, 8000, 8000, 8000, 2000, 2000, 2000, 2000]),
        vec![bound],
        groups,
        composites,
        &batch,
    );
    let nodes: Vec<&str> = d.iter().filter_map(node_of).collect();
    assert_eq!(nodes.len(), 6);
    assert!(nodes.iter().all(|n| block_of(n) == "x"), "{nodes:?}");
    assert!(nodes[..3].iter().all(|n| rack_of(n) == "x1"), "{nodes:?}");
    assert_eq!(outcome(&outcomes, "rack-a").levels[0].domain.as_deref(), Some("x"));
}

#[test]
fn a_missing_composite_holds_the_pods_without_an_outcome() {
    let groups = vec![pg("rack-a", 2, "gone", Some("rack"))];
    let batch = pods("rack-a", 2, 1000);
    let (d, outcomes) = run(blocks([8000; 8]), groups, Vec::new(), &batch);
    assert!(outcomes.is_empty());
    let Decision::Unschedulable(diag) = &d[0] else {
        panic!("placed");
    };
    assert!(
        diag.message().contains("composite pod group object not found"),
        "{}",
        diag.message()
    );
}

#[test]
fn members_with_another_priority_than_the_root_are_a_scheduler_error() {
    let (groups, mut composites, batch) = two_level(2, 1000);
    composites[0].priority = 10;
    let (d, outcomes) = run(blocks([8000; 8]), groups, composites, &batch);
    assert!(d.iter().all(|d| node_of(d).is_none()));
    let o = outcome(&outcomes, "rack-a");
    assert_eq!(o.reason, GroupReason::SchedulerError);
    assert_eq!(
        o.message,
        "all pods in a single pod group should have the same priority as the pod group's priority, got 0 and 10"
    );
}

fn explain_run(
    nodes: Vec<NodeSpec>,
    groups: Vec<PodGroup>,
    composites: Vec<CompositePodGroup>,
    key: &str,
    batch: &[PodSpec],
) -> crate::engine::podgroup::GroupExplanation {
    let snap = Snapshot::build(nodes, Vec::new())
        .and_then(|s| s.with_pod_groups(groups))
        .and_then(|s| s.with_composite_pod_groups(composites))
        .expect("snapshot");
    let profile = Profile::new(Policy::kube_default()).with_gates(CPG);
    crate::engine::podgroup::explain(&profile, &snap, None, key, batch, 7, Deadline::none()).expect("explain")
}

#[test]
fn explain_tells_the_block_taken_and_the_racks_inside_it() {
    let (groups, composites, batch) = two_level(4, 1000);
    let e = explain_run(
        blocks([8000, 8000, 8000, 8000, 2000, 2000, 2000, 2000]),
        groups,
        composites,
        "default/rack-a",
        &batch,
    );
    assert_eq!(e.levels.len(), 1);
    let root = &e.levels[0];
    assert_eq!(
        (&*root.composite, root.chosen.as_deref(), root.members),
        ("job", Some("y"), 8)
    );
    let fits: Vec<(Option<&str>, usize)> = root.domains.iter().map(|d| (d.domain.as_deref(), d.fit)).collect();
    assert_eq!(fits, vec![(Some("x"), 8), (Some("y"), 8)]);
    // rack-a's own placements: the racks of block y only, each holding its four pods.
    let mut racks: Vec<(Option<&str>, usize)> = e.placements.iter().map(|p| (p.domain.as_deref(), p.fit)).collect();
    racks.sort();
    assert_eq!(racks, vec![(Some("y1"), 4), (Some("y2"), 4)]);
}

#[test]
fn explain_counts_per_block_how_many_pods_fit_a_job_that_fits_nowhere() {
    let (groups, composites, batch) = two_level(4, 1000);
    let e = explain_run(
        blocks([2000, 2000, 1000, 1000, 2000, 2000, 1000, 1000]),
        groups,
        composites,
        "default/rack-b",
        &batch,
    );
    assert!(e
        .outcome
        .as_ref()
        .is_some_and(|o| o.reason == GroupReason::Unschedulable));
    let root = &e.levels[0];
    assert_eq!(root.chosen, None);
    let fits: Vec<(Option<&str>, usize, usize)> = root
        .domains
        .iter()
        .map(|d| (d.domain.as_deref(), d.fit, d.members))
        .collect();
    assert_eq!(fits, vec![(Some("x"), 6, 8), (Some("y"), 6, 8)]);
    // Looked into x (a tie: the first by name): rack-b's four pods fit x1, two fit x2.
    let mut racks: Vec<(Option<&str>, usize)> = e.placements.iter().map(|p| (p.domain.as_deref(), p.fit)).collect();
    racks.sort();
    assert_eq!(racks, vec![(Some("x1"), 4), (Some("x2"), 2)]);
}

#[test]
fn a_hierarchy_that_may_not_preempt_says_so() {
    let (groups, composites, mut batch) = two_level(4, 1000);
    for p in &mut batch {
        p.preemption_policy = PreemptionPolicy::Never;
    }
    let (_, outcomes) = run(
        blocks([2000, 2000, 1000, 1000, 2000, 2000, 1000, 1000]),
        groups,
        composites,
        &batch,
    );
    assert!(outcome(&outcomes, "rack-a")
        .message
        .ends_with("1 scheduled, 0 remaining, pod group preemption: not eligible due to preemptionPolicy=Never., pod group preemption: not eligible due to preemptionPolicy=Never."));
}

#[test]
fn with_lower_priority_pods_a_hierarchy_that_still_fits_nowhere_gives_that_cycles_status() {
    // A 1-cpu pod of priority -1 on n0: without it block x still holds one gang only.
    let (groups, composites, batch) = two_level(4, 1000);
    let mut low = pod("low", 1000, "none");
    low.pod_group = None;
    low.priority = -1;
    low.node_name = Some("n0".into());
    let (_, outcomes) = run_with(
        CPG,
        blocks([3000, 2000, 1000, 1000, 2000, 2000, 1000, 1000]),
        vec![low],
        groups,
        composites,
        &batch,
    );
    let m = &outcome(&outcomes, "rack-a").message;
    assert!(
        m.ends_with(", pod group preemption: pod group is unschedulable, 0/2 placements are available, first placement status: minCount (2) cannot be satisfied: 1 scheduled, 0 remaining, pod group preemption: pod group is unschedulable, 0/2 placements are available, first placement status: minCount (2) cannot be satisfied: 1 scheduled, 0 remaining"),
        "{m}"
    );
}
