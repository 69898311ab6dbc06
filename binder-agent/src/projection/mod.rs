//! Lean projections of Kubernetes objects: only what placement reads, as `placement.v1` messages.
//!
//! Watchers keep these instead of whole objects, so a 150,000-pod cluster costs a few hundred bytes
//! per pod, and the same conversion feeds the decision service, the simulation and the tests.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Node, Pod, PodAffinityTerm, PodSpec, PodStatus, TopologySpreadConstraint,
    WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
mod devices;
mod podgroups;
mod selectors;
pub use devices::{
    allocation_configs, allocation_info, allocation_out, device_class_info, device_taint_rule_info,
    pod_resource_claims, resource_claim_info, resource_slice_info,
};
pub use placement_scheduler::labels::{ANNOTATION_PREFIX, GANG_LABEL, GANG_MIN_MEMBERS_ANNOTATION};
use placement_scheduler::proto;
pub use podgroups::{
    composite_pod_group_info, initially_scheduled_condition, pod_group_info, pod_group_key,
    POD_GROUP_INITIALLY_SCHEDULED,
};
use selectors::term;

/// The owner a pod's controller reference names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Owner {
    /// ownerReferences[].kind.
    pub kind: String,
    /// ownerReferences[].name.
    pub name: String,
}

/// A pod as the binder tracks it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodInfo {
    /// What the decision service needs (node_name set when bound).
    pub spec: proto::Pod,
    /// spec.schedulerName.
    pub scheduler_name: String,
    /// metadata.creationTimestamp in milliseconds since the epoch (queue order).
    pub created_ms: i64,
    /// status.phase is Succeeded or Failed: the pod no longer uses its node.
    pub terminal: bool,
    /// metadata.deletionTimestamp is set.
    pub deleting: bool,
    /// The controller owner reference (`controller: true`), for experiments' workload units.
    pub owner: Option<Owner>,
    /// metadata.annotations under `placement.dev/` (only those: the rest is not read).
    pub annotations: BTreeMap<String, String>,
    /// The names of spec.schedulingGates: while any is left the pod is not scheduled (an API
    /// server older than 1.26 has no such field, and every pod there is ungated).
    pub scheduling_gates: Vec<String>,
}

impl PodInfo {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.spec.namespace, self.spec.name)
    }

    /// The node the pod is bound to, if any.
    pub fn node_name(&self) -> Option<&str> {
        Some(self.spec.node_name.as_str()).filter(|n| !n.is_empty())
    }

    /// Whether spec.schedulingGates holds any gate (kube-scheduler's `SchedulingGates` PreEnqueue
    /// plugin keeps such a pod out of scheduling).
    pub fn is_gated(&self) -> bool {
        !self.scheduling_gates.is_empty()
    }

    /// kube-scheduler's `SchedulingGates` status message, `waiting for scheduling gates: [a b]`
    /// (Go's `%v` of the names).
    pub fn gated_message(&self) -> String {
        format!("waiting for scheduling gates: [{}]", self.scheduling_gates.join(" "))
    }
}

fn quantities(list: Option<&BTreeMap<String, Quantity>>) -> BTreeMap<String, String> {
    list.map(|m| m.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
        .unwrap_or_default()
}

fn container(c: &Container, status: Option<&PodStatus>) -> proto::Container {
    let st = container_status(status, &c.name);
    proto::Container {
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        requests: quantities(c.resources.as_ref().and_then(|r| r.requests.as_ref())),
        ports: c
            .ports
            .iter()
            .flatten()
            .filter(|p| p.host_port.is_some_and(|h| h > 0))
            .map(|p| proto::ContainerPort {
                container_port: p.container_port,
                host_port: p.host_port.unwrap_or(0),
                protocol: p.protocol.clone().unwrap_or_default(),
                host_ip: p.host_ip.clone().unwrap_or_default(),
            })
            .collect(),
        restart_policy: c.restart_policy.clone().unwrap_or_default(),
        allocated_requests: quantities(st.and_then(|s| s.allocated_resources.as_ref())),
        actuated_requests: quantities(st.and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.as_ref())),
    }
}

/// kube's `findContainerStatus`: the status of the container called `name`, among the regular
/// containers' statuses first, then the init containers'.
fn container_status<'a>(status: Option<&'a PodStatus>, name: &str) -> Option<&'a ContainerStatus> {
    let status = status?;
    status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .find(|s| s.name == name)
}

/// kube's `IsPodResizeInfeasible`: the pod's first `PodResizePending` condition has reason
/// `Infeasible`.
fn resize_infeasible(status: Option<&PodStatus>) -> bool {
    status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodResizePending"))
        .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"))
}

/// The node features the pod needs, sorted: what kube 1.37's
/// `nodedeclaredfeatures.DefaultFramework.InferForPodScheduling` infers from a pod's spec
/// (`k8s.io/component-helpers/nodedeclaredfeatures/features`; the other registered features infer
/// nothing for scheduling).
pub fn required_features(spec: Option<&PodSpec>) -> Vec<String> {
    let Some(spec) = spec else {
        return Vec::new();
    };
    let regular = spec.containers.iter().chain(spec.init_containers.iter().flatten());
    let mut out = Vec::new();
    // restartallcontainers: a container rule that restarts every container.
    if regular.clone().any(|c| {
        c.restart_policy_rules
            .iter()
            .flatten()
            .any(|r| r.action == "RestartAllContainers")
    }) {
        out.push("RestartAllContainersOnContainerExits".to_string());
    }
    // usernamespaceshostnetwork: host network inside a user namespace.
    if spec.host_network == Some(true) && spec.host_users == Some(false) {
        out.push("UserNamespacesHostNetworkSupport".to_string());
    }
    // volumebindmountoptions: a mount with bind options, ephemeral containers included.
    let bind_options = |mounts: Option<&Vec<k8s_openapi::api::core::v1::VolumeMount>>| {
        mounts
            .into_iter()
            .flatten()
            .any(|m| m.bind_mount_options.as_ref().is_some_and(|o| !o.is_empty()))
    };
    if regular.clone().any(|c| bind_options(c.volume_mounts.as_ref()))
        || spec
            .ephemeral_containers
            .iter()
            .flatten()
            .any(|c| bind_options(c.volume_mounts.as_ref()))
    {
        out.push("VolumeBindMountOptions".to_string());
    }
    out.sort();
    out
}

fn label_selector(s: &LabelSelector) -> proto::LabelSelector {
    proto::LabelSelector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        match_expressions: s
            .match_expressions
            .iter()
            .flatten()
            .map(|r| proto::LabelSelectorRequirement {
                key: r.key.clone(),
                operator: r.operator.clone(),
                values: r.values.clone().unwrap_or_default(),
            })
            .collect(),
    }
}

fn affinity_term(t: &PodAffinityTerm) -> proto::PodAffinityTerm {
    proto::PodAffinityTerm {
        label_selector: t.label_selector.as_ref().map(label_selector),
        namespaces: t.namespaces.clone().unwrap_or_default(),
        topology_key: t.topology_key.clone(),
        namespace_selector: t.namespace_selector.as_ref().map(label_selector),
    }
}

fn pod_affinity(
    required: Option<&Vec<PodAffinityTerm>>,
    preferred: Option<&Vec<WeightedPodAffinityTerm>>,
) -> proto::PodAffinity {
    proto::PodAffinity {
        required: required.into_iter().flatten().map(affinity_term).collect(),
        preferred: preferred
            .into_iter()
            .flatten()
            .map(|w| proto::WeightedPodAffinityTerm {
                weight: w.weight,
                term: Some(affinity_term(&w.pod_affinity_term)),
            })
            .collect(),
    }
}

fn spread_constraint(c: &TopologySpreadConstraint) -> proto::TopologySpreadConstraint {
    proto::TopologySpreadConstraint {
        max_skew: c.max_skew,
        topology_key: c.topology_key.clone(),
        when_unsatisfiable: c.when_unsatisfiable.clone(),
        label_selector: c.label_selector.as_ref().map(label_selector),
        min_domains: c.min_domains,
        node_affinity_policy: c.node_affinity_policy.clone().unwrap_or_default(),
        node_taints_policy: c.node_taints_policy.clone().unwrap_or_default(),
        match_label_keys: c.match_label_keys.clone().unwrap_or_default(),
    }
}

/// Labels a controller sets per pod, not shared by the pods of one workload.
const PER_POD_LABELS: &[&str] = &[
    "statefulset.kubernetes.io/pod-name",
    "apps.kubernetes.io/pod-index",
    "controller-revision-hash",
];

/// The selector of kube-scheduler's default spreading for a pod whose controller is a
/// ReplicaSet, StatefulSet or ReplicationController (`helper.DefaultSelector` takes those
/// controllers' selectors, and Services'). The binder does not watch those objects, so it uses the
/// pod's own labels without the per-pod ones: the labels every pod of the workload shares, which
/// the controller's selector is a subset of. Services are not considered.
fn default_spread_selector(pod: &Pod) -> Option<proto::LabelSelector> {
    let owned = pod.metadata.owner_references.iter().flatten().any(|o| {
        o.controller == Some(true) && matches!(o.kind.as_str(), "ReplicaSet" | "StatefulSet" | "ReplicationController")
    });
    let labels: BTreeMap<String, String> = pod
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| !PER_POD_LABELS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (owned && !labels.is_empty()).then_some(proto::LabelSelector {
        match_labels: labels,
        match_expressions: vec![],
    })
}

fn millis(t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> i64 {
    t.map(|t| t.0.as_millisecond()).unwrap_or(0)
}

/// The pod's gang: the label [`GANG_LABEL`] names it, the annotation
/// [`GANG_MIN_MEMBERS_ANNOTATION`] gives its minimum size. A missing or malformed minimum is kept as
/// 0, which [`gang_problem`] reports instead of asking the decision service.
fn gang(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<proto::Gang> {
    let name = meta.labels.as_ref()?.get(GANG_LABEL)?;
    let min_members = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(GANG_MIN_MEMBERS_ANNOTATION))
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(0);
    Some(proto::Gang {
        name: name.clone(),
        min_members,
    })
}

/// Why a pod's gang declaration is unusable, in words for its `FailedScheduling` event.
pub fn gang_problem(pod: &proto::Pod) -> Option<String> {
    let g = pod.gang.as_ref()?;
    if g.name.is_empty() {
        return Some(format!("label {GANG_LABEL} must name the gang, it is empty"));
    }
    (g.min_members == 0).then(|| {
        format!("annotation {GANG_MIN_MEMBERS_ANNOTATION} must be a positive integer (the gang {:?} declares a label {GANG_LABEL})", g.name)
    })
}

/// The annotations a pending pod carries for the decision service's CEL rules
/// (`pod.metadata.annotations`): none for a bound pod (rules read the pod being placed only), and
/// never `kubectl.kubernetes.io/last-applied-configuration`, a copy of the whole object.
fn rule_annotations(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
    node_name: Option<&str>,
) -> std::collections::BTreeMap<String, String> {
    if node_name.is_some_and(|n| !n.is_empty()) {
        return Default::default();
    }
    annotations
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.as_str() != "kubectl.kubernetes.io/last-applied-configuration")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Projects a Pod.
pub fn pod_info(pod: &Pod) -> PodInfo {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let affinity = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref());
    let pod_aff = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_affinity.as_ref());
    let pod_anti = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_anti_affinity.as_ref());
    let spread: Vec<proto::TopologySpreadConstraint> = spec
        .and_then(|s| s.topology_spread_constraints.as_ref())
        .map(|cs| cs.iter().map(spread_constraint).collect())
        .unwrap_or_default();
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref());
    PodInfo {
        spec: proto::Pod {
            uid: meta.uid.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: rule_annotations(meta.annotations.as_ref(), spec.and_then(|s| s.node_name.as_deref())),
            priority: spec.and_then(|s| s.priority).unwrap_or(0),
            containers: spec
                .map(|s| s.containers.iter().map(|c| container(c, status)).collect())
                .unwrap_or_default(),
            init_containers: spec
                .and_then(|s| s.init_containers.as_ref())
                .map(|cs| cs.iter().map(|c| container(c, status)).collect())
                .unwrap_or_default(),
            overhead: quantities(spec.and_then(|s| s.overhead.as_ref())),
            node_name: spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
            node_selector: spec.and_then(|s| s.node_selector.clone()).unwrap_or_default(),
            node_affinity: affinity.map(|a| proto::NodeAffinity {
                required: a
                    .required_during_scheduling_ignored_during_execution
                    .as_ref()
                    .map(|r| proto::NodeSelector {
                        terms: r.node_selector_terms.iter().map(term).collect(),
                    }),
                preferred: a
                    .preferred_during_scheduling_ignored_during_execution
                    .iter()
                    .flatten()
                    .map(|p| proto::PreferredSchedulingTerm {
                        weight: p.weight,
                        preference: Some(term(&p.preference)),
                    })
                    .collect(),
            }),
            tolerations: spec
                .and_then(|s| s.tolerations.as_ref())
                .map(|ts| {
                    ts.iter()
                        .map(|t| proto::Toleration {
                            key: t.key.clone().unwrap_or_default(),
                            operator: t.operator.clone().unwrap_or_default(),
                            value: t.value.clone().unwrap_or_default(),
                            effect: t.effect.clone().unwrap_or_default(),
                            toleration_seconds: t.toleration_seconds,
                        })
                        .collect()
                })
                .unwrap_or_default(),
            pod_affinity: pod_aff.map(|a| {
                pod_affinity(
                    a.required_during_scheduling_ignored_during_execution.as_ref(),
                    a.preferred_during_scheduling_ignored_during_execution.as_ref(),
                )
            }),
            pod_anti_affinity: pod_anti.map(|a| {
                pod_affinity(
                    a.required_during_scheduling_ignored_during_execution.as_ref(),
                    a.preferred_during_scheduling_ignored_during_execution.as_ref(),
                )
            }),
            default_spread_selector: if spread.is_empty() {
                default_spread_selector(pod)
            } else {
                None
            },
            topology_spread_constraints: spread,
            preemption_policy: spec.and_then(|s| s.preemption_policy.clone()).unwrap_or_default(),
            start_time_seconds: pod
                .status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .map_or(0, |t| t.0.as_second()),
            gang: gang(meta),
            terminating: meta.deletion_timestamp.is_some(),
            volumes: pod_volumes(pod),
            pod_requests: quantities(
                spec.and_then(|s| s.resources.as_ref())
                    .and_then(|r| r.requests.as_ref()),
            ),
            allocated_requests: quantities(status.and_then(|s| s.allocated_resources.as_ref())),
            actuated_requests: quantities(
                status
                    .and_then(|s| s.resources.as_ref())
                    .and_then(|r| r.requests.as_ref()),
            ),
            resize_infeasible: resize_infeasible(status),
            resource_claims: devices::pod_resource_claims(pod),
            scheduling_group: spec
                .and_then(|s| s.scheduling_group.as_ref())
                .and_then(|g| g.pod_group_name.clone())
                .unwrap_or_default(),
            required_features: required_features(spec),
        },
        scheduler_name: spec
            .and_then(|s| s.scheduler_name.clone())
            .unwrap_or_else(|| "default-scheduler".to_string()),
        created_ms: millis(meta.creation_timestamp.as_ref()),
        terminal: matches!(phase, Some("Succeeded" | "Failed")),
        deleting: meta.deletion_timestamp.is_some(),
        owner: meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| Owner {
                kind: o.kind.clone(),
                name: o.name.clone(),
            }),
        annotations: meta
            .annotations
            .iter()
            .flatten()
            .filter(|(k, _)| k.starts_with(ANNOTATION_PREFIX))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        scheduling_gates: spec
            .and_then(|s| s.scheduling_gates.as_ref())
            .map(|gates| gates.iter().map(|g| g.name.clone()).collect())
            .unwrap_or_default(),
    }
}

/// Projects a Namespace: its name and labels.
pub fn namespace_info(ns: &k8s_openapi::api::core::v1::Namespace) -> proto::Namespace {
    proto::Namespace {
        name: ns.metadata.name.clone().unwrap_or_default(),
        labels: ns.metadata.labels.clone().unwrap_or_default(),
    }
}

/// A PodDisruptionBudget as the binder tracks it: the message preemption reads (its
/// `disrupted_pod_uids` still empty) and the names in status.disruptedPods, which the binder's
/// state resolves to uids against the pods it knows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PdbInfo {
    /// namespace, name, selector and disruptionsAllowed.
    pub pdb: proto::PodDisruptionBudget,
    /// The keys of status.disruptedPods (pod names), sorted.
    pub disrupted_pods: Vec<String>,
}

impl PdbInfo {
    /// `namespace/name`, the key deltas remove budgets by.
    pub fn key(&self) -> String {
        pdb_key(&self.pdb.namespace, &self.pdb.name)
    }
}

/// `namespace/name` of a PodDisruptionBudget.
pub fn pdb_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// Projects a policy/v1 PodDisruptionBudget: spec.selector, status.disruptionsAllowed and the names
/// in status.disruptedPods. A budget without status yet allows no disruption, as the API server's
/// eviction check treats it.
pub fn pdb_info(pdb: &k8s_openapi::api::policy::v1::PodDisruptionBudget) -> PdbInfo {
    let status = pdb.status.as_ref();
    PdbInfo {
        pdb: proto::PodDisruptionBudget {
            namespace: pdb.metadata.namespace.clone().unwrap_or_default(),
            name: pdb.metadata.name.clone().unwrap_or_default(),
            selector: pdb.spec.as_ref().and_then(|s| s.selector.as_ref()).map(label_selector),
            disruptions_allowed: status.and_then(|s| s.disruptions_allowed).unwrap_or(0),
            disrupted_pod_uids: Vec::new(),
        },
        disrupted_pods: status
            .and_then(|s| s.disrupted_pods.as_ref())
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default(),
    }
}

/// The annotation that names a claim's or a volume's class before `storageClassName` (still read
/// first by Kubernetes' `GetPersistentVolumeClaimClass` and `GetPersistentVolumeClass`).
pub const ANN_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// The PV controller's mark of a claim whose binding it completed.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// The node the scheduler chose to provision a WaitForFirstConsumer claim's volume on.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// The volumes of a pod the volume filters read: claims (a generic ephemeral volume's is named
/// `<pod>-<volume>`, as `ephemeral.VolumeClaimName`), and the in-tree GCE PD, AWS EBS, iSCSI and
/// RBD volumes VolumeRestrictions compares. Other kinds are left out.
fn pod_volumes(pod: &Pod) -> Vec<proto::Volume> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let Some(volumes) = pod.spec.as_ref().and_then(|s| s.volumes.as_ref()) else {
        return Vec::new();
    };
    volumes
        .iter()
        .filter_map(|v| {
            let mut out = proto::Volume {
                name: v.name.clone(),
                ..Default::default()
            };
            if let Some(c) = &v.persistent_volume_claim {
                out.claim_name = c.claim_name.clone();
            } else if v.ephemeral.is_some() {
                out.claim_name = format!("{pod_name}-{}", v.name);
                out.ephemeral = true;
            } else if let Some(d) = &v.gce_persistent_disk {
                out.gce_pd_name = d.pd_name.clone();
                out.read_only = d.read_only.unwrap_or(false);
            } else if let Some(d) = &v.aws_elastic_block_store {
                out.aws_volume_id = d.volume_id.clone();
            } else if let Some(d) = &v.iscsi {
                out.iscsi_iqn = d.iqn.clone();
                out.read_only = d.read_only.unwrap_or(false);
            } else if let Some(d) = &v.rbd {
                out.rbd_monitors = d.monitors.clone();
                out.rbd_pool = d.pool.clone().unwrap_or_else(|| "rbd".to_string());
                out.rbd_image = d.image.clone();
                out.read_only = d.read_only.unwrap_or(false);
            } else if let Some(reference) = v
                .image
                .as_ref()
                .and_then(|i| i.reference.as_ref())
                .filter(|r| !r.is_empty())
            {
                // An image volume, for ImageLocality (one without a reference is left out).
                out.image_reference = reference.clone();
            } else {
                return None;
            }
            Some(out)
        })
        .collect()
}

fn class_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, spec_class: Option<&String>) -> String {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(ANN_STORAGE_CLASS))
        .or(spec_class)
        .cloned()
        .unwrap_or_default()
}

fn annotation(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, key: &str) -> Option<String> {
    meta.annotations.as_ref().and_then(|a| a.get(key)).cloned()
}

/// Projects a PersistentVolumeClaim.
pub fn claim_info(pvc: &k8s_openapi::api::core::v1::PersistentVolumeClaim) -> proto::PersistentVolumeClaim {
    let meta = &pvc.metadata;
    let spec = pvc.spec.as_ref();
    proto::PersistentVolumeClaim {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        storage_class_name: class_of(meta, spec.and_then(|s| s.storage_class_name.as_ref())),
        volume_name: spec.and_then(|s| s.volume_name.clone()).unwrap_or_default(),
        bind_completed: annotation(meta, ANN_BIND_COMPLETED).is_some(),
        access_modes: spec.and_then(|s| s.access_modes.clone()).unwrap_or_default(),
        storage_request: spec
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map(|q| q.0.clone())
            .unwrap_or_default(),
        selector: spec.and_then(|s| s.selector.as_ref()).map(label_selector),
        volume_mode: spec.and_then(|s| s.volume_mode.clone()).unwrap_or_default(),
        phase: pvc.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default(),
        deleting: meta.deletion_timestamp.is_some(),
        selected_node: annotation(meta, ANN_SELECTED_NODE).unwrap_or_default(),
        selected_node_set: annotation(meta, ANN_SELECTED_NODE).is_some(),
        volume_attributes_class_name: spec
            .and_then(|s| s.volume_attributes_class_name.clone())
            .unwrap_or_default(),
        controller_uid: meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| o.uid.clone())
            .unwrap_or_default(),
    }
}

/// Projects a PersistentVolume.
pub fn volume_info(pv: &k8s_openapi::api::core::v1::PersistentVolume) -> proto::PersistentVolume {
    let meta = &pv.metadata;
    let spec = pv.spec.as_ref();
    let csi = spec.and_then(|s| s.csi.as_ref());
    proto::PersistentVolume {
        name: meta.name.clone().unwrap_or_default(),
        labels: meta.labels.clone().unwrap_or_default(),
        storage_class_name: class_of(meta, spec.and_then(|s| s.storage_class_name.as_ref())),
        capacity: spec
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("storage"))
            .map(|q| q.0.clone())
            .unwrap_or_default(),
        access_modes: spec.and_then(|s| s.access_modes.clone()).unwrap_or_default(),
        volume_mode: spec.and_then(|s| s.volume_mode.clone()).unwrap_or_default(),
        node_affinity: spec
            .and_then(|s| s.node_affinity.as_ref())
            .and_then(|a| a.required.as_ref())
            .map(|r| proto::NodeSelector {
                terms: r.node_selector_terms.iter().map(term).collect(),
            }),
        claim_ref: spec.and_then(|s| s.claim_ref.as_ref()).map(|r| proto::VolumeClaimRef {
            namespace: r.namespace.clone().unwrap_or_default(),
            name: r.name.clone().unwrap_or_default(),
            uid: r.uid.clone().unwrap_or_default(),
        }),
        phase: pv.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default(),
        deleting: meta.deletion_timestamp.is_some(),
        csi_driver: csi.map(|c| c.driver.clone()).unwrap_or_default(),
        csi_volume_handle: csi.map(|c| c.volume_handle.clone()).unwrap_or_default(),
        volume_attributes_class_name: spec
            .and_then(|s| s.volume_attributes_class_name.clone())
            .unwrap_or_default(),
    }
}

/// Projects a StorageClass.
pub fn storage_class_info(sc: &k8s_openapi::api::storage::v1::StorageClass) -> proto::StorageClass {
    proto::StorageClass {
        name: sc.metadata.name.clone().unwrap_or_default(),
        provisioner: sc.provisioner.clone(),
        volume_binding_mode: sc.volume_binding_mode.clone().unwrap_or_default(),
        allowed_topologies: sc
            .allowed_topologies
            .iter()
            .flatten()
            .map(|t| proto::TopologySelectorTerm {
                match_label_expressions: t
                    .match_label_expressions
                    .iter()
                    .flatten()
                    .map(|r| proto::TopologySelectorRequirement {
                        key: r.key.clone(),
                        values: r.values.clone(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// Projects a CSINode: each driver's attach limit.
pub fn csi_node_info(n: &k8s_openapi::api::storage::v1::CSINode) -> proto::CsiNode {
    proto::CsiNode {
        name: n.metadata.name.clone().unwrap_or_default(),
        drivers: n
            .spec
            .drivers
            .iter()
            .map(|d| proto::CsiNodeDriver {
                name: d.name.clone(),
                allocatable_count: d.allocatable.as_ref().and_then(|a| a.count),
            })
            .collect(),
    }
}

/// Projects a CSIDriver: whether it asks for storage capacity tracking.
pub fn csi_driver_info(d: &k8s_openapi::api::storage::v1::CSIDriver) -> proto::CsiDriver {
    proto::CsiDriver {
        name: d.metadata.name.clone().unwrap_or_default(),
        storage_capacity: d.spec.storage_capacity.unwrap_or(false),
        prevent_pod_scheduling_if_missing: d.spec.prevent_pod_scheduling_if_missing.unwrap_or(false),
    }
}

/// Projects a CSIStorageCapacity.
pub fn storage_capacity_info(c: &k8s_openapi::api::storage::v1::CSIStorageCapacity) -> proto::CsiStorageCapacity {
    proto::CsiStorageCapacity {
        namespace: c.metadata.namespace.clone().unwrap_or_default(),
        name: c.metadata.name.clone().unwrap_or_default(),
        storage_class_name: c.storage_class_name.clone(),
        node_topology: c.node_topology.as_ref().map(label_selector),
        capacity: c.capacity.as_ref().map(|q| q.0.clone()).unwrap_or_default(),
        maximum_volume_size: c.maximum_volume_size.as_ref().map(|q| q.0.clone()).unwrap_or_default(),
    }
}

/// Projects a CSIStorageCapacity read as a dynamic object (storage.k8s.io/v1 or v1beta1, whose
/// fields are the same).
pub fn dynamic_storage_capacity_info(o: &kube::api::DynamicObject) -> proto::CsiStorageCapacity {
    let field = |name: &str| o.data.get(name).cloned().unwrap_or(serde_json::Value::Null);
    let capacity = k8s_openapi::api::storage::v1::CSIStorageCapacity {
        metadata: o.metadata.clone(),
        storage_class_name: field("storageClassName").as_str().unwrap_or_default().to_string(),
        capacity: serde_json::from_value(field("capacity")).ok().flatten(),
        maximum_volume_size: serde_json::from_value(field("maximumVolumeSize")).ok().flatten(),
        node_topology: serde_json::from_value(field("nodeTopology")).ok().flatten(),
    };
    storage_capacity_info(&capacity)
}

/// A keyed object besides nodes, pods, namespaces and budgets as the binder tracks it: the
/// storage objects the volume filters read, the DRA objects and PodGroups.
#[derive(Debug, Clone, PartialEq)]
pub enum StorageObject {
    /// A PersistentVolumeClaim.
    Claim(proto::PersistentVolumeClaim),
    /// A PersistentVolume.
    Volume(proto::PersistentVolume),
    /// A StorageClass.
    Class(proto::StorageClass),
    /// A CSINode.
    CsiNode(proto::CsiNode),
    /// A CSIDriver.
    CsiDriver(proto::CsiDriver),
    /// A CSIStorageCapacity.
    Capacity(proto::CsiStorageCapacity),
    /// A DeviceClass.
    DeviceClass(proto::DeviceClass),
    /// A ResourceClaim.
    ResourceClaim(proto::ResourceClaim),
    /// A ResourceSlice.
    ResourceSlice(proto::ResourceSlice),
    /// A DeviceTaintRule.
    DeviceTaintRule(proto::DeviceTaintRule),
    /// A PodGroup (scheduling.k8s.io/v1beta1).
    PodGroup(proto::PodGroup),
    /// A CompositePodGroup (scheduling.k8s.io/v1alpha3).
    CompositePodGroup(proto::CompositePodGroup),
}

/// The identity of a storage object: a namespaced object (claim, capacity, ResourceClaim,
/// PodGroup) by `namespace/name`, the others by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StorageKey {
    /// A PersistentVolumeClaim, `namespace/name`.
    Claim(String),
    /// A PersistentVolume.
    Volume(String),
    /// A StorageClass.
    Class(String),
    /// A CSINode.
    CsiNode(String),
    /// A CSIDriver.
    CsiDriver(String),
    /// A CSIStorageCapacity, `namespace/name`.
    Capacity(String),
    /// A DeviceClass.
    DeviceClass(String),
    /// A ResourceClaim, `namespace/name`.
    ResourceClaim(String),
    /// A ResourceSlice.
    ResourceSlice(String),
    /// A DeviceTaintRule.
    DeviceTaintRule(String),
    /// A PodGroup, `namespace/name`.
    PodGroup(String),
    /// A CompositePodGroup, `namespace/name`.
    CompositePodGroup(String),
}

impl StorageObject {
    /// Adds it to the list of its kind in `snapshot`, as a full snapshot carries it.
    pub fn push_into(self, snapshot: &mut proto::Snapshot) {
        match self {
            Self::Claim(c) => snapshot.persistent_volume_claims.push(c),
            Self::Volume(v) => snapshot.persistent_volumes.push(v),
            Self::Class(c) => snapshot.storage_classes.push(c),
            Self::CsiNode(n) => snapshot.csi_nodes.push(n),
            Self::CsiDriver(d) => snapshot.csi_drivers.push(d),
            Self::Capacity(c) => snapshot.csi_storage_capacities.push(c),
            Self::DeviceClass(c) => snapshot.device_classes.push(c),
            Self::ResourceClaim(c) => snapshot.resource_claims.push(c),
            Self::ResourceSlice(s) => snapshot.resource_slices.push(s),
            Self::DeviceTaintRule(r) => snapshot.device_taint_rules.push(r),
            Self::PodGroup(g) => snapshot.pod_groups.push(g),
            Self::CompositePodGroup(g) => snapshot.composite_pod_groups.push(g),
        }
    }

    /// Its identity.
    pub fn key(&self) -> StorageKey {
        match self {
            Self::Claim(c) => StorageKey::Claim(format!("{}/{}", c.namespace, c.name)),
            Self::Volume(v) => StorageKey::Volume(v.name.clone()),
            Self::Class(c) => StorageKey::Class(c.name.clone()),
            Self::CsiNode(n) => StorageKey::CsiNode(n.name.clone()),
            Self::CsiDriver(d) => StorageKey::CsiDriver(d.name.clone()),
            Self::Capacity(c) => StorageKey::Capacity(format!("{}/{}", c.namespace, c.name)),
            Self::DeviceClass(c) => StorageKey::DeviceClass(c.name.clone()),
            Self::ResourceClaim(c) => StorageKey::ResourceClaim(format!("{}/{}", c.namespace, c.name)),
            Self::ResourceSlice(s) => StorageKey::ResourceSlice(s.name.clone()),
            Self::DeviceTaintRule(r) => StorageKey::DeviceTaintRule(r.name.clone()),
            Self::PodGroup(g) => StorageKey::PodGroup(pod_group_key(&g.namespace, &g.name)),
            Self::CompositePodGroup(g) => StorageKey::CompositePodGroup(pod_group_key(&g.namespace, &g.name)),
        }
    }
}

/// Projects a Node.
pub fn node_info(node: &Node) -> proto::Node {
    let spec = node.spec.as_ref();
    let status = node.status.as_ref();
    proto::Node {
        name: node.metadata.name.clone().unwrap_or_default(),
        labels: node.metadata.labels.clone().unwrap_or_default(),
        taints: spec
            .and_then(|s| s.taints.as_ref())
            .map(|ts| {
                ts.iter()
                    .map(|t| proto::Taint {
                        key: t.key.clone(),
                        value: t.value.clone().unwrap_or_default(),
                        effect: t.effect.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        allocatable: quantities(status.and_then(|s| s.allocatable.as_ref())),
        images: status
            .and_then(|s| s.images.as_ref())
            .map(|imgs| {
                imgs.iter()
                    .map(|i| proto::ContainerImage {
                        names: i.names.clone().unwrap_or_default(),
                        size_bytes: i.size_bytes.unwrap_or(0),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        declared_features: status.and_then(|s| s.declared_features.clone()).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The node features a pod needs, as kube 1.37's `InferForPodScheduling`: one per rule, sorted;
    /// nothing for a pod that uses none (host network alone, `hostUsers: true`, empty options).
    #[test]
    fn required_features_are_inferred_as_kube_infers_them() {
        let infer = |spec: serde_json::Value| {
            let mut spec = spec;
            spec["containers"]
                .as_array()
                .is_none()
                .then(|| spec["containers"] = serde_json::json!([{"name": "c"}]));
            let spec: PodSpec = serde_json::from_value(spec).unwrap();
            required_features(Some(&spec))
        };
        assert!(infer(serde_json::json!({})).is_empty());
        assert!(infer(serde_json::json!({"hostNetwork": true})).is_empty());
        assert!(infer(serde_json::json!({"hostNetwork": true, "hostUsers": true})).is_empty());
        assert_eq!(
            infer(serde_json::json!({"hostNetwork": true, "hostUsers": false})),
            ["UserNamespacesHostNetworkSupport"]
        );
        assert!(infer(serde_json::json!({"hostNetwork": false, "hostUsers": false})).is_empty());
        let restart =
            serde_json::json!([{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [1]}}]);
        assert_eq!(
            infer(serde_json::json!({"initContainers": [{"name": "i", "restartPolicyRules": restart}]})),
            ["RestartAllContainersOnContainerExits"]
        );
        let only_restart = serde_json::json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [1]}}]);
        assert!(
            infer(serde_json::json!({"containers": [{"name": "c", "restartPolicyRules": only_restart}]})).is_empty()
        );
        assert!(infer(serde_json::json!({"containers": [{"name": "c", "volumeMounts": [
            {"name": "v", "mountPath": "/v", "bindMountOptions": []}]}]}))
        .is_empty());
        assert_eq!(
            infer(serde_json::json!({
                "hostNetwork": true, "hostUsers": false,
                "containers": [{"name": "c", "restartPolicyRules": restart}],
                "ephemeralContainers": [{"name": "e", "volumeMounts": [
                    {"name": "v", "mountPath": "/v", "bindMountOptions": ["nosuid"]}]}]
            })),
            [
                "RestartAllContainersOnContainerExits",
                "UserNamespacesHostNetworkSupport",
                "VolumeBindMountOptions"
            ]
        );
    }

    /// A resize's status as kube's PodRequests reads it: each container's status by name
    /// (regular containers' statuses first, then init containers'), the pod's own, and whether the
    /// first PodResizePending condition says Infeasible.
    #[test]
    fn resize_status_and_pod_level_requests_are_projected() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {
                "nodeName": "n",
                "resources": {"requests": {"cpu": "2"}},
                "initContainers": [{"name": "side", "restartPolicy": "Always"}],
                "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
                "volumes": [{"name": "m", "image": {"reference": "ghcr.io/x/model:1"}}, {"name": "e", "emptyDir": {}}]
            },
            "status": {
                "allocatedResources": {"cpu": "3"},
                "resources": {"requests": {"cpu": "3500m"}},
                "conditions": [
                    {"type": "PodResizePending", "status": "True", "reason": "Infeasible"},
                    {"type": "PodResizePending", "status": "True", "reason": "Deferred"}
                ],
                "containerStatuses": [
                    {"name": "side", "image": "", "imageID": "", "ready": true, "restartCount": 0,
                     "allocatedResources": {"cpu": "100m"}},
                    {"name": "main", "image": "", "imageID": "", "ready": true, "restartCount": 0,
                     "allocatedResources": {"cpu": "1500m"}, "resources": {"requests": {"cpu": "1200m"}}}
                ]
            }
        }))
        .unwrap();
        let p = pod_info(&pod).spec;
        let q = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        assert_eq!(p.pod_requests, q(&[("cpu", "2")]));
        assert_eq!(p.allocated_requests, q(&[("cpu", "3")]));
        assert_eq!(p.actuated_requests, q(&[("cpu", "3500m")]));
        assert!(p.resize_infeasible);
        assert_eq!(p.containers[0].allocated_requests, q(&[("cpu", "1500m")]));
        assert_eq!(p.containers[0].actuated_requests, q(&[("cpu", "1200m")]));
        assert_eq!(p.init_containers[0].allocated_requests, q(&[("cpu", "100m")]));
        assert!(p.init_containers[0].actuated_requests.is_empty());
        assert_eq!(
            p.volumes
                .iter()
                .map(|v| (v.name.as_str(), v.image_reference.as_str()))
                .collect::<Vec<_>>(),
            [("m", "ghcr.io/x/model:1")]
        );
    }

    #[test]
    fn pod_projection_keeps_what_placement_reads() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1", "labels": {"app": "web"},
                          "creationTimestamp": "2026-01-02T03:04:05Z",
                          "annotations": {"placement.dev/pin-arm": "candidate", "other.io/x": "y"},
                          "ownerReferences": [
                              {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "c"},
                              {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8", "uid": "r", "controller": true}]},
            "spec": {
                "schedulerName": "placement-scheduler",
                "priority": 10,
                "nodeSelector": {"disk": "ssd"},
                "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}},
                                "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}]}],
                "initContainers": [{"name": "sidecar", "image": "envoy", "restartPolicy": "Always",
                                    "resources": {"requests": {"cpu": "100m"}}}],
                "overhead": {"cpu": "10m"},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
                "affinity": {"nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 5, "preference": {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["3"]}]}}]
                }}
            },
            "status": {"phase": "Pending"}
        }))
        .unwrap();
        let info = pod_info(&pod);
        assert_eq!(info.scheduler_name, "placement-scheduler");
        assert_eq!(info.key(), "shop/web-1");
        assert_eq!(info.created_ms, 1_767_323_045_000);
        assert!(!info.terminal && !info.deleting);
        assert_eq!(
            info.owner,
            Some(Owner {
                kind: "ReplicaSet".into(),
                name: "web-5d8".into()
            })
        );
        assert_eq!(
            info.annotations.keys().collect::<Vec<_>>(),
            ["placement.dev/pin-arm"],
            "only our annotations are kept"
        );
        let s = &info.spec;
        assert_eq!((s.uid.as_str(), s.priority), ("u-1", 10));
        assert_eq!(s.containers[0].requests["cpu"], "250m");
        assert_eq!(s.containers[0].ports.len(), 1, "only host ports matter");
        assert_eq!(s.init_containers[0].restart_policy, "Always");
        assert_eq!(s.overhead["cpu"], "10m");
        assert_eq!(s.tolerations[0].effect, "NoSchedule");
        let a = s.node_affinity.as_ref().unwrap();
        assert_eq!(a.required.as_ref().unwrap().terms[0].match_expressions[0].values, ["a"]);
        assert_eq!(a.preferred[0].weight, 5);
    }

    #[test]
    fn scheduling_gates_are_read_and_absent_on_an_older_api_server() {
        let gated: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "g", "namespace": "shop", "uid": "u-g"},
            "spec": {"containers": [{"name": "c"}],
                     "schedulingGates": [{"name": "example.com/quota"}, {"name": "example.com/data"}]}
        }))
        .unwrap();
        let info = pod_info(&gated);
        assert!(info.is_gated());
        assert_eq!(info.scheduling_gates, ["example.com/quota", "example.com/data"]);
        assert_eq!(
            info.gated_message(),
            "waiting for scheduling gates: [example.com/quota example.com/data]"
        );
        // A 1.24 API server neither stores nor returns the field; an emptied list is ungated too.
        for spec in [
            serde_json::json!({"containers": [{"name": "c"}]}),
            serde_json::json!({"containers": [{"name": "c"}], "schedulingGates": []}),
        ] {
            let pod: Pod =
                serde_json::from_value(serde_json::json!({"metadata": {"name": "p", "uid": "u"}, "spec": spec}))
                    .unwrap();
            assert!(!pod_info(&pod).is_gated());
        }
    }

    #[test]
    fn pod_affinity_and_spread_constraints_are_projected() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1",
                          "labels": {"app": "web", "pod-template-hash": "abc"}},
            "spec": {
                "containers": [{"name": "c"}],
                "affinity": {
                    "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 7, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "cache"}},
                                                          "topologyKey": "topology.kubernetes.io/zone"}}]},
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
                         "namespaces": ["shop"], "namespaceSelector": {"matchLabels": {"tier": "web"}},
                         "topologyKey": "kubernetes.io/hostname"}]}
                },
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}},
                    "minDomains": 3, "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor",
                    "matchLabelKeys": ["pod-template-hash"]}]
            }
        }))
        .unwrap();
        let s = pod_info(&pod).spec;
        let aff = s.pod_affinity.as_ref().unwrap();
        assert_eq!(aff.preferred[0].weight, 7);
        let t = aff.preferred[0].term.as_ref().unwrap();
        assert_eq!(t.label_selector.as_ref().unwrap().match_labels["app"], "cache");
        assert_eq!(t.topology_key, "topology.kubernetes.io/zone");
        let anti = &s.pod_anti_affinity.as_ref().unwrap().required[0];
        assert_eq!(
            anti.label_selector.as_ref().unwrap().match_expressions[0].values,
            ["web"]
        );
        assert_eq!(anti.namespaces, ["shop"]);
        assert_eq!(anti.namespace_selector.as_ref().unwrap().match_labels["tier"], "web");
        let c = &s.topology_spread_constraints[0];
        assert_eq!((c.max_skew, c.min_domains), (1, Some(3)));
        assert_eq!(
            (c.node_affinity_policy.as_str(), c.node_taints_policy.as_str()),
            ("Ignore", "Honor")
        );
        assert_eq!(c.match_label_keys, ["pod-template-hash"]);
        assert!(
            s.default_spread_selector.is_none(),
            "explicit constraints replace the defaults"
        );
        // The result is valid input for the decision service.
        placement_scheduler::grpc::convert::pod("pod", &s).unwrap();
    }

    #[test]
    fn controller_owned_pods_get_a_default_spread_selector_without_per_pod_labels() {
        let pod = |kind: &str| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "db-0", "namespace": "shop", "uid": "u-1",
                             "labels": {"app": "db", "statefulset.kubernetes.io/pod-name": "db-0",
                                        "apps.kubernetes.io/pod-index": "0", "controller-revision-hash": "db-5d"},
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": "db",
                                                  "uid": "o-1", "controller": true}]},
                "spec": {"containers": [{"name": "c"}]}
            }))
            .unwrap()
        };
        let sel = pod_info(&pod("StatefulSet")).spec.default_spread_selector.unwrap();
        assert_eq!(
            sel.match_labels,
            BTreeMap::from([("app".to_string(), "db".to_string())])
        );
        assert!(pod_info(&pod("ReplicaSet")).spec.default_spread_selector.is_some());
        assert!(
            pod_info(&pod("Job")).spec.default_spread_selector.is_none(),
            "kube-scheduler's default spreading covers Services, RCs, RSs and StatefulSets only"
        );
    }

    #[test]
    fn namespace_projection_keeps_its_labels() {
        let ns: k8s_openapi::api::core::v1::Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "shop", "labels": {"tier": "web"}}}))
                .unwrap();
        let n = namespace_info(&ns);
        assert_eq!((n.name.as_str(), n.labels["tier"].as_str()), ("shop", "web"));
    }

    #[test]
    fn pdb_projection_keeps_selector_budget_and_disrupted_names() {
        let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "db", "namespace": "shop"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"},
                     "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}},
            "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3,
                       "disruptedPods": {"db-1": "2026-11-21T10:00:00Z", "db-0": "2026-11-21T10:00:01Z"}}
        }))
        .unwrap();
        let p = pdb_info(&pdb);
        assert_eq!(p.key(), "shop/db");
        assert_eq!(p.pdb.disruptions_allowed, 1);
        let sel = p.pdb.selector.as_ref().unwrap();
        assert_eq!(sel.match_labels["app"], "db");
        assert_eq!(sel.match_expressions[0].values, ["a"]);
        assert_eq!(p.disrupted_pods, ["db-0", "db-1"]);
        assert!(p.pdb.disrupted_pod_uids.is_empty(), "uids are the state's to resolve");
        // No status yet: no disruption allowed; no selector: none (matches no pod).
        let bare: k8s_openapi::api::policy::v1::PodDisruptionBudget =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "x", "namespace": "shop"}, "spec": {}}))
                .unwrap();
        let p = pdb_info(&bare);
        assert_eq!((p.pdb.disruptions_allowed, p.pdb.selector.is_none()), (0, true));
    }

    #[test]
    fn node_projection_keeps_what_placement_reads() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "spec": {"unschedulable": true, "taints": [{"key": "k", "effect": "NoExecute"}]},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                       "images": [{"names": ["nginx:latest"], "sizeBytes": 1000}]}
        }))
        .unwrap();
        let n = node_info(&node);
        assert!(n.unschedulable);
        assert_eq!(n.taints[0].effect, "NoExecute");
        assert_eq!(n.allocatable["pods"], "110");
        assert_eq!(n.images[0].size_bytes, 1000);
    }
}
