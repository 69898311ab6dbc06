//! Policy files end to end: a real server on `127.0.0.1:0` started with `--policy-file`'s
//! configuration, the generated client, and the file rewritten, broken, removed and swapped the
//! way a ConfigMap volume swaps it. The server polls every 50 ms; the tests wait with
//! `eventually`, never a fixed sleep.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use placement_scheduler::engine::policy_config::parse_policy_file;
use placement_scheduler::grpc::server::ServeError;
use placement_scheduler::grpc::{serve, Metrics, PolicyFileConfig, PolicyFileError, ServerConfig};
use placement_scheduler::proto;
use placement_scheduler::proto::placement_service_client::PlacementServiceClient;
use placement_scheduler::proto::snapshot_ref::Source;
use placement_tests::fixtures::eventually;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;
use tonic::Code;

const WAIT: Duration = Duration::from_secs(20);
const RELOAD: Duration = Duration::from_millis(50);

const PLACEMENT_FILE: &str = "\
apiVersion: placement/v1
kind: PolicyConfiguration
policies:
  - name: alpha
    description: spread
  - name: beta
    description: pack
    scoringStrategy:
      type: MostAllocated
";

const KUBE_SCHEDULER_FILE: &str = "\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
profiles:
  - schedulerName: default-scheduler
  - schedulerName: packing
    plugins:
      score:
        disabled:
          - name: ImageLocality
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
";

/// Explicitly enables a plugin placement does not implement: rejected as a whole.
const BAD_FILE: &str = "\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
    plugins:
      filter:
        enabled:
          - name: SchedulingGates
";

type ServerHandle = JoinHandle<Result<(), ServeError>>;

struct Server {
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    stop: oneshot::Sender<()>,
    handle: ServerHandle,
}

async fn start(policy_file: Option<PathBuf>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    let (stop, rx) = oneshot::channel::<()>();
    let metrics = Arc::new(Metrics::new());
    let config = ServerConfig {
        policy_file: policy_file.map(|path| PolicyFileConfig {
            path,
            reload_interval: Some(RELOAD),
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
    }
}

impl Server {
    async fn client(&self) -> PlacementServiceClient<Channel> {
        let channel = Channel::from_shared(format!("http://{}", self.addr))
            .expect("valid uri")
            .connect()
            .await
            .expect("connect to the test server");
        PlacementServiceClient::new(channel)
    }

    /// The value of one sample line of /metrics, 0 when absent.
    fn metric(&self, sample: &str) -> f64 {
        metric(&self.metrics, sample)
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let result = tokio::time::timeout(WAIT, self.handle)
            .await
            .expect("server did not shut down")
            .expect("server task panicked");
        result.expect("server returned an error");
    }
}

fn metric(metrics: &Metrics, sample: &str) -> f64 {
    metrics
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(sample).and_then(|v| v.strip_prefix(' ')))
        .map_or(0.0, |v| v.parse().expect("a number"))
}

async fn list(c: &mut PlacementServiceClient<Channel>) -> proto::ListPoliciesResponse {
    c.list_policies(proto::ListPoliciesRequest {})
        .await
        .expect("ListPolicies")
        .into_inner()
}

fn names(r: &proto::ListPoliciesResponse) -> Vec<&str> {
    r.policies.iter().map(|p| p.name.as_str()).collect()
}

fn digests(r: &proto::ListPoliciesResponse) -> BTreeMap<String, String> {
    r.policies.iter().map(|p| (p.name.clone(), p.digest.clone())).collect()
}

/// Writes `text` to `path` by a rename, as an editor or kubelet would: a poll never sees half a file.
fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write the policy file");
    std::fs::rename(&tmp, path).expect("rename the policy file");
}

async fn names_become(server: &Server, want: &[&str]) {
    let c = server.client().await;
    eventually(WAIT, &format!("ListPolicies to name {want:?}"), || {
        let mut c = c.clone();
        async move { names(&list(&mut c).await) == want }
    })
    .await;
}

fn node(name: &str) -> proto::Node {
    proto::Node {
        name: name.to_string(),
        allocatable: BTreeMap::from([
            ("cpu".to_string(), "4".to_string()),
            ("memory".to_string(), "8Gi".to_string()),
            ("pods".to_string(), "10".to_string()),
        ]),
        ..Default::default()
    }
}

fn pod(uid: &str, cpu: &str, node_name: &str) -> proto::Pod {
    proto::Pod {
        uid: uid.to_string(),
        namespace: "default".to_string(),
        name: uid.to_string(),
        node_name: node_name.to_string(),
        containers: vec![proto::Container {
            name: "main".to_string(),
            requests: BTreeMap::from([
                ("cpu".to_string(), cpu.to_string()),
                ("memory".to_string(), "1Gi".to_string()),
            ]),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The best node for a 1-cpu pod under `policy`, between an empty node and a half-full one.
async fn best_node(c: &mut PlacementServiceClient<Channel>, policy: &str) -> Result<String, tonic::Status> {
    let snapshot = proto::Snapshot {
        nodes: vec![node("empty"), node("busy")],
        pods: vec![pod("bound", "2", "busy")],
        ..Default::default()
    };
    let r = c
        .rank(proto::RankRequest {
            snapshot: Some(proto::SnapshotRef {
                source: Some(Source::Inline(snapshot)),
            }),
            pod: Some(pod("new", "1", "")),
            policy: policy.to_string(),
            top_k: 1,
            seed: 0,
            infeasible_limit: None,
        })
        .await?
        .into_inner();
    Ok(r.feasible[0].node.clone())
}

#[tokio::test]
async fn policy_file_changes_are_applied_and_bad_ones_keep_the_current_policies() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("policies.yaml");
    write(&path, PLACEMENT_FILE);
    let server = start(Some(path.clone())).await;
    let mut c = server.client().await;

    // At start: the file's policies, the first the default, each naming its source and with the
    // digest of the engine's policy.
    let r = list(&mut c).await;
    assert_eq!(names(&r), ["alpha", "beta"]);
    assert_eq!(r.default_policy, "alpha");
    let parsed = parse_policy_file(PLACEMENT_FILE).expect("the file parses");
    for (info, policy) in r.policies.iter().zip(&parsed.policies) {
        assert_eq!(info.digest, policy.digest());
        assert_eq!(info.description, policy.description);
    }
    assert_eq!(
        r.policies[1].source,
        format!("{}: PolicyConfiguration policies[1]", path.display())
    );
    assert_eq!(r.policies[1].scoring_strategy, "MostAllocated");
    assert_eq!(server.metric("placement_policy_reloads_total{result=\"ok\"}"), 1.0);
    assert_eq!(server.metric("placement_policies"), 2.0);
    assert_eq!(best_node(&mut c, "alpha").await.unwrap(), "empty");
    assert_eq!(best_node(&mut c, "beta").await.unwrap(), "busy");

    // A valid change, in kube-scheduler's format: the new set replaces the old one whole.
    write(&path, KUBE_SCHEDULER_FILE);
    names_become(&server, &["default-scheduler", "packing"]).await;
    let r = list(&mut c).await;
    assert_eq!(r.default_policy, "default-scheduler");
    assert_eq!(
        r.policies[1].source,
        format!("{}: KubeSchedulerConfiguration profiles[1]", path.display())
    );
    let packing = &r.policies[1];
    assert_eq!(packing.scoring_strategy, "MostAllocated");
    assert!(!packing.scores.iter().any(|s| s.plugin == "ImageLocality"));
    assert_eq!(server.metric("placement_policy_reloads_total{result=\"ok\"}"), 2.0);
    assert_eq!(best_node(&mut c, "packing").await.unwrap(), "busy");
    assert_eq!(best_node(&mut c, "").await.unwrap(), "empty");
    let gone = best_node(&mut c, "beta").await.unwrap_err();
    assert_eq!(gone.code(), Code::InvalidArgument);
    assert!(gone.message().contains("unknown policy \"beta\""), "{}", gone.message());
    let kube_digests = digests(&r);
    let info = format!(
        "placement_policy_config_info{{source=\"{}\",digest=\"{}\"}}",
        path.display(),
        parse_digest(KUBE_SCHEDULER_FILE)
    );
    assert_eq!(server.metric(&info), 1.0, "{}", server.metrics.encode());

    // An invalid file: counted as an error, the policies stay.
    write(&path, BAD_FILE);
    eventually(WAIT, "the bad file to be rejected", || async {
        server.metric("placement_policy_reloads_total{result=\"error\"}") == 1.0
    })
    .await;
    assert_eq!(digests(&list(&mut c).await), kube_digests);
    assert_eq!(server.metric(&info), 1.0, "the info gauge still names the file in use");

    // The file removed: one more error, the policies still stay.
    std::fs::remove_file(&path).expect("remove the policy file");
    eventually(WAIT, "the missing file to count as an error", || async {
        server.metric("placement_policy_reloads_total{result=\"error\"}") == 2.0
    })
    .await;
    assert_eq!(digests(&list(&mut c).await), kube_digests);
    assert_eq!(best_node(&mut c, "packing").await.unwrap(), "busy");

    // The file back, valid: in use again.
    write(&path, PLACEMENT_FILE);
    names_become(&server, &["alpha", "beta"]).await;
    assert_eq!(server.metric("placement_policy_reloads_total{result=\"ok\"}"), 3.0);
    assert_eq!(server.metric("placement_policy_reloads_total{result=\"error\"}"), 2.0);
    server.stop().await;
}

fn parse_digest(text: &str) -> String {
    placement_scheduler::grpc::policy_file::parse_policies(Path::new("x"), text.as_bytes())
        .expect("parses")
        .digest
}

/// kubelet's AtomicWriter: the data lives in a timestamped directory, `..data` points at it, the
/// key is a symlink through `..data`; an update writes a new directory and renames a new `..data`
/// symlink over the old one.
#[cfg(unix)]
#[tokio::test]
async fn a_configmap_volume_update_is_picked_up_through_the_symlinks() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    let version = |name: &str, text: &str| {
        std::fs::create_dir(root.join(name)).expect("create a version directory");
        std::fs::write(root.join(name).join("policies.yaml"), text).expect("write the version");
    };
    version("..2026_11_21_09_00_00.1", PLACEMENT_FILE);
    symlink("..2026_11_21_09_00_00.1", root.join("..data")).expect("..data");
    symlink("..data/policies.yaml", root.join("policies.yaml")).expect("the key");
    let server = start(Some(root.join("policies.yaml"))).await;
    names_become(&server, &["alpha", "beta"]).await;

    version("..2026_11_21_09_01_00.2", KUBE_SCHEDULER_FILE);
    symlink("..2026_11_21_09_01_00.2", root.join("..data_tmp")).expect("..data_tmp");
    std::fs::rename(root.join("..data_tmp"), root.join("..data")).expect("swap ..data");
    std::fs::remove_dir_all(root.join("..2026_11_21_09_00_00.1")).expect("remove the old version");
    names_become(&server, &["default-scheduler", "packing"]).await;
    assert_eq!(server.metric("placement_policy_reloads_total{result=\"ok\"}"), 2.0);
    assert_eq!(server.metric("placement_policy_reloads_total{result=\"error\"}"), 0.0);
    server.stop().await;
}

#[tokio::test]
async fn an_invalid_or_missing_policy_file_stops_the_server_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("policies.yaml");
    write(&path, BAD_FILE);
    let server = start(Some(path.clone())).await;
    let err = tokio::time::timeout(WAIT, server.handle)
        .await
        .expect("serve returns")
        .expect("no panic")
        .expect_err("an invalid file is refused");
    assert!(
        matches!(&err, ServeError::PolicyFile(PolicyFileError::Parse { .. })),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&path.display().to_string())
            && message.contains("profiles[0].plugins.filter.enabled[0]")
            && message.contains("\"SchedulingGates\""),
        "{message}"
    );
    assert_eq!(
        metric(&server.metrics, "placement_policy_reloads_total{result=\"error\"}"),
        1.0
    );

    let missing = dir.path().join("absent.yaml");
    let server = start(Some(missing.clone())).await;
    let err = tokio::time::timeout(WAIT, server.handle)
        .await
        .expect("serve returns")
        .expect("no panic")
        .expect_err("a missing file is refused");
    assert!(
        matches!(&err, ServeError::PolicyFile(PolicyFileError::Read { .. })),
        "{err:?}"
    );
    assert!(err.to_string().contains("absent.yaml"), "{err}");
    assert_eq!(
        metric(&server.metrics, "placement_policy_reloads_total{result=\"error\"}"),
        1.0
    );
}

#[tokio::test]
async fn without_a_policy_file_the_built_in_policies_are_reported_as_such() {
    let server = start(None).await;
    let mut c = server.client().await;
    let r = list(&mut c).await;
    assert_eq!(names(&r), ["default", "bin-packing", "requested-to-capacity-ratio"]);
    assert!(r.policies.iter().all(|p| p.source == "built-in"));
    assert_eq!(
        server.metric("placement_policy_config_info{source=\"built-in\",digest=\"built-in\"}"),
        1.0
    );
    assert_eq!(server.metric("placement_policies"), 3.0);
    server.stop().await;
}

const RULES_FILE: &str = r#"
apiVersion: placement/v1
kind: PolicyConfiguration
policies:
  - name: nginx-on-test-nodes
    rules:
      filters:
        - name: nginx-needs-test-label
          expression: "!pod.metadata.name.contains('nginx') || ('test' in node.metadata.labels && node.metadata.labels['test'] == 'test')"
          reason: no match label
      scores:
        - name: short-names
          expression: "20 - size(node.metadata.name)"
          weight: 3
"#;

/// Ranks the pod `<workload>-1` on `nodes` under the file's default policy.
async fn rank_on(
    c: &mut PlacementServiceClient<Channel>,
    nodes: Vec<proto::Node>,
    workload: &str,
) -> proto::RankResponse {
    let p = pod(&format!("{workload}-1"), "1", "");
    c.rank(proto::RankRequest {
        snapshot: Some(proto::SnapshotRef {
            source: Some(Source::Inline(proto::Snapshot {
                nodes,
                ..Default::default()
            })),
        }),
        pod: Some(p),
        policy: String::new(),
        top_k: 0,
        seed: 0,
        infeasible_limit: None,
    })
    .await
    .expect("Rank")
    .into_inner()
}

#[tokio::test]
async fn cel_rules_filter_and_score_over_grpc_and_reload_with_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("policies.yaml");
    write(&path, RULES_FILE);
    let server = start(Some(path.clone())).await;
    let mut c = server.client().await;

    // ListPolicies shows the rules.
    let r = list(&mut c).await;
    let info = &r.policies[0];
    assert_eq!(info.filter_rules.len(), 1);
    assert_eq!(info.filter_rules[0].name, "nginx-needs-test-label");
    assert_eq!(info.filter_rules[0].reason, "no match label");
    assert_eq!(info.score_rules[0].expression, "20 - size(node.metadata.name)");
    assert_eq!(info.score_rules[0].weight, 3);

    // The seed plugin: pods named *nginx* only on nodes labelled test=test.
    let mut labelled = node("labelled");
    labelled.labels.insert("test".to_string(), "test".to_string());
    let nodes = vec![node("a"), labelled.clone(), node("b")];
    let ranked = rank_on(&mut c, nodes.clone(), "nginx").await;
    let feasible: Vec<&str> = ranked.feasible.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(feasible, ["labelled"]);
    assert_eq!(ranked.infeasible.len(), 2);
    let refused = rank_on(&mut c, vec![node("a"), node("b")], "nginx").await;
    assert!(
        refused
            .message
            .starts_with("0/2 nodes are available: 2 no match label."),
        "{}",
        refused.message
    );
    // Another workload goes anywhere; the score rule ranks the shortest name first.
    let other = rank_on(&mut c, nodes.clone(), "redis").await;
    let order: Vec<&str> = other.feasible.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(order.len(), 3);
    assert_eq!(order[2], "labelled", "the longest name scores lowest: {order:?}");

    // A bad expression on reload: refused, the current rules stay.
    write(
        &path,
        &RULES_FILE.replace("20 - size(node.metadata.name)", "20 - size(node.metadata.name"),
    );
    eventually(WAIT, "the bad rule to be rejected", || async {
        server.metric("placement_policy_reloads_total{result=\"error\"}") == 1.0
    })
    .await;
    let parse_error =
        parse_policy_file(&RULES_FILE.replace("20 - size(node.metadata.name)", "20 - size(node.metadata.name"))
            .expect_err("the expression does not compile")
            .to_string();
    assert!(
        parse_error.starts_with("policies[0].rules.scores[0].expression: line 1 column "),
        "{parse_error}"
    );
    assert_eq!(rank_on(&mut c, nodes.clone(), "nginx").await.feasible.len(), 1);

    // A valid change is applied: the rule now asks for another label.
    write(&path, &RULES_FILE.replace("('test' in", "('other' in"));
    let c2 = c.clone();
    let nodes2 = nodes.clone();
    eventually(WAIT, "the changed rule to apply", || {
        let mut c = c2.clone();
        let nodes = nodes2.clone();
        async move { rank_on(&mut c, nodes, "nginx").await.feasible.is_empty() }
    })
    .await;
    server.stop().await;
}
