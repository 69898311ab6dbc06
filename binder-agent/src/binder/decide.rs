//! A decision: a replica's snapshot brought up to date (a delta, or the whole state in parts), the
//! batch placed on it, failing over to other replicas, and the placements assumed.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use placement_scheduler::grpc::SNAPSHOT_NOT_FOUND;
use placement_scheduler::proto;
use tokio::time::Instant;
use tonic::Code;
use tonic_types::StatusExt;

use super::{Binder, DecideError};
use crate::api::ClusterApi;
use crate::partitions::Partition;
use crate::queue::QueuedPod;
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
    /// Syncs the snapshot to a replica and asks it to place `pods`, failing over to other replicas;
    /// with `assume`, the replica also stores its snapshot with the placements assumed.
    /// `Err(Ok(status))` is a request the service refused (INVALID_ARGUMENT); `Err(Err(_))` means no
    /// replica could answer.
    pub(super) async fn decide(
        &self,
        pool: &Arc<ReplicaPool>,
        policy: &str,
        pods: &[&proto::Pod],
        fail_fast: bool,
        assume: bool,
        partition: Option<Partition>,
    ) -> Result<Decided, Result<tonic::Status, DecideError>> {
        let s = &self.shared;
        if fail_fast && pool.ready_count() == 0 && !pool.all().is_empty() {
            return Err(Err(DecideError::BackendOut));
        }
        let mut tried: Vec<String> = Vec::new();
        let mut last_error = None;
        while let Some(replica) = pool.pick(&tried) {
            tried.push(replica.endpoint.clone());
            // Counted as busy from the pick on (its sync included), so a batch decided at the
            // same time picks another replica.
            let (_, _busy) = replica.client();
            match self.decide_on(pool, &replica, policy, pods, assume, partition).await {
                Ok((response, version)) => {
                    replica.succeeded();
                    return Ok(Decided {
                        response,
                        replica,
                        version,
                    });
                }
                Err(status) if status.code() == Code::InvalidArgument => return Err(Ok(status)),
                Err(status) => {
                    tracing::warn!(replica = %replica.endpoint, error = %status, "decision replica failed");
                    s.metrics.replica_error(&replica.endpoint);
                    replica.failed(&pool.config);
                    last_error = Some(status.to_string());
                }
            }
        }
        Err(Err(match last_error {
            Some(e) => DecideError::AllFailed(e),
            None => DecideError::NoReplica,
        }))
    }

    /// One replica's decision, and the state version of the snapshot it was made on.
    async fn decide_on(
        &self,
        pool: &ReplicaPool,
        replica: &Arc<Replica>,
        policy: &str,
        pods: &[&proto::Pod],
        assume: bool,
        partition: Option<Partition>,
    ) -> Result<(proto::ScheduleResponse, u64), tonic::Status> {
        let s = &self.shared;
        let timeout = pool.config.call_timeout;
        for _ in 0..2 {
            let (snapshot_id, version) = self.sync(pool, replica).await?;
            let (mut client, _inflight) = replica.client();
            let mut req = tonic::Request::new(proto::ScheduleRequest {
                snapshot: Some(proto::SnapshotRef {
                    source: Some(proto::snapshot_ref::Source::SnapshotId(snapshot_id)),
                }),
                pods: pods
                    .iter()
                    .map(|p| partition.map_or_else(|| (*p).clone(), |part| part.restrict(p)))
                    .collect(),
                policy: policy.to_string(),
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

    /// Brings a replica's snapshot up to date (a delta on what it holds, or a full snapshot) and
    /// returns its id and the state version it reflects.
    async fn sync(&self, pool: &ReplicaPool, replica: &Arc<Replica>) -> Result<(String, u64), tonic::Status> {
        let s = &self.shared;
        let held = replica.synced.lock().clone();
        let delta = {
            let st = s.state.lock();
            let version = st.version();
            match held {
                Some(h) if h.version == version && h.assumed_range.is_none() => return Ok((h.id, version)),
                Some(h) => match st.delta_since_except(h.version, h.assumed_range) {
                    // It holds the state already (its own assumed placements, nothing else).
                    Some(d) if d == proto::SnapshotDelta::default() => {
                        drop(st);
                        let mut synced = replica.synced.lock();
                        if synced.as_ref() == Some(&h) {
                            *synced = Some(HeldSnapshot::at(h.id.clone(), version));
                        }
                        return Ok((h.id, version));
                    }
                    d => d.map(|mut d| {
                        d.base_snapshot_id = h.id;
                        (d, version)
                    }),
                },
                None => None,
            }
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

    /// Assumes every placed pod of a decision, at once under the state lock. When the replica
    /// stored its snapshot with the same placements assumed, that snapshot is kept as the one it
    /// holds: it reflects the state at the version it decided on plus these assumptions, so the
    /// next sync sends it only what else changed (nothing, when nothing did). `same_view` is
    /// false when the binder did not act on a placement the replica assumed (a node outside its
    /// partition): then the replica's snapshot is not the binder's and is not kept.
    pub(super) fn assume_placed(
        &self,
        response: &proto::ScheduleResponse,
        by_uid: &HashMap<String, QueuedPod>,
        replica: &Arc<Replica>,
        version: u64,
        same_view: bool,
    ) {
        let s = &self.shared;
        let mut placed: HashMap<&str, &str> = HashMap::new();
        let kept = {
            let mut st = s.state.lock();
            let from = st.version();
            for p in &response.placements {
                if let Some(proto::placement::Outcome::NodeName(node)) = &p.outcome {
                    if let Some(qp) = by_uid.get(p.pod_uid.as_str()) {
                        st.assume(qp.info.spec.clone(), node);
                        // The volumes chosen for it are no other claim's until the watches
                        // show them bound or its PreBind gives them up.
                        st.assume_storage(&p.pod_uid, &p.claim_bindings);
                        // So are the devices allocated for its claims.
                        st.assume_devices(&p.pod_uid, &qp.info.spec.name, &p.claim_allocations);
                    }
                    placed.insert(&p.pod_uid, node);
                }
            }
            let assumed = &response.assumed_snapshot_id;
            (!assumed.is_empty() && same_view && st.all_assumed(&placed)).then(|| HeldSnapshot {
                id: assumed.clone(),
                version,
                assumed_range: Some((from, st.version())),
            })
        };
        if response.assumed_snapshot_id.is_empty() {
            return;
        }
        let result = match kept {
            Some(next) => {
                let mut held = replica.synced.lock();
                // Unless another sync moved the replica on meanwhile.
                if held
                    .as_ref()
                    .is_some_and(|h| h.version == version && h.assumed_range.is_none())
                {
                    *held = Some(next);
                    "adopted"
                } else {
                    "stale"
                }
            }
            None => "stale",
        };
        s.metrics.assumed_snapshot(result);
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
