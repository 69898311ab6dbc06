//! Criterion benchmark of the scheduling engine on a synthetic cluster at Kubernetes' scalability
//! envelope: 5,000 nodes and 150,000 bound pods (`synth::ClusterShape::default()`).
//!
//! Groups: `rank/<N>_nodes` (one Rank of a distinct pod, top 10), `rank/topology_pod` (a pod with
//! required anti-affinity and zone spreading), `schedule/distinct_pods` and
//! `schedule/replica_pods` (batches of 256 pods with neither; `schedule/distinct_pods_without_topology_plugins`
//! the same distinct batch under a policy without the two topology plugins; `schedule/distinct_pods_with_cel_rules`
//! under the default policy plus one CEL filter and one CEL score rule, `_per_request` the same with a new
//! evaluator per batch as the service makes one per request), `schedule/topology_pods` (256 pods
//! of 8-replica workloads with hostname anti-affinity and zone/hostname spreading),
//! `schedule/dra_pods` (batches of 256 pods with a ResourceClaim of 1 to 4 GPUs each, on 500 nodes
//! with 8 GPU-like devices each), `snapshot/full_build` and `snapshot/delta_one_node`. After them it times 2,000 Rank calls one
//! by one and prints their latency percentiles, and places 1,000 PodGroups of 8 to 64 pods, each
//! in one rack of 20 nodes ([`pod_group_throughput`]), printing group pods per second.
//!
//! `PLACEMENT_BENCH_NODES` sets the node count (pods are 30 per node). It defaults to 5,000 for
//! `cargo bench` and to 500 in criterion's test mode (`cargo bench -- --test`, `cargo test --benches`),
//! which runs every benchmark once as a smoke test. `PLACEMENT_PASS_THREADS` sets the threads a
//! pod's pass over the nodes may use (the service's `--pass-threads`: 1 keeps it on one core). It
//! allocates with mimalloc, as the service does.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, SamplingMode, Throughput};
use placement_scheduler::engine::model::{NodeSpec, PodSpec};
use placement_scheduler::engine::{Deadline, Decision, Delta, Evaluator, Policy, Profile, Snapshot};
use placement_scheduler::grpc::convert;
use placement_scheduler::proto;
use placement_scheduler::synth::{self, ClusterShape};

// The allocator the service binary runs with, set up as it does (`src/main.rs`), so allocation
// costs are the service's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SEED: u64 = 42;
const BATCH: usize = 256;
const TOP_K: usize = 10;
const LATENCY_SAMPLES: usize = 2000;
/// Batches of never-repeated-lately distinct pods (`schedule/distinct_pods_first_seen`).
const FRESH_BATCHES: usize = 40;

/// Everything the benchmarks share, built once.
struct Fixture {
    nodes: Vec<NodeSpec>,
    pods: Vec<PodSpec>,
    snapshot: Snapshot,
    profile: Profile,
    /// kube's default policy without InterPodAffinity and PodTopologySpread, to show what they
    /// cost pods that do not use them.
    without_topology: Profile,
    /// kube's default policy with one CEL filter rule and one CEL score rule.
    with_rules: Profile,
    distinct: Vec<PodSpec>,
    /// Other distinct pods, for batches whose constraints are not in the static cache.
    fresh: Vec<PodSpec>,
    replicas: Vec<PodSpec>,
    /// Pods with anti-affinity and spreading, 8 replicas per workload.
    topology: Vec<PodSpec>,
    delta: Delta,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn convert_pods(pods: &[proto::Pod]) -> Vec<PodSpec> {
    convert::list("pods", pods, convert::pod).expect("synthetic pods are valid")
}

impl Fixture {
    fn new(node_count: usize) -> Self {
        let shape = ClusterShape::with_nodes(node_count);
        let t = Instant::now();
        let cluster = synth::cluster(&shape, SEED);
        let generated = t.elapsed();
        let t = Instant::now();
        let (nodes, pods, _, _) = convert::snapshot("snapshot", &cluster).expect("synthetic snapshot is valid");
        let converted = t.elapsed();
        let t = Instant::now();
        let snapshot = Snapshot::build(nodes.clone(), pods.clone()).expect("synthetic snapshot builds");
        let built = t.elapsed();
        println!(
            "setup: {} nodes, {} bound pods: generated in {:.0} ms, converted in {:.0} ms, Snapshot::build in {:.0} ms, \
             approx_bytes {} ({:.1} MiB), {} node classes",
            snapshot.nodes().len(),
            snapshot.pod_count(),
            ms(generated),
            ms(converted),
            ms(built),
            snapshot.approx_bytes(),
            snapshot.approx_bytes() as f64 / (1 << 20) as f64,
            snapshot.classes().len(),
        );

        // A delta like a watch event pair: one node relabelled, one pod moved to another node.
        let mut node = cluster.nodes[node_count / 2].clone();
        node.labels.insert("example.com/maintenance".into(), "scheduled".into());
        let mut pod = cluster.pods[0].clone();
        pod.node_name = cluster.nodes[node_count - 1].name.clone();
        let delta = Delta {
            upsert_nodes: vec![convert::node("node", &node).expect("valid node")],
            upsert_pods: vec![convert::pod("pod", &pod).expect("valid pod")],
            ..Default::default()
        };

        Self {
            nodes,
            pods,
            snapshot,
            profile: Profile::new(Policy::kube_default()),
            without_topology: Profile::new(without_topology_plugins()),
            with_rules: Profile::new(with_cel_rules()),
            distinct: convert_pods(&synth::distinct_pods(LATENCY_SAMPLES, SEED)),
            fresh: convert_pods(&synth::distinct_pods(FRESH_BATCHES * BATCH, SEED + 1)),
            replicas: convert_pods(&synth::replica_pods(BATCH, SEED)),
            topology: convert_pods(&synth::topology_pods(BATCH, 8, SEED)),
            delta,
        }
    }

    /// Prints how many pods of a batch found a node, so the numbers can be read in context.
    fn report_batch(&self, what: &str, pods: &[PodSpec]) {
        self.report_batch_under(&self.profile, what, pods);
    }

    /// The same under `profile`.
    fn report_batch_under(&self, profile: &Profile, what: &str, pods: &[PodSpec]) {
        let decisions = Evaluator::new(profile, &self.snapshot)
            .schedule(pods, SEED, Deadline::none())
            .expect("no deadline");
        let placed = decisions.iter().filter(|d| matches!(d, Decision::Node { .. })).count();
        println!("{what}: {placed} of {} pods placed", pods.len());
    }

    /// Prints what the first Rank on a snapshot made by a delta costs next to the second: the
    /// first pays for whatever the engine builds lazily per snapshot, which `delta_one_node` omits.
    fn report_first_rank_after_delta(&self) {
        let next = self.snapshot.apply(self.delta.clone()).expect("applies");
        let t = Instant::now();
        black_box(next.hot());
        let hot = t.elapsed();
        let t = Instant::now();
        black_box(next.image_postings());
        let postings = t.elapsed();
        let t = Instant::now();
        black_box(next.pod_index());
        let pod_index = t.elapsed();
        println!(
            "after delta_one_node, lazily built: hot {:.1} ms, image postings {:.1} ms, pod index {:.1} ms",
            ms(hot),
            ms(postings),
            ms(pod_index)
        );
        let mut evaluator = Evaluator::new(&self.profile, &next);
        let pod = &self.distinct[0];
        let mut time = || {
            let t = Instant::now();
            black_box(evaluator.rank(pod, TOP_K, SEED, Deadline::none()).expect("no deadline"));
            t.elapsed().as_secs_f64() * 1e6
        };
        let (first, second) = (time(), time());
        println!("after delta_one_node: first Rank {first:.0} µs, second Rank {second:.0} µs (same pod)");
    }
}

/// kube's default policy without the two topology plugins.
fn without_topology_plugins() -> Policy {
    use placement_scheduler::engine::policy::{FilterPlugin, ScorePlugin};
    let mut policy = Policy::kube_default();
    policy
        .filters
        .retain(|f| !matches!(f, FilterPlugin::InterPodAffinity | FilterPlugin::PodTopologySpread));
    policy
        .scores
        .retain(|s| !matches!(s.plugin, ScorePlugin::InterPodAffinity | ScorePlugin::PodTopologySpread));
    policy
}

/// kube's default policy with a CEL filter rule on a label and a CEL score rule on free cpu.
fn with_cel_rules() -> Policy {
    use placement_scheduler::engine::rules::{FilterRule, Rules, ScoreRule};
    let policy = Policy {
        name: "with-rules".into(),
        rules: Rules {
            filters: vec![FilterRule {
                name: "ml-needs-ssd".into(),
                expression: "pod.metadata.labels['team'] != 'ml' || ('disktype' in node.metadata.labels && node.metadata.labels['disktype'] == 'ssd')"
                    .into(),
                reason: "node(s) didn't have an ssd".into(),
            }],
            scores: vec![ScoreRule {
                name: "free-cpu".into(),
                expression: "node.status.allocatable.cpu - node.status.requested.cpu".into(),
                weight: 1,
            }],
        },
        ..Policy::kube_default()
    };
    policy.validate().expect("the rules compile");
    policy
}

fn bench_rank(c: &mut Criterion, fx: &Fixture) {
    let mut group = c.benchmark_group("rank");
    group.throughput(Throughput::Elements(1));
    let mut evaluator = Evaluator::new(&fx.profile, &fx.snapshot);
    let mut i = 0usize;
    group.bench_function(format!("{}_nodes", fx.snapshot.nodes().len()), |b| {
        b.iter(|| {
            let pod = &fx.distinct[i % fx.distinct.len()];
            i += 1;
            black_box(evaluator.rank(pod, TOP_K, SEED, Deadline::none()).expect("no deadline"))
        })
    });
    let mut j = 0usize;
    group.bench_function("topology_pod", |b| {
        b.iter(|| {
            let pod = &fx.topology[j % fx.topology.len()];
            j += 1;
            black_box(evaluator.rank(pod, TOP_K, SEED, Deadline::none()).expect("no deadline"))
        })
    });
    group.finish();
}

fn bench_schedule(c: &mut Criterion, fx: &Fixture) {
    let mut group = c.benchmark_group("schedule");
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(BATCH as u64));
    let mut evaluator = Evaluator::new(&fx.profile, &fx.snapshot);
    let distinct = &fx.distinct[..BATCH];
    group.bench_function("distinct_pods", |b| {
        b.iter(|| {
            black_box(
                evaluator
                    .schedule(distinct, SEED, Deadline::none())
                    .expect("no deadline"),
            )
        })
    });
    // Batches from 10,240 other distinct pods in turn: constraints the replica has not met lately,
    // as every pod of a real stream (the batch above repeats, so its static predicates are cached).
    let mut next = 0usize;
    group.bench_function("distinct_pods_first_seen", |b| {
        b.iter(|| {
            let at = next % FRESH_BATCHES * BATCH;
            next += 1;
            let batch = &fx.fresh[at..at + BATCH];
            black_box(evaluator.schedule(batch, SEED, Deadline::none()).expect("no deadline"))
        })
    });
    let mut plain = Evaluator::new(&fx.without_topology, &fx.snapshot);
    group.bench_function("distinct_pods_without_topology_plugins", |b| {
        b.iter(|| black_box(plain.schedule(distinct, SEED, Deadline::none()).expect("no deadline")))
    });
    // One CEL filter rule and one CEL score rule (see `with_cel_rules`): the filter rule is read
    // per node class, the score rule per node but without the pod (kept per snapshot), so the
    // pods take the plain pass.
    let mut ruled = Evaluator::new(&fx.with_rules, &fx.snapshot);
    group.bench_function("distinct_pods_with_cel_rules", |b| {
        b.iter(|| black_box(ruled.schedule(distinct, SEED, Deadline::none()).expect("no deadline")))
    });
    // The same with a new evaluator per batch, as the service makes one per request: the rules'
    // columns are built again from the snapshot's kept outcomes each time.
    group.bench_function("distinct_pods_with_cel_rules_per_request", |b| {
        b.iter(|| {
            let mut fresh = Evaluator::new(&fx.with_rules, &fx.snapshot);
            black_box(fresh.schedule(distinct, SEED, Deadline::none()).expect("no deadline"))
        })
    });
    group.bench_function("replica_pods", |b| {
        b.iter(|| {
            black_box(
                evaluator
                    .schedule(&fx.replicas, SEED, Deadline::none())
                    .expect("no deadline"),
            )
        })
    });
    group.bench_function("topology_pods", |b| {
        b.iter(|| {
            black_box(
                evaluator
                    .schedule(&fx.topology, SEED, Deadline::none())
                    .expect("no deadline"),
            )
        })
    });
    group.finish();
}

/// Nodes of the DRA benchmark (issue 38's: 500 nodes with 8 GPU-like devices each).
const DRA_NODES: usize = 500;
/// Devices per node.
const DRA_DEVICES: usize = 8;

/// A cluster of [`DRA_NODES`] synthetic nodes (with their bound pods), each with a ResourceSlice
/// of [`DRA_DEVICES`] GPUs (model, index, NUMA node, driver version, 80Gi of memory) of a class
/// selecting the driver, and `BATCH` distinct pods each with its own claim of 1 to 4 GPUs with a
/// selector on model and memory: every object through the API's conversion, as a replica gets it.
fn dra_fixture() -> (Snapshot, Vec<PodSpec>, impl Fn() -> Snapshot) {
    const DRIVER: &str = "gpu.example.com";
    let shape = ClusterShape::with_nodes(DRA_NODES);
    let mut cluster = synth::cluster(&shape, SEED);
    let attr = |v: proto::device_attribute::Value| proto::DeviceAttribute { value: Some(v) };
    cluster.device_classes = vec![proto::DeviceClass {
        name: "gpu".into(),
        selectors: vec![format!("device.driver == \"{DRIVER}\"")],
        extended_resource_name: String::new(),
        creation_timestamp_seconds: 0,
    }];
    cluster.resource_slices = cluster
        .nodes
        .iter()
        .enumerate()
        .map(|(n, node)| proto::ResourceSlice {
            name: format!("{}-gpus", node.name),
            driver: DRIVER.into(),
            pool_name: node.name.clone(),
            pool_generation: 1,
            pool_resource_slice_count: 1,
            node_name: node.name.clone(),
            devices: (0..DRA_DEVICES)
                .map(|i| proto::Device {
                    name: format!("gpu-{i}"),
                    attributes: [
                        (
                            "model".to_string(),
                            attr(proto::device_attribute::Value::String(
                                if n % 4 == 3 { "h100" } else { "a100" }.into(),
                            )),
                        ),
                        ("index".to_string(), attr(proto::device_attribute::Value::Int(i as i64))),
                        (
                            "numa".to_string(),
                            attr(proto::device_attribute::Value::Int((i / 4) as i64)),
                        ),
                        (
                            "driverVersion".to_string(),
                            attr(proto::device_attribute::Value::Version("1.2.3".into())),
                        ),
                    ]
                    .into_iter()
                    .collect(),
                    capacity: [("memory".to_string(), "80Gi".to_string())].into_iter().collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    let mut pods = synth::distinct_pods(BATCH, SEED + 7);
    cluster.resource_claims = (0..BATCH)
        .map(|i| proto::ResourceClaim {
            namespace: pods[i].namespace.clone(),
            name: format!("gpus-{i}"),
            uid: format!("claim-{i}"),
            requests: vec![proto::DeviceRequest {
                name: "gpu".into(),
                exactly: Some(proto::ExactDeviceRequest {
                    device_class_name: "gpu".into(),
                    selectors: vec![format!(
                        "device.attributes[\"{DRIVER}\"].model == \"a100\" && \
                         device.capacity[\"{DRIVER}\"].memory.compareTo(quantity(\"40Gi\")) >= 0"
                    )],
                    count: (i % 4 + 1) as i64,
                    ..Default::default()
                }),
                first_available: vec![],
            }],
            ..Default::default()
        })
        .collect();
    for (i, pod) in pods.iter_mut().enumerate() {
        pod.resource_claims = vec![proto::PodResourceClaim {
            name: "gpu".into(),
            resource_claim_name: format!("gpus-{i}"),
            ..Default::default()
        }];
    }
    let (nodes, bound, _, _) = convert::snapshot("snapshot", &cluster).expect("synthetic snapshot is valid");
    let devices = convert::devices("snapshot", &cluster).expect("synthetic DRA objects are valid");
    let build = move || {
        Snapshot::build(nodes.clone(), bound.clone())
            .and_then(|s| s.with_devices(devices.clone()))
            .expect("synthetic snapshot builds")
    };
    (build(), convert_pods(&pods), build)
}

/// `schedule/dra_pods`: batches of [`BATCH`] pods with one claim each on [`dra_fixture`], each
/// batch on the snapshot with every claim unallocated (the devices the batch's earlier pods
/// take are no one else's); the allocation verdicts the snapshot keeps for pods whose claims ask
/// alike serve the later batches. `schedule/dra_pods_after_delta`: each batch on a snapshot
/// derived by a delta (the pods the batch placed, bound), as a replica decides its next batch.
/// `schedule/dra_pods_first_seen`: the same batch on a new snapshot each time (built outside
/// the timing), nothing kept but the compiled selectors.
fn bench_dra(c: &mut Criterion) {
    let (snapshot, pods, rebuild) = dra_fixture();
    let profile = Profile::new(Policy::kube_default());
    let decisions = Evaluator::new(&profile, &snapshot)
        .schedule(&pods, SEED, Deadline::none())
        .expect("no deadline");
    let placed = decisions.iter().filter(|d| matches!(d, Decision::Node { .. })).count();
    let devices: usize = decisions
        .iter()
        .map(|d| match d {
            Decision::Node { devices, .. } => devices.iter().map(|c| c.allocation.devices.len()).sum(),
            Decision::Unschedulable(_) => 0,
        })
        .sum();
    println!(
        "schedule/dra_pods batch: {placed} of {} pods placed, {devices} devices allocated, on {DRA_NODES} nodes of {DRA_DEVICES} devices",
        pods.len()
    );
    let mut group = c.benchmark_group("schedule");
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(BATCH as u64));
    let mut evaluator = Evaluator::new(&profile, &snapshot);
    group.bench_function("dra_pods", |b| {
        b.iter(|| black_box(evaluator.schedule(&pods, SEED, Deadline::none()).expect("no deadline")))
    });
    // The same batches with placement's DevicePacking on (devices walked in packing order, nodes
    // scored by how full their devices get).
    let mut packing_policy = Policy::kube_default();
    packing_policy
        .scores
        .push(placement_scheduler::engine::policy::WeightedScore {
            plugin: placement_scheduler::engine::policy::ScorePlugin::DevicePacking,
            weight: 10,
        });
    let packing = Profile::new(packing_policy);
    let mut packed = Evaluator::new(&packing, &snapshot);
    group.bench_function("dra_pods_packing", |b| {
        b.iter(|| black_box(packed.schedule(&pods, SEED, Deadline::none()).expect("no deadline")))
    });
    // As a replica runs: each batch on the snapshot the previous one's placements were assumed
    // in (a delta of the bound pods), whose verdicts it inherits.
    let placed: Vec<PodSpec> = Evaluator::new(&profile, &snapshot)
        .schedule(&pods, SEED, Deadline::none())
        .expect("no deadline")
        .into_iter()
        .zip(&pods)
        .filter_map(|(d, p)| match d {
            Decision::Node { node, .. } => {
                let mut p = p.clone();
                p.uid = format!("{}-bound", p.uid).into();
                p.node_name = Some(node);
                Some(p)
            }
            Decision::Unschedulable(_) => None,
        })
        .collect();
    group.bench_function("dra_pods_after_delta", |b| {
        b.iter_batched(
            || {
                snapshot
                    .apply(Delta {
                        upsert_pods: placed.clone(),
                        ..Default::default()
                    })
                    .expect("a delta of bound pods")
            },
            |next| {
                black_box(
                    Evaluator::new(&profile, &next)
                        .schedule(&pods, SEED, Deadline::none())
                        .expect("no deadline"),
                );
                next
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("dra_pods_first_seen", |b| {
        b.iter_batched(
            &rebuild,
            |fresh| {
                let decisions = Evaluator::new(&profile, &fresh)
                    .schedule(&pods, SEED, Deadline::none())
                    .expect("no deadline");
                black_box(decisions);
                fresh
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn bench_snapshot(c: &mut Criterion, fx: &Fixture) {
    let mut group = c.benchmark_group("snapshot");
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(15));
    group.bench_function("full_build", |b| {
        b.iter_batched(
            || (fx.nodes.clone(), fx.pods.clone()),
            |(nodes, pods)| Snapshot::build(nodes, pods).expect("builds"),
            BatchSize::PerIteration,
        )
    });
    group.sampling_mode(SamplingMode::Auto);
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("delta_one_node", |b| {
        b.iter_batched(
            || fx.delta.clone(),
            |delta| fx.snapshot.apply(delta).expect("applies"),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// This process's CPU time so far.
fn cpu_time() -> Option<Duration> {
    placement_scheduler::procstat::Proc::Myself.cpu()
}

/// How much of the wall time since `(wall, cpu)` this process spent on a CPU, as a percentage.
/// Well below 100% means other processes competed for the cores and the times are inflated.
fn on_cpu_percent(since: (Instant, Option<Duration>)) -> String {
    match (since.1, cpu_time()) {
        (Some(before), Some(now)) => format!(
            "{:.0}%",
            100.0 * (now - before).as_secs_f64() / since.0.elapsed().as_secs_f64()
        ),
        _ => "unknown".to_string(),
    }
}

/// Times Rank calls one by one, one distinct pod each, and prints the latency distribution; with
/// `rejected_limit` (RankRequest.infeasible_limit) the answers list at most that many rejected nodes.
fn rank_latency(fx: &Fixture, rejected_limit: Option<usize>) {
    let start = (Instant::now(), cpu_time());
    let mut evaluator = Evaluator::new(&fx.profile, &fx.snapshot).with_rejected_limit(rejected_limit);
    let mut micros = Vec::with_capacity(LATENCY_SAMPLES);
    // Apart: the pods that fit nowhere (every node's reasons, then preemption's dry run) and the rest.
    let (mut nowhere, mut placed) = (Vec::new(), Vec::new());
    let mut feasible = 0usize;
    for pod in fx.distinct.iter().cycle().take(LATENCY_SAMPLES) {
        let t = Instant::now();
        let ranking = evaluator.rank(pod, TOP_K, SEED, Deadline::none()).expect("no deadline");
        let us = t.elapsed().as_secs_f64() * 1e6;
        micros.push(us);
        if ranking.feasible_count == 0 {
            nowhere.push(us);
        } else {
            placed.push(us);
        }
        feasible += ranking.feasible_count;
        black_box(ranking);
    }
    let quantile = |v: &mut Vec<f64>, q: f64| {
        v.sort_by(f64::total_cmp);
        v.get(((v.len().max(1) - 1) as f64 * q).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    let (placed_p99, nowhere_p50) = (quantile(&mut placed, 0.99), quantile(&mut nowhere, 0.5));
    let mean = micros.iter().sum::<f64>() / micros.len() as f64;
    let [p50, p90, p99, max] = [0.5, 0.9, 0.99, 1.0].map(|q| quantile(&mut micros, q));
    println!(
        "rank latency, {} distinct pods timed one by one on {} nodes (top_k {TOP_K}, rejected nodes listed: {}): \
         mean {mean:.0} µs, p50 {p50:.0} µs, p90 {p90:.0} µs, p99 {p99:.0} µs, max {max:.0} µs; mean feasible nodes {}; \
         on CPU {} of the time; the {} pods with a feasible node p99 {placed_p99:.0} µs, the {} that fit nowhere p50 \
         {nowhere_p50:.0} µs",
        micros.len(),
        fx.snapshot.nodes().len(),
        rejected_limit.map_or("all".to_string(), |n| format!("at most {n}")),
        feasible / micros.len(),
        on_cpu_percent(start),
        placed.len(),
        nowhere.len(),
    );
}

fn main() {
    placement_scheduler::allocator::configure();
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    // Criterion's own rule: without --bench (cargo test) or with --test, run each benchmark once.
    let test_mode = has("--test") || !has("--bench");
    let nodes = match std::env::var("PLACEMENT_BENCH_NODES") {
        Ok(v) => v.parse().expect("PLACEMENT_BENCH_NODES must be a node count"),
        Err(_) if has("--list") => 10,
        Err(_) if test_mode => 500,
        Err(_) => 5000,
    };
    assert!(nodes >= 2, "PLACEMENT_BENCH_NODES must be at least 2");
    if let Ok(v) = std::env::var("PLACEMENT_PASS_THREADS") {
        let n = v.parse().expect("PLACEMENT_PASS_THREADS must be a thread count");
        placement_scheduler::engine::parallel::set_threads(n).expect("set before any pass");
    }

    // `PLACEMENT_BENCH_ONLY=pod_groups` runs the PodGroup throughput alone.
    if std::env::var("PLACEMENT_BENCH_ONLY").is_ok_and(|v| v == "pod_groups") {
        pod_group_throughput(nodes, if test_mode { 40 } else { 1000 });
        return;
    }
    let start = (Instant::now(), cpu_time());
    let fx = Fixture::new(nodes);
    fx.report_batch("schedule/distinct_pods batch", &fx.distinct[..BATCH]);
    fx.report_batch("schedule/replica_pods batch", &fx.replicas);
    fx.report_batch("schedule/topology_pods batch", &fx.topology);
    fx.report_batch_under(
        &fx.with_rules,
        "schedule/distinct_pods_with_cel_rules batch",
        &fx.distinct[..BATCH],
    );
    fx.report_first_rank_after_delta();

    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    bench_rank(&mut c, &fx);
    bench_schedule(&mut c, &fx);
    bench_dra(&mut c);
    bench_snapshot(&mut c, &fx);
    c.final_summary();
    println!(
        "setup and benchmarks ran on CPU {} of the wall time (if well below 100%, other processes competed for the cores and the times are inflated)",
        on_cpu_percent(start)
    );

    if !has("--list") {
        rank_latency(&fx, None);
        rank_latency(&fx, Some(0));
        pod_group_throughput(nodes, if test_mode { 40 } else { 1000 });
    }
}

/// Nodes per rack in [`pod_group_throughput`].
const RACK_NODES: usize = 20;
/// Groups decided per Schedule call in [`pod_group_throughput`], as a binder batches them.
const GROUPS_PER_BATCH: usize = 4;

/// PodGroups as a replica places them: `groups` gang PodGroups of 8 to 64 pods (minCount = size,
/// topology key `rack`) on the synthetic cluster with its nodes in racks of [`RACK_NODES`], decided
/// [`GROUPS_PER_BATCH`] groups per call, each call on the snapshot the previous calls' placements
/// were bound in (a delta, as the service's assumed snapshot). Prints group pods per second (the
/// deltas included), and checks what the PodGroup cycle promises: no group partly placed, none
/// over two racks.
fn pod_group_throughput(nodes: usize, groups: usize) {
    let mut cluster = synth::cluster(&ClusterShape::with_nodes(nodes), SEED);
    for (i, n) in cluster.nodes.iter_mut().enumerate() {
        n.labels.insert("rack".into(), format!("rack-{:03}", i / RACK_NODES));
    }
    let mut all: Vec<proto::PodGroup> = Vec::new();
    let mut pods: Vec<Vec<PodSpec>> = Vec::new();
    for g in 0..groups {
        let size = 8 + (g * 37) % 57;
        let name = format!("job-{g}");
        all.push(proto::PodGroup {
            namespace: "ml".into(),
            name: name.clone(),
            uid: format!("pg-{g}"),
            generation: 1,
            gang: Some(proto::GangSchedulingPolicy { min_count: size as i32 }),
            topology_keys: vec!["rack".into()],
            ..Default::default()
        });
        let members: Vec<proto::Pod> = (0..size)
            .map(|i| proto::Pod {
                uid: format!("{name}-{i}"),
                namespace: "ml".into(),
                name: format!("{name}-{i}"),
                scheduling_group: name.clone(),
                containers: vec![proto::Container {
                    requests: [
                        ("cpu".to_string(), "500m".to_string()),
                        ("memory".to_string(), "1Gi".to_string()),
                    ]
                    .into_iter()
                    .collect(),
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect();
        pods.push(convert_pods(&members));
    }
    cluster.pod_groups = all;
    let (nodes_, bound, namespaces, pdbs) = convert::snapshot("s", &cluster).expect("valid cluster");
    let groups_ = convert::pod_groups("s", &cluster).expect("valid groups");
    let mut snapshot = Snapshot::build_with_namespaces(nodes_, bound, namespaces)
        .and_then(|s| s.with_pdbs(pdbs))
        .and_then(|s| s.with_pod_groups(groups_))
        .expect("snapshot");
    let rack_of: std::collections::HashMap<String, String> = cluster
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.labels["rack"].clone()))
        .collect();
    // Groups confined to a rack: kube's TopologyAwareWorkloadScheduling gate on.
    let profile = Profile::new(Policy::kube_default()).with_gates(
        placement_scheduler::engine::gates::FeatureGates::PLACEMENT_DEFAULT
            .with("TopologyAwareWorkloadScheduling=true")
            .expect("a known gate"),
    );
    let (mut placed, mut whole, mut unplaced, mut partial, mut spanning) = (0usize, 0usize, 0usize, 0usize, 0usize);
    let total: usize = pods.iter().map(Vec::len).sum();
    let start = Instant::now();
    for batch in pods.chunks(GROUPS_PER_BATCH) {
        let batch: Vec<PodSpec> = batch.iter().flatten().cloned().collect();
        let (decisions, _) =
            placement_scheduler::engine::podgroup::schedule(&profile, &snapshot, None, &batch, SEED, Deadline::none())
                .expect("no deadline");
        let mut by_group: std::collections::BTreeMap<&str, Vec<Option<&str>>> = std::collections::BTreeMap::new();
        let mut bound = Vec::new();
        for (p, d) in batch.iter().zip(&decisions) {
            let node = match d {
                Decision::Node { node, .. } => Some(node.as_str()),
                Decision::Unschedulable(_) => None,
            };
            by_group
                .entry(p.pod_group.as_ref().map_or("", |k| k.as_str()))
                .or_default()
                .push(node);
            if let Some(n) = node {
                let mut p = p.clone();
                p.node_name = Some(n.to_string());
                bound.push(p);
            }
        }
        for nodes in by_group.values() {
            let on: Vec<&str> = nodes.iter().flatten().copied().collect();
            placed += on.len();
            match on.len() {
                0 => unplaced += 1,
                n if n == nodes.len() => whole += 1,
                _ => partial += 1,
            }
            let mut racks: Vec<&str> = on.iter().map(|n| rack_of[*n].as_str()).collect();
            racks.sort_unstable();
            racks.dedup();
            spanning += usize::from(racks.len() > 1);
        }
        snapshot = snapshot
            .apply(Delta {
                upsert_pods: bound,
                ..Default::default()
            })
            .expect("a delta of bound pods");
    }
    let elapsed = start.elapsed();
    println!(
        "pod_groups: {groups} PodGroups of 8-64 pods ({total} pods) on {nodes} nodes in {} racks of {RACK_NODES}, {GROUPS_PER_BATCH} groups per call: \
         {placed} pods placed in {:.1} ms = {:.0} group pods/s; {whole} groups whole, {unplaced} unplaced, {partial} partly placed, {spanning} over two racks",
        nodes.div_ceil(RACK_NODES),
        ms(elapsed),
        placed as f64 / elapsed.as_secs_f64(),
    );
    assert_eq!(partial, 0, "a PodGroup was partly placed");
    assert_eq!(spanning, 0, "a PodGroup spans two racks");
}
