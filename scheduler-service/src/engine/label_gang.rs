//! Label gangs: pods that declare a group (the label `placement.dev/gang` names it, the annotation
//! `placement.dev/gang-min-members` gives its minimum size) are placed all together or not at all.
//!
//! Within a Schedule batch, a gang is placed only when its members bound in the snapshot plus its
//! members this batch can place reach `min_members`. Otherwise none of its members is placed: the
//! batch is evaluated again without them, so the room their tentative placements took goes to the
//! other pods of the batch and nothing of theirs is left counted, and each member gets an
//! Unschedulable saying why. A pass excludes the gangs whose failure is certain (no other failing
//! gang comes before their last member; see [`certain_failures`]) and the batch is evaluated
//! again, until no further gang fails: at most one pass per gang, usually two.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::framework::{Deadline, Decision, Diagnosis, EvalError, Evaluator, GangFailure};
use super::model::PodSpec;

pub use super::model::{Gang, LabelGangKey};

pub use crate::labels::{GANG_LABEL, GANG_MIN_MEMBERS_ANNOTATION};

/// What one pass found for a gang.
struct Tally {
    min_members: u32,
    bound: u32,
    in_batch: u32,
    placed: u32,
    /// Positions in the batch of the gang's first and last members.
    first: usize,
    last: usize,
}

/// The failing gangs whose failure no other failing gang can have caused: a batch is placed in
/// order, so a gang's fate depends only on the pods before its last member, and it is certain
/// when no other failing gang has a member there. When every failure is entangled, the gang whose
/// last member comes first is taken, so each pass makes progress.
fn certain_failures(mut failing: Vec<(LabelGangKey, Tally)>) -> Vec<(LabelGangKey, Tally)> {
    failing.sort_by_key(|(_, t)| t.last);
    let certain: Vec<bool> = failing
        .iter()
        .enumerate()
        .map(|(i, (_, g))| failing.iter().enumerate().all(|(j, (_, f))| i == j || f.first > g.last))
        .collect();
    if !certain.iter().any(|c| *c) {
        failing.truncate(1);
        return failing;
    }
    failing
        .into_iter()
        .zip(certain)
        .filter_map(|(f, c)| c.then_some(f))
        .collect()
}

/// Places a batch with gangs all-or-nothing (see the module documentation).
pub(super) fn schedule(
    ev: &mut Evaluator<'_>,
    pods: &[PodSpec],
    seed: u64,
    deadline: Deadline,
) -> Result<Vec<Decision>, EvalError> {
    let snapshot = ev.snapshot();
    let mut failed: HashMap<LabelGangKey, String> = HashMap::new();
    let mut own: HashMap<Arc<str>, Diagnosis> = HashMap::new();
    loop {
        let excluded: HashSet<LabelGangKey> = failed.keys().cloned().collect();
        let skip = |p: &PodSpec| p.gang.as_ref().is_some_and(|g| excluded.contains(&g.key));
        let mut decisions = ev.schedule_pass(pods, seed, deadline, &skip)?;
        let mut tallies: HashMap<LabelGangKey, Tally> = HashMap::new();
        for (i, (pod, d)) in pods.iter().zip(&decisions).enumerate() {
            let Some(g) = pod.gang.as_ref().filter(|g| !excluded.contains(&g.key)) else {
                continue;
            };
            let t = tallies.entry(g.key.clone()).or_insert_with(|| Tally {
                // Members may disagree on the minimum; the largest one asked for holds.
                min_members: 0,
                bound: snapshot.gang_members(&g.key),
                in_batch: 0,
                placed: 0,
                first: i,
                last: i,
            });
            t.last = i;
            t.min_members = t.min_members.max(g.min_members);
            t.in_batch += 1;
            t.placed += u32::from(matches!(d, Decision::Node { .. }));
        }
        let failing: Vec<(LabelGangKey, Tally)> = tallies
            .into_iter()
            .filter(|(_, t)| t.bound + t.placed < t.min_members)
            .collect();
        let newly: Vec<(LabelGangKey, String)> = certain_failures(failing)
            .into_iter()
            .map(|(key, t)| {
                let msg = format!(
                    "gang {:?} is not placed: it needs {} members placed together, and {} fit \
                     ({} already bound, {} of the {} pending in this batch); no member is placed \
                     until the gang fits.",
                    key.as_str(),
                    t.min_members,
                    t.bound + t.placed,
                    t.bound,
                    t.placed,
                    t.in_batch
                );
                (key, msg)
            })
            .collect();
        if newly.is_empty() {
            // Final pass: explain every excluded member, with its own attempt when it failed too.
            for (pod, d) in pods.iter().zip(decisions.iter_mut()) {
                let Some(g) = pod.gang.as_ref() else { continue };
                let Some(message) = failed.get(&g.key) else { continue };
                let mut diag = own.remove(&pod.uid).unwrap_or_default();
                diag.gang = Some(GangFailure {
                    gang: Arc::clone(g.key.as_arc()),
                    message: message.clone(),
                    own: false,
                });
                *d = Decision::Unschedulable(diag);
            }
            return Ok(decisions);
        }
        failed.extend(newly);
        // Keep each failing member's own reasons from the pass that failed its gang.
        for (pod, d) in pods.iter().zip(decisions) {
            if let (Some(g), Decision::Unschedulable(diag)) = (pod.gang.as_ref(), d) {
                if failed.contains_key(&g.key) && !diag.reasons.is_empty() {
                    own.entry(pod.uid.clone()).or_insert(diag);
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "label_gang_tests.rs"]
mod tests;
