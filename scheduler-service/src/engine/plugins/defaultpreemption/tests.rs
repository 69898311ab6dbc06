//! DefaultPreemption against kube-scheduler's own cases: `TestPickOneNodeForPreemption` and
//! `TestPreempt` (`pkg/scheduler/framework/plugins/defaultpreemption/default_preemption_test.go`:
//! nodes of 500m cpu and 5 × 200 MB, small/medium/large/very large containers of 1/2/3/5 × (100m,
//! 200 MB), priorities neg −100, low 0, mid 100, high 1000, very high 10000), plus the
//! PodDisruptionBudget rules of `filterPodsWithPDBViolation` and kube-scheduler's messages.

use std::sync::Arc;

use super::*;
use crate::engine::framework::{Deadline, Decision, Evaluator};
use crate::engine::model::{NodeSpec, PodSpec, Requirement, SelectorOp, Taint, TaintEffect};
use crate::engine::policy::Policy;
use crate::engine::resources::Resources;

const MB: i64 = 200 * 1024 * 1024;
const NEG: i32 = -100;
const LOW: i32 = 0;
const MID: i32 = 100;
const HIGH: i32 = 1000;
const VERY_HIGH: i32 = 10000;

/// Sizes in units of (100m, 200 MB): small 1, medium 2, large 3, very large 5.
const SMALL: i64 = 1;
const MEDIUM: i64 = 2;
const LARGE: i64 = 3;
const VERY_LARGE: i64 = 5;

fn machine(name: &str) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        allocatable: Resources {
            milli_cpu: 500,
            memory: 5 * MB,
            ..Default::default()
        },
        allowed_pods: 110,
        ..Default::default()
    }
}

fn sized(uid: &str, size: i64, priority: i32) -> PodSpec {
    let requests = Resources {
        milli_cpu: 100 * size,
        memory: MB * size,
        ..Default::default()
    };
    PodSpec {
        uid: Arc::from(uid),
        namespace: "default".into(),
        name: uid.into(),
        priority,
        non_zero_requests: requests.clone(),
        requests,
        ..Default::default()
    }
}

/// A bound pod; `start` is its start time in seconds.
fn on(node: &str, uid: &str, size: i64, priority: i32, start: i64) -> PodSpec {
    PodSpec {
        node_name: Some(node.into()),
        start_time: start,
        ..sized(uid, size, priority)
    }
}

const T: i64 = 1_546_300_800; // 2019-01-01, the tests' startTime
const DAY: i64 = 86_400;

fn decide(nodes: Vec<NodeSpec>, bound: Vec<PodSpec>, pdbs: Vec<Pdb>, batch: &[PodSpec]) -> Vec<Decision> {
    let snap = Snapshot::build(nodes, bound).unwrap().with_pdbs(pdbs).unwrap();
    let profile = Profile::new(Policy::kube_default());
    Evaluator::new(&profile, &snap)
        .schedule(batch, 0, Deadline::none())
        .unwrap()
}

/// The nominated node and victims of a single preemptor.
fn nominate(nodes: Vec<NodeSpec>, bound: Vec<PodSpec>, pdbs: Vec<Pdb>, pod: PodSpec) -> (String, Vec<String>) {
    match decide(nodes, bound, pdbs, &[pod]).remove(0) {
        Decision::Unschedulable(d) => {
            let n = d
                .nomination
                .clone()
                .unwrap_or_else(|| panic!("no nomination: {}", d.message()));
            (n.node, n.victims.iter().map(|v| v.to_string()).collect())
        }
        other => panic!("expected a nomination, got {other:?}"),
    }
}

fn machines(n: usize) -> Vec<NodeSpec> {
    (1..=n).map(|i| machine(&format!("machine{i}"))).collect()
}

#[test]
fn a_pod_that_fits_somewhere_preempts_nobody() {
    // "No node needs preemption" and "a pod that fits on a machine with no preemption".
    let d = decide(
        machines(1),
        vec![on("machine1", "m1.1", SMALL, MID, T)],
        vec![],
        &[sized("p", LARGE, HIGH)],
    );
    assert!(matches!(&d[0], Decision::Node { node, .. } if node == "machine1"));
    let d = decide(
        machines(3),
        vec![
            on("machine1", "m1.1", LARGE, MID, T),
            on("machine2", "m2.1", LARGE, MID, T),
        ],
        vec![],
        &[sized("p", LARGE, HIGH)],
    );
    assert!(matches!(&d[0], Decision::Node { node, .. } if node == "machine3"));
}

#[test]
fn basic_preemption_evicts_the_lower_priority_pods() {
    // TestPreempt "basic preemption logic".
    let (node, victims) = nominate(
        machines(3),
        vec![
            on("machine1", "m1.1", SMALL, LOW, T),
            on("machine1", "m1.2", SMALL, LOW, T),
            on("machine2", "m2.1", LARGE, HIGH, T),
            on("machine3", "m3.1", MEDIUM, MID, T),
        ],
        vec![],
        sized("pod1", VERY_LARGE, HIGH),
    );
    assert_eq!(node, "machine1");
    assert_eq!(victims, ["m1.1", "m1.2"]);
}

#[test]
fn equal_candidates_pick_the_first_node() {
    // "a pod that fits on both machines when lower priority pods are preempted".
    let (node, victims) = nominate(
        machines(2),
        vec![
            on("machine1", "m1.1", LARGE, MID, T),
            on("machine2", "m2.1", LARGE, MID, T),
        ],
        vec![],
        sized("p", LARGE, HIGH),
    );
    assert_eq!(
        (node.as_str(), victims.as_slice()),
        ("machine1", &["m1.1".to_string()][..])
    );
}

#[test]
fn the_node_with_the_lowest_highest_victim_priority_is_picked() {
    // "machine with min highest priority pod is picked".
    let (node, _) = nominate(
        machines(3),
        vec![
            on("machine1", "m1.1", MEDIUM, MID, T),
            on("machine1", "m1.2", LARGE, MID, T),
            on("machine2", "m2.1", MEDIUM, MID, T),
            on("machine2", "m2.2", MEDIUM, LOW, T),
            on("machine3", "m3.1", MEDIUM, LOW, T),
            on("machine3", "m3.2", MEDIUM, LOW, T),
        ],
        vec![],
        sized("p", VERY_LARGE, HIGH),
    );
    assert_eq!(node, "machine3");
}

#[test]
fn then_the_smallest_sum_of_priorities() {
    // "when highest priorities are the same, minimum sum of priorities is picked".
    let (node, _) = nominate(
        machines(3),
        vec![
            on("machine1", "m1.1", MEDIUM, MID, T),
            on("machine1", "m1.2", LARGE, MID, T),
            on("machine2", "m2.1", LARGE, MID, T),
            on("machine2", "m2.2", MEDIUM, LOW, T),
            on("machine3", "m3.1", MEDIUM, MID, T),
            on("machine3", "m3.2", MEDIUM, MID, T),
        ],
        vec![],
        sized("p", VERY_LARGE, HIGH),
    );
    assert_eq!(node, "machine2");
}

#[test]
fn sums_use_priorities_shifted_to_be_non_negative() {
    // "when highest priority and sum are the same, minimum number of pods is picked" and
    // "sum of adjusted priorities is considered": without the shift, machine1's negative
    // priorities would win.
    let (node, _) = nominate(
        machines(3),
        vec![
            on("machine1", "m1.1", SMALL, MID, T),
            on("machine1", "m1.2", SMALL, NEG, T),
            on("machine1", "m1.3", SMALL, MID, T),
            on("machine1", "m1.4", SMALL, NEG, T),
            on("machine2", "m2.1", LARGE, MID, T),
            on("machine2", "m2.2", MEDIUM, NEG, T),
            on("machine3", "m3.1", MEDIUM, MID, T),
            on("machine3", "m3.2", SMALL, NEG, T),
            on("machine3", "m3.3", SMALL, LOW, T),
        ],
        vec![],
        sized("p", VERY_LARGE, HIGH),
    );
    assert_eq!(node, "machine2");
    let (node, _) = nominate(
        machines(3),
        vec![
            on("machine1", "m1.1", SMALL, MID, T),
            on("machine1", "m1.2", SMALL, NEG, T),
            on("machine1", "m1.3", SMALL, NEG, T),
            on("machine2", "m2.1", LARGE, MID, T),
            on("machine2", "m2.2", MEDIUM, NEG, T),
            on("machine3", "m3.1", MEDIUM, MID, T),
            on("machine3", "m3.2", SMALL, NEG, T),
            on("machine3", "m3.3", SMALL, LOW, T),
        ],
        vec![],
        sized("p", VERY_LARGE, HIGH),
    );
    assert_eq!(node, "machine2");
}

#[test]
fn non_overlapping_rules_apply_in_order() {
    // "non-overlapping lowest high priority, sum priorities, and number of pods".
    let (node, _) = nominate(
        machines(4),
        vec![
            on("machine1", "m1.1", SMALL, MID, T),
            on("machine1", "m1.2", SMALL, LOW, T),
            on("machine1", "m1.3", SMALL, LOW, T),
            on("machine2", "m2.1", LARGE, HIGH, T),
            on("machine3", "m3.1", MEDIUM, MID, T),
            on("machine3", "m3.2", SMALL, LOW, T),
            on("machine3", "m3.3", SMALL, LOW, T),
            on("machine3", "m3.4", MEDIUM, LOW, T),
            on("machine4", "m4.1", MEDIUM, MID, T),
            on("machine4", "m4.2", SMALL, MID, T),
            on("machine4", "m4.3", SMALL, MID, T),
            on("machine4", "m4.4", SMALL, NEG, T),
        ],
        vec![],
        sized("pod1", VERY_LARGE, VERY_HIGH),
    );
    assert_eq!(node, "machine1");
}

#[test]
fn then_the_latest_start_of_the_highest_priority_victims() {
    // "same priority, same number of victims, different start time for each machine's pod".
    let (node, _) = nominate(
        machines(3),
        vec![
            on("machine1", "m1.1", MEDIUM, MID, T + 2 * DAY),
            on("machine1", "m1.2", MEDIUM, MID, T + 2 * DAY),
            on("machine2", "m2.1", MEDIUM, MID, T + 3 * DAY),
            on("machine2", "m2.2", MEDIUM, MID, T + 3 * DAY),
            on("machine3", "m3.1", MEDIUM, MID, T + DAY),
            on("machine3", "m3.2", MEDIUM, MID, T + DAY),
        ],
        vec![],
        sized("p", VERY_LARGE, HIGH),
    );
    assert_eq!(node, "machine2");
    // "same priority, same number of victims, different start time for all pods": the earliest
    // start on each node counts.
    let (node, _) = nominate(
        machines(3),
        vec![
            on("machine1", "m1.1", MEDIUM, MID, T + 4 * DAY),
            on("machine1", "m1.2", MEDIUM, MID, T + 2 * DAY),
            on("machine2", "m2.1", MEDIUM, MID, T + 5 * DAY),
            on("machine2", "m2.2", MEDIUM, MID, T + DAY),
            on("machine3", "m3.1", MEDIUM, MID, T + 3 * DAY),
            on("machine3", "m3.2", MEDIUM, MID, T + 6 * DAY),
        ],
        vec![],
        sized("p", VERY_LARGE, HIGH),
    );
    assert_eq!(node, "machine3");
    // "different priority, same number of victims, different start time for all pods": only the
    // highest-priority victims' start times count.
    let (node, _) = nominate(
        machines(3),
        vec![
            on("machine1", "m1.1", MEDIUM, LOW, T + 4 * DAY),
            on("machine1", "m1.2", MEDIUM, MID, T + 2 * DAY),
            on("machine2", "m2.1", MEDIUM, MID, T + 6 * DAY),
            on("machine2", "m2.2", MEDIUM, LOW, T + DAY),
            on("machine3", "m3.1", MEDIUM, LOW, T + 3 * DAY),
            on("machine3", "m3.2", MEDIUM, MID, T + 5 * DAY),
        ],
        vec![],
        sized("p", VERY_LARGE, HIGH),
    );
    assert_eq!(node, "machine2");
}

#[test]
fn as_few_victims_as_possible_most_important_reprieved_first() {
    // machine1 holds four small pods; a medium pod needs two of them gone. The two most important
    // (higher priority, then earlier start) are reprieved and the other two are the victims,
    // most important first.
    let (node, victims) = nominate(
        machines(1),
        vec![
            on("machine1", "a", SMALL, LOW, T + DAY),
            on("machine1", "b", SMALL, MID, T),
            on("machine1", "c", SMALL, LOW, T),
            on("machine1", "d", SMALL, LOW, T + 2 * DAY),
            on("machine1", "e", SMALL, MID, T + DAY),
        ],
        vec![],
        sized("p", MEDIUM, HIGH),
    );
    assert_eq!(node, "machine1");
    assert_eq!(victims, ["a", "d"]);
}

fn labelled(mut p: PodSpec, app: &str) -> PodSpec {
    p.labels.insert("app".into(), app.into());
    p
}

fn pdb(namespace: &str, app: &str, allowed: i32) -> Pdb {
    Pdb {
        namespace: namespace.into(),
        name: format!("pdb-{app}"),
        selector: Some(LabelSelector {
            match_labels: vec![("app".into(), app.into())],
            match_expressions: vec![],
        }),
        disruptions_allowed: allowed,
        disrupted_pod_uids: vec![],
    }
}

#[test]
fn pdb_violating_pods_are_reprieved_first() {
    // "b" is more important (earlier start) and would be reprieved first; its PDB-violating
    // neighbour "a" is tried first instead, so "b" is the victim and no budget is broken.
    let bound = vec![
        labelled(on("machine1", "a", MEDIUM, LOW, T + DAY), "db"),
        labelled(on("machine1", "b", MEDIUM, LOW, T), "web"),
    ];
    let (_, victims) = nominate(machines(1), bound.clone(), vec![], sized("p", MEDIUM + 1, HIGH));
    assert_eq!(victims, ["a"], "without a budget the least important goes");
    let (_, victims) = nominate(
        machines(1),
        bound,
        vec![pdb("default", "db", 0)],
        sized("p", MEDIUM + 1, HIGH),
    );
    assert_eq!(victims, ["b"], "the budget protects a");
}

#[test]
fn a_node_without_pdb_violations_wins_over_lower_priority_victims() {
    let bound = vec![
        labelled(on("machine1", "x", VERY_LARGE, LOW, T), "db"),
        on("machine2", "y", VERY_LARGE, MID, T),
    ];
    let (node, victims) = nominate(
        machines(2),
        bound.clone(),
        vec![pdb("default", "db", 0)],
        sized("p", VERY_LARGE, HIGH),
    );
    assert_eq!(
        (node.as_str(), victims.as_slice()),
        ("machine2", &["y".to_string()][..])
    );
    // A budget that allows the disruption, or one in another namespace, does not count.
    let (node, _) = nominate(
        machines(2),
        bound.clone(),
        vec![pdb("default", "db", 1)],
        sized("p", VERY_LARGE, HIGH),
    );
    assert_eq!(node, "machine1");
    let (node, _) = nominate(
        machines(2),
        bound,
        vec![pdb("other", "db", 0)],
        sized("p", VERY_LARGE, HIGH),
    );
    assert_eq!(node, "machine1");
}

#[test]
fn a_pdb_is_violated_when_nothing_else_makes_room() {
    // Each eviction uses one allowed disruption: with one allowed, the second covered victim
    // violates the budget, and preemption still proceeds.
    let bound = vec![
        labelled(on("machine1", "a", MEDIUM, LOW, T), "db"),
        labelled(on("machine1", "b", MEDIUM, LOW, T + DAY), "db"),
    ];
    let (node, victims) = nominate(
        machines(1),
        bound,
        vec![pdb("default", "db", 1)],
        sized("p", VERY_LARGE, HIGH),
    );
    assert_eq!(node, "machine1");
    assert_eq!(victims, ["a", "b"]);
}

#[test]
fn a_pod_in_disrupted_pods_uses_no_budget_and_violates_nothing() {
    // The API server already admitted a's eviction and counted it (disruptionsAllowed 0 now), so
    // a is no violation; without disruptedPods it is, and the node with an unprotected victim wins.
    let bound = vec![
        labelled(on("machine1", "a", VERY_LARGE, LOW, T), "db"),
        on("machine2", "b", VERY_LARGE, MID, T),
    ];
    let (node, _) = nominate(
        machines(2),
        bound.clone(),
        vec![pdb("default", "db", 0)],
        sized("p", VERY_LARGE, HIGH),
    );
    assert_eq!(node, "machine2", "a is protected");
    let disrupted = Pdb {
        disrupted_pod_uids: vec!["a".into()],
        ..pdb("default", "db", 0)
    };
    let (node, victims) = nominate(machines(2), bound, vec![disrupted], sized("p", VERY_LARGE, HIGH));
    assert_eq!(
        (node.as_str(), victims.as_slice()),
        ("machine1", &["a".to_string()][..]),
        "a is already disrupted: no violation, and a lower priority than b"
    );
}

#[test]
fn a_disrupted_pod_does_not_use_the_budget_of_its_neighbours() {
    // Two covered victims on one node, one allowed disruption: a is already in disruptedPods, so b
    // takes the one disruption left and nothing is violated (kube-scheduler does not decrement
    // for a disrupted pod). Without disruptedPods, b would be the violating one.
    let bound = vec![
        labelled(on("machine1", "a", MEDIUM, LOW, T), "db"),
        labelled(on("machine1", "b", MEDIUM, LOW, T + DAY), "db"),
        on("machine2", "c", VERY_LARGE, MID, T),
    ];
    let (node, _) = nominate(
        machines(2),
        bound.clone(),
        vec![pdb("default", "db", 1)],
        sized("p", VERY_LARGE, HIGH),
    );
    assert_eq!(node, "machine2", "machine1 would violate the budget with b");
    let disrupted = Pdb {
        disrupted_pod_uids: vec!["a".into()],
        ..pdb("default", "db", 1)
    };
    let (node, victims) = nominate(machines(2), bound, vec![disrupted], sized("p", VERY_LARGE, HIGH));
    assert_eq!(node, "machine1");
    assert_eq!(victims, ["a", "b"]);
}

#[test]
fn an_empty_pdb_selector_matches_no_pod() {
    let p = Pdb {
        selector: Some(LabelSelector::default()),
        ..pdb("default", "db", 0)
    };
    assert!(!p.covers(
        "default",
        &[("app".to_string(), "db".to_string())].into_iter().collect()
    ));
    let p = Pdb {
        selector: Some(LabelSelector {
            match_labels: vec![],
            match_expressions: vec![Requirement {
                key: "app".into(),
                op: SelectorOp::In(vec!["db".into()]),
            }],
        }),
        ..pdb("default", "db", 0)
    };
    assert!(p.covers(
        "default",
        &[("app".to_string(), "db".to_string())].into_iter().collect()
    ));
    assert!(
        !p.covers("default", &Default::default()),
        "a pod without labels matches no budget"
    );
}

fn message(d: &Decision) -> String {
    match d {
        Decision::Unschedulable(d) => {
            assert!(d.nomination.is_none(), "unexpected nomination {:?}", d.nomination);
            d.message()
        }
        other => panic!("expected unschedulable, got {other:?}"),
    }
}

#[test]
fn a_profile_without_default_preemption_nominates_nobody() {
    // kube's `schedulingCycle` with no PostFilter plugin: the FitError alone, no preemption.
    let snap = Snapshot::build(machines(1), vec![on("machine1", "low", SMALL, LOW, T)]).unwrap();
    let profile = Profile::new(Policy {
        default_preemption: false,
        ..Policy::kube_default()
    });
    let d = Evaluator::new(&profile, &snap)
        .schedule(&[sized("p", VERY_LARGE, HIGH)], 0, Deadline::none())
        .unwrap();
    assert_eq!(
        message(&d[0]),
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."
    );
    // The same pod preempts under kube's default profile.
    let (node, victims) = nominate(
        machines(1),
        vec![on("machine1", "low", SMALL, LOW, T)],
        vec![],
        sized("p", VERY_LARGE, HIGH),
    );
    assert_eq!((node.as_str(), victims), ("machine1", vec!["low".to_string()]));
}

#[test]
fn preemption_policy_never_is_not_eligible() {
    let mut p = sized("p", VERY_LARGE, HIGH);
    p.preemption_policy = PreemptionPolicy::Never;
    let d = decide(machines(1), vec![on("machine1", "low", SMALL, LOW, T)], vec![], &[p]);
    assert_eq!(
        message(&d[0]),
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory. \
         preemption: not eligible due to preemptionPolicy=Never."
    );
}

#[test]
fn messages_name_why_preemption_cannot_help() {
    let mut tainted = machine("machine1");
    tainted.taints.push(Taint {
        key: "dedicated".into(),
        value: "x".into(),
        effect: TaintEffect::NoSchedule,
    });
    let mut tiny = machine("machine4");
    tiny.allocatable.milli_cpu = 200;
    let nodes = vec![tainted, machine("machine2"), machine("machine3"), tiny];
    let bound = vec![
        // machine2: only pods of higher priority.
        on("machine2", "top", LARGE, VERY_HIGH, T),
        // machine3: evicting the low pod is not enough next to the very-high one.
        on("machine3", "top3", MEDIUM, VERY_HIGH, T),
        on("machine3", "low3", SMALL, LOW, T),
    ];
    let d = decide(nodes, bound, vec![], &[sized("p", 4, HIGH)]);
    assert_eq!(
        message(&d[0]),
        "0/4 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient memory, \
         3 Insufficient cpu. preemption: 0/4 nodes are available: \
         1 Insufficient cpu, 1 Insufficient memory, 1 No preemption victims found for incoming pod, \
         2 Preemption is not helpful for scheduling."
    );
}

#[test]
fn victims_claimed_in_a_batch_are_not_room_for_another_pod() {
    // One low pod fills machine1; two preemptors want it. The first is nominated; the second
    // cannot count the same room, and a later lower-priority pod cannot take the nominated room.
    let bound = vec![on("machine1", "low", VERY_LARGE, LOW, T)];
    let batch = [
        sized("first", VERY_LARGE, HIGH),
        sized("second", VERY_LARGE, HIGH),
        sized("small", SMALL, MID),
    ];
    let d = decide(machines(1), bound, vec![], &batch);
    match &d[0] {
        Decision::Unschedulable(diag) => {
            let n = diag.nomination.as_ref().expect("first is nominated");
            assert_eq!((n.node.as_str(), n.victims.len()), ("machine1", 1));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        message(&d[1]),
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory. preemption: 0/1 nodes \
         are available: 1 Insufficient cpu, 1 Insufficient memory."
    );
    assert!(message(&d[2]).starts_with("0/1 nodes are available: 1 Insufficient cpu"));
}

#[test]
fn rank_nominates_too() {
    let snap = Snapshot::build(
        machines(2),
        vec![
            on("machine2", "low", VERY_LARGE, LOW, T),
            on("machine1", "mid", VERY_LARGE, MID, T),
        ],
    )
    .unwrap();
    let profile = Profile::new(Policy::kube_default());
    let r = Evaluator::new(&profile, &snap)
        .rank(&sized("p", VERY_LARGE, HIGH), 0, 0, Deadline::none())
        .unwrap();
    let n = r.diagnosis.nomination.clone().expect("nominated");
    assert_eq!((n.node.as_str(), n.victims[0].as_ref()), ("machine2", "low"));
    assert_eq!(
        r.diagnosis.message(),
        "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory. preemption: found a potential placement \
         for pod on node machine2, preempting 1 victims"
    );
}

// ---- Sampling the potential nodes (DryRunPreemption) ----

#[test]
fn the_dry_run_looks_for_ten_percent_of_the_potential_nodes_and_at_least_a_hundred() {
    // kube-scheduler's calculateNumCandidates with MinCandidateNodesPercentage 10 and
    // MinCandidateNodesAbsolute 100.
    for (potential, wanted) in [
        (0, 0),
        (1, 1),
        (50, 50),
        (100, 100),
        (999, 100),
        (1000, 100),
        (1234, 123),
        (5000, 500),
    ] {
        let (offset, n) = dry_run_window(potential, 12_345);
        assert_eq!(n, wanted, "{potential} potential nodes");
        assert!(offset < potential.max(1), "offset {offset} within {potential}");
    }
    assert_ne!(
        dry_run_window(1000, 1).0,
        dry_run_window(1000, 2).0,
        "the offset follows the seed"
    );
}

/// 300 equal nodes, each freed by evicting its one low-priority pod: every node is a candidate and
/// all tie, so the nominated node is the first by name among those the dry run looked at — the
/// 100 potential nodes from the seed's offset on — not always the first of all.
#[test]
fn the_dry_run_stops_after_enough_candidates_from_the_seeded_offset() {
    let names: Vec<String> = (0..300).map(|i| format!("n{i:03}")).collect();
    let nodes: Vec<NodeSpec> = names.iter().map(|n| machine(n)).collect();
    let bound: Vec<PodSpec> = names
        .iter()
        .map(|n| on(n, &format!("{n}-low"), VERY_LARGE, LOW, T))
        .collect();
    let snap = Snapshot::build(nodes, bound).unwrap();
    let profile = Profile::new(Policy::kube_default());
    let mut chosen = std::collections::BTreeSet::new();
    for seed in 0..8u64 {
        let pod = sized(&format!("preemptor-{seed}"), LARGE, HIGH);
        let plan = PodPlan::new(&profile, &snap, &pod, seed, &Default::default(), false);
        let (offset, wanted) = dry_run_window(300, plan.tie_seed());
        assert_eq!(wanted, 100);
        let window: Vec<usize> = (0..wanted).map(|k| (offset + k) % 300).collect();
        let expected = &names[*window.iter().min().unwrap()];
        let decision = Evaluator::new(&profile, &snap)
            .schedule(std::slice::from_ref(&pod), seed, Deadline::none())
            .unwrap()
            .remove(0);
        let Decision::Unschedulable(d) = decision else {
            panic!("seed {seed}: the pod fits nowhere without preemption");
        };
        let nomination = d.nomination.expect("a nomination");
        assert_eq!(&nomination.node, expected, "seed {seed}: offset {offset}");
        assert_eq!(nomination.victims, vec![Arc::<str>::from(format!("{expected}-low"))]);
        chosen.insert(nomination.node);
    }
    assert!(chosen.len() > 1, "different seeds start elsewhere: {chosen:?}");
}
