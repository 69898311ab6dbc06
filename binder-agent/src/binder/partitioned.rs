//! Batches decided on node partitions ([`crate::partitions`]; off by default: with
//! [`super::BinderConfig::batches_in_flight`] at 1, kube-scheduler's one cycle at a time). The
//! loop asks this file how many batches may be in flight ([`Binder::parallel_limit`]) and, before
//! each pop, lets it take its turn ([`Binder::wait_for_partitions`]: the held pods decided, a free
//! partition waited for); a waiting preemptor due waits for the partitions in flight
//! ([`Binder::wait_for_partitions_if_a_preemptor_is_due`]). With two or more batches in flight,
//! [`Binder::dispatch_on_partitions`] sends the pods a partition may decide to a free one,
//! decided in a task of its own, and holds the pods that must be decided on the whole cluster
//! until the partitions in flight drain ([`WholeClusterHold`]). A partition's decision
//! is made and acted on as any other ([`Binder::decide_group`], [`Binder::handle_decision`]):
//! its pods are sent restricted to the partition's nodes, and the pods it sends back are taken
//! out of its response before the rest is acted on.

use std::collections::HashSet;
use std::time::Duration;

use placement_scheduler::proto;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument;

use super::decide::GroupDecision;
use super::{partitions, Binder, Flow};
use crate::api::ClusterApi;
use crate::partitions::{whole_cluster_reason, Partition};
use crate::queue::QueuedPod;

/// Longest a pod that must be decided on the whole cluster waits for others like it while
/// decisions run in partitions.
const WHOLE_CLUSTER_HOLD: Duration = Duration::from_millis(200);

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

/// Pods popped while decisions run in partitions that must be decided on the whole cluster,
/// gathered so that partitioned decisions stop for them once per batch.
#[derive(Default)]
pub(super) struct WholeClusterHold {
    pods: Vec<QueuedPod>,
    /// When the oldest of them was held.
    since: Option<Instant>,
}

impl<A: ClusterApi> Binder<A> {
    /// How many batches may be decided at once on node partitions now: the configured number,
    /// at most the ready replicas; 0 (one batch at a time on the whole cluster) when fewer than
    /// two replicas are ready or an experiment or shadow policy is active.
    pub(super) fn parallel_limit(&self) -> usize {
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

    /// Decisions in flight on node partitions.
    pub(super) fn in_flight(&self) -> usize {
        self.shared.slots.lock().in_flight()
    }

    /// A waiting preemptor is decided again on the whole cluster, with no partitioned decision in
    /// flight: while one is due, new ones wait for those in flight to end.
    pub(super) async fn wait_for_partitions_if_a_preemptor_is_due(
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

    /// The partitions' turn before a pop (`Go` at once when decisions are not partitioned and no
    /// pod is held): the held pods decided on the whole cluster once due
    /// ([`Binder::decide_held_pods_if_due`]); then, unless the loop is `idle` (nothing ready, or
    /// the first lists not done: it waits for work instead), a free partition waited for
    /// ([`Binder::wait_for_a_partition`]).
    pub(super) async fn wait_for_partitions(
        &self,
        hold: &mut WholeClusterHold,
        idle: bool,
        ready: usize,
        limit: usize,
        shutdown: &mut (impl std::future::Future<Output = ()> + Unpin),
        tasks: &mut JoinSet<()>,
    ) -> Flow {
        match self.decide_held_pods_if_due(hold, ready, limit, shutdown, tasks).await {
            Flow::Go if !idle => self.wait_for_a_partition(hold, limit, shutdown).await,
            flow => flow,
        }
    }

    /// Decides the held pods on the whole cluster once a batch of them gathered, nothing else is
    /// ready, the oldest waited [`WHOLE_CLUSTER_HOLD`], or decisions are no longer partitioned:
    /// after the partitions in flight drain (`Again` then; `Go` while they are not due).
    async fn decide_held_pods_if_due(
        &self,
        hold: &mut WholeClusterHold,
        ready: usize,
        limit: usize,
        shutdown: &mut (impl std::future::Future<Output = ()> + Unpin),
        tasks: &mut JoinSet<()>,
    ) -> Flow {
        let due = hold.since.is_some_and(|since| {
            limit < 2
                || hold.pods.len() >= self.shared.config.batch_size
                || ready == 0
                || since.elapsed() >= WHOLE_CLUSTER_HOLD
        });
        if !due {
            return Flow::Go;
        }
        while self.in_flight() > 0 {
            tokio::select! {
                () = &mut *shutdown => return Flow::Stop,
                () = self.shared.wake.notified() => {},
            }
        }
        hold.since = None;
        let whole_cluster = self.still_in_flight(std::mem::take(&mut hold.pods));
        if !whole_cluster.is_empty() {
            self.shared.metrics.batch("alone");
            let span = tracing::info_span!("schedulingCycle", pods = whole_cluster.len());
            self.schedule_batch(whole_cluster, tasks).instrument(span).await;
        }
        Flow::Again
    }

    /// The partition whose turn it is, or as many as replicas are ready, are being decided: waits
    /// for one, or for the held pods' time; then `Again`. `Go` when one is free or decisions are
    /// not partitioned.
    async fn wait_for_a_partition(
        &self,
        hold: &WholeClusterHold,
        limit: usize,
        shutdown: &mut (impl std::future::Future<Output = ()> + Unpin),
    ) -> Flow {
        if limit < 2 || self.shared.slots.lock().can_take(limit) {
            return Flow::Go;
        }
        let hold_ends = tokio::time::sleep_until(hold.since.map_or_else(
            || Instant::now() + Duration::from_secs(1),
            |since| since + WHOLE_CLUSTER_HOLD,
        ));
        tokio::select! {
            () = shutdown => return Flow::Stop,
            () = self.shared.wake.notified() => {},
            () = hold_ends => {},
        }
        Flow::Again
    }

    /// Sends the pods of `batch` a partition may decide to a free one, decided in a task of its
    /// own, and holds the others for a decision on the whole cluster.
    pub(super) fn dispatch_on_partitions(
        &self,
        batch: Vec<QueuedPod>,
        limit: usize,
        hold: &mut WholeClusterHold,
        tasks: &mut JoinSet<()>,
    ) {
        let (whole_cluster, partitioned) = self.split_whole_cluster(batch);
        if !partitioned.is_empty() {
            self.spawn_partitioned(partitioned, limit, tasks);
        }
        if !whole_cluster.is_empty() {
            hold.since.get_or_insert_with(Instant::now);
            hold.pods.extend(whole_cluster);
        }
    }

    /// The held pods go back to the queue (the next leader, or this one, decides them).
    pub(super) fn give_back_held(&self, hold: WholeClusterHold) {
        let mut q = self.shared.queue.lock();
        for p in &hold.pods {
            q.retry_now(&p.info.spec.uid);
        }
    }

    /// The held pods still waiting for a decision (not deleted or bound meanwhile).
    fn still_in_flight(&self, held: Vec<QueuedPod>) -> Vec<QueuedPod> {
        let q = self.shared.queue.lock();
        held.into_iter()
            .filter(|p| q.place_of(&p.info.spec.uid) == Some(crate::queue::Place::InFlight))
            .collect()
    }

    /// Splits a batch into the pods decided on the whole cluster ([`whole_cluster_reason`], or
    /// sent back by a partition before) and those a partition may decide.
    fn split_whole_cluster(&self, batch: Vec<QueuedPod>) -> (Vec<QueuedPod>, Vec<QueuedPod>) {
        // Pods asking for an extended resource a DeviceClass backs are decided on the whole
        // cluster, as pods with claims are.
        let backed = crate::partitions::dra_extended_resources(self.shared.state.lock().device_classes().iter());
        let mut sent_back = self.shared.whole_cluster_next.lock();
        let (whole_cluster, partitioned): (Vec<QueuedPod>, Vec<QueuedPod>) = batch.into_iter().partition(|p| {
            sent_back.contains(&p.info.spec.uid)
                || whole_cluster_reason(&p.info.spec).is_some()
                || crate::partitions::asks_dra_extended(&p.info.spec, &backed)
        });
        for p in &whole_cluster {
            sent_back.remove(&p.info.spec.uid);
        }
        (whole_cluster, partitioned)
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

    /// Decides one batch on one node partition (no experiment or shadow is active then): its pods
    /// sent restricted to the partition's nodes, the pods it sends back taken out, the rest acted
    /// on.
    async fn schedule_partition(&self, batch: Vec<QueuedPod>, partition: Partition, tasks: &mut JoinSet<()>) {
        let s = &self.shared;
        s.metrics.batch_size.observe(batch.len() as f64);
        let routing = s.experiments.current();
        let route = routing.route(&batch[0].info, &s.config.policy);
        let specs: Vec<&proto::Pod> = batch.iter().map(|p| &p.info.spec).collect();
        let restrict = |pod: &proto::Pod| partition.restrict(pod);
        let mut decision = self.decide_group(&routing, &route, &specs, &restrict).await;
        self.take_partition_returns(partition, &mut decision);
        self.handle_decision(&route, batch, decision, tasks);
    }

    /// Takes out of a partitioned decision the pods it sends back
    /// ([`crate::partitions::send_back`]), counted by why: each is decided again on the whole
    /// cluster, at once. When one was placed outside the partition, the replica's snapshot (with
    /// that placement assumed) is not the binder's view.
    fn take_partition_returns(&self, partition: Partition, decision: &mut GroupDecision) {
        let Some(decided) = &mut decision.decided else {
            return;
        };
        let s = &self.shared;
        let mut sent_back = HashSet::new();
        for (uid, why) in crate::partitions::send_back(partition, &mut decided.response) {
            if why == "outside" {
                decided.same_view = false;
                tracing::warn!(pod_uid = %uid, partition = partition.index,
                    "decision replica chose a node outside the batch's partition; the pod is decided again alone");
            }
            s.metrics.partition_return(why);
            sent_back.insert(uid);
        }
        if sent_back.is_empty() {
            return;
        }
        decided.response.placements.retain(|p| !sent_back.contains(&p.pod_uid));
        s.whole_cluster_next.lock().extend(sent_back.iter().cloned());
        let mut q = s.queue.lock();
        for uid in &sent_back {
            q.retry_now(uid);
        }
    }
}
