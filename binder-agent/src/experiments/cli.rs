//! `binder-agent experiments`: prints the per-arm comparison of a running binder (its
//! `/experiments` endpoint), or checks an experiments file and shows where sample units land.

use std::path::PathBuf;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::config::ExperimentSet;
use crate::output::OutputFormat;

/// Flags of `binder-agent experiments`.
#[derive(Debug, clap::Args)]
#[command(after_help = EXPERIMENTS_HELP)]
pub struct ExperimentsArgs {
    /// Base URL of a running binder's HTTP endpoints (`--http-listen`).
    #[arg(long, default_value = "http://127.0.0.1:10251", conflicts_with = "check")]
    pub url: String,
    /// Table or JSON.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Validate an experiments file instead (errors name the field) and list its arms.
    #[arg(long, value_name = "FILE")]
    pub check: Option<PathBuf>,
}

const EXPERIMENTS_HELP: &str = "\
The experiments file (binder-agent run --experiments-file):

experiments:
  - name: packing                # first experiment whose selector matches a pod decides it
    selector:
      namespaces: [team-a]       # any namespace when empty
      labelSelector: {matchLabels: {tier: batch}}
    unit: workload               # pod | workload | namespace: what stays in one arm
    salt: \"2026-q4\"              # default: the name
    allowPin: true               # honour the annotation placement.dev/pin-arm: <arm>
    arms:
      - {name: control, weight: 80, policy: default}
      - {name: candidate, weight: 20, policy: bin-packing,
         backend: {endpoints: [\"http://placement-next:50051\"]}}
shadows:
  - {name: packing-shadow, policy: bin-packing}

Bound pods are annotated placement.dev/policy, placement.dev/experiment, placement.dev/arm and
placement.dev/assignment (hash or pin).";

/// `GET url` over HTTP/1.1 (no TLS), returning the body of a 200.
async fn get(url: &str) -> anyhow::Result<String> {
    let uri: tonic::transport::Uri = url.parse().with_context(|| format!("--url {url:?}"))?;
    anyhow::ensure!(
        uri.scheme_str().is_none_or(|s| s == "http"),
        "--url {url:?}: only http:// is supported"
    );
    let authority = uri
        .authority()
        .with_context(|| format!("--url {url:?}: no host"))?
        .clone();
    let port = authority.port_u16().unwrap_or(80);
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut stream = tokio::net::TcpStream::connect((authority.host(), port))
        .await
        .with_context(|| format!("connecting to {authority}"))?;
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nhost: {authority}\r\nconnection: close\r\n\r\n").as_bytes())
        .await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").context("the binder's answer is not HTTP")?;
    let status = head.lines().next().unwrap_or_default();
    anyhow::ensure!(status.split(' ').nth(1) == Some("200"), "GET {url}: {status}");
    Ok(body.to_string())
}

/// Runs the subcommand.
pub async fn main(args: ExperimentsArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.check {
        let set = ExperimentSet::load(path).with_context(|| format!("{}", path.display()))?;
        println!("{}: valid", path.display());
        for e in &set.experiments {
            println!(
                "experiment {} (unit {:?}, salt {:?}, pins {})",
                e.name,
                e.unit,
                e.salt,
                if e.allow_pin { "allowed" } else { "ignored" }
            );
            for a in &e.arms {
                let backend = a.backend.as_ref().map_or("main".to_string(), |b| b.endpoints.join(","));
                println!(
                    "  arm {:<14} weight {:>5} ({:>5.1}%)  policy {:<14} backend {backend}",
                    a.name,
                    a.weight,
                    f64::from(a.weight) * 100.0 / e.total_weight() as f64,
                    if a.policy.is_empty() { "default" } else { &a.policy },
                );
            }
        }
        for s in &set.shadows {
            let backend = s.backend.as_ref().map_or("main".to_string(), |b| b.endpoints.join(","));
            println!(
                "shadow {} policy {} backend {backend}",
                s.name,
                if s.policy.is_empty() { "default" } else { &s.policy }
            );
        }
        return Ok(());
    }
    print!("{}", fetch(&args.url, args.output).await?);
    Ok(())
}

/// The per-arm comparison of the binder serving at `base_url` (its `/experiments`), as a text
/// table or JSON.
pub async fn fetch(base_url: &str, output: OutputFormat) -> anyhow::Result<String> {
    let base = base_url.trim_end_matches('/');
    let url = match output {
        OutputFormat::Text => format!("{base}/experiments"),
        OutputFormat::Json => format!("{base}/experiments?format=json"),
    };
    get(&url).await
}
