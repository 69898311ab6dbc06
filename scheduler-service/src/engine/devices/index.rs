//! What DynamicResources reads of the DRA objects for every pod, gathered once per snapshot:
//! the slices by node with each node's device signature ([`SliceIndex`]), the devices in use
//! ([`InUse`]), and the allocation verdicts shared between pods ([`DeviceIndex`]).

use std::sync::Arc;

use super::objects::*;
use crate::engine::quantity::Quantity;

/// The ResourceSlices by the node they are for, as kube's allocator splits them
/// (`slicesOnNode` and the rest): built once per snapshot, read for every node of every pod.
///
/// With it, each node's *device signature*: a hash of everything the allocator reads of the
/// node's own pools (their order, slice counts, shared counters, and each device but its name:
/// attributes, capacity, counters consumed, taints), so that nodes whose devices look alike get
/// one allocation verdict per pod (see `dynamicresources::PodDevices::filter`). A node has none
/// (it is evaluated on its own) when one of its pools is not complete on it, and no node has one
/// while some slice is not node-local (a node selector, all nodes, per-device selection: such
/// devices are shared by nodes, and their use by one pod changes what others find).
#[derive(Debug, Default)]
pub struct SliceIndex {
    /// Every ResourceSlice, in name order.
    pub all: Vec<Arc<ResourceSlice>>,
    /// The slices with a `nodeName`, by that node.
    pub on_node: std::collections::HashMap<String, Vec<Arc<ResourceSlice>>>,
    /// The others (a node selector, all nodes, per-device node selection), in name order.
    pub shared: Vec<Arc<ResourceSlice>>,
    /// Per node with node-local slices: its device signature (`None`: evaluated on its own), and
    /// its devices in the signature's order (whose use, per pod, completes the signature).
    signatures: std::collections::HashMap<String, (Option<u64>, Vec<DeviceId>), foldhash::fast::RandomState>,
    /// Each device of a node with a signature: its node and its position in the node's
    /// signature order.
    positions: std::collections::HashMap<DeviceId, (Arc<str>, usize), foldhash::fast::RandomState>,
    /// Each device's shape (its driver and all a selector can read of it, hashed with a
    /// per-process seed), by the device's address in the slices this index keeps alive.
    shapes: std::collections::HashMap<usize, u64, foldhash::fast::RandomState>,
}

/// The per-process seed of device shapes: devices of one shape answer every selector alike, so a
/// selector's result is kept per shape (`cel::SelectorCache`); the seed keeps shapes from being
/// made to collide on purpose.
static SHAPE_SEED: std::sync::LazyLock<foldhash::quality::RandomState> =
    std::sync::LazyLock::new(foldhash::quality::RandomState::default);

/// A device's shape: its driver and all a selector can read of it.
fn shape_of(driver: &str, d: &Device) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = SHAPE_SEED.build_hasher();
    driver.hash(&mut h);
    device_shape(d, &mut h);
    h.finish()
}

/// Per node (by its index in the snapshot), the devices in use as bits in its signature order
/// ([`SliceIndex::in_use_bits`]).
pub type BusyNodes = std::collections::HashMap<u32, Vec<u64>, foldhash::fast::RandomState>;

/// A node's pools, by (driver, pool), with their slices.
type PoolSlices<'s> = std::collections::BTreeMap<(Arc<str>, Arc<str>), Vec<&'s Arc<ResourceSlice>>>;

/// splitmix64's finalizer.
fn splitmix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

/// The devices in use for one pod: the snapshot's allocated devices and those the pods of its
/// batch placed before it took (a persistent set: a pod's view costs no copy).
#[derive(Debug, Clone, Default)]
pub struct InUse {
    /// The snapshot's ([`DeviceObjects::allocated_devices`]).
    pub snapshot: Arc<std::collections::HashSet<DeviceId>>,
    /// The batch's.
    pub batch: imbl::HashSet<DeviceId>,
    /// The shared devices in use in the snapshot, with the capacity consumed
    /// ([`DeviceObjects::shared_devices`]).
    pub shared_snapshot: Arc<std::collections::HashMap<DeviceId, Consumed>>,
    /// The shared devices the batch took, with the capacity it consumed.
    pub shared_batch: imbl::HashMap<DeviceId, Consumed>,
}

impl InUse {
    /// Whether `device` is in use (allocated to one claim).
    pub fn contains(&self, device: &DeviceId) -> bool {
        self.snapshot.contains(device) || self.batch.contains(device)
    }

    /// Whether `device` is shared by some claim (kube's `AllocatedSharedDeviceIDs`).
    pub fn is_shared(&self, device: &DeviceId) -> bool {
        self.shared_snapshot.contains_key(device) || self.shared_batch.contains_key(device)
    }

    /// The capacity the shares of `device` consume (kube's `AggregatedCapacity`), if shared.
    pub fn consumed(&self, device: &DeviceId) -> Option<Consumed> {
        match (self.shared_snapshot.get(device), self.shared_batch.get(device)) {
            (None, None) => None,
            (Some(a), None) | (None, Some(a)) => Some(a.clone()),
            (Some(a), Some(b)) => {
                let mut sum = a.clone();
                for (name, q) in b {
                    let v = sum.entry(name.clone()).or_default();
                    *v = Quantity::from_nanos(v.nanos().saturating_add(q.nanos()));
                }
                Some(sum)
            }
        }
    }
}

impl From<std::collections::HashSet<DeviceId>> for InUse {
    fn from(snapshot: std::collections::HashSet<DeviceId>) -> Self {
        Self {
            snapshot: Arc::new(snapshot),
            ..Self::default()
        }
    }
}

/// A hash of the capacity consumed on shared devices of a node, one term per device: devices
/// by their position in the node's signature order, summed (wrapping) so that a term can be
/// added without the others.
pub fn shared_term(position: usize, consumed: &Consumed) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    position.hash(&mut h);
    consumed.hash(&mut h);
    splitmix(h.finish())
}

/// Hashes what the allocator reads of a device: all but its name.
fn device_shape(d: &Device, h: &mut impl std::hash::Hasher) {
    use std::hash::Hash;
    d.attributes.hash(h);
    d.capacity.hash(h);
    d.consumes_counters.hash(h);
    d.node_selection.hash(h);
    d.taints.hash(h);
    d.allow_multiple_allocations.hash(h);
    d.capacity_policies.hash(h);
    d.has_binding_conditions.hash(h);
}

impl SliceIndex {
    /// The index of `slices` (in name order).
    pub fn new(slices: Vec<Arc<ResourceSlice>>) -> Self {
        let mut on_node: std::collections::HashMap<String, Vec<Arc<ResourceSlice>>> = Default::default();
        let mut shared = Vec::new();
        for s in &slices {
            match &s.node_selection {
                NodeSelection::NodeName(n) if !n.is_empty() => {
                    on_node.entry(n.clone()).or_default().push(Arc::clone(s))
                }
                _ => shared.push(Arc::clone(s)),
            }
        }
        let mut signatures =
            std::collections::HashMap::with_capacity_and_hasher(on_node.len(), foldhash::fast::RandomState::default());
        let mut positions: std::collections::HashMap<DeviceId, (Arc<str>, usize), foldhash::fast::RandomState> =
            Default::default();
        let shapes = slices
            .iter()
            .flat_map(|s| {
                s.devices
                    .iter()
                    .map(|d| (d as *const Device as usize, shape_of(&s.driver, d)))
            })
            .collect();
        for (node, local) in &on_node {
            // The node's pools as the allocator walks them: by (driver, pool), the newest
            // generation's slices in name order.
            let mut pools: PoolSlices<'_> = Default::default();
            for s in local {
                let entry = pools.entry((Arc::clone(&s.driver), Arc::clone(&s.pool))).or_default();
                match entry.first().map(|f| f.pool_generation) {
                    Some(g) if s.pool_generation < g => {}
                    Some(g) if s.pool_generation > g => {
                        entry.clear();
                        entry.push(s);
                    }
                    _ => entry.push(s),
                }
            }
            let mut h = std::collections::hash_map::DefaultHasher::new();
            let mut complete = true;
            let mut devices = Vec::new();
            for ((driver, pool), slices) in &pools {
                use std::hash::Hash;
                let count = slices.first().map_or(0, |f| f.pool_slice_count);
                complete &= slices.len() as i64 == count;
                driver.hash(&mut h);
                count.hash(&mut h);
                for s in slices {
                    s.shared_counters.hash(&mut h);
                    let mut names = std::collections::HashSet::new();
                    // A duplicate device name makes the pool invalid.
                    s.devices.iter().all(|d| names.insert(&d.name)).hash(&mut h);
                    s.devices.len().hash(&mut h);
                    for d in &s.devices {
                        device_shape(d, &mut h);
                        devices.push(DeviceId {
                            driver: Arc::clone(driver),
                            pool: Arc::clone(pool),
                            device: Arc::clone(&d.name),
                        });
                    }
                }
            }
            use std::hash::Hasher;
            let shared_node: Arc<str> = Arc::from(node.as_str());
            for (i, d) in devices.iter().enumerate() {
                positions.insert(d.clone(), (Arc::clone(&shared_node), i));
            }
            signatures.insert(node.clone(), (complete.then(|| h.finish()), devices));
        }
        Self {
            all: slices,
            on_node,
            shared,
            signatures,
            positions,
            shapes,
        }
    }

    /// The shape of `device`, one of this index's slices' devices (`None` for another).
    pub fn shape(&self, device: &Device) -> Option<u64> {
        self.shapes.get(&(device as *const Device as usize)).copied()
    }

    /// Where `device` is in the signature order of its node, if its node has a signature
    /// order (a node-local pool).
    pub fn position(&self, device: &DeviceId) -> Option<(&str, usize)> {
        self.positions.get(device).map(|(n, i)| (&**n, *i))
    }

    /// Marks `devices` in use in `busy` (per node, bits in signature order), `index_of` giving
    /// a node's index in the snapshot; devices of no node-local pool, or of a node the snapshot
    /// does not have, are left out (with such pools the signatures are not used).
    pub fn in_use_bits<'d>(
        &self,
        busy: &mut BusyNodes,
        index_of: impl Fn(&str) -> Option<u32>,
        devices: impl IntoIterator<Item = &'d DeviceId>,
    ) {
        for d in devices {
            if let Some((node, i)) = self.positions.get(d) {
                let Some(n) = index_of(node) else { continue };
                let bits = busy.entry(n).or_default();
                if bits.len() <= i / 64 {
                    bits.resize(i / 64 + 1, 0);
                }
                bits[i / 64] |= 1 << (i % 64);
            }
        }
    }

    /// Node `node`'s device signature with no device in use, if it has one: nodes with equal
    /// signatures (with [`SliceIndex::with_use`]) get the same allocation verdict for a pod. A
    /// node without slices has the signature of no devices.
    pub fn base_signature(&self, node: &str) -> Option<u64> {
        if !self.shared.is_empty() {
            return None;
        }
        match self.signatures.get(node) {
            None => Some(0),
            Some((base, _)) => *base,
        }
    }

    /// A base signature with the devices `in_use` marks taken.
    pub fn with_use(base: u64, in_use: &[&[u64]]) -> u64 {
        let mut sig = base;
        // The devices in use, as bits in signature order (64 a word), mixed into the base.
        let words = in_use.iter().map(|b| b.len()).max().unwrap_or(0);
        for w in 0..words {
            let bits = in_use.iter().fold(0u64, |acc, b| acc | b.get(w).copied().unwrap_or(0));
            if bits != 0 {
                sig = splitmix(sig ^ splitmix(bits ^ (w as u64).rotate_left(32)));
            }
        }
        sig
    }
}

/// What DynamicResources' PreFilter reads for every pod of a snapshot, gathered once: the
/// ResourceSlices by node, and the devices in use ([`DeviceObjects::allocated_devices`]).
#[derive(Debug, Default)]
pub struct DeviceIndex {
    /// Every ResourceSlice, by node.
    pub slices: Arc<SliceIndex>,
    /// The devices allocated to claims (admin-access results excluded).
    pub in_use: Arc<std::collections::HashSet<DeviceId>>,
    /// The devices in use by node, as bits in the node's signature order.
    pub busy_nodes: Arc<BusyNodes>,
    /// The shared devices in use, with the capacity consumed ([`DeviceObjects::shared_devices`]).
    pub shared: Arc<std::collections::HashMap<DeviceId, Consumed>>,
    /// Per node (by index) with shared devices in use: the sum of their [`shared_term`]s.
    pub shared_nodes: Arc<std::collections::HashMap<u32, u64>>,
    /// Each node's base signature ([`SliceIndex::base_signature`]), in snapshot order.
    pub signatures: Arc<[Option<u64>]>,
    /// Allocation verdicts shared by the pods decided on this snapshot and the snapshots derived
    /// from it by deltas that change no DeviceClass ([`SharedVerdicts`]).
    pub verdicts: Arc<SharedVerdicts>,
}

/// Allocation verdicts by (what a pod's claims ask, node device signature): whether they can be
/// allocated and the raw score (`Err`: the rejection's message). Both parts of the key are hashes
/// of content (a node's signature covers its devices and which are in use), so a verdict holds
/// in every snapshot with the same DeviceClasses, and is kept across the deltas that change none.
/// Errors are not kept (their messages name the claim; a filter timeout's names the node). Each
/// verdict keeps how long its search took: a pod whose `filterTimeout` that does not exceed
/// searches again (kube's search would time out for it).
pub type SharedVerdicts = std::sync::Mutex<
    std::collections::HashMap<(u64, u64), (Result<Fit, String>, std::time::Duration), foldhash::fast::RandomState>,
>;

/// What a node's allocation scores: DynamicResources' raw score (kube's prioritized lists) and,
/// with placement's `DevicePacking` on, the packing score (0 to 100; 0 with it off).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fit {
    /// DynamicResources' raw score.
    pub priority: i64,
    /// `DevicePacking`'s score.
    pub packing: i64,
}

/// Most verdicts a snapshot keeps ([`DeviceIndex::verdicts`]); past it, it starts over.
pub const MAX_SHARED_VERDICTS: usize = 1 << 16;

/// What a pod's claims ask, hashed with the per-process seed: two pods whose claims ask alike
/// (requests, selectors, constraints, in order) get the same allocation verdict on a node.
pub fn claims_key<'c>(claims: impl IntoIterator<Item = &'c ResourceClaim>) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = SHAPE_SEED.build_hasher();
    for c in claims {
        c.requests.hash(&mut h);
        c.constraints.hash(&mut h);
        0xffu8.hash(&mut h);
    }
    h.finish()
}

impl DeviceIndex {
    /// The index of a snapshot's objects, for its nodes (`nodes`: their names in snapshot order),
    /// with the verdicts of its lineage. `slices` are the snapshot's ResourceSlices in name order
    /// as DynamicResources reads them: with the DeviceTaintRules' taints applied
    /// (`crate::engine::device_taint_rules::patched_slices`).
    pub fn of<'n>(
        objects: &DeviceObjects,
        slices: Vec<Arc<ResourceSlice>>,
        nodes: impl Iterator<Item = &'n str>,
        verdicts: Arc<SharedVerdicts>,
    ) -> Self {
        let slices = SliceIndex::new(slices);
        let (in_use, shared) = objects.devices_in_use();
        let names: Vec<&str> = nodes.collect();
        let index: std::collections::HashMap<&str, u32, foldhash::fast::RandomState> =
            names.iter().enumerate().map(|(i, n)| (*n, i as u32)).collect();
        let mut busy_nodes = BusyNodes::default();
        slices.in_use_bits(&mut busy_nodes, |n| index.get(n).copied(), &in_use);
        let mut shared_nodes: std::collections::HashMap<u32, u64> = std::collections::HashMap::new();
        for (d, consumed) in &shared {
            if let Some((node, i)) = slices.position(d) {
                if let Some(n) = index.get(node) {
                    let t = shared_nodes.entry(*n).or_default();
                    *t = t.wrapping_add(shared_term(i, consumed));
                }
            }
        }
        let signatures = names.iter().map(|n| slices.base_signature(n)).collect();
        Self {
            slices: Arc::new(slices),
            in_use: Arc::new(in_use),
            busy_nodes: Arc::new(busy_nodes),
            shared: Arc::new(shared),
            shared_nodes: Arc::new(shared_nodes),
            signatures,
            verdicts,
        }
    }
}
