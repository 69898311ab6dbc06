//! Device packing: placement's own `DevicePacking` score plugin (its arguments and batch order
//! here, its device order and node score in `allocator/packing.rs`), off unless a policy enables it
//! (kube 1.37 has no such plugin: its allocator takes devices first fit, and its Score looks at
//! prioritized lists only).
//!
//! A busy GPU cluster strands devices when small claims land on whole units: a slice of an
//! untouched partitionable GPU makes the whole GPU unallocatable, a single device taken from an
//! untouched NUMA node leaves no NUMA pair there, singles spread over every node leave no whole
//! node. With the plugin, for a pod with claims:
//!
//! - **device order**: the allocator's search walks each node's devices in packing order instead
//!   of kube's pool/slice/device order. First the devices whose use breaks no intact unit (a
//!   counter set no device in use consumes, which the device would consume only part of; a
//!   domain of [`Packing::match_attributes`] with every device free); then, among those, the
//!   devices in the domains with the fewest free devices left (best fit), then those leaving the
//!   least of their counter set; kube's order last. The search is still kube's exhaustive
//!   search: the same claims fit on the same nodes, only which devices they get changes.
//! - **node score** (`allocator/packing.rs`): how full the node's devices are once the
//!   allocation is made (the share of its devices no longer allocatable: in use, or their counters
//!   spent), less [`BREAK_PENALTY`] per intact unit the allocation breaks; 0 to 100. Busy nodes
//!   are preferred, so whole nodes stay free for the claims that need them.
//!
//! A batch packs as a whole ([`batch_order`]): its pods are decided by priority, then by the
//! devices their claims ask for, most first (first fit decreasing), each against what the ones
//! before took; pods of equal priority and demand keep their order.

use crate::engine::devices::{AllocationMode, DeviceObjects, RequestKind};
use crate::engine::model::PodSpec;

/// The standard attribute of the PCIe root a device hangs off
/// (`k8s.io/dynamic-resource-allocation/deviceattribute`'s `StandardDeviceAttributePCIeRoot`),
/// which claims align devices on with `matchAttribute`: the default domain kept whole.
pub const PCIE_ROOT: &str = "resource.kubernetes.io/pcieRoot";

/// Score taken off per intact unit (counter set or domain) an allocation breaks.
pub const BREAK_PENALTY: i64 = 50;

/// The `DevicePacking` plugin's arguments (`DevicePackingArgs` in a policy file or a
/// KubeSchedulerConfiguration's `pluginConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Packing {
    /// Attributes whose domains (devices of one driver with one value) are kept whole, as
    /// `matchAttribute` names them (fully qualified, or `<driver>/<id>`).
    pub match_attributes: Vec<String>,
}

impl Packing {
    /// Whether these are the defaults.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// The arguments checked: every attribute a qualified name (`<domain>/<id>`), as
    /// `matchAttribute` requires; the error names the offending entry's index.
    pub fn validate(&self) -> Result<(), (usize, String)> {
        for (i, a) in self.match_attributes.iter().enumerate() {
            match a.split_once('/') {
                Some((domain, id)) if !domain.is_empty() && !id.is_empty() && !id.contains('/') => {}
                _ => {
                    return Err((
                        i,
                        format!("{a:?} is not a qualified attribute name (<domain>/<name>, as matchAttribute takes)"),
                    ))
                }
            }
        }
        Ok(())
    }
}

impl Default for Packing {
    fn default() -> Self {
        Self {
            match_attributes: vec![PCIE_ROOT.to_string()],
        }
    }
}

/// The order to decide a batch in with packing on: by priority (highest first, as the queue
/// orders them), then by the devices their claims ask for (most first; `All` as the most a claim
/// may hold), then as given. `None` when that is the given order, or when some pod belongs to a
/// gang or PodGroup (their members are decided together, in their order).
pub fn batch_order(objects: &DeviceObjects, pods: &[PodSpec]) -> Option<Vec<usize>> {
    if pods.len() < 2 || pods.iter().any(|p| p.gang.is_some() || p.pod_group.is_some()) {
        return None;
    }
    let demand = |pod: &PodSpec| -> usize {
        pod.resource_claims
            .iter()
            .filter_map(|r| {
                let name = r.claim_name.as_deref()?;
                objects.claims.get(&format!("{}/{name}", pod.namespace))
            })
            .filter(|c| c.allocation.is_none())
            .flat_map(|c| c.requests.iter())
            .map(|r| {
                let spec = match &r.kind {
                    RequestKind::Exactly(s) => Some(s),
                    RequestKind::FirstAvailable(subs) => subs.first().map(|(_, s)| s),
                };
                match spec.map(|s| &s.mode) {
                    Some(AllocationMode::ExactCount(n)) => usize::try_from(*n).unwrap_or(0),
                    // As many as the class has: more than any count.
                    Some(AllocationMode::All) => usize::MAX,
                    None => 0,
                }
            })
            .fold(0usize, usize::saturating_add)
    };
    let mut order: Vec<(i32, usize, usize)> = pods
        .iter()
        .enumerate()
        .map(|(i, p)| (p.priority, demand(p), i))
        .collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    let order: Vec<usize> = order.into_iter().map(|(_, _, i)| i).collect();
    (!order.iter().enumerate().all(|(k, &i)| k == i)).then_some(order)
}
