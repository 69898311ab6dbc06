//! End-to-end tests of `placement.v1.PlacementService` over real gRPC on real sockets.
//!
//! Shaped like tonic's `tests/integration_tests`: every test binds its own `127.0.0.1:0` listener,
//! starts a server on it, and stops it through a `oneshot`, so the tests run in parallel and share
//! nothing. No mocks: the generated client talks to `placement_scheduler::grpc::serve`, and one
//! test drives the server with grpcurl, a client nobody here wrote.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use placement_scheduler::grpc::{serve, Metrics, ServerConfig, ServiceConfig};
use placement_scheduler::proto;
use placement_scheduler::proto::placement::Outcome;
use placement_scheduler::proto::placement_service_client::PlacementServiceClient;
use placement_scheduler::proto::snapshot_ref::Source;
use placement_scheduler::proto::sync_snapshot_request::Kind;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_types::StatusExt;

// ---------------------------------------------------------------------------------------------
// Server harness
// ---------------------------------------------------------------------------------------------

type ServerHandle = JoinHandle<Result<(), placement_scheduler::grpc::server::ServeError>>;

/// Binds `127.0.0.1:0`, serves on it until the returned sender fires (or is dropped).
async fn start_server(config: ServerConfig) -> (SocketAddr, oneshot::Sender<()>, ServerHandle) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    let (tx, rx) = oneshot::channel::<()>();
    let shutdown = async move {
        let _ = rx.await;
    };
    let handle = tokio::spawn(serve(listener, config, Arc::new(Metrics::new()), shutdown));
    (addr, tx, handle)
}

/// Fires the shutdown signal and checks that the server drains and returns `Ok`.
async fn stop_server(tx: oneshot::Sender<()>, handle: ServerHandle) {
    let _ = tx.send(());
    let result = tokio::time::timeout(Duration::from_secs(20), handle)
        .await
        .expect("server did not shut down within 20 s")
        .expect("server task panicked");
    result.expect("server returned an error");
}

fn url(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

async fn channel(addr: SocketAddr) -> Channel {
    Channel::from_shared(url(addr))
        .expect("valid uri")
        .connect()
        .await
        .expect("connect to the test server")
}

async fn client(addr: SocketAddr) -> PlacementServiceClient<Channel> {
    PlacementServiceClient::new(channel(addr).await)
}

async fn health_status(addr: SocketAddr, service: &str) -> ServingStatus {
    let mut health = HealthClient::new(channel(addr).await);
    let resp = health
        .check(HealthCheckRequest {
            service: service.to_string(),
        })
        .await
        .expect("health check")
        .into_inner();
    ServingStatus::try_from(resp.status).expect("known serving status")
}

async fn assert_serving(addr: SocketAddr) {
    assert_eq!(health_status(addr, "").await, ServingStatus::Serving);
    assert_eq!(
        health_status(addr, "placement.v1.PlacementService").await,
        ServingStatus::Serving
    );
}

// ---------------------------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------------------------

const GI: u64 = 1 << 30;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A node with `cpu` cores, `mem_gi` GiB of memory and room for `pods` pods, as plain integers
/// (cores and bytes) so it does not depend on quantity suffixes.
fn node(name: &str, cpu: u32, mem_gi: u64, pods: u32) -> proto::Node {
    proto::Node {
        name: name.to_string(),
        allocatable: map(&[
            ("cpu", &cpu.to_string()),
            ("memory", &(mem_gi * GI).to_string()),
            ("pods", &pods.to_string()),
        ]),
        ..Default::default()
    }
}

fn cordoned(mut n: proto::Node) -> proto::Node {
    n.unschedulable = true;
    n
}

fn tainted(mut n: proto::Node, key: &str, effect: &str) -> proto::Node {
    n.taints.push(proto::Taint {
        key: key.to_string(),
        value: String::new(),
        effect: effect.to_string(),
    });
    n
}

/// A pending pod with one container requesting `cpu` cores (and no memory).
fn pod(uid: &str, cpu: u32) -> proto::Pod {
    pod_with(uid, &[("cpu", &cpu.to_string())])
}

/// A pending pod with one container requesting `cpu` cores and `mem_gi` GiB.
fn pod_mem(uid: &str, cpu: u32, mem_gi: u64) -> proto::Pod {
    pod_with(
        uid,
        &[("cpu", &cpu.to_string()), ("memory", &(mem_gi * GI).to_string())],
    )
}

/// A pending pod with one container and these requests.
fn pod_with(uid: &str, requests: &[(&str, &str)]) -> proto::Pod {
    proto::Pod {
        uid: uid.to_string(),
        namespace: "default".to_string(),
        name: uid.to_string(),
        containers: vec![proto::Container {
            name: "main".to_string(),
            image: "registry.example/app:1".to_string(),
            requests: map(requests),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn bound(mut p: proto::Pod, node: &str) -> proto::Pod {
    p.node_name = node.to_string();
    p
}

fn with_host_port(mut p: proto::Pod, port: i32, protocol: &str) -> proto::Pod {
    p.containers[0].ports.push(proto::ContainerPort {
        container_port: port,
        host_port: port,
        protocol: protocol.to_string(),
        host_ip: String::new(),
    });
    p
}

fn snapshot(nodes: Vec<proto::Node>, pods: Vec<proto::Pod>) -> proto::Snapshot {
    proto::Snapshot {
        nodes,
        pods,
        ..Default::default()
    }
}

fn inline(s: proto::Snapshot) -> Option<proto::SnapshotRef> {
    Some(proto::SnapshotRef {
        source: Some(Source::Inline(s)),
    })
}

fn by_id(id: &str) -> Option<proto::SnapshotRef> {
    Some(proto::SnapshotRef {
        source: Some(Source::SnapshotId(id.to_string())),
    })
}

fn full(s: proto::Snapshot) -> proto::SyncSnapshotRequest {
    proto::SyncSnapshotRequest {
        kind: Some(Kind::Full(s)),
    }
}

fn delta(d: proto::SnapshotDelta) -> proto::SyncSnapshotRequest {
    proto::SyncSnapshotRequest {
        kind: Some(Kind::Delta(d)),
    }
}

fn rank_req(snapshot: Option<proto::SnapshotRef>, p: proto::Pod) -> proto::RankRequest {
    proto::RankRequest {
        snapshot,
        pod: Some(p),
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

async fn sync(c: &mut PlacementServiceClient<Channel>, req: proto::SyncSnapshotRequest) -> proto::SyncSnapshotResponse {
    c.sync_snapshot(req).await.expect("SyncSnapshot").into_inner()
}

async fn rank(c: &mut PlacementServiceClient<Channel>, req: proto::RankRequest) -> proto::RankResponse {
    c.rank(req).await.expect("Rank").into_inner()
}

async fn schedule(c: &mut PlacementServiceClient<Channel>, req: proto::ScheduleRequest) -> proto::ScheduleResponse {
    c.schedule(req).await.expect("Schedule").into_inner()
}

/// Names of the feasible nodes, best first.
fn feasible_names(r: &proto::RankResponse) -> Vec<&str> {
    r.feasible.iter().map(|n| n.node.as_str()).collect()
}

fn infeasible_names(r: &proto::RankResponse) -> Vec<&str> {
    r.infeasible.iter().map(|n| n.node.as_str()).collect()
}

/// The node a placement chose, or `None` when the pod is unschedulable.
fn placed(p: &proto::Placement) -> Option<&str> {
    match p.outcome.as_ref().expect("placement has an outcome") {
        Outcome::NodeName(n) => Some(n.as_str()),
        Outcome::Unschedulable(_) => None,
    }
}

fn unschedulable(p: &proto::Placement) -> &proto::Unschedulable {
    match p.outcome.as_ref().expect("placement has an outcome") {
        Outcome::Unschedulable(u) => u,
        Outcome::NodeName(n) => panic!("pod {} was placed on {n}, expected unschedulable", p.pod_uid),
    }
}

/// Pods placed per node.
fn per_node(resp: &proto::ScheduleResponse) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for p in &resp.placements {
        if let Some(n) = placed(p) {
            *out.entry(n.to_string()).or_default() += 1;
        }
    }
    out
}

fn assert_is_content_id(id: &str) {
    assert_eq!(id.len(), 32, "snapshot id {id:?} should be 32 hex chars");
    assert!(
        id.chars().all(|c| c.is_ascii_hexdigit()),
        "snapshot id {id:?} should be hex"
    );
}

fn assert_not_found(status: &Status, field: &str, id: &str) {
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    assert!(
        status.message().starts_with(&format!("{field}: ")),
        "message should name {field}: {:?}",
        status.message()
    );
    let details = status.get_error_details();
    let info = details.error_info().expect("NOT_FOUND carries a google.rpc.ErrorInfo");
    assert_eq!(info.reason, "SNAPSHOT_NOT_FOUND");
    assert_eq!(info.domain, "placement.v1");
    assert_eq!(info.metadata.get("snapshot_id").map(String::as_str), Some(id));
}

// ---------------------------------------------------------------------------------------------
// 1. Full sync and content-derived ids
// ---------------------------------------------------------------------------------------------

fn three_node_cluster() -> proto::Snapshot {
    snapshot(
        vec![node("small", 2, 8, 110), node("mid", 4, 8, 110), node("big", 8, 8, 110)],
        vec![bound(pod("running-1", 0), "mid"), bound(pod("running-2", 0), "big")],
    )
}

#[tokio::test]
async fn full_sync_returns_content_derived_id_equal_across_servers() {
    let (addr_a, tx_a, h_a) = start_server(ServerConfig::default()).await;
    let (addr_b, tx_b, h_b) = start_server(ServerConfig::default()).await;
    let mut a = client(addr_a).await;
    let mut b = client(addr_b).await;

    let ra = sync(&mut a, full(three_node_cluster())).await;
    assert_is_content_id(&ra.snapshot_id);
    assert_eq!(ra.node_count, 3);
    assert_eq!(ra.pod_count, 2);

    // A separately started replica computes the same id for the same content.
    let rb = sync(&mut b, full(three_node_cluster())).await;
    assert_eq!(rb, ra);
    // Re-sending to the same replica is idempotent.
    assert_eq!(
        sync(&mut a, full(three_node_cluster())).await.snapshot_id,
        ra.snapshot_id
    );

    // Different content, different id.
    let mut other = three_node_cluster();
    other.nodes.push(node("extra", 1, 1, 110));
    let ro = sync(&mut a, full(other)).await;
    assert_ne!(ro.snapshot_id, ra.snapshot_id);
    assert_eq!(ro.node_count, 4);

    // Rank by the id works on both replicas, with identical answers.
    let on_a = rank(&mut a, rank_req(by_id(&ra.snapshot_id), pod("p", 1))).await;
    let on_b = rank(&mut b, rank_req(by_id(&rb.snapshot_id), pod("p", 1))).await;
    assert_eq!(on_a.node_count, 3);
    assert_eq!(on_a.feasible_count, 3);
    assert_eq!(on_a, on_b);

    drop((a, b));
    stop_server(tx_a, h_a).await;
    stop_server(tx_b, h_b).await;
}

// ---------------------------------------------------------------------------------------------
// 2. Delta sync
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn delta_sync_upserts_and_removes_nodes_and_pods_and_keeps_the_base() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;

    let base = sync(
        &mut c,
        full(snapshot(vec![node("a", 2, 8, 110), node("b", 4, 8, 110)], vec![])),
    )
    .await;
    assert_eq!((base.node_count, base.pod_count), (2, 0));

    // Upsert node c (8 cpu), remove node b.
    let d1 = sync(
        &mut c,
        delta(proto::SnapshotDelta {
            base_snapshot_id: base.snapshot_id.clone(),
            upsert_nodes: vec![node("c", 8, 8, 110)],
            remove_nodes: vec!["b".to_string()],
            ..Default::default()
        }),
    )
    .await;
    assert_is_content_id(&d1.snapshot_id);
    assert_ne!(d1.snapshot_id, base.snapshot_id);
    assert_eq!((d1.node_count, d1.pod_count), (2, 0));
    let r = rank(&mut c, rank_req(by_id(&d1.snapshot_id), pod("big", 6))).await;
    assert_eq!(feasible_names(&r), vec!["c"], "only c has 6 free cpu");
    assert_eq!(infeasible_names(&r), vec!["a"]);
    assert_eq!(r.node_count, 2);

    // Upsert a bound pod on c using 4 cpu: a 6-cpu pod no longer fits there.
    let d2 = sync(
        &mut c,
        delta(proto::SnapshotDelta {
            base_snapshot_id: d1.snapshot_id.clone(),
            upsert_pods: vec![bound(pod("web-1", 4), "c")],
            ..Default::default()
        }),
    )
    .await;
    assert_eq!((d2.node_count, d2.pod_count), (2, 1));
    let r = rank(&mut c, rank_req(by_id(&d2.snapshot_id), pod("big", 6))).await;
    assert_eq!(r.feasible_count, 0);
    assert_eq!(r.message, "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.");
    let s = schedule(
        &mut c,
        schedule_req(by_id(&d2.snapshot_id), vec![pod("big", 6), pod("fits-on-c", 4)]),
    )
    .await;
    assert_eq!(
        unschedulable(&s.placements[0]).message,
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
    );
    assert_eq!(
        placed(&s.placements[1]),
        Some("c"),
        "a 4-cpu pod fits only in c's 4 free cpu"
    );

    // Remove the pod: the big pod fits on c again.
    let d3 = sync(
        &mut c,
        delta(proto::SnapshotDelta {
            base_snapshot_id: d2.snapshot_id.clone(),
            remove_pod_uids: vec!["web-1".to_string()],
            ..Default::default()
        }),
    )
    .await;
    assert_eq!((d3.node_count, d3.pod_count), (2, 0));
    let r = rank(&mut c, rank_req(by_id(&d3.snapshot_id), pod("big", 6))).await;
    assert_eq!(feasible_names(&r), vec!["c"]);
    let s = schedule(&mut c, schedule_req(by_id(&d3.snapshot_id), vec![pod("big", 6)])).await;
    assert_eq!(placed(&s.placements[0]), Some("c"));

    // Snapshots are immutable: every earlier id still answers as it did.
    let r = rank(&mut c, rank_req(by_id(&base.snapshot_id), pod("p", 1))).await;
    let mut names = feasible_names(&r);
    names.sort_unstable();
    assert_eq!(names, vec!["a", "b"]);
    let r = rank(&mut c, rank_req(by_id(&d2.snapshot_id), pod("big", 6))).await;
    assert_eq!(r.feasible_count, 0, "d2 still has web-1 on c");

    // Deltas are content-derived too: the same delta on the same base gives the same id.
    let again = sync(
        &mut c,
        delta(proto::SnapshotDelta {
            base_snapshot_id: d1.snapshot_id.clone(),
            upsert_pods: vec![bound(pod("web-1", 4), "c")],
            ..Default::default()
        }),
    )
    .await;
    assert_eq!(again, d2);

    drop(c);
    stop_server(tx, handle).await;
}

#[tokio::test]
async fn pods_bound_to_an_absent_node_count_once_the_node_appears() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    // "later" is not in the snapshot yet, but a pod is already bound to it (informer order).
    let base = sync(
        &mut c,
        full(snapshot(
            vec![node("a", 4, 8, 110)],
            vec![bound(pod("x", 3), "a"), bound(pod("y", 3), "later")],
        )),
    )
    .await;
    assert_eq!((base.node_count, base.pod_count), (1, 2));

    let with_later = sync(
        &mut c,
        delta(proto::SnapshotDelta {
            base_snapshot_id: base.snapshot_id.clone(),
            upsert_nodes: vec![node("later", 4, 8, 110)],
            ..Default::default()
        }),
    )
    .await;
    assert_eq!((with_later.node_count, with_later.pod_count), (2, 2));
    let r = rank(&mut c, rank_req(by_id(&with_later.snapshot_id), pod("p", 2))).await;
    assert_eq!(
        r.message, "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
        "y's 3 cpu count on later"
    );

    // Removing and re-adding a node in one delta (removals first) keeps its pods' usage.
    let readded = sync(
        &mut c,
        delta(proto::SnapshotDelta {
            base_snapshot_id: with_later.snapshot_id.clone(),
            upsert_nodes: vec![node("a", 4, 8, 110)],
            remove_nodes: vec!["a".to_string()],
            ..Default::default()
        }),
    )
    .await;
    let r = rank(&mut c, rank_req(by_id(&readded.snapshot_id), pod("p", 2))).await;
    assert_eq!(r.feasible_count, 0, "x still uses 3 of a's 4 cpu: {r:?}");

    // Removing the pods frees both nodes.
    let freed = sync(
        &mut c,
        delta(proto::SnapshotDelta {
            base_snapshot_id: readded.snapshot_id.clone(),
            remove_pod_uids: vec!["x".to_string(), "y".to_string()],
            ..Default::default()
        }),
    )
    .await;
    assert_eq!(freed.pod_count, 0);
    let r = rank(&mut c, rank_req(by_id(&freed.snapshot_id), pod("p", 2))).await;
    assert_eq!(r.feasible_count, 2);

    drop(c);
    stop_server(tx, handle).await;
}

// ---------------------------------------------------------------------------------------------
// 3. Unknown snapshots and the cache budget
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn unknown_snapshot_id_is_not_found_with_error_info() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    let missing = "0123456789abcdef0123456789abcdef";

    let err = c.rank(rank_req(by_id(missing), pod("p", 1))).await.unwrap_err();
    assert_not_found(&err, "snapshot.snapshot_id", missing);

    let err = c
        .schedule(schedule_req(by_id(missing), vec![pod("p", 1)]))
        .await
        .unwrap_err();
    assert_not_found(&err, "snapshot.snapshot_id", missing);

    let err = c
        .sync_snapshot(delta(proto::SnapshotDelta {
            base_snapshot_id: missing.to_string(),
            upsert_nodes: vec![node("n", 1, 1, 110)],
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_not_found(&err, "delta.base_snapshot_id", missing);

    assert_serving(addr).await;
    drop(c);
    stop_server(tx, handle).await;
}

#[tokio::test]
async fn tiny_cache_budget_evicts_the_older_snapshot() {
    let config = ServerConfig {
        service: ServiceConfig {
            snapshot_cache_bytes: 1,
            ..ServiceConfig::default()
        },
        ..ServerConfig::default()
    };
    let (addr, tx, handle) = start_server(config).await;
    let mut c = client(addr).await;

    let older = sync(&mut c, full(snapshot(vec![node("a", 4, 8, 110)], vec![]))).await;
    let newer = sync(&mut c, full(snapshot(vec![node("b", 4, 8, 110)], vec![]))).await;
    assert_ne!(older.snapshot_id, newer.snapshot_id);

    let err = c
        .rank(rank_req(by_id(&older.snapshot_id), pod("p", 1)))
        .await
        .unwrap_err();
    assert_not_found(&err, "snapshot.snapshot_id", &older.snapshot_id);
    let err = c
        .sync_snapshot(delta(proto::SnapshotDelta {
            base_snapshot_id: older.snapshot_id.clone(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_not_found(&err, "delta.base_snapshot_id", &older.snapshot_id);

    let r = rank(&mut c, rank_req(by_id(&newer.snapshot_id), pod("p", 1))).await;
    assert_eq!(feasible_names(&r), vec!["b"]);

    // The documented recovery: re-send the full snapshot, get the same id back, and it works.
    let resent = sync(&mut c, full(snapshot(vec![node("a", 4, 8, 110)], vec![]))).await;
    assert_eq!(resent.snapshot_id, older.snapshot_id);
    let r = rank(&mut c, rank_req(by_id(&older.snapshot_id), pod("p", 1))).await;
    assert_eq!(feasible_names(&r), vec!["a"]);

    drop(c);
    stop_server(tx, handle).await;
}

// ---------------------------------------------------------------------------------------------
// 4. Rank
// ---------------------------------------------------------------------------------------------

const DEFAULT_WEIGHTS: [(&str, i64); 9] = [
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodeResourcesFit", 1),
    ("VolumeBinding", 1),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 2),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
];

#[tokio::test]
async fn rank_orders_feasible_nodes_by_total_with_per_plugin_scores() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    let cluster = snapshot(
        vec![
            node("small", 2, 8, 110),
            node("mid", 4, 8, 110),
            node("big", 8, 8, 110),
            node("tiny", 1, 8, 110),
            tainted(node("gpu", 16, 64, 110), "gpu", "NoSchedule"),
        ],
        vec![],
    );
    let id = sync(&mut c, full(cluster.clone())).await.snapshot_id;

    let r = rank(&mut c, rank_req(by_id(&id), pod_mem("p", 1, 1))).await;
    assert_eq!(r.policy, "default");
    assert_eq!(r.node_count, 5);
    assert_eq!(r.feasible_count, 4);
    assert!(r.message.is_empty(), "no message when a node fits: {:?}", r.message);
    // LeastAllocated: the emptiest node first.
    assert_eq!(feasible_names(&r), vec!["big", "mid", "small", "tiny"]);
    for n in &r.feasible {
        let plugins: Vec<(&str, i64)> = n.plugin_scores.iter().map(|s| (s.plugin.as_str(), s.weight)).collect();
        assert_eq!(
            plugins, DEFAULT_WEIGHTS,
            "plugins and weights of the default policy on {}",
            n.node
        );
        assert!(n.plugin_scores.iter().all(|s| (0..=100).contains(&s.score)), "{n:?}");
        let sum: i64 = n.plugin_scores.iter().map(|s| s.score * s.weight).sum();
        assert_eq!(n.total, sum, "total is the weighted sum on {}", n.node);
        // No PreferNoSchedule taints anywhere: TaintToleration normalizes to the maximum.
        assert_eq!(n.plugin_scores[0].score, 100);
    }
    assert!(
        r.feasible.windows(2).all(|w| w[0].total >= w[1].total),
        "ranked by total desc"
    );
    // kube-scheduler 1.37's integer arithmetic, 1 cpu + 1Gi on empty 8Gi nodes (balance 100
    // without the pod; balanced = 50 + (50 + balance with the pod − 100) / 2):
    // big: fit (87+87)/2=87, balance 100, balanced 75 -> 300+87+75 = 462
    // mid: fit (75+87)/2=81, balance 93, balanced 71  -> 452
    // small: fit (50+87)/2=68, balance 81, balanced 65 -> 433
    let totals: Vec<i64> = r.feasible.iter().take(3).map(|n| n.total).collect();
    assert_eq!(totals, vec![462, 452, 433]);
    let big_scores: Vec<i64> = r.feasible[0].plugin_scores.iter().map(|s| s.score).collect();
    // Neither pod nor cluster has inter-pod terms or spreading: both topology plugins give 0;
    // the pod has no claims: VolumeBinding gives 0; no resource claims: DynamicResources gives 0.
    assert_eq!(big_scores, vec![100, 0, 87, 0, 0, 0, 0, 75, 0]);

    // The infeasible node, with the filter that rejected it and kube-scheduler's reason.
    assert_eq!(r.infeasible.len(), 1);
    assert_eq!(r.infeasible[0].node, "gpu");
    assert_eq!(r.infeasible[0].plugin, "TaintToleration");
    assert_eq!(r.infeasible[0].reasons, vec!["node(s) had untolerated taint(s)"]);

    // top_k limits the list, feasible_count still counts every feasible node.
    let mut req = rank_req(by_id(&id), pod_mem("p", 1, 1));
    req.top_k = 2;
    let top = rank(&mut c, req).await;
    assert_eq!(top.feasible_count, 4);
    assert_eq!(top.feasible, r.feasible[..2].to_vec());
    assert_eq!(top.infeasible, r.infeasible);

    // An inline snapshot gives the same answer as the stored one.
    let by_inline = rank(&mut c, rank_req(inline(cluster), pod_mem("p", 1, 1))).await;
    assert_eq!(by_inline, r);

    drop(c);
    stop_server(tx, handle).await;
}

#[tokio::test]
async fn rank_explains_infeasible_nodes_in_kube_scheduler_format() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    let cluster = snapshot(
        vec![
            cordoned(node("cordoned", 8, 8, 110)),
            tainted(node("tainted", 8, 8, 110), "dedicated", "NoSchedule"),
            node("too-small", 1, 8, 110),
        ],
        vec![],
    );
    let r = rank(&mut c, rank_req(inline(cluster.clone()), pod("p", 2))).await;
    assert_eq!(r.node_count, 3);
    assert_eq!(r.feasible_count, 0);
    assert!(r.feasible.is_empty());
    assert_eq!(
        r.message,
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    let infeasible: Vec<(&str, &str, Vec<&str>)> = r
        .infeasible
        .iter()
        .map(|n| {
            (
                n.node.as_str(),
                n.plugin.as_str(),
                n.reasons.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        infeasible,
        vec![
            ("cordoned", "NodeUnschedulable", vec!["node(s) were unschedulable"]),
            ("tainted", "TaintToleration", vec!["node(s) had untolerated taint(s)"]),
            ("too-small", "NodeResourcesFit", vec!["Insufficient cpu"]),
        ]
    );

    // NodeResourcesFit reports every insufficient resource, and the message counts each.
    let mut p = pod_mem("p", 2, 16);
    p.containers[0]
        .requests
        .insert("example.com/gpu".to_string(), "1".to_string());
    let r = rank(&mut c, rank_req(inline(cluster.clone()), p)).await;
    assert_eq!(
        r.infeasible[2].reasons,
        vec![
            "Insufficient cpu",
            "Insufficient memory",
            "Insufficient example.com/gpu"
        ]
    );
    assert_eq!(
        r.message,
        "0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient example.com/gpu, 1 Insufficient memory, 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );

    // A pod that tolerates the taint and the cordon (as DaemonSet pods do) fits both big nodes.
    let mut p = pod("p", 2);
    p.tolerations = vec![
        proto::Toleration {
            key: "dedicated".to_string(),
            operator: "Exists".to_string(),
            ..Default::default()
        },
        proto::Toleration {
            key: "node.kubernetes.io/unschedulable".to_string(),
            operator: "Exists".to_string(),
            effect: "NoSchedule".to_string(),
            ..Default::default()
        },
    ];
    let r = rank(&mut c, rank_req(inline(cluster), p)).await;
    let mut names = feasible_names(&r);
    names.sort_unstable();
    assert_eq!(names, vec!["cordoned", "tainted"]);
    assert!(r.message.is_empty());

    // An empty cluster gets kube-scheduler's message for no nodes.
    let r = rank(&mut c, rank_req(inline(snapshot(vec![], vec![])), pod("p", 1))).await;
    assert_eq!(r.message, "no nodes available to schedule pods");

    drop(c);
    stop_server(tx, handle).await;
}

#[tokio::test]
async fn rank_lists_at_most_infeasible_limit_nodes_and_still_counts_every_node() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    let cluster = snapshot(
        vec![
            cordoned(node("a-cordoned", 8, 8, 110)),
            node("b-fits", 8, 8, 110),
            tainted(node("c-tainted", 8, 8, 110), "dedicated", "NoSchedule"),
            node("d-small", 1, 1, 110),
            node("e-small", 1, 1, 110),
        ],
        vec![],
    );
    let p = pod_mem("p", 2, 4);
    let unlimited = rank(&mut c, rank_req(inline(cluster.clone()), p.clone())).await;
    let names = |r: &proto::RankResponse| r.infeasible.iter().map(|n| n.node.clone()).collect::<Vec<_>>();
    assert_eq!(names(&unlimited), ["a-cordoned", "c-tainted", "d-small", "e-small"]);
    for (limit, listed) in [(0u32, 0usize), (3, 3), (4, 4), (9, 4)] {
        let mut req = rank_req(inline(cluster.clone()), p.clone());
        req.infeasible_limit = Some(limit);
        let r = rank(&mut c, req).await;
        assert_eq!(names(&r), names(&unlimited)[..listed], "limit {limit}");
        // The listed nodes keep every reason (d-small lacks cpu and memory).
        assert_eq!(r.infeasible, unlimited.infeasible[..listed], "limit {limit}");
        assert_eq!(
            (r.node_count, r.feasible_count, feasible_names(&r)),
            (5, 1, vec!["b-fits"]),
            "limit {limit}"
        );
    }
    // With no node feasible, the message still counts every node.
    let big = pod("big", 16);
    let all = rank(&mut c, rank_req(inline(cluster.clone()), big.clone())).await;
    let mut req = rank_req(inline(cluster), big);
    req.infeasible_limit = Some(1);
    let one = rank(&mut c, req).await;
    assert_eq!(one.infeasible.len(), 1);
    assert_eq!(all.infeasible.len(), 5);
    assert_eq!(one.message, all.message);
    assert_eq!(
        one.message,
        "0/5 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, 3 Insufficient cpu. \
         preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."
    );
    drop(c);
    stop_server(tx, handle).await;
}

#[tokio::test]
async fn rank_applies_node_affinity_and_selector() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    let mut a = node("zone-a", 4, 8, 110);
    a.labels = map(&[("zone", "a"), ("cores", "4")]);
    let mut b = node("zone-b", 4, 8, 110);
    b.labels = map(&[("zone", "b"), ("cores", "16")]);
    let cluster = snapshot(vec![a, b, node("unlabelled", 4, 8, 110)], vec![]);

    let mut p = pod("p", 1);
    p.node_selector = map(&[("zone", "a")]);
    let r = rank(&mut c, rank_req(inline(cluster.clone()), p)).await;
    assert_eq!(feasible_names(&r), vec!["zone-a"]);
    assert!(r
        .infeasible
        .iter()
        .all(|n| n.plugin == "NodeAffinity" && n.reasons == ["node(s) didn't match Pod's node affinity/selector"]));

    // Required Gt, and a preferred term that NodeAffinity's score (weight 2) rewards.
    let mut p = pod("p", 1);
    p.node_affinity = Some(proto::NodeAffinity {
        required: Some(proto::NodeSelector {
            terms: vec![proto::NodeSelectorTerm {
                match_expressions: vec![proto::NodeSelectorRequirement {
                    key: "cores".to_string(),
                    operator: "Exists".to_string(),
                    values: vec![],
                }],
                match_fields: vec![],
            }],
        }),
        preferred: vec![proto::PreferredSchedulingTerm {
            weight: 50,
            preference: Some(proto::NodeSelectorTerm {
                match_expressions: vec![proto::NodeSelectorRequirement {
                    key: "cores".to_string(),
                    operator: "Gt".to_string(),
                    values: vec!["8".to_string()],
                }],
                match_fields: vec![],
            }),
        }],
    });
    let r = rank(&mut c, rank_req(inline(cluster), p)).await;
    assert_eq!(feasible_names(&r), vec!["zone-b", "zone-a"]);
    let affinity = |n: &proto::NodeScore| {
        n.plugin_scores
            .iter()
            .find(|s| s.plugin == "NodeAffinity")
            .unwrap()
            .score
    };
    assert_eq!(affinity(&r.feasible[0]), 100);
    assert_eq!(affinity(&r.feasible[1]), 0);
    assert_eq!(r.message, "");
    assert_eq!(infeasible_names(&r), vec!["unlabelled"]);

    drop(c);
    stop_server(tx, handle).await;
}

// ---------------------------------------------------------------------------------------------
// 5. Schedule
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn schedule_consumes_capacity_in_batch_order() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    let id = sync(
        &mut c,
        full(snapshot(vec![node("n1", 4, 8, 110), node("n2", 4, 8, 110)], vec![])),
    )
    .await
    .snapshot_id;
    let pods: Vec<proto::Pod> = (1..=5).map(|i| pod(&format!("p{i}"), 2)).collect();
    let s = schedule(&mut c, schedule_req(by_id(&id), pods)).await;
    assert_eq!(s.policy, "default");
    let uids: Vec<&str> = s.placements.iter().map(|p| p.pod_uid.as_str()).collect();
    assert_eq!(
        uids,
        vec!["p1", "p2", "p3", "p4", "p5"],
        "one placement per pod, in request order"
    );
    assert!(s.placements[..4].iter().all(|p| placed(p).is_some()), "{s:?}");
    assert_eq!(
        per_node(&s),
        BTreeMap::from([("n1".to_string(), 2), ("n2".to_string(), 2)])
    );
    // Spreading (LeastAllocated): the second pod goes to the other, emptier node.
    assert_ne!(placed(&s.placements[0]), placed(&s.placements[1]));
    assert!(s.placements[..4].iter().all(|p| p.score > 0 && p.feasible_nodes >= 1));
    assert_eq!(s.placements[0].feasible_nodes, 2);

    let u = unschedulable(&s.placements[4]);
    assert_eq!(u.message, "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.");
    assert_eq!(u.reasons, BTreeMap::from([("Insufficient cpu".to_string(), 2)]));
    assert_eq!((s.placements[4].score, s.placements[4].feasible_nodes), (0, 0));

    // Schedule is stateless: the snapshot is unchanged, the same batch gives the same answer.
    let again = schedule(
        &mut c,
        schedule_req(by_id(&id), (1..=5).map(|i| pod(&format!("p{i}"), 2)).collect()),
    )
    .await;
    assert_eq!(again, s);

    drop(c);
    stop_server(tx, handle).await;
}

/// `assume` stores the request's snapshot plus the batch's placed pods, under an id derived from
/// the content (equal across replicas), equal in effect to a delta upserting those pods bound.
#[tokio::test]
async fn schedule_with_assume_stores_the_batch_placed_as_a_delta_would() {
    let (addr_a, tx_a, h_a) = start_server(ServerConfig::default()).await;
    let (addr_b, tx_b, h_b) = start_server(ServerConfig::default()).await;
    let mut a = client(addr_a).await;
    let mut b = client(addr_b).await;
    let cluster = || full(snapshot(vec![node("n1", 4, 8, 110), node("n2", 4, 8, 110)], vec![]));
    let base = sync(&mut a, cluster()).await.snapshot_id;
    assert_eq!(sync(&mut b, cluster()).await.snapshot_id, base);
    let batch = |uids: &[&str]| uids.iter().map(|u| pod(u, 2)).collect::<Vec<_>>();

    let plain = schedule(&mut a, schedule_req(by_id(&base), batch(&["p1", "p2", "p3"]))).await;
    assert_eq!(plain.assumed_snapshot_id, "", "nothing is stored without assume");
    let mut req = schedule_req(by_id(&base), batch(&["p1", "p2", "p3"]));
    req.assume = true;
    let s = schedule(&mut a, req.clone()).await;
    assert_is_content_id(&s.assumed_snapshot_id);
    assert_ne!(s.assumed_snapshot_id, base);
    assert_eq!(s.placements, plain.placements, "assume changes no decision");
    assert!(s.placements.iter().all(|p| placed(p).is_some()), "{s:?}");
    // Another replica making the same decisions on the same snapshot names the result alike.
    assert_eq!(schedule(&mut b, req).await, s);

    // The base is untouched: the same batch on it gives the same answer.
    let again = schedule(&mut a, schedule_req(by_id(&base), batch(&["p1", "p2", "p3"]))).await;
    assert_eq!(again.placements, s.placements);

    // The assumed snapshot is what a delta upserting the placed pods, bound, gives.
    let upserts: Vec<proto::Pod> = s
        .placements
        .iter()
        .map(|p| bound(pod(&p.pod_uid, 2), placed(p).expect("placed")))
        .collect();
    let synced = sync(
        &mut a,
        delta(proto::SnapshotDelta {
            base_snapshot_id: base.clone(),
            upsert_pods: upserts,
            ..Default::default()
        }),
    )
    .await;
    assert_eq!(synced.pod_count, 3);
    let probe = |id: &str| rank_req(by_id(id), pod("probe", 2));
    let on_assumed = rank(&mut a, probe(&s.assumed_snapshot_id)).await;
    assert_eq!(on_assumed, rank(&mut a, probe(&synced.snapshot_id)).await);
    assert_eq!(on_assumed.feasible_count, 1, "6 of 8 cpus are taken: {on_assumed:?}");

    // The next batch is placed on the assumed snapshot, and assumed on it in turn: only the
    // pods placed count (p5 fits nowhere).
    let mut next = schedule_req(by_id(&s.assumed_snapshot_id), batch(&["p4", "p5"]));
    next.assume = true;
    let n = schedule(&mut a, next).await;
    assert!(placed(&n.placements[0]).is_some(), "{n:?}");
    assert_eq!(
        unschedulable(&n.placements[1]).message,
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    );
    assert_is_content_id(&n.assumed_snapshot_id);
    let full_now = rank(&mut a, probe(&n.assumed_snapshot_id)).await;
    assert_eq!(full_now.feasible_count, 0, "{full_now:?}");
    assert_eq!(
        sync(
            &mut a,
            delta(proto::SnapshotDelta {
                base_snapshot_id: n.assumed_snapshot_id.clone(),
                ..Default::default()
            })
        )
        .await
        .pod_count,
        4,
        "p1..p4 are bound in the assumed snapshot, p5 is not"
    );

    drop((a, b));
    stop_server(tx_a, h_a).await;
    stop_server(tx_b, h_b).await;
}

#[tokio::test]
async fn schedule_never_puts_two_pods_with_the_same_host_port_on_one_node() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    let cluster = snapshot(
        vec![node("n1", 8, 8, 110), node("n2", 8, 8, 110), node("n3", 8, 8, 110)],
        vec![],
    );
    let id = sync(&mut c, full(cluster)).await.snapshot_id;

    // Control: bin-packing stacks port-less pods on one node.
    let mut req = schedule_req(by_id(&id), (1..=3).map(|i| pod_mem(&format!("p{i}"), 1, 1)).collect());
    req.policy = "bin-packing".to_string();
    let s = schedule(&mut c, req).await;
    assert_eq!(s.policy, "bin-packing");
    assert_eq!(per_node(&s).len(), 1, "bin-packing stacks pods without ports: {s:?}");

    // With host port 8080/TCP, each pod needs its own node, the 4th finds none; UDP 8080 is free.
    let mut pods: Vec<proto::Pod> = (1..=4)
        .map(|i| with_host_port(pod_mem(&format!("p{i}"), 1, 1), 8080, "TCP"))
        .collect();
    pods.push(with_host_port(pod_mem("udp", 1, 1), 8080, "UDP"));
    let mut req = schedule_req(by_id(&id), pods);
    req.policy = "bin-packing".to_string();
    let s = schedule(&mut c, req).await;
    let nodes: BTreeSet<&str> = s.placements[..3].iter().map(|p| placed(p).expect("placed")).collect();
    assert_eq!(
        nodes.len(),
        3,
        "three pods with hostPort 8080 on three different nodes: {s:?}"
    );
    let u = unschedulable(&s.placements[3]);
    assert_eq!(
        u.message,
        "0/3 nodes are available: 3 node(s) didn't have free ports for the requested pod ports. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    );
    assert!(
        placed(&s.placements[4]).is_some(),
        "UDP 8080 does not conflict with TCP 8080"
    );

    // A port used by a bound pod in the snapshot counts too.
    let taken = sync(
        &mut c,
        delta(proto::SnapshotDelta {
            base_snapshot_id: id.clone(),
            upsert_pods: vec![with_host_port(bound(pod("daemon", 0), "n2"), 9100, "")],
            ..Default::default()
        }),
    )
    .await;
    let pods = (1..=2)
        .map(|i| with_host_port(pod(&format!("e{i}"), 1), 9100, "TCP"))
        .collect();
    let s = schedule(&mut c, schedule_req(by_id(&taken.snapshot_id), pods)).await;
    let nodes: BTreeSet<&str> = s.placements.iter().map(|p| placed(p).expect("placed")).collect();
    assert_eq!(nodes, BTreeSet::from(["n1", "n3"]));

    drop(c);
    stop_server(tx, handle).await;
}

#[tokio::test]
async fn schedule_consumes_the_pod_count_limit() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    let cluster = snapshot(
        vec![node("a", 64, 64, 2), node("b", 64, 64, 1)],
        vec![bound(pod("already-there", 1), "a")],
    );
    let pods = (1..=3).map(|i| pod(&format!("p{i}"), 1)).collect();
    let s = schedule(&mut c, schedule_req(inline(cluster.clone()), pods)).await;
    assert_eq!(
        per_node(&s),
        BTreeMap::from([("a".to_string(), 1), ("b".to_string(), 1)])
    );
    let u = unschedulable(&s.placements[2]);
    assert_eq!(u.message, "0/2 nodes are available: 2 Too many pods. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.");
    assert_eq!(u.reasons, BTreeMap::from([("Too many pods".to_string(), 2)]));

    // Rank sees the snapshot only: both nodes have a free slot.
    let r = rank(&mut c, rank_req(inline(cluster), pod("p", 1))).await;
    assert_eq!(r.feasible_count, 2);

    drop(c);
    stop_server(tx, handle).await;
}

fn tie_cluster() -> proto::Snapshot {
    let mut nodes: Vec<proto::Node> = (0..4).map(|i| node(&format!("w{i}"), 2, 8, 110)).collect();
    nodes.push(tainted(node("tainted", 100, 100, 110), "dedicated", "NoSchedule"));
    nodes.push(node("zero", 0, 8, 110));
    snapshot(nodes, vec![])
}

fn tie_batch(seed: u64) -> proto::ScheduleRequest {
    let mut req = schedule_req(
        inline(tie_cluster()),
        (1..=9).map(|i| pod(&format!("p{i}"), 1)).collect(),
    );
    req.seed = seed;
    req
}

#[tokio::test]
async fn schedule_is_deterministic_and_seed_changes_only_tie_breaks() {
    let (addr_a, tx_a, h_a) = start_server(ServerConfig::default()).await;
    let (addr_b, tx_b, h_b) = start_server(ServerConfig::default()).await;
    let mut a = client(addr_a).await;
    let mut b = client(addr_b).await;

    let first = schedule(&mut a, tie_batch(7)).await;
    assert_eq!(schedule(&mut a, tie_batch(7)).await, first, "same request twice");
    assert_eq!(
        schedule(&mut b, tie_batch(7)).await,
        first,
        "same request to another replica"
    );

    let mut distinct = BTreeSet::new();
    for seed in 0..12u64 {
        let s = schedule(&mut a, tie_batch(seed)).await;
        // Feasibility never depends on the seed: 8 pods fill the four 2-cpu nodes, the 9th fits nowhere.
        let placements: Vec<Option<&str>> = s.placements.iter().map(placed).collect();
        assert!(placements[..8].iter().all(Option::is_some), "seed {seed}: {s:?}");
        assert_eq!(
            per_node(&s),
            (0..4).map(|i| (format!("w{i}"), 2)).collect::<BTreeMap<_, _>>(),
            "seed {seed}"
        );
        assert_eq!(
            unschedulable(&s.placements[8]).message,
            "0/6 nodes are available: 1 node(s) had untolerated taint(s), 5 Insufficient cpu. preemption: 0/6 nodes are available: 2 Preemption is not helpful for scheduling, 4 No preemption victims found for incoming pod.",
            "seed {seed}"
        );
        distinct.insert(
            placements
                .iter()
                .map(|p| p.unwrap_or("-").to_string())
                .collect::<Vec<_>>(),
        );
    }
    assert!(
        distinct.len() > 1,
        "the seed should change at least one tie-break over 12 seeds"
    );

    drop((a, b));
    stop_server(tx_a, h_a).await;
    stop_server(tx_b, h_b).await;
}

// ---------------------------------------------------------------------------------------------
// 6. Health, 7. Reflection, 11. ListPolicies
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn health_reports_serving_for_the_server_and_the_service() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    assert_eq!(health_status(addr, "").await, ServingStatus::Serving);
    assert_eq!(
        health_status(addr, "placement.v1.PlacementService").await,
        ServingStatus::Serving
    );
    let mut health = HealthClient::new(channel(addr).await);
    let err = health
        .check(HealthCheckRequest {
            service: "no.such.Service".to_string(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    drop(health);
    stop_server(tx, handle).await;
}

/// Lists services and fetches the file of PlacementService through one reflection version.
macro_rules! reflect {
    ($version:ident, $addr:expr) => {{
        use tonic_reflection::pb::$version::server_reflection_client::ServerReflectionClient;
        use tonic_reflection::pb::$version::server_reflection_request::MessageRequest;
        use tonic_reflection::pb::$version::server_reflection_response::MessageResponse;
        use tonic_reflection::pb::$version::ServerReflectionRequest;

        let mut client = ServerReflectionClient::new(channel($addr).await);
        let requests = vec![
            ServerReflectionRequest {
                host: String::new(),
                message_request: Some(MessageRequest::ListServices(String::new())),
            },
            ServerReflectionRequest {
                host: String::new(),
                message_request: Some(MessageRequest::FileContainingSymbol(
                    "placement.v1.PlacementService".to_string(),
                )),
            },
        ];
        let mut stream = client
            .server_reflection_info(tokio_stream::iter(requests))
            .await
            .expect("ServerReflectionInfo")
            .into_inner();
        let services: Vec<String> = match stream
            .message()
            .await
            .expect("reflection answer")
            .expect("one answer")
            .message_response
        {
            Some(MessageResponse::ListServicesResponse(list)) => list.service.into_iter().map(|s| s.name).collect(),
            other => panic!("expected a service list, got {other:?}"),
        };
        let files = match stream
            .message()
            .await
            .expect("reflection answer")
            .expect("two answers")
            .message_response
        {
            Some(MessageResponse::FileDescriptorResponse(f)) => f.file_descriptor_proto,
            other => panic!("expected a file descriptor, got {other:?}"),
        };
        (services, files)
    }};
}

fn assert_reflected(services: &[String], files: &[Vec<u8>]) {
    for expected in ["placement.v1.PlacementService", "grpc.health.v1.Health"] {
        assert!(
            services.iter().any(|s| s == expected),
            "{expected} missing from {services:?}"
        );
    }
    let file = files
        .iter()
        .map(|f| {
            <prost_types::FileDescriptorProto as prost::Message>::decode(f.as_slice()).expect("FileDescriptorProto")
        })
        .find(|f| f.name() == "placement/v1/placement.proto")
        .expect("placement/v1/placement.proto is among the reflected files");
    assert_eq!(file.package(), "placement.v1");
    let service = file
        .service
        .iter()
        .find(|s| s.name() == "PlacementService")
        .expect("PlacementService");
    let methods: Vec<&str> = service.method.iter().map(|m| m.name()).collect();
    assert_eq!(methods, vec!["SyncSnapshot", "Rank", "Schedule", "ListPolicies"]);
}

#[tokio::test]
async fn reflection_v1_and_v1alpha_list_the_placement_service() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let (services, files) = reflect!(v1, addr);
    assert_reflected(&services, &files);
    let (services_alpha, files_alpha) = reflect!(v1alpha, addr);
    assert_reflected(&services_alpha, &files_alpha);
    // Each version lists itself; apart from that they list the same services.
    assert!(
        services.iter().any(|s| s == "grpc.reflection.v1.ServerReflection"),
        "{services:?}"
    );
    assert!(
        services_alpha
            .iter()
            .any(|s| s == "grpc.reflection.v1alpha.ServerReflection"),
        "{services_alpha:?}"
    );
    let without_reflection = |list: Vec<String>| -> BTreeSet<String> {
        list.into_iter()
            .filter(|s| !s.starts_with("grpc.reflection."))
            .collect()
    };
    assert_eq!(
        without_reflection(services),
        without_reflection(services_alpha),
        "both reflection versions list the same services"
    );
    stop_server(tx, handle).await;
}

#[tokio::test]
async fn list_policies_names_the_default_first_with_distinct_digests() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    let r = c
        .list_policies(proto::ListPoliciesRequest {})
        .await
        .expect("ListPolicies")
        .into_inner();
    assert_eq!(r.default_policy, "default");
    assert_eq!(r.policies[0].name, "default");
    let names: Vec<&str> = r.policies.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["default", "bin-packing", "requested-to-capacity-ratio"]);

    let default = &r.policies[0];
    assert_eq!(default.scoring_strategy, "LeastAllocated");
    let weights: Vec<(&str, i64)> = default.scores.iter().map(|s| (s.plugin.as_str(), s.weight)).collect();
    assert_eq!(weights, DEFAULT_WEIGHTS);
    assert_eq!(
        default.filters,
        vec![
            "NodeName",
            "NodeUnschedulable",
            "TaintToleration",
            "NodeAffinity",
            "NodePorts",
            "NodeResourcesFit",
            "VolumeRestrictions",
            "NodeVolumeLimits",
            "VolumeBinding",
            "VolumeZone",
            "PodTopologySpread",
            "InterPodAffinity",
            "DynamicResources",
            "NodeDeclaredFeatures"
        ]
    );
    let packing = r
        .policies
        .iter()
        .find(|p| p.name == "bin-packing")
        .expect("bin-packing");
    assert_eq!(packing.scoring_strategy, "MostAllocated");
    let rtcr = r
        .policies
        .iter()
        .find(|p| p.name == "requested-to-capacity-ratio")
        .expect("rtcr");
    assert_eq!(rtcr.scoring_strategy, "RequestedToCapacityRatio");

    let mut digests = BTreeSet::new();
    for p in &r.policies {
        assert_eq!(p.digest.len(), 32, "{}: digest {:?}", p.name, p.digest);
        assert!(
            p.digest.chars().all(|c| c.is_ascii_hexdigit()),
            "{}: digest {:?}",
            p.name,
            p.digest
        );
        assert!(!p.description.is_empty(), "{} has a description", p.name);
        digests.insert(p.digest.clone());
    }
    assert_eq!(digests.len(), r.policies.len(), "digests differ");

    // The same configuration on another replica has the same digests.
    let (addr_b, tx_b, h_b) = start_server(ServerConfig::default()).await;
    let mut b = client(addr_b).await;
    let rb = b
        .list_policies(proto::ListPoliciesRequest {})
        .await
        .expect("ListPolicies")
        .into_inner();
    assert_eq!(rb, r);

    // A request naming a policy gets that policy applied.
    let mut req = rank_req(inline(snapshot(vec![node("n", 4, 8, 110)], vec![])), pod("p", 1));
    req.policy = "bin-packing".to_string();
    assert_eq!(rank(&mut c, req).await.policy, "bin-packing");

    drop((c, b));
    stop_server(tx, handle).await;
    stop_server(tx_b, h_b).await;
}

// ---------------------------------------------------------------------------------------------
// 8. Bad input
// ---------------------------------------------------------------------------------------------

/// Batch limit of the bad-input servers.
const SMALL_BATCH: usize = 4;

fn bad_input_config() -> ServerConfig {
    ServerConfig {
        service: ServiceConfig {
            max_batch_size: SMALL_BATCH,
            ..ServiceConfig::default()
        },
        ..ServerConfig::default()
    }
}

// A handful of test inputs, built once each: their size does not matter.
#[allow(clippy::large_enum_variant)]
enum Call {
    Sync(proto::SyncSnapshotRequest),
    Rank(Box<proto::RankRequest>),
    Schedule(proto::ScheduleRequest),
}

/// A request the service must refuse with INVALID_ARGUMENT naming `field`.
struct BadInput {
    call: Call,
    field: &'static str,
    /// The start of the description after `field: `.
    description: &'static str,
}

async fn send(c: &mut PlacementServiceClient<Channel>, call: Call) -> Result<(), Status> {
    match call {
        Call::Sync(r) => c.sync_snapshot(r).await.map(drop),
        Call::Rank(r) => c.rank(*r).await.map(drop),
        Call::Schedule(r) => c.schedule(r).await.map(drop),
    }
}

fn assert_invalid_argument(status: &Status, field: &str, description: &str) {
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let prefix = format!("{field}: {description}");
    assert!(
        status.message().starts_with(&prefix),
        "message {:?} should start with {prefix:?}",
        status.message()
    );
    let details = status.get_error_details();
    let bad = details
        .bad_request()
        .expect("INVALID_ARGUMENT carries a google.rpc.BadRequest");
    assert_eq!(bad.field_violations.len(), 1, "{:?}", bad.field_violations);
    assert_eq!(bad.field_violations[0].field, field);
    assert!(
        bad.field_violations[0].description.starts_with(description),
        "violation description {:?} should start with {description:?}",
        bad.field_violations[0].description
    );
    assert_eq!(
        status.message(),
        format!(
            "{}: {}",
            bad.field_violations[0].field, bad.field_violations[0].description
        ),
        "message and detail agree"
    );
}

async fn check_refused(bad: BadInput) {
    let (addr, tx, handle) = start_server(bad_input_config()).await;
    let mut c = client(addr).await;
    let err = send(&mut c, bad.call).await.expect_err("the request must be refused");
    assert_invalid_argument(&err, bad.field, bad.description);
    // The server is still up and still answers real work.
    assert_serving(addr).await;
    let r = rank(
        &mut c,
        rank_req(inline(snapshot(vec![node("n", 4, 8, 110)], vec![])), pod("ok", 1)),
    )
    .await;
    assert_eq!(feasible_names(&r), vec!["n"]);
    drop(c);
    stop_server(tx, handle).await;
}

fn small_cluster() -> Option<proto::SnapshotRef> {
    inline(snapshot(vec![node("n1", 8, 8, 110), node("n2", 8, 8, 110)], vec![]))
}

fn rank_pod(p: proto::Pod) -> Call {
    Call::Rank(Box::new(rank_req(small_cluster(), p)))
}

fn requirement(key: &str, operator: &str, values: &[&str]) -> proto::NodeSelectorRequirement {
    proto::NodeSelectorRequirement {
        key: key.to_string(),
        operator: operator.to_string(),
        values: values.iter().map(|v| v.to_string()).collect(),
    }
}

fn required_affinity(r: proto::NodeSelectorRequirement) -> Option<proto::NodeAffinity> {
    Some(proto::NodeAffinity {
        required: Some(proto::NodeSelector {
            terms: vec![proto::NodeSelectorTerm {
                match_expressions: vec![r],
                match_fields: vec![],
            }],
        }),
        preferred: vec![],
    })
}

fn bad_quantity() -> BadInput {
    let mut pods: Vec<proto::Pod> = (0..4).map(|i| pod(&format!("p{i}"), 1)).collect();
    pods[3] = pod_with("p3", &[("cpu", "1.2.3")]);
    BadInput {
        call: Call::Schedule(schedule_req(small_cluster(), pods)),
        field: r#"pods[3].containers[0].requests["cpu"]"#,
        description: r#"invalid quantity "1.2.3""#,
    }
}

fn unknown_resource_name() -> BadInput {
    BadInput {
        call: rank_pod(pod_with("p", &[("cpu", "1"), ("gpu", "1")])),
        field: r#"pod.containers[0].requests["gpu"]"#,
        description: r#"invalid resource name "gpu""#,
    }
}

fn negative_quantity() -> BadInput {
    BadInput {
        call: rank_pod(pod_with("p", &[("cpu", "-1")])),
        field: r#"pod.containers[0].requests["cpu"]"#,
        description: r#"must be greater than or equal to 0, got "-1""#,
    }
}

fn missing_pod_uid() -> BadInput {
    BadInput {
        call: rank_pod(pod("", 1)),
        field: "pod.uid",
        description: "must not be empty",
    }
}

fn duplicate_uids_in_batch() -> BadInput {
    BadInput {
        call: Call::Schedule(schedule_req(
            small_cluster(),
            vec![pod("a", 1), pod("b", 1), pod("a", 1)],
        )),
        field: "pods[2].uid",
        description: r#"duplicate pod uid "a" in the batch"#,
    }
}

fn batch_over_max_size() -> BadInput {
    let pods = (0..=SMALL_BATCH).map(|i| pod(&format!("p{i}"), 1)).collect();
    BadInput {
        call: Call::Schedule(schedule_req(small_cluster(), pods)),
        field: "pods",
        description: "batch of 5 pods exceeds the maximum of 4",
    }
}

fn unknown_policy() -> BadInput {
    let mut req = rank_req(small_cluster(), pod("p", 1));
    req.policy = "fastest".to_string();
    BadInput {
        call: Call::Rank(Box::new(req)),
        field: "policy",
        description: r#"unknown policy "fastest""#,
    }
}

fn missing_snapshot_ref() -> BadInput {
    BadInput {
        call: Call::Schedule(schedule_req(None, vec![pod("p", 1)])),
        field: "snapshot",
        description: "must be set",
    }
}

fn assume_on_an_inline_snapshot() -> BadInput {
    let mut req = schedule_req(small_cluster(), vec![pod("p", 1)]);
    req.assume = true;
    BadInput {
        call: Call::Schedule(req),
        field: "assume",
        description: "needs snapshot.snapshot_id: an inline snapshot is not stored",
    }
}

fn missing_sync_kind() -> BadInput {
    BadInput {
        call: Call::Sync(proto::SyncSnapshotRequest { kind: None }),
        field: "kind",
        description: "must be set",
    }
}

fn bad_affinity_operator() -> BadInput {
    let mut p = pod("p", 1);
    p.node_affinity = required_affinity(requirement("zone", "Near", &["a"]));
    BadInput {
        call: rank_pod(p),
        field: "pod.node_affinity.required.terms[0].match_expressions[0].operator",
        description: r#"unsupported operator "Near""#,
    }
}

fn gt_with_non_integer() -> BadInput {
    let mut p = pod("p", 1);
    p.node_affinity = required_affinity(requirement("cores", "Gt", &["many"]));
    BadInput {
        call: rank_pod(p),
        field: "pod.node_affinity.required.terms[0].match_expressions[0].values[0]",
        description: r#"must be an integer for operator "Gt", got "many""#,
    }
}

fn bad_taint_effect() -> BadInput {
    BadInput {
        call: Call::Sync(full(snapshot(
            vec![tainted(node("n", 4, 8, 110), "k", "Sometimes")],
            vec![],
        ))),
        field: "full.nodes[0].taints[0].effect",
        description: r#"unsupported effect "Sometimes""#,
    }
}

fn bad_toleration() -> BadInput {
    let mut p = pod("p", 1);
    p.tolerations = vec![proto::Toleration {
        key: "k".to_string(),
        operator: "Exists".to_string(),
        value: "v".to_string(),
        ..Default::default()
    }];
    BadInput {
        call: rank_pod(p),
        field: "pod.tolerations[0].value",
        description: "must be empty when operator is Exists",
    }
}

fn duplicate_node_names() -> BadInput {
    BadInput {
        call: Call::Sync(full(snapshot(vec![node("n", 4, 8, 110), node("n", 8, 8, 110)], vec![]))),
        field: "full.nodes[1].name",
        description: r#"duplicate node name "n""#,
    }
}

fn unbound_pod_in_snapshot() -> BadInput {
    BadInput {
        call: Call::Sync(full(snapshot(vec![node("n", 4, 8, 110)], vec![pod("p", 1)]))),
        field: "full.pods[0].node_name",
        description: "a snapshot holds bound pods only",
    }
}

fn host_port_out_of_range() -> BadInput {
    let mut p = pod("p", 1);
    p.containers[0].ports.push(proto::ContainerPort {
        container_port: 8080,
        host_port: 70000,
        ..Default::default()
    });
    BadInput {
        call: rank_pod(p),
        field: "pod.containers[0].ports[0].host_port",
        description: "must be between 0 and 65535, got 70000",
    }
}

fn preferred_weight_zero() -> BadInput {
    let mut p = pod("p", 1);
    p.node_affinity = Some(proto::NodeAffinity {
        required: None,
        preferred: vec![proto::PreferredSchedulingTerm {
            weight: 0,
            preference: Some(proto::NodeSelectorTerm {
                match_expressions: vec![requirement("zone", "In", &["a"])],
                match_fields: vec![],
            }),
        }],
    });
    BadInput {
        call: rank_pod(p),
        field: "pod.node_affinity.preferred[0].weight",
        description: "must be between 1 and 100, got 0",
    }
}

#[tokio::test]
async fn bad_quantity_names_the_field_path() {
    check_refused(bad_quantity()).await;
}

#[tokio::test]
async fn unknown_resource_name_is_refused() {
    check_refused(unknown_resource_name()).await;
}

#[tokio::test]
async fn negative_quantity_is_refused() {
    check_refused(negative_quantity()).await;
}

#[tokio::test]
async fn missing_pod_uid_is_refused() {
    check_refused(missing_pod_uid()).await;
}

#[tokio::test]
async fn duplicate_uids_in_a_batch_are_refused() {
    check_refused(duplicate_uids_in_batch()).await;
}

#[tokio::test]
async fn batch_over_max_batch_size_is_refused() {
    check_refused(batch_over_max_size()).await;
}

#[tokio::test]
async fn unknown_policy_is_refused() {
    check_refused(unknown_policy()).await;
}

#[tokio::test]
async fn missing_snapshot_ref_is_refused() {
    check_refused(missing_snapshot_ref()).await;
}

#[tokio::test]
async fn assume_on_an_inline_snapshot_is_refused() {
    check_refused(assume_on_an_inline_snapshot()).await;
}

#[tokio::test]
async fn missing_sync_kind_is_refused() {
    check_refused(missing_sync_kind()).await;
}

#[tokio::test]
async fn bad_node_affinity_operator_is_refused() {
    check_refused(bad_affinity_operator()).await;
}

#[tokio::test]
async fn gt_with_a_non_integer_is_refused() {
    check_refused(gt_with_non_integer()).await;
}

#[tokio::test]
async fn bad_taint_effect_is_refused() {
    check_refused(bad_taint_effect()).await;
}

#[tokio::test]
async fn exists_toleration_with_a_value_is_refused() {
    check_refused(bad_toleration()).await;
}

#[tokio::test]
async fn duplicate_node_names_in_a_full_snapshot_are_refused() {
    check_refused(duplicate_node_names()).await;
}

#[tokio::test]
async fn unbound_pod_in_a_snapshot_is_refused() {
    check_refused(unbound_pod_in_snapshot()).await;
}

#[tokio::test]
async fn host_port_out_of_range_is_refused() {
    check_refused(host_port_out_of_range()).await;
}

#[tokio::test]
async fn preferred_term_weight_zero_is_refused() {
    check_refused(preferred_weight_zero()).await;
}

/// Every bad input against one server, which must still be healthy and useful afterwards.
#[tokio::test]
async fn server_survives_every_bad_input_in_a_row() {
    let (addr, tx, handle) = start_server(bad_input_config()).await;
    let mut c = client(addr).await;
    let cases = [
        bad_quantity(),
        unknown_resource_name(),
        negative_quantity(),
        missing_pod_uid(),
        duplicate_uids_in_batch(),
        batch_over_max_size(),
        unknown_policy(),
        missing_snapshot_ref(),
        assume_on_an_inline_snapshot(),
        missing_sync_kind(),
        bad_affinity_operator(),
        gt_with_non_integer(),
        bad_taint_effect(),
        bad_toleration(),
        duplicate_node_names(),
        unbound_pod_in_snapshot(),
        host_port_out_of_range(),
        preferred_weight_zero(),
    ];
    for bad in cases {
        let (field, description) = (bad.field, bad.description);
        let err = send(&mut c, bad.call).await.expect_err(field);
        assert_invalid_argument(&err, field, description);
    }
    assert_serving(addr).await;
    let s = schedule(&mut c, schedule_req(small_cluster(), vec![pod("a", 1), pod("b", 1)])).await;
    assert!(s.placements.iter().all(|p| placed(p).is_some()));
    drop(c);
    stop_server(tx, handle).await;
}

// ---------------------------------------------------------------------------------------------
// 9. Message size limit, 10. Deadline
// ---------------------------------------------------------------------------------------------

fn many_nodes(n: usize) -> Vec<proto::Node> {
    (0..n)
        .map(|i| {
            let mut x = node(&format!("node-{i:05}"), 16, 64, 110);
            x.labels = map(&[("zone", &format!("zone-{}", i % 3)), ("pool", "general")]);
            x
        })
        .collect()
}

#[tokio::test]
async fn oversized_request_is_resource_exhausted_and_the_server_keeps_serving() {
    let config = ServerConfig {
        max_message_bytes: 4096,
        ..ServerConfig::default()
    };
    let (addr, tx, handle) = start_server(config).await;
    let mut c = client(addr).await;

    let req = schedule_req(inline(snapshot(many_nodes(200), vec![])), vec![pod("p", 1)]);
    assert!(prost::Message::encoded_len(&req) > 4096);
    let err = c.schedule(req).await.expect_err("a request over the limit must fail");
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");

    let err = c
        .sync_snapshot(full(snapshot(many_nodes(200), vec![])))
        .await
        .expect_err("a request over the limit must fail");
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");

    // Small requests still work on the same connection, and health answers.
    let r = rank(&mut c, rank_req(inline(snapshot(many_nodes(3), vec![])), pod("p", 1))).await;
    assert_eq!(r.feasible_count, 3);
    assert_serving(addr).await;

    drop(c);
    stop_server(tx, handle).await;
}

#[tokio::test]
async fn tiny_client_deadline_stops_a_big_schedule_and_the_server_keeps_serving() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;

    let pods: Vec<proto::Pod> = (0..2000).map(|i| pod_mem(&format!("p{i}"), 1, 1)).collect();
    let mut req = Request::new(schedule_req(inline(snapshot(many_nodes(5000), vec![])), pods));
    req.set_timeout(Duration::from_millis(1));
    let started = std::time::Instant::now();
    let err = c.schedule(req).await.expect_err("a 1 ms deadline cannot be met");
    assert!(
        matches!(err.code(), Code::DeadlineExceeded | Code::Cancelled),
        "expected DEADLINE_EXCEEDED or CANCELLED, got {err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the deadline was not honoured promptly"
    );

    // The server keeps serving.
    assert_serving(addr).await;
    let r = rank(&mut c, rank_req(inline(snapshot(many_nodes(3), vec![])), pod("p", 1))).await;
    assert_eq!(r.feasible_count, 3);

    drop(c);
    stop_server(tx, handle).await;
}

// ---------------------------------------------------------------------------------------------
// Kubernetes quantity semantics (need the real engine/quantity.rs; fail against the stub)
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn kubernetes_quantities_are_parsed_with_suffixes_and_millis() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    let cluster = snapshot(
        vec![proto::Node {
            name: "n".to_string(),
            allocatable: map(&[
                ("cpu", "1500m"),
                ("memory", "1Gi"),
                ("pods", "110"),
                ("ephemeral-storage", "10G"),
            ]),
            ..Default::default()
        }],
        vec![bound(pod_with("running", &[("cpu", "0.5"), ("memory", "256Mi")]), "n")],
    );
    let id = sync(&mut c, full(cluster)).await.snapshot_id;
    // 1 cpu and 768Mi are left: 250m + 256Mi fits four times on cpu but only three times on memory.
    let pods = (1..=4)
        .map(|i| {
            pod_with(
                &format!("p{i}"),
                &[("cpu", "250m"), ("memory", "256Mi"), ("ephemeral-storage", "1e9")],
            )
        })
        .collect();
    let s = schedule(&mut c, schedule_req(by_id(&id), pods)).await;
    assert!(s.placements[..3].iter().all(|p| placed(p) == Some("n")), "{s:?}");
    assert_eq!(
        unschedulable(&s.placements[3]).message,
        "0/1 nodes are available: 1 Insufficient memory. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
    // 1.1 cpu is more than the 1 cpu left; 1000m is exactly what is left.
    let r = rank(&mut c, rank_req(by_id(&id), pod_with("big", &[("cpu", "1.1")]))).await;
    assert_eq!(r.message, "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.");
    let r = rank(
        &mut c,
        rank_req(by_id(&id), pod_with("exact", &[("cpu", "1000m"), ("memory", "768Mi")])),
    )
    .await;
    assert_eq!(r.feasible_count, 1);
    drop(c);
    stop_server(tx, handle).await;
}

#[tokio::test]
async fn suffixed_quantities_rank_exactly_like_plain_integers() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    let suffixed = |name: &str, cpu: &str, mem: &str| proto::Node {
        name: name.to_string(),
        allocatable: map(&[("cpu", cpu), ("memory", mem), ("pods", "110")]),
        ..Default::default()
    };
    let plain = snapshot(vec![node("a", 2, 8, 110), node("b", 4, 16, 110)], vec![]);
    let with_suffixes = snapshot(
        vec![suffixed("a", "2000m", "8Gi"), suffixed("b", "4", "16384Mi")],
        vec![],
    );
    let p_plain = pod_mem("p", 1, 1);
    let p_suffixed = pod_with("p", &[("cpu", "1000m"), ("memory", "1Gi")]);
    let r_plain = rank(&mut c, rank_req(inline(plain), p_plain)).await;
    let r_suffixed = rank(&mut c, rank_req(inline(with_suffixes), p_suffixed)).await;
    assert_eq!(r_suffixed, r_plain);
    drop(c);
    stop_server(tx, handle).await;
}

// ---------------------------------------------------------------------------------------------
// 12. grpcurl: a client nobody here wrote, using reflection only
// ---------------------------------------------------------------------------------------------

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The grpcurl binary from `GRPCURL`, else from PATH; fails (never skips) when there is none.
fn grpcurl_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("GRPCURL").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "GRPCURL={} is not a file: run scripts/install-tools.sh to install grpcurl",
            p.display()
        );
        return p;
    }
    find_on_path("grpcurl").unwrap_or_else(|| {
        panic!(
            "grpcurl not found: GRPCURL is unset and there is no grpcurl on PATH. \
             Run scripts/install-tools.sh (it installs grpcurl and scripts/test.sh exports GRPCURL); \
             this test needs a real third-party client and never passes without one"
        )
    })
}

async fn run_grpcurl(bin: &Path, args: Vec<String>) -> String {
    let bin = bin.to_path_buf();
    let shown = format!("{} {}", bin.display(), args.join(" "));
    let out = tokio::task::spawn_blocking(move || std::process::Command::new(&bin).args(&args).output())
        .await
        .expect("grpcurl task")
        .unwrap_or_else(|e| panic!("running {shown}: {e}"));
    assert!(
        out.status.success(),
        "{shown} failed with {}:\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("grpcurl prints UTF-8")
}

#[tokio::test]
async fn grpcurl_ranks_through_reflection_only() {
    let bin = grpcurl_binary();
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    let cluster = snapshot(
        vec![
            node("small", 2, 8, 110),
            node("big", 8, 8, 110),
            node("tiny", 1, 8, 110),
        ],
        vec![],
    );
    let id = sync(&mut c, full(cluster)).await.snapshot_id;

    let list = run_grpcurl(
        &bin,
        vec![
            "-plaintext".into(),
            "-max-time".into(),
            "30".into(),
            addr.to_string(),
            "list".into(),
        ],
    )
    .await;
    assert!(
        list.lines().any(|l| l.trim() == "placement.v1.PlacementService"),
        "grpcurl list: {list}"
    );

    let body = serde_json::json!({
        "snapshot": { "snapshotId": id },
        "pod": {
            "uid": "from-grpcurl",
            "containers": [{ "name": "main", "requests": { "cpu": "2" } }]
        }
    })
    .to_string();
    let out = run_grpcurl(
        &bin,
        vec![
            "-plaintext".into(),
            "-max-time".into(),
            "30".into(),
            "-d".into(),
            body,
            addr.to_string(),
            "placement.v1.PlacementService/Rank".into(),
        ],
    )
    .await;
    let json: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("grpcurl output is not JSON ({e}): {out}"));
    let names: Vec<&str> = json["feasible"]
        .as_array()
        .unwrap_or_else(|| panic!("no feasible list in {json}"))
        .iter()
        .map(|n| n["node"].as_str().expect("node name"))
        .collect();
    assert_eq!(names, vec!["big", "small"], "{json}");
    assert_eq!(json["feasibleCount"], 2, "{json}");
    assert_eq!(json["policy"], "default", "{json}");
    assert_eq!(json["infeasible"][0]["node"], "tiny", "{json}");
    assert_eq!(json["infeasible"][0]["reasons"][0], "Insufficient cpu", "{json}");
    // The same request through the Rust client gives the same ranking.
    let r = rank(&mut c, rank_req(by_id(&id), pod("from-grpcurl", 2))).await;
    assert_eq!(feasible_names(&r), names);

    drop(c);
    stop_server(tx, handle).await;
}

// ---------------------------------------------------------------------------------------------
// InterPodAffinity and PodTopologySpread
// ---------------------------------------------------------------------------------------------

fn zoned(name: &str, zone: &str) -> proto::Node {
    let mut n = node(name, 8, 16, 110);
    n.labels = map(&[("kubernetes.io/hostname", name), ("topology.kubernetes.io/zone", zone)]);
    n
}

fn app_selector(app: &str) -> Option<proto::LabelSelector> {
    Some(proto::LabelSelector {
        match_labels: map(&[("app", app)]),
        match_expressions: vec![],
    })
}

/// A replica of `app` that repels its siblings per node and spreads them over zones.
fn ha_replica(uid: &str, app: &str) -> proto::Pod {
    let mut p = pod(uid, 1);
    p.labels = map(&[("app", app)]);
    p.pod_anti_affinity = Some(proto::PodAffinity {
        required: vec![proto::PodAffinityTerm {
            label_selector: app_selector(app),
            topology_key: "kubernetes.io/hostname".into(),
            ..Default::default()
        }],
        preferred: vec![],
    });
    p.topology_spread_constraints = vec![proto::TopologySpreadConstraint {
        max_skew: 1,
        topology_key: "topology.kubernetes.io/zone".into(),
        when_unsatisfiable: "DoNotSchedule".into(),
        label_selector: app_selector(app),
        ..Default::default()
    }];
    p
}

#[tokio::test]
async fn schedule_honours_anti_affinity_and_spread_within_one_batch() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    let nodes = vec![
        zoned("a1", "a"),
        zoned("a2", "a"),
        zoned("a3", "a"),
        zoned("b1", "b"),
        zoned("b2", "b"),
    ];
    // One replica already runs on a1; the batch brings five more.
    let existing = bound(ha_replica("web-0", "web"), "a1");
    let id = sync(&mut c, full(snapshot(nodes, vec![existing]))).await.snapshot_id;
    let batch: Vec<proto::Pod> = (1..=5).map(|i| ha_replica(&format!("web-{i}"), "web")).collect();
    let resp = schedule(&mut c, schedule_req(by_id(&id), batch)).await;
    let nodes: Vec<Option<&str>> = resp.placements.iter().map(placed).collect();
    // Zones alternate as maxSkew 1 demands (a has one already) and each node takes one replica;
    // the fifth finds none: zone a would be two ahead, and b's nodes hold a replica each.
    let placed_nodes: BTreeSet<&str> = nodes.iter().flatten().copied().collect();
    assert_eq!(placed_nodes, BTreeSet::from(["a2", "a3", "b1", "b2"]), "{nodes:?}");
    let u = unschedulable(&resp.placements[4]);
    assert_eq!(
        u.message,
        "0/5 nodes are available: 2 node(s) didn't match pod anti-affinity rules, \
         3 node(s) didn't match pod topology spread constraints. preemption: 0/5 nodes are available: \
         5 No preemption victims found for incoming pod."
    );
    stop_server(tx, handle).await;
}

#[tokio::test]
async fn rank_reports_existing_pods_anti_affinity_and_namespace_selectors() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    // A pod in namespace "batch" (labelled tier=batch) that repels web pods of namespaces
    // labelled tier=web, per zone.
    let mut guard = bound(pod("guard", 1), "a1");
    guard.namespace = "batch".into();
    guard.pod_anti_affinity = Some(proto::PodAffinity {
        required: vec![proto::PodAffinityTerm {
            label_selector: app_selector("web"),
            topology_key: "topology.kubernetes.io/zone".into(),
            namespace_selector: Some(proto::LabelSelector {
                match_labels: map(&[("tier", "web")]),
                match_expressions: vec![],
            }),
            ..Default::default()
        }],
        preferred: vec![],
    });
    let mut s = snapshot(vec![zoned("a1", "a"), zoned("b1", "b")], vec![guard]);
    s.namespaces = vec![
        proto::Namespace {
            name: "shop".into(),
            labels: map(&[("tier", "web")]),
        },
        proto::Namespace {
            name: "batch".into(),
            labels: map(&[("tier", "batch")]),
        },
    ];
    let id = sync(&mut c, full(s)).await.snapshot_id;
    let mut web = pod("w", 1);
    web.namespace = "shop".into();
    web.labels = map(&[("app", "web")]);
    let r = rank(&mut c, rank_req(by_id(&id), web.clone())).await;
    assert_eq!(feasible_names(&r), ["b1"]);
    assert_eq!(r.infeasible[0].plugin, "InterPodAffinity");
    assert_eq!(
        r.infeasible[0].reasons,
        ["node(s) didn't satisfy existing pods anti-affinity rules"]
    );
    // Relabelling the namespace through a delta lifts the rule.
    let next = sync(
        &mut c,
        delta(proto::SnapshotDelta {
            base_snapshot_id: id,
            upsert_namespaces: vec![proto::Namespace {
                name: "shop".into(),
                labels: map(&[("tier", "other")]),
            }],
            ..Default::default()
        }),
    )
    .await
    .snapshot_id;
    let r = rank(&mut c, rank_req(by_id(&next), web)).await;
    assert_eq!(r.feasible_count, 2);
    let spread = r.feasible[0]
        .plugin_scores
        .iter()
        .find(|p| p.plugin == "InterPodAffinity")
        .expect("InterPodAffinity scores");
    assert_eq!(spread.weight, 2);
    stop_server(tx, handle).await;
}

#[tokio::test]
async fn invalid_affinity_and_spread_fields_are_named() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    let s = snapshot(vec![zoned("a1", "a")], vec![]);
    let mut p = ha_replica("p", "web");
    p.pod_anti_affinity.as_mut().unwrap().required[0].topology_key.clear();
    let err = c
        .schedule(schedule_req(
            inline(s.clone()),
            vec![pod("ok", 1), pod("ok2", 1), pod("ok3", 1), p],
        ))
        .await
        .unwrap_err();
    assert_invalid_argument(
        &err,
        "pods[3].pod_anti_affinity.required[0].topology_key",
        "must not be empty",
    );
    let mut p = ha_replica("p", "web");
    p.topology_spread_constraints[0].max_skew = 0;
    let err = c.rank(rank_req(inline(s.clone()), p)).await.unwrap_err();
    assert_invalid_argument(
        &err,
        "pod.topology_spread_constraints[0].max_skew",
        "must be greater than zero",
    );
    let mut p = ha_replica("p", "web");
    p.topology_spread_constraints[0].when_unsatisfiable = "Sometimes".into();
    let err = c.rank(rank_req(inline(s.clone()), p)).await.unwrap_err();
    assert_invalid_argument(
        &err,
        "pod.topology_spread_constraints[0].when_unsatisfiable",
        "unsupported value \"Sometimes\"",
    );
    let mut p = ha_replica("p", "web");
    p.pod_anti_affinity.as_mut().unwrap().required[0]
        .label_selector
        .as_mut()
        .unwrap()
        .match_expressions = vec![proto::LabelSelectorRequirement {
        key: "app".into(),
        operator: "Gt".into(),
        values: vec!["1".into()],
    }];
    let err = c.rank(rank_req(inline(s), p)).await.unwrap_err();
    assert_invalid_argument(
        &err,
        "pod.pod_anti_affinity.required[0].label_selector.match_expressions[0].operator",
        "unsupported operator \"Gt\"",
    );
    stop_server(tx, handle).await;
}

// ---------------------------------------------------------------------------------------------
// Preemption and gangs
// ---------------------------------------------------------------------------------------------

fn prioritized(mut p: proto::Pod, priority: i32) -> proto::Pod {
    p.priority = priority;
    p
}

fn labelled(mut p: proto::Pod, app: &str) -> proto::Pod {
    p.labels.insert("app".to_string(), app.to_string());
    p
}

fn member(uid: &str, cpu: u32, gang: &str, min_members: u32) -> proto::Pod {
    let mut p = pod(uid, cpu);
    p.gang = Some(proto::Gang {
        name: gang.to_string(),
        min_members,
    });
    p
}

fn pdb(app: &str, disruptions_allowed: i32) -> proto::PodDisruptionBudget {
    proto::PodDisruptionBudget {
        namespace: "default".to_string(),
        name: format!("pdb-{app}"),
        selector: Some(proto::LabelSelector {
            match_labels: map(&[("app", app)]),
            ..Default::default()
        }),
        disruptions_allowed,
        disrupted_pod_uids: vec![],
    }
}

#[tokio::test]
async fn schedule_nominates_a_node_with_victims_and_respects_pod_disruption_budgets() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    // n1 runs a low-priority "db" pod covered by a budget that allows no disruption; n2 runs a
    // slightly more important pod with no budget. Both nodes are full.
    let mut cluster = snapshot(
        vec![node("n1", 4, 8, 110), node("n2", 4, 8, 110)],
        vec![
            bound(labelled(prioritized(pod("db-0", 4), 1), "db"), "n1"),
            bound(prioritized(pod("batch-0", 4), 5), "n2"),
        ],
    );
    cluster.pod_disruption_budgets = vec![pdb("db", 0)];
    let id = sync(&mut c, full(cluster)).await.snapshot_id;
    let batch = vec![
        prioritized(pod("urgent", 4), 100),
        prioritized(pod("also-urgent", 4), 100),
        {
            let mut p = prioritized(pod("polite", 4), 100);
            p.preemption_policy = "Never".to_string();
            p
        },
    ];
    let s = schedule(&mut c, schedule_req(by_id(&id), batch.clone())).await;
    let u = unschedulable(&s.placements[0]);
    assert_eq!(
        u.nominated_node_name, "n2",
        "the node without a budget violation: {u:?}"
    );
    assert_eq!(u.victim_uids, ["batch-0"]);
    assert_eq!(
        u.message,
        "0/2 nodes are available: 2 Insufficient cpu. preemption: found a potential placement for pod on node n2, \
         preempting 1 victims"
    );
    // The second preemptor cannot reuse n2's room: it is nominated to n1 and breaks the budget,
    // the only way left.
    let u = unschedulable(&s.placements[1]);
    assert_eq!(
        (u.nominated_node_name.as_str(), u.victim_uids.as_slice()),
        ("n1", &["db-0".to_string()][..])
    );
    let u = unschedulable(&s.placements[2]);
    assert!(u.nominated_node_name.is_empty() && u.victim_uids.is_empty());
    assert_eq!(
        u.message,
        "0/2 nodes are available: 2 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."
    );
    // A delta listing db-0 in the budget's disruptedPods (an eviction already admitted): it uses no
    // budget and violates nothing, so the least important pod goes.
    let disrupted = sync(
        &mut c,
        delta(proto::SnapshotDelta {
            base_snapshot_id: id.clone(),
            upsert_pod_disruption_budgets: vec![proto::PodDisruptionBudget {
                disrupted_pod_uids: vec!["db-0".to_string()],
                ..pdb("db", 0)
            }],
            ..Default::default()
        }),
    )
    .await
    .snapshot_id;
    let s = schedule(&mut c, schedule_req(by_id(&disrupted), batch[..1].to_vec())).await;
    let u = unschedulable(&s.placements[0]);
    assert_eq!(
        (u.nominated_node_name.as_str(), u.victim_uids.as_slice()),
        ("n1", &["db-0".to_string()][..])
    );
    // A delta that lifts the budget: the first preemptor now evicts the least important pod.
    let next = sync(
        &mut c,
        delta(proto::SnapshotDelta {
            base_snapshot_id: id.clone(),
            remove_pod_disruption_budgets: vec!["default/pdb-db".to_string()],
            ..Default::default()
        }),
    )
    .await
    .snapshot_id;
    assert_ne!(next, id);
    let s = schedule(&mut c, schedule_req(by_id(&next), batch[..1].to_vec())).await;
    let u = unschedulable(&s.placements[0]);
    assert_eq!(
        (u.nominated_node_name.as_str(), u.victim_uids.as_slice()),
        ("n1", &["db-0".to_string()][..])
    );
    // Rank answers the same nomination for one pod.
    let r = rank(&mut c, rank_req(by_id(&next), batch[0].clone())).await;
    assert_eq!(
        (r.nominated_node_name.as_str(), r.victim_uids.as_slice()),
        ("n1", &["db-0".to_string()][..])
    );
    // Nobody of lower priority: kube-scheduler's message for a preemption that cannot help.
    let r = rank(&mut c, rank_req(by_id(&next), pod("nobody", 4))).await;
    assert!(r.nominated_node_name.is_empty());
    assert_eq!(
        r.message,
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: \
         2 No preemption victims found for incoming pod."
    );
    drop(c);
    stop_server(tx, handle).await;
}

#[tokio::test]
async fn schedule_places_a_gang_whole_or_not_at_all() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    let cluster = inline(snapshot(vec![node("n1", 4, 8, 110), node("n2", 2, 8, 110)], vec![]));
    // "train" needs 4 workers of 2 cores: only 3 fit, so none is placed, and the pod after them
    // gets the room. "serve" needs 2 of its 3 members and gets them.
    let batch = vec![
        member("train-0", 2, "train", 4),
        member("train-1", 2, "train", 4),
        member("train-2", 2, "train", 4),
        member("train-3", 2, "train", 4),
        pod("web", 4),
        member("serve-0", 1, "serve", 2),
        member("serve-1", 1, "serve", 2),
        member("serve-2", 9, "serve", 2),
    ];
    let s = schedule(&mut c, schedule_req(cluster, batch)).await;
    for p in &s.placements[..4] {
        let u = unschedulable(p);
        assert_eq!(u.gang, "default/train");
        assert!(
            u.message
                .starts_with("gang \"default/train\" is not placed: it needs 4 members placed together, and 3 fit"),
            "{}",
            u.message
        );
    }
    assert_eq!(placed(&s.placements[4]), Some("n1"));
    assert!(placed(&s.placements[5]).is_some() && placed(&s.placements[6]).is_some());
    let u = unschedulable(&s.placements[7]);
    assert!(u.gang.is_empty(), "serve is placed; serve-2 alone does not fit: {u:?}");
    drop(c);
    stop_server(tx, handle).await;
}

fn bad_preemption_policy() -> BadInput {
    let mut p = pod("p", 1);
    p.preemption_policy = "Sometimes".to_string();
    BadInput {
        call: rank_pod(p),
        field: "pod.preemption_policy",
        description: r#"unsupported preemption policy "Sometimes""#,
    }
}

fn gang_without_members() -> BadInput {
    BadInput {
        call: Call::Schedule(schedule_req(small_cluster(), vec![pod("a", 1), member("b", 1, "g", 0)])),
        field: "pods[1].gang.min_members",
        description: "must be at least 1",
    }
}

fn bad_pdb_selector() -> BadInput {
    let mut budget = pdb("db", 0);
    budget.selector = Some(proto::LabelSelector {
        match_expressions: vec![proto::LabelSelectorRequirement {
            key: "app".to_string(),
            operator: "Gt".to_string(),
            values: vec!["1".to_string()],
        }],
        ..Default::default()
    });
    let mut s = snapshot(vec![node("n1", 1, 1, 10)], vec![]);
    s.pod_disruption_budgets = vec![pdb("web", 1), budget];
    BadInput {
        call: Call::Sync(full(s)),
        field: "full.pod_disruption_budgets[1].selector.match_expressions[0].operator",
        description: r#"unsupported operator "Gt""#,
    }
}

fn duplicate_pdb() -> BadInput {
    let mut s = snapshot(vec![node("n1", 1, 1, 10)], vec![]);
    s.pod_disruption_budgets = vec![pdb("web", 1), pdb("web", 2)];
    BadInput {
        call: Call::Sync(full(s)),
        field: "full.pod_disruption_budgets[1].name",
        description: r#"duplicate PodDisruptionBudget "default/pdb-web""#,
    }
}

#[tokio::test]
async fn bad_preemption_policy_is_refused() {
    check_refused(bad_preemption_policy()).await;
}

#[tokio::test]
async fn gang_with_zero_min_members_is_refused() {
    check_refused(gang_without_members()).await;
}

#[tokio::test]
async fn bad_pod_disruption_budget_selector_is_refused() {
    check_refused(bad_pdb_selector()).await;
}

#[tokio::test]
async fn duplicate_pod_disruption_budget_is_refused() {
    check_refused(duplicate_pdb()).await;
}

fn claim(name: &str) -> proto::PersistentVolumeClaim {
    proto::PersistentVolumeClaim {
        namespace: "default".into(),
        name: name.into(),
        storage_class_name: "local".into(),
        access_modes: vec!["ReadWriteOnce".into()],
        storage_request: "1Gi".into(),
        ..Default::default()
    }
}

fn volume(name: &str) -> proto::PersistentVolume {
    proto::PersistentVolume {
        name: name.into(),
        storage_class_name: "local".into(),
        capacity: "10Gi".into(),
        access_modes: vec!["ReadWriteOnce".into()],
        phase: "Available".into(),
        ..Default::default()
    }
}

fn with_storage(f: impl FnOnce(&mut proto::Snapshot)) -> proto::Snapshot {
    let mut s = snapshot(vec![node("n1", 1, 1, 10)], vec![]);
    f(&mut s);
    s
}

#[tokio::test]
async fn bad_claim_quantity_is_refused() {
    let s = with_storage(|s| {
        let mut c = claim("data");
        c.storage_request = "ten".into();
        s.persistent_volume_claims = vec![claim("ok"), c];
    });
    check_refused(BadInput {
        call: Call::Sync(full(s)),
        field: "full.persistent_volume_claims[1].storage_request",
        description: r#"invalid quantity "ten""#,
    })
    .await;
}

#[tokio::test]
async fn duplicate_persistent_volume_is_refused() {
    let s = with_storage(|s| s.persistent_volumes = vec![volume("pv-1"), volume("pv-1")]);
    check_refused(BadInput {
        call: Call::Sync(full(s)),
        field: "full.persistent_volumes[1].name",
        description: r#"duplicate PersistentVolume "pv-1""#,
    })
    .await;
}

#[tokio::test]
async fn bad_binding_mode_and_attach_limit_are_refused() {
    let s = with_storage(|s| {
        s.storage_classes = vec![proto::StorageClass {
            name: "local".into(),
            volume_binding_mode: "Later".into(),
            ..Default::default()
        }]
    });
    check_refused(BadInput {
        call: Call::Sync(full(s)),
        field: "full.storage_classes[0].volume_binding_mode",
        description: r#"unsupported binding mode "Later""#,
    })
    .await;
    let s = with_storage(|s| {
        s.csi_nodes = vec![proto::CsiNode {
            name: "n1".into(),
            drivers: vec![proto::CsiNodeDriver {
                name: "ebs.csi.aws.com".into(),
                allocatable_count: Some(-1),
            }],
        }]
    });
    check_refused(BadInput {
        call: Call::Rank(Box::new(rank_req(inline(s), pod("p", 1)))),
        field: "snapshot.inline.csi_nodes[0].drivers[0].allocatable_count",
        description: "must not be negative",
    })
    .await;
}

fn tracked_capacity(name: &str, zone: &str, size: &str) -> proto::CsiStorageCapacity {
    proto::CsiStorageCapacity {
        namespace: "kube-system".into(),
        name: name.into(),
        storage_class_name: "tracked".into(),
        node_topology: Some(proto::LabelSelector {
            match_labels: [("zone".to_string(), zone.to_string())].into(),
            ..Default::default()
        }),
        capacity: size.into(),
        maximum_volume_size: String::new(),
    }
}

#[tokio::test]
async fn bad_csi_storage_capacities_and_drivers_are_refused() {
    let s = with_storage(|s| {
        let mut c = tracked_capacity("b", "b", "10Gi");
        c.maximum_volume_size = "lots".into();
        s.csi_storage_capacities = vec![tracked_capacity("a", "a", "10Gi"), c];
    });
    check_refused(BadInput {
        call: Call::Sync(full(s)),
        field: "full.csi_storage_capacities[1].maximum_volume_size",
        description: r#"invalid quantity "lots""#,
    })
    .await;
    let s = with_storage(|s| {
        let mut c = tracked_capacity("a", "a", "10Gi");
        if let Some(t) = c.node_topology.as_mut() {
            t.match_expressions = vec![proto::LabelSelectorRequirement {
                key: "zone".into(),
                operator: "Near".into(),
                values: vec!["a".into()],
            }];
        }
        s.csi_storage_capacities = vec![c];
    });
    check_refused(BadInput {
        call: Call::Rank(Box::new(rank_req(inline(s), pod("p", 1)))),
        field: "snapshot.inline.csi_storage_capacities[0].node_topology.match_expressions[0].operator",
        description: r#"unsupported operator "Near""#,
    })
    .await;
    let s = with_storage(|s| {
        s.csi_storage_capacities = vec![tracked_capacity("a", "a", "-1Gi")];
    });
    check_refused(BadInput {
        call: Call::Sync(full(s)),
        field: "full.csi_storage_capacities[0].capacity",
        description: "must not be negative",
    })
    .await;
    let s = with_storage(|s| {
        s.csi_storage_capacities = vec![tracked_capacity("a", "a", "1Gi"), tracked_capacity("a", "b", "1Gi")];
    });
    check_refused(BadInput {
        call: Call::Sync(full(s)),
        field: "full.csi_storage_capacities[1].name",
        description: r#"duplicate CSIStorageCapacity "kube-system/a""#,
    })
    .await;
    let s = with_storage(|s| {
        s.csi_drivers = vec![proto::CsiDriver {
            name: String::new(),
            storage_capacity: true,
            ..Default::default()
        }];
    });
    check_refused(BadInput {
        call: Call::Sync(full(s)),
        field: "full.csi_drivers[0].name",
        description: "must not be empty",
    })
    .await;
}

/// CSIDrivers and CSIStorageCapacities are kept by a full snapshot and changed by deltas: a
/// claim of a class whose driver tracks capacity is provisioned only where a capacity has room.
#[tokio::test]
async fn storage_capacity_syncs_in_full_snapshots_and_deltas() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    let zoned = |name: &str, zone: &str| {
        let mut n = node(name, 4, 8, 110);
        n.labels.insert("zone".into(), zone.into());
        n
    };
    let mut s = snapshot(vec![zoned("n1", "a"), zoned("n2", "b")], vec![]);
    s.storage_classes = vec![proto::StorageClass {
        name: "tracked".into(),
        provisioner: "csi.example.com".into(),
        volume_binding_mode: "WaitForFirstConsumer".into(),
        ..Default::default()
    }];
    s.csi_drivers = vec![proto::CsiDriver {
        name: "csi.example.com".into(),
        storage_capacity: true,
        ..Default::default()
    }];
    let mut data = claim("data");
    data.storage_class_name = "tracked".into();
    s.persistent_volume_claims = vec![data];
    s.csi_storage_capacities = vec![tracked_capacity("a", "a", "512Mi")];
    let base = sync(&mut c, full(s)).await.snapshot_id;
    let mut p = pod("p", 1);
    p.volumes = vec![proto::Volume {
        name: "data".into(),
        claim_name: "data".into(),
        ..Default::default()
    }];
    let r = schedule(&mut c, schedule_req(by_id(&base), vec![p.clone()])).await;
    assert_eq!(
        unschedulable(&r.placements[0]).message,
        "0/2 nodes are available: 2 node(s) did not have enough free storage. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    let grown = sync(
        &mut c,
        delta(proto::SnapshotDelta {
            base_snapshot_id: base.clone(),
            upsert_csi_storage_capacities: vec![tracked_capacity("b", "b", "10Gi")],
            ..Default::default()
        }),
    )
    .await
    .snapshot_id;
    let r = schedule(&mut c, schedule_req(by_id(&grown), vec![p.clone()])).await;
    assert_eq!(placed(&r.placements[0]), Some("n2"), "{r:?}");
    let untracked = sync(
        &mut c,
        delta(proto::SnapshotDelta {
            base_snapshot_id: base,
            remove_csi_drivers: vec!["csi.example.com".into()],
            remove_csi_storage_capacities: vec!["kube-system/a".into()],
            ..Default::default()
        }),
    )
    .await
    .snapshot_id;
    let r = schedule(&mut c, schedule_req(by_id(&untracked), vec![p])).await;
    assert!(placed(&r.placements[0]).is_some(), "{r:?}");
    drop(c);
    stop_server(tx, handle).await;
}

#[tokio::test]
async fn a_pod_volume_with_two_sources_is_refused() {
    let mut p = pod("p", 1);
    p.volumes = vec![proto::Volume {
        name: "data".into(),
        claim_name: "data".into(),
        gce_pd_name: "disk".into(),
        ..Default::default()
    }];
    check_refused(BadInput {
        call: Call::Schedule(schedule_req(small_cluster(), vec![p])),
        field: "pods[0].volumes[0].gce_pd_name",
        description: "a volume has one source; claim_name is set too",
    })
    .await;
}

/// Storage objects are kept by a full snapshot and changed by deltas (removals, upserts), and a
/// delta with a bad one is refused naming its field.
#[tokio::test]
async fn storage_objects_sync_in_full_snapshots_and_deltas() {
    let (addr, tx, handle) = start_server(bad_input_config()).await;
    let mut c = client(addr).await;
    let s = with_storage(|s| {
        s.persistent_volume_claims = vec![claim("data")];
        s.persistent_volumes = vec![volume("pv-1")];
    });
    let base = c.sync_snapshot(full(s)).await.expect("full snapshot").into_inner();
    let ok = c
        .sync_snapshot(delta(proto::SnapshotDelta {
            base_snapshot_id: base.snapshot_id.clone(),
            remove_persistent_volume_claims: vec!["default/data".into()],
            upsert_persistent_volumes: vec![volume("pv-2")],
            upsert_storage_classes: vec![proto::StorageClass {
                name: "local".into(),
                provisioner: "kubernetes.io/no-provisioner".into(),
                volume_binding_mode: "WaitForFirstConsumer".into(),
                ..Default::default()
            }],
            ..Default::default()
        }))
        .await
        .expect("a delta of storage objects");
    assert_ne!(ok.into_inner().snapshot_id, base.snapshot_id);
    let mut bad = volume("pv-3");
    bad.access_modes = vec!["ReadWriteOnce".into(), "WriteSometimes".into()];
    let err = c
        .sync_snapshot(delta(proto::SnapshotDelta {
            base_snapshot_id: base.snapshot_id,
            upsert_persistent_volumes: vec![bad],
            ..Default::default()
        }))
        .await
        .expect_err("a bad access mode");
    assert_invalid_argument(
        &err,
        "delta.upsert_persistent_volumes[0].access_modes[1]",
        r#"unsupported access mode "WriteSometimes""#,
    );
    drop(c);
    stop_server(tx, handle).await;
}

/// A placed pod's unbound WaitForFirstConsumer claims come back as claim bindings (a volume
/// chosen, or provisioning on the node), and the snapshot assumed with the batch carries them:
/// the chosen volume refers to its claim, the provisioned claim selects the node, so the next
/// batch on it gives that volume to no other claim.
#[tokio::test]
async fn placements_carry_claim_bindings_and_the_assumed_snapshot_keeps_them() {
    let (addr, tx, handle) = start_server(ServerConfig::default()).await;
    let mut c = client(addr).await;
    let host = |name: &str| {
        let mut n = node(name, 4, 8, 110);
        n.labels.insert("kubernetes.io/hostname".into(), name.into());
        n
    };
    let mut s = snapshot(vec![host("n1"), host("n2")], vec![]);
    let local = |name: &str, provisioner: &str| proto::StorageClass {
        name: name.into(),
        provisioner: provisioner.into(),
        volume_binding_mode: "WaitForFirstConsumer".into(),
        ..Default::default()
    };
    s.storage_classes = vec![
        local("local", "kubernetes.io/no-provisioner"),
        local("fast", "csi.example.com"),
    ];
    let mut fast = claim("scratch");
    fast.storage_class_name = "fast".into();
    s.persistent_volume_claims = vec![claim("a"), claim("b"), fast];
    let mut pv = volume("pv-1");
    pv.node_affinity = Some(proto::NodeSelector {
        terms: vec![proto::NodeSelectorTerm {
            match_expressions: vec![proto::NodeSelectorRequirement {
                key: "kubernetes.io/hostname".into(),
                operator: "In".into(),
                values: vec!["n2".into()],
            }],
            ..Default::default()
        }],
    });
    s.persistent_volumes = vec![pv];
    let base = sync(&mut c, full(s)).await.snapshot_id;
    let with_claim = |uid: &str, claim: &str| {
        let mut p = pod(uid, 1);
        p.volumes = vec![proto::Volume {
            name: "data".into(),
            claim_name: claim.into(),
            ..Default::default()
        }];
        p
    };
    let mut req = schedule_req(by_id(&base), vec![with_claim("p1", "a"), with_claim("p2", "scratch")]);
    req.assume = true;
    let r = schedule(&mut c, req).await;
    assert_eq!(placed(&r.placements[0]), Some("n2"), "{r:?}");
    assert_eq!(
        r.placements[0].claim_bindings,
        [proto::ClaimBinding {
            claim_namespace: "default".into(),
            claim_name: "a".into(),
            target: Some(proto::claim_binding::Target::VolumeName("pv-1".into())),
        }]
    );
    let node = placed(&r.placements[1]).expect("placed").to_string();
    assert_eq!(
        r.placements[1].claim_bindings,
        [proto::ClaimBinding {
            claim_namespace: "default".into(),
            claim_name: "scratch".into(),
            target: Some(proto::claim_binding::Target::SelectedNode(node.clone())),
        }]
    );
    // On the assumed snapshot: claim b finds pv-1 taken; a second pod of claim a follows pv-1;
    // a second pod of the provisioned claim follows its selected node.
    let next = schedule(
        &mut c,
        schedule_req(
            by_id(&r.assumed_snapshot_id),
            vec![
                with_claim("q1", "b"),
                with_claim("q2", "a"),
                with_claim("q3", "scratch"),
            ],
        ),
    )
    .await;
    assert_eq!(
        unschedulable(&next.placements[0]).message,
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    assert_eq!(placed(&next.placements[1]), Some("n2"));
    assert_eq!(placed(&next.placements[2]), Some(node.as_str()));
    // On the base, claim b still gets pv-1.
    let on_base = schedule(&mut c, schedule_req(by_id(&base), vec![with_claim("q1", "b")])).await;
    assert_eq!(placed(&on_base.placements[0]), Some("n2"));
    drop(c);
    stop_server(tx, handle).await;
}
