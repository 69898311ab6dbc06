//! Preemption and nominations: a nominated pod's node reserved, its victims preempted, and the
//! pod bound once they are gone; a waiting preemptor decided again, kept waiting, or given up
//! (the bookkeeping is in [`crate::nominations`]).

use placement_scheduler::proto;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument;

use super::failures::Failure;
use super::{pod_ref, BindRequest, Binder, Flow};
use crate::api::{ClusterApi, PodRef, Preemptor};
use crate::nominations::{Nomination, RetryEnd};
use crate::queue::QueuedPod;

impl<A: ClusterApi> Binder<A> {
    /// Acts on a nomination (see [`crate::nominations`]): reserve the node, nominate, preempt the
    /// victims, report FailedScheduling; the bind follows once the victims are gone.
    pub(super) fn start_preemption(
        &self,
        tasks: &mut JoinSet<()>,
        qp: QueuedPod,
        u: proto::Unschedulable,
        bind: BindRequest,
    ) {
        let s = &self.shared;
        let node = u.nominated_node_name.clone();
        let preemptor = pod_ref(&qp.info.spec);
        let now = Instant::now();
        let mut lost_nomination: Vec<PodRef> = Vec::new();
        // Victims to delete, and every victim to wait for (those whose deletion an earlier
        // nomination already asked for are waited for, never deleted twice).
        // A PodGroup's member evicts for its group (kube's PodGroupPostFilter): the victims'
        // events and conditions name the group.
        let mut evicting_for = Preemptor::Pod(preemptor.clone());
        let (to_delete, waiting_for): (Vec<PodRef>, Vec<String>) = {
            let mut st = s.state.lock();
            let spec = &qp.info.spec;
            if !u.gang.is_empty() && !spec.scheduling_group.is_empty() {
                if let Some(g) = st.pod_group(&spec.namespace, &spec.scheduling_group) {
                    evicting_for = Preemptor::PodGroup(PodRef {
                        namespace: g.namespace.clone(),
                        name: g.name.clone(),
                        uid: g.uid.clone(),
                    });
                }
            }
            st.assume(qp.info.spec.clone(), &node);
            let mut nominations = s.nominations.lock();
            let mut q = s.queue.lock();
            let mut to_delete = Vec::new();
            let mut waiting_for = Vec::new();
            for uid in &u.victim_uids {
                // A victim that is itself a preemptor waiting for its room is not deleted: its
                // nomination is cleared and it is decided again, as kube-scheduler clears the
                // nominations of lower-priority pods.
                if let Some(lost) = nominations.cancel(uid) {
                    st.forget(uid);
                    q.backoff(uid, now);
                    s.metrics.nomination_ended("cancelled");
                    lost_nomination.push(pod_ref(&lost.pod.info.spec));
                    continue;
                }
                let Some(victim) = st.pod(uid) else { continue };
                waiting_for.push(uid.clone());
                // A victim already being deleted is waited for, not deleted again, as
                // kube-scheduler skips the API call for such a victim.
                if !victim.terminating && nominations.mark_preempted(uid) {
                    to_delete.push(pod_ref(&victim));
                }
            }
            (to_delete, waiting_for)
        };
        tracing::info!(pod = %preemptor.key(), %node, victims = waiting_for.len(), deleting = to_delete.len(), "preempting");
        s.metrics.preemptions.inc();
        s.metrics.preemption_victims.observe(waiting_for.len() as f64);
        s.nominations
            .lock()
            .add(qp.clone(), node.clone(), waiting_for, bind, now);
        for pod in lost_nomination {
            self.spawn_clear_nomination(tasks, pod);
        }
        let scheduler_name = qp.info.scheduler_name.clone();
        let this = self.clone();
        tasks.spawn(async move {
            let s = &this.shared;
            if !*s.leader.borrow() {
                let mut nominations = s.nominations.lock();
                for v in &to_delete {
                    nominations.unmark_preempted(&v.uid);
                }
                return;
            }
            this.rate_limit().await;
            if let Err(e) = s.api.nominate(&preemptor, &node).await {
                tracing::debug!(pod = %preemptor.key(), error = %e, "setting nominatedNodeName failed");
            }
            for (i, victim) in to_delete.iter().enumerate() {
                this.rate_limit().await;
                if let Err(e) = s.api.preempt(victim, &evicting_for, &node, &scheduler_name).await {
                    // The room cannot be made: give the reservation up and decide the pod again.
                    tracing::warn!(pod = %preemptor.key(), victim = %victim.key(), error = %e, "preemption failed");
                    {
                        let mut nominations = s.nominations.lock();
                        for v in &to_delete[i..] {
                            nominations.unmark_preempted(&v.uid);
                        }
                    }
                    let cancelled = s.nominations.lock().cancel(&preemptor.uid).is_some();
                    if cancelled {
                        s.metrics.nomination_ended("preemption_failed");
                        s.state.lock().forget(&preemptor.uid);
                        s.queue.lock().backoff(&preemptor.uid, Instant::now());
                        s.wake.notify_one();
                        this.rate_limit().await;
                        if let Err(e) = s.api.clear_nomination(&preemptor).await {
                            tracing::debug!(pod = %preemptor.key(), error = %e, "clearing nominatedNodeName failed");
                        }
                    }
                    break;
                }
            }
            this.report_failure(&preemptor, Failure::Unschedulable, &u.message)
                .await;
        });
    }

    /// Once the first lists are done: gives up the nominations past their deadline and decides
    /// again, one at a time, the waiting preemptors whose retry is due, on the whole cluster (after
    /// the decisions in flight on node partitions end). `Again` when it decided any or waited (the
    /// loop then looks again), `Go` when none was due.
    pub(super) async fn retry_waiting_preemptors(
        &self,
        shutdown: &mut (impl std::future::Future<Output = ()> + Unpin),
        tasks: &mut JoinSet<()>,
    ) -> Flow {
        let s = &self.shared;
        if !s.synced.load(std::sync::atomic::Ordering::Relaxed) {
            return Flow::Go;
        }
        match self.wait_for_partitions_if_a_preemptor_is_due(shutdown).await {
            Flow::Go => {}
            flow => return flow,
        }
        let now = Instant::now();
        let expired = s.nominations.lock().take_expired(now);
        for n in expired {
            self.give_up_nomination(tasks, n, now);
        }
        let due = s.nominations.lock().take_due(now);
        if due.is_empty() {
            return Flow::Go;
        }
        for qp in due {
            // Alone in its batch and without its own reservation: it may fit elsewhere now, or on
            // its node if room was made. Every other pod's assumptions still count.
            let uid = qp.info.spec.uid.clone();
            if !s.nominations.lock().is_retrying(&uid) {
                // Deleted, bound or cancelled while the ones before it were decided.
                continue;
            }
            if !qp.info.spec.scheduling_group.is_empty() {
                // A PodGroup's member is decided only with its group, once the group's victims
                // are gone (kube-scheduler keeps such a group's nominations while its preemption
                // is ongoing): it keeps waiting.
                self.keep_waiting(tasks, &uid, None, now);
                continue;
            }
            s.state.lock().forget(&uid);
            let span = tracing::info_span!("nominated_retry", pod = %qp.info.key());
            self.schedule_batch(vec![qp], tasks).instrument(span).await;
            // An outcome that did not settle it (no answer at all) keeps it waiting.
            self.keep_waiting(tasks, &uid, None, Instant::now());
        }
        Flow::Again
    }

    /// A preemptor decided again that fits nowhere else keeps its reservation on its node and its
    /// nomination, and preempts nobody else while its victims terminate; `message` (the service's)
    /// is reported as kube-scheduler reports a pod not eligible to preempt again.
    pub(super) fn keep_waiting(&self, tasks: &mut JoinSet<()>, uid: &str, message: Option<&str>, now: Instant) {
        let s = &self.shared;
        let (spec, node) = {
            let nominations = s.nominations.lock();
            if !nominations.is_retrying(uid) {
                return;
            }
            match nominations.get(uid) {
                Some(n) => (n.pod.info.spec.clone(), n.node.clone()),
                None => return,
            }
        };
        if !s.queue.lock().contains(uid) {
            // Deleted or bound meanwhile: the nomination ends with it.
            if s.nominations.lock().cancel(uid).is_some() {
                s.metrics.nomination_ended("cancelled");
            }
            return;
        }
        s.state.lock().assume(spec.clone(), &node);
        match s.nominations.lock().retry_failed(uid, now) {
            RetryEnd::Ready => s.wake.notify_one(),
            RetryEnd::Gone => s.state.lock().forget(uid),
            RetryEnd::Waiting => {
                if let Some(message) = message {
                    let fit = message.split(" preemption: ").next().unwrap_or(message);
                    let message =
                        format!("{fit} preemption: not eligible due to a terminating pod on the nominated node.");
                    self.spawn_unschedulable(tasks, pod_ref(&spec), message);
                }
            }
        }
    }

    /// Gives a nomination up (its deadline passed, or its node is gone): the reservation goes,
    /// `nominatedNodeName` is cleared, FailedScheduling says why, and the pod waits as
    /// unschedulable for the next cluster event.
    fn give_up_nomination(&self, tasks: &mut JoinSet<()>, n: Nomination<BindRequest>, now: Instant) {
        let s = &self.shared;
        let uid = n.pod.info.spec.uid.clone();
        let node_exists = s.state.lock().nodes().contains_key(&n.node);
        let still_there: Vec<String> = {
            let st = s.state.lock();
            let mut v: Vec<String> = n
                .waiting_for
                .iter()
                .map(|v| {
                    st.pod(v)
                        .map_or_else(|| v.clone(), |p| format!("{}/{}", p.namespace, p.name))
                })
                .collect();
            v.sort();
            v
        };
        s.state.lock().forget(&uid);
        {
            let mut q = s.queue.lock();
            q.unschedulable(&uid, now);
            self.update_queue_gauges(&q);
        }
        let (result, message) = if node_exists {
            (
                "timed_out",
                format!(
                    "preemption: gave up the nominated node {} after {}s: {} victim(s) still terminating ({}).",
                    n.node,
                    n.deadline.duration_since(n.since).as_secs(),
                    still_there.len(),
                    still_there.join(", ")
                ),
            )
        } else {
            (
                "node_gone",
                format!("preemption: the nominated node {} was deleted.", n.node),
            )
        };
        tracing::warn!(pod = %n.pod.info.key(), node = %n.node, victims = ?still_there, reason = result, "nomination given up");
        s.metrics.nomination_ended(result);
        let pod = pod_ref(&n.pod.info.spec);
        let this = self.clone();
        tasks.spawn(async move {
            let s = &this.shared;
            if !*s.leader.borrow() {
                return;
            }
            this.rate_limit().await;
            if let Err(e) = s.api.clear_nomination(&pod).await {
                tracing::debug!(pod = %pod.key(), error = %e, "clearing nominatedNodeName failed");
            }
            this.report_failure(&pod, Failure::Unschedulable, &message).await;
        });
    }

    /// Whether the pod is a waiting preemptor being decided again.
    pub(super) fn is_retrying(&self, uid: &str) -> bool {
        self.shared.nominations.lock().is_retrying(uid)
    }

    pub(super) fn spawn_clear_nomination(&self, tasks: &mut JoinSet<()>, pod: PodRef) {
        let this = self.clone();
        tasks.spawn(async move {
            if !*this.shared.leader.borrow() {
                return;
            }
            this.rate_limit().await;
            if let Err(e) = this.shared.api.clear_nomination(&pod).await {
                tracing::debug!(pod = %pod.key(), error = %e, "clearing nominatedNodeName failed");
            }
        });
    }
}
