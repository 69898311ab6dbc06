use super::*;
use crate::engine::resources::Resources;

fn node(name: &str, cpu: i64) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        allocatable: Resources {
            milli_cpu: cpu,
            memory: 1 << 30,
            ..Default::default()
        },
        allowed_pods: 110,
        ..Default::default()
    }
}

fn pod(uid: &str, node: &str, cpu: i64) -> PodSpec {
    PodSpec {
        uid: Arc::from(uid),
        node_name: Some(node.into()),
        requests: Resources {
            milli_cpu: cpu,
            ..Default::default()
        },
        non_zero_requests: Resources {
            milli_cpu: cpu,
            memory: 200 << 20,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// `s` after one delta removing node `name` and another adding it again with `cpu`.
fn removed_and_added_again(s: &Snapshot, name: &str, cpu: i64) -> Snapshot {
    let gone = s
        .apply(Delta {
            remove_nodes: vec![name.into()],
            ..Default::default()
        })
        .unwrap();
    gone.apply(Delta {
        upsert_nodes: vec![node(name, cpu)],
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn a_delta_on_pods_keeps_the_hot_fields_of_untouched_nodes_and_recomputes_the_others() {
    let base = Snapshot::build(
        vec![node("a", 1000), node("b", 1000), node("c", 1000)],
        vec![pod("p1", "a", 100), pod("p2", "c", 300)],
    )
    .unwrap();
    // The base's columns are built (as a Schedule on it builds them); the next follows them.
    base.columns();
    let next = base
        .apply(Delta {
            upsert_pods: vec![pod("p3", "b", 200), pod("p4", "b", 50)],
            remove_pod_uids: vec!["p1".into()],
            ..Default::default()
        })
        .unwrap();
    assert!(
        next.caches.hot.get().is_some() && next.caches.columns.get().is_some(),
        "followed, not left to build"
    );
    let fresh = Snapshot::build(
        vec![node("a", 1000), node("b", 1000), node("c", 1000)],
        vec![pod("p2", "c", 300), pod("p3", "b", 200), pod("p4", "b", 50)],
    )
    .unwrap();
    assert_eq!(next.hot(), fresh.hot());
    assert_eq!(
        format!("{:?}", next.columns()),
        format!("{:?}", crate::engine::accel::columns::HotColumns::of(fresh.hot()))
    );
    assert_eq!(next.hot()[1].req_cpu, 250);
    assert_eq!(next.hot()[0].req_cpu, 0);
    // A delta on nodes leaves them to be built again (positions may shift).
    let moved = next
        .apply(Delta {
            upsert_nodes: vec![node("aa", 1000)],
            ..Default::default()
        })
        .unwrap();
    assert!(moved.caches.hot.get().is_none());
    assert_eq!(moved.hot().len(), 4);
}

#[test]
fn usage_is_summed_per_node_and_nodes_sorted() {
    let s = Snapshot::build(
        vec![node("b", 1000), node("a", 1000)],
        vec![pod("p1", "a", 100), pod("p2", "a", 200), pod("p3", "b", 50)],
    )
    .unwrap();
    assert_eq!(s.nodes()[0].spec.name, "a");
    assert_eq!(s.node("a").unwrap().usage.requested.milli_cpu, 300);
    assert_eq!(s.node("a").unwrap().usage.pod_count, 2);
    assert_eq!(s.node("b").unwrap().usage.non_zero_memory, 200 << 20);
}

#[test]
fn delta_moves_pods_and_keeps_base_untouched() {
    let base = Snapshot::build(vec![node("a", 1000), node("b", 1000)], vec![pod("p1", "a", 100)]).unwrap();
    let next = base
        .apply(Delta {
            upsert_pods: vec![pod("p1", "b", 100), pod("p2", "b", 10)],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(next.node("a").unwrap().usage.pod_count, 0);
    assert_eq!(next.node("b").unwrap().usage.requested.milli_cpu, 110);
    assert_eq!(base.node("a").unwrap().usage.pod_count, 1, "base is immutable");
    assert!(
        Arc::ptr_eq(&base.nodes()[0].spec, &next.nodes()[0].spec),
        "specs are shared"
    );
}

#[test]
fn pods_on_unknown_nodes_count_once_the_node_appears() {
    let base = Snapshot::build(vec![node("a", 1000)], vec![pod("p1", "ghost", 300)]).unwrap();
    assert!(base.node("ghost").is_none());
    let next = base
        .apply(Delta {
            upsert_nodes: vec![node("ghost", 2000)],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(next.node("ghost").unwrap().usage.requested.milli_cpu, 300);
    // Removing the node and re-adding it keeps the pod's usage.
    let back = removed_and_added_again(&next, "ghost", 2000);
    assert_eq!(back.node("ghost").unwrap().usage.requested.milli_cpu, 300);
    let empty = back
        .apply(Delta {
            remove_pod_uids: vec!["p1".into()],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(empty.node("ghost").unwrap().usage, NodeUsage::default());
}

/// The uids of a node's pods in the snapshot's order.
fn uids_on(s: &Snapshot, node: &str) -> Vec<String> {
    s.node(node)
        .unwrap()
        .usage
        .pods
        .iter()
        .map(|p| p.meta.as_ref().unwrap().uid.to_string())
        .collect()
}

fn with_priority(mut p: PodSpec, priority: i32) -> PodSpec {
    p.priority = priority;
    p
}

#[test]
fn each_node_lists_its_pods_lowest_priority_first_through_deltas() {
    let base = Snapshot::build(
        vec![node("a", 1000)],
        vec![
            with_priority(pod("p3", "a", 1), 10),
            with_priority(pod("p1", "a", 1), 100),
            with_priority(pod("p2", "a", 1), 10),
            with_priority(pod("g1", "ghost", 1), 5),
        ],
    )
    .unwrap();
    assert_eq!(uids_on(&base, "a"), ["p2", "p3", "p1"], "priority, then uid");
    let next = base
        .apply(Delta {
            upsert_pods: vec![
                with_priority(pod("p0", "a", 1), 50),
                with_priority(pod("p3", "ghost", 1), 10),
            ],
            remove_pod_uids: vec!["p2".into()],
            upsert_nodes: vec![node("ghost", 1000)],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(uids_on(&next, "a"), ["p0", "p1"]);
    assert_eq!(
        uids_on(&next, "ghost"),
        ["g1", "p3"],
        "orphans keep their list until the node appears"
    );
    assert_eq!(uids_on(&base, "a"), ["p2", "p3", "p1"], "base is immutable");
    let back = removed_and_added_again(&next, "ghost", 1000);
    assert_eq!(uids_on(&back, "ghost"), ["g1", "p3"]);
}

#[test]
fn image_postings_are_shared_by_a_delta_that_changes_no_node_and_rebuilt_otherwise() {
    let mut a = node("a", 1000);
    a.images.insert("img".into(), 5 << 20);
    let base = Snapshot::build(vec![a, node("c", 1000)], vec![]).unwrap();
    let h = image_hash("img");
    assert_eq!(base.image_postings()[&h], [(0, 5 << 20)]);
    let pods_only = base
        .apply(Delta {
            upsert_pods: vec![pod("p1", "a", 100)],
            ..Default::default()
        })
        .unwrap();
    assert!(
        std::ptr::eq(pods_only.image_postings(), base.image_postings()),
        "shared"
    );
    let mut b = node("b", 1000);
    b.images.insert("img".into(), 7 << 20);
    let with_b = pods_only
        .apply(Delta {
            upsert_nodes: vec![b],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        with_b.image_postings()[&h],
        [(0, 5 << 20), (1, 7 << 20)],
        "b sorts before c"
    );
    assert_eq!(base.image_postings()[&h], [(0, 5 << 20)]);
}

#[test]
fn upserting_a_node_keeps_its_usage() {
    let base = Snapshot::build(vec![node("a", 1000)], vec![pod("p1", "a", 300)]).unwrap();
    let next = base
        .apply(Delta {
            upsert_nodes: vec![node("a", 4000)],
            ..Default::default()
        })
        .unwrap();
    let a = next.node("a").unwrap();
    assert_eq!((a.spec.allocatable.milli_cpu, a.usage.requested.milli_cpu), (4000, 300));
}

#[test]
fn duplicates_and_unbound_pods_are_refused() {
    assert!(matches!(
        Snapshot::build(vec![node("a", 1), node("a", 1)], vec![]),
        Err(SnapshotError::DuplicateNode { index: 1, .. })
    ));
    assert!(matches!(
        Snapshot::build(vec![node("a", 1)], vec![pod("p", "a", 1), pod("p", "a", 1)]),
        Err(SnapshotError::DuplicatePod { index: 1, .. })
    ));
    let mut unbound = pod("p", "a", 1);
    unbound.node_name = None;
    assert!(matches!(
        Snapshot::build(vec![node("a", 1)], vec![unbound]),
        Err(SnapshotError::UnboundPod { index: 0 })
    ));
}

#[test]
fn image_counts_follow_node_changes() {
    let mut n = node("a", 1);
    n.images.insert("nginx:latest".into(), 100);
    let mut m = node("b", 1);
    m.images.insert("nginx:latest".into(), 100);
    let s = Snapshot::build(vec![n, m], vec![]).unwrap();
    assert_eq!(s.image_node_count("nginx:latest"), 2);
    let s = s
        .apply(Delta {
            remove_nodes: vec!["a".into()],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(s.image_node_count("nginx:latest"), 1);
}
