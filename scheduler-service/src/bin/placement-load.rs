//! `placement-load`: the gRPC load tool of the decision service.
//!
//! It starts `--replicas` real `scheduler-service` processes on free loopback ports (or targets
//! running ones given with `--endpoints`), syncs a synthetic cluster (`synth::cluster`: 5,000 nodes
//! and 150,000 bound pods by default) and measures, over real gRPC:
//!
//! - full snapshot sync: request bytes and wall time, per replica;
//! - deltas on that snapshot changing one node and 1% of the nodes: request bytes and wall time;
//! - `Rank` latency, one call at a time (distinct pods, top 10);
//! - `Schedule` in batches (256), one batch in flight: distinct pods and replicas of one workload;
//! - horizontal scale: `--in-flight` concurrent batches spread over 1, 2, … N replicas the way the
//!   binder spreads them (`binder-agent/src/replicas.rs`: the less loaded, by calls in flight, of two
//!   random choices), with pods/s and CPU time per decided pod;
//! - each replica's resident memory (VmRSS, VmHWM) after the sync and after the load.
//!
//! CPU time is utime + stime from `/proc/<pid>/stat` of the replicas and of this process (Linux; the
//! columns are left empty elsewhere and for `--endpoints`). Everything is printed as a table, or as
//! JSON with `--json`. `--nodes`, `--pods`, `--batches`, `--rank-samples` shrink it for a smoke run.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use clap::Parser;
use placement_scheduler::partition;
use placement_scheduler::procstat::{Memory, Proc};
use placement_scheduler::proto::placement_service_client::PlacementServiceClient;
use placement_scheduler::proto::{self, snapshot_ref, sync_snapshot_request};
use placement_scheduler::synth::{self, ClusterShape};
use prost::Message;
use serde::Serialize;
use tonic::transport::{Channel, Endpoint};

/// Largest gRPC message sent or received (a full snapshot is about 40 MiB at the default size).
const MAX_MESSAGE_BYTES: usize = 256 << 20;
/// Bound pods per message of a full sync after the nodes, as the binder's
/// `ReplicaConfig::full_sync_chunk_pods`.
const FULL_SYNC_CHUNK_PODS: usize = 50_000;
/// Nodes per message of a full sync, as the binder's `ReplicaConfig::full_sync_chunk_nodes`.
const FULL_SYNC_CHUNK_NODES: usize = 5_000;
/// How many of the best nodes Rank returns.
const RANK_TOP_K: u32 = 10;
/// Distinct-pod batches generated once and cycled through (each batch is evaluated on its own,
/// against the same stored snapshot, so cycling does not change the work).
const DISTINCT_POOL_BATCHES: usize = 64;

/// Load test of placement decision replicas over gRPC.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Decision replicas to start; horizontal scale is measured with 1, 2, … this many.
    #[arg(long, default_value_t = 3)]
    replicas: usize,
    /// Running replicas to load instead of starting any (comma-separated `http://host:port`);
    /// their memory and CPU time are then not reported.
    #[arg(long, value_delimiter = ',')]
    endpoints: Vec<String>,
    /// The `scheduler-service` binary to start; by default the one next to this executable.
    #[arg(long)]
    service_bin: Option<PathBuf>,
    /// Nodes in the synthetic cluster.
    #[arg(long, default_value_t = 5000)]
    nodes: usize,
    /// Bound pods in the synthetic cluster, spread evenly (at most 110 per node).
    #[arg(long, default_value_t = 150_000)]
    pods: usize,
    /// Pods per Schedule batch.
    #[arg(long, default_value_t = 256)]
    batch_size: usize,
    /// Schedule batches per measurement.
    #[arg(long, default_value_t = 200)]
    batches: usize,
    /// Rank calls timed one by one.
    #[arg(long, default_value_t = 2000)]
    rank_samples: usize,
    /// Deltas timed per delta size (at least 2: the first is reported apart).
    #[arg(long, default_value_t = 21)]
    delta_samples: usize,
    /// Concurrent batches in flight in the horizontal-scale runs.
    #[arg(long, default_value_t = 4)]
    in_flight: usize,
    /// `--pass-threads` of the replicas this tool starts (0: the service's default, two cores
    /// per pod's pass from 4,096 nodes). 1 keeps each replica on one core, so that N replicas
    /// on N cores read as N machines of one core each.
    #[arg(long, default_value_t = 0)]
    pass_threads: usize,
    /// Seed of the synthetic cluster and pods.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// One decision replica under load.
struct Replica {
    endpoint: String,
    client: PlacementServiceClient<Channel>,
    /// The process, when this tool started it.
    child: Option<Child>,
    inflight: AtomicUsize,
}

impl Replica {
    fn proc(&self) -> Option<Proc> {
        self.child.as_ref().map(|c| Proc::Pid(c.id()))
    }

    fn memory(&self) -> Option<Memory> {
        self.proc().and_then(Proc::memory)
    }

    fn cpu(&self) -> Option<Duration> {
        self.proc().and_then(Proc::cpu)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

async fn connect(endpoint: &str) -> anyhow::Result<PlacementServiceClient<Channel>> {
    let channel = Endpoint::from_shared(endpoint.to_string())
        .with_context(|| format!("invalid endpoint {endpoint:?}"))?
        .tcp_nodelay(true)
        .connect()
        .await
        .with_context(|| format!("connecting to {endpoint}"))?;
    Ok(PlacementServiceClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES))
}

/// Starts `scheduler-service` on a free loopback port: it binds 127.0.0.1:0 and the port is read
/// from its JSON "listening" log line; the rest of its log is drained and dropped.
async fn start_replica(bin: &PathBuf, pass_threads: usize) -> anyhow::Result<Replica> {
    let mut command = Command::new(bin);
    command
        .args([
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "off",
            "--log-format",
            "json",
            "--pass-threads",
            &pass_threads.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl is async-signal-safe; it has the kernel kill the replica when this tool
        // dies, even by a signal that skips `Drop`.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = command.spawn().with_context(|| format!("starting {}", bin.display()))?;
    let stderr = child.stderr.take().context("scheduler-service stderr")?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.is_some() {
                // The JSON log flattens event fields into the line's object.
                let addr = serde_json::from_str::<serde_json::Value>(&line).ok().and_then(|v| {
                    let listening = v.get("message")?.as_str()? == "placement decision service listening";
                    listening.then(|| v.get("addr")?.as_str().map(str::to_string)).flatten()
                });
                if let Some(addr) = addr {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(addr);
                    }
                }
            }
        }
    });
    let addr = match tokio::time::timeout(Duration::from_secs(30), rx).await {
        Ok(Ok(addr)) => addr,
        _ => {
            let _ = child.kill();
            let status = child.wait().ok();
            bail!(
                "{} did not report its listening address (exit: {status:?})",
                bin.display()
            );
        }
    };
    let endpoint = format!("http://{addr}");
    let client = match connect(&endpoint).await {
        Ok(c) => c,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    Ok(Replica {
        endpoint,
        client,
        child: Some(child),
        inflight: AtomicUsize::new(0),
    })
}

/// Latency percentiles in milliseconds (nearest rank).
#[derive(Debug, Clone, Copy, Serialize)]
struct Latency {
    samples: usize,
    mean_ms: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

impl Latency {
    fn of(samples: &mut [Duration]) -> Self {
        samples.sort_unstable();
        let n = samples.len();
        let at = |p: f64| {
            if n == 0 {
                return 0.0;
            }
            let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
            samples[rank - 1].as_secs_f64() * 1e3
        };
        let mean = if n == 0 {
            0.0
        } else {
            samples.iter().map(Duration::as_secs_f64).sum::<f64>() / n as f64 * 1e3
        };
        Self {
            samples: n,
            mean_ms: mean,
            p50_ms: at(0.50),
            p99_ms: at(0.99),
            max_ms: at(1.0),
        }
    }
}

/// A full snapshot sync to one replica.
#[derive(Debug, Clone, Serialize)]
struct FullSync {
    replica: String,
    request_bytes: usize,
    ms: f64,
    nodes: u32,
    pods: u32,
}

/// Deltas of one size on the stored snapshot.
#[derive(Debug, Clone, Serialize)]
struct DeltaSync {
    nodes_changed: usize,
    request_bytes: usize,
    /// The first delta on the freshly synced snapshot, apart: it may pay one-time costs.
    first_ms: f64,
    /// The deltas after the first.
    latency: Latency,
}

/// Times `args.rank_samples` Rank calls of distinct pods one at a time on `replica`.
async fn measure_rank(
    replica: &Replica,
    snapshot_id: &str,
    args: &Args,
    infeasible_limit: Option<u32>,
) -> anyhow::Result<RankRun> {
    let rank_pods = synth::distinct_pods(args.rank_samples.max(1), args.seed ^ 0x7a4c);
    let mut latencies = Vec::with_capacity(rank_pods.len());
    let (mut rank_bytes, mut rank_infeasible) = (0, 0);
    let mut client = replica.client.clone();
    for (i, pod) in rank_pods.into_iter().enumerate() {
        let req = proto::RankRequest {
            snapshot: snapshot_ref(snapshot_id),
            pod: Some(pod),
            policy: String::new(),
            top_k: RANK_TOP_K,
            seed: i as u64,
            infeasible_limit,
        };
        let t = Instant::now();
        let resp = client.rank(req).await.context("Rank")?.into_inner();
        latencies.push(t.elapsed());
        rank_bytes += resp.encoded_len();
        rank_infeasible += resp.infeasible.len();
    }
    let calls = latencies.len().max(1);
    Ok(RankRun {
        latency: Latency::of(&mut latencies),
        mean_response_bytes: rank_bytes / calls,
        mean_infeasible_nodes: rank_infeasible / calls,
    })
}

/// Times `samples` ListPolicies calls one at a time: an RPC whose handler does no work, so its
/// latency is the loopback transport's floor (client, HTTP/2, server runtime) under every Rank.
async fn measure_floor(replica: &Replica, samples: usize) -> anyhow::Result<Latency> {
    let mut client = replica.client.clone();
    let mut latencies = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        client
            .list_policies(proto::ListPoliciesRequest {})
            .await
            .context("ListPolicies")?;
        latencies.push(t.elapsed());
    }
    Ok(Latency::of(&mut latencies))
}

/// Rank calls one at a time.
#[derive(Debug, Clone, Serialize)]
struct RankRun {
    latency: Latency,
    /// Mean encoded size of an answer: the top nodes and every infeasible node with its reasons.
    mean_response_bytes: usize,
    /// Mean number of infeasible nodes listed per answer.
    mean_infeasible_nodes: usize,
}

/// One Schedule measurement.
#[derive(Debug, Clone, Serialize)]
struct ScheduleRun {
    name: String,
    replicas: usize,
    in_flight: usize,
    batches: usize,
    pods: usize,
    placed: usize,
    wall_s: f64,
    pods_per_s: f64,
    batch_latency: Latency,
    /// CPU time of the replicas used, per decided pod (µs).
    replica_cpu_us_per_pod: Option<f64>,
    /// CPU time of this client, per decided pod (µs).
    client_cpu_us_per_pod: Option<f64>,
}

/// Resident memory of one replica at the points measured.
#[derive(Debug, Clone, Serialize)]
struct ReplicaMemory {
    replica: String,
    after_sync: Option<Memory>,
    after_load: Option<Memory>,
}

/// Everything measured.
#[derive(Debug, Clone, Serialize)]
struct Report {
    nodes: usize,
    bound_pods: usize,
    batch_size: usize,
    /// The replicas' `--pass-threads` (0: the service's default; not known for `--endpoints`).
    pass_threads: Option<usize>,
    machine: BTreeMap<String, String>,
    full_sync: Vec<FullSync>,
    deltas: Vec<DeltaSync>,
    rank: RankRun,
    /// The same calls with `infeasible_limit: 0` (only the best nodes in the answer).
    rank_best_only: RankRun,
    /// ListPolicies one at a time, as many calls as Rank: the RPC floor under each Rank.
    rpc_floor: Latency,
    schedule: Vec<ScheduleRun>,
    memory: Vec<ReplicaMemory>,
}

fn snapshot_ref(id: &str) -> Option<proto::SnapshotRef> {
    Some(proto::SnapshotRef {
        source: Some(snapshot_ref::Source::SnapshotId(id.to_string())),
    })
}

/// Syncs `req` to a replica, returning the stored snapshot's answer and the wall time.
async fn sync(
    replica: &Replica,
    req: proto::SyncSnapshotRequest,
) -> anyhow::Result<(proto::SyncSnapshotResponse, Duration)> {
    let mut client = replica.client.clone();
    let t = Instant::now();
    let resp = client
        .sync_snapshot(req)
        .await
        .with_context(|| format!("SyncSnapshot on {}", replica.endpoint))?
        .into_inner();
    Ok((resp, t.elapsed()))
}

/// Times `samples` deltas that each relabel `changed` nodes of the stored snapshot `base`.
async fn measure_delta(
    replica: &Replica,
    cluster: &proto::Snapshot,
    base: &str,
    changed: usize,
    samples: usize,
) -> anyhow::Result<DeltaSync> {
    let mut latencies = Vec::with_capacity(samples);
    let mut bytes = 0;
    let stride = (cluster.nodes.len() / changed.max(1)).max(1);
    for sample in 0..samples {
        let upsert_nodes: Vec<proto::Node> = (0..changed)
            .map(|i| {
                let mut node = cluster.nodes[(i * stride + sample) % cluster.nodes.len()].clone();
                node.labels
                    .insert("example.com/load-sample".into(), format!("s{sample}"));
                node
            })
            .collect();
        let req = proto::SyncSnapshotRequest {
            kind: Some(sync_snapshot_request::Kind::Delta(proto::SnapshotDelta {
                base_snapshot_id: base.to_string(),
                upsert_nodes,
                ..Default::default()
            })),
        };
        bytes = req.encoded_len();
        let (_, took) = sync(replica, req).await?;
        latencies.push(took);
    }
    let first = latencies.remove(0);
    Ok(DeltaSync {
        nodes_changed: changed,
        request_bytes: bytes,
        first_ms: first.as_secs_f64() * 1e3,
        latency: Latency::of(&mut latencies),
    })
}

/// Schedules `batches` requests (cycling through `pool`) with `in_flight` concurrent calls spread
/// over `replicas`: each call goes to the less loaded of two random choices, as the binder picks.
/// With `partitioned`, the concurrent calls each keep to their own node partition (as
/// `binder-agent --batches-in-flight` decides them; the nodes carry their partition among
/// `in_flight`): call `w`'s pods select partition `w`.
async fn run_schedule(
    name: &str,
    replicas: &[Arc<Replica>],
    pool: Arc<Vec<proto::ScheduleRequest>>,
    batches: usize,
    in_flight: usize,
    partitioned: bool,
) -> anyhow::Result<ScheduleRun> {
    let next = Arc::new(AtomicUsize::new(0));
    let rng = Arc::new(AtomicU64::new(0x10ad));
    let replicas: Arc<Vec<Arc<Replica>>> = Arc::new(replicas.to_vec());
    let cpu_before: Option<Duration> = replicas.iter().map(|r| r.cpu()).sum();
    let client_before = Proc::Myself.cpu();
    let start = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..in_flight.max(1) {
        let (next, rng, replicas, pool) = (next.clone(), rng.clone(), replicas.clone(), pool.clone());
        workers.push(tokio::spawn(async move {
            let mut out: Vec<(Duration, usize, usize)> = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= batches {
                    return Ok::<_, anyhow::Error>(out);
                }
                let replica = pick(&replicas, &rng);
                let mut req = pool[i % pool.len()].clone();
                if partitioned {
                    for pod in &mut req.pods {
                        pod.node_selector
                            .insert(partition::PARTITION_LABEL.to_string(), worker.to_string());
                    }
                }
                let pods = req.pods.len();
                replica.inflight.fetch_add(1, Ordering::Relaxed);
                let mut client = replica.client.clone();
                let t = Instant::now();
                let resp = client.schedule(req).await;
                let took = t.elapsed();
                replica.inflight.fetch_sub(1, Ordering::Relaxed);
                let resp = resp
                    .with_context(|| format!("Schedule on {}", replica.endpoint))?
                    .into_inner();
                ensure!(
                    resp.placements.len() == pods,
                    "Schedule answered {} placements for {pods} pods",
                    resp.placements.len()
                );
                let placed = resp
                    .placements
                    .iter()
                    .filter(|p| matches!(p.outcome, Some(proto::placement::Outcome::NodeName(_))))
                    .count();
                out.push((took, pods, placed));
            }
        }));
    }
    let mut latencies = Vec::with_capacity(batches);
    let (mut pods, mut placed) = (0, 0);
    for w in workers {
        for (took, p, ok) in w.await.context("load worker")?? {
            latencies.push(took);
            pods += p;
            placed += ok;
        }
    }
    let wall = start.elapsed();
    let cpu_after: Option<Duration> = replicas.iter().map(|r| r.cpu()).sum();
    let client_after = Proc::Myself.cpu();
    let per_pod = |before: Option<Duration>, after: Option<Duration>| {
        let (b, a) = (before?, after?);
        (pods > 0).then(|| a.saturating_sub(b).as_secs_f64() * 1e6 / pods as f64)
    };
    Ok(ScheduleRun {
        name: name.to_string(),
        replicas: replicas.len(),
        in_flight: in_flight.max(1),
        batches: latencies.len(),
        pods,
        placed,
        wall_s: wall.as_secs_f64(),
        pods_per_s: pods as f64 / wall.as_secs_f64(),
        batch_latency: Latency::of(&mut latencies),
        replica_cpu_us_per_pod: per_pod(cpu_before, cpu_after),
        client_cpu_us_per_pod: per_pod(client_before, client_after),
    })
}

/// The less loaded (calls in flight) of two random replicas, as `binder-agent`'s `ReplicaSet::pick`.
fn pick(replicas: &[Arc<Replica>], rng: &AtomicU64) -> Arc<Replica> {
    let n = replicas.len() as u64;
    if n == 1 {
        return replicas[0].clone();
    }
    let draw = || {
        let mut z = rng.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        &replicas[((z ^ (z >> 31)) % n) as usize]
    };
    let (a, b) = (draw(), draw());
    let load = |r: &Replica| r.inflight.load(Ordering::Relaxed);
    if load(b) < load(a) {
        b.clone()
    } else {
        a.clone()
    }
}

fn machine() -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert(
        "cpus".into(),
        std::thread::available_parallelism().map_or_else(|_| "?".into(), |n| n.to_string()),
    );
    if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
        if let Some(model) = info.lines().find_map(|l| l.strip_prefix("model name")) {
            m.insert(
                "cpu_model".into(),
                model.trim_start_matches([' ', '\t', ':']).to_string(),
            );
        }
    }
    if let Ok(info) = std::fs::read_to_string("/proc/meminfo") {
        if let Some(total) = info.lines().find_map(|l| l.strip_prefix("MemTotal:")) {
            m.insert("memory".into(), total.trim().to_string());
        }
    }
    m
}

fn validate(args: &Args) -> anyhow::Result<()> {
    ensure!(args.nodes > 0, "--nodes: must be at least 1");
    ensure!(
        args.pods / args.nodes <= 110,
        "--pods: at most 110 per node (110 × --nodes = {})",
        110 * args.nodes
    );
    ensure!(args.batch_size > 0, "--batch-size: must be at least 1");
    ensure!(args.batches > 0, "--batches: must be at least 1");
    ensure!(args.delta_samples > 1, "--delta-samples: must be at least 2");
    ensure!(args.in_flight > 0, "--in-flight: must be at least 1");
    ensure!(
        !args.endpoints.is_empty() || args.replicas > 0,
        "--replicas: must be at least 1 (or give --endpoints)"
    );
    Ok(())
}

fn service_bin(args: &Args) -> anyhow::Result<PathBuf> {
    if let Some(bin) = &args.service_bin {
        return Ok(bin.clone());
    }
    let me = std::env::current_exe().context("locating this executable")?;
    let bin = me.with_file_name(format!("scheduler-service{}", std::env::consts::EXE_SUFFIX));
    ensure!(
        bin.exists(),
        "{} not found; build it (cargo build --release -p scheduler-service) or pass --service-bin",
        bin.display()
    );
    Ok(bin)
}

fn say(quiet: bool, msg: impl std::fmt::Display) {
    if !quiet {
        eprintln!("placement-load: {msg}");
    }
}

async fn run(args: Args) -> anyhow::Result<Report> {
    validate(&args)?;
    let quiet = args.json;
    let shape = ClusterShape {
        nodes: args.nodes,
        pods_per_node: args.pods / args.nodes,
        ..ClusterShape::default()
    };
    let t = Instant::now();
    let mut cluster = synth::cluster(&shape, args.seed);
    // Each node carries its partition among the batches in flight, as the binder sends it with
    // --batches-in-flight (read by the partitioned runs only).
    let partitions = u32::try_from(args.in_flight).unwrap_or(u32::MAX);
    for node in &mut cluster.nodes {
        let p = partition::partition_of(&node.name, partitions);
        node.labels
            .insert(partition::PARTITION_LABEL.to_string(), p.to_string());
    }
    say(
        quiet,
        format!(
            "generated {} nodes, {} bound pods in {:.0} ms",
            cluster.nodes.len(),
            cluster.pods.len(),
            t.elapsed().as_secs_f64() * 1e3
        ),
    );

    let mut replicas = Vec::new();
    if args.endpoints.is_empty() {
        let bin = service_bin(&args)?;
        for _ in 0..args.replicas {
            replicas.push(Arc::new(start_replica(&bin, args.pass_threads).await?));
        }
    } else {
        for e in &args.endpoints {
            replicas.push(Arc::new(Replica {
                endpoint: e.clone(),
                client: connect(e).await?,
                child: None,
                inflight: AtomicUsize::new(0),
            }));
        }
    }
    say(
        quiet,
        format!(
            "replicas: {}",
            replicas
                .iter()
                .map(|r| r.endpoint.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );

    // Full sync, each replica in turn.
    // As the binder sends it: every node and no pod, then deltas of FULL_SYNC_CHUNK_PODS pods
    // each, so no message nears the size limit at a million pods.
    let full = proto::SyncSnapshotRequest {
        kind: Some(sync_snapshot_request::Kind::Full(proto::Snapshot {
            pods: Vec::new(),
            nodes: cluster.nodes.iter().take(FULL_SYNC_CHUNK_NODES).cloned().collect(),
            ..cluster.clone()
        })),
    };
    let node_deltas = || {
        cluster
            .nodes
            .chunks(FULL_SYNC_CHUNK_NODES)
            .skip(1)
            .map(|c| proto::SnapshotDelta {
                upsert_nodes: c.to_vec(),
                ..Default::default()
            })
    };
    let pod_deltas = || {
        cluster.pods.chunks(FULL_SYNC_CHUNK_PODS).map(|c| proto::SnapshotDelta {
            upsert_pods: c.to_vec(),
            ..Default::default()
        })
    };
    let mut full_sync = Vec::new();
    let mut snapshot_id = String::new();
    for r in &replicas {
        // The bytes of every message, counted as they are sent (the same for each replica).
        let mut full_bytes = full.encoded_len();
        let (mut resp, mut took) = sync(r, full.clone()).await?;
        for d in node_deltas().chain(pod_deltas()) {
            let delta = proto::SyncSnapshotRequest {
                kind: Some(sync_snapshot_request::Kind::Delta(proto::SnapshotDelta {
                    base_snapshot_id: resp.snapshot_id.clone(),
                    ..d
                })),
            };
            full_bytes += delta.encoded_len();
            let (next, more) = sync(r, delta).await?;
            resp = next;
            took += more;
        }
        ensure!(
            snapshot_id.is_empty() || snapshot_id == resp.snapshot_id,
            "replicas computed different snapshot ids"
        );
        snapshot_id = resp.snapshot_id;
        say(
            quiet,
            format!("full sync to {}: {:.0} ms", r.endpoint, took.as_secs_f64() * 1e3),
        );
        full_sync.push(FullSync {
            replica: r.endpoint.clone(),
            request_bytes: full_bytes,
            ms: took.as_secs_f64() * 1e3,
            nodes: resp.node_count,
            pods: resp.pod_count,
        });
    }
    drop(full);
    let after_sync: Vec<Option<Memory>> = replicas.iter().map(|r| r.memory()).collect();

    // Deltas on the first replica: one node, then 1% of the nodes.
    let mut deltas = Vec::new();
    let mut sizes = vec![1];
    if args.nodes / 100 > 1 {
        sizes.push(args.nodes / 100);
    }
    for changed in sizes {
        deltas.push(measure_delta(&replicas[0], &cluster, &snapshot_id, changed, args.delta_samples).await?);
    }
    say(quiet, "deltas timed");

    // Rank, one call at a time, on the first replica: with every infeasible node listed, then
    // with none.
    let rank = measure_rank(&replicas[0], &snapshot_id, &args, None).await?;
    say(quiet, format!("rank p99 {:.3} ms", rank.latency.p99_ms));
    let rank_best_only = measure_rank(&replicas[0], &snapshot_id, &args, Some(0)).await?;
    say(
        quiet,
        format!("rank (infeasible_limit 0) p99 {:.3} ms", rank_best_only.latency.p99_ms),
    );
    let rpc_floor = measure_floor(&replicas[0], args.rank_samples.max(1)).await?;
    say(quiet, format!("RPC floor p99 {:.3} ms", rpc_floor.p99_ms));

    // Schedule batches.
    let pool_batches = args.batches.min(DISTINCT_POOL_BATCHES);
    let distinct = synth::distinct_pods(pool_batches * args.batch_size, args.seed ^ 0xd157);
    let distinct: Arc<Vec<proto::ScheduleRequest>> = Arc::new(
        distinct
            .chunks(args.batch_size)
            .enumerate()
            .map(|(i, pods)| proto::ScheduleRequest {
                snapshot: snapshot_ref(&snapshot_id),
                pods: pods.to_vec(),
                policy: String::new(),
                seed: i as u64,
                // Every batch is decided on the same synced snapshot; nothing is kept.
                assume: false,
            })
            .collect(),
    );
    let workloads: Arc<Vec<proto::ScheduleRequest>> = Arc::new(
        (0..pool_batches)
            .map(|i| proto::ScheduleRequest {
                snapshot: snapshot_ref(&snapshot_id),
                pods: synth::replica_pods(args.batch_size, args.seed ^ (0x3e91 + i as u64)),
                policy: String::new(),
                seed: i as u64,
                // Every batch is decided on the same synced snapshot; nothing is kept.
                assume: false,
            })
            .collect(),
    );
    let mut schedule = Vec::new();
    let first = &replicas[..1];
    schedule.push(run_schedule("distinct pods", first, distinct.clone(), args.batches, 1, false).await?);
    schedule.push(run_schedule("replica pods", first, workloads.clone(), args.batches, 1, false).await?);
    for k in 1..=replicas.len() {
        for partitioned in [false, true] {
            if partitioned && args.in_flight < 2 {
                continue;
            }
            let name = if partitioned { "partitioned" } else { "distinct pods" };
            let run = run_schedule(
                name,
                &replicas[..k],
                distinct.clone(),
                args.batches,
                args.in_flight,
                partitioned,
            )
            .await?;
            say(
                quiet,
                format!(
                    "{k} replica(s), {} in flight{}: {:.0} pods/s, {} of {} placed",
                    args.in_flight,
                    if partitioned { " on node partitions" } else { "" },
                    run.pods_per_s,
                    run.placed,
                    run.pods
                ),
            );
            schedule.push(run);
        }
    }

    let memory = replicas
        .iter()
        .zip(after_sync)
        .map(|(r, after_sync)| ReplicaMemory {
            replica: r.endpoint.clone(),
            after_sync,
            after_load: r.memory(),
        })
        .collect();
    Ok(Report {
        nodes: cluster.nodes.len(),
        bound_pods: cluster.pods.len(),
        batch_size: args.batch_size,
        pass_threads: args.endpoints.is_empty().then_some(args.pass_threads),
        machine: machine(),
        full_sync,
        deltas,
        rank,
        rank_best_only,
        rpc_floor,
        schedule,
        memory,
    })
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

fn print_table(r: &Report) {
    println!(
        "placement-load: {} nodes, {} bound pods, batches of {}; replicas' --pass-threads {}; machine: {}",
        r.nodes,
        r.bound_pods,
        r.batch_size,
        r.pass_threads.map_or_else(|| "-".into(), |n| n.to_string()),
        r.machine
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!();
    println!("{:<60} {:>14} {:>24}", "snapshot sync", "request bytes", "ms");
    for s in &r.full_sync {
        println!(
            "{:<60} {:>14} {:>24.1}",
            format!("full ({} nodes, {} pods) to {}", s.nodes, s.pods, s.replica),
            s.request_bytes,
            s.ms
        );
    }
    for d in &r.deltas {
        println!(
            "{:<60} {:>14} {:>24}",
            format!(
                "delta, {} node(s) changed (first; p50 / p99 of the rest)",
                d.nodes_changed
            ),
            d.request_bytes,
            format!("{:.3}; {:.3} / {:.3}", d.first_ms, d.latency.p50_ms, d.latency.p99_ms)
        );
    }
    println!();
    println!(
        "Rank over gRPC, one at a time, top {RANK_TOP_K}: {} calls, mean {:.3} ms, p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        r.rank.latency.samples, r.rank.latency.mean_ms, r.rank.latency.p50_ms, r.rank.latency.p99_ms, r.rank.latency.max_ms
    );
    println!(
        "  answers: {} bytes and {} infeasible nodes listed on average",
        r.rank.mean_response_bytes, r.rank.mean_infeasible_nodes
    );
    let b = &r.rank_best_only;
    println!(
        "Rank with infeasible_limit 0: mean {:.3} ms, p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms; answers {} bytes",
        b.latency.mean_ms, b.latency.p50_ms, b.latency.p99_ms, b.latency.max_ms, b.mean_response_bytes
    );
    let f = &r.rpc_floor;
    println!(
        "RPC floor (ListPolicies, no work): mean {:.3} ms, p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        f.mean_ms, f.p50_ms, f.p99_ms, f.max_ms
    );
    println!();
    println!(
        "{:<14} {:>8} {:>9} {:>7} {:>9} {:>10} {:>9} {:>9} {:>13} {:>13}",
        "Schedule",
        "replicas",
        "in flight",
        "pods",
        "placed",
        "pods/s",
        "p50 ms",
        "p99 ms",
        "replica µs/pod",
        "client µs/pod"
    );
    for s in &r.schedule {
        println!(
            "{:<14} {:>8} {:>9} {:>7} {:>9} {:>10.0} {:>9.2} {:>9.2} {:>13} {:>13}",
            s.name,
            s.replicas,
            s.in_flight,
            s.pods,
            s.placed,
            s.pods_per_s,
            s.batch_latency.p50_ms,
            s.batch_latency.p99_ms,
            opt(s.replica_cpu_us_per_pod, 1),
            opt(s.client_cpu_us_per_pod, 1)
        );
    }
    println!();
    println!(
        "{:<28} {:>20} {:>20}",
        "replica memory (MiB)", "after sync rss/hwm", "after load rss/hwm"
    );
    let mem = |m: Option<Memory>| m.map_or_else(|| "-".into(), |m| format!("{:.0} / {:.0}", m.rss_mib, m.hwm_mib));
    for m in &r.memory {
        println!("{:<28} {:>20} {:>20}", m.replica, mem(m.after_sync), mem(m.after_load));
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let json = args.json;
    let report = run(args).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(())
}
