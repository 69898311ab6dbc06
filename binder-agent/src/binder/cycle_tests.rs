//! The scheduling cycle on its own: a [`Binder`] driven by events the test feeds it, writing
//! through a recording [`ClusterApi`], deciding with a scripted decision replica (a real gRPC
//! server on a local socket that answers each pod as the test says). Each outcome of a batch must
//! be dispatched as kube-scheduler's `schedulingCycle`/`bindingCycle` would: placed → bound (and
//! its `Scheduled` event), unschedulable → reported and parked, nominated → victims preempted,
//! the nomination written, bound once the victims are gone, scheduling error → `SchedulerError`
//! and backed off, no answer → backed off and decided again, invalid → reported alone while the
//! rest of the batch is decided, replica down → every pod backed off and decided again.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use placement_scheduler::proto;
use placement_scheduler::proto::placement::Outcome;
use placement_scheduler::proto::placement_service_server::{PlacementService, PlacementServiceServer};
use tokio::sync::watch;
use tonic::{Request, Response, Status};

use super::{Binder, BinderConfig, ClusterEvent};
use crate::api::{ApiError, ClusterApi, PodRef, Preemptor};
use crate::metrics::BinderMetrics;
use crate::projection::PodInfo;
use crate::queue::QueueConfig;
use crate::replicas::{EndpointSource, ReplicaConfig, ReplicaPool};

const SCHEDULER: &str = "placement-scheduler";

/// The harness's longest backoff: a pod backed off is asked again within it.
const MAX_BACKOFF: Duration = Duration::from_millis(200);

/// What the binder wrote, per pod name.
#[derive(Debug, Default, Clone, PartialEq)]
struct Written {
    bound_to: Option<String>,
    scheduled_events: u32,
    unschedulable: Vec<String>,
    scheduler_errors: Vec<String>,
    nominated: Option<String>,
    preempted_by: Option<String>,
}

/// A [`ClusterApi`] that records every write by pod name, and answers each one with success.
#[derive(Clone, Default)]
struct RecordingApi {
    written: Arc<Mutex<HashMap<String, Written>>>,
    /// Claim reservations and Bindings in the order they were written: ("reserve" | "bind", pod);
    /// for a special claim for extended resources also "create" (pod), "status" (pod, claim
    /// name) and "delete" (claim name).
    writes: Arc<Mutex<Vec<(&'static str, String)>>>,
    /// PodGroup conditions asked to be written, in order.
    group_conditions: Arc<Mutex<Vec<crate::api::PodGroupCondition>>>,
    /// The pod status patch of a special claim fails while set.
    fail_extended_status: Arc<std::sync::atomic::AtomicBool>,
    /// Bindings fail (a server error) while set.
    fail_binds: Arc<std::sync::atomic::AtomicBool>,
    /// Claim deallocations fail (a conflict) while set.
    fail_deallocations: Arc<std::sync::atomic::AtomicBool>,
}

impl RecordingApi {
    fn of(&self, pod: &str) -> Written {
        self.written.lock().get(pod).cloned().unwrap_or_default()
    }

    fn with(&self, pod: &PodRef, f: impl FnOnce(&mut Written)) {
        f(self.written.lock().entry(pod.name.clone()).or_default());
    }
}

impl ClusterApi for RecordingApi {
    fn bind(
        &self,
        pod: &PodRef,
        node: &str,
        _annotations: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.writes.lock().push(("bind", pod.name.clone()));
        if self.fail_binds.load(std::sync::atomic::Ordering::Relaxed) {
            return futures::future::Either::Left(async { Err(ApiError::Other("the server is on fire".into())) });
        }
        self.with(pod, |w| w.bound_to = Some(node.to_string()));
        futures::future::Either::Right(async { Ok(()) })
    }

    fn record_scheduled(
        &self,
        pod: &PodRef,
        _node: &str,
        _at: SystemTime,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.with(pod, |w| w.scheduled_events += 1);
        async { Ok(()) }
    }

    fn record_unschedulable(&self, pod: &PodRef, message: &str) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.with(pod, |w| w.unschedulable.push(message.to_string()));
        async { Ok(()) }
    }

    fn record_scheduler_error(&self, pod: &PodRef, message: &str) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.with(pod, |w| w.scheduler_errors.push(message.to_string()));
        async { Ok(()) }
    }

    fn nominate(&self, pod: &PodRef, node: &str) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.with(pod, |w| w.nominated = Some(node.to_string()));
        async { Ok(()) }
    }

    fn reserve_claim(
        &self,
        write: crate::api::ClaimWrite<'_>,
    ) -> impl Future<Output = Result<Option<k8s_openapi::api::resource::v1::ResourceClaim>, ApiError>> + Send {
        self.writes.lock().push(("reserve", write.pod.name.clone()));
        async {
            // A write takes a moment: others may queue meanwhile.
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok(None)
        }
    }

    fn record_pod_group_condition(
        &self,
        condition: &crate::api::PodGroupCondition,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.group_conditions.lock().push(condition.clone());
        async { Ok(()) }
    }

    fn create_extended_claim(
        &self,
        pod: &PodRef,
        _claim: &proto::ExtendedResourceClaim,
    ) -> impl Future<Output = Result<k8s_openapi::api::resource::v1::ResourceClaim, ApiError>> + Send {
        self.writes.lock().push(("create", pod.name.clone()));
        let created = k8s_openapi::api::resource::v1::ResourceClaim {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                namespace: Some(pod.namespace.clone()),
                name: Some(format!("{}-extended-resources-x7k2p", pod.name)),
                uid: Some(format!("uid-claim-{}", pod.name)),
                ..Default::default()
            },
            ..Default::default()
        };
        async move { Ok(created) }
    }

    fn set_extended_resource_claim_status(
        &self,
        pod: &PodRef,
        claim_name: &str,
        _mappings: &[proto::ContainerExtendedResourceRequest],
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.writes
            .lock()
            .push(("status", format!("{} {claim_name}", pod.name)));
        let fail = self.fail_extended_status.load(std::sync::atomic::Ordering::Relaxed);
        let message = format!(
            "update pod {} ExtendedResourceClaimStatus: the server is on fire",
            pod.key()
        );
        async move {
            if fail {
                Err(ApiError::Other(message))
            } else {
                Ok(())
            }
        }
    }

    fn delete_claim(
        &self,
        claim: &crate::api::ClaimRef,
        _cached: Option<&k8s_openapi::api::resource::v1::ResourceClaim>,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.writes.lock().push(("delete", claim.name.clone()));
        async { Ok(()) }
    }

    fn deallocate_claim(
        &self,
        claim: &crate::api::ClaimRef,
        _cached: Option<&k8s_openapi::api::resource::v1::ResourceClaim>,
    ) -> impl Future<Output = Result<Option<k8s_openapi::api::resource::v1::ResourceClaim>, ApiError>> + Send {
        // With how many failures were reported when it was written.
        let reported: usize = self.written.lock().values().map(|w| w.unschedulable.len()).sum();
        self.writes.lock().push((
            "deallocate",
            format!("{} {}/{} reported={reported}", claim.uid, claim.namespace, claim.name),
        ));
        let fail = self.fail_deallocations.load(std::sync::atomic::Ordering::Relaxed);
        let message = format!(
            "Operation cannot be fulfilled on resourceclaims.resource.k8s.io \"{}\": the object has been modified; please apply your changes to the latest version and try again",
            claim.name
        );
        async move {
            if fail {
                Err(ApiError::Conflict(message))
            } else {
                Ok(None)
            }
        }
    }

    fn clear_nomination(&self, pod: &PodRef) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.with(pod, |w| w.nominated = None);
        async { Ok(()) }
    }

    fn preempt(
        &self,
        victim: &PodRef,
        preemptor: &Preemptor,
        _node: &str,
        _scheduler_name: &str,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.with(victim, |w| w.preempted_by = Some(preemptor.object().name.clone()));
        async { Ok(()) }
    }
}

/// How the scripted replica answers a pod.
#[derive(Debug, Clone)]
enum Answer {
    Node(&'static str),
    /// Placed on the node with a special claim for extended resources backed by DRA.
    NodeExtended(&'static str),
    Unschedulable(&'static str),
    /// Unschedulable, DynamicResources' PostFilter deallocating the pod's claim of this name.
    UnschedulableDeallocating(&'static str, &'static str),
    Nominate {
        node: &'static str,
        victims: &'static [&'static str],
    },
    Error(&'static str),
    /// No placement for the pod in the response.
    Nothing,
    /// The whole request refused: INVALID_ARGUMENT naming this pod's index.
    Invalid,
}

/// A decision replica that answers each pod by name as scripted (the first answer once, then
/// the next; the last one repeats), counting the times each pod was asked about.
#[derive(Clone, Default)]
struct ScriptedReplica {
    script: Arc<Mutex<HashMap<String, Vec<Answer>>>>,
    asked: Arc<Mutex<HashMap<String, u32>>>,
    /// Every Schedule fails with UNAVAILABLE while set.
    down: Arc<std::sync::atomic::AtomicBool>,
    /// Schedule calls refused while down.
    refused: Arc<std::sync::atomic::AtomicU32>,
    /// The pods of each Schedule call answered, by name.
    calls: Arc<Mutex<Vec<Vec<String>>>>,
    /// PodGroup outcomes added to every answer.
    group_results: Arc<Mutex<Vec<proto::PodGroupResult>>>,
    /// Every Schedule call hangs (after it is counted in `calls`) while set.
    hang: Arc<std::sync::atomic::AtomicBool>,
}

impl ScriptedReplica {
    fn script(&self, pod: &str, answers: &[Answer]) {
        self.script.lock().insert(pod.to_string(), answers.to_vec());
    }

    fn asked(&self, pod: &str) -> u32 {
        self.asked.lock().get(pod).copied().unwrap_or(0)
    }

    fn answer(&self, pod: &proto::Pod) -> Answer {
        let n = {
            let mut asked = self.asked.lock();
            let n = asked.entry(pod.name.clone()).or_default();
            *n += 1;
            *n as usize
        };
        let script = self.script.lock();
        let answers = script.get(&pod.name).map(Vec::as_slice).unwrap_or(&[]);
        answers
            .get(n - 1)
            .or_else(|| answers.last())
            .cloned()
            .unwrap_or(Answer::Nothing)
    }
}

#[tonic::async_trait]
impl PlacementService for ScriptedReplica {
    async fn sync_snapshot(
        &self,
        _request: Request<proto::SyncSnapshotRequest>,
    ) -> Result<Response<proto::SyncSnapshotResponse>, Status> {
        Ok(Response::new(proto::SyncSnapshotResponse {
            snapshot_id: "scripted".into(),
            ..Default::default()
        }))
    }

    async fn rank(&self, _request: Request<proto::RankRequest>) -> Result<Response<proto::RankResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn schedule(
        &self,
        request: Request<proto::ScheduleRequest>,
    ) -> Result<Response<proto::ScheduleResponse>, Status> {
        if self.down.load(std::sync::atomic::Ordering::Relaxed) {
            self.refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Err(Status::unavailable("scripted outage"));
        }
        let request = request.into_inner();
        self.calls
            .lock()
            .push(request.pods.iter().map(|p| p.name.clone()).collect());
        while self.hang.load(std::sync::atomic::Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut placements = Vec::new();
        for (i, pod) in request.pods.iter().enumerate() {
            let mut claim_allocations = Vec::new();
            let outcome = match self.answer(pod) {
                Answer::Node(node) => Some(Outcome::NodeName(node.into())),
                Answer::NodeExtended(node) => {
                    claim_allocations.push(extended_allocation(&pod.namespace, node));
                    Some(Outcome::NodeName(node.into()))
                }
                Answer::Unschedulable(message) => Some(Outcome::Unschedulable(proto::Unschedulable {
                    message: message.into(),
                    ..Default::default()
                })),
                Answer::UnschedulableDeallocating(message, claim) => Some(Outcome::Unschedulable(proto::Unschedulable {
                    message: message.into(),
                    deallocate_claim: Some(proto::ClaimDeallocation {
                        claim_namespace: pod.namespace.clone(),
                        claim_name: claim.into(),
                        claim_uid: format!("uid-{claim}"),
                    }),
                    ..Default::default()
                })),
                Answer::Nominate { node, victims } => Some(Outcome::Unschedulable(proto::Unschedulable {
                    message: format!("0/2 nodes are available: 2 Insufficient cpu. preemption: found a potential placement for pod on node {node}, preempting {} victims", victims.len()),
                    nominated_node_name: node.into(),
                    victim_uids: victims.iter().map(|v| format!("uid-{v}")).collect(),
                    gang: if pod.scheduling_group.is_empty() {
                        String::new()
                    } else {
                        format!("{}/{}", pod.namespace, pod.scheduling_group)
                    },
                    ..Default::default()
                })),
                Answer::Error(message) => Some(Outcome::Unschedulable(proto::Unschedulable {
                    message: message.into(),
                    error: true,
                    ..Default::default()
                })),
                Answer::Nothing => continue,
                Answer::Invalid => {
                    return Err(Status::invalid_argument(format!(
                        "pods[{i}].containers[0].requests[\"cpu\"]: invalid quantity"
                    )))
                }
            };
            placements.push(proto::Placement {
                pod_uid: pod.uid.clone(),
                outcome,
                claim_allocations,
                ..Default::default()
            });
        }
        Ok(Response::new(proto::ScheduleResponse {
            placements,
            pod_groups: self.group_results.lock().clone(),
            ..Default::default()
        }))
    }

    async fn list_policies(
        &self,
        _request: Request<proto::ListPoliciesRequest>,
    ) -> Result<Response<proto::ListPoliciesResponse>, Status> {
        Ok(Response::new(proto::ListPoliciesResponse::default()))
    }
}

/// A special claim for one `example.com/gpu` of the class `gpu.example.com`, allocated on `node`.
fn extended_allocation(namespace: &str, node: &str) -> proto::ClaimAllocation {
    proto::ClaimAllocation {
        claim_namespace: namespace.into(),
        allocation: Some(proto::AllocationResult {
            devices: vec![proto::DeviceRequestAllocationResult {
                request: "container-0-request-0".into(),
                driver: "gpu.example.com".into(),
                pool: node.into(),
                device: "gpu-0".into(),
                ..Default::default()
            }],
            node_selector: None,
            allocation_timestamp_seconds: None,
        }),
        extended_resource_claim: Some(proto::ExtendedResourceClaim {
            requests: vec![proto::DeviceRequest {
                name: "container-0-request-0".into(),
                exactly: Some(proto::ExactDeviceRequest {
                    device_class_name: "gpu.example.com".into(),
                    allocation_mode: "ExactCount".into(),
                    count: 1,
                    ..Default::default()
                }),
                first_available: vec![],
            }],
            request_mappings: vec![proto::ContainerExtendedResourceRequest {
                container_name: "main".into(),
                resource_name: "example.com/gpu".into(),
                request_name: "container-0-request-0".into(),
            }],
        }),
        ..Default::default()
    }
}

/// Serves `replica` on a local port.
async fn serve(replica: ScriptedReplica) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a local port");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(PlacementServiceServer::new(replica))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    addr
}

fn node(name: &str) -> proto::Node {
    proto::Node {
        name: name.into(),
        allocatable: [
            ("cpu".to_string(), "4".to_string()),
            ("pods".to_string(), "110".to_string()),
        ]
        .into(),
        ..Default::default()
    }
}

fn pod(name: &str, node_name: &str) -> PodInfo {
    PodInfo {
        spec: proto::Pod {
            uid: format!("uid-{name}"),
            namespace: "ns".into(),
            name: name.into(),
            node_name: node_name.into(),
            ..Default::default()
        },
        scheduler_name: SCHEDULER.into(),
        ..Default::default()
    }
}

/// A leading binder over `api` deciding with a replica at `addr`, run until the test ends; with a
/// short batch window and backoff so that retries come quickly.
struct Harness {
    binder: Binder<RecordingApi>,
    api: RecordingApi,
    stop: watch::Sender<bool>,
    run: tokio::task::JoinHandle<()>,
    _leader: watch::Sender<bool>,
    metrics: Arc<BinderMetrics>,
}

impl Harness {
    /// The binder's `/metrics` text.
    fn metrics_text(&self) -> String {
        self.metrics.encode()
    }

    async fn start(replica: &ScriptedReplica) -> Self {
        Self::start_with(replica, |_| {}).await
    }

    /// [`Harness::start`] with the binder's configuration changed by `tune`.
    async fn start_with(replica: &ScriptedReplica, tune: impl FnOnce(&mut BinderConfig)) -> Self {
        let addr = serve(replica.clone()).await;
        let pool = Arc::new(
            ReplicaPool::new(
                EndpointSource::Static(vec![format!("http://{addr}")]),
                ReplicaConfig {
                    call_timeout: Duration::from_secs(5),
                    eject_for: Duration::from_millis(50),
                    ..ReplicaConfig::default()
                },
            )
            .expect("a replica pool"),
        );
        let mut config = BinderConfig {
            scheduler_names: vec![SCHEDULER.into()],
            batch_window: Duration::from_millis(20),
            queue: QueueConfig {
                initial_backoff: Duration::from_millis(50),
                max_backoff: MAX_BACKOFF,
                ..QueueConfig::default()
            },
            ..BinderConfig::default()
        };
        tune(&mut config);
        let api = RecordingApi::default();
        let (leader, leader_rx) = watch::channel(true);
        let metrics = Arc::new(BinderMetrics::new());
        let binder = Binder::new(config, api.clone(), pool, Arc::clone(&metrics), leader_rx);
        binder.handle(ClusterEvent::NodeApplied(node("n1")));
        binder.handle(ClusterEvent::NodeApplied(node("n2")));
        binder.set_synced();
        let (stop, run) = spawn_run(&binder);
        Self {
            binder,
            api,
            stop,
            run,
            _leader: leader,
            metrics,
        }
    }

    /// Waits (up to 10 s) until `done` holds of what was written.
    async fn until(&self, what: &str, done: impl Fn(&RecordingApi) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !done(&self.api) {
            assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.run.await;
    }
}

#[tokio::test]
async fn each_outcome_of_a_batch_is_dispatched_as_kube_scheduler_does() {
    let replica = ScriptedReplica::default();
    replica.script("placed", &[Answer::Node("n1")]);
    replica.script(
        "full",
        &[Answer::Unschedulable(
            "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
        )],
    );
    replica.script("extender-failed", &[Answer::Error("extender example failed: 500")]);
    replica.script("unanswered", &[Answer::Nothing, Answer::Node("n2")]);
    let h = Harness::start(&replica).await;
    for name in ["placed", "full", "extender-failed", "unanswered"] {
        h.binder.handle(ClusterEvent::PodApplied(pod(name, "")));
    }
    h.until("every pod settled", |api| {
        api.of("placed").scheduled_events == 1
            && !api.of("full").unschedulable.is_empty()
            && !api.of("extender-failed").scheduler_errors.is_empty()
            && api.of("unanswered").bound_to.is_some()
    })
    .await;

    // Placed: bound to its node, with its Scheduled event, once.
    let placed = h.api.of("placed");
    assert_eq!((placed.bound_to.as_deref(), placed.scheduled_events), (Some("n1"), 1));
    // Unschedulable: PodScheduled=False with the service's message, never bound, parked until a
    // cluster event (not asked again meanwhile).
    let full = h.api.of("full");
    assert_eq!(
        full.unschedulable,
        vec!["0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.".to_string()]
    );
    assert_eq!(full.bound_to, None);
    // A scheduling error: SchedulerError with the message, not Unschedulable, and retried after
    // its backoff (asked again without any cluster event).
    let failed = h.api.of("extender-failed");
    assert_eq!(failed.scheduler_errors[0], "extender example failed: 500");
    assert!(failed.unschedulable.is_empty() && failed.bound_to.is_none());
    h.until("the errored pod asked again", |_| replica.asked("extender-failed") >= 2)
        .await;
    // No answer: backed off, asked again, then bound as the second answer says.
    assert_eq!(h.api.of("unanswered").bound_to.as_deref(), Some("n2"));
    assert!(replica.asked("unanswered") >= 2);
    assert!(
        h.api.of("unanswered").unschedulable.is_empty(),
        "no answer is not unschedulable"
    );
    // A backed-off pod would have been asked again within MAX_BACKOFF; a parked one is not.
    tokio::time::sleep(MAX_BACKOFF * 2).await;
    assert_eq!(
        replica.asked("full"),
        1,
        "an unschedulable pod waits for a cluster event"
    );
    assert_eq!(replica.asked("placed"), 1);
    h.stop().await;
}

#[tokio::test]
async fn a_nominated_pod_preempts_its_victims_and_binds_once_they_are_gone() {
    let replica = ScriptedReplica::default();
    replica.script(
        "preemptor",
        &[Answer::Nominate {
            node: "n1",
            victims: &["victim"],
        }],
    );
    let h = Harness::start(&replica).await;
    h.binder.handle(ClusterEvent::PodApplied(pod("victim", "n1")));
    h.binder.handle(ClusterEvent::PodApplied(pod("preemptor", "")));
    h.until("the victim preempted and the preemptor nominated", |api| {
        api.of("victim").preempted_by.is_some() && api.of("preemptor").nominated.is_some()
    })
    .await;
    assert_eq!(h.api.of("victim").preempted_by.as_deref(), Some("preemptor"));
    assert_eq!(h.api.of("preemptor").nominated.as_deref(), Some("n1"));
    assert_eq!(
        h.api.of("preemptor").unschedulable,
        vec!["0/2 nodes are available: 2 Insufficient cpu. preemption: found a potential placement for pod on node n1, preempting 1 victims".to_string()]
    );
    assert_eq!(
        h.api.of("preemptor").bound_to,
        None,
        "not bound while its victim exists"
    );
    h.binder.handle(ClusterEvent::PodDeleted {
        uid: "uid-victim".into(),
    });
    h.until("the preemptor bound", |api| api.of("preemptor").bound_to.is_some())
        .await;
    assert_eq!(
        h.api.of("preemptor").bound_to.as_deref(),
        Some("n1"),
        "on its nominated node"
    );
    assert_eq!(h.binder.nominations_waiting(), 0);
    h.stop().await;
}

#[tokio::test]
async fn a_shadow_backend_that_hangs_does_not_delay_the_primarys_binding() {
    let replica = ScriptedReplica::default();
    replica.script("placed", &[Answer::Node("n1")]);
    let shadow = ScriptedReplica::default();
    shadow.script("placed", &[Answer::Node("n2")]);
    shadow.hang.store(true, std::sync::atomic::Ordering::Relaxed);
    let shadow_addr = serve(shadow.clone()).await;
    let h = Harness::start(&replica).await;
    let file =
        format!("shadows:\n  - {{name: slow, policy: default, backend: {{endpoints: [\"http://{shadow_addr}\"]}}}}\n");
    h.binder
        .replace_experiments(crate::experiments::ExperimentSet::parse(&file).expect("a valid file"))
        .expect("the shadow's backend set up");
    let started = tokio::time::Instant::now();
    h.binder.handle(ClusterEvent::PodApplied(pod("placed", "")));
    h.until("the pod bound", |api| api.of("placed").bound_to.is_some())
        .await;
    // The shadow's backend answers nothing before its 5 s call timeout: the primary's Binding
    // did not wait for it.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "bound after {:?}",
        started.elapsed()
    );
    assert_eq!(h.api.of("placed").bound_to.as_deref(), Some("n1"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while shadow.calls.lock().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "the shadow was never asked");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(shadow.calls.lock().clone(), vec![vec!["placed".to_string()]]);
    // Once it answers, its verdict is compared with the placement acted on.
    shadow.hang.store(false, std::sync::atomic::Ordering::Relaxed);
    let compared = || {
        h.binder
            .experiment_report()
            .shadows
            .iter()
            .map(|s| s.compared)
            .sum::<u64>()
    };
    while compared() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the shadow's verdict was never compared"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let report = h.binder.experiment_report();
    assert_eq!((report.shadows[0].compared, report.shadows[0].different_node), (1, 1));
    h.stop().await;
}

#[tokio::test]
async fn an_invalid_pod_is_reported_alone_and_the_rest_of_its_batch_is_decided() {
    let replica = ScriptedReplica::default();
    replica.script("good", &[Answer::Node("n1")]);
    replica.script("bad", &[Answer::Invalid]);
    let h = Harness::start(&replica).await;
    h.binder.handle(ClusterEvent::PodApplied(pod("good", "")));
    h.binder.handle(ClusterEvent::PodApplied(pod("bad", "")));
    h.until("both settled", |api| {
        api.of("good").bound_to.is_some() && !api.of("bad").unschedulable.is_empty()
    })
    .await;
    assert_eq!(h.api.of("good").bound_to.as_deref(), Some("n1"));
    let bad = h.api.of("bad");
    assert!(
        bad.unschedulable[0].starts_with("invalid pod: pods[") && bad.unschedulable[0].ends_with("invalid quantity"),
        "{:?}",
        bad.unschedulable
    );
    assert_eq!(bad.bound_to, None);
    h.stop().await;
}

#[tokio::test]
async fn a_batch_no_replica_answers_is_backed_off_and_decided_again() {
    let replica = ScriptedReplica::default();
    replica.script("a", &[Answer::Node("n1")]);
    replica.script("b", &[Answer::Node("n2")]);
    replica.down.store(true, std::sync::atomic::Ordering::Relaxed);
    let h = Harness::start(&replica).await;
    h.binder.handle(ClusterEvent::PodApplied(pod("a", "")));
    h.binder.handle(ClusterEvent::PodApplied(pod("b", "")));
    // The batch is refused, backed off and asked again (refused again) before anything changes.
    h.until("the batch refused twice", |_| {
        replica.refused.load(std::sync::atomic::Ordering::Relaxed) >= 2
    })
    .await;
    assert_eq!(
        (h.api.of("a"), h.api.of("b")),
        (Written::default(), Written::default()),
        "nothing written while no replica answers"
    );
    assert_eq!(h.binder.pending(), 2, "both still queued");
    replica.down.store(false, std::sync::atomic::Ordering::Relaxed);
    h.until("both bound once the replica answers", |api| {
        api.of("a").bound_to.is_some() && api.of("b").bound_to.is_some()
    })
    .await;
    assert_eq!(
        (h.api.of("a").bound_to.as_deref(), h.api.of("b").bound_to.as_deref()),
        (Some("n1"), Some("n2"))
    );
    h.stop().await;
}

#[tokio::test]
async fn a_pod_group_change_leaves_pods_parked_on_volumes_while_a_claim_change_moves_them() {
    use crate::projection::{TrackedKey, TrackedObject};
    let replica = ScriptedReplica::default();
    replica.script(
        "with-volume",
        &[Answer::Unschedulable(
            "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind.",
        )],
    );
    let h = Harness::start(&replica).await;
    let mut p = pod("with-volume", "");
    p.spec.volumes.push(proto::Volume {
        name: "data".into(),
        claim_name: "data".into(),
        ..Default::default()
    });
    h.binder.handle(ClusterEvent::PodApplied(p));
    h.until("the pod parked as unschedulable", |api| {
        !api.of("with-volume").unschedulable.is_empty()
    })
    .await;
    // A PodGroup is no volume or device: added or deleted, it lets no such pod fit.
    h.binder
        .handle(ClusterEvent::ObjectApplied(TrackedObject::PodGroup(proto::PodGroup {
            namespace: "ns".into(),
            name: "g".into(),
            ..Default::default()
        })));
    h.binder
        .handle(ClusterEvent::ObjectDeleted(TrackedKey::PodGroup("ns/g".into())));
    tokio::time::sleep(MAX_BACKOFF * 2).await;
    assert_eq!(
        replica.asked("with-volume"),
        1,
        "still parked after the PodGroup events"
    );
    // A claim's change may: the pod is decided again.
    h.binder.handle(ClusterEvent::ObjectApplied(TrackedObject::Claim(
        proto::PersistentVolumeClaim {
            namespace: "ns".into(),
            name: "data".into(),
            ..Default::default()
        },
    )));
    h.until("the pod decided again", |_| replica.asked("with-volume") >= 2)
        .await;
    h.stop().await;
}

#[tokio::test]
async fn a_pod_group_larger_than_a_batch_is_decided_whole_in_one_call() {
    use crate::projection::TrackedObject;
    let replica = ScriptedReplica::default();
    let members: Vec<String> = (0..5).map(|i| format!("member-{i}")).collect();
    for m in &members {
        replica.script(m, &[Answer::Node("n1")]);
    }
    // Batches of 2 pods: the group of 5 is pulled whole into the batch of its first members.
    let h = Harness::start_with(&replica, |c| c.batch_size = 2).await;
    h.binder
        .handle(ClusterEvent::ObjectApplied(TrackedObject::PodGroup(proto::PodGroup {
            namespace: "ns".into(),
            name: "g".into(),
            gang: Some(proto::GangSchedulingPolicy { min_count: 5 }),
            ..Default::default()
        })));
    for m in &members {
        let mut p = pod(m, "");
        p.spec.scheduling_group = "g".into();
        h.binder.handle(ClusterEvent::PodApplied(p));
    }
    h.until("every member bound", |api| {
        members.iter().all(|m| api.of(m).bound_to.is_some())
    })
    .await;
    let calls = replica.calls.lock().clone();
    assert_eq!(calls.len(), 1, "one Schedule call for the group: {calls:?}");
    let mut sent = calls[0].clone();
    sent.sort();
    assert_eq!(sent, members);
    h.stop().await;
}

#[tokio::test]
async fn a_pod_groups_members_wait_for_its_victims_and_are_decided_again_together() {
    use crate::projection::TrackedObject;
    let replica = ScriptedReplica::default();
    let members = ["m0", "m1"];
    for m in members {
        replica.script(
            m,
            &[
                Answer::Nominate {
                    node: "n1",
                    victims: &["victim"],
                },
                Answer::Node("n1"),
            ],
        );
    }
    let h = Harness::start(&replica).await;
    h.binder
        .handle(ClusterEvent::ObjectApplied(TrackedObject::PodGroup(proto::PodGroup {
            namespace: "ns".into(),
            name: "g".into(),
            uid: "uid-g".into(),
            gang: Some(proto::GangSchedulingPolicy { min_count: 2 }),
            ..Default::default()
        })));
    h.binder.handle(ClusterEvent::PodApplied(pod("victim", "n1")));
    for m in members {
        let mut p = pod(m, "");
        p.spec.scheduling_group = "g".into();
        h.binder.handle(ClusterEvent::PodApplied(p));
    }
    h.until("the victim preempted and both members nominated", |api| {
        api.of("victim").preempted_by.is_some() && members.iter().all(|m| api.of(m).nominated.is_some())
    })
    .await;
    assert_eq!(
        h.api.of("victim").preempted_by.as_deref(),
        Some("g"),
        "evicted for the PodGroup, not for one of its pods"
    );
    // Many retry intervals pass while the victim terminates: no member is decided alone.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for m in members {
        assert_eq!(replica.asked(m), 1, "{m} waits for the group's victims");
        assert_eq!(h.api.of(m).bound_to, None);
    }
    h.binder.handle(ClusterEvent::PodDeleted {
        uid: "uid-victim".into(),
    });
    h.until("both members bound", |api| {
        members.iter().all(|m| api.of(m).bound_to.is_some())
    })
    .await;
    let calls = replica.calls.lock().clone();
    assert_eq!(calls.len(), 2, "the group decided, then decided again once: {calls:?}");
    let mut again = calls[1].clone();
    again.sort();
    assert_eq!(again, members, "decided again together, in one call");
    h.stop().await;
}

#[tokio::test]
async fn a_pod_with_claims_keeps_its_write_slot_from_its_claims_through_its_binding() {
    use crate::projection::TrackedObject;
    let replica = ScriptedReplica::default();
    let names = ["c0", "c1", "c2", "c3"];
    for n in names {
        replica.script(n, &[Answer::Node("n1")]);
    }
    // One write at a time: each pod's claim reservation is followed by its own Binding, not by
    // the other pods' reservations.
    let h = Harness::start_with(&replica, |c| c.bind_concurrency = 1).await;
    for n in names {
        h.binder
            .handle(ClusterEvent::ObjectApplied(TrackedObject::ResourceClaim(
                proto::ResourceClaim {
                    namespace: "ns".into(),
                    name: format!("claim-{n}"),
                    uid: format!("uid-claim-{n}"),
                    ..Default::default()
                },
            )));
    }
    for n in names {
        let mut p = pod(n, "");
        p.spec.resource_claims = vec![proto::PodResourceClaim {
            name: "gpu".into(),
            resource_claim_name: format!("claim-{n}"),
            ..Default::default()
        }];
        h.binder.handle(ClusterEvent::PodApplied(p));
    }
    h.until("every pod bound", |api| {
        names.iter().all(|n| api.of(n).bound_to.is_some())
    })
    .await;
    let writes = h.api.writes.lock().clone();
    assert_eq!(writes.len(), 8, "{writes:?}");
    for pair in writes.chunks(2) {
        assert_eq!(
            (pair[0].0, pair[1].0, &pair[0].1),
            ("reserve", "bind", &pair[1].1),
            "each reservation followed by its pod's Binding: {writes:?}"
        );
    }
    h.stop().await;
}

/// A PodGroup of `min_count` in `ns`, as the watch shows it.
fn pod_group(name: &str, min_count: i32) -> ClusterEvent {
    ClusterEvent::ObjectApplied(crate::projection::TrackedObject::PodGroup(proto::PodGroup {
        namespace: "ns".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        gang: Some(proto::GangSchedulingPolicy { min_count }),
        ..Default::default()
    }))
}

/// A pending pod of the PodGroup `group`, gated by `gates`.
fn member(name: &str, group: &str, gates: &[&str]) -> PodInfo {
    let mut p = pod(name, "");
    p.spec.scheduling_group = group.into();
    p.scheduling_gates = gates.iter().map(|g| g.to_string()).collect();
    p
}

#[tokio::test]
async fn a_pod_group_with_a_gated_member_is_held_whole_until_its_last_gate_goes() {
    let replica = ScriptedReplica::default();
    for m in ["m0", "m1", "m2"] {
        replica.script(m, &[Answer::Node("n1")]);
    }
    let h = Harness::start(&replica).await;
    // minCount 2: the two ungated members alone would meet it; kube-scheduler's queue keeps the
    // group's pods as one entity, gated while any of them is (runPreEnqueuePlugins).
    h.binder.handle(pod_group("g", 2));
    h.binder.handle(ClusterEvent::PodApplied(member("m0", "g", &[])));
    h.binder
        .handle(ClusterEvent::PodApplied(member("m1", "g", &["example.com/quota"])));
    h.binder.handle(ClusterEvent::PodApplied(member("m2", "g", &[])));
    tokio::time::sleep(MAX_BACKOFF * 3).await;
    assert!(
        replica.calls.lock().is_empty(),
        "no member decided while one is gated: {:?}",
        replica.calls.lock()
    );
    for m in ["m0", "m1", "m2"] {
        assert_eq!(
            h.api.of(m),
            Written::default(),
            "nothing written on {m} while the group is held"
        );
    }
    // The last gate goes: the whole group is decided in one call.
    h.binder.handle(ClusterEvent::PodApplied(member("m1", "g", &[])));
    h.until("every member bound", |api| {
        ["m0", "m1", "m2"].iter().all(|m| api.of(m).bound_to.is_some())
    })
    .await;
    let calls = replica.calls.lock().clone();
    assert_eq!(calls.len(), 1, "one Schedule call for the group: {calls:?}");
    assert_eq!(calls[0].len(), 3, "{calls:?}");
    h.stop().await;
}

#[tokio::test]
async fn a_label_gang_and_a_pod_group_of_the_same_name_are_two_gangs() {
    let replica = ScriptedReplica::default();
    for m in ["l0", "l1", "m0"] {
        replica.script(m, &[Answer::Node("n1")]);
    }
    let h = Harness::start(&replica).await;
    // The label gang ns/g of two, both pending: complete.
    for name in ["l0", "l1"] {
        let mut p = pod(name, "");
        p.spec.gang = Some(proto::Gang {
            name: "g".into(),
            min_members: 2,
        });
        h.binder.handle(ClusterEvent::PodApplied(p));
    }
    // A member of the PodGroup ns/g, which the watch has not shown yet: it waits for it.
    h.binder.handle(ClusterEvent::PodApplied(member("m0", "g", &[])));
    h.until("the label gang bound", |api| {
        ["l0", "l1"].iter().all(|m| api.of(m).bound_to.is_some())
    })
    .await;
    tokio::time::sleep(MAX_BACKOFF * 2).await;
    assert_eq!(replica.asked("m0"), 0, "the PodGroup's member waits for its PodGroup");
    // The PodGroup comes, minCount 1: its member is decided, apart from the label gang.
    h.binder.handle(pod_group("g", 1));
    h.until("the PodGroup's member bound", |api| api.of("m0").bound_to.is_some())
        .await;
    let calls = replica.calls.lock().clone();
    assert_eq!(calls.len(), 2, "{calls:?}");
    h.stop().await;
}

#[tokio::test]
async fn a_pod_groups_members_are_sent_in_the_order_they_arrived() {
    let replica = ScriptedReplica::default();
    // Names in the reverse of the arrival order: neither name order nor hash order is arrival.
    let members: Vec<String> = (0..8).rev().map(|i| format!("member-{i}")).collect();
    for m in &members {
        replica.script(m, &[Answer::Node("n1")]);
    }
    // Batches of 1: the first member is popped, the others pulled in to join it.
    let h = Harness::start_with(&replica, |c| c.batch_size = 1).await;
    h.binder.handle(pod_group("g", 8));
    for m in &members {
        h.binder.handle(ClusterEvent::PodApplied(member(m, "g", &[])));
    }
    h.until("every member bound", |api| {
        members.iter().all(|m| api.of(m).bound_to.is_some())
    })
    .await;
    let calls = replica.calls.lock().clone();
    assert_eq!(calls.len(), 1, "one Schedule call for the group: {calls:?}");
    assert_eq!(calls[0], members, "members in arrival order");
    h.stop().await;
}

#[tokio::test]
async fn a_pod_groups_condition_is_written_against_the_one_the_watch_shows() {
    let replica = ScriptedReplica::default();
    replica.script(
        "m0",
        &[Answer::Unschedulable("0/2 nodes are available: 2 Insufficient cpu.")],
    );
    replica.group_results.lock().push(proto::PodGroupResult {
        namespace: "ns".into(),
        name: "g".into(),
        reason: "Unschedulable".into(),
        message: "pod group is unschedulable, 0/1 placements are available".into(),
        ..Default::default()
    });
    // A binder just started: the watch shows the condition a previous binder wrote.
    let h = Harness::start(&replica).await;
    let seen = crate::api::ObservedCondition {
        status: "False".into(),
        reason: "Unschedulable".into(),
        message: "pod group is unschedulable, 0/2 placements are available".into(),
        observed_generation: 0,
        last_transition_time: "2026-11-29T00:00:00Z".into(),
    };
    h.binder.handle(ClusterEvent::PodGroupCondition {
        key: "ns/g".into(),
        condition: Some(seen.clone()),
    });
    h.binder.handle(pod_group("g", 1));
    h.binder.handle(ClusterEvent::PodApplied(member("m0", "g", &[])));
    h.until("the group's condition written", |api| {
        !api.group_conditions.lock().is_empty()
    })
    .await;
    let written = h.api.group_conditions.lock()[0].clone();
    assert_eq!((written.scheduled, written.reason.as_str()), (false, "Unschedulable"));
    assert_eq!(
        written.current,
        Some(seen),
        "the write is made against the condition on the object"
    );
    h.stop().await;
}

/// kube 1.37's `scheduler_pending_pods` queues for a PodGroup's held pods: `incomplete` while the
/// PodGroup is not there, `gated` while GangScheduling's PreEnqueue holds them for minCount.
#[tokio::test]
async fn held_pod_group_members_count_as_kubes_incomplete_then_gated() {
    let replica = ScriptedReplica::default();
    let h = Harness::start(&replica).await;
    h.binder.handle(ClusterEvent::PodApplied(member("m0", "g", &[])));
    h.until("m0 held for its PodGroup", |_| h.binder.queue_counts().incomplete == 1)
        .await;
    assert_eq!(h.binder.queue_counts().gated, 0);
    assert_eq!(h.binder.queue_counts().held, 1, "held pods are still pending work");
    assert!(
        h.metrics_text()
            .contains("scheduler_pending_pods{queue=\"incomplete\"} 1"),
        "{}",
        h.metrics_text()
    );
    // The PodGroup comes, asking for two: m0 is now short of members.
    h.binder.handle(pod_group("g", 2));
    h.until("m0 held for minCount", |_| h.binder.queue_counts().gated == 1)
        .await;
    assert_eq!(h.binder.queue_counts().incomplete, 0);
    assert_eq!(h.binder.queue_counts().held, 1);
    h.stop().await;
}

/// kube's `updatePodGroupCondition`: a group once scheduled is not turned False by a later cycle
/// for its extra pods, also while the watch has not yet shown the True condition written.
#[tokio::test]
async fn a_scheduled_pod_groups_condition_is_not_turned_false_before_the_watch_shows_it() {
    let replica = ScriptedReplica::default();
    replica.script("m0", &[Answer::Node("n1")]);
    replica.script(
        "m1",
        &[Answer::Unschedulable("0/1 nodes are available: 1 Insufficient cpu.")],
    );
    replica.group_results.lock().push(proto::PodGroupResult {
        namespace: "ns".into(),
        name: "g".into(),
        reason: "Scheduled".into(),
        ..Default::default()
    });
    let h = Harness::start(&replica).await;
    h.binder.handle(pod_group("g", 1));
    h.binder.handle(ClusterEvent::PodApplied(member("m0", "g", &[])));
    h.until("m0 bound and the condition written", |api| {
        api.of("m0").bound_to.is_some() && !api.group_conditions.lock().is_empty()
    })
    .await;
    // The next cycle, for the extra member, finds no room: the service says Unschedulable.
    *replica.group_results.lock() = vec![proto::PodGroupResult {
        namespace: "ns".into(),
        name: "g".into(),
        reason: "Unschedulable".into(),
        message: "pod group is unschedulable, 0/1 placements are available".into(),
        ..Default::default()
    }];
    h.binder.handle(ClusterEvent::PodApplied(member("m1", "g", &[])));
    h.until("m1 reported unschedulable", |api| {
        !api.of("m1").unschedulable.is_empty()
    })
    .await;
    let written: Vec<_> = h
        .api
        .group_conditions
        .lock()
        .iter()
        .map(|c| (c.scheduled, c.reason.clone()))
        .collect();
    assert_eq!(written, [(true, "Scheduled".to_string())], "never regressed to False");
    h.stop().await;
}

/// DynamicResources' PreBind for a pod's extended resources backed by DRA (kube's `bindClaim`
/// for the special claim): the claim created, allocated and reserved, the pod's
/// `status.extendedResourceClaimStatus` naming the created claim, then the Binding, in that
/// order; the pod has no claim of its own in `spec.resourceClaims`.
#[tokio::test]
async fn a_pod_with_extended_resources_gets_its_claim_created_reserved_and_named_before_its_binding() {
    let replica = ScriptedReplica::default();
    replica.script("g", &[Answer::NodeExtended("n1")]);
    let h = Harness::start(&replica).await;
    h.binder.handle(ClusterEvent::PodApplied(pod("g", "")));
    h.until("g bound", |api| api.of("g").bound_to.is_some()).await;
    let writes = h.api.writes.lock().clone();
    assert_eq!(
        writes,
        [
            ("create", "g".to_string()),
            ("reserve", "g".to_string()),
            ("status", "g g-extended-resources-x7k2p".to_string()),
            ("bind", "g".to_string()),
        ]
    );
    assert_eq!(h.api.of("g").bound_to.as_deref(), Some("n1"));
    h.stop().await;
}

/// A failed PreBind of the special claim: the claim created is deleted (kube's Unreserve,
/// `deleteClaim`), the pod is not bound, and it gets kube's `SchedulerError` with the
/// plugin's message; it is decided again after its backoff.
#[tokio::test]
async fn a_failed_prebind_of_the_extended_claim_deletes_it_and_reports_kubes_error() {
    let replica = ScriptedReplica::default();
    replica.script("g", &[Answer::NodeExtended("n1")]);
    let h = Harness::start(&replica).await;
    h.api
        .fail_extended_status
        .store(true, std::sync::atomic::Ordering::Relaxed);
    h.binder.handle(ClusterEvent::PodApplied(pod("g", "")));
    h.until("g's scheduler error", |api| !api.of("g").scheduler_errors.is_empty())
        .await;
    let writes = h.api.writes.lock().clone();
    assert_eq!(
        writes[..4],
        [
            ("create", "g".to_string()),
            ("reserve", "g".to_string()),
            ("status", "g g-extended-resources-x7k2p".to_string()),
            ("delete", "g-extended-resources-x7k2p".to_string()),
        ]
    );
    assert_eq!(
        h.api.of("g").scheduler_errors[0],
        "running PreBind plugin \"DynamicResources\": update pod ns/g ExtendedResourceClaimStatus: the server is on fire"
    );
    assert_eq!(h.api.of("g").bound_to, None);
    // Decided again after its backoff: once the write works, bound.
    h.api
        .fail_extended_status
        .store(false, std::sync::atomic::Ordering::Relaxed);
    h.until("g bound on a later attempt", |api| api.of("g").bound_to.is_some())
        .await;
    h.stop().await;
}

/// DynamicResources' PostFilter: a decision naming a claim to deallocate has it written (the
/// claim's uid the precondition) before the pod's failure is reported, with the decision's
/// message; kube's PostFilter writes it inside the scheduling cycle.
#[tokio::test]
async fn a_claim_post_filter_deallocates_is_written_before_the_failure_is_reported() {
    const MESSAGE: &str = "0/2 nodes are available: 1 Insufficient cpu, 1 resourceclaim not available on the node. \
                           deallocation of ResourceClaim completed, preemption: 0/2 nodes are available: \
                           2 No preemption victims found for incoming pod.";
    let replica = ScriptedReplica::default();
    replica.script("d", &[Answer::UnschedulableDeallocating(MESSAGE, "gpu")]);
    let h = Harness::start(&replica).await;
    h.binder.handle(ClusterEvent::PodApplied(pod("d", "")));
    h.until("d reported", |api| !api.of("d").unschedulable.is_empty()).await;
    assert_eq!(
        h.api.writes.lock().clone(),
        [("deallocate", "uid-gpu ns/gpu reported=0".to_string())]
    );
    assert_eq!(h.api.of("d").unschedulable, [MESSAGE]);
    assert!(h
        .metrics_text()
        .contains("binder_claim_deallocations_total{result=\"deallocated\"} 1"));
    h.stop().await;
}

/// A deallocation the API server refuses: kube's PostFilter returns the error, which stands as
/// the message's PostFilter part (DefaultPreemption does not run); the pod is still unschedulable.
#[tokio::test]
async fn a_refused_deallocation_puts_the_error_where_kube_puts_it() {
    let replica = ScriptedReplica::default();
    replica.script(
        "d",
        &[Answer::UnschedulableDeallocating(
            "0/1 nodes are available: 1 resourceclaim not available on the node. deallocation of ResourceClaim completed, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
            "gpu",
        )],
    );
    let h = Harness::start(&replica).await;
    h.api
        .fail_deallocations
        .store(true, std::sync::atomic::Ordering::Relaxed);
    h.binder.handle(ClusterEvent::PodApplied(pod("d", "")));
    h.until("d reported", |api| !api.of("d").unschedulable.is_empty()).await;
    assert_eq!(
        h.api.of("d").unschedulable,
        [
            "0/1 nodes are available: 1 resourceclaim not available on the node. Operation cannot be fulfilled on \
          resourceclaims.resource.k8s.io \"gpu\": the object has been modified; please apply your changes to the \
          latest version and try again"
        ]
    );
    assert!(h
        .metrics_text()
        .contains("binder_claim_deallocations_total{result=\"error\"} 1"));
    h.stop().await;
}

/// A pod asking for an extended resource a DeviceClass backs, parked unschedulable, is decided
/// again when a DRA object changes (kube's DynamicResources requeues it on such events), as a pod
/// with claims is; a pod asking for a device plugin's resource stays parked.
#[tokio::test]
async fn a_pod_asking_for_a_dra_backed_extended_resource_is_moved_by_a_slice_change() {
    use crate::projection::TrackedObject;
    let replica = ScriptedReplica::default();
    let message = "0/2 nodes are available: 2 cannot allocate all claims.";
    replica.script("dra", &[Answer::Unschedulable(message)]);
    replica.script("plugin", &[Answer::Unschedulable(message)]);
    let h = Harness::start(&replica).await;
    h.binder.handle(ClusterEvent::ObjectApplied(TrackedObject::DeviceClass(
        proto::DeviceClass {
            name: "gpu".into(),
            extended_resource_name: "example.com/gpu".into(),
            ..Default::default()
        },
    )));
    for (name, resource) in [("dra", "example.com/gpu"), ("plugin", "nvidia.com/gpu")] {
        let mut p = pod(name, "");
        p.spec.containers = vec![proto::Container {
            name: "main".into(),
            requests: [(resource.to_string(), "1".to_string())].into(),
            ..Default::default()
        }];
        h.binder.handle(ClusterEvent::PodApplied(p));
    }
    h.until("both parked as unschedulable", |api| {
        !api.of("dra").unschedulable.is_empty() && !api.of("plugin").unschedulable.is_empty()
    })
    .await;
    h.binder
        .handle(ClusterEvent::ObjectApplied(TrackedObject::ResourceSlice(
            proto::ResourceSlice {
                name: "n1-gpus".into(),
                driver: "gpu.example.com".into(),
                pool_name: "n1".into(),
                node_name: "n1".into(),
                ..Default::default()
            },
        )));
    h.until("the DRA pod decided again", |_| replica.asked("dra") >= 2)
        .await;
    tokio::time::sleep(MAX_BACKOFF * 2).await;
    assert_eq!(replica.asked("plugin"), 1, "the device plugin's pod stays parked");
    h.stop().await;
}

/// A Binding that fails for good after the special claim was created: the claim is deleted (kube's
/// Unreserve, `deleteClaim`) before the pod is decided again.
#[tokio::test]
async fn a_failed_binding_deletes_the_special_claim_its_prebind_created() {
    let replica = ScriptedReplica::default();
    replica.script("g", &[Answer::NodeExtended("n1")]);
    let h = Harness::start_with(&replica, |c| c.bind_attempts = 1).await;
    h.api.fail_binds.store(true, std::sync::atomic::Ordering::Relaxed);
    h.binder.handle(ClusterEvent::PodApplied(pod("g", "")));
    h.until("the special claim deleted", |api| {
        api.writes.lock().iter().any(|(w, _)| *w == "delete")
    })
    .await;
    let writes = h.api.writes.lock().clone();
    assert_eq!(
        writes[..5],
        [
            ("create", "g".to_string()),
            ("reserve", "g".to_string()),
            ("status", "g g-extended-resources-x7k2p".to_string()),
            ("bind", "g".to_string()),
            ("delete", "g-extended-resources-x7k2p".to_string()),
        ]
    );
    h.stop().await;
}

// DeviceTaintRules: in snapshots and deltas, and pods requeued when one changes.
/// Runs `binder`'s loop in a task until `true` is sent on the returned sender.
fn spawn_run<A: ClusterApi>(binder: &Binder<A>) -> (watch::Sender<bool>, tokio::task::JoinHandle<()>) {
    let (stop, mut stopped) = watch::channel(false);
    let running = binder.clone();
    let run = tokio::spawn(async move {
        running
            .run(async move {
                let _ = stopped.wait_for(|s| *s).await;
            })
            .await;
    });
    (stop, run)
}

mod device_taint_rules;
mod walk;
