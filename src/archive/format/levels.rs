//! M4 levels: per track and measured field, true M4 buckets on a global axis grid anchored at
//! zero, one table per resolution. Level 0 folds raw rows; level k+1 folds level k by
//! [`Bucket::merge`], so a stored level equals a fold of its rows in any grouping.

use crate::archive::error::Invalid;
use crate::archive::error::{ArchiveError, Result};
use crate::archive::format::manifest::{GroupEntry, SegmentFile, StreamDecl};
use crate::archive::format::segment::{self, TrackRows};
use crate::contract::{Bucket, Placed, TrackKey};
use arrow::array::{
    Array, ArrayRef, Float64Array, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use arrow::compute::{cast, take};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use std::collections::BTreeMap;
use std::sync::Arc;

pub use super::ladder::Ladder;

/// One level's cells of one track: `(field, cell) → bucket`, in field-then-cell order.
pub type Cells = BTreeMap<(u32, u64), Bucket>;

/// One level's cells of one track as a vector in `(field, cell)` order.
pub(crate) type SortedCells = Vec<((u32, u64), Bucket)>;

/// The partial cells one track's rows make (a barrier's, a summary's, or a read's), for the
/// levels from `from` up: the levels beneath it are left empty (nobody stores or reads them),
/// though each level is still folded from the one beneath, in the same order, so every cell
/// is the one a fold of every level makes.
///
/// A track's rows come in axis order, so each field's cells come in ascending order at every
/// level: one pass folds them ([`ordered_levels`]), each level holding only its open cell and
/// keeping only the levels asked for, with no map until then. Rows out of axis order (no
/// caller passes them) take the map all the way.
pub(crate) fn partials_from(
    ladder: &Ladder,
    axis: &UInt64Array,
    fields: &[Float64Array],
    from: usize,
) -> Vec<Cells> {
    let levels = ladder.levels as usize;
    if let Some(sorted) = ordered_levels(ladder, axis, fields, from, levels) {
        let mut out: Vec<Cells> = (0..from.min(levels)).map(|_| Cells::new()).collect();
        out.extend(
            sorted
                .into_iter()
                .map(|cells| cells.into_iter().collect::<Cells>()),
        );
        return out;
    }
    map_levels(ladder, axis, fields, from)
}

/// Every level of rows out of axis order (no caller passes them), through a map: level 0's
/// runs folded by cell, each level above folded from the one beneath; the levels beneath
/// `from` left empty.
fn map_levels(
    ladder: &Ladder,
    axis: &UInt64Array,
    fields: &[Float64Array],
    from: usize,
) -> Vec<Cells> {
    let levels = ladder.levels as usize;
    let mut out: Vec<Cells> = Vec::with_capacity(levels);
    let mut level0 = Cells::new();
    for (key, bucket) in level0_runs(ladder, axis, fields) {
        fold_into(&mut level0, key, bucket);
    }
    out.push(level0);
    for _ in 1..levels {
        let finer = out.last().expect("level 0 exists");
        let mut coarser = Cells::new();
        for (&(f, c), &bucket) in finer {
            fold_into(&mut coarser, (f, c / ladder.factor), bucket);
        }
        out.push(coarser);
    }
    for cells in out.iter_mut().take(from) {
        cells.clear();
    }
    out
}

/// Level `k`'s cells of one track's rows, in field-then-cell order, each once: the cells
/// `partials_from(ladder, …, k)[k]` holds, as a sorted vector (no map is built).
pub(crate) fn level_cells(
    ladder: &Ladder,
    axis: &UInt64Array,
    fields: &[Float64Array],
    k: usize,
) -> SortedCells {
    if let Some(mut sorted) = ordered_levels(ladder, axis, fields, k, k + 1) {
        return sorted.pop().unwrap_or_default();
    }
    map_levels(ladder, axis, fields, k)
        .swap_remove(k)
        .into_iter()
        .collect()
}

/// Levels `from..to` of one track's rows in axis order, each a sorted run, folded in one
/// pass: level 0's runs of rows folded by `push`, each level's cells merged in order into the
/// next (the same buckets, merged in the same order, as folding level by level: the same
/// bits), but without a vector for any level beneath `from`: each level
/// keeps only its open cell, which joins the next level's when it closes. `None` when the
/// rows leave axis order (then a cell would come twice).
fn ordered_levels(
    ladder: &Ladder,
    axis: &UInt64Array,
    fields: &[Float64Array],
    from: usize,
    to: usize,
) -> Option<Vec<SortedCells>> {
    let mut out: Vec<SortedCells> = vec![Vec::new(); to.saturating_sub(from)];
    // Closes level k's open cell: kept when asked for, and merged into level k + 1's open
    // cell (closing that one first when the cell is another).
    fn close(
        open: &mut [Option<(u64, Bucket)>],
        k: usize,
        f: u32,
        factor: u64,
        (from, out): (usize, &mut [SortedCells]),
    ) {
        let Some((cell, bucket)) = open[k].take() else {
            return;
        };
        if let Some(kept) = k.checked_sub(from).and_then(|i| out.get_mut(i)) {
            kept.push(((f, cell), bucket));
        }
        if k + 1 >= open.len() {
            return;
        }
        let up = cell / factor;
        match &mut open[k + 1] {
            Some((c, merged)) if *c == up => *merged = merged.merge(bucket),
            _ => {
                close(open, k + 1, f, factor, (from, out));
                open[k + 1] = Some((up, bucket));
            }
        }
    }
    for (f, values) in fields.iter().enumerate() {
        let f = f as u32;
        let mut open: Vec<Option<(u64, Bucket)>> = vec![None; to];
        for row in 0..values.len() {
            if values.is_null(row) {
                continue;
            }
            let (a, v) = (axis.value(row), values.value(row));
            let cell = a / ladder.base;
            match &mut open[0] {
                Some((c, bucket)) if *c == cell => bucket.push(a, v),
                Some((c, _)) if *c > cell => return None,
                _ => {
                    close(&mut open, 0, f, ladder.factor, (from, &mut out));
                    open[0] = Some((cell, Bucket::of(f, a, v)));
                }
            }
        }
        for k in 0..to {
            close(&mut open, k, f, ladder.factor, (from, &mut out));
        }
    }
    Some(out)
}

/// Level 0 as runs: each run of rows in one cell folded by `push`, the runs in row order,
/// field by field (in ascending `(field, cell)` order, each cell once, when the rows are in
/// axis order).
fn level0_runs(ladder: &Ladder, axis: &UInt64Array, fields: &[Float64Array]) -> SortedCells {
    let mut runs: SortedCells = Vec::new();
    for (f, values) in fields.iter().enumerate() {
        let mut current: Option<(u64, Bucket)> = None;
        for row in 0..values.len() {
            if values.is_null(row) {
                continue;
            }
            let (a, v) = (axis.value(row), values.value(row));
            let cell = a / ladder.base;
            match &mut current {
                Some((c, bucket)) if *c == cell => bucket.push(a, v),
                _ => {
                    if let Some((c, bucket)) = current.replace((cell, Bucket::of(f as u32, a, v))) {
                        runs.push(((f as u32, c), bucket));
                    }
                }
            }
        }
        if let Some((c, bucket)) = current {
            runs.push(((f as u32, c), bucket));
        }
    }
    runs
}

/// Merges `later` into the cell at `key` (or places it).
pub(crate) fn fold_into(cells: &mut Cells, key: (u32, u64), later: Bucket) {
    cells
        .entry(key)
        .and_modify(|b| *b = b.merge(later))
        .or_insert(later);
}

/// Whether `decl` keeps level summaries at all: it declares a ladder and measures a field.
pub(crate) fn summarised(decl: &StreamDecl) -> bool {
    decl.ladder.is_some() && !decl.measured.is_empty()
}

/// The level file a barrier writes for one stream's tracks (named `name`): row group k holds
/// level k's partial cells of every track, in track-key order, then by field and cell.
/// `None` when the stream has no ladder or measured field, or every measured value is null
/// (every level is a fold of level 0, so then no level holds a cell).
pub(crate) fn barrier_partials(
    decl: &StreamDecl,
    tracks: &[TrackRows],
    name: u64,
    first: usize,
) -> Result<Option<Partials>> {
    barrier_partials_under(decl, tracks, name, first, segment::PLAIN_GROUP_ROWS)
}

/// Rows from which a barrier's level partials are folded on two threads.
const PARALLEL_FOLD_ROWS: usize = 1 << 16;

/// [`barrier_partials`], its row groups of fewer than `plain_below` rows stored uncompressed
/// (`segment::COMPRESS_EVERY_GROUP`: every group compressed, the rule of builds before
/// 2026-12-06, which a repair meets in the files they sealed).
pub(crate) fn barrier_partials_under(
    decl: &StreamDecl,
    tracks: &[TrackRows],
    name: u64,
    first: usize,
    plain_below: usize,
) -> Result<Option<Partials>> {
    if !summarised(decl) {
        return Ok(None);
    }
    let rows: usize = tracks.iter().map(|t| t.batch.num_rows()).sum();
    let per_track = fold_tracks(decl, tracks, first, rows >= PARALLEL_FOLD_ROWS)?;
    let whole = |f: fn(&TrackRows) -> [u64; 2]| {
        let lo = tracks.iter().map(|t| f(t)[0]).min().unwrap_or(0);
        let hi = tracks.iter().map(|t| f(t)[1]).max().unwrap_or(0);
        [lo, hi]
    };
    let bounds = [
        whole(|t| t.position),
        whole(|t| t.axis.unwrap_or([0, 0])),
        whole(|t| t.seq),
    ];
    let schema = level_schema(decl).map_err(|m| ArchiveError::declaration(&decl.id, m))?;
    let Some(groups) = partial_groups(decl, &schema, &per_track, first, bounds)? else {
        return Ok(None);
    };
    let encoded = segment::encode_groups(&decl.id, &schema, name, &groups, plain_below)?;
    Ok(Some(Partials {
        encoded,
        first_level: (first > 0).then_some(first as u8),
    }))
}

/// Each track's first row and partial cells (see [`track_partials`]), in `tracks`' order;
/// with `parallel`, on two threads, split where half the rows are (each track's cells are
/// its own: the same cells either way).
fn fold_tracks(
    decl: &StreamDecl,
    tracks: &[TrackRows],
    first: usize,
    parallel: bool,
) -> Result<Vec<(RecordBatch, Vec<Cells>)>> {
    let fold = |tracks: &[TrackRows]| -> Result<Vec<_>> {
        tracks
            .iter()
            .map(|track| {
                let rows = track.batch.get();
                Ok((rows.slice(0, 1), track_partials(decl, &rows, first)?))
            })
            .collect()
    };
    if !parallel || tracks.len() < 2 {
        return fold(tracks);
    }
    let rows: usize = tracks.iter().map(|t| t.batch.num_rows()).sum();
    let mut seen = 0;
    let half = tracks
        .iter()
        .position(|t| {
            seen += t.batch.num_rows();
            seen * 2 >= rows
        })
        .map_or(tracks.len() / 2, |i| (i + 1).min(tracks.len() - 1));
    let (early, late) = tracks.split_at(half);
    let (early, late) = std::thread::scope(|scope| {
        let other = scope.spawn(|| fold(late));
        let early = fold(early);
        let late = other.join().unwrap_or_else(|_| {
            Err(ArchiveError::Internal(format!(
                "stream {:?}: folding the level partials panicked",
                decl.id
            )))
        });
        (early, late)
    });
    let mut per_track = early?;
    per_track.extend(late?);
    Ok(per_track)
}

/// The partial cells that one track's rows (a stored or staged batch, in publish order) make
/// at every level from `from` up (the levels beneath it are empty: see [`partials_from`]).
pub(crate) fn track_partials(
    decl: &StreamDecl,
    batch: &RecordBatch,
    from: usize,
) -> Result<Vec<Cells>> {
    let fail = |m: String| ArchiveError::Encode {
        stream: decl.id.clone(),
        message: m,
    };
    let ladder = decl
        .ladder
        .ok_or_else(|| fail("a stream without a ladder has no levels".into()))?;
    let axis_name = decl
        .axis
        .as_deref()
        .ok_or_else(|| fail("a stream with levels declares no axis".into()))?;
    let axis = batch
        .column_by_name(axis_name)
        .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
        .ok_or_else(|| fail(format!("the axis column {axis_name:?} is not UInt64")))?;
    let measured = measured_columns(decl, batch).map_err(fail)?;
    Ok(partials_from(&ladder, axis, &measured, from))
}

/// A partial level file's row groups, one per level from `first` up: each track's cells
/// (`per_track`: a one-row batch of the track's rows and its cells of every level, in
/// track-key order) by field then cell. `bounds` are the position, axis and `_seq` spans of
/// the rows they fold. `None` when no track holds a cell.
pub(crate) fn partial_groups(
    decl: &StreamDecl,
    schema: &SchemaRef,
    per_track: &[(RecordBatch, Vec<Cells>)],
    first: usize,
    [position, axis, seq]: [[u64; 2]; 3],
) -> Result<Option<Vec<TrackRows>>> {
    let Some(ladder) = decl.ladder else {
        return Ok(None);
    };
    // A level holds a cell exactly when level 0 does (each is a fold of the one beneath);
    // levels beneath `first` were never folded.
    if per_track
        .iter()
        .all(|(_, p)| p.get(first).is_none_or(|cells| cells.is_empty()))
    {
        return Ok(None);
    }
    let fail = |m: String| ArchiveError::Encode {
        stream: decl.id.clone(),
        message: m,
    };
    // One file for every level (a barrier is priced in syncs, so levels add one file, not one
    // per resolution).
    let mut groups = Vec::with_capacity(ladder.levels as usize);
    for k in first..ladder.levels as usize {
        let mut parts = Vec::with_capacity(per_track.len());
        for (track_row, partial) in per_track {
            if !partial[k].is_empty() {
                parts.push(encode_cells(
                    decl,
                    schema,
                    k,
                    track_row,
                    &partial[k],
                    CellOrder::FieldThenCell,
                )?);
            }
        }
        let batch =
            arrow::compute::concat_batches(schema, &parts).map_err(|e| fail(e.to_string()))?;
        groups.push(TrackRows {
            labels: Default::default(),
            batch: batch.into(),
            position,
            axis: Some(axis),
            seq,
        });
    }
    Ok(Some(groups))
}

/// A barrier's level partials: the encoded file and the level its row group 0 holds
/// (`None`: level 0).
pub(crate) struct Partials {
    pub encoded: segment::Encoded,
    pub first_level: Option<u8>,
}

/// A barrier decides the stream's first stored level once its rows show at least this many
/// gaps between consecutive rows of a track (counting the gap from each track's last stored
/// row).
pub const DECIDE_GAPS: u64 = 4096;

/// How a build judges which level cells are worth their bytes: the first stored level it
/// decides for a stream (format version 6, `levels_from`), and when a barrier defers its
/// partials and a compaction summarises deferred rows (format version 8). Decisions are
/// recorded and readers take the records, so a rule only changes what is written from then
/// on; repair judges a lost barrier under each rule a build ever used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LevelRule {
    /// The stored cells must hold at least this many rows each at the rows' rate...
    pub decide_rows: u64,
    /// ...counted over every level from the first stored one up (else the first alone).
    pub over_stored: bool,
    /// Partials are written (and deferred rows summarised) when their cells at the stored
    /// levels hold at least this many rows each on average ([`worth_summarising`]).
    pub summarise_rows: u64,
}

/// A cell holds 13 numbers per field, about 45 bytes under zstd for a float measure, against
/// 7-9 bytes a raw row: at one cell per 64 rows, over every stored level together, the levels
/// stay about a tenth of the raw bytes or less whatever the ladder.
pub const MIN_ROWS_PER_CELL: u64 = 64;

/// The rule this build judges by (2026-12-07): every stored level together holds at most one
/// cell per [`MIN_ROWS_PER_CELL`] rows, at the rows' rate when deciding and counted per track
/// when writing partials or a summary.
pub(crate) const LEVEL_RULE: LevelRule = LevelRule {
    decide_rows: MIN_ROWS_PER_CELL,
    over_stored: true,
    summarise_rows: MIN_ROWS_PER_CELL,
};

/// The rule of the builds before 2026-12-07: the first stored level alone held at least 16
/// rows a cell, and partials were written at 16 rows a cell over the stored levels. It left
/// a nanosecond ladder of factor 8 storing a level of about 50 rows a cell, 14-17% of the
/// raw bytes, and a summary could cost several times its rows.
pub(crate) const LEVEL_RULE_EARLIER: LevelRule = LevelRule {
    decide_rows: 16,
    over_stored: false,
    summarise_rows: 16,
};

/// The first level worth storing, judged on a barrier's rows (`None` when they are too few
/// to judge): with `rate` the rows per axis unit of the barrier's tracks (their gaps between
/// consecutive rows, each track's first row counted from `previous[i]`, track `i`'s last
/// stored axis value, over the axis span they cover), the finest level from which the
/// stored cells hold at least `rule.decide_rows` rows each at that rate, else the coarsest.
/// Levels only coarsen upwards, so every level above it is worth it too.
pub(crate) fn first_worth_storing(
    ladder: &Ladder,
    tracks: &[TrackRows],
    previous: &[Option<u64>],
    rule: LevelRule,
) -> Option<u8> {
    let (mut gaps, mut span) = (0u64, 0u128);
    for (track, &previous) in tracks.iter().zip(previous) {
        let Some([lo, hi]) = track.axis else {
            continue;
        };
        let rows = track.batch.num_rows() as u64;
        let (from, counted) = match previous {
            Some(last) if last <= lo => (last, rows),
            _ => (lo, rows.saturating_sub(1)),
        };
        gaps += counted;
        span += u128::from(hi - from);
    }
    if gaps < DECIDE_GAPS {
        return None;
    }
    Some(first_at_rate(ladder, gaps, span, rule))
}

/// The first level worth storing for `gaps` rows over `span` axis units under `rule` (see
/// [`first_worth_storing`]).
fn first_at_rate(ladder: &Ladder, gaps: u64, span: u128, rule: LevelRule) -> u8 {
    let levels = ladder.levels as usize;
    // Cells of width w at the rate gaps / span, each to hold min_rows rows: min_rows × span
    // / w of them (rounded up) at most, against gaps rows.
    let wanted = |k: usize| -> u128 {
        (u128::from(rule.decide_rows) * span.max(1)).div_ceil(u128::from(ladder.width(k)))
    };
    let first = (0..levels)
        .find(|&k| {
            let cells: u128 = if rule.over_stored {
                (k..levels).map(wanted).sum()
            } else {
                wanted(k)
            };
            cells <= u128::from(gaps)
        })
        .unwrap_or(levels - 1);
    first as u8
}

/// Whether level cells from `first` up of these rows are worth their bytes: whether they
/// would hold at least `min_rows` rows each on average, counted over every stored
/// level. `tracks` gives each track's rows and axis span; a track's cells at level k are
/// counted as the fewer of its rows and the cells its span touches, which is never fewer
/// than it makes, so a summary judged worth it is.
pub(crate) fn worth_summarising(
    ladder: &Ladder,
    first: usize,
    min_rows: u64,
    tracks: impl Iterator<Item = (u64, [u64; 2])>,
) -> bool {
    let (mut rows, mut cells) = (0u128, 0u128);
    for (n, [lo, hi]) in tracks {
        rows += u128::from(n);
        for k in first..ladder.levels as usize {
            let w = ladder.width(k);
            cells += u128::from(n.min(hi / w - lo / w + 1));
        }
    }
    cells * u128::from(min_rows) <= rows
}

/// The measured fields of a stored or staged batch, as f64 columns in declared order.
pub(crate) fn measured_columns(
    decl: &StreamDecl,
    batch: &RecordBatch,
) -> std::result::Result<Vec<Float64Array>, String> {
    decl.measured
        .iter()
        .map(|name| {
            let column = batch
                .column_by_name(name)
                .ok_or_else(|| format!("no measured column {name:?}"))?;
            let as_f64 = cast(column, &DataType::Float64).map_err(|e| format!("{name}: {e}"))?;
            Ok(as_f64
                .as_any()
                .downcast_ref::<Float64Array>()
                .expect("cast to Float64")
                .clone())
        })
        .collect()
}

/// Columns of a level table after the track's own component columns.
pub const LEVEL_COLUMNS: [&str; 14] = [
    "level",
    "field",
    "cell",
    "first_axis",
    "first",
    "last_axis",
    "last",
    "min_axis",
    "min",
    "max_axis",
    "max",
    "count",
    "sum",
    "sum_sq",
];

/// The Arrow schema of a stream's level tables: its track columns (declared types), then
/// `level, field, cell, first_axis, first, last_axis, last, min_axis, min, max_axis, max, count, sum, sum_sq`.
pub(crate) fn level_schema(decl: &StreamDecl) -> std::result::Result<SchemaRef, Invalid> {
    let mut fields = Vec::new();
    for name in &decl.track {
        let column = decl
            .columns
            .iter()
            .find(|c| &c.name == name)
            .ok_or_else(|| format!("track column {name:?} is not declared"))?;
        let t: DataType = column
            .data_type
            .parse()
            .map_err(|e| format!("{name}: {e}"))?;
        fields.push(Field::new(name, t, false));
    }
    fields.push(Field::new("level", DataType::Int8, false));
    fields.push(Field::new("field", DataType::Utf8, false));
    for name in &LEVEL_COLUMNS[2..] {
        let t = match *name {
            "first" | "last" | "min" | "max" | "sum" | "sum_sq" => DataType::Float64,
            _ => DataType::UInt64,
        };
        fields.push(Field::new(*name, t, false));
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// The order of a track's rows in a level file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CellOrder {
    /// By field in declared order, then cell: a barrier's partials.
    FieldThenCell,
    /// By cell, then field: a level table, so a row group's `cell` statistics bound it.
    CellThenField,
}

/// One track's cells of level `level` as a level-table batch. `track_row` is a one-row batch of
/// the track's rows, whose component columns are repeated on every cell.
pub(crate) fn encode_cells(
    decl: &StreamDecl,
    schema: &SchemaRef,
    level: usize,
    track_row: &RecordBatch,
    cells: &Cells,
    order: CellOrder,
) -> Result<RecordBatch> {
    let fail = |e: &dyn std::fmt::Display| ArchiveError::Encode {
        stream: decl.id.clone(),
        message: format!("level table: {e}"),
    };
    let n = cells.len();
    let zeros = UInt32Array::from(vec![0u32; n]);
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for name in &decl.track {
        let column = track_row
            .column_by_name(name)
            .ok_or_else(|| fail(&format!("no track column {name:?}")))?;
        columns.push(take(column.as_ref(), &zeros, None).map_err(|e| fail(&e))?);
    }
    let mut buckets: Vec<(&(u32, u64), &Bucket)> = cells.iter().collect();
    if order == CellOrder::CellThenField {
        buckets.sort_by_key(|((f, c), _)| (*c, *f));
    }
    let u = |f: &dyn Fn(&(u32, u64), &Bucket) -> u64| -> ArrayRef {
        Arc::new(UInt64Array::from_iter_values(
            buckets.iter().map(|(k, b)| f(k, b)),
        ))
    };
    let x = |f: &dyn Fn(&Bucket) -> f64| -> ArrayRef {
        Arc::new(Float64Array::from_iter_values(
            buckets.iter().map(|(_, b)| f(b)),
        ))
    };
    let level = i8::try_from(level).map_err(|_| fail(&format!("level {level} is above 127")))?;
    columns.push(Arc::new(arrow::array::Int8Array::from(vec![level; n])));
    columns.push(Arc::new(StringArray::from_iter_values(
        buckets
            .iter()
            .map(|((f, _), _)| decl.measured[*f as usize].as_str()),
    )));
    columns.push(u(&|k, _| k.1));
    columns.push(u(&|_, b| b.first.axis));
    columns.push(x(&|b| b.first.value));
    columns.push(u(&|_, b| b.last.axis));
    columns.push(x(&|b| b.last.value));
    columns.push(u(&|_, b| b.min.axis));
    columns.push(x(&|b| b.min.value));
    columns.push(u(&|_, b| b.max.axis));
    columns.push(x(&|b| b.max.value));
    columns.push(u(&|_, b| b.count));
    columns.push(x(&|b| b.sum));
    columns.push(x(&|b| b.sum_sq));
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| fail(&e))
}

/// Reads a level-table batch back into cells per track (the track identified by its
/// component columns, rendered as labels exactly as staging renders them).
pub(crate) fn decode_level(
    decl: &StreamDecl,
    batch: &RecordBatch,
) -> std::result::Result<BTreeMap<TrackKey, Cells>, String> {
    LevelRows::decode(decl, batch)?.cells()
}

/// The stream's track columns of `batch` (a row group of a `what`) rendered as labels, as
/// staging renders them: a column of integers, booleans or large text as its text.
pub(crate) fn rendered_labels(
    decl: &StreamDecl,
    batch: &RecordBatch,
    what: &str,
) -> std::result::Result<Vec<StringArray>, String> {
    decl.track
        .iter()
        .map(|name| {
            let column = batch
                .column_by_name(name)
                .ok_or_else(|| format!("{what} lacks column {name:?}"))?;
            let text = cast(column, &DataType::Utf8).map_err(|e| format!("{name}: {e}"))?;
            text.as_any()
                .downcast_ref::<StringArray>()
                .cloned()
                .ok_or_else(|| format!("{name}: not rendered as text"))
        })
        .collect()
}

/// A level row group's track columns rendered as labels, its rows in track-key order
/// (checked when read: a group out of order is damage, since a search in it could miss a
/// track's rows). A reader of a few tracks finds their rows by a binary search.
#[derive(Debug)]
pub(crate) struct TrackColumns {
    /// Each track column rendered as labels, outermost first (none for an untracked
    /// stream, whose one track is every row).
    labels: Vec<StringArray>,
    /// Rows held.
    rows: usize,
}

impl TrackColumns {
    /// The stream's track columns of `batch`, checked to be in track-key order.
    pub fn decode(decl: &StreamDecl, batch: &RecordBatch) -> std::result::Result<Self, String> {
        let labels = rendered_labels(decl, batch, "level table")?;
        let rows = batch.num_rows();
        let tracks = TrackColumns { labels, rows };
        let out_of_order = |i: usize| {
            let row = |r: usize| tracks.labels.iter().map(move |l| l.value(r));
            row(i - 1).cmp(row(i)).is_gt()
        };
        if let Some(i) = (1..rows).find(|&i| out_of_order(i)) {
            return Err(format!(
                "level row {i} (track {:?}) comes before row {} (track {:?}) in track order",
                tracks.track(i),
                i - 1,
                tracks.track(i - 1)
            ));
        }
        Ok(tracks)
    }

    /// Rows held.
    fn len(&self) -> usize {
        self.rows
    }

    /// Row `i`'s track labels.
    fn track(&self, i: usize) -> Vec<&str> {
        self.labels.iter().map(|l| l.value(i)).collect()
    }

    /// Row `i`'s track against `labels`, in key order (label tuples compare exactly as their
    /// keys do).
    fn compare<S: AsRef<str>>(&self, i: usize, labels: &[S]) -> std::cmp::Ordering {
        self.labels
            .iter()
            .map(|l| l.value(i))
            .cmp(labels.iter().map(AsRef::as_ref))
    }

    /// The rows of the track whose labels are `labels`, searched from row `from` on (a
    /// reader of tracks in key order passes the end of the last one's rows).
    pub fn rows_of<S: AsRef<str>>(&self, labels: &[S], from: usize) -> std::ops::Range<usize> {
        let from = from.min(self.len());
        let search = |from: usize, before: &dyn Fn(std::cmp::Ordering) -> bool| {
            let (mut lo, mut hi) = (from, self.len());
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if before(self.compare(mid, labels)) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo
        };
        let start = search(from, &|o| o.is_lt());
        let end = search(start, &|o| o.is_le());
        start..end
    }

    /// Which of `tracks` (label tuples in key order) lie within this group's first and last
    /// row's tracks: only those can have rows here.
    pub fn tracks_within<S: AsRef<str>>(&self, tracks: &[Vec<S>]) -> std::ops::Range<usize> {
        let Some(last) = self.len().checked_sub(1) else {
            return 0..0;
        };
        let lo = tracks.partition_point(|t| self.compare(0, t).is_gt());
        let hi = tracks.partition_point(|t| self.compare(last, t).is_ge());
        lo..hi.max(lo)
    }

    /// The rows of `tracks` (label tuples in key order), as ascending disjoint ranges.
    pub fn rows_of_all<S: AsRef<str>>(&self, tracks: &[Vec<S>]) -> Vec<std::ops::Range<usize>> {
        let mut from = 0;
        let mut out: Vec<std::ops::Range<usize>> = Vec::new();
        for t in &tracks[self.tracks_within(tracks)] {
            let rows = self.rows_of(t, from);
            from = rows.end;
            match out.last_mut() {
                Some(last) if last.end == rows.start => last.end = rows.end,
                _ if rows.is_empty() => {}
                _ => out.push(rows),
            }
        }
        out
    }
}

/// One decoded level row group (or the rows of some of its tracks) as its columns, rows in
/// track-key order, then field, then cell.
#[derive(Debug)]
pub(crate) struct LevelRows {
    /// The track columns, by which a track's rows are found.
    pub tracks: TrackColumns,
    /// Each row's field, as its index among the stream's measured fields.
    field: Vec<u32>,
    cell: UInt64Array,
    axes: [UInt64Array; 4],
    values: [Float64Array; 4],
    count: UInt64Array,
    sum: Float64Array,
    sum_sq: Float64Array,
}

impl LevelRows {
    /// Decodes and checks a level-table batch: its columns, fields and track order.
    pub fn decode(decl: &StreamDecl, batch: &RecordBatch) -> std::result::Result<Self, String> {
        let col = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| format!("level table lacks column {name:?}"))
        };
        fn typed<A: Array + Clone + 'static>(
            column: &ArrayRef,
            name: &str,
            what: &str,
        ) -> std::result::Result<A, String> {
            column
                .as_any()
                .downcast_ref::<A>()
                .cloned()
                .ok_or_else(|| format!("level column {name:?} is not {what}"))
        }
        let u = |name: &str| typed::<UInt64Array>(col(name)?, name, "UInt64");
        let x = |name: &str| typed::<Float64Array>(col(name)?, name, "Float64");
        let names = col("field")?
            .as_any()
            .downcast_ref::<StringArray>()
            .cloned()
            .ok_or("level column \"field\" is not Utf8")?;
        let mut field = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            let name = name.unwrap_or_default();
            let f = decl
                .measured
                .iter()
                .position(|m| m == name)
                .ok_or_else(|| format!("level row {i} names unknown field {name:?}"))?;
            field.push(f as u32);
        }
        Ok(LevelRows {
            tracks: TrackColumns::decode(decl, batch)?,
            field,
            cell: u("cell")?,
            axes: [
                u("first_axis")?,
                u("last_axis")?,
                u("min_axis")?,
                u("max_axis")?,
            ],
            values: [x("first")?, x("last")?, x("min")?, x("max")?],
            count: u("count")?,
            sum: x("sum")?,
            sum_sq: x("sum_sq")?,
        })
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.field.len()
    }

    /// Row `i`'s field, as its index among the stream's measured fields.
    pub fn field(&self, i: usize) -> u32 {
        self.field[i]
    }

    /// Row `i` as a cell: its `(field, cell)` and bucket.
    pub fn bucket(&self, i: usize) -> ((u32, u64), Bucket) {
        let place = |k: usize| Placed::new(self.axes[k].value(i), self.values[k].value(i));
        let field = self.field[i];
        (
            (field, self.cell.value(i)),
            Bucket {
                field,
                first: place(0),
                last: place(1),
                min: place(2),
                max: place(3),
                count: self.count.value(i),
                sum: self.sum.value(i),
                sum_sq: self.sum_sq.value(i),
            },
        )
    }

    /// Every track's cells.
    pub fn cells(&self) -> std::result::Result<GroupCells, String> {
        let mut out = GroupCells::new();
        let mut at = 0;
        while at < self.len() {
            let labels = self.tracks.track(at);
            let rows = self.tracks.rows_of(&labels, at);
            let key = TrackKey::encode(&labels).map_err(|e| format!("level row {at}: {e}"))?;
            let cells = out.entry(key).or_default();
            for i in rows.clone() {
                let (place, bucket) = self.bucket(i);
                fold_into(cells, place, bucket);
            }
            at = rows.end.max(at + 1);
        }
        Ok(out)
    }
}

/// Cells of a level table's row group, at most (a group packs whole tracks until it holds
/// this many; a longer track spans several groups). Small groups let a survey read little
/// more than it answers; this size keeps a table's footer small as well.
pub const TABLE_GROUP_ROWS: usize = 16_384;

/// Where level `k` lives among a stream's live level files, in publish order: `(file index,
/// group index)` of the row group holding level k in each file of one group per level (a
/// barrier's partials, a small merged run; group i holds level `first_level + i`) and of
/// every row group of each level table of level k.
pub(crate) fn level_groups(
    files: &[SegmentFile],
    k: usize,
) -> impl Iterator<Item = (usize, usize)> + '_ {
    files.iter().enumerate().flat_map(move |(i, f)| {
        let first = f.first_level.map_or(0, usize::from);
        let range = match f.run.and_then(|r| r.level) {
            None if k >= first && k - first < f.groups.len() => k - first..k - first + 1,
            Some(level) if level as usize == k => 0..f.groups.len(),
            _ => 0..0,
        };
        range.map(move |g| (i, g))
    })
}

/// Whether a level file's row group may hold one of the tracks whose labels are `tracks`
/// (in key order): a table group holds the tracks from its `track` through its
/// `last_track`; a partial's group holds any. Label tuples compare exactly as their keys do
/// (a key is each label followed by a separator below every character a label may hold).
pub(crate) fn group_holds_any<S: AsRef<str>, T: AsRef<[S]>>(
    group: &GroupEntry,
    tracks: &[T],
) -> bool {
    let Some(last) = &group.last_track else {
        return true;
    };
    let order = |labels: &[S], bound: &[String]| {
        labels
            .iter()
            .map(AsRef::as_ref)
            .cmp(bound.iter().map(String::as_str))
    };
    let at = tracks.partition_point(|t| order(t.as_ref(), &group.track).is_lt());
    tracks
        .get(at)
        .is_some_and(|t| order(t.as_ref(), last) != std::cmp::Ordering::Greater)
}

/// Decoded level row groups, shared by surveys and folds: `(file name, group) → track →
/// cells`. Bounded by the cells it holds; the least recently used group goes first. File
/// names are never reused, so an entry can only go stale by its file leaving the live set,
/// and then nothing asks for it again.
#[derive(Debug)]
pub(crate) struct LevelCache {
    /// `(file name, group) → (its rows, their number, when last used)`.
    entries: std::collections::HashMap<(u64, usize), (Arc<LevelRows>, usize, u64)>,
    cells: usize,
    capacity: usize,
    tick: u64,
}

/// One decoded level row group: each track's cells.
pub(crate) type GroupCells = BTreeMap<TrackKey, Cells>;

/// Cells the level cache holds at most (about 100 bytes each, so about 25 MiB): sixteen full
/// table row groups, many times what one survey reads.
pub const LEVEL_CACHE_CELLS: usize = 1 << 18;

impl LevelCache {
    pub fn new(capacity: usize) -> Self {
        LevelCache {
            entries: Default::default(),
            cells: 0,
            capacity,
            tick: 0,
        }
    }

    fn size(group: &LevelRows) -> usize {
        group.len().max(1)
    }

    /// Whether it keeps anything: a reader with a cache of no capacity (a one-shot command)
    /// reads only what it answers.
    pub fn keeps(&self) -> bool {
        self.capacity > 0
    }

    /// The decoded group, if held (and now the most recently used).
    pub fn get(&mut self, key: (u64, usize)) -> Option<Arc<LevelRows>> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.get_mut(&key).map(|(group, _, used)| {
            *used = tick;
            group.clone()
        })
    }

    /// Keeps a decoded group, evicting the least recently used past the capacity.
    pub fn put(&mut self, key: (u64, usize), group: Arc<LevelRows>) {
        self.tick += 1;
        let size = Self::size(&group);
        self.cells += size;
        if let Some((_, old, _)) = self.entries.insert(key, (group, size, self.tick)) {
            self.cells -= old;
        }
        while self.cells > self.capacity && self.entries.len() > 1 {
            let Some((&oldest, _)) = self.entries.iter().min_by_key(|(_, (_, _, used))| *used)
            else {
                break;
            };
            if let Some((_, old, _)) = self.entries.remove(&oldest) {
                self.cells -= old;
            }
        }
    }

    /// Cells held.
    #[cfg(test)]
    pub fn cells(&self) -> usize {
        self.cells
    }

    /// Drops the groups of the named files.
    pub fn forget(&mut self, names: &[u64]) {
        let cells = &mut self.cells;
        self.entries.retain(|(name, _), (_, size, _)| {
            let keep = !names.contains(name);
            if !keep {
                *cells -= *size;
            }
            keep
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::plan::levels::plan;
    use proptest::prelude::*;

    fn ladder() -> impl Strategy<Value = Ladder> {
        (1u64..20, 2u64..5, 1u8..5).prop_map(|(b, f, l)| Ladder::new(b, f, l).expect("valid"))
    }

    /// The next level of sorted cells, level by level: each run of cells sharing a coarser
    /// cell merged in order (the fold [`ordered_levels`] makes in one pass).
    fn coarser(finer: SortedCells, factor: u64) -> SortedCells {
        let mut out: SortedCells = Vec::with_capacity(finer.len());
        for ((f, c), bucket) in finer {
            let key = (f, c / factor);
            match out.last_mut() {
                Some((last, merged)) if *last == key => *merged = merged.merge(bucket),
                _ => out.push((key, bucket)),
            }
        }
        out
    }

    /// `n` measured values, a tenth null: small integers tie (which row a tie keeps is
    /// order-sensitive), wide floats round (which sum is order-sensitive).
    fn measured_values(n: usize) -> impl Strategy<Value = Vec<Option<f64>>> {
        prop::collection::vec(
            prop::option::weighted(
                0.9,
                prop_oneof![(-3i32..3).prop_map(f64::from), -1e6f64..1e6],
            ),
            n,
        )
    }

    /// The stored cells of the first stored level decided under `rule`, per row, at the rate
    /// `gaps / span` (exact: cells of width w hold `gaps × w / span` rows each).
    fn stored_share(ladder: &Ladder, gaps: u64, span: u64, first: usize) -> f64 {
        (first..ladder.levels as usize)
            .map(|k| span as f64 / ladder.width(k) as f64)
            .sum::<f64>()
            / gaps as f64
    }

    /// A barrier's tracks folded on two threads (split where half the rows are) give every
    /// track the cells, and the order, that one thread gives.
    #[test]
    fn tracks_folded_on_two_threads_are_folded_as_on_one() {
        use crate::archive::format::segment::TrackBatch;
        use arrow::array::{ArrayRef, Float64Array, UInt64Array};
        use arrow::datatypes::{Field, Schema};
        let decl = StreamDecl {
            id: "s".into(),
            columns: Vec::new(),
            track: vec!["t".into()],
            axis: Some("x".into()),
            measured: vec!["v".into()],
            ladder: Some(Ladder::new(4, 4, 3).expect("valid")),
        };
        let schema = Arc::new(Schema::new(vec![
            Field::new("x", DataType::UInt64, false),
            Field::new("v", DataType::Float64, true),
        ]));
        // Tracks of very different sizes, so the split falls inside the list.
        let tracks: Vec<TrackRows> = [3usize, 900, 1, 40, 250, 7]
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let axis = UInt64Array::from_iter_values((0..n as u64).map(|r| r * 3 + i as u64));
                let values = Float64Array::from_iter(
                    (0..n).map(|r| (r % 11 != 0).then(|| (r * (i + 1)) as f64 / 7.0)),
                );
                let columns: Vec<ArrayRef> = vec![Arc::new(axis), Arc::new(values)];
                TrackRows {
                    labels: crate::contract::Labels::from([format!("t{i}")]),
                    batch: TrackBatch::Own(
                        RecordBatch::try_new(schema.clone(), columns).expect("batch"),
                    ),
                    position: [0, 0],
                    axis: None,
                    seq: [0, 0],
                }
            })
            .collect();
        for first in [0, 1] {
            let one = fold_tracks(&decl, &tracks, first, false).expect("folded");
            let two = fold_tracks(&decl, &tracks, first, true).expect("folded");
            assert_eq!(one.len(), tracks.len());
            assert_eq!(one, two, "levels from {first}");
        }
    }

    #[test]
    fn the_first_stored_level_of_a_nanosecond_metric_holds_a_cell_per_64_rows_or_fewer() {
        // The README's nanosecond ladder (1 s, factor 8, 8 levels), a row every 10 s: cells of
        // 512 s hold 51 rows, of 4,096 s 410.
        let ladder = Ladder::new(1_000_000_000, 8, 8).expect("valid");
        let (gaps, span) = (100_000, 1_000_000_000_000_000u128);
        assert_eq!(first_at_rate(&ladder, gaps, span, LEVEL_RULE), 4);
        assert_eq!(first_at_rate(&ladder, gaps, span, LEVEL_RULE_EARLIER), 3);
        assert!(stored_share(&ladder, gaps, span as u64, 4) <= 1.0 / 64.0);
        assert!(stored_share(&ladder, gaps, span as u64, 3) > 1.0 / 64.0);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, rng_seed: proptest::test_runner::RngSeed::Fixed(46), ..ProptestConfig::default() })]

        /// The one-pass fold of rows in axis order gives every level the bits the run-by-run
        /// fold gives (the same buckets merged in the same order), for any range of levels,
        /// and declines rows out of axis order.
        #[test]
        fn the_one_pass_fold_is_the_run_by_run_fold_bit_for_bit(
            ladder in ladder(),
            steps in prop::collection::vec(0u64..40, 0..200),
            values in measured_values(200),
            second in any::<bool>(),
            from in 0usize..5,
            back in any::<prop::sample::Index>(),
            shuffle in any::<bool>(),
        ) {
            let mut axis: Vec<u64> = steps.iter().scan(0u64, |a, s| { *a += s; Some(*a) }).collect();
            let moved = !axis.is_empty() && shuffle && {
                let i = back.index(axis.len());
                let low = axis[0];
                // Row i goes back beneath the first row's cell when it can (a null value is
                // no row of a level, so both must hold one).
                let goes = axis[i] / ladder.base > low / ladder.base
                    && low >= ladder.base
                    && values[0].is_some()
                    && values[i].is_some();
                if goes { axis[i] = 0; }
                goes
            };
            let a = UInt64Array::from(axis.clone());
            let mut fields = vec![Float64Array::from(values[..axis.len()].to_vec())];
            if second {
                fields.push(Float64Array::from(values[..axis.len()].iter().rev().copied().collect::<Vec<_>>()));
            }
            let levels = ladder.levels as usize;
            let from = from.min(levels - 1);
            let one_pass = ordered_levels(&ladder, &a, &fields, from, levels);
            let runs = level0_runs(&ladder, &a, &fields);
            let ordered = runs.windows(2).all(|w| w[0].0 < w[1].0);
            prop_assert_eq!(one_pass.is_some(), ordered);
            prop_assert!(!moved || !ordered, "a row out of axis order is declined");
            if let Some(one_pass) = one_pass {
                let mut finer = runs;
                for k in 0..levels {
                    if k > 0 { finer = coarser(finer, ladder.factor); }
                    if k >= from {
                        let bits = |cells: &SortedCells| cells.iter().map(|(key, b)| (*key, b.sum.to_bits(), b.sum_sq.to_bits(), b.count, b.first, b.last, b.min, b.max)).collect::<Vec<_>>();
                        prop_assert_eq!(bits(&one_pass[k - from]), bits(&finer), "level {}", k);
                    }
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, rng_seed: proptest::test_runner::RngSeed::Fixed(45), ..ProptestConfig::default() })]

        /// Whatever the ladder and the rate, the levels stored from the decided one hold at
        /// most one cell per 64 rows (unless even the coarsest alone holds more: then it is
        /// the coarsest), and the level beneath it would hold more; the earlier rule bounded
        /// only the first stored level, at 16 rows a cell.
        #[test]
        fn the_decided_levels_hold_at_most_a_cell_per_64_rows_whatever_the_ladder(
            base in 1u64..2_000_000_000,
            factor in 2u64..17,
            levels in 1u8..9,
            gaps in DECIDE_GAPS..10_000_000,
            step in 1u64..100_000_000_000,
        ) {
            let ladder = Ladder::new(base, factor, levels).expect("valid");
            let span = gaps.saturating_mul(step);
            let first = usize::from(first_at_rate(&ladder, gaps, u128::from(span), LEVEL_RULE));
            let share = stored_share(&ladder, gaps, span, first);
            let coarsest = usize::from(levels) - 1;
            prop_assert!(share <= 1.0 / 64.0 + 1e-12 || first == coarsest, "{share} from {first}");
            if first > 0 {
                // Each level's cells are counted rounded up: at most one more each.
                let rounding = f64::from(levels) / (64.0 * gaps as f64);
                prop_assert!(stored_share(&ladder, gaps, span, first - 1) > 1.0 / 64.0 - rounding - 1e-12);
            }
            let earlier = usize::from(first_at_rate(&ladder, gaps, u128::from(span), LEVEL_RULE_EARLIER));
            prop_assert!(earlier <= first, "the rule never stores finer levels than before");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(44), ..ProptestConfig::default() })]

        /// Every level of every barrier split equals the fold of the raw rows of each cell.
        #[test]
        fn levels_equal_a_fold_of_their_rows_in_any_barrier_split(
            ladder in ladder(),
            steps in prop::collection::vec((0u64..6, -50i32..50), 1..120),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..5),
        ) {
            let mut axis = Vec::new();
            let mut a = 0u64;
            for (step, _) in &steps { a += step; axis.push(a); }
            let values: Vec<f64> = steps.iter().map(|s| f64::from(s.1)).collect();
            let mut points: Vec<usize> = cuts.iter().map(|c| c.index(axis.len())).collect();
            points.push(0);
            points.push(axis.len());
            points.sort_unstable();
            points.dedup();
            let mut merged: Vec<Cells> = vec![Cells::new(); ladder.levels as usize];
            for w in points.windows(2) {
                let (s, e) = (w[0], w[1]);
                let part = partials_from(&ladder, &UInt64Array::from(axis[s..e].to_vec()), &[Float64Array::from(values[s..e].to_vec())], 0);
                for (k, cells) in part.into_iter().enumerate() {
                    for (key, b) in cells { fold_into(&mut merged[k], key, b); }
                }
            }
            for (k, cells) in merged.iter().enumerate() {
                let width = ladder.width(k);
                let mut expected = Cells::new();
                for (&a, &v) in axis.iter().zip(&values) {
                    fold_into(&mut expected, (0, a / width), Bucket::of(0, a, v));
                }
                prop_assert_eq!(cells, &expected, "level {}", k);
            }
        }

        /// The sorted-run fold equals a fold through the map, cell for cell and bit for bit
        /// (sums included), at every level from any `from`, for rows in axis order and rows
        /// out of it, with nulls.
        #[test]
        fn partials_from_equal_the_map_fold(
            ladder in ladder(),
            axis in prop::collection::vec(0u64..400, 0..150),
            values in measured_values(150),
            sorted in any::<bool>(),
            from in 0usize..5,
        ) {
            let mut axis = axis;
            if sorted {
                axis.sort_unstable();
            }
            let values: Vec<Option<f64>> = values[..axis.len()].to_vec();
            let (a, v) = (UInt64Array::from(axis.clone()), Float64Array::from(values.clone()));
            let mut reference: Vec<Cells> = Vec::new();
            let mut level0 = Cells::new();
            let mut current: Option<(u64, Bucket)> = None;
            for (&x, y) in axis.iter().zip(&values) {
                let Some(y) = *y else { continue };
                match &mut current {
                    Some((c, b)) if *c == x / ladder.base => b.push(x, y),
                    _ => {
                        if let Some((c, b)) = current.take() { fold_into(&mut level0, (0, c), b); }
                        current = Some((x / ladder.base, Bucket::of(0, x, y)));
                    }
                }
            }
            if let Some((c, b)) = current { fold_into(&mut level0, (0, c), b); }
            reference.push(level0);
            for _ in 1..ladder.levels {
                let mut coarser = Cells::new();
                for (&(f, c), &b) in reference.last().expect("level 0") {
                    fold_into(&mut coarser, (f, c / ladder.factor), b);
                }
                reference.push(coarser);
            }
            let cells = level_cells(&ladder, &a, std::slice::from_ref(&v), from.min(ladder.levels as usize - 1));
            let want_k: Vec<((u32, u64), Bucket)> = reference[from.min(ladder.levels as usize - 1)]
                .iter()
                .map(|(k, b)| (*k, *b))
                .collect();
            prop_assert_eq!(&cells, &want_k);
            let got = partials_from(&ladder, &a, &[v], from);
            prop_assert_eq!(got.len(), reference.len());
            for (k, (got, want)) in got.iter().zip(&reference).enumerate() {
                if k < from {
                    prop_assert!(got.is_empty(), "level {} beneath {} is empty", k, from);
                    continue;
                }
                prop_assert_eq!(got.len(), want.len(), "level {}", k);
                for ((gk, gb), (wk, wb)) in got.iter().zip(want) {
                    prop_assert_eq!(gk, wk);
                    prop_assert_eq!(gb.sum.to_bits(), wb.sum.to_bits());
                    prop_assert_eq!(gb.sum_sq.to_bits(), wb.sum_sq.to_bits());
                    prop_assert_eq!(gb, wb);
                }
            }
        }

        /// The plan fits the budget and is the finest level that does.
        #[test]
        fn the_plan_is_the_finest_that_fits(ladder in ladder(), lo in 0u64..10_000, len in 0u64..100_000, cpf in 1u64..50) {
            let hi = lo + len;
            let p = plan(&ladder, lo, hi, cpf);
            prop_assert!(p.cells[1] - p.cells[0] < cpf, "{:?}", p);
            prop_assert_eq!(p.cells, [lo / p.cell_width, hi / p.cell_width]);
            if p.merge == 1 && p.level > 0 {
                let finer = ladder.width(p.level - 1);
                prop_assert!(hi / finer - lo / finer + 1 > cpf, "a finer level fits");
            }
            if p.merge > 1 {
                prop_assert_eq!(p.level, ladder.levels as usize - 1);
                let smaller = ladder.width(p.level) * (p.merge - 1);
                prop_assert!(hi / smaller - lo / smaller + 1 > cpf, "a smaller merge fits");
            }
        }
    }

    #[test]
    fn the_level_cache_keeps_the_recently_used_within_its_capacity() {
        let group = |cells: u64| -> Arc<LevelRows> {
            let (decl, batch) = level_group(&[["t", "u"]], cells / 2);
            Arc::new(LevelRows::decode(&decl, &batch).expect("decoded"))
        };
        let mut cache = LevelCache::new(10);
        cache.put((1, 0), group(4));
        cache.put((2, 0), group(4));
        assert!(cache.get((1, 0)).is_some(), "1 is now the most recent");
        cache.put((3, 0), group(4));
        assert_eq!(cache.cells(), 8, "the least recently used (2) went");
        assert!(cache.get((2, 0)).is_none());
        assert!(cache.get((1, 0)).is_some() && cache.get((3, 0)).is_some());
        cache.forget(&[1]);
        assert_eq!(cache.cells(), 4);
        // A group larger than the capacity is still kept alone (the answer needs it).
        cache.put((4, 0), group(50));
        assert_eq!(cache.cells(), 50);
        assert!(cache.get((4, 0)).is_some());
    }

    /// A level group of the tracks `tracks` (labels `(host, metric)`, in the order given),
    /// each with `cells` cells of two fields, as a table writes them, and its stream.
    fn level_group(tracks: &[[&str; 2]], cells: u64) -> (StreamDecl, RecordBatch) {
        use arrow::datatypes::{DataType, Field, Schema};
        let schema = Arc::new(Schema::new(vec![
            Field::new("host", DataType::Utf8, false),
            Field::new("metric", DataType::Utf8, false),
            Field::new("ts", DataType::UInt64, false),
            Field::new("value", DataType::Float64, true),
            Field::new("noise", DataType::Float64, true),
        ]));
        let spec = crate::archive::format::spec::StreamSpec::dynamic(
            "m",
            schema,
            vec!["host".into(), "metric".into()],
            Some("ts".into()),
        )
        .expect("spec");
        let decl = spec.decl().expect("decl");
        let table = level_schema(&decl).expect("schema");
        let batches: Vec<RecordBatch> = tracks
            .iter()
            .enumerate()
            .map(|(t, labels)| {
                let row = RecordBatch::try_new(
                    Arc::new(Schema::new(vec![
                        Field::new("host", DataType::Utf8, false),
                        Field::new("metric", DataType::Utf8, false),
                    ])),
                    vec![
                        Arc::new(StringArray::from(vec![labels[0]])),
                        Arc::new(StringArray::from(vec![labels[1]])),
                    ],
                )
                .expect("row");
                let cells: Cells = (0..cells)
                    .flat_map(|c| {
                        (0..2).map(move |f| ((f, c), Bucket::of(f, c, (t as u64 * 100 + c) as f64)))
                    })
                    .collect();
                encode_cells(&decl, &table, 1, &row, &cells, CellOrder::CellThenField)
                    .expect("encode")
            })
            .collect();
        let batch = arrow::compute::concat_batches(&table, &batches).expect("concat");
        (decl, batch)
    }

    #[test]
    fn a_level_group_hands_each_track_exactly_its_rows() {
        let tracks = [["a", "x"], ["a", "y"], ["ab", "x"], ["b", "a"], ["b", "b"]];
        let (decl, batch) = level_group(&tracks, 3);
        let rows = LevelRows::decode(&decl, &batch).expect("decoded");
        assert_eq!(rows.len(), 5 * 3 * 2);
        let whole = decode_level(&decl, &batch).expect("whole");
        assert_eq!(whole.len(), 5);
        let mut from = 0;
        for (t, labels) in tracks.iter().enumerate() {
            let found = rows.tracks.rows_of(labels, from);
            assert_eq!(found, t * 6..t * 6 + 6, "track {labels:?}");
            from = found.end;
            let key = TrackKey::encode(labels).expect("key");
            let cells: Cells = found.map(|i| rows.bucket(i)).collect();
            assert_eq!(
                cells, whole[&key],
                "track {labels:?}: the same cells as a whole decode"
            );
        }
        // Tracks the group does not hold: none of its rows, wherever they sort.
        for absent in [["0", "x"], ["a", "z"], ["a", "x "], ["b", "c"], ["c", "a"]] {
            assert!(rows.tracks.rows_of(&absent, 0).is_empty(), "{absent:?}");
        }
        // Only the selected tracks between the group's first and last row are looked for.
        let selection: Vec<Vec<&str>> = [["0", "x"], ["a", "y"], ["b", "a"], ["c", "a"]]
            .iter()
            .map(|t| t.to_vec())
            .collect();
        assert_eq!(rows.tracks.tracks_within(&selection), 1..3);
        // The rows of a selection as ranges: adjacent tracks' rows joined, absent ones none.
        assert_eq!(rows.tracks.rows_of_all(&selection), vec![6..12, 18..24]);
        let adjacent = vec![vec!["a", "x"], vec!["a", "y"]];
        assert_eq!(rows.tracks.rows_of_all(&adjacent), vec![0..12]);
        let apart: Vec<Vec<&str>> = [["a", "x"], ["ab", "x"], ["b", "b"], ["c", "a"]]
            .iter()
            .map(|t| t.to_vec())
            .collect();
        assert_eq!(rows.tracks.rows_of_all(&apart), vec![0..6, 12..18, 24..30]);
    }

    #[test]
    fn an_untracked_level_group_is_all_one_track() {
        use arrow::datatypes::{DataType, Field, Schema};
        let schema = Arc::new(Schema::new(vec![
            Field::new("ts", DataType::UInt64, false),
            Field::new("value", DataType::Float64, true),
        ]));
        let spec = crate::archive::format::spec::StreamSpec::dynamic(
            "u",
            schema,
            Vec::new(),
            Some("ts".into()),
        )
        .expect("spec");
        let decl = spec.decl().expect("decl");
        let table = level_schema(&decl).expect("schema");
        let row = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("x", DataType::UInt64, false)])),
            vec![Arc::new(UInt64Array::from(vec![0u64]))],
        )
        .expect("row");
        let cells: Cells = (0..5).map(|c| ((0, c), Bucket::of(0, c, 1.0))).collect();
        let batch =
            encode_cells(&decl, &table, 0, &row, &cells, CellOrder::CellThenField).expect("encode");
        let rows = LevelRows::decode(&decl, &batch).expect("decoded");
        let none: [&str; 0] = [];
        assert_eq!(
            rows.tracks.rows_of(&none, 0),
            0..5,
            "every row is the track's"
        );
        assert_eq!(rows.tracks.rows_of_all(&[none.to_vec()]), vec![0..5]);
    }

    #[test]
    fn a_level_group_out_of_track_order_is_damage() {
        let (decl, batch) = level_group(&[["a", "x"], ["b", "x"], ["a", "y"]], 2);
        let error = LevelRows::decode(&decl, &batch).expect_err("refused");
        assert!(
            error.contains("level row 8") && error.contains("track order"),
            "{error}"
        );
        assert!(
            decode_level(&decl, &batch).is_err(),
            "a whole decode refuses it too"
        );
    }

    #[test]
    fn a_table_group_holds_exactly_its_track_range_in_key_order() {
        let tuples: Vec<Vec<&str>> = vec![
            vec!["a"],
            vec!["a", "b"],
            vec!["a", "c"],
            vec!["ab"],
            vec!["b"],
            vec!["b", "a"],
            vec!["c"],
        ];
        // Label tuples order exactly as their keys do.
        let mut by_key = tuples.clone();
        by_key.sort_by_key(|t| TrackKey::encode(t).expect("key"));
        assert_eq!(by_key, tuples);
        let group = GroupEntry {
            track: vec!["a".to_owned(), "b".to_owned()].into(),
            rows: 1,
            position: [0, 0],
            axis: None,
            seq: [0, 0],
            span: crate::archive::format::manifest::Span {
                offset: 0,
                len: 0,
                crc32c: 0,
            },
            last_track: Some(vec!["b".into()]),
            slice: None,
        };
        let holds = |t: &[&str]| group_holds_any(&group, &[t.to_vec()]);
        assert!(!holds(&["a"]));
        assert!(holds(&["a", "b"]) && holds(&["a", "c"]) && holds(&["ab"]) && holds(&["b"]));
        assert!(!holds(&["b", "a"]) && !holds(&["c"]));
        assert!(!group_holds_any(&group, &[vec!["a"], vec!["c"], vec!["d"]]));
        assert!(group_holds_any(&group, &[vec!["a"], vec!["ab"]]));
    }

    #[test]
    fn ladders_are_checked() {
        assert_eq!(Ladder::parse("1024,8,8"), Ok(Ladder::ORDINAL));
        assert!(Ladder::parse("0,8,8").expect_err("base").contains("base"));
        assert!(Ladder::parse("10,1,8")
            .expect_err("factor")
            .contains("factor"));
        assert!(Ladder::parse("10,8")
            .expect_err("shape")
            .contains("BASE,FACTOR,LEVELS"));
        assert!(Ladder::parse("u64::MAX,8,8").is_err());
        assert!(Ladder::new(u64::MAX / 2, 8, 3)
            .expect_err("overflow")
            .contains("overflow"));
        assert_eq!(Ladder::NANOSECONDS.width(1), 8_000_000_000);
    }
}
