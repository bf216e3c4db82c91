//! Connections: each accepted under a cap, with a deadline for its request head, so clients
//! that connect and never finish a request cannot lock the server out.
//!
//! - **A deadline for the head.** A connection has `--header-timeout` to send a request's
//!   head (the request line and headers), counted from when the server starts waiting for
//!   it: after the accept, and again after each answer on a kept-alive connection. It is
//!   closed when the deadline passes (hyper's `header_read_timeout`, whole-head, not per
//!   byte: a head trickled a byte at a time is closed too).
//! - **A cap.** At most `--max-connections` are open, lowered to fit the process's open-file
//!   limit with a quarter of it (at least 64) left for the archive's own files. A connection
//!   past the cap closes the oldest one that is waiting for a request head (it has no
//!   request in flight: a slow or idle client, never an answer being sent); when every
//!   open connection is answering one, the new one is answered 503 and closed. When the
//!   system refuses an accept (out of file descriptors), the oldest waiting one is closed
//!   too and the accept tried again.
//! - **The token before any work**: the API's guard refuses a missing or wrong token before
//!   any handler runs, and a refused request's connection is closed (`Connection: close`),
//!   so an unauthenticated client cannot hold one open between requests either.

use axum::body::{Body, HttpBody};
use axum::extract::Request;
use axum::Router;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// Open files kept for the archive's own reads whatever the limit: a quarter of it, and at
/// least this many.
const RESERVED_FILES: u64 = 64;
/// How long the server waits for open connections to finish after it was asked to stop.
const DRAIN: Duration = Duration::from_secs(10);

/// What a connection may take.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// Connections open at once.
    pub max_connections: usize,
    /// How long a connection may take to send a request head.
    pub header_timeout: Duration,
}

impl Limits {
    /// `asked` connections, lowered when the process may not open that many files
    /// (`open_files`, when known) besides those the archive needs.
    pub fn fitted(asked: usize, header_timeout: Duration, open_files: Option<u64>) -> Limits {
        let max_connections = match open_files {
            Some(limit) => {
                let room = limit.saturating_sub(RESERVED_FILES.max(limit / 4)).max(1);
                asked.min(usize::try_from(room).unwrap_or(usize::MAX))
            }
            None => asked,
        };
        Limits {
            max_connections,
            header_timeout,
        }
    }
}

/// One open connection as the table sees it.
struct Slot {
    /// Requests in flight on it (a request counts until its whole answer is sent).
    busy: Arc<AtomicUsize>,
    /// Closes it; taken when it is asked to close.
    close: Option<tokio::sync::oneshot::Sender<()>>,
}

/// The open connections, oldest first.
struct Table {
    next: u64,
    open: BTreeMap<u64, Slot>,
}

impl Table {
    /// Connections not yet asked to close.
    fn counted(&self) -> usize {
        self.open.values().filter(|s| s.close.is_some()).count()
    }

    /// Asks the oldest connection waiting for a request head to close; false when every
    /// open connection has a request in flight.
    fn close_oldest_waiting(&mut self) -> bool {
        for slot in self.open.values_mut() {
            if slot.close.is_some() && slot.busy.load(Ordering::Acquire) == 0 {
                if let Some(close) = slot.close.take() {
                    let _ = close.send(());
                    return true;
                }
            }
        }
        false
    }
}

/// The connection table and its cap.
pub(super) struct Connections {
    max: usize,
    table: Mutex<Table>,
    /// Told when a connection's task ends (its socket is closed).
    freed: tokio::sync::Notify,
}

impl Connections {
    pub fn new(max: usize) -> Arc<Connections> {
        Arc::new(Connections {
            max: max.max(1),
            table: Mutex::new(Table {
                next: 0,
                open: BTreeMap::new(),
            }),
            freed: tokio::sync::Notify::new(),
        })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for one more connection: under the cap, or made by closing the oldest one
    /// waiting for a request head. `None` when every open connection is answering one.
    fn admit(self: &Arc<Self>) -> Option<Admitted> {
        let mut table = self.table();
        if table.counted() >= self.max && !table.close_oldest_waiting() {
            return None;
        }
        let id = table.next;
        table.next += 1;
        let busy = Arc::new(AtomicUsize::new(0));
        let (close, closed) = tokio::sync::oneshot::channel();
        table.open.insert(
            id,
            Slot {
                busy: busy.clone(),
                close: Some(close),
            },
        );
        Some(Admitted {
            id,
            busy,
            closed: Some(closed),
            connections: self.clone(),
        })
    }

    /// Closes the oldest connection waiting for a request head, and waits (briefly) for its
    /// socket to be gone; false when none waits.
    async fn make_room(&self) -> bool {
        let freed = self.freed.notified();
        if !self.table().close_oldest_waiting() {
            return false;
        }
        let _ = tokio::time::timeout(Duration::from_millis(200), freed).await;
        true
    }
}

/// A connection's place in the table, given up when its task ends.
struct Admitted {
    id: u64,
    busy: Arc<AtomicUsize>,
    closed: Option<tokio::sync::oneshot::Receiver<()>>,
    connections: Arc<Connections>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.connections.table().open.remove(&self.id);
        self.connections.freed.notify_waiters();
    }
}

/// A request in flight on a connection, until its answer's body is sent or dropped.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn enter(busy: &Arc<AtomicUsize>) -> InFlight {
        busy.fetch_add(1, Ordering::AcqRel);
        InFlight(busy.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An answer's body holding its request's [`InFlight`].
struct Tracked {
    body: Body,
    _request: InFlight,
}

impl HttpBody for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Whether a failed accept is about that one connection (it went away before it was
/// accepted), not the server's resources.
fn only_that_connection(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted | WouldBlock
    )
}

/// Accepts and serves connections until `stop` resolves, then stops accepting, asks every
/// open connection to finish its request and close (`stopping` is already set by then: live
/// `/api/watch` streams end), and waits for them at most [`DRAIN`].
pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    stopping: tokio::sync::watch::Receiver<bool>,
    stop: impl std::future::Future<Output = ()>,
) {
    let connections = Connections::new(limits.max_connections);
    let service = TowerToHyperService::new(app);
    let mut tasks = tokio::task::JoinSet::new();
    let mut refused_accepts = 0u64;
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        while tasks.try_join_next().is_some() {}
        match accepted {
            Ok((stream, _peer)) => match connections.admit() {
                Some(admitted) => {
                    // A streamed answer ends in small writes (the last chunk, its
                    // terminator): with Nagle's algorithm on, the last waits for the
                    // client's delayed ACK of the one before it, 40 ms on Linux, on every
                    // kept-alive download. Every write is one hyper means to send now.
                    if let Err(e) = stream.set_nodelay(true) {
                        tracing::debug!("TCP_NODELAY could not be set on a connection: {e}");
                    }
                    tasks.spawn(connection(
                        stream,
                        service.clone(),
                        admitted,
                        limits.header_timeout,
                        stopping.clone(),
                    ));
                }
                None => {
                    tracing::debug!("every connection is answering a request: refused one");
                    tasks.spawn(refuse(stream));
                }
            },
            Err(e) if only_that_connection(&e) => {
                tracing::debug!("an accept failed: {e}");
            }
            Err(e) => {
                // Out of file descriptors (or memory): close the oldest connection that is
                // only waiting, then try again; with none, wait a little for one to end.
                refused_accepts += 1;
                if refused_accepts == 1 || refused_accepts.is_power_of_two() {
                    tracing::warn!(
                        open = connections.table().counted(),
                        "the system refused an accept ({e}); closing the oldest connection waiting for a request (refused {refused_accepts} time(s) so far)"
                    );
                }
                if !connections.make_room().await {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
    drop(listener);
    let drained =
        tokio::time::timeout(DRAIN, async { while tasks.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(
            "{} connection(s) still open {DRAIN:?} after the stop; closing them",
            tasks.len()
        );
        tasks.abort_all();
    }
}

/// Serves one connection until it ends, its head deadline passes, the table asks it to
/// close (to make room), or the server stops.
async fn connection(
    stream: TcpStream,
    service: TowerToHyperService<Router>,
    mut admitted: Admitted,
    header_timeout: Duration,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let busy = admitted.busy.clone();
    let handler = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let request: Request = request.map(Body::new);
        let in_flight = InFlight::enter(&busy);
        let answer = hyper::service::Service::call(&service, request);
        async move {
            let response = answer.await?;
            Ok::<_, Infallible>(response.map(|body| Tracked {
                body,
                _request: in_flight,
            }))
        }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    let conn = http.serve_connection(TokioIo::new(stream), handler);
    tokio::pin!(conn);
    let Some(mut closed) = admitted.closed.take() else {
        return;
    };
    let mut stopping_seen = *stopping.borrow();
    if stopping_seen {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!("connection closed: {e}");
                }
                break;
            }
            _ = &mut closed => {
                tracing::debug!("closed a connection waiting for a request head, to make room for a new one");
                break;
            }
            changed = stopping.changed(), if !stopping_seen => {
                if changed.is_err() || *stopping.borrow() {
                    stopping_seen = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
    drop(admitted);
}

/// Answers a connection past the cap, when no open one could be closed for it: 503, then
/// closed.
async fn refuse(mut stream: TcpStream) {
    let body = serde_json::json!({
        "error": "unavailable",
        "message": "the server is answering as many connections as --max-connections allows; retry shortly",
    })
    .to_string();
    let reply = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(reply.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}
