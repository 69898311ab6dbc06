//! InterPodAffinity and PodTopologySpread against kube-scheduler's own test cases
//! (`pkg/scheduler/framework/plugins/{interpodaffinity,podtopologyspread}/*_test.go`), cited per
//! test, and a property test of the required rules against an independent oracle.

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::engine::model::{
    LabelSelector, Labels, NodeInclusionPolicy, PodAffinityTerm, PodAffinityTerms, Requirement, SelectorOp,
    SpreadConstraint, Taint, TaintEffect, WeightedPodAffinityTerm, WhenUnsatisfiable,
};
use crate::engine::model::{NodeSpec, PodSpec};
use crate::engine::policy::Policy;
use crate::engine::policy::{FilterPlugin as F, ScorePlugin as S, WeightedScore};
use crate::engine::resources::Resources;

const HOST: &str = "kubernetes.io/hostname";

fn node(name: &str, labels: &[(&str, &str)]) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        allocatable: Resources {
            milli_cpu: 64_000,
            memory: 1 << 40,
            ..Default::default()
        },
        allowed_pods: 1000,
        ..Default::default()
    }
}

/// A node every pod fails on (no room for a pod): kube's tests' `failedNodes`.
fn full(mut n: NodeSpec) -> NodeSpec {
    n.allowed_pods = 0;
    n
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn pod(uid: &str, l: &[(&str, &str)]) -> PodSpec {
    PodSpec {
        uid: Arc::from(uid),
        namespace: "default".into(),
        name: uid.into(),
        labels: labels(l),
        ..Default::default()
    }
}

fn bound(uid: &str, node: &str, l: &[(&str, &str)]) -> PodSpec {
    PodSpec {
        node_name: Some(node.into()),
        ..pod(uid, l)
    }
}

fn exists(key: &str) -> LabelSelector {
    LabelSelector {
        requirements: vec![Requirement {
            key: key.into(),
            op: SelectorOp::Exists,
        }],
    }
}

fn is_in(key: &str, values: &[&str]) -> LabelSelector {
    LabelSelector {
        requirements: vec![Requirement {
            key: key.into(),
            op: SelectorOp::In(values.iter().map(|v| v.to_string()).collect()),
        }],
    }
}

fn term(selector: LabelSelector, key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        selector: Some(selector),
        topology_key: key.into(),
        ..Default::default()
    }
}

fn required(terms: Vec<PodAffinityTerm>) -> PodAffinityTerms {
    PodAffinityTerms {
        required: terms,
        preferred: vec![],
    }
}

fn preferred(weight: i64, t: PodAffinityTerm) -> PodAffinityTerms {
    PodAffinityTerms {
        required: vec![],
        preferred: vec![WeightedPodAffinityTerm { weight, term: t }],
    }
}

fn spread(max_skew: i32, key: &str, when: WhenUnsatisfiable, selector: LabelSelector) -> SpreadConstraint {
    SpreadConstraint {
        max_skew,
        topology_key: key.into(),
        when_unsatisfiable: when,
        selector: Some(selector),
        min_domains: 1,
        node_affinity_policy: NodeInclusionPolicy::Honor,
        node_taints_policy: NodeInclusionPolicy::Ignore,
        match_label_keys: vec![],
    }
}

fn rank_in(snap: &Snapshot, p: &PodSpec) -> Ranking {
    let profile = Profile::new(Policy::kube_default());
    Evaluator::new(&profile, snap).rank(p, 0, 0, Deadline::none()).unwrap()
}

/// Feasible node names, sorted.
fn feasible(snap: &Snapshot, p: &PodSpec) -> Vec<String> {
    let mut v: Vec<String> = rank_in(snap, p).feasible.into_iter().map(|n| n.node).collect();
    v.sort();
    v
}

/// The rejection of one node: (filter, reason strings).
fn rejection(snap: &Snapshot, p: &PodSpec, name: &str) -> Option<(F, Vec<String>)> {
    rank_in(snap, p)
        .rejected
        .into_iter()
        .find(|r| r.name(snap) == name)
        .map(|r| (r.plugin, r.reasons.iter().map(ToString::to_string).collect()))
}

/// Normalized scores of one plugin alone (weight 1), by node name.
fn plugin_scores(plugin: S, snap: &Snapshot, p: &PodSpec) -> Vec<(String, i64)> {
    let profile = Profile::new(Policy {
        scores: vec![WeightedScore { plugin, weight: 1 }],
        ..Policy::kube_default()
    });
    let r = Evaluator::new(&profile, snap).rank(p, 0, 0, Deadline::none()).unwrap();
    let mut v: Vec<(String, i64)> = r.feasible.into_iter().map(|n| (n.node, n.total)).collect();
    v.sort();
    v
}

fn named(v: &[(&str, i64)]) -> Vec<(String, i64)> {
    v.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

// ---- InterPodAffinity: filter (interpodaffinity/filtering_test.go) ----

fn region_nodes() -> Vec<NodeSpec> {
    vec![
        node("node1", &[("region", "r1"), ("zone", "z11"), (HOST, "node1")]),
        node("node2", &[("region", "r1"), ("zone", "z12"), (HOST, "node2")]),
        node("node3", &[("region", "r2"), ("zone", "z21"), (HOST, "node3")]),
    ]
}

#[test]
fn affinity_in_operator_matching_an_existing_pod_admits_its_topology() {
    // "satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator
    // that matches the existing pod": every node of the existing pod's region fits.
    let snap = Snapshot::build(
        region_nodes(),
        vec![bound("e", "node1", &[("service", "securityscan")])],
    )
    .unwrap();
    let mut p = pod("p", &[]);
    p.pod_affinity = required(vec![term(is_in("service", &["securityscan", "value2"]), "region")]);
    assert_eq!(feasible(&snap, &p), ["node1", "node2"]);
    assert_eq!(
        rejection(&snap, &p, "node3"),
        Some((
            F::InterPodAffinity,
            vec!["node(s) didn't match pod affinity rules".to_string()]
        ))
    );
}

#[test]
fn affinity_without_a_matching_pod_rejects_unless_the_pod_matches_itself() {
    // "doesn't satisfy ... PodAffinity" and "the first pod of a series that have affinity to
    // themselves" (satisfyPodAffinity's fallback).
    let snap = Snapshot::build(region_nodes(), vec![bound("e", "node1", &[("service", "other")])]).unwrap();
    let mut p = pod("p", &[]);
    p.pod_affinity = required(vec![term(is_in("service", &["securityscan"]), "region")]);
    let r = rank_in(&snap, &p);
    assert_eq!(r.feasible_count, 0);
    assert_eq!(
        r.diagnosis.message(),
        "0/3 nodes are available: 3 node(s) didn't match pod affinity rules. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    let mut first = pod("p", &[("service", "securityscan")]);
    first.pod_affinity = p.pod_affinity.clone();
    assert_eq!(feasible(&snap, &first), ["node1", "node2", "node3"]);
    // The fallback still needs every topology key on the node.
    let snap = Snapshot::build(vec![node("bare", &[])], vec![]).unwrap();
    assert!(feasible(&snap, &first).is_empty());
}

#[test]
fn once_a_pod_matches_the_fallback_no_longer_applies() {
    // A matching pod exists in region r1 only: the self-matching pod must join it there.
    let snap = Snapshot::build(
        region_nodes(),
        vec![bound("e", "node1", &[("service", "securityscan")])],
    )
    .unwrap();
    let mut p = pod("p", &[("service", "securityscan")]);
    p.pod_affinity = required(vec![term(is_in("service", &["securityscan"]), "region")]);
    assert_eq!(feasible(&snap, &p), ["node1", "node2"]);
}

#[test]
fn affinity_terms_are_anded_and_all_must_match_one_pod() {
    // "satisfies the PodAffinity and PodAntiAffinity" style: two terms, both matched by the same pod.
    let snap = Snapshot::build(
        region_nodes(),
        vec![
            bound("e1", "node1", &[("service", "securityscan")]),
            bound("e2", "node3", &[("team", "a")]),
        ],
    )
    .unwrap();
    let mut p = pod("p", &[]);
    p.pod_affinity = required(vec![
        term(is_in("service", &["securityscan"]), "region"),
        term(is_in("team", &["a"]), "region"),
    ]);
    assert!(feasible(&snap, &p).is_empty(), "no single pod matches both terms");
}

#[test]
fn anti_affinity_rejects_the_topology_of_a_matching_pod() {
    let snap = Snapshot::build(
        region_nodes(),
        vec![bound("e", "node1", &[("service", "securityscan")])],
    )
    .unwrap();
    let mut p = pod("p", &[]);
    p.pod_anti_affinity = required(vec![term(is_in("service", &["securityscan"]), "zone")]);
    assert_eq!(feasible(&snap, &p), ["node2", "node3"]);
    assert_eq!(
        rejection(&snap, &p, "node1"),
        Some((
            F::InterPodAffinity,
            vec!["node(s) didn't match pod anti-affinity rules".to_string()]
        ))
    );
    // A node lacking the key is never rejected by anti-affinity.
    let snap = Snapshot::build(
        vec![node("a", &[]), node("b", &[("zone", "z")])],
        vec![bound("e", "b", &[("service", "securityscan")])],
    )
    .unwrap();
    assert_eq!(feasible(&snap, &p), ["a"]);
}

#[test]
fn existing_pods_anti_affinity_is_symmetric() {
    // "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity
    // constraints": the existing pod's term matches the incoming pod.
    let mut e = bound("e", "node1", &[("service", "securityscan")]);
    e.pod_anti_affinity = required(vec![term(is_in("app", &["web"]), "region")]);
    let snap = Snapshot::build(region_nodes(), vec![e]).unwrap();
    let p = pod("p", &[("app", "web")]);
    assert_eq!(feasible(&snap, &p), ["node3"]);
    assert_eq!(
        rejection(&snap, &p, "node2"),
        Some((
            F::InterPodAffinity,
            vec!["node(s) didn't satisfy existing pods anti-affinity rules".to_string()]
        ))
    );
    assert_eq!(
        feasible(&snap, &pod("q", &[("app", "db")])).len(),
        3,
        "non-matching pods are free"
    );
}

#[test]
fn namespaces_and_namespace_selectors_decide_which_pods_count() {
    let mut other = bound("e", "node1", &[("service", "s")]);
    other.namespace = "team-a".into();
    let snap = Snapshot::build_with_namespaces(
        region_nodes(),
        vec![other],
        vec![
            ("team-a".into(), labels(&[("team", "a")])),
            ("default".into(), labels(&[])),
        ],
    )
    .unwrap();
    let mut p = pod("p", &[]);
    // Default: the pod's own namespace only.
    p.pod_anti_affinity = required(vec![term(is_in("service", &["s"]), "region")]);
    assert_eq!(feasible(&snap, &p).len(), 3);
    // By name.
    p.pod_anti_affinity.required[0].namespaces = vec!["team-a".into()];
    assert_eq!(feasible(&snap, &p), ["node3"]);
    // By namespace labels.
    p.pod_anti_affinity.required[0].namespaces.clear();
    p.pod_anti_affinity.required[0].namespace_selector = Some(is_in("team", &["a"]));
    assert_eq!(feasible(&snap, &p), ["node3"]);
    // An empty namespace selector selects every namespace.
    p.pod_anti_affinity.required[0].namespace_selector = Some(LabelSelector::default());
    assert_eq!(feasible(&snap, &p), ["node3"]);
    p.pod_anti_affinity.required[0].namespace_selector = Some(is_in("team", &["b"]));
    assert_eq!(feasible(&snap, &p).len(), 3);
}

#[test]
fn a_nil_label_selector_matches_no_pod() {
    let snap = Snapshot::build(region_nodes(), vec![bound("e", "node1", &[("service", "s")])]).unwrap();
    let mut p = pod("p", &[]);
    p.pod_anti_affinity = required(vec![PodAffinityTerm {
        selector: None,
        topology_key: "region".into(),
        ..Default::default()
    }]);
    assert_eq!(feasible(&snap, &p).len(), 3);
    p.pod_anti_affinity.required[0].selector = Some(LabelSelector::default());
    assert_eq!(feasible(&snap, &p), ["node3"], "an empty selector matches every pod");
}

// ---- InterPodAffinity: score (interpodaffinity/scoring_test.go) ----

fn score_nodes() -> Vec<NodeSpec> {
    vec![
        node("node1", &[("region", "China")]),
        node("node2", &[("region", "India")]),
        node("node3", &[("az", "az1")]),
    ]
}

#[test]
fn preferred_affinity_scores_the_matching_topology_highest() {
    // "Affinity: pod that matches topology key & pods in nodes will get high score comparing to
    // others which doesn't match either pods in nodes or in topology key".
    let snap = Snapshot::build(score_nodes(), vec![bound("e", "node1", &[("security", "S1")])]).unwrap();
    let mut p = pod("p", &[]);
    p.pod_affinity = preferred(5, term(is_in("security", &["S1"]), "region"));
    assert_eq!(
        plugin_scores(S::InterPodAffinity, &snap, &p),
        named(&[("node1", 100), ("node2", 0), ("node3", 0)])
    );
}

#[test]
fn preferred_anti_affinity_scores_the_matching_topology_lowest() {
    // "Anti Affinity: pod that does not match existing pods in node will get high score".
    let snap = Snapshot::build(score_nodes(), vec![bound("e", "node1", &[("security", "S1")])]).unwrap();
    let mut p = pod("p", &[]);
    p.pod_anti_affinity = preferred(5, term(is_in("security", &["S1"]), "region"));
    assert_eq!(
        plugin_scores(S::InterPodAffinity, &snap, &p),
        named(&[("node1", 0), ("node2", 100), ("node3", 100)])
    );
}

#[test]
fn affinity_and_anti_affinity_combine_with_their_weights() {
    // Affinity weight 8 to S1 (on node1, China), anti-affinity weight 5 to S2 (on node2, India):
    // raw China 8, India −5, az-only node 0 → min-max normalized 100, 0, 38.
    let snap = Snapshot::build(
        score_nodes(),
        vec![
            bound("e1", "node1", &[("security", "S1")]),
            bound("e2", "node2", &[("security", "S2")]),
        ],
    )
    .unwrap();
    let mut p = pod("p", &[]);
    p.pod_affinity = preferred(8, term(is_in("security", &["S1"]), "region"));
    p.pod_anti_affinity = preferred(5, term(is_in("security", &["S2"]), "region"));
    assert_eq!(
        plugin_scores(S::InterPodAffinity, &snap, &p),
        named(&[("node1", 100), ("node2", 0), ("node3", 38)])
    );
}

#[test]
fn existing_pods_required_affinity_counts_with_hard_pod_affinity_weight() {
    // "Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in pod affinity
    // symmetry" with hardPodAffinityWeight 1; 0 turns it off.
    let mut e = bound("e", "node1", &[]);
    e.pod_affinity = required(vec![term(is_in("app", &["web"]), "region")]);
    let snap = Snapshot::build(score_nodes(), vec![e]).unwrap();
    let p = pod("p", &[("app", "web")]);
    assert_eq!(
        plugin_scores(S::InterPodAffinity, &snap, &p),
        named(&[("node1", 100), ("node2", 0), ("node3", 0)])
    );
    let mut policy = Policy {
        scores: vec![WeightedScore {
            plugin: S::InterPodAffinity,
            weight: 1,
        }],
        ..Policy::kube_default()
    };
    policy.inter_pod_affinity.hard_pod_affinity_weight = 0;
    let profile = Profile::new(policy);
    let r = Evaluator::new(&profile, &snap)
        .rank(&p, 0, 0, Deadline::none())
        .unwrap();
    assert!(r.feasible.iter().all(|n| n.total == 0));
}

#[test]
fn existing_pods_preferred_terms_count_unless_ignored() {
    // Existing pod prefers pods labelled app=web in its region (weight 10) and avoids app=db.
    let mut e = bound("e", "node2", &[]);
    e.pod_affinity = preferred(10, term(is_in("app", &["web"]), "region"));
    e.pod_anti_affinity = preferred(10, term(is_in("app", &["db"]), "region"));
    let snap = Snapshot::build(score_nodes(), vec![e]).unwrap();
    assert_eq!(
        plugin_scores(S::InterPodAffinity, &snap, &pod("p", &[("app", "web")])),
        named(&[("node1", 0), ("node2", 100), ("node3", 0)])
    );
    assert_eq!(
        plugin_scores(S::InterPodAffinity, &snap, &pod("p", &[("app", "db")])),
        named(&[("node1", 100), ("node2", 0), ("node3", 100)])
    );
    let mut policy = Policy {
        scores: vec![WeightedScore {
            plugin: S::InterPodAffinity,
            weight: 1,
        }],
        ..Policy::kube_default()
    };
    policy.inter_pod_affinity.ignore_preferred_terms_of_existing_pods = true;
    let profile = Profile::new(policy);
    let r = Evaluator::new(&profile, &snap)
        .rank(&pod("p", &[("app", "web")]), 0, 0, Deadline::none())
        .unwrap();
    assert!(r.feasible.iter().all(|n| n.total == 0));
}

// ---- PodTopologySpread: filter (podtopologyspread/filtering_test.go) ----

fn four_nodes() -> Vec<NodeSpec> {
    vec![
        node("node-a", &[("zone", "zone1"), (HOST, "node-a")]),
        node("node-b", &[("zone", "zone1"), (HOST, "node-b")]),
        node("node-x", &[("zone", "zone2"), (HOST, "node-x")]),
        node("node-y", &[("zone", "zone2"), (HOST, "node-y")]),
    ]
}

fn foo_pods(spec: &[(&str, usize)]) -> Vec<PodSpec> {
    let mut out = Vec::new();
    for (node, n) in spec {
        for i in 0..*n {
            out.push(bound(&format!("p-{node}-{i}"), node, &[("foo", "")]));
        }
    }
    out
}

fn hard(max_skew: i32, key: &str) -> PodSpec {
    let mut p = pod("p", &[("foo", "")]);
    p.spread_constraints = vec![spread(max_skew, key, WhenUnsatisfiable::DoNotSchedule, exists("foo"))];
    p
}

#[test]
fn spread_with_no_existing_pods_admits_every_node() {
    let snap = Snapshot::build(four_nodes(), vec![]).unwrap();
    assert_eq!(feasible(&snap, &hard(1, "zone")).len(), 4);
}

#[test]
fn spread_across_nodes_2_1_0_3_admits_only_the_empty_node() {
    // "pods spread across nodes as 2/1/0/3, only node-x fits" and maxSkew 2: node-b and node-x.
    let snap = Snapshot::build(four_nodes(), foo_pods(&[("node-a", 2), ("node-b", 1), ("node-y", 3)])).unwrap();
    assert_eq!(feasible(&snap, &hard(1, HOST)), ["node-x"]);
    assert_eq!(feasible(&snap, &hard(2, HOST)), ["node-b", "node-x"]);
    assert_eq!(
        rejection(&snap, &hard(1, HOST), "node-a"),
        Some((
            F::PodTopologySpread,
            vec!["node(s) didn't match pod topology spread constraints".to_string()]
        ))
    );
}

#[test]
fn spread_counts_pods_of_the_pods_namespace_only() {
    // "existing pods in a different namespace do not count".
    let mut pods = foo_pods(&[("node-a", 2)]);
    for p in &mut pods {
        p.namespace = "ns2".into();
    }
    let snap = Snapshot::build(four_nodes(), pods).unwrap();
    assert_eq!(feasible(&snap, &hard(1, HOST)).len(), 4);
}

#[test]
fn a_node_missing_the_topology_key_is_rejected_with_its_own_reason() {
    // "pods spread across zones as 1/2 due to absence of label 'zone' on node-b".
    let mut nodes = four_nodes();
    nodes[1].labels.remove("zone");
    let snap = Snapshot::build(nodes, foo_pods(&[("node-a", 1), ("node-x", 2)])).unwrap();
    let p = hard(1, "zone");
    assert_eq!(feasible(&snap, &p), ["node-a"]);
    let r = rank_in(&snap, &p);
    assert_eq!(r.diagnosis.node_count, 4);
    assert_eq!(
        rejection(&snap, &p, "node-b"),
        Some((
            F::PodTopologySpread,
            vec!["node(s) didn't match pod topology spread constraints (missing required label)".to_string()]
        ))
    );
    let mut full_nodes = four_nodes();
    full_nodes[0] = full(full_nodes[0].clone());
    full_nodes[1].labels.remove("zone");
    let snap = Snapshot::build(full_nodes, foo_pods(&[("node-a", 1), ("node-x", 2)])).unwrap();
    assert_eq!(
        rank_in(&snap, &p).diagnosis.message(),
        "0/4 nodes are available: 1 Too many pods, 1 node(s) didn't match pod topology spread constraints \
         (missing required label), 2 node(s) didn't match pod topology spread constraints. preemption: \
         0/4 nodes are available: 1 Preemption is not helpful for scheduling, 3 No preemption victims \
         found for incoming pod."
    );
}

#[test]
fn min_domains_treats_the_global_minimum_as_zero() {
    // "pods spread across zone as 2/1, maxSkew is 2, minDomains 3": with fewer domains than
    // minDomains the global minimum is 0, so zone1 (2 + 1 − 0 > 2) is rejected.
    let snap = Snapshot::build(four_nodes(), foo_pods(&[("node-a", 2), ("node-x", 1)])).unwrap();
    let mut p = hard(2, "zone");
    assert_eq!(
        feasible(&snap, &p).len(),
        4,
        "minDomains 1: minimum is 1, skew 2 everywhere"
    );
    p.spread_constraints[0].min_domains = 3;
    assert_eq!(feasible(&snap, &p), ["node-x", "node-y"]);
    p.spread_constraints[0].min_domains = 2;
    assert_eq!(feasible(&snap, &p).len(), 4, "two domains satisfy minDomains 2");
}

#[test]
fn node_affinity_policy_decides_whether_unselectable_domains_count() {
    // NodeAffinityPolicy Honor (default) ignores domains the pod cannot select; Ignore counts them.
    let nodes = vec![
        node("a", &[("zone", "z1"), ("pool", "main")]),
        node("b", &[("zone", "z2"), ("pool", "other")]),
        node("c", &[("zone", "z3"), ("pool", "main")]),
    ];
    let snap = Snapshot::build(nodes, foo_pods(&[("a", 1), ("c", 1)])).unwrap();
    let mut p = hard(1, "zone");
    p.node_selector = vec![("pool".into(), "main".into())];
    assert_eq!(feasible(&snap, &p), ["a", "c"]);
    p.spread_constraints[0].node_affinity_policy = NodeInclusionPolicy::Ignore;
    assert!(
        feasible(&snap, &p).is_empty(),
        "the empty zone z2 now sets the minimum to 0"
    );
}

#[test]
fn node_taints_policy_decides_whether_tainted_domains_count() {
    let mut b = node("b", &[("zone", "z2")]);
    b.taints = vec![Taint {
        key: "dedicated".into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    }];
    let nodes = vec![node("a", &[("zone", "z1")]), b, node("c", &[("zone", "z3")])];
    let snap = Snapshot::build(nodes, foo_pods(&[("a", 1), ("c", 1)])).unwrap();
    let mut p = hard(1, "zone");
    assert!(
        feasible(&snap, &p).is_empty(),
        "Ignore (default): the tainted zone counts"
    );
    p.spread_constraints[0].node_taints_policy = NodeInclusionPolicy::Honor;
    assert_eq!(feasible(&snap, &p), ["a", "c"]);
}

#[test]
fn match_label_keys_narrow_the_selector_to_the_pods_values() {
    let mut pods = foo_pods(&[("node-a", 1)]);
    pods[0].labels.insert("version".into(), "v1".into());
    let snap = Snapshot::build(four_nodes(), pods).unwrap();
    let mut p = hard(1, HOST);
    p.labels.insert("version".into(), "v2".into());
    assert_eq!(feasible(&snap, &p).len(), 3, "without matchLabelKeys the v1 pod counts");
    p.spread_constraints[0].match_label_keys = vec!["version".into()];
    assert_eq!(feasible(&snap, &p).len(), 4, "with it only v2 pods count");
}

#[test]
fn a_pod_not_matching_its_own_selector_adds_no_skew() {
    let snap = Snapshot::build(four_nodes(), foo_pods(&[("node-a", 1)])).unwrap();
    let mut p = hard(1, HOST);
    p.labels.clear();
    assert_eq!(feasible(&snap, &p).len(), 4);
}

// ---- PodTopologySpread: score (podtopologyspread/scoring_test.go) ----

fn soft(max_skew: i32, key: &str, selector: LabelSelector) -> SpreadConstraint {
    spread(max_skew, key, WhenUnsatisfiable::ScheduleAnyway, selector)
}

fn host_nodes(names: &[&str]) -> Vec<NodeSpec> {
    names.iter().map(|n| node(n, &[(HOST, n)])).collect()
}

#[test]
fn spread_scores_match_kube_scheduler_for_one_hostname_constraint() {
    // "one constraint on node, all 4 nodes are candidates, maxSkew=2" (2/1/0/3) and "maxSkew=3" (4/3/2/1).
    let nodes = host_nodes(&["node-a", "node-b", "node-c", "node-d"]);
    let snap = Snapshot::build(nodes.clone(), foo_pods(&[("node-a", 2), ("node-b", 1), ("node-d", 3)])).unwrap();
    let mut p = pod("p", &[("foo", "")]);
    p.spread_constraints = vec![soft(2, HOST, exists("foo"))];
    assert_eq!(
        plugin_scores(S::PodTopologySpread, &snap, &p),
        named(&[("node-a", 33), ("node-b", 66), ("node-c", 100), ("node-d", 16)])
    );
    let snap = Snapshot::build(
        nodes,
        foo_pods(&[("node-a", 4), ("node-b", 3), ("node-c", 2), ("node-d", 1)]),
    )
    .unwrap();
    p.spread_constraints = vec![soft(3, HOST, exists("foo"))];
    assert_eq!(
        plugin_scores(S::PodTopologySpread, &snap, &p),
        named(&[("node-a", 44), ("node-b", 66), ("node-c", 77), ("node-d", 100)])
    );
    // "system defaulting, nodes don't have zone, pods match service": the same scores.
    let mut d = pod("p", &[("foo", "")]);
    d.default_spread_selector = Some(LabelSelector::from_labels([("foo", "")]));
    assert_eq!(
        plugin_scores(S::PodTopologySpread, &snap, &d),
        named(&[("node-a", 44), ("node-b", 66), ("node-c", 77), ("node-d", 100)])
    );
}

#[test]
fn spread_scores_only_count_domains_of_feasible_nodes() {
    // "one constraint on node, 3 out of 4 nodes are candidates" (4/2/1/~3~) and the variant where
    // node-b lacks the key (ignored: 0).
    let mut nodes = host_nodes(&["node-a", "node-b", "node-x"]);
    nodes.push(full(node("node-y", &[(HOST, "node-y")])));
    let pods = foo_pods(&[("node-a", 4), ("node-b", 2), ("node-x", 1), ("node-y", 3)]);
    let snap = Snapshot::build(nodes.clone(), pods.clone()).unwrap();
    let mut p = pod("p", &[("foo", "")]);
    p.spread_constraints = vec![soft(1, HOST, exists("foo"))];
    assert_eq!(
        plugin_scores(S::PodTopologySpread, &snap, &p),
        named(&[("node-a", 33), ("node-b", 83), ("node-x", 100)])
    );
    nodes[1].labels = labels(&[("n", "node-b")]).into_iter().collect();
    let snap = Snapshot::build(nodes, pods).unwrap();
    assert_eq!(
        plugin_scores(S::PodTopologySpread, &snap, &p),
        named(&[("node-a", 16), ("node-b", 0), ("node-x", 100)])
    );
}

#[test]
fn spread_scores_match_kube_scheduler_for_zone_and_two_constraints() {
    // "one constraint on zone, 3 out of 4 nodes are candidates": 75/75/100.
    let mut nodes = four_nodes();
    nodes[3] = full(nodes[3].clone());
    let pods = foo_pods(&[("node-a", 4), ("node-b", 2), ("node-x", 1), ("node-y", 3)]);
    let snap = Snapshot::build(nodes, pods).unwrap();
    let mut p = pod("p", &[("foo", "")]);
    p.spread_constraints = vec![soft(1, "zone", exists("foo"))];
    assert_eq!(
        plugin_scores(S::PodTopologySpread, &snap, &p),
        named(&[("node-a", 75), ("node-b", 75), ("node-x", 100)])
    );
    // "two Constraints on zone and node, with different labelSelectors": 60/20/100/60.
    let pods = vec![
        bound("p-a1", "node-a", &[("foo", "")]),
        bound("p-b1", "node-b", &[("foo", ""), ("bar", "")]),
        bound("p-y1", "node-y", &[("foo", "")]),
        bound("p-y2", "node-y", &[("bar", "")]),
    ];
    let snap = Snapshot::build(four_nodes(), pods).unwrap();
    let mut p = pod("p", &[("foo", ""), ("bar", "")]);
    p.spread_constraints = vec![soft(1, "zone", exists("foo")), soft(1, HOST, exists("bar"))];
    assert_eq!(
        plugin_scores(S::PodTopologySpread, &snap, &p),
        named(&[("node-a", 60), ("node-b", 20), ("node-x", 100), ("node-y", 60)])
    );
    // "two Constraints on zone and node, 2 out of 4 nodes are candidates": 100/63.
    let mut nodes = four_nodes();
    nodes[1] = full(nodes[1].clone());
    nodes[3] = full(nodes[3].clone());
    let pods = foo_pods(&[("node-a", 2), ("node-b", 1), ("node-x", 2), ("node-y", 4)]);
    let snap = Snapshot::build(nodes, pods).unwrap();
    let mut p = pod("p", &[("foo", "")]);
    p.spread_constraints = vec![soft(1, "zone", exists("foo")), soft(1, HOST, exists("foo"))];
    assert_eq!(
        plugin_scores(S::PodTopologySpread, &snap, &p),
        named(&[("node-a", 100), ("node-x", 63)])
    );
}

#[test]
fn pods_without_constraints_or_workload_score_zero_for_spread() {
    let snap = Snapshot::build(four_nodes(), foo_pods(&[("node-a", 3)])).unwrap();
    let scores = plugin_scores(S::PodTopologySpread, &snap, &pod("p", &[("foo", "")]));
    assert!(scores.iter().all(|(_, s)| *s == 0), "{scores:?}");
}

// ---- Schedule: pods placed earlier in the batch count ----

#[test]
fn a_batch_honours_anti_affinity_between_its_own_pods() {
    let snap = Snapshot::build(four_nodes(), vec![]).unwrap();
    let profile = Profile::new(Policy::kube_default());
    let batch: Vec<PodSpec> = (0..5)
        .map(|i| {
            let mut p = pod(&format!("web-{i}"), &[("app", "web")]);
            p.pod_anti_affinity = required(vec![term(is_in("app", &["web"]), HOST)]);
            p
        })
        .collect();
    let out = Evaluator::new(&profile, &snap)
        .schedule(&batch, 7, Deadline::none())
        .unwrap();
    let mut nodes: Vec<String> = out
        .iter()
        .filter_map(|d| match d {
            Decision::Node { node, .. } => Some(node.clone()),
            Decision::Unschedulable(_) => None,
        })
        .collect();
    nodes.sort();
    assert_eq!(nodes, ["node-a", "node-b", "node-x", "node-y"], "one per node");
    match &out[4] {
        Decision::Unschedulable(d) => assert_eq!(
            d.message(),
            "0/4 nodes are available: 4 node(s) didn't match pod anti-affinity rules. preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod."
        ),
        other => panic!("the fifth replica has no node left: {other:?}"),
    }
}

#[test]
fn a_batch_spreads_by_zone_with_the_pods_placed_before() {
    let snap = Snapshot::build(four_nodes(), vec![]).unwrap();
    let profile = Profile::new(Policy::kube_default());
    let batch: Vec<PodSpec> = (0..6)
        .map(|i| {
            let mut p = hard(1, "zone");
            p.uid = Arc::from(format!("p{i}").as_str());
            p
        })
        .collect();
    let out = Evaluator::new(&profile, &snap)
        .schedule(&batch, 3, Deadline::none())
        .unwrap();
    let zone1 = out
        .iter()
        .filter(|d| matches!(d, Decision::Node { node, .. } if node == "node-a" || node == "node-b"))
        .count();
    assert_eq!(zone1, 3, "{out:?}");
}

// ---- Property: no placement breaks a required rule ----

/// Independent oracle: whether placing `p` on `n` keeps every required rule, given the pods on
/// nodes (`on`: (node index, pod)). Written from the Kubernetes documentation's definitions.
fn oracle_ok(nodes: &[NodeSpec], on: &[(usize, &PodSpec)], p: &PodSpec, n: usize) -> bool {
    let val = |i: usize, k: &str| nodes[i].labels.get(k).cloned();
    let same = |i: usize, j: usize, k: &str| val(i, k).is_some() && val(i, k) == val(j, k);
    let sel = |s: &Option<LabelSelector>, l: &Labels| s.as_ref().is_some_and(|s| s.matches(l));
    let ns_ok = |t: &PodAffinityTerm, owner: &str, other: &str| {
        if t.namespaces.is_empty() && t.namespace_selector.is_none() {
            owner == other
        } else {
            t.namespaces.iter().any(|x| x == other)
        }
    };
    // Incoming required anti-affinity.
    for t in &p.pod_anti_affinity.required {
        if on.iter().any(|(j, q)| {
            same(n, *j, &t.topology_key) && ns_ok(t, &p.namespace, &q.namespace) && sel(&t.selector, &q.labels)
        }) {
            return false;
        }
    }
    // Existing pods' required anti-affinity.
    for (j, q) in on {
        for t in &q.pod_anti_affinity.required {
            if same(n, *j, &t.topology_key) && ns_ok(t, &q.namespace, &p.namespace) && sel(&t.selector, &p.labels) {
                return false;
            }
        }
    }
    // Incoming required affinity: some pod in the domain matches all terms, or no pod anywhere
    // matches them and the pod matches itself.
    let req = &p.pod_affinity.required;
    if !req.is_empty() {
        if req.iter().any(|t| val(n, &t.topology_key).is_none()) {
            return false;
        }
        let matches_all = |q: &PodSpec| {
            req.iter()
                .all(|t| ns_ok(t, &p.namespace, &q.namespace) && sel(&t.selector, &q.labels))
        };
        let here = req
            .iter()
            .all(|t| on.iter().any(|(j, q)| same(n, *j, &t.topology_key) && matches_all(q)));
        let anywhere = on
            .iter()
            .any(|(j, q)| matches_all(q) && req.iter().any(|t| val(*j, &t.topology_key).is_some()));
        if !here && (anywhere || !matches_all(p)) {
            return false;
        }
    }
    // DoNotSchedule spread (default policies: node affinity honoured, taints ignored).
    for c in p
        .spread_constraints
        .iter()
        .filter(|c| c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
    {
        let keys: Vec<&str> = p.spread_constraints.iter().map(|c| c.topology_key.as_str()).collect();
        let eligible =
            |i: usize| keys.iter().all(|k| val(i, k).is_some()) && p.matches_node_selector_and_affinity(&nodes[i]);
        let Some(v) = val(n, &c.topology_key) else {
            return false;
        };
        let mut domains: std::collections::BTreeMap<String, i64> = std::collections::BTreeMap::new();
        for i in (0..nodes.len()).filter(|i| eligible(*i)) {
            domains.entry(val(i, &c.topology_key).unwrap_or_default()).or_insert(0);
        }
        for (j, q) in on {
            if eligible(*j) && q.namespace == p.namespace && sel(&c.selector, &q.labels) {
                *domains.entry(val(*j, &c.topology_key).unwrap_or_default()).or_insert(0) += 1;
            }
        }
        let min = if (domains.len() as i64) < i64::from(c.min_domains) {
            0
        } else {
            domains.values().copied().min().unwrap_or(0)
        };
        let here = domains.get(&v).copied().unwrap_or(0);
        if here + i64::from(sel(&c.selector, &p.labels)) - min > i64::from(c.max_skew) {
            return false;
        }
    }
    true
}

fn arb_topo_node(i: usize) -> impl Strategy<Value = NodeSpec> {
    (0..3usize, 0..3usize, any::<bool>()).prop_map(move |(zone, rack, has_zone)| {
        let name = format!("n{i}");
        let mut l = vec![
            (HOST.to_string(), name.clone()),
            ("rack".to_string(), format!("r{rack}")),
        ];
        if has_zone {
            l.push(("zone".to_string(), format!("z{zone}")));
        }
        let mut n = node(&name, &[]);
        n.labels = l.into_iter().collect();
        n.allowed_pods = 6;
        n
    })
}

fn arb_topo_pod(i: usize) -> impl Strategy<Value = PodSpec> {
    let key = prop_oneof![Just(HOST), Just("zone"), Just("rack")];
    (
        0..3usize,
        0..2usize,
        proptest::option::of((0..3usize, key.clone())),
        proptest::option::of((0..3usize, key.clone())),
        proptest::option::of((1..3i32, key, 1..4i32)),
    )
        .prop_map(move |(app, ns, anti, aff, spr)| {
            let app_label = format!("a{app}");
            let mut p = pod(&format!("p{i}"), &[("app", app_label.as_str())]);
            p.namespace = format!("ns{ns}");
            if let Some((target, key)) = anti {
                p.pod_anti_affinity = required(vec![term(is_in("app", &[&format!("a{target}")]), key)]);
            }
            if let Some((target, key)) = aff {
                p.pod_affinity = required(vec![term(is_in("app", &[&format!("a{target}")]), key)]);
            }
            if let Some((skew, key, min_domains)) = spr {
                let mut c = spread(skew, key, WhenUnsatisfiable::DoNotSchedule, is_in("app", &[&app_label]));
                c.min_domains = min_domains;
                p.spread_constraints = vec![c];
            }
            p
        })
}

fn arb_topo_cluster() -> impl Strategy<Value = (Vec<NodeSpec>, Vec<(usize, PodSpec)>, Vec<PodSpec>)> {
    (2..7usize, 0..8usize, 1..14usize).prop_flat_map(|(n, existing, batch)| {
        let nodes: Vec<_> = (0..n).map(arb_topo_node).collect();
        let bound: Vec<_> = (0..existing).map(|i| (0..n, arb_topo_pod(100 + i))).collect();
        let pending: Vec<_> = (0..batch).map(arb_topo_pod).collect();
        (nodes, bound, pending)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Over random clusters and batches, no placement breaks a required affinity, anti-affinity
    /// or DoNotSchedule spread constraint, counting the pods placed earlier in the same batch.
    #[test]
    fn no_placement_breaks_required_affinity_or_spread(
        (nodes, existing, batch) in arb_topo_cluster(),
        seed in any::<u64>(),
    ) {
        let bound: Vec<PodSpec> = existing
            .iter()
            .map(|(n, p)| PodSpec { node_name: Some(format!("n{n}")), ..p.clone() })
            .collect();
        let snap = Snapshot::build(nodes.clone(), bound.clone()).unwrap();
        let profile = Profile::new(Policy::kube_default());
        let out = Evaluator::new(&profile, &snap).schedule(&batch, seed, Deadline::none()).unwrap();
        let index = |name: &str| snap.nodes().iter().position(|e| e.spec.name == name).unwrap();
        let specs: Vec<NodeSpec> = snap.nodes().iter().map(|e| (*e.spec).clone()).collect();
        let mut on: Vec<(usize, &PodSpec)> = bound.iter().map(|p| (index(p.node_name.as_deref().unwrap()), p)).collect();
        for (p, d) in batch.iter().zip(&out) {
            if let Decision::Node { node, .. } = d {
                let n = index(node);
                prop_assert!(oracle_ok(&specs, &on, p, n), "{} on {node} breaks a required rule", p.uid);
                on.push((n, p));
            }
        }
    }
}

// ---- Preemption through the topology filters (kube's PreFilterExtensions RemovePod/AddPod) ----

/// A priority-`p` copy of a pod.
fn prio(mut p: PodSpec, priority: i32) -> PodSpec {
    p.priority = priority;
    p
}

/// The single decision for `p` on a snapshot of `nodes` with `bound` pods.
fn decide_one(nodes: Vec<NodeSpec>, bound: Vec<PodSpec>, p: &PodSpec) -> Decision {
    let snap = Snapshot::build(nodes, bound).unwrap();
    let profile = Profile::new(Policy::kube_default());
    Evaluator::new(&profile, &snap)
        .schedule(std::slice::from_ref(p), 0, Deadline::none())
        .unwrap()
        .remove(0)
}

/// The nominated node and victims, or the preemption message.
fn preemption(d: Decision) -> Result<(String, Vec<String>), String> {
    match d {
        Decision::Unschedulable(diag) => match diag.nomination {
            Some(n) => Ok((n.node, n.victims.iter().map(|v| v.to_string()).collect())),
            None => Err(diag.message()),
        },
        Decision::Node { node, .. } => Err(format!("placed on {node}")),
    }
}

#[test]
fn preemption_evicts_the_lower_priority_pod_the_incoming_anti_affinity_repels() {
    let nodes = vec![node("n1", &[(HOST, "n1")]), node("n2", &[(HOST, "n2")])];
    let bound = vec![
        prio(bound("web-low", "n1", &[("app", "web")]), 0),
        prio(bound("web-high", "n2", &[("app", "web")]), 1000),
    ];
    let mut p = prio(pod("p", &[("app", "api")]), 100);
    p.pod_anti_affinity = required(vec![term(is_in("app", &["web"]), HOST)]);
    assert_eq!(
        preemption(decide_one(nodes.clone(), bound.clone(), &p)),
        Ok(("n1".to_string(), vec!["web-low".to_string()]))
    );
    // Below both web pods' priority, nothing can be evicted.
    p.priority = -1;
    let message = preemption(decide_one(nodes, bound, &p)).unwrap_err();
    assert!(
        message.ends_with("preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."),
        "{message}"
    );
}

#[test]
fn preemption_evicts_the_lower_priority_pod_whose_anti_affinity_repels_the_incoming_one() {
    let nodes = vec![node("n1", &[(HOST, "n1")])];
    let mut low = prio(bound("loner", "n1", &[("app", "loner")]), 0);
    low.pod_anti_affinity = required(vec![term(is_in("app", &["db"]), HOST)]);
    // A bystander that does not matter to the rule stays.
    let bystander = prio(bound("other", "n1", &[("app", "other")]), 0);
    let p = prio(pod("db-0", &[("app", "db")]), 100);
    assert_eq!(
        preemption(decide_one(nodes, vec![low, bystander], &p)),
        Ok(("n1".to_string(), vec!["loner".to_string()]))
    );
}

#[test]
fn preemption_lowers_a_domain_count_until_the_skew_allows_the_pod() {
    // Hostname spreading with maxSkew 1: n1 has two matching low pods, n2 one matching pod of
    // higher priority and no room. Evicting one pod on n1 brings its skew to 1.
    let mut n2 = node("n2", &[(HOST, "n2")]);
    n2.allocatable.milli_cpu = 1000;
    let nodes = vec![node("n1", &[(HOST, "n1")]), n2];
    let mut big = prio(bound("x-high", "n2", &[("app", "x")]), 1000);
    big.requests.milli_cpu = 1000;
    let bound = vec![
        prio(bound("x-low-a", "n1", &[("app", "x")]), 0),
        prio(bound("x-low-b", "n1", &[("app", "x")]), 0),
        big,
    ];
    let mut p = prio(pod("x-new", &[("app", "x")]), 100);
    p.requests.milli_cpu = 500;
    p.spread_constraints = vec![spread(1, HOST, WhenUnsatisfiable::DoNotSchedule, is_in("app", &["x"]))];
    let (node, victims) = preemption(decide_one(nodes, bound, &p)).unwrap();
    assert_eq!(node, "n1");
    assert_eq!(victims.len(), 1, "one eviction is enough: {victims:?}");
    assert!(victims[0].starts_with("x-low-"));
}

#[test]
fn own_affinity_and_missing_topology_labels_are_not_resolved_by_preemption() {
    // Required affinity to pods that do not exist: UnschedulableAndUnresolvable in kube.
    let nodes = vec![node("n1", &[(HOST, "n1")])];
    let bound_pods = vec![prio(bound("low", "n1", &[("app", "other")]), 0)];
    let mut p = prio(pod("p", &[("app", "api")]), 100);
    p.pod_affinity = required(vec![term(is_in("app", &["db"]), HOST)]);
    let message = preemption(decide_one(nodes, bound_pods.clone(), &p)).unwrap_err();
    assert!(
        message.ends_with("preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."),
        "{message}"
    );
    // A node without the constraint's key.
    let unlabelled = vec![node("n1", &[])];
    let mut q = prio(pod("q", &[("app", "api")]), 100);
    q.spread_constraints = vec![spread(
        1,
        "zone",
        WhenUnsatisfiable::DoNotSchedule,
        is_in("app", &["api"]),
    )];
    let message = preemption(decide_one(unlabelled, bound_pods, &q)).unwrap_err();
    assert!(
        message.ends_with("preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."),
        "{message}"
    );
}

// ---- Terminating pods (metadata.deletionTimestamp set) ----

/// A bound pod that is being deleted.
fn terminating(mut p: PodSpec) -> PodSpec {
    p.terminating = true;
    p
}

/// Two terminating `app=web` pods on node-a and one running on node-b: kube-scheduler's
/// `countPodsMatchSelector` bypasses terminating pods, so node-a counts 0 and node-b 1.
fn rolling_update() -> (Vec<NodeSpec>, Vec<PodSpec>) {
    let nodes = host_nodes(&["node-a", "node-b"]);
    let pods = vec![
        terminating(bound("web-old-1", "node-a", &[("app", "web")])),
        terminating(bound("web-old-2", "node-a", &[("app", "web")])),
        bound("web-new-1", "node-b", &[("app", "web")]),
    ];
    (nodes, pods)
}

#[test]
fn spread_filter_does_not_count_terminating_pods() {
    let (nodes, pods) = rolling_update();
    let snap = Snapshot::build(nodes, pods).unwrap();
    let mut p = pod("web-new-2", &[("app", "web")]);
    p.spread_constraints = vec![spread(
        1,
        HOST,
        WhenUnsatisfiable::DoNotSchedule,
        is_in("app", &["web"]),
    )];
    // node-a: 0 + 1 − 0 = 1 ≤ 1; node-b: 1 + 1 − 0 = 2 > 1.
    assert_eq!(feasible(&snap, &p), ["node-a"]);
    assert_eq!(rejection(&snap, &p, "node-b").map(|r| r.0), Some(F::PodTopologySpread));
    // The same pods, running: node-a holds 2, so only node-b fits.
    let (nodes, mut pods) = rolling_update();
    for q in &mut pods {
        q.terminating = false;
    }
    let snap = Snapshot::build(nodes, pods).unwrap();
    assert_eq!(feasible(&snap, &p), ["node-b"]);
}

#[test]
fn spread_score_does_not_count_terminating_pods() {
    let (nodes, pods) = rolling_update();
    let snap = Snapshot::build(nodes, pods).unwrap();
    let mut p = pod("web-new-2", &[("app", "web")]);
    p.spread_constraints = vec![soft(1, HOST, is_in("app", &["web"]))];
    assert_eq!(
        plugin_scores(S::PodTopologySpread, &snap, &p),
        named(&[("node-a", 100), ("node-b", 0)])
    );
    assert_eq!(rank_in(&snap, &p).feasible[0].node, "node-a", "node-a ranks first");
    // The default spreading (a ReplicaSet's pods) skips them too: hostname maxSkew 3 gives raw
    // scores 0·ln 4 + 2 = 2 and 1·ln 4 + 2 ≈ 3 (the nodes have no zone), normalized 100 and 66;
    // counting the terminating pods would give node-a 2·ln 4 + 2 ≈ 5 and rank it last.
    let mut d = pod("web-new-2", &[("app", "web")]);
    d.default_spread_selector = Some(LabelSelector::from_labels([("app", "web")]));
    assert_eq!(
        plugin_scores(S::PodTopologySpread, &snap, &d),
        named(&[("node-a", 100), ("node-b", 66)])
    );
}

#[test]
fn inter_pod_affinity_still_counts_terminating_pods() {
    // kube-scheduler's InterPodAffinity reads every pod of the node, terminating or not.
    let (nodes, pods) = rolling_update();
    let snap = Snapshot::build(nodes, pods).unwrap();
    let mut anti = pod("api", &[("app", "api")]);
    anti.pod_anti_affinity = required(vec![term(is_in("app", &["web"]), HOST)]);
    assert!(feasible(&snap, &anti).is_empty());
    let mut near = pod("cache", &[("app", "cache")]);
    near.pod_affinity = required(vec![term(is_in("app", &["web"]), HOST)]);
    assert_eq!(feasible(&snap, &near), ["node-a", "node-b"]);
}

#[test]
fn terminating_pods_keep_their_resources_and_may_be_preempted() {
    let mut small = node("n1", &[(HOST, "n1")]);
    small.allocatable.milli_cpu = 1000;
    let mut old = terminating(bound("old", "n1", &[("app", "web")]));
    old.requests.milli_cpu = 800;
    let mut p = pod("new", &[("app", "web")]);
    p.requests.milli_cpu = 500;
    // The terminating pod's cpu still counts: the node is full for the new pod.
    let snap = Snapshot::build(vec![small.clone()], vec![old.clone()]).unwrap();
    assert_eq!(
        rejection(&snap, &p, "n1").map(|r| r.1),
        Some(vec!["Insufficient cpu".to_string()])
    );
    // A higher-priority pod may still choose it as a victim (kube-scheduler only skips the
    // deletion call for a victim already being deleted).
    let p = prio(p, 100);
    assert_eq!(
        preemption(decide_one(vec![small], vec![prio(old, 0)], &p)),
        Ok(("n1".to_string(), vec!["old".to_string()]))
    );
}
