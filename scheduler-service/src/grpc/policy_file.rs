//! The policy file: read at start, then polled for changes and swapped in when valid.
//!
//! The file is polled (every `reload_interval`) rather than watched with inotify: a ConfigMap
//! volume updates by writing a new timestamped directory and atomically swapping the `..data`
//! symlink, so the path the service was given (`policies.yaml -> ..data/policies.yaml`) never sees
//! an event of its own and a watch on the old inode goes quiet. Reading the path again resolves
//! the symlinks as they are now; comparing a hash of the content (not the mtime, which the swap
//! does not reliably change) finds every change and nothing else. The file is small, so a read
//! every few seconds costs nothing.
//!
//! A changed file is parsed and validated whole before anything changes: a valid file replaces
//! every policy at once (calls in flight finish with the set they started with); an invalid,
//! missing or unreadable file keeps the previous policies, logs why (`warn`) and counts
//! `placement_policy_reloads_total{result="error"}` once per distinct failure.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::metrics::{Metrics, ReloadLabels};
use super::service::{ConfigError, PlacementApi, PolicySource};
use crate::engine::policy_config::{parse_policy_file, FileFormat, PolicyConfigError};
use crate::engine::Policy;

/// Where the policy file is and how often to look at it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyFileConfig {
    /// The file (a ConfigMap key mounted as a volume, typically).
    pub path: PathBuf,
    /// How often to check the file for changes; `None` reads it once at start.
    pub reload_interval: Option<Duration>,
}

/// Why a policy file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyFileError {
    /// The file cannot be read.
    #[error("policy file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid UTF-8.
    #[error("policy file {path}: not UTF-8 text")]
    NotUtf8 {
        /// The file.
        path: String,
    },
    /// The file does not parse or map to valid policies.
    #[error("policy file {path}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// What is wrong, naming the field.
        source: PolicyConfigError,
    },
    /// The policies cannot be served together.
    #[error("policy file {path}: {source}")]
    Config {
        /// The file.
        path: String,
        /// What is wrong.
        source: ConfigError,
    },
}

/// A policy file read and validated.
#[derive(Debug, Clone)]
pub struct LoadedPolicies {
    /// The policies, the default first.
    pub policies: Vec<Policy>,
    /// The file's format.
    pub format: FileFormat,
    /// Settings accepted without effect (`field: why`).
    pub ignored: Vec<String>,
    /// Hex digest of the file's content.
    pub digest: String,
}

fn content_digest(bytes: &[u8]) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(bytes))
}

/// Parses the content of the policy file at `path` (which is named in errors).
pub fn parse_policies(path: &Path, bytes: &[u8]) -> Result<LoadedPolicies, PolicyFileError> {
    let shown = path.display().to_string();
    let text = std::str::from_utf8(bytes).map_err(|_| PolicyFileError::NotUtf8 { path: shown.clone() })?;
    let file = parse_policy_file(text).map_err(|source| PolicyFileError::Parse { path: shown, source })?;
    Ok(LoadedPolicies {
        policies: file.policies,
        format: file.format,
        ignored: file.ignored,
        digest: content_digest(bytes),
    })
}

/// Reads and validates the policy file at `path`.
pub fn load_policies(path: &Path) -> Result<LoadedPolicies, PolicyFileError> {
    let bytes = std::fs::read(path).map_err(|source| PolicyFileError::Read {
        path: path.display().to_string(),
        source,
    })?;
    parse_policies(path, &bytes)
}

/// What one look at the file found.
#[derive(Debug)]
pub enum PollOutcome {
    /// Nothing new: the same content, or the same failure as last time.
    Unchanged,
    /// New policies are in use; the digest of the file.
    Reloaded(String),
    /// The file changed (or became unreadable) and was rejected; the previous policies stay.
    Rejected(PolicyFileError),
}

/// What the watcher saw last, so a change is acted on once.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// A content hash (applied or rejected).
    Content(u128),
    /// A read error of this kind.
    Unreadable(std::io::ErrorKind),
}

/// Polls the policy file and swaps valid changes into a [`PlacementApi`].
pub struct PolicyWatcher {
    api: PlacementApi,
    metrics: Arc<Metrics>,
    path: PathBuf,
    seen: Option<Seen>,
}

impl PolicyWatcher {
    /// A watcher of `path` for `api`, whose current policies came from `initial` (the content the
    /// service started with), so that content does not count as a change.
    pub fn new(api: PlacementApi, metrics: Arc<Metrics>, path: PathBuf, initial: Option<&[u8]>) -> Self {
        Self {
            api,
            metrics,
            path,
            seen: initial.map(|b| Seen::Content(xxhash_rust::xxh3::xxh3_128(b))),
        }
    }

    fn count(&self, result: &'static str) {
        self.metrics
            .policy_reloads
            .get_or_create(&ReloadLabels { result })
            .inc();
    }

    /// Looks at the file once and applies a valid change. The read is synchronous: a policy file
    /// is a few kilobytes, read once per interval.
    pub fn poll(&mut self) -> PollOutcome {
        let shown = self.path.display().to_string();
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(source) => {
                let seen = Seen::Unreadable(source.kind());
                if self.seen.as_ref() == Some(&seen) {
                    return PollOutcome::Unchanged;
                }
                self.seen = Some(seen);
                let e = PolicyFileError::Read { path: shown, source };
                tracing::warn!(error = %e, "policy file unreadable; keeping the current policies");
                self.count("error");
                return PollOutcome::Rejected(e);
            }
        };
        let seen = Seen::Content(xxhash_rust::xxh3::xxh3_128(&bytes));
        if self.seen.as_ref() == Some(&seen) {
            return PollOutcome::Unchanged;
        }
        self.seen = Some(seen);
        let applied = parse_policies(&self.path, &bytes).and_then(|loaded| {
            let source = PolicySource::File {
                path: shown.clone(),
                format: loaded.format,
            };
            let names: Vec<String> = loaded.policies.iter().map(|p| p.name.clone()).collect();
            self.api
                .set_policies(loaded.policies, source)
                .map_err(|source| PolicyFileError::Config {
                    path: shown.clone(),
                    source,
                })?;
            Ok((loaded.digest, names, loaded.ignored))
        });
        match applied {
            Ok((digest, names, ignored)) => {
                self.count("ok");
                self.metrics.policy_config_in_use(&shown, &digest, names.len());
                tracing::info!(path = %shown, %digest, policies = ?names, ?ignored, "policy file reloaded");
                PollOutcome::Reloaded(digest)
            }
            Err(e) => {
                self.count("error");
                tracing::warn!(error = %e, "policy file rejected; keeping the current policies");
                PollOutcome::Rejected(e)
            }
        }
    }

    /// Polls every `interval` until the task is dropped or aborted.
    pub async fn run(mut self, interval: Duration) {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await; // the first tick is immediate; the file was just read
        loop {
            ticks.tick().await;
            self.poll();
        }
    }
}
