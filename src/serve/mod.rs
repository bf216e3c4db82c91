//! `serve`: the archive's reads over HTTP (a JSON API) and a history viewer page. Behind the
//! cargo feature `serve` (axum, hyper).
//!
//! The server holds one read-only snapshot of the archive (never the writer's lock) and
//! replaces it when a writer commits: a task looks for a moved manifest every
//! `REFRESH`, and a read that finds a file its snapshot named deleted, or a stream it does
//! not know, reopens and reads again as the CLI does. Reads run on tokio's blocking pool;
//! raw scans (a percentile's, one read window of rows) each take one of `RAW_SCANS`
//! permits, so at most that many run at once; surveys take none. Connections are served by
//! `conn`: a deadline for each request head, a cap on open connections, the token checked
//! before any work. The API: `docs/serve.md`.
//!
//! [`run`] serves until Ctrl-C (or SIGTERM), telling an [`Announce`] where it listens and
//! when it stopped. Its refusals of what it was asked ([`ServeError`]) name the command
//! line's flags (`--listen`, `--token`, …), the [`Options`] fields of the same names.

mod api;
mod conn;
mod request;
mod rows;
mod shared;

use shared::{Shared, Summary};

use crate::archive::{reader, ArchiveError, Config};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// How often the server looks for a barrier another process committed.
const REFRESH: Duration = Duration::from_millis(200);
/// How often a server of a replica by its URL asks the bucket for a new commit: one listing
/// of its manifest parts a time.
const REFRESH_BUCKET: Duration = Duration::from_secs(1);
/// Raw scans (rows, percentiles) at once; more wait for a permit.
const RAW_SCANS: usize = 2;
/// The longest query string answered; longer is refused before anything is read.
const MAX_QUERY: usize = 8 * 1024;

/// The page: HTML, CSS and JavaScript in one file, compiled into the binary.
const PAGE: &str = include_str!("page/index.html");

/// What a server is asked for (the command line's `serve` flags of the same names).
#[derive(Clone, Debug)]
pub struct Options {
    /// The archive directory.
    pub archive: PathBuf,
    /// The address to listen on (port 0: the system chooses; [`Announce::listening`] says
    /// which).
    pub listen: SocketAddr,
    /// Require `Authorization: Bearer TOKEN` on every API request (needed to listen anywhere
    /// but loopback; at least 16 characters).
    pub token: Option<String>,
    /// The largest survey budget answered (points); larger is refused with 413.
    pub max_budget: usize,
    /// Decoded level cells kept for surveys (about 100 bytes each), across commits.
    pub level_cache: usize,
    /// Bytes of decoded data row groups kept for surveys and folds answered from raw rows
    /// (a fleet's fine levels), across commits.
    pub raw_cache: usize,
    /// Connections open at once (lowered to fit `open_files`). A connection past it closes
    /// the oldest one still waiting for a request head; when every open one is answering a
    /// request, the new one is answered 503.
    pub max_connections: usize,
    /// How long a connection may take to send a request's head (line and headers), and may
    /// stay idle between requests, before it is closed.
    pub header_timeout: Duration,
    /// How many files this process may open (`ulimit -n`), when the caller knows: the
    /// connections are capped to leave a quarter of it (at least 64) for the archive's own.
    pub open_files: Option<u64>,
}

/// Why a server did not start, or stopped serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A non-loopback address without a token.
    #[error("--listen {0} is not a loopback address: anyone who reaches it could read the archive; pass --token (or set SERIES_ARCHIVE_TOKEN) to require a bearer token")]
    Exposed(SocketAddr),
    /// A token shorter than 16 characters.
    #[error("--token must be at least 16 characters")]
    ShortToken,
    /// No connection allowed.
    #[error("--max-connections 0 would answer nobody: it must be at least 1")]
    NoConnections,
    /// A largest budget that buys no bucket.
    #[error("--max-budget {0} buys no bucket: it must be at least 4")]
    Budget(usize),
    /// The archive could not be opened.
    #[error(transparent)]
    Open(#[from] ArchiveError),
    /// The server's runtime could not be started.
    #[error("starting the server's runtime: {0}")]
    Runtime(std::io::Error),
    /// The address could not be listened on.
    #[error("--listen {listen}: {error}")]
    Listen {
        /// The address asked for.
        listen: SocketAddr,
        /// Why not.
        error: std::io::Error,
    },
}

/// What a server tells whoever started it.
pub trait Announce {
    /// `asked` connections were lowered to `fitted`, to fit the `open_files` this process
    /// may open (before the server listens).
    fn lowered(&mut self, asked: usize, fitted: usize, open_files: u64);
    /// The server listens at `address` and answers from the archive at `archive`.
    fn listening(&mut self, archive: &Path, address: SocketAddr);
    /// The server was asked to stop, and stopped serving.
    fn stopped(&mut self, archive: &Path);
}

/// Serves the archive `options.archive` read-only (beside a writer) until Ctrl-C (or
/// SIGTERM). Refuses options that would expose the archive or answer nothing before
/// anything is opened.
pub fn run(options: Options, announce: &mut dyn Announce) -> Result<(), ServeError> {
    let Options {
        archive,
        listen,
        token,
        max_budget,
        level_cache,
        raw_cache,
        max_connections,
        header_timeout,
        open_files,
    } = options;
    if !listen.ip().is_loopback() && token.is_none() {
        return Err(ServeError::Exposed(listen));
    }
    if token.as_deref().is_some_and(|t| t.len() < 16) {
        return Err(ServeError::ShortToken);
    }
    if max_connections == 0 {
        return Err(ServeError::NoConnections);
    }
    if max_budget < 4 {
        return Err(ServeError::Budget(max_budget));
    }
    let config = Config::new()
        .level_cache_cells(level_cache)
        .raw_cache_bytes(raw_cache);
    let opened = reader::open(&archive, &config)?;
    let summary = Summary::of(&opened);
    let shared = Arc::new(Shared {
        root: archive.clone(),
        config,
        current: RwLock::new(Arc::new(opened)),
        changes: tokio::sync::watch::Sender::new(summary),
        stopping: tokio::sync::watch::Sender::new(false),
        token,
        max_budget,
        raw: Arc::new(tokio::sync::Semaphore::new(RAW_SCANS)),
        reopening: std::sync::Mutex::new(()),
        replica: std::sync::Mutex::new(None),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    let limits = conn::Limits::fitted(max_connections, header_timeout, open_files);
    if let Some(open_files) = open_files.filter(|_| limits.max_connections < max_connections) {
        announce.lowered(max_connections, limits.max_connections, open_files);
    }
    runtime.block_on(serve(shared, listen, &archive, limits, announce))
}

async fn serve(
    shared: Arc<Shared>,
    listen: SocketAddr,
    archive: &Path,
    limits: conn::Limits,
    announce: &mut dyn Announce,
) -> Result<(), ServeError> {
    let failed = |error| ServeError::Listen { listen, error };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(failed)?;
    let bound = listener.local_addr().map_err(failed)?;
    announce.listening(archive, bound);
    let refresher = tokio::spawn(refresh_loop(shared.clone()));
    let api = Router::new()
        .route("/streams", get(api::streams))
        .route("/survey", get(api::survey))
        .route("/fold", get(api::fold))
        .route("/rows", get(rows::rows))
        .route("/watch", get(api::watch))
        .fallback(api::not_found)
        .layer(axum::middleware::from_fn_with_state(shared.clone(), guard));
    let app = Router::new()
        .route("/", get(page))
        .route("/index.html", get(page))
        .nest("/api", api)
        .with_state(shared.clone());
    let stopping = shared.clone();
    conn::serve(
        listener,
        app,
        limits,
        shared.stopping.subscribe(),
        async move {
            stop_signal().await;
            // Live pages hold /api/watch open: end those streams, or the server waits on them.
            stopping.stopping.send_replace(true);
        },
    )
    .await;
    refresher.abort();
    announce.stopped(archive);
    Ok(())
}

async fn stop_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Looks for a moved manifest every [`REFRESH`] ([`REFRESH_BUCKET`] for a replica opened by
/// its URL); a failed reopen keeps the old snapshot (reads go on answering what was durable
/// then) and is logged.
async fn refresh_loop(shared: Arc<Shared>) {
    let every = if crate::archive::replicate::as_url(&shared.root).is_some() {
        REFRESH_BUCKET
    } else {
        REFRESH
    };
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let shared = shared.clone();
        match tokio::task::spawn_blocking(move || shared.refresh().map(|_| ())).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("{}", e.message()),
            Err(e) => tracing::warn!("refreshing the snapshot: {e}"),
        }
    }
}

/// Refuses before anything is read: a query string over [`MAX_QUERY`], or a missing or wrong
/// bearer token when one is required.
async fn guard(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let query = request.uri().query().map_or(0, str::len);
    if query > MAX_QUERY {
        let mut refused = request::ApiError::new(
            StatusCode::URI_TOO_LONG,
            "too_large",
            format!("the query string is {query} bytes; at most {MAX_QUERY} are answered"),
        )
        .into_response();
        refused.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
        return refused;
    }
    if let Some(token) = &shared.token {
        let bearer = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_owned);
        // EventSource cannot set headers: /api/watch also takes ?access_token= (RFC 6750).
        let query_token = || {
            url::form_urlencoded::parse(request.uri().query().unwrap_or("").as_bytes())
                .find(|(k, _)| k == "access_token")
                .map(|(_, v)| v.into_owned())
        };
        let given = bearer.or_else(|| {
            (request.uri().path() == "/watch")
                .then(query_token)
                .flatten()
        });
        if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
            let mut refused = request::ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "this server requires a bearer token: send Authorization: Bearer TOKEN (the page: open it as /#token=TOKEN)",
            )
            .into_response();
            refused.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            // No second try on this connection: a client without the token holds none open.
            refused.headers_mut().insert(
                header::CONNECTION,
                header::HeaderValue::from_static("close"),
            );
            return refused;
        }
    }
    let (method, uri) = (request.method().clone(), request.uri().clone());
    let began = std::time::Instant::now();
    let response = next.run(request).await;
    let status = response.status();
    let took = began.elapsed();
    if status.is_server_error() {
        tracing::warn!(%method, %uri, %status, ?took, "answered");
    } else {
        tracing::debug!(%method, %uri, %status, ?took, "answered");
    }
    response
}

/// Compares without stopping at the first difference, so response time says nothing of
/// how much of a guessed token was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn page() -> Response {
    (
        [
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            // The page talks to this server only, and loads nothing from anywhere.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
            ),
        ],
        Html(PAGE),
    )
        .into_response()
}
