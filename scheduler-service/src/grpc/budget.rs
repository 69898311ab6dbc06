//! The replica's request budget: how much memory the requests in flight may take together.
//!
//! Every call takes a [`Reservation`] against the replica's [`RequestBudget`] for as long as it
//! runs. Its request body's bytes are charged as they arrive ([`BudgetLayer`] wraps the body), and
//! the codec charges what decoding will allocate, bounded from the bytes before prost decodes them
//! (`grpc::wire`), and what validation, conversion and the engine add on top ([`weights`]). A charge the budget cannot cover answers `RESOURCE_EXHAUSTED`
//! before the memory is spent, so no request within the message limit, and no number of them at
//! once, takes the replica past `--request-memory-bytes` plus the snapshot cache's budget.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use prometheus_client::metrics::{counter::Counter, gauge::Gauge};
use tonic::body::Body;
use tonic::codegen::http;
use tonic::Status;

use super::conn::{ActiveCall, ConnInfo};
use super::wire::{Part, Weight, Weights, WireSchema};

/// Memory the requests in flight may take together, in bytes.
#[derive(Debug)]
pub struct RequestBudget {
    capacity: usize,
    used: AtomicUsize,
    /// `placement_request_memory_bytes` and `placement_request_budget_refusals_total`.
    metrics: Option<(Gauge, Counter)>,
}

impl RequestBudget {
    /// A budget of `capacity` bytes.
    pub fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            capacity,
            used: AtomicUsize::new(0),
            metrics: None,
        })
    }

    /// A budget of `capacity` bytes reporting into `metrics`.
    pub fn with_metrics(capacity: usize, metrics: &super::Metrics) -> Arc<Self> {
        Arc::new(Self {
            capacity,
            used: AtomicUsize::new(0),
            metrics: Some((metrics.request_memory.clone(), metrics.budget_refusals.clone())),
        })
    }

    fn report(&self, used: usize) {
        if let Some((gauge, _)) = &self.metrics {
            gauge.set(used as i64);
        }
    }

    fn refused(&self) {
        if let Some((_, refusals)) = &self.metrics {
            refusals.inc();
        }
    }

    /// The budget's size.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes the requests in flight hold now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// What calls larger than [`SMALL_CALL_BYTES`] may hold together: all but a reserve kept
    /// for small calls, so large requests filling the budget never refuse a Rank or a health
    /// check.
    fn large_capacity(&self) -> usize {
        self.capacity - (self.capacity / 8).min(SMALL_CALLS_RESERVE)
    }

    /// Takes `n` bytes for a call that will then hold `total`, if they are free.
    fn try_take(&self, n: usize, total: usize) -> bool {
        let capacity = if total <= SMALL_CALL_BYTES {
            self.capacity
        } else {
            self.large_capacity()
        };
        let taken = self.used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
            used.checked_add(n).filter(|t| *t <= capacity)
        });
        if let Ok(before) = taken {
            self.report(before + n);
        }
        taken.is_ok()
    }

    fn give(&self, n: usize) {
        let before = self.used.fetch_sub(n, Ordering::AcqRel);
        self.report(before.saturating_sub(n));
    }
}

/// A call holding at most this much is small: it may use the reserve large calls leave.
pub const SMALL_CALL_BYTES: usize = 1 << 20;
/// The part of the budget only small calls may use (at most an eighth of it).
pub const SMALL_CALLS_RESERVE: usize = 64 << 20;

/// One call's share of the budget, given back when the call ends (dropped).
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<RequestBudget>,
    /// Counts the call on its connection while it runs (see [`super::conn`]).
    _active: Option<ActiveCall>,
    held: AtomicUsize,
    /// Set when the call ends (answered, cancelled or its connection lost); work on the blocking
    /// pool checks it through [`Reservation::cancel_flag`] and stops.
    done: Arc<AtomicBool>,
}

impl Reservation {
    /// An empty reservation against `budget`.
    pub fn new(budget: Arc<RequestBudget>) -> Self {
        Self::on(budget, None)
    }

    /// An empty reservation against `budget` for a call on a connection.
    fn on(budget: Arc<RequestBudget>, active: Option<ActiveCall>) -> Self {
        Self {
            budget,
            _active: active,
            held: AtomicUsize::new(0),
            done: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The most this call could still be granted, were the budget otherwise free.
    pub fn most_grantable(&self) -> usize {
        self.budget.large_capacity().saturating_sub(self.held())
    }

    /// The budget's size.
    pub fn capacity(&self) -> usize {
        self.budget.capacity()
    }

    /// Counts a refusal for want of budget decided elsewhere (the codec's scan).
    pub fn refused(&self) {
        self.budget.refused();
    }

    /// Bytes this call holds.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// The flag set once the call has ended, for work that outlives its future.
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.done)
    }

    /// Charges `n` more bytes for `what`, or answers `RESOURCE_EXHAUSTED` (nothing charged).
    pub fn charge(&self, n: usize, what: &str) -> Result<(), Status> {
        let capacity = self.budget.large_capacity();
        let total = self.held().saturating_add(n);
        if total > capacity && total > SMALL_CALL_BYTES {
            self.budget.refused();
            return Err(Status::resource_exhausted(format!(
                "{what} would take about {} MiB, more than this replica's whole request budget of {} MiB \
                 (--request-memory-bytes); send less per request",
                mib(total),
                mib(capacity)
            )));
        }
        if !self.budget.try_take(n, total) {
            self.budget.refused();
            return Err(Status::resource_exhausted(format!(
                "{what} would take about {} MiB and the requests in flight hold {} of this replica's {} MiB \
                 request budget (--request-memory-bytes); retry later",
                mib(total),
                mib(self.budget.used()),
                mib(capacity)
            )));
        }
        self.held.fetch_add(n, Ordering::AcqRel);
        Ok(())
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
        self.budget.give(*self.held.get_mut());
    }
}

fn mib(bytes: usize) -> usize {
    bytes.div_ceil(1 << 20)
}

/// Limits the codec applies from a request's wire cost, before decoding it.
#[derive(Debug, Clone)]
pub struct DecodeLimits {
    /// Most pods one Schedule request may carry.
    pub max_batch_size: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        Self { max_batch_size: 10_000 }
    }
}

/// The most bytes one pod or node may take in a request: etcd's default request limit
/// (`--max-request-bytes`, 1.5 MiB), so larger than any object the API server can store.
pub const MAX_OBJECT_BYTES: usize = 3 << 19;

/// How much memory serving each part of a request takes, per decoded byte and per message,
/// measured on the shapes that cost most per byte (`docs/limits.md`): a request is decoded whole
/// and kept while the service converts it to the engine's types, so every part costs its decoded
/// bytes plus the engine's copy; the root's half again covers the copies the service makes while
/// it holds the message (a snapshot's content id re-encodes it). Nodes cost most: the engine keeps
/// each node's labels twice (the node and its class), its hot fields and columns. Pods to place
/// are copied whole and answered one placement each; bound pods share their label maps.
pub fn weights() -> &'static Weights {
    static WEIGHTS: std::sync::OnceLock<Weights> = std::sync::OnceLock::new();
    WEIGHTS.get_or_init(|| {
        use crate::proto;
        let w = |percent, per_message| Part {
            weight: Weight { percent, per_message },
            max_bytes: usize::MAX,
        };
        let object = |part: Part| Part {
            max_bytes: MAX_OBJECT_BYTES,
            ..part
        };
        let (node, bound_pod, pod) = (object(w(300, 800)), object(w(150, 400)), object(w(200, 400)));
        let (namespace, pdb) = (w(250, 600), w(250, 400));
        let snapshot = <proto::Snapshot as WireSchema>::INDEX;
        let delta = <proto::SnapshotDelta as WireSchema>::INDEX;
        Weights {
            root: Weight {
                percent: 150,
                per_message: 0,
            },
            fields: vec![
                ((snapshot, 1), node),
                ((snapshot, 2), bound_pod),
                ((snapshot, 10), namespace),
                ((snapshot, 20), pdb),
                ((delta, 2), node),
                ((delta, 4), bound_pod),
                ((delta, 10), namespace),
                ((delta, 20), pdb),
                // Claims, volumes, storage classes and CSINodes are kept converted, like budgets.
                ((snapshot, 30), object(pdb)),
                ((snapshot, 31), object(pdb)),
                ((snapshot, 32), object(pdb)),
                ((snapshot, 33), object(pdb)),
                ((delta, 30), object(pdb)),
                ((delta, 32), object(pdb)),
                ((delta, 34), object(pdb)),
                ((delta, 36), object(pdb)),
                ((<proto::ScheduleRequest as WireSchema>::INDEX, 2), pod),
                ((<proto::RankRequest as WireSchema>::INDEX, 2), pod),
            ],
        }
    })
}

/// What the codec and the service read of the call they serve.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The call's reservation.
    pub reservation: Arc<Reservation>,
    /// The replica's decoding limits.
    pub limits: Arc<DecodeLimits>,
}

tokio::task_local! {
    /// The call being served by the current task (set by [`BudgetLayer`] around each call).
    pub static CALL: CallContext;
}

/// The current call's context, if the task serves one.
pub fn current() -> Option<CallContext> {
    CALL.try_with(Clone::clone).ok()
}

/// A layer giving every call a reservation, charging its request body's bytes as they arrive.
#[derive(Debug, Clone)]
pub struct BudgetLayer {
    budget: Arc<RequestBudget>,
    limits: Arc<DecodeLimits>,
}

impl BudgetLayer {
    /// The layer for a replica's budget and limits.
    pub fn new(budget: Arc<RequestBudget>, limits: DecodeLimits) -> Self {
        Self {
            budget,
            limits: Arc::new(limits),
        }
    }
}

impl<S> tower::Layer<S> for BudgetLayer {
    type Service = BudgetService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        BudgetService {
            inner,
            budget: Arc::clone(&self.budget),
            limits: Arc::clone(&self.limits),
        }
    }
}

/// The service of [`BudgetLayer`].
#[derive(Debug, Clone)]
pub struct BudgetService<S> {
    inner: S,
    budget: Arc<RequestBudget>,
    limits: Arc<DecodeLimits>,
}

impl<S> tower::Service<http::Request<Body>> for BudgetService<S>
where
    S: tower::Service<http::Request<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = tokio::task::futures::TaskLocalFuture<CallContext, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let ext = req.extensions();
        let conn = ext.get::<ConnInfo>().or_else(|| {
            ext.get::<tonic::transport::server::TlsConnectInfo<ConnInfo>>()
                .map(|tls| tls.get_ref())
        });
        let active = conn.map(|c| c.activity.begin());
        let reservation = Arc::new(Reservation::on(Arc::clone(&self.budget), active));
        let counted = Arc::clone(&reservation);
        let req = req.map(|body| {
            Body::new(CountingBody {
                inner: body,
                reservation: counted,
            })
        });
        let call = CallContext {
            reservation,
            limits: Arc::clone(&self.limits),
        };
        CALL.scope(call, self.inner.call(req))
    }
}

/// A request body whose bytes are charged to the call's reservation as they arrive.
struct CountingBody {
    inner: Body,
    reservation: Arc<Reservation>,
}

impl HttpBody for CountingBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let frame = std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if let Some(Ok(f)) = &frame {
            if let Some(data) = f.data_ref() {
                self.reservation
                    .charge(data.len(), "the request's bytes received so far")?;
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_are_given_back_when_the_call_ends() {
        const M: usize = 1 << 20;
        let budget = RequestBudget::new(160 * M);
        // Large calls share 140 MiB: an eighth (20 MiB) is kept for small ones.
        let a = Reservation::new(Arc::clone(&budget));
        a.charge(100 * M, "a").expect("fits");
        let b = Reservation::new(Arc::clone(&budget));
        let refused = b.charge(50 * M, "b").expect_err("100 + 50 > 140");
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(refused.message().contains("retry later"), "{refused:?}");
        let whole = b.charge(141 * M, "b").expect_err("more than large calls may ever hold");
        assert!(whole.message().contains("send less"), "{whole:?}");
        b.charge(40 * M, "b").expect("100 + 40 fits");
        // The large calls hold all they may; a small call still gets its share of the reserve.
        let small = Reservation::new(Arc::clone(&budget));
        small.charge(M, "small").expect("small calls use the reserve");
        assert!(Reservation::new(Arc::clone(&budget)).charge(2 * M, "c").is_err());
        assert_eq!(budget.used(), 141 * M);
        let flag = a.cancel_flag();
        drop(a);
        assert!(flag.load(Ordering::Acquire), "the call's end is seen by its work");
        drop((b, small));
        assert_eq!(budget.used(), 0);
    }
}
