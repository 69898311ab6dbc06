use super::*;

fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
    Taint {
        key: key.into(),
        value: value.into(),
        effect,
    }
}

fn tol(key: &str, op: TolerationOperator, value: &str, effect: Option<TaintEffect>) -> Toleration {
    Toleration {
        key: key.into(),
        operator: op,
        value: value.into(),
        effect,
    }
}

#[test]
fn toleration_rules_match_kubernetes() {
    use TaintEffect::*;
    use TolerationOperator::*;
    let t = taint("dedicated", "gpu", NoSchedule);
    assert!(tol("dedicated", Equal, "gpu", Some(NoSchedule)).tolerates(&t));
    assert!(
        tol("dedicated", Equal, "gpu", None).tolerates(&t),
        "empty effect matches all effects"
    );
    assert!(
        !tol("dedicated", Equal, "cpu", None).tolerates(&t),
        "value must be equal"
    );
    assert!(
        !tol("dedicated", Equal, "gpu", Some(NoExecute)).tolerates(&t),
        "effect must match"
    );
    assert!(
        tol("dedicated", Exists, "", None).tolerates(&t),
        "Exists ignores the value"
    );
    assert!(
        tol("", Exists, "", None).tolerates(&t),
        "empty key with Exists tolerates everything"
    );
    assert!(!tol("other", Exists, "", None).tolerates(&t));
    assert!(tol("", Exists, "", Some(NoSchedule)).tolerates(&t));
    assert!(!tol("", Exists, "", Some(PreferNoSchedule)).tolerates(&t));
    // A taint with an empty value is tolerated by Equal with an empty value.
    assert!(tol("k", Equal, "", None).tolerates(&taint("k", "", NoExecute)));
}

#[test]
fn every_operator_follows_kubernetes() {
    let req = |op| Requirement { key: "k".into(), op };
    let vals = || vec!["a".to_string(), "b".to_string()];
    assert!(req(SelectorOp::In(vals())).matches(Some("a")));
    assert!(!req(SelectorOp::In(vals())).matches(Some("c")));
    assert!(!req(SelectorOp::In(vals())).matches(None));
    assert!(req(SelectorOp::NotIn(vals())).matches(Some("c")));
    assert!(!req(SelectorOp::NotIn(vals())).matches(Some("b")));
    assert!(
        req(SelectorOp::NotIn(vals())).matches(None),
        "NotIn matches an absent label"
    );
    assert!(req(SelectorOp::Exists).matches(Some("")));
    assert!(!req(SelectorOp::Exists).matches(None));
    assert!(req(SelectorOp::DoesNotExist).matches(None));
    assert!(!req(SelectorOp::DoesNotExist).matches(Some("x")));
    assert!(req(SelectorOp::Gt(5)).matches(Some("6")));
    assert!(!req(SelectorOp::Gt(5)).matches(Some("5")));
    assert!(
        !req(SelectorOp::Gt(5)).matches(Some("six")),
        "non-integer label never matches Gt"
    );
    assert!(!req(SelectorOp::Gt(5)).matches(None));
    assert!(req(SelectorOp::Lt(5)).matches(Some("-1")));
    assert!(!req(SelectorOp::Lt(5)).matches(Some("5")));
    assert!(!req(SelectorOp::Lt(5)).matches(None));
}

#[test]
fn terms_are_anded_inside_and_empty_terms_match_nothing() {
    let mut node = NodeSpec {
        name: "n1".into(),
        ..Default::default()
    };
    node.labels.insert("zone".into(), "a".into());
    node.labels.insert("disk".into(), "ssd".into());
    let term = SelectorTerm {
        match_expressions: vec![
            Requirement {
                key: "zone".into(),
                op: SelectorOp::In(vec!["a".into()]),
            },
            Requirement {
                key: "disk".into(),
                op: SelectorOp::In(vec!["hdd".into()]),
            },
        ],
        match_fields: vec![],
    };
    assert!(!term.matches(&node));
    assert!(!SelectorTerm::default().matches(&node));
    let by_name = SelectorTerm {
        match_expressions: vec![],
        match_fields: vec![Requirement {
            key: "metadata.name".into(),
            op: SelectorOp::In(vec!["n1".into()]),
        }],
    };
    assert!(by_name.matches(&node));
}

#[test]
fn host_port_conflicts_follow_wildcard_rules() {
    let hp = |ip: &str, port| HostPort {
        ip: Arc::from(ip),
        protocol: Protocol::Tcp,
        port,
    };
    assert!(hp("0.0.0.0", 80).conflicts(&hp("10.0.0.1", 80)));
    assert!(hp("10.0.0.1", 80).conflicts(&hp("10.0.0.1", 80)));
    assert!(!hp("10.0.0.1", 80).conflicts(&hp("10.0.0.2", 80)));
    assert!(!hp("0.0.0.0", 80).conflicts(&hp("0.0.0.0", 81)));
    let udp = HostPort {
        protocol: Protocol::Udp,
        ..hp("0.0.0.0", 80)
    };
    assert!(!udp.conflicts(&hp("0.0.0.0", 80)));
}

#[test]
fn image_names_get_latest_when_untagged() {
    assert_eq!(normalized_image_name("nginx"), "nginx:latest");
    assert_eq!(normalized_image_name("nginx:1.25"), "nginx:1.25");
    assert_eq!(
        normalized_image_name("localhost:5000/nginx"),
        "localhost:5000/nginx:latest"
    );
    assert_eq!(
        normalized_image_name("localhost:5000/nginx:1"),
        "localhost:5000/nginx:1"
    );
}
