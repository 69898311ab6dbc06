//! Experiments in the binder against the fake API server over the real protocol: the arms'
//! annotations land on the pods, the per-arm metrics and `/experiments` table are served, and an
//! arm whose decision backend is down stalls nothing else and loses no pod.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use placement_binder::experiments::ExperimentSet;
use placement_binder::kube_api::{KubeApi, KubeApiConfig};
use placement_binder::leader::Leadership;
use placement_binder::metrics::BinderMetrics;
use placement_binder::queue::QueueConfig;
use placement_binder::replicas::{EndpointSource, ReplicaConfig, ReplicaPool};
use placement_binder::simulate::OutputFormat;
use placement_binder::{Binder, BinderConfig};
use placement_scheduler::grpc::{serve, Metrics, ServerConfig};
use placement_tests::fake_apiserver::FakeApiServer;
use placement_tests::fixtures::{self, eventually, node};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

const WAIT: Duration = Duration::from_secs(30);
const SCHEDULER: &str = "placement-scheduler";

/// A decision replica on `listener`.
fn decision_service(listener: TcpListener) -> oneshot::Sender<()> {
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(serve(
        listener,
        ServerConfig::default(),
        Arc::new(Metrics::new()),
        async {
            let _ = stopped.await;
        },
    ));
    stop
}

/// A pod in `default`; `pin` annotates it `placement.dev/pin-arm`.
fn pod(name: &str, pin: Option<&str>) -> Pod {
    let mut p = fixtures::pod("default", name, SCHEDULER, "100m", None);
    if let Some(arm) = pin {
        p.metadata.annotations = Some([("placement.dev/pin-arm".to_string(), arm.to_string())].into());
    }
    p
}

fn annotation(p: &Pod, key: &str) -> Option<String> {
    p.metadata.annotations.as_ref()?.get(key).cloned()
}

fn node_of(p: &Pod) -> Option<String> {
    p.spec.as_ref().and_then(|s| s.node_name.clone())
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: binder\r\nconnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

/// The value of one sample line of a Prometheus exposition (0 when absent).
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_arm_backend_stalls_no_other_arm_and_loses_no_pod() {
    let server = FakeApiServer::start().await;
    for n in ["n1", "n2", "n3"] {
        server.create_node(node(n, "4"));
    }
    // The main decision replica, and a port with nothing listening for the `remote` arm.
    let main_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let main_endpoint = format!("http://{}", main_listener.local_addr().unwrap());
    let stop_main = decision_service(main_listener);
    let remote_addr = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();

    let experiments = ExperimentSet::parse(&format!(
        "experiments:
  - name: rollout
    unit: pod
    allowPin: true
    arms:
      - {{name: local, weight: 1, policy: default}}
      - {{name: remote, weight: 0, policy: bin-packing, backend: {{endpoints: ['http://{remote_addr}']}}}}
shadows:
  - {{name: packing, policy: bin-packing}}
"
    ))
    .unwrap();

    let metrics = Arc::new(BinderMetrics::new());
    let replicas = Arc::new(
        ReplicaPool::new(
            EndpointSource::Static(vec![main_endpoint]),
            ReplicaConfig {
                // Short ejections and backoffs: the test waits for the backend's return.
                eject_for: Duration::from_millis(100),
                call_timeout: Duration::from_secs(5),
                ..ReplicaConfig::default()
            },
        )
        .unwrap(),
    );
    let api = KubeApi::new(
        server.client(),
        KubeApiConfig {
            reporting_controller: SCHEDULER.into(),
            reporting_instance: format!("{SCHEDULER}-binder-0"),
            request_timeout: Duration::from_secs(5),
        },
    );
    let binder = Binder::new(
        BinderConfig {
            queue: QueueConfig {
                initial_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_millis(400),
                ..QueueConfig::default()
            },
            ..BinderConfig::default()
        },
        api,
        replicas,
        Arc::clone(&metrics),
        Leadership::always(&metrics).receiver(),
    );
    binder.replace_experiments(experiments).unwrap();

    for i in 0..6 {
        server.create_pod(pod(&format!("local-{i}"), None));
        server.create_pod(pod(&format!("remote-{i}"), Some("remote")));
    }

    let (stop_watch, watch_stopped) = oneshot::channel::<()>();
    let watch = tokio::spawn(placement_binder::watch::run(server.client(), binder.clone(), async {
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
    let http_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http = http_listener.local_addr().unwrap();
    let (stop_http, http_stopped) = oneshot::channel::<()>();
    tokio::spawn(placement_binder::http::serve(http_listener, binder.clone(), async {
        let _ = http_stopped.await;
    }));

    // The local arm binds while the remote arm's backend is down...
    eventually(WAIT, "every local pod bound", || async {
        server
            .pods()
            .iter()
            .filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with("local-")))
            .all(|p| node_of(p).is_some())
    })
    .await;
    // ... and the remote arm's pods are kept, retried with backoff, counted as decision errors.
    eventually(WAIT, "the remote arm's failures counted", || async {
        sample(
            &metrics.encode(),
            r#"binder_experiment_pods_total{experiment="rollout",arm="remote",result="error"}"#,
        ) >= 6.0
    })
    .await;
    for p in server.pods() {
        if p.metadata.name.as_deref().is_some_and(|n| n.starts_with("remote-")) {
            assert_eq!(node_of(&p), None, "a remote pod was bound with its backend down");
        }
    }
    // The local pods leave the queue once their binds complete (in flight until then); the
    // remote arm's six stay.
    eventually(WAIT, "only the remote arm's pods left in the queue", || async {
        binder.pending() == 6
    })
    .await;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(binder.pending(), 6, "the remote arm's pods are still queued");
    }
    for p in server.pods() {
        if p.metadata.name.as_deref().is_some_and(|n| n.starts_with("local-")) {
            assert_eq!(annotation(&p, "placement.dev/experiment").as_deref(), Some("rollout"));
            assert_eq!(annotation(&p, "placement.dev/arm").as_deref(), Some("local"));
            assert_eq!(annotation(&p, "placement.dev/policy").as_deref(), Some("default"));
            assert_eq!(annotation(&p, "placement.dev/assignment").as_deref(), Some("hash"));
        }
    }

    // The backend comes back on its port: the remote arm's pods are bound, by its policy.
    let stop_remote = decision_service(TcpListener::bind(remote_addr).await.unwrap());
    eventually(WAIT, "every remote pod bound once its backend is back", || async {
        server
            .pods()
            .iter()
            .filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with("remote-")))
            .all(|p| node_of(p).is_some())
    })
    .await;
    for p in server.pods() {
        if p.metadata.name.as_deref().is_some_and(|n| n.starts_with("remote-")) {
            assert_eq!(annotation(&p, "placement.dev/arm").as_deref(), Some("remote"));
            assert_eq!(annotation(&p, "placement.dev/assignment").as_deref(), Some("pin"));
            assert_eq!(annotation(&p, "placement.dev/policy").as_deref(), Some("bin-packing"));
        }
    }
    assert_eq!(server.bindings_succeeded(), 12, "every pod bound exactly once");

    // The metrics and the comparison table.
    let text = http_get(http, "/metrics").await;
    for (series, want) in [
        (
            r#"binder_experiment_pods_total{experiment="rollout",arm="local",result="scheduled"}"#,
            6.0,
        ),
        (
            r#"binder_experiment_pods_total{experiment="rollout",arm="remote",result="scheduled"}"#,
            6.0,
        ),
        (r#"binder_experiment_nodes_used{experiment="rollout",arm="local"}"#, 3.0),
    ] {
        assert_eq!(sample(&text, series), want, "{series}\n{text}");
    }
    assert!(text.contains(r#"binder_experiment_decision_duration_seconds_count{experiment="rollout",arm="local"}"#));
    assert!(
        sample(
            &text,
            r#"binder_shadow_comparisons_total{experiment="rollout",arm="local",shadow="packing",result="same_node"}"#
        ) + sample(
            &text,
            r#"binder_shadow_comparisons_total{experiment="rollout",arm="local",shadow="packing",result="different_node"}"#
        ) == 6.0
    );
    let report = binder.experiment_report();
    let remote = report.arms.iter().find(|r| r.arm == "remote").unwrap();
    assert_eq!((remote.pods_bound, remote.pods_pinned), (6, 6));
    assert!(remote.decision_errors >= 6);
    assert_eq!(remote.backend, format!("http://{remote_addr}"));
    // Bin packing put the remote arm's six small pods on one node.
    assert_eq!(remote.nodes_used, 1);

    let table = placement_binder::experiments::cli::fetch(&format!("http://{http}"), OutputFormat::Text)
        .await
        .unwrap();
    assert!(table.contains("EXPERIMENT") && table.contains("remote"), "{table}");
    let json: serde_json::Value = serde_json::from_str(
        &placement_binder::experiments::cli::fetch(&format!("http://{http}"), OutputFormat::Json)
            .await
            .unwrap(),
    )
    .unwrap();
    let arms = json["arms"].as_array().unwrap();
    assert_eq!(arms.len(), 2);
    assert_eq!(json["shadows"][0]["shadow"], "packing");

    let _ = stop_binder.send(());
    run.await.unwrap();
    let _ = stop_watch.send(());
    watch.await.unwrap();
    let _ = stop_http.send(());
    let _ = stop_main.send(());
    let _ = stop_remote.send(());
    server.shutdown().await;
}
