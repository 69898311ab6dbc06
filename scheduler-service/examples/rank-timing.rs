//! Times Rank as the engine bench's latency loop does (2,000 distinct pods, each ranked once by a
//! new evaluator, top 10, no rejected node listed (`infeasible_limit: 0`), at 5,000 nodes / 150,000 pods), `ROUNDS` times over (default 5), and
//! prints per round the p50 and p99 of all pods, the p99 of those with a feasible node and the p50
//! of those that fit nowhere, then the minimum of each over the rounds. On a noisy VM the minima
//! move least, so alternating two builds of this example is how Rank's changes were compared.
//!
//! `cargo run --release -p scheduler-service --example rank-timing`

use std::time::Instant;

use placement_scheduler::engine::{Deadline, Evaluator, Policy, Profile, Snapshot};
use placement_scheduler::grpc::convert;
use placement_scheduler::synth::{self, ClusterShape};

/// The allocator the service and the engine bench use.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The engine bench's seed, so the cluster and pods are the bench's.
const SEED: u64 = 42;
/// Pods per round, the bench's latency samples.
const PODS: usize = 2000;

/// The `q` quantile of `v` (sorted in place), as the bench computes it.
fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(((v.len().max(1) - 1) as f64 * q).round() as usize)
        .copied()
        .unwrap_or(0.0)
}

fn main() {
    placement_scheduler::allocator::configure();
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let cluster = synth::cluster(&ClusterShape::with_nodes(5000), SEED);
    let (nodes, pods, _, _) = convert::snapshot("snapshot", &cluster).expect("synthetic snapshot is valid");
    let snapshot = Snapshot::build(nodes, pods).expect("synthetic snapshot builds");
    let profile = Profile::new(Policy::kube_default());
    let mut pods =
        convert::list("pods", &synth::distinct_pods(PODS, SEED), convert::pod).expect("synthetic pods are valid");
    // `ONLY=nowhere` or `ONLY=feasible` keeps the pods of one kind (to profile them apart).
    if let Ok(only) = std::env::var("ONLY") {
        let mut evaluator = Evaluator::new(&profile, &snapshot).with_rejected_limit(Some(0));
        pods.retain(|pod| {
            let fits = evaluator
                .rank(pod, 10, SEED, Deadline::none())
                .is_ok_and(|r| r.feasible_count > 0);
            fits == (only == "feasible")
        });
    }
    let mut best = [f64::MAX; 4];
    for round in 0..rounds {
        let mut evaluator = Evaluator::new(&profile, &snapshot).with_rejected_limit(Some(0));
        let (mut all, mut placed, mut nowhere) = (Vec::new(), Vec::new(), Vec::new());
        for pod in &pods {
            let start = Instant::now();
            let ranking = evaluator.rank(pod, 10, SEED, Deadline::none()).expect("no deadline");
            let us = start.elapsed().as_secs_f64() * 1e6;
            all.push(us);
            if ranking.feasible_count == 0 {
                nowhere.push(us)
            } else {
                placed.push(us)
            }
            std::hint::black_box(ranking);
        }
        let row = [
            quantile(&mut all, 0.5),
            quantile(&mut all, 0.99),
            quantile(&mut placed, 0.99),
            quantile(&mut nowhere, 0.5),
        ];
        for (b, r) in best.iter_mut().zip(row) {
            *b = b.min(r);
        }
        println!(
            "round {round}: p50 {:.0} µs, p99 {:.0} µs; feasible p99 {:.0} µs; fit-nowhere ({} pods) p50 {:.0} µs",
            row[0],
            row[1],
            row[2],
            nowhere.len(),
            row[3]
        );
    }
    println!(
        "minima over {rounds} rounds: p50 {:.0} µs, p99 {:.0} µs; feasible p99 {:.0} µs; fit-nowhere p50 {:.0} µs",
        best[0], best[1], best[2], best[3]
    );
}
