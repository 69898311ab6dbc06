//! `binder-agent run`: the in-cluster agent. Watches nodes and pods, asks decision replicas where
//! pending pods go, writes Bindings while it holds the leader lease, and serves `/healthz`,
//! `/readyz` and `/metrics`.
//!
//! Every flag also reads an environment variable (`BINDER_*`). `--http-listen` defaults to
//! `0.0.0.0:10251`: the kubelet's httpGet probes and Prometheus reach a pod on its IP, not on
//! loopback (use `127.0.0.1:10251` to keep the endpoints local).
//!
//! On SIGTERM or SIGINT the binder stops taking work, finishes the binds in flight, then releases
//! the lease so a standby binder takes over at once.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use tokio::sync::watch;

use crate::binder::{Binder, BinderConfig};
use crate::kube_api::{transport, KubeApi, KubeApiConfig};
use crate::leader::{LeaderConfig, Leadership};
use crate::metrics::BinderMetrics;
use crate::replicas::{ClientTls, EndpointSource, ReplicaConfig, ReplicaPool};

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Flags of `binder-agent run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Kubeconfig file; without it, in-cluster config or $KUBECONFIG / ~/.kube/config.
    #[arg(long, env = "BINDER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// spec.schedulerName of the pods to place (repeatable, or comma-separated).
    #[arg(
        long = "scheduler-name",
        env = "BINDER_SCHEDULER_NAME",
        value_delimiter = ',',
        default_value = "placement-scheduler"
    )]
    pub scheduler_names: Vec<String>,

    /// Decision replicas as comma-separated URLs (`http://host:port`).
    #[arg(
        long,
        env = "BINDER_DECISION_ENDPOINTS",
        value_delimiter = ',',
        conflicts_with = "decision_dns",
        required_unless_present = "decision_dns"
    )]
    pub decision_endpoints: Vec<String>,

    /// Decision replicas as `host:port` of a headless Service: every address is a replica.
    #[arg(long, env = "BINDER_DECISION_DNS")]
    pub decision_dns: Option<String>,

    /// How often `--decision-dns` is resolved again, in seconds.
    #[arg(long, env = "BINDER_DECISION_DNS_REFRESH_SECS", default_value_t = 10)]
    pub decision_dns_refresh_secs: u64,

    /// Deadline of each call to a decision replica, in milliseconds.
    #[arg(long, env = "BINDER_DECISION_TIMEOUT_MS", default_value_t = 10_000)]
    pub decision_timeout_ms: u64,

    /// Speak TLS to the decision replicas, trusting this CA (PEM); `http://` endpoints become
    /// `https://`.
    #[arg(long, env = "BINDER_DECISION_TLS_CA")]
    pub decision_tls_ca: Option<PathBuf>,

    /// Client certificate (PEM) for mutual TLS with the decision replicas; needs
    /// `--decision-tls-key` and `--decision-tls-ca`.
    #[arg(long, env = "BINDER_DECISION_TLS_CERT", requires_all = ["decision_tls_key", "decision_tls_ca"])]
    pub decision_tls_cert: Option<PathBuf>,

    /// Private key (PEM) of `--decision-tls-cert`.
    #[arg(long, env = "BINDER_DECISION_TLS_KEY", requires = "decision_tls_cert")]
    pub decision_tls_key: Option<PathBuf>,

    /// Name the replicas' certificates are verified against (needed with `--decision-dns`, which
    /// connects to pod IPs); default: the host of each endpoint URL.
    #[arg(long, env = "BINDER_DECISION_TLS_SERVER_NAME", requires = "decision_tls_ca")]
    pub decision_tls_server_name: Option<String>,

    /// Most pods per decision call.
    #[arg(long, env = "BINDER_BATCH_SIZE", default_value_t = 256)]
    pub batch_size: usize,

    /// How long a batch may wait to fill, in milliseconds.
    #[arg(long, env = "BINDER_BATCH_WINDOW_MS", default_value_t = 5)]
    pub batch_window_ms: u64,

    /// Batches decided at once on different decision replicas, each on its own partition of the
    /// nodes (docs/scale.md); 1 decides one batch at a time on the whole cluster.
    #[arg(long, env = "BINDER_BATCHES_IN_FLIGHT", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub batches_in_flight: u32,

    /// How long a gang's members wait for the rest of the gang (label `placement.dev/gang`,
    /// annotation `placement.dev/gang-min-members`) before they are reported unschedulable.
    #[arg(long, env = "BINDER_GANG_TIMEOUT_SECONDS", default_value_t = 60)]
    pub gang_timeout_seconds: u64,

    /// How long a preemptor keeps its reservation on the nominated node while its victims
    /// terminate (default: twice the default 30s grace period plus 30s). Meanwhile it is decided
    /// again with backoff and bound wherever it fits first; after this, nominatedNodeName is
    /// cleared and it waits as unschedulable.
    #[arg(long, env = "BINDER_NOMINATION_TIMEOUT_SECONDS", default_value_t = 90)]
    pub nomination_timeout_seconds: u64,

    /// How long a pod's PreBind waits for the PV controller to bind the claims it wrote a
    /// binding for (a volume's claimRef, a claim's selected node) before it gives up and the pod
    /// is decided again with backoff: kube-scheduler's VolumeBinding `bindTimeoutSeconds`, whose
    /// default this is.
    #[arg(long, env = "BINDER_VOLUME_BIND_TIMEOUT_SECONDS", default_value_t = 600)]
    pub volume_bind_timeout_seconds: u64,

    /// How long a pod's PreBind waits for the binding conditions of the devices allocated to it
    /// (DRA's `bindingConditions`) before the pod is decided again with backoff, counted from the
    /// claim's allocation: kube-scheduler's DynamicResources `bindingTimeout`, whose default this
    /// is. Give the decision replicas' profile the same value.
    #[arg(long, env = "BINDER_DRA_BINDING_TIMEOUT_SECONDS", default_value_t = 600)]
    pub dra_binding_timeout_seconds: u64,

    /// Bindings in flight at once.
    #[arg(long, env = "BINDER_BIND_CONCURRENCY", default_value_t = 64)]
    pub bind_concurrency: usize,

    /// `Scheduled` events in flight at once; in a burst they trail the bindings, which get the
    /// rest of the API server.
    #[arg(long, env = "BINDER_EVENT_CONCURRENCY", default_value_t = 8)]
    pub event_concurrency: usize,

    /// API writes per second (bindings, events, status patches); 0 for no limit.
    #[arg(long, env = "BINDER_API_QPS", default_value_t = 0)]
    pub api_qps: u32,

    /// Burst of API writes above `--api-qps`.
    #[arg(long, env = "BINDER_API_BURST", default_value_t = 100)]
    pub api_burst: u32,

    /// Deadline of each API request, in milliseconds.
    #[arg(long, env = "BINDER_API_TIMEOUT_MS", default_value_t = 10_000)]
    pub api_timeout_ms: u64,

    /// Offer the API server HTTP/2 (every request and watch on one connection, as client-go);
    /// HTTP/1.1 otherwise, a connection per request in flight. Off by default: on a small control
    /// plane HTTP/2 bound fewer pods per second (docs/performance-cluster.md).
    #[arg(long, env = "BINDER_API_HTTP2")]
    pub api_http2: bool,

    /// Placement policy sent with each batch (empty: the decision service's default).
    #[arg(long, env = "BINDER_POLICY", default_value = "")]
    pub policy: String,

    /// The scheduler configuration the decision replicas serve (a KubeSchedulerConfiguration or
    /// placement's PolicyConfiguration, as their `--policy-file`), read at start for its
    /// `extenders`: a pod an extender with a `bindVerb` is interested in is bound by that
    /// extender. The binder takes extender URLs from this file only, never from a decision reply.
    #[arg(long, env = "BINDER_POLICY_FILE")]
    pub policy_file: Option<PathBuf>,

    /// Tie-break seed sent with each batch.
    #[arg(long, env = "BINDER_SEED", default_value_t = 0)]
    pub seed: u64,

    /// Experiments and shadow policies (YAML; see `binder-agent experiments --help`). Read at
    /// start (an invalid file stops the binder) and re-read while running: a valid change goes
    /// live without a restart, an invalid one is logged and the running version kept.
    #[arg(long, env = "BINDER_EXPERIMENTS_FILE")]
    pub experiments_file: Option<PathBuf>,

    /// How often `--experiments-file` is re-read, in seconds.
    #[arg(long, env = "BINDER_EXPERIMENTS_RELOAD_SECS", default_value_t = 10)]
    pub experiments_reload_secs: u64,

    /// Elect a leader among binders through a Lease (`--leader-elect=false` or
    /// `--no-leader-elect` for a single binder).
    #[arg(long, env = "BINDER_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: bool,

    /// Always act as the leader (one binder only).
    #[arg(long, overrides_with = "leader_elect")]
    pub no_leader_elect: bool,

    /// Namespace of the Lease (default: the client's namespace, in-cluster the pod's).
    #[arg(long, env = "BINDER_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,

    /// Name of the Lease.
    #[arg(long, env = "BINDER_LEASE_NAME", default_value = "placement-binder")]
    pub lease_name: String,

    /// How long the lease is valid without renewal, in seconds.
    #[arg(long, env = "BINDER_LEASE_DURATION_SECS", default_value_t = 15)]
    pub lease_duration_secs: u64,

    /// How long before expiry the leader renews, in seconds.
    #[arg(long, env = "BINDER_LEASE_GRACE_SECS", default_value_t = 5)]
    pub lease_grace_secs: u64,

    /// This binder's identity in the Lease and in events (default: hostname, i.e. the pod name,
    /// with a random suffix as kube-scheduler's).
    #[arg(long, env = "BINDER_IDENTITY")]
    pub identity: Option<String>,

    /// `reportingController` of the events written.
    #[arg(long, env = "BINDER_REPORTING_CONTROLLER", default_value = "placement-scheduler")]
    pub reporting_controller: String,

    /// Address of `/healthz`, `/readyz` and `/metrics`.
    #[arg(long, env = "BINDER_HTTP_LISTEN", default_value = "0.0.0.0:10251")]
    pub http_listen: std::net::SocketAddr,

    /// Log format.
    #[arg(long, env = "BINDER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// A component-base `TracingConfiguration` file (`apiVersion: apiserver.config.k8s.io/v1`,
    /// `kind: TracingConfiguration`, `endpoint`, `samplingRatePerMillion`), as kube-apiserver's
    /// `--tracing-config-file`: scheduling and binding cycles exported over OTLP/gRPC, their trace
    /// context sent to the decision replicas. Without it, `OTEL_EXPORTER_OTLP_ENDPOINT` (if set)
    /// says where.
    #[arg(long, env = "BINDER_TRACING_CONFIG_FILE")]
    pub tracing_config_file: Option<PathBuf>,
}

fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "placement-binder".to_string())
}

/// kube-scheduler's identity: `{hostname}_{unique}` (its unique part is a UUID).
fn default_identity() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    format!("{}_{:016x}", hostname(), h.finish())
}

/// `host:port` of `--decision-dns`.
fn parse_dns(s: &str) -> anyhow::Result<EndpointSource> {
    let (host, port) = s
        .rsplit_once(':')
        .with_context(|| format!("--decision-dns {s:?}: expected host:port"))?;
    let port = port
        .parse()
        .with_context(|| format!("--decision-dns {s:?}: bad port"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    anyhow::ensure!(!host.is_empty(), "--decision-dns {s:?}: empty host");
    Ok(EndpointSource::Dns {
        host: host.to_string(),
        port,
    })
}

fn read_pem(flag: &str, path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("{flag}: reading {}", path.display()))
}

/// TLS to the decision replicas from the `--decision-tls-*` flags, files read now.
fn decision_tls(args: &RunArgs) -> anyhow::Result<Option<ClientTls>> {
    client_tls(
        args.decision_tls_ca.as_deref(),
        args.decision_tls_cert.as_deref(),
        args.decision_tls_key.as_deref(),
        args.decision_tls_server_name.as_deref(),
    )
}

/// TLS to decision replicas from a CA, an optional client certificate and key, and an optional
/// server name (the `--decision-tls-*` flags), files read now.
pub(crate) fn client_tls(
    ca: Option<&std::path::Path>,
    cert: Option<&std::path::Path>,
    key: Option<&std::path::Path>,
    server_name: Option<&str>,
) -> anyhow::Result<Option<ClientTls>> {
    let Some(ca) = ca else {
        anyhow::ensure!(
            cert.is_none() && key.is_none() && server_name.is_none(),
            "--decision-tls-cert, --decision-tls-key and --decision-tls-server-name need --decision-tls-ca"
        );
        return Ok(None);
    };
    anyhow::ensure!(
        cert.is_some() == key.is_some(),
        "--decision-tls-cert and --decision-tls-key go together"
    );
    Ok(Some(ClientTls {
        ca_pem: read_pem("--decision-tls-ca", ca)?,
        cert_pem: cert.map(|p| read_pem("--decision-tls-cert", p)).transpose()?,
        key_pem: key.map(|p| read_pem("--decision-tls-key", p)).transpose()?,
        domain: server_name.map(str::to_string),
    }))
}

async fn client(kubeconfig: Option<&PathBuf>, protocols: transport::Protocols) -> anyhow::Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("loading {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("configuring the Kubernetes client (in-cluster or KUBECONFIG)")?,
    };
    transport::client(config, protocols).context("building the Kubernetes client")
}

/// Resolves when SIGTERM or SIGINT arrives.
async fn signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
                    _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: shutting down"),
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; only SIGINT stops the binder");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn read_experiments(path: &std::path::Path) -> anyhow::Result<(String, crate::experiments::ExperimentSet)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--experiments-file: reading {}", path.display()))?;
    let set = crate::experiments::ExperimentSet::parse(&text)
        .and_then(|set| {
            for (field, b) in set.backends() {
                crate::experiments::client_tls(&field, b)?;
            }
            Ok(set)
        })
        .with_context(|| format!("--experiments-file {}", path.display()))?;
    Ok((text, set))
}

/// Re-reads the experiments file every `every`; a changed, valid file goes live.
async fn reload_experiments(
    experiments: Arc<crate::experiments::Experiments>,
    pools: Arc<crate::replica_pools::ReplicaPools>,
    path: PathBuf,
    mut last: String,
    every: Duration,
    shutdown: Shutdown,
) {
    let reload = async {
        loop {
            tokio::time::sleep(every).await;
            match std::fs::read_to_string(&path) {
                Ok(text) if text == last => {}
                Ok(text) => {
                    match pools.reload_text(&experiments, &text) {
                        Ok(()) => tracing::info!(file = %path.display(), "experiments reloaded"),
                        Err(e) => {
                            tracing::error!(file = %path.display(), error = %e, "experiments file invalid; keeping the running version")
                        }
                    }
                    last = text;
                }
                Err(e) => tracing::warn!(file = %path.display(), error = %e, "reading the experiments file failed"),
            }
        }
    };
    tokio::select! {
        () = shutdown.wait() => {}
        () = reload => {}
    }
}

/// A shutdown signal many tasks can wait on.
#[derive(Clone)]
struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    async fn wait(mut self) {
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}

/// Runs the agent until SIGTERM or SIGINT.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    run_until(args, signal()).await
}

/// Runs the agent until `stop_signal` resolves, then shuts down gracefully.
pub async fn run_until(args: RunArgs, stop_signal: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
    let export = placement_scheduler::telemetry::TraceExport::from_flag(args.tracing_config_file.as_deref())
        .context("--tracing-config-file")?;
    let _telemetry = placement_scheduler::telemetry::init_once(
        "binder-agent",
        matches!(args.log_format, LogFormat::Json),
        "info",
        &export,
    )?;
    let client = client(args.kubeconfig.as_ref(), transport::Protocols::http2_if(args.api_http2)).await?;
    let identity = args.identity.clone().unwrap_or_else(default_identity);
    let metrics = Arc::new(BinderMetrics::new());

    let source = match &args.decision_dns {
        Some(dns) => parse_dns(dns)?,
        None => {
            anyhow::ensure!(
                !args.decision_endpoints.is_empty(),
                "--decision-endpoints or --decision-dns is required"
            );
            EndpointSource::Static(args.decision_endpoints.clone())
        }
    };
    let replica_config = ReplicaConfig {
        call_timeout: Duration::from_millis(args.decision_timeout_ms),
        tls: decision_tls(&args)?,
        ..ReplicaConfig::default()
    };
    let replicas = Arc::new(ReplicaPool::new(source.clone(), replica_config)?);

    let leadership = if args.leader_elect && !args.no_leader_elect {
        let config = LeaderConfig {
            identity: identity.clone(),
            namespace: args
                .lease_namespace
                .clone()
                .unwrap_or_else(|| client.default_namespace().to_string()),
            lease_name: args.lease_name.clone(),
            duration_secs: args.lease_duration_secs,
            grace_secs: args.lease_grace_secs,
        };
        tracing::info!(identity = %config.identity, namespace = %config.namespace, lease = %config.lease_name, "leader election on");
        Leadership::elect(client.clone(), config, Arc::clone(&metrics))?
    } else {
        tracing::info!("leader election off: this binder always binds");
        Leadership::always(&metrics)
    };

    let api = KubeApi::new(
        client.clone(),
        KubeApiConfig {
            // kube-scheduler's events/v1 recorder: `{controller}-{hostname}`.
            reporting_instance: format!("{}-{identity}", args.reporting_controller),
            reporting_controller: args.reporting_controller.clone(),
            request_timeout: Duration::from_millis(args.api_timeout_ms),
        },
    );
    let config = BinderConfig {
        scheduler_names: args.scheduler_names.clone(),
        batch_size: args.batch_size.max(1),
        batch_window: Duration::from_millis(args.batch_window_ms),
        batches_in_flight: args.batches_in_flight as usize,
        gang_timeout: Duration::from_secs(args.gang_timeout_seconds),
        nomination_timeout: Duration::from_secs(args.nomination_timeout_seconds.max(1)),
        volume_bind_timeout: Duration::from_secs(args.volume_bind_timeout_seconds.max(1)),
        dra_binding_timeout: Duration::from_secs(args.dra_binding_timeout_seconds.max(1)),
        bind_concurrency: args.bind_concurrency.max(1),
        event_concurrency: args.event_concurrency.max(1),
        api_qps: args.api_qps,
        api_burst: args.api_burst,
        policy: args.policy.clone(),
        seed: args.seed,
        extenders: match &args.policy_file {
            Some(path) => bind_extenders(path, &metrics.extenders)?,
            None => None,
        },
        ..BinderConfig::default()
    };
    let binder = Binder::new(
        config,
        api,
        Arc::clone(&replicas),
        Arc::clone(&metrics),
        leadership.receiver(),
    );

    let (stop, stopped) = watch::channel(false);
    let shutdown = Shutdown(stopped);
    let mut tasks = tokio::task::JoinSet::new();

    if let Some(path) = &args.experiments_file {
        let (text, set) = read_experiments(path)?;
        binder
            .replace_experiments(set)
            .with_context(|| format!("--experiments-file {}", path.display()))?;
        tracing::info!(file = %path.display(), "experiments loaded");
        let every = Duration::from_secs(args.experiments_reload_secs.max(1));
        tasks.spawn(reload_experiments(
            binder.experiments().clone(),
            binder.pools().clone(),
            path.clone(),
            text,
            every,
            shutdown.clone(),
        ));
    }

    let listener = tokio::net::TcpListener::bind(args.http_listen)
        .await
        .with_context(|| format!("listening on {}", args.http_listen))?;
    tracing::info!(addr = %args.http_listen, "serving /healthz, /readyz, /metrics");
    {
        let binder = binder.clone();
        let shutdown = shutdown.clone();
        tasks.spawn(async move {
            if let Err(e) = crate::http::serve(listener, binder, shutdown.wait()).await {
                tracing::error!(error = %e, "HTTP server failed");
            }
        });
    }

    if let EndpointSource::Dns { host, port } = &source {
        let every = Duration::from_secs(args.decision_dns_refresh_secs.max(1));
        let replicas = Arc::clone(&replicas);
        let shutdown = shutdown.clone();
        let name = format!("{host}:{port}");
        tasks.spawn(async move {
            let refresh = async {
                loop {
                    match replicas.refresh().await {
                        Ok(()) => {
                            tracing::debug!(dns = %name, replicas = replicas.all().len(), "decision replicas resolved")
                        }
                        Err(e) => tracing::warn!(error = %e, "resolving decision replicas failed"),
                    }
                    tokio::time::sleep(every).await;
                }
            };
            tokio::select! {
                () = shutdown.wait() => {}
                () = refresh => {}
            }
        });
    }

    {
        let binder = binder.clone();
        let client = client.clone();
        let shutdown = shutdown.clone();
        tasks.spawn(crate::watch::run(client, binder, shutdown.wait()));
    }

    tracing::info!(
        scheduler_names = ?args.scheduler_names,
        identity = %identity,
        "binder started"
    );
    binder.run(stop_signal).await;

    // The binder took no more work and its binds are done: give the lease up, then stop the rest.
    leadership.release().await;
    let _ = stop.send(true);
    while tasks.join_next().await.is_some() {}
    tracing::info!("binder stopped");
    Ok(())
}

/// The extenders of a policy file (every policy of a file has the file's extenders), when one
/// of them binds: the binder asks it to bind the pods it is interested in.
pub fn bind_extenders(
    path: &std::path::Path,
    metrics: &placement_scheduler::extender::ExtenderMetrics,
) -> anyhow::Result<Option<Arc<placement_scheduler::extender::ExtenderSet>>> {
    let loaded = placement_scheduler::grpc::policy_file::load_policies(path)?;
    let configs = loaded.policies.first().map(|p| p.extenders.clone()).unwrap_or_default();
    let set = placement_scheduler::extender::ExtenderSet::new(&configs, metrics)
        .with_context(|| format!("--policy-file {}", path.display()))?;
    if !set.has_binder() {
        return Ok(None);
    }
    tracing::info!(path = %path.display(), "binding through the extender with a bindVerb for the pods it is interested in");
    Ok(Some(Arc::new(set)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: RunArgs,
    }

    #[test]
    fn flags_parse_with_defaults() {
        let cli = Cli::try_parse_from(["binder", "--decision-endpoints", "http://a:1,http://b:2"]).unwrap();
        let a = cli.args;
        assert_eq!(a.decision_endpoints, ["http://a:1", "http://b:2"]);
        assert_eq!(a.scheduler_names, ["placement-scheduler"]);
        assert_eq!(
            (
                a.batch_size,
                a.batch_window_ms,
                a.bind_concurrency,
                a.event_concurrency,
                a.api_qps
            ),
            (256, 5, 64, 8, 0)
        );
        assert!(a.leader_elect && !a.no_leader_elect);
        assert_eq!(a.lease_name, "placement-binder");
        assert_eq!(a.http_listen.to_string(), "0.0.0.0:10251");
        assert_eq!(a.log_format, LogFormat::Text);
    }

    #[test]
    fn leader_election_can_be_turned_off() {
        let a = Cli::try_parse_from(["binder", "--decision-dns", "placement:50051", "--no-leader-elect"])
            .unwrap()
            .args;
        assert!(a.no_leader_elect);
        let a = Cli::try_parse_from(["binder", "--decision-dns", "placement:50051", "--leader-elect=false"])
            .unwrap()
            .args;
        assert!(!a.leader_elect);
        let a = Cli::try_parse_from([
            "binder",
            "--decision-dns",
            "placement:50051",
            "--scheduler-name",
            "a",
            "--scheduler-name",
            "b",
        ])
        .unwrap()
        .args;
        assert_eq!(a.scheduler_names, ["a", "b"]);
    }

    #[test]
    fn a_decision_source_is_required_and_exclusive() {
        assert!(Cli::try_parse_from(["binder"]).is_err());
        assert!(
            Cli::try_parse_from(["binder", "--decision-dns", "x:1", "--decision-endpoints", "http://a:1"]).is_err()
        );
    }

    #[test]
    fn dns_source_parses() {
        assert_eq!(
            parse_dns("placement.svc:50051").unwrap(),
            EndpointSource::Dns {
                host: "placement.svc".into(),
                port: 50051
            }
        );
        assert!(parse_dns("placement").is_err());
        assert!(parse_dns(":1").is_err());
    }

    #[test]
    fn decision_tls_flags() {
        let a = Cli::try_parse_from(["binder", "--decision-dns", "x:1"]).unwrap().args;
        assert!(decision_tls(&a).unwrap().is_none());
        // A client certificate needs its key and a CA.
        assert!(Cli::try_parse_from(["binder", "--decision-dns", "x:1", "--decision-tls-cert", "c"]).is_err());
        assert!(Cli::try_parse_from(["binder", "--decision-dns", "x:1", "--decision-tls-server-name", "s"]).is_err());
        let a = Cli::try_parse_from([
            "binder",
            "--decision-dns",
            "x:1",
            "--decision-tls-ca",
            "/nonexistent/ca.pem",
            "--decision-tls-server-name",
            "placement-decision",
        ])
        .unwrap()
        .args;
        let err = format!("{:#}", decision_tls(&a).unwrap_err());
        assert!(
            err.contains("--decision-tls-ca") && err.contains("/nonexistent/ca.pem"),
            "{err}"
        );
    }

    /// Editing the experiments file rolls a change forward (and back) while running; an invalid
    /// edit keeps the running version.
    #[tokio::test(start_paused = true)]
    async fn the_experiments_file_is_reloaded_while_running() {
        let dir = std::env::temp_dir().join(format!("placement-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("experiments.yaml");
        let v1 = "experiments: [{name: e, arms: [{name: a, weight: 1, policy: default}]}]";
        std::fs::write(&path, v1).unwrap();
        let (text, set) = read_experiments(&path).unwrap();
        let pool = Arc::new(
            ReplicaPool::new(
                EndpointSource::Static(vec!["http://127.0.0.1:1".into()]),
                ReplicaConfig::default(),
            )
            .unwrap(),
        );
        let metrics = Arc::new(BinderMetrics::new());
        let experiments = Arc::new(crate::experiments::Experiments::new(
            crate::experiments::Routing::build(set).unwrap(),
            Arc::clone(&metrics),
        ));
        let pools = Arc::new(crate::replica_pools::ReplicaPools::new(pool));
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(reload_experiments(
            Arc::clone(&experiments),
            pools,
            path.clone(),
            text,
            Duration::from_secs(10),
            Shutdown(stopped),
        ));
        let policy = |e: &crate::experiments::Experiments| e.current().set.experiments[0].arms[0].policy.clone();
        assert_eq!(policy(&experiments), "default");

        std::fs::write(&path, v1.replace("default", "bin-packing")).unwrap();
        tokio::time::sleep(Duration::from_secs(11)).await;
        assert_eq!(policy(&experiments), "bin-packing", "rolled forward");

        std::fs::write(&path, "experiments: [{name: e, arms: []}]").unwrap();
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(
            policy(&experiments),
            "bin-packing",
            "an invalid file keeps the running version"
        );

        std::fs::write(&path, v1).unwrap();
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(policy(&experiments), "default", "rolled back");
        assert_eq!(
            (
                metrics.experiments.reloads_total("ok"),
                metrics.experiments.reloads_total("invalid")
            ),
            (2, 1)
        );

        stop.send(true).unwrap();
        task.await.unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn identities_are_unique() {
        assert_ne!(default_identity(), default_identity());
    }
}
