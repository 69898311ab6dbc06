//! `binder-agent simulate` (being written).

/// Flags of `binder-agent simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {}

/// Runs a simulation and prints its summary.
pub async fn main(_args: SimulateArgs) -> anyhow::Result<()> {
    anyhow::bail!("binder-agent simulate is not built yet")
}
