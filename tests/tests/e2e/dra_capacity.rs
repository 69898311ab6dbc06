//! DRA consumable capacity (`DRAConsumableCapacity` and `DRAFractionalCapacityRange`, beta and on
//! by default in Kubernetes 1.37) on a real control plane: placement against the cluster's
//! kube-scheduler, whose allocator shares devices that allow multiple allocations between claims,
//! each share consuming the capacity its request asks for, rounded up by the capacity's request
//! policy (issue 45, item 3).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaimTemplate;
use kube::api::{Api, PostParams};
use kube::ResourceExt;
use placement_tests::e2e::{cluster, marked_unschedulable, node_of, pod_for, serial, Scope, WAIT};
use placement_tests::fixtures::eventually;

use super::{claim_spec, dra_view, twin_pods, InProcessBinder};

/// A ResourceSlice of `node`'s shared GPUs of `driver` (one pool per node, named after it):
/// gpu-0 with 40Gi of memory, taken by whole Gi from 1Gi (its default); gpu-1 with 16Gi, taken
/// as 4Gi, 8Gi or 16Gi (its default 4Gi). Both allow multiple allocations.
fn slice(driver: &str, node: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-gpus")},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": "gpu-0",
                    "allowMultipleAllocations": true,
                    "attributes": {"model": {"string": "h100"}},
                    "capacity": {"memory": {"value": "40Gi", "requestPolicy": {
                        "default": "1Gi",
                        "validRange": {"min": "1Gi", "max": "40Gi", "step": "1Gi"},
                    }}},
                },
                {
                    "name": "gpu-1",
                    "allowMultipleAllocations": true,
                    "attributes": {"model": {"string": "h100"}},
                    "capacity": {"memory": {"value": "16Gi", "requestPolicy": {
                        "default": "4Gi",
                        "validValues": ["4Gi", "8Gi", "16Gi"],
                    }}},
                },
            ],
        }
    })
}

/// Issue 45's item 3 on a real control plane: a node per side with two shared GPUs, and twin
/// pods whose claims ask for memory (or for none: the policy's default), decided one pair at a
/// time by placement and by the cluster's kube-scheduler. Each pair must land on twin nodes with
/// the same devices, the same consumed capacity and a share ID each, or be left unschedulable
/// with the same message once the devices' memory is spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_devices_are_allocated_by_capacity_as_kube_scheduler_does() {
    let test = "shared_devices_are_allocated_by_capacity_as_kube_scheduler_does";
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
    let mut scope = Scope::new(&cluster, "dra-capacity").await;
    let driver = format!("gpu.c{}.placement-e2e.example.com", scope.run);
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
    let mut nodes = Vec::new();
    for side in ["ours", "kube"] {
        nodes.push(scope.add_node(&format!("{side}-n1"), "8", &[("side", side)]).await);
    }
    let canary = scope.add_node("canary", "8", &[("side", "canary")]).await;
    for n in &nodes {
        scope.create_storage("resourceslices", slice(&driver, n)).await;
    }
    // Last, the canary's: a pod of kube-scheduler's bound there shows every slice seen.
    scope.create_storage("resourceslices", slice(&driver, &canary)).await;

    // Templates: memory asked (as written), or nothing (the policy's default).
    let templates: [(&str, Option<&str>); 6] = [
        ("m15", Some("15Gi")),
        ("m14-5", Some("14848Mi")),
        ("m12", Some("12Gi")),
        ("m5", Some("5Gi")),
        ("m6", Some("6Gi")),
        ("default", None),
    ];
    let templates_api: Api<ResourceClaimTemplate> = Api::namespaced(cluster.client.clone(), &scope.ns);
    for (name, memory) in &templates {
        let mut exactly = serde_json::json!({"deviceClassName": class});
        if let Some(m) = memory {
            exactly["capacity"] = serde_json::json!({"requests": {"memory": m}});
        }
        let spec = claim_spec(
            serde_json::json!({"name": "gpu", "exactly": exactly}),
            serde_json::json!([]),
        );
        let t = serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name}, "spec": {"spec": spec}});
        templates_api
            .create(&PostParams::default(), &serde_json::from_value(t).expect("a template"))
            .await
            .expect("create a ResourceClaimTemplate");
    }
    let mut canary_pod =
        serde_json::to_value(pod_for(&scope.ns, "canary", "default-scheduler", &scope.run, "100m")).expect("a pod");
    canary_pod["spec"]["nodeSelector"] = serde_json::json!({"side": "canary"});
    canary_pod["spec"]["resourceClaims"] = serde_json::json!([{"name": "gpu", "resourceClaimTemplateName": "default"}]);
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
    let decided = |p: &Pod| node_of(p).is_some() || marked_unschedulable(p);
    let mut outcomes: Vec<(String, serde_json::Value)> = Vec::new();
    // 15Gi and 14848Mi (rounded up to 15Gi) share gpu-0; 12Gi does not fit its 10Gi left and
    // takes gpu-1, rounded up to its valid 16Gi; 5Gi fits gpu-0 (35Gi); 6Gi fits neither; no
    // request takes gpu-0's default, 1Gi.
    for (step, template) in [
        ("m15", "m15"),
        ("m14-5", "m14-5"),
        ("m12", "m12"),
        ("m5", "m5"),
        ("m6", "m6"),
        ("default", "default"),
    ] {
        let pods = twin_pods(&scope, step, "100m", &|pod, _side| {
            pod["spec"]["resourceClaims"] = serde_json::json!([{"name": "gpu", "resourceClaimTemplateName": template}]);
            pod["spec"]["containers"][0]["resources"]["claims"] = serde_json::json!([{"name": "gpu"}]);
        });
        for p in &pods {
            scope.create(p).await;
        }
        let names = pods.map(|p| p.name_any());
        eventually(WAIT, &format!("both schedulers decided {names:?}"), || async {
            let mut all = true;
            for name in &names {
                all &= scope.pods().get(name).await.ok().is_some_and(|p| decided(&p));
            }
            all
        })
        .await;
        let ours = scope.pods().get(&names[0]).await.expect("our twin");
        let kube = scope.pods().get(&names[1]).await.expect("kube's twin");
        let (ours_view, kube_view) = (
            dra_view(&scope, &ours, "ours").await,
            dra_view(&scope, &kube, "kube").await,
        );
        assert_eq!(
            ours_view, kube_view,
            "{step}: placement (left) against kube-scheduler (right)"
        );
        outcomes.push((step.to_string(), ours_view));
    }

    // What the scenario is built to show, beyond agreeing with kube-scheduler.
    let got = |step: &str| {
        outcomes.iter().find(|(s, _)| s == step).map(|(_, v)| {
            let d = &v["devices"][0];
            (
                d["device"].as_str().map(str::to_string),
                d["consumed_capacity"]["memory"].as_str().map(str::to_string),
                d["share_id"].as_str().map(str::to_string),
            )
        })
    };
    let share = |device: &str, memory: &str| {
        Some((
            Some(device.to_string()),
            Some(memory.to_string()),
            Some("a UUID".to_string()),
        ))
    };
    assert_eq!(got("m15"), share("gpu-0", "15Gi"));
    assert_eq!(
        got("m14-5"),
        share("gpu-0", "15Gi"),
        "14848Mi rounded up by the 1Gi step"
    );
    assert_eq!(got("m12"), share("gpu-1", "16Gi"), "12Gi rounded up to the valid 16Gi");
    assert_eq!(got("m5"), share("gpu-0", "5Gi"));
    assert_eq!(got("m6"), Some((None, None, None)), "6Gi left on no device");
    assert_eq!(got("default"), share("gpu-0", "1Gi"), "the policy's default");
    eprintln!(
        "e2e {test}: {} decisions alike (node, devices, consumed capacity, share IDs, messages)",
        outcomes.len()
    );
    for (step, view) in &outcomes {
        eprintln!("  {step}: {view}");
    }
    binder.stop().await;
    scope.cleanup().await;
}
