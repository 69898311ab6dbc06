//! The binding cycle (kube-scheduler's `bindingCycle`): a placed pod's PreBind, then its Binding,
//! retried on the same node through ambiguous errors, and its `Scheduled` event; API writes rate
//! limited.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument;

use super::prebind::PreBind;
use super::{pod_ref, BindRequest, Binder};
use crate::api::{ApiError, ClusterApi};
use crate::queue::QueuedPod;

impl<A: ClusterApi> Binder<A> {
    pub(super) fn spawn_bind(&self, tasks: &mut JoinSet<()>, qp: QueuedPod, node: String, bind: BindRequest) {
        let this = self.clone();
        // The pod's turns on its ResourceClaims, taken in placement order: a claim shared with
        // pods placed before it is written after theirs (the one that allocates it first).
        let namespace = &qp.info.spec.namespace;
        let keys: Vec<String> = super::prebind::claim_names(&qp.info.spec.resource_claims)
            .map(|name| format!("{namespace}/{name}"))
            .collect();
        let mut turns = self.shared.claims.take_turns(keys.iter().map(String::as_str));
        // KEP-5927's binding cycle span, a child of the batch's scheduling cycle; the API writes
        // (kube-client's request spans) are its descendants.
        let cycle_span = tracing::info_span!(
            "bindingCycle",
            k8s.pod.name = %qp.info.spec.name,
            k8s.pod.namespace = %qp.info.spec.namespace,
            k8s.pod.uid = %qp.info.spec.uid,
            k8s.scheduler.profile = bind.route.policy_label(),
            k8s.scheduler.selected_node = %node,
            k8s.scheduler.result = tracing::field::Empty,
        );
        let outcome = |result: &'static str| {
            tracing::Span::current().record("k8s.scheduler.result", result);
        };
        tasks.spawn(async move {
            let s = &this.shared;
            let uid = qp.info.spec.uid.clone();
            let pod = pod_ref(&qp.info.spec);
            let policy = bind.route.policy_label();
            // Permit: the binder runs no Permit plugin (a gang is held before its decision), so,
            // as kube-scheduler with none, every placed pod passes it at once.
            s.metrics.extension_point("Permit", "Success", policy, Duration::ZERO);
            // PreBind (kube observes it for every pod, with or without PreBind work).
            let prebind_started = Instant::now();
            let prebind_span = tracing::info_span!("preBind", k8s.scheduler.phase = "preBind");
            let prebind_failed = |this: &Self| {
                outcome("Error");
                this.shared
                    .metrics
                    .extension_point("PreBind", "Error", policy, prebind_started.elapsed());
            };
            if !bind.volumes.is_empty() {
                let span = tracing::info_span!(parent: &prebind_span, "prebind_volumes", pod = %pod.key(), %node, claims = bind.volumes.len());
                if this.prebind_volumes(&pod, &node, &bind.volumes, policy).instrument(span).await == PreBind::Stopped {
                    prebind_failed(&this);
                    return;
                }
            }
            let pod_claims = &qp.info.spec.resource_claims;
            // A pod with claims holds one of the `bind_concurrency` slots from its device PreBind
            // through its first Binding attempt: pods go through their writes in the order they
            // were placed, so a burst's first Bindings are not queued behind every other pod's
            // claim writes.
            let mut held: Option<tokio::sync::OwnedSemaphorePermit> = None;
            // The special claim for extended resources the PreBind created (deleted if the
            // Binding fails for good, as kube's Unreserve deletes it).
            let mut created = None;
            // A pod with extended resources backed by DRA has a special claim to create.
            let extended = bind.devices.iter().any(|a| a.extended_resource_claim.is_some());
            if !pod_claims.is_empty() || extended {
                // Waited for before taking a write slot: a pod whose turn has not come holds none.
                turns.wait().await;
                let Ok(permit) = Arc::clone(&s.binds).acquire_owned().await else {
                    return;
                };
                held = Some(permit);
                let span = tracing::info_span!(parent: &prebind_span, "prebind_devices", pod = %pod.key(), %node, claims = pod_claims.len());
                // The volumes' PreBind set the nomination already, if it had work.
                let nominate = bind.volumes.is_empty();
                if this
                    .prebind_devices(
                        &pod,
                        &node,
                        pod_claims,
                        &bind.devices,
                        nominate,
                        policy,
                        &mut created,
                        &mut turns,
                    )
                    .instrument(span)
                    .await
                    == PreBind::Stopped
                {
                    prebind_failed(&this);
                    return;
                }
                // Devices with binding conditions: waited for without a write slot.
                let keys = super::prebind::claim_keys(&pod, pod_claims, created.as_ref());
                if this.binding_conditions_pending(&keys) {
                    drop(held.take());
                    if this
                        .prebind_binding_conditions(&pod, &node, pod_claims, created.as_ref(), policy)
                        .await
                        == PreBind::Stopped
                    {
                        prebind_failed(&this);
                        return;
                    }
                }
            }
            s.metrics
                .extension_point("PreBind", "Success", policy, prebind_started.elapsed());
            drop(prebind_span);
            let mut retry_in = s.config.bind_retry_backoff;
            for attempt in 1..=s.config.bind_attempts.max(1) {
                // A pod deleted or bound meanwhile is no longer queued: nothing to bind.
                if !s.queue.lock().contains(&uid) {
                    if attempt == 1 {
                        let mut st = s.state.lock();
                        st.forget(&uid);
                        st.forget_storage(&uid);
                    }
                    return;
                }
                if !*s.leader.borrow() {
                    if attempt == 1 {
                        // Nothing was written: the pod goes back to the queue for whoever leads
                        // next, its reservation with it.
                        let mut st = s.state.lock();
                        st.forget(&uid);
                        st.forget_storage(&uid);
                        drop(st);
                        s.queue.lock().retry_now(&uid);
                        return;
                    }
                    // An earlier attempt may have gone through: the pod keeps its reservation and
                    // is not decided again; this binder tries the same node once it leads again
                    // (a Conflict then says the earlier attempt bound it), unless the watch shows
                    // the pod bound or deleted first.
                    if !this.lead_again(&uid).await {
                        return;
                    }
                }
                let permit = match held.take() {
                    Some(permit) => permit,
                    None => match Arc::clone(&s.binds).acquire_owned().await {
                        Ok(permit) => permit,
                        Err(_) => return,
                    },
                };
                this.rate_limit().await;
                let started = Instant::now();
                let extender = s.config.extenders.as_deref().and_then(|set| {
                    let spec = &qp.info.spec;
                    set.binder_for_names(
                        spec.containers
                            .iter()
                            .chain(&spec.init_containers)
                            .flat_map(|c| c.requests.keys().map(String::as_str)),
                    )
                });
                let bind_span = tracing::info_span!("bind", k8s.scheduler.phase = "bind", attempt);
                let result = async { match extender {
                    // The extender writes the Binding; an error (its own, or no answer) is retried
                    // on the same node like a failed write: the API server refuses a second
                    // Binding, and the watch drops the pod from the queue once it shows it bound.
                    Some(e) => e
                        .bind(&pod.namespace, &pod.name, &pod.uid, &node)
                        .await
                        .map_err(|err| ApiError::Other(format!("extender {}: {err}", e.config().url_prefix))),
                    None => s.api.bind(&pod, &node, &bind.annotations).await,
                } }
                .instrument(bind_span)
                .await;
                s.metrics.bind(&result, started.elapsed());
                let status = if result.is_ok() { "Success" } else { "Error" };
                s.metrics.extension_point("Bind", status, policy, started.elapsed());
                drop(permit);
                if matches!(result, Err(ApiError::Other(_))) {
                    s.experiments.bind_failed(&bind.route);
                }
                match result {
                    Ok(()) => {
                        outcome("Success");
                        let bound_at = std::time::SystemTime::now();
                        s.queue.lock().remove(&uid);
                        s.experiments.bound(&bind.route, &uid, &node);
                        s.metrics.attempt(policy, "scheduled", qp.popped_at.elapsed());
                        s.metrics.pod_bound(qp.first_seen.elapsed(), qp.attempts);
                        // The event waits for one of the few event slots (in bind order).
                        let Ok(_event) = Arc::clone(&s.events).acquire_owned().await else {
                            return;
                        };
                        this.rate_limit().await;
                        if let Err(e) = s.api.record_scheduled(&pod, &node, bound_at).await {
                            tracing::debug!(pod = %pod.key(), error = %e, "recording Scheduled event failed");
                        }
                        return;
                    }
                    Err(ApiError::Conflict(msg) | ApiError::NotFound(msg)) => {
                        // Already bound (the watch will show where; after an ambiguous failure
                        // possibly by our own earlier attempt) or gone (the watch will show the
                        // deletion): never retried. The reservation stays until the watch says
                        // which, so no batch in between can use room the pod may occupy.
                        tracing::debug!(pod = %pod.key(), %node, %msg, attempt, "bind conflict");
                        outcome("Conflict");
                        s.queue.lock().remove(&uid);
                        return;
                    }
                    Err(ApiError::Other(msg)) if attempt < s.config.bind_attempts => {
                        // The write may have gone through (a timeout or 5xx after the fact): retry
                        // the same node, keeping its reservation, so the pod is never counted on
                        // two nodes nor on none.
                        tracing::warn!(pod = %pod.key(), %node, %msg, attempt, "bind failed; retrying the same node");
                        tokio::time::sleep(retry_in).await;
                        retry_in = (retry_in * 2).min(Duration::from_secs(5));
                    }
                    Err(ApiError::Other(msg)) => {
                        // Out of attempts: after this long the watch would have shown a binding
                        // that went through, so the reservation goes and the pod is decided again.
                        tracing::warn!(pod = %pod.key(), %node, %msg, attempt, "bind failed; deciding again after backoff");
                        outcome("Error");
                        if let Some(claim) = &created {
                            this.delete_extended_claim(&pod, claim).await;
                        }
                        {
                            let mut st = s.state.lock();
                            st.forget(&uid);
                            st.forget_storage(&uid);
                        }
                        s.queue.lock().backoff(&uid, Instant::now());
                        s.metrics.attempt(policy, "error", qp.popped_at.elapsed());
                        s.wake.notify_one();
                        return;
                    }
                }
            }
        }.instrument(cycle_span));
    }

    /// Waits until this binder leads again (true), or until the pod is no longer queued (bound or
    /// deleted, as the watch shows) or the binder stops (false).
    async fn lead_again(&self, uid: &str) -> bool {
        let s = &self.shared;
        let mut leader = s.leader.clone();
        loop {
            if *leader.borrow_and_update() {
                return true;
            }
            if !s.queue.lock().contains(uid) || s.stopping.load(Ordering::Relaxed) {
                return false;
            }
            tokio::select! {
                r = leader.changed() => if r.is_err() { return false },
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }

    pub(super) async fn rate_limit(&self) {
        if let Some(l) = &self.shared.limiter {
            l.until_ready().await;
        }
    }
}
