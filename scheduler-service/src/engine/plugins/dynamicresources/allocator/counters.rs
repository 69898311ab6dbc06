//! Shared counters of partitionable devices (kube's `checkAvailableCounters`,
//! `deallocateCountersForDevice`).

use super::*;

impl<'s, 'a> Search<'s, 'a> {
    /// kube's `checkAvailableCounters`: adds the device's consumption and checks every counter
    /// of the pool; takes it back when one is short.
    pub(super) fn check_available_counters(&mut self, pi: usize, device: &'a Device) -> bool {
        if !self.available_counters.contains_key(&pi) {
            let available = self.compute_available(pi);
            self.available_counters.insert(pi, available);
        }
        let consumed = self.consumed_counters.entry(pi).or_default();
        for c in &device.consumes_counters {
            let set = consumed.entry(c.counter_set.as_str()).or_default();
            for (name, q) in &c.counters {
                let v = set.entry(name.as_str()).or_insert(0);
                *v = v.saturating_add(q.nanos());
            }
        }
        let ok = self.available_counters.get(&pi).is_none_or(|available| {
            available.iter().all(|(set, counters)| {
                counters.iter().all(|(name, avail)| {
                    let used = consumed.get(set).and_then(|s| s.get(name)).copied().unwrap_or(0);
                    *avail >= used
                })
            })
        });
        if !ok {
            self.deallocate_counters(pi, device);
        }
        ok
    }

    /// The pool's counters less what the devices in use consume.
    pub(super) fn compute_available(&self, pi: usize) -> Counters<'a> {
        let pool = &self.pools[pi];
        let mut available: Counters<'a> = pool
            .counter_sets
            .iter()
            .map(|(name, set)| {
                (
                    *name,
                    set.counters.iter().map(|(k, q)| (k.as_str(), q.nanos())).collect(),
                )
            })
            .collect();
        for slice in pool.slices.iter().chain(&pool.slices_not_targeting) {
            for device in &slice.devices {
                // kube's IsDeviceAllocated: allocated, or shared.
                let id = Self::device_id(slice, device);
                if !self.alloc.allocated.contains(&id) && !self.alloc.allocated.is_shared(&id) {
                    continue;
                }
                for c in &device.consumes_counters {
                    let Some(set) = available.get_mut(c.counter_set.as_str()) else {
                        continue;
                    };
                    for (name, q) in &c.counters {
                        if let Some(v) = set.get_mut(name.as_str()) {
                            *v = v.saturating_sub(q.nanos());
                        }
                    }
                }
            }
        }
        available
    }

    /// kube's `deallocateCountersForDevice`.
    pub(super) fn deallocate_counters(&mut self, pi: usize, device: &Device) {
        let Some(consumed) = self.consumed_counters.get_mut(&pi) else {
            return;
        };
        for c in &device.consumes_counters {
            if let Some(set) = consumed.get_mut(c.counter_set.as_str()) {
                for (name, q) in &c.counters {
                    if let Some(v) = set.get_mut(name.as_str()) {
                        *v = v.saturating_sub(q.nanos());
                    }
                }
            }
        }
    }
}
