//! Support for the end-to-end suite (`tests/tests/e2e.rs`) against a real cluster named by
//! `E2E_KUBECONFIG`: a scope per test (its own namespace, kubelet-less nodes with a label of its
//! own, cleaned up at the end), the binder and the decision service in-process or as real child
//! processes, and waiting helpers.
//!
//! Tests share one cluster: every test selects only its own nodes (`nodeSelector` on its run
//! label) and names a scheduler of its own, so the binders of two tests never place each other's
//! pods. The tests of one binary run one at a time ([`serial`]): kube-scheduler's messages count
//! every node of the cluster, so a comparison needs a node set that holds still.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, PodSpec, ResourceRequirements, Toleration,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceSlice};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use placement_scheduler::grpc::{serve, Metrics, ServerConfig};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::fixtures::quantities;

/// The label every node of a test carries, with the test's run id as value.
pub const RUN_LABEL: &str = "placement-e2e";

/// How long a test waits for the cluster to reach a state before it fails.
pub const WAIT: Duration = Duration::from_secs(90);

/// The real cluster under test, or `None` (after saying the test is skipped) without
/// `E2E_KUBECONFIG`.
pub async fn cluster(test: &str) -> Option<Cluster> {
    let Ok(path) = std::env::var("E2E_KUBECONFIG") else {
        eprintln!("e2e {test}: skipped: set E2E_KUBECONFIG to a kubeconfig file to run the end-to-end suite against a real cluster");
        return None;
    };
    // The in-process decision services decide under the cluster's kube-scheduler's gates.
    placement_scheduler::engine::gates::set_process_default(cluster_gates());
    let kubeconfig = Kubeconfig::read_from(&path).expect("E2E_KUBECONFIG is a readable kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("the kubeconfig is usable");
    let client = kube::Client::try_from(config).expect("a client from the kubeconfig");
    Some(Cluster {
        client,
        kubeconfig: PathBuf::from(path),
    })
}

/// The `KubeSchedulerConfiguration` apiVersion that a kube-scheduler binary reads, from its
/// `--version`: `kubescheduler.config.k8s.io/v1` from 1.25 on (1.29 removed `v1beta3`), `v1beta3`
/// before (1.24's newest).
pub fn kube_scheduler_config_api(binary: &Path) -> Result<&'static str, String> {
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let minor = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v1."))
        .and_then(|rest| rest.split('.').next()?.parse::<u32>().ok())
        .ok_or_else(|| {
            format!(
                "{} --version printed {text:?}, not `Kubernetes v1.N.M`",
                binary.display()
            )
        })?;
    Ok(if minor >= 25 {
        "kubescheduler.config.k8s.io/v1"
    } else {
        "kubescheduler.config.k8s.io/v1beta3"
    })
}

/// Runs the tests of one binary one at a time (held for a whole test).
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// A connection to the cluster under test.
#[derive(Clone)]
pub struct Cluster {
    /// The admin client from `E2E_KUBECONFIG`.
    pub client: kube::Client,
    /// The kubeconfig file it came from (child binders use it too).
    pub kubeconfig: PathBuf,
}

/// A run id unique to this process and call: names namespaces, nodes, schedulers.
pub fn run_id() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{:x}{n}", (std::process::id() ^ nanos) & 0xffffff)
}

/// A Ready, kubelet-less node `placement-e2e-<run>-<suffix>` (see [`Scope::add_node`]).
async fn create_node(client: &kube::Client, run: &str, suffix: &str, cpu: &str, extra: &[(&str, &str)]) -> String {
    let name = format!("placement-e2e-{}-{suffix}", run);
    let mut labels: BTreeMap<String, String> = [
        (RUN_LABEL.to_string(), run.to_string()),
        ("kubernetes.io/hostname".to_string(), name.clone()),
    ]
    .into();
    labels.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let nodes: Api<Node> = Api::all(client.clone());
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(labels),
            ..Default::default()
        },
        ..Default::default()
    };
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create a node");
    let status = serde_json::json!({"status": {
        "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
        "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "kubelet-less test node", "lastHeartbeatTime": now(), "lastTransitionTime": now()}]
    }});
    nodes
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("set the node's status");
    name
}

/// What one test created in the cluster, deleted again by [`Scope::cleanup`].
pub struct Scope {
    /// The cluster.
    pub client: kube::Client,
    /// This test's run id (node label value, name suffix).
    pub run: String,
    /// This test's namespace.
    pub ns: String,
    /// This test's nodes, in creation order.
    pub nodes: Vec<String>,
    /// The scheduler name this test's binders serve.
    pub scheduler: String,
    cluster_objects: Vec<(String, String)>,
}

impl Scope {
    /// Creates the namespace `placement-e2e-<run>` for a test called `test`.
    pub async fn new(cluster: &Cluster, test: &str) -> Scope {
        let run = run_id();
        let ns = format!("placement-e2e-{run}");
        let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(ns.clone()),
                labels: Some([("placement-e2e-test".to_string(), test.replace('_', "-"))].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .expect("create the test's namespace");
        Scope {
            client: cluster.client.clone(),
            scheduler: format!("placement-e2e-{run}"),
            run,
            ns,
            nodes: Vec::new(),
            cluster_objects: Vec::new(),
        }
    }

    /// Pods of this test's namespace.
    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// Creates a Ready, kubelet-less node `<run>-<suffix>` with `cpu` cores, 8Gi and 110 pods,
    /// labelled with the run label, its hostname and `extra` labels.
    pub async fn add_node(&mut self, suffix: &str, cpu: &str, extra: &[(&str, &str)]) -> String {
        let name = create_node(&self.client, &self.run, suffix, cpu, extra).await;
        self.nodes.push(name.clone());
        name
    }

    /// Creates `count` nodes `<run>-n<i>` as [`Scope::add_node`] does, 32 at a time.
    pub async fn add_nodes(&mut self, count: usize, cpu: &str) {
        use futures::StreamExt;
        let client = self.client.clone();
        let run = self.run.clone();
        let names: Vec<String> = futures::stream::iter(0..count)
            .map(|i| {
                let (client, run) = (client.clone(), run.clone());
                async move { create_node(&client, &run, &format!("n{i}"), cpu, &[]).await }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        self.nodes.extend(names);
    }

    /// Remembers a cluster-scoped object (`kind` is its plural resource, e.g. `priorityclasses`)
    /// to delete at cleanup.
    pub fn owns(&mut self, resource: &str, name: &str) {
        self.cluster_objects.push((resource.to_string(), name.to_string()));
    }

    /// Creates a cluster-scoped storage or device object from JSON (`resource`:
    /// `persistentvolumes`, `storageclasses`, `csinodes`, `csidrivers`, `deviceclasses`,
    /// `resourceslices` or `devicetaintrules`), remembered for cleanup; returns its name.
    pub async fn create_storage(&mut self, resource: &str, obj: serde_json::Value) -> String {
        let name = obj["metadata"]["name"].as_str().expect("metadata.name").to_string();
        let pp = PostParams::default();
        let created = match resource {
            "persistentvolumes" => Api::<PersistentVolume>::all(self.client.clone())
                .create(&pp, &serde_json::from_value(obj).expect("a PersistentVolume"))
                .await
                .map(|_| ()),
            "storageclasses" => Api::<StorageClass>::all(self.client.clone())
                .create(&pp, &serde_json::from_value(obj).expect("a StorageClass"))
                .await
                .map(|_| ()),
            "csinodes" => Api::<CSINode>::all(self.client.clone())
                .create(&pp, &serde_json::from_value(obj).expect("a CSINode"))
                .await
                .map(|_| ()),
            "csidrivers" => Api::<CSIDriver>::all(self.client.clone())
                .create(&pp, &serde_json::from_value(obj).expect("a CSIDriver"))
                .await
                .map(|_| ()),
            "deviceclasses" => Api::<DeviceClass>::all(self.client.clone())
                .create(&pp, &serde_json::from_value(obj).expect("a DeviceClass"))
                .await
                .map(|_| ()),
            "resourceslices" => Api::<ResourceSlice>::all(self.client.clone())
                .create(&pp, &serde_json::from_value(obj).expect("a ResourceSlice"))
                .await
                .map(|_| ()),
            "devicetaintrules" => Api::<DeviceTaintRule>::all(self.client.clone())
                .create(&pp, &serde_json::from_value(obj).expect("a DeviceTaintRule"))
                .await
                .map(|_| ()),
            other => panic!("create_storage does not know the resource {other}"),
        };
        created.unwrap_or_else(|e| panic!("create {resource} {name}: {e}"));
        self.owns(resource, &name);
        name
    }

    /// Creates a CSIStorageCapacity of this test's namespace from JSON (deleted with the
    /// namespace) as `resource` (the storage.k8s.io version the API server serves it in).
    pub async fn create_capacity(&self, resource: &kube::api::ApiResource, mut obj: serde_json::Value) {
        obj["apiVersion"] = serde_json::json!(resource.api_version);
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(self.client.clone(), &self.ns, resource);
        api.create(
            &PostParams::default(),
            &serde_json::from_value(obj).expect("a CSIStorageCapacity"),
        )
        .await
        .expect("create a CSIStorageCapacity");
    }

    /// Creates a claim of this test's namespace from JSON (deleted with the namespace).
    pub async fn create_claim(&self, obj: serde_json::Value) -> PersistentVolumeClaim {
        Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &self.ns)
            .create(&PostParams::default(), &serde_json::from_value(obj).expect("a claim"))
            .await
            .expect("create a claim")
    }

    /// A pod of this test (namespace, scheduler, run node selector, kubelet-less tolerations)
    /// requesting `cpu` and 64Mi.
    pub fn pod(&self, name: &str, cpu: &str) -> Pod {
        pod_for(&self.ns, name, &self.scheduler, &self.run, cpu)
    }

    /// Creates `pod` in this test's namespace.
    pub async fn create(&self, pod: &Pod) -> Pod {
        self.pods()
            .create(&PostParams::default(), pod)
            .await
            .unwrap_or_else(|e| panic!("create pod {:?}: {e}", pod.metadata.name))
    }

    /// Deletes everything the test created: pods at once (no kubelet confirms a graceful
    /// deletion), the namespace, the nodes and the cluster-scoped objects.
    pub async fn cleanup(self) {
        let force = DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        let _ = self.pods().delete_collection(&force, &ListParams::default()).await;
        let _ = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &self.ns)
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await;
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let _ = namespaces.delete(&self.ns, &DeleteParams::default()).await;
        let nodes: Api<Node> = Api::all(self.client.clone());
        for n in &self.nodes {
            let _ = nodes.delete(n, &DeleteParams::default()).await;
        }
        for (resource, name) in &self.cluster_objects {
            let dp = DeleteParams::default();
            let _ = match resource.as_str() {
                "priorityclasses" => Api::<PriorityClass>::all(self.client.clone())
                    .delete(name, &dp)
                    .await
                    .map(|_| ()),
                "clusterroles" => Api::<ClusterRole>::all(self.client.clone())
                    .delete(name, &dp)
                    .await
                    .map(|_| ()),
                "clusterrolebindings" => Api::<ClusterRoleBinding>::all(self.client.clone())
                    .delete(name, &dp)
                    .await
                    .map(|_| ()),
                "persistentvolumes" => Api::<PersistentVolume>::all(self.client.clone())
                    .delete(name, &dp)
                    .await
                    .map(|_| ()),
                "storageclasses" => Api::<StorageClass>::all(self.client.clone())
                    .delete(name, &dp)
                    .await
                    .map(|_| ()),
                "csinodes" => Api::<CSINode>::all(self.client.clone())
                    .delete(name, &dp)
                    .await
                    .map(|_| ()),
                "csidrivers" => Api::<CSIDriver>::all(self.client.clone())
                    .delete(name, &dp)
                    .await
                    .map(|_| ()),
                "deviceclasses" => Api::<DeviceClass>::all(self.client.clone())
                    .delete(name, &dp)
                    .await
                    .map(|_| ()),
                "resourceslices" => Api::<ResourceSlice>::all(self.client.clone())
                    .delete(name, &dp)
                    .await
                    .map(|_| ()),
                "devicetaintrules" => Api::<DeviceTaintRule>::all(self.client.clone())
                    .delete(name, &dp)
                    .await
                    .map(|_| ()),
                other => panic!("cleanup does not know the resource {other}"),
            };
        }
    }
}

/// RFC 3339 now, for condition timestamps.
pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

/// Tolerations for the taints a node lifecycle controller puts on nodes without a kubelet (in a
/// cluster that runs one, such as kind's).
pub fn kubelet_less_tolerations() -> Vec<Toleration> {
    ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]
        .iter()
        .map(|k| Toleration {
            key: Some(k.to_string()),
            operator: Some("Exists".into()),
            ..Default::default()
        })
        .collect()
}

/// A one-container pod in `ns` naming `scheduler`, selecting the nodes of run `run`, requesting
/// `cpu` and 64Mi.
pub fn pod_for(ns: &str, name: &str, scheduler: &str, run: &str, cpu: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some(scheduler.into()),
            node_selector: Some([(RUN_LABEL.to_string(), run.to_string())].into()),
            tolerations: Some(kubelet_less_tolerations()),
            termination_grace_period_seconds: Some(30),
            containers: vec![Container {
                name: "app".into(),
                image: Some("registry.k8s.io/pause:3.10".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(quantities(&[("cpu", cpu), ("memory", "64Mi")])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The node a pod is bound to.
pub fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

/// The pod's `PodScheduled` condition, if any.
pub fn scheduled_condition(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")
}

/// True when the pod has `PodScheduled=False`.
pub fn marked_unschedulable(pod: &Pod) -> bool {
    scheduled_condition(pod).is_some_and(|c| c.status == "False")
}

/// The feature gates of the cluster's kube-scheduler: `E2E_FEATURE_GATES` (kube's
/// `--feature-gates` format; scripts/e2e-cluster.sh sets it to the gates it started the control
/// plane with), else placement's defaults.
pub fn cluster_gates() -> placement_scheduler::engine::gates::FeatureGates {
    let spec = std::env::var("E2E_FEATURE_GATES").unwrap_or_default();
    placement_scheduler::engine::gates::FeatureGates::PLACEMENT_DEFAULT
        .with(&spec)
        .unwrap_or_else(|e| panic!("E2E_FEATURE_GATES={spec:?}: {e}"))
}

/// A decision service bound to 127.0.0.1:0 in this process, stopped when dropped.
pub struct Service {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    stop: Option<oneshot::Sender<()>>,
}

impl Service {
    /// Starts the service on a runtime of the caller's.
    pub async fn start() -> Service {
        Self::start_with(ServerConfig::default()).await
    }

    /// Starts the service with this configuration on a runtime of the caller's.
    pub async fn start_with(config: ServerConfig) -> Service {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a free port");
        let endpoint = format!("http://{}", listener.local_addr().expect("a local address"));
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(serve(listener, config, Arc::new(Metrics::new()), async {
            let _ = stopped.await;
        }));
        Service {
            endpoint,
            stop: Some(stop),
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A workspace binary built beside the test executable (`target/<profile>/<name>`).
pub fn workspace_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    // target/<profile>/deps/<test>-<hash> -> target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test executable lives in target/<profile>/deps");
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} not found: build the workspace's binaries first (cargo build --bins; `cargo test --workspace` does)",
        path.display()
    );
    path
}

/// A free port on 127.0.0.1.
pub fn free_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("a local address")
}

/// A `binder-agent run` child process, killed (SIGKILL) when dropped; its log goes to a file.
pub struct BinderProcess {
    child: Child,
    /// Its `--identity`.
    pub identity: String,
    /// Its `/healthz`, `/readyz`, `/metrics` address.
    pub http: SocketAddr,
    /// Its stderr log.
    pub log: PathBuf,
}

impl BinderProcess {
    /// Starts `binder-agent run` with `kubeconfig`, serving `scheduler` through `decision`, with
    /// leader election on the Lease `lease` in `lease_ns` (short terms) when `lease` is given.
    pub fn start(
        kubeconfig: &Path,
        scheduler: &str,
        decision: &str,
        identity: &str,
        lease: Option<(&str, &str)>,
    ) -> BinderProcess {
        Self::start_with_args(kubeconfig, scheduler, decision, identity, lease, &[], &[])
    }

    /// [`BinderProcess::start`] with more arguments for `binder-agent run` and more environment.
    pub fn start_with_args(
        kubeconfig: &Path,
        scheduler: &str,
        decision: &str,
        identity: &str,
        lease: Option<(&str, &str)>,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> BinderProcess {
        let http = free_port();
        let log = std::env::temp_dir().join(format!("placement-e2e-binder-{identity}.log"));
        let file = std::fs::File::create(&log).expect("create the binder's log file");
        let mut cmd = Command::new(workspace_binary("binder-agent"));
        cmd.arg("run")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--scheduler-name", scheduler])
            .args(["--reporting-controller", scheduler])
            .args(["--decision-endpoints", decision])
            .args(["--http-listen", &http.to_string()])
            .args(["--identity", identity])
            .args(extra)
            .envs(env.iter().copied())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(file));
        match lease {
            Some((ns, name)) => {
                cmd.args(["--lease-namespace", ns, "--lease-name", name]).args([
                    "--lease-duration-secs",
                    "4",
                    "--lease-grace-secs",
                    "2",
                ]);
            }
            None => {
                cmd.arg("--leader-elect=false");
            }
        }
        let child = cmd.spawn().expect("start binder-agent");
        BinderProcess {
            child,
            identity: identity.to_string(),
            http,
            log,
        }
    }

    /// Kills the process at once (SIGKILL: no lease release, no draining).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// One sample of its `/metrics` (e.g. `binder_binds_total{result="ok"}`): `None` while it
    /// does not answer, 0 for a series it has not written.
    pub async fn metric(&self, series: &str) -> Option<f64> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(self.http).await.ok()?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nhost: binder\r\nconnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).await.ok()?;
        let (head, body) = out.split_once("\r\n\r\n")?;
        if head.split_whitespace().nth(1) != Some("200") {
            return None;
        }
        Some(
            body.lines()
                .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
                .unwrap_or(0.0),
        )
    }

    /// The log written so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for BinderProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
