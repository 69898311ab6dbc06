//! How many pods, and how large a claim, still fit when devices are allocated as kube-scheduler
//! 1.37 allocates them (first fit, nodes chosen by NodeResourcesFit's LeastAllocated), against
//! placement's opt-in `DevicePacking` — on the same seeded arrivals.
//!
//! The cluster: [`NODES`] nodes, each with 8 partitionable GPUs under two PCIe roots (4 each,
//! the standard `resource.kubernetes.io/pcieRoot` attribute); a GPU is one counter set of 80Gi,
//! taken whole (`kind: whole`, 80Gi) or as up to four 20Gi slices (`kind: slice`). The arrivals:
//! a seeded mix of claims for one slice (40%), one whole GPU (30%), two whole GPUs on one PCIe root
//! (`matchAttribute`, 20%) and a whole node (all 8 GPUs, 10%), decided in batches of [`BATCH`]
//! on the snapshot the earlier batches' allocations were written to, as a replica decides them.
//! A pod that fits nowhere is left out and the next ones go on.
//!
//! Per seed and policy it prints: the first pod left out (kube's first stranding), pods placed of
//! all, and at the moment kube's choice first strands a pod, what each policy still has free:
//! whole nodes, whole GPUs (their counter set untouched), intact PCIe roots (4 whole GPUs).
//!
//! `cargo bench -p scheduler-service --bench dra_packing` (`PACKING_SEEDS=1-10` picks seeds).

use std::collections::{HashMap, HashSet};

use placement_scheduler::engine::devices::{DeviceDelta, DeviceParts, ResourceClaim};
use placement_scheduler::engine::model::PodSpec;
use placement_scheduler::engine::policy::{ScorePlugin, WeightedScore};
use placement_scheduler::engine::{Deadline, Decision, Delta, Evaluator, Policy, Profile, Snapshot};
use placement_scheduler::grpc::convert;
use placement_scheduler::proto;

const NODES: usize = 32;
const GPUS: usize = 8;
const SLICES: usize = 4;
const BATCH: usize = 8;
const DRIVER: &str = "gpu.example.com";
const PCIE_ROOT: &str = "resource.kubernetes.io/pcieRoot";

/// A small seeded generator (splitmix64): the same arrivals for both policies.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Slice,
    Gpu,
    Pair,
    Node,
}

impl Kind {
    fn of(r: u64) -> Self {
        match r % 10 {
            0..=3 => Kind::Slice,
            4..=6 => Kind::Gpu,
            7 | 8 => Kind::Pair,
            _ => Kind::Node,
        }
    }
}

fn attr(v: proto::device_attribute::Value) -> proto::DeviceAttribute {
    proto::DeviceAttribute { value: Some(v) }
}

fn string(s: &str) -> proto::DeviceAttribute {
    attr(proto::device_attribute::Value::String(s.into()))
}

fn cluster(kinds: &[Kind]) -> proto::Snapshot {
    let nodes = (0..NODES)
        .map(|n| proto::Node {
            name: format!("node-{n:02}"),
            labels: [("kubernetes.io/hostname".to_string(), format!("node-{n:02}"))]
                .into_iter()
                .collect(),
            allocatable: [
                ("cpu".to_string(), "64".to_string()),
                ("memory".to_string(), "512Gi".to_string()),
                ("pods".to_string(), "110".to_string()),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        })
        .collect::<Vec<_>>();
    let mut slices = Vec::new();
    for node in &nodes {
        let counters = proto::ResourceSlice {
            name: format!("{}-counters", node.name),
            driver: DRIVER.into(),
            pool_name: node.name.clone(),
            pool_generation: 1,
            pool_resource_slice_count: 2,
            node_name: node.name.clone(),
            shared_counters: (0..GPUS)
                .map(|g| proto::CounterSet {
                    name: format!("gpu-{g}"),
                    counters: [("memory".to_string(), "80Gi".to_string())].into_iter().collect(),
                })
                .collect(),
            ..Default::default()
        };
        let mut devices = Vec::new();
        for g in 0..GPUS {
            let root = string(&format!("pci-{}", g / 4));
            let consumes = |amount: &str| {
                vec![proto::DeviceCounterConsumption {
                    counter_set: format!("gpu-{g}"),
                    counters: [("memory".to_string(), amount.to_string())].into_iter().collect(),
                }]
            };
            devices.push(proto::Device {
                name: format!("gpu-{g}"),
                attributes: [
                    ("kind".to_string(), string("whole")),
                    (PCIE_ROOT.to_string(), root.clone()),
                ]
                .into_iter()
                .collect(),
                consumes_counters: consumes("80Gi"),
                ..Default::default()
            });
            for s in 0..SLICES {
                devices.push(proto::Device {
                    name: format!("gpu-{g}-slice-{s}"),
                    attributes: [
                        ("kind".to_string(), string("slice")),
                        (PCIE_ROOT.to_string(), root.clone()),
                    ]
                    .into_iter()
                    .collect(),
                    consumes_counters: consumes("20Gi"),
                    ..Default::default()
                });
            }
        }
        slices.push(proto::ResourceSlice {
            name: format!("{}-gpus", node.name),
            driver: DRIVER.into(),
            pool_name: node.name.clone(),
            pool_generation: 1,
            pool_resource_slice_count: 2,
            node_name: node.name.clone(),
            devices,
            ..Default::default()
        });
        slices.push(counters);
    }
    let class = |name: &str, kind: &str| proto::DeviceClass {
        name: name.into(),
        selectors: vec![format!(
            "device.driver == \"{DRIVER}\" && device.attributes[\"{DRIVER}\"].kind == \"{kind}\""
        )],
        extended_resource_name: String::new(),
        creation_timestamp_seconds: 0,
    };
    let claims = kinds
        .iter()
        .enumerate()
        .map(|(i, kind)| {
            let (class, count, all) = match kind {
                Kind::Slice => ("gpu-slice", 1, false),
                Kind::Gpu => ("gpu", 1, false),
                Kind::Pair => ("gpu", 2, false),
                Kind::Node => ("gpu", 0, true),
            };
            proto::ResourceClaim {
                namespace: "default".into(),
                name: format!("claim-{i:04}"),
                uid: format!("claim-uid-{i:04}"),
                requests: vec![proto::DeviceRequest {
                    name: "gpus".into(),
                    exactly: Some(proto::ExactDeviceRequest {
                        device_class_name: class.into(),
                        count,
                        allocation_mode: if all { "All".into() } else { String::new() },
                        ..Default::default()
                    }),
                    first_available: vec![],
                }],
                constraints: if *kind == Kind::Pair {
                    vec![proto::DeviceConstraint {
                        requests: vec![],
                        match_attribute: PCIE_ROOT.into(),
                        distinct_attribute: String::new(),
                    }]
                } else {
                    vec![]
                },
                ..Default::default()
            }
        })
        .collect();
    proto::Snapshot {
        nodes,
        device_classes: vec![class("gpu", "whole"), class("gpu-slice", "slice")],
        resource_slices: slices,
        resource_claims: claims,
        ..Default::default()
    }
}

fn pods(kinds: &[Kind]) -> Vec<proto::Pod> {
    (0..kinds.len())
        .map(|i| proto::Pod {
            uid: format!("pod-uid-{i:04}"),
            namespace: "default".into(),
            name: format!("pod-{i:04}"),
            containers: vec![proto::Container {
                name: "main".into(),
                requests: [
                    ("cpu".to_string(), "500m".to_string()),
                    ("memory".to_string(), "1Gi".to_string()),
                ]
                .into_iter()
                .collect(),
                ..Default::default()
            }],
            resource_claims: vec![proto::PodResourceClaim {
                name: "gpus".into(),
                resource_claim_name: format!("claim-{i:04}"),
                ..Default::default()
            }],
            ..Default::default()
        })
        .collect()
}

/// What is still free: whole nodes, whole GPUs, intact PCIe roots.
#[derive(Debug, Default, Clone, Copy)]
struct Free {
    nodes: usize,
    gpus: usize,
    roots: usize,
}

impl Free {
    fn show(&self) -> String {
        format!("{} / {} / {}", self.nodes, self.gpus, self.roots)
    }
}

/// Per node, per GPU: whether anything of it is taken.
fn free(taken: &HashMap<String, HashSet<usize>>) -> Free {
    let mut f = Free::default();
    for n in 0..NODES {
        let used = taken.get(&format!("node-{n:02}"));
        let is_free = |g: usize| used.is_none_or(|u| !u.contains(&g));
        let gpus = (0..GPUS).filter(|g| is_free(*g)).count();
        f.gpus += gpus;
        f.nodes += usize::from(gpus == GPUS);
        f.roots += (0..GPUS / 4).filter(|r| (r * 4..r * 4 + 4).all(is_free)).count();
    }
    f
}

struct Run {
    first_left_out: Option<usize>,
    placed: usize,
    /// GPUs the placed pods got, in quarters (a slice is one).
    quarters: usize,
    /// Whole-node claims placed.
    whole_nodes: usize,
    /// What was free before each pod was decided (by arrival index); the largest free share of
    /// one node is in `Free::largest`.
    free_before: Vec<Free>,
}

fn run(profile: &Profile, kinds: &[Kind]) -> Run {
    let snap = cluster(kinds);
    let (nodes, bound, _, _) = convert::snapshot("snapshot", &snap).expect("valid snapshot");
    let devices: DeviceParts = convert::devices("snapshot", &snap).expect("valid DRA objects");
    let claims: HashMap<String, ResourceClaim> = devices.claims.iter().map(|c| (c.name.clone(), c.clone())).collect();
    let pods: Vec<PodSpec> = convert::list("pods", &pods(kinds), convert::pod).expect("valid pods");
    let mut snapshot = Snapshot::build(nodes, bound)
        .and_then(|s| s.with_devices(devices))
        .expect("snapshot builds");
    let mut taken: HashMap<String, HashSet<usize>> = HashMap::new();
    let mut out = Run {
        first_left_out: None,
        placed: 0,
        quarters: 0,
        whole_nodes: 0,
        free_before: Vec::with_capacity(kinds.len()),
    };
    for (b, batch) in pods.chunks(BATCH).enumerate() {
        let decisions = Evaluator::new(profile, &snapshot)
            .schedule(batch, 7, Deadline::none())
            .expect("no deadline");
        let mut delta = Delta::default();
        let mut claim_delta = DeviceDelta::default();
        for (i, (decision, pod)) in decisions.into_iter().zip(batch).enumerate() {
            let index = b * BATCH + i;
            out.free_before.push(free(&taken));
            match decision {
                Decision::Node { node, devices, .. } => {
                    out.placed += 1;
                    out.quarters += match kinds[index] {
                        Kind::Slice => 1,
                        Kind::Gpu => 4,
                        Kind::Pair => 8,
                        Kind::Node => 4 * GPUS,
                    };
                    out.whole_nodes += usize::from(kinds[index] == Kind::Node);
                    for allocated in devices {
                        let Some(mut claim) = claims.get(&allocated.name).cloned() else {
                            continue;
                        };
                        for d in &allocated.allocation.devices {
                            // gpu-<g> or gpu-<g>-slice-<s>
                            let g = d.device.device.trim_start_matches("gpu-");
                            let g = g.split('-').next().and_then(|g| g.parse::<usize>().ok());
                            if let Some(g) = g {
                                taken.entry(node.clone()).or_default().insert(g);
                            }
                        }
                        claim.allocation = Some(allocated.allocation);
                        claim_delta.upsert_claims.push(claim);
                    }
                    let mut p = pod.clone();
                    p.node_name = Some(node);
                    delta.upsert_pods.push(p);
                }
                Decision::Unschedulable(_) => {
                    out.first_left_out.get_or_insert(index);
                }
            }
        }
        delta.devices = claim_delta;
        snapshot = snapshot
            .apply(delta)
            .expect("a delta of bound pods and allocated claims");
    }
    out
}

fn seeds() -> Vec<u64> {
    let spec = std::env::var("PACKING_SEEDS").unwrap_or_else(|_| "1-5".into());
    match spec.split_once('-') {
        Some((a, b)) => match (a.parse::<u64>(), b.parse::<u64>()) {
            (Ok(a), Ok(b)) if a <= b => (a..=b).collect(),
            _ => vec![1],
        },
        None => spec.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is read.
    let kube = Profile::new(Policy::kube_default());
    let mut packing = Policy::kube_default();
    packing.name = "device-packing".into();
    packing.scores.push(WeightedScore {
        plugin: ScorePlugin::DevicePacking,
        weight: 10,
    });
    let packing = Profile::new(packing);
    // Demand: slices 0.4 × 1/4 GPU + singles 0.3 + pairs 0.2 × 2 + nodes 0.1 × 8 = 1.6 GPUs per pod
    // on average; arrivals for about 1.2× the cluster's GPUs.
    let arrivals = NODES * GPUS * 12 / 16;
    println!(
        "dra_packing: {NODES} nodes × {GPUS} partitionable GPUs (2 PCIe roots of 4; whole or {SLICES} slices each), {arrivals} arrivals per seed in batches of {BATCH}"
    );
    println!(
        "| seed | first pod left out: kube / packing | pods placed: kube / packing | GPUs placed: kube / packing | whole-node claims placed: kube / packing | free when kube first strands (whole nodes / whole GPUs / intact PCIe roots): kube | packing |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut sums = [0usize; 6];
    for seed in seeds() {
        let mut rng = Rng(seed);
        let kinds: Vec<Kind> = (0..arrivals).map(|_| Kind::of(rng.next())).collect();
        let k = run(&kube, &kinds);
        let p = run(&packing, &kinds);
        let at = k.first_left_out.unwrap_or(arrivals - 1);
        let fk = k.free_before.get(at).copied().unwrap_or_default();
        let fp = p.free_before.get(at).copied().unwrap_or_default();
        let show = |o: Option<usize>| o.map_or("none".to_string(), |i| i.to_string());
        println!(
            "| {seed} | {} / {} | {} / {} | {:.2} / {:.2} | {} / {} | {} | {} |",
            show(k.first_left_out),
            show(p.first_left_out),
            k.placed,
            p.placed,
            k.quarters as f64 / 4.0,
            p.quarters as f64 / 4.0,
            k.whole_nodes,
            p.whole_nodes,
            fk.show(),
            fp.show(),
        );
        sums[0] += k.first_left_out.unwrap_or(arrivals);
        sums[1] += p.first_left_out.unwrap_or(arrivals);
        sums[2] += k.quarters;
        sums[3] += p.quarters;
        sums[4] += fk.nodes;
        sums[5] += fp.nodes;
    }
    println!(
        "sums: first pod left out kube {} / packing {}; GPUs placed kube {:.2} / packing {:.2}; whole nodes free when kube first strands kube {} / packing {}",
        sums[0],
        sums[1],
        sums[2] as f64 / 4.0,
        sums[3] as f64 / 4.0,
        sums[4],
        sums[5]
    );
}
