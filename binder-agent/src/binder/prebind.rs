//! VolumeBinding's PreBind: the claim bindings chosen for a pod written, and waited for until the
//! PV controller has bound them, before its Binding; a failure handled as kube-scheduler's
//! `handleBindingCycleError`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use placement_scheduler::proto;
use tokio::time::Instant;

use k8s_openapi::api::resource::v1::ResourceClaim;

use super::failures::Failure;
use super::Binder;
use crate::api::{ApiError, ClaimRef, ClaimWrite, ClusterApi, PodRef};
use crate::claim_cache::ClaimTurns;
use crate::projection::{TrackedKey, TrackedObject};

/// kube-scheduler's prefix of a PreBind failure of the VolumeBinding plugin.
const PREBIND_FAILED: &str = "running PreBind plugin \"VolumeBinding\"";

/// Whether a claim is fully bound (`isPVCFullyBound`): it names its volume and the PV
/// controller marked the binding complete.
fn fully_bound(c: &proto::PersistentVolumeClaim) -> bool {
    !c.volume_name.is_empty() && c.bind_completed
}

/// How a PreBind ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum PreBind {
    /// Every claim is bound: the Binding may be written.
    Bound,
    /// Given up (failed, timed out, pod gone, lease lost); the pod is handled already.
    Stopped,
}

impl<A: ClusterApi> Binder<A> {
    /// VolumeBinding's PreBind (kube's `BindPodVolumes`): writes each claim binding chosen for the
    /// pod (static bindings first, then provisioning, as `bindAPIUpdate` does), then waits,
    /// watch-driven and at most `volume_bind_timeout`, until the PV controller has bound every
    /// claim (`checkBindings`). On failure or timeout the choices and the pod's reservation are
    /// forgotten, the pod gets kube-scheduler's `SchedulerError` condition and `FailedScheduling`
    /// event, and it is decided again after its backoff.
    pub(super) async fn prebind_volumes(
        &self,
        pod: &PodRef,
        node: &str,
        volumes: &[proto::ClaimBinding],
        policy: &str,
    ) -> PreBind {
        use proto::claim_binding::Target;
        let s = &self.shared;
        let started = Instant::now();
        let mut claims: Vec<(ClaimRef, Target)> = {
            let st = s.state.lock();
            volumes
                .iter()
                .filter_map(|b| {
                    let key = format!("{}/{}", b.claim_namespace, b.claim_name);
                    let uid = match st.storage_object(&TrackedKey::Claim(key)) {
                        Some(TrackedObject::Claim(c)) => c.uid.clone(),
                        _ => String::new(),
                    };
                    let claim = ClaimRef {
                        namespace: b.claim_namespace.clone(),
                        name: b.claim_name.clone(),
                        uid,
                    };
                    Some((claim, b.target.clone()?))
                })
                .collect()
        };
        claims.sort_by_key(|(_, t)| matches!(t, Target::SelectedNode(_)));
        // kube-scheduler 1.35+ (NominatedNodeNameForExpectation): a pod whose PreBind has work
        // gets `status.nominatedNodeName` set to its node first, so that other schedulers and
        // autoscalers see where it is going while its volumes are bound; the Binding clears it
        // (the API server's ClearingNominatedNodeNameAfterBinding), a failure clears it here. Not
        // fatal, as in kube.
        if !claims.is_empty() && self.may_prebind(pod, started) {
            self.rate_limit().await;
            if let Err(e) = s.api.nominate(pod, node).await {
                tracing::debug!(pod = %pod.key(), %node, error = %e, "setting nominatedNodeName before PreBind failed");
            }
        }
        for (claim, target) in &claims {
            if !self.may_prebind(pod, started) {
                return PreBind::Stopped;
            }
            let Ok(permit) = Arc::clone(&s.binds).acquire_owned().await else {
                return PreBind::Stopped;
            };
            self.rate_limit().await;
            let result = match target {
                Target::VolumeName(pv) => s.api.bind_volume(pv, claim).await,
                Target::SelectedNode(n) => s.api.select_node(claim, n).await,
            };
            drop(permit);
            if let Err(e) = result {
                let (ApiError::Conflict(m) | ApiError::NotFound(m) | ApiError::Other(m)) = e;
                tracing::info!(pod = %pod.key(), claim = %claim.key(), error = %m, "writing a claim binding failed");
                self.fail_prebind(pod, format!("{PREBIND_FAILED}: {m}"), "failed", started, policy)
                    .await;
                return PreBind::Stopped;
            }
        }
        let deadline = Instant::now() + s.config.volume_bind_timeout;
        let mut changes = s.storage_seen.subscribe();
        // Per binding: whether the watch has shown what was written (kube compares resourceVersions
        // to skip objects older than its write; a watched object without the write is older).
        let mut seen = vec![false; claims.len()];
        loop {
            if !self.may_prebind(pod, started) {
                return PreBind::Stopped;
            }
            match self.check_bindings(&claims, node, &mut seen) {
                Ok(true) => {
                    tracing::debug!(pod = %pod.key(), took = ?started.elapsed(), "claims bound");
                    s.metrics.volume_prebind("bound", started.elapsed());
                    return PreBind::Bound;
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::info!(pod = %pod.key(), error = %e, "claim binding undone");
                    self.fail_prebind(
                        pod,
                        format!("{PREBIND_FAILED}: binding volumes: {e}"),
                        "failed",
                        started,
                        policy,
                    )
                    .await;
                    return PreBind::Stopped;
                }
            }
            changes.mark_unchanged();
            tokio::select! {
                _ = changes.changed() => {}
                // The lease and the pod are looked at again at least every second, as kube polls.
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
                () = tokio::time::sleep_until(deadline) => {
                    tracing::info!(pod = %pod.key(), timeout = ?s.config.volume_bind_timeout, "claims not bound in time");
                    self.fail_prebind(
                        pod,
                        format!("{PREBIND_FAILED}: binding volumes: context deadline exceeded"),
                        "timed_out",
                        started,
                        policy,
                    )
                    .await;
                    return PreBind::Stopped;
                }
            }
        }
    }

    /// Whether a PreBind may go on: this binder leads and the pod is still queued. Otherwise its
    /// choices and reservation are forgotten (a pod deleted meanwhile is gone; after a lost
    /// lease, the pod waits for whoever leads next) and the PreBind is counted as cancelled.
    pub(super) fn may_prebind(&self, pod: &PodRef, started: Instant) -> bool {
        let s = &self.shared;
        let leading = *s.leader.borrow() && !s.stopping.load(Ordering::Relaxed);
        if leading && s.queue.lock().contains(&pod.uid) {
            return true;
        }
        {
            let mut st = s.state.lock();
            st.forget(&pod.uid);
            st.forget_storage(&pod.uid);
        }
        s.queue.lock().retry_now(&pod.uid);
        s.metrics.volume_prebind("cancelled", started.elapsed());
        tracing::debug!(pod = %pod.key(), leading, "PreBind given up: pod gone or lease lost");
        false
    }

    /// kube's `checkBindings` on the watched objects (never the assumed ones): `Ok(true)` when
    /// every claim is fully bound, `Ok(false)` to wait, `Err` when a binding was undone (a
    /// volume's claimRef reset, a claim's selected node removed: the provisioner gave up).
    fn check_bindings(
        &self,
        claims: &[(ClaimRef, proto::claim_binding::Target)],
        node: &str,
        seen: &mut [bool],
    ) -> Result<bool, String> {
        use proto::claim_binding::Target;
        let st = self.shared.state.lock();
        let mut all = true;
        for ((claim, target), seen) in claims.iter().zip(seen.iter_mut()) {
            let Some(TrackedObject::Claim(c)) = st.storage_object(&TrackedKey::Claim(claim.key())) else {
                return Err(format!(
                    "failed to check binding: could not find v1.PersistentVolumeClaim {:?}",
                    claim.key()
                ));
            };
            match target {
                Target::VolumeName(pv) => {
                    let Some(TrackedObject::Volume(v)) = st.storage_object(&TrackedKey::Volume(pv.clone())) else {
                        return Err(format!(
                            "failed to check binding: could not find v1.PersistentVolume {pv:?}"
                        ));
                    };
                    let ours = v.claim_ref.as_ref().is_some_and(|r| {
                        r.namespace == claim.namespace
                            && r.name == claim.name
                            && !r.uid.is_empty()
                            && (claim.uid.is_empty() || r.uid == claim.uid)
                    });
                    if ours {
                        *seen = true;
                    } else if *seen {
                        return Err(format!("ClaimRef got reset for pv {pv:?}"));
                    } else {
                        all = false;
                        continue;
                    }
                }
                Target::SelectedNode(_) => {
                    if c.selected_node == node {
                        *seen = true;
                    } else if *seen {
                        return Err(format!("provisioning failed for PVC {:?}", claim.name));
                    } else if !fully_bound(c) {
                        all = false;
                        continue;
                    }
                }
            }
            all &= fully_bound(c);
        }
        Ok(all)
    }

    /// A PreBind failed: its choices and the pod's reservation go, the pod is retried after its
    /// backoff, and it gets what kube-scheduler writes for a failed binding cycle (reason
    /// `SchedulerError`, the Warning event `FailedScheduling` with the message).
    async fn fail_prebind(&self, pod: &PodRef, message: String, result: &'static str, started: Instant, policy: &str) {
        let s = &self.shared;
        {
            let mut st = s.state.lock();
            st.forget(&pod.uid);
            st.forget_storage(&pod.uid);
        }
        let took = {
            let mut q = s.queue.lock();
            q.backoff(&pod.uid, Instant::now());
            q.attempt_duration(&pod.uid)
        };
        self.observer().prebind_failed(policy, took);
        s.metrics.volume_prebind(result, started.elapsed());
        s.wake.notify_one();
        tracing::warn!(pod = %pod.key(), %message, "PreBind failed; deciding again after backoff");
        // kube's handleBindingCycleError clears the nominatedNodeName set before PreBind.
        if *s.leader.borrow() {
            self.rate_limit().await;
            if let Err(e) = s.api.clear_nomination(pod).await {
                tracing::debug!(pod = %pod.key(), error = %e, "clearing nominatedNodeName failed");
            }
        }
        self.report_failure(pod, Failure::SchedulerError, &message).await;
    }
}

/// kube-scheduler's prefix of a PreBind failure of the DynamicResources plugin.
const DEVICES_PREBIND_FAILED: &str = "running PreBind plugin \"DynamicResources\"";

/// The names of a pod's ResourceClaims (kube's `resourceclaim.Name`): the claim an entry names,
/// or the one its `status.resourceClaimStatuses` names for a template (none yet: left out).
/// The pod's claims (`namespace/name`), with the special claim its PreBind created.
pub(super) fn claim_keys(
    pod: &PodRef,
    pod_claims: &[proto::PodResourceClaim],
    created: Option<&ClaimRef>,
) -> Vec<String> {
    let mut keys: Vec<String> = claim_names(pod_claims)
        .map(|name| format!("{}/{}", pod.namespace, name))
        .collect();
    keys.extend(created.map(ClaimRef::key));
    keys
}

pub(super) fn claim_names(pod_claims: &[proto::PodResourceClaim]) -> impl Iterator<Item = String> + '_ {
    pod_claims.iter().filter_map(|c| {
        if c.resource_claim_name.is_empty() {
            c.generated_claim_name.clone().filter(|n| !n.is_empty())
        } else {
            Some(c.resource_claim_name.clone())
        }
    })
}

impl<A: ClusterApi> Binder<A> {
    /// DynamicResources' PreBind (kube's `PreBind` and `bindClaim`): for each of the pod's claims
    /// not reserved for it yet, in `spec.resourceClaims` order, the allocation chosen for it (if
    /// any) and the pod's reservation written from the claim the binder's cache holds (kube
    /// writes from its informer cache), then kept there as assumed until the watch shows it; a
    /// claim written already (a restart mid-PreBind) is skipped by the write itself. The caller
    /// waited for the pod's `turns` on its claims (pods placed before it that share a claim have
    /// written it); each turn ends once its claim is written. On failure the claims this PreBind
    /// reserved are released as kube's Unreserve releases them (the pod removed from their
    /// `reservedFor`), the pod gets kube-scheduler's `SchedulerError` condition and
    /// `FailedScheduling` event, and it is decided again after its backoff. The special claim for
    /// extended resources created is left in `created`, for the caller to delete should the
    /// Binding fail (kube's Unreserve).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn prebind_devices(
        &self,
        pod: &PodRef,
        node: &str,
        pod_claims: &[proto::PodResourceClaim],
        allocations: &[proto::ClaimAllocation],
        nominate: bool,
        policy: &str,
        created: &mut Option<ClaimRef>,
        turns: &mut ClaimTurns,
    ) -> PreBind {
        let s = &self.shared;
        let started = Instant::now();
        // The pod's claims, with the uid the binder knows and the allocation to write; those the
        // watch (or this binder's last write) shows reserved for the pod need nothing.
        let claims: Vec<(ClaimRef, Option<&proto::AllocationResult>)> = {
            let st = s.state.lock();
            claim_names(pod_claims)
                .filter_map(|name| {
                    let key = format!("{}/{}", pod.namespace, name);
                    let cached = s.claims.claim(&key);
                    let watched = match st.storage_object(&TrackedKey::ResourceClaim(key)) {
                        Some(TrackedObject::ResourceClaim(c)) => Some(c),
                        _ => None,
                    };
                    let cached_reserved = cached
                        .as_ref()
                        .and_then(|c| c.status.as_ref())
                        .is_some_and(|st| st.reserved_for.iter().flatten().any(|r| r.uid == pod.uid));
                    if cached_reserved || watched.is_some_and(|c| c.reserved_for.iter().any(|r| r.uid == pod.uid)) {
                        turns.release(&format!("{}/{}", pod.namespace, name));
                        return None;
                    }
                    let allocation = allocations
                        .iter()
                        .find(|a| a.claim_namespace == pod.namespace && a.claim_name == name)
                        .and_then(|a| a.allocation.as_ref());
                    let claim = ClaimRef {
                        namespace: pod.namespace.clone(),
                        uid: watched.map(|c| c.uid.clone()).unwrap_or_default(),
                        name,
                    };
                    Some((claim, allocation))
                })
                .collect()
        };
        // The special claim for the pod's extended resources backed by DRA, to create (kube's
        // `bindClaim` for the claim named `<extended-resources>`): the placement's last entry.
        let extended = allocations
            .iter()
            .find_map(|a| Some((a.extended_resource_claim.as_ref()?, a.allocation.as_ref())));
        if claims.is_empty() && extended.is_none() {
            return PreBind::Bound;
        }
        if nominate && self.may_prebind(pod, started) {
            self.rate_limit().await;
            if let Err(e) = s.api.nominate(pod, node).await {
                tracing::debug!(pod = %pod.key(), %node, error = %e, "setting nominatedNodeName before PreBind failed");
            }
        }
        let mut reserved: Vec<&ClaimRef> = Vec::new();
        for (claim, allocation) in &claims {
            if !self.may_prebind(pod, started) {
                self.unreserve_claims(pod, &reserved).await;
                return PreBind::Stopped;
            }
            // The caller holds this pod's write slot (see `spawn_binding_cycle`).
            self.rate_limit().await;
            let result = self.write_claim(claim, pod, *allocation, None).await;
            turns.release(&claim.key());
            match result {
                Ok(()) => reserved.push(claim),
                Err(e) => {
                    let (ApiError::Conflict(m) | ApiError::NotFound(m) | ApiError::Other(m)) = e;
                    tracing::info!(pod = %pod.key(), claim = %claim.key(), error = %m, "reserving a claim failed");
                    self.unreserve_claims(pod, &reserved).await;
                    self.fail_prebind(pod, format!("{DEVICES_PREBIND_FAILED}: {m}"), "failed", started, policy)
                        .await;
                    return PreBind::Stopped;
                }
            }
        }
        if let Some((claim, allocation)) = extended {
            if !self.may_prebind(pod, started) {
                self.unreserve_claims(pod, &reserved).await;
                return PreBind::Stopped;
            }
            match self.bind_extended_claim(pod, claim, allocation).await {
                Ok(claim) => *created = Some(claim),
                Err(m) => {
                    tracing::info!(pod = %pod.key(), error = %m, "creating the claim for extended resources failed");
                    self.unreserve_claims(pod, &reserved).await;
                    self.fail_prebind(pod, format!("{DEVICES_PREBIND_FAILED}: {m}"), "failed", started, policy)
                        .await;
                    return PreBind::Stopped;
                }
            }
        }
        tracing::debug!(pod = %pod.key(), claims = claims.len(), took = ?started.elapsed(), "claims reserved");
        PreBind::Bound
    }

    /// The rest of DynamicResources' PreBind once the claims are written: when a device allocated
    /// to the pod has binding conditions, the wait for them ([`Binder::wait_for_binding_conditions`]);
    /// the caller holds no write slot meanwhile (a driver may take minutes). On a failure or a
    /// timeout the pod's reservations are removed as kube's Unreserve removes them (the
    /// allocation stays, for the next attempt's PostFilter) and the failure is reported as
    /// kube's (`SchedulerError`, decided again after its backoff).
    pub(super) async fn prebind_binding_conditions(
        &self,
        pod: &PodRef,
        node: &str,
        pod_claims: &[proto::PodResourceClaim],
        created: Option<&ClaimRef>,
        policy: &str,
    ) -> PreBind {
        let started = Instant::now();
        let keys = claim_keys(pod, pod_claims, created);
        let claims: Vec<ClaimRef> = keys
            .iter()
            .filter_map(|k| k.split_once('/'))
            .map(|(namespace, name)| ClaimRef {
                namespace: namespace.to_string(),
                name: name.to_string(),
                uid: String::new(),
            })
            .collect();
        let all: Vec<&ClaimRef> = claims.iter().collect();
        match self
            .wait_for_binding_conditions(pod, node, &keys, started, policy)
            .await
        {
            Ok(()) => PreBind::Bound,
            Err(None) => {
                self.unreserve_claims(pod, &all).await;
                PreBind::Stopped
            }
            Err(Some(m)) => {
                tracing::info!(pod = %pod.key(), %node, error = %m, "binding conditions not met");
                self.unreserve_claims(pod, &all).await;
                self.fail_prebind(pod, format!("{DEVICES_PREBIND_FAILED}: {m}"), "failed", started, policy)
                    .await;
                PreBind::Stopped
            }
        }
    }

    /// kube's `bindClaim` for one claim: written from the claim the cache holds (`fresh`: the
    /// claim this PreBind just created, which the watch may not show yet), with the classes the
    /// watch shows; the claim written is assumed in the cache until the watch shows it.
    async fn write_claim(
        &self,
        claim: &ClaimRef,
        pod: &PodRef,
        allocation: Option<&proto::AllocationResult>,
        fresh: Option<Arc<ResourceClaim>>,
    ) -> Result<(), ApiError> {
        let s = &self.shared;
        let cached = fresh.or_else(|| s.claims.claim(&claim.key()));
        let classes = s.claims.classes();
        let write = ClaimWrite {
            claim,
            pod,
            allocation,
            cached: cached.as_deref(),
            classes: &classes,
        };
        if let Some(written) = s.api.reserve_claim(write).await? {
            s.claims.assume(written);
        }
        Ok(())
    }

    /// kube's `bindClaim` for the special claim of the pod's extended resources backed by DRA
    /// (`createExtendedResourceClaimInAPI`, then the allocation and the reservation as for any
    /// claim, written from the claim created, then `patchPodExtendedResourceClaimStatus`); on a
    /// failure after the claim was created, the claim is deleted as kube's Unreserve deletes it
    /// (`deleteClaim`). Returns the claim created, or kube's error message.
    async fn bind_extended_claim(
        &self,
        pod: &PodRef,
        claim: &proto::ExtendedResourceClaim,
        allocation: Option<&proto::AllocationResult>,
    ) -> Result<ClaimRef, String> {
        let api = &self.shared.api;
        let message = |e: ApiError| {
            let (ApiError::Conflict(m) | ApiError::NotFound(m) | ApiError::Other(m)) = e;
            m
        };
        self.rate_limit().await;
        let object = api.create_extended_claim(pod, claim).await.map_err(message)?;
        let created = ClaimRef {
            namespace: pod.namespace.clone(),
            name: object.metadata.name.clone().unwrap_or_default(),
            uid: object.metadata.uid.clone().unwrap_or_default(),
        };
        tracing::debug!(pod = %pod.key(), claim = %created.key(), "claim for extended resources created");
        // Kept as kube's waitForExtendedClaimInAssumeCache keeps it: written from, and deleted
        // from should this PreBind fail.
        let object = Arc::new(object);
        self.shared.claims.assume((*object).clone());
        self.rate_limit().await;
        let mut result = self
            .write_claim(&created, pod, allocation, Some(object))
            .await
            .map_err(message);
        if result.is_ok() {
            if claim.request_mappings.is_empty() {
                result = Err(format!(
                    "nil or empty request mappings, no update of pod {} ExtendedResourceClaimStatus",
                    pod.key()
                ));
            } else {
                self.rate_limit().await;
                result = api
                    .set_extended_resource_claim_status(pod, &created.name, &claim.request_mappings)
                    .await
                    .map_err(message);
            }
        }
        if result.is_err() {
            self.delete_extended_claim(pod, &created).await;
        }
        result.map(|()| created)
    }

    /// kube's Unreserve of the special claim for extended resources (`deleteClaim`), from the
    /// claim as PreBind last wrote it; an error is logged (the claim is garbage-collected with
    /// its pod).
    pub(super) async fn delete_extended_claim(&self, pod: &PodRef, claim: &ClaimRef) {
        let s = &self.shared;
        self.rate_limit().await;
        let cached = s.claims.claim(&claim.key());
        match s.api.delete_claim(claim, cached.as_deref()).await {
            Ok(()) => s.claims.delete_claim(&claim.key()),
            Err(e) => {
                tracing::warn!(pod = %pod.key(), claim = %claim.key(), error = %e, "deleting the claim for extended resources failed");
            }
        }
    }

    /// kube's Unreserve of DynamicResources for the claims a failed PreBind reserved: the pod
    /// removed from their `reservedFor` (errors are logged: kube retries on the next attempt),
    /// and what the cache assumed of them dropped (kube's `AssumedClaimRestore`).
    async fn unreserve_claims(&self, pod: &PodRef, claims: &[&ClaimRef]) {
        for claim in claims {
            self.rate_limit().await;
            if let Err(e) = self.shared.api.unreserve_claim(claim, pod).await {
                tracing::warn!(pod = %pod.key(), claim = %claim.key(), error = %e, "unreserving a claim failed");
            }
            self.shared.claims.restore(&claim.key());
        }
    }
}
