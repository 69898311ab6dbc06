//! The transport against an HTTPS server over a real socket, with certificates made by rcgen and
//! a kubeconfig of client certificates (as `cluster.sh`'s admin kubeconfig): which protocol each
//! request arrived in, and on how many connections.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use http::{Response, Version};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use parking_lot::Mutex;
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;

use super::{client, Protocols};

/// What the server saw: TCP connections accepted and each request's HTTP version.
#[derive(Default)]
struct Seen {
    connections: AtomicUsize,
    versions: Mutex<Vec<Version>>,
}

struct Pki {
    dir: tempfile::TempDir,
    server_cert: String,
    server_key: String,
}

fn leaf(issuer: &Issuer<'static, KeyPair>, name: &str, usage: ExtendedKeyUsagePurpose) -> (String, String) {
    let mut params = CertificateParams::new(vec![name.to_string()]).expect("leaf params");
    params.distinguished_name.push(DnType::CommonName, name);
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().expect("leaf key");
    let cert = params.signed_by(&key, issuer).expect("leaf certificate");
    (cert.pem(), key.serialize_pem())
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, the CA and client ones in
/// files a kubeconfig names.
fn pki() -> Pki {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.distinguished_name.push(DnType::CommonName, "transport test CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().expect("CA key");
    let ca = params.self_signed(&key).expect("CA certificate").pem();
    let issuer = Issuer::new(params, key);
    let (server_cert, server_key) = leaf(&issuer, "127.0.0.1", ExtendedKeyUsagePurpose::ServerAuth);
    let (client_cert, client_key) = leaf(&issuer, "system:admin", ExtendedKeyUsagePurpose::ClientAuth);
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, pem) in [
        ("ca.crt", &ca),
        ("client.crt", &client_cert),
        ("client.key", &client_key),
    ] {
        std::fs::write(dir.path().join(name), pem).expect("writing a PEM");
    }
    Pki {
        dir,
        server_cert,
        server_key,
    }
}

/// An HTTPS server offering `alpn` that answers every request with a Pod, recording what it saw.
async fn serve(pki: &Pki, alpn: &[&[u8]]) -> (u16, Arc<Seen>) {
    let certs = CertificateDer::pem_slice_iter(pki.server_cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .expect("server certificate");
    let key = PrivateKeyDer::from_pem_slice(pki.server_key.as_bytes()).expect("server key");
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server TLS config");
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("local addr").port();
    let seen = Arc::new(Seen::default());
    let server_seen = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            server_seen.connections.fetch_add(1, Ordering::SeqCst);
            let (acceptor, seen) = (acceptor.clone(), server_seen.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    seen.versions.lock().push(req.version());
                    let name = req.uri().path().rsplit('/').next().unwrap_or_default().to_string();
                    let pod = serde_json::json!({
                        "apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": name, "namespace": "default"},
                    });
                    async move {
                        Ok::<_, Infallible>(
                            Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from(pod.to_string())))
                                .expect("response"),
                        )
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (port, seen)
}

async fn config(pki: &Pki, port: u16) -> kube::Config {
    let dir = pki.dir.path().display();
    let yaml = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: test\n\
         clusters:\n- name: test\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority: {dir}/ca.crt\n\
         users:\n- name: admin\n  user:\n    client-certificate: {dir}/client.crt\n    client-key: {dir}/client.key\n\
         contexts:\n- name: test\n  context:\n    cluster: test\n    user: admin\n"
    );
    let kc = Kubeconfig::from_yaml(&yaml).expect("kubeconfig");
    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config")
}

/// One request, then `n` at once: every name comes back.
async fn get_pods(client: kube::Client, n: usize) {
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let first = pods.get("warm-up").await.expect("first GET");
    assert_eq!(first.metadata.name.as_deref(), Some("warm-up"));
    let names: Vec<String> = (0..n).map(|i| format!("p-{i}")).collect();
    let got = futures::future::join_all(names.iter().map(|name| pods.get(name))).await;
    for (name, pod) in names.iter().zip(got) {
        assert_eq!(pod.expect("GET").metadata.name.as_deref(), Some(name.as_str()));
    }
}

#[tokio::test]
async fn requests_in_flight_share_one_http2_connection() {
    let pki = pki();
    let (port, seen) = serve(&pki, &[b"h2", b"http/1.1"]).await;
    let client = client(config(&pki, port).await, Protocols::Http2).expect("client");
    get_pods(client, 32).await;
    let versions = seen.versions.lock().clone();
    assert_eq!(versions.len(), 33);
    assert!(
        versions.iter().all(|v| *v == Version::HTTP_2),
        "every request in HTTP/2: {versions:?}"
    );
    assert_eq!(
        seen.connections.load(Ordering::SeqCst),
        1,
        "one connection for 33 requests"
    );
}

#[tokio::test]
async fn an_api_server_without_http2_is_spoken_to_in_http1() {
    let pki = pki();
    let (port, seen) = serve(&pki, &[b"http/1.1"]).await;
    let client = client(config(&pki, port).await, Protocols::Http2).expect("client");
    get_pods(client, 8).await;
    let versions = seen.versions.lock().clone();
    assert_eq!(versions.len(), 9);
    assert!(versions.iter().all(|v| *v == Version::HTTP_11), "{versions:?}");
}

#[tokio::test]
async fn http1_is_kube_rs_client_with_a_connection_per_request_in_flight() {
    let pki = pki();
    let (port, seen) = serve(&pki, &[b"h2", b"http/1.1"]).await;
    let client = client(config(&pki, port).await, Protocols::Http1).expect("client");
    get_pods(client, 8).await;
    let versions = seen.versions.lock().clone();
    assert_eq!(versions.len(), 9);
    assert!(versions.iter().all(|v| *v == Version::HTTP_11), "{versions:?}");
    // HTTP/1.1 holds a connection per request in flight.
    assert!(seen.connections.load(Ordering::SeqCst) > 1);
}
