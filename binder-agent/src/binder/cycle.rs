//! The scheduling cycle (kube-scheduler's `ScheduleOne` and `schedulingCycle`): the loop that pops
//! batches, decides them one at a time on the whole cluster or several at once on node
//! partitions, and dispatches each pod's outcome (bind, nominate, report, back off).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use placement_scheduler::proto;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tonic::Code;
use tracing::Instrument;

use super::decide::Decided;
use super::{partitions, pod_ref, BindRequest, Binder};
use crate::api::ClusterApi;
use crate::experiments::{Route, Routing};
use crate::partitions::{alone_reason, Partition};
use crate::queue::QueuedPod;

/// A node partition held by a decision in flight: given back, and the loop woken, when dropped.
struct HeldPartition<'a, A> {
    binder: &'a Binder<A>,
    partition: Partition,
}

impl<A> Drop for HeldPartition<'_, A> {
    fn drop(&mut self) {
        let s = &self.binder.shared;
        let in_flight = {
            let mut slots = s.slots.lock();
            slots.give_back(self.partition);
            slots.in_flight()
        };
        s.metrics.batches_in_flight.set(in_flight as i64);
        s.wake.notify_one();
    }
}

/// What a group's decision gave.
struct GroupDecision {
    /// The replica's answer, if any.
    decided: Option<Decided>,
    /// The indices in the group of the pods it was asked about (all but the refused ones).
    sent: Vec<usize>,
    /// Pods the service refused as invalid: index in the group, and the service's message.
    refused: Vec<(usize, String)>,
}

/// Longest a pod that must be decided on the whole cluster waits for others like it while
/// decisions run in partitions.
const ALONE_HOLD: Duration = Duration::from_millis(200);

/// The index of the pod named by an INVALID_ARGUMENT field path like `pods[3].containers…`.
fn invalid_pod_index(status: &tonic::Status) -> Option<usize> {
    if status.code() != Code::InvalidArgument {
        return None;
    }
    let rest = status.message().strip_prefix("pods[")?;
    rest[..rest.find(']')?].parse().ok()
}

/// How the loop goes on after a step that may wait.
enum Flow {
    /// On with this pass.
    Go,
    /// Back to the top of the loop.
    Again,
    /// Stop: shutdown, or leadership can never come back.
    Stop,
}

/// The loop's own state between passes.
struct LoopState {
    leader: tokio::sync::watch::Receiver<bool>,
    /// Once the leader's sender is gone its value is final: the loop stops waiting for changes.
    leader_open: bool,
    /// Pods popped while decisions run in partitions that must be decided alone on the whole
    /// cluster, gathered so that partitioned decisions stop for them once per batch.
    held: Vec<QueuedPod>,
    /// When the oldest of them was held.
    held_since: Option<Instant>,
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
    /// Runs the loop until `shutdown` resolves, then stops taking work and waits for in-flight
    /// binds. Each pass: bind the preemptors whose victims are gone; while a follower, wait; decide
    /// the waiting preemptors that are due; decide the pods held for the whole cluster once due;
    /// else wait for work, pop a batch and decide it (on the whole cluster, or on a partition).
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut tasks = JoinSet::new();
        let mut lp = LoopState {
            leader: self.shared.leader.clone(),
            leader_open: true,
            held: Vec::new(),
            held_since: None,
        };
        loop {
            while tasks.try_join_next().is_some() {}
            self.bind_preemptors_with_room(&mut tasks);
            step!(self.wait_for_leadership(&mut lp, &mut shutdown).await);
            if self.shared.synced.load(Ordering::Relaxed) {
                step!(self.wait_for_partitions_if_a_preemptor_is_due(&mut shutdown).await);
                if self.retry_waiting_preemptors(&mut tasks).await {
                    continue;
                }
            }
            let ready = self.shared.queue.lock().ready(Instant::now());
            let limit = self.parallel_limit();
            if self.held_pods_due(&lp, ready, limit) {
                step!(self.wait_for_partitions_to_drain(&mut shutdown).await);
                self.decide_held_pods(&mut lp, &mut tasks).await;
                continue;
            }
            if ready == 0 || !self.shared.synced.load(Ordering::Relaxed) {
                step!(self.wait_for_work(&mut lp, &mut shutdown).await);
            }
            if limit >= 2 && !self.shared.slots.lock().can_take(limit) {
                step!(self.wait_for_a_partition(&lp, &mut shutdown).await);
            }
            step!(self.wait_for_the_batch_to_fill(ready, &mut shutdown).await);
            let batch = self.pop_batch();
            if !batch.is_empty() {
                self.schedule_or_partition(batch, limit, &mut lp, &mut tasks).await;
            }
        }
        self.stop(lp.held, tasks).await;
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
            self.spawn_bind(tasks, qp, node, bind);
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

    /// A waiting preemptor is decided again on the whole cluster, with no partitioned decision in
    /// flight: while one is due, new ones wait for those in flight to end.
    async fn wait_for_partitions_if_a_preemptor_is_due(
        &self,
        shutdown: &mut (impl std::future::Future<Output = ()> + Unpin),
    ) -> Flow {
        let due = self
            .shared
            .nominations
            .lock()
            .next_wakeup()
            .is_some_and(|t| t <= Instant::now());
        if !due || self.in_flight() == 0 {
            return Flow::Go;
        }
        tokio::select! {
            () = shutdown => Flow::Stop,
            () = self.shared.wake.notified() => Flow::Again,
        }
    }

    /// Pods held for a decision on the whole cluster go once a batch of them gathered, nothing
    /// else is ready, the oldest waited [`ALONE_HOLD`], or decisions are no longer partitioned.
    fn held_pods_due(&self, lp: &LoopState, ready: usize, limit: usize) -> bool {
        lp.held_since.is_some_and(|since| {
            limit < 2 || lp.held.len() >= self.shared.config.batch_size || ready == 0 || since.elapsed() >= ALONE_HOLD
        })
    }

    /// Waits for every partitioned decision in flight to end.
    async fn wait_for_partitions_to_drain(
        &self,
        shutdown: &mut (impl std::future::Future<Output = ()> + Unpin),
    ) -> Flow {
        while self.in_flight() > 0 {
            tokio::select! {
                () = &mut *shutdown => return Flow::Stop,
                () = self.shared.wake.notified() => {},
            }
        }
        Flow::Go
    }

    /// Decides the held pods (those still waiting) alone on the whole cluster.
    async fn decide_held_pods(&self, lp: &mut LoopState, tasks: &mut JoinSet<()>) {
        lp.held_since = None;
        let alone = self.still_in_flight(std::mem::take(&mut lp.held));
        if !alone.is_empty() {
            self.shared.metrics.batch("alone");
            let span = tracing::info_span!("schedulingCycle", pods = alone.len());
            self.schedule_batch(alone, tasks).instrument(span).await;
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

    /// The partition whose turn it is, or as many as replicas are ready, are being decided: waits
    /// for one, or for the held pods' time; then `Again`.
    async fn wait_for_a_partition(
        &self,
        lp: &LoopState,
        shutdown: &mut (impl std::future::Future<Output = ()> + Unpin),
    ) -> Flow {
        let hold_ends = tokio::time::sleep_until(
            lp.held_since
                .map_or_else(|| Instant::now() + Duration::from_secs(1), |since| since + ALONE_HOLD),
        );
        tokio::select! {
            () = shutdown => return Flow::Stop,
            () = self.shared.wake.notified() => {},
            () = hold_ends => {},
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

    /// Decides `batch` on the whole cluster, or, with partitions, sends the pods a partition may
    /// decide to one and holds the others for a decision alone.
    async fn schedule_or_partition(
        &self,
        batch: Vec<QueuedPod>,
        limit: usize,
        lp: &mut LoopState,
        tasks: &mut JoinSet<()>,
    ) {
        if limit < 2 {
            self.shared.metrics.batch("alone");
            let span = tracing::info_span!("schedulingCycle", pods = batch.len());
            self.schedule_batch(batch, tasks).instrument(span).await;
            return;
        }
        let (alone, together) = self.split_alone(batch);
        if !together.is_empty() {
            self.spawn_partitioned(together, limit, tasks);
        }
        if !alone.is_empty() {
            lp.held_since.get_or_insert_with(Instant::now);
            lp.held.extend(alone);
        }
    }

    /// Stops taking work: held pods go back to the queue (the next leader, or this one, decides
    /// them), waiting PreBinds give up, and in-flight binds finish.
    async fn stop(&self, held: Vec<QueuedPod>, mut tasks: JoinSet<()>) {
        {
            let mut q = self.shared.queue.lock();
            for p in &held {
                q.retry_now(&p.info.spec.uid);
            }
        }
        tracing::info!(in_flight = tasks.len(), "binder stopping: finishing in-flight binds");
        self.shared.stopping.store(true, Ordering::Relaxed);
        self.shared.storage_seen.send_modify(|n| *n += 1);
        while tasks.join_next().await.is_some() {}
    }

    /// The held pods still waiting for a decision (not deleted or bound meanwhile).
    fn still_in_flight(&self, held: Vec<QueuedPod>) -> Vec<QueuedPod> {
        let q = self.shared.queue.lock();
        held.into_iter()
            .filter(|p| q.place_of(&p.info.spec.uid) == Some(crate::queue::Place::InFlight))
            .collect()
    }

    /// Decisions in flight on node partitions.
    fn in_flight(&self) -> usize {
        self.shared.slots.lock().in_flight()
    }

    /// How many batches may be decided at once on node partitions now: the configured number,
    /// at most the ready replicas; 0 (one batch at a time on the whole cluster) when fewer than
    /// two replicas are ready or an experiment or shadow policy is active.
    fn parallel_limit(&self) -> usize {
        let s = &self.shared;
        if partitions(&s.config) < 2 {
            return 0;
        }
        if s.experiments.active() {
            return 0;
        }
        match s.pools.main().ready_count() {
            ready if ready >= 2 => ready.min(s.config.batches_in_flight),
            _ => 0,
        }
    }

    /// Splits a batch into the pods decided alone on the whole cluster ([`alone_reason`], or sent
    /// back by a partition before) and those a partition may decide.
    fn split_alone(&self, batch: Vec<QueuedPod>) -> (Vec<QueuedPod>, Vec<QueuedPod>) {
        // Pods asking for an extended resource a DeviceClass backs are decided alone, as pods
        // with claims are.
        let backed = crate::partitions::dra_extended_resources(self.shared.state.lock().device_classes().iter());
        let mut sent_back = self.shared.decide_alone_next.lock();
        let (alone, together): (Vec<QueuedPod>, Vec<QueuedPod>) = batch.into_iter().partition(|p| {
            sent_back.contains(&p.info.spec.uid)
                || alone_reason(&p.info.spec).is_some()
                || crate::partitions::asks_dra_extended(&p.info.spec, &backed)
        });
        for p in &alone {
            sent_back.remove(&p.info.spec.uid);
        }
        (alone, together)
    }

    /// Decides `batch` on a free node partition in a task of its own; the partition is given
    /// back once its placements are assumed (its binds then go on in the same task).
    fn spawn_partitioned(&self, batch: Vec<QueuedPod>, limit: usize, tasks: &mut JoinSet<()>) {
        let Some(partition) = self.shared.slots.lock().take(limit) else {
            // Not reached: the loop waits for the partition whose turn it is before it pops.
            let mut q = self.shared.queue.lock();
            for p in &batch {
                q.retry_now(&p.info.spec.uid);
            }
            return;
        };
        self.shared.metrics.batches_in_flight.set(self.in_flight() as i64);
        self.shared.metrics.batch("partition");
        let this = self.clone();
        let span = tracing::info_span!("schedulingCycle", pods = batch.len(), partition = partition.index);
        tasks.spawn(
            async move {
                let mut binds = JoinSet::new();
                {
                    let _held = HeldPartition {
                        binder: &this,
                        partition,
                    };
                    this.schedule_partition(batch, partition, &mut binds).await;
                }
                while binds.join_next().await.is_some() {}
            }
            .instrument(span),
        );
    }

    /// Decides one batch on one node partition (no experiment or shadow is active then).
    async fn schedule_partition(&self, batch: Vec<QueuedPod>, partition: Partition, tasks: &mut JoinSet<()>) {
        let s = &self.shared;
        s.metrics.batch_size.observe(batch.len() as f64);
        let routing = s.experiments.current();
        let route = routing.route(&batch[0].info, &s.config.policy);
        self.schedule_group(&routing, route, batch, tasks, Some(partition))
            .await;
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
            self.schedule_group(&routing, route, group, tasks, None)
                .instrument(span)
                .await;
        }
    }

    /// Decides one group of pods with its route's policy and backend (kube-scheduler's
    /// `schedulingCycle`, for the whole group at once), assumes the placements, and dispatches
    /// each pod's outcome.
    async fn schedule_group(
        &self,
        routing: &Arc<Routing>,
        route: Route,
        batch: Vec<QueuedPod>,
        tasks: &mut JoinSet<()>,
        partition: Option<Partition>,
    ) {
        let s = &self.shared;
        let started = Instant::now();
        let GroupDecision { decided, sent, refused } = self.decide_group(routing, &route, &batch, partition).await;
        let took = started.elapsed();
        s.metrics.decision_duration.observe(took.as_secs_f64());
        s.experiments.decided(&route, took);
        let now = Instant::now();
        for (i, message) in &refused {
            self.report_invalid(&batch[*i], &route, message, now, tasks);
        }
        let Some(Decided {
            mut response,
            replica,
            version,
        }) = decided
        else {
            self.back_off_undecided(&batch, &route, now);
            return;
        };
        if !routing.shadows.is_empty() {
            let pods: Vec<&proto::Pod> = sent.iter().map(|&i| &batch[i].info.spec).collect();
            self.run_shadows(routing, &route, &pods, &response)
                .instrument(tracing::info_span!("shadows"))
                .await;
        }
        let (sent_back, outside) = match partition {
            Some(p) => self.partition_returns(p, &mut response),
            None => (HashSet::new(), false),
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
        self.assume_placed(&response, &by_uid, &replica, version, !outside);
        self.spawn_pod_group_conditions(std::mem::take(&mut response.pod_groups), tasks);
        let applied_policy = std::mem::take(&mut response.policy);
        for placement in response.placements {
            let Some(qp) = by_uid.remove(placement.pod_uid.as_str()) else {
                continue;
            };
            let returned = sent_back.contains(&placement.pod_uid);
            self.dispatch(qp, placement, &route, &applied_policy, returned, now, tasks);
        }
        let mut q = s.queue.lock();
        for uid in by_uid.keys() {
            if q.place_of(uid) == Some(crate::queue::Place::InFlight) && !self.is_retrying(uid) {
                q.backoff(uid, now);
            }
        }
        self.update_queue_gauges(&q);
    }

    /// Asks the route's backend to place the group; a pod the service refuses as invalid is
    /// taken out and the rest asked again.
    async fn decide_group(
        &self,
        routing: &Routing,
        route: &Route,
        batch: &[QueuedPod],
        partition: Option<Partition>,
    ) -> GroupDecision {
        let pool = self.shared.pools.of(routing, route.backend);
        let fail_fast = route.backend != 0;
        let mut sent: Vec<usize> = (0..batch.len()).collect();
        let mut refused: Vec<(usize, String)> = Vec::new();
        let decided = loop {
            let Some(pool) = &pool else {
                // A reload replaced the routing and dropped this backend meanwhile: the pods
                // back off and are routed again.
                break None;
            };
            let pods: Vec<&proto::Pod> = sent.iter().map(|&i| &batch[i].info.spec).collect();
            match self
                .decide(pool, &route.policy, &pods, fail_fast, true, partition)
                .await
            {
                Ok(r) => break Some(r),
                Err(Ok(status)) => {
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
                Err(Err(e)) => {
                    tracing::warn!(error = %e, experiment = %route.experiment, arm = %route.arm, "no decision");
                    break None;
                }
            }
        };
        GroupDecision { decided, sent, refused }
    }

    /// A pod the service refused as invalid: reported unschedulable with the service's message.
    fn report_invalid(&self, p: &QueuedPod, route: &Route, message: &str, now: Instant, tasks: &mut JoinSet<()>) {
        let s = &self.shared;
        if self.is_retrying(&p.info.spec.uid) {
            return;
        }
        s.queue.lock().unschedulable(&p.info.spec.uid, now);
        s.metrics.attempt(route.policy_label(), "error", p.popped_at.elapsed());
        self.spawn_unschedulable(tasks, pod_ref(&p.info.spec), format!("invalid pod: {message}"));
    }

    /// No decision for the group (every replica failed, or none answered): its pods back off.
    fn back_off_undecided(&self, batch: &[QueuedPod], route: &Route, now: Instant) {
        let s = &self.shared;
        let mut q = s.queue.lock();
        let mut failed = 0;
        for p in batch {
            if q.place_of(&p.info.spec.uid) == Some(crate::queue::Place::InFlight)
                && !self.is_retrying(&p.info.spec.uid)
            {
                q.backoff(&p.info.spec.uid, now);
                s.metrics.attempt(route.policy_label(), "error", p.popped_at.elapsed());
                failed += 1;
            }
        }
        self.update_queue_gauges(&q);
        drop(q);
        s.experiments.decision_failed(route, failed);
    }

    /// Acts on one pod's placement (its placement already assumed): placed, it is bound; nominated,
    /// its victims are preempted; unschedulable, it is reported; failed with an error, reported
    /// and backed off; sent back by its partition, decided again alone; no answer, backed off. A
    /// waiting preemptor decided again keeps waiting unless it fits.
    #[allow(clippy::too_many_arguments)]
    fn dispatch(
        &self,
        qp: QueuedPod,
        mut placement: proto::Placement,
        route: &Route,
        applied_policy: &str,
        returned: bool,
        now: Instant,
        tasks: &mut JoinSet<()>,
    ) {
        use proto::placement::Outcome;
        let s = &self.shared;
        let policy = route.policy_label();
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
                self.spawn_bind(tasks, qp, node, bind(volumes, devices));
            }
            Some(Outcome::Unschedulable(u)) if retrying => {
                // Still no room: no new preemption while its victims terminate.
                s.metrics.attempt(policy, "unschedulable", qp.popped_at.elapsed());
                self.keep_waiting(tasks, &placement.pod_uid, Some(&u.message), now);
            }
            None if returned => {
                // Not decided for the whole cluster: again, alone, at once.
                s.decide_alone_next.lock().insert(placement.pod_uid.clone());
                s.queue.lock().retry_now(&placement.pod_uid);
            }
            None if retrying => {}
            Some(Outcome::Unschedulable(u)) if u.error => {
                // Scheduling failed with an error (an extender that is not ignorable): as
                // kube-scheduler, the pod is retried after its backoff, not left for a cluster
                // event, and its condition's reason is SchedulerError.
                s.queue.lock().backoff(&qp.info.spec.uid, now);
                s.metrics.attempt(policy, "error", qp.popped_at.elapsed());
                self.spawn_scheduler_error(tasks, pod_ref(&qp.info.spec), u.message);
            }
            Some(Outcome::Unschedulable(mut u)) if !u.nominated_node_name.is_empty() => {
                if let Some(claim) = u.deallocate_claim.take() {
                    // kube's DynamicResources PostFilter wrote it before DefaultPreemption ran.
                    self.spawn_deallocation(tasks, pod_ref(&qp.info.spec), claim);
                }
                s.metrics.attempt(policy, "unschedulable", qp.popped_at.elapsed());
                s.experiments.unschedulable(route);
                self.start_preemption(tasks, qp, u, bind(Vec::new(), Vec::new()));
            }
            Some(Outcome::Unschedulable(mut u)) => {
                s.queue.lock().unschedulable(&qp.info.spec.uid, now);
                s.metrics.attempt(policy, "unschedulable", qp.popped_at.elapsed());
                s.experiments.unschedulable(route);
                match u.deallocate_claim.take() {
                    Some(claim) => {
                        self.spawn_unschedulable_deallocating(tasks, pod_ref(&qp.info.spec), claim, u.message)
                    }
                    None => self.spawn_unschedulable(tasks, pod_ref(&qp.info.spec), u.message),
                }
            }
            None => {
                s.queue.lock().backoff(&qp.info.spec.uid, now);
                s.metrics.attempt(policy, "error", qp.popped_at.elapsed());
            }
        }
    }

    /// The pods of a partitioned decision decided again alone ([`crate::partitions::send_back`]),
    /// counted by why, and whether one was placed outside the partition.
    fn partition_returns(
        &self,
        partition: Partition,
        response: &mut proto::ScheduleResponse,
    ) -> (HashSet<String>, bool) {
        let mut sent_back = HashSet::new();
        let mut outside = false;
        for (uid, why) in crate::partitions::send_back(partition, response) {
            if why == "outside" {
                outside = true;
                tracing::warn!(pod_uid = %uid, partition = partition.index,
                    "decision replica chose a node outside the batch's partition; the pod is decided again alone");
            }
            self.shared.metrics.partition_return(why);
            sent_back.insert(uid);
        }
        (sent_back, outside)
    }

    /// Evaluates the shadow policies on a decided group (before its placements are assumed, so
    /// they see the same cluster) and records how they agree with the placements acted on.
    async fn run_shadows(
        &self,
        routing: &Arc<Routing>,
        route: &Route,
        pods: &[&proto::Pod],
        response: &proto::ScheduleResponse,
    ) {
        let s = &self.shared;
        let primary: std::collections::HashMap<&str, &proto::Placement> =
            response.placements.iter().map(|p| (p.pod_uid.as_str(), p)).collect();
        let verdicts = futures::future::join_all(routing.shadows.iter().map(|shadow| async move {
            let verdict = match s.pools.of(routing, shadow.backend) {
                Some(pool) => self
                    .decide(&pool, &shadow.policy, pods, shadow.backend != 0, false, None)
                    .await
                    .map(|d| d.response),
                None => Err(Err(super::DecideError::BackendOut)),
            };
            (shadow, verdict)
        }))
        .await;
        for (shadow, verdict) in verdicts {
            match verdict {
                Ok(r) => s.experiments.shadow_compared(route, shadow, &primary, &r.placements),
                Err(e) => {
                    let error = match e {
                        Ok(status) => status.to_string(),
                        Err(e) => e.to_string(),
                    };
                    tracing::debug!(shadow = %shadow.name, %error, "shadow policy failed");
                    s.experiments.shadow_failed(route, shadow, pods.len());
                }
            }
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
