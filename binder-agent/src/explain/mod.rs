//! `kubectl placement explain POD`: why a pod is pending, or why it landed where it did.
//!
//! The command reads the live cluster through the kubeconfig exactly as the binder does
//! ([`cluster`]), asks a decision replica or the decision service's implementation in this process
//! ([`decide`]) to Rank the pod, and prints the verdict with kube-scheduler's message, the best
//! nodes with each plugin's weighted score, the refused nodes grouped by filter and reason, and for
//! a pod that fits nowhere what would make it fit ([`report`], [`blockers`]); `--node` explains
//! one node, `--policy` / `--policy-file` put another policy beside the current one. Text for a
//! terminal ([`render`]), or `-o json`.
//!
//! A pod naming a PodGroup (`spec.schedulingGroup`) also gets its group's cycle: the group's
//! pending pods decided together as the binder sends them, the domain the group would take or
//! kube's message for why none holds it, and per domain how many of its pods fit (the engine's
//! `podgroup::explain`, in process; a decision replica answers the verdict through `Schedule`).
//!
//! The same command is `kubectl-placement explain` (a kubectl plugin: `kubectl placement explain`)
//! and `binder-agent explain`. docs/explain.md is the user's guide.

pub mod blockers;
pub mod cluster;
pub mod decide;
pub mod render;
pub mod report;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use placement_scheduler::engine::podgroup::{self, GroupReason};
use placement_scheduler::engine::{Deadline, Decision, Policy, Profile, Snapshot};
use placement_scheduler::grpc::policy_file::load_policies;
use placement_scheduler::grpc::{convert, PolicySource, ServiceConfig};
use placement_scheduler::proto;

use crate::api::{scheduled_message, PodRef};
use blockers::quantity;
use decide::Decider;
use report::{ClusterSize, Explanation, GroupReport, Limits, PodSummary, Subject};

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Text for a person.
    Text,
    /// The explanation as one JSON document.
    Json,
}

/// When to colour text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless NO_COLOR is set.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// Flags of `explain`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExplainArgs {
    /// The pod: NAME or pod/NAME.
    pub pod: String,

    /// Namespace of the pod (default: the kubeconfig context's).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,

    /// Kubeconfig file (default: $KUBECONFIG or ~/.kube/config, or the in-cluster config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context (default: the current context).
    #[arg(long)]
    pub context: Option<String>,

    /// Ask this decision replica (`http://host:port`) instead of the engine in this process.
    #[arg(long, value_name = "URL")]
    pub decision_address: Option<String>,

    /// Speak TLS to `--decision-address`, trusting this CA (PEM).
    #[arg(long, requires = "decision_address")]
    pub decision_tls_ca: Option<PathBuf>,

    /// Client certificate (PEM) for mutual TLS; needs `--decision-tls-key` and `--decision-tls-ca`.
    #[arg(long, requires_all = ["decision_tls_key", "decision_tls_ca"])]
    pub decision_tls_cert: Option<PathBuf>,

    /// Private key (PEM) of `--decision-tls-cert`.
    #[arg(long, requires = "decision_tls_cert")]
    pub decision_tls_key: Option<PathBuf>,

    /// Name the replica's certificate is verified against (default: the host of the URL).
    #[arg(long, requires = "decision_tls_ca")]
    pub decision_tls_server_name: Option<String>,

    /// The policy in use, as the binder's `--policy` (empty: the decision service's default).
    #[arg(long, default_value = "")]
    pub baseline_policy: String,

    /// What if: also rank under this policy (of the decision service, or of `--policy-file`), beside
    /// the one in use.
    #[arg(long)]
    pub policy: Option<String>,

    /// What if: also rank under a policy of this file (placement's policy file or a
    /// KubeSchedulerConfiguration), in this process: `--policy` names it, default the file's first.
    #[arg(long, value_name = "FILE")]
    pub policy_file: Option<PathBuf>,

    /// Explain this node: its verdict, the filter that refused it and why, or its scores beside the
    /// best node's.
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,

    /// How many of the best nodes to list.
    #[arg(long, default_value_t = 5)]
    pub top: usize,

    /// How many node names to list per group of refused nodes and per hint.
    #[arg(long, default_value_t = 3)]
    pub examples: usize,

    /// Schedulers the binder places pods for (a pod naming another is explained all the same, with
    /// a note).
    #[arg(
        long = "scheduler-name",
        value_delimiter = ',',
        default_value = "placement-scheduler"
    )]
    pub scheduler_names: Vec<String>,

    /// Tie-break seed, as the binder's `--seed`.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// Give up after this many seconds.
    #[arg(long, default_value_t = 60)]
    pub timeout_seconds: u64,

    /// kube-scheduler's feature gates the in-process engine decides under, as the decision
    /// service's `--feature-gates` (your cluster's kube-scheduler's value). Unset gates keep kube
    /// 1.37's defaults but `GenericWorkload` (on).
    #[arg(long, default_value = "", value_name = "NAME=BOOL,...")]
    pub feature_gates: String,

    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    pub output: Output,

    /// Colour: auto (on a terminal, unless NO_COLOR is set), always or never.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

/// A Kubernetes client from `--kubeconfig` and `--context`, else as kubectl finds one.
async fn kube_client(kubeconfig: Option<&Path>, context: Option<&str>) -> anyhow::Result<Client> {
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    let config = match (kubeconfig, context) {
        (Some(path), _) => {
            let kc = Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .with_context(|| format!("loading {}", path.display()))?
        }
        (None, Some(c)) => kube::Config::from_kubeconfig(&options)
            .await
            .with_context(|| format!("loading context {c:?} of the kubeconfig"))?,
        (None, None) => kube::Config::infer()
            .await
            .context("configuring the Kubernetes client (KUBECONFIG, ~/.kube/config or in-cluster)")?,
    };
    Client::try_from(config).context("building the Kubernetes client")
}

/// `pod/NAME` or `pods/NAME` as kubectl accepts them, else the name itself.
fn pod_name(arg: &str) -> anyhow::Result<&str> {
    let name = match arg.split_once('/') {
        Some(("pod" | "pods" | "po", name)) => name,
        Some((kind, _)) => anyhow::bail!("{arg:?}: only pods can be explained, not {kind}"),
        None => arg,
    };
    anyhow::ensure!(!name.is_empty(), "the pod name is empty");
    Ok(name)
}

/// The decider of the policy in use: the replica at `--decision-address`, or the engine here.
fn baseline_decider(args: &ExplainArgs) -> anyhow::Result<Decider> {
    Ok(match &args.decision_address {
        Some(address) => {
            let tls = crate::run::client_tls(
                args.decision_tls_ca.as_deref(),
                args.decision_tls_cert.as_deref(),
                args.decision_tls_key.as_deref(),
                args.decision_tls_server_name.as_deref(),
            )?;
            Decider::remote(address, tls.as_ref(), Duration::from_secs(args.timeout_seconds.max(1)))?
        }
        None => Decider::in_process(ServiceConfig::default(), "in-process engine")?,
    })
}

/// The engine in this process with the policies of `path`.
fn file_decider(path: &Path) -> anyhow::Result<Decider> {
    let loaded = load_policies(path)?;
    let config = ServiceConfig {
        policies: loaded.policies,
        policy_source: PolicySource::File {
            path: path.display().to_string(),
            format: loaded.format,
        },
        ..ServiceConfig::default()
    };
    Ok(Decider::in_process(
        config,
        format!("in-process engine, policy file {}", path.display()),
    )?)
}

/// Ranks `pod` on the snapshot stored as `id` under `policy`: every infeasible node, and every
/// feasible one when a node is asked about (else the best `top`).
async fn rank(
    decider: &Decider,
    id: &str,
    pod: &proto::Pod,
    policy: &str,
    args: &ExplainArgs,
    all_feasible: bool,
) -> anyhow::Result<proto::RankResponse> {
    let req = proto::RankRequest {
        snapshot: Some(proto::SnapshotRef {
            source: Some(proto::snapshot_ref::Source::SnapshotId(id.to_string())),
        }),
        pod: Some(pod.clone()),
        policy: policy.to_string(),
        top_k: if all_feasible { 0 } else { args.top.max(1) as u32 },
        seed: args.seed,
        infeasible_limit: None,
    };
    decider
        .rank(req)
        .await
        .map_err(|s| anyhow::anyhow!("{} answered {:?}: {}", decider.describe(), s.code(), s.message()))
}

/// Stores `snapshot` with `decider`; returns the id.
async fn sync(decider: &Decider, snapshot: &proto::Snapshot) -> anyhow::Result<String> {
    decider
        .sync(snapshot.clone())
        .await
        .map_err(|s| anyhow::anyhow!("{} answered {:?}: {}", decider.describe(), s.code(), s.message()))
}

/// Reads the cluster, asks for the verdicts and builds the explanation.
pub async fn explain(args: &ExplainArgs) -> anyhow::Result<Explanation> {
    let name = pod_name(&args.pod)?;
    let client = kube_client(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    let view = cluster::read(&client, &namespace, name).await?;

    let info = &view.pod;
    let bound_to = info.node_name().map(str::to_string);
    let mut pod = info.spec.clone();
    pod.node_name.clear();
    let spec = convert::pod("pod", &pod).map_err(|e| anyhow::anyhow!("the pod cannot be placed: {e}"))?;
    let engine_snapshot = engine_snapshot(&view.snapshot)
        .map_err(|e| anyhow::anyhow!("the cluster does not convert as the binder sends it: {e}"))?;

    let asked_node = match (&args.node, &bound_to) {
        (Some(n), _) => {
            anyhow::ensure!(
                engine_snapshot.node(n).is_some(),
                "node {n:?} is not in the cluster ({} nodes)",
                engine_snapshot.nodes().len()
            );
            Some(n.clone())
        }
        // A bound pod: how its node fares now.
        (None, Some(n)) if engine_snapshot.node(n).is_some() => Some(n.clone()),
        _ => None,
    };

    let mut notes = view.notes.clone();
    if let Some(n) = &bound_to {
        notes.insert(
            0,
            format!(
                "the pod is bound to {n}; it is explained against the cluster as it is now, without itself, as if it were pending again"
            ),
        );
        if engine_snapshot.node(n).is_none() {
            notes.push(format!("its node {n} is no longer in the cluster"));
        }
    }
    if !args.scheduler_names.contains(&info.scheduler_name) {
        notes.push(format!(
            "spec.schedulerName is {:?}: placement's binder places pods naming {}; this is where placement would put it",
            info.scheduler_name,
            args.scheduler_names.join(", ")
        ));
    }
    if info.terminal {
        notes.push(format!(
            "the pod has finished (phase {}); it is explained as if it were pending",
            view.phase
        ));
    }
    if info.deleting {
        notes.push("the pod is being deleted".into());
    }
    if let Some(n) = &view.nominated_node {
        notes.push(format!(
            "status.nominatedNodeName is {n}: a preemption for this pod is under way"
        ));
    }
    if let Some(g) = &pod.gang {
        notes.push(format!(
            "the pod belongs to gang {}/{}: Rank evaluates it alone, the binder places the gang's members together",
            pod.namespace, g.name
        ));
    } else if !pod.scheduling_group.is_empty() {
        notes.push(format!(
            "the pod names PodGroup {}/{}: the binder decides the group's pending pods together in kube's PodGroup cycle \
             (the PodGroup section); Rank evaluates this pod alone",
            pod.namespace, pod.scheduling_group
        ));
    }

    let baseline = baseline_decider(args)?;
    let all_feasible = asked_node.is_some();
    let id = sync(&baseline, &view.snapshot).await?;
    let current = rank(&baseline, &id, &pod, &args.baseline_policy, args, all_feasible).await?;
    let what_if = match (&args.policy_file, &args.policy) {
        (Some(path), policy) => {
            let decider = file_decider(path)?;
            let id = sync(&decider, &view.snapshot).await?;
            let policy = policy.clone().unwrap_or_default();
            let r = rank(&decider, &id, &pod, &policy, args, all_feasible).await?;
            Some((r, decider.describe()))
        }
        (None, Some(policy)) => {
            let r = rank(&baseline, &id, &pod, policy, args, all_feasible).await?;
            Some((r, baseline.describe()))
        }
        (None, None) => None,
    };

    let pod_group = match (&pod.gang, pod.scheduling_group.is_empty()) {
        (None, false) => Some(explain_group(args, &view, &pod, &baseline, &id, &engine_snapshot, &mut notes).await?),
        _ => None,
    };

    // The names of the pods preemption would evict.
    let victims: HashSet<&str> = current
        .victim_uids
        .iter()
        .chain(what_if.iter().flat_map(|(r, _)| r.victim_uids.iter()))
        .map(String::as_str)
        .collect();
    let pod_names: HashMap<String, String> = view
        .snapshot
        .pods
        .iter()
        .filter(|p| victims.contains(p.uid.as_str()))
        .map(|p| (p.uid.clone(), format!("{}/{}", p.namespace, p.name)))
        .collect();

    let subject = Subject {
        pod: &spec,
        cluster: &engine_snapshot,
        pod_names: &pod_names,
    };
    let limits = Limits {
        top: args.top.max(1),
        examples: args.examples.max(1),
        node: asked_node,
    };
    let pod_ref = PodRef {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        uid: pod.uid.clone(),
    };
    let requests: BTreeMap<String, String> = {
        let r = &spec.requests;
        let mut m = BTreeMap::new();
        for (name, amount) in [
            ("cpu", r.milli_cpu),
            ("memory", r.memory),
            ("ephemeral-storage", r.ephemeral_storage),
        ] {
            if amount > 0 {
                m.insert(name.to_string(), quantity(name, amount));
            }
        }
        for (name, amount) in &r.scalars {
            m.insert(name.to_string(), quantity(name, *amount));
        }
        m
    };
    Ok(Explanation {
        pod: PodSummary {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
            scheduler_name: info.scheduler_name.clone(),
            phase: view.phase.clone(),
            bound_to,
            requests,
        },
        notes,
        pod_group,
        cluster: ClusterSize {
            nodes: view.snapshot.nodes.len(),
            bound_pods: view.snapshot.pods.len(),
        },
        current: report::outcome(&current, &baseline.describe(), &pod_ref, &subject, &limits),
        what_if: what_if.map(|(r, by)| report::outcome(&r, &by, &pod_ref, &subject, &limits)),
    })
}

/// The engine's snapshot of a full snapshot, as a decision replica builds it: nodes, bound pods,
/// namespaces, budgets, storage and device objects, PodGroups.
fn engine_snapshot(s: &proto::Snapshot) -> Result<Snapshot, String> {
    let (nodes, pods, namespaces, pdbs) = convert::snapshot("snapshot", s).map_err(|e| e.to_string())?;
    let storage = convert::storage("snapshot", s).map_err(|e| e.to_string())?;
    let devices = convert::devices("snapshot", s).map_err(|e| e.to_string())?;
    let groups = convert::pod_groups("snapshot", s).map_err(|e| e.to_string())?;
    Snapshot::build_with_namespaces(nodes, pods, namespaces)
        .and_then(|s| s.with_pdbs(pdbs))
        .and_then(|s| s.with_storage(storage))
        .and_then(|s| s.with_devices(devices))
        .and_then(|s| s.with_pod_groups(groups))
        .map_err(|e| e.to_string())
}

/// The policy `name` of an in-process decider (empty: its default), when it has one.
fn in_process_policy(decider: &Decider, name: &str) -> Option<Policy> {
    let Decider::InProcess { api, .. } = decider else {
        return None;
    };
    let policies = api.policies();
    if name.is_empty() {
        policies.into_iter().next()
    } else {
        policies.into_iter().find(|p| p.name == name)
    }
}

/// The PodGroup `pod` names and its cycle: the group's pending pods (this one and those the
/// binder would queue with it: its schedulers' pods without scheduling gates; the group is held
/// while any has gates), in queue order (priority, then creation), decided together under the
/// policy in use. In process, the engine's
/// own cycle with each placement's trial ([`podgroup::explain`]); on a decision replica (or with a
/// policy that calls extenders) a `Schedule` of the group's pods, which answers the verdict and
/// kube's messages but not the per-domain counts. Another pod of the group that the service would
/// refuse as invalid is left out, as the binder reports it alone, with a note.
async fn explain_group(
    args: &ExplainArgs,
    view: &cluster::ClusterView,
    pod: &proto::Pod,
    decider: &Decider,
    id: &str,
    snapshot: &Snapshot,
    notes: &mut Vec<String>,
) -> anyhow::Result<GroupReport> {
    let (namespace, name) = (pod.namespace.as_str(), pod.scheduling_group.as_str());
    let key = crate::projection::pod_group_key(namespace, name);
    let group = view
        .snapshot
        .pod_groups
        .iter()
        .find(|g| g.namespace == namespace && g.name == name);
    let bound = view
        .snapshot
        .pods
        .iter()
        .filter(|p| p.gang.is_none() && p.namespace == namespace && p.scheduling_group == name)
        .count();
    let mut members: Vec<(i32, i64, String, proto::Pod)> = view
        .group_pending
        .iter()
        .filter(|m| m.scheduling_gates.is_empty() && args.scheduler_names.contains(&m.scheduler_name))
        .filter(|m| match convert::pod("pod", &m.spec) {
            Ok(_) => true,
            Err(e) => {
                notes.push(format!(
                    "pod {} of the PodGroup is left out of its cycle: the decision service refuses it ({e})",
                    m.key()
                ));
                false
            }
        })
        .map(|m| (m.spec.priority, m.created_ms, m.spec.name.clone(), m.spec.clone()))
        .collect();
    members.push((pod.priority, view.pod.created_ms, pod.name.clone(), pod.clone()));
    members.sort_by(|a, b| (b.0, a.1, &a.2).cmp(&(a.0, b.1, &b.2)));
    let members: Vec<proto::Pod> = members.into_iter().map(|m| m.3).collect();
    // In a hierarchy the members are all its PodGroups' pending pods (decided together); the
    // group's own are counted here.
    let own_pending = members.iter().filter(|m| m.scheduling_group == name).count();
    let mut report = GroupReport {
        namespace: namespace.to_string(),
        name: name.to_string(),
        found: group.is_some(),
        min_count: None,
        topology_key: None,
        pending: own_pending,
        bound,
        held: None,
        decided_by: String::new(),
        schedulable: false,
        domain: None,
        reason: String::new(),
        message: String::new(),
        pod_node: None,
        pod_message: String::new(),
        domains: Vec::new(),
        domains_note: None,
        levels: Vec::new(),
    };
    let Some(group) = group else {
        let why = if view.pod_groups_read {
            String::new()
        } else {
            " (PodGroups were not read: see the notes)".to_string()
        };
        report.held = Some(format!(
            "PodGroup {key} does not exist{why}: the binder holds the pod, writing nothing, until it does \
             (GangScheduling's PreEnqueue)"
        ));
        return Ok(report);
    };
    let min_count = group.gang.as_ref().map_or(1, |g| g.min_count.max(1) as u32);
    report.min_count = Some(min_count);
    report.topology_key = group.topology_keys.first().cloned();
    if own_pending + bound < min_count as usize {
        report.held = Some(format!(
            "{} of the group's minCount {min_count} pods exist ({} pending, {bound} bound): the binder holds them, \
             writing nothing, until minCount do (GangScheduling's PreEnqueue); the cycle below is for the pods there are",
            own_pending + bound,
            own_pending
        ));
    }
    // kube-scheduler's queue keeps the group's pending pods as one entity, gated while any of
    // them is (runPreEnqueuePlugins): the binder holds them all until the last gate goes.
    let mut gated: Vec<&str> = view
        .group_pending
        .iter()
        .filter(|m| !m.scheduling_gates.is_empty() && args.scheduler_names.contains(&m.scheduler_name))
        .map(|m| m.spec.name.as_str())
        .collect();
    if view.pod.is_gated() {
        gated.insert(0, view.pod.spec.name.as_str());
    }
    if !gated.is_empty() {
        const SHOWN: usize = 5;
        let more = gated.len().saturating_sub(SHOWN);
        let mut names = gated.iter().take(SHOWN).copied().collect::<Vec<_>>().join(", ");
        if more > 0 {
            names.push_str(&format!(" and {more} more"));
        }
        report.held = Some(format!(
            "{} of the group still {} scheduling gates ({names}): the binder holds the whole group, writing \
             nothing, until the last gate goes (kube-scheduler's queue gates the group as one); the cycle below \
             is for the pods without gates",
            if gated.len() == 1 {
                "1 pod".to_string()
            } else {
                format!("{} pods", gated.len())
            },
            if gated.len() == 1 { "has" } else { "have" },
        ));
    }
    let own = members.iter().position(|m| m.uid == pod.uid).unwrap_or(0);
    let policy = in_process_policy(decider, &args.baseline_policy);
    match policy.filter(|p| p.extenders.is_empty()) {
        Some(policy) => {
            let specs = convert::list("pods", &members, convert::pod)
                .map_err(|e| anyhow::anyhow!("the PodGroup's pods cannot be placed: {e}"))?;
            let profile = Profile::new(policy);
            let e = podgroup::explain(&profile, snapshot, None, &key, &specs, args.seed, Deadline::none())
                .map_err(|e| anyhow::anyhow!("the PodGroup cycle failed: {e}"))?;
            report.decided_by = decider.describe();
            if let Some(o) = &e.outcome {
                report.schedulable = o.reason == GroupReason::Scheduled;
                report.domain = o.domain.clone().filter(|_| report.schedulable);
                report.reason = o.reason.as_str().to_string();
                report.message = o.message.clone();
            }
            match e.decisions.get(own) {
                Some(Decision::Node { node, .. }) => {
                    report.pod_message = scheduled_message(&pod_ref_of(pod), node);
                    report.pod_node = Some(node.clone());
                }
                Some(Decision::Unschedulable(diag)) => report.pod_message = diag.message(),
                None => {}
            }
            report.domains = report::domain_fits(&e.placements, report.domain.as_deref(), report.schedulable);
            report.levels = report::level_reports(&e.levels);
        }
        None => {
            let req = proto::ScheduleRequest {
                snapshot: Some(proto::SnapshotRef {
                    source: Some(proto::snapshot_ref::Source::SnapshotId(id.to_string())),
                }),
                pods: members
                    .iter()
                    .map(|m| proto::Pod {
                        node_name: String::new(),
                        ..m.clone()
                    })
                    .collect(),
                policy: args.baseline_policy.clone(),
                seed: args.seed,
                assume: false,
            };
            let r = decider
                .schedule(req)
                .await
                .map_err(|s| anyhow::anyhow!("{} answered {:?}: {}", decider.describe(), s.code(), s.message()))?;
            report.decided_by = decider.describe();
            if let Some(o) = r.pod_groups.iter().find(|g| g.namespace == namespace && g.name == name) {
                report.schedulable = o.reason == "Scheduled";
                report.domain = Some(o.domain.clone()).filter(|d| report.schedulable && !d.is_empty());
                report.reason = o.reason.clone();
                report.message = o.message.clone();
            }
            use proto::placement::Outcome as Placed;
            match r
                .placements
                .iter()
                .find(|p| p.pod_uid == pod.uid)
                .and_then(|p| p.outcome.as_ref())
            {
                Some(Placed::NodeName(node)) => {
                    report.pod_message = scheduled_message(&pod_ref_of(pod), node);
                    report.pod_node = Some(node.clone());
                }
                Some(Placed::Unschedulable(u)) => report.pod_message = u.message.clone(),
                None => {}
            }
            report.domains_note = Some(match decider {
                Decider::Remote { .. } => "how many of the group's pods fit each domain is told by the in-process \
                                          engine only (run without --decision-address); the verdict and messages \
                                          above are the replica's"
                    .to_string(),
                Decider::InProcess { .. } => "how many of the group's pods fit each domain is not told for a policy \
                                              that calls extenders; the verdict and messages above are the policy's"
                    .to_string(),
            });
        }
    }
    Ok(report)
}

fn pod_ref_of(pod: &proto::Pod) -> PodRef {
    PodRef {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        uid: pod.uid.clone(),
    }
}

/// Whether to colour output written to stdout.
fn use_color(choice: ColorChoice) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && std::env::var("TERM").map_or(true, |t| t != "dumb")
        }
    }
}

/// The explanation in the format `args` asks for.
pub fn format(e: &Explanation, args: &ExplainArgs) -> anyhow::Result<String> {
    Ok(match args.output {
        Output::Json => {
            let mut s = serde_json::to_string_pretty(e)?;
            s.push('\n');
            s
        }
        Output::Text => render::text(
            e,
            render::Style {
                color: use_color(args.color),
            },
        ),
    })
}

/// Runs `explain` and prints the result on stdout.
pub async fn main(args: ExplainArgs) -> anyhow::Result<()> {
    let gates = placement_scheduler::engine::gates::FeatureGates::PLACEMENT_DEFAULT
        .with(&args.feature_gates)
        .map_err(|e| anyhow::anyhow!("--feature-gates: {e}"))?;
    placement_scheduler::engine::gates::set_process_default(gates);
    let timeout = Duration::from_secs(args.timeout_seconds.max(1));
    let e = tokio::time::timeout(timeout, explain(&args))
        .await
        .map_err(|_| anyhow::anyhow!("gave up after {}s (--timeout-seconds)", timeout.as_secs()))??;
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(format(&e, &args)?.as_bytes())?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: ExplainArgs,
    }

    #[test]
    fn flags_parse_as_kubectl_passes_them() {
        let a = Cli::try_parse_from(["explain", "web-1", "-n", "shop", "-o", "json", "--node", "n1"])
            .unwrap()
            .args;
        assert_eq!((a.pod.as_str(), a.namespace.as_deref()), ("web-1", Some("shop")));
        assert_eq!(a.output, Output::Json);
        assert_eq!(a.node.as_deref(), Some("n1"));
        assert_eq!((a.top, a.examples, a.seed), (5, 3, 0));
        assert_eq!(a.scheduler_names, ["placement-scheduler"]);
        assert!(Cli::try_parse_from(["explain"]).is_err(), "the pod is required");
        assert!(
            Cli::try_parse_from(["explain", "p", "--decision-tls-ca", "ca.pem"]).is_err(),
            "TLS needs an address"
        );
    }

    #[test]
    fn pod_names_take_kubectl_forms() {
        assert_eq!(pod_name("web").unwrap(), "web");
        assert_eq!(pod_name("pod/web").unwrap(), "web");
        assert_eq!(pod_name("pods/web").unwrap(), "web");
        assert!(pod_name("deploy/web").unwrap_err().to_string().contains("only pods"));
        assert!(pod_name("pod/").is_err());
    }
}
