use super::*;
use placement_scheduler::grpc::convert;

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn node(name: &str, cpu: &str) -> proto::Node {
    proto::Node {
        name: name.into(),
        allocatable: quantities(&[("cpu", cpu), ("memory", "8Gi"), ("pods", "110")]),
        ..Default::default()
    }
}

fn pod(uid: &str, cpu: &str, node: &str) -> proto::Pod {
    proto::Pod {
        uid: uid.into(),
        namespace: "shop".into(),
        name: uid.into(),
        node_name: node.into(),
        containers: vec![proto::Container {
            name: "c".into(),
            requests: quantities(&[("cpu", cpu), ("memory", "64Mi")]),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn cluster(nodes: Vec<proto::Node>, pods: Vec<proto::Pod>) -> Snapshot {
    let (nodes, pods, namespaces, _) = convert::snapshot(
        "s",
        &proto::Snapshot {
            nodes,
            pods,
            ..Default::default()
        },
    )
    .unwrap();
    Snapshot::build_with_namespaces(nodes, pods, namespaces).unwrap()
}

fn infeasible(node: &str, plugin: &str, reasons: &[&str]) -> proto::InfeasibleNode {
    proto::InfeasibleNode {
        node: node.into(),
        plugin: plugin.into(),
        reasons: reasons.iter().map(|r| r.to_string()).collect(),
        ..Default::default()
    }
}

fn score(node: &str, parts: &[(&str, i64, i64)]) -> proto::NodeScore {
    proto::NodeScore {
        node: node.into(),
        total: parts.iter().map(|(_, s, w)| s * w).sum(),
        plugin_scores: parts
            .iter()
            .map(|(p, s, w)| proto::PluginScore {
                plugin: p.to_string(),
                score: *s,
                weight: *w,
            })
            .collect(),
    }
}

fn pod_ref() -> PodRef {
    PodRef {
        namespace: "shop".into(),
        name: "web".into(),
        uid: "u-web".into(),
    }
}

#[test]
fn refused_nodes_are_grouped_by_filter_and_reason_most_first() {
    let groups = refused_groups(
        &[
            infeasible("c", "NodeResourcesFit", &["Insufficient cpu", "Insufficient memory"]),
            infeasible("a", "NodeResourcesFit", &["Insufficient cpu"]),
            infeasible("b", "TaintToleration", &["node(s) had untolerated taint(s)"]),
            infeasible("d", "NodeResourcesFit", &["Insufficient cpu"]),
        ],
        2,
    );
    let flat: Vec<(&str, &str, usize, Vec<&str>)> = groups
        .iter()
        .map(|g| {
            (
                g.filter.as_str(),
                g.reason.as_str(),
                g.count,
                g.nodes.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        flat,
        [
            ("NodeResourcesFit", "Insufficient cpu", 3, vec!["a", "c"]),
            ("NodeResourcesFit", "Insufficient memory", 1, vec!["c"]),
            ("TaintToleration", "node(s) had untolerated taint(s)", 1, vec!["b"]),
        ]
    );
}

#[test]
fn device_failures_are_grouped_by_claim_request_and_kind_with_the_first_nodes_message() {
    let failure = |request: &str, kind: proto::DeviceFailureKind, message: &str| proto::DeviceRequestFailure {
        claim: "train-gpu".into(),
        request: request.into(),
        kind: kind.into(),
        message: message.into(),
    };
    let refused = |node: &str, failures: Vec<proto::DeviceRequestFailure>| proto::InfeasibleNode {
        device_failures: failures,
        ..infeasible(node, "DynamicResources", &["cannot allocate all claims"])
    };
    let allocated = proto::DeviceFailureKind::DevicesAllocated;
    let groups = device_groups(
        &[
            refused(
                "n3",
                vec![failure(
                    "gpu",
                    allocated,
                    "2 requested; 2 devices match, 2 allocated to claims",
                )],
            ),
            refused(
                "n1",
                vec![failure(
                    "gpu",
                    allocated,
                    "2 requested; 2 devices match, 1 allocated to claims",
                )],
            ),
            refused(
                "n2",
                vec![failure(
                    "gpu",
                    proto::DeviceFailureKind::NoMatchingDevice,
                    "the node has no devices",
                )],
            ),
            infeasible("n4", "NodeUnschedulable", &["node(s) were unschedulable"]),
        ],
        1,
    );
    assert_eq!(
        groups,
        vec![
            DeviceGroup {
                claim: "train-gpu".into(),
                request: "gpu".into(),
                kind: "devices_allocated".into(),
                why: "not enough free devices".into(),
                count: 2,
                nodes: vec!["n1".into()],
                example_node: "n1".into(),
                example: "2 requested; 2 devices match, 1 allocated to claims".into(),
            },
            DeviceGroup {
                claim: "train-gpu".into(),
                request: "gpu".into(),
                kind: "no_matching_device".into(),
                why: "too few devices match the class and selectors".into(),
                count: 1,
                nodes: vec!["n2".into()],
                example_node: "n2".into(),
                example: "the node has no devices".into(),
            },
        ]
    );
}

#[test]
fn a_schedulable_outcome_has_the_best_nodes_with_weighted_parts() {
    let snap = cluster(vec![node("a", "4"), node("b", "4")], vec![]);
    let spec = convert::pod("pod", &pod("u-web", "1", "")).unwrap();
    let names = HashMap::new();
    let subject = Subject {
        pod: &spec,
        cluster: &snap,
        pod_names: &names,
    };
    let rank = proto::RankResponse {
        policy: "default".into(),
        feasible: vec![
            score("b", &[("NodeResourcesFit", 80, 1), ("TaintToleration", 100, 3)]),
            score("a", &[("NodeResourcesFit", 70, 1), ("TaintToleration", 100, 3)]),
        ],
        feasible_count: 2,
        node_count: 2,
        ..Default::default()
    };
    let limits = Limits {
        top: 1,
        examples: 3,
        node: Some("a".into()),
    };
    let o = outcome(&rank, "in-process engine", &pod_ref(), &subject, &limits);
    assert!(o.schedulable);
    assert_eq!((o.node.as_deref(), o.score), (Some("b"), Some(380)));
    assert_eq!(o.message, "Successfully assigned shop/web to b");
    assert_eq!(o.best.len(), 1, "--top 1");
    assert_eq!(o.best[0].plugins[1].weighted, 300);
    assert!(o.hints.is_empty() && o.refused.is_empty());
    let d = o.node_detail.unwrap();
    assert!(d.feasible);
    assert_eq!(d.rank, Some(2));
    assert_eq!(d.scores.unwrap().total, 370);
    assert_eq!(d.compared_with.unwrap().node, "b", "compared with the winner");
}

#[test]
fn the_best_node_is_compared_with_the_runner_up() {
    let snap = cluster(vec![node("a", "4"), node("b", "4")], vec![]);
    let spec = convert::pod("pod", &pod("u-web", "1", "")).unwrap();
    let names = HashMap::new();
    let subject = Subject {
        pod: &spec,
        cluster: &snap,
        pod_names: &names,
    };
    let rank = proto::RankResponse {
        feasible: vec![
            score("b", &[("NodeResourcesFit", 80, 1)]),
            score("a", &[("NodeResourcesFit", 70, 1)]),
        ],
        feasible_count: 2,
        node_count: 2,
        ..Default::default()
    };
    let v = node_verdict(&rank, &subject, "b");
    assert_eq!(v.rank, Some(1));
    assert_eq!(v.compared_with.map(|c| (c.rank, c.node)), Some((2, "a".to_string())));
}

/// A pod that fits nowhere: each kind of refusal that is cheap to undo gets its hint.
#[test]
fn hints_name_what_keeps_the_pod_off_each_kind_of_node() {
    let labelled = |name: &str, cpu: &str, f: &dyn Fn(&mut proto::Node)| {
        let mut n = node(name, cpu);
        n.labels = [("disk".to_string(), "hdd".to_string())].into();
        f(&mut n);
        n
    };
    let snap = cluster(
        vec![
            labelled("cordoned", "8", &|n| n.unschedulable = true),
            labelled("tainted", "8", &|n| {
                n.taints = vec![proto::Taint {
                    key: "gpu".into(),
                    value: "true".into(),
                    effect: "NoSchedule".into(),
                }]
            }),
            labelled("small", "1500m", &|_| {}),
            labelled("full", "4", &|_| {}),
            node("nolabel", "8"),
            {
                let mut b = node("both", "1");
                b.unschedulable = true;
                b
            },
        ],
        vec![pod("x", "3", "full")],
    );
    let mut p = pod("u-web", "2", "");
    p.node_selector = [("disk".to_string(), "hdd".to_string())].into();
    let spec = convert::pod("pod", &p).unwrap();
    let names = HashMap::new();
    let subject = Subject {
        pod: &spec,
        cluster: &snap,
        pod_names: &names,
    };
    let rank = proto::RankResponse {
        infeasible: vec![
            infeasible("both", "NodeUnschedulable", &["node(s) were unschedulable"]),
            infeasible("cordoned", "NodeUnschedulable", &["node(s) were unschedulable"]),
            infeasible("full", "NodeResourcesFit", &["Insufficient cpu"]),
            infeasible(
                "nolabel",
                "NodeAffinity",
                &["node(s) didn't match Pod's node affinity/selector"],
            ),
            infeasible("small", "NodeResourcesFit", &["Insufficient cpu"]),
            infeasible("tainted", "TaintToleration", &["node(s) had untolerated taint(s)"]),
        ],
        node_count: 6,
        message: "0/6 nodes are available: …".into(),
        ..Default::default()
    };
    let o = outcome(
        &rank,
        "in-process engine",
        &pod_ref(),
        &subject,
        &Limits {
            top: 5,
            examples: 3,
            node: Some("both".into()),
        },
    );
    assert!(!o.schedulable);
    assert_eq!(o.message, "0/6 nodes are available: …");
    let texts: Vec<&str> = o.hints.iter().map(|h| h.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "only being cordoned keeps the pod off 1 node (cordoned)",
            "only the untolerated taint gpu=true:NoSchedule keeps the pod off 1 node (tainted)",
            "only the unmet nodeSelector disk=hdd keeps the pod off 1 node (nolabel)",
            "closest to fitting: full, short of 1 cpu (free 1 of 4, requested 2); resources alone keep the pod off 2 nodes",
        ]
    );
    assert!(
        o.hints_caveat.is_none(),
        "the pod has no spread or affinity constraints"
    );
    // The refused node asked about: its filter, and everything in its way.
    let d = o.node_detail.unwrap();
    assert!(!d.feasible);
    assert_eq!(d.filter.as_deref(), Some("NodeUnschedulable"));
    let filters: Vec<&str> = d.blockers.iter().map(Blocker::filter).collect();
    assert_eq!(filters, ["NodeUnschedulable", "NodeAffinity", "NodeResourcesFit"]);
}

#[test]
fn without_single_cause_nodes_the_closest_node_is_named() {
    let mut n = node("n1", "1");
    n.unschedulable = true;
    let snap = cluster(vec![n], vec![]);
    let spec = convert::pod("pod", &pod("u-web", "2", "")).unwrap();
    let names = HashMap::new();
    let subject = Subject {
        pod: &spec,
        cluster: &snap,
        pod_names: &names,
    };
    let rank = proto::RankResponse {
        infeasible: vec![infeasible("n1", "NodeUnschedulable", &["node(s) were unschedulable"])],
        node_count: 1,
        ..Default::default()
    };
    let h = hints(&rank, &subject, 3);
    assert_eq!(h.len(), 1);
    assert!(matches!(&h[0].hint, Hint::Closest { node, blockers } if node == "n1" && blockers.len() == 2));
    assert!(h[0].text.starts_with("closest node: n1: cordoned"), "{}", h[0].text);
}

#[test]
fn victims_are_named_and_serialize_with_the_verdict() {
    let snap = cluster(vec![node("a", "1")], vec![pod("low", "1", "a")]);
    let spec = convert::pod("pod", &pod("u-web", "1", "")).unwrap();
    let names = HashMap::from([("low".to_string(), "shop/low".to_string())]);
    let subject = Subject {
        pod: &spec,
        cluster: &snap,
        pod_names: &names,
    };
    let rank = proto::RankResponse {
        policy: "default".into(),
        infeasible: vec![infeasible("a", "NodeResourcesFit", &["Insufficient cpu"])],
        node_count: 1,
        message: "0/1 nodes are available: 1 Insufficient cpu.".into(),
        nominated_node_name: "a".into(),
        victim_uids: vec!["low".into()],
        ..Default::default()
    };
    let limits = Limits {
        top: 5,
        examples: 3,
        node: None,
    };
    let o = outcome(&rank, "in-process engine", &pod_ref(), &subject, &limits);
    assert_eq!(o.victims, ["shop/low"]);
    let json = serde_json::to_value(&o).unwrap();
    assert_eq!(json["schedulable"], false);
    assert_eq!(json["nominated_node"], "a");
    assert_eq!(json["refused"][0]["filter"], "NodeResourcesFit");
    assert_eq!(json["hints"][0]["kind"], "resources");
    assert_eq!(json["hints"][0]["closest"], "a");
    assert_eq!(json["hints"][0]["shortfalls"][0]["short"], "1");
    assert!(json["hints"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("closest to fitting: a"));
    assert!(json.get("node_detail").is_none());
}

#[test]
fn domains_list_the_one_taken_then_those_holding_min_count_then_by_pods_fitting() {
    use placement_scheduler::engine::podgroup::PlacementFit;
    let fit = |domain: &str, fit: usize, feasible: bool| PlacementFit {
        domain: Some(domain.into()),
        nodes: 4,
        fit,
        members: 8,
        bound: 0,
        feasible,
    };
    let placements = [
        fit("r1", 3, false),
        fit("r2", 8, true),
        fit("r3", 5, false),
        fit("r4", 8, true),
        fit("r0", 3, false),
    ];
    let order = |d: &[DomainFit]| -> Vec<(String, bool)> {
        d.iter()
            .map(|d| (d.domain.clone().unwrap_or_default(), d.chosen))
            .collect()
    };
    let taken = domain_fits(&placements, Some("r4"), true);
    assert_eq!(
        order(&taken),
        [
            ("r4".to_string(), true),
            ("r2".to_string(), false),
            ("r3".to_string(), false),
            ("r0".to_string(), false),
            ("r1".to_string(), false),
        ]
    );
    assert_eq!((taken[0].fit, taken[0].pending, taken[0].nodes), (8, 8, 4));
    // Not taken (the cycle failed): nothing is marked chosen.
    assert!(domain_fits(&placements, Some("r4"), false).iter().all(|d| !d.chosen));
    // The placement of every node (no topology key) is taken as `None`.
    let all = [PlacementFit {
        domain: None,
        ..fit("", 8, true)
    }];
    assert!(domain_fits(&all, None, true)[0].chosen);
}
