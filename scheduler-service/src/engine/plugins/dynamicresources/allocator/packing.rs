//! Device packing: placement's own `DevicePacking` score plugin, off unless a policy enables it
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
//! - **node score** ([`Search::packing_score`]): how full the node's devices are once the
//!   allocation is made (the share of its devices no longer allocatable: in use, or their counters
//!   spent), less [`BREAK_PENALTY`] per intact unit the allocation breaks; 0 to 100. Busy nodes
//!   are preferred, so whole nodes stay free for the claims that need them.
//!
//! A batch packs as a whole ([`batch_order`]): its pods are decided by priority, then by the
//! devices their claims ask for, most first (first fit decreasing), each against what the ones
//! before took; pods of equal priority and demand keep their order.

use std::collections::HashMap;

use super::{lookup_attribute, Counters, Loc, Search};
use crate::engine::devices::{AllocationMode, AttributeValue, DeviceObjects, RequestKind};
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
                    Some(AllocationMode::All) => super::ALLOCATION_RESULTS_MAX_SIZE,
                    None => 0,
                }
            })
            .sum()
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

/// A domain: the attribute (its index in [`Packing::match_attributes`]), the driver and the value.
type Domain<'a> = (usize, &'a str, &'a AttributeValue);

/// Free and total devices per domain on the node.
type Domains<'a> = HashMap<Domain<'a>, (u32, u32)>;

impl<'a> Search<'_, 'a> {
    /// The devices of the node's usable pools in packing order (see the module doc).
    pub(super) fn packing_order(&self, packing: &Packing) -> Vec<Loc> {
        let domains = self.domains(packing, false);
        let mut keyed: Vec<((u32, u32, i128), Loc)> = Vec::new();
        for (pi, pool) in self.pools.iter().enumerate() {
            if pool.incomplete || pool.invalid {
                continue;
            }
            let available = self.compute_available(pi);
            for (sl, slice) in pool.slices.iter().enumerate() {
                for (d, device) in slice.devices.iter().enumerate() {
                    let mut breaks = 0u32;
                    let mut domain_free = 0u32;
                    for (ai, attribute) in packing.match_attributes.iter().enumerate() {
                        let Some(value) = lookup_attribute(device, &slice.driver, attribute) else {
                            continue;
                        };
                        if let Some(&(free, total)) = domains.get(&(ai, &*slice.driver, value)) {
                            domain_free = domain_free.saturating_add(free);
                            if free == total && total > 1 {
                                breaks += 1;
                            }
                        }
                    }
                    // Per mille of its counter sets left once the device takes its part.
                    let mut left: i128 = 0;
                    for c in &device.consumes_counters {
                        let (Some(set), Some(avail)) = (
                            pool.counter_sets.get(c.counter_set.as_str()),
                            available.get(c.counter_set.as_str()),
                        ) else {
                            continue;
                        };
                        let intact = set
                            .counters
                            .iter()
                            .all(|(k, q)| avail.get(k.as_str()).copied() == Some(q.nanos()));
                        let mut whole = true;
                        for (k, q) in &set.counters {
                            let total = q.nanos();
                            let takes = c.counters.get(k).map_or(0, |t| t.nanos());
                            let after = avail.get(k.as_str()).copied().unwrap_or(0) - takes;
                            if after > 0 {
                                whole = false;
                            }
                            if total > 0 {
                                left += after.max(0) * 1000 / total;
                            }
                        }
                        if intact && !whole {
                            breaks += 1;
                        }
                    }
                    keyed.push((
                        (breaks, domain_free, left),
                        Loc {
                            pool: pi,
                            slice: sl,
                            device: d,
                        },
                    ));
                }
            }
        }
        // Stable: kube's order among equals.
        keyed.sort_by_key(|(k, _)| *k);
        keyed.into_iter().map(|(_, loc)| loc).collect()
    }

    /// Free and total devices per domain on the node: free meaning not in use, and, with
    /// `allocating`, not being allocated by this search either.
    fn domains(&self, packing: &Packing, allocating: bool) -> Domains<'a> {
        let mut domains: Domains<'a> = HashMap::new();
        if packing.match_attributes.is_empty() {
            return domains;
        }
        for pool in &self.pools {
            for slice in &pool.slices {
                let slice: &'a crate::engine::devices::ResourceSlice = slice;
                for device in &slice.devices {
                    let id = Self::device_id(slice, device);
                    let busy = self.alloc.allocated.contains(&id)
                        || self.alloc.allocated.is_shared(&id)
                        || (allocating && self.allocating.get(&id).is_some_and(|c| !c.is_empty()));
                    for (ai, attribute) in packing.match_attributes.iter().enumerate() {
                        if let Some(value) = lookup_attribute(device, &slice.driver, attribute) {
                            let e = domains.entry((ai, &*slice.driver, value)).or_default();
                            e.1 += 1;
                            if !busy {
                                e.0 += 1;
                            }
                        }
                    }
                }
            }
        }
        domains
    }

    /// The node's packing score once this search's allocation is made (see the module doc).
    pub(super) fn packing_score(&self, packing: &Packing) -> i64 {
        let mut total = 0i64;
        let mut unusable = 0i64;
        let mut broken = 0i64;
        for (pi, pool) in self.pools.iter().enumerate() {
            if pool.incomplete || pool.invalid {
                continue;
            }
            let before = self.compute_available(pi);
            let mut after: Counters<'a> = before.clone();
            if let Some(consumed) = self.consumed_counters.get(&pi) {
                for (set, counters) in consumed {
                    if let Some(a) = after.get_mut(set) {
                        for (k, v) in counters {
                            if let Some(x) = a.get_mut(k) {
                                *x -= v;
                            }
                        }
                    }
                }
            }
            for (name, set) in &pool.counter_sets {
                let (Some(b), Some(a)) = (before.get(name), after.get(name)) else {
                    continue;
                };
                let intact = set.counters.iter().all(|(k, q)| b.get(k.as_str()) == Some(&q.nanos()));
                let touched = set.counters.iter().any(|(k, q)| a.get(k.as_str()) != Some(&q.nanos()));
                let spent = a.values().all(|v| *v <= 0);
                if intact && touched && !spent {
                    broken += 1;
                }
            }
            for slice in &pool.slices {
                for device in &slice.devices {
                    total += 1;
                    let id = Self::device_id(slice, device);
                    let busy = self.in_use(&id) || self.alloc.allocated.is_shared(&id);
                    let counters_left = device.consumes_counters.iter().all(|c| {
                        after.get(c.counter_set.as_str()).is_some_and(|a| {
                            c.counters
                                .iter()
                                .all(|(k, q)| a.get(k.as_str()).is_some_and(|v| *v >= q.nanos()))
                        })
                    });
                    if busy || !counters_left {
                        unusable += 1;
                    }
                }
            }
        }
        let before = self.domains(packing, false);
        let after = self.domains(packing, true);
        for (domain, &(free, all)) in &before {
            if free == all && after.get(domain).is_some_and(|&(f, _)| f < all && f > 0) {
                broken += 1;
            }
        }
        if total == 0 {
            return 0;
        }
        (unusable * 100 / total - BREAK_PENALTY * broken).clamp(0, 100)
    }
}
