use super::*;

fn names<'a>(list: &[&'a str]) -> HashMap<&'a str, usize> {
    list.iter().enumerate().map(|(i, n)| (*n, i)).collect()
}

/// What an extender receives of a pod and a node, field by field: the fields placement's API
/// carries (docs/custom-logic.md lists what is left out and why). A field added to or dropped
/// from these objects fails here.
#[test]
fn the_pod_and_node_objects_carry_the_fields_placement_receives() {
    use crate::engine::model::{PodVolume, PreemptionPolicy, Taint, Toleration, VolumeSource};
    let pod = PodSpec {
        uid: Arc::from("u1"),
        namespace: "shop".into(),
        name: "web-0".into(),
        labels: [("app".to_string(), "web".to_string())].into_iter().collect(),
        annotations: [("a".to_string(), "b".to_string())].into_iter().collect(),
        containers: vec![crate::engine::model::Container {
            name: "c".into(),
            image: "nginx".into(),
            requests: Resources {
                milli_cpu: 250,
                memory: 1 << 20,
                ..Default::default()
            },
        }],
        priority: 7,
        node_selector: vec![("disk".into(), "ssd".into())],
        tolerations: vec![Toleration {
            key: "k".into(),
            operator: crate::engine::model::TolerationOperator::Exists,
            value: String::new(),
            effect: Some(TaintEffect::NoSchedule),
        }],
        preemption_policy: PreemptionPolicy::Never,
        volumes: vec![
            PodVolume {
                name: Arc::from("data"),
                source: VolumeSource::Claim {
                    claim_name: Arc::from("data-0"),
                    ephemeral: false,
                },
            },
            PodVolume {
                name: Arc::from("scratch"),
                source: VolumeSource::Claim {
                    claim_name: Arc::from("web-0-scratch"),
                    ephemeral: true,
                },
            },
        ],
        ..Default::default()
    };
    assert_eq!(
        pod_object(&pod),
        serde_json::json!({
            "metadata": {"name": "web-0", "namespace": "shop", "uid": "u1",
                         "labels": {"app": "web"}, "annotations": {"a": "b"}},
            "spec": {
                "containers": [{"name": "c", "image": "nginx",
                                "resources": {"requests": {"cpu": "250m", "memory": "1048576"}}}],
                "nodeSelector": {"disk": "ssd"},
                "priority": 7,
                "preemptionPolicy": "Never",
                "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
                            {"name": "scratch", "ephemeral": {}}]
            },
            "status": {}
        })
    );
    let node = crate::engine::model::NodeSpec {
        name: "n1".into(),
        labels: [("zone".to_string(), "a".to_string())].into_iter().collect(),
        taints: vec![Taint {
            key: "gpu".into(),
            value: "true".into(),
            effect: TaintEffect::NoSchedule,
        }],
        unschedulable: true,
        allocatable: Resources {
            milli_cpu: 4000,
            memory: 1 << 30,
            ..Default::default()
        },
        allowed_pods: 110,
        declared_features: vec![Arc::from("RestartAllContainersOnContainerExits")],
        ..Default::default()
    };
    let list = serde_json::json!({"cpu": "4", "memory": "1073741824", "pods": "110"});
    assert_eq!(
        node_object(&node),
        serde_json::json!({
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "spec": {"unschedulable": true, "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]},
            "status": {"capacity": list, "allocatable": list,
                       "declaredFeatures": ["RestartAllContainersOnContainerExits"]}
        })
    );
}

fn node_list(list: &[&str]) -> Value {
    serde_json::json!({"Nodes": {"metadata": {}, "items": list.iter().map(|n| serde_json::json!({"metadata": {"name": n}})).collect::<Vec<_>>()}})
}

/// kube's `HTTPExtender.Filter` takes the returned `Nodes.items` as they are: a node of the
/// snapshot that was not sent is accepted, one the snapshot does not hold is left out; never
/// an error.
#[test]
fn returned_node_objects_are_taken_as_kube_takes_them() {
    let names = names(&["a", "b", "c"]);
    let out = filter_result(&node_list(&["a", "c", "gone"]), false, "http://e", &[0, 1], &names).unwrap();
    assert_eq!(out.feasible, vec![0, 2]);
}

/// With `nodeCacheCapable`, a returned name that was not sent is kube's error.
#[test]
fn node_names_must_have_been_sent() {
    let names = names(&["a", "b", "c"]);
    let answer = serde_json::json!({"NodeNames": ["a", "c"]});
    let err = filter_result(&answer, true, "http://e", &[0, 1], &names).unwrap_err();
    assert_eq!(
        err.0,
        "extender \"http://e\" claims a filtered node \"c\" which is not found in the input node list"
    );
    let answer = serde_json::json!({"NodeNames": ["b"], "FailedNodes": {"a": "busy"}});
    let out = filter_result(&answer, true, "http://e", &[0, 1], &names).unwrap();
    assert_eq!(out.feasible, vec![1]);
    assert_eq!(out.failed, vec![(0, Arc::from("busy"))]);
}
