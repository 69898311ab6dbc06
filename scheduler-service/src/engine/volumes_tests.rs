//! The volume plugins (VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone) through
//! the engine, in kube-scheduler's test-table style: a cluster, a pod, the nodes it may go to or
//! the `FitError` message it gets. Cases follow kube-scheduler 1.34's plugin tests
//! (`pkg/scheduler/framework/plugins/{volumerestrictions,nodevolumelimits,volumebinding,volumezone}`)
//! with clusters of our own.

use std::sync::Arc;

use super::framework::{Deadline, Decision, Evaluator, Profile};
use super::model::{NodeSpec, PodSpec, Requirement, SelectorOp, SelectorTerm};
use super::policy::Policy;
use super::quantity::Quantity;
use super::resources::Resources;
use super::snapshot::Snapshot;
use super::volumes::*;

const GI: i128 = 1 << 30;

fn gi(n: i128) -> Quantity {
    Quantity::parse(&(n * GI).to_string()).unwrap()
}

fn node(name: &str, labels: &[(&str, &str)]) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain([("kubernetes.io/hostname".to_string(), name.to_string())])
            .collect(),
        allocatable: Resources {
            milli_cpu: 4000,
            memory: 8 << 30,
            ..Default::default()
        },
        allowed_pods: 110,
        ..Default::default()
    }
}

fn claim_volume(name: &str, claim: &str) -> PodVolume {
    PodVolume {
        name: Arc::from(name),
        source: VolumeSource::Claim {
            claim_name: Arc::from(claim),
            ephemeral: false,
        },
    }
}

fn pod(uid: &str, volumes: Vec<PodVolume>) -> PodSpec {
    PodSpec {
        uid: Arc::from(uid),
        namespace: "ns".into(),
        name: uid.into(),
        volumes,
        ..Default::default()
    }
}

fn bound_pod(uid: &str, node: &str, volumes: Vec<PodVolume>) -> PodSpec {
    PodSpec {
        node_name: Some(node.into()),
        ..pod(uid, volumes)
    }
}

fn claim(name: &str, class: &str) -> Claim {
    Claim {
        namespace: "ns".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        class: class.into(),
        access_modes: vec![AccessMode::ReadWriteOnce],
        request: gi(1),
        request_set: true,
        ..Default::default()
    }
}

fn bound_claim(name: &str, pv: &str) -> Claim {
    Claim {
        volume_name: pv.into(),
        bind_completed: true,
        ..claim(name, "local")
    }
}

fn on_host(host: &str) -> Option<Vec<SelectorTerm>> {
    Some(vec![SelectorTerm {
        match_expressions: vec![Requirement {
            key: "kubernetes.io/hostname".into(),
            op: SelectorOp::In(vec![host.into()]),
        }],
        match_fields: vec![],
    }])
}

fn pv(name: &str, class: &str, size: i128, host: Option<&str>) -> PersistentVolume {
    PersistentVolume {
        name: name.into(),
        class: class.into(),
        capacity: gi(size),
        access_modes: vec![AccessMode::ReadWriteOnce],
        node_affinity: host.and_then(on_host),
        phase: VolumePhase::Available,
        ..Default::default()
    }
}

fn class(name: &str, provisioner: &str, mode: BindingMode) -> StorageClass {
    StorageClass {
        name: name.into(),
        provisioner: provisioner.into(),
        binding_mode: Some(mode),
        allowed_topologies: vec![],
    }
}

fn local_wffc() -> StorageClass {
    class("local", NO_PROVISIONER, BindingMode::WaitForFirstConsumer)
}

struct Cluster {
    nodes: Vec<NodeSpec>,
    bound: Vec<PodSpec>,
    storage: StorageParts,
}

impl Cluster {
    fn snapshot(&self) -> Snapshot {
        Snapshot::build(self.nodes.clone(), self.bound.clone())
            .and_then(|s| s.with_storage(self.storage.clone()))
            .unwrap()
    }
}

/// Where each pod of the batch goes, or its message.
fn schedule(c: &Cluster, pods: &[PodSpec]) -> Vec<Result<String, String>> {
    let profile = Profile::new(Policy::kube_default());
    let snap = c.snapshot();
    Evaluator::new(&profile, &snap)
        .schedule(pods, 0, Deadline::none())
        .unwrap()
        .into_iter()
        .map(|d| match d {
            Decision::Node { node, .. } => Ok(node),
            Decision::Unschedulable(diag) => Err(diag.message()),
        })
        .collect()
}

/// The nodes a pod may go to, by name.
fn feasible(c: &Cluster, p: &PodSpec) -> Vec<String> {
    let profile = Profile::new(Policy::kube_default());
    let snap = c.snapshot();
    let mut names: Vec<String> = Evaluator::new(&profile, &snap)
        .rank(p, 100, 0, Deadline::none())
        .unwrap()
        .feasible
        .into_iter()
        .map(|n| n.node)
        .collect();
    names.sort();
    names
}

fn three_nodes() -> Vec<NodeSpec> {
    vec![node("n1", &[]), node("n2", &[]), node("n3", &[])]
}

const NOT_HELPFUL: &str = "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";

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
                "0/3 nodes are available: 3 node(s) had volume node affinity conflict. {NOT_HELPFUL}"
            )),
        },
        Case {
            name: "unbound claim of an Immediate class",
            claims: vec![claim("data", "fast")],
            volumes: vec![],
            classes: vec![class("fast", "ebs.csi.aws.com", BindingMode::Immediate)],
            want: Err(format!(
                "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. {NOT_HELPFUL}"
            )),
        },
        Case {
            name: "unbound claim of a missing class is Immediate",
            claims: vec![claim("data", "gone")],
            volumes: vec![],
            classes: vec![],
            want: Err(format!(
                "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. {NOT_HELPFUL}"
            )),
        },
        Case {
            name: "missing claim",
            claims: vec![],
            volumes: vec![],
            classes: vec![],
            want: Err(format!(
                "0/3 nodes are available: persistentvolumeclaim \"data\" not found. {NOT_HELPFUL}"
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
            want: Err(format!(
                "0/3 nodes are available: persistentvolumeclaim \"data\" is being deleted. {NOT_HELPFUL}"
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
                selector: Some(super::model::LabelSelector::from_labels([("disk", "ssd")])),
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
                ..claim("data", "zonal")
            }],
            volumes: vec![],
            classes: vec![class("zonal", "ebs.csi.aws.com", BindingMode::WaitForFirstConsumer)],
            want: Ok(vec!["n2"]),
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

fn in_zones(zones: &[&str]) -> Option<super::preemption::LabelSelector> {
    Some(super::preemption::LabelSelector {
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
    topology: Option<super::preemption::LabelSelector>,
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
                Some(super::preemption::LabelSelector {
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
                Some(super::preemption::LabelSelector {
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
        .apply(super::Delta {
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

#[test]
fn volume_zone() {
    let zone = |z: &'static str| [("topology.kubernetes.io/zone", z)];
    let nodes = vec![
        node("n1", &zone("a")),
        node("n2", &zone("b")),
        node("n3", &[("failure-domain.beta.kubernetes.io/zone", "a")]),
    ];
    struct Case {
        name: &'static str,
        pv_labels: Vec<(&'static str, &'static str)>,
        want: Vec<&'static str>,
    }
    let cases = [
        Case {
            name: "GA zone label",
            pv_labels: vec![("topology.kubernetes.io/zone", "a")],
            want: vec!["n1"],
        },
        Case {
            name: "beta label on the volume matches the node's GA or beta label",
            pv_labels: vec![("failure-domain.beta.kubernetes.io/zone", "a")],
            want: vec!["n1", "n3"],
        },
        Case {
            name: "several zones separated by __",
            pv_labels: vec![("topology.kubernetes.io/zone", "a__b")],
            want: vec!["n1", "n2"],
        },
        Case {
            name: "no zone label",
            pv_labels: vec![],
            want: vec!["n1", "n2", "n3"],
        },
    ];
    for c in cases {
        let cluster = Cluster {
            nodes: nodes.clone(),
            bound: vec![],
            storage: StorageParts {
                claims: vec![Claim {
                    class: String::new(),
                    ..bound_claim("data", "pv-z")
                }],
                volumes: vec![PersistentVolume {
                    labels: c
                        .pv_labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                    ..pv("pv-z", "", 10, None)
                }],
                classes: vec![],
                csi_nodes: vec![],
                ..Default::default()
            },
        };
        let p = pod("p", vec![claim_volume("data", "data")]);
        assert_eq!(feasible(&cluster, &p), c.want, "{}", c.name);
    }
    // A node without zone labels takes any volume (single-zone clusters); the message counts
    // the others.
    let cluster = Cluster {
        nodes: vec![node("n1", &zone("a")), node("plain", &[])],
        bound: vec![],
        storage: StorageParts {
            claims: vec![bound_claim("data", "pv-z")],
            volumes: vec![PersistentVolume {
                labels: [("topology.kubernetes.io/zone".to_string(), "b".to_string())].into(),
                ..pv("pv-z", "local", 10, None)
            }],
            classes: vec![local_wffc()],
            csi_nodes: vec![],
            ..Default::default()
        },
    };
    assert_eq!(
        feasible(&cluster, &pod("p", vec![claim_volume("data", "data")])),
        ["plain"]
    );
}

fn csi_claim(name: &str, pv: &str) -> (Claim, PersistentVolume) {
    (
        bound_claim(name, pv),
        PersistentVolume {
            csi: Some(("ebs.csi.aws.com".into(), format!("vol-{pv}"))),
            ..pv_free(pv)
        },
    )
}

fn pv_free(name: &str) -> PersistentVolume {
    pv(name, "local", 10, None)
}

#[test]
fn node_volume_limits() {
    // n1 allows 2 EBS attachments and has one (a bound pod's); n2 has no CSINode (no limit).
    let (c0, v0) = csi_claim("existing", "pv-0");
    let (c1, v1) = csi_claim("a", "pv-1");
    let (c2, v2) = csi_claim("b", "pv-2");
    let cluster = Cluster {
        nodes: vec![node("n1", &[]), node("n2", &[])],
        bound: vec![bound_pod("old", "n1", vec![claim_volume("v", "existing")])],
        storage: StorageParts {
            claims: vec![c0, c1, c2],
            volumes: vec![v0, v1, v2],
            classes: vec![local_wffc()],
            csi_nodes: vec![CsiNode {
                name: "n1".into(),
                drivers: vec![("ebs.csi.aws.com".into(), Some(2))],
            }],
            ..Default::default()
        },
    };
    let one = pod("one", vec![claim_volume("v", "a")]);
    let two = pod("two", vec![claim_volume("v", "a"), claim_volume("w", "b")]);
    let same = pod("same", vec![claim_volume("v", "existing")]);
    assert_eq!(feasible(&cluster, &one), ["n1", "n2"], "1 + 1 <= 2");
    assert_eq!(feasible(&cluster, &two), ["n2"], "1 + 2 > 2");
    assert_eq!(
        feasible(&cluster, &same),
        ["n1", "n2"],
        "an attached volume is counted once"
    );
    // In a batch the count grows with each placed pod: only n2 is left after the first
    // (placed on n1 by LeastAllocated's tie-break, or on n2).
    let only_n1 = Cluster {
        nodes: vec![node("n1", &[])],
        ..cluster
    };
    let out = schedule(
        &only_n1,
        &[
            pod("p1", vec![claim_volume("v", "a")]),
            pod("p2", vec![claim_volume("v", "b")]),
        ],
    );
    assert_eq!(out[0], Ok("n1".to_string()));
    assert_eq!(
        out[1],
        Err("0/1 nodes are available: 1 node(s) exceed max volume count. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.".to_string())
    );
}

#[test]
fn volume_restrictions() {
    let disk = |name: &str, read_only: bool| PodVolume {
        name: Arc::from("d"),
        source: VolumeSource::GcePersistentDisk {
            pd_name: Arc::from(name),
            read_only,
        },
    };
    let cluster = Cluster {
        nodes: vec![node("n1", &[]), node("n2", &[])],
        bound: vec![
            bound_pod("a", "n1", vec![disk("pd-1", true)]),
            bound_pod("b", "n2", vec![disk("pd-2", false)]),
        ],
        storage: StorageParts::default(),
    };
    struct Case {
        name: &'static str,
        volume: PodVolume,
        want: Vec<&'static str>,
    }
    for c in [
        Case {
            name: "read-only everywhere shares the disk",
            volume: disk("pd-1", true),
            want: vec!["n1", "n2"],
        },
        Case {
            name: "read-write conflicts with a read-only user",
            volume: disk("pd-1", false),
            want: vec!["n2"],
        },
        Case {
            name: "another disk",
            volume: disk("pd-3", false),
            want: vec!["n1", "n2"],
        },
        Case {
            name: "EBS volumes conflict even read-only",
            volume: PodVolume {
                name: Arc::from("e"),
                source: VolumeSource::AwsElasticBlockStore {
                    volume_id: Arc::from("vol-1"),
                },
            },
            want: vec!["n1", "n2"],
        },
    ] {
        assert_eq!(feasible(&cluster, &pod("p", vec![c.volume])), c.want, "{}", c.name);
    }
    let out = schedule(&cluster, &[pod("p", vec![disk("pd-2", true)])]);
    assert_eq!(out[0], Ok("n1".to_string()));

    // ReadWriteOncePod: a claim in use anywhere rejects every node.
    let rwop = Claim {
        access_modes: vec![AccessMode::ReadWriteOncePod],
        ..bound_claim("solo", "pv-s")
    };
    let cluster = Cluster {
        nodes: vec![node("n1", &[]), node("n2", &[])],
        bound: vec![bound_pod("holder", "n1", vec![claim_volume("v", "solo")])],
        storage: StorageParts {
            claims: vec![rwop],
            volumes: vec![pv_free("pv-s")],
            classes: vec![local_wffc()],
            csi_nodes: vec![],
            ..Default::default()
        },
    };
    let out = schedule(&cluster, &[pod("p", vec![claim_volume("v", "solo")])]);
    assert_eq!(
        out[0],
        Err("0/2 nodes are available: 2 node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.".to_string())
    );
    // The conflict is resolvable, as kube-scheduler's Unschedulable: a more important pod is
    // nominated to the holder's node with the holder as victim (the dry run's RemovePod clears
    // the conflict there, and only there).
    let profile = Profile::new(Policy::kube_default());
    let snap = cluster.snapshot();
    let urgent = PodSpec {
        priority: 100,
        ..pod("urgent", vec![claim_volume("v", "solo")])
    };
    let d = Evaluator::new(&profile, &snap)
        .schedule(std::slice::from_ref(&urgent), 0, Deadline::none())
        .unwrap();
    let Decision::Unschedulable(diag) = &d[0] else {
        panic!("{d:?}")
    };
    let n = diag.nomination.as_ref().expect("nominated");
    assert_eq!(n.node, "n1");
    assert_eq!(n.victims.iter().map(|v| v.to_string()).collect::<Vec<_>>(), ["holder"]);
    // A second user of the claim on n2 keeps it in use whatever goes on n1.
    let mut two = cluster;
    two.bound
        .push(bound_pod("other", "n2", vec![claim_volume("v", "solo")]));
    let snap = two.snapshot();
    let d = Evaluator::new(&profile, &snap)
        .schedule(std::slice::from_ref(&urgent), 0, Deadline::none())
        .unwrap();
    let Decision::Unschedulable(diag) = &d[0] else {
        panic!("{d:?}")
    };
    assert!(diag.nomination.is_none(), "{:?}", diag.nomination);
    assert_eq!(
        diag.message(),
        "0/2 nodes are available: 2 node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode. preemption: 0/2 nodes are available: 2 node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode."
    );
}

#[test]
fn pods_without_volumes_are_untouched_by_the_volume_plugins() {
    // A snapshot full of storage objects, a pod with none: every node, as without them.
    let cluster = Cluster {
        nodes: three_nodes(),
        bound: vec![],
        storage: StorageParts {
            claims: vec![claim("data", "fast")],
            volumes: vec![pv("pv-1", "local", 1, Some("nowhere"))],
            classes: vec![class("fast", "x", BindingMode::Immediate)],
            csi_nodes: vec![CsiNode {
                name: "n1".into(),
                drivers: vec![("ebs.csi.aws.com".into(), Some(0))],
            }],
            ..Default::default()
        },
    };
    assert_eq!(feasible(&cluster, &pod("p", vec![])), ["n1", "n2", "n3"]);
}
