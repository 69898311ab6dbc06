//! Dynamic Resource Allocation objects (`resource.k8s.io/v1`) as the decision API carries them:
//! DeviceClasses, ResourceClaims, ResourceSlices and DeviceTaintRules, and a pod's `spec.resourceClaims` with the
//! claim names its `status.resourceClaimStatuses` gives.

use k8s_openapi::api::core::v1::{NodeSelector, Pod};
use k8s_openapi::api::resource::v1 as resource;
use placement_scheduler::proto;

use super::selectors::term;

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
        creation_timestamp_seconds: c.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second()),
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
                consumed_capacity: r
                    .consumed_capacity
                    .iter()
                    .flatten()
                    .map(|(k, q)| (k.clone(), q.0.clone()))
                    .collect(),
                share_id: r.share_id.clone(),
                binding_conditions: r.binding_conditions.clone().unwrap_or_default(),
                binding_failure_conditions: r.binding_failure_conditions.clone().unwrap_or_default(),
            })
            .collect(),
        node_selector: a.node_selector.as_ref().map(node_selector),
        allocation_timestamp_seconds: a.allocation_timestamp.as_ref().map(|t| t.0.as_second()),
    }
}

/// A device capacity's `requestPolicy`.
fn capacity_request_policy(p: &resource::CapacityRequestPolicy) -> proto::CapacityRequestPolicy {
    proto::CapacityRequestPolicy {
        default: p.default.as_ref().map(|q| q.0.clone()),
        valid_values: p.valid_values.iter().flatten().map(|q| q.0.clone()).collect(),
        valid_range: p.valid_range.as_ref().map(|r| proto::CapacityRequestPolicyRange {
            min: r.min.0.clone(),
            max: r.max.as_ref().map(|q| q.0.clone()),
            step: r.step.as_ref().map(|q| q.0.clone()),
        }),
    }
}

/// A new share ID: a random (version 4) UUID, as kube's allocator draws one for each share of a
/// device that allows multiple allocations (`uuid.NewUUID`). Drawn from the process's hash
/// seeds (random per process, from the OS) with a counter and the clock: unique, not secret.
pub fn new_share_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let seeds = std::collections::hash_map::RandomState::new();
    let mut h = seeds.build_hasher();
    h.write_u64(n);
    h.write_u128(now);
    let hi = h.finish();
    let mut h = seeds.build_hasher();
    h.write_u64(hi);
    h.write_u64(!n);
    let lo = h.finish();
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&hi.to_be_bytes());
    b[8..].copy_from_slice(&lo.to_be_bytes());
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let x: String = b.iter().map(|v| format!("{v:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &x[..8], &x[8..12], &x[12..16], &x[16..20], &x[20..])
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
        controller_uid: Some(
            c.metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map(|o| o.uid.clone())
                .unwrap_or_default(),
        ),
        devices: status
            .and_then(|s| s.devices.as_ref())
            .into_iter()
            .flatten()
            .map(|d| proto::AllocatedDeviceStatus {
                driver: d.driver.clone(),
                pool: d.pool.clone(),
                device: d.device.clone(),
                share_id: d.share_id.clone(),
                true_conditions: d
                    .conditions
                    .iter()
                    .flatten()
                    .filter(|c| c.status == "True")
                    .map(|c| c.type_.clone())
                    .collect(),
            })
            .collect(),
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

fn device_taint(t: &resource::DeviceTaint) -> proto::DeviceTaint {
    proto::DeviceTaint {
        key: t.key.clone(),
        value: t.value.clone().unwrap_or_default(),
        effect: t.effect.clone(),
        time_added_seconds: t.time_added.as_ref().map_or(0, |t| t.0.as_second()),
    }
}

/// Projects a DeviceTaintRule.
pub fn device_taint_rule_info(r: &resource::DeviceTaintRule) -> proto::DeviceTaintRule {
    proto::DeviceTaintRule {
        name: r.metadata.name.clone().unwrap_or_default(),
        device_selector: r.spec.device_selector.as_ref().map(|s| proto::DeviceTaintSelector {
            driver: s.driver.clone(),
            pool: s.pool.clone(),
            device: s.device.clone(),
        }),
        taint: Some(device_taint(&r.spec.taint)),
    }
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
                capacity_request_policies: d
                    .capacity
                    .iter()
                    .flatten()
                    .filter_map(|(k, c)| {
                        c.request_policy
                            .as_ref()
                            .map(|p| (k.clone(), capacity_request_policy(p)))
                    })
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
                taints: d.taints.iter().flatten().map(device_taint).collect(),
                allow_multiple_allocations: d.allow_multiple_allocations.unwrap_or_default(),
                binding_conditions: d.binding_conditions.clone().unwrap_or_default(),
                binding_failure_conditions: d.binding_failure_conditions.clone().unwrap_or_default(),
                binds_to_node: d.binds_to_node.unwrap_or_default(),
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

fn node_selector_out(s: &proto::NodeSelector) -> NodeSelector {
    use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm};
    let requirements = |rs: &[proto::NodeSelectorRequirement]| -> Option<Vec<NodeSelectorRequirement>> {
        (!rs.is_empty()).then(|| {
            rs.iter()
                .map(|r| NodeSelectorRequirement {
                    key: r.key.clone(),
                    operator: r.operator.clone(),
                    values: (!r.values.is_empty()).then(|| r.values.clone()),
                })
                .collect()
        })
    };
    NodeSelector {
        node_selector_terms: s
            .terms
            .iter()
            .map(|t| NodeSelectorTerm {
                match_expressions: requirements(&t.match_expressions),
                match_fields: requirements(&t.match_fields),
            })
            .collect(),
    }
}

fn toleration_out(t: &proto::Toleration) -> resource::DeviceToleration {
    let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
    resource::DeviceToleration {
        key: some(&t.key),
        operator: some(&t.operator),
        value: some(&t.value),
        effect: some(&t.effect),
        toleration_seconds: t.toleration_seconds,
    }
}

/// The `status.allocation` to write for a placement's allocation of `claim` (kube's
/// `AllocationResult` as its allocator builds it): the devices, the node selector, and the
/// configuration of the classes used and of the claim (`allocationConfigs`), with `classes` the
/// DeviceClasses by name.
pub fn allocation_out(
    a: &proto::AllocationResult,
    claim: &resource::ResourceClaim,
    classes: &std::collections::HashMap<String, std::sync::Arc<resource::DeviceClass>>,
) -> resource::AllocationResult {
    let results: Vec<resource::DeviceRequestAllocationResult> = a
        .devices
        .iter()
        .map(|d| resource::DeviceRequestAllocationResult {
            request: d.request.clone(),
            driver: d.driver.clone(),
            pool: d.pool.clone(),
            device: d.device.clone(),
            admin_access: d.admin_access,
            tolerations: (!d.tolerations.is_empty()).then(|| d.tolerations.iter().map(toleration_out).collect()),
            consumed_capacity: (!d.consumed_capacity.is_empty()).then(|| {
                d.consumed_capacity
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            k8s_openapi::apimachinery::pkg::api::resource::Quantity(v.clone()),
                        )
                    })
                    .collect()
            }),
            // A new share gets its ID now, as kube's allocator draws it.
            share_id: d
                .share_id
                .as_ref()
                .map(|s| if s.is_empty() { new_share_id() } else { s.clone() }),
            binding_conditions: (!d.binding_conditions.is_empty()).then(|| d.binding_conditions.clone()),
            binding_failure_conditions: (!d.binding_failure_conditions.is_empty())
                .then(|| d.binding_failure_conditions.clone()),
            ..Default::default()
        })
        .collect();
    let config = allocation_configs(claim, &results, classes);
    resource::AllocationResult {
        devices: Some(resource::DeviceAllocationResult {
            results: Some(results),
            config: (!config.is_empty()).then_some(config),
        }),
        node_selector: a.node_selector.as_ref().map(node_selector_out),
        ..Default::default()
    }
}

/// kube's configuration of an allocation (`allocator_incubating.go`, "Populate configs"): each
/// class's configs once, for the requests of that class (the chosen subrequest's class for a
/// prioritized list); then the claim's configs that name a request, or the chosen subrequest,
/// or none; a config's requests cleared when they cover every request.
pub fn allocation_configs(
    claim: &resource::ResourceClaim,
    results: &[resource::DeviceRequestAllocationResult],
    classes: &std::collections::HashMap<String, std::sync::Arc<resource::DeviceClass>>,
) -> Vec<resource::DeviceAllocationConfiguration> {
    let devices = claim.spec.as_ref().and_then(|s| s.devices.as_ref());
    let requests: &[resource::DeviceRequest] = devices.and_then(|d| d.requests.as_deref()).unwrap_or_default();
    // Per request: (request name as results write it, class name), the chosen subrequest's for a list.
    let chosen: Vec<Option<(String, String)>> = requests
        .iter()
        .map(|r| match (&r.exactly, &r.first_available) {
            (Some(e), _) => Some((r.name.clone(), e.device_class_name.clone())),
            (None, Some(subs)) => subs.iter().find_map(|s| {
                let name = format!("{}/{}", r.name, s.name);
                results
                    .iter()
                    .any(|d| d.request == name)
                    .then(|| (name, s.device_class_name.clone()))
            }),
            (None, None) => None,
        })
        .collect();
    let mut out: Vec<resource::DeviceAllocationConfiguration> = Vec::new();
    let mut class_ranges: std::collections::HashMap<&str, (usize, usize)> = Default::default();
    for (name, class) in chosen.iter().flatten() {
        if let Some(&(start, end)) = class_ranges.get(class.as_str()) {
            for c in &mut out[start..end] {
                c.requests.get_or_insert_with(Vec::new).push(name.clone());
            }
            continue;
        }
        let start = out.len();
        if let Some(configs) = classes
            .get(class)
            .and_then(|c| c.spec.as_ref())
            .and_then(|s| s.config.as_ref())
        {
            for config in configs {
                out.push(resource::DeviceAllocationConfiguration {
                    source: "FromClass".into(),
                    requests: Some(vec![name.clone()]),
                    opaque: config.opaque.clone(),
                });
            }
        }
        class_ranges.insert(class, (start, out.len()));
    }
    for config in devices.and_then(|d| d.config.as_ref()).into_iter().flatten() {
        let named = config.requests.as_deref().unwrap_or_default();
        let applies = named.is_empty()
            || requests.iter().zip(&chosen).any(|(r, c)| {
                named.contains(&r.name) || c.as_ref().is_some_and(|(n, _)| n.contains('/') && named.contains(n))
            });
        if applies {
            out.push(resource::DeviceAllocationConfiguration {
                source: "FromClaim".into(),
                requests: config.requests.clone().filter(|r| !r.is_empty()),
                opaque: config.opaque.clone(),
            });
        }
    }
    for c in &mut out {
        let Some(named) = &c.requests else { continue };
        let all = requests.iter().zip(&chosen).all(|(r, ch)| {
            named.contains(&r.name) || ch.as_ref().is_some_and(|(n, _)| n.contains('/') && named.contains(n))
        });
        if all {
            c.requests = None;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The claim's controller's uid goes to `controller_uid` ("" without one, a non-controller
    /// owner ignored): the engine refuses a template's claim its pod does not control, as
    /// kube-scheduler's `resourceclaim.IsForPod`.
    #[test]
    fn a_claims_controller_is_projected() {
        let claim = |owners: serde_json::Value| -> resource::ResourceClaim {
            serde_json::from_value(serde_json::json!({
                "metadata": {"namespace": "default", "name": "p-gpu-abcde", "uid": "c1", "ownerReferences": owners},
                "spec": {"devices": {"requests": []}},
            }))
            .unwrap()
        };
        let owner = |uid: &str, controller: bool| serde_json::json!({"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": uid, "controller": controller});
        let controlled = claim(serde_json::json!([owner("other", false), owner("pod-uid", true)]));
        assert_eq!(
            resource_claim_info(&controlled).controller_uid.as_deref(),
            Some("pod-uid")
        );
        let uncontrolled = claim(serde_json::json!([owner("other", false)]));
        assert_eq!(resource_claim_info(&uncontrolled).controller_uid.as_deref(), Some(""));
    }

    /// Consumable capacity: a device's request policies and a claim's shares are projected, and
    /// a new share (empty ID in the answer) is written with a fresh UUID and its consumed
    /// capacity, as kube's allocator writes it; a known share keeps its ID.
    #[test]
    fn consumable_capacity_is_projected_and_written() {
        let slice: resource::ResourceSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "s"},
            "spec": {"driver": "gpu.example.com", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                "nodeName": "n1",
                "devices": [{"name": "gpu-0", "allowMultipleAllocations": true, "capacity": {
                    "memory": {"value": "40Gi", "requestPolicy": {"default": "1Gi",
                        "validRange": {"min": "1Gi", "max": "40Gi", "step": "1Gi"}}},
                    "cores": {"value": "8"}}}]},
        }))
        .unwrap();
        let d = &resource_slice_info(&slice).devices[0];
        assert!(d.allow_multiple_allocations);
        assert_eq!(d.capacity_request_policies.len(), 1);
        let p = &d.capacity_request_policies["memory"];
        assert_eq!(p.default.as_deref(), Some("1Gi"));
        let r = p.valid_range.as_ref().unwrap();
        assert_eq!(
            (r.min.as_str(), r.max.as_deref(), r.step.as_deref()),
            ("1Gi", Some("40Gi"), Some("1Gi"))
        );

        let allocated: resource::AllocationResult = serde_json::from_value(serde_json::json!({
            "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "p", "device": "gpu-0",
                "shareID": "0b7e1f7c-7a57-4c1e-9a57-2f7b8b6b1f00", "consumedCapacity": {"memory": "10Gi"}}]},
        }))
        .unwrap();
        let info = allocation_info(&allocated);
        assert_eq!(
            info.devices[0].share_id.as_deref(),
            Some("0b7e1f7c-7a57-4c1e-9a57-2f7b8b6b1f00")
        );
        assert_eq!(info.devices[0].consumed_capacity["memory"], "10Gi");

        let claim: resource::ResourceClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "default", "name": "c"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
        }))
        .unwrap();
        let mut answer = info.clone();
        answer.devices.push(proto::DeviceRequestAllocationResult {
            share_id: Some(String::new()),
            consumed_capacity: [("memory".to_string(), "15Gi".to_string())].into(),
            ..answer.devices[0].clone()
        });
        let out = allocation_out(&answer, &claim, &Default::default());
        let results = out.devices.unwrap().results.unwrap();
        assert_eq!(
            results[0].share_id.as_deref(),
            Some("0b7e1f7c-7a57-4c1e-9a57-2f7b8b6b1f00")
        );
        let new = results[1].share_id.clone().unwrap();
        let uuid = regex_lite_uuid(&new);
        assert!(uuid, "{new}");
        assert_ne!(
            new,
            allocation_out(&answer, &claim, &Default::default())
                .devices
                .unwrap()
                .results
                .unwrap()[1]
                .share_id
                .clone()
                .unwrap()
        );
        assert_eq!(results[1].consumed_capacity.as_ref().unwrap()["memory"].0, "15Gi");
    }

    /// A lower-case version 4 UUID (`8-4-4-4-12` hex digits).
    fn regex_lite_uuid(s: &str) -> bool {
        let parts: Vec<&str> = s.split('-').collect();
        parts.iter().map(|p| p.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
            && s.chars()
                .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
            && parts[2].starts_with('4')
            && matches!(parts[3].chars().next(), Some('8' | '9' | 'a' | 'b'))
    }
}
