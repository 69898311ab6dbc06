//! The versioned change log: each change recorded by identity, and the delta since a replica's
//! last sync built from it with the values as they are now.

use std::collections::HashSet;

use placement_scheduler::proto;

use super::{ClusterState, Key};
use crate::projection::{TrackedKey, TrackedObject};

/// Most log entries kept; a replica further behind gets a full snapshot.
const MAX_LOG: usize = 1 << 20;

impl ClusterState {
    pub(super) fn record(&mut self, key: Key) {
        self.version += 1;
        self.log.push_back((self.version, key));
        while self.log.len() > MAX_LOG {
            if let Some((v, _)) = self.log.pop_front() {
                self.compacted = v;
            }
        }
    }

    /// The changes after `since` as a delta (without its base id), or `None` when the log no longer
    /// reaches back that far and a full snapshot is needed.
    pub fn delta_since(&self, since: u64) -> Option<proto::SnapshotDelta> {
        self.delta_since_except(since, None)
    }

    /// The changes after `since` but those logged in `except` (`(from, to]`: what the receiver
    /// holds already) as a delta, or `None` when the log no longer reaches back that far. A key
    /// changed again outside `except` is carried, with its value now.
    pub fn delta_since_except(&self, since: u64, except: Option<(u64, u64)>) -> Option<proto::SnapshotDelta> {
        let skipped = |v: u64| except.is_some_and(|(from, to)| v > from && v <= to);
        let keys: HashSet<&Key> = self
            .versioned_changes_since(since)?
            .filter(|(v, _)| !skipped(*v))
            .map(|(_, k)| k)
            .collect();
        let mut delta = proto::SnapshotDelta::default();
        let mut keys: Vec<&Key> = keys.into_iter().collect();
        keys.sort_unstable();
        for key in keys {
            match key {
                Key::Node(name) => match self.nodes.get(name) {
                    Some(n) => delta.upsert_nodes.push(n.clone()),
                    None => delta.remove_nodes.push(name.clone()),
                },
                Key::Pod(uid) => match self.pod(uid) {
                    Some(p) => delta.upsert_pods.push(p),
                    None => delta.remove_pod_uids.push(uid.clone()),
                },
                Key::Namespace(name) => match self.namespaces.get(name) {
                    Some(n) => delta.upsert_namespaces.push(n.clone()),
                    None => delta.remove_namespaces.push(name.clone()),
                },
                Key::Pdb(key) => match self.pdbs.get(key) {
                    Some(e) => delta.upsert_pod_disruption_budgets.push(e.pdb.clone()),
                    None => delta.remove_pod_disruption_budgets.push(key.clone()),
                },
                Key::Storage(key) => match (self.storage_view(key).cloned(), key) {
                    (Some(TrackedObject::Claim(c)), _) => delta.upsert_persistent_volume_claims.push(c),
                    (Some(TrackedObject::Volume(v)), _) => delta.upsert_persistent_volumes.push(v),
                    (Some(TrackedObject::Class(c)), _) => delta.upsert_storage_classes.push(c),
                    (Some(TrackedObject::CsiNode(n)), _) => delta.upsert_csi_nodes.push(n),
                    (None, TrackedKey::Claim(k)) => delta.remove_persistent_volume_claims.push(k.clone()),
                    (None, TrackedKey::Volume(k)) => delta.remove_persistent_volumes.push(k.clone()),
                    (None, TrackedKey::Class(k)) => delta.remove_storage_classes.push(k.clone()),
                    (None, TrackedKey::CsiNode(k)) => delta.remove_csi_nodes.push(k.clone()),
                    (Some(TrackedObject::CsiDriver(d)), _) => delta.upsert_csi_drivers.push(d),
                    (Some(TrackedObject::Capacity(c)), _) => delta.upsert_csi_storage_capacities.push(c),
                    (None, TrackedKey::CsiDriver(k)) => delta.remove_csi_drivers.push(k.clone()),
                    (None, TrackedKey::Capacity(k)) => delta.remove_csi_storage_capacities.push(k.clone()),
                    (Some(TrackedObject::DeviceClass(c)), _) => delta.upsert_device_classes.push(c),
                    (Some(TrackedObject::ResourceClaim(c)), _) => delta.upsert_resource_claims.push(c),
                    (Some(TrackedObject::ResourceSlice(s)), _) => delta.upsert_resource_slices.push(s),
                    (None, TrackedKey::DeviceClass(k)) => delta.remove_device_classes.push(k.clone()),
                    (None, TrackedKey::ResourceClaim(k)) => delta.remove_resource_claims.push(k.clone()),
                    (None, TrackedKey::ResourceSlice(k)) => delta.remove_resource_slices.push(k.clone()),
                    (Some(TrackedObject::DeviceTaintRule(r)), _) => delta.upsert_device_taint_rules.push(r),
                    (None, TrackedKey::DeviceTaintRule(k)) => delta.remove_device_taint_rules.push(k.clone()),
                    (Some(TrackedObject::PodGroup(g)), _) => delta.upsert_pod_groups.push(g),
                    (None, TrackedKey::PodGroup(k)) => delta.remove_pod_groups.push(k.clone()),
                    (Some(TrackedObject::CompositePodGroup(g)), _) => delta.upsert_composite_pod_groups.push(g),
                    (None, TrackedKey::CompositePodGroup(k)) => delta.remove_composite_pod_groups.push(k.clone()),
                },
            }
        }
        Some(delta)
    }

    /// What changed after `since`, oldest first, with the version each change was logged at (a
    /// key may repeat), or `None` when the log no longer reaches back that far or `since` is
    /// ahead of the state.
    fn versioned_changes_since(&self, since: u64) -> Option<impl Iterator<Item = (u64, &Key)>> {
        if since < self.compacted || since > self.version {
            return None;
        }
        let start = self.log.partition_point(|(v, _)| *v <= since);
        Some(self.log.range(start..).map(|(v, k)| (*v, k)))
    }

    /// Forgets log entries every replica has synced past.
    pub fn compact(&mut self, synced_by_all: u64) {
        while let Some((v, _)) = self.log.front() {
            if *v > synced_by_all {
                break;
            }
            self.compacted = *v;
            self.log.pop_front();
        }
    }
}
