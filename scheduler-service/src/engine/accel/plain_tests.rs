//! The plain pass against the general one: every candidate, total, decision and reason the
//! same, on random clusters and policies and on the synthetic cluster; the kernel against the
//! scalar pass; class replay against filtering node by node.

use std::sync::Arc;

use proptest::prelude::*;

use crate::engine::accel::plain::*;
use crate::engine::framework::tests::{arb_cluster, with_a_in_zone, zone_z2_pod_on_z1_cluster};
use crate::engine::framework::*;
use crate::engine::hot::NodeHot;
use crate::engine::model::{HostPort, PreferredTerm, Protocol, SelectorOp};
use crate::engine::model::{NodeSpec, PodSpec};
use crate::engine::plugins::image_locality::{ImageScale, MIN_IMAGE_THRESHOLD};
use crate::engine::plugins::noderesources::balanced_allocation;
use crate::engine::plugins::testing::{label_term, node, pod, rank, snapshot};
use crate::engine::policy::Policy;
use crate::engine::policy::ScorePlugin as S;
use crate::engine::snapshot::Snapshot;
use crate::engine::topology::Placed;

// ---- The plain pass ----

/// `copies` of each node under other names (`<name>-<k>`): the same class, so that the passes
/// that answer a class's nodes from its first one have classes of several nodes.
fn in_copies(nodes: &[NodeSpec], copies: usize) -> Vec<NodeSpec> {
    (0..copies)
        .flat_map(|k| {
            nodes.iter().map(move |n| NodeSpec {
                name: format!("{}-{k}", n.name),
                ..n.clone()
            })
        })
        .collect()
}

/// A batch scheduled with the plain pass allowed and with it turned off.
fn plain_and_general(
    profile: &Profile,
    snap: &Snapshot,
    batch: &[PodSpec],
    seed: u64,
) -> (Vec<Decision>, Vec<Decision>) {
    let plain = Evaluator::new(profile, snap)
        .schedule(batch, seed, Deadline::none())
        .unwrap();
    let mut general = Evaluator::new(profile, snap);
    general.fast.allow_plain = false;
    (plain, general.schedule(batch, seed, Deadline::none()).unwrap())
}

/// Policies whose weights make every plugin count differently, then [`rule_policies`].
fn weighted_policies() -> Vec<Policy> {
    let mut policies = builtin_policies();
    policies.extend(rule_policies());
    policies
}

/// Policies whose weights make every plugin count differently, without rules.
fn builtin_policies() -> Vec<Policy> {
    let mut skewed = Policy::kube_default();
    for s in &mut skewed.scores {
        s.weight = match s.plugin {
            S::NodeAffinity => 5,
            S::TaintToleration => 1,
            S::NodeResourcesFit => 3,
            _ => s.weight,
        };
    }
    let mut uneven = Policy::kube_default();
    if let Some(r) = uneven.fit_resources.get_mut(1) {
        r.weight = 4;
    }
    vec![Policy::kube_default(), Policy::bin_packing(), skewed, uneven]
}

/// Policies with CEL rules of every kind the plain pass takes: read per class (reading the pod
/// or not), read per node without the pod (from the snapshot's kept outcomes and the batch's),
/// failing on some nodes; and one reading the pod per node, which the plain pass leaves alone.
fn rule_policies() -> Vec<Policy> {
    use crate::engine::rules::{FilterRule, Rules, ScoreRule};
    let filter = |name: &str, expression: &str| FilterRule {
        name: name.into(),
        expression: expression.into(),
        reason: format!("node(s) refused by {name}"),
    };
    let score = |name: &str, expression: &str, weight: i64| ScoreRule {
        name: name.into(),
        expression: expression.into(),
        weight,
    };
    let with = |name: &str, filters: Vec<FilterRule>, scores: Vec<ScoreRule>| {
        let policy = Policy {
            name: name.into(),
            rules: Rules { filters, scores },
            ..Policy::kube_default()
        };
        assert!(policy.validate().is_ok(), "{name} compiles");
        policy
    };
    vec![
        // Every kind at once.
        with(
            "ruled",
            vec![
                filter(
                    "small-or-zone-a",
                    "pod.requests.cpu < 700 || node.metadata.labels['zone'] == 'a'",
                ),
                filter("few-pods", "node.status.requested.pods < 3"),
            ],
            vec![
                score(
                    "zone",
                    "node.metadata.labels['zone'] == 'a' ? pod.requests.cpu % 7 : 3",
                    2,
                ),
                score("free-cpu", "node.status.allocatable.cpu - node.status.requested.cpu", 1),
            ],
        ),
        // Class-level filters only: the plain pass keeps only the best node.
        with(
            "class-filter",
            vec![filter(
                "zone-b-for-big",
                "pod.requests.memory < 900 || node.metadata.labels['zone'] == 'b'",
            )],
            vec![],
        ),
        // A node rule failing on the nodes with one pod, a score rule reading the pod per node.
        with(
            "failing",
            vec![filter("divides", "100 / (node.status.requested.pods - 1) > -1000")],
            vec![score("cpu-on-busy", "pod.requests.cpu * node.status.requested.pods", 3)],
        ),
        with(
            "pod-free",
            vec![filter("divides", "100 / (node.status.requested.pods - 1) > -1000")],
            vec![score(
                "free-memory",
                "node.status.allocatable.memory - node.status.requested.memory",
                5,
            )],
        ),
        // Pod-free score rules only, beside a class-level filter: Schedule keeps each class's
        // best node, the score rules' parts bounded for the rule-out (see `RuleColumns`).
        with(
            "pod-free-scores",
            vec![
                filter(
                    "small-or-zone-a",
                    "pod.requests.cpu < 700 || node.metadata.labels['zone'] == 'a'",
                ),
                filter("few-pods", "node.status.requested.pods < 4"),
            ],
            vec![
                score("free-cpu", "node.status.allocatable.cpu - node.status.requested.cpu", 3),
                score("busy", "node.status.requested.pods", 1),
            ],
        ),
        // A score rule whose raw scores lie beyond what `f64` holds exactly: no rule-out.
        with(
            "huge-scores",
            vec![],
            vec![score(
                "huge",
                "node.status.allocatable.memory * 1048576 + node.status.requested.cpu",
                2,
            )],
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// The plain pass decides exactly as the general one: same nodes, scores and feasible counts,
    /// including for replicas re-scored from its candidates.
    #[test]
    fn plain_pass_equals_the_general_one(
        (nodes, mut batch) in arb_cluster(),
        prefer in prop::collection::vec((any::<bool>(), 1i64..100), 30),
        copies in 1usize..3,
        policy in 0usize..10,
        seed in any::<u64>(),
    ) {
        for (p, (zone_a, weight)) in batch.iter_mut().zip(prefer) {
            p.preferred_affinity = vec![PreferredTerm {
                weight,
                term: label_term("zone", SelectorOp::In(vec![if zone_a { "a" } else { "b" }.into()])),
            }];
        }
        let batch: Vec<PodSpec> = batch
            .iter()
            .flat_map(|t| (0..copies).map(move |k| PodSpec { uid: Arc::from(format!("{}-{k}", t.uid)), ..t.clone() }))
            .collect();
        let snap = snapshot(nodes);
        let profile = Profile::new(weighted_policies().swap_remove(policy));
        let (plain, general) = plain_and_general(&profile, &snap, &batch, seed);
        prop_assert_eq!(plain, general);
    }
}

/// The synthetic cluster of `nodes` nodes and `pods` distinct pending pods from `seed`.
fn synthetic(nodes: usize, pods: usize, seed: u64) -> (Snapshot, Vec<PodSpec>) {
    use crate::grpc::convert;
    use crate::synth;
    let cluster = synth::cluster(&synth::ClusterShape::with_nodes(nodes), seed);
    let (nodes, bound, _, _) = convert::snapshot("snapshot", &cluster).unwrap();
    let batch = convert::list("pods", &synth::distinct_pods(pods, seed), convert::pod).unwrap();
    (Snapshot::build(nodes, bound).unwrap(), batch)
}

/// A batch scheduled with every pod's best-node pass split in two halves (as on two cores from
/// `parallel::MIN_SPLIT_NODES` nodes) and with it whole, with or without the vector kernel.
fn split_and_whole(
    profile: &Profile,
    snap: &Snapshot,
    batch: &[PodSpec],
    seed: u64,
    kernel: bool,
) -> (Vec<Decision>, Vec<Decision>) {
    let run = |split_from: usize| {
        let mut e = Evaluator::new(profile, snap);
        e.fast.split_from = split_from;
        e.fast.split_when_busy = true;
        if !kernel {
            e.fast.kernel = None;
        }
        e.schedule(batch, seed, Deadline::none()).unwrap()
    };
    (run(0), run(usize::MAX))
}

/// Schedule with each pod's pass split in two halves, each keeping its classes' best nodes,
/// decides exactly as with the pass whole (same nodes, totals and feasible counts), under every
/// policy (rules too), with and without the kernel: on the synthetic cluster, and on copies of
/// its nodes in both halves, whose equal parts the tie-break settles across the halves.
#[test]
fn split_pass_equals_the_whole_one() {
    use crate::grpc::convert;
    use crate::synth;
    let (snap, batch) = synthetic(300, 120, 17);
    let cluster = synth::cluster(&synth::ClusterShape::with_nodes(100), 17);
    let (nodes, _, _, _) = convert::snapshot("snapshot", &cluster).unwrap();
    let copies = snapshot(in_copies(&nodes, 3));
    assert!(copies.nodes().len() > 2 * BLOCK && snap.nodes().len() > 2 * BLOCK);
    let (mut placed, mut decided) = (0, 0);
    for policy in weighted_policies() {
        let profile = Profile::new(policy);
        for kernel in [true, false] {
            for (snap, what) in [(&snap, "synthetic"), (&copies, "copies")] {
                let (split, whole) = split_and_whole(&profile, snap, &batch, 5, kernel);
                assert_eq!(
                    split,
                    whole,
                    "{what}, policy {}, kernel {kernel}",
                    profile.policy().name
                );
                placed += whole.iter().filter(|d| matches!(d, Decision::Node { .. })).count();
                decided += whole.len();
            }
        }
    }
    assert!(placed > decided / 2, "{placed} of {decided} placed");
}

/// The static predicates of every class computed through the lineage's label columns (what
/// Schedule and Rank use) equal those evaluated class by class on the class's labels.
#[test]
fn class_statics_through_label_columns_equal_the_class_by_class_ones() {
    let (snap, batch) = synthetic(300, 400, 11);
    assert!(snap.classes().len() > 20, "classes: {}", snap.classes().len());
    for policy in [Policy::kube_default(), Policy::bin_packing()] {
        let profile = Profile::new(policy);
        let mut compared = 0;
        for p in &batch {
            let columns = PodPlan::new(&profile, &snap, p, 0, &Placed::default(), true);
            let one_by_one = PodPlan::new(&profile, &snap, p, 0, &Placed::default(), false);
            assert_eq!(columns.class_evals, one_by_one.class_evals, "pod {}", p.name);
            compared += usize::from(!columns.class_evals.is_empty());
        }
        assert!(compared > batch.len() / 2, "pods evaluated per class: {compared}");
    }
}

/// The same on the synthetic cluster's pods (images, ephemeral storage, overhead, every kind of
/// selector and toleration), which the plain pass takes for most of them.
#[test]
fn plain_pass_equals_the_general_one_on_the_synthetic_cluster() {
    let (snap, batch) = synthetic(300, 400, 7);
    let profile = Profile::new(Policy::kube_default());
    let plain_count = batch
        .iter()
        .filter(|p| PodPlan::new(&profile, &snap, p, 0, &Placed::default(), false).plain)
        .count();
    assert!(
        plain_count > batch.len() / 2,
        "most synthetic pods take the plain pass: {plain_count}"
    );
    for policy in weighted_policies() {
        let profile = Profile::new(policy);
        let (plain, general) = plain_and_general(&profile, &snap, &batch, 7);
        assert_eq!(plain, general);
    }
}

/// Pods under a policy with a class-level filter rule and a pod-free score rule (the engine
/// bench's rules) take the plain pass on the synthetic cluster and are placed exactly as the
/// general pass places them, batch after batch on one evaluator (the kept node outcomes of the
/// first batch serve the next), and ranked alike.
#[test]
fn rules_take_the_plain_pass_on_the_synthetic_cluster() {
    use crate::engine::rules::{FilterRule, Rules, ScoreRule};
    let (snap, batch) = synthetic(300, 400, 13);
    let policy = Policy {
        name: "bench-rules".into(),
        rules: Rules {
            filters: vec![FilterRule {
                name: "ml-needs-ssd".into(),
                expression: "pod.metadata.labels['team'] != 'ml' || ('disktype' in node.metadata.labels && node.metadata.labels['disktype'] == 'ssd')"
                    .into(),
                reason: "node(s) didn't have an ssd".into(),
            }],
            scores: vec![ScoreRule {
                name: "free-cpu".into(),
                expression: "node.status.allocatable.cpu - node.status.requested.cpu".into(),
                weight: 1,
            }],
        },
        ..Policy::kube_default()
    };
    let profile = Profile::new(policy);
    let plain_count = batch
        .iter()
        .filter(|p| PodPlan::new(&profile, &snap, p, 0, &Placed::default(), false).plain)
        .count();
    assert!(
        plain_count > batch.len() / 2,
        "pods taking the plain pass: {plain_count}"
    );
    let mut plain = Evaluator::new(&profile, &snap);
    let mut general = Evaluator::new(&profile, &snap);
    general.fast.allow_plain = false;
    let mut placed = 0;
    for chunk in batch.chunks(100) {
        let fast = plain.schedule(chunk, 3, Deadline::none()).unwrap();
        assert_eq!(fast, general.schedule(chunk, 3, Deadline::none()).unwrap());
        placed += fast.iter().filter(|d| matches!(d, Decision::Node { .. })).count();
    }
    assert!(placed > batch.len() / 2, "placed: {placed}");
    for p in batch.iter().take(40) {
        assert_eq!(
            plain.rank(p, 5, 3, Deadline::none()).unwrap(),
            general.rank(p, 5, 3, Deadline::none()).unwrap()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// Rank through the plain pass (and the reasons of the nodes it left out) answers exactly as
    /// the general pass: the same ranking, rejected nodes with their reasons (all of them, or the
    /// first few), and diagnosis.
    #[test]
    fn rank_with_the_plain_pass_equals_the_general_one(
        (nodes, batch) in arb_cluster(),
        policy in 0usize..10,
        top_k in 0usize..4,
        seed in any::<u64>(),
        copies in 1usize..4,
        limit in prop::option::of(0usize..3),
    ) {
        // Copies of each node (another name, the same class): the reasons pass answers a class's
        // nodes from its first one where the class alone decides.
        let nodes = in_copies(&nodes, copies);
        let snap = snapshot(nodes);
        let profile = Profile::new(weighted_policies().swap_remove(policy));
        for p in &batch {
            let plain = Evaluator::new(&profile, &snap)
                .with_rejected_limit(limit)
                .rank(p, top_k, seed, Deadline::none())
                .unwrap();
            let mut general = Evaluator::new(&profile, &snap).with_rejected_limit(limit);
            general.fast.allow_plain = false;
            let mut general = general.rank(p, top_k, seed, Deadline::none()).unwrap();
            let took_plain = PodPlan::new(&profile, &snap, p, seed, &Placed::default(), true).plain;
            if limit == Some(0) && plain.feasible_count > 0 && took_plain {
                // Nothing would show them: the plain pass gathers no reasons at all then.
                prop_assert!(plain.diagnosis.reasons.is_empty());
                general.diagnosis.reasons.clear();
            }
            prop_assert_eq!(plain, general);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// The reasons pass answering a class's nodes from its first one gives exactly what filtering
    /// every node gives: Schedule's diagnoses and nominations, Rank's rejected nodes and diagnosis,
    /// through the plain pass and the general one.
    #[test]
    fn reasons_from_the_class_equal_reasons_node_by_node(
        (nodes, batch) in arb_cluster(),
        copies in 1usize..4,
        named in prop::option::of(0usize..12),
        limit in prop::option::of(1usize..3),
        plain in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let nodes = in_copies(&nodes, copies);
        let mut batch = batch;
        // One pod naming a node: NodeName then rejects node by node.
        if let (Some(n), Some(p)) = (named, batch.first_mut()) {
            p.node_name = Some(format!("n{n}-0"));
        }
        let snap = snapshot(nodes);
        let profile = Profile::new(Policy::kube_default());
        let evaluator = |replay: bool| {
            let mut e = Evaluator::new(&profile, &snap).with_rejected_limit(limit);
            e.fast.allow_plain = plain;
            e.fast.class_replay = replay;
            e
        };
        let (with, without) = (evaluator(true).schedule(&batch, seed, Deadline::none()).unwrap(),
            evaluator(false).schedule(&batch, seed, Deadline::none()).unwrap());
        prop_assert_eq!(with, without);
        for p in &batch {
            let with = evaluator(true).rank(p, 2, seed, Deadline::none()).unwrap();
            prop_assert_eq!(with, evaluator(false).rank(p, 2, seed, Deadline::none()).unwrap());
        }
    }
}

/// Rank through the plain pass on the synthetic cluster's pods (images, so ImageLocality scores
/// the top k it re-scores plugin by plugin) answers exactly as the general pass, for a top k and
/// for the full list.
#[test]
fn rank_with_the_plain_pass_equals_the_general_one_on_the_synthetic_cluster() {
    let (snap, batch) = synthetic(300, 150, 9);
    let mut imaged = 0;
    for policy in weighted_policies() {
        let profile = Profile::new(policy);
        for (n, p) in batch.iter().enumerate() {
            let top_k = [1, 3, 10, 0][n % 4];
            let plain = Evaluator::new(&profile, &snap)
                .rank(p, top_k, 9, Deadline::none())
                .unwrap();
            let mut general = Evaluator::new(&profile, &snap);
            general.fast.allow_plain = false;
            assert_eq!(
                plain,
                general.rank(p, top_k, 9, Deadline::none()).unwrap(),
                "pod {}",
                p.name
            );
            imaged += plain
                .feasible
                .iter()
                .filter(|r| r.scores.iter().any(|(s, v, _)| *s == S::ImageLocality && *v > 0))
                .count();
        }
    }
    assert!(imaged > 0, "some ranked node scores ImageLocality");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// Rank's top k are the first k of the full ranking, ties broken alike.
    #[test]
    fn rank_top_k_is_the_head_of_the_full_ranking((nodes, batch) in arb_cluster(), k in 1usize..6, seed in any::<u64>()) {
        let snap = snapshot(nodes);
        let profile = Profile::new(Policy::kube_default());
        for p in &batch {
            let all = Evaluator::new(&profile, &snap).rank(p, 0, seed, Deadline::none()).unwrap();
            let top = Evaluator::new(&profile, &snap).rank(p, k, seed, Deadline::none()).unwrap();
            prop_assert_eq!(&top.feasible[..], &all.feasible[..k.min(all.feasible.len())]);
            prop_assert_eq!(top.feasible_count, all.feasible_count);
        }
    }
}

/// Evaluators reuse their thread's spare buffers: a Rank after others (including one cut short by
/// its deadline) answers as the same Rank on a fresh thread, image locality included.
#[test]
fn reused_evaluator_buffers_answer_as_fresh_ones() {
    let (snap, batch) = synthetic(200, 40, 3);
    let profile = Profile::new(Policy::kube_default());
    let with_images: Vec<&PodSpec> = batch.iter().filter(|p| !p.images.is_empty()).collect();
    assert!(with_images.len() > 10, "the synthetic pods name images");
    let fresh: Vec<Ranking> = std::thread::scope(|s| {
        s.spawn(|| {
            with_images
                .iter()
                .map(|p| Evaluator::new(&profile, &snap).rank(p, 5, 1, Deadline::none()).unwrap())
                .collect()
        })
        .join()
        .unwrap()
    });
    // Warm this thread's spares, once with an evaluation stopped by its deadline.
    let past = Deadline::at(std::time::Instant::now() - std::time::Duration::from_secs(1));
    let _ = Evaluator::new(&profile, &snap).schedule(&batch, 1, past);
    Evaluator::new(&profile, &snap)
        .schedule(&batch, 1, Deadline::none())
        .unwrap();
    for (p, want) in with_images.iter().zip(&fresh) {
        assert_eq!(
            &Evaluator::new(&profile, &snap).rank(p, 5, 1, Deadline::none()).unwrap(),
            want
        );
    }
}

/// Capacities up to the exact range's edge, and requests around them.
fn arb_capacity() -> impl Strategy<Value = i64> {
    prop_oneof![
        1i64..4_000,
        1i64..(1 << 40),
        ((1i64 << 46) - 5_000)..(1 << 46),
        (1i64 << 46)..(1 << 50)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    /// The float arithmetic of the plain pass equals the integer and float functions the general
    /// pass uses, on every capacity it accepts (up to 2⁴⁶) and with requests at, below and above
    /// the capacity; out of range it declines.
    #[test]
    fn plain_resource_scores_equal_the_node_by_node_functions(
        alloc_cpu in arb_capacity(),
        alloc_memory in arb_capacity(),
        used in (0.0f64..1.3, 0.0f64..1.3, 0.0f64..1.3, 0.0f64..1.3),
        requests in (0i64..(1 << 20), 0i64..(1 << 40)),
        weights in prop_oneof![Just((1i64, 1i64)), (0i64..10, 0i64..10)],
        most in any::<bool>(),
    ) {
        let at = |f: f64, c: i64| ((c as f64) * f) as i64;
        let h = NodeHot {
            alloc_cpu,
            alloc_memory,
            req_cpu: at(used.0, alloc_cpu),
            req_memory: at(used.1, alloc_memory),
            non_zero_cpu: at(used.2, alloc_cpu),
            non_zero_memory: at(used.3, alloc_memory),
            ..Default::default()
        };
        let mut policy = if most { Policy::bin_packing() } else { Policy::kube_default() };
        policy.fit_resources[0].weight = weights.0;
        policy.fit_resources[1].weight = weights.1;
        let profile = Profile::new(policy);
        prop_assert_eq!(profile.fit_cpu_memory, Some(weights));
        let reqs = [requests.0, requests.1];
        match plain_resource_scores(&h, reqs, reqs, most) {
            Some((cpu, memory, balanced)) => {
                prop_assert!(alloc_cpu < 1 << 46 && alloc_memory < 1 << 46);
                prop_assert_eq!(fit::weigh(cpu, memory, weights), fit::score_cpu_memory(&profile.policy.scoring_strategy, weights, &reqs, &h));
                prop_assert_eq!(balanced, balanced_allocation::score_cpu_memory(&reqs, &h));
            }
            None => prop_assert!(alloc_cpu >= 1 << 46 || alloc_memory >= 1 << 46),
        }
    }
}

/// A node whose capacity is past the exact range is scored by the integer path, as the general
/// pass scores it.
#[test]
fn the_plain_pass_scores_huge_nodes_as_the_general_one() {
    let nodes = vec![
        node("huge", 1 << 47, 1 << 50),
        node("edge", (1 << 46) - 1, (1 << 46) - 1),
        node("small", 4_000, 16 << 30),
    ];
    let snap = Snapshot::build(nodes, vec![]).unwrap();
    let batch: Vec<PodSpec> = (0..6)
        .map(|i| pod(&format!("p{i}"), 100 + 997 * i, (1 << 28) * (i + 1)))
        .collect();
    for policy in weighted_policies() {
        let profile = Profile::new(policy);
        let (plain, general) = plain_and_general(&profile, &snap, &batch, 3);
        assert_eq!(plain, general);
    }
}

/// Pods requesting extended resources take the plain pass: it fits them where the general pass
/// does (nodes without the resource, with too little left, or with other resources only, reject
/// them) and scores alike.
#[test]
fn the_plain_pass_fits_extended_resources_as_the_general_one() {
    let gpu: Arc<str> = Arc::from("nvidia.com/gpu");
    let fpga: Arc<str> = Arc::from("example.com/fpga");
    let with = |name: &str, scalars: Vec<(Arc<str>, i64)>| {
        let mut n = node(name, 8_000, 32 << 30);
        n.allocatable.scalars = scalars;
        n
    };
    let nodes = vec![
        with("a-gpu-4", vec![(Arc::clone(&gpu), 4)]),
        with("b-gpu-1", vec![(Arc::clone(&gpu), 1)]),
        with("c-fpga", vec![(Arc::clone(&fpga), 2)]),
        with("d-plain", vec![]),
        with("e-both", vec![(Arc::clone(&fpga), 1), (Arc::clone(&gpu), 2)]),
    ];
    let mut using = pod("existing", 500, 1 << 30);
    using.node_name = Some("a-gpu-4".into());
    using.requests.scalars = vec![(Arc::clone(&gpu), 3)];
    let snap = Snapshot::build(nodes, vec![using]).unwrap();
    let mut batch = Vec::new();
    for (i, wants) in [
        vec![(Arc::clone(&gpu), 1)],
        vec![(Arc::clone(&gpu), 2)],
        vec![(Arc::clone(&fpga), 1), (Arc::clone(&gpu), 1)],
        vec![(Arc::clone(&gpu), 1)],
        vec![(Arc::clone(&gpu), 1)],
        vec![(Arc::clone(&fpga), 1)],
        vec![(Arc::clone(&gpu), 5)],
    ]
    .into_iter()
    .enumerate()
    {
        let mut p = pod(&format!("p{i}"), 200 * (i as i64 + 1), 1 << 29);
        p.requests.scalars = wants;
        batch.push(p);
    }
    batch.push(pod("no-scalars", 100, 1 << 20));
    let profile = Profile::new(Policy::kube_default());
    assert!(batch
        .iter()
        .all(|p| PodPlan::new(&profile, &snap, p, 0, &Placed::default(), false).plain));
    for policy in builtin_policies() {
        let profile = Profile::new(policy);
        let (plain, general) = plain_and_general(&profile, &snap, &batch, 5);
        assert_eq!(plain, general);
        // Some pods found a GPU node and the one asking for 5 GPUs fit nowhere.
        assert!(matches!(&plain[0], Decision::Node { .. }));
        assert!(matches!(&plain[6], Decision::Unschedulable(_)));
        // Rank alike: the ranking, each rejected node's reasons (`Insufficient nvidia.com/gpu`
        // from the nodes the plain pass left out) and the diagnosis.
        for p in &batch {
            let fast = Evaluator::new(&profile, &snap).rank(p, 0, 5, Deadline::none()).unwrap();
            let mut general = Evaluator::new(&profile, &snap);
            general.fast.allow_plain = false;
            assert_eq!(fast, general.rank(p, 0, 5, Deadline::none()).unwrap());
        }
    }
    let ranking = Evaluator::new(&profile, &snap)
        .rank(&batch[6], 0, 5, Deadline::none())
        .unwrap();
    assert!(
        ranking.diagnosis.message().contains("Insufficient nvidia.com/gpu"),
        "{}",
        ranking.diagnosis.message()
    );
}

/// Two deltas from one base that add different classes (a retried delta, a binder that lost track
/// of what a replica applied) must not share static predicates for the class index they both use.
#[test]
fn deltas_branching_from_one_base_keep_their_own_classes() {
    let (snap, p) = zone_z2_pod_on_z1_cluster();
    let (to_z2, to_z3) = (with_a_in_zone(&snap, "z2"), with_a_in_zone(&snap, "z3"));
    let feasible = |s: &Snapshot| rank(s, &p).feasible.iter().map(|n| n.node.clone()).collect::<Vec<_>>();
    assert_eq!(feasible(&to_z2), ["a"]);
    assert_eq!(feasible(&to_z3), Vec::<String>::new(), "z3 is not z2");
    assert_eq!(feasible(&to_z2), ["a"]);
}

/// Host ports in a batch through the plain pass (port summaries, then the port lists where a
/// summary cannot rule a conflict out) decide as the general pass: addresses, protocols, and ports
/// taken by earlier pods of the batch.
#[test]
fn the_plain_pass_checks_host_ports_as_the_general_one() {
    let hp = |ip: &str, protocol, port| HostPort {
        ip: Arc::from(ip),
        protocol,
        port,
    };
    let nodes: Vec<NodeSpec> = (0..6).map(|i| node(&format!("n{i}"), 64_000, 64 << 30)).collect();
    let used = [
        ("n0", hp("0.0.0.0", Protocol::Tcp, 8080)),
        ("n1", hp("10.0.0.1", Protocol::Tcp, 8080)),
        ("n2", hp("0.0.0.0", Protocol::Udp, 8080)),
        ("n3", hp("0.0.0.0", Protocol::Tcp, 80)),
    ];
    let bound: Vec<PodSpec> = used
        .iter()
        .map(|(n, port)| {
            let mut p = pod(&format!("on-{n}"), 100, 100);
            p.node_name = Some((*n).into());
            p.host_ports = vec![port.clone()];
            p
        })
        .collect();
    let snap = Snapshot::build(nodes, bound).unwrap();
    let mut batch = Vec::new();
    let mut specific = pod("specific", 100, 100);
    specific.host_ports = vec![hp("10.0.0.2", Protocol::Tcp, 8080)];
    batch.push(specific);
    for i in 0..6 {
        let mut p = pod(&format!("any-{i}"), 100, 100);
        p.host_ports = vec![hp("0.0.0.0", Protocol::Tcp, 8080)];
        batch.push(p);
    }
    let profile = Profile::new(Policy::kube_default());
    assert!(batch
        .iter()
        .all(|p| PodPlan::new(&profile, &snap, p, 0, &Placed::default(), false).plain));
    let (plain, general) = plain_and_general(&profile, &snap, &batch, 3);
    assert_eq!(plain, general);
    let placed: Vec<&str> = plain
        .iter()
        .filter_map(|d| match d {
            Decision::Node { node, .. } => Some(node.as_str()),
            Decision::Unschedulable(_) => None,
        })
        .collect();
    // 8080/TCP on every address is free on n2, n3, n4, n5 only, and `specific` takes one of them
    // unless it goes to n1 (another address): 4 or 5 pods placed, never twice on one node.
    assert!(!placed.contains(&"n0"), "{placed:?}");
    assert!(placed.len() == 4 || placed.len() == 5, "{placed:?}");
    let mut distinct = placed.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), placed.len(), "{placed:?}");
}

/// A cpu or memory amount for the kernel test: mostly realistic, sometimes at or past the edges of
/// the kernel's exact range (0, just below and at [`EXACT`](crate::engine::accel::columns::EXACT), the
/// extremes, negative).
fn arb_amount() -> impl Strategy<Value = i64> {
    use crate::engine::accel::columns::EXACT;
    prop_oneof![
        6 => 0i64..64_000,
        3 => 0i64..(1 << 40),
        1 => prop::sample::select(vec![0, 1, EXACT - 1, EXACT, i64::MAX, i64::MIN, -1]),
    ]
}

/// Hot fields for the kernel test: usage sometimes over the capacity, a node sometimes full.
fn arb_hot() -> impl Strategy<Value = NodeHot> {
    (
        (arb_amount(), arb_amount(), arb_amount()),
        (arb_amount(), arb_amount(), arb_amount()),
        (arb_amount(), arb_amount()),
        (0i64..4, 0i64..4, 0u32..6),
    )
        .prop_map(
            |((ac, am, ae), (rc, rm, re), (nc, nm), (pods, allowed, class))| NodeHot {
                alloc_cpu: ac,
                alloc_memory: am,
                alloc_ephemeral: ae,
                allowed_pods: allowed,
                req_cpu: rc,
                req_memory: rm,
                req_ephemeral: re,
                non_zero_cpu: nc,
                non_zero_memory: nm,
                pod_count: pods,
                name_hash: 0,
                port_bits: 0,
                port_keys: Default::default(),
                class,
                has_scalars: false,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// The vector kernel passes exactly the nodes of allowed classes the scalar filter passes on
    /// resources and room, scores each of them bit for bit as `plain_resource_scores` does, and
    /// flags every node of an allowed class outside its exact range (and only those) for the
    /// scalar path; padding is neither. ImageLocality's scores equal [`ImageScale`]'s.
    #[test]
    fn kernel_filters_and_scores_as_the_scalar_pass(
        hot in prop::collection::vec(arb_hot(), 1..140),
        want in (arb_amount(), arb_amount(), arb_amount()),
        fit in (arb_amount(), arb_amount()),
        balanced in (arb_amount(), arb_amount()),
        most in any::<bool>(),
        classes in prop::collection::vec(any::<bool>(), 6),
        image in prop::option::of((1usize..5, prop::collection::vec(prop_oneof![0i64..(3 << 30), any::<i64>()], 192))),
    ) {
        use crate::engine::accel::columns::{BlockScores, HotColumns, ImageAsk, Kernel, PodAsk, BLOCK, EXACT};
        let Some(kernel) = Kernel::detect() else {
            eprintln!("skipped: this CPU has no AVX2, so the plain pass runs node by node");
            return Ok(());
        };
        let (fit, balanced) = ([fit.0, fit.1], [balanced.0, balanced.1]);
        let Some(mut ask) = PodAsk::new([want.0, want.1, want.2], fit, balanced, most) else {
            prop_assert!(fit.iter().chain(&balanced).any(|r| !(0..EXACT).contains(r)));
            return Ok(());
        };
        let mut sums = vec![];
        if let Some((containers, s)) = &image {
            let scale = ImageScale::of(*containers);
            ask = ask.with_image(ImageAsk { min: MIN_IMAGE_THRESHOLD, max: scale.max });
            prop_assert!(ask.scores_image());
            sums.clone_from(s);
        }
        let cols = HotColumns::of(&hot);
        let table: Vec<i32> = classes.iter().map(|&ok| -i32::from(ok)).collect();
        let mut out = BlockScores::default();
        for base in (0..hot.len().div_ceil(BLOCK) * BLOCK).step_by(BLOCK) {
            let masks = kernel.block(&cols, base, &ask, &table, &sums, &mut out);
            for j in 0..BLOCK {
                let (fast, slow) = (masks.fast >> j & 1 == 1, masks.slow >> j & 1 == 1);
                let Some(h) = hot.get(base + j) else {
                    prop_assert!(!fast && !slow, "padding lane {}", base + j);
                    continue;
                };
                let reference = plain_resource_scores(h, fit, balanced, most);
                let in_range = |u: i64| (0..EXACT).contains(&u);
                let exact = [h.alloc_cpu, h.alloc_memory].iter().all(|&c| c > 0 && c < EXACT)
                    && [h.non_zero_cpu, h.non_zero_memory, h.req_cpu, h.req_memory].iter().all(|&u| in_range(u));
                let allowed = classes[h.class as usize];
                prop_assert_eq!(slow, allowed && !exact, "node {:?}", h);
                let fits = !(h.pod_count + 1 > h.allowed_pods
                    || (want.0 > 0 && want.0 > h.alloc_cpu.saturating_sub(h.req_cpu))
                    || (want.1 > 0 && want.1 > h.alloc_memory.saturating_sub(h.req_memory))
                    || (want.2 > 0 && want.2 > h.alloc_ephemeral.saturating_sub(h.req_ephemeral)));
                prop_assert_eq!(fast, allowed && exact && fits, "node {:?}", h);
                if fast {
                    let scores = (i64::from(out.cpu[j]), i64::from(out.memory[j]), i64::from(out.balanced[j]));
                    prop_assert_eq!(Some(scores), reference, "node {:?}", h);
                    if let Some((containers, _)) = &image {
                        let sum = sums[base + j];
                        prop_assert_eq!(i64::from(out.image[j]), ImageScale::of(*containers).score(sum), "sum {}", sum);
                    }
                }
            }
        }
    }
}

proptest! {
    /// The kernel's rule-out computes each node's per-node part exactly as `weigh_fit` and
    /// `NodeScores::weighed` do, and compares it with its class's bar.
    #[test]
    fn kernel_parts_reach_the_bars_as_the_scalar_parts_do(
        scores in prop::collection::vec((0i32..=100, 0i32..=100, 50i32..=100, 0i32..=100), 64),
        classes in prop::collection::vec(0u32..5, 64),
        bars in prop::collection::vec(prop_oneof![Just(i64::MIN), 0i64..40_000], 5),
        fit_weights in prop_oneof![(0i64..4).prop_map(|w| (w, w)), (0i64..100, 0i64..100)],
        weights in (0i64..100, 0i64..100, 0i64..100),
    ) {
        use crate::engine::accel::columns::{BlockScores, HotColumns, Kernel, PartWeights, BLOCK};
        let Some(kernel) = Kernel::detect() else {
            eprintln!("skipped: this CPU has no AVX2, so the plain pass runs node by node");
            return Ok(());
        };
        let hot: Vec<NodeHot> = classes.iter().map(|&class| NodeHot { class, ..Default::default() }).collect();
        let cols = HotColumns::of(&hot);
        let mut out = BlockScores::default();
        for (j, &(c, m, b, i)) in scores.iter().enumerate() {
            (out.cpu[j], out.memory[j], out.balanced[j], out.image[j]) = (c, m, b, i);
        }
        let w = [weights.0, weights.1, weights.2];
        let part_weights = PartWeights::new(fit_weights, w).unwrap();
        let reach = kernel.reaching(&cols, 0, &out, &part_weights, None, &bars);
        for j in 0..BLOCK {
            let (c, m, b, i) = scores[j];
            let part = NodeScores {
                fit: fit::weigh(i64::from(c), i64::from(m), fit_weights),
                balanced: i64::from(b),
                image: i64::from(i),
            }
            .weighed(w);
            prop_assert_eq!(reach >> j & 1 == 1, part >= bars[classes[j] as usize], "node {} part {}", j, part);
        }
    }
}

/// The columns' per-block mask of nodes with extended resources follows `has_scalars` both ways
/// (a node that loses its last one leaves the mask), block by block.
#[test]
fn scalar_node_masks_follow_the_hot_fields() {
    use crate::engine::accel::columns::{HotColumns, BLOCK};
    let mut hot = vec![NodeHot::default(); BLOCK + 3];
    hot[1].has_scalars = true;
    hot[BLOCK + 2].has_scalars = true;
    let mut cols = HotColumns::of(&hot);
    assert_eq!(cols.scalar_nodes(0), 1 << 1);
    assert_eq!(cols.scalar_nodes(BLOCK), 1 << 2);
    hot[1].has_scalars = false;
    hot[5].has_scalars = true;
    cols.set(1, &hot[1]);
    cols.set(5, &hot[5]);
    assert_eq!(cols.scalar_nodes(0), 1 << 5);
    assert_eq!(cols.scalar_nodes(BLOCK), 1 << 2);
}

/// Batches on one thread reuse that thread's spare buffers (the batch's copies of the hot fields
/// and columns, candidates, totals, image sums): batches on clusters of other sizes in between
/// change no decision and no ranking from those a thread without spares makes.
#[test]
fn spare_buffers_carry_nothing_from_one_batch_to_the_next() {
    let (large, large_pods) = synthetic(300, 120, 5);
    let (small, small_pods) = synthetic(70, 120, 6);
    let profile = Profile::new(Policy::kube_default());
    let run = |snap: &Snapshot, pods: &[PodSpec]| {
        let decisions = Evaluator::new(&profile, snap)
            .schedule(pods, 3, Deadline::none())
            .unwrap();
        let ranking = rank(snap, &pods[0]);
        (decisions, ranking)
    };
    // A fresh thread has no spares.
    let fresh = |snap: &Snapshot, pods: &[PodSpec]| std::thread::scope(|s| s.spawn(|| run(snap, pods)).join().unwrap());
    let (want_large, want_small) = (fresh(&large, &large_pods), fresh(&small, &small_pods));
    // Each cluster twice in a row (a spare of the same size), then after the other.
    for (snap, pods, want) in [
        (&large, &large_pods, &want_large),
        (&large, &large_pods, &want_large),
        (&small, &small_pods, &want_small),
        (&small, &small_pods, &want_small),
        (&large, &large_pods, &want_large),
    ] {
        assert_eq!(&run(snap, pods), want);
    }
    let placed = want_small
        .0
        .iter()
        .filter(|d| matches!(d, Decision::Node { .. }))
        .count();
    assert!(placed > 10, "{placed} of the small cluster's pods placed");
}
