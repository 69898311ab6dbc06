//! DynamicResources' PostFilter on a real control plane (issue 45, item 5): a claim allocated on a
//! node its pod cannot use, reserved for no one, is deallocated by the scheduler that finds no
//! node for the pod (`deallocation of ResourceClaim completed`), and the pod's next attempt
//! allocates it where the pod fits. placement against the cluster's kube-scheduler, twin nodes
//! and claims per side.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use placement_tests::e2e::{cluster, node_of, pod_for, serial, Scope, WAIT};
use placement_tests::fixtures::eventually;

use super::{dra_view, events_for, twin_pods, InProcessBinder};

/// A ResourceSlice with one GPU, `gpu-0`, on `node` (its pool named after the node).
fn slice(driver: &str, node: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-gpus")},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "h100"}}}],
        }
    })
}

/// A ResourceClaim `name` asking for one GPU of `class`.
fn claim(name: &str, class: &str) -> ResourceClaim {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class}}]}},
    }))
    .expect("a ResourceClaim")
}

/// Issue 45, item 5 on a real control plane. Per side a small node (1 cpu) and a big one (8 cpu),
/// one GPU each, and a claim allocated (by the test, as a driver or an earlier scheduler would
/// leave it) on the small node's GPU and reserved for no pod. The side's pod asks for 2 cpu and
/// the claim: the small node has not the cpu, the big one is not where the claim is. Each
/// scheduler must deallocate the claim in its PostFilter, say so in the pod's FailedScheduling
/// event, and bind the pod on the big node with its GPU once the claim's change requeues it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_pinned_where_its_pod_does_not_fit_is_deallocated_as_kube_scheduler_does() {
    let test = "a_claim_pinned_where_its_pod_does_not_fit_is_deallocated_as_kube_scheduler_does";
    let Some(cluster) = cluster(test).await else {
        return;
    };
    if std::env::var("E2E_KUBE_SCHEDULER").as_deref() != Ok("1") {
        eprintln!(
            "e2e {test}: skipped: set E2E_KUBE_SCHEDULER=1 when the cluster's kube-scheduler serves default-scheduler"
        );
        return;
    }
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "dra-postfilter").await;
    let driver = format!("gpu.p{}.placement-e2e.example.com", scope.run);
    let class = format!("{}-gpu", scope.run);
    scope
        .create_storage(
            "deviceclasses",
            serde_json::json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": class},
                "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}
            }),
        )
        .await;
    let claims: Api<ResourceClaim> = Api::namespaced(cluster.client.clone(), &scope.ns);
    for side in ["ours", "kube"] {
        let small = scope.add_node(&format!("{side}-small"), "1", &[("side", side)]).await;
        let big = scope.add_node(&format!("{side}-big"), "8", &[("side", side)]).await;
        scope.create_storage("resourceslices", slice(&driver, &small)).await;
        scope.create_storage("resourceslices", slice(&driver, &big)).await;
        let name = format!("gpu-{side}");
        claims
            .create(&PostParams::default(), &claim(&name, &class))
            .await
            .expect("create the claim");
        // Allocated on the small node's GPU, reserved for no pod.
        let status = serde_json::json!({"status": {"allocation": {
            "devices": {"results": [{"request": "gpu", "driver": driver, "pool": small, "device": "gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [small]}
            ]}]},
        }}});
        claims
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("allocate the claim on the small node");
    }
    // Last, the canary's claim and pod: kube-scheduler binding it shows its informers have every
    // slice, and every claim's allocation (claims come through one watch, in order).
    let canary = scope.add_node("canary", "8", &[("side", "canary")]).await;
    scope.create_storage("resourceslices", slice(&driver, &canary)).await;
    claims
        .create(&PostParams::default(), &claim("canary", &class))
        .await
        .expect("create the canary's claim");
    let mut canary_pod =
        serde_json::to_value(pod_for(&scope.ns, "canary", "default-scheduler", &scope.run, "100m")).expect("a pod");
    canary_pod["spec"]["nodeSelector"] = serde_json::json!({"side": "canary"});
    canary_pod["spec"]["resourceClaims"] = serde_json::json!([{"name": "gpu", "resourceClaimName": "canary"}]);
    canary_pod["spec"]["containers"][0]["resources"]["claims"] = serde_json::json!([{"name": "gpu"}]);
    let canary_pod = scope
        .create(&serde_json::from_value::<Pod>(canary_pod).expect("a pod"))
        .await;
    eventually(WAIT, "kube-scheduler to bind the canary", || async {
        scope
            .pods()
            .get(&canary_pod.name_any())
            .await
            .ok()
            .is_some_and(|p| node_of(&p).is_some())
    })
    .await;

    let binder = InProcessBinder::start(&cluster, &scope).await;
    let pods = twin_pods(&scope, "pinned", "2", &|pod, side| {
        pod["spec"]["resourceClaims"] =
            serde_json::json!([{"name": "gpu", "resourceClaimName": format!("gpu-{side}")}]);
        pod["spec"]["containers"][0]["resources"]["claims"] = serde_json::json!([{"name": "gpu"}]);
    });
    for p in &pods {
        scope.create(p).await;
    }
    let names = pods.map(|p| p.name_any());
    eventually(WAIT, &format!("both schedulers bound {names:?}"), || async {
        let mut all = true;
        for name in &names {
            all &= scope.pods().get(name).await.ok().is_some_and(|p| node_of(&p).is_some());
        }
        all
    })
    .await;
    // The first attempt's message, side-free: where the claim was, why no node fitted, and
    // PostFilter's deallocation before DefaultPreemption's verdict.
    let mut first = Vec::new();
    for (name, side) in names.iter().zip(["ours", "kube"]) {
        let mut events = events_for(&scope, name, "FailedScheduling").await;
        events.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
        let note = events
            .first()
            .and_then(|e| e.note.clone())
            .unwrap_or_else(|| panic!("{name}: no FailedScheduling event"));
        first.push(note.replace(side, "SIDE"));
    }
    assert_eq!(
        first[0], first[1],
        "the first attempt's message: placement (left) against kube-scheduler (right)"
    );
    assert!(
        first[0].contains("deallocation of ResourceClaim completed"),
        "the claim was deallocated in PostFilter: {}",
        first[0]
    );
    let ours = scope.pods().get(&names[0]).await.expect("our twin");
    let kube = scope.pods().get(&names[1]).await.expect("kube's twin");
    let (ours_view, kube_view) = (
        dra_view(&scope, &ours, "ours").await,
        dra_view(&scope, &kube, "kube").await,
    );
    assert_eq!(
        ours_view, kube_view,
        "bound: placement (left) against kube-scheduler (right)"
    );
    assert_eq!(
        ours_view["devices"][0]["pool"],
        serde_json::json!(format!("placement-e2e-{}-SIDE-big", scope.run)),
        "the claim allocated anew on the big node: {ours_view}"
    );
    eprintln!("e2e {test}: first message alike: {}", first[0]);
    eprintln!("e2e {test}: bound alike: {ours_view}");
    binder.stop().await;
    scope.cleanup().await;
}
