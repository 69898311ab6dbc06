//! DynamicResources' PreEnqueue in the binder: a pod whose ResourceClaims are not all there is
//! not sent for a decision (kube-scheduler keeps such a pod out of its active queue, writing
//! nothing), and is looked at again when a claim or the pod changes. And its PostFilter's write:
//! a claim whose allocation pins the pod to nodes it cannot use, deallocated.

use tokio::task::JoinSet;
use tokio::time::Instant;

use placement_scheduler::proto;

use super::failures::Failure;
use super::Binder;
use crate::api::{ApiError, ClaimRef, ClusterApi, PodRef};
use crate::queue::QueuedPod;

impl<A: ClusterApi> Binder<A> {
    /// DynamicResources' PreEnqueue (kube's `foreachPodResourceClaim`): a pod whose claims are
    /// not all there yet (a template's claim the resourceclaim controller has not created, or
    /// not yet seen by the watch) is not decided; it waits, with nothing written, as
    /// kube-scheduler leaves it, until the claim or the pod changes.
    pub(super) fn gate_claims(&self, mut batch: Vec<QueuedPod>, now: Instant) -> Vec<QueuedPod> {
        let _step = tracing::debug_span!("gate_claims").entered();
        let s = &self.shared;
        if batch.iter().all(|p| p.info.spec.resource_claims.is_empty()) {
            return batch;
        }
        let mut waiting: Vec<String> = Vec::new();
        {
            let st = s.state.lock();
            batch.retain(|p| match missing_claim(&p.info.spec, &st) {
                Some(why) => {
                    tracing::debug!(pod = %p.info.key(), %why, "waiting for its resource claims");
                    waiting.push(p.info.spec.uid.clone());
                    false
                }
                None => true,
            });
        }
        if !waiting.is_empty() {
            let mut q = s.queue.lock();
            for uid in &waiting {
                q.unschedulable(uid, now);
            }
        }
        batch
    }
}

/// Why a pod's claims are not all there (kube's PreEnqueue message), if they are not.
pub(crate) fn missing_claim(pod: &proto::Pod, state: &crate::state::ClusterState) -> Option<String> {
    use crate::projection::{TrackedKey, TrackedObject};
    for c in &pod.resource_claims {
        let name = if !c.resource_claim_name.is_empty() {
            c.resource_claim_name.as_str()
        } else {
            match c.generated_claim_name.as_deref() {
                // The controller decided the pod needs no claim for this entry.
                Some("") => continue,
                Some(name) => name,
                None => {
                    return Some(format!(
                        "pod \"{}/{}\": ResourceClaim not created yet",
                        pod.namespace, pod.name
                    ))
                }
            }
        };
        let key = format!("{}/{}", pod.namespace, name);
        match state.storage_object(&TrackedKey::ResourceClaim(key.clone())) {
            Some(TrackedObject::ResourceClaim(_)) => {}
            _ => return Some(format!("could not find ResourceClaim \"{key}\"")),
        }
    }
    None
}

/// DynamicResources' PostFilter message when it deallocated a claim (kube's
/// `deallocateOrDeletePodClaims`); the decision's message carries it where kube's does.
const DEALLOCATED: &str = "deallocation of ResourceClaim completed";

impl<A: ClusterApi> Binder<A> {
    /// A pod no node fits, whose decision names a claim DynamicResources' PostFilter
    /// deallocates: the claim's allocation cleared (kube writes it in PostFilter, before the
    /// failure is reported), then the failure reported. The claim's change, once the watch shows
    /// it, moves the pod back to the active queue, and its next attempt allocates the claim
    /// anew.
    pub(super) fn spawn_unschedulable_deallocating(
        &self,
        tasks: &mut JoinSet<()>,
        pod: PodRef,
        claim: proto::ClaimDeallocation,
        message: String,
    ) {
        let this = self.clone();
        tasks.spawn(async move {
            let message = this.deallocate(&pod, &claim, message).await;
            this.report_failure(&pod, Failure::Unschedulable, &message).await
        });
    }

    /// The deallocation alone, for a pod whose preemption goes on (its message is
    /// DefaultPreemption's, as kube's `RunPostFilterPlugins` returns it).
    pub(super) fn spawn_deallocation(&self, tasks: &mut JoinSet<()>, pod: PodRef, claim: proto::ClaimDeallocation) {
        let this = self.clone();
        tasks.spawn(async move {
            this.deallocate(&pod, &claim, String::new()).await;
        });
    }

    /// Writes the deallocation from the claim the watch shows; returns the pod's message: as
    /// decided, or, when the write failed, with kube's PostFilter part replaced by the error (kube's
    /// PostFilter returns the error status, whose message becomes the FitError's `PostFilterMsg`,
    /// and DefaultPreemption does not run).
    async fn deallocate(&self, pod: &PodRef, d: &proto::ClaimDeallocation, message: String) -> String {
        let s = &self.shared;
        if !*s.leader.borrow() {
            // A binder that does not lead writes nothing; the failure report waits for the lease.
            return message;
        }
        let claim = ClaimRef {
            namespace: d.claim_namespace.clone(),
            name: d.claim_name.clone(),
            uid: d.claim_uid.clone(),
        };
        let cached = s.claims.claim(&claim.key());
        self.rate_limit().await;
        match s.api.deallocate_claim(&claim, cached.as_deref()).await {
            Ok(answered) => {
                tracing::info!(pod = %pod.key(), claim = %claim.key(), "deallocated ResourceClaim (DynamicResources PostFilter)");
                if let Some(c) = answered {
                    s.claims.assume(c);
                }
                s.metrics.claim_deallocation("deallocated");
                message
            }
            Err(e) => {
                let (ApiError::Conflict(m) | ApiError::NotFound(m) | ApiError::Other(m)) = e;
                tracing::warn!(pod = %pod.key(), claim = %claim.key(), error = %m, "deallocating a ResourceClaim failed");
                s.metrics.claim_deallocation("error");
                match message.find(DEALLOCATED) {
                    Some(at) => format!("{}{m}", &message[..at]),
                    None => message,
                }
            }
        }
    }
}
