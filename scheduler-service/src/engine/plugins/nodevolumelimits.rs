//! NodeVolumeLimits: a node's CSI attach limits must hold the pod's new volumes.
//!
//! Mirrors kube-scheduler's `pkg/scheduler/framework/plugins/nodevolumelimits/csi.go`: PreFilter
//! (the pod's CSI volumes, `filterAttachableVolumes`, by driver and unique volume handle; a claim
//! whose volume cannot be read is counted by its class's provisioner), Filter (per driver, the
//! volumes attached by the node's pods plus the pod's new ones against the CSINode's allocatable
//! count), with its reason [`ERR_REASON_MAX_VOLUME_COUNT`], and before that (VolumeLimitScaling,
//! beta and on in 1.37) a driver whose CSIDriver sets `preventPodSchedulingIfMissing` must be in
//! the node's CSINode (`checkCSIDriverOnNode`: `<driver> CSI driver is not installed on the node`).
//! The plugin has no score.

use crate::engine::volumes::{PodVolume, StorageObjects};

/// kube-scheduler's `ErrReasonMaxVolumeCountExceeded`.
pub const ERR_REASON_MAX_VOLUME_COUNT: &str = "node(s) exceed max volume count";
/// The end of kube-scheduler's `driverNotInstalledMsg` (`<driver> CSI driver is not installed on
/// the node`).
pub const ERR_DRIVER_NOT_INSTALLED: &str = "CSI driver is not installed on the node";

/// Why the node is rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// [`ERR_REASON_MAX_VOLUME_COUNT`].
    MaxVolumeCount,
    /// A driver of the pod's volumes that must be installed is not (its name).
    DriverNotInstalled(String),
}

/// The prefix of the handle the plugin gives a claim whose volume it cannot read (counted by its
/// class's provisioner under `<prefix>-<namespace>/<name>`).
const SC_HANDLE_PREFIX: &str = "placement-unbound";

/// What PreFilter resolved for one pod.
#[derive(Debug, Clone, Default)]
pub struct PreFilterState {
    /// The pod's CSI volumes: (driver, unique name).
    csi: Vec<(String, String)>,
}

impl PreFilterState {
    /// PreFilter: the pod's CSI volumes.
    pub fn pre_filter(storage: &StorageObjects, namespace: &str, volumes: &[PodVolume]) -> Self {
        Self {
            csi: csi_volumes(storage, namespace, volumes.iter()),
        }
    }

    /// Filter: a driver of the pod's volumes that must be on the node and is not, else whether the
    /// node's CSI attach limits would be exceeded by the unique volumes of its pods (`on_node`,
    /// with their namespaces) and the pod's new ones.
    pub fn check<'p>(
        &self,
        storage: &StorageObjects,
        node_name: &str,
        on_node: impl Iterator<Item = (&'p str, &'p PodVolume)>,
    ) -> Result<(), Violation> {
        if self.csi.is_empty() {
            return Ok(());
        }
        // checkCSIDriverOnNode: only drivers whose CSIDriver opts in.
        let csi_node = storage.csi_nodes.get(node_name);
        for (driver, _) in &self.csi {
            let opted_in = storage
                .csi_drivers
                .get(driver)
                .is_some_and(|d| d.prevent_pod_scheduling_if_missing);
            if opted_in && !csi_node.is_some_and(|n| n.drivers.iter().any(|(d, _)| d == driver)) {
                return Err(Violation::DriverNotInstalled(driver.clone()));
            }
        }
        if self.exceeds(storage, node_name, on_node) {
            Err(Violation::MaxVolumeCount)
        } else {
            Ok(())
        }
    }

    /// Whether the node's CSI attach limits would be exceeded by the unique volumes of its pods
    /// (`on_node`, with their namespaces) and the pod's new ones.
    fn exceeds<'p>(
        &self,
        storage: &StorageObjects,
        node_name: &str,
        on_node: impl Iterator<Item = (&'p str, &'p PodVolume)>,
    ) -> bool {
        let limits: Vec<(&str, i32)> = storage
            .csi_nodes
            .get(node_name)
            .map(|n| {
                n.drivers
                    .iter()
                    .filter_map(|(d, c)| c.map(|c| (d.as_str(), c)))
                    .collect()
            })
            .unwrap_or_default();
        if limits.is_empty() {
            return false;
        }
        let mut attached: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
        for (ns, v) in on_node {
            attached.extend(csi_volumes(storage, ns, std::iter::once(v)));
        }
        let mut new: std::collections::HashSet<&(String, String)> = self.csi.iter().collect();
        new.retain(|v| !attached.contains(*v));
        for (driver, limit) in limits {
            let adding = new.iter().filter(|(d, _)| d == driver).count();
            if adding == 0 {
                continue;
            }
            let current = attached.iter().filter(|(d, _)| d == driver).count();
            if current + adding > usize::try_from(limit).unwrap_or(0) {
                return true;
            }
        }
        false
    }
}

/// The CSI volumes the plugin counts for volumes of a pod in `namespace`: (driver, unique name)
/// of each claim whose volume is CSI, or, for a claim without a readable volume, its class's
/// provisioner and a handle naming the claim.
fn csi_volumes<'v>(
    storage: &StorageObjects,
    namespace: &str,
    volumes: impl Iterator<Item = &'v PodVolume>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for v in volumes {
        let Some(name) = v.claim_name() else { continue };
        let Some(c) = storage.claim(namespace, name) else {
            continue;
        };
        let from_class = || {
            let class = storage.classes.get(&c.class)?;
            (!c.class.is_empty()).then(|| {
                (
                    class.provisioner.clone(),
                    format!("{SC_HANDLE_PREFIX}-{namespace}/{}", c.name),
                )
            })
        };
        let info = if c.volume_name.is_empty() {
            from_class()
        } else {
            match storage.volumes.get(&c.volume_name) {
                None => from_class(),
                Some(pv) => pv.csi.clone(),
            }
        };
        if let Some((driver, handle)) = info.filter(|(d, h)| !d.is_empty() && !h.is_empty()) {
            out.push((driver.clone(), format!("{driver}/{handle}")));
        }
    }
    out
}

/// The plugin in the framework's contract: [`PreFilterState::exceeds`] with the node's pods' volumes.
#[derive(Debug, Clone, Copy)]
pub struct NodeVolumeLimits;

impl crate::engine::plugins::contract::Filter for NodeVolumeLimits {
    /// The pod's PreFilter state and the storage objects (`None`: the plugin skips the pod).
    type In<'a> = Option<(&'a PreFilterState, &'a StorageObjects)>;
    type Rejection = Violation;
    #[inline(always)]
    fn filter(
        state: Self::In<'_>,
        node: &crate::engine::snapshot::NodeView<'_>,
        reject: &mut impl FnMut(Violation),
    ) -> bool {
        let Some((s, storage)) = state else {
            return true;
        };
        match s.check(
            storage,
            &node.entry.spec.name,
            node.usage.volumes.iter().map(|(ns, v)| (&**ns, v)),
        ) {
            Ok(()) => true,
            Err(v) => {
                reject(v);
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::plugins::volume_testing::*;

    fn csi_claim(name: &str, pv: &str) -> (Claim, PersistentVolume) {
        (
            bound_claim(name, pv),
            PersistentVolume {
                csi: Some(("ebs.csi.aws.com".into(), format!("vol-{pv}"))),
                ..pv_free(pv)
            },
        )
    }

    #[test]
    fn node_volume_limits() {
        // n1 allows 2 EBS attachments and has one (a bound pod's); n2 has no CSINode (no limit).
        let (c0, v0) = csi_claim("existing", "pv-0");
        let (c1, v1) = csi_claim("a", "pv-1");
        let (c2, v2) = csi_claim("b", "pv-2");
        let cluster = Cluster {
            nodes: vec![node("n1", &[]), node("n2", &[])],
            bound: vec![bound_pod("old", "n1", vec![claim_volume("v", "existing")])],
            storage: StorageParts {
                claims: vec![c0, c1, c2],
                volumes: vec![v0, v1, v2],
                classes: vec![local_wffc()],
                csi_nodes: vec![CsiNode {
                    name: "n1".into(),
                    drivers: vec![("ebs.csi.aws.com".into(), Some(2))],
                }],
                ..Default::default()
            },
        };
        let one = pod("one", vec![claim_volume("v", "a")]);
        let two = pod("two", vec![claim_volume("v", "a"), claim_volume("w", "b")]);
        let same = pod("same", vec![claim_volume("v", "existing")]);
        assert_eq!(feasible(&cluster, &one), ["n1", "n2"], "1 + 1 <= 2");
        assert_eq!(feasible(&cluster, &two), ["n2"], "1 + 2 > 2");
        assert_eq!(
            feasible(&cluster, &same),
            ["n1", "n2"],
            "an attached volume is counted once"
        );
        // In a batch the count grows with each placed pod: only n2 is left after the first
        // (placed on n1 by LeastAllocated's tie-break, or on n2).
        let only_n1 = Cluster {
            nodes: vec![node("n1", &[])],
            ..cluster
        };
        let out = schedule(
            &only_n1,
            &[
                pod("p1", vec![claim_volume("v", "a")]),
                pod("p2", vec![claim_volume("v", "b")]),
            ],
        );
        assert_eq!(out[0], Ok("n1".to_string()));
        assert_eq!(
            out[1],
            Err("0/1 nodes are available: 1 node(s) exceed max volume count. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.".to_string())
        );
    }

    /// kube-scheduler 1.37's `checkCSIDriverOnNode` (VolumeLimitScaling, beta and on): a driver
    /// whose CSIDriver sets `preventPodSchedulingIfMissing` must be in the node's CSINode, limits
    /// or not; a driver without the opt-in, or without a CSIDriver, is not checked.
    #[test]
    fn a_driver_that_must_be_installed_keeps_the_pod_off_nodes_without_it() {
        let (c1, v1) = csi_claim("a", "pv-1");
        let cluster = |prevent: Option<bool>| Cluster {
            nodes: vec![node("n1", &[]), node("n2", &[]), node("n3", &[])],
            bound: vec![],
            storage: StorageParts {
                claims: vec![c1.clone()],
                volumes: vec![v1.clone()],
                classes: vec![local_wffc()],
                // n1 has the driver (no limit); n2 a CSINode without it; n3 no CSINode.
                csi_nodes: vec![
                    CsiNode {
                        name: "n1".into(),
                        drivers: vec![("ebs.csi.aws.com".into(), None)],
                    },
                    CsiNode {
                        name: "n2".into(),
                        drivers: vec![("other.csi.example.com".into(), Some(10))],
                    },
                ],
                csi_drivers: prevent
                    .map(|p| CsiDriver {
                        name: "ebs.csi.aws.com".into(),
                        storage_capacity: false,
                        prevent_pod_scheduling_if_missing: p,
                    })
                    .into_iter()
                    .collect(),
                ..Default::default()
            },
        };
        let p = pod("p", vec![claim_volume("v", "a")]);
        assert_eq!(feasible(&cluster(Some(true)), &p), ["n1"]);
        assert_eq!(feasible(&cluster(Some(false)), &p), ["n1", "n2", "n3"]);
        assert_eq!(feasible(&cluster(None), &p), ["n1", "n2", "n3"]);
        let only_missing = Cluster {
            nodes: vec![node("n2", &[]), node("n3", &[])],
            ..cluster(Some(true))
        };
        assert_eq!(
            schedule(&only_missing, std::slice::from_ref(&p)),
            [Err(
                "0/2 nodes are available: 2 ebs.csi.aws.com CSI driver is not installed on the node. \
                  preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
                    .to_string()
            )]
        );
    }
}
