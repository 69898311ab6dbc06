//! `kubectl-placement`: the placement scheduler's kubectl plugin. On PATH, `kubectl placement
//! explain POD [-n NS]` runs it (kubectl hands every argument after `placement` to the plugin).

use clap::{Parser, Subcommand};
use placement_binder::explain;

/// Ask the placement scheduler about pods.
#[derive(Debug, Parser)]
#[command(name = "kubectl-placement", bin_name = "kubectl placement", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Why a pod is pending, or why it landed where it did: the verdict, the best nodes' scores,
    /// the refused nodes and what would make the pod fit.
    Explain(explain::ExplainArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|rt| {
            rt.block_on(async {
                match cli.command {
                    Command::Explain(args) => explain::main(args).await,
                }
            })
        });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
