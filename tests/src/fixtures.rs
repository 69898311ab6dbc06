//! Kubernetes objects and waiting helpers shared by the tests that drive a binder against an API
//! server (the fake one or a real cluster).

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Node, NodeSpec, NodeStatus, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A resource list from `(name, quantity)` pairs.
pub fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

/// A node with `cpu` cores, 8Gi of memory and room for 110 pods, labelled with its hostname.
pub fn node(name: &str, cpu: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("kubernetes.io/hostname".to_string(), name.to_string())].into()),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            allocatable: Some(quantities(&[("cpu", cpu), ("memory", "8Gi"), ("pods", "110")])),
            capacity: Some(quantities(&[("cpu", cpu), ("memory", "8Gi"), ("pods", "110")])),
            ..Default::default()
        }),
    }
}

/// A one-container pod requesting `cpu` and 64Mi, naming `scheduler`, bound to `node_name` if given.
pub fn pod(namespace: &str, name: &str, scheduler: &str, cpu: &str, node_name: Option<&str>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some(scheduler.into()),
            node_name: node_name.map(str::to_string),
            containers: vec![Container {
                name: "app".into(),
                image: Some("registry.example/app:1".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(quantities(&[("cpu", cpu), ("memory", "64Mi")])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Polls `check` every 100 ms until it holds; panics naming `what` once `timeout` has passed.
pub async fn eventually<F, Fut>(timeout: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
