//! The manifest's records: what a barrier, a declaration and a snapshot say, as JSON.
//!
//! Field order and names here are the on-disk format (`docs/format.md`); the golden test in
//! `tests/format_golden.rs` locks them.

pub use super::columns::{
    packed_format, Elided, GroupEntry, LevelRun, SegmentFile, Slice, Span, COLUMNAR_FORMAT,
    ROWS_FORMAT,
};
use crate::archive::format::levels::Ladder;
use serde::{Deserialize, Serialize};

/// One manifest record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case", deny_unknown_fields)]
pub enum Record {
    /// The first record of every generation: the whole trusted state.
    Snapshot(Snapshot),
    /// A stream's declaration, recorded the first time it is selected.
    Declare(StreamDecl),
    /// One barrier: every stream it wrote, committed together.
    Barrier(Barrier),
    /// Retirement of one stream's rows or levels: floors move, wholly retired files leave the
    /// live set. Format version 2.
    Retire(Retire),
    /// A compaction swap of one stream: files added and removed together. Format version 2.
    Compact(Compact),
    /// Data files of one stream moved to the cold tier: each is now an object. Format
    /// version 3.
    Offload(Offload),
}

impl Record {
    /// Decodes a record's JSON payload. Writers put the tag first (`{"record":"barrier",…`),
    /// so the rest decodes straight into the kind's own struct, skipping the buffered pass
    /// serde needs for an internally tagged enum (most of the time an open spends on a large
    /// snapshot). Anything else takes the general path, with the same answer.
    pub fn decode(payload: &[u8]) -> serde_json::Result<Record> {
        // A record whose entries are paged (format version 10) is its JSON, a newline, and
        // the pages' JSON (compact JSON holds no newline of its own).
        let (json, pages) = match payload.iter().position(|b| *b == b'\n') {
            Some(at) => (&payload[..at], Some(&payload[at + 1..])),
            None => (payload, None),
        };
        let mut record = Self::decode_json(json)?;
        let mut paged = false;
        for file in record.files_mut() {
            paged |= file.elided.as_ref().is_some_and(|e| !e.is_rows_form());
            super::columns::read_pages(file, pages)
                .map_err(|why| serde::de::Error::custom(format!("file {}: {why}", file.path)))?;
        }
        if pages.is_some() && !paged {
            return Err(serde::de::Error::custom(
                "the record carries pages, and no file entry of it is paged",
            ));
        }
        Ok(record)
    }

    /// Every file entry the record names (data and level files).
    pub fn files(&self) -> Box<dyn Iterator<Item = &SegmentFile> + '_> {
        match self {
            Record::Snapshot(s) => Box::new(
                s.streams
                    .iter()
                    .flat_map(|s| s.files.iter().chain(s.levels.iter())),
            ),
            Record::Barrier(b) => Box::new(
                b.streams
                    .iter()
                    .flat_map(|s| std::iter::once(&s.file).chain(s.levels.iter())),
            ),
            Record::Compact(c) => Box::new(c.added.iter().chain(c.added_levels.iter())),
            _ => Box::new(std::iter::empty()),
        }
    }

    /// Each data file entry the record names, beside the id of its stream: the files whose
    /// slices a replay may read from the rows (format version 11).
    pub fn data_files_mut(&mut self) -> Vec<(&str, &mut SegmentFile)> {
        match self {
            Record::Snapshot(s) => s
                .streams
                .iter_mut()
                .flat_map(|s| {
                    let id = s.decl.id.as_str();
                    s.files.iter_mut().map(move |f| (id, f))
                })
                .collect(),
            Record::Barrier(b) => b
                .streams
                .iter_mut()
                .map(|s| (s.stream.as_str(), &mut s.file))
                .collect(),
            Record::Compact(c) => {
                let id = c.stream.as_str();
                c.added.iter_mut().map(|f| (id, f)).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Every file entry the record names (data and level files).
    fn files_mut(&mut self) -> Box<dyn Iterator<Item = &mut SegmentFile> + '_> {
        match self {
            Record::Snapshot(s) => Box::new(
                s.streams
                    .iter_mut()
                    .flat_map(|s| s.files.iter_mut().chain(s.levels.iter_mut())),
            ),
            Record::Barrier(b) => Box::new(
                b.streams
                    .iter_mut()
                    .flat_map(|s| std::iter::once(&mut s.file).chain(s.levels.iter_mut())),
            ),
            Record::Compact(c) => Box::new(c.added.iter_mut().chain(c.added_levels.iter_mut())),
            _ => Box::new(std::iter::empty()),
        }
    }

    /// Decodes a record's JSON (without its pages).
    fn decode_json(payload: &[u8]) -> serde_json::Result<Record> {
        fn kind<T: serde::de::DeserializeOwned>(
            payload: &[u8],
            tag: &str,
        ) -> Option<serde_json::Result<T>> {
            let prefix = format!("{{\"record\":\"{tag}\",");
            let rest = payload.strip_prefix(prefix.as_bytes())?;
            let mut object = Vec::with_capacity(rest.len() + 1);
            object.push(b'{');
            object.extend_from_slice(rest);
            Some(serde_json::from_slice(&object))
        }
        if let Some(r) = kind(payload, "snapshot") {
            return r.map(Record::Snapshot);
        }
        if let Some(r) = kind(payload, "barrier") {
            return r.map(Record::Barrier);
        }
        if let Some(r) = kind(payload, "compact") {
            return r.map(Record::Compact);
        }
        serde_json::from_slice(payload)
    }

    /// The frame version a record needs: 1 for everything version 1 knew, 2 for the
    /// lifecycle records (and a snapshot carrying track floors), so a version-1 reader
    /// refuses what it cannot understand instead of misreading it.
    pub fn version(&self) -> u16 {
        let table = |f: &SegmentFile| f.run.is_some();
        let signed = |f: &SegmentFile| f.is_signed();
        let packed = |f: &SegmentFile| f.is_packed();
        let columnar = |f: &SegmentFile| f.format.is_some_and(|v| v >= COLUMNAR_FORMAT);
        if self.files().any(|f| f.format == Some(ROWS_FORMAT)) {
            return 11;
        }
        let names_columnar = match self {
            Record::Barrier(b) => b
                .streams
                .iter()
                .any(|s| columnar(&s.file) || s.levels.as_ref().is_some_and(columnar)),
            Record::Compact(c) => c.added.iter().chain(&c.added_levels).any(columnar),
            Record::Snapshot(s) => s
                .streams
                .iter()
                .flat_map(|s| s.files.iter().chain(&s.levels))
                .any(columnar),
            _ => false,
        };
        if names_columnar {
            return 9;
        }
        match self {
            Record::Barrier(b) if b.streams.iter().any(|s| s.levels_deferred) => 8,
            Record::Compact(c) if c.levels_summary.is_some() => 8,
            Record::Snapshot(s) if s.streams.iter().any(|s| s.levels_deferred_from.is_some()) => 8,
            Record::Compact(c) if c.added.iter().any(SegmentFile::holds_several_tracks) => 7,
            Record::Barrier(b)
                if b.streams
                    .iter()
                    .any(|s| s.file.is_packed() || s.levels.as_ref().is_some_and(packed)) =>
            {
                6
            }
            Record::Barrier(b) if b.streams.iter().any(|s| s.levels_from.is_some()) => 6,
            Record::Compact(c)
                if c.added
                    .iter()
                    .chain(&c.added_levels)
                    .any(|f| packed(f) || f.first_level.is_some()) =>
            {
                6
            }
            Record::Snapshot(s)
                if s.streams.iter().any(|s| {
                    s.levels_from.is_some() || s.levels.iter().any(|f| f.first_level.is_some())
                }) =>
            {
                6
            }
            Record::Snapshot(s)
                if s.streams
                    .iter()
                    .flat_map(|s| s.files.iter().chain(&s.levels))
                    .any(packed) =>
            {
                6
            }
            Record::Barrier(b)
                if b.streams
                    .iter()
                    .any(|s| s.file.is_signed() || s.levels.as_ref().is_some_and(signed)) =>
            {
                5
            }
            Record::Compact(c) if c.added.iter().chain(&c.added_levels).any(signed) => 5,
            Record::Snapshot(s)
                if s.streams
                    .iter()
                    .flat_map(|s| s.files.iter().chain(&s.levels))
                    .any(signed) =>
            {
                5
            }
            Record::Compact(c) if c.added_levels.iter().any(table) => 4,
            Record::Snapshot(s) if s.streams.iter().flat_map(|s| &s.levels).any(table) => 4,
            Record::Offload(_) => 3,
            Record::Snapshot(s)
                if s.streams
                    .iter()
                    .flat_map(|s| s.files.iter().chain(&s.levels))
                    .any(|f| f.cold.is_some()) =>
            {
                3
            }
            Record::Retire(_) | Record::Compact(_) => 2,
            Record::Snapshot(s) if s.streams.iter().any(|s| !s.tracks.is_empty()) => 2,
            _ => 1,
        }
    }
}

/// One stream's retirement: the floors it moves and the files it takes out of the live set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retire {
    /// The stream.
    pub stream: String,
    /// When the retirement was decided, ns since the Unix epoch (the archive's clock).
    pub retired_at_ns: u64,
    /// Why: `sweep` (declared lifetimes), `idle` (a track's declared idle time) or
    /// `explicit` (`retire_track`).
    pub reason: String,
    /// The tracks whose floors move, each to its new floors.
    pub tracks: Vec<TrackRetire>,
    /// Names of live files (data or level) every row or cell of which is now beneath a floor:
    /// they leave the live set with this record and are deleted after it is synced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<u64>,
}

/// One track's new floors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrackRetire {
    /// The track's labels.
    pub track: Vec<String>,
    /// The new raw floor, when it moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<RawFloor>,
    /// New level floors by level index; `None` where a level's floor does not move.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<Option<LevelFloor>>,
    /// The whole track is retired: nothing of it is served any more.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub whole: bool,
}

/// A track's raw floor: every row beneath it is retired. Rows are retired a whole row group at
/// a time, so the three coordinates are one more than the retired groups' highest values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFloor {
    /// No row beneath this position is retained.
    pub position: u64,
    /// No row beneath this axis value is retained (0 for a stream without an axis).
    pub axis: u64,
    /// No row beneath this `_seq` is retained; a row group whose last `_seq` is beneath it
    /// is retired.
    pub seq: u64,
}

/// A track's floor in one level: every cell starting beneath `axis` is retired.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelFloor {
    /// A multiple of the level's cell width: cells beneath it are retired.
    pub axis: u64,
    /// A position no retained cell's rows lie beneath (a lower bound, taken from the level
    /// files' recorded position ranges): the floor a refusal reports.
    pub position: u64,
}

/// One compaction swap.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compact {
    /// The stream.
    pub stream: String,
    /// The next file name to claim after this record.
    pub next_name: u64,
    /// Data files written: packed files holding many tracks in key order (format version
    /// 7), or, written by versions 2-6 and under an axis-distance lifetime, one track each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<SegmentFile>,
    /// Data files replaced, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<u64>,
    /// Level files written: since format version 4, one run ([`SegmentFile::run`]): one file
    /// of every level, or level tables (at most one per level); a version-2 compaction wrote
    /// one file with every level and no `run`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added_levels: Vec<SegmentFile>,
    /// Level files replaced, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed_levels: Vec<u64>,
    /// Format version 8: this record summarises deferred rows `[from, through)` of `_seq`
    /// (`from` is the stream's first deferred `_seq`). Its one added level file holds their
    /// cells and goes to the end of the live level list; nothing is removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels_summary: Option<[u64; 2]>,
}

/// A track's lifecycle state as a snapshot carries it (only tracks with any).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrackSnapshot {
    /// The track's labels.
    pub track: Vec<String>,
    /// Its raw floor.
    pub raw: RawFloor,
    /// Its level floors by level index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<LevelFloor>,
    /// Whether the whole track is retired.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub whole: bool,
    /// The newest barrier time that wrote the track, ns.
    pub last_sealed_ns: u64,
    /// Its age marks, `[sealed_ns, axis]`: the track's rows beneath `axis` were all sealed by
    /// `sealed_ns`. (Marks of live files are derived from them again; these keep what
    /// retired files knew, for the levels' age lifetimes.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marks: Vec<[u64; 2]>,
    /// The lowest axis value the track ever stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_axis: Option<u64>,
}

/// The live state at the start of a generation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// This generation's number (also in its file name).
    pub generation: u64,
    /// The next file name to claim.
    pub next_name: u64,
    /// Barriers recorded so far, over all generations.
    pub barriers: u64,
    /// Every declared stream with its files.
    pub streams: Vec<StreamSnapshot>,
}

/// A stream as a snapshot records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamSnapshot {
    /// The declaration.
    pub decl: StreamDecl,
    /// The highest position durable.
    pub watermark: u64,
    /// The next `_seq` to assign.
    pub next_seq: u64,
    /// Live files, in barrier order.
    pub files: Vec<SegmentFile>,
    /// Live level files in publish order: barrier partials (row group k holds level k) and
    /// runs of level tables. Absent for a stream without levels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<SegmentFile>,
    /// Tracks with lifecycle state (floors, age marks, retirement). Format version 2; absent
    /// in a version-1 snapshot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tracks: Vec<TrackSnapshot>,
    /// The stream's first stored level, once a barrier decided it (format version 6; see
    /// [`BarrierStream::levels_from`]). Absent while undecided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels_from: Option<u8>,
    /// Format version 8: the first `_seq` whose rows no level file summarises (see
    /// [`BarrierStream::levels_deferred`]). Absent when the level files cover every row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels_deferred_from: Option<u64>,
}

/// A stream's declaration: its columns, track, axis and measured fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamDecl {
    /// The stream id.
    pub id: String,
    /// The row's own columns in order (without `_position` and `_seq`).
    pub columns: Vec<ColumnDecl>,
    /// The track columns, outermost first.
    pub track: Vec<String>,
    /// The axis column.
    pub axis: Option<String>,
    /// Measured fields in declared order: every numeric column but the axis and the track.
    pub measured: Vec<String>,
    /// The level ladder, for an axial stream with levels; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ladder: Option<Ladder>,
}

/// One column of a stream's rows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnDecl {
    /// Column name.
    pub name: String,
    /// Arrow data type in arrow-rs's display form (`Int64`, `Utf8`, `Float64`, ...).
    pub data_type: String,
    /// Whether nulls are allowed.
    pub nullable: bool,
}

/// One barrier's commit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Barrier {
    /// Barrier number, one more than the previous.
    pub barrier: u64,
    /// When it was sealed, nanoseconds since the Unix epoch (the archive's clock).
    pub sealed_at_ns: u64,
    /// The next file name to claim after this barrier.
    pub next_name: u64,
    /// The streams it wrote.
    pub streams: Vec<BarrierStream>,
}

/// What one barrier wrote for one stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BarrierStream {
    /// The stream id.
    pub stream: String,
    /// The position through which the stream is durable after the barrier.
    pub watermark: u64,
    /// The next `_seq` after the barrier.
    pub next_seq: u64,
    /// The file written.
    pub file: SegmentFile,
    /// The level partials written in the same commit: one file whose row groups hold one
    /// level each, from its `first_level` up. Absent for a stream without levels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<SegmentFile>,
    /// On the barrier that decides it (format version 6): the stream's first stored level.
    /// Levels beneath it hold too few rows a cell to summarise anything, so from this
    /// barrier on none is stored; reads compute them from the raw rows. Recorded once;
    /// absent on every other barrier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels_from: Option<u8>,
    /// Format version 8: the barrier wrote no level partials for rows that have measured
    /// values, because its cells would hold too few rows each to be worth their bytes. Its
    /// rows (and every later barrier's, until a `compact` record with `levels_summary`
    /// summarises them) are *deferred*: reads fold their cells from the raw rows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub levels_deferred: bool,
}

/// One stream's files moved to the cold tier.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Offload {
    /// The stream.
    pub stream: String,
    /// The files moved, each now the object at its URL.
    pub files: Vec<Offloaded>,
}

/// One file moved to the cold tier.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Offloaded {
    /// The file's name number.
    pub name: u64,
    /// The object's URL; its bytes and digests are the file's, confirmed before the record.
    pub url: String,
}
