//! Decision replicas: endpoints from a static list or a DNS name (a headless Service), re-resolved;
//! least-loaded of two random choices among ready replicas; failing replicas taken out for a while.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use placement_scheduler::proto;
use placement_scheduler::proto::placement_service_client::PlacementServiceClient;
use tokio::time::Instant;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// Where decision replicas are found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointSource {
    /// A fixed list of `http://host:port` URLs (with TLS, `http://` is taken as `https://`).
    Static(Vec<String>),
    /// A DNS name and port; every address it resolves to is a replica (a headless Service).
    Dns {
        /// Host name.
        host: String,
        /// gRPC port.
        port: u16,
    },
}

/// Timeouts and ejection of replicas.
#[derive(Debug, Clone)]
pub struct ReplicaConfig {
    /// Deadline of each call to a replica.
    pub call_timeout: Duration,
    /// How long a replica that failed is taken out (doubled per consecutive failure, up to 8×).
    pub eject_for: Duration,
    /// Largest message sent or received.
    pub max_message_bytes: usize,
    /// Pods per message of a full snapshot sync: the first message carries every node (and the
    /// namespaces, budgets and storage objects) with the first pods, deltas on it the rest, so
    /// no message or decoded copy holds a million pods at once.
    pub full_sync_chunk_pods: usize,
    /// Nodes per message of a full sync: the first carries this many, deltas on it the rest
    /// (before the pods). A replica's request budget (`--request-memory-bytes`, 1.25 GiB by
    /// default) refuses a message with 50,000 nodes.
    pub full_sync_chunk_nodes: usize,
    /// TLS to the replicas; `None` speaks plaintext HTTP/2.
    pub tls: Option<ClientTls>,
}

/// TLS to the decision replicas, as PEM.
#[derive(Clone)]
pub struct ClientTls {
    /// CA certificates (PEM) the replicas' certificates must chain to.
    pub ca_pem: Vec<u8>,
    /// Client certificate chain (PEM) for mutual TLS; needs `key_pem`.
    pub cert_pem: Option<Vec<u8>>,
    /// Private key (PEM) of `cert_pem`.
    pub key_pem: Option<Vec<u8>>,
    /// The name the replicas' certificates are verified against. Needed with DNS discovery, which
    /// connects to IP addresses; `None` verifies the host of each endpoint URL.
    pub domain: Option<String>,
}

impl std::fmt::Debug for ClientTls {
    // Never prints the private key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("ca_pem", &format_args!("{} bytes", self.ca_pem.len()))
            .field("client_certificate", &self.cert_pem.is_some())
            .field("domain", &self.domain)
            .finish()
    }
}

impl ClientTls {
    /// The TLS settings for tonic.
    pub(crate) fn to_tonic(&self) -> ClientTlsConfig {
        let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&self.ca_pem));
        if let (Some(cert), Some(key)) = (&self.cert_pem, &self.key_pem) {
            config = config.identity(Identity::from_pem(cert, key));
        }
        if let Some(domain) = &self.domain {
            config = config.domain_name(domain.clone());
        }
        config
    }
}

/// `endpoint` with the scheme TLS needs: `http://` becomes `https://` when `tls` is set.
pub(crate) fn with_scheme(endpoint: &str, tls: bool) -> String {
    match endpoint.strip_prefix("http://") {
        Some(rest) if tls => format!("https://{rest}"),
        _ => endpoint.to_string(),
    }
}

impl Default for ReplicaConfig {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(10),
            eject_for: Duration::from_secs(2),
            max_message_bytes: 256 << 20,
            full_sync_chunk_pods: 50_000,
            full_sync_chunk_nodes: 5_000,
            tls: None,
        }
    }
}

/// The snapshot a replica holds, and which of the binder's state it reflects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldSnapshot {
    /// Its id on the replica.
    pub id: String,
    /// It reflects every change of the state up to this version...
    pub version: u64,
    /// ...and also the changes logged in `(from, to]` after it: the placements of a batch the
    /// replica assumed itself (`ScheduleRequest.assume`), made while other changes were logged.
    /// The next delta leaves these out.
    pub assumed_range: Option<(u64, u64)>,
}

impl HeldSnapshot {
    /// A snapshot that reflects the state at `version` exactly.
    pub fn at(id: String, version: u64) -> Self {
        Self {
            id,
            version,
            assumed_range: None,
        }
    }
}

/// One decision replica.
#[derive(Debug)]
pub struct Replica {
    /// Its URL (`https://` with TLS).
    pub endpoint: String,
    client: PlacementServiceClient<Channel>,
    channel: Channel,
    inflight: AtomicUsize,
    failures: AtomicU32,
    ejected_until: Mutex<Option<Instant>>,
    /// The snapshot this replica holds, and the state it reflects.
    pub synced: Mutex<Option<HeldSnapshot>>,
    /// Calls that failed on this replica.
    pub errors: AtomicU64,
}

impl Replica {
    fn new(endpoint: String, config: &ReplicaConfig) -> Result<Self, tonic::transport::Error> {
        let mut channel = Endpoint::from_shared(endpoint.clone())?
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(30));
        if let Some(tls) = &config.tls {
            channel = channel.tls_config(tls.to_tonic())?;
        }
        let channel = channel.connect_lazy();
        Ok(Self {
            channel: channel.clone(),
            client: PlacementServiceClient::new(channel)
                .max_decoding_message_size(config.max_message_bytes)
                .max_encoding_message_size(config.max_message_bytes),
            endpoint,
            inflight: AtomicUsize::new(0),
            failures: AtomicU32::new(0),
            ejected_until: Mutex::new(None),
            synced: Mutex::new(None),
            errors: AtomicU64::new(0),
        })
    }

    /// A client for one call; the guard counts the call as in flight while it lives.
    pub fn client(self: &Arc<Self>) -> (PlacementServiceClient<Channel>, InFlight) {
        self.inflight.fetch_add(1, Ordering::Relaxed);
        (self.client.clone(), InFlight(Arc::clone(self)))
    }

    /// A SyncSnapshot call whose delta upserts pods already protobuf-encoded: the bytes go on
    /// the wire as they are, never decoded into messages on this side. Returns the id of the
    /// snapshot the replica built.
    pub async fn sync_encoded(
        self: &Arc<Self>,
        delta: EncodedPodsDelta,
        config: &ReplicaConfig,
    ) -> Result<String, tonic::Status> {
        let _inflight = {
            self.inflight.fetch_add(1, Ordering::Relaxed);
            InFlight(Arc::clone(self))
        };
        let mut grpc = tonic::client::Grpc::new(self.channel.clone())
            .max_decoding_message_size(config.max_message_bytes)
            .max_encoding_message_size(config.max_message_bytes);
        grpc.ready()
            .await
            .map_err(|e| tonic::Status::unavailable(format!("decision replica not ready: {e}")))?;
        let mut req = tonic::Request::new(delta);
        req.set_timeout(config.call_timeout);
        placement_scheduler::telemetry::inject_current(req.metadata_mut());
        let path = tonic::codegen::http::uri::PathAndQuery::from_static("/placement.v1.PlacementService/SyncSnapshot");
        let codec = tonic_prost::ProstCodec::<EncodedPodsDelta, proto::SyncSnapshotResponse>::default();
        Ok(grpc.unary(req, path, codec).await?.into_inner().snapshot_id)
    }

    fn ready(&self, now: Instant) -> bool {
        self.ejected_until.lock().is_none_or(|t| now >= t)
    }

    /// Records a failed call: the replica is taken out for a while and its snapshot forgotten.
    pub fn failed(&self, config: &ReplicaConfig) {
        let n = self.failures.fetch_add(1, Ordering::Relaxed).min(3);
        *self.ejected_until.lock() = Some(Instant::now() + config.eject_for * (1 << n));
        *self.synced.lock() = None;
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a successful call.
    pub fn succeeded(&self) {
        self.failures.store(0, Ordering::Relaxed);
        *self.ejected_until.lock() = None;
    }
}

/// A `SyncSnapshotRequest` holding a delta on `base_snapshot_id` that upserts `pods`, each the
/// protobuf encoding of a `proto::Pod` as the binder's state stores it. It encodes to exactly the
/// bytes of the generated message with those pods decoded (`delta` is field 2 of the request,
/// `base_snapshot_id` field 1 and `upsert_pods` field 4 of the delta); it is only ever sent.
#[derive(Debug, Default, Clone)]
pub struct EncodedPodsDelta {
    /// The snapshot the pods are added to.
    pub base_snapshot_id: String,
    /// The pods, encoded.
    pub pods: Vec<Arc<[u8]>>,
}

/// `SyncSnapshotRequest.delta`.
const REQUEST_DELTA: u32 = 2;
/// `SnapshotDelta.base_snapshot_id`.
const DELTA_BASE: u32 = 1;
/// `SnapshotDelta.upsert_pods`.
const DELTA_UPSERT_PODS: u32 = 4;

impl EncodedPodsDelta {
    fn delta_len(&self) -> usize {
        use prost::encoding::{encoded_len_varint, key_len, string};
        let base = if self.base_snapshot_id.is_empty() {
            0
        } else {
            string::encoded_len(DELTA_BASE, &self.base_snapshot_id)
        };
        base + self
            .pods
            .iter()
            .map(|p| key_len(DELTA_UPSERT_PODS) + encoded_len_varint(p.len() as u64) + p.len())
            .sum::<usize>()
    }
}

impl prost::Message for EncodedPodsDelta {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        use prost::encoding::{encode_key, encode_varint, string, WireType};
        encode_key(REQUEST_DELTA, WireType::LengthDelimited, buf);
        encode_varint(self.delta_len() as u64, buf);
        if !self.base_snapshot_id.is_empty() {
            string::encode(DELTA_BASE, &self.base_snapshot_id, buf);
        }
        for p in &self.pods {
            encode_key(DELTA_UPSERT_PODS, WireType::LengthDelimited, buf);
            encode_varint(p.len() as u64, buf);
            buf.put_slice(p);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: prost::encoding::WireType,
        buf: &mut impl prost::bytes::Buf,
        ctx: prost::encoding::DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        // Never decoded: a request is only sent.
        prost::encoding::skip_field(wire_type, tag, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        use prost::encoding::{encoded_len_varint, key_len};
        let delta = self.delta_len();
        key_len(REQUEST_DELTA) + encoded_len_varint(delta as u64) + delta
    }

    fn clear(&mut self) {
        *self = Self::default();
    }
}

/// Counts a call as in flight on a replica until dropped.
#[derive(Debug)]
pub struct InFlight(Arc<Replica>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.inflight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The set of decision replicas.
#[derive(Debug)]
pub struct ReplicaPool {
    source: EndpointSource,
    /// Timeouts and ejection.
    pub config: ReplicaConfig,
    replicas: RwLock<Vec<Arc<Replica>>>,
    rng: AtomicU64,
}

/// Why the replica set could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// An endpoint URL is invalid.
    #[error("invalid decision endpoint {endpoint:?}: {source}")]
    Endpoint {
        /// The URL.
        endpoint: String,
        /// Why.
        source: tonic::transport::Error,
    },
    /// The DNS name did not resolve.
    #[error("resolving {host}: {source}")]
    Resolve {
        /// The name.
        host: String,
        /// Why.
        source: std::io::Error,
    },
}

impl ReplicaPool {
    /// A pool for `source`; call [`ReplicaPool::refresh`] to resolve a DNS source.
    pub fn new(source: EndpointSource, config: ReplicaConfig) -> Result<Self, ReplicaError> {
        let pool = Self {
            source,
            config,
            replicas: RwLock::new(Vec::new()),
            rng: AtomicU64::new(0x9e37_79b9_7f4a_7c15),
        };
        if let EndpointSource::Static(list) = &pool.source {
            pool.set(list.clone())?;
        }
        Ok(pool)
    }

    fn set(&self, endpoints: Vec<String>) -> Result<(), ReplicaError> {
        let tls = self.config.tls.is_some();
        let wanted: HashSet<String> = endpoints.iter().map(|e| with_scheme(e, tls)).collect();
        let mut current = self.replicas.write();
        current.retain(|r| wanted.contains(&r.endpoint));
        let have: HashSet<String> = current.iter().map(|r| r.endpoint.clone()).collect();
        let mut added: Vec<&String> = wanted.iter().filter(|e| !have.contains(*e)).collect();
        added.sort();
        for e in added {
            let r = Replica::new(e.clone(), &self.config).map_err(|source| ReplicaError::Endpoint {
                endpoint: e.clone(),
                source,
            })?;
            current.push(Arc::new(r));
        }
        current.sort_by(|a, b| a.endpoint.cmp(&b.endpoint));
        Ok(())
    }

    /// Re-resolves a DNS source (a no-op for a static list).
    pub async fn refresh(&self) -> Result<(), ReplicaError> {
        let EndpointSource::Dns { host, port } = &self.source else {
            return Ok(());
        };
        let addrs = tokio::net::lookup_host((host.as_str(), *port))
            .await
            .map_err(|source| ReplicaError::Resolve {
                host: host.clone(),
                source,
            })?;
        let scheme = if self.config.tls.is_some() { "https" } else { "http" };
        let endpoints = addrs.map(|a| format!("{scheme}://{a}")).collect();
        self.set(endpoints)
    }

    /// Every replica.
    pub fn all(&self) -> Vec<Arc<Replica>> {
        self.replicas.read().clone()
    }

    fn next_random(&self) -> u64 {
        let x = self.rng.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Picks a ready replica not in `tried`: the least loaded (calls in flight), ties broken at
    /// random, so batches decided at once go to different replicas. When every untried replica
    /// is out, one of them is used rather than none.
    pub fn pick(&self, tried: &[String]) -> Option<Arc<Replica>> {
        let now = Instant::now();
        let all = self.replicas.read();
        let untried: Vec<&Arc<Replica>> = all.iter().filter(|r| !tried.contains(&r.endpoint)).collect();
        let ready: Vec<&Arc<Replica>> = untried.iter().copied().filter(|r| r.ready(now)).collect();
        let pool = if ready.is_empty() { untried } else { ready };
        let load = |r: &Replica| r.inflight.load(Ordering::Relaxed);
        let least = pool.iter().map(|r| load(r)).min()?;
        let candidates: Vec<&Arc<Replica>> = pool.into_iter().filter(|r| load(r) == least).collect();
        let i = (self.next_random() % candidates.len() as u64) as usize;
        Some(Arc::clone(candidates[i]))
    }

    /// Number of replicas not currently taken out.
    pub fn ready_count(&self) -> usize {
        let now = Instant::now();
        self.replicas.read().iter().filter(|r| r.ready(now)).count()
    }

    /// The lowest state version every replica has synced (0 if one never synced).
    pub fn min_synced_version(&self) -> u64 {
        self.replicas
            .read()
            .iter()
            .map(|r| r.synced.lock().as_ref().map_or(0, |h| h.version))
            .min()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_pods_delta_is_the_generated_request_byte_for_byte() {
        use prost::Message as _;
        let pods: Vec<proto::Pod> = (0..3)
            .map(|i| proto::Pod {
                uid: format!("u{i}"),
                name: format!("p{i}"),
                namespace: "ns".into(),
                node_name: "n1".into(),
                labels: [("app".to_string(), "web".to_string())].into(),
                ..Default::default()
            })
            .collect();
        for base in ["", "base-id"] {
            let encoded = EncodedPodsDelta {
                base_snapshot_id: base.into(),
                pods: pods.iter().map(|p| p.encode_to_vec().into()).collect(),
            };
            let generated = proto::SyncSnapshotRequest {
                kind: Some(proto::sync_snapshot_request::Kind::Delta(proto::SnapshotDelta {
                    base_snapshot_id: base.into(),
                    upsert_pods: pods.clone(),
                    ..Default::default()
                })),
            };
            assert_eq!(encoded.encode_to_vec(), generated.encode_to_vec(), "base {base:?}");
            assert_eq!(encoded.encoded_len(), generated.encoded_len());
            assert_eq!(
                proto::SyncSnapshotRequest::decode(&encoded.encode_to_vec()[..]).unwrap(),
                generated
            );
        }
        let empty = EncodedPodsDelta::default();
        let generated = proto::SyncSnapshotRequest {
            kind: Some(proto::sync_snapshot_request::Kind::Delta(
                proto::SnapshotDelta::default(),
            )),
        };
        assert_eq!(empty.encode_to_vec(), generated.encode_to_vec());
    }

    fn pool(n: usize) -> ReplicaPool {
        let list = (0..n).map(|i| format!("http://127.0.0.1:{}", 1000 + i)).collect();
        ReplicaPool::new(EndpointSource::Static(list), ReplicaConfig::default()).unwrap()
    }

    #[tokio::test]
    async fn failed_replicas_are_skipped_while_others_are_ready() {
        let p = pool(3);
        let bad = p.all()[0].clone();
        bad.failed(&p.config);
        for _ in 0..50 {
            assert_ne!(p.pick(&[]).unwrap().endpoint, bad.endpoint);
        }
        assert_eq!(p.ready_count(), 2);
        bad.succeeded();
        assert_eq!(p.ready_count(), 3);
    }

    #[tokio::test]
    async fn tried_replicas_are_excluded_and_loads_balance() {
        let p = pool(2);
        let first = p.pick(&[]).unwrap();
        let second = p.pick(std::slice::from_ref(&first.endpoint)).unwrap();
        assert_ne!(first.endpoint, second.endpoint);
        assert!(p.pick(&[first.endpoint.clone(), second.endpoint.clone()]).is_none());
        // The busier replica loses the two-choice draw whenever both are drawn.
        let _busy = (0..5).map(|_| first.client().1).collect::<Vec<_>>();
        let picks = (0..100)
            .filter(|_| p.pick(&[]).unwrap().endpoint == first.endpoint)
            .count();
        assert!(picks < 50, "busy replica picked {picks}/100 times");
    }

    #[tokio::test]
    async fn when_all_are_out_one_is_still_tried() {
        let p = pool(2);
        for r in p.all() {
            r.failed(&p.config);
        }
        assert!(p.pick(&[]).is_some());
    }

    #[tokio::test]
    async fn tls_endpoints_use_https() {
        let config = ReplicaConfig {
            tls: Some(ClientTls {
                ca_pem: Vec::new(),
                cert_pem: None,
                key_pem: None,
                domain: Some("placement-decision".into()),
            }),
            ..ReplicaConfig::default()
        };
        let list = vec!["http://127.0.0.1:1".to_string(), "https://127.0.0.1:2".to_string()];
        let p = ReplicaPool::new(EndpointSource::Static(list), config).unwrap();
        let endpoints: Vec<String> = p.all().iter().map(|r| r.endpoint.clone()).collect();
        assert_eq!(endpoints, ["https://127.0.0.1:1", "https://127.0.0.1:2"]);
        assert_eq!(with_scheme("http://a:1", false), "http://a:1");
    }

    #[tokio::test]
    async fn dns_source_resolves_every_address() {
        let p = ReplicaPool::new(
            EndpointSource::Dns {
                host: "localhost".into(),
                port: 50051,
            },
            ReplicaConfig::default(),
        )
        .unwrap();
        p.refresh().await.unwrap();
        assert!(!p.all().is_empty());
        assert!(p.all().iter().all(|r| r.endpoint.ends_with(":50051")));
    }
}
