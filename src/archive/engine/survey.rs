//! Budgeted display reads and statistics: buckets from the finest level that fits, level
//! folds over whole level-0 cells (read as the coarsest stored cells that tile them),
//! percentiles from the raw values of exactly the range.

use super::Archive;
use crate::archive::error::ReadError;
use crate::archive::error::StoredError;
use crate::archive::format::levels::{self, Cells};
use crate::archive::format::manifest::{StreamState, TrackState};
use crate::archive::plan::levels::{fold_pieces, plan, plan_from, Piece, Plan};
use crate::contract::{Aggregate, Aggregated, Bucket, TrackKey};
use arrow::array::{Array, UInt64Array};
use serde::Serialize;
use std::collections::BTreeMap;
use std::ops::Bound;

/// A survey's answer and what was answered, so anyone can reproduce it with a query.
#[derive(Clone, Debug, Serialize)]
pub struct Survey {
    /// The stream.
    pub stream: String,
    /// Measured fields in declared order; `Bucket::field` indexes this.
    pub fields: Vec<String>,
    /// The axis column.
    pub axis: String,
    /// The point budget asked for.
    pub budget: usize,
    /// `budget / (4 × fields)`.
    pub cells_per_field: usize,
    /// The level, merge and cell width used; `None` when the range holds nothing.
    pub plan: Option<Plan>,
    /// The axis span the answered whole cells cover, `[from, to)`.
    pub span: Option<[u64; 2]>,
    /// Buckets grouped by field in declared order, ascending by `first.axis` within a field.
    pub buckets: Vec<Bucket>,
}

/// A statistic's answer with the span it covers.
#[derive(Clone, Debug, Serialize)]
pub struct Folded {
    /// The stream.
    pub stream: String,
    /// The statistic.
    pub kind: Aggregate,
    /// Measured fields in declared order.
    pub fields: Vec<String>,
    /// Where the answer comes from: `level 0` (or the finest level retention left) for level
    /// folds, `raw` for percentiles.
    pub source: String,
    /// The axis span covered, `[from, to)`: whole level-0 cells for a level fold, exactly
    /// the range for a percentile. `None` when the range holds nothing.
    pub span: Option<[u64; 2]>,
    /// One answer per measured field, in declared order.
    pub answers: Vec<Aggregated>,
    /// For a level fold, the cells read, in axis order: together exactly the whole cells of
    /// `source`'s level the range touches (a piece of a level beneath the stream's first
    /// stored level is folded from the raw rows). Empty for a percentile.
    pub pieces: Vec<Piece>,
}

/// A track's floor in level `k`, `(axis, position)`: its level floor for a stored level;
/// for a level beneath the stream's first stored level `stored` (computed from the raw
/// rows), its raw floor.
fn track_level_floor(t: &TrackState, k: usize, stored: usize) -> (u64, u64) {
    if k < stored {
        (t.raw.axis, t.raw.position)
    } else {
        let f = t.level_floor(k);
        (f.axis, f.position)
    }
}

/// The highest level-`k` floor (axis) of the selected tracks: where the level is whole.
fn lowest_start(tracks: &[(&TrackKey, &TrackState)], k: usize, stored: usize) -> u64 {
    tracks
        .iter()
        .map(|(_, t)| track_level_floor(t, k, stored).0)
        .max()
        .unwrap_or(0)
}

/// The lowest floor, `(axis, position)`, any level at or above `from` offers the selected
/// tracks: beneath it no such level holds cells for all of them.
fn level_floor(
    tracks: &[(&TrackKey, &TrackState)],
    ladder: &levels::Ladder,
    from: usize,
    stored: usize,
) -> (u64, u64) {
    (from..ladder.levels as usize)
        .map(|k| {
            let axis = lowest_start(tracks, k, stored);
            let position = tracks
                .iter()
                .map(|(_, t)| track_level_floor(t, k, stored).1)
                .max()
                .unwrap_or(0);
            (axis, position)
        })
        .min()
        .unwrap_or((0, 0))
}

/// The refusal when no level at or above `from` holds the range: the lowest floor any of
/// them offers (narrowing to it is answered).
fn level_floor_refusal(
    tracks: &[(&TrackKey, &TrackState)],
    ladder: &levels::Ladder,
    from: usize,
    stored: usize,
) -> ReadError {
    let (axis, position) = level_floor(tracks, ladder, from, stored);
    ReadError::Floor {
        tier: "levels",
        floor: crate::contract::Position(position),
        axis,
    }
}

/// The highest raw floor of the selected tracks: beneath it a raw scan is refused.
fn raw_floor(tracks: &[(&TrackKey, &TrackState)]) -> crate::archive::format::manifest::RawFloor {
    tracks
        .iter()
        .map(|(_, t)| t.raw)
        .max_by_key(|f| f.axis)
        .unwrap_or_default()
}

/// Where a selection's history stops being answered, on the axis (what a viewer draws as
/// its floors): the refusals a survey, fold or percentile reaching beneath them meet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Floors {
    /// Beneath it no level holds cells for every selected track: a survey or level fold
    /// reaching beneath it is refused with this floor (0 for a stream without levels).
    pub levels: u64,
    /// Beneath it no raw row of some selected track is retained: a percentile reaching
    /// beneath it is refused with this floor.
    pub raw: u64,
}

/// The survey plan: the finest level that fits the budget and whose floor lies at or beneath
/// the first answered cell, so no answered bucket is short.
fn level_plan(
    ladder: &levels::Ladder,
    tracks: &[(&TrackKey, &TrackState)],
    lo: u64,
    hi: u64,
    cells_per_field: u64,
    stored: usize,
) -> Result<Plan, ReadError> {
    let fitting = plan(ladder, lo, hi, cells_per_field);
    for k in fitting.level..ladder.levels as usize {
        let plan = plan_from(ladder, lo, hi, cells_per_field, k);
        if lowest_start(tracks, plan.level, stored) <= plan.cells[0].saturating_mul(plan.cell_width)
        {
            return Ok(plan);
        }
    }
    Err(level_floor_refusal(tracks, ladder, fitting.level, stored))
}

/// The inclusive axis span `[lo, hi]` cells `first ..= last` of width `width` cover.
fn cells_span(width: u64, first: u64, last: u64) -> (u64, u64) {
    (
        first.saturating_mul(width),
        last.saturating_add(1)
            .saturating_mul(width)
            .saturating_sub(1),
    )
}

/// The inclusive axis span `[lo, hi]` of a request over the selected tracks; `None` if empty.
fn span(
    tracks: &[(&TrackKey, &TrackState)],
    start: Bound<u64>,
    end: Bound<u64>,
) -> Option<(u64, u64)> {
    let lo = match start {
        Bound::Included(a) => a,
        Bound::Excluded(a) => a.checked_add(1)?,
        Bound::Unbounded => tracks.iter().filter_map(|(_, t)| t.origin_axis).min()?,
    };
    let hi = match end {
        Bound::Included(b) => b,
        Bound::Excluded(b) => b.checked_sub(1)?,
        // A track retired whole still spans up to where it was retired, so a read of it meets
        // its floor rather than an empty answer.
        Bound::Unbounded => tracks
            .iter()
            .filter_map(|(_, t)| t.last_axis.or_else(|| t.retired_axis()))
            .max()?,
    };
    (lo <= hi).then_some((lo, hi))
}

/// A selection is "a few" of a level group's tracks, worth finding before decoding, when
/// the group holds more than this many rows for each selected track.
const FEW_TRACKS: u64 = 16;

/// At most this many answer cells (fields × cells) are kept in a dense vector; a survey
/// asking for more (a budget in the millions) keeps a map of the cells it meets instead.
const DENSE_ANSWER: u64 = 1 << 16;

/// A survey's answer cells as tracks are folded into it, cell by cell in track-key order:
/// a slot per cell of the plan when they are few (a budget's worth at most), so folding a
/// fleet's 100,000 tracks costs an index per cell, not a search of a map; else the map.
enum Answer {
    /// Slot `field × cells + (cell − first)`.
    Dense {
        first: u64,
        cells: u64,
        slots: Vec<Option<Bucket>>,
    },
    Sparse(Cells),
}

impl Answer {
    fn new(plan: &Plan, fields: usize) -> Answer {
        let cells = plan.cells[1]
            .saturating_sub(plan.cells[0])
            .saturating_add(1);
        match cells.checked_mul(fields as u64) {
            Some(n) if n <= DENSE_ANSWER => Answer::Dense {
                first: plan.cells[0],
                cells,
                slots: vec![None; n as usize],
            },
            _ => Answer::Sparse(Cells::new()),
        }
    }

    /// Merges `later` into the answer's cell `(field, cell)`, after whatever it holds.
    fn fold(&mut self, (f, c): (u32, u64), later: Bucket) {
        if let Answer::Dense {
            first,
            cells,
            slots,
        } = self
        {
            let at = c
                .checked_sub(*first)
                .filter(|i| *i < *cells)
                .and_then(|i| (f as u64).checked_mul(*cells)?.checked_add(i))
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| slots.get_mut(i));
            match at {
                Some(Some(held)) => return *held = held.merge(later),
                Some(empty) => return *empty = Some(later),
                // Outside the plan (no caller folds one): the cells so far move to a map.
                None => *self = Answer::Sparse(self.take_cells()),
            }
        }
        if let Answer::Sparse(map) = self {
            levels::fold_into(map, (f, c), later);
        }
    }

    /// The cells held, by (field, cell).
    fn take_cells(&mut self) -> Cells {
        match self {
            Answer::Dense {
                first,
                cells,
                slots,
            } => {
                let (first, cells) = (*first, (*cells).max(1));
                std::mem::take(slots)
                    .into_iter()
                    .enumerate()
                    .filter_map(|(i, b)| {
                        let i = i as u64;
                        b.map(|b| (((i / cells) as u32, first + i % cells), b))
                    })
                    .collect()
            }
            Answer::Sparse(map) => std::mem::take(map),
        }
    }

    /// The answer's buckets in (field, cell) order.
    fn into_buckets(self) -> Vec<Bucket> {
        match self {
            Answer::Dense { slots, .. } => slots.into_iter().flatten().collect(),
            Answer::Sparse(map) => map.into_values().collect(),
        }
    }
}

/// One track's cells of one level, per measured field a vector in cell order.
type FieldRuns = Vec<Vec<(u64, Bucket)>>;

/// From this many selected tracks up, a raw scan folds cells on one thread and merges them
/// into the answer on another (a thread costs more than a few tracks' rows).
const PIPELINED_TRACKS: usize = 256;

/// How many tracks' cells a pipelined raw scan hands from one thread to the other at once.
const TRACKS_A_BATCH: usize = 64;

/// The most batches a pipelined raw scan holds between its two threads.
const BATCHES_IN_FLIGHT: usize = 4;
impl Archive {
    /// The caller errors a survey or fold of `stream` beneath `track` would meet.
    pub(crate) fn survey_check(&self, stream: &str, track: &[String]) -> Result<(), ReadError> {
        self.surveyable(stream, track).map(|_| ())
    }

    fn surveyable(
        &self,
        stream: &str,
        track: &[String],
    ) -> Result<(&StreamState, levels::Ladder, TrackKey), ReadError> {
        self.within_scope(stream, track)?;
        let (state, _) = self.recorded(stream)?;
        let not = |why: &str| ReadError::NotSurveyable {
            stream: stream.to_owned(),
            why: why.to_owned(),
        };
        if state.decl.axis.is_none() {
            return Err(not(
                "declares no axis; only an axial stream can be surveyed",
            ));
        }
        let ladder = state
            .decl
            .ladder
            .ok_or_else(|| not("was declared without levels"))?;
        if state.decl.measured.is_empty() {
            return Err(not(
                "has no measured field (no numeric column besides the axis and the track)",
            ));
        }
        if track.len() > state.decl.track.len() {
            return Err(ReadError::BadSelection(format!(
                "stream {stream:?} is tracked by {} component(s); {} label(s) were given",
                state.decl.track.len(),
                track.len()
            )));
        }
        let prefix = TrackKey::encode(track).map_err(|e| ReadError::BadSelection(e.to_string()))?;
        Ok((state, ladder, prefix))
    }

    /// The floors of the tracks of `stream` beneath `track` (labels, outermost first): the
    /// axes a survey or level fold ([`Floors::levels`]) and a percentile ([`Floors::raw`])
    /// reaching beneath are refused at, as their refusals compute them.
    pub fn floors(&self, stream: &str, track: &[String]) -> Result<Floors, ReadError> {
        self.within_scope(stream, track)?;
        let (state, _) = self.recorded(stream)?;
        let prefix = TrackKey::encode(track).map_err(|e| ReadError::BadSelection(e.to_string()))?;
        let tracks = crate::archive::engine::read::select(state, &prefix);
        Ok(Floors {
            levels: state.decl.ladder.map_or(0, |ladder| {
                level_floor(&tracks, &ladder, 0, state.first_stored_level()).0
            }),
            raw: raw_floor(&tracks).axis,
        })
    }

    /// Level `k`'s cells `first ..= last` of each selected track, merged in publish order.
    /// Reads only the row groups that may hold them: level k of each barrier's partials, and
    /// the groups of level-k tables whose tracks and axis span meet the selection (every
    /// digest verified). Decoded groups are kept in the archive's bounded level cache.
    fn level_cells(
        &self,
        state: &StreamState,
        k: usize,
        tracks: &[(&TrackKey, &TrackState)],
        range: [u64; 2],
    ) -> Result<BTreeMap<TrackKey, Cells>, ReadError> {
        let mut out: Vec<Cells> = vec![Cells::new(); tracks.len()];
        self.visit_cells(state, k, tracks, range, |t, at, bucket| {
            levels::fold_into(&mut out[t], at, bucket);
        })?;
        Ok(tracks
            .iter()
            .zip(out)
            .filter(|(_, cells)| !cells.is_empty())
            .map(|((key, _), cells)| ((*key).clone(), cells))
            .collect())
    }

    /// Hands `visit` level `k`'s cells `first ..= last` of each selected track (by its index
    /// in `tracks`): from the level files when the stream stores level k, else computed from
    /// the raw rows of the cells' axis span (a level beneath the stream's first stored level
    /// holds only a few rows a cell, so this reads about as many rows as the level would
    /// hold cells).
    fn visit_cells(
        &self,
        state: &StreamState,
        k: usize,
        tracks: &[(&TrackKey, &TrackState)],
        range: [u64; 2],
        mut visit: impl FnMut(usize, (u32, u64), Bucket) + Send,
    ) -> Result<(), ReadError> {
        if k < state.first_stored_level() {
            self.visit_raw_cells(state, k, tracks, &[(range, 0)], visit)
        } else {
            self.visit_level_cells(state, k, tracks, range, &mut visit)?;
            // Rows whose barriers deferred their partials (format version 8) were published
            // after every row the level files hold: their cells, folded from the raw rows,
            // merge in after.
            match state.levels_deferred_from {
                Some(from) => self.visit_raw_cells(state, k, tracks, &[(range, from)], visit),
                None => Ok(()),
            }
        }
    }

    /// Level `k`'s cells in `ranges` (each `([first, last], min_seq)`, ascending and
    /// disjoint) of each selected track folded from its sealed raw rows, those of a range
    /// from `_seq` `min_seq` on, exactly as a barrier folds them (level 0 from the rows, then
    /// coarser), handed to `visit` track by track, each track's cells by field then cell.
    /// One scan reads every range, adjacent ranges of one `min_seq` as one window, so a row
    /// group the ranges share is decoded once.
    fn visit_raw_cells(
        &self,
        state: &StreamState,
        k: usize,
        tracks: &[(&TrackKey, &TrackState)],
        ranges: &[([u64; 2], u64)],
        mut visit: impl FnMut(usize, (u32, u64), Bucket) + Send,
    ) -> Result<(), ReadError> {
        let Some(ladder) = state.decl.ladder else {
            return Ok(());
        };
        let mut windows: Vec<([u64; 2], u64)> = Vec::with_capacity(ranges.len());
        for &([first, last], min_seq) in ranges {
            let (lo, hi) = cells_span(ladder.width(k), first, last);
            match windows.last_mut() {
                Some(([_, end], seq)) if *seq == min_seq && end.checked_add(1) == Some(lo) => {
                    *end = hi
                }
                _ => windows.push(([lo, hi], min_seq)),
            }
        }
        let in_ranges = |c: u64| {
            ranges
                .iter()
                .any(|([first, last], _)| (*first..=*last).contains(&c))
        };
        let mut hand_on = move |t: usize, track: FieldRuns| {
            for (f, run) in track.into_iter().enumerate() {
                for (c, bucket) in run.into_iter().filter(|(c, _)| in_ranges(*c)) {
                    visit(t, (f as u32, c), bucket);
                }
            }
        };
        // Level k's cells, folded level by level from level 0 as a barrier folds them.
        let truncated = levels::Ladder::new(ladder.base, ladder.factor, k as u8 + 1)
            .map_err(|e| StoredError::internal(e.to_string()))?;
        if tracks.len() < PIPELINED_TRACKS {
            return self.raw_runs(state, &truncated, tracks, &windows, hand_on);
        }
        // Many tracks: their cells are folded from the rows on this thread while another
        // hands them on (`visit`, an answer's merge), in the same order, so the answer is the
        // same bucket for bucket. The tracks go across in batches (a hand-over costs a
        // thread's wake-up), and at most `BATCHES_IN_FLIGHT` batches wait between them.
        std::thread::scope(|scope| {
            let (send, arrived) =
                std::sync::mpsc::sync_channel::<Vec<(usize, FieldRuns)>>(BATCHES_IN_FLIGHT);
            let merging = std::thread::Builder::new()
                .name("archive-survey".into())
                .spawn_scoped(scope, move || {
                    for batch in arrived {
                        for (t, track) in batch {
                            hand_on(t, track);
                        }
                    }
                })
                .map_err(|e| StoredError::internal(format!("a survey's merge thread: {e}")))?;
            // A send fails only once the merging thread is gone, which its join reports.
            let mut batch = Vec::with_capacity(TRACKS_A_BATCH);
            let scanned = self.raw_runs(state, &truncated, tracks, &windows, |t, track| {
                batch.push((t, track));
                if batch.len() == TRACKS_A_BATCH {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(TRACKS_A_BATCH));
                    let _ = send.send(full);
                }
            });
            if scanned.is_ok() && !batch.is_empty() {
                let _ = send.send(batch);
            }
            // Every track handed on: the merging thread ends once it has merged them.
            drop(send);
            match merging.join() {
                Ok(()) => scanned,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// The raw scan of [`Archive::visit_raw_cells`]: each selected track's cells of the top
    /// level of `truncated` (the stream's ladder up to the level asked for) in `windows`,
    /// folded from its rows in publish order, handed to `hand_on` once whole.
    fn raw_runs(
        &self,
        state: &StreamState,
        truncated: &levels::Ladder,
        tracks: &[(&TrackKey, &TrackState)],
        windows: &[([u64; 2], u64)],
        mut hand_on: impl FnMut(usize, FieldRuns),
    ) -> Result<(), ReadError> {
        let k = usize::from(truncated.levels).saturating_sub(1);
        // One scan of every selected track (a packed row group decoded once for all of its
        // slices), each track's cells folded in its publish order: per field a vector in cell
        // order, which a track's rows (in axis order) extend at its end; a cell that comes
        // again merges into the one it has, exactly as a map's fold would. The scan reads
        // track after track, so a track's cells are whole when the next track's rows come:
        // they are handed on then, and only one track's cells are held at a time.
        let fields = state.decl.measured.len();
        let mut current: Option<(usize, FieldRuns)> = None;
        let mut came_back = None;
        self.scan_axis(state, tracks, windows, &|| true, |t, axis, measured| {
            if current.as_ref().is_some_and(|(at, _)| *at > t) {
                came_back.get_or_insert(t);
            }
            if current.as_ref().is_some_and(|(at, _)| *at != t) {
                if let Some((done, track)) = current.take() {
                    hand_on(done, track);
                }
            }
            let (_, track) = current.get_or_insert_with(|| (t, vec![Vec::new(); fields]));
            for ((f, c), bucket) in levels::level_cells(truncated, axis, measured, k) {
                // Sized on demand: a cell is never dropped for want of a place.
                if track.len() <= f as usize {
                    track.resize_with(f as usize + 1, Vec::new);
                }
                let run = &mut track[f as usize];
                match run.last_mut() {
                    Some((last, merged)) if *last == c => *merged = merged.merge(bucket),
                    Some((last, _)) if *last > c => {
                        match run.binary_search_by_key(&c, |(cell, _)| *cell) {
                            Ok(at) => run[at].1 = run[at].1.merge(bucket),
                            Err(at) => run.insert(at, (c, bucket)),
                        }
                    }
                    _ => run.push((c, bucket)),
                }
            }
        })?;
        if let Some(t) = came_back {
            // Its cells were handed on in two parts: never an answer.
            return Err(StoredError::internal(format!(
                "the raw scan came back to track {} after the tracks after it",
                tracks[t].0
            ))
            .into());
        }
        if let Some((t, track)) = current {
            hand_on(t, track);
        }
        Ok(())
    }

    /// Level `k`'s cells from the level files; see [`Archive::visit_cells`].
    fn visit_level_cells(
        &self,
        state: &StreamState,
        k: usize,
        tracks: &[(&TrackKey, &TrackState)],
        [first, last]: [u64; 2],
        visit: &mut impl FnMut(usize, (u32, u64), Bucket),
    ) -> Result<(), ReadError> {
        let (lo, hi) = cells_span(state.decl.ladder.map_or(1, |l| l.width(k)), first, last);
        let labels: Vec<Vec<&str>> = tracks.iter().map(|(k, _)| k.labels()).collect();
        let fields = state.decl.measured.len() as u32;
        // The row groups that may hold the selection, in publish order.
        let wanted: Vec<(usize, usize)> = levels::level_groups(&state.levels, k)
            .filter(|&(f, g)| {
                let entry = &state.levels[f].groups[g];
                !entry.axis.is_some_and(|[a0, a1]| a1 < lo || a0 > hi)
                    && levels::group_holds_any(entry, &labels)
            })
            .collect();
        // Those decoded already, under one lock; the rest read (digests verified) and kept.
        let (mut decoded, keeps): (Vec<Option<std::sync::Arc<levels::LevelRows>>>, bool) = {
            let mut cache = self.level_cache.lock().unwrap_or_else(|p| p.into_inner());
            let held = wanted
                .iter()
                .map(|&(f, g)| cache.get((state.levels[f].name, g)))
                .collect();
            (held, cache.keeps())
        };
        let schema = levels::level_schema(&state.decl)
            .map_err(|e| StoredError::corrupt(format!("stream {:?}: {e}", state.decl.id)))?;
        let track_schema = std::sync::Arc::new(
            schema
                .project(&(0..state.decl.track.len()).collect::<Vec<_>>())
                .map_err(|e| StoredError::internal(e.to_string()))?,
        );
        let mut open = crate::archive::io::segment::Opened::new(&self.store, schema);
        let mut read = Vec::new();
        for (slot, &(f, g)) in decoded.iter_mut().zip(&wanted) {
            if slot.is_some() {
                continue;
            }
            let file = &state.levels[f];
            let damaged =
                |m: String| StoredError::corrupt(format!("{}: level {k}: {m}", file.path));
            // A read that keeps nothing for the next one (a one-shot command) of a few of a
            // group's tracks decodes the track columns, finds its tracks' rows, and decodes
            // only those (the pages around them skipped); anything else decodes the group
            // whole and keeps it.
            let few = (labels.len() as u64).saturating_mul(FEW_TRACKS) < file.groups[g].rows;
            if !keeps && few {
                let found = open.read_columns(f, file, g, &track_schema)?;
                let found = levels::TrackColumns::decode(&state.decl, &found).map_err(damaged)?;
                let ranges: Vec<std::ops::Range<u64>> = found
                    .rows_of_all(&labels)
                    .into_iter()
                    .map(|r| r.start as u64..r.end as u64)
                    .collect();
                let batch = open.read_rows(f, file, g, &ranges)?;
                let rows = levels::LevelRows::decode(&state.decl, &batch).map_err(damaged)?;
                *slot = Some(std::sync::Arc::new(rows));
                continue;
            }
            let batch = open.read_group(f, file, g)?;
            let rows = std::sync::Arc::new(
                levels::LevelRows::decode(&state.decl, &batch).map_err(damaged)?,
            );
            read.push(((file.name, g), rows.clone()));
            *slot = Some(rows);
        }
        if !read.is_empty() {
            let mut cache = self.level_cache.lock().unwrap_or_else(|p| p.into_inner());
            for (at, rows) in read {
                cache.put(at, rows);
            }
        }
        // Each selected track's rows found by a search in key order, and only those turned
        // into cells: per group, track by track, field by field, cells in ascending order.
        for group in decoded.iter().flatten() {
            let mut from = 0;
            for t in group.tracks.tracks_within(&labels) {
                let rows = group.tracks.rows_of(&labels[t], from);
                from = rows.end;
                for field in 0..fields {
                    for i in rows.clone().filter(|&i| group.field(i) == field) {
                        let ((f, c), bucket) = group.bucket(i);
                        if (first..=last).contains(&c) {
                            visit(t, (f, c), bucket);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Display buckets of the axis range under a point budget (four points a bucket):
    /// `cells per field = budget / (4 × measured fields)`, from the finest level whose cells
    /// over the span fit, merging grid-aligned groups past the coarsest. Whole cells: every
    /// cell the range touches, unclipped. Several tracks under a prefix merge cell by cell in
    /// track-key order. Never more than the budget.
    pub fn survey(
        &self,
        stream: &str,
        track: &[String],
        start: Bound<u64>,
        end: Bound<u64>,
        budget: usize,
    ) -> Result<Survey, ReadError> {
        let (state, ladder, prefix) = self.surveyable(stream, track)?;
        let fields = state.decl.measured.clone();
        let cells_per_field = budget / (4 * fields.len());
        if cells_per_field == 0 {
            return Err(ReadError::Budget {
                budget,
                fields: fields.len(),
                needed: 4 * fields.len(),
            });
        }
        let tracks = crate::archive::engine::read::select(state, &prefix);
        let axis = state.decl.axis.clone().unwrap_or_default();
        let mut survey = Survey {
            stream: stream.to_owned(),
            fields,
            axis,
            budget,
            cells_per_field,
            plan: None,
            span: None,
            buckets: Vec::new(),
        };
        let Some((lo, hi)) = span(&tracks, start, end) else {
            return Ok(survey);
        };
        let stored = state.first_stored_level();
        let plan = level_plan(&ladder, &tracks, lo, hi, cells_per_field as u64, stored)?;
        // Whole answer cells: every level cell of every answer cell the span touches.
        let first = plan.cells[0] * plan.merge;
        let last = plan.cells[1]
            .saturating_mul(plan.merge)
            .saturating_add(plan.merge - 1);
        // Per track, grid-aligned groups of its cells (exactly what a coarser level of that
        // track would hold); then across tracks, answer cell by answer cell, in key order.
        // A track's cells come whole and in (field, cell) order, so the cells of one answer
        // cell are consecutive: each group is merged as it comes and folded into the answer
        // when the next begins (no map per track, and at 100,000 tracks of a few rows each
        // no map of the answer either: see `Answer`).
        let mut answer = Answer::new(&plan, survey.fields.len());
        let mut run: Option<(usize, (u32, u64), Bucket)> = None;
        let mut fold = |t: usize, (f, c): (u32, u64), b: Bucket| {
            let at = (f, c / plan.merge);
            match &mut run {
                Some((track, cell, acc)) if *track == t && *cell == at => *acc = acc.merge(b),
                _ => {
                    if let Some((_, cell, acc)) = run.replace((t, at, b)) {
                        answer.fold(cell, acc);
                    }
                }
            }
        };
        if plan.level < stored {
            // Folded from the raw rows: each track's cells come whole (every piece of a cell
            // merged), by field then cell, track after track in key order, so each is folded
            // into the answer as it comes, and no copy of a track's cells is kept.
            self.visit_raw_cells(state, plan.level, &tracks, &[([first, last], 0)], &mut fold)?;
        } else {
            let view = self.level_cells(state, plan.level, &tracks, [first, last])?;
            for (t, cells) in view.into_values().enumerate() {
                for (at, b) in cells {
                    fold(t, at, b);
                }
            }
        }
        if let Some((_, cell, acc)) = run {
            answer.fold(cell, acc);
        }
        survey.buckets = answer.into_buckets();
        debug_assert!(survey.buckets.len() * 4 <= budget);
        survey.span = Some([
            plan.cells[0] * plan.cell_width,
            (plan.cells[1] + 1).saturating_mul(plan.cell_width),
        ]);
        survey.plan = Some(plan);
        Ok(survey)
    }

    /// One statistic per measured field over the axis range. Level folds (`min`, `max`,
    /// `mean`, `sum`, `count`) fold the level-0 cells the range touches, whole (the finest
    /// level retention left, when it retired level 0 there), read as the coarsest stored
    /// cells that tile them exactly ([`Folded::pieces`]): the cost is a few cells a level,
    /// the rows of at most two stored cells a track, and the rows whose partials a barrier
    /// deferred (format version 8), not the range's rows.
    /// Percentiles scan the raw values of exactly the range.
    pub fn fold(
        &self,
        stream: &str,
        track: &[String],
        start: Bound<u64>,
        end: Bound<u64>,
        kind: Aggregate,
    ) -> Result<Folded, ReadError> {
        self.fold_while(stream, track, start, end, kind, &|| true)
    }

    /// [`Archive::fold`] for a caller that may stop wanting the answer (a server whose client
    /// went away): a percentile's raw scan asks `wanted` before each row group it reads and
    /// stops with [`ReadError::Abandoned`] once it answers `false`.
    pub fn fold_while(
        &self,
        stream: &str,
        track: &[String],
        start: Bound<u64>,
        end: Bound<u64>,
        kind: Aggregate,
        wanted: &dyn Fn() -> bool,
    ) -> Result<Folded, ReadError> {
        let (state, ladder, prefix) = self.surveyable(stream, track)?;
        let fields = state.decl.measured.clone();
        let tracks = crate::archive::engine::read::select(state, &prefix);
        let mut folded = Folded {
            stream: stream.to_owned(),
            kind,
            source: if kind.folds_levels() {
                "level 0"
            } else {
                "raw"
            }
            .to_owned(),
            answers: (0..fields.len() as u32)
                .map(|field| Aggregated {
                    field,
                    kind,
                    value: kind.scanned(&mut []),
                    count: 0,
                })
                .collect(),
            fields,
            span: None,
            pieces: Vec::new(),
        };
        let Some((lo, hi)) = span(&tracks, start, end) else {
            return Ok(folded);
        };
        if kind.folds_levels() {
            // The finest level whose floor the range does not reach beneath (level 0 unless
            // retention retired it there); whole cells of it.
            let stored = state.first_stored_level();
            let k = (0..ladder.levels as usize)
                .find(|&k| {
                    lowest_start(&tracks, k, stored) <= lo / ladder.width(k) * ladder.width(k)
                })
                .ok_or_else(|| level_floor_refusal(&tracks, &ladder, 0, stored))?;
            let w = ladder.width(k);
            let (first, last) = (lo / w, hi / w);
            // The same whole level-k cells, read as few cells as the stored levels allow:
            // the edges no coarser cell fits at level k, the rest from the coarsest level
            // whose floor lies beneath it (a fold of 200M rows reads a few hundred cells).
            let pieces = fold_pieces(&ladder, k, [first, last], stored, |level, from| {
                lowest_start(&tracks, level, stored) <= from.saturating_mul(ladder.width(level))
            });
            // The raw pieces (beneath the first stored level): at most the two edges, at level k.
            let raw = pieces.iter().filter(|p| p.level < stored).count();
            folded.source = if raw == 0 {
                format!("level {k}")
            } else if raw == pieces.len() {
                format!(
                    "level {k} (folded from the raw rows: the stream stores levels from {stored})"
                )
            } else {
                format!(
                    "level {k} (its edges folded from the raw rows: the stream stores levels from {stored})"
                )
            };
            // Whole cells folded per track and field in axis order, then the tracks in key
            // order: the answer depends on the range, the recorded ladder and the floors
            // alone, never on how the files split the cells (a compaction leaves every sum bit
            // for bit). Per track and field, in axis order: the left raw edge; the stored
            // pieces' cells from the level files, piece after piece (a cell split across runs
            // as adjacent partials); the cells of their deferred rows (format version 8: a
            // track published them after every row the level files hold, so after them on the
            // axis too); the right raw edge. Three buckets a track and field (the edges kept
            // apart until the end), whatever the number of pieces.
            let n = folded.fields.len();
            let slots = tracks.len() * n;
            type Running = (Option<(u64, Bucket)>, Option<Bucket>);
            let mut middle: Vec<Running> = vec![(None, None); slots];
            let mut edges: Vec<[Option<Bucket>; 2]> = vec![[None, None]; slots];
            let close = |(cell, total): &mut Running| {
                if let Some((_, whole)) = cell.take() {
                    *total = Some(total.map_or(whole, |t| t.merge(whole)));
                }
            };
            let stored_pieces = pieces.iter().filter(|p| p.level >= stored);
            for piece in stored_pieces.clone() {
                self.visit_level_cells(
                    state,
                    piece.level,
                    &tracks,
                    piece.cells,
                    &mut |t, (f, c), b| {
                        let Some(slot) = middle.get_mut(t * n + f as usize) else {
                            return;
                        };
                        match &mut slot.0 {
                            Some((at, whole)) if *at == c => *whole = whole.merge(b),
                            _ => {
                                close(slot);
                                slot.0 = Some((c, b));
                            }
                        }
                    },
                )?;
                // A cell never runs on into the next piece (whose cells are of another level).
                middle.iter_mut().for_each(close);
            }
            // The raw edges (every row) and the stored pieces' deferred rows (from
            // `levels_deferred_from` on) in one scan; each raw cell comes once, whole, in
            // cell order. A cell of the first piece is the left edge's, of the last the
            // right edge's (when they are raw), any other a deferred cell of the middle.
            let step = |p: &Piece| ladder.width(p.level) / w;
            let mut ranges: Vec<([u64; 2], u64)> = Vec::new();
            for p in &pieces {
                if p.level < stored {
                    ranges.push((p.cells, 0));
                } else if let Some(from) = state.levels_deferred_from {
                    ranges.push(([p.cells[0] * step(p), (p.cells[1] + 1) * step(p) - 1], from));
                }
            }
            let left_end = (pieces[0].level < stored).then_some(pieces[0].cells[1]);
            let right_start = pieces
                .last()
                .filter(|p| pieces.len() > 1 && p.level < stored)
                .map(|p| p.cells[0]);
            if !ranges.is_empty() {
                self.visit_raw_cells(state, k, &tracks, &ranges, |t, (f, c), b| {
                    let i = t * n + f as usize;
                    let slot = if left_end.is_some_and(|end| c <= end) {
                        edges.get_mut(i).map(|e| &mut e[0])
                    } else if right_start.is_some_and(|start| c >= start) {
                        edges.get_mut(i).map(|e| &mut e[1])
                    } else {
                        middle.get_mut(i).map(|m| &mut m.1)
                    };
                    if let Some(slot) = slot {
                        *slot = Some(slot.map_or(b, |total| total.merge(b)));
                    }
                })?;
            }
            folded.pieces = pieces;
            let mut per_field: Vec<Option<Bucket>> = vec![None; n];
            for (i, ((_, middle), [left, right])) in middle.iter().zip(&edges).enumerate() {
                let total = [*left, *middle, *right]
                    .into_iter()
                    .flatten()
                    .reduce(Bucket::merge);
                if let (Some(total), Some(acc)) = (total, per_field.get_mut(i % n)) {
                    *acc = Some(acc.map_or(total, |a| a.merge(total)));
                }
            }
            for answer in &mut folded.answers {
                if let Some(Some(b)) = per_field.get(answer.field as usize) {
                    answer.value = kind.folded(b);
                    answer.count = b.count;
                }
            }
            folded.span = Some([first * w, (last + 1).saturating_mul(w)]);
        } else {
            let raw = raw_floor(&tracks);
            if raw.axis > lo {
                return Err(ReadError::Floor {
                    tier: "raw",
                    floor: crate::contract::Position(
                        tracks
                            .iter()
                            .map(|(_, t)| t.raw.position)
                            .max()
                            .unwrap_or(0),
                    ),
                    axis: raw.axis,
                });
            }
            let mut values: Vec<Vec<f64>> = vec![Vec::new(); folded.fields.len()];
            self.scan_axis(
                state,
                &tracks,
                &[([lo, hi], 0)],
                wanted,
                |_, _, measured| {
                    for (f, column) in measured.iter().enumerate() {
                        values[f].extend(column.iter().flatten());
                    }
                },
            )?;
            for (answer, mut v) in folded.answers.iter_mut().zip(values) {
                answer.count = v.len() as u64;
                answer.value = kind.scanned(&mut v);
            }
            folded.span = Some([lo, hi.saturating_add(1)]);
        }
        Ok(folded)
    }

    /// Hands `visit` the track's index, the axis and the measured columns (as f64) of every
    /// stored row of the tracks whose axis lies in one of `windows` (each `([lo, hi],
    /// min_seq)`, inclusive, ascending and disjoint) and whose `_seq` is at least that
    /// window's `min_seq`, reading only the row groups whose axis and `_seq` ranges overlap,
    /// while `wanted` says the answer is still wanted; each track's rows in publish order
    /// within a row group and window. Tracks come one after the other, in the order of
    /// `tracks`: every visit of a track comes before the first of the next.
    fn scan_axis(
        &self,
        state: &StreamState,
        tracks: &[(&TrackKey, &TrackState)],
        windows: &[([u64; 2], u64)],
        wanted: &dyn Fn() -> bool,
        mut visit: impl FnMut(usize, &UInt64Array, &[arrow::array::Float64Array]),
    ) -> Result<(), ReadError> {
        let axis_name = state.decl.axis.as_deref().unwrap_or_default();
        let stored = crate::archive::format::spec::stored_schema(&state.decl)
            .map_err(|e| StoredError::corrupt(format!("stream {:?}: {e}", state.decl.id)))?;
        // Only the columns the scan hands on or filters by are decoded: the track's label
        // columns and `_position` are a fleet's widest (their dictionaries) and every column
        // chunk read costs a codec of its own.
        let scanned: Vec<usize> = (0..stored.fields().len())
            .filter(|&i| {
                let name = stored.field(i).name();
                name == axis_name
                    || name == crate::archive::format::spec::SEQ_COLUMN
                    || state.decl.measured.contains(name)
            })
            .collect();
        let schema = std::sync::Arc::new(
            stored
                .project(&scanned)
                .map_err(|e| StoredError::internal(e.to_string()))?,
        );
        let mut open = crate::archive::io::segment::Opened::projected(&self.store, schema)
            .keeping(&self.raw_cache);
        let located = state.locate(&tracks.iter().map(|(_, t)| *t).collect::<Vec<_>>());
        for (t, groups) in located.into_iter().enumerate() {
            for g in groups {
                let file = &state.files[g.file];
                let entry = &file.groups[g.group];
                let Some([a0, a1]) = entry.axis else {
                    continue;
                };
                let meets = |([lo, hi], min_seq): &&([u64; 2], u64)| {
                    a1 >= *lo && a0 <= *hi && entry.seq[1] >= *min_seq
                };
                for &([lo, hi], min_seq) in windows.iter().filter(meets) {
                    if !wanted() {
                        return Err(ReadError::Abandoned);
                    }
                    let column = |batch: &arrow::array::RecordBatch, name: &str| {
                        batch
                            .column_by_name(name)
                            .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
                            .cloned()
                            .ok_or_else(|| {
                                StoredError::corrupt(format!("{}: no {name} column", file.path))
                            })
                    };
                    let (clip_axis, clip_seq) = (a0 < lo || a1 > hi, entry.seq[0] < min_seq);
                    // A window of the entry's rows decodes only what it needs (its axis column,
                    // then the window's rows); a whole entry is read as it is.
                    let mut batch = if clip_axis {
                        open.read_axis_window(g.file, file, g.group, axis_name, [lo, hi])?
                    } else {
                        open.read_group(g.file, file, g.group)?
                    };
                    if clip_seq {
                        let seq = column(&batch, crate::archive::format::spec::SEQ_COLUMN)?;
                        let keep: arrow::array::BooleanArray = (0..batch.num_rows())
                            .map(|i| Some(seq.value(i) >= min_seq))
                            .collect();
                        batch = arrow::compute::filter_record_batch(&batch, &keep)
                            .map_err(|e| StoredError::internal(e.to_string()))?;
                    }
                    let measured = levels::measured_columns(&state.decl, &batch)
                        .map_err(StoredError::corrupt)?;
                    visit(t, &column(&batch, axis_name)?, &measured);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A raw scan of many tracks folds cells on one thread and merges them on another: each
    /// track's cells reach `visit` exactly as a scan of that track alone hands them on, in
    /// track order, none lost (the last batch too) and none twice.
    #[test]
    fn a_pipelined_raw_scan_hands_on_what_a_scan_per_track_does(
    ) -> Result<(), Box<dyn std::error::Error>> {
        use arrow::array::{ArrayRef, Float64Array, RecordBatch, StringArray};
        use arrow::datatypes::{DataType, Field, Schema};
        let hosts = PIPELINED_TRACKS + TRACKS_A_BATCH / 2 + 1;
        let schema = std::sync::Arc::new(Schema::new(vec![
            Field::new("host", DataType::Utf8, false),
            Field::new("t", DataType::UInt64, false),
            Field::new("v", DataType::Float64, false),
        ]));
        let spec = crate::archive::StreamSpec::dynamic(
            "s",
            schema.clone(),
            vec!["host".into()],
            Some("t".into()),
        )?
        .with_ladder(Some(levels::Ladder::new(1, 4, 6)?));
        let dir = tempfile::tempdir()?;
        let mut archive = Archive::open(dir.path(), crate::archive::Config::new().stream(spec))?;
        let mut position = 0u64;
        for barrier in 0..2u64 {
            let (mut host, mut t, mut v, mut at) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for tick in barrier * 20..(barrier + 1) * 20 {
                for h in 0..hosts as u64 {
                    host.push(format!("h{h:04}"));
                    t.push(tick * 3 + h % 3);
                    // Not integers: a sum folded in another grouping would round otherwise.
                    v.push(((tick * 131 + h * 7) as f64 * 0.37).sin() * 10.0);
                    position += 1;
                    at.push(position);
                }
            }
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    std::sync::Arc::new(StringArray::from(host)) as ArrayRef,
                    std::sync::Arc::new(UInt64Array::from(t)),
                    std::sync::Arc::new(Float64Array::from(v)),
                ],
            )?;
            archive.stage_batch("s", &batch, &at)?;
            archive.seal_all()?;
        }
        let state = &archive.state().streams["s"];
        let tracks: Vec<(&TrackKey, &TrackState)> = state.tracks.iter().collect();
        assert_eq!(tracks.len(), hosts);
        let ranges = [([0, 40], 0), ([50, 1_000], 0)];
        for k in [0, 1, 2] {
            let mut together = Vec::new();
            archive.visit_raw_cells(state, k, &tracks, &ranges, |t, at, b| {
                together.push((t, at, b))
            })?;
            let mut alone = Vec::new();
            for (t, track) in tracks.iter().enumerate() {
                archive.visit_raw_cells(state, k, &[*track], &ranges, |_, at, b| {
                    alone.push((t, at, b))
                })?;
            }
            assert!(alone.len() > hosts, "level {k}: {} cells", alone.len());
            assert_eq!(together, alone, "level {k}");
        }
        Ok(())
    }

    fn plan(cells: [u64; 2]) -> Plan {
        Plan {
            level: 0,
            merge: 1,
            cell_width: 1,
            cells,
        }
    }

    /// Folds `cells` (in order) into an answer and into a map, compares their buckets, and
    /// answers whether the answer ended as a map.
    fn same_as_a_map(mut answer: Answer, cells: &[((u32, u64), Bucket)]) -> bool {
        let mut map = Cells::new();
        for &(at, b) in cells {
            answer.fold(at, b);
            levels::fold_into(&mut map, at, b);
        }
        let expected: Vec<Bucket> = map.into_values().collect();
        let sparse = matches!(answer, Answer::Sparse(_));
        assert_eq!(answer.into_buckets(), expected);
        sparse
    }

    #[test]
    fn a_dense_answer_folds_as_a_map_does() {
        // Two fields, cells 10..=13, several tracks' pieces of each cell, in track order.
        let mut cells = Vec::new();
        for track in 0..5u64 {
            for field in 0..2u32 {
                for c in (10..=13).filter(|c| (c + track) % 3 != 0) {
                    let value = (track * 7 + c) as f64 - 20.0 * field as f64;
                    cells.push(((field, c), Bucket::of(field, c * 100 + track, value)));
                }
            }
        }
        let answer = Answer::new(&plan([10, 13]), 2);
        assert!(matches!(answer, Answer::Dense { .. }));
        assert!(!same_as_a_map(answer, &cells));
    }

    #[test]
    fn a_cell_outside_the_plan_moves_the_answer_to_a_map_and_loses_nothing() {
        let cells = [
            ((0, 10), Bucket::of(0, 1000, 1.0)),
            ((1, 11), Bucket::of(1, 1100, 2.0)),
            // Beyond the plan's last cell, then a field it was not sized for.
            ((0, 99), Bucket::of(0, 9900, 3.0)),
            ((2, 10), Bucket::of(2, 1000, 4.0)),
            ((0, 10), Bucket::of(0, 1001, 5.0)),
        ];
        let answer = Answer::new(&plan([10, 11]), 2);
        assert!(matches!(answer, Answer::Dense { .. }));
        assert!(same_as_a_map(answer, &cells));
    }

    #[test]
    fn a_budget_of_millions_keeps_a_map_not_a_slot_per_cell() {
        let answer = Answer::new(&plan([0, DENSE_ANSWER]), 1);
        assert!(matches!(answer, Answer::Sparse(_)));
        let answer = Answer::new(&plan([0, DENSE_ANSWER / 2 - 1]), 2);
        assert!(matches!(answer, Answer::Dense { .. }));
        let answer = Answer::new(&plan([0, u64::MAX]), 3);
        assert!(matches!(answer, Answer::Sparse(_)));
    }
}
