//! The `binder-agent simulate` command line.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use placement_scheduler::synth::ClusterShape;

use crate::binder::BinderConfig;
use crate::experiments::ExperimentSet;
use crate::queue::QueueConfig;

use super::compare::compare_arms;
use super::config::*;
use super::run::simulate;

pub use crate::output::OutputFormat;

/// Parses `250ms`, `5s`, `2m`, `1h` or plain seconds.
pub(super) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("invalid duration {s:?}"))?;
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1e3,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("invalid duration unit in {s:?} (use ms, s, m or h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("invalid duration {s:?}: {e}"))
}

/// Parses a PodGroup size: `K`, or a range `MIN-MAX` (both at least 1).
pub(super) fn parse_group_size(s: &str) -> Result<(usize, usize), String> {
    let number = |t: &str| -> Result<usize, String> {
        match t.trim().parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(format!("invalid group size {s:?}: use K or MIN-MAX, each at least 1")),
        }
    };
    let (min, max) = match s.split_once('-') {
        Some((a, b)) => (number(a)?, number(b)?),
        None => {
            let n = number(s)?;
            (n, n)
        }
    };
    if min > max {
        return Err(format!("invalid group size {s:?}: {min} is more than {max}"));
    }
    Ok((min, max))
}

/// Flags of `binder-agent simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// Nodes of the synthetic cluster.
    #[arg(long, default_value_t = 5000)]
    pub nodes: usize,
    /// Pending pods to schedule (synthetic cluster).
    #[arg(long, default_value_t = 20_000)]
    pub pods: usize,
    /// Pods already bound on each synthetic node before the run (DaemonSets first, then
    /// applications filling `--utilization-min`..`--utilization-max` of the node); 0 starts every
    /// node empty. Kubernetes' scalability envelope is 30.
    #[arg(long, default_value_t = 0)]
    pub bound_per_node: usize,
    /// Zones of the synthetic cluster.
    #[arg(long, default_value_t = 3)]
    pub zones: usize,
    /// Fraction of GPU nodes (tainted).
    #[arg(long, default_value_t = 0.02)]
    pub gpu_fraction: f64,
    /// Fraction of other nodes dedicated to a team (tainted).
    #[arg(long, default_value_t = 0.10)]
    pub tainted_fraction: f64,
    /// Fraction of spot nodes (PreferNoSchedule taint).
    #[arg(long, default_value_t = 0.20)]
    pub spot_fraction: f64,
    /// Fraction of cordoned nodes.
    #[arg(long, default_value_t = 0.01)]
    pub cordoned_fraction: f64,
    /// The `pods` allocatable of every node.
    #[arg(long, default_value_t = 110)]
    pub max_pods: i64,
    /// Lowest fraction of a node the already-bound pods request.
    #[arg(long, default_value_t = 0.40)]
    pub utilization_min: f64,
    /// Highest fraction of a node the already-bound pods request.
    #[arg(long, default_value_t = 0.60)]
    pub utilization_max: f64,
    /// Replicas per workload (Deployment-like pods sharing a spec); 1 makes every pod distinct.
    #[arg(long, default_value_t = 1)]
    pub replicas_per_workload: usize,
    /// Share of pending pods that are workload replicas when `--replicas-per-workload` > 1.
    #[arg(long, default_value_t = 0.5)]
    pub workload_share: f64,
    /// Share of pending pods that are replicas of highly available workloads (8 each) with
    /// required per-node pod anti-affinity and zone topology spreading (DoNotSchedule, maxSkew 1).
    #[arg(long, default_value_t = 0.0)]
    pub topology_share: f64,
    /// Gang PodGroups (scheduling.k8s.io/v1beta1, minCount = size, priority 1000) mixed into the
    /// synthetic workload, in addition to `--pods`: each group's pods name it
    /// (`spec.schedulingGroup`) and arrive together.
    #[arg(long, default_value_t = 0, conflicts_with = "from_file")]
    pub groups: usize,
    /// Pods per PodGroup: K, or a range MIN-MAX (e.g. 8-64) the sizes are spread over.
    #[arg(long, default_value = "8", value_parser = parse_group_size, value_name = "K|MIN-MAX")]
    pub group_size: (usize, usize),
    /// The PodGroups' topology key: each group placed whole in one domain of this node label.
    /// Synthetic nodes without the label get one (`--nodes-per-domain` nodes per domain);
    /// without a key a group may take any nodes, still all or nothing.
    #[arg(long, value_name = "KEY")]
    pub topology_key: Option<String>,
    /// kube-scheduler's feature gates the in-process replicas decide under, as kube's
    /// `--feature-gates` (e.g. `TopologyAwareWorkloadScheduling=true`). Unset gates keep kube
    /// 1.37's defaults but `GenericWorkload` (on); `--topology-key` turns
    /// `TopologyAwareWorkloadScheduling` on unless this names it.
    #[arg(long, default_value = "", value_name = "NAME=BOOL,...")]
    pub feature_gates: String,
    /// With `--topology-key`: nodes per domain (in node order, named `<key's last segment>-NNNN`,
    /// e.g. `rack-0003`) for the synthetic nodes that lack the label.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub nodes_per_domain: u32,
    /// Seed of the synthetic cluster, the tie-breaks and the injected faults.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Load the cluster from `kubectl get nodes,pods -A -o json` (or `-o yaml`) output instead of
    /// synthesizing it (`kubectl get nodes,pods,pdb -A -o json` includes the PodDisruptionBudgets
    /// preemption honours; add `pvc,pv,storageclass,csinode,csidriver,csistoragecapacity` for the
    /// volume filters: the simulated PV controller binds every claim the binder writes a binding
    /// for, at once; add `deviceclass,resourceclaim,resourceclaimtemplate,resourceslice` for
    /// devices: a pending pod naming a template gets its claim generated, as the resourceclaim
    /// controller makes it; add `podgroups` for PodGroups, scheduling.k8s.io/v1beta1: a group
    /// without its PodGroup or short of minCount pods is left out, as the binder would hold it).
    #[arg(long, value_name = "FILE")]
    pub from_file: Option<PathBuf>,
    /// With `--from-file`, schedule every unbound pod, whatever scheduler it names.
    #[arg(long)]
    pub all_pending: bool,
    /// Scheduler names whose pods the binder places.
    #[arg(long = "scheduler-name", default_value = "placement-scheduler")]
    pub scheduler_names: Vec<String>,
    /// Use running decision replicas at these URLs instead of in-process ones.
    #[arg(long = "decision-address", value_name = "URL")]
    pub decision_addresses: Vec<String>,
    /// In-process decision replicas to start and balance over.
    #[arg(long, default_value_t = 1)]
    pub decision_replicas: usize,
    /// Threads a pod's pass over the nodes may use in the in-process replicas (the service's
    /// `--pass-threads`: 1 never splits it, 0 is 2 where there are two cores).
    #[arg(long, default_value_t = 0)]
    pub pass_threads: usize,
    /// Submit pending pods at this many per second instead of all at once.
    #[arg(long)]
    pub arrival_rate: Option<f64>,
    /// Give up after this long (e.g. 90s, 10m).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Most pods per decision call.
    #[arg(long, default_value_t = 256)]
    pub batch_size: usize,
    /// How long a partial batch waits to fill.
    #[arg(long, default_value = "5ms", value_parser = parse_duration)]
    pub batch_window: Duration,
    /// Batches decided at once, each on its own partition of the nodes and its own replica
    /// (at most `--decision-replicas` run at once).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub batches_in_flight: u32,
    /// Binds in flight at once.
    #[arg(long, default_value_t = 64)]
    pub bind_concurrency: usize,
    /// API writes per second (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub api_qps: u32,
    /// Scheduling policy (empty: the service's default).
    #[arg(long, default_value = "")]
    pub policy: String,
    /// Policy file of the in-process decision replicas (the service's `--policy-file`: a
    /// KubeSchedulerConfiguration or placement's PolicyConfiguration), extenders included. An
    /// extender with a `bindVerb` is refused: it would bind in a real cluster, not this one.
    #[arg(long, value_name = "FILE")]
    pub policy_file: Option<PathBuf>,
    /// Delay before the binder sees a binding through the watch.
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    pub watch_latency: Duration,
    /// Fraction of binds failing like a 500 (retried with backoff).
    #[arg(long, default_value_t = 0.0)]
    pub bind_failure_rate: f64,
    /// Fraction of binds whose reply is lost after the binding was applied.
    #[arg(long, default_value_t = 0.0)]
    pub lost_reply_rate: f64,
    /// Added latency of every bind.
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    pub bind_delay: Duration,
    /// Backoff after a first failure (kube-scheduler: 1s).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub initial_backoff: Duration,
    /// Experiments and shadow policies (the binder's `--experiments-file` format): pods are split
    /// into arms as the binder would, and the summary ends with the per-arm table.
    #[arg(long, value_name = "FILE")]
    pub experiments_file: Option<PathBuf>,
    /// With `--experiments-file`: run the whole workload once per arm of each experiment (every
    /// selected pod in that arm, on a fresh copy of the cluster) and print one comparison table.
    #[arg(long, requires = "experiments_file")]
    pub compare_arms: bool,
    /// Summary format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// The policies of `--policy-file`, where they come from, and the file's format.
pub type LoadedPolicyFile = (PathBuf, placement_scheduler::grpc::policy_file::LoadedPolicies);

impl SimulateArgs {
    /// The feature gates of `--feature-gates`, with TopologyAwareWorkloadScheduling on for
    /// `--topology-key` unless the flag names it.
    pub fn gates(&self) -> anyhow::Result<placement_scheduler::engine::gates::FeatureGates> {
        let mut gates = placement_scheduler::engine::gates::FeatureGates::PLACEMENT_DEFAULT;
        if self.topology_key.is_some() {
            gates.topology_aware_workload_scheduling = true;
        }
        gates.with(&self.feature_gates).context("--feature-gates")
    }

    /// Reads `--policy-file` (when given); an extender with a `bindVerb` is refused, since
    /// simulate's cluster is in memory and an extender binds in a real one.
    pub fn policies(&self) -> anyhow::Result<Option<LoadedPolicyFile>> {
        let Some(path) = &self.policy_file else {
            return Ok(None);
        };
        let loaded = placement_scheduler::grpc::policy_file::load_policies(path)?;
        anyhow::ensure!(
            !loaded
                .policies
                .iter()
                .any(|p| p.extenders.iter().any(|e| e.is_binder())),
            "--policy-file {}: an extender with a bindVerb would bind in a real cluster; simulate's cluster is in \
             memory, so bindVerb is not supported here",
            path.display()
        );
        Ok(Some((path.clone(), loaded)))
    }

    /// [`SimulateArgs::config`] with the in-process replicas serving `policies` (from
    /// [`SimulateArgs::policies`]).
    pub fn config_with(&self, policies: Option<&LoadedPolicyFile>) -> SimConfig {
        let mut config = self.config();
        if let Some((path, loaded)) = policies {
            config.server.service.policies = loaded.policies.clone();
            config.server.service.policy_source = placement_scheduler::grpc::PolicySource::File {
                path: path.display().to_string(),
                format: loaded.format,
            };
        }
        config
    }

    /// The run these flags describe.
    pub fn config(&self) -> SimConfig {
        let cluster = match &self.from_file {
            Some(path) => ClusterSource::File {
                path: path.clone(),
                all_pending: self.all_pending,
            },
            None => ClusterSource::Synthetic(SyntheticCluster {
                shape: ClusterShape {
                    nodes: self.nodes,
                    pods_per_node: self.bound_per_node,
                    zones: self.zones,
                    gpu_fraction: self.gpu_fraction,
                    tainted_fraction: self.tainted_fraction,
                    spot_fraction: self.spot_fraction,
                    cordoned_fraction: self.cordoned_fraction,
                    max_pods: self.max_pods,
                    utilization: (self.utilization_min, self.utilization_max),
                    ..ClusterShape::default()
                },
                pending: self.pods,
                replicas_per_workload: self.replicas_per_workload,
                workload_share: self.workload_share,
                topology_share: self.topology_share,
                seed: self.seed,
                pod_groups: (self.groups > 0).then(|| SyntheticPodGroups {
                    groups: self.groups,
                    size: self.group_size,
                    topology_key: self.topology_key.clone(),
                    nodes_per_domain: self.nodes_per_domain as usize,
                }),
            }),
        };
        let decision = if self.decision_addresses.is_empty() {
            DecisionSource::InProcess {
                replicas: self.decision_replicas,
            }
        } else {
            DecisionSource::Endpoints(self.decision_addresses.clone())
        };
        SimConfig {
            cluster,
            decision,
            binder: BinderConfig {
                scheduler_names: self.scheduler_names.clone(),
                batch_size: self.batch_size,
                batch_window: self.batch_window,
                batches_in_flight: self.batches_in_flight as usize,
                bind_concurrency: self.bind_concurrency,
                api_qps: self.api_qps,
                policy: self.policy.clone(),
                seed: self.seed,
                queue: QueueConfig {
                    initial_backoff: self.initial_backoff,
                    ..QueueConfig::default()
                },
                ..BinderConfig::default()
            },
            arrival_rate: self.arrival_rate,
            timeout: self.timeout,
            watch_latency: self.watch_latency,
            faults: Faults {
                bind_failure_rate: self.bind_failure_rate,
                lost_reply_rate: self.lost_reply_rate,
                bind_delay: self.bind_delay,
                event_delay: Duration::ZERO,
                seed: self.seed,
            },
            progress: !self.quiet,
            ..SimConfig::default()
        }
    }
}

/// Runs a simulation and prints its summary.
pub async fn main(args: SimulateArgs) -> anyhow::Result<()> {
    let _telemetry = placement_scheduler::telemetry::init_once(
        "binder-agent-simulate",
        false,
        "error",
        &placement_scheduler::telemetry::TraceExport::default(),
    )?;
    placement_scheduler::engine::parallel::set_threads(args.pass_threads).context("--pass-threads")?;
    placement_scheduler::engine::gates::set_process_default(args.gates()?);
    let policies = args.policies()?;
    // The in-process replicas serve the file's policies (and call its extenders).
    let config = || args.config_with(policies.as_ref());
    let set = match &args.experiments_file {
        Some(path) => {
            Some(ExperimentSet::load(path).with_context(|| format!("--experiments-file {}", path.display()))?)
        }
        None => None,
    };
    if args.compare_arms {
        let set = set.unwrap_or_default();
        let comparison = compare_arms(config, &set).await?;
        match args.output {
            OutputFormat::Text => print!("{comparison}"),
            OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&comparison)?),
        }
        anyhow::ensure!(comparison.passed(), "a run timed out or failed its consistency checks");
        return Ok(());
    }
    let mut config = config();
    config.experiments = set;
    let summary = simulate(config).await?;
    match args.output {
        OutputFormat::Text => print!("{summary}"),
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&summary)?),
    }
    if !summary.completed {
        anyhow::bail!("timed out with {} pods still pending", summary.still_pending);
    }
    if !summary.passed() {
        anyhow::bail!("consistency checks failed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("2 weeks").is_err());
    }

    #[test]
    fn group_sizes_parse_as_one_size_or_a_range() {
        assert_eq!(parse_group_size("8"), Ok((8, 8)));
        assert_eq!(parse_group_size("8-64"), Ok((8, 64)));
        assert!(parse_group_size("0").is_err());
        assert!(parse_group_size("64-8").unwrap_err().contains("64 is more than 8"));
        assert!(parse_group_size("a-b").is_err());
        assert!(parse_group_size("").is_err());
    }

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: SimulateArgs,
    }

    #[test]
    fn group_flags_make_the_synthetic_pod_groups() {
        use clap::Parser as _;
        let a = Cli::try_parse_from([
            "simulate",
            "--groups",
            "40",
            "--group-size",
            "8-64",
            "--topology-key",
            "rack",
            "--nodes-per-domain",
            "10",
        ])
        .unwrap()
        .args;
        let ClusterSource::Synthetic(c) = a.config().cluster else {
            panic!("a synthetic cluster")
        };
        assert_eq!(
            c.pod_groups,
            Some(SyntheticPodGroups {
                groups: 40,
                size: (8, 64),
                topology_key: Some("rack".into()),
                nodes_per_domain: 10,
            })
        );
        // No groups: none; the defaults otherwise.
        let a = Cli::try_parse_from(["simulate"]).unwrap().args;
        assert_eq!((a.group_size, a.nodes_per_domain), ((8, 8), 20));
        let ClusterSource::Synthetic(c) = a.config().cluster else {
            panic!("a synthetic cluster")
        };
        assert_eq!(c.pod_groups, None);
        assert!(Cli::try_parse_from(["simulate", "--groups", "3", "--from-file", "x.json"]).is_err());
        assert!(Cli::try_parse_from(["simulate", "--nodes-per-domain", "0"]).is_err());
    }
}
