//! The outcomes of a policy's pod-free node rules on every node, by column, as a batch's usage
//! leaves them: what lets Schedule's best-node pass keep the vector kernel's rule-out under
//! score rules.
//!
//! A CEL rule that reads the node's own fields but not the pod (`node.status.requested.cpu`,
//! the node's name) has one outcome per node for every pod. Kept node by node, with the
//! snapshot's usage or under the stamp of a usage the batch changed, they are looked up for each
//! feasible node of each pod; that lookup, and min-max normalization needing every feasible
//! node's raw score before any node's total is known, made each pod's pass hand every feasible
//! node over. Here the outcomes sit in columns padded to whole [`BLOCK`]s: a bit per node that
//! every such rule keeps, and each score rule's raw scores, with the nodes in order of each
//! score ([`RuleColumns::by_score`]). A pod's extrema over its feasible nodes are then the
//! scores of the first feasible node from either end of that order (found by probing a few
//! blocks), or else come from a pass over the kernel's masks; the best node per class is then
//! kept with bars as without rules, each node's part bounded above by [`RuleColumns::bounds`] so
//! that the kernel rules out the nodes that cannot reach their class's best.
//!
//! Mirrors `rules/evaluate.rs`'s rules evaluated node by node (`CompiledRules::evaluate`); held to
//! it by the tests below, `rules_take_the_plain_pass_on_the_synthetic_cluster`
//! (`accel/plain_tests.rs`) and `the_plain_pass_takes_rules_read_per_class_or_without_the_pod`
//! (`framework_tests.rs`).

use super::columns::{Kernel, BLOCK};

/// Raw scores within this magnitude convert to `f64` exactly, and so do differences of two of
/// them: the bounds of [`RuleColumns::bounds`] hold only for extrema within it.
pub const EXACT_SCORE: i64 = 1 << 52;

/// Added to every bound of [`RuleColumns::bounds`]: far above the rounding of the few `f64`
/// operations behind a bound and of adding it to a per-node part below 2³¹, far below 1.
const MARGIN: f64 = 1e-3;

/// The bounds are clamped to this, so that a part plus its bound stays within `i32`.
const BOUND_CAP: f64 = 1e8;

/// The pod-free node rules' outcomes on every node (see the module's documentation).
#[derive(Debug, Default)]
pub struct RuleColumns {
    /// Nodes (without the padding).
    len: usize,
    /// Per block, a bit per node that every pod-free node rule keeps: each filter rule is true
    /// and each score rule evaluates to an integer.
    pass: Vec<u64>,
    /// Per score rule, its raw score on each node (0 where `pass` is off), padded to blocks.
    scores: Vec<Vec<i64>>,
    /// The same as `f64` (rounded beyond [`EXACT_SCORE`]).
    approx: Vec<Vec<f64>>,
    /// Per node, the usage stamp its entries were computed under (0: the snapshot's usage).
    stamps: Vec<u64>,
    /// The nodes set under a stamp other than 0 since [`RuleColumns::take_moved`] (once each).
    moved: Vec<u32>,
    /// Per score rule, the nodes `pass` kept when [`RuleColumns::sort`] last ran, by raw score
    /// then node (see [`RuleColumns::by_score`]).
    order: Vec<Vec<(i64, u32)>>,
    /// Per score rule, the nodes set since that `pass` keeps, in the same order.
    overlay: Vec<Vec<(i64, u32)>>,
    /// Per node, whether it was set since (its entries in `order` are stale).
    overlaid: Vec<bool>,
    /// Whether every raw score set so far is within [`EXACT_SCORE`] (so `approx` holds it
    /// exactly).
    exact: bool,
    /// Whether [`RuleColumns::sort`] ran: until then nothing is kept in order.
    sorted: bool,
}

impl RuleColumns {
    /// Columns for `nodes` nodes and `scores` score rules, every node rejected under stamp 0
    /// until [`RuleColumns::set`].
    pub fn new(nodes: usize, scores: usize) -> Self {
        let padded = nodes.div_ceil(BLOCK) * BLOCK;
        Self {
            len: nodes,
            pass: vec![0; padded / BLOCK],
            scores: vec![vec![0; padded]; scores],
            approx: vec![vec![0.0; padded]; scores],
            stamps: vec![0; nodes],
            moved: Vec::new(),
            order: vec![Vec::new(); scores],
            overlay: vec![Vec::new(); scores],
            overlaid: vec![false; nodes],
            exact: true,
            sorted: false,
        }
    }

    /// Sorts every node `pass` keeps by each score rule's raw score (see
    /// [`RuleColumns::by_score`]), folding in the nodes set since the last sort.
    pub fn sort(&mut self) {
        for (j, order) in self.order.iter_mut().enumerate() {
            order.clear();
            for (block, &bits) in self.pass.iter().enumerate() {
                let mut left = bits;
                while left != 0 {
                    let i = block * BLOCK + left.trailing_zeros() as usize;
                    left &= left - 1;
                    order.push((self.scores[j][i], i as u32));
                }
            }
            order.sort_unstable();
            self.overlay[j].clear();
        }
        self.overlaid.fill(false);
        self.sorted = true;
    }

    /// The nodes `pass` keeps by score rule `j`'s raw score, least first, each once with its
    /// score as it stands (ties by node index).
    pub fn by_score(&self, j: usize) -> ByScore<'_> {
        let empty: &[(i64, u32)] = &[];
        let order = self.order.get(j).map_or(empty, Vec::as_slice);
        let overlay = self.overlay.get(j).map_or(empty, Vec::as_slice);
        ByScore {
            order,
            overlay,
            overlaid: &self.overlaid,
        }
    }

    /// Nodes (without the padding).
    pub fn len(&self) -> usize {
        self.len
    }

    /// The usage stamp node `i`'s entries were computed under.
    #[inline]
    pub fn stamp(&self, i: usize) -> u64 {
        self.stamps.get(i).copied().unwrap_or(0)
    }

    /// Sets node `i`'s entries, computed under `stamp`: `Some` with each score rule's raw score
    /// when every rule keeps the node, `None` when one rejects it or fails.
    pub fn set(&mut self, i: usize, stamp: u64, scores: Option<&[i64]>) {
        let Some(old) = self.stamps.get_mut(i) else {
            return;
        };
        if *old == 0 && stamp != 0 {
            self.moved.push(i as u32);
        }
        *old = stamp;
        let (block, bit) = (i / BLOCK, 1u64 << (i % BLOCK));
        // The node leaves the sorted order for the overlay (its entries there replaced).
        let was = self.pass[block] & bit != 0;
        if let Some(overlaid) = self.overlaid.get_mut(i).filter(|_| self.sorted) {
            let fresh = !*overlaid;
            *overlaid = true;
            for (j, overlay) in self.overlay.iter_mut().enumerate() {
                if was && !fresh {
                    let entry = (self.scores[j][i], i as u32);
                    if let Ok(at) = overlay.binary_search(&entry) {
                        overlay.remove(at);
                    }
                }
                if let Some(&s) = scores.and_then(|s| s.get(j)) {
                    let entry = (s, i as u32);
                    let at = overlay.binary_search(&entry).unwrap_or_else(|at| at);
                    overlay.insert(at, entry);
                }
            }
        }
        match scores {
            Some(scores) => {
                self.exact &= scores.iter().all(|s| (-EXACT_SCORE..=EXACT_SCORE).contains(s));
                self.pass[block] |= bit;
                for ((column, approx), &s) in self.scores.iter_mut().zip(&mut self.approx).zip(scores) {
                    column[i] = s;
                    approx[i] = s as f64;
                }
            }
            None => {
                self.pass[block] &= !bit;
                for (column, approx) in self.scores.iter_mut().zip(&mut self.approx) {
                    column[i] = 0;
                    approx[i] = 0.0;
                }
            }
        }
    }

    /// The nodes set under a stamp other than 0 since the last call; they stay listed as moved
    /// only if set so again.
    pub fn take_moved(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.moved)
    }

    /// Lists node `i` as moved again (see [`RuleColumns::take_moved`]) when its stamp is not 0.
    pub fn keep_moved(&mut self, i: u32) {
        if self.stamp(i as usize) != 0 {
            self.moved.push(i);
        }
    }

    /// Of the block at `base`, the nodes every pod-free node rule keeps.
    #[inline(always)]
    pub fn pass(&self, base: usize) -> u64 {
        self.pass.get(base / BLOCK).copied().unwrap_or(0)
    }

    /// Whether every pod-free node rule keeps node `i`.
    #[inline(always)]
    pub fn admits(&self, i: usize) -> bool {
        self.pass(i) >> (i % BLOCK) & 1 != 0
    }

    /// Node `i`'s raw score of each score rule, into `out` (as many as there are score rules).
    #[inline(always)]
    pub fn scores_of(&self, i: usize, out: &mut [i64]) {
        for (o, column) in out.iter_mut().zip(&self.scores) {
            *o = column.get(i).copied().unwrap_or(0);
        }
    }

    /// Whether the overlay has grown past an eighth of the nodes (a [`RuleColumns::sort`] is
    /// due: each change moves up to that many entries).
    pub fn overlay_is_large(&self) -> bool {
        self.overlay.first().is_some_and(|o| o.len() > self.len / 8 + 64)
    }

    /// Widens each score rule's `(least, greatest)` in `extrema` to the raw scores of the nodes
    /// of `nodes` (bits of the block at `base`); through the kernel when it runs and every score
    /// is exact in `f64`.
    #[inline]
    pub fn widen(&self, kernel: Option<Kernel>, base: usize, nodes: u64, extrema: &mut [(i64, i64)]) {
        if let Some(kernel) = kernel.filter(|_| self.exact) {
            for (e, column) in extrema.iter_mut().zip(&self.approx) {
                let mut wide = (e.0 as f64, e.1 as f64);
                kernel.extrema(column, base, nodes, &mut wide);
                // Exact: every score and the identities (i64::MAX/MIN read as ±2⁶³) convert
                // back to themselves, and ±∞ (no node) saturates to the identities.
                *e = (wide.0 as i64, wide.1 as i64);
            }
            return;
        }
        for (e, column) in extrema.iter_mut().zip(&self.scores) {
            let Some(block) = column.get(base..base + BLOCK) else {
                continue;
            };
            // Without a branch per node: four lanes of running extrema, each node's bit
            // selecting its score or the lane's identity.
            let (mut least, mut greatest) = ([e.0; 4], [e.1; 4]);
            for (k, chunk) in block.chunks_exact(4).enumerate() {
                for lane in 0..4 {
                    let on = nodes >> (k * 4 + lane) & 1 != 0;
                    let v = chunk[lane];
                    least[lane] = least[lane].min(if on { v } else { i64::MAX });
                    greatest[lane] = greatest[lane].max(if on { v } else { i64::MIN });
                }
            }
            *e = (
                least.into_iter().fold(e.0, i64::min),
                greatest.into_iter().fold(e.1, i64::max),
            );
        }
    }

    /// Per node of the block at `base`, an upper bound of the weighted, normalized part of the
    /// score rules' scores (see `RuleScaling::part` in the framework), into `out`. `scaling`
    /// has, per score rule, its least raw score and `100 · weight / (greatest − least)` (0 when
    /// the rule scores every feasible node alike). Holds for a node whose raw scores lie within
    /// the extrema, when these are within [`EXACT_SCORE`]: `raw − least` is then exact in `f64`,
    /// and the bound exceeds the real-valued sum (which the normalized integers never exceed)
    /// by the margin, far more than the rounding of the product and sum. Values of other nodes
    /// are meaningless but finite, and every bound is at most 10⁸.
    #[inline]
    pub fn bounds(&self, base: usize, scaling: &[(f64, f64)], out: &mut [f64; BLOCK]) {
        out.fill(MARGIN);
        for (&(least, scale), column) in scaling.iter().zip(&self.approx) {
            if scale == 0.0 {
                continue;
            }
            let Some(block) = column.get(base..base + BLOCK) else {
                continue;
            };
            for (o, &v) in out.iter_mut().zip(block) {
                *o += (v - least) * scale;
            }
        }
        for o in out.iter_mut() {
            *o = o.clamp(0.0, BOUND_CAP);
        }
    }
}

/// The nodes a [`RuleColumns`] keeps in order of one score rule's raw score (see
/// [`RuleColumns::by_score`]): the sorted order merged with the overlay, stale entries skipped.
/// Iterates least first; `next_back` greatest first.
#[derive(Debug, Clone)]
pub struct ByScore<'c> {
    order: &'c [(i64, u32)],
    overlay: &'c [(i64, u32)],
    overlaid: &'c [bool],
}

impl ByScore<'_> {
    /// Drops the stale entries at either end of `order`.
    fn trim(&mut self) {
        let stale = |&(_, i): &(i64, u32)| self.overlaid.get(i as usize).copied().unwrap_or(true);
        while let Some((first, rest)) = self.order.split_first() {
            if !stale(first) {
                break;
            }
            self.order = rest;
        }
        while let Some((last, rest)) = self.order.split_last() {
            if !stale(last) {
                break;
            }
            self.order = rest;
        }
    }
}

impl Iterator for ByScore<'_> {
    type Item = (i64, u32);

    fn next(&mut self) -> Option<(i64, u32)> {
        self.trim();
        match (self.order.first(), self.overlay.first()) {
            (Some(&a), Some(&b)) if b < a => {
                self.overlay = &self.overlay[1..];
                Some(b)
            }
            (Some(&a), _) => {
                self.order = &self.order[1..];
                Some(a)
            }
            (None, Some(&b)) => {
                self.overlay = &self.overlay[1..];
                Some(b)
            }
            (None, None) => None,
        }
    }
}

impl DoubleEndedIterator for ByScore<'_> {
    fn next_back(&mut self) -> Option<(i64, u32)> {
        self.trim();
        let (n, m) = (self.order.len(), self.overlay.len());
        match (self.order.last(), self.overlay.last()) {
            (Some(&a), Some(&b)) if b > a => {
                self.overlay = &self.overlay[..m - 1];
                Some(b)
            }
            (Some(&a), _) => {
                self.order = &self.order[..n - 1];
                Some(a)
            }
            (None, Some(&b)) => {
                self.overlay = &self.overlay[..m - 1];
                Some(b)
            }
            (None, None) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_moves_nodes_and_clears_what_a_rule_rejects() {
        let mut c = RuleColumns::new(70, 2);
        c.set(3, 0, Some(&[5, -2]));
        c.set(66, 9, Some(&[7, 1]));
        assert!(c.admits(3) && c.admits(66) && !c.admits(4));
        assert_eq!(c.pass(64), 1 << 2);
        let mut out = [0; 2];
        c.scores_of(66, &mut out);
        assert_eq!(out, [7, 1]);
        assert_eq!(c.take_moved(), vec![66]);
        assert!(c.take_moved().is_empty(), "taken");
        c.set(66, 0, None);
        assert!(!c.admits(66));
        c.scores_of(66, &mut out);
        assert_eq!(out, [0, 0]);
        c.keep_moved(66);
        assert!(c.take_moved().is_empty(), "back at stamp 0: not moved");
    }

    #[test]
    fn by_score_lists_each_kept_node_once_with_its_score() {
        let mut c = RuleColumns::new(130, 1);
        for i in 0..130 {
            c.set(i, 0, (i % 3 != 0).then_some(&[(i as i64 * 37) % 50][..]));
        }
        c.sort();
        // Changes after the sort: a node now rejected, one now kept, one rescored, one
        // rescored twice.
        c.set(1, 5, None);
        c.set(3, 6, Some(&[-7]));
        c.set(2, 7, Some(&[99]));
        c.set(4, 8, Some(&[10]));
        c.set(4, 9, Some(&[12]));
        let mut expected: Vec<(i64, u32)> = (0..130)
            .filter(|&i| c.admits(i))
            .map(|i| {
                let mut s = [0];
                c.scores_of(i, &mut s);
                (s[0], i as u32)
            })
            .collect();
        expected.sort_unstable();
        assert_eq!(c.by_score(0).collect::<Vec<_>>(), expected);
        let mut reversed = expected.clone();
        reversed.reverse();
        assert_eq!(c.by_score(0).rev().collect::<Vec<_>>(), reversed);
        assert_eq!(c.by_score(0).next(), Some((-7, 3)));
        assert_eq!(c.by_score(0).next_back(), Some((99, 2)));
        c.sort();
        assert_eq!(
            c.by_score(0).collect::<Vec<_>>(),
            expected,
            "the same after sorting again"
        );
    }

    #[test]
    fn widen_reads_only_the_given_nodes() {
        let mut c = RuleColumns::new(64, 1);
        for (i, v) in [(1, 10), (2, -4), (9, 100), (40, 7)] {
            c.set(i, 0, Some(&[v]));
        }
        for kernel in [None, Kernel::detect()] {
            let mut e = [(i64::MAX, i64::MIN)];
            c.widen(kernel, 0, 0, &mut e);
            assert_eq!(e, [(i64::MAX, i64::MIN)], "no node: unchanged");
            c.widen(kernel, 0, (1 << 1) | (1 << 2) | (1 << 40), &mut e);
            assert_eq!(e, [(-4, 10)]);
            c.widen(kernel, 0, 1 << 9, &mut e);
            assert_eq!(e, [(-4, 100)]);
        }
        // A score beyond the exact range takes the integer path.
        c.set(5, 0, Some(&[i64::MAX - 1]));
        let mut e = [(i64::MAX, i64::MIN)];
        c.widen(Kernel::detect(), 0, (1 << 5) | (1 << 1), &mut e);
        assert_eq!(e, [(10, i64::MAX - 1)]);
    }

    #[test]
    fn bounds_are_at_or_above_the_normalized_scores() {
        // Two rules, weights 3 and 7, min-max normalized as the framework does.
        let raw = [[0i64, 10], [1, 13], [2, 17], [7, 10], [-(1 << 51), 11]];
        let (lo, hi) = raw.iter().fold(([i64::MAX; 2], [i64::MIN; 2]), |(lo, hi), r| {
            ([lo[0].min(r[0]), lo[1].min(r[1])], [hi[0].max(r[0]), hi[1].max(r[1])])
        });
        let weights = [3i64, 7];
        let mut c = RuleColumns::new(raw.len(), 2);
        for (i, r) in raw.iter().enumerate() {
            c.set(i, 0, Some(r));
        }
        let scaling: Vec<(f64, f64)> = (0..2)
            .map(|k| (lo[k] as f64, 100.0 * weights[k] as f64 / (hi[k] - lo[k]) as f64))
            .collect();
        let mut out = [0.0; BLOCK];
        c.bounds(0, &scaling, &mut out);
        for (i, r) in raw.iter().enumerate() {
            let exact: i64 = (0..2)
                .map(|k| {
                    let d = i128::from(r[k]) - i128::from(lo[k]);
                    (100 * d / (i128::from(hi[k]) - i128::from(lo[k]))) as i64 * weights[k]
                })
                .sum();
            assert!(out[i] >= exact as f64, "node {i}: bound {} below {exact}", out[i]);
            assert!(
                out[i] < exact as f64 + 1000.0,
                "node {i}: bound {} far above {exact}",
                out[i]
            );
        }
        assert!(out.iter().all(|b| (0.0..=BOUND_CAP).contains(b)));
    }
}
