//! DynamicResources' writes of a ResourceClaim as kube-scheduler makes them (`bindClaim` and
//! `deleteClaim` in `pkg/scheduler/framework/plugins/dynamicresources`), from the claim the
//! binder's cache holds ([`crate::claim_cache`]) instead of a read: the same writes per claim as
//! kube-scheduler (the finalizer, then the allocation and the reservation through the status
//! subresource), each a merge patch conditional on the resourceVersion it was made from (kube's
//! updates carry it too). A conflict reads the claim again and retries, at most
//! [`ATTEMPTS`] attempts [`RETRY_WAIT`] apart, as `retry.RetryOnConflict(retry.DefaultRetry, …)`.

use std::time::Duration;

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimConsumerReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{json, Value};

use super::{prefixed, KubeApi, RESOURCE_CLAIM_FINALIZER};
use crate::api::{ApiError, ClaimRef, ClaimWrite};
use crate::lean::Lean;

/// The claims of `namespace`, read without their managed fields ([`Lean`]): each write answers
/// with the whole claim, whose managed fields the binder never reads.
fn claims_of(client: &kube::Client, namespace: &str) -> Api<Lean<ResourceClaim>> {
    Api::namespaced(client.clone(), namespace)
}

/// kube's `retry.DefaultRetry`: attempts in all.
pub const ATTEMPTS: u32 = 5;

/// kube's `retry.DefaultRetry`: the wait before each retry (10 ms, with up to 10% jitter).
pub const RETRY_WAIT: Duration = Duration::from_millis(10);

/// How one attempt ended short of success.
enum Attempt {
    /// The API server refused a write made from an older version (409): read and retry.
    Conflict(ApiError),
    /// Anything else: given up.
    Failed(ApiError),
}

/// The wait before a retry: [`RETRY_WAIT`] and up to 10% more, so that writers that collided do
/// not collide again in step.
fn retry_wait() -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    RETRY_WAIT + RETRY_WAIT / 10 * (nanos % 1000) / 1000
}

/// `error` as the answer to a write: a 409 is retried, anything else is given up; its message
/// prefixed with what was being written, as kube wraps it.
fn refused(error: ApiError, what: &str) -> Attempt {
    match prefixed(error, what) {
        e @ ApiError::Conflict(_) => Attempt::Conflict(e),
        e => Attempt::Failed(e),
    }
}

/// The claim's `status.reservedFor` with `pod` added, as a list to write whole (the write is
/// conditional on the version it was read from, so nothing another writer added is lost).
fn reserved_with(claim: &ResourceClaim, pod: &crate::api::PodRef) -> Vec<ResourceClaimConsumerReference> {
    let mut reserved = claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.clone())
        .unwrap_or_default();
    reserved.push(ResourceClaimConsumerReference {
        api_group: None,
        resource: "pods".into(),
        name: pod.name.clone(),
        uid: pod.uid.clone(),
    });
    reserved
}

impl KubeApi {
    /// [`crate::api::ClusterApi::reserve_claim`]: kube's `bindClaim` from the cached claim.
    pub(super) async fn write_claim(&self, w: ClaimWrite<'_>) -> Result<Option<ResourceClaim>, ApiError> {
        let key = w.claim.key();
        let claims = claims_of(&self.client, &w.claim.namespace);
        let mut current = match w.cached {
            Some(c) => c.clone(),
            None => {
                self.fetched(claims.get(&w.claim.name))
                    .await
                    .map_err(|e| prefixed(e, &format!("get updated claim {key}")))?
                    .0
            }
        };
        let mut attempt = 1;
        loop {
            match self.write_claim_once(&claims, &w, &key, current).await {
                Ok(written) => return Ok(written),
                Err(Attempt::Conflict(e)) if attempt < ATTEMPTS => {
                    attempt += 1;
                    tracing::debug!(claim = %key, error = %e, "retrying a claim write after a conflict");
                    tokio::time::sleep(retry_wait()).await;
                    current = self
                        .fetched(claims.get(&w.claim.name))
                        .await
                        .map_err(|e| prefixed(e, &format!("get updated claim {key} after conflict")))?
                        .0;
                }
                Err(Attempt::Conflict(e) | Attempt::Failed(e)) => return Err(e),
            }
        }
    }

    /// One attempt of `bindClaim`'s update function on `current`.
    async fn write_claim_once(
        &self,
        claims: &Api<Lean<ResourceClaim>>,
        w: &ClaimWrite<'_>,
        key: &str,
        mut current: ResourceClaim,
    ) -> Result<Option<ResourceClaim>, Attempt> {
        let deleted = || Attempt::Failed(ApiError::Conflict(format!("claim {key} got deleted in the meantime")));
        if !w.claim.uid.is_empty() && current.metadata.uid.as_deref() != Some(w.claim.uid.as_str()) {
            return Err(deleted());
        }
        if current.metadata.deletion_timestamp.is_some() {
            return Err(deleted());
        }
        let status = current.status.as_ref();
        if status
            .and_then(|s| s.reserved_for.as_ref())
            .is_some_and(|r| r.iter().any(|c| c.uid == w.pod.uid))
        {
            // Written already (a restart mid-PreBind, or the cache was behind): nothing to do.
            return Ok(None);
        }
        let params = PatchParams::default();
        let now = Time(Timestamp::now());
        let status_patch = if let Some(a) = w.allocation {
            if status.is_some_and(|s| s.allocation.is_some()) {
                return Err(Attempt::Failed(ApiError::Conflict(format!(
                    "claim {key} got allocated elsewhere in the meantime"
                ))));
            }
            // The finalizer goes in with a write of the claim itself (kube: "If we were
            // interrupted in the past, it might already be set and we simply continue").
            let mut finalizers = current.metadata.finalizers.clone().unwrap_or_default();
            if !finalizers.iter().any(|f| f == RESOURCE_CLAIM_FINALIZER) {
                finalizers.push(RESOURCE_CLAIM_FINALIZER.into());
                let patch = json!({"metadata": {
                    "resourceVersion": current.metadata.resource_version,
                    "finalizers": finalizers,
                }});
                current = self
                    .fetched(claims.patch(&w.claim.name, &params, &Patch::Merge(patch)))
                    .await
                    .map_err(|e| refused(e, &format!("add finalizer to claim {key}")))?
                    .0;
            }
            let mut allocation = crate::projection::allocation_out(a, &current, w.classes);
            allocation.allocation_timestamp = Some(now);
            json!({"allocation": allocation, "reservedFor": reserved_with(&current, w.pod)})
        } else {
            let Some(allocation) = status.and_then(|s| s.allocation.as_ref()) else {
                return Err(Attempt::Failed(ApiError::Conflict(format!(
                    "claim {key} got deallocated elsewhere in the meantime"
                ))));
            };
            let mut patch = json!({"reservedFor": reserved_with(&current, w.pod)});
            if allocation.allocation_timestamp.is_none() {
                patch["allocation"] = json!({"allocationTimestamp": now});
            }
            patch
        };
        let patch = json!({
            "metadata": {"resourceVersion": current.metadata.resource_version},
            "status": status_patch,
        });
        let what = if w.allocation.is_some() {
            format!("add allocation and reservation to claim {key}")
        } else {
            format!("add reservation to claim {key}")
        };
        self.fetched(claims.patch_status(&w.claim.name, &params, &Patch::Merge(patch)))
            .await
            .map(|c| Some(c.0))
            .map_err(|e| refused(e, &what))
    }

    /// [`crate::api::ClusterApi::deallocate_claim`]: kube's PostFilter `UpdateStatus` of the
    /// informer's copy with `allocation`, `reservedFor` and `devices` cleared; a merge patch of the
    /// status conditional on the uid and resourceVersion the watch showed (read once when the
    /// watch has none). Not retried: kube's PostFilter returns the error.
    pub(super) async fn deallocate(
        &self,
        claim: &ClaimRef,
        cached: Option<&ResourceClaim>,
    ) -> Result<Option<ResourceClaim>, ApiError> {
        let claims = claims_of(&self.client, &claim.namespace);
        let current = match cached {
            Some(c) => c.clone(),
            None => self.fetched(claims.get(&claim.name)).await?.0,
        };
        let mut metadata = json!({"resourceVersion": current.metadata.resource_version});
        let uid = current.metadata.uid.clone().filter(|_| claim.uid.is_empty());
        metadata["uid"] = json!(if claim.uid.is_empty() {
            uid
        } else {
            Some(claim.uid.clone())
        });
        let patch = json!({
            "metadata": metadata,
            "status": {"allocation": Value::Null, "reservedFor": Value::Null, "devices": Value::Null},
        });
        self.fetched(claims.patch_status(&claim.name, &PatchParams::default(), &Patch::Merge(patch)))
            .await
            .map(|c| Some(c.0))
    }

    /// [`crate::api::ClusterApi::delete_claim`]: kube's `deleteClaim`, its finalizer removed from
    /// `cached` (the claim as PreBind last wrote it) with no read.
    pub(super) async fn remove_claim(&self, claim: &ClaimRef, cached: Option<&ResourceClaim>) -> Result<(), ApiError> {
        let key = claim.key();
        let claims = claims_of(&self.client, &claim.namespace);
        let mut current = cached.cloned();
        let mut attempt = 1;
        loop {
            let c = match current.take() {
                Some(c) => c,
                None => match self.fetched(claims.get(&claim.name)).await {
                    Ok(c) => c.0,
                    Err(ApiError::NotFound(_)) => return Ok(()),
                    Err(e) => return Err(prefixed(e, &format!("get resourceclaim {key}"))),
                },
            };
            let finalizers = c.metadata.finalizers.clone().unwrap_or_default();
            if !finalizers.iter().any(|f| f == RESOURCE_CLAIM_FINALIZER) {
                break;
            }
            let rest: Vec<&String> = finalizers.iter().filter(|f| *f != RESOURCE_CLAIM_FINALIZER).collect();
            let patch = json!({"metadata": {
                "resourceVersion": c.metadata.resource_version,
                "finalizers": if rest.is_empty() { Value::Null } else { json!(rest) },
            }});
            match self
                .fetched(claims.patch(&claim.name, &PatchParams::default(), &Patch::Merge(patch)))
                .await
            {
                Ok(_) => break,
                Err(ApiError::Conflict(_)) if attempt < ATTEMPTS => {
                    attempt += 1;
                    tokio::time::sleep(retry_wait()).await;
                }
                Err(ApiError::NotFound(_)) => return Ok(()),
                Err(e) => return Err(prefixed(e, &format!("update resourceclaim {key}"))),
            }
        }
        match self.timed(claims.delete(&claim.name, &DeleteParams::default())).await {
            Ok(()) => Ok(()),
            Err(e) => match ApiError::from(e) {
                ApiError::NotFound(_) => Ok(()),
                e => Err(e),
            },
        }
    }
}
