use std::collections::HashSet;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;
use crate::projection::{pod_info, TrackedKey, TrackedObject};

#[test]
fn each_watch_is_named_once_and_the_binder_syncs_once_every_initial_list_is_done() {
    let names: HashSet<&str> = Watch::ALL.iter().map(|w| w.name()).collect();
    assert_eq!(names.len(), Watch::ALL.len(), "two rows of the table share a name");
    let mut pending = Pending::all();
    let (last, rest) = Watch::ALL.split_last().expect("watches");
    for watch in rest {
        assert!(!pending.done(*watch), "{} was not the last", watch.name());
        assert!(!pending.done(*watch), "{} done twice counts once", watch.name());
    }
    assert!(pending.done(*last), "the last initial list syncs");
    assert!(!pending.done(*last), "and only once");
}

#[test]
fn a_skipped_group_marks_exactly_the_watches_its_task_starts() {
    let group = |g: Group| -> Vec<&str> { Watch::ALL.iter().filter(|w| w.group() == g).map(|w| w.name()).collect() };
    // What `device_watches` starts, each through `drive`, when resource.k8s.io/v1 is served.
    assert_eq!(
        group(Group::Devices),
        ["deviceclasses", "resourceclaims", "resourceslices", "devicetaintrules"]
    );
    let mut pending = Pending::all();
    assert!(!pending.skip(Group::Devices));
    let left: HashSet<&str> = pending.0.iter().map(|w| w.name()).collect();
    let expected: HashSet<&str> = Watch::ALL
        .iter()
        .filter(|w| w.group() != Group::Devices)
        .map(|w| w.name())
        .collect();
    assert_eq!(left, expected);
    for g in [Group::Core, Group::Storage] {
        assert!(!pending.skip(g));
    }
    assert!(pending.skip(Group::PodGroups), "the last group skipped syncs");
}

fn node(name: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name}, "status": {"allocatable": {"cpu": "4"}}})).unwrap()
}

fn pod(name: &str, uid: &str, node: Option<&str>) -> WatchedPod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": uid},
        "spec": {"schedulerName": "placement-scheduler", "nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": "Pending"}
    }))
    .unwrap()
}

fn deleted_uids(events: &[ClusterEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            ClusterEvent::PodDeleted { uid } => Some(uid.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn relist_reports_pods_that_vanished() {
    let mut t = PodTracker::default();
    assert!(t.on_event(Event::Init).0.is_empty());
    for (n, u) in [("a", "ua"), ("b", "ub"), ("c", "uc")] {
        let (ev, done) = t.on_event(Event::InitApply(pod(n, u, None)));
        assert!(matches!(ev.as_slice(), [ClusterEvent::PodApplied(_)]) && !done);
    }
    let (ev, done) = t.on_event(Event::InitDone);
    assert!(ev.is_empty() && done);
    t.on_event(Event::Apply(pod("d", "ud", Some("n1"))));
    t.on_event(Event::Delete(pod("a", "ua", None)));
    assert_eq!(t.len(), 3);

    // The watch broke; meanwhile b was deleted and c recreated under a new uid.
    t.on_event(Event::Init);
    t.on_event(Event::InitApply(pod("c", "uc2", None)));
    t.on_event(Event::InitApply(pod("d", "ud", Some("n1"))));
    let (ev, done) = t.on_event(Event::InitDone);
    assert!(done);
    assert_eq!(deleted_uids(&ev), ["ub", "uc"]);
    assert_eq!(t.len(), 2);
}

#[test]
fn a_watched_pod_is_the_projection_of_the_pod_it_decodes() {
    let json = json!({
        "metadata": {"name": "web-1", "namespace": "shop", "uid": "u1", "resourceVersion": "42",
                     "labels": {"app": "web"}, "annotations": {"placement.dev/pin-arm": "a"},
                     "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
        "spec": {"schedulerName": "placement-scheduler", "nodeName": "n1", "priority": 5,
                 "containers": [{"name": "c", "image": "nginx", "env": [{"name": "A", "value": "1"}],
                                 "resources": {"requests": {"cpu": "250m"}}}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    });
    let pod: Pod = serde_json::from_value(json.clone()).unwrap();
    let watched: WatchedPod = serde_json::from_value(json).unwrap();
    assert_eq!(*watched.info(), pod_info(&pod));
    use kube::ResourceExt;
    assert_eq!(
        watched.resource_version().as_deref(),
        Some("42"),
        "the watcher resumes from it"
    );
    assert_eq!(watched.uid().as_deref(), Some("u1"));
    assert_eq!(
        <WatchedPod as kube::Resource>::url_path(&(), None),
        <Pod as kube::Resource>::url_path(&(), None)
    );
}

#[test]
fn pod_deletion_frees_by_uid() {
    let mut t = PodTracker::default();
    t.on_event(Event::Apply(pod("a", "ua", Some("n1"))));
    let (ev, _) = t.on_event(Event::Delete(pod("a", "ua", Some("n1"))));
    assert_eq!(deleted_uids(&ev), ["ua"]);
    assert!(t.is_empty());
}

#[test]
fn namespaces_are_applied_and_relists_report_the_vanished() {
    let ns = |name: &str| -> Namespace {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"team": "a"}}})).unwrap()
    };
    let mut t = NamespaceTracker::default();
    t.on_event(Event::Init);
    let (events, _) = t.on_event(Event::InitApply(ns("shop")));
    assert!(matches!(&events[..], [ClusterEvent::NamespaceApplied(n)] if n.name == "shop" && n.labels["team"] == "a"));
    t.on_event(Event::InitApply(ns("batch")));
    assert!(t.on_event(Event::InitDone).1);
    t.on_event(Event::Init);
    t.on_event(Event::InitApply(ns("shop")));
    let (gone, done) = t.on_event(Event::InitDone);
    assert!(done);
    assert!(matches!(&gone[..], [ClusterEvent::NamespaceDeleted(n)] if n == "batch"));
}

#[test]
fn pdbs_are_applied_deleted_and_relists_report_the_vanished() {
    let pdb = |name: &str, allowed: i32| -> PodDisruptionBudget {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": name}}},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
        }))
        .unwrap()
    };
    let mut t = PdbTracker::default();
    t.on_event(Event::Init);
    let (events, _) = t.on_event(Event::InitApply(pdb("db", 0)));
    assert!(matches!(&events[..], [ClusterEvent::PdbApplied(p)] if p.key() == "shop/db"));
    t.on_event(Event::InitApply(pdb("cache", 1)));
    assert!(t.on_event(Event::InitDone).1);
    let (events, _) = t.on_event(Event::Apply(pdb("db", 1)));
    assert!(matches!(&events[..], [ClusterEvent::PdbApplied(p)] if p.pdb.disruptions_allowed == 1));
    let (events, _) = t.on_event(Event::Delete(pdb("db", 1)));
    assert!(matches!(&events[..], [ClusterEvent::PdbDeleted(k)] if k == "shop/db"));
    t.on_event(Event::Init);
    let (gone, done) = t.on_event(Event::InitDone);
    assert!(done);
    assert!(matches!(&gone[..], [ClusterEvent::PdbDeleted(k)] if k == "shop/cache"));
}

#[test]
fn pod_groups_are_applied_deleted_and_relists_report_the_vanished() {
    let group = |ns: &str, name: &str, min: i32| -> PodGroup {
        serde_json::from_value(json!({
            "metadata": {"namespace": ns, "name": name, "uid": format!("u-{name}")},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min}}}
        }))
        .unwrap()
    };
    let mut t = ObjectTracker::default();
    t.on_event::<PodGroup>(Event::Init);
    let (events, _) = t.on_event(Event::InitApply(group("ml", "a", 2)));
    assert!(matches!(&events[..],
        [ClusterEvent::ObjectApplied(TrackedObject::PodGroup(g))] if g.name == "a" && g.gang.as_ref().is_some_and(|g| g.min_count == 2)));
    t.on_event(Event::InitApply(group("ml", "b", 1)));
    t.on_event(Event::InitApply(group("other", "a", 1)));
    assert!(t.on_event::<PodGroup>(Event::InitDone).1);
    let (events, _) = t.on_event(Event::Delete(group("ml", "b", 1)));
    assert!(matches!(&events[..], [ClusterEvent::ObjectDeleted(TrackedKey::PodGroup(k))] if k == "ml/b"));
    // The watch broke; meanwhile other/a was deleted.
    t.on_event::<PodGroup>(Event::Init);
    t.on_event(Event::InitApply(group("ml", "a", 3)));
    let (gone, done) = t.on_event::<PodGroup>(Event::InitDone);
    assert!(done);
    assert!(matches!(&gone[..], [ClusterEvent::ObjectDeleted(TrackedKey::PodGroup(k))] if k == "other/a"));
}

#[test]
fn a_pod_groups_condition_is_told_before_the_group() {
    let with_condition: PodGroup = serde_json::from_value(json!({
        "metadata": {"namespace": "ml", "name": "a", "uid": "u-a"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
        "status": {"conditions": [{
            "type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable",
            "message": "pod group is unschedulable", "observedGeneration": 4,
            "lastTransitionTime": "2026-11-29T00:00:00Z"}]}
    }))
    .unwrap();
    let mut t = ObjectTracker::default();
    let (events, _) = pod_group_events(&mut t, Event::Apply(with_condition));
    match &events[..] {
        [ClusterEvent::PodGroupCondition {
            key,
            condition: Some(c),
        }, ClusterEvent::ObjectApplied(TrackedObject::PodGroup(g))] => {
            assert_eq!((key.as_str(), g.name.as_str()), ("ml/a", "a"));
            assert_eq!(
                c,
                &crate::api::ObservedCondition {
                    status: "False".into(),
                    reason: "Unschedulable".into(),
                    message: "pod group is unschedulable".into(),
                    observed_generation: 4,
                    last_transition_time: "2026-11-29T00:00:00Z".into(),
                }
            );
        }
        other => panic!("{other:?}"),
    }
    let bare: PodGroup = serde_json::from_value(json!({"metadata": {"namespace": "ml", "name": "b"},
        "spec": {"schedulingPolicy": {"basic": {}}}}))
    .unwrap();
    let (events, _) = pod_group_events(&mut t, Event::Apply(bare));
    assert!(matches!(
        &events[..],
        [
            ClusterEvent::PodGroupCondition { condition: None, .. },
            ClusterEvent::ObjectApplied(_)
        ]
    ));
}

#[test]
fn relist_reports_nodes_that_vanished() {
    let mut t = NodeTracker::default();
    t.on_event(Event::Init);
    t.on_event(Event::InitApply(node("n1")));
    t.on_event(Event::InitApply(node("n2")));
    assert!(t.on_event(Event::InitDone).1);
    t.on_event(Event::Init);
    t.on_event(Event::InitApply(node("n2")));
    let (ev, _) = t.on_event(Event::InitDone);
    assert!(matches!(ev.as_slice(), [ClusterEvent::NodeDeleted(n)] if n == "n1"));
    assert_eq!(t.len(), 1);
}
