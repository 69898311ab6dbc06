//! The Dynamic Resource Allocation objects (`resource.k8s.io/v1`) the DynamicResources plugin
//! reads (`plugins::dynamicresources`): DeviceClasses, ResourceClaims and ResourceSlices, validated
//! and kept in a snapshot as copy-on-write maps that deltas change. ResourceClaimTemplates are not
//! here: kube-scheduler never reads them (the cluster's resourceclaim controller turns them into
//! claims, and a pod waits until its claims exist).
//!
//! Names follow the API: a device is identified by driver, pool and device name
//! ([`DeviceId`]); attribute and capacity names are fully qualified (`domain/id`; an unqualified
//! name in a slice is qualified with the slice's driver when the slice is read).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::model::{SelectorTerm, Taint};
use super::quantity::Quantity;
use super::volumes::DuplicateStorageObject;

/// A device's identity: driver, pool and device name (kube's `structured.DeviceID`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    /// The driver's name (a DNS subdomain, e.g. `gpu.example.com`).
    pub driver: Arc<str>,
    /// The pool's name.
    pub pool: Arc<str>,
    /// The device's name within the pool.
    pub device: Arc<str>,
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// One value of a device attribute (`DeviceAttribute`: exactly one field set).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AttributeValue {
    /// `int`.
    Int(i64),
    /// `bool`.
    Bool(bool),
    /// `string`.
    String(String),
    /// `version`: a semantic version 2.0.0 string.
    Version(String),
}

/// A device taint's effect.
pub use super::model::TaintEffect as DeviceTaintEffect;

/// A device taint (`DeviceTaint`); the same shape as a node's taint, with `NoSchedule` and
/// `NoExecute` (and `None`, which does not keep devices from being allocated) as effects.
pub type DeviceTaint = Taint;

/// A device toleration (`DeviceToleration`), with the semantics of a pod's toleration.
pub use super::model::Toleration as DeviceToleration;

/// How a device takes its nodes, when its slice says `perDeviceNodeSelection`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum NodeSelection {
    /// Set on the slice, not the device (the slice is not per-device).
    #[default]
    FromSlice,
    /// `nodeName`.
    NodeName(String),
    /// `nodeSelector` (its terms ORed).
    NodeSelector(Vec<SelectorTerm>),
    /// `allNodes: true`.
    AllNodes,
}

/// What a device draws from one of its slice's counter sets (`DeviceCounterConsumption`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterConsumption {
    /// `counterSet`: the name of a counter set in `sharedCounters` of a slice of the same pool.
    pub counter_set: String,
    /// `counters`: counter name → amount.
    pub counters: BTreeMap<String, Quantity>,
}

/// A counter set of a slice (`CounterSet`): counter name → amount available.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterSet {
    /// `name`.
    pub name: String,
    /// `counters`: counter name → `value`.
    pub counters: BTreeMap<String, Quantity>,
}

/// A device of a ResourceSlice (`Device`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Device {
    /// `name`.
    pub name: Arc<str>,
    /// `attributes`, by fully qualified name (`domain/id`).
    pub attributes: BTreeMap<String, AttributeValue>,
    /// `capacity`, by fully qualified name, the `value` of each.
    pub capacity: BTreeMap<String, Quantity>,
    /// `consumesCounters`.
    pub consumes_counters: Vec<CounterConsumption>,
    /// Per-device node selection (only when the slice has `perDeviceNodeSelection`).
    pub node_selection: NodeSelection,
    /// `taints`.
    pub taints: Vec<DeviceTaint>,
    /// `allowMultipleAllocations` (consumable capacity: not allocated by placement, see
    /// docs/dra.md).
    pub allow_multiple_allocations: bool,
    /// `bindingConditions` is not empty (not allocated by placement, see docs/dra.md).
    pub has_binding_conditions: bool,
}

/// A ResourceSlice (`resource.k8s.io/v1`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceSlice {
    /// metadata.name.
    pub name: String,
    /// spec.driver.
    pub driver: Arc<str>,
    /// spec.pool.name.
    pub pool: Arc<str>,
    /// spec.pool.generation.
    pub pool_generation: i64,
    /// spec.pool.resourceSliceCount.
    pub pool_slice_count: i64,
    /// Which nodes the slice's devices are for: `nodeName`, `nodeSelector`, `allNodes`, or
    /// [`NodeSelection::FromSlice`] for `perDeviceNodeSelection` (each device says).
    pub node_selection: NodeSelection,
    /// spec.devices.
    pub devices: Vec<Device>,
    /// spec.sharedCounters.
    pub shared_counters: Vec<CounterSet>,
}

/// A CEL selector (`DeviceSelector.cel.expression`), kept as written; compiled once per
/// expression by the plugin.
pub type CelSelector = Arc<str>;

/// A DeviceClass.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceClass {
    /// metadata.name.
    pub name: String,
    /// spec.selectors, in order.
    pub selectors: Vec<CelSelector>,
    /// spec.extendedResourceName, if set.
    pub extended_resource_name: Option<String>,
}

/// How many devices a request asks for (`allocationMode` and `count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocationMode {
    /// `ExactCount` with `count` (1 by default).
    ExactCount(i64),
    /// `All`: every matching device of the node's pools, at least one.
    All,
}

/// One way of satisfying a request: the request itself (`exactly`) or one entry of its
/// `firstAvailable` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestSpec {
    /// `deviceClassName`.
    pub class: String,
    /// `selectors`' CEL expressions, in order.
    pub selectors: Vec<CelSelector>,
    /// `allocationMode` and `count`.
    pub mode: AllocationMode,
    /// `adminAccess` (only on `exactly`).
    pub admin_access: bool,
    /// `tolerations`.
    pub tolerations: Vec<DeviceToleration>,
    /// `capacity.requests` is set (consumable capacity: not allocated by placement).
    pub has_capacity_requests: bool,
}

/// A request of a claim (`DeviceRequest`): exactly one of `exactly` and `firstAvailable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRequest {
    /// `name`.
    pub name: String,
    /// What it asks for.
    pub kind: RequestKind,
}

/// `exactly` or `firstAvailable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestKind {
    /// `exactly`.
    Exactly(RequestSpec),
    /// `firstAvailable`: (subrequest name, spec), in order of preference.
    FirstAvailable(Vec<(String, RequestSpec)>),
}

/// A constraint of a claim (`DeviceConstraint`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceConstraint {
    /// `requests` (empty: every request of the claim). An entry may name a subrequest as
    /// `request/subrequest`.
    pub requests: Vec<String>,
    /// What the devices must agree on.
    pub kind: ConstraintKind,
}

/// `matchAttribute` or `distinctAttribute`, a fully qualified attribute name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConstraintKind {
    /// `matchAttribute`: every device has the attribute, with one value.
    MatchAttribute(String),
    /// `distinctAttribute`: every device has the attribute, each with its own value.
    DistinctAttribute(String),
}

/// One allocated device of a claim (`DeviceRequestAllocationResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatedDevice {
    /// `request`: the request's name, or `request/subrequest` for a prioritized list.
    pub request: String,
    /// The device.
    pub device: DeviceId,
    /// `adminAccess`, when the request asked for it.
    pub admin_access: Option<bool>,
    /// `tolerations`: the request's tolerations, when the device has taints.
    pub tolerations: Vec<DeviceToleration>,
}

/// A claim's `status.allocation`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Allocation {
    /// `devices.results`.
    pub devices: Vec<AllocatedDevice>,
    /// `nodeSelector` (its terms ORed); `None` when the devices are on every node.
    pub node_selector: Option<Vec<SelectorTerm>>,
}

/// A consumer a claim is reserved for (`ResourceClaimConsumerReference`, a pod in practice).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Consumer {
    /// `apiGroup` ("" for the core group).
    pub api_group: String,
    /// `resource` (`pods`).
    pub resource: String,
    /// `name`.
    pub name: String,
    /// `uid`.
    pub uid: String,
}

/// A ResourceClaim.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceClaim {
    /// metadata.namespace.
    pub namespace: String,
    /// metadata.name.
    pub name: String,
    /// metadata.uid.
    pub uid: String,
    /// spec.devices.requests.
    pub requests: Vec<DeviceRequest>,
    /// spec.devices.constraints.
    pub constraints: Vec<DeviceConstraint>,
    /// status.allocation.
    pub allocation: Option<Allocation>,
    /// status.reservedFor.
    pub reserved_for: Vec<Consumer>,
    /// metadata.deletionTimestamp is set.
    pub deleting: bool,
}

impl ResourceClaim {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// A pod's reference to a claim (`spec.resourceClaims[]`, with the claim name the pod's
/// `status.resourceClaimStatuses` gives for a template).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodClaimRef {
    /// The entry's `name` in the pod.
    pub name: String,
    /// The ResourceClaim's name: `resourceClaimName`, or the generated name from
    /// `status.resourceClaimStatuses` for a template. `None` while the resourceclaim controller
    /// has not created the template's claim yet (the pod waits, as kube's PreEnqueue makes it).
    pub claim_name: Option<String>,
    /// The entry names a template (`resourceClaimTemplateName`).
    pub from_template: bool,
}

fn selector_bytes(terms: &[SelectorTerm]) -> usize {
    terms
        .iter()
        .flat_map(|t| t.match_expressions.iter().chain(&t.match_fields))
        .map(|r| 48 + r.key.len() + 16)
        .sum()
}

fn selection_bytes(s: &NodeSelection) -> usize {
    match s {
        NodeSelection::NodeName(n) => n.len(),
        NodeSelection::NodeSelector(terms) => selector_bytes(terms),
        NodeSelection::FromSlice | NodeSelection::AllNodes => 0,
    }
}

impl DeviceClass {
    /// Approximate bytes.
    pub fn approx_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.name.len() + self.selectors.iter().map(|s| 16 + s.len()).sum::<usize>()
    }
}

impl ResourceSlice {
    /// Approximate bytes.
    pub fn approx_bytes(&self) -> usize {
        let devices: usize = self
            .devices
            .iter()
            .map(|d| {
                std::mem::size_of::<Device>()
                    + d.name.len()
                    + d.attributes.keys().map(|k| 64 + k.len()).sum::<usize>()
                    + d.capacity.keys().map(|k| 48 + k.len()).sum::<usize>()
                    + d.consumes_counters
                        .iter()
                        .map(|c| 32 + 48 * c.counters.len())
                        .sum::<usize>()
                    + selection_bytes(&d.node_selection)
                    + d.taints.len() * 64
            })
            .sum();
        std::mem::size_of::<Self>()
            + self.name.len()
            + selection_bytes(&self.node_selection)
            + devices
            + self
                .shared_counters
                .iter()
                .map(|c| 32 + 48 * c.counters.len())
                .sum::<usize>()
    }
}

impl ResourceClaim {
    /// Approximate bytes.
    pub fn approx_bytes(&self) -> usize {
        let allocated = self.allocation.as_ref().map_or(0, |a| {
            a.devices.len() * 96 + a.node_selector.as_deref().map_or(0, selector_bytes)
        });
        std::mem::size_of::<Self>()
            + self.namespace.len()
            + self.name.len()
            + self.uid.len()
            + self.requests.len() * 160
            + self.constraints.len() * 64
            + allocated
            + self.reserved_for.len() * 96
    }
}

/// The DRA objects of a snapshot, as copy-on-write maps that deltas change.
#[derive(Debug, Clone, Default)]
pub struct DeviceObjects {
    /// DeviceClasses by name.
    pub classes: imbl::OrdMap<String, Arc<DeviceClass>>,
    /// ResourceClaims by `namespace/name`.
    pub claims: imbl::OrdMap<String, Arc<ResourceClaim>>,
    /// ResourceSlices by name.
    pub slices: imbl::OrdMap<String, Arc<ResourceSlice>>,
    /// Approximate bytes of all of them.
    pub approx_bytes: usize,
}

/// The DRA objects of a full snapshot, validated.
#[derive(Debug, Clone, Default)]
pub struct DeviceParts {
    /// DeviceClasses.
    pub classes: Vec<DeviceClass>,
    /// ResourceClaims.
    pub claims: Vec<ResourceClaim>,
    /// ResourceSlices.
    pub slices: Vec<ResourceSlice>,
}

impl DeviceParts {
    /// Whether there is no object.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty() && self.claims.is_empty() && self.slices.is_empty()
    }
}

/// A change to the DRA objects. Removals apply before upserts; unknown keys are ignored.
#[derive(Debug, Clone, Default)]
pub struct DeviceDelta {
    /// DeviceClasses added or replaced by name.
    pub upsert_classes: Vec<DeviceClass>,
    /// Names of DeviceClasses removed.
    pub remove_classes: Vec<String>,
    /// ResourceClaims added or replaced by namespace and name.
    pub upsert_claims: Vec<ResourceClaim>,
    /// ResourceClaims removed, as `namespace/name`.
    pub remove_claims: Vec<String>,
    /// ResourceSlices added or replaced by name.
    pub upsert_slices: Vec<ResourceSlice>,
    /// Names of ResourceSlices removed.
    pub remove_slices: Vec<String>,
}

impl DeviceDelta {
    /// Whether the delta changes nothing.
    pub fn is_empty(&self) -> bool {
        self.upsert_classes.is_empty()
            && self.remove_classes.is_empty()
            && self.upsert_claims.is_empty()
            && self.remove_claims.is_empty()
            && self.upsert_slices.is_empty()
            && self.remove_slices.is_empty()
    }
}

impl DeviceObjects {
    /// Whether the snapshot holds no DRA object.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty() && self.claims.is_empty() && self.slices.is_empty()
    }

    /// Applies a delta; `full` when it carries a full snapshot's objects as upserts (errors then
    /// name the snapshot's lists rather than the delta's).
    pub fn apply(&mut self, d: DeviceDelta, full: bool) -> Result<(), DuplicateStorageObject> {
        use super::volumes::{remove, upsert};
        let b = &mut self.approx_bytes;
        remove(&mut self.classes, b, &d.remove_classes, DeviceClass::approx_bytes);
        remove(&mut self.claims, b, &d.remove_claims, ResourceClaim::approx_bytes);
        remove(&mut self.slices, b, &d.remove_slices, ResourceSlice::approx_bytes);
        let name = |full_name: &'static str, delta_name: &'static str| if full { full_name } else { delta_name };
        upsert(
            &mut self.classes,
            b,
            d.upsert_classes,
            |c| c.name.clone(),
            DeviceClass::approx_bytes,
            name("device_classes", "upsert_device_classes"),
            "DeviceClass",
        )?;
        upsert(
            &mut self.claims,
            b,
            d.upsert_claims,
            ResourceClaim::key,
            ResourceClaim::approx_bytes,
            name("resource_claims", "upsert_resource_claims"),
            "ResourceClaim",
        )?;
        upsert(
            &mut self.slices,
            b,
            d.upsert_slices,
            |s| s.name.clone(),
            ResourceSlice::approx_bytes,
            name("resource_slices", "upsert_resource_slices"),
            "ResourceSlice",
        )?;
        Ok(())
    }

    /// The objects of a full snapshot.
    pub fn from_parts(parts: DeviceParts) -> Result<Self, DuplicateStorageObject> {
        let mut out = Self::default();
        out.apply(
            DeviceDelta {
                upsert_classes: parts.classes,
                upsert_claims: parts.claims,
                upsert_slices: parts.slices,
                ..Default::default()
            },
            true,
        )?;
        Ok(out)
    }

    /// What kube-scheduler's Reserve puts in its claim assume cache for a batch's allocations
    /// (claim key → allocation, and the pod it is for): each claim with its allocation and the
    /// pod in `reservedFor`. Allocations naming a claim that is not here, or one allocated
    /// already, are skipped.
    pub fn assumed<'c>(
        &self,
        allocations: impl IntoIterator<Item = (&'c str, &'c Allocation, Consumer)>,
    ) -> DeviceDelta {
        let mut delta = DeviceDelta::default();
        for (key, allocation, pod) in allocations {
            let Some(claim) = self.claims.get(key) else { continue };
            if claim.allocation.is_some() {
                continue;
            }
            let mut c = ResourceClaim::clone(claim);
            c.allocation = Some(allocation.clone());
            c.reserved_for.push(pod);
            delta.upsert_claims.retain(|o| o.key() != c.key());
            delta.upsert_claims.push(c);
        }
        delta
    }

    /// The claim `namespace/name`.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&Arc<ResourceClaim>> {
        self.claims.get(&format!("{namespace}/{name}"))
    }

    /// The devices in use: every device of an allocated claim's results, except those allocated
    /// with admin access (kube's `AllocatedState.AllocatedDevices`, gathered by the plugin's
    /// `allocatedDevices` from the claims with an allocation).
    pub fn allocated_devices(&self) -> std::collections::HashSet<DeviceId> {
        self.claims
            .values()
            .filter_map(|c| c.allocation.as_ref())
            .flat_map(|a| a.devices.iter())
            .filter(|d| d.admin_access != Some(true))
            .map(|d| d.device.clone())
            .collect()
    }
}

/// What DynamicResources' PreFilter reads for every pod of a snapshot, gathered once: every
/// ResourceSlice, and the devices in use ([`DeviceObjects::allocated_devices`]).
#[derive(Debug, Default)]
pub struct DeviceIndex {
    /// Every ResourceSlice, in name order.
    pub slices: Arc<[Arc<ResourceSlice>]>,
    /// The devices allocated to claims (admin-access results excluded).
    pub in_use: Arc<std::collections::HashSet<DeviceId>>,
}

impl DeviceIndex {
    /// The index of a snapshot's objects.
    pub fn of(objects: &DeviceObjects) -> Self {
        Self {
            slices: objects.slices.values().cloned().collect(),
            in_use: Arc::new(objects.allocated_devices()),
        }
    }
}
