//! Kueue's topology-aware scheduling through placement, on a real control plane with Kueue itself
//! (issue 46, item 3).
//!
//! Kueue (`sigs.k8s.io/kueue`, built from the Go module proxy by `scripts/kueue.sh`) admits a Job
//! whose pods require one rack, picks the rack and a node per pod (its TAS), holds the pods with
//! the `kueue.x-k8s.io/topology` scheduling gate, then releases each with a
//! `kubernetes.io/hostname` node selector. placement must leave the gated pods alone and bind each
//! released pod exactly on the node Kueue chose: the contract kube-scheduler keeps for Kueue.
//!
//! Needs `E2E_KUBECONFIG` (a cluster whose kube-controller-manager runs the Job controller),
//! `E2E_KUEUE` (the `kueue` binary) and `E2E_KUEUE_CRDS` (the folder of Kueue's CRDs,
//! `config/components/crd/bases` of its module); `scripts/test.sh` builds Kueue and sets both on
//! the control plane of `scripts/e2e-cluster.sh` only (a cluster of your own may run a Kueue
//! already: set them yourself where it does not). Kueue runs out of cluster as a process of the test, with its webhooks and its internal
//! certificate management off: the Job is created suspended with its queue label, as Kueue's
//! webhook would default it. Kueue 0.17 then reads its metrics certificate from the fixed path
//! `/etc/kueue/metrics/certs`; the test writes a self-signed one there when none exists, and says
//! it is skipped when it may not.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use placement_tests::e2e::{
    cluster, kubelet_less_tolerations, node_of, serial, BinderProcess, Scope, Service, RUN_LABEL, WAIT,
};
use placement_tests::fixtures::eventually;
use serde_json::{json, Value};

/// Kueue's scheduling gate for topology-aware scheduling (`kueue.TopologySchedulingGate`).
const TOPOLOGY_GATE: &str = "kueue.x-k8s.io/topology";
/// The rack label of the test's nodes, the upper level of its Kueue Topology.
const RACK: &str = "placement-e2e/rack";
const HOSTNAME: &str = "kubernetes.io/hostname";
/// Kueue 0.17's fixed metrics certificate folder when its internal certificate management is off.
const METRICS_CERTS: &str = "/etc/kueue/metrics/certs";

/// What the test needs from the environment, or why it is skipped.
fn kueue_env(test: &str) -> Option<(PathBuf, PathBuf)> {
    let (Ok(binary), Ok(crds)) = (std::env::var("E2E_KUEUE"), std::env::var("E2E_KUEUE_CRDS")) else {
        eprintln!(
            "e2e {test}: skipped: set E2E_KUEUE to a kueue binary and E2E_KUEUE_CRDS to its CRD folder \
             (scripts/kueue.sh builds both; scripts/test.sh sets them)"
        );
        return None;
    };
    Some((PathBuf::from(binary), PathBuf::from(crds)))
}

/// A self-signed certificate and key written as `tls.crt` and `tls.key` in `dir` (created).
fn write_self_signed(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .map_err(std::io::Error::other)?;
    std::fs::write(dir.join("tls.crt"), cert.cert.pem())?;
    std::fs::write(dir.join("tls.key"), cert.signing_key.serialize_pem())?;
    Ok(())
}

/// Kueue's CRDs applied server-side (idempotent across runs), then waited for until established.
async fn apply_crds(client: &kube::Client, dir: &Path) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read E2E_KUEUE_CRDS {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        for doc in serde_saphyr::from_multiple::<Value>(&text)
            .unwrap_or_else(|e| panic!("{} is not YAML: {e}", file.display()))
        {
            if doc.is_null() {
                continue;
            }
            let crd: CustomResourceDefinition =
                serde_json::from_value(doc).unwrap_or_else(|e| panic!("{}: not a CRD: {e}", file.display()));
            let name = crd.metadata.name.clone().expect("a CRD has a name");
            crds.patch(&name, &PatchParams::apply("placement-e2e").force(), &Patch::Apply(&crd))
                .await
                .unwrap_or_else(|e| panic!("apply the CRD {name}: {e}"));
            names.push(name);
        }
    }
    for name in names {
        eventually(WAIT, &format!("the CRD {name} established"), || async {
            crds.get(&name).await.is_ok_and(|c| {
                c.status
                    .and_then(|s| s.conditions)
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"))
            })
        })
        .await;
    }
}

/// The kueue process, killed when dropped.
struct KueueProcess {
    child: Child,
    log: PathBuf,
}

impl KueueProcess {
    fn start(binary: &Path, kubeconfig: &Path, dir: &Path) -> KueueProcess {
        let health = placement_tests::e2e::free_port();
        let webhook = placement_tests::e2e::free_port();
        let certs = dir.join("webhook-certs");
        write_self_signed(&certs).expect("write the webhook's certificate");
        // Kueue's own Configuration (config.kueue.x-k8s.io/v1beta2): out of cluster, no leader
        // election, no webhooks registered with the API server, Jobs only.
        let config = json!({
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            // Kueue's own namespace, which it never manages Jobs in (its default
            // managedJobsNamespaceSelector leaves it out): not the test's.
            "namespace": "kueue-system",
            "health": {"healthProbeBindAddress": health.to_string()},
            "metrics": {"bindAddress": "0"},
            "webhook": {"port": webhook.port(), "host": "127.0.0.1", "certDir": certs},
            "leaderElection": {"leaderElect": false},
            "internalCertManagement": {"enable": false},
            "integrations": {"frameworks": ["batch/job"]},
        });
        let file = dir.join("kueue-config.json");
        std::fs::write(&file, config.to_string()).expect("write Kueue's configuration");
        let log = dir.join("kueue.log");
        let out = std::fs::File::create(&log).expect("create Kueue's log");
        let child = Command::new(binary)
            .arg(format!("--config={}", file.display()))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            // Its on-demand visibility API server wants a certificate at the fixed path
            // /visibility and an APIService in front of it; the test reads no pending workloads.
            .arg("--feature-gates=VisibilityOnDemand=false")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(out))
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        KueueProcess { child, log }
    }

    /// Waits up to [`WAIT`] for `done`, failing with Kueue's last log lines.
    async fn until<F, Fut>(&self, what: &str, mut done: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let waited = tokio::time::timeout(WAIT, async {
            while !done().await {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
        .await;
        if waited.is_err() {
            panic!(
                "timed out waiting for Kueue: {what}; its log ends:\n{}",
                self.log_tail()
            );
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for KueueProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Kueue object of kind `kind` (v1beta2), namespaced when `ns` is given.
fn kueue_api(client: &kube::Client, kind: &str, plural: &str, ns: Option<&str>) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "kueue.x-k8s.io".into(),
        version: "v1beta2".into(),
        api_version: "kueue.x-k8s.io/v1beta2".into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

async fn create(api: &Api<DynamicObject>, obj: Value) -> String {
    let name = obj["metadata"]["name"].as_str().expect("metadata.name").to_string();
    let obj: DynamicObject = serde_json::from_value(obj).expect("a Kueue object");
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
    name
}

/// Two racks: `ra` of four roomy nodes, `rb` of three nodes with room for one pod each. Kueue's
/// TAS fits the Job of three pods that require one rack into the tightest rack that holds it
/// (`rb`); placement's own scoring (least allocated) would prefer the empty, roomy nodes of `ra`.
/// Every pod must be bound on the node Kueue named in its node selector, after Kueue released it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kueue_admitted_job_is_bound_where_kueues_topology_aware_scheduling_put_it() {
    let test = "a_kueue_admitted_job_is_bound_where_kueues_topology_aware_scheduling_put_it";
    let Some(cluster) = cluster(test).await else {
        return;
    };
    let Some((binary, crd_dir)) = kueue_env(test) else {
        return;
    };
    if !Path::new(METRICS_CERTS).join("tls.crt").exists() {
        if let Err(e) = write_self_signed(Path::new(METRICS_CERTS)) {
            eprintln!(
                "e2e {test}: skipped: Kueue 0.17 without its internal certificate management reads its \
                 metrics certificate from {METRICS_CERTS}, which this user may not write: {e}"
            );
            return;
        }
    }
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "kueue").await;
    let client = cluster.client.clone();
    apply_crds(&client, &crd_dir).await;

    let mut rack_of = BTreeMap::new();
    for i in 0..4 {
        let n = scope.add_node(&format!("ra{i}"), "8", &[(RACK, "ra")]).await;
        rack_of.insert(n, "ra");
    }
    for i in 0..3 {
        let n = scope.add_node(&format!("rb{i}"), "2", &[(RACK, "rb")]).await;
        rack_of.insert(n, "rb");
    }

    let dir = tempfile::tempdir().expect("a temporary folder");
    let kueue = KueueProcess::start(&binary, &cluster.kubeconfig, dir.path());
    let run = scope.run.clone();
    let topology = create(
        &kueue_api(&client, "Topology", "topologies", None),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
               "metadata": {"name": format!("placement-e2e-{run}")},
               "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]}}),
    )
    .await;
    let flavor = create(
        &kueue_api(&client, "ResourceFlavor", "resourceflavors", None),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
               "metadata": {"name": format!("placement-e2e-{run}")},
               "spec": {"nodeLabels": {RUN_LABEL: run}, "topologyName": topology,
                        "tolerations": kubelet_less_tolerations()}}),
    )
    .await;
    let cluster_queues = kueue_api(&client, "ClusterQueue", "clusterqueues", None);
    let cq = create(
        &cluster_queues,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
               "metadata": {"name": format!("placement-e2e-{run}")},
               "spec": {"namespaceSelector": {}, "resourceGroups": [{
                   "coveredResources": ["cpu", "memory"],
                   "flavors": [{"name": flavor, "resources": [
                       {"name": "cpu", "nominalQuota": "100"},
                       {"name": "memory", "nominalQuota": "100Gi"}]}]}]}}),
    )
    .await;
    let local_queues = kueue_api(&client, "LocalQueue", "localqueues", Some(&scope.ns));
    create(
        &local_queues,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
               "metadata": {"name": "main", "namespace": scope.ns},
               "spec": {"clusterQueue": cq}}),
    )
    .await;
    let active = |api: Api<DynamicObject>, name: String| async move {
        api.get(&name).await.is_ok_and(|o| {
            o.data["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Active" && c["status"] == "True"))
        })
    };
    kueue
        .until("its ClusterQueue and LocalQueue active", || async {
            active(cluster_queues.clone(), cq.clone()).await && active(local_queues.clone(), "main".into()).await
        })
        .await;

    let service = Service::start().await;
    let binder = BinderProcess::start(
        &cluster.kubeconfig,
        &scope.scheduler,
        &service.endpoint,
        &format!("{run}-kueue"),
        None,
    );
    // The Job as Kueue's webhook would leave it: suspended, with its queue.
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "trainer", "namespace": scope.ns,
                     "labels": {"kueue.x-k8s.io/queue-name": "main"}},
        "spec": {
            "suspend": true, "parallelism": 3, "completions": 3,
            "template": {
                "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}},
                "spec": {
                    "schedulerName": scope.scheduler,
                    "restartPolicy": "Never",
                    "tolerations": kubelet_less_tolerations(),
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "worker", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "1500m", "memory": "64Mi"}}}]
                }
            }
        }
    }))
    .expect("a Job");
    let jobs: Api<Job> = Api::namespaced(client.clone(), &scope.ns);
    jobs.create(&PostParams::default(), &job).await.expect("create the Job");

    // Kueue admits the Workload and starts the Job with its gate in the pod template.
    let started = tokio::time::timeout(WAIT, async {
        loop {
            if let Ok(j) = jobs.get("trainer").await {
                if j.spec.as_ref().and_then(|s| s.suspend) == Some(false) {
                    return j;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    let Ok(started) = started else {
        let workloads = kueue_api(&client, "Workload", "workloads", Some(&scope.ns));
        let statuses: Vec<Value> = match workloads.list(&ListParams::default()).await {
            Ok(l) => l.items.into_iter().map(|w| w.data["status"].clone()).collect(),
            Err(e) => vec![json!(format!("list: {e}"))],
        };
        panic!(
            "Kueue did not start the Job; its workloads' status: {}; its log ends:\n{}",
            Value::Array(statuses),
            kueue.log_tail()
        );
    };
    let template = started.spec.as_ref().map(|s| &s.template).and_then(|t| t.spec.as_ref());
    assert!(
        template
            .and_then(|s| s.scheduling_gates.as_ref())
            .is_some_and(|g| g.iter().any(|g| g.name == TOPOLOGY_GATE)),
        "Kueue started the Job without the {TOPOLOGY_GATE} gate in its pod template: {template:?}"
    );

    let pods = scope.pods();
    let bound = || async {
        pods.list(&ListParams::default().labels("batch.kubernetes.io/job-name=trainer"))
            .await
            .map(|l| l.items)
            .unwrap_or_default()
    };
    kueue
        .until("the Job's three pods released and bound", || async {
            let items = bound().await;
            items.len() == 3 && items.iter().all(|p| node_of(p).is_some())
        })
        .await;
    let items: Vec<Pod> = bound().await;
    let mut racks = Vec::new();
    for pod in &items {
        let name = pod.metadata.name.as_deref().unwrap_or("?");
        let spec = pod.spec.as_ref().expect("a pod has a spec");
        assert!(
            spec.scheduling_gates.as_ref().is_none_or(|g| g.is_empty()),
            "{name} is bound but still gated: {:?}",
            spec.scheduling_gates
        );
        let chosen = spec
            .node_selector
            .as_ref()
            .and_then(|s| s.get(HOSTNAME))
            .unwrap_or_else(|| panic!("{name} has no {HOSTNAME} selector from Kueue: {:?}", spec.node_selector));
        let node = node_of(pod).expect("bound");
        assert_eq!(node, chosen, "{name} is bound on {node}, Kueue chose {chosen}");
        racks.push(rack_of.get(node).copied().unwrap_or("outside the test's nodes"));
    }
    racks.dedup();
    assert_eq!(
        racks,
        ["rb"],
        "the Job's pods are spread over {racks:?}, not in Kueue's one rack"
    );
    let mut nodes: Vec<&str> = items.iter().filter_map(node_of).collect();
    nodes.sort();
    nodes.dedup();
    assert_eq!(
        nodes.len(),
        3,
        "one pod per node of rack rb (1.5 CPU of 2 each): {nodes:?}"
    );
    eprintln!("e2e {test}: Kueue put the Job in rack rb, one pod per node; placement bound each there");

    drop(binder);
    drop(service);
    // Kueue's objects carry its finalizers: deleted while Kueue runs, and waited for.
    let _ = jobs.delete("trainer", &DeleteParams::background()).await;
    let leftovers = [
        (local_queues.clone(), "main".to_string()),
        (cluster_queues.clone(), cq),
        (kueue_api(&client, "ResourceFlavor", "resourceflavors", None), flavor),
        (kueue_api(&client, "Topology", "topologies", None), topology),
    ];
    for (api, name) in &leftovers {
        let _ = api.delete(name, &DeleteParams::default()).await;
    }
    for (api, name) in &leftovers {
        eventually(WAIT, &format!("Kueue's {name} deleted"), || async {
            matches!(api.get_opt(name).await, Ok(None))
        })
        .await;
    }
    drop(kueue);
    scope.cleanup().await;
}
