//! The JSON endpoints: streams, survey, fold, watch; request parsing and refusals.

use super::{Shared, Summary};
use crate::archive::{Archive, Ladder, ReadError, StoredErrorKind};
use crate::{Aggregate, BeneathWindow};
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::{Stream, StreamExt};
use serde::Serialize;
use std::convert::Infallible;
use std::ops::Bound;
use std::sync::Arc;

/// A refusal: a status and a JSON body with the refusal's own message.
#[derive(Debug)]
pub(super) struct ApiError {
    status: StatusCode,
    body: Refusal,
    retry: bool,
}

#[derive(Debug, Serialize)]
struct Refusal {
    error: &'static str,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    floor: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    axis: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tier: Option<&'static str>,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, error: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            body: Refusal {
                error,
                message: message.into(),
                floor: None,
                axis: None,
                tier: None,
            },
            retry: false,
        }
    }

    pub(super) fn bad(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub(super) fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }

    pub(super) fn unreadable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unreadable", message)
    }

    pub(super) fn message(&self) -> &str {
        &self.body.message
    }

    fn floor(floor: u64, axis: Option<u64>, tier: Option<&'static str>, message: String) -> Self {
        let mut e = Self::new(StatusCode::RANGE_NOT_SATISFIABLE, "floor", message);
        e.body.floor = Some(floor);
        e.body.axis = axis;
        e.body.tier = tier;
        e
    }
}

impl From<ReadError> for ApiError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Refused(r) => match r {
                BeneathWindow::Floor { floor, axis } => {
                    let message = r.to_string();
                    ApiError::floor(floor.0, axis, Some("raw"), message)
                }
                BeneathWindow::Unserved => {
                    ApiError::new(StatusCode::NOT_FOUND, "unserved", r.to_string())
                }
                BeneathWindow::Unreadable(u) => {
                    let mut e =
                        ApiError::unreadable(BeneathWindow::Unreadable(u.clone()).to_string());
                    e.retry = u.is_transient();
                    e
                }
            },
            ReadError::Stored(s) => {
                let transient = s.kind == StoredErrorKind::Unavailable;
                let mut e = ApiError::unreadable(BeneathWindow::from(s).to_string());
                e.retry = transient;
                e
            }
            ReadError::Floor { tier, floor, axis } => {
                let message = ReadError::Floor { tier, floor, axis }.to_string();
                ApiError::floor(floor.0, Some(axis), Some(tier), message)
            }
            e @ (ReadError::UnknownStream(_)
            | ReadError::NotSelected(_)
            | ReadError::NotSurveyable { .. }) => {
                ApiError::new(StatusCode::NOT_FOUND, "unserved", e.to_string())
            }
            e @ (ReadError::BadSelection(_) | ReadError::Budget { .. }) => {
                ApiError::bad(e.to_string())
            }
            e @ ReadError::Abandoned => ApiError::unreadable(e.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body)).into_response();
        if self.retry {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

/// A request's query parameters, checked against what the endpoint takes.
pub(super) struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Parses the query; a parameter the endpoint does not take, or one given twice (but
    /// `track`), is refused.
    pub(super) fn parse(query: Option<&str>, takes: &[&str]) -> Result<Params, ApiError> {
        let pairs: Vec<(String, String)> =
            url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
        for (i, (k, _)) in pairs.iter().enumerate() {
            if k == "access_token" {
                continue;
            }
            if !takes.contains(&k.as_str()) {
                return Err(ApiError::bad(format!(
                    "unknown parameter {k:?}; this endpoint takes {}",
                    takes.join(", ")
                )));
            }
            if k != "track" && pairs[..i].iter().any(|(p, _)| p == k) {
                return Err(ApiError::bad(format!("parameter {k:?} is given twice")));
            }
        }
        Ok(Params { pairs })
    }

    pub(super) fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn stream(&self) -> Result<String, ApiError> {
        match self.get("stream") {
            Some(s) if !s.is_empty() => Ok(s.to_owned()),
            _ => Err(ApiError::bad(
                "parameter \"stream\" is required (GET /api/streams lists them)",
            )),
        }
    }

    /// The track selection: repeated `track=`, outermost label first.
    pub(super) fn track(&self) -> Vec<String> {
        self.pairs
            .iter()
            .filter(|(k, _)| k == "track")
            .map(|(_, v)| v.clone())
            .collect()
    }

    pub(super) fn number(&self, key: &str) -> Result<Option<u64>, ApiError> {
        self.get(key)
            .map(|v| {
                v.parse::<u64>().map_err(|_| {
                    ApiError::bad(format!(
                        "parameter {key:?} is {v:?}, not a non-negative integer"
                    ))
                })
            })
            .transpose()
    }

    /// `from` and `to`, either absent; `to ≤ from` is refused.
    pub(super) fn bounds(&self) -> Result<(Option<u64>, Option<u64>), ApiError> {
        let (from, to) = (self.number("from")?, self.number("to")?);
        if let (Some(f), Some(t)) = (from, to) {
            if t <= f {
                return Err(ApiError::bad(format!(
                    "to {t} is not above from {f}; the range is [from, to)"
                )));
            }
        }
        Ok((from, to))
    }

    /// [`Params::bounds`] as the range `[from, to)`.
    pub(super) fn range(&self) -> Result<(Bound<u64>, Bound<u64>), ApiError> {
        let (from, to) = self.bounds()?;
        Ok((
            from.map_or(Bound::Unbounded, Bound::Included),
            to.map_or(Bound::Unbounded, Bound::Excluded),
        ))
    }
}

/// Whether the request is still wanted: false once the request's future was dropped (its
/// client went away), which a blocking read checks between row groups.
#[derive(Clone, Default)]
pub(super) struct Wanted(Arc<std::sync::atomic::AtomicBool>);

impl Wanted {
    pub(super) fn still(&self) -> bool {
        !self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Marks the request abandoned when dropped: hold it in the request's future.
pub(super) struct Abandon(Wanted);

impl Abandon {
    pub(super) fn new() -> (Abandon, Wanted) {
        let wanted = Wanted::default();
        (Abandon(wanted.clone()), wanted)
    }
}

impl Drop for Abandon {
    fn drop(&mut self) {
        (self.0).0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Runs a blocking read on the pool, as one request.
pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(ApiError::unreadable(format!("the read failed: {e}"))))
}

/// One node of a stream's track tree: every track beneath a label prefix.
#[derive(Serialize)]
struct Node {
    label: String,
    path: Vec<String>,
    rows: u64,
    tracks: usize,
    first_axis: Option<u64>,
    last_axis: Option<u64>,
    survey_floor_axis: u64,
    raw_floor_axis: u64,
    retired: bool,
    children: Vec<Node>,
}

#[derive(Serialize)]
struct StreamInfo {
    id: String,
    axis: Option<String>,
    measured: Vec<String>,
    track: Vec<String>,
    ladder: Option<Ladder>,
    rows: u64,
    watermark: u64,
    tree: Vec<Node>,
}

#[derive(Serialize)]
struct Streams {
    /// Where the archive stands (generation, barriers, watermarks), as `/api/watch` says it.
    #[serde(flatten)]
    at: Summary,
    streams: Vec<StreamInfo>,
}

/// What the tree shows of one track.
struct Leaf<'a> {
    labels: &'a [String],
    rows: u64,
    origin_axis: Option<u64>,
    last_axis: Option<u64>,
    whole: bool,
}

/// The tracks (key order, so every prefix is contiguous) beneath a prefix of `depth`
/// labels, as tree nodes; the floors are the archive's own ([`Archive::floors`]).
fn nodes(
    archive: &Archive,
    stream: &str,
    tracks: &[Leaf],
    depth: usize,
) -> Result<Vec<Node>, ReadError> {
    let mut out = Vec::new();
    for group in tracks.chunk_by(|a, b| a.labels.get(depth) == b.labels.get(depth)) {
        let Some(label) = group[0].labels.get(depth) else {
            continue;
        };
        let path = group[0].labels[..=depth].to_vec();
        let floors = archive.floors(stream, &path)?;
        out.push(Node {
            label: label.clone(),
            rows: group.iter().map(|t| t.rows).sum(),
            tracks: group.len(),
            first_axis: group.iter().filter_map(|t| t.origin_axis).min(),
            last_axis: group.iter().filter_map(|t| t.last_axis).max(),
            survey_floor_axis: floors.levels,
            raw_floor_axis: floors.raw,
            retired: group.iter().all(|t| t.whole),
            children: nodes(archive, stream, group, depth + 1)?,
            path,
        });
    }
    Ok(out)
}

fn describe(archive: &Archive) -> Result<Streams, ReadError> {
    let streams = archive
        .state()
        .streams
        .iter()
        .map(|(id, s)| {
            let tracks: Vec<Leaf> = s
                .tracks
                .values()
                .map(|t| Leaf {
                    labels: &t.labels,
                    rows: t.rows,
                    origin_axis: t.origin_axis,
                    last_axis: t.last_axis,
                    whole: t.whole,
                })
                .collect();
            Ok(StreamInfo {
                id: id.clone(),
                axis: s.decl.axis.clone(),
                measured: s.decl.measured.clone(),
                track: s.decl.track.clone(),
                ladder: s.decl.ladder,
                rows: tracks.iter().map(|t| t.rows).sum(),
                watermark: s.watermark.0,
                tree: nodes(archive, id, &tracks, 0)?,
            })
        })
        .collect::<Result<_, ReadError>>()?;
    Ok(Streams {
        at: Summary::of(archive),
        streams,
    })
}

/// `GET /api/streams`.
pub(super) async fn streams(
    State(shared): State<Arc<Shared>>,
    RawQuery(query): RawQuery,
) -> Response {
    let answer = async {
        Params::parse(query.as_deref(), &[])?;
        blocking(move || Ok(Json(describe(&*shared.refresh()?)?))).await
    };
    answer.await.into_response()
}

/// `GET /api/survey`.
pub(super) async fn survey(
    State(shared): State<Arc<Shared>>,
    RawQuery(query): RawQuery,
) -> Response {
    let answer = async {
        let p = Params::parse(
            query.as_deref(),
            &["stream", "track", "from", "to", "budget"],
        )?;
        let stream = p.stream()?;
        let track = p.track();
        let (start, end) = p.range()?;
        let budget = p.number("budget")?.ok_or_else(|| {
            ApiError::bad("parameter \"budget\" is required: the most points the answer may hold (four a bucket)")
        })?;
        if budget > shared.max_budget as u64 {
            return Err(ApiError::too_large(format!(
                "a budget of {budget} points is above this server's --max-budget {}",
                shared.max_budget
            )));
        }
        let budget = budget as usize;
        blocking(move || {
            let s = shared.read(|a| a.survey(&stream, &track, start, end, budget))?;
            Ok(Json(s))
        })
        .await
    };
    answer.await.into_response()
}

/// `GET /api/fold`.
pub(super) async fn fold(State(shared): State<Arc<Shared>>, RawQuery(query): RawQuery) -> Response {
    let answer = async {
        let p = Params::parse(
            query.as_deref(),
            &["stream", "track", "from", "to", "aggregate"],
        )?;
        let stream = p.stream()?;
        let track = p.track();
        let (start, end) = p.range()?;
        let name = p.get("aggregate").ok_or_else(|| {
            ApiError::bad(
                "parameter \"aggregate\" is required: min, max, mean, sum, count or p0..p100",
            )
        })?;
        let kind = Aggregate::parse(name).ok_or_else(|| {
            ApiError::bad(format!(
                "unknown aggregate {name:?}: min, max, mean, sum, count or p0..p100 (the median is p50)"
            ))
        })?;
        // A percentile scans raw values: it waits for a raw-scan permit.
        let _permit = if kind.folds_levels() {
            None
        } else {
            Some(
                shared
                    .raw
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|e| ApiError::unreadable(e.to_string()))?,
            )
        };
        // A percentile scan stops between row groups once the client is gone.
        let (_abandon, wanted) = Abandon::new();
        blocking(move || {
            let _permit = _permit;
            let still = || wanted.still();
            let f = shared.read(|a| a.fold_while(&stream, &track, start, end, kind, &still))?;
            Ok(Json(f))
        })
        .await
    };
    answer.await.into_response()
}

/// `GET /api/watch`: a `barrier` event now and on every commit, until the server stops.
pub(super) async fn watch(
    State(shared): State<Arc<Shared>>,
    RawQuery(query): RawQuery,
) -> Response {
    if let Err(e) = Params::parse(query.as_deref(), &[]) {
        return e.into_response();
    }
    let changes = shared.changes.subscribe();
    let stopping = shared.stopping.subscribe();
    Sse::new(barriers(changes, stopping))
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn barriers(
    changes: tokio::sync::watch::Receiver<Summary>,
    stopping: tokio::sync::watch::Receiver<bool>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let event = |s: &Summary| {
        Ok(Event::default()
            .event("barrier")
            .data(serde_json::to_string(s).unwrap_or_default()))
    };
    let first = event(&changes.borrow());
    let rest = futures::stream::unfold(changes, move |mut changes| async move {
        changes.changed().await.ok()?;
        let next = changes.borrow_and_update().clone();
        Some((next, changes))
    })
    .map(move |s| event(&s));
    let mut stopping = stopping;
    futures::stream::once(async move { first })
        .chain(rest)
        .take_until(async move {
            let _ = stopping.wait_for(|&stop| stop).await;
        })
}

/// Anything else under `/api/`.
pub(super) async fn not_found() -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such endpoint: /api/streams, /api/survey, /api/fold, /api/rows, /api/watch (docs/serve.md)",
    )
    .into_response()
}
