//! The run: feed the cluster, start the binder, submit the pending pods, collect the summary.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use placement_scheduler::grpc::Metrics as ServiceMetrics;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use crate::binder::{Binder, ClusterEvent};
use crate::metrics::BinderMetrics;
use crate::projection::PodInfo;
use crate::replicas::{EndpointSource, ReplicaPool};

use super::cluster::{PodRecord, SimCluster};
use super::config::*;
use super::latency::LatencySummary;
use super::local_replicas::{DecisionTimings, LocalReplica};
use super::summary::{Outcome, Summary};

/// Pods submitted between two yields to the runtime.
pub(super) const SUBMIT_CHUNK: usize = 500;

/// Submits pending pods to the cluster and the binder, all at once or at `rate` per second.
pub(super) async fn submit(
    binder: Binder<SimCluster>,
    pods: Vec<PodInfo>,
    rate: Option<f64>,
    submitted: Arc<AtomicUsize>,
) {
    let total = pods.len();
    let started = Instant::now();
    let mut pods = pods.into_iter();
    let mut done = 0usize;
    while done < total {
        let due = match rate {
            Some(r) if r > 0.0 => ((started.elapsed().as_secs_f64() * r) as usize).clamp(done.max(1).min(total), total),
            _ => total,
        };
        for info in pods.by_ref().take(due - done) {
            binder.api().add_pod(info.clone(), true);
            binder.handle(ClusterEvent::PodApplied(info));
            done += 1;
            submitted.store(done, Ordering::Relaxed);
            if done.is_multiple_of(SUBMIT_CHUNK) {
                // Let the binder run meanwhile, as a watch delivers events while pods are created:
                // without a yield the binder's loop, woken from this task (so queued in this
                // worker's LIFO slot, which no other worker steals), starts only after the last pod.
                tokio::task::yield_now().await;
            }
        }
        if done < total {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Runs a simulation to the end (every pending pod bound or unschedulable) or the timeout.
pub async fn simulate(config: SimConfig) -> Result<Summary, SimError> {
    Ok(run(config, false).await?.0)
}

/// [`simulate`], also returning every pod of the in-memory cluster as it ended (its node and the
/// annotations its Binding set).
pub async fn simulate_with_pods(config: SimConfig) -> Result<(Summary, Vec<PodRecord>), SimError> {
    run(config, true).await
}

pub(super) async fn run(config: SimConfig, keep_pods: bool) -> Result<(Summary, Vec<PodRecord>), SimError> {
    let SimConfig {
        cluster,
        decision,
        binder: binder_config,
        replica,
        server,
        arrival_rate,
        timeout,
        watch_latency,
        faults,
        progress,
        progress_tx,
        record_outcomes,
        experiments,
    } = config;
    let ours = binder_config
        .scheduler_names
        .first()
        .cloned()
        .ok_or(SimError::NoSchedulerName)?;
    let mut workload = match cluster {
        ClusterSource::Synthetic(s) => Workload::synthetic(&s, &ours),
        ClusterSource::File { path, all_pending } => {
            let text = read(&path)?;
            Workload::from_kubectl_json(&text, &binder_config.scheduler_names, all_pending)?
        }
        ClusterSource::Workload(w) => w,
    };
    workload.validate()?;
    // Pods the binder would hold for ever (their PodGroup missing or short of minCount) would
    // keep the run from ending: they are left out, and the summary says so.
    let held_groups = workload.take_held_groups();

    let timings = Arc::new(DecisionTimings::default());
    // The in-process replicas' metrics, each pod's time in extender calls kept.
    let service_metrics = Arc::new(ServiceMetrics::new().keeping_extender_samples());
    let mut local = Vec::new();
    let (endpoints, in_process) = match decision {
        DecisionSource::InProcess { replicas } => {
            for _ in 0..replicas.max(1) {
                local.push(LocalReplica::start(&server, Arc::clone(&timings), Arc::clone(&service_metrics)).await?);
            }
            (local.iter().map(|r| r.url.clone()).collect(), true)
        }
        DecisionSource::Endpoints(list) => (list, false),
    };
    let pool = Arc::new(ReplicaPool::new(EndpointSource::Static(endpoints.clone()), replica)?);

    let (api, sim_watch) = SimCluster::new(faults.clone(), watch_latency);
    for n in &workload.nodes {
        api.add_node(n.clone());
    }
    for o in &workload.storage {
        api.add_storage(o.clone());
    }
    let metrics = Arc::new(BinderMetrics::new());
    let (_leader, leader_rx) = watch::channel(true);
    let batch_size = binder_config.batch_size;
    let binder_config_in_flight = binder_config.batches_in_flight;
    let binder = Binder::new(binder_config, api, Arc::clone(&pool), Arc::clone(&metrics), leader_rx);
    if let Some(set) = experiments {
        binder.replace_experiments(set)?;
    }
    let feeder = tokio::spawn(sim_watch.feed(binder.clone()));

    let node_count = workload.nodes.len();
    let prebound = workload.bound.len();
    let ignored = workload.ignored;
    for n in workload.nodes {
        binder.handle(ClusterEvent::NodeApplied(n));
    }
    for pdb in workload.pdbs {
        binder.handle(ClusterEvent::PdbApplied(pdb));
    }
    for o in workload.storage {
        binder.handle(ClusterEvent::ObjectApplied(o));
    }
    // Each pod moves into the in-memory cluster once the binder has its copy: the whole list is
    // never held twice.
    for p in workload.bound {
        binder.handle(ClusterEvent::PodApplied(p.clone()));
        binder.api().add_pod(p, false);
    }
    // The in-memory cluster serves scheduling.k8s.io/v1beta1 PodGroups (sent above with the
    // other keyed objects), as a 1.37 API server with the Workload API does.
    binder.handle(ClusterEvent::PodGroupsServed(true));
    binder.set_synced();

    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let runner = tokio::spawn({
        let b = binder.clone();
        async move {
            b.run(async {
                let _ = stop_rx.await;
            })
            .await;
        }
    });
    let total = workload.pending.len();
    let submitted = Arc::new(AtomicUsize::new(0));
    let cpu_before = placement_scheduler::procstat::Proc::Myself.cpu();
    let started = Instant::now();
    let arrivals = tokio::spawn(submit(
        binder.clone(),
        workload.pending,
        arrival_rate,
        Arc::clone(&submitted),
    ));

    let deadline = started + timeout;
    let mut next_print = started + Duration::from_secs(1);
    let mut first_bound: Option<Instant> = None;
    let (completed, wall) = loop {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let c = binder.queue_counts();
        let now = Instant::now();
        let p = Progress {
            elapsed_seconds: (now - started).as_secs_f64(),
            submitted: submitted.load(Ordering::Relaxed),
            bound: binder.api().bound_count(),
            unschedulable: c.unschedulable,
            pending: c.active + c.backoff + c.in_flight + c.held,
        };
        if p.bound > 0 && first_bound.is_none() {
            first_bound = Some(now);
        }
        if let Some(tx) = &progress_tx {
            tx.send_replace(p);
        }
        if progress && now >= next_print {
            next_print += Duration::from_secs(1);
            eprintln!(
                "[{:6.1}s] bound {:>7}  unschedulable {:>6}  pending {:>7}  {:>8.0} pods/s",
                p.elapsed_seconds,
                p.bound,
                p.unschedulable,
                p.pending + (total - p.submitted),
                p.bound as f64 / p.elapsed_seconds.max(1e-9)
            );
        }
        // Nothing left to decide or bind, every binding seen by the binder, and every pod the
        // binder holds unschedulable reported so (the report is written by a task of its own).
        if p.submitted == total
            && p.pending == 0
            && binder.assumed() == 0
            && binder.api().unschedulable_recorded() >= p.unschedulable
            && binder.api().pod_groups_awaiting_condition() == 0
        {
            break (true, now - started);
        }
        if now >= deadline {
            break (false, now - started);
        }
    };
    let cpu_seconds = placement_scheduler::procstat::Proc::Myself
        .cpu()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before).as_secs_f64());
    arrivals.abort();
    let _ = stop_tx.send(());
    let _ = runner.await;
    feeder.abort();
    let replica_errors: u64 = pool.all().iter().map(|r| r.errors.load(Ordering::Relaxed)).sum();
    for r in local {
        r.stop().await;
    }

    let sim = binder.api();
    // The histograms' sums and counts are only readable through the text exposition.
    let exposition = metrics.encode();
    let mut s = Summary {
        completed,
        nodes: node_count,
        prebound_pods: prebound,
        pending_pods: total,
        ignored_pods: ignored,
        decision_replicas: endpoints.len(),
        in_process_replicas: in_process,
        wall_seconds: wall.as_secs_f64(),
        decision: timings.decisions.summary(),
        schedule_call: timings.schedule.summary(),
        sync_call: timings.syncs.summary(),
        extender_per_pod: LatencySummary::of(&service_metrics.extenders.samples()),
        decision_client_mean_ms: mean_ms(
            exposed(&exposition, "binder_decision_duration_seconds_sum"),
            exposed(&exposition, "binder_decision_duration_seconds_count"),
        ),
        sync_client_mean_ms: mean_ms(
            exposed(&exposition, "binder_snapshot_sync_duration_seconds_sum"),
            exposed(&exposition, "binder_snapshot_sync_duration_seconds_count"),
        ),
        bind: sim.bind_latency.summary(),
        arrival_to_bound: sim.e2e_latency.summary(),
        batches: exposed(&exposition, "binder_batch_size_count") as u64,
        max_batch_size: batch_size,
        mean_batch_size: mean_ms(
            exposed(&exposition, "binder_batch_size_sum"),
            exposed(&exposition, "binder_batch_size_count"),
        )
        .map_or(0.0, |ms| ms / 1e3),
        syncs_full: metrics.syncs_total("full"),
        syncs_delta: metrics.syncs_total("delta"),
        assumed_adopted: metrics.assumed_snapshots_total("adopted"),
        assumed_stale: metrics.assumed_snapshots_total("stale"),
        batches_in_flight: binder_config_in_flight,
        most_batches_in_flight: binder.most_batches_in_flight(),
        first_bound_seconds: first_bound.map(|t| (t - started).as_secs_f64()),
        batches_partitioned: metrics.batches_total("partition"),
        batches_whole_cluster: metrics.batches_total("alone"),
        partition_returns: metrics.partition_returns_total(),
        cpu_seconds,
        replica_errors,
        binds_ok: metrics.binds_total("ok"),
        binds_failed: metrics.binds_total("error"),
        binds_conflict: metrics.binds_total("conflict") + metrics.binds_total("not_found"),
        max_events_in_flight: sim.max_events_in_flight.load(Ordering::Relaxed),
        ..Summary::default()
    };
    if binder.experiments().current().active() {
        s.experiments = Some(binder.experiment_report());
    }
    let store = sim.store.lock();
    s.fill_from(&store, binder.queue_counts().unschedulable);
    s.held_groups(held_groups);
    if record_outcomes {
        s.outcomes = store
            .pods
            .values()
            .filter(|p| p.pending)
            .map(|p| {
                let outcome = match (p.info.node_name(), &p.unschedulable_message) {
                    (Some(node), _) => Outcome::Bound(node.to_string()),
                    (None, Some(m)) => Outcome::Unschedulable(m.clone()),
                    (None, None) => Outcome::Pending,
                };
                (p.info.key(), outcome)
            })
            .collect();
    }
    let pods = if keep_pods { store.all_records() } else { Vec::new() };
    Ok((s, pods))
}

pub(super) fn read(path: &Path) -> Result<String, SimError> {
    std::fs::read_to_string(path).map_err(|source| SimError::Read {
        path: path.to_path_buf(),
        source,
    })
}

pub(super) fn mean_ms(sum_seconds: f64, count: f64) -> Option<f64> {
    (count > 0.0).then(|| sum_seconds * 1e3 / count)
}

/// The sum over every label set of a sample in a Prometheus text exposition (0 when absent).
pub(super) fn exposed(text: &str, name: &str) -> f64 {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let value = match rest.strip_prefix('{') {
                Some(labelled) => labelled.split_once("} ")?.1,
                None => rest.strip_prefix(' ')?,
            };
            value.trim().parse::<f64>().ok()
        })
        .sum()
}
