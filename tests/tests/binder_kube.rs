//! The binder against the fake API server over the real protocol: kube-runtime watchers feed it,
//! an in-process decision replica places the pods, `KubeApi` writes Bindings, events and status
//! patches, and a Lease elects it leader.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use placement_binder::kube_api::{KubeApi, KubeApiConfig};
use placement_binder::leader::{LeaderConfig, Leadership};
use placement_binder::metrics::BinderMetrics;
use placement_binder::replicas::{EndpointSource, ReplicaConfig, ReplicaPool};
use placement_binder::run::{LogFormat, RunArgs};
use placement_binder::{Binder, BinderConfig};
use placement_scheduler::grpc::{serve, Metrics, ServerConfig};
use placement_tests::fake_apiserver::{matcher, FakeApiServer, FakeApiServerConfig};
use placement_tests::fixtures::{self, eventually, node};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

// DeviceTaintRules through the real watch (a file of its own: this one is long).
#[path = "binder_kube/device_taint_rules.rs"]
mod device_taint_rules;

const WAIT: Duration = Duration::from_secs(30);
const SCHEDULER: &str = "placement-scheduler";

/// A pod in `default` (see [`fixtures::pod`]).
fn pod(name: &str, scheduler: &str, cpu: &str, node_name: Option<&str>) -> Pod {
    fixtures::pod("default", name, scheduler, cpu, node_name)
}

/// CPU in millicores of a pod's requests (the quantities used here: `250m`, `1500m`, `10`).
fn millicpu(q: &str) -> i64 {
    match q.strip_suffix('m') {
        Some(m) => m.parse().unwrap(),
        None => q.parse::<i64>().unwrap() * 1000,
    }
}

fn pod_cpu(p: &Pod) -> i64 {
    p.spec
        .as_ref()
        .map(|s| {
            s.containers
                .iter()
                .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get("cpu"))
                .map(|q| millicpu(&q.0))
                .sum()
        })
        .unwrap_or(0)
}

fn node_of(p: &Pod) -> Option<String> {
    p.spec.as_ref().and_then(|s| s.node_name.clone())
}

fn scheduled_condition(p: &Pod) -> Option<(String, String, String)> {
    let c = p
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")?
        .clone();
    Some((c.status, c.reason.unwrap_or_default(), c.message.unwrap_or_default()))
}

/// A decision replica on a free port.
async fn decision_service() -> (String, oneshot::Sender<()>) {
    decision_service_with(ServerConfig::default()).await
}

/// A decision replica on a free port with this configuration.
async fn decision_service_with(config: ServerConfig) -> (String, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(serve(listener, config, Arc::new(Metrics::new()), async {
        let _ = stopped.await;
    }));
    (format!("http://{addr}"), stop)
}

/// A binder running against the fake: watchers, the scheduling loop and (optionally) a Lease.
struct Running {
    binder: Binder<KubeApi>,
    leadership: Leadership,
    metrics: Arc<BinderMetrics>,
    stop_binder: oneshot::Sender<()>,
    run: JoinHandle<()>,
    stop_watch: oneshot::Sender<()>,
    watch: JoinHandle<()>,
}

struct Options {
    identity: &'static str,
    /// Lease duration and grace in seconds; `None` for `--no-leader-elect`.
    lease: Option<(u64, u64)>,
    request_timeout: Duration,
    gang_timeout: Duration,
    nomination_timeout: Duration,
    /// The policy file whose bindVerb extender binds (the binder's `--policy-file`).
    policy_file: Option<std::path::PathBuf>,
    /// How long a PreBind waits for the PV controller.
    volume_bind_timeout: Duration,
    /// More decision replicas besides the first.
    more_endpoints: Vec<String>,
    /// Most pods per batch.
    batch_size: usize,
    /// Batches decided at once on node partitions.
    batches_in_flight: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            identity: "binder-0",
            lease: Some((15, 5)),
            request_timeout: Duration::from_secs(5),
            gang_timeout: Duration::from_secs(60),
            nomination_timeout: Duration::from_secs(90),
            policy_file: None,
            volume_bind_timeout: Duration::from_secs(600),
            more_endpoints: Vec::new(),
            batch_size: BinderConfig::default().batch_size,
            batches_in_flight: 1,
        }
    }
}

/// A decision service reading the policy file `config`, and a binder without a lease asking it
/// (reading the same file for its extenders' `bindVerb` when `binder_reads_it`).
async fn service_and_binder_with_policy_file(
    server: &FakeApiServer,
    config: &std::path::Path,
    binder_reads_it: bool,
) -> (oneshot::Sender<()>, Running) {
    let (endpoint, stop_decisions) = decision_service_with(ServerConfig {
        policy_file: Some(placement_scheduler::grpc::PolicyFileConfig {
            path: config.to_path_buf(),
            reload_interval: None,
        }),
        ..ServerConfig::default()
    })
    .await;
    let running = start_binder(
        server,
        &endpoint,
        Options {
            lease: None,
            policy_file: binder_reads_it.then(|| config.to_path_buf()),
            ..Options::default()
        },
    );
    (stop_decisions, running)
}

fn start_binder(server: &FakeApiServer, endpoint: &str, options: Options) -> Running {
    let client = server.client();
    let metrics = Arc::new(BinderMetrics::new());
    let replicas = Arc::new(
        ReplicaPool::new(
            EndpointSource::Static(
                std::iter::once(endpoint.to_string())
                    .chain(options.more_endpoints.iter().cloned())
                    .collect(),
            ),
            ReplicaConfig::default(),
        )
        .unwrap(),
    );
    let leadership = match options.lease {
        Some((duration_secs, grace_secs)) => Leadership::elect(
            client.clone(),
            LeaderConfig {
                identity: options.identity.into(),
                namespace: "kube-system".into(),
                lease_name: "placement-binder".into(),
                duration_secs,
                grace_secs,
            },
            Arc::clone(&metrics),
        )
        .unwrap(),
        None => Leadership::always(&metrics),
    };
    let api = KubeApi::new(
        client.clone(),
        KubeApiConfig {
            reporting_controller: SCHEDULER.into(),
            reporting_instance: format!("{SCHEDULER}-{}", options.identity),
            request_timeout: options.request_timeout,
        },
    );
    let binder = Binder::new(
        BinderConfig {
            gang_timeout: options.gang_timeout,
            nomination_timeout: options.nomination_timeout,
            volume_bind_timeout: options.volume_bind_timeout,
            batch_size: options.batch_size,
            batches_in_flight: options.batches_in_flight,
            extenders: options
                .policy_file
                .as_deref()
                .and_then(|path| placement_binder::run::bind_extenders(path, &metrics.extenders).unwrap()),
            ..BinderConfig::default()
        },
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
        leadership,
        metrics,
        stop_binder,
        run,
        stop_watch,
        watch,
    }
}

impl Running {
    /// Graceful shutdown as `run` does it: stop binding, release the lease, stop watching.
    async fn stop(self) {
        let _ = self.stop_binder.send(());
        self.run.await.unwrap();
        self.leadership.release().await;
        let _ = self.stop_watch.send(());
        self.watch.await.unwrap();
    }
}

/// Two replicas and two batches in flight, each on its own partition of the nodes: every pod is
/// bound once and no node is overcommitted; a pod pinned to a node of the other partition is sent
/// back and decided alone on the whole cluster, and reaches its node; a pod that fits nowhere gets
/// kube-scheduler's message for the whole cluster, not for a partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_in_flight_on_node_partitions_bind_each_pod_once_and_pinned_pods_reach_their_node() {
    use placement_binder::partitions::partition_of;
    let server = FakeApiServer::start().await;
    let client = server.client();
    // Six nodes of 2 CPUs, in both partitions, ordered so that each partition's nodes alternate:
    // the first batch holds pinned pods of both partitions, so one is always sent back.
    let names: Vec<String> = (0..40).map(|i| format!("n{i}")).collect();
    let (p0, p1): (Vec<&String>, Vec<&String>) = names.iter().partition(|n| partition_of(n, 2) == 0);
    let nodes: Vec<String> = p0
        .iter()
        .zip(&p1)
        .take(3)
        .flat_map(|(a, b)| [(*a).clone(), (*b).clone()])
        .collect();
    assert_eq!(nodes.len(), 6);
    for n in &nodes {
        server.create_node(node(n, "2"));
    }
    // One pinned pod per node first (kubernetes.io/hostname), then 30 others: 9 of 12 CPUs.
    for n in &nodes {
        let mut p = pod(&format!("pinned-{n}"), SCHEDULER, "250m", None);
        if let Some(spec) = p.spec.as_mut() {
            spec.node_selector = Some([("kubernetes.io/hostname".to_string(), n.clone())].into());
        }
        server.create_pod(p);
    }
    for i in 0..30 {
        server.create_pod(pod(&format!("web-{i}"), SCHEDULER, "250m", None));
    }
    server.create_pod(pod("huge", SCHEDULER, "10", None));

    let (first, stop_first) = decision_service().await;
    let (second, stop_second) = decision_service().await;
    let running = start_binder(
        &server,
        &first,
        Options {
            lease: None,
            more_endpoints: vec![second],
            batch_size: 4,
            batches_in_flight: 2,
            ..Options::default()
        },
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    eventually(WAIT, "every pod but huge bound and huge unschedulable", || {
        let pods = pods.clone();
        async move {
            let list = pods.list(&Default::default()).await.unwrap().items;
            let bound = list.iter().filter(|p| node_of(p).is_some()).count();
            let huge = list.iter().find(|p| p.metadata.name.as_deref() == Some("huge"));
            bound == 36 && huge.and_then(scheduled_condition).is_some_and(|c| c.0 == "False")
        }
    })
    .await;

    let list = pods.list(&Default::default()).await.unwrap().items;
    let mut cpu: HashMap<String, i64> = HashMap::new();
    for p in &list {
        if let Some(n) = node_of(p) {
            *cpu.entry(n).or_default() += pod_cpu(p);
        }
        let name = p.metadata.name.clone().unwrap_or_default();
        if let Some(n) = name.strip_prefix("pinned-") {
            assert_eq!(node_of(p).as_deref(), Some(n), "{name} must land on its node");
        }
    }
    for (n, used) in &cpu {
        assert!(*used <= 2000, "node {n} overcommitted: {used}m of 2000m");
    }
    let posts = server.requests_matching(&matcher("POST", "/binding"));
    assert_eq!(posts.len(), 36, "one Binding per pod");
    let huge = list
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("huge"))
        .unwrap();
    assert_eq!(
        scheduled_condition(huge).map(|c| c.2),
        Some("0/6 nodes are available: 6 Insufficient cpu. preemption: 0/6 nodes are available: 6 Preemption is not helpful for scheduling.".to_string())
    );
    assert_eq!(
        running.binder.most_batches_in_flight(),
        2,
        "two batches were decided at once"
    );
    assert!(running.metrics.batches_total("partition") > 0);
    assert!(
        running.metrics.batches_total("alone") > 0,
        "the sent-back and huge pods are decided alone"
    );
    assert!(
        running.metrics.partition_returns_total() > 0,
        "a pinned pod of the other partition was sent back"
    );
    running.stop().await;
    let _ = stop_first.send(());
    let _ = stop_second.send(());
}

/// Names of the pods in `default` with a node.
async fn bound(pods: &Api<Pod>) -> HashMap<String, String> {
    pods.list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| Some((p.metadata.name.clone()?, node_of(&p)?)))
        .collect()
}

/// Scheduled events written so far.
fn scheduled_events(server: &FakeApiServer) -> usize {
    server
        .events_v1()
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Scheduled"))
        .count()
}

/// The statuses of the Binding POSTs for one pod, sorted.
fn binding_statuses(server: &FakeApiServer, pod: &str) -> Vec<u16> {
    let mut s: Vec<u16> = server
        .requests_matching(&matcher("POST", &format!("/pods/{pod}/binding")))
        .iter()
        .map(|r| r.status)
        .collect();
    s.sort_unstable();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binder_binds_every_pod_once_over_the_kubernetes_api() {
    let server = FakeApiServer::start().await;
    let client = server.client();

    // 3 nodes × 2 CPUs; a pod bound before the binder starts takes 1.5 CPUs of n1. 18 pods of 250m
    // fill the remaining 4.5 CPUs exactly, so any overcommit would show; one 10-CPU pod fits nowhere.
    for n in ["n1", "n2", "n3"] {
        server.create_node(node(n, "2"));
    }
    server.create_pod(pod("already-running", "default-scheduler", "1500m", Some("n1")));
    server.create_pod(pod("not-ours", "default-scheduler", "250m", None));
    for i in 0..10 {
        server.create_pod(pod(&format!("web-{i}"), SCHEDULER, "250m", None));
    }
    server.create_pod(pod("huge", SCHEDULER, "10", None));

    let (endpoint, stop_decisions) = decision_service().await;
    let running = start_binder(&server, &endpoint, Options::default());

    // Pods created while the binder runs are placed too.
    for i in 10..18 {
        server.create_pod(pod(&format!("web-{i}"), SCHEDULER, "250m", None));
    }

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    eventually(WAIT, "every web pod bound and huge marked unschedulable", || {
        let pods = pods.clone();
        async move {
            let list = pods.list(&Default::default()).await.unwrap();
            let bound = list
                .items
                .iter()
                .filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with("web-")) && node_of(p).is_some())
                .count();
            let huge = list.items.iter().find(|p| p.metadata.name.as_deref() == Some("huge"));
            bound == 18 && huge.and_then(scheduled_condition).is_some_and(|c| c.0 == "False")
        }
    })
    .await;
    assert!(running.leadership.is_leader());
    assert!(running.binder.is_ready());
    assert_eq!(
        server
            .get_lease("kube-system", "placement-binder")
            .and_then(|l| l.spec?.holder_identity),
        Some("binder-0".to_string())
    );

    let list = pods.list(&Default::default()).await.unwrap().items;
    let by_name: HashMap<String, Pod> = list
        .iter()
        .map(|p| (p.metadata.name.clone().unwrap(), p.clone()))
        .collect();

    // Exactly one Binding per pod, none refused, and never one for a pod that is not ours.
    let posts = server.requests_matching(&matcher("POST", "/binding"));
    let mut per_pod: HashMap<String, usize> = HashMap::new();
    for r in &posts {
        let path = r.path_and_query.split('?').next().unwrap_or_default();
        let name = path
            .trim_end_matches("/binding")
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string();
        *per_pod.entry(name).or_default() += 1;
        let body = r.body.as_ref().expect("binding body");
        assert_eq!(body["kind"], "Binding");
        assert_eq!(body["target"]["kind"], "Node");
        assert!(
            body["metadata"]["uid"].is_string(),
            "the binding carries the pod's uid: {body}"
        );
    }
    assert_eq!(per_pod.len(), 18, "{per_pod:?}");
    assert!(
        per_pod.iter().all(|(name, n)| name.starts_with("web-") && *n == 1),
        "{per_pod:?}"
    );
    assert_eq!(server.bindings_conflicted(), 0);
    assert!(node_of(&by_name["not-ours"]).is_none());
    assert!(node_of(&by_name["huge"]).is_none());

    // No node overcommitted: the pod bound before the binder counts.
    let mut used: HashMap<String, i64> = HashMap::new();
    for p in &list {
        if let Some(n) = node_of(p) {
            *used.entry(n).or_default() += pod_cpu(p);
        }
    }
    for (n, cpu) in &used {
        assert!(*cpu <= 2000, "node {n} overcommitted: {cpu}m of 2000m ({used:?})");
    }

    // The events kube-scheduler writes (each follows its binding).
    eventually(WAIT, "a Scheduled event per pod", || async {
        scheduled_events(&server) == 18
    })
    .await;
    eventually(WAIT, "a FailedScheduling event", || async {
        server
            .events_v1()
            .iter()
            .any(|e| e.reason.as_deref() == Some("FailedScheduling"))
    })
    .await;
    let events = server.events_v1();
    for i in 0..18 {
        let name = format!("web-{i}");
        let node = node_of(&by_name[&name]).unwrap();
        let scheduled: Vec<_> = events
            .iter()
            .filter(|e| e.reason.as_deref() == Some("Scheduled"))
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str()))
            .collect();
        assert_eq!(scheduled.len(), 1, "one Scheduled event for {name}");
        let e = scheduled[0];
        assert_eq!(e.type_.as_deref(), Some("Normal"));
        assert_eq!(e.action.as_deref(), Some("Binding"));
        assert_eq!(
            e.note.as_deref(),
            Some(format!("Successfully assigned default/{name} to {node}").as_str())
        );
        assert_eq!(e.reporting_controller.as_deref(), Some(SCHEDULER));
        assert_eq!(e.reporting_instance.as_deref(), Some("placement-scheduler-binder-0"));
        assert_eq!(
            e.regarding.as_ref().and_then(|r| r.uid.clone()),
            by_name[&name].metadata.uid.clone()
        );
    }
    let (status, reason, message) = scheduled_condition(&by_name["huge"]).unwrap();
    assert_eq!((status.as_str(), reason.as_str()), ("False", "Unschedulable"));
    assert_eq!(message, "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.");
    let failed: Vec<_> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
        .collect();
    assert!(!failed.is_empty());
    for e in &failed {
        assert_eq!(e.regarding.as_ref().and_then(|r| r.name.as_deref()), Some("huge"));
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert_eq!(e.action.as_deref(), Some("Scheduling"));
        assert_eq!(e.note.as_deref(), Some(message.as_str()));
    }
    assert!(events
        .iter()
        .all(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) != Some("not-ours")));

    // Deleting a bound pod frees its node: a new pod takes its place.
    let freed = node_of(&by_name["web-0"]).unwrap();
    pods.delete("web-0", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("late", SCHEDULER, "250m", None))
        .await
        .unwrap();
    eventually(WAIT, "the late pod bound where web-0 was", || {
        let pods = pods.clone();
        let freed = freed.clone();
        async move {
            let late = pods.get("late").await.unwrap();
            node_of(&late).is_some_and(|n| n == freed)
        }
    })
    .await;
    assert_eq!(server.count_requests(&matcher("POST", "/pods/late/binding")), 1);

    // Shutdown: stop binding, then give the lease up.
    let metrics = Arc::clone(&running.metrics);
    running.stop().await;
    assert_eq!(metrics.leader.get(), 0);
    let holder = server
        .get_lease("kube-system", "placement-binder")
        .and_then(|l| l.spec?.holder_identity);
    assert_eq!(holder, None, "the lease is released on shutdown");
    let _ = stop_decisions.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_and_timed_out_binds_are_retried_without_double_binding() {
    let server = FakeApiServer::start().await;
    server.create_node(node("n1", "4"));
    server.create_node(node("n2", "4"));
    for i in 0..6 {
        server.create_pod(pod(&format!("web-{i}"), SCHEDULER, "250m", None));
    }
    // web-1: a 500; web-2: throttled; web-3: held past the client's deadline, yet it takes effect.
    server.fail_next(1, matcher("POST", "/pods/web-1/binding"), 500);
    server.fail_next(1, matcher("POST", "/pods/web-2/binding"), 429);
    server.delay_next(1, matcher("POST", "/pods/web-3/binding"), Duration::from_millis(2_000));

    let (endpoint, stop_decisions) = decision_service().await;
    let running = start_binder(
        &server,
        &endpoint,
        Options {
            lease: None,
            request_timeout: Duration::from_millis(300),
            ..Options::default()
        },
    );
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    eventually(WAIT, "every pod bound", || {
        let pods = pods.clone();
        async move { bound(&pods).await.len() == 6 }
    })
    .await;
    // Let the held request land.
    eventually(WAIT, "the held binding answered", || async {
        server.count_requests(&matcher("POST", "/pods/web-3/binding")) >= 1
    })
    .await;

    assert_eq!(server.bindings_succeeded(), 6, "one successful Binding per pod");
    assert_eq!(binding_statuses(&server, "web-1"), [201, 500]);
    assert_eq!(binding_statuses(&server, "web-2"), [201, 429]);
    // The held request bound the pod; a retry made meanwhile, if any, bound it first and the held
    // one then conflicted: exactly one success either way.
    let web3 = binding_statuses(&server, "web-3");
    assert!(web3 == [201] || web3 == [201, 409], "{web3:?}");
    for i in [0, 4, 5] {
        assert_eq!(binding_statuses(&server, &format!("web-{i}")), [201]);
    }
    // The binder saw each pod bound once (by its own request, or as a 409 when its retry lost to
    // the held request); the 500 and the timeout were errors it retried. The 429 never reached it:
    // kube's client retries 429/503/504 itself, within the binder's per-request deadline.
    // web-3's held Binding timed out on the binder's side: whether the binder then counts an
    // answered bind for it (its retry's 201 or 409, or none when the watch showed the pod bound
    // first) depends on timing; that it was bound exactly once is asserted above.
    let m = &running.metrics;
    let answered = m.binds_total("ok") + m.binds_total("conflict");
    assert!(
        (5..=6).contains(&answered),
        "{answered} answered binds; web-3: {web3:?}"
    );
    assert_eq!(m.binds_total("error"), 2, "the 500 and the timeout");
    running.stop().await;
    let _ = stop_decisions.send(());
}

/// The API server fails a Binding (an answer that may have come after the write) and then the
/// lease: the binder loses leadership while the pod's bind is being retried. The pod keeps its
/// reservation and is not decided again (the decision service still holds it placed); once the
/// lease is back the binder binds it on the same node, with no FailedScheduling in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bind_interrupted_by_a_lost_lease_resumes_on_its_node_when_the_lease_returns() {
    let server = FakeApiServer::start().await;
    server.create_node(node("n1", "4"));
    let (endpoint, stop_decisions) = decision_service().await;
    let running = start_binder(
        &server,
        &endpoint,
        Options {
            lease: Some((2, 1)),
            ..Options::default()
        },
    );
    eventually(WAIT, "the binder leads", || async { running.leadership.is_leader() }).await;
    server.fail_next(1_000_000, matcher("POST", "/pods/web-0/binding"), 500);
    server.create_pod(pod("web-0", SCHEDULER, "250m", None));
    eventually(WAIT, "a Binding failed", || async {
        server.count_requests(&matcher("POST", "/pods/web-0/binding")) >= 1
    })
    .await;
    server.fail_next(1_000_000, matcher("*", "/leases/placement-binder"), 500);
    eventually(WAIT, "the lease lost", || async { !running.leadership.is_leader() }).await;
    let attempts = server.count_requests(&matcher("POST", "/pods/web-0/binding"));
    // While it does not lead, the binder neither binds nor decides the pod again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        server.count_requests(&matcher("POST", "/pods/web-0/binding")),
        attempts,
        "no Binding without the lease"
    );
    server.clear_faults();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    eventually(WAIT, "the pod bound", || {
        let pods = pods.clone();
        async move { bound(&pods).await.len() == 1 }
    })
    .await;
    assert_eq!(
        node_of(&server.get_pod("default", "web-0").unwrap()).as_deref(),
        Some("n1")
    );
    let statuses = binding_statuses(&server, "web-0");
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 1, "{statuses:?}");
    assert_eq!(failed_scheduling_notes(&server, "web-0"), Vec::<String>::new());
    assert_eq!(running.metrics.binds_total("ok"), 1);
    running.stop().await;
    let _ = stop_decisions.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_after_a_broken_watch_frees_pods_deleted_meanwhile() {
    let server = FakeApiServer::start().await;
    server.create_node(node("n1", "1"));
    for i in 0..4 {
        server.create_pod(pod(&format!("web-{i}"), SCHEDULER, "250m", None));
    }
    let (endpoint, stop_decisions) = decision_service().await;
    let running = start_binder(
        &server,
        &endpoint,
        Options {
            lease: None,
            ..Options::default()
        },
    );
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    eventually(WAIT, "the node filled", || {
        let pods = pods.clone();
        async move { bound(&pods).await.len() == 4 }
    })
    .await;

    // The pod watch breaks and cannot come back; meanwhile a bound pod is deleted and the history
    // compacted, so the binder only learns of it from the relist.
    server.fail_next(1_000_000, matcher("GET", "/api/v1/pods"), 503);
    server.drop_watches();
    assert!(
        server.wait_until(WAIT, |s| s.active_watches() == 15).await,
        "only the node, namespace, PodDisruptionBudget, six storage, four device, the PodGroup and the CompositePodGroup watches are back"
    );
    server.delete_pod("default", "web-0");
    server.compact();
    server.create_pod(pod("late", SCHEDULER, "250m", None));
    server.clear_faults();

    eventually(WAIT, "the late pod bound in the freed space", || async {
        server.get_pod("default", "late").and_then(|p| node_of(&p)).is_some()
    })
    .await;
    assert!(
        server.count_requests(&matcher("GET", "/api/v1/pods").watch(false)) >= 2,
        "the pods were relisted"
    );
    assert_eq!(server.bindings_succeeded(), 5);
    running.stop().await;
    let _ = stop_decisions.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_lease_holder_binds_and_a_standby_takes_over() {
    let server = FakeApiServer::start().await;
    server.create_node(node("n1", "8"));
    server.create_node(node("n2", "8"));
    for i in 0..10 {
        server.create_pod(pod(&format!("a-{i}"), SCHEDULER, "250m", None));
    }
    let (endpoint, stop_decisions) = decision_service().await;
    let options = |identity| Options {
        identity,
        lease: Some((2, 1)),
        ..Options::default()
    };
    let first = start_binder(&server, &endpoint, options("binder-a"));
    let holder = || {
        server
            .get_lease("kube-system", "placement-binder")
            .and_then(|l| l.spec?.holder_identity)
    };
    eventually(WAIT, "binder-a leads", || async {
        holder().as_deref() == Some("binder-a")
    })
    .await;
    let second = start_binder(&server, &endpoint, options("binder-b"));

    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    eventually(WAIT, "the first pods bound", || {
        let pods = pods.clone();
        async move { bound(&pods).await.len() == 10 }
    })
    .await;
    assert!(first.leadership.is_leader() && !second.leadership.is_leader());
    // The standby lists and watches what the leader does (its readiness may come after the
    // leader's first binds on a busy machine), without leading.
    eventually(WAIT, "the standby keeps its caches warm", || async {
        second.binder.is_ready()
    })
    .await;
    assert!(!second.leadership.is_leader(), "the standby does not lead");
    assert_eq!(second.metrics.binds_total("ok"), 0, "the standby never binds");

    // The leader shuts down; the standby takes over and binds what comes next.
    first.stop().await;
    for i in 0..10 {
        server.create_pod(pod(&format!("b-{i}"), SCHEDULER, "250m", None));
    }
    eventually(WAIT, "every pod bound after the takeover", || {
        let pods = pods.clone();
        async move { bound(&pods).await.len() == 20 }
    })
    .await;
    assert!(second.leadership.is_leader());
    assert_eq!(holder().as_deref(), Some("binder-b"));
    assert_eq!(server.bindings_succeeded(), 20);
    assert_eq!(server.bindings_conflicted(), 0);
    // Events follow the bindings.
    eventually(WAIT, "a Scheduled event per pod", || async {
        scheduled_events(&server) == 20
    })
    .await;
    let instances: HashMap<String, String> = server
        .events_v1()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Scheduled"))
        .filter_map(|e| Some((e.regarding?.name?, e.reporting_instance?)))
        .collect();
    assert_eq!(instances.len(), 20);
    for (pod, instance) in &instances {
        let expected = if pod.starts_with("a-") {
            "placement-scheduler-binder-a"
        } else {
            "placement-scheduler-binder-b"
        };
        assert_eq!(instance, expected, "{pod}");
    }
    second.stop().await;
    let _ = stop_decisions.send(());
}

/// `GET path` on the binder's HTTP port: (status code, body).
async fn http_get(addr: std::net::SocketAddr, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: binder\r\nconnection: close\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).await.ok()?;
    let code = out.split_whitespace().nth(1)?.parse().ok()?;
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((code, body))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_runs_from_a_kubeconfig_and_shuts_down_gracefully() {
    let server = FakeApiServer::start().await;
    server.create_node(node("n1", "4"));
    for i in 0..5 {
        server.create_pod(pod(&format!("web-{i}"), SCHEDULER, "250m", None));
    }
    let (endpoint, stop_decisions) = decision_service().await;
    let kubeconfig = std::env::temp_dir().join(format!(
        "binder-kube-{}-{}.yaml",
        std::process::id(),
        server.addr().port()
    ));
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\nusers:\n- name: binder\n  user: {{}}\n\
             contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: binder\n    namespace: placement-system\n\
             current-context: fake\n",
            server.url()
        ),
    )
    .unwrap();
    let http = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let args = RunArgs {
        kubeconfig: Some(kubeconfig.clone()),
        scheduler_names: vec![SCHEDULER.into()],
        decision_endpoints: vec![endpoint],
        decision_dns: None,
        decision_dns_refresh_secs: 10,
        decision_timeout_ms: 10_000,
        decision_tls_ca: None,
        decision_tls_cert: None,
        decision_tls_key: None,
        decision_tls_server_name: None,
        batch_size: 256,
        batch_window_ms: 5,
        batches_in_flight: 1,
        gang_timeout_seconds: 60,
        nomination_timeout_seconds: 90,
        volume_bind_timeout_seconds: 600,
        dra_binding_timeout_seconds: 600,
        bind_concurrency: 64,
        event_concurrency: 8,
        api_qps: 0,
        api_burst: 100,
        api_timeout_ms: 5_000,
        // The HTTP/2 transport against a plain-HTTP API server: HTTP/1.1 (no ALPN to offer h2 in).
        api_http2: true,
        policy: String::new(),
        policy_file: None,
        seed: 0,
        experiments_file: None,
        experiments_reload_secs: 10,
        leader_elect: true,
        no_leader_elect: false,
        lease_namespace: None,
        lease_name: "placement-binder".into(),
        lease_duration_secs: 15,
        lease_grace_secs: 5,
        identity: Some("agent-0".into()),
        reporting_controller: SCHEDULER.into(),
        http_listen: http,
        log_format: LogFormat::Text,
        tracing_config_file: None,
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let agent = tokio::spawn(placement_binder::run::run_until(args, async {
        let _ = stopped.await;
    }));

    eventually(WAIT, "the agent ready", || async {
        http_get(http, "/readyz").await.is_some_and(|(c, _)| c == 200)
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    eventually(WAIT, "every pod bound", || {
        let pods = pods.clone();
        async move { bound(&pods).await.len() == 5 }
    })
    .await;
    assert_eq!(http_get(http, "/healthz").await.map(|(c, _)| c), Some(200));
    let (code, metrics) = http_get(http, "/metrics").await.unwrap();
    assert_eq!(code, 200);
    assert!(metrics.contains("binder_leader 1"), "{metrics}");
    assert!(metrics.contains("binder_binds_total{result=\"ok\"} 5"), "{metrics}");
    // The lease lives in the kubeconfig context's namespace when none is given.
    let lease = server
        .get_lease("placement-system", "placement-binder")
        .and_then(|l| l.spec?.holder_identity);
    assert_eq!(lease.as_deref(), Some("agent-0"));
    eventually(WAIT, "a Scheduled event per pod", || async {
        scheduled_events(&server) == 5
    })
    .await;
    assert!(server
        .events_v1()
        .iter()
        .all(|e| e.reporting_instance.as_deref() == Some("placement-scheduler-agent-0")));

    let _ = stop.send(());
    tokio::time::timeout(WAIT, agent)
        .await
        .expect("the agent stops")
        .unwrap()
        .unwrap();
    let lease = server
        .get_lease("placement-system", "placement-binder")
        .and_then(|l| l.spec?.holder_identity);
    assert_eq!(lease, None, "the lease is released on shutdown");
    assert!(http_get(http, "/healthz").await.is_none(), "the HTTP server stopped");
    let _ = std::fs::remove_file(kubeconfig);
    let _ = stop_decisions.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binder_killed_mid_run_and_restarted_binds_every_pod_exactly_once() {
    const DELAY: Duration = Duration::from_millis(1500);
    let server = FakeApiServer::start().await;
    // 2 nodes × 2 CPUs hold exactly 16 pods of 250m: any double count or overcommit would show.
    for n in ["n1", "n2"] {
        server.create_node(node(n, "2"));
    }
    for i in 0..16 {
        server.create_pod(pod(&format!("job-{i}"), SCHEDULER, "250m", None));
    }
    // Every Binding waits DELAY in the server before it takes effect (as a slow API server's would);
    // one that arrived before the crash still lands afterwards.
    server.delay_next(16, matcher("POST", "/binding"), DELAY);
    let (endpoint, stop_decisions) = decision_service().await;
    let no_lease = || Options {
        lease: None,
        ..Options::default()
    };
    let first = start_binder(&server, &endpoint, no_lease());
    let client = server.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let binder = first.binder.clone();
    eventually(WAIT, "the first binder's binds dispatched", || {
        let assumed = binder.assumed();
        async move { assumed >= 16 }
    })
    .await;
    eventually(WAIT, "all 16 binds arrived and held by the server's delay", || async {
        server.requests_delayed() == 16
    })
    .await;
    assert_eq!(
        server.bindings_attempted(),
        0,
        "the crash comes while every bind is still in flight"
    );

    // Crash: no graceful stop, in-flight binds abandoned mid-request.
    first.run.abort();
    first.watch.abort();
    drop(first.stop_binder);
    drop(first.stop_watch);

    let second = start_binder(&server, &endpoint, no_lease());
    eventually(WAIT, "all 16 pods bound", || {
        let pods = pods.clone();
        async move { bound(&pods).await.len() == 16 }
    })
    .await;
    // The binds the first binder had sent land once the server's delay ends (they take effect
    // though their client is gone); then nothing may be bound twice.
    eventually(WAIT, "the abandoned binds processed", || async {
        server.requests_delayed() == 0
    })
    .await;
    assert!(
        server.bindings_attempted() > 16,
        "binds of both binders reached the server (the race was exercised): {}",
        server.bindings_attempted()
    );
    let placed = bound(&pods).await;
    assert_eq!(placed.len(), 16);
    for i in 0..16 {
        let name = format!("job-{i}");
        let ok = binding_statuses(&server, &name).iter().filter(|s| **s == 201).count();
        assert_eq!(
            ok,
            1,
            "{name} bound exactly once: {:?}",
            binding_statuses(&server, &name)
        );
    }
    let mut per_node: HashMap<&str, i64> = HashMap::new();
    for n in placed.values() {
        *per_node.entry(n.as_str()).or_default() += 250;
    }
    assert!(
        per_node.values().all(|m| *m <= 2000),
        "no node overcommitted: {per_node:?}"
    );
    second.stop().await;
    let _ = stop_decisions.send(());
}

/// A namespace labelled `tier: <tier>`.
fn tiered_namespace(name: &str, tier: &str) -> k8s_openapi::api::core::v1::Namespace {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    k8s_openapi::api::core::v1::Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("tier".to_string(), tier.to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A hostname pod affinity term for pods labelled `app: <app>` in namespaces labelled `tier: <tier>`.
fn namespace_selecting_term(app: &str, tier: &str) -> k8s_openapi::api::core::v1::PodAffinityTerm {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    k8s_openapi::api::core::v1::PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some([("app".to_string(), app.to_string())].into()),
            ..Default::default()
        }),
        namespace_selector: Some(LabelSelector {
            match_labels: Some([("tier".to_string(), tier.to_string())].into()),
            ..Default::default()
        }),
        topology_key: "kubernetes.io/hostname".into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_labels_from_the_watch_reach_anti_affinity_namespace_selectors() {
    use k8s_openapi::api::core::v1::{Affinity, PodAntiAffinity};
    let server = FakeApiServer::start().await;
    // The big node attracts the web pod (LeastAllocated) unless the guard's anti-affinity holds.
    server.create_node(node("big", "16"));
    server.create_node(node("small", "1"));
    for (name, tier) in [("shop", "web"), ("batch", "batch")] {
        server.create_namespace(tiered_namespace(name, tier));
    }
    let mut guard = fixtures::pod("batch", "guard", SCHEDULER, "100m", Some("big"));
    guard.spec.as_mut().unwrap().affinity = Some(Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![namespace_selecting_term("web", "web")]),
            ..Default::default()
        }),
        ..Default::default()
    });
    server.create_pod(guard);
    let mut web = fixtures::pod("shop", "web", SCHEDULER, "250m", None);
    web.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
    server.create_pod(web);
    let (endpoint, stop_decisions) = decision_service().await;
    let running = start_binder(
        &server,
        &endpoint,
        Options {
            lease: None,
            ..Options::default()
        },
    );
    eventually(WAIT, "the web pod bound", || async {
        server.get_pod("shop", "web").and_then(|p| node_of(&p)).is_some()
    })
    .await;
    let node = server.get_pod("shop", "web").and_then(|p| node_of(&p));
    assert_eq!(
        node.as_deref(),
        Some("small"),
        "the guard's namespace selector matched shop's labels"
    );
    running.stop().await;
    let _ = stop_decisions.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_label_change_requeues_pods_whose_affinity_selects_namespaces() {
    use k8s_openapi::api::core::v1::{Affinity, PodAffinity};
    let server = FakeApiServer::start().await;
    server.create_node(node("n1", "4"));
    server.create_namespace(tiered_namespace("batch", "other"));
    server.create_namespace(tiered_namespace("shop", "web"));
    let mut guard = fixtures::pod("batch", "guard", "default-scheduler", "100m", Some("n1"));
    guard.metadata.labels = Some([("app".to_string(), "guard".to_string())].into());
    server.create_pod(guard);
    // web must run beside a guard pod of a namespace labelled tier=batch: none is, yet.
    let mut web = fixtures::pod("shop", "web", SCHEDULER, "250m", None);
    web.spec.as_mut().unwrap().affinity = Some(Affinity {
        pod_affinity: Some(PodAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![namespace_selecting_term("guard", "batch")]),
            ..Default::default()
        }),
        ..Default::default()
    });
    server.create_pod(web);
    let (endpoint, stop_decisions) = decision_service().await;
    let running = start_binder(
        &server,
        &endpoint,
        Options {
            lease: None,
            ..Options::default()
        },
    );
    eventually(WAIT, "web reported unschedulable", || async {
        server
            .get_pod("shop", "web")
            .and_then(|p| condition(&p, "PodScheduled"))
            .is_some_and(|c| {
                c == (
                    "False".into(),
                    "Unschedulable".into(),
                    "0/1 nodes are available: 1 node(s) didn't match pod affinity rules. preemption: 0/1 nodes \
                 are available: 1 Preemption is not helpful for scheduling."
                        .into(),
                )
            })
    })
    .await;
    // The namespace gets the label: web is decided again at once (not after the 5-minute flush).
    server.update_namespace(tiered_namespace("batch", "batch"));
    eventually(WAIT, "web bound beside the guard", || async {
        server.get_pod("shop", "web").and_then(|p| node_of(&p)).as_deref() == Some("n1")
    })
    .await;
    running.stop().await;
    let _ = stop_decisions.send(());
}

fn with_priority(mut p: Pod, priority: i32) -> Pod {
    p.spec.as_mut().unwrap().priority = Some(priority);
    p
}

fn condition(p: &Pod, type_: &str) -> Option<(String, String, String)> {
    let c = p
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)?
        .clone();
    Some((c.status, c.reason.unwrap_or_default(), c.message.unwrap_or_default()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_nominates_deletes_victims_gracefully_then_binds() {
    let server = FakeApiServer::start().await;
    let client = server.client();
    server.create_node(node("n1", "2"));
    // A low-priority pod fills n1; a more important one cannot fit without evicting it.
    server.create_pod(with_priority(pod("low", "default-scheduler", "1500m", Some("n1")), 0));
    server.create_pod(with_priority(
        pod("keeper", "default-scheduler", "250m", Some("n1")),
        2000,
    ));
    let (endpoint, stop_decisions) = decision_service().await;
    let running = start_binder(&server, &endpoint, Options::default());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    eventually(WAIT, "the binder has seen the bound pods", || {
        let b = running.binder.clone();
        async move { b.is_ready() }
    })
    .await;
    create_preemptor(&pods, "urgent").await;

    eventually(WAIT, "the victim terminating and the preemptor nominated", || {
        let pods = pods.clone();
        async move {
            let low = pods.get("low").await.unwrap();
            let urgent = pods.get("urgent").await.unwrap();
            low.metadata.deletion_timestamp.is_some()
                && urgent.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()) == Some("n1")
        }
    })
    .await;
    let low = pods.get("low").await.unwrap();
    assert_eq!(
        condition(&low, "DisruptionTarget"),
        Some((
            "True".into(),
            "PreemptionByScheduler".into(),
            format!("{SCHEDULER}: preempting to accommodate a higher priority pod")
        ))
    );
    assert_eq!(
        low.metadata.deletion_grace_period_seconds,
        Some(30),
        "the victim's own grace period"
    );
    let urgent = pods.get("urgent").await.unwrap();
    let urgent_uid = urgent.metadata.uid.clone().unwrap();
    assert_eq!(node_of(&urgent), None, "not bound while the victim is still there");
    assert!(pods.get("keeper").await.unwrap().metadata.deletion_timestamp.is_none());
    eventually(WAIT, "the Preempted and FailedScheduling events", || {
        let server = &server;
        async move {
            let ev = server.events_v1();
            ev.iter().any(|e| e.reason.as_deref() == Some("Preempted"))
                && ev.iter().any(|e| e.reason.as_deref() == Some("FailedScheduling"))
        }
    })
    .await;
    let events = server.events_v1();
    let preempted = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("Preempted"))
        .unwrap();
    assert_eq!(
        preempted.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("low")
    );
    assert_eq!(
        preempted.related.as_ref().and_then(|r| r.name.as_deref()),
        Some("urgent")
    );
    assert_eq!(
        (preempted.type_.as_deref(), preempted.action.as_deref()),
        (Some("Normal"), Some("Preempting"))
    );
    assert_eq!(
        preempted.note.as_deref(),
        Some(format!("Preempted by pod {urgent_uid} on node n1").as_str())
    );
    let failed = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("FailedScheduling"))
        .unwrap();
    // kube-scheduler 1.37 appends preemption's success message to the fit error.
    assert_eq!(
        failed.note.as_deref(),
        Some(
            "0/1 nodes are available: 1 Insufficient cpu. preemption: found a potential placement for pod on node \
             n1, preempting 1 victims"
        )
    );
    assert_eq!(server.count_requests(&matcher("POST", "/pods/urgent/binding")), 0);

    // The kubelet stops the victim and deletes it for good: the preemptor is bound to n1.
    pods.delete("low", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually(WAIT, "the preemptor bound to the nominated node", || {
        let pods = pods.clone();
        async move { node_of(&pods.get("urgent").await.unwrap()).as_deref() == Some("n1") }
    })
    .await;
    assert_eq!(binding_statuses(&server, "urgent"), [201]);
    let metrics = running.metrics.encode();
    assert!(metrics.contains("binder_preemptions_total 1"), "{metrics}");
    assert!(metrics.contains("scheduler_preemption_victims_count 1"), "{metrics}");
    // One attempt per decision that found it unschedulable: the first, and any retry made while
    // the victim was still terminating.
    let attempts: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("scheduler_preemption_attempts_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    assert!(attempts >= 1, "{metrics}");
    // Bound once the victim went, by the watch or by a retry that found the room first.
    assert_eq!(
        running.metrics.nominations_total("victims_gone") + running.metrics.nominations_total("placed_on_retry"),
        1
    );
    running.stop().await;
    let _ = stop_decisions.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_victim_already_terminating_is_waited_for_not_deleted_again() {
    let server = FakeApiServer::start().await;
    let client = server.client();
    server.create_node(node("n1", "2"));
    server.create_pod(with_priority(pod("low", "default-scheduler", "1500m", Some("n1")), 0));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    // Someone else (a rollout, a user) deleted it: it terminates within its grace period.
    pods.delete("low", &DeleteParams::default()).await.unwrap();
    until_terminating(&pods, "low", "the pod terminating").await;
    let (endpoint, stop_decisions) = decision_service().await;
    let running = start_binder(&server, &endpoint, Options::default());
    eventually(WAIT, "the binder has seen the bound pods", || {
        let b = running.binder.clone();
        async move { b.is_ready() }
    })
    .await;
    create_preemptor(&pods, "urgent").await;
    // Its cpu still counts, so urgent is nominated to n1 with it as the victim; kube-scheduler
    // sends no second deletion (nor a DisruptionTarget condition) for a victim being deleted.
    eventually(WAIT, "urgent nominated to n1", || {
        let pods = pods.clone();
        async move {
            let urgent = pods.get("urgent").await.unwrap();
            urgent.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()) == Some("n1")
        }
    })
    .await;
    assert_eq!(
        server.count_requests(&matcher("DELETE", "/pods/low")),
        1,
        "only the first deletion"
    );
    assert_eq!(condition(&pods.get("low").await.unwrap(), "DisruptionTarget"), None);
    assert_eq!(
        node_of(&pods.get("urgent").await.unwrap()),
        None,
        "not bound while it is there"
    );
    pods.delete("low", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually(WAIT, "the preemptor bound to the nominated node", || {
        let pods = pods.clone();
        async move { node_of(&pods.get("urgent").await.unwrap()).as_deref() == Some("n1") }
    })
    .await;
    assert_eq!(server.count_requests(&matcher("DELETE", "/pods/low")), 2, "ours, twice");
    running.stop().await;
    let _ = stop_decisions.send(());
}

/// A PodDisruptionBudget over `app=<app>` in `default` with the disruption controller's status.
fn pdb(app: &str, disruptions_allowed: i32) -> k8s_openapi::api::policy::v1::PodDisruptionBudget {
    use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(format!("{app}-pdb")),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(LabelSelector {
                match_labels: Some([("app".to_string(), app.to_string())].into()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: Some(PodDisruptionBudgetStatus {
            disruptions_allowed: Some(disruptions_allowed),
            current_healthy: Some(1),
            desired_healthy: Some(1 - disruptions_allowed),
            expected_pods: Some(1),
            ..Default::default()
        }),
    }
}

fn labelled(mut p: Pod, app: &str) -> Pod {
    p.metadata.labels = Some([("app".to_string(), app.to_string())].into());
    p
}

/// Whether the pod is terminating (its deletion was asked for).
async fn terminating(pods: &Api<Pod>, name: &str) -> bool {
    pods.get(name).await.unwrap().metadata.deletion_timestamp.is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_spares_a_pod_its_disruption_budget_protects_until_the_budget_allows_it() {
    let server = FakeApiServer::start().await;
    let client = server.client();
    // Three full nodes, one low-priority pod each. Without budgets, the candidates tie and the
    // first node by name (n1, the db pod) is chosen.
    for n in ["n1", "n2", "n3"] {
        server.create_node(node(n, "2"));
    }
    server.create_pod(with_priority(
        labelled(pod("db", "default-scheduler", "1500m", Some("n1")), "db"),
        0,
    ));
    server.create_pod(with_priority(pod("web", "default-scheduler", "1500m", Some("n2")), 0));
    server.create_pod(with_priority(pod("web2", "default-scheduler", "1500m", Some("n3")), 0));
    server.create_pdb(pdb("db", 0));
    let (endpoint, stop_decisions) = decision_service().await;
    let running = start_binder(&server, &endpoint, Options::default());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    eventually(WAIT, "the binder synced, with the budget", || {
        let b = running.binder.clone();
        async move {
            b.is_ready()
                && b.pod_disruption_budgets()
                    .first()
                    .is_some_and(|p| p.disruptions_allowed == 0)
        }
    })
    .await;

    create_preemptor(&pods, "urgent").await;
    until_terminating(&pods, "web", "an unprotected victim terminating").await;
    assert!(
        !terminating(&pods, "db").await,
        "the budget (0 disruptions allowed) protects db"
    );
    assert!(!terminating(&pods, "web2").await, "one victim is enough");
    let urgent = pods.get("urgent").await.unwrap();
    assert_eq!(
        urgent.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()),
        Some("n2")
    );
    // The kubelet removes the victim: the preemptor is bound.
    pods.delete("web", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually(WAIT, "urgent bound to n2", || {
        let pods = pods.clone();
        async move { node_of(&pods.get("urgent").await.unwrap()).as_deref() == Some("n2") }
    })
    .await;

    // The disruption controller now allows one disruption of db: the tie goes to n1 again.
    server.update_pdb(pdb("db", 1));
    eventually(WAIT, "the binder sees the budget allow a disruption", || {
        let b = running.binder.clone();
        async move {
            b.pod_disruption_budgets()
                .first()
                .is_some_and(|p| p.disruptions_allowed == 1)
        }
    })
    .await;
    create_preemptor(&pods, "urgent2").await;
    until_terminating(&pods, "db", "db preempted now that its budget allows it").await;
    assert!(!terminating(&pods, "web2").await);
    assert_eq!(server.count_requests(&matcher("DELETE", "/pods/db")), 1);
    assert_eq!(server.count_requests(&matcher("DELETE", "/pods/web2")), 0);
    running.stop().await;
    let _ = stop_decisions.send(());
}

/// A low-priority pod on `node` whose finalizer keeps it terminating for ever once deleted.
fn stuck_pod(name: &str, node: &str) -> Pod {
    let mut p = with_priority(pod(name, "default-scheduler", "1500m", Some(node)), 0);
    p.metadata.finalizers = Some(vec!["example.com/never-done".into()]);
    p
}

fn nominated(p: &Pod) -> Option<String> {
    p.status.as_ref().and_then(|s| s.nominated_node_name.clone())
}

fn failed_scheduling_notes(server: &FakeApiServer, pod: &str) -> Vec<String> {
    server
        .events_v1()
        .iter()
        .filter(|e| {
            e.reason.as_deref() == Some("FailedScheduling")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod)
        })
        .filter_map(|e| e.note.clone())
        .collect()
}

/// Creates the pending pod `name` (1.5 cpu, priority 1000) that has to preempt.
async fn create_preemptor(pods: &Api<Pod>, name: &str) {
    pods.create(
        &PostParams::default(),
        &with_priority(pod(name, SCHEDULER, "1500m", None), 1000),
    )
    .await
    .unwrap();
}

/// Waits until the pod `name` is terminating (`what` names the wait in a timeout).
async fn until_terminating(pods: &Api<Pod>, name: &str, what: &str) {
    eventually(WAIT, what, || {
        let pods = pods.clone();
        async move { terminating(&pods, name).await }
    })
    .await;
}

/// Node n1 (2 cpu) full with a low-priority pod that a finalizer keeps from going, a binder with
/// this nomination timeout, synced, and the pending high-priority pod `urgent` (1.5 cpu) that
/// must preempt it: (API server, binder, the pods API, the decision service's stop).
async fn urgent_pod_behind_a_stuck_victim(
    nomination_timeout: Duration,
) -> (FakeApiServer, Running, Api<Pod>, oneshot::Sender<()>) {
    let server = FakeApiServer::start().await;
    server.create_node(node("n1", "2"));
    server.create_pod(stuck_pod("stuck", "n1"));
    let (endpoint, stop_decisions) = decision_service().await;
    let running = start_binder(
        &server,
        &endpoint,
        Options {
            nomination_timeout,
            ..Options::default()
        },
    );
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    eventually(WAIT, "the binder synced", || {
        let b = running.binder.clone();
        async move { b.is_ready() }
    })
    .await;
    create_preemptor(&pods, "urgent").await;
    (server, running, pods, stop_decisions)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preemptor_whose_victim_never_goes_binds_where_room_appears() {
    let (server, running, pods, stop_decisions) = urgent_pod_behind_a_stuck_victim(Duration::from_secs(600)).await;
    eventually(WAIT, "the victim terminating and urgent nominated to n1", || {
        let pods = pods.clone();
        async move {
            terminating(&pods, "stuck").await && nominated(&pods.get("urgent").await.unwrap()).as_deref() == Some("n1")
        }
    })
    .await;
    // Decided again while the victim terminates: no second preemption, kube-scheduler's words.
    eventually(WAIT, "a retry reported as not eligible to preempt again", || async {
        failed_scheduling_notes(&server, "urgent").iter().any(|n| {
            n == "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to a terminating pod on the nominated node."
        })
    })
    .await;
    assert_eq!(running.binder.nominations_waiting(), 1);
    assert_eq!(node_of(&pods.get("urgent").await.unwrap()), None);

    // Room appears elsewhere: the nominated pod is bound there at once, its nomination cleared.
    server.create_node(node("n2", "2"));
    eventually(WAIT, "urgent bound to n2 with no nominated node", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("urgent").await.unwrap();
            node_of(&p).as_deref() == Some("n2") && nominated(&p).is_none()
        }
    })
    .await;
    assert_eq!(binding_statuses(&server, "urgent"), [201]);
    assert_eq!(
        server.count_requests(&matcher("DELETE", "/pods/stuck")),
        1,
        "the victim is deleted once"
    );
    assert_eq!(running.binder.nominations_waiting(), 0);
    assert_eq!(running.metrics.nominations_total("placed_on_retry"), 1);
    assert!(terminating(&pods, "stuck").await, "the finalizer still holds it");
    running.stop().await;
    let _ = stop_decisions.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nomination_whose_victim_never_goes_is_given_up_after_the_timeout() {
    let (server, running, pods, stop_decisions) = urgent_pod_behind_a_stuck_victim(Duration::from_secs(2)).await;
    until_terminating(&pods, "stuck", "the victim terminating").await;
    let gave_up = "preemption: gave up the nominated node n1 after 2s: 1 victim(s) still terminating (default/stuck).";
    eventually(WAIT, "the nomination given up, cleared and reported", || {
        let (pods, server) = (pods.clone(), &server);
        async move {
            nominated(&pods.get("urgent").await.unwrap()).is_none()
                && failed_scheduling_notes(server, "urgent").iter().any(|n| n == gave_up)
        }
    })
    .await;
    let urgent = pods.get("urgent").await.unwrap();
    assert_eq!(node_of(&urgent), None, "never bound without room");
    assert_eq!(
        condition(&urgent, "PodScheduled"),
        Some(("False".into(), "Unschedulable".into(), gave_up.into()))
    );
    assert_eq!(running.metrics.nominations_total("timed_out"), 1);
    assert_eq!(running.binder.nominations_waiting(), 0);

    // A cluster event decides it again: the same victim is chosen and waited for, not deleted again.
    server.modify_node("n1", |n| {
        n.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("touched".into(), "yes".into());
    });
    eventually(WAIT, "urgent nominated again", || {
        let pods = pods.clone();
        async move { nominated(&pods.get("urgent").await.unwrap()).as_deref() == Some("n1") }
    })
    .await;
    assert_eq!(
        server.count_requests(&matcher("DELETE", "/pods/stuck")),
        1,
        "the victim is deleted once"
    );
    assert_eq!(binding_statuses(&server, "urgent"), Vec::<u16>::new());
    running.stop().await;
    let _ = stop_decisions.send(());
}

fn member(name: &str, gang: &str, min: &str, cpu: &str) -> Pod {
    let mut p = pod(name, SCHEDULER, cpu, None);
    p.metadata.labels = Some([("placement.dev/gang".to_string(), gang.to_string())].into());
    p.metadata.annotations = Some([("placement.dev/gang-min-members".to_string(), min.to_string())].into());
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_is_held_then_placed_whole_and_never_partly_bound() {
    let server = FakeApiServer::start().await;
    let client = server.client();
    server.create_node(node("n1", "2"));
    let (endpoint, stop_decisions) = decision_service().await;
    let running = start_binder(
        &server,
        &endpoint,
        Options {
            gang_timeout: Duration::from_secs(2),
            ..Options::default()
        },
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    // Two of three members: held, then reported once the gang timeout passes. Nothing is bound.
    for i in 0..2 {
        pods.create(
            &PostParams::default(),
            &member(&format!("train-{i}"), "train", "3", "1"),
        )
        .await
        .unwrap();
    }
    let waited = "gang \"default/train\" is not placed: it needs 3 members placed together, and only 2 exist \
                  (2 pending, 0 scheduled) after waiting 2s for the rest.";
    eventually(WAIT, "both members reported after the gang timeout", || {
        let pods = pods.clone();
        async move {
            let mut ok = true;
            for i in 0..2 {
                let p = pods.get(&format!("train-{i}")).await.unwrap();
                ok &= scheduled_condition(&p).is_some_and(|c| c.2 == waited);
            }
            ok
        }
    })
    .await;
    let train_bindings = |server: &FakeApiServer| server.count_requests(&matcher("POST", "/pods/train-"));
    assert_eq!(train_bindings(&server), 0);

    // The third member arrives: the gang is complete but only two of its 1-CPU members fit on the
    // 2-CPU node, so none is placed.
    pods.create(&PostParams::default(), &member("train-2", "train", "3", "1"))
        .await
        .unwrap();
    eventually(WAIT, "every member refused as a gang", || {
        let pods = pods.clone();
        async move {
            let mut ok = true;
            for i in 0..3 {
                let p = pods.get(&format!("train-{i}")).await.unwrap();
                ok &= scheduled_condition(&p).is_some_and(|c| {
                    c.2.starts_with(
                        "gang \"default/train\" is not placed: it needs 3 members placed together, and 2 fit",
                    )
                });
            }
            ok
        }
    })
    .await;
    assert_eq!(train_bindings(&server), 0, "a partial gang is never bound");

    // Room for all three: they are bound together.
    server.create_node(node("n2", "2"));
    eventually(WAIT, "the whole gang bound", || {
        let pods = pods.clone();
        async move { bound(&pods).await.keys().filter(|n| n.starts_with("train-")).count() == 3 }
    })
    .await;
    assert_eq!(train_bindings(&server), 3);
    let m = &running.metrics;
    assert!(m.gangs_total("held") >= 1 && m.gangs_total("timed_out") >= 1 && m.gangs_total("sent") >= 1);
    running.stop().await;
    let _ = stop_decisions.send(());
}

/// The example extender (a Python process) filters, scores and binds, configured by a
/// KubeSchedulerConfiguration given to the decision replica and to the binder: nginx pods are
/// bound by the extender (a Binding it failed to write is asked for again, never written twice),
/// a pod the extender rejects gets kube-scheduler's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extender_with_a_bind_verb_binds_the_pods_and_its_filter_rejects_others() {
    let server = FakeApiServer::start().await;
    server.create_node(node("n1", "4"));
    server.create_node(node("a-long-node-name", "4"));
    for name in ["nginx-1", "nginx-2", "reject-me"] {
        server.create_pod(pod(name, SCHEDULER, "250m", None));
    }
    // The extender's first Binding for nginx-2 fails: it answers an Error, the binder asks again.
    server.fail_next(1, matcher("POST", "/pods/nginx-2/binding"), 500);
    let extender = placement_tests::extender_process::ExtenderProcess::start(&["--api-server", &server.url()]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("scheduler-config.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: {SCHEDULER}
extenders:
  - urlPrefix: {}
    filterVerb: filter
    prioritizeVerb: prioritize
    bindVerb: bind
    weight: 1
    nodeCacheCapable: true
",
            extender.url()
        ),
    )
    .unwrap();
    let (stop_decisions, running) = service_and_binder_with_policy_file(&server, &config, true).await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    eventually(WAIT, "the nginx pods bound and reject-me unschedulable", || {
        let pods = pods.clone();
        async move {
            let bound = bound(&pods).await;
            let rejected = pods.get("reject-me").await.ok().and_then(|p| scheduled_condition(&p));
            bound.len() == 2 && rejected.is_some_and(|c| c.0 == "False")
        }
    })
    .await;
    let bound = bound(&pods).await;
    // The extender's prioritize (20 - len(name)) outweighs the equal built-in scores.
    assert_eq!(bound.get("nginx-1").map(String::as_str), Some("n1"));
    let rejected = pods.get("reject-me").await.unwrap();
    let (_, reason, message) = scheduled_condition(&rejected).unwrap();
    assert_eq!(reason, "Unschedulable");
    assert!(
        message.starts_with("0/2 nodes are available: 2 extender rejects pods named reject-*."),
        "{message}"
    );
    // Every Binding came from the extender, one success per pod.
    assert_eq!(server.bindings_succeeded(), 2);
    assert_eq!(binding_statuses(&server, "nginx-1"), [201]);
    assert_eq!(binding_statuses(&server, "nginx-2"), [201, 500]);
    let binds: Vec<(String, String)> = extender
        .requests()
        .into_iter()
        .filter(|(verb, _)| verb == "bind")
        .map(|(_, a)| {
            assert_eq!(a["PodNamespace"], "default");
            assert!(a["PodUID"].as_str().is_some_and(|u| !u.is_empty()));
            (
                a["PodName"].as_str().unwrap_or_default().to_string(),
                a["Node"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let mut names: Vec<&str> = binds.iter().map(|(p, _)| p.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["nginx-1", "nginx-2", "nginx-2"],
        "nginx-2 asked again after the extender's error"
    );
    let m = running.metrics.encode();
    let calls = format!(
        "binder_extender_calls_total{{extender=\"{}\",verb=\"bind\"}} 3",
        extender.url()
    );
    let errors = format!(
        "binder_extender_errors_total{{extender=\"{}\",verb=\"bind\"}} 1",
        extender.url()
    );
    assert!(m.lines().any(|l| l == calls), "{calls} in\n{m}");
    assert!(m.lines().any(|l| l == errors), "{errors}");
    running.stop().await;
    let _ = stop_decisions.send(());
}

/// An extender that cannot be reached fails the pod with kube-scheduler's error text and the
/// condition reason `SchedulerError`; the binder retries it after its backoff (no cluster event
/// needed), and once the extender answers the pod is placed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_extender_fails_the_pod_with_an_error_retried_with_backoff() {
    let server = FakeApiServer::start().await;
    server.create_node(node("n1", "4"));
    server.create_pod(pod("nginx-1", SCHEDULER, "250m", None));
    // A port nothing listens on yet.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("scheduler-config.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: {SCHEDULER}
extenders:
  - urlPrefix: http://127.0.0.1:{port}
    filterVerb: filter
"
        ),
    )
    .unwrap();
    let (stop_decisions, running) = service_and_binder_with_policy_file(&server, &config, true).await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    eventually(WAIT, "nginx-1 failed with the extender's error", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("nginx-1").await.unwrap();
            scheduled_condition(&p).is_some_and(|c| c.1 == "SchedulerError")
        }
    })
    .await;
    let (status, _, message) = scheduled_condition(&pods.get("nginx-1").await.unwrap()).unwrap();
    assert_eq!(status, "False");
    assert!(
        message.starts_with(&format!("Post \"http://127.0.0.1:{port}/filter\": ")),
        "{message}"
    );
    let m = running.metrics.encode();
    assert!(
        m.lines()
            .any(|l| l.starts_with("scheduler_schedule_attempts_total{") && l.contains("result=\"error\"")),
        "counted as an error attempt:\n{m}"
    );
    let _extender = placement_tests::extender_process::ExtenderProcess::start(&["--port", &port.to_string()]);
    eventually(WAIT, "nginx-1 bound once the extender answers", || {
        let pods = pods.clone();
        async move { bound(&pods).await.contains_key("nginx-1") }
    })
    .await;
    assert_eq!(server.bindings_succeeded(), 1);
    running.stop().await;
    let _ = stop_decisions.send(());
}

/// The custom-logic example through the binder: the framework plugin it stands for, written as a
/// CEL filter rule in the decision replica's policy file (placement's format), admits a pod whose
/// name contains `nginx` only on a node labelled `test=test` (a label whose `key/value` is
/// `test/test`), else `no match label`; other pods go anywhere. A node with the label key
/// `test/test` is not such a node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_plugin_as_a_cel_rule_keeps_nginx_pods_on_test_test_nodes() {
    let server = FakeApiServer::start().await;
    server.create_node(node("big", "8"));
    let labelled = |name: &str, cpu: &str, key: &str, value: &str| {
        let mut n = node(name, cpu);
        n.metadata
            .labels
            .get_or_insert_default()
            .insert(key.into(), value.into());
        n
    };
    server.create_node(labelled("decoy", "4", "test/test", ""));
    server.create_node(labelled("small-test", "2", "test", "test"));
    server.create_pod(pod("nginx-1", SCHEDULER, "250m", None));
    server.create_pod(pod("web-nginx-2", SCHEDULER, "250m", None));
    server.create_pod(pod("nginx-huge", SCHEDULER, "4", None));
    server.create_pod(pod("other-1", SCHEDULER, "250m", None));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("policies.yaml");
    std::fs::write(&config, SEED_PLUGIN_POLICY).unwrap();
    let (stop_decisions, running) = service_and_binder_with_policy_file(&server, &config, false).await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    eventually(WAIT, "three pods bound, nginx-huge unschedulable", || {
        let pods = pods.clone();
        async move {
            let huge = pods.get("nginx-huge").await.ok().and_then(|p| scheduled_condition(&p));
            bound(&pods).await.len() == 3 && huge.is_some_and(|c| c.0 == "False")
        }
    })
    .await;
    let bound = bound(&pods).await;
    assert_eq!(bound.get("nginx-1").map(String::as_str), Some("small-test"));
    assert_eq!(bound.get("web-nginx-2").map(String::as_str), Some("small-test"));
    assert!(bound.contains_key("other-1"));
    let (_, reason, message) = scheduled_condition(&pods.get("nginx-huge").await.unwrap()).unwrap();
    assert_eq!(reason, "Unschedulable");
    assert!(
        message.starts_with("0/3 nodes are available: 1 Insufficient cpu, 2 no match label. preemption: "),
        "{message}"
    );
    running.stop().await;
    let _ = stop_decisions.send(());
}

/// The custom-logic example's policy file (docs/custom-logic.md).
const SEED_PLUGIN_POLICY: &str = "apiVersion: placement/v1
kind: PolicyConfiguration
policies:
  - name: nginx-on-test-nodes
    rules:
      filters:
        - name: nginx-needs-test-label
          expression: >-
            !pod.metadata.name.contains('nginx')
            || ('test' in node.metadata.labels && node.metadata.labels['test'] == 'test')
          reason: no match label
";

fn with_gates(mut p: Pod, gates: &[&str]) -> Pod {
    p.spec.as_mut().unwrap().scheduling_gates = Some(
        gates
            .iter()
            .map(|g| k8s_openapi::api::core::v1::PodSchedulingGate { name: g.to_string() })
            .collect(),
    );
    p
}

/// kube-scheduler's `SchedulingGates` PreEnqueue plugin: a gated pod is never sent for a decision
/// nor bound, and the binder writes nothing on it (the API server gave it `PodScheduled=False`,
/// reason `SchedulingGated`, at creation); it is scheduled once an update removes its last gate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_pod_is_scheduled_once_its_last_gate_is_removed() {
    use kube::api::{Patch, PatchParams};
    let server = FakeApiServer::start().await;
    server.create_node(node("n1", "4"));
    server.create_pod(with_gates(
        pod("gated", SCHEDULER, "250m", None),
        &["example.com/a", "example.com/b"],
    ));
    server.create_pod(pod("free", SCHEDULER, "250m", None));
    let (endpoint, stop_decisions) = decision_service().await;
    let running = start_binder(
        &server,
        &endpoint,
        Options {
            lease: None,
            ..Options::default()
        },
    );
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    eventually(WAIT, "the ungated pod bound", || async {
        bound(&pods).await.contains_key("free")
    })
    .await;
    let gated_gauge = "scheduler_pending_pods{queue=\"gated\"} 1";
    eventually(WAIT, "the gated pod counted as gated", || async {
        running.metrics.encode().contains(gated_gauge)
    })
    .await;
    let untouched = |server: &FakeApiServer| {
        let p = server.get_pod("default", "gated").unwrap();
        assert_eq!(node_of(&p), None);
        assert_eq!(
            scheduled_condition(&p),
            Some((
                "False".into(),
                "SchedulingGated".into(),
                "Scheduling is blocked due to non-empty scheduling gates".into()
            )),
            "the API server's condition is left as it is"
        );
        assert!(
            binding_statuses(server, "gated").is_empty(),
            "a gated pod is never bound"
        );
        assert!(
            !server
                .events()
                .iter()
                .any(|e| e.regarding_name.as_deref() == Some("gated")),
            "kube-scheduler writes no event on a gated pod"
        );
    };
    untouched(&server);

    // One gate of two removed: still gated. A pod created after the update and bound shows the
    // binder has seen it.
    let one_left = serde_json::json!({"spec": {"schedulingGates": [{"name": "example.com/b"}]}});
    pods.patch("gated", &PatchParams::default(), &Patch::Merge(&one_left))
        .await
        .unwrap();
    server.create_pod(pod("later", SCHEDULER, "250m", None));
    eventually(WAIT, "the later pod bound", || async {
        bound(&pods).await.contains_key("later")
    })
    .await;
    untouched(&server);
    assert!(running.metrics.encode().contains(gated_gauge));

    // The last gate removed: scheduled at once.
    let none_left = serde_json::json!({"spec": {"schedulingGates": null}});
    pods.patch("gated", &PatchParams::default(), &Patch::Merge(&none_left))
        .await
        .unwrap();
    eventually(WAIT, "the ungated pod bound", || async {
        bound(&pods).await.contains_key("gated")
    })
    .await;
    assert_eq!(binding_statuses(&server, "gated"), [201]);
    let p = server.get_pod("default", "gated").unwrap();
    assert_eq!(scheduled_condition(&p).map(|c| c.0).as_deref(), Some("True"));
    eventually(WAIT, "the gated gauge back to 0", || async {
        running
            .metrics
            .encode()
            .contains("scheduler_pending_pods{queue=\"gated\"} 0")
    })
    .await;
    running.stop().await;
    let _ = stop_decisions.send(());
}

/// The binder watches claims, volumes, storage classes and CSINodes: they reach its state as
/// created, changed and deleted, and a relist after a broken watch reports the ones deleted
/// meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_objects_from_the_watches_reach_the_binders_state() {
    use placement_tests::fake_apiserver::Kind;
    let server = FakeApiServer::start().await;
    server.create_node(node("n1", "4"));
    server.create_raw(
        Kind::StorageClass,
        serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer"}),
    );
    server.create_raw(
        Kind::PersistentVolumeClaim,
        serde_json::json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "default"},
            "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}}),
    );
    server.create_raw(
        Kind::CsiNode,
        serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n1"},
            "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 2}}]}}),
    );
    let (endpoint, stop_decisions) = decision_service().await;
    let running = start_binder(
        &server,
        &endpoint,
        Options {
            lease: None,
            ..Options::default()
        },
    );
    eventually(WAIT, "the storage lists reach the binder", || {
        let b = running.binder.clone();
        async move {
            let s = b.storage_snapshot();
            b.is_ready()
                && s.storage_classes.len() == 1
                && s.persistent_volume_claims.len() == 1
                && s.csi_nodes.first().and_then(|n| n.drivers[0].allocatable_count) == Some(2)
        }
    })
    .await;
    // A volume appears, the claim is bound to it.
    server.create_raw(
        Kind::PersistentVolume,
        serde_json::json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-1"},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                     "local": {"path": "/mnt/1"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}}}),
    );
    let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> = Api::default_namespaced(server.client());
    let bind = serde_json::json!({"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                                  "spec": {"volumeName": "pv-1"}});
    claims
        .patch(
            "data",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&bind),
        )
        .await
        .unwrap();
    eventually(WAIT, "the volume and the binding reach the binder", || {
        let b = running.binder.clone();
        async move {
            let s = b.storage_snapshot();
            s.persistent_volumes.len() == 1
                && s.persistent_volume_claims
                    .first()
                    .is_some_and(|c| c.volume_name == "pv-1" && c.bind_completed)
        }
    })
    .await;
    // The class is deleted while the watches are down: the relist reports it.
    server.drop_watches();
    server.fail_next(1_000_000, matcher("GET", "/apis/storage.k8s.io/v1/storageclasses"), 503);
    server.delete_raw(Kind::StorageClass, None, "local");
    server.compact();
    server.clear_faults();
    eventually(WAIT, "the deleted class leaves the binder's state", || {
        let b = running.binder.clone();
        async move { b.storage_snapshot().storage_classes.is_empty() }
    })
    .await;
    assert_eq!(running.binder.storage_snapshot().persistent_volumes.len(), 1);
    running.stop().await;
    let _ = stop_decisions.send(());
}

/// The binder watches PodGroups where the API server serves them: they reach its state as
/// created, changed and deleted (found by namespace and name), and a relist after a broken watch
/// reports the ones deleted meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_groups_from_the_watch_reach_the_binders_state() {
    use placement_tests::fake_apiserver::Kind;
    let server = FakeApiServer::start().await;
    server.create_node(node("n1", "4"));
    let group = |name: &str, min: i32| {
        serde_json::json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min}}}})
    };
    server.create_raw(Kind::PodGroup, group("trainer", 4));
    server.create_raw(Kind::PodGroup, group("eval", 2));
    let (endpoint, stop_decisions) = decision_service().await;
    let running = start_binder(
        &server,
        &endpoint,
        Options {
            lease: None,
            ..Options::default()
        },
    );
    let min_count =
        |b: &Binder<KubeApi>, name: &str| b.pod_group("default", name).and_then(|g| g.gang).map(|g| g.min_count);
    eventually(WAIT, "the PodGroup list reaches the binder", || {
        let b = running.binder.clone();
        async move { b.is_ready() && min_count(&b, "trainer") == Some(4) && min_count(&b, "eval") == Some(2) }
    })
    .await;
    assert!(running.binder.pod_groups_served());
    assert!(running.binder.pod_group("other", "trainer").is_none());
    assert_eq!(running.binder.storage_snapshot().pod_groups.len(), 2);
    // minCount changes (it is mutable), and kube-scheduler's condition is written.
    let groups: Api<k8s_openapi::api::scheduling::v1beta1::PodGroup> = Api::default_namespaced(server.client());
    groups
        .patch(
            "trainer",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}})),
        )
        .await
        .unwrap();
    groups
        .patch_status(
            "eval",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"status": {"conditions": [{
                "type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled", "message": "",
                "lastTransitionTime": "2026-11-29T00:00:00Z"}]}})),
        )
        .await
        .unwrap();
    eventually(WAIT, "the changes reach the binder", || {
        let b = running.binder.clone();
        async move {
            min_count(&b, "trainer") == Some(3) && b.pod_group("default", "eval").is_some_and(|g| g.initially_scheduled)
        }
    })
    .await;
    // A group is deleted while the watches are down: the relist reports it.
    server.drop_watches();
    server.fail_next(
        1_000_000,
        matcher("GET", "/apis/scheduling.k8s.io/v1beta1/podgroups"),
        503,
    );
    server.delete_raw(Kind::PodGroup, Some("default"), "eval");
    server.compact();
    server.clear_faults();
    eventually(WAIT, "the deleted group leaves the binder's state", || {
        let b = running.binder.clone();
        async move { b.pod_group("default", "eval").is_none() }
    })
    .await;
    assert_eq!(min_count(&running.binder, "trainer"), Some(3));
    running.stop().await;
    let _ = stop_decisions.send(());
}

/// kube-scheduler sets a PodGroup's `PodGroupInitiallyScheduled` condition on the object its
/// cache shows (`apimeta.SetStatusCondition`): `lastTransitionTime` changes only with the status.
/// A binder restarted meanwhile (what it wrote forgotten) keeps it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_binder_keeps_a_pod_groups_condition_transition_time() {
    use placement_tests::fake_apiserver::Kind;
    let server = FakeApiServer::start().await;
    server.create_node(node("n1", "4"));
    server.create_raw(
        Kind::PodGroup,
        serde_json::json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}),
    );
    // Two members of 3 cpu on one node of 4: the group never fits.
    for i in 0..2 {
        let mut p = pod(&format!("train-{i}"), SCHEDULER, "3", None);
        p.spec.as_mut().unwrap().scheduling_group =
            Some(serde_json::from_value(serde_json::json!({"podGroupName": "train"})).unwrap());
        server.create_pod(p);
    }
    let condition = || {
        let g = server.get_raw(Kind::PodGroup, Some("default"), "train")?;
        g["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "PodGroupInitiallyScheduled")
            .cloned()
    };
    let (endpoint, stop_decisions) = decision_service().await;
    let options = || Options {
        lease: None,
        ..Options::default()
    };
    let first = start_binder(&server, &endpoint, options());
    eventually(WAIT, "the group's condition written", || {
        let c = condition();
        async move { c.is_some() }
    })
    .await;
    let before = condition().unwrap();
    assert_eq!(before["status"], "False");
    first.stop().await;

    // Later (past the second the time is written in), a new binder decides the group again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let cycles = r#"binder_pod_group_cycles_total{result="unschedulable"}"#;
    let second = start_binder(&server, &endpoint, options());
    eventually(WAIT, "the restarted binder's cycle for the group", || {
        let m = second.metrics.encode();
        async move { m.lines().any(|l| l.starts_with(cycles)) }
    })
    .await;
    // Its condition update (a write, or none when already so) is spawned after the cycle.
    eventually(WAIT, "the restarted binder's condition update finished", || {
        let m = second.metrics.encode();
        async move {
            m.lines()
                .any(|l| l.starts_with(r#"binder_pod_group_condition_updates_total{result="ok"}"#))
        }
    })
    .await;
    let after = condition().unwrap();
    assert_eq!(after["status"], "False");
    assert_eq!(
        after["lastTransitionTime"], before["lastTransitionTime"],
        "the status stayed False: its transition time too ({before} then {after})"
    );
    second.stop().await;
    let _ = stop_decisions.send(());
}

/// An API server without scheduling.k8s.io/v1beta1 PodGroups: the binder finds out with one list,
/// syncs without them and binds as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_pod_groups_syncs_and_binds() {
    let server = FakeApiServer::start_with(FakeApiServerConfig {
        serve_pod_groups: false,
        ..FakeApiServerConfig::default()
    })
    .await;
    server.create_node(node("n1", "4"));
    server.create_pod(pod("web-0", SCHEDULER, "250m", None));
    let (endpoint, stop_decisions) = decision_service().await;
    let running = start_binder(
        &server,
        &endpoint,
        Options {
            lease: None,
            ..Options::default()
        },
    );
    eventually(WAIT, "the pod bound", || async {
        server.get_pod("default", "web-0").and_then(|p| node_of(&p)).is_some()
    })
    .await;
    assert!(running.binder.is_ready());
    assert!(!running.binder.pod_groups_served());
    assert!(running.binder.storage_snapshot().pod_groups.is_empty());
    assert_eq!(
        server.count_requests(&matcher("GET", "/apis/scheduling.k8s.io/v1beta1/podgroups")),
        1,
        "one list to find out, no watch"
    );
    running.stop().await;
    let _ = stop_decisions.send(());
}

mod prebind {
    //! VolumeBinding's PreBind: the binder writes what kube's volume binder writes for the
    //! claims the decision service chose volumes for, waits for the PV controller (played by the
    //! test with `FakeApiServer::play_pv_controller`), then writes the Binding.

    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, Volume};
    use placement_tests::fake_apiserver::{Kind, RequestRecord};
    use serde_json::{json, Value};

    const PREBIND: &str = "running PreBind plugin \"VolumeBinding\"";

    /// Two nodes, the WaitForFirstConsumer class `local` (no provisioner) and the
    /// WaitForFirstConsumer class `fast` whose provisioner is `csi.example.com`.
    fn cluster(server: &FakeApiServer) {
        server.create_node(node("n1", "4"));
        server.create_node(node("n2", "4"));
        for (name, provisioner) in [("local", "kubernetes.io/no-provisioner"), ("fast", "csi.example.com")] {
            wffc_class(server, name, provisioner);
        }
    }

    /// The WaitForFirstConsumer StorageClass `name` of `provisioner`.
    fn wffc_class(server: &FakeApiServer, name: &str, provisioner: &str) {
        server.create_raw(
            Kind::StorageClass,
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                   "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"}),
        );
    }

    fn local_volume(server: &FakeApiServer, name: &str, node: &str) {
        server.create_raw(
            Kind::PersistentVolume,
            json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
                   "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                            "storageClassName": "local", "local": {"path": format!("/mnt/{name}")},
                            "persistentVolumeReclaimPolicy": "Retain",
                            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}},
                   "status": {"phase": "Available"}}),
        );
    }

    fn claim(server: &FakeApiServer, name: &str, class: &str) -> String {
        let c = server.create_raw(
            Kind::PersistentVolumeClaim,
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": name, "namespace": "default"},
                   "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}}},
                   "status": {"phase": "Pending"}}),
        );
        c["metadata"]["uid"].as_str().unwrap().to_string()
    }

    fn pod_with_claim(name: &str, claim: &str) -> Pod {
        let mut p = pod(name, SCHEDULER, "250m", None);
        p.spec.as_mut().unwrap().volumes = Some(vec![Volume {
            name: "data".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.into(),
                read_only: None,
            }),
            ..Default::default()
        }]);
        p
    }

    fn pv(server: &FakeApiServer, name: &str) -> Value {
        server.get_raw(Kind::PersistentVolume, None, name).unwrap()
    }

    fn pvc(server: &FakeApiServer, name: &str) -> Value {
        server
            .get_raw(Kind::PersistentVolumeClaim, Some("default"), name)
            .unwrap()
    }

    fn claim_ref(server: &FakeApiServer, volume: &str) -> Option<(String, String)> {
        let r = pv(server, volume).pointer("/spec/claimRef").cloned()?;
        Some((r["name"].as_str()?.to_string(), r["uid"].as_str()?.to_string()))
    }

    fn node_of_pod(server: &FakeApiServer, name: &str) -> Option<String> {
        server.get_pod("default", name).as_ref().and_then(node_of)
    }

    fn position(requests: &[RequestRecord], method: &str, path: &str) -> Option<usize> {
        requests
            .iter()
            .position(|r| r.method == method && r.path.ends_with(path) && (200..300).contains(&r.status))
    }

    async fn binder(server: &FakeApiServer, timeout: Duration) -> (oneshot::Sender<()>, Running) {
        let (endpoint, stop_decisions) = decision_service().await;
        let running = start_binder(
            server,
            &endpoint,
            Options {
                lease: None,
                volume_bind_timeout: timeout,
                ..Options::default()
            },
        );
        (stop_decisions, running)
    }

    /// A pod whose claim a local volume on n2 matches: the binder sets the volume's claimRef
    /// (with the claim's uid and kube's `bound-by-controller` annotation), waits while the claim is
    /// unbound, and writes the Binding to n2 once the PV controller has bound the claim.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_static_binding_is_written_and_waited_for_before_the_pod_is_bound() {
        let server = FakeApiServer::start().await;
        cluster(&server);
        local_volume(&server, "pv-1", "n2");
        let uid = claim(&server, "data", "local");
        server.create_pod(pod_with_claim("web", "data"));
        let (stop_decisions, running) = binder(&server, Duration::from_secs(600)).await;
        eventually(WAIT, "the volume's claimRef", || async {
            claim_ref(&server, "pv-1").is_some()
        })
        .await;
        assert_eq!(claim_ref(&server, "pv-1"), Some(("data".into(), uid.clone())));
        let volume = pv(&server, "pv-1");
        assert_eq!(
            volume["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"],
            "yes"
        );
        assert_eq!(volume["spec"]["claimRef"]["kind"], "PersistentVolumeClaim");
        assert_eq!(volume["spec"]["claimRef"]["namespace"], "default");
        // Nothing else writes the claim; the pod waits for the PV controller, nominated to n2 as
        // kube-scheduler 1.37 nominates a pod whose PreBind has work.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(node_of_pod(&server, "web"), None, "bound before its claim");
        assert_eq!(
            server
                .get_pod("default", "web")
                .and_then(|p| p.status?.nominated_node_name)
                .as_deref(),
            Some("n2")
        );
        assert!(pvc(&server, "data")["metadata"]["annotations"]
            .get("volume.kubernetes.io/selected-node")
            .is_none());
        assert_eq!(server.play_pv_controller(), 1);
        eventually(WAIT, "the pod bound to the volume's node", || async {
            node_of_pod(&server, "web").as_deref() == Some("n2")
        })
        .await;
        let requests = server.requests();
        let nominated = position(&requests, "PATCH", "/pods/web/status").expect("the nomination");
        let put = position(&requests, "PUT", "/persistentvolumes/pv-1").expect("the volume update");
        let binding = position(&requests, "POST", "/pods/web/binding").expect("the Binding");
        assert!(nominated < put && put < binding);
        assert_eq!(binding_statuses(&server, "web"), [201]);
        let m = running.metrics.encode();
        assert!(m.contains("binder_volume_prebinds_total{result=\"bound\"} 1"), "{m}");
        // The watched volume took the place of the assumed one.
        eventually(WAIT, "no assumed volume choice left", || {
            let b = running.binder.clone();
            async move { b.assumed_volume_choices() == 0 }
        })
        .await;
        running.stop().await;
        let _ = stop_decisions.send(());
    }

    /// A claim of a class that provisions: the binder sets its selected-node annotation to the
    /// pod's node; the provisioner creates a volume there, the claim is bound, and so is the pod.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_provisioned_claim_gets_the_pods_node_selected_then_the_pod_is_bound() {
        let server = FakeApiServer::start().await;
        cluster(&server);
        let uid = claim(&server, "scratch", "fast");
        server.create_pod(pod_with_claim("job", "scratch"));
        let (stop_decisions, running) = binder(&server, Duration::from_secs(600)).await;
        let selected = || {
            pvc(&server, "scratch")["metadata"]["annotations"]["volume.kubernetes.io/selected-node"]
                .as_str()
                .map(str::to_string)
        };
        eventually(WAIT, "the claim's selected node", || {
            let s = selected();
            async move { s.is_some() }
        })
        .await;
        let chosen = selected().unwrap();
        assert_eq!(node_of_pod(&server, "job"), None, "bound before its claim");
        assert_eq!(server.play_pv_controller(), 1);
        eventually(WAIT, "the pod bound to the selected node", || async {
            node_of_pod(&server, "job").as_deref() == Some(chosen.as_str())
        })
        .await;
        assert_eq!(pvc(&server, "scratch")["spec"]["volumeName"], format!("pvc-{uid}"));
        running.stop().await;
        let _ = stop_decisions.send(());
    }

    /// Storage capacity tracking: the driver of class `fast` has a CSIDriver with
    /// `storageCapacity: true`. With no CSIStorageCapacity the pod is unschedulable with kube's
    /// reason; a capacity too small for the claim changes nothing; one with room reaching n2
    /// (watched, so the pod is retried at once) gets the claim provisioned on n2 and the pod bound
    /// there.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tracked_driver_provisions_only_where_a_storage_capacity_has_room() {
        let server = FakeApiServer::start().await;
        cluster(&server);
        server.create_raw(
            Kind::CsiDriver,
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "csi.example.com"},
                   "spec": {"storageCapacity": true}}),
        );
        let capacity = |name: &str, node: &str, size: &str| {
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
                   "metadata": {"name": name, "namespace": "kube-system"},
                   "storageClassName": "fast", "capacity": size,
                   "nodeTopology": {"matchLabels": {"kubernetes.io/hostname": node}}})
        };
        server.create_raw(Kind::CsiStorageCapacity, capacity("small-n1", "n1", "512Mi"));
        claim(&server, "scratch", "fast");
        server.create_pod(pod_with_claim("job", "scratch"));
        let (stop_decisions, running) = binder(&server, Duration::from_secs(600)).await;
        let message = || {
            server
                .get_pod("default", "job")
                .as_ref()
                .and_then(scheduled_condition)
                .map(|(_, reason, message)| (reason, message))
        };
        eventually(WAIT, "the pod unschedulable", || {
            let m = message();
            async move { m.is_some() }
        })
        .await;
        assert_eq!(
            message(),
            Some((
                "Unschedulable".to_string(),
                "0/2 nodes are available: 2 node(s) did not have enough free storage. preemption: 0/2 nodes are \
                 available: 2 Preemption is not helpful for scheduling."
                    .to_string()
            ))
        );
        assert!(running
            .binder
            .storage_snapshot()
            .csi_drivers
            .iter()
            .any(|d| d.name == "csi.example.com" && d.storage_capacity));
        server.create_raw(Kind::CsiStorageCapacity, capacity("big-n2", "n2", "10Gi"));
        eventually(WAIT, "the claim provisioned on n2", || async {
            pvc(&server, "scratch")["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "n2"
        })
        .await;
        assert_eq!(server.play_pv_controller(), 1);
        eventually(WAIT, "the pod bound to n2", || async {
            node_of_pod(&server, "job").as_deref() == Some("n2")
        })
        .await;
        // A deleted capacity leaves the binder's state.
        server.delete_raw(Kind::CsiStorageCapacity, Some("kube-system"), "big-n2");
        eventually(WAIT, "the capacity gone from the binder", || {
            let b = running.binder.clone();
            async move { b.storage_snapshot().csi_storage_capacities.len() == 1 }
        })
        .await;
        running.stop().await;
        let _ = stop_decisions.send(());
    }

    /// The volume update meets a 409 (the volume changed since it was read): as kube, the
    /// PreBind fails (no rewrite), the pod gets `SchedulerError` and `FailedScheduling` with the
    /// API server's message, and is decided again after its backoff — then bound.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_conflicting_volume_update_fails_the_prebind_and_the_pod_is_retried() {
        let server = FakeApiServer::start().await;
        cluster(&server);
        local_volume(&server, "pv-1", "n1");
        claim(&server, "data", "local");
        server.fail_next(1, matcher("PUT", "/persistentvolumes/pv-1"), 409);
        server.create_pod(pod_with_claim("web", "data"));
        let (stop_decisions, running) = binder(&server, Duration::from_secs(600)).await;
        eventually(WAIT, "the SchedulerError condition", || async {
            server
                .get_pod("default", "web")
                .as_ref()
                .and_then(scheduled_condition)
                .is_some_and(|(status, reason, message)| {
                    status == "False" && reason == "SchedulerError" && message.starts_with(PREBIND)
                })
        })
        .await;
        assert!(server
            .events_v1()
            .iter()
            .any(|e| e.reason.as_deref() == Some("FailedScheduling")
                && e.note.as_deref().is_some_and(|n| n.starts_with(PREBIND))));
        // The failed binding cycle cleared the nomination it set before PreBind.
        eventually(WAIT, "the nomination cleared", || async {
            server
                .get_pod("default", "web")
                .and_then(|p| p.status?.nominated_node_name)
                .is_none_or(|n| n.is_empty())
        })
        .await;
        // The retry writes the claimRef; the PV controller completes it.
        eventually(WAIT, "the claimRef of the retry", || async {
            claim_ref(&server, "pv-1").is_some()
        })
        .await;
        server.play_pv_controller();
        eventually(WAIT, "the pod bound", || async {
            node_of_pod(&server, "web").as_deref() == Some("n1")
        })
        .await;
        assert_eq!(
            server.count_requests(&matcher("PUT", "/persistentvolumes/pv-1")),
            2,
            "one refused update, one retry"
        );
        running.stop().await;
        let _ = stop_decisions.send(());
    }

    /// The PV controller does not bind the claim in time: the PreBind gives up ("context deadline
    /// exceeded", as kube's), the pod is retried after its backoff, and the retry — which finds
    /// the same volume, pre-bound to its claim — binds it once the controller has caught up.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_claim_not_bound_in_time_fails_the_prebind_and_the_retry_binds_the_pod() {
        let server = FakeApiServer::start().await;
        cluster(&server);
        local_volume(&server, "pv-1", "n1");
        claim(&server, "data", "local");
        server.create_pod(pod_with_claim("web", "data"));
        let (stop_decisions, running) = binder(&server, Duration::from_secs(1)).await;
        eventually(WAIT, "the timeout's condition", || async {
            server
                .get_pod("default", "web")
                .as_ref()
                .and_then(scheduled_condition)
                .is_some_and(|(_, reason, message)| {
                    reason == "SchedulerError"
                        && message == format!("{PREBIND}: binding volumes: context deadline exceeded")
                })
        })
        .await;
        assert_eq!(node_of_pod(&server, "web"), None);
        let m = running.metrics.encode();
        assert!(m.contains("binder_volume_prebinds_total{result=\"timed_out\"}"), "{m}");
        assert!(
            m.contains("scheduler_volume_scheduling_stage_error_total{operation=\"bind\"}"),
            "{m}"
        );
        server.play_pv_controller();
        eventually(WAIT, "the pod bound on a retry", || async {
            node_of_pod(&server, "web").as_deref() == Some("n1")
        })
        .await;
        assert_eq!(binding_statuses(&server, "web"), [201]);
        running.stop().await;
        let _ = stop_decisions.send(());
    }

    /// The provisioner gives up (it removes the selected-node annotation, as external
    /// provisioners do): the PreBind fails with kube's "provisioning failed" and the pod is
    /// decided again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_provisioner_that_gives_up_fails_the_prebind() {
        let server = FakeApiServer::start().await;
        cluster(&server);
        claim(&server, "scratch", "fast");
        server.create_pod(pod_with_claim("job", "scratch"));
        let (stop_decisions, running) = binder(&server, Duration::from_secs(600)).await;
        eventually(WAIT, "the claim's selected node", || async {
            pvc(&server, "scratch")["metadata"]["annotations"]
                .get("volume.kubernetes.io/selected-node")
                .is_some()
        })
        .await;
        // The binder's watch has shown the annotation (its assumption gave way to it) before it goes.
        eventually(WAIT, "the watch showing the selected node", || {
            let b = running.binder.clone();
            async move { b.assumed_volume_choices() == 0 }
        })
        .await;
        server.modify_raw(Kind::PersistentVolumeClaim, Some("default"), "scratch", |c| {
            c["metadata"]["annotations"]
                .as_object_mut()
                .unwrap()
                .remove("volume.kubernetes.io/selected-node");
        });
        eventually(WAIT, "the provisioning failure's condition", || async {
            server
                .get_pod("default", "job")
                .as_ref()
                .and_then(scheduled_condition)
                .is_some_and(|(_, reason, message)| {
                    reason == "SchedulerError"
                        && message == format!("{PREBIND}: binding volumes: provisioning failed for PVC \"scratch\"")
                })
        })
        .await;
        assert_eq!(node_of_pod(&server, "job"), None);
        running.stop().await;
        let _ = stop_decisions.send(());
    }

    /// Two pods, each with its claim, one local volume: decided in one batch, only one pod gets
    /// the volume; the other is unschedulable with kube's message, and stays so while the first
    /// waits for the PV controller and after it is bound.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_pods_of_a_batch_never_get_the_same_volume() {
        let server = FakeApiServer::start().await;
        cluster(&server);
        local_volume(&server, "pv-1", "n1");
        claim(&server, "a", "local");
        claim(&server, "b", "local");
        server.create_pod(pod_with_claim("pa", "a"));
        server.create_pod(pod_with_claim("pb", "b"));
        let (stop_decisions, running) = binder(&server, Duration::from_secs(600)).await;
        eventually(WAIT, "one claimRef and one FailedScheduling", || async {
            claim_ref(&server, "pv-1").is_some()
                && server
                    .events_v1()
                    .iter()
                    .any(|e| e.reason.as_deref() == Some("FailedScheduling"))
        })
        .await;
        let (winner_claim, _) = claim_ref(&server, "pv-1").unwrap();
        let (winner, loser) = if winner_claim == "a" {
            ("pa", "pb")
        } else {
            ("pb", "pa")
        };
        let (_, reason, message) = server
            .get_pod("default", loser)
            .as_ref()
            .and_then(scheduled_condition)
            .unwrap();
        assert_eq!(reason, "Unschedulable");
        assert!(
            message.starts_with("0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind."),
            "{message}"
        );
        assert_eq!(server.count_requests(&matcher("PUT", "/persistentvolumes/")), 1);
        server.play_pv_controller();
        eventually(WAIT, "the winner bound", || async {
            node_of_pod(&server, winner).as_deref() == Some("n1")
        })
        .await;
        assert_eq!(node_of_pod(&server, loser), None);
        assert_eq!(server.count_requests(&matcher("PUT", "/persistentvolumes/")), 1);
        running.stop().await;
        let _ = stop_decisions.send(());
    }

    /// A more important pod with a claim preempts the pod filling the node of its only volume;
    /// once the victim is gone it is decided again (as kube-scheduler runs a scheduling cycle for
    /// it), so its claim binding is written and waited for before the Binding.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_preemptor_with_a_claim_gets_its_prebind_once_the_victims_are_gone() {
        let server = FakeApiServer::start().await;
        server.create_node(node("n1", "2"));
        wffc_class(&server, "local", "kubernetes.io/no-provisioner");
        local_volume(&server, "pv-1", "n1");
        claim(&server, "data", "local");
        server.create_pod(with_priority(pod("low", "default-scheduler", "1500m", Some("n1")), 0));
        let (stop_decisions, running) = binder(&server, Duration::from_secs(600)).await;
        eventually(WAIT, "the binder ready", || {
            let b = running.binder.clone();
            async move { b.is_ready() }
        })
        .await;
        let mut urgent = pod_with_claim("urgent", "data");
        urgent.spec.as_mut().unwrap().containers[0]
            .resources
            .as_mut()
            .unwrap()
            .requests
            .as_mut()
            .unwrap()
            .insert(
                "cpu".into(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("1500m".into()),
            );
        server.create_pod(with_priority(urgent, 1000));
        eventually(WAIT, "the victim terminating", || async {
            server
                .get_pod("default", "low")
                .is_some_and(|p| p.metadata.deletion_timestamp.is_some())
        })
        .await;
        assert_eq!(
            claim_ref(&server, "pv-1"),
            None,
            "nothing written while the victim is there"
        );
        server.delete_pod("default", "low");
        eventually(WAIT, "the claimRef written for the preemptor", || async {
            claim_ref(&server, "pv-1").is_some()
        })
        .await;
        assert_eq!(node_of_pod(&server, "urgent"), None, "bound before its claim");
        server.play_pv_controller();
        eventually(WAIT, "the preemptor bound", || async {
            node_of_pod(&server, "urgent").as_deref() == Some("n1")
        })
        .await;
        let requests = server.requests();
        let put = position(&requests, "PUT", "/persistentvolumes/pv-1").expect("the volume update");
        let binding = position(&requests, "POST", "/pods/urgent/binding").expect("the Binding");
        assert!(put < binding);
        assert_eq!(binding_statuses(&server, "urgent"), [201]);
        running.stop().await;
        let _ = stop_decisions.send(());
    }

    /// A binder stopped while it waits for the PV controller binds nothing; the next one finds
    /// the claimRef written, chooses the same volume (pre-bound to the claim), writes nothing
    /// new, and binds the pod exactly once when the claim is bound.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_binder_restarted_mid_prebind_binds_the_pod_once_on_the_same_volume() {
        let server = FakeApiServer::start().await;
        cluster(&server);
        local_volume(&server, "pv-1", "n2");
        local_volume(&server, "pv-2", "n1");
        let uid = claim(&server, "data", "local");
        server.create_pod(pod_with_claim("web", "data"));
        let (stop_decisions, first) = binder(&server, Duration::from_secs(600)).await;
        eventually(WAIT, "a claimRef", || async {
            claim_ref(&server, "pv-1").is_some() || claim_ref(&server, "pv-2").is_some()
        })
        .await;
        let chosen = if claim_ref(&server, "pv-1").is_some() {
            "pv-1"
        } else {
            "pv-2"
        };
        let node = if chosen == "pv-1" { "n2" } else { "n1" };
        tokio::time::timeout(Duration::from_secs(10), first.stop())
            .await
            .expect("a waiting PreBind does not hold up the shutdown");
        assert_eq!(node_of_pod(&server, "web"), None);
        let _ = stop_decisions.send(());
        let puts = server.count_requests(&matcher("PUT", "/persistentvolumes/"));
        let (stop_decisions, second) = binder(&server, Duration::from_secs(600)).await;
        eventually(WAIT, "the second binder ready", || {
            let b = second.binder.clone();
            async move { b.is_ready() }
        })
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(node_of_pod(&server, "web"), None, "bound before its claim");
        server.play_pv_controller();
        eventually(WAIT, "the pod bound to the chosen volume's node", || async {
            node_of_pod(&server, "web").as_deref() == Some(node)
        })
        .await;
        assert_eq!(claim_ref(&server, chosen), Some(("data".into(), uid)));
        assert_eq!(
            server.count_requests(&matcher("PUT", "/persistentvolumes/")),
            puts,
            "nothing rewritten"
        );
        assert_eq!(binding_statuses(&server, "web"), [201]);
        second.stop().await;
        let _ = stop_decisions.send(());
    }
}

/// PodGroups of a CompositePodGroup hierarchy (`scheduling.k8s.io/v1alpha3`): the binder watches
/// the CompositePodGroups and holds the hierarchy's pods until it is ready as kube's GangScheduling
/// PreEnqueue counts it (here both gangs of a `minGroupCount: 2` root), then decides them together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_composite_pod_groups_pods_are_held_until_the_hierarchy_is_ready() {
    use placement_tests::fake_apiserver::Kind;
    let server = FakeApiServer::start().await;
    server.create_node(node("n1", "8"));
    server.create_raw(
        Kind::CompositePodGroup,
        serde_json::json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": "job", "namespace": "default"},
            "spec": {"workloadRef": {"workloadName": "w", "templateName": "job"},
                     "schedulingPolicy": {"gang": {"minGroupCount": 2}}}}),
    );
    for g in ["a", "b"] {
        server.create_raw(
            Kind::PodGroup,
            serde_json::json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"name": g, "namespace": "default"},
                "spec": {"parentCompositePodGroupName": "job",
                         "workloadRef": {"workloadName": "w", "templateName": g},
                         "schedulingPolicy": {"gang": {"minCount": 2}}}}),
        );
    }
    let member = |name: &str, group: &str| {
        let mut p = pod(name, SCHEDULER, "1", None);
        p.spec.as_mut().unwrap().scheduling_group =
            Some(serde_json::from_value(serde_json::json!({"podGroupName": group})).unwrap());
        p
    };
    // Gang a is complete, gang b has no pod yet: the hierarchy is not ready.
    server.create_pod(member("a-0", "a"));
    server.create_pod(member("a-1", "a"));
    let (endpoint, stop_decisions) = decision_service().await;
    let running = start_binder(
        &server,
        &endpoint,
        Options {
            lease: None,
            ..Options::default()
        },
    );
    eventually(WAIT, "the CompositePodGroup reaches the binder", || {
        let b = running.binder.clone();
        async move { b.is_ready() && b.storage_snapshot().composite_pod_groups.len() == 1 }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    for name in ["a-0", "a-1"] {
        let p = pods.get(name).await.unwrap();
        assert_eq!(node_of(&p), None, "{name}: held while its hierarchy is short of gang b");
    }
    // Gang b's pods come: the four are decided together and bound.
    server.create_pod(member("b-0", "b"));
    server.create_pod(member("b-1", "b"));
    eventually(WAIT, "the hierarchy's four pods bound", || {
        let pods = pods.clone();
        async move {
            let mut all = true;
            for name in ["a-0", "a-1", "b-0", "b-1"] {
                all &= pods.get(name).await.ok().is_some_and(|p| node_of(&p).is_some());
            }
            all
        }
    })
    .await;
    running.stop().await;
    let _ = stop_decisions.send(());
}
