//! The scheduling queue, shaped like kube-scheduler's: an active queue ordered by priority then age,
//! a backoff queue for pods that failed, and an unschedulable pool whose pods move back when a
//! cluster event could make them fit (a node added or changed, a pod deleted) or after a while.
//!
//! Every pending pod is in exactly one place: active, backoff, unschedulable, gated or in flight
//! (popped and not yet decided or bound). A gated pod (non-empty `spec.schedulingGates`) waits,
//! as behind kube-scheduler's `SchedulingGates` PreEnqueue plugin, for the update that removes its
//! last gate; no other cluster event and no timeout moves it. Heaps are cleaned lazily: an entry is valid only if its
//! generation matches the pod's.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use crate::projection::PodInfo;

/// Queue timing.
#[derive(Debug, Clone)]
pub struct QueueConfig {
    /// Backoff after the first failure (kube-scheduler: 1s).
    pub initial_backoff: Duration,
    /// Longest backoff (kube-scheduler: 10s).
    pub max_backoff: Duration,
    /// Longest stay in the unschedulable pool without a cluster event (kube-scheduler: 5m).
    pub max_unschedulable: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            max_unschedulable: Duration::from_secs(300),
        }
    }
}

/// Where a pending pod is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Waiting to be scheduled.
    Active,
    /// Waiting out a backoff until the instant.
    Backoff(Instant),
    /// Found unschedulable at the instant; waiting for a cluster event.
    Unschedulable(Instant),
    /// Popped: being decided or bound.
    InFlight,
    /// HeldSnapshot by scheduling gates until an update removes the last one.
    Gated,
}

/// A pending pod and its scheduling history.
#[derive(Debug, Clone)]
pub struct QueuedPod {
    /// The pod.
    pub info: PodInfo,
    /// Scheduling attempts so far.
    pub attempts: u32,
    /// When the binder first saw it (for end-to-end latency; reset when its last scheduling gate
    /// goes, as kube-scheduler's scheduling SLI excludes gated time).
    pub first_seen: Instant,
    /// When its current scheduling attempt began (popped, or taken into a gang's batch): the
    /// start of kube-scheduler's `scheduler_scheduling_attempt_duration_seconds`.
    pub popped_at: Instant,
    /// The order it was added to the queue in (kube-scheduler's `QueuedPodInfo.Timestamp`, set
    /// when the pod is added and kept through updates and ungating): a PodGroup's members are
    /// placed in this order (kube's `PodGroupMemberPodsOrderingFunc`).
    pub arrival: u64,
    generation: u64,
    place: Place,
    /// Set while a gang's PreEnqueue holds it (its place is then a backoff until the hold ends).
    held: Option<Held>,
}

#[derive(Debug, PartialEq, Eq)]
struct ActiveKey {
    priority: i32,
    created_ms: i64,
    seq: u64,
    uid: String,
    generation: u64,
}

impl Ord for ActiveKey {
    fn cmp(&self, other: &Self) -> Ordering {
        // Max-heap: higher priority first, then older, then first queued.
        self.priority
            .cmp(&other.priority)
            .then(other.created_ms.cmp(&self.created_ms))
            .then(other.seq.cmp(&self.seq))
    }
}

impl PartialOrd for ActiveKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Sizes of the queue's parts, for `scheduler_pending_pods{queue}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// Active.
    pub active: usize,
    /// Backoff.
    pub backoff: usize,
    /// Unschedulable.
    pub unschedulable: usize,
    /// In flight.
    pub in_flight: usize,
    /// Gated (kube-scheduler's `gated` queue label): scheduling gates, and members a gang's
    /// PreEnqueue holds (kube counts pods its PreEnqueue plugins reject as gated).
    pub gated: usize,
    /// PodGroup members held because their PodGroup (or its hierarchy's root) is not there yet
    /// (kube 1.37's `incomplete` queue label, `incompletePodGroupPods`).
    pub incomplete: usize,
    /// Of `gated` and `incomplete`: members a gang's PreEnqueue holds until their group is
    /// complete or its wait times out (they come back to the active queue by themselves).
    pub held: usize,
}

/// Why a gang's PreEnqueue holds a member: the queue it is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Its gang or PodGroup is short of members, or one of them is gated (`gated`).
    Gated,
    /// Its PodGroup is not there yet (`incomplete`).
    Incomplete,
}

/// The scheduling queue.
#[derive(Debug, Default)]
pub struct SchedulingQueue {
    config: QueueConfig,
    pods: HashMap<String, QueuedPod>,
    active: BinaryHeap<ActiveKey>,
    backoff: BinaryHeap<Reverse<(Instant, u64, String)>>,
    seq: u64,
    arrivals: u64,
    counts: QueueCounts,
}

impl SchedulingQueue {
    /// An empty queue.
    pub fn new(config: QueueConfig) -> Self {
        Self {
            config,
            ..Default::default()
        }
    }

    fn count(&mut self, place: Place, held: Option<Held>, delta: isize) {
        if held.is_some() && matches!(place, Place::Backoff(_)) {
            self.counts.held = self.counts.held.saturating_add_signed(delta);
        }
        let c = match (place, held) {
            (Place::Backoff(_), Some(Held::Gated)) => &mut self.counts.gated,
            (Place::Backoff(_), Some(Held::Incomplete)) => &mut self.counts.incomplete,
            (place, _) => match place {
                Place::Active => &mut self.counts.active,
                Place::Backoff(_) => &mut self.counts.backoff,
                Place::Unschedulable(_) => &mut self.counts.unschedulable,
                Place::InFlight => &mut self.counts.in_flight,
                Place::Gated => &mut self.counts.gated,
            },
        };
        *c = c.saturating_add_signed(delta);
    }

    fn place(&mut self, uid: &str, place: Place) {
        self.place_held(uid, place, None);
    }

    fn place_held(&mut self, uid: &str, place: Place, held: Option<Held>) {
        self.seq += 1;
        let seq = self.seq;
        let Some(p) = self.pods.get_mut(uid) else {
            return;
        };
        let (old, old_held) = (p.place, p.held);
        p.generation = seq;
        p.place = place;
        p.held = held;
        let key = match place {
            Place::Active => Some(ActiveKey {
                priority: p.info.spec.priority,
                created_ms: p.info.created_ms,
                seq,
                uid: uid.to_string(),
                generation: seq,
            }),
            _ => None,
        };
        self.count(old, old_held, -1);
        self.count(place, held, 1);
        if let Some(k) = key {
            self.active.push(k);
        }
        if let Place::Backoff(until) = place {
            self.backoff.push(Reverse((until, seq, uid.to_string())));
        }
    }

    /// Adds a new pending pod, or updates one already queued. An update to a pod in the
    /// unschedulable pool moves it to the active queue (it may fit now). A pod with scheduling
    /// gates is parked as gated; the update that removes its last gate makes it active (and
    /// its end-to-end latency starts then, as kube-scheduler's scheduling SLI excludes gated
    /// time). Returns whether the pod became schedulable: new and ungated, or ungated now.
    pub fn add_or_update(&mut self, info: PodInfo, now: Instant) -> bool {
        let uid = info.spec.uid.clone();
        let gated = info.is_gated();
        match self.pods.get_mut(&uid) {
            Some(p) => {
                let changed = p.info.spec != info.spec;
                p.info = info;
                match p.place {
                    Place::Gated if !gated => {
                        p.first_seen = now;
                        self.place(&uid, Place::Active);
                        true
                    }
                    // The API server refuses to add gates to a pod; a view that shows gates again
                    // is stale, and a pod in flight is not pulled back.
                    Place::Gated | Place::InFlight => false,
                    _ if gated => {
                        self.place(&uid, Place::Gated);
                        false
                    }
                    Place::Unschedulable(_) if changed => {
                        self.place(&uid, Place::Active);
                        false
                    }
                    _ => false,
                }
            }
            None => {
                self.arrivals += 1;
                self.pods.insert(
                    uid.clone(),
                    QueuedPod {
                        info,
                        attempts: 0,
                        first_seen: now,
                        popped_at: now,
                        arrival: self.arrivals,
                        generation: 0,
                        place: Place::InFlight,
                        held: None,
                    },
                );
                self.counts.in_flight += 1;
                self.place(&uid, if gated { Place::Gated } else { Place::Active });
                !gated
            }
        }
    }

    /// Forgets a pod (deleted, bound, or no longer ours). Returns it if it was queued.
    pub fn remove(&mut self, uid: &str) -> Option<QueuedPod> {
        let p = self.pods.remove(uid)?;
        self.count(p.place, p.held, -1);
        Some(p)
    }

    /// Whether the pod is queued anywhere (in flight included).
    pub fn contains(&self, uid: &str) -> bool {
        self.pods.contains_key(uid)
    }

    /// Where a pod is.
    pub fn place_of(&self, uid: &str) -> Option<Place> {
        self.pods.get(uid).map(|p| p.place)
    }

    /// Moves backoff pods whose time has come, and unschedulable pods that waited too long, to active.
    fn flush(&mut self, now: Instant) {
        while let Some(Reverse((until, generation, uid))) = self.backoff.peek().cloned() {
            if until > now {
                break;
            }
            self.backoff.pop();
            if self.pods.get(&uid).is_some_and(|p| p.generation == generation) {
                self.place(&uid, Place::Active);
            }
        }
        let stale: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, p)| matches!(p.place, Place::Unschedulable(since) if now.duration_since(since) >= self.config.max_unschedulable))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in stale {
            self.place(&uid, Place::Active);
        }
    }

    /// Pops up to `max` pods, highest priority then oldest first, and marks them in flight.
    pub fn pop_batch(&mut self, max: usize, now: Instant) -> Vec<QueuedPod> {
        self.flush(now);
        let mut out = Vec::with_capacity(max.min(self.counts.active));
        while out.len() < max {
            let Some(k) = self.active.pop() else { break };
            let valid = self
                .pods
                .get(&k.uid)
                .is_some_and(|p| p.generation == k.generation && p.place == Place::Active);
            if !valid {
                continue;
            }
            self.place(&k.uid, Place::InFlight);
            if let Some(p) = self.pods.get_mut(&k.uid) {
                p.attempts += 1;
                p.popped_at = now;
                out.push(p.clone());
            }
        }
        out
    }

    /// Active pods ready to pop now (after flushing due backoffs).
    pub fn ready(&mut self, now: Instant) -> usize {
        self.flush(now);
        self.counts.active
    }

    fn backoff_for(&self, attempts: u32) -> Duration {
        let shift = attempts.saturating_sub(1).min(20);
        self.config
            .initial_backoff
            .saturating_mul(1u32 << shift)
            .min(self.config.max_backoff)
    }

    /// Puts an in-flight pod in backoff after a failure (decision error, bind error).
    pub fn backoff(&mut self, uid: &str, now: Instant) {
        let Some(attempts) = self.pods.get(uid).map(|p| p.attempts) else {
            return;
        };
        let until = now + self.backoff_for(attempts);
        self.place(uid, Place::Backoff(until));
    }

    /// How long the pod's current scheduling attempt has taken (zero for a pod no longer queued).
    pub fn attempt_duration(&self, uid: &str) -> Duration {
        self.pods.get(uid).map(|p| p.popped_at.elapsed()).unwrap_or_default()
    }

    /// Returns an in-flight pod to the active queue at once (e.g. its batch never reached a replica).
    pub fn retry_now(&mut self, uid: &str) {
        if let Some(p) = self.pods.get_mut(uid) {
            p.attempts = p.attempts.saturating_sub(1);
            self.place(uid, Place::Active);
        }
    }

    /// Holds an in-flight pod, without counting an attempt, until `until` or until
    /// [`SchedulingQueue::activate_where`] releases it (a gang waiting for its members).
    pub fn hold(&mut self, uid: &str, until: Instant, why: Held) {
        if let Some(p) = self.pods.get_mut(uid) {
            p.attempts = p.attempts.saturating_sub(1);
            self.place_held(uid, Place::Backoff(until), Some(why));
        }
    }

    /// Moves the waiting (backoff or unschedulable) pods that match to the active queue.
    pub fn activate_where(&mut self, matches: impl Fn(&PodInfo) -> bool) {
        let waiting: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, p)| matches!(p.place, Place::Backoff(_) | Place::Unschedulable(_)) && matches(&p.info))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in waiting {
            self.place(&uid, Place::Active);
        }
    }

    /// The queued pods that match, with where they are.
    pub fn find(&self, matches: impl Fn(&PodInfo) -> bool) -> Vec<(String, Place, Instant)> {
        self.pods
            .iter()
            .filter(|(_, p)| matches(&p.info))
            .map(|(uid, p)| (uid.clone(), p.place, p.first_seen))
            .collect()
    }

    /// Pops one waiting (active, backoff or unschedulable) pod out of turn, in flight, to join a
    /// batch (a gang's member). A gated or in-flight pod is not taken.
    pub fn take(&mut self, uid: &str) -> Option<QueuedPod> {
        let place = self.pods.get(uid)?.place;
        if matches!(place, Place::InFlight | Place::Gated) {
            return None;
        }
        self.place(uid, Place::InFlight);
        let p = self.pods.get_mut(uid)?;
        p.attempts += 1;
        p.popped_at = Instant::now();
        Some(p.clone())
    }

    /// Parks an in-flight pod that fits no node until a cluster event.
    pub fn unschedulable(&mut self, uid: &str, now: Instant) {
        if self.pods.contains_key(uid) {
            self.place(uid, Place::Unschedulable(now));
        }
    }

    /// A cluster event that could make pods fit: every unschedulable pod goes to backoff, or to
    /// active when its backoff has already passed (kube-scheduler's `MoveAllToActiveOrBackoffQueue`).
    pub fn move_all_unschedulable(&mut self, now: Instant) {
        self.move_unschedulable_where(now, |_| true);
    }

    /// [`SchedulingQueue::move_all_unschedulable`] for the unschedulable pods that match only (an
    /// event that can only make those fit).
    pub fn move_unschedulable_where(&mut self, now: Instant, matches: impl Fn(&PodInfo) -> bool) {
        let parked: Vec<(String, Instant, u32)> = self
            .pods
            .iter()
            .filter_map(|(uid, p)| match p.place {
                Place::Unschedulable(since) if matches(&p.info) => Some((uid.clone(), since, p.attempts)),
                _ => None,
            })
            .collect();
        for (uid, since, attempts) in parked {
            let until = since + self.backoff_for(attempts);
            let place = if until <= now {
                Place::Active
            } else {
                Place::Backoff(until)
            };
            self.place(&uid, place);
        }
    }

    /// When the next backoff ends, if any pod is backing off.
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.backoff
            .iter()
            .filter(|Reverse((_, g, uid))| self.pods.get(uid).is_some_and(|p| p.generation == *g))
            .map(|Reverse((t, _, _))| *t)
            .min()
    }

    /// Sizes of the queue's parts.
    pub fn counts(&self) -> QueueCounts {
        self.counts
    }

    /// Number of pods queued anywhere.
    pub fn len(&self) -> usize {
        self.pods.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placement_scheduler::proto;

    fn info(uid: &str, priority: i32, created_ms: i64) -> PodInfo {
        PodInfo {
            spec: proto::Pod {
                uid: uid.into(),
                priority,
                ..Default::default()
            },
            scheduler_name: "placement-scheduler".into(),
            created_ms,
            terminal: false,
            deleting: false,
            ..PodInfo::default()
        }
    }

    fn uids(pods: &[QueuedPod]) -> Vec<&str> {
        pods.iter().map(|p| p.info.spec.uid.as_str()).collect()
    }

    #[test]
    fn priority_then_age_order() {
        let now = Instant::now();
        let mut q = SchedulingQueue::new(QueueConfig::default());
        q.add_or_update(info("low-old", 0, 1), now);
        q.add_or_update(info("high-new", 10, 5), now);
        q.add_or_update(info("low-new", 0, 3), now);
        q.add_or_update(info("high-old", 10, 2), now);
        assert_eq!(
            uids(&q.pop_batch(10, now)),
            ["high-old", "high-new", "low-old", "low-new"]
        );
        assert_eq!(q.counts().in_flight, 4);
    }

    #[test]
    fn batches_are_cut_by_size() {
        let now = Instant::now();
        let mut q = SchedulingQueue::new(QueueConfig::default());
        for i in 0..5 {
            q.add_or_update(info(&format!("p{i}"), 0, i), now);
        }
        assert_eq!(q.pop_batch(2, now).len(), 2);
        assert_eq!(q.pop_batch(2, now).len(), 2);
        assert_eq!(q.pop_batch(2, now).len(), 1);
        assert!(q.pop_batch(2, now).is_empty());
    }

    #[test]
    fn backoff_doubles_up_to_the_maximum() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::new(QueueConfig::default());
        q.add_or_update(info("p", 0, 0), t0);
        let mut now = t0;
        for expected in [1u64, 2, 4, 8, 10, 10] {
            assert_eq!(q.pop_batch(1, now).len(), 1);
            q.backoff("p", now);
            assert!(q
                .pop_batch(1, now + Duration::from_millis(expected * 1000 - 1))
                .is_empty());
            now += Duration::from_secs(expected);
            assert_eq!(q.ready(now), 1, "ready after {expected}s");
        }
    }

    #[test]
    fn unschedulable_pods_wait_for_a_cluster_event() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::new(QueueConfig::default());
        q.add_or_update(info("p", 0, 0), t0);
        q.pop_batch(1, t0);
        q.unschedulable("p", t0);
        let later = t0 + Duration::from_secs(60);
        assert_eq!(q.ready(later), 0, "no event, no retry");
        q.move_all_unschedulable(later);
        assert_eq!(q.ready(later), 1, "a node event brings it back");
        // Without events, it comes back after max_unschedulable.
        q.pop_batch(1, later);
        q.unschedulable("p", later);
        assert_eq!(q.ready(later + Duration::from_secs(299)), 0);
        assert_eq!(q.ready(later + Duration::from_secs(300)), 1);
    }

    #[test]
    fn an_event_right_after_failure_waits_out_the_backoff() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::new(QueueConfig::default());
        q.add_or_update(info("p", 0, 0), t0);
        q.pop_batch(1, t0);
        q.unschedulable("p", t0);
        q.move_all_unschedulable(t0);
        assert_eq!(q.place_of("p"), Some(Place::Backoff(t0 + Duration::from_secs(1))));
        assert_eq!(q.next_wakeup(), Some(t0 + Duration::from_secs(1)));
    }

    #[test]
    fn a_selective_event_moves_only_the_matching_unschedulable_pods() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::new(QueueConfig::default());
        q.add_or_update(info("a", 0, 0), t0);
        q.add_or_update(info("b", 0, 1), t0);
        q.pop_batch(2, t0);
        q.unschedulable("a", t0);
        q.unschedulable("b", t0);
        let later = t0 + Duration::from_secs(5);
        q.move_unschedulable_where(later, |i| i.spec.uid == "a");
        assert_eq!(q.place_of("a"), Some(Place::Active));
        assert_eq!(q.place_of("b"), Some(Place::Unschedulable(t0)));
    }

    fn gated(uid: &str, gates: &[&str]) -> PodInfo {
        PodInfo {
            scheduling_gates: gates.iter().map(|g| g.to_string()).collect(),
            ..info(uid, 0, 0)
        }
    }

    #[test]
    fn a_gated_pod_waits_for_the_update_that_removes_its_last_gate() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::new(QueueConfig::default());
        assert!(!q.add_or_update(gated("g", &["a", "b"]), t0), "gated on arrival");
        assert!(
            q.add_or_update(info("free", 0, 1), t0),
            "an ungated pod is schedulable at once"
        );
        assert_eq!(q.place_of("g"), Some(Place::Gated));
        assert_eq!(q.counts().gated, 1);
        assert_eq!(uids(&q.pop_batch(10, t0)), ["free"]);
        // No cluster event, no timeout and no gang pull moves a gated pod.
        let later = t0 + Duration::from_secs(3600);
        q.move_all_unschedulable(later);
        q.activate_where(|_| true);
        assert!(q.take("g").is_none());
        assert!(q.pop_batch(10, later).is_empty());
        // One gate of two removed: still gated.
        assert!(!q.add_or_update(gated("g", &["b"]), later));
        assert_eq!(q.place_of("g"), Some(Place::Gated));
        // The last gate removed: active, its latency counted from now.
        assert!(q.add_or_update(gated("g", &[]), later));
        assert_eq!(q.counts().gated, 0);
        let popped = q.pop_batch(10, later);
        assert_eq!(uids(&popped), ["g"]);
        assert_eq!(popped[0].first_seen, later);
        assert_eq!(popped[0].attempts, 1);
        // Removed while gated, nothing is left behind.
        q.add_or_update(gated("h", &["a"]), later);
        q.remove("h");
        assert_eq!(q.counts().gated, 0);
    }

    #[test]
    fn removal_and_updates_never_duplicate_a_pod() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::new(QueueConfig::default());
        q.add_or_update(info("p", 0, 0), t0);
        q.add_or_update(info("p", 5, 0), t0);
        assert_eq!(q.pop_batch(10, t0).len(), 1);
        q.add_or_update(info("p", 5, 0), t0);
        assert!(q.pop_batch(10, t0).is_empty(), "in flight pods are not popped twice");
        q.remove("p");
        assert!(q.is_empty());
        assert_eq!(q.counts(), QueueCounts::default());
    }
}
