//! Raw reads: the catalog chooses row groups, digests are verified, runs merge by `_seq`.

use super::Archive;
use crate::archive::error::Result;
use crate::archive::error::StoredErrorKind;
use crate::archive::error::{ReadError, StoredError};
use crate::archive::format::manifest::SegmentFile;
use crate::archive::format::manifest::{StreamState, TrackState};
use crate::archive::format::spec::stored_schema;
use crate::archive::format::spec::{POSITION_COLUMN, SEQ_COLUMN};
use crate::archive::io::cold;
use crate::archive::io::store::Store;
use crate::archive::io::store::TierRequests;
pub(crate) use crate::archive::plan::select::{floor_refusal, select};
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
    staged: &[(&TrackKey, Vec<RecordBatch>)],
    start: Bound<Position>,
    end: Bound<Position>,
) -> Result<RecordBatch, ReadError> {
    floor_refusal(tracks, start)?;
    let mut open = crate::archive::io::segment::Opened::new(store, schema.clone());
    let mut runs: Vec<RecordBatch> = Vec::with_capacity(tracks.len() + staged.len());
    let mut staged_of: BTreeMap<&TrackKey, &[RecordBatch]> =
        staged.iter().map(|(k, b)| (*k, b.as_slice())).collect();
    let located = stream.locate(&tracks.iter().map(|(_, t)| *t).collect::<Vec<_>>());
    for ((key, _), groups) in tracks.iter().zip(located) {
        let mut parts = Vec::new();
        for g in groups {
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

impl Archive {
    /// Refuses every read of an archive whose manifest is damaged mid-log (a read-only open
    /// past the damage holds only the trusted prefix, which may be less than the archive
    /// holds: answering from it would be a quiet short answer).
    pub(super) fn trusted(&self) -> std::result::Result<(), ReadError> {
        match self.recovery.unrepaired_damage() {
            None => Ok(()),
            Some(offset) => Err(StoredError::corrupt(format!(
                "the manifest is damaged at byte {offset} ({}), so the archive may hold more than its trusted prefix names; nothing is served from it (`series-archive repair` shows what the evidence holds and starts a new generation, keeping it)",
                self.recovery.damage.as_deref().unwrap_or("valid records follow the damage")
            ))
            .into()),
        }
    }

    /// Refuses a read of `stream` beneath `track` that a scoped open's catalog does not
    /// hold whole ([`crate::archive::Config::scope`]): its answer would leave out tracks.
    pub(super) fn within_scope(
        &self,
        stream: &str,
        track: &[String],
    ) -> std::result::Result<(), ReadError> {
        if let Some(scope) = self
            .config
            .scope
            .as_ref()
            .filter(|s| !s.covers(stream, track))
        {
            return Err(ReadError::BadSelection(format!(
                "this open catalogs only stream {:?} beneath {:?} (Config::scope); stream {stream:?} beneath {track:?} needs an open of its own",
                scope.stream, scope.track
            )));
        }
        // A row group whose rows the open could not read (format version 11) catalogs none
        // of its tracks: a read that may meet one of them would answer less than the archive
        // holds.
        let unread = self
            .commit
            .state()
            .streams
            .get(stream)
            .and_then(|s| s.unreadable_beneath(track));
        match unread {
            Some((file, unread, first, last)) => Err(ReadError::Stored(StoredError::new(
                unread.kind,
                format!(
                    "stream {stream:?}: row group {} of {} (tracks {} to {}) could not be read when the archive was opened, so no read that may meet those tracks is answered: {}",
                    unread.group,
                    file.path,
                    first.join("/"),
                    last.join("/"),
                    unread.why
                ),
            ))),
            None => Ok(()),
        }
    }

    pub(super) fn recorded(
        &self,
        stream: &str,
    ) -> std::result::Result<(&StreamState, SchemaRef), ReadError> {
        self.trusted()?;
        let state = self
            .commit
            .state()
            .streams
            .get(stream)
            .ok_or_else(|| ReadError::UnknownStream(stream.to_owned()))?;
        let schema = match self.selected.get(stream) {
            Some(s) => s.full_schema.clone(),
            None => stored_schema(&state.decl).map_err(StoredError::corrupt)?,
        };
        Ok((state, schema))
    }

    /// Raw rows of `stream` beneath the selection `track` (labels, outermost first; empty
    /// selects every track) within the position range, in publish order, as one Arrow batch
    /// of the stream's columns followed by `_position` and `_seq`. Rows staged by this
    /// process and not yet sealed are part of the answer (after the sealed rows of their
    /// track, merged by publish order); surveys and folds answer from sealed rows only.
    pub fn read_rows(
        &self,
        stream: &str,
        track: &[String],
        start: Bound<Position>,
        end: Bound<Position>,
    ) -> std::result::Result<RecordBatch, ReadError> {
        self.within_scope(stream, track)?;
        let (state, schema) = self.recorded(stream)?;
        if track.len() > state.decl.track.len() {
            return Err(ReadError::BadSelection(format!(
                "stream {stream:?} is tracked by {} component(s) ({}); {} label(s) were given",
                state.decl.track.len(),
                state.decl.track.join(", "),
                track.len()
            )));
        }
        let prefix = TrackKey::encode(track).map_err(|e| ReadError::BadSelection(e.to_string()))?;
        if let Some(reason) = self.commit.poisoned() {
            // A failed barrier discarded what was staged: the rows it held are neither
            // durable nor here, so an answer now could be short.
            return Err(StoredError::new(
                StoredErrorKind::Poisoned,
                format!(
                    "an earlier barrier failed ({reason}); the rows it was sealing are not served by this handle — reopen the archive to serve what is durable"
                ),
            )
            .into());
        }
        let tracks = select(state, &prefix);
        // Rows staged and not yet sealed are served too: a window that evicted them has
        // handed them to this tier, and leaving them out would be a quiet short answer.
        let staged: Vec<(&TrackKey, Vec<RecordBatch>)> = match self.staged.get(stream) {
            Some(s) => s
                .rows_of(&s.beneath(&prefix))
                .map_err(|e| StoredError::internal(e.to_string()))?,
            None => Vec::new(),
        };
        rows(&self.store, state, &schema, &tracks, &staged, start, end)
    }

    /// The committed data files of `stream`: exactly what the manifest holds, no more and no
    /// less. A local file as its path under the root, a cold one as its object URL.
    pub fn files(&self, stream: &str) -> std::result::Result<Vec<String>, ReadError> {
        let (state, _) = self.recorded(stream)?;
        Ok(state.files.iter().map(|f| self.location(f)).collect())
    }

    /// The committed level files of `stream`, as [`Archive::files`] names them, in the order
    /// their cells merge (publish order). With `level`, only the files holding that level:
    /// every barrier's partials and the level tables of that level.
    pub fn level_files(
        &self,
        stream: &str,
        level: Option<usize>,
    ) -> std::result::Result<Vec<String>, ReadError> {
        let (state, _) = self.recorded(stream)?;
        let Some(k) = level else {
            return Ok(state.levels.iter().map(|f| self.location(f)).collect());
        };
        let levels = state.decl.ladder.map_or(0, |l| l.levels as usize);
        if k >= levels {
            return Err(ReadError::BadSelection(format!(
                "stream {stream:?} has {levels} level(s) (0 to {}); there is no level {k}",
                levels.saturating_sub(1)
            )));
        }
        Ok(state
            .levels
            .iter()
            .filter(|f| f.run.and_then(|r| r.level).is_none_or(|l| l as usize == k))
            .map(|f| self.location(f))
            .collect())
    }

    /// Where a committed file lives: its local path, or its object URL.
    pub(super) fn location(&self, file: &SegmentFile) -> String {
        match &file.cold {
            Some(url) => url.clone(),
            None => self.root.join(&file.path).display().to_string(),
        }
    }

    /// The requests this handle made so far, per tier: the local directory (reads), then
    /// each cold tier it wrote to or read from (reads, writes, deletes, lists).
    pub fn requests(&self) -> Vec<TierRequests> {
        self.store.requests()
    }

    /// The configured cold tier's request counters `(puts, gets, deletes, lists)`, when one
    /// is configured.
    pub fn cold_requests(&self) -> Option<[u64; 4]> {
        self.store.configured().map(|t| t.requests().snapshot())
    }

    /// Verifies every digest of every committed file; `progress(done, total)` after each
    /// file. Answers what is damaged (empty when everything verifies), and, each beginning
    /// [`cold::UNVERIFIED`], the cold files whose tier did not answer (`cold::verify_file`).
    ///
    /// A data file whose digests verify is also read for what its entries say: every entry's
    /// rows hold its track (labels), its `_position`, `_seq` and axis ranges exactly, and the
    /// entries of each row group tile it from its first row to its last. A row no entry
    /// names is one no read would ever answer: damage as much as a flipped byte.
    pub fn verify(&self, mut progress: impl FnMut(usize, usize)) -> Vec<String> {
        let state = self.commit.state();
        // Each data file's stream, for its entries' check (level files have none).
        let data_of: BTreeMap<u64, &StreamState> = state
            .streams
            .values()
            .flat_map(|s| s.files.iter().map(move |f| (f.name, s)))
            .collect();
        let files: Vec<&SegmentFile> = state.live_files().collect();
        let mut damaged = Vec::new();
        if let Some(offset) = self.recovery.unrepaired_damage() {
            damaged.push(format!(
                "manifest {}: damaged at byte {offset}: {} (what follows is not served; see `series-archive repair`)",
                self.recovery.damaged_path.as_deref().unwrap_or("(current generation)"),
                self.recovery.damage.as_deref().unwrap_or("a record fails its check and valid records follow it")
            ));
        }
        let mut reach = cold::Reach::default();
        for (i, file) in files.iter().enumerate() {
            // `verify` reads every byte again: no cached footer stands in for the file's.
            self.store.forget(file.name);
            // A data file's entries are checked in the same pass as its digests: every row
            // group it names is read once, its digest verified before it is decoded.
            let check = match data_of.get(&file.name) {
                Some(stream) => cold::verify_file(&self.store, file, &mut reach, || {
                    entries_agree(&self.store, stream, file)
                }),
                None => cold::verify_file(&self.store, file, &mut reach, || {
                    crate::archive::io::segment::verify_digests(&self.store, file)
                }),
            };
            if let Err(e) = check {
                damaged.push(e.what);
            }
            progress(i + 1, files.len());
        }
        damaged
    }

    /// Files under `.quarantine/`, relative to the root, with their sizes.
    pub fn quarantine(&self) -> Result<Vec<(String, u64)>> {
        Ok(self.evidence()?.into_iter().flat_map(|e| e.files).collect())
    }
}

/// Whether `file`'s entries say what its rows hold (see [`Archive::verify`]): each entry's
/// rows carry its track's labels and exactly its `_position`, `_seq` and axis ranges, and each
/// row group's entries cover it from its first row to its last, in order, without a gap.
/// Only the track, axis, `_position` and `_seq` columns are decoded. A file of a scoped
/// catalog (its entries not all decoded) is not checked.
fn entries_agree(
    store: &Store,
    stream: &StreamState,
    file: &SegmentFile,
) -> std::result::Result<(), StoredError> {
    let decl = &stream.decl;
    let named = |e: StoredError| {
        StoredError::new(
            e.kind,
            format!("stream {:?} file {}: {}", decl.id, file.path, e.what),
        )
    };
    entries_hold_rows(store, stream, file).map_err(|what| match what {
        Said::Damage(what) => named(StoredError::corrupt(what)),
        Said::Read(e) => named(e),
    })
}

/// Why [`entries_hold_rows`] refused: what the rows and entries say, or a read that failed.
enum Said {
    Damage(String),
    Read(StoredError),
}

impl From<String> for Said {
    fn from(what: String) -> Said {
        Said::Damage(what)
    }
}

fn entries_hold_rows(
    store: &Store,
    stream: &StreamState,
    file: &SegmentFile,
) -> std::result::Result<(), Said> {
    if file.elided.is_some() || file.groups.is_empty() {
        return crate::archive::io::segment::verify_digests(store, file).map_err(Said::Read);
    }
    let decl = &stream.decl;
    let schema = crate::archive::format::spec::slice_schema(decl)?;
    let mut open = crate::archive::io::segment::Opened::projected(store, schema);
    // The row group being walked: its index, columns, rows, and the next row an entry must
    // start at.
    struct Walked {
        group: usize,
        labels: Vec<arrow::array::StringArray>,
        /// `_position`, `_seq`, then the axis when the stream has one.
        ranges: Vec<UInt64Array>,
        rows: u64,
        next: u64,
    }
    let columns = |batch: &RecordBatch, group: usize| -> std::result::Result<Walked, String> {
        // Labels as staging renders them: a track column of integers, booleans or large
        // text is compared as its text.
        let labels = crate::archive::format::levels::rendered_labels(decl, batch, "data file")?;
        let ranges = [POSITION_COLUMN, SEQ_COLUMN]
            .into_iter()
            .chain(decl.axis.as_deref())
            .map(|name| {
                batch
                    .column_by_name(name)
                    .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
                    .cloned()
                    .ok_or_else(|| format!("column {name:?} is not an unsigned integer"))
            })
            .collect::<std::result::Result<_, _>>()?;
        Ok(Walked {
            group,
            labels,
            ranges,
            rows: batch.num_rows() as u64,
            next: 0,
        })
    };
    let ended = |walking: &Option<Walked>| -> std::result::Result<(), String> {
        match walking {
            Some(w) if w.next != w.rows => Err(format!(
                "row group {} holds {} rows, its entries name rows 0..{}: rows {}.. are in no entry, and no read answers them",
                w.group, w.rows, w.next, w.next
            )),
            _ => Ok(()),
        }
    };
    let mut walking: Option<Walked> = None;
    for (index, entry) in file.groups.iter().enumerate() {
        let physical = entry.physical(index);
        let row = entry.slice.map_or(0, |s| s.row);
        if walking.as_ref().is_none_or(|w| w.group != physical) {
            ended(&walking)?;
            let batch = open
                .whole_group(file.name, file, index)
                .map_err(Said::Read)?;
            walking = Some(columns(&batch, physical)?);
        }
        let Some(w) = walking.as_mut() else {
            continue;
        };
        let shown = || {
            format!(
                "entry {index} (track {}, rows {row}..{} of row group {physical})",
                entry.track.join("/"),
                row + entry.rows
            )
        };
        if row != w.next {
            return Err(Said::Damage(format!(
                "{} starts at row {row}, where the entry before it ended at row {}",
                shown(),
                w.next
            )));
        }
        let end = row.saturating_add(entry.rows);
        if end > w.rows {
            return Err(Said::Damage(format!(
                "{} lies past the {} rows of its row group",
                shown(),
                w.rows
            )));
        }
        let span = row as usize..end as usize;
        if entry.track.len() != w.labels.len() {
            return Err(Said::Damage(format!(
                "{} names {} labels, the stream's tracks have {}",
                shown(),
                entry.track.len(),
                w.labels.len()
            )));
        }
        for (k, labels) in w.labels.iter().enumerate() {
            let want = entry.track.get(k).map(String::as_str);
            if let Some(r) = span
                .clone()
                .find(|&r| labels.is_null(r) || Some(labels.value(r)) != want)
            {
                return Err(Said::Damage(format!(
                    "{}: its row {r} holds {} {:?}, not {:?}",
                    shown(),
                    decl.track[k],
                    labels.is_valid(r).then(|| labels.value(r)),
                    want.unwrap_or_default()
                )));
            }
        }
        let said = [Some(entry.position), Some(entry.seq), entry.axis];
        for (c, values) in w.ranges.iter().enumerate() {
            let held = span.clone().fold(None, |range: Option<[u64; 2]>, r| {
                let v = values.value(r);
                Some(range.map_or([v, v], |[lo, hi]| [lo.min(v), hi.max(v)]))
            });
            if values.null_count() > 0 && span.clone().any(|r| values.is_null(r)) || held != said[c]
            {
                let name = [POSITION_COLUMN, SEQ_COLUMN]
                    .into_iter()
                    .chain(decl.axis.as_deref())
                    .nth(c)
                    .unwrap_or_default();
                return Err(Said::Damage(format!(
                    "{}: its {name} spans {held:?}, the entry says {:?}",
                    shown(),
                    said[c]
                )));
            }
        }
        w.next = end;
    }
    ended(&walking)?;
    // A row group after the last one an entry names would be read by no one.
    let named = file.row_groups().len();
    let listed = open
        .footer_row_groups(file.name, file)
        .map_err(Said::Read)?;
    if listed != named {
        return Err(Said::Damage(format!(
            "its footer lists {listed} row groups, its entries name {named}: the rows of the others are in no entry, and no read answers them"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    type Failed = Box<dyn std::error::Error>;

    /// A data file's entries are checked against its rows: a true manifest agrees, and one
    /// that lies (a row left in no entry, a track's label swapped, a `_position`, `_seq` or
    /// axis range off by one, an entry starting elsewhere, a row group no entry names) is
    /// named, entry and row, as damage.
    #[test]
    fn entries_that_do_not_hold_their_rows_are_named() -> Result<(), Failed> {
        let dir = tempfile::tempdir()?;
        let (schema, mut archive) = crate::archive::engine::testing::one_label_stream(dir.path())?;
        let tracks = ["a", "b", "a", "c", "b", "a"];
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(tracks.to_vec())),
                Arc::new(UInt64Array::from(vec![5, 7, 6, 1, 9, 8])),
            ],
        )?;
        archive.stage_batch("s", &batch, &[1, 2, 3, 4, 5, 6])?;
        archive.seal_all()?;
        let stream = &archive.commit.state().streams["s"];
        let file = &stream.files[0];
        assert_eq!(file.groups.len(), 3, "one slice per track");
        if let Err(e) = entries_agree(&archive.store, stream, file) {
            panic!("{}", e.what);
        }
        assert!(archive.verify(|_, _| {}).is_empty());
        let lying = |edit: &dyn Fn(&mut Vec<crate::archive::format::manifest::GroupEntry>)| {
            let mut file = file.clone();
            let mut groups = file.groups.as_ref().clone();
            edit(&mut groups);
            file.groups = Arc::new(groups);
            entries_agree(&archive.store, stream, &file)
                .expect_err("a lying entry")
                .what
        };
        // A row group holding more rows than its entries name is refused by its decode.
        let short = lying(&|g| g[2].rows -= 1);
        assert!(short.contains("6 rows decoded, 5 recorded"), "{short}");
        let swapped = lying(&|g| g[0].track = g[1].track.clone());
        assert!(
            swapped.contains("entry 0 (track b") && swapped.contains("holds t Some(\"a\")"),
            "{swapped}"
        );
        let position = lying(&|g| g[1].position[1] += 1);
        assert!(
            position.contains("entry 1") && position.contains("_position spans"),
            "{position}"
        );
        let seq = lying(&|g| g[0].seq[0] += 1);
        assert!(seq.contains("_seq spans"), "{seq}");
        let axis = lying(&|g| g[2].axis = Some([1, 2]));
        assert!(axis.contains("its x spans Some([1, 1])"), "{axis}");
        let moved = lying(&|g| {
            if let Some(s) = g[1].slice.as_mut() {
                s.row += 1;
            }
        });
        assert!(
            moved.contains("starts at row 4, where the entry before it ended at row 3"),
            "{moved}"
        );
        let more_labels = lying(&|g| g[0].track = vec!["a".to_owned(), "x".to_owned()].into());
        assert!(more_labels.contains("names 2 labels"), "{more_labels}");
        Ok(())
    }

    /// Tracks labelled by integers are compared as staging renders them (their text), and a
    /// file of several row groups whose last one no entry names is damage: its rows would
    /// be read by no one.
    #[test]
    fn integer_labels_agree_and_a_row_group_named_by_no_entry_is_found() -> Result<(), Failed> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("sensor", DataType::Int32, false),
            Field::new("x", DataType::UInt64, false),
        ]));
        let spec = crate::archive::StreamSpec::dynamic(
            "s",
            schema.clone(),
            vec!["sensor".into()],
            Some("x".into()),
        )?;
        let dir = tempfile::tempdir()?;
        let compaction = crate::archive::plan::retention::Compaction {
            group_rows: 2,
            ..Default::default()
        };
        let mut archive = Archive::open(
            dir.path(),
            crate::archive::Config::new()
                .stream(spec)
                .compaction(compaction),
        )?;
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(vec![7, 42, 7, 42, 7, -3])),
                Arc::new(UInt64Array::from(vec![1, 1, 2, 2, 3, 9])),
            ],
        )?;
        archive.stage_batch("s", &batch, &[1, 2, 3, 4, 5, 6])?;
        archive.seal_all()?;
        let stream = &archive.commit.state().streams["s"];
        let file = &stream.files[0];
        let groups = file.row_groups().len();
        assert!(groups >= 3, "{groups} row groups of at most 2 rows");
        if let Err(e) = entries_agree(&archive.store, stream, file) {
            panic!("{}", e.what);
        }
        assert!(archive.verify(|_, _| {}).is_empty());
        let mut cut = file.clone();
        let last = groups - 1;
        cut.groups = Arc::new(
            file.groups
                .iter()
                .enumerate()
                .filter(|(i, g)| g.physical(*i) != last)
                .map(|(_, g)| g.clone())
                .collect(),
        );
        let missed = entries_agree(&archive.store, stream, &cut)
            .expect_err("a row group no entry names")
            .what;
        assert!(
            missed.contains(&format!(
                "its footer lists {groups} row groups, its entries name {last}"
            )),
            "{missed}"
        );
        Ok(())
    }
}
