use std::collections::HashSet;

use prost::Message;

use super::*;
use crate::engine::{Deadline, Decision, Evaluator, Policy, Profile, Snapshot};
use crate::grpc::convert;

fn small() -> ClusterShape {
    ClusterShape::with_nodes(300)
}

fn build(s: &proto::Snapshot) -> Snapshot {
    let (nodes, pods, _, _) = convert::snapshot("snapshot", s).expect("generated snapshot is valid");
    Snapshot::build(nodes, pods).expect("generated snapshot builds")
}

#[test]
fn same_seed_same_cluster_and_pods() {
    assert_eq!(cluster(&small(), 7), cluster(&small(), 7));
    assert_ne!(cluster(&small(), 7), cluster(&small(), 8));
    assert_eq!(distinct_pods(50, 3), distinct_pods(50, 3));
    assert_ne!(distinct_pods(50, 3), distinct_pods(50, 4));
    assert_eq!(
        distinct_pods(50, 3)[..20],
        distinct_pods(20, 3)[..],
        "a longer list extends a shorter one"
    );
    assert_eq!(replica_pods(20, 9), replica_pods(20, 9));
    assert_ne!(replica_pods(20, 9), replica_pods(20, 10));
}

#[test]
fn bound_pods_never_overcommit_and_leave_room() {
    for seed in [1, 2, 3] {
        let shape = small();
        let s = cluster(&shape, seed);
        assert_eq!(s.nodes.len(), shape.nodes);
        assert_eq!(s.pods.len(), shape.nodes * shape.pods_per_node);
        let snap = build(&s);
        assert_eq!(snap.pod_count(), s.pods.len());
        let (mut cpu_used, mut cpu_alloc) = (0i64, 0i64);
        for entry in snap.nodes() {
            let (a, u) = (&entry.spec.allocatable, &entry.usage);
            let name = &entry.spec.name;
            assert!(
                u.requested.milli_cpu <= a.milli_cpu,
                "{name}: cpu {} > {}",
                u.requested.milli_cpu,
                a.milli_cpu
            );
            assert!(
                u.requested.memory <= a.memory,
                "{name}: memory {} > {}",
                u.requested.memory,
                a.memory
            );
            assert!(u.requested.ephemeral_storage <= a.ephemeral_storage);
            for (r, amount) in &u.requested.scalars {
                assert!(*amount <= a.scalar(r), "{name}: {r} {amount} > {}", a.scalar(r));
            }
            assert_eq!(u.pod_count, shape.pods_per_node as i64);
            assert!(u.pod_count <= entry.spec.allowed_pods);
            assert!(u.requested.memory * 10 <= a.memory * 7, "{name}: memory above 70%");
            cpu_used += u.requested.milli_cpu;
            cpu_alloc += a.milli_cpu;
        }
        let utilization = cpu_used as f64 / cpu_alloc as f64;
        assert!(
            (0.35..=0.65).contains(&utilization),
            "cluster cpu utilization {utilization}"
        );
    }
}

#[test]
fn the_cluster_has_the_promised_features() {
    let s = cluster(&ClusterShape::with_nodes(1000), 5);
    let count = |f: &dyn Fn(&proto::Node) -> bool| s.nodes.iter().filter(|n| f(n)).count();
    assert!(count(&|n| n.taints.iter().any(|t| t.key == "dedicated")) > 50);
    assert!(count(&|n| n.allocatable.contains_key(GPU)) > 5);
    assert!(count(&|n| n.unschedulable) > 2);
    let zones: HashSet<_> = s
        .nodes
        .iter()
        .map(|n| n.labels["topology.kubernetes.io/zone"].clone())
        .collect();
    assert_eq!(zones.len(), 3);
    let names: HashSet<_> = s.nodes.iter().map(|n| n.name.clone()).collect();
    assert_eq!(names.len(), s.nodes.len(), "node names are unique");
    let uids: HashSet<_> = s.pods.iter().map(|p| p.uid.clone()).collect();
    assert_eq!(uids.len(), s.pods.len(), "pod uids are unique");
    let images: f64 = s.nodes.iter().map(|n| n.images.len() as f64).sum::<f64>() / s.nodes.len() as f64;
    assert!((9.0..=11.0).contains(&images), "{images} images per node");
}

#[test]
fn distinct_pods_differ_and_replicas_do_not() {
    let strip = |p: &proto::Pod| {
        let mut p = p.clone();
        p.uid.clear();
        p.name.clear();
        p.labels.remove("pod-template-hash");
        p.encode_to_vec()
    };
    let pods = distinct_pods(500, 11);
    let specs: HashSet<_> = pods.iter().map(strip).collect();
    assert_eq!(specs.len(), pods.len());
    assert_eq!(pods.iter().map(|p| &p.uid).collect::<HashSet<_>>().len(), pods.len());
    assert!(pods.iter().any(|p| !p.node_selector.is_empty()));
    assert!(pods
        .iter()
        .any(|p| p.node_affinity.as_ref().is_some_and(|a| a.required.is_some())));
    assert!(pods
        .iter()
        .any(|p| p.node_affinity.as_ref().is_some_and(|a| !a.preferred.is_empty())));
    assert!(pods.iter().any(|p| !p.tolerations.is_empty()));
    assert!(pods.iter().any(|p| p.containers.iter().any(|c| !c.ports.is_empty())));
    for (i, p) in pods.iter().enumerate() {
        convert::pod(&format!("pods[{i}]"), p).expect("generated pod is valid");
    }

    let replicas = replica_pods(256, 11);
    assert_eq!(replicas.iter().map(strip).collect::<HashSet<_>>().len(), 1);
    assert_eq!(replicas.iter().map(|p| &p.uid).collect::<HashSet<_>>().len(), 256);
    assert_eq!(replicas.iter().map(|p| &p.name).collect::<HashSet<_>>().len(), 256);
}

#[test]
fn most_pending_pods_fit() {
    let snap = build(&cluster(&small(), 21));
    let profile = Profile::new(Policy::kube_default());
    let pods: Vec<_> = distinct_pods(200, 21)
        .iter()
        .map(|p| convert::pod("pod", p).unwrap())
        .collect();
    let decisions = Evaluator::new(&profile, &snap)
        .schedule(&pods, 0, Deadline::none())
        .unwrap();
    let placed = decisions.iter().filter(|d| matches!(d, Decision::Node { .. })).count();
    assert!(placed >= 170, "only {placed} of 200 distinct pods placed");
    let replicas: Vec<_> = replica_pods(64, 21)
        .iter()
        .map(|p| convert::pod("pod", p).unwrap())
        .collect();
    let decisions = Evaluator::new(&profile, &snap)
        .schedule(&replicas, 0, Deadline::none())
        .unwrap();
    assert!(
        decisions.iter().all(|d| matches!(d, Decision::Node { .. })),
        "replicas all fit"
    );
}

#[test]
fn quantities_are_written_in_kubernetes_notation() {
    assert_eq!(quantity(250, Unit::MilliCpu), "250m");
    assert_eq!(quantity(4000, Unit::MilliCpu), "4");
    assert_eq!(quantity(16 * GI, Unit::Bytes), "16Gi");
    assert_eq!(quantity(512 * MI, Unit::Bytes), "512Mi");
    assert_eq!(quantity(1536 * KI, Unit::Bytes), "1536Ki");
    assert_eq!(quantity(1000, Unit::Bytes), "1000");
    assert_eq!(quantity(0, Unit::Bytes), "0");
    assert_eq!(quantity(110, Unit::Count), "110");
}

#[test]
fn generated_quantities_parse_to_what_was_meant() {
    for (cpu, memory) in [
        (250, 512 * MI),
        (15_760, 64 * GI - 1565 * MI),
        (4000, 16 * GI),
        (50, 1000),
    ] {
        let n = proto::Node {
            name: "n".into(),
            allocatable: BTreeMap::from([
                ("cpu".to_string(), quantity(cpu, Unit::MilliCpu)),
                ("memory".to_string(), quantity(memory, Unit::Bytes)),
                ("pods".to_string(), quantity(110, Unit::Count)),
            ]),
            ..Default::default()
        };
        let spec = convert::node("node", &n).unwrap();
        assert_eq!((spec.allocatable.milli_cpu, spec.allocatable.memory), (cpu, memory));
        assert_eq!(spec.allowed_pods, 110);
    }
    let s = cluster(&ClusterShape::with_nodes(20), 1);
    let cpus: Vec<&String> = s
        .pods
        .iter()
        .flat_map(|p| &p.containers)
        .filter_map(|c| c.requests.get("cpu"))
        .collect();
    assert!(
        cpus.iter().any(|q| q.ends_with('m')),
        "millicore requests are written as such"
    );
    assert!(s.nodes.iter().all(|n| n.allocatable["memory"].ends_with("Mi")));
}
