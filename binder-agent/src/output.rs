//! How a command prints its result.

/// Table or JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object.
    Json,
}
