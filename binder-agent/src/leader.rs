//! Leader election on a `coordination.k8s.io/v1` Lease (kube-lease-manager), so that of several
//! binders only one binds at a time; the others keep their caches warm and take over when the
//! lease expires or is released.
//!
//! [`Leadership`] publishes `true` while this binder holds the lease on a watch channel the
//! [`crate::Binder`] reads before every batch and every bind, and mirrors it in `binder_leader`.
//! An API error while holding the lease is treated as losing it (`false` at once, well before
//! the lease can expire and another binder take it); the manager is then rebuilt, and if the lease
//! still names this identity it is held again at once. [`Leadership::release`] gives the lease up
//! on shutdown, after the binder stopped binding, so a successor need not wait out the duration.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::metrics::BinderMetrics;

/// Longest wait for the lease release on shutdown.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest pause between attempts after API errors: client-go's leader election retries every
/// `RetryPeriod` (kube-scheduler's default 2 s), so leadership comes back within that of the API
/// server's return.
const MAX_RETRY: Duration = Duration::from_secs(2);

/// Which lease, and how it is held.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// `holderIdentity`: unique among binders.
    pub identity: String,
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub lease_name: String,
    /// `leaseDurationSeconds`: how long the lease stays valid without renewal.
    pub duration_secs: u64,
    /// How long before expiry the holder renews.
    pub grace_secs: u64,
}

impl Default for LeaderConfig {
    fn default() -> Self {
        Self {
            identity: "placement-binder".into(),
            namespace: "default".into(),
            lease_name: "placement-binder".into(),
            duration_secs: 15,
            grace_secs: 5,
        }
    }
}

/// Why leader election could not start.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// Duration and grace are not both positive with grace below duration.
    #[error("lease duration ({duration}s) and grace ({grace}s) must be positive, with grace < duration")]
    Timing {
        /// Seconds.
        duration: u64,
        /// Seconds.
        grace: u64,
    },
    /// Identity, namespace or lease name is empty.
    #[error("lease {0} must not be empty")]
    Empty(&'static str),
}

/// Whether this binder leads: a watch channel, and the task keeping the lease.
#[derive(Debug)]
pub struct Leadership {
    receiver: watch::Receiver<bool>,
    /// Kept for [`Leadership::always`]: the channel must stay open while the binder runs.
    _sender: Option<watch::Sender<bool>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Leadership {
    /// Always the leader (`--no-leader-elect`, a single binder).
    pub fn always(metrics: &BinderMetrics) -> Self {
        let (sender, receiver) = watch::channel(true);
        metrics.leader.set(1);
        Self {
            receiver,
            _sender: Some(sender),
            stop: None,
            task: None,
        }
    }

    /// Starts campaigning for the lease in the background.
    pub fn elect(client: Client, config: LeaderConfig, metrics: Arc<BinderMetrics>) -> Result<Self, LeaderError> {
        if config.duration_secs == 0 || config.grace_secs == 0 || config.grace_secs >= config.duration_secs {
            return Err(LeaderError::Timing {
                duration: config.duration_secs,
                grace: config.grace_secs,
            });
        }
        for (what, value) in [
            ("identity", &config.identity),
            ("namespace", &config.namespace),
            ("name", &config.lease_name),
        ] {
            if value.is_empty() {
                return Err(LeaderError::Empty(what));
            }
        }
        let (sender, receiver) = watch::channel(false);
        metrics.leader.set(0);
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(campaign(client, config, metrics, sender, stopped));
        Ok(Self {
            receiver,
            _sender: None,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// `true` while this binder holds the lease.
    pub fn receiver(&self) -> watch::Receiver<bool> {
        self.receiver.clone()
    }

    /// Whether this binder holds the lease now.
    pub fn is_leader(&self) -> bool {
        *self.receiver.borrow()
    }

    /// Stops campaigning and releases the lease if held. Call after the binder stopped binding.
    pub async fn release(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

fn build(client: &Client, config: &LeaderConfig) -> LeaseManagerBuilder {
    LeaseManagerBuilder::new(client.clone(), &config.lease_name)
        .with_namespace(&config.namespace)
        .with_identity(&config.identity)
        .with_duration(config.duration_secs)
        .with_grace(config.grace_secs)
        .with_field_manager(field_manager(&config.identity))
}

/// `placement-binder-{identity}`, cut to the API's 128-byte limit on field managers.
fn field_manager(identity: &str) -> String {
    let mut name = format!("placement-binder-{identity}");
    let mut end = name.len().min(128);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name.truncate(end);
    name
}

async fn campaign(
    client: Client,
    config: LeaderConfig,
    metrics: Arc<BinderMetrics>,
    sender: watch::Sender<bool>,
    mut stop: oneshot::Receiver<()>,
) {
    let set = |leading: bool| {
        let was = sender.send_replace(leading);
        metrics.leader.set(i64::from(leading));
        if was != leading {
            if leading {
                tracing::info!(identity = %config.identity, lease = %config.lease_name, "became the leader");
            } else {
                tracing::warn!(identity = %config.identity, lease = %config.lease_name, "no longer the leader");
            }
        }
    };
    let mut retry = Duration::from_secs(1);
    loop {
        let built = tokio::select! {
            biased;
            _ = &mut stop => return,
            m = build(&client, &config).build() => m,
        };
        match built {
            Ok(manager) => {
                if hold(&manager, &set, &mut stop, &mut retry).await {
                    set(false);
                    match tokio::time::timeout(RELEASE_TIMEOUT, manager.release()).await {
                        Ok(Ok(())) => tracing::info!(lease = %config.lease_name, "lease released"),
                        Ok(Err(e)) => tracing::warn!(error = %e, "releasing the lease failed"),
                        Err(_) => tracing::warn!("releasing the lease timed out"),
                    }
                    return;
                }
            }
            Err(e) => tracing::warn!(error = %e, lease = %config.lease_name, "cannot set up the lease; retrying"),
        }
        tokio::select! {
            biased;
            _ = &mut stop => return,
            () = tokio::time::sleep(retry) => {}
        }
        retry = (retry * 2).min(MAX_RETRY);
    }
}

/// Follows the lease until told to stop (returns true) or an API error (false, leadership given up).
async fn hold(
    manager: &LeaseManager,
    set: &impl Fn(bool),
    stop: &mut oneshot::Receiver<()>,
    retry: &mut Duration,
) -> bool {
    loop {
        tokio::select! {
            biased;
            _ = &mut *stop => return true,
            changed = manager.changed() => match changed {
                Ok(leading) => {
                    set(leading);
                    *retry = Duration::from_secs(1);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "lease error: giving up leadership until it is confirmed again");
                    set(false);
                    return false;
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn always_leads_and_keeps_the_channel_open() {
        let metrics = BinderMetrics::new();
        let l = Leadership::always(&metrics);
        let mut rx = l.receiver();
        assert!(*rx.borrow_and_update());
        assert!(l.is_leader());
        assert_eq!(metrics.leader.get(), 1);
        // The sender lives as long as the leadership: waiting for a change does not end at once.
        let pending = tokio::time::timeout(Duration::from_millis(20), rx.changed()).await;
        assert!(pending.is_err());
        l.release().await;
    }

    #[test]
    fn field_managers_fit_the_api_limit() {
        assert_eq!(field_manager("b-0"), "placement-binder-b-0");
        assert_eq!(field_manager(&"x".repeat(300)).len(), 128);
    }

    #[tokio::test]
    async fn bad_timing_is_refused() {
        let (service, _handle) = tower_test::mock::pair::<
            axum::http::Request<kube::client::Body>,
            axum::http::Response<kube::client::Body>,
        >();
        let client = Client::new(service, "default");
        let config = LeaderConfig {
            duration_secs: 5,
            grace_secs: 5,
            ..Default::default()
        };
        let err = Leadership::elect(client, config, Arc::new(BinderMetrics::new())).unwrap_err();
        assert!(matches!(err, LeaderError::Timing { .. }));
    }
}
