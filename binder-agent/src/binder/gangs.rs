//! Gangs: members held back while their gang is short, pulled into the batch once it is complete,
//! reported when it waited too long or is declared wrong.
//!
//! A pod labelled `placement.dev/gang` with the annotation
//! `placement.dev/gang-min-members` is held (not sent) until the gang's members pending plus those
//! already scheduled reach the minimum; then every pending member is sent in the same batch, where
//! the decision service places all of them or none. A gang still short after `gang_timeout` (counted
//! from its first member's arrival) is reported unschedulable on each member; a new member
//! releases the held ones at once.
//!
//! A pod naming a PodGroup (`spec.schedulingGroup.podGroupName`, `scheduling.k8s.io/v1beta1`) is
//! held the same way by GangScheduling's PreEnqueue (kube's
//! `framework/plugins/gangscheduling/gangscheduling.go`): until its PodGroup is there, then until
//! its pods number `minCount` (1 for the basic policy), with nothing written and no time limit, as
//! kube-scheduler keeps them out of its queue; then the whole group goes in one batch, where the
//! decision service runs kube's PodGroup cycle for it. A group one of whose queued members still
//! has scheduling gates is held whole, as kube's queue gates the group's entity
//! (`backend/queue/scheduling_queue.go`, `runPreEnqueuePlugins`).
//!
//! A PodGroup naming a parent CompositePodGroup (`scheduling.k8s.io/v1alpha3`, served with kube's
//! `CompositePodGroup` gate) is part of a hierarchy that kube's queue keeps as one entity
//! (`backend/queue/workload_forest.go`): its pods are held until every CompositePodGroup up to
//! the root is known and the hierarchy is ready as GangScheduling's `isCPGTreeReady` counts it
//! (a PodGroup when its pods pending and scheduled reach minCount, a CompositePodGroup when
//! minGroupCount of its children are), then all the hierarchy's pending pods go in one batch.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use placement_scheduler::proto;

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::{pod_ref, Binder};
use crate::api::{ClusterApi, PodRef};
use crate::projection::{gang_problem, PodInfo};
use crate::queue::QueuedPod;

impl<A: ClusterApi> Binder<A> {
    /// Holds back gang members whose gang is short, pulls the waiting members of gangs that are
    /// complete into the batch, reports gangs that waited too long and invalid gang declarations.
    pub(super) fn gate_gangs(
        &self,
        mut batch: Vec<QueuedPod>,
        tasks: &mut JoinSet<()>,
        now: Instant,
    ) -> Vec<QueuedPod> {
        let _step = tracing::debug_span!("gate_gangs").entered();
        let s = &self.shared;
        // A PodGroup's members have no gang label: they are gated too.
        if batch
            .iter()
            .all(|p| p.info.spec.gang.is_none() && p.info.spec.scheduling_group.is_empty())
        {
            return batch;
        }
        let mut report: Vec<(PodRef, String)> = Vec::new();
        batch.retain(|p| match gang_problem(&p.info.spec) {
            Some(problem) => {
                report.push((pod_ref(&p.info.spec), problem));
                false
            }
            None => true,
        });
        let mut keys: Vec<GangKey> = batch.iter().filter_map(|p| gang_key(&p.info.spec)).collect();
        keys.sort();
        keys.dedup();
        // A PodGroup's minCount, read before the queue is locked: `None` for a group whose
        // PodGroup the watch has not shown (its pods wait for it).
        let pod_groups: HashMap<GangKey, Option<u32>> = {
            let st = s.state.lock();
            batch
                .iter()
                .filter(|p| p.info.spec.gang.is_none() && !p.info.spec.scheduling_group.is_empty())
                .map(|p| {
                    let spec = &p.info.spec;
                    // A group naming a parent CompositePodGroup not (yet) known waits for its
                    // hierarchy, as kube's PreEnqueue holds it ("failed to build hierarchy
                    // snapshot").
                    let min = st.pod_group(&spec.namespace, &spec.scheduling_group).map(|g| {
                        if !g.parent_composite_pod_group_name.is_empty()
                            && st.pod_group_tree(&spec.namespace, &spec.scheduling_group).is_none()
                        {
                            u32::MAX
                        } else {
                            g.gang.as_ref().map_or(1, |g| g.min_count.max(1) as u32)
                        }
                    });
                    (GangKey::pod_group(&spec.namespace, &spec.scheduling_group), min)
                })
                .collect()
        };
        // PodGroups in a CompositePodGroup hierarchy (served only with kube's CompositePodGroup
        // gate): the hierarchy is one entity in kube's queue, held until it meets its counts
        // level by level (GangScheduling's `isCPGTreeReady`), then sent whole.
        let trees: Vec<crate::state::PodGroupTree> = {
            let st = s.state.lock();
            let mut trees: Vec<crate::state::PodGroupTree> = Vec::new();
            for p in batch
                .iter()
                .filter(|p| p.info.spec.gang.is_none() && !p.info.spec.scheduling_group.is_empty())
            {
                let key = format!("{}/{}", p.info.spec.namespace, p.info.spec.scheduling_group);
                if trees.iter().any(|t| t.groups.iter().any(|(k, ..)| *k == key)) {
                    continue;
                }
                if let Some(t) = st.pod_group_tree(&p.info.spec.namespace, &p.info.spec.scheduling_group) {
                    trees.push(t);
                }
            }
            trees
        };
        let in_tree: HashSet<String> = trees
            .iter()
            .flat_map(|t| t.groups.iter().map(|(k, ..)| k.clone()))
            .collect();
        keys.retain(|k| !k.as_pod_group().is_some_and(|g| in_tree.contains(g)));
        // Members bound or assumed, by gang (the state is read before the queue is locked, the
        // order every other path takes).
        let mut placed: HashMap<GangKey, Vec<String>> = HashMap::new();
        for p in s.state.lock().pods() {
            let wanted =
                |k: &GangKey| keys.binary_search(k).is_ok() || k.as_pod_group().is_some_and(|g| in_tree.contains(g));
            if let Some(k) = gang_key(&p).filter(wanted) {
                placed.entry(k).or_default().push(p.uid.clone());
            }
        }
        let mut q = s.queue.lock();
        for (pod, _) in &report {
            q.unschedulable(&pod.uid, now);
        }
        for tree in &trees {
            let leaves: HashSet<&str> = tree.groups.iter().map(|(k, ..)| k.as_str()).collect();
            let of_leaf = |i: &PodInfo| gang_key(&i.spec).and_then(GangKey::into_pod_group);
            let member = |i: &PodInfo| of_leaf(i).is_some_and(|k| leaves.contains(k.as_str()));
            let in_batch: HashSet<String> = batch
                .iter()
                .filter(|p| member(&p.info))
                .map(|p| p.info.spec.uid.clone())
                .collect();
            let mut present: HashMap<String, usize> = HashMap::new();
            let mut waiting: Vec<String> = Vec::new();
            let mut gated = false;
            for leaf in &leaves {
                let queued = q.find(|i| of_leaf(i).is_some_and(|k| k == *leaf));
                let queued_uids: HashSet<&str> = queued.iter().map(|(uid, ..)| uid.as_str()).collect();
                let mut n = 0usize;
                for (uid, place, _) in &queued {
                    match place {
                        crate::queue::Place::Gated => gated = true,
                        _ if in_batch.contains(uid) => n += 1,
                        crate::queue::Place::InFlight => n += 1,
                        _ => {
                            n += 1;
                            waiting.push(uid.clone());
                        }
                    }
                }
                // Members bound or assumed (and not also still queued, as an assumed one is).
                n += placed.get(&GangKey::PodGroup(leaf.to_string())).map_or(0, |uids| {
                    uids.iter().filter(|u| !queued_uids.contains(u.as_str())).count()
                });
                present.insert(leaf.to_string(), n);
            }
            if !gated && tree.ready(&|k| present.get(k).copied().unwrap_or(0)) {
                s.metrics.gang("sent");
                batch.extend(waiting.iter().filter_map(|uid| q.take(uid)));
            } else {
                s.metrics.gang("held");
                for uid in &in_batch {
                    q.hold(uid, now + s.config.gang_timeout, crate::queue::Held::Gated);
                }
                batch.retain(|p| !in_batch.contains(&p.info.spec.uid));
            }
        }
        for key in keys {
            let in_batch: HashSet<String> = batch
                .iter()
                .filter(|p| is_member(&p.info, &key))
                .map(|p| p.info.spec.uid.clone())
                .collect();
            let pod_group = pod_groups.get(&key).copied();
            let min_members = match pod_group {
                Some(Some(min_count)) => min_count,
                // No PodGroup yet: held until it comes (its watch event releases the pods).
                Some(None) => u32::MAX,
                None => batch
                    .iter()
                    .filter(|p| in_batch.contains(&p.info.spec.uid))
                    .filter_map(|p| p.info.spec.gang.as_ref().map(|g| g.min_members))
                    .max()
                    .unwrap_or(1),
            };
            let queued = q.find(|i| is_member(i, &key));
            // Gated members are not there yet: the gang waits for their gates to go.
            let waiting: Vec<String> = queued
                .iter()
                .filter(|(uid, place, _)| {
                    !in_batch.contains(uid)
                        && !matches!(place, crate::queue::Place::InFlight | crate::queue::Place::Gated)
                })
                .map(|(uid, ..)| uid.clone())
                .collect();
            let in_flight = queued
                .iter()
                .filter(|(uid, place, _)| !in_batch.contains(uid) && *place == crate::queue::Place::InFlight)
                .count();
            // Members bound or assumed (and not also still queued, as an assumed one is).
            let queued_uids: HashSet<&str> = queued.iter().map(|(uid, ..)| uid.as_str()).collect();
            let scheduled = placed.get(&key).map_or(0, |uids| {
                uids.iter().filter(|u| !queued_uids.contains(u.as_str())).count()
            });
            let first_seen = queued
                .iter()
                .filter(|(_, place, _)| *place != crate::queue::Place::Gated)
                .map(|(.., seen)| *seen)
                .min()
                .unwrap_or(now);
            let verdict = gang_verdict(
                &key.to_string(),
                min_members,
                in_batch.len(),
                &waiting,
                in_flight,
                scheduled,
                first_seen,
                now,
                s.config.gang_timeout,
            );
            // A PodGroup's queued members are one entity in kube-scheduler's queue: one member
            // gated (`spec.schedulingGates`) gates the whole entity (`runPreEnqueuePlugins`), so
            // none is scheduled, and nothing is written, until the last gate goes (its update
            // releases them), whether or not the others alone meet minCount.
            let gated = pod_group.is_some() && queued.iter().any(|(_, place, _)| *place == crate::queue::Place::Gated);
            let verdict = match verdict {
                _ if gated => GangVerdict::Hold(now + s.config.gang_timeout),
                // kube-scheduler never gives up on a PodGroup's PreEnqueue: it waits, writing
                // nothing, until the group or its pods change.
                GangVerdict::GiveUp(_) if pod_group.is_some() => GangVerdict::Hold(now + s.config.gang_timeout),
                v => v,
            };
            match verdict {
                GangVerdict::Send(pull) => {
                    s.metrics.gang("sent");
                    batch.extend(pull.iter().filter_map(|uid| q.take(uid)));
                }
                GangVerdict::Hold(until) => {
                    s.metrics.gang("held");
                    // kube 1.37's queue keeps a PodGroup's pods whose group (or hierarchy root)
                    // it has not observed apart, counted as `incomplete`; those its PreEnqueue
                    // rejects count as `gated`.
                    let why = match pod_group {
                        Some(None) | Some(Some(u32::MAX)) => crate::queue::Held::Incomplete,
                        _ => crate::queue::Held::Gated,
                    };
                    for uid in &in_batch {
                        q.hold(uid, until, why);
                    }
                    batch.retain(|p| !in_batch.contains(&p.info.spec.uid));
                }
                GangVerdict::GiveUp(message) => {
                    s.metrics.gang("timed_out");
                    for p in batch.iter().filter(|p| in_batch.contains(&p.info.spec.uid)) {
                        q.unschedulable(&p.info.spec.uid, now);
                        report.push((pod_ref(&p.info.spec), message.clone()));
                    }
                    batch.retain(|p| !in_batch.contains(&p.info.spec.uid));
                }
            }
        }
        self.update_queue_gauges(&q);
        drop(q);
        for (pod, message) in report {
            self.spawn_unschedulable(tasks, pod, message);
        }
        in_member_order(batch)
    }
}

/// The batch with each gang's members together, at the place of its first member, in the order
/// kube-scheduler's queue keeps a PodGroup's pods (`PodGroupMemberPodsOrderingFunc` in
/// `pkg/scheduler/framework/types.go`): higher priority first, then more attempts, then earlier
/// arrival in the queue, then name. The decision service places a group's members in the order
/// given, so the order decides where each one lands. Other pods keep their places.
pub(super) fn in_member_order(batch: Vec<QueuedPod>) -> Vec<QueuedPod> {
    if batch.iter().all(|p| gang_key(&p.info.spec).is_none()) {
        return batch;
    }
    let mut members: HashMap<GangKey, Vec<QueuedPod>> = HashMap::new();
    // Each pod's slot: a pod outside any gang, or the first member of a gang.
    let mut slots: Vec<Result<QueuedPod, GangKey>> = Vec::with_capacity(batch.len());
    for p in batch {
        match gang_key(&p.info.spec) {
            None => slots.push(Ok(p)),
            Some(key) => {
                let group = members.entry(key.clone()).or_default();
                if group.is_empty() {
                    slots.push(Err(key));
                }
                group.push(p);
            }
        }
    }
    let mut out = Vec::with_capacity(slots.len());
    for slot in slots {
        match slot {
            Ok(p) => out.push(p),
            Err(key) => {
                let mut group = members.remove(&key).unwrap_or_default();
                group.sort_by(|a, b| {
                    b.info
                        .spec
                        .priority
                        .cmp(&a.info.spec.priority)
                        .then(b.attempts.cmp(&a.attempts))
                        .then(a.arrival.cmp(&b.arrival))
                        .then_with(|| a.info.spec.name.cmp(&b.info.spec.name))
                });
                out.extend(group);
            }
        }
    }
    out
}

impl<A: ClusterApi> Binder<A> {
    /// Writes each decided PodGroup's `PodGroupInitiallyScheduled` condition (kube's
    /// `updatePodGroupCondition`): not for a group gone meanwhile, and a True condition is not
    /// turned False by a later cycle for the group's extra pods.
    pub(super) fn spawn_pod_group_conditions(&self, results: Vec<proto::PodGroupResult>, tasks: &mut JoinSet<()>) {
        let s = &self.shared;
        for r in results {
            s.metrics.pod_group_cycle(&r.reason);
            let scheduled = r.reason == "Scheduled";
            let (generation, current) = {
                let mut st = s.state.lock();
                let Some(g) = st.pod_group(&r.namespace, &r.name) else {
                    continue;
                };
                let (generation, initially) = (g.generation, g.initially_scheduled);
                let current = st.pod_group_condition(&r.namespace, &r.name).cloned();
                let true_already = initially || current.as_ref().is_some_and(|c| c.status == "True");
                if true_already && !scheduled {
                    continue;
                }
                if scheduled {
                    // Seen True from now on, before the watch shows the write: a cycle for the
                    // group's extra pods in between must not turn it False (kube reads the
                    // condition from its cache, where its own write is at once).
                    let at = current
                        .as_ref()
                        .filter(|c| c.status == "True")
                        .map(|c| c.last_transition_time.clone())
                        .unwrap_or_else(|| k8s_openapi::jiff::Timestamp::now().to_string());
                    st.set_pod_group_condition(
                        &crate::projection::pod_group_key(&r.namespace, &r.name),
                        Some(crate::api::ObservedCondition {
                            status: "True".into(),
                            reason: r.reason.clone(),
                            message: r.message.clone(),
                            observed_generation: generation,
                            last_transition_time: at,
                        }),
                    );
                }
                (generation, current)
            };
            let condition = crate::api::PodGroupCondition {
                namespace: r.namespace,
                name: r.name,
                scheduled,
                reason: r.reason,
                message: r.message,
                observed_generation: generation,
                current,
            };
            let this = self.clone();
            tasks.spawn(async move {
                if !*this.shared.leader.borrow() {
                    return;
                }
                match this.shared.api.record_pod_group_condition(&condition).await {
                    Ok(()) => this.shared.metrics.pod_group_condition_update("ok"),
                    Err(e) => {
                        this.shared.metrics.pod_group_condition_update("error");
                        tracing::warn!(pod_group = %format!("{}/{}", condition.namespace, condition.name), error = %e,
                            "failed to update the PodGroup's PodGroupInitiallyScheduled condition");
                    }
                }
            });
        }
    }
}

/// A gang: placement's gang label or a PodGroup, each `namespace/name` in a kind of its own, so a
/// label gang is never taken for the PodGroup of the same name (both read `namespace/name`, as
/// [`std::fmt::Display`] writes them in messages and logs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum GangKey {
    /// The gang the label `placement.dev/gang` names, in the pod's namespace.
    Label(String),
    /// The PodGroup the pod's `spec.schedulingGroup` names, in its namespace.
    PodGroup(String),
}

impl GangKey {
    /// The PodGroup `name` in `namespace`.
    pub(super) fn pod_group(namespace: &str, name: &str) -> Self {
        Self::PodGroup(format!("{namespace}/{name}"))
    }

    /// `namespace/name` of a PodGroup; `None` for a label gang.
    pub(super) fn as_pod_group(&self) -> Option<&String> {
        match self {
            Self::PodGroup(k) => Some(k),
            Self::Label(_) => None,
        }
    }

    /// [`GangKey::as_pod_group`], taken.
    pub(super) fn into_pod_group(self) -> Option<String> {
        match self {
            Self::PodGroup(k) => Some(k),
            Self::Label(_) => None,
        }
    }
}

impl std::fmt::Display for GangKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Label(k) | Self::PodGroup(k) => f.write_str(k),
        }
    }
}

/// The pod's gang, if it declares one: placement's gang label, else the PodGroup it names.
pub(super) fn gang_key(pod: &proto::Pod) -> Option<GangKey> {
    match &pod.gang {
        Some(g) => Some(GangKey::Label(format!("{}/{}", pod.namespace, g.name))),
        None if !pod.scheduling_group.is_empty() => Some(GangKey::pod_group(&pod.namespace, &pod.scheduling_group)),
        None => None,
    }
}

/// What to do with a gang's members popped in a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum GangVerdict {
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
pub(super) fn gang_verdict(
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
pub(super) fn is_member(info: &PodInfo, key: &GangKey) -> bool {
    gang_key(&info.spec).is_some_and(|k| k == *key)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pods popped from a queue in this order of arrival, `(name, pod group)`.
    fn popped(pods: &[(&str, &str)]) -> Vec<QueuedPod> {
        let mut q = crate::queue::SchedulingQueue::new(Default::default());
        let now = Instant::now();
        for (name, group) in pods {
            q.add_or_update(
                PodInfo {
                    spec: proto::Pod {
                        uid: format!("uid-{name}"),
                        namespace: "ns".into(),
                        name: name.to_string(),
                        scheduling_group: group.to_string(),
                        ..Default::default()
                    },
                    ..PodInfo::default()
                },
                now,
            );
        }
        q.pop_batch(pods.len(), now)
    }

    fn names(batch: &[QueuedPod]) -> Vec<&str> {
        batch.iter().map(|p| p.info.spec.name.as_str()).collect()
    }

    #[test]
    fn a_groups_members_go_together_in_kubes_queue_order() {
        let mut batch = popped(&[
            ("plain-a", ""),
            ("g-late", "g"),
            ("h-0", "h"),
            ("g-early", "g"),
            ("plain-b", ""),
            ("g-high", "g"),
            ("g-retried", "g"),
            ("g-tie-b", "g"),
            ("g-tie-a", "g"),
        ]);
        // Shuffled as pulled members come (hash order), then kube's order restored.
        batch.reverse();
        for p in &mut batch {
            match p.info.spec.name.as_str() {
                "g-late" => p.arrival = 100,
                "g-early" => p.arrival = 1,
                "g-high" => p.info.spec.priority = 10,
                "g-retried" => p.attempts = 3,
                "g-tie-a" | "g-tie-b" => p.arrival = 50,
                _ => {}
            }
        }
        let ordered = in_member_order(batch);
        // Priority, then attempts, then arrival, then name; other pods keep their places and
        // the group sits where its first member was.
        assert_eq!(
            names(&ordered),
            [
                "g-high",
                "g-retried",
                "g-early",
                "g-tie-a",
                "g-tie-b",
                "g-late",
                "plain-b",
                "h-0",
                "plain-a"
            ]
        );
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
