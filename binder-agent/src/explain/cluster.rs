//! Reads the live cluster as the binder sees it: the same lists (every node, namespace,
//! PodDisruptionBudget, PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode, CSIDriver,
//! CSIStorageCapacity, DeviceClass, ResourceClaim, ResourceSlice, DeviceTaintRule and PodGroup, and every pod that
//! has not finished, through kube-scheduler's field selector), the same projections
//! ([`crate::projection`]) and the same [`ClusterState`], whose full snapshot is what the binder
//! would send a decision replica. The explained pod itself is left out of it: a bound pod is
//! explained against the cluster as it is now, as if it were pending. For a pod naming a
//! PodGroup, the group's other pending pods are kept aside (the binder decides them together).

use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass};
use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client};
use placement_scheduler::proto;
use serde::de::DeserializeOwned;

use crate::projection::{
    claim_info, csi_driver_info, csi_node_info, device_class_info, device_taint_rule_info,
    dynamic_storage_capacity_info, namespace_info, node_info, pdb_info, pod_group_info, pod_info, resource_claim_info,
    resource_slice_info, storage_class_info, volume_info, PodInfo, TrackedObject,
};
use crate::state::ClusterState;
use crate::watch::POD_FIELD_SELECTOR;

/// Objects per list page.
const PAGE: u32 = 500;

/// Why the cluster could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The pod does not exist.
    #[error("pod {namespace}/{name} not found")]
    PodNotFound {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The pod has no uid (the API server always sets one).
    #[error("pod {0} has no metadata.uid")]
    NoUid(String),
    /// A request to the API server failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being read.
        what: String,
        /// The client's error.
        source: kube::Error,
    },
}

/// The pod and the cluster around it.
#[derive(Debug, Clone)]
pub struct ClusterView {
    /// The pod, projected as the binder projects pods (`node_name` as the API server has it).
    pub pod: PodInfo,
    /// status.phase.
    pub phase: String,
    /// status.nominatedNodeName.
    pub nominated_node: Option<String>,
    /// The cluster without the pod: nodes, the pods bound to them, namespaces, budgets.
    pub snapshot: proto::Snapshot,
    /// Lists that could not be read and what that leaves out.
    pub notes: Vec<String>,
    /// Whether the API server serves scheduling.k8s.io/v1beta1 PodGroups (and the user may list
    /// them).
    pub pod_groups_read: bool,
    /// For a pod naming a PodGroup: the group's other pods that are pending (not bound, not
    /// finished, not being deleted), in creation order.
    pub group_pending: Vec<PodInfo>,
}

/// Hands every object of `api` matching `params` to `each`, page by page, so that no more than a
/// page of whole objects is held at once (the projections kept are a fraction of their size).
async fn list_each<K>(api: &Api<K>, params: ListParams, mut each: impl FnMut(K)) -> kube::Result<()>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut params = params.limit(PAGE);
    loop {
        let page = api.list(&params).await?;
        page.items.into_iter().for_each(&mut each);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(()),
        }
    }
}

fn api_error(what: &str) -> impl FnOnce(kube::Error) -> ReadError + '_ {
    move |source| ReadError::Api {
        what: what.to_string(),
        source,
    }
}

/// Whether an error is the API server refusing access (401 or 403), which leaves an optional
/// list out instead of stopping the explanation.
fn forbidden(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 401 || s.code == 403)
}

/// Reads the pod `namespace/name` and the cluster it is placed in.
pub async fn read(client: &Client, namespace: &str, name: &str) -> Result<ClusterView, ReadError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let what = format!("reading pod {namespace}/{name}");
    let pod = pods
        .get_opt(name)
        .await
        .map_err(api_error(&what))?
        .ok_or_else(|| ReadError::PodNotFound {
            namespace: namespace.to_string(),
            name: name.to_string(),
        })?;
    let info = pod_info(&pod);
    if info.spec.uid.is_empty() {
        return Err(ReadError::NoUid(info.key()));
    }
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.clone()).unwrap_or_default();
    let nominated_node = status
        .and_then(|s| s.nominated_node_name.clone())
        .filter(|n| !n.is_empty());

    let mut state = ClusterState::new();
    let mut notes = Vec::new();
    list_each(&Api::<Node>::all(client.clone()), ListParams::default(), |n| {
        state.apply_node(node_info(&n))
    })
    .await
    .map_err(api_error("listing nodes"))?;
    let namespaces = list_each(&Api::<Namespace>::all(client.clone()), ListParams::default(), |ns| {
        state.apply_namespace(namespace_info(&ns))
    })
    .await;
    match namespaces {
        Ok(()) => {}
        Err(e) if forbidden(&e) => notes.push(format!(
            "namespaces could not be listed ({e}): pod affinity terms with a namespaceSelector match no namespace"
        )),
        Err(e) => return Err(api_error("listing namespaces")(e)),
    }
    let pdbs = list_each(
        &Api::<PodDisruptionBudget>::all(client.clone()),
        ListParams::default(),
        |p| state.apply_pdb(pdb_info(&p)),
    )
    .await;
    match pdbs {
        Ok(()) => {}
        Err(e) if forbidden(&e) => notes.push(format!(
            "PodDisruptionBudgets could not be listed ({e}): preemption is explained without them"
        )),
        Err(e) => return Err(api_error("listing poddisruptionbudgets")(e)),
    }
    // The objects the volume filters read; a list the caller may not read leaves its kind out.
    let mut storage_list = |what: &'static str, result: kube::Result<()>| match result {
        Ok(()) => Ok(()),
        Err(e) if forbidden(&e) => {
            notes.push(format!(
                "{what} could not be listed ({e}): the volume filters are explained without them"
            ));
            Ok(())
        }
        Err(e) => Err(api_error(&format!("listing {what}"))(e)),
    };
    let all = ListParams::default;
    storage_list(
        "persistentvolumeclaims",
        list_each(&Api::<PersistentVolumeClaim>::all(client.clone()), all(), |c| {
            state.apply_storage(TrackedObject::Claim(claim_info(&c)));
        })
        .await,
    )?;
    storage_list(
        "persistentvolumes",
        list_each(&Api::<PersistentVolume>::all(client.clone()), all(), |v| {
            state.apply_storage(TrackedObject::Volume(volume_info(&v)));
        })
        .await,
    )?;
    storage_list(
        "storageclasses",
        list_each(&Api::<StorageClass>::all(client.clone()), all(), |c| {
            state.apply_storage(TrackedObject::Class(storage_class_info(&c)));
        })
        .await,
    )?;
    storage_list(
        "csinodes",
        list_each(&Api::<CSINode>::all(client.clone()), all(), |n| {
            state.apply_storage(TrackedObject::CsiNode(csi_node_info(&n)));
        })
        .await,
    )?;
    storage_list(
        "csidrivers",
        list_each(&Api::<CSIDriver>::all(client.clone()), all(), |d| {
            state.apply_storage(TrackedObject::CsiDriver(csi_driver_info(&d)));
        })
        .await,
    )?;
    match crate::watch::capacity_resource(client).await {
        Some(resource) => storage_list(
            "csistoragecapacities",
            list_each(&Api::<DynamicObject>::all_with(client.clone(), &resource), all(), |c| {
                state.apply_storage(TrackedObject::Capacity(dynamic_storage_capacity_info(&c)));
            })
            .await,
        )?,
        None => notes.push("the API server serves no CSIStorageCapacity: storage capacity is not checked".into()),
    }
    // The objects DynamicResources reads; a list the caller may not read leaves its kind out.
    if crate::watch::serves_dra(client).await {
        let mut device_list = |what: &'static str, result: kube::Result<()>| match result {
            Ok(()) => Ok(()),
            Err(e) if forbidden(&e) => {
                notes.push(format!(
                    "{what} could not be listed ({e}): DynamicResources is explained without them"
                ));
                Ok(())
            }
            Err(e) => Err(api_error(&format!("listing {what}"))(e)),
        };
        device_list(
            "deviceclasses",
            list_each(&Api::<DeviceClass>::all(client.clone()), all(), |c| {
                state.apply_storage(TrackedObject::DeviceClass(device_class_info(&c)));
            })
            .await,
        )?;
        device_list(
            "resourceclaims",
            list_each(&Api::<ResourceClaim>::all(client.clone()), all(), |c| {
                state.apply_storage(TrackedObject::ResourceClaim(resource_claim_info(&c)));
            })
            .await,
        )?;
        device_list(
            "resourceslices",
            list_each(&Api::<ResourceSlice>::all(client.clone()), all(), |s| {
                state.apply_storage(TrackedObject::ResourceSlice(resource_slice_info(&s)));
            })
            .await,
        )?;
        // Served from Kubernetes 1.37 (resource.k8s.io/v1); before, the slices' taints are all.
        if crate::watch::serves_device_taint_rules(client).await {
            device_list(
                "devicetaintrules",
                list_each(&Api::<DeviceTaintRule>::all(client.clone()), all(), |r| {
                    state.apply_storage(TrackedObject::DeviceTaintRule(device_taint_rule_info(&r)));
                })
                .await,
            )?;
        }
    } else if !info.spec.resource_claims.is_empty() {
        notes.push(
            "the API server serves no resource.k8s.io/v1 (DeviceClasses, ResourceClaims, ResourceSlices): \
             the pod's resource claims cannot exist"
                .into(),
        );
    }
    // PodGroups, as the binder watches them where served (a list of one finds out).
    let mut pod_groups_read = false;
    if crate::watch::serves_pod_groups(client).await {
        match list_each(&Api::<PodGroup>::all(client.clone()), all(), |g| {
            state.apply_storage(TrackedObject::PodGroup(pod_group_info(&g)));
        })
        .await
        {
            Ok(()) => pod_groups_read = true,
            // Only a pod naming a PodGroup is explained differently without them.
            Err(e) if forbidden(&e) => {
                if !info.spec.scheduling_group.is_empty() {
                    notes.push(format!(
                        "podgroups could not be listed ({e}): the pod's PodGroup is explained as missing"
                    ));
                }
            }
            Err(e) => return Err(api_error("listing podgroups")(e)),
        }
    }
    // CompositePodGroups, where served (kube's CompositePodGroup gate): a pod's PodGroup may be
    // part of a hierarchy, decided whole.
    if !info.spec.scheduling_group.is_empty() && crate::watch::serves_composite_pod_groups(client).await {
        if let Err(e) = list_each(
            &Api::<k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup>::all(client.clone()),
            all(),
            |g| {
                state.apply_storage(TrackedObject::CompositePodGroup(
                    crate::projection::composite_pod_group_info(&g),
                ));
            },
        )
        .await
        {
            notes.push(format!(
                "compositepodgroups could not be listed ({e}): the pod's PodGroup is explained on its own"
            ));
        }
    }
    // As the binder: a bound pod that has not finished uses its node (even while it is being
    // deleted); pending pods use nothing. The pending pods of the pod's PodGroup (of every
    // PodGroup of its hierarchy) are kept aside.
    let group = (info.spec.gang.is_none() && !info.spec.scheduling_group.is_empty()).then(|| {
        let names: Vec<String> = state
            .pod_group_tree(&info.spec.namespace, &info.spec.scheduling_group)
            .map(|t| {
                t.groups
                    .iter()
                    .filter_map(|(k, ..)| k.split_once('/').map(|(_, n)| n.to_string()))
                    .collect()
            })
            .unwrap_or_else(|| vec![info.spec.scheduling_group.clone()]);
        (info.spec.namespace.clone(), names)
    });
    let mut group_pending = Vec::new();
    list_each(
        &Api::<Pod>::all(client.clone()),
        ListParams::default().fields(POD_FIELD_SELECTOR),
        |p| {
            let other = pod_info(&p);
            let skip = other.spec.uid == info.spec.uid || other.spec.uid.is_empty() || other.terminal;
            if skip {
                return;
            }
            if other.node_name().is_some() {
                state.apply_bound_pod(other.spec);
            } else if !other.deleting
                && group.as_ref().is_some_and(|(ns, names)| {
                    other.spec.gang.is_none()
                        && other.spec.namespace == *ns
                        && names.contains(&other.spec.scheduling_group)
                })
            {
                group_pending.push(other);
            }
        },
    )
    .await
    .map_err(api_error("listing pods"))?;
    group_pending.sort_by(|a, b| (a.created_ms, &a.spec.name).cmp(&(b.created_ms, &b.spec.name)));
    Ok(ClusterView {
        pod: info,
        phase,
        nominated_node,
        snapshot: state.full(),
        notes,
        pod_groups_read,
        group_pending,
    })
}
