//! `DevicePacking`'s part of the allocator's search ([`super::super::device_packing`]): each
//! node's devices in packing order, and the node's packing score once the allocation is made.

use std::collections::HashMap;

use super::super::device_packing::{Packing, BREAK_PENALTY};
use super::constraints::lookup_attribute;
use super::{Counters, Loc, Search};
use crate::engine::devices::AttributeValue;

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
