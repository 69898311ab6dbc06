//! Gangs placed all together or not at all; the property that no gang is ever partly placed and
//! that a rolled-back gang leaves no usage behind.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::engine::model::NodeSpec;
use crate::engine::policy::Policy;
use crate::engine::profile::Profile;
use crate::engine::resources::Resources;
use crate::engine::snapshot::Snapshot;

fn node(name: &str, cpu: i64) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        allocatable: Resources {
            milli_cpu: cpu,
            memory: 1 << 40,
            ..Default::default()
        },
        allowed_pods: 110,
        ..Default::default()
    }
}

fn pod(uid: &str, cpu: i64, gang: Option<(&str, u32)>) -> PodSpec {
    let requests = Resources {
        milli_cpu: cpu,
        ..Default::default()
    };
    PodSpec {
        uid: Arc::from(uid),
        namespace: "ml".into(),
        name: uid.into(),
        non_zero_requests: requests.clone(),
        requests,
        gang: gang.map(|(name, min)| Gang {
            key: LabelGangKey::new("ml", name),
            min_members: min,
        }),
        ..Default::default()
    }
}

fn run(nodes: Vec<NodeSpec>, bound: Vec<PodSpec>, batch: &[PodSpec]) -> Vec<Decision> {
    let snap = Snapshot::build(nodes, bound).unwrap();
    let profile = Profile::new(Policy::kube_default());
    Evaluator::new(&profile, &snap)
        .schedule(batch, 7, Deadline::none())
        .unwrap()
}

fn placed(d: &Decision) -> Option<&str> {
    match d {
        Decision::Node { node, .. } => Some(node),
        Decision::Unschedulable(_) => None,
    }
}

#[test]
fn a_gang_that_does_not_fit_whole_places_nobody_and_frees_its_room() {
    // Room for two 1-cpu pods; the gang needs three. Its members are all refused, and the pod after
    // them gets the room their tentative placements had taken.
    let batch = [
        pod("w0", 1000, Some(("train", 3))),
        pod("w1", 1000, Some(("train", 3))),
        pod("w2", 1000, Some(("train", 3))),
        pod("solo", 2000, None),
    ];
    let d = run(vec![node("a", 2000)], vec![], &batch);
    for (i, d) in d.iter().enumerate().take(3) {
        match d {
            Decision::Unschedulable(diag) => {
                assert_eq!(diag.gang.as_ref().map(|g| &*g.gang), Some("ml/train"));
                let msg = diag.message();
                assert!(
                    msg.starts_with(
                        "gang \"ml/train\" is not placed: it needs 3 members placed together, and 2 fit \
                         (0 already bound, 2 of the 3 pending in this batch)"
                    ),
                    "w{i}: {msg}"
                );
            }
            other => panic!("w{i} placed: {other:?}"),
        }
    }
    assert_eq!(placed(&d[3]), Some("a"), "the gang's room went to the next pod");
}

#[test]
fn a_member_that_fits_nowhere_keeps_its_own_reasons() {
    let batch = [pod("w0", 1000, Some(("train", 2))), pod("w1", 5000, Some(("train", 2)))];
    let d = run(vec![node("a", 2000)], vec![], &batch);
    let Decision::Unschedulable(diag) = &d[1] else {
        panic!("{:?}", d[1])
    };
    assert!(
        diag.message()
            .ends_with("This pod: 0/1 nodes are available: 1 Insufficient cpu."),
        "{}",
        diag.message()
    );
    assert!(placed(&d[0]).is_none());
}

#[test]
fn a_gang_is_placed_once_min_members_fit() {
    // min 2 of 3 pending: two fit, so they are placed; the third is simply unschedulable.
    let batch = [
        pod("w0", 1000, Some(("train", 2))),
        pod("w1", 1000, Some(("train", 2))),
        pod("w2", 1000, Some(("train", 2))),
    ];
    let d = run(vec![node("a", 2000)], vec![], &batch);
    assert_eq!(d.iter().filter(|d| placed(d).is_some()).count(), 2);
    let Decision::Unschedulable(diag) = &d[2] else { panic!() };
    assert!(diag.gang.is_none(), "the gang itself is placed");
}

#[test]
fn members_already_bound_count_towards_min_members() {
    let mut bound = pod("w0", 1000, Some(("train", 3)));
    bound.node_name = Some("a".into());
    let mut bound2 = pod("w1", 1000, Some(("train", 3)));
    bound2.node_name = Some("a".into());
    let d = run(
        vec![node("a", 2000), node("b", 1000)],
        vec![bound, bound2],
        &[pod("w2", 1000, Some(("train", 3)))],
    );
    assert_eq!(placed(&d[0]), Some("b"));
    // The same member alone, without its bound siblings, is refused.
    let d = run(vec![node("b", 1000)], vec![], &[pod("w2", 1000, Some(("train", 3)))]);
    assert!(placed(&d[0]).is_none());
}

#[test]
fn gangs_are_namespaced_and_independent() {
    let mut other = pod("x0", 1000, Some(("train", 1)));
    other.namespace = "other".into();
    other.gang = Some(Gang {
        key: LabelGangKey::new("other", "train"),
        min_members: 1,
    });
    let batch = [
        pod("w0", 1000, Some(("train", 2))),
        other,
        pod("w1", 5000, Some(("train", 2))),
    ];
    let d = run(vec![node("a", 2000)], vec![], &batch);
    assert!(placed(&d[0]).is_none() && placed(&d[2]).is_none());
    assert_eq!(
        placed(&d[1]),
        Some("a"),
        "other/train is a different gang and fits alone"
    );
}

fn arb_batch() -> impl Strategy<Value = (Vec<NodeSpec>, Vec<PodSpec>)> {
    let nodes = prop::collection::vec(500i64..4000, 1..6).prop_map(|cpus| {
        cpus.iter()
            .enumerate()
            .map(|(i, c)| node(&format!("n{i}"), *c))
            .collect()
    });
    let pods = prop::collection::vec((100i64..2500, 0usize..5, 1u32..5), 0..25).prop_map(|specs| {
        specs
            .iter()
            .enumerate()
            .map(|(i, (cpu, g, min))| {
                // Gang 0 means none; gangs 1..4 share one minimum each (the first member's).
                let gang = (*g > 0).then(|| format!("g{g}"));
                let min = 1 + (*min + *g as u32) % 4;
                pod(&format!("p{i}"), *cpu, gang.as_deref().map(|n| (n, min)))
            })
            .collect()
    });
    (nodes, pods)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// No gang is ever partly placed: each gang is placed with at least min_members members or not
    /// at all. Rolling a gang back leaves no phantom usage: every other pod is placed exactly as
    /// if the failed gangs had never been in the batch, and no node is overcommitted.
    #[test]
    fn no_gang_is_ever_partly_placed((nodes, batch) in arb_batch(), seed in any::<u64>()) {
        let snap = Snapshot::build(nodes.clone(), vec![]).unwrap();
        let profile = Profile::new(Policy::kube_default());
        let out = Evaluator::new(&profile, &snap).schedule(&batch, seed, Deadline::none()).unwrap();
        let mut members: HashMap<&str, (u32, u32, u32)> = HashMap::new();
        for (p, d) in batch.iter().zip(&out) {
            if let Some(g) = &p.gang {
                let e = members.entry(g.key.as_str()).or_insert((0, 0, 0));
                e.0 = e.0.max(g.min_members);
                e.1 += 1;
                e.2 += u32::from(placed(d).is_some());
            }
        }
        let mut failed = Vec::new();
        for (g, (min, _, n)) in &members {
            prop_assert!(*n == 0 || *n >= *min, "gang {} partly placed: {} of min {}", g, n, min);
            if *n == 0 {
                failed.push(g.to_string());
            }
        }
        // The same batch without the members of the unplaced gangs decides every other pod alike.
        let rest: Vec<PodSpec> = batch
            .iter()
            .filter(|p| p.gang.as_ref().is_none_or(|g| !failed.iter().any(|f| f == g.key.as_str())))
            .cloned()
            .collect();
        let alone = Evaluator::new(&profile, &snap).schedule(&rest, seed, Deadline::none()).unwrap();
        let by_uid: HashMap<&str, Option<&str>> = rest.iter().zip(&alone).map(|(p, d)| (&*p.uid, placed(d))).collect();
        let mut used: HashMap<&str, i64> = HashMap::new();
        for (p, d) in batch.iter().zip(&out) {
            match by_uid.get(&*p.uid) {
                Some(expected) => prop_assert_eq!(placed(d), *expected, "pod {} decided differently", p.uid),
                None => prop_assert!(
                    matches!(d, Decision::Unschedulable(diag) if diag.gang.is_some()),
                    "member {} of an unplaced gang must say why", p.uid
                ),
            }
            if let Some(n) = placed(d) {
                *used.entry(n).or_default() += p.requests.milli_cpu;
            }
        }
        for n in &nodes {
            prop_assert!(used.get(n.name.as_str()).copied().unwrap_or(0) <= n.allocatable.milli_cpu);
        }
    }
}
