//! The DRA objects themselves (DeviceClasses, ResourceClaims, ResourceSlices,
//! DeviceTaintRules), their validation, and the copy-on-write maps a snapshot keeps them in.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::engine::model::{SelectorTerm, Taint};
use crate::engine::quantity::Quantity;
use crate::engine::volumes::DuplicateStorageObject;

/// A device's identity: driver, pool and device name (kube's `structured.DeviceID`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
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
pub use crate::engine::model::TaintEffect as DeviceTaintEffect;

/// A device taint (`DeviceTaint`); the same shape as a node's taint, with `NoSchedule` and
/// `NoExecute` (and `None`, which does not keep devices from being allocated) as effects.
pub type DeviceTaint = Taint;

/// A device toleration (`DeviceToleration`), with the semantics of a pod's toleration.
pub use crate::engine::model::Toleration as DeviceToleration;

/// How a device takes its nodes, when its slice says `perDeviceNodeSelection`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
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
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CounterConsumption {
    /// `counterSet`: the name of a counter set in `sharedCounters` of a slice of the same pool.
    pub counter_set: String,
    /// `counters`: counter name → amount.
    pub counters: BTreeMap<String, Quantity>,
}

/// A counter set of a slice (`CounterSet`): counter name → amount available.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
    /// `allowMultipleAllocations`: the device is shared by the claims allocated it, each
    /// consuming some of its capacity (consumable capacity).
    pub allow_multiple_allocations: bool,
    /// Each capacity's value as written and its `requestPolicy`, by fully qualified name: filled
    /// for every capacity of a device that allows multiple allocations or has a request policy
    /// (empty otherwise: [`Device::capacity`] says all).
    pub capacity_policies: BTreeMap<String, CapacityPolicy>,
    /// `bindingConditions` is not empty: pools holding such devices are searched last.
    pub has_binding_conditions: bool,
    /// `bindingConditions`.
    pub binding_conditions: Vec<String>,
    /// `bindingFailureConditions`.
    pub binding_failure_conditions: Vec<String>,
    /// `bindsToNode`: an allocation of the device is limited to the node it was made for.
    pub binds_to_node: bool,
}

/// A quantity with the text it was written as (its format, kept as kube keeps a
/// `resource.Quantity`'s, so that a consumed capacity is written as kube writes it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Amount {
    /// The value.
    pub value: Quantity,
    /// The text.
    pub text: String,
}

impl Amount {
    /// Parses `text` as a Kubernetes quantity.
    ///
    /// # Errors
    ///
    /// When `text` is not a quantity.
    pub fn parse(text: &str) -> Result<Self, crate::engine::quantity::QuantityError> {
        Ok(Self {
            value: Quantity::parse(text)?,
            text: text.to_string(),
        })
    }
}

/// One capacity of a device with its `requestPolicy` (`DeviceCapacity`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct CapacityPolicy {
    /// The capacity's name as the slice wrote it (kube matches requests and writes consumed
    /// capacity by it).
    pub name: String,
    /// `value`.
    pub value: Amount,
    /// `requestPolicy.default`.
    pub default: Option<Amount>,
    /// `requestPolicy.validValues`, ascending.
    pub valid_values: Vec<Amount>,
    /// `requestPolicy.validRange`.
    pub valid_range: Option<CapacityRange>,
    /// `requestPolicy` is set.
    pub has_policy: bool,
}

/// `requestPolicy.validRange`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct CapacityRange {
    /// `min`.
    pub min: Option<Amount>,
    /// `max`.
    pub max: Option<Amount>,
    /// `step`.
    pub step: Option<Amount>,
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

/// Which devices a DeviceTaintRule selects (`DeviceTaintSelector`): each field set must match.
/// kube 1.37 has no other criterion (`deviceClassName` and `selectors` were removed in 1.35).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceTaintSelector {
    /// `driver`: the slice's `spec.driver`.
    pub driver: Option<Arc<str>>,
    /// `pool`: the slice's `spec.pool.name`.
    pub pool: Option<Arc<str>>,
    /// `device`: the device's name.
    pub device: Option<Arc<str>>,
}

/// A DeviceTaintRule (`resource.k8s.io/v1`): its taint applies to every device its selector
/// selects, after the taints of the device's slice (`crate::engine::device_taint_rules`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceTaintRule {
    /// metadata.name.
    pub name: String,
    /// spec.deviceSelector; `None` selects no device, an empty one every device.
    pub selector: Option<DeviceTaintSelector>,
    /// spec.taint.key.
    pub key: String,
    /// spec.taint.value.
    pub value: String,
    /// spec.taint.effect: `NoSchedule` or `NoExecute`; `None` for the effect `None` (and an
    /// effect this version does not know, which the API says consumers treat as `None`): such a
    /// taint keeps no device from being allocated.
    pub effect: Option<DeviceTaintEffect>,
    /// spec.taint.timeAdded in seconds since the epoch (0 when unset); no scheduling decision
    /// reads it.
    pub time_added: i64,
}

impl DeviceTaintRule {
    /// The taint it gives the devices it selects, unless its effect is `None`.
    pub fn taint(&self) -> Option<DeviceTaint> {
        self.effect.map(|effect| DeviceTaint {
            key: self.key.clone(),
            value: self.value.clone(),
            effect,
        })
    }

    /// Approximate bytes.
    pub fn approx_bytes(&self) -> usize {
        let selector = self.selector.as_ref().map_or(0, |s| {
            [&s.driver, &s.pool, &s.device]
                .iter()
                .map(|f| f.as_ref().map_or(0, |v| 16 + v.len()))
                .sum()
        });
        std::mem::size_of::<Self>() + self.name.len() + self.key.len() + self.value.len() + selector
    }
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
    /// metadata.creationTimestamp in seconds since the epoch (0 when unknown).
    pub created: i64,
}

/// How many devices a request asks for (`allocationMode` and `count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AllocationMode {
    /// `ExactCount` with `count` (1 by default).
    ExactCount(i64),
    /// `All`: every matching device of the node's pools, at least one.
    All,
}

/// One way of satisfying a request: the request itself (`exactly`) or one entry of its
/// `firstAvailable` list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
    /// `capacity.requests`, by fully qualified capacity name.
    pub capacity_requests: BTreeMap<String, Amount>,
}

/// A request of a claim (`DeviceRequest`): exactly one of `exactly` and `firstAvailable`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceRequest {
    /// `name`.
    pub name: String,
    /// What it asks for.
    pub kind: RequestKind,
}

/// `exactly` or `firstAvailable`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RequestKind {
    /// `exactly`.
    Exactly(RequestSpec),
    /// `firstAvailable`: (subrequest name, spec), in order of preference.
    FirstAvailable(Vec<(String, RequestSpec)>),
}

/// A constraint of a claim (`DeviceConstraint`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceConstraint {
    /// `requests` (empty: every request of the claim). An entry may name a subrequest as
    /// `request/subrequest`.
    pub requests: Vec<String>,
    /// What the devices must agree on.
    pub kind: ConstraintKind,
}

/// `matchAttribute` or `distinctAttribute`, a fully qualified attribute name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ConstraintKind {
    /// `matchAttribute`: every device has the attribute, with one value.
    MatchAttribute(String),
    /// `distinctAttribute`: every device has the attribute, each with its own value.
    DistinctAttribute(String),
}

/// One allocated device of a claim (`DeviceRequestAllocationResult`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AllocatedDevice {
    /// `request`: the request's name, or `request/subrequest` for a prioritized list.
    pub request: String,
    /// The device.
    pub device: DeviceId,
    /// `adminAccess`, when the request asked for it.
    pub admin_access: Option<bool>,
    /// `tolerations`: the request's tolerations, when the device has taints.
    pub tolerations: Vec<DeviceToleration>,
    /// `consumedCapacity`, for a device that allows multiple allocations (each of its
    /// capacities).
    pub consumed_capacity: BTreeMap<String, Amount>,
    /// `shareID`, for a device that allows multiple allocations. In a new allocation it is
    /// empty: the writer generates the ID (a random UUID, as kube's allocator does).
    pub share_id: Option<String>,
    /// `bindingConditions`, copied from the device (`DRADeviceBindingConditions`): the pod is
    /// bound once each is True in the claim's `status.devices` entry for the device.
    pub binding_conditions: Vec<String>,
    /// `bindingFailureConditions`, copied from the device: one True fails the binding.
    pub binding_failure_conditions: Vec<String>,
}

/// A claim's `status.allocation`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Allocation {
    /// `devices.results`.
    pub devices: Vec<AllocatedDevice>,
    /// `nodeSelector` (its terms ORed); `None` when the devices are on every node.
    pub node_selector: Option<Vec<SelectorTerm>>,
    /// `allocationTimestamp`, seconds since the epoch; `None` when not written.
    pub timestamp: Option<i64>,
}

/// One entry of a claim's `status.devices`: the conditions a driver reports for a device.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceStatus {
    /// The device.
    pub device: DeviceId,
    /// `shareID`.
    pub share_id: Option<String>,
    /// The types of its conditions whose status is True.
    pub true_conditions: Vec<String>,
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
    /// The uid of the controller owner reference (`Some("")`: none); `None` when the caller
    /// did not say, and nothing is checked against it.
    pub controller_uid: Option<String>,
    /// status.devices.
    pub device_statuses: Vec<DeviceStatus>,
}

impl ResourceClaim {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

pub use crate::engine::model::PodClaimRef;

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
    /// ResourceSlices by name, as their drivers wrote them (the DeviceTaintRules' taints are
    /// applied where they are read, [`DeviceIndex`]).
    pub slices: imbl::OrdMap<String, Arc<ResourceSlice>>,
    /// DeviceTaintRules by name.
    pub taint_rules: imbl::OrdMap<String, Arc<DeviceTaintRule>>,
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
    /// DeviceTaintRules.
    pub taint_rules: Vec<DeviceTaintRule>,
}

impl DeviceParts {
    /// Whether there is no object.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty() && self.claims.is_empty() && self.slices.is_empty() && self.taint_rules.is_empty()
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
    /// DeviceTaintRules added or replaced by name.
    pub upsert_taint_rules: Vec<DeviceTaintRule>,
    /// Names of DeviceTaintRules removed.
    pub remove_taint_rules: Vec<String>,
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
            && self.upsert_taint_rules.is_empty()
            && self.remove_taint_rules.is_empty()
    }
}

impl DeviceObjects {
    /// Whether the snapshot holds no DRA object.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty() && self.claims.is_empty() && self.slices.is_empty() && self.taint_rules.is_empty()
    }

    /// The DeviceClass backing an extended resource (kube's `DeviceClassResolver.GetDeviceClass`,
    /// `k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache`): the class named
    /// by the implicit name `deviceclass.resource.kubernetes.io/<class>`, or the class whose
    /// `spec.extendedResourceName` is `name`. Of several classes naming one resource the newest
    /// backs it, and of equally old ones the first by name (`updateResourceName2class`).
    pub fn class_for_extended_resource(&self, name: &str) -> Option<&Arc<DeviceClass>> {
        if let Some(class) = name.strip_prefix(crate::engine::resources::DEVICE_CLASS_RESOURCE_PREFIX) {
            return self.classes.get(class);
        }
        // Classes come by name: a later one wins only when it is strictly newer.
        self.classes
            .values()
            .filter(|c| c.extended_resource_name.as_deref() == Some(name))
            .fold(None, |best: Option<&Arc<DeviceClass>>, c| match best {
                Some(b) if b.created >= c.created => Some(b),
                _ => Some(c),
            })
    }

    /// Applies a delta; `full` when it carries a full snapshot's objects as upserts (errors then
    /// name the snapshot's lists rather than the delta's).
    pub fn apply(&mut self, d: DeviceDelta, full: bool) -> Result<(), DuplicateStorageObject> {
        use crate::engine::volumes::{remove, upsert};
        let b = &mut self.approx_bytes;
        remove(&mut self.classes, b, &d.remove_classes, DeviceClass::approx_bytes);
        remove(&mut self.claims, b, &d.remove_claims, ResourceClaim::approx_bytes);
        remove(&mut self.slices, b, &d.remove_slices, ResourceSlice::approx_bytes);
        remove(
            &mut self.taint_rules,
            b,
            &d.remove_taint_rules,
            DeviceTaintRule::approx_bytes,
        );
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
        upsert(
            &mut self.taint_rules,
            b,
            d.upsert_taint_rules,
            |r| r.name.clone(),
            DeviceTaintRule::approx_bytes,
            name("device_taint_rules", "upsert_device_taint_rules"),
            "DeviceTaintRule",
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
                upsert_taint_rules: parts.taint_rules,
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

    /// The devices in use: every device of an allocated claim's results, except those allocated
    /// with admin access and the shares of devices that allow multiple allocations (kube's `AllocatedState.AllocatedDevices`, gathered by the plugin's
    /// `allocatedDevices` from the claims with an allocation).
    pub fn allocated_devices(&self) -> std::collections::HashSet<DeviceId> {
        self.devices_in_use().0
    }

    /// The shared devices in use: every device of an allocated claim's results with a share ID
    /// (admin access excepted), with the capacity its shares consume, summed (kube's
    /// `AllocatedState.AllocatedSharedDeviceIDs` and `AggregatedCapacity`; a device whose shares
    /// consume nothing is here with nothing).
    pub fn shared_devices(&self) -> std::collections::HashMap<DeviceId, Consumed> {
        self.devices_in_use().1
    }

    /// [`DeviceObjects::allocated_devices`] and [`DeviceObjects::shared_devices`] in one pass.
    pub fn devices_in_use(
        &self,
    ) -> (
        std::collections::HashSet<DeviceId>,
        std::collections::HashMap<DeviceId, Consumed>,
    ) {
        let mut dedicated = std::collections::HashSet::new();
        let mut shared: std::collections::HashMap<DeviceId, Consumed> = std::collections::HashMap::new();
        for d in self
            .claims
            .values()
            .filter_map(|c| c.allocation.as_ref())
            .flat_map(|a| a.devices.iter())
            .filter(|d| d.admin_access != Some(true))
        {
            if d.share_id.is_some() {
                add_consumed(shared.entry(d.device.clone()).or_default(), &d.consumed_capacity);
            } else {
                dedicated.insert(d.device.clone());
            }
        }
        (dedicated, shared)
    }
}

/// Capacity consumed on a device, by capacity name (kube's `ConsumedCapacity`).
pub type Consumed = BTreeMap<String, Quantity>;

/// Adds `amounts` to `to` (kube's `ConsumedCapacity.Add`).
pub fn add_consumed(to: &mut Consumed, amounts: &BTreeMap<String, Amount>) {
    for (name, a) in amounts {
        let v = to.entry(name.clone()).or_default();
        *v = Quantity::from_nanos(v.nanos().saturating_add(a.value.nanos()));
    }
}
