//! kube's CEL environment for DRA device selectors on a real control plane (issue 45, item 6):
//! placement against the cluster's kube-scheduler, with request selectors that use `cel.bind`,
//! the strings, regex, lists, sets, URL, IP, CIDR and format libraries and two-variable
//! comprehensions, each matching one device of the node.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaimTemplate;
use kube::api::{Api, PostParams};
use kube::ResourceExt;
use placement_tests::e2e::{cluster, marked_unschedulable, node_of, pod_for, serial, Scope, WAIT};
use placement_tests::fixtures::eventually;

use super::{dra_view, twin_pods, InProcessBinder};

/// The attributes of device `i` (0–7): each selector below matches one device only.
fn attributes(i: usize) -> serde_json::Value {
    let model = if i == 1 { "H100-PCIE" } else { "A100" };
    let ip = if i % 2 == 1 {
        format!("fd00::{i}")
    } else {
        format!("10.0.{i}.1")
    };
    let label = if i == 6 {
        "label-6".to_string()
    } else {
        format!("Label_{i}")
    };
    let tier = match i {
        0 | 6 => "gold",
        7 => "platinum",
        _ => "bronze",
    };
    serde_json::json!({
        "index": {"int": i},
        "model": {"string": model},
        "slot": {"string": format!("slot-{i}")},
        "endpoint": {"string": format!("https://gpu-{i}.example.com:840{i}/v1")},
        "ip": {"string": ip},
        "label": {"string": label},
        "tier": {"string": tier},
    })
}

/// A ResourceSlice of `node`'s eight GPUs of `driver` (one pool per node, named after it).
fn slice(driver: &str, node: &str) -> serde_json::Value {
    let devices: Vec<serde_json::Value> = (0..8)
        .map(|i| serde_json::json!({"name": format!("gpu-{i}"), "attributes": attributes(i)}))
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

/// The request selectors, by request name, and the device each matches.
fn selectors(driver: &str) -> Vec<(&'static str, String, &'static str)> {
    let a = format!("device.attributes[\"{driver}\"]");
    vec![
        (
            "bind-strings",
            format!("cel.bind(a, {a}, a.model.lowerAscii() == \"h100-pcie\" && a.slot.split(\"-\")[1] == \"1\")"),
            "gpu-1",
        ),
        (
            "regex",
            format!("{a}.slot.find(\"[0-9]+\") == \"2\" && {a}.slot.findAll(\"[a-z]+\") == [\"slot\"]"),
            "gpu-2",
        ),
        (
            "lists",
            format!("[0, 3, 5].indexOf({a}.index) == 1 && [1, 5, 3].max() == 5 && [3, 1, 2].sort().isSorted()"),
            "gpu-3",
        ),
        (
            "url",
            format!("isURL({a}.endpoint) && url({a}.endpoint).getPort() == \"8404\""),
            "gpu-4",
        ),
        (
            "ip-cidr",
            format!("isIP({a}.ip) && ip({a}.ip).family() == 6 && cidr(\"fd00::/64\").containsIP({a}.ip) && ip({a}.ip) == ip(\"fd00::5\")"),
            "gpu-5",
        ),
        (
            "format-sets",
            format!("!format.dns1123Label().validate({a}.label).hasValue() && sets.contains([\"gold\", \"silver\"], [{a}.tier])"),
            "gpu-6",
        ),
        (
            "two-var",
            format!("{a}.exists(k, v, k == \"tier\" && v == \"platinum\")"),
            "gpu-7",
        ),
    ]
}

/// `view` with the random suffix of a claim's generated name, which messages quote, dropped.
fn claims_unnamed(mut view: serde_json::Value) -> serde_json::Value {
    if let Some(message) = view["condition"].get_mut(2) {
        if let Some(text) = message.as_str() {
            let unnamed: String = text
                .split(' ')
                .map(|word| match word.rsplit_once("-gpu-") {
                    Some((claim, _)) if word.starts_with("placement-e2e-") => format!("{claim}-gpu-…:"),
                    _ => word.to_string(),
                })
                .collect::<Vec<_>>()
                .join(" ");
            *message = serde_json::Value::String(unnamed);
        }
    }
    view
}

/// Issue 45's item 6 on a real control plane: a node per side with eight GPUs, and twin pods
/// whose one claim has a request per library, decided by placement and by the cluster's
/// kube-scheduler: both must give each request the one device its selector matches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_cel_selectors_use_kubes_libraries_as_kube_scheduler_does() {
    let test = "dra_cel_selectors_use_kubes_libraries_as_kube_scheduler_does";
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
    let mut scope = Scope::new(&cluster, "dra-cel").await;
    let driver = format!("gpu.l{}.placement-e2e.example.com", scope.run);
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

    let selectors = selectors(&driver);
    let requests: Vec<serde_json::Value> = selectors
        .iter()
        .map(|(name, expr, _)| {
            serde_json::json!({"name": name, "exactly": {
                "deviceClassName": class,
                "selectors": [{"cel": {"expression": expr}}],
            }})
        })
        .collect();
    let templates_api: Api<ResourceClaimTemplate> = Api::namespaced(cluster.client.clone(), &scope.ns);
    for (name, requests) in [
        ("libraries", serde_json::json!(requests)),
        (
            "any",
            serde_json::json!([{"name": "gpu", "exactly": {"deviceClassName": class}}]),
        ),
        (
            "bad-url",
            serde_json::json!([{"name": "gpu", "exactly": {
                "deviceClassName": class,
                "selectors": [{"cel": {"expression": format!("url(device.attributes[\"{driver}\"].label).getPort() == \"\"")}}],
            }}]),
        ),
    ] {
        let t = serde_json::json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": requests}}},
        });
        templates_api
            .create(&PostParams::default(), &serde_json::from_value(t).expect("a template"))
            .await
            .expect("create a ResourceClaimTemplate (the API server compiles its selectors)");
    }
    let mut canary_pod =
        serde_json::to_value(pod_for(&scope.ns, "canary", "default-scheduler", &scope.run, "100m")).expect("a pod");
    canary_pod["spec"]["nodeSelector"] = serde_json::json!({"side": "canary"});
    canary_pod["spec"]["resourceClaims"] = serde_json::json!([{"name": "gpu", "resourceClaimTemplateName": "any"}]);
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
    let decide = |template: &'static str| {
        let scope = &scope;
        async move {
            let pods = twin_pods(scope, template, "100m", &|pod, _side| {
                pod["spec"]["resourceClaims"] =
                    serde_json::json!([{"name": "gpu", "resourceClaimTemplateName": template}]);
                pod["spec"]["containers"][0]["resources"]["claims"] = serde_json::json!([{"name": "gpu"}]);
            });
            for p in &pods {
                scope.create(p).await;
            }
            let names = pods.map(|p| p.name_any());
            eventually(WAIT, &format!("both schedulers decided {names:?}"), || async {
                let mut all = true;
                for name in &names {
                    all &= scope
                        .pods()
                        .get(name)
                        .await
                        .ok()
                        .is_some_and(|p| node_of(&p).is_some() || marked_unschedulable(&p));
                }
                all
            })
            .await;
            let ours = scope.pods().get(&names[0]).await.expect("our twin");
            let kube = scope.pods().get(&names[1]).await.expect("kube's twin");
            let (ours_view, kube_view) = (
                claims_unnamed(dra_view(scope, &ours, "ours").await),
                claims_unnamed(dra_view(scope, &kube, "kube").await),
            );
            assert_eq!(
                ours_view, kube_view,
                "{template}: placement (left) against kube-scheduler (right)"
            );
            ours_view
        }
    };
    // A selector failing at run time (`url` of a label that is no URL): the same error.
    let failed = decide("bad-url").await;
    assert!(failed["node"].is_null(), "{failed}");
    let ours_view = decide("libraries").await;
    // What the scenario is built to show, beyond agreeing with kube-scheduler: each request got
    // the one device its selector matches.
    let got: Vec<(String, String)> = ours_view["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            (
                d["request"].as_str().unwrap_or_default().to_string(),
                d["device"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = selectors
        .iter()
        .map(|(name, _, device)| (name.to_string(), device.to_string()))
        .collect();
    assert_eq!(got, want, "each request its device: {ours_view}");
    eprintln!(
        "e2e {test}: {} of {} requests given the same device by both schedulers: {ours_view}; a selector's \
         run-time error alike: {failed}",
        got.len(),
        want.len()
    );
    binder.stop().await;
    scope.cleanup().await;
}
