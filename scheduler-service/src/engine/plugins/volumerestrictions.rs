//! VolumeRestrictions: a pod's in-tree disks and ReadWriteOncePod claims must not be in use.
//!
//! Mirrors kube-scheduler's `pkg/scheduler/framework/plugins/volumerestrictions/volume_restrictions.go`:
//! PreFilter (every persistentVolumeClaim volume's claim must exist; the references to the pod's
//! ReadWriteOncePod claims by other pods, its `conflictingPVCRefCount`), Filter
//! (`satisfyVolumeConflicts` with `isVolumeConflict` for GCE PD, AWS EBS, iSCSI and RBD disks,
//! then `satisfyReadWriteOncePod`), with its reasons [`ERR_REASON_DISK_CONFLICT`] and
//! [`ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT`]. The plugin has no score.

use std::sync::Arc;

use crate::engine::volumes::{
    claim_key, not_found, AccessMode, BatchVolumes, ClaimUsers, PodVolume, StorageObjects, VolumeSource,
};

/// kube-scheduler's `ErrReasonDiskConflict`.
pub const ERR_REASON_DISK_CONFLICT: &str = "node(s) had no available disk";
/// kube-scheduler's `ErrReasonReadWriteOncePodConflict`.
pub const ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT: &str =
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod";

/// Why the plugin rejects a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Conflict {
    /// An in-tree disk the pod mounts is mounted by a pod on the node.
    Disk,
    /// A ReadWriteOncePod claim of the pod is used by another pod.
    ReadWriteOncePod,
}

impl Conflict {
    /// kube-scheduler's words for it.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Disk => ERR_REASON_DISK_CONFLICT,
            Self::ReadWriteOncePod => ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
        }
    }
}

/// What PreFilter resolved for one pod.
#[derive(Debug, Clone, Default)]
pub struct PreFilterState {
    /// The pod's in-tree volumes the Filter compares.
    in_tree: Vec<PodVolume>,
    /// The keys of the pod's ReadWriteOncePod claims.
    rwop_claims: Vec<String>,
    /// References to them by pods other than the ones on a node being filtered (kube's
    /// `conflictingPVCRefCount`): by the pods placed earlier in the batch, plus, per node, by the
    /// bound pods elsewhere (`rwop_total` minus the node's entry in `rwop_on_node`).
    rwop_batch: usize,
    /// References by the snapshot's bound pods, over every node.
    rwop_total: usize,
    /// References by the snapshot's bound pods, per node name.
    rwop_on_node: std::collections::HashMap<Arc<str>, usize>,
}

impl PreFilterState {
    /// PreFilter: every persistentVolumeClaim volume's claim must exist (`Err` with the message
    /// otherwise); counts the references to the pod's ReadWriteOncePod claims.
    pub fn pre_filter(
        storage: &StorageObjects,
        namespace: &str,
        volumes: &[PodVolume],
        claim_users: &ClaimUsers<'_>,
        batch: &BatchVolumes,
    ) -> Result<Self, String> {
        let mut out = Self::default();
        for v in volumes {
            match &v.source {
                VolumeSource::Claim {
                    claim_name,
                    ephemeral: false,
                } => {
                    let Some(c) = storage.claim(namespace, claim_name) else {
                        return Err(not_found("persistentvolumeclaim", claim_name));
                    };
                    if c.access_modes.contains(&AccessMode::ReadWriteOncePod) {
                        let key = c.key();
                        if !out.rwop_claims.contains(&key) {
                            for (node, n) in claim_users(&key) {
                                out.rwop_total += n;
                                *out.rwop_on_node.entry(node).or_default() += n;
                            }
                            out.rwop_batch += usize::from(batch.claims_in_use.contains(&key));
                            out.rwop_claims.push(key);
                        }
                    }
                }
                VolumeSource::Claim { .. } => {}
                _ => out.in_tree.push(v.clone()),
            }
        }
        Ok(out)
    }

    /// Filter: in-tree disk conflicts with the node's pods (`on_node`, with their namespaces),
    /// then the ReadWriteOncePod conflict: a reference to one of the pod's ReadWriteOncePod claims
    /// by any pod left — elsewhere, placed earlier in the batch, or among `on_node` (which
    /// preemption's dry run shrinks by the victims, as kube's `RemovePod` lowers its
    /// `conflictingPVCRefCount`).
    pub fn filter<'p>(
        &self,
        node_name: &str,
        on_node: impl Iterator<Item = (&'p str, &'p PodVolume)>,
    ) -> Option<Conflict> {
        let existing: Vec<(&str, &PodVolume)> = on_node.collect();
        if !self.in_tree.is_empty()
            && self
                .in_tree
                .iter()
                .any(|v| existing.iter().any(|(_, e)| disk_conflict(v, e)))
        {
            return Some(Conflict::Disk);
        }
        if self.rwop_claims.is_empty() {
            return None;
        }
        let here = self.rwop_on_node.get(node_name).copied().unwrap_or(0);
        let left_here = existing
            .iter()
            .filter(|(ns, v)| {
                v.claim_name()
                    .is_some_and(|c| self.rwop_claims.iter().any(|k| *k == claim_key(ns, c)))
            })
            .count();
        let conflicts = self.rwop_total - here.min(self.rwop_total) + left_here + self.rwop_batch;
        (conflicts > 0).then_some(Conflict::ReadWriteOncePod)
    }
}

/// kube-scheduler's `isVolumeConflict` for one volume of the pod and one of a pod on the node.
fn disk_conflict(v: &PodVolume, e: &PodVolume) -> bool {
    use VolumeSource as S;
    match (&v.source, &e.source) {
        (
            S::GcePersistentDisk {
                pd_name: a,
                read_only: ra,
            },
            S::GcePersistentDisk {
                pd_name: b,
                read_only: rb,
            },
        ) => a == b && !(*ra && *rb),
        (S::AwsElasticBlockStore { volume_id: a }, S::AwsElasticBlockStore { volume_id: b }) => a == b,
        (S::Iscsi { iqn: a, read_only: ra }, S::Iscsi { iqn: b, read_only: rb }) => a == b && !(*ra && *rb),
        (
            S::Rbd {
                monitors: ma,
                pool: pa,
                image: ia,
                read_only: ra,
            },
            S::Rbd {
                monitors: mb,
                pool: pb,
                image: ib,
                read_only: rb,
            },
        ) => ma.iter().any(|m| mb.contains(m)) && pa == pb && ia == ib && !(*ra && *rb),
        _ => false,
    }
}

/// The plugin in the framework's contract: [`PreFilterState::filter`] with the node's pods' volumes.
#[derive(Debug, Clone, Copy)]
pub struct VolumeRestrictions;

impl crate::engine::plugins::contract::Filter for VolumeRestrictions {
    /// The pod's PreFilter state (`None`: the plugin skips the pod).
    type In<'a> = Option<&'a PreFilterState>;
    type Rejection = Conflict;
    #[inline(always)]
    fn filter(
        state: Option<&PreFilterState>,
        node: &crate::engine::snapshot::NodeView<'_>,
        reject: &mut impl FnMut(Conflict),
    ) -> bool {
        let conflict = state.and_then(|s| {
            s.filter(
                &node.entry.spec.name,
                node.usage.volumes.iter().map(|(ns, v)| (&**ns, v)),
            )
        });
        match conflict {
            Some(c) => {
                reject(c);
                false
            }
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::plugins::volume_testing::*;
    use std::sync::Arc;

    #[test]
    fn volume_restrictions() {
        let disk = |name: &str, read_only: bool| PodVolume {
            name: Arc::from("d"),
            source: VolumeSource::GcePersistentDisk {
                pd_name: Arc::from(name),
                read_only,
            },
        };
        let cluster = Cluster {
            nodes: vec![node("n1", &[]), node("n2", &[])],
            bound: vec![
                bound_pod("a", "n1", vec![disk("pd-1", true)]),
                bound_pod("b", "n2", vec![disk("pd-2", false)]),
            ],
            storage: StorageParts::default(),
        };
        struct Case {
            name: &'static str,
            volume: PodVolume,
            want: Vec<&'static str>,
        }
        for c in [
            Case {
                name: "read-only everywhere shares the disk",
                volume: disk("pd-1", true),
                want: vec!["n1", "n2"],
            },
            Case {
                name: "read-write conflicts with a read-only user",
                volume: disk("pd-1", false),
                want: vec!["n2"],
            },
            Case {
                name: "another disk",
                volume: disk("pd-3", false),
                want: vec!["n1", "n2"],
            },
            Case {
                name: "EBS volumes conflict even read-only",
                volume: PodVolume {
                    name: Arc::from("e"),
                    source: VolumeSource::AwsElasticBlockStore {
                        volume_id: Arc::from("vol-1"),
                    },
                },
                want: vec!["n1", "n2"],
            },
        ] {
            assert_eq!(feasible(&cluster, &pod("p", vec![c.volume])), c.want, "{}", c.name);
        }
        let out = schedule(&cluster, &[pod("p", vec![disk("pd-2", true)])]);
        assert_eq!(out[0], Ok("n1".to_string()));

        // ReadWriteOncePod: a claim in use anywhere rejects every node.
        let rwop = Claim {
            access_modes: vec![AccessMode::ReadWriteOncePod],
            ..bound_claim("solo", "pv-s")
        };
        let cluster = Cluster {
            nodes: vec![node("n1", &[]), node("n2", &[])],
            bound: vec![bound_pod("holder", "n1", vec![claim_volume("v", "solo")])],
            storage: StorageParts {
                claims: vec![rwop],
                volumes: vec![pv_free("pv-s")],
                classes: vec![local_wffc()],
                csi_nodes: vec![],
                ..Default::default()
            },
        };
        let out = schedule(&cluster, &[pod("p", vec![claim_volume("v", "solo")])]);
        assert_eq!(
            out[0],
            Err("0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.".to_string())
        );
        // The conflict is resolvable, as kube-scheduler's Unschedulable: a more important pod is
        // nominated to the holder's node with the holder as victim (the dry run's RemovePod clears
        // the conflict there, and only there).
        let profile = Profile::new(Policy::kube_default());
        let snap = cluster.snapshot();
        let urgent = PodSpec {
            priority: 100,
            ..pod("urgent", vec![claim_volume("v", "solo")])
        };
        let d = Evaluator::new(&profile, &snap)
            .schedule(std::slice::from_ref(&urgent), 0, Deadline::none())
            .unwrap();
        let Decision::Unschedulable(diag) = &d[0] else {
            panic!("{d:?}")
        };
        let n = diag.nomination.as_ref().expect("nominated");
        assert_eq!(n.node, "n1");
        assert_eq!(n.victims.iter().map(|v| v.to_string()).collect::<Vec<_>>(), ["holder"]);
        // A second user of the claim on n2 keeps it in use whatever goes on n1.
        let mut two = cluster;
        two.bound
            .push(bound_pod("other", "n2", vec![claim_volume("v", "solo")]));
        let snap = two.snapshot();
        let d = Evaluator::new(&profile, &snap)
            .schedule(std::slice::from_ref(&urgent), 0, Deadline::none())
            .unwrap();
        let Decision::Unschedulable(diag) = &d[0] else {
            panic!("{d:?}")
        };
        assert!(diag.nomination.is_none(), "{:?}", diag.nomination);
        assert_eq!(
            diag.message(),
            "0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod. preemption: 0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod."
        );
    }
}
