//! Dynamic Resource Allocation objects (`resource.k8s.io/v1`): DeviceClasses, ResourceClaims,
//! ResourceSlices and DeviceTaintRules, a full snapshot's lists of them, and a pod's
//! `spec.resourceClaims`. Validated as the API server validates what the engine reads: names and
//! lengths, the API's list limits (`k8s.io/api/resource/v1/types.go`), exactly one of `exactly`
//! and `firstAvailable`, allocation modes and counts, attribute values with exactly one field
//! set, quantities, and DeviceTaintRules' selectors and taints.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::fields::{
    at_most, field_error, label_key, label_value, list, shown, FieldError, MAX_NAMESPACE_BYTES, MAX_NAME_BYTES,
};
use super::node::effect;
use super::pod::toleration;
use super::selectors::term;
use crate::engine::devices::{
    AllocatedDevice, Allocation, AllocationMode, Amount, AttributeValue, CapacityPolicy, CapacityRange, ConstraintKind,
    Consumer, CounterConsumption, CounterSet, Device, DeviceClass, DeviceConstraint, DeviceId, DeviceParts,
    DeviceRequest, DeviceStatus, DeviceTaint, DeviceTaintRule, DeviceTaintSelector, NodeSelection, PodClaimRef,
    RequestKind, RequestSpec, ResourceClaim, ResourceSlice,
};
use crate::engine::model::{SelectorTerm, Toleration};
use crate::engine::quantity::Quantity;
use crate::engine::resources::is_dns1123_subdomain;
use crate::proto;

/// `DeviceSelectorsMaxSize`.
pub const MAX_SELECTORS: usize = 32;
/// `DeviceRequestsMaxSize` (= `AllocationResultsMaxSize`).
pub const MAX_REQUESTS: usize = 32;
/// `DeviceConstraintsMaxSize`.
pub const MAX_CONSTRAINTS: usize = 32;
/// `FirstAvailableDeviceRequestMaxSize`.
pub const MAX_FIRST_AVAILABLE: usize = 8;
/// `DeviceTolerationsMaxLength`.
pub const MAX_TOLERATIONS: usize = 16;
/// `ResourceSliceMaxDevices`.
pub const MAX_DEVICES: usize = 128;
/// `ResourceSliceMaxAttributesAndCapacitiesPerDevice`.
pub const MAX_ATTRIBUTES_AND_CAPACITIES: usize = 32;
/// `ResourceSliceMaxCounterSets`.
pub const MAX_COUNTER_SETS: usize = 8;
/// `ResourceSliceMaxCountersPerCounterSet`.
pub const MAX_COUNTERS: usize = 32;
/// `ResourceSliceMaxDeviceCounterConsumptionsPerDevice`.
pub const MAX_COUNTER_CONSUMPTIONS: usize = 2;
/// `DeviceTaintsMaxLength`.
pub const MAX_TAINTS: usize = 16;
/// `ResourceClaimReservedForMaxSize`.
pub const MAX_RESERVED_FOR: usize = 256;
/// `DriverNameMaxLength`.
pub const MAX_DRIVER_BYTES: usize = 63;
/// `DeviceAttributeMaxValueLength`.
pub const MAX_ATTRIBUTE_VALUE_BYTES: usize = 64;
/// The length the API server allows a CEL selector (`resource.k8s.io/v1` `CELSelectorExpressionMaxLength`).
pub const MAX_EXPRESSION_BYTES: usize = 10 * 1024;
/// A pod's `spec.resourceClaims` (`MaxPodResourceClaims` in kube's validation).
pub const MAX_POD_CLAIMS: usize = 32;

fn non_empty(path: String, value: &str, max: usize) -> Result<(), FieldError> {
    if value.is_empty() {
        return Err(field_error(path, "must not be empty"));
    }
    at_most(path, value, max)
}

fn at_most_items<T>(path: &str, items: &[T], max: usize) -> Result<(), FieldError> {
    if items.len() > max {
        return Err(field_error(
            path,
            format!("must have at most {max} items (Kubernetes' limit), got {}", items.len()),
        ));
    }
    Ok(())
}

fn quantity(path: String, value: &str) -> Result<Quantity, FieldError> {
    Quantity::parse(value).map_err(|e| field_error(path, format!("invalid quantity {}: {e}", shown(value))))
}

fn amount(path: String, value: &str) -> Result<Amount, FieldError> {
    Amount::parse(value).map_err(|e| field_error(path, format!("invalid quantity {}: {e}", shown(value))))
}

fn amounts(path: &str, values: &BTreeMap<String, String>) -> Result<BTreeMap<String, Amount>, FieldError> {
    values
        .iter()
        .map(|(k, v)| Ok((k.clone(), amount(format!("{path}[{}]", shown(k)), v)?)))
        .collect()
}

fn quantities(path: &str, values: &BTreeMap<String, String>) -> Result<BTreeMap<String, Quantity>, FieldError> {
    values
        .iter()
        .map(|(k, v)| Ok((k.clone(), quantity(format!("{path}[{}]", shown(k)), v)?)))
        .collect()
}

fn selectors(path: &str, exprs: &[String]) -> Result<Vec<Arc<str>>, FieldError> {
    at_most_items(path, exprs, MAX_SELECTORS)?;
    exprs
        .iter()
        .enumerate()
        .map(|(i, e)| {
            non_empty(format!("{path}[{i}]"), e, MAX_EXPRESSION_BYTES)?;
            Ok(Arc::from(e.as_str()))
        })
        .collect()
}

fn node_selector(path: &str, s: &proto::NodeSelector) -> Result<Vec<SelectorTerm>, FieldError> {
    if s.terms.is_empty() {
        return Err(field_error(format!("{path}.terms"), "must have at least one term"));
    }
    list(&format!("{path}.terms"), &s.terms, term)
}

fn tolerations(path: &str, ts: &[proto::Toleration]) -> Result<Vec<Toleration>, FieldError> {
    at_most_items(path, ts, MAX_TOLERATIONS)?;
    list(path, ts, toleration)
}

/// Validates and converts a DeviceClass.
pub fn device_class(path: &str, c: &proto::DeviceClass) -> Result<DeviceClass, FieldError> {
    non_empty(format!("{path}.name"), &c.name, MAX_NAME_BYTES)?;
    at_most(
        format!("{path}.extended_resource_name"),
        &c.extended_resource_name,
        MAX_NAME_BYTES,
    )?;
    Ok(DeviceClass {
        name: c.name.clone(),
        selectors: selectors(&format!("{path}.selectors"), &c.selectors)?,
        extended_resource_name: (!c.extended_resource_name.is_empty()).then(|| c.extended_resource_name.clone()),
        created: c.creation_timestamp_seconds,
    })
}

fn mode(path: &str, allocation_mode: &str, count: i64) -> Result<AllocationMode, FieldError> {
    match allocation_mode {
        "" | "ExactCount" => {
            if count < 0 {
                return Err(field_error(
                    format!("{path}.count"),
                    format!("must be greater than zero, got {count}"),
                ));
            }
            Ok(AllocationMode::ExactCount(count.max(1)))
        }
        "All" => {
            if count != 0 {
                return Err(field_error(
                    format!("{path}.count"),
                    "must not be set when allocation_mode is All",
                ));
            }
            Ok(AllocationMode::All)
        }
        other => Err(field_error(
            format!("{path}.allocation_mode"),
            format!(
                "unsupported allocation mode {}: must be ExactCount or All",
                shown(other)
            ),
        )),
    }
}

fn request_spec(path: &str, e: &proto::ExactDeviceRequest) -> Result<RequestSpec, FieldError> {
    non_empty(
        format!("{path}.device_class_name"),
        &e.device_class_name,
        MAX_NAME_BYTES,
    )?;
    let capacity_requests = amounts(&format!("{path}.capacity_requests"), &e.capacity_requests)?;
    Ok(RequestSpec {
        class: e.device_class_name.clone(),
        selectors: selectors(&format!("{path}.selectors"), &e.selectors)?,
        mode: mode(path, &e.allocation_mode, e.count)?,
        admin_access: e.admin_access,
        tolerations: tolerations(&format!("{path}.tolerations"), &e.tolerations)?,
        capacity_requests,
    })
}

fn request(path: &str, r: &proto::DeviceRequest) -> Result<DeviceRequest, FieldError> {
    non_empty(format!("{path}.name"), &r.name, MAX_NAME_BYTES)?;
    let kind = match (&r.exactly, r.first_available.is_empty()) {
        (Some(e), true) => RequestKind::Exactly(request_spec(&format!("{path}.exactly"), e)?),
        (None, false) => {
            let fp = format!("{path}.first_available");
            at_most_items(&fp, &r.first_available, MAX_FIRST_AVAILABLE)?;
            let seen = std::cell::RefCell::new(std::collections::HashSet::new());
            let subs = list(&fp, &r.first_available, |p, s| {
                non_empty(format!("{p}.name"), &s.name, MAX_NAME_BYTES)?;
                if !seen.borrow_mut().insert(s.name.clone()) {
                    return Err(field_error(
                        format!("{p}.name"),
                        format!("duplicate subrequest {}", shown(&s.name)),
                    ));
                }
                // A subrequest is an exact request without admin access.
                let exact = proto::ExactDeviceRequest {
                    device_class_name: s.device_class_name.clone(),
                    selectors: s.selectors.clone(),
                    allocation_mode: s.allocation_mode.clone(),
                    count: s.count,
                    admin_access: false,
                    tolerations: s.tolerations.clone(),
                    capacity_requests: s.capacity_requests.clone(),
                };
                Ok((s.name.clone(), request_spec(p, &exact)?))
            })?;
            RequestKind::FirstAvailable(subs)
        }
        _ => {
            return Err(field_error(
                path,
                "exactly one of exactly and first_available must be set",
            ))
        }
    };
    Ok(DeviceRequest {
        name: r.name.clone(),
        kind,
    })
}

fn constraint(path: &str, c: &proto::DeviceConstraint) -> Result<DeviceConstraint, FieldError> {
    let kind = match (c.match_attribute.is_empty(), c.distinct_attribute.is_empty()) {
        (false, true) => {
            ConstraintKind::MatchAttribute(qualified_name(&format!("{path}.match_attribute"), &c.match_attribute)?)
        }
        (true, false) => ConstraintKind::DistinctAttribute(qualified_name(
            &format!("{path}.distinct_attribute"),
            &c.distinct_attribute,
        )?),
        _ => {
            return Err(field_error(
                path,
                "exactly one of match_attribute and distinct_attribute must be set",
            ))
        }
    };
    Ok(DeviceConstraint {
        requests: c.requests.clone(),
        kind,
    })
}

/// A fully qualified attribute name (`domain/id`), as a constraint names it.
fn qualified_name(path: &str, name: &str) -> Result<String, FieldError> {
    match name.split_once('/') {
        Some((domain, id)) if !domain.is_empty() && !id.is_empty() => {
            at_most(path, domain, 63)?;
            at_most(path, id, 32)?;
            Ok(name.to_string())
        }
        _ => Err(field_error(
            path,
            format!("must be a fully qualified name (domain/id), got {}", shown(name)),
        )),
    }
}

/// An attribute or capacity name of a device, qualified with the driver's domain when it has none.
fn device_name_key(path: &str, driver: &str, name: &str) -> Result<String, FieldError> {
    if name.is_empty() {
        return Err(field_error(path, "names must not be empty"));
    }
    Ok(if name.contains('/') {
        qualified_name(path, name)?
    } else {
        at_most(path, name, 32)?;
        format!("{driver}/{name}")
    })
}

fn allocation(path: &str, a: &proto::AllocationResult) -> Result<Allocation, FieldError> {
    at_most_items(&format!("{path}.devices"), &a.devices, MAX_REQUESTS)?;
    Ok(Allocation {
        devices: list(&format!("{path}.devices"), &a.devices, |p, d| {
            non_empty(format!("{p}.request"), &d.request, MAX_NAME_BYTES)?;
            non_empty(format!("{p}.driver"), &d.driver, MAX_DRIVER_BYTES)?;
            non_empty(format!("{p}.pool"), &d.pool, MAX_NAME_BYTES)?;
            non_empty(format!("{p}.device"), &d.device, MAX_NAME_BYTES)?;
            Ok(AllocatedDevice {
                request: d.request.clone(),
                device: DeviceId {
                    driver: Arc::from(d.driver.as_str()),
                    pool: Arc::from(d.pool.as_str()),
                    device: Arc::from(d.device.as_str()),
                },
                admin_access: d.admin_access,
                tolerations: tolerations(&format!("{p}.tolerations"), &d.tolerations)?,
                consumed_capacity: amounts(&format!("{p}.consumed_capacity"), &d.consumed_capacity)?,
                share_id: d.share_id.clone(),
                binding_conditions: condition_types(&format!("{p}.binding_conditions"), &d.binding_conditions)?,
                binding_failure_conditions: condition_types(
                    &format!("{p}.binding_failure_conditions"),
                    &d.binding_failure_conditions,
                )?,
            })
        })?,
        node_selector: a
            .node_selector
            .as_ref()
            .map(|s| node_selector(&format!("{path}.node_selector"), s))
            .transpose()?,
        timestamp: a.allocation_timestamp_seconds,
    })
}

/// kube's limit on a device's binding conditions (`BindingConditionsMaxSize`), and on a
/// condition type's length.
const MAX_BINDING_CONDITIONS: usize = 4;

/// Binding or binding-failure condition types: at most 4, each a non-empty name.
fn condition_types(path: &str, types: &[String]) -> Result<Vec<String>, FieldError> {
    at_most_items(path, types, MAX_BINDING_CONDITIONS)?;
    for (i, t) in types.iter().enumerate() {
        non_empty(format!("{path}[{i}]"), t, 316)?;
    }
    Ok(types.to_vec())
}

/// A claim's `status.devices` entries.
fn device_statuses(path: &str, statuses: &[proto::AllocatedDeviceStatus]) -> Result<Vec<DeviceStatus>, FieldError> {
    at_most_items(path, statuses, MAX_REQUESTS * 32)?;
    list(path, statuses, |p, d| {
        non_empty(format!("{p}.driver"), &d.driver, MAX_DRIVER_BYTES)?;
        non_empty(format!("{p}.pool"), &d.pool, MAX_NAME_BYTES)?;
        non_empty(format!("{p}.device"), &d.device, MAX_NAME_BYTES)?;
        at_most_items(&format!("{p}.true_conditions"), &d.true_conditions, 32)?;
        Ok(DeviceStatus {
            device: DeviceId {
                driver: Arc::from(d.driver.as_str()),
                pool: Arc::from(d.pool.as_str()),
                device: Arc::from(d.device.as_str()),
            },
            share_id: d.share_id.clone(),
            true_conditions: d.true_conditions.clone(),
        })
    })
}

/// Validates and converts a ResourceClaim.
pub fn resource_claim(path: &str, c: &proto::ResourceClaim) -> Result<ResourceClaim, FieldError> {
    non_empty(format!("{path}.namespace"), &c.namespace, MAX_NAMESPACE_BYTES)?;
    non_empty(format!("{path}.name"), &c.name, MAX_NAME_BYTES)?;
    at_most(format!("{path}.uid"), &c.uid, MAX_NAME_BYTES)?;
    if let Some(uid) = &c.controller_uid {
        at_most(format!("{path}.controller_uid"), uid, MAX_NAME_BYTES)?;
    }
    at_most_items(&format!("{path}.requests"), &c.requests, MAX_REQUESTS)?;
    at_most_items(&format!("{path}.constraints"), &c.constraints, MAX_CONSTRAINTS)?;
    at_most_items(&format!("{path}.reserved_for"), &c.reserved_for, MAX_RESERVED_FOR)?;
    let requests = list(&format!("{path}.requests"), &c.requests, request)?;
    let mut seen = std::collections::HashSet::new();
    for (i, r) in requests.iter().enumerate() {
        if !seen.insert(r.name.as_str()) {
            return Err(field_error(
                format!("{path}.requests[{i}].name"),
                format!("duplicate request {}", shown(&r.name)),
            ));
        }
    }
    Ok(ResourceClaim {
        namespace: c.namespace.clone(),
        name: c.name.clone(),
        uid: c.uid.clone(),
        requests,
        constraints: list(&format!("{path}.constraints"), &c.constraints, constraint)?,
        allocation: c
            .allocation
            .as_ref()
            .map(|a| allocation(&format!("{path}.allocation"), a))
            .transpose()?,
        reserved_for: c
            .reserved_for
            .iter()
            .map(|r| Consumer {
                api_group: r.api_group.clone(),
                resource: r.resource.clone(),
                name: r.name.clone(),
                uid: r.uid.clone(),
            })
            .collect(),
        deleting: c.deleting,
        controller_uid: c.controller_uid.clone(),
        device_statuses: device_statuses(&format!("{path}.devices"), &c.devices)?,
    })
}

fn selection(
    path: &str,
    node_name: &str,
    sel: Option<&proto::NodeSelector>,
    all: bool,
) -> Result<Option<NodeSelection>, FieldError> {
    let set = usize::from(!node_name.is_empty()) + usize::from(sel.is_some()) + usize::from(all);
    if set > 1 {
        return Err(field_error(
            path,
            "at most one of node_name, node_selector and all_nodes may be set",
        ));
    }
    Ok(if !node_name.is_empty() {
        at_most(format!("{path}.node_name"), node_name, MAX_NAME_BYTES)?;
        Some(NodeSelection::NodeName(node_name.to_string()))
    } else if let Some(s) = sel {
        Some(NodeSelection::NodeSelector(node_selector(
            &format!("{path}.node_selector"),
            s,
        )?))
    } else if all {
        Some(NodeSelection::AllNodes)
    } else {
        None
    })
}

fn counters(path: &str, values: &BTreeMap<String, String>) -> Result<BTreeMap<String, Quantity>, FieldError> {
    if values.len() > MAX_COUNTERS {
        return Err(field_error(
            path,
            format!(
                "must have at most {MAX_COUNTERS} counters (Kubernetes' limit), got {}",
                values.len()
            ),
        ));
    }
    quantities(path, values)
}

/// Most `validValues` of a request policy (Kubernetes' `CapacityRequestPolicyDiscreteMaxOptions`).
const MAX_VALID_VALUES: usize = 10;

/// A capacity (`name` as written, `value`) with its request policy, if any.
fn capacity_policy(
    path: &str,
    name: &str,
    value: &str,
    policy: Option<&proto::CapacityRequestPolicy>,
) -> Result<CapacityPolicy, FieldError> {
    let mut out = CapacityPolicy {
        name: name.to_string(),
        value: amount(path.to_string(), value)?,
        ..CapacityPolicy::default()
    };
    let Some(p) = policy else { return Ok(out) };
    out.has_policy = true;
    out.default = p
        .default
        .as_deref()
        .map(|d| amount(format!("{path}.default"), d))
        .transpose()?;
    at_most_items(&format!("{path}.valid_values"), &p.valid_values, MAX_VALID_VALUES)?;
    out.valid_values = p
        .valid_values
        .iter()
        .enumerate()
        .map(|(i, v)| amount(format!("{path}.valid_values[{i}]"), v))
        .collect::<Result<_, _>>()?;
    if let Some(r) = &p.valid_range {
        let rp = format!("{path}.valid_range");
        if !out.valid_values.is_empty() {
            return Err(field_error(
                path,
                "at most one of valid_values and valid_range may be set",
            ));
        }
        let step = r.step.as_deref().map(|s| amount(format!("{rp}.step"), s)).transpose()?;
        if step.as_ref().is_some_and(|s| s.value <= Quantity::ZERO) {
            return Err(field_error(format!("{rp}.step"), "must be positive"));
        }
        out.valid_range = Some(CapacityRange {
            min: Some(amount(format!("{rp}.min"), &r.min)?),
            max: r.max.as_deref().map(|s| amount(format!("{rp}.max"), s)).transpose()?,
            step,
        });
    }
    Ok(out)
}

fn device(path: &str, driver: &str, per_device: bool, d: &proto::Device) -> Result<Device, FieldError> {
    non_empty(format!("{path}.name"), &d.name, 63)?;
    if d.attributes.len() + d.capacity.len() > MAX_ATTRIBUTES_AND_CAPACITIES {
        return Err(field_error(
            path,
            format!("must have at most {MAX_ATTRIBUTES_AND_CAPACITIES} attributes and capacities together (Kubernetes' limit)"),
        ));
    }
    let mut attributes = BTreeMap::new();
    for (k, a) in &d.attributes {
        let p = format!("{path}.attributes[{}]", shown(k));
        let value = match a.value.as_ref() {
            Some(proto::device_attribute::Value::Int(v)) => AttributeValue::Int(*v),
            Some(proto::device_attribute::Value::Bool(v)) => AttributeValue::Bool(*v),
            Some(proto::device_attribute::Value::String(v)) => {
                at_most(&p, v, MAX_ATTRIBUTE_VALUE_BYTES)?;
                AttributeValue::String(v.clone())
            }
            Some(proto::device_attribute::Value::Version(v)) => {
                at_most(&p, v, MAX_ATTRIBUTE_VALUE_BYTES)?;
                AttributeValue::Version(v.clone())
            }
            None => return Err(field_error(p, "exactly one value must be set")),
        };
        if attributes.insert(device_name_key(&p, driver, k)?, value).is_some() {
            return Err(field_error(p, "names the same attribute as another entry"));
        }
    }
    let mut capacity = BTreeMap::new();
    let mut capacity_policies = BTreeMap::new();
    // Each capacity's value as written and policy, kept when the device is shared or has a
    // policy (consumable capacity reads them).
    let keep = d.allow_multiple_allocations || !d.capacity_request_policies.is_empty();
    for k in d.capacity_request_policies.keys() {
        if !d.capacity.contains_key(k) {
            return Err(field_error(
                format!("{path}.capacity_request_policies[{}]", shown(k)),
                "names no capacity of the device",
            ));
        }
    }
    for (k, v) in &d.capacity {
        let p = format!("{path}.capacity[{}]", shown(k));
        let q = quantity(p.clone(), v)?;
        let key = device_name_key(&p, driver, k)?;
        if keep {
            let pp = format!("{path}.capacity_request_policies[{}]", shown(k));
            capacity_policies.insert(
                key.clone(),
                capacity_policy(&pp, k, v, d.capacity_request_policies.get(k))?,
            );
        }
        if capacity.insert(key, q).is_some() {
            return Err(field_error(p, "names the same capacity as another entry"));
        }
    }
    at_most_items(
        &format!("{path}.consumes_counters"),
        &d.consumes_counters,
        MAX_COUNTER_CONSUMPTIONS,
    )?;
    at_most_items(&format!("{path}.taints"), &d.taints, MAX_TAINTS)?;
    let own = selection(path, &d.node_name, d.node_selector.as_ref(), d.all_nodes)?;
    let node_selection = match (per_device, own) {
        (true, Some(s)) => s,
        (true, None) => {
            return Err(field_error(
                path,
                "exactly one of node_name, node_selector and all_nodes must be set with the slice's per_device_node_selection",
            ))
        }
        (false, None) => NodeSelection::FromSlice,
        (false, Some(_)) => {
            return Err(field_error(
                path,
                "node_name, node_selector and all_nodes may be set only with the slice's per_device_node_selection",
            ))
        }
    };
    let mut taints = Vec::with_capacity(d.taints.len());
    for (i, t) in d.taints.iter().enumerate() {
        let p = format!("{path}.taints[{i}]");
        non_empty(format!("{p}.key"), &t.key, 317)?;
        // `None` taints are informational: they do not keep a device from being allocated.
        if t.effect == "None" {
            continue;
        }
        let e = effect(&format!("{p}.effect"), &t.effect)?;
        taints.push(DeviceTaint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: e,
        });
    }
    Ok(Device {
        name: Arc::from(d.name.as_str()),
        attributes,
        capacity,
        consumes_counters: list(&format!("{path}.consumes_counters"), &d.consumes_counters, |p, c| {
            non_empty(format!("{p}.counter_set"), &c.counter_set, 63)?;
            Ok(CounterConsumption {
                counter_set: c.counter_set.clone(),
                counters: counters(&format!("{p}.counters"), &c.counters)?,
            })
        })?,
        node_selection,
        taints,
        allow_multiple_allocations: d.allow_multiple_allocations,
        capacity_policies,
        has_binding_conditions: !d.binding_conditions.is_empty(),
        binding_conditions: condition_types(&format!("{path}.binding_conditions"), &d.binding_conditions)?,
        binding_failure_conditions: condition_types(
            &format!("{path}.binding_failure_conditions"),
            &d.binding_failure_conditions,
        )?,
        binds_to_node: d.binds_to_node,
    })
}

/// Validates and converts a ResourceSlice.
pub fn resource_slice(path: &str, s: &proto::ResourceSlice) -> Result<ResourceSlice, FieldError> {
    non_empty(format!("{path}.name"), &s.name, MAX_NAME_BYTES)?;
    non_empty(format!("{path}.driver"), &s.driver, MAX_DRIVER_BYTES)?;
    non_empty(format!("{path}.pool_name"), &s.pool_name, MAX_NAME_BYTES)?;
    if s.pool_generation < 0 {
        return Err(field_error(format!("{path}.pool_generation"), "must not be negative"));
    }
    if s.pool_resource_slice_count < 1 {
        return Err(field_error(
            format!("{path}.pool_resource_slice_count"),
            "must be greater than zero",
        ));
    }
    at_most_items(&format!("{path}.devices"), &s.devices, MAX_DEVICES)?;
    at_most_items(&format!("{path}.shared_counters"), &s.shared_counters, MAX_COUNTER_SETS)?;
    let own = selection(path, &s.node_name, s.node_selector.as_ref(), s.all_nodes)?;
    let node_selection = match (own, s.per_device_node_selection) {
        (Some(sel), false) => sel,
        (None, true) => NodeSelection::FromSlice,
        (None, false) if s.devices.is_empty() => NodeSelection::AllNodes,
        _ => {
            return Err(field_error(
                path,
                "exactly one of node_name, node_selector, all_nodes and per_device_node_selection must be set",
            ))
        }
    };
    let names = std::cell::RefCell::new(std::collections::HashSet::new());
    let devices = list(&format!("{path}.devices"), &s.devices, |p, d| {
        if !names.borrow_mut().insert(d.name.clone()) {
            return Err(field_error(
                format!("{p}.name"),
                format!("duplicate device {}", shown(&d.name)),
            ));
        }
        device(p, &s.driver, s.per_device_node_selection, d)
    })?;
    Ok(ResourceSlice {
        name: s.name.clone(),
        driver: Arc::from(s.driver.as_str()),
        pool: Arc::from(s.pool_name.as_str()),
        pool_generation: s.pool_generation,
        pool_slice_count: s.pool_resource_slice_count,
        node_selection,
        devices,
        shared_counters: list(&format!("{path}.shared_counters"), &s.shared_counters, |p, c| {
            non_empty(format!("{p}.name"), &c.name, 63)?;
            Ok(CounterSet {
                name: c.name.clone(),
                counters: counters(&format!("{p}.counters"), &c.counters)?,
            })
        })?,
    })
}

/// `PoolNameMaxLength`.
pub const MAX_POOL_NAME_BYTES: usize = 253;

/// A driver's name as the API server validates it (`ValidateCSIDriverName`): at most 63 bytes, a
/// DNS subdomain once lowercased.
fn driver_name(path: String, name: &str) -> Result<(), FieldError> {
    non_empty(path.clone(), name, MAX_DRIVER_BYTES)?;
    if !is_dns1123_subdomain(&name.to_ascii_lowercase()) {
        return Err(field_error(
            path,
            format!("invalid driver name {}: must be a DNS subdomain", shown(name)),
        ));
    }
    Ok(())
}

/// A pool's name as the API server validates it (`validatePoolName`): at most 253 bytes, DNS
/// subdomains separated by '/'.
fn pool_name(path: String, name: &str) -> Result<(), FieldError> {
    non_empty(path.clone(), name, MAX_POOL_NAME_BYTES)?;
    if !name.split('/').all(is_dns1123_subdomain) {
        return Err(field_error(
            path,
            format!(
                "invalid pool name {}: must be DNS subdomains separated by '/'",
                shown(name)
            ),
        ));
    }
    Ok(())
}

/// A device's name as the API server validates it (`ValidateDNS1123Label`): at most 63 bytes of
/// lowercase alphanumerics and '-', alphanumeric at both ends.
fn device_name(path: String, name: &str) -> Result<(), FieldError> {
    non_empty(path.clone(), name, 63)?;
    let b = name.as_bytes();
    let ok = b
        .iter()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-';
    if !ok {
        return Err(field_error(
            path,
            format!(
                "invalid device name {}: must be a DNS label (lowercase alphanumerics and '-', alphanumeric at both ends)",
                shown(name)
            ),
        ));
    }
    Ok(())
}

/// Validates and converts a DeviceTaintRule as the API server validates one
/// (`validateDeviceTaintRuleSpec`): a name; the selector's driver, pool and device names when
/// set; the taint's key a label name, its value a label value, its effect set. The effects are
/// `NoSchedule`, `NoExecute` and `None`; another (a later Kubernetes' new effect) is read as
/// `None`, as the API asks of its consumers and kube's allocator does.
pub fn device_taint_rule(path: &str, r: &proto::DeviceTaintRule) -> Result<DeviceTaintRule, FieldError> {
    non_empty(format!("{path}.name"), &r.name, MAX_NAME_BYTES)?;
    let selector = match &r.device_selector {
        None => None,
        Some(s) => {
            let p = format!("{path}.device_selector");
            if let Some(d) = &s.driver {
                driver_name(format!("{p}.driver"), d)?;
            }
            if let Some(pool) = &s.pool {
                pool_name(format!("{p}.pool"), pool)?;
            }
            if let Some(d) = &s.device {
                device_name(format!("{p}.device"), d)?;
            }
            Some(DeviceTaintSelector {
                driver: s.driver.as_deref().map(Arc::from),
                pool: s.pool.as_deref().map(Arc::from),
                device: s.device.as_deref().map(Arc::from),
            })
        }
    };
    let p = format!("{path}.taint");
    let Some(t) = &r.taint else {
        return Err(field_error(p, "must be set"));
    };
    if t.key.is_empty() {
        return Err(field_error(format!("{p}.key"), "must not be empty"));
    }
    label_key(format!("{p}.key"), &t.key)?;
    label_value(format!("{p}.value"), &t.value)?;
    let effect = match t.effect.as_str() {
        "" => {
            return Err(field_error(
                format!("{p}.effect"),
                "must be set (NoSchedule, NoExecute or None)",
            ))
        }
        "NoSchedule" => Some(crate::engine::devices::DeviceTaintEffect::NoSchedule),
        "NoExecute" => Some(crate::engine::devices::DeviceTaintEffect::NoExecute),
        _ => None,
    };
    Ok(DeviceTaintRule {
        name: r.name.clone(),
        selector,
        key: t.key.clone(),
        value: t.value.clone(),
        effect,
        time_added: t.time_added_seconds,
    })
}

/// A pod's `spec.resourceClaims` with the claim names its status gives.
pub fn pod_claims(path: &str, claims: &[proto::PodResourceClaim]) -> Result<Vec<PodClaimRef>, FieldError> {
    at_most_items(path, claims, MAX_POD_CLAIMS)?;
    let seen = std::cell::RefCell::new(std::collections::HashSet::new());
    list(path, claims, |p, c| {
        non_empty(format!("{p}.name"), &c.name, MAX_NAME_BYTES)?;
        if !seen.borrow_mut().insert(c.name.clone()) {
            return Err(field_error(
                format!("{p}.name"),
                format!("duplicate claim entry {}", shown(&c.name)),
            ));
        }
        match (
            c.resource_claim_name.is_empty(),
            c.resource_claim_template_name.is_empty(),
        ) {
            (false, true) => {
                at_most(
                    format!("{p}.resource_claim_name"),
                    &c.resource_claim_name,
                    MAX_NAME_BYTES,
                )?;
                Ok(PodClaimRef {
                    name: c.name.clone(),
                    claim_name: Some(c.resource_claim_name.clone()),
                    from_template: false,
                })
            }
            (true, false) => {
                at_most(
                    format!("{p}.resource_claim_template_name"),
                    &c.resource_claim_template_name,
                    MAX_NAME_BYTES,
                )?;
                if let Some(g) = &c.generated_claim_name {
                    at_most(format!("{p}.generated_claim_name"), g, MAX_NAME_BYTES)?;
                }
                Ok(PodClaimRef {
                    name: c.name.clone(),
                    claim_name: c.generated_claim_name.clone(),
                    from_template: true,
                })
            }
            _ => Err(field_error(
                p,
                "exactly one of resource_claim_name and resource_claim_template_name must be set",
            )),
        }
    })
}

/// The DRA objects of a full snapshot.
pub fn devices(path: &str, s: &proto::Snapshot) -> Result<DeviceParts, FieldError> {
    Ok(DeviceParts {
        classes: list(&format!("{path}.device_classes"), &s.device_classes, device_class)?,
        claims: list(&format!("{path}.resource_claims"), &s.resource_claims, resource_claim)?,
        slices: list(&format!("{path}.resource_slices"), &s.resource_slices, resource_slice)?,
        taint_rules: list(
            &format!("{path}.device_taint_rules"),
            &s.device_taint_rules,
            device_taint_rule,
        )?,
    })
}

/// The DRA objects of a delta.
pub fn device_delta(path: &str, d: &proto::SnapshotDelta) -> Result<crate::engine::devices::DeviceDelta, FieldError> {
    Ok(crate::engine::devices::DeviceDelta {
        upsert_classes: list(
            &format!("{path}.upsert_device_classes"),
            &d.upsert_device_classes,
            device_class,
        )?,
        remove_classes: d.remove_device_classes.clone(),
        upsert_claims: list(
            &format!("{path}.upsert_resource_claims"),
            &d.upsert_resource_claims,
            resource_claim,
        )?,
        remove_claims: d.remove_resource_claims.clone(),
        upsert_slices: list(
            &format!("{path}.upsert_resource_slices"),
            &d.upsert_resource_slices,
            resource_slice,
        )?,
        remove_slices: d.remove_resource_slices.clone(),
        upsert_taint_rules: list(
            &format!("{path}.upsert_device_taint_rules"),
            &d.upsert_device_taint_rules,
            device_taint_rule,
        )?,
        remove_taint_rules: d.remove_device_taint_rules.clone(),
    })
}

fn requirement_out(r: &crate::engine::model::Requirement) -> proto::NodeSelectorRequirement {
    use crate::engine::model::SelectorOp;
    let (operator, values) = match &r.op {
        SelectorOp::In(v) => ("In", v.clone()),
        SelectorOp::NotIn(v) => ("NotIn", v.clone()),
        SelectorOp::Exists => ("Exists", Vec::new()),
        SelectorOp::DoesNotExist => ("DoesNotExist", Vec::new()),
        SelectorOp::Gt(n) => ("Gt", vec![n.to_string()]),
        SelectorOp::Lt(n) => ("Lt", vec![n.to_string()]),
    };
    proto::NodeSelectorRequirement {
        key: r.key.clone(),
        operator: operator.into(),
        values,
    }
}

fn toleration_out(t: &Toleration) -> proto::Toleration {
    use crate::engine::model::{TaintEffect, TolerationOperator};
    proto::Toleration {
        key: t.key.clone(),
        operator: match t.operator {
            TolerationOperator::Equal => "Equal",
            TolerationOperator::Exists => "Exists",
        }
        .into(),
        value: t.value.clone(),
        effect: match t.effect {
            None => "",
            Some(TaintEffect::NoSchedule) => "NoSchedule",
            Some(TaintEffect::PreferNoSchedule) => "PreferNoSchedule",
            Some(TaintEffect::NoExecute) => "NoExecute",
        }
        .into(),
        toleration_seconds: None,
    }
}

/// An allocation as the API carries it (a placement's `claim_allocations`).
pub fn allocation_result(a: &Allocation) -> proto::AllocationResult {
    proto::AllocationResult {
        devices: a
            .devices
            .iter()
            .map(|d| proto::DeviceRequestAllocationResult {
                request: d.request.clone(),
                driver: d.device.driver.to_string(),
                pool: d.device.pool.to_string(),
                device: d.device.device.to_string(),
                admin_access: d.admin_access,
                tolerations: d.tolerations.iter().map(toleration_out).collect(),
                consumed_capacity: d
                    .consumed_capacity
                    .iter()
                    .map(|(k, a)| (k.clone(), a.text.clone()))
                    .collect(),
                share_id: d.share_id.clone(),
                binding_conditions: d.binding_conditions.clone(),
                binding_failure_conditions: d.binding_failure_conditions.clone(),
            })
            .collect(),
        allocation_timestamp_seconds: a.timestamp,
        node_selector: a.node_selector.as_ref().map(|terms| proto::NodeSelector {
            terms: terms
                .iter()
                .map(|t| proto::NodeSelectorTerm {
                    match_expressions: t.match_expressions.iter().map(requirement_out).collect(),
                    match_fields: t.match_fields.iter().map(requirement_out).collect(),
                })
                .collect(),
        }),
    }
}

/// The special claim for a pod's extended resources backed by DRA, as a placement carries it
/// (`ClaimAllocation.extended_resource_claim`).
pub fn extended_resource_claim(
    c: &crate::engine::plugins::dynamicresources::extended_resources::ExtendedClaim,
) -> proto::ExtendedResourceClaim {
    proto::ExtendedResourceClaim {
        requests: c
            .requests
            .iter()
            .map(|r| proto::DeviceRequest {
                name: r.name.clone(),
                exactly: Some(proto::ExactDeviceRequest {
                    device_class_name: r.class.clone(),
                    allocation_mode: "ExactCount".to_string(),
                    count: r.count,
                    ..Default::default()
                }),
                first_available: Vec::new(),
            })
            .collect(),
        request_mappings: c
            .mappings
            .iter()
            .map(|m| proto::ContainerExtendedResourceRequest {
                container_name: m.container_name.clone(),
                resource_name: m.resource_name.clone(),
                request_name: m.request_name.clone(),
            })
            .collect(),
    }
}

/// Why a request cannot be met on a node, as Rank answers it (`InfeasibleNode.device_failures`).
pub fn device_failure_out(f: crate::engine::plugins::dynamicresources::RequestFailure) -> proto::DeviceRequestFailure {
    use crate::engine::plugins::dynamicresources::FailureKind;
    let kind = match f.kind {
        FailureKind::NoMatchingDevice => proto::DeviceFailureKind::NoMatchingDevice,
        FailureKind::DevicesAllocated => proto::DeviceFailureKind::DevicesAllocated,
        FailureKind::ConstraintUnmet => proto::DeviceFailureKind::ConstraintUnmet,
        FailureKind::DeviceTainted => proto::DeviceFailureKind::DeviceTainted,
    };
    proto::DeviceRequestFailure {
        claim: f.claim,
        request: f.request,
        kind: kind.into(),
        message: f.message,
    }
}

#[cfg(test)]
#[path = "devices_tests.rs"]
mod tests;
