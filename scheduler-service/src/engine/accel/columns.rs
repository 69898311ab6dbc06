//! The nodes' hot fields by column, and the vector kernel of the plain pass that filters and
//! scores them four at a time.
//!
//! The plain pass (`Evaluator::plain_nodes`) reads, per node, the free cpu, memory and ephemeral
//! storage, whether one more pod fits, and the four numbers NodeResourcesFit's and
//! BalancedAllocation's scores divide. Node by node that is a chain of unpredictable branches and
//! four scalar divisions. Here those fields sit in columns (padded to whole [`BLOCK`]s), and
//! [`Kernel::block`] handles a block of 64 nodes with AVX2: four nodes per instruction, the
//! feasibility of each as a bit, the divisions packed four to an instruction. The arithmetic is
//! operation for operation that of `plain_resource_scores`, on values where it is exact (see
//! [`EXACT`]), so the scores are bit for bit the same; a node outside that range is flagged and
//! taken node by node as before.
//!
//! Mirrors `fit::score_cpu_memory`, `balanced_allocation::score_cpu_memory` and `ImageScale::score`
//! through `plain_resource_scores` (`accel/resource_scores.rs`); held to them by
//! `kernel_filters_and_scores_as_the_scalar_pass`, `kernel_parts_reach_the_bars_as_the_scalar_parts_do`
//! and `plain_resource_scores_equal_the_node_by_node_functions` (`accel/plain_tests.rs`).

use crate::engine::hot::{NodeHot, PortKeys};

/// Nodes per block: one bit each in a `u64`.
pub const BLOCK: usize = 64;

/// Capacities, usages and requests below this are exact in `f64` through every step of the
/// resource scores (sums below 2⁴⁷, a difference times 100 below 2⁵³): the same bound as the
/// scalar path's.
pub const EXACT: i64 = 1 << 46;

/// [`HotColumns::gate`] bit: the node admits one more pod.
const GATE_ROOM: i64 = 1;
/// [`HotColumns::gate`] bit: some cpu or memory field is outside `[0, EXACT)` (or a capacity is
/// 0), so the node is taken by the scalar path.
const GATE_INEXACT: i64 = 2;

/// The hot fields the vector kernel reads, one column per field, in node order, each padded with
/// nodes that are neither feasible nor inexact to a whole number of [`BLOCK`]s.
#[derive(Debug, Default)]
pub struct HotColumns {
    /// Nodes (without the padding).
    len: usize,
    /// Allocatable minus requested millicores (saturating).
    free_cpu: Vec<i64>,
    /// Allocatable minus requested memory (saturating).
    free_memory: Vec<i64>,
    /// Allocatable minus requested ephemeral storage (saturating).
    free_ephemeral: Vec<i64>,
    /// [`GATE_ROOM`] and [`GATE_INEXACT`] bits.
    gate: Vec<i64>,
    /// Allocatable millicores.
    alloc_cpu: Vec<f64>,
    /// Allocatable memory.
    alloc_memory: Vec<f64>,
    /// Requested millicores with scoring defaults (NodeResourcesFit).
    non_zero_cpu: Vec<f64>,
    /// Requested memory with scoring defaults (NodeResourcesFit).
    non_zero_memory: Vec<f64>,
    /// Requested millicores (BalancedAllocation).
    req_cpu: Vec<f64>,
    /// Requested memory (BalancedAllocation).
    req_memory: Vec<f64>,
    /// BalancedAllocation's balance of the node without the pod (it depends on the node alone):
    /// `balance(|f_cpu − f_memory| / 2)` of its requests, as the kernel would compute it.
    balance_without: Vec<i32>,
    /// Node class.
    class: Vec<u32>,
    /// Hash of the node name (tie-breaks).
    name_hash: Vec<u64>,
    /// The host ports in use, as `port_bits` summarizes them (NodePorts).
    port_bits: Vec<u64>,
    /// The host ports in use, as `PortKeys` holds them (NodePorts).
    port_keys: Vec<PortKeys>,
    /// Per block, a bit per node with some extended resource allocatable (`NodeHot::has_scalars`).
    scalar_nodes: Vec<u64>,
    /// The highest class any node has had (an upper bound on those in `class`).
    max_class: u32,
}

impl Clone for HotColumns {
    fn clone(&self) -> Self {
        let mut copy = Self::default();
        copy.clone_from(self);
        copy
    }

    /// Copies into the columns' own buffers (a batch copies the snapshot's into last batch's).
    /// Every field is named, so a new one cannot be left out.
    fn clone_from(&mut self, source: &Self) {
        let Self {
            len,
            free_cpu,
            free_memory,
            free_ephemeral,
            gate,
            alloc_cpu,
            alloc_memory,
            non_zero_cpu,
            non_zero_memory,
            req_cpu,
            req_memory,
            balance_without,
            class,
            name_hash,
            port_bits,
            port_keys,
            scalar_nodes,
            max_class,
        } = self;
        *len = source.len;
        *max_class = source.max_class;
        free_cpu.clone_from(&source.free_cpu);
        free_memory.clone_from(&source.free_memory);
        free_ephemeral.clone_from(&source.free_ephemeral);
        gate.clone_from(&source.gate);
        alloc_cpu.clone_from(&source.alloc_cpu);
        alloc_memory.clone_from(&source.alloc_memory);
        non_zero_cpu.clone_from(&source.non_zero_cpu);
        non_zero_memory.clone_from(&source.non_zero_memory);
        req_cpu.clone_from(&source.req_cpu);
        req_memory.clone_from(&source.req_memory);
        balance_without.clone_from(&source.balance_without);
        class.clone_from(&source.class);
        name_hash.clone_from(&source.name_hash);
        port_bits.clone_from(&source.port_bits);
        port_keys.clone_from(&source.port_keys);
        scalar_nodes.clone_from(&source.scalar_nodes);
    }
}

impl HotColumns {
    /// The columns of these hot fields.
    pub fn of(hot: &[NodeHot]) -> Self {
        let padded = hot.len().div_ceil(BLOCK) * BLOCK;
        let mut c = Self {
            len: hot.len(),
            free_cpu: vec![0; padded],
            free_memory: vec![0; padded],
            free_ephemeral: vec![0; padded],
            gate: vec![0; padded],
            alloc_cpu: vec![0.0; padded],
            alloc_memory: vec![0.0; padded],
            non_zero_cpu: vec![0.0; padded],
            non_zero_memory: vec![0.0; padded],
            req_cpu: vec![0.0; padded],
            req_memory: vec![0.0; padded],
            balance_without: vec![0; padded],
            class: vec![0; padded],
            name_hash: vec![0; padded],
            port_bits: vec![0; padded],
            port_keys: vec![PortKeys::default(); padded],
            scalar_nodes: vec![0; padded / BLOCK],
            max_class: 0,
        };
        for (i, h) in hot.iter().enumerate() {
            c.set(i, h);
        }
        c
    }

    /// Nodes in the columns.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Approximate heap bytes held.
    pub fn approx_bytes(&self) -> usize {
        let padded = self.free_cpu.len();
        padded * (12 * 8 + 4 + 4 + std::mem::size_of::<PortKeys>()) + self.scalar_nodes.len() * 8
    }

    /// Whether there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets node `i`'s fields from its hot fields.
    pub fn set(&mut self, i: usize, h: &NodeHot) {
        let in_capacity = |c: i64| c > 0 && c < EXACT;
        let in_usage = |u: i64| (0..EXACT).contains(&u);
        let exact = in_capacity(h.alloc_cpu)
            && in_capacity(h.alloc_memory)
            && in_usage(h.non_zero_cpu)
            && in_usage(h.non_zero_memory)
            && in_usage(h.req_cpu)
            && in_usage(h.req_memory);
        // As the scalar filter has it: `pod_count + 1 > allowed_pods` rejects.
        let room = h.pod_count.saturating_add(1) <= h.allowed_pods;
        self.free_cpu[i] = h.alloc_cpu.saturating_sub(h.req_cpu);
        self.free_memory[i] = h.alloc_memory.saturating_sub(h.req_memory);
        self.free_ephemeral[i] = h.alloc_ephemeral.saturating_sub(h.req_ephemeral);
        self.gate[i] = if room { GATE_ROOM } else { 0 } | if exact { 0 } else { GATE_INEXACT };
        self.alloc_cpu[i] = h.alloc_cpu as f64;
        self.alloc_memory[i] = h.alloc_memory as f64;
        self.non_zero_cpu[i] = h.non_zero_cpu as f64;
        self.non_zero_memory[i] = h.non_zero_memory as f64;
        self.req_cpu[i] = h.req_cpu as f64;
        self.req_memory[i] = h.req_memory as f64;
        // Only read for exact nodes (capacities above 0), with the kernel's operations.
        self.balance_without[i] = if exact {
            let f_cpu = (self.req_cpu[i] / self.alloc_cpu[i]).min(1.0);
            let f_memory = (self.req_memory[i] / self.alloc_memory[i]).min(1.0);
            // `balanced_allocation::balance` of the standard deviation, operation for operation.
            let std = ((f_cpu - f_memory) * 0.5).abs();
            ((1.0 - std) * crate::engine::plugins::MAX_NODE_SCORE as f64) as i32
        } else {
            0
        };
        self.class[i] = h.class;
        self.name_hash[i] = h.name_hash;
        self.port_bits[i] = h.port_bits;
        self.port_keys[i] = h.port_keys;
        let bit = 1u64 << (i % BLOCK);
        if h.has_scalars {
            self.scalar_nodes[i / BLOCK] |= bit;
        } else {
            self.scalar_nodes[i / BLOCK] &= !bit;
        }
        self.max_class = self.max_class.max(h.class);
    }

    /// Node `i`'s class.
    #[inline(always)]
    pub fn class(&self, i: usize) -> u32 {
        self.class[i]
    }

    /// Whether `ask` may fit node `i` as [`Kernel::block`] decides: `false` only where the
    /// kernel rules the node out on its resources (no room for one more pod, or a resource
    /// short); `true` for a node it takes node by node (out of its exact range).
    #[inline]
    pub fn may_fit(&self, i: usize, ask: &PodAsk) -> bool {
        let gate = self.gate[i];
        if gate & GATE_INEXACT != 0 {
            return true;
        }
        gate & GATE_ROOM != 0
            && ask.want[0] <= self.free_cpu[i]
            && ask.want[1] <= self.free_memory[i]
            && ask.want[2] <= self.free_ephemeral[i]
    }

    /// Hash of node `i`'s name.
    #[inline(always)]
    pub fn name_hash(&self, i: usize) -> u64 {
        self.name_hash[i]
    }

    /// Node `i`'s summary of the host ports in use.
    #[inline(always)]
    pub fn port_bits(&self, i: usize) -> u64 {
        self.port_bits[i]
    }

    /// Of the block at `base`, the nodes with some extended resource allocatable (a bit each):
    /// the only ones a pod requesting one may fit.
    #[inline(always)]
    pub fn scalar_nodes(&self, base: usize) -> u64 {
        self.scalar_nodes[base / BLOCK]
    }

    /// Node `i`'s keys of the host ports in use.
    #[inline(always)]
    pub fn port_keys(&self, i: usize) -> PortKeys {
        self.port_keys[i]
    }

    /// The highest class a node may have: a class table for [`Kernel::block`] needs one entry more.
    pub fn max_class(&self) -> u32 {
        self.max_class
    }
}

/// One pod's side of the kernel: what it asks and how its resources are scored.
#[derive(Debug, Clone, Copy)]
pub struct PodAsk {
    /// cpu, memory and ephemeral storage requested; `i64::MIN` for a resource not asked for
    /// (no node lacks it).
    want: [i64; 3],
    /// NodeResourcesFit's scoring requests (cpu, memory).
    fit: [f64; 2],
    /// BalancedAllocation's requests (cpu, memory).
    balanced: [f64; 2],
    /// MostAllocated instead of LeastAllocated.
    most: bool,
    /// ImageLocality, when the kernel scores it.
    image: Option<ImageAsk>,
}

/// ImageLocality's scale for the kernel: a node's sum of scaled image sizes is clamped to
/// `[min, max]`, and `100 · (clamped − min) / (max − min)` truncated, all exact in `f64` because
/// `100 · (max − min)` is below 2⁵³ (see `plugins::image_locality::ImageScale`).
#[derive(Debug, Clone, Copy)]
pub struct ImageAsk {
    /// The lower threshold.
    pub min: i64,
    /// The upper threshold.
    pub max: i64,
}

impl PodAsk {
    /// The ask of a pod requesting `want` (cpu, memory, ephemeral storage) and scored with these
    /// requests; `None` when a scoring request is outside `[0, EXACT)` (the scalar path takes it).
    pub fn new(want: [i64; 3], fit: [i64; 2], balanced: [i64; 2], most: bool) -> Option<Self> {
        let in_range = |r: i64| (0..EXACT).contains(&r);
        if !(fit.iter().chain(&balanced).all(|&r| in_range(r))) {
            return None;
        }
        Some(Self {
            want: want.map(|w| if w > 0 { w } else { i64::MIN }),
            fit: fit.map(|r| r as f64),
            balanced: balanced.map(|r| r as f64),
            most,
            image: None,
        })
    }

    /// Has the kernel score ImageLocality too, from the sums passed to [`Kernel::block`];
    /// unchanged unless `0 < min < max` and `100 · (max − min)` is below 2⁵³.
    pub fn with_image(mut self, image: ImageAsk) -> Self {
        let exact = image.min > 0
            && image.max > image.min
            && (image.max - image.min).checked_mul(100).is_some_and(|n| n < 1 << 53);
        if exact {
            self.image = Some(image);
        }
        self
    }

    /// Whether the kernel scores ImageLocality.
    pub fn scores_image(&self) -> bool {
        self.image.is_some()
    }
}

/// The kernel's output for one block: per node, the unweighted cpu and memory scores of
/// NodeResourcesFit and BalancedAllocation's score (meaningful for the `fast` nodes only).
#[derive(Debug, Clone)]
pub struct BlockScores {
    /// NodeResourcesFit's cpu score.
    pub cpu: [i32; BLOCK],
    /// NodeResourcesFit's memory score.
    pub memory: [i32; BLOCK],
    /// BalancedAllocation's score.
    pub balanced: [i32; BLOCK],
    /// ImageLocality's score (when the ask has it).
    pub image: [i32; BLOCK],
}

impl Default for BlockScores {
    fn default() -> Self {
        Self {
            cpu: [0; BLOCK],
            memory: [0; BLOCK],
            balanced: [0; BLOCK],
            image: [0; BLOCK],
        }
    }
}

/// Which nodes of a block the kernel passed, one bit each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockMasks {
    /// Of an allowed class, in the exact range, with room for one more pod and enough cpu, memory
    /// and ephemeral storage: scored.
    pub fast: u64,
    /// Of an allowed class, outside the exact range: filter and score them node by node.
    pub slow: u64,
}

/// The weights of a node's per-node part: NodeResourcesFit's cpu and memory weights, then the
/// weights of its fit, balanced and image scores (see `NodeScores::weighed` in the framework).
#[derive(Debug, Clone, Copy)]
pub struct PartWeights {
    cpu: f64,
    memory: f64,
    /// Equal cpu and memory weights: the fit score is `(cpu + memory) / 2`.
    equal: bool,
    fit: f64,
    balanced: f64,
    image: f64,
}

impl PartWeights {
    /// Below this every weight keeps the part exact in `f64` and within `i32`.
    const LIMIT: i64 = 1 << 20;

    /// The weights, `None` when one is outside `[0, 2²⁰)`.
    pub fn new((cpu, memory): (i64, i64), [fit, balanced, image]: [i64; 3]) -> Option<Self> {
        let ok = [cpu, memory, fit, balanced, image]
            .iter()
            .all(|w| (0..Self::LIMIT).contains(w));
        ok.then_some(Self {
            cpu: cpu as f64,
            memory: memory as f64,
            equal: cpu == memory,
            fit: fit as f64,
            balanced: balanced as f64,
            image: image as f64,
        })
    }
}

/// Panics unless `base` starts a block within the columns and `allowed` covers every class: what
/// keeps the kernel's loads in bounds.
fn check_block(cols: &HotColumns, base: usize, allowed: &[i32]) {
    assert!(
        base.is_multiple_of(BLOCK) && base + BLOCK <= cols.gate.len(),
        "block {base} out of the columns"
    );
    assert!(
        allowed.len() > cols.max_class as usize,
        "class table shorter than the classes"
    );
}

/// The vector kernel, when this CPU has what it needs (AVX2).
#[derive(Debug, Clone, Copy)]
pub struct Kernel(());

impl Kernel {
    /// The kernel, `None` on a CPU without AVX2 (the scalar pass runs instead).
    pub fn detect() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                return Some(Self(()));
            }
        }
        None
    }

    /// Filters and scores the block of nodes starting at `base` (a multiple of [`BLOCK`]) for
    /// `ask`, writing the scores of the `fast` nodes into `out`. `allowed` has, per class, -1 when
    /// the pod's static predicates allow it and 0 when they reject it (nodes of a rejected class
    /// are in neither mask); it must cover [`HotColumns::max_class`]. `image_sums` has each node's
    /// sum of scaled image sizes (padded like the columns) when the ask scores ImageLocality.
    #[inline]
    pub fn block(
        self,
        cols: &HotColumns,
        base: usize,
        ask: &PodAsk,
        allowed: &[i32],
        image_sums: &[i64],
        out: &mut BlockScores,
    ) -> BlockMasks {
        check_block(cols, base, allowed);
        assert!(
            ask.image.is_none() || base + BLOCK <= image_sums.len(),
            "image sums shorter than the columns"
        );
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: `Kernel` exists only where AVX2 was detected, and the assertions keep every
            // load within the columns (each padded to whole blocks), the image sums, and the class
            // table (every class is at most `max_class`, below 2³¹ since the table is that long).
            unsafe { avx2::block(cols, base, ask, allowed, image_sums, out) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (cols, base, ask, allowed, image_sums, out);
            unreachable!("no kernel is detected off x86_64")
        }
    }
}

impl Kernel {
    /// The least and greatest of `values[base..base + BLOCK]` at the bits of `nodes`, widening
    /// `extrema` (a block without any node leaves it as it is).
    #[inline]
    pub fn extrema(self, values: &[f64], base: usize, nodes: u64, extrema: &mut (f64, f64)) {
        assert!(base + BLOCK <= values.len(), "block {base} out of the values");
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: AVX2 was detected, and the assertion keeps the loads within `values`.
            unsafe { avx2::extrema(values, base, nodes, extrema) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (values, base, nodes, extrema);
            unreachable!("no kernel is detected off x86_64")
        }
    }

    /// [`Kernel::block`]'s masks alone, without scoring any node.
    #[inline]
    pub fn masks(self, cols: &HotColumns, base: usize, ask: &PodAsk, allowed: &[i32]) -> BlockMasks {
        check_block(cols, base, allowed);
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: as in `block`: AVX2 was detected, and the assertions keep every load within
            // the columns and the class table.
            unsafe { avx2::masks(cols, base, ask, allowed) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (cols, base, ask, allowed);
            unreachable!("no kernel is detected off x86_64")
        }
    }

    /// Of the block at `base` whose scores [`Kernel::block`] wrote into `out`, the nodes whose
    /// per-node part reaches `bars` of their class (bit set when `part >= bars[class]`); only
    /// the bits of the block's `fast` nodes mean anything. With `extra`, each node's part is
    /// that much more (a non-negative bound of what a sink adds, below 10⁸), truncated. `bars`
    /// must cover [`HotColumns::max_class`].
    #[inline]
    pub fn reaching(
        self,
        cols: &HotColumns,
        base: usize,
        out: &BlockScores,
        w: &PartWeights,
        extra: Option<&[f64; BLOCK]>,
        bars: &[i64],
    ) -> u64 {
        assert!(
            base.is_multiple_of(BLOCK) && base + BLOCK <= cols.class.len(),
            "block {base} out of the columns"
        );
        assert!(bars.len() > cols.max_class as usize, "bars shorter than the classes");
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: as in `block`: AVX2 was detected, and the assertions keep every load within
            // the class column and the bars (every class is at most `max_class`).
            unsafe { avx2::reaching(cols, base, out, w, extra, bars) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (cols, base, out, w, extra, bars);
            unreachable!("no kernel is detected off x86_64")
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{BlockMasks, BlockScores, HotColumns, ImageAsk, PartWeights, PodAsk, BLOCK};
    use std::arch::x86_64::*;

    /// See [`super::Kernel::reaching`]. Every score is a small non-negative integer and every
    /// weight below 2²⁰, so each step is exact in `f64`: the fit score `(cpu + memory) / 2`, or
    /// `(cpu · w_cpu + memory · w_memory) / (w_cpu + w_memory)` truncated (an integer quotient of
    /// at most 100 of a numerator below 2⁵³), then the weighted sum, below 2³¹.
    #[target_feature(enable = "avx2")]
    pub(in crate::engine) unsafe fn reaching(
        cols: &HotColumns,
        base: usize,
        out: &BlockScores,
        w: &PartWeights,
        extra: Option<&[f64; BLOCK]>,
        bars: &[i64],
    ) -> u64 {
        let (w_cpu, w_memory) = (_mm256_set1_pd(w.cpu), _mm256_set1_pd(w.memory));
        let weight_sum = _mm256_set1_pd(w.cpu + w.memory);
        let (w_fit, w_balanced, w_image) = (
            _mm256_set1_pd(w.fit),
            _mm256_set1_pd(w.balanced),
            _mm256_set1_pd(w.image),
        );
        let half = _mm256_set1_pd(0.5);
        let mut reach = 0u64;
        macro_rules! ld {
            ($v:expr, $k:expr) => {
                _mm256_cvtepi32_pd(_mm_loadu_si128($v.as_ptr().add($k).cast()))
            };
        }
        for k in (0..BLOCK).step_by(4) {
            let (cpu, memory) = (ld!(out.cpu, k), ld!(out.memory, k));
            let fit = if w.equal {
                _mm256_round_pd::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(_mm256_mul_pd(
                    _mm256_add_pd(cpu, memory),
                    half,
                ))
            } else if w.cpu + w.memory == 0.0 {
                _mm256_setzero_pd()
            } else {
                let n = _mm256_add_pd(_mm256_mul_pd(cpu, w_cpu), _mm256_mul_pd(memory, w_memory));
                _mm256_round_pd::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(_mm256_div_pd(n, weight_sum))
            };
            let part = _mm256_add_pd(
                _mm256_add_pd(
                    _mm256_mul_pd(fit, w_fit),
                    _mm256_mul_pd(ld!(out.balanced, k), w_balanced),
                ),
                _mm256_mul_pd(ld!(out.image, k), w_image),
            );
            // A sink's bound is added before truncating: the integer part of the sum is at least
            // the node's whole part when the bound is at least what the sink adds.
            let part = match extra {
                Some(extra) => _mm256_add_pd(part, _mm256_loadu_pd(extra.as_ptr().add(k))),
                None => part,
            };
            let part = _mm256_cvtepi32_epi64(_mm256_cvttpd_epi32(part));
            let class = _mm_loadu_si128(cols.class.as_ptr().add(base + k).cast());
            let bar = _mm256_i32gather_epi64::<8>(bars.as_ptr(), class);
            let below = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(bar, part))) as u64;
            reach |= (!below & 0xf) << k;
        }
        reach
    }

    /// ImageLocality's scores of a block from its sums: clamp in integers, then the exact `f64`
    /// division of [`ImageAsk`] (the clamped excess is below 2⁴⁷, so it converts exactly through
    /// the 2⁵² bias).
    #[target_feature(enable = "avx2")]
    unsafe fn image_scores(image: ImageAsk, sums: &[i64], out: &mut [i32; BLOCK]) {
        let min = _mm256_set1_epi64x(image.min);
        let max = _mm256_set1_epi64x(image.max);
        let span = _mm256_set1_pd((image.max - image.min) as f64);
        let hundred = _mm256_set1_pd(crate::engine::plugins::MAX_NODE_SCORE as f64);
        let bias_bits = _mm256_set1_epi64x(0x4330_0000_0000_0000);
        let bias = _mm256_set1_pd(4_503_599_627_370_496.0);
        for k in (0..BLOCK).step_by(4) {
            let sum = _mm256_loadu_si256(sums.as_ptr().add(k).cast());
            let low = _mm256_blendv_epi8(sum, min, _mm256_cmpgt_epi64(min, sum));
            let clamped = _mm256_blendv_epi8(low, max, _mm256_cmpgt_epi64(low, max));
            let excess = _mm256_sub_epi64(clamped, min);
            let excess = _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(excess, bias_bits)), bias);
            let q = _mm256_div_pd(_mm256_mul_pd(excess, hundred), span);
            _mm_storeu_si128(out.as_mut_ptr().add(k).cast(), _mm256_cvttpd_epi32(q));
        }
    }

    /// See [`super::Kernel::extrema`]: each lane keeps its running least and greatest, a node
    /// outside `nodes` read as +∞ for the least and −∞ for the greatest.
    #[target_feature(enable = "avx2")]
    pub(in crate::engine) unsafe fn extrema(values: &[f64], base: usize, nodes: u64, extrema: &mut (f64, f64)) {
        let bits = _mm256_set_epi64x(8, 4, 2, 1);
        let (inf, neg_inf) = (_mm256_set1_pd(f64::INFINITY), _mm256_set1_pd(f64::NEG_INFINITY));
        let (mut least, mut greatest) = (inf, neg_inf);
        for k in (0..BLOCK).step_by(4) {
            let four = _mm256_set1_epi64x(((nodes >> k) & 0xf) as i64);
            let on = _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_and_si256(four, bits), bits));
            let v = _mm256_loadu_pd(values.as_ptr().add(base + k));
            least = _mm256_min_pd(least, _mm256_blendv_pd(inf, v, on));
            greatest = _mm256_max_pd(greatest, _mm256_blendv_pd(neg_inf, v, on));
        }
        let (mut lo, mut hi) = ([0.0; 4], [0.0; 4]);
        _mm256_storeu_pd(lo.as_mut_ptr(), least);
        _mm256_storeu_pd(hi.as_mut_ptr(), greatest);
        extrema.0 = lo.into_iter().fold(extrema.0, f64::min);
        extrema.1 = hi.into_iter().fold(extrema.1, f64::max);
    }

    /// See [`super::Kernel::masks`].
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(in crate::engine) unsafe fn masks(cols: &HotColumns, base: usize, ask: &PodAsk, allowed: &[i32]) -> BlockMasks {
        let want_cpu = _mm256_set1_epi64x(ask.want[0]);
        let want_memory = _mm256_set1_epi64x(ask.want[1]);
        let want_ephemeral = _mm256_set1_epi64x(ask.want[2]);
        // Macros, not closures: the loads stay inside this function's AVX2 code.
        macro_rules! ld_i {
            ($v:expr, $i:expr) => {
                _mm256_loadu_si256($v.as_ptr().add($i).cast())
            };
        }
        // Nodes of a class the pod's static predicates allow, eight classes per gather.
        let mut classes_ok = 0u64;
        for k in (0..BLOCK).step_by(8) {
            let class = _mm256_loadu_si256(cols.class.as_ptr().add(base + k).cast());
            let ok = _mm256_i32gather_epi32::<4>(allowed.as_ptr(), class);
            classes_ok |= (_mm256_movemask_ps(_mm256_castsi256_ps(ok)) as u32 as u64) << k;
        }
        let (mut fast, mut slow) = (0u64, 0u64);
        for k in (0..BLOCK).step_by(4) {
            let i = base + k;
            // Feasibility: a resource asked for and more than the free amount rejects.
            let short = _mm256_or_si256(
                _mm256_or_si256(
                    _mm256_cmpgt_epi64(want_cpu, ld_i!(cols.free_cpu, i)),
                    _mm256_cmpgt_epi64(want_memory, ld_i!(cols.free_memory, i)),
                ),
                _mm256_cmpgt_epi64(want_ephemeral, ld_i!(cols.free_ephemeral, i)),
            );
            let gate = ld_i!(cols.gate, i);
            let room = _mm256_slli_epi64::<63>(gate);
            let inexact = _mm256_slli_epi64::<62>(gate);
            // Sign bits: room, not inexact, not short.
            let ok = _mm256_andnot_si256(_mm256_or_si256(inexact, short), room);
            fast |= (_mm256_movemask_pd(_mm256_castsi256_pd(ok)) as u64) << k;
            slow |= (_mm256_movemask_pd(_mm256_castsi256_pd(inexact)) as u64) << k;
        }
        BlockMasks {
            fast: fast & classes_ok,
            slow: slow & classes_ok,
        }
    }

    /// See [`super::Kernel::block`].
    #[target_feature(enable = "avx2")]
    pub(in crate::engine) unsafe fn block(
        cols: &HotColumns,
        base: usize,
        ask: &PodAsk,
        allowed: &[i32],
        image_sums: &[i64],
        out: &mut BlockScores,
    ) -> BlockMasks {
        let masks = masks(cols, base, ask, allowed);
        // A block with no node to score (a rejected class, nodes full) is left at its masks.
        if masks.fast == 0 {
            return masks;
        }
        let fit_cpu = _mm256_set1_pd(ask.fit[0]);
        let fit_memory = _mm256_set1_pd(ask.fit[1]);
        let bal_cpu = _mm256_set1_pd(ask.balanced[0]);
        let bal_memory = _mm256_set1_pd(ask.balanced[1]);
        let hundred = _mm256_set1_pd(crate::engine::plugins::MAX_NODE_SCORE as f64);
        let one = _mm256_set1_pd(1.0);
        let sign = _mm256_set1_pd(-0.0);
        let half = _mm256_set1_pd(0.5);
        let fifty = _mm_set1_epi32((crate::engine::plugins::MAX_NODE_SCORE / 2) as i32);
        macro_rules! ld_f {
            ($v:expr, $i:expr) => {
                _mm256_loadu_pd($v.as_ptr().add($i))
            };
        }
        if let Some(image) = ask.image {
            image_scores(image, &image_sums[base..base + BLOCK], &mut out.image);
        }
        for k in (0..BLOCK).step_by(4) {
            let i = base + k;
            let alloc_cpu = ld_f!(cols.alloc_cpu, i);
            let alloc_memory = ld_f!(cols.alloc_memory, i);
            // NodeResourcesFit, as `plain_resource_scores`: the requested amount capped at the
            // capacity, then (capacity − it) or it, times 100, over the capacity.
            let capped_cpu = _mm256_min_pd(_mm256_add_pd(ld_f!(cols.non_zero_cpu, i), fit_cpu), alloc_cpu);
            let capped_memory = _mm256_min_pd(_mm256_add_pd(ld_f!(cols.non_zero_memory, i), fit_memory), alloc_memory);
            let (n_cpu, n_memory) = if ask.most {
                (capped_cpu, capped_memory)
            } else {
                (
                    _mm256_sub_pd(alloc_cpu, capped_cpu),
                    _mm256_sub_pd(alloc_memory, capped_memory),
                )
            };
            let q_cpu = _mm256_div_pd(_mm256_mul_pd(n_cpu, hundred), alloc_cpu);
            let q_memory = _mm256_div_pd(_mm256_mul_pd(n_memory, hundred), alloc_memory);
            // BalancedAllocation: the balance 100 × (1 − |f_cpu − f_memory| / 2) (each fraction
            // capped at 1, truncated) with the pod and without it, then
            // 50 + (50 + with − without) / 2 in integers (never negative: a shift halves it).
            let req_cpu = ld_f!(cols.req_cpu, i);
            let req_memory = ld_f!(cols.req_memory, i);
            let balance = |cpu: __m256d, memory: __m256d| {
                let f_cpu = _mm256_min_pd(_mm256_div_pd(cpu, alloc_cpu), one);
                let f_memory = _mm256_min_pd(_mm256_div_pd(memory, alloc_memory), one);
                // Halving by a multiplication: x · 0.5 and x / 2 are the same correctly rounded x / 2.
                let std = _mm256_andnot_pd(sign, _mm256_mul_pd(_mm256_sub_pd(f_cpu, f_memory), half));
                _mm256_cvttpd_epi32(_mm256_mul_pd(_mm256_sub_pd(one, std), hundred))
            };
            let with_pod = balance(_mm256_add_pd(req_cpu, bal_cpu), _mm256_add_pd(req_memory, bal_memory));
            let without_pod = _mm_loadu_si128(cols.balance_without.as_ptr().add(i).cast());
            let b = _mm_add_epi32(
                fifty,
                _mm_srai_epi32::<1>(_mm_sub_epi32(_mm_add_epi32(fifty, with_pod), without_pod)),
            );
            _mm_storeu_si128(out.cpu.as_mut_ptr().add(k).cast(), _mm256_cvttpd_epi32(q_cpu));
            _mm_storeu_si128(out.memory.as_mut_ptr().add(k).cast(), _mm256_cvttpd_epi32(q_memory));
            _mm_storeu_si128(out.balanced.as_mut_ptr().add(k).cast(), b);
        }
        masks
    }
}
