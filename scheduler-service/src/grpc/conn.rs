//! The gRPC port's connections: an accept loop that backs off when the process runs out of file
//! descriptors, and connections that close when they never start HTTP/2 or stay idle.
//!
//! tonic's own accept loop retries a failed `accept` at once, so with no descriptor left (EMFILE)
//! it spins at full CPU until one frees up; [`Incoming`] waits instead, 5 ms doubling to 1 s, as
//! Go's `net/http` does. Each accepted [`Conn`] ends itself (its reads fail with `TimedOut`, and
//! hyper drops it):
//! - when it has not sent the 24 bytes of the HTTP/2 preface (or a TLS client hello, under TLS)
//!   within the handshake timeout, as grpc-go's `ConnectionTimeout` does;
//! - when it has had no call in flight and no bytes in either direction for the idle timeout, as
//!   grpc-go's `MaxConnectionIdle` does (which sends GOAWAY first; clients reconnect either way).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tokio_stream::Stream;

/// Bytes of the HTTP/2 connection preface (`PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`).
const PREFACE_BYTES: usize = 24;

/// The first wait after a failed accept; it doubles up to [`MAX_ACCEPT_BACKOFF`].
const MIN_ACCEPT_BACKOFF: Duration = Duration::from_millis(5);
/// The longest wait after a failed accept.
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// How long connections may take to start, and stay idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Time a new connection has to send the HTTP/2 preface (or a TLS client hello).
    pub handshake: Duration,
    /// Time a connection may stay with no call in flight and no bytes read or written.
    pub idle: Duration,
}

impl Default for ConnLimits {
    fn default() -> Self {
        Self {
            handshake: Duration::from_secs(20),
            idle: Duration::from_secs(300),
        }
    }
}

/// Calls in flight on one connection.
#[derive(Debug, Default)]
pub struct Activity {
    calls: AtomicUsize,
}

impl Activity {
    /// Counts a call until the returned guard is dropped.
    pub fn begin(self: &Arc<Self>) -> ActiveCall {
        self.calls.fetch_add(1, Ordering::AcqRel);
        ActiveCall(Arc::clone(self))
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::Acquire)
    }
}

/// A call in flight on a connection (see [`Activity::begin`]).
#[derive(Debug)]
pub struct ActiveCall(Arc<Activity>);

impl Drop for ActiveCall {
    fn drop(&mut self) {
        self.0.calls.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What each call learns of its connection (a request extension, through tonic's `Connected`).
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// The peer's address.
    pub remote: Option<SocketAddr>,
    /// The connection's calls in flight.
    pub activity: Arc<Activity>,
}

/// Accepted connections, for `serve_with_incoming_shutdown`.
pub struct Incoming {
    listener: TcpListener,
    limits: ConnLimits,
    backoff: Duration,
    waiting: Option<Pin<Box<Sleep>>>,
}

impl Incoming {
    /// Accepts on `listener`; connections get `limits`.
    pub fn new(listener: TcpListener, limits: ConnLimits) -> Self {
        Self {
            listener,
            limits,
            backoff: MIN_ACCEPT_BACKOFF,
            waiting: None,
        }
    }
}

/// Whether an accept error concerns only the connection being accepted (aborted or reset before
/// it was accepted): the next accept may succeed at once.
fn per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::Interrupted
    )
}

impl Stream for Incoming {
    type Item = io::Result<Conn>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(wait) = self.waiting.as_mut() {
                std::task::ready!(wait.as_mut().poll(cx));
                self.waiting = None;
            }
            match self.listener.poll_accept(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok((stream, remote))) => {
                    self.backoff = MIN_ACCEPT_BACKOFF;
                    // TCP_NODELAY: without it every response waits for the client's delayed ACK.
                    if let Err(e) = stream.set_nodelay(true) {
                        tracing::debug!(error = %e, "setting TCP_NODELAY");
                    }
                    return Poll::Ready(Some(Ok(Conn::new(stream, Some(remote), self.limits))));
                }
                Poll::Ready(Err(e)) if per_connection(&e) => continue,
                Poll::Ready(Err(e)) => {
                    // Out of descriptors or memory: the same accept fails until some are freed.
                    let wait = self.backoff;
                    tracing::warn!(error = %e, retry_in = ?wait, "accepting a connection failed");
                    self.backoff = (wait * 2).min(MAX_ACCEPT_BACKOFF);
                    self.waiting = Some(Box::pin(tokio::time::sleep(wait)));
                }
            }
        }
    }
}

/// An accepted connection that times itself out (see the module docs).
pub struct Conn {
    stream: TcpStream,
    info: ConnInfo,
    limits: ConnLimits,
    /// Bytes read so far, up to [`PREFACE_BYTES`].
    started: usize,
    /// When it was accepted.
    accepted: Instant,
    /// The last byte read or written.
    last_io: Instant,
    /// Wakes the reader when a timeout may be due.
    timer: Pin<Box<Sleep>>,
}

impl Conn {
    fn new(stream: TcpStream, remote: Option<SocketAddr>, limits: ConnLimits) -> Self {
        let now = Instant::now();
        Self {
            stream,
            info: ConnInfo {
                remote,
                activity: Arc::default(),
            },
            limits,
            started: 0,
            accepted: now,
            last_io: now,
            timer: Box::pin(tokio::time::sleep_until(now + limits.handshake)),
        }
    }

    /// When the connection ends if nothing happens before: the handshake's end until the preface
    /// arrived, then the idle timeout after its last byte.
    fn due(&self) -> Instant {
        if self.started < PREFACE_BYTES {
            self.accepted + self.limits.handshake
        } else {
            self.last_io + self.limits.idle
        }
    }

    /// With no bytes to read: an error once the connection should end, else `Pending` with the
    /// timer set to wake the reader when it may.
    fn poll_timeout(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let due = self.due();
            if self.timer.deadline() != due {
                self.timer.as_mut().reset(due);
            }
            if self.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            if self.started < PREFACE_BYTES {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the connection did not start HTTP/2 within the handshake timeout",
                )));
            }
            if self.info.activity.calls() == 0 {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the connection was idle for the idle timeout",
                )));
            }
            // A call is in flight (computing, with nothing to send yet): look again later.
            self.last_io = Instant::now();
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(r) => {
                let read = buf.filled().len() - before;
                if read > 0 {
                    self.started = (self.started + read).min(PREFACE_BYTES);
                    self.last_io = Instant::now();
                }
                Poll::Ready(r)
            }
            Poll::Pending => match self.poll_timeout(cx) {
                Poll::Ready(Err(e)) => {
                    tracing::debug!(remote = ?self.info.remote, error = %e, "closing a connection");
                    Poll::Ready(Err(e))
                }
                _ => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.stream).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.last_io = Instant::now();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.last_io = Instant::now();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> ConnInfo {
        self.info.clone()
    }
}
