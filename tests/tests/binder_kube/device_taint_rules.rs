//! The binder watches `resource.k8s.io/v1` DeviceTaintRules: they reach its state (and so its
//! snapshots) as created, changed and deleted, and a relist after a broken watch reports the ones
//! deleted meanwhile.

use placement_tests::fake_apiserver::{matcher, FakeApiServer, Kind};
use placement_tests::fixtures::{eventually, node};

use super::{decision_service, start_binder, Options, WAIT};

fn rule(name: &str, pool: &str, effect: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {"deviceSelector": {"driver": "gpu.example.com", "pool": pool},
                 "taint": {"key": "example.com/drain", "value": "true", "effect": effect,
                           "timeAdded": "2026-12-07T02:49:35Z"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_taint_rules_from_the_watch_reach_the_binders_state() {
    let server = FakeApiServer::start().await;
    server.create_node(node("n1", "4"));
    server.create_raw(Kind::DeviceTaintRule, rule("drain-n1", "n1", "NoSchedule"));
    let (endpoint, stop_decisions) = decision_service().await;
    let running = start_binder(
        &server,
        &endpoint,
        Options {
            lease: None,
            ..Options::default()
        },
    );
    let rules =
        |b: &placement_binder::Binder<placement_binder::kube_api::KubeApi>| b.storage_snapshot().device_taint_rules;
    eventually(WAIT, "the rule reaches the binder", || {
        let b = running.binder.clone();
        async move { b.is_ready() && rules(&b).len() == 1 }
    })
    .await;
    let r = &rules(&running.binder)[0];
    let selector = r.device_selector.as_ref().expect("a selector");
    assert_eq!(
        (
            r.name.as_str(),
            selector.driver.as_deref(),
            selector.pool.as_deref(),
            selector.device.as_deref()
        ),
        ("drain-n1", Some("gpu.example.com"), Some("n1"), None)
    );
    let taint = r.taint.as_ref().expect("a taint");
    assert_eq!(
        (taint.key.as_str(), taint.effect.as_str(), taint.time_added_seconds),
        ("example.com/drain", "NoSchedule", 1_796_611_775)
    );
    // Changed: the new effect reaches the binder.
    let api: kube::Api<k8s_openapi::api::resource::v1::DeviceTaintRule> = kube::Api::all(server.client());
    api.patch(
        "drain-n1",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"spec": {"taint": {"effect": "NoExecute"}}})),
    )
    .await
    .expect("patch the rule");
    eventually(WAIT, "the changed rule reaches the binder", || {
        let b = running.binder.clone();
        async move {
            rules(&b)
                .first()
                .and_then(|r| r.taint.as_ref())
                .is_some_and(|t| t.effect == "NoExecute")
        }
    })
    .await;
    // Deleted while the watches are down: the relist reports it.
    server.drop_watches();
    server.fail_next(
        1_000_000,
        matcher("GET", "/apis/resource.k8s.io/v1/devicetaintrules"),
        503,
    );
    server.delete_raw(Kind::DeviceTaintRule, None, "drain-n1");
    server.compact();
    server.clear_faults();
    eventually(WAIT, "the deleted rule leaves the binder's state", || {
        let b = running.binder.clone();
        async move { rules(&b).is_empty() }
    })
    .await;
    running.stop().await;
    let _ = stop_decisions.send(());
}
