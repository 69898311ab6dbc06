//! Deterministic synthetic clusters, as API messages, for benchmarks, tests and simulation.
//!
//! [`cluster`] builds nodes and the pods already bound to them; [`distinct_pods`] and
//! [`replica_pods`] build pending pods to place. The same arguments always give the same messages:
//! every random choice comes from a small splitmix64 generator seeded by the caller.
//!
//! The default [`ClusterShape`] follows Kubernetes' scalability envelope (5,000 nodes, 30 pods per
//! node) with node sizes, labels, taints and images like a managed cloud cluster's. Bound pods never
//! overcommit their node and leave it 40-60% requested, so most pending pods fit somewhere.
//! Pending pods refer to the default shape's zones, instance types and teams.

use std::collections::BTreeMap;

use crate::proto;

/// The unit of an amount to write as a quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// Millicores (cpu).
    MilliCpu,
    /// Bytes (memory, ephemeral-storage).
    Bytes,
    /// A plain count (pods, extended resources).
    Count,
}

const KI: i64 = 1 << 10;
const MI: i64 = 1 << 20;
const GI: i64 = 1 << 30;

/// The smallest cpu amount generated quantities step by (millicores).
const CPU_STEP: i64 = 10;

/// Writes an amount in Kubernetes' quantity notation: "250m", "4", "16Gi", "512Mi", "110".
fn quantity(amount: i64, unit: Unit) -> String {
    match unit {
        Unit::Count => amount.to_string(),
        Unit::MilliCpu if amount % 1000 == 0 => (amount / 1000).to_string(),
        Unit::MilliCpu => format!("{amount}m"),
        Unit::Bytes => {
            for (size, suffix) in [(GI, "Gi"), (MI, "Mi"), (KI, "Ki")] {
                if amount != 0 && amount % size == 0 {
                    return format!("{}{suffix}", amount / size);
                }
            }
            amount.to_string()
        }
    }
}

/// splitmix64's output function.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A splitmix64 generator: tiny, fast and well mixed, which is all a synthetic cluster needs.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(mix(seed ^ 0x5eed_cafe_f00d_d00d))
    }

    /// An independent stream for one item (a node, a pod) of a seeded sequence.
    fn stream(seed: u64, kind: u64, index: u64) -> Self {
        Self::new(mix(seed ^ mix(kind.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ index)))
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    fn between(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Index in `0..n` skewed towards 0 (popular first).
    fn popular(&mut self, n: usize) -> usize {
        let u = self.unit();
        ((u * u * n as f64) as usize).min(n - 1)
    }

    /// `amount` rounded to a multiple of `step`, up or down with the odds that keep the mean.
    fn round_to(&mut self, amount: f64, step: i64) -> i64 {
        let steps = amount.max(0.0) / step as f64;
        let whole = steps.floor();
        let up = self.unit() < steps - whole;
        (whole as i64 + i64::from(up)) * step
    }
}

/// A machine type nodes are made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceType {
    /// Value of the `node.kubernetes.io/instance-type` label.
    pub name: String,
    /// Cpu capacity in cores.
    pub cpu_cores: i64,
    /// Memory capacity in GiB.
    pub memory_gib: i64,
    /// `nvidia.com/gpu` capacity (0 for none).
    pub gpus: i64,
}

impl InstanceType {
    /// An instance type.
    pub fn new(name: &str, cpu_cores: i64, memory_gib: i64, gpus: i64) -> Self {
        Self {
            name: name.to_string(),
            cpu_cores,
            memory_gib,
            gpus,
        }
    }
}

/// What a synthetic cluster looks like.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterShape {
    /// Number of nodes.
    pub nodes: usize,
    /// Pods bound to each node, DaemonSet pods included (capped at `max_pods`).
    pub pods_per_node: usize,
    /// Number of zones (`us-east-1a`, `us-east-1b`, …); nodes are spread evenly.
    pub zones: usize,
    /// Instance types of the CPU nodes, picked uniformly.
    pub instance_types: Vec<InstanceType>,
    /// Instance type of the GPU nodes.
    pub gpu_instance_type: InstanceType,
    /// Fraction of GPU nodes (tainted `nvidia.com/gpu=present:NoSchedule`).
    pub gpu_fraction: f64,
    /// Fraction of the other nodes dedicated to a team and tainted `dedicated=<team>:NoSchedule`.
    pub tainted_fraction: f64,
    /// Fraction of spot nodes (tainted `node.example.com/spot=true:PreferNoSchedule`).
    pub spot_fraction: f64,
    /// Fraction of cordoned nodes (`unschedulable`, with the `node.kubernetes.io/unschedulable` taint).
    pub cordoned_fraction: f64,
    /// Images listed on each node (about 10; node-local DaemonSet images included).
    pub images_per_node: usize,
    /// Range of the fraction of cpu and memory allocatable that bound pods request, per node.
    pub utilization: (f64, f64),
    /// The `pods` allocatable of every node.
    pub max_pods: i64,
}

impl Default for ClusterShape {
    /// Kubernetes' scalability envelope: 5,000 nodes and 150,000 bound pods in 3 zones.
    fn default() -> Self {
        Self {
            nodes: 5000,
            pods_per_node: 30,
            zones: 3,
            instance_types: default_instance_types(),
            gpu_instance_type: InstanceType::new("g5.12xlarge", 48, 192, 4),
            gpu_fraction: 0.02,
            tainted_fraction: 0.10,
            spot_fraction: 0.20,
            cordoned_fraction: 0.01,
            images_per_node: 10,
            utilization: (0.40, 0.60),
            max_pods: 110,
        }
    }
}

impl ClusterShape {
    /// The default shape with another node count (pods per node unchanged).
    pub fn with_nodes(nodes: usize) -> Self {
        Self {
            nodes,
            ..Self::default()
        }
    }
}

fn default_instance_types() -> Vec<InstanceType> {
    vec![
        InstanceType::new("m6i.4xlarge", 16, 64, 0),
        InstanceType::new("m6i.8xlarge", 32, 128, 0),
        InstanceType::new("m6i.12xlarge", 48, 192, 0),
        InstanceType::new("m6i.16xlarge", 64, 256, 0),
        InstanceType::new("r6i.4xlarge", 16, 128, 0),
        InstanceType::new("r6i.8xlarge", 32, 256, 0),
        InstanceType::new("c6i.12xlarge", 48, 96, 0),
        InstanceType::new("c6i.16xlarge", 64, 128, 0),
    ]
}

const REGION: &str = "us-east-1";
/// Teams owning dedicated (tainted) nodes.
const TEAMS: &[&str] = &["batch", "data", "ingress", "ml"];
const NAMESPACES: &[&str] = &[
    "default",
    "payments",
    "checkout",
    "search",
    "catalog",
    "identity",
    "analytics",
    "monitoring",
    "batch",
    "ml-serving",
];
const APPS: &[&str] = &[
    "api-gateway",
    "auth",
    "cart",
    "catalog",
    "checkout",
    "currency",
    "email",
    "frontend",
    "inventory",
    "ledger",
    "notifications",
    "orders",
    "payments",
    "pricing",
    "profile",
    "recommendation",
    "reviews",
    "search",
    "shipping",
    "worker",
];
const APP_IMAGES: usize = 48;
/// DaemonSet pods every node runs: (name, image, cpu milli, memory bytes, host port).
const DAEMONSETS: &[(&str, &str, i64, i64, i32)] = &[
    ("kube-proxy", "registry.k8s.io/kube-proxy:v1.34.1", 100, 0, 0),
    ("cilium", "quay.io/cilium/cilium:v1.16.3", 100, 256 * MI, 0),
    (
        "node-exporter",
        "quay.io/prometheus/node-exporter:v1.8.2",
        100,
        128 * MI,
        9100,
    ),
    ("fluent-bit", "cr.fluentbit.io/fluent/fluent-bit:3.1.9", 50, 100 * MI, 0),
];
const GPU_DAEMONSET: (&str, &str, i64, i64, i32) = (
    "nvidia-device-plugin",
    "nvcr.io/nvidia/k8s-device-plugin:v0.16.2",
    50,
    64 * MI,
    0,
);
const PAUSE_IMAGE: (&str, i64) = ("registry.k8s.io/pause:3.10", 320_368);
const SIDECAR_IMAGE: &str = "docker.io/istio/proxyv2:1.23.2";
/// Host ports pending pods ask for; 80 and 443 are taken on ingress nodes, 8080 on a few others.
const HOST_PORTS: &[i32] = &[80, 443, 8080, 9090, 7946];
const GPU: &str = "nvidia.com/gpu";

/// The `index`th application image of the shared catalogue: its name and size in bytes.
fn app_image(index: usize) -> (String, i64) {
    let h = mix(index as u64 ^ 0x1a6e);
    let app = APPS[index % APPS.len()];
    let name = format!(
        "registry.example.com/{}/{app}:v{}.{}.{}",
        TEAMS[(index / APPS.len()) % TEAMS.len()],
        1 + (h % 4),
        (h >> 8) % 20,
        (h >> 16) % 10
    );
    let size = 30 * MI + ((h >> 24) % (1200 * MI as u64)) as i64;
    (name, size)
}

/// A content digest for an image name (for the `@sha256:` name a node lists too).
fn digest(name: &str) -> String {
    let mut h = xxhash_rust::xxh3::xxh3_64(name.as_bytes());
    let mut s = String::with_capacity(64);
    for _ in 0..4 {
        h = mix(h);
        s.push_str(&format!("{h:016x}"));
    }
    s
}

fn container_image(name: &str, size: i64) -> proto::ContainerImage {
    let repo = name.rsplit_once(':').map_or(name, |(r, _)| r);
    proto::ContainerImage {
        names: vec![format!("{repo}@sha256:{}", digest(name)), name.to_string()],
        size_bytes: size,
    }
}

fn zone_name(zone: usize) -> String {
    match u8::try_from(zone).ok().filter(|z| *z < 26) {
        Some(z) => format!("{REGION}{}", char::from(b'a' + z)),
        None => format!("{REGION}-zone{zone}"),
    }
}

/// A Kubernetes-looking uid, unique per (kind, index) and different for every seed.
fn uid(seed: u64, kind: u64, index: u64) -> String {
    let h = mix(seed ^ mix(kind ^ 0x0da7_a5e7));
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        0x8000 | (kind << 8) | ((h >> 48) & 0xff),
        index & 0xffff_ffff_ffff
    )
}

const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The `i`th of a sequence of 5-character name suffixes starting at `offset`: distinct for the
/// first 27^5 values of `i`, and not in an obvious order.
fn nth_suffix(offset: u64, i: u64) -> String {
    const SPACE: u64 = 27u64.pow(5);
    // 1,000,003 is prime to 27^5 = 3^15, so i -> i × 1,000,003 mod 27^5 is a bijection.
    name_suffix(offset % SPACE + (i % SPACE) * 1_000_003 % SPACE, 5)
}

/// `len` characters of Kubernetes' generated-name alphabet, bijective in `n` below 27^len.
fn name_suffix(n: u64, len: u32) -> String {
    let base = NAME_ALPHABET.len() as u64;
    let mut n = n % base.pow(len);
    let mut s = Vec::with_capacity(len as usize);
    for _ in 0..len {
        s.push(NAME_ALPHABET[(n % base) as usize]);
        n /= base;
    }
    String::from_utf8(s).unwrap_or_default()
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A resource request list with cpu and memory when non-zero.
fn requests(cpu_milli: i64, memory: i64) -> BTreeMap<String, String> {
    let mut r = BTreeMap::new();
    if cpu_milli > 0 {
        r.insert("cpu".to_string(), quantity(cpu_milli, Unit::MilliCpu));
    }
    if memory > 0 {
        r.insert("memory".to_string(), quantity(memory, Unit::Bytes));
    }
    r
}

fn container(name: &str, image: &str, requests: BTreeMap<String, String>) -> proto::Container {
    proto::Container {
        name: name.to_string(),
        image: image.to_string(),
        requests,
        ports: Vec::new(),
        restart_policy: String::new(),
        ..Default::default()
    }
}

fn host_port(port: i32, protocol: &str) -> proto::ContainerPort {
    proto::ContainerPort {
        container_port: port,
        host_port: port,
        protocol: protocol.to_string(),
        host_ip: String::new(),
    }
}

fn toleration(key: &str, operator: &str, value: &str, effect: &str) -> proto::Toleration {
    proto::Toleration {
        key: key.to_string(),
        operator: operator.to_string(),
        value: value.to_string(),
        effect: effect.to_string(),
        toleration_seconds: None,
    }
}

fn taint(key: &str, value: &str, effect: &str) -> proto::Taint {
    proto::Taint {
        key: key.to_string(),
        value: value.to_string(),
        effect: effect.to_string(),
    }
}

fn requirement(key: &str, operator: &str, values: &[&str]) -> proto::NodeSelectorRequirement {
    proto::NodeSelectorRequirement {
        key: key.to_string(),
        operator: operator.to_string(),
        values: values.iter().map(|v| v.to_string()).collect(),
    }
}

fn term(match_expressions: Vec<proto::NodeSelectorRequirement>) -> proto::NodeSelectorTerm {
    proto::NodeSelectorTerm {
        match_expressions,
        match_fields: Vec::new(),
    }
}

/// What the generator remembers of a node while it fills it with pods.
struct NodePlan {
    name: String,
    cpu: i64,
    memory: i64,
    gpus: i64,
    team: Option<&'static str>,
    app_images: Vec<usize>,
}

/// Builds one node (seeded by the cluster seed and its index).
fn node(shape: &ClusterShape, seed: u64, index: usize) -> (proto::Node, NodePlan) {
    let mut rng = Rng::stream(seed, 1, index as u64);
    let zone = index % shape.zones.max(1);
    let gpu = rng.chance(shape.gpu_fraction);
    let it = if gpu || shape.instance_types.is_empty() {
        &shape.gpu_instance_type
    } else {
        rng.pick(&shape.instance_types)
    };
    let team = if gpu {
        Some("ml")
    } else if rng.chance(shape.tainted_fraction) {
        Some(*rng.pick(TEAMS))
    } else {
        None
    };
    let spot = !gpu && rng.chance(shape.spot_fraction);
    let cordoned = rng.chance(shape.cordoned_fraction);
    let name = format!(
        "ip-10-{}-{}-{}.ec2.internal",
        16 * (zone % 16) + ((index >> 16) & 15),
        (index >> 8) & 255,
        index & 255
    );

    let zone = zone_name(zone);
    let cores = it.cpu_cores.to_string();
    let mut l = labels(&[
        ("kubernetes.io/hostname", &name),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("topology.kubernetes.io/region", REGION),
        ("topology.kubernetes.io/zone", &zone),
        ("node.kubernetes.io/instance-type", &it.name),
        ("node.kubernetes.io/lifecycle", if spot { "spot" } else { "on-demand" }),
        ("disktype", if rng.chance(0.7) { "ssd" } else { "hdd" }),
        ("example.com/cpu-cores", &cores),
        (
            "example.com/node-pool",
            if gpu { "gpu" } else { team.unwrap_or("general") },
        ),
    ]);
    let mut taints = Vec::new();
    if let Some(team) = team {
        l.insert("example.com/team".into(), team.into());
    }
    if gpu {
        l.insert("nvidia.com/gpu.present".into(), "true".into());
        l.insert("example.com/accelerator".into(), "nvidia-a10g".into());
        taints.push(taint(GPU, "present", "NoSchedule"));
    } else if let Some(team) = team {
        taints.push(taint("dedicated", team, "NoSchedule"));
    }
    if spot {
        taints.push(taint("node.example.com/spot", "true", "PreferNoSchedule"));
    }
    if cordoned {
        taints.push(taint("node.kubernetes.io/unschedulable", "", "NoSchedule"));
    }

    // Allocatable: capacity less kube-reserved and the eviction threshold, as a cloud node reports it.
    let cpu = it.cpu_cores * 1000 - 80 - 10 * it.cpu_cores;
    let memory = (it.memory_gib * GI - (255 + 11 * shape.max_pods) * MI - 100 * MI) / KI * KI;
    let mut allocatable = BTreeMap::new();
    allocatable.insert("cpu".to_string(), quantity(cpu, Unit::MilliCpu));
    allocatable.insert("memory".to_string(), quantity(memory, Unit::Bytes));
    allocatable.insert("ephemeral-storage".to_string(), quantity(90 * GI, Unit::Bytes));
    allocatable.insert("pods".to_string(), quantity(shape.max_pods, Unit::Count));
    if it.gpus > 0 {
        allocatable.insert(GPU.to_string(), quantity(it.gpus, Unit::Count));
    }

    // Images: the pause image and the DaemonSets' everywhere, then popular application images.
    let mut images = vec![container_image(PAUSE_IMAGE.0, PAUSE_IMAGE.1)];
    let mut system: Vec<_> = DAEMONSETS.to_vec();
    if gpu {
        system.push(GPU_DAEMONSET);
    }
    for (i, ds) in system.iter().enumerate() {
        images.push(container_image(ds.1, 40 * MI + 37 * MI * i as i64));
    }
    let mut app_images = Vec::new();
    let wanted = shape.images_per_node.saturating_sub(images.len()).max(1);
    for _ in 0..wanted * 4 {
        if app_images.len() == wanted {
            break;
        }
        let i = rng.popular(APP_IMAGES);
        if !app_images.contains(&i) {
            app_images.push(i);
        }
    }
    for &i in &app_images {
        let (name, size) = app_image(i);
        images.push(container_image(&name, size));
    }

    let node = proto::Node {
        name: name.clone(),
        labels: l,
        taints,
        unschedulable: cordoned,
        allocatable,
        images,
        ..Default::default()
    };
    let plan = NodePlan {
        name,
        cpu,
        memory,
        gpus: it.gpus,
        team,
        app_images,
    };
    (node, plan)
}

/// Fills one node with bound pods: its DaemonSet pods, then application pods that request
/// between the shape's utilization bounds of the node's cpu and memory, never more than it has.
fn bind_pods(shape: &ClusterShape, seed: u64, index: usize, plan: &NodePlan, out: &mut Vec<proto::Pod>) {
    let mut rng = Rng::stream(seed, 2, index as u64);
    let count = shape.pods_per_node.min(usize::try_from(shape.max_pods).unwrap_or(0));
    let (lo, hi) = shape.utilization;
    let target_cpu = plan.cpu as f64 * rng.between(lo, hi);
    let target_memory = plan.memory as f64 * rng.between(lo, hi);
    let (mut used_cpu, mut used_memory) = (0i64, 0i64);
    let mut pod_index = 0u64;
    let mut next_uid = || {
        pod_index += 1;
        uid(seed, 1, (index * count) as u64 + pod_index - 1)
    };

    let mut system: Vec<_> = DAEMONSETS.to_vec();
    if plan.gpus > 0 {
        system.push(GPU_DAEMONSET);
    }
    system.truncate(count);
    for (name, image, cpu, memory, port) in &system {
        let cpu = (*cpu).min(plan.cpu - used_cpu);
        let memory = (*memory).min(plan.memory - used_memory);
        used_cpu += cpu;
        used_memory += memory;
        let mut c = container(name, image, requests(cpu, memory));
        if *port > 0 {
            c.ports.push(host_port(*port, "TCP"));
        }
        out.push(proto::Pod {
            uid: next_uid(),
            namespace: "kube-system".into(),
            name: format!("{name}-{}", name_suffix(mix(seed ^ index as u64), 5)),
            labels: labels(&[
                ("app.kubernetes.io/name", name),
                ("controller-revision-hash", "6b8f9c7d5"),
            ]),
            priority: 2_000_001_000,
            containers: vec![c],
            node_name: plan.name.clone(),
            tolerations: vec![toleration("", "Exists", "", "")],
            ..Default::default()
        });
    }

    let apps = count - system.len();
    if apps == 0 {
        return;
    }
    let weights: Vec<f64> = (0..apps).map(|_| 2f64.powf(4.0 * rng.unit())).collect();
    let total: f64 = weights.iter().sum();
    let cpu_budget = (target_cpu - used_cpu as f64).max(0.0);
    let memory_budget = (target_memory - used_memory as f64).max(0.0);
    let mut gpus_left = plan.gpus / 2;
    for (j, w) in weights.iter().enumerate() {
        let share = w / total;
        let cpu = rng
            .round_to(share * cpu_budget, 50)
            .min((plan.cpu - used_cpu) / CPU_STEP * CPU_STEP);
        let memory = rng
            .round_to(share * memory_budget, 64 * MI)
            .min((plan.memory - used_memory) / MI * MI);
        used_cpu += cpu;
        used_memory += memory;
        let image_index = match plan.app_images.as_slice() {
            [] => rng.popular(APP_IMAGES),
            imgs => *rng.pick(imgs),
        };
        let image = app_image(image_index).0;
        let app = APPS[image_index % APPS.len()];
        let mut containers = Vec::new();
        if rng.chance(0.2) && cpu >= 200 && memory >= 256 * MI {
            let side_cpu = 100;
            containers.push(container(app, &image, requests(cpu - side_cpu, memory - 128 * MI)));
            containers.push(container("istio-proxy", SIDECAR_IMAGE, requests(side_cpu, 128 * MI)));
        } else {
            containers.push(container(app, &image, requests(cpu, memory)));
        }
        let mut tolerations = Vec::new();
        if plan.gpus > 0 {
            tolerations.push(toleration(GPU, "Exists", "", "NoSchedule"));
            if gpus_left > 0 {
                gpus_left -= 1;
                containers[0].requests.insert(GPU.into(), quantity(1, Unit::Count));
            }
        } else if let Some(team) = plan.team {
            tolerations.push(toleration("dedicated", "Equal", team, "NoSchedule"));
        }
        if plan.team == Some("ingress") && j == 0 {
            containers[0].ports = vec![host_port(80, "TCP"), host_port(443, "TCP")];
        } else if rng.chance(0.01) {
            containers[0].ports = vec![host_port(8080, "TCP")];
        }
        let rs = name_suffix(mix(seed ^ xxhash_rust::xxh3::xxh3_64(app.as_bytes())), 10);
        out.push(proto::Pod {
            uid: next_uid(),
            namespace: (*rng.pick(NAMESPACES)).to_string(),
            name: format!("{app}-{rs}-{}", name_suffix(rng.next_u64(), 5)),
            labels: labels(&[("app", app), ("pod-template-hash", &rs)]),
            priority: if rng.chance(0.1) { 1000 } else { 0 },
            containers,
            node_name: plan.name.clone(),
            tolerations,
            ..Default::default()
        });
    }
}

/// A synthetic cluster: `shape.nodes` nodes and `pods_per_node` bound pods on each.
pub fn cluster(shape: &ClusterShape, seed: u64) -> proto::Snapshot {
    let count = shape.pods_per_node.min(usize::try_from(shape.max_pods).unwrap_or(0));
    let mut nodes = Vec::with_capacity(shape.nodes);
    let mut pods = Vec::with_capacity(shape.nodes * count);
    for index in 0..shape.nodes {
        let (n, plan) = node(shape, seed, index);
        bind_pods(shape, seed, index, &plan, &mut pods);
        nodes.push(n);
    }
    proto::Snapshot {
        nodes,
        pods,
        ..Default::default()
    }
}

/// Size classes of pending pods: (odds, cpu choices in millicores, memory choices in bytes).
const SIZES: &[(f64, &[i64], &[i64])] = &[
    (0.20, &[50, 100], &[64 * MI, 128 * MI]),
    (0.40, &[250, 500], &[256 * MI, 512 * MI, GI]),
    (0.25, &[1000, 1500, 2000], &[2 * GI, 3 * GI, 4 * GI]),
    (0.12, &[4000, 6000, 8000], &[8 * GI, 12 * GI, 16 * GI]),
    (0.03, &[16000], &[32 * GI, 64 * GI]),
];

/// Which kind of pending pod to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    /// Anything a workload may ask for, host ports and GPUs included.
    Any,
    /// A Deployment's template: no host ports, no GPUs, so many replicas can run.
    Template,
}

/// One pending pod with varied requests and constraints over the default shape's labels.
fn pending_pod(rng: &mut Rng, flavor: Flavor) -> proto::Pod {
    let zones: Vec<String> = (0..ClusterShape::default().zones).map(zone_name).collect();
    let types = default_instance_types();
    let image_index = rng.popular(APP_IMAGES);
    let image = app_image(image_index).0;
    let app = APPS[image_index % APPS.len()];
    let team = *rng.pick(TEAMS);

    // Requests: a size class; some pods leave out a resource or request nothing at all.
    let mut roll = rng.unit();
    let mut size = SIZES[0];
    for s in SIZES {
        size = *s;
        if roll < s.0 {
            break;
        }
        roll -= s.0;
    }
    let mut cpu = *rng.pick(size.1);
    let mut memory = *rng.pick(size.2);
    match rng.below(20) {
        0 => (cpu, memory) = (0, 0),
        1 => cpu = 0,
        2 => memory = 0,
        _ => {}
    }
    let mut main = container(app, &image, requests(cpu, memory));
    let mut containers = Vec::new();
    let mut init_containers = Vec::new();
    if rng.chance(0.25) {
        containers.push(container("istio-proxy", SIDECAR_IMAGE, requests(100, 128 * MI)));
    }
    if rng.chance(0.15) {
        init_containers.push(container(
            "migrate",
            &app_image(rng.popular(APP_IMAGES)).0,
            requests(500, 512 * MI),
        ));
    }
    if rng.chance(0.05) {
        let mut log = container(
            "log-shipper",
            "cr.fluentbit.io/fluent/fluent-bit:3.1.9",
            requests(50, 64 * MI),
        );
        log.restart_policy = "Always".into();
        init_containers.push(log);
    }
    let mut tolerations = Vec::new();
    let mut node_selector = BTreeMap::new();
    let mut overhead = BTreeMap::new();
    if flavor == Flavor::Any && rng.chance(0.02) {
        main.requests
            .insert(GPU.into(), quantity(1 + rng.below(2) as i64, Unit::Count));
        tolerations.push(toleration(GPU, "Exists", "", "NoSchedule"));
        node_selector.insert("nvidia.com/gpu.present".to_string(), "true".to_string());
    }
    if flavor == Flavor::Any && rng.chance(0.03) {
        let port = *rng.pick(HOST_PORTS);
        main.ports
            .push(host_port(port, if port == 7946 { "UDP" } else { "TCP" }));
    }
    if rng.chance(0.02) {
        overhead = requests(250, 120 * MI);
    }
    containers.insert(0, main);

    // Placement constraints over zone, instance type, team, disk and lifecycle labels.
    if rng.chance(0.30) {
        let (k, v) = match rng.below(5) {
            0 => ("topology.kubernetes.io/zone", rng.pick(&zones).clone()),
            1 => ("node.kubernetes.io/instance-type", rng.pick(&types).name.clone()),
            2 => ("disktype", "ssd".to_string()),
            3 => ("node.kubernetes.io/lifecycle", "on-demand".to_string()),
            _ => ("kubernetes.io/os", "linux".to_string()),
        };
        node_selector.insert(k.to_string(), v);
    }
    if rng.chance(0.10) {
        tolerations.push(toleration("dedicated", "Equal", team, "NoSchedule"));
        if rng.chance(0.5) {
            node_selector.insert("example.com/team".to_string(), team.to_string());
        }
    }
    if rng.chance(0.10) {
        tolerations.push(toleration("node.example.com/spot", "Exists", "", "PreferNoSchedule"));
    }
    let required = rng.chance(0.20).then(|| {
        let mut terms = Vec::new();
        for _ in 0..1 + usize::from(rng.chance(0.3)) {
            let z1 = rng.pick(&zones).clone();
            let z2 = rng.pick(&zones).clone();
            let t1 = rng.pick(&types).name.clone();
            let t2 = rng.pick(&types).name.clone();
            let mut exprs = match rng.below(4) {
                0 => vec![requirement("topology.kubernetes.io/zone", "In", &[&z1, &z2])],
                1 => vec![requirement("node.kubernetes.io/instance-type", "In", &[&t1, &t2])],
                2 => vec![requirement("example.com/cpu-cores", "Gt", &["16"])],
                _ => vec![requirement("node.kubernetes.io/instance-type", "NotIn", &[&t1])],
            };
            if rng.chance(0.3) {
                exprs.push(requirement("example.com/team", "DoesNotExist", &[]));
            }
            terms.push(term(exprs));
        }
        proto::NodeSelector { terms }
    });
    let mut preferred = Vec::new();
    if rng.chance(0.30) {
        for _ in 0..1 + rng.below(2) {
            let expr = match rng.below(3) {
                0 => requirement("topology.kubernetes.io/zone", "In", &[rng.pick(&zones).as_str()]),
                1 => requirement("disktype", "In", &["ssd"]),
                _ => requirement("node.kubernetes.io/lifecycle", "NotIn", &["spot"]),
            };
            preferred.push(proto::PreferredSchedulingTerm {
                weight: 1 + rng.below(100) as i32,
                preference: Some(term(vec![expr])),
            });
        }
    }
    let node_affinity =
        (required.is_some() || !preferred.is_empty()).then_some(proto::NodeAffinity { required, preferred });
    let namespace = (*rng.pick(NAMESPACES)).to_string();
    proto::Pod {
        uid: String::new(),
        namespace,
        name: String::new(),
        labels: labels(&[("app", app), ("team", team)]),
        priority: *rng.pick(&[0, 0, 0, 100, 1000]),
        containers,
        init_containers,
        overhead,
        node_name: String::new(),
        node_selector,
        node_affinity,
        tolerations,
        ..Default::default()
    }
}

/// `n` pending pods, each different: varied requests, selectors, affinity, tolerations, host
/// ports and images. Pod `i` depends only on `seed` and `i`, so a longer list extends a shorter one.
pub fn distinct_pods(n: usize, seed: u64) -> Vec<proto::Pod> {
    (0..n)
        .map(|i| {
            let mut rng = Rng::stream(seed, 3, i as u64);
            let mut pod = pending_pod(&mut rng, Flavor::Any);
            pod.uid = uid(seed, 2, i as u64);
            let app = pod.labels.get("app").cloned().unwrap_or_default();
            pod.name = format!("{app}-{}", nth_suffix(mix(seed), i as u64));
            pod
        })
        .collect()
}

/// `n` replicas of one workload, like a Deployment's pods: the same spec (from `template_seed`),
/// each with its own uid and name.
pub fn replica_pods(n: usize, template_seed: u64) -> Vec<proto::Pod> {
    let mut rng = Rng::stream(template_seed, 4, 0);
    let template = pending_pod(&mut rng, Flavor::Template);
    let app = template.labels.get("app").cloned().unwrap_or_default();
    let hash = name_suffix(mix(template_seed), 10);
    let offset = mix(template_seed ^ 0x7e91);
    (0..n)
        .map(|i| {
            let mut pod = template.clone();
            pod.uid = uid(template_seed, 3, i as u64);
            pod.name = format!("{app}-{hash}-{}", nth_suffix(offset, i as u64));
            pod.labels.insert("pod-template-hash".into(), hash.clone());
            pod
        })
        .collect()
}

/// `n` pending pods of workloads of `replicas` pods each that use inter-pod anti-affinity and
/// topology spreading, as highly available Deployments do: each workload's pods repel each other
/// per node (required anti-affinity on `kubernetes.io/hostname`), spread over zones (DoNotSchedule,
/// maxSkew 1) and prefer spreading over nodes (ScheduleAnyway, maxSkew 1). Requests and the rest
/// come from a template per workload.
pub fn topology_pods(n: usize, replicas: usize, seed: u64) -> Vec<proto::Pod> {
    let replicas = replicas.max(1);
    (0..n)
        .map(|i| {
            let workload = (i / replicas) as u64;
            let mut rng = Rng::stream(seed, 6, workload);
            let mut pod = pending_pod(&mut rng, Flavor::Template);
            let app = format!("ha-{}", name_suffix(mix(seed ^ workload), 8));
            pod.uid = uid(seed, 6, i as u64);
            pod.name = format!("{app}-{}", nth_suffix(mix(seed ^ 0x51), i as u64));
            pod.labels.insert("app".into(), app.clone());
            let selector = || proto::LabelSelector {
                match_labels: labels(&[("app", &app)]),
                match_expressions: vec![],
            };
            pod.pod_anti_affinity = Some(proto::PodAffinity {
                required: vec![proto::PodAffinityTerm {
                    label_selector: Some(selector()),
                    topology_key: "kubernetes.io/hostname".into(),
                    ..Default::default()
                }],
                preferred: vec![],
            });
            pod.topology_spread_constraints = vec![
                proto::TopologySpreadConstraint {
                    max_skew: 1,
                    topology_key: "topology.kubernetes.io/zone".into(),
                    when_unsatisfiable: "DoNotSchedule".into(),
                    label_selector: Some(selector()),
                    ..Default::default()
                },
                proto::TopologySpreadConstraint {
                    max_skew: 1,
                    topology_key: "kubernetes.io/hostname".into(),
                    when_unsatisfiable: "ScheduleAnyway".into(),
                    label_selector: Some(selector()),
                    ..Default::default()
                },
            ];
            pod
        })
        .collect()
}

#[cfg(test)]
#[path = "synth_tests.rs"]
mod tests;
