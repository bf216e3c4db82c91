//! The manifest's records: what a barrier, a declaration and a snapshot say, as JSON.
//!
//! Field order and names here are the on-disk format (`docs/format.md`); the golden test in
//! `tests/format_golden.rs` locks them.

use crate::archive::levels::Ladder;
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
    /// Live level files in barrier order; row group k of each holds level k. Absent for a
    /// stream without levels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<SegmentFile>,
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
    /// The level partials written in the same commit: one file whose row group k holds
    /// level k. Absent for a stream without levels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<SegmentFile>,
}

/// A committed data file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SegmentFile {
    /// The file's name number (unique across the archive, never reused).
    pub name: u64,
    /// Path relative to the archive root, `/`-separated.
    pub path: String,
    /// File length in bytes.
    pub bytes: u64,
    /// The barrier that wrote it.
    pub barrier: u64,
    /// When that barrier was sealed, ns since the Unix epoch.
    pub sealed_at_ns: u64,
    /// The footer region (from the end of the last row group to the end of the file), whose
    /// digest also covers the leading magic `PAR1`.
    pub footer: Span,
    /// Row groups in file order; all of one track are adjacent, tracks in key order.
    pub groups: Vec<GroupEntry>,
}

/// A row group of one track.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupEntry {
    /// The track's labels, outermost first.
    pub track: Vec<String>,
    /// Rows in the group.
    pub rows: u64,
    /// Lowest and highest `_position`.
    pub position: [u64; 2],
    /// Lowest and highest axis value, for an axial stream.
    pub axis: Option<[u64; 2]>,
    /// First and last `_seq`.
    pub seq: [u64; 2],
    /// The group's bytes.
    pub span: Span,
}

/// A byte range of a file and the digest of its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Span {
    /// First byte.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// CRC-32C bound to the file and group identity (see `docs/format.md`).
    pub crc32c: u32,
}
