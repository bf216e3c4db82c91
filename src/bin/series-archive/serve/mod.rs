//! `serve`: the archive's reads over HTTP (a JSON API) and a history viewer page.
//!
//! The server holds one read-only snapshot of the archive (never the writer's lock) and
//! replaces it when a writer commits: a task looks for a moved manifest every
//! [`REFRESH`], and a read that finds a file its snapshot named deleted, or a stream it does
//! not know, reopens and reads again as the CLI does. Reads run on tokio's blocking pool;
//! raw scans (a percentile's, one read window of rows) each take one of [`RAW_SCANS`]
//! permits, so at most that many run at once; surveys take none. Connections are served by
//! [`conn`]: a deadline for each request head, a cap on open connections, the token checked
//! before any work. The API: `docs/serve.md`.

mod api;
mod conn;
mod rows;

use crate::Failure;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Serialize;
use series_archive::archive::{reader, Archive, Config, ReadError};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// How often the server looks for a barrier another process committed.
const REFRESH: Duration = Duration::from_millis(200);
/// Raw scans (rows, percentiles) at once; more wait for a permit.
const RAW_SCANS: usize = 2;
/// The longest query string answered; longer is refused before anything is read.
const MAX_QUERY: usize = 8 * 1024;

/// The page: HTML, CSS and JavaScript in one file, compiled into the binary.
const PAGE: &str = include_str!("page/index.html");

/// What `serve` was asked for.
#[derive(clap::Args)]
pub struct Options {
    /// The archive directory.
    archive: PathBuf,
    /// The address to listen on (port 0: the system chooses; the line printed says which).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Require `Authorization: Bearer TOKEN` on every API request (needed to listen anywhere
    /// but loopback; at least 16 characters).
    #[arg(long, env = "SERIES_ARCHIVE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The largest survey budget answered (points); larger is refused with 413.
    #[arg(long, default_value_t = 1 << 20)]
    max_budget: usize,
    /// Decoded level cells kept for surveys (about 100 bytes each), across commits: enough to
    /// hold a large stream's finest level whole.
    #[arg(long, default_value_t = 1 << 20)]
    level_cache: usize,
    /// Connections open at once (lowered to fit the open-file limit). A connection past it
    /// closes the oldest one still waiting for a request head; when every open one is
    /// answering a request, the new one is answered 503.
    #[arg(long, default_value_t = 512)]
    max_connections: usize,
    /// How long a connection may take to send a request's head (line and headers), and may
    /// stay idle between requests, before it is closed: seconds, or with a unit (500ms, 10s).
    #[arg(long, default_value = "10s", value_parser = parse_timeout)]
    header_timeout: Duration,
}

/// `--header-timeout`: seconds, or a number with `ms` or `s`.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let parsed = if let Some(ms) = t.strip_suffix("ms") {
        ms.trim().parse::<u64>().ok().map(Duration::from_millis)
    } else {
        t.strip_suffix('s')
            .unwrap_or(t)
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64)
    };
    match parsed {
        Some(d) if d >= Duration::from_millis(100) => Ok(d),
        Some(_) => Err(format!(
            "{text:?} is under 100 ms: no client could send a request in it"
        )),
        None => Err(format!(
            "{text:?} is not a duration (write 10, 10s or 500ms)"
        )),
    }
}

/// Where the archive stands: sent to `/api/watch` subscribers on every commit.
#[derive(Clone, Debug, PartialEq, Serialize)]
struct Summary {
    generation: u64,
    barriers: u64,
    watermarks: BTreeMap<String, u64>,
}

impl Summary {
    fn of(archive: &Archive) -> Summary {
        let state = archive.state();
        Summary {
            generation: state.generation,
            barriers: state.barriers,
            watermarks: state
                .streams
                .iter()
                .map(|(id, s)| (id.clone(), s.watermark.0))
                .collect(),
        }
    }
}

/// The server's state: the snapshot it answers from and what it was asked to enforce.
struct Shared {
    root: PathBuf,
    config: Config,
    current: RwLock<Arc<Archive>>,
    changes: tokio::sync::watch::Sender<Summary>,
    stopping: tokio::sync::watch::Sender<bool>,
    token: Option<String>,
    max_budget: usize,
    raw: Arc<tokio::sync::Semaphore>,
    reopening: std::sync::Mutex<()>,
}

impl Shared {
    fn snapshot(&self) -> Arc<Archive> {
        match self.current.read() {
            Ok(current) => current.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Reopens when a writer moved the manifest since the snapshot was opened (blocking).
    /// One reopen at a time: requests that find the manifest moved together wait for it and
    /// take its snapshot.
    fn refresh(&self) -> Result<Arc<Archive>, api::ApiError> {
        if !self.snapshot().manifest_moved() {
            return Ok(self.snapshot());
        }
        let _one = self.reopening.lock().unwrap_or_else(|p| p.into_inner());
        let snapshot = self.snapshot();
        if !snapshot.manifest_moved() {
            return Ok(snapshot);
        }
        let mut opened = reader::open(&self.root, &self.config).map_err(|e| {
            api::ApiError::unreadable(format!("reopening the archive after a commit: {e}"))
        })?;
        // Committed files never change and names are never reused: what the last snapshot
        // decoded stays true, so a commit does not leave the next surveys cold.
        opened.share_level_cache(&snapshot);
        let opened = Arc::new(opened);
        let summary = Summary::of(&opened);
        match self.current.write() {
            Ok(mut current) => *current = opened.clone(),
            Err(poisoned) => *poisoned.into_inner() = opened.clone(),
        }
        self.changes.send_if_modified(|old| {
            let moved = *old != summary;
            *old = summary;
            moved
        });
        Ok(opened)
    }

    /// Runs a read on the current snapshot (blocking). A read that finds a file its snapshot
    /// named deleted, or no stream by that name, after a writer moved the manifest reads
    /// again on a fresh snapshot, at most `READ_ATTEMPTS` times, as the CLI does
    /// ([`reader::read_on`]).
    fn read<T>(&self, read: impl Fn(&Archive) -> Result<T, ReadError>) -> Result<T, api::ApiError> {
        reader::read_on(self.snapshot(), || self.refresh(), read)?.map_err(api::ApiError::from)
    }
}

/// Serves until Ctrl-C (or SIGTERM).
pub fn run(options: Options) -> Result<(), Failure> {
    let Options {
        archive,
        listen,
        token,
        max_budget,
        level_cache,
        max_connections,
        header_timeout,
    } = options;
    if !listen.ip().is_loopback() && token.is_none() {
        return Err(format!(
            "--listen {listen} is not a loopback address: anyone who reaches it could read the archive; pass --token (or set SERIES_ARCHIVE_TOKEN) to require a bearer token"
        )
        .into());
    }
    if token.as_deref().is_some_and(|t| t.len() < 16) {
        return Err("--token must be at least 16 characters".into());
    }
    if max_connections == 0 {
        return Err("--max-connections 0 would answer nobody: it must be at least 1".into());
    }
    if max_budget < 4 {
        return Err(
            format!("--max-budget {max_budget} buys no bucket: it must be at least 4").into(),
        );
    }
    let config = Config::new().level_cache_cells(level_cache);
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
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the server's runtime: {e}"))?;
    let limits = conn::Limits::fitted(max_connections, header_timeout);
    runtime.block_on(serve(shared, listen, archive, limits))
}

async fn serve(
    shared: Arc<Shared>,
    listen: SocketAddr,
    archive: PathBuf,
    limits: conn::Limits,
) -> Result<(), Failure> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("--listen {listen}: {e}"))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("--listen {listen}: {e}"))?;
    out!(
        "serving {} at http://{bound}/ (read-only; Ctrl-C stops)",
        archive.display()
    );
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
    eprintln!("stopped serving {}", archive.display());
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

/// Looks for a moved manifest every [`REFRESH`]; a failed reopen keeps the old snapshot
/// (reads go on answering what was durable then) and is logged.
async fn refresh_loop(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(REFRESH);
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
        let mut refused = api::ApiError::new(
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
            let mut refused = api::ApiError::new(
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
