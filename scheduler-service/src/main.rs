//! `scheduler-service`: runs one stateless decision replica.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use placement_scheduler::grpc::{serve, Metrics, PolicyFileConfig, ServerConfig, ServerTls, ServiceConfig};
use tokio::net::TcpListener;
use tokio::sync::watch;

// mimalloc returns freed memory to the OS: with glibc malloc a replica stayed near 600 MiB after
// a full sync of 5,000 nodes and 150,000 pods with ~73 MiB live (docs/performance.md); `main`
// makes it do so at once (`allocator::configure`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Log output format.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// A stateless gRPC decision replica of the placement scheduler.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Address the gRPC API listens on.
    #[arg(long, env = "PLACEMENT_LISTEN", default_value = "127.0.0.1:50051")]
    listen: SocketAddr,
    /// Address of the Prometheus /metrics endpoint (and /healthz); "off" disables it.
    #[arg(long, env = "PLACEMENT_METRICS_LISTEN", default_value = "127.0.0.1:9464")]
    metrics_listen: String,
    /// Log format.
    #[arg(long, env = "PLACEMENT_LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
    /// A component-base `TracingConfiguration` file (`apiVersion: apiserver.config.k8s.io/v1`,
    /// `kind: TracingConfiguration`, `endpoint`, `samplingRatePerMillion`), as kube-apiserver's
    /// `--tracing-config-file`: spans exported over OTLP/gRPC to that collector. Without it,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (if set) says where.
    #[arg(long, env = "PLACEMENT_TRACING_CONFIG_FILE")]
    tracing_config_file: Option<std::path::PathBuf>,
    /// Largest gRPC message accepted or sent, in bytes (a full snapshot of 5,000 nodes and
    /// 150,000 pods is about 40 MiB).
    #[arg(long, env = "PLACEMENT_MAX_MESSAGE_BYTES", default_value_t = 256 << 20)]
    max_message_bytes: usize,
    /// Memory the requests in flight may take together, in bytes: each request's bytes and what
    /// decoding and serving it will take, bounded before it is decoded; a request that does not
    /// fit answers RESOURCE_EXHAUSTED.
    #[arg(long, env = "PLACEMENT_REQUEST_MEMORY_BYTES", default_value_t = placement_scheduler::grpc::server::DEFAULT_REQUEST_MEMORY_BYTES)]
    request_memory_bytes: usize,
    /// Seconds a new connection has to send the HTTP/2 preface (or a TLS client hello) before it
    /// is closed.
    #[arg(long, env = "PLACEMENT_CONNECTION_HANDSHAKE_SECONDS", default_value_t = 20)]
    connection_handshake_seconds: u64,
    /// Seconds a connection may stay with no call in flight and no bytes exchanged before it is
    /// closed (clients reconnect).
    #[arg(long, env = "PLACEMENT_CONNECTION_IDLE_SECONDS", default_value_t = 300)]
    connection_idle_seconds: u64,
    /// Most pods one Schedule request may carry.
    #[arg(long, env = "PLACEMENT_MAX_BATCH_SIZE", default_value_t = 10_000)]
    max_batch_size: usize,
    /// Memory budget of the snapshot cache, in bytes; least recently used snapshots are evicted.
    #[arg(long, env = "PLACEMENT_SNAPSHOT_CACHE_BYTES", default_value_t = placement_scheduler::grpc::service::DEFAULT_SNAPSHOT_CACHE_BYTES)]
    snapshot_cache_bytes: usize,
    /// How long to wait for in-flight calls after SIGTERM before exiting anyway.
    #[arg(long, env = "PLACEMENT_SHUTDOWN_GRACE_SECONDS", default_value_t = 30)]
    shutdown_grace_seconds: u64,
    /// Serve gRPC over TLS with this certificate chain (PEM); needs `--tls-key`.
    #[arg(long, env = "PLACEMENT_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// Private key (PEM) of `--tls-cert`.
    #[arg(long, env = "PLACEMENT_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Require mutual TLS: clients must present a certificate signed by this CA (PEM); needs
    /// `--tls-cert`.
    #[arg(long, env = "PLACEMENT_TLS_CLIENT_CA", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// Policy file replacing the built-in policies: placement's `PolicyConfiguration` or
    /// kube-scheduler's `KubeSchedulerConfiguration` (v1). Read at start (an invalid file stops
    /// the service) and reloaded when it changes (an invalid change keeps the current policies).
    #[arg(long, env = "PLACEMENT_POLICY_FILE")]
    policy_file: Option<PathBuf>,
    /// How often to check the policy file for changes, in seconds; 0 reads it only at start.
    #[arg(long, env = "PLACEMENT_POLICY_RELOAD_SECONDS", default_value_t = 5)]
    policy_reload_seconds: u64,
    /// Threads a pod's pass over the nodes may use in a cluster of at least 4,096 nodes: 1
    /// never splits it, 2 runs its halves on two cores (a helper thread spins between pods of a
    /// batch); 0 is 2 where the process has two cores or more. Replicas sharing a machine's
    /// cores with each other may set 1.
    #[arg(long, env = "PLACEMENT_PASS_THREADS", default_value_t = 0)]
    pass_threads: usize,
    /// kube-scheduler's feature gates that change a decision, as kube-scheduler's own
    /// `--feature-gates` (`TopologyAwareWorkloadScheduling=true,PodGroupPreemptionPolicy=false`):
    /// give the value your cluster's kube-scheduler runs with. Unset gates keep kube 1.37's
    /// defaults, but `GenericWorkload`, on (docs/podgroups.md, "Feature gates").
    #[arg(long, env = "PLACEMENT_FEATURE_GATES", default_value = "")]
    feature_gates: String,
}

fn read_pem(flag: &str, path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("{flag}: reading {}", path.display()))
}

/// The TLS configuration of the flags, files read now so a bad path fails at start.
fn tls_config(args: &Args) -> anyhow::Result<Option<ServerTls>> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        anyhow::ensure!(
            args.tls_cert.is_none() && args.tls_key.is_none() && args.tls_client_ca.is_none(),
            "--tls-cert and --tls-key go together (and --tls-client-ca needs both)"
        );
        return Ok(None);
    };
    Ok(Some(ServerTls {
        cert_pem: read_pem("--tls-cert", cert)?,
        key_pem: read_pem("--tls-key", key)?,
        client_ca_pem: args
            .tls_client_ca
            .as_deref()
            .map(|ca| read_pem("--tls-client-ca", ca))
            .transpose()?,
    }))
}

async fn terminated() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

async fn serve_metrics(addr: SocketAddr, metrics: Arc<Metrics>, mut stop: watch::Receiver<bool>) -> anyhow::Result<()> {
    use axum::routing::get;
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let m = Arc::clone(&metrics);
                async move {
                    (
                        [(
                            "content-type",
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        m.encode(),
                    )
                }
            }),
        )
        .route("/healthz", get(|| async { "ok" }));
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding metrics address {addr}"))?;
    // The bound address, so port 0 tells which port it got.
    let bound = listener.local_addr().unwrap_or(addr);
    tracing::info!(addr = %bound, "metrics listening");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await
        .context("serving metrics")
}

fn main() -> anyhow::Result<()> {
    placement_scheduler::allocator::configure();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?
        .block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let args = Args::parse();
    placement_scheduler::engine::parallel::set_threads(args.pass_threads).context("--pass-threads")?;
    let gates = placement_scheduler::engine::gates::FeatureGates::PLACEMENT_DEFAULT
        .with(&args.feature_gates)
        .context("--feature-gates")?;
    placement_scheduler::engine::gates::set_process_default(gates);
    let tls = tls_config(&args)?;
    let export = placement_scheduler::telemetry::TraceExport::from_flag(args.tracing_config_file.as_deref())
        .context("--tracing-config-file")?;
    let _telemetry = placement_scheduler::telemetry::init(
        "scheduler-service",
        matches!(args.log_format, LogFormat::Json),
        "info",
        &export,
    )?;
    let metrics = Arc::new(Metrics::new());
    let (stop_tx, stop_rx) = watch::channel(false);

    let metrics_task = match args.metrics_listen.as_str() {
        "off" | "" => None,
        addr => {
            let addr: SocketAddr = addr
                .parse()
                .with_context(|| format!("--metrics-listen: invalid address {addr:?}"))?;
            Some(tokio::spawn(serve_metrics(addr, Arc::clone(&metrics), stop_rx.clone())))
        }
    };

    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding gRPC address {}", args.listen))?;
    tracing::info!(
        addr = %listener.local_addr()?,
        tls = match &tls { None => "off", Some(t) if t.client_ca_pem.is_some() => "mutual", Some(_) => "on" },
        "placement decision service listening"
    );
    tracing::info!(feature_gates = %gates.to_flag(), "feature gates");
    let config = ServerConfig {
        service: ServiceConfig {
            max_batch_size: args.max_batch_size,
            snapshot_cache_bytes: args.snapshot_cache_bytes,
            ..ServiceConfig::default()
        },
        max_message_bytes: args.max_message_bytes,
        request_memory_bytes: args.request_memory_bytes,
        connections: placement_scheduler::grpc::conn::ConnLimits {
            handshake: Duration::from_secs(args.connection_handshake_seconds),
            idle: Duration::from_secs(args.connection_idle_seconds),
        },
        tls,
        policy_file: args.policy_file.clone().map(|path| PolicyFileConfig {
            path,
            reload_interval: (args.policy_reload_seconds > 0).then(|| Duration::from_secs(args.policy_reload_seconds)),
        }),
    };
    let mut grpc_stop = stop_rx.clone();
    let mut server = tokio::spawn(serve(listener, config, Arc::clone(&metrics), async move {
        let _ = grpc_stop.wait_for(|s| *s).await;
    }));

    tokio::select! {
        () = terminated() => tracing::info!("signal received"),
        r = &mut server => return r.context("gRPC server task")?.context("gRPC server"),
    }
    let _ = stop_tx.send(true);
    let grace = Duration::from_secs(args.shutdown_grace_seconds);
    match tokio::time::timeout(grace, server).await {
        Ok(r) => r.context("gRPC server task")?.context("gRPC server")?,
        Err(_) => tracing::warn!(?grace, "in-flight calls did not finish within the grace period"),
    }
    if let Some(t) = metrics_task {
        let _ = tokio::time::timeout(Duration::from_secs(1), t).await;
    }
    tracing::info!("stopped");
    Ok(())
}
