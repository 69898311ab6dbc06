//! VolumeBinding's tables (`volume_binding_test.go`, `binder_test.go`): a cluster, a pod, the
//! nodes it may go to or the `FitError` message it gets; batches that bind and provision.

use crate::engine::plugins::volume_testing::*;

#[test]
fn volume_binding() {
    struct Case {
        name: &'static str,
        claims: Vec<Claim>,
        volumes: Vec<PersistentVolume>,
        classes: Vec<StorageClass>,
        want: Result<Vec<&'static str>, String>,
    }
    let cases = vec![
        Case {
            name: "bound claim: only the node of its local volume",
            claims: vec![bound_claim("data", "pv-a")],
            volumes: vec![PersistentVolume {
                claim_ref: Some(ClaimRef {
                    namespace: "ns".into(),
                    name: "data".into(),
                    uid: String::new(),
                }),
                phase: VolumePhase::Bound,
                ..pv("pv-a", "local", 10, Some("n2"))
            }],
            classes: vec![local_wffc()],
            want: Ok(vec!["n2"]),
        },
        Case {
            name: "bound claim: a volume reachable from no node",
            claims: vec![bound_claim("data", "pv-a")],
            volumes: vec![pv("pv-a", "local", 10, Some("elsewhere"))],
            classes: vec![local_wffc()],
            want: Err(format!(
                "0/3 nodes are available: 3 node(s) didn't match PersistentVolume's node affinity. {NOT_HELPFUL}"
            )),
        },
        Case {
            name: "unbound claim of an Immediate class",
            claims: vec![claim("data", "fast")],
            volumes: vec![],
            classes: vec![class("fast", "ebs.csi.aws.com", BindingMode::Immediate)],
            want: Err(String::from(
                "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found",
            )),
        },
        Case {
            name: "unbound claim of a missing class is Immediate",
            claims: vec![claim("data", "gone")],
            volumes: vec![],
            classes: vec![],
            want: Err(String::from(
                "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found",
            )),
        },
        Case {
            name: "missing claim",
            claims: vec![],
            volumes: vec![],
            classes: vec![],
            want: Err(String::from(
                "0/3 nodes are available: persistentvolumeclaim \"data\" not found. not found",
            )),
        },
        Case {
            name: "claim being deleted",
            claims: vec![Claim {
                deleting: true,
                ..claim("data", "local")
            }],
            volumes: vec![],
            classes: vec![local_wffc()],
            want: Err(String::from(
                "0/3 nodes are available: persistentvolumeclaim \"data\" is being deleted. not found",
            )),
        },
        Case {
            name: "WaitForFirstConsumer: the nodes of the available volumes that fit",
            claims: vec![claim("data", "local")],
            volumes: vec![
                pv("pv-small", "local", 0, Some("n1")),
                pv("pv-n2", "local", 5, Some("n2")),
                pv("pv-n3", "local", 5, Some("n3")),
                pv("pv-other-class", "slow", 5, Some("n1")),
            ],
            classes: vec![local_wffc()],
            want: Ok(vec!["n2", "n3"]),
        },
        Case {
            name: "WaitForFirstConsumer: access modes, volume mode and phase must match",
            claims: vec![Claim {
                access_modes: vec![AccessMode::ReadWriteMany],
                ..claim("data", "local")
            }],
            volumes: vec![
                pv("pv-rwo", "local", 5, Some("n1")),
                PersistentVolume {
                    access_modes: vec![AccessMode::ReadWriteMany],
                    block: true,
                    ..pv("pv-block", "local", 5, Some("n2"))
                },
                PersistentVolume {
                    access_modes: vec![AccessMode::ReadWriteMany],
                    phase: VolumePhase::Released,
                    ..pv("pv-released", "local", 5, Some("n3"))
                },
            ],
            classes: vec![local_wffc()],
            want: Err(format!(
                "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind. {NOT_HELPFUL}"
            )),
        },
        Case {
            name: "WaitForFirstConsumer: the claim's selector",
            claims: vec![Claim {
                selector: Some(crate::engine::model::LabelSelector::from_labels([("disk", "ssd")])),
                ..claim("data", "local")
            }],
            volumes: vec![
                pv("pv-plain", "local", 5, Some("n1")),
                PersistentVolume {
                    labels: [("disk".to_string(), "ssd".to_string())].into(),
                    ..pv("pv-ssd", "local", 5, Some("n3"))
                },
            ],
            classes: vec![local_wffc()],
            want: Ok(vec!["n3"]),
        },
        Case {
            name: "WaitForFirstConsumer: dynamic provisioning where allowedTopologies allow",
            claims: vec![claim("data", "zonal")],
            volumes: vec![],
            classes: vec![StorageClass {
                allowed_topologies: vec![vec![("kubernetes.io/hostname".into(), vec!["n1".into(), "n3".into()])]],
                ..class("zonal", "ebs.csi.aws.com", BindingMode::WaitForFirstConsumer)
            }],
            want: Ok(vec!["n1", "n3"]),
        },
        Case {
            name: "WaitForFirstConsumer: a selected node takes the claim there only",
            claims: vec![Claim {
                selected_node: "n2".into(),
                selected_node_set: true,
                ..claim("data", "zonal")
            }],
            volumes: vec![],
            classes: vec![class("zonal", "ebs.csi.aws.com", BindingMode::WaitForFirstConsumer)],
            want: Ok(vec!["n2"]),
        },
        Case {
            name: "WaitForFirstConsumer: an empty selected-node annotation fits no node (kube tests the key)",
            claims: vec![Claim {
                selected_node_set: true,
                ..claim("data", "zonal")
            }],
            volumes: vec![pv("pv-plain", "zonal", 5, Some("n1"))],
            classes: vec![class("zonal", "ebs.csi.aws.com", BindingMode::WaitForFirstConsumer)],
            want: Err(
                "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind. \
                       preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
                    .into(),
            ),
        },
    ];
    for c in cases {
        let cluster = Cluster {
            nodes: three_nodes(),
            bound: vec![],
            storage: StorageParts {
                claims: c.claims,
                volumes: c.volumes,
                classes: c.classes,
                csi_nodes: vec![],
                ..Default::default()
            },
        };
        let p = pod("p", vec![claim_volume("data", "data")]);
        let got = match schedule(&cluster, std::slice::from_ref(&p)).remove(0) {
            Ok(_) => Ok(feasible(&cluster, &p)),
            Err(m) => Err(m),
        };
        let want = c.want.map(|v| v.into_iter().map(String::from).collect::<Vec<_>>());
        assert_eq!(got, want, "{}", c.name);
    }
}

const TRACKED: &str = "tracked.csi.example.com";

fn zones() -> Vec<NodeSpec> {
    vec![
        node("n1", &[("zone", "a")]),
        node("n2", &[("zone", "b")]),
        node("n3", &[("zone", "c")]),
    ]
}

fn in_zones(zones: &[&str]) -> Option<crate::engine::pdb::LabelSelector> {
    Some(crate::engine::pdb::LabelSelector {
        match_labels: vec![],
        match_expressions: vec![Requirement {
            key: "zone".into(),
            op: SelectorOp::In(zones.iter().map(|z| z.to_string()).collect()),
        }],
    })
}

fn capacity(
    name: &str,
    class: &str,
    topology: Option<crate::engine::pdb::LabelSelector>,
    size: i128,
) -> StorageCapacity {
    StorageCapacity {
        namespace: "kube-system".into(),
        name: name.into(),
        class: class.into(),
        node_topology: topology,
        capacity: Some(gi(size)),
        maximum_volume_size: None,
    }
}

fn tracked_class() -> StorageClass {
    class("tracked", TRACKED, BindingMode::WaitForFirstConsumer)
}

fn tracked_driver(storage_capacity: bool) -> CsiDriver {
    CsiDriver {
        name: TRACKED.into(),
        storage_capacity,
        prevent_pod_scheduling_if_missing: false,
    }
}

#[test]
fn volume_binding_storage_capacity() {
    // kube-scheduler 1.34's hasEnoughCapacity, capacitySufficient and nodeHasAccess: the claim
    // requests 1Gi of the WaitForFirstConsumer class "tracked", whose provisioner is TRACKED.
    struct Case {
        name: &'static str,
        claim: Claim,
        classes: Vec<StorageClass>,
        drivers: Vec<CsiDriver>,
        capacities: Vec<StorageCapacity>,
        want: Result<Vec<&'static str>, String>,
    }
    let no_space = format!("0/3 nodes are available: 3 node(s) did not have enough free storage. {NOT_HELPFUL}");
    let cases = vec![
        Case {
            name: "tracked driver: the nodes a capacity with room reaches",
            claim: claim("data", "tracked"),
            classes: vec![tracked_class()],
            drivers: vec![tracked_driver(true)],
            capacities: vec![
                capacity("a", "tracked", in_zones(&["a"]), 10),
                capacity("b-small", "tracked", in_zones(&["b"]), 0),
                capacity("c", "tracked", in_zones(&["c"]), 1),
            ],
            want: Ok(vec!["n1", "n3"]),
        },
        Case {
            name: "tracked driver, no capacity object: no node",
            claim: claim("data", "tracked"),
            classes: vec![tracked_class()],
            drivers: vec![tracked_driver(true)],
            capacities: vec![],
            want: Err(no_space.clone()),
        },
        Case {
            name: "driver with storageCapacity false: not checked",
            claim: claim("data", "tracked"),
            classes: vec![tracked_class()],
            drivers: vec![tracked_driver(false)],
            capacities: vec![],
            want: Ok(vec!["n1", "n2", "n3"]),
        },
        Case {
            name: "no CSIDriver for the provisioner: not checked",
            claim: claim("data", "tracked"),
            classes: vec![tracked_class()],
            drivers: vec![],
            capacities: vec![capacity("a", "tracked", in_zones(&["a"]), 0)],
            want: Ok(vec!["n1", "n2", "n3"]),
        },
        Case {
            name: "a claim without a storage request: not checked",
            claim: Claim {
                request: Quantity::ZERO,
                request_set: false,
                ..claim("data", "tracked")
            },
            classes: vec![tracked_class()],
            drivers: vec![tracked_driver(true)],
            capacities: vec![],
            want: Ok(vec!["n1", "n2", "n3"]),
        },
        Case {
            name: "maximumVolumeSize is compared when set, capacity otherwise",
            claim: claim("data", "tracked"),
            classes: vec![tracked_class()],
            drivers: vec![tracked_driver(true)],
            capacities: vec![
                StorageCapacity {
                    maximum_volume_size: Some(gi(0)),
                    ..capacity("a", "tracked", in_zones(&["a"]), 100)
                },
                StorageCapacity {
                    maximum_volume_size: Some(gi(2)),
                    ..capacity("b", "tracked", in_zones(&["b"]), 0)
                },
                StorageCapacity {
                    capacity: None,
                    ..capacity("c", "tracked", in_zones(&["c"]), 0)
                },
            ],
            want: Ok(vec!["n2"]),
        },
        Case {
            name: "a capacity of another class does not count",
            claim: claim("data", "tracked"),
            classes: vec![tracked_class()],
            drivers: vec![tracked_driver(true)],
            capacities: vec![capacity("a", "other", in_zones(&["a", "b", "c"]), 10)],
            want: Err(no_space.clone()),
        },
        Case {
            name: "nodeTopology unset reaches no node",
            claim: claim("data", "tracked"),
            classes: vec![tracked_class()],
            drivers: vec![tracked_driver(true)],
            capacities: vec![capacity("none", "tracked", None, 10)],
            want: Err(no_space.clone()),
        },
        Case {
            name: "empty nodeTopology reaches every node",
            claim: claim("data", "tracked"),
            classes: vec![tracked_class()],
            drivers: vec![tracked_driver(true)],
            capacities: vec![capacity("all", "tracked", Some(Default::default()), 10)],
            want: Ok(vec!["n1", "n2", "n3"]),
        },
        Case {
            name: "nodeTopology by matchLabels",
            claim: claim("data", "tracked"),
            classes: vec![tracked_class()],
            drivers: vec![tracked_driver(true)],
            capacities: vec![capacity(
                "not-a",
                "tracked",
                Some(crate::engine::pdb::LabelSelector {
                    match_labels: vec![("kubernetes.io/hostname".into(), "n1".into())],
                    match_expressions: vec![],
                }),
                10,
            )],
            want: Ok(vec!["n1"]),
        },
        Case {
            name: "nodeTopology by NotIn",
            claim: claim("data", "tracked"),
            classes: vec![tracked_class()],
            drivers: vec![tracked_driver(true)],
            capacities: vec![capacity(
                "not-a",
                "tracked",
                Some(crate::engine::pdb::LabelSelector {
                    match_labels: vec![],
                    match_expressions: vec![Requirement {
                        key: "zone".into(),
                        op: SelectorOp::NotIn(vec!["a".into()]),
                    }],
                }),
                10,
            )],
            want: Ok(vec!["n2", "n3"]),
        },
        Case {
            name: "allowedTopologies first, then capacity: each node gets its reason",
            claim: claim("data", "tracked"),
            classes: vec![StorageClass {
                allowed_topologies: vec![vec![("zone".into(), vec!["a".into(), "b".into()])]],
                ..tracked_class()
            }],
            drivers: vec![tracked_driver(true)],
            capacities: vec![capacity("bc", "tracked", in_zones(&["b", "c"]), 0)],
            want: Err(format!(
                "0/3 nodes are available: 1 node(s) didn't find available persistent volumes to bind, 2 node(s) did not have enough free storage. {NOT_HELPFUL}"
            )),
        },
        Case {
            name: "a claim with a selected node is checked there too",
            claim: Claim {
                selected_node: "n2".into(),
                selected_node_set: true,
                ..claim("data", "tracked")
            },
            classes: vec![tracked_class()],
            drivers: vec![tracked_driver(true)],
            capacities: vec![capacity("a", "tracked", in_zones(&["a"]), 10)],
            want: Err(format!(
                "0/3 nodes are available: 1 node(s) did not have enough free storage, 2 node(s) didn't find available persistent volumes to bind. {NOT_HELPFUL}"
            )),
        },
    ];
    for c in cases {
        let cluster = Cluster {
            nodes: zones(),
            bound: vec![],
            storage: StorageParts {
                claims: vec![c.claim],
                classes: c.classes,
                csi_drivers: c.drivers,
                capacities: c.capacities,
                ..Default::default()
            },
        };
        let p = pod("p", vec![claim_volume("data", "data")]);
        let got = match schedule(&cluster, std::slice::from_ref(&p)).remove(0) {
            Ok(_) => Ok(feasible(&cluster, &p)),
            Err(m) => Err(m),
        };
        let want = c.want.map(|v| v.into_iter().map(String::from).collect::<Vec<_>>());
        assert_eq!(got, want, "{}", c.name);
    }
}

#[test]
fn a_batch_does_not_subtract_provisioned_sizes_from_capacity() {
    // As kube-scheduler, which assumes claims and volumes but not CSIStorageCapacities: three
    // pods each with a 1Gi claim all fit where 1Gi is reported, and a static volume chosen in
    // the same batch is taken on its own node regardless of capacity.
    let cluster = Cluster {
        nodes: zones(),
        bound: vec![],
        storage: StorageParts {
            claims: (0..3).map(|i| claim(&format!("d{i}"), "tracked")).collect(),
            classes: vec![tracked_class()],
            csi_drivers: vec![tracked_driver(true)],
            capacities: vec![capacity("a", "tracked", in_zones(&["a"]), 1)],
            ..Default::default()
        },
    };
    let pods: Vec<PodSpec> = (0..3)
        .map(|i| pod(&format!("p{i}"), vec![claim_volume("data", &format!("d{i}"))]))
        .collect();
    let out = schedule(&cluster, &pods);
    assert_eq!(out, vec![Ok("n1".to_string()); 3]);
}

#[test]
fn a_batch_never_gives_one_volume_to_two_claims() {
    // Three pods, each with its claim; two local volumes (n1, n2): two pods fit, on different
    // nodes, and the third finds no volume left.
    let cluster = Cluster {
        nodes: three_nodes(),
        bound: vec![],
        storage: StorageParts {
            claims: vec![claim("d0", "local"), claim("d1", "local"), claim("d2", "local")],
            volumes: vec![pv("pv-1", "local", 5, Some("n1")), pv("pv-2", "local", 5, Some("n2"))],
            classes: vec![local_wffc()],
            csi_nodes: vec![],
            ..Default::default()
        },
    };
    let pods: Vec<PodSpec> = (0..3)
        .map(|i| pod(&format!("p{i}"), vec![claim_volume("data", &format!("d{i}"))]))
        .collect();
    let out = schedule(&cluster, &pods);
    let mut placed: Vec<&str> = out.iter().filter_map(|r| r.as_deref().ok()).collect();
    placed.sort();
    assert_eq!(placed, ["n1", "n2"], "{out:?}");
    assert_eq!(
        out[2],
        Err(format!(
            "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind. {NOT_HELPFUL}"
        ))
    );
    // Two pods sharing one claim: the second follows the volume chosen for the first.
    let shared: Vec<PodSpec> = (0..2)
        .map(|i| pod(&format!("s{i}"), vec![claim_volume("data", "d0")]))
        .collect();
    let out = schedule(&cluster, &shared);
    assert!(out[0].is_ok() && out[0] == out[1], "{out:?}");
}

#[test]
fn placements_carry_the_choices_and_the_assumed_snapshot_keeps_them_for_the_next_batch() {
    // n1 has a local volume; a class that provisions covers n3 only. p0 takes pv-1 on n1
    // (static binding); p1's claim of the provisioning class is provisioned on n3.
    let mut provisioning = class("fast", "csi.example.com", BindingMode::WaitForFirstConsumer);
    provisioning.allowed_topologies = vec![vec![("kubernetes.io/hostname".into(), vec!["n3".into()])]];
    let cluster = Cluster {
        nodes: three_nodes(),
        bound: vec![],
        storage: StorageParts {
            claims: vec![claim("d0", "local"), claim("d1", "fast"), claim("d2", "local")],
            volumes: vec![pv("pv-1", "local", 5, Some("n1"))],
            classes: vec![local_wffc(), provisioning],
            csi_nodes: vec![],
            ..Default::default()
        },
    };
    let profile = Profile::new(Policy::kube_default());
    let snap = cluster.snapshot();
    let pods = [
        pod("p0", vec![claim_volume("data", "d0")]),
        pod("p1", vec![claim_volume("data", "d1")]),
    ];
    let decisions = Evaluator::new(&profile, &snap)
        .schedule(&pods, 0, Deadline::none())
        .unwrap();
    let choices: Vec<(String, VolumeChoice)> = decisions
        .iter()
        .flat_map(|d| match d {
            Decision::Node { volumes, .. } => volumes.clone(),
            Decision::Unschedulable(diag) => panic!("{}", diag.message()),
        })
        .collect();
    assert_eq!(
        choices,
        [
            ("ns/d0".to_string(), VolumeChoice::Static("pv-1".into())),
            ("ns/d1".to_string(), VolumeChoice::Provision("n3".into())),
        ]
    );
    // The assumption: pv-1 refers to d0 (uid included), d1 selects n3.
    let assumed = snap.storage().assumed(&choices);
    assert_eq!(assumed.upsert_volumes.len(), 1);
    assert_eq!(
        assumed.upsert_volumes[0].claim_ref,
        Some(ClaimRef {
            namespace: "ns".into(),
            name: "d0".into(),
            uid: "uid-d0".into()
        })
    );
    assert_eq!(assumed.upsert_claims.len(), 1);
    assert_eq!(assumed.upsert_claims[0].selected_node, "n3");
    // Assumed once more, nothing changes.
    let mut placed: Vec<PodSpec> = pods.to_vec();
    for (p, d) in placed.iter_mut().zip(&decisions) {
        if let Decision::Node { node, .. } = d {
            p.node_name = Some(node.clone());
        }
    }
    let next = snap
        .apply(crate::engine::Delta {
            upsert_pods: placed,
            storage: assumed,
            ..Default::default()
        })
        .unwrap();
    assert!(next.storage().assumed(&choices).is_empty());
    // The next batch: another claim finds pv-1 taken; a second pod of d0 follows pv-1 to n1 and a
    // second pod of d1 follows the selected node (and nothing new is chosen for them but the same).
    let later = [
        pod("q0", vec![claim_volume("data", "d2")]),
        pod("q1", vec![claim_volume("data", "d0")]),
        pod("q2", vec![claim_volume("data", "d1")]),
    ];
    let out = Evaluator::new(&profile, &next)
        .schedule(&later, 0, Deadline::none())
        .unwrap();
    let Decision::Unschedulable(diag) = &out[0] else {
        panic!("{:?}", out[0])
    };
    assert_eq!(
        diag.message(),
        format!("0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind. {NOT_HELPFUL}")
    );
    assert!(
        matches!(&out[1], Decision::Node { node, volumes, .. } if node == "n1" && volumes == &[("ns/d0".to_string(), VolumeChoice::Static("pv-1".into()))]),
        "{:?}",
        out[1]
    );
    assert!(
        matches!(&out[2], Decision::Node { node, volumes, .. } if node == "n3" && volumes == &[("ns/d1".to_string(), VolumeChoice::Provision("n3".into()))]),
        "{:?}",
        out[2]
    );
}

/// Each feasible node's VolumeBinding score (StorageCapacityScoring), by node name.
fn volume_scores(c: &Cluster, p: &PodSpec) -> Vec<(String, i64)> {
    use crate::engine::policy::ScorePlugin;
    let profile = Profile::new(Policy::kube_default());
    let snap = c.snapshot();
    let mut out: Vec<(String, i64)> = Evaluator::new(&profile, &snap)
        .rank(p, 100, 0, Deadline::none())
        .unwrap()
        .feasible
        .into_iter()
        .map(|n| {
            let s = n
                .scores
                .iter()
                .find(|(plugin, ..)| *plugin == ScorePlugin::VolumeBinding)
                .map(|s| s.1);
            (n.node, s.unwrap_or(-1))
        })
        .collect();
    out.sort();
    out
}

/// kube-scheduler 1.37's VolumeBinding Score (`volume_binding_test.go`'s scoring cases, with the
/// default shape: utilization 0 scores 100, 100 scores 0): static bindings by the chosen
/// volume's capacity, provisioning by the CSIStorageCapacity that has room, classes averaged,
/// weight 1 in the default profile.
#[test]
fn volume_binding_scores_by_storage_utilization() {
    let p = pod("p", vec![claim_volume("data", "data")]);
    // Static: the smallest fitting volume per node; a 1Gi claim on a 4Gi volume is 25 % used.
    let statics = Cluster {
        nodes: three_nodes(),
        bound: vec![],
        storage: StorageParts {
            claims: vec![claim("data", "local")],
            volumes: vec![
                pv("pv-1", "local", 4, Some("n1")),
                pv("pv-2", "local", 1, Some("n2")),
                pv("pv-3", "local", 3, Some("n3")),
            ],
            classes: vec![local_wffc()],
            ..Default::default()
        },
    };
    assert_eq!(
        volume_scores(&statics, &p),
        [("n1".into(), 75), ("n2".into(), 0), ("n3".into(), 67)],
        "100 - 1·100/4, 100 - 100, 100 - ⌊100/3⌋"
    );
    // The pod goes where the most capacity stays free, as under kube-scheduler 1.37.
    assert_eq!(schedule(&statics, std::slice::from_ref(&p)), [Ok("n1".to_string())]);

    // Provisioning with capacity tracking: the node's capacity for the class.
    let provisioned = |capacities: Vec<StorageCapacity>, drivers: Vec<CsiDriver>| Cluster {
        nodes: zones(),
        bound: vec![],
        storage: StorageParts {
            claims: vec![claim("data", "tracked")],
            classes: vec![tracked_class()],
            csi_drivers: drivers,
            capacities,
            ..Default::default()
        },
    };
    let tracked = provisioned(
        vec![
            capacity("a", "tracked", in_zones(&["a"]), 10),
            capacity("b", "tracked", in_zones(&["b"]), 2),
            capacity("c", "tracked", in_zones(&["c"]), 1),
        ],
        vec![tracked_driver(true)],
    );
    assert_eq!(
        volume_scores(&tracked, &p),
        [("n1".into(), 90), ("n2".into(), 50), ("n3".into(), 0)]
    );
    // Untracked: no capacity is found, no class is scored.
    let untracked = provisioned(vec![capacity("a", "tracked", in_zones(&["a"]), 10)], vec![]);
    assert_eq!(
        volume_scores(&untracked, &p),
        [("n1".into(), 0), ("n2".into(), 0), ("n3".into(), 0)]
    );
    // A pod without claims scores 0 everywhere.
    assert_eq!(
        volume_scores(&statics, &pod("q", vec![])),
        [("n1".into(), 0), ("n2".into(), 0), ("n3".into(), 0)]
    );
}

/// kube-scheduler 1.37 runs DynamicResources' PostFilter before DefaultPreemption's; after a
/// volume PreFilter rejected the pod, it fails with "not found" and nothing is preempted, even
/// where evicting a pod would make room (the same pod with its claim present preempts).
#[test]
fn a_pod_a_volume_prefilter_rejects_preempts_nothing() {
    let cpu = |milli| crate::engine::resources::Resources {
        milli_cpu: milli,
        ..Default::default()
    };
    let cluster = |claims: Vec<Claim>| Cluster {
        nodes: three_nodes(),
        bound: ["n1", "n2", "n3"]
            .iter()
            .map(|n| PodSpec {
                requests: cpu(4000),
                ..bound_pod(&format!("low-{n}"), n, vec![])
            })
            .collect(),
        storage: StorageParts {
            claims,
            volumes: vec![pv_free("pv-1")],
            classes: vec![local_wffc()],
            ..Default::default()
        },
    };
    let preemptor = PodSpec {
        priority: 1000,
        requests: cpu(1000),
        ..pod("p", vec![claim_volume("data", "data")])
    };
    let missing = schedule(&cluster(vec![]), std::slice::from_ref(&preemptor)).remove(0);
    assert_eq!(
        missing,
        Err("0/3 nodes are available: persistentvolumeclaim \"data\" not found. not found".to_string())
    );
    let never = PodSpec {
        preemption_policy: crate::engine::model::PreemptionPolicy::Never,
        ..preemptor.clone()
    };
    assert_eq!(schedule(&cluster(vec![]), &[never]).remove(0), missing);
    let present = schedule(&cluster(vec![claim("data", "local")]), &[preemptor]).remove(0);
    let message = present.expect_err("every node is full");
    assert!(
        message.contains("preemption: found a potential placement for pod on node n"),
        "{message}"
    );
    // Without DynamicResources in the profile there is no such PostFilter: DefaultPreemption
    // runs, and finds that evicting pods does not bring the claim.
    let mut policy = Policy::kube_default();
    policy
        .filters
        .retain(|f| *f != crate::engine::policy::FilterPlugin::DynamicResources);
    let profile = Profile::new(policy);
    let snap = cluster(vec![]).snapshot();
    let decisions = Evaluator::new(&profile, &snap)
        .schedule(
            std::slice::from_ref(&PodSpec {
                ..pod("p", vec![claim_volume("data", "data")])
            }),
            0,
            Deadline::none(),
        )
        .unwrap();
    let Decision::Unschedulable(diag) = &decisions[0] else {
        panic!("{decisions:?}")
    };
    assert_eq!(
        diag.message(),
        "0/3 nodes are available: persistentvolumeclaim \"data\" not found. \
         preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
}
