//! Raw reads: the catalog chooses row groups, digests are verified, runs merge by `_seq`.

use crate::archive::error::{ReadError, StoredError};
use crate::archive::format::manifest::{StreamState, TrackState};
use crate::archive::format::spec::{POSITION_COLUMN, SEQ_COLUMN};
use crate::archive::io::store::Store;
pub(crate) use crate::archive::plan::select::{beneath, floor_refusal, select};
use crate::contract::{Position, TrackKey};
use arrow::array::{Array, BooleanArray, RecordBatch, UInt64Array};
use arrow::compute::{concat_batches, filter_record_batch, interleave_record_batch};
use arrow::datatypes::SchemaRef;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::ops::{Bound, RangeBounds};

/// Whether position `p` lies in the range.
fn contains(start: Bound<Position>, end: Bound<Position>, p: u64) -> bool {
    (start, end).contains(&Position(p))
}

/// Reads the rows of the selected tracks within the position range, in publish order:
/// what is sealed, then what is staged (`staged`: each selected track's staged batches, in
/// publish order; a track may be staged and not yet recorded). Staged rows come after every
/// sealed row of their track by construction (`_seq` only grows), so each track is one run
/// and the runs merge by `_seq` with no sort. The answer carries the stream's columns
/// followed by `_position` and `_seq`.
pub(crate) fn rows(
    store: &Store,
    stream: &StreamState,
    schema: &SchemaRef,
    tracks: &[(&TrackKey, &TrackState)],
    staged: &[(&TrackKey, &[RecordBatch])],
    start: Bound<Position>,
    end: Bound<Position>,
) -> Result<RecordBatch, ReadError> {
    floor_refusal(tracks, start)?;
    let mut open = crate::archive::io::segment::Opened::new(store);
    let mut runs: Vec<RecordBatch> = Vec::with_capacity(tracks.len() + staged.len());
    let mut staged_of: BTreeMap<&TrackKey, &[RecordBatch]> = staged.iter().copied().collect();
    for (key, track) in tracks {
        let mut parts = Vec::new();
        for g in &track.groups {
            let file = &stream.files[g.file];
            let entry = &file.groups[g.group];
            let [lo, hi] = entry.position;
            let overlaps =
                contains(start, Bound::Unbounded, hi) && contains(Bound::Unbounded, end, lo);
            if !overlaps {
                continue;
            }
            let batch = open.read_group(g.file, file, g.group)?;
            let whole = contains(start, end, lo) && contains(start, end, hi);
            parts.push(if whole {
                batch
            } else {
                clip(&batch, start, end)?
            });
        }
        if let Some(batches) = staged_of.remove(key) {
            clip_all(batches, start, end, &mut parts)?;
        }
        if !parts.is_empty() {
            runs.push(
                concat_batches(schema, &parts).map_err(|e| StoredError::internal(e.to_string()))?,
            );
        }
    }
    // Tracks staged for the first time: nothing of them is sealed yet.
    for batches in staged_of.into_values() {
        let mut parts = Vec::new();
        clip_all(batches, start, end, &mut parts)?;
        if !parts.is_empty() {
            runs.push(
                concat_batches(schema, &parts).map_err(|e| StoredError::internal(e.to_string()))?,
            );
        }
    }
    merge_by_seq(schema, runs)
}

/// Appends the rows of `batches` within the range to `parts`.
fn clip_all(
    batches: &[RecordBatch],
    start: Bound<Position>,
    end: Bound<Position>,
    parts: &mut Vec<RecordBatch>,
) -> Result<(), ReadError> {
    for batch in batches {
        let clipped = clip(batch, start, end)?;
        if clipped.num_rows() > 0 {
            parts.push(clipped);
        }
    }
    Ok(())
}

fn clip(
    batch: &RecordBatch,
    start: Bound<Position>,
    end: Bound<Position>,
) -> Result<RecordBatch, ReadError> {
    let positions = position_column(batch)?;
    let keep: BooleanArray = positions
        .iter()
        .map(|p| Some(contains(start, end, p.unwrap_or(0))))
        .collect();
    Ok(filter_record_batch(batch, &keep).map_err(|e| StoredError::internal(e.to_string()))?)
}

fn u64_column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a UInt64Array, StoredError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
        .ok_or_else(|| StoredError::corrupt(format!("a stored row group lacks its {name} column")))
}

/// The `_position` column of a stored batch.
pub(crate) fn position_column(batch: &RecordBatch) -> Result<&UInt64Array, StoredError> {
    u64_column(batch, POSITION_COLUMN)
}

/// Merges runs that are each ordered by `_seq` into one batch ordered by `_seq`: a linear
/// k-way merge, never a sort.
fn merge_by_seq(schema: &SchemaRef, runs: Vec<RecordBatch>) -> Result<RecordBatch, ReadError> {
    match runs.len() {
        0 => return Ok(RecordBatch::new_empty(schema.clone())),
        1 => return Ok(runs.into_iter().next().expect("one run")),
        _ => {}
    }
    let seqs: Vec<&UInt64Array> = runs
        .iter()
        .map(|r| u64_column(r, SEQ_COLUMN))
        .collect::<Result<_, _>>()?;
    let total: usize = runs.iter().map(|r| r.num_rows()).sum();
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = seqs
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.is_empty())
        .map(|(run, s)| Reverse((s.value(0), run)))
        .collect();
    let mut next = vec![0usize; runs.len()];
    let mut indices = Vec::with_capacity(total);
    while let Some(Reverse((_, run))) = heap.pop() {
        let row = next[run];
        indices.push((run, row));
        next[run] += 1;
        if next[run] < seqs[run].len() {
            heap.push(Reverse((seqs[run].value(next[run]), run)));
        }
    }
    let refs: Vec<&RecordBatch> = runs.iter().collect();
    Ok(interleave_record_batch(&refs, &indices)
        .map_err(|e| StoredError::internal(e.to_string()))?)
}
