//! Which of the optional APIs the API server serves: each found by a list of at most one object;
//! an answer other than 404 counts as served (the watch retries with backoff).

use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule};
use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Client};

/// Whether the API server serves `resource.k8s.io/v1` (Kubernetes 1.34 and later), found by a
/// list of at most one DeviceClass; an answer other than 404 counts as served (the watches retry
/// with backoff).
pub async fn serves_dra(client: &Client) -> bool {
    let api: Api<DeviceClass> = Api::all(client.clone());
    !matches!(
        api.list(&kube::api::ListParams::default().limit(1)).await,
        Err(kube::Error::Api(e)) if e.code == 404
    )
}

/// Whether the API server serves `resource.k8s.io/v1` DeviceTaintRules (Kubernetes 1.37 and
/// later; 1.35 and 1.36 serve them only as alpha and beta versions, off by default), found by a
/// list of at most one; an answer other than 404 counts as served (the watch retries with
/// backoff).
pub async fn serves_device_taint_rules(client: &Client) -> bool {
    let api: Api<DeviceTaintRule> = Api::all(client.clone());
    !matches!(
        api.list(&kube::api::ListParams::default().limit(1)).await,
        Err(kube::Error::Api(e)) if e.code == 404
    )
}

/// Whether the API server serves `scheduling.k8s.io/v1beta1` PodGroups (Kubernetes 1.37 with the
/// `GenericWorkload` feature gate and the API version enabled), found by a list of at most one
/// PodGroup; an answer other than 404 counts as served (the watch retries with backoff).
pub async fn serves_pod_groups(client: &Client) -> bool {
    let api: Api<PodGroup> = Api::all(client.clone());
    !matches!(
        api.list(&kube::api::ListParams::default().limit(1)).await,
        Err(kube::Error::Api(e)) if e.code == 404
    )
}

/// Whether the API server serves `scheduling.k8s.io/v1alpha3` CompositePodGroups (Kubernetes
/// 1.37 with the `CompositePodGroup` gate and that API version on), found as
/// [`serves_pod_groups`] finds PodGroups.
pub async fn serves_composite_pod_groups(client: &Client) -> bool {
    let api: Api<CompositePodGroup> = Api::all(client.clone());
    !matches!(
        api.list(&kube::api::ListParams::default().limit(1)).await,
        Err(kube::Error::Api(e)) if e.code == 404
    )
}

/// The storage.k8s.io version that serves CSIStorageCapacity: v1 (Kubernetes 1.24 and later),
/// else v1beta1 (1.21 to 1.23, and 1.24's pre-releases); `None` when neither does. Found by a
/// list of at most one object (the list permission the binder has anyway); an answer other than
/// 404 keeps the version, and the watch retries it with backoff.
pub async fn capacity_resource(client: &Client) -> Option<ApiResource> {
    for version in ["v1", "v1beta1"] {
        let resource = ApiResource {
            group: "storage.k8s.io".into(),
            version: version.into(),
            api_version: format!("storage.k8s.io/{version}"),
            kind: "CSIStorageCapacity".into(),
            plural: "csistoragecapacities".into(),
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        match api.list(&kube::api::ListParams::default().limit(1)).await {
            Err(kube::Error::Api(e)) if e.code == 404 => continue,
            _ => return Some(resource),
        }
    }
    None
}
