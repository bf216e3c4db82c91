//! The JSON endpoints: streams, survey, fold, watch; request parsing and refusals.

use super::request::{blocking, Abandon, ApiError, Params};
use super::shared::{Shared, Summary};
use crate::archive::{Archive, Ladder, ReadError};
use crate::Aggregate;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::{Stream, StreamExt};
use serde::Serialize;
use std::convert::Infallible;
use std::sync::Arc;

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
    /// Where the archive's replica stands (`replicate --status --json`), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    replica: Option<serde_json::Value>,
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
    // A row group whose rows the open could not read (format version 11) catalogs none of
    // its tracks: a listing without them would be short, so it is refused like a read.
    for (id, s) in &archive.state().streams {
        if let Some((file, unread)) = s.unreadable().first() {
            return Err(ReadError::Stored(crate::archive::StoredError::new(
                unread.kind,
                format!(
                    "stream {id:?}: row group {} of {} could not be read when the archive was opened ({}), so its tracks cannot be listed",
                    unread.group, file.path, unread.why
                ),
            )));
        }
    }
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
        replica: None,
    })
}

/// `GET /api/streams`.
pub(super) async fn streams(
    State(shared): State<Arc<Shared>>,
    RawQuery(query): RawQuery,
) -> Response {
    let answer = async {
        Params::parse(query.as_deref(), &[])?;
        blocking(move || {
            let mut described = describe(&*shared.refresh()?)?;
            described.replica = shared.replica();
            Ok(Json(described))
        })
        .await
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
