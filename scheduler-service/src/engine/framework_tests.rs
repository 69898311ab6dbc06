//! Plugin tests against kube-scheduler's documented behaviour; expected scores are the ones in
//! kube-scheduler's own plugin tests (`pkg/scheduler/framework/plugins/*/…_test.go`), cited per test.

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::engine::model::{HostPort, PreferredTerm, Protocol, SelectorOp, TaintEffect, TolerationOperator};
use crate::engine::model::{NodeSpec, PodSpec};
use crate::engine::plugins::testing::{label_term, node, only, pod, rank, snapshot, taint, toleration};
use crate::engine::policy::{FilterPlugin as F, ScorePlugin as S};
use crate::engine::policy::{Policy, ScoringStrategy};

// ---- Filters ----

pub(crate) fn arb_host_ports() -> impl Strategy<Value = Vec<HostPort>> {
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
pub(crate) fn host_port((ip, protocol, port): (&str, Protocol, u16)) -> HostPort {
    HostPort {
        ip: Arc::from(ip),
        protocol,
        port,
    }
}

pub(crate) fn arb_any_address_ports() -> impl Strategy<Value = Vec<HostPort>> {
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
                (S::VolumeBinding, 1),
                (S::PodTopologySpread, 2),
                (S::InterPodAffinity, 2),
                (S::DynamicResources, 2),
                (S::NodeResourcesBalancedAllocation, 1),
                (S::ImageLocality, 1)
            ]
        );
    }
    // plain: taint 100×3, affinity 0×2, fit 37, spread 0, inter-pod 0, balanced 68, image 0 = 405.
    // tainted: taint 0×3, affinity 100×2, fit 37, spread 0, inter-pod 0, balanced 68, image 0 = 305.
    // (balanced: 87 with the pod against 100 on the empty node, 50 + (50 + 87 − 100) / 2.)
    let totals: Vec<(String, i64)> = r.feasible.iter().map(|n| (n.node.clone(), n.total)).collect();
    assert_eq!(totals, [("plain".into(), 405), ("tainted".into(), 305)]);
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
pub(crate) fn naive_fits(n: &NodeSpec, placed: &[&PodSpec], p: &PodSpec) -> bool {
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

pub(crate) fn arb_node(i: usize) -> impl Strategy<Value = NodeSpec> {
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

pub(crate) fn arb_pod(i: usize) -> impl Strategy<Value = PodSpec> {
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

pub(crate) fn arb_cluster() -> impl Strategy<Value = (Vec<NodeSpec>, Vec<PodSpec>)> {
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
pub(crate) fn zone_z2_pod_on_z1_cluster() -> (Snapshot, PodSpec) {
    let mut a = node("a", 1000, 1000);
    a.labels.insert("zone".into(), "z1".into());
    let snap = snapshot(vec![a, node("b", 1000, 1000)]);
    let mut p = pod("p", 0, 0);
    p.node_selector = vec![("zone".into(), "z2".into())];
    assert_eq!(rank(&snap, &p).feasible_count, 0);
    (snap, p)
}

/// `snap` with node `a` (1,000 millicores and bytes) moved to `zone`.
pub(crate) fn with_a_in_zone(snap: &Snapshot, zone: &str) -> Snapshot {
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
        full.fast.reuse = false;
        let slow = full.schedule(&batch, seed, Deadline::none()).unwrap();
        prop_assert_eq!(fast, slow);
    }
}

/// A policy with the given CEL rules on top of the default one.
pub(crate) fn with_rules(filters: &[(&str, &str, &str)], scores: &[(&str, &str, i64)]) -> Profile {
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

/// kube-scheduler's `schedulePod` runs the extenders' filters (`findNodesThatPassExtenders`)
/// before `prioritizeNodes`: NodeAffinity's normalization sees only the nodes the extenders kept.
/// Here `a` holds the highest preference and the extender rejects it; over {b, c} b's preference
/// is the maximum (100 × 2) and outweighs c's free resources, while normalized with a (b: 5 × 2)
/// it would not. The decision equals the one on the cluster without `a`.
#[test]
fn extenders_filter_before_the_plugins_score() {
    let mut a = node("a", 4000, 8 << 30);
    let mut b = node("b", 4000, 8 << 30);
    let c = node("c", 64000, 64 << 30);
    a.labels.insert("gold".into(), "".into());
    a.labels.insert("silver".into(), "".into());
    b.labels.insert("silver".into(), "".into());
    let mut p = pod("p", 1000, 1 << 30);
    p.preferred_affinity = vec![
        PreferredTerm {
            weight: 19,
            term: label_term("gold", SelectorOp::Exists),
        },
        PreferredTerm {
            weight: 1,
            term: label_term("silver", SelectorOp::Exists),
        },
    ];
    let profile = Profile::new(Policy::kube_default());
    let mut hook = ScriptedExtender::new();
    hook.fail = vec![("a", "a is reserved", false)];
    let d = Evaluator::new(&profile, &snapshot(vec![a.clone(), b.clone(), c.clone()]))
        .with_extenders(&hook)
        .schedule(std::slice::from_ref(&p), 0, Deadline::none())
        .unwrap();
    let without_a = Evaluator::new(&profile, &snapshot(vec![b.clone(), c.clone()]))
        .schedule(std::slice::from_ref(&p), 0, Deadline::none())
        .unwrap();
    assert!(
        matches!(&d[0], Decision::Node { node, feasible: 2, .. } if node == "b"),
        "{d:?}"
    );
    match (&d[0], &without_a[0]) {
        (Decision::Node { score, .. }, Decision::Node { node, score: s, .. }) => {
            assert_eq!(
                (node.as_str(), *score),
                ("b", *s),
                "the same node and total as without a"
            )
        }
        other => panic!("{other:?}"),
    }
    // The plugins alone (a kept) rank b below c once normalized with a: the extender decided.
    let r = rank(&snapshot(vec![b.clone(), c.clone(), a]), &p);
    let total = |n: &str| r.feasible.iter().find(|f| f.node == n).map(|f| f.total).unwrap();
    assert!(total("b") < total("c"), "{r:?}");

    // Several pods of one batch, the second alike: each is decided on the extenders' nodes.
    let mut q = p.clone();
    q.name = "q".into();
    q.uid = "q".into();
    let d = Evaluator::new(
        &profile,
        &snapshot(vec![node("a", 4000, 8 << 30), b.clone(), c.clone()]),
    )
    .with_extenders(&hook)
    .schedule(&[p.clone(), q.clone()], 0, Deadline::none())
    .unwrap();
    let alone = Evaluator::new(&profile, &snapshot(vec![b, c]))
        .schedule(&[p, q], 0, Deadline::none())
        .unwrap();
    let nodes = |d: &[Decision]| -> Vec<Option<String>> {
        d.iter()
            .map(|d| match d {
                Decision::Node { node, .. } => Some(node.clone()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(nodes(&d), nodes(&alone));
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
