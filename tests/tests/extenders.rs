//! kube-scheduler extenders through the decision service: the example extender
//! (`tests/extender/extender.py`, a real HTTP server process) configured by a
//! KubeSchedulerConfiguration's `extenders:`, a real server on `127.0.0.1:0`, Schedule over gRPC.
//! The extender's filter rejects pods named `reject-*`; its prioritize scores nodes by name
//! (`20 - len(name)`, the shortest name wins).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use placement_scheduler::grpc::server::ServeError;
use placement_scheduler::grpc::{serve, Metrics, PolicyFileConfig, ServerConfig};
use placement_scheduler::proto;
use placement_scheduler::proto::placement::Outcome;
use placement_scheduler::proto::placement_service_client::PlacementServiceClient;
use placement_scheduler::proto::snapshot_ref::Source;
use placement_tests::extender_process::ExtenderProcess;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

const WAIT: Duration = Duration::from_secs(20);

struct Server {
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    stop: oneshot::Sender<()>,
    handle: JoinHandle<Result<(), ServeError>>,
    _dir: tempfile::TempDir,
}

/// A server whose policy file is `config` (a KubeSchedulerConfiguration).
async fn start(config: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scheduler-config.yaml");
    std::fs::write(&path, config).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = oneshot::channel::<()>();
    let metrics = Arc::new(Metrics::new());
    let config = ServerConfig {
        policy_file: Some(PolicyFileConfig {
            path,
            reload_interval: None,
        }),
        ..ServerConfig::default()
    };
    let handle = tokio::spawn(serve(listener, config, Arc::clone(&metrics), async move {
        let _ = rx.await;
    }));
    Server {
        addr,
        metrics,
        stop,
        handle,
        _dir: dir,
    }
}

impl Server {
    async fn client(&self) -> PlacementServiceClient<Channel> {
        let channel = Channel::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect_timeout(WAIT)
            .connect()
            .await
            .expect("connect to the test server");
        PlacementServiceClient::new(channel)
    }

    fn metric(&self, sample: &str) -> f64 {
        self.metrics
            .encode()
            .lines()
            .find_map(|l| l.strip_prefix(sample).and_then(|v| v.strip_prefix(' ')))
            .map_or(0.0, |v| v.parse().expect("a number"))
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(WAIT, self.handle)
            .await
            .expect("server did not shut down")
            .expect("server task panicked")
            .expect("server returned an error");
    }
}

/// The example's KubeSchedulerConfiguration, with `extra` lines added to its extender.
fn ksc(url: &str, extra: &str) -> String {
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: placement-scheduler
extenders:
  - urlPrefix: {url}
    filterVerb: filter
    prioritizeVerb: prioritize
    weight: 1
{extra}"
    )
}

fn node(name: &str) -> proto::Node {
    proto::Node {
        name: name.to_string(),
        labels: BTreeMap::from([("kubernetes.io/hostname".to_string(), name.to_string())]),
        allocatable: BTreeMap::from([
            ("cpu".to_string(), "4".to_string()),
            ("memory".to_string(), "8Gi".to_string()),
            ("pods".to_string(), "10".to_string()),
        ]),
        ..Default::default()
    }
}

fn pod(name: &str) -> proto::Pod {
    proto::Pod {
        uid: format!("uid-{name}"),
        namespace: "default".to_string(),
        name: name.to_string(),
        labels: BTreeMap::from([("app".to_string(), "nginx".to_string())]),
        containers: vec![proto::Container {
            name: "main".to_string(),
            requests: BTreeMap::from([
                ("cpu".to_string(), "100m".to_string()),
                ("memory".to_string(), "128Mi".to_string()),
            ]),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Three nodes whose names score 20 - len: `n1` 10 (capped), `node-22` 13 → 10, `a-long-node-name` 4.
fn snapshot() -> proto::Snapshot {
    proto::Snapshot {
        nodes: vec![node("a-long-node-name"), node("node-22"), node("n1")],
        ..Default::default()
    }
}

/// Schedules `pods` in one batch; each pod's node, or its unschedulable message (prefixed with
/// `error: ` when the answer says scheduling failed with an error).
async fn schedule(server: &Server, pods: Vec<proto::Pod>) -> Vec<Result<String, String>> {
    let mut c = server.client().await;
    let r = c
        .schedule(proto::ScheduleRequest {
            snapshot: Some(proto::SnapshotRef {
                source: Some(Source::Inline(snapshot())),
            }),
            pods,
            policy: "placement-scheduler".to_string(),
            ..Default::default()
        })
        .await
        .expect("Schedule")
        .into_inner();
    r.placements
        .into_iter()
        .map(|p| match p.outcome {
            Some(Outcome::NodeName(n)) => Ok(n),
            Some(Outcome::Unschedulable(u)) if u.error => Err(format!("error: {}", u.message)),
            Some(Outcome::Unschedulable(u)) => Err(u.message),
            None => Err("no outcome".to_string()),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_extender_filters_by_pod_name_and_scores_by_node_name() {
    let extender = ExtenderProcess::start(&[]);
    let server = start(&ksc(&extender.url(), "")).await;
    let out = schedule(&server, vec![pod("nginx-1"), pod("reject-me")]).await;
    // Prioritize: n1 and node-22 both score 10 × weight 1 × 10 = 100 extra; the built-in scores
    // of three empty nodes are equal, so the tie-break picks between those two, never the long name.
    let placed = out[0].as_ref().expect("nginx-1 is placed");
    assert!(placed == "n1" || placed == "node-22", "placed on {placed}");
    // FailedAndUnresolvableNodes: preemption does not look at them, as kube-scheduler's.
    assert_eq!(
        out[1],
        Err(
            "0/3 nodes are available: 3 extender rejects pods named reject-*. preemption: 0/3 nodes are \
             available: 3 Preemption is not helpful for scheduling."
                .to_string()
        ),
        "the extender's failed nodes are counted as kube-scheduler counts them"
    );
    // What went over the wire: Go's field names, full v1.Node objects (not nodeCacheCapable).
    let requests = extender.requests();
    let (verb, args) = &requests[0];
    assert_eq!(verb, "filter");
    assert_eq!(args["Pod"]["metadata"]["name"], "nginx-1");
    assert_eq!(
        args["Pod"]["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "100m"
    );
    assert!(args["NodeNames"].is_null());
    let items = args["Nodes"]["items"].as_array().expect("a NodeList");
    assert_eq!(items.len(), 3);
    assert_eq!(items[0]["status"]["allocatable"]["pods"], "10");
    assert!(requests.iter().any(|(v, _)| v == "prioritize"));
    let filter_calls = format!(
        "placement_extender_calls_total{{extender=\"{}\",verb=\"filter\"}}",
        extender.url()
    );
    assert_eq!(server.metric(&filter_calls), 2.0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_nodes_are_left_to_preemption_as_kube_scheduler_leaves_them() {
    let extender = ExtenderProcess::start(&["--resolvable"]);
    let server = start(&ksc(&extender.url(), "")).await;
    let out = schedule(&server, vec![pod("reject-me")]).await;
    // FailedNodes are resolvable: preemption looks at them (and finds no victims on empty nodes).
    assert_eq!(
        out[0],
        Err(
            "0/3 nodes are available: 3 extender rejects pods named reject-*. preemption: 0/3 nodes are \
             available: 3 No preemption victims found for incoming pod."
                .to_string()
        )
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cache_capable_extender_gets_node_names_and_its_scores_decide() {
    let extender = ExtenderProcess::start(&[]);
    // Weight 5: 10 × 5 × 10 = 500 for the short names, 4 × 5 × 10 = 200 for the long one.
    let config = ksc(&extender.url(), "    nodeCacheCapable: true\n").replace("weight: 1", "weight: 5");
    let server = start(&config).await;
    let out = schedule(&server, vec![pod("nginx-1")]).await;
    assert!(matches!(out[0].as_deref(), Ok("n1") | Ok("node-22")), "{out:?}");
    let requests = extender.requests();
    let (_, args) = &requests[0];
    assert!(args["Nodes"].is_null());
    assert_eq!(args["NodeNames"].as_array().map(Vec::len), Some(3));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_extender_makes_the_pod_fail_with_kube_schedulers_error_text() {
    let failing_500 = ExtenderProcess::start(&["--mode", "500"]);
    let server = start(&ksc(&failing_500.url(), "")).await;
    let out = schedule(&server, vec![pod("nginx-1")]).await;
    assert_eq!(
        out[0],
        Err(format!(
            "error: failed filter with extender at URL {}/filter, code 500",
            failing_500.url()
        ))
    );
    let errors = format!(
        "placement_extender_errors_total{{extender=\"{}\",verb=\"filter\"}}",
        failing_500.url()
    );
    assert_eq!(server.metric(&errors), 1.0);
    server.stop().await;

    let garbage = ExtenderProcess::start(&["--mode", "garbage"]);
    let server = start(&ksc(&garbage.url(), "")).await;
    let out = schedule(&server, vec![pod("nginx-1")]).await;
    assert_eq!(
        out[0],
        Err("error: invalid character 'g' looking for beginning of value".to_string())
    );
    server.stop().await;

    let slow = ExtenderProcess::start(&["--mode", "slow", "--delay", "3"]);
    let server = start(&ksc(&slow.url(), "    httpTimeout: 300ms\n")).await;
    let started = std::time::Instant::now();
    let out = schedule(&server, vec![pod("nginx-1")]).await;
    assert_eq!(
        out[0],
        Err(format!(
            "error: Post \"{}/filter\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
            slow.url()
        ))
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "httpTimeout bounds the call"
    );
    server.stop().await;

    // Nothing listens on a port just released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let server = start(&ksc(&url, "")).await;
    let out = schedule(&server, vec![pod("nginx-1")]).await;
    assert_eq!(
        out[0],
        Err(format!(
            "error: Post \"{url}/filter\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        ))
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignorable_extender_that_fails_is_skipped() {
    let failing = ExtenderProcess::start(&["--mode", "500"]);
    let server = start(&ksc(&failing.url(), "    ignorable: true\n")).await;
    let out = schedule(&server, vec![pod("nginx-1"), pod("reject-me")]).await;
    assert!(out[0].is_ok(), "{out:?}");
    assert!(out[1].is_ok(), "the extender that would reject it is skipped: {out:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_resources_send_only_the_pods_requesting_them() {
    let extender = ExtenderProcess::start(&[]);
    let config = ksc(
        &extender.url(),
        "    managedResources:\n      - name: example.com/foo\n",
    );
    let server = start(&config).await;
    let mut wants = pod("reject-wants-foo");
    wants.containers[0]
        .requests
        .insert("example.com/foo".to_string(), "1".to_string());
    let mut snap_node = node("n1");
    snap_node
        .allocatable
        .insert("example.com/foo".to_string(), "4".to_string());
    let mut c = server.client().await;
    let r = c
        .schedule(proto::ScheduleRequest {
            snapshot: Some(proto::SnapshotRef {
                source: Some(Source::Inline(proto::Snapshot {
                    nodes: vec![snap_node],
                    ..Default::default()
                })),
            }),
            pods: vec![pod("reject-plain"), wants],
            policy: "placement-scheduler".to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(matches!(r.placements[0].outcome, Some(Outcome::NodeName(_))));
    assert!(matches!(r.placements[1].outcome, Some(Outcome::Unschedulable(_))));
    let names: Vec<String> = extender
        .requests()
        .iter()
        .map(|(_, a)| a["Pod"]["metadata"]["name"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(names, vec!["reject-wants-foo".to_string()]);
    server.stop().await;
}

/// rcgen: a CA and a server certificate for 127.0.0.1 signed by it, PEM, written to `dir`.
fn certificates(dir: &Path, names: &[&str]) -> (String, std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name.push(DnType::CommonName, "extender test CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca_key = KeyPair::generate().unwrap();
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, ca_key);
    let mut leaf = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    leaf.distinguished_name.push(DnType::CommonName, "extender");
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (ca_pem, cert_path, key_path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_extender_is_verified_with_the_configured_ca() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, cert, key) = certificates(dir.path(), &["127.0.0.1", "localhost"]);
    let extender = ExtenderProcess::start(&["--cert", cert.to_str().unwrap(), "--key", key.to_str().unwrap()]);
    let url = format!("https://127.0.0.1:{}", extender.port);
    let ca_data = base64::engine::general_purpose::STANDARD.encode(&ca_pem);
    let server = start(&ksc(
        &url,
        &format!("    enableHTTPS: true\n    tlsConfig:\n      caData: {ca_data}\n"),
    ))
    .await;
    let out = schedule(&server, vec![pod("nginx-1"), pod("reject-me")]).await;
    assert!(out[0].is_ok(), "{out:?}");
    assert!(out[1].is_err(), "the extender was reached over TLS: {out:?}");
    server.stop().await;

    // A CA that did not sign the extender's certificate: the handshake fails, the pod too.
    let other = certificates(tempfile::tempdir().unwrap().path(), &["127.0.0.1"]).0;
    let other = base64::engine::general_purpose::STANDARD.encode(&other);
    let server = start(&ksc(
        &url,
        &format!("    enableHTTPS: true\n    tlsConfig:\n      caData: {other}\n"),
    ))
    .await;
    let out = schedule(&server, vec![pod("nginx-1")]).await;
    let message = out[0].as_ref().expect_err("the certificate is not trusted");
    assert!(
        message.starts_with(&format!("error: Post \"{url}/filter\": ")),
        "{message}"
    );
    server.stop().await;
}

/// `binder-agent simulate --policy-file` with the example's KubeSchedulerConfiguration: the
/// in-process replicas call the extender, which turns down the synthetic `auth-*` pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_with_a_policy_file_calls_the_extender() {
    use clap::Parser as _;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: placement_binder::simulate::SimulateArgs,
    }
    let extender = ExtenderProcess::start(&["--reject-prefix", "auth-"]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scheduler-config.yaml");
    std::fs::write(&path, ksc(&extender.url(), "    nodeCacheCapable: true\n")).unwrap();
    let cli = Cli::parse_from([
        "simulate",
        "--nodes",
        "40",
        "--pods",
        "300",
        "--quiet",
        "--timeout",
        "60s",
        "--policy-file",
        path.to_str().unwrap(),
    ]);
    let policies = cli.args.policies().expect("the file loads");
    let mut config = cli.args.config_with(policies.as_ref());
    config.record_outcomes = true;
    let summary = placement_binder::simulate::simulate(config)
        .await
        .expect("simulate runs");
    assert!(summary.completed, "{summary}");
    assert!(summary.unschedulable > 0, "some auth-* pods: {summary}");
    assert_eq!(summary.placed + summary.unschedulable, 300, "{summary}");
    assert!(
        summary
            .top_unschedulable
            .iter()
            .any(|m| m.message.contains("extender rejects pods named auth-*")),
        "{summary}"
    );
    let per_pod = summary.extender_per_pod.expect("each pod's time in extender calls");
    assert!(per_pod.count >= summary.placed && per_pod.p50_ms > 0.0, "{per_pod:?}");
    let filtered = extender.requests().iter().filter(|(v, _)| v == "filter").count();
    // Every placed pod went through the extender's filter (a pod the filters leave no node is
    // not sent, as kube-scheduler sends none).
    assert!(
        filtered >= summary.placed,
        "{filtered} filter calls for {} placed pods",
        summary.placed
    );

    // A bindVerb has nothing to bind in simulate's in-memory cluster: refused.
    std::fs::write(&path, ksc(&extender.url(), "    bindVerb: bind\n")).unwrap();
    let err = cli.args.policies().unwrap_err().to_string();
    assert!(err.contains("bindVerb is not supported here"), "{err}");
}

/// `binder-agent simulate --policy-file` with a CEL filter rule of the custom-logic example's
/// kind (here over the synthetic pods' `app` label, since they carry no `workload_name`): the
/// `auth` pods find no node labelled `test/test` and are refused with the rule's reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_with_a_policy_file_applies_its_cel_rules() {
    use clap::Parser as _;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: placement_binder::simulate::SimulateArgs,
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policies.yaml");
    std::fs::write(
        &path,
        "apiVersion: placement/v1
kind: PolicyConfiguration
policies:
  - name: auth-on-test-nodes
    rules:
      filters:
        - name: auth-needs-test-label
          expression: >-
            !('app' in pod.metadata.labels) || pod.metadata.labels['app'] != 'auth'
            || 'test/test' in node.metadata.labels
          reason: node(s) didn't have label test/test
",
    )
    .unwrap();
    let cli = Cli::parse_from([
        "simulate",
        "--nodes",
        "40",
        "--pods",
        "300",
        "--quiet",
        "--timeout",
        "60s",
        "--policy-file",
        path.to_str().unwrap(),
    ]);
    let policies = cli.args.policies().expect("the file loads");
    let summary = placement_binder::simulate::simulate(cli.args.config_with(policies.as_ref()))
        .await
        .expect("simulate runs");
    assert!(summary.completed && summary.passed(), "{summary}");
    assert!(summary.unschedulable > 0, "the auth pods: {summary}");
    assert!(
        summary
            .top_unschedulable
            .iter()
            .any(|m| m.message.starts_with("0/40 nodes are available:")
                && m.message.contains("node(s) didn't have label test/test")),
        "{summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_config_server_name_names_the_certificate_checked() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    // A certificate for a DNS name only, served on 127.0.0.1.
    let (ca_pem, cert, key) = certificates(dir.path(), &["extender.test"]);
    let extender = ExtenderProcess::start(&["--cert", cert.to_str().unwrap(), "--key", key.to_str().unwrap()]);
    let url = format!("https://127.0.0.1:{}", extender.port);
    let ca_data = base64::engine::general_purpose::STANDARD.encode(&ca_pem);
    let tls =
        |server_name: &str| format!("    enableHTTPS: true\n    tlsConfig:\n      caData: {ca_data}\n{server_name}");
    let server = start(&ksc(&url, &tls("      serverName: extender.test\n"))).await;
    let out = schedule(&server, vec![pod("nginx-1")]).await;
    assert!(out[0].is_ok(), "{out:?}");
    server.stop().await;

    let server = start(&ksc(&url, &tls(""))).await;
    let out = schedule(&server, vec![pod("nginx-1")]).await;
    let message = out[0].as_ref().expect_err("127.0.0.1 is not the certificate's name");
    assert!(
        message.starts_with(&format!("error: Post \"{url}/filter\": ")),
        "{message}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_config_client_certificates_authenticate_placement_to_the_extender() {
    use base64::Engine as _;
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, cert, key) = certificates(dir.path(), &["127.0.0.1"]);
    // The extender trusts client certificates of its own CA only.
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name.push(DnType::CommonName, "client CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca_key = KeyPair::generate().unwrap();
    let client_ca = dir.path().join("client-ca.crt");
    std::fs::write(&client_ca, ca.self_signed(&ca_key).unwrap().pem()).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let mut leaf = CertificateParams::new(vec!["placement".to_string()]).unwrap();
    leaf.distinguished_name.push(DnType::CommonName, "placement");
    let leaf_key = KeyPair::generate().unwrap();
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer).unwrap();
    let extender = ExtenderProcess::start(&[
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
        "--client-ca",
        client_ca.to_str().unwrap(),
    ]);
    let url = format!("https://127.0.0.1:{}", extender.port);
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let ca_data = b64(ca_pem.as_bytes());
    let with_client = format!(
        "    enableHTTPS: true\n    tlsConfig:\n      caData: {ca_data}\n      certData: {}\n      keyData: {}\n",
        b64(leaf_cert.pem().as_bytes()),
        b64(leaf_key.serialize_pem().as_bytes())
    );
    let server = start(&ksc(&url, &with_client)).await;
    let out = schedule(&server, vec![pod("nginx-1"), pod("reject-me")]).await;
    assert!(out[0].is_ok() && out[1].is_err(), "{out:?}");
    server.stop().await;

    let without = format!("    enableHTTPS: true\n    tlsConfig:\n      caData: {ca_data}\n");
    let server = start(&ksc(&url, &without)).await;
    let out = schedule(&server, vec![pod("nginx-1")]).await;
    let message = out[0].as_ref().expect_err("no client certificate");
    assert!(
        message.starts_with(&format!("error: Post \"{url}/filter\": ")),
        "{message}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_prioritizer_interested_in_the_pod_scores_it() {
    let a = ExtenderProcess::start(&[]);
    let b = ExtenderProcess::start(&[]);
    let config = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: placement-scheduler
extenders:
  - urlPrefix: {}
    prioritizeVerb: prioritize
    weight: 1
  - urlPrefix: {}
    prioritizeVerb: prioritize
    weight: 2
",
        a.url(),
        b.url()
    );
    let server = start(&config).await;
    let out = schedule(&server, vec![pod("nginx-1")]).await;
    // The long name scores 4, the others 10: (10 - 4) × (1 + 2) × 10 = 180 points ahead.
    assert!(matches!(out[0].as_deref(), Ok("n1") | Ok("node-22")), "{out:?}");
    for e in [&a, &b] {
        let verbs: Vec<String> = e.requests().into_iter().map(|(v, _)| v).collect();
        assert_eq!(verbs, ["prioritize"], "no filterVerb: only prioritize is called");
    }
    server.stop().await;
}
