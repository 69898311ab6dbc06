//! ImageLocality's per-node sums of a pod's image sizes, kept per set of images for the pods of
//! one batch.
//!
//! ImageLocality scores a node by the sum, over the pod's images the node has, of each image's size
//! scaled by its spread (the share of nodes that have it). Walking the snapshot's image index for
//! a pod touches every node that has one of its images (most nodes, for a popular image), and
//! clearing the sums afterwards as many again. The pods of a batch mostly share their images
//! (replicas of one workload, workloads built on one image), so the sums are kept per set of
//! images and reused: only a set not seen yet is summed.
//!
//! Mirrors ImageLocality's `sumImageScores` (`plugins/image_locality.rs`); held to it by the tests
//! below and `a_batch_places_each_pod_by_its_own_images` (`framework_tests.rs`).

use std::cell::RefCell;

use crate::engine::snapshot::ImagePostings;

/// At most this many bytes of sums are kept per evaluator (and per thread between evaluators).
const BUDGET_BYTES: usize = 2 << 20;

/// At most this many sets of images are kept.
const MAX_ENTRIES: usize = 64;

/// The sums for one set of images.
#[derive(Debug, Default)]
struct Entry {
    /// The pod's images it is for: (image hash, number of nodes with it), as the pod plan has them.
    key: Vec<(u64, i64)>,
    /// Whether the sums are those of `key` in this evaluation's snapshot.
    valid: bool,
    /// When it was last used (the cache's clock), for evicting the least recently used.
    used: u64,
    /// Per node (padded as asked), the sum of the scaled sizes.
    sums: Vec<i64>,
}

thread_local! {
    /// Entries of a finished evaluation on this thread, their buffers reused by the next.
    static SPARE: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

/// The image sums of the pods one evaluator sees, cached per set of images.
#[derive(Debug)]
pub(in crate::engine) struct ImageSums {
    /// Cached sums; an invalid entry is a buffer to reuse.
    entries: Vec<Entry>,
    /// The entry of the current pod, `None` between pods.
    active: Option<usize>,
    /// Counts uses, for [`Entry::used`].
    clock: u64,
}

impl ImageSums {
    /// No sums yet (this thread's spare buffers taken, their contents dropped as stale).
    pub(in crate::engine) fn new() -> Self {
        let mut sums = Self {
            entries: SPARE
                .try_with(|s| std::mem::take(&mut *s.borrow_mut()))
                .unwrap_or_default(),
            active: None,
            clock: 0,
        };
        sums.forget();
        sums
    }

    /// The current pod's sums (empty between pods, or when it has none).
    pub(in crate::engine) fn get(&self) -> &[i64] {
        self.active.map_or(&[], |k| &self.entries[k].sums)
    }

    /// Makes the sums of `images` current: from the cache, or summed from `postings` for
    /// `total_nodes` nodes into `padded` entries (zeros past the nodes).
    pub(in crate::engine) fn activate(
        &mut self,
        images: &[(u64, i64)],
        postings: &ImagePostings,
        total_nodes: usize,
        padded: usize,
    ) {
        self.clock += 1;
        if let Some(k) = self
            .entries
            .iter()
            .position(|e| e.valid && e.sums.len() == padded && e.key == images)
        {
            self.entries[k].used = self.clock;
            self.active = Some(k);
            return;
        }
        let limit = (BUDGET_BYTES / (padded.max(1) * std::mem::size_of::<i64>())).clamp(1, MAX_ENTRIES);
        // Spares of an evaluation of a smaller cluster may be more than this one keeps.
        self.entries.truncate(limit);
        let k = match self.entries.iter().position(|e| !e.valid) {
            Some(k) => k,
            None if self.entries.len() < limit => {
                self.entries.push(Entry::default());
                self.entries.len() - 1
            }
            None => (0..self.entries.len())
                .min_by_key(|&k| self.entries[k].used)
                .unwrap_or(0),
        };
        let e = &mut self.entries[k];
        e.sums.clear();
        e.sums.resize(padded, 0);
        for (image, num_nodes) in images {
            let spread = *num_nodes as f64 / total_nodes as f64;
            for (i, size) in postings.get(image).map(Vec::as_slice).unwrap_or(&[]) {
                if let Some(slot) = e.sums.get_mut(*i as usize) {
                    *slot = slot.saturating_add((*size as f64 * spread) as i64);
                }
            }
        }
        e.key.clear();
        e.key.extend_from_slice(images);
        e.valid = true;
        e.used = self.clock;
        self.active = Some(k);
    }

    /// No pod's sums are current.
    pub(in crate::engine) fn deactivate(&mut self) {
        self.active = None;
    }

    /// Drops every cached set (their buffers are kept). The sums stay right for the evaluator's
    /// snapshot, but they are kept for one call only (one batch, as a replica's evaluator lives
    /// for one request), so that an evaluator reused across calls, as the benches reuse one,
    /// costs what a replica's request does.
    pub(in crate::engine) fn forget(&mut self) {
        self.active = None;
        for e in &mut self.entries {
            e.valid = false;
        }
    }

    /// How many sets of images are cached.
    #[cfg(test)]
    pub(in crate::engine) fn cached(&self) -> usize {
        self.entries.iter().filter(|e| e.valid).count()
    }
}

impl Drop for ImageSums {
    fn drop(&mut self) {
        // A panic may have left an entry half summed: none is reused.
        if std::thread::panicking() {
            return;
        }
        let entries = std::mem::take(&mut self.entries);
        let _ = SPARE.try_with(|s| *s.borrow_mut() = entries);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Postings of three images over four nodes.
    fn postings() -> ImagePostings {
        ImagePostings::from([
            (1, vec![(0, 100), (2, 300)]),
            (2, vec![(1, 1000), (2, 1000), (3, 1000)]),
            (3, vec![(3, 7)]),
        ])
    }

    #[test]
    fn sums_scale_each_image_by_its_spread_and_pad_with_zeros() {
        let mut s = ImageSums::new();
        assert!(s.get().is_empty());
        s.activate(&[(1, 2), (2, 3)], &postings(), 4, 8);
        // Image 1 on 2 of 4 nodes (×0.5), image 2 on 3 of 4 (×0.75).
        assert_eq!(s.get(), [50, 750, 150 + 750, 750, 0, 0, 0, 0]);
        s.deactivate();
        assert!(s.get().is_empty());
    }

    #[test]
    fn a_set_seen_before_is_reused_and_another_set_gets_its_own_sums() {
        let mut s = ImageSums::new();
        s.activate(&[(1, 2)], &postings(), 4, 4);
        let first = s.get().to_vec();
        s.activate(&[(3, 1)], &postings(), 4, 4);
        assert_eq!(s.get(), [0, 0, 0, 1]);
        s.activate(&[(1, 2)], &postings(), 4, 4);
        assert_eq!(s.get(), first);
        assert_eq!(s.cached(), 2);
        // The same images counted on other nodes (another snapshot's counts) are another set.
        s.activate(&[(1, 4)], &postings(), 4, 4);
        assert_eq!(s.get(), [100, 0, 300, 0]);
        assert_eq!(s.cached(), 3);
    }

    #[test]
    fn past_the_budget_the_least_recently_used_set_is_replaced() {
        // Each sum buffer a quarter of the budget: four sets fit.
        let padded = BUDGET_BYTES / 4 / std::mem::size_of::<i64>();
        let mut s = ImageSums::new();
        for n in 1..=4 {
            s.activate(&[(2, n)], &postings(), 4, padded);
        }
        s.activate(&[(2, 1)], &postings(), 4, padded);
        s.activate(&[(1, 2)], &postings(), 4, padded);
        assert_eq!(s.cached(), 4);
        assert_eq!(&s.get()[..4], [50, 0, 150, 0]);
        // (2, 2) was the least recently used: gone; (2, 1) was used again: kept.
        let keys: Vec<_> = s.entries.iter().filter(|e| e.valid).map(|e| e.key[0]).collect();
        assert!(!keys.contains(&(2, 2)), "{keys:?}");
        assert!(keys.contains(&(2, 1)), "{keys:?}");
    }

    #[test]
    fn forgetting_keeps_the_buffers_but_not_the_sums() {
        let mut s = ImageSums::new();
        s.activate(&[(1, 2)], &postings(), 4, 4);
        s.forget();
        assert!(s.get().is_empty());
        assert_eq!(s.cached(), 0);
        let other = ImagePostings::from([(1, vec![(3, 100)])]);
        s.activate(&[(1, 2)], &other, 4, 4);
        assert_eq!(s.get(), [0, 0, 0, 50]);
        assert_eq!(s.entries.len(), 1, "the buffer was reused");
    }

    #[test]
    fn a_new_evaluation_reuses_the_buffers_but_not_the_sums() {
        {
            let mut s = ImageSums::new();
            s.activate(&[(1, 2)], &postings(), 4, 4);
        }
        let mut s = ImageSums::new();
        assert_eq!(s.cached(), 0);
        assert_eq!(s.entries.len(), 1, "the spare buffer was taken");
        // Another snapshot: image 1 now on node 3 only.
        let other = ImagePostings::from([(1, vec![(3, 100)])]);
        s.activate(&[(1, 2)], &other, 4, 4);
        assert_eq!(s.get(), [0, 0, 0, 50]);
    }
}
