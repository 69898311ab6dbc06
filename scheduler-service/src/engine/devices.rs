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
