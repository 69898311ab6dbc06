//! The node's resource pools as kube's `GatherPools` and `buildPool` gather them
//! (`pools_incubating.go`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::{node_matches, Pool};
use crate::engine::devices::{NodeSelection, ResourceSlice};
use crate::engine::model::NodeSpec;

impl<'a> Pool<'a> {
    /// kube's `GatherPools` ([`gather_pools`]).
    pub(super) fn gather(
        slices_for_node: &[&'a ResourceSlice],
        node: &NodeSpec,
        all_slices: &'a [Arc<ResourceSlice>],
    ) -> Vec<Pool<'a>> {
        gather_pools(slices_for_node, node, all_slices)
    }
}

impl Pool<'_> {
    pub(super) fn id(&self) -> String {
        format!("{}/{}", self.driver, self.name)
    }

    pub(super) fn empty(driver: Arc<str>, name: Arc<str>) -> Self {
        Self {
            driver,
            name,
            incomplete: false,
            invalid: false,
            slices: Vec::new(),
            slices_not_targeting: Vec::new(),
            counter_sets: HashMap::new(),
            has_binding_conditions: false,
        }
    }
}

/// kube's `GatherPools`: the pools with devices for `node`, sorted by driver and pool name,
/// those with binding conditions last.
fn gather_pools<'a>(
    slices_for_node: &[&'a ResourceSlice],
    node: &NodeSpec,
    all_slices: &'a [Arc<ResourceSlice>],
) -> Vec<Pool<'a>> {
    // (driver, pool) → the slices of the newest generation seen; a BTreeMap iterates in kube's
    // sortPoolsByID order.
    let mut pools: BTreeMap<(Arc<str>, Arc<str>), Vec<&'a ResourceSlice>> = BTreeMap::new();
    for slice in slices_for_node {
        let relevant = match &slice.node_selection {
            NodeSelection::FromSlice => slice.devices.iter().any(|d| node_matches(node, &d.node_selection)),
            selection => node_matches(node, selection),
        };
        if !relevant {
            continue;
        }
        // kube's addSlice.
        let entry = pools
            .entry((Arc::clone(&slice.driver), Arc::clone(&slice.pool)))
            .or_default();
        match entry.first().map(|s| s.pool_generation) {
            None => entry.push(slice),
            Some(g) if slice.pool_generation < g => {}
            Some(g) if slice.pool_generation > g => {
                entry.clear();
                entry.push(slice);
            }
            Some(_) => entry.push(slice),
        }
    }
    let mut result = Vec::with_capacity(pools.len());
    let mut with_binding_conditions = Vec::new();
    for ((driver, name), slices) in pools {
        let Some(first) = slices.first() else { continue };
        let (count, generation) = (first.pool_slice_count, first.pool_generation);
        let pool = if slices.len() as i64 == count {
            build_pool(driver, name, slices, &[])
        } else {
            // kube's checkSlicesInPool.
            let mut obsolete = false;
            let mut all_for_pool: Vec<&'a ResourceSlice> = Vec::new();
            for s in all_slices {
                if s.driver != driver || s.pool != name {
                    continue;
                }
                if s.pool_generation == generation {
                    all_for_pool.push(s);
                } else if s.pool_generation > generation {
                    obsolete = true;
                    break;
                }
            }
            if obsolete {
                continue;
            }
            if all_for_pool.len() as i64 != count {
                let mut p = Pool::empty(driver, name);
                p.incomplete = true;
                result.push(p);
                continue;
            }
            build_pool(driver, name, slices, &all_for_pool)
        };
        if pool.has_binding_conditions {
            with_binding_conditions.push(pool);
        } else {
            result.push(pool);
        }
    }
    result.extend(with_binding_conditions);
    result
}

/// kube's `buildPool`: the slices sorted by name, counter sets gathered, and the pool checked
/// (unique device names, known counter sets and counters).
fn build_pool<'a>(
    driver: Arc<str>,
    name: Arc<str>,
    mut slices: Vec<&'a ResourceSlice>,
    all_for_pool: &[&'a ResourceSlice],
) -> Pool<'a> {
    slices.sort_by(|a, b| a.name.cmp(&b.name));
    let mut pool = Pool::empty(driver, name);
    let mut counter_set_slices = Vec::new();
    for s in &slices {
        if s.shared_counters.is_empty() {
            pool.slices.push(*s);
        } else {
            counter_set_slices.push(*s);
        }
    }
    if slices.len() < all_for_pool.len() {
        let targeting: HashSet<&str> = slices.iter().map(|s| s.name.as_str()).collect();
        for s in all_for_pool {
            if targeting.contains(s.name.as_str()) {
                continue;
            }
            if s.shared_counters.is_empty() {
                pool.slices_not_targeting.push(*s);
            } else {
                counter_set_slices.push(*s);
            }
        }
    }
    pool.has_binding_conditions = pool
        .slices
        .iter()
        .any(|s| s.devices.iter().any(|d| d.has_binding_conditions));
    let invalid = |mut pool: Pool<'a>| {
        pool.invalid = true;
        pool.slices.clear();
        pool.slices_not_targeting.clear();
        pool.counter_sets.clear();
        pool
    };
    // validateDeviceNames.
    let mut names = HashSet::new();
    for s in &pool.slices {
        for d in &s.devices {
            if !names.insert(&*d.name) {
                return invalid(pool);
            }
        }
    }
    // getAndValidateCounterSets.
    for s in &counter_set_slices {
        for cs in &s.shared_counters {
            if pool.counter_sets.insert(cs.name.as_str(), cs).is_some() {
                return invalid(pool);
            }
        }
    }
    // validateDeviceCounterConsumption, for the slices for the node and the others.
    let consumption_ok = pool.slices.iter().chain(&pool.slices_not_targeting).all(|s| {
        s.devices.iter().all(|d| {
            d.consumes_counters.iter().all(|c| {
                pool.counter_sets
                    .get(c.counter_set.as_str())
                    .is_some_and(|set| c.counters.keys().all(|k| set.counters.contains_key(k)))
            })
        })
    });
    if !consumption_ok {
        return invalid(pool);
    }
    pool
}
