//! Extended resources backed by DRA (DRAExtendedResource, GA and locked on in kube 1.37), as
//! kube-scheduler's `framework/plugins/dynamicresources/extendeddynamicresources.go` does them:
//!
//! - PreFilter ([`ExtendedResources::of`], `preFilterExtendedResources`): a pod requesting an
//!   extended resource that a DeviceClass backs (its `spec.extendedResourceName`, or the implicit
//!   `deviceclass.resource.kubernetes.io/<class>`) gets one special claim, kept in memory;
//! - Filter ([`ExtendedResources::delegated`], `filterExtendedResources`): on a node whose
//!   allocatable lacks such a resource (NodeResourcesFit left it to DynamicResources,
//!   `shouldDelegateResourceToDRA` in `noderesources/fit.go`), the special claim asks the
//!   class's devices for it, with kube's request names ([`ExtendedResources::claim`],
//!   `createRequestsAndMappings`), and is allocated after the pod's own claims;
//! - Reserve: the allocation, the claim's requests and the pod's request mappings
//!   ([`ExtendedClaim`]) go to the caller, which creates the claim in PreBind as kube does
//!   (`createExtendedResourceClaimInAPI`, `patchPodExtendedResourceClaimStatus`).

use std::sync::Arc;

use crate::engine::devices::{AllocationMode, DeviceObjects, DeviceRequest, RequestKind, RequestSpec, ResourceClaim};
use crate::engine::model::{ExtendedContainer, NodeSpec, PodSpec};
use crate::engine::resources::is_dra_extended_resource_name;

/// kube's `specialClaimInMemName`: the special claim's name until PreBind creates it (not a
/// valid name, so no real claim has it).
pub const SPECIAL_CLAIM_NAME: &str = "<extended-resources>";

/// Filter's rejection when the pod requests an extended resource that neither the node's
/// allocatable (a device plugin) nor a DeviceClass provides (`filterExtendedResources`).
pub const CANNOT_FIT_RESOURCE: &str = "cannot fit resource";

/// One entry of the pod's `status.extendedResourceClaimStatus.requestMappings`
/// (`ContainerExtendedResourceRequest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMapping {
    /// `containerName`.
    pub container_name: String,
    /// `resourceName`.
    pub resource_name: String,
    /// `requestName`: the special claim's request that serves it.
    pub request_name: String,
}

/// One request of the special claim: `exactly` a count of devices of a class (`ExactCount`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedRequest {
    /// `name`: `container-<index>-request-<index of the resource among the container's requests>`.
    pub name: String,
    /// `exactly.deviceClassName`.
    pub class: String,
    /// `exactly.count`.
    pub count: i64,
}

/// What a placement carries of the pod's special claim for the caller to create it: its
/// requests (sorted by name, as kube sorts them) and the pod's request mappings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExtendedClaim {
    /// `spec.devices.requests`.
    pub requests: Vec<ExtendedRequest>,
    /// The pod's `status.extendedResourceClaimStatus.requestMappings`.
    pub mappings: Vec<RequestMapping>,
}

impl ExtendedClaim {
    /// The claim as the allocator reads it (kube's node-specific copy of the special claim).
    pub fn resource_claim(&self, namespace: &str) -> ResourceClaim {
        ResourceClaim {
            namespace: namespace.to_string(),
            name: SPECIAL_CLAIM_NAME.to_string(),
            requests: self
                .requests
                .iter()
                .map(|r| DeviceRequest {
                    name: r.name.clone(),
                    kind: RequestKind::Exactly(RequestSpec {
                        class: r.class.clone(),
                        selectors: Vec::new(),
                        mode: AllocationMode::ExactCount(r.count),
                        admin_access: false,
                        tolerations: Vec::new(),
                        capacity_requests: Default::default(),
                    }),
                })
                .collect(),
            ..ResourceClaim::default()
        }
    }
}

/// DynamicResources' PreFilter state for the pod's extended resources (kube's
/// `draExtendedResource`).
#[derive(Debug, Clone)]
pub struct ExtendedResources {
    /// The pod's namespace, the special claim's.
    namespace: String,
    /// The pod's requests of names DRA may back (kube's `IsDRAExtendedResourceName`), sorted,
    /// each with the class backing it, if any.
    resources: Vec<(Arc<str>, Option<String>)>,
    /// The containers requesting them.
    containers: Vec<ExtendedContainer>,
}

impl ExtendedResources {
    /// kube's `preFilterExtendedResources`: `None` unless some extended resource the pod
    /// requests is backed by a DeviceClass.
    pub fn of(objects: &DeviceObjects, pod: &PodSpec) -> Option<Self> {
        if pod.extended_containers.is_empty() || objects.classes.is_empty() {
            return None;
        }
        let resources: Vec<(Arc<str>, Option<String>)> = pod
            .requests
            .scalars
            .iter()
            .filter(|(name, amount)| *amount != 0 && is_dra_extended_resource_name(name))
            .map(|(name, _)| {
                let class = objects.class_for_extended_resource(name).map(|c| c.name.clone());
                (Arc::clone(name), class)
            })
            .collect();
        if resources.iter().all(|(_, class)| class.is_none()) {
            return None;
        }
        Some(Self {
            namespace: pod.namespace.clone(),
            resources,
            containers: pod.extended_containers.clone(),
        })
    }

    /// The names of the pod's extended resources a DeviceClass backs (what NodeResourcesFit may
    /// leave to DynamicResources).
    pub fn backed(&self) -> impl Iterator<Item = &Arc<str>> {
        self.resources.iter().filter(|(_, c)| c.is_some()).map(|(n, _)| n)
    }

    /// kube's `filterExtendedResources` on one node: the resources the node must provide through
    /// DRA (bit `i` for the `i`-th of the pod's resources: backed by a class, and none in the
    /// node's allocatable), or the rejection of a resource provided neither way.
    pub fn delegated(&self, node: &NodeSpec) -> Result<u128, &'static str> {
        let mut bits = 0u128;
        for (i, (name, class)) in self.resources.iter().enumerate() {
            let allocatable = node.allocatable.scalar(name);
            if class.is_some() && allocatable == 0 {
                bits |= 1u128.checked_shl(i as u32).unwrap_or(0);
            } else if allocatable == 0 {
                // kube: `!okScalar`, the node's allocatable does not list it (placement keeps no
                // zero amounts; NodeResourcesFit, which runs first, rejects a listed zero).
                return Err(CANNOT_FIT_RESOURCE);
            }
        }
        Ok(bits)
    }

    /// Whether the pod has more resources than [`ExtendedResources::delegated`]'s bits hold
    /// (then verdicts are not shared between nodes).
    pub fn too_many(&self) -> bool {
        self.resources.len() > 128
    }

    /// The pod's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The special claim for the resources of `delegated` (kube's `createRequestsAndMappings`):
    /// `None` when there are none.
    pub fn claim(&self, node: &NodeSpec) -> Option<ExtendedClaim> {
        let delegated: Vec<(&str, &str)> = self
            .resources
            .iter()
            .filter_map(|(name, class)| {
                let class = class.as_deref()?;
                (node.allocatable.scalar(name) == 0).then_some((&**name, class))
            })
            .collect();
        if delegated.is_empty() {
            return None;
        }
        Some(requests_and_mappings(&self.containers, &delegated))
    }
}

/// kube's `createResourceRequestAndMappings` for one container and resource: the request the
/// container needs beyond `reusable` (the long-lived containers' requests it may share, an init
/// container's), and its mappings.
fn container_request(
    c: &ExtendedContainer,
    resource: &str,
    class: &str,
    reusable: &[&ExtendedRequest],
) -> (Option<ExtendedRequest>, Vec<RequestMapping>) {
    let Some(wanted) = c
        .extended
        .iter()
        .find(|(n, _)| **n == *resource)
        .and_then(|(_, q)| *q)
        .filter(|q| *q != 0)
    else {
        return (None, Vec::new());
    };
    let mapping = |request: &str| RequestMapping {
        container_name: c.name.clone(),
        resource_name: resource.to_string(),
        request_name: request.to_string(),
    };
    let mut mappings = Vec::new();
    let mut sum = 0i64;
    for r in reusable {
        sum = sum.saturating_add(r.count);
        mappings.push(mapping(&r.name));
        if sum >= wanted {
            return (None, mappings);
        }
    }
    let index = c.request_names.iter().position(|n| **n == *resource).unwrap_or(0);
    let name = format!("container-{}-request-{index}", c.index);
    mappings.push(mapping(&name));
    (
        Some(ExtendedRequest {
            name,
            class: class.to_string(),
            count: wanted - sum,
        }),
        mappings,
    )
}

/// kube's `createRequestsAndMappings`: per resource (sorted by name), the long-lived
/// containers' requests (regular containers and sidecars), and one request for the short-lived
/// init containers, the largest of theirs, which they all map to; requests sorted by name.
fn requests_and_mappings(containers: &[ExtendedContainer], resources: &[(&str, &str)]) -> ExtendedClaim {
    let mut requests = Vec::new();
    let mut mappings = Vec::new();
    for &(resource, class) in resources {
        let mut long_lived: Vec<(usize, ExtendedRequest)> = Vec::new();
        let mut long_mappings = Vec::new();
        for c in containers.iter().filter(|c| !c.short_lived) {
            let (request, m) = container_request(c, resource, class, &[]);
            if let Some(r) = request {
                long_lived.push((c.index, r));
            }
            long_mappings.extend(m);
        }
        let mut max_short: Option<ExtendedRequest> = None;
        let mut short_names: Vec<String> = Vec::new();
        let mut short_mappings = Vec::new();
        for c in containers.iter().filter(|c| c.short_lived) {
            let reusable: Vec<&ExtendedRequest> = long_lived
                .iter()
                .filter(|(i, _)| *i >= c.index)
                .map(|(_, r)| r)
                .collect();
            let (request, m) = container_request(c, resource, class, &reusable);
            if let Some(r) = request {
                if !short_names.contains(&r.name) {
                    short_names.push(r.name.clone());
                }
                if max_short.as_ref().is_none_or(|m| m.count < r.count) {
                    max_short = Some(r);
                }
            }
            short_mappings.extend(m);
        }
        if let Some(max) = &max_short {
            if short_names.len() > 1 {
                for m in &mut short_mappings {
                    if m.request_name != max.name && short_names.contains(&m.request_name) {
                        m.request_name = max.name.clone();
                    }
                }
            }
        }
        requests.extend(max_short);
        requests.extend(long_lived.into_iter().map(|(_, r)| r));
        mappings.extend(long_mappings);
        mappings.extend(short_mappings);
    }
    requests.sort_by(|a, b| a.name.cmp(&b.name));
    ExtendedClaim { requests, mappings }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(index: usize, name: &str, short_lived: bool, requests: &[(&str, i64)]) -> ExtendedContainer {
        let mut names: Vec<Arc<str>> = requests.iter().map(|(n, _)| Arc::from(*n)).collect();
        names.sort();
        ExtendedContainer {
            index,
            name: name.to_string(),
            short_lived,
            request_names: names,
            extended: requests
                .iter()
                .filter(|(n, _)| is_dra_extended_resource_name(n))
                .map(|(n, q)| (Arc::from(*n), Some(*q)))
                .collect(),
        }
    }

    fn mapping(container: &str, resource: &str, request: &str) -> RequestMapping {
        RequestMapping {
            container_name: container.into(),
            resource_name: resource.into(),
            request_name: request.into(),
        }
    }

    fn request(name: &str, class: &str, count: i64) -> ExtendedRequest {
        ExtendedRequest {
            name: name.into(),
            class: class.into(),
            count,
        }
    }

    /// Request names, counts and mappings: one container, its request named by the resource's
    /// place among the container's sorted requests; init containers reusing the long-lived
    /// containers' requests after them; several short-lived ones sharing the largest request;
    /// then two cases of kube's `Test_createRequestsAndMappings_requests`
    /// (`extendeddynamicresources_test.go`).
    #[test]
    fn requests_and_mappings_as_kube_names_them() {
        // One container: cpu, example.com/gpu, memory sorted: the gpu is the request's index 1.
        let one = [container(
            0,
            "c",
            false,
            &[("cpu", 1), ("memory", 1), ("example.com/gpu", 2)],
        )];
        assert_eq!(
            requests_and_mappings(&one, &[("example.com/gpu", "gpu-class")]),
            ExtendedClaim {
                requests: vec![request("container-0-request-1", "gpu-class", 2)],
                mappings: vec![mapping("c", "example.com/gpu", "container-0-request-1")],
            }
        );
        // Two init containers (2 and 3 gpus), a sidecar (1) and a container (1): the sidecar and
        // the container are long-lived; the first init container reuses both (2 of 2 wanted:
        // no request of its own), the second needs 1 more, its own request.
        let mixed = [
            container(0, "init-a", true, &[("example.com/gpu", 2)]),
            container(1, "init-b", true, &[("example.com/gpu", 3)]),
            container(2, "sidecar", false, &[("example.com/gpu", 1)]),
            container(3, "main", false, &[("example.com/gpu", 1)]),
        ];
        assert_eq!(
            requests_and_mappings(&mixed, &[("example.com/gpu", "gpu-class")]),
            ExtendedClaim {
                requests: vec![
                    request("container-1-request-0", "gpu-class", 1),
                    request("container-2-request-0", "gpu-class", 1),
                    request("container-3-request-0", "gpu-class", 1),
                ],
                mappings: vec![
                    mapping("sidecar", "example.com/gpu", "container-2-request-0"),
                    mapping("main", "example.com/gpu", "container-3-request-0"),
                    mapping("init-a", "example.com/gpu", "container-2-request-0"),
                    mapping("init-a", "example.com/gpu", "container-3-request-0"),
                    mapping("init-b", "example.com/gpu", "container-2-request-0"),
                    mapping("init-b", "example.com/gpu", "container-3-request-0"),
                    mapping("init-b", "example.com/gpu", "container-1-request-0"),
                ],
            }
        );
        // Two short-lived init containers with requests of their own: the larger serves both.
        let inits = [
            container(0, "init-a", true, &[("example.com/gpu", 1)]),
            container(1, "init-b", true, &[("example.com/gpu", 2)]),
        ];
        assert_eq!(
            requests_and_mappings(&inits, &[("example.com/gpu", "gpu-class")]),
            ExtendedClaim {
                requests: vec![request("container-1-request-0", "gpu-class", 2)],
                mappings: vec![
                    mapping("init-a", "example.com/gpu", "container-1-request-0"),
                    mapping("init-b", "example.com/gpu", "container-1-request-0"),
                ],
            }
        );
        // kube's "two resources match": one container, example.com/gpu 1 and example.com/gpu1 2.
        let two = [container(
            0,
            "c",
            false,
            &[("example.com/gpu", 1), ("example.com/gpu1", 2)],
        )];
        let got = requests_and_mappings(&two, &[("example.com/gpu", "class"), ("example.com/gpu1", "class1")]);
        assert_eq!(
            got.requests,
            [
                request("container-0-request-0", "class", 1),
                request("container-0-request-1", "class1", 2)
            ]
        );
        // kube's "three init containers, one sidecar, one regular container".
        let init3 = [
            container(0, "i0", true, &[("example.com/gpuinit", 1)]),
            container(1, "s1", false, &[("example.com/gpuinit", 1)]),
            container(2, "i2", true, &[("example.com/gpuinit", 2)]),
            container(3, "c3", false, &[("example.com/gpu", 1)]),
        ];
        let got = requests_and_mappings(
            &init3,
            &[("example.com/gpu", "class"), ("example.com/gpuinit", "classInit")],
        );
        assert_eq!(
            got.requests,
            [
                request("container-1-request-0", "classInit", 1),
                request("container-2-request-0", "classInit", 2),
                request("container-3-request-0", "class", 1)
            ]
        );
    }
}
