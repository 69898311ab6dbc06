//! Graceful shutdown of a decision replica: a call in flight when shutdown starts still completes,
//! and the server then stops and refuses new connections.

use std::sync::Arc;
use std::time::Duration;

use placement_scheduler::grpc::{serve, Metrics, ServerConfig};
use placement_scheduler::proto::placement_service_client::PlacementServiceClient;
use placement_scheduler::proto::{snapshot_ref, ScheduleRequest, SnapshotRef};
use placement_scheduler::synth::{cluster, distinct_pods, ClusterShape};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

#[tokio::test]
async fn shutdown_drains_the_call_in_flight_then_stops() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(serve(
        listener,
        ServerConfig::default(),
        Arc::new(Metrics::new()),
        async {
            let _ = stop_rx.await;
        },
    ));

    // A batch big enough to still be running when shutdown starts (hundreds of ms in a debug build).
    let snapshot = cluster(&ClusterShape::with_nodes(1_000), 1);
    let pods = distinct_pods(300, 2);
    let n = pods.len();
    let mut client = PlacementServiceClient::connect(format!("http://{addr}")).await.unwrap();
    client = client
        .max_encoding_message_size(usize::MAX)
        .max_decoding_message_size(usize::MAX);
    let call = tokio::spawn(async move {
        client
            .schedule(ScheduleRequest {
                snapshot: Some(SnapshotRef {
                    source: Some(snapshot_ref::Source::Inline(snapshot)),
                }),
                pods,
                policy: String::new(),
                seed: 0,
                assume: false,
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !call.is_finished(),
        "the call must still be in flight when shutdown starts"
    );
    let _ = stop_tx.send(());

    let response = call
        .await
        .unwrap()
        .expect("the in-flight call completes during shutdown");
    assert_eq!(response.into_inner().placements.len(), n);
    tokio::time::timeout(Duration::from_secs(20), server)
        .await
        .expect("server stops after draining")
        .unwrap()
        .unwrap();
    assert!(
        PlacementServiceClient::connect(format!("http://{addr}")).await.is_err(),
        "no new connections after shutdown"
    );
}
