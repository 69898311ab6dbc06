//! NodeResourcesFit's placement score (kube-scheduler's `Fit.ScorePlacement`,
//! `framework/plugins/noderesources/fit.go`): the MostAllocated score of the members' requests
//! over a placement's nodes together, which the PodGroup cycle adds to PodGroupPodsCount's.

use crate::engine::model::PodSpec;
use crate::engine::policy::ScorePlugin;
use crate::engine::profile::Profile;
use crate::engine::resources::ResourceName;
use crate::engine::snapshot::Snapshot;

/// The resources NodeResourcesFit's placement score reads, with their weights, and its weight in
/// the profile (`None` when the profile does not score with NodeResourcesFit).
pub(in crate::engine) fn fit_scoring(profile: &Profile) -> Option<(i64, &[(ResourceName, i64)])> {
    profile
        .score_plugins
        .iter()
        .find(|(p, _)| *p == ScorePlugin::NodeResourcesFit)
        .map(|(_, w)| (*w, profile.fit_resources.as_slice()))
}

/// A request of a member as the placement score reads it: cpu and memory with the scoring
/// defaults for missing requests.
pub(in crate::engine) fn scoring_request(pod: &PodSpec, name: &ResourceName) -> i64 {
    match name {
        ResourceName::Cpu => pod.non_zero_requests.milli_cpu,
        ResourceName::Memory => pod.non_zero_requests.memory,
        other => pod.requests.get(other),
    }
}

/// NodeResourcesFit's placement score (MostAllocated over the placement's nodes) with `requests`
/// (per fit resource) placed there.
pub(in crate::engine) fn fit_score(
    snapshot: &Snapshot,
    nodes: &[usize],
    resources: &[(ResourceName, i64)],
    requests: &[i64],
) -> i64 {
    let all = snapshot.nodes();
    let (mut score, mut weights) = (0i64, 0i64);
    for ((name, weight), &request) in resources.iter().zip(requests) {
        if request == 0 && matches!(name, ResourceName::Scalar(_)) {
            continue;
        }
        let (mut allocatable, mut allocated) = (0i64, 0i64);
        for &i in nodes {
            let n = &all[i];
            let a = n.spec.allocatable.get(name);
            if a == 0 {
                continue;
            }
            allocatable = allocatable.saturating_add(a);
            allocated = allocated.saturating_add(match name {
                ResourceName::Cpu => n.usage.non_zero_cpu,
                ResourceName::Memory => n.usage.non_zero_memory,
                other => n.usage.requested.get(other),
            });
        }
        if allocatable == 0 {
            continue;
        }
        let requested = allocated.saturating_add(request).min(allocatable);
        score += requested.saturating_mul(100) / allocatable * weight;
        weights += weight;
    }
    if weights == 0 {
        0
    } else {
        score / weights
    }
}
