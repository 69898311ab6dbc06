//! Experiments end to end: stable arm assignment, weights over 10,000 units, and the binder
//! running experiments and shadows in `simulate` (annotations, per-arm record, metrics, a dead
//! arm backend, bin packing against spreading).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use placement_binder::experiments::{ExperimentSet, Owner, PodFacts};
use placement_binder::simulate::{self, ClusterSource, SimConfig, SyntheticCluster, Workload};
use placement_binder::BinderConfig;
use placement_scheduler::labels::{ARM_ANNOTATION, ASSIGNMENT_ANNOTATION, EXPERIMENT_ANNOTATION, POLICY_ANNOTATION};
use placement_scheduler::synth::ClusterShape;
use proptest::prelude::*;

fn unit_pods(set: &ExperimentSet, units: usize) -> Vec<usize> {
    let labels = BTreeMap::new();
    (0..units)
        .map(|i| {
            let name = format!("pod-{i}");
            set.assign(&PodFacts {
                namespace: "team-a",
                name: &name,
                labels: &labels,
                owner: None,
                pin: None,
                pod_group: None,
            })
            .expect("the experiment selects every pod")
            .arm
        })
        .collect()
}

/// The tolerance: 5 standard deviations of the binomial count of an arm of weight share `p`
/// among `n` units. A fair hash misses it with probability about 6e-7 per arm.
fn tolerance(n: usize, p: f64) -> f64 {
    5.0 * (n as f64 * p * (1.0 - p)).sqrt()
}

fn check_weights(set: &ExperimentSet, n: usize) {
    let e = &set.experiments[0];
    let arms = unit_pods(set, n);
    let total = e.total_weight() as f64;
    for (i, a) in e.arms.iter().enumerate() {
        let count = arms.iter().filter(|x| **x == i).count() as f64;
        let p = f64::from(a.weight) / total;
        let expected = n as f64 * p;
        assert!(
            (count - expected).abs() <= tolerance(n, p),
            "arm {} (weight {}): {count} of {n} units, expected {expected:.0} ± {:.0}",
            a.name,
            a.weight,
            tolerance(n, p)
        );
    }
}

const WEIGHTED: &str = "experiments:
  - name: rollout
    unit: pod
    arms:
      - {name: control, weight: 70, policy: default}
      - {name: candidate, weight: 20, policy: bin-packing}
      - {name: canary, weight: 10, policy: bin-packing}
";

#[test]
fn weights_hold_over_10000_units_within_5_sigma() {
    // 70/20/10 over 10,000 units: ±229, ±200 and ±150 units.
    check_weights(&ExperimentSet::parse(WEIGHTED).unwrap(), 10_000);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any weights and any salt: the split holds within 5 sigma over 10,000 units.
    #[test]
    fn weights_hold_for_any_salt_and_weights(salt in "[a-z0-9]{1,12}", weights in prop::collection::vec(1u32..100, 2..5)) {
        let arms: Vec<String> = weights
            .iter()
            .enumerate()
            .map(|(i, w)| format!("      - {{name: arm{i}, weight: {w}}}"))
            .collect();
        let yaml = format!("experiments:\n  - name: x\n    unit: pod\n    salt: \"{salt}\"\n    arms:\n{}\n", arms.join("\n"));
        check_weights(&ExperimentSet::parse(&yaml).unwrap(), 10_000);
    }
}

#[test]
fn the_same_unit_lands_in_the_same_arm_across_processes_and_re_parses() {
    let first = unit_pods(&ExperimentSet::parse(WEIGHTED).unwrap(), 10_000);
    // A fresh parse of the same file (as after a binder restart or a reload) agrees everywhere.
    let again = unit_pods(&ExperimentSet::parse(WEIGHTED).unwrap(), 10_000);
    assert_eq!(first, again);
    // And so does every other process, ever: the hash is xxh3 with a fixed seed, not a
    // per-process RandomState. These values were computed once and must never change.
    assert_eq!(
        &first[..32],
        &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 2, 0, 1, 0, 0, 2, 0, 0, 0, 0, 1]
    );
    // Moving 10 points of weight from control to canary moves only units from control to canary.
    let shifted = unit_pods(
        &ExperimentSet::parse(
            &WEIGHTED
                .replace("weight: 70", "weight: 60")
                .replace("weight: 10", "weight: 20"),
        )
        .unwrap(),
        10_000,
    );
    let moved: Vec<(usize, usize)> = first
        .iter()
        .zip(&shifted)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| (*a, *b))
        .collect();
    assert!(!moved.is_empty());
    assert!(
        moved.iter().all(|m| *m == (0, 1) || *m == (1, 2)),
        "with arms laid out in order only boundary ranges move: {:?}",
        &moved[..moved.len().min(5)]
    );
}

#[test]
fn a_deployments_replicas_stay_in_one_arm() {
    let set =
        ExperimentSet::parse("experiments: [{name: e, arms: [{name: a, weight: 1}, {name: b, weight: 1}]}]").unwrap();
    let mut arms_of_deployment: HashMap<String, std::collections::HashSet<usize>> = HashMap::new();
    for d in 0..200 {
        // Two rollouts (ReplicaSets) of each Deployment, five pods each.
        for hash in ["5d8f7b9c4", "66b4c8d7f"] {
            let labels = BTreeMap::from([("pod-template-hash".to_string(), hash.to_string())]);
            let owner = Owner {
                kind: "ReplicaSet".into(),
                name: format!("web{d}-{hash}"),
            };
            for p in 0..5 {
                let name = format!("web{d}-{hash}-{p}");
                let a = set
                    .assign(&PodFacts {
                        namespace: "shop",
                        name: &name,
                        labels: &labels,
                        owner: Some(&owner),
                        pin: None,
                        pod_group: None,
                    })
                    .unwrap();
                arms_of_deployment.entry(format!("web{d}")).or_default().insert(a.arm);
            }
        }
    }
    assert!(arms_of_deployment.values().all(|arms| arms.len() == 1));
    let in_b = arms_of_deployment.values().filter(|a| a.contains(&1)).count();
    assert!((60..=140).contains(&in_b), "{in_b} of 200 deployments in arm b");
}

// ---------------------------------------------------------------------------------------------
// The binder running experiments (simulate: the real loop, in-process decision replicas)
// ---------------------------------------------------------------------------------------------

fn cluster(nodes: usize, pending: usize) -> SyntheticCluster {
    SyntheticCluster {
        shape: ClusterShape {
            nodes,
            pods_per_node: 0,
            ..ClusterShape::default()
        },
        pending,
        replicas_per_workload: 10,
        workload_share: 0.8,
        topology_share: 0.0,
        seed: 7,
        pod_groups: None,
    }
}

fn config(cluster: SyntheticCluster, experiments: &str) -> SimConfig {
    SimConfig {
        cluster: ClusterSource::Synthetic(cluster),
        binder: BinderConfig {
            batch_size: 64,
            ..BinderConfig::default()
        },
        timeout: Duration::from_secs(120),
        experiments: Some(ExperimentSet::parse(experiments).unwrap()),
        ..SimConfig::default()
    }
}

const PACKING: &str = "experiments:
  - name: packing
    unit: workload
    arms:
      - {name: spread, weight: 1, policy: default}
      - {name: packed, weight: 1, policy: bin-packing}
shadows:
  - {name: same, policy: default}
  - {name: pack, policy: bin-packing}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arms_are_decided_by_their_policy_annotated_and_accounted() {
    let c = cluster(60, 600);
    let workload = Workload::synthetic(&c, "placement-scheduler");
    let set = ExperimentSet::parse(PACKING).unwrap();
    let mut cfg = config(c, PACKING);
    cfg.record_outcomes = true;
    let summary = simulate::simulate(cfg).await.unwrap();
    assert!(summary.passed(), "{summary}");
    let report = summary.experiments.clone().expect("a per-arm report");

    // Every bound pod's annotations name the arm its unit hashes to, and that arm's policy.
    let mut expected: HashMap<(String, String), u64> = HashMap::new();
    for p in &workload.pending {
        let a = set
            .assign(&PodFacts {
                namespace: &p.spec.namespace,
                name: &p.spec.name,
                labels: &p.spec.labels,
                owner: p.owner.as_ref(),
                pin: None,
                pod_group: None,
            })
            .unwrap();
        let arm = &set.experiments[0].arms[a.arm];
        if let Some(simulate::Outcome::Bound(_)) =
            summary.outcomes.get(&format!("{}/{}", p.spec.namespace, p.spec.name))
        {
            *expected.entry(("packing".into(), arm.name.clone())).or_default() += 1;
        }
    }
    for row in &report.arms {
        assert_eq!(
            row.pods_bound,
            expected
                .get(&(row.experiment.clone(), row.arm.clone()))
                .copied()
                .unwrap_or(0),
            "{row:?}"
        );
        assert_eq!(row.decision_errors, 0);
        assert!(row.decisions > 0);
    }
    assert_eq!(
        report.arms.iter().map(|r| r.pods_bound).sum::<u64>() as usize,
        summary.placed
    );
    assert_eq!(
        report.arms.iter().map(|r| r.unschedulable).sum::<u64>() as usize,
        summary.unschedulable
    );

    // Shadows compared every decided pod of every arm, once per shadow.
    for shadow in ["same", "pack"] {
        let compared: u64 = report
            .shadows
            .iter()
            .filter(|s| s.shadow == shadow)
            .map(|s| s.compared)
            .sum();
        assert_eq!(compared as usize, summary.placed + summary.unschedulable, "{shadow}");
    }
    let agreement = |arm: &str, shadow: &str| {
        let s = report
            .shadows
            .iter()
            .find(|s| s.arm == arm && s.shadow == shadow)
            .unwrap();
        s.same_node_pct.unwrap()
    };
    // Bin packing agrees with the packed arm far more than with the spread arm, and the reverse.
    assert!(agreement("packed", "pack") > agreement("spread", "pack") + 30.0);
    assert!(agreement("spread", "same") > agreement("packed", "same") + 30.0);
    // The packed arm's pods sit on fewer nodes than the spread arm's.
    let nodes = |arm: &str| report.arms.iter().find(|r| r.arm == arm).unwrap().nodes_used;
    assert!(nodes("packed") < nodes("spread"), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_pods_carry_policy_experiment_and_arm_annotations() {
    // The in-memory API server applies the Binding's annotations to the pod as kube-apiserver
    // does (tests/tests/fake_apiserver.rs checks the fake API server does too).
    let (summary, pods) = simulate::simulate_with_pods(config(cluster(20, 120), PACKING))
        .await
        .unwrap();
    assert!(summary.passed());
    let mut seen = 0;
    for p in pods.iter().filter(|p| p.pending && p.info.node_name().is_some()) {
        let a = &p.info.annotations;
        assert_eq!(a.get(EXPERIMENT_ANNOTATION).map(String::as_str), Some("packing"));
        assert_eq!(a.get(ASSIGNMENT_ANNOTATION).map(String::as_str), Some("hash"));
        let policy = match a.get(ARM_ANNOTATION).map(String::as_str) {
            Some("spread") => "default",
            Some("packed") => "bin-packing",
            other => panic!("arm annotation {other:?}"),
        };
        assert_eq!(a.get(POLICY_ANNOTATION).map(String::as_str), Some(policy));
        seen += 1;
    }
    assert_eq!(seen, summary.placed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bin_packing_leaves_more_nodes_empty_on_the_same_workload() {
    let set = ExperimentSet::parse(PACKING).unwrap();
    let comparison = simulate::compare_arms(|| config(cluster(80, 500), "experiments: []"), &set)
        .await
        .unwrap();
    assert!(comparison.passed(), "{comparison}");
    let spread = comparison.run("packing", "spread").unwrap();
    let packed = comparison.run("packing", "packed").unwrap();
    // The same pods bound in both runs, so the nodes they occupy compare directly.
    assert_eq!(spread.summary.placed, packed.summary.placed);
    assert_eq!(spread.arm_pods_bound, packed.arm_pods_bound);
    assert!(
        packed.summary.utilization.empty_nodes > spread.summary.utilization.empty_nodes,
        "{comparison}"
    );
    assert!(packed.arm_nodes_used < spread.arm_nodes_used, "{comparison}");
}
