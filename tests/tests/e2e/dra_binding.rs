//! DRA binding conditions (`DRADeviceBindingConditions`, beta and on by default in Kubernetes
//! 1.37) on a real control plane: devices whose slices list `bindingConditions` are allocated, and
//! the pod is bound only once the device's driver reports them True in the claim's
//! `status.devices`; a failure condition fails the PreBind (issue 45, item 4). placement against
//! the cluster's kube-scheduler, twin nodes and claims per side; the test plays the driver.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use placement_tests::e2e::{cluster, node_of, pod_for, serial, Scope, WAIT};
use placement_tests::fixtures::eventually;

use super::metrics::{parse, scrape_kube_scheduler, total};
use super::{dra_view, events_for, twin_pods, InProcessBinder};

/// A ResourceSlice with two GPUs, `gpu-0` and `gpu-1`, on `node`, each attached once `Attached`
/// is True (its failure condition `AttachFailed`).
fn slice(driver: &str, node: &str) -> serde_json::Value {
    let devices: Vec<serde_json::Value> = ["gpu-0", "gpu-1"]
        .iter()
        .map(|name| {
            serde_json::json!({
                "name": name,
                "attributes": {"model": {"string": "h100"}},
                "bindingConditions": ["Attached"],
                "bindingFailureConditions": ["AttachFailed"],
            })
        })
        .collect();
    serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-gpus")},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
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

/// As the driver: the claim's allocated device gets the condition `type_` with `status`.
async fn report(claims: &Api<ResourceClaim>, name: &str, type_: &str, status: &str) {
    let c = claims.get(name).await.expect("the claim");
    let r = c
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .and_then(|r| r.first())
        .cloned()
        .unwrap_or_else(|| panic!("{name}: not allocated"));
    let patch = serde_json::json!({"status": {"devices": [{
        "driver": r.driver, "pool": r.pool, "device": r.device,
        "conditions": [{"type": type_, "status": status, "reason": "Fabric", "message": "the fabric answered",
                         "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string()}],
    }]}});
    claims
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("report {type_}={status} on {name}: {e}"));
}

/// Issue 45, item 4 on a real control plane. Per side one node with two attachable GPUs; twin pods
/// with a claim each. Both schedulers must allocate the GPU with its conditions, say they wait
/// (`BindingConditionsPending`) and not bind until the test, as the driver, reports `Attached`;
/// then bind. A second pair's claims get `AttachFailed` instead: both fail the PreBind with the
/// same message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_with_binding_conditions_are_bound_once_attached_as_kube_scheduler_does() {
    let test = "devices_with_binding_conditions_are_bound_once_attached_as_kube_scheduler_does";
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
    let mut scope = Scope::new(&cluster, "dra-binding").await;
    let driver = format!("gpu.b{}.placement-e2e.example.com", scope.run);
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
        // One node per side: kube breaks ties between equal nodes at random.
        let node = scope.add_node(&format!("{side}-n1"), "8", &[("side", side)]).await;
        scope.create_storage("resourceslices", slice(&driver, &node)).await;
        for c in ["attached", "failed"] {
            claims
                .create(&PostParams::default(), &claim(&format!("{c}-{side}"), &class))
                .await
                .expect("create a claim");
        }
    }
    // Last, the canary's: kube-scheduler binding it (its device attached by the test) shows its
    // informers have every slice and claim.
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
    let allocated = |name: &'static str| {
        let claims = claims.clone();
        async move {
            claims
                .get(name)
                .await
                .ok()
                .and_then(|c| c.status)
                .is_some_and(|s| s.allocation.is_some())
        }
    };
    eventually(WAIT, "kube-scheduler to allocate the canary's claim", || {
        allocated("canary")
    })
    .await;
    report(&claims, "canary", "Attached", "True").await;
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
    // kube's binding-conditions metrics, per driver and outcome (the canary's counted before).
    let counts = |text: &str, status: &str| {
        let samples = parse(text);
        let labels = [("driver", driver.as_str()), ("status", status)];
        (
            total(&samples, "scheduler_dra_bindingconditions_allocations_total", &labels),
            total(
                &samples,
                "scheduler_dra_bindingconditions_wait_duration_seconds_count",
                &labels,
            ),
        )
    };
    let kube_counts = |status: &str| {
        scrape_kube_scheduler(&cluster.kubeconfig)
            .map(|t| counts(&t, status))
            .unwrap_or_default()
    };
    for step in ["attached", "failed"] {
        let status = if step == "attached" { "success" } else { "failure" };
        let kube_before = kube_counts(status);
        let ours_before = counts(&binder.binder.metrics().encode(), status);
        let pods = twin_pods(&scope, step, "100m", &|pod, side| {
            pod["spec"]["resourceClaims"] =
                serde_json::json!([{"name": "gpu", "resourceClaimName": format!("{step}-{side}")}]);
            pod["spec"]["containers"][0]["resources"]["claims"] = serde_json::json!([{"name": "gpu"}]);
        });
        for p in &pods {
            scope.create(p).await;
        }
        let names = pods.map(|p| p.name_any());
        // Both allocate, say they wait, and bind nothing.
        for (name, side) in names.iter().zip(["ours", "kube"]) {
            let claim = format!("{step}-{side}");
            eventually(
                WAIT,
                &format!("{name}: its claim allocated and BindingConditionsPending"),
                || {
                    let claims = claims.clone();
                    let (scope, claim, name) = (&scope, claim.clone(), name.clone());
                    async move {
                        let allocated = claims
                            .get(&claim)
                            .await
                            .ok()
                            .and_then(|c| c.status)
                            .is_some_and(|s| s.allocation.is_some());
                        allocated && !events_for(scope, &name, "BindingConditionsPending").await.is_empty()
                    }
                },
            )
            .await;
        }
        let pending: Vec<String> = {
            let mut notes = Vec::new();
            for (name, side) in names.iter().zip(["ours", "kube"]) {
                let e = events_for(&scope, name, "BindingConditionsPending").await;
                notes.push(
                    e.first()
                        .and_then(|e| e.note.clone())
                        .unwrap_or_default()
                        .replace(side, "SIDE"),
                );
            }
            notes
        };
        assert_eq!(
            pending[0], pending[1],
            "{step}: BindingConditionsPending, placement (left) against kube"
        );
        for name in &names {
            let p = scope.pods().get(name).await.expect("the pod");
            assert_eq!(node_of(&p), None, "{name}: bound before its device was attached");
        }
        let (ours_alloc, kube_alloc) = (
            dra_view(&scope, &scope.pods().get(&names[0]).await.expect("pod"), "ours").await,
            dra_view(&scope, &scope.pods().get(&names[1]).await.expect("pod"), "kube").await,
        );
        assert_eq!(
            ours_alloc["devices"], kube_alloc["devices"],
            "{step}: the allocation while waiting, placement (left) against kube"
        );
        if step == "attached" {
            for side in ["ours", "kube"] {
                report(&claims, &format!("{step}-{side}"), "Attached", "True").await;
            }
            eventually(WAIT, &format!("both bound {names:?}"), || async {
                let mut all = true;
                for name in &names {
                    all &= scope.pods().get(name).await.ok().is_some_and(|p| node_of(&p).is_some());
                }
                all
            })
            .await;
            let ours = dra_view(&scope, &scope.pods().get(&names[0]).await.expect("pod"), "ours").await;
            let kube = dra_view(&scope, &scope.pods().get(&names[1]).await.expect("pod"), "kube").await;
            assert_eq!(
                ours, kube,
                "attached: bound, placement (left) against kube-scheduler (right)"
            );
            eprintln!("e2e {test}: attached: bound alike: {ours}");
        } else {
            for side in ["ours", "kube"] {
                report(&claims, &format!("{step}-{side}"), "AttachFailed", "True").await;
            }
            let mut first = Vec::new();
            for (name, side) in names.iter().zip(["ours", "kube"]) {
                eventually(WAIT, &format!("{name}: its PreBind failed"), || async {
                    !events_for(&scope, name, "FailedScheduling").await.is_empty()
                })
                .await;
                let mut events = events_for(&scope, name, "FailedScheduling").await;
                events.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
                let note = events.first().and_then(|e| e.note.clone()).unwrap_or_default();
                first.push(note.replace(side, "SIDE"));
            }
            assert_eq!(
                first[0], first[1],
                "failed: the PreBind's message, placement (left) against kube"
            );
            assert!(
                first[0].contains("device binding failed: claim=failed-SIDE, reason=Fabric"),
                "{}",
                first[0]
            );
            eprintln!("e2e {test}: failed: message alike: {}", first[0]);
        }
        // The step's allocations and waits, counted alike on both sides.
        let mut kube = (0.0, 0.0);
        let mut ours = (0.0, 0.0);
        eventually(
            WAIT,
            &format!("{step}: both schedulers' binding-conditions metrics"),
            || {
                let (k, o) = (kube_counts(status), counts(&binder.binder.metrics().encode(), status));
                kube = (k.0 - kube_before.0, k.1 - kube_before.1);
                ours = (o.0 - ours_before.0, o.1 - ours_before.1);
                let done = kube.0 >= 1.0 && ours.0 >= 1.0;
                async move { done }
            },
        )
        .await;
        assert_eq!(
            ours, kube,
            "{step}: (allocations, waits) counted by placement (left) and kube-scheduler"
        );
        eprintln!("e2e {test}: {step}: binding-conditions metrics alike: {ours:?}");
    }
    binder.stop().await;
    scope.cleanup().await;
}
