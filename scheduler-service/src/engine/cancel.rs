//! Stopping work whose caller has gone.
//!
//! The gRPC layer runs each call's engine work on a blocking-pool thread inside a [`Scope`] holding
//! the call's flag, which it sets when the call ends however it ends: answered, past its deadline,
//! cancelled by the client or cut by a lost connection. The engine's long loops (over nodes, node
//! classes, existing pods, a batch's pods, a snapshot's entries) poll [`requested`] every few
//! iterations and stop early; what they computed is then incomplete, so a caller that finds the
//! flag set after the work returns discards the result (it has no one to answer anyway). Work run
//! outside a scope (benchmarks, the simulation, tests) is never cancelled.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

thread_local! {
    static FLAG: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Iterations between two polls of [`requested`] in loops whose iterations are cheap.
pub const POLL_EVERY: usize = 64;

/// True once the current scope's call has ended (never outside a scope).
#[inline]
pub fn requested() -> bool {
    FLAG.with(|f| f.borrow().as_ref().is_some_and(|flag| flag.load(Ordering::Relaxed)))
}

/// [`requested`], polled only every [`POLL_EVERY`]th iteration `i`.
#[inline]
pub fn requested_at(i: usize) -> bool {
    i % POLL_EVERY == POLL_EVERY - 1 && requested()
}

/// The flag of the scope this thread is in, to enter the same scope on a helper thread.
pub fn current() -> Option<Arc<AtomicBool>> {
    FLAG.with(|f| f.borrow().clone())
}

/// Work on this thread belongs to the call of `flag` until the scope is dropped.
#[must_use = "the scope ends when dropped"]
pub struct Scope {
    previous: Option<Arc<AtomicBool>>,
}

impl Scope {
    /// Enters the scope of `flag` on this thread.
    pub fn enter(flag: Arc<AtomicBool>) -> Self {
        Self {
            previous: FLAG.with(|f| f.borrow_mut().replace(flag)),
        }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let previous = self.previous.take();
        FLAG.with(|f| *f.borrow_mut() = previous);
    }
}

/// Runs `a` here and `b` on a helper thread at the same time, both in this thread's scope, and
/// returns both results: how a long request's work (a full sync's chunk) takes a second core. A
/// panic in `b` is resumed here, as if it had run on this thread.
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA,
    B: FnOnce() -> RB + Send,
    RB: Send,
{
    let flag = current();
    std::thread::scope(|scope| {
        let helper = scope.spawn(|| {
            let _scope = flag.map(Scope::enter);
            b()
        });
        let first = a();
        (first, helper.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_halves_of_a_join_run_in_the_callers_scope() {
        assert_eq!(join(requested, requested), (false, false), "outside a scope");
        let _scope = Scope::enter(Arc::new(AtomicBool::new(true)));
        assert_eq!(join(requested, requested), (true, true));
    }

    #[test]
    fn a_scope_sees_its_flag_and_restores_the_outer_one() {
        assert!(!requested(), "outside a scope nothing is cancelled");
        let outer = Arc::new(AtomicBool::new(true));
        let _outer = Scope::enter(Arc::clone(&outer));
        assert!(requested());
        {
            let inner = Arc::new(AtomicBool::new(false));
            let _inner = Scope::enter(Arc::clone(&inner));
            assert!(!requested());
            inner.store(true, Ordering::Relaxed);
            assert!(requested());
            assert!(!requested_at(0) && requested_at(POLL_EVERY - 1));
        }
        assert!(requested(), "the outer scope is back");
        assert!(current().is_some_and(|f| Arc::ptr_eq(&f, &outer)));
    }
}
