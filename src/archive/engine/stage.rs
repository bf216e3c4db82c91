//! Delivery → staged rows in memory, per stream, in publish order: each delivery kept whole
//! and each of its rows marked with its track, so staging costs what the rows cost whatever
//! the number of tracks. No file is touched here: a drain that stages returns in
//! microseconds and never waits on a sync.

use crate::archive::error::{ArchiveError, Result};
use crate::archive::format::manifest::{StreamDecl, StreamState, TrackState};
use crate::archive::format::physical::{self, MAX_STORED};
use crate::archive::format::segment::{TrackBatch, TrackRows};
use crate::contract::{BadTrack, Labels, TrackKey};
use arrow::array::{Array, ArrayRef, RecordBatch, StringArray, UInt32Array, UInt64Array};
use arrow::compute::{cast, take_record_batch};
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

/// Rows from which a barrier orders its columns on two threads.
const TWO_THREADS_FROM: usize = 1 << 16;

/// Slots a stream's staging keeps beyond four times the tracks of the last barrier before
/// it forgets them all (they are found again, at the cost of a key each).
const RETAINED_SLOTS: usize = 4096;

/// One track this handle has staged rows of: who it is, and what it holds for the next
/// barrier. Its rows live in the stream's staged batches ([`Staged::batches`]), marked with
/// its slot.
#[derive(Debug)]
pub(crate) struct StagedTrack {
    pub key: TrackKey,
    pub labels: Labels,
    /// The hash of its labels, and the next slot whose labels hash the same (a chain from
    /// [`Staged::by_hash`], newest first).
    hash: u64,
    same_hash: Option<u32>,
    /// Rows staged for the next barrier, and their spans.
    pub rows: usize,
    pub position: Option<[u64; 2]>,
    pub axis: Option<[u64; 2]>,
    pub seq: Option<[u64; 2]>,
    /// While a delivery is checked: the axis value its rows of this track must not go
    /// beneath.
    pending: Option<Option<u64>>,
    /// The last axis value of the rows a committed barrier took from this slot: where the
    /// track stands in the durable state, until a record other than a barrier changes the
    /// stream ([`Staged::forget_sealed`]). Spares a delivery the catalog search per track
    /// that a scraper's rows, one per track per barrier, would otherwise pay every time.
    sealed: Option<u64>,
}

/// Rows of one stream awaiting the next barrier.
///
/// Deliveries are kept whole, in publish order, each row marked with its track's slot: staging
/// costs what the rows cost, whatever the number of tracks they fall in (with 100,000 tracks a
/// delivery of 100,000 rows is one batch, not 100,000). Tracks keep their slots from barrier
/// to barrier, so a row finds its track by a hash of its labels, with no key encoded and no
/// allocation, once the track has been seen. The barrier orders the rows by track once
/// ([`Staged::drain`]).
#[derive(Debug, Default)]
pub(crate) struct Staged {
    /// Every track this handle staged, by slot; a slot is never reused.
    slots: Vec<StagedTrack>,
    /// Slots by track key: key order for the barrier, ranges for a prefix's reads.
    by_key: BTreeMap<TrackKey, u32>,
    /// The first slot of each label hash (see [`StagedTrack::same_hash`]).
    by_hash: HashMap<u64, u32>,
    /// Deliveries with `_position` and `_seq`, and each row's track slot.
    pub batches: Vec<(RecordBatch, Vec<u32>)>,
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

    /// Whether nothing was ever staged here: no track slot, no `_seq` taken.
    pub fn untouched(&self) -> bool {
        self.slots.is_empty() && self.rows == 0 && self.next_seq.is_none()
    }

    /// Drops the staged rows but keeps where each track and the stream stand (last axis,
    /// last position, next `_seq`), so later deliveries are checked against them.
    pub fn forget_rows(&mut self) {
        self.batches.clear();
        self.rows = 0;
    }

    /// Forgets where the durable state put each track ([`StagedTrack::sealed`]): a record
    /// other than a barrier (a retirement above all) was committed for the stream.
    pub fn forget_sealed(&mut self) {
        for track in &mut self.slots {
            track.sealed = None;
        }
    }

    /// The tracks beneath `prefix` holding staged rows, in key order.
    pub fn beneath(&self, prefix: &TrackKey) -> Vec<(&TrackKey, u32)> {
        crate::archive::plan::select::beneath(&self.by_key, prefix)
            .into_iter()
            .filter(|(_, &slot)| self.slots[slot as usize].rows > 0)
            .map(|(key, &slot)| (key, slot))
            .collect()
    }

    /// The staged rows of the tracks `selected` (as [`Staged::beneath`] answers them; each
    /// track's rows in publish order, one batch per delivery holding some), in that order.
    pub fn rows_of<'a>(
        &self,
        selected: &[(&'a TrackKey, u32)],
    ) -> std::result::Result<Vec<(&'a TrackKey, Vec<RecordBatch>)>, arrow::error::ArrowError> {
        // By slot, sized by the selection (a read of one track costs nothing per other track).
        let wanted: HashMap<u32, usize> = selected
            .iter()
            .enumerate()
            .map(|(i, (_, slot))| (*slot, i))
            .collect();
        let mut out: Vec<(&TrackKey, Vec<RecordBatch>)> =
            selected.iter().map(|(k, _)| (*k, Vec::new())).collect();
        let mut picked: Vec<Vec<u32>> = vec![Vec::new(); selected.len()];
        for (batch, marks) in &self.batches {
            let mut hit = Vec::new();
            for (row, slot) in marks.iter().enumerate() {
                if let Some(&i) = wanted.get(slot) {
                    if picked[i].is_empty() {
                        hit.push(i);
                    }
                    picked[i].push(row as u32);
                }
            }
            for i in hit {
                let indices = UInt32Array::from(std::mem::take(&mut picked[i]));
                out[i].1.push(take_record_batch(batch, &indices)?);
            }
        }
        Ok(out)
    }

    /// The staged tracks as barrier input, in track-key order, and what the barrier will
    /// record of the stream (watermark, next seq). The rows are ordered by track, then
    /// publish order, in one pass (a counting sort by slot) and one `take`; each track's
    /// batch is a slice of the result. The tracks keep their slots; their rows are gone.
    pub fn drain(
        &mut self,
        full_schema: &SchemaRef,
        track_columns: &[String],
    ) -> std::result::Result<Drained, arrow::error::ArrowError> {
        // Key order is the catalog's: the slots holding rows, as `by_key` lists them (the slots
        // kept are a few times a barrier's tracks at most, see `RETAINED_SLOTS`).
        let touched: Vec<u32> = self
            .by_key
            .values()
            .copied()
            .filter(|&slot| self.slots[slot as usize].rows > 0)
            .collect();
        let mut start_of = vec![0u32; self.slots.len()];
        let mut at = 0u32;
        for &slot in &touched {
            start_of[slot as usize] = at;
            at += self.slots[slot as usize].rows as u32;
        }
        let batches = std::mem::take(&mut self.batches);
        // A second thread only for a barrier worth it: each column is one pass over its rows.
        let sorted = Arc::new(by_track(
            full_schema,
            track_columns,
            &batches,
            &touched,
            &self.slots,
            &start_of,
            at as usize >= TWO_THREADS_FROM,
        )?);
        drop(batches);
        let mut tracks = Vec::with_capacity(touched.len());
        let mut from = 0;
        for slot in touched {
            let track = &mut self.slots[slot as usize];
            let rows = std::mem::take(&mut track.rows);
            // Where the track stands once this barrier commits (a barrier that fails drops
            // the slots with the handle it poisons).
            track.sealed = track.axis.map(|[_, hi]| hi);
            tracks.push(TrackRows {
                labels: track.labels.clone(),
                batch: TrackBatch::Range {
                    whole: sorted.clone(),
                    offset: from,
                    len: rows,
                },
                position: track.position.take().unwrap_or([0, 0]),
                axis: track.axis.take(),
                seq: track.seq.take().unwrap_or([0, 0]),
            });
            from += rows;
        }
        let drained = Drained {
            tracks,
            watermark: self.last_position.unwrap_or(0),
            next_seq: self.next_seq.unwrap_or(0),
        };
        // What is durable after the barrier is what the next delivery is checked against.
        self.rows = 0;
        self.next_seq = None;
        self.last_position = None;
        if self.slots.len() > 4 * drained.tracks.len() + RETAINED_SLOTS {
            // Tracks come and go (a fleet's pods, a capture's probes): the slots kept stay
            // within a few times the tracks a barrier holds.
            self.slots.clear();
            self.by_key.clear();
            self.by_hash.clear();
        }
        Ok(drained)
    }

    /// The slot of the track whose labels are `row`'s in `columns` (hashing `hash`), if this
    /// handle has staged it.
    fn find(&self, hash: u64, columns: &[StringArray], row: usize) -> Option<u32> {
        let mut at = self.by_hash.get(&hash).copied();
        while let Some(slot) = at {
            let track = &self.slots[slot as usize];
            if columns
                .iter()
                .zip(track.labels.iter())
                .all(|(column, label)| column.value(row) == label)
            {
                return Some(slot);
            }
            at = track.same_hash;
        }
        None
    }

    /// A slot for a track this handle has not staged before. It joins the key order with
    /// the rest of its delivery's new slots ([`Staged::order_new`]).
    fn add(&mut self, hash: u64, key: TrackKey, labels: Labels) -> u32 {
        let slot = self.slots.len() as u32;
        let same_hash = self.by_hash.insert(hash, slot);
        self.slots.push(StagedTrack {
            key,
            labels,
            hash,
            same_hash,
            rows: 0,
            position: None,
            axis: None,
            seq: None,
            pending: None,
            sealed: None,
        });
        slot
    }

    /// Puts the slots from `first` on (the tracks a delivery brought) in key order: searched
    /// in one by one when they are few beside the slots already ordered, else sorted and
    /// merged in one pass (a fleet's first delivery brings 100,000 tracks at once, and a
    /// search each was a seventh of an ingest's instructions).
    ///
    /// Refuses (as an internal error, changing nothing) a new slot whose key is already
    /// ordered: the older slot's rows would no longer be found by key, and a read would miss
    /// them.
    fn order_new(&mut self, first: usize) -> std::result::Result<(), String> {
        let new = self.slots.get(first..).unwrap_or_default();
        let staged = |key: &TrackKey| format!("a new track slot names {key}, already staged");
        if new.len() * JOIN_SHARE < self.by_key.len() {
            if let Some(track) = new.iter().find(|t| self.by_key.contains_key(&t.key)) {
                return Err(staged(&track.key));
            }
            for (slot, track) in (first..).zip(new) {
                self.by_key.insert(track.key.clone(), slot as u32);
            }
            return Ok(());
        }
        // Collecting sorts them (stably, in one pass when they came in key order); one walk
        // beside the order finds a key in both.
        let mut fresh: BTreeMap<TrackKey, u32> = (first..)
            .zip(new)
            .map(|(slot, track)| (track.key.clone(), slot as u32))
            .collect();
        let mut ordered = self.by_key.keys().peekable();
        for key in fresh.keys() {
            while ordered.next_if(|k| *k < key).is_some() {}
            if ordered.peek() == Some(&key) {
                return Err(staged(key));
            }
        }
        if fresh.len() != new.len() {
            return Err("a delivery made two slots for one track".into());
        }
        self.by_key.append(&mut fresh);
        Ok(())
    }

    /// Forgets the slots from `first` on (a refused delivery added them), newest first: each
    /// is the head of its hash chain then.
    fn truncate(&mut self, first: usize) {
        while self.slots.len() > first {
            let Some(track) = self.slots.pop() else {
                break;
            };
            // Only its own entry: a key ordered under another slot stays.
            let slot = self.slots.len() as u32;
            if self.by_key.get(&track.key) == Some(&slot) {
                self.by_key.remove(&track.key);
            }
            match track.same_hash {
                Some(next) => self.by_hash.insert(track.hash, next),
                None => self.by_hash.remove(&track.hash),
            };
        }
    }
}

/// A stream's staged rows as one barrier takes them ([`Staged::drain`]).
pub(crate) struct Drained {
    /// Each track's rows, in track-key order: consecutive ranges of one batch holding every
    /// row, ordered by track and then publish order.
    pub tracks: Vec<TrackRows>,
    /// The highest position staged.
    pub watermark: u64,
    /// The stream's next `_seq` after these rows.
    pub next_seq: u64,
}

/// Deliveries naming at least one in this many of the tracks staged and durable find where
/// their tracks stand in one walk of both catalogs ([`stand`]); smaller ones search.
const JOIN_SHARE: usize = 8;

/// Sets where the axis of each track `marks` names stands before the delivery (its
/// `pending`): the last axis of its staged rows, else what is durable (its last axis, or
/// what a retirement passed). Answers the slots it set, to be cleared once the delivery is
/// checked.
///
/// A track this handle sealed stands where its last barrier left it ([`StagedTrack::sealed`]).
/// The others' durable state is looked up; when a delivery names many of them (a fleet's
/// tracks, just after an open) by walking the staged tracks and the catalog together (both
/// are in key order) instead of a search each, which at 100,000 tracks was a tenth of an
/// ingest.
fn stand(staged: &mut Staged, durable: &StreamState, marks: &[u32]) -> Vec<u32> {
    let mut checked = Vec::new();
    let mut unstaged = Vec::new();
    for &slot in marks {
        let track = &mut staged.slots[slot as usize];
        if track.pending.is_some() {
            continue;
        }
        checked.push(slot);
        track.pending = Some(match (track.axis, track.sealed) {
            (Some([_, hi]), _) if track.rows > 0 => Some(hi),
            (_, Some(sealed)) => Some(sealed),
            _ => {
                unstaged.push(slot);
                None
            }
        });
    }
    let durable_axis = |t: &TrackState| t.last_axis.or_else(|| t.retired_axis());
    if unstaged.len() * JOIN_SHARE < staged.by_key.len() + durable.tracks.len() {
        for slot in unstaged {
            let track = &mut staged.slots[slot as usize];
            track.pending = Some(durable.tracks.get(&track.key).and_then(durable_axis));
        }
        return checked;
    }
    let mut wanted = vec![false; staged.slots.len()];
    for slot in unstaged {
        wanted[slot as usize] = true;
    }
    let mut catalog = durable.tracks.iter().peekable();
    for (key, &slot) in &staged.by_key {
        if !wanted[slot as usize] {
            continue;
        }
        while catalog.next_if(|(k, _)| *k < key).is_some() {}
        let stands = catalog
            .peek()
            .filter(|(k, _)| *k == key)
            .and_then(|(_, t)| durable_axis(t));
        staged.slots[slot as usize].pending = Some(stands);
    }
    checked
}

/// The staged deliveries' rows ordered by track (`touched`, in key order), then publish
/// order: a counting sort by slot, `start_of` giving each slot's first row in the result.
///
/// Built column by column (on two threads with `two_threads`): a track column is written
/// from its tracks' labels (a run per track, nothing gathered; where tracks hold eight rows
/// or more), a fixed-width column without nulls is scattered from the deliveries in one pass
/// (no copy of the deliveries joined first), and any other column is joined and gathered
/// (`take`).
fn by_track(
    full_schema: &SchemaRef,
    track_columns: &[String],
    batches: &[(RecordBatch, Vec<u32>)],
    touched: &[u32],
    slots: &[StagedTrack],
    start_of: &[u32],
    two_threads: bool,
) -> std::result::Result<RecordBatch, arrow::error::ArrowError> {
    use arrow::error::ArrowError;
    let rows: usize = batches.iter().map(|(b, _)| b.num_rows()).sum();
    // Each row's place in the result, for the columns gathered (made once, if any is).
    let order = std::sync::OnceLock::new();
    let order = || -> &UInt32Array {
        order.get_or_init(|| {
            let mut at = start_of.to_vec();
            let mut order = vec![0u32; rows];
            let mut offset = 0u32;
            for (_, marks) in batches {
                for (row, &slot) in marks.iter().enumerate() {
                    let dest = &mut at[slot as usize];
                    order[*dest as usize] = offset + row as u32;
                    *dest += 1;
                }
                offset += marks.len() as u32;
            }
            UInt32Array::from(order)
        })
    };
    let column = |i: usize| -> std::result::Result<ArrayRef, ArrowError> {
        let field = full_schema.field(i);
        // Runs pay off where tracks hold rows: with a row or two a track (a fleet's scrape),
        // each track's slot would be visited as often as a gather visits its row.
        let runs = rows >= 8 * touched.len();
        if let Some(k) = track_columns.iter().position(|c| c == field.name()) {
            if runs && *field.data_type() == DataType::Utf8 {
                let bytes: usize = touched
                    .iter()
                    .map(|&t| slots[t as usize].rows * slots[t as usize].labels[k].len())
                    .sum();
                if bytes <= i32::MAX as usize {
                    let mut builder = arrow::array::StringBuilder::with_capacity(rows, bytes);
                    for &t in touched {
                        let track = &slots[t as usize];
                        for _ in 0..track.rows {
                            builder.append_value(&track.labels[k]);
                        }
                    }
                    return Ok(Arc::new(builder.finish()));
                }
            }
        }
        let parts: Vec<&ArrayRef> = batches.iter().map(|(b, _)| b.column(i)).collect();
        // Types whose values are plain integers or floats of their width (an interval's
        // value is a struct, aligned to its parts, and is gathered instead).
        let plain = !matches!(field.data_type(), DataType::Interval(_));
        let width = field.data_type().primitive_width().filter(|_| plain);
        if let Some(width) = width.filter(|_| parts.iter().all(|p| p.null_count() == 0)) {
            let scattered = match width {
                1 => scatter::<u8>(&parts, batches, start_of, rows),
                2 => scatter::<u16>(&parts, batches, start_of, rows),
                4 => scatter::<u32>(&parts, batches, start_of, rows),
                8 => scatter::<u64>(&parts, batches, start_of, rows),
                16 => scatter::<u128>(&parts, batches, start_of, rows),
                _ => None,
            };
            if let Some(buffer) = scattered {
                let data = arrow::array::ArrayData::builder(field.data_type().clone())
                    .len(rows)
                    .add_buffer(buffer)
                    .build()?;
                return Ok(arrow::array::make_array(data));
            }
        }
        let joined = arrow::compute::concat(&parts.iter().map(|p| p.as_ref()).collect::<Vec<_>>())?;
        arrow::compute::take(joined.as_ref(), order(), None)
    };
    let n = full_schema.fields().len();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if i >= n {
                return done;
            }
            done.push((i, column(i)));
        }
    };
    let mut columns: Vec<Option<std::result::Result<ArrayRef, ArrowError>>> =
        (0..n).map(|_| None).collect();
    let (mine, theirs) = std::thread::scope(|scope| {
        let other = (two_threads && n > 1).then(|| scope.spawn(work));
        let mine = work();
        (mine, other.map(|t| t.join()))
    });
    let theirs = match theirs {
        None => Vec::new(),
        Some(Ok(done)) => done,
        Some(Err(_)) => {
            return Err(ArrowError::ComputeError(
                "a thread ordering a barrier's rows failed".into(),
            ))
        }
    };
    for (i, c) in mine.into_iter().chain(theirs) {
        columns[i] = Some(c);
    }
    let columns = columns
        .into_iter()
        .map(|c| {
            c.unwrap_or_else(|| Err(ArrowError::ComputeError("a column was not ordered".into())))
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    RecordBatch::try_new(full_schema.clone(), columns)
}

/// A fixed-width column's values of every delivery (`parts`, none null), each row written to
/// its track's next place (`start_of`, advanced as rows land): one sequential read of each
/// delivery. `None` when a part's buffer is not of `T`'s width.
fn scatter<T: arrow::datatypes::ArrowNativeType>(
    parts: &[&ArrayRef],
    batches: &[(RecordBatch, Vec<u32>)],
    start_of: &[u32],
    rows: usize,
) -> Option<arrow::buffer::Buffer> {
    let mut at = start_of.to_vec();
    let mut out = vec![T::default(); rows];
    for (part, (_, marks)) in parts.iter().zip(batches) {
        let data = part.to_data();
        let values = data.buffers().first()?.typed_data::<T>();
        let values = values.get(data.offset()..data.offset() + data.len())?;
        for (&v, &slot) in values.iter().zip(marks) {
            let dest = &mut at[slot as usize];
            out[*dest as usize] = v;
            *dest += 1;
        }
    }
    Some(arrow::buffer::Buffer::from_vec(out))
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
    if staged.rows + n > u32::MAX as usize {
        return Err(ArchiveError::input(
            id,
            0,
            None,
            format!(
                "{n} more rows would stage over {} rows for one barrier; seal first",
                u32::MAX
            ),
        ));
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
        if let Some((row, value)) = physical::first_unstorable_anywhere(batch.column(i).as_ref()) {
            return Err(ArchiveError::input(
                id,
                row,
                Some(&col.name),
                format!(
                    "{value} is above {MAX_STORED} (2^63 - 1), the largest value the archive stores: its files hold integers as signed 64-bit values, which every Delta reader takes"
                ),
            ));
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
    // Each row's track: found by a hash of its labels among the tracks this handle has
    // staged (no key is encoded, nothing allocated), or a new slot. Two guesses come first,
    // each one comparison: the previous row's track (rows in runs of one track), then the
    // slot made right after it (a scraper delivers its tracks in the same order every time,
    // and slots are made in the order tracks first arrive, so with 100,000 interleaved
    // tracks each row finds its track next door instead of by hash, in memory read in
    // order).
    let first_new = staged.slots.len();
    let mut marks = vec![0u32; n];
    let mut previous: Option<u32> = None;
    let same = |track: &StagedTrack, row: usize| {
        label_columns
            .iter()
            .zip(track.labels.iter())
            .all(|(column, label)| column.value(row) == label)
    };
    // Which guess found the previous row's track: rows in runs of one track find theirs in
    // the previous row's, interleaved rows in the next slot, and the guess that found the
    // last row goes first (interleaved rows would otherwise fail the first guess every time).
    let mut interleaved = false;
    for (row, mark) in marks.iter_mut().enumerate() {
        let next = previous.map_or(0, |s| s + 1);
        let in_next = |row: usize| {
            staged
                .slots
                .get(next as usize)
                .is_some_and(|track| same(track, row))
        };
        if interleaved && in_next(row) {
            *mark = next;
            previous = Some(next);
            continue;
        }
        if let Some(slot) = previous.filter(|&s| same(&staged.slots[s as usize], row)) {
            *mark = slot;
            interleaved = false;
            continue;
        }
        if !interleaved && in_next(row) {
            *mark = next;
            previous = Some(next);
            interleaved = true;
            continue;
        }
        let mut hasher = std::hash::BuildHasher::build_hasher(&LABEL_HASH);
        for column in &label_columns {
            std::hash::Hash::hash(column.value(row), &mut hasher);
        }
        let hash = std::hash::Hasher::finish(&hasher);
        let slot = match staged.find(hash, &label_columns, row) {
            Some(slot) => slot,
            None => {
                let labels: Vec<&str> = label_columns.iter().map(|c| c.value(row)).collect();
                let key = TrackKey::encode(&labels).map_err(|e| {
                    staged.truncate(first_new);
                    match e {
                        BadTrack::Label(bad) => ArchiveError::input(
                            id,
                            row,
                            Some(&decl.track[bad.component]),
                            bad.to_string(),
                        ),
                        other => ArchiveError::input(id, row, None, other.to_string()),
                    }
                })?;
                let labels = labels.into_iter().map(str::to_owned).collect();
                staged.add(hash, key, labels)
            }
        };
        *mark = slot;
        previous = Some(slot);
    }
    if let Err(e) = staged.order_new(first_new) {
        staged.truncate(first_new);
        return Err(ArchiveError::Internal(format!("stream {id:?}: {e}")));
    }
    // The axis never goes backwards within a track: each row is checked against the track's
    // staged rows, else what is durable (its last axis, or what a retirement passed).
    if let Some(axis) = &axis {
        let checked = stand(staged, durable, &marks);
        let mut refusal = None;
        for (row, &slot) in marks.iter().enumerate() {
            let value = axis.value(row);
            let track = &mut staged.slots[slot as usize];
            // `stand` set it for every track of the delivery.
            let last = track.pending.flatten();
            if value >= MAX_STORED {
                // Reserved, as the last position is: every span the archive reports is
                // half-open, `[from, to)`, and `to` must exist for the highest axis.
                refusal = Some(ArchiveError::input(
                    id,
                    row,
                    decl.axis.as_deref(),
                    format!(
                        "axis {value} is beyond the archive's range; axis values go up to {} (2^63 - 2: files store them as signed 64-bit integers, and the highest is reserved)",
                        MAX_STORED - 1
                    ),
                ));
                break;
            }
            if let Some(l) = last.filter(|l| value < *l) {
                refusal = Some(ArchiveError::input(
                    id,
                    row,
                    decl.axis.as_deref(),
                    format!(
                        "axis {value} goes backwards in track {} (it is at {l})",
                        track.key
                    ),
                ));
                break;
            }
            track.pending = Some(Some(value));
        }
        for slot in checked {
            staged.slots[slot as usize].pending = None;
        }
        if let Some(refusal) = refusal {
            staged.truncate(first_new);
            return Err(refusal);
        }
    }
    // Everything is valid: assign _seq in publish order and stage the delivery whole.
    let first_seq = staged.next_seq.unwrap_or(durable.next_seq);
    let seqs = UInt64Array::from_iter_values(first_seq..first_seq + n as u64);
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns.push(Arc::new(UInt64Array::from(positions.to_vec())));
    columns.push(Arc::new(seqs));
    let full = match RecordBatch::try_new(full_schema.clone(), columns) {
        Ok(full) => full,
        Err(e) => {
            staged.truncate(first_new);
            return Err(ArchiveError::input(id, 0, None, e.to_string()));
        }
    };
    for (row, &slot) in marks.iter().enumerate() {
        let track = &mut staged.slots[slot as usize];
        track.rows += 1;
        let p = positions[row];
        track.position = Some(track.position.map_or([p, p], |[lo, _]| [lo, p]));
        let q = first_seq + row as u64;
        track.seq = Some(track.seq.map_or([q, q], |[lo, _]| [lo, q]));
        if let Some(axis) = &axis {
            let a = axis.value(row);
            track.axis = Some(track.axis.map_or([a, a], |[lo, _]| [lo, a]));
        }
    }
    staged.batches.push((full, marks));
    staged.rows += n;
    staged.next_seq = Some(first_seq + n as u64);
    staged.last_position = Some(last.max(staged.last_position.unwrap_or(0)));
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::{Archive, StreamSpec};
    use arrow::datatypes::{Field, Schema};

    type Failed = Box<dyn std::error::Error>;

    fn key(label: &str) -> TrackKey {
        TrackKey::encode(&[label]).expect("a label")
    }

    /// Where `stand` puts each of `labels`' slots, then clears them as `stage` does.
    fn stood(staged: &mut Staged, durable: &StreamState, labels: &[&str]) -> Vec<Option<u64>> {
        let marks: Vec<u32> = labels.iter().map(|l| staged.by_key[&key(l)]).collect();
        let checked = stand(staged, durable, &marks);
        let out = marks
            .iter()
            .map(|&s| staged.slots[s as usize].pending.expect("set by stand"))
            .collect();
        for slot in checked {
            staged.slots[slot as usize].pending = None;
        }
        out
    }

    /// A barrier's rows ordered by track, column by column (track columns from their labels,
    /// fixed-width columns scattered, the rest gathered; on one thread or two),
    /// equal a plain join of the deliveries and a stable `take` by track: every column kind,
    /// nulls, slices of larger batches, and tracks whose slots are not in key order.
    #[test]
    fn rows_ordered_by_track_equal_a_join_and_take() -> Result<(), Failed> {
        use arrow::array::{BooleanArray, Decimal128Array, Int32Array, StringArray};
        let schema = Arc::new(Schema::new(vec![
            Field::new("host", DataType::Utf8, false),
            Field::new("x", DataType::UInt64, false),
            Field::new("note", DataType::Utf8, true),
            Field::new("ok", DataType::Boolean, false),
            Field::new("n", DataType::Int32, true),
            Field::new("price", DataType::Decimal128(10, 2), false),
            Field::new("v", DataType::Float64, false),
            Field::new(
                "span",
                DataType::Interval(arrow::datatypes::IntervalUnit::DayTime),
                false,
            ),
        ]));
        // Slots made in an order other than key order.
        let hosts = ["m", "c", "x", "a", "q", "b", "z"];
        let mut staged = Staged::default();
        for (i, h) in hosts.iter().enumerate() {
            staged.add(i as u64, key(h), vec![h.to_string()].into());
        }
        staged.order_new(0)?;
        let delivery = |rows: usize,
                        seed: usize,
                        nulls: bool|
         -> Result<(RecordBatch, Vec<u32>), Failed> {
            let slot = |r: usize| ((r * 5 + seed) % hosts.len()) as u32;
            let whole = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(StringArray::from_iter_values(
                        (0..rows + 3).map(|r| hosts[slot(r) as usize]),
                    )),
                    Arc::new(UInt64Array::from_iter_values(
                        (0..rows as u64 + 3).map(|r| r * 3 + seed as u64),
                    )),
                    Arc::new(StringArray::from_iter(
                        (0..rows + 3).map(|r| (r % 3 != 0).then(|| format!("n{r}"))),
                    )),
                    Arc::new(BooleanArray::from_iter(
                        (0..rows + 3).map(|r| Some(r % 2 == 0)),
                    )),
                    Arc::new(Int32Array::from_iter(
                        (0..rows as i32 + 3)
                            .map(|r| (!nulls || r % 7 != 0).then_some(r - seed as i32)),
                    )),
                    Arc::new(
                        Decimal128Array::from_iter_values((0..rows as i128 + 3).map(|r| r * 101))
                            .with_precision_and_scale(10, 2)?,
                    ),
                    Arc::new(arrow::array::Float64Array::from_iter_values(
                        (0..rows + 3).map(|r| r as f64 / 7.0 + seed as f64),
                    )),
                    Arc::new(arrow::array::IntervalDayTimeArray::from_iter_values(
                        (0..rows as i32 + 3)
                            .map(|r| arrow::datatypes::IntervalDayTime::new(r, seed as i32)),
                    )),
                ],
            )?;
            // A slice of a larger batch: offsets not at zero.
            Ok((whole.slice(3, rows), (3..rows + 3).map(slot).collect()))
        };
        for (sizes, nulls) in [
            (vec![5usize, 1, 17], true),
            (vec![40_000, 30_001], false),
            (vec![40_000, 30_001], true),
        ] {
            let batches: Vec<(RecordBatch, Vec<u32>)> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| delivery(n, i, nulls))
                .collect::<Result<_, _>>()?;
            for slot in &mut staged.slots {
                slot.rows = 0;
            }
            for (_, marks) in &batches {
                for &m in marks {
                    staged.slots[m as usize].rows += 1;
                }
            }
            let touched: Vec<u32> = staged.by_key.values().copied().collect();
            let mut start_of = vec![0u32; staged.slots.len()];
            let mut at = 0;
            for &t in &touched {
                start_of[t as usize] = at;
                at += staged.slots[t as usize].rows as u32;
            }
            let got = |two_threads| {
                by_track(
                    &schema,
                    &["host".to_string()],
                    &batches,
                    &touched,
                    &staged.slots,
                    &start_of,
                    two_threads,
                )
            };
            // The oracle: join, then a stable sort of the rows by their track's key.
            let joined = arrow::compute::concat_batches(&schema, batches.iter().map(|(b, _)| b))?;
            let marks: Vec<u32> = batches
                .iter()
                .flat_map(|(_, m)| m.iter().copied())
                .collect();
            let mut order: Vec<u32> = (0..marks.len() as u32).collect();
            order.sort_by_key(|&r| staged.slots[marks[r as usize] as usize].key.clone());
            let want = take_record_batch(&joined, &UInt32Array::from(order))?;
            for two_threads in [false, true] {
                assert_eq!(
                    got(two_threads)?,
                    want,
                    "sizes {sizes:?}, nulls {nulls}, two threads {two_threads}"
                );
            }
        }
        Ok(())
    }

    /// A slot a barrier sealed answers where it left the track, until it is forgotten; then
    /// the catalog answers, found by a search for a delivery of few tracks and by one walk
    /// for a delivery of many, alike.
    #[test]
    fn a_track_stands_where_it_was_sealed_until_forgotten_then_where_the_catalog_says() {
        let labels: Vec<String> = (0..40).map(|i| format!("t{i:02}")).collect();
        let mut durable = StreamState::new(StreamDecl {
            id: "s".into(),
            columns: Vec::new(),
            track: vec!["t".into()],
            axis: Some("x".into()),
            measured: Vec::new(),
            ladder: None,
        });
        let mut staged = Staged::default();
        for (i, label) in labels.iter().enumerate() {
            // Every other track is durable, at 10 × its index.
            if i % 2 == 0 {
                let track = TrackState {
                    labels: vec![label.clone()].into(),
                    last_axis: Some(10 * i as u64),
                    ..TrackState::default()
                };
                durable.tracks.insert(key(label), track);
            }
            staged.add(i as u64, key(label), vec![label.clone()].into());
        }
        staged.order_new(0).expect("distinct tracks");
        staged.slots[4].sealed = Some(99);
        assert_eq!(
            stood(&mut staged, &durable, &["t04", "t05"]),
            [Some(99), None]
        );
        staged.forget_sealed();
        assert_eq!(
            stood(&mut staged, &durable, &["t04", "t05"]),
            [Some(40), None]
        );
        // Every track: the walk, which must answer what a search answers.
        let all: Vec<&str> = labels.iter().map(String::as_str).collect();
        let walked = stood(&mut staged, &durable, &all);
        let searched: Vec<Option<u64>> = all
            .iter()
            .map(|l| stood(&mut staged, &durable, &[l])[0])
            .collect();
        assert_eq!(walked, searched);
        assert_eq!(walked[38], Some(380));
        assert_eq!(walked[39], None);
    }

    /// A barrier leaves its tracks' slots knowing where they stand; a record other than a
    /// barrier (here a whole retirement) makes the stream's staging forget it all.
    #[test]
    fn a_record_other_than_a_barrier_makes_staging_forget_where_it_sealed() -> Result<(), Failed> {
        let dir = tempfile::tempdir()?;
        let (schema, mut archive) = crate::archive::engine::testing::one_label_stream(dir.path())?;
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec!["a", "b"])),
                Arc::new(UInt64Array::from(vec![5, 7])),
            ],
        )?;
        archive.stage_batch("s", &batch, &[1, 2])?;
        archive.seal_all()?;
        let sealed = |archive: &Archive| -> Vec<Option<u64>> {
            archive.staged["s"].slots.iter().map(|t| t.sealed).collect()
        };
        assert_eq!(sealed(&archive), [Some(5), Some(7)]);
        archive.retire_track("s", &["a".to_owned()])?;
        assert_eq!(sealed(&archive), [None, None]);
        // Behind where track a was retired: refused, from the catalog.
        let behind = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["a"])),
                Arc::new(UInt64Array::from(vec![4])),
            ],
        )?;
        let refused = archive.stage_batch("s", &behind, &[3]).expect_err("behind");
        assert!(refused.to_string().contains("it is at 5"), "{refused}");
        Ok(())
    }

    /// Whatever way a delivery's new tracks join the key order (merged in when many, searched
    /// in when few, into an empty order or not), the order lists every slot under its own
    /// key, and a refused delivery leaves it as it was.
    #[test]
    fn new_tracks_join_the_key_order_merged_or_searched_and_leave_it_when_refused(
    ) -> Result<(), Failed> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("t", DataType::Utf8, false),
            Field::new("x", DataType::UInt64, false),
        ]));
        let spec = StreamSpec::dynamic("s", schema.clone(), vec!["t".into()], Some("x".into()))?;
        let decl = spec.decl()?;
        let full = crate::archive::format::spec::stored_schema(&decl)?;
        let durable = StreamState::new(decl.clone());
        let mut staged = Staged::default();
        let mut position = 0;
        let mut deliver = |staged: &mut Staged, labels: &[String], x: u64| {
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(StringArray::from_iter_values(labels)),
                    Arc::new(UInt64Array::from(vec![x; labels.len()])),
                ],
            )?;
            let positions: Vec<u64> = (position + 1..=position + labels.len() as u64).collect();
            let staged_rows = stage(&decl, &full, &durable, staged, &batch, &positions)?;
            position += labels.len() as u64;
            Ok::<usize, Box<dyn std::error::Error>>(staged_rows)
        };
        let ordered = |staged: &Staged| {
            let listed: Vec<(TrackKey, u32)> =
                staged.by_key.iter().map(|(k, &s)| (k.clone(), s)).collect();
            let mut expected: Vec<(TrackKey, u32)> = (0u32..)
                .zip(&staged.slots)
                .map(|(slot, t)| (t.key.clone(), slot))
                .collect();
            expected.sort();
            assert_eq!(listed, expected);
            listed.len()
        };
        let named = |range: std::ops::Range<u32>, step: u32| -> Vec<String> {
            range
                .rev()
                .step_by(step as usize)
                .map(|i| format!("t{i:05}"))
                .collect()
        };
        // Many into an empty order, out of key order; then a few beside many; then many
        // again into a full order, interleaved with known ones.
        deliver(&mut staged, &named(0..300, 3), 1)?;
        assert_eq!(ordered(&staged), 100);
        deliver(&mut staged, &named(1..5, 1), 2)?;
        assert_eq!(ordered(&staged), 103, "t00002 was known");
        let mut mixed = named(5..2_000, 2);
        mixed.extend(named(0..300, 3));
        deliver(&mut staged, &mixed, 3)?;
        let before = ordered(&staged);
        assert_eq!(before, 103 + 998 - 50, "50 of the odd ones were known");
        // A refused delivery of many new tracks (its last row goes backwards in its track):
        // none of them stays.
        let mut refused = named(10_000..12_000, 1);
        refused.push("t00002".into());
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from_iter_values(&refused)),
                Arc::new(UInt64Array::from_iter_values((0..refused.len()).map(|i| {
                    if i + 1 == refused.len() {
                        0
                    } else {
                        9
                    }
                }))),
            ],
        )?;
        let positions: Vec<u64> = (1_000_000..1_000_000 + refused.len() as u64).collect();
        let err = stage(&decl, &full, &durable, &mut staged, &batch, &positions)
            .expect_err("goes backwards");
        assert!(err.to_string().contains("goes backwards"), "{err}");
        assert_eq!(ordered(&staged), before);
        assert_eq!(staged.slots.len(), before);
        Ok(())
    }

    /// A delivery whose new slot names a track already staged (here a slot filed under the
    /// wrong hash, so the search cannot find it) is refused as an internal error and leaves
    /// the order and the slots as they were, whether its new tracks are merged or searched in.
    #[test]
    fn a_new_slot_naming_a_staged_track_is_refused_and_leaves_staging_as_it_was(
    ) -> Result<(), Failed> {
        let schema = Arc::new(Schema::new(vec![Field::new("t", DataType::Utf8, false)]));
        let spec = StreamSpec::dynamic("s", schema.clone(), vec!["t".into()], None)?;
        let decl = spec.decl()?;
        let full = crate::archive::format::spec::stored_schema(&decl)?;
        let durable = StreamState::new(decl.clone());
        for others in [0usize, 200] {
            let mut staged = Staged::default();
            for i in 0..20 {
                let label = format!("k{i:02}");
                staged.add(i, key(&label), vec![label.clone()].into());
            }
            staged.order_new(0).expect("distinct tracks");
            let mut labels: Vec<String> = (0..others).map(|i| format!("n{i:03}")).collect();
            labels.push("k07".into());
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![Arc::new(StringArray::from_iter_values(&labels))],
            )?;
            let positions: Vec<u64> = (1..=labels.len() as u64).collect();
            let err = stage(&decl, &full, &durable, &mut staged, &batch, &positions)
                .expect_err("a second slot for k07");
            assert!(
                matches!(err, ArchiveError::Internal(_))
                    && err.to_string().contains("names k07, already staged"),
                "{err}"
            );
            assert_eq!(staged.slots.len(), 20);
            let order: Vec<u32> = staged.by_key.values().copied().collect();
            assert_eq!(
                order,
                (0..20).collect::<Vec<u32>>(),
                "beside {others} new tracks"
            );
        }
        Ok(())
    }
}
