//! Who answers Rank: a decision replica over gRPC (`--decision-address`), or the decision
//! service's own implementation in this process, so the command works with nothing deployed.
//! Either way the snapshot goes through SyncSnapshot once and each Rank names it by id.

use std::sync::Arc;
use std::time::Duration;

use placement_scheduler::grpc::{Metrics, PlacementApi, ServiceConfig};
use placement_scheduler::proto;
use placement_scheduler::proto::placement_service_client::PlacementServiceClient;
use placement_scheduler::proto::placement_service_server::PlacementService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};

use crate::replicas::{with_scheme, ClientTls};

/// Largest message sent or received (a full snapshot), as the binder's.
const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// Why a decider could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum DeciderError {
    /// The in-process service refused its configuration (its policies).
    #[error(transparent)]
    Config(#[from] placement_scheduler::grpc::service::ConfigError),
    /// The address is not a usable endpoint.
    #[error("--decision-address {address:?}: {source}")]
    Endpoint {
        /// The address given.
        address: String,
        /// Why it cannot be used.
        source: tonic::transport::Error,
    },
}

/// A decision service to ask.
#[derive(Clone)]
pub enum Decider {
    /// The decision service's implementation, called in this process.
    InProcess {
        /// The service.
        api: PlacementApi,
        /// What to call it in the output.
        label: String,
    },
    /// A decision replica over gRPC.
    Remote {
        /// Its URL.
        url: String,
        /// The client.
        client: PlacementServiceClient<Channel>,
    },
}

impl Decider {
    /// The decision service with `config`, in this process.
    pub fn in_process(config: ServiceConfig, label: impl Into<String>) -> Result<Self, DeciderError> {
        Ok(Self::InProcess {
            api: PlacementApi::new(config, Arc::new(Metrics::new()))?,
            label: label.into(),
        })
    }

    /// A decision replica at `address` (`http://host:port`; with `tls`, `https://`).
    pub fn remote(address: &str, tls: Option<&ClientTls>, timeout: Duration) -> Result<Self, DeciderError> {
        let url = with_scheme(address, tls.is_some());
        let endpoint_error = |source| DeciderError::Endpoint {
            address: address.to_string(),
            source,
        };
        let mut endpoint = Endpoint::from_shared(url.clone())
            .map_err(endpoint_error)?
            .connect_timeout(Duration::from_secs(5))
            .timeout(timeout)
            .tcp_nodelay(true);
        if let Some(tls) = tls {
            endpoint = endpoint.tls_config(tls.to_tonic()).map_err(endpoint_error)?;
        }
        let client = PlacementServiceClient::new(endpoint.connect_lazy())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(Self::Remote { url, client })
    }

    /// Who answers, for the output: `in-process engine` or `decision replica <url>`.
    pub fn describe(&self) -> String {
        match self {
            Self::InProcess { label, .. } => label.clone(),
            Self::Remote { url, .. } => format!("decision replica {url}"),
        }
    }

    /// Stores `snapshot`; returns its id.
    pub async fn sync(&self, snapshot: proto::Snapshot) -> Result<String, Status> {
        let req = proto::SyncSnapshotRequest {
            kind: Some(proto::sync_snapshot_request::Kind::Full(snapshot)),
        };
        let resp = match self {
            Self::InProcess { api, .. } => api.sync_snapshot(Request::new(req)).await?,
            Self::Remote { client, .. } => client.clone().sync_snapshot(req).await?,
        };
        Ok(resp.into_inner().snapshot_id)
    }

    /// Places a batch (a PodGroup's pods: the service runs kube's PodGroup cycle for them).
    pub async fn schedule(&self, req: proto::ScheduleRequest) -> Result<proto::ScheduleResponse, Status> {
        let resp = match self {
            Self::InProcess { api, .. } => api.schedule(Request::new(req)).await?,
            Self::Remote { client, .. } => client.clone().schedule(req).await?,
        };
        Ok(resp.into_inner())
    }

    /// Ranks a pod.
    pub async fn rank(&self, req: proto::RankRequest) -> Result<proto::RankResponse, Status> {
        let resp = match self {
            Self::InProcess { api, .. } => api.rank(Request::new(req)).await?,
            Self::Remote { client, .. } => client.clone().rank(req).await?,
        };
        Ok(resp.into_inner())
    }
}
