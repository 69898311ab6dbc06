//! TLS and mutual TLS of the gRPC link, over real sockets: the decision service
//! (`ServerConfig::tls`) and the binder's replica pool (`ReplicaConfig::tls`), with certificates
//! made in-process by rcgen: a CA, a server certificate for `localhost` / 127.0.0.1, a client
//! certificate from that CA and one from an unrelated CA.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use placement_binder::replicas::{ClientTls, EndpointSource, ReplicaConfig, ReplicaPool};
use placement_scheduler::grpc::{serve, Metrics, ServeError, ServerConfig, ServerTls};
use placement_scheduler::proto;
use placement_scheduler::proto::placement_service_client::PlacementServiceClient;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

const CALL: Duration = Duration::from_secs(10);

/// A certificate and its key, PEM.
struct Pem {
    cert: String,
    key: String,
}

/// A CA that signs leaf certificates.
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Self {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    fn leaf(&self, names: &[&str], usage: ExtendedKeyUsagePurpose) -> Pem {
        let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, names[0]);
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Pem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}

/// Every certificate of the tests.
struct Pki {
    ca: Ca,
    server: Pem,
    client: Pem,
    stranger: Pem,
}

fn pki() -> Pki {
    let ca = Ca::new("placement test CA");
    let server = ca.leaf(&["localhost", "127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth);
    let client = ca.leaf(&["placement-binder"], ExtendedKeyUsagePurpose::ClientAuth);
    let stranger = Ca::new("another CA").leaf(&["placement-binder"], ExtendedKeyUsagePurpose::ClientAuth);
    Pki {
        ca,
        server,
        client,
        stranger,
    }
}

type ServerHandle = JoinHandle<Result<(), ServeError>>;

fn server_tls(pki: &Pki, mutual: bool) -> ServerTls {
    ServerTls {
        cert_pem: pki.server.cert.clone().into_bytes(),
        key_pem: pki.server.key.clone().into_bytes(),
        client_ca_pem: mutual.then(|| pki.ca.pem.clone().into_bytes()),
    }
}

async fn start(tls: ServerTls) -> (SocketAddr, oneshot::Sender<()>, ServerHandle) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let config = ServerConfig {
        tls: Some(tls),
        ..ServerConfig::default()
    };
    let handle = tokio::spawn(serve(listener, config, Arc::new(Metrics::new()), async move {
        let _ = rx.await;
    }));
    (addr, tx, handle)
}

async fn stop(tx: oneshot::Sender<()>, handle: ServerHandle) {
    let _ = tx.send(());
    tokio::time::timeout(Duration::from_secs(20), handle)
        .await
        .expect("server stops")
        .expect("server task")
        .expect("server returns Ok");
}

/// A lazy channel to `url`, with `tls` if given (lazy: a refused handshake shows as a failed call).
fn channel(url: String, tls: Option<ClientTlsConfig>) -> Channel {
    let mut endpoint = Channel::from_shared(url).unwrap().connect_timeout(CALL);
    if let Some(tls) = tls {
        endpoint = endpoint.tls_config(tls).unwrap();
    }
    endpoint.connect_lazy()
}

fn trusting(pki: &Pki) -> ClientTlsConfig {
    ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&pki.ca.pem))
}

fn with_identity(config: ClientTlsConfig, pem: &Pem) -> ClientTlsConfig {
    config.identity(Identity::from_pem(&pem.cert, &pem.key))
}

/// A health check of the whole server, then ListPolicies.
async fn health_and_policies(channel: Channel) -> Result<Vec<String>, tonic::Status> {
    let calls = async {
        let health = HealthClient::new(channel.clone())
            .check(HealthCheckRequest { service: String::new() })
            .await?
            .into_inner();
        assert_eq!(health.status, ServingStatus::Serving as i32);
        let policies = PlacementServiceClient::new(channel)
            .list_policies(proto::ListPoliciesRequest {})
            .await?
            .into_inner();
        Ok(policies.policies.into_iter().map(|p| p.name).collect())
    };
    tokio::time::timeout(CALL, calls)
        .await
        .unwrap_or_else(|_| Err(tonic::Status::deadline_exceeded("no answer within 10 s")))
}

/// Asserts the calls failed, for a reason whose debug form mentions `why` (the TLS alert or
/// verification error; a plaintext client only sees the connection closed).
fn assert_refused<T: std::fmt::Debug>(result: Result<T, tonic::Status>, why: &str) {
    match result {
        Ok(v) => panic!("served ({v:?}), expected a refusal: {why}"),
        Err(e) => assert!(format!("{e:?}").contains(why), "refused, but not for {why:?}: {e:?}"),
    }
}

#[tokio::test]
async fn tls_server_answers_a_client_that_trusts_its_ca_and_refuses_plaintext() {
    let pki = pki();
    let (addr, tx, handle) = start(server_tls(&pki, false)).await;

    // By IP (the certificate names 127.0.0.1) and by name.
    let by_ip = channel(format!("https://{addr}"), Some(trusting(&pki)));
    let policies = health_and_policies(by_ip).await.expect("TLS client served");
    assert_eq!(policies[0], "default");
    let by_name = channel(format!("https://{addr}"), Some(trusting(&pki).domain_name("localhost")));
    health_and_policies(by_name)
        .await
        .expect("TLS client (localhost) served");

    let plaintext = channel(format!("http://{addr}"), None);
    assert!(health_and_policies(plaintext).await.is_err(), "plaintext client served");
    // A client that does not trust the server's CA refuses it.
    let other_ca = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(Ca::new("x").pem));
    let result = health_and_policies(channel(format!("https://{addr}"), Some(other_ca))).await;
    assert_refused(result, "UnknownIssuer");
    // A name the certificate does not carry is refused.
    let wrong_name = trusting(&pki).domain_name("placement-decision.example");
    let result = health_and_policies(channel(format!("https://{addr}"), Some(wrong_name))).await;
    assert_refused(result, "not valid for name");
    stop(tx, handle).await;
}

#[tokio::test]
async fn mutual_tls_serves_only_clients_with_a_certificate_from_the_client_ca() {
    let pki = pki();
    let (addr, tx, handle) = start(server_tls(&pki, true)).await;
    let url = format!("https://{addr}");

    let anonymous = channel(url.clone(), Some(trusting(&pki)));
    assert_refused(health_and_policies(anonymous).await, "CertificateRequired");
    let stranger = channel(url.clone(), Some(with_identity(trusting(&pki), &pki.stranger)));
    assert_refused(health_and_policies(stranger).await, "UnknownCA");
    let plaintext = channel(format!("http://{addr}"), None);
    assert!(health_and_policies(plaintext).await.is_err(), "plaintext client served");

    let known = channel(url, Some(with_identity(trusting(&pki), &pki.client)));
    let policies = health_and_policies(known).await.expect("client of the CA served");
    assert_eq!(policies[0], "default");
    stop(tx, handle).await;
}

#[tokio::test]
async fn binder_replica_pool_reaches_a_mutual_tls_server() {
    let pki = pki();
    let (addr, tx, handle) = start(server_tls(&pki, true)).await;
    let tls = ClientTls {
        ca_pem: pki.ca.pem.clone().into_bytes(),
        cert_pem: Some(pki.client.cert.clone().into_bytes()),
        key_pem: Some(pki.client.key.clone().into_bytes()),
        // As with DNS discovery: the pool dials an IP and verifies the service's name.
        domain: Some("localhost".into()),
    };
    let config = ReplicaConfig {
        tls: Some(tls.clone()),
        ..ReplicaConfig::default()
    };
    // An `http://` URL becomes `https://` under TLS.
    let pool = ReplicaPool::new(EndpointSource::Static(vec![format!("http://{addr}")]), config).unwrap();
    let replica = pool.pick(&[]).expect("a replica");
    assert_eq!(replica.endpoint, format!("https://{addr}"));
    let (mut client, _inflight) = replica.client();
    let policies = tokio::time::timeout(CALL, client.list_policies(proto::ListPoliciesRequest {}))
        .await
        .expect("answer within 10 s")
        .expect("ListPolicies over mutual TLS")
        .into_inner();
    assert_eq!(policies.default_policy, "default");

    // Without the client certificate the same pool is refused.
    let anonymous = ReplicaConfig {
        tls: Some(ClientTls {
            cert_pem: None,
            key_pem: None,
            ..tls
        }),
        ..ReplicaConfig::default()
    };
    let pool = ReplicaPool::new(EndpointSource::Static(vec![format!("http://{addr}")]), anonymous).unwrap();
    let (mut client, _inflight) = pool.pick(&[]).expect("a replica").client();
    let refused = tokio::time::timeout(CALL, client.list_policies(proto::ListPoliciesRequest {}))
        .await
        .expect("answer within 10 s");
    assert_refused(refused, "CertificateRequired");
    stop(tx, handle).await;
}

#[tokio::test]
async fn bad_tls_material_is_a_clear_error_at_start() {
    let pki = pki();
    let not_pem = ServerTls {
        cert_pem: b"not a certificate".to_vec(),
        ..server_tls(&pki, false)
    };
    let (_addr, _tx, handle) = start(not_pem).await;
    let err = handle.await.unwrap().expect_err("bad certificate accepted");
    assert!(matches!(err, ServeError::Tls(_)), "{err:?}");
    assert!(err.to_string().contains("certificate"), "{err}");

    // A key that does not belong to the certificate.
    let mismatched = ServerTls {
        key_pem: pki.client.key.clone().into_bytes(),
        ..server_tls(&pki, false)
    };
    let (_addr, _tx, handle) = start(mismatched).await;
    let err = handle.await.unwrap();
    assert!(matches!(err, Err(ServeError::Tls(_))), "{err:?}");
}
