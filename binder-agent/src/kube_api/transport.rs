//! The HTTP transport to the API server: kube-rs's HTTP/1.1 client, or HTTP/2 as client-go's.
//!
//! kube-rs's default client speaks HTTP/1.1 only: every request in flight holds a connection of
//! its own, so a binder with 64 Bindings, 8 events and 16 watches in flight opens some 90 TLS
//! connections and the API server serves each on its own. client-go, and so kube-scheduler, offers
//! `h2` by ALPN and multiplexes every request and watch on one connection
//! (`k8s.io/client-go/transport` with `k8s.io/apimachinery/pkg/util/net/http.go`'s
//! `SetTransportDefaults`), pinging it after 30 s without a frame and dropping it when the ping is
//! not answered in 15 s. [`Protocols::Http2`] builds the same: kube-rs's own stack (base URI,
//! retry, authentication, extra headers, the `HTTP` debug span, connect/read/write timeouts) over a
//! connector that offers `h2` and `http/1.1`, so an API server (or proxy) without HTTP/2 still gets
//! HTTP/1.1.
//!
//! HTTP/1.1 stays the default (`binder-agent run --api-http2` opts in): on the 2-core DRA cluster
//! bench HTTP/2 cut the binder's CPU per pod by 12–15% but bound 5% fewer pods per second, and
//! the raw Bindings 6% fewer (etcd committed the same writes in smaller batches: 3.8–3.9 fsyncs per
//! pod instead of 2.1–2.2); docs/performance-cluster.md has the figures. A kubeconfig that needs what this stack does
//! not carry (a proxy, client certificates from an exec plugin, whose expiry kube-rs tracks) gets
//! kube-rs's default client.

use std::time::Duration;

use http::{Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::{Body, ConfigExt};
use kube::{Client, Config};
use tower::{BoxError, ServiceBuilder};
use tower_http::trace::TraceLayer;
use tracing::Span;

/// client-go's `readIdleTimeoutSeconds`: ping the connection after this long without a frame.
const READ_IDLE: Duration = Duration::from_secs(30);
/// client-go's `pingTimeoutSeconds`: drop the connection when a ping is not answered in this long.
const PING_TIMEOUT: Duration = Duration::from_secs(15);

/// Which protocols the client offers the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocols {
    /// `h2` and `http/1.1` by ALPN, as client-go's.
    Http2,
    /// HTTP/1.1 only: kube-rs's default client (the default).
    Http1,
}

impl Protocols {
    /// [`Protocols::Http2`] when `http2`, else [`Protocols::Http1`].
    pub fn http2_if(http2: bool) -> Self {
        if http2 {
            Protocols::Http2
        } else {
            Protocols::Http1
        }
    }
}

/// A client for `config` offering `protocols` (see the module doc).
pub fn client(config: Config, protocols: Protocols) -> Result<Client, kube::Error> {
    let exec_certificates = config.auth_info.exec.is_some();
    if protocols == Protocols::Http1 || config.proxy_url.is_some() || exec_certificates {
        return Client::try_from(config);
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(config.connect_timeout);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_or_http();
    let https = match config.tls_server_name.as_deref() {
        Some(name) => {
            let name = rustls_pki_types::ServerName::try_from(name.to_string())
                .map_err(|e| kube::Error::Service(format!("tls-server-name {name:?}: {e}").into()))?;
            https
                .with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
                .enable_all_versions()
                .wrap_connector(http)
        }
        None => https.enable_all_versions().wrap_connector(http),
    };
    let mut connector = hyper_timeout::TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let hyper = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .http2_keep_alive_interval(READ_IDLE)
        .http2_keep_alive_timeout(PING_TIMEOUT)
        .build::<_, Body>(connector);
    let retry = config
        .default_retry
        .then(|| tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry()));
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .layer(
            // kube-rs's request span, so traces and debug logs read as with its default client.
            TraceLayer::new_for_http()
                .make_span_with(|req: &Request<Body>| {
                    tracing::debug_span!(
                        "HTTP",
                        http.method = %req.method(),
                        http.url = %req.uri(),
                        http.status_code = tracing::field::Empty,
                        otel.name = req.extensions().get::<&'static str>().unwrap_or(&"HTTP"),
                        otel.kind = "client",
                        otel.status_code = tracing::field::Empty,
                    )
                })
                .on_request(())
                .on_response(|res: &Response<hyper::body::Incoming>, _: Duration, span: &Span| {
                    let status = res.status();
                    span.record("http.status_code", status.as_u16());
                    if status.is_client_error() || status.is_server_error() {
                        span.record("otel.status_code", "ERROR");
                    }
                })
                .on_body_chunk(())
                .on_eos(())
                .on_failure(
                    |_: tower_http::classify::ServerErrorsFailureClass, _: Duration, span: &Span| {
                        span.record("otel.status_code", "ERROR");
                    },
                ),
        )
        .map_err(BoxError::from)
        .service(hyper);
    Ok(Client::new(service, config.default_namespace))
}

#[cfg(test)]
#[path = "transport_tests.rs"]
mod tests;
