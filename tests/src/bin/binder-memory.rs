//! `binder-memory`: the resident memory of a real `binder-agent run` process watching a large cluster.
//!
//! It fills the in-memory fake API server (`placement_tests::fake_apiserver`, the real Kubernetes
//! protocol) with the synthetic cluster (`synth::cluster`: 5,000 Nodes and 150,000 bound Pods by
//! default), starts a decision service in this process on loopback, writes a kubeconfig for the
//! fake server and starts `binder-agent run` as a child process with it. It reports the binder's
//! VmRSS and VmHWM (`/proc/<pid>/status`) once `/readyz` answers 200 (its node and pod caches hold
//! the whole cluster and a replica is ready), then creates `--pending` pending pods naming the
//! scheduler, waits until the binder has bound them all (which includes its full snapshot sync to
//! the decision service) and reports the memory again.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use clap::Parser;
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use placement_scheduler::grpc::{serve, Metrics, ServerConfig};
use placement_scheduler::procstat::{Memory, Proc};
use placement_scheduler::proto;
use placement_scheduler::synth::{self, ClusterShape};
use placement_tests::fake_apiserver::FakeApiServer;
use serde::Serialize;

const SCHEDULER: &str = "placement-scheduler";

/// Resident memory of a binder watching a large (fake) cluster.
#[derive(Debug, Parser)]
struct Args {
    /// Nodes in the synthetic cluster.
    #[arg(long, default_value_t = 5000)]
    nodes: usize,
    /// Bound pods in the synthetic cluster, spread evenly (at most 110 per node).
    #[arg(long, default_value_t = 150_000)]
    pods: usize,
    /// Pending pods to create once the binder is ready, and wait for it to bind.
    #[arg(long, default_value_t = 5000)]
    pending: usize,
    /// The `binder-agent` binary; by default the one next to this executable.
    #[arg(long)]
    binder_bin: Option<PathBuf>,
    /// How long to wait for readiness and for the binds.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
    /// Seed of the synthetic cluster.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Print the results as JSON instead of lines.
    #[arg(long)]
    json: bool,
}

/// What was measured.
#[derive(Debug, Serialize)]
struct Report {
    nodes: usize,
    bound_pods: usize,
    pending_pods: usize,
    load_s: f64,
    ready_s: f64,
    ready: Option<Memory>,
    bind_s: f64,
    bound: Option<Memory>,
}

fn quantities(m: &BTreeMap<String, String>) -> Option<BTreeMap<String, Quantity>> {
    (!m.is_empty()).then(|| m.iter().map(|(k, v)| (k.clone(), Quantity(v.clone()))).collect())
}

fn some_map(m: &BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    (!m.is_empty()).then(|| m.clone())
}

fn some_str(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// The Kubernetes Node of a synthetic node (Ready, capacity = allocatable).
fn k8s_node(n: &proto::Node) -> k8s::Node {
    let taints: Vec<k8s::Taint> = n
        .taints
        .iter()
        .map(|t| k8s::Taint {
            key: t.key.clone(),
            value: some_str(&t.value),
            effect: t.effect.clone(),
            time_added: None,
        })
        .collect();
    k8s::Node {
        metadata: ObjectMeta {
            name: Some(n.name.clone()),
            labels: some_map(&n.labels),
            ..Default::default()
        },
        spec: Some(k8s::NodeSpec {
            taints: (!taints.is_empty()).then_some(taints),
            unschedulable: n.unschedulable.then_some(true),
            ..Default::default()
        }),
        status: Some(k8s::NodeStatus {
            allocatable: quantities(&n.allocatable),
            capacity: quantities(&n.allocatable),
            images: Some(
                n.images
                    .iter()
                    .map(|i| k8s::ContainerImage {
                        names: Some(i.names.clone()),
                        size_bytes: Some(i.size_bytes),
                    })
                    .collect(),
            ),
            conditions: Some(vec![k8s::NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

fn k8s_container(c: &proto::Container) -> k8s::Container {
    k8s::Container {
        name: c.name.clone(),
        image: some_str(&c.image),
        resources: Some(k8s::ResourceRequirements {
            requests: quantities(&c.requests),
            ..Default::default()
        }),
        ports: (!c.ports.is_empty()).then(|| {
            c.ports
                .iter()
                .map(|p| k8s::ContainerPort {
                    container_port: p.container_port,
                    host_port: (p.host_port != 0).then_some(p.host_port),
                    protocol: some_str(&p.protocol),
                    host_ip: some_str(&p.host_ip),
                    ..Default::default()
                })
                .collect()
        }),
        restart_policy: some_str(&c.restart_policy),
        ..Default::default()
    }
}

fn k8s_term(t: &proto::NodeSelectorTerm) -> k8s::NodeSelectorTerm {
    let reqs = |rs: &[proto::NodeSelectorRequirement]| {
        (!rs.is_empty()).then(|| {
            rs.iter()
                .map(|r| k8s::NodeSelectorRequirement {
                    key: r.key.clone(),
                    operator: r.operator.clone(),
                    values: (!r.values.is_empty()).then(|| r.values.clone()),
                })
                .collect()
        })
    };
    k8s::NodeSelectorTerm {
        match_expressions: reqs(&t.match_expressions),
        match_fields: reqs(&t.match_fields),
    }
}

/// The Kubernetes Pod of a synthetic pod, naming our scheduler; Running when bound.
fn k8s_pod(p: &proto::Pod) -> k8s::Pod {
    let affinity = p.node_affinity.as_ref().map(|a| k8s::Affinity {
        node_affinity: Some(k8s::NodeAffinity {
            required_during_scheduling_ignored_during_execution: a.required.as_ref().map(|r| k8s::NodeSelector {
                node_selector_terms: r.terms.iter().map(k8s_term).collect(),
            }),
            preferred_during_scheduling_ignored_during_execution: (!a.preferred.is_empty()).then(|| {
                a.preferred
                    .iter()
                    .map(|t| k8s::PreferredSchedulingTerm {
                        weight: t.weight,
                        preference: t.preference.as_ref().map(k8s_term).unwrap_or_default(),
                    })
                    .collect()
            }),
        }),
        ..Default::default()
    });
    let bound = !p.node_name.is_empty();
    k8s::Pod {
        metadata: ObjectMeta {
            name: Some(p.name.clone()),
            namespace: Some(p.namespace.clone()),
            uid: some_str(&p.uid),
            labels: some_map(&p.labels),
            ..Default::default()
        },
        spec: Some(k8s::PodSpec {
            scheduler_name: Some(SCHEDULER.into()),
            node_name: some_str(&p.node_name),
            priority: (p.priority != 0).then_some(p.priority),
            containers: p.containers.iter().map(k8s_container).collect(),
            init_containers: (!p.init_containers.is_empty())
                .then(|| p.init_containers.iter().map(k8s_container).collect()),
            overhead: quantities(&p.overhead),
            node_selector: some_map(&p.node_selector),
            affinity,
            tolerations: (!p.tolerations.is_empty()).then(|| {
                p.tolerations
                    .iter()
                    .map(|t| k8s::Toleration {
                        key: some_str(&t.key),
                        operator: some_str(&t.operator),
                        value: some_str(&t.value),
                        effect: some_str(&t.effect),
                        toleration_seconds: t.toleration_seconds,
                    })
                    .collect()
            }),
            ..Default::default()
        }),
        status: Some(k8s::PodStatus {
            phase: Some(if bound { "Running" } else { "Pending" }.into()),
            ..Default::default()
        }),
    }
}

/// True when `GET /readyz` on `addr` answers 200.
fn ready(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /readyz HTTP/1.0\r\nHost: localhost\r\n\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap_or(0);
    let head = String::from_utf8_lossy(&buf[..n]);
    head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200")
}

fn free_port() -> anyhow::Result<SocketAddr> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("binding a free port")?;
    Ok(l.local_addr()?)
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn run(args: Args) -> anyhow::Result<Report> {
    ensure!(args.nodes > 0, "--nodes: must be at least 1");
    ensure!(args.pods / args.nodes <= 110, "--pods: at most 110 per node");
    let binder_bin = match &args.binder_bin {
        Some(b) => b.clone(),
        None => std::env::current_exe()?.with_file_name(format!("binder-agent{}", std::env::consts::EXE_SUFFIX)),
    };
    ensure!(
        binder_bin.exists(),
        "{} not found; build it (cargo build --release -p binder-agent) or pass --binder-bin",
        binder_bin.display()
    );
    let say = |m: String| {
        if !args.json {
            eprintln!("binder-memory: {m}");
        }
    };

    let t = Instant::now();
    let shape = ClusterShape {
        nodes: args.nodes,
        pods_per_node: args.pods / args.nodes,
        ..ClusterShape::default()
    };
    let cluster = synth::cluster(&shape, args.seed);
    let server = FakeApiServer::start().await;
    for n in &cluster.nodes {
        server.create_node(k8s_node(n));
    }
    // Synthetic pod names are random suffixes, unique per node but not always per namespace
    // across 150,000 pods: a repeated name gets a numeric suffix.
    let mut names = HashSet::new();
    let mut unique = |mut pod: k8s::Pod| {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let mut n = 1;
        while !names.insert((ns.clone(), pod.metadata.name.clone().unwrap_or_default())) {
            pod.metadata.name = Some(format!("{name}-{n}"));
            n += 1;
        }
        pod
    };
    for p in &cluster.pods {
        server.create_pod(unique(k8s_pod(p)));
    }
    let (nodes, bound_pods) = (cluster.nodes.len(), cluster.pods.len());
    drop(cluster);
    let load_s = t.elapsed().as_secs_f64();
    say(format!(
        "fake API server holds {nodes} nodes and {bound_pods} pods ({load_s:.1} s)"
    ));

    // A decision service in this process.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let decision = listener.local_addr()?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let config = ServerConfig {
        max_message_bytes: 256 << 20,
        ..ServerConfig::default()
    };
    let service = tokio::spawn(serve(listener, config, Arc::new(Metrics::new()), async move {
        let _ = stop_rx.await;
    }));

    let kubeconfig = std::env::temp_dir().join(format!("binder-memory-{}.yaml", std::process::id()));
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\nusers:\n- name: binder\n  user: {{}}\n\
             contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: binder\n    namespace: placement-system\n\
             current-context: fake\n",
            server.url()
        ),
    )
    .context("writing the kubeconfig")?;
    let http = free_port()?;
    let t = Instant::now();
    let child = Command::new(&binder_bin)
        .arg("run")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--decision-endpoints", &format!("http://{decision}")])
        .args(["--http-listen", &http.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", binder_bin.display()))?;
    let binder = KillOnDrop(child);
    let pid = binder.0.id();
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    while !tokio::task::spawn_blocking(move || ready(http)).await? {
        if Instant::now() > deadline {
            bail!("the binder was not ready within {} s", args.timeout_secs);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ready_s = t.elapsed().as_secs_f64();
    let ready_memory = Proc::Pid(pid).memory();
    say(format!("binder ready after {ready_s:.1} s: {ready_memory:?}"));

    let pending: Vec<k8s::Pod> = synth::distinct_pods(args.pending, args.seed ^ 0xb1d)
        .iter()
        .map(|p| unique(k8s_pod(p)))
        .collect();
    let t = Instant::now();
    let binds_before = server.bindings_attempted();
    for p in &pending {
        server.create_pod(p.clone());
    }
    // Every pending pod was either bound or reported unschedulable (PodScheduled=False).
    let settled = |p: &k8s::Pod| {
        let (ns, name) = (
            p.metadata.namespace.as_deref().unwrap_or_default(),
            p.metadata.name.as_deref().unwrap_or_default(),
        );
        server.get_pod(ns, name).is_some_and(|p| {
            p.spec.as_ref().is_some_and(|s| s.node_name.is_some())
                || p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "PodScheduled" && c.status == "False"))
        })
    };
    let mut checked = 0;
    while checked < pending.len() {
        if settled(&pending[checked]) {
            checked += 1;
            continue;
        }
        if Instant::now() > deadline {
            bail!(
                "only {checked} of {} pending pods settled within {} s ({} binds attempted)",
                pending.len(),
                args.timeout_secs,
                server.bindings_attempted() - binds_before
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let bind_s = t.elapsed().as_secs_f64();
    let bound_memory = Proc::Pid(pid).memory();
    say(format!(
        "{} pending pods settled in {bind_s:.1} s: {bound_memory:?}",
        pending.len()
    ));

    drop(binder);
    let _ = stop_tx.send(());
    let _ = service.await;
    let _ = std::fs::remove_file(&kubeconfig);
    Ok(Report {
        nodes,
        bound_pods,
        pending_pods: pending.len(),
        load_s,
        ready_s,
        ready: ready_memory,
        bind_s,
        bound: bound_memory,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let json = args.json;
    let report = run(args).await?;
    let mem = |m: Option<Memory>| m.map_or_else(|| "-".into(), |m| format!("{:.0} / {:.0}", m.rss_mib, m.hwm_mib));
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "binder-agent watching {} nodes and {} bound pods (fake API server loaded in {:.1} s)",
            report.nodes, report.bound_pods, report.load_s
        );
        println!(
            "ready (caches synced) after {:.1} s: VmRSS / VmHWM {} MiB",
            report.ready_s,
            mem(report.ready)
        );
        println!(
            "after placing {} pending pods ({:.1} s, full snapshot sync included): VmRSS / VmHWM {} MiB",
            report.pending_pods,
            report.bind_s,
            mem(report.bound)
        );
    }
    Ok(())
}
