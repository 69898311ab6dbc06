//! A decision (the gRPC side of kube-scheduler's `SchedulePod`): a replica's snapshot brought up
//! to date (a delta, or the whole state in parts), the batch placed on it, failing over to other
//! replicas, a pod the service refuses taken out and the rest asked again.

use std::sync::Arc;

use parking_lot::Mutex;
use placement_scheduler::grpc::SNAPSHOT_NOT_FOUND;
use placement_scheduler::proto;
use tokio::time::Instant;
use tonic::Code;
use tonic_types::StatusExt;

use super::{Binder, DecideError};
use crate::api::ClusterApi;
use crate::experiments::{Route, Routing};
use crate::replicas::{EncodedPodsDelta, HeldSnapshot, Replica, ReplicaPool};
use crate::state::FullParts;

/// A decision and where it was made.
pub(super) struct Decided {
    /// The replica's answer.
    pub(super) response: proto::ScheduleResponse,
    /// The replica that answered.
    pub(super) replica: Arc<Replica>,
    /// The state version of the snapshot it decided on.
    pub(super) version: u64,
    /// Whether the snapshot the replica stored with the placements assumed may be kept as the one
    /// it holds: false once the caller dropped a placement the replica assumed (a partitioned
    /// decision's node outside its partition), so the replica's view is not the binder's.
    pub(super) same_view: bool,
}

/// Why a decision gave no answer.
#[derive(Debug)]
pub(super) enum DecideFailure {
    /// The service refused the request as invalid (INVALID_ARGUMENT): no replica would answer it.
    Refused(tonic::Status),
    /// No replica could answer.
    NoDecision(DecideError),
}

impl std::fmt::Display for DecideFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Refused(status) => status.fmt(f),
            Self::NoDecision(e) => e.fmt(f),
        }
    }
}

/// What a group's decision gave.
pub(super) struct GroupDecision {
    /// The replica's answer, if any.
    pub(super) decided: Option<Decided>,
    /// The indices in the group of the pods it was asked about (all but the refused ones).
    pub(super) sent: Vec<usize>,
    /// Pods the service refused as invalid: index in the group, and the service's message.
    pub(super) refused: Vec<(usize, String)>,
    /// How long the decision took, refusals included.
    pub(super) took: std::time::Duration,
}

/// What a decision asks a replica: the policy, the pods, and how each goes into the request.
pub(super) struct Ask<'a> {
    /// Policy sent with the pods (empty: the service's default).
    pub(super) policy: &'a str,
    /// The pods to place.
    pub(super) pods: Vec<&'a proto::Pod>,
    /// Each pod as the Schedule request carries it: the pod itself ([`as_is`]), or as the caller
    /// shapes it (a partitioned decision restricts it to its partition's nodes).
    pub(super) as_sent: AsSent<'a>,
}

/// How a pod goes into a Schedule request.
pub(super) type AsSent<'a> = &'a (dyn Fn(&proto::Pod) -> proto::Pod + Sync);

/// A pod sent as it is.
pub(super) fn as_is(pod: &proto::Pod) -> proto::Pod {
    pod.clone()
}

/// A replica's sync planned against the state as it is when planned, and sent later.
pub(super) enum SyncPlan {
    /// The replica holds the state already: its snapshot id and the version.
    Held(String, u64),
    /// A delta on what it holds, and the version it brings it to.
    Delta(Box<proto::SnapshotDelta>, u64),
    /// It holds nothing usable: the whole state in parts, read when sent.
    Full,
}

/// A decision whose replica is picked and whose sync is planned now (the state as the primary
/// decided on it, before its placements are assumed), made later off the critical path: a
/// shadow's.
pub(super) struct PlannedDecision {
    pool: Arc<ReplicaPool>,
    replica: Arc<Replica>,
    plan: SyncPlan,
}

/// The index of the pod named by an INVALID_ARGUMENT field path like `pods[3].containers…`.
fn invalid_pod_index(status: &tonic::Status) -> Option<usize> {
    if status.code() != Code::InvalidArgument {
        return None;
    }
    let rest = status.message().strip_prefix("pods[")?;
    rest[..rest.find(']')?].parse().ok()
}

/// A state version a full sync in progress holds in the log; released when dropped.
struct PinnedVersion<'a> {
    versions: &'a Mutex<Vec<u64>>,
    version: u64,
}

impl<'a> PinnedVersion<'a> {
    fn new(versions: &'a Mutex<Vec<u64>>, version: u64) -> Self {
        versions.lock().push(version);
        Self { versions, version }
    }
}

impl Drop for PinnedVersion<'_> {
    fn drop(&mut self) {
        let mut versions = self.versions.lock();
        if let Some(i) = versions.iter().position(|v| *v == self.version) {
            versions.swap_remove(i);
        }
    }
}

fn is_snapshot_not_found(status: &tonic::Status) -> bool {
    status.code() == Code::NotFound
        && status
            .get_details_error_info()
            .is_some_and(|i| i.reason == SNAPSHOT_NOT_FOUND)
}

impl<A: ClusterApi> Binder<A> {
    /// Asks the route's backend to place the group's pods (each sent as `as_sent` makes it); a
    /// pod the service refuses as invalid is taken out and the rest asked again. The replica
    /// stores its snapshot with the placements assumed.
    pub(super) async fn decide_group(
        &self,
        routing: &Routing,
        route: &Route,
        specs: &[&proto::Pod],
        as_sent: AsSent<'_>,
    ) -> GroupDecision {
        // The step's span marks where it runs and is left at once: the replicas' SyncSnapshot
        // and Schedule spans stay children of the batch's `schedulingCycle` (the trace context
        // sent is the current span's), whether or not debug spans are on.
        drop(tracing::debug_span!("decide_group", pods = specs.len()).entered());
        let started = Instant::now();
        let pool = self.shared.pools.of(routing, route.backend);
        let fail_fast = !route.backend.is_main();
        let mut sent: Vec<usize> = (0..specs.len()).collect();
        let mut refused: Vec<(usize, String)> = Vec::new();
        let decided = loop {
            let Some(pool) = &pool else {
                // A reload replaced the routing and dropped this backend meanwhile: the pods
                // back off and are routed again.
                break None;
            };
            let ask = Ask {
                policy: &route.policy,
                pods: sent.iter().map(|&i| specs[i]).collect(),
                as_sent,
            };
            match self.decide(pool, &ask, fail_fast, true).await {
                Ok(r) => break Some(r),
                Err(DecideFailure::Refused(status)) => {
                    // One invalid pod must not block the batch: report it and decide the rest.
                    if let Some(k) = invalid_pod_index(&status).filter(|k| *k < sent.len()) {
                        refused.push((sent.remove(k), status.message().to_string()));
                        if sent.is_empty() {
                            break None;
                        }
                        continue;
                    }
                    tracing::warn!(error = %status, experiment = %route.experiment, arm = %route.arm, "decision failed on every replica");
                    break None;
                }
                Err(DecideFailure::NoDecision(e)) => {
                    tracing::warn!(error = %e, experiment = %route.experiment, arm = %route.arm, "no decision");
                    break None;
                }
            }
        };
        GroupDecision {
            decided,
            sent,
            refused,
            took: started.elapsed(),
        }
    }

    /// Syncs the snapshot to a replica and asks it to place `pods`, failing over to other replicas;
    /// with `assume`, the replica also stores its snapshot with the placements assumed.
    pub(super) async fn decide(
        &self,
        pool: &Arc<ReplicaPool>,
        ask: &Ask<'_>,
        fail_fast: bool,
        assume: bool,
    ) -> Result<Decided, DecideFailure> {
        let s = &self.shared;
        if fail_fast && pool.ready_count() == 0 && !pool.all().is_empty() {
            return Err(DecideFailure::NoDecision(DecideError::BackendOut));
        }
        let mut tried: Vec<String> = Vec::new();
        let mut last_error = None;
        while let Some(replica) = pool.pick(&tried) {
            tried.push(replica.endpoint.clone());
            // Counted as busy from the pick on (its sync included), so a batch decided at the
            // same time picks another replica.
            let (_, _busy) = replica.client();
            match self.decide_on(pool, &replica, ask, assume, None).await {
                Ok((response, version)) => {
                    replica.succeeded();
                    return Ok(Decided {
                        response,
                        replica,
                        version,
                        same_view: true,
                    });
                }
                Err(status) if status.code() == Code::InvalidArgument => return Err(DecideFailure::Refused(status)),
                Err(status) => {
                    tracing::warn!(replica = %replica.endpoint, error = %status, "decision replica failed");
                    s.metrics.replica_error(&replica.endpoint);
                    replica.failed(&pool.config);
                    last_error = Some(status.to_string());
                }
            }
        }
        Err(DecideFailure::NoDecision(match last_error {
            Some(e) => DecideError::AllFailed(e),
            None => DecideError::NoReplica,
        }))
    }

    /// Picks a replica of `pool` and plans its sync against the state as it is now, for a
    /// decision made later ([`Binder::decide_planned`]).
    pub(super) fn plan_decision(
        &self,
        pool: &Arc<ReplicaPool>,
        fail_fast: bool,
    ) -> Result<PlannedDecision, DecideFailure> {
        if fail_fast && pool.ready_count() == 0 && !pool.all().is_empty() {
            return Err(DecideFailure::NoDecision(DecideError::BackendOut));
        }
        let Some(replica) = pool.pick(&[]) else {
            return Err(DecideFailure::NoDecision(DecideError::NoReplica));
        };
        let plan = self.plan_sync(&replica);
        Ok(PlannedDecision {
            pool: Arc::clone(pool),
            replica,
            plan,
        })
    }

    /// A planned decision (no placement assumed): its replica synced as planned and asked; if it
    /// fails, the other replicas as [`Binder::decide`] asks them, synced to the state then.
    pub(super) async fn decide_planned(
        &self,
        planned: PlannedDecision,
        ask: &Ask<'_>,
        fail_fast: bool,
    ) -> Result<Decided, DecideFailure> {
        let PlannedDecision { pool, replica, plan } = planned;
        let result = {
            let (_, _busy) = replica.client();
            self.decide_on(&pool, &replica, ask, false, Some(plan)).await
        };
        match result {
            Ok((response, version)) => {
                replica.succeeded();
                Ok(Decided {
                    response,
                    replica,
                    version,
                    same_view: true,
                })
            }
            Err(status) if status.code() == Code::InvalidArgument => Err(DecideFailure::Refused(status)),
            Err(status) => {
                tracing::warn!(replica = %replica.endpoint, error = %status, "decision replica failed");
                self.shared.metrics.replica_error(&replica.endpoint);
                replica.failed(&pool.config);
                self.decide(&pool, ask, fail_fast, false).await
            }
        }
    }

    /// One replica's decision, and the state version of the snapshot it was made on; its first
    /// sync as `plan` says when given, else planned now.
    async fn decide_on(
        &self,
        pool: &ReplicaPool,
        replica: &Arc<Replica>,
        ask: &Ask<'_>,
        assume: bool,
        mut plan: Option<SyncPlan>,
    ) -> Result<(proto::ScheduleResponse, u64), tonic::Status> {
        let s = &self.shared;
        let timeout = pool.config.call_timeout;
        for _ in 0..2 {
            let plan = plan.take().unwrap_or_else(|| self.plan_sync(replica));
            let (snapshot_id, version) = self.sync(pool, replica, plan).await?;
            let (mut client, _inflight) = replica.client();
            let mut req = tonic::Request::new(proto::ScheduleRequest {
                snapshot: Some(proto::SnapshotRef {
                    source: Some(proto::snapshot_ref::Source::SnapshotId(snapshot_id)),
                }),
                pods: ask.pods.iter().map(|p| (ask.as_sent)(p)).collect(),
                policy: ask.policy.to_string(),
                seed: s.config.seed,
                assume,
            });
            req.set_timeout(timeout);
            placement_scheduler::telemetry::inject_current(req.metadata_mut());
            match client.schedule(req).await {
                Ok(r) => return Ok((r.into_inner(), version)),
                Err(status) if is_snapshot_not_found(&status) => {
                    tracing::debug!(replica = %replica.endpoint, "snapshot evicted before the Schedule call");
                    // Evicted between the sync and the call: re-send a full snapshot once.
                    *replica.synced.lock() = None;
                }
                Err(status) => return Err(status),
            }
        }
        Err(tonic::Status::unavailable("snapshot evicted twice in a row"))
    }

    /// Plans a replica's sync against the state now: nothing to send, a delta on what it holds,
    /// or the whole state.
    fn plan_sync(&self, replica: &Arc<Replica>) -> SyncPlan {
        let s = &self.shared;
        let held = replica.synced.lock().clone();
        let st = s.state.lock();
        let version = st.version();
        match held {
            Some(h) if h.version == version && h.assumed_range.is_none() => SyncPlan::Held(h.id, version),
            Some(h) => match st.delta_since_except(h.version, h.assumed_range) {
                // It holds the state already (its own assumed placements, nothing else).
                Some(d) if d == proto::SnapshotDelta::default() => {
                    drop(st);
                    let mut synced = replica.synced.lock();
                    if synced.as_ref() == Some(&h) {
                        *synced = Some(HeldSnapshot::at(h.id.clone(), version));
                    }
                    SyncPlan::Held(h.id, version)
                }
                Some(mut d) => {
                    d.base_snapshot_id = h.id;
                    SyncPlan::Delta(Box::new(d), version)
                }
                None => SyncPlan::Full,
            },
            None => SyncPlan::Full,
        }
    }

    /// Brings a replica's snapshot up to date as `plan` says (a delta on what it holds, or a full
    /// snapshot) and returns its id and the state version it reflects.
    async fn sync(
        &self,
        pool: &ReplicaPool,
        replica: &Arc<Replica>,
        plan: SyncPlan,
    ) -> Result<(String, u64), tonic::Status> {
        let s = &self.shared;
        let delta = match plan {
            SyncPlan::Held(id, version) => return Ok((id, version)),
            SyncPlan::Delta(delta, version) => Some((*delta, version)),
            SyncPlan::Full => None,
        };
        if let Some((delta, version)) = delta {
            let started = Instant::now();
            let result = self
                .send_sync(pool, replica, proto::sync_snapshot_request::Kind::Delta(delta))
                .await;
            match result {
                Ok((id, bytes)) => {
                    s.metrics.sync(false, bytes, started.elapsed());
                    *replica.synced.lock() = Some(HeldSnapshot::at(id.clone(), version));
                    self.compact_log();
                    return Ok((id, version));
                }
                // The replica no longer holds the base: a full snapshot instead.
                Err(status) if is_snapshot_not_found(&status) => {
                    tracing::debug!(replica = %replica.endpoint, "replica no longer holds the delta's base: full sync");
                    *replica.synced.lock() = None
                }
                Err(status) => return Err(status),
            }
        }
        self.sync_full(pool, replica).await
    }

    /// Sends a replica the whole state in parts: a full snapshot with every namespace, budget and
    /// storage object, the first [`ReplicaConfig::full_sync_chunk_nodes`] nodes and no pod;
    /// deltas on it with the other nodes, as many each; then deltas of
    /// [`ReplicaConfig::full_sync_chunk_pods`] pods each. The pods go as the state stores them,
    /// encoded and shared: no decoded copy of them is made and no message holds them all.
    ///
    /// [`ReplicaConfig::full_sync_chunk_nodes`]: crate::replicas::ReplicaConfig
    /// [`ReplicaConfig::full_sync_chunk_pods`]: crate::replicas::ReplicaConfig
    async fn sync_full(&self, pool: &ReplicaPool, replica: &Arc<Replica>) -> Result<(String, u64), tonic::Status> {
        let s = &self.shared;
        tracing::debug!(replica = %replica.endpoint, "full sync");
        let started = Instant::now();
        let (FullParts { rest, pods }, version) = {
            let st = s.state.lock();
            (st.full_parts_unordered(), st.version())
        };
        // The pods go in uid order (a replica adds each chunk at its pod map's edge); they are
        // sorted while the nodes are sent.
        let pods = tokio::task::spawn_blocking(move || {
            let mut pods = pods;
            crate::state::sort_by_uid(&mut pods);
            pods
        });
        // The log after `version` is kept until this sync ends (another replica's sync may
        // compact it meanwhile): the next delta to this replica starts there.
        let _pinned = PinnedVersion::new(&s.full_syncs, version);
        // The nodes past the first chunk follow in deltas of their own.
        let mut rest = rest;
        let chunk_nodes = pool.config.full_sync_chunk_nodes.max(1);
        let more_nodes = if rest.nodes.len() > chunk_nodes {
            rest.nodes.split_off(chunk_nodes)
        } else {
            Vec::new()
        };
        let (mut id, mut bytes) = self
            .send_sync(pool, replica, proto::sync_snapshot_request::Kind::Full(rest))
            .await?;
        for chunk in more_nodes.chunks(chunk_nodes) {
            let delta = proto::SnapshotDelta {
                base_snapshot_id: id,
                upsert_nodes: chunk.to_vec(),
                ..Default::default()
            };
            let (next, sent) = self
                .send_sync(pool, replica, proto::sync_snapshot_request::Kind::Delta(delta))
                .await?;
            id = next;
            bytes += sent;
        }
        // Freeing tens of thousands of nodes took longer than sending a chunk of pods.
        drop(tokio::task::spawn_blocking(move || drop(more_nodes)));
        let pods = pods
            .await
            .map_err(|e| tonic::Status::internal(format!("sorting the pods failed: {e}")))?;
        for chunk in pods.chunks(pool.config.full_sync_chunk_pods.max(1)) {
            let delta = EncodedPodsDelta {
                base_snapshot_id: id,
                pods: chunk.to_vec(),
            };
            bytes += prost::Message::encoded_len(&delta);
            id = replica.sync_encoded(delta, &pool.config).await?;
        }
        drop(pods);
        s.metrics.sync(true, bytes, started.elapsed());
        *replica.synced.lock() = Some(HeldSnapshot::at(id.clone(), version));
        self.compact_log();
        Ok((id, version))
    }

    /// One SyncSnapshot call: the id of the snapshot the replica built, and the request's size.
    async fn send_sync(
        &self,
        pool: &ReplicaPool,
        replica: &Arc<Replica>,
        kind: proto::sync_snapshot_request::Kind,
    ) -> Result<(String, usize), tonic::Status> {
        let (mut client, _inflight) = replica.client();
        let mut req = tonic::Request::new(proto::SyncSnapshotRequest { kind: Some(kind) });
        req.set_timeout(pool.config.call_timeout);
        placement_scheduler::telemetry::inject_current(req.metadata_mut());
        let bytes = prost::Message::encoded_len(req.get_ref());
        let id = client.sync_snapshot(req).await?.into_inner().snapshot_id;
        Ok((id, bytes))
    }

    /// Drops the change log every synced replica of every backend is past: no delta needs it.
    fn compact_log(&self) {
        let s = &self.shared;
        if let Some(min) = s.pools.min_synced_version() {
            let pinned = s.full_syncs.lock().iter().copied().min();
            s.state.lock().compact(pinned.map_or(min, |p| p.min(min)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_pod_index_reads_the_field_path() {
        let s = tonic::Status::invalid_argument("pods[12].containers[0].requests[\"cpu\"]: invalid quantity");
        assert_eq!(invalid_pod_index(&s), Some(12));
        assert_eq!(
            invalid_pod_index(&tonic::Status::invalid_argument("policy: unknown")),
            None
        );
        assert_eq!(invalid_pod_index(&tonic::Status::internal("pods[1]")), None);
    }
}
