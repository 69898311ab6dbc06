//! Hostile and buggy callers against a decision service on a real socket (127.0.0.1:0): echoed
//! values cut short, scores in range for any quantity, the codes gRPC's own implementations
//! answer, Kubernetes' validation, selectors and objects as large as the API server allows,
//! connections that never start or stay idle, and a CEL rule as costly as a pod can make it.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use placement_scheduler::grpc::conn::ConnLimits;
use placement_scheduler::grpc::{serve, Metrics, ServerConfig};
use placement_scheduler::proto;
use placement_scheduler::proto::placement_service_client::PlacementServiceClient;
use placement_scheduler::proto::snapshot_ref::Source;
use placement_scheduler::proto::sync_snapshot_request::Kind;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tonic::transport::Channel;
use tonic::{Code, Status};
use tonic_types::StatusExt;

/// A server on 127.0.0.1:0, stopped when dropped.
struct Server {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Server {
    async fn start(config: ServerConfig) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve(listener, config, Arc::new(Metrics::new()), async move {
            let _ = stopped.await;
        }));
        Self { addr, stop: Some(stop) }
    }

    async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.addr))
            .expect("uri")
            .connect()
            .await
            .expect("connect")
    }

    async fn client(&self) -> PlacementServiceClient<Channel> {
        PlacementServiceClient::new(self.channel().await)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn node(name: &str, cpu: &str, memory: &str) -> proto::Node {
    proto::Node {
        name: name.to_string(),
        allocatable: map(&[("cpu", cpu), ("memory", memory), ("pods", "110")]),
        ..Default::default()
    }
}

fn pod(uid: &str, requests: &[(&str, &str)]) -> proto::Pod {
    proto::Pod {
        uid: uid.to_string(),
        namespace: "default".into(),
        name: uid.to_string(),
        containers: vec![proto::Container {
            name: "c".into(),
            requests: map(requests),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn inline(nodes: Vec<proto::Node>, pods: Vec<proto::Pod>) -> Option<proto::SnapshotRef> {
    Some(proto::SnapshotRef {
        source: Some(Source::Inline(proto::Snapshot {
            nodes,
            pods,
            ..Default::default()
        })),
    })
}

fn rank_req(snapshot: Option<proto::SnapshotRef>, p: proto::Pod) -> proto::RankRequest {
    proto::RankRequest {
        snapshot,
        pod: Some(p),
        top_k: 10,
        ..Default::default()
    }
}

fn schedule_req(snapshot: Option<proto::SnapshotRef>, pods: Vec<proto::Pod>) -> proto::ScheduleRequest {
    proto::ScheduleRequest {
        snapshot,
        pods,
        ..Default::default()
    }
}

fn small() -> Option<proto::SnapshotRef> {
    inline(vec![node("n1", "8", "16Gi"), node("n2", "8", "16Gi")], vec![])
}

/// Bytes a status takes in the answer's metadata: its message and its details.
fn status_bytes(s: &Status) -> usize {
    s.message().len() + s.details().len()
}

/// Asserts INVALID_ARGUMENT naming `field` (in the message and the BadRequest detail).
fn assert_invalid(s: &Status, field: &str, contains: &str) {
    assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
    assert!(
        s.message().starts_with(&format!("{field}: ")),
        "{:?} should name {field}",
        s.message()
    );
    assert!(
        s.message().contains(contains),
        "{:?} should say {contains:?}",
        s.message()
    );
    let details = s.get_error_details();
    let bad = details.bad_request().expect("a google.rpc.BadRequest");
    assert_eq!(bad.field_violations[0].field, field);
}

// ---------------------------------------------------------------------------------------------
// Point 5: errors quote a short prefix of the caller's value.
// ---------------------------------------------------------------------------------------------

/// The largest status any of these answers: far below the 8 KiB of metadata gRPC's C core
/// accepts, whatever the size of the value refused.
const SMALL_STATUS: usize = 2048;

#[tokio::test]
async fn errors_quote_a_short_prefix_of_large_values() {
    let server = Server::start(ServerConfig::default()).await;
    let mut c = server.client().await;
    let long = "x".repeat(20_000);
    let bad_quantity = pod("p", &[("cpu", &long)]);
    let mut bad_operator = pod("p", &[]);
    bad_operator.node_affinity = Some(proto::NodeAffinity {
        required: Some(proto::NodeSelector {
            terms: vec![proto::NodeSelectorTerm {
                match_expressions: vec![proto::NodeSelectorRequirement {
                    key: "zone".into(),
                    operator: long.clone(),
                    values: vec![],
                }],
                match_fields: vec![],
            }],
        }),
        preferred: vec![],
    });
    let mut bad_key = pod("p", &[]);
    bad_key.containers[0].requests = map(&[(&format!("example.com/{long}"), "1")]);
    let cases = [
        (
            "bad quantity",
            rank_req(small(), bad_quantity),
            "pod.containers[0].requests[\"cpu\"]",
        ),
        (
            "bad operator",
            rank_req(small(), bad_operator),
            "pod.node_affinity.required.terms[0].match_expressions[0].operator",
        ),
        (
            "bad resource name",
            rank_req(small(), bad_key),
            "pod.containers[0].requests[\"example.com/",
        ),
        (
            "unknown policy",
            proto::RankRequest {
                policy: long.clone(),
                ..rank_req(small(), pod("p", &[]))
            },
            "policy",
        ),
    ];
    for (what, req, field) in cases {
        let s = c.rank(req).await.expect_err(what);
        assert_eq!(s.code(), Code::InvalidArgument, "{what}: {s:?}");
        assert!(s.message().starts_with(field), "{what}: {:?}", s.message());
        assert!(
            s.message().contains("\"… (200"),
            "{what} quotes a prefix and the length: {:?}",
            s.message()
        );
        assert!(status_bytes(&s) < SMALL_STATUS, "{what}: {} bytes", status_bytes(&s));
    }
    // An unknown snapshot id of any length: NOT_FOUND with its ErrorInfo, still small, so the
    // caller sees NOT_FOUND and re-sends a full snapshot.
    let s = c
        .rank(rank_req(
            Some(proto::SnapshotRef {
                source: Some(Source::SnapshotId(long.clone())),
            }),
            pod("p", &[]),
        ))
        .await
        .expect_err("unknown id");
    assert_eq!(s.code(), Code::NotFound, "{s:?}");
    assert_eq!(
        s.get_error_details().error_info().map(|i| i.reason.clone()),
        Some("SNAPSHOT_NOT_FOUND".to_string())
    );
    assert!(status_bytes(&s) < SMALL_STATUS, "{} bytes", status_bytes(&s));
    // A duplicate uid of 20,000 bytes in a batch.
    let s = c
        .schedule(schedule_req(
            small(),
            vec![pod(&long[..200], &[]), pod(&long[..200], &[])],
        ))
        .await
        .expect_err("duplicate");
    assert_invalid(&s, "pods[1].uid", "duplicate pod uid");
    assert!(status_bytes(&s) < SMALL_STATUS);
}

// ---------------------------------------------------------------------------------------------
// Point 6: NodeResourcesFit stays in [0, 100] for any quantity the API accepts.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn scores_stay_in_range_for_huge_allocatable() {
    let server = Server::start(ServerConfig::default()).await;
    let mut c = server.client().await;
    let nodes = vec![
        node("huge", "1e14", "1e17"),
        node("max", "9223372036854775807", "9223372036854775807"),
        node("beyond", "1e30", "1e40"),
        node("small", "4", "8Gi"),
    ];
    for policy in ["default", "bin-packing", "requested-to-capacity-ratio"] {
        let req = proto::RankRequest {
            policy: policy.into(),
            ..rank_req(
                inline(nodes.clone(), vec![]),
                pod("p", &[("cpu", "1"), ("memory", "1Gi")]),
            )
        };
        let r = c.rank(req).await.expect("ranked").into_inner();
        assert_eq!(r.feasible_count, 4, "{policy}");
        for n in &r.feasible {
            for s in &n.plugin_scores {
                assert!(
                    (0..=100).contains(&s.score),
                    "{policy}: {} {} = {}",
                    n.node,
                    s.plugin,
                    s.score
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Point 7: the codes gRPC's own implementations answer.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_unary_call_carrying_two_messages_is_refused_as_grpc_go_refuses_it() {
    let server = Server::start(ServerConfig::default()).await;
    let one = rank_req(small(), pod("p", &[])).encode_to_vec();
    let mut grpc = tonic::client::Grpc::new(server.channel().await);
    grpc.ready().await.expect("ready");
    let two = tokio_stream::iter([Bytes::from(one.clone()), Bytes::from(one)]);
    let s = grpc
        .client_streaming(
            tonic::Request::new(two),
            "/placement.v1.PlacementService/Rank".parse().expect("path"),
            support::RawCodec,
        )
        .await
        .expect_err("two messages on a unary method");
    assert_eq!(s.code(), Code::Internal, "{s:?}");
    assert!(s.message().contains("cardinality violation"), "{s:?}");
    // One message is answered.
    let mut c = server.client().await;
    c.rank(rank_req(small(), pod("p", &[]))).await.expect("one message");
}

#[tokio::test]
async fn an_answer_over_the_message_limit_is_resource_exhausted() {
    // Requests fit in 64 KiB; a Rank listing 2,000 infeasible nodes does not.
    let server = Server::start(ServerConfig {
        max_message_bytes: 64 << 10,
        ..ServerConfig::default()
    })
    .await;
    let mut c = server.client().await;
    let nodes: Vec<proto::Node> = (0..2000).map(|i| node(&format!("n{i}"), "1", "1Gi")).collect();
    let id = c
        .sync_snapshot(proto::SyncSnapshotRequest {
            kind: Some(Kind::Full(proto::Snapshot {
                nodes: nodes[..1000].to_vec(),
                ..Default::default()
            })),
        })
        .await
        .expect("sync")
        .into_inner()
        .snapshot_id;
    let id = c
        .sync_snapshot(proto::SyncSnapshotRequest {
            kind: Some(Kind::Delta(proto::SnapshotDelta {
                base_snapshot_id: id,
                upsert_nodes: nodes[1000..].to_vec(),
                ..Default::default()
            })),
        })
        .await
        .expect("delta")
        .into_inner()
        .snapshot_id;
    let req = rank_req(
        Some(proto::SnapshotRef {
            source: Some(Source::SnapshotId(id)),
        }),
        pod("p", &[("cpu", "2")]),
    );
    let s = c.rank(req.clone()).await.expect_err("the answer is over 64 KiB");
    assert_eq!(s.code(), Code::ResourceExhausted, "{s:?}");
    // With fewer infeasible nodes listed it fits.
    let r = c
        .rank(proto::RankRequest {
            infeasible_limit: Some(10),
            ..req
        })
        .await
        .expect("a small answer");
    assert_eq!(r.into_inner().infeasible.len(), 10);
}

// ---------------------------------------------------------------------------------------------
// Point 8 and point 3's limits: Kubernetes' validation.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn what_kubernetes_refuses_is_refused() {
    let server = Server::start(ServerConfig::default()).await;
    let mut c = server.client().await;

    // Resource names must be qualified names.
    for name in [
        "hugepages-\n1Gi",
        "example.com/has space",
        "example.com/-dash",
        "Example.com/gpu",
    ] {
        let s = c
            .rank(rank_req(small(), pod("p", &[(name, "1")])))
            .await
            .expect_err(name);
        assert_eq!(s.code(), Code::InvalidArgument, "{name}: {s:?}");
        assert!(
            s.message().contains("qualified name") || s.message().contains("standard resource"),
            "{s:?}"
        );
    }
    let ok = c
        .rank(rank_req(
            inline(
                vec![proto::Node {
                    allocatable: map(&[
                        ("cpu", "8"),
                        ("memory", "8Gi"),
                        ("pods", "10"),
                        ("example.com/gpu", "2"),
                    ]),
                    ..node("g", "8", "8Gi")
                }],
                vec![],
            ),
            pod("p", &[("example.com/gpu", "1"), ("hugepages-2Mi", "0")]),
        ))
        .await
        .expect("qualified names pass");
    assert_eq!(ok.into_inner().feasible_count, 1);

    // host_ip must be an IP address.
    let mut p = pod("p", &[]);
    p.containers[0].ports = vec![proto::ContainerPort {
        container_port: 80,
        host_port: 8080,
        host_ip: "not-an-ip".into(),
        ..Default::default()
    }];
    let s = c.rank(rank_req(small(), p)).await.expect_err("host_ip");
    assert_invalid(&s, "pod.containers[0].ports[0].host_ip", "valid IP address");

    // The same host port, protocol and host IP twice in one pod.
    let port = |host_port| proto::ContainerPort {
        container_port: 80,
        host_port,
        ..Default::default()
    };
    let mut p = pod("p", &[]);
    p.containers.push(proto::Container {
        name: "d".into(),
        ports: vec![port(8080)],
        ..Default::default()
    });
    p.containers[0].ports = vec![port(8080)];
    let s = c.rank(rank_req(small(), p.clone())).await.expect_err("port twice");
    assert_invalid(&s, "pod.containers[1].ports[0].host_port", "TCP//8080");
    // Another protocol, or the same port in two init containers (they run one at a time), is fine.
    p.containers[1].ports[0].protocol = "UDP".into();
    c.rank(rank_req(small(), p.clone())).await.expect("TCP and UDP");
    p.containers.pop();
    p.init_containers = vec![
        proto::Container {
            name: "i1".into(),
            ports: vec![port(9090)],
            ..Default::default()
        },
        proto::Container {
            name: "i2".into(),
            ports: vec![port(9090)],
            ..Default::default()
        },
    ];
    c.rank(rank_req(small(), p))
        .await
        .expect("init containers one at a time");

    // Gang members that disagree on min_members.
    let member = |uid: &str, min| proto::Pod {
        gang: Some(proto::Gang {
            name: "train".into(),
            min_members: min,
        }),
        ..pod(uid, &[])
    };
    let s = c
        .schedule(schedule_req(
            small(),
            vec![member("a", 3), member("b", 3), member("c", 2)],
        ))
        .await
        .expect_err("min_members disagree");
    assert_invalid(&s, "pods[2].gang.min_members", "pods[0]");

    // A pending pod whose uid is a bound pod's.
    let bound = proto::Pod {
        node_name: "n1".into(),
        ..pod("taken", &[])
    };
    let snap = inline(vec![node("n1", "8", "16Gi")], vec![bound]);
    let s = c
        .schedule(schedule_req(snap.clone(), vec![pod("free", &[]), pod("taken", &[])]))
        .await
        .expect_err("uid of a bound pod");
    assert_invalid(&s, "pods[1].uid", "is bound in the snapshot");
    let s = c.rank(rank_req(snap, pod("taken", &[]))).await.expect_err("rank too");
    assert_invalid(&s, "pod.uid", "is bound in the snapshot");

    // Selector keys must be qualified names and values label values, as the API server checks.
    let mut p = pod("p", &[]);
    p.pod_anti_affinity = Some(proto::PodAffinity {
        required: vec![proto::PodAffinityTerm {
            label_selector: Some(proto::LabelSelector {
                match_labels: map(&[("app", &"v".repeat(64))]),
                match_expressions: vec![],
            }),
            topology_key: "kubernetes.io/hostname".into(),
            ..Default::default()
        }],
        preferred: vec![],
    });
    let s = c
        .rank(rank_req(small(), p))
        .await
        .expect_err("label value of 64 characters");
    assert_invalid(
        &s,
        "pod.pod_anti_affinity.required[0].label_selector.match_labels[\"app\"]",
        "63",
    );
    let mut p = pod("p", &[]);
    p.node_selector = map(&[("bad key!", "x")]);
    let s = c.rank(rank_req(small(), p)).await.expect_err("selector key");
    assert_invalid(&s, "pod.node_selector[\"bad key!\"]", "qualified name");
}

#[tokio::test]
async fn an_object_larger_than_the_api_server_stores_is_refused_before_it_is_decoded() {
    let server = Server::start(ServerConfig::default()).await;
    let mut c = server.client().await;
    let mut p = pod("big", &[]);
    p.labels = (0..40_000).map(|i| (format!("k{i:06}"), "v".repeat(30))).collect();
    assert!(p.encoded_len() > 3 << 19);
    let s = c
        .schedule(schedule_req(small(), vec![pod("ok", &[]), p]))
        .await
        .expect_err("a pod over 1.5 MiB");
    assert_invalid(&s, "pods[1]", "more than the 1572864 bytes");
}

// ---------------------------------------------------------------------------------------------
// Point 4: connections that never start HTTP/2, or stay idle, are closed.
// ---------------------------------------------------------------------------------------------

/// Reads until the server closes the connection; how long that took.
async fn time_to_close(mut s: TcpStream, within: Duration) -> Duration {
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(within, s.read(&mut buf)).await {
            Err(_) => panic!("the server kept the connection open for {within:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => return start.elapsed(),
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn connections_that_never_start_or_stay_idle_are_closed() {
    let server = Server::start(ServerConfig {
        connections: ConnLimits {
            handshake: Duration::from_millis(500),
            idle: Duration::from_millis(1500),
        },
        ..ServerConfig::default()
    })
    .await;
    // Nothing sent: closed after the handshake timeout.
    let silent = TcpStream::connect(server.addr).await.expect("connect");
    let t = time_to_close(silent, Duration::from_secs(10)).await;
    assert!(t >= Duration::from_millis(400) && t < Duration::from_secs(3), "{t:?}");
    // Half a preface: the same.
    let mut half = TcpStream::connect(server.addr).await.expect("connect");
    half.write_all(b"PRI * HTTP/2.0\r\n").await.expect("write");
    let t = time_to_close(half, Duration::from_secs(10)).await;
    assert!(t < Duration::from_secs(3), "{t:?}");
    // A full preface and SETTINGS, then nothing: closed after the idle timeout.
    let mut idle = TcpStream::connect(server.addr).await.expect("connect");
    idle.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .expect("write");
    let t = time_to_close(idle, Duration::from_secs(10)).await;
    assert!(t >= Duration::from_millis(1200) && t < Duration::from_secs(5), "{t:?}");
    // A client in use stays connected across calls closer than the idle timeout, and
    // reconnects by itself after one.
    let mut c = server.client().await;
    for _ in 0..3 {
        c.rank(rank_req(small(), pod("p", &[]))).await.expect("in use");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let mut answered = false;
    for _ in 0..3 {
        if c.rank(rank_req(small(), pod("p", &[]))).await.is_ok() {
            answered = true;
            break;
        }
    }
    assert!(answered, "the client reconnects after an idle close");
}

// ---------------------------------------------------------------------------------------------
// CEL rules: each evaluation within its cost budget, whatever the rule and the pod.
// ---------------------------------------------------------------------------------------------

/// A pod as large as the API server lets its author make one: 1,000 containers, 1,000 labels
/// and 256 KiB of annotations.
fn hostile_pod() -> proto::Pod {
    let mut p = pod("hostile", &[("cpu", "100m")]);
    p.containers = (0..1000)
        .map(|i| proto::Container {
            name: format!("c{i}"),
            image: format!("registry.example/team/image-{i}:v1"),
            requests: map(&[("cpu", "1m")]),
            ..Default::default()
        })
        .collect();
    p.labels = (0..1000)
        .map(|i| (format!("label-{i}"), format!("value-{i}")))
        .collect();
    p.annotations = [("big".to_string(), "a".repeat((256 << 10) - 3))].into();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_rule_on_a_hostile_pod_is_answered_and_so_are_other_calls_meanwhile() {
    use placement_scheduler::engine::rules::{FilterRule, Rules};
    use placement_scheduler::engine::Policy;
    use placement_scheduler::grpc::service::ServiceConfig;

    // An O(n) `in` over the pod's containers inside two comprehensions over them, evaluated on
    // every node (it reads the node's name): n³ comparisons without a budget.
    let hostile = Policy {
        name: "hostile".into(),
        rules: Rules {
            filters: vec![FilterRule {
                name: "nested".into(),
                expression: "node.metadata.name == 'none' || \
                             pod.spec.containers.all(a, pod.spec.containers.all(b, a in pod.spec.containers))"
                    .into(),
                reason: String::new(),
            }],
            scores: vec![],
        },
        ..Policy::kube_default()
    };
    let mut policies = Policy::built_in();
    policies.push(hostile);
    let server = Server::start(ServerConfig {
        service: ServiceConfig {
            policies,
            ..ServiceConfig::default()
        },
        ..ServerConfig::default()
    })
    .await;
    let nodes: Vec<proto::Node> = (0..24).map(|i| node(&format!("n{i}"), "8", "16Gi")).collect();
    let mut c = server.client().await;
    let started = Instant::now();
    let hostile_call = tokio::spawn(async move {
        // A minute at most: without a budget the evaluations would run for hours.
        let mut request = tonic::Request::new(proto::RankRequest {
            policy: "hostile".into(),
            ..rank_req(inline(nodes, vec![]), hostile_pod())
        });
        request.set_timeout(Duration::from_secs(60));
        let r = c.rank(request).await;
        (r, started.elapsed())
    });
    // Another client's Ranks, one after another while the hostile one runs.
    let mut other = server.client().await;
    let mut answered = Vec::new();
    while !hostile_call.is_finished() {
        let t = Instant::now();
        let r = other
            .rank(rank_req(small(), pod("p", &[("cpu", "1")])))
            .await
            .expect("answered");
        assert_eq!(r.into_inner().feasible_count, 2);
        if !hostile_call.is_finished() {
            answered.push(t.elapsed());
        }
    }
    let (r, took) = hostile_call.await.expect("the hostile call's task");
    let r = r.expect("the hostile Rank is answered").into_inner();
    println!(
        "hostile Rank on 24 nodes answered in {took:?}; {} other Ranks answered meanwhile, the slowest in {:?}",
        answered.len(),
        answered.iter().max()
    );
    assert_eq!(r.feasible_count, 0);
    assert_eq!(r.infeasible.len(), 24);
    for n in &r.infeasible {
        assert_eq!(
            n.reasons,
            ["rule nested failed: operation cancelled: actual cost limit exceeded"],
            "{}",
            n.node
        );
    }
    assert!(
        !answered.is_empty(),
        "no other Rank was answered while the hostile one ran"
    );
}
