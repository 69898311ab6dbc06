//! The engine's one entry for a Schedule batch: [`schedule`] says which kind of batch it is and
//! hands it to the cycle that places that kind, as kube-scheduler's `ScheduleOne` chooses between
//! a pod's cycle and a PodGroup's (`schedule_one.go`, `schedule_one_podgroup.go`):
//!
//! - a batch with PodGroup members ([`BatchKind::PodGroups`]): [`super::podgroup::schedule`],
//!   each PodGroup placed as kube's PodGroup cycle places it, the pods around them one by one;
//! - a batch with label gangs ([`BatchKind::LabelGangs`], pods naming a gang by the label
//!   `placement.dev/gang`): [`super::label_gang::schedule`], each gang all or nothing;
//! - plain pods ([`BatchKind::Pods`]): the scheduling cycle, pod after pod
//!   ([`Evaluator::schedule_pass`]).
//!
//! The last two go through [`Evaluator::schedule`], which first puts the batch in DevicePacking's
//! order when the policy asks for it.

use super::extender::ExtenderHook;
use super::framework::{Deadline, Decision, EvalError, Evaluator};
use super::model::PodSpec;
use super::podgroup::GroupOutcome;
use super::profile::Profile;
use super::snapshot::Snapshot;

/// The kinds of Schedule batch, each placed by a cycle of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchKind {
    /// Some pod names a PodGroup (`spec.schedulingGroup`); pods around the groups and label
    /// gangs among them are placed too.
    PodGroups,
    /// No PodGroup, but some pod belongs to a label gang.
    LabelGangs,
    /// Neither: every pod on its own.
    Pods,
}

impl BatchKind {
    /// The kind of a batch.
    pub fn of(pods: &[PodSpec]) -> Self {
        if pods.iter().any(|p| p.pod_group.is_some()) {
            BatchKind::PodGroups
        } else if pods.iter().any(|p| p.gang.is_some()) {
            BatchKind::LabelGangs
        } else {
            BatchKind::Pods
        }
    }
}

/// Schedules a batch (see the module documentation): one decision per pod, in order, and one
/// outcome per PodGroup found in the snapshot, in the order of first members (none for a batch
/// without PodGroup members).
pub fn schedule(
    profile: &Profile,
    snapshot: &Snapshot,
    extenders: Option<&dyn ExtenderHook>,
    pods: &[PodSpec],
    seed: u64,
    deadline: Deadline,
) -> Result<(Vec<Decision>, Vec<GroupOutcome>), EvalError> {
    match BatchKind::of(pods) {
        BatchKind::PodGroups => super::podgroup::schedule(profile, snapshot, extenders, pods, seed, deadline),
        BatchKind::LabelGangs | BatchKind::Pods => {
            let mut ev = Evaluator::new(profile, snapshot);
            if let Some(hook) = extenders {
                ev = ev.with_extenders(hook);
            }
            Ok((ev.schedule(pods, seed, deadline)?, Vec::new()))
        }
    }
}
