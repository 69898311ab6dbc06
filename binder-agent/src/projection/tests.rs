use super::*;

/// The node features a pod needs, as kube 1.37's `InferForPodScheduling`: one per rule, sorted;
/// nothing for a pod that uses none (host network alone, `hostUsers: true`, empty options).
#[test]
fn required_features_are_inferred_as_kube_infers_them() {
    let infer = |spec: serde_json::Value| {
        let mut spec = spec;
        spec["containers"]
            .as_array()
            .is_none()
            .then(|| spec["containers"] = serde_json::json!([{"name": "c"}]));
        let spec: PodSpec = serde_json::from_value(spec).unwrap();
        required_features(Some(&spec))
    };
    assert!(infer(serde_json::json!({})).is_empty());
    assert!(infer(serde_json::json!({"hostNetwork": true})).is_empty());
    assert!(infer(serde_json::json!({"hostNetwork": true, "hostUsers": true})).is_empty());
    assert_eq!(
        infer(serde_json::json!({"hostNetwork": true, "hostUsers": false})),
        ["UserNamespacesHostNetworkSupport"]
    );
    assert!(infer(serde_json::json!({"hostNetwork": false, "hostUsers": false})).is_empty());
    let restart =
        serde_json::json!([{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [1]}}]);
    assert_eq!(
        infer(serde_json::json!({"initContainers": [{"name": "i", "restartPolicyRules": restart}]})),
        ["RestartAllContainersOnContainerExits"]
    );
    let only_restart = serde_json::json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [1]}}]);
    assert!(infer(serde_json::json!({"containers": [{"name": "c", "restartPolicyRules": only_restart}]})).is_empty());
    assert!(infer(serde_json::json!({"containers": [{"name": "c", "volumeMounts": [
        {"name": "v", "mountPath": "/v", "bindMountOptions": []}]}]}))
    .is_empty());
    assert_eq!(
        infer(serde_json::json!({
            "hostNetwork": true, "hostUsers": false,
            "containers": [{"name": "c", "restartPolicyRules": restart}],
            "ephemeralContainers": [{"name": "e", "volumeMounts": [
                {"name": "v", "mountPath": "/v", "bindMountOptions": ["nosuid"]}]}]
        })),
        [
            "RestartAllContainersOnContainerExits",
            "UserNamespacesHostNetworkSupport",
            "VolumeBindMountOptions"
        ]
    );
}

/// A resize's status as kube's PodRequests reads it: each container's status by name
/// (regular containers' statuses first, then init containers'), the pod's own, and whether the
/// first PodResizePending condition says Infeasible.
#[test]
fn resize_status_and_pod_level_requests_are_projected() {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {
            "nodeName": "n",
            "resources": {"requests": {"cpu": "2"}},
            "initContainers": [{"name": "side", "restartPolicy": "Always"}],
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
            "volumes": [{"name": "m", "image": {"reference": "ghcr.io/x/model:1"}}, {"name": "e", "emptyDir": {}}]
        },
        "status": {
            "allocatedResources": {"cpu": "3"},
            "resources": {"requests": {"cpu": "3500m"}},
            "conditions": [
                {"type": "PodResizePending", "status": "True", "reason": "Infeasible"},
                {"type": "PodResizePending", "status": "True", "reason": "Deferred"}
            ],
            "containerStatuses": [
                {"name": "side", "image": "", "imageID": "", "ready": true, "restartCount": 0,
                 "allocatedResources": {"cpu": "100m"}},
                {"name": "main", "image": "", "imageID": "", "ready": true, "restartCount": 0,
                 "allocatedResources": {"cpu": "1500m"}, "resources": {"requests": {"cpu": "1200m"}}}
            ]
        }
    }))
    .unwrap();
    let p = pod_info(&pod).spec;
    let q = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    assert_eq!(p.pod_requests, q(&[("cpu", "2")]));
    assert_eq!(p.allocated_requests, q(&[("cpu", "3")]));
    assert_eq!(p.actuated_requests, q(&[("cpu", "3500m")]));
    assert!(p.resize_infeasible);
    assert_eq!(p.containers[0].allocated_requests, q(&[("cpu", "1500m")]));
    assert_eq!(p.containers[0].actuated_requests, q(&[("cpu", "1200m")]));
    assert_eq!(p.init_containers[0].allocated_requests, q(&[("cpu", "100m")]));
    assert!(p.init_containers[0].actuated_requests.is_empty());
    assert_eq!(
        p.volumes
            .iter()
            .map(|v| (v.name.as_str(), v.image_reference.as_str()))
            .collect::<Vec<_>>(),
        [("m", "ghcr.io/x/model:1")]
    );
}

#[test]
fn pod_projection_keeps_what_placement_reads() {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1", "labels": {"app": "web"},
                      "creationTimestamp": "2026-01-02T03:04:05Z",
                      "annotations": {"placement.dev/pin-arm": "candidate", "other.io/x": "y"},
                      "ownerReferences": [
                          {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "c"},
                          {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8", "uid": "r", "controller": true}]},
        "spec": {
            "schedulerName": "placement-scheduler",
            "priority": 10,
            "nodeSelector": {"disk": "ssd"},
            "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}},
                            "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}]}],
            "initContainers": [{"name": "sidecar", "image": "envoy", "restartPolicy": "Always",
                                "resources": {"requests": {"cpu": "100m"}}}],
            "overhead": {"cpu": "10m"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "preference": {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["3"]}]}}]
            }}
        },
        "status": {"phase": "Pending"}
    }))
    .unwrap();
    let info = pod_info(&pod);
    assert_eq!(info.scheduler_name, "placement-scheduler");
    assert_eq!(info.key(), "shop/web-1");
    assert_eq!(info.created_ms, 1_767_323_045_000);
    assert!(!info.terminal && !info.deleting);
    assert_eq!(
        info.owner,
        Some(Owner {
            kind: "ReplicaSet".into(),
            name: "web-5d8".into()
        })
    );
    assert_eq!(
        info.annotations.keys().collect::<Vec<_>>(),
        ["placement.dev/pin-arm"],
        "only our annotations are kept"
    );
    let s = &info.spec;
    assert_eq!((s.uid.as_str(), s.priority), ("u-1", 10));
    assert_eq!(s.containers[0].requests["cpu"], "250m");
    assert_eq!(s.containers[0].ports.len(), 1, "only host ports matter");
    assert_eq!(s.init_containers[0].restart_policy, "Always");
    assert_eq!(s.overhead["cpu"], "10m");
    assert_eq!(s.tolerations[0].effect, "NoSchedule");
    let a = s.node_affinity.as_ref().unwrap();
    assert_eq!(a.required.as_ref().unwrap().terms[0].match_expressions[0].values, ["a"]);
    assert_eq!(a.preferred[0].weight, 5);
}

#[test]
fn scheduling_gates_are_read_and_absent_on_an_older_api_server() {
    let gated: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "g", "namespace": "shop", "uid": "u-g"},
        "spec": {"containers": [{"name": "c"}],
                 "schedulingGates": [{"name": "example.com/quota"}, {"name": "example.com/data"}]}
    }))
    .unwrap();
    let info = pod_info(&gated);
    assert!(info.is_gated());
    assert_eq!(info.scheduling_gates, ["example.com/quota", "example.com/data"]);
    assert_eq!(
        info.gated_message(),
        "waiting for scheduling gates: [example.com/quota example.com/data]"
    );
    // A 1.24 API server neither stores nor returns the field; an emptied list is ungated too.
    for spec in [
        serde_json::json!({"containers": [{"name": "c"}]}),
        serde_json::json!({"containers": [{"name": "c"}], "schedulingGates": []}),
    ] {
        let pod: Pod =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "p", "uid": "u"}, "spec": spec})).unwrap();
        assert!(!pod_info(&pod).is_gated());
    }
}

#[test]
fn pod_affinity_and_spread_constraints_are_projected() {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1",
                      "labels": {"app": "web", "pod-template-hash": "abc"}},
        "spec": {
            "containers": [{"name": "c"}],
            "affinity": {
                "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 7, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "cache"}},
                                                      "topologyKey": "topology.kubernetes.io/zone"}}]},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
                     "namespaces": ["shop"], "namespaceSelector": {"matchLabels": {"tier": "web"}},
                     "topologyKey": "kubernetes.io/hostname"}]}
            },
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}},
                "minDomains": 3, "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor",
                "matchLabelKeys": ["pod-template-hash"]}]
        }
    }))
    .unwrap();
    let s = pod_info(&pod).spec;
    let aff = s.pod_affinity.as_ref().unwrap();
    assert_eq!(aff.preferred[0].weight, 7);
    let t = aff.preferred[0].term.as_ref().unwrap();
    assert_eq!(t.label_selector.as_ref().unwrap().match_labels["app"], "cache");
    assert_eq!(t.topology_key, "topology.kubernetes.io/zone");
    let anti = &s.pod_anti_affinity.as_ref().unwrap().required[0];
    assert_eq!(
        anti.label_selector.as_ref().unwrap().match_expressions[0].values,
        ["web"]
    );
    assert_eq!(anti.namespaces, ["shop"]);
    assert_eq!(anti.namespace_selector.as_ref().unwrap().match_labels["tier"], "web");
    let c = &s.topology_spread_constraints[0];
    assert_eq!((c.max_skew, c.min_domains), (1, Some(3)));
    assert_eq!(
        (c.node_affinity_policy.as_str(), c.node_taints_policy.as_str()),
        ("Ignore", "Honor")
    );
    assert_eq!(c.match_label_keys, ["pod-template-hash"]);
    assert!(
        s.default_spread_selector.is_none(),
        "explicit constraints replace the defaults"
    );
    // The result is valid input for the decision service.
    placement_scheduler::grpc::convert::pod("pod", &s).unwrap();
}

#[test]
fn controller_owned_pods_get_a_default_spread_selector_without_per_pod_labels() {
    let pod = |kind: &str| -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "db-0", "namespace": "shop", "uid": "u-1",
                         "labels": {"app": "db", "statefulset.kubernetes.io/pod-name": "db-0",
                                    "apps.kubernetes.io/pod-index": "0", "controller-revision-hash": "db-5d"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": "db",
                                              "uid": "o-1", "controller": true}]},
            "spec": {"containers": [{"name": "c"}]}
        }))
        .unwrap()
    };
    let sel = pod_info(&pod("StatefulSet")).spec.default_spread_selector.unwrap();
    assert_eq!(
        sel.match_labels,
        BTreeMap::from([("app".to_string(), "db".to_string())])
    );
    assert!(pod_info(&pod("ReplicaSet")).spec.default_spread_selector.is_some());
    assert!(
        pod_info(&pod("Job")).spec.default_spread_selector.is_none(),
        "kube-scheduler's default spreading covers Services, RCs, RSs and StatefulSets only"
    );
}

#[test]
fn namespace_projection_keeps_its_labels() {
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "shop", "labels": {"tier": "web"}}})).unwrap();
    let n = namespace_info(&ns);
    assert_eq!((n.name.as_str(), n.labels["tier"].as_str()), ("shop", "web"));
}

#[test]
fn pdb_projection_keeps_selector_budget_and_disrupted_names() {
    let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "db", "namespace": "shop"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"},
                 "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}},
        "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3,
                   "disruptedPods": {"db-1": "2026-11-21T10:00:00Z", "db-0": "2026-11-21T10:00:01Z"}}
    }))
    .unwrap();
    let p = pdb_info(&pdb);
    assert_eq!(p.key(), "shop/db");
    assert_eq!(p.pdb.disruptions_allowed, 1);
    let sel = p.pdb.selector.as_ref().unwrap();
    assert_eq!(sel.match_labels["app"], "db");
    assert_eq!(sel.match_expressions[0].values, ["a"]);
    assert_eq!(p.disrupted_pods, ["db-0", "db-1"]);
    assert!(p.pdb.disrupted_pod_uids.is_empty(), "uids are the state's to resolve");
    // No status yet: no disruption allowed; no selector: none (matches no pod).
    let bare: k8s_openapi::api::policy::v1::PodDisruptionBudget =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "x", "namespace": "shop"}, "spec": {}}))
            .unwrap();
    let p = pdb_info(&bare);
    assert_eq!((p.pdb.disruptions_allowed, p.pdb.selector.is_none()), (0, true));
}

#[test]
fn node_projection_keeps_what_placement_reads() {
    let node: Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n1", "labels": {"zone": "a"}},
        "spec": {"unschedulable": true, "taints": [{"key": "k", "effect": "NoExecute"}]},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                   "images": [{"names": ["nginx:latest"], "sizeBytes": 1000}]}
    }))
    .unwrap();
    let n = node_info(&node);
    assert!(n.unschedulable);
    assert_eq!(n.taints[0].effect, "NoExecute");
    assert_eq!(n.allocatable["pods"], "110");
    assert_eq!(n.images[0].size_bytes, 1000);
}
