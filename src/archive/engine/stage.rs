//! Delivery → staged rows in memory, per stream and track, in publish order. No file is
//! touched here: a drain that stages returns in microseconds and never waits on a sync.

use crate::archive::error::{ArchiveError, Result};
use crate::archive::format::manifest::{StreamDecl, StreamState};
use crate::archive::format::physical::{self, MAX_STORED};
use crate::archive::format::segment::TrackRows;
use crate::contract::{BadTrack, TrackKey};
use arrow::array::{Array, ArrayRef, RecordBatch, StringArray, UInt32Array, UInt64Array};
use arrow::compute::{cast, concat_batches, take_record_batch};
use arrow::datatypes::{DataType, SchemaRef};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Hashes a row's track labels while grouping a delivery by track: every row is hashed, so
/// a fast hash (aHash, fixed seeds; nothing adversarial reaches it, a collision only costs a
/// comparison).
static LABEL_HASH: ahash::RandomState = ahash::RandomState::with_seeds(
    0x243F_6A88_85A3_08D3,
    0x1319_8A2E_0370_7344,
    0xA409_3822_299F_31D0,
    0x082E_FA98_EC4E_6C89,
);

/// Rows of one track awaiting the next barrier.
#[derive(Debug, Default)]
pub(crate) struct StagedTrack {
    pub labels: Vec<String>,
    pub batches: Vec<RecordBatch>,
    pub rows: usize,
    pub position: Option<[u64; 2]>,
    pub axis: Option<[u64; 2]>,
    pub seq: Option<[u64; 2]>,
}

/// Rows of one stream awaiting the next barrier.
#[derive(Debug, Default)]
pub(crate) struct Staged {
    pub tracks: BTreeMap<TrackKey, StagedTrack>,
    pub rows: usize,
    /// The next `_seq` to assign; `None` until the first row (then taken from durable state).
    pub next_seq: Option<u64>,
    /// The highest position staged.
    pub last_position: Option<u64>,
}

impl Staged {
    /// Whether nothing is staged.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Drops the staged rows but keeps where each track and the stream stand (last axis,
    /// last position, next `_seq`), so later deliveries are checked against them.
    pub fn forget_rows(&mut self) {
        for track in self.tracks.values_mut() {
            track.batches.clear();
        }
    }

    /// The staged tracks as barrier input, in track-key order, and what the barrier will
    /// record of the stream (watermark, next seq).
    pub fn drain(
        &mut self,
        full_schema: &SchemaRef,
    ) -> std::result::Result<(Vec<TrackRows>, u64, u64), arrow::error::ArrowError> {
        let mut out = Vec::with_capacity(self.tracks.len());
        for (_, track) in std::mem::take(&mut self.tracks) {
            let batch = concat_batches(full_schema, &track.batches)?;
            out.push(TrackRows {
                labels: track.labels,
                batch,
                position: track.position.unwrap_or([0, 0]),
                axis: track.axis,
                seq: track.seq.unwrap_or([0, 0]),
            });
        }
        let watermark = self.last_position.unwrap_or(0);
        let next_seq = self.next_seq.unwrap_or(0);
        *self = Staged::default();
        Ok((out, watermark, next_seq))
    }
}

/// Validates a delivery against the declaration and what is durable and staged, then stages
/// it. All or nothing: on any error nothing of the delivery is staged.
pub(crate) fn stage(
    decl: &StreamDecl,
    full_schema: &SchemaRef,
    durable: &StreamState,
    staged: &mut Staged,
    batch: &RecordBatch,
    positions: &[u64],
) -> Result<usize> {
    let id = &decl.id;
    let n = batch.num_rows();
    if positions.len() != n {
        return Err(ArchiveError::input(
            id,
            0,
            None,
            format!("{} positions for {n} rows", positions.len()),
        ));
    }
    if n == 0 {
        return Ok(0);
    }
    // Columns: same names, order and types as declared.
    let schema = batch.schema();
    if schema.fields().len() != decl.columns.len() {
        return Err(ArchiveError::input(
            id,
            0,
            None,
            format!(
                "rows have {} columns, the stream declares {}",
                schema.fields().len(),
                decl.columns.len()
            ),
        ));
    }
    for (i, (field, col)) in schema.fields().iter().zip(&decl.columns).enumerate() {
        if field.name() != &col.name || field.data_type().to_string() != col.data_type {
            return Err(ArchiveError::input(
                id,
                0,
                Some(field.name()),
                format!(
                    "column {i} is {:?} {}, the stream declares {:?} {}",
                    field.name(),
                    field.data_type(),
                    col.name,
                    col.data_type
                ),
            ));
        }
        if let Some(values) = batch.column(i).as_any().downcast_ref::<UInt64Array>() {
            if let Some(row) = physical::first_unstorable(values) {
                return Err(ArchiveError::input(
                    id,
                    row,
                    Some(&col.name),
                    format!(
                        "{} is above {MAX_STORED} (2^63 - 1), the largest value the archive stores: its files hold integers as signed 64-bit values, which every Delta reader takes",
                        values.value(row)
                    ),
                ));
            }
        }
        if !col.nullable && batch.column(i).null_count() > 0 {
            let row = (0..n).find(|&r| batch.column(i).is_null(r)).unwrap_or(0);
            return Err(ArchiveError::input(
                id,
                row,
                Some(&col.name),
                "null in a column declared not nullable",
            ));
        }
    }
    // Positions never go backwards within a stream.
    let mut last = staged.last_position.unwrap_or(durable.watermark.0);
    for (row, &p) in positions.iter().enumerate() {
        if p >= MAX_STORED {
            // Files store positions as Int64 (format version 5), and the highest storable
            // one is reserved: the position after the last one must exist, or automatic
            // positions could never be appended again.
            return Err(ArchiveError::input(
                id,
                row,
                None,
                format!(
                    "position {p} is beyond the archive's range; positions go up to {} (2^63 - 2: files store them as signed 64-bit integers, and the highest is reserved)",
                    MAX_STORED - 1
                ),
            ));
        }
        if p < last {
            return Err(ArchiveError::input(
                id,
                row,
                None,
                format!("position {p} goes backwards (the stream is at {last})"),
            ));
        }
        last = p;
    }
    // Track labels, per row.
    let mut label_columns: Vec<StringArray> = Vec::with_capacity(decl.track.len());
    for name in &decl.track {
        let column = batch
            .column_by_name(name)
            .expect("declared track columns exist");
        let text = cast(column, &DataType::Utf8).map_err(|e| {
            ArchiveError::input(id, 0, Some(name), format!("cannot render as a label: {e}"))
        })?;
        let text = text
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("cast to Utf8 answers a StringArray")
            .clone();
        if let Some(row) = (0..n).find(|&r| text.is_null(r)) {
            return Err(ArchiveError::input(
                id,
                row,
                Some(name),
                "a track component is null",
            ));
        }
        label_columns.push(text);
    }
    let axis: Option<UInt64Array> = decl.axis.as_ref().map(|name| {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
            .expect("the declared axis column is UInt64")
            .clone()
    });
    // Group rows by track, in publish order, without allocating per row: a row with the
    // previous row's labels joins its track; any other row's labels hash to the tracks seen
    // in this delivery (a key is encoded once per track, not once per row).
    struct Group<'b> {
        labels: Vec<&'b str>,
        key: TrackKey,
        rows: Vec<u32>,
        /// The axis span of its rows, once checked.
        axis: Option<[u64; 2]>,
    }
    let mut groups: Vec<Group<'_>> = Vec::new();
    let mut by_hash: HashMap<u64, Vec<usize>> = HashMap::new();
    let same = |group: &Group<'_>, row: usize| {
        label_columns
            .iter()
            .zip(&group.labels)
            .all(|(column, label)| column.value(row) == *label)
    };
    // The previous row's track is tried first only while rows come in runs of one track
    // (interleaved tracks go straight to the hash).
    let mut previous: Option<usize> = None;
    let mut in_runs = true;
    for row in 0..n {
        if in_runs {
            if let Some(g) = previous.filter(|&g| same(&groups[g], row)) {
                groups[g].rows.push(row as u32);
                continue;
            }
        }
        let mut hasher = std::hash::BuildHasher::build_hasher(&LABEL_HASH);
        for column in &label_columns {
            std::hash::Hash::hash(column.value(row), &mut hasher);
        }
        let hash = std::hash::Hasher::finish(&hasher);
        let found = by_hash
            .get(&hash)
            .and_then(|candidates| candidates.iter().copied().find(|&g| same(&groups[g], row)));
        let g = match found {
            Some(g) => g,
            None => {
                let labels: Vec<&str> = label_columns.iter().map(|c| c.value(row)).collect();
                let key = TrackKey::encode(&labels).map_err(|e| match e {
                    BadTrack::Label(bad) => ArchiveError::input(
                        id,
                        row,
                        Some(&decl.track[bad.component]),
                        bad.to_string(),
                    ),
                    other => ArchiveError::input(id, row, None, other.to_string()),
                })?;
                groups.push(Group {
                    labels,
                    key,
                    rows: Vec::new(),
                    axis: None,
                });
                by_hash.entry(hash).or_default().push(groups.len() - 1);
                groups.len() - 1
            }
        };
        groups[g].rows.push(row as u32);
        in_runs = previous == Some(g);
        previous = Some(g);
    }
    // The axis never goes backwards within a partition.
    if let Some(axis) = &axis {
        for group in &mut groups {
            let (key, rows) = (&group.key, &group.rows);
            let mut last = staged
                .tracks
                .get(key)
                .and_then(|t| t.axis.map(|a| a[1]))
                .or_else(|| {
                    durable
                        .tracks
                        .get(key)
                        .and_then(|t| t.last_axis.or_else(|| t.retired_axis()))
                });
            for &row in rows {
                let value = axis.value(row as usize);
                if value >= MAX_STORED {
                    // Reserved, as the last position is: every span the archive reports is
                    // half-open, `[from, to)`, and `to` must exist for the highest axis.
                    return Err(ArchiveError::input(
                        id,
                        row as usize,
                        decl.axis.as_deref(),
                        format!(
                            "axis {value} is beyond the archive's range; axis values go up to {} (2^63 - 2: files store them as signed 64-bit integers, and the highest is reserved)",
                            MAX_STORED - 1
                        ),
                    ));
                }
                if let Some(l) = last {
                    if value < l {
                        return Err(ArchiveError::input(
                            id,
                            row as usize,
                            decl.axis.as_deref(),
                            format!("axis {value} goes backwards in track {key} (it is at {l})"),
                        ));
                    }
                }
                last = Some(value);
            }
            group.axis = rows
                .first()
                .map(|&r| [axis.value(r as usize), last.unwrap_or(0)]);
        }
    }
    // Everything is valid: assign _seq in publish order and stage per track.
    let first_seq = staged.next_seq.unwrap_or(durable.next_seq);
    let seqs = UInt64Array::from_iter_values(first_seq..first_seq + n as u64);
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns.push(Arc::new(UInt64Array::from(positions.to_vec())));
    columns.push(Arc::new(seqs));
    let full = RecordBatch::try_new(full_schema.clone(), columns)
        .map_err(|e| ArchiveError::input(id, 0, None, e.to_string()))?;
    for group in groups {
        // Every group has the row that opened it.
        let (Some(&first), Some(&last_row)) = (group.rows.first(), group.rows.last()) else {
            continue;
        };
        let (first, last_row) = (first as usize, last_row as usize);
        let rows = group.rows.len();
        let part = if rows == n {
            full.clone()
        } else {
            take_record_batch(&full, &UInt32Array::from(group.rows))
                .map_err(|e| ArchiveError::input(id, 0, None, e.to_string()))?
        };
        let axis_range = group.axis;
        let labels = group.labels.iter().map(|l| (*l).to_owned()).collect();
        let track = staged
            .tracks
            .entry(group.key)
            .or_insert_with(|| StagedTrack {
                labels,
                ..StagedTrack::default()
            });
        track.rows += rows;
        track.batches.push(part);
        let (p0, p1) = (positions[first], positions[last_row]);
        track.position = Some(track.position.map_or([p0, p1], |[lo, _]| [lo, p1]));
        let (s0, s1) = (first_seq + first as u64, first_seq + last_row as u64);
        track.seq = Some(track.seq.map_or([s0, s1], |[lo, _]| [lo, s1]));
        if let Some([a0, a1]) = axis_range {
            track.axis = Some(track.axis.map_or([a0, a1], |[lo, _]| [lo, a1]));
        }
    }
    staged.rows += n;
    staged.next_seq = Some(first_seq + n as u64);
    staged.last_position = Some(last.max(staged.last_position.unwrap_or(0)));
    Ok(n)
}
