//! Preemption for a PodGroup: victims only where the group goes, whole groups evicted together,
//! the reprieve order, and the messages kube's PodGroupPostFilter gives.

use std::sync::Arc;

use crate::engine::framework::{Deadline, Decision};
use crate::engine::model::{NodeSpec, PodGroup, PodSpec, PreemptionPolicy};
use crate::engine::pdb::{LabelSelector, Pdb};
use crate::engine::podgroup::{schedule, GroupOutcome, GroupReason};
use crate::engine::policy::Policy;
use crate::engine::profile::Profile;
use crate::engine::resources::Resources;
use crate::engine::snapshot::Snapshot;

/// The gates of the control plane these cases were read from (cluster.sh --workload-api):
/// TopologyAwareWorkloadScheduling on.
const TAS: crate::engine::gates::FeatureGates = crate::engine::gates::FeatureGates {
    topology_aware_workload_scheduling: true,
    ..crate::engine::gates::FeatureGates::PLACEMENT_DEFAULT
};

const HIGH: i32 = 1000;

fn node(name: &str, rack: &str) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        labels: [("rack".to_string(), rack.to_string())].into(),
        allocatable: Resources {
            milli_cpu: 4000,
            memory: 8 << 30,
            ..Default::default()
        },
        allowed_pods: 110,
        ..Default::default()
    }
}

/// Racks a (n1, n2) and b (n3, n4) of 4-cpu nodes.
fn racks() -> Vec<NodeSpec> {
    vec![node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4", "b")]
}

fn pod(uid: &str, cpu: i64, priority: i32, group: Option<&str>) -> PodSpec {
    let requests = Resources {
        milli_cpu: cpu,
        ..Default::default()
    };
    PodSpec {
        uid: Arc::from(uid),
        namespace: "default".into(),
        name: uid.into(),
        labels: [("app".to_string(), uid.split('-').next().unwrap_or(uid).to_string())].into(),
        non_zero_requests: Resources {
            memory: 200 << 20,
            ..requests.clone()
        },
        requests,
        priority,
        pod_group: group.map(|g| crate::engine::model::PodGroupKey::new("default", g)),
        ..Default::default()
    }
}

fn bound(uid: &str, cpu: i64, priority: i32, node: &str, group: Option<&str>) -> PodSpec {
    PodSpec {
        node_name: Some(node.into()),
        ..pod(uid, cpu, priority, group)
    }
}

fn group(name: &str, min_count: u32, priority: i32) -> PodGroup {
    PodGroup {
        namespace: "default".into(),
        name: name.into(),
        uid: Arc::from(format!("uid-{name}")),
        generation: 1,
        min_count: Some(min_count),
        topology_key: Some(Arc::from("rack")),
        priority,
        preemption_policy: PreemptionPolicy::PreemptLowerPriority,
        disruption_all: false,
        initially_scheduled: false,
        parent: None,
    }
}

/// The high-priority group of four 1.5-cpu pods, minCount 4, one rack.
fn preemptors() -> Vec<PodSpec> {
    (1..=4)
        .map(|i| pod(&format!("hi-{i}"), 1500, HIGH, Some("hi")))
        .collect()
}

/// Every node runs two low-priority 1.5-cpu pods (`low-<node>-<k>`); n3 runs a high-priority
/// 500m pod too, so that rack b is the fuller once the victims are gone.
fn full_cluster() -> Vec<PodSpec> {
    let mut pods = Vec::new();
    for n in ["n1", "n2", "n3", "n4"] {
        for k in 1..=2 {
            pods.push(bound(&format!("low-{n}-{k}"), 1500, 0, n, None));
        }
    }
    pods.push(bound("keep-n3", 500, HIGH, "n3", None));
    pods
}

fn run(
    pods: Vec<PodSpec>,
    groups: Vec<PodGroup>,
    pdbs: Vec<Pdb>,
    batch: &[PodSpec],
) -> (Vec<Decision>, Vec<GroupOutcome>) {
    let snap = Snapshot::build(racks(), pods)
        .and_then(|s| s.with_pod_groups(groups))
        .and_then(|s| s.with_pdbs(pdbs))
        .expect("snapshot");
    let profile = Profile::new(Policy::kube_default()).with_gates(TAS);
    schedule(&profile, &snap, None, batch, 7, Deadline::none()).expect("schedule")
}

/// Per member: its nominated node and its victims (sorted).
fn nominations(d: &[Decision]) -> Vec<(Option<String>, Vec<String>)> {
    d.iter()
        .map(|d| match d {
            Decision::Node { node, .. } => panic!("placed on {node} before any eviction"),
            Decision::Unschedulable(diag) => match &diag.nomination {
                Some(n) => {
                    let mut v: Vec<String> = n.victims.iter().map(ToString::to_string).collect();
                    v.sort();
                    (Some(n.node.clone()), v)
                }
                None => (None, Vec::new()),
            },
        })
        .collect()
}

#[test]
fn a_higher_priority_group_evicts_lower_pods_in_one_rack_and_no_other() {
    let (d, outcomes) = run(full_cluster(), vec![group("hi", 4, HIGH)], vec![], &preemptors());
    assert_eq!(outcomes[0].reason, GroupReason::Unschedulable);
    assert_eq!(
        outcomes[0].message,
        "pod group is unschedulable, 0/2 placements are available, first placement status: minCount (4) \
         cannot be satisfied: 0 scheduled, 3 remaining, pod group preemption: found a placement for podgroup, \
         preempting 4 victims"
    );
    let n = nominations(&d);
    let rack_b_victims = vec!["low-n3-1", "low-n3-2", "low-n4-1", "low-n4-2"];
    let mut nodes: Vec<String> = n
        .iter()
        .map(|(node, _)| node.clone().expect("every member nominated"))
        .collect();
    nodes.sort();
    assert_eq!(
        nodes,
        ["n3", "n3", "n4", "n4"],
        "the whole group in rack b, the fuller once freed"
    );
    for (_, victims) in &n {
        assert_eq!(
            victims, &rack_b_victims,
            "every member waits for the same victims, all in rack b"
        );
    }
}

#[test]
fn a_group_with_disruption_mode_all_is_evicted_whole_even_outside_the_rack() {
    // The low-priority group "lo" has a pod on n4 (in the way) and one on n1 (rack a).
    let mut pods: Vec<PodSpec> = full_cluster()
        .into_iter()
        .filter(|p| p.node_name.as_deref() != Some("n4"))
        .collect();
    pods.push(bound("lo-1", 3000, 0, "n4", Some("lo")));
    pods.push(bound("lo-2", 500, 0, "n1", Some("lo")));
    let run_with = |all: bool| {
        let mut lo = group("lo", 2, 0);
        lo.disruption_all = all;
        let (d, _) = run(pods.clone(), vec![group("hi", 4, HIGH), lo], vec![], &preemptors());
        nominations(&d)[0].1.clone()
    };
    assert_eq!(
        run_with(true),
        ["lo-1", "lo-2", "low-n3-1", "low-n3-2"],
        "disruptionMode All: lo-2 goes with lo-1 though nothing needs its room"
    );
    assert_eq!(
        run_with(false),
        ["lo-1", "low-n3-1", "low-n3-2"],
        "disruptionMode Single: only the pod in the way"
    );
}

#[test]
fn the_more_important_victim_is_reprieved_and_a_budget_protects_first() {
    // n4 runs two 1-cpu pods of priorities 5 and 1: the two members there need 3 cpu, so one of
    // them can stay. The more important (5) stays, unless a budget protects the other.
    let mut pods: Vec<PodSpec> = full_cluster()
        .into_iter()
        .filter(|p| p.node_name.as_deref() != Some("n4"))
        .collect();
    pods.push(bound("five-n4", 1000, 5, "n4", None));
    pods.push(bound("one-n4", 1000, 1, "n4", None));
    let victims = |pdbs: Vec<Pdb>| {
        let (d, _) = run(pods.clone(), vec![group("hi", 4, HIGH)], pdbs, &preemptors());
        nominations(&d)[0].1.clone()
    };
    assert_eq!(victims(vec![]), ["low-n3-1", "low-n3-2", "one-n4"]);
    let budget = Pdb {
        namespace: "default".into(),
        name: "one".into(),
        selector: Some(LabelSelector {
            match_labels: vec![("app".into(), "one".into())],
            match_expressions: vec![],
        }),
        disruptions_allowed: 0,
        disrupted_pod_uids: vec![],
    };
    assert_eq!(victims(vec![budget]), ["five-n4", "low-n3-1", "low-n3-2"]);
}

#[test]
fn pods_of_equal_or_higher_priority_are_never_victims() {
    // Every pod has the group's priority: kube's message, nobody nominated.
    let pods: Vec<PodSpec> = full_cluster()
        .into_iter()
        .map(|mut p| {
            p.priority = HIGH;
            p
        })
        .collect();
    let (d, outcomes) = run(pods, vec![group("hi", 4, HIGH)], vec![], &preemptors());
    assert!(
        outcomes[0]
            .message
            .ends_with(", pod group preemption: No preemption victims found for incoming preemptor"),
        "{}",
        outcomes[0].message
    );
    assert!(nominations(&d).iter().all(|(n, _)| n.is_none()));
}

#[test]
fn a_pod_of_a_lower_priority_group_is_a_victim_at_its_groups_priority() {
    // "lo"'s pods say priority HIGH, but their PodGroup's priority (0) is what counts.
    let mut pods: Vec<PodSpec> = full_cluster()
        .into_iter()
        .filter(|p| p.node_name.as_deref() != Some("n4"))
        .collect();
    pods.push(bound("lo-1", 3000, HIGH, "n4", Some("lo")));
    let (d, _) = run(
        pods,
        vec![group("hi", 4, HIGH), group("lo", 1, 0)],
        vec![],
        &preemptors(),
    );
    assert_eq!(nominations(&d)[0].1, ["lo-1", "low-n3-1", "low-n3-2"]);
}

#[test]
fn when_even_an_empty_cluster_cannot_hold_the_group_nobody_is_evicted() {
    // Ten 1.5-cpu pods, minCount 10: a rack holds at most five even with every victim gone.
    let batch: Vec<PodSpec> = (1..=10)
        .map(|i| pod(&format!("hi-{i}"), 1500, HIGH, Some("hi")))
        .collect();
    let (d, outcomes) = run(full_cluster(), vec![group("hi", 10, HIGH)], vec![], &batch);
    let message = &outcomes[0].message;
    assert!(
        message.contains(", pod group preemption: pod group is unschedulable, 0/2 placements are available"),
        "{message}"
    );
    assert!(nominations(&d).iter().all(|(n, _)| n.is_none()));
}
