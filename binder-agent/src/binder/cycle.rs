//! The scheduling cycle, as kube-scheduler's `pkg/scheduler/schedule_one.go` names its steps:
//! [`Binder::run`] is `ScheduleOne`'s loop (pop a batch, dispatch it), [`Binder::schedule_group`]
//! its `schedulingCycle` for a whole group at once (decide, then [`Binder::handle_decision`]:
//! `assume` every placement, then each pod's outcome: placed → the binding cycle (`bind.rs`),
//! nominated → preemption (`preemption.rs`), unschedulable or failed → reported as
//! `handleSchedulingFailure` reports it (`failures.rs`), no answer → backed off). Node partitions
//! (several batches in flight) are in `partitioned.rs`.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use placement_scheduler::proto;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument;

use super::decide::{as_is, Ask, DecideFailure, GroupDecision, PlannedDecision};
use super::partitioned::WholeClusterHold;
use super::{pod_ref, BindRequest, Binder, DecideError, Flow};
use crate::api::ClusterApi;
use crate::experiments::{Route, Routing, ShadowRoute};
use crate::queue::QueuedPod;
use crate::replicas::{HeldSnapshot, Replica};

/// The loop's own state between passes.
struct LoopState {
    leader: tokio::sync::watch::Receiver<bool>,
    /// Once the leader's sender is gone its value is final: the loop stops waiting for changes.
    leader_open: bool,
    /// Pods held for a decision on the whole cluster while decisions run on node partitions.
    hold: WholeClusterHold,
}

/// Runs one step of the loop: `Again` continues the loop, `Stop` breaks it.
macro_rules! step {
    ($flow:expr) => {
        match $flow {
            Flow::Go => {}
            Flow::Again => continue,
            Flow::Stop => break,
        }
    };
}

impl<A: ClusterApi> Binder<A> {
    /// Runs the loop (kube's `ScheduleOne`, over and over) until `shutdown` resolves, then stops
    /// taking work and waits for in-flight binds. Each pass: bind the preemptors whose victims
    /// are gone; while a follower, wait; decide the waiting preemptors that are due; with node
    /// partitions, take their turn (`partitioned.rs`); else wait for work, pop a batch and
    /// dispatch it.
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut tasks = JoinSet::new();
        let mut lp = LoopState {
            leader: self.shared.leader.clone(),
            leader_open: true,
            hold: WholeClusterHold::default(),
        };
        loop {
            while tasks.try_join_next().is_some() {}
            self.bind_preemptors_with_room(&mut tasks);
            step!(self.wait_for_leadership(&mut lp, &mut shutdown).await);
            step!(self.retry_waiting_preemptors(&mut shutdown, &mut tasks).await);
            let ready = self.shared.queue.lock().ready(Instant::now());
            let idle = ready == 0 || !self.shared.synced.load(Ordering::Relaxed);
            let limit = self.parallel_limit();
            step!(
                self.wait_for_partitions(&mut lp.hold, idle, ready, limit, &mut shutdown, &mut tasks)
                    .await
            );
            if idle {
                step!(self.wait_for_work(&mut lp, &mut shutdown).await);
            }
            step!(self.wait_for_the_batch_to_fill(ready, &mut shutdown).await);
            let batch = self.pop_batch();
            if !batch.is_empty() {
                self.dispatch_batch(batch, limit, &mut lp.hold, &mut tasks).await;
            }
        }
        self.stop(lp.hold, tasks).await;
    }

    /// The preemptors whose victims are all gone: bound on their node, or, with claims that may
    /// need a volume chosen there, decided again at once.
    fn bind_preemptors_with_room(&self, tasks: &mut JoinSet<()>) {
        let ready = self.shared.nominations.lock().take_ready();
        for (qp, node, bind) in ready {
            // Every victim is gone: the reserved room is the preemptor's.
            self.shared.metrics.nomination_ended("victims_gone");
            let claims = qp.info.spec.volumes.iter().any(|v| !v.claim_name.is_empty());
            if claims || !qp.info.spec.scheduling_group.is_empty() {
                // Its claims may need a volume chosen on that node (and written before the
                // Binding), or it belongs to a PodGroup, placed whole in a group cycle (which
                // writes the group's condition): it is decided again, as kube-scheduler runs a
                // scheduling cycle for every preemptor; the room is free for it now.
                let uid = &qp.info.spec.uid;
                self.shared.state.lock().forget(uid);
                self.shared.queue.lock().retry_now(uid);
                self.shared.wake.notify_one();
                continue;
            }
            self.spawn_binding_cycle(tasks, qp, node, bind);
        }
    }

    /// While this binder does not lead: waits for leadership (`Again` once it changes).
    async fn wait_for_leadership(
        &self,
        lp: &mut LoopState,
        shutdown: &mut (impl std::future::Future<Output = ()> + Unpin),
    ) -> Flow {
        if *lp.leader.borrow_and_update() {
            return Flow::Go;
        }
        tokio::select! {
            () = shutdown => Flow::Stop,
            r = lp.leader.changed(), if lp.leader_open => if r.is_err() { Flow::Stop } else { Flow::Again },
        }
    }

    /// Nothing ready (or the first lists not done): sleeps until the queue's or a nomination's
    /// next time, a wake-up, or a leadership change; then `Again`.
    async fn wait_for_work(
        &self,
        lp: &mut LoopState,
        shutdown: &mut (impl std::future::Future<Output = ()> + Unpin),
    ) -> Flow {
        let queue_wakeup = self.shared.queue.lock().next_wakeup();
        let nomination_wakeup = self.shared.nominations.lock().next_wakeup();
        let wakeup = match (queue_wakeup, nomination_wakeup) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let sleep = tokio::time::sleep_until(wakeup.unwrap_or_else(|| Instant::now() + Duration::from_secs(1)));
        tokio::select! {
            () = shutdown => return Flow::Stop,
            () = self.shared.wake.notified() => {},
            () = sleep => {},
            r = lp.leader.changed(), if lp.leader_open => lp.leader_open = r.is_ok(),
        }
        Flow::Again
    }

    /// Fewer pods ready than a batch holds: waits the batch window for more.
    async fn wait_for_the_batch_to_fill(
        &self,
        ready: usize,
        shutdown: &mut (impl std::future::Future<Output = ()> + Unpin),
    ) -> Flow {
        let window = self.shared.config.batch_window;
        if ready >= self.shared.config.batch_size || window.is_zero() {
            return Flow::Go;
        }
        tokio::select! {
            () = shutdown => Flow::Stop,
            () = tokio::time::sleep(window) => Flow::Go,
        }
    }

    /// The next batch from the queue (highest priority first).
    fn pop_batch(&self) -> Vec<QueuedPod> {
        let mut q = self.shared.queue.lock();
        let batch = q.pop_batch(self.shared.config.batch_size, Instant::now());
        self.update_queue_gauges(&q);
        batch
    }

    /// Dispatches a popped batch: decided now on the whole cluster, one batch at a time as
    /// kube-scheduler runs one cycle at a time, or, with node partitions, on a free one in a task
    /// of its own (`partitioned.rs`).
    async fn dispatch_batch(
        &self,
        batch: Vec<QueuedPod>,
        limit: usize,
        hold: &mut WholeClusterHold,
        tasks: &mut JoinSet<()>,
    ) {
        if limit >= 2 {
            self.dispatch_on_partitions(batch, limit, hold, tasks);
            return;
        }
        self.shared.metrics.batch("alone");
        let span = tracing::info_span!("schedulingCycle", pods = batch.len());
        self.schedule_batch(batch, tasks).instrument(span).await;
    }

    /// Stops taking work: held pods go back to the queue (the next leader, or this one, decides
    /// them), waiting PreBinds give up, and in-flight binds and shadows finish.
    async fn stop(&self, hold: WholeClusterHold, mut tasks: JoinSet<()>) {
        self.give_back_held(hold);
        tracing::info!(in_flight = tasks.len(), "binder stopping: finishing in-flight binds");
        self.shared.stopping.store(true, Ordering::Relaxed);
        self.shared.storage_seen.send_modify(|n| *n += 1);
        while tasks.join_next().await.is_some() {}
    }

    /// Decides one batch and starts its binds: the batch is split by experiment arm, and each
    /// group is decided in turn by its arm's policy and backend, so every group sees the
    /// placements of the groups before it (one shared state: no node is overcommitted).
    pub(super) async fn schedule_batch(&self, batch: Vec<QueuedPod>, tasks: &mut JoinSet<()>) {
        let s = &self.shared;
        let batch = self.gate_claims(batch, Instant::now());
        let batch = self.gate_gangs(batch, tasks, Instant::now());
        if batch.is_empty() {
            return;
        }
        s.metrics.batch_size.observe(batch.len() as f64);
        let routing = s.experiments.current();
        for (route, group) in routing.split(batch, &s.config.policy) {
            let span = route.span(group.len());
            self.schedule_group(&routing, route, group, tasks)
                .instrument(span)
                .await;
        }
    }

    /// kube-scheduler's `schedulingCycle`, for one group of pods at once: the group decided by its
    /// route's policy and backend, the shadow policies started on it off the critical path, then
    /// the decision acted on.
    async fn schedule_group(
        &self,
        routing: &Arc<Routing>,
        route: Route,
        batch: Vec<QueuedPod>,
        tasks: &mut JoinSet<()>,
    ) {
        let specs: Vec<&proto::Pod> = batch.iter().map(|p| &p.info.spec).collect();
        let decision = self.decide_group(routing, &route, &specs, &as_is).await;
        if let Some(decided) = decision.decided.as_ref().filter(|_| !routing.shadows.is_empty()) {
            let pods = decision.sent.iter().map(|&i| batch[i].info.spec.clone()).collect();
            self.spawn_shadows(routing, &route, pods, decided.response.placements.clone(), tasks);
        }
        self.handle_decision(&route, batch, decision, tasks);
    }

    /// Acts on a group's decision: the refused pods reported, every placement assumed
    /// ([`Binder::assume`]), then each pod's outcome handled ([`Binder::handle_outcome`]); a pod
    /// with no answer backs off.
    pub(super) fn handle_decision(
        &self,
        route: &Route,
        batch: Vec<QueuedPod>,
        decision: GroupDecision,
        tasks: &mut JoinSet<()>,
    ) {
        let s = &self.shared;
        let GroupDecision {
            decided,
            sent,
            refused,
            took,
        } = decision;
        self.observer().decided(route, took);
        let now = Instant::now();
        for (i, message) in &refused {
            self.report_invalid(&batch[*i], route, message, now, tasks);
        }
        let Some(mut decided) = decided else {
            self.back_off_undecided(&batch, route, now);
            return;
        };
        // The decided pods, each taken out as its placement is acted on: what is left at the end
        // had no answer.
        let mut asked = vec![false; batch.len()];
        for &i in &sent {
            asked[i] = true;
        }
        let mut by_uid: HashMap<String, QueuedPod> = batch
            .into_iter()
            .zip(asked)
            .filter(|(_, asked)| *asked)
            .map(|(p, _)| (p.info.spec.uid.clone(), p))
            .collect();
        let response = &mut decided.response;
        self.assume(response, &by_uid, &decided.replica, decided.version, decided.same_view);
        self.spawn_pod_group_conditions(std::mem::take(&mut response.pod_groups), tasks);
        let applied_policy = std::mem::take(&mut response.policy);
        for placement in std::mem::take(&mut response.placements) {
            let Some(qp) = by_uid.remove(placement.pod_uid.as_str()) else {
                continue;
            };
            self.handle_outcome(qp, placement, route, &applied_policy, now, tasks);
        }
        let mut q = s.queue.lock();
        for uid in by_uid.keys() {
            if q.place_of(uid) == Some(crate::queue::Place::InFlight) && !self.is_retrying(uid) {
                q.backoff(uid, now);
            }
        }
        self.update_queue_gauges(&q);
    }

    /// kube-scheduler's `assume`: every placed pod of a decision assumed on its node, at once
    /// under the state lock. When the replica stored its snapshot with the same placements
    /// assumed, that snapshot is kept as the one it holds: it reflects the state at the version it
    /// decided on plus these assumptions, so the next sync sends it only what else changed
    /// (nothing, when nothing did). `same_view` is false when the binder did not act on a
    /// placement the replica assumed (a node outside its partition): then the replica's snapshot
    /// is not the binder's and is not kept.
    fn assume(
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

    /// A pod the service refused as invalid: reported unschedulable with the service's message.
    fn report_invalid(&self, p: &QueuedPod, route: &Route, message: &str, now: Instant, tasks: &mut JoinSet<()>) {
        let s = &self.shared;
        if self.is_retrying(&p.info.spec.uid) {
            return;
        }
        s.queue.lock().unschedulable(&p.info.spec.uid, now);
        self.observer().refused(route, p);
        self.spawn_unschedulable(tasks, pod_ref(&p.info.spec), format!("invalid pod: {message}"));
    }

    /// No decision for the group (every replica failed, or none answered): its pods back off.
    fn back_off_undecided(&self, batch: &[QueuedPod], route: &Route, now: Instant) {
        let s = &self.shared;
        let mut q = s.queue.lock();
        let backed_off: Vec<&QueuedPod> = batch
            .iter()
            .filter(|p| {
                q.place_of(&p.info.spec.uid) == Some(crate::queue::Place::InFlight)
                    && !self.is_retrying(&p.info.spec.uid)
            })
            .collect();
        for p in &backed_off {
            q.backoff(&p.info.spec.uid, now);
        }
        self.update_queue_gauges(&q);
        drop(q);
        self.observer().undecided(route, backed_off.into_iter());
    }

    /// Handles one pod's outcome (its placement already assumed): placed, its binding cycle
    /// starts; nominated, its victims are preempted; unschedulable, it is reported; failed with an
    /// error, reported and backed off (kube's `handleSchedulingFailure`); no answer, backed off. A
    /// waiting preemptor decided again keeps waiting unless it fits.
    fn handle_outcome(
        &self,
        qp: QueuedPod,
        mut placement: proto::Placement,
        route: &Route,
        applied_policy: &str,
        now: Instant,
        tasks: &mut JoinSet<()>,
    ) {
        use proto::placement::Outcome;
        let s = &self.shared;
        let observer = self.observer();
        let retrying = self.is_retrying(&placement.pod_uid);
        if let Some(Outcome::Unschedulable(u)) = &placement.outcome {
            // The service ran DefaultPreemption's PostFilter for the pod (gangs do not preempt).
            if u.gang.is_empty() && !u.error {
                s.metrics.preemption_attempts.inc();
            }
        }
        let bind = |volumes, devices| BindRequest {
            annotations: route.annotations(applied_policy),
            route: route.clone(),
            volumes,
            devices,
        };
        match placement.outcome.take() {
            Some(Outcome::NodeName(node)) => {
                if retrying {
                    // A waiting preemptor fits now: it binds here; a nomination elsewhere is
                    // cleared, as its reservation is.
                    if let Some(n) = s.nominations.lock().cancel(&placement.pod_uid) {
                        s.metrics.nomination_ended("placed_on_retry");
                        tracing::info!(pod = %qp.info.key(), nominated = %n.node, %node, "nominated pod fits on retry");
                        if n.node != node {
                            self.spawn_clear_nomination(tasks, pod_ref(&qp.info.spec));
                        }
                    }
                }
                let volumes = std::mem::take(&mut placement.claim_bindings);
                let devices = std::mem::take(&mut placement.claim_allocations);
                self.spawn_binding_cycle(tasks, qp, node, bind(volumes, devices));
            }
            Some(Outcome::Unschedulable(u)) if retrying => {
                // Still no room: no new preemption while its victims terminate.
                observer.still_waiting(route, &qp);
                self.keep_waiting(tasks, &placement.pod_uid, Some(&u.message), now);
            }
            None if retrying => {}
            Some(Outcome::Unschedulable(u)) if u.error => {
                // Scheduling failed with an error (an extender that is not ignorable): as
                // kube-scheduler, the pod is retried after its backoff, not left for a cluster
                // event, and its condition's reason is SchedulerError.
                s.queue.lock().backoff(&qp.info.spec.uid, now);
                observer.failed(route, &qp);
                self.spawn_scheduler_error(tasks, pod_ref(&qp.info.spec), u.message);
            }
            Some(Outcome::Unschedulable(mut u)) if !u.nominated_node_name.is_empty() => {
                if let Some(claim) = u.deallocate_claim.take() {
                    // kube's DynamicResources PostFilter wrote it before DefaultPreemption ran.
                    self.spawn_deallocation(tasks, pod_ref(&qp.info.spec), claim);
                }
                observer.unschedulable(route, &qp);
                self.start_preemption(tasks, qp, u, bind(Vec::new(), Vec::new()));
            }
            Some(Outcome::Unschedulable(mut u)) => {
                s.queue.lock().unschedulable(&qp.info.spec.uid, now);
                observer.unschedulable(route, &qp);
                match u.deallocate_claim.take() {
                    Some(claim) => {
                        self.spawn_unschedulable_deallocating(tasks, pod_ref(&qp.info.spec), claim, u.message)
                    }
                    None => self.spawn_unschedulable(tasks, pod_ref(&qp.info.spec), u.message),
                }
            }
            None => {
                s.queue.lock().backoff(&qp.info.spec.uid, now);
                observer.failed(route, &qp);
            }
        }
    }

    /// Starts the shadow policies on a decided group off the critical path: each shadow's replica
    /// is picked and its sync planned now, against the state the primary decided on (its
    /// placements not yet assumed), then decided in a task of its own, so a slow shadow backend
    /// never holds the primary's binds; its verdicts are compared with the placements acted on.
    fn spawn_shadows(
        &self,
        routing: &Routing,
        route: &Route,
        pods: Vec<proto::Pod>,
        primary: Vec<proto::Placement>,
        tasks: &mut JoinSet<()>,
    ) {
        let s = &self.shared;
        let planned: Vec<(ShadowRoute, Result<PlannedDecision, DecideFailure>)> = routing
            .shadows
            .iter()
            .map(|shadow| {
                let planned = match s.pools.of(routing, shadow.backend) {
                    Some(pool) => self.plan_decision(&pool, !shadow.backend.is_main()),
                    None => Err(DecideFailure::NoDecision(DecideError::BackendOut)),
                };
                (shadow.clone(), planned)
            })
            .collect();
        let this = self.clone();
        let route = route.clone();
        tasks.spawn(
            async move {
                let n = pods.len();
                let verdicts = futures::future::join_all(planned.into_iter().map(|(shadow, planned)| {
                    let (this, pods) = (&this, &pods);
                    async move {
                        let ask = Ask {
                            policy: &shadow.policy,
                            pods: pods.iter().collect(),
                            as_sent: &as_is,
                        };
                        let verdict = match planned {
                            Ok(planned) => this
                                .decide_planned(planned, &ask, !shadow.backend.is_main())
                                .await
                                .map(|d| d.response),
                            Err(e) => Err(e),
                        };
                        (shadow, verdict)
                    }
                }))
                .await;
                let primary: HashMap<&str, &proto::Placement> =
                    primary.iter().map(|p| (p.pod_uid.as_str(), p)).collect();
                let observer = this.observer();
                for (shadow, verdict) in verdicts {
                    match verdict {
                        Ok(r) => observer.shadow_compared(&route, &shadow, &primary, &r.placements),
                        Err(error) => {
                            tracing::debug!(shadow = %shadow.name, %error, "shadow policy failed");
                            observer.shadow_failed(&route, &shadow, n);
                        }
                    }
                }
            }
            .instrument(tracing::info_span!("shadows")),
        );
    }
}
