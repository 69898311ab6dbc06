//! Rank's top k: the `k`-th best total found in one pass for the usual small `k`.
//!
//! Mirrors a selection of the `k`-th largest (`select_nth_unstable_by`, which `keep_top_k` in
//! `select.rs` takes beyond [`SMALL_K`]); held to it by `kth_total_small_equals_the_sorted_one` (below) and, through Rank,
//! `rank_top_k_is_the_head_of_the_full_ranking` (`plain_tests.rs`).

/// The `k`-th largest total of `items` (counting equal totals apart), for a `k` of at most
/// [`SMALL_K`] (`None` beyond): one pass keeping the `k` largest so far in order, where most
/// items fail the first comparison (Rank's usual top 10 of ~3,000 feasible nodes), instead of a
/// selection that moves every item.
pub(crate) fn kth_total_small<T>(items: &[T], k: usize, total: impl Fn(&T) -> i64) -> Option<i64> {
    if k == 0 || k > SMALL_K || k > items.len() {
        return None;
    }
    let mut best = [i64::MIN; SMALL_K];
    let mut len = 0;
    for item in items {
        let t = total(item);
        if len == k && t <= best[k - 1] {
            continue;
        }
        // Insert in descending order, dropping the smallest when full.
        let mut at = len.min(k - 1);
        while at > 0 && best[at - 1] < t {
            best[at] = best[at - 1];
            at -= 1;
        }
        best[at] = t;
        len = (len + 1).min(k);
    }
    Some(best[k - 1])
}

/// The largest `k` that [`kth_total_small`] takes.
pub(crate) const SMALL_K: usize = 32;

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The one-pass k-th largest total equals the k-th of the totals sorted in descending order
        /// (equal totals counted apart), and declines a k it does not take.
        #[test]
        fn kth_total_small_equals_the_sorted_one(totals in proptest::collection::vec(-5i64..5, 0..80), k in 0usize..40) {
            let mut sorted = totals.clone();
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            let want = ((1..=SMALL_K).contains(&k) && k <= totals.len()).then(|| sorted[k - 1]);
            prop_assert_eq!(kth_total_small(&totals, k, |t| *t), want);
        }
    }
}
