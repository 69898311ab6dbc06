//! [`ClusterApi`] over a real API server, writing what kube-scheduler writes:
//!
//! - bind: `POST /api/v1/namespaces/{ns}/pods/{name}/binding` with a `v1.Binding` whose metadata
//!   carries the pod's name, namespace and uid (so a pod recreated under the same name is never
//!   bound by a decision made for its predecessor: the API server answers 409) and whose target is
//!   `{kind: Node, apiVersion: v1, name}`.
//! - scheduled: an `events.k8s.io/v1` Event as the events/v1 recorder makes it (`Normal`,
//!   reason `Scheduled`, action `Binding`, note "Successfully assigned ns/pod to node", `regarding`
//!   the pod, name `{pod}.{hex unix nanos}`).
//! - unschedulable: `PATCH pods/{name}/status` (strategic merge) setting the `PodScheduled`
//!   condition to `False`/`Unschedulable` with the message (kube-scheduler's `updatePod`), then a
//!   `Warning` event `FailedScheduling`, action `Scheduling`, note = the message truncated to the
//!   API's 1024-byte limit as kube-scheduler's `truncateMessage` does.
//!
//! Like kube-scheduler, repeated identical failures do not rewrite the pod: a condition already
//! written with the same message is not patched again (so its `lastTransitionTime` stays), and a
//! repeated `FailedScheduling` event becomes an event series (`series.count`) on the first event
//! instead of a new object, as the events/v1 broadcaster does.
//!
//! Status codes: 409 → [`ApiError::Conflict`], 404 → [`ApiError::NotFound`], everything else
//! (5xx, 429, timeouts, transport) → [`ApiError::Other`]. Every request has a deadline.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::hash::Hash;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Binding, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::Client;
use parking_lot::Mutex;
use serde_json::json;
use tokio::time::Instant;

use crate::api::{
    scheduled_message, ApiError, ClaimRef, ClaimWrite, ClusterApi, PodGroupCondition, PodRef, Preemptor,
    ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE,
};

mod claims;
pub mod transport;

/// The condition kube-scheduler's PodGroup cycle writes on a PodGroup.
pub const POD_GROUP_INITIALLY_SCHEDULED: &str = "PodGroupInitiallyScheduled";

/// The finalizer kube-scheduler puts on a claim it allocates (`resourceapi.Finalizer`).
pub const RESOURCE_CLAIM_FINALIZER: &str = "resource.kubernetes.io/delete-protection";

/// kube's `resourceapi.ExtendedResourceClaimAnnotation`: marks the special claim kube-scheduler
/// creates for a pod's extended resources backed by DRA.
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";

/// `error` with its message prefixed (`<prefix>: <message>`), its kind kept.
fn prefixed(error: ApiError, prefix: &str) -> ApiError {
    match error {
        ApiError::Conflict(m) => ApiError::Conflict(format!("{prefix}: {m}")),
        ApiError::NotFound(m) => ApiError::NotFound(format!("{prefix}: {m}")),
        ApiError::Other(m) => ApiError::Other(format!("{prefix}: {m}")),
    }
}

/// The API's limit on an event's note (`NoteLengthLimit`).
pub const NOTE_LENGTH_LIMIT: usize = 1024;

/// How long an event series stays open without a new occurrence (events/v1 `finishTime`).
const SERIES_FINISH: Duration = Duration::from_secs(6 * 60);

/// Least time between two writes of the same series after its second occurrence.
const SERIES_REFRESH: Duration = Duration::from_secs(30);

/// How long a written `PodScheduled=False` condition is remembered without a new failure. Pods in
/// the unschedulable pool are retried at least every 5 minutes, so live ones stay remembered.
const CONDITION_TTL: Duration = Duration::from_secs(15 * 60);

/// How often the caches drop expired entries.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// Who the binder says it is in events, and how long a request may take.
#[derive(Debug, Clone)]
pub struct KubeApiConfig {
    /// `reportingController` of events (kube-scheduler: its scheduler name).
    pub reporting_controller: String,
    /// `reportingInstance` of events (kube-scheduler: `{controller}-{hostname}`); at most 128 bytes.
    pub reporting_instance: String,
    /// Deadline of each request.
    pub request_timeout: Duration,
}

impl Default for KubeApiConfig {
    fn default() -> Self {
        Self {
            reporting_controller: "placement-scheduler".into(),
            reporting_instance: "placement-scheduler".into(),
            request_timeout: Duration::from_secs(10),
        }
    }
}

/// A `FailedScheduling` series: the event first written and how often it happened since.
#[derive(Debug, Clone)]
struct Series {
    namespace: String,
    name: String,
    count: i32,
    last_observed: Instant,
    last_written: Instant,
}

/// The condition last written on a pod.
#[derive(Debug, Clone)]
struct WrittenCondition {
    message: String,
    transition: Timestamp,
    touched: Instant,
}

/// A map whose entries expire, pruned at most every [`PRUNE_EVERY`].
#[derive(Debug)]
struct Expiring<K, V> {
    map: HashMap<K, V>,
    pruned: Instant,
}

impl<K: Eq + Hash, V> Expiring<K, V> {
    fn new() -> Self {
        Self {
            map: HashMap::new(),
            pruned: Instant::now(),
        }
    }

    fn prune(&mut self, now: Instant, keep: impl Fn(&V) -> bool) {
        if now.duration_since(self.pruned) >= PRUNE_EVERY {
            self.map.retain(|_, v| keep(v));
            self.pruned = now;
        }
    }
}

/// Identity of a `FailedScheduling` occurrence: same pod, same message.
type SeriesKey = (String, String);

/// The binder's writes to a Kubernetes API server.
pub struct KubeApi {
    client: Client,
    config: KubeApiConfig,
    series: Mutex<Expiring<SeriesKey, Series>>,
    conditions: Mutex<Expiring<String, WrittenCondition>>,
    /// The PodGroupInitiallyScheduled condition last written per PodGroup (`namespace/name`),
    /// with its transition time.
    group_conditions: Mutex<HashMap<String, (PodGroupCondition, Timestamp)>>,
}

impl std::fmt::Debug for KubeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeApi")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Why one request failed, before it is classified as an [`ApiError`].
enum Failure {
    Timeout(Duration),
    Kube(kube::Error),
}

impl From<Failure> for ApiError {
    fn from(f: Failure) -> Self {
        match f {
            Failure::Timeout(d) => ApiError::Other(format!("request timed out after {d:?}")),
            Failure::Kube(kube::Error::Api(status)) => {
                let text = if status.message.is_empty() {
                    format!("{} ({})", status.reason, status.code)
                } else {
                    status.message.clone()
                };
                match status.code {
                    409 => ApiError::Conflict(text),
                    404 => ApiError::NotFound(text),
                    _ => ApiError::Other(text),
                }
            }
            Failure::Kube(e) => ApiError::Other(e.to_string()),
        }
    }
}

/// kube-scheduler's `truncateMessage`: at most [`NOTE_LENGTH_LIMIT`] bytes, ending in " ..." when
/// cut (on a character boundary, where Go cuts bytes).
pub fn truncate_note(message: &str) -> String {
    if message.len() <= NOTE_LENGTH_LIMIT {
        return message.to_string();
    }
    const SUFFIX: &str = " ...";
    let mut end = NOTE_LENGTH_LIMIT - SUFFIX.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{SUFFIX}", &message[..end])
}

fn truncate_bytes(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// The pod as an event's `regarding`.
fn pod_reference(pod: &PodRef) -> ObjectReference {
    object_reference("v1", "Pod", pod)
}

/// A reference to a namespaced object named by `object` (namespace, name, uid).
fn object_reference(api_version: &str, kind: &str, object: &PodRef) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        name: Some(object.name.clone()),
        namespace: Some(object.namespace.clone()),
        uid: Some(object.uid.clone()),
        ..Default::default()
    }
}

/// The Binding kube-scheduler's DefaultBinder posts, with `annotations` for the pod (none: no
/// `annotations` field, exactly kube-scheduler's body).
pub fn binding(pod: &PodRef, node: &str, annotations: &BTreeMap<String, String>) -> Binding {
    Binding {
        metadata: ObjectMeta {
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            uid: Some(pod.uid.clone()),
            annotations: (!annotations.is_empty()).then(|| annotations.clone()),
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..Default::default()
        },
    }
}

/// The strategic merge patch of `pods/{name}/status` that marks a pod unschedulable.
pub fn unschedulable_patch(message: &str, transition: Timestamp) -> serde_json::Value {
    scheduling_failed_patch("Unschedulable", message, transition)
}

/// The strategic merge patch of `pods/{name}/status` setting `PodScheduled=False` with `reason`
/// (kube-scheduler's `Unschedulable`, or `SchedulerError` when scheduling failed with an error).
pub fn scheduling_failed_patch(reason: &str, message: &str, transition: Timestamp) -> serde_json::Value {
    json!({
        "status": {
            "conditions": [{
                "type": "PodScheduled",
                "status": "False",
                "reason": reason,
                "message": message,
                "lastTransitionTime": Time(transition),
                "lastProbeTime": null,
            }]
        }
    })
}

impl KubeApi {
    /// Writes through `client`.
    pub fn new(client: Client, mut config: KubeApiConfig) -> Self {
        // API validation: reportingInstance is at most 128 bytes.
        config.reporting_instance = truncate_bytes(&config.reporting_instance, 128);
        Self {
            client,
            config,
            series: Mutex::new(Expiring::new()),
            conditions: Mutex::new(Expiring::new()),
            group_conditions: Mutex::new(HashMap::new()),
        }
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Runs one request under the deadline. A 2xx response whose body does not parse still means
    /// the write happened (the request bodies are plain JSON and always serialize), so it is a
    /// success: retrying a bind that went through would only earn a 409.
    async fn timed<T>(&self, request: impl Future<Output = Result<T, kube::Error>>) -> Result<(), Failure> {
        match tokio::time::timeout(self.config.request_timeout, request).await {
            Err(_) => Err(Failure::Timeout(self.config.request_timeout)),
            Ok(Ok(_) | Err(kube::Error::SerdeError(_))) => Ok(()),
            Ok(Err(e)) => Err(Failure::Kube(e)),
        }
    }

    /// Runs one request that returns an object under the deadline.
    async fn fetched<T>(&self, request: impl Future<Output = Result<T, kube::Error>>) -> Result<T, ApiError> {
        match tokio::time::timeout(self.config.request_timeout, request).await {
            Err(_) => Err(Failure::Timeout(self.config.request_timeout).into()),
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Failure::Kube(e).into()),
        }
    }

    /// The claim as the API server has it now, checked against the uid the binder knows.
    async fn current_claim(&self, claim: &ClaimRef) -> Result<PersistentVolumeClaim, ApiError> {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &claim.namespace);
        let current = self.fetched(claims.get(&claim.name)).await?;
        let uid = current.metadata.uid.as_deref().unwrap_or_default();
        if !claim.uid.is_empty() && uid != claim.uid {
            return Err(ApiError::Conflict(format!(
                "persistentvolumeclaim {} was recreated (uid {uid}, not {})",
                claim.key(),
                claim.uid
            )));
        }
        Ok(current)
    }

    /// An events/v1 Event about `pod` happening now, as the events/v1 recorder builds it.
    fn event(&self, pod: &PodRef, type_: &str, reason: &str, action: &str, note: &str) -> Event {
        self.event_at(Timestamp::now(), pod, type_, reason, action, note)
    }

    /// An events/v1 Event about `pod` that happened at `now`.
    fn event_at(&self, now: Timestamp, pod: &PodRef, type_: &str, reason: &str, action: &str, note: &str) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{}.{:x}", pod.name, now.as_nanosecond())),
                namespace: Some(pod.namespace.clone()),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            reporting_controller: Some(self.config.reporting_controller.clone()),
            reporting_instance: Some(self.config.reporting_instance.clone()),
            action: Some(action.into()),
            reason: Some(reason.into()),
            regarding: Some(pod_reference(pod)),
            note: Some(truncate_note(note)),
            type_: Some(type_.into()),
            ..Default::default()
        }
    }

    async fn create_event(&self, event: &Event) -> Result<(), ApiError> {
        let namespace = event.metadata.namespace.as_deref().unwrap_or("default");
        let events: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        Ok(self.timed(events.create(&PostParams::default(), event)).await?)
    }

    /// Records a `FailedScheduling` occurrence: a new event, or the next count of its series.
    async fn record_failed_scheduling(&self, pod: &PodRef, message: &str) -> Result<(), ApiError> {
        let now = Instant::now();
        let key = (pod.uid.clone(), message.to_string());
        let write = {
            let mut cache = self.series.lock();
            cache.prune(now, |s| now.duration_since(s.last_observed) < SERIES_FINISH);
            match cache.map.get_mut(&key) {
                Some(s) if now.duration_since(s.last_observed) < SERIES_FINISH => {
                    s.count = s.count.saturating_add(1);
                    s.last_observed = now;
                    if s.count == 2 || now.duration_since(s.last_written) >= SERIES_REFRESH {
                        s.last_written = now;
                        Some(s.clone())
                    } else {
                        return Ok(());
                    }
                }
                _ => None,
            }
        };
        let Some(series) = write else {
            let event = self.event(pod, "Warning", "FailedScheduling", "Scheduling", message);
            self.create_event(&event).await?;
            self.series.lock().map.insert(
                key,
                Series {
                    namespace: pod.namespace.clone(),
                    name: event.metadata.name.unwrap_or_default(),
                    count: 1,
                    last_observed: now,
                    last_written: now,
                },
            );
            return Ok(());
        };
        let observed = EventSeries {
            count: series.count,
            last_observed_time: MicroTime(Timestamp::now()),
        };
        let events: Api<Event> = Api::namespaced(self.client.clone(), &series.namespace);
        let patch = Patch::Strategic(json!({ "series": observed }));
        match self
            .timed(events.patch(&series.name, &PatchParams::default(), &patch))
            .await
        {
            Ok(()) => Ok(()),
            Err(Failure::Kube(kube::Error::Api(s))) if s.code == 404 => {
                // The first event expired or was deleted: write the series as a new event.
                let mut event = self.event(pod, "Warning", "FailedScheduling", "Scheduling", message);
                event.series = Some(observed);
                self.create_event(&event).await?;
                if let Some(s) = self.series.lock().map.get_mut(&key) {
                    s.name = event.metadata.name.unwrap_or_default();
                }
                Ok(())
            }
            Err(f) => Err(f.into()),
        }
    }

    /// The condition `PodScheduled=False` with `reason`, then the Warning event `FailedScheduling`
    /// (not when the pod is gone).
    async fn record_scheduling_failure(&self, pod: &PodRef, reason: &str, message: &str) -> Result<(), ApiError> {
        let patched = self.patch_unschedulable(pod, reason, message).await;
        if let Err(ApiError::NotFound(_)) = patched {
            // The pod is gone: nothing to report on.
            return patched;
        }
        let recorded = self.record_failed_scheduling(pod, message).await;
        patched.and(recorded)
    }

    /// Patches `PodScheduled=False` unless the same message is already written.
    async fn patch_unschedulable(&self, pod: &PodRef, reason: &str, message: &str) -> Result<(), ApiError> {
        let now = Instant::now();
        let transition = {
            let mut cache = self.conditions.lock();
            cache.prune(now, |c| now.duration_since(c.touched) < CONDITION_TTL);
            match cache.map.get_mut(&pod.uid) {
                Some(c) if c.message == message => {
                    c.touched = now;
                    return Ok(());
                }
                // Still False: the transition time stays, as in kube-scheduler's UpdatePodCondition.
                Some(c) => c.transition,
                None => Timestamp::now(),
            }
        };
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let patch = Patch::Strategic(scheduling_failed_patch(reason, message, transition));
        self.timed(pods.patch_status(&pod.name, &PatchParams::default(), &patch))
            .await?;
        self.conditions.lock().map.insert(
            pod.uid.clone(),
            WrittenCondition {
                message: message.to_string(),
                transition,
                touched: now,
            },
        );
        Ok(())
    }
}

impl ClusterApi for KubeApi {
    async fn bind(&self, pod: &PodRef, node: &str, annotations: &BTreeMap<String, String>) -> Result<(), ApiError> {
        // The step's span, left at once: wrapping the request would make it the parent of
        // kube-client's HTTP span, which the exported traces then lose (a debug span is not
        // exported, and its child would start a trace of its own).
        drop(tracing::debug_span!("bind").entered());
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let body = binding(pod, node, annotations);
        let params = PostParams::default();
        let request = pods.create_subresource::<_, serde_json::Value>("binding", &pod.name, &params, &body);
        let result = self.timed(request).await.map_err(ApiError::from);
        if result.is_ok() {
            // A bound pod is never unschedulable again.
            self.conditions.lock().map.remove(&pod.uid);
        }
        result
    }

    async fn bind_volume(&self, volume: &str, claim: &ClaimRef) -> Result<(), ApiError> {
        let current = self.current_claim(claim).await?;
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        let mut pv = self.fetched(volumes.get(volume)).await?;
        let (name, namespace) = (claim.name.as_str(), claim.namespace.as_str());
        let uid = current.metadata.uid.clone().unwrap_or_default();
        let spec = pv.spec.get_or_insert_with(Default::default);
        // kube's IsVolumeBoundToClaim: the same name and namespace, and the uid unset or the same.
        let bound_to_claim = spec.claim_ref.as_ref().is_some_and(|r| {
            r.name.as_deref() == Some(name)
                && r.namespace.as_deref() == Some(namespace)
                && r.uid.as_deref().is_none_or(|u| u.is_empty() || u == uid)
        });
        if spec.claim_ref.is_some() && !bound_to_claim {
            let other = spec.claim_ref.as_ref().map(|r| {
                format!(
                    "{}/{}",
                    r.namespace.as_deref().unwrap_or_default(),
                    r.name.as_deref().unwrap_or_default()
                )
            });
            return Err(ApiError::Conflict(format!(
                "persistentvolume {volume} is bound to claim {} already",
                other.unwrap_or_default()
            )));
        }
        let mut dirty = false;
        if spec.claim_ref.as_ref().and_then(|r| r.uid.as_deref()) != Some(uid.as_str()) {
            spec.claim_ref = Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                uid: Some(uid),
                resource_version: current.metadata.resource_version.clone(),
                ..Default::default()
            });
            dirty = true;
        }
        if !bound_to_claim {
            let annotations = pv.metadata.annotations.get_or_insert_with(Default::default);
            if !annotations.contains_key(ANN_BOUND_BY_CONTROLLER) {
                annotations.insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
                dirty = true;
            }
        }
        if !dirty {
            return Ok(());
        }
        // The update carries the resourceVersion read: a volume changed meanwhile is a 409.
        self.timed(volumes.replace(volume, &PostParams::default(), &pv))
            .await
            .map_err(ApiError::from)
    }

    async fn reserve_claim(&self, write: ClaimWrite<'_>) -> Result<Option<ResourceClaim>, ApiError> {
        self.write_claim(write).await
    }

    async fn create_extended_claim(
        &self,
        pod: &PodRef,
        claim: &placement_scheduler::proto::ExtendedResourceClaim,
    ) -> Result<ResourceClaim, ApiError> {
        use k8s_openapi::api::resource::v1::{DeviceClaim, DeviceRequest, ExactDeviceRequest, ResourceClaimSpec};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let requests = claim
            .requests
            .iter()
            .map(|r| DeviceRequest {
                name: r.name.clone(),
                exactly: r.exactly.as_ref().map(|e| ExactDeviceRequest {
                    device_class_name: e.device_class_name.clone(),
                    allocation_mode: Some("ExactCount".into()),
                    count: Some(e.count),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect();
        let object = ResourceClaim {
            metadata: ObjectMeta {
                namespace: Some(pod.namespace.clone()),
                generate_name: Some(format!("{}-extended-resources-", pod.name)),
                owner_references: Some(vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    name: pod.name.clone(),
                    uid: pod.uid.clone(),
                    controller: Some(true),
                    ..Default::default()
                }]),
                annotations: Some(BTreeMap::from([(
                    EXTENDED_RESOURCE_CLAIM_ANNOTATION.to_string(),
                    "true".to_string(),
                )])),
                ..Default::default()
            },
            spec: Some(ResourceClaimSpec {
                devices: Some(DeviceClaim {
                    requests: Some(requests),
                    ..Default::default()
                }),
            }),
            status: None,
        };
        let claims: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &pod.namespace);
        self.fetched(claims.create(&PostParams::default(), &object))
            .await
            .map_err(|e| prefixed(e, &format!("create claim for extended resources {}/", pod.namespace)))
    }

    async fn set_extended_resource_claim_status(
        &self,
        pod: &PodRef,
        claim_name: &str,
        mappings: &[placement_scheduler::proto::ContainerExtendedResourceRequest],
    ) -> Result<(), ApiError> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let mappings: Vec<serde_json::Value> = mappings
            .iter()
            .map(|m| {
                json!({
                    "containerName": m.container_name,
                    "resourceName": m.resource_name,
                    "requestName": m.request_name,
                })
            })
            .collect();
        let patch = json!({"status": {"extendedResourceClaimStatus": {
            "requestMappings": mappings,
            "resourceClaimName": claim_name,
        }}});
        self.timed(pods.patch_status(&pod.name, &PatchParams::default(), &Patch::Strategic(patch)))
            .await
            .map_err(|e| {
                prefixed(
                    e.into(),
                    &format!("update pod {} ExtendedResourceClaimStatus", pod.key()),
                )
            })
    }

    async fn deallocate_claim(
        &self,
        claim: &ClaimRef,
        cached: Option<&ResourceClaim>,
    ) -> Result<Option<ResourceClaim>, ApiError> {
        self.deallocate(claim, cached).await
    }

    async fn delete_claim(&self, claim: &ClaimRef, cached: Option<&ResourceClaim>) -> Result<(), ApiError> {
        self.remove_claim(claim, cached).await
    }

    async fn unreserve_claim(&self, claim: &ClaimRef, pod: &PodRef) -> Result<(), ApiError> {
        let claims: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &claim.namespace);
        let mut patch = json!({"status": {"reservedFor": [{"$patch": "delete", "uid": pod.uid}]}});
        if !claim.uid.is_empty() {
            patch["metadata"] = json!({"uid": claim.uid});
        }
        self.timed(claims.patch_status(&claim.name, &PatchParams::default(), &Patch::Strategic(patch)))
            .await
            .map_err(ApiError::from)
    }

    async fn select_node(&self, claim: &ClaimRef, node: &str) -> Result<(), ApiError> {
        let mut current = self.current_claim(claim).await?;
        let annotations = current.metadata.annotations.get_or_insert_with(Default::default);
        if annotations.get(ANN_SELECTED_NODE).map(String::as_str) == Some(node) {
            return Ok(());
        }
        annotations.insert(ANN_SELECTED_NODE.into(), node.into());
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &claim.namespace);
        self.timed(claims.replace(&claim.name, &PostParams::default(), &current))
            .await
            .map_err(ApiError::from)
    }

    async fn record_pod_group_condition(&self, condition: &PodGroupCondition) -> Result<(), ApiError> {
        let key = format!("{}/{}", condition.namespace, condition.name);
        let status = if condition.scheduled { "True" } else { "False" };
        // kube's `apimeta.SetStatusCondition` on the PodGroup as its cache shows it: nothing
        // written when the condition is already so, the transition time kept while the status
        // stays. The object as the watch shows it wins over what this process remembers writing
        // (which a restart forgets); the memory serves while the watch shows no condition yet.
        let transition = match &condition.current {
            Some(c) => {
                if (
                    c.status.as_str(),
                    c.reason.as_str(),
                    c.message.as_str(),
                    c.observed_generation,
                ) == (
                    status,
                    condition.reason.as_str(),
                    condition.message.as_str(),
                    condition.observed_generation,
                ) {
                    return Ok(());
                }
                match c.last_transition_time.parse::<Timestamp>() {
                    Ok(at) if c.status == status => at,
                    _ => Timestamp::now(),
                }
            }
            None => match self.group_conditions.lock().get(&key) {
                Some((written, _)) if written.same_as(condition) => return Ok(()),
                Some((written, at)) if written.scheduled == condition.scheduled => *at,
                _ => Timestamp::now(),
            },
        };
        let groups: Api<PodGroup> = Api::namespaced(self.client.clone(), &condition.namespace);
        let patch = Patch::Strategic(json!({"status": {"conditions": [{
            "type": POD_GROUP_INITIALLY_SCHEDULED,
            "status": if condition.scheduled { "True" } else { "False" },
            "reason": condition.reason,
            "message": condition.message,
            "observedGeneration": condition.observed_generation,
            "lastTransitionTime": Time(transition),
        }]}}));
        self.timed(groups.patch_status(&condition.name, &PatchParams::default(), &patch))
            .await?;
        self.group_conditions
            .lock()
            .insert(key, (condition.clone(), transition));
        Ok(())
    }

    async fn record_scheduled(&self, pod: &PodRef, node: &str, at: SystemTime) -> Result<(), ApiError> {
        let at = Timestamp::try_from(at).unwrap_or_else(|_| Timestamp::now());
        let event = self.event_at(at, pod, "Normal", "Scheduled", "Binding", &scheduled_message(pod, node));
        self.create_event(&event).await
    }

    async fn record_binding_conditions_pending(&self, pod: &PodRef, node: &str) -> Result<(), ApiError> {
        let note = format!("waiting for binding conditions for device on node {node}");
        let event = self.event(pod, "Normal", "BindingConditionsPending", "Scheduling", &note);
        self.create_event(&event).await
    }

    async fn record_unschedulable(&self, pod: &PodRef, message: &str) -> Result<(), ApiError> {
        self.record_scheduling_failure(pod, "Unschedulable", message).await
    }

    async fn record_scheduler_error(&self, pod: &PodRef, message: &str) -> Result<(), ApiError> {
        self.record_scheduling_failure(pod, "SchedulerError", message).await
    }

    async fn nominate(&self, pod: &PodRef, node: &str) -> Result<(), ApiError> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let patch = Patch::Merge(nominated_patch(node));
        Ok(self
            .timed(pods.patch_status(&pod.name, &PatchParams::default(), &patch))
            .await?)
    }

    async fn clear_nomination(&self, pod: &PodRef) -> Result<(), ApiError> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let patch = Patch::Merge(cleared_nomination_patch());
        Ok(self
            .timed(pods.patch_status(&pod.name, &PatchParams::default(), &patch))
            .await?)
    }

    async fn preempt(
        &self,
        victim: &PodRef,
        preemptor: &Preemptor,
        node: &str,
        scheduler_name: &str,
    ) -> Result<(), ApiError> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &victim.namespace);
        let patch = Patch::Strategic(disruption_target_patch(
            &preemptor.condition_message(scheduler_name),
            Timestamp::now(),
        ));
        let gone = |r: Result<(), ApiError>| match r {
            Err(ApiError::NotFound(_)) => Ok(true),
            Err(e) => Err(e),
            Ok(()) => Ok(false),
        };
        if gone(
            self.timed(pods.patch_status(&victim.name, &PatchParams::default(), &patch))
                .await
                .map_err(ApiError::from),
        )? {
            return Ok(());
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(victim.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self
            .timed(pods.delete(&victim.name, &params))
            .await
            .map_err(ApiError::from)
        {
            // Gone already, or a new pod under the same name (the precondition failed).
            Err(ApiError::NotFound(_) | ApiError::Conflict(_)) => return Ok(()),
            Err(e) => return Err(e),
            Ok(()) => {}
        }
        let mut event = self.event(
            victim,
            "Normal",
            "Preempted",
            "Preempting",
            &preemptor.preempted_message(node),
        );
        event.related = Some(match preemptor {
            Preemptor::Pod(p) => pod_reference(p),
            Preemptor::PodGroup(g) => object_reference("scheduling.k8s.io/v1beta1", "PodGroup", g),
        });
        self.create_event(&event).await
    }
}

/// The patch of `pods/{name}/status` that nominates a node. kube-scheduler sends it as a
/// strategic merge patch; for this one scalar field a JSON merge patch writes the same pod, and
/// the API server applies it for less (no schema walk of the pod's lists).
pub fn nominated_patch(node: &str) -> serde_json::Value {
    json!({ "status": { "nominatedNodeName": node } })
}

/// The patch of `pods/{name}/status` that clears the nominated node (a JSON merge patch, as
/// [`nominated_patch`]).
pub fn cleared_nomination_patch() -> serde_json::Value {
    json!({ "status": { "nominatedNodeName": null } })
}

/// The strategic merge patch of a victim's status: kube-scheduler's `DisruptionTarget` condition.
pub fn disruption_target_patch(message: &str, transition: Timestamp) -> serde_json::Value {
    json!({
        "status": {
            "conditions": [{
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": message,
                "lastTransitionTime": Time(transition),
            }]
        }
    })
}

#[cfg(test)]
mod tests;
