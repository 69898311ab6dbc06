//! DeviceTaintRules (`resource.k8s.io/v1`, GA and on by default in Kubernetes 1.37) on a real
//! control plane: placement against the cluster's kube-scheduler, whose ResourceSlice tracker
//! applies the rules to the devices they select (issue 45, item 2).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceTaintRule, ResourceClaimTemplate};
use kube::api::{Api, DeleteParams, PostParams};
use kube::ResourceExt;
use placement_tests::e2e::{cluster, marked_unschedulable, node_of, pod_for, serial, Scope, WAIT};
use placement_tests::fixtures::eventually;

use super::{claim_spec, dra_view, twin_pods, InProcessBinder};

/// A ResourceSlice of `node`'s GPUs of `driver`, one pool per node named after it: (device name,
/// the keys of the taints the slice itself gives it, all `NoSchedule` with the value "true").
fn slice(driver: &str, node: &str, devices: &[(&str, &[&str])]) -> serde_json::Value {
    let devices: Vec<serde_json::Value> = devices
        .iter()
        .map(|(name, taints)| {
            let mut d = serde_json::json!({"name": name, "attributes": {"model": {"string": "h100"}}});
            if !taints.is_empty() {
                d["taints"] = taints
                    .iter()
                    .map(|k| serde_json::json!({"key": k, "value": "true", "effect": "NoSchedule"}))
                    .collect();
            }
            d
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

/// A DeviceTaintRule `name` with `selector` (`None`: no `deviceSelector`) and `taint`.
fn rule(name: &str, selector: Option<serde_json::Value>, taint: serde_json::Value) -> serde_json::Value {
    let mut spec = serde_json::json!({ "taint": taint });
    if let Some(s) = selector {
        spec["deviceSelector"] = s;
    }
    serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": spec,
    })
}

/// A pod of kube-scheduler's on the canary node, its claim from `template`.
fn canary_pod(scope: &Scope, name: &str, template: &str) -> Pod {
    let mut pod =
        serde_json::to_value(pod_for(&scope.ns, name, "default-scheduler", &scope.run, "100m")).expect("a pod as JSON");
    pod["spec"]["nodeSelector"] = serde_json::json!({"side": "canary"});
    pod["spec"]["resourceClaims"] = serde_json::json!([{"name": "gpu", "resourceClaimTemplateName": template}]);
    pod["spec"]["containers"][0]["resources"]["claims"] = serde_json::json!([{"name": "gpu"}]);
    serde_json::from_value(pod).expect("a pod")
}

/// Issue 45's item 2 on a real control plane: twin nodes with twin GPUs on each side, tainted by
/// DeviceTaintRules (by driver and device name on both sides, by pool per side, an empty
/// selector with the effect `None`, no selector at all) and by their slices, and twin pods whose
/// claims tolerate some of those taints, decided one pair at a time by placement and by the
/// cluster's kube-scheduler. Each pair must land on twin nodes with the same devices allocated,
/// or be left unschedulable with the same message; removing the rules that keep a pending pod
/// off the last free device lets both sides place it there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_taint_rules_taint_devices_as_kube_schedulers_tracker_does() {
    let test = "device_taint_rules_taint_devices_as_kube_schedulers_tracker_does";
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
    let mut scope = Scope::new(&cluster, "dra-taints").await;
    // A driver of this run's own: the rules that select by driver select nothing else.
    let driver = format!("gpu.t{}.placement-e2e.example.com", scope.run);
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
    let mut pools: Vec<[String; 3]> = Vec::new();
    for side in ["ours", "kube"] {
        let n1 = scope.add_node(&format!("{side}-n1"), "8", &[("side", side)]).await;
        let n2 = scope.add_node(&format!("{side}-n2"), "8", &[("side", side)]).await;
        let n3 = scope.add_node(&format!("{side}-n3"), "8", &[("side", side)]).await;
        pools.push([n1, n2, n3]);
    }
    let canary = scope.add_node("canary", "8", &[("side", "canary")]).await;
    let taint = |key: &str, effect: &str| serde_json::json!({"key": key, "value": "true", "effect": effect});
    // The rules, before the slices. Every device named gpu-0 of the driver: maintenance.
    let mut rules = vec![rule(
        &format!("{}-maintenance", scope.run),
        Some(serde_json::json!({"driver": driver, "device": "gpu-0"})),
        taint("example.com/maintenance", "NoSchedule"),
    )];
    // Each side's n2, by pool: drained.
    for (side, [_, n2, _]) in ["ours", "kube"].iter().zip(&pools) {
        rules.push(rule(
            &format!("{}-drain-{side}", scope.run),
            Some(serde_json::json!({"pool": n2})),
            taint("example.com/drain", "NoExecute"),
        ));
    }
    // Every device of the cluster, with the effect None: informational, keeps nothing off.
    rules.push(rule(
        &format!("{}-inventory", scope.run),
        Some(serde_json::json!({})),
        taint("example.com/inventory", "None"),
    ));
    // No selector: no device.
    rules.push(rule(
        &format!("{}-nothing", scope.run),
        None,
        taint("example.com/nothing", "NoSchedule"),
    ));
    // Last, the canary's (see below).
    rules.push(rule(
        &format!("{}-canary", scope.run),
        Some(serde_json::json!({"driver": driver, "pool": canary})),
        taint("example.com/canary", "NoSchedule"),
    ));
    for r in rules {
        scope.create_storage("devicetaintrules", r).await;
    }
    // n1: gpu-0 (maintenance), gpu-1 (untainted); n2: gpu-0 (maintenance, drain), gpu-1 (drain);
    // n3: gpu-0 (its slice's own taint, maintenance), gpu-1 (its slice's own taint).
    for [n1, n2, n3] in &pools {
        for s in [
            slice(&driver, n1, &[("gpu-0", &[]), ("gpu-1", &[])]),
            slice(&driver, n2, &[("gpu-0", &[]), ("gpu-1", &[])]),
            slice(
                &driver,
                n3,
                &[
                    ("gpu-0", &["example.com/slice-own"]),
                    ("gpu-1", &["example.com/slice-own"]),
                ],
            ),
        ] {
            scope.create_storage("resourceslices", s).await;
        }
    }
    scope
        .create_storage("resourceslices", slice(&driver, &canary, &[("c-0", &[]), ("c-1", &[])]))
        .await;
    let tolerate = |key: &str, effect: Option<&str>| match effect {
        Some(e) => serde_json::json!({"key": key, "operator": "Exists", "effect": e}),
        None => serde_json::json!({"key": key, "operator": "Exists"}),
    };
    let templates: [(&str, Vec<serde_json::Value>); 6] = [
        ("plain", vec![]),
        ("maint", vec![tolerate("example.com/maintenance", Some("NoSchedule"))]),
        (
            "own",
            vec![
                serde_json::json!({"key": "example.com/slice-own", "operator": "Equal", "value": "true", "effect": "NoSchedule"}),
            ],
        ),
        (
            "maint-own",
            vec![
                tolerate("example.com/maintenance", Some("NoSchedule")),
                tolerate("example.com/slice-own", None),
            ],
        ),
        (
            "maint-drain",
            vec![
                tolerate("example.com/maintenance", Some("NoSchedule")),
                tolerate("example.com/drain", None),
            ],
        ),
        ("canary", vec![tolerate("example.com/canary", Some("NoSchedule"))]),
    ];
    let templates_api: Api<ResourceClaimTemplate> = Api::namespaced(cluster.client.clone(), &scope.ns);
    for (name, tolerations) in &templates {
        let mut exactly = serde_json::json!({"deviceClassName": class});
        if !tolerations.is_empty() {
            exactly["tolerations"] = serde_json::json!(tolerations);
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
    // kube-scheduler's informers see slices and rules in their own time: a pod decided before they
    // have seen them all is decided on devices without the rules' taints (or without devices).
    // The canary's slice was created after every other slice, its rule after every other rule,
    // and each informer delivers its objects in order: a canary pod tolerating the canary's taint
    // bound shows every slice seen; then one not tolerating it, with a free device left, refused
    // shows every rule seen.
    let tolerant = scope.create(&canary_pod(&scope, "canary-tolerant", "canary")).await;
    eventually(WAIT, "kube-scheduler to bind the tolerant canary", || async {
        scope
            .pods()
            .get(&tolerant.name_any())
            .await
            .ok()
            .is_some_and(|p| node_of(&p).is_some())
    })
    .await;
    let untolerant = scope.create(&canary_pod(&scope, "canary-untolerant", "plain")).await;
    eventually(WAIT, "kube-scheduler to decide the untolerant canary", || async {
        scope
            .pods()
            .get(&untolerant.name_any())
            .await
            .ok()
            .is_some_and(|p| node_of(&p).is_some() || marked_unschedulable(&p))
    })
    .await;
    let untolerant = scope.pods().get(&untolerant.name_any()).await.expect("the canary");
    assert_eq!(
        node_of(&untolerant),
        None,
        "kube-scheduler bound a pod to a device a DeviceTaintRule taints: it had not seen the rules"
    );

    let binder = InProcessBinder::start(&cluster, &scope).await;
    let twins = |name: &str, template: &str| {
        twin_pods(&scope, name, "100m", &|pod, _side| {
            pod["spec"]["resourceClaims"] = serde_json::json!([{"name": "gpu", "resourceClaimTemplateName": template}]);
            pod["spec"]["containers"][0]["resources"]["claims"] = serde_json::json!([{"name": "gpu"}]);
        })
    };
    let decided = |p: &Pod| node_of(p).is_some() || marked_unschedulable(p);
    let compare = |step: String, names: [String; 2]| {
        let scope = &scope;
        async move {
            let ours = scope.pods().get(&names[0]).await.expect("our twin");
            let kube = scope.pods().get(&names[1]).await.expect("kube's twin");
            let (ours_view, kube_view) = (
                dra_view(scope, &ours, "ours").await,
                dra_view(scope, &kube, "kube").await,
            );
            assert_eq!(
                ours_view, kube_view,
                "{step}: placement (left) against kube-scheduler (right)"
            );
            ours_view
        }
    };
    let mut outcomes: Vec<(String, serde_json::Value)> = Vec::new();
    let steps = [
        ("plain-1", "plain"),
        ("plain-2", "plain"),
        ("maint", "maint"),
        ("maint-own", "maint-own"),
        ("own", "own"),
        ("maint-drain", "maint-drain"),
    ];
    for (step, template) in steps {
        let pods = twins(step, template);
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
        outcomes.push((step.to_string(), compare(step.to_string(), names).await));
    }
    // The drain rules removed: the plain pod left pending takes n2's gpu-1 on both sides (kube's
    // tracker reports the slices changed, and DynamicResources requeues the pod on that).
    let rules_api: Api<DeviceTaintRule> = Api::all(cluster.client.clone());
    for side in ["ours", "kube"] {
        rules_api
            .delete(&format!("{}-drain-{side}", scope.run), &DeleteParams::default())
            .await
            .expect("delete a drain rule");
    }
    let names = ["plain-2-ours".to_string(), "plain-2-kube".to_string()];
    eventually(
        WAIT,
        "both schedulers placed plain-2 once the drain rules went",
        || async {
            let mut all = true;
            for name in &names {
                all &= scope.pods().get(name).await.ok().is_some_and(|p| node_of(&p).is_some());
            }
            all
        },
    )
    .await;
    outcomes.push((
        "plain-2 after the drain rules went".to_string(),
        compare("plain-2 after the drain rules went".to_string(), names).await,
    ));

    // What the scenario is built to show, beyond agreeing with kube-scheduler.
    let got = |step: &str| {
        outcomes
            .iter()
            .find(|(s, _)| s == step)
            .map(|(_, v)| (v["node"].clone(), v["devices"][0]["device"].clone()))
    };
    let on = |i: usize, device: &str| {
        Some((
            serde_json::Value::String(pools[0][i].replace("ours", "SIDE")),
            serde_json::Value::String(device.to_string()),
        ))
    };
    assert_eq!(got("plain-1"), on(0, "gpu-1"), "the one device no taint keeps off");
    assert_eq!(
        got("plain-2"),
        Some((serde_json::Value::Null, serde_json::Value::Null)),
        "no untainted device left"
    );
    assert_eq!(got("maint"), on(0, "gpu-0"), "the rule's maintenance taint, tolerated");
    assert_eq!(
        got("maint-own"),
        on(2, "gpu-0"),
        "the slice's taint and the rule's, tolerated"
    );
    assert_eq!(got("own"), on(2, "gpu-1"));
    assert_eq!(got("maint-drain"), on(1, "gpu-0"), "both rules' taints, tolerated");
    assert_eq!(got("plain-2 after the drain rules went"), on(1, "gpu-1"));
    eprintln!(
        "e2e {test}: {} decisions alike (node, devices, tolerations, messages)",
        outcomes.len()
    );
    for (step, view) in &outcomes {
        eprintln!("  {step}: {view}");
    }
    binder.stop().await;
    scope.cleanup().await;
}
