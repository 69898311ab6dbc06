//! DynamicResources' PreBind wait for devices' binding conditions (kube 1.37's
//! `DRADeviceBindingConditions`, `dynamicresources.go`: `PreBind`, `isPodReadyForBinding`,
//! `isClaimReadyForBinding`, `isClaimTimeout`). A device whose slice lists `bindingConditions`
//! (an accelerator attached over a fabric, say) is allocated like any other, its conditions
//! copied into the allocation; before the Binding the scheduler waits until its driver reports
//! each of them True in the claim's `status.devices`, and gives up when one of its
//! `bindingFailureConditions` turns True or `bindingTimeout` passes. The pod is then decided again
//! after its backoff; its next attempt finds the claim unavailable and DynamicResources' PostFilter
//! deallocates it, so that other devices are tried.

use k8s_openapi::api::resource::v1::ResourceClaim;
use tokio::time::Instant;

use super::Binder;
use crate::api::{ClusterApi, PodRef};

/// How often PreBind looks at the claims it waits for (kube polls the informer every 5s; the
/// watch's copy here is read without a request, so sooner).
const POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// Where a pod's claims stand.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Readiness {
    /// Every binding condition is True and no failure condition is (or there are none).
    Ready,
    /// Some binding condition is not True yet.
    Waiting,
    /// kube's `ErrDeviceBindingFailed` or `ErrDeviceBindingTimeout`, with its text.
    Failed(String),
}

/// Whether a claim's allocation has devices with binding conditions (kube's
/// `hasBindingConditions`).
pub(super) fn has_binding_conditions(claim: &ResourceClaim) -> bool {
    results(claim).any(|r| r.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()))
}

fn results(
    claim: &ResourceClaim,
) -> impl Iterator<Item = &k8s_openapi::api::resource::v1::DeviceRequestAllocationResult> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
}

/// kube's `isClaimReadyForBinding`, then `isClaimTimeout` for a claim not ready: `now` and the
/// allocation's timestamp in seconds since the epoch.
pub(super) fn claim_readiness(claim: &ResourceClaim, timeout: std::time::Duration, now: i64) -> Readiness {
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    let Some(status) = claim.status.as_ref() else {
        return Readiness::Waiting;
    };
    let Some(allocation) = status.allocation.as_ref() else {
        return Readiness::Waiting;
    };
    let mut ready = true;
    for r in results(claim) {
        let Some(conditions) = r.binding_conditions.as_ref().filter(|c| !c.is_empty()) else {
            continue;
        };
        let device = status
            .devices
            .iter()
            .flatten()
            .find(|d| d.device == r.device && d.driver == r.driver && d.pool == r.pool);
        let Some(device) = device else {
            ready = false;
            break;
        };
        let find = |t: &str| device.conditions.iter().flatten().find(|c| c.type_ == t);
        for f in r.binding_failure_conditions.iter().flatten() {
            if let Some(c) = find(f).filter(|c| c.status == "True") {
                return Readiness::Failed(format!(
                    "device binding failed: claim={name}, reason={}, message={:?}",
                    c.reason, c.message
                ));
            }
        }
        if !conditions.iter().all(|t| find(t).is_some_and(|c| c.status == "True")) {
            ready = false;
            break;
        }
    }
    if ready {
        return Readiness::Ready;
    }
    let timed_out = allocation
        .allocation_timestamp
        .as_ref()
        .is_some_and(|t| t.0.as_second().saturating_add(timeout.as_secs() as i64) < now);
    if timed_out && has_binding_conditions(claim) {
        return Readiness::Failed(format!("device binding timeout: claim={name}"));
    }
    Readiness::Waiting
}

impl<A: ClusterApi> Binder<A> {
    /// Whether one of the claims `keys` (as the watch, or this binder's last write, shows them)
    /// has devices with binding conditions: PreBind then waits for them.
    pub(super) fn binding_conditions_pending(&self, keys: &[String]) -> bool {
        keys.iter()
            .filter_map(|k| self.shared.claims.claim(k))
            .any(|c| has_binding_conditions(&c))
    }

    /// kube's PreBind wait (`wait.PollUntilContextTimeout` over `isPodReadyForBinding`, at most
    /// `bindingTimeout`), for the claims `keys` (`namespace/name`) as the watch (or this binder's
    /// last write) shows them. `Ok` at once when none has binding conditions; otherwise the
    /// `BindingConditionsPending` event, then `Ok` once every claim is ready. `Err(Some(text))`
    /// with kube's error when a binding failed or timed out, `Err(None)` when the PreBind must
    /// stop (the pod gone, the lease lost).
    ///
    /// How the wait ended is counted as kube counts it, for `profile`
    /// (`scheduler_dra_bindingconditions_wait_duration_seconds`,
    /// `scheduler_dra_bindingconditions_allocations_total`).
    pub(super) async fn wait_for_binding_conditions(
        &self,
        pod: &PodRef,
        node: &str,
        keys: &[String],
        started: Instant,
        profile: &str,
    ) -> Result<(), Option<String>> {
        let s = &self.shared;
        if !self.binding_conditions_pending(keys) {
            return Ok(());
        }
        if let Err(e) = s.api.record_binding_conditions_pending(pod, node).await {
            tracing::debug!(pod = %pod.key(), error = %e, "recording BindingConditionsPending failed");
        }
        let waited = Instant::now();
        let outcome = self.poll_binding_conditions(pod, keys, started).await;
        let status = match &outcome {
            Ok(()) => "success",
            Err(Some(m)) if m.starts_with("device binding timeout") => "timeout",
            Err(Some(m)) if m.starts_with("device binding failed") => "failure",
            Err(_) => "error",
        };
        let devices: Vec<(String, bool)> = keys
            .iter()
            .filter_map(|k| s.claims.claim(k))
            .flat_map(|c| {
                results(&c)
                    .map(|r| {
                        (
                            r.driver.clone(),
                            r.binding_conditions.as_ref().is_some_and(|b| !b.is_empty()),
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        s.metrics
            .binding_conditions_wait(profile, status, waited.elapsed(), &devices);
        outcome
    }

    /// The wait of [`Binder::wait_for_binding_conditions`] itself.
    async fn poll_binding_conditions(
        &self,
        pod: &PodRef,
        keys: &[String],
        started: Instant,
    ) -> Result<(), Option<String>> {
        let s = &self.shared;
        let claims = || keys.iter().filter_map(|k| s.claims.claim(k)).collect::<Vec<_>>();
        let timeout = s.config.dra_binding_timeout;
        let deadline = Instant::now() + timeout;
        loop {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            let mut waiting = false;
            for c in claims() {
                match claim_readiness(&c, timeout, now) {
                    Readiness::Ready => {}
                    Readiness::Waiting => waiting = true,
                    Readiness::Failed(m) => return Err(Some(m)),
                }
                if waiting {
                    break;
                }
            }
            if !waiting {
                tracing::debug!(pod = %pod.key(), "binding conditions met");
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Some("device binding timeout: context deadline exceeded".to_string()));
            }
            tokio::time::sleep(POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
            if !self.may_prebind(pod, started) {
                return Err(None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(conditions: &[(&str, &str)], age: i64, now: i64) -> ResourceClaim {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "gpu", "namespace": "ns"},
            "spec": {"devices": {"requests": []}},
            "status": {
                "allocation": {
                    "allocationTimestamp": k8s_openapi::jiff::Timestamp::from_second(now - age).expect("a time").to_string(),
                    "devices": {"results": [
                        {"request": "gpu", "driver": "d", "pool": "p", "device": "g0",
                         "bindingConditions": ["Attached"], "bindingFailureConditions": ["AttachFailed"]},
                        {"request": "nic", "driver": "d", "pool": "p", "device": "n0"},
                    ]},
                },
                "devices": [{"driver": "d", "pool": "p", "device": "g0", "conditions": conditions.iter().map(|(t, st)| serde_json::json!({
                    "type": t, "status": st, "reason": "Why", "message": "fabric says so",
                    "lastTransitionTime": "2026-12-07T00:00:00Z",
                })).collect::<Vec<_>>()}],
            },
        }))
        .expect("a claim")
    }

    /// kube's `isClaimReadyForBinding` and `isClaimTimeout`: ready once each binding condition is
    /// True (devices without conditions need none); a failure condition True fails with kube's
    /// words; not ready past the timeout after the allocation times out.
    #[test]
    fn a_claims_binding_is_ready_waiting_failed_or_timed_out_as_kube_sees_it() {
        let now = 1_800_000_000;
        let t = std::time::Duration::from_secs(600);
        assert_eq!(claim_readiness(&claim(&[], 5, now), t, now), Readiness::Waiting);
        assert_eq!(
            claim_readiness(&claim(&[("Attached", "False")], 5, now), t, now),
            Readiness::Waiting
        );
        assert_eq!(
            claim_readiness(&claim(&[("Attached", "True")], 5, now), t, now),
            Readiness::Ready
        );
        assert_eq!(
            claim_readiness(
                &claim(&[("Attached", "False"), ("AttachFailed", "True")], 5, now),
                t,
                now
            ),
            Readiness::Failed("device binding failed: claim=gpu, reason=Why, message=\"fabric says so\"".into())
        );
        assert_eq!(
            claim_readiness(&claim(&[("Attached", "False")], 601, now), t, now),
            Readiness::Failed("device binding timeout: claim=gpu".into())
        );
        assert_eq!(
            claim_readiness(&claim(&[("Attached", "True")], 601, now), t, now),
            Readiness::Ready,
            "met conditions do not time out"
        );
        assert!(has_binding_conditions(&claim(&[], 5, now)));
    }
}
