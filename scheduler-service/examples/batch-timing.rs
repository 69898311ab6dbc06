//! Times one batch of 256 distinct pods at 5,000 nodes / 150,000 pods, as the engine bench's
//! `schedule/distinct_pods` does, 300 times over, and prints the minimum, first quartile and median
//! per batch. On a noisy VM the minimum moves least, so alternating two builds of this example is
//! how the engine's changes were compared (docs/performance.md, "What limits each number").
//!
//! `cargo run --release -p scheduler-service --example batch-timing`

use std::time::Instant;

use placement_scheduler::engine::{Deadline, Evaluator, Policy, Profile, Snapshot};
use placement_scheduler::grpc::convert;
use placement_scheduler::synth::{self, ClusterShape};

/// The allocator the service and the engine bench use.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The engine bench's seed, so the cluster and batch are the bench's.
const SEED: u64 = 42;
/// Batches timed.
const ROUNDS: usize = 300;

fn main() {
    placement_scheduler::allocator::configure();
    let cluster = synth::cluster(&ClusterShape::with_nodes(5000), SEED);
    let (nodes, pods, _, _) = convert::snapshot("snapshot", &cluster).expect("synthetic snapshot is valid");
    let snapshot = Snapshot::build(nodes, pods).expect("synthetic snapshot builds");
    let profile = Profile::new(Policy::kube_default());
    let batch =
        convert::list("pods", &synth::distinct_pods(256, SEED), convert::pod).expect("synthetic pods are valid");
    let mut evaluator = Evaluator::new(&profile, &snapshot);
    let mut ms: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(evaluator.schedule(&batch, SEED, Deadline::none()).expect("no deadline"));
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    println!(
        "schedule, 256 distinct pods on 5000 nodes, {ROUNDS} batches: min {:.2} ms, p25 {:.2} ms, median {:.2} ms per batch",
        ms[0],
        ms[ROUNDS / 4],
        ms[ROUNDS / 2]
    );
}
