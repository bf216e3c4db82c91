//! `GET /api/rows`: raw rows in publish order, as a page (JSON, or CSV/Arrow with `limit`)
//! or streamed whole (CSV/Arrow without `limit`), read window by window so memory stays
//! bounded however long the range.

use super::request::{blocking, Abandon, ApiError, Params, Wanted};
use super::shared::Shared;
use crate::archive::plan::select::select;
use crate::archive::{Archive, ReadError, POSITION_COLUMN, SEQ_COLUMN};
use crate::render;
use crate::{Position, TrackKey};
use arrow::array::{Array, RecordBatch, UInt64Array};
use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use std::ops::Bound;
use std::sync::Arc;

/// Rows in a page when `limit` is not given (JSON).
const DEFAULT_LIMIT: u64 = 10_000;
/// The most rows one page answers.
const MAX_LIMIT: u64 = 1_000_000;
/// Rows a read window aims at: one window's rows are in memory at once.
const WINDOW_ROWS: u64 = 131_072;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Csv,
    Arrow,
}

/// `[start, end)` position windows covering the range, each ending where a group of the
/// selection ends once about [`WINDOW_ROWS`] rows are covered (from the manifest: no read).
/// The windows only pace the reads; every row in the range is in exactly one of them.
fn windows(
    archive: &Archive,
    stream: &str,
    track: &[String],
    from: u64,
    to: Option<u64>,
) -> Vec<(u64, Option<u64>)> {
    let mut groups: Vec<[u64; 3]> = Vec::new();
    // A selection that does not encode is refused by the read itself; one window lets it.
    let prefix = TrackKey::encode(track).ok();
    if let (Some(state), Some(prefix)) = (archive.state().streams.get(stream), prefix) {
        // A key-range scan of the catalog, as the read's own selection, and a search of the
        // live files for those tracks: a track's request costs what its groups cost, not a
        // walk of every track of the stream.
        let selected: Vec<_> = select(state, &prefix).into_iter().map(|(_, t)| t).collect();
        for g in state.locate(&selected).into_iter().flatten() {
            let Some(entry) = state.files.get(g.file).and_then(|f| f.groups.get(g.group)) else {
                continue;
            };
            let [lo, hi] = entry.position;
            if hi >= from && to.is_none_or(|to| lo < to) {
                groups.push([lo, hi, entry.rows]);
            }
        }
    }
    groups.sort_unstable();
    let mut out = Vec::new();
    let (mut start, mut covered, mut reach) = (from, 0u64, from);
    for [_, hi, rows] in groups {
        covered += rows;
        reach = reach.max(hi.saturating_add(1));
        if covered >= WINDOW_ROWS && to.is_none_or(|to| reach < to) {
            out.push((start, Some(reach)));
            start = reach;
            covered = 0;
        }
    }
    out.push((start, to));
    out
}

/// What a rows request reads: a selection of a stream, through the server's snapshots.
struct Selection<'a> {
    shared: &'a Shared,
    stream: &'a str,
    track: &'a [String],
}

impl Selection<'_> {
    /// The read windows from `from` to `to` ([`windows`]), planned on the current snapshot.
    fn windows(&self, from: u64, to: Option<u64>) -> Vec<(u64, Option<u64>)> {
        windows(&self.shared.snapshot(), self.stream, self.track, from, to)
    }

    /// The rows of one window, read under a raw-scan permit (held for the read, not while
    /// the answer waits on a slow client). Runs on the blocking pool.
    fn read(&self, (a, b): (u64, Option<u64>)) -> Result<RecordBatch, ApiError> {
        let end = b.map_or(Bound::Unbounded, |b| Bound::Excluded(Position(b)));
        let _permit = tokio::runtime::Handle::current()
            .block_on(self.shared.raw.acquire())
            .map_err(|e| ApiError::unreadable(e.to_string()))?;
        self.shared.read(|archive| {
            archive.read_rows(self.stream, self.track, Bound::Included(Position(a)), end)
        })
    }
}

fn u64s<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a UInt64Array, ApiError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
        .ok_or_else(|| ApiError::unreadable(format!("a row batch lacks its {name} column")))
}

/// Where a page starts: a position, and the first `_seq` answered at that position (rows
/// of one position share it, so a page may end between them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cursor {
    from: u64,
    seq: u64,
}

/// The rows of `batch` from the cursor on: those at its position with a smaller `_seq`
/// were answered by the page before.
fn after(batch: RecordBatch, cursor: Cursor) -> Result<RecordBatch, ApiError> {
    if cursor.seq == 0 {
        return Ok(batch);
    }
    let (pos, seq) = (u64s(&batch, POSITION_COLUMN)?, u64s(&batch, SEQ_COLUMN)?);
    // Publish order: the answered rows are a prefix.
    let skip = (0..batch.num_rows())
        .take_while(|&i| pos.value(i) == cursor.from && seq.value(i) < cursor.seq)
        .count();
    Ok(batch.slice(skip, batch.num_rows() - skip))
}

/// Turns batches into the response's bytes.
enum Encoder {
    Json(Vec<RecordBatch>),
    Csv {
        header: bool,
    },
    /// The writer starts at the first batch, with the schema of what is answered.
    Arrow(Option<Box<arrow::ipc::writer::StreamWriter<Vec<u8>>>>),
}

impl Encoder {
    fn new(format: Format) -> Encoder {
        match format {
            Format::Json => Encoder::Json(Vec::new()),
            Format::Csv => Encoder::Csv { header: true },
            Format::Arrow => Encoder::Arrow(None),
        }
    }

    /// The bytes of `batch` (JSON keeps the batches for [`Encoder::finish`]).
    fn encode(&mut self, batch: &RecordBatch) -> Result<Vec<u8>, ApiError> {
        let fail =
            |e: arrow::error::ArrowError| ApiError::unreadable(format!("encoding rows: {e}"));
        let batch = &render::without_seq(batch).map_err(fail)?;
        match self {
            Encoder::Json(kept) => {
                kept.push(batch.clone());
                Ok(Vec::new())
            }
            Encoder::Csv { header } => {
                let mut out = Vec::new();
                let mut w = arrow::csv::WriterBuilder::new()
                    .with_header(*header)
                    .build(&mut out);
                w.write(&render::flat(batch).map_err(fail)?).map_err(fail)?;
                drop(w);
                *header = false;
                Ok(out)
            }
            Encoder::Arrow(w) => {
                let w = match w {
                    Some(w) => w,
                    None => w.insert(Box::new(
                        arrow::ipc::writer::StreamWriter::try_new(Vec::new(), &batch.schema())
                            .map_err(fail)?,
                    )),
                };
                w.write(batch).map_err(fail)?;
                Ok(std::mem::take(w.get_mut()))
            }
        }
    }

    /// The closing bytes (the JSON document, the Arrow end-of-stream marker).
    fn finish(self, next: Option<Cursor>) -> Result<Vec<u8>, ApiError> {
        let fail =
            |e: arrow::error::ArrowError| ApiError::unreadable(format!("encoding rows: {e}"));
        match self {
            Encoder::Json(kept) => {
                let mut rows = Vec::new();
                let mut w = arrow::json::ArrayWriter::new(&mut rows);
                for b in &kept {
                    w.write(b).map_err(fail)?;
                }
                w.finish().map_err(fail)?;
                drop(w);
                if rows.is_empty() {
                    rows.extend_from_slice(b"[]");
                }
                let columns: Vec<String> = kept
                    .first()
                    .map(|b| {
                        b.schema()
                            .fields()
                            .iter()
                            .map(|f| f.name().clone())
                            .collect()
                    })
                    .unwrap_or_default();
                let mut out = format!(
                    "{{\"columns\":{},\"next\":{},\"rows\":",
                    serde_json::to_string(&columns).unwrap_or_else(|_| "[]".into()),
                    next.map_or("null".to_owned(), |n| format!(
                        "{{\"from\":{},\"seq\":{}}}",
                        n.from, n.seq
                    ))
                )
                .into_bytes();
                out.extend_from_slice(&rows);
                out.push(b'}');
                Ok(out)
            }
            Encoder::Csv { .. } => Ok(Vec::new()),
            Encoder::Arrow(None) => Ok(Vec::new()),
            Encoder::Arrow(Some(mut w)) => {
                w.finish().map_err(fail)?;
                Ok(w.into_inner().map_err(fail)?)
            }
        }
    }
}

fn content_type(format: Format) -> &'static str {
    match format {
        Format::Json => "application/json",
        Format::Csv => "text/csv; charset=utf-8",
        Format::Arrow => "application/vnd.apache.arrow.stream",
    }
}

/// One page: at most `limit` rows from the cursor, and where the next page starts.
fn page(
    rows: &Selection,
    wanted: &Wanted,
    start: Cursor,
    to: Option<u64>,
    limit: u64,
    format: Format,
) -> Result<(Vec<u8>, Option<Cursor>), ApiError> {
    let plan = rows.windows(start.from, to);
    let mut kept: Vec<RecordBatch> = Vec::new();
    let mut held = 0u64;
    let mut next = None;
    for (i, window) in plan.iter().enumerate() {
        if !wanted.still() {
            return Err(ReadError::Abandoned.into());
        }
        let mut batch = rows.read(*window)?;
        if i == 0 {
            batch = after(batch, start)?;
        }
        let room = limit - held;
        if (batch.num_rows() as u64) > room {
            let at = room as usize;
            next = Some(Cursor {
                from: u64s(&batch, POSITION_COLUMN)?.value(at),
                seq: u64s(&batch, SEQ_COLUMN)?.value(at),
            });
            kept.push(batch.slice(0, at));
            break;
        }
        held += batch.num_rows() as u64;
        kept.push(batch);
        if held == limit {
            // Every row beneath the window's end is answered; the next page starts there
            // (and may hold nothing).
            next = window
                .1
                .filter(|_| i + 1 < plan.len())
                .map(|from| Cursor { from, seq: 0 });
            break;
        }
    }
    // Every window read is kept (an empty one too), so even an empty page carries the
    // columns.
    let mut encoder = Encoder::new(format);
    let mut out = Vec::new();
    for b in &kept {
        out.extend(encoder.encode(b)?);
    }
    out.extend(encoder.finish(next)?);
    Ok((out, next))
}

/// `GET /api/rows`.
pub(super) async fn rows(State(shared): State<Arc<Shared>>, RawQuery(query): RawQuery) -> Response {
    let answer = async {
        let p = Params::parse(
            query.as_deref(),
            &["stream", "track", "from", "seq", "to", "format", "limit"],
        )?;
        let stream = p.stream()?;
        let track = p.track();
        let (from, to) = p.bounds()?;
        let start = Cursor {
            from: from.unwrap_or(0),
            seq: p.number("seq")?.unwrap_or(0),
        };
        let format = match p.get("format").unwrap_or("json") {
            "json" => Format::Json,
            "csv" => Format::Csv,
            "arrow" => Format::Arrow,
            other => {
                return Err(ApiError::bad(format!(
                    "unknown format {other:?}: json, csv or arrow"
                )))
            }
        };
        let limit = p.number("limit")?;
        if limit == Some(0) {
            return Err(ApiError::bad("limit 0 answers nothing: give at least 1"));
        }
        if let Some(l) = limit.filter(|&l| l > MAX_LIMIT) {
            return Err(ApiError::too_large(format!(
                "limit {l} is above the {MAX_LIMIT} rows one page answers; page with from = next_from"
            )));
        }
        let headers = |next: Option<Cursor>| {
            let mut h = vec![(
                header::CONTENT_TYPE,
                HeaderValue::from_static(content_type(format)),
            )];
            if let Some(n) = next {
                h.push((
                    header::HeaderName::from_static("x-next-from"),
                    HeaderValue::from(n.from),
                ));
                h.push((
                    header::HeaderName::from_static("x-next-seq"),
                    HeaderValue::from(n.seq),
                ));
            }
            h
        };
        match (format, limit) {
            (Format::Json, _) | (_, Some(_)) => {
                let limit = limit.unwrap_or(DEFAULT_LIMIT);
                let (_abandon, wanted) = Abandon::new();
                let (body, next) = blocking(move || {
                    let rows = Selection {
                        shared: &shared,
                        stream: &stream,
                        track: &track,
                    };
                    page(&rows, &wanted, start, to, limit, format)
                })
                .await?;
                let mut response = Body::from(body).into_response();
                for (k, v) in headers(next) {
                    response.headers_mut().insert(k, v);
                }
                Ok(response)
            }
            _ => {
                // The whole range, streamed. The first window is read before the status is
                // sent, so a refusal (a floor, a file that cannot be read) is a status. A
                // later failure aborts the response: the client sees a broken transfer, never
                // a short answer that looks whole.
                let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
                let (first_tx, first_rx) = tokio::sync::oneshot::channel::<Result<(), ApiError>>();
                tokio::task::spawn_blocking(move || {
                    let rows = Selection {
                        shared: &shared,
                        stream: &stream,
                        track: &track,
                    };
                    stream_all(&rows, start, to, format, first_tx, &tx);
                });
                first_rx
                    .await
                    .unwrap_or_else(|_| Err(ApiError::unreadable("the read stopped")))?;
                let body = Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
                    rx.recv().await.map(|chunk| (chunk, rx))
                }));
                let mut response = body.into_response();
                for (k, v) in headers(None) {
                    response.headers_mut().insert(k, v);
                }
                Ok(response)
            }
        }
    };
    answer.await.into_response()
}

fn stream_all(
    rows: &Selection,
    start: Cursor,
    to: Option<u64>,
    format: Format,
    first: tokio::sync::oneshot::Sender<Result<(), ApiError>>,
    tx: &tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    let stream = rows.stream;
    let plan = rows.windows(start.from, to);
    let mut first = Some(first);
    let mut encoder = Encoder::new(format);
    for (i, window) in plan.into_iter().enumerate() {
        let chunk = rows.read(window).and_then(|batch| {
            let batch = if i == 0 { after(batch, start)? } else { batch };
            encoder.encode(&batch)
        });
        match (chunk, first.take()) {
            (Ok(bytes), opened) => {
                if let Some(opened) = opened {
                    if opened.send(Ok(())).is_err() {
                        return;
                    }
                }
                if !bytes.is_empty() && tx.blocking_send(Ok(Bytes::from(bytes))).is_err() {
                    return; // the client went away
                }
            }
            (Err(e), Some(opened)) => {
                let _ = opened.send(Err(e));
                return;
            }
            (Err(e), None) => {
                tracing::warn!("rows of {stream:?} stopped mid-stream: {}", e.message());
                let _ = tx.blocking_send(Err(std::io::Error::other(e.message().to_owned())));
                return;
            }
        }
    }
    match encoder.finish(None) {
        Ok(bytes) if !bytes.is_empty() => {
            let _ = tx.blocking_send(Ok(Bytes::from(bytes)));
        }
        Ok(_) => {}
        Err(e) => {
            let _ = tx.blocking_send(Err(std::io::Error::other(e.message().to_owned())));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::{Config, StreamSpec};
    use arrow::array::StringArray;
    use arrow::datatypes::{DataType, Field, Schema};

    type Failed = Box<dyn std::error::Error>;

    /// The windows of a selection, planned as before the catalog's key-range scan: every
    /// track of the stream walked, those whose labels start with the selection kept.
    fn walked(archive: &Archive, track: &[String], from: u64) -> Vec<(u64, Option<u64>)> {
        let state = &archive.state().streams["s"];
        let mut groups: Vec<[u64; 3]> = state
            .tracks
            .values()
            .filter(|t| t.labels.starts_with(track))
            .flat_map(|t| state.locate(&[t]).into_iter().flatten())
            .map(|g| &state.files[g.file].groups[g.group])
            .filter(|e| e.position[1] >= from)
            .map(|e| [e.position[0], e.position[1], e.rows])
            .collect();
        groups.sort_unstable();
        let (mut out, mut start, mut covered, mut reach) = (Vec::new(), from, 0, from);
        for [_, hi, rows] in groups {
            covered += rows;
            reach = reach.max(hi + 1);
            if covered >= WINDOW_ROWS {
                out.push((start, Some(reach)));
                (start, covered) = (reach, 0);
            }
        }
        out.push((start, None));
        out
    }

    #[test]
    fn windows_pace_only_the_selected_tracks_rows() -> Result<(), Failed> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("host", DataType::Utf8, false),
            Field::new("metric", DataType::Utf8, false),
            Field::new("v", DataType::UInt64, false),
        ]));
        let spec = StreamSpec::dynamic(
            "s",
            schema.clone(),
            vec!["host".into(), "metric".into()],
            None,
        )?;
        let dir = tempfile::tempdir()?;
        let mut archive = Archive::open(dir.path(), Config::new().stream(spec))?;
        // `h1` is a prefix of `h10`'s label but not of its track: a selection of `h1` takes
        // `h1/*` only. Big tracks span several windows, the small one none of its own.
        let mut position = 0u64;
        for (host, metric, rows) in [
            ("h1", "m1", 140_000),
            ("h1", "m2", 5),
            ("h10", "m1", 150_000),
        ] {
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(StringArray::from(vec![host; rows])),
                    Arc::new(StringArray::from(vec![metric; rows])),
                    Arc::new(UInt64Array::from_iter_values(0..rows as u64)),
                ],
            )?;
            let positions: Vec<u64> = (position..position + rows as u64).collect();
            position += rows as u64;
            archive.stage_batch("s", &batch, &positions)?;
            archive.seal_all()?;
        }
        let label = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for selection in [
            &[][..],
            &["h1"],
            &["h1", "m2"],
            &["h10"],
            &["h2"],
            &["h1", "m1"],
        ] {
            let track = label(selection);
            for from in [0, 100_000, 140_002, 1 << 40] {
                assert_eq!(
                    windows(&archive, "s", &track, from, None),
                    walked(&archive, &track, from),
                    "{selection:?} from {from}"
                );
            }
        }
        assert_eq!(windows(&archive, "s", &label(&["h1"]), 0, None).len(), 2);
        assert_eq!(
            windows(&archive, "s", &label(&["h1", "m2"]), 0, None),
            [(0, None)]
        );
        assert_eq!(windows(&archive, "s", &label(&[]), 0, None).len(), 3);
        Ok(())
    }
}
