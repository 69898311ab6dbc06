//! `cluster-bench`: placement against kube-scheduler and against the raw Binding ceiling, on one
//! real control plane, in one run, on the same shapes.
//!
//! `cluster-bench run --kubeconfig K --nodes N --pods M` creates N Ready Nodes (plain objects:
//! no kubelet needed) and, for each contender in turn, M pending pods in a namespace of its own,
//! then starts the contender and times it from its start until every pod is bound:
//!
//! - `placement`: `scheduler-service` and `binder-agent run` as two processes (pass release
//!   builds with `--service-bin` / `--binder-bin`);
//! - `kube-scheduler`: the binary given with `--kube-scheduler-bin`, started with a
//!   KubeSchedulerConfiguration that lifts the client rate limit (qps and burst 100,000) and a
//!   profile of its own scheduler name (so a cluster's own kube-scheduler is not disturbed);
//! - `raw`: parallel Binding POSTs with no decisions (pod i to node i mod N), the most binds per
//!   second the control plane takes from this client; `raw-events` also writes each pod's
//!   `Scheduled` event, as both schedulers do.
//!
//! It prints pods/s, the wait of each pod from the later of its creation and the contender's start
//! until the binding was seen (p50/p99), API requests per pod (the API server's
//! `apiserver_request_total`, every verb and resource), watch events and bytes the API server sent
//! per pod, and CPU seconds per 1,000 pods of the contender's processes and of the API server
//! (`process_cpu_seconds_total` of its `/metrics`) and etcd (`--etcd-metrics-url`). Requests and
//! CPU cover the contender's whole work: from its start until every pod is bound and its
//! `Scheduled` events are written (or none came for 5 s). With `--paced-pods P --paced-rate R` each
//! scheduler then also gets P more pods created at R pods/s while it runs, and the creation→bound
//! latency of those is printed (p50/p99).
//!
//! Between contenders the pods and events are deleted (grace period 0), so each sees empty nodes.
//! Everything it made is deleted at the end (`--keep-nodes` keeps the nodes for the next run).
//! Its pods select the bench nodes (label `placement-bench`) and tolerate the taints a node
//! lifecycle controller puts on kubelet-less nodes, so it can run on a real cluster too.
//!
//! `--workload dra` gives every node a ResourceSlice of GPU-like devices and every pod a claim of
//! 1 to 4 of them; `--workload podgroups` puts the nodes in racks and the pods in gang PodGroups
//! confined to one rack (`workload.rs`). Either checks afterwards what each contender bound.

mod workload;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use clap::{Parser, Subcommand, ValueEnum};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Binding, Event, Namespace, NamespaceSpec, Node, ObjectReference, Pod};
use k8s_openapi::api::events::v1::Event as EventV1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::{self, watcher};
use kube::Client;
use parking_lot::Mutex;
use placement_scheduler::procstat::Proc;
use serde::Serialize;
use serde_json::json;
use tokio::sync::Notify;
use workload::{BenchPod, Checks, PlanEntry, Shape, Workload};

/// Label on the bench's nodes; its pods select it.
const NODE_LABEL: &str = "placement-bench";

/// Placement and kube-scheduler against the raw Binding ceiling on a real control plane.
#[derive(Debug, Parser)]
#[command(about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

// Parsed once at start-up; boxing a variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Cmd {
    /// Create the nodes, then run each contender on the same pods and print the table.
    Run(RunArgs),
    /// (internal) Bind pods `p-*` of a namespace round-robin to the bench nodes (or as a plan
    /// says, after the pod's claim writes), in parallel, and print the CPU time this process used.
    #[command(hide = true)]
    RawBind(RawArgs),
}

/// Who schedules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Contender {
    /// Parallel Binding POSTs, no decisions.
    Raw,
    /// Parallel Binding POSTs plus each pod's `Scheduled` event, no decisions.
    RawEvents,
    /// kube-scheduler, started by the bench.
    KubeScheduler,
    /// scheduler-service and binder-agent, started by the bench.
    Placement,
    /// placement again with `--alt-binder-arg` flags: two binder configurations in one run.
    PlacementAlt,
}

impl Contender {
    fn name(self) -> &'static str {
        match self {
            Contender::Raw => "raw",
            Contender::RawEvents => "raw-events",
            Contender::KubeScheduler => "kube-scheduler",
            Contender::Placement => "placement",
            Contender::PlacementAlt => "placement-alt",
        }
    }

    /// `Scheduled` events expected per bound pod.
    fn writes_events(self) -> bool {
        self != Contender::Raw
    }
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Admin kubeconfig of the control plane (may create Nodes, Namespaces, Pods, Bindings).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// The bench's own client over HTTP/2, as the binders it starts (they read the same variable)
    /// and the raw contenders (which inherit it).
    #[arg(long, env = "BINDER_API_HTTP2")]
    api_http2: bool,
    /// Ready nodes to create.
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    /// Pending pods each contender binds (`--workload podgroups`: ignored, the groups' members).
    #[arg(long, default_value_t = 5000)]
    pods: usize,
    /// What each pod asks for: `plain` (100m CPU, 128Mi), `dra` (also a ResourceClaim of 1-4
    /// devices; needs kube-controller-manager's resourceclaim controller) or `podgroups` (gang
    /// PodGroups of 8-64 pods, each in one rack; needs the Workload API, `scheduling.k8s.io/v1beta1`).
    #[arg(long, value_enum, default_value = "plain")]
    workload: Workload,
    /// `--workload dra`: devices in each node's ResourceSlice.
    #[arg(long, default_value_t = 8)]
    devices_per_node: usize,
    /// `--workload podgroups`: PodGroups per contender (8 to 64 pods each).
    #[arg(long, default_value_t = 1000)]
    groups: usize,
    /// `--workload podgroups`: nodes per rack (label `rack`).
    #[arg(long, default_value_t = 20)]
    rack_nodes: usize,
    /// When the API server does not serve what `--workload` needs, say so and exit 0 (smoke runs).
    #[arg(long)]
    skip_unserved: bool,
    /// Contenders, in the order they run.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "raw,kube-scheduler,placement"
    )]
    contenders: Vec<Contender>,
    /// The `scheduler-service` binary; by default the one next to this executable.
    #[arg(long)]
    service_bin: Option<PathBuf>,
    /// The `binder-agent` binary; by default the one next to this executable.
    #[arg(long)]
    binder_bin: Option<PathBuf>,
    /// Extra flag for `binder-agent run` (repeatable), e.g. `--binder-arg=--bind-concurrency=128`.
    #[arg(long = "binder-arg", allow_hyphen_values = true)]
    binder_args: Vec<String>,
    /// Extra flag for the binder of the `placement-alt` contender (repeatable).
    #[arg(long = "alt-binder-arg", allow_hyphen_values = true)]
    alt_binder_args: Vec<String>,
    /// The `kube-scheduler` binary (needed for the kube-scheduler contender).
    #[arg(long)]
    kube_scheduler_bin: Option<PathBuf>,
    /// Kubeconfig kube-scheduler uses (default: `--kubeconfig`).
    #[arg(long)]
    kube_scheduler_kubeconfig: Option<PathBuf>,
    /// Extra flag for kube-scheduler (repeatable).
    #[arg(long = "kube-scheduler-arg", allow_hyphen_values = true)]
    kube_scheduler_args: Vec<String>,
    /// etcd's plain-HTTP metrics URL (e.g. `http://127.0.0.1:2379/metrics`), for its CPU time.
    #[arg(long)]
    etcd_metrics_url: Option<String>,
    /// Binding POSTs in flight at once for the raw contenders.
    #[arg(long, default_value_t = 64)]
    raw_concurrency: usize,
    /// Pods created at `--paced-rate` while each scheduler runs, after its backlog, for the
    /// creation→bound latency (0: no paced phase).
    #[arg(long, default_value_t = 0)]
    paced_pods: usize,
    /// Pods per second of the paced phase.
    #[arg(long, default_value_t = 100.0)]
    paced_rate: f64,
    /// Length of each of the three windows in which the API server's and etcd's idle CPU is
    /// measured before the first contender (the least is subtracted); 0: not measured.
    #[arg(long, default_value_t = 4)]
    idle_window_secs: u64,
    /// Prefix of the nodes' and namespaces' names (and value of their `placement-bench` label).
    #[arg(long, default_value = "bench")]
    prefix: String,
    /// Requests in flight at once while creating nodes and pods.
    #[arg(long, default_value_t = 32)]
    setup_concurrency: usize,
    /// Most seconds one contender may take to bind its pods.
    #[arg(long, default_value_t = 900)]
    timeout_secs: u64,
    /// Keep the nodes at the end (a next run with the same prefix and node count reuses them).
    #[arg(long)]
    keep_nodes: bool,
    /// Where the contenders' logs go (default: a new folder under the temporary directory).
    #[arg(long)]
    log_dir: Option<PathBuf>,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct RawArgs {
    #[arg(long)]
    kubeconfig: PathBuf,
    /// The binder's transport over HTTP/2, so the raw ceiling goes over placement's protocol.
    #[arg(long, env = "BINDER_API_HTTP2")]
    api_http2: bool,
    #[arg(long)]
    namespace: String,
    #[arg(long)]
    pods: usize,
    #[arg(long)]
    nodes: usize,
    #[arg(long)]
    prefix: String,
    #[arg(long)]
    concurrency: usize,
    /// Also write each pod's `Scheduled` event.
    #[arg(long)]
    events: bool,
    /// Each pod's node and claim allocation (JSON, `workload::PlanEntry`), instead of pod i on
    /// node i mod N.
    #[arg(long)]
    plan: Option<PathBuf>,
}

async fn client(path: &Path, http2: bool) -> anyhow::Result<Client> {
    let kc = Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading {}", path.display()))?;
    config.read_timeout = Some(Duration::from_secs(300));
    // The binder's transport: the raw ceiling goes over the same protocol as placement.
    let protocols = placement_binder::kube_api::transport::Protocols::http2_if(http2);
    placement_binder::kube_api::transport::client(config, protocols).context("building the Kubernetes client")
}

fn node_name(prefix: &str, i: usize) -> String {
    format!("{prefix}-node-{i:05}")
}

fn pod_name(i: usize) -> String {
    format!("p-{i:05}")
}

/// A bench pod: one container requesting 100m CPU and 128Mi, selecting the bench nodes.
fn bench_pod(name: &str, scheduler: &str, prefix: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(bench_pod_json(name, scheduler, prefix))?)
}

/// [`bench_pod`] as JSON.
fn bench_pod_json(name: &str, scheduler: &str, prefix: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {
            "schedulerName": scheduler,
            "nodeSelector": {NODE_LABEL: prefix},
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists"},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists"}
            ],
            "containers": [{
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}
            }]
        }
    })
}

/// The run's shape, as its flags give it.
fn shape(args: &RunArgs) -> Shape {
    Shape {
        workload: args.workload,
        prefix: args.prefix.clone(),
        nodes: args.nodes,
        pods: args.pods,
        devices_per_node: args.devices_per_node,
        groups: args.groups,
        rack_nodes: args.rack_nodes,
    }
}

/// The Binding kube-scheduler's DefaultBinder posts.
fn binding(namespace: &str, pod: &str, node: &str) -> Binding {
    Binding {
        metadata: ObjectMeta {
            name: Some(pod.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.into()),
            ..Default::default()
        },
    }
}

/// Creates the nodes (or finds them) and makes each Ready with 32 CPUs, 128Gi and 110 pods.
async fn create_nodes(client: &Client, args: &RunArgs) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let shape = &shape(args);
    let status = json!({"status": {
        "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
        "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "bench node"}]
    }});
    futures::stream::iter(0..args.nodes)
        .map(|i| {
            let nodes = nodes.clone();
            let status = &status;
            async move {
                let name = node_name(&args.prefix, i);
                let mut node = json!({
                    "metadata": {"name": name, "labels": {
                        NODE_LABEL: args.prefix,
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        "topology.kubernetes.io/zone": format!("zone-{}", i % 3)
                    }}
                });
                for (k, v) in shape.node_labels(i) {
                    node["metadata"]["labels"][k] = json!(v);
                }
                let node: Node = serde_json::from_value(node)?;
                match nodes.create(&PostParams::default(), &node).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => return Err(anyhow::Error::new(e).context(format!("creating node {name}"))),
                }
                nodes
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
                    .await
                    .with_context(|| format!("making node {name} Ready"))?;
                Ok::<_, anyhow::Error>(())
            }
        })
        .buffer_unordered(args.setup_concurrency.max(1))
        .try_collect::<()>()
        .await
}

/// Deletes the bench nodes.
async fn delete_nodes(client: &Client, prefix: &str) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(&format!("{NODE_LABEL}={prefix}")),
        )
        .await?;
    Ok(())
}

/// The namespace exists and holds no pods, no events and none of the workload's objects.
async fn fresh_namespace(client: &Client, ns: &str, shape: &Shape) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if let Some(old) = namespaces.get_opt(ns).await? {
        if old.metadata.deletion_timestamp.is_some() {
            delete_namespace(client, ns, shape).await?;
        }
    }
    let body: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))?;
    match namespaces.create(&PostParams::default(), &body).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(anyhow::Error::new(e).context(format!("creating namespace {ns}"))),
    }
    empty_namespace(client, ns, shape).await
}

/// Empties and deletes the namespace and waits until it is gone. Without a namespace controller
/// (a bare control plane) nobody would remove its `kubernetes` finalizer: after a few seconds the
/// bench removes it itself, as that controller does once the namespace is empty.
async fn delete_namespace(client: &Client, ns: &str, shape: &Shape) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(ns).await?.is_none() {
        return Ok(());
    }
    empty_namespace(client, ns, shape).await?;
    match namespaces.delete(ns, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => return Err(anyhow::Error::new(e).context(format!("deleting namespace {ns}"))),
    }
    let gone = |limit: Duration| {
        let namespaces = namespaces.clone();
        async move {
            let deadline = Instant::now() + limit;
            while Instant::now() < deadline {
                if namespaces.get_opt(ns).await?.is_none() {
                    return Ok::<_, anyhow::Error>(true);
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Ok(false)
        }
    };
    if gone(Duration::from_secs(5)).await? {
        return Ok(());
    }
    // A namespace controller (when one runs) updates the namespace meanwhile: a 409 means the
    // read was stale, so read it again and retry.
    for attempt in 1..=5 {
        let Some(mut n) = namespaces.get_opt(ns).await? else {
            break;
        };
        n.spec = Some(NamespaceSpec {
            finalizers: Some(Vec::new()),
        });
        match namespaces
            .replace_subresource("finalize", ns, &PostParams::default(), &n)
            .await
        {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 404 => break,
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < 5 => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(anyhow::Error::new(e).context(format!("finalizing namespace {ns}"))),
        }
    }
    ensure!(
        gone(Duration::from_secs(30)).await?,
        "namespace {ns} still there after 35 s"
    );
    Ok(())
}

/// Deletes every pod (grace period 0) and event of `ns` and waits until no pod is left, then the
/// workload's objects (claims, PodGroups).
async fn empty_namespace(client: &Client, ns: &str, shape: &Shape) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    workload::delete_collection(&pods, &now, &format!("the pods of {ns}")).await?;
    workload::delete_collection(&events, &DeleteParams::default(), &format!("the events of {ns}")).await?;
    // Tens of thousands of pods take minutes to go.
    let deadline = Instant::now() + Duration::from_secs(1800);
    while !pods
        .list_metadata(&ListParams::default().limit(1))
        .await?
        .items
        .is_empty()
    {
        ensure!(Instant::now() < deadline, "pods of {ns} still there after 1800 s");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    shape.clean_namespace(client, ns).await
}

/// Creates pods `bench` naming `scheduler` in `ns`.
async fn create_pods(
    client: &Client,
    ns: &str,
    bench: &[BenchPod],
    scheduler: &str,
    shape: &Shape,
    concurrency: usize,
) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    futures::stream::iter(bench)
        .map(|p| {
            let pods = pods.clone();
            async move {
                let mut pod = bench_pod_json(&p.name, scheduler, &shape.prefix);
                shape.decorate(p, &mut pod);
                let pod: Pod = serde_json::from_value(pod)?;
                pods.create(&PostParams::default(), &pod)
                    .await
                    .with_context(|| format!("creating pod {ns}/{}", p.name))?;
                Ok::<_, anyhow::Error>(())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<()>()
        .await
}

/// What the watches of one namespace saw: when each pod was first seen bound, and how many events
/// exist.
#[derive(Default)]
struct Seen {
    bound: HashMap<String, Instant>,
    events: HashSet<String>,
    last_event: Option<Instant>,
    pods_listed: bool,
    events_listed: bool,
}

/// Watches a namespace's bound pods (field selector `spec.nodeName!=`) and events, metadata only
/// (the same cost to the API server whoever binds: no shared watch-cache serialization).
struct Watches {
    seen: Arc<Mutex<Seen>>,
    changed: Arc<Notify>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Watches {
    async fn start(client: &Client, ns: &str) -> anyhow::Result<Self> {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let changed = Arc::new(Notify::new());
        let pods: Api<PartialObjectMeta<Pod>> = Api::namespaced(client.clone(), ns);
        let events: Api<PartialObjectMeta<Event>> = Api::namespaced(client.clone(), ns);
        let pod_task = {
            let (seen, changed) = (Arc::clone(&seen), Arc::clone(&changed));
            tokio::spawn(async move {
                let stream = watcher(pods, watcher::Config::default().fields("spec.nodeName!="));
                let mut stream = std::pin::pin!(stream);
                while let Some(e) = stream.next().await {
                    let now = Instant::now();
                    match e {
                        Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                            if let Some(name) = p.metadata.name {
                                seen.lock().bound.entry(name).or_insert(now);
                            }
                        }
                        Ok(watcher::Event::InitDone) => seen.lock().pods_listed = true,
                        Ok(_) => continue,
                        Err(e) => eprintln!("cluster-bench: pod watch: {e}"),
                    }
                    changed.notify_waiters();
                }
            })
        };
        let event_task = {
            let (seen, changed) = (Arc::clone(&seen), Arc::clone(&changed));
            tokio::spawn(async move {
                let stream = watcher(events, watcher::Config::default());
                let mut stream = std::pin::pin!(stream);
                while let Some(e) = stream.next().await {
                    match e {
                        Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                            if let Some(name) = p.metadata.name {
                                let mut s = seen.lock();
                                if s.events.insert(name) {
                                    s.last_event = Some(Instant::now());
                                }
                            }
                        }
                        Ok(watcher::Event::InitDone) => seen.lock().events_listed = true,
                        Ok(_) => continue,
                        Err(e) => eprintln!("cluster-bench: event watch: {e}"),
                    }
                    changed.notify_waiters();
                }
            })
        };
        let w = Self {
            seen,
            changed,
            tasks: vec![pod_task, event_task],
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !{
            let s = w.seen.lock();
            s.pods_listed && s.events_listed
        } {
            ensure!(
                Instant::now() < deadline,
                "the watches of {ns} did not start within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(w)
    }

    fn bound(&self) -> usize {
        self.seen.lock().bound.len()
    }

    fn events(&self) -> usize {
        self.seen.lock().events.len()
    }

    /// Waits for a change, at most `d`.
    async fn wait(&self, d: Duration) {
        let _ = tokio::time::timeout(d, self.changed.notified()).await;
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// One Prometheus sample.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses the Prometheus text format, keeping the metric families in `keep`.
fn parse_metrics(text: &str, keep: &[&str]) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (name_labels, value) = match line.rsplit_once(' ') {
            Some(x) => x,
            None => continue,
        };
        let Ok(value) = value.parse::<f64>() else { continue };
        let (name, labels) = match name_labels.find('{') {
            Some(i) => (
                &name_labels[..i],
                &name_labels[i + 1..name_labels.len().saturating_sub(1)],
            ),
            None => (name_labels, ""),
        };
        if !keep.contains(&name) {
            continue;
        }
        let mut map = BTreeMap::new();
        for pair in split_labels(labels) {
            if let Some((k, v)) = pair.split_once('=') {
                map.insert(k.to_string(), v.trim_matches('"').to_string());
            }
        }
        out.push(Sample {
            name: name.to_string(),
            labels: map,
            value,
        });
    }
    out
}

/// Splits `a="x",b="y,z"` at the commas outside quotes.
fn split_labels(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < s.len() {
        parts.push(&s[start..]);
    }
    parts
}

const APISERVER_METRICS: &[&str] = &[
    "apiserver_request_total",
    "apiserver_watch_events_total",
    "apiserver_watch_events_sizes_sum",
    "process_cpu_seconds_total",
];
const ETCD_METRICS: &[&str] = &[
    "process_cpu_seconds_total",
    "etcd_network_client_grpc_received_bytes_total",
    "etcd_disk_wal_fsync_duration_seconds_count",
    "etcd_mvcc_put_total",
];

/// The API server's and etcd's metrics at one moment.
#[derive(Debug, Clone, Default)]
struct Scrape {
    apiserver: Vec<Sample>,
    etcd: Option<Vec<Sample>>,
}

/// `GET url` over plain HTTP/1.0 (etcd's metrics); `http://host:port/path` only.
fn http_get(url: &str) -> anyhow::Result<String> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("{url}: only http:// URLs"))?;
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let addr: SocketAddr = std::net::ToSocketAddrs::to_socket_addrs(host)?
        .next()
        .with_context(|| format!("{url}: no address"))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n")?;
    let mut body = String::new();
    s.read_to_string(&mut body)?;
    let (head, body) = body.split_once("\r\n\r\n").context("no HTTP header")?;
    ensure!(head.contains(" 200 "), "{url}: {}", head.lines().next().unwrap_or(""));
    Ok(body.to_string())
}

async fn scrape(client: &Client, etcd_url: Option<&str>) -> anyhow::Result<Scrape> {
    let req = http::Request::get("/metrics").body(Vec::new())?;
    let text = client
        .request_text(req)
        .await
        .context("reading the API server's /metrics")?;
    let etcd = match etcd_url {
        Some(url) => {
            let url = url.to_string();
            let text = tokio::task::spawn_blocking(move || http_get(&url)).await??;
            Some(parse_metrics(&text, ETCD_METRICS))
        }
        None => None,
    };
    Ok(Scrape {
        apiserver: parse_metrics(&text, APISERVER_METRICS),
        etcd,
    })
}

fn series_key(s: &Sample) -> String {
    format!("{}{:?}", s.name, s.labels)
}

/// `after - before`, series by series.
fn delta(before: &[Sample], after: &[Sample]) -> Vec<Sample> {
    let old: HashMap<String, f64> = before.iter().map(|s| (series_key(s), s.value)).collect();
    after
        .iter()
        .map(|s| Sample {
            value: s.value - old.get(&series_key(s)).copied().unwrap_or(0.0),
            ..s.clone()
        })
        .filter(|s| s.value != 0.0)
        .collect()
}

fn sum(samples: &[Sample], name: &str) -> f64 {
    samples.iter().filter(|s| s.name == name).map(|s| s.value).sum()
}

/// Sums of `name` by the value of `by(labels)`.
fn grouped(samples: &[Sample], name: &str, by: impl Fn(&BTreeMap<String, String>) -> String) -> Vec<(String, f64)> {
    let mut m: BTreeMap<String, f64> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.name == name) {
        *m.entry(by(&s.labels)).or_default() += s.value;
    }
    let mut v: Vec<(String, f64)> = m.into_iter().collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1));
    v
}

fn request_kind(l: &BTreeMap<String, String>) -> String {
    let get = |k: &str| l.get(k).map(String::as_str).unwrap_or("");
    let resource = match (get("resource"), get("subresource")) {
        ("", sub) => sub.to_string(),
        (r, "") => r.to_string(),
        (r, s) => format!("{r}/{s}"),
    };
    format!("{} {resource} {}", get("verb"), get("code"))
}

/// CPU the API server and etcd use while nobody schedules (cores), measured before the first
/// contender and subtracted from each contender's window.
#[derive(Debug, Clone, Copy, Serialize)]
struct Idle {
    apiserver: f64,
    etcd: Option<f64>,
}

/// The idle rate: after `settle`, the least of three windows of `window` (the API server and etcd
/// finish work of their own, such as compactions, at times of their choosing).
async fn measure_idle(
    client: &Client,
    etcd_url: Option<&str>,
    settle: Duration,
    window: Duration,
) -> anyhow::Result<Idle> {
    tokio::time::sleep(settle).await;
    let mut idle: Option<Idle> = None;
    for _ in 0..3 {
        let before = scrape(client, etcd_url).await?;
        let t = Instant::now();
        tokio::time::sleep(window).await;
        let after = scrape(client, etcd_url).await?;
        let secs = t.elapsed().as_secs_f64();
        let cpu = |b: &[Sample], a: &[Sample]| sum(&delta(b, a), "process_cpu_seconds_total") / secs;
        let this = Idle {
            apiserver: cpu(&before.apiserver, &after.apiserver),
            etcd: match (&before.etcd, &after.etcd) {
                (Some(b), Some(a)) => Some(cpu(b, a)),
                _ => None,
            },
        };
        let total = |i: &Idle| i.apiserver + i.etcd.unwrap_or(0.0);
        if idle.as_ref().is_none_or(|i| total(&this) < total(i)) {
            idle = Some(this);
        }
    }
    idle.context("no idle window")
}

/// API server and etcd CPU seconds between two scrapes `secs` apart, less the idle rate.
fn net_cpu(before: &Scrape, after: &Scrape, idle: Idle, secs: f64) -> (f64, Option<f64>) {
    let api = sum(&delta(&before.apiserver, &after.apiserver), "process_cpu_seconds_total") - idle.apiserver * secs;
    let etcd = match (&before.etcd, &after.etcd) {
        (Some(b), Some(a)) => Some(sum(&delta(b, a), "process_cpu_seconds_total") - idle.etcd.unwrap_or(0.0) * secs),
        _ => None,
    };
    (api, etcd)
}

/// A process the bench started; killed when dropped.
struct Proc2 {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Proc2 {
    fn spawn(name: &str, cmd: &mut Command, log_dir: &Path) -> anyhow::Result<Self> {
        let log = log_dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("starting {name} ({:?})", cmd.get_program()))?;
        Ok(Self {
            name: name.to_string(),
            child,
            log,
        })
    }

    fn cpu(&self) -> f64 {
        Proc::Pid(self.child.id()).cpu().map_or(0.0, |d| d.as_secs_f64())
    }

    /// An error naming the process and the end of its log if it exited.
    fn check(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!("{} exited ({status}); its log ends:\n{}", self.name, tail.join("\n"));
        }
        Ok(())
    }
}

impl Drop for Proc2 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> anyhow::Result<SocketAddr> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("binding a free port")?;
    Ok(l.local_addr()?)
}

fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    Ok(std::env::current_exe()?.with_file_name(format!("{name}{}", std::env::consts::EXE_SUFFIX)))
}

fn existing(flag: &str, given: &Option<PathBuf>, default: &str) -> anyhow::Result<PathBuf> {
    let p = match given {
        Some(p) => p.clone(),
        None => sibling(default)?,
    };
    ensure!(p.exists(), "{flag}: {} not found", p.display());
    Ok(p)
}

/// The scheduler name pods of `c` carry.
fn scheduler_name(c: Contender, prefix: &str) -> String {
    match c {
        Contender::Placement => format!("{prefix}-placement"),
        Contender::PlacementAlt => format!("{prefix}-placement-alt"),
        Contender::KubeScheduler => format!("{prefix}-kube-scheduler"),
        // Nobody schedules these: the raw binder binds them.
        Contender::Raw | Contender::RawEvents => format!("{prefix}-nobody"),
    }
}

/// A started contender: its processes, and the binder's metrics address for placement.
struct Started {
    procs: Vec<Proc2>,
    binder_http: Option<SocketAddr>,
}

/// Starts contender `c` (a raw one binds by `plan` when given).
fn start(c: Contender, args: &RunArgs, ns: &str, log_dir: &Path, plan: Option<&Path>) -> anyhow::Result<Started> {
    let kubeconfig = args.kubeconfig.display().to_string();
    match c {
        Contender::Raw | Contender::RawEvents => {
            let mut cmd = Command::new(std::env::current_exe()?);
            cmd.args(["raw-bind", "--kubeconfig", &kubeconfig, "--namespace", ns])
                .args(["--pods", &args.pods.to_string(), "--nodes", &args.nodes.to_string()])
                .args([
                    "--prefix",
                    &args.prefix,
                    "--concurrency",
                    &args.raw_concurrency.to_string(),
                ]);
            if c == Contender::RawEvents {
                cmd.arg("--events");
            }
            if let Some(plan) = plan {
                cmd.arg("--plan").arg(plan);
            }
            Ok(Started {
                procs: vec![Proc2::spawn(c.name(), &mut cmd, log_dir)?],
                binder_http: None,
            })
        }
        Contender::KubeScheduler => {
            let bin = args
                .kube_scheduler_bin
                .clone()
                .context("--kube-scheduler-bin is needed for the kube-scheduler contender")?;
            let kc = args
                .kube_scheduler_kubeconfig
                .clone()
                .unwrap_or_else(|| args.kubeconfig.clone())
                .display()
                .to_string();
            let config = log_dir.join("kube-scheduler-config.yaml");
            let api = placement_tests::e2e::kube_scheduler_config_api(&bin).map_err(anyhow::Error::msg)?;
            std::fs::write(
                &config,
                format!(
                    "apiVersion: {api}\nkind: KubeSchedulerConfiguration\n\
                     clientConnection:\n  kubeconfig: {kc:?}\n  qps: 100000\n  burst: 100000\n\
                     leaderElection:\n  leaderElect: false\nprofiles:\n- schedulerName: {}\n",
                    scheduler_name(c, &args.prefix)
                ),
            )?;
            let port = free_port()?.port().to_string();
            let cert_dir = log_dir.join("kube-scheduler-certs");
            let mut cmd = Command::new(&bin);
            cmd.arg(format!("--config={}", config.display()))
                .arg(format!("--authentication-kubeconfig={kc}"))
                .arg(format!("--authorization-kubeconfig={kc}"))
                .args(["--bind-address=127.0.0.1", &format!("--secure-port={port}")])
                .arg(format!("--cert-dir={}", cert_dir.display()))
                .arg("--v=1");
            if args.workload == Workload::Podgroups {
                // The gates `cluster.sh up --workload-api` gives the cluster's own kube-scheduler:
                // gang and topology-aware PodGroup scheduling.
                cmd.arg("--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true");
            }
            cmd.args(&args.kube_scheduler_args);
            Ok(Started {
                procs: vec![Proc2::spawn(c.name(), &mut cmd, log_dir)?],
                binder_http: None,
            })
        }
        Contender::Placement | Contender::PlacementAlt => {
            let service_bin = existing("--service-bin", &args.service_bin, "scheduler-service")?;
            let binder_bin = existing("--binder-bin", &args.binder_bin, "binder-agent")?;
            let grpc = free_port()?;
            let mut service = Command::new(service_bin);
            service.args(["--listen", &grpc.to_string(), "--metrics-listen", "off"]);
            if args.workload == Workload::Podgroups {
                // The gates the bench gives kube-scheduler (above).
                service.arg("--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true");
            }
            let service = Proc2::spawn("scheduler-service", &mut service, log_dir)?;
            let http = free_port()?;
            let mut binder = Command::new(binder_bin);
            binder
                .args(["run", "--kubeconfig", &kubeconfig, "--no-leader-elect"])
                .args(["--decision-endpoints", &format!("http://{grpc}")])
                .args(["--scheduler-name", &scheduler_name(c, &args.prefix)])
                .args(["--http-listen", &http.to_string()])
                .args(if c == Contender::Placement {
                    &args.binder_args
                } else {
                    &args.alt_binder_args
                });
            let binder = Proc2::spawn("binder-agent", &mut binder, log_dir)?;
            Ok(Started {
                procs: vec![service, binder],
                binder_http: Some(http),
            })
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// One contender's results.
#[derive(Debug, Serialize)]
struct Outcome {
    contender: Contender,
    pods: usize,
    /// Seconds from the start to the first pod seen bound.
    first_bound_s: f64,
    /// Seconds from the start to the last pod seen bound.
    all_bound_s: f64,
    pods_per_s: f64,
    /// Milliseconds from the later of creation and start to seen bound.
    wait_p50_ms: f64,
    wait_p99_ms: f64,
    /// Events in the namespace when the work was counted.
    events: usize,
    /// Seconds from the start to the last of those events seen.
    events_done_s: f64,
    /// Seconds from the start until requests and CPU were read (binds and events done).
    counted_s: f64,
    requests_per_pod: f64,
    /// Requests per pod by `VERB resource[/subresource] code`.
    requests: Vec<(String, f64)>,
    watch_events_per_pod: f64,
    watch_kib_per_pod: f64,
    /// Watch events per pod by kind.
    watch_events: Vec<(String, f64)>,
    /// CPU seconds per 1,000 pods (API server and etcd: less their idle rate over the window).
    scheduler_cpu: f64,
    apiserver_cpu: f64,
    etcd_cpu: Option<f64>,
    etcd_kib_received_per_pod: Option<f64>,
    etcd_puts_per_pod: Option<f64>,
    etcd_fsyncs_per_pod: Option<f64>,
    paced: Option<Paced>,
    /// `--workload dra` and `podgroups`: what was bound, read back after the events.
    checks: Option<Checks>,
    /// The binder's own view of the backlog and of the paced phase (placement).
    binder: Option<BinderStats>,
    binder_paced: Option<BinderStats>,
}

/// What the binder's own metrics say about a phase (placement only).
#[derive(Debug, Serialize)]
struct BinderStats {
    batches: f64,
    pods_per_batch: f64,
    /// Mean sync + Schedule time per batch.
    decision_ms: f64,
    binds: f64,
    /// Mean Binding request time.
    bind_ms: f64,
    full_syncs: f64,
    delta_syncs: f64,
    /// Mean e2e (kube's scheduling SLI: queued → bound) of the pods bound.
    e2e_ms: f64,
}

const BINDER_METRICS: &[&str] = &[
    "binder_batch_size_sum",
    "binder_batch_size_count",
    "binder_decision_duration_seconds_sum",
    "binder_decision_duration_seconds_count",
    "binder_bind_duration_seconds_sum",
    "binder_bind_duration_seconds_count",
    "binder_snapshot_syncs_total",
    "scheduler_pod_scheduling_sli_duration_seconds_sum",
    "scheduler_pod_scheduling_sli_duration_seconds_count",
];

async fn scrape_binder(addr: Option<SocketAddr>) -> Option<Vec<Sample>> {
    let url = format!("http://{}/metrics", addr?);
    let text = tokio::task::spawn_blocking(move || http_get(&url)).await.ok()?.ok()?;
    Some(parse_metrics(&text, BINDER_METRICS))
}

fn binder_stats(before: Option<&[Sample]>, after: Option<&[Sample]>) -> Option<BinderStats> {
    let d = delta(before.unwrap_or_default(), after?);
    // (a counter absent before reads as 0; `+ 0.0` turns -0 into 0 for printing)
    let mean_ms = |name: &str| 1000.0 * sum(&d, &format!("{name}_sum")) / sum(&d, &format!("{name}_count")).max(1.0);
    let syncs = |kind: &str| {
        d.iter()
            .filter(|s| {
                s.name == "binder_snapshot_syncs_total" && s.labels.get("kind").map(String::as_str) == Some(kind)
            })
            .map(|s| s.value)
            .sum::<f64>()
    };
    let batches = sum(&d, "binder_batch_size_count");
    Some(BinderStats {
        batches,
        pods_per_batch: sum(&d, "binder_batch_size_sum") / batches.max(1.0),
        decision_ms: mean_ms("binder_decision_duration_seconds"),
        binds: sum(&d, "binder_bind_duration_seconds_count"),
        bind_ms: mean_ms("binder_bind_duration_seconds"),
        full_syncs: syncs("full") + 0.0,
        delta_syncs: syncs("delta") + 0.0,
        e2e_ms: mean_ms("scheduler_pod_scheduling_sli_duration_seconds"),
    })
}

/// Creation→bound latency of pods created at a steady rate.
#[derive(Debug, Serialize)]
struct Paced {
    pods: usize,
    rate: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    /// CPU seconds per 1,000 paced pods: the scheduler's processes, the API server plus etcd
    /// (less their idle rate).
    scheduler_cpu: f64,
    apiserver_etcd_cpu: f64,
}

async fn run_contender(
    client: &Client,
    args: &RunArgs,
    c: Contender,
    idle: Idle,
    log_dir: &Path,
) -> anyhow::Result<Outcome> {
    let ns = format!("{}-{}", args.prefix, c.name());
    let say = |m: String| eprintln!("cluster-bench [{}]: {m}", c.name());
    let shape = shape(args);
    fresh_namespace(client, &ns, &shape).await?;
    let t = Instant::now();
    shape.set_up_namespace(client, &ns, args.setup_concurrency).await?;
    let bench_pods = shape.pods();
    ensure!(
        bench_pods.len() == args.pods,
        "{} pods planned, {} expected",
        bench_pods.len(),
        args.pods
    );
    create_pods(
        client,
        &ns,
        &bench_pods,
        &scheduler_name(c, &args.prefix),
        &shape,
        args.setup_concurrency,
    )
    .await?;
    say(format!(
        "{} pending pods created in {ns} ({:.1} s)",
        args.pods,
        t.elapsed().as_secs_f64()
    ));
    let t = Instant::now();
    let claims = shape.await_claims(client, &ns).await?;
    if !claims.is_empty() {
        say(format!(
            "{} ResourceClaims made by the resourceclaim controller ({:.1} s)",
            claims.len(),
            t.elapsed().as_secs_f64()
        ));
    }
    let plan = match c {
        Contender::Raw | Contender::RawEvents => match shape.raw_plan(|n| node_name(&args.prefix, n), &claims)? {
            Some(plan) => {
                let path = log_dir.join(format!("{}-plan.json", c.name()));
                std::fs::write(&path, serde_json::to_vec(&plan)?)
                    .with_context(|| format!("writing {}", path.display()))?;
                Some(path)
            }
            None => None,
        },
        _ => None,
    };
    let watches = Watches::start(client, &ns).await?;
    ensure!(watches.bound() == 0, "{ns}: pods bound before the contender started");
    let before = scrape(client, args.etcd_metrics_url.as_deref()).await?;
    let t0 = Instant::now();
    let Started { mut procs, binder_http } = start(c, args, &ns, log_dir, plan.as_deref())?;
    let deadline = t0 + Duration::from_secs(args.timeout_secs);
    let mut raw_cpu = None;
    while watches.bound() < args.pods {
        for p in &mut procs {
            if matches!(c, Contender::Raw | Contender::RawEvents) {
                // The raw binder exits when its binds are done; its last line is its CPU time.
                if let Some(status) = p.child.try_wait()? {
                    ensure!(status.success(), "{} failed; see {}", p.name, p.log.display());
                    let log = std::fs::read_to_string(&p.log).unwrap_or_default();
                    raw_cpu = log
                        .lines()
                        .rev()
                        .find_map(|l| l.strip_prefix("cpu_seconds "))
                        .and_then(|v| v.trim().parse::<f64>().ok());
                }
            } else {
                p.check()?;
            }
        }
        if Instant::now() >= deadline {
            // What the workload's checks say of the pods left (e.g. which PodGroups wait).
            let checks = match args.workload {
                Workload::Plain => String::new(),
                _ => match shape.check(client, &ns, |n| node_name(&args.prefix, n)).await {
                    Ok(checks) => format!("; {}", checks.summary(args.workload)),
                    Err(e) => format!("; checks failed: {e:#}"),
                },
            };
            bail!(
                "{}: only {} of {} pods bound within {} s{checks} (logs in {})",
                c.name(),
                watches.bound(),
                args.pods,
                args.timeout_secs,
                log_dir.display()
            );
        }
        watches.wait(Duration::from_millis(200)).await;
    }
    let (first, last, waits) = {
        let s = watches.seen.lock();
        let mut waits: Vec<f64> = s
            .bound
            .values()
            .map(|b| b.duration_since(t0).as_secs_f64() * 1000.0)
            .collect();
        waits.sort_by(f64::total_cmp);
        let first = waits.first().copied().unwrap_or(0.0) / 1000.0;
        let last = waits.last().copied().unwrap_or(0.0) / 1000.0;
        (first, last, waits)
    };
    say(format!(
        "{} pods bound in {last:.2} s ({:.0} pods/s)",
        args.pods,
        args.pods as f64 / last
    ));
    // Count the whole work: wait for the Scheduled events too (a scheduler may drop some: stop
    // when none came for 5 s).
    if c.writes_events() {
        let mut last_change = (Instant::now(), watches.events());
        while watches.events() < args.pods && last_change.0.elapsed() < Duration::from_secs(5) {
            watches.wait(Duration::from_millis(200)).await;
            let n = watches.events();
            if n != last_change.1 {
                last_change = (Instant::now(), n);
            }
        }
    }
    if let Some(p) = procs
        .iter_mut()
        .find(|_| matches!(c, Contender::Raw | Contender::RawEvents))
    {
        // Make sure the raw binder has finished (and printed its CPU time).
        let status = p.child.wait()?;
        ensure!(status.success(), "{} failed; see {}", p.name, p.log.display());
        if raw_cpu.is_none() {
            let log = std::fs::read_to_string(&p.log).unwrap_or_default();
            raw_cpu = log
                .lines()
                .rev()
                .find_map(|l| l.strip_prefix("cpu_seconds "))
                .and_then(|v| v.trim().parse::<f64>().ok());
        }
    }
    let counted_s = t0.elapsed().as_secs_f64();
    let scheduler_cpu = raw_cpu.unwrap_or_else(|| procs.iter().map(Proc2::cpu).sum());
    let after = scrape(client, args.etcd_metrics_url.as_deref()).await?;
    let binder_after = scrape_binder(binder_http).await;
    let checks = match args.workload {
        Workload::Plain => None,
        _ => {
            let checks = shape.check(client, &ns, |n| node_name(&args.prefix, n)).await?;
            say(checks.summary(args.workload));
            Some(checks)
        }
    };
    let (events, events_done_s) = {
        let s = watches.seen.lock();
        (
            s.events.len(),
            s.last_event
                .map_or(0.0, |e| e.saturating_duration_since(t0).as_secs_f64()),
        )
    };

    let paced = if args.paced_pods > 0 && !matches!(c, Contender::Raw | Contender::RawEvents) {
        let cpu_before: f64 = procs.iter().map(Proc2::cpu).sum();
        let t = Instant::now();
        let mut paced = paced_phase(client, args, c, &ns, &watches, &mut procs).await?;
        let paced_after = scrape(client, args.etcd_metrics_url.as_deref()).await?;
        let (api, etcd) = net_cpu(&after, &paced_after, idle, t.elapsed().as_secs_f64());
        let per_1k = 1000.0 / args.paced_pods as f64;
        paced.scheduler_cpu = (procs.iter().map(Proc2::cpu).sum::<f64>() - cpu_before) * per_1k;
        paced.apiserver_etcd_cpu = (api + etcd.unwrap_or(0.0)) * per_1k;
        Some(paced)
    } else {
        None
    };
    let binder_paced = match paced {
        Some(_) => binder_stats(binder_after.as_deref(), scrape_binder(binder_http).await.as_deref()),
        None => None,
    };
    drop(procs);
    drop(watches);

    let per_pod = |v: f64| v / args.pods as f64;
    let per_1k = |v: f64| v * 1000.0 / args.pods as f64;
    let api = delta(&before.apiserver, &after.apiserver);
    let etcd = match (&before.etcd, &after.etcd) {
        (Some(b), Some(a)) => Some(delta(b, a)),
        _ => None,
    };
    let outcome = Outcome {
        contender: c,
        pods: args.pods,
        first_bound_s: first,
        all_bound_s: last,
        pods_per_s: args.pods as f64 / last,
        wait_p50_ms: percentile(&waits, 0.5),
        wait_p99_ms: percentile(&waits, 0.99),
        events,
        events_done_s,
        counted_s,
        requests_per_pod: per_pod(sum(&api, "apiserver_request_total")),
        requests: grouped(&api, "apiserver_request_total", request_kind)
            .into_iter()
            .map(|(k, v)| (k, per_pod(v)))
            .collect(),
        watch_events_per_pod: per_pod(sum(&api, "apiserver_watch_events_total")),
        watch_kib_per_pod: per_pod(sum(&api, "apiserver_watch_events_sizes_sum")) / 1024.0,
        watch_events: grouped(&api, "apiserver_watch_events_total", |l| {
            l.get("kind").cloned().unwrap_or_default()
        })
        .into_iter()
        .map(|(k, v)| (k, per_pod(v)))
        .collect(),
        scheduler_cpu: per_1k(scheduler_cpu),
        apiserver_cpu: per_1k(net_cpu(&before, &after, idle, counted_s).0),
        etcd_cpu: net_cpu(&before, &after, idle, counted_s).1.map(per_1k),
        etcd_kib_received_per_pod: etcd
            .as_ref()
            .map(|e| per_pod(sum(e, "etcd_network_client_grpc_received_bytes_total")) / 1024.0),
        etcd_puts_per_pod: etcd.as_ref().map(|e| per_pod(sum(e, "etcd_mvcc_put_total"))),
        etcd_fsyncs_per_pod: etcd
            .as_ref()
            .map(|e| per_pod(sum(e, "etcd_disk_wal_fsync_duration_seconds_count"))),
        paced,
        checks,
        binder: binder_stats(None, binder_after.as_deref()),
        binder_paced,
    };
    let t = Instant::now();
    empty_namespace(client, &ns, &shape).await?;
    say(format!("pods and events deleted ({:.1} s)", t.elapsed().as_secs_f64()));
    Ok(outcome)
}

/// Creates `--paced-pods` pods at `--paced-rate` while the scheduler runs; their creation→bound
/// latency (from just before each create request to its binding seen).
async fn paced_phase(
    client: &Client,
    args: &RunArgs,
    c: Contender,
    ns: &str,
    watches: &Watches,
    procs: &mut [Proc2],
) -> anyhow::Result<Paced> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let scheduler = scheduler_name(c, &args.prefix);
    let sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let start = tokio::time::Instant::now();
    let every = Duration::from_secs_f64(1.0 / args.paced_rate.max(0.001));
    let mut creates = tokio::task::JoinSet::new();
    for i in 0..args.paced_pods {
        tokio::time::sleep_until(start + every * i as u32).await;
        let name = format!("q-{i:05}");
        let pod = bench_pod(&name, &scheduler, &args.prefix)?;
        let (pods, sent) = (pods.clone(), Arc::clone(&sent));
        creates.spawn(async move {
            sent.lock().insert(name.clone(), Instant::now());
            pods.create(&PostParams::default(), &pod)
                .await
                .with_context(|| format!("creating pod {name}"))
                .map(|_| ())
        });
    }
    while let Some(r) = creates.join_next().await {
        r??;
    }
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    loop {
        let done = {
            let s = watches.seen.lock();
            sent.lock().keys().all(|k| s.bound.contains_key(k))
        };
        if done {
            break;
        }
        for p in procs.iter_mut() {
            p.check()?;
        }
        ensure!(
            Instant::now() < deadline,
            "paced pods not all bound within {} s",
            args.timeout_secs
        );
        watches.wait(Duration::from_millis(200)).await;
    }
    let s = watches.seen.lock();
    let mut lat: Vec<f64> = sent
        .lock()
        .iter()
        .filter_map(|(k, t)| {
            s.bound
                .get(k)
                .map(|b| b.saturating_duration_since(*t).as_secs_f64() * 1000.0)
        })
        .collect();
    lat.sort_by(f64::total_cmp);
    Ok(Paced {
        pods: args.paced_pods,
        rate: args.paced_rate,
        p50_ms: percentile(&lat, 0.5),
        p99_ms: percentile(&lat, 0.99),
        max_ms: lat.last().copied().unwrap_or(f64::NAN),
        scheduler_cpu: 0.0,
        apiserver_etcd_cpu: 0.0,
    })
}

async fn run(mut args: RunArgs) -> anyhow::Result<()> {
    shape(&args).validate()?;
    if args.workload == Workload::Podgroups {
        args.pods = shape(&args).pods().len();
    }
    ensure!(
        args.paced_pods == 0 || args.workload == Workload::Plain,
        "--paced-pods: with --workload plain only"
    );
    ensure!(args.nodes > 0 && args.pods > 0, "--nodes and --pods: at least 1");
    ensure!(
        args.pods + args.paced_pods <= args.nodes * 110,
        "--pods + --paced-pods: at most 110 per node"
    );
    ensure!(!args.contenders.is_empty(), "--contenders: at least one");
    if args.contenders.contains(&Contender::KubeScheduler) {
        let bin = args
            .kube_scheduler_bin
            .as_ref()
            .context("--kube-scheduler-bin is needed for the kube-scheduler contender")?;
        ensure!(bin.exists(), "--kube-scheduler-bin: {} not found", bin.display());
    }
    if args.contenders.contains(&Contender::Placement) || args.contenders.contains(&Contender::PlacementAlt) {
        existing("--service-bin", &args.service_bin, "scheduler-service")?;
        existing("--binder-bin", &args.binder_bin, "binder-agent")?;
    }
    let log_dir = match &args.log_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("cluster-bench-{}", std::process::id())),
    };
    std::fs::create_dir_all(&log_dir).with_context(|| format!("creating {}", log_dir.display()))?;
    let client = client(&args.kubeconfig, args.api_http2).await?;
    let shape = shape(&args);
    if let Some(missing) = shape.unserved(&client).await? {
        if args.skip_unserved {
            eprintln!("cluster-bench: --workload {:?}: {missing}: skipped", args.workload);
            return Ok(());
        }
        bail!("--workload {:?}: {missing}", args.workload);
    }
    let t = Instant::now();
    create_nodes(&client, &args).await?;
    shape
        .set_up_cluster(&client, |n| node_name(&args.prefix, n), args.setup_concurrency)
        .await?;
    eprintln!(
        "cluster-bench: {} Ready nodes{} ({:.1} s); logs in {}",
        args.nodes,
        match args.workload {
            Workload::Plain => String::new(),
            Workload::Dra => format!(", each with a ResourceSlice of {} devices", args.devices_per_node),
            Workload::Podgroups => format!(" in {} racks", shape.racks()),
        },
        t.elapsed().as_secs_f64(),
        log_dir.display()
    );
    let idle = if args.idle_window_secs > 0 {
        eprintln!("cluster-bench: measuring the idle CPU of the API server and etcd");
        measure_idle(
            &client,
            args.etcd_metrics_url.as_deref(),
            Duration::from_secs(5),
            Duration::from_secs(args.idle_window_secs),
        )
        .await?
    } else {
        Idle {
            apiserver: 0.0,
            etcd: args.etcd_metrics_url.as_ref().map(|_| 0.0),
        }
    };
    eprintln!(
        "cluster-bench: idle CPU: API server {:.3}, etcd {} cores",
        idle.apiserver,
        opt(idle.etcd, 3)
    );
    let mut outcomes = Vec::new();
    let mut failure = None;
    for &c in &args.contenders {
        match run_contender(&client, &args, c, idle, &log_dir).await {
            Ok(o) => outcomes.push(o),
            Err(e) => {
                failure = Some(e.context(format!("contender {}", c.name())));
                break;
            }
        }
    }
    // Clean up whatever happened.
    let mut contenders: Vec<Contender> = Vec::new();
    for &c in &args.contenders {
        if !contenders.contains(&c) {
            contenders.push(c);
        }
    }
    for &c in &contenders {
        let ns = format!("{}-{}", args.prefix, c.name());
        if let Err(e) = delete_namespace(&client, &ns, &shape).await {
            eprintln!("cluster-bench: cleaning up {ns}: {e:#}");
        }
    }
    if !args.keep_nodes {
        delete_nodes(&client, &args.prefix).await?;
        shape.tear_down_cluster(&client).await?;
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "workload": args.workload,
                "nodes": args.nodes,
                "pods": args.pods,
                "idle": idle,
                "contenders": outcomes
            }))?
        );
    } else {
        print_table(&args, idle, &outcomes);
    }
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| o.checks.as_ref().is_some_and(|c| !c.ok()))
        .map(|o| o.contender.name())
        .collect();
    ensure!(failed.is_empty(), "checks failed: {}", failed.join(", "));
    Ok(())
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

fn print_table(args: &RunArgs, idle: Idle, outcomes: &[Outcome]) {
    match args.workload {
        Workload::Plain => println!(
            "{} nodes, {} pending pods per contender (created before it starts; timed from its start)",
            args.nodes, args.pods
        ),
        Workload::Dra => println!(
            "{} nodes with {} devices each, {} pending pods per contender each with a ResourceClaim of 1-4 devices \
             (pods and claims made before it starts; timed from its start)",
            args.nodes, args.devices_per_node, args.pods
        ),
        Workload::Podgroups => println!(
            "{} nodes in {} racks, {} PodGroups of 8-64 pods per contender ({} pods; created before it starts; \
             timed from its start)",
            args.nodes,
            shape(args).racks(),
            args.groups,
            args.pods
        ),
    }
    if args.idle_window_secs > 0 {
        println!(
            "idle CPU before the first contender: API server {:.3} cores, etcd {} (subtracted below)",
            idle.apiserver,
            opt(idle.etcd, 3)
        );
    } else {
        println!("idle CPU not measured (--idle-window-secs 0): nothing subtracted");
    }
    println!(
        "{:<15} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9}",
        "contender",
        "pods/s",
        "first s",
        "all s",
        "wait p50",
        "wait p99",
        "req/pod",
        "events s",
        "sched cpu",
        "api cpu",
        "etcd cpu",
        "api+etcd"
    );
    for o in outcomes {
        println!(
            "{:<15} {:>8.0} {:>8.2} {:>8.2} {:>8.0}ms {:>8.0}ms {:>8.2} {:>8} {:>9.2} {:>9.2} {:>9} {:>9}",
            o.contender.name(),
            o.pods_per_s,
            o.first_bound_s,
            o.all_bound_s,
            o.wait_p50_ms,
            o.wait_p99_ms,
            o.requests_per_pod,
            if o.events > 0 {
                format!("{:.2}", o.events_done_s)
            } else {
                "-".into()
            },
            o.scheduler_cpu,
            o.apiserver_cpu,
            opt(o.etcd_cpu, 2),
            opt(o.etcd_cpu.map(|e| e + o.apiserver_cpu), 2),
        );
    }
    println!(
        "(wait: from start to bound; events s: last Scheduled event seen; cpu: CPU seconds per 1,000 pods, \
         sched: the contender's processes, counted until the events are written)"
    );
    let raw = outcomes.iter().find(|o| o.contender == Contender::Raw);
    let ks = outcomes.iter().find(|o| o.contender == Contender::KubeScheduler);
    if let Some(p) = outcomes.iter().find(|o| o.contender == Contender::Placement) {
        if let Some(k) = ks {
            println!("placement / kube-scheduler: {:.2}x pods/s", p.pods_per_s / k.pods_per_s);
        }
        if let Some(r) = raw {
            println!(
                "placement / raw ceiling: {:.2} of its pods/s",
                p.pods_per_s / r.pods_per_s
            );
        }
    }
    for o in outcomes {
        if let Some(checks) = &o.checks {
            println!(
                "{} checks {}: {}",
                o.contender.name(),
                if checks.ok() { "passed" } else { "FAILED" },
                checks.summary(args.workload)
            );
        }
    }
    for o in outcomes {
        println!();
        println!(
            "{}: watch events {:.2}/pod ({:.1} KiB/pod; {}); etcd: {} KiB received/pod, {} puts/pod, {} fsyncs/pod",
            o.contender.name(),
            o.watch_events_per_pod,
            o.watch_kib_per_pod,
            o.watch_events
                .iter()
                .map(|(k, v)| format!("{k} {v:.2}"))
                .collect::<Vec<_>>()
                .join(", "),
            opt(o.etcd_kib_received_per_pod, 2),
            opt(o.etcd_puts_per_pod, 2),
            opt(o.etcd_fsyncs_per_pod, 2)
        );
        if let Some(p) = &o.paced {
            println!(
                "  paced: {} pods at {:.0}/s: creation→bound p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; \
                 CPU s per 1,000 pods: scheduler {:.2}, API server + etcd {:.2}",
                p.pods, p.rate, p.p50_ms, p.p99_ms, p.max_ms, p.scheduler_cpu, p.apiserver_etcd_cpu
            );
        }
        for (phase, b) in [("backlog", &o.binder), ("paced", &o.binder_paced)] {
            if let Some(b) = b {
                println!(
                    "  binder, {phase}: {:.0} batches of {:.1} pods, decision {:.1} ms; {:.0} binds of {:.1} ms; \
                     syncs {:.0} full, {:.0} delta; e2e mean {:.0} ms",
                    b.batches,
                    b.pods_per_batch,
                    b.decision_ms,
                    b.binds,
                    b.bind_ms,
                    b.full_syncs,
                    b.delta_syncs,
                    b.e2e_ms
                );
            }
        }
        for (k, v) in o.requests.iter().filter(|(_, v)| *v >= 0.005) {
            println!("  {v:>7.3}/pod  {k}");
        }
    }
}

/// `raw-bind`: binds pod i to node i mod N (or as `--plan` says, after its claim writes),
/// `--concurrency` at a time; prints its CPU time.
async fn raw_bind(args: RawArgs) -> anyhow::Result<()> {
    let client = client(&args.kubeconfig, args.api_http2).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &args.namespace);
    let events: Api<EventV1> = Api::namespaced(client.clone(), &args.namespace);
    let claims: Api<k8s_openapi::api::resource::v1::ResourceClaim> = Api::namespaced(client.clone(), &args.namespace);
    let plan: Vec<PlanEntry> = match &args.plan {
        Some(path) => {
            serde_json::from_slice(&std::fs::read(path).with_context(|| format!("reading {}", path.display()))?)
                .with_context(|| format!("parsing {}", path.display()))?
        }
        None => (0..args.pods)
            .map(|i| PlanEntry {
                pod: pod_name(i),
                node: node_name(&args.prefix, i % args.nodes.max(1)),
                claim: None,
            })
            .collect(),
    };
    let total = plan.len();
    let uids: HashMap<String, String> = pods
        .list_metadata(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|p| Some((p.metadata.name?, p.metadata.uid?)))
        .collect();
    let failures = futures::stream::iter(plan)
        .map(|entry| {
            let (pods, events, claims) = (pods.clone(), events.clone(), claims.clone());
            let (ns, uid, with_event) = (&args.namespace, uids.get(&entry.pod).cloned(), args.events);
            async move {
                if entry.claim.is_some() {
                    let uid = uid
                        .as_deref()
                        .with_context(|| format!("pod {} not listed", entry.pod))?;
                    workload::raw_claim_writes(&pods, &claims, &entry, uid).await?;
                }
                let PlanEntry { pod: name, node, .. } = entry;
                let body = binding(ns, &name, &node);
                pods.create_subresource::<_, serde_json::Value>("binding", &name, &PostParams::default(), &body)
                    .await
                    .with_context(|| format!("binding {name}"))?;
                if with_event {
                    // The events/v1 Event both schedulers write.
                    let now = k8s_openapi::jiff::Timestamp::now();
                    let event = EventV1 {
                        metadata: ObjectMeta {
                            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
                            namespace: Some(ns.clone()),
                            ..Default::default()
                        },
                        event_time: Some(MicroTime(now)),
                        reporting_controller: Some("raw-bind".into()),
                        reporting_instance: Some("raw-bind".into()),
                        action: Some("Binding".into()),
                        reason: Some("Scheduled".into()),
                        regarding: Some(ObjectReference {
                            api_version: Some("v1".into()),
                            kind: Some("Pod".into()),
                            name: Some(name.clone()),
                            namespace: Some(ns.clone()),
                            uid,
                            ..Default::default()
                        }),
                        note: Some(format!("Successfully assigned {ns}/{name} to {node}")),
                        type_: Some("Normal".into()),
                        ..Default::default()
                    };
                    events
                        .create(&PostParams::default(), &event)
                        .await
                        .with_context(|| format!("event of {name}"))?;
                }
                Ok::<_, anyhow::Error>(())
            }
        })
        .buffer_unordered(args.concurrency.max(1))
        .filter_map(|r| async move { r.err() })
        .collect::<Vec<_>>()
        .await;
    if let Some(e) = failures.first() {
        bail!("{} of {total} binds failed; first: {e:#}", failures.len());
    }
    let cpu = Proc::Myself.cpu().map_or(0.0, |d| d.as_secs_f64());
    println!("cpu_seconds {cpu}");
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Cmd::Run(args) => run(args).await,
        Cmd::RawBind(args) => raw_bind(args).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_parse_and_subtract() {
        let before = parse_metrics(
            "# HELP x\napiserver_request_total{code=\"201\",resource=\"pods\",subresource=\"binding\",verb=\"POST\"} 10\n\
             process_cpu_seconds_total 1.5\nother 3\n",
            APISERVER_METRICS,
        );
        let after = parse_metrics(
            "apiserver_request_total{code=\"201\",resource=\"pods\",subresource=\"binding\",verb=\"POST\"} 25\n\
             apiserver_request_total{code=\"201\",resource=\"events\",subresource=\"\",verb=\"POST\"} 4\n\
             process_cpu_seconds_total 2.25\nother 9\n",
            APISERVER_METRICS,
        );
        let d = delta(&before, &after);
        assert_eq!(sum(&d, "apiserver_request_total"), 19.0);
        assert_eq!(sum(&d, "process_cpu_seconds_total"), 0.75);
        assert_eq!(sum(&d, "other"), 0.0);
        let by = grouped(&d, "apiserver_request_total", request_kind);
        assert_eq!(
            by,
            [
                ("POST pods/binding 201".to_string(), 15.0),
                ("POST events 201".to_string(), 4.0)
            ]
        );
    }

    #[test]
    fn labels_split_outside_quotes() {
        assert_eq!(split_labels(r#"a="x,y",b="z""#), [r#"a="x,y""#, r#"b="z""#]);
        assert!(split_labels("").is_empty());
    }

    #[test]
    fn percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert!(percentile(&[], 0.5).is_nan());
    }
}
