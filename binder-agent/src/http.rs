//! The binder's HTTP endpoints: `/healthz` (200 while the process serves), `/readyz` (200 once
//! the initial lists are done and a decision replica is in, 503 before), `/metrics` in the
//! OpenMetrics text format, and `/experiments`: the per-arm comparison of experiments and shadow
//! policies (a text table; JSON with `?format=json`).

use std::future::Future;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;

use crate::api::ClusterApi;
use crate::binder::Binder;

/// Content type of `/metrics`.
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz<A: ClusterApi>(State(binder): State<Binder<A>>) -> (StatusCode, &'static str) {
    if binder.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: caches not synced or no decision replica",
        )
    }
}

async fn metrics<A: ClusterApi>(State(binder): State<Binder<A>>) -> impl IntoResponse {
    // Refreshes the per-arm node gauges, computed from the binder's state.
    let _ = binder.experiment_report();
    (
        [(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)],
        binder.metrics().encode(),
    )
}

/// `/experiments`: the per-arm comparison as a text table, or JSON with `?format=json`.
async fn experiments<A: ClusterApi>(State(binder): State<Binder<A>>, uri: axum::http::Uri) -> axum::response::Response {
    let report = binder.experiment_report();
    let json = uri.query().is_some_and(|q| q.split('&').any(|kv| kv == "format=json"));
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        }
    } else {
        (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            report.to_string(),
        )
            .into_response()
    }
}

/// The routes.
pub fn router<A: ClusterApi>(binder: Binder<A>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(healthz))
        .route("/readyz", get(readyz::<A>))
        .route("/metrics", get(metrics::<A>))
        .route("/experiments", get(experiments::<A>))
        .with_state(binder)
}

/// Serves the routes on `listener` until `shutdown` resolves.
pub async fn serve<A: ClusterApi>(
    listener: TcpListener,
    binder: Binder<A>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(binder))
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::api::{ApiError, PodRef};
    use crate::metrics::BinderMetrics;
    use crate::replicas::{EndpointSource, ReplicaConfig, ReplicaPool};

    struct NoApi;

    impl ClusterApi for NoApi {
        async fn bind(
            &self,
            _: &PodRef,
            _: &str,
            _: &std::collections::BTreeMap<String, String>,
        ) -> Result<(), ApiError> {
            Ok(())
        }
        async fn record_scheduled(&self, _: &PodRef, _: &str, _: std::time::SystemTime) -> Result<(), ApiError> {
            Ok(())
        }
        async fn record_unschedulable(&self, _: &PodRef, _: &str) -> Result<(), ApiError> {
            Ok(())
        }
        async fn nominate(&self, _: &PodRef, _: &str) -> Result<(), ApiError> {
            Ok(())
        }
        async fn clear_nomination(&self, _: &PodRef) -> Result<(), ApiError> {
            Ok(())
        }
        async fn preempt(&self, _: &PodRef, _: &crate::api::Preemptor, _: &str, _: &str) -> Result<(), ApiError> {
            Ok(())
        }
    }

    async fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn health_readiness_and_metrics() {
        let pool = ReplicaPool::new(
            EndpointSource::Static(vec!["http://127.0.0.1:1".into()]),
            ReplicaConfig::default(),
        )
        .unwrap();
        let (_tx, leader) = tokio::sync::watch::channel(true);
        let binder = Binder::new(
            Default::default(),
            NoApi,
            Arc::new(pool),
            Arc::new(BinderMetrics::new()),
            leader,
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, binder.clone(), async move {
            let _ = stopped.await;
        }));

        assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200"));
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 503"));
        binder.set_synced();
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 200"));
        let m = get(addr, "/metrics").await;
        assert!(m.starts_with("HTTP/1.1 200"), "{m}");
        assert!(
            m.to_ascii_lowercase()
                .contains("content-type: application/openmetrics-text"),
            "{m}"
        );
        assert!(m.contains("binder_leader") && m.trim_end().ends_with("# EOF"), "{m}");

        let _ = stop.send(());
        server.await.unwrap().unwrap();
    }
}
