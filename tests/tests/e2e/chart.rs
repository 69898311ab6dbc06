//! The Helm chart as a platform team installs it (issue 47): rendered with tracing on, applied
//! server-side to the control plane (the Deployments scaled to 0: no kubelet here runs their
//! pods), then its two workloads run out of cluster exactly as the chart gives them — the
//! decision container's args, the binder's args, `envFrom` ConfigMap and `env` (the field
//! reference resolved as the kubelet resolves it), the ConfigMaps mounted where the chart mounts
//! them (files written to a folder standing for each mount path), and the binder's API access
//! through a token of the chart's ServiceAccount under the chart's RBAC. Out of cluster only the
//! listen ports change (free ports on 127.0.0.1) and the decision Service's DNS name gives way to
//! the replica's address. Pods naming the chart's scheduler are then bound, and their trace
//! reaches the collector the chart's tracing values name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::{Discovery, Scope as ApiScope};
use kube::ResourceExt;
use placement_tests::e2e::{cluster, free_port, node_of, serial, workspace_binary, Scope, WAIT};
use placement_tests::fixtures::eventually;
use serde_json::Value;

use super::tracing::{pod_trace, Receiver, ServiceProcess};

/// The container `name` of the Deployment `deployment` among `docs`.
fn container<'a>(docs: &'a [Value], deployment: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == deployment)
        .and_then(|d| d["spec"]["template"]["spec"]["containers"].as_array())
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("the chart's Deployment {deployment} has a container {name}"))
}

/// The pod spec's volumes of the Deployment `deployment`.
fn volumes<'a>(docs: &'a [Value], deployment: &str) -> &'a [Value] {
    docs.iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == deployment)
        .and_then(|d| d["spec"]["template"]["spec"]["volumes"].as_array())
        .map_or(&[], Vec::as_slice)
}

/// The data of the ConfigMap `name` among `docs`.
fn config_map(docs: &[Value], name: &str) -> BTreeMap<String, String> {
    let cm = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("the chart renders the ConfigMap {name}"));
    serde_json::from_value(cm["data"].clone()).expect("string data")
}

/// Writes every ConfigMap volume the container mounts into `root` (a folder per mount path) and
/// returns (mount path, folder) for rewriting the paths the container is given.
fn mount_config_maps(docs: &[Value], deployment: &str, c: &Value, root: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for m in c["volumeMounts"].as_array().into_iter().flatten() {
        let path = m["mountPath"].as_str().expect("a mount path");
        let volume = volumes(docs, deployment)
            .iter()
            .find(|v| v["name"] == m["name"])
            .unwrap_or_else(|| panic!("{deployment}: the volume {} is declared", m["name"]));
        let Some(cm) = volume["configMap"]["name"].as_str() else {
            panic!("{deployment}: the volume {} is not a ConfigMap (TLS is off)", m["name"]);
        };
        let dir = root.join(path.trim_start_matches('/').replace('/', "_"));
        std::fs::create_dir_all(&dir).expect("a folder for the mount");
        for (file, text) in config_map(docs, cm) {
            std::fs::write(dir.join(file), text).expect("write a mounted file");
        }
        out.push((path.to_string(), dir));
    }
    out
}

/// `value` with a mount path prefix replaced by its folder.
fn remount(value: &str, mounts: &[(String, PathBuf)]) -> String {
    for (path, dir) in mounts {
        if let Some(rest) = value.strip_prefix(path.as_str()) {
            return format!("{}{rest}", dir.display());
        }
        if let Some((flag, v)) = value.split_once('=') {
            if let Some(rest) = v.strip_prefix(path.as_str()) {
                return format!("{flag}={}{rest}", dir.display());
            }
        }
    }
    value.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_helm_chart_applied_and_its_workloads_args_run_bind_pods() {
    let Some(cluster) = cluster("the_helm_chart_applied_and_its_workloads_args_run_bind_pods").await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "chart-run").await;
    let (receiver, collector) = Receiver::start().await;
    let docs = super::chart(
        &scope.ns,
        &[
            "--set",
            &format!("schedulerName={}", scope.scheduler),
            "--set",
            "namespace.create=false",
            "--set",
            "tracing.enabled=true",
            "--set",
            &format!("tracing.endpoint={collector}"),
            "--set",
            "tracing.samplingRatePerMillion=1000000",
        ],
    );

    // Applied server-side; cluster-scoped names made the test's own.
    let discovery = Discovery::new(cluster.client.clone())
        .run()
        .await
        .expect("API discovery");
    let suffix = format!("-{}", scope.run);
    let apply = PatchParams::apply("placement-e2e").force();
    let mut applied = 0;
    for mut doc in docs.clone() {
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        match kind.as_str() {
            "ClusterRole" | "ClusterRoleBinding" => {
                let name = format!("{}{suffix}", doc["metadata"]["name"].as_str().unwrap_or_default());
                doc["metadata"]["name"] = name.clone().into();
                if kind == "ClusterRoleBinding" {
                    let role = format!("{}{suffix}", doc["roleRef"]["name"].as_str().unwrap_or_default());
                    doc["roleRef"]["name"] = role.into();
                }
                scope.owns(&format!("{}s", kind.to_lowercase()), &name);
            }
            // Nothing here runs their pods: the workloads run out of cluster below.
            "Deployment" => doc["spec"]["replicas"] = 0.into(),
            _ => {}
        }
        let obj: DynamicObject = serde_json::from_value(doc).expect("an object");
        let types = obj.types.clone().expect("apiVersion and kind");
        let (group, version) = types.api_version.split_once('/').unwrap_or(("", &types.api_version));
        let Some((resource, caps)) = discovery.resolve_gvk(&kube::api::GroupVersionKind::gvk(group, version, &kind))
        else {
            panic!("the cluster serves {} {}", types.api_version, kind);
        };
        let api: Api<DynamicObject> = match caps.scope {
            ApiScope::Namespaced => Api::namespaced_with(cluster.client.clone(), &scope.ns, &resource),
            ApiScope::Cluster => {
                assert!(
                    kind.starts_with("Cluster"),
                    "a cluster-scoped {kind} the test would share with the cluster"
                );
                Api::all_with(cluster.client.clone(), &resource)
            }
        };
        api.patch(&obj.name_any(), &apply, &Patch::Apply(&obj))
            .await
            .unwrap_or_else(|e| panic!("apply {kind} {}: {e}", obj.name_any()));
        applied += 1;
    }
    assert!(applied >= 15, "the chart's objects applied ({applied})");

    // The decision replica: the container's args, its mounted files.
    let dir = tempfile::tempdir().expect("a temporary folder");
    let decision = container(&docs, "placement-decision", "scheduler-service");
    let mounts = mount_config_maps(&docs, "placement-decision", decision, dir.path());
    let grpc = free_port();
    let metrics = free_port();
    let args: Vec<String> = decision["args"]
        .as_array()
        .expect("the decision container's args")
        .iter()
        .map(|a| {
            let a = a.as_str().expect("a string argument");
            match a.split_once('=') {
                Some(("--listen", _)) => format!("--listen={grpc}"),
                Some(("--metrics-listen", _)) => format!("--metrics-listen={metrics}"),
                _ => remount(a, &mounts),
            }
        })
        .collect();
    assert!(
        args.iter().any(|a| a.starts_with("--tracing-config-file=")),
        "the chart gives the decision service its tracing file: {args:?}"
    );
    let log = std::fs::File::create(dir.path().join("scheduler-service.log")).expect("a log file");
    let mut cmd = Command::new(workspace_binary("scheduler-service"));
    cmd.args(&args)
        .env("OTEL_BSP_SCHEDULE_DELAY", "200")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log));
    for e in decision["env"].as_array().into_iter().flatten() {
        let value = e["value"].as_str().expect("plain env values (TLS is off)");
        cmd.env(e["name"].as_str().expect("a name"), remount(value, &mounts));
    }
    let _service = ServiceProcess(cmd.spawn().expect("start scheduler-service"));
    eventually(Duration::from_secs(30), "the decision replica listens", || async {
        tokio::net::TcpStream::connect(grpc).await.is_ok()
    })
    .await;

    // The binder: `run`, its envFrom ConfigMap and env, its mounted files, a token of the chart's
    // ServiceAccount.
    let binder = container(&docs, "placement-binder", "binder-agent");
    assert_eq!(binder["args"], serde_json::json!(["run"]));
    let mounts = mount_config_maps(&docs, "placement-binder", binder, dir.path());
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for from in binder["envFrom"].as_array().into_iter().flatten() {
        let name = from["configMapRef"]["name"].as_str().expect("a ConfigMap reference");
        env.extend(config_map(&docs, name));
    }
    for e in binder["env"].as_array().into_iter().flatten() {
        let name = e["name"].as_str().expect("a name").to_string();
        let value = match (e["value"].as_str(), e["valueFrom"]["fieldRef"]["fieldPath"].as_str()) {
            (Some(v), _) => v.to_string(),
            (None, Some("metadata.namespace")) => scope.ns.clone(),
            other => panic!("the binder's env {name}: {other:?}"),
        };
        env.insert(name, value);
    }
    assert_eq!(env.get("BINDER_SCHEDULER_NAME"), Some(&scope.scheduler));
    assert!(env.contains_key("BINDER_TRACING_CONFIG_FILE"), "{env:?}");
    let dns = env
        .remove("BINDER_DECISION_DNS")
        .expect("the chart finds replicas by DNS");
    assert!(dns.ends_with(":50051"), "{dns}");
    env.insert("BINDER_DECISION_ENDPOINTS".into(), format!("http://{grpc}"));
    env.insert("BINDER_HTTP_LISTEN".into(), free_port().to_string());
    env.insert("OTEL_BSP_SCHEDULE_DELAY".into(), "200".into());
    for value in env.values_mut() {
        *value = remount(value, &mounts);
    }
    let kubeconfig = super::service_account_kubeconfig(&cluster, &scope, "placement-binder").await;
    let identity = format!("{}-chart", scope.run);
    env.insert("BINDER_IDENTITY".into(), identity.clone());
    let binder_log = dir.path().join("binder.log");
    let mut binder_process = Command::new(workspace_binary("binder-agent"))
        .arg("run")
        .env_clear()
        .envs(&env)
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&binder_log).expect("a log file")))
        .spawn()
        .expect("start binder-agent");
    let log = || std::fs::read_to_string(&binder_log).unwrap_or_default();

    // Pods naming the chart's scheduler are bound, under the chart's leader election.
    let node = scope.add_node("n1", "4", &[]).await;
    for i in 0..3 {
        scope.create(&scope.pod(&format!("p{i}"), "100m")).await;
    }
    let bound = eventually_bound(&scope, 3, &node).await;
    assert!(bound, "the chart's binder bound the pods; its log:\n{}", log());
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(cluster.client.clone(), &scope.ns);
    let holder = leases
        .get(env.get("BINDER_LEASE_NAME").map_or("placement-binder", String::as_str))
        .await
        .ok()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity);
    assert_eq!(holder.as_deref(), Some(identity.as_str()), "the chart's lease held");
    // And their trace reached the chart's collector.
    eventually(
        Duration::from_secs(30),
        "a bound pod's trace at the chart's collector",
        || async { pod_trace(&receiver.spans.lock(), "p0").is_some() },
    )
    .await;

    let _ = binder_process.kill();
    let _ = binder_process.wait();
    scope.cleanup().await;
}

/// Whether `count` pods `p0`… are bound to `node` within [`WAIT`].
async fn eventually_bound(scope: &Scope, count: usize, node: &str) -> bool {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut bound = 0;
        for i in 0..count {
            if let Ok(p) = scope.pods().get(&format!("p{i}")).await {
                if node_of(&p) == Some(node) {
                    bound += 1;
                }
            }
        }
        if bound == count {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
