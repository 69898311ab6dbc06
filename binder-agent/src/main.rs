//! `binder-agent`: `run` binds pods on a real cluster; `simulate` runs the same code against an
//! in-memory cluster and an in-process decision service; `explain` says why a pod is pending or
//! where it landed (also the kubectl plugin `kubectl-placement`).

use clap::{Parser, Subcommand};
use placement_binder::experiments::cli as experiments_cli;
use placement_binder::{explain, run, simulate};

// mimalloc returns freed memory to the OS; glibc malloc kept the binder's resident size near its
// peak (docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The placement binder agent.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start-up; boxing a variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Watch a cluster and bind the pods that name our scheduler.
    Run(run::RunArgs),
    /// Schedule a synthetic or recorded cluster in memory, with no cluster needed.
    Simulate(simulate::SimulateArgs),
    /// Print a running binder's per-arm comparison of experiments and shadows, or check an
    /// experiments file.
    Experiments(experiments_cli::ExperimentsArgs),
    /// Why a pod is pending, or why it landed where it did (also the kubectl plugin
    /// `kubectl placement explain`).
    Explain(explain::ExplainArgs),
}

/// mimalloc's purge delay in `run`, in milliseconds. The initial lists decode page after page of
/// objects (500 per page) and free each page once projected; purging at once gave every page's
/// memory back to the OS and faulted it in again for the next: listing 50,000 nodes and 1,000,000
/// pods took 17.9 s, 6.4 s of it in the kernel, against 9.0 s (1.2 s) with 50 ms, at the same
/// resident size when ready (docs/scale.md).
const RUN_PURGE_DELAY_MS: i64 = 50;

/// mimalloc's purge delay in `simulate` (mimalloc's own default), in milliseconds. Its in-process
/// replicas decode, convert and apply a full sync in chunks of 50,000 pods, about 0.3 s each, and
/// free each chunk's buffers before the next reuses as much: with a shorter delay every chunk
/// faulted its memory in again. At 50,000 nodes and 1,000,000 bound pods the full sync took
/// 12.5 s with 0 ms, 10.9 s with 50 ms and 8.9 s with 1,000 ms, for a peak of 5.2 to 5.4 GB
/// (docs/scale.md).
const SIMULATE_PURGE_DELAY_MS: i64 = 1000;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // mimalloc's settings, as the decision service's (`placement_scheduler::allocator`).
    match cli.command {
        Command::Run(_) => placement_scheduler::allocator::configure_with_purge_delay(RUN_PURGE_DELAY_MS),
        Command::Simulate(_) => placement_scheduler::allocator::configure_with_purge_delay(SIMULATE_PURGE_DELAY_MS),
        _ => placement_scheduler::allocator::configure(),
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run_command(cli))
}

async fn run_command(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run(args) => run::run(args).await,
        Command::Simulate(args) => simulate::main(args).await,
        Command::Experiments(args) => experiments_cli::main(args).await,
        Command::Explain(args) => explain::main(args).await,
    }
}
