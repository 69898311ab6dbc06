//! kube-scheduler's PodGroupPodsCount (`framework/plugins/podgrouppodscount/podgroup_pods_count.go`):
//! a placement's score is the group's pods scheduled plus those the placement proposes
//! (`ScorePlacement`), normalized by the most of any candidate placement to 0..100
//! (`NormalizePlacementScore`). The PodGroup cycle ([`crate::engine::podgroup`]) adds it to
//! NodeResourcesFit's placement score.

/// The most pods of any candidate placement (`NormalizePlacementScore`'s `maxCount`), at least 1.
pub(in crate::engine) fn most(counts: impl IntoIterator<Item = usize>) -> i64 {
    counts.into_iter().max().unwrap_or(0).max(1) as i64
}

/// A placement's normalized score: its pods (scheduled and proposed) against [`most`].
pub(in crate::engine) fn normalized(count: usize, most: i64) -> i64 {
    count as i64 * 100 / most
}
