//! DynamicResources' PreEnqueue in the binder: a pod whose ResourceClaims are not all there is
//! not sent for a decision (kube-scheduler keeps such a pod out of its active queue, writing
//! nothing), and is looked at again when a claim or the pod changes.

use tokio::time::Instant;

use placement_scheduler::proto;

use super::Binder;
use crate::api::ClusterApi;
use crate::queue::QueuedPod;

impl<A: ClusterApi> Binder<A> {
    /// DynamicResources' PreEnqueue (kube's `foreachPodResourceClaim`): a pod whose claims are
    /// not all there yet (a template's claim the resourceclaim controller has not created, or
    /// not yet seen by the watch) is not decided; it waits, with nothing written, as
    /// kube-scheduler leaves it, until the claim or the pod changes.
    pub(super) fn gate_claims(&self, mut batch: Vec<QueuedPod>, now: Instant) -> Vec<QueuedPod> {
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
    use crate::projection::{StorageKey, StorageObject};
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
        match state.storage_object(&StorageKey::ResourceClaim(key.clone())) {
            Some(StorageObject::ResourceClaim(_)) => {}
            _ => return Some(format!("could not find ResourceClaim \"{key}\"")),
        }
    }
    None
}
