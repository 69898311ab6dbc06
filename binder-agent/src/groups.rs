//! Preemptions in progress and gangs waiting for their members.
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
//! **Gangs.** A pod labelled `placement.dev/gang` with the annotation
//! `placement.dev/gang-min-members` is held (not sent) until the gang's members pending plus those
//! already scheduled reach the minimum; then every pending member is sent in the same batch, where
//! the decision service places all of them or none. A gang still short after `gang_timeout` (counted
//! from its first member's arrival) is reported unschedulable on each member; a new member
//! releases the held ones at once.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use placement_scheduler::proto;
use tokio::time::Instant;

use crate::model::PodInfo;
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
}

/// Preemptions in progress, by preemptor uid.
#[derive(Debug)]
pub struct Nominations<T> {
    by_preemptor: HashMap<String, Nomination<T>>,
    /// Nominations whose victims are all gone, to bind.
    ready: Vec<(QueuedPod, String, T)>,
}

impl<T> Default for Nominations<T> {
    fn default() -> Self {
        Self {
            by_preemptor: HashMap::new(),
            ready: Vec::new(),
        }
    }
}

impl<T> Nominations<T> {
    /// Tracks a nomination; one with no victim left is ready at once.
    pub fn add(&mut self, pod: QueuedPod, node: String, victims: impl IntoIterator<Item = String>, extra: T) {
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
            },
        );
    }

    /// A pod is gone: as a victim, it may complete nominations; as a preemptor, its own ends.
    /// Returns whether some nomination became ready.
    pub fn pod_gone(&mut self, uid: &str) -> bool {
        self.by_preemptor.remove(uid);
        let done: Vec<String> = self
            .by_preemptor
            .iter_mut()
            .filter_map(|(p, n)| (n.waiting_for.remove(uid) && n.waiting_for.is_empty()).then(|| p.clone()))
            .collect();
        for p in &done {
            if let Some(n) = self.by_preemptor.remove(p) {
                self.ready.push((n.pod, n.node, n.extra));
            }
        }
        !done.is_empty()
    }

    /// Drops a nomination (a victim could not be preempted).
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
}

/// `namespace/name` of the pod's gang, if it declares one.
pub fn gang_key(pod: &proto::Pod) -> Option<String> {
    pod.gang.as_ref().map(|g| format!("{}/{}", pod.namespace, g.name))
}

/// What to do with a gang's members popped in a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GangVerdict {
    /// Enough members: send these too (uids of waiting members to pull into the batch).
    Send(Vec<String>),
    /// Not enough yet: hold the members until this instant.
    Hold(Instant),
    /// Waited too long: report each member unschedulable with this message.
    GiveUp(String),
}

/// Decides for one gang: `min_members` required, `in_batch` members popped, `waiting` members queued
/// elsewhere (uid, first seen), `in_flight` members being bound or nominated, `scheduled` members
/// bound or assumed, and the earliest arrival of any pending member.
#[allow(clippy::too_many_arguments)]
pub fn gang_verdict(
    key: &str,
    min_members: u32,
    in_batch: usize,
    waiting: &[String],
    in_flight: usize,
    scheduled: usize,
    first_seen: Instant,
    now: Instant,
    timeout: Duration,
) -> GangVerdict {
    let present = in_batch + waiting.len() + in_flight + scheduled;
    if present >= min_members as usize {
        return GangVerdict::Send(waiting.to_vec());
    }
    let deadline = first_seen + timeout;
    if now < deadline {
        return GangVerdict::Hold(deadline);
    }
    GangVerdict::GiveUp(format!(
        "gang {key:?} is not placed: it needs {min_members} members placed together, and only {present} \
         exist ({} pending, {scheduled} scheduled) after waiting {}s for the rest.",
        in_batch + waiting.len() + in_flight,
        timeout.as_secs_f64()
    ))
}

/// Whether `info` is a member of the gang `key`.
pub fn is_member(info: &PodInfo, key: &str) -> bool {
    gang_key(&info.spec).is_some_and(|k| k == key)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        };
        q.add_or_update(info, Instant::now());
        q.pop_batch(1, Instant::now()).remove(0)
    }

    #[test]
    fn a_nomination_is_ready_once_every_victim_is_gone() {
        let mut n = Nominations::default();
        n.add(queued("p"), "n1".into(), ["v1".to_string(), "v2".to_string()], ());
        assert!(!n.pod_gone("v1"));
        assert!(n.take_ready().is_empty());
        assert!(n.pod_gone("v2"));
        let ready = n.take_ready();
        assert_eq!((ready[0].0.info.spec.uid.as_str(), ready[0].1.as_str()), ("p", "n1"));
        assert_eq!(n.waiting(), 0);
        // A preemptor deleted while waiting is forgotten.
        n.add(queued("q"), "n1".into(), ["v3".to_string()], ());
        n.pod_gone("q");
        assert!(!n.pod_gone("v3"));
        assert!(n.take_ready().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn gangs_wait_for_members_then_give_up() {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(60);
        let w = vec!["b".to_string()];
        assert_eq!(
            gang_verdict("ml/g", 3, 1, &w, 0, 1, t0, t0, timeout),
            GangVerdict::Send(w.clone())
        );
        assert_eq!(
            gang_verdict("ml/g", 3, 1, &w, 0, 0, t0, t0 + Duration::from_secs(10), timeout),
            GangVerdict::Hold(t0 + timeout)
        );
        assert_eq!(
            gang_verdict("ml/g", 3, 1, &w, 0, 0, t0, t0 + timeout, timeout),
            GangVerdict::GiveUp(
                "gang \"ml/g\" is not placed: it needs 3 members placed together, and only 2 exist \
                 (2 pending, 0 scheduled) after waiting 60s for the rest."
                    .into()
            )
        );
    }
}
