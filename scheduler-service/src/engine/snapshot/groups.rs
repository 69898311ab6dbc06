//! The objects a snapshot holds beside nodes and pods: PodDisruptionBudgets, PodGroups and
//! CompositePodGroups, storage and DRA objects, and the bound members of label gangs.

use std::sync::Arc;

use super::pods::BoundPod;
use super::{Snapshot, SnapshotError};
use crate::engine::model::{LabelGangKey, PodGroupKey};
use crate::engine::pdb::Pdb;

impl Snapshot {
    /// This snapshot with these PodDisruptionBudgets (replacing any with the same namespace and name).
    pub fn with_pdbs(mut self, pdbs: Vec<Pdb>) -> Result<Self, SnapshotError> {
        self.insert_pdbs(pdbs)?;
        Ok(self)
    }

    pub(in crate::engine) fn insert_pdbs(&mut self, pdbs: Vec<Pdb>) -> Result<(), SnapshotError> {
        let mut seen = std::collections::HashSet::new();
        for (index, pdb) in pdbs.into_iter().enumerate() {
            let key = pdb.key();
            if !seen.insert(key.clone()) {
                return Err(SnapshotError::DuplicatePdb { index, key });
            }
            self.approx_bytes += pdb.approx_bytes();
            if let Some(old) = self.pdbs.insert(key, Arc::new(pdb)) {
                self.approx_bytes = self.approx_bytes.saturating_sub(old.approx_bytes());
            }
        }
        Ok(())
    }

    /// This snapshot with these PodGroups (replacing any with the same namespace and name).
    pub fn with_pod_groups(mut self, groups: Vec<crate::engine::model::PodGroup>) -> Result<Self, SnapshotError> {
        self.insert_pod_groups(groups)?;
        Ok(self)
    }

    pub(in crate::engine) fn insert_pod_groups(
        &mut self,
        groups: Vec<crate::engine::model::PodGroup>,
    ) -> Result<(), SnapshotError> {
        let mut seen = std::collections::HashSet::new();
        for (index, group) in groups.into_iter().enumerate() {
            let key = group.group_key();
            if !seen.insert(key.clone()) {
                return Err(SnapshotError::DuplicatePodGroup {
                    index,
                    key: key.to_string(),
                });
            }
            self.approx_bytes += group.approx_bytes();
            if let Some(old) = self.pod_groups.insert(key, Arc::new(group)) {
                self.approx_bytes = self.approx_bytes.saturating_sub(old.approx_bytes());
            }
        }
        Ok(())
    }

    /// This snapshot with these CompositePodGroups (replacing any with the same namespace and
    /// name).
    pub fn with_composite_pod_groups(
        mut self,
        groups: Vec<crate::engine::model::CompositePodGroup>,
    ) -> Result<Self, SnapshotError> {
        self.insert_composite_pod_groups(groups)?;
        Ok(self)
    }

    pub(in crate::engine) fn insert_composite_pod_groups(
        &mut self,
        groups: Vec<crate::engine::model::CompositePodGroup>,
    ) -> Result<(), SnapshotError> {
        let mut seen = std::collections::HashSet::new();
        for (index, group) in groups.into_iter().enumerate() {
            let key: Arc<str> = Arc::from(group.key());
            if !seen.insert(Arc::clone(&key)) {
                return Err(SnapshotError::DuplicateCompositePodGroup {
                    index,
                    key: key.to_string(),
                });
            }
            self.approx_bytes += group.approx_bytes();
            if let Some(old) = self.composite_pod_groups.insert(key, Arc::new(group)) {
                self.approx_bytes = self.approx_bytes.saturating_sub(old.approx_bytes());
            }
        }
        Ok(())
    }

    /// The CompositePodGroup `key` ("namespace/name").
    pub fn composite_pod_group(&self, key: &str) -> Option<&Arc<crate::engine::model::CompositePodGroup>> {
        self.composite_pod_groups.get(key)
    }

    /// The CompositePodGroups, ordered by namespace and name.
    pub fn composite_pod_groups(&self) -> impl Iterator<Item = &Arc<crate::engine::model::CompositePodGroup>> {
        self.composite_pod_groups.values()
    }

    /// The PodGroup `key`.
    pub fn pod_group(&self, key: &PodGroupKey) -> Option<&Arc<crate::engine::model::PodGroup>> {
        self.pod_groups.get(key)
    }

    /// The PodGroups, ordered by namespace and name.
    pub fn pod_groups(&self) -> impl Iterator<Item = &Arc<crate::engine::model::PodGroup>> {
        self.pod_groups.values()
    }

    /// The nodes of the bound pods of the PodGroup `key` (kube's `ScheduledPods`), one entry per
    /// pod, in uid order.
    pub fn pod_group_nodes(&self, key: &PodGroupKey) -> Vec<Arc<str>> {
        self.pod_group_pods
            .get(key)
            .map(|pods| pods.values().cloned().collect())
            .unwrap_or_default()
    }

    /// How many pods of the PodGroup `key` are bound.
    pub fn pod_group_bound(&self, key: &PodGroupKey) -> usize {
        self.pod_group_pods.get(key).map_or(0, imbl::OrdMap::len)
    }

    pub(in crate::engine) fn track_pod_group(&mut self, uid: &Arc<str>, bound: &BoundPod, add: bool) {
        let Some(group) = bound.meta.as_ref().and_then(|m| m.pod_group.as_ref()) else {
            return;
        };
        if add {
            self.pod_group_pods
                .entry(group.clone())
                .or_default()
                .insert(Arc::clone(uid), Arc::clone(&bound.node_name));
        } else if let Some(pods) = self.pod_group_pods.get_mut(group) {
            pods.remove(uid);
            if pods.is_empty() {
                self.pod_group_pods.remove(group);
            }
        }
    }

    /// This snapshot with these storage objects (a full snapshot's; replacing any it has).
    pub fn with_storage(mut self, parts: crate::engine::volumes::StorageParts) -> Result<Self, SnapshotError> {
        if parts.is_empty() && self.storage.is_empty() {
            return Ok(self);
        }
        self.approx_bytes = self.approx_bytes.saturating_sub(self.storage.approx_bytes);
        self.storage = crate::engine::volumes::StorageObjects::from_parts(parts)?;
        self.approx_bytes += self.storage.approx_bytes;
        Ok(self)
    }

    /// This snapshot with these DRA objects (a full snapshot's; replacing any it has).
    pub fn with_devices(mut self, parts: crate::engine::devices::DeviceParts) -> Result<Self, SnapshotError> {
        if parts.is_empty() && self.devices.is_empty() {
            return Ok(self);
        }
        self.approx_bytes = self.approx_bytes.saturating_sub(self.devices.approx_bytes);
        self.devices = crate::engine::devices::DeviceObjects::from_parts(parts)?;
        self.device_verdicts = Arc::default();
        self.approx_bytes += self.devices.approx_bytes;
        Ok(self)
    }

    /// The DeviceClasses, ResourceClaims and ResourceSlices.
    pub fn devices(&self) -> &crate::engine::devices::DeviceObjects {
        &self.devices
    }

    /// Every ResourceSlice (with the DeviceTaintRules' taints applied) and the devices in use,
    /// gathered once per snapshot.
    pub fn device_index(&self) -> &Arc<crate::engine::devices::DeviceIndex> {
        self.caches.device_index.get_or_init(|| {
            Arc::new(crate::engine::devices::DeviceIndex::of(
                &self.devices,
                crate::engine::device_taint_rules::patched_slices(&self.devices),
                self.nodes.iter().map(|n| n.spec.name.as_str()),
                Arc::clone(&self.device_verdicts),
            ))
        })
    }

    /// The PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes.
    pub fn storage(&self) -> &crate::engine::volumes::StorageObjects {
        &self.storage
    }

    /// The PodDisruptionBudgets, ordered by namespace and name.
    pub fn pdbs(&self) -> impl Iterator<Item = &Arc<Pdb>> {
        self.pdbs.values()
    }

    /// How many pods of the gang `key` ("namespace/name") are bound.
    pub fn gang_members(&self, key: &LabelGangKey) -> u32 {
        let counts = self.caches.gang_members.get_or_init(|| {
            let mut m = std::collections::HashMap::new();
            for (_, pod) in self.pods.iter() {
                if let Some(g) = pod.meta.as_ref().and_then(|m| m.gang.clone()) {
                    *m.entry(g).or_insert(0) += 1;
                }
            }
            self.add_derived(m.capacity() * 32);
            m
        });
        counts.get(key).copied().unwrap_or(0)
    }
}
