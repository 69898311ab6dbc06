use super::*;

fn api() -> PlacementApi {
    PlacementApi::new(ServiceConfig::default(), Arc::new(Metrics::new())).expect("default config")
}

/// Registers `id` as being assumed, as `assume_in_background` does before it builds.
fn register(api: &PlacementApi, id: &str) -> tokio::sync::watch::Sender<bool> {
    let (done, wait) = tokio::sync::watch::channel(false);
    api.inner.assuming.lock().insert(id.to_string(), wait);
    done
}

/// A request on snapshot `id`, asked from another task.
fn ask(api: &PlacementApi, id: &'static str) -> tokio::task::JoinHandle<Result<Arc<Snapshot>, Status>> {
    let api = api.clone();
    tokio::spawn(async move { api.cached("snapshot.snapshot_id", id).await })
}

/// A request on an assumed snapshot still being built waits for it instead of answering
/// NOT_FOUND (which would cost the caller a full sync).
#[tokio::test]
async fn a_snapshot_being_assumed_is_waited_for() {
    let api = api();
    let done = register(&api, "assumed");
    let waiter = ask(&api, "assumed");
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(!waiter.is_finished(), "answered before the snapshot was stored");
    api.store("assumed".to_string(), Arc::new(Snapshot::default()));
    api.inner.assuming.lock().remove("assumed");
    done.send(true).expect("the waiter listens");
    let found = waiter.await.expect("no panic");
    assert!(found.is_ok(), "{found:?}");
}

/// A build that ends without storing (failed, or panicked and dropped its sender) leaves the
/// id missing: NOT_FOUND, so the caller re-syncs.
#[tokio::test]
async fn an_assume_that_stored_nothing_is_not_found() {
    let api = api();
    let done = register(&api, "failed");
    let waiter = ask(&api, "failed");
    tokio::task::yield_now().await;
    drop(done);
    let status = waiter.await.expect("no panic").expect_err("nothing was stored");
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    assert!(status.message().contains("send a full snapshot"), "{status:?}");
}
