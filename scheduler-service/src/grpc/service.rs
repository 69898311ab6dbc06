//! `placement.v1.PlacementService`: validates requests, resolves snapshots, runs the engine off the
//! async runtime, and maps the answers back to the API.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use tonic::{Code, Request, Response, Status};
use tracing::Instrument;

use super::budget;
use super::cache::SnapshotCache;
use super::convert::{self, shown};
use super::metrics::{DecisionLabels, LatencyLabels, Metrics, RequestLabels};
use super::status::{
    content_id, deadline_status, drop_in_background, ended, request_deadline, snapshot_error, snapshot_not_found,
};
pub(crate) use super::status::{invalid, invalid_field};
use crate::engine::cancel;
use crate::engine::policy_config::FileFormat;
use crate::engine::volumes::VolumeChoice;
use crate::engine::{Decision, Evaluator, Policy, Profile, Snapshot};
use crate::extender::{ExtenderMetrics, ExtenderSet};
use crate::proto;

/// The `ErrorInfo.reason` of a `NOT_FOUND` for an unknown snapshot id.
pub const SNAPSHOT_NOT_FOUND: &str = "SNAPSHOT_NOT_FOUND";
/// The `ErrorInfo.domain` of this service's errors.
pub const ERROR_DOMAIN: &str = "placement.v1";

/// Limits and policies of a service instance.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// Most pods a Schedule request may carry.
    pub max_batch_size: usize,
    /// Memory budget of the snapshot cache in bytes.
    pub snapshot_cache_bytes: usize,
    /// Policies; the first is the default.
    pub policies: Vec<Policy>,
    /// Where the policies come from, as ListPolicies reports it.
    pub policy_source: PolicySource,
}

/// Where a service's policies come from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PolicySource {
    /// Compiled into the service ([`Policy::built_in`]).
    #[default]
    BuiltIn,
    /// A policy file.
    File {
        /// The file's path as given.
        path: String,
        /// Its format.
        format: FileFormat,
    },
}

impl PolicySource {
    /// ListPolicies' `source` of the `index`th policy: `built-in`, or the file, its format and the
    /// entry, e.g. `/etc/placement/policies.yaml: KubeSchedulerConfiguration profiles[1]`.
    pub fn describe(&self, index: usize) -> String {
        match self {
            Self::BuiltIn => "built-in".to_string(),
            Self::File { path, format } => {
                let list = match format {
                    FileFormat::Placement => "policies",
                    FileFormat::KubeSchedulerConfiguration => "profiles",
                };
                format!("{path}: {} {list}[{index}]", format.kind())
            }
        }
    }
}

/// [`ServiceConfig::snapshot_cache_bytes`]'s default (see `DEFAULT_REQUEST_MEMORY_BYTES` in
/// `grpc::server` for how the two fit a replica's memory limit).
pub const DEFAULT_SNAPSHOT_CACHE_BYTES: usize = 512 << 20;

impl Default for ServiceConfig {
    fn default() -> Self {
        Self {
            max_batch_size: 10_000,
            snapshot_cache_bytes: DEFAULT_SNAPSHOT_CACHE_BYTES,
            policies: Policy::built_in(),
            policy_source: PolicySource::BuiltIn,
        }
    }
}

/// Why a service cannot be built from a configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// No policy was given.
    #[error("at least one policy is required")]
    NoPolicy,
    /// A policy is invalid.
    #[error(transparent)]
    Policy(#[from] crate::engine::policy::PolicyError),
    /// Two policies share a name.
    #[error("policy name {0:?} is used twice")]
    DuplicatePolicy(String),
    /// An extender cannot be set up (its TLS material).
    #[error(transparent)]
    Extender(#[from] crate::extender::ExtenderSetupError),
}

/// A validated set of policies, swapped whole: a request holds the set (or its profile) it started
/// with, so a reload never changes a call in flight.
struct PolicySet {
    /// The prepared policies; the first is the default, never empty.
    profiles: Vec<Arc<Profile>>,
    /// Each policy's extenders (same index as `profiles`).
    extenders: Vec<Arc<ExtenderSet>>,
    /// Where they come from.
    source: PolicySource,
}

impl PolicySet {
    /// Validates the policies (each one, at least one, unique names) and prepares them.
    fn new(policies: Vec<Policy>, source: PolicySource, metrics: &ExtenderMetrics) -> Result<Self, ConfigError> {
        if policies.is_empty() {
            return Err(ConfigError::NoPolicy);
        }
        let mut names = HashSet::new();
        for p in &policies {
            p.validate()?;
            if !names.insert(p.name.clone()) {
                return Err(ConfigError::DuplicatePolicy(p.name.clone()));
            }
        }
        let extenders = policies
            .iter()
            .map(|p| ExtenderSet::new(&p.extenders, metrics).map(Arc::new))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            profiles: policies.into_iter().map(|p| Arc::new(Profile::new(p))).collect(),
            extenders,
            source,
        })
    }
}

struct Inner {
    cache: SnapshotCache,
    /// Assumed snapshots still being built (see [`PlacementApi::assume_in_background`]), by id:
    /// each receiver turns true once its snapshot is stored, or failed.
    assuming: parking_lot::Mutex<HashMap<String, tokio::sync::watch::Receiver<bool>>>,
    policies: parking_lot::RwLock<Arc<PolicySet>>,
    metrics: Arc<Metrics>,
    max_batch_size: usize,
}

/// The PlacementService implementation; cheap to clone.
#[derive(Clone)]
pub struct PlacementApi {
    inner: Arc<Inner>,
}

/// Runs CPU-bound work on the blocking pool so the async runtime keeps serving. The work belongs
/// to the current call ([`crate::engine::cancel`]): once the call ends (cancelled, past its
/// deadline, disconnected), the engine's loops stop early, and what they return is discarded.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, Status> + Send + 'static) -> Result<T, Status> {
    let span = tracing::Span::current();
    let flag = budget::current().map(|call| call.reservation.cancel_flag());
    tokio::task::spawn_blocking(move || {
        let Some(flag) = flag else {
            return span.in_scope(f);
        };
        if flag.load(std::sync::atomic::Ordering::Acquire) {
            return Err(ended());
        }
        let _scope = cancel::Scope::enter(std::sync::Arc::clone(&flag));
        let out = span.in_scope(f);
        if flag.load(std::sync::atomic::Ordering::Acquire) {
            return Err(ended());
        }
        out
    })
    .await
    .map_err(|e| Status::internal(format!("evaluation task failed: {e}")))?
}

impl PlacementApi {
    /// A service with the given configuration, reporting into `metrics`.
    pub fn new(config: ServiceConfig, metrics: Arc<Metrics>) -> Result<Self, ConfigError> {
        let policies = PolicySet::new(config.policies, config.policy_source, &metrics.extenders)?;
        Ok(Self {
            inner: Arc::new(Inner {
                cache: SnapshotCache::new(config.snapshot_cache_bytes),
                assuming: parking_lot::Mutex::new(HashMap::new()),
                policies: parking_lot::RwLock::new(Arc::new(policies)),
                metrics,
                max_batch_size: config.max_batch_size,
            }),
        })
    }

    /// Replaces every policy at once, after validating the whole set; on error the current set
    /// stays. Calls in flight finish with the set they started with.
    pub fn set_policies(&self, policies: Vec<Policy>, source: PolicySource) -> Result<(), ConfigError> {
        let set = PolicySet::new(policies, source, &self.inner.metrics.extenders)?;
        *self.inner.policies.write() = Arc::new(set);
        Ok(())
    }

    /// The current policies, the default first.
    pub fn policies(&self) -> Vec<Policy> {
        self.current().profiles.iter().map(|p| p.policy().clone()).collect()
    }

    fn current(&self) -> Arc<PolicySet> {
        Arc::clone(&self.inner.policies.read())
    }

    fn profile(&self, name: &str) -> Result<Arc<Profile>, Status> {
        self.profile_and_extenders(name).map(|(p, _)| p)
    }

    /// The policy `name` (empty: the default) and its extenders, from the same set.
    fn profile_and_extenders(&self, name: &str) -> Result<(Arc<Profile>, Arc<ExtenderSet>), Status> {
        let set = self.current();
        if name.is_empty() {
            return Ok((Arc::clone(&set.profiles[0]), Arc::clone(&set.extenders[0])));
        }
        set.profiles
            .iter()
            .position(|p| p.policy().name == name)
            .map(|i| (Arc::clone(&set.profiles[i]), Arc::clone(&set.extenders[i])))
            .ok_or_else(|| {
                let known: Vec<&str> = set.profiles.iter().map(|p| p.policy().name.as_str()).collect();
                invalid_field(
                    "policy",
                    format!("unknown policy {}; known: {}", shown(name), known.join(", ")),
                )
            })
    }

    /// The cached snapshot `id`; one an earlier Schedule is still assuming is waited for.
    async fn cached(&self, field: &str, id: &str) -> Result<Arc<Snapshot>, Status> {
        if id.is_empty() {
            return Err(invalid_field(field, "must not be empty"));
        }
        let mut found = self.inner.cache.get(id);
        if found.is_none() {
            let pending = self.inner.assuming.lock().get(id).cloned();
            if let Some(mut done) = pending {
                // Err: the build ended without saying so (it panicked); the cache tells.
                let _ = done.wait_for(|d| *d).await;
            }
            // The builder stores before it deregisters: this sees what it stored.
            found = self.inner.cache.get(id);
        }
        match found {
            Some(s) => {
                self.inner.metrics.cache_hits.inc();
                Ok(s)
            }
            None => {
                self.inner.metrics.cache_misses.inc();
                Err(snapshot_not_found(field, id))
            }
        }
    }

    /// Stores `base` with `placed` bound (each pod carries its node) as `id`, on the blocking
    /// pool while the Schedule that decided them answers: the caller's next request, usually on
    /// `id`, waits for it in [`PlacementApi::cached`] only if it comes sooner. A build that fails
    /// stores nothing (logged): a request on `id` then finds it missing and the caller re-syncs.
    fn assume_in_background(
        &self,
        id: String,
        base: Arc<Snapshot>,
        placed: Vec<crate::engine::model::PodSpec>,
        storage: crate::engine::volumes::StorageDelta,
        devices: crate::engine::devices::DeviceDelta,
    ) {
        let (done, wait) = tokio::sync::watch::channel(false);
        {
            let mut assuming = self.inner.assuming.lock();
            // The same decisions on the same snapshot: stored or being stored already.
            if assuming.contains_key(&id) || self.inner.cache.get(&id).is_some() {
                return;
            }
            assuming.insert(id.clone(), wait);
        }
        /// Deregisters the build and wakes its waiters however it ends.
        struct Registered {
            api: PlacementApi,
            id: String,
            done: tokio::sync::watch::Sender<bool>,
        }
        impl Drop for Registered {
            fn drop(&mut self) {
                self.api.inner.assuming.lock().remove(&self.id);
                let _ = self.done.send(true);
            }
        }
        let registered = Registered {
            api: self.clone(),
            id,
            done,
        };
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || {
            let _in_span = span.enter();
            let delta = crate::engine::Delta {
                upsert_pods: placed,
                storage,
                devices,
                ..Default::default()
            };
            match base.apply(delta) {
                Ok(next) => {
                    // The plain pass's columns (and the hot fields under them) are built here, off
                    // the next Schedule's path, instead of by its first pod.
                    next.columns();
                    registered.api.store(registered.id.clone(), Arc::new(next))
                }
                Err(e) => {
                    tracing::error!(snapshot_id = %registered.id, error = %e, "assuming a batch's placements failed")
                }
            }
            drop(registered);
        });
    }

    fn store(&self, id: String, snapshot: Arc<Snapshot>) {
        let out = self.inner.cache.insert(id, snapshot);
        self.cache_changed(out);
    }

    /// Measures the cached snapshots again after a call that may have built parts of one, and
    /// evicts over the budget (see [`SnapshotCache::refresh`]).
    fn refresh_cache(&self) {
        let out = self.inner.cache.refresh();
        self.cache_changed(out);
    }

    fn cache_changed(&self, out: super::cache::InsertOutcome) {
        let m = &self.inner.metrics;
        m.cache_evictions.inc_by(out.evicted as u64);
        m.cache_bytes.set(self.inner.cache.bytes() as i64);
        m.cache_entries.set(self.inner.cache.len() as i64);
    }

    /// Resolves a SnapshotRef: a cached id, or an inline snapshot built for this request.
    async fn resolve(&self, r: Option<proto::SnapshotRef>) -> Result<Arc<Snapshot>, Status> {
        use proto::snapshot_ref::Source;
        match r.and_then(|r| r.source) {
            None => Err(invalid_field(
                "snapshot",
                "must be set: a snapshot_id or an inline snapshot",
            )),
            Some(Source::SnapshotId(id)) => self.cached("snapshot.snapshot_id", &id).await,
            Some(Source::Inline(s)) => {
                blocking(move || {
                    let (nodes, pods, namespaces, pdbs) = convert::snapshot("snapshot.inline", &s).map_err(invalid)?;
                    let storage = convert::storage("snapshot.inline", &s).map_err(invalid)?;
                    let devices = convert::devices("snapshot.inline", &s).map_err(invalid)?;
                    let groups = convert::pod_groups("snapshot.inline", &s).map_err(invalid)?;
                    let composites = convert::composite_pod_groups("snapshot.inline", &s).map_err(invalid)?;
                    Snapshot::build_with_namespaces(nodes, pods, namespaces)
                        .and_then(|s| s.with_pdbs(pdbs))
                        .and_then(|s| s.with_storage(storage))
                        .and_then(|s| s.with_devices(devices))
                        .and_then(|s| s.with_pod_groups(groups))
                        .and_then(|s| s.with_composite_pod_groups(composites))
                        .map(Arc::new)
                        .map_err(|e| {
                            snapshot_error(
                                "snapshot.inline.nodes",
                                "snapshot.inline.pods",
                                "snapshot.inline.pod_disruption_budgets",
                                e,
                            )
                        })
                })
                .await
            }
        }
    }

    fn observe<T>(&self, rpc: &'static str, policy: &str, start: Instant, result: &Result<T, Status>) {
        let m = &self.inner.metrics;
        let code = match result {
            Ok(_) => Code::Ok,
            Err(s) => s.code(),
        };
        m.requests
            .get_or_create(&RequestLabels {
                rpc,
                policy: policy.to_string(),
                code: format!("{code:?}"),
            })
            .inc();
        m.latency
            .get_or_create(&LatencyLabels {
                rpc,
                policy: policy.to_string(),
            })
            .observe(start.elapsed().as_secs_f64());
        if let Err(s) = result {
            tracing::debug!(code = ?s.code(), message = s.message(), "request failed");
        }
    }

    async fn sync(&self, req: proto::SyncSnapshotRequest) -> Result<proto::SyncSnapshotResponse, Status> {
        use proto::sync_snapshot_request::Kind;
        let snapshot = match req.kind {
            None => return Err(invalid_field("kind", "must be set: a full snapshot or a delta")),
            Some(Kind::Full(full)) => {
                blocking(move || {
                    let id = content_id(&[b"full", &prost::Message::encode_to_vec(&full)]);
                    let (nodes, pods, namespaces, pdbs) = convert::snapshot("full", &full).map_err(invalid)?;
                    let storage = convert::storage("full", &full).map_err(invalid)?;
                    let devices = convert::devices("full", &full).map_err(invalid)?;
                    let groups = convert::pod_groups("full", &full).map_err(invalid)?;
                    let composites = convert::composite_pod_groups("full", &full).map_err(invalid)?;
                    let s = Snapshot::build_with_namespaces(nodes, pods, namespaces)
                        .and_then(|s| s.with_pdbs(pdbs))
                        .and_then(|s| s.with_storage(storage))
                        .and_then(|s| s.with_devices(devices))
                        .and_then(|s| s.with_pod_groups(groups))
                        .and_then(|s| s.with_composite_pod_groups(composites))
                        .map_err(|e| snapshot_error("full.nodes", "full.pods", "full.pod_disruption_budgets", e))?;
                    Ok((id, Arc::new(s)))
                })
                .await?
            }
            Some(Kind::Delta(delta)) => {
                let base = self.cached("delta.base_snapshot_id", &delta.base_snapshot_id).await?;
                blocking(move || {
                    let delta_id = || {
                        content_id(&[
                            b"delta",
                            delta.base_snapshot_id.as_bytes(),
                            &prost::Message::encode_to_vec(&delta),
                        ])
                    };
                    let d = convert::delta("delta", &delta).map_err(invalid)?;
                    let apply = || {
                        base.apply(d).map_err(|e| {
                            snapshot_error(
                                "delta.upsert_nodes",
                                "delta.upsert_pods",
                                "delta.upsert_pod_disruption_budgets",
                                e,
                            )
                        })
                    };
                    let large = delta.upsert_pods.len() >= convert::PARALLEL_PODS;
                    let (id, s) = if large {
                        // A full sync's chunk: its id (re-encoding it, a fifth of the call) is
                        // hashed on a helper thread while it is applied (the conversion before
                        // takes both cores already).
                        let (s, id) = crate::engine::cancel::join(apply, delta_id);
                        (id, s)
                    } else {
                        (delta_id(), apply())
                    };
                    let s = s?;
                    if large {
                        // Freeing the decoded chunk (a tenth of the call) need not delay the answer.
                        drop_in_background(delta);
                    }
                    Ok((id, Arc::new(s)))
                })
                .await?
            }
        };
        let (id, snap) = snapshot;
        let resp = proto::SyncSnapshotResponse {
            snapshot_id: id.clone(),
            node_count: snap.nodes().len() as u32,
            pod_count: snap.pod_count() as u32,
        };
        tracing::Span::current().record("snapshot_id", id.as_str());
        self.store(id, snap);
        Ok(resp)
    }

    async fn rank_inner(
        &self,
        req: Request<proto::RankRequest>,
        policy_name: &mut String,
    ) -> Result<proto::RankResponse, Status> {
        let deadline = request_deadline(&req);
        let req = req.into_inner();
        let profile = self.profile(&req.policy)?;
        *policy_name = profile.policy().name.clone();
        let pod = req.pod.as_ref().ok_or_else(|| invalid_field("pod", "must be set"))?;
        let pod = convert::pod("pod", pod).map_err(invalid)?;
        let snapshot = self.resolve(req.snapshot).await?;
        if snapshot.has_pod(&pod.uid) {
            return Err(bound_uid("pod.uid", &pod.uid));
        }
        self.inner.metrics.nodes_evaluated.inc_by(snapshot.nodes().len() as u64);
        let (top_k, seed) = (req.top_k as usize, req.seed);
        let limit = req.infeasible_limit.map(|n| n as usize);
        let ranked = Arc::clone(&snapshot);
        let ranking = blocking(move || {
            Evaluator::new(&profile, &snapshot)
                .with_rejected_limit(limit)
                .rank(&pod, top_k, seed, deadline)
                .map_err(deadline_status)
        })
        .await?;
        let message = if ranking.feasible_count == 0 {
            ranking.diagnosis.message()
        } else {
            String::new()
        };
        let nomination = ranking.diagnosis.nomination.clone();
        Ok(proto::RankResponse {
            policy: policy_name.clone(),
            feasible: ranking
                .feasible
                .into_iter()
                .map(|n| proto::NodeScore {
                    node: n.node,
                    total: n.total,
                    plugin_scores: n
                        .scores
                        .into_iter()
                        .map(|(p, score, weight)| proto::PluginScore {
                            plugin: p.name().to_string(),
                            score,
                            weight,
                        })
                        .collect(),
                })
                .collect(),
            feasible_count: ranking.feasible_count as u32,
            infeasible: ranking
                .rejected
                .into_iter()
                .map(|r| proto::InfeasibleNode {
                    node: r.name(&ranked).to_string(),
                    plugin: r.plugin.name().to_string(),
                    reasons: r.reasons.iter().map(ToString::to_string).collect(),
                    device_failures: r.devices.into_iter().map(convert::device_failure_out).collect(),
                })
                .collect(),
            message,
            node_count: ranking.diagnosis.node_count as u32,
            nominated_node_name: nomination.as_ref().map(|n| n.node.clone()).unwrap_or_default(),
            victim_uids: nomination
                .map(|n| n.victims.iter().map(ToString::to_string).collect())
                .unwrap_or_default(),
        })
    }

    async fn schedule_inner(
        &self,
        req: Request<proto::ScheduleRequest>,
        policy_name: &mut String,
    ) -> Result<proto::ScheduleResponse, Status> {
        let deadline = request_deadline(&req);
        let mut req = req.into_inner();
        let (profile, extenders) = self.profile_and_extenders(&req.policy)?;
        *policy_name = profile.policy().name.clone();
        if req.pods.len() > self.inner.max_batch_size {
            return Err(invalid_field(
                "pods",
                format!(
                    "batch of {} pods exceeds the maximum of {}",
                    req.pods.len(),
                    self.inner.max_batch_size
                ),
            ));
        }
        tracing::Span::current().record("pods", req.pods.len());
        // The snapshot a batch is assumed on is stored, so it must be one that is (not inline).
        let assume_on = match (&req.snapshot, req.assume) {
            (_, false) => None,
            (
                Some(proto::SnapshotRef {
                    source: Some(proto::snapshot_ref::Source::SnapshotId(id)),
                }),
                true,
            ) => Some(id.clone()),
            (_, true) => {
                return Err(invalid_field(
                    "assume",
                    "needs snapshot.snapshot_id: an inline snapshot is not stored, so nothing can be assumed on it",
                ))
            }
        };
        let batch = std::mem::take(&mut req.pods);
        let pods = blocking(move || {
            let pods = convert::list("pods", &batch, convert::pod).map_err(invalid)?;
            check_batch(&pods)?;
            Ok(pods)
        })
        .await?;
        let snapshot = self.resolve(req.snapshot).await?;
        if let Some((i, p)) = pods.iter().enumerate().find(|(_, p)| snapshot.has_pod(&p.uid)) {
            return Err(bound_uid(&format!("pods[{i}].uid"), &p.uid));
        }
        self.inner
            .metrics
            .nodes_evaluated
            .inc_by((snapshot.nodes().len() * pods.len()) as u64);
        let seed = req.seed;
        let runtime = tokio::runtime::Handle::current();
        let (decisions, groups, pods, snapshot) = blocking(move || {
            // Extenders are called from this blocking thread, each call waiting on the runtime.
            let hook = (!extenders.is_empty()).then(|| extenders.hook(runtime, &snapshot));
            let (d, groups) = {
                let hook = hook.as_ref().map(|h| h as &dyn crate::engine::extender::ExtenderHook);
                crate::engine::schedule(&profile, &snapshot, hook, &pods, seed, deadline).map_err(deadline_status)?
            };
            drop(hook);
            Ok((d, groups, pods, snapshot))
        })
        .await?;
        let uids: Vec<Arc<str>> = pods.iter().map(|p| p.uid.clone()).collect();
        let assumed_snapshot_id = match assume_on {
            Some(base_id) => {
                let choices: Vec<&(String, VolumeChoice)> = decisions
                    .iter()
                    .flat_map(|d| match d {
                        Decision::Node { volumes, .. } => volumes.as_slice(),
                        Decision::Unschedulable(_) => &[],
                    })
                    .collect();
                let storage = snapshot.storage().assumed(choices.iter().copied());
                let allocated: Vec<(
                    String,
                    &crate::engine::devices::Allocation,
                    crate::engine::devices::Consumer,
                )> = pods
                    .iter()
                    .zip(&decisions)
                    .flat_map(|(pod, d)| match d {
                        Decision::Node { devices, .. } => devices
                            .iter()
                            .map(|c| {
                                let consumer = crate::engine::devices::Consumer {
                                    api_group: String::new(),
                                    resource: "pods".into(),
                                    name: pod.name.clone(),
                                    uid: pod.uid.to_string(),
                                };
                                (format!("{}/{}", c.namespace, c.name), &c.allocation, consumer)
                            })
                            .collect::<Vec<_>>(),
                        Decision::Unschedulable(_) => Vec::new(),
                    })
                    .collect();
                let devices = snapshot
                    .devices()
                    .assumed(allocated.iter().map(|(k, a, c)| (k.as_str(), *a, c.clone())));
                let placed = placed_pods(pods, &decisions);
                let id = assumed_id(&base_id, &placed, &choices, &allocated);
                tracing::Span::current().record("assumed_snapshot_id", id.as_str());
                self.assume_in_background(id.clone(), snapshot, placed, storage, devices);
                id
            }
            None => String::new(),
        };
        let (mut scheduled, mut unschedulable) = (0u64, 0u64);
        let placements = uids
            .into_iter()
            .zip(decisions)
            .map(|(uid, d)| {
                use proto::placement::Outcome;
                match d {
                    Decision::Node {
                        node,
                        score,
                        feasible,
                        volumes,
                        devices,
                    } => {
                        scheduled += 1;
                        proto::Placement {
                            pod_uid: uid.to_string(),
                            outcome: Some(Outcome::NodeName(node)),
                            score,
                            feasible_nodes: feasible as u32,
                            claim_bindings: volumes.into_iter().map(claim_binding).collect(),
                            claim_allocations: devices
                                .iter()
                                .map(|c| proto::ClaimAllocation {
                                    claim_namespace: c.namespace.clone(),
                                    claim_name: c.name.clone(),
                                    claim_uid: c.uid.clone(),
                                    allocation: Some(convert::allocation_result(&c.allocation)),
                                    extended_resource_claim: c.extended.as_ref().map(convert::extended_resource_claim),
                                })
                                .collect(),
                        }
                    }
                    Decision::Unschedulable(diag) => {
                        unschedulable += 1;
                        proto::Placement {
                            pod_uid: uid.to_string(),
                            outcome: Some(Outcome::Unschedulable(proto::Unschedulable {
                                message: diag.message(),
                                reasons: diag.reasons.iter().map(|(r, n)| (r.to_string(), *n)).collect(),
                                nominated_node_name: diag
                                    .nomination
                                    .as_ref()
                                    .map(|n| n.node.clone())
                                    .unwrap_or_default(),
                                victim_uids: diag
                                    .nomination
                                    .as_ref()
                                    .map(|n| n.victims.iter().map(ToString::to_string).collect())
                                    .unwrap_or_default(),
                                gang: diag.gang.as_ref().map(|g| g.gang.to_string()).unwrap_or_default(),
                                error: diag.error.is_some(),
                                deallocate_claim: diag.deallocate.as_ref().map(|c| proto::ClaimDeallocation {
                                    claim_namespace: c.namespace.clone(),
                                    claim_name: c.name.clone(),
                                    claim_uid: c.uid.clone(),
                                }),
                            })),
                            score: 0,
                            feasible_nodes: 0,
                            claim_allocations: Vec::new(),
                            claim_bindings: Vec::new(),
                        }
                    }
                }
            })
            .collect();
        let m = &self.inner.metrics;
        for (result, n) in [("scheduled", scheduled), ("unschedulable", unschedulable)] {
            m.decisions
                .get_or_create(&DecisionLabels {
                    policy: policy_name.clone(),
                    result,
                })
                .inc_by(n);
        }
        Ok(proto::ScheduleResponse {
            policy: policy_name.clone(),
            placements,
            assumed_snapshot_id,
            pod_groups: groups
                .into_iter()
                .map(|g| proto::PodGroupResult {
                    namespace: g.namespace.to_string(),
                    name: g.name.to_string(),
                    reason: g.reason.as_str().to_string(),
                    message: g.message,
                    domain: g.domain.unwrap_or_default(),
                    levels: g
                        .levels
                        .into_iter()
                        .map(|l| proto::LevelDomain {
                            composite_pod_group: l.composite.to_string(),
                            topology_key: l.topology_key.as_deref().unwrap_or_default().to_string(),
                            domain: l.domain.unwrap_or_default(),
                        })
                        .collect(),
                })
                .collect(),
        })
    }
}

/// `INVALID_ARGUMENT` for a pending pod whose uid is a bound pod's in the snapshot: the same pod
/// cannot be both (Kubernetes' uids are unique).
fn bound_uid(field: &str, uid: &str) -> Status {
    invalid_field(
        field,
        format!(
            "pod uid {} is bound in the snapshot: a pending pod must not share a bound pod's uid",
            shown(uid)
        ),
    )
}

/// What a batch must hold as a whole: unique uids, and one `min_members` per gang.
fn check_batch(pods: &[crate::engine::model::PodSpec]) -> Result<(), Status> {
    let mut uids = HashSet::with_capacity(pods.len());
    let mut gangs: HashMap<&str, (usize, u32)> = HashMap::new();
    for (i, p) in pods.iter().enumerate() {
        if !uids.insert(&*p.uid) {
            return Err(invalid_field(
                format!("pods[{i}].uid"),
                format!("duplicate pod uid {} in the batch", shown(&p.uid)),
            ));
        }
        if let Some(g) = &p.gang {
            let (first, min) = *gangs.entry(g.key.as_str()).or_insert((i, g.min_members));
            if min != g.min_members {
                return Err(invalid_field(
                    format!("pods[{i}].gang.min_members"),
                    format!(
                        "gang {} needs {min} members in pods[{first}] and {} here: a gang's members must agree",
                        shown(g.key.as_str()),
                        g.min_members
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The pods `decisions` placed, each bound to its node.
fn placed_pods(pods: Vec<crate::engine::model::PodSpec>, decisions: &[Decision]) -> Vec<crate::engine::model::PodSpec> {
    pods.into_iter()
        .zip(decisions)
        .filter_map(|(mut pod, d)| match d {
            Decision::Node { node, .. } => {
                pod.node_name = Some(node.clone());
                Some(pod)
            }
            Decision::Unschedulable(_) => None,
        })
        .collect()
}

/// The id of the snapshot stored as `base_id` with `placed` bound and `choices` (claim key →
/// volume choice) assumed: the content hash of the base id, the (uid, node) pairs and the
/// choices, so two replicas that made the same decisions on the same snapshot name the result
/// alike.
fn assumed_id(
    base_id: &str,
    placed: &[crate::engine::model::PodSpec],
    choices: &[&(String, VolumeChoice)],
    allocated: &[(
        String,
        &crate::engine::devices::Allocation,
        crate::engine::devices::Consumer,
    )],
) -> String {
    let devices: Vec<String> = allocated
        .iter()
        .flat_map(|(claim, a, _)| {
            a.devices
                .iter()
                .map(move |d| format!("{claim}={}:{}", d.request, d.device))
        })
        .collect();
    let mut parts: Vec<&[u8]> = vec![b"assume", base_id.as_bytes()];
    for d in &devices {
        parts.push(d.as_bytes());
    }
    for pod in placed {
        parts.push(pod.uid.as_bytes());
        parts.push(pod.node_name.as_deref().unwrap_or_default().as_bytes());
    }
    for (claim, choice) in choices {
        parts.push(claim.as_bytes());
        parts.push(match choice {
            VolumeChoice::Static(pv) => pv.as_bytes(),
            VolumeChoice::Provision(node) => node.as_bytes(),
        });
        parts.push(match choice {
            VolumeChoice::Static(_) => b"static",
            VolumeChoice::Provision(_) => b"provision",
        });
    }
    content_id(&parts)
}

/// A placement's claim binding for one of VolumeBinding's choices.
fn claim_binding((key, choice): (String, VolumeChoice)) -> proto::ClaimBinding {
    let (namespace, name) = key.split_once('/').unwrap_or(("", key.as_str()));
    proto::ClaimBinding {
        claim_namespace: namespace.to_string(),
        claim_name: name.to_string(),
        target: Some(match choice {
            VolumeChoice::Static(pv) => proto::claim_binding::Target::VolumeName(pv),
            VolumeChoice::Provision(node) => proto::claim_binding::Target::SelectedNode(node),
        }),
    }
}

#[tonic::async_trait]
impl proto::placement_service_server::PlacementService for PlacementApi {
    async fn sync_snapshot(
        &self,
        request: Request<proto::SyncSnapshotRequest>,
    ) -> Result<Response<proto::SyncSnapshotResponse>, Status> {
        let start = Instant::now();
        let span = tracing::info_span!("SyncSnapshot", snapshot_id = tracing::field::Empty);
        crate::telemetry::set_remote_parent(&span, request.metadata());
        let result = self.sync(request.into_inner()).instrument(span).await;
        self.observe("SyncSnapshot", "", start, &result);
        result.map(Response::new)
    }

    async fn rank(&self, request: Request<proto::RankRequest>) -> Result<Response<proto::RankResponse>, Status> {
        let start = Instant::now();
        let mut policy = String::new();
        let span = tracing::info_span!("Rank");
        crate::telemetry::set_remote_parent(&span, request.metadata());
        let result = self.rank_inner(request, &mut policy).instrument(span).await;
        self.refresh_cache();
        self.observe("Rank", &policy, start, &result);
        result.map(Response::new)
    }

    async fn schedule(
        &self,
        request: Request<proto::ScheduleRequest>,
    ) -> Result<Response<proto::ScheduleResponse>, Status> {
        let start = Instant::now();
        let mut policy = String::new();
        let span = tracing::info_span!(
            "Schedule",
            pods = tracing::field::Empty,
            assumed_snapshot_id = tracing::field::Empty
        );
        crate::telemetry::set_remote_parent(&span, request.metadata());
        let result = self.schedule_inner(request, &mut policy).instrument(span).await;
        self.refresh_cache();
        self.observe("Schedule", &policy, start, &result);
        result.map(Response::new)
    }

    async fn list_policies(
        &self,
        _request: Request<proto::ListPoliciesRequest>,
    ) -> Result<Response<proto::ListPoliciesResponse>, Status> {
        let start = Instant::now();
        let set = self.current();
        let policies = set
            .profiles
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let p = p.policy();
                proto::PolicyInfo {
                    name: p.name.clone(),
                    description: p.description.clone(),
                    digest: p.digest(),
                    filters: p.filters.iter().map(|f| f.name().to_string()).collect(),
                    scores: p
                        .scores
                        .iter()
                        .map(|s| proto::PluginWeight {
                            plugin: s.plugin.name().to_string(),
                            weight: s.weight,
                        })
                        .collect(),
                    scoring_strategy: p.scoring_strategy.name().to_string(),
                    source: set.source.describe(i),
                    filter_rules: p
                        .rules
                        .filters
                        .iter()
                        .map(|r| proto::FilterRule {
                            name: r.name.clone(),
                            expression: r.expression.clone(),
                            reason: r.reason.clone(),
                        })
                        .collect(),
                    score_rules: p
                        .rules
                        .scores
                        .iter()
                        .map(|r| proto::ScoreRule {
                            name: r.name.clone(),
                            expression: r.expression.clone(),
                            weight: r.weight,
                        })
                        .collect(),
                }
            })
            .collect();
        let result = Ok(proto::ListPoliciesResponse {
            policies,
            default_policy: set.profiles[0].policy().name.clone(),
        });
        self.observe("ListPolicies", "", start, &result);
        result.map(Response::new)
    }
}

#[cfg(test)]
#[path = "service_tests.rs"]
mod tests;
