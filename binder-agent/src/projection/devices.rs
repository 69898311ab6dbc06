//! Dynamic Resource Allocation objects (`resource.k8s.io/v1`) as the decision API carries them:
//! DeviceClasses, ResourceClaims and ResourceSlices, and a pod's `spec.resourceClaims` with the
//! claim names its `status.resourceClaimStatuses` gives.

use k8s_openapi::api::core::v1::{NodeSelector, Pod};
use k8s_openapi::api::resource::v1 as resource;
use placement_scheduler::proto;

use super::term;

fn selectors(s: Option<&Vec<resource::DeviceSelector>>) -> Vec<String> {
    s.into_iter()
        .flatten()
        .filter_map(|s| s.cel.as_ref().map(|c| c.expression.clone()))
        .collect()
}

fn node_selector(s: &NodeSelector) -> proto::NodeSelector {
    proto::NodeSelector {
        terms: s.node_selector_terms.iter().map(term).collect(),
    }
}

fn toleration(t: &resource::DeviceToleration) -> proto::Toleration {
    proto::Toleration {
        key: t.key.clone().unwrap_or_default(),
        operator: t.operator.clone().unwrap_or_default(),
        value: t.value.clone().unwrap_or_default(),
        effect: t.effect.clone().unwrap_or_default(),
        toleration_seconds: t.toleration_seconds,
    }
}

fn tolerations(ts: Option<&Vec<resource::DeviceToleration>>) -> Vec<proto::Toleration> {
    ts.into_iter().flatten().map(toleration).collect()
}

fn capacity_requests(c: Option<&resource::CapacityRequirements>) -> std::collections::BTreeMap<String, String> {
    c.and_then(|c| c.requests.as_ref())
        .map(|r| r.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
        .unwrap_or_default()
}

/// Projects a DeviceClass.
pub fn device_class_info(c: &resource::DeviceClass) -> proto::DeviceClass {
    let spec = c.spec.as_ref();
    proto::DeviceClass {
        name: c.metadata.name.clone().unwrap_or_default(),
        selectors: selectors(spec.and_then(|s| s.selectors.as_ref())),
        extended_resource_name: spec.and_then(|s| s.extended_resource_name.clone()).unwrap_or_default(),
    }
}

/// Projects an allocation result.
pub fn allocation_info(a: &resource::AllocationResult) -> proto::AllocationResult {
    proto::AllocationResult {
        devices: a
            .devices
            .as_ref()
            .and_then(|d| d.results.as_ref())
            .into_iter()
            .flatten()
            .map(|r| proto::DeviceRequestAllocationResult {
                request: r.request.clone(),
                driver: r.driver.clone(),
                pool: r.pool.clone(),
                device: r.device.clone(),
                admin_access: r.admin_access,
                tolerations: tolerations(r.tolerations.as_ref()),
            })
            .collect(),
        node_selector: a.node_selector.as_ref().map(node_selector),
    }
}

/// Projects a ResourceClaim.
pub fn resource_claim_info(c: &resource::ResourceClaim) -> proto::ResourceClaim {
    let devices = c.spec.as_ref().and_then(|s| s.devices.as_ref());
    let status = c.status.as_ref();
    proto::ResourceClaim {
        namespace: c.metadata.namespace.clone().unwrap_or_default(),
        name: c.metadata.name.clone().unwrap_or_default(),
        uid: c.metadata.uid.clone().unwrap_or_default(),
        requests: devices
            .and_then(|d| d.requests.as_ref())
            .into_iter()
            .flatten()
            .map(|r| proto::DeviceRequest {
                name: r.name.clone(),
                exactly: r.exactly.as_ref().map(|e| proto::ExactDeviceRequest {
                    device_class_name: e.device_class_name.clone(),
                    selectors: selectors(e.selectors.as_ref()),
                    allocation_mode: e.allocation_mode.clone().unwrap_or_default(),
                    count: e.count.unwrap_or_default(),
                    admin_access: e.admin_access.unwrap_or_default(),
                    tolerations: tolerations(e.tolerations.as_ref()),
                    capacity_requests: capacity_requests(e.capacity.as_ref()),
                }),
                first_available: r
                    .first_available
                    .iter()
                    .flatten()
                    .map(|s| proto::DeviceSubRequest {
                        name: s.name.clone(),
                        device_class_name: s.device_class_name.clone(),
                        selectors: selectors(s.selectors.as_ref()),
                        allocation_mode: s.allocation_mode.clone().unwrap_or_default(),
                        count: s.count.unwrap_or_default(),
                        tolerations: tolerations(s.tolerations.as_ref()),
                        capacity_requests: capacity_requests(s.capacity.as_ref()),
                    })
                    .collect(),
            })
            .collect(),
        constraints: devices
            .and_then(|d| d.constraints.as_ref())
            .into_iter()
            .flatten()
            .map(|c| proto::DeviceConstraint {
                requests: c.requests.clone().unwrap_or_default(),
                match_attribute: c.match_attribute.clone().unwrap_or_default(),
                distinct_attribute: c.distinct_attribute.clone().unwrap_or_default(),
            })
            .collect(),
        allocation: status.and_then(|s| s.allocation.as_ref()).map(allocation_info),
        reserved_for: status
            .and_then(|s| s.reserved_for.as_ref())
            .into_iter()
            .flatten()
            .map(|r| proto::ResourceClaimConsumer {
                api_group: r.api_group.clone().unwrap_or_default(),
                resource: r.resource.clone(),
                name: r.name.clone(),
                uid: r.uid.clone(),
            })
            .collect(),
        deleting: c.metadata.deletion_timestamp.is_some(),
    }
}

fn attribute(a: &resource::DeviceAttribute) -> proto::DeviceAttribute {
    use proto::device_attribute::Value;
    let value = if let Some(v) = a.int {
        Some(Value::Int(v))
    } else if let Some(v) = a.bool {
        Some(Value::Bool(v))
    } else if let Some(v) = &a.string {
        Some(Value::String(v.clone()))
    } else {
        a.version.as_ref().map(|v| Value::Version(v.clone()))
    };
    proto::DeviceAttribute { value }
}

fn counters(c: &std::collections::BTreeMap<String, resource::Counter>) -> std::collections::BTreeMap<String, String> {
    c.iter().map(|(k, v)| (k.clone(), v.value.0.clone())).collect()
}

/// Projects a ResourceSlice.
pub fn resource_slice_info(s: &resource::ResourceSlice) -> proto::ResourceSlice {
    let spec = &s.spec;
    proto::ResourceSlice {
        name: s.metadata.name.clone().unwrap_or_default(),
        driver: spec.driver.clone(),
        pool_name: spec.pool.name.clone(),
        pool_generation: spec.pool.generation,
        pool_resource_slice_count: spec.pool.resource_slice_count,
        node_name: spec.node_name.clone().unwrap_or_default(),
        node_selector: spec.node_selector.as_ref().map(node_selector),
        all_nodes: spec.all_nodes.unwrap_or_default(),
        per_device_node_selection: spec.per_device_node_selection.unwrap_or_default(),
        devices: spec
            .devices
            .iter()
            .flatten()
            .map(|d| proto::Device {
                name: d.name.clone(),
                attributes: d
                    .attributes
                    .iter()
                    .flatten()
                    .filter(|(_, a)| a.int.is_some() || a.bool.is_some() || a.string.is_some() || a.version.is_some())
                    .map(|(k, a)| (k.clone(), attribute(a)))
                    .collect(),
                capacity: d
                    .capacity
                    .iter()
                    .flatten()
                    .map(|(k, c)| (k.clone(), c.value.0.clone()))
                    .collect(),
                consumes_counters: d
                    .consumes_counters
                    .iter()
                    .flatten()
                    .map(|c| proto::DeviceCounterConsumption {
                        counter_set: c.counter_set.clone(),
                        counters: counters(&c.counters),
                    })
                    .collect(),
                node_name: d.node_name.clone().unwrap_or_default(),
                node_selector: d.node_selector.as_ref().map(node_selector),
                all_nodes: d.all_nodes.unwrap_or_default(),
                taints: d
                    .taints
                    .iter()
                    .flatten()
                    .map(|t| proto::DeviceTaint {
                        key: t.key.clone(),
                        value: t.value.clone().unwrap_or_default(),
                        effect: t.effect.clone(),
                    })
                    .collect(),
                allow_multiple_allocations: d.allow_multiple_allocations.unwrap_or_default(),
                binding_conditions: d.binding_conditions.clone().unwrap_or_default(),
            })
            .collect(),
        shared_counters: spec
            .shared_counters
            .iter()
            .flatten()
            .map(|c| proto::CounterSet {
                name: c.name.clone(),
                counters: counters(&c.counters),
            })
            .collect(),
    }
}

/// A pod's `spec.resourceClaims`, each with the claim its `status.resourceClaimStatuses` names
/// for a template.
pub fn pod_resource_claims(pod: &Pod) -> Vec<proto::PodResourceClaim> {
    let statuses = pod.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref());
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .into_iter()
        .flatten()
        .map(|c| {
            let template = c.resource_claim_template_name.clone().unwrap_or_default();
            let generated = if template.is_empty() {
                None
            } else {
                statuses
                    .into_iter()
                    .flatten()
                    .find(|s| s.name == c.name)
                    .map(|s| s.resource_claim_name.clone().unwrap_or_default())
            };
            proto::PodResourceClaim {
                name: c.name.clone(),
                resource_claim_name: c.resource_claim_name.clone().unwrap_or_default(),
                resource_claim_template_name: template,
                generated_claim_name: generated,
            }
        })
        .collect()
}
