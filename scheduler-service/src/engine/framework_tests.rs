//! Plugin tests against kube-scheduler's documented behaviour; expected scores are the ones in
//! kube-scheduler's own plugin tests (`pkg/scheduler/framework/plugins/*/…_test.go`), cited per test.

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::engine::accel::plain::*;
use crate::engine::model::{HostPort, PreferredTerm, Protocol, SelectorOp, TaintEffect, TolerationOperator};
use crate::engine::plugins::image_locality::{ImageScale, MIN_IMAGE_THRESHOLD};
use crate::engine::plugins::noderesources::balanced_allocation;
use crate::engine::plugins::testing::{label_term, node, only, pod, rank, snapshot, taint, toleration};
use crate::engine::policy::{FilterPlugin as F, ScorePlugin as S};

// ---- Filters ----

fn arb_host_ports() -> impl Strategy<Value = Vec<HostPort>> {
    let port = (
        prop_oneof![Just("0.0.0.0"), Just("10.0.0.1"), Just("10.0.0.2")],
        prop_oneof![Just(Protocol::Tcp), Just(Protocol::Udp), Just(Protocol::Sctp)],
        prop_oneof![Just(80u16), Just(443), Just(8080), Just(9100), 1u16..200],
    )
        .prop_map(host_port);
    proptest::collection::vec(port, 0..5)
}

proptest! {
    /// The host-port summaries never rule out a real conflict: every port that conflicts with a
    /// port in use has its whole mask in the summary of the ports in use.
    #[test]
    fn port_summaries_never_hide_a_conflict(wanted in arb_host_ports(), used in arb_host_ports()) {
        let bits = crate::engine::snapshot::port_bits(&used);
        for w in &wanted {
            if used.iter().any(|u| w.conflicts(u)) {
                let mask = crate::engine::snapshot::port_mask(w);
                prop_assert_eq!(bits & mask, mask, "{:?} in use {:?}", w, used);
            }
        }
    }
}

/// The host port of a generated (address, protocol, port).
fn host_port((ip, protocol, port): (&str, Protocol, u16)) -> HostPort {
    HostPort {
        ip: Arc::from(ip),
        protocol,
        port,
    }
}

fn arb_any_address_ports() -> impl Strategy<Value = Vec<HostPort>> {
    let port = (
        // Mostly addresses with keys on the same few ports, so that keys meet often.
        prop_oneof![
            4 => Just("0.0.0.0"),
            4 => Just("10.0.0.1"),
            4 => Just("10.0.0.2"),
            1 => Just("010.0.0.1"),
            1 => Just("::"),
            1 => Just("::1"),
            1 => Just("fe80::1"),
            1 => Just("not-an-ip"),
        ],
        prop_oneof![4 => Just(Protocol::Tcp), 1 => Just(Protocol::Udp), 1 => Just(Protocol::Sctp)],
        prop_oneof![4 => Just(80u16), 2 => Just(8080), 1 => 1u16..5, 1 => Just(u16::MAX)],
    )
        .prop_map(host_port);
    proptest::collection::vec(port, 0..4)
}

proptest! {
    /// A node's port keys, when they say, say what comparing the port lists says: for every set
    /// of ports in use and every pod's ports (any address: IPv4, IPv6, non-canonical, not one).
    #[test]
    fn port_keys_answer_as_the_port_lists(wanted in arb_any_address_ports(), used in arb_any_address_ports()) {
        use crate::engine::snapshot::{port_key, PortKeys};
        let keys = PortKeys::of(&used);
        prop_assert_eq!(keys == PortKeys::UNKNOWN, used.len() > 2 || used.iter().any(|u| port_key(u).is_none()));
        let Some(wanted_keys) = wanted.iter().map(port_key).collect::<Option<Vec<u64>>>() else {
            return Ok(());
        };
        if let Some(conflict) = keys.conflict(&wanted_keys) {
            let listed = wanted.iter().any(|w| used.iter().any(|u| w.conflicts(u)));
            prop_assert_eq!(conflict, listed, "{:?} in use {:?}", wanted, used);
        }
    }
}

/// Only an IPv4 address in its canonical form has a port key; `0.0.0.0` has the address 0.
#[test]
fn port_keys_take_canonical_ipv4_addresses_only() {
    use crate::engine::snapshot::port_key;
    let port = |ip: &str| HostPort {
        ip: Arc::from(ip),
        protocol: Protocol::Tcp,
        port: 8080,
    };
    assert_eq!(port_key(&port("0.0.0.0")).map(|k| k & 0xff_ffff_ffff), Some(0));
    assert!(port_key(&port("10.0.0.1")).is_some());
    for ip in ["010.0.0.1", "::", "::1", "", "10.0.0.1 "] {
        assert_eq!(port_key(&port(ip)), None, "{ip:?}");
    }
}

/// A node running node-exporter (9100) and a pod on 8080 leaves almost every other port ruled out
/// by the summary alone (port 80 shared 8080's bit when the summary was `port % 64`).
#[test]
fn port_summaries_rule_out_most_other_ports() {
    let tcp = |port| HostPort {
        ip: Arc::from("0.0.0.0"),
        protocol: Protocol::Tcp,
        port,
    };
    let bits = crate::engine::snapshot::port_bits(&[tcp(9100), tcp(8080)]);
    let maybe = (1..=1024)
        .filter(|p| {
            let mask = crate::engine::snapshot::port_mask(&tcp(*p));
            bits & mask == mask
        })
        .count();
    assert!(maybe <= 20, "{maybe} of 1,024 ports need their lists compared");
    let mask = crate::engine::snapshot::port_mask(&tcp(80));
    assert_ne!(bits & mask, mask, "port 80 is ruled out by the summary");
}

#[test]
fn a_node_fails_at_the_first_rejecting_filter_only() {
    // Cordoned AND too small: kube-scheduler stops at NodeUnschedulable, so only that reason counts.
    let mut n = node("n", 100, 100);
    n.unschedulable = true;
    let r = rank(&snapshot(vec![n]), &pod("p", 1000, 0));
    assert_eq!(
        r.diagnosis.message(),
        "0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    );
}

// ---- Scores ----

#[test]
fn a_batch_places_each_pod_by_its_own_images() {
    // ImageLocality's sums are kept per set of images for the batch: pods alternating between two
    // images, and one with both, each go where their own images are.
    const MB: i64 = 1024 * 1024;
    let mut a = node("has-a", 64_000, 64 << 30);
    a.images.insert("example.com/a:1".into(), 900 * MB);
    let mut b = node("has-b", 64_000, 64 << 30);
    b.images.insert("example.com/b:1".into(), 900 * MB);
    let mut both = node("has-both", 64_000, 64 << 30);
    both.images.insert("example.com/a:1".into(), 900 * MB);
    both.images.insert("example.com/b:1".into(), 900 * MB);
    let snap = snapshot(vec![a, b, both, node("has-none", 64_000, 64 << 30)]);
    let prof = only(S::ImageLocality, ScoringStrategy::LeastAllocated);
    let with = |uid: &str, images: &[&str]| {
        let mut p = pod(uid, 100, 0);
        p.images = images.iter().map(|i| i.to_string()).collect();
        p
    };
    let batch = [
        with("a1", &["example.com/a:1"]),
        with("b1", &["example.com/b:1"]),
        with("a2", &["example.com/a:1"]),
        with("none", &[]),
        with("ab", &["example.com/a:1", "example.com/b:1"]),
        with("b2", &["example.com/b:1"]),
    ];
    let decisions = Evaluator::new(&prof, &snap)
        .schedule(&batch, 7, Deadline::none())
        .unwrap();
    let scores: Vec<(&str, i64)> = decisions
        .iter()
        .map(|d| match d {
            Decision::Node { node, score, .. } => (node.as_str(), *score),
            Decision::Unschedulable(d) => panic!("unschedulable: {}", d.message()),
        })
        .collect();
    // 900 MB on 2 of 4 nodes: 450 MB scaled, 100 × (450 − 23) / (1000 − 23) = 43; both: 87 of
    // 2 × 1000 MB, 100 × (900 − 23) / (2000 − 23) = 44.
    let image_score = |sum: i64, containers: i64| 100 * (sum - 23 * MB) / (containers * 1000 * MB - 23 * MB);
    let one = image_score(450 * MB, 1);
    assert!(one > 0);
    for (i, (node, score)) in scores.iter().enumerate() {
        match &*batch[i].uid {
            "a1" | "a2" => {
                assert!(["has-a", "has-both"].contains(node), "{i}: {scores:?}");
                assert_eq!(*score, one, "{scores:?}");
            }
            "b1" | "b2" => {
                assert!(["has-b", "has-both"].contains(node), "{i}: {scores:?}");
                assert_eq!(*score, one, "{scores:?}");
            }
            "ab" => assert_eq!((*node, *score), ("has-both", image_score(900 * MB, 2)), "{scores:?}"),
            _ => assert_eq!(*score, 0, "{scores:?}"),
        }
    }
}

#[test]
fn totals_weigh_each_plugin_with_the_default_weights() {
    let mut tainted = node("tainted", 4000, 10000);
    tainted.taints = vec![taint("a", "", TaintEffect::PreferNoSchedule)];
    tainted.labels.insert("zone".into(), "z1".into());
    let snap = snapshot(vec![node("plain", 4000, 10000), tainted]);
    let mut p = pod("p", 3000, 5000);
    p.preferred_affinity = vec![PreferredTerm {
        weight: 10,
        term: label_term("zone", SelectorOp::Exists),
    }];
    let r = rank(&snap, &p);
    for n in &r.feasible {
        let sum: i64 = n.scores.iter().map(|(_, s, w)| s * w).sum();
        assert_eq!(n.total, sum);
        let weights: Vec<(S, i64)> = n.scores.iter().map(|(p, _, w)| (*p, *w)).collect();
        assert_eq!(
            weights,
            [
                (S::TaintToleration, 3),
                (S::NodeAffinity, 2),
                (S::NodeResourcesFit, 1),
                (S::PodTopologySpread, 2),
                (S::InterPodAffinity, 2),
                (S::NodeResourcesBalancedAllocation, 1),
                (S::ImageLocality, 1)
            ]
        );
    }
    // plain: taint 100×3, affinity 0×2, fit 37, spread 0, inter-pod 0, balanced 87, image 0 = 424.
    // tainted: taint 0×3, affinity 100×2, fit 37, spread 0, inter-pod 0, balanced 87, image 0 = 324.
    let totals: Vec<(String, i64)> = r.feasible.iter().map(|n| (n.node.clone(), n.total)).collect();
    assert_eq!(totals, [("plain".into(), 424), ("tainted".into(), 324)]);
}

// ---- Messages ----

#[test]
fn message_sorts_count_and_reason_strings_like_kube_scheduler() {
    let mut d = Diagnosis {
        node_count: 5,
        ..Default::default()
    };
    d.reasons.insert(Reason::NodeAffinityMismatch, 3);
    d.reasons.insert(Reason::Insufficient(ResourceName::Cpu), 2);
    assert_eq!(
        d.message(),
        "0/5 nodes are available: 2 Insufficient cpu, 3 node(s) didn't match Pod's node affinity/selector."
    );
    // sort.Strings on "count reason": "10 …" sorts before "2 …".
    let mut d = Diagnosis {
        node_count: 12,
        ..Default::default()
    };
    d.reasons.insert(Reason::Insufficient(ResourceName::Memory), 10);
    d.reasons.insert(Reason::UntoleratedTaint, 2);
    assert_eq!(
        d.message(),
        "0/12 nodes are available: 10 Insufficient memory, 2 node(s) had untolerated taint(s)."
    );
    assert_eq!(Diagnosis::default().message(), "no nodes available to schedule pods");
}

// ---- Schedule ----

#[test]
fn batch_placements_consume_capacity_in_order() {
    let snap = snapshot(vec![node("a", 4000, 1 << 30), node("b", 4000, 1 << 30)]);
    let profile = Profile::new(Policy::kube_default());
    let pods: Vec<PodSpec> = (0..5).map(|i| pod(&format!("p{i}"), 2000, 0)).collect();
    let out = Evaluator::new(&profile, &snap)
        .schedule(&pods, 0, Deadline::none())
        .unwrap();
    let on = |n: &str| {
        out.iter()
            .filter(|d| matches!(d, Decision::Node { node, .. } if node == n))
            .count()
    };
    assert_eq!((on("a"), on("b")), (2, 2));
    match &out[4] {
        Decision::Unschedulable(d) => assert_eq!(d.message(), "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."),
        other => panic!("expected unschedulable, got {other:?}"),
    }
}

#[test]
fn ties_break_by_a_stable_seeded_hash() {
    let nodes: Vec<NodeSpec> = (0..50).map(|i| node(&format!("n{i:02}"), 1000, 1000)).collect();
    let snap = snapshot(nodes.clone());
    let profile = Profile::new(Policy::kube_default());
    let pods: Vec<PodSpec> = (0..20).map(|i| pod(&format!("p{i}"), 10, 10)).collect();
    let first = Evaluator::new(&profile, &snap)
        .schedule(&pods, 7, Deadline::none())
        .unwrap();
    let again = Evaluator::new(&profile, &snapshot(nodes))
        .schedule(&pods, 7, Deadline::none())
        .unwrap();
    assert_eq!(
        first, again,
        "same snapshot, batch, policy and seed give the same answer"
    );
    let other = Evaluator::new(&profile, &snap)
        .schedule(&pods, 8, Deadline::none())
        .unwrap();
    assert_ne!(first, other, "the seed changes tie-breaks among equal nodes");
}

#[test]
fn a_passed_deadline_stops_work() {
    let snap = snapshot(vec![node("a", 1000, 1000)]);
    let profile = Profile::new(Policy::kube_default());
    let past = Deadline::at(Instant::now());
    let err = Evaluator::new(&profile, &snap)
        .schedule(&[pod("p", 1, 1)], 0, past)
        .unwrap_err();
    assert_eq!(err, EvalError::DeadlineExceeded { done: 0, total: 1 });
}

#[test]
fn rank_returns_top_k_but_counts_all_feasible() {
    let nodes: Vec<NodeSpec> = (1..=10)
        .map(|i| node(&format!("n{i:02}"), 3000 + i * 1000, 1 << 30))
        .collect();
    let snap = snapshot(nodes);
    let profile = Profile::new(Policy::kube_default());
    let r = Evaluator::new(&profile, &snap)
        .rank(&pod("p", 3000, 0), 3, 0, Deadline::none())
        .unwrap();
    assert_eq!(r.feasible_count, 10);
    assert_eq!(r.feasible.len(), 3);
    assert!(r.feasible.windows(2).all(|w| w[0].total >= w[1].total));
    assert_eq!(r.feasible[0].node, "n10", "LeastAllocated prefers the biggest node");
}

// ---- Property: no infeasible placement, no overcommit, no missed fit ----

/// An independent, naive feasibility check (no shared code with the filters above).
fn naive_fits(n: &NodeSpec, placed: &[&PodSpec], p: &PodSpec) -> bool {
    if n.unschedulable
        && !p.tolerations.iter().any(|t| {
            t.key == "node.kubernetes.io/unschedulable"
                || (t.key.is_empty() && t.operator == TolerationOperator::Exists)
        })
    {
        return false;
    }
    for t in &n.taints {
        if t.effect != TaintEffect::PreferNoSchedule
            && !p.tolerations.iter().any(|tol| {
                (tol.key.is_empty() || tol.key == t.key)
                    && (tol.operator == TolerationOperator::Exists || tol.value == t.value)
                    && tol.effect.is_none_or(|e| e == t.effect)
            })
        {
            return false;
        }
    }
    if !p.node_selector.iter().all(|(k, v)| n.labels.get(k) == Some(v)) {
        return false;
    }
    if placed.len() as i64 + 1 > n.allowed_pods {
        return false;
    }
    let cpu: i64 = placed.iter().map(|q| q.requests.milli_cpu).sum();
    let mem: i64 = placed.iter().map(|q| q.requests.memory).sum();
    if p.requests.milli_cpu > 0 && cpu + p.requests.milli_cpu > n.allocatable.milli_cpu {
        return false;
    }
    if p.requests.memory > 0 && mem + p.requests.memory > n.allocatable.memory {
        return false;
    }
    let used: Vec<u16> = placed
        .iter()
        .flat_map(|q| q.host_ports.iter().map(|h| h.port))
        .collect();
    !p.host_ports.iter().any(|h| used.contains(&h.port))
}

fn arb_node(i: usize) -> impl Strategy<Value = NodeSpec> {
    (
        0i64..4000,
        0i64..4000,
        1i64..6,
        any::<bool>(),
        0u8..4,
        prop::bool::weighted(0.1),
    )
        .prop_map(move |(cpu, mem, pods, zone, taint_kind, cordoned)| {
            let mut n = node(&format!("n{i}"), cpu, mem);
            n.allowed_pods = pods;
            n.unschedulable = cordoned;
            n.labels.insert("zone".into(), if zone { "a" } else { "b" }.into());
            if taint_kind == 1 {
                n.taints.push(taint("dedicated", "x", TaintEffect::NoSchedule));
            } else if taint_kind == 2 {
                n.taints.push(taint("dedicated", "x", TaintEffect::PreferNoSchedule));
            }
            n
        })
}

fn arb_pod(i: usize) -> impl Strategy<Value = PodSpec> {
    (0i64..1500, 0i64..1500, 0u8..3, any::<bool>(), 0u8..4).prop_map(move |(cpu, mem, sel, tolerate, port)| {
        let mut p = pod(&format!("p{i}"), cpu, mem);
        if sel == 1 {
            p.node_selector = vec![("zone".into(), "a".into())];
        }
        if tolerate {
            p.tolerations = vec![toleration("dedicated", "x", None)];
        }
        if port > 0 {
            p.host_ports = vec![HostPort {
                ip: Arc::from("0.0.0.0"),
                protocol: Protocol::Tcp,
                port: 8000 + u16::from(port),
            }];
        }
        p
    })
}

fn arb_cluster() -> impl Strategy<Value = (Vec<NodeSpec>, Vec<PodSpec>)> {
    (1usize..12, 0usize..30).prop_flat_map(|(n, p)| {
        let nodes: Vec<_> = (0..n).map(arb_node).collect();
        let pods: Vec<_> = (0..p).map(arb_pod).collect();
        (nodes, pods)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn schedule_never_places_infeasibly_nor_overcommits((nodes, batch) in arb_cluster(), seed in any::<u64>(), bin_pack in any::<bool>()) {
        let snap = snapshot(nodes.clone());
        let policy = if bin_pack { Policy::bin_packing() } else { Policy::kube_default() };
        let profile = Profile::new(policy);
        let out = Evaluator::new(&profile, &snap).schedule(&batch, seed, Deadline::none()).unwrap();
        prop_assert_eq!(out.len(), batch.len());
        let mut placed: std::collections::HashMap<&str, Vec<&PodSpec>> = Default::default();
        for (p, d) in batch.iter().zip(&out) {
            match d {
                Decision::Node { node: name, .. } => {
                    let n = nodes.iter().find(|n| &n.name == name).unwrap();
                    let on = placed.entry(n.name.as_str()).or_default();
                    prop_assert!(naive_fits(n, on, p), "pod {} placed on infeasible node {}", p.uid, name);
                    on.push(p);
                }
                Decision::Unschedulable(diag) => {
                    // Nothing fitted: every node must really be infeasible at that point.
                    for n in &nodes {
                        let on = placed.get(n.name.as_str()).map(Vec::as_slice).unwrap_or(&[]);
                        prop_assert!(!naive_fits(n, on, p), "pod {} left unschedulable but fits {}", p.uid, n.name);
                    }
                    let counted: u32 = diag.reasons.values().sum();
                    prop_assert!(counted as usize >= nodes.len(), "every node gives at least one reason");
                }
            }
        }
        // No resource, pod count or host port is overcommitted on any node.
        for n in &nodes {
            let on = placed.get(n.name.as_str()).map(Vec::as_slice).unwrap_or(&[]);
            let cpu: i64 = on.iter().map(|p| p.requests.milli_cpu).sum();
            let mem: i64 = on.iter().map(|p| p.requests.memory).sum();
            prop_assert!(cpu <= n.allocatable.milli_cpu && mem <= n.allocatable.memory);
            prop_assert!(on.len() as i64 <= n.allowed_pods);
            let mut ports: Vec<u16> = on.iter().flat_map(|p| p.host_ports.iter().map(|h| h.port)).collect();
            let total = ports.len();
            ports.sort_unstable();
            ports.dedup();
            prop_assert_eq!(ports.len(), total, "a host port is used twice on {}", n.name);
        }
    }
}

// ---- Node classes ----

#[test]
fn nodes_differing_only_by_hostname_share_a_class_yet_hostname_selection_works() {
    let mk = |name: &str, zone: &str| {
        let mut n = node(name, 1000, 1000);
        n.labels.insert("kubernetes.io/hostname".into(), name.into());
        n.labels.insert("zone".into(), zone.into());
        n
    };
    let snap = snapshot(vec![mk("a", "z1"), mk("b", "z1"), mk("c", "z2")]);
    assert_eq!(snap.classes().len(), 2, "a and b share a class; c has its own");
    let mut p = pod("p", 0, 0);
    p.node_selector = vec![("kubernetes.io/hostname".into(), "b".into())];
    let r = rank(&snap, &p);
    assert_eq!(r.feasible.iter().map(|n| n.node.as_str()).collect::<Vec<_>>(), ["b"]);
    let mut q = pod("q", 0, 0);
    q.required_affinity = Some(vec![label_term("zone", SelectorOp::In(vec!["z1".into()]))]);
    let r = rank(&snap, &q);
    assert_eq!(r.feasible.len(), 2);
    assert_eq!(r.rejected.iter().map(|n| n.name(&snap)).collect::<Vec<_>>(), ["c"]);
}

/// Node `a` in zone z1 and an unlabelled `b`, and a pod selecting zone z2 (so fitting nowhere,
/// which the returned snapshot's static cache has seen).
fn zone_z2_pod_on_z1_cluster() -> (Snapshot, PodSpec) {
    let mut a = node("a", 1000, 1000);
    a.labels.insert("zone".into(), "z1".into());
    let snap = snapshot(vec![a, node("b", 1000, 1000)]);
    let mut p = pod("p", 0, 0);
    p.node_selector = vec![("zone".into(), "z2".into())];
    assert_eq!(rank(&snap, &p).feasible_count, 0);
    (snap, p)
}

/// `snap` with node `a` (1,000 millicores and bytes) moved to `zone`.
fn with_a_in_zone(snap: &Snapshot, zone: &str) -> Snapshot {
    let mut a = node("a", 1000, 1000);
    a.labels.insert("zone".into(), zone.into());
    snap.apply(crate::engine::snapshot::Delta {
        upsert_nodes: vec![a],
        ..Default::default()
    })
    .unwrap()
}

/// Also the static predicates cache a lineage shares: the pod's entry, made on the base with two
/// classes, is redone with the class the delta adds, and still serves the base.
#[test]
fn a_delta_that_relabels_a_node_moves_it_to_another_class() {
    let (snap, p) = zone_z2_pod_on_z1_cluster();
    let next = with_a_in_zone(&snap, "z2");
    assert_eq!(
        rank(&next, &p)
            .feasible
            .iter()
            .map(|n| n.node.as_str())
            .collect::<Vec<_>>(),
        ["a"]
    );
    assert_eq!(rank(&snap, &p).feasible_count, 0, "the base snapshot is unchanged");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]
    /// The cpu+memory fast paths of NodeResourcesFit and BalancedAllocation score exactly as the
    /// generic per-resource code (taken when the same resources are listed memory first).
    #[test]
    fn cpu_memory_fast_paths_match_the_generic_scoring((nodes, batch) in arb_cluster(), most in any::<bool>()) {
        let snap = snapshot(nodes);
        let base = if most { Policy::bin_packing() } else { Policy::kube_default() };
        let mut generic = base.clone();
        generic.fit_resources.reverse();
        generic.balanced_resources.reverse();
        let (fast, slow) = (Profile::new(base), Profile::new(generic));
        prop_assert!(fast.fit_cpu_memory.is_some() && slow.fit_cpu_memory.is_none());
        for p in &batch {
            let a = Evaluator::new(&fast, &snap).rank(p, 0, 1, Deadline::none()).unwrap();
            let b = Evaluator::new(&slow, &snap).rank(p, 0, 1, Deadline::none()).unwrap();
            let scores = |r: &Ranking| r.feasible.iter().map(|n| (n.node.clone(), n.total)).collect::<Vec<_>>();
            prop_assert_eq!(scores(&a), scores(&b));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// Re-scoring only the node that took the previous identical pod gives exactly the decisions of
    /// evaluating every node for every pod.
    #[test]
    fn replica_reuse_decides_exactly_as_full_evaluation(
        (nodes, templates) in arb_cluster(),
        copies in 1usize..6,
        seed in any::<u64>(),
        bin_pack in any::<bool>(),
    ) {
        let snap = snapshot(nodes);
        let policy = if bin_pack { Policy::bin_packing() } else { Policy::kube_default() };
        let profile = Profile::new(policy);
        // Runs of replicas (same spec, new uid), as a Deployment's pods arrive.
        let batch: Vec<PodSpec> = templates
            .iter()
            .flat_map(|t| {
                (0..copies).map(move |k| PodSpec {
                    uid: Arc::from(format!("{}-{k}", t.uid)),
                    ..t.clone()
                })
            })
            .collect();
        let fast = Evaluator::new(&profile, &snap).schedule(&batch, seed, Deadline::none()).unwrap();
        let mut full = Evaluator::new(&profile, &snap);
        full.reuse = false;
        let slow = full.schedule(&batch, seed, Deadline::none()).unwrap();
        prop_assert_eq!(fast, slow);
    }
}

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
    general.allow_plain = false;
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
    general.allow_plain = false;
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
            general.allow_plain = false;
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
            e.allow_plain = plain;
            e.class_replay = replay;
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
            general.allow_plain = false;
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
            general.allow_plain = false;
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

proptest! {
    /// The one-pass k-th largest total equals the k-th of the totals sorted in descending order
    /// (equal totals counted apart), and declines a k it does not take.
    #[test]
    fn kth_total_small_equals_the_sorted_one(totals in proptest::collection::vec(-5i64..5, 0..80), k in 0usize..40) {
        let mut sorted = totals.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let want = ((1..=super::SMALL_K).contains(&k) && k <= totals.len()).then(|| sorted[k - 1]);
        prop_assert_eq!(super::kth_total_small(&totals, k, |t| *t), want);
    }
}

/// A policy with the given CEL rules on top of the default one.
fn with_rules(filters: &[(&str, &str, &str)], scores: &[(&str, &str, i64)]) -> Profile {
    use crate::engine::rules::{FilterRule, Rules, ScoreRule};
    let policy = Policy {
        name: "rules".into(),
        rules: Rules {
            filters: filters
                .iter()
                .map(|(name, expression, reason)| FilterRule {
                    name: name.to_string(),
                    expression: expression.to_string(),
                    reason: reason.to_string(),
                })
                .collect(),
            scores: scores
                .iter()
                .map(|(name, expression, weight)| ScoreRule {
                    name: name.to_string(),
                    expression: expression.to_string(),
                    weight: *weight,
                })
                .collect(),
        },
        ..Policy::kube_default()
    };
    policy.validate().unwrap();
    Profile::new(policy)
}

const NGINX_RULE: (&str, &str, &str) = (
    "nginx-needs-test-label",
    "pod.metadata.labels['workload_name'] != 'nginx' || 'test/test' in node.metadata.labels",
    "node(s) didn't have label test/test",
);

#[test]
fn a_filter_rule_rejects_nodes_with_its_reason_in_the_message() {
    let mut labelled = node("labelled", 4000, 1 << 30);
    labelled.labels.insert("test/test".into(), String::new());
    let snap = snapshot(vec![node("a", 4000, 1 << 30), labelled, node("b", 4000, 1 << 30)]);
    let profile = with_rules(&[NGINX_RULE], &[]);
    let mut nginx = pod("nginx-1", 100, 100);
    nginx.labels.insert("workload_name".into(), "nginx".into());
    let r = Evaluator::new(&profile, &snap)
        .rank(&nginx, 0, 0, Deadline::none())
        .unwrap();
    assert_eq!(
        r.feasible.iter().map(|n| n.node.as_str()).collect::<Vec<_>>(),
        ["labelled"]
    );
    assert_eq!(r.rejected.len(), 2);
    assert!(r.rejected.iter().all(|n| n.plugin == F::Rules));
    // Schedule places every nginx pod on the labelled node, other pods anywhere.
    let other = pod("other", 100, 100);
    let decisions = Evaluator::new(&profile, &snap)
        .schedule(&[nginx.clone(), other.clone(), nginx.clone()], 0, Deadline::none())
        .unwrap();
    let nodes: Vec<_> = decisions
        .iter()
        .map(|d| match d {
            Decision::Node { node, .. } => node.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(nodes[0], "labelled");
    assert_eq!(nodes[2], "labelled");
    // Without the labelled node the message aggregates the rule's reason as kube-scheduler does.
    let snap = snapshot(vec![node("a", 4000, 1 << 30), node("b", 4000, 1 << 30)]);
    let decisions = Evaluator::new(&profile, &snap)
        .schedule(std::slice::from_ref(&nginx), 0, Deadline::none())
        .unwrap();
    let Decision::Unschedulable(d) = &decisions[0] else {
        panic!("{decisions:?}")
    };
    assert!(
        d.message()
            .starts_with("0/2 nodes are available: 2 node(s) didn't have label test/test."),
        "{}",
        d.message()
    );
}

#[test]
fn a_score_rule_changes_the_ranking() {
    // Equal nodes: without the rule the tie-break decides; with it the shortest name wins.
    let snap = snapshot(vec![
        node("node-long-name", 4000, 1 << 30),
        node("n", 4000, 1 << 30),
        node("node-mid", 4000, 1 << 30),
    ]);
    let profile = with_rules(&[], &[("short-names", "20 - size(node.metadata.name)", 5)]);
    let r = Evaluator::new(&profile, &snap)
        .rank(&pod("p", 100, 100), 0, 0, Deadline::none())
        .unwrap();
    let order: Vec<_> = r.feasible.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(order, ["n", "node-mid", "node-long-name"]);
    let plain = Evaluator::new(&Profile::new(Policy::kube_default()), &snap)
        .rank(&pod("p", 100, 100), 0, 0, Deadline::none())
        .unwrap();
    let total = |r: &Ranking, name: &str| r.feasible.iter().find(|n| n.node == name).unwrap().total;
    // Min-max normalized: the best node gets 100 × weight more, the worst nothing more.
    assert_eq!(total(&r, "n"), total(&plain, "n") + 500);
    assert_eq!(total(&r, "node-long-name"), total(&plain, "node-long-name"));
    // The rule reads what the node already has requested: pods pile up elsewhere.
    let profile = with_rules(&[], &[("emptiest", "-node.status.requested.pods", 100)]);
    let decisions = Evaluator::new(&profile, &snap)
        .schedule(
            &[pod("p1", 1, 1), pod("p2", 1, 1), pod("p3", 1, 1)],
            0,
            Deadline::none(),
        )
        .unwrap();
    let mut nodes: Vec<_> = decisions
        .iter()
        .map(|d| match d {
            Decision::Node { node, .. } => node.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    nodes.sort();
    nodes.dedup();
    assert_eq!(nodes.len(), 3, "each pod on another node");
}

#[test]
fn an_evaluation_error_rejects_the_node_with_a_clear_reason() {
    let mut labelled = node("labelled", 4000, 1 << 30);
    labelled.labels.insert("zone".into(), "a".into());
    let snap = snapshot(vec![node("bare", 4000, 1 << 30), labelled]);
    let profile = with_rules(&[("zone-a", "node.metadata.labels.zone == 'a'", "not in zone a")], &[]);
    let r = Evaluator::new(&profile, &snap)
        .rank(&pod("p", 1, 1), 0, 0, Deadline::none())
        .unwrap();
    assert_eq!(r.feasible.len(), 1);
    let Reason::Rule(reason) = &r.rejected[0].reasons[0] else {
        panic!("{:?}", r.rejected)
    };
    assert!(reason.starts_with("rule zone-a failed: "), "{reason}");
}

#[test]
fn the_plain_pass_takes_rules_read_per_class_or_without_the_pod() {
    let snap = snapshot(vec![node("a", 4000, 1 << 30)]);
    let plain = |profile: &Profile| PodPlan::new(profile, &snap, &pod("p", 1, 1), 0, &Placed::default(), true).plain;
    assert!(plain(&Profile::new(Policy::kube_default())));
    assert!(plain(&with_rules(&[("t", "true", "")], &[])));
    assert!(plain(&with_rules(
        &[(
            "zone",
            "pod.requests.cpu < 10 || node.metadata.labels['zone'] == 'a'",
            ""
        )],
        &[("free", "node.status.allocatable.cpu - node.status.requested.cpu", 1)],
    )));
    // Read per node and per pod: every pod-node pair evaluated, in the general pass.
    assert!(!plain(&with_rules(
        &[("named", "pod.metadata.name != node.metadata.name", "")],
        &[]
    )));
    assert!(!plain(&with_rules(
        &[],
        &[("busy", "pod.requests.cpu * node.status.requested.pods", 1)]
    )));
}

#[test]
fn class_level_rules_answer_as_rules_evaluated_node_by_node() {
    // The same rules, once reading only shared labels (evaluated per class) and once also
    // reading the name (evaluated per node): equal rankings and reasons.
    let nodes: Vec<NodeSpec> = (0..40)
        .map(|k| {
            let mut n = node(&format!("n{k:02}"), 4000, 1 << 30);
            n.labels.insert("zone".into(), ["a", "b", "c"][k % 3].into());
            if k % 4 == 0 {
                n.labels.insert("test/test".into(), String::new());
            }
            n.labels.insert("kubernetes.io/hostname".into(), n.name.clone());
            n
        })
        .collect();
    let snap = snapshot(nodes);
    let by_class = with_rules(
        &[NGINX_RULE],
        &[("zone-a", "node.metadata.labels['zone'] == 'a' ? 10 : 0", 2)],
    );
    let by_node = with_rules(
        &[(
            NGINX_RULE.0,
            "node.metadata.name != '' && (pod.metadata.labels['workload_name'] != 'nginx' || 'test/test' in node.metadata.labels)",
            NGINX_RULE.2,
        )],
        &[("zone-a", "node.metadata.name != '' && node.metadata.labels['zone'] == 'a' ? 10 : 0", 2)],
    );
    let Some(Ok(compiled)) = &by_class.rules else { panic!() };
    assert!(compiled.filters[0].class_level && compiled.scores[0].class_level);
    let Some(Ok(compiled)) = &by_node.rules else { panic!() };
    assert!(!compiled.filters[0].class_level && !compiled.scores[0].class_level);
    let mut nginx = pod("nginx", 100, 100);
    nginx.labels.insert("workload_name".into(), "nginx".into());
    for p in [nginx, pod("other", 100, 100)] {
        let a = Evaluator::new(&by_class, &snap)
            .rank(&p, 0, 0, Deadline::none())
            .unwrap();
        let b = Evaluator::new(&by_node, &snap)
            .rank(&p, 0, 0, Deadline::none())
            .unwrap();
        let view = |r: &Ranking| {
            (
                r.feasible.iter().map(|n| (n.node.clone(), n.total)).collect::<Vec<_>>(),
                r.diagnosis.message(),
            )
        };
        assert_eq!(view(&a), view(&b));
    }
}

/// An extender hook answering from a script: nodes it fails (by name, with the message and
/// whether unresolvable), raw scores by node name (scaled as kube-scheduler scales them with
/// weight 1), or an error. Records the nodes each call was given.
struct ScriptedExtender {
    fail: Vec<(&'static str, &'static str, bool)>,
    scores: Vec<(&'static str, i64)>,
    error: Option<&'static str>,
    /// Pods whose name starts with this are not sent (managedResources' role).
    skip_prefix: &'static str,
    calls: parking_lot::Mutex<Vec<(&'static str, String, Vec<String>)>>,
}

impl ScriptedExtender {
    fn new() -> Self {
        Self {
            fail: vec![],
            scores: vec![],
            error: None,
            skip_prefix: "\u{0}",
            calls: parking_lot::Mutex::new(vec![]),
        }
    }

    fn record(&self, verb: &'static str, snapshot: &Snapshot, pod: &PodSpec, nodes: &[usize]) {
        let names = nodes.iter().map(|&i| snapshot.nodes()[i].spec.name.clone()).collect();
        self.calls.lock().push((verb, pod.name.clone(), names));
    }
}

impl crate::engine::extender::ExtenderHook for ScriptedExtender {
    fn interested(&self, pod: &PodSpec) -> bool {
        !pod.name.starts_with(self.skip_prefix)
    }

    fn filter(
        &self,
        snapshot: &Snapshot,
        pod: &PodSpec,
        nodes: &[usize],
    ) -> Result<crate::engine::extender::ExtenderFiltered, String> {
        self.record("filter", snapshot, pod, nodes);
        if let Some(e) = self.error {
            return Err(e.to_string());
        }
        let mut out = crate::engine::extender::ExtenderFiltered::default();
        for &i in nodes {
            let name = snapshot.nodes()[i].spec.name.as_str();
            match self.fail.iter().find(|(n, ..)| *n == name) {
                Some((_, message, true)) => out.failed_unresolvable.push((i, Arc::from(*message))),
                Some((_, message, false)) => out.failed.push((i, Arc::from(*message))),
                None => out.feasible.push(i),
            }
        }
        Ok(out)
    }

    fn prioritize(&self, snapshot: &Snapshot, pod: &PodSpec, nodes: &[usize]) -> Vec<(usize, i64)> {
        self.record("prioritize", snapshot, pod, nodes);
        nodes
            .iter()
            .filter_map(|&i| {
                let name = snapshot.nodes()[i].spec.name.as_str();
                let score = self.scores.iter().find(|(n, _)| *n == name)?.1;
                Some((
                    i,
                    score * MAX_NODE_SCORE / crate::engine::extender::MAX_EXTENDER_PRIORITY,
                ))
            })
            .collect()
    }
}

#[test]
fn extenders_filter_after_the_plugins_and_their_scores_decide_ties() {
    // c is too small for the pod: the filters reject it before the extender sees it.
    let snap = snapshot(vec![
        node("a", 4000, 8 << 30),
        node("b", 4000, 8 << 30),
        node("c", 100, 8 << 30),
        node("d", 4000, 8 << 30),
    ]);
    let profile = Profile::new(Policy::kube_default());
    let mut hook = ScriptedExtender::new();
    hook.fail = vec![("a", "a is reserved", false), ("b", "b is broken", true)];
    hook.scores = vec![("d", 3)];
    let p = pod("p", 1000, 1 << 30);
    let d = Evaluator::new(&profile, &snap)
        .with_extenders(&hook)
        .schedule(std::slice::from_ref(&p), 0, Deadline::none())
        .unwrap();
    // One node left after the extender: kube-scheduler scores nothing then.
    assert!(
        matches!(&d[0], Decision::Node { node, feasible: 1, .. } if node == "d"),
        "{d:?}"
    );
    let calls = hook.calls.lock().clone();
    assert_eq!(calls.len(), 1, "no prioritize with one node left: {calls:?}");
    assert_eq!(calls[0].2, vec!["a", "b", "d"], "the filters' survivors only");

    // Every node turned down: the extender's messages are counted with the filters' reasons.
    hook.fail.push(("d", "a is reserved", false));
    let d = Evaluator::new(&profile, &snap)
        .with_extenders(&hook)
        .schedule(std::slice::from_ref(&p), 0, Deadline::none())
        .unwrap();
    let Decision::Unschedulable(diag) = &d[0] else {
        panic!("{d:?}")
    };
    assert_eq!(diag.error, None);
    assert!(
        diag.message()
            .starts_with("0/4 nodes are available: 1 Insufficient cpu, 1 b is broken, 2 a is reserved. preemption: "),
        "{}",
        diag.message()
    );
}

#[test]
fn extender_scores_are_added_to_the_plugins_totals() {
    let snap = snapshot(vec![node("a", 4000, 8 << 30), node("b", 4000, 8 << 30)]);
    let profile = Profile::new(Policy::kube_default());
    let p = pod("p", 1000, 1 << 30);
    let plain = Evaluator::new(&profile, &snap)
        .schedule(std::slice::from_ref(&p), 0, Deadline::none())
        .unwrap();
    let Decision::Node {
        node: plain_node,
        score: plain_score,
        ..
    } = &plain[0]
    else {
        panic!("{plain:?}")
    };
    // The extender prefers the node the plugins did not pick, by 5 × 10 points.
    let other: &'static str = if plain_node == "a" { "b" } else { "a" };
    let mut hook = ScriptedExtender::new();
    hook.scores = vec![(other, 5)];
    let d = Evaluator::new(&profile, &snap)
        .with_extenders(&hook)
        .schedule(std::slice::from_ref(&p), 0, Deadline::none())
        .unwrap();
    assert!(
        matches!(&d[0], Decision::Node { node, score, feasible: 2, .. } if node == other && *score == plain_score + 50),
        "{d:?} vs {plain:?}"
    );
}

#[test]
fn a_failed_extender_fails_the_pod_with_its_error_and_uninterested_pods_pass_by() {
    let snap = snapshot(vec![node("a", 4000, 8 << 30), node("b", 4000, 8 << 30)]);
    let profile = Profile::new(Policy::kube_default());
    let mut hook = ScriptedExtender::new();
    hook.error = Some("failed filter with extender at URL http://e/filter, code 500");
    hook.skip_prefix = "other-";
    let pods = [pod("p", 1000, 1 << 30), pod("other-q", 1000, 1 << 30)];
    let d = Evaluator::new(&profile, &snap)
        .with_extenders(&hook)
        .schedule(&pods, 0, Deadline::none())
        .unwrap();
    let Decision::Unschedulable(diag) = &d[0] else {
        panic!("{d:?}")
    };
    assert_eq!(
        diag.message(),
        "failed filter with extender at URL http://e/filter, code 500"
    );
    assert!(diag.reasons.is_empty() && diag.nomination.is_none());
    assert!(
        matches!(&d[1], Decision::Node { .. }),
        "not sent to the extender: {d:?}"
    );
    assert_eq!(hook.calls.lock().len(), 1);
}

#[test]
fn replicas_of_a_workload_each_ask_the_extender_against_the_assumed_usage() {
    // Room for one pod per node; the extender prefers a, then b, then c.
    let snap = snapshot(vec![
        node("a", 1000, 8 << 30),
        node("b", 1000, 8 << 30),
        node("c", 1000, 8 << 30),
    ]);
    let profile = Profile::new(Policy::kube_default());
    let mut hook = ScriptedExtender::new();
    hook.scores = vec![("a", 10), ("b", 5), ("c", 1)];
    // Identical constraints: the engine re-scores only the node the previous replica took.
    let pods: Vec<PodSpec> = (0..3).map(|i| pod(&format!("web-{i}"), 1000, 1 << 30)).collect();
    let d = Evaluator::new(&profile, &snap)
        .with_extenders(&hook)
        .schedule(&pods, 0, Deadline::none())
        .unwrap();
    let placed: Vec<&str> = d
        .iter()
        .map(|d| match d {
            Decision::Node { node, .. } => node.as_str(),
            Decision::Unschedulable(_) => "-",
        })
        .collect();
    assert_eq!(placed, ["a", "b", "c"]);
    let filters: Vec<Vec<String>> = hook
        .calls
        .lock()
        .iter()
        .filter(|c| c.0 == "filter")
        .map(|c| c.2.clone())
        .collect();
    assert_eq!(filters, [vec!["a", "b", "c"], vec!["b", "c"], vec!["c"]]);
}

#[test]
fn extenders_see_the_nodes_the_rules_kept_and_add_to_the_rules_scores() {
    // The label rule keeps nginx on the labelled nodes; a score rule prefers short names; the
    // extender then turns one labelled node down and prefers another.
    let mut nodes = vec![node("a", 4000, 1 << 30)];
    for name in ["t1", "t-long", "t-longer"] {
        let mut n = node(name, 4000, 1 << 30);
        n.labels.insert("test/test".into(), String::new());
        nodes.push(n);
    }
    let snap = snapshot(nodes);
    let profile = with_rules(&[NGINX_RULE], &[("short", "20 - size(node.metadata.name)", 1)]);
    let mut hook = ScriptedExtender::new();
    hook.fail = vec![("t1", "t1 is drained", false)];
    hook.scores = vec![("t-longer", 10)];
    let mut nginx = pod("nginx-1", 100, 100);
    nginx.labels.insert("workload_name".into(), "nginx".into());
    let d = Evaluator::new(&profile, &snap)
        .with_extenders(&hook)
        .schedule(std::slice::from_ref(&nginx), 0, Deadline::none())
        .unwrap();
    // The score rule, normalized over the rule's survivors (t1 18, t-long 14, t-longer 12): t1
    // 100, t-long 33, t-longer 0. Without the extender t1 wins; with it t1 is out and t-longer
    // gets 10 × 10 more than t-long's 33.
    assert!(
        matches!(&d[0], Decision::Node { node, feasible: 2, .. } if node == "t-longer"),
        "{d:?}"
    );
    let plain = Evaluator::new(&profile, &snap)
        .schedule(std::slice::from_ref(&nginx), 0, Deadline::none())
        .unwrap();
    assert!(
        matches!(&plain[0], Decision::Node { node, feasible: 3, .. } if node == "t1"),
        "{plain:?}"
    );
    let calls = hook.calls.lock().clone();
    assert_eq!(
        calls[0].2,
        vec!["t-long", "t-longer", "t1"],
        "the rule's survivors only"
    );
    assert_eq!(
        calls[1].2,
        vec!["t-long", "t-longer"],
        "prioritize on the extender's survivors"
    );
}
