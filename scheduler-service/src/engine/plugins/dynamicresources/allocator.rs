//! kube's structured device allocator, as kube 1.37 runs it with its default feature gates: the
//! *incubating* implementation of `k8s.io/dynamic-resource-allocation/structured`
//! (`internal/incubating/allocator_incubating.go`, `pools_incubating.go`, `constraint.go`).
//!
//! [`Allocator::allocate`] finds devices for all claims of a pod on one node by the same
//! exhaustive first-fit search as kube's `Allocate`, walking pools (sorted by driver, then pool
//! name), their slices (sorted by name) and each slice's devices in the same order, so the same
//! inputs pick the same devices:
//!
//! - `exactly` requests (class selectors, then the request's; `ExactCount` and `All`), with
//!   `adminAccess` (an admin-access request may take devices in use, not one its own claim is
//!   already taking);
//! - `firstAvailable` lists, each subrequest tried in order (results named `request/subrequest`);
//! - `matchAttribute` and `distinctAttribute` constraints;
//! - device taints (`NoSchedule` and `NoExecute` keep a device unless the request tolerates them;
//!   a result records its request's tolerations, as kube records them);
//! - partitionable devices (shared counters, counters consumed by devices in use);
//! - consumable capacity (`DRAConsumableCapacity`, `DRAFractionalCapacityRange`): devices with
//!   `allowMultipleAllocations` shared by several claims, each share consuming capacity by its
//!   request's `capacity.requests` and the capacity's `requestPolicy` (`capacity.rs`,
//!   kube's `consumable_capacity.go`), beside what the device's shares in use and being
//!   allocated consume; a share's result records its `consumedCapacity` and a new `shareID`;
//! - node selection by slice or per device, and the result's node selector as kube builds it;
//! - incomplete, obsolete and invalid pools;
//! - the limit of [`ALLOCATION_RESULTS_MAX_SIZE`] devices per claim.
//!
//! - binding conditions (pools with such devices walked last, the conditions copied into the
//!   result, `bindsToNode` limiting the result to the node).
//!
//! With placement's `DevicePacking` ([`packing`]) the walk takes each node's devices in packing
//! order instead; the search is otherwise the same.
//!
//! The search is here; its parts in the submodules, each named after kube's: `pools` (GatherPools),
//! `select` (which devices a request may take), `constraints` (matchAttribute,
//! distinctAttribute), `counters` (shared counters), `capacity` (consumable capacity),
//! `node_selector` (the result's node selector), `diagnose` (why a claim does not fit, for
//! explanations) and `packing` (placement's DevicePacking).
//!
//! A share's `shareID` is left empty in the result: kube's allocator draws a random UUID for it,
//! which the writer (the binder's PreBind) draws. Configuration (`config`) is not part of
//! [`Allocation`], so results carry none; derived attributes and compatibility groups are not in
//! the engine's model.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::cel::{CelError, SelectorCache};
use crate::engine::devices::{
    AllocatedDevice, Allocation, AllocationMode, Amount, AttributeValue, CounterSet, Device, DeviceClass, DeviceId,
    DeviceTaintEffect, InUse, NodeSelection, RequestKind, RequestSpec, ResourceClaim, ResourceSlice, SliceIndex,
};
use crate::engine::model::{NodeSpec, Requirement, SelectorOp, SelectorTerm};

mod allocate;
pub mod capacity;
mod constraints;
mod counters;
pub mod diagnose;
mod node_selector;
pub mod packing;
mod pools;
mod select;

/// Most devices one claim's allocation may hold (kube's `resourceapi.AllocationResultsMaxSize`).
pub const ALLOCATION_RESULTS_MAX_SIZE: usize = 32;

/// Why allocation stopped with an error, in kube's words (`allocator_incubating.go`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocateError {
    /// The request names no class.
    #[error("claim {claim}, request {request}: missing device class name (unsupported request type?)")]
    MissingClassName {
        /// `namespace/name` of the claim (kube's `klog.KObj`).
        claim: String,
        /// The request (or subrequest) name.
        request: String,
    },
    /// The request's class does not exist.
    #[error("claim {claim}, request {request}: could not retrieve device class {class}: deviceclass.resource.k8s.io \"{class}\" not found")]
    ClassNotFound {
        /// The claim.
        claim: String,
        /// The request (or subrequest) name.
        request: String,
        /// The class name.
        class: String,
    },
    /// A capacity request cannot be computed (not representable in the device's range
    /// arithmetic, or a negative amount).
    #[error("claim {claim}, request {request}: {doing} {device}: {reason}")]
    Capacity {
        /// The claim.
        claim: String,
        /// The request (or subrequest) name.
        request: String,
        /// kube's context: `checking capacity for device`, `rechecking capacity for device`, or
        /// `computing consumed capacity for device`.
        doing: &'static str,
        /// The device (its name alone for an `All` request, as kube writes it).
        device: String,
        /// kube's reason (`capacity "name": ...`).
        reason: String,
    },
    /// An `All` request meets a pool that is not complete.
    #[error(
        "claim {claim}, request {request}: asks for all devices, but resource pool {pool} is currently being updated"
    )]
    AllDevicesPoolIncomplete {
        /// The claim.
        claim: String,
        /// The request (or subrequest) name.
        request: String,
        /// `driver/pool`.
        pool: String,
    },
    /// An `All` request meets an invalid pool.
    #[error("claim {claim}, request {request}: asks for all devices, but resource pool {pool} is currently invalid")]
    AllDevicesPoolInvalid {
        /// The claim.
        claim: String,
        /// The request (or subrequest) name.
        request: String,
        /// `driver/pool`.
        pool: String,
    },
    /// The claim's requests need more devices than a claim may hold.
    #[error("claim {claim}, request {request}: adding {adding} devices exceeds the claim limit of {limit}, with {already} already accounted for")]
    TooManyDevices {
        /// The claim.
        claim: String,
        /// The request name.
        request: String,
        /// Devices this request needs at least.
        adding: usize,
        /// [`ALLOCATION_RESULTS_MAX_SIZE`].
        limit: usize,
        /// Devices the claim's earlier requests need at least.
        already: usize,
    },
    /// A class selector does not compile.
    #[error("class {class}: selector #{index}: CEL compile error: {source}")]
    ClassSelectorCompile {
        /// The class.
        class: String,
        /// The selector's index.
        index: usize,
        /// What is wrong.
        source: Box<CelError>,
    },
    /// A class selector failed on a device.
    #[error("class {class}: selector #{index} on device {device}: CEL runtime error: {source}")]
    ClassSelectorRuntime {
        /// The class.
        class: String,
        /// The selector's index.
        index: usize,
        /// The device.
        device: DeviceId,
        /// What went wrong.
        source: Box<CelError>,
    },
    /// A request selector does not compile.
    #[error("claim {claim}: selector #{index}: CEL compile error: {source}")]
    ClaimSelectorCompile {
        /// The claim.
        claim: String,
        /// The selector's index.
        index: usize,
        /// What is wrong.
        source: Box<CelError>,
    },
    /// A request selector failed on a device.
    #[error("claim {claim}: selector #{index} on device {device}: CEL runtime error: {source}")]
    ClaimSelectorRuntime {
        /// The claim.
        claim: String,
        /// The selector's index.
        index: usize,
        /// The device.
        device: DeviceId,
        /// What went wrong.
        source: Box<CelError>,
    },
    /// One of the devices of an `All` request breaks a constraint of its claim.
    #[error("claim {claim}, request {request}: cannot add device {device} because a claim constraint would not be satisfied")]
    ConstraintNotSatisfiable {
        /// The claim.
        claim: String,
        /// The request (or subrequest) name.
        request: String,
        /// The device.
        device: DeviceId,
    },
    /// Nothing could be allocated and some pool for the node is invalid. Not fatal: kube
    /// reports it (`ErrFailedAllocationOnNode`) only when every node fails.
    #[error("invalid resource pools were encountered")]
    InvalidPools,
    /// A slice's node selector has several terms.
    #[error("create NodeSelector for claim {claim}: unsupported ResourceSlice.NodeSelector with {terms} terms")]
    NodeSelector {
        /// The claim's name.
        claim: String,
        /// How many terms.
        terms: usize,
    },
    /// Every subrequest of the first request needs more devices than a claim may hold (kube's
    /// `errAllocationResultMaxSizeExceeded`, returned as is).
    #[error("allocation max size exceeded")]
    MaxSizeExceeded,
    /// The search passed its deadline (kube's `DynamicResourcesArgs.filterTimeout`): kube's
    /// Filter turns the allocator's `context.DeadlineExceeded` into this error
    /// (`dynamicresources.go`).
    #[error("node {node}: timed out trying to allocate devices")]
    TimedOut {
        /// The node's name.
        node: String,
    },
}

/// kube's `klog.KObj` of a claim: `namespace/name`, or the name alone without namespace.
fn kobj(claim: &ResourceClaim) -> String {
    if claim.namespace.is_empty() {
        claim.name.clone()
    } else {
        claim.key()
    }
}

/// kube's `NodeMatches` (`pools_incubating.go`): whether `node` is one of the nodes a slice's or
/// device's node selection names. A device of a per-device slice that sets nothing matches no
/// node.
pub fn node_matches(node: &NodeSpec, selection: &NodeSelection) -> bool {
    match selection {
        NodeSelection::NodeName(name) => !name.is_empty() && node.name == *name,
        NodeSelection::AllNodes => true,
        NodeSelection::NodeSelector(terms) => terms.iter().any(|t| t.matches(node)),
        NodeSelection::FromSlice => false,
    }
}

/// Where a device is: pool, slice (of the pool's slices for the node) and device index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
struct Loc {
    pool: usize,
    slice: usize,
    device: usize,
}

/// A resource pool for the node (kube's `Pool`).
#[derive(Debug)]
struct Pool<'a> {
    driver: Arc<str>,
    name: Arc<str>,
    incomplete: bool,
    invalid: bool,
    /// `DeviceSlicesTargetingNode`, sorted by name.
    slices: Vec<&'a ResourceSlice>,
    /// `DeviceSlicesNotTargetingNode`.
    slices_not_targeting: Vec<&'a ResourceSlice>,
    /// `CounterSets` by name.
    counter_sets: HashMap<&'a str, &'a CounterSet>,
    /// Some device of the pool has binding conditions (such pools go last, as kube orders them).
    has_binding_conditions: bool,
}

/// A claim constraint while devices are being picked (kube's `matchAttributeConstraint` and
/// `distinctAttributeConstraint`).
#[derive(Debug)]
struct Constraint<'a> {
    requests: &'a [String],
    attribute: &'a str,
    distinct: bool,
    /// matchAttribute: the value of the first device and how many devices are in the set;
    /// distinctAttribute: every value.
    values: Vec<&'a AttributeValue>,
}

/// Counter name → amount in nano-units, per counter set.
type Counters<'a> = HashMap<&'a str, HashMap<&'a str, i128>>;

/// One request or subrequest to allocate (kube's `requestData`).
#[derive(Debug)]
struct RequestData<'a> {
    spec: &'a RequestSpec,
    /// The request's name, or the subrequest's.
    name: &'a str,
    /// The parent request's name for a subrequest.
    parent: Option<&'a str>,
    /// Admin access (never for a subrequest, as kube's `deviceSubRequestAccessor`).
    admin_access: bool,
    class: &'a DeviceClass,
    num_devices: usize,
    /// The devices of an `All` request.
    all_devices: Vec<Loc>,
}

/// Request, subrequest and device index (kube's `deviceIndices`).
#[derive(Debug, Clone, Copy, Default)]
struct Indices {
    claim: usize,
    request: usize,
    sub: usize,
    device: usize,
}

/// One device picked (kube's `internalDeviceResult`).
#[derive(Debug, Clone)]
struct Picked<'a> {
    request: String,
    id: DeviceId,
    loc: Loc,
    admin_access: Option<bool>,
    spec: &'a RequestSpec,
    /// `consumedCapacity` (a share of a device with capacity).
    consumed: BTreeMap<String, Amount>,
    /// A share of a device that allows multiple allocations.
    shared: bool,
}

/// Why the search stopped short: kube's `errAllocationResultMaxSizeExceeded` or a real error.
#[derive(Debug)]
enum Stop {
    MaxSize,
    Fatal(AllocateError),
}

/// How many `allocate_one` steps pass between two looks at the clock (the first step looks).
const DEADLINE_EVERY: u32 = 64;

impl From<AllocateError> for Stop {
    fn from(e: AllocateError) -> Self {
        Self::Fatal(e)
    }
}

/// What [`Search::allocate_device`] changed, for its rollback (kube's `deviceRollbackState`).
#[derive(Debug, Clone, Copy, Default)]
struct Undo {
    counters_reserved: bool,
    /// A share's capacity was added to `allocating_capacity` (its amounts are the last result's).
    capacity_inserted: bool,
    /// The device had an `allocating_capacity` entry before.
    capacity_existed: bool,
    constraints_added: usize,
    device_marked: bool,
    result_added: bool,
}

/// kube's structured allocator (the incubating `Allocator`): the classes, the cluster's slices,
/// the devices in use and the compiled selectors. Pure: [`Allocator::allocate`] changes nothing.
pub struct Allocator<'a> {
    classes: &'a dyn Fn(&str) -> Option<&'a DeviceClass>,
    slices: &'a SliceIndex,
    all_slices: &'a [Arc<ResourceSlice>],
    allocated: &'a InUse,
    cel: &'a SelectorCache,
    /// Placement's `DevicePacking` ([`packing`]): devices walked in packing order, and the node
    /// scored; `None` walks them in kube's order.
    packing: Option<&'a super::device_packing::Packing>,
}

impl std::fmt::Debug for Allocator<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocator")
            .field("slices", &self.all_slices.len())
            .field(
                "allocated",
                &(self.allocated.snapshot.len() + self.allocated.batch.len()),
            )
            .finish()
    }
}

impl<'a> Allocator<'a> {
    /// kube's `incubating.NewAllocator`: `classes` looks classes up by name, `slices` are all
    /// ResourceSlices by node (split once per snapshot, as kube's `slicesOnNode`), `allocated` the devices in use (kube's `AllocatedState.AllocatedDevices`:
    /// allocated to claims, admin-access results excluded), `cel` compiles selectors.
    pub fn new(
        classes: &'a dyn Fn(&str) -> Option<&'a DeviceClass>,
        slices: &'a SliceIndex,
        allocated: &'a InUse,
        cel: &'a SelectorCache,
    ) -> Self {
        Self {
            classes,
            slices,
            all_slices: &slices.all,
            allocated,
            cel,
            packing: None,
        }
    }

    /// The allocator with placement's device packing ([`packing`]) on, or (`None`) kube's order.
    pub fn with_packing(mut self, packing: Option<&'a super::device_packing::Packing>) -> Self {
        self.packing = packing;
        self
    }

    /// kube's `Allocator.Allocate`: one [`Allocation`] per claim, in order, when all claims can
    /// be allocated on `node`; `Ok(None)` when they cannot; an error (bad CEL, a missing class,
    /// …) with kube's message otherwise.
    pub fn allocate(
        &self,
        node: &NodeSpec,
        claims: &[&'a ResourceClaim],
    ) -> Result<Option<Vec<Allocation>>, AllocateError> {
        self.allocate_until(node, claims, None)
    }

    /// [`Allocator::allocate`] with a deadline: past it the search stops with
    /// [`AllocateError::TimedOut`] (kube's `allocateOne` checks its context at each step; this
    /// search looks at the clock at the first step and every [`DEADLINE_EVERY`] steps after).
    pub fn allocate_until(
        &self,
        node: &NodeSpec,
        claims: &[&'a ResourceClaim],
        deadline: Option<std::time::Instant>,
    ) -> Result<Option<Vec<Allocation>>, AllocateError> {
        Ok(self.allocate_scored(node, claims, deadline)?.map(|(a, _)| a))
    }

    /// [`Allocator::allocate_until`] with the node's packing score ([`packing`]; 0 without
    /// packing).
    pub fn allocate_scored(
        &self,
        node: &NodeSpec,
        claims: &[&'a ResourceClaim],
        deadline: Option<std::time::Instant>,
    ) -> Result<Option<(Vec<Allocation>, i64)>, AllocateError> {
        let mut search = self.prepare(node, claims)?;
        search.deadline = deadline;
        let done = match search.allocate_one(Indices::default(), false, Loc::default()) {
            Ok(done) => done,
            Err(Stop::MaxSize) => return Err(AllocateError::MaxSizeExceeded),
            Err(Stop::Fatal(e)) => return Err(e),
        };
        if !done {
            if search.pools.iter().any(|p| p.invalid) {
                return Err(AllocateError::InvalidPools);
            }
            return Ok(None);
        }
        let mut out = Vec::with_capacity(claims.len());
        for (ci, picked) in search.result.iter().enumerate() {
            let devices = picked
                .iter()
                .map(|p| AllocatedDevice {
                    request: p.request.clone(),
                    device: p.id.clone(),
                    admin_access: p.admin_access,
                    tolerations: p.spec.tolerations.clone(),
                    consumed_capacity: p.consumed.clone(),
                    share_id: p.shared.then(String::new),
                    binding_conditions: search
                        .device(p.loc)
                        .map(|(_, d)| d.binding_conditions.clone())
                        .unwrap_or_default(),
                    binding_failure_conditions: search
                        .device(p.loc)
                        .map(|(_, d)| d.binding_failure_conditions.clone())
                        .unwrap_or_default(),
                })
                .collect();
            let node_selector = search.node_selector(picked, &claims[ci].name)?;
            out.push(Allocation {
                devices,
                node_selector,
                timestamp: None,
            });
        }
        let score = self.packing.map_or(0, |p| search.packing_score(p));
        Ok(Some((out, score)))
    }

    /// The search for `claims` on `node` before its first pick: the node's pools gathered and
    /// every request validated (kube's `Allocate` up to `allocateOne`).
    fn prepare<'s>(
        &'s self,
        node: &'s NodeSpec,
        claims: &'s [&'a ResourceClaim],
    ) -> Result<Search<'s, 'a>, AllocateError> {
        let slices_for_node: Vec<&'a ResourceSlice> = self
            .slices
            .on_node
            .get(node.name.as_str())
            .into_iter()
            .flatten()
            .chain(&self.slices.shared)
            .map(|s| &**s)
            .collect();
        let pools = Pool::gather(&slices_for_node, node, self.all_slices);
        let mut search = Search {
            alloc: self,
            node,
            claims,
            pools,
            request_data: Vec::with_capacity(claims.len()),
            selected_sub: Vec::with_capacity(claims.len()),
            constraints: Vec::with_capacity(claims.len()),
            matches: HashMap::new(),
            allocating: HashMap::new(),
            allocating_capacity: HashMap::new(),
            available_counters: HashMap::new(),
            consumed_counters: HashMap::new(),
            result: vec![Vec::new(); claims.len()],
            deadline: None,
            steps: 0,
            order: None,
        };
        if let Some(p) = self.packing {
            search.order = Some(search.packing_order(p));
        }
        for (ci, claim) in claims.iter().enumerate() {
            let mut min_per_claim = 0usize;
            let mut claim_data = Vec::with_capacity(claim.requests.len());
            for (ri, request) in claim.requests.iter().enumerate() {
                let mut datas = Vec::new();
                let min_per_request = match &request.kind {
                    RequestKind::Exactly(spec) => {
                        let data = search.validate_request(ci, ri, 0, spec, &request.name, None, spec.admin_access)?;
                        let n = data.num_devices;
                        datas.push(data);
                        n
                    }
                    RequestKind::FirstAvailable(subs) => {
                        let mut min = usize::MAX;
                        for (si, (name, spec)) in subs.iter().enumerate() {
                            let data = search.validate_request(ci, ri, si, spec, name, Some(&request.name), false)?;
                            min = min.min(data.num_devices);
                            datas.push(data);
                        }
                        if subs.is_empty() {
                            0
                        } else {
                            min
                        }
                    }
                };
                if min_per_request > ALLOCATION_RESULTS_MAX_SIZE - min_per_claim {
                    return Err(AllocateError::TooManyDevices {
                        claim: kobj(claim),
                        request: request.name.clone(),
                        adding: min_per_request,
                        limit: ALLOCATION_RESULTS_MAX_SIZE,
                        already: min_per_claim,
                    });
                }
                min_per_claim += min_per_request;
                claim_data.push(datas);
            }
            search.request_data.push(claim_data);
            search.selected_sub.push(vec![0; claim.requests.len()]);
            search
                .constraints
                .push(claim.constraints.iter().map(Constraint::new).collect());
        }
        Ok(search)
    }
}

/// One `Allocate` call's search state (kube's `allocator`).
struct Search<'s, 'a> {
    alloc: &'s Allocator<'a>,
    node: &'s NodeSpec,
    claims: &'s [&'a ResourceClaim],
    pools: Vec<Pool<'a>>,
    /// [claim][request][subrequest] (one entry for `exactly`).
    request_data: Vec<Vec<Vec<RequestData<'a>>>>,
    /// [claim][request]: the subrequest picked.
    selected_sub: Vec<Vec<usize>>,
    constraints: Vec<Vec<Constraint<'a>>>,
    /// (device, claim, request, subrequest) → whether the device matches (kube's
    /// `deviceMatchesRequest`).
    matches: HashMap<(Loc, usize, usize, usize), bool>,
    /// Devices being allocated → the claims they are for (kube's `allocatingDevices`).
    allocating: HashMap<DeviceId, Vec<usize>>,
    /// Shared devices being allocated → the capacity their new shares consume (kube's
    /// `allocatingCapacity`).
    allocating_capacity: HashMap<DeviceId, crate::engine::devices::Consumed>,
    /// Per pool: counters available once the devices in use are counted (kube's
    /// `availableCounters`).
    available_counters: HashMap<usize, Counters<'a>>,
    /// Per pool: counters the devices being allocated consume (kube's `consumedCounters`).
    consumed_counters: HashMap<usize, Counters<'a>>,
    result: Vec<Vec<Picked<'a>>>,
    /// When the search gives up ([`Allocator::allocate_until`]).
    deadline: Option<std::time::Instant>,
    /// `allocate_one` calls so far (kube's `numAllocateOneInvocations`).
    steps: u32,
    /// The devices in packing order ([`packing`]); `None`: kube's order (pools, slices, devices).
    /// With an order, a search's start [`Loc`] holds the position in it in `device`.
    order: Option<Vec<Loc>>,
}

impl<'s, 'a> Search<'s, 'a> {
    fn device(&self, loc: Loc) -> Option<(&'a ResourceSlice, &'a Device)> {
        let slice: &'a ResourceSlice = self.pools.get(loc.pool)?.slices.get(loc.slice)?;
        Some((slice, slice.devices.get(loc.device)?))
    }

    fn device_id(slice: &ResourceSlice, device: &Device) -> DeviceId {
        DeviceId {
            driver: Arc::clone(&slice.driver),
            pool: Arc::clone(&slice.pool),
            device: Arc::clone(&device.name),
        }
    }

    fn allocating_for_claim(&self, id: &DeviceId, ci: usize) -> bool {
        self.allocating.get(id).is_some_and(|c| c.contains(&ci))
    }

    /// kube's `deviceInUse`.
    fn in_use(&self, id: &DeviceId) -> bool {
        self.alloc.allocated.contains(id) || self.allocating.get(id).is_some_and(|c| !c.is_empty())
    }

    /// kube's `allocateOne`: picks the device `r` for its request, then the rest, recursively.
    fn allocate_one(&mut self, r: Indices, allocate_sub: bool, start: Loc) -> Result<bool, Stop> {
        if let Some(deadline) = self.deadline {
            let look = self.steps.is_multiple_of(DEADLINE_EVERY);
            self.steps = self.steps.wrapping_add(1);
            if look && std::time::Instant::now() >= deadline {
                return Err(Stop::Fatal(AllocateError::TimedOut {
                    node: self.node.name.clone(),
                }));
            }
        }
        if r.claim >= self.claims.len() {
            return Ok(true);
        }
        let claim = self.claims[r.claim];
        if r.request >= claim.requests.len() {
            return match self.allocate_one(
                Indices {
                    claim: r.claim + 1,
                    ..Indices::default()
                },
                false,
                Loc::default(),
            ) {
                Err(Stop::MaxSize) => Ok(false),
                other => other,
            };
        }
        let num_subs = self.request_data[r.claim][r.request].len();
        let is_sub = self.request_data[r.claim][r.request]
            .first()
            .is_some_and(|d| d.parent.is_some());
        if !allocate_sub && is_sub {
            let mut all_exceeded = true;
            for sub in 0..num_subs {
                let next = Indices { sub, ..r };
                match self.allocate_one(next, true, Loc::default()) {
                    Err(Stop::MaxSize) => continue,
                    Err(e) => return Err(e),
                    Ok(true) => {
                        self.selected_sub[r.claim][r.request] = sub;
                        return Ok(true);
                    }
                    Ok(false) => all_exceeded = false,
                }
            }
            return if all_exceeded { Err(Stop::MaxSize) } else { Ok(false) };
        }
        let Some(data) = self.request_data[r.claim][r.request].get(r.sub) else {
            // A firstAvailable request without subrequests (refused by API validation).
            return Ok(false);
        };
        let do_all = data.spec.mode == AllocationMode::All;
        if do_all && data.all_devices.is_empty() {
            return Ok(false);
        }
        let num_devices = data.num_devices;
        if r.device >= num_devices {
            return self.allocate_one(
                Indices {
                    claim: r.claim,
                    request: r.request + 1,
                    ..Indices::default()
                },
                false,
                Loc::default(),
            );
        }
        let remaining = num_devices - r.device;
        let available = ALLOCATION_RESULTS_MAX_SIZE.saturating_sub(self.result[r.claim].len());
        if remaining > available {
            return Err(Stop::MaxSize);
        }
        if do_all {
            let loc = data.all_devices[r.device];
            let Some(undo) = self.allocate_device(r, loc, true)? else {
                return Ok(false);
            };
            let next = Indices {
                device: r.device + 1,
                ..r
            };
            let done = self.allocate_one(next, allocate_sub, Loc::default());
            if !matches!(done, Ok(true)) {
                self.rollback(r, loc, undo);
            }
            return done;
        }
        if let Some(n) = self.order.as_ref().map(Vec::len) {
            for pos in start.device..n {
                let Some(loc) = self.order.as_ref().and_then(|o| o.get(pos)).copied() else {
                    break;
                };
                let next_loc = Loc {
                    pool: 0,
                    slice: 0,
                    device: pos + 1,
                };
                if let Some(done) = self.try_device(r, allocate_sub, loc, next_loc)? {
                    return Ok(done);
                }
            }
            return Ok(false);
        }
        for pi in start.pool..self.pools.len() {
            let pool = &self.pools[pi];
            if pool.incomplete || pool.invalid {
                continue;
            }
            let slice_start = if pi == start.pool { start.slice } else { 0 };
            for sl in slice_start..self.pools[pi].slices.len() {
                let slice: &'a ResourceSlice = self.pools[pi].slices[sl];
                let device_start = if pi == start.pool && sl == start.slice {
                    start.device
                } else {
                    0
                };
                for d in device_start..slice.devices.len() {
                    let loc = Loc {
                        pool: pi,
                        slice: sl,
                        device: d,
                    };
                    let next_loc = Loc {
                        pool: pi,
                        slice: sl,
                        device: d + 1,
                    };
                    if let Some(done) = self.try_device(r, allocate_sub, loc, next_loc)? {
                        return Ok(done);
                    }
                }
            }
        }
        Ok(false)
    }

    /// One step of `allocateOne`'s walk: the device at `loc` for `r`, then the rest from
    /// `next_loc`. `None`: the device does not do, try the next; `Some(true)`: all allocated.
    #[inline]
    fn try_device(&mut self, r: Indices, allocate_sub: bool, loc: Loc, next_loc: Loc) -> Result<Option<bool>, Stop> {
        let Some((slice, device)) = self.device(loc) else {
            return Ok(None);
        };
        let admin = self.request_data[r.claim][r.request][r.sub].admin_access;
        let id = Self::device_id(slice, device);
        if admin && self.allocating_for_claim(&id, r.claim) {
            return Ok(None);
        }
        if !admin && self.in_use(&id) {
            return Ok(None);
        }
        let (class, spec) = {
            let data = &self.request_data[r.claim][r.request][r.sub];
            (data.class, data.spec)
        };
        if !self.is_selectable(r.claim, r.request, r.sub, class, spec, loc)? {
            return Ok(None);
        }
        if !self.capacity_fits(r, &id, device, "checking capacity for device")? {
            return Ok(None);
        }
        let Some(undo) = self.allocate_device(r, loc, false)? else {
            return Ok(None);
        };
        let next = Indices {
            device: r.device + 1,
            ..r
        };
        match self.allocate_one(next, allocate_sub, next_loc) {
            Ok(true) => Ok(Some(true)),
            Ok(false) => {
                self.rollback(r, loc, undo);
                Ok(None)
            }
            Err(e) => {
                self.rollback(r, loc, undo);
                Err(e)
            }
        }
    }
}
