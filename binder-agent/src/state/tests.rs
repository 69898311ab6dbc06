use prost::Message;

use super::encoding::{decode, encoded_uid};
use super::*;
use crate::projection::PdbInfo;

fn node(name: &str) -> proto::Node {
    proto::Node {
        name: name.into(),
        ..Default::default()
    }
}

fn pod(uid: &str, node: &str) -> proto::Pod {
    proto::Pod {
        uid: uid.into(),
        node_name: node.into(),
        ..Default::default()
    }
}

#[test]
fn nodes_carry_their_partition_only_when_decisions_run_in_partitions() {
    use crate::partitions::{partition_of, PARTITION_LABEL};
    let mut s = ClusterState::with_partitions(3);
    s.apply_node(node("a"));
    let v = s.version();
    // The same node again (as the watch relists it) changes nothing.
    s.apply_node(node("a"));
    assert_eq!(s.version(), v);
    let label = s.nodes()["a"].labels.get(PARTITION_LABEL).cloned();
    assert_eq!(label, Some(partition_of("a", 3).to_string()));
    let mut plain = ClusterState::new();
    plain.apply_node(node("a"));
    assert!(plain.nodes()["a"].labels.is_empty());
}

#[test]
fn delta_carries_latest_value_of_each_change() {
    let mut s = ClusterState::new();
    s.apply_node(node("a"));
    let v = s.version();
    s.apply_node(node("b"));
    s.apply_bound_pod(pod("p1", "a"));
    s.delete_node("a");
    let d = s.delta_since(v).unwrap();
    assert_eq!(
        d.upsert_nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
        ["b"]
    );
    assert_eq!(d.remove_nodes, ["a"]);
    assert_eq!(d.upsert_pods.len(), 1);
    assert!(s.delta_since(s.version()).unwrap().upsert_nodes.is_empty());
}

#[test]
fn full_parts_hold_every_pod_in_uid_order_shared_with_the_state() {
    let mut s = ClusterState::new();
    s.apply_node(node("b"));
    s.apply_node(node("a"));
    for uid in ["p3", "p1", "p4"] {
        s.apply_bound_pod(pod(uid, "a"));
    }
    s.assume(pod("p2", ""), "b");
    let parts = s.full_parts();
    assert!(parts.rest.pods.is_empty(), "the pods travel apart");
    assert_eq!(
        parts.rest.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    let pods: Vec<proto::Pod> = parts.pods.iter().filter_map(|b| decode(b)).collect();
    assert_eq!(
        pods.iter()
            .map(|p| (p.uid.as_str(), p.node_name.as_str()))
            .collect::<Vec<_>>(),
        [("p1", "a"), ("p2", "b"), ("p3", "a"), ("p4", "a")]
    );
    assert_eq!(s.full().pods, pods, "full() is the parts joined");
    // Bound pods are the state's bytes, not copies.
    assert!(Arc::ptr_eq(&parts.pods[0], &s.bound["p1"]));
    // Sorted apart, the unordered parts are the same.
    let mut unordered = s.full_parts_unordered();
    sort_by_uid(&mut unordered.pods);
    assert_eq!(unordered.pods, parts.pods);
}

#[test]
fn an_encoded_pod_sorts_by_its_uid() {
    let long = "u".repeat(200);
    let mut pods: Vec<Arc<[u8]>> = ["b", long.as_str(), "a", "ab"]
        .iter()
        .map(|uid| pod(uid, "n").encode_to_vec().into())
        .collect();
    sort_by_uid(&mut pods);
    let uids: Vec<String> = pods.iter().filter_map(|b| decode(b)).map(|p| p.uid).collect();
    assert_eq!(uids, ["a", "ab", "b", long.as_str()]);
    assert_eq!(encoded_uid(&[]), b"");
    assert_eq!(encoded_uid(&[0x0a, 0x09, b'x']), b"", "a length past the end");
}

#[test]
fn assumptions_count_until_confirmed_or_forgotten() {
    let mut s = ClusterState::new();
    s.apply_node(node("a"));
    s.assume(pod("p1", ""), "a");
    assert_eq!(s.full().pods[0].node_name, "a");
    let v = s.version();
    // The watch shows the binding: same pod, no change for the replicas.
    s.apply_bound_pod(pod("p1", "a"));
    assert!(!s.is_assumed("p1") && s.is_bound("p1"));
    assert_eq!(s.version(), v, "confirming an identical assumption changes nothing");
    assert_eq!(s.pod_count(), 1);
    // A failed bind forgets the assumption.
    s.assume(pod("p2", ""), "a");
    s.forget("p2");
    assert_eq!(s.pod_count(), 1);
    assert_eq!(s.delta_since(v).unwrap().remove_pod_uids, ["p2"]);
}

#[test]
fn namespaces_travel_in_full_snapshots_and_deltas() {
    let mut s = ClusterState::new();
    let ns = |name: &str, team: &str| proto::Namespace {
        name: name.into(),
        labels: [("team".to_string(), team.to_string())].into(),
    };
    s.apply_namespace(ns("a", "x"));
    let v = s.version();
    assert_eq!(s.full().namespaces, [ns("a", "x")]);
    s.apply_namespace(ns("a", "x"));
    assert_eq!(s.version(), v, "an unchanged namespace is not a change");
    s.apply_namespace(ns("a", "y"));
    s.apply_namespace(ns("b", "z"));
    s.delete_namespace("b");
    let d = s.delta_since(v).unwrap();
    assert_eq!(d.upsert_namespaces, [ns("a", "y")]);
    assert_eq!(d.remove_namespaces, ["b"]);
}

fn pdb(name: &str, allowed: i32, disrupted: &[&str]) -> PdbInfo {
    PdbInfo {
        pdb: proto::PodDisruptionBudget {
            namespace: "shop".into(),
            name: name.into(),
            selector: Some(proto::LabelSelector {
                match_labels: [("app".to_string(), "db".to_string())].into(),
                ..Default::default()
            }),
            disruptions_allowed: allowed,
            disrupted_pod_uids: vec![],
        },
        disrupted_pods: disrupted.iter().map(|s| s.to_string()).collect(),
    }
}

fn named(uid: &str, namespace: &str, name: &str) -> proto::Pod {
    proto::Pod {
        namespace: namespace.into(),
        name: name.into(),
        ..pod(uid, "a")
    }
}

#[test]
fn pdbs_travel_in_full_snapshots_and_deltas() {
    let mut s = ClusterState::new();
    let v = s.version();
    s.apply_pdb(pdb("db", 0, &[]));
    assert_eq!(s.full().pod_disruption_budgets.len(), 1);
    assert_eq!(s.full().pod_disruption_budgets[0].disruptions_allowed, 0);
    let d = s.delta_since(v).unwrap();
    assert_eq!(d.upsert_pod_disruption_budgets[0].name, "db");
    let v = s.version();
    s.apply_pdb(pdb("db", 0, &[]));
    assert_eq!(s.version(), v, "an unchanged budget is not a change");
    s.apply_pdb(pdb("db", 1, &[]));
    assert_eq!(
        s.delta_since(v).unwrap().upsert_pod_disruption_budgets[0].disruptions_allowed,
        1
    );
    let v = s.version();
    s.delete_pdb("shop/db");
    assert!(s.full().pod_disruption_budgets.is_empty());
    assert_eq!(s.delta_since(v).unwrap().remove_pod_disruption_budgets, ["shop/db"]);
}

#[test]
fn disrupted_pod_names_resolve_to_the_uids_of_the_namespaces_pods() {
    let mut s = ClusterState::new();
    s.apply_bound_pod(named("u0", "shop", "db-0"));
    s.apply_bound_pod(named("x0", "other", "db-1"));
    // db-0 is known; db-1 exists only in another namespace, so it waits for its pod.
    s.apply_pdb(pdb("db", 0, &["db-1", "db-0"]));
    assert_eq!(s.full().pod_disruption_budgets[0].disrupted_pod_uids, ["u0"]);
    let v = s.version();
    s.apply_bound_pod(named("u1", "shop", "db-1"));
    let d = s.delta_since(v).unwrap();
    assert_eq!(d.upsert_pod_disruption_budgets[0].disrupted_pod_uids, ["u0", "u1"]);
    // Once the pod is gone, the resolved uid stays until the disruption controller drops the
    // name; a pod recreated under the name is not taken for the evicted one.
    s.delete_pod("u0");
    s.apply_pdb(pdb("db", 0, &["db-1", "db-0"]));
    s.apply_bound_pod(named("u0b", "shop", "db-0"));
    assert_eq!(s.full().pod_disruption_budgets[0].disrupted_pod_uids, ["u0", "u1"]);
    // The controller clears the list.
    s.apply_pdb(pdb("db", 2, &[]));
    assert!(s.full().pod_disruption_budgets[0].disrupted_pod_uids.is_empty());
    s.apply_bound_pod(named("u9", "shop", "db-9"));
    assert_eq!(s.unresolved_pdbs, 0);
}

#[test]
fn bound_pods_come_back_whole_from_their_encoded_form() {
    let mut s = ClusterState::new();
    s.apply_node(node("a"));
    let v = s.version();
    let mut p = pod("p1", "a");
    p.namespace = "shop".into();
    p.labels.insert("app".into(), "cart".into());
    p.containers.push(proto::Container {
        name: "app".into(),
        image: "registry.example/cart:1".into(),
        requests: [("cpu".to_string(), "250m".to_string())].into(),
        ..Default::default()
    });
    s.apply_bound_pod(p.clone());
    assert_eq!(s.full().pods, [p.clone()]);
    assert_eq!(s.delta_since(v).unwrap().upsert_pods, [p.clone()]);
    let v = s.version();
    s.apply_bound_pod(p.clone());
    assert_eq!(s.version(), v, "the same bound pod again changes nothing");
    p.labels.insert("tier".into(), "web".into());
    s.apply_bound_pod(p.clone());
    assert_eq!(s.delta_since(v).unwrap().upsert_pods, [p]);
}

#[test]
fn a_replicas_own_assumed_placements_are_left_out_of_its_next_delta() {
    let mut s = ClusterState::new();
    s.apply_node(node("a"));
    s.apply_node(node("b"));
    // The replica decided on `v`; meanwhile another batch assumed p0.
    let v = s.version();
    s.assume(pod("p0", ""), "b");
    // Its own batch: p1 and p2, logged in (from, to].
    let from = s.version();
    s.assume(pod("p1", ""), "a");
    s.assume(pod("p2", ""), "b");
    let to = s.version();
    let placed: HashMap<&str, &str> = [("p1", "a"), ("p2", "b")].into();
    assert!(s.all_assumed(&placed));
    assert!(!s.all_assumed(&[("p1", "b")].into()), "assumed elsewhere");
    assert!(!s.all_assumed(&[("p3", "a")].into()), "not assumed");
    let uids = |d: &proto::SnapshotDelta| d.upsert_pods.iter().map(|p| p.uid.clone()).collect::<Vec<_>>();
    let d = s.delta_since_except(v, Some((from, to))).unwrap();
    assert_eq!(uids(&d), ["p0"], "only what else changed");
    assert_eq!(uids(&s.delta_since(v).unwrap()), ["p0", "p1", "p2"]);
    // Nothing else changed: an empty delta.
    assert_eq!(
        s.delta_since_except(from, Some((from, to))).unwrap(),
        proto::SnapshotDelta::default()
    );
    // A later change to one of its own pods is carried, with its value now.
    s.forget("p1");
    let d = s.delta_since_except(v, Some((from, to))).unwrap();
    assert_eq!(uids(&d), ["p0"]);
    assert_eq!(d.remove_pod_uids, ["p1"]);
    // A version the log no longer reaches.
    s.compact(to);
    assert!(s.delta_since_except(v, Some((from, to))).is_none());
}

#[test]
fn storage_objects_travel_in_full_snapshots_and_deltas() {
    let claim = |volume: &str| {
        TrackedObject::Claim(proto::PersistentVolumeClaim {
            namespace: "shop".into(),
            name: "data-db-0".into(),
            volume_name: volume.into(),
            ..Default::default()
        })
    };
    let class = TrackedObject::Class(proto::StorageClass {
        name: "local".into(),
        provisioner: "kubernetes.io/no-provisioner".into(),
        volume_binding_mode: "WaitForFirstConsumer".into(),
        ..Default::default()
    });
    let mut s = ClusterState::new();
    assert!(s.apply_storage(claim("")));
    assert!(s.apply_storage(class.clone()));
    let v = s.version();
    assert!(!s.apply_storage(claim("")), "an unchanged object is not a change");
    assert_eq!(s.version(), v);
    let full = s.full();
    assert_eq!(full.persistent_volume_claims.len(), 1);
    assert_eq!(full.storage_classes[0].name, "local");
    s.apply_storage(claim("pv-1"));
    s.apply_storage(TrackedObject::CsiNode(proto::CsiNode {
        name: "n1".into(),
        drivers: vec![proto::CsiNodeDriver {
            name: "ebs.csi.aws.com".into(),
            allocatable_count: Some(25),
        }],
    }));
    assert!(s.delete_storage(&TrackedKey::Class("local".into())));
    assert!(!s.delete_storage(&TrackedKey::Volume("nowhere".into())));
    let d = s.delta_since(v).unwrap();
    assert_eq!(d.upsert_persistent_volume_claims[0].volume_name, "pv-1");
    assert_eq!(d.upsert_csi_nodes[0].drivers[0].allocatable_count, Some(25));
    assert_eq!(d.remove_storage_classes, ["local"]);
    assert!(s.full().storage_classes.is_empty());
}

#[test]
fn volume_choices_are_assumed_until_the_watch_shows_them_or_they_are_forgotten() {
    use proto::claim_binding::Target;
    let claim = |name: &str| proto::PersistentVolumeClaim {
        namespace: "shop".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        ..Default::default()
    };
    let volume = proto::PersistentVolume {
        name: "pv-1".into(),
        ..Default::default()
    };
    let binding = |name: &str, target: Target| proto::ClaimBinding {
        claim_namespace: "shop".into(),
        claim_name: name.into(),
        target: Some(target),
    };
    let mut s = ClusterState::new();
    s.apply_storage(TrackedObject::Claim(claim("a")));
    s.apply_storage(TrackedObject::Claim(claim("b")));
    s.apply_storage(TrackedObject::Volume(volume.clone()));
    let v = s.version();
    let keys = s.assume_storage(
        "p1",
        &[
            binding("a", Target::VolumeName("pv-1".into())),
            binding("b", Target::SelectedNode("n2".into())),
            binding("gone", Target::SelectedNode("n2".into())),
        ],
    );
    assert_eq!(
        keys,
        [TrackedKey::Volume("pv-1".into()), TrackedKey::Claim("shop/b".into())]
    );
    // Snapshots show the assumptions; the watched objects are kept as they are.
    let want_ref = proto::VolumeClaimRef {
        namespace: "shop".into(),
        name: "a".into(),
        uid: "uid-a".into(),
    };
    let d = s.delta_since(v).unwrap();
    assert_eq!(d.upsert_persistent_volumes[0].claim_ref.as_ref(), Some(&want_ref));
    assert_eq!(d.upsert_persistent_volume_claims[0].selected_node, "n2");
    assert_eq!(s.full().persistent_volumes[0].claim_ref.as_ref(), Some(&want_ref));
    assert!(matches!(s.storage_object(&TrackedKey::Volume("pv-1".into())),
        Some(TrackedObject::Volume(v)) if v.claim_ref.is_none()));
    // A replica that assumed the same choices needs no delta for them.
    let assumed = s.version();
    assert_eq!(assumed - v, 2, "one change per choice");
    assert_eq!(
        s.delta_since_except(v, Some((v, assumed))).unwrap(),
        proto::SnapshotDelta::default()
    );
    // A second pod of the same claims: nothing new to assume, the first pod keeps them.
    assert!(s
        .assume_storage("p1b", &[binding("a", Target::VolumeName("pv-1".into()))])
        .is_empty());
    assert_eq!(s.version(), assumed, "nothing logged");
    // A watched volume without the claimRef (an older object) leaves the assumption; the one
    // showing it replaces the assumption.
    s.apply_storage(TrackedObject::Volume(proto::PersistentVolume {
        phase: "Available".into(),
        ..volume.clone()
    }));
    assert_eq!(s.assumed_storage_count(), 2);
    s.apply_storage(TrackedObject::Volume(proto::PersistentVolume {
        claim_ref: Some(want_ref.clone()),
        ..volume.clone()
    }));
    assert_eq!(s.assumed_storage_count(), 1);
    // Forgetting the pod's choices shows the watched claim again, in a delta too.
    let v = s.version();
    s.forget_storage("p1");
    assert_eq!(s.assumed_storage_count(), 0);
    let d = s.delta_since(v).unwrap();
    assert_eq!(d.upsert_persistent_volume_claims[0].selected_node, "");
    // A choice the watched object already shows assumes nothing.
    assert!(s
        .assume_storage("p2", &[binding("a", Target::VolumeName("pv-1".into()))])
        .is_empty());
}

#[test]
fn a_hierarchy_is_found_from_any_of_its_pod_groups_and_is_ready_level_by_level() {
    let mut s = ClusterState::new();
    let pg = |name: &str, parent: &str, min: i32| {
        TrackedObject::PodGroup(proto::PodGroup {
            namespace: "ml".into(),
            name: name.into(),
            gang: Some(proto::GangSchedulingPolicy { min_count: min }),
            parent_composite_pod_group_name: parent.into(),
            ..Default::default()
        })
    };
    let cpg = |name: &str, parent: &str, min: Option<i32>| {
        TrackedObject::CompositePodGroup(proto::CompositePodGroup {
            namespace: "ml".into(),
            name: name.into(),
            parent_composite_pod_group_name: parent.into(),
            min_group_count: min,
            ..Default::default()
        })
    };
    s.apply_storage(pg("a", "block", 2));
    s.apply_storage(pg("b", "block", 2));
    s.apply_storage(pg("c", "other", 1));
    s.apply_storage(pg("plain", "", 1));
    // The parent is not known yet: no hierarchy.
    assert!(s.pod_group_tree("ml", "a").is_none());
    s.apply_storage(cpg("block", "job", Some(2)));
    assert!(s.pod_group_tree("ml", "a").is_none(), "the root is missing");
    s.apply_storage(cpg("job", "", None));
    s.apply_storage(cpg("other", "", None));
    assert!(s.pod_group_tree("ml", "plain").is_none());
    let tree = s.pod_group_tree("ml", "b").expect("a hierarchy");
    assert_eq!(tree.root, "ml/job");
    let mut groups: Vec<&str> = tree.groups.iter().map(|(k, ..)| k.as_str()).collect();
    groups.sort();
    assert_eq!(groups, ["ml/a", "ml/b"], "ml/c is under another root");
    // block needs both a and b (minGroupCount 2), each two pods; job needs block (basic).
    let counts = |a: usize, b: usize| {
        move |k: &str| {
            if k == "ml/a" {
                a
            } else if k == "ml/b" {
                b
            } else {
                0
            }
        }
    };
    assert!(tree.ready(&counts(2, 2)));
    assert!(!tree.ready(&counts(2, 1)));
    assert!(!tree.ready(&counts(0, 3)));
    assert!(s
        .delta_since(0)
        .is_some_and(|d| d.upsert_composite_pod_groups.len() == 3));
    assert_eq!(s.full().composite_pod_groups.len(), 3);
}

#[test]
fn pod_groups_travel_in_full_snapshots_and_deltas_and_are_found_by_namespace_and_name() {
    let group = |ns: &str, name: &str, min: i32| {
        TrackedObject::PodGroup(proto::PodGroup {
            namespace: ns.into(),
            name: name.into(),
            uid: format!("u-{ns}-{name}"),
            gang: Some(proto::GangSchedulingPolicy { min_count: min }),
            ..Default::default()
        })
    };
    let mut s = ClusterState::new();
    assert!(!s.pod_groups_served(), "not served until the watch says so");
    s.set_pod_groups_served(true);
    assert!(s.pod_groups_served());
    let v = s.version();
    assert!(s.apply_storage(group("ml", "b", 2)));
    assert!(s.apply_storage(group("ml", "a", 4)));
    assert!(s.apply_storage(group("batch", "a", 1)));
    assert!(
        !s.apply_storage(group("ml", "a", 4)),
        "an unchanged group is not a change"
    );
    // Sorted by namespace/name in a full snapshot.
    let names: Vec<(String, String)> = s
        .full()
        .pod_groups
        .iter()
        .map(|g| (g.namespace.clone(), g.name.clone()))
        .collect();
    assert_eq!(
        names,
        [
            ("batch".into(), "a".into()),
            ("ml".into(), "a".into()),
            ("ml".into(), "b".into())
        ]
    );
    assert_eq!(s.delta_since(v).unwrap().upsert_pod_groups.len(), 3);
    assert_eq!(
        s.pod_group("ml", "a").and_then(|g| g.gang).map(|g| g.min_count),
        Some(4)
    );
    assert_eq!(s.pod_group("batch", "a").map(|g| g.uid.as_str()), Some("u-batch-a"));
    assert!(s.pod_group("ml", "c").is_none());
    assert!(
        s.pod_group("other", "a").is_none(),
        "a group is found in its own namespace only"
    );
    // minCount changed, a group deleted: the delta carries both.
    let v = s.version();
    s.apply_storage(group("ml", "a", 3));
    assert!(s.delete_storage(&TrackedKey::PodGroup("ml/b".into())));
    let d = s.delta_since(v).unwrap();
    assert_eq!(d.upsert_pod_groups.len(), 1);
    assert_eq!(d.upsert_pod_groups[0].gang.as_ref().map(|g| g.min_count), Some(3));
    assert_eq!(d.remove_pod_groups, ["ml/b"]);
    assert!(s.pod_group("ml", "b").is_none());
    assert_eq!(s.full().pod_groups.len(), 2);
}

#[test]
fn compacted_history_forces_a_full_sync() {
    let mut s = ClusterState::new();
    s.apply_node(node("a"));
    s.apply_node(node("b"));
    s.compact(2);
    assert!(s.delta_since(1).is_none());
    assert!(s.delta_since(2).is_some());
}

/// A pod's special claim for extended resources is assumed (its devices in the snapshots)
/// until the watch shows the claim its PreBind created, with the same devices and reserved
/// for the pod; a claim of another pod leaves the assumption.
#[test]
fn an_extended_resource_claim_is_assumed_until_the_created_claim_is_watched() {
    let allocation = proto::AllocationResult {
        devices: vec![proto::DeviceRequestAllocationResult {
            request: "container-0-request-0".into(),
            driver: "gpu.example.com".into(),
            pool: "n1".into(),
            device: "gpu-0".into(),
            ..Default::default()
        }],
        node_selector: None,
        allocation_timestamp_seconds: None,
    };
    let mut s = ClusterState::new();
    let keys = s.assume_devices(
        "p1",
        "web",
        &[proto::ClaimAllocation {
            claim_namespace: "shop".into(),
            allocation: Some(allocation.clone()),
            extended_resource_claim: Some(proto::ExtendedResourceClaim::default()),
            ..Default::default()
        }],
    );
    assert_eq!(keys, [TrackedKey::ResourceClaim("shop/<extended-resources>-p1".into())]);
    let claims = |s: &ClusterState| -> Vec<String> {
        s.storage_snapshot()
            .resource_claims
            .iter()
            .map(|c| c.name.clone())
            .collect()
    };
    assert_eq!(claims(&s), ["<extended-resources>-p1"]);
    let created = |name: &str, uid: &str| proto::ResourceClaim {
        namespace: "shop".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        allocation: Some(allocation.clone()),
        reserved_for: vec![proto::ResourceClaimConsumer {
            resource: "pods".into(),
            name: "x".into(),
            uid: uid.into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    // Another pod's claim with those devices (a stale view) does not replace it.
    s.apply_storage(TrackedObject::ResourceClaim(created("other", "p2")));
    assert_eq!(s.assumed_storage_count(), 1);
    s.apply_storage(TrackedObject::ResourceClaim(created(
        "web-extended-resources-x7k2p",
        "p1",
    )));
    assert_eq!(s.assumed_storage_count(), 0);
    let mut names = claims(&s);
    names.sort();
    assert_eq!(names, ["other", "web-extended-resources-x7k2p"]);
}
