//! The binding cycle, as kube-scheduler's `pkg/scheduler/schedule_one.go` names its steps:
//! [`Binder::binding_cycle`] (`bindingCycle`) runs Permit (`WaitOnPermit`), PreBind
//! (`RunPreBindPlugins`: the pod's volumes and devices, `prebind.rs`), then, per attempt, waits to
//! lead, binds (`bind`: an extender's `bindVerb`, `extendersBinding`, or the Binding) and on
//! success records the `Scheduled` event (`finishBinding`); a Binding that fails for good goes to
//! [`Binder::handle_binding_cycle_error`] (`handleBindingCycleError`). Ambiguous errors are retried
//! on the same node; API writes are rate limited.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument;

use super::prebind::PreBind;
use super::{pod_ref, BindRequest, Binder};
use crate::api::{ApiError, ClaimRef, ClusterApi, PodRef};
use crate::claim_cache::ClaimTurns;
use crate::queue::QueuedPod;

/// One pod's binding cycle: the pod, its node, and what its steps hand on to each other.
struct BindingCycle {
    qp: QueuedPod,
    pod: PodRef,
    node: String,
    bind: BindRequest,
    /// The pod's turns on its ResourceClaims, taken in placement order.
    turns: ClaimTurns,
    /// A write slot a pod with claims holds from its device PreBind through its first Binding
    /// attempt.
    held: Option<OwnedSemaphorePermit>,
    /// The special claim for extended resources the PreBind created (deleted if the Binding
    /// fails for good, as kube's Unreserve deletes it).
    created: Option<ClaimRef>,
}

/// What the wait before a Binding attempt found.
enum BeforeBind {
    /// Bind now.
    Bind,
    /// Nothing to bind: the pod is gone, bound, back in the queue, or the binder stops.
    Done,
}

/// Records the binding cycle's result on its span.
fn outcome(result: &'static str) {
    tracing::Span::current().record("k8s.scheduler.result", result);
}

impl<A: ClusterApi> Binder<A> {
    /// Starts a placed pod's binding cycle in a task of its own (kube runs `bindingCycle` in a
    /// goroutine): its turns on its claims are taken now, in placement order.
    pub(super) fn spawn_binding_cycle(&self, tasks: &mut JoinSet<()>, qp: QueuedPod, node: String, bind: BindRequest) {
        let this = self.clone();
        // The pod's turns on its ResourceClaims, taken in placement order: a claim shared with
        // pods placed before it is written after theirs (the one that allocates it first).
        let namespace = &qp.info.spec.namespace;
        let keys: Vec<String> = super::prebind::claim_names(&qp.info.spec.resource_claims)
            .map(|name| format!("{namespace}/{name}"))
            .collect();
        let turns = self.shared.claims.take_turns(keys.iter().map(String::as_str));
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
        let cycle = BindingCycle {
            pod: pod_ref(&qp.info.spec),
            qp,
            node,
            bind,
            turns,
            held: None,
            created: None,
        };
        tasks.spawn(async move { this.binding_cycle(cycle).await }.instrument(cycle_span));
    }

    /// kube's `bindingCycle`: Permit, PreBind, then the Binding, retried on the same node through
    /// ambiguous errors.
    async fn binding_cycle(&self, mut cycle: BindingCycle) {
        self.permit(&cycle);
        if self.pre_bind(&mut cycle).await == PreBind::Stopped {
            return;
        }
        let s = &self.shared;
        let mut retry_in = s.config.bind_retry_backoff;
        for attempt in 1..=s.config.bind_attempts.max(1) {
            if let BeforeBind::Done = self.wait_to_bind(&cycle, attempt).await {
                return;
            }
            let result = match self.bind(&mut cycle, attempt).await {
                Some(result) => result,
                None => return,
            };
            let (pod, node) = (&cycle.pod, &cycle.node);
            match result {
                Ok(()) => {
                    outcome("Success");
                    self.on_bound(&cycle).await;
                    return;
                }
                Err(ApiError::Conflict(msg) | ApiError::NotFound(msg)) => {
                    // Already bound (the watch will show where; after an ambiguous failure
                    // possibly by our own earlier attempt) or gone (the watch will show the
                    // deletion): never retried. The reservation stays until the watch says
                    // which, so no batch in between can use room the pod may occupy.
                    tracing::debug!(pod = %pod.key(), %node, %msg, attempt, "bind conflict");
                    outcome("Conflict");
                    s.queue.lock().remove(&cycle.pod.uid);
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
                    self.handle_binding_cycle_error(&cycle).await;
                    return;
                }
            }
        }
    }

    /// Permit (kube's `WaitOnPermit`): the binder runs no Permit plugin (a gang is held before its
    /// decision), so, as kube-scheduler with none, every placed pod passes it at once.
    fn permit(&self, cycle: &BindingCycle) {
        let policy = cycle.bind.route.policy_label();
        self.shared
            .metrics
            .extension_point("Permit", "Success", policy, Duration::ZERO);
    }

    /// PreBind (kube's `RunPreBindPlugins`, observed for every pod, with or without PreBind
    /// work): VolumeBinding's (the claim bindings chosen, written and waited for), then
    /// DynamicResources' (the allocations and reservations written, the special claim created,
    /// the devices' binding conditions waited for). `Stopped`: the pod is handled already.
    async fn pre_bind(&self, cycle: &mut BindingCycle) -> PreBind {
        let s = &self.shared;
        let BindingCycle {
            qp,
            pod,
            node,
            bind,
            turns,
            held,
            created,
        } = cycle;
        let policy = bind.route.policy_label();
        let prebind_started = Instant::now();
        let prebind_span = tracing::info_span!("preBind", k8s.scheduler.phase = "preBind");
        let prebind_failed = || {
            outcome("Error");
            s.metrics
                .extension_point("PreBind", "Error", policy, prebind_started.elapsed());
            PreBind::Stopped
        };
        if !bind.volumes.is_empty() {
            let span = tracing::info_span!(parent: &prebind_span, "prebind_volumes", pod = %pod.key(), %node, claims = bind.volumes.len());
            if self
                .prebind_volumes(pod, node, &bind.volumes, policy)
                .instrument(span)
                .await
                == PreBind::Stopped
            {
                return prebind_failed();
            }
        }
        let pod_claims = &qp.info.spec.resource_claims;
        // A pod with extended resources backed by DRA has a special claim to create.
        let extended = bind.devices.iter().any(|a| a.extended_resource_claim.is_some());
        if !pod_claims.is_empty() || extended {
            // A pod with claims holds one of the `bind_concurrency` slots from its device PreBind
            // through its first Binding attempt: pods go through their writes in the order they
            // were placed, so a burst's first Bindings are not queued behind every other pod's
            // claim writes. Its turn is waited for before taking a write slot: a pod whose turn
            // has not come holds none.
            turns.wait().await;
            let Ok(permit) = Arc::clone(&s.binds).acquire_owned().await else {
                return PreBind::Stopped;
            };
            *held = Some(permit);
            let span = tracing::info_span!(parent: &prebind_span, "prebind_devices", pod = %pod.key(), %node, claims = pod_claims.len());
            // The volumes' PreBind set the nomination already, if it had work.
            let nominate = bind.volumes.is_empty();
            if self
                .prebind_devices(pod, node, pod_claims, &bind.devices, nominate, policy, created, turns)
                .instrument(span)
                .await
                == PreBind::Stopped
            {
                return prebind_failed();
            }
            // Devices with binding conditions: waited for without a write slot.
            let keys = super::prebind::claim_keys(pod, pod_claims, created.as_ref());
            if self.binding_conditions_pending(&keys) {
                drop(held.take());
                if self
                    .prebind_binding_conditions(pod, node, pod_claims, created.as_ref(), policy)
                    .await
                    == PreBind::Stopped
                {
                    return prebind_failed();
                }
            }
        }
        s.metrics
            .extension_point("PreBind", "Success", policy, prebind_started.elapsed());
        PreBind::Bound
    }

    /// Before a Binding attempt: a pod deleted or bound meanwhile has nothing to bind; while
    /// this binder does not lead, the first attempt gives the pod back to the queue (nothing was
    /// written), a later one waits to lead again (an earlier attempt may have gone through).
    async fn wait_to_bind(&self, cycle: &BindingCycle, attempt: u32) -> BeforeBind {
        let s = &self.shared;
        let uid = &cycle.pod.uid;
        // A pod deleted or bound meanwhile is no longer queued: nothing to bind.
        if !s.queue.lock().contains(uid) {
            if attempt == 1 {
                let mut st = s.state.lock();
                st.forget(uid);
                st.forget_storage(uid);
            }
            return BeforeBind::Done;
        }
        if !*s.leader.borrow() {
            if attempt == 1 {
                // Nothing was written: the pod goes back to the queue for whoever leads
                // next, its reservation with it.
                let mut st = s.state.lock();
                st.forget(uid);
                st.forget_storage(uid);
                drop(st);
                s.queue.lock().retry_now(uid);
                return BeforeBind::Done;
            }
            // An earlier attempt may have gone through: the pod keeps its reservation and
            // is not decided again; this binder tries the same node once it leads again
            // (a Conflict then says the earlier attempt bound it), unless the watch shows
            // the pod bound or deleted first.
            if !self.lead_again(uid).await {
                return BeforeBind::Done;
            }
        }
        BeforeBind::Bind
    }

    /// kube's `bind`: the pod bound to its node by the extender interested in it
    /// (`extendersBinding`) or by writing the Binding, in a write slot and rate limited; `None`
    /// when the binder stops before a slot frees.
    async fn bind(&self, cycle: &mut BindingCycle, attempt: u32) -> Option<Result<(), ApiError>> {
        let s = &self.shared;
        let permit = match cycle.held.take() {
            Some(permit) => permit,
            None => Arc::clone(&s.binds).acquire_owned().await.ok()?,
        };
        self.rate_limit().await;
        let started = Instant::now();
        let (pod, node) = (&cycle.pod, &cycle.node);
        let extender = s.config.extenders.as_deref().and_then(|set| {
            let spec = &cycle.qp.info.spec;
            set.binder_for_names(
                spec.containers
                    .iter()
                    .chain(&spec.init_containers)
                    .flat_map(|c| c.requests.keys().map(String::as_str)),
            )
        });
        let bind_span = tracing::info_span!("bind", k8s.scheduler.phase = "bind", attempt);
        let result = async {
            match extender {
                // The extender writes the Binding; an error (its own, or no answer) is retried
                // on the same node like a failed write: the API server refuses a second
                // Binding, and the watch drops the pod from the queue once it shows it bound.
                Some(e) => e
                    .bind(&pod.namespace, &pod.name, &pod.uid, node)
                    .await
                    .map_err(|err| ApiError::Other(format!("extender {}: {err}", e.config().url_prefix))),
                None => s.api.bind(pod, node, &cycle.bind.annotations).await,
            }
        }
        .instrument(bind_span)
        .await;
        s.metrics.bind(&result, started.elapsed());
        let status = if result.is_ok() { "Success" } else { "Error" };
        s.metrics
            .extension_point("Bind", status, cycle.bind.route.policy_label(), started.elapsed());
        drop(permit);
        if matches!(result, Err(ApiError::Other(_))) {
            self.observer().bind_failed(&cycle.bind.route);
        }
        Some(result)
    }

    /// The pod is bound (kube's `finishBinding`): out of the queue, observed, and its `Scheduled`
    /// event recorded once one of the few event slots frees (in bind order).
    async fn on_bound(&self, cycle: &BindingCycle) {
        let s = &self.shared;
        let bound_at = std::time::SystemTime::now();
        s.queue.lock().remove(&cycle.pod.uid);
        self.observer().bound(&cycle.bind.route, &cycle.qp, &cycle.node);
        let Ok(_event) = Arc::clone(&s.events).acquire_owned().await else {
            return;
        };
        self.rate_limit().await;
        if let Err(e) = s.api.record_scheduled(&cycle.pod, &cycle.node, bound_at).await {
            tracing::debug!(pod = %cycle.pod.key(), error = %e, "recording Scheduled event failed");
        }
    }

    /// kube's `handleBindingCycleError`: the Binding failed for good, so the special claim the
    /// PreBind created is deleted (Unreserve), the reservation goes (`ForgetPod`) and the pod is
    /// decided again after its backoff.
    async fn handle_binding_cycle_error(&self, cycle: &BindingCycle) {
        let s = &self.shared;
        let uid = &cycle.pod.uid;
        outcome("Error");
        if let Some(claim) = &cycle.created {
            self.delete_extended_claim(&cycle.pod, claim).await;
        }
        {
            let mut st = s.state.lock();
            st.forget(uid);
            st.forget_storage(uid);
        }
        s.queue.lock().backoff(uid, Instant::now());
        self.observer().bind_gave_up(&cycle.bind.route, &cycle.qp);
        s.wake.notify_one();
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
