//! Scheduling failures reported as kube-scheduler reports them: the `PodScheduled` condition
//! (`Unschedulable` or `SchedulerError`) and the `FailedScheduling` event, retried through
//! transient API errors and a lost lease.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::Binder;
use crate::api::{ApiError, ClusterApi, PodRef};

/// How long a pod's scheduling failure (its `PodScheduled` condition and `FailedScheduling`
/// event) is retried through transient API errors and a lost lease (an API server restarting)
/// before the binder gives up writing it.
const REPORT_RETRY_FOR: Duration = Duration::from_secs(60);

/// The condition reason of a scheduling failure, as kube-scheduler's `handleSchedulingFailure`
/// chooses it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Failure {
    /// No node fits (`Unschedulable`).
    Unschedulable,
    /// The scheduling or binding cycle failed with an error (`SchedulerError`).
    SchedulerError,
}

impl<A: ClusterApi> Binder<A> {
    pub(super) fn spawn_unschedulable(&self, tasks: &mut JoinSet<()>, pod: PodRef, message: String) {
        let this = self.clone();
        tasks.spawn(async move { this.report_failure(&pod, Failure::Unschedulable, &message).await });
    }

    pub(super) fn spawn_scheduler_error(&self, tasks: &mut JoinSet<()>, pod: PodRef, message: String) {
        let this = self.clone();
        tasks.spawn(async move { this.report_failure(&pod, Failure::SchedulerError, &message).await });
    }

    /// Writes a pod's scheduling failure (condition and event) while this binder leads. A
    /// transient API error is retried with backoff, and a lost lease waited out, for up to
    /// [`REPORT_RETRY_FOR`]: a pod left unschedulable while the API server restarted still gets
    /// its condition. It stops once the pod is no longer queued (bound or deleted: the report is
    /// moot), is gone, or the binder stops.
    pub(super) async fn report_failure(&self, pod: &PodRef, failure: Failure, message: &str) {
        let s = &self.shared;
        let deadline = Instant::now() + REPORT_RETRY_FOR;
        let mut backoff = Duration::from_millis(200);
        let mut leader = s.leader.clone();
        loop {
            if s.stopping.load(Ordering::Relaxed) || !s.queue.lock().contains(&pod.uid) {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::warn!(pod = %pod.key(), ?failure, "recording FailedScheduling: gave up after {REPORT_RETRY_FOR:?}");
                return;
            }
            if !*leader.borrow_and_update() {
                match tokio::time::timeout(left, leader.changed()).await {
                    Ok(Err(_)) => return,
                    Ok(Ok(())) | Err(_) => continue,
                }
            }
            self.rate_limit().await;
            let written = match failure {
                Failure::Unschedulable => s.api.record_unschedulable(pod, message).await,
                Failure::SchedulerError => s.api.record_scheduler_error(pod, message).await,
            };
            match written {
                Ok(()) | Err(ApiError::NotFound(_) | ApiError::Conflict(_)) => return,
                Err(e) => {
                    tracing::debug!(pod = %pod.key(), error = %e, "recording FailedScheduling failed; retrying");
                    tokio::time::sleep(backoff.min(left)).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}
