//! What the binder writes to the cluster, behind a trait so the same scheduling loop drives a real
//! API server ([`crate::kube_api`]) and the in-memory cluster of `simulate`.
//!
//! The objects and words are kube-scheduler's: a Binding; on success the Normal event `Scheduled`
//! "Successfully assigned ns/pod to node"; when unschedulable the `PodScheduled=False` condition
//! with reason `Unschedulable` and the decision service's message, and a Warning event
//! `FailedScheduling` with the same message; for preemption, the preemptor's
//! `status.nominatedNodeName`, and on each victim the `DisruptionTarget` condition, a graceful
//! delete and the Normal event `Preempted`.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim};

/// Identity of a pod in API calls.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodRef {
    /// metadata.namespace.
    pub namespace: String,
    /// metadata.name.
    pub name: String,
    /// metadata.uid (a Binding carries it, so a recreated pod with the same name is not bound).
    pub uid: String,
}

impl PodRef {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The `PodGroupInitiallyScheduled` condition of a PodGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGroupCondition {
    /// The PodGroup's namespace.
    pub namespace: String,
    /// The PodGroup's name.
    pub name: String,
    /// `status`: True when the group was scheduled.
    pub scheduled: bool,
    /// `reason`: `Scheduled`, `Unschedulable` or `SchedulerError`.
    pub reason: String,
    /// `message`.
    pub message: String,
    /// `observedGeneration`: the PodGroup's `metadata.generation` the cycle read.
    pub observed_generation: i64,
    /// The condition on the PodGroup as the watch shows it (kube-scheduler reads it from its
    /// informer cache): the transition time is kept from it while the status stays, and nothing
    /// is written when it is already so, whatever this process wrote or forgot (a restart).
    pub current: Option<ObservedCondition>,
}

impl PodGroupCondition {
    /// Whether `other` writes the same condition (its observed one aside).
    pub fn same_as(&self, other: &PodGroupCondition) -> bool {
        (
            &self.namespace,
            &self.name,
            self.scheduled,
            &self.reason,
            &self.message,
            self.observed_generation,
        ) == (
            &other.namespace,
            &other.name,
            other.scheduled,
            &other.reason,
            &other.message,
            other.observed_generation,
        )
    }
}

/// A PodGroup's `PodGroupInitiallyScheduled` condition as it is on the object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObservedCondition {
    /// `status`: `True`, `False` or `Unknown`.
    pub status: String,
    /// `reason`.
    pub reason: String,
    /// `message`.
    pub message: String,
    /// `observedGeneration`.
    pub observed_generation: i64,
    /// `lastTransitionTime` as written (RFC 3339).
    pub last_transition_time: String,
}

/// A claim a volume binding is written for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClaimRef {
    /// metadata.namespace.
    pub namespace: String,
    /// metadata.name.
    pub name: String,
    /// metadata.uid as the binder knows it ("" when unknown): a claim recreated under the same
    /// name is not written for a decision made on its predecessor.
    pub uid: String,
}

impl ClaimRef {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// DynamicResources' PreBind write of one ResourceClaim ([`ClusterApi::reserve_claim`]).
#[derive(Debug, Clone, Copy)]
pub struct ClaimWrite<'a> {
    /// The claim (its uid as the decision saw it: a claim recreated since is not written).
    pub claim: &'a ClaimRef,
    /// The pod to add to `status.reservedFor`.
    pub pod: &'a PodRef,
    /// The allocation to write, when the pod's placement allocated the claim.
    pub allocation: Option<&'a placement_scheduler::proto::AllocationResult>,
    /// The claim as the binder's watch shows it, or as the binder last wrote it: the first
    /// attempt is written from it, with no read (`None`: read first).
    pub cached: Option<&'a ResourceClaim>,
    /// The DeviceClasses the claim's requests name, as the watch shows them (the allocation
    /// copies their configuration).
    pub classes: &'a HashMap<String, Arc<DeviceClass>>,
}

/// The annotation kube's volume binder puts on a volume it binds to a claim (`AnnBoundByController`).
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";

/// The annotation naming the node a claim is provisioned for (`AnnSelectedNode`).
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// Why a write failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 409: the pod is already bound, or the uid does not match. Never retried.
    #[error("conflict: {0}")]
    Conflict(String),
    /// 404: the pod is gone. Never retried.
    #[error("not found: {0}")]
    NotFound(String),
    /// Anything else (5xx, timeouts, throttling): retried with backoff.
    #[error("{0}")]
    Other(String),
}

/// kube-scheduler's message of a successful binding.
pub fn scheduled_message(pod: &PodRef, node: &str) -> String {
    format!("Successfully assigned {}/{} to {}", pod.namespace, pod.name, node)
}

/// kube-scheduler's note on a victim's Normal event `Preempted` (action `Preempting`).
pub fn preempted_message(preemptor_uid: &str, node: &str) -> String {
    format!("Preempted by pod {preemptor_uid} on node {node}")
}

/// kube-scheduler's message on a victim's `DisruptionTarget` condition (reason `PreemptionByScheduler`).
pub fn preemption_condition_message(scheduler_name: &str) -> String {
    format!("{scheduler_name}: preempting to accommodate a higher priority pod")
}

/// Who a victim is evicted for: a pod on its nominated node, or a whole PodGroup (kube-scheduler
/// 1.37's PodGroupPostFilter, whose candidate is the cluster: `framework/preemption/executor.go`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preemptor {
    /// The preempting pod.
    Pod(PodRef),
    /// The preempting PodGroup (its namespace, name and uid).
    PodGroup(PodRef),
}

impl Preemptor {
    /// The pod or the PodGroup.
    pub fn object(&self) -> &PodRef {
        match self {
            Self::Pod(p) | Self::PodGroup(p) => p,
        }
    }

    /// The victim's `Preempted` event message: `Preempted by <type> <uid> on node <candidate>`,
    /// the candidate of a PodGroup being the cluster.
    pub fn preempted_message(&self, node: &str) -> String {
        match self {
            Self::Pod(p) => preempted_message(&p.uid, node),
            Self::PodGroup(g) => format!("Preempted by podgroup {} on node cluster", g.uid),
        }
    }

    /// The victim's `DisruptionTarget` condition message.
    pub fn condition_message(&self, scheduler_name: &str) -> String {
        match self {
            Self::Pod(_) => preemption_condition_message(scheduler_name),
            Self::PodGroup(_) => format!("{scheduler_name}: preempting to accommodate a higher priority podgroup"),
        }
    }
}

/// The cluster writes the binder makes.
pub trait ClusterApi: Send + Sync + 'static {
    /// `POST pods/{name}/binding` to `node`; the API server copies the Binding's `annotations`
    /// onto the pod (kube-apiserver's `setPodNodeAndMetadata`).
    fn bind(
        &self,
        pod: &PodRef,
        node: &str,
        annotations: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// The Normal event `Scheduled` after a successful binding made `at` (its `eventTime`: the
    /// event may be written later than the binding).
    fn record_scheduled(
        &self,
        pod: &PodRef,
        node: &str,
        at: SystemTime,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// `PodScheduled=False` (reason `Unschedulable`, the message) and the Warning event `FailedScheduling`.
    fn record_unschedulable(&self, pod: &PodRef, message: &str) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// `PodScheduled=False` with reason `SchedulerError` and the Warning event `FailedScheduling`:
    /// scheduling failed with an error (an extender that is not ignorable failed), not for want
    /// of a node. By default recorded as [`ClusterApi::record_unschedulable`] records it.
    fn record_scheduler_error(&self, pod: &PodRef, message: &str) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.record_unschedulable(pod, message)
    }

    /// VolumeBinding's PreBind for a static binding (kube's `GetBindVolumeToClaim` and the PV
    /// update of `bindAPIUpdate`): sets the volume's `spec.claimRef` to the claim (kind, apiVersion,
    /// namespace, name, uid, resourceVersion) and, unless the volume already referred to the claim,
    /// the annotation `pv.kubernetes.io/bound-by-controller: "yes"`; nothing is written when both
    /// are so already. The update is conditional on the volume's resourceVersion: a volume changed
    /// meanwhile gives [`ApiError::Conflict`], as does one bound to another claim or a claim whose
    /// uid is not `claim.uid`.
    fn bind_volume(&self, volume: &str, claim: &ClaimRef) -> impl Future<Output = Result<(), ApiError>> + Send {
        let message = format!(
            "cannot bind volume {volume} to claim {}: not supported here",
            claim.key()
        );
        async move { Err(ApiError::Other(message)) }
    }

    /// VolumeBinding's PreBind for dynamic provisioning: sets the claim's annotation
    /// `volume.kubernetes.io/selected-node` to `node` (nothing is written when it is so already),
    /// conditional on the claim's resourceVersion, as kube's `bindAPIUpdate` updates it.
    fn select_node(&self, claim: &ClaimRef, node: &str) -> impl Future<Output = Result<(), ApiError>> + Send {
        let message = format!(
            "cannot select node {node} for claim {}: not supported here",
            claim.key()
        );
        async move { Err(ApiError::Other(message)) }
    }

    /// DynamicResources' PreBind for one of the pod's ResourceClaims (kube's `bindClaim`), written
    /// from [`ClaimWrite::cached`] with no read: the pod added to `status.reservedFor` and, when
    /// an allocation is given, the claim's finalizer `resource.kubernetes.io/delete-protection`
    /// added (a write of the claim) and `status.allocation` set with its `allocationTimestamp`,
    /// through the status subresource; each write conditional on the resourceVersion it was made
    /// from, and on a conflict the claim read again and the write retried, at most 5 attempts, as
    /// `retry.RetryOnConflict(retry.DefaultRetry, …)` does. A claim reserved for the pod already
    /// is not written. Returns the claim as the API server answered the last write (`None` when
    /// nothing was written, or by a writer that has no such object). Errors carry kube's words:
    /// `claim ns/name got deleted in the meantime`, `... got allocated elsewhere in the
    /// meantime`, `add allocation and reservation to claim ns/name: <error>`, `get updated
    /// claim ns/name after conflict: <error>`.
    fn reserve_claim(
        &self,
        write: ClaimWrite<'_>,
    ) -> impl Future<Output = Result<Option<ResourceClaim>, ApiError>> + Send {
        let message = format!(
            "cannot reserve claim {} for {}: not supported here",
            write.claim.key(),
            write.pod.key()
        );
        async move { Err(ApiError::Other(message)) }
    }

    /// DynamicResources' PreBind for the pod's special claim for extended resources backed by
    /// DRA (kube's `createExtendedResourceClaimInAPI`, `extendeddynamicresources.go`): creates
    /// the ResourceClaim in the pod's namespace with `generateName` `<pod name>-extended-resources-`,
    /// the pod as controlling owner (`apiVersion: v1`, `kind: Pod`, `controller: true`), the
    /// annotation `resource.kubernetes.io/extended-resource-claim: "true"` and `claim`'s
    /// requests; returns the claim created (its generated name and uid, and whatever else the
    /// writer answers: its allocation is written from it). The error carries kube's words:
    /// `create claim for extended resources <namespace>/: <error>`.
    fn create_extended_claim(
        &self,
        pod: &PodRef,
        claim: &placement_scheduler::proto::ExtendedResourceClaim,
    ) -> impl Future<Output = Result<ResourceClaim, ApiError>> + Send {
        let message = format!(
            "create claim for extended resources {}/: not supported here",
            pod.namespace
        );
        let _ = claim;
        async move { Err(ApiError::Other(message)) }
    }

    /// The pod's `status.extendedResourceClaimStatus` (kube's `patchPodExtendedResourceClaimStatus`):
    /// the special claim's name and the containers' request mappings, a strategic-merge patch
    /// of the pod's status. The error carries kube's words: `update pod <namespace>/<name>
    /// ExtendedResourceClaimStatus: <error>`.
    fn set_extended_resource_claim_status(
        &self,
        pod: &PodRef,
        claim_name: &str,
        mappings: &[placement_scheduler::proto::ContainerExtendedResourceRequest],
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        let message = format!(
            "update pod {} ExtendedResourceClaimStatus: not supported here",
            pod.key()
        );
        let _ = (claim_name, mappings);
        async move { Err(ApiError::Other(message)) }
    }

    /// DynamicResources' Unreserve of the special claim a failed PreBind created (kube's
    /// `deleteClaim`): its finalizer `resource.kubernetes.io/delete-protection` removed (written
    /// from `cached`, the claim as PreBind last wrote it, conditional on its resourceVersion;
    /// read again and retried on conflicts), then the claim deleted; a claim already gone is no
    /// error.
    fn delete_claim(
        &self,
        claim: &ClaimRef,
        cached: Option<&ResourceClaim>,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        let message = format!("cannot delete claim {}: not supported here", claim.key());
        let _ = cached;
        async move { Err(ApiError::Other(message)) }
    }

    /// DynamicResources' PostFilter deallocation (kube's `deallocateOrDeletePodClaims`): the
    /// claim's `status.allocation`, `status.reservedFor` and `status.devices` cleared in one
    /// write of the status subresource, made from `cached` (the claim as the watch shows it) and
    /// conditional on its uid and resourceVersion, as kube's `UpdateStatus` of its informer's
    /// copy is: a conflict is an error, not retried. Returns the claim as the writer answered it.
    fn deallocate_claim(
        &self,
        claim: &ClaimRef,
        cached: Option<&ResourceClaim>,
    ) -> impl Future<Output = Result<Option<ResourceClaim>, ApiError>> + Send {
        let message = format!("cannot deallocate claim {}: not supported here", claim.key());
        let _ = cached;
        async move { Err(ApiError::Other(message)) }
    }

    /// DynamicResources' PreBind, before it waits for devices' binding conditions: the
    /// `BindingConditionsPending` event (Normal, action `Scheduling`, `waiting for binding
    /// conditions for device on node <node>`). Writers without events write nothing.
    fn record_binding_conditions_pending(
        &self,
        pod: &PodRef,
        node: &str,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        let _ = (pod, node);
        async { Ok(()) }
    }

    /// DynamicResources' Unreserve for one claim: the pod removed from `status.reservedFor` (a
    /// strategic-merge patch of the status deleting the entry with the pod's uid).
    fn unreserve_claim(&self, claim: &ClaimRef, pod: &PodRef) -> impl Future<Output = Result<(), ApiError>> + Send {
        let message = format!(
            "cannot unreserve claim {} for {}: not supported here",
            claim.key(),
            pod.key()
        );
        async move { Err(ApiError::Other(message)) }
    }

    /// Writes a PodGroup's `PodGroupInitiallyScheduled` condition as kube-scheduler's PodGroup
    /// cycle does (`updatePodGroupCondition`): `observedGeneration` the group's generation, the
    /// transition time kept while the status stays, nothing written when the condition is
    /// already so; a strategic-merge patch through the `podgroups/status` subresource.
    fn record_pod_group_condition(
        &self,
        condition: &PodGroupCondition,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        let message = format!(
            "cannot write the condition of PodGroup {}/{}: not supported here",
            condition.namespace, condition.name
        );
        async move { Err(ApiError::Other(message)) }
    }

    /// Sets the preemptor's `status.nominatedNodeName`.
    fn nominate(&self, pod: &PodRef, node: &str) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// Clears `status.nominatedNodeName` (the pod was placed elsewhere, or its reservation given up).
    fn clear_nomination(&self, pod: &PodRef) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// Preempts `victim` for `preemptor` as kube-scheduler's `PreemptPod` does: the condition
    /// `DisruptionTarget=True` (reason `PreemptionByScheduler`), a graceful delete (the victim's own
    /// grace period, only if its uid still matches), and the Normal event `Preempted` on the victim.
    /// A victim already gone is not an error.
    fn preempt(
        &self,
        victim: &PodRef,
        preemptor: &Preemptor,
        node: &str,
        scheduler_name: &str,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
}
