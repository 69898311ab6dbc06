//! A pod's pass over a large cluster's nodes on two cores.
//!
//! A batch is placed pod after pod (each placement takes room the next pod sees), so the only
//! way one Schedule call uses a second core is to split each pod's pass over the nodes, as
//! kube-scheduler runs its filters and scores on `parallelism` goroutines. A pod's pass is about
//! 170 µs at 50,000 nodes, so handing half of it over must cost a few microseconds. Measured on
//! a 2-core VM:
//!
//! - a thread started per pod costs about 50 µs;
//! - a rayon pool's idle worker sleeps between pods, and waking it took about 55 µs, so the two
//!   halves barely overlapped (a batch of the engine bench at 50,000 nodes took 9% less time,
//!   against 37% with the helper below).
//!
//! So [`join`] hands its second half to a helper thread that waits for the next job, spinning
//! (and yielding its core to any other thread ready on it), for [`HELPER_SPIN`] after each job
//! before it parks: within a batch it is awake when the next pod's half comes. The caller runs
//! the first half itself and, should the helper not have started the second by then (it is busy
//! with another call's, or was descheduled), takes it back and runs it too. Each half runs in the
//! caller's cancellation scope ([`super::cancel`]), so a call that ends stops both.
//!
//! A pass is split only while its call is the only evaluation in progress in the process
//! ([`Busy`]): two calls at once use both cores already, and the helper parks at once.
//!
//! There is one helper per process (two halves, two cores), started on first use unless
//! [`set_threads`] chose 1 (never split) or the process has one core.

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use thiserror::Error;

/// Nodes from which a pod's pass is split in two ([`halves`]). Measured with the engine
/// bench's distinct pods on two cores: 1.4 times as fast at 5,000 nodes and 1.6 at 50,000, a
/// few percent at 2,000, slower at 1,000 (the halves, about 2 µs each, are then shorter than
/// handing one over).
pub const MIN_SPLIT_NODES: usize = 4_096;

/// How long the helper waits for its next job, spinning, before it parks (longer than the gap
/// between two pods' passes in a batch, so it stays awake through a batch).
pub const HELPER_SPIN: Duration = Duration::from_micros(300);

/// How many threads a pod's pass may use, once chosen: by [`set_threads`], or by the first
/// [`threads`] call.
static THREADS: OnceLock<usize> = OnceLock::new();

/// The helper, started by the first [`join`] when [`threads`] is 2 or more (`None` if the
/// thread could not start: the halves then run one after the other).
static HELPER: OnceLock<Option<&'static Helper>> = OnceLock::new();

/// Why [`set_threads`] did not take.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ParallelError {
    /// The thread count was already chosen (by an earlier call or a first pass).
    #[error("the node pass threads are already set to {0}")]
    AlreadySet(usize),
}

/// Sets how many threads a pod's pass may use: 1 never splits it, 2 or more split it in two
/// (the halves take two cores), 0 is [`default_threads`]; only before the first pass of the
/// process.
pub fn set_threads(n: usize) -> Result<(), ParallelError> {
    let n = if n == 0 { default_threads() } else { n.min(2) };
    THREADS.set(n).map_err(|_| ParallelError::AlreadySet(threads()))
}

/// How many threads a pod's pass may use (1 or 2): as set by [`set_threads`], else
/// [`default_threads`].
pub fn threads() -> usize {
    *THREADS.get_or_init(default_threads)
}

/// Two threads where the process may run on two cores or more, else one.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| usize::from(n).min(2))
}

/// Evaluations (Schedule and Rank calls) in progress in the process.
static BUSY: AtomicUsize = AtomicUsize::new(0);

/// One evaluation in progress (a Schedule or Rank call), counted while it lives: a pass is split
/// only while its call is the process's only one (with two, the cores are taken already), and
/// the helper waits for work only then (it parks at once otherwise).
#[must_use = "the evaluation is counted until this is dropped"]
pub struct Busy(());

impl Busy {
    /// Counts an evaluation until the returned guard is dropped.
    pub fn enter() -> Self {
        BUSY.fetch_add(1, Ordering::SeqCst);
        Self(())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        BUSY.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether at most one evaluation is in progress (the caller's own): its passes may be split.
pub fn alone() -> bool {
    BUSY.load(Ordering::Relaxed) <= 1
}

/// Where to split a pass over `nodes` nodes (a multiple of `align`, so both halves start on a
/// block of the vector kernel), or `None` when it runs whole: fewer than `from` nodes (the
/// caller's threshold: [`MIN_SPLIT_NODES`] where there are two threads), or too few to split.
pub fn halves(nodes: usize, align: usize, from: usize) -> Option<usize> {
    if nodes < from {
        return None;
    }
    let align = align.max(1);
    let mid = nodes.div_ceil(align).div_ceil(2) * align;
    (mid > 0 && mid < nodes).then_some(mid)
}

/// Runs `a` on this thread and `b` on the helper at the same time, both in the caller's
/// cancellation scope, and returns both results. `b` runs here after `a` when there is no
/// helper (one thread), it is busy with another call's half, or it had not started `b` by the
/// time `a` ended. A panic in either is resumed here, after both ended.
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA,
    B: FnOnce() -> RB + Send,
    RB: Send,
{
    join_with(helper(), a, b)
}

/// [`join`] with `helper`.
fn join_with<A, B, RA, RB>(helper: Option<&'static Helper>, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA,
    B: FnOnce() -> RB + Send,
    RB: Send,
{
    let Some(helper) = helper.filter(|h| h.reserve()) else {
        let first = a();
        return (first, b());
    };
    let flag = super::cancel::current();
    let mut b = Some(b);
    let mut second: Option<RB> = None;
    let mut job = || {
        let _scope = flag.clone().map(super::cancel::Scope::enter);
        if let Some(b) = b.take() {
            second = Some(b());
        }
    };
    let handed = HandedOver::publish(helper, &mut job);
    let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(a));
    // Waits for `job` to end (or takes it back): only then may it go out of scope.
    let panicked = handed.finish();
    let first = first.unwrap_or_else(|e| std::panic::resume_unwind(e));
    if let Some(e) = panicked {
        std::panic::resume_unwind(e);
    }
    // `job` ran to its end, so `second` is set (had `b` panicked, the panic was resumed above).
    let Some(second) = second else {
        unreachable!("the second half of a join ended without a result")
    };
    (first, second)
}

/// The helper, started on first use (`None` with one thread, or when it could not start).
fn helper() -> Option<&'static Helper> {
    if threads() < 2 {
        return None;
    }
    *HELPER.get_or_init(Helper::start)
}

/// The helper has no job.
const IDLE: u8 = 0;
/// A job is published and not yet taken.
const PUBLISHED: u8 = 1;
/// The helper is running the job.
const RUNNING: u8 = 2;
/// The helper ran the job to its end (or its panic).
const DONE: u8 = 3;

/// A panic's payload, carried from the thread it happened on to the caller.
type Panic = Box<dyn Any + Send>;

/// A job as the helper holds it: the caller's closure, its lifetime erased.
struct JobPtr(*mut (dyn FnMut() + Send + 'static));

// SAFETY: the closure it points to is `Send`, and only one thread calls it at a time: the helper
// between taking it (PUBLISHED → RUNNING) and marking it DONE, or the caller after taking it back
// (PUBLISHED → IDLE); `join` does not return before one of them ended it.
unsafe impl Send for JobPtr {}

/// The helper thread's side of [`join`].
struct Helper {
    /// Held by the one `join` using the helper (others run both halves themselves).
    reserved: AtomicBool,
    /// IDLE, PUBLISHED, RUNNING or DONE.
    state: AtomicU8,
    /// The published job, and the panic it ended with.
    slot: Mutex<(Option<JobPtr>, Option<Panic>)>,
    /// Set while the helper is parked (or about to park): a publisher then unparks it.
    parked: AtomicBool,
    /// The helper thread, to unpark.
    thread: Thread,
}

impl Helper {
    /// Starts the helper thread (`None` when it could not start).
    fn start() -> Option<&'static Helper> {
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("placement-pass".into())
            .spawn(move || {
                let Ok(helper) = rx.recv() else {
                    return;
                };
                Helper::run(helper);
            })
            .ok()?;
        let helper: &'static Helper = Box::leak(Box::new(Helper {
            reserved: AtomicBool::new(false),
            state: AtomicU8::new(IDLE),
            slot: Mutex::new((None, None)),
            parked: AtomicBool::new(false),
            thread: spawned.thread().clone(),
        }));
        tx.send(helper).ok()?;
        Some(helper)
    }

    /// Takes the helper for one `join`; false when another holds it.
    fn reserve(&self) -> bool {
        self.reserved
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// The helper thread: runs each published job, spinning [`HELPER_SPIN`] for the next before
    /// it parks.
    fn run(&self) {
        loop {
            let since = Instant::now();
            let mut spins = 0u32;
            while self.state.load(Ordering::Acquire) != PUBLISHED {
                spins = spins.wrapping_add(1);
                // No evaluation to help, or several (none splits), or long enough: park.
                let idle = || BUSY.load(Ordering::Relaxed) != 1 || since.elapsed() >= HELPER_SPIN;
                if spins.is_multiple_of(64) && idle() {
                    self.parked.store(true, Ordering::SeqCst);
                    // A job published before `parked` was seen set: not parked for.
                    if self.state.load(Ordering::SeqCst) != PUBLISHED {
                        std::thread::park();
                    }
                    self.parked.store(false, Ordering::SeqCst);
                    break;
                }
                if spins.is_multiple_of(64) {
                    // Another process's thread ready on this core runs meanwhile.
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            if self
                .state
                .compare_exchange(PUBLISHED, RUNNING, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            let job = self.slot.lock().0.take();
            let panicked = job.and_then(|JobPtr(f)| {
                // SAFETY: `join` published `f` and waits for DONE before the closure goes out of
                // scope; the RUNNING state makes this the only call.
                let f = unsafe { &mut *f };
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).err()
            });
            self.slot.lock().1 = panicked;
            self.state.store(DONE, Ordering::Release);
        }
    }
}

/// A job published to the helper by [`join`], which must [`HandedOver::finish`] it before the
/// job goes out of scope.
struct HandedOver {
    helper: &'static Helper,
}

impl HandedOver {
    /// Publishes `job` to the reserved `helper` and wakes it if it is parked.
    fn publish<'j>(helper: &'static Helper, job: &'j mut (dyn FnMut() + Send + 'j)) -> Self {
        let ptr: *mut (dyn FnMut() + Send + 'j) = job;
        // SAFETY: only the lifetime is changed; `finish` (called by `join` before `job` goes out
        // of scope, whatever `a` did) returns only once the helper no longer holds it.
        let ptr: *mut (dyn FnMut() + Send + 'static) = unsafe { std::mem::transmute(ptr) };
        helper.slot.lock().0 = Some(JobPtr(ptr));
        helper.state.store(PUBLISHED, Ordering::SeqCst);
        if helper.parked.load(Ordering::SeqCst) {
            helper.thread.unpark();
        }
        Self { helper }
    }

    /// Ends the job: takes it back and runs it here if the helper has not started it, or else
    /// waits until the helper ended it; returns its panic, if it panicked; frees the helper.
    fn finish(self) -> Option<Panic> {
        let helper = self.helper;
        let panicked = if helper
            .state
            .compare_exchange(PUBLISHED, IDLE, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            let job = helper.slot.lock().0.take();
            job.and_then(|JobPtr(f)| {
                // SAFETY: taken back before the helper started it: this thread alone calls it,
                // while the closure is still in scope.
                let f = unsafe { &mut *f };
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).err()
            })
        } else {
            let mut spins = 0u32;
            while helper.state.load(Ordering::Acquire) != DONE {
                spins = spins.wrapping_add(1);
                if spins < 1 << 16 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            let panicked = helper.slot.lock().1.take();
            helper.state.store(IDLE, Ordering::Release);
            panicked
        };
        helper.reserved.store(false, Ordering::Release);
        panicked
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    use super::*;
    use crate::engine::cancel::{requested, Scope};

    #[test]
    fn both_halves_run_in_the_callers_scope() {
        assert_eq!(join(requested, requested), (false, false), "outside a scope");
        let _scope = Scope::enter(Arc::new(AtomicBool::new(true)));
        assert_eq!(join(requested, requested), (true, true));
    }

    #[test]
    fn both_results_come_back_in_order_from_borrowed_data() {
        let data: Vec<u64> = (0..100_000).collect();
        let (lo, hi) = data.split_at(50_000);
        for _ in 0..1000 {
            let (a, b) = join(|| lo.iter().sum::<u64>(), || hi.iter().sum::<u64>());
            assert_eq!((a, b), ((0..50_000).sum(), (50_000..100_000).sum()));
        }
    }

    #[test]
    fn concurrent_callers_each_get_both_halves_once() {
        let runs = Arc::new(AtomicUsize::new(0));
        let callers: Vec<_> = (0..4u64)
            .map(|t| {
                let runs = Arc::clone(&runs);
                std::thread::spawn(move || {
                    for i in 0..2000u64 {
                        let (a, b) = join(
                            || {
                                runs.fetch_add(1, Ordering::Relaxed);
                                t * i
                            },
                            || {
                                runs.fetch_add(1, Ordering::Relaxed);
                                t + i
                            },
                        );
                        assert_eq!((a, b), (t * i, t + i));
                    }
                })
            })
            .collect();
        for c in callers {
            c.join().expect("no caller panics");
        }
        assert_eq!(
            runs.load(Ordering::Relaxed),
            4 * 2000 * 2,
            "every half ran exactly once"
        );
    }

    #[test]
    fn a_panic_in_either_half_reaches_the_caller_and_the_helper_lives_on() {
        let second = std::panic::catch_unwind(|| join(|| 1, || -> i32 { panic!("second half") }));
        assert!(second.is_err());
        let first = std::panic::catch_unwind(|| join(|| -> i32 { panic!("first half") }, || 2));
        assert!(first.is_err());
        assert_eq!(join(|| 1, || 2), (1, 2), "joins still work after panics");
    }

    #[test]
    fn a_parked_helper_wakes_for_the_next_job() {
        let helper = Helper::start().expect("the helper starts");
        let here = std::thread::current().id();
        for _ in 0..3 {
            let since = Instant::now();
            while !helper.parked.load(Ordering::SeqCst) {
                assert!(since.elapsed() < Duration::from_secs(10), "the idle helper parks");
                std::thread::yield_now();
            }
            let ran_on = Mutex::new(None);
            join_with(
                Some(helper),
                // The first half waits for the second to run on the helper: had the helper not
                // woken, this thread would take it back and run it itself.
                || {
                    let since = Instant::now();
                    while ran_on.lock().is_none() && since.elapsed() < Duration::from_secs(10) {
                        std::thread::yield_now();
                    }
                },
                || *ran_on.lock() = Some(std::thread::current().id()),
            );
            let ran_on = ran_on.into_inner().expect("the second half ran");
            assert_ne!(ran_on, here, "the second half ran on the helper");
        }
    }

    #[test]
    fn two_evaluations_in_progress_are_not_alone() {
        let _first = Busy::enter();
        let _second = Busy::enter();
        assert!(!alone(), "another evaluation is in progress");
    }

    #[test]
    fn halves_split_large_passes_on_block_boundaries() {
        let from = MIN_SPLIT_NODES;
        assert_eq!(halves(from - 1, 64, from), None, "too small to split");
        let mid = halves(50_000, 64, from).expect("50,000 nodes split");
        assert_eq!(mid % 64, 0);
        assert!(mid.abs_diff(25_000) < 64, "{mid} is about half");
        assert_eq!(halves(50_000, 1, from), Some(25_000));
        assert_eq!(halves(64, 64, 0), None, "one block is not split");
        assert_eq!(halves(65, 64, 0), Some(64));
        assert_eq!(halves(0, 64, 0), None);
    }
}
