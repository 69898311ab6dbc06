//! NodeResourcesFit's cpu and memory scores and BalancedAllocation's score on one node, as the
//! plain pass ([`super::plain`]) computes them from the node's hot fields: in floating point
//! where that is exact, by the plugins' integer functions otherwise.

use crate::engine::framework::MAX_NODE_SCORE;
use crate::engine::plugins::noderesources::balanced_allocation;
use crate::engine::snapshot::NodeHot;

/// Capacities at or above this are scored by the integer path in [`plain_resource_scores`].
pub(in crate::engine) const EXACT_CAPACITY: i64 = 1 << 46;

/// NodeResourcesFit's cpu and memory scores (unweighted) and BalancedAllocation's score on one
/// node, as [`fit::score_cpu_memory`] and [`balanced_allocation::score_cpu_memory`] compute them, with their
/// four divisions all in floating point (two of them were integer divisions, several times slower).
///
/// Exact: the integer quotient `n · 100 / c` (0 ≤ n ≤ c) is the truncated float quotient, since
/// both convert exactly (below 2⁵³) and a true quotient that is not an integer lies at least
/// `1 / (101 · c)` below the next one, more than the rounding error when `c < 2⁴⁶`. `None` (the
/// caller takes the integer path) for a capacity out of that range or a negative request.
#[inline(always)]
pub(in crate::engine) fn plain_resource_scores(
    h: &NodeHot,
    fit: [i64; 2],
    balanced: [i64; 2],
    most: bool,
) -> Option<(i64, i64, i64)> {
    let in_range = |c: i64| c > 0 && c < EXACT_CAPACITY;
    if !(in_range(h.alloc_cpu) && in_range(h.alloc_memory)) {
        return None;
    }
    let requested = [
        h.non_zero_cpu.saturating_add(fit[0]),
        h.non_zero_memory.saturating_add(fit[1]),
    ];
    if requested[0] < 0 || requested[1] < 0 {
        return None;
    }
    let alloc = [h.alloc_cpu, h.alloc_memory];
    let capped = [requested[0].min(alloc[0]), requested[1].min(alloc[1])];
    let numerator = if most {
        capped
    } else {
        [alloc[0] - capped[0], alloc[1] - capped[1]]
    };
    let alloc = [alloc[0] as f64, alloc[1] as f64];
    let n = [
        (numerator[0] * MAX_NODE_SCORE) as f64,
        (numerator[1] * MAX_NODE_SCORE) as f64,
    ];
    let q = [n[0] / alloc[0], n[1] / alloc[1]];
    // BalancedAllocation, operation for operation as `balanced_allocation::score_cpu_memory`:
    // the balance with the pod against the balance without it.
    let balance = |cpu: f64, memory: f64| {
        let f = [(cpu / alloc[0]).min(1.0), (memory / alloc[1]).min(1.0)];
        balanced_allocation::balance(((f[0] - f[1]) / 2.0).abs())
    };
    let with_pod = balance(
        h.req_cpu.saturating_add(balanced[0]) as f64,
        h.req_memory.saturating_add(balanced[1]) as f64,
    );
    let without_pod = balance(h.req_cpu as f64, h.req_memory as f64);
    Some((
        q[0] as i64,
        q[1] as i64,
        balanced_allocation::improvement(with_pod, without_pod),
    ))
}
