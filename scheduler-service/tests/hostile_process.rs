//! Hostile callers against the `scheduler-service` binary, judged by what the process spends:
//! resident memory (VmHWM from /proc) when requests amplify in decoding or fill the snapshot cache,
//! CPU time after a call has ended or while file descriptors run out.

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use placement_scheduler::proto;
use placement_scheduler::proto::snapshot_ref::Source;
use placement_scheduler::proto::sync_snapshot_request::Kind;
use prost::Message;
use support::{empty_elements, field, raw_unary, Replica};
use tonic::Code;

const MIB: f64 = 1024.0 * 1024.0;

fn map(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn node(name: &str) -> proto::Node {
    proto::Node {
        name: name.into(),
        allocatable: map(&[("cpu", "64"), ("memory", "256Gi"), ("pods", "110")]),
        labels: map(&[("kubernetes.io/hostname", name), ("zone", "a")]),
        ..Default::default()
    }
}

fn pod(uid: &str) -> proto::Pod {
    proto::Pod {
        uid: uid.into(),
        namespace: "default".into(),
        name: uid.into(),
        containers: vec![proto::Container {
            name: "c".into(),
            requests: map(&[("cpu", "100m"), ("memory", "64Mi")]),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn full(s: proto::Snapshot) -> proto::SyncSnapshotRequest {
    proto::SyncSnapshotRequest {
        kind: Some(Kind::Full(s)),
    }
}

fn by_id(id: &str) -> Option<proto::SnapshotRef> {
    Some(proto::SnapshotRef {
        source: Some(Source::SnapshotId(id.to_string())),
    })
}

/// A SyncSnapshot request holding a full snapshot whose field `number` repeats `count` empty
/// messages: two bytes each on the wire, hundreds once decoded.
fn snapshot_of_empty(number: u32, count: usize) -> Bytes {
    field(1, &empty_elements(number, count)).into()
}

// ---------------------------------------------------------------------------------------------
// Point 1: memory is bounded before and while a request is decoded.
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amplifying_requests_are_refused_before_they_are_decoded() {
    // No batch limit to speak of: the request budget is what refuses.
    let r = Replica::start(&["--max-batch-size", "100000000"]);
    let mut c = r.client().await;
    let before = r.memory();
    // 4,000,000 empty pods: 8 MB on the wire, gigabytes once decoded.
    let s = raw_unary(r.channel().await, "Schedule", empty_elements(2, 4_000_000).into())
        .await
        .expect_err("too large to decode");
    assert_eq!(s.code(), Code::ResourceExhausted, "{s:?}");
    assert!(s.message().contains("--request-memory-bytes"), "{s:?}");
    // 4,000,000 empty nodes in a full snapshot.
    let s = raw_unary(r.channel().await, "SyncSnapshot", snapshot_of_empty(1, 4_000_000))
        .await
        .expect_err("too large to decode");
    assert_eq!(s.code(), Code::ResourceExhausted, "{s:?}");
    let grew = (r.memory().hwm_mib - before.rss_mib).max(0.0);
    assert!(grew < 64.0, "the replica's peak grew by {grew:.0} MiB refusing them");
    // The same replica still serves.
    c.sync_snapshot(full(proto::Snapshot {
        nodes: vec![node("n1")],
        ..Default::default()
    }))
    .await
    .expect("a small sync");

    // With the default batch limit, a batch over it is refused before a pod is decoded.
    let r = Replica::start(&[]);
    let before = r.memory();
    let s = raw_unary(r.channel().await, "Schedule", empty_elements(2, 4_000_000).into())
        .await
        .expect_err("over the batch limit");
    assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
    assert!(
        s.message()
            .starts_with("pods: batch of more than 160001 pods exceeds the maximum of 10000"),
        "{s:?}"
    );
    let grew = (r.memory().hwm_mib - before.rss_mib).max(0.0);
    assert!(grew < 64.0, "the replica's peak grew by {grew:.0} MiB");
}

// ---------------------------------------------------------------------------------------------
// Point 2: the snapshot cache counts what it keeps.
// ---------------------------------------------------------------------------------------------

/// A pod with many labels and (anti-)affinity terms: kilobytes the cache must count.
fn heavy_pod(uid: &str, node: &str) -> proto::Pod {
    let term = |i: usize| proto::PodAffinityTerm {
        label_selector: Some(proto::LabelSelector {
            match_labels: Default::default(),
            match_expressions: (0..12)
                .map(|j| proto::LabelSelectorRequirement {
                    key: format!("example.com/key-{i}-{j}"),
                    operator: "In".into(),
                    values: (0..4).map(|k| format!("value-{uid}-{k}")).collect(),
                })
                .collect(),
        }),
        topology_key: "kubernetes.io/hostname".into(),
        ..Default::default()
    };
    proto::Pod {
        node_name: node.into(),
        labels: (0..24)
            .map(|i| (format!("example.com/label-{i}"), format!("{uid}-{i}")))
            .collect(),
        pod_anti_affinity: Some(proto::PodAffinity {
            required: (0..3).map(term).collect(),
            preferred: vec![],
        }),
        ..pod(uid)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_snapshot_cache_counts_what_it_keeps() {
    const BUDGET: usize = 64 << 20;
    let r = Replica::start_with_metrics(&["--snapshot-cache-bytes", &BUDGET.to_string()]);
    let mut c = r.client().await;
    let nodes: Vec<proto::Node> = (0..200).map(|i| node(&format!("n{i}"))).collect();
    let base = c
        .sync_snapshot(full(proto::Snapshot {
            nodes,
            ..Default::default()
        }))
        .await
        .expect("base")
        .into_inner()
        .snapshot_id;
    let before = r.memory();
    let mut max_reported = 0.0f64;
    // 40 snapshots, each the base plus 600 pods with labels and affinity terms of their own:
    // several MiB each, 40 times the budget's worth if all were kept.
    for d in 0..40 {
        let pods = (0..600)
            .map(|i| heavy_pod(&format!("d{d}-p{i}"), &format!("n{}", i % 200)))
            .collect();
        let id = c
            .sync_snapshot(proto::SyncSnapshotRequest {
                kind: Some(Kind::Delta(proto::SnapshotDelta {
                    base_snapshot_id: base.clone(),
                    upsert_pods: pods,
                    ..Default::default()
                })),
            })
            .await
            .expect("delta")
            .into_inner()
            .snapshot_id;
        // Evaluations build parts of the snapshot (indexes, topologies): counted too.
        c.rank(proto::RankRequest {
            snapshot: by_id(&id),
            pod: Some(heavy_pod(&format!("pending-{d}"), "")),
            infeasible_limit: Some(0),
            ..Default::default()
        })
        .await
        .expect("rank");
        max_reported = max_reported.max(r.metric("placement_snapshot_cache_bytes").await);
    }
    let grown = r.memory().rss_mib - before.rss_mib;
    let reported = r.metric("placement_snapshot_cache_bytes").await / MIB;
    let entries = r.metric("placement_snapshot_cache_entries").await;
    // The cache stays within its budget (plus the newest snapshot, always kept) ...
    assert!(
        max_reported / MIB < 64.0 + 16.0,
        "reported up to {:.1} MiB",
        max_reported / MIB
    );
    assert!(entries < 40.0, "{entries} entries kept: nothing was evicted");
    // ... and what it reports covers what the process holds beyond the base: what it keeps plus
    // the allocator's slack, not several times more.
    assert!(
        grown <= reported + 48.0,
        "the process grew by {grown:.0} MiB while the cache reported {reported:.1} MiB ({entries} entries)"
    );
}

// ---------------------------------------------------------------------------------------------
// Point 3: work stops when the call ends.
// ---------------------------------------------------------------------------------------------

/// A pod whose required anti-affinity selector has `n` expressions matching every bound pod:
/// each is checked against every pod of the snapshot.
fn expensive_pod(uid: &str, n: usize) -> proto::Pod {
    proto::Pod {
        pod_anti_affinity: Some(proto::PodAffinity {
            required: vec![proto::PodAffinityTerm {
                label_selector: Some(proto::LabelSelector {
                    match_labels: Default::default(),
                    match_expressions: (0..n)
                        .map(|i| proto::LabelSelectorRequirement {
                            key: format!("absent-{i}"),
                            operator: "DoesNotExist".into(),
                            values: vec![],
                        })
                        .collect(),
                }),
                topology_key: "kubernetes.io/hostname".into(),
                ..Default::default()
            }],
            preferred: vec![],
        }),
        ..pod(uid)
    }
}

/// CPU the replica spends in `window` from now.
async fn cpu_over(r: &Replica, window: Duration) -> Duration {
    let start = r.cpu();
    tokio::time::sleep(window).await;
    r.cpu().saturating_sub(start)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_stops_when_the_call_ends() {
    let r = Replica::start(&[]);
    let mut c = r.client().await;
    let nodes: Vec<proto::Node> = (0..500).map(|i| node(&format!("n{i}"))).collect();
    let pods: Vec<proto::Pod> = (0..20_000)
        .map(|i| proto::Pod {
            node_name: format!("n{}", i % 500),
            labels: map(&[("app", &format!("a{}", i % 50))]),
            ..pod(&format!("b{i}"))
        })
        .collect();
    let id = c
        .sync_snapshot(full(proto::Snapshot {
            nodes,
            pods,
            ..Default::default()
        }))
        .await
        .expect("sync")
        .into_inner()
        .snapshot_id;
    let batch_id = id.clone();
    let batch = move |tag: &str| proto::ScheduleRequest {
        snapshot: by_id(&batch_id),
        pods: (0..40).map(|i| expensive_pod(&format!("{tag}{i}"), 1500)).collect(),
        ..Default::default()
    };
    let rank_after = proto::RankRequest {
        snapshot: by_id(&id),
        pod: Some(pod("after")),
        ..Default::default()
    };
    let idle = cpu_over(&r, Duration::from_millis(500)).await;

    // A deadline: the call ends at it, and so does the work.
    let mut req = tonic::Request::new(batch("d"));
    req.set_timeout(Duration::from_millis(300));
    let started = Instant::now();
    let s = c.schedule(req).await.expect_err("past its deadline");
    assert!(matches!(s.code(), Code::DeadlineExceeded | Code::Cancelled), "{s:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered after {:?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = cpu_over(&r, Duration::from_secs(2)).await;
    assert!(
        after < idle + Duration::from_millis(400),
        "the replica spent {after:?} of CPU in the 2 s after the deadline ({idle:?} idle)"
    );

    // A client that goes away: the connection closes, and the work stops.
    let mut gone = support::Replica::client(&r).await;
    let call = tokio::spawn(async move { gone.schedule(batch("g")).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    call.abort();
    let _ = call.await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = cpu_over(&r, Duration::from_secs(2)).await;
    assert!(
        after < idle + Duration::from_millis(400),
        "the replica spent {after:?} of CPU in the 2 s after its client left ({idle:?} idle)"
    );

    // The replica still answers.
    c.rank(rank_after).await.expect("rank after");
}

// ---------------------------------------------------------------------------------------------
// Point 4: out of file descriptors, the accept loop waits instead of spinning.
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_accept_loop_backs_off_when_descriptors_run_out() {
    use std::os::unix::process::CommandExt;
    let r = Replica::start_with(&["--connection-handshake-seconds", "120"], |cmd| {
        // SAFETY: setrlimit is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: 64,
                    rlim_max: 64,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    let addr = r.endpoint.trim_start_matches("http://").to_string();
    // More connections than the replica has descriptors: the kernel queues them, and every
    // accept fails with EMFILE while they wait.
    let mut held = Vec::new();
    for _ in 0..100 {
        held.push(tokio::net::TcpStream::connect(&addr).await.expect("connect"));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let spent = cpu_over(&r, Duration::from_secs(2)).await;
    assert!(
        spent < Duration::from_millis(300),
        "the replica spent {spent:?} of CPU in 2 s with no descriptor left"
    );
    // Once descriptors are free again, it accepts and serves.
    drop(held);
    let mut answered = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Ok(channel) = tonic::transport::Channel::from_shared(r.endpoint.clone())
            .expect("uri")
            .connect()
            .await
        else {
            continue;
        };
        let mut c = proto::placement_service_client::PlacementServiceClient::new(channel);
        if c.list_policies(proto::ListPoliciesRequest {}).await.is_ok() {
            answered = true;
            break;
        }
    }
    assert!(answered, "the replica serves again once descriptors are free");
}

// ---------------------------------------------------------------------------------------------
// Acceptance: a replica with the deployment's memory limit survives every request up to the
// message-size limit, and answers other callers meanwhile.
// ---------------------------------------------------------------------------------------------

/// `deploy/base`'s memory limit for a decision replica (`resources.limits.memory: 2Gi`).
const DEPLOYMENT_LIMIT_MIB: f64 = 2048.0;
/// The default `--max-message-bytes`.
const MESSAGE_LIMIT: usize = 256 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_survives_the_worst_requests_within_the_message_limit() {
    let deploy = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/base/decision.yaml"))
        .expect("deploy/base/decision.yaml");
    assert!(deploy.contains("memory: 2Gi"), "the deployment's limit is still 2Gi");
    // The deployment's flags (none of the limits overridden).
    let mut r = Replica::start(&[]);
    let base = r.memory();

    // Another caller, answered throughout.
    let other = r.channel().await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let stop = std::sync::Arc::clone(&stop);
        tokio::spawn(async move {
            let mut c = proto::placement_service_client::PlacementServiceClient::new(other);
            let (mut calls, mut slowest) = (0u32, Duration::ZERO);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let started = Instant::now();
                let mut req = tonic::Request::new(proto::RankRequest {
                    snapshot: Some(proto::SnapshotRef {
                        source: Some(Source::Inline(proto::Snapshot {
                            nodes: vec![node("w1"), node("w2")],
                            ..Default::default()
                        })),
                    }),
                    pod: Some(pod("watcher")),
                    ..Default::default()
                });
                req.set_timeout(Duration::from_secs(20));
                let r = c.rank(req).await;
                assert!(r.is_ok(), "another caller was refused: {r:?}");
                slowest = slowest.max(started.elapsed());
                calls += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (calls, slowest)
        })
    };

    let room = MESSAGE_LIMIT - 64;
    let mut outcomes = Vec::new();
    // Empty pods up to the message limit, on Schedule and on a full snapshot; empty nodes.
    outcomes.push((
        "schedule of empty pods",
        raw_unary(r.channel().await, "Schedule", empty_elements(2, room / 2).into()).await,
    ));
    outcomes.push((
        "snapshot of empty pods",
        raw_unary(r.channel().await, "SyncSnapshot", snapshot_of_empty(2, room / 2 - 8)).await,
    ));
    outcomes.push((
        "snapshot of empty nodes",
        raw_unary(r.channel().await, "SyncSnapshot", snapshot_of_empty(1, room / 2 - 8)).await,
    ));
    // One string as large as the message limit allows.
    let huge_uid = proto::RankRequest {
        pod: Some(pod(&"u".repeat(room - 1024))),
        snapshot: Some(proto::SnapshotRef {
            source: Some(Source::Inline(proto::Snapshot {
                nodes: vec![node("n1")],
                ..Default::default()
            })),
        }),
        ..Default::default()
    };
    outcomes.push((
        "one huge string",
        raw_unary(r.channel().await, "Rank", huge_uid.encode_to_vec().into()).await,
    ));
    // Nodes with many distinct labels, four such requests at once (each within the limit).
    let labelled = |k: usize| -> Bytes {
        let nodes: Vec<proto::Node> = (0..120_000)
            .map(|i| proto::Node {
                labels: (0..8).map(|j| (format!("k{k}-{j}"), format!("v{i}"))).collect(),
                ..node(&format!("n{k}-{i}"))
            })
            .collect();
        full(proto::Snapshot {
            nodes,
            ..Default::default()
        })
        .encode_to_vec()
        .into()
    };
    let bodies: Vec<Bytes> = (0..4).map(labelled).collect();
    let mut calls = Vec::new();
    for body in bodies {
        let channel = r.channel().await;
        calls.push(tokio::spawn(
            async move { raw_unary(channel, "SyncSnapshot", body).await },
        ));
    }
    for call in calls {
        outcomes.push(("labelled nodes, four at once", call.await.expect("no panic")));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (calls, slowest) = watcher.await.expect("the other caller");

    assert!(r.alive(), "the replica died");
    let peak = r.memory().hwm_mib;
    for (what, outcome) in &outcomes {
        match outcome {
            Ok(_) => {}
            Err(s) => assert!(
                matches!(s.code(), Code::ResourceExhausted | Code::InvalidArgument),
                "{what}: {:?} {}",
                s.code(),
                s.message().chars().take(200).collect::<String>()
            ),
        }
    }
    assert!(
        peak < DEPLOYMENT_LIMIT_MIB,
        "the replica's resident peak was {peak:.0} MiB (from {:.0}), over the deployment's {DEPLOYMENT_LIMIT_MIB} MiB",
        base.rss_mib
    );
    assert!(calls > 5, "the other caller got {calls} answers");
    assert!(
        slowest < Duration::from_secs(15),
        "the other caller waited up to {slowest:?}"
    );
    println!(
        "peak {peak:.0} MiB; other caller: {calls} answers, slowest {slowest:?}; outcomes: {:?}",
        outcomes
            .iter()
            .map(|(w, o)| (w, o.as_ref().map(|_| Code::Ok).unwrap_or_else(|s| s.code())))
            .collect::<Vec<_>>()
    );
}
