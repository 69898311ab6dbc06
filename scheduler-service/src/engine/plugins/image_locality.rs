//! ImageLocality: nodes that already have a pod's images score higher, each image weighed by
//! how many nodes have it (an image every node has helps no node more than another).
//!
//! Mirrors kube-scheduler's `pkg/scheduler/framework/plugins/imagelocality/image_locality.go`:
//! Score (`sumImageScores` of `scaledImageScore`, then `calculatePriority`). The plugin has no
//! filter and no normalization. The per-node sums of scaled sizes are kept per set of images
//! for a batch (`engine/accel/image_sums.rs`, `size × nodes having it / all nodes` as
//! `scaledImageScore`), and the plain pass's vector kernel maps sums to scores four at a time
//! (`engine/accel/columns.rs`, the same answers as [`ImageScale::score`]:
//! `kernel_filters_and_scores_as_the_scalar_pass`).

use super::{scaled, MAX_NODE_SCORE};

/// A mebibyte.
const MB: i64 = 1024 * 1024;
/// kube-scheduler's `minThreshold`: sums below it score 0.
pub const MIN_IMAGE_THRESHOLD: i64 = 23 * MB;
/// kube-scheduler's `maxContainerThreshold`: the sum that scores 100, per container.
pub const MAX_CONTAINER_IMAGE_THRESHOLD: i64 = 1000 * MB;

/// Score: kube-scheduler's `calculatePriority` of a node whose sum of scaled image sizes is `sum`,
/// for a pod with `containers` containers (init containers included).
#[inline]
pub fn score(containers: usize, sum: i64) -> i64 {
    ImageScale::of(containers).score(sum)
}

/// ImageLocality's scale for a pod with some number of containers: sums are clamped to
/// `[MIN_IMAGE_THRESHOLD, max]` and mapped linearly onto `[0, MAX_NODE_SCORE]`.
#[derive(Debug, Clone, Copy)]
pub struct ImageScale {
    /// The upper threshold, [`MAX_CONTAINER_IMAGE_THRESHOLD`] per container; 0 for no container.
    pub max: i64,
    /// Whether the division is exact in `f64`: `MAX_NODE_SCORE · (max − MIN_IMAGE_THRESHOLD)`
    /// below 2⁵³.
    exact_f64: bool,
}

impl ImageScale {
    /// The scale for `containers` containers.
    pub fn of(containers: usize) -> Self {
        let max = MAX_CONTAINER_IMAGE_THRESHOLD.saturating_mul(containers as i64);
        let exact_f64 = (max - MIN_IMAGE_THRESHOLD)
            .checked_mul(MAX_NODE_SCORE)
            .is_some_and(|n| n < 1 << 53);
        Self { max, exact_f64 }
    }

    /// The score of a node whose sum is `sum`: kube-scheduler's integer arithmetic,
    /// `MAX_NODE_SCORE · (clamped − min) / (max − min)`. Its division is done in `f64` when that
    /// is exact (an integer quotient in `[0, 100]` of numerators below 2⁵³: a true quotient that
    /// is not an integer lies at least `1 / (max − min)` below the next, more than the rounding
    /// error), an integer division being several times slower.
    #[inline(always)]
    pub fn score(self, sum: i64) -> i64 {
        if self.max == 0 {
            return 0;
        }
        let clamped = sum.clamp(MIN_IMAGE_THRESHOLD, self.max);
        let (n, d) = (clamped - MIN_IMAGE_THRESHOLD, self.max - MIN_IMAGE_THRESHOLD);
        if n == 0 {
            0
        } else if self.exact_f64 {
            ((MAX_NODE_SCORE * n) as f64 / d as f64) as i64
        } else {
            scaled(n, d)
        }
    }
}

/// The plugin in the framework's contract: its input is the pod's container count and the
/// node's sum of scaled image sizes (`None` when none of its images is on any node).
#[derive(Debug, Clone, Copy)]
pub struct ImageLocality;

impl crate::engine::plugins::contract::Score for ImageLocality {
    type In<'a> = Option<(usize, i64)>;
    #[inline(always)]
    fn score(input: Option<(usize, i64)>, _: &crate::engine::snapshot::NodeView<'_>) -> i64 {
        input.map_or(0, |(containers, sum)| score(containers, sum))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::engine::plugins::testing::{node, only, pod, scores, snapshot};
    use crate::engine::policy::{ScorePlugin as S, ScoringStrategy};

    /// `image_locality_test.go`'s arithmetic: a sum of scaled sizes and a container count to a score.
    #[test]
    fn score_table() {
        let cases = [
            ("below the threshold", 1, 20 * MB, 0),
            ("at the threshold", 1, MIN_IMAGE_THRESHOLD, 0),
            ("one 250MB image on half the nodes, two containers", 2, 125 * MB, 5),
            ("one 300MB image on half the nodes, two containers", 2, 150 * MB, 6),
            ("one container, past its maximum", 1, 2000 * MB, 100),
            ("two containers, one maximum", 2, 1000 * MB, 49),
            ("no container", 0, 500 * MB, 0),
        ];
        for (name, containers, sum, want) in cases {
            assert_eq!(score(containers, sum), want, "{name}");
        }
    }

    #[test]
    fn image_locality_matches_kube_scheduler() {
        // image_locality_test.go "test-1": pod images gcr.io/40 and gcr.io/250; node1 has the 40MB
        // image (20MB after spreading over 2 nodes, under the 23MB threshold → 0), node2 the 250MB one
        // → 100 × (125MB − 23MB) / (2 × 1000MB − 23MB) = 5.
        const MB: i64 = 1024 * 1024;
        let mut n1 = node("node1", 1000, 1000);
        n1.images.insert("gcr.io/40:latest".into(), 40 * MB);
        n1.images.insert("gcr.io/300:latest".into(), 300 * MB);
        n1.images.insert("gcr.io/2000:latest".into(), 2000 * MB);
        let mut n2 = node("node2", 1000, 1000);
        n2.images.insert("gcr.io/250:latest".into(), 250 * MB);
        n2.images.insert("gcr.io/10:latest".into(), 10 * MB);
        let snap = snapshot(vec![n1, n2]);
        let mut p = pod("p", 0, 0);
        p.images = vec!["gcr.io/40:latest".into(), "gcr.io/250:latest".into()];
        let prof = only(S::ImageLocality, ScoringStrategy::LeastAllocated);
        assert_eq!(scores(&prof, &snap, &p), [("node1".into(), 0), ("node2".into(), 5)]);
    }

    proptest! {
        /// ImageLocality's score through [`ImageScale`] (its division in `f64` where exact) equals
        /// kube-scheduler's integer arithmetic for any sum and container count.
        #[test]
        fn image_scale_equals_the_integer_arithmetic(
            sum in prop_oneof![0i64..(3 << 30), 0i64..(1 << 45), any::<i64>()],
            containers in prop_oneof![1usize..12, 1usize..(1 << 20)],
        ) {
            let max_threshold = MAX_CONTAINER_IMAGE_THRESHOLD.saturating_mul(containers as i64);
            let clamped = sum.clamp(MIN_IMAGE_THRESHOLD, max_threshold);
            let expected = MAX_NODE_SCORE * (clamped - MIN_IMAGE_THRESHOLD) / (max_threshold - MIN_IMAGE_THRESHOLD);
            prop_assert_eq!(ImageScale::of(containers).score(sum), expected);
            prop_assert_eq!(ImageScale::of(0).score(sum), 0);
        }
    }
}
