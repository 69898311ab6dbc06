//! Preemptions in progress: nominated pods waiting for their victims to go, with their
//! reservations, retries and deadlines (a pure table; the binder acts on it in
//! `binder/preemption.rs`).
//!
//! **Preemption.** When the decision service nominates a node for a pod (it fits once lower-priority
//! victims are gone), the binder does what kube-scheduler's DefaultPreemption does after choosing:
//! it sets the pod's `status.nominatedNodeName`, preempts each victim (condition, graceful delete,
//! `Preempted` event) and records `FailedScheduling` with the service's message. The pod keeps a
//! reservation on the nominated node (it is assumed there, so no later batch takes the room), stays
//! in flight, and is bound to that node once the watch shows every victim gone. A victim that
//! cannot be deleted drops the nomination: the reservation goes and the pod is decided again after
//! a backoff.
//!
//! **Victims that do not go** (a stuck finalizer, a node gone). As kube-scheduler keeps retrying a
//! nominated pod, the binder decides a waiting preemptor again with backoff (1s doubling to 10s,
//! and at once after a cluster event), alone in its batch and without its own reservation: if a
//! node fits, it is bound there at once (and its `nominatedNodeName` cleared when that is another
//! node); if not, it keeps its nomination and preempts nobody else while its victims terminate
//! (kube-scheduler's `PodEligibleToPreemptOthers`: "not eligible due to a terminating pod on the
//! nominated node"). After the nomination timeout, or at once when the nominated node is
//! deleted, the reservation is given up: `nominatedNodeName` is cleared, FailedScheduling says
//! why, and the pod goes back to the queue as unschedulable (decided again on the next cluster
//! event). A victim is deleted once: a later nomination naming it again waits for it instead.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio::time::Instant;

use crate::queue::QueuedPod;

/// A pod waiting for its victims to go before it is bound to its nominated node; `T` is what the
/// bind needs besides the pod and the node.
#[derive(Debug, Clone)]
pub struct Nomination<T> {
    /// The preemptor, in flight.
    pub pod: QueuedPod,
    /// The nominated node.
    pub node: String,
    /// Uids of the victims not yet seen gone.
    pub waiting_for: HashSet<String>,
    /// What the bind needs (the binder's experiment route and annotations).
    pub extra: T,
    /// When the nomination was made.
    pub since: Instant,
    /// When the reservation is given up if the victims are still there.
    pub deadline: Instant,
    /// When the pod is next decided again (it binds wherever it fits first).
    pub retry_at: Instant,
    /// The wait after the next retry.
    backoff: Duration,
    /// Being decided again right now (its reservation is lifted for that decision).
    retrying: bool,
    /// When it was last decided (or nominated).
    decided_at: Instant,
}

/// How nominated pods wait: retries with backoff, and a deadline.
#[derive(Debug, Clone)]
pub struct NominationTiming {
    /// How long a nomination waits for its victims before the reservation is given up.
    pub timeout: Duration,
    /// First wait before a nominated pod is decided again; doubled per retry.
    pub initial_retry: Duration,
    /// Longest wait between two retries.
    pub max_retry: Duration,
}

impl Default for NominationTiming {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(90),
            initial_retry: Duration::from_secs(1),
            max_retry: Duration::from_secs(10),
        }
    }
}

/// What became of a nominated pod decided again that still does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryEnd {
    /// Its victims went meanwhile: it is ready to bind to its node.
    Ready,
    /// It keeps waiting, retried again later.
    Waiting,
    /// It has no nomination any more (deleted, bound elsewhere or cancelled meanwhile).
    Gone,
}

/// Preemptions in progress, by preemptor uid, and the victims being deleted.
#[derive(Debug)]
pub struct Nominations<T> {
    by_preemptor: HashMap<String, Nomination<T>>,
    /// Nominations whose victims are all gone, to bind.
    ready: Vec<(QueuedPod, String, T)>,
    /// Victims whose deletion was asked for, until the watch shows them gone: never deleted twice.
    preempted: HashSet<String>,
    timing: NominationTiming,
}

impl<T> Default for Nominations<T> {
    fn default() -> Self {
        Self::new(NominationTiming::default())
    }
}

impl<T> Nominations<T> {
    /// No nomination yet.
    pub fn new(timing: NominationTiming) -> Self {
        Self {
            by_preemptor: HashMap::new(),
            ready: Vec::new(),
            preempted: HashSet::new(),
            timing,
        }
    }

    /// Tracks a nomination made at `now`; one with no victim left is ready at once.
    pub fn add(
        &mut self,
        pod: QueuedPod,
        node: String,
        victims: impl IntoIterator<Item = String>,
        extra: T,
        now: Instant,
    ) {
        let waiting_for: HashSet<String> = victims.into_iter().collect();
        if waiting_for.is_empty() {
            self.ready.push((pod, node, extra));
            return;
        }
        self.by_preemptor.insert(
            pod.info.spec.uid.clone(),
            Nomination {
                pod,
                node,
                waiting_for,
                extra,
                since: now,
                deadline: now + self.timing.timeout,
                retry_at: now + self.timing.initial_retry,
                backoff: (self.timing.initial_retry * 2).min(self.timing.max_retry),
                retrying: false,
                decided_at: now,
            },
        );
    }

    /// Marks a victim as being deleted; `false` when its deletion was already asked for (by this
    /// or an earlier nomination), so it is not deleted again.
    pub fn mark_preempted(&mut self, victim: &str) -> bool {
        self.preempted.insert(victim.to_string())
    }

    /// A victim's deletion failed: a later preemption may try it again.
    pub fn unmark_preempted(&mut self, victim: &str) {
        self.preempted.remove(victim);
    }

    /// A pod is gone: as a victim, it may complete nominations; as a preemptor, its own ends.
    /// Returns whether some nomination became ready.
    pub fn pod_gone(&mut self, uid: &str) -> bool {
        self.preempted.remove(uid);
        self.by_preemptor.remove(uid);
        let done: Vec<String> = self
            .by_preemptor
            .iter_mut()
            .filter_map(|(p, n)| {
                (n.waiting_for.remove(uid) && n.waiting_for.is_empty() && !n.retrying).then(|| p.clone())
            })
            .collect();
        for p in &done {
            if let Some(n) = self.by_preemptor.remove(p) {
                self.ready.push((n.pod, n.node, n.extra));
            }
        }
        !done.is_empty()
    }

    /// Drops a nomination (a victim could not be preempted, the preemptor was bound by someone
    /// else, or a more important pod takes its room).
    pub fn cancel(&mut self, preemptor: &str) -> Option<Nomination<T>> {
        self.by_preemptor.remove(preemptor)
    }

    /// Nominations ready to bind, taken.
    pub fn take_ready(&mut self) -> Vec<(QueuedPod, String, T)> {
        std::mem::take(&mut self.ready)
    }

    /// Preemptions waiting for victims.
    pub fn waiting(&self) -> usize {
        self.by_preemptor.len()
    }

    /// The nomination of a waiting preemptor.
    pub fn get(&self, preemptor: &str) -> Option<&Nomination<T>> {
        self.by_preemptor.get(preemptor)
    }

    /// The nominated node of a waiting preemptor.
    pub fn node_of(&self, preemptor: &str) -> Option<&str> {
        self.by_preemptor.get(preemptor).map(|n| n.node.as_str())
    }

    /// Whether the preemptor is being decided again right now.
    pub fn is_retrying(&self, preemptor: &str) -> bool {
        self.by_preemptor.get(preemptor).is_some_and(|n| n.retrying)
    }

    /// Nominations past their deadline (not while being decided), taken.
    pub fn take_expired(&mut self, now: Instant) -> Vec<Nomination<T>> {
        let expired: Vec<String> = self
            .by_preemptor
            .iter()
            .filter(|(_, n)| !n.retrying && n.deadline <= now)
            .map(|(uid, _)| uid.clone())
            .collect();
        expired.iter().filter_map(|uid| self.by_preemptor.remove(uid)).collect()
    }

    /// Ends every nomination to `node` at once (the node is gone, so its room never comes).
    pub fn node_gone(&mut self, node: &str, now: Instant) {
        for n in self.by_preemptor.values_mut().filter(|n| n.node == node) {
            n.deadline = now;
        }
    }

    /// A cluster event that may make room elsewhere: every waiting preemptor is decided again now,
    /// or once the initial retry wait has passed since it was last decided (so a burst of events
    /// costs each at most one decision per initial wait).
    pub fn retry_all_now(&mut self, now: Instant) {
        let initial = self.timing.initial_retry;
        for n in self.by_preemptor.values_mut().filter(|n| !n.retrying) {
            n.retry_at = n.retry_at.min(now.max(n.decided_at + initial));
        }
    }

    /// The preemptors whose retry is due, marked as being decided (their victims going meanwhile
    /// does not make them ready: the decision's outcome says what happens), oldest nomination first.
    pub fn take_due(&mut self, now: Instant) -> Vec<QueuedPod> {
        let mut due: Vec<&mut Nomination<T>> = self
            .by_preemptor
            .values_mut()
            .filter(|n| !n.retrying && n.retry_at <= now && n.deadline > now)
            .collect();
        due.sort_by_key(|n| n.since);
        due.into_iter()
            .map(|n| {
                n.retrying = true;
                n.pod.clone()
            })
            .collect()
    }

    /// A preemptor decided again still does not fit elsewhere: it keeps its nomination and is
    /// retried after a longer wait, or is ready if its victims went meanwhile.
    pub fn retry_failed(&mut self, preemptor: &str, now: Instant) -> RetryEnd {
        let Some(n) = self.by_preemptor.get_mut(preemptor) else {
            return RetryEnd::Gone;
        };
        n.retrying = false;
        n.decided_at = now;
        if n.waiting_for.is_empty() {
            if let Some(n) = self.by_preemptor.remove(preemptor) {
                self.ready.push((n.pod, n.node, n.extra));
            }
            return RetryEnd::Ready;
        }
        n.retry_at = now + n.backoff;
        n.backoff = (n.backoff * 2).min(self.timing.max_retry);
        RetryEnd::Waiting
    }

    /// When the next retry or deadline is due, if any nomination waits.
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.by_preemptor
            .values()
            .filter(|n| !n.retrying)
            .map(|n| n.retry_at.min(n.deadline))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::PodInfo;
    use placement_scheduler::proto;

    fn queued(uid: &str) -> QueuedPod {
        let mut q = crate::queue::SchedulingQueue::new(Default::default());
        let info = PodInfo {
            spec: proto::Pod {
                uid: uid.into(),
                ..Default::default()
            },
            scheduler_name: String::new(),
            created_ms: 0,
            terminal: false,
            deleting: false,
            owner: None,
            annotations: Default::default(),
            scheduling_gates: Vec::new(),
        };
        q.add_or_update(info, Instant::now());
        q.pop_batch(1, Instant::now()).remove(0)
    }

    #[test]
    fn a_nomination_is_ready_once_every_victim_is_gone() {
        let mut n = Nominations::default();
        n.add(
            queued("p"),
            "n1".into(),
            ["v1".to_string(), "v2".to_string()],
            (),
            Instant::now(),
        );
        assert!(!n.pod_gone("v1"));
        assert!(n.take_ready().is_empty());
        assert!(n.pod_gone("v2"));
        let ready = n.take_ready();
        assert_eq!((ready[0].0.info.spec.uid.as_str(), ready[0].1.as_str()), ("p", "n1"));
        assert_eq!(n.waiting(), 0);
        // A preemptor deleted while waiting is forgotten.
        n.add(queued("q"), "n1".into(), ["v3".to_string()], (), Instant::now());
        n.pod_gone("q");
        assert!(!n.pod_gone("v3"));
        assert!(n.take_ready().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_preemptor_is_retried_with_backoff_then_given_up() {
        let t0 = Instant::now();
        let timing = NominationTiming {
            timeout: Duration::from_secs(30),
            initial_retry: Duration::from_secs(1),
            max_retry: Duration::from_secs(4),
        };
        let mut n = Nominations::new(timing);
        n.add(queued("p"), "n1".into(), ["v".to_string()], (), t0);
        assert_eq!(n.next_wakeup(), Some(t0 + Duration::from_secs(1)));
        assert!(n.take_due(t0).is_empty(), "not before the first backoff");
        // Retries at 1s, then 2s and 4s later (capped at 4s), each failing.
        let mut at = t0 + Duration::from_secs(1);
        let mut times = Vec::new();
        for _ in 0..4 {
            let due = n.take_due(at);
            assert_eq!(due.len(), 1);
            assert!(n.is_retrying("p"));
            assert_eq!(n.next_wakeup(), None, "nothing to wake for while it is decided");
            assert_eq!(n.retry_failed("p", at), RetryEnd::Waiting);
            times.push(at.duration_since(t0).as_secs());
            at = n.next_wakeup().unwrap();
        }
        assert_eq!(times, [1, 3, 7, 11]);
        // A cluster event brings the retry forward, but not closer than the initial wait to the
        // last decision.
        n.retry_all_now(t0 + Duration::from_secs(11));
        assert_eq!(n.next_wakeup(), Some(t0 + Duration::from_secs(12)));
        n.retry_all_now(t0 + Duration::from_secs(12));
        assert_eq!(n.take_due(t0 + Duration::from_secs(12)).len(), 1);
        // The victim goes while the pod is decided: no bind behind the decision's back...
        assert!(!n.pod_gone("v"));
        assert!(n.take_ready().is_empty());
        // ...but once the decision says it still fits nowhere else, it is ready for its node.
        assert_eq!(n.retry_failed("p", t0 + Duration::from_secs(12)), RetryEnd::Ready);
        assert_eq!(n.take_ready().len(), 1);
        assert_eq!(n.retry_failed("p", t0), RetryEnd::Gone);

        // A victim that never goes: the nomination expires at its deadline, not while retried.
        n.add(queued("q"), "n2".into(), ["w".to_string()], (), t0);
        let deadline = t0 + Duration::from_secs(30);
        assert_eq!(n.take_due(deadline - Duration::from_secs(1)).len(), 1);
        assert!(n.take_expired(deadline).is_empty(), "not while it is decided");
        n.retry_failed("q", deadline);
        assert!(n.take_due(deadline).is_empty(), "no retry at or past the deadline");
        let expired = n.take_expired(deadline);
        assert_eq!((expired.len(), expired[0].node.as_str()), (1, "n2"));
        assert_eq!(n.waiting(), 0);

        // A deleted nominated node ends its nominations at once.
        n.add(queued("r"), "n3".into(), ["x".to_string()], (), t0);
        n.node_gone("n3", t0);
        assert_eq!(n.take_expired(t0).len(), 1);
    }

    #[test]
    fn a_victim_is_marked_for_deletion_once_until_it_is_gone() {
        let mut n: Nominations<()> = Nominations::default();
        assert!(n.mark_preempted("v"));
        assert!(!n.mark_preempted("v"), "asked for already");
        n.pod_gone("v");
        assert!(n.mark_preempted("v"), "gone: forgotten");
        n.unmark_preempted("v");
        assert!(n.mark_preempted("v"));
    }
}
