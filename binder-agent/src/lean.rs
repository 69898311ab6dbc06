//! Kubernetes objects read without their `metadata.managedFields`.
//!
//! The API server sends every object with its managed fields: one entry per field manager, each
//! a tree of the fields it owns. The binder never reads them, yet decoding them into
//! [`ObjectMeta`] was its largest single cost per watch event and per write's answer (a claim
//! written by the resourceclaim controller and the binder carries two such trees). [`Lean<K>`]
//! decodes `K` with the managed fields skipped by the JSON parser (nothing allocated for them) and
//! every other field exactly as `K`'s own decoding reads it; [`Lean<K>`] is a [`kube::Resource`]
//! of `K`'s kind, so an `Api<Lean<K>>` watches, patches and reads the same resource.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Pod, PodSpec, PodStatus};
use k8s_openapi::api::resource::v1::{
    ResourceClaim, ResourceClaimSpec, ResourceClaimStatus, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Deserialize;

/// `K`, decoded without its managed fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Lean<K>(pub K);

/// A kind whose top-level fields are `metadata`, `spec` and `status` (`apiVersion` and `kind`
/// are checked by the API path, not the body), put together from them.
pub trait Parts: Sized {
    /// `spec`'s type.
    type Spec: DeserializeOwned;
    /// `status`'s type ([`IgnoredAny`] for a kind without one).
    type Status: DeserializeOwned;
    /// The object from its decoded fields; a field the body lacks is `None`.
    fn assemble(metadata: ObjectMeta, spec: Option<Self::Spec>, status: Option<Self::Status>) -> Self;
}

impl Parts for Pod {
    type Spec = PodSpec;
    type Status = PodStatus;
    fn assemble(metadata: ObjectMeta, spec: Option<PodSpec>, status: Option<PodStatus>) -> Self {
        Pod { metadata, spec, status }
    }
}

impl Parts for Node {
    type Spec = NodeSpec;
    type Status = NodeStatus;
    fn assemble(metadata: ObjectMeta, spec: Option<NodeSpec>, status: Option<NodeStatus>) -> Self {
        Node { metadata, spec, status }
    }
}

impl Parts for ResourceClaim {
    type Spec = ResourceClaimSpec;
    type Status = ResourceClaimStatus;
    fn assemble(metadata: ObjectMeta, spec: Option<ResourceClaimSpec>, status: Option<ResourceClaimStatus>) -> Self {
        ResourceClaim { metadata, spec, status }
    }
}

impl Parts for ResourceSlice {
    type Spec = ResourceSliceSpec;
    type Status = IgnoredAny;
    fn assemble(metadata: ObjectMeta, spec: Option<ResourceSliceSpec>, _: Option<IgnoredAny>) -> Self {
        ResourceSlice {
            metadata,
            spec: spec.unwrap_or_default(),
        }
    }
}

/// [`ObjectMeta`]'s fields but `managedFields`, which the parser skips as it skips any field
/// not named here.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Meta {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl From<Meta> for ObjectMeta {
    fn from(m: Meta) -> Self {
        ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            managed_fields: None,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            self_link: m.self_link,
            uid: m.uid,
        }
    }
}

/// The body's top-level fields.
#[derive(Deserialize)]
#[serde(bound(deserialize = "S: DeserializeOwned, T: DeserializeOwned"))]
struct Body<S, T> {
    #[serde(default)]
    metadata: Meta,
    spec: Option<S>,
    status: Option<T>,
}

impl<'de, K: Parts> Deserialize<'de> for Lean<K> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let body = Body::<K::Spec, K::Status>::deserialize(d)?;
        Ok(Lean(K::assemble(body.metadata.into(), body.spec, body.status)))
    }
}

/// `K`'s resource.
impl<K: kube::Resource<DynamicType = ()>> kube::Resource for Lean<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &()) -> Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

/// A watch of `Lean<K>` seen as a watch of `K`.
pub fn event<K>(event: kube::runtime::watcher::Event<Lean<K>>) -> kube::runtime::watcher::Event<K> {
    use kube::runtime::watcher::Event;
    match event {
        Event::Apply(o) => Event::Apply(o.0),
        Event::Delete(o) => Event::Delete(o.0),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(o.0),
        Event::InitDone => Event::InitDone,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An object as the API server sends it: every metadata field, managed fields of two managers.
    fn claim_json() -> serde_json::Value {
        json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "name": "pod-0-gpu-x7k2p",
                "generateName": "pod-0-gpu-",
                "namespace": "bench",
                "uid": "8d0c4f2e-1111-2222-3333-444455556666",
                "resourceVersion": "4711",
                "generation": 1,
                "creationTimestamp": "2026-12-07T18:00:00Z",
                "deletionTimestamp": "2026-12-07T18:05:00Z",
                "deletionGracePeriodSeconds": 0,
                "labels": {"app": "bench"},
                "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu",
                                "note": "\"managedFields\": [not a field]"},
                "finalizers": ["resource.kubernetes.io/delete-protection"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "pod-0",
                                     "uid": "aaaa", "controller": true, "blockOwnerDeletion": true}],
                "managedFields": [
                    {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "resource.k8s.io/v1",
                     "time": "2026-12-07T18:00:00Z", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:ownerReferences": {".": {}, "k:{\"uid\":\"aaaa\"}": {}}},
                                  "f:spec": {"f:devices": {"f:requests": {}}}}},
                    {"manager": "placement", "operation": "Update", "apiVersion": "resource.k8s.io/v1",
                     "time": "2026-12-07T18:00:01Z", "fieldsType": "FieldsV1", "subresource": "status",
                     "fieldsV1": {"f:status": {"f:allocation": {".": {}, "f:devices": {}}, "f:reservedFor": {}}}}
                ]
            },
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2,
                "selectors": [{"cel": {"expression": "device.attributes[\"m\"].model == \"h100\""}}]}}]}},
            "status": {
                "allocation": {"devices": {"results": [{"request": "gpu", "driver": "d", "pool": "n1", "device": "g0"}]},
                               "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                                   {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
                "reservedFor": [{"resource": "pods", "name": "pod-0", "uid": "aaaa"}]
            }
        })
    }

    #[test]
    fn a_lean_object_is_the_object_without_its_managed_fields() {
        let text = claim_json().to_string();
        let mut full: ResourceClaim = serde_json::from_str(&text).unwrap();
        assert_eq!(full.metadata.managed_fields.as_ref().map(Vec::len), Some(2));
        let lean: Lean<ResourceClaim> = serde_json::from_str(&text).unwrap();
        full.metadata.managed_fields = None;
        assert_eq!(lean.0, full);
    }

    #[test]
    fn every_watched_kind_decodes_as_its_own_decoding_does() {
        let pod = json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "1",
                         "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"schedulerName": "placement", "containers": [{"name": "c", "image": "i",
                     "resources": {"requests": {"cpu": "100m"}}}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
            "status": {"phase": "Pending", "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu"}]}
        });
        let node = json!({
            "metadata": {"name": "n", "labels": {"zone": "a"}, "managedFields": []},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "32"}}
        });
        let slice = json!({
            "metadata": {"name": "s", "managedFields": [{"manager": "driver"}]},
            "spec": {"driver": "d", "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "g0", "attributes": {"model": {"string": "h100"}},
                                  "capacity": {"memory": {"value": "80Gi"}}}]}
        });
        fn same<K: Parts + DeserializeOwned + PartialEq + std::fmt::Debug + kube::Resource>(v: &serde_json::Value) {
            let mut full: K = serde_json::from_value(v.clone()).unwrap();
            full.meta_mut().managed_fields = None;
            let lean: Lean<K> = serde_json::from_str(&v.to_string()).unwrap();
            assert_eq!(lean.0, full);
        }
        same::<Pod>(&pod);
        same::<Node>(&node);
        same::<ResourceSlice>(&slice);
        same::<ResourceClaim>(&claim_json());
    }

    #[test]
    fn a_malformed_field_is_an_error_as_in_the_object_itself() {
        let mut v = claim_json();
        v["metadata"]["labels"] = json!(["not", "a", "map"]);
        assert!(serde_json::from_value::<ResourceClaim>(v.clone()).is_err());
        assert!(serde_json::from_str::<Lean<ResourceClaim>>(&v.to_string()).is_err());
        let mut v = claim_json();
        v["spec"] = json!("nope");
        assert!(serde_json::from_str::<Lean<ResourceClaim>>(&v.to_string()).is_err());
    }
}
