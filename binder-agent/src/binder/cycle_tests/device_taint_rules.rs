//! DeviceTaintRules as the binder tracks them: full snapshots and deltas carry them, and a rule
//! added, changed or removed moves the pods parked unschedulable with claims back to be decided,
//! as kube-scheduler's DynamicResources requeues them on the ResourceSlice change its tracker
//! reports when a rule changes a device's taints.

use super::*;
use crate::projection::{TrackedKey, TrackedObject};
use crate::state::ClusterState;

fn rule(name: &str, pool: &str) -> proto::DeviceTaintRule {
    proto::DeviceTaintRule {
        name: name.into(),
        device_selector: Some(proto::DeviceTaintSelector {
            pool: Some(pool.into()),
            ..Default::default()
        }),
        taint: Some(proto::DeviceTaint {
            key: "example.com/drain".into(),
            value: "true".into(),
            effect: "NoExecute".into(),
            time_added_seconds: 1_765_075_775,
        }),
    }
}

#[test]
fn snapshots_and_deltas_carry_device_taint_rules() {
    let mut s = ClusterState::new();
    assert!(s.apply_storage(TrackedObject::DeviceTaintRule(rule("b", "n2"))));
    assert!(s.apply_storage(TrackedObject::DeviceTaintRule(rule("a", "n1"))));
    assert!(
        !s.apply_storage(TrackedObject::DeviceTaintRule(rule("a", "n1"))),
        "the same rule again changes nothing"
    );
    let names = |rules: &[proto::DeviceTaintRule]| rules.iter().map(|r| r.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&s.full().device_taint_rules), ["a", "b"], "by name");
    let v = s.version();
    assert!(s.apply_storage(TrackedObject::DeviceTaintRule(rule("a", "n3"))));
    assert!(s.delete_storage(&TrackedKey::DeviceTaintRule("b".into())));
    let d = s.delta_since(v).expect("a delta");
    assert_eq!(d.upsert_device_taint_rules, [rule("a", "n3")]);
    assert_eq!(d.remove_device_taint_rules, ["b"]);
}

#[tokio::test]
async fn a_device_taint_rule_change_moves_pods_parked_with_claims() {
    let replica = ScriptedReplica::default();
    let message = "0/1 nodes are available: 1 cannot allocate all claims.";
    replica.script(
        "claims",
        &[
            Answer::Unschedulable(message),
            Answer::Unschedulable(message),
            Answer::Node("n1"),
        ],
    );
    replica.script(
        "plain",
        &[Answer::Unschedulable("0/1 nodes are available: 1 Insufficient cpu.")],
    );
    let h = Harness::start(&replica).await;
    h.binder
        .handle(ClusterEvent::ObjectApplied(TrackedObject::ResourceClaim(
            proto::ResourceClaim {
                namespace: "ns".into(),
                name: "gpu".into(),
                uid: "uid-gpu".into(),
                ..Default::default()
            },
        )));
    let mut p = pod("claims", "");
    p.spec.resource_claims = vec![proto::PodResourceClaim {
        name: "gpu".into(),
        resource_claim_name: "gpu".into(),
        ..Default::default()
    }];
    h.binder.handle(ClusterEvent::PodApplied(p));
    h.binder.handle(ClusterEvent::PodApplied(pod("plain", "")));
    h.until("both parked as unschedulable", |api| {
        !api.of("claims").unschedulable.is_empty() && !api.of("plain").unschedulable.is_empty()
    })
    .await;
    // A rule added: decided again.
    h.binder
        .handle(ClusterEvent::ObjectApplied(TrackedObject::DeviceTaintRule(rule(
            "drain", "n1",
        ))));
    h.until("decided again after the rule came", |_| replica.asked("claims") >= 2)
        .await;
    h.until("parked again", |api| api.of("claims").unschedulable.len() >= 2)
        .await;
    // The rule removed: decided again, and placed.
    h.binder
        .handle(ClusterEvent::ObjectDeleted(TrackedKey::DeviceTaintRule("drain".into())));
    h.until("bound after the rule went", |api| api.of("claims").bound_to.is_some())
        .await;
    tokio::time::sleep(MAX_BACKOFF * 2).await;
    assert_eq!(replica.asked("plain"), 1, "a pod without claims stays parked");
    h.stop().await;
}
