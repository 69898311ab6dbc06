//! Full snapshots: the whole state, its pods still encoded.

use std::sync::Arc;

use placement_scheduler::proto;
use prost::Message;

use super::encoding::{decode, sort_by_uid};
use super::{ClusterState, FullParts};
use crate::projection::{TrackedKey, TrackedObject};

impl ClusterState {
    /// The whole cluster as a snapshot, with assumed pods counted on their nodes (pods in uid order).
    pub fn full(&self) -> proto::Snapshot {
        let parts = self.full_parts();
        let mut snapshot = parts.rest;
        snapshot.pods = parts.pods.iter().filter_map(|b| decode(b)).collect();
        snapshot
    }

    /// The whole state as a full snapshot without its pods, and the pods in uid order still
    /// encoded (bound pods shared with the state, not copied): they can go on the wire as they
    /// are, where the decoded list alone would take gigabytes at a million pods.
    pub fn full_parts(&self) -> FullParts {
        let mut parts = self.full_parts_unordered();
        sort_by_uid(&mut parts.pods);
        parts
    }

    /// [`ClusterState::full_parts`] with the pods in no particular order, for a caller that
    /// sorts them with [`sort_by_uid`] once the state is unlocked (a million pods take half a
    /// second to sort).
    pub fn full_parts_unordered(&self) -> FullParts {
        let mut nodes: Vec<proto::Node> = self.nodes.values().cloned().collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let pods: Vec<Arc<[u8]>> = self
            .bound
            .values()
            .cloned()
            .chain(self.assumed.values().map(|p| p.encode_to_vec().into()))
            .collect();
        let mut namespaces: Vec<proto::Namespace> = self.namespaces.values().cloned().collect();
        namespaces.sort_by(|a, b| a.name.cmp(&b.name));
        let mut rest = proto::Snapshot {
            nodes,
            namespaces,
            pod_disruption_budgets: self.pod_disruption_budgets(),
            ..Default::default()
        };
        self.fill_storage(&mut rest);
        FullParts { rest, pods }
    }

    /// The claims, volumes, storage classes and CSINodes as a full snapshot carries them (the
    /// snapshot's other lists left empty).
    pub fn storage_snapshot(&self) -> proto::Snapshot {
        let mut snapshot = proto::Snapshot::default();
        self.fill_storage(&mut snapshot);
        snapshot
    }

    fn fill_storage(&self, snapshot: &mut proto::Snapshot) {
        // The watched objects as assumed, and the assumed objects no watch shows yet (a pod's
        // special claim for extended resources before PreBind creates it).
        let mut storage: Vec<(&TrackedKey, &TrackedObject)> = self
            .storage
            .keys()
            .filter_map(|k| self.storage_view(k).map(|o| (k, o)))
            .chain(
                self.assumed_storage
                    .iter()
                    .filter(|(k, _)| !self.storage.contains_key(k))
                    .map(|(k, (o, _))| (k, o)),
            )
            .collect();
        storage.sort_by(|a, b| a.0.cmp(b.0));
        for (_, obj) in storage {
            obj.clone().push_into(snapshot);
        }
    }
}
