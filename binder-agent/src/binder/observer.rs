//! The cycle's observer: the scheduling and binding cycles tell it each outcome once (a group
//! decided and how long it took, a pod placed and bound, unschedulable, failed, a shadow's
//! verdicts compared), and it feeds both the metrics (kube-scheduler's
//! `scheduler_schedule_attempts_total` and `scheduler_pod_scheduling_sli_duration_seconds`, the
//! binder's own) and the experiments record ([`crate::experiments::Experiments`], which records
//! nothing without an experiment or shadow).

use std::collections::HashMap;
use std::time::Duration;

use placement_scheduler::proto;

use super::Binder;
use crate::experiments::{Experiments, Route, ShadowRoute};
use crate::metrics::BinderMetrics;
use crate::queue::QueuedPod;

/// The cycle's outcomes, each told once, to the metrics and the experiments alike.
pub(super) struct CycleObserver<'a> {
    metrics: &'a BinderMetrics,
    experiments: &'a Experiments,
}

impl<A> Binder<A> {
    /// The observer of this binder's cycles.
    pub(super) fn observer(&self) -> CycleObserver<'_> {
        CycleObserver {
            metrics: &self.shared.metrics,
            experiments: &self.shared.experiments,
        }
    }
}

impl CycleObserver<'_> {
    fn attempt(&self, route: &Route, qp: &QueuedPod, result: &str) {
        self.metrics
            .attempt(route.policy_label(), result, qp.popped_at.elapsed());
    }

    /// A group was decided (or got no decision) in `took`.
    pub(super) fn decided(&self, route: &Route, took: Duration) {
        self.metrics.decision_duration.observe(took.as_secs_f64());
        self.experiments.decided(route, took);
    }

    /// A group got no decision (every replica failed, or none answered): these of its pods back
    /// off.
    pub(super) fn undecided<'p>(&self, route: &Route, backed_off: impl Iterator<Item = &'p QueuedPod>) {
        let mut n = 0;
        for qp in backed_off {
            self.attempt(route, qp, "error");
            n += 1;
        }
        self.experiments.decision_failed(route, n);
    }

    /// The service refused the pod as invalid.
    pub(super) fn refused(&self, route: &Route, qp: &QueuedPod) {
        self.attempt(route, qp, "error");
    }

    /// Scheduling the pod failed with an error (`SchedulerError`), or it got no answer.
    pub(super) fn failed(&self, route: &Route, qp: &QueuedPod) {
        self.attempt(route, qp, "error");
    }

    /// No node fits the pod (nominated for preemption or not).
    pub(super) fn unschedulable(&self, route: &Route, qp: &QueuedPod) {
        self.attempt(route, qp, "unschedulable");
        self.experiments.unschedulable(route);
    }

    /// A waiting preemptor decided again still fits nowhere but its nominated node.
    pub(super) fn still_waiting(&self, route: &Route, qp: &QueuedPod) {
        self.attempt(route, qp, "unschedulable");
    }

    /// A Binding request failed (it is retried, or the pod decided again).
    pub(super) fn bind_failed(&self, route: &Route) {
        self.experiments.bind_failed(route);
    }

    /// The pod was bound to `node`.
    pub(super) fn bound(&self, route: &Route, qp: &QueuedPod, node: &str) {
        self.experiments.bound(route, &qp.info.spec.uid, node);
        self.attempt(route, qp, "scheduled");
        self.metrics.pod_bound(qp.first_seen.elapsed(), qp.attempts);
    }

    /// The pod's Binding failed for good: it is decided again after its backoff.
    pub(super) fn bind_gave_up(&self, route: &Route, qp: &QueuedPod) {
        self.attempt(route, qp, "error");
    }

    /// The pod's PreBind failed after `took` in this attempt: it is decided again after its
    /// backoff.
    pub(super) fn prebind_failed(&self, policy: &str, took: Duration) {
        self.metrics.attempt(policy, "error", took);
    }

    /// A shadow's verdicts on a group, compared with the placements acted on.
    pub(super) fn shadow_compared(
        &self,
        route: &Route,
        shadow: &ShadowRoute,
        primary: &HashMap<&str, &proto::Placement>,
        verdicts: &[proto::Placement],
    ) {
        self.experiments.shadow_compared(route, shadow, primary, verdicts);
    }

    /// A shadow could not evaluate a group of `n` pods.
    pub(super) fn shadow_failed(&self, route: &Route, shadow: &ShadowRoute, n: usize) {
        self.experiments.shadow_failed(route, shadow, n);
    }
}
