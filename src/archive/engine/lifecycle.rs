//! The lifecycle: retention (floors that only move forward), whole-track retirement,
//! compaction and manifest checkpoints.
//!
//! ```text
//! plan    ──► pure: state + declaration + now → Retire / CompactPlan (plan.rs)
//! retire  ──► ONE record (floors + dropped files) ─► fsync ─► delete dropped files
//! compact ──► job (no archive borrowed; may run on another thread): read + verify sources,
//!             write segments under .tmp/ ─► fsync ─► rename ─► fsync dir
//!         ──► finish: inputs still live and floors unmoved? ONE record (added + removed)
//!             ─► fsync ─► delete replaced files
//! checkpoint ──► new generation = snapshot of the live state ─► fsync ─► rename ─► drop old
//! ```
//!
//! A crash anywhere leaves the old set or the new set served: files a record never named are
//! quarantined at the next open, files a record removed are deleted by it.

use super::offload::OffloadReport;
use super::Archive;
use crate::archive::error::{ArchiveError, Result, StoredError};
use crate::archive::format::levels::{self, Cells};
use crate::archive::format::manifest::{
    Compact, LevelFloor, LevelRun, RawFloor, Record, Retire, SegmentFile, StreamDecl,
};
use crate::archive::format::physical::PACKED_FILE_VERSION;
use crate::archive::format::segment::{self, TrackRows};
use crate::archive::io::durable;
use crate::archive::io::faults::FaultPoint;
use crate::archive::io::segment::OpenSegment;
use crate::archive::io::storage::Disk;
use crate::archive::io::store::Store;
use crate::archive::layout::{STREAMS_DIR, TMP_DIR};
use crate::archive::plan::lifecycle::{
    plan_compaction, plan_retirement, plan_track_retirement, CompactPlan, Rewrite, Split,
};
use crate::contract::TrackKey;
use arrow::array::{Array, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::SchemaRef;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The live state's snapshot size, as [`Archive::checkpoint_due`] last measured it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LiveMeasured {
    /// The manifest generation measured.
    generation: u64,
    /// Its bytes when measured.
    at: u64,
    /// The bytes a snapshot of the live state took then.
    live: u64,
    /// [`CommitPoint::replacing`] then.
    ///
    /// [`CommitPoint::replacing`]: super::commit::CommitPoint::replacing
    replacing: u64,
}

/// A manifest this small is never checkpointed for being mostly history: replaying it costs
/// less than a millisecond.
pub const CHECKPOINT_FLOOR: u64 = 128 << 10;

/// Compactions one automatic [`Archive::compact`] runs per stream at most: enough to work off
/// a backlog of thousands of barriers' level runs (each round merges several into one).
pub const MAX_AUTO_ROUNDS: usize = 1024;

/// What one retirement did.
#[derive(Clone, Debug, Serialize)]
pub struct RetireReport {
    /// The stream.
    pub stream: String,
    /// Why (`sweep`, `explicit`).
    pub reason: String,
    /// Tracks whose floors moved.
    pub tracks: usize,
    /// Tracks retired whole.
    pub whole: usize,
    /// Files deleted.
    pub files_deleted: usize,
    /// Bytes deleted.
    pub bytes_deleted: u64,
    /// Data files that still held retired row groups beside live ones, rewritten without
    /// them ([`Rewrite::Retired`]), and their bytes.
    pub files_rewritten: usize,
    /// Bytes of the data files rewritten.
    pub bytes_rewritten: u64,
}

/// What one compaction did.
#[derive(Clone, Debug, Serialize)]
pub struct CompactReport {
    /// The stream.
    pub stream: String,
    /// Data files replaced and their bytes.
    pub files_in: usize,
    /// Bytes of the data files replaced.
    pub bytes_in: u64,
    /// Segments written.
    pub files_out: usize,
    /// Bytes of the segments written.
    pub bytes_out: u64,
    /// Level files merged.
    pub level_files_in: usize,
    /// Bytes of the level files merged.
    pub level_bytes_in: u64,
    /// Bytes of the merged level files (0 when every cell was retired).
    pub level_bytes_out: u64,
}

impl CompactReport {
    /// Several compactions' figures added up (the streams named once each, in order).
    pub fn total(reports: &[CompactReport]) -> CompactReport {
        let mut streams: Vec<&str> = Vec::new();
        for r in reports {
            if !streams.contains(&r.stream.as_str()) {
                streams.push(&r.stream);
            }
        }
        CompactReport {
            stream: streams.join(", "),
            files_in: reports.iter().map(|r| r.files_in).sum(),
            bytes_in: reports.iter().map(|r| r.bytes_in).sum(),
            files_out: reports.iter().map(|r| r.files_out).sum(),
            bytes_out: reports.iter().map(|r| r.bytes_out).sum(),
            level_files_in: reports.iter().map(|r| r.level_files_in).sum(),
            level_bytes_in: reports.iter().map(|r| r.level_bytes_in).sum(),
            level_bytes_out: reports.iter().map(|r| r.level_bytes_out).sum(),
        }
    }
}

/// What [`Archive::maintain`] did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Maintenance {
    /// Retirements committed.
    pub retired: Vec<RetireReport>,
    /// Compactions committed.
    pub compacted: Vec<CompactReport>,
    /// Files moved to the cold tier under the declared offload policies.
    pub offloaded: Vec<OffloadReport>,
    /// The generation a checkpoint started, if one did.
    pub checkpoint: Option<u64>,
}

/// Tracks' lifecycle state when a job was planned; the swap is refused if a rewritten track's
/// moved.
type Floors = BTreeMap<TrackKey, (RawFloor, Vec<LevelFloor>, bool)>;

fn floors_of(stream: &crate::archive::format::manifest::StreamState) -> Floors {
    stream
        .tracks
        .iter()
        .map(|(k, t)| (k.clone(), (t.raw, t.level_floors.clone(), t.whole)))
        .collect()
}

/// A compaction to carry out: everything it needs, owned, so it can run on another thread
/// while the archive keeps sealing. Obtained from [`Archive::plan_compaction`].
pub struct CompactionJob {
    root: PathBuf,
    decl: StreamDecl,
    schema: SchemaRef,
    plan: CompactPlan,
    files: BTreeMap<u64, SegmentFile>,
    level_files: Vec<SegmentFile>,
    /// The stream's first stored level: the merged run holds no level beneath it.
    levels_from: usize,
    floors: Floors,
    names: std::ops::Range<u64>,
    group_rows: usize,
    disk: Disk,
    store: Arc<Store>,
    /// A summary of deferred rows instead of a rewrite (format version 8).
    summary: Option<Summary>,
}

/// What a summary of a stream's deferred rows reads: the `_seq` span `[from, through)`, and
/// for each track holding such rows, in key order, its entries that may hold them in
/// publish order. The entries of every track lie in one list (`entries`, a file's place in
/// the job's `order` and the entry's index in it), track `t`'s at `tracks[t]..tracks[t + 1]`:
/// at 100,000 tracks of a few hundred barriers each that is tens of millions of entries, so
/// no list per track.
struct Summary {
    span: [u64; 2],
    /// The files holding deferred rows, in publish order (names of the job's `files`).
    order: Vec<u64>,
    /// Every cataloged track's labels, in key order.
    labels: Vec<crate::contract::Labels>,
    tracks: Vec<usize>,
    entries: Vec<(u32, u32)>,
}

/// The deferred rows a summary gathers before it folds them: the tracks' rows are copied
/// from the decoded row groups into one batch this long, then folded track by track.
const SUMMARY_FOLD_ROWS: usize = 1 << 16;

/// A summary's gathering of deferred rows (see [`CompactionJob::summarise`]).
struct SummaryFold<'a> {
    decl: &'a StreamDecl,
    schema: &'a SchemaRef,
    levels_from: usize,
    /// The decoded row groups the pending rows come from, with their `_seq` columns.
    sources: Vec<(RecordBatch, UInt64Array)>,
    /// Per file (its place in the summary's order), the row group last decoded and its
    /// place among `sources`.
    newest: Vec<Option<(usize, usize)>>,
    /// The gathered rows: (source, row), track after track.
    pending: Vec<(usize, usize)>,
    /// Each gathered track's labels and how many of the pending rows it holds, in order.
    lengths: Vec<(crate::contract::Labels, usize)>,
    /// Each folded track's labels (a one-row batch of its track columns) and cells, in key
    /// order.
    per_track: Vec<(RecordBatch, Vec<Cells>)>,
    position: [u64; 2],
    axis: [u64; 2],
}

impl SummaryFold<'_> {
    /// Keeps `batch`, row group `physical` of the file at `at` in the summary's order, as a
    /// source; answers its place.
    fn source(
        &mut self,
        at: usize,
        physical: usize,
        batch: RecordBatch,
        path: &str,
    ) -> Result<usize> {
        if batch.schema() != *self.schema {
            return Err(ArchiveError::Internal(format!(
                "stream {:?}: {path} was read in another schema",
                self.decl.id
            )));
        }
        let seq = batch
            .column_by_name(crate::archive::format::spec::SEQ_COLUMN)
            .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
            .cloned()
            .ok_or_else(|| {
                unreadable(&self.decl.id)(StoredError::corrupt(format!("{path}: no _seq column")))
            })?;
        let source = self.sources.len();
        self.sources.push((batch, seq));
        self.newest[at] = Some((physical, source));
        Ok(source)
    }

    /// Copies the pending rows out of their sources into one batch and folds each track's
    /// rows into its cells. Then gives back every source no later track can read (a file's
    /// row groups are read in order); their places stay, so every index stays valid.
    fn fold(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let sources: Vec<&RecordBatch> = self.sources.iter().map(|(b, _)| b).collect();
        let gathered = arrow::compute::interleave_record_batch(&sources, &self.pending)
            .map_err(|e| ArchiveError::Internal(e.to_string()))?;
        let axis_name = self.decl.axis.as_deref().unwrap_or_default();
        let mut offset = 0;
        for (labels, len) in self.lengths.drain(..) {
            // One track's rows in publish order: positions rise and the axis never falls.
            let rows = gathered.slice(offset, len);
            offset += len;
            for (name, span) in [
                (
                    crate::archive::format::spec::POSITION_COLUMN,
                    &mut self.position,
                ),
                (axis_name, &mut self.axis),
            ] {
                if let Some([lo, hi]) = u64_range(&rows, name) {
                    *span = [span[0].min(lo), span[1].max(hi)];
                }
            }
            let cells = levels::track_partials(self.decl, &rows, self.levels_from)?;
            let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
            let row = track_row(self.decl, &labels).map_err(|m| ArchiveError::Encode {
                stream: self.decl.id.clone(),
                message: m,
            })?;
            self.per_track.push((row, cells));
        }
        self.pending.clear();
        let newest: std::collections::BTreeSet<usize> =
            self.newest.iter().flatten().map(|&(_, s)| s).collect();
        for (at, (batch, seq)) in self.sources.iter_mut().enumerate() {
            if !newest.contains(&at) && batch.num_rows() > 0 {
                *batch = RecordBatch::new_empty(self.schema.clone());
                *seq = UInt64Array::from(Vec::<u64>::new());
            }
        }
        Ok(())
    }
}

/// A compaction's files, written and in place, not yet recorded. Hand it to
/// [`Archive::finish_compaction`].
pub struct CompactedFiles {
    stream: String,
    record: Compact,
    /// For a summary: the first deferred `_seq` it was planned on.
    summarised_from: Option<u64>,
    placed: Vec<PathBuf>,
    floors: Floors,
}

impl std::fmt::Debug for CompactionJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionJob")
            .field("stream", &self.decl.id)
            .field("inputs", &self.plan.inputs.len())
            .field("outputs", &self.plan.outputs.len())
            .field("level_inputs", &self.plan.level_inputs.len())
            .finish()
    }
}

impl std::fmt::Debug for CompactedFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactedFiles")
            .field("stream", &self.stream)
            .field("placed", &self.placed.len())
            .finish()
    }
}

fn unreadable(stream: &str) -> impl Fn(StoredError) -> ArchiveError + '_ {
    move |e| ArchiveError::Unreadable {
        stream: stream.to_owned(),
        kind: e.kind,
        message: format!("compaction could not read its input: {e}"),
    }
}

fn u64_range(batch: &RecordBatch, name: &str) -> Option<[u64; 2]> {
    let c = batch
        .column_by_name(name)?
        .as_any()
        .downcast_ref::<UInt64Array>()?;
    (!c.is_empty()).then(|| [c.value(0), c.value(c.len() - 1)])
}

impl CompactionJob {
    /// Units of work [`CompactionJob::run`] reports progress in (segments plus the level
    /// merge).
    pub fn steps(&self) -> usize {
        self.plan.outputs.len() + usize::from(!self.plan.level_inputs.is_empty())
    }

    /// The plan being carried out.
    pub fn plan(&self) -> &CompactPlan {
        &self.plan
    }

    /// Reads every source (digests verified), writes the segments and the merged level file
    /// under `.tmp/`, syncs them, renames them into place and syncs their directories.
    /// Touches no manifest: until [`Archive::finish_compaction`] records them, a crash leaves
    /// them as unrecorded files the next open quarantines. `progress(done, total)` after each
    /// step.
    pub fn run(self, mut progress: impl FnMut(usize, usize)) -> Result<CompactedFiles> {
        if self.summary.is_some() {
            return self.summarise(progress);
        }
        let id = self.decl.id.clone();
        let mut placer = self.placer(&id);
        let mut added = Vec::new();
        let mut added_levels = Vec::new();
        let total = self.steps();
        let mut done = 0;
        // Data files: each packs its tracks in key order into row groups of at most
        // `group_rows` rows (a track's rows are cut into pieces of at most that many, and
        // consecutive pieces share a group). Streamed: one source group read at a time, a
        // track's rows cut as they reach a group's worth, each row group written as it fills.
        let axis = self.decl.axis.clone();
        let cap = self.group_rows.max(1);
        let mut open = crate::archive::io::segment::Opened::new(&self.store, self.schema.clone());
        // Per place in a track's sources, the file the track before found there: a fleet's
        // tracks read the same inputs in the same order, so most lookups are a comparison.
        let mut guesses: Vec<(u64, &SegmentFile)> = Vec::new();
        for out in &self.plan.outputs {
            // The newest barrier, and its time, among the files the output's rows come from,
            // gathered as the sources are looked up.
            let (mut sealed_at, mut barrier) = (0u64, 0u64);
            let mut file = placer.start("rows", &self.schema, true)?;
            let mut gather = Gather::new(cap, self.schema.clone(), axis.clone(), &self.decl);
            for segment in &out.segments {
                // The track's rows: each source entry's range of its decoded row group.
                let mut ranges = Vec::with_capacity(segment.sources.len());
                for (j, &(name, group)) in segment.sources.iter().enumerate() {
                    let source = match guesses.get(j) {
                        Some(&(guessed, file)) if guessed == name => file,
                        _ => {
                            let file = self.files.get(&name).ok_or_else(|| {
                                ArchiveError::Internal(format!(
                                    "stream {id:?}: planned source file {name} is unknown"
                                ))
                            })?;
                            match guesses.get_mut(j) {
                                Some(guess) => *guess = (name, file),
                                None => guesses.push((name, file)),
                            }
                            file
                        }
                    };
                    sealed_at = sealed_at.max(source.sealed_at_ns);
                    barrier = barrier.max(source.barrier);
                    let entry = source.groups.get(group).ok_or_else(|| {
                        ArchiveError::Internal(format!(
                            "stream {id:?}: planned entry {group} of file {name} is unknown"
                        ))
                    })?;
                    let rows = entry.rows as usize;
                    // The row group this entry lies in is most often the one the track before
                    // it read of this file: then nothing is decoded or looked up again.
                    let physical = entry.physical(group);
                    let at = match gather.holds((name, physical)) {
                        Some(at) => at,
                        None => {
                            let batch = open
                                .whole_group(name, source, group)
                                .map_err(unreadable(&id))?;
                            gather.source((name, physical), batch)
                        }
                    };
                    let row = entry.slice.map_or(0, |s| s.row as usize);
                    // The output's track columns are written from the track's labels, not
                    // copied: an entry recorded beside its rows (format 10 and before) must
                    // name the track its rows hold (one read from its rows always does).
                    if source.format != Some(crate::archive::format::manifest::ROWS_FORMAT) {
                        gather
                            .check_labels(at, row, rows, &segment.track)
                            .map_err(|why| {
                                unreadable(&id)(StoredError::corrupt(format!(
                                    "file {} entry {group}: {why}",
                                    source.path
                                )))
                            })?;
                    }
                    ranges.push((at, row, rows));
                }
                gather.track(&segment.track, &ranges, &mut file.writer)?;
            }
            gather.flush(&mut file.writer)?;
            added.push(placer.finish(file, barrier, sealed_at)?);
            done += 1;
            progress(done, total);
        }
        drop(open);
        // Levels: the merged runs become one run (one file of every level, or tables).
        if !self.plan.level_inputs.is_empty() {
            added_levels = self.write_level_run(&mut placer)?;
            done += 1;
            progress(done, total);
        }
        let placed = placer.place()?;
        Ok(CompactedFiles {
            stream: id.clone(),
            record: Compact {
                stream: id,
                next_name: self.names.end,
                added,
                removed: self.plan.inputs.clone(),
                added_levels,
                removed_levels: self.plan.level_inputs.clone(),
                levels_summary: None,
            },
            summarised_from: None,
            placed,
            // The swap is refused if a rewritten track's floors move before it is recorded
            // (new tracks, and other tracks' floors, do not matter to it).
            floors: {
                let rewritten: std::collections::BTreeSet<TrackKey> = self
                    .plan
                    .outputs
                    .iter()
                    .flat_map(|o| &o.segments)
                    .filter_map(|s| TrackKey::encode(&s.track).ok())
                    .collect();
                self.floors
                    .into_iter()
                    .filter(|(key, _)| rewritten.contains(key))
                    .collect()
            },
        })
    }

    /// Writes the summary of the stream's deferred rows (format version 8): each track's rows
    /// of `_seq` in the span, read in publish order (digests verified), folded into the
    /// cells of every stored level, written as one partial level file exactly as a barrier
    /// writes one (row group i holds level `levels_from + i`).
    ///
    /// Each row group is decoded once; the tracks' rows are copied out of the decoded groups
    /// by index into one batch of about [`SUMMARY_FOLD_ROWS`] rows, then folded track by
    /// track. It costs what the rows cost, not what the tracks times the files cost: a fleet's
    /// barrier holds a row or two of each track. Holds the cells, one decoded row group per
    /// file and one gathered batch at a time.
    fn summarise(self, mut progress: impl FnMut(usize, usize)) -> Result<CompactedFiles> {
        let id = self.decl.id.clone();
        let summary = self
            .summary
            .as_ref()
            .ok_or_else(|| ArchiveError::Internal("a summary job without a summary".into()))?;
        let [from, through] = summary.span;
        let files = summary
            .order
            .iter()
            .map(|name| {
                self.files.get(name).ok_or_else(|| {
                    ArchiveError::Internal(format!(
                        "stream {id:?}: a summarised file {name} is unknown"
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let sealed_at = files.iter().map(|f| f.sealed_at_ns).max().unwrap_or(0);
        let barrier = files.iter().map(|f| f.barrier).max().unwrap_or(0);
        // Only the columns the cells and the file's bounds are made of are decoded: the
        // track's label columns are a fleet's widest, and its labels are the catalog's.
        let axis_name = self.decl.axis.as_deref().unwrap_or_default();
        let read: Vec<usize> = (0..self.schema.fields().len())
            .filter(|&i| {
                let name = self.schema.field(i).name();
                name == axis_name
                    || name == crate::archive::format::spec::SEQ_COLUMN
                    || name == crate::archive::format::spec::POSITION_COLUMN
                    || self.decl.measured.contains(name)
            })
            .collect();
        let schema = Arc::new(
            self.schema
                .project(&read)
                .map_err(|e| ArchiveError::Internal(e.to_string()))?,
        );
        let mut open = crate::archive::io::segment::Opened::projected(&self.store, schema.clone());
        let mut fold = SummaryFold {
            decl: &self.decl,
            schema: &schema,
            levels_from: self.levels_from,
            sources: Vec::new(),
            newest: vec![None; files.len()],
            pending: Vec::new(),
            lengths: Vec::new(),
            per_track: Vec::with_capacity(summary.tracks.len().saturating_sub(1)),
            position: [u64::MAX, 0],
            axis: [u64::MAX, 0],
        };
        for t in 0..summary.tracks.len().saturating_sub(1) {
            let start = fold.pending.len();
            for &(at, group) in &summary.entries[summary.tracks[t]..summary.tracks[t + 1]] {
                let (at, group) = (at as usize, group as usize);
                let file = files.get(at).ok_or_else(|| {
                    ArchiveError::Internal(format!("stream {id:?}: a summary names file {at}"))
                })?;
                let entry = file.groups.get(group).ok_or_else(|| {
                    ArchiveError::Internal(format!(
                        "stream {id:?}: a summary names entry {group} of file {}",
                        file.name
                    ))
                })?;
                let physical = entry.physical(group);
                let source = match fold.newest[at] {
                    Some((held, source)) if held == physical => source,
                    _ => {
                        let batch = open
                            .whole_group(file.name, file, group)
                            .map_err(unreadable(&id))?;
                        fold.source(at, physical, batch, &file.path)?
                    }
                };
                let first = entry.slice.map_or(0, |s| s.row as usize);
                let (_, seq) = &fold.sources[source];
                let rows = first..first + entry.rows as usize;
                if rows.end > seq.len() {
                    return Err(unreadable(&id)(StoredError::corrupt(format!(
                        "{}: entry {group} lies past the {} rows of its row group",
                        file.path,
                        seq.len()
                    ))));
                }
                let values = seq.values();
                fold.pending.extend(
                    rows.filter(|&row| (from..through).contains(&values[row]))
                        .map(|row| (source, row)),
                );
            }
            if fold.pending.len() > start {
                let labels = summary.labels.get(t).ok_or_else(|| {
                    ArchiveError::Internal(format!("stream {id:?}: a summary names track {t}"))
                })?;
                fold.lengths
                    .push((labels.clone(), fold.pending.len() - start));
            }
            if fold.pending.len() >= SUMMARY_FOLD_ROWS {
                fold.fold()?;
            }
        }
        fold.fold()?;
        let SummaryFold {
            per_track,
            position,
            axis,
            ..
        } = fold;
        drop(open);
        let mut placer = self.placer(&id);
        let bounds = [position, axis, [from, through - 1]];
        let mut added_levels = Vec::new();
        let schema =
            levels::level_schema(&self.decl).map_err(|m| ArchiveError::declaration(&id, m))?;
        if let Some(groups) =
            levels::partial_groups(&self.decl, &schema, &per_track, self.levels_from, bounds)?
        {
            let mut file = placer.write("levels", &schema, &groups, barrier, sealed_at)?;
            file.first_level = (self.levels_from > 0).then_some(self.levels_from as u8);
            added_levels.push(file);
        }
        progress(1, 1);
        let placed = placer.place()?;
        Ok(CompactedFiles {
            stream: id.clone(),
            record: Compact {
                stream: id,
                next_name: self.names.end,
                added: Vec::new(),
                removed: Vec::new(),
                added_levels,
                removed_levels: Vec::new(),
                levels_summary: Some([from, through]),
            },
            summarised_from: Some(from),
            placed,
            floors: Floors::new(),
        })
    }

    /// Merges the input runs into one run: for each level, every source's cells of each
    /// track folded in publish order (cells whole), retired cells (beneath a level floor, or
    /// of a track retired whole) dropped, tracks in key order, each track's cells by cell then
    /// field. Written as level tables (one file per level, row groups packing tracks up to
    /// [`levels::TABLE_GROUP_ROWS`] cells) when the plan says so, else as one file whose row
    /// group k holds level k. Holds one decoded row group per source and one track's cells at
    /// a time, besides the output.
    fn write_level_run(&self, out: &mut Placer<'_>) -> Result<Vec<SegmentFile>> {
        let id = &self.decl.id;
        let fail = |m: String| ArchiveError::Encode {
            stream: id.clone(),
            message: format!("level merge: {m}"),
        };
        let Some(ladder) = self.decl.ladder else {
            return Ok(Vec::new());
        };
        let schema = levels::level_schema(&self.decl).map_err(|e| fail(e.into()))?;
        let opened: Vec<OpenSegment<'_>> = self
            .level_files
            .iter()
            .map(|f| OpenSegment::open(&self.store, f).map_err(unreadable(id)))
            .collect::<Result<_>>()?;
        let read = |file: usize, group: usize| -> Result<BTreeMap<TrackKey, Cells>> {
            let batch = opened[file]
                .read_group(group, &schema)
                .map_err(unreadable(id))?;
            levels::decode_level(&self.decl, &batch).map_err(|m| {
                unreadable(id)(StoredError::corrupt(format!(
                    "{}: group {group}: {m}",
                    self.level_files[file].path
                )))
            })
        };
        let (mut sealed_at, mut barrier) = (0u64, 0u64);
        for f in &self.level_files {
            sealed_at = sealed_at.max(f.sealed_at_ns);
            barrier = barrier.max(f.barrier);
        }
        let levels_n = ladder.levels as usize;
        let tier = self.plan.level_tier;
        if !self.plan.level_tables {
            // One file of every level, when every level keeps a cell (a file's group k must
            // be level k); else the tables below.
            let mut groups = Vec::with_capacity(levels_n);
            let mut lasts = Vec::with_capacity(levels_n);
            for k in self.levels_from..levels_n {
                let (mut g, mut l) = (Vec::new(), Vec::new());
                self.merge_level(k, usize::MAX, &schema, &read, &mut |group, last| {
                    g.push(group);
                    l.push(last);
                    Ok(())
                })?;
                if g.len() != 1 {
                    break;
                }
                groups.append(&mut g);
                lasts.append(&mut l);
            }
            if groups.len() == levels_n - self.levels_from {
                let mut file = out.write("levels", &schema, &groups, barrier, sealed_at)?;
                for (entry, last) in std::sync::Arc::make_mut(&mut file.groups)
                    .iter_mut()
                    .zip(lasts)
                {
                    entry.last_track = Some(last);
                }
                file.first_level = (self.levels_from > 0).then_some(self.levels_from as u8);
                file.run = Some(LevelRun {
                    id: file.name,
                    tier,
                    level: None,
                });
                return Ok(vec![file]);
            }
        }
        let mut tables: Vec<SegmentFile> = Vec::new();
        for k in self.levels_from..levels_n {
            // Streamed: each row group is written as soon as it fills; a level that keeps no
            // cell gets no file.
            let mut placing: Option<Placing> = None;
            let mut lasts = Vec::new();
            self.merge_level(
                k,
                levels::TABLE_GROUP_ROWS,
                &schema,
                &read,
                &mut |group, last| {
                    let file = match &mut placing {
                        Some(file) => file,
                        None => placing.insert(out.start(
                            &format!("levels/level={k}"),
                            &schema,
                            false,
                        )?),
                    };
                    file.writer.push(&group)?;
                    lasts.push(last);
                    Ok(())
                },
            )?;
            let Some(placing) = placing else {
                continue;
            };
            let mut file = out.finish(placing, barrier, sealed_at)?;
            for (entry, last) in std::sync::Arc::make_mut(&mut file.groups)
                .iter_mut()
                .zip(lasts)
            {
                entry.last_track = Some(last);
            }
            file.run = Some(LevelRun {
                id: tables.first().map_or(file.name, |t| t.name),
                tier,
                level: Some(k as u8),
            });
            tables.push(file);
        }
        Ok(tables)
    }

    /// Level `k` of the merged run, handed to `emit` as row groups of at most `cap` cells
    /// (whole tracks packed, a longer track split), each with its last track, as each fills.
    fn merge_level(
        &self,
        k: usize,
        cap: usize,
        schema: &SchemaRef,
        read: &ReadGroup<'_>,
        emit: &mut dyn FnMut(TrackRows, Vec<String>) -> Result<()>,
    ) -> Result<()> {
        let fail = |m: String| ArchiveError::Encode {
            stream: self.decl.id.clone(),
            message: format!("level merge: {m}"),
        };
        let w = self.decl.ladder.map_or(1, |l| l.width(k));
        let mut sources = Vec::new();
        let mut bounds: Option<([u64; 2], [u64; 2])> = None;
        for (file, group) in levels::level_groups(&self.level_files, k) {
            let entry = &self.level_files[file].groups[group];
            let widen = |a: [u64; 2], b: [u64; 2]| [a[0].min(b[0]), a[1].max(b[1])];
            bounds = Some(match bounds {
                None => (entry.position, entry.seq),
                Some((p, s)) => (widen(p, entry.position), widen(s, entry.seq)),
            });
            match sources.last_mut() {
                Some(TrackStream {
                    file: f, groups, ..
                }) if *f == file => groups.push_back(group),
                _ => sources.push(TrackStream {
                    file,
                    groups: std::collections::VecDeque::from([group]),
                    pending: std::collections::VecDeque::new(),
                }),
            }
        }
        let (position, seq) = bounds.unwrap_or(([0, 0], [0, 0]));
        let mut table = TableGroups::new(position, seq, w, cap);
        loop {
            let mut next: Option<TrackKey> = None;
            for source in &mut sources {
                if let Some(key) = source.peek(read)? {
                    if next.as_ref().is_none_or(|n| key < n) {
                        next = Some(key.clone());
                    }
                }
            }
            let Some(key) = next else { break };
            let mut cells = Cells::new();
            for source in &mut sources {
                for (at, bucket) in source.take(&key, read)? {
                    levels::fold_into(&mut cells, at, bucket);
                }
            }
            let (floor, whole) = match self.floors.get(&key) {
                Some((_, levels, whole)) => (levels.get(k).map_or(0, |f| f.axis), *whole),
                None => (0, false),
            };
            if whole {
                continue;
            }
            cells.retain(|&(_, cell), _| cell.saturating_mul(w) >= floor);
            if cells.is_empty() {
                continue;
            }
            let labels = key.labels();
            let track_row = track_row(&self.decl, &labels).map_err(fail)?;
            let batch = levels::encode_cells(
                &self.decl,
                schema,
                k,
                &track_row,
                &cells,
                levels::CellOrder::CellThenField,
            )?;
            table.push(&labels, &batch).map_err(fail)?;
            for (group, last) in table.ready() {
                emit(group, last)?;
            }
        }
        for (group, last) in table.finish().map_err(fail)? {
            emit(group, last)?;
        }
        Ok(())
    }
}

/// One source of a level merge: its row groups of one level, read one at a time, yielding
/// whole tracks in key order (a track a table split across groups is joined again).
struct TrackStream {
    file: usize,
    groups: std::collections::VecDeque<usize>,
    pending: std::collections::VecDeque<(TrackKey, Cells)>,
}

type ReadGroup<'r> = dyn Fn(usize, usize) -> Result<BTreeMap<TrackKey, Cells>> + 'r;

impl TrackStream {
    fn fill(&mut self, read: &ReadGroup<'_>) -> Result<()> {
        while self.pending.is_empty() {
            let Some(group) = self.groups.pop_front() else {
                return Ok(());
            };
            self.pending.extend(read(self.file, group)?);
        }
        Ok(())
    }

    fn peek(&mut self, read: &ReadGroup<'_>) -> Result<Option<&TrackKey>> {
        self.fill(read)?;
        Ok(self.pending.front().map(|(k, _)| k))
    }

    /// The cells of `key` if it is the next track, else none.
    fn take(&mut self, key: &TrackKey, read: &ReadGroup<'_>) -> Result<Cells> {
        let mut cells = Cells::new();
        loop {
            self.fill(read)?;
            match self.pending.front() {
                Some((next, _)) if next == key => {
                    let (_, more) = self.pending.pop_front().expect("peeked");
                    for (at, bucket) in more {
                        levels::fold_into(&mut cells, at, bucket);
                    }
                }
                _ => return Ok(cells),
            }
        }
    }
}

/// A level table's row groups as they fill: whole tracks packed until a group holds `cap`
/// cells, a longer track split across groups.
struct TableGroups {
    position: [u64; 2],
    seq: [u64; 2],
    width: u64,
    cap: usize,
    /// Groups cut and not yet handed over, each with its last track.
    groups: Vec<(TrackRows, Vec<String>)>,
    parts: Vec<RecordBatch>,
    rows: usize,
    first: Option<Vec<String>>,
    last: Vec<String>,
    cells: [u64; 2],
}

impl TableGroups {
    fn new(position: [u64; 2], seq: [u64; 2], width: u64, cap: usize) -> Self {
        TableGroups {
            position,
            seq,
            width,
            cap,
            groups: Vec::new(),
            parts: Vec::new(),
            rows: 0,
            first: None,
            last: Vec::new(),
            cells: [u64::MAX, 0],
        }
    }

    /// Adds one track's cells (ordered by cell).
    fn push(&mut self, labels: &[&str], batch: &RecordBatch) -> std::result::Result<(), String> {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let len = (self.cap - self.rows).min(batch.num_rows() - offset);
            let slice = batch.slice(offset, len);
            if let Some([lo, hi]) = u64_range(&slice, "cell") {
                self.cells = [self.cells[0].min(lo), self.cells[1].max(hi)];
            }
            let owned: Vec<String> = labels.iter().map(|l| (*l).to_owned()).collect();
            self.first.get_or_insert_with(|| owned.clone());
            self.last = owned;
            self.parts.push(slice);
            self.rows += len;
            offset += len;
            if self.rows == self.cap {
                self.cut()?;
            }
        }
        Ok(())
    }

    fn cut(&mut self) -> std::result::Result<(), String> {
        let Some(first) = self.parts.first() else {
            return Ok(());
        };
        let batch = arrow::compute::concat_batches(&first.schema(), &self.parts)
            .map_err(|e| e.to_string())?;
        let axis = [
            self.cells[0].saturating_mul(self.width),
            self.cells[1]
                .saturating_add(1)
                .saturating_mul(self.width)
                .saturating_sub(1),
        ];
        let group = TrackRows {
            labels: self.first.take().unwrap_or_default().into(),
            batch: batch.into(),
            position: self.position,
            axis: Some(axis),
            seq: self.seq,
        };
        self.groups.push((group, std::mem::take(&mut self.last)));
        self.parts.clear();
        self.rows = 0;
        self.cells = [u64::MAX, 0];
        Ok(())
    }

    /// The groups cut so far, with their last tracks, handed over.
    fn ready(&mut self) -> Vec<(TrackRows, Vec<String>)> {
        std::mem::take(&mut self.groups)
    }

    /// Cuts the last group and hands over what is left.
    fn finish(mut self) -> std::result::Result<Vec<(TrackRows, Vec<String>)>, String> {
        self.cut()?;
        Ok(self.groups)
    }
}

/// Writes a compaction's files under `.tmp/` (synced) with the names reserved for it, and
/// remembers where each goes.
struct Placer<'a> {
    root: &'a Path,
    disk: &'a Disk,
    stream: &'a str,
    names: std::ops::Range<u64>,
    staged: Vec<(PathBuf, PathBuf)>,
}

impl CompactionJob {
    /// Where this job's output files are written and named (the names it reserved).
    fn placer<'a>(&'a self, stream: &'a str) -> Placer<'a> {
        Placer {
            root: &self.root,
            disk: &self.disk,
            stream,
            names: self.names.clone(),
            staged: Vec::new(),
        }
    }
}

/// A file a [`Placer`] is writing.
struct Placing {
    writer: crate::archive::io::segment::Writer,
    name: u64,
    kind: String,
    at: PathBuf,
}

/// A compacted file's row groups as they are gathered: each track's rows taken, by index,
/// from the decoded row groups of its sources, and copied once into a row group of at most
/// `cap` rows (`interleave`), which is written as it fills. A track's rows are cut into
/// pieces of at most `cap` rows, and consecutive pieces share a row group while it stays
/// within `cap` rows (the layout of `docs/format.md`, "Version 7"). What a track costs
/// besides its rows is its labels and one entry per piece.
struct Gather {
    cap: usize,
    schema: SchemaRef,
    axis: Option<String>,
    stream: String,
    /// Per column of `schema`, which of the track's labels it holds, when it holds them as
    /// text: such a column is written from the pieces' labels, a run each, not gathered.
    label_of: Vec<Option<usize>>,
    /// The decoded row groups the pending rows come from, each once.
    sources: Vec<RecordBatch>,
    /// Per source file, the newest of its row groups among `sources`: (index there, row
    /// group). Looked up once per source of every track (a fleet's run: once per slice).
    last: std::collections::HashMap<u64, (usize, usize), ahash::RandomState>,
    /// The pending rows: (source, row).
    indices: Vec<(usize, usize)>,
    /// The pending pieces: labels and rows, in order.
    pieces: Vec<(crate::contract::Labels, usize)>,
    /// The sources of the track being added.
    pinned: Vec<usize>,
}

impl Gather {
    fn new(cap: usize, schema: SchemaRef, axis: Option<String>, decl: &StreamDecl) -> Gather {
        let label_of = schema
            .fields()
            .iter()
            .map(|f| {
                decl.track
                    .iter()
                    .position(|t| t == f.name())
                    .filter(|_| *f.data_type() == arrow::datatypes::DataType::Utf8)
            })
            .collect();
        Gather {
            cap,
            schema,
            axis,
            stream: decl.id.clone(),
            label_of,
            sources: Vec::new(),
            last: Default::default(),
            indices: Vec::new(),
            pieces: Vec::new(),
            pinned: Vec::new(),
        }
    }

    /// Checks that rows `row .. row + rows` of source `at` are of the track `labels`, by
    /// their first and last row's track columns of text (those written from the labels).
    fn check_labels(
        &self,
        at: usize,
        row: usize,
        rows: usize,
        labels: &crate::contract::Labels,
    ) -> std::result::Result<(), String> {
        let batch = self
            .sources
            .get(at)
            .ok_or_else(|| format!("no decoded source {at}"))?;
        let last = (row + rows)
            .checked_sub(1)
            .filter(|&last| rows > 0 && last < batch.num_rows())
            .ok_or_else(|| {
                format!(
                    "rows {row}..{} lie outside its row group of {} rows",
                    row + rows,
                    batch.num_rows()
                )
            })?;
        for (c, k) in self.label_of.iter().enumerate() {
            let Some(k) = k else { continue };
            let column = batch
                .column(c)
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| format!("track column {c} is not text"))?;
            for r in [row, last] {
                if column.is_null(r) || column.value(r) != labels[*k] {
                    return Err(format!(
                        "it names track {labels:?}, and its row {r} holds {:?}",
                        column.is_valid(r).then(|| column.value(r))
                    ));
                }
            }
        }
        Ok(())
    }

    /// The index among the sources of row group `group.1` of file `group.0`, when it is
    /// the newest of that file's.
    fn holds(&self, group: (u64, usize)) -> Option<usize> {
        self.last
            .get(&group.0)
            .filter(|(_, physical)| *physical == group.1)
            .map(|(at, _)| *at)
    }

    /// The index among the sources of `batch`, row group `group.1` of file `group.0`.
    fn source(&mut self, group: (u64, usize), batch: RecordBatch) -> usize {
        match self.last.get(&group.0) {
            Some((at, physical)) if *physical == group.1 => *at,
            _ => {
                let at = self.sources.len();
                self.sources.push(batch);
                self.last.insert(group.0, (at, group.1));
                at
            }
        }
    }

    /// Adds a track: its rows are `(source, first row, rows)` ranges, in publish order.
    fn track(
        &mut self,
        labels: &crate::contract::Labels,
        ranges: &[(usize, usize, usize)],
        writer: &mut crate::archive::io::segment::Writer,
    ) -> Result<()> {
        self.pinned.clear();
        self.pinned.extend(ranges.iter().map(|r| r.0));
        let total: usize = ranges.iter().map(|r| r.2).sum();
        let mut rows = ranges
            .iter()
            .flat_map(|&(source, first, len)| (first..first + len).map(move |row| (source, row)));
        let mut left = total;
        while left > 0 {
            let piece = left.min(self.cap);
            if self.indices.len() + piece > self.cap {
                self.flush(writer)?;
            }
            self.indices.extend(rows.by_ref().take(piece));
            self.pieces.push((labels.clone(), piece));
            left -= piece;
        }
        Ok(())
    }

    /// Writes the pending rows as one row group.
    fn flush(&mut self, writer: &mut crate::archive::io::segment::Writer) -> Result<()> {
        if self.pieces.is_empty() {
            return Ok(());
        }
        let encode = |e: arrow::error::ArrowError| ArchiveError::Encode {
            stream: self.stream.clone(),
            message: e.to_string(),
        };
        // Each column gathered from the sources, but a track column of text: its rows are the
        // pieces' labels, a run each (gathering them copied every row's text).
        let rows = self.indices.len();
        let mut columns = Vec::with_capacity(self.schema.fields().len());
        for (c, label) in self.label_of.iter().enumerate() {
            let column: arrow::array::ArrayRef = match label {
                Some(k) => {
                    let bytes: usize = self.pieces.iter().map(|(l, n)| l[*k].len() * n).sum();
                    let mut built = arrow::array::StringBuilder::with_capacity(rows, bytes);
                    for (labels, n) in &self.pieces {
                        for _ in 0..*n {
                            built.append_value(&labels[*k]);
                        }
                    }
                    Arc::new(built.finish())
                }
                None => {
                    let parts: Vec<&dyn Array> =
                        self.sources.iter().map(|b| b.column(c).as_ref()).collect();
                    arrow::compute::interleave(&parts, &self.indices).map_err(encode)?
                }
            };
            columns.push(column);
        }
        let batch = RecordBatch::try_new(self.schema.clone(), columns).map_err(encode)?;
        if self.sources.iter().any(|b| b.schema() != self.schema) {
            return Err(ArchiveError::Internal(format!(
                "stream {:?}: gathered rows of another schema",
                self.stream
            )));
        }
        let whole = Arc::new(batch);
        let column = |name: &str| {
            whole
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
                .cloned()
        };
        let position = column(crate::archive::format::spec::POSITION_COLUMN);
        let seq = column(crate::archive::format::spec::SEQ_COLUMN);
        let axis = self.axis.as_deref().map(column);
        let range = |c: &Option<UInt64Array>, at: usize, len: usize| {
            c.as_ref()
                .filter(|c| c.len() >= at + len && len > 0)
                .map_or([0, 0], |c| [c.value(at), c.value(at + len - 1)])
        };
        let mut offset = 0;
        let mut pieces = Vec::with_capacity(self.pieces.len());
        for (labels, len) in self.pieces.drain(..) {
            pieces.push(TrackRows {
                labels,
                position: range(&position, offset, len),
                seq: range(&seq, offset, len),
                axis: axis.as_ref().map(|a| range(a, offset, len)),
                batch: segment::TrackBatch::Range {
                    whole: whole.clone(),
                    offset,
                    len,
                },
            });
            offset += len;
        }
        writer.push_packed(&pieces)?;
        self.indices.clear();
        // The sources a later piece may still read stay: the newest row group of each file,
        // and every one the track being added reads (it may span several row groups). The
        // others give their rows back; their places stay, so every index stays valid.
        let keep: std::collections::BTreeSet<usize> = self
            .last
            .values()
            .map(|(at, _)| *at)
            .chain(self.pinned.iter().copied())
            .collect();
        for (at, source) in self.sources.iter_mut().enumerate() {
            if !keep.contains(&at) && source.num_rows() > 0 {
                *source = RecordBatch::new_empty(self.schema.clone());
            }
        }
        Ok(())
    }
}

impl Placer<'_> {
    /// Renames every finished file from `.tmp/` into place and syncs the directories they
    /// went into (each once); answers where they are. No record names them yet.
    fn place(&self) -> Result<Vec<PathBuf>> {
        self.disk.reached(FaultPoint::AfterDataWrite);
        let mut dirs = std::collections::BTreeSet::new();
        let mut placed = Vec::with_capacity(self.staged.len());
        for (from, to) in &self.staged {
            durable::rename(self.disk, from, to)?;
            if let Some(parent) = to.parent() {
                dirs.insert(parent.to_path_buf());
            }
            placed.push(to.clone());
        }
        for dir in &dirs {
            durable::sync_dir(self.disk, dir)?;
        }
        self.disk.reached(FaultPoint::AfterDataRename);
        Ok(placed)
    }

    /// Starts the next reserved name under `.tmp/`, bound for `streams/<id>/<kind>/`: a
    /// packed data file (format version 6 layout) when `packed`, else one row group per
    /// entry.
    fn start(&mut self, kind: &str, schema: &SchemaRef, packed: bool) -> Result<Placing> {
        let name = self.names.next().ok_or_else(|| {
            ArchiveError::Internal(format!(
                "a compaction of stream {:?} ran out of the names it reserved",
                self.stream
            ))
        })?;
        let at = self.root.join(TMP_DIR).join(segment::data_file_name(name));
        let writer = crate::archive::io::segment::Writer::create(
            self.disk,
            &at,
            self.stream,
            schema,
            name,
            packed,
        )?;
        Ok(Placing {
            writer,
            name,
            kind: kind.to_owned(),
            at,
        })
    }

    /// Finishes and syncs a file, and remembers where it goes.
    fn finish(&mut self, file: Placing, barrier: u64, sealed_at_ns: u64) -> Result<SegmentFile> {
        let format = file.writer.format_version();
        let (bytes, footer, groups) = file.writer.finish()?;
        // A packed data file whose slices hold few rows each is recorded by its row groups.
        let format = match file.kind == "rows" && format == PACKED_FILE_VERSION {
            true => {
                let rows = groups.iter().map(|g| g.rows).sum();
                crate::archive::format::manifest::packed_format(rows, groups.len() as u64, format)
            }
            false => format,
        };
        let file_name = segment::data_file_name(file.name);
        let dir = format!("{STREAMS_DIR}/{}/{}", self.stream, file.kind);
        let dir_path = self.root.join(&dir);
        durable::create_dir(self.disk, &dir_path)?;
        self.staged.push((file.at, dir_path.join(&file_name)));
        Ok(SegmentFile {
            name: file.name,
            path: format!("{dir}/{file_name}"),
            bytes,
            barrier,
            sealed_at_ns,
            footer,
            groups: groups.into(),
            cold: None,
            run: None,
            format: Some(format),
            first_level: None,
            elided: None,
        })
    }

    /// Writes `groups` (one row group each) as the next reserved name.
    fn write(
        &mut self,
        kind: &str,
        schema: &SchemaRef,
        groups: &[TrackRows],
        barrier: u64,
        sealed_at_ns: u64,
    ) -> Result<SegmentFile> {
        let mut file = self.start(kind, schema, false)?;
        for group in groups {
            file.writer.push(group)?;
        }
        self.finish(file, barrier, sealed_at_ns)
    }
}

/// A one-row batch of a track's component columns, rebuilt from its labels (which render
/// the columns' values exactly).
fn track_row(decl: &StreamDecl, labels: &[&str]) -> std::result::Result<RecordBatch, String> {
    let mut fields = Vec::new();
    let mut columns = Vec::new();
    for (name, label) in decl.track.iter().zip(labels) {
        let column = decl
            .columns
            .iter()
            .find(|c| &c.name == name)
            .ok_or_else(|| format!("track column {name:?} is not declared"))?;
        let t: arrow::datatypes::DataType = column
            .data_type
            .parse()
            .map_err(|e| format!("{name}: {e}"))?;
        let text: Arc<dyn Array> = Arc::new(StringArray::from(vec![*label]));
        columns.push(arrow::compute::cast(&text, &t).map_err(|e| format!("{name}: {e}"))?);
        fields.push(arrow::datatypes::Field::new(name, t, false));
    }
    RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns)
        .map_err(|e| e.to_string())
}

impl Archive {
    pub(crate) fn writable(&self) -> Result<()> {
        self.commit.writable("retire or compact")
    }

    /// Checks the declared lifetimes against the recorded streams (at open).
    pub(crate) fn check_retention(&self) -> Result<()> {
        for (id, retention) in &self.config.retention {
            let Some(stream) = self.commit.state().streams.get(id) else {
                return Err(ArchiveError::declaration(
                    id,
                    "a lifetime is declared for a stream the archive neither records nor selects",
                ));
            };
            let levels = stream.decl.ladder.map_or(0, |l| l.levels as usize);
            retention
                .validate(id, stream.decl.axis.is_some(), levels)
                .map_err(|m| ArchiveError::declaration(id, m))?;
        }
        Ok(())
    }

    /// Commits one retirement and deletes the files it dropped.
    fn execute_retire(&mut self, retire: Retire) -> Result<RetireReport> {
        self.writable()?;
        let stream = self
            .commit
            .state()
            .streams
            .get(&retire.stream)
            .ok_or_else(|| ArchiveError::UnknownStream(retire.stream.clone()))?;
        let doomed: Vec<SegmentFile> = stream
            .files
            .iter()
            .chain(&stream.levels)
            .filter(|f| retire.dropped.contains(&f.name))
            .cloned()
            .collect();
        let report = RetireReport {
            stream: retire.stream.clone(),
            reason: retire.reason.clone(),
            tracks: retire.tracks.len(),
            whole: retire.tracks.iter().filter(|t| t.whole).count(),
            files_deleted: doomed.len(),
            bytes_deleted: doomed.iter().map(|f| f.bytes).sum(),
            files_rewritten: 0,
            bytes_rewritten: 0,
        };
        let id = retire.stream.clone();
        let mut report = report;
        self.commit(Record::Retire(retire))?;
        self.discard(&doomed)?;
        // With the Delta log on, files still holding retired groups are rewritten now, so
        // the log (and a glob) shows exactly what is served.
        let purged = if self.config.delta {
            self.purge_retired(&id)?
        } else {
            None
        };
        if let Some(rewritten) = purged {
            report.files_rewritten = rewritten.files_in;
            report.bytes_rewritten = rewritten.bytes_in;
        }
        tracing::info!(stream = %id, tracks = report.tracks, whole = report.whole, files = report.files_deleted, "retired");
        Ok(report)
    }

    pub(super) fn delete<'p>(&mut self, paths: impl Iterator<Item = &'p Path>) -> Result<()> {
        if let Err(e) = durable::remove_all(&self.disk, paths) {
            return Err(self.poison(e));
        }
        Ok(())
    }

    /// Applies every stream's declared lifetimes and idle time at `now_ns`: one retirement
    /// record per stream whose floors move. Floors only move forward.
    pub fn sweep(&mut self, now_ns: u64) -> Result<Vec<RetireReport>> {
        self.writable()?;
        let mut reports = Vec::new();
        let ids: Vec<String> = self.config.retention.keys().cloned().collect();
        let mut skipped = None;
        for id in ids {
            // A stream with a row group that could not be read is left as it is (and said).
            if let Err(e) = self.commit.state_known(&id) {
                tracing::warn!(stream = %id, error = %e, "not swept");
                skipped.get_or_insert(e);
                continue;
            }
            let retention = &self.config.retention[&id];
            let Some(stream) = self.commit.state().streams.get(&id) else {
                continue;
            };
            let Some(mut retire) = plan_retirement(stream, retention, now_ns) else {
                continue;
            };
            // Deferred rows (format version 8) are summarised before a retirement takes any
            // of them, so their levels outlive them as declared; a retirement that would
            // still take rows no level file summarises is refused, never carried out.
            let takes_deferred =
                |retire: &Retire, stream: &crate::archive::format::manifest::StreamState| {
                    stream.levels_deferred_from.is_some_and(|from| {
                        retire
                            .tracks
                            .iter()
                            .any(|t| t.raw.is_some_and(|r| r.seq > from))
                    })
                };
            if takes_deferred(&retire, stream) {
                if let Some(job) = self.plan_summary(&id, true)? {
                    let files = match job.run(|_, _| {}) {
                        Ok(f) => f,
                        Err(e) => return Err(self.poison(e)),
                    };
                    self.finish_compaction(files)?;
                }
                let retention = &self.config.retention[&id];
                let Some(stream) = self.commit.state().streams.get(&id) else {
                    continue;
                };
                match plan_retirement(stream, retention, now_ns) {
                    Some(again) if takes_deferred(&again, stream) => {
                        return Err(ArchiveError::Internal(format!(
                            "stream {id:?}: a retirement would take raw rows whose levels no file summarises yet (the summary did not land); nothing was retired"
                        )))
                    }
                    Some(again) => retire = again,
                    None => continue,
                }
            }
            reports.push(self.execute_retire(retire)?);
        }
        match skipped {
            Some(e) => Err(e),
            None => Ok(reports),
        }
    }

    /// Retires every track of `stream` beneath `prefix` whole (an empty prefix: every track):
    /// nothing of them is served afterwards, and reads of them answer their floor. The one
    /// way a track's last row group goes. `None` when nothing is left to retire.
    pub fn retire_track(
        &mut self,
        stream: &str,
        prefix: &[String],
    ) -> Result<Option<RetireReport>> {
        self.writable()?;
        let state = self
            .commit
            .state()
            .streams
            .get(stream)
            .ok_or_else(|| ArchiveError::UnknownStream(stream.to_owned()))?;
        if prefix.len() > state.decl.track.len() {
            return Err(ArchiveError::declaration(
                stream,
                format!(
                    "is tracked by {} component(s) ({}); {} label(s) were given",
                    state.decl.track.len(),
                    state.decl.track.join(", "),
                    prefix.len()
                ),
            ));
        }
        let key = TrackKey::encode(prefix)
            .map_err(|e| ArchiveError::declaration(stream, e.to_string()))?;
        let now = self.config.clock.now_ns();
        match plan_track_retirement(state, &key, now) {
            Some(retire) => self.execute_retire(retire).map(Some),
            None => Ok(None),
        }
    }

    /// Plans a compaction of `stream` and reserves its file names; `None` when nothing is
    /// worth rewriting (`force`: rewrite whatever can be, regardless of the thresholds).
    pub fn plan_compaction(&mut self, stream: &str, force: bool) -> Result<Option<CompactionJob>> {
        let rewrite = if force { Rewrite::All } else { Rewrite::Due };
        self.plan_rewrite(stream, rewrite)
    }

    /// Rewrites the data files of `stream` that hold retired row groups ([`Rewrite::Retired`]),
    /// so no live file holds a row the archive no longer serves. A retirement runs it.
    pub(crate) fn purge_retired(&mut self, stream: &str) -> Result<Option<CompactReport>> {
        let Some(job) = self.plan_rewrite(stream, Rewrite::Retired)? else {
            return Ok(None);
        };
        let files = match job.run(|_, _| {}) {
            Ok(f) => f,
            Err(e) => return Err(self.poison(e)),
        };
        self.finish_compaction(files)
    }

    /// Plans the summary of `stream`'s deferred rows (format version 8) and reserves its
    /// name: when rows are deferred and their cells would be worth their bytes
    /// ([`levels::worth_summarising`], judged on each track's deferred rows and axis span),
    /// or whatever they hold when `always` (before a retirement takes raw rows whose levels
    /// would be lost). `None` otherwise.
    pub(crate) fn plan_summary(
        &mut self,
        stream: &str,
        always: bool,
    ) -> Result<Option<CompactionJob>> {
        let (state, schema) = self.writable_stream(stream)?;
        let (Some(from), Some(ladder)) = (state.levels_deferred_from, state.decl.ladder) else {
            return Ok(None);
        };
        // Judged from the manifest's entries alone: a stream of 10^5 tracks plans this after
        // every barrier while its rows stay too sparse. A judgement walks every deferred row
        // group (in the files holding deferred rows), so it is made again only once the
        // deferred rows grew by a quarter since the last one found them not worth
        // summarising: the walks of a long deferral cost a few times its rows in all, not its
        // rows after every barrier.
        let deferred_rows = state.next_seq.saturating_sub(from);
        let judged = self.summary_judged.get(stream).copied();
        if !always && judged.is_some_and(|(f, rows)| f == from && deferred_rows < rows + rows / 4) {
            return Ok(None);
        }
        let first = state.first_stored_level();
        // Each track's deferred rows and their axis span, summed file by file.
        let cataloged: Vec<_> = state.tracks.values().collect();
        let mut spans: Vec<Option<(u64, [u64; 2])>> = vec![None; cataloged.len()];
        // And how many entries each track has there: where its entries start in the plan's
        // one list (`starts[t]`, summed below) if the rows are worth summarising.
        let mut starts = vec![0usize; cataloged.len() + 1];
        state.visit_since(&cataloged, from, false, |t, g| {
            starts[t + 1] += 1;
            let entry = &state.files[g.file].groups[g.group];
            if let Some([lo, hi]) = entry.axis {
                let (rows, [a, b]) = spans[t].unwrap_or((0, [lo, hi]));
                spans[t] = Some((rows + entry.rows, [a.min(lo), b.max(hi)]));
            }
        });
        if !always
            && !levels::worth_summarising(
                &ladder,
                first,
                levels::LEVEL_RULE.summarise_rows,
                spans.into_iter().flatten(),
            )
        {
            self.summary_judged
                .insert(stream.to_owned(), (from, deferred_rows));
            return Ok(None);
        }
        // Each track's entries that may hold deferred rows, in publish order, in one list:
        // counted per track in the walk above, placed in a second.
        for t in 0..cataloged.len() {
            starts[t + 1] += starts[t];
        }
        let mut place: Vec<Option<u32>> = vec![None; state.files.len()];
        let mut order = Vec::new();
        let mut entries = vec![(0u32, 0u32); starts[cataloged.len()]];
        let mut next = starts.clone();
        let mut failed = None;
        state.visit_since(&cataloged, from, false, |t, g| {
            let at = match place[g.file] {
                Some(at) => Some(at),
                None => u32::try_from(order.len()).ok().inspect(|&at| {
                    order.push(state.files[g.file].name);
                    place[g.file] = Some(at);
                }),
            };
            match (at, u32::try_from(g.group)) {
                (Some(at), Ok(group)) => entries[next[t]] = (at, group),
                _ => failed = Some(g),
            }
            next[t] += 1;
        });
        if let Some(g) = failed {
            return Err(ArchiveError::Internal(format!(
                "stream {stream:?}: entry {} of {} is past what a summary can name",
                g.group, state.files[g.file].path
            )));
        }
        let through = state.next_seq;
        let files = place
            .iter()
            .zip(&state.files)
            .filter(|(at, _)| at.is_some())
            .map(|(_, f)| (f.name, f.clone()))
            .collect();
        let decl = state.decl.clone();
        let labels = cataloged.iter().map(|t| t.labels.clone()).collect();
        let names = self.commit.reserve(1);
        Ok(Some(CompactionJob {
            root: self.root.clone(),
            decl,
            schema,
            floors: Floors::new(),
            plan: CompactPlan {
                stream: stream.to_owned(),
                inputs: Vec::new(),
                outputs: Vec::new(),
                level_inputs: Vec::new(),
                level_tier: 0,
                more: true,
                level_tables: false,
            },
            files,
            level_files: Vec::new(),
            levels_from: first,
            names,
            group_rows: self.config.compaction.group_rows,
            disk: self.disk.clone(),
            store: self.store.clone(),
            summary: Some(Summary {
                span: [from, through],
                order,
                labels,
                tracks: starts,
                entries,
            }),
        }))
    }

    /// A recorded stream of a writable archive, with the schema its files are read in.
    fn writable_stream(
        &self,
        stream: &str,
    ) -> Result<(&crate::archive::format::manifest::StreamState, SchemaRef)> {
        self.writable()?;
        let state = self
            .commit
            .state()
            .streams
            .get(stream)
            .ok_or_else(|| ArchiveError::UnknownStream(stream.to_owned()))?;
        let schema = match self.selected.get(stream) {
            Some(s) => s.full_schema.clone(),
            None => crate::archive::format::spec::stored_schema(&state.decl)
                .map_err(|m| ArchiveError::declaration(stream, m))?,
        };
        Ok((state, schema))
    }

    fn plan_rewrite(&mut self, stream: &str, rewrite: Rewrite) -> Result<Option<CompactionJob>> {
        if !matches!(rewrite, Rewrite::Retired) {
            if let Some(job) = self.plan_summary(stream, false)? {
                return Ok(Some(job));
            }
        }
        let (state, schema) = self.writable_stream(stream)?;
        let split = self
            .config
            .retention
            .get(stream)
            .map_or(Split::None, Split::for_retention);
        let Some(plan) = plan_compaction(state, &self.config.compaction, split, rewrite) else {
            return Ok(None);
        };
        let tables = if plan.level_inputs.is_empty() {
            0
        } else {
            state.decl.ladder.map_or(0, |l| u64::from(l.levels))
        };
        let names = plan.outputs.len() as u64 + tables;
        // Name lookups through sets: a migration may rewrite 10^5 single-track files at once.
        let inputs: std::collections::BTreeSet<u64> = plan.inputs.iter().copied().collect();
        let level_inputs: std::collections::BTreeSet<u64> =
            plan.level_inputs.iter().copied().collect();
        let files: BTreeMap<u64, SegmentFile> = state
            .files
            .iter()
            .filter(|f| inputs.contains(&f.name))
            .map(|f| (f.name, f.clone()))
            .collect();
        let level_files = state
            .levels
            .iter()
            .filter(|f| level_inputs.contains(&f.name))
            .cloned()
            .collect();
        let (decl, floors) = (state.decl.clone(), floors_of(state));
        let levels_from = state.first_stored_level();
        let names = self.commit.reserve(names);
        Ok(Some(CompactionJob {
            root: self.root.clone(),
            decl,
            schema,
            floors,
            plan,
            files,
            level_files,
            levels_from,
            names,
            group_rows: self.config.compaction.group_rows,
            disk: self.disk.clone(),
            store: self.store.clone(),
            summary: None,
        }))
    }

    /// Records a finished compaction: one record adds the new files and removes the replaced
    /// ones together; the replaced files are deleted after it is synced. Refused (and the new
    /// files deleted, nothing recorded) when an input left the live set or a floor moved
    /// since the plan: the next compaction plans again.
    pub fn finish_compaction(&mut self, done: CompactedFiles) -> Result<Option<CompactReport>> {
        self.writable()?;
        let Some(state) = self.commit.state().streams.get(&done.stream) else {
            return Err(ArchiveError::UnknownStream(done.stream));
        };
        let live = |names: &[u64], files: &[SegmentFile]| {
            let live: std::collections::BTreeSet<u64> = files.iter().map(|f| f.name).collect();
            names.iter().all(|n| live.contains(n))
        };
        let still = done
            .summarised_from
            .is_none_or(|from| state.levels_deferred_from == Some(from))
            && live(&done.record.removed, &state.files)
            && live(&done.record.removed_levels, &state.levels)
            && done.floors.iter().all(|(key, floors)| {
                state
                    .tracks
                    .get(key)
                    .is_some_and(|t| (t.raw, t.level_floors.clone(), t.whole) == *floors)
            });
        if !still {
            tracing::warn!(stream = %done.stream, "compaction overtaken by a retirement; its files are discarded");
            self.delete(done.placed.iter().map(PathBuf::as_path))?;
            return Ok(None);
        }
        let bytes_of = |names: &[u64], files: &[SegmentFile]| -> (Vec<SegmentFile>, u64) {
            let names: std::collections::BTreeSet<u64> = names.iter().copied().collect();
            let picked: Vec<SegmentFile> = files
                .iter()
                .filter(|f| names.contains(&f.name))
                .cloned()
                .collect();
            let bytes = picked.iter().map(|f| f.bytes).sum();
            (picked, bytes)
        };
        let (raw_paths, bytes_in) = bytes_of(&done.record.removed, &state.files);
        let (level_paths, level_bytes_in) = bytes_of(&done.record.removed_levels, &state.levels);
        let report = CompactReport {
            stream: done.stream.clone(),
            files_in: raw_paths.len(),
            bytes_in,
            files_out: done.record.added.len(),
            bytes_out: done.record.added.iter().map(|f| f.bytes).sum(),
            level_files_in: level_paths.len(),
            level_bytes_in,
            level_bytes_out: done.record.added_levels.iter().map(|f| f.bytes).sum(),
        };
        if let Err(why) = state.check_compact_order(&done.record) {
            self.delete(done.placed.iter().map(PathBuf::as_path))?;
            return Err(ArchiveError::Internal(format!(
                "stream {:?}: a compaction planned files that break a track's order, so it was not recorded (its files are deleted): {why}",
                done.stream
            )));
        }
        // Rows in, rows out: the files written hold exactly the live rows of the files they
        // replace (retired ones dropped). A plan that missed an entry would otherwise lose its
        // rows once the inputs are deleted, and no read would say so.
        let rows_in = state.live_rows_in(&done.record.removed);
        let rows_out: u64 = done.record.added.iter().map(SegmentFile::rows).sum();
        if rows_in.as_ref() != Ok(&rows_out) {
            self.delete(done.placed.iter().map(PathBuf::as_path))?;
            return Err(ArchiveError::Internal(format!(
                "stream {:?}: a compaction wrote {rows_out} rows in place of files holding {} live rows, so it was not recorded (its files are deleted)",
                done.stream,
                match rows_in {
                    Ok(n) => n.to_string(),
                    Err(why) => format!("an unknown number of ({why})"),
                }
            )));
        }
        let mut record = done.record;
        record.next_name = record.next_name.max(self.commit.next_name());
        self.commit(Record::Compact(record))?;
        let replaced: Vec<SegmentFile> = raw_paths.into_iter().chain(level_paths).collect();
        self.discard(&replaced)?;
        tracing::info!(stream = %report.stream, files_in = report.files_in, files_out = report.files_out, "compacted");
        Ok(Some(report))
    }

    /// Compacts every stream now (plan, run, finish in turn; `force` ignores the thresholds).
    /// `progress(stream, done, total)` after each step.
    pub fn compact(
        &mut self,
        force: bool,
        mut progress: impl FnMut(&str, usize, usize),
    ) -> Result<Vec<CompactReport>> {
        let ids: Vec<String> = self.commit.state().streams.keys().cloned().collect();
        let mut reports = Vec::new();
        let mut skipped = None;
        for id in ids {
            // A stream with a row group that could not be read is left as it is (and said);
            // the others are compacted.
            if let Err(e) = self.commit.state_known(&id) {
                tracing::warn!(stream = %id, error = %e, "not compacted");
                skipped.get_or_insert(e);
                continue;
            }
            reports.extend(self.compact_stream(&id, force, |d, t| progress(&id, d, t))?);
        }
        match skipped {
            Some(e) => Err(e),
            None => Ok(reports),
        }
    }

    /// The compactions of one stream: one job when forced; otherwise every one due, since an
    /// automatic compaction works off a backlog of level runs one tiered merge at a time
    /// (each merges `LEVEL_FANOUT` runs into one; at most [`MAX_AUTO_ROUNDS`]). A job
    /// overtaken by a retirement ends it. `progress(done, total)` within each job.
    pub fn compact_stream(
        &mut self,
        stream: &str,
        force: bool,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<Vec<CompactReport>> {
        // A compaction of a stream whose tracks are not all known would leave some rows out.
        self.commit.state_known(stream)?;
        let mut reports = Vec::new();
        // A forced compaction is one round, unless a round had to leave data files out (its
        // fan-in is bounded): then it goes on while the rounds say there is more.
        let mut more = true;
        for _ in 0..MAX_AUTO_ROUNDS {
            if force && !more {
                break;
            }
            let Some(job) = self.plan_compaction(stream, force)? else {
                break;
            };
            more = job.plan().more;
            let files = match job.run(&mut progress) {
                Ok(f) => f,
                Err(e) => return Err(self.poison(e)),
            };
            match self.finish_compaction(files)? {
                Some(report) => reports.push(report),
                None => break,
            }
        }
        Ok(reports)
    }

    /// Starts a new manifest generation holding a snapshot of the live state, then removes
    /// the old one. Open time then depends on the live state, not on history. Answers the
    /// new generation.
    pub fn checkpoint(&mut self) -> Result<u64> {
        let (generation, old) = self.commit.checkpoint(
            &self.root.join(TMP_DIR),
            &self.root.join(crate::archive::layout::MANIFEST_DIR),
        )?;
        if let Some(old) = old {
            self.delete(std::iter::once(old.as_path()))?;
        }
        self.checkpoint_delta_logs();
        tracing::info!(generation, "checkpoint");
        self.hand_to_replicator();
        Ok(generation)
    }

    /// The manifest's current size in bytes (0 read-only).
    pub fn manifest_bytes(&self) -> u64 {
        self.commit.manifest_bytes()
    }

    /// A checkpoint when one is due ([`Archive::checkpoint_due`]): the new generation, if
    /// one started.
    pub fn checkpoint_if_due(&mut self) -> Result<Option<u64>> {
        if self.checkpoint_due() {
            self.checkpoint().map(Some)
        } else {
            Ok(None)
        }
    }

    /// Whether a checkpoint is due:
    ///
    /// - the records appended since the generation's snapshot are past the configured size
    ///   ([`Config::checkpoint_bytes`]) and past the snapshot's own size; or
    /// - the manifest is past [`CHECKPOINT_FLOOR`] and more than twice what a snapshot of the
    ///   live state would be.
    ///
    /// Every open replays the log, so a log that holds mostly replaced history costs every
    /// reader; a checkpoint makes open time depend on the live state alone. Both rules keep a
    /// checkpoint's cost (a snapshot of the live state, written whole) a share of the bytes
    /// appended since the last one, whatever the state's size: a fleet whose snapshot is past
    /// the configured size would otherwise be checkpointed after every barrier. For the same
    /// reason the live state (a snapshot encoded, to be measured) is measured again only when
    /// the log has grown by a quarter of it since it was last measured and a record that can
    /// shrink it (a retirement, a compaction, an offload) was committed meanwhile; between
    /// measurements the state is taken to have grown by what was appended (a barrier grows it
    /// by about its own record), so barriers alone never make the log twice the state.
    ///
    /// [`Config::checkpoint_bytes`]: crate::archive::Config::checkpoint_bytes
    pub fn checkpoint_due(&self) -> bool {
        let log = self.manifest_bytes();
        let snapshot = self.commit.snapshot_bytes();
        if log.saturating_sub(snapshot) > self.config.checkpoint_bytes.max(snapshot) {
            return true;
        }
        if log <= CHECKPOINT_FLOOR {
            return false;
        }
        let generation = self.commit.state().generation;
        let mut measured = self
            .live_measured
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let replacing = self.commit.replacing();
        let (at, live, shrinkable) = match *measured {
            Some(m) if m.generation == generation => (m.at, m.live, m.replacing != replacing),
            // A generation starts as its snapshot: the live state, measured. What an earlier
            // handle appended to it is not known: measured once.
            _ => (snapshot, snapshot, true),
        };
        if !shrinkable || log < at + live / 4 {
            // Not measured again: the state is taken to have grown by what was appended since
            // (a barrier adds about its own record to it), so the records a measurement found
            // no cause to checkpoint for never make one due by themselves.
            return log > 2 * (live + log.saturating_sub(at));
        }
        let record = Record::Snapshot(self.commit.state().snapshot(0));
        let live = serde_json::to_vec(&record).map_or(0, |b| b.len() as u64);
        *measured = Some(LiveMeasured {
            generation,
            at: log,
            live,
            replacing,
        });
        log > 2 * live
    }

    /// Everything the lifecycle owes at `now_ns`, in order: the declared retirements, the
    /// compactions past their thresholds, the declared moves to the cold tier, and a
    /// checkpoint once the manifest is past its size. A host calls it from its sealing service, off the publishing thread.
    pub fn maintain(&mut self, now_ns: u64) -> Result<Maintenance> {
        let generation = self.commit.state().generation;
        let mut done = Maintenance {
            retired: self.sweep(now_ns)?,
            ..Maintenance::default()
        };
        done.compacted = self.compact(false, |_, _, _| {})?;
        if self.store.configured().is_some() && !self.config.offload.is_empty() {
            done.offloaded = self.offload(None, now_ns, |_, _, _| {})?;
        }
        done.checkpoint = self.checkpoint_if_due()?;
        // A retirement or compaction that removed a file of format 11 checkpointed first.
        let now = self.commit.state().generation;
        if done.checkpoint.is_none() && now != generation {
            done.checkpoint = Some(now);
        }
        Ok(done)
    }
}

/// Runs the lifecycle from a sealing service without making publish or reads wait for a
/// compaction: each [`Maintainer::step`] sweeps, records the compactions that have finished,
/// starts the ones that are due on their own threads, and checkpoints, so the archive is
/// held for one manifest commit at a time, never for a rewrite.
#[derive(Debug, Default)]
pub struct Maintainer {
    /// Each job in flight: its stream, the files it reads (data and level files, by name),
    /// and its thread.
    running: Vec<Running>,
}

/// A compaction in flight on a [`Maintainer`]'s thread.
type Running = (
    String,
    Vec<u64>,
    std::thread::JoinHandle<Result<CompactedFiles>>,
);

impl Maintainer {
    /// Nothing running.
    pub fn new() -> Self {
        Maintainer::default()
    }

    /// Compactions in flight.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// One step at `now_ns`; never waits for a compaction to finish.
    pub fn step(&mut self, archive: &mut Archive, now_ns: u64) -> Result<Maintenance> {
        let mut done = Maintenance {
            retired: archive.sweep(now_ns)?,
            ..Maintenance::default()
        };
        let (finished, running): (Vec<_>, Vec<_>) = std::mem::take(&mut self.running)
            .into_iter()
            .partition(|(_, _, handle)| handle.is_finished());
        self.running = running;
        for (stream, inputs, handle) in finished {
            done.compacted
                .extend(Self::record(archive, &stream, &inputs, handle)?);
        }
        let ids: Vec<String> = archive.commit.state().streams.keys().cloned().collect();
        for id in ids {
            if self.running.iter().any(|(s, _, _)| *s == id) {
                continue;
            }
            if let Some(job) = archive.plan_compaction(&id, false)? {
                let inputs: Vec<u64> = job
                    .plan()
                    .inputs
                    .iter()
                    .chain(&job.plan().level_inputs)
                    .copied()
                    .collect();
                let handle = std::thread::Builder::new()
                    .name(format!("compact-{id}"))
                    .spawn(move || job.run(|_, _| {}))
                    .map_err(ArchiveError::io(
                        "start a compaction thread",
                        archive.root(),
                    ))?;
                self.running.push((id, inputs, handle));
            }
        }
        done.checkpoint = archive.checkpoint_if_due()?;
        Ok(done)
    }

    /// Waits for every compaction in flight and records it (a clean stop).
    pub fn finish(&mut self, archive: &mut Archive) -> Result<Vec<CompactReport>> {
        let mut reports = Vec::new();
        for (stream, inputs, handle) in std::mem::take(&mut self.running) {
            reports.extend(Self::record(archive, &stream, &inputs, handle)?);
        }
        Ok(reports)
    }

    fn record(
        archive: &mut Archive,
        stream: &str,
        inputs: &[u64],
        handle: std::thread::JoinHandle<Result<CompactedFiles>>,
    ) -> Result<Option<CompactReport>> {
        // A panic is a fault of this build, never a job to drop: it poisons below.
        let Ok(outcome) = handle.join() else {
            return Err(archive.poison(ArchiveError::Internal(format!(
                "the compaction thread of stream {stream:?} panicked"
            ))));
        };
        // A job whose inputs left the live state while it ran (a sweep of a later step
        // retired them: the files it still read were deleted) would be discarded had it
        // finished; its failure is no damage. Its files under `.tmp/` are left to the next
        // open, which keeps them as evidence.
        let live = |state: &crate::archive::format::manifest::State| {
            state.streams.get(stream).is_some_and(|s| {
                let held: std::collections::BTreeSet<u64> =
                    s.files.iter().chain(&s.levels).map(|f| f.name).collect();
                inputs.iter().all(|name| held.contains(name))
            })
        };
        match outcome {
            Err(e) if !live(archive.commit.state()) => {
                tracing::warn!(stream, error = %e, "a background compaction failed after a retirement took its inputs; dropped (its result would not have been recorded)");
                Ok(None)
            }
            // A failed job poisons exactly as `Archive::compact` does: its files under
            // `.tmp/` are evidence for the next open, and nothing more is written meanwhile.
            Err(e) => Err(archive.poison(e)),
            Ok(files) => archive.finish_compaction(files),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::UInt64Array;
    use arrow::datatypes::{DataType, Field, Schema};

    /// A compaction whose outputs would hold fewer (or more) rows than the live rows of the
    /// files they replace is refused before its record, its files deleted, the archive as it
    /// was; the same compaction whole is recorded.
    #[test]
    fn a_compaction_that_would_lose_rows_is_not_recorded() {
        use crate::archive::format::spec::StreamSpec;
        use crate::archive::Config;
        let dir = tempfile::tempdir().expect("tempdir");
        let schema = Arc::new(Schema::new(vec![
            Field::new("run", DataType::Utf8, false),
            Field::new("x", DataType::UInt64, false),
        ]));
        let spec = StreamSpec::dynamic("s", schema.clone(), vec!["run".into()], Some("x".into()))
            .expect("spec");
        let mut archive = Archive::open(dir.path(), Config::new().stream(spec)).expect("open");
        for b in 0..3u64 {
            let runs: Vec<String> = (0..40).map(|i| format!("r{:02}", i % 4)).collect();
            let xs: Vec<u64> = (0..40).map(|i| b * 100 + i).collect();
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(StringArray::from(runs)),
                    Arc::new(UInt64Array::from(xs)),
                ],
            )
            .expect("batch");
            let positions: Vec<u64> = (b * 40 + 1..=b * 40 + 40).collect();
            archive.stage_batch("s", &batch, &positions).expect("stage");
            archive.seal_all().expect("seal");
        }
        let before = archive.state().streams["s"].clone();
        assert_eq!(before.live_rows_in(&[before.files[0].name]), Ok(40));
        assert!(before.live_rows_in(&[u64::MAX]).is_err(), "a name not live");
        let job = archive
            .plan_compaction("s", true)
            .expect("plan")
            .expect("a job");
        let mut done = job.run(|_, _| {}).expect("run");
        let whole = done.record.added.clone();
        let first = Arc::make_mut(&mut done.record.added[0].groups);
        first[0].rows -= 1;
        let refused = archive.finish_compaction(done).expect_err("refused");
        assert!(
            refused
                .to_string()
                .contains("119 rows in place of files holding 120 live rows"),
            "{refused}"
        );
        assert_eq!(archive.state().streams["s"], before, "nothing recorded");
        for f in &whole {
            assert!(!dir.path().join(&f.path).exists(), "{} deleted", f.path);
        }
        let job = archive
            .plan_compaction("s", true)
            .expect("plan")
            .expect("a job");
        let done = job.run(|_, _| {}).expect("run");
        let report = archive
            .finish_compaction(done)
            .expect("finish")
            .expect("recorded");
        assert_eq!(report.files_in, 3);
    }

    /// A compaction writes an output's track columns of text from the planned track's labels,
    /// so an entry (recorded beside its rows) whose rows hold another track is refused, not
    /// relabelled: by the first and by the last of its rows.
    #[test]
    fn a_source_whose_rows_hold_another_track_than_its_entry_is_refused() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("run", DataType::Utf8, false),
            Field::new("x", DataType::UInt64, false),
        ]));
        let decl = StreamDecl {
            id: "s".into(),
            columns: Vec::new(),
            track: vec!["run".into()],
            axis: Some("x".into()),
            measured: Vec::new(),
            ladder: None,
        };
        let mut gather = Gather::new(16, schema.clone(), Some("x".into()), &decl);
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["a", "a", "b", "b", "b"])),
                Arc::new(UInt64Array::from(vec![1, 2, 3, 4, 5])),
            ],
        )
        .expect("batch");
        let at = gather.source((7, 0), batch);
        let a: crate::contract::Labels = vec!["a".to_owned()].into();
        let b: crate::contract::Labels = vec!["b".to_owned()].into();
        assert_eq!(gather.check_labels(at, 0, 2, &a), Ok(()));
        assert_eq!(gather.check_labels(at, 2, 3, &b), Ok(()));
        // Off by one at either end, another track, or past the row group.
        for (row, rows, labels) in [(0, 3, &a), (1, 2, &b), (0, 2, &b), (3, 3, &b), (0, 0, &a)] {
            let refused = gather.check_labels(at, row, rows, labels);
            assert!(refused.is_err(), "rows {row}+{rows} as {labels:?}");
        }
    }
}
