//! Decision replicas started in this process, with their server-side timings.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use placement_scheduler::grpc::{Metrics as ServiceMetrics, PlacementApi, ServerConfig};
use placement_scheduler::proto;
use placement_scheduler::proto::placement_service_server::{PlacementService, PlacementServiceServer};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::config::*;
use super::latency::Recorder;

/// Server-side timings of the in-process replicas.
#[derive(Debug, Default)]
pub(super) struct DecisionTimings {
    /// SyncSnapshot plus Schedule, per batch.
    pub(super) decisions: Recorder,
    /// Schedule alone.
    pub(super) schedule: Recorder,
    /// SyncSnapshot alone.
    pub(super) syncs: Recorder,
}

/// PlacementService that times each call, delegating to the real service.
pub(super) struct TimedApi {
    inner: PlacementApi,
    timings: Arc<DecisionTimings>,
    /// The sync the next Schedule follows (the binder decides one batch at a time).
    last_sync: Mutex<Option<Duration>>,
}

#[tonic::async_trait]
impl PlacementService for TimedApi {
    async fn sync_snapshot(
        &self,
        request: tonic::Request<proto::SyncSnapshotRequest>,
    ) -> Result<tonic::Response<proto::SyncSnapshotResponse>, tonic::Status> {
        let started = Instant::now();
        let r = self.inner.sync_snapshot(request).await;
        let took = started.elapsed();
        self.timings.syncs.record(took);
        let mut last = self.last_sync.lock();
        *last = Some(last.unwrap_or_default() + took);
        r
    }

    async fn rank(
        &self,
        request: tonic::Request<proto::RankRequest>,
    ) -> Result<tonic::Response<proto::RankResponse>, tonic::Status> {
        self.inner.rank(request).await
    }

    async fn schedule(
        &self,
        request: tonic::Request<proto::ScheduleRequest>,
    ) -> Result<tonic::Response<proto::ScheduleResponse>, tonic::Status> {
        let started = Instant::now();
        let r = self.inner.schedule(request).await;
        let took = started.elapsed();
        if r.is_ok() {
            self.timings.schedule.record(took);
            let sync = self.last_sync.lock().take().unwrap_or_default();
            self.timings.decisions.record(sync + took);
        }
        r
    }

    async fn list_policies(
        &self,
        request: tonic::Request<proto::ListPoliciesRequest>,
    ) -> Result<tonic::Response<proto::ListPoliciesResponse>, tonic::Status> {
        self.inner.list_policies(request).await
    }
}

/// A decision replica serving on a local port, on a runtime of its own (its own worker threads),
/// as a replica in its own process would: its connection tasks do not queue behind the binder's.
pub(super) struct LocalReplica {
    pub(super) url: String,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<Result<(), tonic::transport::Error>>,
    _runtime: OwnRuntime,
}

/// A runtime that may be dropped anywhere: dropping a [`tokio::runtime::Runtime`] blocks, which
/// an async context must not do (it panics), so this one shuts down in the background, also when
/// a simulation ends early with an error.
pub(super) struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl LocalReplica {
    pub(super) async fn start(
        config: &ServerConfig,
        timings: Arc<DecisionTimings>,
        metrics: Arc<ServiceMetrics>,
    ) -> Result<Self, SimError> {
        let inner = PlacementApi::new(config.service.clone(), metrics).map_err(|e| SimError::Replica(e.to_string()))?;
        let service = PlacementServiceServer::new(TimedApi {
            inner,
            timings,
            last_sync: Mutex::new(None),
        })
        .max_decoding_message_size(config.max_message_bytes)
        .max_encoding_message_size(config.max_message_bytes);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| SimError::Replica(e.to_string()))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| SimError::Replica(e.to_string()))?;
        let addr = listener.local_addr().map_err(|e| SimError::Replica(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sim-replica")
            .enable_all()
            .build()
            .map_err(|e| SimError::Replica(e.to_string()))?;
        let handle = runtime.handle().clone();
        let runtime = OwnRuntime(Some(runtime));
        let listener = {
            let _in_runtime = handle.enter();
            tokio::net::TcpListener::from_std(listener).map_err(|e| SimError::Replica(e.to_string()))?
        };
        let (shutdown, stop) = oneshot::channel::<()>();
        let task = handle.spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                // TCP_NODELAY on accepted connections: without it, responses larger than a segment
                // wait for the client's delayed ACK (40 ms per call on Linux).
                .serve_with_incoming_shutdown(
                    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
                    async {
                        let _ = stop.await;
                    },
                ),
        );
        Ok(Self {
            url: format!("http://{addr}"),
            shutdown,
            task,
            _runtime: runtime,
        })
    }

    pub(super) async fn stop(self) {
        let _ = self.shutdown.send(());
        if let Ok(Ok(Err(e))) = tokio::time::timeout(Duration::from_secs(5), self.task).await {
            tracing::warn!(error = %e, "in-process decision replica failed");
        }
    }
}
