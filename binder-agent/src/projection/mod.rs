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
mod devices;
mod podgroups;
mod selectors;
mod storage;
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
use selectors::{label_selector, term};
pub use storage::{
    claim_info, csi_driver_info, csi_node_info, dynamic_storage_capacity_info, storage_capacity_info,
    storage_class_info, volume_info, TrackedKey, TrackedObject, ANN_BIND_COMPLETED, ANN_SELECTED_NODE,
    ANN_STORAGE_CLASS,
};

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
mod tests;
