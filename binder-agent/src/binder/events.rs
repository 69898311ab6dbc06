//! Cluster events in: each watch event applied to the state and the queue, and the pods it may
//! let fit moved back to the active queue (kube-scheduler's event handlers and queueing hints).

use placement_scheduler::proto;
use tokio::time::Instant;

use super::gangs::{gang_key, is_member, GangKey};
use super::{Binder, ClusterEvent};
use crate::api::ClusterApi;
use crate::projection::{PodInfo, TrackedKey, TrackedObject};

/// Whether any of the pod's affinity or anti-affinity terms selects namespaces by label.
fn uses_namespace_selector(p: &proto::Pod) -> bool {
    [&p.pod_affinity, &p.pod_anti_affinity].into_iter().flatten().any(|a| {
        a.required.iter().any(|t| t.namespace_selector.is_some())
            || a.preferred
                .iter()
                .any(|w| w.term.as_ref().is_some_and(|t| t.namespace_selector.is_some()))
    })
}

impl<A: ClusterApi> Binder<A> {
    fn schedules(&self, info: &PodInfo) -> bool {
        self.shared.config.scheduler_names.contains(&info.scheduler_name)
    }

    /// A pod deleted or finished: it leaves the queue and its node; the room it frees may let
    /// unschedulable pods fit (kube-scheduler's AssignedPodDelete event).
    fn pod_gone(&self, uid: &str, now: Instant) {
        let freed = self.shared.state.lock().delete_pod(uid);
        self.shared.whole_cluster_next.lock().remove(uid);
        {
            let mut nominations = self.shared.nominations.lock();
            if nominations.pod_gone(uid) {
                self.shared.wake.notify_one();
            }
            if freed && nominations.waiting() > 0 {
                // Room freed anywhere may fit a waiting preemptor elsewhere.
                nominations.retry_all_now(now);
                self.shared.wake.notify_one();
            }
        }
        self.shared.experiments.pod_gone(uid);
        let mut q = self.shared.queue.lock();
        q.remove(uid);
        if freed {
            q.move_all_unschedulable(now);
        }
        self.update_queue_gauges(&q);
    }

    /// A claim, volume, storage class, CSINode or DRA object changed: the unschedulable pods with
    /// volumes, resource claims or extended resources a DeviceClass backs may fit now
    /// (kube-scheduler requeues the pods its volume plugins and DynamicResources rejected on these
    /// events).
    fn storage_changed(&self, changed: bool, now: Instant) {
        if !changed {
            return;
        }
        let backed = crate::partitions::dra_extended_resources(self.shared.state.lock().device_classes().iter());
        let mut q = self.shared.queue.lock();
        q.move_unschedulable_where(now, |i| {
            !i.spec.volumes.is_empty()
                || !i.spec.resource_claims.is_empty()
                || crate::partitions::asks_dra_extended(&i.spec, &backed)
        });
        self.update_queue_gauges(&q);
        drop(q);
        self.shared.wake.notify_one();
    }

    /// Applies one cluster event to the state and the queue.
    pub fn handle(&self, event: ClusterEvent) {
        let _step = tracing::debug_span!("handle").entered();
        let now = Instant::now();
        let s = &self.shared;
        match event {
            ClusterEvent::NodeApplied(node) => {
                let changed = {
                    let mut st = s.state.lock();
                    let before = st.version();
                    st.apply_node(node);
                    st.version() != before
                };
                if changed {
                    let mut q = s.queue.lock();
                    q.move_all_unschedulable(now);
                    self.update_queue_gauges(&q);
                    drop(q);
                    s.nominations.lock().retry_all_now(now);
                    s.wake.notify_one();
                }
            }
            ClusterEvent::NodeDeleted(name) => {
                s.state.lock().delete_node(&name);
                // The room a preemptor waits for on that node never comes.
                s.nominations.lock().node_gone(&name, now);
                s.wake.notify_one();
            }
            ClusterEvent::NamespaceApplied(ns) => {
                let changed = {
                    let mut st = s.state.lock();
                    let before = st.version();
                    st.apply_namespace(ns);
                    st.version() != before
                };
                if changed {
                    // New namespace labels may now match (or stop matching) the namespaceSelector
                    // of an unschedulable pod's affinity terms.
                    let mut q = s.queue.lock();
                    q.move_unschedulable_where(now, |i| uses_namespace_selector(&i.spec));
                    self.update_queue_gauges(&q);
                    drop(q);
                    s.wake.notify_one();
                }
            }
            ClusterEvent::NamespaceDeleted(name) => s.state.lock().delete_namespace(&name),
            ClusterEvent::PdbApplied(pdb) => s.state.lock().apply_pdb(pdb),
            ClusterEvent::PdbDeleted(key) => s.state.lock().delete_pdb(&key),
            ClusterEvent::ObjectApplied(obj) => {
                // A PodGroup is no volume or device: it lets no such pod fit. Its pods held for it
                // (GangScheduling's PreEnqueue: the group added, or its minCount changed) are
                // looked at again.
                let group = match &obj {
                    TrackedObject::PodGroup(g) => {
                        Some((g.namespace.clone(), Some(GangKey::pod_group(&g.namespace, &g.name))))
                    }
                    // A CompositePodGroup may complete a hierarchy: the held pods of its
                    // namespace's PodGroups are looked at again.
                    TrackedObject::CompositePodGroup(g) => Some((g.namespace.clone(), None)),
                    _ => None,
                };
                let changed = s.state.lock().apply_storage(obj);
                self.storage_changed(changed && group.is_none(), now);
                if let Some((namespace, key)) = group.filter(|_| changed) {
                    let mut q = s.queue.lock();
                    q.activate_where(|i| match &key {
                        Some(key) => is_member(i, key),
                        None => i.spec.namespace == namespace && !i.spec.scheduling_group.is_empty(),
                    });
                    self.update_queue_gauges(&q);
                    drop(q);
                    s.wake.notify_one();
                }
                s.storage_seen.send_modify(|n| *n += 1);
            }
            ClusterEvent::PodGroupCondition { key, condition } => {
                s.state.lock().set_pod_group_condition(&key, condition);
            }
            ClusterEvent::DeviceObject(object) => s.claims.apply(object),
            ClusterEvent::ObjectDeleted(key) => {
                match &key {
                    TrackedKey::PodGroup(k) => s.state.lock().set_pod_group_condition(k, None),
                    TrackedKey::ResourceClaim(k) => s.claims.delete_claim(k),
                    TrackedKey::DeviceClass(name) => s.claims.delete_class(name),
                    _ => {}
                }
                let storage = !matches!(key, TrackedKey::PodGroup(_) | TrackedKey::CompositePodGroup(_));
                let changed = s.state.lock().delete_storage(&key);
                self.storage_changed(changed && storage, now);
                s.storage_seen.send_modify(|n| *n += 1);
            }
            ClusterEvent::PodGroupsServed(served) => s.state.lock().set_pod_groups_served(served),
            ClusterEvent::PodDeleted { uid } => {
                self.pod_gone(&uid, now);
                s.storage_seen.send_modify(|n| *n += 1);
            }
            ClusterEvent::PodApplied(info) => {
                let uid = info.spec.uid.clone();
                if info.terminal {
                    // A finished pod no longer uses its node.
                    self.pod_gone(&uid, now);
                } else if info.node_name().is_some() {
                    // A preemptor bound by someone else (a previous leader) waits for nothing.
                    if s.nominations.lock().cancel(&uid).is_some() {
                        s.metrics.nomination_ended("cancelled");
                    }
                    s.state.lock().apply_bound_pod(info.spec);
                    let mut q = s.queue.lock();
                    q.remove(&uid);
                    self.update_queue_gauges(&q);
                } else if self.schedules(&info) && !info.deleting {
                    // A stale unbound view of a pod we already decided is ignored until the watch
                    // shows the binding or the bind fails.
                    if s.state.lock().is_assumed(&uid) {
                        return;
                    }
                    let gang = gang_key(&info.spec);
                    if info.is_gated() {
                        tracing::debug!(pod = %info.key(), "{}", info.gated_message());
                    }
                    let mut q = s.queue.lock();
                    let schedulable = q.add_or_update(info, now);
                    if let Some(key) = gang.filter(|_| schedulable) {
                        // A new (or ungated) member may complete its gang: release the ones held
                        // for it.
                        q.activate_where(|i| is_member(i, &key));
                    }
                    self.update_queue_gauges(&q);
                    drop(q);
                    s.wake.notify_one();
                } else {
                    let mut q = s.queue.lock();
                    q.remove(&uid);
                    self.update_queue_gauges(&q);
                }
            }
        }
    }
}
