//! DynamicResources' PreBind of the binder against the fake API server over the real protocol:
//! claims written from the binder's watch cache with kube-scheduler's requests (no read of a
//! claim or a DeviceClass), conflicts answered by one read and a retry as kube's
//! `retry.RetryOnConflict` does (5 attempts, then kube's PreBind error and Unreserve), and two
//! pods of one batch sharing a claim writing it one after the other, both reserved.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use placement_binder::kube_api::{KubeApi, KubeApiConfig};
use placement_binder::leader::Leadership;
use placement_binder::metrics::BinderMetrics;
use placement_binder::replicas::{EndpointSource, ReplicaConfig, ReplicaPool};
use placement_binder::{Binder, BinderConfig};
use placement_scheduler::grpc::{serve, Metrics, ServerConfig};
use placement_tests::fake_apiserver::{matcher, Failure, FakeApiServer, Kind, RequestRecord};
use placement_tests::fixtures::{self, eventually, node};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(30);
const SCHEDULER: &str = "placement-scheduler";
const DRIVER: &str = "gpu.binder-dra.example.com";

/// A binder (no lease) and its decision replica against `server`.
struct Running {
    binder: Binder<KubeApi>,
    stop_binder: oneshot::Sender<()>,
    run: JoinHandle<()>,
    stop_watch: oneshot::Sender<()>,
    watch: JoinHandle<()>,
    stop_decisions: oneshot::Sender<()>,
}

async fn start(server: &FakeApiServer) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (stop_decisions, decisions_stopped) = oneshot::channel::<()>();
    tokio::spawn(serve(
        listener,
        ServerConfig::default(),
        Arc::new(Metrics::new()),
        async {
            let _ = decisions_stopped.await;
        },
    ));
    let client = server.client();
    let metrics = Arc::new(BinderMetrics::new());
    let replicas =
        Arc::new(ReplicaPool::new(EndpointSource::Static(vec![endpoint]), ReplicaConfig::default()).unwrap());
    let leadership = Leadership::always(&metrics);
    let api = KubeApi::new(
        client.clone(),
        KubeApiConfig {
            reporting_controller: SCHEDULER.into(),
            reporting_instance: format!("{SCHEDULER}-binder-0"),
            request_timeout: Duration::from_secs(5),
        },
    );
    let binder = Binder::new(
        BinderConfig::default(),
        api,
        replicas,
        Arc::clone(&metrics),
        leadership.receiver(),
    );
    let (stop_watch, watch_stopped) = oneshot::channel::<()>();
    let watch = tokio::spawn(placement_binder::watch::run(client, binder.clone(), async {
        let _ = watch_stopped.await;
    }));
    let (stop_binder, binder_stopped) = oneshot::channel::<()>();
    let run = {
        let binder = binder.clone();
        tokio::spawn(async move {
            binder
                .run(async {
                    let _ = binder_stopped.await;
                })
                .await
        })
    };
    Running {
        binder,
        stop_binder,
        run,
        stop_watch,
        watch,
        stop_decisions,
    }
}

impl Running {
    async fn stop(self) {
        let _ = self.stop_binder.send(());
        self.run.await.unwrap();
        let _ = self.stop_watch.send(());
        self.watch.await.unwrap();
        let _ = self.stop_decisions.send(());
    }
}

/// A node `n1` with four GPUs of [`DRIVER`], and the DeviceClass `gpu` selecting them with an
/// opaque configuration (which the allocation copies from the class).
fn cluster(server: &FakeApiServer) {
    server.create_node(node("n1", "8"));
    server.create_raw(
        Kind::DeviceClass,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
               "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}],
                        "config": [{"opaque": {"driver": DRIVER, "parameters": {"sharing": "none"}}}]}}),
    );
    let devices: Vec<Value> = (0..4)
        .map(|i| json!({"name": format!("gpu-{i}"), "attributes": {"model": {"string": "a100"}}}))
        .collect();
    server.create_raw(
        Kind::ResourceSlice,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpus"},
               "spec": {"driver": DRIVER, "nodeName": "n1",
                        "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                        "devices": devices}}),
    );
}

/// The claim `default/name` asking for one GPU of class `gpu`.
fn create_claim(server: &FakeApiServer, name: &str) {
    server.create_raw(
        Kind::ResourceClaim,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"name": name, "namespace": "default"},
               "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}),
    );
}

/// A pod `default/name` of placement using the claims `claims`.
fn create_pod(server: &FakeApiServer, name: &str, claims: &[&str]) {
    let mut p = serde_json::to_value(fixtures::pod("default", name, SCHEDULER, "100m", None)).unwrap();
    p["spec"]["resourceClaims"] = claims
        .iter()
        .enumerate()
        .map(|(i, c)| json!({"name": format!("gpu-{i}"), "resourceClaimName": c}))
        .collect();
    p["spec"]["containers"][0]["resources"]["claims"] = claims
        .iter()
        .enumerate()
        .map(|(i, _)| json!({"name": format!("gpu-{i}")}))
        .collect();
    server.create_pod(serde_json::from_value::<Pod>(p).unwrap());
}

fn claim(server: &FakeApiServer, name: &str) -> ResourceClaim {
    serde_json::from_value(
        server
            .get_raw(Kind::ResourceClaim, Some("default"), name)
            .expect("the claim exists"),
    )
    .unwrap()
}

fn pod_uid(server: &FakeApiServer, name: &str) -> String {
    server.get_pod("default", name).unwrap().metadata.uid.unwrap()
}

fn node_of(server: &FakeApiServer, name: &str) -> Option<String> {
    server.get_pod("default", name)?.spec?.node_name
}

fn reserved_for(server: &FakeApiServer, name: &str) -> Vec<String> {
    claim(server, name)
        .status
        .and_then(|s| s.reserved_for)
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.uid)
        .collect()
}

/// Requests on one object (not lists or watches): `(method, path below the namespace)`.
fn requests_on(server: &FakeApiServer, object: &str) -> Vec<(String, String)> {
    server
        .requests()
        .into_iter()
        .filter(|r: &RequestRecord| !r.watch && r.path.contains(object))
        .map(|r| {
            (
                r.method,
                r.path
                    .rsplit_once("/default/")
                    .map_or(r.path.clone(), |(_, p)| p.to_string()),
            )
        })
        .collect()
}

fn count(requests: &[(String, String)], method: &str, path: &str) -> usize {
    requests.iter().filter(|(m, p)| m == method && p == path).count()
}

/// The conflict the API server answers a write made from an older version of the claim.
fn conflict(name: &str) -> Failure {
    Failure {
        code: 409,
        reason: Some("Conflict".into()),
        message: Some(format!(
            "Operation cannot be fulfilled on resourceclaims.resource.k8s.io \"{name}\": the object has been \
             modified; please apply your changes to the latest version and try again"
        )),
        retry_after_seconds: None,
    }
}

fn failed_scheduling_notes(server: &FakeApiServer, pod: &str) -> Vec<String> {
    server
        .events()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("FailedScheduling") && e.regarding_name.as_deref() == Some(pod))
        .filter_map(|e| e.message)
        .collect()
}

/// A pod with a claim: the claim's finalizer, then its allocation (with the class's
/// configuration) and reservation, written from the watch's copies, conditional on the version
/// they were made from; no GET of the claim or of its DeviceClass. The pod's requests are
/// kube-scheduler's: the nomination, the two claim writes, the Binding, the event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_written_from_the_watch_with_no_read() {
    let server = FakeApiServer::start().await;
    cluster(&server);
    create_claim(&server, "gpu-render");
    let running = start(&server).await;
    create_pod(&server, "render", &["gpu-render"]);
    eventually(WAIT, "render bound", || async { node_of(&server, "render").is_some() }).await;
    eventually(WAIT, "render's Scheduled event", || async {
        server
            .events()
            .iter()
            .any(|e| e.reason.as_deref() == Some("Scheduled") && e.regarding_name.as_deref() == Some("render"))
    })
    .await;

    let on_claim = requests_on(&server, "/resourceclaims/gpu-render");
    assert_eq!(
        on_claim,
        [
            ("PATCH".to_string(), "resourceclaims/gpu-render".to_string()),
            ("PATCH".to_string(), "resourceclaims/gpu-render/status".to_string())
        ],
        "the finalizer, then the allocation and reservation; no read"
    );
    assert!(
        requests_on(&server, "/deviceclasses/").is_empty(),
        "the class comes from the watch"
    );
    let writes: Vec<RequestRecord> = server
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/resourceclaims/gpu-render"))
        .collect();
    for w in &writes {
        assert_eq!(w.content_type.as_deref(), Some("application/merge-patch+json"));
        let rv = w.body.as_ref().and_then(|b| b.pointer("/metadata/resourceVersion"));
        assert!(
            rv.and_then(Value::as_str).is_some_and(|v| !v.is_empty()),
            "{} is conditional on the version it was made from: {:?}",
            w.path,
            w.body
        );
    }
    // Per pod, kube-scheduler's writes and nothing else: nomination, finalizer, allocation and
    // reservation, Binding, Scheduled event.
    let on_pod = requests_on(&server, "/pods/render");
    assert_eq!(count(&on_pod, "PATCH", "pods/render/status"), 1, "{on_pod:?}");
    assert_eq!(count(&on_pod, "POST", "pods/render/binding"), 1, "{on_pod:?}");
    assert_eq!(on_pod.len(), 2, "{on_pod:?}");

    let c = claim(&server, "gpu-render");
    assert_eq!(
        c.metadata.finalizers.as_deref(),
        Some(&["resource.kubernetes.io/delete-protection".to_string()][..])
    );
    assert_eq!(reserved_for(&server, "gpu-render"), [pod_uid(&server, "render")]);
    let allocation = c.status.and_then(|s| s.allocation).expect("allocated");
    assert!(allocation.allocation_timestamp.is_some());
    let config = allocation.devices.and_then(|d| d.config).unwrap_or_default();
    assert_eq!(
        config.len(),
        1,
        "the class's configuration, from the watched class: {config:?}"
    );
    assert_eq!(config[0].source, "FromClass");
    // The claim written is assumed until the watch shows it.
    eventually(WAIT, "the written claim seen by the watch", || async {
        running.binder.assumed_resource_claims() == 0
    })
    .await;
    running.stop().await;
    server.shutdown().await;
}

/// A conflict on the claim's status write: one read of the claim, then the write again, and the
/// pod bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_reads_the_claim_once_and_writes_again() {
    let server = FakeApiServer::start().await;
    cluster(&server);
    create_claim(&server, "gpu-a");
    server.fail_next_with(1, matcher("PATCH", "/resourceclaims/gpu-a/status"), conflict("gpu-a"));
    let running = start(&server).await;
    create_pod(&server, "train", &["gpu-a"]);
    eventually(WAIT, "train bound", || async { node_of(&server, "train").is_some() }).await;

    let on_claim = requests_on(&server, "/resourceclaims/gpu-a");
    assert_eq!(count(&on_claim, "PATCH", "resourceclaims/gpu-a"), 1, "{on_claim:?}");
    assert_eq!(
        count(&on_claim, "PATCH", "resourceclaims/gpu-a/status"),
        2,
        "{on_claim:?}"
    );
    assert_eq!(
        count(&on_claim, "GET", "resourceclaims/gpu-a"),
        1,
        "one read after the conflict"
    );
    assert_eq!(on_claim.len(), 4, "{on_claim:?}");
    assert!(failed_scheduling_notes(&server, "train").is_empty());
    assert_eq!(reserved_for(&server, "gpu-a"), [pod_uid(&server, "train")]);
    running.stop().await;
    server.shutdown().await;
}

/// Conflicts on every attempt: after kube's 5 attempts the PreBind fails with kube's error, the
/// claim reserved before it is released (Unreserve), and the pod is not bound by that attempt;
/// decided again after its backoff, it is bound once the conflicts stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_on_every_attempt_fail_the_prebind_and_unreserve() {
    let server = FakeApiServer::start().await;
    cluster(&server);
    create_claim(&server, "gpu-a");
    create_claim(&server, "gpu-b");
    // Five attempts, each refused; a sixth would succeed (the pod's next PreBind).
    server.fail_next_with(5, matcher("PATCH", "/resourceclaims/gpu-b/status"), conflict("gpu-b"));
    let running = start(&server).await;
    create_pod(&server, "train", &["gpu-a", "gpu-b"]);
    eventually(WAIT, "train's PreBind failed", || async {
        !failed_scheduling_notes(&server, "train").is_empty()
    })
    .await;
    let notes = failed_scheduling_notes(&server, "train");
    assert!(
        notes[0].starts_with(
            "running PreBind plugin \"DynamicResources\": add allocation and reservation to claim default/gpu-b: \
             Operation cannot be fulfilled on resourceclaims.resource.k8s.io \"gpu-b\""
        ),
        "{notes:?}"
    );
    // gpu-a was reserved for the pod, then released: the Unreserve patch removes the pod.
    let unreserve: Vec<RequestRecord> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.path.ends_with("/resourceclaims/gpu-a/status"))
        .filter(|r| r.content_type.as_deref() == Some("application/strategic-merge-patch+json"))
        .collect();
    assert_eq!(unreserve.len(), 1, "gpu-a unreserved");
    let on_b = requests_on(&server, "/resourceclaims/gpu-b");
    assert_eq!(
        count(&on_b, "GET", "resourceclaims/gpu-b"),
        4,
        "a read after each of 4 conflicts: {on_b:?}"
    );

    eventually(WAIT, "train bound on its retry", || async {
        node_of(&server, "train").is_some()
    })
    .await;
    assert_eq!(server.bindings_attempted(), 1, "the failed attempt wrote no Binding");
    let uid = pod_uid(&server, "train");
    assert_eq!(reserved_for(&server, "gpu-a"), std::slice::from_ref(&uid));
    assert_eq!(reserved_for(&server, "gpu-b"), [uid]);
    let on_b = requests_on(&server, "/resourceclaims/gpu-b");
    assert_eq!(
        count(&on_b, "PATCH", "resourceclaims/gpu-b/status"),
        6,
        "5 refused, then the retry's: {on_b:?}"
    );
    running.stop().await;
    server.shutdown().await;
}

/// Two pods of one batch sharing a claim: the claim is allocated once, by the first pod's write
/// (slowed down here), and the second writes its reservation after it from the claim the first
/// wrote, not from the watch's older copy: both reserved, no read, no conflict, no failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pods_of_a_batch_sharing_a_claim_are_both_reserved() {
    let server = FakeApiServer::start().await;
    cluster(&server);
    create_claim(&server, "shared");
    create_pod(&server, "p1", &["shared"]);
    create_pod(&server, "p2", &["shared"]);
    server.delay_next(
        1,
        matcher("PATCH", "/resourceclaims/shared/status"),
        Duration::from_millis(500),
    );
    let running = start(&server).await;
    eventually(WAIT, "both pods bound", || async {
        node_of(&server, "p1").is_some() && node_of(&server, "p2").is_some()
    })
    .await;
    let mut reserved = reserved_for(&server, "shared");
    reserved.sort();
    let mut want = vec![pod_uid(&server, "p1"), pod_uid(&server, "p2")];
    want.sort();
    assert_eq!(reserved, want);
    let on_claim = requests_on(&server, "/resourceclaims/shared");
    assert_eq!(
        count(&on_claim, "PATCH", "resourceclaims/shared/status"),
        2,
        "{on_claim:?}"
    );
    assert_eq!(count(&on_claim, "GET", "resourceclaims/shared"), 0, "{on_claim:?}");
    assert!(server
        .requests()
        .iter()
        .filter(|r| r.path.contains("/resourceclaims/shared"))
        .all(|r| r.status < 300));
    for p in ["p1", "p2"] {
        assert!(failed_scheduling_notes(&server, p).is_empty(), "{p}");
    }
    running.stop().await;
    server.shutdown().await;
}
