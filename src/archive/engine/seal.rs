//! Staging rows in memory and the barrier that makes them durable: one file per stream,
//! its level partials, one manifest record.

use super::stage::Staged;
use super::{selected_in, stage, Archive, PARALLEL_SEAL_ROWS};
use crate::archive::error::{ArchiveError, Result};
use crate::archive::format::levels;
use crate::archive::format::manifest::{
    packed_format, Barrier, BarrierStream, Record, SegmentFile, StreamState,
};
use crate::archive::format::spec::{stored_schema, StreamSpec};
use crate::archive::format::{physical, segment};
use crate::archive::io::durable;
use crate::archive::io::faults::FaultPoint;
use crate::archive::layout::data_file_name;
use crate::archive::layout::{STREAMS_DIR, TMP_DIR};
use crate::contract::Position;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use serde::Serialize;
use std::path::PathBuf;

/// What one barrier made durable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BarrierReport {
    /// The barrier's number.
    pub barrier: u64,
    /// Per stream written: the position it is durable through and the rows written.
    pub streams: Vec<SealedStream>,
}

/// One stream's part of a barrier.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SealedStream {
    /// The stream id.
    pub stream: String,
    /// The position through which it is durable.
    pub watermark: Position,
    /// Rows the barrier wrote for it.
    pub rows: u64,
    /// Tracks it wrote.
    pub tracks: usize,
    /// The file, relative to the root.
    pub file: String,
}

impl Archive {
    /// Stages a batch of rows (the stream's own columns, in declared order) published at
    /// `positions`. Touches no file. All or nothing: an invalid row stages none of them.
    pub fn stage_batch(
        &mut self,
        stream: &str,
        batch: &RecordBatch,
        positions: &[u64],
    ) -> Result<usize> {
        // A stream whose tracks are not all known (a row group that could not be read) takes
        // no rows: where they stand could not be checked.
        self.commit.state_known(stream)?;
        // Field by field, so the staged map can be borrowed mutably beside them.
        let (selected, durable) = selected_in(&self.selected, self.commit.state(), stream)?;
        let staged = self.staged.entry(stream.to_owned()).or_default();
        let n = match stage::stage(
            &durable.decl,
            &selected.full_schema,
            durable,
            staged,
            batch,
            positions,
        ) {
            Ok(n) => n,
            // Staging that broke its own invariants cannot be trusted to serve or seal what it
            // holds: the handle refuses both until a reopen.
            Err(e @ ArchiveError::Internal(_)) => return Err(self.poison(e)),
            Err(e) => return Err(e),
        };
        if let Some(&p) = positions.last() {
            self.cursor = self.cursor.max(Position(p));
        }
        Ok(n)
    }

    /// A dry run of staging for `stream`: checks deliveries exactly as [`Archive::stage_batch`]
    /// would (against what is durable and what the dry run has seen), keeping no rows. Used
    /// to refuse a bad input file before any of it is staged or sealed.
    pub fn validator(&self, stream: &str) -> Result<Validator> {
        let (selected, durable) = self.selected_stream(stream)?;
        Ok(Validator {
            full_schema: selected.full_schema.clone(),
            durable: durable.clone(),
            staged: Staged::default(),
            keep: None,
        })
    }

    /// Takes the rows a keeping validator ([`Validator::keeping`]) checked as this handle's
    /// staged rows of its stream, without staging them again. Answers how many it took: none
    /// (and the validator is left as it was, its rows to be staged the usual way) unless this
    /// handle has nothing staged for the stream and the stream stands where the validator
    /// checked against (the same declaration, watermark, next `_seq`, live files and tracks:
    /// nothing was committed for it since).
    pub fn adopt(&mut self, validator: &mut Validator) -> Result<usize> {
        let rows = validator.kept_rows();
        let id = validator.durable.decl.id.clone();
        if rows == 0 || self.staged.get(&id).is_some_and(|s| !s.is_empty()) {
            return Ok(0);
        }
        self.commit.state_known(&id)?;
        let (selected, durable) = self.selected_stream(&id)?;
        let checked = &validator.durable;
        let names = |s: &StreamState| -> Vec<u64> {
            s.files.iter().chain(&s.levels).map(|f| f.name).collect()
        };
        let same = selected.full_schema == validator.full_schema
            && durable.decl == checked.decl
            && durable.watermark == checked.watermark
            && durable.next_seq == checked.next_seq
            && durable.tracks.len() == checked.tracks.len()
            && names(durable) == names(checked);
        if !same {
            return Ok(0);
        }
        let staged = std::mem::take(&mut validator.staged);
        validator.keep = None;
        if let Some(p) = staged.last_position {
            self.cursor = self.cursor.max(Position(p));
        }
        self.staged.insert(id, staged);
        Ok(rows)
    }

    /// Rows staged and not yet sealed.
    pub fn staged_rows(&self) -> usize {
        self.staged.values().map(|s| s.rows).sum()
    }

    /// The position through which `stream` is durable (the last recorded barrier's).
    pub fn watermark(&self, stream: &str) -> Position {
        self.commit
            .state()
            .streams
            .get(stream)
            .map_or(Position::ORIGIN, |s| s.watermark)
    }

    /// One barrier for everything staged, across all streams: per stream one Parquet file,
    /// its row groups packing the tracks in key order (each track's rows a slice); each written under `.tmp/`, synced, renamed
    /// into place, the directory synced; then one manifest record, synced. With nothing
    /// staged it does no I/O and answers `None`.
    ///
    /// A failed write or sync poisons the archive: no retry, no further barrier until it is
    /// reopened and recovery decides what is durable. Under a lag bound
    /// ([`Config::max_lag`](crate::archive::Config::max_lag)) the barrier then waits for the
    /// replica, and answers [`ArchiveError::Replica`] (not poisoning: the barrier is durable)
    /// when the bucket does not take it in time.
    pub fn seal_all(&mut self) -> Result<Option<BarrierReport>> {
        self.commit.writable("seal")?;
        if self.staged.values().all(Staged::is_empty) {
            return Ok(None);
        }
        match self.write_barrier() {
            Ok(report) => {
                self.wait_for_replica()?;
                Ok(Some(report))
            }
            Err(e) => {
                self.staged.clear();
                Err(self.poison(e))
            }
        }
    }

    pub(super) fn write_barrier(&mut self) -> Result<BarrierReport> {
        let barrier_no = self.commit.state().barriers + 1;
        let sealed_at_ns = self.config.clock.now_ns();
        let tmp = self.root.join(TMP_DIR);
        let mut written: Vec<(PathBuf, PathBuf)> = Vec::new();
        let mut streams = Vec::new();
        let mut report = Vec::new();
        let mut next_name = self.commit.next_name();
        let staged = std::mem::take(&mut self.staged);
        // Each stream's staging keeps its track slots for the next barrier once this one is
        // committed (a failed barrier poisons the handle and drops them).
        let mut kept = Vec::with_capacity(staged.len());
        for (id, mut staged) in staged {
            if staged.is_empty() {
                kept.push((id, staged));
                continue;
            }
            let selected = &self.selected[&id];
            let decl = &self.commit.state().streams[&id].decl;
            let drained = staged
                .drain(&selected.full_schema, &decl.track)
                .map_err(|e| ArchiveError::Encode {
                    stream: id.clone(),
                    message: e.to_string(),
                })?;
            let (tracks, watermark, next_seq) =
                (&drained.tracks, drained.watermark, drained.next_seq);
            let mut place = |relative_dir: String, bytes: &[u8], name: u64| -> Result<String> {
                let file_name = data_file_name(name);
                let staged_path = tmp.join(&file_name);
                durable::write_synced(&self.disk, &staged_path, bytes)?;
                let dir = self.root.join(&relative_dir);
                durable::create_dir(&self.disk, &dir)?;
                written.push((staged_path, dir.join(&file_name)));
                Ok(format!("{relative_dir}/{file_name}"))
            };
            let segment_file =
                |name: u64, path: String, bytes: &[u8], footer, groups, format| SegmentFile {
                    name,
                    path,
                    bytes: bytes.len() as u64,
                    barrier: barrier_no,
                    sealed_at_ns,
                    footer,
                    groups: std::sync::Arc::new(groups),
                    cold: None,
                    run: None,
                    format: Some(format),
                    first_level: None,
                    elided: None,
                };
            // The data file and the level partials these rows make (in the same commit) encode
            // at once, on two cores; the level file, when there is one, is named right after.
            let name = next_name;
            // Row groups of at most the configured rows: a track's rows of one barrier may
            // span several (the level partials are folded per track, whole).
            let cap = self.config.compaction.group_rows;
            let split: Vec<segment::TrackRows>;
            let groups: &[segment::TrackRows] = if tracks.iter().all(|t| t.batch.num_rows() <= cap)
            {
                tracks
            } else {
                split = tracks
                    .iter()
                    .flat_map(|t| segment::bounded(&t.labels, &t.batch, cap, decl.axis.as_deref()))
                    .collect();
                &split
            };
            let tracks_written = tracks.len();
            // One packed file: row groups of at most `cap` rows, consecutive tracks sharing
            // one, each track's rows a slice of it (format version 6).
            let choice = stored_levels(&self.commit.state().streams[&id], tracks);
            let rows: usize = tracks.iter().map(|t| t.batch.num_rows()).sum();
            let two_cores = rows >= PARALLEL_SEAL_ROWS;
            let partials_due = !choice.deferred && levels::summarised(decl);
            // Both cores: the data file's columns on two threads, beside the level partials
            // when the barrier computes them (they take a fraction of the data file's time
            // since levels are stored from one cell per 64 rows up, and the core they leave is
            // the data file's).
            let cores = if two_cores { 2 } else { 1 };
            let data =
                || segment::encode_packed(&id, &selected.full_schema, name, groups, cap, cores);
            let partials = || {
                if !partials_due {
                    return Ok(None);
                }
                levels::barrier_partials(decl, tracks, name + 1, choice.first)
            };
            let (data, partials) = if two_cores && partials_due {
                std::thread::scope(|scope| {
                    let partials = scope.spawn(partials);
                    let data = data();
                    let partials = partials.join().unwrap_or_else(|_| {
                        Err(ArchiveError::Internal(format!(
                            "stream {id:?}: encoding the level partials panicked"
                        )))
                    });
                    (data, partials)
                })
            } else {
                (data(), partials())
            };
            let ((bytes, footer, groups), partials) = (data?, partials?);
            next_name += 1;
            let path = place(format!("{STREAMS_DIR}/{id}/rows"), &bytes, name)?;
            let rows: u64 = groups.iter().map(|g| g.rows).sum();
            report.push(SealedStream {
                stream: id.clone(),
                watermark: Position(watermark),
                rows,
                tracks: tracks_written,
                file: path.clone(),
            });
            let format = packed_format(rows, groups.len() as u64, physical::PACKED_FILE_VERSION);
            let file = segment_file(name, path, &bytes, footer, groups, format);
            let mut level_file = None;
            if let Some(partials) = partials {
                let (bytes, footer, groups) = partials.encoded;
                let name = next_name;
                next_name += 1;
                let path = place(format!("{STREAMS_DIR}/{id}/levels"), &bytes, name)?;
                let mut file =
                    segment_file(name, path, &bytes, footer, groups, physical::FILE_VERSION);
                file.first_level = partials.first_level;
                level_file = Some(file);
            }
            streams.push(BarrierStream {
                stream: id.clone(),
                watermark,
                next_seq,
                file,
                levels: level_file,
                levels_from: choice.decided,
                levels_deferred: choice.deferred,
            });
            kept.push((id, staged));
        }
        // Each file is synced; `.tmp/`'s own entries need no sync (whatever a crash leaves
        // there is quarantined), only the directories the files are renamed into.
        self.disk.reached(FaultPoint::AfterDataWrite);
        let mut dirs = std::collections::BTreeSet::new();
        for (from, to) in &written {
            durable::rename(&self.disk, from, to)?;
            if let Some(parent) = to.parent() {
                dirs.insert(parent.to_path_buf());
            }
        }
        for dir in &dirs {
            durable::sync_dir(&self.disk, dir)?;
        }
        self.disk.reached(FaultPoint::AfterDataRename);
        let record = Record::Barrier(Barrier {
            barrier: barrier_no,
            sealed_at_ns,
            next_name,
            streams,
        });
        // The record carries the name counter past every name this barrier used.
        self.commit(record)?;
        self.staged.extend(kept);
        tracing::debug!(
            barrier = barrier_no,
            streams = report.len(),
            "barrier committed"
        );
        Ok(BarrierReport {
            barrier: barrier_no,
            streams: report,
        })
    }

    /// A clean stop: closes the last barrier.
    pub fn flush_all(&mut self) -> Result<Option<BarrierReport>> {
        self.seal_all()
    }
}

/// How a barrier of `tracks` summarises `stream`'s rows: the first level it stores, the
/// first stored level it decides (when the stream had none recorded and these rows are enough
/// to judge; each track's first row counts from the last axis value the stream stores for
/// it), and whether it defers its partials (format version 8: the stream already has
/// deferred rows, or the barrier holds at least [`levels::DECIDE_GAPS`] rows whose cells
/// would hold fewer than [`levels::MIN_ROWS_PER_CELL`] rows each on average), under
/// [`levels::LEVEL_RULE`]. Seal and restore judge the same way, so a restored barrier is the
/// barrier that was written.
pub(crate) fn stored_levels(stream: &StreamState, tracks: &[segment::TrackRows]) -> LevelChoice {
    stored_levels_under(stream, tracks, levels::LEVEL_RULE)
}

/// [`stored_levels`] judged under `rule` (repair judges a lost barrier under each rule a
/// build has used).
pub(crate) fn stored_levels_under(
    stream: &StreamState,
    tracks: &[segment::TrackRows],
    rule: levels::LevelRule,
) -> LevelChoice {
    let decided = match (stream.levels_from, stream.decl.ladder) {
        (None, Some(ladder)) => {
            let names: Vec<&[String]> = tracks.iter().map(|t| &t.labels[..]).collect();
            let previous: Vec<Option<u64>> = stream
                .cataloged(&names)
                .into_iter()
                .map(|t| t.and_then(|t| t.last_axis))
                .collect();
            levels::first_worth_storing(&ladder, tracks, &previous, rule)
        }
        _ => None,
    };
    let first = stream.levels_from.or(decided).map_or(0, usize::from);
    let deferred = match stream.decl.ladder {
        Some(ladder) if levels::summarised(&stream.decl) => {
            let rows: u64 = tracks.iter().map(|t| t.batch.num_rows() as u64).sum();
            stream.levels_deferred_from.is_some()
                || (rows >= levels::DECIDE_GAPS
                    && !levels::worth_summarising(
                        &ladder,
                        first,
                        rule.summarise_rows,
                        tracks
                            .iter()
                            .filter_map(|t| t.axis.map(|axis| (t.batch.num_rows() as u64, axis))),
                    ))
        }
        _ => false,
    };
    LevelChoice {
        first,
        decided,
        deferred,
    }
}

/// What [`stored_levels`] judged for one barrier of one stream.
pub(crate) struct LevelChoice {
    /// The first level its partials hold.
    pub first: usize,
    /// The first stored level it decides, when it decides one.
    pub decided: Option<u8>,
    /// It writes no partials: its rows wait for a summary (format version 8).
    pub deferred: bool,
}

/// Checks deliveries without keeping them; see [`Archive::validator`]. A validator told to
/// keep them ([`Validator::keeping`]) holds the rows it checked, staged, and
/// [`Archive::adopt`] takes them without staging them again.
pub struct Validator {
    full_schema: SchemaRef,
    durable: StreamState,
    staged: Staged,
    /// Rows it may keep; `None` once it holds none (never kept, or past the limit).
    keep: Option<usize>,
}

impl Validator {
    /// A dry run for a stream no archive records yet: checks deliveries against the
    /// declaration alone, without opening (or creating) anything.
    pub fn for_new_stream(spec: &StreamSpec) -> Result<Validator> {
        let decl = spec.decl()?;
        let full_schema =
            stored_schema(&decl).map_err(|m| ArchiveError::declaration(&decl.id, m))?;
        Ok(Validator {
            full_schema,
            durable: StreamState::new(decl),
            staged: Staged::default(),
            keep: None,
        })
    }

    /// Keeps the rows it checks, staged, while they are at most `rows` in all: a bulk input of
    /// one barrier is then staged once, not checked and staged again ([`Archive::adopt`]).
    /// Past `rows` it lets go of them all and checks on as before. Only a validator that has
    /// checked nothing yet keeps rows (one that has let rows go would hand over tracks that
    /// count them).
    pub fn keeping(mut self, rows: usize) -> Validator {
        if self.staged.untouched() {
            self.keep = Some(rows);
        }
        self
    }

    /// Lets go of the rows it kept (the caller keeps them elsewhere, or stages them again).
    pub fn stop_keeping(&mut self) {
        self.keep = None;
        self.staged.forget_rows();
    }

    /// Rows it holds, checked and staged, for [`Archive::adopt`].
    pub fn kept_rows(&self) -> usize {
        match self.keep {
            Some(_) => self.staged.rows,
            None => 0,
        }
    }

    /// Checks one delivery as staging would; answers its row count.
    pub fn check(&mut self, batch: &RecordBatch, positions: &[u64]) -> Result<usize> {
        let n = stage::stage(
            &self.durable.decl,
            &self.full_schema,
            &self.durable,
            &mut self.staged,
            batch,
            positions,
        )?;
        if self.keep.is_none_or(|limit| self.staged.rows > limit) {
            self.stop_keeping();
        }
        Ok(n)
    }
}
