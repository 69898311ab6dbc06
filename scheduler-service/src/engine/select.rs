//! Picking the best feasible nodes (kube-scheduler's `selectHost` and the top of `prioritizeNodes`
//! Rank lists): the best by total with a seeded tie-break ([`best_candidate`]), and the `k` best
//! ([`keep_top_k`]).

use super::accel::top_k::kth_total_small;

/// The item with the highest (total, tie-break, node index) by `key` (total and index), in one
/// pass that hashes only items tied with the best total so far. For a list in node order, the
/// last of equals, as `max_by_key` picks.
pub(super) fn best_candidate<T>(
    items: impl IntoIterator<Item = T>,
    key: impl Fn(&T) -> (i64, u32),
    tie_break: impl Fn(&T) -> u64,
) -> Option<T> {
    let mut iter = items.into_iter();
    let mut best = iter.next()?;
    let mut best_hash: Option<u64> = None;
    for c in iter {
        let ((total, index), (best_total, best_index)) = (key(&c), key(&best));
        if total > best_total {
            best = c;
            best_hash = None;
        } else if total == best_total {
            let bh = *best_hash.get_or_insert_with(|| tie_break(&best));
            let ch = tie_break(&c);
            if (ch, index) > (bh, best_index) {
                best = c;
                best_hash = Some(ch);
            }
        }
    }
    Some(best)
}

/// Keeps the `k` best of `items` by `cmp` (best first in `cmp`'s order), in no particular
/// order: partitions on the total alone (no hashing), keeps every item above the k-th total, and
/// breaks ties only among the items equal to it. Keeps all when `k` is 0 or covers them.
pub(super) fn keep_top_k<T: Copy>(
    items: &mut Vec<T>,
    k: usize,
    total: impl Fn(&T) -> i64,
    cmp: impl Fn(&T, &T) -> std::cmp::Ordering,
) {
    if k == 0 || k >= items.len() {
        return;
    }
    let threshold = match kth_total_small(items, k, &total) {
        Some(t) => t,
        None => {
            items.select_nth_unstable_by(k - 1, |a, b| total(b).cmp(&total(a)));
            total(&items[k - 1])
        }
    };
    let mut tied: Vec<T> = items.iter().filter(|c| total(c) == threshold).copied().collect();
    items.retain(|c| total(c) > threshold);
    let need = k - items.len();
    if need < tied.len() {
        tied.select_nth_unstable_by(need - 1, cmp);
        tied.truncate(need);
    }
    items.extend(tied);
}
